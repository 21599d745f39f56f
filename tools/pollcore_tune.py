# SPDX-License-Identifier: MIT
"""pollcore-tune - how many workers (cores) each RDMA NIC should get.

  tools/pollcore-tune [--device NAME]... [--quick] [--post-batch-list B,B..]
                      [--out-svg PATH] [--out-json PATH] [--json] [...]
  tools/pollcore-tune --from SWEEP.json [--out-svg PATH] [--json] [...]

For each RDMA device (or each --device) it sweeps the server's workers from 1
up to the cores of the device's NUMA node (pollcore-topo, from numa/; a device
with no locality information, like soft-RoCE in the VM, counts the machine's
online CPUs, and the output says so). At each point it starts a pollcore-bench
server on that device with --workers N and runs clients against it with N
connections (one per worker; --conns-per-worker for more): in send mode for
the message rate, for each post batch of --post-batch-list if given (the
client's main thread posting), and in rpc mode for the p99 round trip. Every
run must report "check": "ok"; anything else stops the sweep with the run's
output.

Prints a table and, per device, the recommended worker count with its
reason: of the worker counts within --tolerance (5%) of the device's best
message rate, the fewest whose p99 is within --latency-tolerance (25%) of the
lowest p99 among them. Writes an SVG chart (--out-svg, default
pollcore-tune.svg) of message rate and p99 against workers, and the whole
sweep as JSON (--out-json; --json prints it on stdout instead of the table).
--from re-renders a saved sweep without running anything.

Client and server run on this machine and meet through the NIC (its
loopback), the client unpinned (--no-numa): its threads compete with the
server's for the cores, which the figures include.

This module keeps the analysis and the chart as pure functions (recommend,
format_table, svg_chart) for tests; tools/pollcore-tune is its entry point.
"""
import argparse
import ipaddress
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from xml.sax.saxutils import escape, quoteattr

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
BUILD = os.path.join(REPO, os.environ.get("PC_BUILD", "build"))
SYSFS_IB = "/sys/class/infiniband"
FORMAT = 1          # version of the JSON document
RUN_TIMEOUT = 300   # seconds for one client run
LISTEN_TIMEOUT = 120


class TuneError(Exception):
    """A run or a lookup failed; the message says which and why."""


# --- analysis (pure) -------------------------------------------------------------------------

def best_send(point):
    """The send run of @point with the highest rate (the best post batch)."""
    return max(point["send"], key=lambda s: s["rate"])


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def _share_of_cores(n, cores):
    if n == cores:
        return f"on all {cores} cores"
    if 2 * n == cores:
        return "at half the cores"
    return f"at {n} of {cores} cores"


def recommend(dev, tolerance=0.05, latency_tolerance=0.25):
    """The worker count to use for device @dev (one entry of a sweep's "devices").

    Pure. The counts whose best send rate is within @tolerance (a fraction) of
    the best rate of all are fast enough; of those, it takes the fewest whose
    rpc p99 is within @latency_tolerance of the lowest p99 among them, so that
    a count that reaches the rate only by queueing is passed over. Returns
    {"workers", "post_batch", "rate", "p99_us", "reason"}; raises ValueError
    on a device without points.
    """
    pts = sorted(dev["points"], key=lambda p: p["workers"])
    if not pts:
        raise ValueError(f"{dev['name']}: no sweep points")
    rate = {p["workers"]: best_send(p)["rate"] for p in pts}
    p99 = {p["workers"]: p["rpc"]["p99_us"] for p in pts}
    top = max(rate.values())
    top_n = min(n for n in rate if rate[n] == top)
    fast = [n for n in sorted(rate) if rate[n] >= (1 - tolerance) * top]
    low = min(p99[n] for n in fast)
    low_n = min(n for n in fast if p99[n] == low)
    pick = next(n for n in fast if p99[n] <= (1 + latency_tolerance) * low)
    point = next(p for p in pts if p["workers"] == pick)
    send = best_send(point)
    cores = dev.get("cores") or max(rate)

    if rate[pick] == top:
        why = f"the best rate ({top:.0f} msg/s)"
    else:
        why = (f"within {tolerance * 100:g}% of the best rate ({rate[pick]:.0f} msg/s, "
               f"{rate[pick] / top * 100:.1f}% of {top:.0f} at {_plural(top_n, 'worker')})")
    reason = f"{_plural(pick, 'worker')}: {why}, {_share_of_cores(pick, cores)}"
    if len(fast) == 1:
        reason += f"; p99 {p99[pick]:.1f} us"
    elif p99[pick] == low:
        reason += f"; p99 {p99[pick]:.1f} us, the lowest of the counts that fast"
    else:
        reason += (f"; p99 {p99[pick]:.1f} us (the lowest of the counts that fast: "
                   f"{low:.1f} us at {_plural(low_n, 'worker')})")
    skipped = [n for n in fast if n < pick]
    if skipped:
        reason += (f"; {', '.join(map(str, skipped))} worker(s) also reach the rate, but with "
                   f"a p99 more than {latency_tolerance * 100:g}% above {low:.1f} us")
    if send["post_batch"] is not None and len(point["send"]) > 1:
        reason += f"; post batch {send['post_batch']} sends fastest there"
    return {"workers": pick, "post_batch": send["post_batch"], "rate": rate[pick],
            "p99_us": p99[pick], "reason": reason}


