/*
 * XRC verbs against a private softrdmad (IBTA vol. 1 annex A14; rdma-core's
 * errno values): domains opened through a file are one domain for every
 * process of the host, ibv_close_xrcd is EBUSY while SRQs or QPs use the
 * handle, ibv_open_qp finds only XRC_RECV QPs of the opener's domain, and
 * an XRC_SEND to an SRQ number that is no SRQ of the target's domain
 * completes with the invalid request NAK's status.
 */
#include <stdint.h>
#include <sys/stat.h>

#include "sr_test.h"

static union ibv_gid gid0;

static struct ibv_xrcd *xrcd_open(struct ibv_context *ctx, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {
	    .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
	    .fd = fd,
	    .oflags = oflags,
	};

	return ibv_open_xrcd(ctx, &a);
}

static struct ibv_srq *xsrq_new(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_xrcd *x,
				struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.attr.max_wr = 8;
	a.attr.max_sge = 1;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		      IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = IBV_SRQT_XRC;
	a.xrcd = x;
	a.cq = cq;
	a.pd = pd;
	return ibv_create_srq_ex(ctx, &a);
}

static struct ibv_qp *tgt_new(struct ibv_context *ctx, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	a.xrcd = x;
	return ibv_create_qp_ex(ctx, &a);
}

static struct ibv_qp *ini_new(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_SEND;
	a.send_cq = cq;
	a.cap.max_send_wr = 8;
	a.cap.max_send_sge = 1;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	return ibv_create_qp_ex(ctx, &a);
}

/* INIT, RTR, RTS with the masks ibv_xsrq_pingpong uses (rdma-core's). */
static int xrc_connect(struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a;
	bool tgt = qp->qp_type == IBV_QPT_XRC_RECV;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = tgt ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = dqpn;
	a.path_mtu = IBV_MTU_1024;
	a.rq_psn = 0x100;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN |
				(tgt ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x100;
	return ibv_modify_qp(
	    qp, &a,
	    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
		(tgt ? 0 : IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC));
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 2000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
	}
	return 0;
}

static struct ibv_context *ctx_open(void)
{
	struct ibv_context *ctx = open_soft0();

	REQUIRE(ctx);
	REQUIRE(ibv_query_gid(ctx, 1, 0, &gid0) == 0);
	return ctx;
}

