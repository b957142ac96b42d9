/*
 * Every opcode on every transport, between two processes, with the data
 * checked byte for byte: random sizes (0..64 KiB; UD up to the port's active
 * MTU), random remote offsets, random scatter/gather layouts of 1..max_sge
 * pieces over several regions on both sides, and every completion's fields.
 * Also inline sends and unsignaled work requests.
 */
#include "tcommon.h"

#define TGT_LEN (160 * 1024)

enum op { OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM, OP_READ, OP_CAS, OP_FAA };
static const char *const op_name[] = {
    "SEND",	 "SEND_WITH_IMM", "RDMA_WRITE",	  "RDMA_WRITE_WITH_IMM",
    "RDMA_READ", "CMP_AND_SWP",	  "FETCH_AND_ADD"};

struct env {
	enum ibv_qp_type type;
	struct rng r;
	/* ours */
	struct vdev d;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct lregions lr;
	struct vbuf res;
	int max_send_sge;
	/* the agent's */
	struct agent ag;
	int acq;
	struct ag_qp aq;
	struct aregions ar;
	struct ag_mr tgt, atom;
	uint64_t atom_val[8];
};

static void env_setup(struct env *e, enum ibv_qp_type type, struct qp_spec *spec_or_null)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;
	struct qp_spec s;

	memset(e, 0, sizeof(*e));
	e->type = type;
	rng_init(&e->r, type);
	agent_start(&e->ag, "agent");
	vdev_open(&e->d);
	printf("# transport %s, active MTU %u, max_sge %d\n",
	       type == IBV_QPT_RC   ? "RC"
	       : type == IBV_QPT_UC ? "UC"
				    : "UD",
	       e->d.mtu, e->d.attr.max_sge);

	e->acq = ag_cq(&e->ag, 256, 0);
	e->aq = ag_qp_create(&e->ag, type, e->acq, e->acq, -1, 0, 0);
	aregions_init(&e->ag, &e->ar, IBV_ACCESS_LOCAL_WRITE);
	e->tgt = ag_mr_reg(&e->ag, TGT_LEN, 64, access, 0, S_BACKGROUND);
	e->atom = ag_mr_reg(&e->ag, 64, 64, access, 0, S_ATOMIC);
	ag_mem_read(&e->ag, e->atom.h, 0, sizeof(e->atom_val), e->atom_val);

	e->cq = ibv_create_cq(e->d.ctx, 256, NULL, NULL, 0);
	REQUIRE(e->cq);
	if (spec_or_null) {
		s = *spec_or_null;
	} else {
		memset(&s, 0, sizeof(s));
		s.send_sge = (uint32_t)e->d.attr.max_sge;
		s.recv_sge = (uint32_t)e->d.attr.max_sge;
	}
	s.type = type;
	s.scq = e->cq;
	e->qp = vqp_create(&e->d, &s);
	e->max_send_sge = (int)s.send_sge;
	lregions_init(&e->d, &e->lr, IBV_ACCESS_LOCAL_WRITE);
	vbuf_reg(&e->d, &e->res, 64, 64, IBV_ACCESS_LOCAL_WRITE, NULL);

	if (type == IBV_QPT_UD) {
		ag_qp_connect(&e->ag, e->aq.h, 0, 0, 0, &e->d.gid, &CONN_DEFAULT);
		vqp_connect(&e->d, e->qp, (uint32_t)rng_next(&e->r) & 0xffffff, 0, 0, NULL,
			    &CONN_DEFAULT);
		e->ah = vah_create(&e->d, &e->ag.gid);
	} else {
		pair_connect(&e->d, e->qp, &CONN_DEFAULT, &e->ag, &e->aq, &CONN_DEFAULT, &e->r);
	}
}

