#!/bin/bash
# Checks the module boundaries of src/: every `#include "M/H.h"` in a file
# of another module must name a header src/modules.txt lists as public for
# M, or be one of the known crossings listed there.  Prints each offending
# include (file:line) and exits 1 if there is any; a listed crossing that
# no longer occurs is reported too, so that the list only shrinks.
#
# usage: scripts/check-includes.sh [SOURCE_DIR]   (default: this tree)
set -u
set -f # the "*" of src/modules.txt is a word, not a pattern
root=${1:-$(cd "$(dirname "$0")/.." && pwd -P)}
src=$root/src
list=$src/modules.txt
[ -r "$list" ] || { echo "check-includes: no $list" >&2; exit 2; }

declare -A public=() known=() seen=()
while read -r first rest; do
	case $first in '' | '#'*) continue ;; esac
	if [ "$first" = cross ]; then
		read -r from hdr _ <<<"$rest"
		known["$from $hdr"]=1
		continue
	fi
	[ -d "$src/$first" ] || { echo "check-includes: $list names $first, no such folder" >&2; exit 2; }
	for h in ${rest%%#*}; do
		public["$first/$h"]=1
	done
done <"$list"

bad=0
while IFS=: read -r file line text; do
	rel=${file#"$src"/}
	mod=${rel%%/*}
	inc=$(sed -n 's/^#include "\([a-z_]*\/[a-z_0-9]*\.h\)".*/\1/p' <<<"$text")
	[ -n "$inc" ] || continue
	to=${inc%%/*}
	[ "$to" = "$mod" ] && continue
	[ -d "$src/$to" ] || continue # <softrdma/...> style or a system header
	if [ -n "${public[$to/*]:-}" ] || [ -n "${public[$inc]:-}" ]; then
		continue
	fi
	if [ -n "${known[$mod $inc]:-}" ]; then
		seen["$mod $inc"]=1
		continue
	fi
	echo "$rel:$line: $mod includes $inc, not a public header of $to (src/modules.txt)"
	bad=1
done < <(grep -rn --include='*.c' --include='*.h' '^#include "' "$src")

for k in "${!known[@]}"; do
	[ -n "${seen[$k]:-}" ] && continue
	echo "src/modules.txt: the known crossing '$k' no longer occurs: remove it from the list"
	bad=1
done
n=${#seen[@]}
[ $bad = 0 ] && echo "include boundaries: ok ($n known crossings left, src/modules.txt)"
exit $bad
