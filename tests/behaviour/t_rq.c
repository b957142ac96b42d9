/*
 * A QP's own receive queue counts a receive WQE against max_recv_wr until
 * its completion is polled, not merely until a message consumed it (as
 * mlx5 does; docs/architecture.md, "Receive rings"):
 *
 *  - max_recv_wr receives post; one more fails with ENOMEM and bad_wr
 *    pointing at it;
 *  - once messages have consumed all of them, posting still fails while
 *    the completions sit in the CQ;
 *  - each polled completion frees exactly one slot: a chain longer than
 *    the free slots posts its head and stops with ENOMEM at the first WR
 *    that does not fit, and what did post receives the next messages, in
 *    order, byte for byte;
 *  - after everything is polled, max_recv_wr post again.
 */
#include "tcommon.h"

#define SLOT   256 /* bytes per receive buffer */
#define MSG    100 /* bytes per message */
#define MAX_RQ 64

struct renv {
	struct agent ag;
	struct aregions ar;
	struct ag_qp aq;
	int acq;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct vbuf b;
	uint32_t rq; /* max_recv_wr as created */
	unsigned next_msg;
};

/* A chain of n receives, wr_id base+i into buffer slot slot0+i (never
 * reused: a slot may still hold a message not yet checked);
 * returns the post result and how many were posted before it stopped. */
static int post_chain(struct renv *e, uint64_t base, unsigned slot0, unsigned n, unsigned *posted)
{
	struct ibv_sge sge[MAX_RQ + 1];
	struct ibv_recv_wr wr[MAX_RQ + 1], *bad = NULL;
	int ret;

	REQUIRE(n >= 1 && n <= MAX_RQ + 1);
	for (unsigned i = 0; i < n; i++) {
		unsigned s = slot0 + i;

		REQUIRE(s < 4 * e->rq);
		sge[i] = (struct ibv_sge){(uintptr_t)(e->b.p + s * SLOT), SLOT, e->b.mr->lkey};
		wr[i] = (struct ibv_recv_wr){.wr_id = base + i, .sg_list = &sge[i], .num_sge = 1};
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		pat_fill(e->b.p + s * SLOT, SLOT, S_JUNK, 0);
	}
	ret = ibv_post_recv(e->qp, wr, &bad);
	*posted = ret ? (unsigned)(bad - wr) : n;
	if (ret)
		CHECK(bad >= wr && bad < wr + n);
	else
		CHECK(bad == NULL);
	return ret;
}

/* The agent SENDs n messages of MSG bytes; each must complete at its end
 * (our receives are there), and the payload streams are S_MSG(k). */
static void agent_sends(struct renv *e, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned k = e->next_msg++;
		struct ag_wr w = ag_wr_make(e->aq.h, IBV_WR_SEND, 5000 + k, 1);
		struct piece pc = {0, 0, MSG};
		struct ibv_wc wc;

		ag_mem_fill(&e->ag, e->ar.h[0], 0, MSG, S_MSG(k), 0);
		CHECK_EQ(ag_post_send(&e->ag, &w, &pc, e->ar.h, NULL), 0);
		REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 5000 + (uint64_t)k, e->aq.qpn);
	}
}

/* Polls one receive completion: wr_id, length and the bytes of message k
 * in buffer slot s, and nothing after them. */
