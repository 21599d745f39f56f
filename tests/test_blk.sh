#!/bin/bash
# SPDX-License-Identifier: MIT
# rdma suite: pollcore-blk, the block target and its verifying client.
#   usage: test_blk.sh path/to/pollcore-blk uring|no-uring
#
# Everywhere: bad usage is refused with exit 2.
# On the test bed (tests/testbed.sh; in the VM rxe0 and fe80::ff:fe00:1%d0):
#  - RAM backend with 4 staging buffers (so commands wait: backpressure):
#    read, write and randrw --verify runs (4 KiB, and 16 KiB randrw) end
#    with 0 mismatches and no error; --json is one line with ordered
#    percentiles; the server counted staging waits and no failure;
#  - --bad-cmds (a server of 2 hybrid-idle workers): every invalid command
#    gets its exact status, a bad rkey and a bad address cost at most their
#    connection, good I/O works after each, and a verified client on
#    another connection meanwhile is unaffected;
#  - file backend (io_uring, when built): a randrw --verify run; then
#    durability: --phase write (generation 7, then FLUSH), the server
#    SIGKILLed and restarted on the same file, --phase check finds every
#    block of generation 7 (and --phase check --gen 8 finds none: the
#    check can fail); then a --reconnect client runs randrw --verify on
#    another region while the server is SIGKILLed and restarted on the same
#    file and port: it reconnects, its read-back passes (a write in flight at
#    the crash may or may not have landed), and the flushed region still
#    holds generation 7.
# On a host without RDMA: exit 77.
set -u

