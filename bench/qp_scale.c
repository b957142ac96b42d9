/*
 * qp_scale: time to create and connect N RC QP pairs (default 1000).
 *
 *   qp_scale [N]
 *
 * Run under `softrdma run --`.  One process, one PD, one CQ.  For each pair
 * two RC QPs are created and each is taken RESET->INIT->RTR->RTS, its RTR
 * addressed to the other QP of the pair (GID index 0 of port 1).  Output:
 *
 *   N create_s connect_s total_s destroy_s
 *
 * where connect_s covers the 3 modify_qp calls per QP (6 per pair).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int to_rts(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *gid, uint16_t lid,
		  enum ibv_mtu mtu)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags =
	    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000, ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	struct ibv_context *ctx;
	struct ibv_port_attr port;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp **qp;
	struct rlimit rl;
	double t0, t1, t2, t3;

	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!list || ndev < 1) {
		fprintf(stderr, "no RDMA device (run under softrdma run --)\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx || ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid)) {
		fprintf(stderr, "cannot open/query device\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 1024, NULL, NULL, 0) : NULL;
	qp = calloc(2 * (size_t)n, sizeof(*qp));
	if (!cq || !qp) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	t0 = now_s();
	for (int i = 0; i < 2 * n; i++) {
		struct ibv_qp_init_attr ia = {
		    .send_cq = cq,
		    .recv_cq = cq,
		    .cap = {.max_send_wr = 128,
			    .max_recv_wr = 128,
			    .max_send_sge = 1,
			    .max_recv_sge = 1},
		    .qp_type = IBV_QPT_RC,
		};

		qp[i] = ibv_create_qp(pd, &ia);
		if (!qp[i]) {
			fprintf(stderr, "ibv_create_qp #%d failed\n", i);
			return 1;
		}
	}
	t1 = now_s();
	for (int i = 0; i < n; i++) {
		struct ibv_qp *a = qp[2 * i], *b = qp[2 * i + 1];

		if (to_rts(a, b->qp_num, &gid, port.lid, port.active_mtu) ||
		    to_rts(b, a->qp_num, &gid, port.lid, port.active_mtu)) {
			fprintf(stderr, "connecting pair %d failed\n", i);
			return 1;
		}
	}
	t2 = now_s();
	for (int i = 0; i < 2 * n; i++)
		ibv_destroy_qp(qp[i]);
	t3 = now_s();
	printf("%d %.6f %.6f %.6f %.6f\n", n, t1 - t0, t2 - t1, t2 - t0, t3 - t2);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
