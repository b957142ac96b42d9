#!/bin/bash
# rdma-core's own pyverbs suite (issue 35), as Debian's python3-pyverbs
# ships it under /usr/share/doc/rdma-core/tests (v44, some files gzipped):
# copied to a temporary directory, gunzipped, and run whole with
# `run_tests.py -v` under `softrdma run` with Debian's /usr/bin/python3.
#   pyverbs_suite.sh BUILD_DIR
# Passes when unittest's summary says 0 errors and 0 failures and at least
# MIN_OK tests passed (so that a device the suite cannot use, where every
# test would skip, fails); prints the counts.  The skips and their reasons
# are listed in docs/pyverbs.md (vendor tests of mlx5 and EFA, features
# soft0 does not claim).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
build=$1
py=/usr/bin/python3
src=/usr/share/doc/rdma-core/tests
MIN_OK=100 # 106 pass on soft0 (Debian 12, rdma-core 44)
if ! "$py" -c 'import pyverbs.device' 2>/dev/null || [ ! -e "$src/run_tests.py" ]; then
	echo "SKIP: pyverbs or its suite is not installed (Debian package python3-pyverbs; make deps installs it)"
	exit 77
fi
tmp=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/tests" && gunzip -f "$tmp"/tests/*.gz || { echo "FAIL: copying the suite"; exit 1; }
sr_setup "$build" || exit 1
log=$tmp/suite.log
(cd "$tmp/tests" && timeout 600 "$SR" run -q -- "$py" run_tests.py -v) >"$log" 2>&1
rc=$?
# what did not pass, with its traceback; then unittest's summary
grep -E '\.\.\. (ERROR|FAIL|unexpected success)' "$log"
sed -n '/^======/,$p' "$log" | head -200
tail -n 3 "$log"
ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -n 1)
summary=$(grep -E '^(OK|FAILED)( \(|$)' "$log" | tail -n 1)
count() { sed -n "s/.*[(, ]$1=\([0-9]*\).*/\1/p" <<<"$summary"; }
errors=$(count errors) failures=$(count failures) skipped=$(count skipped)
xfail=$(count 'expected failures') xpass=$(count 'unexpected successes')
errors=${errors:-0} failures=${failures:-0} skipped=${skipped:-0} xfail=${xfail:-0} xpass=${xpass:-0}
if [ -z "$ran" ] || [ -z "$summary" ]; then
	echo "FAIL: no unittest summary (exit $rc); the end of the log:"
	tail -n 30 "$log"
	exit 1
fi
ok=$((ran - errors - failures - skipped - xfail - xpass))
echo "pyverbs suite: ran $ran, ok $ok, errors $errors, failures $failures, skipped $skipped (exit $rc)"
fail=0
[ "$errors" = 0 ] && [ "$failures" = 0 ] && [ "$xpass" = 0 ] ||
	{ echo "FAIL: errors or failures"; fail=1; }
[ "$rc" = 0 ] || { echo "FAIL: run_tests.py exited $rc"; fail=1; }
[ "$ok" -ge $MIN_OK ] || { echo "FAIL: only $ok tests passed (at least $MIN_OK expected)"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
