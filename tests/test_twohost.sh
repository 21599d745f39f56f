#!/bin/bash
# SPDX-License-Identifier: MIT
# twohost suite: pollcore-echo, pollcore-blk, pollcore-nvmf (with the Linux
# kernel's NVMe-oF initiator) and perftest across a wire between two VMs.
#   usage: test_twohost.sh path/to/pollcore-echo path/to/pollcore-blk
#                          path/to/pollcore-nvmf uring|no-uring
#
# Runs on the host and boots its own pair (tools/rxe-vm --pair --modules
# nvme-rdma): servers and targets on a (fe80::ff:fe00:101%eth0), clients and
# the initiator on b, one phase after another:
#   clean  echo: 20,000 requests of 64 bytes, every byte checked;
#   netem  echo: 2,000 requests with b's eth0 under netem (loss, delay,
#          reordering): rxe must recover every loss (each costs a retransmit
#          timeout).
#   blk    pollcore-blk on a RAM disk: randrw --verify clean, then under the
#          same netem;
#   perftest  ib_write_bw and ib_read_bw, 4 KiB, across the same wire (their
#          TCP side channel through tests/oob_relay.py: perftest 4.5 speaks
#          IPv4 only, and the wire carries IPv6 link-local only);
#   nvmf   pollcore-nvmf, a 64 MiB RAM namespace, to the kernel's nvme-rdma
#          on b: discover, connect, nvme list, fio crc32c verify (4 KiB and
#          128 KiB, iodepth 32), fio randread and randwrite 4 KiB at iodepth
#          32 (figures), disconnect (tests/twohost_nvmf.sh);
#   nvcrash  pollcore-nvmf on a file namespace, the host connected with
#          --ctrl-loss-tmo: fio writes a region with verify data and nvme
#          flush; then, under 32 writes in flight, a SIGKILLs the target and
#          starts it again on the same file, NQN, address and port; the host
#          reconnects by itself (dmesg, controller state live), the I/O in
#          flight completes and verifies, and the flushed region reads back
#          intact (fio --verify_only); skipped when pollcore-nvmf was built
#          without liburing. If the host cannot reconnect and rdma-core's
#          rping cannot connect either, the wire is what failed (issue 21 saw
#          ADDR_ERROR -110 for every connect after a kill): the phase says so,
#          shows each side's netdiag (addresses, neighbours, qdisc, ND
#          counters, a ping) and passes on what it still checked (the I/O
#          failed with EIO, no verify error); the flap is then skipped;
#   flap   last: a pollcore-blk randrw --verify --reconnect client while b's
#          eth0 goes down for 2 s: its connection survives or closes with a
#          reason, the client reconnects, and its verify passes (on rxe a flap
#          may leave the device unable to connect; rping is the oracle there).
# Echo phases: client exit 0, sent == received == the count on both ends,
# the server's exact totals after SIGTERM (exit 0), no WC errors, no QP out
# of retries; under netem the qdisc dropped packets and rxe retransmitted.
# blk phases: every client exits 0 with 0 mismatches; the servers exit 0 on
# SIGTERM. NVMe-oF phases: what tests/twohost_nvmf.sh lists; the targets exit
# 0 on SIGTERM with no failed transfer, backend operation or lost completion.
# It prints the rates, latencies, perftest's figures beside pollcore-nvmf's
# and the rxe hw_counters deltas of both VMs.
#
# The VMs coordinate through files in a directory on the host's filesystem,
# which both mount: a says when its server listens, b when its client is done.
# Inside a VM (test_twohost.sh --side DIR ECHO BLK NVMF URING) the script plays
# its role.
set -u

CLEAN_COUNT=20000
NETEM_COUNT=2000
NETEM="loss 0.5% delay 50us reorder 1% 50%"
HWC=/sys/class/infiniband/rxe0/ports/1/hw_counters
PT_PORT=18515 # perftest's side channel; the relay on a listens on PT_PORT + 1000
PT_ITERS=3000

# Inside a VM the reason also goes to DIR/ROLE.failed: the host repeats the
# sides' reasons in its own last line, where a log's tail shows them.
fail() {
	echo "FAIL: $*" >&2
	[ -n "${ROLE:-}" ] && [ -d "${DIR:-}" ] && echo "$(date +%T) $*" >>"$DIR/$ROLE.failed"
	exit 1
}
HERE=$(dirname "$(readlink -f "$0")")
# shellcheck source=tests/nvmf_lib.sh
. "$HERE/nvmf_lib.sh"
# shellcheck source=tests/twohost_nvmf.sh
. "$HERE/twohost_nvmf.sh"

