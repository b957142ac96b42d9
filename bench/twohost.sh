# The two-host section of `make bench` (sourced by bench/run.sh, which
# calls th_main in a subshell; needs root for the network namespaces).
#
# Two hosts = two network namespaces joined by a veth pair, a softrdmad in
# each (tests/lib_netns.sh).  Per round and MTU (9000 and 1500; the MTU
# order flips every round, the veth's MTU is changed in place and both
# daemons are restarted so that the port's active MTU follows it), one
# block of measurements whose order flips every round (A B C ..., then
# ... C B A), with the placement probe and the count of other runnable
# tasks recorded before every single one:
#   softrdma  Debian's unmodified perftest, server in host a, client in b:
#             ib_write_bw / ib_send_bw / ib_read_bw at 64 KiB and 1 MiB,
#             ib_write_bw -s 8 (message rate), ib_write_lat / ib_send_lat 8 B
#   link      bench/link_probe: UDP with GSO+GRO (4 KiB RoCE payload
#             segments at MTU 9000, 1 KiB at 1500), receiver's goodput; and a
#             64 B UDP ping-pong with both sides busy-polling, one way; and
#             the same ping-pong through a receiving thread (thread-spin,
#             thread-event): the latency floors of the engine's placements
#   ucx-tcp   ucx_perftest with UCX_TLS=tcp: ucp_put_bw 64 KiB and 1 MiB,
#             ucp_put_lat 8 B
#   ucx-softrdma  the same UCP tests over softrdma (UCX_TLS=rc_verbs,
#             ud_verbs:aux on soft0:1, under `softrdma run`), next to UCX
#             over TCP: what softrdma gives a UCX user between hosts
#   libfabric-tcp  fi_pingpong -p tcp -e msg (the only libfabric test
#             program Debian ships: a ping-pong, no RMA; fabtests is not
#             packaged) at 64 KiB, 1 MiB and 8 B
# and, at MTU 9000, ib_write_bw 1 MiB with 1% injected drop on both
# daemons (SOFTRDMA_FAULT=seed=1,drop=0.01 in their environment) next to a
# lossless run: the daemons are restarted with the spec, and if their
# `softrdma status` shows no fault line (or they refuse to start) the row
# says "n/a (no fault injection in this build)".
#
# A/B (bench/run.sh --against: TH_AGAINST is the other tree's build): per
# round and MTU, only softrdma's rows, on this tree and then on the other
# (the order flips every round), both hosts' daemons restarted with that
# tree's softrdmad and its libibverbs under perftest; system
# "softrdma-against" for the other tree's rows.
#
# Every run is time-bounded (timeout); one that fails or hangs is recorded
# as FAIL (value nan, status=FAIL in raw.tsv) and the section goes on.
# Rows go to raw.tsv with group 2h-<MTU> (the loss rows in 2h-9000).

TH_FAULT_SPEC="seed=1,drop=0.01"
TH_FAULT= # "", yes or no: does this build inject faults?

th_setup_params() {
	if [ "$MODE" = short ]; then
		: "${TH_ROUNDS:=2}"
		TH_TO=60 TH_BW_SECS=1 TH_LAT_N=3000 TH_UDP_LAT_N=5000
		TH_N_1M=400 TH_N_64K=4000 TH_N_8=40000
	else
		: "${TH_ROUNDS:=3}"
		TH_TO=120 TH_BW_SECS=2 TH_LAT_N=10000 TH_UDP_LAT_N=20000
		TH_N_1M=1500 TH_N_64K=15000 TH_N_8=200000
	fi
}

th_say() { say "$*"; echo "$*" >>"$OUT/twohost.txt"; }

