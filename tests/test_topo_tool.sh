#!/bin/sh
# SPDX-License-Identifier: MIT
# Unit test of tools/pollcore-topo: runs it on every topology in
# $PC_TOPOLOGIES and checks its JSON against facts that hwloc's own
# hwloc-calc and lstopo derive from the same file.
#   usage: test_topo_tool.sh path/to/pollcore-topo
set -eu

TOOL=${1:?usage: test_topo_tool.sh path/to/pollcore-topo}
T=${PC_TOPOLOGIES:?PC_TOPOLOGIES is not set}
for p in jq hwloc-calc lstopo-no-graphics; do
	command -v "$p" >/dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
check() { # check DESCRIPTION JQ-EXPR JSON
	echo "$3" | jq -e "$2" >/dev/null || fail "$1 ($2) on: $3"
}
# Sorted, comma-separated integers, as jq -c prints a list without brackets.
sorted() { tr ',' '\n' | sort -n | paste -sd, -; }
# The tool must fail with a message containing $1; the rest is the command line.
must_fail() {
	want=$1
	shift
	if "$@" >"$TMP/out" 2>"$TMP/err"; then
		fail "succeeded: $*"
	fi
	grep -qF -- "$want" "$TMP/err" || fail "error of '$*' does not mention '$want': $(cat "$TMP/err")"
	[ ! -s "$TMP/out" ] || fail "output on stdout despite the error: $*"
}

nr_xml=0
found_mlx5_2=0
found_mlx4_0=0
for xml in "$T"/*.xml; do
	nr_xml=$((nr_xml + 1))
	calc() { hwloc-calc --if xml -i "$xml" "$@"; }
	devs=$(lstopo-no-graphics --if xml -i "$xml" --filter io:important --of console |
		sed -n 's/.*OpenFabrics "\([^"]*\)".*/\1/p' | sort -V)
	[ -n "$devs" ] || fail "$xml: lstopo finds no OpenFabrics device"

	all=$("$TOOL" --xml "$xml" --workers 2 --json) || fail "$xml: exit $?"
	check "$xml: devices are the OpenFabrics ones" \
		"[.devices[].name] == $(printf '%s\n' $devs | jq -R . | jq -sc .)" "$all"
	check "$xml: exact keys" \
		'(.devices | all(keys == ["local_pus","locality","name","numa_nodes"])) and
		 (.plan | all(keys == ["core","device","local","numa_node","pu","worker"]))' "$all"
	check "$xml: workers numbered" '[.plan[].worker] == [range(.plan | length)]' "$all"
	# One worker per core: map each PU to its core with hwloc-calc.
	cores=$(echo "$all" | jq -r '.plan[].pu' | while read -r pu; do
		calc --pi "pu:$pu" --intersect core; done | sort -n | uniq -d)
	[ -z "$cores" ] || fail "$xml: cores with two workers: $cores"

	total=$(calc all --number-of core)
	first_pus=$(calc core:0 --intersect pu --po)
	for dev in $devs; do
		nodes=$(calc "os=$dev" --intersect NUMAnode --po | sorted)
		pus=$(calc "os=$dev" --intersect pu --po | sorted)
		ncores=$(calc "os=$dev" --number-of core)
		check "$xml: $dev locality" \
			".devices[] | select(.name == \"$dev\") |
			 .locality == \"pci\" and .numa_nodes == [$nodes] and .local_pus == [$pus]" "$all"

		out=$("$TOOL" --xml "$xml" --device "$dev" --workers 4 --json)
		check "$xml: $dev 4 workers local, distinct" \
			"(.plan | length) == 4 and (.plan | all(.local and .device == \"$dev\" and
			 ([.pu] | inside([$pus])) and ([.numa_node] | inside([$nodes])))) and
			 ([.plan[].pu] | unique | length) == 4 and
			 ([.plan[].pu] | inside([$first_pus]) | not)" "$out"

		# The first core of the machine is housekeeping: one fewer if it is local.
		nl=$ncores
		first=${first_pus%%,*}
		case ",$pus," in *",$first,"*) nl=$((nl - 1)) ;; esac
		out=$("$TOOL" --xml "$xml" --device "$dev" --workers $((nl + 1)) --json)
		check "$xml: $dev spill after $nl local cores" \
			"[.plan[].local] == [range($nl) | true] + [false] and
			 ([.plan[-1].numa_node] | inside([$nodes]) | not)" "$out"
		"$TOOL" --xml "$xml" --device "$dev" --workers $((nl + 1)) |
			grep -q "nearest other NUMA node" || fail "$xml: table does not explain the spill"

		must_fail "only $((total - 1)) free cores" \
			"$TOOL" --xml "$xml" --device "$dev" --workers "$total" --json
		if [ "$dev" = mlx5_2 ]; then
			found_mlx5_2=$((found_mlx5_2 + 1))
			check "README: mlx5_2 on NUMA os 8" \
				'.devices[] | select(.name == "mlx5_2") | .numa_nodes == [8]' "$all"
			check "README: mlx5_2 PUs from the second package only" \
				"[.devices[] | select(.name == \"mlx5_2\") | .local_pus[]] ==
				 [$(calc package:1 --intersect pu --po | sorted)]" "$all"
		fi
		if [ "$dev" = mlx4_0 ]; then
			found_mlx4_0=$((found_mlx4_0 + 1))
			check "README: mlx4_0 on package 0's interleaved PUs" \
				'.devices[] | select(.name == "mlx4_0") |
				 .local_pus == [range(0; 24; 2)] and .numa_nodes == [0]' "$all"
		fi
	done

	"$TOOL" --xml "$xml" >"$TMP/table" || fail "$xml: table form failed"
	for dev in $devs; do
		grep -Eq "^$dev +pci " "$TMP/table" || fail "$xml: table lacks $dev: $(cat "$TMP/table")"
	done
	must_fail "RDMA device nosuch0 not found" "$TOOL" --xml "$xml" --device nosuch0