# --- inside a VM ------------------------------------------------------------------------
# await FILE SECONDS: until FILE exists; false after SECONDS or when the
# other side has failed.
await() {
	for _ in $(seq $(($2 * 10))); do
		[ -e "$1" ] && return 0
		[ -e "$DIR/$PEER.failed" ] && return 1
		sleep 0.1
	done
	return 1
}

# snap NAME: this VM's rxe0 counters, "name value" lines, into DIR/ROLE.NAME.hwc.
snap() {
	local f
	for f in "$HWC"/*; do
		echo "${f##*/} $(cat "$f")"
	done > "$DIR/$ROLE.$1.hwc"
}

# netdiag NAME: what this VM's end of the wire looks like, into DIR/ROLE.NAME.net:
# addresses (tentative/dadfailed?), neighbour entries (FAILED/INCOMPLETE?), the
# qdisc (a netem left behind?), link counters, ND counters, a ping of the peer
# (the oracle for "the wire itself works") and the kernel's last lines.
netdiag() {
	{
		echo "== $ROLE $1 at $(date +%T)"
		ip -6 addr show dev eth0
		echo "-- neigh"; ip -6 neigh show dev eth0
		echo "-- qdisc"; tc -s qdisc show dev eth0
		echo "-- link"; ip -s link show dev eth0
		echo "-- nd counters"
		grep -E 'Icmp6(In|Out)(Neighbor|Router)|Ip6(InDiscards|OutDiscards|OutNoRoutes)' /proc/net/snmp6
		echo "-- ping -6 ${PC_PAIR_PEER_ADDR}"
		timeout 10 busybox ping -6 -c 3 -W 1 "${PC_PAIR_PEER_ADDR%\%*}%eth0" 2>&1 || echo "ping failed ($?)"
		echo "-- neigh after the ping"; ip -6 neigh show dev eth0
		echo "-- rdma"; rdma resource show 2>&1; rdma link show 2>&1
		echo "-- dmesg"; dmesg | tail -n 25
	} >"$DIR/$ROLE.$1.net" 2>&1
}

# start_srv NAME CMD...: a server in the background (SRV_PID), listening
# within 60 s; its output in DIR/a.NAME.server.out (appended: a restart
# keeps the first run's lines).
start_srv() {
	local name=$1 out="$DIR/a.$1.server.out" n0
	shift
	touch "$out"
	n0=$(grep -c 'listening on' "$out")
	"$@" >>"$out" 2>&1 &
	SRV_PID=$!
	for _ in $(seq 600); do
		[ "$(grep -c 'listening on' "$out")" -gt "$n0" ] && return 0
		kill -0 "$SRV_PID" 2>/dev/null || fail "a: the $name server exited before listening"
		sleep 0.1
	done
	fail "a: the $name server is not listening after 60 s"
}

# stop_srv NAME: SIGTERM; its exit status into DIR/a.NAME.server.rc.
stop_srv() {
	kill -TERM "$SRV_PID"
	timeout 60 tail --pid="$SRV_PID" -f /dev/null || fail "a: the $1 server runs 60 s after SIGTERM"
	wait "$SRV_PID"
	echo $? >"$DIR/a.$1.server.rc"
}

# serve NAME CMD...: one server for the client phase NAME of b's.
serve() {
	local name=$1
	shift
	snap "$name.before"
	start_srv "$name" "$@"
	touch "$DIR/a.$name.listening"
	await "$DIR/b.$name.done" 900 || fail "a: b did not finish its $name phase"
	stop_srv "$name"
	snap "$name.after"
}

side_a() {
	local phase t
	for phase in clean netem; do
		serve "$phase" "$ECHO" server --addr "$PC_TEST_ADDR" --no-numa
	done
	serve blk "$BLK" server --addr "$PC_TEST_ADDR" --ram 64M --no-numa

	# perftest servers; their side channel arrives over IPv6 through the relay
	for t in write read; do
		relay "pt_$t" :: $((PT_PORT + 1000)) 127.0.0.1 $PT_PORT
		timeout 300 "ib_${t}_bw" -d rxe0 -x 0 -F -s 4096 -t 32 -n $PT_ITERS -p $PT_PORT \
			>"$DIR/a.pt_$t.server.out" 2>&1 &
		SRV_PID=$!
		sleep 1
		touch "$DIR/a.pt_$t.listening"
		wait "$SRV_PID"
		echo $? >"$DIR/a.pt_$t.server.rc"
		wait
	done

	nvmf_side_a

	# last: on rxe a flap can leave the device unable to connect (see below)
	rping -s -a "$PC_TEST_ADDR" -p 7471 -P >"$DIR/a.rping.out" 2>&1 &
	serve flap "$BLK" server --addr "$PC_TEST_ADDR" --ram 64M --no-numa
	kill %rping 2>/dev/null
}

