/*
 * Error semantics, one case at a time, as IBTA specifies them and rdma-core
 * on a ConnectX or rxe shows them: local protection errors, remote access
 * errors (bad key, out of bounds, missing right on the MR or the QP, key of
 * another PD), length errors, RNR with every retry count and with infinite
 * retries, flushing on ERR, and a peer process killed.  After a fatal error
 * the initiator's QP is in ERR and later work requests are flushed; memory
 * outside what was allowed never changes.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "tcommon.h"

#define TGT_LEN 4096

struct eenv {
	struct agent ag;
	struct vdev d;
	struct rng r;
	int acq;
	struct ibv_cq *cq;
	struct vbuf src;
	struct aregions ar;
};

static void eenv_setup(struct eenv *e, uint64_t stream)
{
	rng_init(&e->r, stream);
	agent_start(&e->ag, "agent");
	vdev_open(&e->d);
	e->acq = ag_cq(&e->ag, 256, 0);
	e->cq = ibv_create_cq(e->d.ctx, 256, NULL, NULL, 0);
	REQUIRE(e->cq);
	vbuf_reg(&e->d, &e->src, TGT_LEN + 64, 64,
		 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, NULL);
	pat_fill(e->src.p, TGT_LEN + 64, S_MSG(0), 0);
	aregions_init(&e->ag, &e->ar, IBV_ACCESS_LOCAL_WRITE);
}

static void eenv_teardown(struct eenv *e)
{
	vbuf_free(&e->src);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	vdev_close(&e->d);
	agent_stop(&e->ag);
}

/* A fresh connected RC pair (errors leave a pair useless). */
static struct ibv_qp *new_pair(struct eenv *e, struct ag_qp *aq, const struct conn *ours,
			       const struct conn *theirs)
{
	struct qp_spec s = {.type = IBV_QPT_RC, .scq = e->cq, .send_wr = 32};
	struct ibv_qp *qp = vqp_create(&e->d, &s);

	*aq = ag_qp_create(&e->ag, IBV_QPT_RC, e->acq, e->acq, -1, 0, 0);
	pair_connect(&e->d, qp, ours ? ours : &CONN_DEFAULT, &e->ag, aq,
		     theirs ? theirs : &CONN_DEFAULT, &e->r);
	return qp;
}

/* ---- local protection ---- */

