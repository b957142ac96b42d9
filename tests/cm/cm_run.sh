#!/bin/bash
# Runs one program under `softrdma run` against a private daemon (for our
# own CM test programs), then checks that the daemon holds no CM id.
# usage: cm_run.sh BUILD_DIR PROGRAM [ARGS...]
set -u
here=$(dirname "$0")
source "$here/../lib.sh"
build=$1
shift
sr_setup "$build" || exit 1
timeout 120 "$SR" run -- "$@"
rc=$?
sleep 0.2 # a killed peer's teardown
left=$("$SR" status | grep -E '^  cm: ')
echo "daemon after: $left"
if ! echo "$left" | grep -q '^  cm: 0 ids'; then
	echo "FAIL: CM ids left"
	"$SR" status | grep 'cm id'
	rc=1
fi
exit $rc
