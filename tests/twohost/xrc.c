/*
 * sr_xrc_wire: XRC (IBTA vol. 1 annex A14) between two hosts, what
 * ibv_xsrq_pingpong does not exercise: the server (host a) has the XRC
 * domain, its SRQs and XRC_RECV QPs; the client (host b) an XRC_SEND QP per
 * case, so every request crosses the RoCEv2 engines with an XRCETH.
 *
 *   ops         a multi-packet SEND to the domain's SRQ (the receive is on
 *               the SRQ's CQ, naming the XRC_RECV QP); a SEND with
 *               immediate before any receive is posted (RNR NAK, retried
 *               until the server posts one); RDMA WRITEs (one with
 *               immediate, consuming an SRQ receive), READ back, 10
 *               fetch-and-adds and a compare-and-swap on a counter of the
 *               SRQ's PD: every byte and value checked
 *   srq_basic   a SEND naming a basic SRQ's number: REM_INV_REQ_ERR
 *   srq_domain  a multi-packet SEND naming an XRC SRQ of another domain:
 *               REM_INV_REQ_ERR
 *   write_basic an RDMA WRITE naming the basic SRQ: REM_INV_REQ_ERR
 *   bad_rkey    an RDMA WRITE with a key that is no key: REM_ACCESS_ERR
 *
 * In the error cases the client's QP and the server's XRC_RECV QP end in
 * ERR and no SRQ receive is consumed, as on one host (test_xrc.c).  Each
 * side prints "all checks passed" and exits 0 only if everything held.
 *
 *   server: sr_xrc_wire -g GID_INDEX -p PORT
 *   client: sr_xrc_wire -g GID_INDEX -p PORT SERVER_ADDR
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "side.h"

#define BUF_SIZE (1u << 20)
#define WR_LEN	 200000u	   /* the RDMA WRITE / READ range */
#define CNT_OFF	 (BUF_SIZE - 4096) /* the atomic counter */
#define RCV_OFF	 (BUF_SIZE / 2)	   /* the server's receive buffers */
#define RCV_SIZE 16384u

struct rec {
	uint32_t qpn, srqn, srqn_other, srqn_basic, rkey, psn;
	uint64_t addr;
	uint8_t gid[16];
};

static struct {
	struct ibv_context *dev;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_xrcd *x, *x2;
	struct ibv_srq *srq, *srq2, *basic;
	struct ibv_mr *mr;
	char *buf;
	int gidx, sock, mtu;
	union ibv_gid gid;
	bool server;
} g;

static void sync_point(void)
{
	char a = 's', b;

	xchg(g.sock, &a, &b, 1);
}

/* 0 or 1 from each side: the peer's checks of a case held */
static void verdict(bool ok, const char *what)
{
	char a = ok, b;

	xchg(g.sock, &a, &b, 1);
	if (!ok || !b)
		DIE("%s: %s failed", what, ok ? "the peer's checks" : "checks");
	printf("ok %s\n", what);
	fflush(stdout);
}

static uint8_t pat(uint32_t s, uint32_t i)
{
	uint32_t z = (s + 1) * 2654435761u ^ (i >> 2) * 40503u;

	z ^= z >> 15;
	return (uint8_t)(z >> ((i & 3) * 8));
}

static void fill(char *p, uint32_t s, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (char)pat(s, i);
}

static bool same(const char *p, uint32_t s, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if ((uint8_t)p[i] != pat(s, i))
			return false;
	return true;
}

static struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	time_t start = time(NULL);
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
		sched_yield(); /* two cores: leave room for the engines */
		if (time(NULL) - start > 60)
			DIE("no completion for 60 s");
	}
	if (n < 0)
		DIE("ibv_poll_cq failed");
	return wc;
}

static struct ibv_srq *xsrq(struct ibv_xrcd *x)
{
	struct ibv_srq_init_attr_ex a = {0};

	a.attr.max_wr = 16;
	a.attr.max_sge = 1;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		      IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = IBV_SRQT_XRC;
	a.xrcd = x;
	a.cq = g.cq;
	a.pd = g.pd;
	return ibv_create_srq_ex(g.dev, &a);
}

static struct ibv_xrcd *xrcd(void)
{
	struct ibv_xrcd_init_attr a = {
	    .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1, .oflags = 0};

	return ibv_open_xrcd(g.dev, &a);
}