static void poll_recv(struct renv *e, uint64_t wr_id, unsigned s, unsigned k)
{
	struct ibv_wc wc;

	REQUIRE_EQ(vpoll(e->cq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, wr_id, e->qp->qp_num);
	CHECK_EQ(wc.byte_len, MSG);
	CHECK_PAT(e->b.p + s * SLOT, MSG, S_MSG(k), 0);
	CHECK_PAT(e->b.p + s * SLOT + MSG, SLOT - MSG, S_JUNK, MSG);
}

void test_rq_freed_by_poll(void)
{
	struct renv e = {0};
	struct rng r;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	unsigned posted, rq;

	rng_init(&r, 91);
	agent_start(&e.ag, "sender");
	struct vdev d;

	vdev_open(&d);
	e.acq = ag_cq(&e.ag, 64, 0);
	aregions_init(&e.ag, &e.ar, IBV_ACCESS_LOCAL_WRITE);
	e.cq = ibv_create_cq(d.ctx, 4 * MAX_RQ, NULL, NULL, 0);
	REQUIRE(e.cq);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = e.cq, .rcq = e.cq, .recv_wr = 8};

		e.qp = vqp_create(&d, &s);
	}
	e.aq = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, -1, 0, 0);
	pair_connect(&d, e.qp, &CONN_DEFAULT, &e.ag, &e.aq, &CONN_DEFAULT, &r);
	REQUIRE_EQ(ibv_query_qp(e.qp, &attr, IBV_QP_CAP, &init), 0);
	rq = e.rq = init.cap.max_recv_wr;
	printf("# max_recv_wr %u\n", rq);
	REQUIRE(rq >= 8 && rq <= MAX_RQ);
	vbuf_reg(&d, &e.b, 4 * rq * SLOT, 64, IBV_ACCESS_LOCAL_WRITE, NULL);

	sr_note("max_recv_wr receives, then one more");
	for (unsigned i = 0; i < rq; i++)
		CHECK_EQ(post_chain(&e, 100 + i, i, 1, &posted), 0);
	CHECK_EQ(post_chain(&e, 999, rq, 1, &posted), ENOMEM);
	CHECK_EQ(posted, 0);

	sr_note("all consumed, none polled");
	agent_sends(&e, rq);
	CHECK_EQ(post_chain(&e, 998, rq, 1, &posted), ENOMEM);
	CHECK_EQ(posted, 0);

	sr_note("one polled frees one slot");
	poll_recv(&e, 100, 0, 0);
	CHECK_EQ(post_chain(&e, 200, rq + 1, 2, &posted), ENOMEM); /* 200 fits, 201 does not */
	CHECK_EQ(posted, 1);
	CHECK_EQ(post_chain(&e, 997, rq + 3, 1, &posted), ENOMEM);

	sr_note("the rest polled");
	for (unsigned i = 1; i < rq; i++)
		poll_recv(&e, 100 + i, i, i);
	vpoll_none(e.cq, 10);
	/* 200 is outstanding: rq - 1 free, a chain of rq stops at its last */
	CHECK_EQ(post_chain(&e, 300, rq + 4, rq, &posted), ENOMEM);
	CHECK_EQ(posted, rq - 1);

	sr_note("what was posted receives, in order");
	agent_sends(&e, rq);
	poll_recv(&e, 200, rq + 1, rq);
	for (unsigned i = 0; i + 1 < rq; i++)
		poll_recv(&e, 300 + i, rq + 4 + i, rq + 1 + i);
	vpoll_none(e.cq, 10);

	sr_note("all polled: max_recv_wr post again");
	CHECK_EQ(post_chain(&e, 400, 2 * rq + 4, rq, &posted), 0);
	CHECK_EQ(post_chain(&e, 996, 3 * rq + 4, 1, &posted), ENOMEM);
	agent_sends(&e, 1);
	poll_recv(&e, 400, 2 * rq + 4, 2 * rq);
	CHECK_EQ(vqp_state(e.qp), IBV_QPS_RTS);
	CHECK_EQ(vbuf_guard_damage(&e.b), -1);

	CHECK_EQ(ibv_destroy_qp(e.qp), 0);
	CHECK_EQ(ibv_destroy_cq(e.cq), 0);
	vbuf_free(&e.b);
	vdev_close(&d);
	agent_stop(&e.ag);
}

/* ---- the same for an SRQ, fed by two QPs with a receive CQ each ---- */

#define SRQ_WR 8

/* n receives into the SRQ, one by one, wr_id base+i; returns how many
 * posted before the first ENOMEM (any other error fails the check) */
static unsigned srq_post(struct ibv_srq *srq, struct vbuf *b, uint64_t base, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct ibv_sge sge = {(uintptr_t)(b->p + ((base + i) % 64) * SLOT), SLOT,
				      b->mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = base + i, .sg_list = &sge, .num_sge = 1}, *bad;
		int ret;

		ret = ibv_post_srq_recv(srq, &wr, &bad);
		if (ret) {
			CHECK_EQ(ret, ENOMEM);
			return i;
		}
	}
	return n;
}

