/*
 * sr_hold: a client that holds one of every kind of resource, for the
 * reclaim test (reclaim.sh).
 *
 *   sr_hold        create PDs, MRs of several sizes, CQs (two on a
 *                  completion channel, armed), RC, UC and UD QPs (the RC and
 *                  UC ones in RTS, connected to each other, with work posted),
 *                  an SRQ with a QP on it, memory windows and a multicast
 *                  membership; print "ready pd N mr N mw N cq N srq N qp N"
 *                  (what `softrdma status` must count) and sleep until killed
 *   sr_hold pd     allocate and free one PD, print "pd ok" and exit 0
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static void die(const char *what)
{
	fprintf(stderr, "sr_hold: %s failed: %s\n", what, strerror(errno));
	exit(1);
}

static struct ibv_context *open_soft0(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list || n < 1)
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		die("ibv_open_device");
	return ctx;
}

static struct ibv_qp *qp_new(struct ibv_pd *pd, enum ibv_qp_type type, struct ibv_cq *scq,
			     struct ibv_cq *rcq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.srq = srq;
	a.qp_type = type;
	a.cap.max_send_wr = 64;
	a.cap.max_recv_wr = srq ? 0 : 64;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = srq ? 0 : 2;
	a.cap.max_inline_data = 64;
	qp = ibv_create_qp(pd, &a);
	if (!qp)
		die("ibv_create_qp");
	return qp;
}

static void to_rts(struct ibv_qp *qp, const union ibv_gid *gid, uint32_t dqpn)
{
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
	    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a.qkey = 0x1111;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	if (ibv_modify_qp(qp, &a, mask))
		die("modify to INIT");
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (qp->qp_type == IBV_QPT_RC)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(qp, &a, mask))
		die("modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC)
		mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(qp, &a, mask))
		die("modify to RTS");
}

static void post_recvs(struct ibv_qp *qp, struct ibv_mr *mr, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = {(uintptr_t)mr->addr + 64 * i, 64, mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			die("ibv_post_recv");
	}
}

int main(int argc, char **argv)
{
	static const size_t mr_sizes[] = {1, 4096, 100000, 1 << 20, 16 << 20};
	enum { NPD = 4, NMR = sizeof(mr_sizes) / sizeof(mr_sizes[0]) + 2, NCQ = 3, NMW = 2 };
	struct ibv_context *ctx;
	struct ibv_pd *pd[NPD];
	struct ibv_mr *mr[NMR];
	struct ibv_mw *mw[NMW];
	struct ibv_cq *cq[NCQ];
	struct ibv_comp_channel *ch;
	struct ibv_srq *srq;
	struct ibv_srq_init_attr sa;
	struct ibv_qp *rc[3], *uc[2], *ud[2];
	union ibv_gid gid, mgid;
	char *bufs[NMR];
	int nmr = 0, nqp = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = open_soft0();
	if (argc > 1 && !strcmp(argv[1], "pd")) {
		struct ibv_pd *p = ibv_alloc_pd(ctx);

		if (!p)
			die("ibv_alloc_pd");
		if (ibv_dealloc_pd(p) || ibv_close_device(ctx))
			die("ibv_dealloc_pd");
		printf("pd ok\n");
		return 0;
	}
	if (ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_gid");
	for (int i = 0; i < NPD - 1; i++)
		if (!(pd[i] = ibv_alloc_pd(ctx)))
			die("ibv_alloc_pd");

	/* MRs: sizes from one byte to 16 MiB, on the heap and on mmap, two
	 * overlapping registrations of one buffer in two PDs */
	for (size_t i = 0; i < sizeof(mr_sizes) / sizeof(mr_sizes[0]); i++) {
		bufs[nmr] = malloc(mr_sizes[i]);
		if (!bufs[nmr])
			die("malloc");
		memset(bufs[nmr], (int)i, mr_sizes[i]);
		mr[nmr] = ibv_reg_mr(pd[i % (NPD - 1)], bufs[nmr], mr_sizes[i],
				     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
		if (!mr[nmr])
			die("ibv_reg_mr");
		nmr++;
	}
	bufs[nmr] = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (bufs[nmr] == MAP_FAILED)
		die("mmap");
	mr[nmr] = ibv_reg_mr(pd[0], bufs[nmr], 1 << 16, IBV_ACCESS_LOCAL_WRITE);
	if (!mr[nmr])
		die("ibv_reg_mr (mmap)");
	nmr++;
	mr[nmr] = ibv_reg_mr(pd[1], bufs[nmr - 1] + 100, 1000, IBV_ACCESS_LOCAL_WRITE);
	if (!mr[nmr])
		die("ibv_reg_mr (overlap)");
	nmr++;
	/* an MR moved to a PD younger than itself, onto other pages: the
	 * daemon's newest-first teardown must still destroy it before that PD */
	if (!(pd[NPD - 1] = ibv_alloc_pd(ctx)))
		die("ibv_alloc_pd");
	if (ibv_rereg_mr(mr[nmr - 2], IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION,
			 pd[NPD - 1], bufs[nmr - 2] + 8192, 8192, 0))
		die("ibv_rereg_mr");

	/* CQs, two of them on an armed completion channel */
	ch = ibv_create_comp_channel(ctx);
	if (!ch)
		die("ibv_create_comp_channel");
	for (int i = 0; i < NCQ; i++) {
		cq[i] = ibv_create_cq(ctx, 128 << i, NULL, i < 2 ? ch : NULL, 0);
		if (!cq[i])
			die("ibv_create_cq");
		if (i < 2 && ibv_req_notify_cq(cq[i], 0))
			die("ibv_req_notify_cq");
	}

	/* SRQ with receives posted */
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 32;
	sa.attr.max_sge = 1;
	sa.attr.srq_limit = 4;
	srq = ibv_create_srq(pd[0], &sa);
	if (!srq)
		die("ibv_create_srq");
	for (int i = 0; i < 8; i++) {
		struct ibv_sge sge = {(uintptr_t)bufs[2] + 64 * i, 64, mr[2]->lkey};
		struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			die("ibv_post_srq_recv");
	}

	/* QPs: RC pair in RTS with a send waiting for a receive (RNR), an RC
	 * QP on the SRQ left in RESET, a UC pair in RTS, UD QPs (one in RTS
	 * with a multicast membership) */
	rc[0] = qp_new(pd[2], IBV_QPT_RC, cq[0], cq[1], NULL);
	rc[1] = qp_new(pd[2], IBV_QPT_RC, cq[0], cq[1], NULL);
	rc[2] = qp_new(pd[0], IBV_QPT_RC, cq[2], cq[2], srq);
	uc[0] = qp_new(pd[0], IBV_QPT_UC, cq[2], cq[2], NULL);
	uc[1] = qp_new(pd[0], IBV_QPT_UC, cq[2], cq[2], NULL);
	ud[0] = qp_new(pd[1], IBV_QPT_UD, cq[2], cq[2], NULL);
	ud[1] = qp_new(pd[1], IBV_QPT_UD, cq[2], cq[2], NULL);
	nqp = 7;
	to_rts(rc[0], &gid, rc[1]->qp_num);
	to_rts(rc[1], &gid, rc[0]->qp_num);
	to_rts(uc[0], &gid, uc[1]->qp_num);
	to_rts(uc[1], &gid, uc[0]->qp_num);
	to_rts(ud[0], &gid, 0);
	post_recvs(uc[1], mr[3], 4);
	post_recvs(ud[0], mr[3], 4);
	{
		/* no receive is posted on rc[1]: this send waits (RNR) */
		struct ibv_sge sge = {(uintptr_t)bufs[2], 16, mr[2]->lkey};
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_SEND;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (ibv_post_send(rc[0], &wr, &bad))
			die("ibv_post_send");
	}
	memset(&mgid, 0, sizeof(mgid));
	mgid.raw[0] = 0xff;
	mgid.raw[1] = 0x0e;
	mgid.raw[15] = 0x77;
	if (ibv_attach_mcast(ud[0], &mgid, 0))
		die("ibv_attach_mcast");

	/* memory windows of both types */
	for (int i = 0; i < NMW; i++)
		if (!(mw[i] = ibv_alloc_mw(pd[2], i ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1)))
			die("ibv_alloc_mw");

	printf("ready pd %d mr %d mw %d cq %d srq %d qp %d\n", NPD, nmr, NMW, NCQ, 1, nqp);
	for (;;)
		pause();
}
