#!/bin/bash
# Runs a command in a network namespace of its own, for in-process tests
# whose QPs are connected to a peer on "another host" that does not exist
# (the receive-path fuzzer, the transport's unit test): lo up, and a veth
# pair whose one end owns 10.255.0.1/24, the device's GID there.  What the
# test's process sends to its peer, 10.255.0.2 (a posting thread's own
# sends go out through the kernel), waits for an ARP answer that nobody on
# the other end gives, and is dropped: nothing leaves the namespace.  unshare -n as root, -rn (a user namespace) otherwise; 77 (skip)
# if neither can be made, rather than run with a route out.
# usage: isolated.sh COMMAND [ARGS...]
set -u
if [ -z "${SR_ISOLATED:-}" ]; then
	if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
		how=-n
	elif unshare -rn true 2>/dev/null; then
		how=-rn
	else
		echo "SKIP: cannot make a network namespace"
		exit 77
	fi
	exec unshare $how env SR_ISOLATED=1 bash "$0" "$@"
fi
ip link set lo up &&
	ip link add sr_iso0 type veth peer name sr_iso1 &&
	ip addr add 10.255.0.1/24 dev sr_iso0 &&
	ip link set sr_iso0 up && ip link set sr_iso1 up || exit 1
exec "$@"
