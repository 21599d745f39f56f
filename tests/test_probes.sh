#!/bin/bash
# SPDX-License-Identifier: MIT
# rdma suite: the USDT probes of libpollcore (core/probe_pvt.h).
#   usage: test_probes.sh path/to/libpollcore.so path/to/pollcore-echo USDT
#   USDT (from meson): yes | missing (auto, no <sys/sdt.h>) | disabled (-Dusdt=disabled)
#
# Everywhere: readelf -n lists every probe of provider pollcore with its
# documented number of arguments. A build without probes fails, unless they
# were switched off on purpose (exit 77).
# On the test bed (the VM): perf probe adds every sdt_pollcore:* event and
# perf record captures them around a pollcore-echo server while a client
# sends 2,000 requests. The samples must agree with the server's own
# counters: sum of poll_batch counts = completions, post_batch samples =
# doorbells and their WRs = WRs posted, srq_refill samples = SRQ posts and
# their counts = receives posted, credit_stall samples = credit stalls; one
# conn_up (passive) and one conn_down (no error, was up) for the QP the
# server logged. Without a device, or without perf: exit 77 once the
# readelf part has passed.
set -u

LIB=${1:?usage: test_probes.sh path/to/libpollcore.so path/to/pollcore-echo USDT}
ECHO=${2:?usage: test_probes.sh path/to/libpollcore.so path/to/pollcore-echo USDT}
USDT=${3:?usage: test_probes.sh path/to/libpollcore.so path/to/pollcore-echo USDT}
. "$(dirname "$0")/testbed.sh"
ADDR=$PC_TEST_ADDR
PORT=7479
# name:arguments, as core/probe_pvt.h documents them
PROBES="poll_batch:1 post_batch:2 srq_refill:2 conn_up:2 conn_down:3 credit_stall:1 handoff_full:2"

TMP=
PERF_PID=
SRV_PID=
PROBES_ADDED=
cleanup() {
	[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
	[ -n "$PERF_PID" ] && kill -KILL "$PERF_PID" 2>/dev/null
	[ -n "$PROBES_ADDED" ] && perf probe -q -d 'sdt_pollcore:*' 2>/dev/null
	[ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT

# --- the notes (no device needed) ----------------------------------------------------------
case "$USDT" in
yes) ;;
disabled)
	echo "SKIP: built with -Dusdt=disabled: libpollcore has no probes to test"
	exit 77 ;;
missing)
	fail "libpollcore was built without USDT probes: <sys/sdt.h> was not found (tools/setup installs systemtap-sdt-dev; -Dusdt=disabled turns them off on purpose)" ;;
*)
	fail "unknown USDT state '$USDT' (expected yes, missing or disabled)" ;;
esac
command -v readelf >/dev/null || fail "readelf is not installed (binutils, in build-essential)"
[ -f "$LIB" ] || fail "no library at $LIB"
TMP=$(mktemp -d -p "$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp)")

# One line per probe site: provider name nargs
readelf -n "$LIB" | awk '
	/^ *stapsdt / { p = ""; n = "" }
	/^ *Provider:/ { p = $2 }
	/^ *Name:/ { n = $2 }
	/^ *Arguments:/ { print p, n, (NF - 1) }' >"$TMP/notes"
