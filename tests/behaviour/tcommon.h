/*
 * Set-up pieces shared by the tests: groups of regions for scatter/gather
 * layouts on our side and on the agent's, and reading back what an agent
 * received.
 */
#ifndef SR_BEHAVE_TCOMMON_H
#define SR_BEHAVE_TCOMMON_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "harness.h"
#include "tests.h"
#include "vutil.h"

/* 64 KiB messages over up to 32 SGEs with gaps always fit in one region. */
#define REGION_LEN (80 * 1024)
#define NREGION	   4
#define MAX_MSG	   (64 * 1024)

/* Data streams: contents known to both sides. */
#define S_BACKGROUND 1u
#define S_ATOMIC     2u
#define S_JUNK	     3u
#define S_MSG(i)     (1000u + (uint64_t)(i))

struct lregions {
	struct vbuf b[NREGION];
	struct vbuf *p[NREGION];
	size_t len[NREGION];
};

static inline void lregions_init(struct vdev *d, struct lregions *r, int access)
{
	for (int i = 0; i < NREGION; i++) {
		vbuf_reg(d, &r->b[i], REGION_LEN, 64, access, NULL);
		r->p[i] = &r->b[i];
		r->len[i] = REGION_LEN;
	}
}

static inline void lregions_free(struct lregions *r)
{
	for (int i = 0; i < NREGION; i++)
		vbuf_free(&r->b[i]);
}

struct aregions {
	struct ag_mr m[NREGION];
	int h[NREGION];
	size_t len[NREGION];
};

static inline void aregions_init(struct agent *ag, struct aregions *r, int access)
{
	for (int i = 0; i < NREGION; i++) {
		r->m[i] = ag_mr_reg(ag, REGION_LEN, 64, access, 0, S_JUNK);
		r->h[i] = r->m[i].h;
		r->len[i] = REGION_LEN;
	}
}

/*
 * The 40 bytes a UD receive gets ahead of the payload: for IPv4 GIDs
 * (::ffff:a.b.c.d) RoCEv2 puts the packet's IPv4 header in the last 20
 * (IBTA Annex A17, RoCEv2; as mlx5 and rxe do, and ibv_init_ah_from_wc reads it
 * there), for others a GRH with the source and destination GIDs.
 */
static inline bool gid_is_ipv4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(g->raw, prefix, 12);
}

/* wc.sl of a RoCE UD receive, as a ConnectX gives it: the packet type,
 * 0x8 (UDP: RoCEv2) | 2 for an IPv4 header, | 1 for IPv6 (UCX's UD
 * transport reads it to find the destination address) */
static inline uint8_t roce_ud_sl(const union ibv_gid *sgid, const union ibv_gid *dgid)
{
	return 0x8 | (gid_is_ipv4(sgid) && gid_is_ipv4(dgid) ? 0x2 : 0x1);
}

#define CHECK_GRH(buf, sgid, dgid) check_grh(__FILE__, __LINE__, (buf), (sgid), (dgid))
static inline void check_grh(const char *file, int line, const void *buf, const union ibv_gid *sgid,
			     const union ibv_gid *dgid)
{
	const uint8_t *b = buf;

	if (gid_is_ipv4(sgid) && gid_is_ipv4(dgid)) {
		const uint8_t *ip = b + 20;

		if (ip[0] == 0x45 && !memcmp(ip + 12, sgid->raw + 12, 4) &&
		    !memcmp(ip + 16, dgid->raw + 12, 4)) {
			sr__pass();
			return;
		}
		sr__fail(file, line,
			 "GRH area: want an IPv4 header from %u.%u.%u.%u to %u.%u.%u.%u at byte "
			 "20; got version/IHL 0x%02x, %u.%u.%u.%u to %u.%u.%u.%u",
			 sgid->raw[12], sgid->raw[13], sgid->raw[14], sgid->raw[15], dgid->raw[12],
			 dgid->raw[13], dgid->raw[14], dgid->raw[15], ip[0], ip[12], ip[13], ip[14],
			 ip[15], ip[16], ip[17], ip[18], ip[19]);
		return;
	}
	sr__check_mem(file, line, "GRH sgid", ((const struct ibv_grh *)buf)->sgid.raw, sgid->raw,
		      16);
	sr__check_mem(file, line, "GRH dgid", ((const struct ibv_grh *)buf)->dgid.raw, dgid->raw,
		      16);
}

/* Reads the bytes an agent's receive scattered over its pieces. */
static inline void agent_gather(struct agent *ag, const struct aregions *r, const struct piece *pc,
				int n, char *out, size_t cap)
{
	size_t pos = 0;

	for (int i = 0; i < n && pos < cap; i++) {
		size_t l = pc[i].len < cap - pos ? pc[i].len : cap - pos;

		if (l)
			ag_mem_read(ag, r->h[pc[i].mr], (int64_t)pc[i].off, l, out + pos);
		pos += l;
	}
}

static inline struct ag_wr ag_wr_make(int qp, enum ibv_wr_opcode op, uint64_t wr_id, int nsge)
{
	struct ag_wr w;

	memset(&w, 0, sizeof(w));
	w.qp = (uint32_t)qp;
	w.opcode = op;
	w.flags = IBV_SEND_SIGNALED;
	w.wr_id = wr_id;
	w.nsge = (uint32_t)nsge;
	return w;
}

/* The checks every completion gets. */
#define CHECK_WC(wc, st, op, id, qpn)                                                              \
	do {                                                                                       \
		CHECK_STATUS((wc).status, st);                                                     \
		if ((st) == IBV_WC_SUCCESS)                                                        \
			CHECK_EQ((wc).opcode, op);                                                 \
		CHECK_EQ((wc).wr_id, id);                                                          \
		CHECK_EQ((wc).qp_num, qpn);                                                        \
	} while (0)

/* A WRITE/READ/atomic work request over one local SGE. */
static inline struct ibv_send_wr rdma_wr(enum ibv_wr_opcode op, uint64_t wr_id, struct ibv_sge *sge,
					 uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = sge;
	wr.num_sge = sge ? 1 : 0;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return wr;
}

/* Posts wr and expects one completion with status st. */
static inline void post_expect(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr,
			       enum ibv_wc_status st, enum ibv_wc_opcode opc)
{
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;

	CHECK_EQ(ibv_post_send(qp, wr, &bad), 0);
	vpoll1(cq, &wc);
	CHECK_WC(wc, st, opc, wr->wr_id, qp->qp_num);
}

/* Posts wr, expects it to fail with status st; then the QP must be in the
 * error state and a later work request must complete with WR_FLUSH_ERR. */
static inline void post_expect_fatal(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr,
				     enum ibv_wc_status st)
{
	struct ibv_send_wr next = *wr;

	post_expect(qp, cq, wr, st, 0);
	CHECK_EQ(vqp_state(qp), IBV_QPS_ERR);
	next.wr_id = wr->wr_id + 1;
	next.next = NULL;
	post_expect(qp, cq, &next, IBV_WC_WR_FLUSH_ERR, 0);
	vpoll_none(cq, 2);
}

#endif