BLK=${1:?usage: test_blk.sh path/to/pollcore-blk uring|no-uring}
URING=${2:?usage: test_blk.sh path/to/pollcore-blk uring|no-uring}
. "$(dirname "$0")/testbed.sh"
ADDR=$PC_TEST_ADDR
PORT=4431
TMP=$(mktemp -d)
SRV_PID=
BG_PID=
cleanup() {
	[ -n "$BG_PID" ] && kill -KILL "$BG_PID" 2>/dev/null
	[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# --- usage (no device needed) ----------------------------------------------------------
usage_error() { pc_usage_error "$1" "$BLK" "${@:2}"; }
usage_error "missing mode"
usage_error "unknown mode 'serve'" serve
usage_error "exactly one of --ram SIZE and --file PATH" server
usage_error "exactly one of --ram SIZE and --file PATH" server --ram 1M --file /nonexistent
usage_error "--ram: 'lots' is not a size" server --ram lots
usage_error "--bs: '3000' is not a power of two" server --ram 1M --bs 3000
usage_error "unknown option or missing value: '--bogus'" server --ram 1M --bogus
usage_error "the server address is missing" client
usage_error "--rw: 'sideways' is not one of" client ::1 --rw sideways
usage_error "--iodepth: '65' is not a number from 1 to 64" client ::1 --iodepth 65
usage_error "--phase: 'later' is not write or check" client ::1 --phase later
usage_error "--size 1024 is less than one I/O" client ::1 --size 1k --bs 4k
usage_error "--time: '-1' is not a number" client ::1 --time -1
usage_error "--reconnect: '0' is not a number from 1 to 3600" client ::1 --reconnect 0
usage_error "--reconnect and --bad-cmds do not go together" client ::1 --reconnect 5 --bad-cmds
"$BLK" --help | grep -q '^usage: pollcore-blk server' || fail "--help prints no usage"
ok "usage errors: exit 2"

pc_need_device

# start_server LOG ARGS...: a server in the background, listening within 60 s.
start_server() {
	local log=$1 i
	shift
	"$BLK" server --addr "$ADDR" --port $PORT --no-numa "$@" >"$TMP/$log.out" 2>&1 &
	SRV_PID=$!
	for i in $(seq 600); do
		grep -q 'listening on' "$TMP/$log.out" && return 0
		kill -0 "$SRV_PID" 2>/dev/null || fail "the server ($*) exited before listening"
		sleep 0.1
	done
	fail "the server is not listening after 60 s"
}

# stop_server LOG: SIGTERM, exit 0 within 60 s, its counters printed.
stop_server() {
	kill -TERM "$SRV_PID"
	timeout 60 tail --pid="$SRV_PID" -f /dev/null || fail "the server still runs 60 s after SIGTERM"
	wait "$SRV_PID" || fail "the server exited non-zero after SIGTERM"
	SRV_PID=
	grep -q "worker 0: reads" "$TMP/$1.out" || fail "the server printed no counters"
}

# counter LOG NAME: the server's counter NAME, summed over its workers.
counter() {
	grep -o " $2 [0-9]*" "$TMP/$1.out" | awk '{s += $2} END {print s + 0}'
}

# client LOG ARGS...: a client run that must exit 0.
client() {
	local log=$1
	shift
	timeout 300 "$BLK" client "$ADDR" --port $PORT --no-numa "$@" >"$TMP/$log.out" \
		2>"$TMP/$log.err" || fail "client $* exited $? (log $log)"
}

# verified LOG: a human-readable run's verdict: no mismatch, some blocks checked.
verified() {
	grep -Eq '^verify +0 mismatches in [1-9][0-9]* blocks checked' "$TMP/$1.out" ||
		fail "$1: no '0 mismatches' line"
	grep -q 'read-back: [1-9][0-9]* blocks checked, 0 mismatches' "$TMP/$1.err" ||
		fail "$1: the read-back did not check every block clean"
}

# --- RAM backend --------------------------------------------------------------------------
start_server ram --ram 32M --staging 4
client ram_read --rw read --bs 4k --iodepth 16 --size 8M --time 2 --verify
verified ram_read
client ram_write --rw write --bs 4k --iodepth 32 --size 8M --time 2 --verify
verified ram_write
client ram_randrw --rw randrw --bs 4k --iodepth 32 --size 8M --time 2 --verify
verified ram_randrw
client ram_randrw16 --rw randrw --bs 16k --iodepth 8 --size 8M --time 2 --verify --json
[ "$(grep -c . "$TMP/ram_randrw16.out")" = 1 ] || fail "--json printed more than one line"
jq -e '.rw == "randrw" and .bs == 16384 and .verify and .mismatches == 0 and .errors == 0 and
	.ios > 0 and .reads > 0 and .writes > 0 and .iops > 0 and .blocks_checked > 0 and
	.lat_us.p50 > 0 and .lat_us.p50 <= .lat_us.p99 and .lat_us.p99 <= .lat_us.p999' \
	"$TMP/ram_randrw16.out" >/dev/null || fail "--json: $(cat "$TMP/ram_randrw16.out")"
grep -q '\[1s\] [0-9]* IOPS' "$TMP/ram_randrw.err" || fail "no progress line each second"
ok "RAM: $(grep '^rate' "$TMP/ram_randrw.out"), $(grep '^latency' "$TMP/ram_randrw.out")"
stop_server ram
[ "$(counter ram staging_waits)" -gt 0 ] || fail "no command waited for a staging buffer"
for c in xfer_errors io_errors bad_cmds replies_lost; do
	[ "$(counter ram $c)" = 0 ] || fail "the RAM server counted $c $(counter ram $c)"
done
ok "RAM: 4 verified runs, 0 mismatches; $(counter ram staging_waits) commands waited for" \
	"staging (at most $(counter ram max_waiting) at once), none failed"

# --- bad commands ------------------------------------------------------------------------
start_server bad --ram 16M --workers 2 --hybrid
"$BLK" client "$ADDR" --port $PORT --no-numa --rw randrw --size 4M --time 8 --verify \
	>"$TMP/bg.out" 2>"$TMP/bg.err" &
BG_PID=$!
sleep 1
client badcmds --bad-cmds --bs 4k
grep -q '^PASS: 15 invalid commands answered' "$TMP/badcmds.out" || fail "--bad-cmds did not pass"
[ "$(grep -c '^ok ' "$TMP/badcmds.out")" -ge 20 ] || fail "--bad-cmds: fewer checks than expected"
wait "$BG_PID" || fail "the verified client beside --bad-cmds failed (exit $?)"
BG_PID=
verified bg
stop_server bad
[ "$(counter bad bad_cmds)" = 15 ] || fail "the server counted $(counter bad bad_cmds) bad commands, not 15"
[ "$(counter bad xfer_errors)" -ge 2 ] || fail "the server counted no failed transfers"
grep -E "ok +READ with a bad rkey|ok +WRITE from a bad address" "$TMP/badcmds.out" | sed 's/^/    /'
ok "bad commands: each status exact; $(counter bad xfer_errors) failed transfers cost only their" \
	"connections; the client beside them verified clean"

# --- file backend (io_uring) and durability ------------------------------------------------
if [ "$URING" != uring ]; then
	echo "SKIP (part): built without liburing: no file backend to test"
	echo "PASS"
	exit 0
fi
DISK=$TMP/disk.img
truncate -s 8M "$DISK"
start_server file --file "$DISK" --hybrid
grep -q 'io_uring' "$TMP/file.out" || fail "the file server does not say io_uring"
client file_randrw --rw randrw --bs 4k --iodepth 32 --size 4M --time 2 --verify
verified file_randrw
client phase_w --phase write --rw randwrite --gen 7 --bs 8k --size 4M
grep -q 'blocks of generation 7 written .* FLUSH acknowledged' "$TMP/phase_w.out" ||
	fail "--phase write did not report the FLUSH"
kill -KILL "$SRV_PID"
wait "$SRV_PID" 2>/dev/null
SRV_PID=
[ "$(head -c 8 "$DISK")" = PBLKSTMP ] || fail "block 0 of the file holds no stamp"
PORT=$((PORT + 1))
start_server file2 --file "$DISK"
client phase_c --phase check --gen 7 --bs 4k --size 4M
grep -q '^pollcore-blk client: phase check: 0 mismatches in 1024 blocks of generation 7' \
	"$TMP/phase_c.out" || fail "the check after SIGKILL did not find all 1024 blocks"
"$BLK" client "$ADDR" --port $PORT --no-numa --phase check --gen 8 --size 1M \
	>"$TMP/phase_c8.out" 2>"$TMP/phase_c8.err" && fail "--phase check --gen 8 passed"
grep -q 'phase check: 256 mismatches in 256 blocks of generation 8' "$TMP/phase_c8.out" ||
	fail "--phase check --gen 8 did not report every block"
ok "file: $(grep -o 'file [^ ]* ([^)]*)' "$TMP/file.out" | head -n 1); verified randrw;" \
	"acknowledged writes survived SIGKILL (1024 blocks, generation 7)"

# a crash mid-write: the client reconnects to the restarted server and goes on
"$BLK" client "$ADDR" --port $PORT --no-numa --rw randrw --bs 4k --size 2M --offset 4M \
	--time 12 --verify --reconnect 60 >"$TMP/recon.out" 2>"$TMP/recon.err" &
BG_PID=$!
for _ in $(seq 600); do
	grep -q '\[2s\]' "$TMP/recon.err" && break
	sleep 0.1
done
grep -q '\[2s\]' "$TMP/recon.err" || fail "the reconnecting client made no progress"
kill -KILL "$SRV_PID"
wait "$SRV_PID" 2>/dev/null
start_server file3 --file "$DISK"
wait "$BG_PID" || fail "the reconnecting client failed across the crash (exit $?)"
BG_PID=
verified recon
grep -Eq '^reconnect +1 reconnects, [0-9]+ commands in flight' "$TMP/recon.out" ||
	fail "the client did not report exactly one reconnect: $(grep '^reconnect' "$TMP/recon.out")"
client phase_c2 --phase check --gen 7 --bs 4k --size 4M
grep -q '^pollcore-blk client: phase check: 0 mismatches in 1024 blocks of generation 7' \
	"$TMP/phase_c2.out" || fail "the flushed region changed across the second crash"
stop_server file3
[ "$(counter file3 io_errors)" = 0 ] || fail "the restarted server counted io errors"
ok "crash mid-write: the client reconnected ($(grep '^reconnect' "$TMP/recon.out" |
	cut -c11-)), read back clean; the flushed region still holds generation 7"
echo "PASS"
