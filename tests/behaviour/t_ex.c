/*
 * The extended ("new-style") API: QPs from ibv_create_qp_ex with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, posted with ibv_wr_start / ibv_wr_* /
 * ibv_wr_set_sge* / ibv_wr_complete (and ibv_wr_abort); CQs from
 * ibv_create_cq_ex with completion timestamps, read with ibv_start_poll /
 * ibv_next_poll / ibv_end_poll and the ibv_wc_read_* accessors.
 */
#include "tcommon.h"

#define TGT_LEN 8192

void test_qp_ex_api(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC;
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq;
	struct aregions ar;
	struct ag_mr tgt;
	struct ibv_cq *cq;
	struct ibv_qp *qp, *plain;
	struct ibv_qp_ex *qpx;
	struct ibv_qp_init_attr_ex ia;
	struct vbuf b;
	struct ibv_wc wc[8];
	struct piece pc = {0, 0, 1024};
	int acq;
	static char got[1024];

	rng_init(&r, 50);
	agent_start(&ag, "agent");
	vdev_open(&d);
	acq = ag_cq(&ag, 64, 0);
	aq = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, -1, 0, 0);
	aregions_init(&ag, &ar, IBV_ACCESS_LOCAL_WRITE);
	tgt = ag_mr_reg(&ag, TGT_LEN, 64, all, 0, S_BACKGROUND);
	cq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	REQUIRE(cq);
	vbuf_reg(&d, &b, 4 * TGT_LEN, 64, IBV_ACCESS_LOCAL_WRITE, NULL);

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 64;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = d.pd;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	qp = ibv_create_qp_ex(d.ctx, &ia);
	REQUIRE(qp);
	qpx = ibv_qp_to_qp_ex(qp);
	REQUIRE(qpx);
	CHECK(&qpx->qp_base == qp);
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);

	/* a QP made the old way has no qp_ex */
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		plain = vqp_create(&d, &s);
		CHECK(ibv_qp_to_qp_ex(plain) == NULL);
		CHECK_EQ(ibv_destroy_qp(plain), 0);
	}

	CHECK_EQ(ag_post_recv(&ag, aq.h, 0, 1, &pc, 1, ar.h), 0);
	CHECK_EQ(ag_post_recv(&ag, aq.h, 0, 2, &pc, 1, ar.h), 0);
	pat_fill(b.p, 4 * TGT_LEN, S_MSG(1), 0);

	sr_note("a batch of five");
	ibv_wr_start(qpx);
	qpx->wr_id = 101;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, b.mr->lkey, (uintptr_t)b.p, 300);

	qpx->wr_id = 102;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, tgt.rkey, tgt.addr + 100);
	{
		struct ibv_sge sl[3] = {
		    {(uintptr_t)(b.p + 1000), 500, b.mr->lkey},
		    {(uintptr_t)(b.p + 3000), 1, b.mr->lkey},
		    {(uintptr_t)(b.p + 5000), 2000, b.mr->lkey},
		};

		ibv_wr_set_sge_list(qpx, 3, sl);
	}

	qpx->wr_id = 103;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send_imm(qpx, htonl(0xfeedbeef));
	ibv_wr_set_inline_data(qpx, b.p + 64, 40);

	qpx->wr_id = 104;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(qpx, tgt.rkey, tgt.addr + 100);
	ibv_wr_set_sge(qpx, b.mr->lkey, (uintptr_t)(b.p + 2 * TGT_LEN), 2501);

	qpx->wr_id = 105;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(qpx, tgt.rkey, tgt.addr + TGT_LEN - 8, 5);
	ibv_wr_set_sge(qpx, b.mr->lkey, (uintptr_t)(b.p + 3 * TGT_LEN), 8);
	CHECK_EQ(ibv_wr_complete(qpx), 0);

	CHECK_EQ(vpoll(cq, wc, 5, 5000), 5);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_SEND, 101, qp->qp_num);
	CHECK_WC(wc[1], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 102, qp->qp_num);
	CHECK_WC(wc[2], IBV_WC_SUCCESS, IBV_WC_SEND, 103, qp->qp_num);
	CHECK_WC(wc[3], IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 104, qp->qp_num);
	CHECK_EQ(wc[3].byte_len, 2501);
	CHECK_WC(wc[4], IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 105, qp->qp_num);

	/* what arrived */
	CHECK_EQ(ag_poll(&ag, acq, wc, 2, 5000), 2);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RECV, 1, aq.qpn);
	CHECK_EQ(wc[0].byte_len, 300);
	CHECK_WC(wc[1], IBV_WC_SUCCESS, IBV_WC_RECV, 2, aq.qpn);
	CHECK_EQ(wc[1].byte_len, 40);
	CHECK(wc[1].wc_flags & IBV_WC_WITH_IMM);
	CHECK_EQ(ntohl(wc[1].imm_data), 0xfeedbeef);
	ag_mem_read(&ag, ar.h[0], 0, 300, got);
	CHECK_PAT(got, 40, S_MSG(1), 64); /* the second message overwrote the first 40 bytes */
	CHECK_PAT(got + 40, 260, S_MSG(1), 40);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 100, 500, S_MSG(1), 1000), -1);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 600, 1, S_MSG(1), 3000), -1);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 601, 2000, S_MSG(1), 5000), -1);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 0, 100, S_BACKGROUND, 0), -1);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 2601, TGT_LEN - 8 - 2601, S_BACKGROUND, 2601), -1);
	/* the READ brought the written bytes back */
	CHECK_PAT(b.p + 2 * TGT_LEN, 500, S_MSG(1), 1000);
	CHECK_PAT(b.p + 2 * TGT_LEN + 500, 1, S_MSG(1), 3000);
	CHECK_PAT(b.p + 2 * TGT_LEN + 501, 2000, S_MSG(1), 5000);
	{
		uint64_t orig, now;

		pat_fill(&orig, 8, S_BACKGROUND, TGT_LEN - 8);
		CHECK_MEM(b.p + 3 * TGT_LEN, &orig, 8);
		ag_mem_read(&ag, tgt.h, TGT_LEN - 8, 8, &now);
		CHECK_EQ(now, orig + 5);
	}

	sr_note("abort");
	ibv_wr_start(qpx);
	qpx->wr_id = 201;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, tgt.rkey, tgt.addr);
	ibv_wr_set_sge(qpx, b.mr->lkey, (uintptr_t)b.p, 64);
	ibv_wr_abort(qpx);
	vpoll_none(cq, 10);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 0, 64, S_BACKGROUND, 0), -1);

	sr_note("after abort");
	ibv_wr_start(qpx);
	qpx->wr_id = 202;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, tgt.rkey, tgt.addr);
	ibv_wr_set_sge(qpx, b.mr->lkey, (uintptr_t)(b.p + 7), 64);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(vpoll(cq, wc, 1, 5000), 1);
	CHECK_WC(wc[0], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 202, qp->qp_num);
	CHECK_EQ(ag_mem_check(&ag, tgt.h, 0, 64, S_MSG(1), 7), -1);

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}

