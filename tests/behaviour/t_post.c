/*
 * What posting refuses and what the unreliable transports drop.
 *
 * post_errors: the queue sizes create_qp reports are exactly what can be
 * outstanding (one more is ENOMEM), too many SGEs is EINVAL, and in a
 * chain the bad WR is returned in bad_wr with the ones before it posted and
 * the ones after it not.
 *
 * atomic_length: an atomic whose local buffer is not 8 bytes in all (one
 * SGE of 0, 4 or 16 bytes, none, two) is refused at post time, EINVAL, on
 * ibv_post_send and on ibv_wr_complete, as rxe does: nothing reaches the
 * target and the QP stays usable.
 *
 * unreliable_drops: on UC and UD, what RC would fail (bad rkey, no receive
 * posted, wrong Q_Key, no such QP) is silently dropped: the sender
 * completes successfully, nothing arrives, both QPs stay usable, and a
 * dropped message never turns up in a receive posted later.
 */
#include "hosts.h"
#include "tcommon.h"

static struct ibv_send_wr write_wr(uint64_t id, struct ibv_sge *sge, int nsge, uint64_t raddr,
				   uint32_t rkey)
{
	struct ibv_send_wr wr = rdma_wr(IBV_WR_RDMA_WRITE, id, sge, raddr, rkey);

	wr.num_sge = nsge;
	return wr;
}

void test_post_errors(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq;
	struct aregions ar;
	struct ag_mr tgt;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct vbuf b;
	struct ibv_sge sge[3];
	struct ibv_send_wr wr[3], *bad, *chain;
	struct ibv_recv_wr rwr[64], *rbad;
	static struct ibv_wc wc[64];
	uint32_t sq, rq;
	int acq;

	rng_init(&r, 80);
	agent_start(&ag, "agent");
	vdev_open(&d);
	acq = ag_cq(&ag, 256, 0);
	aq = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, -1, 0, 0);
	aregions_init(&ag, &ar, IBV_ACCESS_LOCAL_WRITE);
	tgt = ag_mr_reg(&ag, 4096, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
			S_BACKGROUND);
	cq = ibv_create_cq(d.ctx, 256, NULL, NULL, 0);
	REQUIRE(cq);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.cap.max_send_wr = 10;
	ia.cap.max_recv_wr = 10;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	qp = ibv_create_qp(d.pd, &ia);
	REQUIRE(qp);
	sq = ia.cap.max_send_wr;
	rq = ia.cap.max_recv_wr;
	CHECK_CMP(sq, >=, 10);
	CHECK_CMP(rq, >=, 10);
	REQUIRE(sq <= 64 && rq < 64);
	CHECK_CMP(ia.cap.max_send_sge, >=, 2);
	CHECK_CMP(ia.cap.max_recv_sge, >=, 2);
	memset(&ia, 0, sizeof(ia));
	CHECK_EQ(ibv_query_qp(qp, &qa, IBV_QP_CAP, &ia), 0);
	CHECK_EQ(ia.cap.max_send_wr, sq);
	CHECK_EQ(ia.cap.max_recv_wr, rq);
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
	vbuf_reg(&d, &b, 4096, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	pat_fill(b.p, 4096, S_MSG(1), 0);
	for (int i = 0; i < 3; i++)
		sge[i] = (struct ibv_sge){(uintptr_t)(b.p + 100 * i), 100, b.mr->lkey};

	sr_note("a bad WR in the middle of a chain");
	wr[0] = write_wr(1, sge, 1, tgt.addr, tgt.rkey);
	wr[1] = write_wr(2, sge, 3, tgt.addr + 100, tgt.rkey); /* 3 SGEs > max_send_sge */
	wr[2] = write_wr(3, sge, 1, tgt.addr + 200, tgt.rkey);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	bad = NULL;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	CHECK(bad == &wr[1]);
	CHECK_EQ(vpoll(cq, wc, 2, 100), 1);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1, qp->qp_num);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 0, 100, S_MSG(1), 0), -1);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 100, 4096 - 100, S_BACKGROUND, 100), -1);
	CHECK_EQ(vqp_state(qp), IBV_QPS_RTS);

	sr_note("receive queue: exactly max_recv_wr");
	for (uint32_t i = 0; i < rq + 1; i++) {
		rwr[i] = (struct ibv_recv_wr){.wr_id = 100 + i,
					      .sg_list = sge,
					      .num_sge = 1,
					      .next = i < rq ? &rwr[i + 1] : NULL};
	}
	rbad = NULL;
	CHECK_EQ(ibv_post_recv(qp, &rwr[0], &rbad), ENOMEM);
	CHECK(rbad == &rwr[rq]);
	rwr[0] = (struct ibv_recv_wr){.wr_id = 99, .sg_list = sge, .num_sge = 3};
	rbad = NULL;
	CHECK(ibv_post_recv(qp, &rwr[0], &rbad) != 0); /* full, and too many SGEs */
	CHECK(rbad == &rwr[0]);

	sr_note("send queue: exactly max_send_wr");
	/* the agent has no receive: the first SEND waits (RNR) and the rest queue */
	chain = NULL;
	for (int i = (int)sq; i >= 0; i--) {
		static struct ibv_send_wr w[65];

		w[i] = rdma_wr(IBV_WR_SEND, 200 + (uint64_t)i, sge, 0, 0);
		w[i].next = chain;
		chain = &w[i];
	}
	bad = NULL;
	CHECK_EQ(ibv_post_send(qp, chain, &bad), ENOMEM);
	CHECK(bad && bad->wr_id == 200 + sq);
	vpoll_none(cq, 20);
	{
		struct ibv_send_wr one = rdma_wr(IBV_WR_SEND, 999, sge, 0, 0);

		bad = NULL;
		CHECK_EQ(ibv_post_send(qp, &one, &bad), ENOMEM);
		CHECK(bad == &one);
	}
	/* receives at the agent let them all through, in order */
	for (uint32_t i = 0; i < sq; i++) {
		struct piece pc = {0, 128 * (uint64_t)i, 128};

		CHECK_EQ(ag_post_recv(&ag, aq.h, 0, 300 + i, &pc, 1, ar.h), 0);
	}
	CHECK_EQ(vpoll(cq, wc, (int)sq, 5000), (int)sq);
	for (uint32_t i = 0; i < sq; i++)
		CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_SEND, 200 + i, qp->qp_num);
	CHECK_EQ(ag_poll(&ag, acq, wc, (int)sq, 5000), (int)sq);
	for (uint32_t i = 0; i < sq; i++)
		CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_RECV, 300 + i, aq.qpn);
	/* and the queue is free again */
	wr[0] = write_wr(4, sge, 2, tgt.addr, tgt.rkey);
	post_expect(qp, cq, &wr[0], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}