# ------------------------------------------------------------ the hosts
# th_start_daemons [FAULT_SPEC]: (re)start both hosts' daemons
th_start_daemons() {
	local h p
	for p in $NN_DPID_A $NN_DPID_B; do kill "$p" 2>/dev/null; done
	for p in $NN_DPID_A $NN_DPID_B; do wait "$p" 2>/dev/null; done
	NN_DPID_A= NN_DPID_B=
	if [ -n "${1:-}" ]; then export SOFTRDMA_FAULT=$1; else unset SOFTRDMA_FAULT; fi
	for h in a b; do
		NN_DAEMON_LOG=$LOGS/2h-softrdmad-r$ROUND-m$MTU${1:+-fault} nn_start_daemon $h
	done
	unset SOFTRDMA_FAULT
	for h in a b; do
		th_wait_daemon $h || return 1
	done
	GA=$(nn_gid_index a "$(addr_a)") && GB=$(nn_gid_index b "$(addr_b)") || return 1
}

# th_wait_daemon a|b: until the host's daemon answers `softrdma status`
# (as nn_wait_daemon, but reading the whole answer first: run.sh sets
# pipefail, and a `| grep -q` that stops reading early can fail the pipe)
th_wait_daemon() {
	local out i
	for i in $(seq 100); do
		out=$(on_host "$1" "$NN_SR" status 2>/dev/null)
		case $out in device*) return 0 ;; esac
		sleep 0.05
	done
	return 1
}

th_set_mtu() {
	MTU=$1
	GROUP=2h-$MTU
	ip -n "$NN_A" link set "$NN_IF" mtu "$MTU" && ip -n "$NN_B" link set "$NN_IF" mtu "$MTU" || return 1
	th_start_daemons || { th_say "two-host: the daemons did not come up at MTU $MTU"; return 1; }
	TH_ACTIVE_MTU=$(on_a "$NN_SR" status 2>/dev/null | sed -n 's/.*active_mtu \([0-9]*\).*/\1/p' | head -1)
}

# th_wait_port a|b PORT PID: until a TCP port listens in that host (false
# if PID died or 10 s passed)
th_wait_port() {
	local ns=$NN_A i
	[ "$1" = b ] && ns=$NN_B
	for i in $(seq 500); do
		[ -n "$(ip netns exec "$ns" ss -ltnH "sport = :$2" 2>/dev/null)" ] && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.02
	done
	return 1
}
# th_stop PID: give the server 2 s to finish on its own, then kill it
th_stop() {
	local i
	for i in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.02
	done
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	NN_PIDS=() # reaped: nn_cleanup must never kill a PID reused since
}
TH_PORT=21000
th_port() { TH_PORT=$((TH_PORT + 1)); }

# counters of both daemons (the status line "roce v2 (udp 4791): ...")
# th_bg a|b LOG CMD...: a peer's or the link probe's server in a host,
# outside softrdma (no LD_LIBRARY_PATH to our libibverbs: UCX and
# libfabric would load it for their verbs transports); sets NN_LAST_PID
th_bg() {
	local ns=$NN_A log=$2
	[ "$1" = b ] && ns=$NN_B
	shift 2
	ip netns exec "$ns" setpriv --pdeathsig TERM "$@" >"$log" 2>&1 &
	NN_LAST_PID=$!
	NN_PIDS+=("$NN_LAST_PID")
}
th_on() { # a|b CMD...: the same in the foreground
	local ns=$NN_A
	[ "$1" = b ] && ns=$NN_B
	shift
	ip netns exec "$ns" "$@"
}

th_counter() { # KEY: sum over both hosts
	local h s=0 v
	for h in a b; do
		v=$(on_host $h "$NN_SR" status 2>/dev/null | sed -n "s/.* $1 \([0-9]*\).*/\1/p" | head -1)
		s=$((s + ${v:-0}))
	done
	echo $s
}

