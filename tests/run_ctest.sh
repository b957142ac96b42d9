#!/bin/bash
# Runs ctest in a build directory the way `make test` and CI do: the whole
# selection in parallel, then every test that failed once more, alone.
#
# Why: this machine has two CPUs, and the suite runs two-host tests (two
# daemons, two namespaces, busy-polling clients) side by side.  A few tests
# with deadlines (a 3 s poll, perftest's 120 s) have failed once in tens of
# runs only while other heavy tests ran next to them.  A test that fails
# again when it runs alone is a failure; one that passes alone is reported
# by name as load-sensitive (and written to Testing/load-sensitive.txt), so
# that it stays visible and gets looked at instead of being hidden.
#
# usage: tests/run_ctest.sh BUILD_DIR JOBS [ctest options...]
set -uo pipefail
build=$1
jobs=$2
shift 2
cd "$build" || exit 2
rm -f Testing/load-sensitive.txt
if ctest --output-on-failure -j"$jobs" "$@"; then
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
echo "$failed" >Testing/load-sensitive.txt
echo
echo "run_ctest: LOAD-SENSITIVE (failed next to other tests, passed alone):"
echo "$failed" | sed 's/^/  /'
exit 0
