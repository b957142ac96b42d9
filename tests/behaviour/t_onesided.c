/*
 * One-sided operations need no CPU at the target: with the target process
 * stopped (SIGSTOP), RDMA WRITE, READ and atomics against its memory all
 * complete, and the target finds the results once it runs again.  And
 * atomics are atomic across processes: 4 initiator processes x 10,000
 * FETCH_AND_ADDs on one counter, and a CMP_AND_SWP increment loop from 2
 * processes, add up exactly.
 */
#include <signal.h>
#include <sys/wait.h>

#include "tcommon.h"

/* large enough that the half-region WRITE and the whole-region READ are split
 * copies (src/core/copy.c): done twice, so both piece orders run */
#define TGT_LEN (2 * 1024 * 1024)

void test_onesided_target_stopped(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC;
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq;
	struct ag_mr tgt, atom;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct vbuf lb, res;
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	uint64_t a0, a1, v, t0;
	int st;

	rng_init(&r, 20);
	agent_start(&ag, "target");
	vdev_open(&d);
	ag_cq(&ag, 16, 0);
	aq = ag_qp_create(&ag, IBV_QPT_RC, 0, 0, -1, 0, 0);
	tgt = ag_mr_reg(&ag, TGT_LEN, 64, all, 0, S_BACKGROUND);
	atom = ag_mr_reg(&ag, 16, 64, all, 0, S_ATOMIC);
	ag_mem_read(&ag, atom.h, 0, 8, &a0);
	ag_mem_read(&ag, atom.h, 8, 8, &a1);
	cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		qp = vqp_create(&d, &s);
	}
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
	vbuf_reg(&d, &lb, TGT_LEN, 64, IBV_ACCESS_LOCAL_WRITE, NULL);
	vbuf_reg(&d, &res, 64, 0, IBV_ACCESS_LOCAL_WRITE, NULL);

	sr_note("target stopped");
	REQUIRE(kill(ag.c.pid, SIGSTOP) == 0);
	REQUIRE(waitpid(ag.c.pid, &st, WUNTRACED) == ag.c.pid);
	REQUIRE(WIFSTOPPED(st));
	t0 = sr_now_us();

	/* WRITE half the region, READ the whole region back; twice */
	for (unsigned m = 1; m <= 2; m++) {
		pat_fill(lb.p, TGT_LEN / 2, S_MSG(m), 0);
		sge = (struct ibv_sge){(uintptr_t)lb.p, TGT_LEN / 2, lb.mr->lkey};
		wr = rdma_wr(IBV_WR_RDMA_WRITE, m, &sge, tgt.addr + 1000, tgt.rkey);
		post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		memset(lb.p, 0, TGT_LEN);
		sge.length = TGT_LEN;
		wr = rdma_wr(IBV_WR_RDMA_READ, 2, &sge, tgt.addr, tgt.rkey);
		post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		CHECK_PAT(lb.p, 1000, S_BACKGROUND, 0);
		CHECK_PAT(lb.p + 1000, TGT_LEN / 2, S_MSG(m), 0);
		CHECK_PAT(lb.p + 1000 + TGT_LEN / 2, TGT_LEN / 2 - 1000, S_BACKGROUND,
			  1000 + TGT_LEN / 2);
	}

	/* 100 FETCH_AND_ADDs and a matching and a failing CMP_AND_SWP */
	sge = (struct ibv_sge){(uintptr_t)res.p, 8, res.mr->lkey};
	for (int i = 0; i < 100; i++) {
		wr = rdma_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, 10 + (uint64_t)i, &sge, atom.addr,
			     atom.rkey);
		wr.wr.atomic.compare_add = 3;
		post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
		memcpy(&v, res.p, 8);
		CHECK_EQ(v, a0 + 3 * (uint64_t)i);
	}
	wr = rdma_wr(IBV_WR_ATOMIC_CMP_AND_SWP, 200, &sge, atom.addr + 8, atom.rkey);
	wr.wr.atomic.compare_add = a1;
	wr.wr.atomic.swap = 0x1234567887654321ull;
	post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	memcpy(&v, res.p, 8);
	CHECK_EQ(v, a1);
	wr = rdma_wr(IBV_WR_ATOMIC_CMP_AND_SWP, 201, &sge, atom.addr + 8, atom.rkey);
	wr.wr.atomic.compare_add = a1; /* no longer the value */
	wr.wr.atomic.swap = 99;
	post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	memcpy(&v, res.p, 8);
	CHECK_EQ(v, 0x1234567887654321ull);
	/* READ the counters back */
	sge.length = 16;
	vbuf_free(&res);
	vbuf_reg(&d, &res, 64, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	sge = (struct ibv_sge){(uintptr_t)res.p, 16, res.mr->lkey};
	wr = rdma_wr(IBV_WR_RDMA_READ, 300, &sge, atom.addr, atom.rkey);
	post_expect(qp, cq, &wr, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	memcpy(&v, res.p, 8);
	CHECK_EQ(v, a0 + 300);
	memcpy(&v, res.p + 8, 8);
	CHECK_EQ(v, 0x1234567887654321ull);
	printf("# 106 one-sided operations against a stopped process in %.2f ms\n",
	       (sr_now_us() - t0) / 1000.0);
	/* it really was stopped all along */
	CHECK_EQ(waitpid(ag.c.pid, &st, WNOHANG | WCONTINUED), 0);

	sr_note("target running again");
	REQUIRE(kill(ag.c.pid, SIGCONT) == 0);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 0, 1000, S_BACKGROUND, 0), -1);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 1000, TGT_LEN / 2, S_MSG(2), 0), -1);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 1000 + TGT_LEN / 2, TGT_LEN / 2 - 1000, S_BACKGROUND,
			      1000 + TGT_LEN / 2),
		 -1);
	CHECK_EQ(ag_guard_check(&ag, tgt.h), -1);
	ag_mem_read(&ag, atom.h, 0, 8, &v);
	CHECK_EQ(v, a0 + 300);
	ag_mem_read(&ag, atom.h, 8, 8, &v);
	CHECK_EQ(v, 0x1234567887654321ull);
	CHECK_EQ(ag_guard_check(&ag, atom.h), -1);

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&lb);
	vbuf_free(&res);
	vdev_close(&d);
	agent_stop(&ag);
}