void test_err_local_prot(void)
{
	struct eenv e;
	struct ag_qp aq;
	struct ibv_qp *qp;
	struct ag_mr tgt;
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	struct vbuf ro;
	struct piece pc = {0, 0, 256};
	int gone_h;
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	eenv_setup(&e, 10);
	tgt = ag_mr_reg(&e.ag, TGT_LEN, 64, all, 0, S_BACKGROUND);

	sr_note("WRITE from an invalid lkey");
	qp = new_pair(&e, &aq, NULL, NULL);
	sge = (struct ibv_sge){(uintptr_t)e.src.p, 256, e.src.mr->lkey ^ 0xff};
	wr = rdma_wr(IBV_WR_RDMA_WRITE, 1, &sge, tgt.addr, tgt.rkey);
	post_expect_fatal(qp, e.cq, &wr, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(ag_mem_check(&e.ag, tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	sr_note("SEND from beyond the end of the MR");
	qp = new_pair(&e, &aq, NULL, NULL);
	CHECK_EQ(ag_post_recv(&e.ag, aq.h, 0, 2, &pc, 1, e.ar.h), 0);
	sge = (struct ibv_sge){(uintptr_t)(e.src.p + TGT_LEN + 64 - 8), 16, e.src.mr->lkey};
	wr = rdma_wr(IBV_WR_SEND, 2, &sge, 0, 0);
	post_expect_fatal(qp, e.cq, &wr, IBV_WC_LOC_PROT_ERR);
	/* nothing reached the responder, which is still fine */
	CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 10), 0);
	CHECK_EQ(ag_qp_state(&e.ag, aq.h), IBV_QPS_RTS);
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	sr_note("READ into an MR without local write");
	qp = new_pair(&e, &aq, NULL, NULL);
	vbuf_reg(&e.d, &ro, 256, 64, 0, NULL);
	sge = (struct ibv_sge){(uintptr_t)ro.p, 256, ro.mr->lkey};
	wr = rdma_wr(IBV_WR_RDMA_READ, 3, &sge, tgt.addr, tgt.rkey);
	post_expect_fatal(qp, e.cq, &wr, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(vbuf_guard_damage(&ro), -1);
	{
		static const char zero[256];

		CHECK_MEM(ro.p, zero, 256);
	}
	vbuf_free(&ro);
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	sr_note("receive with an invalid lkey");
	qp = new_pair(&e, &aq, NULL, NULL);
	{
		/* a deregistered region: the agent posts it with an invalid lkey */
		struct ag_mr gone = ag_mr_reg(&e.ag, 256, 64, IBV_ACCESS_LOCAL_WRITE, 0, S_JUNK);
		struct ag_req rq = {.op = AG_MR_DEREG, .a = {gone.h}};
		int h[1] = {gone.h};
		struct piece bp = {0, 0, 256};

		ag_call(&e.ag, &rq, NULL, NULL, NULL, 0, 0);
		CHECK_EQ(ag_post_recv(&e.ag, aq.h, 0, 4, &bp, 1, h), 0);
		gone_h = gone.h;
	}
	sge = (struct ibv_sge){(uintptr_t)e.src.p, 16, e.src.mr->lkey};
	wr = rdma_wr(IBV_WR_SEND, 5, &sge, 0, 0);
	/* the responder's local error reaches the requester as a Remote
	 * Operational Error NAK */
	post_expect_fatal(qp, e.cq, &wr, IBV_WC_REM_OP_ERR);
	REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_LOC_PROT_ERR, 0, 4, aq.qpn);
	CHECK_EQ(ag_qp_state(&e.ag, aq.h), IBV_QPS_ERR);
	CHECK_EQ(ag_mem_check(&e.ag, gone_h, 0, 256, S_JUNK, 0), -1);
	CHECK_EQ(ag_guard_check(&e.ag, gone_h), -1);
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	CHECK_EQ(ag_guard_check(&e.ag, tgt.h), -1);
	eenv_teardown(&e);
}

/* ---- remote access ---- */

struct rcase {
	const char *what;
	enum ibv_wr_opcode op;
	int mr_access;	    /* the target MR's rights */
	int mr_pd;	    /* 0: the QP's PD, 1: another */
	uint32_t qp_access; /* the target QP's qp_access_flags */
	int64_t off;	    /* from the region start */
	uint32_t len;
	uint32_t key_xor;	   /* spoils the rkey */
	enum ibv_wc_status expect; /* 0: IBV_WC_REM_ACCESS_ERR */
};

void test_err_remote_access(void)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	const uint32_t qall =
	    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	const struct rcase cases[] = {
	    {"invalid rkey", IBV_WR_RDMA_WRITE, rw, 0, qall, 0, 256, 0xff, 0},
	    {"invalid rkey (read)", IBV_WR_RDMA_READ, rw, 0, qall, 0, 256, 0x100, 0},
	    {"past the end", IBV_WR_RDMA_WRITE, rw, 0, qall, TGT_LEN - 8, 16, 0, 0},
	    {"before the start", IBV_WR_RDMA_WRITE, rw, 0, qall, -8, 16, 0, 0},
	    {"read past the end", IBV_WR_RDMA_READ, rw, 0, qall, TGT_LEN - 4, 8, 0, 0},
	    {"longer than the MR", IBV_WR_RDMA_WRITE, rw, 0, qall, 0, TGT_LEN + 1, 0, 0},
	    {"atomic past the end", IBV_WR_ATOMIC_FETCH_AND_ADD, rw, 0, qall, TGT_LEN, 8, 0, 0},
	    {"MR without remote write", IBV_WR_RDMA_WRITE,
	     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 0, qall, 0, 256, 0, 0},
	    {"MR without remote read", IBV_WR_RDMA_READ,
	     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0, qall, 0, 256, 0, 0},
	    {"MR without remote atomic", IBV_WR_ATOMIC_FETCH_AND_ADD,
	     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 0, qall, 8,
	     8, 0, 0},
	    {"QP without remote write", IBV_WR_RDMA_WRITE, rw, 0,
	     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 0, 256, 0, 0},
	    {"QP without remote read", IBV_WR_RDMA_READ, rw, 0,
	     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 0, 256, 0, 0},
	    {"QP without remote atomic", IBV_WR_ATOMIC_CMP_AND_SWP, rw, 0,
	     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 8, 8, 0, 0},
	    {"rkey of another PD", IBV_WR_RDMA_WRITE, rw, 1, qall, 0, 256, 0, 0},
	    {"rkey of another PD (read)", IBV_WR_RDMA_READ, rw, 1, qall, 0, 256, 0, 0},
	    /* not an access error but an invalid request: atomics are 8-byte aligned */
	    {"misaligned atomic", IBV_WR_ATOMIC_CMP_AND_SWP, rw, 0, qall, 4, 8, 0,
	     IBV_WC_REM_INV_REQ_ERR},
	};
	struct eenv e;

	eenv_setup(&e, 11);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct rcase *k = &cases[c];
		struct conn theirs = CONN_DEFAULT;
		struct ag_qp aq;
		struct ibv_qp *qp;
		struct ag_mr tgt;
		struct ibv_sge sge;
		struct ibv_send_wr wr;

		sr_note("%s", k->what);
		tgt = ag_mr_reg(&e.ag, TGT_LEN, 64, k->mr_access, k->mr_pd, S_BACKGROUND);
		theirs.access = IBV_ACCESS_LOCAL_WRITE | k->qp_access;
		qp = new_pair(&e, &aq, NULL, &theirs);
		memset(e.src.p, 0x77, 64);
		sge = (struct ibv_sge){(uintptr_t)e.src.p, k->len, e.src.mr->lkey};
		wr = rdma_wr(k->op, 100 * c, &sge, (uint64_t)((int64_t)tgt.addr + k->off),
			     tgt.rkey ^ k->key_xor);
		post_expect_fatal(qp, e.cq, &wr, k->expect ? k->expect : IBV_WC_REM_ACCESS_ERR);
		/* the target region and the guard bytes around it, in the same pages */
		CHECK_EQ(ag_mem_check(&e.ag, tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);
		CHECK_EQ(ag_guard_check(&e.ag, tgt.h), -1);
		/* a READ or atomic result must not have landed locally either */
		if (k->op != IBV_WR_RDMA_WRITE) {
			char want[64];

			memset(want, 0x77, sizeof(want));
			CHECK_MEM(e.src.p, want, sizeof(want));
		}
		/* the responder moved to ERR as well (as rxe and ConnectX do) */
		CHECK_EQ(ag_qp_state(&e.ag, aq.h), IBV_QPS_ERR);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
		{
			struct ag_req rq = {.op = AG_QP_DESTROY, .a = {aq.h}};

			ag_call(&e.ag, &rq, NULL, NULL, NULL, 0, 0);
		}
	}
	eenv_teardown(&e);
}

