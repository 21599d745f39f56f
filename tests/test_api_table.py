#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""unit suite: docs/api.md's table of every call ("## Every call"), the man
pages and the public headers say the same thing about each PC_API
function's errors (issue 28).

  test_api_table.py SRCDIR

Fails when:
  - a PC_API function of the public headers is missing from the table, is
    listed twice, or is out of header order; or the table lists a name that
    is not exported;
  - the table's errors for a function differ from its man page's: the page
    is the docs/man/*.3.md whose NAME line names the function; its ERRORS
    section is a definition list whose terms are "**EXXX**" (several
    separated by commas). An error applies to every function of the page,
    unless a line of its definition opens with a parenthesis of function
    names, "(**pc_a**, **pc_b**) ...": then it applies to those named in
    such parentheses only. ERRORS text outside the definitions may not name
    an errno (say "passed on from ibv_reg_mr(3)" instead);
  - the table's errors differ from the errno names in the function's
    kernel-doc comment, the /** ... */ block right above its PC_API
    declaration.

In the header comments, a token counts as an error when it matches
\\bE[A-Z0-9]{2,}\\b and is an errno name that Python's errno module knows
(so "EOF" or a macro never counts). One exclusion: a name written right
after the word "status" ("with status -ECANCELED") is the status a
completion receives, not what the call returns, and is ignored.

Python 3 standard library only. Prints, for each failure, the function and
the three sets (table, man page, header).
"""
import errno
import glob
import os
import re
import sys

HEADER_DIRS = [
    "core/include/pollcore",
    "numa/include/pollcore",
    "workers/include/pollcore",
]
ERRNO_NAMES = {n for n in dir(errno) if re.fullmatch(r"E[A-Z0-9]+", n)}
E_TOKEN = re.compile(r"\bE[A-Z0-9]{2,}\b")
STATUS_TOKEN = re.compile(r"\bstatus\s+-?(E[A-Z0-9]{2,})\b")


def headers(src):
    """The public headers, in the order of the issue's perl one-liner."""
    out = []
    for d in HEADER_DIRS:
        out += sorted(glob.glob(os.path.join(src, d, "*.h")))
    return out


