/*
 * Shared receive queues (CREATE_SRQ, MODIFY_SRQ, DESTROY_SRQ): plain ones
 * that QPs of a PD share, and XRC SRQs (IBTA A14) of a domain, fed through
 * XRC_RECV QPs and completing to a CQ of their own.
 */
#include <errno.h>

#include "core/shmlock.h"
#include "daemon/objects.h"

int sr_op_create_srq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	struct sr_obj *pd = sr_obj_owned(d, c, SR_OBJ_PD, req->u.srq.pd), *o;
	struct sr_obj *xrcd = NULL, *cq = NULL;
	uint32_t max_wr = req->u.srq.max_wr, sge = req->u.srq.max_sge, stride, cnt;
	struct sr_srq_shm *srq;
	uint64_t off, got, hdr;
	int64_t idx;

	if (!pd || !sr_event_fd_ok(d, c, req->u.srq.async_fd_id))
		return -EINVAL;
	if (req->u.srq.xrcd) { /* an XRC SRQ: its domain and its CQ */
		xrcd = sr_obj_owned(d, c, SR_OBJ_XRCD, req->u.srq.xrcd);
		cq = sr_obj_owned(d, c, SR_OBJ_CQ, req->u.srq.cq);
		if (!xrcd || !cq)
			return -EINVAL;
	}
	if (!max_wr || max_wr > SR_MAX_SRQ_WR || sge > SR_MAX_SGE || req->u.srq.srq_limit > max_wr)
		return -EINVAL;
	if (!sge)
		sge = 1;
	stride = sr_wq_recv_stride(sge);
	cnt = roundup_pow2(max_wr);
	hdr = align64(sizeof(*srq));
	/* SR_WQ_FREED_BY_POLL: twice the slots of max_wr (layout.h) */
	off = sr_heap_alloc(d, hdr + 2ull * cnt * stride, &got);
	if (!off)
		return -ENOMEM;
	idx = sr_idalloc_get(&d->srqn_ids);
	o = idx >= 0 ? sr_obj_new(c, SR_OBJ_SRQ) : NULL;
	if (!o) {
		if (idx >= 0)
			sr_idalloc_put(&d->srqn_ids, idx);
		sr_heap_free(d, off, got);
		return -ENOMEM;
	}
	sr_obj_hold(o, pd);
	if (xrcd) {
		sr_obj_hold(o, xrcd);
		sr_obj_hold(o, cq);
	}
	o->handle = sr_qpn_make(idx, sr_random32());
	o->u.shm.off = off;
	o->u.shm.size = got;
	d->srq_by_idx[idx] = o;
	srq = sr_arena_ptr(d->arena, off);
	srq->srqn = o->handle;
	srq->pd = req->u.srq.pd;
	srq->owner_pid = c->pid;
	srq->async_fd_id = req->u.srq.async_fd_id;
	srq->user_handle = req->u.srq.user_handle;
	srq->xrcd = xrcd ? xrcd->u.xrcd.dom->id : 0;
	srq->cq_off = cq ? cq->u.shm.off : 0;
	atomic_store_explicit(&srq->waiter_qpn, 0, memory_order_relaxed);
	sr_shm_lock_init(&srq->lock);
	sr_wq_init(&srq->rq, 2 * cnt, sge, 0, stride, off + hdr);
	srq->rq.max_wr = cnt;
	srq->rq.flags = SR_WQ_FREED_BY_POLL;
	srq->rq.limit = req->u.srq.srq_limit;
	atomic_store_explicit(&srq->limit_armed, srq->rq.limit != 0, memory_order_relaxed);
	atomic_store_explicit(&sr_arena_srqtab(d->arena)[idx].obj_off, off, memory_order_release);
	rep->handle = o->handle;
	rep->u.srq.off = off;
	rep->u.srq.max_wr = srq->rq.max_wr;
	rep->u.srq.max_sge = sge;
	return 0;
}

int sr_op_modify_srq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_op_io *io)
{
	struct sr_obj *o = sr_obj_owned(d, c, SR_OBJ_SRQ, req->handle);
	uint32_t mask = req->u.srq.max_sge; /* reused field: attr mask */
	struct sr_srq_shm *srq;

	if (!o)
		return -EINVAL;
	srq = sr_arena_at(d->arena, o->u.shm.off);
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return -EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return -EINVAL; /* SRQ resize is not supported (as on mlx5) */
	if (mask & IBV_SRQ_LIMIT) {
		if (req->u.srq.srq_limit > srq->rq.max_wr)
			return -EINVAL;
		if (sr_lock_all(&(struct sr_lock *){&srq->lock}, 1))
			return SR_RETRY;
		srq->rq.limit = req->u.srq.srq_limit;
		atomic_store_explicit(&srq->limit_armed, srq->rq.limit != 0, memory_order_release);
		sr_shm_unlock(&srq->lock);
	}
	return 0;
}

void sr_srq_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	uint32_t idx = sr_qpn_index(o->handle);

	atomic_store_explicit(&sr_arena_srqtab(d->arena)[idx].obj_off, 0, memory_order_release);
	d->srq_by_idx[idx] = NULL;
	sr_idalloc_put(&d->srqn_ids, idx);
	sr_heap_free_later(d, o->u.shm.off, o->u.shm.size);
	sr_obj_unlink(o);
}