def analyse(sweep, tolerance=None, latency_tolerance=None):
    """Sets "recommendation" on every device of @sweep (a sweep document) and
    returns it; tolerances default to the ones the document records."""
    tol = sweep["tolerance"] if tolerance is None else tolerance
    ltol = sweep["latency_tolerance"] if latency_tolerance is None else latency_tolerance
    sweep["tolerance"], sweep["latency_tolerance"] = tol, ltol
    for dev in sweep["devices"]:
        dev["recommendation"] = recommend(dev, tol, ltol)
    return sweep


def steps(sweep):
    """The sweep's runs as (device, workers, mode, post_batch) tuples, in order."""
    out = []
    for dev in sweep["devices"]:
        for p in dev["points"]:
            out += [(dev["name"], p["workers"], "send", s["post_batch"]) for s in p["send"]]
            out.append((dev["name"], p["workers"], "rpc", None))
    return out


def format_table(sweep):
    """The human report: per device its locality, one row per run, the recommendation."""
    lines = []
    for dev in sweep["devices"]:
        lines.append(f"{dev['name']}: {dev['locality_note']}")
        lines.append(f"{'workers':>7} {'conns':>5} {'batch':>5} {'send msg/s':>12} "
                     f"{'rpc req/s':>10} {'p50 us':>8} {'p99 us':>8}  placement")
        for p in sorted(dev["points"], key=lambda q: q["workers"]):
            for i, s in enumerate(p["send"]):
                batch = "-" if s["post_batch"] is None else str(s["post_batch"])
                row = f"{p['workers']:>7} {p['connections']:>5} {batch:>5} {s['rate']:>12.0f}"
                if i == 0:
                    r = p["rpc"]
                    row += (f" {r['rate']:>10.0f} {r['p50_us']:>8.1f} {r['p99_us']:>8.1f}  "
                            f"{p['placement']}")
                lines.append(row)
        rec = dev.get("recommendation")
        if rec:
            lines.append(f"recommended for {dev['name']}: {rec['reason']}")
        lines.append("")
    return "\n".join(lines)


# --- the chart (pure) -------------------------------------------------------------------------

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2"]