static void setup(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;

	if (!l || !l[0] || !(g.dev = ibv_open_device(l[0])))
		DIE("no RDMA device");
	ibv_free_device_list(l);
	if (ibv_query_gid(g.dev, 1, g.gidx, &g.gid) || ibv_query_port(g.dev, 1, &pa))
		DIE("query port/GID %d", g.gidx);
	g.mtu = pa.active_mtu;
	g.pd = ibv_alloc_pd(g.dev);
	g.cq = ibv_create_cq(g.dev, 64, NULL, NULL, 0);
	g.buf = aligned_alloc(4096, BUF_SIZE);
	if (!g.pd || !g.cq || !g.buf)
		DIE("pd/cq/buffer");
	memset(g.buf, 0, BUF_SIZE);
	g.mr = ibv_reg_mr(g.pd, g.buf, BUF_SIZE,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!g.mr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	if (!g.server)
		return;
	struct ibv_srq_init_attr basic = {.attr = {.max_wr = 4, .max_sge = 1}};

	g.x = xrcd();
	g.x2 = xrcd();
	if (!g.x || !g.x2)
		DIE("ibv_open_xrcd: %s", strerror(errno));
	g.srq = xsrq(g.x);
	g.srq2 = xsrq(g.x2);
	g.basic = ibv_create_srq(g.pd, &basic);
	if (!g.srq || !g.srq2 || !g.basic)
		DIE("SRQs: %s", strerror(errno));
}

static struct ibv_qp *qp_new(void)
{
	struct ibv_qp_init_attr_ex a = {0};

	if (g.server) {
		a.qp_type = IBV_QPT_XRC_RECV;
		a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		a.xrcd = g.x;
	} else {
		a.qp_type = IBV_QPT_XRC_SEND;
		a.send_cq = g.cq;
		a.cap.max_send_wr = 32;
		a.cap.max_send_sge = 1;
		a.comp_mask = IBV_QP_INIT_ATTR_PD;
		a.pd = g.pd;
	}
	return ibv_create_qp_ex(g.dev, &a);
}

/* INIT, RTR (an AV with the peer's GID), RTS: ibv_xsrq_pingpong's masks */
static void connect_qp(struct ibv_qp *qp, const struct rec *me, const struct rec *peer)
{
	bool tgt = g.server;
	struct ibv_qp_attr a = {0};

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
	    tgt ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = peer->qpn;
	a.path_mtu = g.mtu;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12; /* 0.64 ms */
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)g.gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN |
			      (tgt ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0)))
		DIE("RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 16;
	if (ibv_modify_qp(
		qp, &a,
		IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
		    (tgt ? 0 : IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)))
		DIE("RTS: %s", strerror(errno));
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		DIE("ibv_query_qp: %s", strerror(errno));
	return a.qp_state;
}

/* A fresh pair for a case: our QP connected to the peer's; its record. */
static struct ibv_qp *pair(struct rec *peer)
{
	struct ibv_qp *qp = qp_new();
	struct rec me = {0};

	if (!qp)
		DIE("create QP: %s", strerror(errno));
	me.qpn = qp->qp_num;
	me.psn = (uint32_t)rand() & 0xffffff;
	me.rkey = g.mr->rkey;
	me.addr = (uintptr_t)g.buf;
	memcpy(me.gid, g.gid.raw, 16);
	if (g.server) {
		ibv_get_srq_num(g.srq, &me.srqn);
		ibv_get_srq_num(g.srq2, &me.srqn_other);
		ibv_get_srq_num(g.basic, &me.srqn_basic);
	}
	xchg(g.sock, &me, peer, sizeof(me));
	connect_qp(qp, &me, peer);
	sync_point(); /* both ready */
	return qp;
}

