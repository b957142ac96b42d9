/*
 * Shared receive queues across processes: several RC QPs of the peer
 * process feed one SRQ, every message lands exactly once and in order per
 * QP, senders that find the SRQ empty wait (RNR) and go on when receives are
 * posted; and the SRQ limit event (IBV_EVENT_SRQ_LIMIT_REACHED) fires once
 * when the posted count falls below the limit, after which the limit reads
 * back as 0.
 */
#include "tcommon.h"

#define NQP		 4
#define PER_QP		 60
#define SLOT		 1024
#define SLOTS_PER_REGION (REGION_LEN / SLOT)

static uint64_t msg_len(int k, int seq)
{
	struct rng r;

	rng_init(&r, 5000 + 1000 * (uint64_t)k + (uint64_t)seq);
	return rng_range(&r, 8, 700);
}

/* Receive j gets its own 1 KiB slot, scattered over up to 4 SGEs in it. */
static int recv_layout(struct rng *r, int j, struct piece *pc)
{
	const size_t slot_len[1] = {SLOT};
	int n = layout_make(r, slot_len, 1, 700 + rng_range(r, 0, 32), 4, pc);

	for (int i = 0; i < n; i++) {
		pc[i].mr = j % NREGION;
		pc[i].off += (uint64_t)(j / NREGION) * SLOT;
	}
	return n;
}

void test_srq_many_qps(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct aregions ar;
	struct ag_qp aq[NQP];
	struct ibv_qp *qp[NQP];
	struct ibv_cq *cq;
	struct lregions lr;
	struct piece rp[NQP * PER_QP][4];
	int rn[NQP * PER_QP], next_seq[NQP] = {0}, acq, srq, posted = 0;
	static struct ibv_wc wc[NQP * PER_QP];
	static char got[SLOT];
	bool seen[NQP][PER_QP];
	struct ag_req rq;
	struct ag_rep rep;
	const int total = NQP * PER_QP;

	rng_init(&r, 1);
	agent_start(&ag, "agent");
	vdev_open(&d);

	acq = ag_cq(&ag, 1024, 0);
	rq = (struct ag_req){.op = AG_SRQ_CREATE, .a = {512, 4, 0}};
	ag_call(&ag, &rq, NULL, &rep, NULL, 0, 0);
	srq = (int)rep.a[0];
	aregions_init(&ag, &ar, IBV_ACCESS_LOCAL_WRITE);
	cq = ibv_create_cq(d.ctx, 1024, NULL, NULL, 0);
	REQUIRE(cq);
	lregions_init(&d, &lr, IBV_ACCESS_LOCAL_WRITE);
	for (int k = 0; k < NQP; k++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq, .send_wr = PER_QP + 4};

		aq[k] = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, srq, 0, 0);
		qp[k] = vqp_create(&d, &s);
		pair_connect(&d, qp[k], &CONN_DEFAULT, &ag, &aq[k], &CONN_DEFAULT, &r);
	}

	/* half the receives now */
	for (; posted < total / 2; posted++) {
		rn[posted] = recv_layout(&r, posted, rp[posted]);
		CHECK_EQ(ag_post_recv(&ag, srq, 1, (uint64_t)posted, rp[posted], rn[posted], ar.h),
			 0);
	}
	/* all the sends, the QPs interleaved at random; the second half waits (RNR) */
	for (int i = 0; i < total; i++) {
		int k = (int)rng_range(&r, 0, NQP - 1), seq;
		uint64_t len, hdr;
		struct ibv_sge sge;
		struct ibv_send_wr wr, *bad;

		while (next_seq[k] == PER_QP)
			k = (k + 1) % NQP;
		seq = next_seq[k]++;
		len = msg_len(k, seq);
		hdr = ((uint64_t)k << 32) | (uint64_t)seq;
		char *src = lr.b[k].p + (size_t)seq * SLOT;

		memcpy(src, &hdr, 8);
		pat_fill(src + 8, len - 8, S_MSG(1000 * k + seq), 0);
		sge = (struct ibv_sge){(uintptr_t)src, (uint32_t)len, lr.b[k].mr->lkey};
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = hdr;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		CHECK_EQ(ibv_post_send(qp[k], &wr, &bad), 0);
	}
	/* while the SRQ is empty nothing more arrives */
	CHECK_EQ(ag_poll(&ag, acq, wc, total / 2, 10000), total / 2);
	CHECK_EQ(ag_poll(&ag, acq, wc + total / 2, 1, 50), 0);
	/* the rest of the receives: each wakes the waiting senders */
	for (; posted < total; posted++) {
		rn[posted] = recv_layout(&r, posted, rp[posted]);
		CHECK_EQ(ag_post_recv(&ag, srq, 1, (uint64_t)posted, rp[posted], rn[posted], ar.h),
			 0);
	}
	CHECK_EQ(ag_poll(&ag, acq, wc + total / 2, total / 2, 10000), total / 2);

	memset(seen, 0, sizeof(seen));
	memset(next_seq, 0, sizeof(next_seq));
	for (int j = 0; j < total; j++) {
		uint64_t hdr;
		int k, seq, slot = (int)wc[j].wr_id;

		sr_note("receive completion %d (wr_id %llu)", j, (unsigned long long)wc[j].wr_id);
		CHECK_STATUS(wc[j].status, IBV_WC_SUCCESS);
		CHECK_EQ(wc[j].opcode, IBV_WC_RECV);
		/* the SRQ's receives are consumed in the order they were posted */
		CHECK_EQ(wc[j].wr_id, j);
		if (slot < 0 || slot >= total)
			continue;
		agent_gather(&ag, &ar, rp[slot], rn[slot], got, wc[j].byte_len);
		memcpy(&hdr, got, 8);
		k = (int)(hdr >> 32);
		seq = (int)(uint32_t)hdr;
		if (k < 0 || k >= NQP || seq < 0 || seq >= PER_QP) {
			sr__fail(__FILE__, __LINE__, "message header %#llx",
				 (unsigned long long)hdr);
			continue;
		}
		CHECK(!seen[k][seq]); /* exactly once */
		seen[k][seq] = true;
		CHECK_EQ(seq, next_seq[k]); /* in order per QP */
		next_seq[k] = seq + 1;
		CHECK_EQ(wc[j].qp_num, aq[k].qpn); /* the QP it came in on */
		CHECK_EQ(wc[j].byte_len, msg_len(k, seq));
		CHECK_PAT(got + 8, wc[j].byte_len - 8, S_MSG(1000 * k + seq), 0);
	}
	for (int k = 0; k < NQP; k++)
		CHECK_EQ(next_seq[k], PER_QP);
	sr_note("send completions");
	CHECK_EQ(vpoll(cq, wc, total, 10000), total);
	for (int j = 0; j < total; j++)
		CHECK_STATUS(wc[j].status, IBV_WC_SUCCESS);
	vpoll_none(cq, 10);
	CHECK_EQ(ag_poll(&ag, acq, wc, 1, 10), 0);

	for (int k = 0; k < NQP; k++)
		CHECK_EQ(ibv_destroy_qp(qp[k]), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	lregions_free(&lr);
	vdev_close(&d);
	agent_stop(&ag);
}

