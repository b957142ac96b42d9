/*
 * Completion queues and completion channels (control side).  A channel is
 * an eventfd in semaphore mode registered with the daemon, so whichever
 * process produces a completion for an armed CQ can signal it; each read
 * takes one event, and the CQ it belongs to is the one whose shared `events`
 * counter is non-zero.  The fd is a real pollable fd and honours O_NONBLOCK,
 * which UCX and libfabric rely on.  Polling lives in the data path
 * (src/datapath/cq_poll.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shm/fdcache.h"
#include "verbs/internal.h"

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct sr_comp_channel *ch;
	int ret;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		ret = -errno;
		goto err;
	}
	ret = sr_ctx_reg_fd(&to_sctx(context)->dc, ch->ch.fd, SR_FD_EVENT, &ch->fd_id);
	if (ret) {
		close(ch->ch.fd);
		goto err;
	}
	sr_fdcache_put_own(ch->fd_id, ch->ch.fd);
	ch->ch.context = context;
	ch->ctx = to_sctx(context);
	return &ch->ch;
err:
	free(ch);
	errno = -ret;
	return NULL;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sr_comp_channel *ch;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!channel)
		return EINVAL;
	ch = to_schannel(channel);
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_CLOSE_FD;
	req.handle = ch->fd_id;
	ret = sr_ctx_request(&ch->ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret)
		return -ret; /* EBUSY while CQs use it */
	sr_fdcache_forget(ch->fd_id);
	close(channel->fd);
	free(ch);
	return 0;
}

static struct sr_cq *cq_create(struct ibv_context *context, int cqe, void *cq_context,
			       struct ibv_comp_channel *channel, uint32_t comp_vector,
			       uint64_t wc_flags)
{
	struct sr_context *ctx = to_sctx(context);
	struct sr_req req;
	struct sr_rep rep;
	struct sr_cq *cq;
	int ret;

	if (cqe < 1 || cqe > SR_MAX_CQE || comp_vector >= SR_NUM_COMP_VECTORS ||
	    (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_CREATE_CQ;
	req.u.cq.cqe = cqe;
	req.u.cq.channel_fd_id = channel ? to_schannel(channel)->fd_id : 0;
	req.u.cq.async_fd_id = ctx->async_fd_id;
	req.u.cq.user_handle = (uintptr_t)cq;
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) {
		free(cq);
		errno = -ret;
		return NULL;
	}
	cq->handle = rep.handle;
	cq->shm = sr_arena_ptr(ctx->dc.arena, rep.u.cq.off);
	cq->wc_flags = wc_flags;
	if (wc_flags &
	    (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK))
		cq->shm->flags |= SR_CQ_TIMESTAMPS; /* before any QP can use it */
	sr_shm_lock_init(&cq->poll_lock);
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.handle = rep.handle;
	cq->cq.cqe = rep.u.cq.max_cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	sr_cq_ex_init(cq);
	if (channel)
		__atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&ctx->lock);
	sr_list_add(&ctx->cqs, &cq->link);
	pthread_mutex_unlock(&ctx->lock);
	return cq;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct sr_cq *cq;

	if (!context || comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(context, cqe, cq_context, channel, comp_vector, 0);
	return cq ? ibv_cq_ex_to_cq(&cq->cq) : NULL;
}

#define SR_WC_FLAGS_SUPPORTED                                                                      \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |                    \
	 IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |                         \
	 IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                     \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	struct sr_cq *cq;

	if (!context || !attr) {
		errno = EINVAL;
		return NULL;
	}
	/* EOPNOTSUPP, not EINVAL, for what we lack: UCX then falls back to ibv_create_cq */
	if (attr->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS ||
	    attr->wc_flags & ~(uint64_t)SR_WC_FLAGS_SUPPORTED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags &
	     ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = cq_create(context, attr->cqe, attr->cq_context, attr->channel, attr->comp_vector,
		       attr->wc_flags);
	return cq ? &cq->cq : NULL;
}

int sr_cq_modify(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr)
{
	return EOPNOTSUPP; /* no completion moderation */
}

int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sr_cq *cq;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!ibcq || cqe < 1 || cqe > SR_MAX_CQE)
		return EINVAL;
	cq = to_scq(ibcq);
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_RESIZE_CQ;
	req.handle = cq->handle;
	req.u.cq.cqe = cqe;
	sr_shm_lock(&cq->poll_lock);
	ret = sr_ctx_request(&to_sctx(ibcq->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (!ret)
		ibcq->cqe = rep.u.cq.max_cqe;
	sr_shm_unlock(&cq->poll_lock);
	return -ret;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sr_context *ctx;
	struct sr_cq *cq;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!ibcq)
		return EINVAL;
	cq = to_scq(ibcq);
	ctx = to_sctx(ibcq->context);
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_DESTROY_CQ;
	req.handle = cq->handle;
	/* off the context's lists first: whoever walks them (async events,
	 * poll_cq's retries) must not find an object whose memory the daemon
	 * may hand out again */
	pthread_mutex_lock(&ctx->lock);
	sr_list_del(&cq->link);
	pthread_mutex_unlock(&ctx->lock);
	ret = sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) { /* EBUSY while QPs use it */
		pthread_mutex_lock(&ctx->lock);
		sr_list_add(&ctx->cqs, &cq->link);
		pthread_mutex_unlock(&ctx->lock);
		return -ret;
	}
	/* as rdma-core's ibv_cmd_destroy_cq: the kernel first (EBUSY while a
	 * QP uses the CQ, which stays whole: fio destroys its CQ before its
	 * QP), and only a CQ that is gone waits for the events handed out of
	 * it to be acknowledged */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != cq->events_reported ||
	       ibcq->async_events_completed != cq->async_reported)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	if (ibcq->channel)
		__atomic_sub_fetch(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
	free(cq);
	return 0;
}

/* Takes one pending event of a CQ bound to this channel. */
static struct sr_cq *take_event(struct sr_context *ctx, struct ibv_comp_channel *channel)
{
	struct sr_cq *found = NULL;

	pthread_mutex_lock(&ctx->lock);
	for (struct sr_list *l = ctx->cqs.next; l != &ctx->cqs; l = l->next) {
		struct sr_cq *cq = container_of(l, struct sr_cq, link);
		uint32_t ev;

		if (cq->cq.channel != channel)
			continue;
		ev = atomic_load_explicit(&cq->shm->events, memory_order_acquire);
		while (ev && !atomic_compare_exchange_weak(&cq->shm->events, &ev, ev - 1))
			;
		if (ev) {
			found = cq;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return found;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct sr_cq *scq;
	uint64_t v;

	if (!channel || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		ssize_t n = read(channel->fd, &v, sizeof(v));

		if (n != sizeof(v))
			return -1; /* EAGAIN when non-blocking; EINTR on a signal, as rdma-core:
				    * programs (qperf) end a test with an alarm that must
				    * interrupt the wait */
		scq = take_event(to_schannel(channel)->ctx, channel);
		if (scq)
			break;
		/* an event of a CQ destroyed meanwhile: wait for the next one */
	}
	pthread_mutex_lock(&scq->cq.mutex);
	scq->events_reported++;
	pthread_mutex_unlock(&scq->cq.mutex);
	*cq = ibv_cq_ex_to_cq(&scq->cq);
	*cq_context = scq->cq.cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!cq)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