# client PHASE COUNT: an echo client; retries a refused connection for 60 s
# (the server may still be coming up), then records the exit status.
client() {
	local t0=$SECONDS rc
	while :; do
		timeout 600 "$ECHO" client "$PC_PAIR_PEER_ADDR" --no-numa --count "$2" --size 64 \
			>"$DIR/b.$1.client.out" 2>&1
		rc=$?
		if [ "$rc" = 0 ] || ! grep -q 'cannot connect' "$DIR/b.$1.client.out" ||
			[ $((SECONDS - t0)) -ge 60 ]; then
			break
		fi
		sleep 1
	done
	echo "$rc" >"$DIR/b.$1.client.rc"
}

# blk NAME ARGS...: a pollcore-blk client; its exit status into DIR/b.NAME.rc,
# stdout and stderr into DIR/b.NAME.{out,err}.
blk() {
	local name=$1
	shift
	timeout 600 "$BLK" client "$PC_PAIR_PEER_ADDR" --no-numa "$@" \
		>"$DIR/b.$name.out" 2>"$DIR/b.$name.err"
	echo $? >"$DIR/b.$name.rc"
}

# blk_bg NAME ARGS...: blk in the background (BG_PID); returns once it has
# run for 3 s (its progress line [3s]), false if it ended before.
blk_bg() {
	local name=$1
	blk "$@" &
	BG_PID=$!
	for _ in $(seq 1200); do
		grep -q '\[3s\]' "$DIR/b.$name.err" 2>/dev/null && return 0
		kill -0 "$BG_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

netem_on() {
	# shellcheck disable=SC2086 # $NETEM is tc's words
	tc qdisc add dev eth0 root netem $NETEM || fail "b: tc qdisc add ... netem failed"
}

# relay NAME ARGS...: tests/oob_relay.py ARGS in the background, once it listens.
relay() {
	local out="$DIR/$ROLE.$1.relay.out"
	shift
	timeout 300 "$RELAY" "$@" 120 >"$out" 2>&1 &
	for _ in $(seq 300); do
		grep -q '^oob_relay: listening' "$out" && return 0
		sleep 0.1
	done
	fail "$ROLE: the relay is not listening after 30 s: $(cat "$out")"
}

# netem_off NAME: the qdisc's statistics into DIR/b.NAME.qdisc, then off.
netem_off() {
	tc -s qdisc show dev eth0 >"$DIR/b.$1.qdisc"
	tc qdisc del dev eth0 root
}

side_b() {
	local t
	await "$DIR/a.clean.listening" 300 || fail "b: a's server is not listening"
	snap clean.before
	client clean "$CLEAN_COUNT"
	snap clean.after
	touch "$DIR/b.clean.done"

	netem_on
	await "$DIR/a.netem.listening" 300 || fail "b: a's second server is not listening"
	snap netem.before
	client netem "$NETEM_COUNT"
	snap netem.after
	netem_off netem
	touch "$DIR/b.netem.done"

	await "$DIR/a.blk.listening" 300 || fail "b: a's blk server is not listening"
	blk blk_clean --rw randrw --bs 4k --iodepth 32 --size 8M --time 10 --verify
	netem_on
	snap blk_netem.before
	# --reconnect: rxe once completed no send for 16 s here, and the server's
	# keepalive closed the connection (docs/reliability.md); the host side
	# accepts that only with that reason in the server's log
	blk blk_netem --rw randrw --bs 4k --iodepth 32 --size 8M --time 10 --verify \
		--reconnect 60
	snap blk_netem.after
	netem_off blk_netem
	# a client that could not reconnect: what the wire looks like (issue 21)
	[ "$(cat "$DIR/b.blk_netem.rc")" = 0 ] || netdiag blk_netem.failed
	touch "$DIR/b.blk.done"

	for t in write read; do
		await "$DIR/a.pt_$t.listening" 300 || fail "b: a's ib_${t}_bw is not listening"
		relay "pt_$t" 127.0.0.1 $PT_PORT "$PC_PAIR_PEER_ADDR" $((PT_PORT + 1000))
		timeout 240 "ib_${t}_bw" -d rxe0 -x 0 -F -s 4096 -t 32 -n $PT_ITERS -p $PT_PORT 127.0.0.1 \
			>"$DIR/b.pt_$t.out" 2>&1
		echo $? >"$DIR/b.pt_$t.rc"
		[ "$(cat "$DIR/b.pt_$t.rc")" = 0 ] || netdiag "pt_$t.failed"
		wait
	done

	nvmf_side_b

	await "$DIR/a.flap.listening" 300 || fail "b: a's flap server is not listening"
	if [ -e "$DIR/b.wire_broken" ]; then
		# nothing can connect across the wire since the nvcrash phase: no flap to test
		touch "$DIR/b.flap.done"
		return 0
	fi
	snap flap.before
	if blk_bg flap --rw randrw --bs 4k --iodepth 32 --size 8M --time 25 --verify \
		--reconnect 60; then
		ip link set eth0 down
		sleep 2
		ip link set eth0 up
		echo "eth0 down for 2 s at $(date +%T)" >"$DIR/b.flap.link"
	fi
	wait "$BG_PID"
	snap flap.after
	netdiag flap.after
	# the oracle for "can this device still connect": rdma-core's own rping
	timeout 60 rping -c -a "$PC_PAIR_PEER_ADDR" -p 7471 -C 3 >"$DIR/b.rping.out" 2>&1
	echo $? >"$DIR/b.rping.rc"
	touch "$DIR/b.flap.done"
}

if [ "${1:-}" = --side ]; then
	DIR=$2 ECHO=$3 BLK=$4 NVMF=$5 URING=$6 ROLE=${PC_PAIR_ROLE:?run by tools/rxe-vm --pair}
	RELAY=$HERE/oob_relay.py
	PEER=$([ "$ROLE" = a ] && echo b || echo a)
	[ -d "$HWC" ] || fail "$ROLE: no $HWC"
	# the other side stops waiting as soon as this one has failed
	trap 'rc=$?; [ $rc = 0 ] || [ -s "$DIR/$ROLE.failed" ] ||
		echo "$(date +%T) exited $rc without a reason" >>"$DIR/$ROLE.failed"' EXIT
	"side_$ROLE"
	exit 0
fi

# --- on the host ------------------------------------------------------------------------
USAGE="usage: test_twohost.sh path/to/pollcore-echo path/to/pollcore-blk path/to/pollcore-nvmf uring|no-uring"
ECHO=$(readlink -f "${1:?$USAGE}")
BLK=$(readlink -f "${2:?$USAGE}")
NVMF=$(readlink -f "${3:?$USAGE}")
URING=${4:?$USAGE}
if [ "${PC_IN_VM:-}" = 1 ]; then
	echo "SKIP: the twohost suite runs on the host (it boots its own pair of VMs)"
	exit 77
fi
SELF=$(readlink -f "$0")
RXE_VM=$(dirname "$SELF")/../tools/rxe-vm
[ -x "$ECHO" ] || fail "$ECHO is not an executable"
[ -x "$BLK" ] || fail "$BLK is not an executable"
[ -x "$NVMF" ] || fail "$NVMF is not an executable"
for t in ib_write_bw ib_read_bw python3 nvme fio jq; do
	command -v $t >/dev/null || fail "no $t (tools/setup installs it)"
done
# on the host's filesystem, which both VMs mount (not TMPDIR: it may be a tmpfs under /dev)
DIR=$(mktemp -d /tmp/pc-twohost.XXXXXX)
# PC_TWOHOST_KEEP=1: leave the sides' files (outputs, hw_counters, netdiag) for a look
if [ -n "${PC_TWOHOST_KEEP:-}" ]; then
	echo "== the sides' files stay in $DIR (PC_TWOHOST_KEEP)"
else
	trap 'rm -rf "$DIR"' EXIT
fi

show() {
	local f
	for f in "$DIR"/*.out "$DIR"/*.err "$DIR"/*.qdisc "$DIR"/*.link "$DIR"/b.nvmf/*.out; do
		[ -s "$f" ] && { echo "--- ${f##*/}"; tail -n 40 "$f"; }
	done
	# the wire as each VM saw it (netdiag), whole
	for f in "$DIR"/*.net; do
		[ -s "$f" ] && { echo "--- ${f##*/}"; cat "$f"; }
	done
}
side_cmd() { printf '%q --side %q %q %q %q %q' "$SELF" "$DIR" "$ECHO" "$BLK" "$NVMF" "$URING"; }