/* ---- length ---- */

void test_err_length(void)
{
	struct eenv e;
	struct ag_qp aq;
	struct ibv_qp *qp;
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	struct piece pc[2] = {{0, 0, 60}, {1, 100, 40}};

	eenv_setup(&e, 12);
	for (int round = 0; round < 3; round++) {
		uint32_t len = round == 0 ? 101 : round == 1 ? 4096 : 2 * 1024 * 1024;

		sr_note("%u bytes into a 100-byte receive", len);
		if (len > TGT_LEN + 64) {
			/* a larger source for the big case */
			vbuf_free(&e.src);
			vbuf_reg(&e.d, &e.src, len, 64, IBV_ACCESS_LOCAL_WRITE, NULL);
		}
		qp = new_pair(&e, &aq, NULL, NULL);
		ag_mem_fill(&e.ag, e.ar.h[0], -64, 64 + 60 + 64, S_JUNK, 0);
		CHECK_EQ(ag_post_recv(&e.ag, aq.h, 0, 7, pc, 2, e.ar.h), 0);
		sge = (struct ibv_sge){(uintptr_t)e.src.p, len, e.src.mr->lkey};
		wr = rdma_wr(IBV_WR_SEND, 8, &sge, 0, 0);
		post_expect_fatal(qp, e.cq, &wr, IBV_WC_REM_INV_REQ_ERR);
		REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_LOC_LEN_ERR, 0, 7, aq.qpn);
		CHECK_EQ(ag_qp_state(&e.ag, aq.h), IBV_QPS_ERR);
		/* nothing beyond the receive buffers was written */
		CHECK_EQ(ag_mem_check(&e.ag, e.ar.h[0], 60, 64, S_JUNK, 64 + 60), -1);
		CHECK_EQ(ag_mem_check(&e.ag, e.ar.h[0], -64, 64, S_JUNK, 0), -1);
		CHECK_EQ(ag_mem_check(&e.ag, e.ar.h[1], 140, 64, S_JUNK, 140), -1);
		CHECK_EQ(ag_guard_check(&e.ag, e.ar.h[1]), -1);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}
	eenv_teardown(&e);
}

/* ---- RNR ---- */

#define RNR_TIMER_ENC 18 /* IBTA table 45: 5.12 ms */
#define RNR_TIMER_US  5120

