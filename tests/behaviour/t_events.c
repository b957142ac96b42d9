/*
 * Progress without the application: a receiver blocked in ibv_get_cq_event
 * (CQ armed, nothing else running in it) gets its completions and the event
 * from the sender's side; solicited-only arming; and the completion
 * channel's fd is a real fd: poll() reports POLLIN when an event is pending,
 * and with O_NONBLOCK ibv_get_cq_event fails with EAGAIN when none is.
 */
#include <fcntl.h>
#include <poll.h>

#include "tcommon.h"

static void send_to(struct ibv_qp *qp, struct ibv_cq *cq, struct vbuf *b, uint64_t id, uint32_t len,
		    unsigned flags)
{
	struct ibv_sge sge = {(uintptr_t)b->p, len, b->mr->lkey};
	struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, id, &sge, 0, 0);

	wr.send_flags |= flags;
	post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_SEND);
}

static bool readable(int fd, int ms)
{
	struct pollfd p = {fd, POLLIN, 0};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

void test_cq_event_blocking(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq;
	struct aregions ar;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct vbuf b;
	struct ibv_wc wc[2];
	int acq;

	rng_init(&r, 30);
	agent_start(&ag, "receiver");
	vdev_open(&d);
	acq = ag_cq(&ag, 64, 1); /* with a completion channel */
	aq = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, -1, 0, 0);
	aregions_init(&ag, &ar, IBV_ACCESS_LOCAL_WRITE);
	cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		qp = vqp_create(&d, &s);
	}
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
	vbuf_reg(&d, &b, 4096, 0, IBV_ACCESS_LOCAL_WRITE, NULL);

	for (int round = 0; round < 5; round++) {
		struct piece pc = {0, 0, 4096};
		struct ag_req rq = {.op = AG_GET_CQ_EVENT, .a = {acq, 0}};
		struct ag_rep rep;
		uint64_t t0;
		uint32_t len = (uint32_t)rng_range(&r, 1, 4096);

		sr_note("round %d", round);
		CHECK_EQ(ag_post_recv(&ag, aq.h, 0, (uint64_t)round, &pc, 1, ar.h), 0);
		rq.op = AG_REQ_NOTIFY;
		rq.a[1] = 0;
		ag_call(&ag, &rq, NULL, NULL, NULL, 0, 0);
		/* the receiver blocks in ibv_get_cq_event... */
		rq = (struct ag_req){.op = AG_GET_CQ_EVENT, .a = {acq, 0}};
		ag_send(&ag, &rq, NULL);
		sr_sleep_ms(30);
		CHECK(!readable(ag.c.fd, 0)); /* ...and is still blocked */
		/* ...and the sender's SEND wakes it */
		pat_fill(b.p, len, S_MSG(round), 0);
		t0 = sr_now_us();
		send_to(qp, cq, &b, 100 + (uint64_t)round, len, 0);
		CHECK_EQ(ag_reply(&ag, &rep, NULL, 0), 0);
		CHECK_EQ(rep.a[0], 0);
		CHECK_EQ(rep.a[2], 1); /* the event names this CQ */
		if (round == 0)
			printf("# blocked receiver woke %.3f ms after the post\n",
			       (sr_now_us() - t0) / 1000.0);
		REQUIRE_EQ(ag_poll(&ag, acq, wc, 1, 1000), 1);
		CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RECV, (uint64_t)round, aq.qpn);
		CHECK_EQ(wc[0].byte_len, len);
		CHECK_EQ(ag_mem_check(&ag, ar.h[0], 0, len, (int64_t)S_MSG(round), 0), -1);
	}

	sr_note("solicited only");
	{
		struct piece pc = {0, 0, 4096};
		struct ag_req rq = {.op = AG_REQ_NOTIFY, .a = {acq, 1}};
		struct ag_rep rep;

		CHECK_EQ(ag_post_recv(&ag, aq.h, 0, 10, &pc, 1, ar.h), 0);
		CHECK_EQ(ag_post_recv(&ag, aq.h, 0, 11, &pc, 1, ar.h), 0);
		ag_call(&ag, &rq, NULL, NULL, NULL, 0, 0);
		send_to(qp, cq, &b, 110, 16, 0);
		rq = (struct ag_req){.op = AG_GET_CQ_EVENT, .a = {acq, 1}};
		ag_call(&ag, &rq, NULL, &rep, NULL, 0, 0);
		CHECK_EQ(rep.a[0], -1); /* an unsolicited completion: no event */
		CHECK_EQ(rep.a[1], EAGAIN);
		send_to(qp, cq, &b, 111, 16, IBV_SEND_SOLICITED);
		ag_call(&ag, &rq, NULL, &rep, NULL, 0, 0);
		CHECK_EQ(rep.a[0], 0);
		CHECK_EQ(rep.a[2], 1);
		CHECK_EQ(ag_poll(&ag, acq, wc, 2, 1000), 2);
		CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RECV, 10, aq.qpn);
		CHECK_WC(wc[1], IBV_WC_SUCCESS, IBV_WC_RECV, 11, aq.qpn);
	}

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}