done
[ "$nr_xml" -ge 1 ] || fail "no topology in $T"
[ "$found_mlx5_2" -eq 1 ] || fail "expected exactly one topology with mlx5_2 (README)"
[ "$found_mlx4_0" -eq 1 ] || fail "expected exactly one topology with mlx4_0 (README)"

# Errors: unreadable XML, bad worker counts, stray arguments.
xml=$(ls "$T"/*.xml | head -n 1)
must_fail "$TMP/missing.xml" "$TOOL" --xml "$TMP/missing.xml"
echo "not xml" >"$TMP/bad.xml"
must_fail "$TMP/bad.xml" "$TOOL" --xml "$TMP/bad.xml" --json
must_fail "--workers: '0'" "$TOOL" --xml "$xml" --workers 0
must_fail "--workers: 'x'" "$TOOL" --xml "$xml" --workers x
must_fail "unexpected argument 'extra'" "$TOOL" --xml "$xml" extra
# usage errors exit 2 (docs/tools.md), a failure 1
rc=0; "$TOOL" --xml "$xml" --workers 0 >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--workers 0: exit $rc, expected 2 (bad usage)"
rc=0; "$TOOL" --xml "$TMP/missing.xml" >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a missing XML file: exit $rc, expected 1 (failed)"

# A device with no PCI parent, placed through a fake sysfs (rule netdev).
node=$(hwloc-calc --if xml -i "$xml" all --intersect NUMAnode --po | tr ',' '\n' | tail -n 1)
mkdir -p "$TMP/sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs" "$TMP/sys/class/net/eth9/device"
echo eth9 >"$TMP/sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0"
echo "$node" >"$TMP/sys/class/net/eth9/device/numa_node"
out=$("$TOOL" --xml "$xml" --sysfs "$TMP/sys" --device rxe0 --json)
check "rxe0 by netdev" ".devices == [{\"name\": \"rxe0\", \"numa_nodes\": [$node],
	\"local_pus\": [$(hwloc-calc --if xml -i "$xml" --pi "node:$node" --intersect pu --po | sorted)],
	\"locality\": \"netdev\"}] and (.plan | all(.local and .numa_node == $node))" "$out"
echo -1 >"$TMP/sys/class/net/eth9/device/numa_node"
out=$("$TOOL" --xml "$xml" --sysfs "$TMP/sys" --device rxe0 --json)
check "rxe0 by machine" '.devices[0].locality == "machine"' "$out"
echo "ok: $nr_xml topologies"
