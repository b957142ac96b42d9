#!/bin/bash
# UCX finds softrdma's device (issue 13): under `softrdma run`, `ucx_info -d`
# lists rc_verbs and ud_verbs on soft0:1; with --no-devnodes (no
# /dev/infiniband/uverbs0 on this host) it does not, which is what the
# device node is for.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
if ! command -v ucx_info >/dev/null; then
	echo "SKIP: ucx_info is not installed (Debian package ucx-utils; make deps installs it)"
	exit 77
fi
sr_setup "$1" || exit 1
fails=0 passes=0
check() { # check NAME CONDITION-COMMAND...
	local name=$1
	shift
	if "$@"; then
		echo "PASS $name"; passes=$((passes + 1))
	else
		echo "FAIL $name"; fails=$((fails + 1))
	fi
}
# "Transport: T" followed by "Device: D" in ucx_info -d's listing
has_tl() { # has_tl TEXT TRANSPORT DEVICE
	awk -v t="$2" -v d="$3" '
		$2 == "Transport:" { tl = $3; next }
		$2 == "Device:" && tl == t && $3 == d { found = 1 }
		END { exit !found }' <<<"$1"
}
lacks_tl() { ! has_tl "$@"; }
out=$("$SR" run -q -- ucx_info -d 2>&1)
grep -E 'Memory domain|Transport|Device' <<<"$out"
check "soft0 is a UCX memory domain" grep -q '# Memory domain: soft0' <<<"$out"
check "rc_verbs on soft0:1" has_tl "$out" rc_verbs soft0:1
check "ud_verbs on soft0:1" has_tl "$out" ud_verbs soft0:1
if [ ! -c /dev/infiniband/uverbs0 ]; then
	out=$("$SR" run --no-devnodes -- ucx_info -d 2>&1)
	check "without the device node, UCX skips soft0" lacks_tl "$out" rc_verbs soft0:1
fi
echo "$passes passed, $fails failed"
[ $fails = 0 ]
