#!/bin/bash
# twohost_hosts_<mtu>: two hosts (network namespaces joined by a veth pair,
# tests/lib_netns.sh), each with its own softrdmad, are two distinct RoCE
# devices, as the RoCEv2 engine will need them:
#   hosts.sh BUILD_DIR MTU
#  1. on each host ibv_devinfo -v shows soft0 with a RoCE v2 GID for the
#     host's veth IPv4 address (::ffff:10.99.N.x) and IPv6 address, and none
#     for the other host's;
#  2. the node GUIDs (and so the GID 0s) of the two hosts differ;
#  3. active_mtu is the largest IB MTU that fits the veth: 4096 at MTU 9000,
#     1024 at MTU 1500;
#  4. a same-host ibv_rc_pingpong pair inside host a, exchanging its
#     connection data over a's veth address and using that address's GID;
#  5. each host's softrdmad holds UDP port 4791 (its RoCEv2 engine), and
#     an unprivileged user (nobody) can bind that port in a namespace.
# Needs root for the namespaces; skipped (77) where they cannot be made.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib_netns.sh"
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR MTU" >&2; exit 2; }
mtu=$2
case $mtu in
9000) want_mtu="4096 (5)" ;;
1500) want_mtu="1024 (3)" ;;
*) echo "MTU must be 1500 or 9000" >&2; exit 2 ;;
esac
nn_setup "$1" "$mtu" || exit 1
tmp=$(mktemp -d)
chmod 755 "$tmp" # nobody reads the UDP script from it
trap 'nn_cleanup; rm -rf "$tmp"' EXIT

fails=0 passes=0
check() { # check NAME COMMAND...
	local name=$1
	shift
	if "$@"; then
		echo "PASS $name"; passes=$((passes + 1))
	else
		echo "FAIL $name"; fails=$((fails + 1))
	fi
}
has() { grep -Fq -- "$2" "$tmp/$1"; }
hasnt() { ! grep -Fq -- "$2" "$tmp/$1"; }

echo "# hosts $NN_A and $NN_B, veth $NN_IF MTU $mtu, $(addr_a) / $(addr_a -6) <-> $(addr_b) / $(addr_b -6)"
for h in a b; do
	on_host $h ibv_devinfo -v >"$tmp/info.$h" 2>&1
	grep -E 'hca_id|node_guid|active_mtu|GID\[' "$tmp/info.$h" | sed "s/^/[$h] /"
done
me_a4=$(addr_a) me_a6=$(addr_a -6) me_b4=$(addr_b) me_b6=$(addr_b -6)
check "a: hca_id soft0" has info.a $'hca_id:\tsoft0'
check "b: hca_id soft0" has info.b $'hca_id:\tsoft0'
check "a: GID ::ffff:$me_a4" has info.a ":		::ffff:$me_a4, RoCE v2"
check "a: GID $me_a6" has info.a ":		$me_a6, RoCE v2"
check "b: GID ::ffff:$me_b4" has info.b ":		::ffff:$me_b4, RoCE v2"
check "b: GID $me_b6" has info.b ":		$me_b6, RoCE v2"
check "a: no GID of b's addresses" hasnt info.a "$me_b4," && hasnt info.a "$me_b6,"
check "b: no GID of a's addresses" hasnt info.b "$me_a4," && hasnt info.b "$me_a6,"
guid_a=$(awk '$1 == "node_guid:" { print $2 }' "$tmp/info.a")
guid_b=$(awk '$1 == "node_guid:" { print $2 }' "$tmp/info.b")
check "node GUIDs differ ($guid_a, $guid_b)" test -n "$guid_a" -a -n "$guid_b" -a "$guid_a" != "$guid_b"
mtu_a=$(awk '$1 == "active_mtu:" { print $2, $3 }' "$tmp/info.a")
mtu_b=$(awk '$1 == "active_mtu:" { print $2, $3 }' "$tmp/info.b")
check "a: active_mtu $want_mtu ($mtu_a)" test "$mtu_a" = "$want_mtu"
check "b: active_mtu $want_mtu ($mtu_b)" test "$mtu_b" = "$want_mtu"

echo "# same-host pingpong inside host a over $me_a4"
gid=$(nn_gid_index a "$me_a4")
check "a: GID index of $me_a4 found ($gid)" test -n "$gid"
port=$((20000 + (RANDOM % 20000)))
nn_bg a "$tmp/pp.srv" timeout 60 ibv_rc_pingpong -g "${gid:-0}" -p "$port" -n 1000
spid=$NN_LAST_PID
if nn_wait_port a "$port"; then
	on_a timeout 60 ibv_rc_pingpong -g "${gid:-0}" -p "$port" -n 1000 "$me_a4" >"$tmp/pp.cli" 2>&1
	crc=$?
else
	crc="server did not listen"
fi
wait "$spid"
src=$?
sed 's/^/[client] /' "$tmp/pp.cli" 2>/dev/null
sed 's/^/[server] /' "$tmp/pp.srv"
check "pingpong client exits 0 ($crc)" test "$crc" = 0
check "pingpong server exits 0 ($src)" test "$src" = 0
check "pingpong client: 1000 iters" grep -q '^1000 iters in' "$tmp/pp.cli"
check "pingpong server: 1000 iters" grep -q '^1000 iters in' "$tmp/pp.srv"
# the GID the client saw as the remote's is a's veth address
check "pingpong: remote GID is $me_a4" grep -Eq "remote address:.*GID ::ffff:$me_a4" "$tmp/pp.cli"

echo "# UDP 4791: each host's daemon holds it (its RoCEv2 engine)"
for h in a b; do
	on_host $h ss -ulnpH "sport = :4791" >"$tmp/udp.$h" 2>&1
	sed "s/^/[$h] /" "$tmp/udp.$h"
	dpid=$NN_DPID_A
	[ $h = b ] && dpid=$NN_DPID_B
	check "$h: softrdmad (pid $dpid) listens on UDP 4791" grep -q "pid=$dpid," "$tmp/udp.$h"
done
# binding it needs no privilege: a port above 1023, in the host's own namespace
cat >"$tmp/udp.py" <<'PY'
import socket, os
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind(("::", 4791))
print("uid %d bound UDP [::]:4791" % os.getuid(), flush=True)
PY
ip netns add "$NN_A-u" && ip netns exec "$NN_A-u" setpriv --reuid=65534 --regid=65534 --clear-groups \
	/usr/bin/python3 "$tmp/udp.py" >"$tmp/udp.u" 2>&1
ip netns del "$NN_A-u" 2>/dev/null
cat "$tmp/udp.u"
check "nobody binds UDP 4791 in a namespace of its own" grep -q '^uid 65534 bound' "$tmp/udp.u"

echo "$passes passed, $fails failed"
[ $fails = 0 ]
