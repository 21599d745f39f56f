#!/bin/bash
# SPDX-License-Identifier: MIT
# rdma suite: pollcore-stat against a running pollcore-echo server and client.
#   usage: test_stat.sh path/to/pollcore-echo path/to/pollcore-stat
#
# Everywhere: bad usage is refused with exit 2.
# On the test bed (tests/testbed.sh; in the VM rxe0 and fe80::ff:fe00:1%d0):
#  - the server's segment /dev/shm/pollcore.<pid> exists, mode 0600, and
#    --list shows the server live;
#  - while a client runs, two --json snapshots of the server (the second
#    as soon as all have grown, at most 60 s later) show every activity
#    counter grown (loops, completions, messages each way, doorbells, SRQ
#    posts), both connections up with their messages and bytes grown;
#    the client's pc_call round-trip histogram grew, with ordered,
#    non-zero percentiles; the live table and --conns print them;
#  - the client, stopped, and a server stopped with SIGTERM leave no segment;
#  - the live server's segment chowned to another user (65534): as root,
#    'pollcore-stat PID' and --json refuse it (exit 1, naming the file and
#    both uids), --list skips it and says so; --any-user reads it; a user
#    who is not root may not use --any-user (exit 1); its owner reads it;
#    with mode 0644 it is refused (exit 1), --any-user or not;
#  - a SIGKILLed server's segment is reported stale by --list, by
#    'pollcore-stat PID' (exit 1) and by --json (state stale, no counters);
#    chowned to another user, --clean keeps it and --clean --any-user
#    removes it.
# On a host without RDMA: exit 77.
set -u

