#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""unit suite (test doc_examples): every ```c block of docs/*.md compiles.

Each block is preceded by a comment that says what it is:

  <!-- example: program -->   a whole program: compiled and linked against
                              libpollcore (api.md's server and client are
                              also run, by the rdma suite's api_doc test);
  <!-- example: file -->      declarations and functions at file scope;
  <!-- example: fragment -->  statements: wrapped in a function.

Files and fragments get tests/doc_examples.h in front (the handles and the
application's own functions they take as given) and are compiled only. A
block without such a comment fails, as does one that does not compile with
-Wall -Werror. `needs=liburing` after the kind: skipped (said so) where
<liburing.h> is missing.

  test_doc_examples.py SOURCE_ROOT LIBPOLLCORE.so [CC...]
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

KIND = re.compile(r"<!-- example: (program|file|fragment)((?: \S+)*) -->")


def blocks(path):
    """(line, kind, options, code) of each ```c block of @path."""
    lines = open(path).read().splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```c":
            start, j = i + 1, i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            prev = i - 1
            while prev >= 0 and not lines[prev].strip():
                prev -= 1
            m = KIND.fullmatch(lines[prev].strip()) if prev >= 0 else None
            out.append((start + 1, m.group(1) if m else None,
                        m.group(2).split() if m else [], "\n".join(lines[start:j]) + "\n"))
            i = j
        i += 1
    return out


def main():
    root, lib = sys.argv[1], sys.argv[2]
    cc = sys.argv[3:] or ["cc"]
    san = os.environ.get("PC_SANITIZE", "none")
    san = [] if san in ("", "none") else [f"-fsanitize={san}"]
    inc = [f"-I{root}/{d}/include" for d in ("core", "numa", "workers")]
    flags = ["-std=gnu11", "-Wall", "-Werror", "-Wno-unused"] + inc
    have_uring = subprocess.run(cc + ["-E", "-x", "c", "-"], input="#include <liburing.h>\n",
                                capture_output=True, text=True).returncode == 0
    bad, n = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
            rel = os.path.relpath(path, root)
            for line, kind, opts, code in blocks(path):
                n += 1
                where = f"{rel}:{line}"
                if not kind:
                    print(f"FAIL {where}: a ```c block without <!-- example: program|file|"
                          "fragment --> before it")
                    bad += 1
                    continue
                if "needs=liburing" in opts and not have_uring:
                    print(f"SKIP {where}: {kind} needs <liburing.h>, not found")
                    continue
                src = os.path.join(tmp, f"ex{n}.c")
                if kind == "program":
                    text = f'#line {line} "{rel}"\n' + code
                    cmd = cc + flags + san + ["-o", os.path.join(tmp, f"ex{n}"), src, lib,
                                              f"-Wl,-rpath,{os.path.dirname(lib)}"]
                else:
                    head = f'#include "{root}/tests/doc_examples.h"\n'
                    if kind == "file":
                        text = head + f'#line {line} "{rel}"\n' + code
                    else:
                        text = (head + f"void doc_example_{n}(void);\nvoid doc_example_{n}(void)\n"
                                f'{{\n#line {line} "{rel}"\n' + code + "}\n")
                    cmd = cc + flags + ["-c", "-o", os.path.join(tmp, f"ex{n}.o"), src]
                with open(src, "w") as f:
                    f.write(text)
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    print(f"FAIL {where}: the {kind} does not compile:\n{r.stderr}")
                    bad += 1
                else:
                    print(f"ok   {where}: {kind}")
    if n == 0:
        print("FAIL: no ```c block in docs/*.md")
        bad += 1
    print(f"doc_examples: {n} blocks, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
