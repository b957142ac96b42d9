/*
 * Many QPs and many threads: 1,000 RC QP pairs between two processes, each
 * carrying a SEND and an RDMA WRITE; and 8 threads posting RDMA WRITEs on
 * their own QPs while 4 more share one QP (and its CQ), every byte checked
 * at the target.  Meant to be run under ASan and TSan too.
 */
#include <pthread.h>

#include "tcommon.h"

#define NPAIRS 1000
#define SLOT   64

void test_many_qps(void)
{
	static const uint32_t caps[5] = {4, 4, 1, 1, 0};
	static struct ag_qp aq[NPAIRS];
	static struct ibv_qp *qp[NPAIRS];
	static struct ibv_wc wc[2 * NPAIRS];
	static char got[NPAIRS * SLOT];
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ibv_cq *cq;
	struct ag_mr rbuf, wbuf;
	struct vbuf src;
	uint64_t t0, t1, t2;
	int acq, n;
	bool *done;

	rng_init(&r, 40);
	agent_start(&ag, "agent");
	vdev_open(&d);
	acq = ag_cq(&ag, 4 * NPAIRS, 0);
	rbuf = ag_mr_reg(&ag, NPAIRS * SLOT, 64, IBV_ACCESS_LOCAL_WRITE, 0, S_JUNK);
	wbuf = ag_mr_reg(&ag, NPAIRS * SLOT, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			 0, S_JUNK);
	cq = ibv_create_cq(d.ctx, 4 * NPAIRS, NULL, NULL, 0);
	REQUIRE(cq);
	vbuf_reg(&d, &src, NPAIRS * SLOT, 0, IBV_ACCESS_LOCAL_WRITE, NULL);

	t0 = sr_now_us();
	for (int i = 0; i < NPAIRS; i++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq, .send_wr = 4, .recv_wr = 4};

		sr_note("pair %d", i);
		qp[i] = vqp_create(&d, &s);
		aq[i] = ag_qp_create_caps(&ag, IBV_QPT_RC, acq, acq, -1, 0, 0, caps);
		pair_connect(&d, qp[i], &CONN_DEFAULT, &ag, &aq[i], &CONN_DEFAULT, &r);
	}
	t1 = sr_now_us();
	for (int i = 0; i < NPAIRS; i++) {
		struct piece pc = {0, (uint64_t)i * SLOT, SLOT};

		CHECK_EQ(ag_post_recv(&ag, aq[i].h, 0, (uint64_t)i, &pc, 1, &rbuf.h), 0);
	}
	/* on each pair: a SEND and a WRITE of different data */
	t2 = sr_now_us();
	pat_fill(src.p, NPAIRS * SLOT, S_MSG(0), 0);
	for (int i = 0; i < NPAIRS; i++) {
		struct ibv_sge s1 = {(uintptr_t)(src.p + i * SLOT), SLOT / 2, src.mr->lkey};
		struct ibv_sge s2 = {(uintptr_t)(src.p + i * SLOT + SLOT / 2), SLOT / 2,
				     src.mr->lkey};
		struct ibv_send_wr w1 = rdma_wr(IBV_WR_SEND, 2 * (uint64_t)i, &s1, 0, 0);
		struct ibv_send_wr w2 = rdma_wr(IBV_WR_RDMA_WRITE, 2 * (uint64_t)i + 1, &s2,
						wbuf.addr + (uint64_t)i * SLOT, wbuf.rkey);
		struct ibv_send_wr *bad;

		w1.next = &w2;
		CHECK_EQ(ibv_post_send(qp[i], &w1, &bad), 0);
	}
	n = vpoll(cq, wc, 2 * NPAIRS, 20000);
	printf("# %d RC QP pairs: set up in %.0f ms (%.0f us per pair), %d SEND+WRITE in %.1f ms\n",
	       NPAIRS, (t1 - t0) / 1000.0, (double)(t1 - t0) / NPAIRS, NPAIRS,
	       (sr_now_us() - t2) / 1000.0);
	CHECK_EQ(n, 2 * NPAIRS);
	done = calloc(2 * NPAIRS, sizeof(*done));
	REQUIRE(done);
	for (int k = 0; k < n; k++) {
		uint64_t id = wc[k].wr_id;

		sr_note("send completion %d", k);
		CHECK_STATUS(wc[k].status, IBV_WC_SUCCESS);
		if (id >= 2 * NPAIRS) {
			CHECK(id < 2 * NPAIRS);
			continue;
		}
		CHECK(!done[id]);
		done[id] = true;
		CHECK_EQ(wc[k].opcode, id & 1 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND);
		CHECK_EQ(wc[k].qp_num, qp[id / 2]->qp_num);
	}
	free(done);
	sr_note("receives");
	CHECK_EQ(ag_poll(&ag, acq, wc, NPAIRS, 20000), NPAIRS);
	for (int k = 0; k < NPAIRS; k++) {
		uint64_t id = wc[k].wr_id;

		CHECK_STATUS(wc[k].status, IBV_WC_SUCCESS);
		if (id >= NPAIRS)
			continue;
		CHECK_EQ(wc[k].qp_num, aq[id].qpn);
		CHECK_EQ(wc[k].byte_len, SLOT / 2);
	}
	sr_note("data");
	ag_mem_read(&ag, rbuf.h, 0, NPAIRS * SLOT, got);
	for (int i = 0; i < NPAIRS; i++) {
		CHECK_PAT(got + i * SLOT, SLOT / 2, S_MSG(0), (uint64_t)i * SLOT);
		CHECK_PAT(got + i * SLOT + SLOT / 2, SLOT / 2, S_JUNK,
			  (uint64_t)i * SLOT + SLOT / 2);
	}
	ag_mem_read(&ag, wbuf.h, 0, NPAIRS * SLOT, got);
	for (int i = 0; i < NPAIRS; i++) {
		CHECK_PAT(got + i * SLOT, SLOT / 2, S_MSG(0), (uint64_t)i * SLOT + SLOT / 2);
		CHECK_PAT(got + i * SLOT + SLOT / 2, SLOT / 2, S_JUNK,
			  (uint64_t)i * SLOT + SLOT / 2);
	}
	t0 = sr_now_us();
	for (int i = 0; i < NPAIRS; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	printf("# destroyed %d QPs in %.0f ms\n", NPAIRS, (sr_now_us() - t0) / 1000.0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&src);
	vdev_close(&d);
	agent_stop(&ag);
}

