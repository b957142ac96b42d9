#!/bin/bash
# wire_capture: the key assumption of sending RoCEv2 through kernel UDP
# sockets, checked on this kernel.  wire_send puts into each datagram the
# ICRC that sr_icrc() predicts from the GIDs alone, tshark captures what
# really left, and check_wire.py recomputes the ICRC (zlib, and scapy for
# IPv4) over the IP and UDP headers the kernel actually built.
#   1. loopback, IPv4 and IPv6: unconnected socket with IP_PMTUDISC_DO,
#      one sendto per datagram: identification 0;
#   2. a veth pair to a second namespace with UDP segmentation done in
#      software (ethtool -K tx-udp-segmentation off, as on a NIC without
#      USO): one UDP_SEGMENT sendmsg of 8 segments leaves as 8 datagrams
#      with identifications 0..7, which sr_icrc_id(k) predicts; IPv6 too.
# Runs in private network namespaces (unshare -n), so it sends nothing
# anywhere else.  Needs root, unshare, tshark and python3-scapy: otherwise
# skipped (77).
#   capture.sh BIN_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
[ $# -ge 1 ] || { echo "usage: $0 BIN_DIR" >&2; exit 2; }
bin=$(cd "$1" && pwd -P)
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

if [ "${2:-}" != --inside ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: capturing needs root"; exit 77; }
	command -v tshark >/dev/null || { echo "SKIP: tshark is not installed"; exit 77; }
	$PY -c 'import scapy.contrib.roce' 2>/dev/null ||
		{ echo "SKIP: python3-scapy is not installed"; exit 77; }
	unshare -n true 2>/dev/null || { echo "SKIP: unshare -n is not permitted"; exit 77; }
	exec unshare -n "$0" "$bin" --inside
fi

# Inside our own network namespace from here.
tmp=$(mktemp -d)
peer=""
tsp=""
cleanup() {
	[ -n "$tsp" ] && kill "$tsp" 2>/dev/null
	[ -n "$peer" ] && kill "$peer" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for f in "$tmp"/*.txt "$tmp"/*.err; do [ -s "$f" ] && { echo "--- $f"; cat "$f"; }; done
	exit 1
}

# capture NAME IFACE COUNT: starts tshark, returns once it is capturing.
capture() {
	tshark -i "$2" -f "udp dst port 4791" -c "$3" -a duration:30 -F pcap \
		-w "$tmp/$1.pcap" 2>"$tmp/$1.err" &
	tsp=$!
	# "Capturing on" comes before the capture is live; "Capture started"
	# (tshark 4.0's log) after.  Without the latter, give it a second.
	for _ in $(seq 100); do
		grep -q "Capture started" "$tmp/$1.err" && return 0
		kill -0 "$tsp" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "Capturing on" "$tmp/$1.err" && { sleep 1; return 0; }
	fail "tshark did not start capturing on $2"
}

# finish NAME: waits for tshark (it stops after COUNT packets), checks.
finish() {
	wait "$tsp" || fail "tshark on $1 exited with an error"
	tsp=""
	$PY "$here/check_wire.py" capture "$tmp/$1.txt" "$tmp/$1.pcap" || fail "capture $1"
}

ip link set lo up || fail "lo up"

echo "# 1. loopback: 20 IPv4 + 20 IPv6 datagrams, one sendto each"
capture lo lo 40
"$bin/wire_send" 127.0.0.1 127.0.0.1 plain 20 >"$tmp/lo.txt" || fail "wire_send IPv4"
"$bin/wire_send" ::1 ::1 plain 20 >>"$tmp/lo.txt" || fail "wire_send IPv6"
finish lo

echo "# 2. veth, GSO segmented in software: 8 + 8 segments, and 5 plain datagrams"
if ! command -v ethtool >/dev/null; then
	echo "SKIP part 2: ethtool is not installed"
	exit 0
fi
unshare -n sleep 120 &
peer=$!
sleep 0.2
ip link add sr_va type veth peer name sr_vb || fail "veth"
ip link set sr_vb netns "$peer" || fail "moving the veth end"
ip addr add 10.77.0.1/24 dev sr_va
ip -6 addr add fd77::1/64 dev sr_va nodad
ip link set sr_va up
nsenter -t "$peer" -n sh -c 'ip link set lo up && ip addr add 10.77.0.2/24 dev sr_vb &&
	ip -6 addr add fd77::2/64 dev sr_vb nodad && ip link set sr_vb up' || fail "peer set-up"
ethtool -K sr_va tx-udp-segmentation off >/dev/null 2>&1 ||
	fail "ethtool -K sr_va tx-udp-segmentation off"
capture veth sr_va 21
"$bin/wire_send" 10.77.0.1 10.77.0.2 gso 8 >"$tmp/veth.txt" || fail "wire_send GSO IPv4"
"$bin/wire_send" fd77::1 fd77::2 gso 8 >>"$tmp/veth.txt" || fail "wire_send GSO IPv6"
"$bin/wire_send" 10.77.0.1 10.77.0.2 plain 5 >>"$tmp/veth.txt" || fail "wire_send IPv4"
finish veth
echo "PASS"
