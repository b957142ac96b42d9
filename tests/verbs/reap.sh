#!/bin/bash
# A WRITE after its target's reap fails (issue 35, item 6): sr_reap RUNS
# times on one host, or with `twohost` the target in host b and the
# initiator in host a (tests/lib_netns.sh).
#   reap.sh BUILD_DIR SR_REAP RUNS [twohost]
# Passes when every WRITE posted after waitpid returned completed with
# RETRY_EXC_ERR; prints how many of RUNS did.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
build=$1 prog=$2 runs=$3 where=${4:-onehost}
if [ "$where" = twohost ]; then
	. "$here/../lib_netns.sh"
	nn_setup "$build" || exit 1
	ga=$(nn_gid_index a "$(addr_a)") gb=$(nn_gid_index b "$(addr_b)")
	[ -n "$ga" ] && [ -n "$gb" ] || { echo "no GID for the hosts' addresses"; exit 1; }
	nn_cmd b
	on_a "$prog" "$runs" "$ga" "$gb" "${NN_CMD[@]}"
	rc=$?
	nn_sanitizer_reports || rc=1
	exit $rc
fi
. "$here/../lib.sh"
sr_setup "$build" || exit 1
g=$(sr_gid_index)
[ -n "$g" ] || { echo "no GID for 127.0.0.1"; exit 1; }
"$prog" "$runs" "$g" "$g"
