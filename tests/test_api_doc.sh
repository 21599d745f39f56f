#!/bin/bash
# SPDX-License-Identifier: MIT
# rdma suite: the RPC server and client that open docs/api.md, as printed
# there. Both are cut out of the document, compiled against this build's
# headers and library with -Werror, and run on the test bed: the client's
# call must come back with the server's answer ("value of key42").
#   usage: test_api_doc.sh docs/api.md LIBPOLLCORE.so
set -u
DOC=${1:?usage: test_api_doc.sh docs/api.md LIBPOLLCORE.so}
LIB=${2:?usage: test_api_doc.sh docs/api.md LIBPOLLCORE.so}
. "$(dirname "$0")/testbed.sh"
SRC=${PC_SRC_ROOT:?}
TMP=$(mktemp -d)
SRV_PID=
cleanup() {
	[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
	[ -n "$SRV_PID" ] && rm -f "/dev/shm/pollcore.$SRV_PID"
	rm -rf "$TMP"
}
trap cleanup EXIT

# The C block that starts with "/* NAME.c".
extract() {
	awk -v name="/* $1.c" '
		/^```c$/ { inblock = 1; n = 0; next }
		/^```$/ { if (keep) exit; inblock = 0; next }
		inblock && n++ == 0 && index($0, name) == 1 { keep = 1 }
		keep { print }' "$DOC"
}
# A sanitized library needs its runtime first in the program's link.
SAN=()
case ${PC_SANITIZE:-none} in none | '') ;; *) SAN=(-fsanitize="$PC_SANITIZE") ;; esac
for prog in server client; do
	extract "$prog" >"$TMP/$prog.c"
	[ -s "$TMP/$prog.c" ] || { echo "FAIL: no '/* $prog.c' block in $DOC"; exit 1; }
	cc -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter "${SAN[@]}" \
		-I"$SRC/core/include" -I"$SRC/numa/include" -I"$SRC/workers/include" \
		-o "$TMP/$prog" "$TMP/$prog.c" "$LIB" -Wl,-rpath,"$(dirname "$LIB")" ||
		{ echo "FAIL: the $prog of $DOC does not compile"; exit 1; }
done
echo "OK: server.c and client.c of $DOC compile"

pc_need_device
"$TMP/server" >"$TMP/server.out" 2>&1 &
SRV_PID=$!
out=
# the server may still be starting: retry every 0.2 s, for 60 s at most
for _ in $(seq 1 300); do
	out=$("$TMP/client" "$PC_TEST_ADDR" 2>"$TMP/client.err") && break
	sleep 0.2
done
if [ "$out" != "value of key42" ]; then
	echo "FAIL: the client printed '$out'"
	cat "$TMP/client.err" "$TMP/server.out"
	exit 1
fi
echo "OK: the client's call came back: $out"
