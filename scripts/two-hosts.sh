#!/bin/bash
# Two softrdma hosts on this machine, for anyone: no root, no sysctl.  The
# hosts are those of the tests (tests/lib_netns.sh): two network namespaces
# joined by a veth pair, each with its own softrdmad, made inside a user
# namespace of the caller's own (the caller is root inside it and nowhere
# else; root's too, so that nothing outlives the script).  COMMAND runs in
# host a, and two helpers run programs in either host with that host's
# softrdma environment:
#
#   scripts/two-hosts.sh [-b BUILD_DIR] [-m MTU] [-- COMMAND [ARGS...]]
#
#     -b  the build whose daemon and libraries run (default: build)
#     -m  the veth's MTU (default 1500; 9000 gives a 4096-byte path MTU)
#     COMMAND  default: an interactive shell
#
#   on_a PROGRAM [ARGS...]   PROGRAM in host a, on its softrdmad
#   on_b PROGRAM [ARGS...]   the same in host b
#   $ADDR_A, $ADDR_B         the hosts' IPv4 addresses on the veth
#   $ADDR6_A, $ADDR6_B       their IPv6 (ULA) addresses
#   $GID_A, $GID_B           the index of the IPv4 address's RoCE v2 GID in
#                            each host's soft0 (perftest's -x, the
#                            pingpongs' -g)
#   $TWO_HOSTS_PIDS          the two daemons' PIDs (stopped when COMMAND ends)
#
# For example, Debian's ib_write_bw across the hosts:
#   scripts/two-hosts.sh -- bash -c 'on_a ib_write_bw -x $GID_A & sleep 1;
#       on_b ib_write_bw -x $GID_B $ADDR_A; wait'
#
# Everything made here lives only as long as its processes: when COMMAND
# ends, the daemons are stopped (by PID) and the kernel removes the user
# namespace with both network namespaces and the veth; every process also
# dies with this script (a parent-death signal), so nothing is left behind,
# not even after a SIGKILL.  The hosts reach nothing outside the machine:
# their only link is the veth between them.
#
# What is not the same as the hosts root's tests make: the daemons cannot
# raise their UDP buffers past net.core.rmem_max (the kernel allows that to
# CAP_NET_ADMIN of the first user namespace only), so a fast UC stream,
# which nothing resends, may lose a message now and then (README, "Between
# hosts"); RC, UD and the connection manager are unaffected.  Needs
# unprivileged user namespaces (Debian's default).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)

BUILD=$ROOT/build MTU=1500
while getopts b:m: o; do
	case $o in
	b) BUILD=$OPTARG ;;
	m) MTU=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
BUILD=$(cd "$BUILD" && pwd -P) || exit 2
[ -x "$BUILD/bin/softrdmad" ] || { echo "two-hosts: no $BUILD/bin/softrdmad (make build)" >&2; exit 2; }
case $MTU in '' | *[!0-9]*) echo "two-hosts: MTU must be a number" >&2; exit 2 ;; esac
if [ -z "${NN_USERNS:-}" ] && ! unshare --user --map-root-user --mount --net true 2>/dev/null; then
	echo "two-hosts: cannot make a user namespace here (unprivileged user namespaces off?)" >&2
	exit 77
fi

# from here on, root of the user namespace (lib_netns.sh runs this script
# again inside it)
NN_ALWAYS_USERNS=1 source "$ROOT/tests/lib_netns.sh"
fail() {
	echo "two-hosts: $*" >&2
	exit 1
}
nn_setup "$BUILD" "$MTU" >&2 || fail "cannot make the two hosts"
TMP=$(mktemp -d /tmp/softrdma-two-hosts.XXXXXX) || exit 1
trap 'nn_cleanup; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM HUP

# the helpers: each host's command prefix (nn_cmd) as a program in PATH
mkdir "$TMP/bin"
for h in a b; do
	nn_cmd $h
	{
		echo '#!/bin/sh'
		echo "# run a program in host $h of scripts/two-hosts.sh, on its softrdmad"
		printf 'exec'
		printf ' %q' "${NN_CMD[@]}"
		printf ' "$@"\n'
	} >"$TMP/bin/on_$h"
	chmod 755 "$TMP/bin/on_$h"
done
export PATH=$TMP/bin:$PATH
ADDR_A=$(addr_a) ADDR_B=$(addr_b) ADDR6_A=$(addr_a -6) ADDR6_B=$(addr_b -6)
GID_A=$(nn_gid_index a "$ADDR_A") && [ -n "$GID_A" ] || fail "host a's daemon has no GID for $ADDR_A"
GID_B=$(nn_gid_index b "$ADDR_B") && [ -n "$GID_B" ] || fail "host b's daemon has no GID for $ADDR_B"
TWO_HOSTS_PIDS="$NN_DPID_A $NN_DPID_B"
export ADDR_A ADDR_B ADDR6_A ADDR6_B GID_A GID_B TWO_HOSTS_PIDS

[ $# -gt 0 ] || {
	echo "two hosts: a $ADDR_A (GID $GID_A), b $ADDR_B (GID $GID_B); on_a / on_b PROGRAM runs in one; exit ends both"
	set -- "${SHELL:-/bin/bash}" -i
}
ip netns exec "$NN_A" "$@"