static void env_teardown(struct env *e)
{
	/* nothing left over on either side */
	struct ibv_wc wc;

	CHECK_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 20), 0);
	vpoll_none(e->cq, 20);
	CHECK_EQ(ag_guard_check(&e->ag, e->tgt.h), -1);
	CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, 0, TGT_LEN, S_BACKGROUND, 0), -1);
	if (e->ah)
		CHECK_EQ(ibv_destroy_ah(e->ah), 0);
	CHECK_EQ(ibv_destroy_qp(e->qp), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	lregions_free(&e->lr);
	vbuf_free(&e->res);
	vdev_close(&e->d);
	agent_stop(&e->ag);
}

static void set_dest(struct env *e, struct ibv_send_wr *wr)
{
	if (e->type == IBV_QPT_UD) {
		wr->wr.ud.ah = e->ah;
		wr->wr.ud.remote_qpn = e->aq.qpn;
		wr->wr.ud.remote_qkey = CONN_DEFAULT.qkey;
	}
}

/* The agent's receive completion and the bytes it scattered. */
static void check_agent_recv(struct env *e, uint64_t wr_id, const struct piece *rp, int rn,
			     uint64_t len, int with_imm, uint32_t imm, enum ibv_wc_opcode opc,
			     uint64_t stream)
{
	uint64_t hdr = e->type == IBV_QPT_UD ? GRH_LEN : 0;
	static char got[MAX_MSG + 256];
	struct ibv_wc wc;

	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, opc, wr_id, e->aq.qpn);
	CHECK_EQ(wc.byte_len, len + hdr);
	CHECK_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), !!with_imm);
	if (with_imm)
		CHECK_EQ(ntohl(wc.imm_data), imm);
	if (e->type == IBV_QPT_UD) {
		struct ibv_grh *grh = (struct ibv_grh *)got;

		CHECK(wc.wc_flags & IBV_WC_GRH);
		CHECK_EQ(wc.sl, roce_ud_sl(&e->d.gid, &e->ag.gid));
		CHECK_EQ(wc.src_qp, e->qp->qp_num);
		agent_gather(&e->ag, &e->ar, rp, rn, got, len + hdr);
		CHECK_GRH(grh, &e->d.gid, &e->ag.gid);
		CHECK_PAT(got + hdr, len, stream, 0);
	} else if (opc == IBV_WC_RECV) {
		agent_gather(&e->ag, &e->ar, rp, rn, got, len);
		CHECK_PAT(got, len, stream, 0);
	}
}

static void post_ok(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int r = ibv_post_send(qp, wr, &bad);

	CHECK_EQ(r, 0);
	if (r)
		sr__fatal();
}

static void do_send(struct env *e, int i, enum op op, uint64_t len)
{
	uint64_t hdr = e->type == IBV_QPT_UD ? GRH_LEN : 0;
	struct piece rp[LAYOUT_MAX], sp[LAYOUT_MAX];
	struct ibv_sge sge[LAYOUT_MAX];
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	uint32_t imm = (uint32_t)rng_next(&e->r);
	int rn, sn;

	rn = layout_make(&e->r, e->ar.len, NREGION, len + hdr + rng_range(&e->r, 0, 64),
			 (int)e->aq.max_recv_sge, rp);
	CHECK_EQ(ag_post_recv(&e->ag, e->aq.h, 0, (uint64_t)i, rp, rn, e->ar.h), 0);

	sn = layout_make(&e->r, e->lr.len, NREGION, len, e->max_send_sge, sp);
	layout_fill(sp, sn, e->lr.p, S_MSG(i), 0);
	layout_sges(sp, sn, e->lr.p, sge);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)i;
	wr.sg_list = sge;
	wr.num_sge = sn;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = op == OP_SEND_IMM ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(imm);
	set_dest(e, &wr);
	post_ok(e->qp, &wr);
	vpoll1(e->cq, &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, (uint64_t)i, e->qp->qp_num);
	check_agent_recv(e, (uint64_t)i, rp, rn, len, op == OP_SEND_IMM, imm, IBV_WC_RECV,
			 S_MSG(i));
}

