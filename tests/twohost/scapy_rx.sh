#!/bin/bash
# The receive path against an independent packet builder: scapy (Debian's
# python3-scapy, scapy.contrib.roce computes the ICRC itself) builds RoCEv2
# packets in host b, a plain UDP socket sends them to host a's daemon, and
# a's `softrdma status` counters must show them checked and classified:
# a packet with scapy's ICRC for a QPN that does not exist is dropped as
# "qpn" (so its ICRC passed), the same packet with one payload bit flipped
# as "icrc", one cut short as "short", an opcode no transport defines as
# "opcode".  XRC (annex A14) the same way: a SEND_ONLY with its XRCETH is
# "qpn", one too short to hold the XRCETH "short", 0xb5 (no XRC opcode)
# "opcode".  A CNP (0x81, annex A17.9: BECN, 16 reserved bytes) for no QP is
# "qpn", one without its reserved bytes "short".
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
/usr/bin/python3 -c "import scapy.contrib.roce" 2>/dev/null || nn_skip "no python3-scapy"
nn_setup "$1" 1500 || exit 1
tmp=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$tmp"' EXIT
cat >"$tmp/send.py" <<'PY'
import socket, sys
from scapy.all import IP, UDP, Raw, bytes_encode
from scapy.contrib.roce import BTH
src, dst = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF, id 0
s.bind((src, 0))
sport = s.getsockname()[1]
def roce(opcode, payload, psn=7, **bth):
    p = IP(src=src, dst=dst, flags="DF", id=0, ttl=64) / UDP(sport=sport, dport=4791) / \
        BTH(opcode=opcode, pkey=0xffff, dqpn=0xabcde0, psn=psn, **bth) / Raw(payload)
    p = IP(bytes(p))  # scapy fills in lengths and the ICRC
    return bytes(p[UDP].payload)
good = roce(0x04, b"x" * 64)      # RC SEND_ONLY
bad = bytearray(good); bad[20] ^= 1
odd = roce(0x1f, b"")             # no such RC opcode
xrc = roce(0xa4, bytes.fromhex("00000005") + b"y" * 32)  # XRC SEND_ONLY: XRCETH, payload
xrc_short = roce(0xa4, b"")       # BTH and ICRC: no room for the XRCETH
xrc_odd = roce(0xb5, bytes.fromhex("00000005"))  # no such XRC opcode
cnp = roce(0x81, bytes(16), becn=1, psn=0)
cnp_short = roce(0x81, b"", becn=1, psn=0)
pkts = (good, bytes(bad), good[:10], odd, xrc, xrc_short, xrc_odd, cnp, cnp_short)
for b in pkts:
    s.sendto(b, (dst, 4791))
print("sent", len(pkts), "packets from port", sport, "ICRC", good[-4:].hex())
PY
drops() { on_a "$NN_SR" status | tr ' ' '\n' | awk -v k="drop_$1" 'p { print; exit } $0 == k { p = 1 }'; }
q0=$(drops qpn) i0=$(drops icrc) s0=$(drops short) o0=$(drops opcode)
on_b /usr/bin/python3 "$tmp/send.py" "$(addr_b)" "$(addr_a)" || { echo "FAIL: scapy sender"; exit 1; }
sleep 0.5
on_a "$NN_SR" status | grep 'roce v2'
ok=1
check() { if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: got $2, want $3"; ok=0; fi; }
check "scapy's ICRC accepted, unknown QPN dropped as qpn (RC, XRC, CNP)" $(($(drops qpn) - q0)) 3
check "one bit flipped: dropped as icrc" $(($(drops icrc) - i0)) 1
check "10 bytes, XRC without its XRCETH, a CNP without its reserved bytes: dropped as short" $(($(drops short) - s0)) 3
check "opcodes 0x1f and 0xb5: dropped as opcode" $(($(drops opcode) - o0)) 2
[ $ok = 1 ] && echo PASS
[ $ok = 1 ]