/* n receive completions from cq, in order from wr_id first */
static void srq_poll(struct ibv_cq *cq, uint32_t qpn, uint64_t first, unsigned n)
{
	struct ibv_wc wc;

	for (unsigned i = 0; i < n; i++) {
		REQUIRE_EQ(vpoll(cq, &wc, 1, 5000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, first + i, qpn);
		CHECK_EQ(wc.byte_len, MSG);
	}
}

/*
 * An SRQ WQE also counts against max_wr until its completion is polled
 * (mlx5's rule), so that post_srq_recv never reads the consumers' line
 * (ib_send_bw --use-srq 8 B: ~5.5 -> ~9 M msg/s).  Its completions arrive
 * on the CQs of the QPs it feeds, polled in any order: here two QPs, one
 * receive CQ each, polled one after the other.
 */
void test_srq_freed_by_poll(void)
{
	struct renv e = {0};
	struct rng r;
	struct vdev d;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = SRQ_WR, .max_sge = 1}};
	struct ibv_srq_attr got;
	struct ibv_srq *srq;
	struct ibv_cq *rcq[2];
	struct ibv_qp *qp[2];
	struct ag_qp aq[2];

	rng_init(&r, 92);
	agent_start(&e.ag, "sender");
	vdev_open(&d);
	e.acq = ag_cq(&e.ag, 64, 0);
	aregions_init(&e.ag, &e.ar, IBV_ACCESS_LOCAL_WRITE);
	e.cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	srq = ibv_create_srq(d.pd, &sa);
	REQUIRE(e.cq && srq);
	REQUIRE_EQ(ibv_query_srq(srq, &got), 0);
	REQUIRE_EQ(got.max_wr, SRQ_WR);
	vbuf_reg(&d, &e.b, 64 * SLOT, 64, IBV_ACCESS_LOCAL_WRITE, NULL);
	for (int i = 0; i < 2; i++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = e.cq, .srq = srq};

		rcq[i] = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
		REQUIRE(rcq[i]);
		s.rcq = rcq[i];
		qp[i] = vqp_create(&d, &s);
		aq[i] = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, -1, 0, 0);
		pair_connect(&d, qp[i], &CONN_DEFAULT, &e.ag, &aq[i], &CONN_DEFAULT, &r);
	}

	sr_note("max_wr receives, then one more");
	CHECK_EQ(srq_post(srq, &e.b, 0, SRQ_WR + 1), SRQ_WR);
	sr_note("all consumed (4 by each QP), none polled");
	e.aq = aq[0];
	agent_sends(&e, SRQ_WR / 2);
	e.aq = aq[1];
	agent_sends(&e, SRQ_WR / 2);
	CHECK_EQ(srq_post(srq, &e.b, 100, 1), 0u);
	sr_note("the first QP's polled: its four slots are free");
	srq_poll(rcq[0], qp[0]->qp_num, 0, SRQ_WR / 2);
	CHECK_EQ(srq_post(srq, &e.b, 200, SRQ_WR), SRQ_WR / 2);
	sr_note("the second's polled: four more");
	srq_poll(rcq[1], qp[1]->qp_num, SRQ_WR / 2, SRQ_WR / 2);
	CHECK_EQ(srq_post(srq, &e.b, 200 + SRQ_WR / 2, SRQ_WR), SRQ_WR / 2);
	sr_note("what was posted receives, in order, on whichever QP");
	e.aq = aq[1];
	agent_sends(&e, SRQ_WR);
	srq_poll(rcq[1], qp[1]->qp_num, 200, SRQ_WR);
	vpoll_none(rcq[0], 5);

	for (int i = 0; i < 2; i++) {
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
		CHECK_EQ(ibv_destroy_cq(rcq[i]), 0);
	}
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_destroy_cq(e.cq), 0);
	vbuf_free(&e.b);
	vdev_close(&d);
	agent_stop(&e.ag);
}
