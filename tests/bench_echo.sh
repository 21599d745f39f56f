#!/bin/bash
# SPDX-License-Identifier: MIT
# bench suite: pollcore-echo against perftest on the same device, in the same boot.
#   usage: bench_echo.sh path/to/pollcore-echo
#
# perftest (server and client on the test bed's device and GID index,
# tests/testbed.sh: rxe0 and 0 in the VM; out-of-band exchange over
# TCP on 127.0.0.1) gives the baseline: ib_send_lat at 8 and 64 bytes,
# ib_send_bw at 64 bytes plain, with a post list of 32 (-l 32) and with an
# SRQ (--use-srq). Then pollcore-echo server and client at the same sizes.
# Prints a table of figures and pollcore/perftest ratios. Fails only on
# errors, never on speed. Environment: PC_BENCH_SCALE (default 1) multiplies
# the iteration counts; PC_BENCH_SHORT (set by tools/run-tests, which only
# needs to see every run pass and the table filled) runs 300 and 3,200
# (perftest's counts stay multiples of its post list, 32, and of its
# completion interval, 100).
set -u

ECHO=${1:?usage: bench_echo.sh path/to/pollcore-echo}
. "$(dirname "$0")/testbed.sh"
ADDR=$PC_TEST_ADDR
DEV=$PC_TEST_DEVICE
SCALE=${PC_BENCH_SCALE:-1}
TMP=$(mktemp -d)
SRV_PID=
cleanup() {
	[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	[ "${PC_IN_VM:-}" = 1 ] &&
		fail "running inside the soft-RoCE VM but no RDMA device is visible"
	echo "SKIP: no RDMA device here; run this benchmark inside tools/rxe-vm"
	exit 77
fi
for t in ib_send_lat ib_send_bw timeout; do
	command -v "$t" >/dev/null || fail "$t is not installed (tools/setup installs perftest)"
done
[ -e "/sys/class/infiniband/$DEV" ] || fail "no device $DEV (PC_TEST_DEVICE)"

# --- perftest --------------------------------------------------------------------------------
PT_PORT=18600
# perftest NAME TOOL ARGS...: server and client of TOOL on $DEV; the client's report in $TMP/NAME.
perftest() {
	local name=$1 tool=$2 spid i rc
	shift 2
	PT_PORT=$((PT_PORT + 1))
	timeout 120 "$tool" -d "$DEV" -i "$PC_TEST_PORT" -x "$PC_TEST_GID_INDEX" -F -p "$PT_PORT" "$@" >"$TMP/$name.srv" 2>&1 &
	spid=$!
	# the server needs a moment to listen; the client does not retry by itself
	for i in $(seq 60); do
		timeout 120 "$tool" -d "$DEV" -i "$PC_TEST_PORT" -x "$PC_TEST_GID_INDEX" -F -p "$PT_PORT" "$@" 127.0.0.1 >"$TMP/$name" 2>&1
		rc=$?
		[ "$rc" = 0 ] && break
		grep -q "Couldn't connect" "$TMP/$name" || break
		sleep 0.5
	done
	wait "$spid"
	[ "$rc" = 0 ] || fail "$tool $* (client) exited $rc: $(cat "$TMP/$name")"
}

# Prints column $2 (1-based) of perftest's result row for size $3.
pt_col() {
	awk -v c="$2" -v s="$3" '$1 == s && $2 ~ /^[0-9]+$/ { print $c; exit }' "$TMP/$1"
}

echo "== perftest baseline on $DEV (port $PC_TEST_PORT, GID $PC_TEST_GID_INDEX; OOB over TCP 127.0.0.1)"
N_LAT=$((3000 * SCALE))
N_BW=$((20000 * SCALE))
if [ -n "${PC_BENCH_SHORT:-}" ]; then
	N_LAT=$((300 * SCALE))
	N_BW=$((3200 * SCALE))
fi
perftest lat8 ib_send_lat -s 8 -n "$N_LAT"
perftest lat64 ib_send_lat -s 64 -n "$N_LAT"
perftest bw64 ib_send_bw -s 64 -n "$N_BW"
perftest bw64l ib_send_bw -s 64 -n "$N_BW" -l 32
perftest bw64srq ib_send_bw -s 64 -n "$N_BW" --use-srq
perftest bw64lsrq ib_send_bw -s 64 -n "$N_BW" -l 32 --use-srq
for f in lat8 lat64 bw64 bw64l bw64srq bw64lsrq; do
	sed -n '/#bytes/,/^-\{5,\}/p' "$TMP/$f" | sed "s/^/$f: /" | grep -v -- '-----'
done
# ib_send_lat reports half a round trip: t_typical (col 5) and the 99% percentile (col 8)
pt_rtt() {
	awk -v v="$(pt_col "$1" "$2" "$3")" 'BEGIN { if (v == "") exit 1; printf "%.2f", 2 * v }'
}
# ib_send_bw: MsgRate[Mpps] (col 5)
pt_rate() {
	awk -v v="$(pt_col "$1" 5 64)" 'BEGIN { if (v == "") exit 1; printf "%.0f", v * 1e6 }'
}
PT_RTT8=$(pt_rtt lat8 5 8) || fail "no ib_send_lat result for 8 bytes: $(cat "$TMP/lat8")"
PT_RTT8_99=$(pt_rtt lat8 8 8) || fail "no 99% figure in ib_send_lat"
PT_RTT64=$(pt_rtt lat64 5 64) || fail "no ib_send_lat result for 64 bytes: $(cat "$TMP/lat64")"
PT_RTT64_99=$(pt_rtt lat64 8 64) || fail "no 99% figure in ib_send_lat"
PT_BW=$(pt_rate bw64) || fail "no ib_send_bw result: $(cat "$TMP/bw64")"
PT_BWL=$(pt_rate bw64l) || fail "no ib_send_bw -l 32 result: $(cat "$TMP/bw64l")"
PT_BWS=$(pt_rate bw64srq) || fail "no ib_send_bw --use-srq result: $(cat "$TMP/bw64srq")"
PT_BWLS=$(pt_rate bw64lsrq) || fail "no ib_send_bw -l 32 --use-srq result: $(cat "$TMP/bw64lsrq")"

# --- pollcore-echo ---------------------------------------------------------------------------
# start_server ARGS...: pollcore-echo server in the background, listening.
start_server() {
	"$ECHO" server --addr "$ADDR" --no-numa "$@" >"$TMP/server.out" 2>&1 &
	SRV_PID=$!
	for i in $(seq 600); do
		grep -q 'listening on' "$TMP/server.out" && return 0
		kill -0 "$SRV_PID" 2>/dev/null ||
			fail "pollcore-echo server exited: $(cat "$TMP/server.out")"
		sleep 0.1
	done
	fail "pollcore-echo server is not listening after 60 s"
}
stop_server() {
	kill -TERM "$SRV_PID"
	wait "$SRV_PID"
	rc=$?
	SRV_PID=
	[ "$rc" = 0 ] || fail "pollcore-echo server exited $rc after SIGTERM: $(tail "$TMP/server.out")"
	grep -E '^pc-w' "$TMP/server.out" | sed "s/^/server$1:   /"
}

# pc NAME ARGS...: one client run; its output in $TMP/NAME.
pc() {
	local name=$1 rc
	shift
	timeout 300 "$ECHO" client "$ADDR" --no-numa "$@" >"$TMP/$name" 2>&1
	rc=$?
	[ "$rc" = 0 ] || fail "pollcore-echo client $* exited $rc: $(cat "$TMP/$name")"
	echo "$name: client $*"
	grep -E '^(requests|elapsed|rate|throughput|latency|pc-w)' "$TMP/$name" | sed "s/^/$name:   /"
}
pc_rate() { awk '$1 == "rate" { print $2; exit }' "$TMP/$1"; }
pc_p() {
	awk -v k="$2" '$1 == "latency" {
		for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); exit }
	}' "$TMP/$1"
}

