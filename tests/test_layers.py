#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
test_layers.py SOURCE_ROOT BUILD_ROOT: core/, numa/ and workers/ keep to the
layers docs/architecture.md names ("Layers of the library"), calls and
includes only downward.

- The layers come from docs/architecture.md's list between
  <!-- layers: --> and <!-- /layers -->, bottom first, one line each:
  `N. **name**: file, file, ...: what it does`. A name ending in `/`
  stands for every file of that folder not listed elsewhere.
- Every .c and private .h of core/, numa/ and workers/ is in exactly one
  layer (public headers, <folder>/include/pollcore/*.h, are the folder's
  contract: core's and numa's in their layers, workers' readable by all).
- Calls: the graph is built from the object files (`nm`: what each
  defines, what it needs), not from the includes, since the .c files share
  private headers: a symbol one object needs and another defines is an
  edge from the one's source to the other's. Code inlined from a header
  counts as its includer's. An edge to a higher layer fails, and so does a
  cycle between layers.
- Includes: a file may include a private header of its own layer or a
  lower one, never of a higher one.
"""
import glob
import os
import re
import subprocess
import sys

FOLDERS = ("core", "numa", "workers")


def fail(msgs):
    for m in msgs:
        print("FAIL:", m)
    print(f"0 passed, {len(msgs)} failed")
    sys.exit(1)


def parse_layers(root):
    """[(name, [patterns])], bottom first, from docs/architecture.md."""
    text = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    m = re.search(r"<!-- layers: -->(.*?)<!-- /layers -->", text, re.S)
    if not m:
        fail(["docs/architecture.md has no <!-- layers: --> ... <!-- /layers --> list"])
    layers = []
    for line in m.group(1).splitlines():
        lm = re.match(r"\s*\d+\.\s+\*\*([\w-]+)\*\*:\s*([^:]+):\s*\S", line)
        if lm:
            files = [f.strip().strip("`") for f in lm.group(2).split(",") if f.strip()]
            layers.append((lm.group(1), files))
        elif line.strip():
            fail([f"docs/architecture.md, layers list: a line not of the form "
                  f"'N. **name**: files: what it does': {line.strip()!r}"])
    if not layers:
        fail(["docs/architecture.md's layers list is empty"])
    return layers


def source_files(root):
    """Every .c and private .h of the three folders, relative to @root."""
    out = []
    for d in FOLDERS:
        for f in sorted(os.listdir(os.path.join(root, d))):
            if f.endswith((".c", ".h")):
                out.append(f"{d}/{f}")
        for f in sorted(glob.glob(os.path.join(root, d, "include", "pollcore", "*.h"))):
            out.append(os.path.relpath(f, root))
    return out


def assign(layers, files):
    """file -> layer index; errors for files in none, in two, or listed but absent."""
    errs, where = [], {}
    folder_layer = {}
    for i, (name, pats) in enumerate(layers):
        for p in pats:
            if p.endswith("/"):
                folder_layer[p.rstrip("/")] = i
                continue
            path = p if "/" in p else None
            if path is None:
                errs.append(f"layer {name}: {p!r} has no folder (write workers/{p})")
                continue
            if path not in files:
                errs.append(f"layer {name}: {path} does not exist")
                continue
            if path in where:
                errs.append(f"{path} is in two layers: {layers[where[path]][0]} and {name}")
            where[path] = i
    for f in files:
        if f in where:
            continue
        top = f.split("/")[0]
        if f.startswith("workers/include/"):
            continue  # the public API's declarations: every layer may read them
        if top in folder_layer:
            where[f] = folder_layer[top]
        elif f.endswith(".c") or not f.startswith(tuple(d + "/include/" for d in FOLDERS)):
            errs.append(f"{f} is in no layer (docs/architecture.md, Layers of the library)")
    return where, errs


def objects(build):
    """source path -> object file, for the static libraries of the three folders."""
    out = {}
    for o in glob.glob(os.path.join(build, "libpc-*.a.p", "*.c.o")):
        base = os.path.basename(o)[: -len(".o")]
        folder, _, name = base.partition("_")
        if folder in FOLDERS:
            out[f"{folder}/{name}"] = o
    return out


def symbols(obj):
    defined, needed = set(), set()
    res = subprocess.run(["nm", obj], capture_output=True, text=True, check=True)
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            needed.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWGS" and parts[1] != "":
            defined.add(parts[2])
    return defined, needed


def call_edges(objs):
    """{(from_source, to_source): [symbols]}"""
    defs, needs = {}, {}
    for src, o in objs.items():
        defs[src], needs[src] = symbols(o)
    owner = {}
    for src, d in defs.items():
        for s in d:
            owner[s] = src
    edges = {}
    for src, n in needs.items():
        for s in sorted(n):
            t = owner.get(s)
            if t and t != src:
                edges.setdefault((src, t), []).append(s)
    return edges


def include_edges(root, files):
    """{(file, header): [line numbers]} for includes of files of the three folders."""
    by_name = {}
    for f in files:
        if "/include/pollcore/" in f:
            by_name["pollcore/" + os.path.basename(f)] = f
        else:
            by_name.setdefault(os.path.basename(f), f)
    edges = {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
                if m and m.group(1) in by_name and by_name[m.group(1)] != f:
                    edges.setdefault((f, by_name[m.group(1)]), []).append(no)
    return edges


def layer_cycles(n, ledges):
    """Cycles of the graph of layers (Tarjan's SCC), each as a list of indices."""
    adj = {i: set() for i in range(n)}
    for a, b in ledges:
        adj[a].add(b)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in range(n):
        if v not in index:
            strong(v)
    return out


def main():
    root, build = sys.argv[1], sys.argv[2]
    layers = parse_layers(root)
    files = source_files(root)
    where, errs = assign(layers, files)
    objs = objects(build)
    for f in files:
        if f.endswith(".c") and f not in objs:
            errs.append(f"{f}: no object file in {build} (not built into libpollcore?)")
    if errs:
        fail(errs)
    name = lambda i: f"{layers[i][0]} ({i + 1})"
    calls = call_edges(objs)
    incs = include_edges(root, files)
    ledges = set()
    for (a, b), syms in sorted(calls.items()):
        la, lb = where[a], where[b]
        if la != lb:
            ledges.add((la, lb))
        if lb > la:
            errs.append(f"upward call: {a} [{name(la)}] calls {', '.join(syms)} of {b} [{name(lb)}]")
    for (a, h), lines in sorted(incs.items()):
        if h not in where or a not in where:
            continue  # workers' public headers
        la, lh = where[a], where[h]
        if la != lh:
            ledges.add((la, lh))
        if lh > la:
            errs.append(f"upward include: {a}:{lines[0]} [{name(la)}] includes {h} [{name(lh)}]")
    for cyc in layer_cycles(len(layers), ledges):
        errs.append("cycle between layers: " + " <-> ".join(name(i) for i in cyc))
    if errs:
        fail(errs)
    ncalls = sum(1 for (a, b) in calls if where[a] != where[b])
    print(f"{len(layers)} layers, {len(files)} files, {len(objs)} objects; "
          f"{ncalls} calls and {len(incs)} includes between files, none upward")
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
