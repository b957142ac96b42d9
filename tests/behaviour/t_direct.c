/*
 * post_send's direct path (src/shm/exec.h): a lone RDMA WRITE, SEND, READ
 * or atomic with one SGE on a connected QP in RTS with an idle send queue is
 * executed straight from the caller's work request, without a WQE in the
 * ring.  Seen from the application nothing may differ from the ring path:
 *
 *  - lone WRITEs (8 B, 4 KiB, zero-length) and SENDs (8 B, inline 8 B,
 *    4 KiB) land intact where they should, with the right completions on
 *    both sides; unsignaled lone WRITEs complete silently and only the
 *    signaled one after them shows;
 *  - lone READs (8 B, 4 KiB, zero-length) bring exactly the remote bytes
 *    and touch nothing else locally; a lone FETCH_AND_ADD and CMP_AND_SWP
 *    return the old value and leave the new one at the target;
 *  - a lone READ with a bad rkey fails with REM_ACCESS_ERR, one into memory
 *    registered without LOCAL_WRITE with LOC_PROT_ERR, and a misaligned
 *    atomic with REM_INV_REQ_ERR, each followed by ERR and flushes;
 *  - a lone SEND with no receive posted waits (RNR, retried forever), a
 *    second lone SEND queues behind it, and once receives come both complete
 *    and arrive in order;
 *  - a lone WRITE with a bad rkey fails with REM_ACCESS_ERR, the QP goes to
 *    ERR and later work requests are flushed;
 *  - a lone SEND with a bad lkey (deregistered, or spoiled) fails with
 *    LOC_PROT_ERR and nothing reaches the responder.
 *
 * And the path really is taken: `softrdma status` (the per-QP counters in
 * shared memory) shows every lone work request of the first part as direct,
 * and none of those that waited or failed.
 */
#include <limits.h>

#include "tcommon.h"

#ifndef SR_CLI_PATH
#define SR_CLI_PATH "softrdma"
#endif

#define TGT_LEN	  (16 * 1024)
#define MSG_LEN	  4096
#define RECV_LEN  (MSG_LEN + 64)
#define N_UNSIG	  4
#define UNSIG_LEN 256

struct denv {
	struct agent ag;
	struct vdev d;
	struct rng r;
	int acq;
	struct aregions ar;
	struct ag_mr tgt, atom;
	struct ibv_cq *cq;
	struct vbuf src;
};

/* What `softrdma status` says about one of our QPs. */
struct qp_status {
	bool found;    /* its "qp 0x..." line */
	bool has_sent; /* and a "sent:" line under it (only once it has traffic) */
	unsigned sq_used, sq_max;
	unsigned long long send, write, read, atomic, bytes, rnr, rem_access_err, direct;
};

static void qp_status(uint32_t qpn, struct qp_status *st)
{
	char cmd[PATH_MAX + 16], line[512], want[32];
	bool in_qp = false;
	FILE *f;

	memset(st, 0, sizeof(*st));
	snprintf(want, sizeof(want), "qp 0x%06x ", qpn);
	snprintf(cmd, sizeof(cmd), "'%s' status", SR_CLI_PATH);
	fflush(stdout);
	fflush(stderr);
	/* the CLI inherits SOFTRDMA_SOCKET: it asks the test's private daemon */
	f = popen(cmd, "r");
	REQUIRE(f);
	while (fgets(line, sizeof(line), f)) {
		const char *p = line + strspn(line, " ");
		const char *sq;

		if (!strncmp(p, "qp ", 3)) {
			in_qp = !strncmp(p, want, strlen(want));
			if (!in_qp)
				continue;
			st->found = true;
			printf("# status: %s", p);
			sq = strstr(p, " sq ");
			CHECK(sq && sscanf(sq, " sq %u/%u", &st->sq_used, &st->sq_max) == 2);
			continue;
		}
		if (in_qp && !strncmp(p, "sent:", 5)) {
			printf("# status:   %s", p);
			st->has_sent =
			    sscanf(p,
				   "sent: send %llu write %llu read %llu atomic %llu bytes %llu "
				   "rnr %llu rem_access_err %llu direct %llu",
				   &st->send, &st->write, &st->read, &st->atomic, &st->bytes,
				   &st->rnr, &st->rem_access_err, &st->direct) == 8;
			CHECK(st->has_sent);
		}
		in_qp = false;
	}
	CHECK_EQ(pclose(f), 0);
	if (!st->found)
		sr__fail(__FILE__, __LINE__, "`%s` does not list qp 0x%06x", cmd, qpn);
	REQUIRE(st->found);
}