void test_err_rnr_retry(void)
{
	struct eenv e;

	eenv_setup(&e, 13);
	for (int n = 0; n <= 6; n++) {
		struct conn ours = CONN_DEFAULT, theirs = CONN_DEFAULT;
		struct ag_qp aq;
		struct ibv_qp *qp;
		struct ibv_sge sge = {(uintptr_t)e.src.p, 64, e.src.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, 50 + (uint64_t)n, &sge, 0, 0), *bad;
		struct ibv_wc wc;
		uint64_t t0, dt, expect = (uint64_t)(n + 1) * RNR_TIMER_US;
		struct piece pc = {0, 0, 64};
		bool sleep_instead = n == 3;

		sr_note("rnr_retry %d", n);
		ours.rnr_retry = (uint8_t)n;
		theirs.min_rnr_timer = RNR_TIMER_ENC; /* the responder's timer is the one used */
		qp = new_pair(&e, &aq, &ours, &theirs);
		t0 = sr_now_us();
		CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
		if (sleep_instead) {
			/* nobody polls: the failure must come all the same */
			sr_sleep_ms((unsigned)(2 * expect / 1000 + 100));
			CHECK_EQ(vpoll(e.cq, &wc, 1, 0), 1);
		} else {
			REQUIRE_EQ(vpoll(e.cq, &wc, 1, 5000), 1);
		}
		dt = sr_now_us() - t0;
		CHECK_WC(wc, IBV_WC_RNR_RETRY_EXC_ERR, 0, 50 + (uint64_t)n, qp->qp_num);
		printf("# rnr_retry %d: failed after %.1f ms (%d x %.2f ms = %.1f ms expected)\n",
		       n, dt / 1000.0, n + 1, RNR_TIMER_US / 1000.0, expect / 1000.0);
		/* the requester waited at least its retries' worth (C9-152) */
		CHECK_CMP(dt, >=, (uint64_t)n * RNR_TIMER_US * 9 / 10);
		if (!sleep_instead)
			CHECK_CMP(dt, <=, expect + 500000);
		CHECK_EQ(vqp_state(qp), IBV_QPS_ERR);
		wr.wr_id = 60 + (uint64_t)n;
		CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
		vpoll1(e.cq, &wc);
		CHECK_WC(wc, IBV_WC_WR_FLUSH_ERR, 0, 60 + (uint64_t)n, qp->qp_num);
		/* an RNR failure is the requester's: the responder stays ready, and the
		 * failed message is not delivered to a receive posted afterwards */
		CHECK_EQ(ag_qp_state(&e.ag, aq.h), IBV_QPS_RTS);
		CHECK_EQ(ag_post_recv(&e.ag, aq.h, 0, 70, &pc, 1, e.ar.h), 0);
		CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 20), 0);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}
	eenv_teardown(&e);
}

void test_err_rnr_infinite(void)
{
	struct eenv e;
	struct ag_qp aq;
	struct ibv_qp *qp;
	struct conn ours = CONN_DEFAULT;
	struct ibv_wc wc;
	struct ag_mr tgt;
	static char got[512];

	eenv_setup(&e, 14);
	ours.rnr_retry = 7;
	qp = new_pair(&e, &aq, &ours, NULL);
	tgt = ag_mr_reg(&e.ag, TGT_LEN, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
			S_BACKGROUND);
	for (int round = 0; round < 3; round++) {
		/* rounds 0, 1: SEND; round 2: RDMA WRITE with immediate */
		struct ibv_sge sge = {(uintptr_t)e.src.p, 512, e.src.mr->lkey};
		struct ibv_send_wr wr =
				       rdma_wr(round < 2 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE_WITH_IMM,
					       80 + (uint64_t)round, &sge, tgt.addr + 64, tgt.rkey),
				   *bad;
		struct piece pc = {0, 0, 512};
		uint64_t t0;

		pat_fill(e.src.p, 512, S_MSG(round), 0);
		wr.imm_data = htonl(0xabcd0000u + (uint32_t)round);
		CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
		if (round == 1) {
			/* not polling at all: the receiver's post_recv delivers it */
			sr_note("waiting, not polling");
			sr_sleep_ms(300);
		} else {
			/* polling meanwhile: nothing completes, however long */
			sr_note("waiting, polling (round %d)", round);
			vpoll_none(e.cq, round ? 300 : 1200);
		}
		/* nothing of the message has landed yet */
		CHECK_EQ(ag_mem_check(&e.ag, tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);
		t0 = sr_now_us();
		CHECK_EQ(ag_post_recv(&e.ag, aq.h, 0, 90 + (uint64_t)round, &pc, 1, e.ar.h), 0);
		REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 5000), 1);
		if (round < 2) {
			CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 90 + (uint64_t)round, aq.qpn);
			ag_mem_read(&e.ag, e.ar.h[0], 0, 512, got);
			CHECK_PAT(got, 512, S_MSG(round), 0);
		} else {
			CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 92, aq.qpn);
			CHECK_EQ(ntohl(wc.imm_data), 0xabcd0002u);
			CHECK_EQ(ag_mem_check(&e.ag, tgt.h, 64, 512, S_MSG(2), 0), -1);
		}
		CHECK_EQ(wc.byte_len, 512);
		REQUIRE_EQ(vpoll(e.cq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, round < 2 ? IBV_WC_SEND : IBV_WC_RDMA_WRITE,
			 80 + (uint64_t)round, qp->qp_num);
		printf("# round %d: sender completed %.2f ms after the receive was posted\n", round,
		       (sr_now_us() - t0) / 1000.0);
		CHECK_EQ(vqp_state(qp), IBV_QPS_RTS);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	eenv_teardown(&e);
}