static void send_small(struct ibv_qp *qp, struct ibv_cq *cq, struct vbuf *b, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)b->p, 32, b->mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	vpoll1(cq, &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, id, qp->qp_num);
}

/* Takes the agent's pending async event without blocking. */
static void async_event(struct agent *ag, struct ag_rep *rep)
{
	struct ag_req rq = {.op = AG_GET_ASYNC, .a = {1}};

	ag_call(ag, &rq, NULL, rep, NULL, 0, 0);
}

void test_srq_limit(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct aregions ar;
	struct ag_qp aq;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct vbuf b;
	struct ag_req rq;
	struct ag_rep rep;
	struct piece pc;
	int acq, srq;
	uint64_t id = 0;

	rng_init(&r, 2);
	agent_start(&ag, "agent");
	vdev_open(&d);
	acq = ag_cq(&ag, 256, 0);
	rq = (struct ag_req){.op = AG_SRQ_CREATE, .a = {64, 1, 0}};
	ag_call(&ag, &rq, NULL, &rep, NULL, 0, 0);
	srq = (int)rep.a[0];
	aregions_init(&ag, &ar, IBV_ACCESS_LOCAL_WRITE);
	aq = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, srq, 0, 0);
	cq = ibv_create_cq(d.ctx, 256, NULL, NULL, 0);
	REQUIRE(cq);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		qp = vqp_create(&d, &s);
	}
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
	vbuf_reg(&d, &b, 64, 0, IBV_ACCESS_LOCAL_WRITE, NULL);

	for (int i = 0; i < 16; i++) {
		pc = (struct piece){0, 64 * (uint64_t)i, 64};
		CHECK_EQ(ag_post_recv(&ag, srq, 1, (uint64_t)i, &pc, 1, ar.h), 0);
	}
	/* no limit armed yet: nothing pending */
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], -1);
	CHECK_EQ(rep.a[1], EAGAIN);

	rq = (struct ag_req){.op = AG_SRQ_MODIFY, .a = {srq, 8}};
	ag_call(&ag, &rq, NULL, NULL, NULL, 0, 0);
	rq = (struct ag_req){.op = AG_SRQ_QUERY, .a = {srq}};
	ag_call(&ag, &rq, NULL, &rep, NULL, 0, 0);
	CHECK_EQ(rep.a[1], 8);

	/* 16 -> 8 posted: not below the limit yet */
	sr_note("down to the limit");
	for (int i = 0; i < 8; i++)
		send_small(qp, cq, &b, id++);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], -1);
	CHECK_EQ(rep.a[1], EAGAIN);

	/* 7 < 8: the event, for this SRQ */
	sr_note("below the limit");
	send_small(qp, cq, &b, id++);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], 0);
	CHECK_EQ(rep.a[2], IBV_EVENT_SRQ_LIMIT_REACHED);
	CHECK_EQ(rep.a[3], srq);
	rq = (struct ag_req){.op = AG_SRQ_QUERY, .a = {srq}};
	ag_call(&ag, &rq, NULL, &rep, NULL, 0, 0);
	CHECK_EQ(rep.a[1], 0); /* fired, so disarmed */

	/* disarmed: no second event */
	sr_note("disarmed");
	send_small(qp, cq, &b, id++);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], -1);
	CHECK_EQ(rep.a[1], EAGAIN);

	/* armed again at 4 with 6 posted: fires when 3 are left */
	sr_note("re-armed");
	rq = (struct ag_req){.op = AG_SRQ_MODIFY, .a = {srq, 4}};
	ag_call(&ag, &rq, NULL, NULL, NULL, 0, 0);
	send_small(qp, cq, &b, id++);
	send_small(qp, cq, &b, id++);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], -1);
	send_small(qp, cq, &b, id++);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], 0);
	CHECK_EQ(rep.a[2], IBV_EVENT_SRQ_LIMIT_REACHED);

	{
		struct ibv_wc wc[16];

		CHECK_EQ(ag_poll(&ag, acq, wc, 13, 5000), 13);
		CHECK_EQ(ag_poll(&ag, acq, wc + 13, 1, 10), 0);
		for (int i = 0; i < 13; i++)
			CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_RECV, (uint64_t)i, aq.qpn);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}