void test_cq_ex_api(void)
{
	struct agent ag;
	struct vdev d;
	struct rng r;
	struct ag_qp aq;
	struct aregions ar;
	struct ag_mr tgt;
	struct ibv_cq_init_attr_ex ca;
	struct ibv_device_attr_ex dx;
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct vbuf b;
	struct ibv_poll_cq_attr pa = {0};
	int acq, ret, n = 0;
	uint64_t ts[8], wr_ids[8];
	unsigned opc[8], lens[8];

	rng_init(&r, 51);
	agent_start(&ag, "agent");
	vdev_open(&d);
	acq = ag_cq(&ag, 64, 0);
	aq = ag_qp_create(&ag, IBV_QPT_RC, acq, acq, -1, 0, 0);
	aregions_init(&ag, &ar, IBV_ACCESS_LOCAL_WRITE);
	tgt = ag_mr_reg(&ag, TGT_LEN, 64,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			0, S_BACKGROUND);
	memset(&dx, 0, sizeof(dx));
	CHECK_EQ(ibv_query_device_ex(d.ctx, NULL, &dx), 0);
	printf("# hca_core_clock %llu kHz, completion_timestamp_mask %#llx\n",
	       (unsigned long long)dx.hca_core_clock,
	       (unsigned long long)dx.completion_timestamp_mask);
	CHECK(dx.hca_core_clock > 0);

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 64;
	ca.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_BYTE_LEN |
		      IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_IMM;
	cqx = ibv_create_cq_ex(d.ctx, &ca);
	REQUIRE(cqx);
	cq = ibv_cq_ex_to_cq(cqx);
	{
		struct qp_spec s = {.type = IBV_QPT_RC, .scq = cq};

		qp = vqp_create(&d, &s);
	}
	pair_connect(&d, qp, &CONN_DEFAULT, &ag, &aq, &CONN_DEFAULT, &r);
	vbuf_reg(&d, &b, 4096, 64, IBV_ACCESS_LOCAL_WRITE, NULL);

	sr_note("empty");
	CHECK_EQ(ibv_start_poll(cqx, &pa), ENOENT);

	/* completions 10 ms apart: receives (the agent sends) and our own WRITE/READ */
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = {(uintptr_t)(b.p + 512 * i), 512, b.mr->lkey};

		if (i < 2) {
			struct ibv_recv_wr rwr = {
			    .wr_id = 10 + (uint64_t)i, .sg_list = &sge, .num_sge = 1};
			struct ibv_recv_wr *rbad;
			struct ag_wr w = ag_wr_make(aq.h, i ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
						    20 + (uint64_t)i, 1);
			struct piece pc = {0, 0, 100 + (uint32_t)i};
			struct ibv_wc wc;

			CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
			w.imm = htonl(77);
			CHECK_EQ(ag_post_send(&ag, &w, &pc, ar.h, NULL), 0);
			REQUIRE_EQ(ag_poll(&ag, acq, &wc, 1, 1000), 1);
		} else {
			struct ibv_send_wr wr = rdma_wr(i == 2 ? IBV_WR_RDMA_WRITE
							       : IBV_WR_RDMA_READ,
							10 + (uint64_t)i, &sge, tgt.addr, tgt.rkey),
					   *bad;

			CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
		}
		sr_sleep_ms(10);
	}

	sr_note("polling");
	ret = ibv_start_poll(cqx, &pa);
	CHECK_EQ(ret, 0);
	while (!ret && n < 8) {
		CHECK_STATUS(cqx->status, IBV_WC_SUCCESS);
		wr_ids[n] = cqx->wr_id;
		opc[n] = ibv_wc_read_opcode(cqx);
		lens[n] = ibv_wc_read_byte_len(cqx);
		ts[n] = ibv_wc_read_completion_ts(cqx);
		CHECK_EQ(ibv_wc_read_qp_num(cqx), qp->qp_num);
		if (opc[n] == IBV_WC_RECV && cqx->wr_id == 11) {
			CHECK(ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM);
			CHECK_EQ(ntohl(ibv_wc_read_imm_data(cqx)), 77);
		}
		n++;
		ret = ibv_next_poll(cqx);
	}
	CHECK_EQ(ret, ENOENT);
	ibv_end_poll(cqx);
	CHECK_EQ(n, 4);
	for (int i = 0; i < n && i < 4; i++) {
		static const unsigned want_opc[4] = {IBV_WC_RECV, IBV_WC_RECV, IBV_WC_RDMA_WRITE,
						     IBV_WC_RDMA_READ};
		static const unsigned want_len[4] = {100, 101, 0, 512};

		sr_note("completion %d", i);
		CHECK_EQ(wr_ids[i], 10 + (uint64_t)i);
		CHECK_EQ(opc[i], want_opc[i]);
		if (want_opc[i] != IBV_WC_RDMA_WRITE) /* byte_len is not defined for a WRITE */
			CHECK_EQ(lens[i], want_len[i]);
		CHECK_NE(ts[i], 0);
		if (i) {
			/* at least the 10 ms sleep apart, in the device's clock */
			uint64_t dt_us = (ts[i] - ts[i - 1]) * 1000 / dx.hca_core_clock;

			CHECK_CMP(ts[i], >, ts[i - 1]);
			CHECK_CMP(dt_us, >=, 9000);
			CHECK_CMP(dt_us, <, 5000000);
		}
	}
	CHECK_EQ(ibv_start_poll(cqx, &pa), ENOENT);

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	vbuf_free(&b);
	vdev_close(&d);
	agent_stop(&ag);
}