/* ---- flush ---- */

void test_err_flush(void)
{
	struct eenv e;
	struct ag_qp aq;
	struct ibv_qp *qp;
	struct ibv_cq *rcq;
	struct ibv_wc wc[16];
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;

	eenv_setup(&e, 15);
	rcq = ibv_create_cq(e.d.ctx, 64, NULL, NULL, 0);
	REQUIRE(rcq);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = e.cq, .rcq = rcq};

		qp = vqp_create(&e.d, &s);
		aq = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, -1, 0, 0);
		pair_connect(&e.d, qp, &CONN_DEFAULT, &e.ag, &aq, &CONN_DEFAULT, &e.r);
	}
	/* a SEND waiting for a receive (RNR, retried forever) and ten receives */
	sge = (struct ibv_sge){(uintptr_t)e.src.p, 64, e.src.mr->lkey};
	wr = rdma_wr(IBV_WR_SEND, 1, &sge, 0, 0);
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	for (int i = 0; i < 10; i++) {
		sge = (struct ibv_sge){(uintptr_t)(e.src.p + 64 * i), 64, e.src.mr->lkey};
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 100 + (uint64_t)i;
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
	}
	vpoll_none(e.cq, 20);
	vpoll_none(rcq, 1);

	sr_note("modify to ERR");
	CHECK_EQ(vqp_set_state(qp, IBV_QPS_ERR), 0);
	CHECK_EQ(vqp_state(qp), IBV_QPS_ERR);
	CHECK_EQ(qp->state, IBV_QPS_ERR);
	CHECK_EQ(vpoll(rcq, wc, 10, 5000), 10);
	for (int i = 0; i < 10; i++)
		CHECK_WC(wc[i], IBV_WC_WR_FLUSH_ERR, 0, 100 + (uint64_t)i, qp->qp_num);
	CHECK_EQ(vpoll(e.cq, wc, 1, 5000), 1);
	CHECK_WC(wc[0], IBV_WC_WR_FLUSH_ERR, 0, 1, qp->qp_num);

	sr_note("posting in ERR");
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 200;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
	CHECK_EQ(vpoll(rcq, wc, 1, 5000), 1);
	CHECK_WC(wc[0], IBV_WC_WR_FLUSH_ERR, 0, 200, qp->qp_num);
	wr = rdma_wr(IBV_WR_SEND, 201, &sge, 0, 0);
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	wr = rdma_wr(IBV_WR_RDMA_WRITE, 202, &sge, 0, 0);
	wr.send_flags = 0; /* unsignaled, but in error: it completes */
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	CHECK_EQ(vpoll(e.cq, wc, 2, 5000), 2);
	CHECK_WC(wc[0], IBV_WC_WR_FLUSH_ERR, 0, 201, qp->qp_num);
	CHECK_WC(wc[1], IBV_WC_WR_FLUSH_ERR, 0, 202, qp->qp_num);
	vpoll_none(e.cq, 5);
	vpoll_none(rcq, 5);

	/* the flushed SEND is gone: a receive posted at the peer now stays empty */
	{
		struct piece pc = {0, 0, 64};
		struct ag_req rq;

		CHECK_EQ(ag_post_recv(&e.ag, aq.h, 0, 300, &pc, 1, e.ar.h), 0);
		CHECK_EQ(ag_poll(&e.ag, e.acq, wc, 1, 30), 0);
		/* and the same at the other process: its QP to ERR flushes its receive */
		sr_note("peer QP to ERR");
		rq = (struct ag_req){.op = AG_QP_STATE, .a = {aq.h, IBV_QPS_ERR}};
		ag_call(&e.ag, &rq, NULL, NULL, NULL, 0, 0);
		REQUIRE_EQ(ag_poll(&e.ag, e.acq, wc, 1, 5000), 1);
		CHECK_WC(wc[0], IBV_WC_WR_FLUSH_ERR, 0, 300, aq.qpn);
	}
	/* RESET brings it back to a usable state */
	sr_note("back through RESET");
	CHECK_EQ(vqp_set_state(qp, IBV_QPS_RESET), 0);
	{
		struct ag_req rq = {.op = AG_QP_STATE, .a = {aq.h, IBV_QPS_RESET}};

		ag_call(&e.ag, &rq, NULL, NULL, NULL, 0, 0);
		pair_connect(&e.d, qp, &CONN_DEFAULT, &e.ag, &aq, &CONN_DEFAULT, &e.r);
	}
	{
		struct ag_mr tgt =
		    ag_mr_reg(&e.ag, 256, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
			      S_BACKGROUND);

		sge = (struct ibv_sge){(uintptr_t)e.src.p, 256, e.src.mr->lkey};
		wr = rdma_wr(IBV_WR_RDMA_WRITE, 400, &sge, tgt.addr, tgt.rkey);
		post_expect(qp, e.cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		CHECK_EQ(ag_mem_check(&e.ag, tgt.h, 0, 256, S_MSG(0), 0), -1);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(rcq), 0);
	eenv_teardown(&e);
}

