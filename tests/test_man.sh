#!/bin/bash
# SPDX-License-Identifier: MIT
#
# test_man.sh SRCDIR: every PC_API function has a man page, and every long
# option a tool accepts appears in that tool's page (docs/man/*.md, the
# sources the build converts). A function is covered when its name is on
# the NAME line of a section 3 page (docs/meson.build installs a .so link
# for each such name); an option when "--name" appears in the tool's page.
set -euo pipefail
src=${1:?usage: test_man.sh SRCDIR}
man=$src/docs/man
fail=0

# names on the NAME lines of the section 3 pages
documented=$(for f in "$man"/*.3.md; do
	awk '/^# NAME/ { getline; while ($0 == "") getline; sub(/ - .*/, ""); print; exit }' "$f"
done | tr ',' '\n' | tr -d ' ' | sort -u)

# PC_API functions of the public headers; internal helpers left out
exported=$(cat "$src"/core/include/pollcore/*.h "$src"/numa/include/pollcore/*.h \
		"$src"/workers/include/pollcore/*.h | grep -v '#define PC_API' |
	tr '\n' ' ' | grep -oE 'PC_API[^;{(]*\(' |
	sed -E 's/.*[^a-z0-9_](pc_[a-z0-9_]+)[[:space:]]*\($/\1/' |
	grep -vxE 'pc_set_error|pc_set_errorl|pc__pool_bad_put' | sort -u)
[ -n "$exported" ] || { echo "test_man: found no PC_API function (parser broken?)"; exit 1; }

for fn in $exported; do
	if ! grep -qx "$fn" <<<"$documented"; then
		echo "MISSING: $fn has no man page (add it to the NAME line of a docs/man/*.3.md page)"
		fail=1
	fi
done

# long options each tool's source accepts: getopt_long tables, argparse
opts_c() { grep -ohE '\{ *"[a-z][a-z0-9-]*", *(no|required|optional)_argument' "$@" |
	sed -E 's/\{ *"([^"]*)".*/\1/' | sort -u; }
opts_py() { grep -ohE 'add_argument\("--[a-z0-9-]+' "$@" | sed 's/.*"--//' | sort -u; }
check_tool() { # PAGE OPTION...
	local page=$man/$1.1.md o; shift
	if [ ! -f "$page" ]; then
		echo "MISSING: $page"
		fail=1
		return
	fi
	for o in "$@"; do
		if ! grep -q -- "--$o\b" "$page"; then
			echo "MISSING: $(basename "$page"): option --$o is not documented"
			fail=1
		fi
	done
}
t=$src/tools
check_tool pollcore-echo $(opts_c "$t/pollcore-echo.c")
check_tool pollcore-roundtrip $(opts_c "$t/pollcore-roundtrip.c")
check_tool pollcore-stat $(opts_c "$t/pollcore-stat.c")
check_tool pollcore-topo $(opts_c "$t/pollcore-topo.c")
check_tool pollcore-bench $(opts_c "$t"/bench/*.c)
check_tool pollcore-kv $(opts_c "$t"/kv/*.c)
check_tool pollcore-nvmf $(opts_c "$t"/nvmf/*.c)
check_tool pollcore-tune $(opts_py "$t/pollcore_tune.py" "$t/pollcore-tune")
# a tool added to tools/meson.build needs a page too
for exe in $(grep -oE "executable\('pollcore-[a-z-]+'" "$t/meson.build" | sed -E "s/.*'(.*)'/\1/"); do
	[ -f "$man/$exe.1.md" ] || { echo "MISSING: $exe has no page docs/man/$exe.1.md"; fail=1; }
done

n=$(wc -w <<<"$exported")
[ "$fail" = 0 ] && echo "ok: $n PC_API functions and every tool option have man pages"
exit "$fail"