struct uenv {
	struct agent ag;
	struct vdev d;
	struct rng r;
	int acq;
	struct aregions ar;
	struct ibv_cq *cq;
	struct vbuf b;
};

static void send_one(struct uenv *e, struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn,
		     uint32_t qkey, uint64_t id, uint64_t stream)
{
	struct ibv_sge sge = {(uintptr_t)e->b.p, 200, e->b.mr->lkey};
	struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, id, &sge, 0, 0);

	pat_fill(e->b.p, 200, stream, 0);
	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn;
		wr.wr.ud.remote_qkey = qkey;
	}
	post_expect(qp, e->cq, &wr, IBV_WC_SUCCESS, IBV_WC_SEND);
}

/*
 * UC and UD sends complete when sent, on one host only after the receiver's
 * side has taken or dropped the message.  Across hosts the message may
 * still be on its way: give it time to arrive (and be dropped) before what
 * follows depends on that.
 */
static void settle(void)
{
	if (sr_remote())
		sr_sleep_ms(200);
}

void test_unreliable_drops(void)
{
	struct uenv e;
	struct ag_qp uq, dq, gone;
	struct ibv_qp *uc, *ud;
	struct ibv_ah *ah;
	struct ag_mr tgt;
	struct ibv_wc wc;
	struct piece pc = {0, 0, 256 + GRH_LEN};
	static char got[512];

	rng_init(&e.r, 81);
	agent_start(&e.ag, "agent");
	vdev_open(&e.d);
	e.acq = ag_cq(&e.ag, 64, 0);
	aregions_init(&e.ag, &e.ar, IBV_ACCESS_LOCAL_WRITE);
	tgt = ag_mr_reg(&e.ag, 4096, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
			S_BACKGROUND);
	e.cq = ibv_create_cq(e.d.ctx, 64, NULL, NULL, 0);
	REQUIRE(e.cq);
	vbuf_reg(&e.d, &e.b, 4096, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	{
		struct qp_spec s = {.type = IBV_QPT_UC, .scq = e.cq};

		uc = vqp_create(&e.d, &s);
		s.type = IBV_QPT_UD;
		ud = vqp_create(&e.d, &s);
	}
	uq = ag_qp_create(&e.ag, IBV_QPT_UC, e.acq, e.acq, -1, 0, 0);
	pair_connect(&e.d, uc, &CONN_DEFAULT, &e.ag, &uq, &CONN_DEFAULT, &e.r);
	dq = ag_qp_create(&e.ag, IBV_QPT_UD, e.acq, e.acq, -1, 0, 0);
	ag_qp_connect(&e.ag, dq.h, 0, 0, 0, &e.d.gid, &CONN_DEFAULT);
	vqp_connect(&e.d, ud, 0, 0, 0, NULL, &CONN_DEFAULT);
	ah = vah_create(&e.d, &e.ag.gid);

	sr_note("UC WRITE with a bad rkey");
	{
		struct ibv_sge sge = {(uintptr_t)e.b.p, 64, e.b.mr->lkey};
		struct ibv_send_wr wr =
		    rdma_wr(IBV_WR_RDMA_WRITE, 1, &sge, tgt.addr, tgt.rkey ^ 0xff);

		post_expect(uc, e.cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		CHECK_EQ(ag_mem_check(&e.ag, tgt.h, 0, 4096, S_BACKGROUND, 0), -1);
		CHECK_EQ(vqp_state(uc), IBV_QPS_RTS);
		CHECK_EQ(ag_qp_state(&e.ag, uq.h), IBV_QPS_RTS);
		/* the next, valid one lands */
		pat_fill(e.b.p, 64, S_MSG(2), 0);
		wr = rdma_wr(IBV_WR_RDMA_WRITE, 2, &sge, tgt.addr, tgt.rkey);
		post_expect(uc, e.cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		CHECK_EQ(ag_mem_wait(&e.ag, tgt.h, 0, 64, S_MSG(2), 0, 2000), -1);
		/* it came after the bad one, on the same QP: that one changed nothing */
		CHECK_EQ(ag_mem_check(&e.ag, tgt.h, 64, 4096 - 64, S_BACKGROUND, 64), -1);
	}

	sr_note("UC SEND with no receive posted");
	send_one(&e, uc, NULL, 0, 0, 3, S_MSG(3));
	CHECK_EQ(vqp_state(uc), IBV_QPS_RTS);
	settle();
	CHECK_EQ(ag_post_recv(&e.ag, uq.h, 0, 30, &pc, 1, e.ar.h), 0);
	CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 30), 0); /* the dropped one does not come */
	send_one(&e, uc, NULL, 0, 0, 4, S_MSG(4));
	REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 1000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 30, uq.qpn);
	ag_mem_read(&e.ag, e.ar.h[0], 0, 200, got);
	CHECK_PAT(got, 200, S_MSG(4), 0);

	sr_note("UD with the wrong Q_Key");
	CHECK_EQ(ag_post_recv(&e.ag, dq.h, 0, 40, &pc, 1, e.ar.h), 0);
	send_one(&e, ud, ah, dq.qpn, CONN_DEFAULT.qkey + 1, 5, S_MSG(5));
	settle();
	CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 30), 0);
	sr_note("UD to a QPN that does not exist");
	{
		struct ag_req rq;

		gone = ag_qp_create(&e.ag, IBV_QPT_UD, e.acq, e.acq, -1, 0, 0);
		rq = (struct ag_req){.op = AG_QP_DESTROY, .a = {gone.h}};
		ag_call(&e.ag, &rq, NULL, NULL, NULL, 0, 0);
	}
	send_one(&e, ud, ah, gone.qpn, CONN_DEFAULT.qkey, 6, S_MSG(6));
	settle();
	CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 30), 0);
	sr_note("UD, right Q_Key");
	send_one(&e, ud, ah, dq.qpn, CONN_DEFAULT.qkey, 7, S_MSG(7));
	REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 1000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 40, dq.qpn);
	ag_mem_read(&e.ag, e.ar.h[0], 0, 200 + GRH_LEN, got);
	CHECK_PAT(got + GRH_LEN, 200, S_MSG(7), 0);

	sr_note("UD with no receive posted");
	send_one(&e, ud, ah, dq.qpn, CONN_DEFAULT.qkey, 8, S_MSG(8));
	settle();
	CHECK_EQ(ag_post_recv(&e.ag, dq.h, 0, 41, &pc, 1, e.ar.h), 0);
	CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 30), 0);
	send_one(&e, ud, ah, dq.qpn, CONN_DEFAULT.qkey, 9, S_MSG(9));
	REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 1000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 41, dq.qpn);
	ag_mem_read(&e.ag, e.ar.h[0], 0, 200 + GRH_LEN, got);
	CHECK_PAT(got + GRH_LEN, 200, S_MSG(9), 0);
	CHECK_EQ(vqp_state(ud), IBV_QPS_RTS);
	CHECK_EQ(ag_qp_state(&e.ag, dq.h), IBV_QPS_RTS);

	CHECK_EQ(ibv_destroy_ah(ah), 0);
	CHECK_EQ(ibv_destroy_qp(uc), 0);
	CHECK_EQ(ibv_destroy_qp(ud), 0);
	CHECK_EQ(ibv_destroy_cq(e.cq), 0);
	vbuf_free(&e.b);
	vdev_close(&e.d);
	agent_stop(&e.ag);
}

