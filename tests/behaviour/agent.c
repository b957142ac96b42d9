/*
 * The agent process (see agent.h): a loop that reads a request, carries it
 * out with ordinary verbs calls on its own context, and replies.  It makes
 * no checks of its own: a verbs call that fails is reported back (negative
 * ret, or the call's own return value where the test wants to see it).
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "hosts.h"

#define AG_MAX_QP      2048
#define AG_MAX_CQ      16
#define AG_MAX_MR      64
#define AG_MAX_OBJ     16
#define AG_MAX_PAYLOAD (1u << 20)

struct agent_state {
	struct vdev d;
	struct ibv_cq *cq[AG_MAX_CQ];
	struct ibv_comp_channel *ch[AG_MAX_CQ];
	int ncq;
	struct ibv_qp *qp[AG_MAX_QP];
	int nqp;
	struct ibv_srq *srq[AG_MAX_OBJ];
	int nsrq;
	struct vbuf mr[AG_MAX_MR];
	int nmr;
	struct ibv_mw *mw[AG_MAX_OBJ];
	uint32_t mw_rkey[AG_MAX_OBJ]; /* type 2: the key of the last bind */
	int nmw;
	struct ibv_ah *ah;
	union ibv_gid ah_gid;
	char *in, *out;
};

static struct vbuf *mr_at(struct agent_state *s, int64_t h)
{
	return h >= 0 && h < s->nmr && s->mr[h].map ? &s->mr[h] : NULL;
}

/* A region-relative range, guard bytes included, inside the mapping. */
static char *range(struct agent_state *s, int64_t h, int64_t off, uint64_t len)
{
	struct vbuf *b = mr_at(s, h);

	if (!b || off < -(int64_t)b->guard ||
	    (uint64_t)(off + (int64_t)b->guard) + len > b->len + 2 * b->guard)
		return NULL;
	return b->p + off;
}

static int sges_from(struct agent_state *s, const struct ag_piece *pc, uint32_t n,
		     struct ibv_sge *sge)
{
	for (uint32_t i = 0; i < n; i++) {
		struct vbuf *b = mr_at(s, pc[i].mr);
		char *p = range(s, pc[i].mr, (int64_t)pc[i].off, pc[i].len);

		if (!b || !p)
			return -EINVAL;
		sge[i].addr = (uintptr_t)p;
		sge[i].length = pc[i].len;
		/* a deregistered region goes out with an invalid key (error tests) */
		sge[i].lkey = b->mr ? b->mr->lkey : 0xdeadbeef;
	}
	return 0;
}

static struct ibv_ah *ah_for(struct agent_state *s, const uint8_t *gid)
{
	if (s->ah && !memcmp(s->ah_gid.raw, gid, 16))
		return s->ah;
	if (s->ah)
		ibv_destroy_ah(s->ah);
	memcpy(s->ah_gid.raw, gid, 16);
	s->ah = vah_create(&s->d, &s->ah_gid);
	return s->ah;
}

static int64_t do_post_send(struct agent_state *s, const char *in, uint32_t len, struct ag_rep *rp)
{
	const struct ag_wr *w = (const void *)in;
	struct ibv_sge sge[LAYOUT_MAX];
	struct ibv_send_wr wr, *bad = NULL;
	uint32_t new_rkey = 0;
	int ret;

	if (len < sizeof(*w) || w->nsge > LAYOUT_MAX ||
	    len != sizeof(*w) + w->nsge * sizeof(struct ag_piece) || w->qp >= (uint32_t)s->nqp)
		return -EINVAL;
	if (sges_from(s, (const struct ag_piece *)(w + 1), w->nsge, sge))
		return -EINVAL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = w->wr_id;
	wr.opcode = w->opcode;
	wr.send_flags = w->flags;
	wr.sg_list = sge;
	wr.num_sge = (int)w->nsge;
	switch (w->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		wr.imm_data = w->imm;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		wr.invalidate_rkey = w->inv_rkey;
		break;
	default:
		break;
	}
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = w->raddr;
		wr.wr.atomic.rkey = w->rkey;
		wr.wr.atomic.compare_add = w->compare_add;
		wr.wr.atomic.swap = w->swap;
	} else if (w->opcode == IBV_WR_BIND_MW) {
		struct vbuf *b = mr_at(s, w->bind_mr);

		if (w->mw >= (uint32_t)s->nmw || !b)
			return -EINVAL;
		new_rkey = ibv_inc_rkey(s->mw_rkey[w->mw]);
		wr.bind_mw.mw = s->mw[w->mw];
		wr.bind_mw.rkey = new_rkey;
		wr.bind_mw.bind_info.mr = b->mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)(b->p + w->bind_off);
		wr.bind_mw.bind_info.length = w->bind_len;
		wr.bind_mw.bind_info.mw_access_flags = w->bind_access;
	} else if (s->qp[w->qp]->qp_type == IBV_QPT_UD) {
		wr.wr.ud.ah = ah_for(s, w->ud_dgid);
		wr.wr.ud.remote_qpn = w->ud_qpn;
		wr.wr.ud.remote_qkey = w->ud_qkey;
	} else {
		wr.wr.rdma.remote_addr = w->raddr;
		wr.wr.rdma.rkey = w->rkey;
	}
	ret = ibv_post_send(s->qp[w->qp], &wr, &bad);
	if (!ret && w->opcode == IBV_WR_BIND_MW)
		s->mw_rkey[w->mw] = new_rkey;
	rp->a[0] = ret;
	rp->a[1] = new_rkey;
	return 0;
}