/* A QP on an SRQ that enters the error state reports Last WQE Reached
 * (IBTA 11.6.3), however it got there: moved there by the application,
 * as the responder of a remote access error, or as a requester whose work
 * request failed. */
void test_srq_last_wqe(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq[3];
	struct ibv_qp *qp[3];
	struct ibv_cq *cq;
	struct vbuf b;
	struct ag_req rq;
	struct ag_rep rep;
	struct ag_mr tgt;
	int acq, srq;

	rng_init(&r, 5);
	agent_start(&ag, "agent");
	vdev_open(&d);
	acq = ag_cq(&ag, 64, 0);
	rq = (struct ag_req){.op = AG_SRQ_CREATE, .a = {16, 1, 0}};
	ag_call(&ag, &rq, NULL, &rep, NULL, 0, 0);
	srq = (int)rep.a[0];
	cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	vbuf_reg(&d, &b, 4096, 0,
		 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, NULL);
	for (int i = 0; i < 3; i++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		qp[i] = vqp_create(&d, &s);
		aq[i] = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, srq, 0, 0);
		pair_connect(&d, qp[i], &CONN_DEFAULT, &ag, &aq[i], &CONN_DEFAULT, &r);
	}
	tgt = ag_mr_reg(&ag, 4096, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
			S_BACKGROUND);

	sr_note("modified to ERR");
	rq = (struct ag_req){.op = AG_QP_STATE, .a = {aq[0].h, IBV_QPS_ERR}};
	ag_call(&ag, &rq, NULL, NULL, NULL, 0, 0);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], 0);
	CHECK_EQ(rep.a[2], IBV_EVENT_QP_LAST_WQE_REACHED);
	CHECK_EQ(rep.a[3], aq[0].h);

	sr_note("responder of a remote access error");
	{
		struct ibv_sge sge = {(uintptr_t)b.p, 16, b.mr->lkey};
		struct ibv_send_wr wr =
		    rdma_wr(IBV_WR_RDMA_WRITE, 1, &sge, tgt.addr, tgt.rkey ^ 0xff);

		post_expect_fatal(qp[1], cq, &wr, IBV_WC_REM_ACCESS_ERR);
	}
	CHECK_EQ(ag_qp_state(&ag, aq[1].h), IBV_QPS_ERR);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], 0);
	CHECK_EQ(rep.a[2], IBV_EVENT_QP_LAST_WQE_REACHED);
	CHECK_EQ(rep.a[3], aq[1].h);

	sr_note("requester of a failed work request");
	{
		struct ag_wr w = ag_wr_make(aq[2].h, IBV_WR_RDMA_WRITE, 2, 1);
		struct piece pc = {0, 0, 16};
		struct ibv_wc wc;

		w.raddr = (uintptr_t)b.p;
		w.rkey = b.mr->rkey ^ 0xff;
		CHECK_EQ(ag_post_send(&ag, &w, &pc, &tgt.h, NULL), 0);
		REQUIRE_EQ(ag_poll(&ag, acq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_REM_ACCESS_ERR, 0, 2, aq[2].qpn);
	}
	CHECK_EQ(ag_qp_state(&ag, aq[2].h), IBV_QPS_ERR);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], 0);
	CHECK_EQ(rep.a[2], IBV_EVENT_QP_LAST_WQE_REACHED);
	CHECK_EQ(rep.a[3], aq[2].h);
	async_event(&ag, &rep);
	CHECK_EQ(rep.a[0], -1); /* once each */

	for (int i = 0; i < 3; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}
