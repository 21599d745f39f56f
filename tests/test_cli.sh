#!/bin/bash
# SPDX-License-Identifier: MIT
#
# test_cli.sh SRCDIR BUILDDIR [device]: the tools' one command line
# (docs/tools.md, tools/cli.c).
#
# Without "device" (unit suite, on the host; no RDMA device needed):
#  - each tool's --help lists the convention's options that the tool takes,
#    and no short letter means two things across the tools' --help;
#  - bad usage exits 2 and prints nothing on stdout;
#  - each deprecated spelling prints its note on stderr and works (the run
#    goes on to what only the new spelling's value explains);
#  - --json prints one valid JSON object where a tool can run without a
#    device (bench's client reports its failed engine in JSON, topo, stat);
#  - pollcore-roundtrip with no device exits 1, naming the device it looked
#    for and why it failed (skipped where a device is present).
# With "device" (rdma and tools suites, in the VM): roundtrip --json, and
# echo and kv servers and clients with --json, parsed as JSON.
set -uo pipefail
src=${1:?usage: test_cli.sh SRCDIR BUILDDIR [device]}
build=${2:?usage: test_cli.sh SRCDIR BUILDDIR [device]}
mode=${3:-host}
T=$build/tools
TMP=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
. "$src/tests/testbed.sh"

json_ok() { # FILE WHAT: FILE holds exactly one JSON object
	python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); assert isinstance(o, dict)' "$1" \
		2>"$TMP/json.err" || fail "$2: not one JSON object: $(head -c 600 "$1") $(cat "$TMP/json.err")"
}

