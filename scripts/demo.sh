#!/bin/bash
# The main job of `make demo`: show the softrdma device as an unmodified
# rdma-core program sees it, then move data between two processes with
# Debian's own ibv_rc_pingpong.  Uses a private daemon (its own socket
# name) and stops it afterwards.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
export SOFTRDMA_SOCKET="softrdma-demo-$$"
"$B/bin/softrdmad" --idle 0 & DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null || true' EXIT
SR="$B/bin/softrdma"
source "$(dirname "$0")/../tests/gid_index.sh"
echo "== softrdma run -- ibv_devinfo -v"
"$SR" run -- ibv_devinfo -v
echo
echo "== ibv_rc_pingpong, server and client as two processes"
G=$("$SR" run -- ibv_devinfo -v 2>/dev/null | gid_from_devinfo 127.0.0.1) # -g: 127.0.0.1's GID
"$SR" run -- ibv_rc_pingpong -g "$G" -p 18777 -s 65536 -n 2000 > /tmp/demo-srv.$$ 2>&1 & SPID=$!
for _ in $(seq 50); do ss -ltn | grep -q ':18777 ' && break; sleep 0.1; done
"$SR" run -- ibv_rc_pingpong -g "$G" -p 18777 -s 65536 -n 2000 127.0.0.1
wait $SPID
echo "-- server:"; cat /tmp/demo-srv.$$; rm -f /tmp/demo-srv.$$
echo
echo "== softrdma status"
"$SR" status
echo
echo "== Two hosts: RoCEv2 between two network namespaces"
if ! command -v tshark >/dev/null; then
	echo "(skipped: decoding the packets needs tshark)"
	exit 0
fi
# Host a and host b, joined by a veth at MTU 1500, one softrdmad each, made
# by scripts/two-hosts.sh in a user namespace of our own (no root needed);
# a capture on b's side of the veth while Debian's ibv_rc_pingpong runs
# across, then tshark decodes what went over the wire.
set +e
trap - EXIT
kill $DPID 2>/dev/null
wait $DPID 2>/dev/null
unset SOFTRDMA_SOCKET
cap=$(mktemp -d)
chmod 777 "$cap" # the capture is written by the namespace's root: our uid, or nobody's when we are root
trap 'rm -rf "$cap"' EXIT
export SR="$SR" cap
# as root, the hosts are nobody's: the demo needs no privilege at all
as=()
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
"${as[@]}" "$(dirname "$0")/two-hosts.sh" -b "$B" -m 1500 -- bash -c '
echo "host a: $ADDR_A (GID index $GID_A)   host b: $ADDR_B (GID index $GID_B)   (we are $(id -un) here, uid $(awk "{print \$2}" /proc/self/uid_map) outside)"
# the engine hands runs of packets to the kernel as one UDP GSO send; the
# veth would show tshark the unsplit run, so both sides split in software
on_a ethtool -K srveth tx-udp-segmentation off >/dev/null 2>&1
on_b ethtool -K srveth tx-udp-segmentation off >/dev/null 2>&1
HOME=$cap on_b tshark -q -i srveth -f "udp port 4791" -c 40 -w "$cap/roce.pcap" >"$cap/tshark.log" 2>&1 &
for _ in $(seq 100); do grep -q "Capturing on" "$cap/tshark.log" 2>/dev/null && break; sleep 0.05; done
on_a ibv_rc_pingpong -g "$GID_A" -p 18778 -s 4096 -n 1000 >"$cap/server" 2>&1 &
spid=$!
for _ in $(seq 100); do ss -ltn | grep -q ":18778 " && break; sleep 0.05; done
on_b ibv_rc_pingpong -g "$GID_B" -p 18778 -s 4096 -n 1000 "$ADDR_A"
wait $spid
echo "-- server:"; cat "$cap/server"
sleep 0.5
echo
echo "-- the first packets on the wire, decoded by tshark (4 KiB messages at a 1024-byte path MTU: FIRST, MIDDLE, LAST, then the ACK)"
HOME=$cap tshark -r "$cap/roce.pcap" -c 12 -T fields -E header=y -e ip.src -e ip.dst -e udp.srcport \
	-e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.bth.a \
	-e infiniband.aeth.syndrome -e infiniband.invariant.crc 2>/dev/null | column -t
echo
echo "-- host b'"'"'s daemon:"
on_b "$SR" status | head -20
wait
'