echo "== tools/rxe-vm --pair: servers on a, clients on b"
start=$SECONDS
# nvme-rdma: b's initiator (a loads it too, unused; pollcore-nvmf needs no module)
"$RXE_VM" --pair --timeout 2400 --modules nvme-rdma -- "$(side_cmd)" "$(side_cmd)"
rc=$?
echo "== the pair ran for $((SECONDS - start)) s; host load average $(cut -d' ' -f1-3 /proc/loadavg)"
# the sides' own reasons (fail() above), for the last line of the log
side_failures() {
	local r
	for r in a b; do
		[ -s "$DIR/$r.failed" ] && printf '; %s' "$(tr '\n' ' ' <"$DIR/$r.failed")"
	done
}
[ "$rc" = 0 ] || { show; fail "tools/rxe-vm --pair exited $rc$(side_failures)"; }

# wstat FILE FIELD: a field of the worker's stats line ("rx 20000" -> 20000).
wstat() {
	grep -m1 '^pc-w0-rxe0 ' "$1" | grep -o "[ ,]$2 [0-9]*" | grep -o '[0-9]*$'
}

# delta ROLE PHASE COUNTER: the counter's rise over the phase.
delta() {
	local b a
	b=$(awk -v c="$3" '$1 == c {print $2}' "$DIR/$1.$2.before.hwc")
	a=$(awk -v c="$3" '$1 == c {print $2}' "$DIR/$1.$2.after.hwc")
	echo $((${a:-0} - ${b:-0}))
}

