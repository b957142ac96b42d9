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
#   KIND xsrq:     ibv_xsrq_pingpong (XRC); as pingpong, and checks that
#                  each side's SRQ number is the one the other received
#                  (pair_check.sh).  Each host's daemon keeps its own XRC
#                  domains, so both sides may open the default
#                  /tmp/xrc_domain (the program has no option for it): the
#                  file only names a domain within one host.
#   KIND perftest: ib_*_{bw,lat}; passes -d soft0 -x <veth GID> -p PORT
# PAIR_LINK_LOCAL=1: the GIDs of the veth's link-local IPv6 addresses.
# PAIR_TRACE=1: also capture host b's engine and decode it (pair_trace);
# PAIR_TRACE_OPCODES: BTH opcodes (decimal) the capture must hold.
# PAIR_EXPECT: counter names of `softrdma status`'s RoCE line that must be
# nonzero on host b afterwards (with SOFTRDMA_FAULT: the recovery happened);
# PAIR_EXPECT_A: the same on host a.
# PAIR_IDLE_CPU=1: afterwards, with the programs gone, each host's daemon
# (its engine included) must use under 2% of a CPU over 2 s: no thread
# busy-polls an idle device (issue #10, deliverable 4).
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
pingpong | xsrq) sa=(-g "$ga" -p "$port") ca=(-g "$gb" -p "$port") ;;
perftest) sa=(-d soft0 -x "$ga" -p "$port") ca=(-d soft0 -x "$gb" -p "$port") ;;
*) echo "unknown kind $kind"; exit 2 ;;
esac
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT

# The capture of host b's engine (both directions), decoded by tshark: it
# has packets, every one is InfiniBand (RoCEv2 on UDP 4791) and none is
# malformed or an expert error.  KIND xsrq: every packet is of the XRC
# transport (opcodes 0xA0..0xB7), both requests and XRC ACKs (0xB1) are
# there, and each request's XRCETH names the SRQ that its target side
# printed as its own (Wireshark 4.0 names the XRC opcodes but dissects no
# XRCETH: its 4 bytes are read from the UDP payload after the BTH).
pair_trace() {
	local f=$1 n ib bad ok=0 heur=() h
	# the heuristic dissectors over InfiniBand guess at payloads: not ours
	for h in smc smb_direct rpcordma nvme-rdma lnet iser infiniband_sdp fcoib infiniband.eoib drbd; do
		heur+=(--disable-protocol "$h")
	done
	n=$(tshark -n -r "$f" "${heur[@]}" 2>/dev/null | wc -l)
	ib=$(tshark -n -r "$f" "${heur[@]}" -Y infiniband 2>/dev/null | wc -l)
	bad=$(tshark -n -r "$f" "${heur[@]}" -o udp.check_checksum:TRUE \
		-Y '_ws.malformed || _ws.expert.severity >= 0x00800000' 2>/dev/null | wc -l)
	echo "--- capture: $n packets, $ib InfiniBand, $bad malformed or in error; opcodes:"
	tshark -n -r "$f" "${heur[@]}" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c
	[ "$n" -gt 0 ] || { echo "FAIL: the capture has no packet"; ok=1; }
	[ "$ib" = "$n" ] || { echo "FAIL: $((n - ib)) packets not decoded as InfiniBand"; ok=1; }
	[ "$bad" = 0 ] || { echo "FAIL: $bad packets malformed or in error"; ok=1; }
	local op
	for op in ${PAIR_TRACE_OPCODES:-}; do
		tshark -n -r "$f" "${heur[@]}" -T fields -e infiniband.bth.opcode 2>/dev/null |
			grep -qx "$op" || { echo "FAIL: no packet of opcode $op in the capture"; ok=1; }
	done
	[ "$kind" = xsrq ] || return $ok
	# each side's "local:" line: its XRC_RECV QPN, its SRQ number and its
	# GID's IPv4 address (the two hosts may number their QPs alike: a
	# request is told by its destination address and QPN together)
	local map
	map=$(sed -n 's/^ *local:.*QPN RECV \([0-9a-f]*\) .*SRQN \([0-9a-f]*\), GID ::ffff:\([0-9.]*\).*/\3_\1 \2/p' \
		"$log/client" "$log/server")
	tshark -n -r "$f" "${heur[@]}" -T fields -e infiniband.bth.opcode -e infiniband.bth.destqp \
		-e udp.payload -e ip.dst 2>/dev/null | awk -v map="$map" '
		BEGIN { n = split(map, m, /[ \n]/); for (i = 1; i < n; i += 2) srqn[m[i]] = m[i + 1] }
		{
			op = $1 + 0; qp = tolower($2); sub(/^0x/, "", qp); qp = $4 "_" qp
			if (op < 160 || op > 183) { other++; next }
			if (op == 177) { acks++; next }
			if ((op >= 173 && op <= 178)) { resp++; next }
			req++
			x = tolower(substr($3, 27, 6)) # XRCETH: byte 12 reserved, 13..15 the SRQN
			if (!(qp in srqn) || x != srqn[qp]) { bad++; if (bad <= 5) print "  request to " qp ": XRCETH SRQN " x ", expected " srqn[qp] }
		}
		END {
			printf "--- XRC: %d requests, %d ACKs, %d other responses, %d not XRC, %d wrong XRCETH\n", req, acks, resp, other, bad
			exit !(req > 0 && acks > 0 && !other && !bad)
		}' || { echo "FAIL: the capture is not all XRC with the right XRCETH"; ok=1; }
	return $ok
}