/* ibv_open_xrcd's flags, as the kernel's inode-keyed table answers them. */
static void test_xrc_domain_flags(void)
{
	struct ibv_context *ctx = ctx_open();
	char path[] = "/tmp/sr_xrc_XXXXXX", other[] = "/tmp/sr_xrc_XXXXXX";
	int fd = mkstemp(path), fd2 = mkstemp(other);
	struct ibv_xrcd *a, *b, *p;
	struct ibv_xrcd_init_attr ia = {.comp_mask = IBV_XRCD_INIT_ATTR_FD, .fd = -1};

	REQUIRE(fd >= 0 && fd2 >= 0);
	CHECK_NULL_ERRNO(ibv_open_xrcd(ctx, &ia), EINVAL); /* no OFLAGS: rdma-core's EINVAL */
	/* a file with no domain yet: without O_CREAT, EAGAIN (the kernel's) */
	CHECK_NULL_ERRNO(xrcd_open(ctx, fd, 0), EAGAIN);
	a = xrcd_open(ctx, fd, O_CREAT | O_EXCL);
	CHECK_NOT_NULL(a);
	/* it has one now: O_EXCL refuses it, a plain open finds it */
	CHECK_NULL_ERRNO(xrcd_open(ctx, fd, O_CREAT | O_EXCL), EINVAL);
	b = xrcd_open(ctx, fd, 0);
	CHECK_NOT_NULL(b);
	p = xrcd_open(ctx, -1, 0); /* a private one needs no flag */
	CHECK_NOT_NULL(p);
	if (a && b) {
		/* same domain: an XRC_RECV QP made through a opens through b */
		struct ibv_qp *t = tgt_new(ctx, a), *o;
		struct ibv_qp_open_attr oa = {
		    .comp_mask =
			IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
		    .qp_type = IBV_QPT_XRC_RECV,
		};

		REQUIRE(t);
		oa.qp_num = t->qp_num;
		oa.xrcd = b;
		o = ibv_open_qp(ctx, &oa);
		CHECK_NOT_NULL(o);
		CHECK(o && o->qp_num == t->qp_num);
		/* another domain (private, or the other file's) does not have it */
		if (p) {
			oa.xrcd = p;
			CHECK_NULL_ERRNO(ibv_open_qp(ctx, &oa), EINVAL);
		}
		/* b is busy while the QP is open through it */
		CHECK_RET(ibv_close_xrcd(b), EBUSY);
		if (o)
			CHECK_RET(ibv_destroy_qp(o), 0);
		CHECK_RET(ibv_destroy_qp(t), 0);
	}
	if (a)
		CHECK_RET(ibv_close_xrcd(a), 0);
	if (b)
		CHECK_RET(ibv_close_xrcd(b), 0);
	if (p)
		CHECK_RET(ibv_close_xrcd(p), 0);
	/* the domain went with its last handle: the file has none again */
	CHECK_NULL_ERRNO(xrcd_open(ctx, fd, 0), EAGAIN);
	CHECK_NULL_ERRNO(xrcd_open(ctx, fd2, 0), EAGAIN);
	close(fd);
	close(fd2);
	unlink(path);
	unlink(other);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* Two processes opening the same file get the same domain: the child's
 * XRC_RECV QP opens in the parent; the child exits and the QP lives on,
 * opened (IBTA A14), until the parent destroys it. */
static void test_xrc_domain_shared(void)
{
	char path[] = "/tmp/sr_xrc_XXXXXX";
	int fd = mkstemp(path), p2c[2], c2p[2];
	uint32_t qpn = 0;
	pid_t pid;

	REQUIRE(fd >= 0 && !pipe(p2c) && !pipe(c2p));
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct ibv_context *ctx = open_soft0();
		int cfd = open(path, O_RDONLY);
		struct ibv_xrcd *x = ctx && cfd >= 0 ? xrcd_open(ctx, cfd, O_CREAT) : NULL;
		struct ibv_qp *t = x ? tgt_new(ctx, x) : NULL;
		uint32_t n = t ? t->qp_num : 0;
		char go;

		if (write(c2p[1], &n, sizeof(n)) != sizeof(n) || read(p2c[0], &go, 1) != 1)
			_exit(1);
		_exit(0); /* without destroying: the daemon reclaims, the QP passes on */
	}
	struct ibv_context *ctx = ctx_open();
	struct ibv_xrcd *x, *priv;
	struct ibv_qp *o;
	struct ibv_qp_open_attr oa = {
	    .comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
	    .qp_type = IBV_QPT_XRC_RECV,
	};
	int status;
	char go = 1;

	REQUIRE(read(c2p[0], &qpn, sizeof(qpn)) == sizeof(qpn));
	CHECK_NE(qpn, 0);
	x = xrcd_open(ctx, fd, 0); /* the child's domain exists: no O_CREAT needed */
	REQUIRE(x);
	priv = xrcd_open(ctx, -1, 0);
	REQUIRE(priv);
	oa.qp_num = qpn;
	oa.xrcd = priv;
	CHECK_NULL_ERRNO(ibv_open_qp(ctx, &oa), EINVAL); /* not of that domain */
	oa.qp_num = qpn ^ 0x800000;
	oa.xrcd = x;
	CHECK_NULL_ERRNO(ibv_open_qp(ctx, &oa), EINVAL); /* no such QP */
	oa.qp_num = qpn;
	o = ibv_open_qp(ctx, &oa);
	CHECK_NOT_NULL(o);
	CHECK(o && o->qp_type == IBV_QPT_XRC_RECV && o->qp_num == qpn);
	REQUIRE(write(p2c[1], &go, 1) == 1);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (o) {
		/* the creator is gone; the QP is still there, and ours to modify */
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		struct ibv_qp_init_attr ia;

		CHECK_RET(ibv_modify_qp(o, &a, IBV_QP_STATE), 0);
		CHECK_RET(ibv_query_qp(o, &a, IBV_QP_STATE, &ia), 0);
		CHECK_EQ(a.qp_state, IBV_QPS_ERR);
		CHECK_RET(ibv_close_xrcd(x), EBUSY);
		CHECK_RET(ibv_destroy_qp(o), 0);
		oa.xrcd = x;
		CHECK_NULL_ERRNO(ibv_open_qp(ctx, &oa), EINVAL); /* now it is gone */
	}
	CHECK_RET(ibv_close_xrcd(x), 0);
	CHECK_RET(ibv_close_xrcd(priv), 0);
	close(fd);
	unlink(path);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* ibv_close_xrcd: EBUSY while an SRQ or an XRC_RECV QP uses the handle
 * (rdma-core's man page); create without the required objects: EINVAL. */
static void test_xrc_close_busy(void)
{
	struct ibv_context *ctx = ctx_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_xrcd *x = xrcd_open(ctx, -1, 0);
	struct ibv_srq *srq;
	struct ibv_qp *t;
	struct ibv_qp_init_attr_ex qa;
	uint32_t n = 0;

	REQUIRE(pd && cq && x);
	srq = xsrq_new(ctx, pd, x, cq);
	REQUIRE(srq);
	CHECK_RET(ibv_get_srq_num(srq, &n), 0);
	CHECK_NE(n, 0);
	CHECK_RET(ibv_close_xrcd(x), EBUSY);
	CHECK_RET(ibv_destroy_cq(cq), EBUSY); /* the XRC SRQ's CQ */
	CHECK_RET(ibv_destroy_srq(srq), 0);
	t = tgt_new(ctx, x);
	REQUIRE(t);
	CHECK(t->pd == NULL && t->send_cq == NULL && t->recv_cq == NULL);
	CHECK_RET(ibv_close_xrcd(x), EBUSY);
	CHECK_RET(ibv_destroy_qp(t), 0);

	/* what each type needs, missing: EINVAL */
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD; /* no XRCD */
	qa.pd = pd;
	CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &qa), EINVAL);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_SEND;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD; /* no send CQ */
	qa.pd = pd;
	qa.cap.max_send_wr = 1;
	CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &qa), EINVAL);
	{
		struct ibv_srq_init_attr_ex a;

		memset(&a, 0, sizeof(a));
		a.attr.max_wr = 4;
		a.comp_mask =
		    IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_PD;
		a.srq_type = IBV_SRQT_XRC;
		a.xrcd = x;
		a.pd = pd; /* no CQ */
		CHECK_NULL_ERRNO(ibv_create_srq_ex(ctx, &a), EINVAL);
	}
	CHECK_RET(ibv_close_xrcd(x), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
}

