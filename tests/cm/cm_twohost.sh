#!/bin/bash
# A connection-manager client/server pair of Debian's unmodified programs
# across two hosts: the server in network namespace a, the client in b,
# joined by a veth (tests/lib_netns.sh), each host with its own softrdmad,
# so the IB CM MADs travel as RoCEv2 datagrams to QP1 and the connection's
# QPs are wire QPs.  Checks what a user would (both exit 0 and print their
# result lines) and what says the CM really crossed: each daemon sent and
# received MADs on the wire (`softrdma status`: cm wire_tx / wire_rx), none
# was dropped, and no CM id is left on either host afterwards; and that
# each daemon's CM agent sent and read every one of them on its own socket
# (engine/gsi.c: nothing is captured or held here, so no MAD needed the
# engine's thread; "own socket" in the status line).
#
# usage: cm_twohost.sh BUILD_DIR MTU SERVER_RE CLIENT_RE SERVER_CMD... -- CLIENT_CMD...
#   (an empty SERVER_RE: the server prints nothing to check)
#   @PORT@ becomes a free random port, @ADDR@ host a's veth IPv4 address,
#   @ADDR6@ its IPv6 address.  The client starts once host a's daemon shows
#   the server's listener on that port.
# Environment (as tests/cm/cm_pair.sh): CM_SERVER_STAYS=1 for servers that
#   never exit; CM_WAIT=tcp:PORT waits for a TCP listener instead, CM_WAIT=none
#   for servers that show no listener before the client's first try
#   (perftest -R retries its connect); CM_PORT=N for a fixed port;
#   CM_NO_RNR=1: neither engine may have sent an RNR NAK (a stream rsocket
#   sends only into receives the peer reported posted: an RNR NAK would
#   cost the RNR timer rdma_cm gives its QPs, 655 ms).
#   CM_ORDER=PRELOAD: the client's k-th connect waits for the server's
#   k-th listen (cm_common.sh cm_order_pre, cm_order.c).
#   CM_MTU_B=N: host b's end of the veth gets MTU N (its daemon restarted so
#   that its port follows), host a's keeps MTU: the client's side is the
#   smaller, and the connection must take its path MTU both ways.
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
source "$here/cm_common.sh"
build=$1 mtu=$2 sre=$3 cre=$4
shift 4
srv=() cli=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
shift
cli=("$@")
nn_setup "$build" "$mtu" || exit 1
if [ -n "${CM_MTU_B:-}" ]; then
	kill "$NN_DPID_B" && wait "$NN_DPID_B" 2>/dev/null
	ip -n "$NN_B" link set "$NN_IF" mtu "$CM_MTU_B" || exit 1
	nn_start_daemon b && nn_wait_daemon b || exit 1
	echo "host a: $(on_a "$NN_SR" status | grep -o 'active_mtu [0-9]*'), host b: $(on_b "$NN_SR" status | grep -o 'active_mtu [0-9]*')"
fi
port=${CM_PORT:-$((20000 + (RANDOM % 20000)))}
srv=("${srv[@]//@PORT@/$port}") cli=("${cli[@]//@PORT@/$port}")
srv=("${srv[@]//@ADDR6@/$(addr_a -6)}") cli=("${cli[@]//@ADDR6@/$(addr_a -6)}")
srv=("${srv[@]//@ADDR@/$(addr_a)}") cli=("${cli[@]//@ADDR@/$(addr_a)}")
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT

cm_line() { on_host "$1" "$NN_SR" status | grep -E '^  cm: '; }
# cm_count HOST FIELD: a counter of the daemon's CM line
cm_count() { cm_line "$1" | sed -E "s/.* $2 ([0-9]+).*/\1/"; }

cm_order_pre "$log"
nn_bg a "$log/server" "${CM_ORDER_PRE[@]}" timeout 120 stdbuf -oL "${srv[@]}"
spid=$NN_LAST_PID
case ${CM_WAIT:-cm} in
tcp:*) nn_wait_port a "${CM_WAIT#tcp:}" ;;
none) ;;
*)
	for _ in $(seq 400); do
		on_a "$NN_SR" status | grep -q "LISTEN .*:$port " && break
		sleep 0.05
	done
	;;
esac
start=$(date +%s.%N)
on_b "${CM_ORDER_PRE[@]}" timeout 120 stdbuf -oL "${cli[@]}" >"$log/client" 2>&1
crc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
cm_reap_server "$spid"
echo "--- client in b: ${cli[*]} (rc $crc, $secs s)"
cat "$log/client"
echo "--- server in a: ${srv[*]} (rc $src)"
cat "$log/server"
ok=1
[ $crc = 0 ] || { echo "FAIL: client exited $crc"; ok=0; }
[ $src = 0 ] || { echo "FAIL: server exited $src"; ok=0; }
grep -Eq "$cre" "$log/client" || { echo "FAIL: client did not print /$cre/"; ok=0; }
[ -z "$sre" ] || grep -Eq "$sre" "$log/server" || { echo "FAIL: server did not print /$sre/"; ok=0; }
# a stopped server's teardown (its DREQs or REJs) crosses the wire too
for _ in $(seq 100); do
	cm_line a | grep -q '^  cm: 0 ids' && cm_line b | grep -q '^  cm: 0 ids' && break
	sleep 0.05
done
for h in a b; do
	line=$(cm_line $h)
	echo "daemon $h after: $line"
	echo "$line" | grep -q '^  cm: 0 ids' || { echo "FAIL: CM ids left on host $h"; on_host $h "$NN_SR" status | grep 'cm id'; ok=0; }
	tx=$(cm_count $h wire_tx) rx=$(cm_count $h wire_rx) dropped=$(cm_count $h dropped)
	[ "${tx:-0}" -gt 0 ] && [ "${rx:-0}" -gt 0 ] ||
		{ echo "FAIL: host $h's CM sent $tx and received $rx MADs on the wire"; ok=0; }
	[ "${dropped:-1}" = 0 ] || { echo "FAIL: host $h dropped $dropped MADs"; ok=0; }
	own=$(echo "$line" | sed -nE 's/.*own socket: tx ([0-9]+) rx ([0-9]+).*/\1 \2/p')
	[ "$own" = "$tx $rx" ] ||
		{ echo "FAIL: host $h's CM agent sent and read on its own socket $own of $tx $rx"; ok=0; }
done
if [ "${CM_NO_RNR:-0}" = 1 ]; then
	for h in a b; do
		rnr=$(on_host $h "$NN_SR" status | sed -n 's/^  roce v2 .* rnr_naks_sent \([0-9]*\) .*/\1/p')
		echo "host $h's engine sent ${rnr:-?} RNR NAKs"
		[ "${rnr:-1}" = 0 ] || { echo "FAIL: host $h sent RNR NAKs"; ok=0; }
	done
fi
[ $ok = 1 ] && echo "PASS: ${cli[0]} across two hosts, MTU $mtu"
[ $ok = 1 ]
