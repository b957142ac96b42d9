/*
 * Memory registration as the peer sees it: overlapping MRs over the same
 * pages (as with buffers from one heap), the process's own stores and the
 * peer's RDMA on the same pages seen by both sides, deregistration keeping
 * the contents (and the other MRs on those pages working), the old rkey
 * refused, and a fresh registration over it all reading back the same bytes.
 * And ibv_rereg_mr as the peer sees it: new access rights, a new range and a
 * new PD each take effect for the peer's next work request.
 */
#include <sys/mman.h>

#include "tcommon.h"

#define BUF_LEN (4 * 4096)

struct menv {
	struct agent ag;
	struct vdev d;
	struct rng r;
	int acq;
	struct aregions ar;
	struct ibv_cq *cq;
	char *buf;
	char model[BUF_LEN]; /* what buf must hold */
};

/* The agent WRITEs len bytes of `stream` at buf + off through rkey on its QP
 * aq; returns the completion status. */
static int agent_write(struct menv *e, const struct ag_qp *aq, uint64_t off, uint32_t len,
		       uint32_t rkey, uint64_t stream)
{
	struct ag_wr w = ag_wr_make(aq->h, IBV_WR_RDMA_WRITE, off, 1);
	struct piece pc = {0, 0, len};
	struct ibv_wc wc;

	ag_mem_fill(&e->ag, e->ar.h[0], 0, len, stream, 0);
	w.raddr = (uintptr_t)(e->buf + off);
	w.rkey = rkey;
	CHECK_EQ(ag_post_send(&e->ag, &w, &pc, e->ar.h, NULL), 0);
	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	if (wc.status == IBV_WC_SUCCESS)
		pat_fill(e->model + off, len, stream, 0);
	return wc.status;
}

/* The agent READs [off, off+len) through rkey; compares with the model. */
static void agent_read_check(struct menv *e, const struct ag_qp *aq, uint64_t off, uint32_t len,
			     uint32_t rkey)
{
	struct ag_wr w = ag_wr_make(aq->h, IBV_WR_RDMA_READ, off, 1);
	struct piece pc = {1, 0, len};
	static char got[BUF_LEN];
	struct ibv_wc wc;

	w.raddr = (uintptr_t)(e->buf + off);
	w.rkey = rkey;
	CHECK_EQ(ag_post_send(&e->ag, &w, &pc, e->ar.h, NULL), 0);
	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	CHECK_STATUS(wc.status, IBV_WC_SUCCESS);
	ag_mem_read(&e->ag, e->ar.h[1], 0, len, got);
	CHECK_MEM(got, e->model + off, len);
}

static void local_store(struct menv *e, uint64_t off, uint32_t len, uint64_t stream)
{
	pat_fill(e->buf + off, len, stream, 0);
	pat_fill(e->model + off, len, stream, 0);
}

static struct ag_qp new_pair(struct menv *e, struct ibv_qp **qp)
{
	struct qp_spec s = {.type = IBV_QPT_RC, .scq = e->cq};
	struct ag_qp aq = ag_qp_create(&e->ag, IBV_QPT_RC, e->acq, e->acq, -1, 0, 0);

	*qp = vqp_create(&e->d, &s);
	pair_connect(&e->d, *qp, &CONN_DEFAULT, &e->ag, &aq, &CONN_DEFAULT, &e->r);
	return aq;
}