static struct ibv_qp *new_pair(struct denv *e, struct ag_qp *aq)
{
	struct qp_spec s = {.type = IBV_QPT_RC, .scq = e->cq, .send_wr = 16, .inline_data = 64};
	struct ibv_qp *qp = vqp_create(&e->d, &s);

	REQUIRE(s.inline_data >= 8);
	*aq = ag_qp_create(&e->ag, IBV_QPT_RC, e->acq, e->acq, -1, 0, 0);
	/* rnr_retry 7 (CONN_DEFAULT): a SEND without a receive waits forever */
	pair_connect(&e->d, qp, &CONN_DEFAULT, &e->ag, aq, &CONN_DEFAULT, &e->r);
	return qp;
}

static void destroy_agent_qp(struct denv *e, const struct ag_qp *aq)
{
	struct ag_req rq = {.op = AG_QP_DESTROY, .a = {aq->h}};

	ag_call(&e->ag, &rq, NULL, NULL, NULL, 0, 0);
}

static void post_lone(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;

	REQUIRE(!wr->next);
	CHECK_EQ(ibv_post_send(qp, wr, &bad), 0);
	CHECK(bad == NULL);
}

/* Exactly one completion, with every field we can know. */
static void expect_wc(struct ibv_cq *cq, struct ibv_qp *qp, uint64_t wr_id, enum ibv_wc_opcode opc,
		      uint32_t len)
{
	struct ibv_wc wc;

	vpoll1(cq, &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, opc, wr_id, qp->qp_num);
	CHECK_EQ(wc.byte_len, len);
}

/* The agent's receive wr_id (posted by post_recv_slot over its region k)
 * got len bytes of stream. */
static void expect_recv(struct denv *e, const struct ag_qp *aq, uint64_t wr_id, int k, uint32_t len,
			uint64_t stream)
{
	static char got[RECV_LEN];
	struct ibv_wc wc;

	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, wr_id, aq->qpn);
	CHECK_EQ(wc.byte_len, len);
	ag_mem_read(&e->ag, e->ar.h[k], 0, RECV_LEN, got);
	CHECK_PAT(got, len, stream, 0);
	/* nothing past the message: the rest of the buffer is still junk */
	CHECK_PAT(got + len, RECV_LEN - len, S_JUNK, len);
}

static void post_recv_slot(struct denv *e, const struct ag_qp *aq, uint64_t wr_id, int k)
{
	struct piece pc = {k, 0, RECV_LEN};

	ag_mem_fill(&e->ag, e->ar.h[k], 0, RECV_LEN, S_JUNK, 0);
	CHECK_EQ(ag_post_recv(&e->ag, aq->h, 0, wr_id, &pc, 1, e->ar.h), 0);
}

/* ---- 1: lone WRITEs and SENDs that complete on the spot ---- */

/* Returns how many lone work requests it posted (all eligible for the
 * direct path, and all completing there: receives are posted first). */
