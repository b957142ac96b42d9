/*
 * Queue pairs (control side): create, modify, query, destroy.  The daemon
 * owns the QP's shared state and checks every modify against the IBTA state
 * machine (src/core/qp_state.c); the library mirrors the resulting state in
 * ibv_qp.state, which programs read directly.  Moving to ERR flushes the
 * outstanding work requests into the CQs (IBTA 10.3.1, C10-32).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shm/epoch.h"
#include "shm/exec.h"
#include "datapath/wire_tx.h"
#include "verbs/internal.h"

#define SR_SEND_OPS_SUPPORTED                                                                      \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |    \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                                 \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |                 \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)

/* init, if not NULL: a modify (mask init_mask) the daemon makes on the new
 * QP at once (librdmacm's INIT, cm_hooks.h). */
static struct sr_qp *qp_create(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr,
			       const struct ibv_qp_attr *init, int init_mask)
{
	struct sr_context *ctx = to_sctx(context);
	struct sr_req req;
	struct sr_rep rep;
	struct sr_qp *qp;
	struct ibv_qp *q;
	int ret;

	bool xrc_recv = attr->qp_type == IBV_QPT_XRC_RECV;
	bool xrc_send = attr->qp_type == IBV_QPT_XRC_SEND;

	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC &&
	    attr->qp_type != IBV_QPT_UD && !xrc_recv && !xrc_send) {
		errno = EOPNOTSUPP; /* raw packet QPs are not implemented */
		return NULL;
	}
	if (xrc_recv) {
		/* IBTA A14: on an XRC domain, with no PD, CQs or queues of its own */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
		    attr->xrcd->context != context) {
			errno = EINVAL;
			return NULL;
		}
	} else if (!attr->pd || attr->pd->context != context || !attr->send_cq ||
		   attr->send_cq->context != context ||
		   (!xrc_send && (!attr->recv_cq || attr->recv_cq->context != context)) ||
		   (attr->srq && (xrc_send || attr->srq->context != context))) {
		errno = EINVAL;
		return NULL;
	}
	if (!xrc_recv &&
	    (attr->cap.max_send_wr > SR_MAX_QP_WR || attr->cap.max_send_sge > SR_MAX_SGE ||
	     attr->cap.max_inline_data > SR_MAX_INLINE ||
	     (!attr->srq && !xrc_send &&
	      (attr->cap.max_recv_wr > SR_MAX_QP_WR || attr->cap.max_recv_sge > SR_MAX_SGE)))) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	/* before a peer can reach a QP of this process (life.c) */
	sr_life_hold(ctx->dc.arena, ctx->dc.dev.life);
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_CREATE_QP;
	req.u.create_qp.type = attr->qp_type;
	if (xrc_recv) {
		req.u.create_qp.xrcd = to_sxrcd(attr->xrcd)->handle;
	} else {
		req.u.create_qp.pd = to_spd(attr->pd)->handle;
		req.u.create_qp.send_cq = to_scq(attr->send_cq)->handle;
		if (!xrc_send)
			req.u.create_qp.recv_cq = to_scq(attr->recv_cq)->handle;
	}
	req.u.create_qp.srqn = attr->srq ? to_ssrq(attr->srq)->srqn : 0;
	req.u.create_qp.sq_sig_all = !!attr->sq_sig_all;
	req.u.create_qp.async_fd_id = ctx->async_fd_id;
	req.u.create_qp.user_handle = (uintptr_t)qp;
	req.u.create_qp.cap.max_send_wr = attr->cap.max_send_wr;
	req.u.create_qp.cap.max_recv_wr = attr->cap.max_recv_wr;
	req.u.create_qp.cap.max_send_sge = attr->cap.max_send_sge;
	req.u.create_qp.cap.max_recv_sge = attr->cap.max_recv_sge;
	req.u.create_qp.cap.max_inline_data = attr->cap.max_inline_data;
	if (init) {
		req.u.create_qp.init_mask = (uint32_t)init_mask;
		sr_qp_attr_to_wire(init, &req.u.create_qp.init);
	}
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) {
		free(qp);
		errno = -ret;
		return NULL;
	}
	qp->shm = sr_arena_ptr(ctx->dc.arena, rep.u.qp.off);
	qp->cap.max_send_wr = rep.u.qp.cap.max_send_wr;
	qp->cap.max_recv_wr = rep.u.qp.cap.max_recv_wr;
	qp->cap.max_send_sge = rep.u.qp.cap.max_send_sge;
	qp->cap.max_recv_sge = rep.u.qp.cap.max_recv_sge;
	qp->cap.max_inline_data = rep.u.qp.cap.max_inline_data;
	attr->cap = qp->cap; /* report what was actually created */

	q = &qp->qpx.qp_base;
	q->context = context;
	q->qp_context = attr->qp_context;
	q->pd = xrc_recv ? NULL : attr->pd;
	q->send_cq = xrc_recv ? NULL : attr->send_cq;
	q->recv_cq = xrc_recv || xrc_send ? NULL : attr->recv_cq;
	q->srq = xrc_recv || xrc_send ? NULL : attr->srq;
	q->handle = rep.handle;
	q->qp_num = rep.handle;
	q->state = init ? rep.u.qp.state : IBV_QPS_RESET;
	q->qp_type = attr->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->has_qpx = true;
		sr_qp_ex_init(qp);
	}
	/* a number given again: its new completions are not stale ones */
	sr_cq_qp_created(attr->send_cq, q->qp_num);
	if (attr->recv_cq != attr->send_cq)
		sr_cq_qp_created(attr->recv_cq, q->qp_num);
	pthread_mutex_lock(&ctx->lock);
	sr_list_add(&ctx->qps, &qp->link);
	pthread_mutex_unlock(&ctx->lock);
	return qp;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct sr_qp *qp;

	if (!pd || !qp_init_attr) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = qp_create(pd->context, &ex, NULL, 0);
	if (!qp)
		return NULL;
	qp_init_attr->cap = ex.cap;
	return &qp->qpx.qp_base;
}

