#!/usr/bin/python3
"""pyverbs over softrdma, as a scripting user drives it (issue 13): one side
of a two-process test.  pyverbs_verbs.py server|client PORT [ADDR]

Both sides: the device list (soft0), Context, query_device, query_port,
the GID of ADDR (127.0.0.1 by default), PD, MR, CQ.  They exchange their
QP numbers, GIDs and memory keys as JSON over a TCP connection on PORT
(the server listens), then:
  RC: the client SENDs a message, the server checks its bytes and length;
      the client RDMA WRITEs a pattern into the server's MR and tells it
      with a SEND_WITH_IMM; the server checks the pattern and the immediate.
  UD: the client sends a datagram through an AH to the server's UD QP; the
      server checks payload, byte_len (40-byte GRH area + payload), src_qp.
Prints a line per check; exits 0 only if every one passed.
"""
import ipaddress
import json
import socket
import sys
import time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AH, GID, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

role, port = sys.argv[1], int(sys.argv[2])
addr = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
failed = 0


def check(name, ok, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + name + (f" ({detail})" if detail else ""), flush=True)
    if not ok:
        failed += 1


def poll(cq, what, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
    raise TimeoutError(f"no completion for {what} in {timeout} s")


# ---- the device ----
names = [dev.name.decode() for dev in d.get_device_list()]
check("get_device_list has soft0", "soft0" in names, f"devices {names}")
ctx = d.Context(name="soft0")
da = ctx.query_device()
check("query_device", da.phys_port_cnt == 1 and da.max_qp > 0 and da.max_mr_size > 0,
      f"max_qp {da.max_qp}, max_cqe {da.max_cqe}, max_mr_size {da.max_mr_size}")
pa = ctx.query_port(1)
check("query_port 1 ACTIVE, Ethernet",
      pa.state == e.IBV_PORT_ACTIVE and pa.link_layer == e.IBV_LINK_LAYER_ETHERNET,
      f"state {pa.state}, link_layer {pa.link_layer}, active_mtu {pa.active_mtu}")
want = ipaddress.ip_address(addr)
if want.version == 4:
    want = ipaddress.IPv6Address("::ffff:" + addr)
gid_index = -1
for i in range(pa.gid_tbl_len):
    try:
        g = ctx.query_gid(1, i)
    except Exception:
        continue
    if ipaddress.ip_address(str(g.gid)) == want:
        gid_index = i
        break
check(f"a GID for {addr}", gid_index >= 0, f"index {gid_index}")
if gid_index < 0:
    sys.exit(1)
gid = str(ctx.query_gid(1, gid_index).gid)

pd = PD(ctx)
access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
mr = MR(pd, 8192, access)
cq = CQ(ctx, 64, None, None, 0)
cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
rc = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
ud = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap))
QKEY = 0x11111111
ud_attr = QPAttr()
ud_attr.qkey = QKEY
ud.to_rts(ud_attr)
check("UD QP to RTS", ud.qp_state == e.IBV_QPS_RTS)

# ---- the exchange ----
mine = {"rc": rc.qp_num, "ud": ud.qp_num, "gid": gid, "addr": mr.buf, "rkey": mr.rkey}
if role == "server":
    ls = socket.create_server(("127.0.0.1", port))
    conn, _ = ls.accept()