# ------------------------------------------------------ the measurements
# th_pt TEST SIZE ITERS TAGSUFFIX -> TH_JSON, TH_STATUS (ok, FAIL:...)
th_pt() {
	local test=$1 size=$2 iters=$3 tag extra=() spid crc
	case "$test" in
	*_bw) extra=(--report_gbits) ;;
	*_lat) extra=(-C) ;;
	esac
	th_port
	tag=$LOGS/2h-r${ROUND}-m${MTU}-${test}-${size}$4${TH_TAG:-}
	TH_JSON=$tag.cli.json
	rm -f "$TH_JSON"
	nn_bg a "$tag.srv.txt" timeout "$TH_TO" "$test" -d soft0 -x "$GA" -F "${extra[@]}" \
		-p "$TH_PORT" -s "$size" -n "$iters"
	spid=$NN_LAST_PID
	if th_wait_port a "$TH_PORT" "$spid"; then
		on_b timeout "$TH_TO" "$test" -d soft0 -x "$GB" -F "${extra[@]}" -p "$TH_PORT" -s "$size" \
			-n "$iters" --out_json --out_json_file="$TH_JSON" "$(addr_a)" >"$tag.cli.txt" 2>&1
		crc=$?
	else
		crc=server
	fi
	th_stop "$spid"
	case $crc in
	0) TH_STATUS=ok ;;
	124) TH_STATUS="FAIL:timeout_${TH_TO}s" ;;
	server) TH_STATUS="FAIL:server_did_not_listen" ;;
	*) TH_STATUS="FAIL:exit_$crc" ;;
	esac
}
th_sr_bw() { # TEST SIZE ITERS [METRIC]
	local test=$1 s=$2 n=$3 metric=${4:-$1} gb rate r0 r1
	probe
	r0=$(th_counter retransmits)
	th_pt "$test" "$s" "$n" "${4:+-$4}"
	r1=$(th_counter retransmits)
	gb=$(gbs_from_gbits "$(jget "$TH_JSON" BW_average)")
	rate=$(jget "$TH_JSON" MsgRate)
	[ "$TH_STATUS" = ok ] && [ "$gb" = nan ] && TH_STATUS=FAIL:no_result
	[ "$TH_STATUS" = ok ] || gb=nan
	record "$metric" "${TH_SYS:-softrdma}" "$s" "$gb" GB/s \
		"msgrate_mpps=$rate;iters=$n;retransmits=$((r1 - r0));status=${TH_STATUS%%:*};why=${TH_STATUS#*:}" \
		"$rate Mpps, rtx $((r1 - r0)) ${TH_STATUS}"
}
th_sr_lat() { # TEST
	local test=$1 typ avg
	probe
	th_pt "$test" 8 "$TH_LAT_N" ""
	typ=$(cyc2us "$(jget "$TH_JSON" t_typical)")
	avg=$(cyc2us "$(jget "$TH_JSON" t_avg)")
	[ "$TH_STATUS" = ok ] && [ "$typ" = nan ] && TH_STATUS=FAIL:no_result
	[ "$TH_STATUS" = ok ] || typ=nan
	record "$test" "${TH_SYS:-softrdma}" 8 "$typ" usec \
		"avg=$avg;p99=$(cyc2us "$(jget "$TH_JSON" percentile_99)");iters=$TH_LAT_N;status=${TH_STATUS%%:*};why=${TH_STATUS#*:}" \
		"avg $avg ${TH_STATUS}"
}