/* ---- threads ---- */

#define OWN_THREADS    8
#define SHARED_THREADS 4
#define NTHREADS       (OWN_THREADS + SHARED_THREADS)
#define WRITES	       400
#define WSLOT	       256
#define TREGION	       ((uint64_t)WRITES * WSLOT)

struct tctx {
	int t;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	bool shared;
	struct vbuf *src;
	struct ag_mr *tgt;
	_Atomic int *done; /* completions per thread (the shared CQ's go to their owner) */
	_Atomic int *errors;
	pthread_barrier_t *go;
};

static uint32_t wlen(int t, int i)
{
	struct rng r;

	rng_init(&r, 60000 + 1000 * (uint64_t)t + (uint64_t)i);
	return (uint32_t)rng_range(&r, 1, WSLOT);
}

static void reap(struct tctx *c, int max)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(c->cq, max < 16 ? max : 16, wc);

	for (int k = 0; k < n; k++) {
		int owner = (int)(wc[k].wr_id >> 32);

		if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_RDMA_WRITE ||
		    owner < 0 || owner >= NTHREADS) {
			sr__fail(__FILE__, __LINE__,
				 "thread %d: completion %s opcode %d wr_id %#llx", c->t,
				 ibv_wc_status_str(wc[k].status), wc[k].opcode,
				 (unsigned long long)wc[k].wr_id);
			atomic_fetch_add(c->errors, 1);
			continue;
		}
		atomic_fetch_add(&c->done[owner], 1);
	}
}