def nice_ticks(hi, count=5):
    """Round tick values from 0 to at least @hi, about @count of them."""
    if hi <= 0:
        return [0.0, 1.0]
    raw = hi / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(hi / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _fmt_tick(v):
    for div, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _series(sweep):
    """Chart series: rate series per (device, post batch), p99 series per device."""
    rate, lat = [], []
    for dev in sweep["devices"]:
        batches = []
        for p in dev["points"]:
            for s in p["send"]:
                if s["post_batch"] not in batches:
                    batches.append(s["post_batch"])
        for b in batches:
            pts = [(p["workers"], s["rate"]) for p in dev["points"] for s in p["send"]
                   if s["post_batch"] == b]
            label = dev["name"] if len(batches) == 1 else f"{dev['name']} batch {b or '-'}"
            rate.append((dev["name"], b, label, sorted(pts)))
        lat.append((dev["name"], None, dev["name"],
                    sorted((p["workers"], p["rpc"]["p99_us"]) for p in dev["points"])))
    return rate, lat


def svg_chart(sweep, width=720, panel_height=250):
    """The sweep as an SVG document (a string): message rate (top panel) and
    rpc p99 (bottom panel) against workers per NIC, one line per device (and
    post batch), one <circle class="point ..."> per run, the recommended
    count of each device ringed. Pure."""
    rate, lat = _series(sweep)
    devices = [d["name"] for d in sweep["devices"]]
    colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(devices)}
    dashes = ["", "6 3", "2 3", "8 3 2 3"]
    workers = [n for _, _, _, pts in rate + lat for n, _ in pts] or [1]
    x_hi = max(workers)
    left, right, top, gap = 80, 150, 50, 70
    plot_w = width - left - right
    height = top + 2 * panel_height + gap + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">'
           f'{escape(sweep.get("title", "pollcore-tune: message rate and p99 latency against workers per NIC"))}</text>']

    def x_of(n):
        return left + (n - 0.5) / x_hi * plot_w

    recs = {d["name"]: d.get("recommendation") for d in sweep["devices"]}

    def panel(y0, series, kind, title, unit, fmt_value):
        vmax = max([v for _, _, _, pts in series for _, v in pts] or [1])
        ticks = nice_ticks(vmax * 1.08)  # headroom: no point on the frame
        y_hi = ticks[-1]

        def y_of(v):
            return y0 + panel_height - v / y_hi * panel_height

        out.append(f'<g class="panel {kind}">')
        out.append(f'<text x="{left}" y="{y0 - 10}" font-size="13">{escape(title)}</text>')
        for t in ticks:
            y = y_of(t)
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                       f'stroke="#ddd"/>')
            out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                       f'{_fmt_tick(t)}</text>')
        xstep = max(1, math.ceil(x_hi / 16))
        for n in range(1, x_hi + 1, xstep):
            out.append(f'<line x1="{x_of(n):.1f}" y1="{y0 + panel_height}" x2="{x_of(n):.1f}" '
                       f'y2="{y0 + panel_height + 5}" stroke="black"/>')
            out.append(f'<text x="{x_of(n):.1f}" y="{y0 + panel_height + 18}" '
                       f'text-anchor="middle">{n}</text>')
        out.append(f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{panel_height}" '
                   f'fill="none" stroke="black"/>')
        out.append(f'<text transform="translate({left - 62},{y0 + panel_height / 2}) '
                   f'rotate(-90)" text-anchor="middle">{escape(unit)}</text>')
        for i, (dev, batch, label, pts) in enumerate(series):
            style = dashes[sum(1 for s in series[:i] if s[0] == dev) % len(dashes)]
            dash = f' stroke-dasharray="{style}"' if style else ""
            path = " ".join(f"{x_of(n):.1f},{y_of(v):.1f}" for n, v in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour[dev]}" '
                       f'stroke-width="2"{dash}/>')
            for n, v in pts:
                out.append(f'<circle class="point {kind}" data-device={quoteattr(dev)} '
                           f'data-workers="{n}" data-post-batch="{"-" if batch is None else batch}" '
                           f'data-value="{v:g}" cx="{x_of(n):.1f}" cy="{y_of(v):.1f}" r="4" '
                           f'fill="{colour[dev]}"><title>{escape(label)}, '
                           f'{_plural(n, "worker")}: {fmt_value(v)}</title></circle>')
            rec = recs.get(dev)
            if rec and batch == (rec["post_batch"] if kind == "rate" else None):
                v = dict(pts).get(rec["workers"])
                if v is not None:
                    out.append(f'<circle class="recommended" data-device={quoteattr(dev)} '
                               f'cx="{x_of(rec["workers"]):.1f}" cy="{y_of(v):.1f}" r="9" '
                               f'fill="none" stroke="{colour[dev]}" stroke-width="2"/>')
            ly = y0 + 14 + 18 * i
            out.append(f'<line x1="{left + plot_w + 12}" y1="{ly - 4}" x2="{left + plot_w + 36}" '
                       f'y2="{ly - 4}" stroke="{colour[dev]}" stroke-width="2"{dash}/>')
            out.append(f'<text x="{left + plot_w + 42}" y="{ly}">{escape(label)}</text>')
        out.append('</g>')

    panel(top + 10, rate, "rate", "message rate (send mode, messages/s)", "messages/s",
          lambda v: f"{v:.0f} msg/s")
    panel(top + panel_height + gap, lat, "p99", "p99 round trip (rpc mode, microseconds)",
          "p99 us", lambda v: f"{v:.1f} us")
    y = top + 2 * panel_height + gap + 36
    out.append(f'<text x="{left + plot_w / 2}" y="{y}" text-anchor="middle">'
               f'workers per NIC (ringed: recommended)</text>')
    out.append('</svg>')
    return "\n".join(out) + "\n"