/* An atomic (add 1, or compare 1 and swap 2) at the start of tgt, its local
 * buffer the n SGEs of sge[]. */
static struct ibv_send_wr atomic_wr(enum ibv_wr_opcode op, uint64_t id, struct ibv_sge *sge, int n,
				    const struct ag_mr *tgt)
{
	struct ibv_send_wr wr = rdma_wr(op, id, sge, tgt->addr, tgt->rkey);

	wr.num_sge = n;
	wr.wr.atomic.compare_add = 1;
	wr.wr.atomic.swap = 2;
	return wr;
}

void test_atomic_length(void)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_ATOMIC_FETCH_AND_ADD,
						 IBV_WR_ATOMIC_CMP_AND_SWP};
	/* (num_sge, lengths): every local buffer that is not 8 bytes in all */
	static const struct {
		int n;
		uint32_t len[2];
	} bad[] = {{1, {4}}, {1, {16}}, {1, {0}}, {0, {0}}, {2, {8, 8}}, {2, {4, 2}}};
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ;
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq;
	struct ag_mr atom;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_qp_init_attr_ex ia;
	struct vbuf res;
	struct ibv_sge sge[2];
	struct ibv_send_wr wr, *bad_wr;
	struct ibv_wc wc;
	uint64_t a0, v;

	rng_init(&r, 81);
	agent_start(&ag, "target");
	vdev_open(&d);
	ag_cq(&ag, 16, 0);
	aq = ag_qp_create(&ag, IBV_QPT_RC, 0, 0, -1, 0, 0);
	atom = ag_mr_reg(&ag, 16, 64, all, 0, S_ATOMIC);
	ag_mem_read(&ag, atom.h, 0, 8, &a0);
	cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 1;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = d.pd;
	ia.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
	qp = ibv_create_qp_ex(d.ctx, &ia);
	REQUIRE(qp);
	qpx = ibv_qp_to_qp_ex(qp);
	REQUIRE(qpx);
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
	vbuf_reg(&d, &res, 64, 0, IBV_ACCESS_LOCAL_WRITE, NULL);

	/* rxe (validate_send_wr) refuses at post time an atomic whose local
	 * buffer is not the 8 bytes of the original value: EINVAL and bad_wr,
	 * nothing runs at the target, nothing completes, the QP stays usable */
	sr_note("ibv_post_send");
	for (size_t o = 0; o < 2; o++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			for (int k = 0; k < bad[i].n; k++)
				sge[k] = (struct ibv_sge){(uintptr_t)res.p + 16 * k, bad[i].len[k],
							  res.mr->lkey};
			wr = atomic_wr(ops[o], 10 * o + i, sge, bad[i].n, &atom);
			bad_wr = NULL;
			CHECK_EQ(ibv_post_send(qp, &wr, &bad_wr), EINVAL);
			CHECK(bad_wr == &wr);
		}
	}
	sr_note("ibv_wr_*");
	for (size_t o = 0; o < 2; o++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			for (int k = 0; k < bad[i].n; k++)
				sge[k] = (struct ibv_sge){(uintptr_t)res.p + 16 * k, bad[i].len[k],
							  res.mr->lkey};
			ibv_wr_start(qpx);
			qpx->wr_id = 100 + 10 * o + i;
			qpx->wr_flags = IBV_SEND_SIGNALED;
			if (ops[o] == IBV_WR_ATOMIC_FETCH_AND_ADD)
				ibv_wr_atomic_fetch_add(qpx, atom.rkey, atom.addr, 1);
			else
				ibv_wr_atomic_cmp_swp(qpx, atom.rkey, atom.addr, 1, 2);
			ibv_wr_set_sge_list(qpx, bad[i].n, sge);
			CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
		}
	}
	CHECK_EQ(vpoll_none(cq, 100), 0);
	ag_mem_read(&ag, atom.h, 0, 8, &v);
	CHECK_EQ(v, a0);

	sr_note("8 bytes: both paths run the atomic");
	sge[0] = (struct ibv_sge){(uintptr_t)res.p, 8, res.mr->lkey};
	wr = atomic_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, sge, 1, &atom);
	post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	memcpy(&v, res.p, 8);
	CHECK_EQ(v, a0);
	ibv_wr_start(qpx);
	qpx->wr_id = 2;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(qpx, atom.rkey, atom.addr, 1);
	ibv_wr_set_sge(qpx, res.mr->lkey, (uintptr_t)res.p, 8);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(vpoll(cq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 2, qp->qp_num);
	memcpy(&v, res.p, 8);
	CHECK_EQ(v, a0 + 1);
	ag_mem_read(&ag, atom.h, 0, 8, &v);
	CHECK_EQ(v, a0 + 2);

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&res);
	vdev_close(&d);
	agent_stop(&ag);
}
