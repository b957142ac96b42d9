/*
 * XRC (IBTA vol. 1 annex A14), control side: XRC domains (ibv_open_xrcd,
 * shared between processes through a file, as the kernel keys them by
 * inode), ibv_close_xrcd, ibv_get_srq_num and ibv_open_qp of an XRC_RECV QP
 * another process of the domain created.  The daemon keeps the domains
 * (daemon/obj_pd.c); the data path delivers by the SRQ number each message names
 * (src/shm/exec.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/internal.h"

struct ibv_xrcd *sr_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	struct sr_context *ctx = to_sctx(context);
	struct sr_xrcd *x;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!attr || attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		errno = attr ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	/* as rdma-core's ibv_cmd_open_xrcd: both fields are required */
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (attr->oflags & ~(O_CREAT | O_EXCL)) || attr->fd < -1) {
		errno = EINVAL;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_OPEN_XRCD;
	req.u.xrcd.oflags = attr->oflags;
	ret = sr_ctx_request(&ctx->dc, &req, &rep, attr->fd >= 0 ? &attr->fd : NULL, attr->fd >= 0,
			     NULL, NULL);
	if (ret) {
		free(x);
		errno = -ret;
		return NULL;
	}
	x->xrcd.context = context;
	x->handle = rep.handle;
	return &x->xrcd;
}

int sr_close_xrcd(struct ibv_xrcd *xrcd)
{
	struct sr_xrcd *x = to_sxrcd(xrcd);
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	memset(&req, 0, sizeof(req));
	req.op = SR_OP_CLOSE_XRCD;
	req.handle = x->handle;
	ret = sr_ctx_request(&to_sctx(xrcd->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret)
		return -ret; /* EBUSY while SRQs or QPs made through it exist */
	free(x);
	return 0;
}

int sr_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
	/* any SRQ's number, as mlx5 gives (only an XRC one is useful) */
	*srq_num = to_ssrq(srq)->srqn;
	return 0;
}

struct ibv_qp *sr_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	struct sr_context *ctx = to_sctx(context);
	struct sr_req req;
	struct sr_rep rep;
	struct sr_qp *qp;
	struct ibv_qp *q;
	int ret;

	if (!attr || attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
		errno = attr ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_QP_OPEN_ATTR_XRCD) ||
	    !(attr->comp_mask & IBV_QP_OPEN_ATTR_NUM) ||
	    !(attr->comp_mask & IBV_QP_OPEN_ATTR_TYPE) || !attr->xrcd ||
	    attr->xrcd->context != context || attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_OPEN_QP;
	req.handle = attr->qp_num;
	req.u.open_qp.xrcd = to_sxrcd(attr->xrcd)->handle;
	req.u.open_qp.async_fd_id = ctx->async_fd_id;
	req.u.open_qp.user_handle = (uintptr_t)qp;
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) {
		free(qp);
		errno = -ret; /* EINVAL: no XRC_RECV QP of that number in this domain */
		return NULL;
	}
	qp->shm = sr_arena_ptr(ctx->dc.arena, rep.u.qp.off);
	qp->opened_xrcd = req.u.open_qp.xrcd;
	q = &qp->qpx.qp_base;
	q->context = context;
	q->qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : NULL;
	q->handle = rep.handle;
	q->qp_num = rep.handle;
	q->state = atomic_load_explicit(&qp->shm->state, memory_order_acquire);
	q->qp_type = IBV_QPT_XRC_RECV;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	pthread_mutex_lock(&ctx->lock);
	sr_list_add(&ctx->qps, &qp->link);
	pthread_mutex_unlock(&ctx->lock);
	return q;
}