def exported(src):
    """PC_API function names, in header order, as (name, header) pairs."""
    out = []
    for h in headers(src):
        text = open(h, encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        for m in re.finditer(r"\bPC_API\b[^;{}]*?\b(\w+)\s*\(", text):
            if m.group(1) != "__attribute__":
                out.append((m.group(1), os.path.relpath(h, src)))
    return out


def errors_in(text):
    """Errno names in a header comment, completion statuses left out."""
    statuses = {m.start(1) for m in STATUS_TOKEN.finditer(text)}
    return {
        m.group(0)
        for m in E_TOKEN.finditer(text)
        if m.group(0) in ERRNO_NAMES and m.start() not in statuses
    }


def header_docs(src):
    """name -> errno names of the kernel-doc block right above its PC_API line."""
    docs = {}
    decl = re.compile(
        r"(/\*\*(?:(?!\*/).)*\*/)[ \t]*\n(?:[ \t]*\n)?PC_API\b[^;{}]*?\b(\w+)\s*\(", re.S
    )
    for h in headers(src):
        text = open(h, encoding="utf-8").read()
        for m in decl.finditer(text):
            docs[m.group(2)] = errors_in(m.group(1))
    return docs


def section(text, start, level):
    """The lines of the section that starts at heading @start, up to the next heading of @level."""
    lines = text.split("\n")
    try:
        i = lines.index(start)
    except ValueError:
        return None
    out = []
    for line in lines[i + 1:]:
        if re.match(r"#{1,%d} " % level, line):
            break
        out.append(line)
    return out


def api_table(src, problems):
    """[(name, errors)] of the table in docs/api.md's "## Every call", in order."""
    text = open(os.path.join(src, "docs", "api.md"), encoding="utf-8").read()
    lines = section(text, "## Every call", 2)
    if lines is None:
        problems.append('docs/api.md has no "## Every call" section')
        return []
    rows = []
    for line in lines:
        m = re.match(r"\|\s*`(pc_\w+)`\s*\|", line)
        if not m:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4:
            problems.append("docs/api.md: row of %s has %d cells, not 4 (call | threads | "
                            "blocks | errors)" % (m.group(1), len(cells)))
            continue
        cell = cells[3]
        if cell == "`none`" or cell == "none":
            errs = set()
        else:
            items = [i.strip() for i in cell.split(",")]
            bad = [i for i in items if not re.fullmatch(r"`E[A-Z0-9]+`", i)]
            if bad:
                problems.append("docs/api.md: %s: errors cell %r is not a list of `EXXX`, or "
                                "none" % (m.group(1), cell))
                continue
            errs = {i.strip("`") for i in items}
            unknown = errs - ERRNO_NAMES
            if unknown:
                problems.append("docs/api.md: %s: %s is no errno name" %
                                (m.group(1), ", ".join(sorted(unknown))))
        rows.append((m.group(1), errs))
    return rows


def man_pages(src, problems):
    """name -> (page, errors) from the ERRORS sections of docs/man/*.3.md."""
    out = {}
    term = re.compile(r"\*\*(E[A-Z0-9]+)\*\*")
    term_line = re.compile(r"\*\*E[A-Z0-9]+\*\*(\s*,\s*\*\*E[A-Z0-9]+\*\*)*\s*")
    scope = re.compile(r"\(((?:\*\*pc_\w+\*\*)(?:\s*,\s*\*\*pc_\w+\*\*)*)\)")
    for path in sorted(glob.glob(os.path.join(src, "docs", "man", "*.3.md"))):
        page = os.path.basename(path)
        text = open(path, encoding="utf-8").read()
        name = section(text, "# NAME", 1)
        names = []
        for line in name or []:
            if line.strip():
                names = [n.strip() for n in line.split(" - ")[0].split(",")]
                break
        if not names:
            problems.append("%s: no NAME line" % page)
            continue
        errs = {n: set() for n in names}
        lines = section(text, "# ERRORS", 1)
        if lines is None:
            problems.append("%s: no ERRORS section" % page)
            lines = []
        items = []  # [(errnos, definition lines)]
        for line in lines:
            if term_line.fullmatch(line):
                items.append((term.findall(line), []))
            elif items and (line.startswith(":   ") or line.startswith("    ")):
                items[-1][1].append(line[4:])
            elif line.strip():
                # a paragraph of its own ("None.", "Other values are passed on ...")
                stray = errors_in(line)
                if stray:
                    problems.append("%s: ERRORS names %s outside a term and its definition: "
                                    "give it a term of its own" % (page, ", ".join(sorted(stray))))
        for enames, definition in items:
            applies = set()
            for d in definition:
                m = scope.match(d.strip())
                if m:
                    for n in re.findall(r"\*\*(pc_\w+)\*\*", m.group(1)):
                        if n not in errs:
                            problems.append("%s: %s's parenthesis names %s, not on the "
                                            "NAME line" % (page, "/".join(enames), n))
                        else:
                            applies.add(n)
            for n in applies or errs:
                errs[n] |= set(enames)
        for n, e in errs.items():
            if n in out:
                problems.append("%s is on the NAME line of %s and of %s" % (n, out[n][0], page))
            out[n] = (page, e)
    return out


def fmt(s):
    return "{" + ", ".join(sorted(s)) + "}" if s else "{} (none)"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_api_table.py SRCDIR")
    src = sys.argv[1]
    problems = []
    exp = exported(src)
    names = [n for n, _ in exp]
    if len(names) < 50:
        sys.exit("test_api_table: only %d PC_API functions found (parser broken?)" % len(names))
    if len(set(names)) != len(names):
        problems.append("a PC_API function is declared twice: %s" %
                        sorted({n for n in names if names.count(n) > 1}))
    rows = api_table(src, problems)
    listed = [n for n, _ in rows]
    table = {}
    for n, e in rows:
        if n in table:
            problems.append("docs/api.md: %s is listed twice" % n)
        table[n] = e
    for n, h in exp:
        if n not in table:
            problems.append("docs/api.md: %s (%s) is missing from the table" % (n, h))
    for n in listed:
        if n not in names:
            problems.append("docs/api.md: %s is in the table but no header exports it "
                            "(PC_API)" % n)
    order = [n for n in listed if n in names]
    if not problems and order != names:
        first = next(i for i, (a, b) in enumerate(zip(order, names)) if a != b)
        problems.append("docs/api.md: the table is not in header order: %s where %s "
                        "should be" % (order[first], names[first]))
    man = man_pages(src, problems)
    docs = header_docs(src)
    mismatches = 0
    for n, h in exp:
        t = table.get(n)
        page, m = man.get(n, ("(no page)", None))
        d = docs.get(n)
        if n not in man:
            problems.append("%s has no man page (NAME line of a docs/man/*.3.md)" % n)
        if d is None:
            problems.append("%s (%s) has no /** ... */ comment right above its PC_API "
                            "declaration" % (n, h))
        if t is None or m is None or d is None:
            continue
        if t != m or t != d:
            mismatches += 1
            print("MISMATCH %s:\n  table   (docs/api.md)      %s\n  man     (docs/man/%s) %s\n"
                  "  header  (%s) %s" % (n, fmt(t), page, fmt(m), h, fmt(d)))
    for p in problems:
        print("FAIL: " + p)
    if problems or mismatches:
        print("test_api_table: %d problem(s), %d function(s) whose errors disagree" %
              (len(problems), mismatches))
        return 1
    print("ok: %d PC_API functions; table, man pages and headers agree on every one's "
          "errors" % len(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