static void do_write(struct env *e, int i, enum op op, uint64_t len)
{
	uint64_t off = rng_range(&e->r, 1, TGT_LEN - len - 1);
	struct piece rp[LAYOUT_MAX], sp[LAYOUT_MAX];
	struct ibv_sge sge[LAYOUT_MAX];
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	uint32_t imm = (uint32_t)rng_next(&e->r);
	int rn = 0, sn;

	if (op == OP_WRITE_IMM) {
		/* the receive's buffers are not used: any layout, even none */
		rn = layout_make(&e->r, e->ar.len, NREGION, rng_range(&e->r, 0, 64),
				 (int)e->aq.max_recv_sge, rp);
		CHECK_EQ(ag_post_recv(&e->ag, e->aq.h, 0, (uint64_t)i, rp, rn, e->ar.h), 0);
	}
	sn = layout_make(&e->r, e->lr.len, NREGION, len, e->max_send_sge, sp);
	layout_fill(sp, sn, e->lr.p, S_MSG(i), 0);
	layout_sges(sp, sn, e->lr.p, sge);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)i;
	wr.sg_list = sge;
	wr.num_sge = sn;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = op == OP_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = e->tgt.addr + off;
	wr.wr.rdma.rkey = e->tgt.rkey;
	post_ok(e->qp, &wr);
	vpoll1(e->cq, &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)i, e->qp->qp_num);
	if (op == OP_WRITE_IMM)
		check_agent_recv(e, (uint64_t)i, rp, rn, len, 1, imm, IBV_WC_RECV_RDMA_WITH_IMM, 0);
	/* the written range holds the message, and nothing else changed (a UC
	 * WRITE completes when sent: across hosts it may still be on the way) */
	CHECK_EQ(ag_mem_wait(&e->ag, e->tgt.h, (int64_t)off, len, S_MSG(i), 0, 2000), -1);
	CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, 0, off, S_BACKGROUND, 0), -1);
	CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, (int64_t)(off + len), TGT_LEN - off - len,
			      S_BACKGROUND, off + len),
		 -1);
	ag_mem_fill(&e->ag, e->tgt.h, (int64_t)off, len, S_BACKGROUND, off);
}

static void do_read(struct env *e, int i, uint64_t len)
{
	uint64_t off = rng_range(&e->r, 0, TGT_LEN - len);
	static char got[MAX_MSG];
	struct piece dp[LAYOUT_MAX];
	struct ibv_sge sge[LAYOUT_MAX];
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	int dn;

	dn = layout_make(&e->r, e->lr.len, NREGION, len, e->max_send_sge, dp);
	layout_fill(dp, dn, e->lr.p, S_JUNK, 0);
	layout_sges(dp, dn, e->lr.p, sge);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)i;
	wr.sg_list = sge;
	wr.num_sge = dn;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = e->tgt.addr + off;
	wr.wr.rdma.rkey = e->tgt.rkey;
	post_ok(e->qp, &wr);
	vpoll1(e->cq, &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, (uint64_t)i, e->qp->qp_num);
	CHECK_EQ(wc.byte_len, len);
	layout_gather(dp, dn, e->lr.p, got, len);
	CHECK_PAT(got, len, S_BACKGROUND, off);
}

static void do_atomic(struct env *e, int i, enum op op)
{
	unsigned slot = (unsigned)rng_range(&e->r, 0, 7), ro = 8 * (unsigned)rng_range(&e->r, 0, 7);
	uint64_t cur = e->atom_val[slot], want, got, remote;
	uint64_t a = rng_next(&e->r), b = rng_next(&e->r);
	bool swap_ok = rng_next(&e->r) & 1;
	struct ibv_sge sge = {(uintptr_t)(e->res.p + ro), 8, e->res.mr->lkey};
	struct ibv_send_wr wr;
	struct ibv_wc wc;

	memset(e->res.p, 0xee, 64);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = e->atom.addr + 8 * slot;
	wr.wr.atomic.rkey = e->atom.rkey;
	if (op == OP_CAS) {
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		/* the compare succeeds or fails on purpose */
		wr.wr.atomic.compare_add = swap_ok ? cur : cur ^ (a | 1);
		wr.wr.atomic.swap = b;
		want = swap_ok ? b : cur;
		sr_note("iter %d CMP_AND_SWP (%s compare)", i, swap_ok ? "matching" : "failing");
	} else {
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.compare_add = a;
		want = cur + a;
	}
	post_ok(e->qp, &wr);
	vpoll1(e->cq, &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, op == OP_CAS ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD,
		 (uint64_t)i, e->qp->qp_num);
	CHECK_EQ(wc.byte_len, 8);
	memcpy(&got, e->res.p + ro, 8);
	CHECK_EQ(got, cur); /* the original value comes back either way */
	ag_mem_read(&e->ag, e->atom.h, 8 * slot, 8, &remote);
	CHECK_EQ(remote, want);
	e->atom_val[slot] = want;
}

