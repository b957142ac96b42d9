#!/bin/bash
# The CM between two hosts as the wire sees it (tests/lib_netns.sh: two
# namespaces joined by a veth, a softrdmad each), with Debian's rping:
#   cm_twohost_wire.sh BUILD_DIR loss    the engine's fault injector drops
#       the first CM MAD each host sends (the client's REQ, the server's
#       REP: `softrdma fault dir=tx,qp=1,drop_nth=1`); the IB CM resends
#       them after its response timeout and the connection completes; then
#       a second run drops the client's third MAD (its DREQ) and the DREQ is
#       resent, so the server still sees DISCONNECTED and exits 0
#   cm_twohost_wire.sh BUILD_DIR trace   `softrdma trace` on both hosts
#       during an rping: tshark decodes the CM exchange as InfiniBand CM
#       (ConnectRequest, ConnectReply, ReadyToUse, DisconnectRequest and
#       DisconnectReply to QP 1 with the GSI Q_Key) with no malformed packet
#       or expert error, and what one host sent is what the other received
#   cm_twohost_wire.sh BUILD_DIR addr    resolution of the veth subnet's
#       address that no host owns: the kernel's ARP never answers, so
#       ADDR_ERROR -ETIMEDOUT after the 2 s timeout (cm_errors addr_error);
#       no route at all: ADDR_ERROR -ENETUNREACH at once
# Needs namespaces (tests/lib_netns.sh; skipped, 77, without) and tshark for trace.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
source "$here/../lib_netns.sh"
[ $# = 2 ] || { echo "usage: $0 BUILD_DIR loss|trace|addr" >&2; exit 2; }
build=$1 mode=$2
if [ "$mode" = trace ] && ! command -v tshark >/dev/null; then
	echo "SKIP: tshark is not installed"; exit 77
fi
nn_setup "$build" 1500 || exit 1
tmp=$(mktemp -d)
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
cm_count() { on_host "$1" "$NN_SR" status | grep -E '^  cm: ' | sed -E "s/.* $2 ([0-9]+).*/\1/"; }

# rping N: a server in a, a client in b, N pings; sets rp_crc, rp_src, rp_secs
rping_pair() {
	local n=$1 port=$((20000 + (RANDOM % 20000))) spid start
	nn_bg a "$tmp/srv" timeout 120 rping -s -v -C "$n" -a 0.0.0.0 -p "$port"
	spid=$NN_LAST_PID
	for _ in $(seq 400); do
		on_a "$NN_SR" status | grep -q "LISTEN .*:$port " && break
		sleep 0.05
	done
	start=$(date +%s.%N)
	on_b timeout 120 rping -c -v -C "$n" -a "$(addr_a)" -p "$port" >"$tmp/cli" 2>&1
	rp_crc=$?
	wait "$spid"
	rp_src=$?
	rp_secs=$(echo "$(date +%s.%N) - $start" | bc)
	echo "rping -C $n: client rc $rp_crc, server rc $rp_src, $rp_secs s"
	tail -n 2 "$tmp/cli" | sed 's/^/[client] /'
	tail -n 2 "$tmp/srv" | sed 's/^/[server] /'
}

mode_loss() {
	local tx_b tx_a
	on_b "$NN_SR" fault "dir=tx,qp=1,drop_nth=1" && on_a "$NN_SR" fault "dir=tx,qp=1,drop_nth=1" ||
		{ echo "FAIL: cannot set the fault spec"; exit 1; }
	rping_pair 10
	on_a "$NN_SR" status >"$tmp/st.a"
	on_b "$NN_SR" status >"$tmp/st.b"
	grep -E '^ +(cm|fault|injected)' "$tmp/st.a" "$tmp/st.b"
	check "rping completes through a lost REQ and a lost REP ($rp_crc $rp_src)" test "$rp_crc$rp_src" = 00
	check "client: ping 9 answered" grep -q '^ping data: rdma-ping-9: ' "$tmp/cli"
	check "b: one MAD dropped by the injector" grep -Eq 'injected tx: .* drop 1 ' "$tmp/st.b"
	check "a: one MAD dropped by the injector" grep -Eq 'injected tx: .* drop 1 ' "$tmp/st.a"
	# without loss the client sends REQ, RTU, DREQ and the server REP, DREP
	tx_b=$(cm_count b wire_tx) tx_a=$(cm_count a wire_tx)
	check "b: the REQ went twice ($tx_b MADs, 3 without loss)" test "$tx_b" -ge 4
	check "a: the REP went twice ($tx_a MADs, 2 without loss)" test "$tx_a" -ge 3
	# the IB CM's response timeout (cm_mad_queue.c) is what the retry waits
	check "the retries took the CM's timeout (${rp_secs} s)" \
		test "$(echo "$rp_secs > 4" | bc)" = 1

	echo "# the DREQ lost: the client's third MAD (REQ, RTU, DREQ)"
	on_a "$NN_SR" fault off >/dev/null
	on_b "$NN_SR" fault "dir=tx,qp=1,drop_nth=3" >/dev/null
	tx_b=$(cm_count b wire_tx)
	rping_pair 10
	on_b "$NN_SR" status >"$tmp/st.b"
	grep -E '^ +(cm|injected)' "$tmp/st.b"
	check "rping completes through a lost DREQ ($rp_crc $rp_src)" test "$rp_crc$rp_src" = 00
	check "b: the DREQ was dropped" grep -Eq 'injected tx: .* drop 1 ' "$tmp/st.b"
	check "b: and sent again ($(($(cm_count b wire_tx) - tx_b)) MADs, 3 without loss)" \
		test $(($(cm_count b wire_tx) - tx_b)) -ge 4
	# rping's client destroys its id right after rdma_disconnect: the DREQ
	# went on without it, until the server's DREP
	check "b: no DREQ left waiting ($(cm_count b lingering_dreqs))" test "$(cm_count b lingering_dreqs)" = 0
}

mode_trace() {
	local h f n ib bad heur=() cm m
	on_a "$NN_SR" trace "$tmp/a.pcap" >/dev/null && on_b "$NN_SR" trace "$tmp/b.pcap" >/dev/null ||
		{ echo "FAIL: cannot start the captures"; exit 1; }
	rping_pair 10
	on_a "$NN_SR" trace off
	on_b "$NN_SR" trace off
	check "rping completes ($rp_crc $rp_src)" test "$rp_crc$rp_src" = 00
	for h in smc smb_direct rpcordma nvme-rdma lnet iser infiniband_sdp fcoib infiniband.eoib drbd; do
		heur+=(--disable-protocol "$h")
	done
	for h in a b; do
		f=$tmp/$h.pcap
		n=$(tshark -n -r "$f" "${heur[@]}" 2>/dev/null | wc -l)
		ib=$(tshark -n -r "$f" "${heur[@]}" -Y infiniband 2>/dev/null | wc -l)
		bad=$(tshark -n -r "$f" "${heur[@]}" -o udp.check_checksum:TRUE \
			-Y '_ws.malformed || _ws.expert.severity >= 0x00800000' 2>/dev/null | wc -l)
		# the CM's datagrams: to QP 1, GSI Q_Key, source QP 1, a CM MAD
		tshark -n -r "$f" "${heur[@]}" -Y 'infiniband.bth.destqp == 1' 2>/dev/null |
			sed "s/^/[$h] /"
		cm=$(tshark -n -r "$f" "${heur[@]}" -Y 'infiniband.bth.destqp == 1' -T fields \
			-e infiniband.bth.opcode -e infiniband.deth.q_key -e infiniband.deth.srcqp \
			-e infiniband.mad.mgmtclass 2>/dev/null | sort -u | tr '\t\n' ' ;')
		echo "$h.pcap: $n packets, $ib InfiniBand, $bad malformed or in error; QP1: $cm"
		check "$h: every packet decoded as InfiniBand ($ib of $n)" test "$ib" = "$n" -a "$n" -gt 0
		check "$h: no malformed packet, no expert error ($bad)" test "$bad" = 0
		check "$h: QP1 datagrams are UD SEND_ONLY, GSI Q_Key, from QP1, CM class" \
			grep -Eqx '100 0x0*80010000 0x0*1 0x07;' <<<"$cm"
		# each message of the exchange decoded with its own fields
		for m in "req ConnectRequest" "rep ConnectReply" "rtu.localcommid ReadyToUse" \
			"dreq.localcommid DisconnectRequest" "drsp.localcommid DisconnectReply"; do
			n=$(tshark -n -r "$f" "${heur[@]}" -Y "infiniband.cm.${m%% *}" 2>/dev/null | wc -l)
			check "$h: ${m#* } decoded ($n)" test "$n" -ge 1
		done
		tshark -n -r "$f" "${heur[@]}" -Y infiniband.cm.req -T fields -e infiniband.cm.req.serviceid \
			-e infiniband.cm.req.localqpn -e infiniband.cm.req.startpsn \
			-e infiniband.cm.req.prim_localgid_ipv4 -e infiniband.cm.req.prim_remotegid_ipv4 \
			2>/dev/null >"$tmp/$h.req"
		sed "s/^/[$h] REQ service ID, QPN, PSN, GIDs: /" "$tmp/$h.req"
		check "$h: the REQ names b's and a's addresses as its GIDs" \
			grep -q "$(addr_b).$(addr_a)" "$tmp/$h.req"
	done
	check "a's CM datagrams = b's received" test \
		"$(tshark -n -r "$tmp/a.pcap" -Y "infiniband.bth.destqp == 1 && ip.src == $(addr_a)" 2>/dev/null | wc -l)" = \
		"$(tshark -n -r "$tmp/b.pcap" -Y "infiniband.bth.destqp == 1 && ip.src == $(addr_a)" 2>/dev/null | wc -l)"
}

mode_addr() {
	local nobody=10.98.$NN_N.77 out
	# the /30's two host addresses are a's and b's: a subnet beside it,
	# on the veth's link, where nobody answers ARP
	ip -n "$NN_B" route add "10.98.$NN_N.0/24" dev "$NN_IF" || exit 1
	out=$(on_b env CM_ERR_DST="$nobody" CM_ERR_STATUS=-110 "$NN_BUILD/bin/cm_errors" addr_error 2>&1)
	echo "$out"
	check "unanswered ARP for $nobody: ADDR_ERROR -110" grep -q "status -110 after" <<<"$out"
	check "after about the 2 s timeout" grep -Eq "after (1\.[89]|2\.|3\.)" <<<"$out"
	out=$(on_b env CM_ERR_DST=192.0.2.99 CM_ERR_STATUS=-101 "$NN_BUILD/bin/cm_errors" addr_error 2>&1)
	echo "$out"
	check "no route to 192.0.2.99: ADDR_ERROR -101 at once" grep -Eq "status -101 after 0\.[0-4]" <<<"$out"
	on_host b "$NN_SR" status | grep -E '^  cm: '
}

case $mode in
loss | trace | addr) "mode_$mode" ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
echo "$passes passed, $fails failed"
[ $fails = 0 ]