static unsigned part_complete(struct denv *e, struct ibv_qp *qp, const struct ag_qp *aq)
{
	static const struct {
		uint32_t len;
		uint64_t off;
	} writes[] = {{8, 64}, {MSG_LEN, 1024}, {0, 8192}};
	unsigned n = 0;

	for (unsigned i = 0; i < 3; i++) {
		struct ibv_sge sge = {(uintptr_t)e->src.p, writes[i].len, e->src.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_RDMA_WRITE, 1 + i, &sge,
						e->tgt.addr + writes[i].off, e->tgt.rkey);

		sr_note("lone WRITE of %u bytes", writes[i].len);
		pat_fill(e->src.p, writes[i].len, S_MSG(1 + i), 0);
		post_lone(qp, &wr);
		expect_wc(e->cq, qp, 1 + i, IBV_WC_RDMA_WRITE, writes[i].len);
		n++;
		/* the bytes, and not one more */
		CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, (int64_t)writes[i].off, writes[i].len,
				      S_MSG(1 + i), 0),
			 -1);
		CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, (int64_t)writes[i].off - 64, 64,
				      S_BACKGROUND, writes[i].off - 64),
			 -1);
		CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, (int64_t)(writes[i].off + writes[i].len),
				      64, S_BACKGROUND, writes[i].off + writes[i].len),
			 -1);
		ag_mem_fill(&e->ag, e->tgt.h, (int64_t)writes[i].off, writes[i].len, S_BACKGROUND,
			    writes[i].off);
	}
	CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);

	sr_note("lone SEND of 8 bytes");
	post_recv_slot(e, aq, 104, 0);
	{
		struct ibv_sge sge = {(uintptr_t)e->src.p, 8, e->src.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, 4, &sge, 0, 0);

		pat_fill(e->src.p, 8, S_MSG(4), 0);
		post_lone(qp, &wr);
		expect_wc(e->cq, qp, 4, IBV_WC_SEND, 8);
		expect_recv(e, aq, 104, 0, 8, S_MSG(4));
		n++;
	}

	sr_note("lone inline SEND of 8 bytes");
	post_recv_slot(e, aq, 105, 1);
	{
		/* unregistered memory and a meaningless lkey: inline data is copied */
		char buf[8];
		struct ibv_sge sge = {(uintptr_t)buf, 8, 0xdeadbeef};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, 5, &sge, 0, 0);

		pat_fill(buf, 8, S_MSG(5), 0);
		wr.send_flags |= IBV_SEND_INLINE;
		post_lone(qp, &wr);
		memset(buf, 0, sizeof(buf)); /* the application may reuse it at once */
		expect_wc(e->cq, qp, 5, IBV_WC_SEND, 8);
		expect_recv(e, aq, 105, 1, 8, S_MSG(5));
		n++;
	}

	sr_note("lone SEND of 4 KiB");
	post_recv_slot(e, aq, 106, 2);
	{
		struct ibv_sge sge = {(uintptr_t)e->src.p, MSG_LEN, e->src.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_SEND, 6, &sge, 0, 0);

		pat_fill(e->src.p, MSG_LEN, S_MSG(6), 0);
		post_lone(qp, &wr);
		expect_wc(e->cq, qp, 6, IBV_WC_SEND, MSG_LEN);
		expect_recv(e, aq, 106, 2, MSG_LEN, S_MSG(6));
		n++;
	}

	sr_note("unsignaled lone WRITEs, then a signaled one");
	{
		struct ibv_wc wc[N_UNSIG + 1];

		for (unsigned k = 0; k <= N_UNSIG; k++) {
			char *p = e->src.p + k * UNSIG_LEN;
			struct ibv_sge sge = {(uintptr_t)p, UNSIG_LEN, e->src.mr->lkey};
			struct ibv_send_wr wr =
			    rdma_wr(IBV_WR_RDMA_WRITE, 10 + k, &sge,
				    e->tgt.addr + 2048 + k * 2 * UNSIG_LEN, e->tgt.rkey);

			pat_fill(p, UNSIG_LEN, S_MSG(10 + k), 0);
			if (k < N_UNSIG)
				wr.send_flags = 0;
			post_lone(qp, &wr);
			n++;
		}
		/* only the signaled one completes */
		CHECK_EQ(vpoll(e->cq, wc, N_UNSIG + 1, 200), 1);
		CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10 + N_UNSIG, qp->qp_num);
		CHECK_EQ(wc[0].byte_len, UNSIG_LEN);
		for (unsigned k = 0; k <= N_UNSIG; k++) {
			uint64_t off = 2048 + k * 2 * UNSIG_LEN;

			sr_note("unsignaled WRITE %u", k);
			CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, (int64_t)off, UNSIG_LEN,
					      S_MSG(10 + k), 0),
				 -1);
			/* the gap after it is untouched */
			CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, (int64_t)(off + UNSIG_LEN),
					      UNSIG_LEN, S_BACKGROUND, off + UNSIG_LEN),
				 -1);
			ag_mem_fill(&e->ag, e->tgt.h, (int64_t)off, UNSIG_LEN, S_BACKGROUND, off);
		}
	}
	vpoll_none(e->cq, 20);
	CHECK_EQ(vqp_state(qp), IBV_QPS_RTS);
	return n;
}