/* A UD datagram the other way, to a receive of ours. */
static void ud_reply(struct env *e, int i)
{
	uint64_t len = rng_size(&e->r, e->d.mtu), stream = S_MSG(100000 + i);
	struct piece rp[LAYOUT_MAX], sp[LAYOUT_MAX];
	struct ibv_sge sge[LAYOUT_MAX];
	struct ibv_recv_wr rwr, *bad;
	static char got[8192];
	struct ag_wr w;
	struct ibv_wc wc;
	int rn, sn;

	rn = layout_make(&e->r, e->lr.len, NREGION, len + GRH_LEN + rng_range(&e->r, 0, 64),
			 e->max_send_sge, rp);
	layout_sges(rp, rn, e->lr.p, sge);
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 7000 + (uint64_t)i;
	rwr.sg_list = sge;
	rwr.num_sge = rn;
	CHECK_EQ(ibv_post_recv(e->qp, &rwr, &bad), 0);

	sn = layout_make(&e->r, e->ar.len, NREGION, len, (int)e->aq.max_send_sge, sp);
	for (int k = 0, pos = 0; k < sn; pos += sp[k].len, k++)
		ag_mem_fill(&e->ag, e->ar.h[sp[k].mr], (int64_t)sp[k].off, sp[k].len, stream,
			    (uint64_t)pos);
	w = ag_wr_make(e->aq.h, IBV_WR_SEND, 9000 + (uint64_t)i, sn);
	w.ud_qpn = e->qp->qp_num;
	w.ud_qkey = CONN_DEFAULT.qkey;
	memcpy(w.ud_dgid, e->d.gid.raw, 16);
	CHECK_EQ(ag_post_send(&e->ag, &w, sp, e->ar.h, NULL), 0);
	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 9000 + (uint64_t)i, e->aq.qpn);

	vpoll1(e->cq, &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 7000 + (uint64_t)i, e->qp->qp_num);
	CHECK_EQ(wc.byte_len, len + GRH_LEN);
	CHECK_EQ(wc.src_qp, e->aq.qpn);
	CHECK(wc.wc_flags & IBV_WC_GRH);
	CHECK_EQ(wc.sl, roce_ud_sl(&e->ag.gid, &e->d.gid));
	layout_gather(rp, rn, e->lr.p, got, len + GRH_LEN);
	CHECK_GRH(got, &e->ag.gid, &e->d.gid);
	CHECK_PAT(got + GRH_LEN, len, stream, 0);
}

static void run_ops(enum ibv_qp_type type, const enum op *ops, int nops, int iters)
{
	struct env e;
	uint64_t max = type == IBV_QPT_UD ? 0 : MAX_MSG;
	int count[8] = {0};

	env_setup(&e, type, NULL);
	if (type == IBV_QPT_UD)
		max = e.d.mtu;
	for (int i = 0; i < iters; i++) {
		enum op op = ops[i % nops];
		uint64_t len;

		/* the first rounds take the edge sizes: 0, the maximum, 1 */
		if (i < nops)
			len = 0;
		else if (i < 2 * nops)
			len = max;
		else if (i < 3 * nops)
			len = 1;
		else
			len = rng_size(&e.r, max);
		if (op == OP_CAS || op == OP_FAA)
			len = 8;
		sr_note("iter %d %s len %llu", i, op_name[op], (unsigned long long)len);
		switch (op) {
		case OP_SEND:
		case OP_SEND_IMM:
			do_send(&e, i, op, len);
			break;
		case OP_WRITE:
		case OP_WRITE_IMM:
			do_write(&e, i, op, len);
			break;
		case OP_READ:
			do_read(&e, i, len);
			break;
		case OP_CAS:
		case OP_FAA:
			do_atomic(&e, i, op);
			break;
		}
		count[op]++;
		if (type == IBV_QPT_UD && i % 10 == 9) {
			sr_note("iter %d UD reply", i);
			ud_reply(&e, i);
		}
	}
	sr_note("teardown");
	for (int k = 0; k < nops; k++)
		printf("# %s: %d\n", op_name[ops[k]], count[ops[k]]);
	env_teardown(&e);
}