/* The test process holds the counter; `n` agents hammer it. */
static void atomic_contention(int n, int per, int cas)
{
	struct agent ag[4];
	struct vdev d;
	struct rng r;
	struct ibv_cq *cq;
	struct ibv_qp *qp[4];
	struct ag_qp aq[4];
	struct vbuf counter;
	uint64_t *vals[4], t0, total = (uint64_t)n * (uint64_t)per;
	uint8_t *seen;
	int acq[4];

	rng_init(&r, 21);
	for (int i = 0; i < n; i++)
		agent_start(&ag[i], "initiator");
	vdev_open(&d);
	cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	vbuf_reg(&d, &counter, 8, 64,
		 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ, NULL);
	memset(counter.p, 0, 8);
	for (int i = 0; i < n; i++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		qp[i] = vqp_create(&d, &s);
		acq[i] = ag_cq(&ag[i], 128, 0);
		aq[i] = ag_qp_create(&ag[i], IBV_QPT_RC, acq[i], acq[i], -1, 0, 0);
		pair_connect(&d, qp[i], &CONN_DEFAULT, &ag[i], &aq[i], &CONN_DEFAULT, &r);
		vals[i] = malloc((size_t)per * 8);
		REQUIRE(vals[i]);
	}
	/* all start together, then all replies */
	t0 = sr_now_us();
	for (int i = 0; i < n; i++) {
		struct ag_req rq = {.op = AG_ATOMIC_LOOP,
				    .a = {aq[i].h, acq[i], (int64_t)(uintptr_t)counter.p,
					  counter.mr->rkey, per, cas, 32}};

		ag_send(&ag[i], &rq, NULL);
	}
	for (int i = 0; i < n; i++) {
		struct ag_rep rep;

		sr_note("initiator %d", i);
		CHECK_EQ(ag_reply(&ag[i], &rep, vals[i], (size_t)per * 8), 0);
		CHECK_EQ(rep.a[0], 0); /* errors */
		CHECK_EQ(rep.len, (uint32_t)per * 8);
	}
	printf("# %d processes x %d %s: %.1f ms\n", n, per,
	       cas ? "CMP_AND_SWP increments" : "FETCH_AND_ADDs", (sr_now_us() - t0) / 1000.0);
	sr_note("results");
	CHECK_EQ(*(volatile uint64_t *)counter.p, total);
	/* every value was returned to exactly one increment, in order per initiator */
	seen = calloc(total, 1);
	REQUIRE(seen);
	for (int i = 0; i < n; i++) {
		unsigned long bad_order = 0, dup = 0, range = 0;

		for (int k = 0; k < per; k++) {
			uint64_t v = vals[i][k];

			if (v >= total) {
				range++;
				continue;
			}
			if (seen[v])
				dup++;
			seen[v] = 1;
			if (k && v <= vals[i][k - 1])
				bad_order++;
		}
		CHECK_EQ(range, 0);
		CHECK_EQ(dup, 0);
		CHECK_EQ(bad_order, 0);
	}
	{
		unsigned long missing = 0;

		for (uint64_t v = 0; v < total; v++)
			missing += !seen[v];
		CHECK_EQ(missing, 0);
	}
	free(seen);
	CHECK_EQ(vbuf_guard_damage(&counter), -1);
	for (int i = 0; i < n; i++) {
		free(vals[i]);
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	}
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&counter);
	vdev_close(&d);
	for (int i = 0; i < n; i++)
		agent_stop(&ag[i]);
}

void test_atomic_faa_4proc(void)
{
	atomic_contention(4, 10000, 0);
}

void test_atomic_cas_2proc(void)
{
	atomic_contention(2, 5000, 1);
}
