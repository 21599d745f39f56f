#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""unit suite: pollcore-tune's recommendation and its SVG chart, on recorded
sweeps (tests/data/tune/*.json, from tools/pollcore-tune --out-json) and on
made-up ones shaped to hit each rule. No device needed.

  test_tune.py            (PC_SRC_ROOT: the source tree; default: ..)
"""
import copy
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout

SRC = os.environ.get("PC_SRC_ROOT", os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tools"))
import pollcore_tune as pt  # noqa: E402

DATA = os.path.join(SRC, "tests", "data", "tune")
SVG = "{http://www.w3.org/2000/svg}"


def load(name):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def point(n, rates, p99, batches=None):
    """A sweep point: @rates per post batch (@batches, default [None])."""
    batches = batches or [None]
    return {"workers": n, "connections": n, "client_workers": n, "placement": "test",
            "send": [{"post_batch": b, "rate": r} for b, r in zip(batches, rates)],
            "rpc": {"rate": 1000.0, "p50_us": p99 / 2, "p99_us": p99, "p999_us": p99 * 2}}


def device(name, cores, pts):
    return {"name": name, "cores": cores, "locality_note": "made up", "points": pts}


def sweep(*devs):
    return {"tolerance": 0.05, "latency_tolerance": 0.25, "devices": list(devs)}


class Recommend(unittest.TestCase):
    def test_recorded_vm_sweep(self):
        # tools/rxe-vm --devices 2: two rxe devices, 1 and 2 workers, post
        # batches 8 and 32. Its figures decide; the test recomputes the rule
        # by hand from them so a change in the rule or the data shows.
        s = load("vm-sweep.json")
        self.assertEqual(len(s["devices"]), 2)
        for dev in s["devices"]:
            self.assertEqual([p["workers"] for p in dev["points"]], [1, 2])
            rec = pt.recommend(dev, 0.05, 0.25)
            best = {p["workers"]: max(x["rate"] for x in p["send"]) for p in dev["points"]}
            p99 = {p["workers"]: p["rpc"]["p99_us"] for p in dev["points"]}
            fast = [n for n in (1, 2) if best[n] >= 0.95 * max(best.values())]
            want = next(n for n in fast if p99[n] <= 1.25 * min(p99[m] for m in fast))
            self.assertEqual(rec["workers"], want, rec["reason"])
            self.assertEqual(rec["rate"], best[want])
            self.assertTrue(rec["reason"].startswith(f"{want} worker"), rec["reason"])
            batch = max(next(p for p in dev["points"] if p["workers"] == want)["send"],
                        key=lambda x: x["rate"])["post_batch"]
            self.assertEqual(rec["post_batch"], batch)
        # and the recorded document holds what the tool recommended then
        self.assertEqual([d["recommendation"] for d in pt.analyse(copy.deepcopy(s))["devices"]],
                         [d["recommendation"] for d in s["devices"]])

    def test_fewest_within_tolerance(self):
        d = device("mlx5_0", 8, [point(n, [r], 10.0) for n, r in
                                 [(1, 400e3), (2, 780e3), (3, 960e3), (4, 990e3), (5, 1000e3),
                                  (6, 1000e3), (7, 990e3), (8, 985e3)]])
        rec = pt.recommend(d)
        self.assertEqual(rec["workers"], 3)  # 960k >= 0.95 * 1M; 2 workers (780k) is not
        self.assertEqual(rec["reason"],
                         "3 workers: within 5% of the best rate (960000 msg/s, 96.0% of "
                         "1000000 at 5 workers), at 3 of 8 cores; p99 10.0 us, the lowest of the counts that fast")
        self.assertEqual(pt.recommend(d, tolerance=0.001)["workers"], 5)  # the first of a tie
        self.assertEqual(pt.recommend(d, tolerance=0.5)["workers"], 2)

    def test_half_the_cores_and_best(self):
        d = device("mlx5_0", 6, [point(n, [r], 12.0) for n, r in
                                 [(1, 300e3), (2, 500e3), (3, 990e3), (4, 1000e3), (5, 1e6),
                                  (6, 990e3)]])
        self.assertTrue(pt.recommend(d)["reason"].startswith(
            "3 workers: within 5% of the best rate (990000 msg/s, 99.0% of 1000000 at "
            "4 workers), at half the cores;"))
        one = device("rxe0", 2, [point(1, [50e3], 20.0), point(2, [30e3], 40.0)])
        rec = pt.recommend(one)
        self.assertEqual(rec["workers"], 1)
        self.assertEqual(rec["reason"], "1 worker: the best rate (50000 msg/s), at half the "
                                        "cores; p99 20.0 us")

    def test_latency_guard(self):
        # 2 workers reach the rate but queue: p99 60 us against 20 at 3 workers
        d = device("mlx5_0", 4, [point(1, [500e3], 15.0), point(2, [960e3], 60.0),
                                 point(3, [1e6], 20.0), point(4, [990e3], 24.0)])
        rec = pt.recommend(d)
        self.assertEqual(rec["workers"], 3)
        self.assertEqual(rec["reason"],
                         "3 workers: the best rate (1000000 msg/s), at 3 of 4 cores; p99 20.0 "
                         "us, the lowest of the counts that fast; 2 worker(s) also reach the "
                         "rate, but with a p99 more than 25% above 20.0 us")
        self.assertEqual(pt.recommend(d, latency_tolerance=3.0)["workers"], 2)
        # 1 worker's low p99 does not count: it is not fast enough
        d["points"][3]["rpc"]["p99_us"] = 18.0
        rec = pt.recommend(d)
        self.assertEqual(rec["workers"], 3)
        self.assertIn("p99 20.0 us (the lowest of the counts that fast: 18.0 us at 4 workers)",
                      rec["reason"])
        d["points"][2]["rpc"]["p99_us"] = 30.0
        self.assertEqual(pt.recommend(d)["workers"], 4)

    def test_post_batch(self):
        d = device("mlx5_0", 2, [point(1, [100e3, 185e3], 9.0, [8, 32]),
                                 point(2, [150e3, 190e3], 9.5, [8, 32])])
        rec = pt.recommend(d)
        self.assertEqual((rec["workers"], rec["post_batch"], rec["rate"]), (1, 32, 185e3))
        self.assertIn("post batch 32 sends fastest there", rec["reason"])
        with self.assertRaises(ValueError):
            pt.recommend(device("x", 1, []))


class Chart(unittest.TestCase):
    def parse(self, s):
        root = ET.fromstring(pt.svg_chart(s))  # raises on malformed XML
        self.assertEqual(root.tag, SVG + "svg")
        return root

    def circles(self, root, cls):
        return [c for c in root.iter(SVG + "circle") if c.get("class") == cls]

    def check_points(self, s):
        """One point per sweep step, each where its value says."""
        pt.analyse(s)
        root = self.parse(s)
        vw, vh = (float(v) for v in root.get("viewBox").split()[2:])
        rate, p99 = self.circles(root, "point rate"), self.circles(root, "point p99")
        runs = pt.steps(s)
        self.assertEqual(len(rate), sum(1 for r in runs if r[2] == "send"))
        self.assertEqual(len(p99), sum(1 for r in runs if r[2] == "rpc"))
        self.assertEqual(sorted((c.get("data-device"), int(c.get("data-workers")),
                                 c.get("data-post-batch")) for c in rate),
                         sorted((d, n, "-" if b is None else str(b))
                                for d, n, m, b in runs if m == "send"))
        for cls in (rate, p99):
            for c in cls:
                self.assertTrue(0 < float(c.get("cx")) < vw and 0 < float(c.get("cy")) < vh)
            # within a panel a higher value sits higher (smaller y); same workers, same x
            by_value = sorted(cls, key=lambda c: float(c.get("data-value")))
            ys = [float(c.get("cy")) for c in by_value]
            self.assertEqual(ys, sorted(ys, reverse=True))
            xs = {}
            for c in cls:
                xs.setdefault(c.get("data-workers"), set()).add(c.get("cx"))
            self.assertTrue(all(len(v) == 1 for v in xs.values()))
            self.assertEqual(sorted(xs, key=int), sorted(xs, key=lambda n: float(xs[n].pop())))
        # the rate panel sits above the latency panel
        self.assertLess(max(float(c.get("cy")) for c in rate),
                        min(float(c.get("cy")) for c in p99))
        # each device's recommendation ringed once per panel
        rings = self.circles(root, "recommended")
        self.assertEqual(sorted(c.get("data-device") for c in rings),
                         sorted(d["name"] for d in s["devices"] for _ in range(2)))
        return root

    def test_recorded(self):
        self.check_points(load("vm-sweep.json"))

    def test_made_up(self):
        s = sweep(device("mlx5_0", 8, [point(n, [n * 1e5, n * 1.2e5], 10.0 + n, [8, 32])
                                       for n in range(1, 9)]),
                  device("mlx5_<&>", 8, [point(n, [n * 0.9e5, n * 1e5], 12.0, [8, 32])
                                         for n in range(1, 7)]))
        root = self.check_points(s)
        texts = "".join(root.itertext())
        self.assertIn("mlx5_<&> batch 32", texts)  # escaped in the file, whole when parsed
        single = sweep(device("rxe0", 1, [point(1, [5e4], 30.0)]))
        self.check_points(single)

    def test_ticks(self):
        self.assertEqual(pt.nice_ticks(97), [0, 20, 40, 60, 80, 100])
        self.assertEqual(pt.nice_ticks(1.0e6)[-1], 1.0e6)
        self.assertGreaterEqual(pt.nice_ticks(123456)[-1], 123456)
        self.assertEqual(pt.nice_ticks(0), [0.0, 1.0])


class Cli(unittest.TestCase):
    def test_from_saved_sweep(self):
        with tempfile.TemporaryDirectory() as tmp:
            svg, js = os.path.join(tmp, "c.svg"), os.path.join(tmp, "s.json")
            out = io.StringIO()
            with redirect_stdout(out):
                rc = pt.main(["--from", os.path.join(DATA, "vm-sweep.json"), "--out-svg", svg,
                              "--out-json", js])
            self.assertEqual(rc, 0)
            table = out.getvalue()
            with open(js) as f:
                saved = json.load(f)
            ET.parse(svg)
            for dev in saved["devices"]:
                self.assertIn(f"recommended for {dev['name']}: "
                              f"{dev['recommendation']['reason']}", table)
                for p in dev["points"]:
                    self.assertIn(f"{p['rpc']['p99_us']:8.1f}", table)
            # tolerances from the command line replace the recorded ones
            out = io.StringIO()
            with redirect_stdout(out):
                pt.main(["--from", js, "--json", "--out-svg", "", "--tolerance", "99"])
            self.assertEqual(json.loads(out.getvalue())["tolerance"], 0.99)

    def test_no_device_fails_loudly(self):
        r = subprocess.run([sys.executable, os.path.join(SRC, "tools", "pollcore-tune"),
                            "--device", "no_such_dev0", "--out-svg", ""],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("pollcore-tune: FAIL: ", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