# --- the machine: devices, addresses, placement ---------------------------------------------

def rdma_devices():
    try:
        return sorted(os.listdir(SYSFS_IB))
    except FileNotFoundError:
        return []


def netdev_of(dev):
    path = f"{SYSFS_IB}/{dev}/ports/1/gid_attrs/ndevs/0"
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        raise TuneError(f"{dev}: no network interface behind port 1 ({path}); "
                        f"give --addr {dev}=ADDR")


def addr_of(dev):
    """An rdma_cm address on @dev's interface: IPv4, else global IPv6, else link-local."""
    ifname = netdev_of(dev)
    v6 = {}
    with open("/proc/net/if_inet6") as f:
        for line in f:
            hexaddr, _idx, _plen, scope, _flags, name = line.split()
            if name == ifname:
                v6.setdefault(int(scope, 16), str(ipaddress.IPv6Address(int(hexaddr, 16))))
    ip = subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", ifname],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for link in json.loads(ip.stdout or "[]") if ip.returncode == 0 else []:
        for a in link.get("addr_info", []):
            if a.get("family") == "inet":
                return a["local"]
    if 0 in v6:
        return v6[0]
    if 0x20 in v6:
        return f"{v6[0x20]}%{ifname}"
    raise TuneError(f"{dev}: interface {ifname} has no IP address; give --addr {dev}=ADDR")


