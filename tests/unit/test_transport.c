/*
 * Unit test of the transport's state machines (src/transport: requester,
 * completer, responder) on a capture link (transport/link.h): no socket,
 * no engine thread.  A real softrdmad (its engine off: SOFTRDMA_ROCE=0)
 * holds two RC QPs of this process, A and B, each connected to a peer on
 * "another host" (10.255.0.2, which tests/isolated.sh makes unreachable);
 * an engine of this process (sr_engine_attach) runs the transport for them
 * with its link replaced by the capture link below, which keeps every
 * packet the transport sends.  The test is the wire: it looks at what A
 * sent (opcodes, PSNs, AckReq, AETH syndromes), then hands it to B as if
 * it came from the peer (the addresses swapped), or drops, repeats or
 * reorders it, and the same for B's answers to A; and it checks what a
 * user would see: B's memory, A's completions and their statuses.
 *
 * The rules checked (IBTA vol. 1): segmentation at the path MTU and the
 * AckReq of a message's last packet (9.2, 9.7.2); the ACK of the last PSN
 * received (9.7.5.1); a gap answered by a PSN sequence error NAK for the
 * expected PSN and go-back-N from it (9.7.5.1.2, 9.7.5.2.8); a duplicate
 * request acknowledged again and not executed twice (9.7.5.1.1); RNR NAK
 * for a SEND with no receive posted, carrying the responder's timer
 * (9.7.5.2.3); a bad R_Key answered by a remote access error NAK, which
 * completes the WQE with IBV_WC_REM_ACCESS_ERR and moves the QP to the
 * error state (9.7.5.2.4, 10.8.3); READ responses at the READ's PSNs
 * (9.7.5.1.4), and a lost one asked for again by a READ for the rest
 * (9.7.5.2.8); an atomic's response carrying the original value (9.4.5);
 * the local ACK timeout resending the unacknowledged PSN and, retries
 * spent, IBV_WC_RETRY_EXC_ERR (9.7.6.1.3).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "check.h"
#include "engine/engine.h"
#include "shm/epoch.h"
#include "shm/exec.h"
#include "transport/link.h"
#include "transport/transport.h"
#include "wire/bth.h"

#include "../inproc_daemon.h"

/* ---- the capture link ---- */

#define CAP_MAX 512
#define PKT_MAX (SR_MAX_HDR_LEN + 4096 + 8)

struct cap_pkt {
	uint8_t b[PKT_MAX]; /* from the BTH, pad and (zero) ICRC included */
	uint32_t len;
	uint8_t sgid[16], dgid[16];
	uint32_t flow;
};

struct cap_link {
	struct sr_link link;
	unsigned queued; /* sent, not yet flushed */
	unsigned n;	 /* on the wire: flushed, not yet taken */
	struct cap_pkt pkt[CAP_MAX];
	unsigned flushes;
};

static void cap_send(struct sr_link *l, const struct sr_link_addr *to, const uint8_t *hdr,
		     unsigned hlen, const struct iovec *pay, unsigned npay, uint32_t paylen)
{
	struct cap_link *c = (struct cap_link *)l;
	unsigned pad = (4 - (paylen & 3)) & 3, off = hlen;
	struct cap_pkt *p;

	if (c->n + c->queued >= CAP_MAX || hlen + paylen + pad + 4 > PKT_MAX) {
		fprintf(stderr, "capture link: full\n");
		exit(2);
	}
	p = &c->pkt[c->n + c->queued++];
	memcpy(p->b, hdr, hlen);
	p->b[1] = (uint8_t)((p->b[1] & ~0x30) | (pad << 4));
	for (unsigned i = 0; i < npay; i++) {
		memcpy(p->b + off, pay[i].iov_base, pay[i].iov_len);
		off += (unsigned)pay[i].iov_len;
	}
	memset(p->b + off, 0, pad + 4);
	p->len = off + pad + 4;
	memcpy(p->sgid, to->sgid, 16);
	memcpy(p->dgid, to->dgid, 16);
	p->flow = to->flow;
}