/* ---- a responder's SQ lock busy when it goes to ERR ---- */

/*
 * Our QP's SEND waits for an RNR retry for ever (rnr_retry 7: the peer has
 * no receive).  The peer then RDMA WRITEs to us with a bad rkey: the peer's
 * process, which runs the WRITE, moves our QP to ERR as a responder and
 * must flush our SQ, but finds our sq_lock held (made so for every
 * responder by SOFTRDMA_FAULT_RESPONDER_SQ_BUSY: in life, our thread in
 * post_send or the daemon at that instant).  The waiting SEND must still
 * complete with WR_FLUSH_ERR: round 0 polls for it (our poll pays the owed
 * flush), round 1 blocks on a completion channel without polling (the
 * daemon pays it, and the event comes).
 */
void test_err_responder_sq_busy(void)
{
	struct eenv e;

	REQUIRE(setenv("SOFTRDMA_FAULT_RESPONDER_SQ_BUSY", "1", 1) == 0); /* the agent's too */
	eenv_setup(&e, 16);
	for (int round = 0; round < 2; round++) {
		struct conn ours = CONN_DEFAULT;
		struct ibv_comp_channel *ch = round ? ibv_create_comp_channel(e.d.ctx) : NULL;
		struct ibv_cq *cq = ibv_create_cq(e.d.ctx, 16, NULL, ch, 0);
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq, .send_wr = 32};
		struct ibv_sge sge = {(uintptr_t)e.src.p, 64, e.src.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, 500 + (uint64_t)round, &sge, 0, 0),
				   *bad;
		struct ag_wr w = ag_wr_make(0, IBV_WR_RDMA_WRITE, 600 + (uint64_t)round, 1);
		struct piece pc = {0, 0, 64};
		struct ibv_wc wc;
		struct ag_qp aq;
		struct ibv_qp *qp;
		uint64_t t0;

		sr_note(round ? "blocked on a completion channel" : "polling");
		REQUIRE(cq && (!round || ch));
		qp = vqp_create(&e.d, &s);
		aq = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, -1, 0, 0);
		ours.rnr_retry = 7;
		pair_connect(&e.d, qp, &ours, &e.ag, &aq, &CONN_DEFAULT, &e.r);
		CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
		vpoll_none(cq, 50); /* waiting for a receive, for ever */
		if (round)
			CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);

		w.qp = (uint32_t)aq.h;
		w.raddr = (uintptr_t)e.src.p;
		w.rkey = e.src.mr->rkey ^ 0x100; /* no such key */
		t0 = sr_now_us();
		CHECK_EQ(ag_post_send(&e.ag, &w, &pc, e.ar.h, NULL), 0);
		REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, 600 + (uint64_t)round,
			 aq.qpn);
		CHECK_EQ(vqp_state(qp), IBV_QPS_ERR);

		if (round) {
			struct pollfd p = {.fd = ch->fd, .events = POLLIN};
			struct ibv_cq *ev_cq;
			void *ev_ctx;

			CHECK_EQ(poll(&p, 1, 5000), 1);
			CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
			CHECK(ev_cq == cq);
			ibv_ack_cq_events(ev_cq, 1);
			CHECK_EQ(vpoll(cq, &wc, 1, 0), 1);
		} else {
			CHECK_EQ(vpoll(cq, &wc, 1, 5000), 1);
		}
		CHECK_WC(wc, IBV_WC_WR_FLUSH_ERR, 0, 500 + (uint64_t)round, qp->qp_num);
		printf("# round %d: the waiting SEND was flushed %.1f ms after the peer's error\n",
		       round, (sr_now_us() - t0) / 1000.0);
		vpoll_none(cq, 5);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
		if (ch)
			CHECK_EQ(ibv_destroy_comp_channel(ch), 0);
		{
			struct ag_req rq = {.op = AG_QP_DESTROY, .a = {aq.h}};

			ag_call(&e.ag, &rq, NULL, NULL, NULL, 0, 0);
		}
	}
	eenv_teardown(&e);
}