# run PROG ARGS...: $rc, $TMP/out, $TMP/err
run() { "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }

if [ "$mode" = device ]; then
	pc_need_device
	run "$T/pollcore-roundtrip" --device "$PC_TEST_DEVICE" --count 200 --json
	[ "$rc" = 0 ] || fail "roundtrip --json exited $rc: $(cat "$TMP/err")"
	json_ok "$TMP/out" "pollcore-roundtrip --json"
	grep -q '"check": "ok"' "$TMP/out" || fail "roundtrip --json: $(cat "$TMP/out")"
	ok "pollcore-roundtrip --json"

	serve() { # NAME PROG ARGS...: a server with --json on a port of its own; $spid
		local name=$1 i
		shift
		"$@" --addr "$PC_TEST_ADDR" --no-numa --json >"$TMP/$name.json" 2>"$TMP/$name.err" &
		spid=$!
		pids+=("$spid")
		for i in $(seq 300); do
			grep -q listening "$TMP/$name.err" && return 0
			kill -0 "$spid" 2>/dev/null || fail "$name server died: $(cat "$TMP/$name.err")"
			sleep 0.1
		done
		fail "$name server: not listening"
	}
	stop() { # NAME: SIGTERM, exit 0, one JSON object on stdout
		kill -TERM "$spid"
		wait "$spid" || fail "$1 server exited $? after SIGTERM: $(cat "$TMP/$1.err")"
		json_ok "$TMP/$1.json" "$1 server --json"
	}
	serve echo "$T/pollcore-echo" server --port 19471
	run "$T/pollcore-echo" client "$PC_TEST_ADDR" --port 19471 --count 500 --no-numa --json
	[ "$rc" = 0 ] || fail "echo client exited $rc: $(cat "$TMP/err")"
	json_ok "$TMP/out" "pollcore-echo client --json"
	grep -q '"requests": 500' "$TMP/out" || fail "echo client --json: $(cat "$TMP/out")"
	stop echo
	grep -q '"messages": 500' "$TMP/echo.json" || fail "echo server --json: $(cat "$TMP/echo.json")"
	ok "pollcore-echo server and client --json"

	serve kv "$T/pollcore-kv" server --port 19491
	run "$T/pollcore-kv" client "$PC_TEST_ADDR" --port 19491 --time 0.5 --no-numa --json
	[ "$rc" = 0 ] || fail "kv client exited $rc: $(cat "$TMP/err")"
	json_ok "$TMP/out" "pollcore-kv client --json"
	stop kv
	ok "pollcore-kv server and client --json"
	exit 0
fi

# --- --help lists the convention's options each tool takes ------------------------------------
help_has() { # TOOL OPTION...
	local tool=$1 o h
	shift
	h=$("$T/$tool" --help 2>&1) || fail "$tool --help exited non-zero"
	for o in "$@"; do
		grep -qE -- "$o([^a-z-]|$)" <<<"$h" || fail "$tool --help does not list $o"
	done
	printf '%s\n' "$h" >"$TMP/help.$tool"
}
help_has pollcore-roundtrip --device --count --size --json --help
help_has pollcore-echo --addr --port --device --workers --idle --no-numa --json --count --size \
	--connections --window
help_has pollcore-bench --addr --port --device --workers --idle --no-numa --json --time --count \
	--size --connections --window
help_has pollcore-kv --addr --port --device --workers --idle --no-numa --json --time \
	--connections --window
help_has pollcore-nvmf --addr --port --device --workers --idle --no-numa --json --bs
help_has pollcore-stat --count --json
help_has pollcore-topo --device --workers --json
python3 "$src/tools/pollcore-tune" --help >"$TMP/help.pollcore-tune" 2>&1 ||
	fail "pollcore-tune --help exited non-zero"
for o in --device --time --size --json; do
	grep -qE -- "$o([^a-z-]|$)" "$TMP/help.pollcore-tune" || fail "pollcore-tune --help lacks $o"
done
# one meaning per short letter: every "-x|--long" or "-x, --long" of the helps
pairs=$(cat "$TMP"/help.* | grep -oE -- '(^|[[ ])-[a-zA-Z](\||, )--[a-z][a-z0-9-]*' |
	sed -E 's/^[[ ]//; s/(\||, )/ /' | sort -u)
[ "$(wc -l <<<"$pairs")" -ge 10 ] || fail "found too few short options in the helps: $pairs"
dups=$(awk '{ print $1 }' <<<"$pairs" | uniq -d)
[ -z "$dups" ] || fail "short letters with two meanings: $(grep -E -- "^($(paste -sd'|' <<<"$dups")) " <<<"$pairs")"
ok "--help lists the convention's options; $(wc -l <<<"$pairs") short letters, one meaning each"

# --- bad usage: exit 2 -------------------------------------------------------------------------
usage2() { pc_usage_error "$@"; }
usage2 "unknown option or missing value: '--bogus'" "$T/pollcore-roundtrip" --bogus
usage2 "unknown option or missing value: '--bogus'" "$T/pollcore-echo" server --bogus
usage2 "unknown option or missing value: '--bogus'" "$T/pollcore-bench" client x --bogus
usage2 "unknown option or missing value: '--bogus'" "$T/pollcore-kv" server --bogus
usage2 "unknown option or missing value: '--bogus'" "$T/pollcore-nvmf" --bogus
usage2 "unknown option or missing value: '--bogus'" "$T/pollcore-stat" --bogus
usage2 "unknown option or missing value: '--bogus'" "$T/pollcore-topo" --bogus
usage2 "--idle: 'lazy' is not busy, hybrid or auto" "$T/pollcore-echo" server --idle lazy
usage2 "--time: '0' is not a number of seconds" "$T/pollcore-kv" client x --time 0
usage2 "--size: '1x' is not a size" "$T/pollcore-roundtrip" --size 1x
usage2 "--workers: '0'" "$T/pollcore-topo" --workers 0
run python3 "$src/tools/pollcore-tune" --bogus
[ "$rc" = 2 ] || fail "pollcore-tune --bogus exited $rc, expected 2"
ok "bad usage exits 2 in every tool"

# --- deprecated spellings: a note, and they work -----------------------------------------------
alias_ok() { # OLD NOW WANT PROG ARGS...: the note, and WANT on stderr (what the new spelling does)
	local old=$1 now=$2 want=$3
	shift 3
	run "$@"
	grep -qF -- "$old is deprecated, use $now" "$TMP/err" ||
		fail "${1##*/} $old: no deprecation note: $(cat "$TMP/err")"
	grep -qF -- "$want" "$TMP/err" || fail "${1##*/} $old did not act as $now: $(cat "$TMP/err")"
}
# each run fails later, on what only the new option's value explains
alias_ok --bind --addr "--port: '0'" "$T/pollcore-echo" server --bind 127.0.0.1 --port 0
alias_ok --busy "--idle busy" "--port: '0'" "$T/pollcore-echo" server --busy --port 0
alias_ok --depth --window "--keys 10 is fewer than the 32 calls in flight" \
	"$T/pollcore-kv" client x --depth 32 --keys 10
alias_ok --block-size --bs "--bs: '1024' is neither 512 nor 4096" \
	"$T/pollcore-nvmf" --addr x --nqn n --ram 1m --block-size 1024
alias_ok --duration --time "--count and --time exclude each other" \
	"$T/pollcore-bench" client x -m rpc -n 5 --duration 1
alias_ok --bind --addr "--port: '0'" "$T/pollcore-bench" server --bind=127.0.0.1 --port 0
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	alias_ok --port --ib-port "(port 2, gid index 0)" "$T/pollcore-roundtrip" --port 2
fi
run python3 "$src/tools/pollcore-tune" --duration 0
grep -qF -- "--duration is deprecated, use --time" "$TMP/err" || fail "pollcore-tune --duration: no note"
ok "deprecated spellings print their note and act as the new ones"

# --- --json where no device is needed ----------------------------------------------------------
run "$T/pollcore-bench" client 127.0.0.1 -m rpc -n 10 --json
[ -s "$TMP/out" ] || fail "bench client --json printed nothing (exit $rc): $(cat "$TMP/err")"
json_ok "$TMP/out" "pollcore-bench client --json"
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	[ "$rc" = 1 ] || fail "bench client without a device exited $rc, expected 1"
	grep -q '"check": "failed"' "$TMP/out" || fail "bench --json without a device: $(cat "$TMP/out")"
fi
for xml in "$src"/tests/data/topologies/*.xml; do
	run "$T/pollcore-topo" --xml "$xml" --workers 2 --json
	[ "$rc" = 0 ] || fail "pollcore-topo --xml $xml --json exited $rc: $(cat "$TMP/err")"
	json_ok "$TMP/out" "pollcore-topo --json ($xml)"
done
run "$T/pollcore-stat" --list --json
[ "$rc" = 0 ] || fail "pollcore-stat --list --json exited $rc"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/out" || fail "pollcore-stat --list --json"
ok "--json prints valid JSON (bench client, topo, stat)"

# --- roundtrip without a device: exit 1, and says which and why ---------------------------------
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	run "$T/pollcore-roundtrip"
	[ "$rc" = 1 ] || fail "pollcore-roundtrip without a device exited $rc, expected 1"
	grep -qF "cannot open the first RDMA device" "$TMP/err" &&
		grep -qF "no RDMA device found" "$TMP/err" ||
		fail "pollcore-roundtrip without a device: '$(cat "$TMP/err")'"
	run "$T/pollcore-roundtrip" --device mlx5_7
	[ "$rc" = 1 ] && grep -qF "cannot open mlx5_7" "$TMP/err" ||
		fail "pollcore-roundtrip --device mlx5_7 (exit $rc): '$(cat "$TMP/err")'"
	ok "pollcore-roundtrip without a device: exit 1, '$(head -1 "$TMP/err")'"
fi
exit 0