static unsigned cap_flush(struct sr_link *l)
{
	struct cap_link *c = (struct cap_link *)l;
	unsigned k = c->queued;

	c->n += k;
	c->queued = 0;
	c->flushes++;
	return k;
}

static unsigned cap_queued(const struct sr_link *l)
{
	return ((const struct cap_link *)l)->queued;
}

static bool cap_rx_check(const struct sr_link *l, const uint8_t *pkt, uint32_t len,
			 const struct sr_link_addr *from)
{
	return true; /* the test is the wire: what it hands on is whole */
}

static const struct sr_link_ops cap_ops = {cap_send, cap_flush, cap_queued, cap_rx_check};
static struct cap_link cap;

/* ---- the device, the QPs, the engine ---- */

static const uint8_t peer[16] = {[10] = 0xff, [11] = 0xff, 10, 255, 0, 2};
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq_a, *cq_b;
static struct ibv_mr *mr;
static uint8_t *mem; /* [0, 64K): A's buffers, [64K, 128K): B's */
#define A_BUF (mem)
#define B_BUF (mem + 65536)
static struct sr_engine *eng;
static int gid_index;

static void die(const char *what)
{
	fprintf(stderr, "test_transport: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* The GID of 10.255.0.1 (tests/isolated.sh): IPv4-mapped, not the peer's. */
static int pick_gid(void)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, 1, &pa))
		die("ibv_query_port");
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;

		if (!ibv_query_gid(ctx, 1, i, &g) && !memcmp(g.raw, peer, 12) &&
		    memcmp(g.raw, peer, 16) && g.raw[12] == 10)
			return i;
	}
	fprintf(stderr, "test_transport: no GID in 10.0.0.0/8: run it through tests/isolated.sh\n");
	exit(2);
}

struct qp {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t sq_psn; /* the PSN its requester starts at */
};
static struct qp qa, qb;

