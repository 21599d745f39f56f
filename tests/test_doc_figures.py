#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""unit suite (test doc_figures): every figure docs/*.md states about the code
(a default, a limit, a size, a version) is marked where it stands,

    the window (64<!-- fig: default.window --> by default)
    a 16 MiB<!-- fig: default.max_msg_size_mib --> message
    `PC_IDLE_AUTO`<!-- fig: default.idle -->

and must equal the value of that name that the code gives now: the program
tests/doc_figures.c prints most of them from the real constants and
defaults; the constants that live in .c files are read here from their
#define lines. The figure is the number (or the `identifier`) right before
the marker, a unit word between them allowed. A marker whose name the code
does not give fails too, as does a doc set without markers.

  test_doc_figures.py DOC_FIGURES_PROGRAM SOURCE_ROOT
"""
import glob
import os
import re
import subprocess
import sys

MARK = re.compile(r"(?:`([A-Za-z_][A-Za-z0-9_]*)`|(\d[\d,]*(?:\.\d+)?)(?:[ \u00a0]?[A-Za-zµ]+)?)"
                  r"<!-- fig: ([\w.]+) -->")
ANY_MARK = re.compile(r"<!-- fig: ([\w.]+) -->")


def c_define(root, path, name):
    """The value of `#define NAME <integer expression>` in a .c file."""
    with open(os.path.join(root, path)) as f:
        for line in f:
            m = re.match(rf"\s*#define\s+{name}\s+(.+?)\s*(/\*.*)?$", line)
            if m:
                expr = re.sub(r"(\d+)(?:ull|ul|u|ll|l)\b", r"\1", m.group(1), flags=re.I)
                if not re.fullmatch(r"[\d\s()*+/<-]+", expr):
                    sys.exit(f"doc_figures: {path}: {name} is '{m.group(1)}', not a plain number")
                return eval(expr)  # digits and operators only, checked above
    sys.exit(f"doc_figures: {path} has no #define {name}")


def figures(prog, root):
    out = subprocess.run([prog], capture_output=True, text=True, check=True).stdout
    v = {}
    for line in out.splitlines():
        k, _, x = line.partition(" ")
        v[k] = x
    num = lambda k: float(v[k])
    # constants of .c files
    scans = c_define(root, "workers/keepalive.c", "KA_SQ_STUCK_SCANS")
    v["ka.sq_stuck_periods"] = str(scans // 2)
    v["ka.done_deadline_s"] = str(scans // 2 * num("default.keepalive_ms") / 1000)
    v["rndv.oldest_periods"] = str(scans // 2 * num("RNDV_OLDEST_LIMITS"))
    v["rndv.oldest_s"] = str(scans // 2 * num("RNDV_OLDEST_LIMITS") * num("default.keepalive_ms") / 1000)
    v["worker.sleep_max_ms"] = str(c_define(root, "workers/worker.c", "SLEEP_MAX_NS") // 1000000)
    v["drain.marker_timeout_s"] = str(c_define(root, "workers/drain.c", "MARKER_TIMEOUT_NS") // 10**9)
    v["drain.grace_ms"] = str(c_define(root, "workers/drain.c", "LAST_WQE_GRACE_NS") // 1000000)
    v["APP_BINDINGS"] = str(c_define(root, "workers/submit.c", "APP_BINDINGS"))
    with open(os.path.join(root, "workers/engine.c")) as f:
        waits = re.findall(r"wait_for\(e, all_\w+, (\d+)\)", f.read())
    if not waits or len(set(waits)) != 1:
        sys.exit("doc_figures: workers/engine.c: pc_engine_destroy()'s wait_for() bounds not found")
    v["destroy.wait_s"] = str(int(waits[0]) // 1000)
    return v


def same(doc, code):
    try:
        return float(doc.replace(",", "")) == float(code)
    except ValueError:
        return doc == code


def main():
    prog, root = sys.argv[1], sys.argv[2]
    v = figures(prog, root)
    bad, n = [], 0
    for path in sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        rel = os.path.relpath(path, root)
        with open(path) as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines, 1):
            found = {m.start(3): m for m in MARK.finditer(line)}
            for a in ANY_MARK.finditer(line):
                n += 1
                m = found.get(a.start(1))
                name = a.group(1)
                if not m:
                    bad.append(f"{rel}:{i}: marker '{name}' follows no figure")
                    continue
                doc = m.group(1) or m.group(2)
                if name not in v:
                    bad.append(f"{rel}:{i}: '{name}': the code gives no such figure "
                               "(tests/doc_figures.c, tests/test_doc_figures.py)")
                elif not same(doc, v[name]):
                    bad.append(f"{rel}:{i}: says {doc} for '{name}', the code says {v[name]}")
    if n == 0:
        bad.append("no <!-- fig: NAME --> marker in docs/*.md")
    for b in bad:
        print(b)
    print(f"doc_figures: {n} figures checked, {len(bad)} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
