#!/bin/bash
# SPDX-License-Identifier: MIT
#
# test_man.sh SRCDIR BUILDDIR: the man pages as a user reads them, i.e. the
# pages the build rendered (BUILDDIR/docs/*.1 and *.3, rendered by groff as man -l does):
#  - each page has a NAME and a SYNOPSIS section;
#  - no option is printed with an en or em dash ("–bind" instead of
#    "--bind": what pandoc's smart extension does to "--bind");
#  - every long option a tool's --help prints is in that tool's page;
#  - every installed tool has a page;
#  - every public function of the installed headers, PC_API or static
#    inline, has a page: BUILDDIR/docs/NAME.3 (a page, or the .so link
#    docs/meson.build makes for each name on a page's NAME line).
# Skips (77) where the pages were not built (no pandoc: -Dman=disabled).
set -euo pipefail
src=${1:?usage: test_man.sh SRCDIR BUILDDIR}
build=${2:?usage: test_man.sh SRCDIR BUILDDIR}
docs=$build/docs
fail=0
command -v groff >/dev/null || { echo "test_man: no groff to render the pages"; exit 77; }
ls "$docs"/*.1 >/dev/null 2>&1 || { echo "test_man: no rendered pages in $docs (pandoc?)"; exit 77; }

# The page as man -l prints it (the same groff pipeline, plain text), with
# lines wide enough and hyphenation off, so that no option is split at a
# line break; rendered once per page.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
render() {
	local out=$tmp/$(basename "$1")
	[ -f "$out" ] || groff -k -t -mandoc -Tutf8 -rLL=300n -rHY=0 -P-cbou "$1" >"$out" 2>/dev/null
	cat "$out"
}
is_link() { head -c 3 "$1" | grep -q '^\.so'; }

pages=0
for p in "$docs"/*.1 "$docs"/*.3; do
	is_link "$p" && continue
	pages=$((pages + 1))
	name=$(basename "$p")
	text=$(render "$p")
	for sec in NAME SYNOPSIS; do
		grep -qx "$sec" <<<"$text" || { echo "$name: no $sec section"; fail=1; }
	done
	# an en or em dash (or a minus sign) where an option starts
	if bad=$(grep -nE '(^|[][ |(,])(–|—|−)[a-zA-Z]' <<<"$text"); then
		echo "$name: a dash that should be --:"
		sed 's/^/    /' <<<"$bad"
		fail=1
	fi
done
[ "$pages" -gt 0 ] || { echo "test_man: no page rendered"; exit 1; }

# every long option of a tool's --help is in its page
check_tool() { # NAME HELP-TEXT
	local page=$docs/$1.1 text o
	if [ ! -f "$page" ]; then
		echo "MISSING: $1 has no page ($page)"
		fail=1
		return
	fi
	text=$(render "$page")
	for o in $(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$2" | sort -u); do
		if ! grep -qE -- "$o([^a-z0-9-]|$)" <<<"$text"; then
			echo "MISSING: $1.1: $o (in its --help) is not in the page"
			fail=1
		fi
	done
}
tools=0
for exe in "$build"/tools/pollcore-*; do
	[ -x "$exe" ] && [ -f "$exe" ] || continue
	tools=$((tools + 1))
	check_tool "$(basename "$exe")" "$("$exe" --help 2>&1)"
done
[ "$tools" -gt 0 ] || { echo "test_man: no tool in $build/tools"; exit 1; }
check_tool pollcore-tune "$(python3 "$src/tools/pollcore-tune" --help 2>&1)"
# a tool the build installs but did not build here (liburing, an option) still needs a page
for exe in $(grep -oE "executable\('pollcore-[a-z-]+'" "$src/tools/meson.build" | sed -E "s/.*'(.*)'/\1/"); do
	[ -f "$docs/$exe.1" ] || { echo "MISSING: $exe has no page docs/man/$exe.1.md"; fail=1; }
done

# public functions: PC_API declarations and static inline definitions of
# the installed headers; internal helpers (pc__*, the error setters) left out
headers=$(ls "$src"/*/include/pollcore/*.h)
exported=$(cat $headers | grep -v '#define PC_API' | tr '\n' ' ' |
	grep -oE '(PC_API|static inline)[^;{(]*\(' |
	sed -E 's/.*[^a-z0-9_](pc_[a-z0-9_]+)[[:space:]]*\($/\1/' | grep -E '^pc_[a-z0-9_]+$' |
	grep -vE '^pc__' | grep -vxE 'pc_set_error|pc_set_errorl' | sort -u)
inline=$(cat $headers | tr '\n' ' ' | grep -oE 'static inline[^;{(]*\(' |
	sed -E 's/.*[^a-z0-9_](pc_[a-z0-9_]+)[[:space:]]*\($/\1/' | grep -vE '^pc__' | sort -u)
[ -n "$exported" ] && [ -n "$inline" ] ||
	{ echo "test_man: found no public function (parser broken?)"; exit 1; }
for fn in $exported; do
	if [ ! -f "$docs/$fn.3" ]; then
		grep -qx "$fn" <<<"$inline" && kind="inline function" || kind="PC_API function"
		echo "MISSING: $kind $fn has no page (name it on the NAME line of a docs/man/*.3.md)"
		fail=1
	fi
done

[ "$fail" = 0 ] && echo "ok: $pages rendered pages; $(wc -w <<<"$exported") public functions" \
	"($(wc -w <<<"$inline") inline) and every option of $((tools + 1)) tools' --help documented"
exit "$fail"