void test_rc_ops(void)
{
	static const enum op ops[] = {OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM,
				      OP_READ, OP_CAS,	    OP_FAA};

	run_ops(IBV_QPT_RC, ops, 7, 350);
}

void test_uc_ops(void)
{
	static const enum op ops[] = {OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM};

	run_ops(IBV_QPT_UC, ops, 4, 200);
}

void test_ud_ops(void)
{
	static const enum op ops[] = {OP_SEND, OP_SEND_IMM};

	run_ops(IBV_QPT_UD, ops, 2, 200);
}

/* ---- inline ---- */

static void inline_round(struct env *e, uint32_t max_inline)
{
	static const enum ibv_wr_opcode rc_ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
						    IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM};
	int nops = e->type == IBV_QPT_UD ? 2 : 4;
	char *src = malloc(max_inline + 64);

	REQUIRE(src);
	for (int i = 0; i < 120; i++) {
		enum ibv_wr_opcode opc = rc_ops[i % nops];
		uint64_t len = i < nops	      ? max_inline
			       : i < 2 * nops ? 0
					      : rng_range(&e->r, 0, max_inline);
		uint64_t hdr = e->type == IBV_QPT_UD ? GRH_LEN : 0, off = 0;
		struct piece rp[LAYOUT_MAX];
		struct ibv_sge sge[4];
		struct ibv_send_wr wr;
		struct ibv_wc wc;
		bool two_sided = opc != IBV_WR_RDMA_WRITE;
		uint32_t imm = (uint32_t)rng_next(&e->r);
		int rn = 0, nsge = (int)rng_range(&e->r, 1, 4);
		uint64_t at = 0;

		sr_note("inline iter %d opcode %d len %llu", i, opc, (unsigned long long)len);
		if (two_sided) {
			uint64_t cap = opc == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : len + hdr;

			rn = layout_make(&e->r, e->ar.len, NREGION, cap + rng_range(&e->r, 0, 32),
					 (int)e->aq.max_recv_sge, rp);
			CHECK_EQ(ag_post_recv(&e->ag, e->aq.h, 0, (uint64_t)i, rp, rn, e->ar.h), 0);
		}
		/* unregistered memory and a meaningless lkey: inline data is copied at post */
		pat_fill(src, len, S_MSG(i), 0);
		for (int k = 0; k < nsge; k++) {
			uint64_t part = k == nsge - 1 ? len - at : rng_range(&e->r, 0, len - at);

			sge[k].addr = (uintptr_t)(src + at);
			sge[k].length = (uint32_t)part;
			sge[k].lkey = 0xdeadbeef;
			at += part;
		}
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		wr.sg_list = sge;
		wr.num_sge = nsge;
		wr.opcode = opc;
		wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		wr.imm_data = htonl(imm);
		if (opc == IBV_WR_RDMA_WRITE || opc == IBV_WR_RDMA_WRITE_WITH_IMM) {
			off = rng_range(&e->r, 1, TGT_LEN - len - 1);
			wr.wr.rdma.remote_addr = e->tgt.addr + off;
			wr.wr.rdma.rkey = e->tgt.rkey;
		}
		set_dest(e, &wr);
		post_ok(e->qp, &wr);
		memset(src, 0, max_inline + 64); /* the application may reuse it at once */
		vpoll1(e->cq, &wc);
		CHECK_WC(wc, IBV_WC_SUCCESS,
			 two_sided && opc != IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_SEND
									: IBV_WC_RDMA_WRITE,
			 (uint64_t)i, e->qp->qp_num);
		if (opc == IBV_WR_SEND || opc == IBV_WR_SEND_WITH_IMM)
			check_agent_recv(e, (uint64_t)i, rp, rn, len, opc == IBV_WR_SEND_WITH_IMM,
					 imm, IBV_WC_RECV, S_MSG(i));
		if (opc == IBV_WR_RDMA_WRITE || opc == IBV_WR_RDMA_WRITE_WITH_IMM) {
			if (opc == IBV_WR_RDMA_WRITE_WITH_IMM)
				check_agent_recv(e, (uint64_t)i, rp, rn, len, 1, imm,
						 IBV_WC_RECV_RDMA_WITH_IMM, 0);
			CHECK_EQ(ag_mem_check(&e->ag, e->tgt.h, (int64_t)off, len, S_MSG(i), 0),
				 -1);
			ag_mem_fill(&e->ag, e->tgt.h, (int64_t)off, len, S_BACKGROUND, off);
		}
	}

	/* more than max_inline_data is refused at post time, and the QP stays usable */
	{
		struct ibv_sge sge = {(uintptr_t)src, max_inline + 1, 0};
		struct ibv_send_wr wr, *bad = NULL;
		int r;

		sr_note("inline over the limit");
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 424242;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = e->type == IBV_QPT_UD ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		wr.wr.rdma.remote_addr = e->tgt.addr;
		wr.wr.rdma.rkey = e->tgt.rkey;
		set_dest(e, &wr);
		r = ibv_post_send(e->qp, &wr, &bad);
		CHECK(r == EINVAL || r == ENOMEM);
		CHECK(bad == &wr);
		vpoll_none(e->cq, 10);
		CHECK_EQ(vqp_state(e->qp), IBV_QPS_RTS);
	}
	free(src);
}

