#!/bin/bash
# SPDX-License-Identifier: MIT
# twohost suite: pollcore-echo, pollcore-nvmf (with the Linux kernel's
# NVMe-oF initiator) and perftest across a wire between two VMs.
#   usage: test_twohost.sh path/to/pollcore-echo path/to/pollcore-nvmf uring|no-uring
#
# Runs on the host and boots its own pair (tools/rxe-vm --pair --modules
# nvme-rdma): servers and targets on a (fe80::ff:fe00:101%eth0), clients and
# the initiator on b, one phase after another, all in one boot:
#   clean  echo: 20,000 requests of 64 bytes, every byte checked;
#   netem  echo: 2,000 requests with b's eth0 under netem (loss, delay,
#          reordering): rxe must recover every loss (each costs a retransmit
#          timeout).
#   perftest  ib_write_bw and ib_read_bw, 4 KiB, across the same wire (their
#          TCP side channel through tests/oob_relay.py: perftest 4.5 speaks
#          IPv4 only, and the wire carries IPv6 link-local only);
#   nvmf, nvnetem, nvcrash, nvflap  pollcore-nvmf on a to the kernel's
#          nvme-rdma on b (tests/twohost_nvmf.sh): discover, connect, fio
#          crc32c verify and figures; fio randrw with verify under the same
#          netem, the host connected with --ctrl-loss-tmo and
#          --reconnect-delay; the target SIGKILLed and restarted under I/O
#          on a file namespace, the host reconnecting by itself; last, b's
#          eth0 down for 2 s under fio randrw with verify, the host keeping
#          or reconnecting its controller (on rxe a flap may leave the device
#          unable to connect: rping is the oracle there).
# Echo phases: client exit 0, sent == received == the count on both ends,
# the server's exact totals after SIGTERM (exit 0), no WC errors, no QP out
# of retries; under netem the qdisc dropped packets and rxe retransmitted.
# NVMe-oF phases: what tests/twohost_nvmf.sh lists; the targets exit
# 0 on SIGTERM with no failed transfer, backend operation or lost completion.
# It prints the rates, latencies, perftest's figures beside pollcore-nvmf's
# and the rxe hw_counters deltas of both VMs.
#
# The VMs coordinate through files in a directory on the host's filesystem,
# which both mount: a says when its server listens, b when its client is done.
# Inside a VM (test_twohost.sh --side DIR ECHO NVMF URING) the script plays
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
}

if [ "${1:-}" = --side ]; then
	DIR=$2 ECHO=$3 NVMF=$4 URING=$5 ROLE=${PC_PAIR_ROLE:?run by tools/rxe-vm --pair}
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
USAGE="usage: test_twohost.sh path/to/pollcore-echo path/to/pollcore-nvmf uring|no-uring"
ECHO=$(readlink -f "${1:?$USAGE}")
NVMF=$(readlink -f "${2:?$USAGE}")
URING=${3:?$USAGE}
if [ "${PC_IN_VM:-}" = 1 ]; then
	echo "SKIP: the twohost suite runs on the host (it boots its own pair of VMs)"
	exit 77
fi
SELF=$(readlink -f "$0")
RXE_VM=$(dirname "$SELF")/../tools/rxe-vm
[ -x "$ECHO" ] || fail "$ECHO is not an executable"
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
side_cmd() { printf '%q --side %q %q %q %q' "$SELF" "$DIR" "$ECHO" "$NVMF" "$URING"; }

echo "== tools/rxe-vm --pair: servers on a, clients on b"
start=$SECONDS
# nvme-rdma: b's initiator (a loads it too, unused; pollcore-nvmf needs no module).
# register_always=N: the host registers no memory region per I/O (a single
# SGE goes out with the PD's rkey), so its send queue holds no fast-
# registration or local-invalidate work requests. rxe (kernel 6.1) stops a
# send queue that retries over those: under netem's 0.5% loss the host's
# reads stalled after the first retransmission (2 retries, 5 capsules never
# answered, then the host's 30 s I/O timeout and a controller reset, over
# and over), while writes in the capsule (no registration) retried 226 times
# and went on, and reads with register_always=N retried 54 times and went
# on. The interop suite's NVMe-oF tests run the registering host (no loss).
"$RXE_VM" --pair --timeout 2400 --modules nvme-rdma:register_always=N -- "$(side_cmd)" "$(side_cmd)"
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

rc_of() { cat "$1" 2>/dev/null || echo "(none: it never ran)"; }
srv_ok() {
	[ "$(rc_of "$DIR/a.$1.server.rc")" = 0 ] ||
		{ show; fail "the $1 server exited $(rc_of "$DIR/a.$1.server.rc") on SIGTERM"; }
}

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

ptfig() { # T: IOPS MiB/s from perftest's average bandwidth (MB/s: 2^20 bytes)
	pt_row "$1" | awk '{printf "%8d %8.2f %8s %8s", $4 * 1048576 / 4096, $4, "-", "-"}'
}
echo "figures, 4 KiB, across the wire (compare within this run):"
printf '    %-44s %8s %8s %8s %8s\n' "" IOPS MiB/s "p50 ms" "p99 ms"
printf '    %-44s %s\n' "pollcore-nvmf randread  (fio, iodepth 32)" "$(nv_fig randread)"
printf '    %-44s %s\n' "ib_write_bw -s 4096 -t 32" "$(ptfig write)"
printf '    %-44s %s\n' "pollcore-nvmf randwrite (fio, iodepth 32)" "$(nv_fig randwrite)"
printf '    %-44s %s\n' "ib_read_bw -s 4096 -t 32" "$(ptfig read)"
printf '    %-44s %s\n' "pollcore-nvmf randrw verify, netem (fio)" "$(nv_fig randrw nvnetem)"
echo "PASS"
