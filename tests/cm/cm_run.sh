#!/bin/bash
# Runs one program under `softrdma run` against a private daemon (for our
# own CM test programs), then checks that the daemon holds no CM id.
# usage: cm_run.sh BUILD_DIR PROGRAM [ARGS...]
set -u
# CM_NETNS=1: in a network namespace of its own with only lo up, so that no
# route leaves this machine (the address-error case; 77 if none can be made)
if [ "${CM_NETNS:-0}" = 1 ] && [ -z "${CM_IN_NETNS:-}" ]; then
	unshare -n true 2>/dev/null || { echo "SKIP: cannot make a network namespace"; exit 77; }
	exec unshare -n env CM_IN_NETNS=1 bash -c 'ip link set lo up && exec "$0" "$@"' "$0" "$@"
fi
# CM_PORT_RANGE="LO HI": that namespace's ip_local_port_range (with CM_NETNS)
if [ -n "${CM_IN_NETNS:-}" ] && [ -n "${CM_PORT_RANGE:-}" ]; then
	echo "$CM_PORT_RANGE" >/proc/sys/net/ipv4/ip_local_port_range || exit 1
fi
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