/* ---- a peer process killed ---- */

void test_err_peer_killed(void)
{
	struct eenv e;
	struct ag_qp aq[2];
	struct ibv_qp *qp[2];
	struct ag_mr tgt;
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	struct piece pc = {0, 0, 64};
	/* timeout 14: 4.096 us * 2^14 = 67 ms per try, retry_cnt 7: 8 tries */
	const uint64_t budget_us = (4096ull << 14) / 1000 * 8;
	int st;

	eenv_setup(&e, 16);
	tgt = ag_mr_reg(&e.ag, TGT_LEN, 64,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			0, S_BACKGROUND);
	for (int p = 0; p < 2; p++)
		qp[p] = new_pair(&e, &aq[p], NULL, NULL);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(ag_post_recv(&e.ag, aq[0].h, 0, (uint64_t)i, &pc, 1, e.ar.h), 0);

	/* all is well while it lives */
	sge = (struct ibv_sge){(uintptr_t)e.src.p, 64, e.src.mr->lkey};
	wr = rdma_wr(IBV_WR_SEND, 1, &sge, 0, 0);
	post_expect(qp[0], e.cq, &wr, IBV_WC_SUCCESS, IBV_WC_SEND);
	wr = rdma_wr(IBV_WR_RDMA_WRITE, 2, &sge, tgt.addr, tgt.rkey);
	post_expect(qp[1], e.cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	sr_note("peer killed");
	REQUIRE(kill(e.ag.c.pid, SIGKILL) == 0);
	REQUIRE(waitpid(e.ag.c.pid, &st, 0) == e.ag.c.pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	e.ag.c.pid = -1;
	/* Known issue (see the suite's report): the peer's QPs live on until
	 * softrdmad has noticed the death, so a SEND posted in that window still
	 * "succeeds" into the dead process's receive queue, where on an HCA the
	 * QP is gone by the time waitpid() returns.  Give the daemon a moment. */
	sr_sleep_ms(50);

	for (int p = 0; p < 2; p++) {
		uint64_t t0 = sr_now_us(), dt;
		int n;

		sr_note("%s to the dead peer", p ? "RDMA WRITE" : "SEND");
		wr = p ? rdma_wr(IBV_WR_RDMA_WRITE, 20, &sge, tgt.addr, tgt.rkey)
		       : rdma_wr(IBV_WR_SEND, 10, &sge, 0, 0);
		{
			struct ibv_send_wr *bad;

			CHECK_EQ(ibv_post_send(qp[p], &wr, &bad), 0);
		}
		n = vpoll(e.cq, &wc, 1, 10000);
		dt = sr_now_us() - t0;
		REQUIRE_EQ(n, 1);
		CHECK_WC(wc, IBV_WC_RETRY_EXC_ERR, 0, wr.wr_id, qp[p]->qp_num);
		printf("# %s: %s after %.0f ms (budget %.0f ms)\n", p ? "WRITE" : "SEND",
		       ibv_wc_status_str(wc.status), dt / 1000.0, budget_us / 1000.0);
		CHECK_CMP(dt, <=, budget_us * 3 / 2 + 500000);
		CHECK_EQ(vqp_state(qp[p]), IBV_QPS_ERR);
		wr.wr_id++;
		post_expect(qp[p], e.cq, &wr, IBV_WC_WR_FLUSH_ERR, 0);
	}
	/* and the survivor tears down normally */
	for (int p = 0; p < 2; p++)
		CHECK_EQ(ibv_destroy_qp(qp[p]), 0);
	vbuf_free(&e.src);
	CHECK_EQ(ibv_destroy_cq(e.cq), 0);
	vdev_close(&e.d);
	close(e.ag.c.fd);
}

/* ---- destroying a QP takes its completions with it ---- */

/* Two RC QPs in INIT on one CQ, four receives each, interleaved; ERR
 * flushes all eight into the CQ. */
static void two_flushed_qps(struct vdev *d, struct ibv_cq *cq, struct vbuf *b, struct ibv_qp *qp[2])
{
	for (int k = 0; k < 2; k++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq, .rcq = cq};
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
					.port_num = 1,
					.qp_access_flags = IBV_ACCESS_LOCAL_WRITE};

		qp[k] = vqp_create(d, &s);
		CHECK_EQ(ibv_modify_qp(qp[k], &a,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   IBV_QP_ACCESS_FLAGS),
			 0);
	}
	for (int i = 0; i < 8; i++) {
		struct ibv_sge sge = {(uintptr_t)b->p + 64 * (unsigned)i, 64, b->mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 100 * (uint64_t)(i % 2 + 1) + (uint64_t)i,
					  .sg_list = &sge,
					  .num_sge = 1},
				   *bad;

		CHECK_EQ(ibv_post_recv(qp[i % 2], &rwr, &bad), 0);
	}
	CHECK_EQ(vqp_set_state(qp[0], IBV_QPS_ERR), 0);
	CHECK_EQ(vqp_set_state(qp[1], IBV_QPS_ERR), 0);
}