/* ---- 1b: lone READs and atomics that complete on the spot ---- */

/* Returns how many lone work requests it posted; *bytes gets the READ
 * payload total. */
static unsigned part_read_atomic(struct denv *e, struct ibv_qp *qp, unsigned long long *bytes)
{
	static const struct {
		uint32_t len;
		uint64_t off;
	} reads[] = {{8, 4096 + 64}, {MSG_LEN, 4096}, {0, 0}};
	uint64_t a0, a1, v;
	unsigned n = 0;

	*bytes = 0;
	for (unsigned i = 0; i < 3; i++) {
		struct ibv_sge sge = {(uintptr_t)(e->src.p + 64), reads[i].len, e->src.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_RDMA_READ, 20 + i, &sge,
						e->tgt.addr + reads[i].off, e->tgt.rkey);

		sr_note("lone READ of %u bytes", reads[i].len);
		ag_mem_fill(&e->ag, e->tgt.h, (int64_t)reads[i].off, reads[i].len, S_MSG(20 + i),
			    0);
		pat_fill(e->src.p, 2 * MSG_LEN, S_JUNK, 0);
		post_lone(qp, &wr);
		expect_wc(e->cq, qp, 20 + i, IBV_WC_RDMA_READ, reads[i].len);
		n++;
		*bytes += reads[i].len;
		/* the remote bytes, and locally nothing around them */
		CHECK_PAT(e->src.p + 64, reads[i].len, S_MSG(20 + i), 0);
		CHECK_PAT(e->src.p, 64, S_JUNK, 0);
		CHECK_PAT(e->src.p + 64 + reads[i].len, 2 * MSG_LEN - 64 - reads[i].len, S_JUNK,
			  64 + reads[i].len);
		ag_mem_fill(&e->ag, e->tgt.h, (int64_t)reads[i].off, reads[i].len, S_BACKGROUND,
			    reads[i].off);
	}
	CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);

	ag_mem_read(&e->ag, e->atom.h, 0, 8, &a0);
	ag_mem_read(&e->ag, e->atom.h, 8, 8, &a1);
	sr_note("lone FETCH_AND_ADD");
	{
		struct ibv_sge sge = {(uintptr_t)(e->src.p + 8), 8, e->src.mr->lkey};
		struct ibv_send_wr wr =
		    rdma_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, 25, &sge, e->atom.addr, e->atom.rkey);

		wr.wr.atomic.compare_add = 0x1001;
		post_lone(qp, &wr);
		expect_wc(e->cq, qp, 25, IBV_WC_FETCH_ADD, 8);
		memcpy(&v, e->src.p + 8, 8);
		CHECK_EQ(v, a0);
		ag_mem_read(&e->ag, e->atom.h, 0, 8, &v);
		CHECK_EQ(v, a0 + 0x1001);
		n++;
	}
	sr_note("lone CMP_AND_SWP, matching and not");
	for (int k = 0; k < 2; k++) {
		struct ibv_sge sge = {(uintptr_t)(e->src.p + 16), 8, e->src.mr->lkey};
		struct ibv_send_wr wr = rdma_wr(IBV_WR_ATOMIC_CMP_AND_SWP, 26 + (uint64_t)k, &sge,
						e->atom.addr + 8, e->atom.rkey);

		wr.wr.atomic.compare_add = a1;
		wr.wr.atomic.swap = k ? 7 : 0x0123456789abcdefull;
		post_lone(qp, &wr);
		expect_wc(e->cq, qp, 26 + (uint64_t)k, IBV_WC_COMP_SWAP, 8);
		memcpy(&v, e->src.p + 16, 8);
		CHECK_EQ(v, k ? 0x0123456789abcdefull : a1);
		ag_mem_read(&e->ag, e->atom.h, 8, 8, &v);
		CHECK_EQ(v, 0x0123456789abcdefull); /* the failed compare left it */
		n++;
	}
	CHECK_EQ(ag_guard_check(&e->ag, e->atom.h), -1);
	vpoll_none(e->cq, 20);
	CHECK_EQ(vqp_state(qp), IBV_QPS_RTS);
	return n;
}