/* RESET -> INIT -> RTR -> RTS, connected to peer QPN dest; path MTU 1024. */
static void connect_qp(struct qp *q, uint32_t dest, uint32_t rq_psn, uint8_t timeout, uint8_t retry)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.pkey_index = 0,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};

	if (ibv_modify_qp(q->qp, &(struct ibv_qp_attr){.qp_state = IBV_QPS_RESET}, IBV_QP_STATE) ||
	    ibv_modify_qp(q->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = dest,
				 .rq_psn = rq_psn,
				 .max_dest_rd_atomic = 4,
				 .min_rnr_timer = 12,
				 .ah_attr = {.is_global = 1, .port_num = 1}};
	memcpy(a.ah_attr.grh.dgid.raw, peer, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(q->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = timeout,
				 .retry_cnt = retry,
				 .rnr_retry = 7,
				 .sq_psn = q->sq_psn,
				 .max_rd_atomic = 4};
	if (ibv_modify_qp(q->qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify RTS");
}

static struct sr_qp_shm *shm_of(const struct qp *q)
{
	return sr_exec_qp_lookup(eng->ctx, q->qp->qp_num);
}

/* One turn of the engine for q's requester (what a doorbell makes it do),
 * its packets flushed onto the capture link. */
static void run_req(const struct qp *q)
{
	struct sr_qp_shm *s;
	struct sr_eng_qp *st;

	sr_epoch_enter(eng->arena);
	eng->now = sr_eng_clock();
	s = shm_of(q);
	st = s ? sr_eng_qp_get(eng, s) : NULL;
	if (st)
		sr_eng_req_run(eng, s, st);
	sr_eng_flush_tx(eng);
	sr_epoch_exit();
}

/* q's timer, if it is due at `after` ns from now (the test's clock runs
 * ahead: nothing waits). */
static void run_timer(const struct qp *q, uint64_t after)
{
	struct sr_qp_shm *s;
	struct sr_eng_qp *st;

	sr_epoch_enter(eng->arena);
	eng->now = sr_eng_clock() + after;
	s = shm_of(q);
	st = s ? sr_eng_qp_get(eng, s) : NULL;
	if (st && st->comp.deadline && st->comp.deadline <= eng->now)
		sr_eng_req_timer(eng, s, st);
	sr_eng_flush_tx(eng);
	sr_epoch_exit();
}

/* The packets on the wire, taken: into out[] (up to max), how many. */
static unsigned take(struct cap_pkt *out, unsigned max)
{
	unsigned n = cap.n < max ? cap.n : max;

	memcpy(out, cap.pkt, n * sizeof(*out));
	memmove(cap.pkt, cap.pkt + n, (cap.n - n + cap.queued) * sizeof(*out));
	cap.n -= n;
	return n;
}

/* What is on the wire, taken into out[64]: whether it is `want` packets
 * (a check). */
static bool wire_has(struct cap_pkt *out, unsigned want)
{
	unsigned n = take(out, 64);

	CHECK_EQ(n, want);
	return n == want;
}

/* p handed to the transport as received from the peer (its source and
 * destination swapped: it went out to 10.255.0.2, it comes in from
 * there), and the ACKs it owes sent. */
static void deliver(const struct cap_pkt *p)
{
	struct cap_pkt c = *p;

	sr_epoch_enter(eng->arena);
	eng->now = sr_eng_clock();
	sr_eng_rx_one(eng, c.b, c.len, &(struct sr_link_addr){c.dgid, c.sgid, 0xc000});
	sr_eng_resp_acks(eng);
	sr_eng_flush_tx(eng);
	sr_epoch_exit();
}

static uint8_t opcode(const struct cap_pkt *p)
{
	return p->b[0];
}
static uint32_t psn(const struct cap_pkt *p)
{
	return (uint32_t)p->b[9] << 16 | (uint32_t)p->b[10] << 8 | p->b[11];
}
static uint32_t dqpn(const struct cap_pkt *p)
{
	return (uint32_t)p->b[5] << 16 | (uint32_t)p->b[6] << 8 | p->b[7];
}
static bool ackreq(const struct cap_pkt *p)
{
	return p->b[8] & 0x80;
}
static uint8_t syndrome(const struct cap_pkt *p) /* the AETH's */
{
	return p->b[SR_BTH_LEN];
}

/* The completions cq holds; how many.  (The transport runs in this
 * thread: what a packet completes is there when deliver returns.) */
static int poll(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	int got = 0, n;

	while (got < max && (n = ibv_poll_cq(cq, max - got, wc + got)) > 0)
		got += n;
	return got;
}

/* Posts a signaled WR of op on q and runs q's requester. */
static void post_write(struct qp *q, uint64_t id, void *local, uint32_t len, void *remote,
		       uint32_t rkey, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = {(uintptr_t)local, len, mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)remote;
	wr.wr.rdma.rkey = rkey;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)remote;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
	}
	if (ibv_post_send(q->qp, &wr, &bad))
		die("ibv_post_send");
	run_req(q); /* the doorbell's turn */
}

static void post_recv(struct qp *q, void *buf, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(q->qp, &wr, &bad))
		die("ibv_post_recv");
}

/* A and B connected afresh, each to the other's number, with new PSNs;
 * anything left on the wire thrown away. */