static int64_t do_atomic_loop(struct agent_state *s, const struct ag_req *rq, struct ag_rep *rp)
{
	struct ibv_qp *qp = rq->a[0] >= 0 && rq->a[0] < s->nqp ? s->qp[rq->a[0]] : NULL;
	struct ibv_cq *cq = rq->a[1] >= 0 && rq->a[1] < s->ncq ? s->cq[rq->a[1]] : NULL;
	uint64_t count = (uint64_t)rq->a[4], batch = (uint64_t)rq->a[6], done = 0, errors = 0;
	uint64_t *res = (uint64_t *)s->out, cur = 0;
	struct vbuf buf;
	struct ibv_wc wc[64];

	if (!qp || !cq || count * 8 > AG_MAX_PAYLOAD || !batch || batch > 64)
		return -EINVAL;
	vbuf_reg(&s->d, &buf, 64 * 8, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	if (rq->a[5])
		batch = 1; /* CAS increments go one at a time, each from the last value seen */
	while (done < count) {
		uint64_t n = count - done < batch ? count - done : batch;
		struct ibv_send_wr wr[64], *bad;
		struct ibv_sge sge[64];

		for (uint64_t i = 0; i < n; i++) {
			sge[i].addr = (uintptr_t)(buf.p + 8 * i);
			sge[i].length = 8;
			sge[i].lkey = buf.mr->lkey;
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = i;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].send_flags = IBV_SEND_SIGNALED;
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
			wr[i].wr.atomic.remote_addr = (uint64_t)rq->a[2];
			wr[i].wr.atomic.rkey = (uint32_t)rq->a[3];
			if (rq->a[5] == 0) {
				wr[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
				wr[i].wr.atomic.compare_add = 1;
			} else {
				wr[i].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
				wr[i].wr.atomic.compare_add = cur;
				wr[i].wr.atomic.swap = cur + 1;
			}
		}
		if (ibv_post_send(qp, wr, &bad)) {
			errors++;
			break;
		}
		if (vpoll(cq, wc, (int)n, 10000) != (int)n) {
			errors++;
			break;
		}
		for (uint64_t i = 0; i < n; i++) {
			uint64_t v;

			if (wc[i].status != IBV_WC_SUCCESS)
				errors++;
			memcpy(&v, buf.p + 8 * wc[i].wr_id, 8);
			if (rq->a[5] == 0) {
				res[done++] = v;
			} else if (v == cur) {
				res[done++] = v; /* our increment took effect */
				cur = v + 1;
			} else {
				cur = v; /* lost the race: retry from the value seen */
			}
		}
	}
	vbuf_free(&buf);
	rp->a[0] = (int64_t)errors;
	rp->len = (uint32_t)(done * 8);
	return 0;
}

static int64_t do_write_loop(struct agent_state *s, const struct ag_req *rq, struct ag_rep *rp)
{
	struct ibv_qp *qp = rq->a[0] >= 0 && rq->a[0] < s->nqp ? s->qp[rq->a[0]] : NULL;
	struct ibv_cq *cq = rq->a[1] >= 0 && rq->a[1] < s->ncq ? s->cq[rq->a[1]] : NULL;
	uint64_t count = (uint64_t)rq->a[4], len = (uint64_t)rq->a[5], errors = 0;
	struct vbuf buf;

	if (!qp || !cq || !len || len > (1u << 30))
		return -EINVAL;
	vbuf_reg(&s->d, &buf, len, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	pat_fill(buf.p, len, (uint64_t)rq->a[6], 0);
	for (uint64_t i = 0; i < count && !errors; i++) {
		struct ibv_sge sge = {(uintptr_t)buf.p, (uint32_t)len, buf.mr->lkey};
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = i;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uint64_t)rq->a[2];
		wr.wr.rdma.rkey = (uint32_t)rq->a[3];
		if (ibv_post_send(qp, &wr, &bad) || vpoll(cq, &wc, 1, 10000) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			errors++;
	}
	vbuf_free(&buf);
	rp->a[0] = (int64_t)errors;
	return 0;
}

static int64_t do_ud_loop(struct agent_state *s, const struct ag_req *rq, struct ag_rep *rp)
{
	struct ibv_qp *qp = rq->a[0] >= 0 && rq->a[0] < s->nqp ? s->qp[rq->a[0]] : NULL;
	struct ibv_cq *cq = rq->a[1] >= 0 && rq->a[1] < s->ncq ? s->cq[rq->a[1]] : NULL;

	if (!qp || !cq || rq->len != 16)
		return -EINVAL;
	rp->a[0] =
	    ud_send_loop(&s->d, qp, cq, ah_for(s, (const uint8_t *)s->in), (uint32_t)rq->a[3],
			 (uint32_t)rq->a[4], (uint64_t)rq->a[5], (int)rq->a[2]);
	return 0;
}

static int64_t handle(struct agent_state *s, const struct ag_req *rq, struct ag_rep *rp)
{
	const int64_t *a = rq->a;

	switch (rq->op) {
	case AG_INFO:
		rp->a[0] = s->d.port.active_mtu;
		rp->a[1] = s->d.attr.max_sge;
		memcpy(s->out, s->d.gid.raw, 16);
		rp->len = 16;
		return 0;
	case AG_CQ_CREATE: {
		struct ibv_comp_channel *ch = NULL;

		if (s->ncq == AG_MAX_CQ)
			return -ENOMEM;
		if (a[1]) {
			ch = ibv_create_comp_channel(s->d.ctx);
			if (!ch)
				return -errno;
		}
		s->cq[s->ncq] = ibv_create_cq(s->d.ctx, (int)a[0], NULL, ch, 0);
		if (!s->cq[s->ncq])
			return -errno;
		s->ch[s->ncq] = ch;
		rp->a[0] = s->ncq++;
		return 0;
	}
	case AG_SRQ_CREATE: {
		struct ibv_srq_init_attr ia;

		if (s->nsrq == AG_MAX_OBJ)
			return -ENOMEM;
		memset(&ia, 0, sizeof(ia));
		ia.attr.max_wr = (uint32_t)a[0];
		ia.attr.max_sge = (uint32_t)a[1];
		ia.attr.srq_limit = (uint32_t)a[2];
		s->srq[s->nsrq] = ibv_create_srq(s->d.pd, &ia);
		if (!s->srq[s->nsrq])
			return -errno;
		rp->a[0] = s->nsrq;
		rp->a[1] = s->srq[s->nsrq]->handle;
		s->nsrq++;
		return 0;
	}
	case AG_SRQ_MODIFY: {
		struct ibv_srq_attr at = {.srq_limit = (uint32_t)a[1]};

		if (a[0] < 0 || a[0] >= s->nsrq)
			return -EINVAL;
		return -ibv_modify_srq(s->srq[a[0]], &at, IBV_SRQ_LIMIT);
	}
	case AG_SRQ_QUERY: {
		struct ibv_srq_attr at;
		int r;

		if (a[0] < 0 || a[0] >= s->nsrq)
			return -EINVAL;
		r = ibv_query_srq(s->srq[a[0]], &at);
		rp->a[0] = at.max_wr;
		rp->a[1] = at.srq_limit;
		return -r;
	}
	case AG_QP_CREATE: {
		struct ibv_qp_init_attr ia;
		struct ibv_qp *qp;

		if (s->nqp == AG_MAX_QP || a[1] < 0 || a[1] >= s->ncq || a[2] < 0 ||
		    a[2] >= s->ncq || a[3] >= s->nsrq)
			return -EINVAL;
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = (enum ibv_qp_type)a[0];
		ia.send_cq = s->cq[a[1]];
		ia.recv_cq = s->cq[a[2]];
		ia.srq = a[3] >= 0 ? s->srq[a[3]] : NULL;
		ia.sq_sig_all = (int)a[4];
		ia.cap.max_send_wr = (uint32_t)a[5];
		ia.cap.max_recv_wr = ia.srq ? 0 : (uint32_t)a[6];
		ia.cap.max_send_sge = (uint32_t)a[7];
		ia.cap.max_recv_sge = ia.srq ? 0 : (uint32_t)a[8];
		ia.cap.max_inline_data = (uint32_t)a[9];
		qp = ibv_create_qp(a[10] ? s->d.pd2 : s->d.pd, &ia);
		if (!qp)
			return -errno;
		s->qp[s->nqp] = qp;
		rp->a[0] = s->nqp++;
		rp->a[1] = qp->qp_num;
		rp->a[2] = ia.cap.max_inline_data;
		rp->a[3] = ia.cap.max_send_sge;
		rp->a[4] = ia.cap.max_recv_sge;
		return 0;
	}
	case AG_QP_CONNECT: {
		struct conn c = {
		    .access = (uint32_t)a[4],
		    .timeout = (uint8_t)a[5],
		    .retry_cnt = (uint8_t)a[6],
		    .rnr_retry = (uint8_t)a[7],
		    .min_rnr_timer = (uint8_t)a[8],
		    .qkey = (uint32_t)a[9],
		};
		union ibv_gid g;

		if (a[0] < 0 || a[0] >= s->nqp || rq->len != 16)
			return -EINVAL;
		memcpy(g.raw, s->in, 16);
		/* vqp_connect REQUIREs success: a failure ends the agent, which the
		 * test sees as a broken socket */
		vqp_connect(&s->d, s->qp[a[0]], (uint32_t)a[3], (uint32_t)a[1], (uint32_t)a[2], &g,
			    &c);
		return 0;
	}
	case AG_QP_STATE:
		if (a[0] < 0 || a[0] >= s->nqp || !s->qp[a[0]])
			return -EINVAL;
		if (a[1] >= 0) {
			int r = vqp_set_state(s->qp[a[0]], (enum ibv_qp_state)a[1]);

			if (r)
				return -r;
		}
		rp->a[0] = vqp_state(s->qp[a[0]]);
		return 0;
	case AG_QP_DESTROY: {
		int r;

		if (a[0] < 0 || a[0] >= s->nqp || !s->qp[a[0]])
			return -EINVAL;
		r = ibv_destroy_qp(s->qp[a[0]]);
		if (!r)
			s->qp[a[0]] = NULL;
		return -r;
	}
	case AG_MR_REG: {
		struct vbuf *b;

		if (s->nmr == AG_MAX_MR)
			return -ENOMEM;
		b = &s->mr[s->nmr];
		vbuf_alloc(b, (size_t)a[0], (size_t)a[1]);
		if (a[4] >= 0)
			pat_fill(b->p, b->len, (uint64_t)a[4], 0);
		if (a[2] >= 0) {
			b->mr = ibv_reg_mr(a[3] ? s->d.pd2 : s->d.pd, b->p, b->len, (int)a[2]);
			if (!b->mr) {
				int e = errno;

				vbuf_free(b);
				return -e;
			}
			rp->a[2] = b->mr->rkey;
			rp->a[3] = b->mr->lkey;
		}
		rp->a[0] = s->nmr++;
		rp->a[1] = (int64_t)(uintptr_t)b->p;
		return 0;
	}
	case AG_MR_DEREG: {
		struct vbuf *b = mr_at(s, a[0]);
		int r;

		if (!b || !b->mr)
			return -EINVAL;
		r = ibv_dereg_mr(b->mr);
		if (!r)
			b->mr = NULL;
		return -r;
	}
	case AG_MEM_READ: {
		char *p = range(s, a[0], a[1], (uint64_t)a[2]);

		if (!p || a[2] > AG_MAX_PAYLOAD)
			return -EINVAL;
		memcpy(s->out, p, (size_t)a[2]);
		rp->len = (uint32_t)a[2];
		return 0;
	}
	case AG_MEM_FILL: {
		char *p = range(s, a[0], a[1], (uint64_t)a[2]);

		if (!p)
			return -EINVAL;
		pat_fill(p, (size_t)a[2], (uint64_t)a[3], (uint64_t)a[4]);
		return 0;
	}
	case AG_MEM_CHECK: {
		char *p = range(s, a[0], a[1], (uint64_t)a[2]);

		if (!p)
			return -EINVAL;
		if (a[3] < 0) {
			rp->a[0] = -1;
			for (int64_t i = 0; i < a[2]; i++)
				if ((unsigned char)p[i] != GUARD_BYTE) {
					rp->a[0] = i;
					break;
				}
		} else {
			rp->a[0] = pat_find_diff(p, (size_t)a[2], (uint64_t)a[3], (uint64_t)a[4]);
		}
		return 0;
	}
	case AG_GUARD_CHECK: {
		struct vbuf *b = mr_at(s, a[0]);

		if (!b)
			return -EINVAL;
		rp->a[0] = vbuf_guard_damage(b);
		return 0;
	}
	case AG_POST_RECV: {
		struct ibv_sge sge[LAYOUT_MAX];
		struct ibv_recv_wr wr, *bad;

		if (a[3] < 0 || a[3] > LAYOUT_MAX || rq->len != a[3] * sizeof(struct ag_piece) ||
		    sges_from(s, (const struct ag_piece *)s->in, (uint32_t)a[3], sge))
			return -EINVAL;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)a[2];
		wr.sg_list = sge;
		wr.num_sge = (int)a[3];
		if (a[1]) {
			if (a[0] < 0 || a[0] >= s->nsrq)
				return -EINVAL;
			rp->a[0] = ibv_post_srq_recv(s->srq[a[0]], &wr, &bad);
		} else {
			if (a[0] < 0 || a[0] >= s->nqp || !s->qp[a[0]])
				return -EINVAL;
			rp->a[0] = ibv_post_recv(s->qp[a[0]], &wr, &bad);
		}
		return 0;
	}
	case AG_POST_SEND:
		return do_post_send(s, s->in, rq->len, rp);
	case AG_BIND_MW1: {
		struct ibv_mw_bind bind;
		struct vbuf *b = mr_at(s, a[2]);

		if (a[0] < 0 || a[0] >= s->nqp || a[1] < 0 || a[1] >= s->nmw || !b)
			return -EINVAL;
		memset(&bind, 0, sizeof(bind));
		bind.wr_id = (uint64_t)a[6];
		bind.send_flags = IBV_SEND_SIGNALED;
		bind.bind_info.mr = b->mr;
		bind.bind_info.addr = (uintptr_t)(b->p + a[3]);
		bind.bind_info.length = (uint64_t)a[4];
		bind.bind_info.mw_access_flags = (unsigned)a[5];
		rp->a[0] = ibv_bind_mw(s->qp[a[0]], s->mw[a[1]], &bind);
		rp->a[1] = s->mw[a[1]]->rkey;
		return 0;
	}
	case AG_MW_ALLOC:
		if (s->nmw == AG_MAX_OBJ)
			return -ENOMEM;
		s->mw[s->nmw] = ibv_alloc_mw(s->d.pd, (enum ibv_mw_type)a[0]);
		if (!s->mw[s->nmw])
			return -errno;
		s->mw_rkey[s->nmw] = s->mw[s->nmw]->rkey;
		rp->a[0] = s->nmw;
		rp->a[1] = s->mw[s->nmw]->rkey;
		s->nmw++;
		return 0;
	case AG_POLL: {
		int n = (int)a[1];

		if (a[0] < 0 || a[0] >= s->ncq || n < 0 ||
		    (size_t)n * sizeof(struct ibv_wc) > AG_MAX_PAYLOAD)
			return -EINVAL;
		rp->a[0] = vpoll(s->cq[a[0]], (struct ibv_wc *)s->out, n, (int)a[2]);
		rp->len = (uint32_t)(rp->a[0] * sizeof(struct ibv_wc));
		return 0;
	}
	case AG_REQ_NOTIFY:
		if (a[0] < 0 || a[0] >= s->ncq)
			return -EINVAL;
		return -ibv_req_notify_cq(s->cq[a[0]], (int)a[1]);
	case AG_GET_CQ_EVENT: {
		struct ibv_comp_channel *ch;
		struct ibv_cq *ev_cq = NULL;
		void *ev_ctx = NULL;
		int fl;

		if (a[0] < 0 || a[0] >= s->ncq || !s->ch[a[0]])
			return -EINVAL;
		ch = s->ch[a[0]];
		fl = fcntl(ch->fd, F_GETFL);
		fcntl(ch->fd, F_SETFL, a[1] ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
		errno = 0;
		rp->a[0] = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
		rp->a[1] = errno;
		rp->a[2] = ev_cq == s->cq[a[0]];
		if (rp->a[0] == 0)
			ibv_ack_cq_events(ev_cq, 1);
		return 0;
	}
	case AG_GET_ASYNC: {
		struct ibv_async_event ev;
		int fl = fcntl(s->d.ctx->async_fd, F_GETFL);

		fcntl(s->d.ctx->async_fd, F_SETFL, a[0] ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
		memset(&ev, 0, sizeof(ev));
		errno = 0;
		rp->a[0] = ibv_get_async_event(s->d.ctx, &ev);
		rp->a[1] = errno;
		rp->a[2] = ev.event_type;
		rp->a[3] = -1;
		if (rp->a[0] == 0) {
			for (int i = 0; i < s->nsrq; i++)
				if (ev.element.srq == s->srq[i])
					rp->a[3] = i;
			for (int i = 0; i < s->nqp; i++)
				if (ev.element.qp == s->qp[i])
					rp->a[3] = i;
			ibv_ack_async_event(&ev);
		}
		return 0;
	}
	case AG_MCAST: {
		union ibv_gid g;

		if (a[0] < 0 || a[0] >= s->nqp || rq->len != 16)
			return -EINVAL;
		memcpy(g.raw, s->in, 16);
		return -(a[1] ? ibv_attach_mcast(s->qp[a[0]], &g, 0)
			      : ibv_detach_mcast(s->qp[a[0]], &g, 0));
	}
	case AG_ATOMIC_LOOP:
		return do_atomic_loop(s, rq, rp);
	case AG_UD_SEND_LOOP:
		return do_ud_loop(s, rq, rp);
	case AG_WRITE_LOOP:
		return do_write_loop(s, rq, rp);
	default:
		return -ENOSYS;
	}
}

static void agent_main(int fd, void *arg)
{
	struct agent_state *s = calloc(1, sizeof(*s));

	REQUIRE(s);
	s->in = malloc(AG_MAX_PAYLOAD);
	s->out = malloc(AG_MAX_PAYLOAD);
	REQUIRE(s->in && s->out);
	sr_host_enter_peer(); /* remote mode: the agent is the other host */
	vdev_open(&s->d);
	for (;;) {
		struct ag_req rq;
		struct ag_rep rp;

		if (!sr_read_timeout(fd, &rq, sizeof(rq), 600000))
			break; /* the test is gone */
		if (rq.len > AG_MAX_PAYLOAD)
			break;
		if (rq.len)
			sr_read_all(fd, s->in, rq.len);
		if (rq.op == AG_EXIT)
			break;
		memset(&rp, 0, sizeof(rp));
		rp.ret = handle(s, &rq, &rp);
		if (rp.ret)
			rp.len = 0;
		sr_write_all(fd, &rp, sizeof(rp));
		if (rp.len)
			sr_write_all(fd, s->out, rp.len);
	}
	/* exit without teardown: the daemon reclaims everything, as for any process */
	_exit(0);
}

/* ---- the test's side ---- */

void agent_start(struct agent *ag, const char *name)
{
	struct ag_req rq = {.op = AG_INFO};
	struct ag_rep rp;

	memset(ag, 0, sizeof(*ag));
	ag->c = sr_fork(name, agent_main, NULL);
	ag_send(ag, &rq, NULL);
	ag_reply(ag, &rp, ag->gid.raw, 16);
	ag->active_mtu = (enum ibv_mtu)rp.a[0];
	ag->max_sge = (int)rp.a[1];
}

void agent_stop(struct agent *ag)
{
	struct ag_req rq = {.op = AG_EXIT};
	int st;

	if (ag->c.pid <= 0)
		return;
	ag_send(ag, &rq, NULL);
	st = sr_child_wait(&ag->c, 10000);
	if (st != 0)
		sr__fail(__FILE__, __LINE__, "agent exit status %#x", st);
}

void ag_send(struct agent *ag, const struct ag_req *rq, const void *payload)
{
	sr_write_all(ag->c.fd, rq, sizeof(*rq));
	if (rq->len)
		sr_write_all(ag->c.fd, payload, rq->len);
}

int64_t ag_reply(struct agent *ag, struct ag_rep *rp, void *out, size_t cap)
{
	sr_read_all(ag->c.fd, rp, sizeof(*rp));
	if (rp->len) {
		if (rp->len > cap) {
			sr__fail(__FILE__, __LINE__, "agent reply of %u bytes, room for %zu",
				 rp->len, cap);
			sr__fatal();
		}
		sr_read_all(ag->c.fd, out, rp->len);
	}
	return rp->ret;
}

int64_t ag_call(struct agent *ag, const struct ag_req *rq, const void *payload, struct ag_rep *rp,
		void *out, size_t cap, int may_fail)
{
	struct ag_rep tmp;
	int64_t r;

	if (!rp)
		rp = &tmp;
	ag_send(ag, rq, payload);
	r = ag_reply(ag, rp, out, cap);
	if (r && !may_fail) {
		sr__fail(__FILE__, __LINE__, "agent request %u failed: %lld", rq->op, (long long)r);
		sr__fatal();
	}
	return r;
}

int ag_cq(struct agent *ag, int cqe, int channel)
{
	struct ag_req rq = {.op = AG_CQ_CREATE, .a = {cqe, channel}};
	struct ag_rep rp;

	ag_call(ag, &rq, NULL, &rp, NULL, 0, 0);
	return (int)rp.a[0];
}

struct ag_qp ag_qp_create(struct agent *ag, enum ibv_qp_type type, int scq, int rcq, int srq,
			  int sig_all, int pd)
{
	const uint32_t caps[5] = {64, 64, (uint32_t)ag->max_sge, (uint32_t)ag->max_sge, 256};

	return ag_qp_create_caps(ag, type, scq, rcq, srq, sig_all, pd, caps);
}

struct ag_qp ag_qp_create_caps(struct agent *ag, enum ibv_qp_type type, int scq, int rcq, int srq,
			       int sig_all, int pd, const uint32_t caps[5])
{
	struct ag_req rq = {
	    .op = AG_QP_CREATE,
	    .a = {type, scq, rcq, srq, sig_all, caps[0], caps[1], caps[2], caps[3], caps[4], pd}};
	struct ag_rep rp;
	struct ag_qp q;

	ag_call(ag, &rq, NULL, &rp, NULL, 0, 0);
	q.h = (int)rp.a[0];
	q.qpn = (uint32_t)rp.a[1];
	q.max_inline = (uint32_t)rp.a[2];
	q.max_send_sge = (uint32_t)rp.a[3];
	q.max_recv_sge = (uint32_t)rp.a[4];
	return q;
}

void ag_qp_connect(struct agent *ag, int qp, uint32_t lpsn, uint32_t rqpn, uint32_t rpsn,
		   const union ibv_gid *rgid, const struct conn *c)
{
	struct ag_req rq = {.op = AG_QP_CONNECT,
			    .len = 16,
			    .a = {qp, rqpn, rpsn, lpsn, c->access, c->timeout, c->retry_cnt,
				  c->rnr_retry, c->min_rnr_timer, c->qkey}};

	ag_call(ag, &rq, rgid->raw, NULL, NULL, 0, 0);
}

int ag_qp_state(struct agent *ag, int qp)
{
	struct ag_req rq = {.op = AG_QP_STATE, .a = {qp, -1}};
	struct ag_rep rp;

	ag_call(ag, &rq, NULL, &rp, NULL, 0, 0);
	return (int)rp.a[0];
}

struct ag_mr ag_mr_reg(struct agent *ag, uint64_t len, uint64_t guard, int access, int pd,
		       int64_t fill_stream)
{
	struct ag_req rq = {.op = AG_MR_REG,
			    .a = {(int64_t)len, (int64_t)guard, access, pd, fill_stream}};
	struct ag_rep rp;
	struct ag_mr m;

	ag_call(ag, &rq, NULL, &rp, NULL, 0, 0);
	m.h = (int)rp.a[0];
	m.addr = (uint64_t)rp.a[1];
	m.rkey = (uint32_t)rp.a[2];
	m.lkey = (uint32_t)rp.a[3];
	m.len = len;
	return m;
}

static void to_ag_pieces(const struct piece *pc, int n, const int *mr_handles, struct ag_piece *out)
{
	for (int i = 0; i < n; i++) {
		out[i].mr = mr_handles[pc[i].mr];
		out[i].len = pc[i].len;
		out[i].off = pc[i].off;
	}
}

int ag_post_recv(struct agent *ag, int qp, int is_srq, uint64_t wr_id, const struct piece *pc,
		 int n, const int *mr_handles)
{
	struct ag_piece p[LAYOUT_MAX];
	struct ag_req rq = {.op = AG_POST_RECV,
			    .len = (uint32_t)(n * sizeof(struct ag_piece)),
			    .a = {qp, is_srq, (int64_t)wr_id, n}};
	struct ag_rep rp;

	to_ag_pieces(pc, n, mr_handles, p);
	ag_call(ag, &rq, p, &rp, NULL, 0, 0);
	return (int)rp.a[0];
}

int ag_post_send(struct agent *ag, const struct ag_wr *wr, const struct piece *pc,
		 const int *mr_handles, uint32_t *new_rkey)
{
	char buf[sizeof(struct ag_wr) + LAYOUT_MAX * sizeof(struct ag_piece)];
	struct ag_req rq = {.op = AG_POST_SEND,
			    .len = (uint32_t)(sizeof(*wr) + wr->nsge * sizeof(struct ag_piece))};
	struct ag_rep rp;

	memcpy(buf, wr, sizeof(*wr));
	to_ag_pieces(pc, (int)wr->nsge, mr_handles, (struct ag_piece *)(buf + sizeof(*wr)));
	ag_call(ag, &rq, buf, &rp, NULL, 0, 0);
	if (new_rkey)
		*new_rkey = (uint32_t)rp.a[1];
	return (int)rp.a[0];
}

int ag_poll(struct agent *ag, int cq, struct ibv_wc *wc, int n, int timeout_ms)
{
	struct ag_req rq = {.op = AG_POLL, .a = {cq, n, timeout_ms}};
	struct ag_rep rp;

	ag_call(ag, &rq, NULL, &rp, wc, (size_t)n * sizeof(*wc), 0);
	return (int)rp.a[0];
}

long ag_mem_check(struct agent *ag, int mr, int64_t off, uint64_t len, int64_t stream, uint64_t pos)
{
	struct ag_req rq = {.op = AG_MEM_CHECK, .a = {mr, off, (int64_t)len, stream, (int64_t)pos}};
	struct ag_rep rp;

	ag_call(ag, &rq, NULL, &rp, NULL, 0, 0);
	return (long)rp.a[0];
}

long ag_mem_wait(struct agent *ag, int mr, int64_t off, uint64_t len, int64_t stream, uint64_t pos,
		 int timeout_ms)
{
	uint64_t end = sr_now_us() + (uint64_t)timeout_ms * 1000;
	long d;

	while ((d = ag_mem_check(ag, mr, off, len, stream, pos)) >= 0 && sr_now_us() < end)
		sr_sleep_ms(1);
	return d;
}

long ag_guard_check(struct agent *ag, int mr)
{
	struct ag_req rq = {.op = AG_GUARD_CHECK, .a = {mr}};
	struct ag_rep rp;

	ag_call(ag, &rq, NULL, &rp, NULL, 0, 0);
	return (long)rp.a[0];
}

void ag_mem_read(struct agent *ag, int mr, int64_t off, uint64_t len, void *out)
{
	struct ag_req rq = {.op = AG_MEM_READ, .a = {mr, off, (int64_t)len}};

	ag_call(ag, &rq, NULL, NULL, out, len, 0);
}

void ag_mem_fill(struct agent *ag, int mr, int64_t off, uint64_t len, uint64_t stream, uint64_t pos)
{
	struct ag_req rq = {.op = AG_MEM_FILL,
			    .a = {mr, off, (int64_t)len, (int64_t)stream, (int64_t)pos}};

	ag_call(ag, &rq, NULL, NULL, NULL, 0, 0);
}

void pair_connect(struct vdev *d, struct ibv_qp *lqp, const struct conn *lc, struct agent *ag,
		  const struct ag_qp *aq, const struct conn *ac, struct rng *r)
{
	uint32_t lpsn = (uint32_t)rng_next(r) & 0xffffff, apsn = (uint32_t)rng_next(r) & 0xffffff;

	ag_qp_connect(ag, aq->h, apsn, lqp->qp_num, lpsn, &d->gid, ac);
	vqp_connect(d, lqp, lpsn, aq->qpn, apsn, &ag->gid, lc);
}