[ -s "$TMP/notes" ] || fail "readelf -n $LIB shows no stapsdt notes"
for pr in $PROBES; do
	name=${pr%%:*} nargs=${pr##*:}
	grep -q "^pollcore $name " "$TMP/notes" ||
		fail "probe pollcore:$name is not in $LIB; its notes: $(tr '\n' ';' <"$TMP/notes")"
	bad=$(awk -v n="$name" -v a="$nargs" '$1 == "pollcore" && $2 == n && $3 != a' "$TMP/notes")
	[ -z "$bad" ] || fail "probe pollcore:$name has $(echo "$bad" | awk '{print $3}' | head -1) arguments, core/probe_pvt.h documents $nargs"
done
extra=$(awk -v want=" $PROBES " '{ split(want, a, " ") } $1 == "pollcore" {
		found = 0; for (i in a) if (a[i] ~ "^" $2 ":") found = 1; if (!found) print $2 }' "$TMP/notes")
[ -z "$extra" ] || fail "probes not listed in this test (add them here and to docs/profiling.md): $extra"
ok "readelf -n: $(wc -l <"$TMP/notes") probe sites, every one of: $(echo "$PROBES" | sed 's/:[0-9]//g')"

# --- perf, on the test bed -------------------------------------------------------------------
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	[ "${PC_IN_VM:-}" = 1 ] && fail "running inside the soft-RoCE VM but no RDMA device is visible"
	echo "SKIP: no RDMA device here; the perf part runs inside tools/rxe-vm"
	exit 77
fi
if ! command -v perf >/dev/null; then
	echo "SKIP: perf is not installed (tools/setup installs linux-perf); only the notes were checked"
	exit 77
fi
for t in timeout pgrep; do
	command -v "$t" >/dev/null || fail "$t is not installed"
done
# uprobe events live in tracefs, which the VM does not mount by itself
if [ ! -e /sys/kernel/tracing/uprobe_events ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>"$TMP/mount.out" ||
		fail "cannot mount tracefs on /sys/kernel/tracing: $(cat "$TMP/mount.out")"
fi
[ -e /sys/kernel/tracing/uprobe_events ] || fail "the kernel has no uprobe events (CONFIG_UPROBE_EVENTS)"

# Events of a previous run would make perf probe refuse to add them again.
perf probe -q -d 'sdt_pollcore:*' 2>/dev/null
# The build-id cache in $TMP: perf's own in ~/.debug is the host's, shared over 9p.
perf --buildid-dir "$TMP/debug" buildid-cache --add "$LIB" >"$TMP/cache.out" 2>&1 ||
	fail "perf buildid-cache --add $LIB failed: $(cat "$TMP/cache.out")"
PROBES_ADDED=1
perf --buildid-dir "$TMP/debug" probe -x "$LIB" -a 'sdt_pollcore:*' >"$TMP/probe.out" 2>&1 ||
	fail "perf probe -x $LIB -a 'sdt_pollcore:*' failed: $(cat "$TMP/probe.out")"
perf probe -l >"$TMP/list.out" 2>&1
for pr in $PROBES; do
	grep -q "sdt_pollcore:${pr%%:*} " "$TMP/list.out" ||
		fail "perf probe -l does not list sdt_pollcore:${pr%%:*}: $(cat "$TMP/list.out")"
done
ok "perf probe added every sdt_pollcore event"

# The server under perf record, so every probe it fires is captured, from the first SRQ fill on.
perf record -q -N -o "$TMP/perf.data" -e 'sdt_pollcore:*' -- \
	"$ECHO" server --addr "$ADDR" --port "$PORT" --no-numa >"$TMP/server.out" 2>&1 &
PERF_PID=$!
for _ in $(seq 600); do
	grep -q 'listening on' "$TMP/server.out" && break
	kill -0 "$PERF_PID" 2>/dev/null || fail "perf record of pollcore-echo server exited"
	sleep 0.1
done
grep -q 'listening on' "$TMP/server.out" || fail "pollcore-echo server is not listening after 60 s"
SRV_PID=$(pgrep -P "$PERF_PID" -x pollcore-echo) || fail "no pollcore-echo process under perf record ($PERF_PID)"

N=2000
timeout 300 "$ECHO" client "$ADDR" --port "$PORT" --no-numa --count "$N" >"$TMP/client.out" 2>&1 ||
	fail "pollcore-echo client exited $?"
# its connection drained on the server before the counters are read
for _ in $(seq 300); do
	grep -q 'closed after' "$TMP/server.out" && break
	sleep 0.1
done
grep -q "closed after $N messages in, $N out" "$TMP/server.out" ||
	fail "the server did not report the connection closed after $N messages each way"
kill -TERM "$SRV_PID"
wait "$PERF_PID"
rc=$?
PERF_PID= SRV_PID=
[ "$rc" = 0 ] || fail "perf record (with the server) exited $rc"
ok "perf record around pollcore-echo server, $N requests from a client"

perf script -i "$TMP/perf.data" -F event,trace >"$TMP/script.out" 2>"$TMP/script.err" ||
	fail "perf script failed: $(cat "$TMP/script.err")"
# event arg1 arg2 arg3 (0 where absent), one line per sample
awk '{ e = ""; a[1] = a[2] = a[3] = 0
	for (i = 1; i <= NF; i++) {
		if ($i ~ /^sdt_pollcore:/) { e = $i; sub(/^sdt_pollcore:/, "", e); sub(/:$/, "", e) }
		else if ($i ~ /^arg[123]=/) { k = substr($i, 4, 1); a[k] = substr($i, 6) }
	}
	if (e != "") print e, a[1], a[2], a[3] }' "$TMP/script.out" >"$TMP/samples"
lost=$(perf report -i "$TMP/perf.data" --stdio 2>/dev/null | awk '/Total Lost Samples:/ { print $NF; exit }')
[ "${lost:-0}" = 0 ] || fail "perf lost $lost samples; the sums below would be short"

count() { awk -v e="$1" '$1 == e { n++ } END { print n + 0 }' "$TMP/samples"; }
total() { awk -v e="$1" -v k="$2" '$1 == e { s += $(k + 1) } END { print s + 0 }' "$TMP/samples"; }
# the server's worker line (pc_engine_print_stats): the figure after KEY
stat() {
	local v
	v=$(awk -v k="$1" '/^pc-w0/ { for (i = 1; i < NF; i++) if ($i == k) { v = $(i + 1); sub(/,$/, "", v); print v; exit } }' "$TMP/server.out")
	[ -n "$v" ] || fail "no '$1' figure in the server's worker line (pc_engine_print_stats changed? update this test)"
	echo "$v"
}
same() { # same WHAT PROBE-FIGURE COUNTER-FIGURE
	[ "$2" = "$3" ] || fail "$1: $2 from the probes, $3 from the server's counters"
	ok "$1: $2"
}
for e in poll_batch post_batch srq_refill conn_up conn_down; do
	[ "$(count "$e")" -gt 0 ] || fail "no sample of sdt_pollcore:$e"
done
same "completions (sum of poll_batch)" "$(total poll_batch 1)" "$(stat wc)"
same "doorbells (post_batch samples)" "$(count post_batch)" "$(stat doorbells)"
same "WRs posted (sum of post_batch)" "$(total post_batch 2)" "$(stat wrs)"
same "SRQ posts (srq_refill samples)" "$(count srq_refill)" "$(stat in)"
same "receives posted (sum of srq_refill)" "$(total srq_refill 1)" "$(stat srq)"
same "credit stalls (credit_stall samples)" "$(count credit_stall)" "$(stat credit_stalls)"
same "handoff ring full (handoff_full samples)" "$(count handoff_full)" "$(stat handoff_full)"
# and against what happened, whatever the counters say (sends are signaled selectively)
[ "$(total poll_batch 1)" -ge "$N" ] || fail "fewer completions than the $N receives the server made"
[ "$(total post_batch 2)" -ge "$N" ] || fail "fewer WRs posted than the $N responses the server sent"
[ "$(total srq_refill 1)" -ge "$N" ] || fail "fewer receives posted than the $N requests the server took"

qpn=$(sed -n 's/.*qp 0x\([0-9a-f]*\): closed after.*/\1/p' "$TMP/server.out" | head -1)
[ -n "$qpn" ] || fail "the server did not log its connection's QP number"
qpn=$((16#$qpn))
same "conn_up samples" "$(count conn_up)" 1
same "conn_up (qpn passive)" "$(awk '$1 == "conn_up" { print $2, $3 }' "$TMP/samples")" "$qpn 1"
same "conn_down samples" "$(count conn_down)" 1
same "conn_down (qpn err was_up)" "$(awk '$1 == "conn_down" { print $2, $3, $4 }' "$TMP/samples")" "$qpn 0 1"
others=$(awk -v q="$qpn" '$1 == "post_batch" && $2 != q' "$TMP/samples" | head -1)
[ -z "$others" ] || fail "post_batch names another QP than the server's ($qpn): $others"
ok "every post_batch names QP $qpn"
