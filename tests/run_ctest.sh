#!/bin/bash
# Runs ctest in a build directory the way `make test` and CI do: the whole
# selection in parallel, then every test that failed once more, alone.
#
# A test that fails again alone fails the run.  A test that passes alone
# fails the run too, unless tests/intermittent.txt names it with what is
# known of its cause and the plan for it: a failure that a rerun turns
# green is a defect until it is explained.  Every run ends with that list
# (marking the tests of it that failed this time) and the 20 slowest tests.
#
# usage: tests/run_ctest.sh BUILD_DIR JOBS [ctest options...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
known=$here/intermittent.txt
build=$1
jobs=$2
shift 2
cd "$build" || exit 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# the reason tests/intermittent.txt gives for test $1, or nothing
reason() {
	awk -v t="$1" '!/^#/ && $1 == t { $1 = ""; sub(/^ +/, ""); print; exit }' "$known"
}

# summary FAILED_ONCE: the committed list and the 20 slowest tests
summary() {
	echo
	echo "run_ctest: known intermittent tests (tests/intermittent.txt):"
	awk '!/^#/ && NF { print $1 }' "$known" | while read -r t; do
		if grep -qx "$t" <<<"$1"; then
			echo "  $t  (FAILED once this run, passed alone)"
		else
			echo "  $t"
		fi
	done
	echo "run_ctest: the 20 slowest tests:"
	sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*Passed *\([0-9.]*\) sec$/\2 \1/p' "$out" |
		sort -rn | head -20 | awk '{ printf "  %8.2f s  %s\n", $1, $2 }'
}

ctest --output-on-failure -j"$jobs" "$@" 2>&1 | tee "$out"
if [ "${PIPESTATUS[0]}" = 0 ]; then
	summary ""
	exit 0
fi
failed=$(sed -n 's/^[0-9]*:\(.*\)$/\1/p' Testing/Temporary/LastTestsFailed.log 2>/dev/null)
if [ -z "$failed" ]; then
	echo "run_ctest: ctest failed before or outside the tests" >&2
	exit 1
fi
echo
echo "run_ctest: running the $(echo "$failed" | wc -l) failed test(s) again, one at a time:"
echo "$failed" | sed 's/^/  /'
if ! ctest --output-on-failure -j1 --rerun-failed "$@"; then
	echo "run_ctest: failed again when run alone" >&2
	exit 1
fi
rc=0
while read -r t; do
	r=$(reason "$t")
	if [ -n "$r" ]; then
		echo "run_ctest: $t failed next to other tests and passed alone: known ($r)"
	else
		echo "run_ctest: $t failed next to other tests and passed alone, and" \
			"tests/intermittent.txt does not name it: a defect to find" >&2
		rc=1
	fi
done <<<"$failed"
summary "$failed"
exit $rc
