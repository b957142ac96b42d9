/*
 * Progress of waiting senders without their process's help: a SEND posted
 * before the responder is ready, or before it has a receive, completes once
 * the responder gets there, while the sender sleeps in the completion
 * channel (as on an HCA, whose transport retries and RNR retries run on
 * their own); the same for many waiting QPs at once (one CQ, one SRQ); and a
 * sender waiting on a peer that gets killed gets an error, not a hang.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/wait.h>

#include "tcommon.h"

struct penv {
	struct agent ag;
	struct vdev d;
	struct rng r;
	int acq;
	struct aregions ar;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct vbuf src;
};

static void penv_setup(struct penv *e, uint64_t stream)
{
	rng_init(&e->r, stream);
	agent_start(&e->ag, "responder");
	vdev_open(&e->d);
	e->acq = ag_cq(&e->ag, 1024, 0);
	aregions_init(&e->ag, &e->ar, IBV_ACCESS_LOCAL_WRITE);
	e->ch = ibv_create_comp_channel(e->d.ctx);
	REQUIRE(e->ch);
	e->cq = ibv_create_cq(e->d.ctx, 1024, NULL, e->ch, 0);
	REQUIRE(e->cq);
	vbuf_reg(&e->d, &e->src, 4096, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	pat_fill(e->src.p, 4096, S_MSG(0), 0);
}

static void penv_teardown(struct penv *e)
{
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	CHECK_EQ(ibv_destroy_comp_channel(e->ch), 0);
	vbuf_free(&e->src);
	vdev_close(&e->d);
	if (e->ag.c.pid > 0)
		agent_stop(&e->ag);
}

/* Sleeps in the completion channel until an event (or ms pass); takes it. */
static bool wait_event(struct penv *e, int ms)
{
	struct pollfd p = {e->ch->fd, POLLIN, 0};
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (poll(&p, 1, ms) != 1)
		return false;
	if (ibv_get_cq_event(e->ch, &ev_cq, &ev_ctx))
		return false;
	ibv_ack_cq_events(ev_cq, 1);
	return ev_cq == e->cq;
}

static void post_send64(struct ibv_qp *qp, struct vbuf *src, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)src->p, 64, src->mr->lkey};
	struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, id, &sge, 0, 0), *bad;

	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
}

/* Our QP is connected; the agent's is still in RESET. */
static struct ibv_qp *half_pair(struct penv *e, struct ag_qp *aq, uint32_t *apsn, uint32_t *lpsn)
{
	struct qp_spec s = {.type = IBV_QPT_RC, .scq = e->cq, .send_wr = 8};
	struct ibv_qp *qp = vqp_create(&e->d, &s);

	*aq = ag_qp_create(&e->ag, IBV_QPT_RC, e->acq, e->acq, -1, 0, 0);
	*apsn = (uint32_t)rng_next(&e->r) & 0xffffff;
	*lpsn = (uint32_t)rng_next(&e->r) & 0xffffff;
	vqp_connect(&e->d, qp, *lpsn, aq->qpn, *apsn, &e->ag.gid, &CONN_DEFAULT);
	return qp;
}

/* Asks the agent to connect its QP and post a receive, without waiting. */
static void agent_ready_async(struct penv *e, const struct ag_qp *aq, struct ibv_qp *qp,
			      uint32_t apsn, uint32_t lpsn, uint64_t recv_id)
{
	struct ag_req rq = {.op = AG_QP_CONNECT,
			    .len = 16,
			    .a = {aq->h, qp->qp_num, lpsn, apsn, CONN_DEFAULT.access,
				  CONN_DEFAULT.timeout, CONN_DEFAULT.retry_cnt,
				  CONN_DEFAULT.rnr_retry, CONN_DEFAULT.min_rnr_timer,
				  CONN_DEFAULT.qkey}};
	struct ag_piece pc = {e->ar.h[0], 64, 0};

	ag_send(&e->ag, &rq, e->d.gid.raw);
	rq = (struct ag_req){
	    .op = AG_POST_RECV, .len = sizeof(pc), .a = {aq->h, 0, (int64_t)recv_id, 1}};
	ag_send(&e->ag, &rq, &pc);
}

