#!/usr/bin/python3
"""Independent oracles for src/wire, reading what our tools wrote.

  check_wire.py scapy   LISTING PCAP   roce_gen's pcap, read by scapy
  check_wire.py tshark  LISTING PCAP   the same pcap, decoded by tshark
  check_wire.py capture LISTING PCAP   real datagrams captured by tshark
                                       (wire_send's listing, capture.sh)
  check_wire.py flow    MIN_IDS PCAP   a capture of the engine's traffic
                                       between two hosts: every ICRC agrees
                                       with zlib's and scapy's over the real
                                       headers, and at least MIN_IDS packets
                                       carry a nonzero IPv4 identification
                                       (GSO segments; twohost/wire_flow.sh)

Three ICRCs are compared: ours (in the packets, and in the listing),
scapy's (scapy.contrib.roce computes it for IPv4 only), and a third one
computed here with zlib from the IP and UDP headers actually present in
the file, masked per IBTA Annex A17 (for the capture: the kernel's real
headers, which is the point).  For IPv6 the listing also carries the C
reference implementation's value (tests/wire/icrc_ref.c).
"""
import struct
import subprocess
import sys
import zlib

from scapy.all import IP, IPv6, UDP, Ether, raw, rdpcap
from scapy.contrib.roce import BTH

failures = 0


def fail(msg):
    global failures
    failures += 1
    if failures <= 30:
        print("FAIL:", msg)


def icrc_from_frame(frame):
    """zlib CRC-32 of 8 x 0xFF + masked IP/UDP headers + masked BTH + rest.
    frame: Ethernet frame bytes ending with the 4 ICRC bytes."""
    ip = frame[14:]
    if ip[0] >> 4 == 4:
        ihl = (ip[0] & 15) * 4
        h = bytearray(ip[:ihl])
        h[1] = 0xFF               # TOS
        h[8] = 0xFF               # TTL
        h[10:12] = b"\xff\xff"    # header checksum
    else:
        ihl = 40
        h = bytearray(ip[:40])
        h[0] |= 0x0F              # traffic class, flow label
        h[1:4] = b"\xff\xff\xff"
        h[7] = 0xFF               # hop limit
    udp = bytearray(ip[ihl:ihl + 8])
    udp[6:8] = b"\xff\xff"        # UDP checksum
    rest = bytearray(ip[ihl + 8:-4])
    rest[4] = 0xFF                # BTH: FECN, BECN, reserved
    return zlib.crc32(b"\xff" * 8 + bytes(h) + bytes(udp) + bytes(rest))


def wire_icrc(frame):
    return struct.unpack("<I", frame[-4:])[0]


def scapy_icrc(p):
    """scapy's own ICRC of a parsed IPv4 packet (None for IPv6)."""
    if IP not in p:
        return None
    return struct.unpack("<I", p[BTH].compute_icrc(b""))[0]