static void reconnect(uint8_t timeout, uint8_t retry)
{
	static uint32_t base = 100;

	base += 1000;
	qa.sq_psn = base;
	qb.sq_psn = base + 500;
	connect_qp(&qa, qb.qp->qp_num, qb.sq_psn, timeout, retry);
	connect_qp(&qb, qa.qp->qp_num, qa.sq_psn, timeout, retry);
	/* the grant the daemon gives posting threads at RTS taken back: a
	 * post then rings the engine's doorbell, and the test's engine sends */
	run_req(&qa);
	run_req(&qb);
	cap.n = cap.queued = 0;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* ---- the cases ---- */

static struct cap_pkt w[64], r[64];

/* A WRITE of 3000 bytes at MTU 1024: FIRST, MIDDLE, LAST at consecutive
 * PSNs, AckReq on the LAST; B places it and ACKs its last PSN; A
 * completes it. */
static void test_write(void)
{
	struct ibv_wc wc[4];

	CHECK_CTX("write");
	reconnect(14, 7);
	fill(A_BUF, 3000, 1);
	memset(B_BUF, 0, 4096);
	post_write(&qa, 11, A_BUF, 3000, B_BUF, mr->rkey, IBV_WR_RDMA_WRITE);
	if (!wire_has(w, 3))
		return;
	CHECK_EQ(opcode(&w[0]), 0x06);
	CHECK_EQ(opcode(&w[1]), 0x07);
	CHECK_EQ(opcode(&w[2]), 0x08);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ(psn(&w[i]), qa.sq_psn + i);
		CHECK_EQ(dqpn(&w[i]), qb.qp->qp_num);
	}
	CHECK(ackreq(&w[2]));
	for (unsigned i = 0; i < 3; i++)
		deliver(&w[i]);
	CHECK(!memcmp(A_BUF, B_BUF, 3000));
	if (!wire_has(r, 1))
		return;
	CHECK_EQ(opcode(&r[0]), 0x11);
	CHECK_EQ(syndrome(&r[0]) & 0xe0, 0x00); /* an ACK */
	CHECK_EQ(psn(&r[0]), qa.sq_psn + 2);
	CHECK_EQ(dqpn(&r[0]), qa.qp->qp_num);
	CHECK_EQ(poll(cq_a, wc, 4), 0); /* not before the ACK */
	deliver(&r[0]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
	CHECK_EQ(wc[0].wr_id, 11);
}

/* The MIDDLE lost: B answers the LAST with a sequence-error NAK for the
 * MIDDLE's PSN; A resends from it (the MIDDLE alone, since B placed the
 * LAST that came after the gap: transport.h, SR_ENG_OOO); the ACK of the
 * LAST's PSN completes it. */
static void test_lost_middle(void)
{
	struct ibv_wc wc[4];
	unsigned n, m;

	CHECK_CTX("lost middle");
	reconnect(14, 7);
	fill(A_BUF, 3000, 2);
	memset(B_BUF, 0, 4096);
	post_write(&qa, 12, A_BUF, 3000, B_BUF, mr->rkey, IBV_WR_RDMA_WRITE);
	if (!wire_has(w, 3))
		return;
	deliver(&w[0]);
	deliver(&w[2]); /* the MIDDLE never arrives */
	if (!wire_has(r, 1))
		return;
	CHECK_EQ(opcode(&r[0]), 0x11);
	CHECK_EQ(syndrome(&r[0]), 0x60); /* NAK: PSN sequence error */
	CHECK_EQ(psn(&r[0]), qa.sq_psn + 1);
	deliver(&r[0]);
	run_req(&qa);
	m = take(w, 64);
	CHECK(m >= 1);
	if (m < 1)
		return;
	CHECK_EQ(psn(&w[0]), qa.sq_psn + 1);
	CHECK_EQ(opcode(&w[0]), 0x07);
	for (unsigned i = 1; i < m; i++)
		CHECK_EQ(psn(&w[i]), qa.sq_psn + 1 + i);
	for (unsigned i = 0; i < m; i++)
		deliver(&w[i]);
	CHECK(!memcmp(A_BUF, B_BUF, 3000));
	n = take(r, 64);
	CHECK(n >= 1);
	if (n < 1)
		return;
	CHECK_EQ(syndrome(&r[n - 1]) & 0xe0, 0x00);
	CHECK_EQ(psn(&r[n - 1]), qa.sq_psn + 2);
	for (unsigned i = 0; i < n; i++)
		deliver(&r[i]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 12);
}

/* A SEND delivered twice: B's receive completes once, and the duplicate
 * is ACKed again with the same PSN. */
static void test_duplicate(void)
{
	struct ibv_wc wc[4];

	CHECK_CTX("duplicate");
	reconnect(14, 7);
	post_recv(&qb, B_BUF, 4096);
	post_recv(&qb, B_BUF + 4096, 4096);
	fill(A_BUF, 100, 3);
	post_write(&qa, 13, A_BUF, 100, NULL, 0, IBV_WR_SEND);
	if (!wire_has(w, 1))
		return;
	CHECK_EQ(opcode(&w[0]), 0x04); /* SEND_ONLY */
	deliver(&w[0]);
	deliver(&w[0]);
	if (!wire_has(r, 2))
		return;
	CHECK_EQ(psn(&r[0]), qa.sq_psn);
	CHECK_EQ(psn(&r[1]), qa.sq_psn);
	CHECK_EQ(syndrome(&r[1]) & 0xe0, 0x00);
	CHECK_EQ(poll(cq_b, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[0].byte_len, 100);
	CHECK(!memcmp(A_BUF, B_BUF, 100));
	deliver(&r[0]);
	deliver(&r[1]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	/* B's second receive is still there: the duplicate took none */
	CHECK_EQ(poll(cq_b, wc, 4), 0);
	reconnect(14, 7); /* (flushes it: RESET) */
	poll(cq_b, wc, 4);
}

/* A SEND with no receive posted: an RNR NAK carrying B's min_rnr_timer. */
static void test_rnr(void)
{
	struct ibv_wc wc[4];

	CHECK_CTX("rnr");
	reconnect(14, 7);
	post_write(&qa, 14, A_BUF, 64, NULL, 0, IBV_WR_SEND);
	if (!wire_has(w, 1))
		return;
	deliver(&w[0]);
	if (!wire_has(r, 1))
		return;
	CHECK_EQ(syndrome(&r[0]), 0x20 | 12); /* RNR NAK, timer 12 */
	CHECK_EQ(psn(&r[0]), qa.sq_psn);
	deliver(&r[0]);
	CHECK_EQ(poll(cq_a, wc, 4), 0); /* it waits and tries again */
	/* after the RNR wait (12: 0.64 ms), the SEND again; a receive now */
	post_recv(&qb, B_BUF, 4096);
	run_timer(&qa, 10000000);
	if (!wire_has(w, 1))
		return;
	CHECK_EQ(psn(&w[0]), qa.sq_psn);
	deliver(&w[0]);
	if (wire_has(r, 1))
		deliver(&r[0]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(poll(cq_b, wc, 4), 1);
}

/* A WRITE with an R_Key B does not have: NAK remote access error; A's
 * WQE completes with IBV_WC_REM_ACCESS_ERR and A is in the error state. */
static void test_bad_rkey(void)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc[4];

	CHECK_CTX("bad rkey");
	reconnect(14, 7);
	post_write(&qa, 15, A_BUF, 64, B_BUF, mr->rkey ^ 0x5500, IBV_WR_RDMA_WRITE);
	if (!wire_has(w, 1))
		return;
	deliver(&w[0]);
	if (!wire_has(r, 1))
		return;
	CHECK_EQ(syndrome(&r[0]), 0x62); /* NAK: remote access error */
	deliver(&r[0]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc[0].wr_id, 15);
	CHECK(!ibv_query_qp(qa.qp, &attr, IBV_QP_STATE, &init));
	CHECK_EQ(attr.qp_state, IBV_QPS_ERR);
	/* B's side of it (10.8.3.1 for a responder: its QP goes to error too) */
	poll(cq_b, wc, 4);
}

/* A READ of 2048 bytes: one request, responses FIRST and LAST at the
 * READ's two PSNs; A's buffer gets B's bytes. */
static void test_read(void)
{
	struct ibv_wc wc[4];

	CHECK_CTX("read");
	reconnect(14, 7);
	fill(B_BUF, 2048, 4);
	memset(A_BUF, 0, 2048);
	post_write(&qa, 16, A_BUF, 2048, B_BUF, mr->rkey, IBV_WR_RDMA_READ);
	if (!wire_has(w, 1))
		return;
	CHECK_EQ(opcode(&w[0]), 0x0c);
	CHECK_EQ(psn(&w[0]), qa.sq_psn);
	deliver(&w[0]);
	if (!wire_has(r, 2))
		return;
	CHECK_EQ(opcode(&r[0]), 0x0d);
	CHECK_EQ(opcode(&r[1]), 0x0f);
	CHECK_EQ(psn(&r[0]), qa.sq_psn);
	CHECK_EQ(psn(&r[1]), qa.sq_psn + 1);
	deliver(&r[0]);
	deliver(&r[1]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
	CHECK(!memcmp(A_BUF, B_BUF, 2048));
}

/* A READ of 3000 bytes whose MIDDLE response is lost: A asks again for
 * what is missing, a READ request at the MIDDLE's PSN for the rest of the
 * data (its RETH: the address and length past what came in order), and
 * completes once that arrives (9.7.5.2.8's rule for READs: the requester
 * resends the request for the unanswered part). */
static void test_read_lost_response(void)
{
	struct ibv_wc wc[4];
	uint64_t va;
	uint32_t len;

	CHECK_CTX("read, lost response");
	reconnect(14, 7);
	fill(B_BUF, 3000, 6);
	memset(A_BUF, 0, 3000);
	post_write(&qa, 19, A_BUF, 3000, B_BUF, mr->rkey, IBV_WR_RDMA_READ);
	if (!wire_has(w, 1))
		return;
	deliver(&w[0]);
	if (!wire_has(r, 3))
		return;
	CHECK_EQ(opcode(&r[1]), 0x0e); /* READ_RESPONSE_MIDDLE */
	deliver(&r[0]);
	deliver(&r[2]); /* the MIDDLE never arrives */
	if (!cap.n)
		run_timer(&qa, 50000000); /* (if the gap waits for the timer) */
	if (!wire_has(w, 1))
		return;
	CHECK_EQ(opcode(&w[0]), 0x0c);
	CHECK_EQ(psn(&w[0]), qa.sq_psn + 1);
	va = 0;
	for (int k = 0; k < 8; k++)
		va = va << 8 | w[0].b[SR_BTH_LEN + k];
	len = (uint32_t)w[0].b[SR_BTH_LEN + 12] << 24 | (uint32_t)w[0].b[SR_BTH_LEN + 13] << 16 |
	      (uint32_t)w[0].b[SR_BTH_LEN + 14] << 8 | w[0].b[SR_BTH_LEN + 15];
	CHECK_EQ(va, (uintptr_t)B_BUF + 1024);
	CHECK_EQ(len, 3000 - 1024);
	CHECK_EQ(poll(cq_a, wc, 4), 0);
	deliver(&w[0]);
	if (!wire_has(r, 2))
		return;
	CHECK_EQ(psn(&r[0]), qa.sq_psn + 1);
	CHECK_EQ(psn(&r[1]), qa.sq_psn + 2);
	deliver(&r[0]);
	deliver(&r[1]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 19);
	CHECK(!memcmp(A_BUF, B_BUF, 3000));
}

/* FETCH_AND_ADD 5 on B's 8 bytes: ATOMIC_ACKNOWLEDGE with the original
 * value, which lands in A's buffer; B's word has grown by 5. */
static void test_fetch_add(void)
{
	uint64_t before = 0x1122334455667788ull, got = 0, now = 0;
	struct ibv_wc wc[4];

	CHECK_CTX("fetch_add");
	reconnect(14, 7);
	memcpy(B_BUF + 64, &before, 8);
	memset(A_BUF, 0, 8);
	post_write(&qa, 17, A_BUF, 8, B_BUF + 64, mr->rkey, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (!wire_has(w, 1))
		return;
	CHECK_EQ(opcode(&w[0]), 0x14);
	deliver(&w[0]);
	if (!wire_has(r, 1))
		return;
	CHECK_EQ(opcode(&r[0]), 0x12);
	deliver(&r[0]);
	CHECK_EQ(poll(cq_a, wc, 4), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
	memcpy(&got, A_BUF, 8);
	memcpy(&now, B_BUF + 64, 8);
	CHECK_EQ(got, before);
	CHECK_EQ(now, before + 5);
}

/* Nothing comes back: the local ACK timeout resends the unacknowledged
 * packet, retry_cnt times, then the WQE completes with
 * IBV_WC_RETRY_EXC_ERR. */
static void test_timeout(void)
{
	struct ibv_wc wc[4];
	unsigned n, sent = 0;
	int got = 0;

	CHECK_CTX("timeout");
	reconnect(8, 2); /* 4.096 us * 2^8: about 1 ms; 2 retries */
	post_write(&qa, 18, A_BUF, 64, B_BUF, mr->rkey, IBV_WR_RDMA_WRITE);
	sent += take(w, 64);
	for (int i = 0; i < 40 && !got; i++) {
		run_timer(&qa, 50000000); /* 50 ms on: past any probe or timeout */
		n = take(w, 64);
		for (unsigned k = 0; k < n; k++)
			CHECK_EQ(psn(&w[k]), qa.sq_psn);
		sent += n;
		got = poll(cq_a, wc, 4);
	}
	CHECK_EQ(got, 1);
	if (got == 1) {
		CHECK_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
		CHECK_EQ(wc[0].wr_id, 18);
	}
	/* the first send and at least retry_cnt resends of it */
	CHECK(sent >= 3);
	printf("  timeout: %u sends of the PSN before RETRY_EXC_ERR\n", sent);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_qp_init_attr ia = {
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 2, .max_recv_sge = 2},
	    .qp_type = IBV_QPT_RC};
	int fd;

	if (argc < 2) {
		fprintf(stderr, "usage: test_transport SOFTRDMAD\n");
		return 2;
	}
	setenv("SOFTRDMA_ACK_DEFER_US", "0", 1); /* every ACK goes at once */
	if (!inproc_daemon_start(argv[1], "test-transport", false))
		die("softrdmad did not come up");
	atexit(inproc_daemon_stop);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("no device");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		die("ibv_open_device");
	gid_index = pick_gid();
	pd = ibv_alloc_pd(ctx);
	cq_a = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	cq_b = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	mem = aligned_alloc(4096, 131072);
	if (!pd || !cq_a || !cq_b || !mem)
		die("pd/cq/memory");
	mr = ibv_reg_mr(pd, mem, 131072,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		die("ibv_reg_mr");
	ia.send_cq = ia.recv_cq = cq_a;
	qa.qp = ibv_create_qp(pd, &ia);
	ia.send_cq = ia.recv_cq = cq_b;
	qb.qp = ibv_create_qp(pd, &ia);
	if (!qa.qp || !qb.qp)
		die("ibv_create_qp");
	qa.cq = cq_a;
	qb.cq = cq_b;
	/* the engine, attached like the daemon's own, on the capture link */
	fd = sr_daemon_connect(false, NULL);
	if (fd < 0)
		die("connect");
	eng = sr_engine_attach(fd);
	if (!eng)
		die("sr_engine_attach");
	cap.link.ops = &cap_ops;
	cap.link.e = eng;
	eng->link = &cap.link;

	test_write();
	test_lost_middle();
	test_duplicate();
	test_rnr();
	test_bad_rkey();
	test_read();
	test_read_lost_response();
	test_fetch_add();
	test_timeout();
	return CHECK_SUMMARY("transport");
}