# the link: UDP GSO+GRO from b to a (the direction of ib_write_bw's data)
th_wait_ready() { # FILE PID
	local i
	for i in $(seq 300); do
		grep -q '^# ready' "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.01
	done
	return 1
}
kvget() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; } # LINE KEY
th_link_bw() {
	local seg=$((MTU >= 9000 ? 4112 : 1040)) tag rx line gb
	probe
	th_port
	tag=$LOGS/2h-r${ROUND}-m${MTU}-udp_gso
	th_bg a "$tag.rx.txt" "$BUILD/bin/link_probe" bw rx -m gso -p "$TH_PORT" -s "$seg" -w 5
	rx=$NN_LAST_PID
	th_wait_ready "$tag.rx.txt" "$rx" &&
		th_on b timeout "$TH_TO" "$BUILD/bin/link_probe" bw tx "$(addr_a)" -m gso -p "$TH_PORT" -s "$seg" \
			-t "$TH_BW_SECS" >"$tag.tx.txt" 2>&1
	th_stop "$rx"
	line=$(grep '^bw-rx' "$tag.rx.txt")
	gb=$(kvget "$line" data_GBps)
	record udp_gso_gro link "$seg" "${gb:-nan}" GB/s \
		"loss_pct=$(kvget "$line" loss_pct);segs_per_dgram=$(kvget "$line" segs_per_dgram);status=$([ -n "$gb" ] && echo ok || echo FAIL)" \
		"loss $(kvget "$line" loss_pct)%"
}
# th_link_lat [MODE]: the 64 B UDP ping-pong, one way, both sides receiving
# the same way: busy (a non-blocking recv loop, the link's floor), or the
# floors of the engine's placements (docs/architecture.md, "Where the
# engine runs"): thread-event (a receiving thread hands each datagram to the
# main thread through an eventfd it sleeps on: two thread hand-offs per
# direction, as the daemon's engine has today) and thread-spin (the main
# thread sends itself and spins on memory a receiving thread writes into:
# one hand-off per direction, the best an ib_write_lat can get from any
# engine that is not the application's own thread)
th_link_lat() {
	local mode=${1:-busy} tag pong line us metric
	case $mode in
	busy) metric=udp_busy_lat ;;
	thread-event) metric=udp_tevent_lat ;;
	thread-spin) metric=udp_tspin_lat ;;
	esac
	probe
	th_port
	tag=$LOGS/2h-r${ROUND}-m${MTU}-udp_$mode
	th_bg a "$tag.pong.txt" "$BUILD/bin/link_probe" lat pong -m "$mode" -p "$TH_PORT" -w 10
	pong=$NN_LAST_PID
	line=
	th_wait_ready "$tag.pong.txt" "$pong" &&
		line=$(th_on b timeout "$TH_TO" "$BUILD/bin/link_probe" lat ping "$(addr_a)" -m "$mode" -p "$TH_PORT" \
			-n "$TH_UDP_LAT_N" 2>&1 | tee "$tag.ping.txt" | grep '^lat')
	th_stop "$pong"
	us=$(awk -v v="$(kvget "$line" p50_ns)" 'BEGIN { if (v == "") print "nan"; else printf "%.4f", v / 1000 }')
	record "$metric" link 64 "$us" usec \
		"p99_ns=$(kvget "$line" p99_ns);lost=$(kvget "$line" lost);status=$([ "$us" != nan ] && echo ok || echo FAIL)" \
		"one way, both sides $mode"
}

# UCX over TCP: th_ucx TEST SIZE ITERS -> UCX_LINE (as run.sh's ucx())
th_ucx() {
	local test=$1 size=$2 iters=$3 tag spid
	th_port
	tag=$LOGS/2h-r${ROUND}-m${MTU}-ucx_${test}_${size}
	th_bg a "$tag.srv.txt" env UCX_TLS=tcp UCX_NET_DEVICES="$NN_IF" timeout "$TH_TO" ucx_perftest -p "$TH_PORT"
	spid=$NN_LAST_PID
	UCX_LINE=
	if th_wait_port a "$TH_PORT" "$spid"; then
		th_on b env UCX_TLS=tcp UCX_NET_DEVICES="$NN_IF" timeout "$TH_TO" ucx_perftest "$(addr_a)" -p "$TH_PORT" \
			-t "$test" -s "$size" -n "$iters" -w "$(clampi $((iters / 10)) 10 1000)" -f >"$tag.cli.txt" 2>&1
		UCX_LINE=$(grep -E '^ *(Final:)? *[0-9]+ +[0-9.]+ ' "$tag.cli.txt" | tail -1 | sed 's/Final://')
	fi
	th_stop "$spid"
}
th_ucx_bw() { # SIZE ITERS
	local gb
	probe
	th_ucx ucp_put_bw "$1" "$2"
	gb=$(gbs_from_mib "$(ucx_field 6)")
	record ucx_tcp_put_bw ucx-tcp "$1" "$gb" GB/s "iters=$2;status=$([ "$gb" != nan ] && echo ok || echo FAIL)" \
		"UCX_TLS=tcp"
}
th_ucx_lat() {
	local typ
	probe
	th_ucx ucp_put_lat 8 "$TH_LAT_N"
	typ=$(ucx_field 2)
	record ucx_tcp_put_lat ucx-tcp 8 "$typ" usec "avg=$(ucx_field 3);status=$([ "$typ" != nan ] && echo ok || echo FAIL)" \
		"median, avg $(ucx_field 3)"
}

