#!/bin/bash
# SPDX-License-Identifier: MIT
# rdma suite: tools/pollcore-tune (0.3 s runs) end to end on every RDMA device of
# the test bed (in tools/rxe-vm --devices 2: rxe0 and rxe1, 1 and 2 workers
# on the VM's 2 CPUs), then checks that what it wrote agrees with itself:
#   - the JSON has every device, points for 1..min(2, cores) workers, each
#     with a send rate and an rpc p99 from runs whose check was ok (the tool
#     fails otherwise), N connections at N workers, and a recommendation that
#     is one of the swept counts and that recommend() gives again;
#   - the table has a row per point with the JSON's figures, the locality
#     note (rxe: no NUMA information) and the recommendation's reason;
#   - the SVG parses, has one point per run with the JSON's values, and
#     rings each device's recommendation.
#   usage: test_tune_vm.sh path/to/pollcore-bench path/to/pollcore-topo
set -u
BENCH=${1:?usage: test_tune_vm.sh pollcore-bench pollcore-topo}
TOPO=${2:?usage: test_tune_vm.sh pollcore-bench pollcore-topo}
SRC=${PC_SRC_ROOT:-$(dirname "$0")/..}
. "$(dirname "$0")/testbed.sh"
pc_need_device
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
die() {
	echo "FAIL: $*" >&2
	exit 1
}

start=$(date +%s)
# 0.3 s runs (--quick's are 1 s): rates to compare within the sweep, and every output checked
"$SRC/tools/pollcore-tune" --time 0.3 --max-workers 2 --bench "$BENCH" --topo "$TOPO" \
	--out-svg "$WORK/tune.svg" --out-json "$WORK/tune.json" >"$WORK/table" 2>"$WORK/log"
rc=$?
cat "$WORK/log" "$WORK/table"
[ "$rc" = 0 ] || die "pollcore-tune exited $rc"
echo "pollcore-tune --time 0.3: $(($(date +%s) - start)) s"

python3 - "$WORK" "$SRC" <<'EOF' || die "the outputs disagree"
import json, os, sys
import xml.etree.ElementTree as ET
work, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "tools"))
import pollcore_tune as pt

def need(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")

s = json.load(open(os.path.join(work, "tune.json")))
table = open(os.path.join(work, "table")).read()
devs = sorted(os.listdir("/sys/class/infiniband"))
need([d["name"] for d in s["devices"]] == devs, f"devices {[d['name'] for d in s['devices']]} != {devs}")
for d in s["devices"]:
    want = list(range(1, min(2, d["cores"]) + 1))
    need([p["workers"] for p in d["points"]] == want, f"{d['name']}: workers != {want}")
    for p in d["points"]:
        n = p["workers"]
        need(p["connections"] == n, f"{d['name']}: {p['connections']} connections at {n} workers")
        need(len(p["send"]) == 1 and p["send"][0]["rate"] > 0, f"{d['name']}: no send rate")
        r = p["rpc"]
        need(0 < r["p50_us"] <= r["p99_us"] <= r["p999_us"], f"{d['name']}: latency {r}")
        row = f"{n:>7} {n:>5} {'-':>5} {p['send'][0]['rate']:>12.0f} {r['rate']:>10.0f} " \
              f"{r['p50_us']:>8.1f} {r['p99_us']:>8.1f}  {p['placement']}"
        need(row in table.splitlines(), f"no table row {row!r}")
    need(d["locality"] == "machine" and "no NUMA locality information" in d["locality_note"],
         f"{d['name']}: rxe has no NUMA locality, the note says {d['locality_note']!r}")
    need(f"{d['name']}: {d['locality_note']}" in table, "no locality line in the table")
    rec = d["recommendation"]
    need(rec["workers"] in want, f"recommended {rec['workers']} workers, swept {want}")
    need(rec == pt.recommend(d, s["tolerance"], s["latency_tolerance"]), "recommendation differs")
    need(f"recommended for {d['name']}: {rec['reason']}" in table, "no recommendation line")

root = ET.parse(os.path.join(work, "tune.svg")).getroot()
ns = "{http://www.w3.org/2000/svg}"
got = sorted((c.get("class"), c.get("data-device"), int(c.get("data-workers")),
              float(c.get("data-value"))) for c in root.iter(ns + "circle")
             if c.get("class", "").startswith("point "))
exp = sorted([("point rate", d["name"], p["workers"], float(f"{p['send'][0]['rate']:g}"))
              for d in s["devices"] for p in d["points"]] +
             [("point p99", d["name"], p["workers"], float(f"{p['rpc']['p99_us']:g}"))
              for d in s["devices"] for p in d["points"]])
need(got == exp, f"SVG points {got} != JSON {exp}")
rings = [c.get("data-device") for c in root.iter(ns + "circle") if c.get("class") == "recommended"]
need(sorted(rings) == sorted(devs * 2), f"rings {rings}")
print(f"table, SVG ({len(got)} points) and JSON agree for {', '.join(devs)}")
EOF
echo PASS