/* ---- 2: a lone SEND that must wait, and one queued behind it ---- */

static void part_rnr(struct denv *e, struct ibv_qp *qp, const struct ag_qp *aq,
		     unsigned long long direct_before, unsigned long long sends_before)
{
	struct ibv_sge sge[2];
	struct ibv_send_wr wr[2];
	struct ibv_wc wc[2];
	struct qp_status st;

	sr_note("lone SEND, no receive posted");
	for (int i = 0; i < 2; i++) {
		sge[i] = (struct ibv_sge){(uintptr_t)(e->src.p + i * 256), 64, e->src.mr->lkey};
		pat_fill(e->src.p + i * 256, 64, S_MSG(30 + i), 0);
		wr[i] = rdma_wr(IBV_WR_SEND, 30 + (uint64_t)i, &sge[i], 0, 0);
	}
	post_lone(qp, &wr[0]);
	vpoll_none(e->cq, 100);
	CHECK_EQ(ag_poll(&e->ag, e->acq, wc, 1, 10), 0);

	sr_note("a second lone SEND behind it");
	post_lone(qp, &wr[1]);
	vpoll_none(e->cq, 50);
	CHECK_EQ(vqp_state(qp), IBV_QPS_RTS);
	/* both are in the ring now: the first became its head, the second queued */
	qp_status(qp->qp_num, &st);
	CHECK_EQ(st.sq_used, 2);
	CHECK_EQ(st.direct, direct_before);

	sr_note("receives posted");
	post_recv_slot(e, aq, 130, 0);
	post_recv_slot(e, aq, 131, 1);
	REQUIRE_EQ(vpoll(e->cq, wc, 2, 5000), 2);
	for (int i = 0; i < 2; i++) {
		CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_SEND, 30 + (uint64_t)i, qp->qp_num);
		CHECK_EQ(wc[i].byte_len, 64);
	}
	vpoll_none(e->cq, 20);
	for (int i = 0; i < 2; i++)
		expect_recv(e, aq, 130 + (uint64_t)i, i, 64, S_MSG(30 + i));
	CHECK_EQ(ag_poll(&e->ag, e->acq, wc, 1, 10), 0);
	CHECK_EQ(vqp_state(qp), IBV_QPS_RTS);

	/* they completed from the ring, not directly; the first one waited */
	qp_status(qp->qp_num, &st);
	REQUIRE(st.has_sent);
	CHECK_EQ(st.sq_used, 0);
	CHECK_EQ(st.direct, direct_before);
	CHECK_EQ(st.send, sends_before + 2);
	CHECK_CMP(st.rnr, >=, 1);
}

