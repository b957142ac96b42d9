/*
 * Memory windows, bound by the target process and used by the initiator:
 * type 1 (ibv_alloc_mw + ibv_bind_mw): remote WRITE and READ through the
 * window's rkey, the bound range and rights enforced, a rebind retiring the
 * old key; type 2 (IBV_WR_BIND_MW): access through the window only on the
 * QP it is bound to, IBV_WR_LOCAL_INV and SEND_WITH_INV (IBV_WC_WITH_INV at
 * the receiver) ending remote access.  Memory outside what was allowed must
 * never change.
 */
#include "tcommon.h"

#define WIN_MR_LEN (64 * 1024)
#define WIN_OFF	   4096
#define WIN_LEN	   8192
#define NPAIR	   4

struct mwenv {
	struct agent ag;
	struct vdev d;
	struct rng r;
	int acq;
	struct ag_mr mr;
	struct ag_qp aq[NPAIR];
	struct ibv_qp *qp[NPAIR];
	struct ibv_cq *cq;
	struct vbuf lb;
};

static void mw_setup(struct mwenv *e)
{
	rng_init(&e->r, 3);
	agent_start(&e->ag, "agent");
	vdev_open(&e->d);
	e->acq = ag_cq(&e->ag, 64, 0);
	/* no remote rights on the MR itself: only windows give them */
	e->mr = ag_mr_reg(&e->ag, WIN_MR_LEN, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, 0,
			  S_BACKGROUND);
	e->cq = ibv_create_cq(e->d.ctx, 64, NULL, NULL, 0);
	REQUIRE(e->cq);
	for (int p = 0; p < NPAIR; p++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = e->cq};

		e->aq[p] = ag_qp_create(&e->ag, IBV_QPT_RC, e->acq, e->acq, -1, 0, 0);
		e->qp[p] = vqp_create(&e->d, &s);
		pair_connect(&e->d, e->qp[p], &CONN_DEFAULT, &e->ag, &e->aq[p], &CONN_DEFAULT,
			     &e->r);
	}
	vbuf_reg(&e->d, &e->lb, WIN_LEN + 64, 64, IBV_ACCESS_LOCAL_WRITE, NULL);
}

static void mw_teardown(struct mwenv *e)
{
	struct ibv_wc wc;

	CHECK_EQ(ag_guard_check(&e->ag, e->mr.h), -1);
	CHECK_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5), 0);
	for (int p = 0; p < NPAIR; p++)
		CHECK_EQ(ibv_destroy_qp(e->qp[p]), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	vbuf_free(&e->lb);
	vdev_close(&e->d);
	agent_stop(&e->ag);
}

/* The MR holds `stream` in the window and the background elsewhere. */
static void check_mr(struct mwenv *e, uint64_t stream)
{
	CHECK_EQ(ag_mem_check(&e->ag, e->mr.h, 0, WIN_OFF, S_BACKGROUND, 0), -1);
	CHECK_EQ(ag_mem_check(&e->ag, e->mr.h, WIN_OFF, WIN_LEN, stream,
			      stream == S_BACKGROUND ? WIN_OFF : 0),
		 -1);
	CHECK_EQ(ag_mem_check(&e->ag, e->mr.h, WIN_OFF + WIN_LEN, WIN_MR_LEN - WIN_OFF - WIN_LEN,
			      S_BACKGROUND, WIN_OFF + WIN_LEN),
		 -1);
	CHECK_EQ(ag_guard_check(&e->ag, e->mr.h), -1);
}