/* Here we are the receiver, and check the channel fd ourselves. */
void test_comp_channel_fd(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq;
	struct aregions ar;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ev_cq;
	struct ibv_qp *qp;
	struct vbuf b;
	struct ibv_wc wc;
	void *ev_ctx;
	int acq, marker;

	rng_init(&r, 31);
	agent_start(&ag, "sender");
	vdev_open(&d);
	acq = ag_cq(&ag, 64, 0);
	aq = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, -1, 0, 0);
	aregions_init(&ag, &ar, IBV_ACCESS_LOCAL_WRITE);
	ch = ibv_create_comp_channel(d.ctx);
	REQUIRE(ch);
	cq = ibv_create_cq(d.ctx, 64, &marker, ch, 0);
	REQUIRE(cq);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		qp = vqp_create(&d, &s);
	}
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
	vbuf_reg(&d, &b, 4096, 0, IBV_ACCESS_LOCAL_WRITE, NULL);

	REQUIRE(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
	sr_note("nothing pending");
	errno = 0;
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK(!readable(ch->fd, 0));

	for (int round = 0; round < 3; round++) {
		struct ibv_sge sge = {(uintptr_t)b.p, 4096, b.mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = (uint64_t)round, .sg_list = &sge, .num_sge = 1};
		struct ibv_recv_wr *rbad;
		struct ag_wr w = ag_wr_make(aq.h, IBV_WR_SEND, 50 + (uint64_t)round, 1);
		struct piece pc = {0, 0, 100};

		sr_note("round %d", round);
		CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
		CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
		CHECK(!readable(ch->fd, 0));
		CHECK_EQ(ag_post_send(&ag, &w, &pc, ar.h, NULL), 0);
		CHECK(readable(ch->fd, 2000));
		CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
		CHECK(ev_cq == cq);
		CHECK(ev_ctx == &marker);
		ibv_ack_cq_events(ev_cq, 1);
		CHECK_EQ(vpoll(cq, &wc, 1, 1000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, (uint64_t)round, qp->qp_num);
		CHECK_EQ(wc.byte_len, 100);
		/* one event per arming */
		errno = 0;
		CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
		CHECK_EQ(errno, EAGAIN);
		CHECK(!readable(ch->fd, 0));
		REQUIRE_EQ(ag_poll(&ag, acq, &wc, 1, 1000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 50 + (uint64_t)round, aq.qpn);
	}

	sr_note("not armed");
	{
		struct ibv_sge sge = {(uintptr_t)b.p, 4096, b.mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1}, *rbad;
		struct ag_wr w = ag_wr_make(aq.h, IBV_WR_SEND, 59, 1);
		struct piece pc = {0, 0, 100};

		CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
		CHECK_EQ(ag_post_send(&ag, &w, &pc, ar.h, NULL), 0);
		CHECK(!readable(ch->fd, 50));
		CHECK_EQ(vpoll(cq, &wc, 1, 1000), 1);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 9, qp->qp_num);
		REQUIRE_EQ(ag_poll(&ag, acq, &wc, 1, 1000), 1);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0);
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}

/* A CQ holds at least the cqe it was created with (ibv_create_cq's cqe is
 * a minimum, and cq->cqe what it really holds); one completion more than
 * cq->cqe outstanding is an overrun, reported as IBV_EVENT_CQ_ERR. */
void test_cq_overflow(void)
{
	static const int asked[] = {1, 5, 100};
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_mr tgt;
	struct vbuf b;
	static struct ibv_wc wc[512];

	rng_init(&r, 32);
	agent_start(&ag, "target");
	vdev_open(&d);
	ag_cq(&ag, 16, 0);
	tgt = ag_mr_reg(&ag, 4096, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0,
			S_BACKGROUND);
	vbuf_reg(&d, &b, 4096, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	REQUIRE(fcntl(d.ctx->async_fd, F_SETFL, fcntl(d.ctx->async_fd, F_GETFL) | O_NONBLOCK) == 0);
	for (size_t k = 0; k < sizeof(asked) / sizeof(asked[0]); k++) {
		struct ibv_cq *cq = ibv_create_cq(d.ctx, asked[k], NULL, NULL, 0);
		struct qp_spec s = {.type = IBV_QPT_RC, .send_wr = 512};
		struct ibv_sge sge = {(uintptr_t)b.p, 8, b.mr->lkey};
		struct ibv_async_event ev;
		struct ag_qp aq;
		struct ibv_qp *qp;
		int n;

		sr_note("cqe %d", asked[k]);
		REQUIRE(cq);
		CHECK_CMP(cq->cqe, >=, asked[k]);
		REQUIRE(cq->cqe < 500);
		s.scq = cq;
		qp = vqp_create(&d, &s);
		aq = ag_qp_create(&ag, IBV_QPT_RC, 0, 0, -1, 0, 0);
		pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
		/* exactly cq->cqe completions outstanding: all kept, no event */
		for (int i = 0; i < cq->cqe; i++) {
			struct ibv_send_wr wr = rdma_wr(IBV_WR_RDMA_WRITE, (uint64_t)i, &sge,
							tgt.addr, tgt.rkey),
					   *bad;

			CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
		}
		errno = 0;
		CHECK_EQ(ibv_get_async_event(d.ctx, &ev), -1);
		CHECK_EQ(errno, EAGAIN);
		n = vpoll(cq, wc, cq->cqe + 1, 50);
		CHECK_EQ(n, cq->cqe);
		for (int i = 0; i < n; i++)
			CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)i, qp->qp_num);
		/* one more than it holds: the overrun is reported */
		for (int i = 0; i <= cq->cqe; i++) {
			struct ibv_send_wr wr = rdma_wr(IBV_WR_RDMA_WRITE, 1000 + (uint64_t)i, &sge,
							tgt.addr, tgt.rkey),
					   *bad;

			ibv_post_send(qp, &wr, &bad);
		}
		/* across hosts the completions come with the ACKs, after the posts */
		{
			struct pollfd pfd = {d.ctx->async_fd, POLLIN, 0};

			CHECK_EQ(poll(&pfd, 1, 5000), 1);
		}
		CHECK_EQ(ibv_get_async_event(d.ctx, &ev), 0);
		CHECK_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
		CHECK(ev.element.cq == cq);
		ibv_ack_async_event(&ev);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
	}
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}