/* ibv_create_qp_ex, and a modify made with it (cm_hooks.h) */
static struct ibv_qp *create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr,
				   const struct ibv_qp_attr *init, int init_mask)
{
	struct sr_qp *qp;

	if (!context || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) && attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					  IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->send_ops_flags & ~(uint64_t)SR_SEND_OPS_SUPPORTED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = qp_create(context, attr, init, init_mask);
	return qp ? &qp->qpx.qp_base : NULL;
}

struct ibv_qp *sr_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	return create_qp_ex(context, attr, NULL, 0);
}

struct ibv_qp *sr_create_qp_init(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr,
				 const struct ibv_qp_attr *init, int init_mask)
{
	return create_qp_ex(context, attr, init, init_mask);
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	if (qp && to_sqp(qp)->has_qpx)
		return &to_sqp(qp)->qpx;
	errno = EOPNOTSUPP;
	return NULL;
}

/* Removes the QP's completions from its CQs (cq_poll.c, sr_cq_clean_qp):
 * receive completions that took WQEs of its SRQ give those back. */
static void cq_clean(struct ibv_qp *qp)
{
	sr_cq_clean_qp(qp->recv_cq, qp->qp_num, qp->srq ? &to_ssrq(qp->srq)->shm->rq : NULL);
	if (qp->send_cq != qp->recv_cq)
		sr_cq_clean_qp(qp->send_cq, qp->qp_num, NULL);
}

/* What follows a move of the QP from state was to qp->state, once the
 * daemon made it. */
static void qp_moved(struct sr_context *ctx, struct ibv_qp *qp, uint32_t was)
{
	if (qp->state == IBV_QPS_RESET)
		/* its old life's completions go, as mlx5_modify_qp cleans them */
		cq_clean(qp);
	if (qp->state == IBV_QPS_RTS &&
	    (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_SEND)) {
		/* the daemon held our sq_lock: a responder's post_recv that
		 * found it held left our RNR wait to us (sr_exec_recheck) */
		sr_epoch_enter(ctx->dc.arena);
		sr_exec_recheck(&ctx->dc, to_sqp(qp)->shm);
		sr_epoch_exit();
	}
	if (qp->state == IBV_QPS_ERR) {
		sr_qp_flush(ctx, to_sqp(qp));
		/* A QP on an SRQ that enters the error state reports the
		 * affiliated event Last WQE Reached (IBTA vol. 1, 10.2.9 and
		 * 11.6.3); consumers (NVMe-oF targets, MPI) wait for it before
		 * destroying the QP.  The flush above took nothing from the
		 * SRQ, so it is reached now.  Once per entry into ERR: the data
		 * path reports it when it moves the QP there itself. */
		if (qp->srq && was != IBV_QPS_ERR)
			sr_async_raise(ctx, &to_sqp(qp)->shm->async_events,
				       IBV_EVENT_QP_LAST_WQE_REACHED, ctx->async_fd_id);
	}
	/* A connected peer may already be sending to us and waiting for the
	 * ACK an HCA would give on its next retry: now that we can receive,
	 * run it (its owner may be blocked in ibv_get_cq_event). */
	if ((qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS) && qp->qp_type != IBV_QPT_UD &&
	    was != qp->state) {
		sr_epoch_enter(ctx->dc.arena);
		sr_exec_kick(&ctx->dc, sr_exec_qp_lookup(&ctx->dc, to_sqp(qp)->shm->dest_qpn));
		sr_epoch_exit();
	}
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct sr_context *ctx;
	struct sr_req req;
	struct sr_rep rep;
	uint32_t was;
	int ret;

	if (!qp || !attr)
		return EINVAL;
	ctx = to_sctx(qp->context);
	was = atomic_load_explicit(&to_sqp(qp)->shm->state, memory_order_acquire);
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_MODIFY_QP;
	req.handle = qp->qp_num;
	req.u.modify_qp.attr_mask = attr_mask;
	sr_qp_attr_to_wire(attr, &req.u.modify_qp.attr);
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret)
		return -ret;
	qp->state = rep.u.modify_qp.state;
	qp_moved(ctx, qp, was);
	return 0;
}

