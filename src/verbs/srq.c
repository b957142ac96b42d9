/*
 * Shared receive queues (control side).  The SRQ's ring lives in the arena
 * and is consumed by whichever process executes a SEND to a QP attached to
 * it; that executor also raises the limit event (IBV_EVENT_SRQ_LIMIT_REACHED)
 * when the posted count falls below the armed limit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/internal.h"

static struct sr_srq *srq_create(struct ibv_pd *pd, struct ibv_srq_init_attr *attr,
				 struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	struct sr_context *ctx = to_sctx(pd->context);
	struct sr_req req;
	struct sr_rep rep;
	struct sr_srq *srq;
	int ret;

	if (!attr->attr.max_wr || attr->attr.max_wr > SR_MAX_SRQ_WR ||
	    attr->attr.max_sge > SR_MAX_SGE || attr->attr.srq_limit > attr->attr.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_CREATE_SRQ;
	req.u.srq.pd = to_spd(pd)->handle;
	req.u.srq.max_wr = attr->attr.max_wr;
	req.u.srq.max_sge = attr->attr.max_sge;
	req.u.srq.srq_limit = attr->attr.srq_limit;
	req.u.srq.async_fd_id = ctx->async_fd_id;
	req.u.srq.user_handle = (uintptr_t)srq;
	if (xrcd) {
		req.u.srq.xrcd = to_sxrcd(xrcd)->handle;
		req.u.srq.cq = to_scq(cq)->handle;
	}
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) {
		free(srq);
		errno = -ret;
		return NULL;
	}
	srq->srqn = rep.handle;
	srq->xrc = xrcd != NULL;
	srq->shm = sr_arena_ptr(ctx->dc.arena, rep.u.srq.off);
	srq->srq.context = pd->context;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = pd;
	srq->srq.handle = rep.handle;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	attr->attr.max_wr = rep.u.srq.max_wr;
	attr->attr.max_sge = rep.u.srq.max_sge;
	pthread_mutex_lock(&ctx->lock);
	sr_list_add(&ctx->srqs, &srq->link);
	pthread_mutex_unlock(&ctx->lock);
	return srq;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *srq_init_attr)
{
	struct sr_srq *srq;

	if (!pd || !srq_init_attr) {
		errno = EINVAL;
		return NULL;
	}
	srq = srq_create(pd, srq_init_attr, NULL, NULL);
	return srq ? &srq->srq : NULL;
}

struct ibv_srq *sr_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr basic;
	struct sr_srq *srq;
	bool xrc;

	if (!context || !attr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
					   IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)) ||
	    ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC &&
	     attr->srq_type != IBV_SRQT_XRC)) {
		errno = EOPNOTSUPP; /* tag-matching SRQs are not implemented */
		return NULL;
	}
	xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC;
	/* an XRC SRQ needs its domain and the CQ of its completions (IBTA A14;
	 * rdma-core's ibv_cmd_create_srq_ex) */
	if (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
		    !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq ||
		    attr->xrcd->context != context || attr->cq->context != context ||
		    attr->pd->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	basic.srq_context = attr->srq_context;
	basic.attr = attr->attr;
	srq = srq_create(attr->pd, &basic, xrc ? attr->xrcd : NULL, xrc ? attr->cq : NULL);
	if (!srq)
		return NULL;
	attr->attr = basic.attr;
	return &srq->srq;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	struct sr_req req;
	struct sr_rep rep;

	if (!srq || !srq_attr)
		return EINVAL;
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_MODIFY_SRQ;
	req.handle = to_ssrq(srq)->srqn;
	req.u.srq.max_wr = srq_attr->max_wr;
	req.u.srq.max_sge = srq_attr_mask; /* carries the mask */
	req.u.srq.srq_limit = srq_attr->srq_limit;
	return -sr_ctx_request(&to_sctx(srq->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	struct sr_srq_shm *s;

	if (!srq || !srq_attr)
		return EINVAL;
	s = to_ssrq(srq)->shm;
	srq_attr->max_wr = s->rq.max_wr;
	srq_attr->max_sge = s->rq.max_sge;
	/* a limit that fired is disarmed and reads back as 0, as on hardware */
	srq_attr->srq_limit =
	    atomic_load_explicit(&s->limit_armed, memory_order_acquire) ? s->rq.limit : 0;
	return 0;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct sr_context *ctx;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!srq)
		return EINVAL;
	ctx = to_sctx(srq->context);
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_DESTROY_SRQ;
	req.handle = to_ssrq(srq)->srqn;
	/* off the context's lists first: whoever walks them (async events,
	 * poll_cq's retries) must not find an object whose memory the daemon
	 * may hand out again */
	pthread_mutex_lock(&ctx->lock);
	sr_list_del(&to_ssrq(srq)->link);
	pthread_mutex_unlock(&ctx->lock);
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) { /* EBUSY while QPs use it */
		pthread_mutex_lock(&ctx->lock);
		sr_list_add(&ctx->srqs, &to_ssrq(srq)->link);
		pthread_mutex_unlock(&ctx->lock);
		return -ret;
	}
	/* as rdma-core's ibv_cmd_destroy_srq: once it is gone, the async
	 * events handed out for it must be acknowledged */
	pthread_mutex_lock(&srq->mutex);
	while (srq->events_completed != to_ssrq(srq)->async_reported)
		pthread_cond_wait(&srq->cond, &srq->mutex);
	pthread_mutex_unlock(&srq->mutex);
	free(to_ssrq(srq));
	return 0;
}