struct xpair {
	struct ibv_cq *scq;
	struct ibv_qp *ini, *tgt;
};

static void xpair_open(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_xrcd *x,
		       struct xpair *p)
{
	p->scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	REQUIRE(p->scq);
	p->ini = ini_new(ctx, pd, p->scq);
	p->tgt = tgt_new(ctx, x);
	REQUIRE(p->ini && p->tgt);
	REQUIRE(xrc_connect(p->tgt, p->ini->qp_num) == 0);
	REQUIRE(xrc_connect(p->ini, p->tgt->qp_num) == 0);
}

static void xpair_close(struct xpair *p)
{
	CHECK_RET(ibv_destroy_qp(p->ini), 0);
	CHECK_RET(ibv_destroy_qp(p->tgt), 0);
	CHECK_RET(ibv_destroy_cq(p->scq), 0);
}

static int xsend(struct xpair *p, struct ibv_mr *mr, uint32_t srqn, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)mr->addr, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = srqn;
	return ibv_post_send(p->ini, &wr, &bad);
}

/* The XRCETH's SRQ number chooses the SRQ; its completion goes to that
 * SRQ's CQ, naming the XRC_RECV QP.  A number that is a basic SRQ, or an
 * XRC SRQ of another domain, is an invalid request: the sender completes
 * with REM_INV_REQ_ERR (its QP in ERR). */