static void agent_ready_replies(struct penv *e)
{
	struct ag_rep rep;

	CHECK_EQ(ag_reply(&e->ag, &rep, NULL, 0), 0); /* connect */
	CHECK_EQ(ag_reply(&e->ag, &rep, NULL, 0), 0); /* post_recv */
	CHECK_EQ(rep.a[0], 0);
}

static void peer_not_ready(int blocked)
{
	struct penv e;
	struct ag_qp aq;
	uint32_t apsn, lpsn;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	uint64_t t0;

	penv_setup(&e, 70 + (uint64_t)blocked);
	qp = half_pair(&e, &aq, &apsn, &lpsn);
	t0 = sr_now_us();
	sr_note("responder not ready, sender %s", blocked ? "blocked in the channel" : "polling");
	post_send64(qp, &e.src, 1);
	CHECK_EQ(ibv_req_notify_cq(e.cq, 0), 0);
	agent_ready_async(&e, &aq, qp, apsn, lpsn, 5);
	if (blocked) {
		/* an HCA retries after the transport timer (67 ms here) */
		CHECK(wait_event(&e, 3000));
		CHECK_EQ(vpoll(e.cq, &wc, 1, 0), 1);
	} else {
		CHECK_EQ(vpoll(e.cq, &wc, 1, 3000), 1);
		wait_event(&e, 0);
	}
	printf("# sender %s: completed after %.1f ms\n", blocked ? "blocked" : "polling",
	       (sr_now_us() - t0) / 1000.0);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 1, qp->qp_num);
	agent_ready_replies(&e);
	REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 1000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 5, aq.qpn);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	penv_teardown(&e);
}

void test_progress_peer_not_ready(void)
{
	peer_not_ready(0);
}

/*
 * An attribute change in RTS (libfabric's verbs provider sets
 * min_rnr_timer once connected) keeps the connection's PSNs: across hosts
 * the engine started the QP over on every modify, so the next SEND went
 * out with the first one's PSN, the peer took it for a duplicate and
 * acknowledged it, and it was never delivered (and a retransmission the
 * responder had already delivered was delivered again).
 */
void test_progress_rts_modify_keeps_psns(void)
{
	struct ibv_qp_attr a = {.min_rnr_timer = 12};
	struct ag_piece pc;
	struct ibv_wc wc[2];
	struct ag_rep rep;
	struct ag_qp aq;
	uint32_t apsn, lpsn;
	struct ibv_qp *qp;
	struct penv e;

	penv_setup(&e, 76);
	pc = (struct ag_piece){e.ar.h[0], 64, 0};
	qp = half_pair(&e, &aq, &apsn, &lpsn);
	agent_ready_async(&e, &aq, qp, apsn, lpsn, 1);
	agent_ready_replies(&e);
	post_send64(qp, &e.src, 1);
	REQUIRE_EQ(vpoll(e.cq, wc, 1, 3000), 1);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_SEND, 1, qp->qp_num);
	REQUIRE_EQ(ag_poll(&e.ag, e.acq, wc, 1, 3000), 1);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RECV, 1, aq.qpn);

	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER), 0);
	{
		struct ag_req rq = {.op = AG_POST_RECV, .len = sizeof(pc), .a = {aq.h, 0, 2, 1}};

		ag_send(&e.ag, &rq, &pc);
		CHECK_EQ(ag_reply(&e.ag, &rep, NULL, 0), 0);
		CHECK_EQ(rep.a[0], 0);
	}
	post_send64(qp, &e.src, 2);
	REQUIRE_EQ(vpoll(e.cq, wc, 1, 3000), 1);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_SEND, 2, qp->qp_num);
	/* delivered, once */
	CHECK_EQ(ag_poll(&e.ag, e.acq, wc, 2, 1000), 1);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RECV, 2, aq.qpn);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	penv_teardown(&e);
}