def read_listing(path):
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def check_scapy(listing, pcap):
    pkts = rdpcap(pcap)
    if len(pkts) != len(listing):
        fail("%d packets in the pcap, %d in the listing" % (len(pkts), len(listing)))
    n4 = n6 = 0
    opcodes = set()
    for p, row in zip(pkts, listing):
        idx, ver, opcode, dqpn, psn, padcnt, ipid = map(int, row[:7])
        ours, ref = int(row[7], 16), int(row[8], 16)
        frame = raw(p)
        what = "packet %d (IPv%d opcode 0x%02x)" % (idx, ver, opcode)
        if BTH not in p:
            fail("%s: scapy found no BTH" % what)
            continue
        b = p[BTH]
        got = (b.opcode, b.dqpn, b.psn, b.padcount)
        if got != (opcode, dqpn, psn, padcnt):
            fail("%s: scapy reads opcode/dqpn/psn/padcnt %s, wrote %s"
                 % (what, got, (opcode, dqpn, psn, padcnt)))
        if wire_icrc(frame) != ours:
            fail("%s: ICRC in the pcap %08x, tool said %08x" % (what, wire_icrc(frame), ours))
        third = icrc_from_frame(frame)
        if third != ours:
            fail("%s: zlib over the frame's headers %08x, ours %08x" % (what, third, ours))
        if ours != ref:
            fail("%s: ours %08x, C reference %08x" % (what, ours, ref))
        # The frame's checksums, recomputed by scapy.
        q = p.copy()
        if ver == 4:
            n4 += 1
            if IP not in p:
                fail("%s: not IPv4" % what)
                continue
            s = scapy_icrc(p)
            if s != ours:
                fail("%s: scapy's ICRC %08x, ours %08x" % (what, s, ours))
            if p[IP].id != ipid or p[IP].flags != "DF" or p[IP].ttl != 64:
                fail("%s: IPv4 id/flags/ttl %d/%s/%d" % (what, p[IP].id, p[IP].flags, p[IP].ttl))
            del q[IP].chksum
        else:
            n6 += 1
            if IPv6 not in p:
                fail("%s: not IPv6" % what)
                continue
        del q[UDP].chksum
        q = Ether(raw(q))
        if (IP in p and q[IP].chksum != p[IP].chksum) or q[UDP].chksum != p[UDP].chksum:
            fail("%s: IP/UDP checksum differs from scapy's" % what)
        opcodes.add(opcode)
    print("scapy: %d IPv4 packets (ICRC = scapy's = zlib's over the frame), "
          "%d IPv6 (ICRC = C reference = zlib's over the frame), %d opcodes"
          % (n4, n6, len(opcodes)))


# Heuristic sub-dissectors of InfiniBand payloads: they grab random SEND
# payloads and report them malformed (WIRE.md).  Protocol names as tshark
# -G protocols knows them.
HEURISTICS = ["smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser",
              "infiniband_sdp", "fcoib", "infiniband.eoib", "drbd"]


def tshark(*args):
    cmd = ["tshark", "-n"]
    for h in HEURISTICS:
        cmd += ["--disable-protocol", h]
    out = subprocess.run(cmd + list(args), capture_output=True, text=True)
    if out.returncode:
        fail("tshark %s: exit %d: %s" % (" ".join(args), out.returncode, out.stderr.strip()))
    return out.stdout