/* ---- client ---- */

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t srqn, uint64_t off,
		 uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sg = {(uintptr_t)g.buf + off, len, g.mr->lkey};
	struct ibv_send_wr wr = {0}, *bad;

	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = srqn;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl((uint32_t)wr_id);
	if (ibv_post_send(qp, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
}

static void atomic(struct ibv_qp *qp, enum ibv_wr_opcode op, const struct rec *p, uint64_t add,
		   uint64_t swap, uint64_t off)
{
	struct ibv_sge sg = {(uintptr_t)g.buf + off, 8, g.mr->lkey};
	struct ibv_send_wr wr = {0}, *bad;

	wr.opcode = op;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = p->srqn;
	wr.wr.atomic.remote_addr = p->addr + CNT_OFF;
	wr.wr.atomic.rkey = p->rkey;
	wr.wr.atomic.compare_add = add;
	wr.wr.atomic.swap = swap;
	if (ibv_post_send(qp, &wr, &bad))
		DIE("ibv_post_send (atomic): %s", strerror(errno));
}

static bool want(struct ibv_wc wc, enum ibv_wc_status st, const char *what)
{
	if (wc.status == st)
		return true;
	fprintf(stderr, "%s: %s, expected %s\n", what, ibv_wc_status_str(wc.status),
		ibv_wc_status_str(st));
	return false;
}

static void client_ops(void)
{
	struct rec p;
	struct ibv_qp *qp = pair(&p);
	bool ok = true;
	uint64_t v[10];

	/* SEND of 10000 bytes (several packets at any MTU of ours) */
	fill(g.buf, 1, 10000);
	post(qp, IBV_WR_SEND, p.srqn, 0, 10000, 0, 0, 1);
	ok &= want(wait_wc(g.cq), IBV_WC_SUCCESS, "send");
	sync_point();
	/* before the server posts its receive: RNR NAKs until it does */
	fill(g.buf, 2, 100);
	post(qp, IBV_WR_SEND_WITH_IMM, p.srqn, 0, 100, 0, 0, 0x5eed);
	sync_point(); /* the server waits a while, then posts */
	ok &= want(wait_wc(g.cq), IBV_WC_SUCCESS, "send after RNR");
	/* WRITEs, the last with immediate, then READ back */
	fill(g.buf, 3, WR_LEN);
	post(qp, IBV_WR_RDMA_WRITE, p.srqn, 0, WR_LEN - 5000, p.addr, p.rkey, 2);
	post(qp, IBV_WR_RDMA_WRITE_WITH_IMM, p.srqn, WR_LEN - 5000, 5000, p.addr + WR_LEN - 5000,
	     p.rkey, 3);
	ok &= want(wait_wc(g.cq), IBV_WC_SUCCESS, "write");
	ok &= want(wait_wc(g.cq), IBV_WC_SUCCESS, "write with immediate");
	memset(g.buf, 0, WR_LEN);
	post(qp, IBV_WR_RDMA_READ, p.srqn, 0, WR_LEN, p.addr, p.rkey, 4);
	ok &= want(wait_wc(g.cq), IBV_WC_SUCCESS, "read");
	if (!same(g.buf, 3, WR_LEN)) {
		fprintf(stderr, "read: the bytes differ from those written\n");
		ok = false;
	}
	/* fetch-and-add x 10 (each returns the count before it), CAS 10 -> 100 */
	for (int i = 0; i < 10; i++)
		atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, &p, 1, 0, WR_LEN + 8 * (uint64_t)i);
	for (int i = 0; i < 10; i++)
		ok &= want(wait_wc(g.cq), IBV_WC_SUCCESS, "fetch-and-add");
	memcpy(v, g.buf + WR_LEN, sizeof(v));
	for (int i = 0; i < 10; i++)
		if (v[i] != (uint64_t)i) {
			fprintf(stderr, "fetch-and-add %d returned %" PRIu64 "\n", i, v[i]);
			ok = false;
		}
	atomic(qp, IBV_WR_ATOMIC_CMP_AND_SWP, &p, 10, 100, WR_LEN + 80);
	ok &= want(wait_wc(g.cq), IBV_WC_SUCCESS, "compare-and-swap");
	memcpy(v, g.buf + WR_LEN + 80, 8);
	if (v[0] != 10) {
		fprintf(stderr, "compare-and-swap returned %" PRIu64 "\n", v[0]);
		ok = false;
	}
	sync_point(); /* the atomics are done: the server reads its counter */
	verdict(ok, "ops");
	ibv_destroy_qp(qp);
}

/* One request that must fail with `st`; the QP ends in ERR. */
static void client_err(const char *what, enum ibv_wr_opcode op, int which, uint32_t len,
		       bool bad_key, enum ibv_wc_status st)
{
	struct rec p;
	struct ibv_qp *qp = pair(&p);
	uint32_t srqn = which == 0 ? p.srqn : which == 1 ? p.srqn_basic : p.srqn_other;
	bool ok;

	post(qp, op, srqn, 0, len, p.addr, bad_key ? p.rkey ^ 0x5a5a00 : p.rkey, 9);
	ok = want(wait_wc(g.cq), st, what);
	if (qp_state(qp) != IBV_QPS_ERR) {
		fprintf(stderr, "%s: the XRC_SEND QP is not in ERR\n", what);
		ok = false;
	}
	sync_point(); /* the server looks at its side now */
	verdict(ok, what);
	ibv_destroy_qp(qp);
}

/* ---- server ---- */

static void post_srq(struct ibv_srq *srq, uint32_t slot)
{
	struct ibv_sge sg = {(uintptr_t)g.buf + RCV_OFF + slot * RCV_SIZE, RCV_SIZE, g.mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sg, .num_sge = 1}, *bad;

	if (ibv_post_srq_recv(srq, &wr, &bad))
		DIE("ibv_post_srq_recv: %s", strerror(errno));
}