# UCX over softrdma: UCP (as the TCP row) over rc_verbs on soft0, both
# sides under `softrdma run` in their host: th_ucxsr TEST SIZE ITERS
th_ucxsr() {
	local test=$1 size=$2 iters=$3 tag spid
	local env=(env UCX_TLS=rc_verbs,ud_verbs:aux UCX_NET_DEVICES=soft0:1)
	th_port
	tag=$LOGS/2h-r${ROUND}-m${MTU}-ucxsr_${test}_${size}
	nn_bg a "$tag.srv.txt" "${env[@]}" timeout "$TH_TO" "$NN_SR" run -q -- ucx_perftest -p "$TH_PORT"
	spid=$NN_LAST_PID
	UCX_LINE=
	if th_wait_port a "$TH_PORT" "$spid"; then
		on_b "${env[@]}" timeout "$TH_TO" "$NN_SR" run -q -- ucx_perftest "$(addr_a)" -p "$TH_PORT" \
			-t "$test" -s "$size" -n "$iters" -w "$(clampi $((iters / 10)) 10 1000)" -f >"$tag.cli.txt" 2>&1
		UCX_LINE=$(grep -E '^ *(Final:)? *[0-9]+ +[0-9.]+ ' "$tag.cli.txt" | tail -1 | sed 's/Final://')
	fi
	th_stop "$spid"
}
th_ucxsr_bw() { # SIZE ITERS
	local gb
	probe
	th_ucxsr ucp_put_bw "$1" "$2"
	gb=$(gbs_from_mib "$(ucx_field 6)")
	record ucxsr_ucp_put_bw ucx-softrdma "$1" "$gb" GB/s "iters=$2;status=$([ "$gb" != nan ] && echo ok || echo FAIL)" \
		"UCX_TLS=rc_verbs,ud_verbs:aux"
}
th_ucxsr_lat() {
	local typ
	probe
	th_ucxsr ucp_put_lat 8 "$TH_LAT_N"
	typ=$(ucx_field 2)
	record ucxsr_ucp_put_lat ucx-softrdma 8 "$typ" usec \
		"avg=$(ucx_field 3);status=$([ "$typ" != nan ] && echo ok || echo FAIL)" "median, avg $(ucx_field 3)"
}

# libfabric tcp ping-pong: GB/s of one transfer (its MB/sec) and one-way µs
th_fi() { # SIZE ITERS
	local size=$1 iters=$2 tag spid line gb us
	probe
	th_port
	tag=$LOGS/2h-r${ROUND}-m${MTU}-fi_tcp_${size}
	th_bg a "$tag.srv.txt" timeout "$TH_TO" fi_pingpong -p tcp -e msg -S "$size" -I "$iters" -B "$TH_PORT"
	spid=$NN_LAST_PID
	line=
	if th_wait_port a "$TH_PORT" "$spid"; then
		th_on b timeout "$TH_TO" fi_pingpong -p tcp -e msg -S "$size" -I "$iters" -P "$TH_PORT" "$(addr_a)" \
			>"$tag.cli.txt" 2>&1
		line=$(awk 'NR > 1 && NF >= 8 { l = $0 } END { print l }' "$tag.cli.txt")
	fi
	th_stop "$spid"
	set -- $line
	gb=$(gbs_from_mb "${6:-nan}")
	us=${7:-nan}
	record fi_tcp_pingpong libfabric-tcp "$size" "$gb" GB/s \
		"oneway_usec=$us;iters=$iters;status=$([ "$gb" != nan ] && echo ok || echo FAIL)" "$us us one-way"
}