def check_tshark(listing, pcap):
    fields = ["frame.number", "ip.version", "ipv6.version", "infiniband.bth.opcode",
              "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.padcnt",
              "infiniband.invariant.crc"]
    args = ["-r", pcap, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in fields:
        args += ["-e", f]
    rows = [line.split("|") for line in tshark(*args).splitlines()]
    if len(rows) != len(listing):
        fail("tshark decoded %d packets, the listing has %d" % (len(rows), len(listing)))
    for r, row in zip(rows, listing):
        idx, ver, opcode, dqpn, psn, padcnt = map(int, row[:6])
        ours = int(row[7], 16)
        what = "packet %d (IPv%d opcode 0x%02x)" % (idx, ver, opcode)
        tver = r[1] or r[2]
        try:
            got = (int(tver), int(r[3], 0), int(r[4], 0), int(r[5], 0), int(r[6], 0))
        except ValueError:
            fail("%s: tshark fields %s" % (what, r))
            continue
        if got != (ver, opcode, dqpn, psn, padcnt):
            fail("%s: tshark reads version/opcode/destqp/psn/padcnt %s, wrote %s"
                 % (what, got, (ver, opcode, dqpn, psn, padcnt)))
        # tshark shows the ICRC as the 4 bytes read big-endian
        if r[7] and int(r[7], 0) != struct.unpack(">I", struct.pack("<I", ours))[0]:
            fail("%s: tshark's ICRC field %s, ours %08x" % (what, r[7], ours))
    bad = tshark("-r", pcap, "-Y", "_ws.malformed || _ws.expert.severity >= 0x00800000",
                 "-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message")
    for line in bad.splitlines():
        fail("tshark: malformed or error: frame %s" % line)
    print("tshark: %d packets, opcode/destqp/psn/padcnt/ICRC as written; "
          "%d malformed or in error" % (len(rows), len(bad.splitlines())))


def check_capture(listing, pcap):
    want = {int(r[0]): (int(r[1]), int(r[2], 16)) for r in listing}
    seen = {}
    by_scapy = 0
    for p in rdpcap(pcap):
        if UDP not in p or p[UDP].dport != 4791:
            continue
        frame = raw(p)
        if BTH not in p:
            fail("captured a datagram to port 4791 that scapy does not read as RoCEv2")
            continue
        psn = p[BTH].psn
        if psn not in want:
            fail("captured a datagram with unknown PSN 0x%06x" % psn)
            continue
        ipid, ours = want[psn]
        what = "PSN 0x%06x" % psn
        seen[psn] = seen.get(psn, 0) + 1
        if wire_icrc(frame) != ours:
            fail("%s: ICRC on the wire %08x, tool said %08x" % (what, wire_icrc(frame), ours))
        third = icrc_from_frame(frame)
        if third != ours:
            fail("%s: zlib over the kernel's real headers %08x, our prediction %08x"
                 % (what, third, ours))
        if IP in p:
            if p[IP].id != ipid:
                fail("%s: IPv4 identification %d, predicted %d" % (what, p[IP].id, ipid))
            if "DF" not in str(p[IP].flags) or p[IP].ihl != 5:
                fail("%s: IPv4 flags %s ihl %d" % (what, p[IP].flags, p[IP].ihl))
            s = scapy_icrc(p)
            by_scapy += 1
            if s != ours:
                fail("%s: scapy's ICRC over the captured packet %08x, ours %08x"
                     % (what, s, ours))
    missing = sorted(set(want) - set(seen))
    if missing:
        fail("%d datagrams not captured (first PSN 0x%06x)" % (len(missing), missing[0]))
    dup = [k for k, v in seen.items() if v != 1]
    if dup:
        fail("%d datagrams captured more than once" % len(dup))
    ids = sorted({v[0] for v in want.values()})
    print("capture: %d datagrams (%d IPv4, also checked by scapy), ICRC predicted from "
          "the GIDs = zlib over the kernel's real headers; IPv4 identifications %s"
          % (len(seen), by_scapy, ids if len(ids) < 6 else "%d..%d" % (ids[0], ids[-1])))


def check_flow(min_ids, pcap):
    n = n4 = nonzero = 0
    for p in rdpcap(pcap):
        if UDP not in p or p[UDP].dport != 4791:
            continue
        frame = raw(p)
        if BTH not in p:
            fail("a datagram to port 4791 that scapy does not read as RoCEv2")
            continue
        n += 1
        what = "frame %d (opcode 0x%02x PSN 0x%06x)" % (n, p[BTH].opcode, p[BTH].psn)
        third = icrc_from_frame(frame)
        if third != wire_icrc(frame):
            fail("%s: ICRC on the wire %08x, zlib over the real headers %08x"
                 % (what, wire_icrc(frame), third))
        if IP in p:
            n4 += 1
            nonzero += p[IP].id != 0
            s = scapy_icrc(p)
            if s != wire_icrc(frame):
                fail("%s: scapy's ICRC %08x, on the wire %08x" % (what, s, wire_icrc(frame)))
    if n == 0:
        fail("no RoCEv2 datagram in the capture")
    if nonzero < min_ids:
        fail("%d packets with a nonzero IPv4 identification, expected at least %d"
             % (nonzero, min_ids))
    print("flow: %d RoCEv2 datagrams (%d IPv4, %d of them GSO segments with a nonzero "
          "identification): every ICRC = zlib's over the real headers = scapy's"
          % (n, n4, nonzero))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("scapy", "tshark", "capture", "flow"):
        print(__doc__)
        return 2
    if sys.argv[1] == "flow":
        check_flow(int(sys.argv[2]), sys.argv[3])
    else:
        listing = read_listing(sys.argv[2])
        {"scapy": check_scapy, "tshark": check_tshark, "capture": check_capture}[sys.argv[1]](
            listing, sys.argv[3])
    if failures:
        print("%d failures" % failures)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