# check PHASE COUNT: exact outcome of one phase; prints its figures.
check() {
	local phase=$1 n=$2 cli="$DIR/b.$1.client.out" srv="$DIR/a.$1.server.out" want f v
	[ "$(cat "$DIR/b.$phase.client.rc")" = 0 ] || { show; fail "$phase: the client failed"; }
	[ "$(cat "$DIR/a.$phase.server.rc")" = 0 ] || { show; fail "$phase: the server did not exit 0 on SIGTERM"; }
	grep -q "^requests *$n (1 connection x $n, 64 bytes, window [0-9]*), every byte checked" "$cli" ||
		{ show; fail "$phase: the client did not check $n responses"; }
	for f in tx rx; do
		v=$(wstat "$cli" "$f")
		[ "$v" = "$n" ] || fail "$phase: client $f $v, expected $n"
		v=$(wstat "$srv" "$f")
		[ "$v" = "$n" ] || fail "$phase: server $f $v, expected $n"
	done
	[ "$(wstat "$cli" wc_errors)" = 0 ] || fail "$phase: client WC errors: $(wstat "$cli" wc_errors)"
	[ "$(wstat "$srv" wc_errors)" = 0 ] || fail "$phase: server WC errors: $(wstat "$srv" wc_errors)"
	want="$n messages ($((n * 64)) bytes) echoed on 1 connections, 0 errors"
	grep -qF "pollcore-echo server: Terminated: $want" "$srv" ||
		fail "$phase: server totals: want '$want', got: $(grep Terminated "$srv")"
	for f in a b; do
		[ "$(delta "$f" "$phase" retry_exceeded_err)" = 0 ] || fail "$phase: $f: a QP ran out of retries"
	done
	echo "ok: $phase: sent == received == $n on both ends, every byte checked, 0 errors"
	echo "    $(grep '^rate' "$cli")   $(grep '^latency' "$cli" | tr -s ' ')"
	for f in a b; do
		printf '    %s hw_counters:' "$f"
		for v in sent_pkts rcvd_pkts duplicate_request out_of_seq_request rcvd_seq_err \
			completer_retry_err retry_exceeded_err rcvd_rnr_err send_rnr_err; do
			printf ' %s %s' "$v" "$(delta "$f" "$phase" "$v")"
		done
		echo
	done
}

check clean "$CLEAN_COUNT"
check netem "$NETEM_COUNT"

