#!/bin/bash
# One of our checking test programs across two hosts: sr_xfer (xfer.c),
# sr_xrc_wire (xrc.c), sr_ackpp (ackpp.c) or sr_mcast (mcast.c), the server
# in host a, the client in host b; both must exit 0, having checked every byte, datagram
# and completion.
#
# usage: xfer.sh BUILD_DIR MTU PROGRAM [CLIENT ARGS...]
# Environment: SOFTRDMA_FAULT (fault injection in both daemons, from their
# start), SOFTRDMA_TEST_QPN_TAG (fixed QPN tag bits, for -D), XFER_EXPECT
# (counter names of `softrdma status`'s RoCE line, space-separated, that
# must be nonzero on host b afterwards, e.g. retransmits: the recovery
# really happened), XFER_EXPECT_ZERO (names that must be 0 there),
# XFER_EXPECT_MIN ("name=N ...": at least N there), XFER_CAPTURE=1 (capture host b's veth with tshark,
# its UDP segmentation done in software so each GSO segment is seen as it
# leaves, and check every packet's ICRC with tests/wire/check_wire.py's
# scapy and zlib oracles; at least one must be a GSO segment),
# XFER_IPV6=1 (the GIDs of the veth's IPv6 addresses instead of IPv4),
# XFER_STEERED=1 (host b's datagrams went to the members of its processes,
# the engine's own member 0 taking at most 1% of them: rx_by_member),
# XFER_PAUSES=N (the client is stopped N times for 50 ms while it runs,
# SIGSTOP then SIGCONT, 150 ms apart: its host's engine takes its QPs over
# and gives them back each time).
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
build=$1 mtu=$2 prog=$3
shift 3
nn_setup "$build" "$mtu" || exit 1
fam=${XFER_IPV6:+-6}
ga=$(nn_gid_index a "$(addr_a $fam)") && gb=$(nn_gid_index b "$(addr_b $fam)") ||
	{ echo "FAIL: no RoCE v2 GID for the veth addresses"; exit 1; }
port=$((20000 + (RANDOM % 20000)))
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT

if [ -n "${XFER_CAPTURE:-}" ]; then
	command -v tshark >/dev/null && command -v ethtool >/dev/null &&
		/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
		nn_skip "needs tshark, ethtool and python3-scapy"
	for h in a b; do
		on_host $h ethtool -K "$NN_IF" tx-udp-segmentation off >/dev/null ||
			{ echo "FAIL: ethtool -K tx-udp-segmentation off"; exit 1; }
	done
	nn_bg b "$log/tshark" tshark -n -i "$NN_IF" -f "udp port 4791" -F pcap -w "$log/b.pcap"
	cap=$NN_LAST_PID
	for _ in $(seq 200); do grep -q "Capturing on" "$log/tshark" && break; sleep 0.05; done
fi
nn_bg a "$log/server" timeout 600 "$build/bin/$prog" -g "$ga" -p "$port" ${XFER_SERVER_ARGS:-}
spid=$NN_LAST_PID
if ! nn_wait_port a "$port"; then
	echo "FAIL: server did not listen on $port"; cat "$log/server"; exit 1
fi
start=$(date +%s%N)
on_b timeout 600 "$build/bin/$prog" -g "$gb" -p "$port" "$@" "$(addr_a)" >"$log/client" 2>&1 &
cpid=$!
paused=0
if [ -n "${XFER_PAUSES:-}" ]; then
	# the program itself: the newest descendant of the job named $prog
	pp=$cpid
	for _ in $(seq 100); do
		p=$pp
		while [ -n "$p" ] && [ "$(cat /proc/$p/comm 2>/dev/null)" != "$prog" ]; do
			p=$(pgrep -n -P "$p")
		done
		[ -n "$p" ] && break
		sleep 0.02
	done
	for _ in $(seq "$XFER_PAUSES"); do
		sleep 0.15
		[ -n "$p" ] && kill -STOP "$p" 2>/dev/null || break
		sleep 0.05
		kill -CONT "$p"
		paused=$((paused + 1))
	done
	echo "--- the client (pid ${p:-none}) was stopped $paused times for 50 ms"
fi
wait "$cpid"
crc=$?
wait "$spid"
src=$?
ms=$((($(date +%s%N) - start) / 1000000))
echo "--- client (rc $crc, $ms ms)"; cat "$log/client"
echo "--- server (rc $src)"; cat "$log/server"
for h in a b; do
	echo "--- host $h: $(on_host $h "$NN_SR" status | grep 'roce v2' |
		sed 's/ [a-z_-]* 0\b//g')"
done
ok=1
if [ -n "${XFER_CAPTURE:-}" ]; then
	sleep 0.5 # the last ACKs
	kill -INT "$cap"
	wait "$cap"
	/usr/bin/python3 "$here/../wire/check_wire.py" flow 1 "$log/b.pcap" || ok=0
fi
nn_sanitizer_reports || { echo "FAIL: sanitizer reports in the daemons"; ok=0; }
[ $crc = 0 ] || { echo "FAIL: client exited $crc"; ok=0; }
[ "$paused" = "${XFER_PAUSES:-0}" ] ||
	{ echo "FAIL: the client was stopped $paused times, not $XFER_PAUSES (it ended first?)"; ok=0; }
[ $src = 0 ] || { echo "FAIL: server exited $src"; ok=0; }
if [ "$prog" = sr_xfer ] || [ "$prog" = sr_xrc_wire ] || [ "$prog" = sr_ackpp ] ||
	[ "$prog" = sr_blocked ]; then
	grep -q "all checks passed" "$log/client" || { echo "FAIL: client checks"; ok=0; }
	grep -q "all checks passed" "$log/server" || { echo "FAIL: server checks"; ok=0; }
fi
# b_counter NAME: host b's counter NAME from `softrdma status`'s RoCE line
b_counter() { on_b "$NN_SR" status | grep 'roce v2' | tr ' ' '\n' | grep -A1 -x "$1" | tail -1; }
for c in ${XFER_EXPECT_ZERO:-}; do
	v=$(b_counter "$c")
	[ "${v:-x}" = 0 ] || { echo "FAIL: host b's $c is ${v:-absent}, not 0"; ok=0; }
	echo "host b: $c $v"
done
for c in ${XFER_EXPECT:-}; do
	v=$(b_counter "$c")
	[ "${v:-0}" -gt 0 ] 2>/dev/null ||
		{ echo "FAIL: host b's $c is ${v:-absent}: not seen"; ok=0; }
	echo "host b: $c $v"
done
for c in ${XFER_EXPECT_MIN:-}; do
	v=$(b_counter "${c%%=*}")
	[ "${v:-0}" -ge "${c#*=}" ] 2>/dev/null ||
		{ echo "FAIL: host b's ${c%%=*} is ${v:-absent}, fewer than ${c#*=}"; ok=0; }
	echo "host b: ${c%%=*} $v (at least ${c#*=})"
done
if [ -n "${XFER_STEERED:-}" ]; then
	v=$(b_counter rx_by_member)
	echo "host b: rx_by_member $v"
	awk -F, '{ t = 0; for (i = 1; i <= NF; i++) t += $i; exit !(t > 0 && $1 * 100 <= t) }' \
		<<<"$v" || { echo "FAIL: host b's datagrams not steered to its processes' members"; ok=0; }
fi
[ $ok = 1 ] && echo "PASS: $prog $* across two hosts, MTU $mtu (${SOFTRDMA_FAULT:-no faults})"
[ $ok = 1 ]
