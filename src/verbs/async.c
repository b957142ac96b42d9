/*
 * Asynchronous events.  The context's async_fd is an eventfd (semaphore
 * mode) registered with the daemon; whoever detects an event for an object
 * (this process, a peer executing work, or the daemon) sets the event's bit
 * in the object's shared `async_events` word and signals the fd.
 * ibv_get_async_event takes one signal and reports one pending bit.
 */
#include <errno.h>
#include <unistd.h>

#include "shm/fdcache.h"
#include "verbs/internal.h"

void sr_async_raise(struct sr_context *ctx, _Atomic uint32_t *bits, enum ibv_event_type ev,
		    uint32_t async_fd_id)
{
	uint32_t bit = 1u << ev;

	if (atomic_fetch_or_explicit(bits, bit, memory_order_release) & bit)
		return; /* already pending: one report per event kind */
	sr_fdcache_signal(&ctx->dc, async_fd_id);
}

static bool take_bit(_Atomic uint32_t *bits, int *ev)
{
	uint32_t v = atomic_load_explicit(bits, memory_order_acquire);

	while (v) {
		int b = __builtin_ctz(v);

		if (atomic_compare_exchange_weak(bits, &v, v & ~(1u << b))) {
			*ev = b;
			return true;
		}
	}
	return false;
}

/* An event handed out, which the object's destroy waits to see acked (as
 * rdma-core's, with the count the kernel returns).  Under ctx->lock: a
 * destroy takes the object off the lists under it before it waits. */
static void count(pthread_mutex_t *m, uint32_t *reported)
{
	pthread_mutex_lock(m);
	(*reported)++;
	pthread_mutex_unlock(m);
}

static bool find_event(struct sr_context *ctx, struct ibv_async_event *event)
{
	bool found = false;
	int ev;

	pthread_mutex_lock(&ctx->lock);
	for (struct sr_list *l = ctx->qps.next; !found && l != &ctx->qps; l = l->next) {
		struct sr_qp *qp = container_of(l, struct sr_qp, link);

		if (take_bit(&qp->shm->async_events, &ev)) {
			event->element.qp = &qp->qpx.qp_base;
			count(&qp->qpx.qp_base.mutex, &qp->async_reported);
			found = true;
		}
	}
	for (struct sr_list *l = ctx->srqs.next; !found && l != &ctx->srqs; l = l->next) {
		struct sr_srq *srq = container_of(l, struct sr_srq, link);

		if (take_bit(&srq->shm->async_events, &ev)) {
			event->element.srq = &srq->srq;
			count(&srq->srq.mutex, &srq->async_reported);
			found = true;
		}
	}
	for (struct sr_list *l = ctx->cqs.next; !found && l != &ctx->cqs; l = l->next) {
		struct sr_cq *cq = container_of(l, struct sr_cq, link);

		if (take_bit(&cq->shm->async_events, &ev)) {
			event->element.cq = ibv_cq_ex_to_cq(&cq->cq);
			count(&cq->cq.mutex, &cq->async_reported);
			found = true;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	if (found)
		event->event_type = ev;
	return found;
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	uint64_t v;

	if (!context || !event) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		ssize_t n = read(context->async_fd, &v, sizeof(v));

		if (n != sizeof(v))
			return -1; /* EAGAIN when non-blocking, EINTR on a signal (as rdma-core) */
		if (find_event(to_sctx(context), event))
			return 0;
		/* the object went away before we looked: wait for the next */
	}
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m = NULL;
	pthread_cond_t *c = NULL;
	uint32_t *cnt = NULL;

	if (!event)
		return;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		m = &event->element.cq->mutex;
		c = &event->element.cq->cond;
		cnt = &event->element.cq->async_events_completed;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		m = &event->element.qp->mutex;
		c = &event->element.qp->cond;
		cnt = &event->element.qp->events_completed;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		m = &event->element.srq->mutex;
		c = &event->element.srq->cond;
		cnt = &event->element.srq->events_completed;
		break;
	default:
		return;
	}
	pthread_mutex_lock(m);
	(*cnt)++;
	pthread_cond_signal(c);
	pthread_mutex_unlock(m);
}