void test_mr_overlap(void)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	static struct menv e;
	struct ibv_mr *a, *b, *c, *all;
	struct ibv_qp *qp[2];
	struct ag_qp aq[2];
	uint32_t a_rkey;

	rng_init(&e.r, 90);
	agent_start(&e.ag, "peer");
	vdev_open(&e.d);
	e.acq = ag_cq(&e.ag, 64, 0);
	aregions_init(&e.ag, &e.ar, IBV_ACCESS_LOCAL_WRITE);
	e.cq = ibv_create_cq(e.d.ctx, 64, NULL, NULL, 0);
	REQUIRE(e.cq);
	aq[0] = new_pair(&e, &qp[0]);
	aq[1] = new_pair(&e, &qp[1]);

	e.buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(e.buf != MAP_FAILED);
	local_store(&e, 0, BUF_LEN, S_MSG(50)); /* "the heap" */

	/* A and B overlap on page 1, C lies inside B */
	a = ibv_reg_mr(e.d.pd, e.buf + 100, 4900, rw);
	b = ibv_reg_mr(e.d.pd, e.buf + 4000, 8000, rw);
	c = ibv_reg_mr(e.d.pd, e.buf + 9000, 100, IBV_ACCESS_REMOTE_READ);
	REQUIRE(a && b && c);
	a_rkey = a->rkey;
	CHECK_MEM(e.buf, e.model, BUF_LEN); /* registering kept every byte */

	sr_note("peer writes through A and B, we store next to them");
	CHECK_STATUS(agent_write(&e, &aq[0], 100, 100, a->rkey, S_MSG(51)), IBV_WC_SUCCESS);
	CHECK_STATUS(agent_write(&e, &aq[0], 4000, 100, b->rkey, S_MSG(52)), IBV_WC_SUCCESS);
	local_store(&e, 0, 50, S_MSG(53));	/* page 0, outside every MR */
	local_store(&e, 4500, 200, S_MSG(54));	/* page 1, in A and B */
	local_store(&e, 12100, 100, S_MSG(55)); /* page 2, after B's end */
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	agent_read_check(&e, &aq[0], 4000, 1000, a->rkey); /* B's write, seen through A */
	agent_read_check(&e, &aq[0], 4400, 600, b->rkey);  /* our store, seen through B */
	agent_read_check(&e, &aq[0], 9000, 100, c->rkey);

	sr_note("A deregistered");
	CHECK_EQ(ibv_dereg_mr(a), 0);
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	CHECK_STATUS(agent_write(&e, &aq[0], 4600, 300, b->rkey, S_MSG(56)), IBV_WC_SUCCESS);
	local_store(&e, 4100, 50, S_MSG(57));
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	agent_read_check(&e, &aq[0], 4000, 1000, b->rkey);

	sr_note("all deregistered");
	CHECK_EQ(ibv_dereg_mr(c), 0);
	CHECK_EQ(ibv_dereg_mr(b), 0);
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	local_store(&e, 8000, 2000, S_MSG(58));

	sr_note("one MR over everything");
	all = ibv_reg_mr(e.d.pd, e.buf, BUF_LEN, rw);
	REQUIRE(all);
	agent_read_check(&e, &aq[0], 0, BUF_LEN, all->rkey);
	CHECK_STATUS(agent_write(&e, &aq[0], 5, BUF_LEN - 10, all->rkey, S_MSG(59)),
		     IBV_WC_SUCCESS);
	CHECK_MEM(e.buf, e.model, BUF_LEN);

	sr_note("the old rkey of A");
	CHECK_STATUS(agent_write(&e, &aq[1], 100, 16, a_rkey, S_MSG(60)), IBV_WC_REM_ACCESS_ERR);
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	CHECK_EQ(ibv_dereg_mr(all), 0);
	CHECK_MEM(e.buf, e.model, BUF_LEN);

	for (int i = 0; i < 2; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	CHECK_EQ(ibv_destroy_cq(e.cq), 0);
	munmap(e.buf, BUF_LEN);
	vdev_close(&e.d);
	agent_stop(&e.ag);
}

/* The agent SENDs len bytes of `stream` on aq; we receive them through
 * `lkey` at `dst` on qp.  Returns the receive's status (the send's must
 * match: success, or the QP's error). */
