#!/bin/bash
# One test of the behaviour suite (tests/behaviour) across two hosts:
#   behave.sh BUILD_DIR MTU NAME [4|6]
# Makes hosts a and b (network namespaces joined by a veth of MTU bytes,
# tests/lib_netns.sh, without daemons) and runs `sr_behave NAME` in host a
# in remote mode (tests/behaviour/hosts.h): sr_behave starts a private
# softrdmad in each host, and every agent of the test runs in host b, so
# each QP's peer is on the other host and all traffic crosses the RoCEv2
# engines.  Both sides use the RoCE v2 GID of their veth address, IPv4 (4,
# the default) or IPv6 (6).  Passes when sr_behave does and datagrams went
# over the veth (the hosts' kernels count them in /proc/net/snmp); a test
# that only makes sense on one host exits 77, as does a machine where the
# namespaces cannot be made.  SR_BEHAVE_SEED=N reproduces a run.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib_netns.sh"
[ $# -ge 3 ] || { echo "usage: $0 BUILD_DIR MTU NAME [4|6]" >&2; exit 2; }
build=$1 mtu=$2 name=$3 family=${4:-4}
NN_NO_DAEMON=1 nn_setup "$build" "$mtu" || exit 1
case $family in
4) aa=$(addr_a) ab=$(addr_b) ;;
6) aa=$(addr_a -6) ab=$(addr_b -6) ;;
*) echo "address family must be 4 or 6" >&2; exit 2 ;;
esac

udp_count() { # udp_count HOST FIELD: IPv4 Udp FIELD + IPv6 Udp6FIELD in that host
	on_host "$1" awk -v f="$2" '
		FILENAME ~ /snmp6$/ { if ($1 == "Udp6" f) n += $2; next }
		/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == f) c = i; h = 1 } else n += $c }
		END { print n + 0 }' /proc/net/snmp /proc/net/snmp6
}
udp_out() { udp_count "$1" OutDatagrams; } # datagrams host $1 has sent
udp_drops() { udp_count "$1" RcvbufErrors; } # dropped for want of socket buffer

sent_a=$(udp_out a) sent_b=$(udp_out b) drop_a=$(udp_drops a) drop_b=$(udp_drops b)
on_a env SR_BEHAVE_PEER_NETNS="/run/netns/$NN_B" SR_BEHAVE_ADDR="$aa" SR_BEHAVE_PEER_ADDR="$ab" \
	"$NN_BUILD/bin/sr_behave" "$name"
rc=$?
sent_a=$(($(udp_out a) - sent_a)) sent_b=$(($(udp_out b) - sent_b))
drop_a=$(($(udp_drops a) - drop_a)) drop_b=$(($(udp_drops b) - drop_b))
echo "# host a ($aa) sent $sent_a UDP datagrams, host b ($ab) $sent_b; veth MTU $mtu"
echo "# receive-buffer drops: host a $drop_a, host b $drop_b"
[ $rc = 0 ] || exit $rc
if [ $((sent_a + sent_b)) = 0 ]; then
	echo "FAIL: nothing went over the wire: the peer was not on the other host"
	exit 1
fi
exit 0
