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
#     an unprivileged user (nobody) can bind that port in a namespace;
#  6. the GID table is in a RoCE NIC's order: GID 0 is the veth's link-local
#     address, the first IPv4 GID (what UCX and perftest choose by
#     themselves) is the veth's IPv4 address, loopback's GIDs come last;
#     on a host with only loopback, GID 0 is fe80::+GUID, then 127.0.0.1
#     and ::1, and a same-host pingpong over 127.0.0.1's GID works.
# Needs namespaces (tests/lib_netns.sh); skipped (77) where they cannot be made.
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
nn_bg a "$tmp/pp.srv" timeout 60 ibv_rc_pingpong -g "${gid:-none}" -p "$port" -n 1000
spid=$NN_LAST_PID
if nn_wait_port a "$port"; then
	on_a timeout 60 ibv_rc_pingpong -g "${gid:-none}" -p "$port" -n 1000 "$me_a4" >"$tmp/pp.cli" 2>&1
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
if [ "${NN_USERNS:-}" = 1 ]; then
	# our user namespace maps one uid (ours, as 0): nobody has no uid here
	echo "# (not root: nobody's bind is not tried, this user namespace has no uid for nobody)"
else
	ip netns add "$NN_A-u" && ip netns exec "$NN_A-u" setpriv --reuid=65534 --regid=65534 --clear-groups \
		/usr/bin/python3 "$tmp/udp.py" >"$tmp/udp.u" 2>&1
	ip netns del "$NN_A-u" 2>/dev/null
	cat "$tmp/udp.u"
	check "nobody binds UDP 4791 in a namespace of its own" grep -q '^uid 65534 bound' "$tmp/udp.u"
fi

echo "# GID order"
# gidx FILE ADDR: index of ADDR's GID in an ibv_devinfo -v output
gidx() { gid_from_devinfo "$2" <"$tmp/$1"; }
ll_a=$(ip -n "$NN_A" -6 -o addr show dev "$NN_IF" scope link | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
check "a: GID 0 is the veth's link-local address $ll_a ($(gidx info.a "$ll_a"))" test "$(gidx info.a "$ll_a")" = 0
first4=$(sed -n 's/^[[:space:]]*GID\[ *[0-9]*\]:[[:space:]]*::ffff:\([0-9.]*\), RoCE v2$/\1/p' "$tmp/info.a" | head -1)
check "a: the first IPv4 GID is the veth's ($first4)" test "$first4" = "$me_a4"
lo4=$(gidx info.a 127.0.0.1) lo6=$(gidx info.a ::1) veth_max=0
for g in "$ll_a" "$me_a4" "$me_a6"; do
	i=$(gidx info.a "$g") && [ "$i" -gt "$veth_max" ] && veth_max=$i
done
check "a: loopback's GIDs ($lo4, $lo6) after the veth's (up to $veth_max)" \
	test -n "$lo4" -a -n "$lo6" -a "${lo4:-0}" -gt "$veth_max" -a "${lo6:-0}" -gt "$veth_max"

# a host with loopback only: its own namespace and daemon
lo_ns=$NN_A-lo lo_sock=softrdma-2h-$$-lo
ip netns add "$lo_ns" && ip -n "$lo_ns" link set lo up
lo_run() { ip netns exec "$lo_ns" env LD_LIBRARY_PATH="$NN_BUILD/lib" SOFTRDMA_SOCKET=$lo_sock SOFTRDMA_NO_SPAWN=1 "$@"; }
lo_run setpriv --pdeathsig TERM "$NN_BUILD/bin/softrdmad" --idle 0 </dev/null >/dev/null 2>&1 &
lo_dpid=$!
for _ in $(seq 100); do lo_run "$NN_SR" status 2>/dev/null | grep -q '^device' && break; sleep 0.05; done
lo_run ibv_devinfo -v >"$tmp/info.lo" 2>&1
grep 'GID\[' "$tmp/info.lo" | sed "s/^/[lo] /"
check "loopback-only: GID 0 is fe80:: + GUID" grep -Eq 'GID\[ *0\]:[[:space:]]+fe80::' "$tmp/info.lo"
check "loopback-only: GID 1 is 127.0.0.1" test "$(gidx info.lo 127.0.0.1)" = 1
check "loopback-only: GID 2 is ::1" test "$(gidx info.lo ::1)" = 2
g=$(gidx info.lo 127.0.0.1)
port=$((20000 + (RANDOM % 20000)))
lo_run timeout 60 ibv_rc_pingpong -g "${g:-none}" -p "$port" -n 1000 >"$tmp/lo.srv" 2>&1 &
lo_spid=$!
for _ in $(seq 200); do ip netns exec "$lo_ns" ss -ltnH "sport = :$port" | grep -q . && break; sleep 0.05; done
lo_run timeout 60 ibv_rc_pingpong -g "${g:-none}" -p "$port" -n 1000 127.0.0.1 >"$tmp/lo.cli" 2>&1
lo_crc=$?
wait "$lo_spid"
lo_src=$?
kill "$lo_dpid" 2>/dev/null
wait "$lo_dpid" 2>/dev/null
ip netns del "$lo_ns"
tail -2 "$tmp/lo.cli" | sed 's/^/[lo client] /'
check "loopback-only: pingpong over 127.0.0.1's GID ($lo_crc, $lo_src)" \
	test "$lo_crc" = 0 -a "$lo_src" = 0 && grep -q '^1000 iters in' "$tmp/lo.cli"

echo "$passes passed, $fails failed"
[ $fails = 0 ]
