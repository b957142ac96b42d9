#!/bin/sh
# Runs the behaviour suite (or the named tests) outside ctest:
#   tests/behaviour/run.sh [BUILD_DIR] [TEST...]
# Each test starts and stops its own private softrdmad (see main.c), so
# nothing here needs a daemon; SR_BEHAVE_SEED=N reproduces a run.
build=${1:-build}
[ $# -gt 0 ] && shift
bin="$build/bin/sr_behave"
if [ ! -x "$bin" ]; then
	echo "run.sh: $bin not found (build first, or pass the build directory)" >&2
	exit 2
fi
[ $# -gt 0 ] || set -- $("$bin" --list)
failed=
for t in "$@"; do
	"$bin" "$t" || failed="$failed $t"
done
if [ -n "$failed" ]; then
	echo "FAILED:$failed"
	exit 1
fi
echo "all passed"