void test_direct_path(void)
{
	struct denv e;
	struct ag_qp aq, aq3, aq4;
	struct ibv_qp *qp, *qp3, *qp4;
	struct qp_status st;
	struct ibv_wc wc;
	unsigned long long read_bytes;
	unsigned n;

	rng_init(&e.r, 90);
	agent_start(&e.ag, "agent");
	vdev_open(&e.d);
	e.acq = ag_cq(&e.ag, 64, 0);
	aregions_init(&e.ag, &e.ar, IBV_ACCESS_LOCAL_WRITE);
	e.tgt = ag_mr_reg(&e.ag, TGT_LEN, 64,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			  0, S_BACKGROUND);
	e.atom = ag_mr_reg(&e.ag, 16, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 0,
			   S_ATOMIC);
	e.cq = ibv_create_cq(e.d.ctx, 64, NULL, NULL, 0);
	REQUIRE(e.cq);
	vbuf_reg(&e.d, &e.src, 2 * MSG_LEN, 64, IBV_ACCESS_LOCAL_WRITE, NULL);
	qp = new_pair(&e, &aq);

	/* 1 */
	n = part_complete(&e, qp, &aq);
	n += part_read_atomic(&e, qp, &read_bytes);

	/* 5: every one of them went the direct path (the counter is bumped
	 * before post_send returns, so it is exact by now) */
	sr_note("softrdma status after the lone work requests");
	qp_status(qp->qp_num, &st);
	REQUIRE(st.has_sent);
	CHECK_EQ(st.direct, n);
	CHECK_EQ(st.write, 3 + N_UNSIG + 1);
	CHECK_EQ(st.send, 3);
	CHECK_EQ(st.read, 3);
	CHECK_EQ(st.atomic, 3);
	CHECK_EQ(st.bytes,
		 8 + MSG_LEN + 0 + 8 + 8 + MSG_LEN + (N_UNSIG + 1) * UNSIG_LEN + read_bytes);
	CHECK_EQ(st.rnr, 0);
	CHECK_EQ(st.rem_access_err, 0);
	CHECK_EQ(st.sq_used, 0);

	/* 2 */
	part_rnr(&e, qp, &aq, st.direct, st.send);

	/* 3 */
	sr_note("lone WRITE with an invalid rkey");
	qp3 = new_pair(&e, &aq3);
	{
		struct ibv_sge sge = {(uintptr_t)e.src.p, 64, e.src.mr->lkey};
		struct ibv_send_wr wr =
		    rdma_wr(IBV_WR_RDMA_WRITE, 40, &sge, e.tgt.addr, e.tgt.rkey ^ 0xff);

		memset(e.src.p, 0x77, 64);
		/* REM_ACCESS_ERR, then ERR (ibv_query_qp), then WR_FLUSH_ERR */
		post_expect_fatal(qp3, e.cq, &wr, IBV_WC_REM_ACCESS_ERR);
		CHECK_EQ(ag_mem_check(&e.ag, e.tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);
		CHECK_EQ(ag_guard_check(&e.ag, e.tgt.h), -1);
		qp_status(qp3->qp_num, &st);
		REQUIRE(st.has_sent);
		CHECK_EQ(st.rem_access_err, 1);
		CHECK_EQ(st.direct, 0);
	}
	CHECK_EQ(ibv_destroy_qp(qp3), 0);
	destroy_agent_qp(&e, &aq3);

	/* 3b: a READ with a bad rkey, a READ into memory without LOCAL_WRITE,
	 * a misaligned atomic: each fails, fails the QP, and is not counted */
	for (int k = 0; k < 3; k++) {
		static const enum ibv_wc_status want[] = {
		    IBV_WC_REM_ACCESS_ERR, IBV_WC_LOC_PROT_ERR, IBV_WC_REM_INV_REQ_ERR};
		struct vbuf ro;
		struct ibv_sge sge = {(uintptr_t)e.src.p, 64, e.src.mr->lkey};
		struct ibv_send_wr wr =
		    rdma_wr(IBV_WR_RDMA_READ, 70 + 10 * (uint64_t)k, &sge, e.tgt.addr, e.tgt.rkey);

		sr_note("lone %s", k == 0   ? "READ with an invalid rkey"
				   : k == 1 ? "READ into a region without LOCAL_WRITE"
					    : "misaligned FETCH_AND_ADD");
		qp3 = new_pair(&e, &aq3);
		pat_fill(e.src.p, 64, S_JUNK, 0);
		if (k == 0)
			wr.wr.rdma.rkey ^= 0xff;
		if (k == 1) {
			vbuf_reg(&e.d, &ro, 256, 64, 0, NULL);
			pat_fill(ro.p, 64, S_JUNK, 0);
			sge = (struct ibv_sge){(uintptr_t)ro.p, 64, ro.mr->lkey};
		}
		if (k == 2) {
			sge.length = 8;
			wr = rdma_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, 90, &sge, e.atom.addr + 4,
				     e.atom.rkey);
		}
		post_expect_fatal(qp3, e.cq, &wr, want[k]);
		/* nothing landed locally, nothing changed remotely */
		CHECK_PAT(k == 1 ? ro.p : e.src.p, 64, S_JUNK, 0);
		CHECK_EQ(ag_mem_check(&e.ag, e.tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);
		qp_status(qp3->qp_num, &st);
		CHECK_EQ(st.direct, 0);
		CHECK_EQ(st.read + st.atomic, 0);
		CHECK_EQ(ibv_destroy_qp(qp3), 0);
		destroy_agent_qp(&e, &aq3);
		if (k == 1)
			vbuf_free(&ro);
	}
	{
		uint64_t v;

		ag_mem_read(&e.ag, e.atom.h, 8, 8, &v);
		CHECK_EQ(v, 0x0123456789abcdefull);
	}

	/* 4 */
	for (int round = 0; round < 2; round++) {
		struct vbuf gone;
		uint32_t lkey;
		char *p;

		sr_note("lone SEND with %s", round ? "a spoiled lkey" : "a deregistered MR's lkey");
		qp4 = new_pair(&e, &aq4);
		post_recv_slot(&e, &aq4, 150, 3);
		if (round) {
			lkey = e.src.mr->lkey ^ 0x5a5a00;
			p = e.src.p;
		} else {
			vbuf_reg(&e.d, &gone, 256, 64, IBV_ACCESS_LOCAL_WRITE, NULL);
			p = gone.p;
			lkey = gone.mr->lkey;
			CHECK_EQ(ibv_dereg_mr(gone.mr), 0);
			gone.mr = NULL;
		}
		pat_fill(p, 64, S_MSG(50), 0);
		{
			struct ibv_sge sge = {(uintptr_t)p, 64, lkey};
			struct ibv_send_wr wr =
			    rdma_wr(IBV_WR_SEND, 50 + (uint64_t)round * 10, &sge, 0, 0);

			post_expect_fatal(qp4, e.cq, &wr, IBV_WC_LOC_PROT_ERR);
		}
		/* nothing reached the responder, which is still fine */
		CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 20), 0);
		CHECK_EQ(ag_qp_state(&e.ag, aq4.h), IBV_QPS_RTS);
		CHECK_EQ(ag_mem_check(&e.ag, e.ar.h[3], 0, RECV_LEN, S_JUNK, 0), -1);
		qp_status(qp4->qp_num, &st);
		CHECK_EQ(st.direct, 0); /* no "sent:" line at all reads as 0 */
		CHECK_EQ(st.send, 0);
		if (!round)
			vbuf_free(&gone);
		CHECK_EQ(ibv_destroy_qp(qp4), 0);
		destroy_agent_qp(&e, &aq4);
	}

	/* the first QP is untouched by all that, and still takes the direct path */
	sr_note("the first QP afterwards");
	qp_status(qp->qp_num, &st);
	{
		unsigned long long before = st.direct;
		struct ibv_sge sge = {(uintptr_t)e.src.p, 128, e.src.mr->lkey};
		struct ibv_send_wr wr =
		    rdma_wr(IBV_WR_RDMA_WRITE, 60, &sge, e.tgt.addr + 512, e.tgt.rkey);

		pat_fill(e.src.p, 128, S_MSG(60), 0);
		post_lone(qp, &wr);
		expect_wc(e.cq, qp, 60, IBV_WC_RDMA_WRITE, 128);
		CHECK_EQ(ag_mem_check(&e.ag, e.tgt.h, 512, 128, S_MSG(60), 0), -1);
		ag_mem_fill(&e.ag, e.tgt.h, 512, 128, S_BACKGROUND, 512);
		qp_status(qp->qp_num, &st);
		CHECK_EQ(st.direct, before + 1);
	}

	/* nothing left over, nothing outside the targets written */
	vpoll_none(e.cq, 20);
	CHECK_EQ(ag_poll(&e.ag, e.acq, &wc, 1, 20), 0);
	CHECK_EQ(ag_mem_check(&e.ag, e.tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);
	CHECK_EQ(ag_guard_check(&e.ag, e.tgt.h), -1);
	CHECK_EQ(vbuf_guard_damage(&e.src), -1);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(e.cq), 0);
	vbuf_free(&e.src);
	vdev_close(&e.d);
	agent_stop(&e.ag);
}