def _topo(topo, args):
    r = subprocess.run([topo, "--json"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr.strip()


def _pus_str(pus):
    """0,1,2,5 -> "0-2,5"."""
    out, start = [], None
    for i, p in enumerate(pus):
        if start is None:
            start = p
        if i + 1 == len(pus) or pus[i + 1] != p + 1:
            out.append(str(start) if start == p else f"{start}-{p}")
            start = None
    return ",".join(out)


def locality(topo, dev):
    """@dev's NUMA nodes, local PUs, locality rule and its count of local cores, from
    pollcore-topo (numa/'s planner): a plan with a worker on every local PU, SMT
    siblings allowed, counts the distinct local cores it uses."""
    rc, js, err = _topo(topo, ["--device", dev])
    if rc:
        raise TuneError(f"pollcore-topo --device {dev} exited {rc}: {err}")
    d = js["devices"][0]
    pus = d["local_pus"]
    rc, plan, err = _topo(topo, ["--device", dev, "--all-cores", "--smt",
                                 "--workers", str(len(pus))])
    if rc:
        raise TuneError(f"pollcore-topo --device {dev} --workers {len(pus)} exited {rc}: {err}")
    cores = len({(e["numa_node"], e["core"]) for e in plan["plan"] if e["local"]})
    nodes = ",".join(map(str, d["numa_nodes"]))
    if d["locality"] == "machine":
        note = (f"no NUMA locality information (placement rule 'machine'): the sweep uses "
                f"the online CPUs, PUs {_pus_str(pus)}, {_plural(cores, 'core')}")
    else:
        note = (f"NUMA node {nodes} (rule '{d['locality']}'), local PUs {_pus_str(pus)}, "
                f"{_plural(cores, 'core')}")
    return {"numa_nodes": d["numa_nodes"], "local_pus": pus, "locality": d["locality"],
            "cores": cores, "locality_note": note}


def placement(topo, dev, workers):
    """Where the engine's default plan puts @workers workers of @dev, in words."""
    rc, plan, err = _topo(topo, ["--device", dev, "--workers", str(workers)])
    if rc:
        why = err.splitlines()[-1] if err else f"no plan (exit {rc})"
        return "unpinned: " + why.split("pollcore-topo: ", 1)[-1]
    pus = sorted(e["pu"] for e in plan["plan"])
    spilled = sum(1 for e in plan["plan"] if not e["local"])
    where = f"PUs {_pus_str(pus)}"
    return where + (f", {spilled} off the NIC's node" if spilled else ", NIC-local")


# --- running pollcore-bench ------------------------------------------------------------------

class Server:
    """A pollcore-bench server with @workers workers on @dev, on a port of its own,
    for every client run of one sweep point (a context manager); run() is one
    client against it, stop() checks the server's own exit."""

    port = 19300 + os.getpid() % 500

    def __init__(self, a, tmp, dev, addr, workers):
        Server.port += 1
        self.a, self.dev, self.addr = a, dev, addr
        self.log = os.path.join(tmp, f"server-{dev}-{workers}")
        # --idle busy: the sweep measures cores busy-polling (the library's
        # auto would let an unbound worker sleep)
        self.cmd = [a.bench, "server", "--addr", addr, "--port", str(Server.port),
                    "--device", dev, "--workers", str(workers), "--idle", "busy"]
        with open(self.log, "w") as f:
            self.proc = subprocess.Popen(self.cmd, stdout=f, stderr=subprocess.STDOUT)

    def __enter__(self):
        try:
            self._wait_listening()
        except BaseException:
            self._end()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        rc = self._end()
        if exc_type is None and rc != 0:
            raise TuneError(f"{' '.join(self.cmd)} exited {rc} after SIGTERM:\n{self._output()}")

    def _output(self):
        with open(self.log) as f:
            return f.read()

    def _end(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def _wait_listening(self):
        deadline = time.monotonic() + LISTEN_TIMEOUT
        while time.monotonic() < deadline:
            if "listening on" in self._output():
                return
            if self.proc.poll() is not None:
                raise TuneError(f"{' '.join(self.cmd)} exited {self.proc.returncode}:\n"
                                f"{self._output()}")
            time.sleep(0.1)
        raise TuneError(f"{' '.join(self.cmd)}: not listening after {LISTEN_TIMEOUT} s")

    def run(self, client_workers, args):
        """One client run; its JSON, after checking it says "check": "ok"."""
        cmd = [self.a.bench, "client", self.addr, "--port", str(Server.port), "--device",
               self.dev, "--workers", str(client_workers), "--no-numa", "--idle", "busy",
               "--json"] + args
        cli = subprocess.run(["timeout", str(RUN_TIMEOUT)] + cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        what = " ".join(cmd)
        try:
            js = json.loads(cli.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise TuneError(f"{what} exited {cli.returncode} and printed no JSON:\n"
                            f"{cli.stdout}{cli.stderr}")
        if js.get("check") != "ok" or cli.returncode != 0:
            raise TuneError(f"{what}: check {js.get('check')!r}, exit {cli.returncode}: "
                            f"{js.get('error')}\n{cli.stderr}")
        if self.a.verbose:
            sys.stderr.write(cli.stderr)
        return js

    def median(self, client_workers, args):
        """--repeat runs; the one with the median rate (its own figures, not a blend),
        and every run's rate."""
        runs = sorted((self.run(client_workers, args) for _ in range(self.a.repeat)),
                      key=lambda j: j["rate"])
        return runs[len(runs) // 2], [j["rate"] for j in runs]


def sweep_device(a, tmp, dev, addr, loc, progress):
    top = min(loc["cores"], a.max_workers) if a.max_workers else loc["cores"]
    length = ["--quick"] if a.quick else ["-D", f"{a.duration:g}"]
    points = []
    for n in range(1, top + 1):
        conns = n * a.conns_per_worker
        cw = a.client_workers or n
        base = ["-q", str(conns), "-s", str(a.size)] + length
        sends = []
        with Server(a, tmp, dev, addr, n) as srv:
            for b in a.post_batch_list or [None]:
                extra = [] if b is None else ["--producer", "thread", "--post-batch", str(b)]
                js, rates = srv.median(cw, ["--mode", "send"] + base + extra)
                sends.append({"post_batch": b, "rate": js["rate"], "runs": rates,
                              "seconds": js["seconds"], "sent": js["sent"]})
                progress(f"{dev}: {_plural(n, 'worker')}, {conns} conns"
                         f"{'' if b is None else f', post batch {b}'}: "
                         f"send {js['rate']:.0f} msg/s")
            js, rates = srv.median(cw, ["--mode", "rpc"] + base)
        lat = js["lat_us"]
        progress(f"{dev}: {_plural(n, 'worker')}, {conns} conns: rpc {js['rate']:.0f} req/s, "
                 f"p99 {lat['p99']:.1f} us")
        points.append({"workers": n, "connections": conns, "client_workers": cw,
                       "placement": placement(a.topo, dev, n), "send": sends,
                       "rpc": {"rate": js["rate"], "runs": rates, "p50_us": lat["p50"],
                               "p99_us": lat["p99"], "p999_us": lat["p999"],
                               "seconds": js["seconds"]}})
    return points


def run_sweep(a, progress):
    devs = a.device or rdma_devices()
    if not devs:
        raise TuneError("no RDMA device found (without a NIC, run it inside the soft-RoCE "
                        "VM: tools/rxe-vm --devices 2 -- tools/pollcore-tune --quick)")
    for dev in devs:
        if not os.path.isdir(f"{SYSFS_IB}/{dev}"):
            raise TuneError(f"no RDMA device {dev} (have: {', '.join(rdma_devices()) or 'none'})")
    for tool in (a.bench, a.topo):
        if not os.access(tool, os.X_OK):
            raise TuneError(f"{tool} is not built (ninja -C build)")
    addrs = dict(kv.split("=", 1) for kv in a.addr)
    sweep = {"tool": "pollcore-tune", "format": FORMAT, "host": os.uname().nodename,
             "quick": a.quick, "duration_s": 1 if a.quick else a.duration, "size": a.size,
             "repeat": a.repeat, "conns_per_worker": a.conns_per_worker,
             "client_workers": a.client_workers or "as many as the server's",
             "tolerance": a.tolerance / 100, "latency_tolerance": a.latency_tolerance / 100,
             "devices": []}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pollcore-tune.") as tmp:
        for dev in devs:
            loc = locality(a.topo, dev)
            addr = addrs.get(dev) or addr_of(dev)
            progress(f"{dev}: {loc['locality_note']}; address {addr}")
            entry = {"name": dev, "addr": addr, **loc}
            entry["points"] = sweep_device(a, tmp, dev, addr, loc, progress)
            sweep["devices"].append(entry)
    sweep["seconds"] = round(time.monotonic() - t0, 1)
    return sweep


# --- command line ----------------------------------------------------------------------------

def _batches(s):
    try:
        v = [int(x) for x in s.split(",")]
    except ValueError:
        v = []
    if not v or any(b < 1 or b > 4096 for b in v):
        raise argparse.ArgumentTypeError(f"'{s}' is not a list of numbers from 1 to 4096")
    return v


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="pollcore-tune",
                                 description=__doc__.split("\n")[0].split(" - ")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[2:]).split("This module")[0])
    ap.add_argument("--device", action="append", metavar="NAME", help="sweep this device (repeatable); "
                    "default: every RDMA device")
    ap.add_argument("--addr", action="append", default=[], metavar="DEV=ADDR",
                    help="rdma_cm address on DEV (default: from its interface)")
    ap.add_argument("--quick", action="store_true", help="1 s runs")
    ap.add_argument("--time", "--duration", dest="duration", type=float, default=5, metavar="SECS",
                    help="seconds per run (default 5; --duration is deprecated)")
    ap.add_argument("--repeat", type=int, default=1, metavar="R", help="runs per point; the median counts")
    ap.add_argument("--max-workers", type=int, default=0, metavar="N", help="sweep at most N workers per device")
    ap.add_argument("--post-batch-list", type=_batches, metavar="B,B..",
                    help="also sweep the send post batch (client's main thread posting)")
    ap.add_argument("--conns-per-worker", type=int, default=1, metavar="K", help="connections per server worker (default 1)")
    ap.add_argument("--client-workers", type=int, default=0, metavar="N",
                    help="client workers (default: as many as the server's)")
    ap.add_argument("--size", type=int, default=64, metavar="BYTES", help="message size, default 64")
    ap.add_argument("--tolerance", type=float, default=5, metavar="PCT",
                    help="%% of the best rate a recommendation may lose (default 5)")
    ap.add_argument("--latency-tolerance", type=float, default=25, metavar="PCT",
                    help="%% above the lowest p99 (of the counts fast enough) a "
                    "recommendation may have (default 25)")
    ap.add_argument("--out-svg", default="pollcore-tune.svg", metavar="PATH", help="chart (default "
                    "pollcore-tune.svg; '' for none)")
    ap.add_argument("--out-json", metavar="PATH", help="also write the sweep as JSON here")
    ap.add_argument("--json", action="store_true", help="print the JSON, not the table")
    ap.add_argument("--from", dest="from_json", metavar="SWEEP.json",
                    help="no runs: report on a saved sweep (tolerances: the options', if given)")
    ap.add_argument("--bench", default=os.path.join(BUILD, "tools", "pollcore-bench"),
                    metavar="PATH", help="pollcore-bench binary (default: build/tools)")
    ap.add_argument("--topo", default=os.path.join(BUILD, "tools", "pollcore-topo"),
                    metavar="PATH", help="pollcore-topo binary (default: build/tools)")
    ap.add_argument("--verbose", action="store_true", help="show each client's progress")
    a = ap.parse_args(argv)
    if any(x == "--duration" or x.startswith("--duration=") for x in argv):
        print("pollcore-tune: --duration is deprecated, use --time", file=sys.stderr)
    for name in ("repeat", "conns_per_worker", "size"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: at least 1")
    if a.max_workers < 0 or a.client_workers < 0 or not a.duration > 0:
        ap.error("--max-workers, --client-workers: 0 or more; --time: more than 0")
    if not 0 <= a.tolerance < 100 or a.latency_tolerance < 0:
        ap.error("--tolerance: 0 to 100; --latency-tolerance: 0 or more")
    if any("=" not in kv for kv in a.addr):
        ap.error("--addr: DEV=ADDR")
    a.given = {x.split("=")[0] for x in argv if x.startswith("--")}
    a.bench, a.topo = os.path.abspath(a.bench), os.path.abspath(a.topo)
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)

    def progress(msg):
        print(f"pollcore-tune: {msg}", file=sys.stderr, flush=True)

    try:
        if a.from_json:
            with open(a.from_json) as f:
                sweep = json.load(f)
            analyse(sweep, a.tolerance / 100 if "--tolerance" in a.given else None,
                    a.latency_tolerance / 100 if "--latency-tolerance" in a.given else None)
        else:
            sweep = analyse(run_sweep(a, progress))
    except TuneError as e:
        print(f"pollcore-tune: FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    if a.out_svg:
        with open(a.out_svg, "w") as f:
            f.write(svg_chart(sweep))
    if a.out_json:
        with open(a.out_json, "w") as f:
            json.dump(sweep, f, indent=2)
            f.write("\n")
    if a.json:
        print(json.dumps(sweep, indent=2))
    else:
        print(format_table(sweep), end="")
        written = [p for p in (a.out_svg, a.out_json) if p]
        if written:
            print(f"written: {', '.join(written)}")
    return 0