ECHO=${1:?usage: test_stat.sh path/to/pollcore-echo path/to/pollcore-stat}
STAT=${2:?usage: test_stat.sh path/to/pollcore-echo path/to/pollcore-stat}
. "$(dirname "$0")/testbed.sh"
ADDR=$PC_TEST_ADDR
PORT=7481
TMP=$(mktemp -d)
SRV_PID=
CLI_PID=
cleanup() {
	[ -n "$CLI_PID" ] && kill -KILL "$CLI_PID" 2>/dev/null
	[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# --- usage (no device needed) ----------------------------------------------------------
usage_error() { pc_usage_error "$1" "$STAT" "${@:2}"; }
usage_error "missing PID" 
usage_error "'abc' is not a process id" abc
usage_error "--interval: '0' is not a number" 1 --interval 0
usage_error "unknown option or missing value: '--bogus'" --bogus
usage_error "--json prints one snapshot" 1 --json --conns
"$STAT" --help | grep -q '^usage: pollcore-stat PID' || fail "--help prints no usage"
ok "usage errors: exit 2"

# --- the device ------------------------------------------------------------------------
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	[ "${PC_IN_VM:-}" = 1 ] &&
		fail "running inside the soft-RoCE VM but no RDMA device is visible"
	echo "SKIP: no RDMA device here; run this suite inside tools/rxe-vm"
	exit 77
fi

start_server() {
	local i
	"$ECHO" server --addr "$ADDR" --port $PORT --no-numa >"$TMP/server.out" 2>&1 &
	SRV_PID=$!
	for i in $(seq 600); do
		grep -q 'listening on' "$TMP/server.out" && return 0
		kill -0 "$SRV_PID" 2>/dev/null || fail "the server exited before listening"
		sleep 0.1
	done
	fail "the server is not listening after 60 s"
}

# jqf FILE EXPR: evaluates EXPR on FILE; fails the test unless it prints true.
jqt() {
	local r
	r=$(jq -e "$2" "$1" 2>&1) || fail "$3: jq '$2' on $(basename "$1") gave '$r'"
}

start_server
SEG=/dev/shm/pollcore.$SRV_PID
[ -f "$SEG" ] || fail "no $SEG while the server runs"
[ "$(stat -c %a "$SEG")" = 600 ] || fail "$SEG has mode $(stat -c %a "$SEG"), expected 600"
"$STAT" --list >"$TMP/list.out" 2>&1 || fail "--list exited non-zero"
grep -Eq "^$SRV_PID +1 +pollcore-echo +$PC_TEST_DEVICE +1 .* live \(pollcore\.$SRV_PID\)" \
	"$TMP/list.out" || fail "--list does not show the server live"
ok "the server's segment: $SEG, mode 600, listed live"

# a client that runs for longer than the test looks: stopped with SIGINT
"$ECHO" client "$ADDR" --port $PORT --no-numa --count 100000000 --connections 2 --window 8 \
	>"$TMP/client.out" 2>&1 &
CLI_PID=$!
for i in $(seq 300); do
	"$STAT" --json "$SRV_PID" >"$TMP/a.json" 2>"$TMP/a.err" || fail "--json $SRV_PID exited non-zero"
	jq -e '[.segments[0].conns[] | select(.state == "up" and .msgs_recv > 0)] | length == 2' \
		"$TMP/a.json" >/dev/null && break
	kill -0 "$CLI_PID" 2>/dev/null || fail "the client exited early"
	sleep 0.2
done
jqt "$TMP/a.json" '[.segments[0].conns[] | select(.state == "up")] | length == 2' \
	"two connections up within 60 s"
"$STAT" --json "$CLI_PID" >"$TMP/ca.json" 2>"$TMP/ca.err" || fail "--json of the client failed"
# all_grew: every figure checked below grew between the snapshots (one jq:
# under TCG each process start costs a noticeable part of a second)
all_grew() {
	jq -e -n --slurpfile a "$TMP/a.json" --slurpfile b "$TMP/b.json" \
		--slurpfile ca "$TMP/ca.json" --slurpfile cb "$TMP/cb.json" '
		def grew($o; $n; $fs): all($fs[]; . as $f | $n[$f] != null and $n[$f] > $o[$f]);
		$a[0].segments[0] as $x | $b[0].segments[0] as $y |
		grew($x.workers[0].counters; $y.workers[0].counters; ["loops", "polls",
			"completions", "rx_msgs", "tx_msgs", "wrs_posted", "doorbells",
			"srq_posted", "srq_doorbells"]) and
		grew($x.workers[0]; $y.workers[0]; ["publishes"]) and
		all($x.conns[]; . as $o | any($y.conns[]; .qp_num == $o.qp_num and
			grew($o; .; ["msgs_recv", "msgs_sent", "bytes_recv", "bytes_sent"]))) and
		grew($ca[0].segments[0].workers[0].rpc_latency_ns;
			$cb[0].segments[0].workers[0].rpc_latency_ns; ["count"])' >/dev/null 2>&1
}
# the second snapshots: as soon as every figure has grown, at most 60 s
# after the first
# grown: all_grew held, so the comparisons below that it made are not made
# again one jq at a time (two process starts each: a third of the test's
# time under TCG); when it did not hold, they run and name what did not grow
grown=0
for _ in $(seq 300); do
	sleep 0.2
	"$STAT" --json "$SRV_PID" >"$TMP/b.json" 2>"$TMP/b.err" || fail "second --json exited non-zero"
	"$STAT" --json "$CLI_PID" >"$TMP/cb.json" 2>"$TMP/cb.err" || fail "second client --json failed"
	all_grew && { grown=1; break; }
done

# the server: every activity counter grew between the snapshots
jqt "$TMP/a.json" ".pid == $SRV_PID and .segments[0].state == \"live\" and
	.segments[0].comm == \"pollcore-echo\" and .segments[0].devices == \"$PC_TEST_DEVICE\" and
	.segments[0].workers[0].name == \"pc-w0-$PC_TEST_DEVICE\"" "server identity"
[ $grown = 1 ] ||
for c in loops polls completions rx_msgs tx_msgs wrs_posted doorbells srq_posted srq_doorbells; do
	jqt "$TMP/b.json" "(.segments[0].workers[0].counters.$c) >
		$(jq ".segments[0].workers[0].counters.$c" "$TMP/a.json")" "server counter $c grew"
done
[ $grown = 1 ] || jqt "$TMP/b.json" ".segments[0].workers[0].publishes >
	$(jq '.segments[0].workers[0].publishes' "$TMP/a.json")" "the worker published again"
jqt "$TMP/b.json" '.segments[0].workers[0].counters.conns == 2 and
	.segments[0].workers[0].age_ms < 1000' "2 conns, fresh figures"
for q in $(jq '.segments[0].conns[].qp_num' "$TMP/a.json"); do
	[ $grown = 1 ] ||
	for f in msgs_recv msgs_sent bytes_recv bytes_sent; do
		jqt "$TMP/b.json" "(.segments[0].conns[] | select(.qp_num == $q) | .$f) >
			$(jq ".segments[0].conns[] | select(.qp_num == $q) | .$f" "$TMP/a.json")" \
			"conn qp $q: $f grew"
	done
	jqt "$TMP/b.json" ".segments[0].conns[] | select(.qp_num == $q) |
		.passive and (.raw | not) and .peer_port > 0 and (.peer | length) > 0" \
		"conn qp $q: identity"
done
ok "server: $(jq -c '.segments[0].workers[0].counters | {loops, rx_msgs, tx_msgs, doorbells}' \
	"$TMP/a.json") -> $(jq -c '.segments[0].workers[0].counters | {loops, rx_msgs, tx_msgs, doorbells}' \
	"$TMP/b.json")"

# the client: its pc_call round trips
[ $grown = 1 ] || jqt "$TMP/cb.json" ".segments[0].workers[0].rpc_latency_ns.count >
	$(jq '.segments[0].workers[0].rpc_latency_ns.count' "$TMP/ca.json")" "client round trips grew"
jqt "$TMP/cb.json" '.segments[0].workers[0].rpc_latency_ns |
	.p50 > 0 and .p50 <= .p99 and .p99 <= .p999 and .p999 <= .max and .mean > 0' \
	"client percentiles ordered"
ok "client round trips: $(jq -c '.segments[0].workers[0].rpc_latency_ns' "$TMP/cb.json")"

# the live table and the connection table
"$STAT" "$SRV_PID" --count 2 --interval 0.5 >"$TMP/table.out" 2>&1 || fail "the live table failed"
# --no-numa: the worker is unbound, so PC_IDLE_AUTO made it hybrid
[ "$(grep -Ec "^pc-w0-$PC_TEST_DEVICE +hybrid +[0-9.]+[kMG]? +[0-9.]+ " "$TMP/table.out")" = 2 ] ||
	fail "the live table has not two rows of figures for an unbound (hybrid) pc-w0-$PC_TEST_DEVICE"
jqt "$TMP/b.json" '.segments[0].workers[0].counters | .idle_policy == 0 and .busy_poll == 0' \
	"the server's policy: PC_IDLE_AUTO, not busy-polling"
"$STAT" "$CLI_PID" --count 1 --interval 0.5 >"$TMP/ctable.out" 2>&1 || fail "client table failed"
grep -Eq "^pc-w0-$PC_TEST_DEVICE .* [0-9.]+ +[0-9.]+ +[0-9.]+$" "$TMP/ctable.out" ||
	fail "the client's table shows no latency percentiles"
"$STAT" "$SRV_PID" --conns >"$TMP/conns.out" 2>&1 || fail "--conns failed"
[ "$(grep -Ec '^ +[0-9]+ +0 +0x[0-9a-f]+ up ' "$TMP/conns.out")" = 2 ] ||
	fail "--conns does not list the two connections up"
ok "live table and --conns: $(grep -c . "$TMP/table.out") and $(grep -c . "$TMP/conns.out") lines"

# another user's segment (the live server's, chowned): not read as root's own
OTHER="another user's segment (owner uid 65534, you are uid 0)"
chown 65534:65534 "$SEG" || fail "chown $SEG"
"$STAT" "$SRV_PID" --count 1 --interval 0.2 >"$TMP/o.out" 2>"$TMP/o.err"
rc=$?
[ "$rc" = 1 ] || fail "pollcore-stat PID of another user's segment exited $rc, expected 1"
grep -qF "pollcore-stat: /dev/shm/pollcore.$SRV_PID: $OTHER" "$TMP/o.err" ||
	fail "pollcore-stat PID does not say whose the segment is: $(cat "$TMP/o.err")"
grep -q "pc-w0" "$TMP/o.out" && fail "pollcore-stat PID showed another user's workers"
"$STAT" --json "$SRV_PID" >"$TMP/o.json" 2>"$TMP/oj.err" && fail "--json of another user's segment exited 0"
grep -qF "$OTHER" "$TMP/oj.err" || fail "--json does not say whose the segment is"
"$STAT" --list >"$TMP/o.list" 2>&1 || fail "--list exited non-zero"
grep -Eq "^$SRV_PID " "$TMP/o.list" && fail "--list shows another user's segment as if it were ours"
grep -qF "skipped /dev/shm/pollcore.$SRV_PID: $OTHER" "$TMP/o.list" ||
	fail "--list does not say it skipped another user's segment: $(cat "$TMP/o.list")"
"$STAT" --list --json >"$TMP/o.list.json" 2>&1 || fail "--list --json exited non-zero"
jqt "$TMP/o.list.json" ".[] | select(.name == \"pollcore.$SRV_PID\") |
	.state == \"skipped\" and .owner_uid == 65534 and (has(\"pid\") | not)" \
	"--list --json marks another user's segment skipped"
# root, on purpose
usage_error "--any-user goes with PID, --list or --clean" --any-user
"$STAT" --any-user "$SRV_PID" --count 1 --interval 0.5 >"$TMP/any.out" 2>&1 ||
	fail "--any-user PID failed: $(cat "$TMP/any.out")"
grep -Eq "^pc-w0-$PC_TEST_DEVICE +hybrid " "$TMP/any.out" || fail "--any-user PID shows no worker row"
"$STAT" --any-user --list >"$TMP/any.list" 2>&1 || fail "--any-user --list exited non-zero"
grep -Eq "^$SRV_PID +1 +pollcore-echo .* live \(pollcore\.$SRV_PID\)" "$TMP/any.list" ||
	fail "--any-user --list does not show the server live"
grep -q "skipped" "$TMP/any.list" && fail "--any-user --list still skips it"
# not root: --any-user is refused; the segment's owner reads it without
setpriv --reuid=65533 --regid=65533 --clear-groups "$STAT" --any-user --list \
	>"$TMP/nr.out" 2>"$TMP/nr.err"
rc=$?
[ "$rc" = 1 ] || fail "--any-user as uid 65533 exited $rc, expected 1"
grep -qF "pollcore-stat: --any-user: only root may read other users' segments (you are uid 65533)" \
	"$TMP/nr.err" || fail "--any-user as uid 65533: $(cat "$TMP/nr.err")"
setpriv --reuid=65534 --regid=65534 --clear-groups "$STAT" --json "$SRV_PID" >"$TMP/own.json" \
	2>"$TMP/own.err" || fail "its owner (uid 65534) cannot read it: $(cat "$TMP/own.err")"
jqt "$TMP/own.json" '.segments[0].state == "live" and (.segments[0].workers | length) == 1' \
	"its owner reads it"
chown 0:0 "$SEG" || fail "chown $SEG back"
# others may access it: not what an engine makes, not trusted
chmod 0644 "$SEG"
"$STAT" --any-user "$SRV_PID" --count 1 >"$TMP/m.out" 2>"$TMP/m.err"
rc=$?
[ "$rc" = 1 ] || fail "pollcore-stat PID of a segment of mode 0644 exited $rc, expected 1"
grep -qF "pollcore.$SRV_PID: mode 0644" "$TMP/m.err" || fail "mode 0644: $(cat "$TMP/m.err")"
chmod 0600 "$SEG"
ok "another user's segment: refused (exit 1), skipped by --list, read with --any-user as root only; mode 0644 refused"

# the client stops (destroy): its segment goes
kill -INT "$CLI_PID"
timeout 60 tail --pid="$CLI_PID" -f /dev/null || fail "the client still runs 60 s after SIGINT"
wait "$CLI_PID"
[ ! -e "/dev/shm/pollcore.$CLI_PID" ] || fail "the stopped client left its segment"
CLI_PID=
ok "the client stopped: no segment left"

# a SIGKILLed server: stale, reported as such, cleaned on request
kill -KILL "$SRV_PID"
wait "$SRV_PID" 2>/dev/null
[ -f "$SEG" ] || fail "the killed server's segment is not there (nothing to detect)"
"$STAT" --list >"$TMP/list2.out" 2>&1 || fail "--list exited non-zero"
grep -Eq "^$SRV_PID .* stale: the process is gone \(pollcore\.$SRV_PID\)" "$TMP/list2.out" ||
	fail "--list does not report the killed server's segment stale"
grep -Eq "^$SRV_PID .* live " "$TMP/list2.out" && fail "--list shows the killed server live"
"$STAT" "$SRV_PID" --count 1 >"$TMP/dead.out" 2>"$TMP/dead.err" && fail "pollcore-stat PID of a dead server exited 0"
grep -q "stale: the process is gone" "$TMP/dead.err" || fail "pollcore-stat PID does not say stale"
grep -q "pc-w0" "$TMP/dead.out" && fail "pollcore-stat PID showed a dead server's workers"
"$STAT" --json "$SRV_PID" >"$TMP/dead.json" 2>/dev/null && fail "--json of a dead server exited 0"
jqt "$TMP/dead.json" '.segments[0].state == "stale" and (.segments[0] | has("workers") | not)' \
	"--json marks the dead server stale, without counters"
# another user's, stale: root's --clean keeps it, --clean --any-user removes it
chown 65534:65534 "$SEG" || fail "chown $SEG"
"$STAT" --clean "$SRV_PID" >"$TMP/clean0.out" 2>&1 || fail "--clean failed: $(cat "$TMP/clean0.out")"
grep -qF "kept /dev/shm/pollcore.$SRV_PID: $OTHER" "$TMP/clean0.out" ||
	fail "--clean does not say it kept another user's segment: $(cat "$TMP/clean0.out")"
[ -e "$SEG" ] || fail "--clean removed another user's segment"
"$STAT" --clean --any-user "$SRV_PID" >"$TMP/clean.out" 2>&1 || fail "--clean --any-user failed"
grep -q "removed /dev/shm/pollcore.$SRV_PID" "$TMP/clean.out" || fail "--clean --any-user did not say removed"
[ ! -e "$SEG" ] || fail "--clean --any-user left $SEG"
SRV_PID=
ok "SIGKILLed server: stale in --list, PID and --json; another user's: --clean kept it, --clean --any-user removed it"

# a server stopped with SIGTERM (pc_engine_destroy) removes its own
start_server
SEG=/dev/shm/pollcore.$SRV_PID
[ -f "$SEG" ] || fail "no $SEG"
"$STAT" --clean "$SRV_PID" >"$TMP/clean2.out" 2>&1
grep -q "kept /dev/shm/pollcore.$SRV_PID: its process runs" "$TMP/clean2.out" ||
	fail "--clean touched a live server's segment"
kill -TERM "$SRV_PID"
timeout 60 tail --pid="$SRV_PID" -f /dev/null || fail "the server still runs 60 s after SIGTERM"
wait "$SRV_PID" || fail "the server exited non-zero after SIGTERM"
SRV_PID=
[ ! -e "$SEG" ] || fail "the server stopped with SIGTERM left $SEG"
ok "SIGTERM: the live segment was kept by --clean, then removed by the server"
echo "PASS"
