#!/bin/bash
# SPDX-License-Identifier: MIT
# rdma suite: pollcore-bench short runs in every mode against its own server on
# the test bed (tests/testbed.sh: rxe0 and fe80::ff:fe00:1%d0 in the VM).
#   usage: test_bench.sh path/to/pollcore-bench
#
# Asserts the counts each run prints (--json): messages sent == received by
# the server (its own count, asked for after the run), bytes sent == bytes
# received == messages x size, nothing out of order, every operation
# completed, and for write and read that the region's bytes match. A server
# that leaves messages uncounted must make the client fail (exit 1), and
# usage errors must exit 2 naming the option. --idle hybrid gives the same
# counts, and its server sleeps. Not a speed test.
set -u
BENCH=${1:?usage: test_bench.sh path/to/pollcore-bench}
. "$(dirname "$0")/testbed.sh"
pc_need_device
ADDR=$PC_TEST_ADDR
WORK=$(mktemp -d)
SERVER=
trap '[ -n "$SERVER" ] && kill -KILL "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT
die() {
	echo "FAIL: $*" >&2
	exit 1
}
say() { echo "$(date +%T) $*"; }

# --- usage errors: exit 2, naming the option ----------------------------------------------
while IFS='|' read -r word args; do
	# shellcheck disable=SC2086 # word splitting of the argument list is wanted
	"$BENCH" $args >"$WORK/usage" 2>&1
	rc=$?
	[ "$rc" = 2 ] || die "pollcore-bench $args exited $rc, not 2: $(cat "$WORK/usage")"
	grep -q -- "$word" "$WORK/usage" || die "pollcore-bench $args does not name $word: $(cat "$WORK/usage")"
done <<EOF2
server or client|
address is missing|client
--size|client $ADDR --size 0
--mode|client $ADDR --mode fly
--count and --time|client $ADDR -n 5 -D 1
--inline|client $ADDR --inline 2000
--post-batch|client $ADDR --mode rpc --post-batch 8
--json|server --json
--idle|server --idle lazy
EOF2
say "usage errors: exit 2, naming the option"

# --- runs -----------------------------------------------------------------------------------
PORT=$((19000 + RANDOM % 1000))
serve() { # serve ARGS...: a server of its own on the next port, listening
	PORT=$((PORT + 1))
	"$BENCH" server --addr "$ADDR" --port "$PORT" --no-numa "$@" >"$WORK/server" 2>&1 &
	SERVER=$!
	for _ in $(seq 1200); do
		grep -q 'listening on' "$WORK/server" && return 0
		kill -0 "$SERVER" 2>/dev/null || die "server exited: $(cat "$WORK/server")"
		sleep 0.1
	done
	die "server is not listening after 120 s"
}
unserve() {
	kill -TERM "$SERVER"
	wait "$SERVER" || die "server exited $? after SIGTERM: $(cat "$WORK/server")"
	SERVER=
}
client() { # client OUT ARGS...: one client run, stdout in $WORK/OUT; returns its status
	local out=$1
	shift
	timeout 300 "$BENCH" client "$ADDR" --port "$PORT" --no-numa "$@" >"$WORK/$out" 2>"$WORK/$out.err"
}

# check NAME SIZE ARGS...: one short run (0.3 s, or the -n count given) whose
# JSON must agree with itself: thousands of messages under TCG, every count checked.
check() {
	local name=$1 size=$2 rc len=(-D 0.3)
	shift 2
	# a count given: it alone bounds the run (--time and --count exclude each other)
	case " $* " in *" -n "*) len=() ;; esac
	client "$name" "${len[@]}" --json -s "$size" "$@"
	rc=$?
	[ "$rc" = 0 ] || die "$name: client $* exited $rc: $(cat "$WORK/$name" "$WORK/$name.err")"
	# jq, not python3: inside the VM each python3 start reads its modules over 9p
	tail -n 1 "$WORK/$name" | jq -r --arg name "$name" --argjson size "$size" '
		def need(c; what): if c then . else error("\($name): \(what)") end;
		need(.check == "ok" and .error == ""; "check is not ok")
		| need(.sent > 0; "nothing sent")
		| need(.received == .sent; "sent \(.sent) != received \(.received)")
		| need(.bytes_sent == .sent * $size; "bytes_sent != sent x size")
		| need(.bytes_received == .bytes_sent; "bytes_received != bytes_sent")
		| need(.disorder == 0; "messages out of order")
		| need(.mode == "send" or .completed == .sent; "completed \(.completed) != sent \(.sent)")
		| need((.mode != "write" and .mode != "read") or .verified == true;
			"region bytes not verified")
		| need(.mode != "rpc" or (.lat_us as $l | 0 < $l.min and $l.min <= $l.p50 and
			$l.p50 <= $l.p99 and $l.p99 <= $l.p999 and $l.p999 <= $l.max);
			"latency percentiles out of order: \(.lat_us)")
		| need(.seconds > 0 and .rate > 0; "no time or rate")
		| "\($name): \(.mode), \(.sent) sent == \(.received) received, \(.bytes_received) bytes, \(.rate + 0.5 | floor)/s: ok"
	' || die "$name: $(cat "$WORK/$name")"
	say "$(tail -n 1 "$WORK/$name.err" | sed 's/^.*engine down/engine down/') ($name)"
}

serve
check send 64 --mode send -q 2
check send_thread 64 --mode send --producer thread --post-batch 16
check send_tiny 64 --mode send -n 5
check rpc 8 --mode rpc
check rpc_no_inline 8 --mode rpc --inline 0
check rpc_window 64 --mode rpc --window 16 -q 2
check write 100 --mode write --window 32 -q 2
check read 1 --mode read -n 300
check read_4k 4096 --mode read --window 16
# the human table says the same
client table --quick --mode rpc || die "rpc table run: $(cat "$WORK/table" "$WORK/table.err")"
grep -q '^  check      ok' "$WORK/table" || die "no ok check line: $(cat "$WORK/table")"
grep -q '^  latency    round trip p50' "$WORK/table" || die "no latency line: $(cat "$WORK/table")"
say "table: $(grep -E '^  (rate|check)' "$WORK/table" | tr -s ' ' | tr '\n' ';')"
unserve
# every connection the server saw: nothing missing, nothing out of order
[ "$(grep -c 'closed: .* 0 out of order$' "$WORK/server")" = 13 ] ||
	die "server summary: $(grep closed: "$WORK/server")"

# hybrid idle on both sides: the same counts; the server, idle before each
# client connects, slept
serve --idle hybrid
check write_hybrid 4096 --mode write --window 32
check rpc_hybrid 8 --mode rpc --idle hybrid
unserve
sleeps=$(sed -n 's/.*sleeps \([0-9]*\) (.*/\1/p' "$WORK/server" | head -1)
[ "${sleeps:-0}" -gt 0 ] || die "server --idle hybrid never slept: $(cat "$WORK/server")"
say "--idle hybrid: write and rpc counts agree; the server slept $sleeps times"

# a server that loses count must make the client fail
serve --undercount-every 100
client under --json -n 1000 --mode send
rc=$?
[ "$rc" = 1 ] || die "a server leaving every 100th message uncounted: client exited $rc, not 1: $(cat "$WORK/under")"
grep -q '"check": "failed"' "$WORK/under" && grep -q 'sent 1000 but the server received 990' "$WORK/under" ||
	die "the mismatch is not reported: $(cat "$WORK/under")"
unserve
say "a miscounting server: the client exits 1 with 'sent 1000 but the server received 990'"
echo "PASS"