udp_out() { # datagrams host b has sent so far, over IPv4 and IPv6
	on_b awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "OutDatagrams") c = i; h = 1 }
		else n += $c } $1 == "Udp6OutDatagrams" { n += $2 } END { print n }' /proc/net/snmp /proc/net/snmp6
}
# PAIR_TRACE=1: `softrdma trace` on host b for the run; the capture is
# decoded by tshark afterwards (pair_trace below)
if [ -n "${PAIR_TRACE:-}" ]; then
	command -v tshark >/dev/null || nn_skip "needs tshark"
	on_b "$NN_SR" trace "$log/b.pcap" >/dev/null || { echo "FAIL: softrdma trace"; exit 1; }
fi
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
[ -n "${PAIR_TRACE:-}" ] && on_b "$NN_SR" trace off >/dev/null
ok=1
pair_check "$kind" "$prog" "$log" "$crc" "$src" || ok=0
[ $((after - before)) -gt 0 ] || { echo "FAIL: nothing went over the wire"; ok=0; }
[ -n "${PAIR_TRACE:-}" ] && { pair_trace "$log/b.pcap" || ok=0; }
if [ $ok = 0 ]; then # what the engines counted, for the failure's reader
	echo "--- host a: $(on_a "$NN_SR" status | grep 'roce v2')"
	echo "--- host b: $(on_b "$NN_SR" status | grep 'roce v2')"
	for h in a b; do # the kernel's UDP drops (RcvbufErrors, InErrors)
		echo "--- host $h kernel: $(on_$h grep Udp: /proc/net/snmp | tr '\n' ' ')"
	done
fi
expect() { # expect HOST COUNTER...: each nonzero in HOST's RoCE line
	local h=$1 c v
	shift
	for c in "$@"; do
		v=$(on_$h "$NN_SR" status | grep 'roce v2' | tr ' ' '\n' | grep -A1 -x "$c" | tail -1)
		[ "${v:-0}" -gt 0 ] 2>/dev/null || { echo "FAIL: host $h's $c is ${v:-absent}: not seen"; ok=0; }
		echo "host $h: $c $v"
	done
}
# shellcheck disable=SC2086 # lists of counter names
expect b ${PAIR_EXPECT:-}
# shellcheck disable=SC2086
expect a ${PAIR_EXPECT_A:-}
if [ -n "${PAIR_IDLE_CPU:-}" ]; then
	sleep 0.3 # grants to posting threads lapse after 100 ms (engine.c)
	cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
	a0=$(cpu "$NN_DPID_A") b0=$(cpu "$NN_DPID_B")
	sleep 2
	a1=$(cpu "$NN_DPID_A") b1=$(cpu "$NN_DPID_B")
	hz=$(getconf CLK_TCK)
	for h in a b; do
		[ $h = a ] && ms=$(((a1 - a0) * 1000 / hz)) || ms=$(((b1 - b0) * 1000 / hz))
		echo "host $h: the idle daemon used $ms ms of CPU in 2 s"
		[ "$ms" -lt 40 ] || { echo "FAIL: host $h's idle daemon keeps a CPU busy"; ok=0; }
	done
fi
[ $ok = 1 ] && echo "PASS: $prog $* across two hosts, MTU $mtu"
[ $ok = 1 ]