void test_progress_peer_not_ready_blocked(void)
{
	peer_not_ready(1);
}

void test_progress_rnr_blocked(void)
{
	struct penv e;
	struct ag_qp aq;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct qp_spec s;
	uint64_t t0;

	penv_setup(&e, 71);
	memset(&s, 0, sizeof(s));
	s.type = IBV_QPT_RC;
	s.scq = e.cq;
	qp = vqp_create(&e.d, &s);
	aq = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, -1, 0, 0);
	pair_connect(&e.d, qp, &CONN_DEFAULT, &e.ag, &aq, &CONN_DEFAULT, &e.r);

	post_send64(qp, &e.src, 1);
	CHECK_EQ(ibv_req_notify_cq(e.cq, 0), 0);
	CHECK(!wait_event(&e, 100)); /* waiting for a receive */
	{
		struct ag_req rq = {
		    .op = AG_POST_RECV, .len = sizeof(struct ag_piece), .a = {aq.h, 0, 5, 1}};
		struct ag_piece p = {e.ar.h[0], 64, 0};

		t0 = sr_now_us();
		ag_send(&e.ag, &rq, &p);
	}
	CHECK(wait_event(&e, 3000));
	printf("# blocked RNR sender woke %.2f ms after the receive was posted\n",
	       (sr_now_us() - t0) / 1000.0);
	CHECK_EQ(vpoll(e.cq, &wc, 1, 0), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 1, qp->qp_num);
	{
		struct ag_rep rep;

		CHECK_EQ(ag_reply(&e.ag, &rep, NULL, 0), 0);
	}
	REQUIRE_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 1000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 5, aq.qpn);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	penv_teardown(&e);
}

#define HANDOFF_ROUNDS 200
#define HANDOFF_K      16

struct poster {
	struct ibv_qp *qp;
	struct vbuf *src;
	uint64_t first;
	atomic_int stop;
	unsigned long extra;
};

/* K SENDs, then posts refused at once (too many SGEs: EINVAL) until told
 * to stop: each takes and releases our sq_lock, as a busy sender does. */
static void *post_k(void *arg)
{
	struct poster *p = arg;
	struct ibv_sge sge = {(uintptr_t)p->src->p, 64, p->src->mr->lkey};
	struct ibv_send_wr bad_wr = rdma_wr(IBV_WR_SEND, 0, &sge, 0, 0), *bad;

	for (int i = 0; i < HANDOFF_K; i++)
		post_send64(p->qp, p->src, p->first + (uint64_t)i);
	bad_wr.num_sge = 1000;
	while (!atomic_load(&p->stop)) {
		int ret = ibv_post_send(p->qp, &bad_wr, &bad);

		if (ret != EINVAL)
			CHECK_EQ(ret, EINVAL);
		p->extra++;
	}
	return NULL;
}

/*
 * The responder's post_recv runs a waiting sender's SQ only if it gets the
 * sender's sq_lock at once; if a thread of the sender holds it (in
 * post_send), that thread runs the SQ when it lets go (sr_exec_recheck).
 * Here a thread of ours posts SENDs for which the agent has no receive yet
 * and then keeps our sq_lock busy, while the agent posts the receives one
 * by one, so the two meet on the lock; nobody polls our CQ meanwhile.  The
 * agent must get every message, in order, each round; a run dropped between
 * the two would leave the last ones waiting for good.  The same with the
 * agent's QP on an SRQ, whose post_srq_recv wakes every sender it feeds.
 */
