/*
 * Completion queues (CREATE_CQ, RESIZE_CQ, DESTROY_CQ): a CQ's header and
 * ring in an arena chunk, and a resize that moves the ring to a chunk of
 * its own under the CQ's lock.
 */
#include <errno.h>

#include "core/log.h"
#include "core/shmlock.h"
#include "daemon/objects.h"

int sr_op_create_cq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	uint32_t cqe = req->u.cq.cqe, cnt;
	struct sr_cq_shm *cq;
	struct sr_obj *o, *ch = NULL;
	uint64_t off, got, ring, size;
	int ret;

	if (cqe < 1 || cqe > SR_MAX_CQE)
		return -EINVAL;
	if (!sr_event_fd_ok(d, c, req->u.cq.channel_fd_id) ||
	    !sr_event_fd_ok(d, c, req->u.cq.async_fd_id))
		return -EINVAL;
	if (req->u.cq.channel_fd_id)
		ch = sr_obj_owned(d, c, SR_OBJ_FD, req->u.cq.channel_fd_id);
	cnt = roundup_pow2(cqe + 1);
	ring = align64(sizeof(*cq));
	size = ring + (uint64_t)cnt * sizeof(struct sr_cqe);
	off = sr_heap_alloc(d, size, &got);
	if (!off)
		return -ENOMEM;
	if (sr_obj_new_numbered(d, c, SR_OBJ_CQ, &o)) {
		sr_heap_free(d, off, got);
		return -ENOMEM;
	}
	if (ch)
		sr_obj_hold(o, ch);
	o->u.shm.off = off;
	o->u.shm.size = got;
	cq = sr_arena_ptr(d->arena, off);
	cq->cqe_cnt = cnt;
	cq->max_cqe = cnt - 1;
	cq->channel_fd_id = req->u.cq.channel_fd_id;
	cq->async_fd_id = req->u.cq.async_fd_id;
	cq->handle = o->handle;
	cq->owner_pid = c->pid;
	cq->ring_off = off + ring;
	o->u.shm.cqe_cnt = cnt;
	ret = sr_shm_lock_init(&cq->lock);
	if (ret)
		sr_warn("cq mutex init: %d", ret);
	rep->handle = o->handle;
	rep->u.cq.off = off;
	rep->u.cq.max_cqe = cq->max_cqe;
	return 0;
}

/* Moves a CQ's ring to a new chunk, keeping unpolled completions in order.
 * The owner polls under the same lock, so nobody sees the ring move. */
int sr_op_resize_cq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	struct sr_obj *o = sr_obj_owned(d, c, SR_OBJ_CQ, req->handle);
	uint32_t cqe = req->u.cq.cqe, cnt, pending;
	struct sr_cq_shm *cq;
	uint64_t off, got, size;
	struct sr_cqe *old, *nr;
	uint32_t prod, cons;

	if (!o)
		return -EINVAL;
	if (cqe < 1 || cqe > SR_MAX_CQE)
		return -EINVAL;
	cq = sr_arena_at(d->arena, o->u.shm.off);
	cnt = roundup_pow2(cqe + 1);
	size = (uint64_t)cnt * sizeof(struct sr_cqe);
	if (sr_lock_all(&(struct sr_lock *){&cq->lock}, 1))
		return SR_RETRY;
	off = sr_heap_alloc(d, size, &got);
	if (!off) {
		sr_shm_unlock(&cq->lock);
		return -ENOMEM;
	}
	prod = atomic_load_explicit(&cq->prod, memory_order_relaxed);
	cons = atomic_load_explicit(&cq->cons, memory_order_relaxed);
	pending = prod - cons;
	if (pending > cnt - 1) {
		sr_shm_unlock(&cq->lock);
		sr_heap_free(d, off, got);
		return -EINVAL;
	}
	/* the ring as the daemon made it, not as the arena says now: the
	 * copy stays inside it whatever prod and cons read */
	old = sr_arena_at(d->arena, o->u.shm.ring_off ? o->u.shm.ring_off
						      : o->u.shm.off + align64(sizeof(*cq)));
	nr = sr_arena_ptr(d->arena, off);
	for (uint32_t i = 0; i < pending; i++) {
		nr[i] = old[(cons + i) & (o->u.shm.cqe_cnt - 1)];
		atomic_store_explicit(&nr[i].seq, i + 1, memory_order_relaxed);
	}
	/* the old ring lives in the first chunk (after the header) unless already resized */
	if (o->u.shm.ring_off)
		sr_heap_free(d, o->u.shm.ring_off,
			     (uint64_t)o->u.shm.cqe_cnt * sizeof(struct sr_cqe));
	o->u.shm.ring_off = off;
	o->u.shm.cqe_cnt = cnt;
	cq->ring_off = off;
	cq->cqe_cnt = cnt;
	cq->max_cqe = cnt - 1;
	atomic_store_explicit(&cq->cons, 0, memory_order_relaxed);
	cq->cons_cache = 0;
	atomic_store_explicit(&cq->prod, pending, memory_order_release);
	sr_shm_unlock(&cq->lock);
	rep->u.cq.max_cqe = cnt - 1;
	rep->u.cq.off = o->u.shm.off;
	return 0;
}

void sr_cq_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	if (o->u.shm.ring_off)
		sr_heap_free_later(d, o->u.shm.ring_off,
				   (uint64_t)o->u.shm.cqe_cnt * sizeof(struct sr_cqe));
	sr_heap_free_later(d, o->u.shm.off, o->u.shm.size);
	sr_handle_free(d, o);
	sr_obj_unlink(o);
}