else:
    for _ in range(200):
        try:
            conn = socket.create_connection(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
# a reader and a writer of their own: one text file for both drops what it
# read ahead when it is next written to (TextIOWrapper resets its decoder),
# which lost the peer's "ready" whenever it came with the JSON line
rf, wf = conn.makefile("r"), conn.makefile("w")
wf.write(json.dumps(mine) + "\n")
wf.flush()
peer = json.loads(rf.readline())


def sync(tag):
    wf.write(tag + "\n")
    wf.flush()
    got = rf.readline().strip()
    assert got == tag, (got, tag)


def ah_attr(dgid):
    gr = GlobalRoute(dgid=GID(dgid), sgid_index=gid_index)
    return AHAttr(gr=gr, is_global=1, port_num=1)


# ---- RC to RTS ----
attr = QPAttr()
attr.qp_access_flags = access
attr.path_mtu = pa.active_mtu
attr.dest_qp_num = peer["rc"]
attr.rq_psn = 0
attr.sq_psn = 0
attr.max_dest_rd_atomic = 1
attr.max_rd_atomic = 1
attr.min_rnr_timer = 12
attr.timeout = 14
attr.retry_cnt = 7
attr.rnr_retry = 7
attr.ah_attr = ah_attr(peer["gid"])
rc.to_rts(attr)
check("RC QP to RTS", rc.qp_state == e.IBV_QPS_RTS, f"qpn {rc.qp_num} -> {peer['rc']}")

msg = b"hello from a pyverbs client over softrdma"
pattern = bytes((i * 7 + 3) & 0xFF for i in range(1024))
if role == "server":
    # a receive for the SEND, one for the SEND_WITH_IMM, one for the UD datagram
    rc.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf, 512, mr.lkey)]))
    rc.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(mr.buf + 512, 64, mr.lkey)]))
    ud.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(mr.buf + 4096, 40 + 256, mr.lkey)]))
    sync("ready")
    wc = poll(cq, "SEND")
    got = mr.read(wc.byte_len, 0)
    check("RC SEND received", wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_RECV
          and wc.wr_id == 1 and got == msg, f"{wc.byte_len} bytes: {got[:24]!r}...")
    wc = poll(cq, "SEND_WITH_IMM")
    got = mr.read(len(pattern), 2048)
    check("RC RDMA WRITE placed, SEND_WITH_IMM received",
          wc.status == e.IBV_WC_SUCCESS and wc.wr_id == 2 and wc.byte_len == 4 and
          wc.wc_flags & e.IBV_WC_WITH_IMM and socket.ntohl(wc.imm_data) == 0x5EB0 and got == pattern,
          f"imm {socket.ntohl(wc.imm_data):#x}, {len(pattern)} bytes at offset 2048 "
          f"{'match' if got == pattern else 'differ'}")
    wc = poll(cq, "UD datagram")
    payload = mr.read(wc.byte_len - 40, 4096 + 40)
    check("UD datagram received", wc.status == e.IBV_WC_SUCCESS and wc.src_qp == peer["ud"]
          and payload == msg[:32], f"byte_len {wc.byte_len}, src_qp {wc.src_qp}")
    sync("done")
else:
    sync("ready")
    mr.write(msg, len(msg), 0)
    rc.post_send(SendWR(wr_id=11, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr.buf, len(msg), mr.lkey)]))
    wc = poll(cq, "SEND completion")
    check("RC SEND completed", wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_SEND
          and wc.wr_id == 11)
    mr.write(pattern, len(pattern), 1024)
    w = SendWR(wr_id=12, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
               sg=[SGE(mr.buf + 1024, len(pattern), mr.lkey)])
    w.set_wr_rdma(peer["rkey"], peer["addr"] + 2048)
    rc.post_send(w)
    wc = poll(cq, "WRITE completion")
    check("RC RDMA WRITE completed", wc.status == e.IBV_WC_SUCCESS and
          wc.opcode == e.IBV_WC_RDMA_WRITE and wc.wr_id == 12)
    w = SendWR(wr_id=13, opcode=e.IBV_WR_SEND_WITH_IMM, num_sge=1,
               sg=[SGE(mr.buf, 4, mr.lkey)], imm_data=socket.htonl(0x5EB0))
    rc.post_send(w)
    wc = poll(cq, "SEND_WITH_IMM completion")
    check("RC SEND_WITH_IMM completed", wc.status == e.IBV_WC_SUCCESS and wc.wr_id == 13)
    ah = AH(pd, attr=ah_attr(peer["gid"]))
    w = SendWR(wr_id=14, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 32, mr.lkey)])
    w.set_wr_ud(ah, peer["ud"], QKEY)
    ud.post_send(w)
    wc = poll(cq, "UD send completion")
    check("UD datagram sent through an AH", wc.status == e.IBV_WC_SUCCESS and wc.wr_id == 14)
    sync("done")

print(("PASS" if not failed else f"FAIL: {failed} check(s)") + f" ({role})", flush=True)
sys.exit(1 if failed else 0)