# ib_write_bw 1 MiB with injected loss, next to a lossless run
th_loss() {
	local fl0 fl1
	if [ "$TH_FAULT" = no ]; then
		probe
		record ib_write_bw_loss1 softrdma 1048576 nan GB/s "status=n/a;why=no_fault_injection_in_this_build" \
			"n/a (no fault injection in this build)"
		return
	fi
	fl0=$(on_a "$NN_SR" status 2>/dev/null | grep -i -E 'fault|inject')
	th_sr_bw ib_write_bw 1048576 "$TH_N_1M" ib_write_bw_ref # lossless, clean daemons
	if th_start_daemons "$TH_FAULT_SPEC"; then
		fl1=$(on_a "$NN_SR" status 2>/dev/null | grep -i -E 'fault|inject')
	else
		fl1=
	fi
	if [ -z "$TH_FAULT" ]; then
		if [ -n "$fl1" ] && [ "$fl1" != "$fl0" ]; then
			TH_FAULT=yes
			th_say "two-host: fault injection supported; status with SOFTRDMA_FAULT=$TH_FAULT_SPEC: $fl1"
		else
			TH_FAULT=no
			th_say "two-host: no fault injection in this build (daemons with SOFTRDMA_FAULT=$TH_FAULT_SPEC $([ -n "$NN_DPID_A" ] && kill -0 "$NN_DPID_A" 2>/dev/null && echo "show no fault line in softrdma status" || echo "did not start"))"
		fi
	fi
	if [ "$TH_FAULT" = yes ]; then
		th_sr_bw ib_write_bw 1048576 "$TH_N_1M" ib_write_bw_loss1
		on_a "$NN_SR" status >"$LOGS/2h-r$ROUND-status-fault-a.txt" 2>&1
		on_b "$NN_SR" status >"$LOGS/2h-r$ROUND-status-fault-b.txt" 2>&1
	else
		probe
		record ib_write_bw_loss1 softrdma 1048576 nan GB/s "status=n/a;why=no_fault_injection_in_this_build" \
			"n/a (no fault injection in this build)"
	fi
	th_start_daemons || th_say "two-host: the daemons did not come back up without faults"
}