static void rnr_handoff(bool srq)
{
	struct penv e;
	struct ag_qp aq;
	struct ibv_qp *qp;
	static struct ibv_wc wc[HANDOFF_K];
	struct qp_spec s;
	unsigned long extra = 0;
	int asrq = -1;

	penv_setup(&e, srq ? 74 : 73);
	memset(&s, 0, sizeof(s));
	s.type = IBV_QPT_RC;
	s.scq = e.cq;
	s.send_wr = 2 * HANDOFF_K;
	qp = vqp_create(&e.d, &s);
	if (srq) {
		struct ag_req rq = {.op = AG_SRQ_CREATE, .a = {64, 1, 0}};
		struct ag_rep rep;

		ag_call(&e.ag, &rq, NULL, &rep, NULL, 0, 0);
		asrq = (int)rep.a[0];
	}
	aq = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, asrq, 0, 0);
	pair_connect(&e.d, qp, &CONN_DEFAULT, &e.ag, &aq, &CONN_DEFAULT, &e.r);
	for (int round = 0; round < HANDOFF_ROUNDS; round++) {
		struct poster p = {.qp = qp, .src = &e.src, .first = (uint64_t)round * HANDOFF_K};
		struct ag_piece pc = {e.ar.h[0], 64, 0};
		pthread_t th;
		int got;

		sr_note("round %d", round);
		REQUIRE(pthread_create(&th, NULL, post_k, &p) == 0);
		for (int i = 0; i < HANDOFF_K; i++) {
			struct ag_req rq = {
			    .op = AG_POST_RECV,
			    .len = sizeof(struct ag_piece),
			    .a = {srq ? asrq : aq.h, srq, (int64_t)(p.first + (uint64_t)i), 1}};

			ag_send(&e.ag, &rq, &pc);
		}
		for (int i = 0; i < HANDOFF_K; i++) {
			struct ag_rep rep;

			CHECK_EQ(ag_reply(&e.ag, &rep, NULL, 0), 0);
		}
		got = ag_poll(&e.ag, e.acq, wc, HANDOFF_K, 3000);
		atomic_store(&p.stop, 1);
		pthread_join(th, NULL);
		extra += p.extra;
		REQUIRE_EQ(got, HANDOFF_K);
		for (int i = 0; i < HANDOFF_K; i++)
			CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_RECV, p.first + (uint64_t)i, aq.qpn);
		REQUIRE_EQ(vpoll(e.cq, wc, HANDOFF_K, 3000), HANDOFF_K);
		for (int i = 0; i < HANDOFF_K; i++)
			CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_SEND, p.first + (uint64_t)i,
				 qp->qp_num);
	}
	printf("# %d rounds of %d SENDs, %lu refused posts keeping our sq_lock busy\n",
	       HANDOFF_ROUNDS, HANDOFF_K, extra);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	penv_teardown(&e);
}

void test_progress_rnr_handoff(void)
{
	rnr_handoff(false);
}

void test_progress_rnr_handoff_srq(void)
{
	rnr_handoff(true);
}

#define NWAIT 40