echo "== pollcore-echo on $ADDR (workers busy-poll)"
start_server
pc lat8 --size 8 --count "$N_LAT" --window 1
pc lat64 --size 64 --count "$N_LAT" --window 1
pc rate1 --size 64 --count "$N_BW" --window 32
pc rate2 --size 64 --count $((N_BW / 2)) --connections 2 --window 32
stop_server ""
echo "== pollcore-echo on $ADDR (--idle hybrid: idle workers sleep on completion events)"
start_server --idle hybrid
pc hlat8 --size 8 --count "$N_LAT" --window 1 --idle hybrid
pc hrate1 --size 64 --count "$N_BW" --window 32 --idle hybrid
stop_server " (hybrid)"

# --- the table ----------------------------------------------------------------------------------
row() { # row LABEL PERFTEST POLLCORE
	awk -v l="$1" -v a="$2" -v b="$3" \
		'BEGIN { printf "%-44s %14s %14s %10.2f\n", l, a, b, (a > 0 ? b / a : 0) }'
}
echo
echo "== pollcore-echo vs perftest on $DEV (same boot; ratio = pollcore / perftest)"
echo "   round trip = request and response; ib_send_lat reports half of one, doubled here."
echo "   An echo request moves two messages: its rate is compared as 2 x requests/s."
printf "%-44s %14s %14s %10s\n" "figure" "perftest" "pollcore" "ratio"
row "round trip p50, 8 B (us)" "$PT_RTT8" "$(pc_p lat8 p50)"
row "round trip p99, 8 B (us)" "$PT_RTT8_99" "$(pc_p lat8 p99)"
row "round trip p50, 64 B (us)" "$PT_RTT64" "$(pc_p lat64 p50)"
row "round trip p99, 64 B (us)" "$PT_RTT64_99" "$(pc_p lat64 p99)"
R1=$(( $(pc_rate rate1) * 2 ))
R2=$(( $(pc_rate rate2) * 2 ))
row "msg/s 64 B vs ib_send_bw (1 conn, window 32)" "$PT_BW" "$R1"
row "msg/s 64 B vs ib_send_bw -l 32" "$PT_BWL" "$R1"
row "msg/s 64 B vs ib_send_bw --use-srq" "$PT_BWS" "$R1"
row "msg/s 64 B vs ib_send_bw -l 32 --use-srq" "$PT_BWLS" "$R1"
row "msg/s 64 B, 2 conns vs -l 32 --use-srq" "$PT_BWLS" "$R2"
row "hybrid idle: round trip p50, 8 B (us)" "$PT_RTT8" "$(pc_p hlat8 p50)"
row "hybrid idle: msg/s 64 B vs -l 32 --use-srq" "$PT_BWLS" "$(( $(pc_rate hrate1) * 2 ))"