# one MTU's block, in the order given (forward in odd rounds)
th_block() {
	local items=(
		"th_link_bw"
		"th_sr_bw ib_write_bw 1048576 $TH_N_1M"
		"th_ucx_bw 1048576 $TH_N_1M"
		"th_ucxsr_bw 1048576 $TH_N_1M"
		"th_sr_bw ib_read_bw 1048576 $TH_N_1M"
		"th_fi 1048576 $TH_N_1M"
		"th_sr_bw ib_send_bw 1048576 $TH_N_1M"
		"th_sr_bw ib_write_bw 65536 $TH_N_64K"
		"th_ucx_bw 65536 $TH_N_64K"
		"th_ucxsr_bw 65536 $TH_N_64K"
		"th_sr_bw ib_read_bw 65536 $TH_N_64K"
		"th_fi 65536 $TH_N_64K"
		"th_sr_bw ib_send_bw 65536 $TH_N_64K"
		"th_sr_bw ib_write_bw 8 $TH_N_8"
		"th_link_lat"
		"th_link_lat thread-spin"
		"th_link_lat thread-event"
		"th_sr_lat ib_write_lat"
		"th_ucx_lat"
		"th_ucxsr_lat"
		"th_sr_lat ib_send_lat"
		"th_fi 8 $TH_LAT_N"
	) i
	if [ $((ROUND % 2)) = 1 ]; then
		for i in "${items[@]}"; do eval "$i"; done
	else
		for ((i = ${#items[@]} - 1; i >= 0; i--)); do eval "${items[$i]}"; done
	fi
}

# A/B: softrdma's rows of one MTU's block, on tree `this` or `against`
th_tree() {
	if [ "$1" = against ]; then
		NN_BUILD=$TH_AGAINST TH_SYS=softrdma-against TH_TAG=-against
	else
		NN_BUILD=$TH_THIS TH_SYS=softrdma TH_TAG=
	fi
	NN_SR=$NN_BUILD/bin/softrdma
}
th_block_ab() {
	local items=(
		"th_sr_bw ib_write_bw 1048576 $TH_N_1M"
		"th_sr_bw ib_read_bw 1048576 $TH_N_1M"
		"th_sr_bw ib_send_bw 1048576 $TH_N_1M"
		"th_sr_bw ib_write_bw 65536 $TH_N_64K"
		"th_sr_bw ib_read_bw 65536 $TH_N_64K"
		"th_sr_bw ib_send_bw 65536 $TH_N_64K"
		"th_sr_bw ib_write_bw 8 $TH_N_8"
		"th_sr_lat ib_write_lat"
		"th_sr_lat ib_send_lat"
	) i
	for i in "${items[@]}"; do eval "$i"; done
}

th_main() {
	local m order t trees
	th_setup_params
	: >"$OUT/twohost.txt"
	if [ "$(id -u)" != 0 ]; then
		th_say "two-host section skipped: needs root (network namespaces)"
		return 0
	fi
	for m in ip setpriv ucx_perftest fi_pingpong ib_write_bw; do
		command -v $m >/dev/null || th_say "two-host: $m is missing (its rows will FAIL)"
	done
	. "$ROOT/tests/lib_netns.sh"
	ROUND=0 MTU=9000
	nn_setup "$BUILD" 9000 || { th_say "two-host: nn_setup failed"; return 1; }
	TH_THIS=$NN_BUILD
	trap nn_cleanup EXIT
	{
		echo "two hosts: network namespaces $NN_A and $NN_B, veth $NN_IF, $(addr_a) <-> $(addr_b)"
		echo "two-host rounds: $TH_ROUNDS; iterations: 1 MiB $TH_N_1M, 64 KiB $TH_N_64K, 8 B bw $TH_N_8, lat $TH_LAT_N; UDP bw ${TH_BW_SECS}s, UDP lat $TH_UDP_LAT_N; timeout per run ${TH_TO}s"
	} | tee -a "$OUT/twohost.txt" >>"$OUT/progress.log"
	for ROUND in $(seq "$TH_ROUNDS"); do
		order="9000 1500"
		[ $((ROUND % 2)) = 0 ] && order="1500 9000"
		for m in $order; do
			if [ -n "${TH_AGAINST:-}" ]; then
				trees="this against"
				[ $((ROUND % 2)) = 0 ] && trees="against this"
				for t in $trees; do
					th_tree "$t"
					th_set_mtu "$m" || continue
					th_say "two-host round $ROUND/$TH_ROUNDS: MTU $MTU, tree $t (active_mtu $TH_ACTIVE_MTU)"
					th_block_ab
				done
				th_tree this
				continue
			fi
			th_set_mtu "$m" || continue
			th_say "two-host round $ROUND/$TH_ROUNDS: MTU $MTU (active_mtu $TH_ACTIVE_MTU)"
			th_block
			[ "$m" = 9000 ] && th_loss
		done
	done
	nn_cleanup
	trap - EXIT
}
