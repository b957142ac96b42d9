/*
 * Regression guard for the same-host data path: it must make no system
 * call per work request.  Runs a burst of RDMA WRITEs, READs and SEND/RECV
 * pairs between two RC QPs of this process (the same-host path is the same
 * code whether the peer is here or in another process) and polls their
 * completions.  syscall_guard.sh runs it under strace with two burst sizes
 * and checks that the system-call count does not grow with the burst.
 *
 * usage: sr_syscall_guard ITERATIONS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#define DIE(...)                                                                                   \
	do {                                                                                       \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)

/* The port is RoCE: the AV is a GID (GID 0, this host's own), as with
 * ibv_rc_pingpong -g 0. */
static void to_rts(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS");
}

static void wait_cq(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc[16];

	while (n > 0) {
		int got = ibv_poll_cq(cq, 16, wc);

		if (got < 0)
			DIE("poll");
		for (int i = 0; i < got; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				DIE("completion status %s", ibv_wc_status_str(wc[i].status));
		n -= got;
	}
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 10000, n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	char *buf;

	if (!list || n < 1)
		DIE("no device");
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = ctx ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	buf = aligned_alloc(4096, 1 << 16);
	if (!pd || !cq || !buf)
		DIE("setup");
	mr = ibv_reg_mr(pd, buf, 1 << 16,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1}};
	a = ibv_create_qp(pd, &ia);
	b = ibv_create_qp(pd, &ia);
	if (!mr || !a || !b)
		DIE("create");
	if (ibv_query_gid(ctx, 1, 0, &gid))
		DIE("query_gid");
	to_rts(a, b->qp_num, &gid);
	to_rts(b, a->qp_num, &gid);

	for (int i = 0; i < iters; i++) {
		struct ibv_sge s = {(uintptr_t)buf, 4096, mr->lkey};
		struct ibv_sge r = {(uintptr_t)buf + 32768, 4096, mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 3, .sg_list = &r, .num_sge = 1}, *brw;
		struct ibv_send_wr w = {.wr_id = 1,
					.sg_list = &s,
					.num_sge = 1,
					.opcode = IBV_WR_RDMA_WRITE,
					.send_flags = IBV_SEND_SIGNALED},
				   *bad;

		w.wr.rdma.remote_addr = (uintptr_t)buf + 16384;
		w.wr.rdma.rkey = mr->rkey;
		if (ibv_post_send(a, &w, &bad))
			DIE("post write");
		w.opcode = IBV_WR_RDMA_READ;
		if (ibv_post_send(a, &w, &bad))
			DIE("post read");
		if (ibv_post_recv(b, &rwr, &brw))
			DIE("post recv");
		w.opcode = IBV_WR_SEND;
		if (ibv_post_send(a, &w, &bad))
			DIE("post send");
		wait_cq(cq, 4);
	}
	printf("%d iterations of write+read+send/recv completed\n", iters);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	return 0;
}
