#!/bin/bash
# unit suite: libpollcore.so exports exactly the functions its public headers
# mark PC_API - every one pc_-prefixed - and nothing else: no dp_*, conn_*,
# worker_* or other internal symbol, and no PC_API function left undefined;
# and its version script (workers/libpollcore.map) lists exactly that set,
# under the version the exported symbols carry.
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
# The map's global names (comments dropped), and the version they are exported under.
mapped=$(perl -0777 -ne 's{/\*.*?\*/}{}gs; /global:(.*?)local:/s and print join("\n", $1 =~ /(\w+)\s*;/g), "\n"' "$map" | sort -u)
version=$(perl -0777 -ne 's{/\*.*?\*/}{}gs; print $1 if /([\w.]+)\s*\{/' "$map")
if [ "$mapped" != "$exported" ]; then
	echo "FAIL: $map and the exported set differ (< map only, > exported only):"
	diff <(echo "$mapped") <(echo "$exported") | grep '^[<>]' | sed 's/^/  /'
	status=1
fi
unversioned=$(objdump -T "$lib" | awk '$NF ~ /^pc_/ && $(NF-1) != "'"$version"'" { print $NF }')
if [ -n "$unversioned" ]; then
	echo "FAIL: exported without the version $version:"
	sed 's/^/  /' <<<"$unversioned"
	status=1
fi
[ $status -ne 0 ] || echo "OK: $(wc -l <<<"$exported") symbols exported, all pc_*, all declared PC_API, all in $map under $version"
exit $status