static void test_xrc_send_srqn(void)
{
	struct ibv_context *ctx = ctx_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *rcq_a = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_cq *rcq_b = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_xrcd *xa = xrcd_open(ctx, -1, 0), *xb = xrcd_open(ctx, -1, 0);
	static char buf[8192];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_srq_init_attr basic = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq *sa, *sb, *plain;
	struct ibv_sge rsge = {.addr = (uintptr_t)buf + 4096, .length = 4096};
	struct ibv_recv_wr rwr = {.wr_id = 42, .sg_list = &rsge, .num_sge = 1}, *rbad;
	uint32_t na, nb, np;
	struct xpair p;
	struct ibv_wc wc;

	REQUIRE(pd && rcq_a && rcq_b && xa && xb && mr);
	rsge.lkey = mr->lkey;
	sa = xsrq_new(ctx, pd, xa, rcq_a);
	sb = xsrq_new(ctx, pd, xb, rcq_b);
	plain = ibv_create_srq(pd, &basic);
	REQUIRE(sa && sb && plain);
	REQUIRE(!ibv_get_srq_num(sa, &na) && !ibv_get_srq_num(sb, &nb) &&
		!ibv_get_srq_num(plain, &np));
	CHECK_RET(ibv_post_srq_recv(sa, &rwr, &rbad), 0);
	CHECK_RET(ibv_post_srq_recv(sb, &rwr, &rbad), 0);
	CHECK_RET(ibv_post_srq_recv(plain, &rwr, &rbad), 0);

	/* to the domain's own SRQ: delivered on its CQ */
	xpair_open(ctx, pd, xa, &p);
	memcpy(buf, "xrc!", 4);
	CHECK_RET(xsend(&p, mr, na, 100), 0);
	CHECK_EQ(poll_one(p.scq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(poll_one(rcq_a, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 42);
	CHECK_EQ(wc.byte_len, 100);
	CHECK_EQ(wc.qp_num, p.tgt->qp_num);
	CHECK(!memcmp(buf + 4096, "xrc!", 4));
	CHECK_EQ(ibv_poll_cq(rcq_b, 1, &wc), 0);

	/* to an XRC SRQ of another domain */
	CHECK_RET(xsend(&p, mr, nb, 100), 0);
	CHECK_EQ(poll_one(p.scq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;

		CHECK_RET(ibv_query_qp(p.ini, &qa, IBV_QP_STATE, &qia), 0);
		CHECK_EQ(qa.qp_state, IBV_QPS_ERR);
	}
	CHECK_EQ(ibv_poll_cq(rcq_b, 1, &wc), 0); /* its WQE was not consumed */
	xpair_close(&p);

	/* to a basic SRQ's number */
	xpair_open(ctx, pd, xa, &p);
	CHECK_RET(xsend(&p, mr, np, 100), 0);
	CHECK_EQ(poll_one(p.scq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	xpair_close(&p);

	/* posting to an XRC_RECV QP's send queue, or a receive to either: EINVAL */
	xpair_open(ctx, pd, xa, &p);
	{
		struct ibv_send_wr *sbad;
		struct ibv_send_wr swr = {.opcode = IBV_WR_SEND};

		CHECK_RET(ibv_post_send(p.tgt, &swr, &sbad), EINVAL);
		CHECK_RET(ibv_post_recv(p.ini, &rwr, &rbad), EINVAL);
		CHECK_RET(ibv_post_recv(p.tgt, &rwr, &rbad), EINVAL);
	}
	xpair_close(&p);

	CHECK_RET(ibv_destroy_srq(sa), 0);
	CHECK_RET(ibv_destroy_srq(sb), 0);
	CHECK_RET(ibv_destroy_srq(plain), 0);
	CHECK_RET(ibv_close_xrcd(xa), 0);
	CHECK_RET(ibv_close_xrcd(xb), 0);
	CHECK_RET(ibv_dereg_mr(mr), 0);
	CHECK_RET(ibv_destroy_cq(rcq_a), 0);
	CHECK_RET(ibv_destroy_cq(rcq_b), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* SEND with invalidate to an XRC_RECV QP (A14): the window must be of the
 * SRQ's PD (an XRC_RECV QP has none); it is invalidated, and the receive
 * completes WITH_INV naming the key. */
static void test_xrc_send_inv(void)
{
	struct ibv_context *ctx = ctx_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_xrcd *x = xrcd_open(ctx, -1, 0);
	static char buf[8192];
	struct ibv_mr *mr =
	    ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	struct ibv_sge rsge = {.addr = (uintptr_t)buf + 4096, .length = 4096};
	struct ibv_recv_wr rwr = {.wr_id = 43, .sg_list = &rsge, .num_sge = 1}, *rbad;
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 16};
	struct ibv_send_wr wr, *bad;
	struct ibv_srq *srq;
	uint32_t srqn, rkey;
	struct xpair p;
	struct ibv_wc wc;

	REQUIRE(pd && rcq && x && mr && mw);
	rsge.lkey = sge.lkey = mr->lkey;
	srq = xsrq_new(ctx, pd, x, rcq);
	REQUIRE(srq && !ibv_get_srq_num(srq, &srqn));
	xpair_open(ctx, pd, x, &p);
	/* bind the window on the initiator (same PD) */
	rkey = ibv_inc_rkey(mw->rkey);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)buf;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	CHECK_RET(ibv_post_send(p.ini, &wr, &bad), 0);
	CHECK_EQ(poll_one(p.scq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_BIND_MW);

	CHECK_RET(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	wr.qp_type.xrc.remote_srqn = srqn;
	CHECK_RET(ibv_post_send(p.ini, &wr, &bad), 0);
	CHECK_EQ(poll_one(p.scq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(poll_one(rcq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 43);
	CHECK(wc.wc_flags & IBV_WC_WITH_INV);
	CHECK_EQ(wc.invalidated_rkey, rkey);
	CHECK_EQ(wc.qp_num, p.tgt->qp_num);

	/* invalidated: a second SEND with invalidate of it is refused */
	CHECK_RET(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	wr.wr_id = 3;
	CHECK_RET(ibv_post_send(p.ini, &wr, &bad), 0);
	CHECK_EQ(poll_one(p.scq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	xpair_close(&p);

	CHECK_RET(ibv_destroy_srq(srq), 0);
	CHECK_RET(ibv_dealloc_mw(mw), 0);
	CHECK_RET(ibv_close_xrcd(x), 0);
	CHECK_RET(ibv_dereg_mr(mr), 0);
	CHECK_RET(ibv_destroy_cq(rcq), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* clang-format off */
static const struct sr_test_case tests[] = {
	SR_TEST(xrc_domain_flags)
	SR_TEST(xrc_domain_shared)
	SR_TEST(xrc_close_busy)
	SR_TEST(xrc_send_srqn)
	SR_TEST(xrc_send_inv)
};
/* clang-format on */

int main(int argc, char **argv)
{
	return sr_test_main(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
