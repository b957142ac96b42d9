#!/usr/bin/python3
"""pyverbs' rdma_cm binding (pyverbs.cmid) over softrdma (issue 13): one
side of a two-process test.  pyverbs_cm.py server|client ADDR PORT

The synchronous CMID API as a script uses it: AddrInfo (rdma_getaddrinfo),
CMID (rdma_create_ep with a QP), listen/get_request/accept on the server,
connect on the client, reg_msgs (rdma_reg_msgs), post_recv/post_send and
get_recv_comp/get_send_comp, a ping and a pong whose bytes are checked,
then disconnect.  Exits 0 only if every check passed.
"""
import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import CMID, AddrInfo
from pyverbs.qp import QPCap, QPInitAttr

role, addr, port = sys.argv[1], sys.argv[2], sys.argv[3]
SIZE = 1024
failed = 0


def check(name, ok, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + name + (f" ({detail})" if detail else ""), flush=True)
    if not ok:
        failed += 1


def init_attr():
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    return QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap)


ping = bytes((i * 13 + 1) & 0xFF for i in range(SIZE))
pong = bytes((i * 5 + 9) & 0xFF for i in range(SIZE))

if role == "server":
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP,
                  flags=ce.RAI_PASSIVE)
    listener = CMID(creator=ai, qp_init_attr=init_attr())
    listener.listen()
    print(f"listening on {addr}:{port}", flush=True)
    conn = listener.get_request()
    check("get_request", conn is not None, f"device {conn.dev_name}")
    mr, out = conn.reg_msgs(SIZE), conn.reg_msgs(SIZE)
    conn.post_recv(mr, SIZE)
    conn.accept()
    check("accept", True)
    wc = conn.get_recv_comp()
    got = mr.read(SIZE, 0)
    check("ping received", wc.status == e.IBV_WC_SUCCESS and wc.byte_len == SIZE and got == ping,
          f"{wc.byte_len} bytes {'match' if got == ping else 'differ'}")
    out.write(pong, SIZE, 0)
    conn.post_send(out, 0, SIZE)
    wc = conn.get_send_comp()
    check("pong sent", wc.status == e.IBV_WC_SUCCESS)
    conn.disconnect()
    conn.close()
    listener.close()
else:
    ai = AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP)
    cid = CMID(creator=ai, qp_init_attr=init_attr())
    mr, out = cid.reg_msgs(SIZE), cid.reg_msgs(SIZE)
    cid.post_recv(mr, SIZE)
    cid.connect()
    check("connect", True, f"device {cid.dev_name}, qpn {cid.qpn}")
    out.write(ping, SIZE, 0)
    cid.post_send(out, 0, SIZE)
    wc = cid.get_send_comp()
    check("ping sent", wc.status == e.IBV_WC_SUCCESS)
    wc = cid.get_recv_comp()
    got = mr.read(SIZE, 0)
    check("pong received", wc.status == e.IBV_WC_SUCCESS and wc.byte_len == SIZE and got == pong,
          f"{wc.byte_len} bytes {'match' if got == pong else 'differ'}")
    cid.disconnect()
    cid.close()

print(("PASS" if not failed else f"FAIL: {failed} check(s)") + f" ({role})", flush=True)
sys.exit(1 if failed else 0)
