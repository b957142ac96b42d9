/*
 * UD multicast across processes: three QPs in two processes attach to one
 * multicast GID; a single send to QPN 0xFFFFFF with an address handle whose
 * destination GID is the group reaches each of them once (with the GRH
 * naming the group); after a detach the QP no longer gets the group's
 * datagrams.
 */
#include "tcommon.h"

/* The group: an IPv6 multicast GID; with IPv4 GIDs (across hosts,
 * hosts.h) the IPv4-mapped form of 239.90.23.190, as rdma_cm gives IPv4
 * groups on RoCEv2, so that it can leave the host as an IP group. */
static union ibv_gid group = {
    .raw = {0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x5a, 0x17, 0xbe, 0xef}};
static const union ibv_gid group_v4 = {
    .raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 0x5a, 0x17, 0xbe}};

struct menv {
	struct agent ag;
	struct vdev d;
	struct rng r;
	int acq;
	struct aregions ar;
	struct ag_qp bq;      /* the agent's member */
	struct ibv_cq *cq[3]; /* ours: sender, member 1, member 2 */
	struct ibv_qp *qp[3];
	struct vbuf buf[3];
	struct ibv_ah *ah;
	uint64_t recv_id[3]; /* the outstanding receive of the agent, member 1, 2 */
};

static void post_local_recv(struct menv *e, int m, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)e->buf[m].p, e->d.mtu + GRH_LEN, e->buf[m].mr->lkey};
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	CHECK_EQ(ibv_post_recv(e->qp[m], &wr, &bad), 0);
}

/* One datagram to the group; m1, m2, agent_member: who must get it. */
static void round_trip(struct menv *e, int round, bool m1, bool m2, bool agent_member)
{
	uint64_t len = rng_range(&e->r, 1, e->d.mtu);
	struct ibv_sge sge = {(uintptr_t)e->buf[0].p, (uint32_t)len, e->buf[0].mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	const bool want[3] = {false, m1, m2};
	static char got[8192];

	sr_note("round %d (members: %d %d %d)", round, m1, m2, agent_member);
	pat_fill(e->buf[0].p, len, S_MSG(round), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)round;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = e->ah;
	wr.wr.ud.remote_qpn = MCAST_QPN;
	wr.wr.ud.remote_qkey = CONN_DEFAULT.qkey;
	CHECK_EQ(ibv_post_send(e->qp[0], &wr, &bad), 0);
	vpoll1(e->cq[0], &wc);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, (uint64_t)round, e->qp[0]->qp_num);

	for (int m = 1; m < 3; m++) {
		if (!want[m]) {
			vpoll_none(e->cq[m], 30);
			continue;
		}
		vpoll1(e->cq[m], &wc);
		CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, e->recv_id[m], e->qp[m]->qp_num);
		e->recv_id[m] = 0;
		CHECK_EQ(wc.byte_len, len + GRH_LEN);
		CHECK_EQ(wc.src_qp, e->qp[0]->qp_num);
		CHECK(wc.wc_flags & IBV_WC_GRH);
		CHECK_GRH(e->buf[m].p, &e->d.gid, &group);
		CHECK_PAT(e->buf[m].p + GRH_LEN, len, S_MSG(round), 0);
	}
	if (!agent_member) {
		CHECK_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 30), 0);
		return;
	}
	REQUIRE_EQ(ag_poll(&e->ag, e->acq, &wc, 1, 5000), 1);
	CHECK_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, e->recv_id[0], e->bq.qpn);
	e->recv_id[0] = 0;
	CHECK_EQ(wc.byte_len, len + GRH_LEN);
	CHECK_EQ(wc.src_qp, e->qp[0]->qp_num);
	CHECK(wc.wc_flags & IBV_WC_GRH);
	ag_mem_read(&e->ag, e->ar.h[0], 0, len + GRH_LEN, got);
	CHECK_GRH(got, &e->d.gid, &group);
	CHECK_PAT(got + GRH_LEN, len, S_MSG(round), 0);
}

static void agent_mcast(struct menv *e, int attach)
{
	struct ag_req rq = {.op = AG_MCAST, .len = 16, .a = {e->bq.h, attach}};

	ag_call(&e->ag, &rq, group.raw, NULL, NULL, 0, 0);
}

void test_ud_mcast(void)
{
	struct menv e;
	struct piece pc;

	memset(&e, 0, sizeof(e));
	rng_init(&e.r, 4);
	agent_start(&e.ag, "agent");
	vdev_open(&e.d);
	if (gid_is_ipv4(&e.d.gid))
		group = group_v4;
	e.acq = ag_cq(&e.ag, 64, 0);
	e.bq = ag_qp_create(&e.ag, IBV_QPT_UD, e.acq, e.acq, -1, 0, 0);
	ag_qp_connect(&e.ag, e.bq.h, 0, 0, 0, &e.d.gid, &CONN_DEFAULT);
	aregions_init(&e.ag, &e.ar, IBV_ACCESS_LOCAL_WRITE);
	for (int m = 0; m < 3; m++) {
		struct qp_spec s = {.type = IBV_QPT_UD};

		e.cq[m] = ibv_create_cq(e.d.ctx, 64, NULL, NULL, 0);
		REQUIRE(e.cq[m]);
		s.scq = e.cq[m];
		e.qp[m] = vqp_create(&e.d, &s);
		vqp_connect(&e.d, e.qp[m], (uint32_t)rng_next(&e.r) & 0xffffff, 0, 0, NULL,
			    &CONN_DEFAULT);
		vbuf_reg(&e.d, &e.buf[m], e.d.mtu + GRH_LEN, 64, IBV_ACCESS_LOCAL_WRITE, NULL);
	}
	e.ah = vah_create(&e.d, &group);

	CHECK_EQ(ibv_attach_mcast(e.qp[1], &group, 0), 0);
	CHECK_EQ(ibv_attach_mcast(e.qp[2], &group, 0), 0);
	agent_mcast(&e, 1);

	for (int round = 1; round <= 6; round++) {
		bool m1 = round <= 5, m2 = round <= 3, ag_m = round <= 4;

		if (round == 4) {
			sr_note("detach member 2");
			CHECK_EQ(ibv_detach_mcast(e.qp[2], &group, 0), 0);
		}
		if (round == 5) {
			sr_note("detach the agent's member");
			agent_mcast(&e, 0);
		}
		if (round == 6) {
			sr_note("detach member 1");
			CHECK_EQ(ibv_detach_mcast(e.qp[1], &group, 0), 0);
		}
		/* every member keeps a receive posted, attached or not */
		for (int m = 1; m < 3; m++) {
			if (!e.recv_id[m]) {
				e.recv_id[m] = 100 * (uint64_t)round + (uint64_t)m;
				post_local_recv(&e, m, e.recv_id[m]);
			}
		}
		if (!e.recv_id[0]) {
			e.recv_id[0] = 100 * (uint64_t)round;
			pc = (struct piece){0, 0, e.d.mtu + GRH_LEN};
			CHECK_EQ(ag_post_recv(&e.ag, e.bq.h, 0, e.recv_id[0], &pc, 1, e.ar.h), 0);
		}
		round_trip(&e, round, m1, m2, ag_m);
	}

	CHECK_EQ(ibv_destroy_ah(e.ah), 0);
	for (int m = 0; m < 3; m++) {
		CHECK_EQ(ibv_destroy_qp(e.qp[m]), 0);
		CHECK_EQ(ibv_destroy_cq(e.cq[m]), 0);
		vbuf_free(&e.buf[m]);
	}
	vdev_close(&e.d);
	agent_stop(&e.ag);
}
