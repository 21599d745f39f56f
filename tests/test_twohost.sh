#!/bin/bash
# SPDX-License-Identifier: MIT
# twohost suite: pollcore-echo across a wire between two VMs.
#   usage: test_twohost.sh path/to/pollcore-echo
#
# Runs on the host and boots its own pair (tools/rxe-vm --pair): the server
# on a (fe80::ff:fe00:101%eth0), the client on b, one phase after another:
#   clean  20,000 requests of 64 bytes, every byte checked;
#   netem  2,000 requests with b's eth0 under netem (loss, delay, reordering):
#          rxe must recover every loss (each costs a retransmit timeout).
# Each phase: client exit 0, sent == received == the count on both ends, the
# server's exact totals after SIGTERM (exit 0), no WC errors, no QP out of
# retries; under netem the qdisc dropped packets and rxe retransmitted. It
# prints both rates and the rxe hw_counters deltas of both VMs.
#
# The VMs coordinate through files in a directory on the host's filesystem,
# which both mount: a says when its server listens, b when its client is done.
# Inside a VM (test_twohost.sh --side DIR ECHO) the script plays its role.
set -u

CLEAN_COUNT=20000
NETEM_COUNT=2000
NETEM="loss 0.5% delay 50us reorder 1% 50%"
HWC=/sys/class/infiniband/rxe0/ports/1/hw_counters

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

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

# The server: one per phase, so that its totals are the phase's.
side_a() {
	local phase pid rc
	for phase in clean netem; do
		snap "$phase.before"
		"$ECHO" server --bind "$PC_TEST_ADDR" --no-numa >"$DIR/a.$phase.server.out" 2>&1 &
		pid=$!
		for _ in $(seq 600); do
			grep -q 'listening on' "$DIR/a.$phase.server.out" && break
			kill -0 "$pid" 2>/dev/null || fail "a: the $phase server exited before listening"
			sleep 0.1
		done
		grep -q 'listening on' "$DIR/a.$phase.server.out" ||
			fail "a: the $phase server is not listening after 60 s"
		touch "$DIR/a.$phase.listening"
		await "$DIR/b.$phase.done" 900 || fail "a: b did not finish its $phase client"
		kill -TERM "$pid"
		timeout 60 tail --pid="$pid" -f /dev/null || fail "a: the server runs 60 s after SIGTERM"
		wait "$pid"
		rc=$?
		echo "$rc" >"$DIR/a.$phase.server.rc"
		snap "$phase.after"
	done
}

# client PHASE COUNT: retries a refused connection for 60 s (the server may
# still be coming up), then records the exit status.
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

side_b() {
	await "$DIR/a.clean.listening" 300 || fail "b: a's server is not listening"
	snap clean.before
	client clean "$CLEAN_COUNT"
	snap clean.after
	touch "$DIR/b.clean.done"

	# shellcheck disable=SC2086 # $NETEM is tc's words
	tc qdisc add dev eth0 root netem $NETEM || fail "b: tc qdisc add ... netem failed"
	await "$DIR/a.netem.listening" 300 || fail "b: a's second server is not listening"
	snap netem.before
	client netem "$NETEM_COUNT"
	snap netem.after
	tc -s qdisc show dev eth0 >"$DIR/b.netem.qdisc"
	tc qdisc del dev eth0 root
	touch "$DIR/b.netem.done"
}

if [ "${1:-}" = --side ]; then
	DIR=$2 ECHO=$3 ROLE=${PC_PAIR_ROLE:?run by tools/rxe-vm --pair}
	PEER=$([ "$ROLE" = a ] && echo b || echo a)
	[ -d "$HWC" ] || fail "$ROLE: no $HWC"
	# the other side stops waiting as soon as this one has failed
	trap '[ $? = 0 ] || touch "$DIR/$ROLE.failed"' EXIT
	"side_$ROLE"
	exit 0
fi

# --- on the host ------------------------------------------------------------------------
ECHO=$(readlink -f "${1:?usage: test_twohost.sh path/to/pollcore-echo}")
if [ "${PC_IN_VM:-}" = 1 ]; then
	echo "SKIP: the twohost suite runs on the host (it boots its own pair of VMs)"
	exit 77
fi
SELF=$(readlink -f "$0")
RXE_VM=$(dirname "$SELF")/../tools/rxe-vm
[ -x "$ECHO" ] || fail "$ECHO is not an executable"
# on the host's filesystem, which both VMs mount (not TMPDIR: it may be a tmpfs under /dev)
DIR=$(mktemp -d /tmp/pc-twohost.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

show() {
	local f
	for f in "$DIR"/*.out "$DIR"/*.qdisc; do
		[ -s "$f" ] && { echo "--- ${f##*/}"; tail -n 40 "$f"; }
	done
}
side_cmd() { printf '%q --side %q %q' "$SELF" "$DIR" "$ECHO"; }

echo "== tools/rxe-vm --pair: server on a, client on b"
start=$SECONDS
"$RXE_VM" --pair --timeout 1500 -- "$(side_cmd)" "$(side_cmd)"
rc=$?
echo "== the pair ran for $((SECONDS - start)) s; host load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$rc" = 0 ] || { show; fail "tools/rxe-vm --pair exited $rc"; }

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
echo "PASS"