void test_inline_send(void)
{
	struct qp_spec s;
	struct env e;

	for (int t = 0; t < 2; t++) {
		enum ibv_qp_type type = t ? IBV_QPT_UD : IBV_QPT_RC;

		memset(&s, 0, sizeof(s));
		s.send_sge = 4;
		s.recv_sge = 4;
		s.inline_data = 256;
		env_setup(&e, type, &s);
		/* create_qp reports what it gave: at least what was asked */
		CHECK_CMP(s.inline_data, >=, 256);
		{
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr ia;

			CHECK_EQ(ibv_query_qp(e.qp, &qa, IBV_QP_CAP, &ia), 0);
			CHECK_EQ(ia.cap.max_inline_data, s.inline_data);
		}
		printf("# %s max_inline_data %u\n", t ? "UD" : "RC", s.inline_data);
		inline_round(&e, s.inline_data);
		env_teardown(&e);
	}
}

/* ---- unsignaled work requests ---- */

void test_unsignaled(void)
{
	struct qp_spec s;
	struct env e;
	struct ibv_wc wc[16];
	struct ibv_sge sge[64];
	struct ibv_send_wr wr[64], *bad;
	struct piece rp[4];
	int n;

	memset(&s, 0, sizeof(s));
	s.send_wr = 16;
	s.sig_all = 0;
	env_setup(&e, IBV_QPT_RC, &s);

	/* 64 WRITEs in chains of 8, only every 8th signaled: 8 completions, in order */
	sr_note("unsignaled writes");
	for (int c = 0; c < 8; c++) {
		for (int k = 0; k < 8; k++) {
			int i = 8 * c + k;

			pat_fill(e.lr.b[0].p + 256 * i, 256, S_MSG(i), 0);
			sge[i] = (struct ibv_sge){(uintptr_t)(e.lr.b[0].p + 256 * i), 256,
						  e.lr.b[0].mr->lkey};
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = (uint64_t)i;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].opcode = IBV_WR_RDMA_WRITE;
			wr[i].send_flags = k == 7 ? IBV_SEND_SIGNALED : 0;
			wr[i].wr.rdma.remote_addr = e.tgt.addr + 256 * (uint64_t)i;
			wr[i].wr.rdma.rkey = e.tgt.rkey;
			wr[i].next = k < 7 ? &wr[i + 1] : NULL;
		}
		CHECK_EQ(ibv_post_send(e.qp, &wr[8 * c], &bad), 0);
		/* poll as applications do: the signaled one frees the 8 slots */
		CHECK_EQ(vpoll(e.cq, &wc[c], 1, 5000), 1);
	}
	for (int c = 0; c < 8; c++)
		CHECK_WC(wc[c], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 8 * (uint64_t)c + 7,
			 e.qp->qp_num);
	vpoll_none(e.cq, 20);
	for (int i = 0; i < 64; i++)
		CHECK_EQ(ag_mem_check(&e.ag, e.tgt.h, 256 * i, 256, S_MSG(i), 0), -1);
	ag_mem_fill(&e.ag, e.tgt.h, 0, 64 * 256, S_BACKGROUND, 0);

	/* unsignaled SENDs: every receive completes; only the signaled send does */
	sr_note("unsignaled sends");
	for (int i = 0; i < 5; i++) {
		n = layout_make(&e.r, e.ar.len, NREGION, 256, 4, rp);
		CHECK_EQ(ag_post_recv(&e.ag, e.aq.h, 0, 100 + (uint64_t)i, rp, n, e.ar.h), 0);
		sge[i] =
		    (struct ibv_sge){(uintptr_t)(e.lr.b[1].p + 256 * i), 256, e.lr.b[1].mr->lkey};
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = i == 4 ? IBV_SEND_SIGNALED : 0;
		wr[i].next = i < 4 ? &wr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), 0);
	CHECK_EQ(vpoll(e.cq, wc, 1, 5000), 1);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_SEND, 104, e.qp->qp_num);
	vpoll_none(e.cq, 20);
	CHECK_EQ(ag_poll(&e.ag, e.acq, wc, 5, 5000), 5);
	for (int i = 0; i < 5; i++)
		CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_RECV, 100 + (uint64_t)i, e.aq.qpn);

	/* an error completes even when unsignaled (IBTA 10.8.3.1) */
	sr_note("unsignaled error");
	sge[0] = (struct ibv_sge){(uintptr_t)e.lr.b[0].p, 64, e.lr.b[0].mr->lkey};
	memset(&wr[0], 0, sizeof(wr[0]));
	wr[0].wr_id = 200;
	wr[0].sg_list = &sge[0];
	wr[0].num_sge = 1;
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	wr[0].wr.rdma.remote_addr = e.tgt.addr;
	wr[0].wr.rdma.rkey = e.tgt.rkey ^ 0xff; /* not a valid key */
	CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), 0);
	CHECK_EQ(vpoll(e.cq, wc, 1, 5000), 1);
	CHECK_WC(wc[0], IBV_WC_REM_ACCESS_ERR, 0, 200, e.qp->qp_num);
	env_teardown(&e);

	/* sq_sig_all = 1: every WR completes, flagged or not */
	memset(&s, 0, sizeof(s));
	s.sig_all = 1;
	env_setup(&e, IBV_QPT_RC, &s);
	sr_note("sq_sig_all");
	for (int i = 0; i < 4; i++) {
		sge[i] =
		    (struct ibv_sge){(uintptr_t)(e.lr.b[0].p + 64 * i), 64, e.lr.b[0].mr->lkey};
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = 300 + (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].wr.rdma.remote_addr = e.tgt.addr + 64 * (uint64_t)i;
		wr[i].wr.rdma.rkey = e.tgt.rkey;
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	pat_fill(e.lr.b[0].p, 256, S_BACKGROUND, 0);
	CHECK_EQ(ibv_post_send(e.qp, &wr[0], &bad), 0);
	CHECK_EQ(vpoll(e.cq, wc, 4, 5000), 4);
	for (int i = 0; i < 4; i++)
		CHECK_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 300 + (uint64_t)i, e.qp->qp_num);
	env_teardown(&e);
}
