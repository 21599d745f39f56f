#!/bin/bash
# unit suite: libpollcore.so exports exactly the functions its public headers
# mark PC_API - every one pc_-prefixed - and nothing else: no dp_*, conn_*,
# worker_* or other internal symbol, and no PC_API function left undefined;
# and its version script (workers/libpollcore.map) lists exactly that set,
# each name's default version the newest node listing it, with an entry
# point of its own for each older node that lists it (workers/compat.c).
#
#   test_exports.sh LIBPOLLCORE.so LIBPOLLCORE.map HEADER...
set -euo pipefail

lib=$1
map=$2
shift 2
[ $# -gt 0 ] || { echo "usage: $0 LIBPOLLCORE.so LIBPOLLCORE.map HEADER..." >&2; exit 2; }

# Symbols the linker itself defines in every shared object.
linker='^(_init|_fini|_edata|_end|__bss_start)$'

# Names without their version (pc_call@@POLLCORE_0.1), and not the version node itself (type A).
exported=$(nm -D --defined-only "$lib" | awk '$(NF-1) != "A" { print $NF }' | sed 's/@.*//' |
	grep -Ev "$linker" | sort -u)
if [ -z "$exported" ]; then
	echo "FAIL: nm -D found no exported symbol in $lib"
	exit 1
fi

# Names declared PC_API in the headers (comments and preprocessor lines dropped).
declared=$(perl -0777 -ne 's{/\*.*?\*/}{}gs; s{^\s*#.*$}{}mg; print "$1\n" while /\bPC_API\b[^;{}]*?\b(\w+)\s*\(/g' "$@" |
	sort -u)
if [ -z "$declared" ]; then
	echo "FAIL: no PC_API declaration found in $*"
	exit 1
fi

status=0
not_pc=$(grep -v '^pc_' <<<"$exported" || true)
if [ -n "$not_pc" ]; then
	echo "FAIL: symbols without the pc_ prefix are exported:"
	sed 's/^/  /' <<<"$not_pc"
	status=1
fi
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
if [ -n "$extra" ]; then
	echo "FAIL: exported but not declared PC_API in a public header:"
	sed 's/^/  /' <<<"$extra"
	status=1
fi
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [ -n "$missing" ]; then
	echo "FAIL: declared PC_API but not exported:"
	sed 's/^/  /' <<<"$missing"
	status=1
fi
# The map's nodes in order, each with its global names (comments dropped): "NODE name" lines.
nodes=$(perl -0777 -ne 's{/\*.*?\*/}{}gs; while (/([\w.]+)\s*\{\s*global:(.*?)\}/gs) { my $n = $1; print "$n $_\n" for $2 =~ /(\w+)\s*;/g }' "$map")
mapped=$(awk '{ print $2 }' <<<"$nodes" | sort -u)
if [ "$mapped" != "$exported" ]; then
	echo "FAIL: $map and the exported set differ (< map only, > exported only):"
	diff <(echo "$mapped") <(echo "$exported") | grep '^[<>]' | sed 's/^/  /'
	status=1
fi
# Each name: its default version (@@) is the newest node that lists it, and every
# older node that lists it has its own entry point (name@NODE: compat.c).
versions=$(nm -D --defined-only "$lib" | awk '$NF ~ /^pc_/ { print $NF }')
for name in $mapped; do
	listed=$(awk -v n="$name" '$2 == n { print $1 }' <<<"$nodes")
	newest=$(tail -1 <<<"$listed")
	if ! grep -qx "$name@@$newest" <<<"$versions"; then
		echo "FAIL: $name is not exported as $name@@$newest (the newest node listing it)"
		status=1
	fi
	for old in $(head -n -1 <<<"$listed"); do
		if ! grep -qx "$name@$old" <<<"$versions"; then
			echo "FAIL: $name is listed in $old and $newest, but $name@$old is not exported (its compat entry point)"
			status=1
		fi
	done
done
stray=$(grep -v '@' <<<"$versions" || true)
if [ -n "$stray" ]; then
	echo "FAIL: exported without a version:"
	sed 's/^/  /' <<<"$stray"
	status=1
fi
version=$(awk '{ print $1 }' <<<"$nodes" | sort -u | tr '\n' ' ')
[ $status -ne 0 ] || echo "OK: $(wc -l <<<"$exported") symbols exported, all pc_*, all declared PC_API, all in $map, versions $version"
exit $status