static void *writer(void *arg)
{
	struct tctx *c = arg;
	uint64_t base = (uint64_t)c->t * TREGION;

	sr_note("thread %d", c->t);
	pthread_barrier_wait(c->go);
	for (int i = 0; i < WRITES; i++) {
		uint32_t len = wlen(c->t, i);
		char *p = c->src->p + base + (uint64_t)i * WSLOT;
		struct ibv_sge sge = {(uintptr_t)p, len, c->src->mr->lkey};
		struct ibv_send_wr wr =
		    rdma_wr(IBV_WR_RDMA_WRITE, ((uint64_t)c->t << 32) | (uint64_t)i, &sge,
			    c->tgt->addr + base + (uint64_t)i * WSLOT, c->tgt->rkey);
		struct ibv_send_wr *bad;
		int r;

		pat_fill(p, len, S_MSG(c->t), (uint64_t)i * WSLOT);
		/* the SQ may be momentarily full while another thread's WRs wait */
		while ((r = ibv_post_send(c->qp, &wr, &bad)) == ENOMEM)
			reap(c, 16);
		if (r) {
			sr__fail(__FILE__, __LINE__, "thread %d: post_send %d", c->t, r);
			atomic_fetch_add(c->errors, 1);
			break;
		}
		if (i % 8 == 7)
			reap(c, 16);
	}
	/* keep reaping until our writes are all accounted for */
	for (uint64_t end = sr_now_us() + 20000000;
	     atomic_load(&c->done[c->t]) < WRITES && !atomic_load(c->errors) && sr_now_us() < end;)
		reap(c, 16);
	return NULL;
}

void test_threads_write(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ibv_cq *cq[OWN_THREADS + 1];
	struct ibv_qp *qp[OWN_THREADS + 1];
	struct ag_qp aq[OWN_THREADS + 1];
	struct ag_mr tgt;
	struct vbuf src;
	struct tctx c[NTHREADS];
	pthread_t th[NTHREADS];
	pthread_barrier_t go;
	_Atomic int done[NTHREADS], errors = 0;
	char *got;
	uint64_t t0;
	int acq;

	rng_init(&r, 41);
	agent_start(&ag, "target");
	vdev_open(&d);
	acq = ag_cq(&ag, 64, 0);
	tgt = ag_mr_reg(&ag, NTHREADS * TREGION, 64,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0, S_BACKGROUND);
	vbuf_reg(&d, &src, NTHREADS * TREGION, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	for (int q = 0; q <= OWN_THREADS; q++) {
		struct qp_spec s = {.type = IBV_QPT_RC, .send_wr = 64};

		cq[q] = ibv_create_cq(d.ctx,
				      q == OWN_THREADS ? 4 * WRITES * SHARED_THREADS : 2 * WRITES,
				      NULL, NULL, 0);
		REQUIRE(cq[q]);
		s.scq = cq[q];
		qp[q] = vqp_create(&d, &s);
		aq[q] = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, -1, 0, 0);
		pair_connect(&d, qp[q], &CONN_DEFAULT, &ag, &aq[q], &CONN_DEFAULT, &r);
	}
	pthread_barrier_init(&go, NULL, NTHREADS);
	for (int t = 0; t < NTHREADS; t++) {
		bool shared = t >= OWN_THREADS;

		atomic_init(&done[t], 0);
		c[t] = (struct tctx){.t = t,
				     .qp = qp[shared ? OWN_THREADS : t],
				     .cq = cq[shared ? OWN_THREADS : t],
				     .shared = shared,
				     .src = &src,
				     .tgt = &tgt,
				     .done = done,
				     .errors = &errors,
				     .go = &go};
	}
	t0 = sr_now_us();
	for (int t = 0; t < NTHREADS; t++)
		REQUIRE(pthread_create(&th[t], NULL, writer, &c[t]) == 0);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	printf("# %d threads x %d RDMA WRITEs (%d on their own QPs, %d sharing one): %.1f ms\n",
	       NTHREADS, WRITES, OWN_THREADS, SHARED_THREADS, (sr_now_us() - t0) / 1000.0);
	pthread_barrier_destroy(&go);
	CHECK_EQ(atomic_load(&errors), 0);
	for (int t = 0; t < NTHREADS; t++) {
		sr_note("thread %d", t);
		CHECK_EQ(atomic_load(&done[t]), WRITES);
	}
	for (int q = 0; q <= OWN_THREADS; q++)
		vpoll_none(cq[q], 1);

	/* every slot: the thread's data, then the untouched background */
	got = malloc(TREGION);
	REQUIRE(got);
	for (int t = 0; t < NTHREADS; t++) {
		unsigned long bad = 0;

		sr_note("target region of thread %d", t);
		ag_mem_read(&ag, tgt.h, (int64_t)(t * TREGION), TREGION, got);
		for (int i = 0; i < WRITES; i++) {
			uint64_t off = (uint64_t)i * WSLOT;
			uint32_t len = wlen(t, i);

			if (pat_find_diff(got + off, len, S_MSG(t), off) >= 0 ||
			    pat_find_diff(got + off + len, WSLOT - len, S_BACKGROUND,
					  t * TREGION + off + len) >= 0) {
				if (!bad)
					sr__fail(__FILE__, __LINE__,
						 "thread %d write %d: data differs", t, i);
				bad++;
			}
		}
		CHECK_EQ(bad, 0);
	}
	free(got);
	CHECK_EQ(ag_guard_check(&ag, tgt.h), -1);
	for (int q = 0; q <= OWN_THREADS; q++) {
		CHECK_EQ(ibv_destroy_qp(qp[q]), 0);
		CHECK_EQ(ibv_destroy_cq(cq[q]), 0);
	}
	vbuf_free(&src);
	vdev_close(&d);
	agent_stop(&ag);
}