/* As on a ConnectX (mlx5 cleans the QP's entries out of its CQs at destroy),
 * no completion of a destroyed QP is polled afterwards, while those of the
 * other QPs of the CQ still are, in order; through ibv_poll_cq and through
 * the extended CQ's start_poll/next_poll.  libfabric's rxm depends on it. */
void test_err_destroy_drops_cqes(void)
{
	struct vdev d;
	struct vbuf b;
	struct ibv_qp *qp[2];
	struct ibv_wc wc[8];

	vdev_open(&d);
	vbuf_reg(&d, &b, 4096, 64, IBV_ACCESS_LOCAL_WRITE, NULL);

	sr_note("ibv_poll_cq");
	{
		struct ibv_cq *cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
		uint32_t live;

		REQUIRE(cq);
		two_flushed_qps(&d, cq, &b, qp);
		live = qp[1]->qp_num;
		usleep(100 * 1000); /* every flush in the ring, none polled */
		CHECK_EQ(ibv_destroy_qp(qp[0]), 0);
		CHECK_EQ(vpoll(cq, wc, 4, 2000), 4);
		for (int i = 0; i < 4; i++)
			CHECK_WC(wc[i], IBV_WC_WR_FLUSH_ERR, 0, 201 + 2 * (uint64_t)i, live);
		vpoll_none(cq, 50);
		CHECK_EQ(ibv_destroy_qp(qp[1]), 0);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
	}

	sr_note("ibv_start_poll / ibv_next_poll");
	{
		struct ibv_cq_init_attr_ex ca = {.cqe = 64, .wc_flags = IBV_WC_EX_WITH_QP_NUM};
		struct ibv_poll_cq_attr pa = {0};
		struct ibv_cq_ex *cqx = ibv_create_cq_ex(d.ctx, &ca);
		uint32_t live;
		int n = 0, ret;

		REQUIRE(cqx);
		two_flushed_qps(&d, ibv_cq_ex_to_cq(cqx), &b, qp);
		live = qp[1]->qp_num;
		usleep(100 * 1000);
		CHECK_EQ(ibv_destroy_qp(qp[0]), 0);
		for (ret = ibv_start_poll(cqx, &pa); !ret; ret = ibv_next_poll(cqx)) {
			CHECK_STATUS(cqx->status, IBV_WC_WR_FLUSH_ERR);
			CHECK_EQ(cqx->wr_id, 201 + 2 * (uint64_t)n);
			CHECK_EQ(ibv_wc_read_qp_num(cqx), live);
			n++;
		}
		if (n)
			ibv_end_poll(cqx);
		CHECK_EQ(ret, ENOENT);
		CHECK_EQ(n, 4);
		CHECK_EQ(ibv_destroy_qp(qp[1]), 0);
		CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	}
	vbuf_free(&b);
	vdev_close(&d);
}