# Under netem the wire lost packets, and rxe recovered them: retransmissions show.
dropped=$(grep -o 'dropped [0-9]*' "$DIR/b.netem.qdisc" | head -1 | grep -o '[0-9]*')
grep -q "netem.*loss 0.5%" "$DIR/b.netem.qdisc" || fail "netem was not on b's eth0: $(cat "$DIR/b.netem.qdisc")"
[ "${dropped:-0}" -gt 0 ] || fail "netem dropped no packet; the loss phase proved nothing"
retries=0
for f in a b; do
	for v in duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err; do
		retries=$((retries + $(delta "$f" netem "$v")))
	done
done
[ "$retries" -gt 0 ] || fail "netem dropped $dropped packets but rxe counted no retransmission"
echo "ok: netem ($NETEM) on b's eth0 dropped $dropped packets; rxe recovered every loss (retry counters of both VMs rose by $retries)"
rate() { awk '$1 == "rate" {print $2}' "$DIR/b.$1.client.out"; }
echo "rates: clean $(rate clean) msg/s, under netem $(rate netem) msg/s"

# --- pollcore-blk -----------------------------------------------------------------------
rc_of() { cat "$1" 2>/dev/null || echo "(none: it never ran)"; }
blk_ok() {
	[ "$(rc_of "$DIR/b.$1.rc")" = 0 ] ||
		{ show; fail "blk $1: the client exited $(rc_of "$DIR/b.$1.rc")"; }
}
blk_verified() {
	blk_ok "$1"
	grep -Eq '^verify +0 mismatches in [1-9][0-9]* blocks checked' "$DIR/b.$1.out" ||
		{ show; fail "blk $1: no '0 mismatches' line"; }
	grep -q 'read-back: [1-9][0-9]* blocks checked, 0 mismatches' "$DIR/b.$1.err" ||
		{ show; fail "blk $1: the read-back did not check every block clean"; }
}
srv_ok() {
	[ "$(rc_of "$DIR/a.$1.server.rc")" = 0 ] ||
		{ show; fail "the $1 server exited $(rc_of "$DIR/a.$1.server.rc") on SIGTERM"; }
}
line() { grep "^$2 " "$DIR/b.$1.out" | tr -s ' '; }

blk_verified blk_clean
blk_verified blk_netem
srv_ok blk
# a close under netem is accepted only as the rxe stall of docs/reliability.md:
# the server's keepalive saw no send complete, and the client reconnected
stall=
if grep -q 'reconnected after' "$DIR/b.blk_netem.err"; then
	stall=$(grep -o 'no send completed for [0-9]* ms with [0-9]* WRs in flight' \
		"$DIR/a.blk.server.out" | head -1)
	[ -n "$stall" ] ||
		{ show; fail "blk blk_netem: the connection closed under netem, and not by the server's send-queue watch"; }
fi
for c in xfer_errors io_errors replies_lost; do
	n=$(grep -o " $c [0-9]*" "$DIR/a.blk.server.out" | awk '{s += $2} END {print s + 0}')
	# what the stalled connection had in flight failed or went unanswered
	[ "$n" = 0 ] || { [ -n "$stall" ] && [ "$c" != io_errors ]; } ||
		fail "the blk server counted $c $n"
done
dropped=$(grep -o 'dropped [0-9]*' "$DIR/b.blk_netem.qdisc" | head -1 | grep -o '[0-9]*')
[ "${dropped:-0}" -gt 0 ] || fail "netem dropped no packet in the blk phase"
retries=0
for v in duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err; do
	retries=$((retries + $(delta b blk_netem "$v")))
done
[ "$retries" -gt 0 ] || fail "netem dropped $dropped packets in the blk phase but b's rxe counted no retry"
if [ -n "$stall" ]; then
	echo "ok: blk: randrw --verify clean and under netem (dropped $dropped, b's retry counters +$retries): 0 mismatches; under netem rxe stalled once ($stall: the server's keepalive closed the connection) and the client reconnected"
else
	echo "ok: blk: randrw --verify clean and under netem (dropped $dropped, b's retry counters +$retries): 0 mismatches; the server counted no failed transfer"
fi

# --- perftest across the same wire ---------------------------------------------------------
# pt_row T: perftest's result row at 4096 bytes: bytes iters peak avg(MB/s) rate(Mpps)
pt_row() { awk '$1 == 4096 && $2 ~ /^[0-9]+$/ {print; exit}' "$DIR/b.pt_$1.out"; }
for t in write read; do
	if [ "$(rc_of "$DIR/b.pt_$t.rc")" != 0 ] || [ "$(rc_of "$DIR/a.pt_$t.server.rc")" != 0 ] ||
		[ -z "$(pt_row $t)" ]; then
		show
		fail "ib_${t}_bw across the wire failed"
	fi
