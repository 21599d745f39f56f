#!/bin/bash
# SPDX-License-Identifier: MIT
# interop suite: pollcore-echo against a peer nobody here wrote.
#   usage: test_interop.sh path/to/pollcore-echo
#
# Everywhere: bad usage is refused with a clear message and exit 2.
# On the test bed (tests/testbed.sh; in the VM: fe80::ff:fe00:1%d0 on rxe0): the server,
# port 7471, answers stock rdmacm-utils rdma_client several times, then
# pollcore-echo clients (sizes 1, 16 and 4096; 2 and 4 connections; 1 and 2
# workers) whose every byte is checked; a corrupting server and a too-large
# message are detected; SIGTERM stops the server with exit 0 and counters
# that match exactly what was sent. On a host without RDMA: exit 77.
set -u

ECHO=${1:?usage: test_interop.sh path/to/pollcore-echo}
. "$(dirname "$0")/testbed.sh"
ADDR=$PC_TEST_ADDR
TMP=$(mktemp -d)
SRV_PID=
cleanup() {
	[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# --- usage (no device needed) ----------------------------------------------------------
# usage_error EXPECTED-TEXT ARGS...: testbed.sh's, and the usage text on stderr.
usage_error() {
	pc_usage_error "$1" "$ECHO" "${@:2}"
	grep -q '^usage: pollcore-echo server' "$TMP/u.stderr" ||
		fail "pollcore-echo ${*:2}: no usage text on stderr"
}
usage_error "missing mode: server or client"
usage_error "unknown mode 'serve' (expected server or client)" serve
usage_error "the server address is missing" client
usage_error "unexpected argument 'extra'" client "$ADDR" extra
usage_error "unexpected argument 'extra'" server extra
usage_error "--port: '0' is not a number from 1 to 65535" server --port 0
usage_error "--port: '65536' is not a number from 1 to 65535" client "$ADDR" --port 65536
usage_error "--count: 'ten' is not a number" client "$ADDR" --count ten
usage_error "--count: '-1' is not a number" client "$ADDR" --count -1
usage_error "--size: '0' is not a size from 1 to 1048576" client "$ADDR" --size 0
usage_error "--window: '65' is not a number from 1 to 64" client "$ADDR" --window 65
usage_error "--max-size: '0' is not a size" server --max-size 0
usage_error "unknown option or missing value: '--bogus'" server --bogus
usage_error "unknown option or missing value: '--connections'" client "$ADDR" --connections
"$ECHO" --help >"$TMP/u.stdout" 2>&1 || fail "pollcore-echo --help exited non-zero"
grep -q '^usage: pollcore-echo server' "$TMP/u.stdout" || fail "--help prints no usage"
ok "usage errors: exit 2 with a message naming the option"

# --- the device ------------------------------------------------------------------------
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	[ "${PC_IN_VM:-}" = 1 ] &&
		fail "running inside the soft-RoCE VM but no RDMA device is visible"
	echo "SKIP: no RDMA device here; run this suite inside tools/rxe-vm"
	exit 77
fi
for t in rdma_client timeout; do
	command -v "$t" >/dev/null || fail "$t is not installed (tools/setup installs rdmacm-utils)"
done

# start_server NAME ARGS...: starts it in the background and waits until it listens.
start_server() {
	local name=$1 i
	shift
	"$ECHO" server --addr "$ADDR" --no-numa "$@" >"$TMP/$name.out" 2>&1 &
	SRV_PID=$!
	for i in $(seq 600); do
		grep -q 'listening on' "$TMP/$name.out" && return 0
		kill -0 "$SRV_PID" 2>/dev/null || fail "$name exited before listening"
		sleep 0.1
	done
	fail "$name is not listening after 60 s"
}

# stop_server NAME: SIGTERM, then it must exit 0 within 60 s.
stop_server() {
	local rc
	kill -TERM "$SRV_PID" || fail "$1 is gone before SIGTERM"
	timeout 60 tail --pid="$SRV_PID" -f /dev/null || fail "$1 still runs 60 s after SIGTERM"
	wait "$SRV_PID"
	rc=$?
	SRV_PID=
	[ "$rc" = 0 ] || fail "$1 exited $rc after SIGTERM, expected 0"
}

# client NAME ARGS...: a pollcore-echo client that must succeed.
client() {
	local name=$1 rc
	shift
	timeout 300 "$ECHO" client "$ADDR" --no-numa "$@" >"$TMP/$name.out" 2>&1
	rc=$?
	[ "$rc" = 0 ] || fail "client $* exited $rc"
	grep -q '^requests .*every byte checked' "$TMP/$name.out" || fail "client $*: no summary"
	grep -Eq '^latency +p50 [0-9.]+ us +p99 [0-9.]+ us +p999 [0-9.]+ us' "$TMP/$name.out" ||
		fail "client $*: no latency percentiles"
	grep -q "^pc-w0-$PC_TEST_DEVICE " "$TMP/$name.out" || fail "client $*: no worker stats"
	sed -n 's/^\(requests\|rate\|latency\) *//p' "$TMP/$name.out" | paste -sd' ' |
		sed "s/^/ok: client $* -> /"
}

# client_fails NAME EXPECTED-TEXT ARGS...: a client that must fail, saying why.
client_fails() {
	local name=$1 want=$2 rc
	shift 2
	timeout 300 "$ECHO" client "$ADDR" --no-numa "$@" >"$TMP/$name.out" 2>&1
	rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "client $* exited $rc, expected a failure"
	grep -qF -- "$want" "$TMP/$name.out" ||
		fail "client $*: the failure does not say '$want'"
	ok "client $* fails: $(grep -F -- "$want" "$TMP/$name.out" | head -n 1)"
}

# --- stock rdma_client, then pollcore clients, against one server ------------------------
start_server server
N_RAW=5
for i in $(seq $N_RAW); do
	timeout 60 rdma_client -s "$ADDR" >"$TMP/rdma_client.out" 2>&1
	rc=$?
	[ "$rc" = 0 ] || fail "rdma_client -s $ADDR (run $i) exited $rc: $(cat "$TMP/rdma_client.out")"
done
ok "rdma_client -s $ADDR: $N_RAW runs, exit 0 each (16 bytes sent and echoed)"
grep -q 'connected (raw peer)' "$TMP/server.out" || fail "the server did not see a raw peer"

client c1 --count 1000 --connections 2 --size 1
client c16 --count 1000 --connections 2 --size 16
client c4096 --count 1000 --connections 2 --size 4096
client cwide --count 500 --connections 4 --size 16 --window 64 --workers 2
# every request and rdma_client's message, exactly once each
want_msgs=$((N_RAW + 2000 * 3 + 2000))
want_bytes=$((N_RAW * 16 + 2000 * (1 + 16 + 4096) + 2000 * 16))
want_conns=$((N_RAW + 2 * 3 + 4 + 1)) # and the one refused a too-large message

client_fails big "exceeds the peer's maximum 4096" --count 3 --size 8192
client_fails refused "cannot connect to $ADDR port 7999" --port 7999 --count 1
stop_server server
want="$want_msgs messages ($want_bytes bytes) echoed on $want_conns connections, 0 errors"
grep -qF "pollcore-echo server: Terminated: $want" "$TMP/server.out" ||
	fail "server totals: want '$want', got: $(grep Terminated "$TMP/server.out")"
grep -q "^pc-w0-$PC_TEST_DEVICE " "$TMP/server.out" || fail "the server printed no worker stats"
ok "server: SIGTERM -> exit 0; $want_msgs messages, $want_bytes bytes, $want_conns connections"

# --- the client's checks catch a corrupting server ------------------------------------------
start_server corrupt --corrupt-every 50
client_fails corrupted "request 49: byte 63 of 64 is" --count 200 --size 64
stop_server corrupt
echo "PASS"