static bool recv_ok(struct ibv_qp *qp, struct ibv_wc wc, uint32_t len, uint32_t s, int imm,
		    const char *what)
{
	bool ok = want(wc, IBV_WC_SUCCESS, what);

	if (wc.qp_num != qp->qp_num || wc.byte_len != len ||
	    (imm >= 0 &&
	     (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != (uint32_t)imm))) {
		fprintf(stderr, "%s: qp_num 0x%x (0x%x), byte_len %u (%u), flags 0x%x imm 0x%x\n",
			what, wc.qp_num, qp->qp_num, wc.byte_len, len, wc.wc_flags,
			ntohl(wc.imm_data));
		ok = false;
	}
	if (s && !same(g.buf + RCV_OFF + wc.wr_id * RCV_SIZE, s, len)) {
		fprintf(stderr, "%s: the bytes received differ\n", what);
		ok = false;
	}
	return ok;
}

static void server_ops(void)
{
	struct rec p;
	struct ibv_qp *qp;
	bool ok = true;
	uint64_t cnt;

	post_srq(g.srq, 0);
	qp = pair(&p);
	ok &= recv_ok(qp, wait_wc(g.cq), 10000, 1, -1, "send");
	sync_point();
	sync_point(); /* the client's SEND with immediate is out: RNR */
	{
		struct timespec ts = {0, 300 * 1000 * 1000};

		nanosleep(&ts, NULL);
	}
	post_srq(g.srq, 1);
	ok &= recv_ok(qp, wait_wc(g.cq), 100, 2, 0x5eed, "send after RNR");
	/* the WRITE with immediate consumes a receive, without data */
	post_srq(g.srq, 2);
	ok &= recv_ok(qp, wait_wc(g.cq), 5000, 0, 3, "write with immediate");
	if (!same(g.buf, 3, WR_LEN)) {
		fprintf(stderr, "write: the bytes differ from those sent\n");
		ok = false;
	}
	sync_point(); /* the client's atomics are done */
	memcpy(&cnt, g.buf + CNT_OFF, 8);
	if (cnt != 100) {
		fprintf(stderr, "the counter is %" PRIu64 ", not 100\n", cnt);
		ok = false;
	}
	verdict(ok, "ops");
	ibv_destroy_qp(qp);
}

static void server_err(const char *what)
{
	struct rec p;
	struct ibv_qp *qp = pair(&p);
	struct ibv_wc wc;
	bool ok = true;

	sync_point(); /* the client has its completion: the target QP failed with it */
	if (qp_state(qp) != IBV_QPS_ERR) {
		fprintf(stderr, "%s: the XRC_RECV QP is not in ERR\n", what);
		ok = false;
	}
	if (ibv_poll_cq(g.cq, 1, &wc) != 0) {
		fprintf(stderr, "%s: a receive completed (status %s)\n", what,
			ibv_wc_status_str(wc.status));
		ok = false;
	}
	verdict(ok, what);
	ibv_destroy_qp(qp);
}

int main(int argc, char **argv)
{
	const char *port = "18600";
	int c;

	while ((c = getopt(argc, argv, "g:p:")) != -1) {
		if (c == 'g')
			g.gidx = atoi(optarg);
		else if (c == 'p')
			port = optarg;
		else
			DIE("usage: %s -g GID_INDEX -p PORT [SERVER]", argv[0]);
	}
	g.server = optind == argc;
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	setup();
	g.sock = side_channel(g.server ? NULL : argv[optind], port);
	if (g.server) {
		/* a receive on each SRQ the failing requests name: none is taken */
		post_srq(g.srq2, 8);
		{
			struct ibv_sge sg = {(uintptr_t)g.buf + RCV_OFF + 10 * RCV_SIZE, RCV_SIZE,
					     g.mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = 10, .sg_list = &sg, .num_sge = 1}, *bad;

			if (ibv_post_srq_recv(g.basic, &wr, &bad))
				DIE("ibv_post_srq_recv (basic)");
		}
		server_ops();
		server_err("srq_basic");
		server_err("srq_domain");
		server_err("write_basic");
		server_err("bad_rkey");
	} else {
		client_ops();
		client_err("srq_basic", IBV_WR_SEND, 1, 100, false, IBV_WC_REM_INV_REQ_ERR);
		client_err("srq_domain", IBV_WR_SEND, 2, 5000, false, IBV_WC_REM_INV_REQ_ERR);
		client_err("write_basic", IBV_WR_RDMA_WRITE, 1, 100, false, IBV_WC_REM_INV_REQ_ERR);
		client_err("bad_rkey", IBV_WR_RDMA_WRITE, 0, 100, true, IBV_WC_REM_ACCESS_ERR);
	}
	printf("all checks passed\n");
	return 0;
}