/* WRITE the whole window with `stream`, READ it back. */
static void write_read_window(struct mwenv *e, int p, uint32_t rkey, uint64_t stream)
{
	struct ibv_sge sge = {(uintptr_t)e->lb.p, WIN_LEN, e->lb.mr->lkey};
	struct ibv_send_wr wr;
	uint64_t win = e->mr.addr + WIN_OFF;

	pat_fill(e->lb.p, WIN_LEN, stream, 0);
	wr = rdma_wr(IBV_WR_RDMA_WRITE, 10, &sge, win, rkey);
	post_expect(e->qp[p], e->cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	check_mr(e, stream);
	memset(e->lb.p, 0, WIN_LEN);
	wr = rdma_wr(IBV_WR_RDMA_READ, 11, &sge, win, rkey);
	post_expect(e->qp[p], e->cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	CHECK_PAT(e->lb.p, WIN_LEN, stream, 0);
	/* and a random piece inside */
	{
		uint64_t off = rng_range(&e->r, 0, WIN_LEN - 1);
		uint64_t len = rng_range(&e->r, 1, WIN_LEN - off);

		sge.length = (uint32_t)len;
		wr = rdma_wr(IBV_WR_RDMA_READ, 12, &sge, win + off, rkey);
		post_expect(e->qp[p], e->cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		CHECK_PAT(e->lb.p, len, stream, off);
	}
}

/* A 16-byte access at `raddr` that must fail with a remote access error. */
static void access_fails(struct mwenv *e, int p, enum ibv_wr_opcode op, uint64_t raddr,
			 uint32_t rkey, uint64_t stream_in_window)
{
	struct ibv_sge sge = {(uintptr_t)e->lb.p, 16, e->lb.mr->lkey};
	struct ibv_send_wr wr = rdma_wr(op, 20, &sge, raddr, rkey);

	memset(e->lb.p, 0x3c, 16);
	post_expect_fatal(e->qp[p], e->cq, &wr, IBV_WC_REM_ACCESS_ERR);
	check_mr(e, stream_in_window);
	/* the responder's QP is in the error state too (as rxe and ConnectX) */
	CHECK_EQ(ag_qp_state(&e->ag, e->aq[p].h), IBV_QPS_ERR);
}

static uint32_t bind1(struct mwenv *e, int p, int mw, uint64_t off, uint64_t len, int access,
		      uint64_t wr_id)
{
	struct ag_req rq = {
	    .op = AG_BIND_MW1,
	    .a = {e->aq[p].h, mw, e->mr.h, (int64_t)off, (int64_t)len, access, (int64_t)wr_id}};
	struct ag_rep rep;
	struct ibv_wc wc;

	ag_call(&e->ag, &rq, NULL, &rep, NULL, 0, 0);
	CHECK_EQ(rep.a[0], 0);
	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_BIND_MW, wr_id, e->aq[p].qpn);
	return (uint32_t)rep.a[1];
}

void test_mw_type1(void)
{
	struct mwenv e;
	struct ag_req rq = {.op = AG_MW_ALLOC, .a = {IBV_MW_TYPE_1}};
	struct ag_rep rep;
	uint32_t k0, k1, k2;
	uint64_t win;

	mw_setup(&e);
	win = e.mr.addr + WIN_OFF;
	ag_call(&e.ag, &rq, NULL, &rep, NULL, 0, 0);
	k0 = (uint32_t)rep.a[1];

	sr_note("bind read/write");
	k1 = bind1(&e, 0, (int)rep.a[0], WIN_OFF, WIN_LEN,
		   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 1);
	CHECK_NE(k1, k0);
	CHECK_NE(k1, e.mr.rkey);
	write_read_window(&e, 0, k1, S_MSG(1));

	sr_note("past the end of the window");
	access_fails(&e, 0, IBV_WR_RDMA_WRITE, win + WIN_LEN - 8, k1, S_MSG(1));

	sr_note("rebind read-only, first page");
	k2 = bind1(&e, 1, (int)rep.a[0], 0, 4096, IBV_ACCESS_REMOTE_READ, 2);
	CHECK_NE(k2, k1);
	{
		struct ibv_sge sge = {(uintptr_t)e.lb.p, 4096, e.lb.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_RDMA_READ, 30, &sge, e.mr.addr, k2);

		post_expect(e.qp[1], e.cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		CHECK_PAT(e.lb.p, 4096, S_BACKGROUND, 0);
	}
	sr_note("write through a read-only window");
	access_fails(&e, 1, IBV_WR_RDMA_WRITE, e.mr.addr + 100, k2, S_MSG(1));
	sr_note("the key of the earlier binding");
	access_fails(&e, 2, IBV_WR_RDMA_READ, win, k1, S_MSG(1));
	sr_note("the MR's own rkey (no remote rights)");
	access_fails(&e, 3, IBV_WR_RDMA_WRITE, win, e.mr.rkey, S_MSG(1));
	mw_teardown(&e);
}

static uint32_t bind2(struct mwenv *e, int p, int mw, uint64_t wr_id)
{
	struct ag_wr w = ag_wr_make(e->aq[p].h, IBV_WR_BIND_MW, wr_id, 0);
	uint32_t rkey = 0;
	struct ibv_wc wc;

	w.mw = (uint32_t)mw;
	w.bind_mr = e->mr.h;
	w.bind_off = WIN_OFF;
	w.bind_len = WIN_LEN;
	w.bind_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	CHECK_EQ(ag_post_send(&e->ag, &w, NULL, NULL, &rkey), 0);
	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_BIND_MW, wr_id, e->aq[p].qpn);
	return rkey;
}

void test_mw_type2(void)
{
	struct mwenv e;
	struct ag_req rq = {.op = AG_MW_ALLOC, .a = {IBV_MW_TYPE_2}};
	struct ag_rep rep;
	struct ibv_wc wc;
	uint32_t k1, k2;
	uint64_t win;
	int mw;

	mw_setup(&e);
	win = e.mr.addr + WIN_OFF;
	ag_call(&e.ag, &rq, NULL, &rep, NULL, 0, 0);
	mw = (int)rep.a[0];

	sr_note("bind on QP 0");
	k1 = bind2(&e, 0, mw, 1);
	write_read_window(&e, 0, k1, S_MSG(1));
	sr_note("through another QP");
	access_fails(&e, 1, IBV_WR_RDMA_WRITE, win, k1, S_MSG(1));

	sr_note("local invalidate");
	{
		struct ag_wr w = ag_wr_make(e.aq[0].h, IBV_WR_LOCAL_INV, 2, 0);

		w.inv_rkey = k1;
		CHECK_EQ(ag_post_send(&e.ag, &w, NULL, NULL, NULL), 0);
		REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, 2, e.aq[0].qpn);
	}
	access_fails(&e, 0, IBV_WR_RDMA_WRITE, win, k1, S_MSG(1));

	sr_note("bind again on QP 2");
	k2 = bind2(&e, 2, mw, 3);
	CHECK_NE(k2, k1);
	write_read_window(&e, 2, k2, S_MSG(2));

	sr_note("send with invalidate");
	{
		struct piece pc = {0, 0, 64};
		struct ibv_sge sge = {(uintptr_t)e.lb.p, 64, e.lb.mr->lkey};
		struct ibv_send_wr wr;
		struct aregions ar;

		aregions_init(&e.ag, &ar, IBV_ACCESS_LOCAL_WRITE);
		CHECK_EQ(ag_post_recv(&e.ag, e.aq[2].h, 0, 40, &pc, 1, ar.h), 0);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 41;
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.invalidate_rkey = k2;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		post_expect(e.qp[2], e.cq, &wr, IBV_WC_SUCCESS, IBV_WC_SEND);
		REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 40, e.aq[2].qpn);
		CHECK(wc.wc_flags & IBV_WC_WITH_INV);
		CHECK_EQ(wc.invalidated_rkey, k2);
		CHECK_EQ(wc.byte_len, 64);
	}
	access_fails(&e, 2, IBV_WR_RDMA_READ, win, k2, S_MSG(2));
	mw_teardown(&e);
}