/* ---- many senders, one UD receiver ---- */

#define UD_SENDERS 4 /* 2 agent processes, 2 of our threads */
#define UD_PER	   400

struct udthread {
	struct vdev *d;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	uint32_t dest;
	uint64_t tag;
	int errors;
};

static void *ud_sender(void *arg)
{
	struct udthread *u = arg;

	u->errors =
	    ud_send_loop(u->d, u->qp, u->cq, u->ah, u->dest, CONN_DEFAULT.qkey, u->tag, UD_PER);
	return NULL;
}

void test_ud_many_to_one(void)
{
	const int total = UD_SENDERS * UD_PER;
	struct agent ag[2];
	struct vdev d;
	struct ibv_cq *rcq, *scq[2];
	struct ibv_qp *rqp, *sqp[2];
	struct ag_qp aq[2];
	struct ibv_ah *ah;
	struct vbuf rb;
	struct udthread u[2];
	pthread_t th[2];
	uint32_t src_of_tag[UD_SENDERS + 1];
	static struct ibv_wc wc[UD_SENDERS * UD_PER];
	bool *seen;
	int n;

	for (int i = 0; i < 2; i++)
		agent_start(&ag[i], "sender");
	vdev_open(&d);
	rcq = ibv_create_cq(d.ctx, 2 * total, NULL, NULL, 0);
	REQUIRE(rcq);
	{
		struct qp_spec s = {.type = IBV_QPT_UD, .scq = rcq, .recv_wr = (uint32_t)total};

		rqp = vqp_create(&d, &s);
		vqp_connect(&d, rqp, 0, 0, 0, NULL, &CONN_DEFAULT);
	}
	vbuf_reg(&d, &rb, (size_t)total * 256, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	for (int k = 0; k < total; k++) {
		struct ibv_sge sge = {(uintptr_t)(rb.p + 256 * (size_t)k), 256, rb.mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)k, .sg_list = &sge, .num_sge = 1}, *bad;

		REQUIRE_OK(ibv_post_recv(rqp, &wr, &bad));
	}
	ah = vah_create(&d, &d.gid);
	for (int i = 0; i < 2; i++) {
		struct qp_spec s = {.type = IBV_QPT_UD};
		int acq = ag_cq(&ag[i], 16, 0);

		scq[i] = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
		REQUIRE(scq[i]);
		s.scq = scq[i];
		sqp[i] = vqp_create(&d, &s);
		vqp_connect(&d, sqp[i], 0, 0, 0, NULL, &CONN_DEFAULT);
		u[i] = (struct udthread){&d, sqp[i], scq[i], ah, rqp->qp_num, 3 + (uint64_t)i, 0};
		src_of_tag[3 + i] = sqp[i]->qp_num;
		aq[i] = ag_qp_create(&ag[i], IBV_QPT_UD, acq, acq, -1, 0, 0);
		ag_qp_connect(&ag[i], aq[i].h, 0, 0, 0, &d.gid, &CONN_DEFAULT);
		src_of_tag[1 + i] = aq[i].qpn;
	}
	/* all four at once */
	for (int i = 0; i < 2; i++) {
		struct ag_req rq = {
		    .op = AG_UD_SEND_LOOP,
		    .len = 16,
		    .a = {aq[i].h, 0, UD_PER, rqp->qp_num, CONN_DEFAULT.qkey, 1 + i}};

		ag_send(&ag[i], &rq, d.gid.raw);
	}
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&th[i], NULL, ud_sender, &u[i]) == 0);
	for (int i = 0; i < 2; i++) {
		struct ag_rep rep;

		pthread_join(th[i], NULL);
		CHECK_EQ(u[i].errors, 0);
		CHECK_EQ(ag_reply(&ag[i], &rep, NULL, 0), 0);
		CHECK_EQ(rep.a[0], 0);
	}
	n = vpoll(rcq, wc, total, 10000);
	CHECK_EQ(n, total);
	seen = calloc((size_t)total, 1);
	REQUIRE(seen);
	for (int j = 0; j < n; j++) {
		uint64_t hdr, tag, k;
		const char *p = rb.p + 256 * wc[j].wr_id + GRH_LEN;

		sr_note("completion %d (wr_id %llu)", j, (unsigned long long)wc[j].wr_id);
		CHECK_STATUS(wc[j].status, IBV_WC_SUCCESS);
		if (wc[j].status || wc[j].wr_id >= (uint64_t)total)
			continue;
		memcpy(&hdr, p, 8);
		tag = hdr >> 32;
		k = (uint32_t)hdr;
		if (tag < 1 || tag > UD_SENDERS || k >= UD_PER) {
			sr__fail(__FILE__, __LINE__, "header %#llx", (unsigned long long)hdr);
			continue;
		}
		CHECK(!seen[(tag - 1) * UD_PER + k]);
		seen[(tag - 1) * UD_PER + k] = true;
		CHECK_EQ(wc[j].src_qp, src_of_tag[tag]);
		CHECK_EQ(wc[j].byte_len, GRH_LEN + UD_LEN(k));
		CHECK_PAT(p + 8, UD_LEN(k) - 8, UD_STREAM(tag, k), 0);
	}
	free(seen);
	vpoll_none(rcq, 5);

	CHECK_EQ(ibv_destroy_ah(ah), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(ibv_destroy_qp(sqp[i]), 0);
		CHECK_EQ(ibv_destroy_cq(scq[i]), 0);
	}
	CHECK_EQ(ibv_destroy_qp(rqp), 0);
	CHECK_EQ(ibv_destroy_cq(rcq), 0);
	vbuf_free(&rb);
	vdev_close(&d);
	for (int i = 0; i < 2; i++)
		agent_stop(&ag[i]);
}