static int agent_send_to(struct menv *e, const struct ag_qp *aq, struct ibv_qp *qp, char *dst,
			 uint32_t len, uint32_t lkey, uint64_t stream)
{
	struct ibv_sge sge = {(uintptr_t)dst, len, lkey};
	struct ibv_recv_wr rwr = {.wr_id = 77, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
	struct ag_wr w = ag_wr_make(aq->h, IBV_WR_SEND, 78, 1);
	struct piece pc = {0, 0, len};
	struct ibv_wc wc, awc;

	CHECK_EQ(ibv_post_recv(qp, &rwr, &bad), 0);
	ag_mem_fill(&e->ag, e->ar.h[0], 0, len, stream, 0);
	CHECK_EQ(ag_post_send(&e->ag, &w, &pc, e->ar.h, NULL), 0);
	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &awc, 1, 5000), 1);
	vpoll1(e->cq, &wc);
	CHECK_EQ(wc.wr_id, 77);
	if (wc.status == IBV_WC_SUCCESS) {
		CHECK_STATUS(awc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.byte_len, len);
	}
	return wc.status;
}

/* Replaces *qp (maybe in ERR after an expected error) by a fresh pair. */
static struct ag_qp fresh_pair(struct menv *e, struct ibv_qp **qp)
{
	CHECK_EQ(ibv_destroy_qp(*qp), 0);
	return new_pair(e, qp);
}

/*
 * ibv_rereg_mr(3): what it changed holds for the next work request of any
 * process, and the MR keeps its lkey and rkey (softrdma's choice, as rxe
 * always and mlx5 when it can; rdma-core lets them change), so the peer
 * goes on with the rkey it was given and our receives with the lkey we
 * kept.  Each change follows traffic that made the peer cache the key's
 * old state.  A window bound to the MR never reaches outside its new range.
 */
