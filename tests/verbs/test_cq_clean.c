/*
 * A QP's completions leave its CQs when it is moved to RESET or destroyed,
 * as on a ConnectX (rdma-core's mlx5 provider cleans the QP's entries out
 * of its send and receive CQs: mlx5_cq_clean), and the other QPs' entries
 * of the same CQs stay, in their order (issue 35: rdma-core's pyverbs
 * suite restates a QP ERR -> RESET -> RTS and then expects the completions
 * of its new life only).  Receive completions that consumed WQEs of an SRQ
 * give those WQEs back; a destroyed QP's entries no longer take CQ slots.
 * All QPs are RC, in this process, on soft0 (same-host path).
 */
#include <stdint.h>
#include <time.h>

#include "sr_test.h"

#define LEN 64

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *pcq; /* the peers' CQ */
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
};

static void env_open(struct env *e)
{
	memset(e, 0, sizeof(*e));
	e->ctx = open_soft0();
	REQUIRE(e->ctx);
	REQUIRE(ibv_query_gid(e->ctx, 1, 0, &e->gid) == 0);
	e->pd = ibv_alloc_pd(e->ctx);
	REQUIRE(e->pd);
	e->pcq = ibv_create_cq(e->ctx, 256, NULL, NULL, 0);
	REQUIRE(e->pcq);
	e->buf = calloc(1, 4096);
	REQUIRE(e->buf);
	e->mr = ibv_reg_mr(e->pd, e->buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(e->mr);
}

static void env_close(struct env *e)
{
	CHECK_RET(ibv_dereg_mr(e->mr), 0);
	CHECK_RET(ibv_destroy_cq(e->pcq), 0);
	CHECK_RET(ibv_dealloc_pd(e->pd), 0);
	CHECK_RET(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

static struct ibv_qp *rc_new(struct env *e, struct ibv_cq *scq, struct ibv_cq *rcq,
			     struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.srq = srq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = srq ? 0 : 16;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = srq ? 0 : 1;
	return ibv_create_qp(e->pd, &a);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = {.qp_state = s};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* RESET -> INIT -> RTR -> RTS towards dqpn on this host */
static int rc_connect(struct env *e, struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = e->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x100;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static bool pair(struct env *e, struct ibv_qp *a, struct ibv_qp *b)
{
	return CHECK_RET(rc_connect(e, a, b->qp_num), 0) &&
	       CHECK_RET(rc_connect(e, b, a->qp_num), 0);
}

static int post_recv(struct env *e, struct ibv_qp *qp, struct ibv_srq *srq, uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)e->buf + 2048, LEN, e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	return srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
}

/* One signaled SEND, or RDMA WRITE into the MR, executed before it returns
 * (same host: the poster's thread carries it out) */
static int post_send(struct env *e, struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)e->buf, LEN, e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)e->buf + 1024;
	wr.wr.rdma.rkey = e->mr->rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* Everything in cq now (within 200 ms of its last entry), up to max */
static int drain(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	struct timespec t0, t;
	int n = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int got = ibv_poll_cq(cq, max - n, wc + n);

		if (got < 0)
			return -1;
		n += got;
		if (got)
			clock_gettime(CLOCK_MONOTONIC, &t0);
		if (n == max)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 200000000L)
			return n;
		usleep(1000);
	}
}

/* wr_ids: 0xA0.. for QP a's work, 0xB0.. for b's */
static void test_cq_clean_reset(void)
{
	struct env e;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b, *pa, *pb;
	struct ibv_wc wc[32];
	int n;

	env_open(&e);
	cq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	a = rc_new(&e, cq, cq, NULL);
	b = rc_new(&e, cq, cq, NULL);
	pa = rc_new(&e, e.pcq, e.pcq, NULL);
	pb = rc_new(&e, e.pcq, e.pcq, NULL);
	REQUIRE(a && b && pa && pb);
	REQUIRE(pair(&e, a, pa) && pair(&e, b, pb));
	/* receives of a and b, interleaved in cq: a1 b1 a2 b2 */
	for (int i = 1; i <= 2; i++) {
		REQUIRE(CHECK_RET(post_recv(&e, a, NULL, 0xA0 + i), 0));
		REQUIRE(CHECK_RET(post_recv(&e, b, NULL, 0xB0 + i), 0));
	}
	for (int i = 1; i <= 2; i++) {
		CHECK_RET(post_send(&e, pa, IBV_WR_SEND, 0x10 + i), 0);
		CHECK_RET(post_send(&e, pb, IBV_WR_SEND, 0x20 + i), 0);
	}
	/* sends of a and b: a3 b3 (writes: the peers need no receive) */
	CHECK_RET(post_send(&e, a, IBV_WR_RDMA_WRITE, 0xA3), 0);
	CHECK_RET(post_send(&e, b, IBV_WR_RDMA_WRITE, 0xB3), 0);
	/* a's old life ends in error: two receives flushed, then a SEND that
	 * completes in flush error (a is in ERR) */
	CHECK_RET(post_recv(&e, a, NULL, 0xA4), 0);
	CHECK_RET(post_recv(&e, a, NULL, 0xA5), 0);
	CHECK_RET(to_state(a, IBV_QPS_ERR), 0);
	CHECK_RET(post_send(&e, a, IBV_WR_SEND, 0xA6), 0);
	CHECK_RET(post_send(&e, b, IBV_WR_RDMA_WRITE, 0xB4), 0);
	CHECK_EQ(drain(e.pcq, wc, 32), 4); /* the peers' sends */

	CHECK_RET(to_state(a, IBV_QPS_RESET), 0);
	n = drain(cq, wc, 32);
	/* b's alone, in the order they were produced */
	CHECK_EQ(n, 4);
	for (int i = 0; i < n && i < 4; i++) {
		CHECK_EQ(wc[i].qp_num, b->qp_num);
		CHECK_EQ(wc[i].wr_id, 0xB1 + i);
		CHECK_EQ(wc[i].status, IBV_WC_SUCCESS);
	}
	CHECK_EQ(wc[2].opcode, IBV_WC_RDMA_WRITE);

	/* a's new life: what it completes now is all there is of it */
	CHECK_RET(to_state(pa, IBV_QPS_RESET), 0);
	REQUIRE(pair(&e, a, pa));
	CHECK_RET(post_send(&e, a, IBV_WR_RDMA_WRITE, 0xA7), 0);
	n = drain(cq, wc, 32);
	CHECK_EQ(n, 1);
	CHECK_EQ(wc[0].qp_num, a->qp_num);
	CHECK_EQ(wc[0].wr_id, 0xA7);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	/* RESET of a QP with nothing in the CQ takes nothing */
	CHECK_RET(post_send(&e, b, IBV_WR_RDMA_WRITE, 0xB5), 0);
	CHECK_RET(to_state(a, IBV_QPS_RESET), 0);
	n = drain(cq, wc, 32);
	CHECK_EQ(n, 1);
	CHECK_EQ(wc[0].wr_id, 0xB5);

	CHECK_RET(ibv_destroy_qp(a), 0);
	CHECK_RET(ibv_destroy_qp(b), 0);
	CHECK_RET(ibv_destroy_qp(pa), 0);
	CHECK_RET(ibv_destroy_qp(pb), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	env_close(&e);
}

/* QPs a and b on one SRQ: a's receive completions, removed by its RESET,
 * give their SRQ WQEs back (mlx5 returns them to the SRQ's free list) */
static void test_cq_clean_srq(void)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct env e;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b, *pa, *pb;
	struct ibv_wc wc[16];
	uint32_t max_wr;
	int n;

	env_open(&e);
	scq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	rcq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	srq = ibv_create_srq(e.pd, &sa);
	REQUIRE(scq && rcq && srq);
	max_wr = sa.attr.max_wr;
	REQUIRE(max_wr >= 4 && max_wr <= 14);
	a = rc_new(&e, scq, rcq, srq);
	b = rc_new(&e, scq, rcq, srq);
	pa = rc_new(&e, e.pcq, e.pcq, NULL);
	pb = rc_new(&e, e.pcq, e.pcq, NULL);
	REQUIRE(a && b && pa && pb);
	REQUIRE(pair(&e, a, pa) && pair(&e, b, pb));
	for (uint32_t i = 0; i < max_wr; i++)
		REQUIRE(CHECK_RET(post_recv(&e, NULL, srq, i), 0));
	/* b takes the first two WQEs, a the rest: the SRQ is full of
	 * receives whose completions are not polled */
	CHECK_RET(post_send(&e, pb, IBV_WR_SEND, 1), 0);
	CHECK_RET(post_send(&e, pb, IBV_WR_SEND, 2), 0);
	for (uint32_t i = 2; i < max_wr; i++)
		CHECK_RET(post_send(&e, pa, IBV_WR_SEND, 1 + i), 0);
	CHECK_EQ(drain(e.pcq, wc, 16), max_wr);
	CHECK_RET(post_recv(&e, NULL, srq, 99), ENOMEM);

	CHECK_RET(to_state(a, IBV_QPS_RESET), 0);
	n = drain(rcq, wc, 16);
	CHECK_EQ(n, 2);
	for (int i = 0; i < n; i++) {
		CHECK_EQ(wc[i].qp_num, b->qp_num);
		CHECK_EQ(wc[i].wr_id, i);
	}
	/* all max_wr WQEs are free again */
	for (uint32_t i = 0; i < max_wr; i++)
		CHECK_RET(post_recv(&e, NULL, srq, 100 + i), 0);

	CHECK_RET(ibv_destroy_qp(a), 0);
	CHECK_RET(ibv_destroy_qp(b), 0);
	CHECK_RET(ibv_destroy_qp(pa), 0);
	CHECK_RET(ibv_destroy_qp(pb), 0);
	CHECK_RET(ibv_destroy_srq(srq), 0);
	CHECK_RET(ibv_destroy_cq(scq), 0);
	CHECK_RET(ibv_destroy_cq(rcq), 0);
	env_close(&e);
}

/* A destroyed QP's completions are gone from its CQ at once and take no
 * slot: the CQ holds as many of another QP's as it did before (on a
 * ConnectX mlx5_destroy_qp cleans them out) */
static void test_cq_clean_destroy(void)
{
	struct env e;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b, *pa, *pb;
	struct ibv_wc wc[64];
	int cap, n;

	env_open(&e);
	cq = ibv_create_cq(e.ctx, 8, NULL, NULL, 0);
	REQUIRE(cq);
	cap = cq->cqe;
	REQUIRE(cap >= 8 && cap <= 60);
	a = rc_new(&e, cq, cq, NULL);
	b = rc_new(&e, cq, cq, NULL);
	pa = rc_new(&e, e.pcq, e.pcq, NULL);
	pb = rc_new(&e, e.pcq, e.pcq, NULL);
	REQUIRE(a && b && pa && pb);
	REQUIRE(pair(&e, a, pa) && pair(&e, b, pb));
	/* b's first, then a's fill the CQ */
	CHECK_RET(post_send(&e, b, IBV_WR_RDMA_WRITE, 0xB0), 0);
	for (int i = 1; i < cap; i++)
		CHECK_RET(post_send(&e, a, IBV_WR_RDMA_WRITE, 0xA0 + i), 0);
	CHECK_RET(ibv_destroy_qp(a), 0);
	/* room for cap - 1 more of b's, none lost */
	for (int i = 1; i < cap; i++)
		CHECK_RET(post_send(&e, b, IBV_WR_RDMA_WRITE, 0xB0 + i), 0);
	n = drain(cq, wc, 64);
	CHECK_EQ(n, cap);
	for (int i = 0; i < n; i++) {
		CHECK_EQ(wc[i].qp_num, b->qp_num);
		CHECK_EQ(wc[i].wr_id, 0xB0 + i);
		CHECK_EQ(wc[i].status, IBV_WC_SUCCESS);
	}

	CHECK_RET(ibv_destroy_qp(b), 0);
	CHECK_RET(ibv_destroy_qp(pa), 0);
	CHECK_RET(ibv_destroy_qp(pb), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	env_close(&e);
}

/* clang-format off */
static const struct sr_test_case tests[] = {
	SR_TEST(cq_clean_reset)
	SR_TEST(cq_clean_srq)
	SR_TEST(cq_clean_destroy)
};
/* clang-format on */

int main(int argc, char **argv)
{
	return sr_test_main(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
