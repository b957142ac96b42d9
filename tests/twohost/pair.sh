#!/bin/bash
# One of Debian's unmodified client/server RDMA programs across two hosts:
# the server in network namespace a, the client in b, joined by a veth
# (tests/lib_netns.sh), each with its own softrdmad, so every work request
# crosses the RoCEv2 engine and the wire.  Checks what a user would: both
# sides exit 0 and print their result lines; and that the traffic really
# went over the wire (the client's daemon sent datagrams on UDP 4791:
# counted by the host's kernel in /proc/net/snmp and snmp6, not by us).
#
# usage: pair.sh BUILD_DIR MTU KIND PROGRAM [ARGS...]
#   KIND pingpong: ibv_*_pingpong; passes -g <veth GID> -p PORT
#   KIND perftest: ib_*_{bw,lat}; passes -d soft0 -x <veth GID> -p PORT
# PAIR_LINK_LOCAL=1: the GIDs of the veth's link-local IPv6 addresses.
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
source "$here/../pair_check.sh"
build=$1 mtu=$2 kind=$3 prog=$4
shift 4
nn_setup "$build" "$mtu" || exit 1
if [ -n "${PAIR_LINK_LOCAL:-}" ]; then # the GIDs of the veth's fe80:: addresses
	ll() { on_host "$1" ip -o -6 addr show dev "$NN_IF" scope link | awk '{ sub("/.*", "", $4); print $4; exit }'; }
	ga=$(nn_gid_index a "$(ll a)") && gb=$(nn_gid_index b "$(ll b)") ||
		{ echo "FAIL: no RoCE v2 GID for the veth's link-local addresses"; exit 1; }
	echo "link-local GIDs: a $(ll a) (index $ga), b $(ll b) (index $gb)"
else
	ga=$(nn_gid_index a "$(addr_a)") && gb=$(nn_gid_index b "$(addr_b)") ||
		{ echo "FAIL: no RoCE v2 GID for the veth addresses"; exit 1; }
fi
port=$((20000 + (RANDOM % 20000)))
case $kind in
pingpong) sa=(-g "$ga" -p "$port") ca=(-g "$gb" -p "$port") ;;
perftest) sa=(-d soft0 -x "$ga" -p "$port") ca=(-d soft0 -x "$gb" -p "$port") ;;
*) echo "unknown kind $kind"; exit 2 ;;
esac
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT

udp_out() { # datagrams host b has sent so far, over IPv4 and IPv6
	on_b awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "OutDatagrams") c = i; h = 1 }
		else n += $c } $1 == "Udp6OutDatagrams" { n += $2 } END { print n }' /proc/net/snmp /proc/net/snmp6
}
before=$(udp_out)
nn_bg a "$log/server" timeout 120 stdbuf -oL "$prog" "${sa[@]}" "$@"
spid=$NN_LAST_PID
if ! nn_wait_port a "$port"; then
	echo "FAIL: server did not listen on $port"; cat "$log/server"; exit 1
fi
on_b timeout 120 stdbuf -oL "$prog" "${ca[@]}" "$@" "$(addr_a)" >"$log/client" 2>&1
crc=$?
wait "$spid"
src=$?
after=$(udp_out)
echo "--- client (rc $crc)"; cat "$log/client"
echo "--- server (rc $src)"; cat "$log/server"
echo "--- host b sent $((after - before)) UDP datagrams"
ok=1
pair_check "$kind" "$prog" "$log" "$crc" "$src" || ok=0
[ $((after - before)) -gt 0 ] || { echo "FAIL: nothing went over the wire"; ok=0; }
[ $ok = 1 ] && echo "PASS: $prog $* across two hosts, MTU $mtu"
[ $ok = 1 ]