void test_mr_rereg(void)
{
	const int lw = IBV_ACCESS_LOCAL_WRITE;
	static struct menv e;
	struct ibv_qp *qp, *qp2;
	struct ag_qp aq, aq2;
	struct ibv_mw_bind bind;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t lkey, rkey;
	char *other;

	rng_init(&e.r, 92);
	agent_start(&e.ag, "peer");
	vdev_open(&e.d);
	e.acq = ag_cq(&e.ag, 64, 0);
	aregions_init(&e.ag, &e.ar, IBV_ACCESS_LOCAL_WRITE);
	e.cq = ibv_create_cq(e.d.ctx, 64, NULL, NULL, 0);
	REQUIRE(e.cq);
	aq = new_pair(&e, &qp);
	e.buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	other = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(e.buf != MAP_FAILED && other != MAP_FAILED);
	local_store(&e, 0, BUF_LEN, S_MSG(70));
	pat_fill(other, BUF_LEN, S_MSG(71), 0);
	mr = ibv_reg_mr(e.d.pd, e.buf, BUF_LEN, lw);
	REQUIRE(mr);
	lkey = mr->lkey;
	rkey = mr->rkey;

	sr_note("CHANGE_ACCESS: remote write granted to the rkey the peer holds");
	CHECK_STATUS(agent_write(&e, &aq, 64, 32, rkey, S_MSG(72)), IBV_WC_REM_ACCESS_ERR);
	aq = fresh_pair(&e, &qp);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      lw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND),
		 0);
	CHECK_EQ(mr->lkey, lkey);
	CHECK_EQ(mr->rkey, rkey);
	CHECK(mr->addr == e.buf && mr->length == BUF_LEN && mr->pd == e.d.pd);
	CHECK_STATUS(agent_write(&e, &aq, 100, 200, rkey, S_MSG(73)), IBV_WC_SUCCESS);
	CHECK_MEM(e.buf, e.model, BUF_LEN);

	sr_note("a type-1 window on the MR");
	aq = fresh_pair(&e, &qp);
	mw = ibv_alloc_mw(e.d.pd, IBV_MW_TYPE_1);
	REQUIRE(mw);
	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 80;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = mr;
	bind.bind_info.addr = (uintptr_t)e.buf + 8192;
	bind.bind_info.length = 4096;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	CHECK_EQ(ibv_bind_mw(qp, mw, &bind), 0);
	vpoll1(e.cq, &wc);
	CHECK_STATUS(wc.status, IBV_WC_SUCCESS);
	CHECK_STATUS(agent_write(&e, &aq, 8192, 64, mw->rkey, S_MSG(80)), IBV_WC_SUCCESS);
	CHECK_MEM(e.buf, e.model, BUF_LEN);

	sr_note("CHANGE_TRANSLATION: receives through the same lkey land in the new range");
	aq = fresh_pair(&e, &qp);
	CHECK_STATUS(agent_send_to(&e, &aq, qp, e.buf + 300, 100, lkey, S_MSG(74)), IBV_WC_SUCCESS);
	pat_fill(e.model + 300, 100, S_MSG(74), 0);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, other + 1000, 5000, 0), 0);
	CHECK_EQ(mr->lkey, lkey);
	CHECK_EQ(mr->rkey, rkey);
	CHECK(mr->addr == other + 1000);
	CHECK_EQ(mr->length, 5000);
	CHECK_STATUS(agent_send_to(&e, &aq, qp, other + 4000, 1500, lkey, S_MSG(75)),
		     IBV_WC_SUCCESS);
	CHECK_PAT(other + 4000, 1500, S_MSG(75), 0);
	CHECK_PAT(other, 4000, S_MSG(71), 0);
	CHECK_PAT(other + 5500, BUF_LEN - 5500, S_MSG(71), 5500);
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	/* the old range is out of the MR, for our receives and the peer's writes */
	CHECK_STATUS(agent_send_to(&e, &aq, qp, e.buf + 300, 100, lkey, S_MSG(76)),
		     IBV_WC_LOC_PROT_ERR);
	aq = fresh_pair(&e, &qp);
	CHECK_STATUS(agent_write(&e, &aq, 100, 16, rkey, S_MSG(77)), IBV_WC_REM_ACCESS_ERR);
	aq = fresh_pair(&e, &qp);
	/* and so is the window, bound over the old range */
	CHECK_STATUS(agent_write(&e, &aq, 8192, 64, mw->rkey, S_MSG(81)), IBV_WC_REM_ACCESS_ERR);
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	CHECK_PAT(other, 4000, S_MSG(71), 0);

	sr_note("CHANGE_PD: the same lkey serves the new PD's QPs, not the old one's");
	aq = fresh_pair(&e, &qp);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = e.cq, .pd = e.d.pd2};

		aq2 = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, -1, 0, 0);
		qp2 = vqp_create(&e.d, &s);
		pair_connect(&e.d, qp2, &CONN_DEFAULT, &e.ag, &aq2, &CONN_DEFAULT, &e.r);
	}
	CHECK_STATUS(agent_send_to(&e, &aq, qp, other + 1000, 64, lkey, S_MSG(78)), IBV_WC_SUCCESS);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, e.d.pd2, NULL, 0, 0), 0);
	CHECK_EQ(mr->lkey, lkey);
	CHECK(mr->pd == e.d.pd2);
	CHECK_STATUS(agent_send_to(&e, &aq2, qp2, other + 2000, 64, lkey, S_MSG(79)),
		     IBV_WC_SUCCESS);
	CHECK_PAT(other + 2000, 64, S_MSG(79), 0);
	CHECK_STATUS(agent_send_to(&e, &aq, qp, other + 3000, 64, lkey, S_MSG(82)),
		     IBV_WC_LOC_PROT_ERR);
	CHECK_PAT(other + 3000, 64, S_MSG(71), 3000);
	/* the PD is in use by the MR now, the old one no longer */
	CHECK_EQ(ibv_dealloc_pd(e.d.pd2), EBUSY);

	CHECK_EQ(ibv_dealloc_mw(mw), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_MEM(e.buf, e.model, BUF_LEN);
	CHECK_PAT(other + 2000, 64, S_MSG(79), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_qp(qp2), 0);
	CHECK_EQ(ibv_destroy_cq(e.cq), 0);
	munmap(e.buf, BUF_LEN);
	munmap(other, BUF_LEN);
	vdev_close(&e.d);
	agent_stop(&e.ag);
}
