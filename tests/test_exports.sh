#!/bin/bash
# unit suite: libpollcore.so exports exactly the functions its public headers
# mark PC_API - every one pc_-prefixed - and nothing else: no dp_*, conn_*,
# worker_* or other internal symbol, and no PC_API function left undefined.
#
#   test_exports.sh LIBPOLLCORE.so HEADER...
set -euo pipefail

lib=$1
shift
[ $# -gt 0 ] || { echo "usage: $0 LIBPOLLCORE.so HEADER..." >&2; exit 2; }

# Symbols the linker itself defines in every shared object.
linker='^(_init|_fini|_edata|_end|__bss_start)$'

exported=$(nm -D --defined-only "$lib" | awk '{ print $NF }' | grep -Ev "$linker" | sort -u)
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
[ $status -ne 0 ] || echo "OK: $(wc -l <<<"$exported") symbols exported, all pc_*, all declared PC_API"
exit $status