done

# --- NVMe-oF: pollcore-nvmf on a, the kernel's initiator on b (tests/twohost_nvmf.sh) -------
nvmf_check

# --- the flap (last: on rxe it may leave the device unable to connect) ---------------------
srv_ok flap
if [ -e "$DIR/b.wire_broken" ]; then
	echo "SKIP (part): flap: nothing could connect across the wire since the nvcrash phase"
else
[ -s "$DIR/b.flap.link" ] || { show; fail "flap: eth0 never went down (the client ended before 3 s?)"; }
grep -q MISMATCH "$DIR/b.flap.err" && { show; fail "flap: the client read wrong data"; }
reason=$(grep -o 'the connection closed (.*); reconnecting' "$DIR/b.flap.err" | head -1)
reason=${reason%; reconnecting}
if [ "$(rc_of "$DIR/b.flap.rc")" = 0 ]; then
	blk_verified flap
	n=$(line flap reconnect | cut -d' ' -f2)
	if [ "${n:-x}" = 0 ]; then
		how="the connection survived"
	else
		[ -n "$reason" ] || fail "flap: $n reconnects, but the client printed no reason for a close"
		how="$n reconnect(s) after $reason"
	fi
	echo "ok: flap: $(cat "$DIR/b.flap.link"): $how; $(line flap verify)"
else
	# pollcore's promise: the connection closed with a reason and nothing read was wrong;
	# whether a new connection can be made is the device's: rping is the oracle
	[ -n "$reason" ] || { show; fail "flap: the client failed without a closed connection's reason"; }
	grep -q 'no connection within 60 s' "$DIR/b.flap.err" ||
		{ show; fail "flap: the client failed, and not for want of a new connection"; }
	[ "$(rc_of "$DIR/b.rping.rc")" != 0 ] ||
		{ show; fail "flap: pollcore-blk could not reconnect for 60 s, but rping then could"; }
	echo "ok (rxe limit): flap: $(cat "$DIR/b.flap.link"): $reason; then neither pollcore-blk" \
		"(60 s) nor rping could connect across the wire: rxe (kernel 6.1) after a flap under" \
		"traffic (docs/reliability.md); every block read before the close was right"
fi
grep 'closed after' "$DIR/a.flap.server.out" | sed 's/^/    a: /'
fi

blkfig() { # NAME: IOPS MiB/s p50 p99 (ms)
	awk '$1 == "rate" {i = $2; m = $4} $1 == "latency" {p50 = $3 / 1000; p99 = $6 / 1000}
		END {printf "%8d %8.2f %8.1f %8.1f", i, m, p50, p99}' "$DIR/b.$1.out"
}
ptfig() { # T: IOPS MiB/s from perftest's average bandwidth (MB/s: 2^20 bytes)
	pt_row "$1" | awk '{printf "%8d %8.2f %8s %8s", $4 * 1048576 / 4096, $4, "-", "-"}'
}
echo "figures, 4 KiB, across the wire (compare within this run):"
printf '    %-44s %8s %8s %8s %8s\n' "" IOPS MiB/s "p50 ms" "p99 ms"
printf '    %-44s %s\n' "pollcore-nvmf randread  (fio, iodepth 32)" "$(nv_fig randread)"
printf '    %-44s %s\n' "ib_write_bw -s 4096 -t 32" "$(ptfig write)"
printf '    %-44s %s\n' "pollcore-nvmf randwrite (fio, iodepth 32)" "$(nv_fig randwrite)"
printf '    %-44s %s\n' "ib_read_bw -s 4096 -t 32" "$(ptfig read)"
printf '    %-44s %s\n' "pollcore-blk randrw --verify" "$(blkfig blk_clean)"
printf '    %-44s %s\n' "pollcore-blk randrw --verify, netem" "$(blkfig blk_netem)"
[ "$(rc_of "$DIR/b.flap.rc")" != 0 ] || [ -e "$DIR/b.wire_broken" ] ||
	printf '    %-44s %s\n' "pollcore-blk randrw --verify, eth0 flap" "$(blkfig flap)"
echo "PASS"