void sr_qp_moved_elsewhere(struct ibv_qp *qp, enum ibv_qp_state was)
{
	qp->state = atomic_load_explicit(&to_sqp(qp)->shm->state, memory_order_acquire);
	qp_moved(to_sctx(qp->context), qp, was);
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init_attr)
{
	struct sr_qp *sqp;
	struct sr_qp_shm *s;

	if (!qp || !attr || !init_attr)
		return EINVAL;
	sqp = to_sqp(qp);
	s = sqp->shm;
	memset(attr, 0, sizeof(*attr));
	qp->state = atomic_load_explicit(&s->state, memory_order_acquire);
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->path_mtu = s->path_mtu;
	attr->path_mig_state = s->path_mig_state;
	attr->qkey = s->qkey;
	attr->rq_psn = s->rq_psn;
	attr->sq_psn = s->sq_psn;
	attr->dest_qp_num = s->dest_qpn;
	attr->qp_access_flags = s->access;
	attr->cap = sqp->cap;
	memcpy(&attr->ah_attr, s->ah_attr, sizeof(attr->ah_attr));
	memcpy(&attr->alt_ah_attr, s->alt_ah_attr, sizeof(attr->alt_ah_attr));
	attr->pkey_index = s->pkey_index;
	attr->alt_pkey_index = s->alt_pkey_index;
	attr->en_sqd_async_notify = s->en_sqd_async_notify;
	attr->sq_draining = 0;
	attr->max_rd_atomic = s->max_rd_atomic;
	attr->max_dest_rd_atomic = s->max_dest_rd_atomic;
	attr->min_rnr_timer = s->min_rnr_timer;
	attr->port_num = s->port_num;
	attr->timeout = s->timeout;
	attr->retry_cnt = s->retry_cnt;
	attr->rnr_retry = s->rnr_retry;
	attr->alt_port_num = s->alt_port_num;
	attr->alt_timeout = s->alt_timeout;

	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = qp->qp_context;
	init_attr->send_cq = qp->send_cq;
	init_attr->recv_cq = qp->recv_cq;
	init_attr->srq = qp->srq;
	init_attr->cap = sqp->cap;
	init_attr->qp_type = qp->qp_type;
	init_attr->sq_sig_all = s->sq_sig_all;
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct sr_context *ctx;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!qp)
		return EINVAL;
	ctx = to_sctx(qp->context);
	sr_wire_flush_ack(ctx, to_sqp(qp)->shm);
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_DESTROY_QP;
	req.handle = qp->qp_num;
	req.u.open_qp.xrcd = to_sqp(qp)->opened_xrcd;
	/* off the context's lists first: whoever walks them (async events,
	 * poll_cq's retries) must not find an object whose memory the daemon
	 * may hand out again */
	pthread_mutex_lock(&ctx->lock);
	sr_list_del(&to_sqp(qp)->link);
	pthread_mutex_unlock(&ctx->lock);
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) {
		pthread_mutex_lock(&ctx->lock);
		sr_list_add(&ctx->qps, &to_sqp(qp)->link);
		pthread_mutex_unlock(&ctx->lock);
		return -ret;
	}
	/* none of its completions is returned from now on, as on a ConnectX
	 * (cq_poll.c, "Completions of destroyed QPs") */
	sr_cq_qp_destroyed(qp->send_cq, qp->qp_num);
	if (qp->recv_cq != qp->send_cq)
		sr_cq_qp_destroyed(qp->recv_cq, qp->qp_num);
	/* and those already there go now (mlx5_destroy_qp cleans its CQs):
	 * they hold no slot a live QP's completion could need */
	cq_clean(qp);
	/* as rdma-core's ibv_cmd_destroy_qp: once it is gone, the async events
	 * handed out for it must be acknowledged */
	pthread_mutex_lock(&qp->mutex);
	while (qp->events_completed != to_sqp(qp)->async_reported)
		pthread_cond_wait(&qp->cond, &qp->mutex);
	pthread_mutex_unlock(&qp->mutex);
	free(to_sqp(qp));
	return 0;
}

int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	/* payload is copied with memcpy, whose store order is unspecified:
	 * polling the last byte of a WRITE is not a valid completion signal */
	return 0;
}