/* Many QPs of one CQ wait for responders that are not ready yet. */
void test_many_stalled_qps(void)
{
	struct penv e;
	struct ag_qp aq[NWAIT];
	struct ibv_qp *qp[NWAIT];
	uint32_t apsn[NWAIT], lpsn[NWAIT];
	static struct ibv_wc wc[NWAIT];
	int n, ok = 0;

	penv_setup(&e, 72);
	for (int i = 0; i < NWAIT; i++) {
		qp[i] = half_pair(&e, &aq[i], &apsn[i], &lpsn[i]);
		post_send64(qp[i], &e.src, (uint64_t)i);
	}
	for (int i = 0; i < NWAIT; i++)
		agent_ready_async(&e, &aq[i], qp[i], apsn[i], lpsn[i], (uint64_t)i);
	for (int i = 0; i < NWAIT; i++)
		agent_ready_replies(&e);
	/* every one of them retries and gets through (we poll all along) */
	n = vpoll(e.cq, wc, NWAIT, 3000);
	CHECK_EQ(n, NWAIT);
	for (int k = 0; k < n; k++)
		ok += wc[k].status == IBV_WC_SUCCESS;
	CHECK_EQ(ok, NWAIT);
	CHECK_EQ(ag_poll(&e.ag, e.acq, wc, NWAIT, 3000), NWAIT);
	for (int i = 0; i < NWAIT; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	penv_teardown(&e);
}

#define NSRQ_QP 80

/* More QPs than one wake-up batch wait (RNR) on one SRQ. */
void test_srq_many_waiting(void)
{
	struct penv e;
	struct ag_qp aq[NSRQ_QP];
	struct ibv_qp *qp[NSRQ_QP];
	static struct ibv_wc wc[NSRQ_QP];
	struct ag_req rq;
	struct ag_rep rep;
	int srq, n, ok = 0;

	penv_setup(&e, 73);
	rq = (struct ag_req){.op = AG_SRQ_CREATE, .a = {256, 1, 0}};
	ag_call(&e.ag, &rq, NULL, &rep, NULL, 0, 0);
	srq = (int)rep.a[0];
	for (int i = 0; i < NSRQ_QP; i++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = e.cq, .send_wr = 4};

		qp[i] = vqp_create(&e.d, &s);
		aq[i] = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, srq, 0, 0);
		pair_connect(&e.d, qp[i], &CONN_DEFAULT, &e.ag, &aq[i], &CONN_DEFAULT, &e.r);
		post_send64(qp[i], &e.src, (uint64_t)i);
	}
	/* all wait for a receive; we do not poll meanwhile */
	for (int i = 0; i < NSRQ_QP; i++) {
		struct piece pc = {i % NREGION, 64 * (uint64_t)(i / NREGION), 64};

		CHECK_EQ(ag_post_recv(&e.ag, srq, 1, (uint64_t)i, &pc, 1, e.ar.h), 0);
	}
	CHECK_EQ(ag_poll(&e.ag, e.acq, wc, NSRQ_QP, 3000), NSRQ_QP);
	n = vpoll(e.cq, wc, NSRQ_QP, 3000);
	CHECK_EQ(n, NSRQ_QP);
	for (int k = 0; k < n; k++)
		ok += wc[k].status == IBV_WC_SUCCESS;
	CHECK_EQ(ok, NSRQ_QP);
	for (int i = 0; i < NSRQ_QP; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	penv_teardown(&e);
}

/* A SEND waits (RNR, forever) when the peer is killed; we sleep in the
 * channel.  An HCA would find the peer's QP gone at its next retry and fail
 * the SEND after the transport retries. */
void test_err_peer_killed_waiting(void)
{
	struct penv e;
	struct ag_qp aq;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct qp_spec s;
	uint64_t t0;
	int st;

	penv_setup(&e, 74);
	memset(&s, 0, sizeof(s));
	s.type = IBV_QPT_RC;
	s.scq = e.cq;
	qp = vqp_create(&e.d, &s);
	aq = ag_qp_create(&e.ag, IBV_QPT_RC, e.acq, e.acq, -1, 0, 0);
	pair_connect(&e.d, qp, &CONN_DEFAULT, &e.ag, &aq, &CONN_DEFAULT, &e.r);
	post_send64(qp, &e.src, 1);
	CHECK_EQ(ibv_req_notify_cq(e.cq, 0), 0);
	CHECK(!wait_event(&e, 50));

	sr_note("peer killed");
	REQUIRE(kill(e.ag.c.pid, SIGKILL) == 0);
	REQUIRE(waitpid(e.ag.c.pid, &st, 0) == e.ag.c.pid);
	e.ag.c.pid = -1;
	close(e.ag.c.fd);
	t0 = sr_now_us();
	CHECK(wait_event(&e, 5000));
	CHECK_EQ(vpoll(e.cq, &wc, 1, 0), 1);
	printf("# waiting SEND failed %.0f ms after the peer was killed\n",
	       (sr_now_us() - t0) / 1000.0);
	CHECK_WC(wc, IBV_WC_RETRY_EXC_ERR, 0, 1, qp->qp_num);
	CHECK_EQ(vqp_state(qp), IBV_QPS_ERR);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	penv_teardown(&e);
}
