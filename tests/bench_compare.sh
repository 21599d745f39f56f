#!/bin/bash
# SPDX-License-Identifier: MIT
# bench suite: tools/compare-perftest --quick, pollcore-bench against perftest
# in the same boot. Passes when it ran and its last line is the JSON summary
# with every expected key and a figure on each side; never fails on speed.
# PC_BENCH_SHORT (set by tools/run-tests) runs --smoke instead of --quick.
#   usage: bench_compare.sh path/to/pollcore-bench
set -u
BENCH=${1:?usage: bench_compare.sh path/to/pollcore-bench}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

LENGTH=--quick
[ -n "${PC_BENCH_SHORT:-}" ] && LENGTH=--smoke
"$ROOT/tools/compare-perftest" "$LENGTH" --bench "$BENCH" | tee "$OUT"
rc=${PIPESTATUS[0]}
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "FAIL: compare-perftest exited $rc" >&2; exit 1; }
tail -n 1 "$OUT" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
for key, base in (("send_64", "perftest_best"), ("write_64", "perftest"),
                  ("write_4096", "perftest"), ("rpc_half_rtt_p50_us", "perftest")):
    e = j.get(key)
    if not isinstance(e, dict):
        sys.exit(f"FAIL: the JSON line has no {key}")
    for k in ("pollcore", base, "ratio"):
        if not isinstance(e.get(k), (int, float)) or e[k] <= 0:
            sys.exit(f"FAIL: {key}.{k} is not a positive number: {e}")
e = j.get("large_1m")
if not isinstance(e, dict):
    sys.exit("FAIL: the JSON line has no large_1m")
for k in ("pollcore", "ib_read_bw", "ib_send_bw", "ratio_read", "ratio_send"):
    if not isinstance(e.get(k), (int, float)) or e[k] <= 0:
        sys.exit(f"FAIL: large_1m.{k} is not a positive number: {e}")
print("compare-perftest: the JSON line has send_64, write_64, write_4096, rpc_half_rtt_p50_us "
      "and large_1m")
' || exit 1
