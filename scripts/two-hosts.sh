#!/bin/bash
# Two softrdma hosts on this machine, for anyone: no root, no ip netns, no
# sysctl.  A user namespace of the caller's own (the caller is root inside
# it and nowhere else) holds two network namespaces joined by a veth pair,
# each with its own softrdmad; COMMAND runs in host a, and two helpers run
# programs in either host with that host's softrdma environment:
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
#   $TWO_HOSTS_PIDS          the daemons' PIDs and that of the process
#                            holding host b (all stopped when COMMAND ends)
#
# For example, Debian's ib_write_bw across the hosts:
#   scripts/two-hosts.sh -- bash -c 'on_a ib_write_bw -x $GID_A & sleep 1;
#       on_b ib_write_bw -x $GID_B $ADDR_A; wait'
#
# Everything made here lives only as long as its processes: when COMMAND
# ends, the daemons and the process that holds host b are stopped (by
# PID), and the kernel removes both namespaces and the veth with them;
# every one of those processes also dies with this script (a parent-death
# signal), so nothing is left behind, not even after a SIGKILL.  The hosts
# reach nothing outside the machine: their only link is the veth between
# them.
#
# What is not the same as root's two hosts (tests/lib_netns.sh): the
# daemons cannot raise their UDP buffers past net.core.rmem_max (the
# kernel allows that to CAP_NET_ADMIN of the first user namespace only), so
# a fast UC stream, which nothing resends, may lose a message now and then
# (README, "Between hosts"); RC, UD and the connection manager are
# unaffected.  Needs unprivileged user namespaces (Debian's default).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ "${SR_TWO_HOSTS_INSIDE:-}" != 1 ]; then
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
	unshare --user --map-root-user --net true 2>/dev/null ||
		{ echo "two-hosts: cannot make a user namespace here (unprivileged user namespaces off?)" >&2; exit 77; }
	export SR_TWO_HOSTS_INSIDE=1 SR_TWO_HOSTS_BUILD=$BUILD SR_TWO_HOSTS_MTU=$MTU
	# --kill-child: the whole inside dies with this process
	exec unshare --user --map-root-user --net --kill-child "$0" "$@"
fi

# ---- inside: root of a fresh user namespace, in host a's network namespace
unset SR_TWO_HOSTS_INSIDE
BUILD=$SR_TWO_HOSTS_BUILD MTU=$SR_TWO_HOSTS_MTU
TMP=$(mktemp -d /tmp/softrdma-two-hosts.XXXXXX) || exit 1
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
fail() {
	echo "two-hosts: $*" >&2
	exit 1
}

ADDR_A=10.98.0.1 ADDR_B=10.98.0.2 ADDR6_A=fd00:98::1 ADDR6_B=fd00:98::2

# host b: a network namespace held by a sleeping process of ours
setpriv --pdeathsig KILL unshare --net sleep infinity &
PIDS+=($!)
NS_B=/proc/$!/ns/net
for _ in $(seq 100); do
	[ "$(readlink "$NS_B" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ] && break
	sleep 0.01
done
in_b() { nsenter --net="$NS_B" "$@"; }
for h in "" in_b; do
	# no duplicate address detection: every address is usable at once, so
	# the GID table is complete when the daemon starts (it reads them once)
	$h sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0 2>/dev/null
	$h ip link set lo up || fail "cannot bring lo up"
done
ip link add srveth mtu "$MTU" type veth peer name srveth mtu "$MTU" netns "$NS_B" ||
	fail "cannot create the veth pair"
ip addr add "$ADDR_A/30" dev srveth && ip addr add "$ADDR6_A/64" dev srveth nodad &&
	ip link set srveth up &&
	in_b ip addr add "$ADDR_B/30" dev srveth && in_b ip addr add "$ADDR6_B/64" dev srveth nodad &&
	in_b ip link set srveth up || fail "cannot configure the veth pair"
for _ in $(seq 100); do # the link-local addresses come when the links are up
	ip -6 -o addr show dev srveth scope link | grep -q fe80 &&
		in_b ip -6 -o addr show dev srveth scope link | grep -q fe80 && break
	sleep 0.02
done

# the helpers, and a daemon per host (abstract socket names are per network
# namespace, so each host's name only reaches its own daemon)
mkdir "$TMP/bin"
for h in a b; do
	enter=
	[ $h = b ] && enter="nsenter --net=$NS_B "
	cat >"$TMP/bin/on_$h" <<EOF
#!/bin/sh
# run a program in host $h of scripts/two-hosts.sh, on its softrdmad
exec ${enter}env LD_LIBRARY_PATH="$BUILD/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
	SOFTRDMA_SOCKET=softrdma-two-hosts-$h SOFTRDMA_NO_SPAWN=1 "\$@"
EOF
	chmod 755 "$TMP/bin/on_$h"
	setpriv --pdeathsig TERM "$TMP/bin/on_$h" "$BUILD/bin/softrdmad" --idle 0 </dev/null >/dev/null &
	PIDS+=($!)
done
export PATH=$TMP/bin:$PATH
for h in a b; do
	for _ in $(seq 100); do
		"on_$h" "$BUILD/bin/softrdma" status 2>/dev/null | grep -q '^device' && break
		sleep 0.05
	done
done
source "$ROOT/tests/gid_index.sh"
GID_A=$(on_a ibv_devinfo -v 2>/dev/null | gid_from_devinfo "$ADDR_A") || fail "host a's daemon did not come up"
GID_B=$(on_b ibv_devinfo -v 2>/dev/null | gid_from_devinfo "$ADDR_B") || fail "host b's daemon did not come up"
TWO_HOSTS_PIDS="${PIDS[*]}"
export ADDR_A ADDR_B ADDR6_A ADDR6_B GID_A GID_B TWO_HOSTS_PIDS

[ $# -gt 0 ] || {
	echo "two hosts: a $ADDR_A (GID $GID_A), b $ADDR_B (GID $GID_B); on_a / on_b PROGRAM runs in one; exit ends both"
	set -- "${SHELL:-/bin/bash}" -i
}
"$@"
