/*
 * Posting work: ibv_post_send / ibv_post_recv / ibv_post_srq_recv, the
 * new-style ibv_wr_* builder (qp_ex), ibv_bind_mw, and flushing on error.
 * post_send writes WQEs into the SQ ring in the arena and runs the executor
 * right away (exec.c); post_recv writes receive WQEs and wakes a sender that
 * waits on them.  Neither makes a system call.  Errors that the verbs man
 * pages assign to posting (bad opcode for the transport, too many SGEs,
 * inline too long, queue full, QP not ready) return an errno and *bad_wr;
 * everything else completes with a status.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/prefetch.h"
#include "core/shmlock.h"
#include "core/doorbell.h"
#include "datapath/wire_rx.h"
#include "datapath/wire_tx.h"
#include "shm/epoch.h"
#include "shm/fdcache.h"
#include "shm/exec.h"
#include "shm/qp_err.h"
#include "datapath/datapath.h"
#include "verbs/objects.h"

static bool opcode_ok(enum ibv_qp_type t, enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return t != IBV_QPT_XRC_RECV; /* an XRC target QP has no send queue */
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_XRC_SEND;
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
	case IBV_WR_SEND_WITH_INV:
		/* A14: XRC has them too, as mlx5 posts them */
		return t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_XRC_SEND;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
	default:
		return false;
	}
}

static bool is_data_op(uint8_t op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_SEND_WITH_INV ||
	       op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* Starts a WQE at SQ index `pos`, or NULL if the SQ is full. */
static struct sr_send_wqe *wqe_at(struct sr_context *ctx, struct sr_qp *qp, uint32_t pos)
{
	struct sr_qp_shm *s = qp->shm;
	/* pairs with the executor's store-release of tail */
	uint32_t tail = atomic_load_explicit(&s->sq.tail, memory_order_acquire);
	struct sr_send_wqe *w;

	if (pos - tail >= s->sq.wqe_cnt)
		return NULL;
	w = sr_sq_wqe(ctx->dc.arena, s, pos);
	/* only what every opcode's executor may read; the rest is set by the
	 * opcode that uses it (no 128-byte memset per work request) */
	w->flags = 0;
	w->num_sge = 0;
	w->imm_or_inv = 0;
	w->total_len = 0;
	return w;
}

static uint8_t wqe_flags(unsigned int send_flags)
{
	uint8_t f = 0;

	if (send_flags & IBV_SEND_SIGNALED)
		f |= SR_WQE_SIGNALED;
	if (send_flags & IBV_SEND_SOLICITED)
		f |= SR_WQE_SOLICITED;
	if (send_flags & IBV_SEND_FENCE)
		f |= SR_WQE_FENCE;
	return f;
}

static void set_ud(struct sr_context *ctx, struct sr_send_wqe *w, struct ibv_ah *ibah, uint32_t qpn,
		   uint32_t qkey)
{
	struct sr_ah *ah = to_sah(ibah);
	uint8_t idx = ah->attr.is_global ? ah->attr.grh.sgid_index : 0;

	w->ud_qpn = qpn;
	w->ud_qkey = qkey;
	w->ud_ah_global = ah->attr.is_global;
	if (ah->attr.is_global)
		memcpy(w->ud_dgid, ah->attr.grh.dgid.raw, 16);
	else
		memset(w->ud_dgid, 0, 16);
	if (idx < ctx->dc.dev.gid_cnt)
		memcpy(w->ud_sgid, ctx->dc.dev.gids[idx].gid, 16);
	else
		memset(w->ud_sgid, 0, 16);
}

static uint32_t ud_max_msg(struct sr_context *ctx)
{
	return 128u << ctx->dc.dev.active_mtu;
}

/* An atomic's local buffer holds the 64-bit original value (IBTA 9.4.5):
 * its gather/scatter list must add up to 8 bytes, or the post fails with
 * EINVAL, as rxe's validate_send_wr refuses it (the one check of every
 * post path: ibv_post_send, its direct path, ibv_wr_set_sge*). */
static bool atomic_len_ok(enum ibv_wr_opcode op, uint64_t len)
{
	return (op != IBV_WR_ATOMIC_CMP_AND_SWP && op != IBV_WR_ATOMIC_FETCH_AND_ADD) || len == 8;
}

/* Fills one WQE from an ibv_send_wr; returns 0 or an errno. */
static int fill_wqe(struct sr_context *ctx, struct sr_qp *qp, struct sr_send_wqe *w,
		    const struct ibv_send_wr *wr, bool mw1_ok)
{
	struct sr_qp_shm *s = qp->shm;
	uint64_t total = 0;

	if (!opcode_ok(qp->qpx.qp_base.qp_type, wr->opcode) || wr->num_sge < 0)
		return EINVAL;
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->flags = wqe_flags(wr->send_flags);
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		w->imm_or_inv = wr->imm_data;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		w->imm_or_inv = wr->invalidate_rkey;
		break;
	default:
		break;
	}
	if (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_READ) {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	} else if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		   wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else if (wr->opcode == IBV_WR_BIND_MW) {
		if (!wr->bind_mw.mw || (wr->bind_mw.mw->type != IBV_MW_TYPE_2 && !mw1_ok))
			return EINVAL; /* type-1 windows bind through ibv_bind_mw() */
		w->bind_mw_key = wr->bind_mw.rkey;
		w->bind_mr_key = wr->bind_mw.bind_info.mr ? wr->bind_mw.bind_info.mr->lkey : 0;
		w->bind_addr = wr->bind_mw.bind_info.addr;
		w->bind_length = wr->bind_mw.bind_info.length;
		w->bind_access = wr->bind_mw.bind_info.mw_access_flags;
	}
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		if (!wr->wr.ud.ah)
			return EINVAL;
		set_ud(ctx, w, wr->wr.ud.ah, wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey);
	}
	/* XRC: the SRQ at the target, carried in the XRCETH */
	w->xrc_srqn = qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND ? wr->qp_type.xrc.remote_srqn : 0;
	if ((wr->send_flags & IBV_SEND_INLINE) && is_data_op(wr->opcode)) {
		char *dst = (char *)(w + 1);

		for (int i = 0; i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (total > s->sq.max_inline)
			return EINVAL;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(dst, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			dst += wr->sg_list[i].length;
		}
		w->flags |= SR_WQE_INLINE;
	} else if (wr->opcode != IBV_WR_BIND_MW && wr->opcode != IBV_WR_LOCAL_INV) {
		struct sr_sge_shm *sge = (struct sr_sge_shm *)(w + 1);

		if ((uint32_t)wr->num_sge > s->sq.max_sge)
			return EINVAL;
		for (int i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
			total += wr->sg_list[i].length;
		}
		w->num_sge = wr->num_sge;
	}
	if (total > (1ull << 31) || !atomic_len_ok(wr->opcode, total))
		return EINVAL;
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD && total > ud_max_msg(ctx))
		return EINVAL; /* a datagram is at most one path MTU */
	w->total_len = total;
	return 0;
}

static bool can_post_send(uint32_t state)
{
	return state == IBV_QPS_RTS || state == IBV_QPS_SQD || state == IBV_QPS_SQE ||
	       state == IBV_QPS_ERR;
}

/* A QP whose peer is on another host: the host's RoCEv2 engine runs its
 * SQ.  Rung after sq_lock is released (the first signal may ask the daemon
 * for the engine's eventfd). */
static void __attribute__((noinline)) wire_kick(struct sr_context *ctx, struct sr_qp_shm *s)
{
	struct sr_arena_hdr *h = ctx->dc.arena;

	if (sr_db_ring(h, s) && h->engine_fd_id)
		sr_fdcache_signal(&ctx->dc, h->engine_fd_id);
}

static void run_sq(struct sr_context *ctx, struct sr_qp_shm *s)
{
	if (atomic_load_explicit(&s->state, memory_order_acquire) == IBV_QPS_ERR) {
		sr_sq_flush_locked(ctx->dc.arena, s, sr_signal_fd, ctx);
		return;
	}
	if (s->wire)
		return; /* the RoCEv2 engine runs it: wire_kick after sq_lock */
	/* Waiting for a receive at the responder: its post_recv runs us (the
	 * waiting flag), and poll_cq or the daemon enforce the deadline, so
	 * retrying here would only spin on the responder's RQ lock. */
	if (atomic_load_explicit(&s->stalled, memory_order_relaxed) == SR_STALL_RNR)
		return;
	sr_exec_sq_locked(&ctx->dc, s);
}

/* Eligible for the executor's direct path (exec.h): a lone RDMA WRITE, SEND,
 * RDMA READ or atomic with one gather/scatter entry on a connected QP in
 * RTS with an idle send queue, and nothing fill_wqe would refuse. */
static bool direct_ok(const struct sr_qp_shm *s, uint32_t state, uint32_t head,
		      const struct ibv_send_wr *wr)
{
	if (wr->next || wr->num_sge != 1 || state != IBV_QPS_RTS || s->exec_pos != head ||
	    s->wire || atomic_load_explicit(&s->stalled, memory_order_relaxed) ||
	    wr->sg_list[0].length > (1u << 31))
		return false;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_SEND:
		return (s->type == IBV_QPT_RC || s->type == IBV_QPT_UC) &&
		       (!(wr->send_flags & IBV_SEND_INLINE) ||
			wr->sg_list[0].length <= s->sq.max_inline);
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (!atomic_len_ok(wr->opcode, wr->sg_list[0].length))
			return false;
		/* fall through */
	case IBV_WR_RDMA_READ:
		return s->type == IBV_QPT_RC; /* IBTA: no READ or atomics on UC */
	default:
		return false;
	}
}

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr,
		     bool mw1_ok)
{
	struct sr_context *ctx = to_sctx(ibqp->context);
	struct sr_qp *qp = to_sqp(ibqp);
	struct sr_qp_shm *s = qp->shm;
	struct sr_exec_pending pending;
	uint32_t head, state;
	int ret = 0;

	/* from here to the end we may look up other processes' objects */
	sr_epoch_enter_locking(ctx->dc.arena);
	sr_shm_lock(&s->sq_lock);
	state = atomic_load_explicit(&s->state, memory_order_acquire);
	if (!can_post_send(state)) {
		ret = EINVAL;
		*bad_wr = wr;
		goto out;
	}
	head = atomic_load_explicit(&s->sq.head, memory_order_relaxed);
	if (direct_ok(s, state, head, wr)) {
		if (sr_exec_direct(&ctx->dc, s, wr, &pending))
			goto out;
		/* it did not complete: it becomes the SQ head, and the executor
		 * carries on from the outcome it had (a wait or an error) */
		ret = fill_wqe(ctx, qp, wqe_at(ctx, qp, head), wr, mw1_ok);
		if (ret) { /* cannot happen: direct_ok checked what fill_wqe checks */
			*bad_wr = wr;
			goto out;
		}
		atomic_store_explicit(&s->sq.head, head + 1, memory_order_release);
		sr_exec_direct_queued(&ctx->dc, s, &pending);
		goto out;
	}
	for (; wr; wr = wr->next) {
		struct sr_send_wqe *w = wqe_at(ctx, qp, head);

		if (!w) {
			ret = ENOMEM;
			break;
		}
		ret = fill_wqe(ctx, qp, w, wr, mw1_ok);
		if (ret)
			break;
		head++;
		/* publish the WQE: pairs with the executor's load-acquire of head */
		atomic_store_explicit(&s->sq.head, head, memory_order_release);
	}
	if (ret)
		*bad_wr = wr;
	run_sq(ctx, s);
out:
	sr_shm_unlock(&s->sq_lock);
	if (s->wire && !sr_wire_post(ctx, s))
		wire_kick(ctx, s);
	if (__builtin_expect(
		atomic_load_explicit(&s->stalled, memory_order_relaxed) == SR_STALL_RNR, 0))
		sr_exec_recheck(&ctx->dc, s);
	sr_epoch_exit();
	return ret;
}

int sr_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	return post_send(ibqp, wr, bad_wr, false);
}

/* How many slots ahead post_recv prefetches (SR_WQ_FREED_BY_POLL rings) */
#define SR_RQ_PREFETCH_AHEAD 8u

/* Writes receive WQEs into a ring; caller holds its prod_lock. */
static int post_recv_ring(struct sr_context *ctx, struct sr_wq *wq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	uint32_t head = atomic_load_explicit(&wq->head, memory_order_relaxed);
	int ret = 0;

	for (; wr; wr = wr->next) {
		struct sr_recv_wqe *w;
		struct sr_sge_shm *sge;

		if ((wq->flags & SR_WQ_FREED_BY_POLL) &&
		    head - atomic_load_explicit(&wq->polled, memory_order_relaxed) >= wq->max_wr) {
			ret = ENOMEM; /* max_wr receives whose completions are not polled */
			break;
		}
		/* the slot's previous WQE must be consumed: always so for a ring
		 * freed by poll, which has twice max_wr slots */
		if (head - wq->tail_cache >= wq->wqe_cnt) {
			/* looks full: read the consumer's line only now */
			wq->tail_cache = atomic_load_explicit(&wq->tail, memory_order_acquire);
			if (head - wq->tail_cache >= wq->wqe_cnt) {
				ret = ENOMEM;
				break;
			}
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge) {
			ret = EINVAL;
			break;
		}
		w = sr_rq_wqe(ctx->dc.arena, wq, head);
		sge = (struct sr_sge_shm *)(w + 1);
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		for (int i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
		}
		head++;
		/* publish: pairs with the executor's load-acquire of seq (rq_peek) */
		atomic_store_explicit(&w->seq, head, memory_order_release);
		atomic_store_explicit(&wq->head, head, memory_order_release); /* flush, status */
	}
	/* A ring freed by poll: the slot a few posts ahead held a WQE whose
	 * completion was polled (it is at least max_wr behind), so nobody reads
	 * it; take ownership now, off the critical path, instead of waiting
	 * for the invalidation when it is written. */
	if (wq->flags & SR_WQ_FREED_BY_POLL)
		sr_prefetchw(
		    sr_rq_wqe(ctx->dc.arena, wq, head + SR_RQ_PREFETCH_AHEAD % wq->max_wr));
	if (ret)
		*bad_wr = wr;
	return ret;
}

/* After publishing receive WQEs (prod_lock released): true if a sender was
 * waiting for one and the caller must run it.  The fence pairs with the
 * consumer's in rq_wait (exec.c): a consumer that looked before our WQEs
 * were visible had raised the flag before its own second look. */
static bool take_waiting(struct sr_wq *wq)
{
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&wq->waiting, memory_order_relaxed) &&
	       atomic_exchange_explicit(&wq->waiting, 0, memory_order_acq_rel);
}

int sr_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct sr_context *ctx = to_sctx(ibqp->context);
	struct sr_qp_shm *s = to_sqp(ibqp)->shm;
	uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
	int ret;

	if (s->srqn || state == IBV_QPS_RESET || s->type == IBV_QPT_XRC_SEND ||
	    s->type == IBV_QPT_XRC_RECV) {
		/* receives of an SRQ-attached QP go to the SRQ; XRC QPs have no
		 * receive queue (their SRQs do) */
		*bad_wr = wr;
		return EINVAL;
	}
	sr_shm_lock(&s->rq.prod_lock);
	ret = post_recv_ring(ctx, &s->rq, wr, bad_wr);
	sr_shm_unlock(&s->rq.prod_lock);
	if (s->wire)
		sr_wire_rx_posted(ctx);
	if (state == IBV_QPS_ERR) {
		sr_rq_flush(ctx->dc.arena, s, sr_signal_fd, ctx);
	} else if (take_waiting(&s->rq) && !s->wire) {
		/* a peer on another host retries after its RNR timer; its QPN
		 * names no QP here (it may name another one of ours) */
		sr_epoch_enter(ctx->dc.arena);
		sr_exec_kick_try(&ctx->dc, sr_exec_qp_lookup(&ctx->dc, s->dest_qpn));
		sr_epoch_exit();
	}
	return ret;
}

int sr_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct sr_context *ctx = to_sctx(ibsrq->context);
	struct sr_srq *srq = to_ssrq(ibsrq);
	struct sr_srq_shm *s = srq->shm;
	int ret;

	sr_shm_lock(&s->rq.prod_lock);
	ret = post_recv_ring(ctx, &s->rq, wr, bad_wr);
	sr_shm_unlock(&s->rq.prod_lock);
	if (take_waiting(&s->rq)) {
		/* wake the senders of every RC QP fed by this SRQ, however many: a
		 * fixed cap (it was 64) left the senders of the other QPs waiting
		 * for good under rnr_retry 7 (behaviour test srq_many_waiting) */
		uint32_t local[64], *peers = local;
		unsigned n = 0, cap = 64;

		pthread_mutex_lock(&ctx->lock);
		for (struct sr_list *l = ctx->qps.next; l != &ctx->qps; l = l->next) {
			struct sr_qp *q = container_of(l, struct sr_qp, link);

			/* an XRC SRQ is fed by every XRC_RECV QP of its domain; a
			 * wire QP's peer is on another host (its engine retries
			 * after the RNR timer), its dest_qpn no QP of ours */
			if (s->xrcd ? q->shm->type != IBV_QPT_XRC_RECV || q->shm->xrcd != s->xrcd
				    : q->qpx.qp_base.srq != ibsrq || q->shm->type != IBV_QPT_RC)
				continue;
			if (q->shm->wire)
				continue;
			if (n == cap) {
				uint32_t *more = malloc(2 * cap * sizeof(*more));

				if (!more) {
					/* the next post wakes the rest */
					atomic_store(&s->rq.waiting, 1);
					break;
				}
				memcpy(more, peers, n * sizeof(*more));
				if (peers != local)
					free(peers);
				peers = more;
				cap *= 2;
			}
			peers[n++] = q->shm->dest_qpn;
		}
		pthread_mutex_unlock(&ctx->lock);
		sr_epoch_enter(ctx->dc.arena);
		for (unsigned i = 0; i < n; i++)
			sr_exec_kick_try(&ctx->dc, sr_exec_qp_lookup(&ctx->dc, peers[i]));
		/* XRC: the sender that waited may talk to a target QP of another
		 * process of the domain; it left its number here */
		if (s->xrcd) {
			uint32_t w = atomic_exchange(&s->waiter_qpn, 0);

			if (w)
				sr_exec_kick_try(&ctx->dc, sr_exec_qp_lookup(&ctx->dc, w));
		}
		sr_epoch_exit();
		if (peers != local)
			free(peers);
	}
	return ret;
}

void sr_qp_flush(struct sr_context *ctx, struct sr_qp *qp)
{
	sr_shm_lock(&qp->shm->sq_lock);
	sr_sq_flush_locked(ctx->dc.arena, qp->shm, sr_signal_fd, ctx);
	sr_shm_unlock(&qp->shm->sq_lock);
	sr_rq_flush(ctx->dc.arena, qp->shm, sr_signal_fd, ctx);
}

int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr, *bad;
	uint32_t rkey;
	int ret;

	if (!qp || !mw || !bind || mw->type != IBV_MW_TYPE_1 || mw->pd != qp->pd ||
	    (bind->bind_info.length && !bind->bind_info.mr))
		return EINVAL;
	rkey = ibv_inc_rkey(mw->rkey);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = bind->bind_info;
	ret = post_send(qp, &wr, &bad, true);
	if (!ret)
		mw->rkey = rkey;
	return ret;
}

/* ---- ibv_wr_* (qp_ex) ---- */

static struct sr_qp *qpx_to_sqp(struct ibv_qp_ex *q)
{
	return container_of(q, struct sr_qp, qpx);
}

static struct sr_send_wqe *wr_new(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct sr_qp *qp = qpx_to_sqp(q);
	struct sr_context *ctx = to_sctx(q->qp_base.context);
	struct sr_send_wqe *w;

	qp->wr_cur = NULL;
	if (qp->wr_err)
		return NULL;
	if (!opcode_ok(q->qp_base.qp_type, op)) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	w = wqe_at(ctx, qp, qp->wr_start_head);
	if (!w) {
		qp->wr_err = ENOMEM;
		return NULL;
	}
	qp->wr_start_head++;
	w->wr_id = q->wr_id;
	w->opcode = op;
	w->flags = wqe_flags(q->wr_flags);
	w->xrc_srqn = 0; /* XRC_SEND: ibv_wr_set_xrc_srqn */
	qp->wr_cur = w;
	return w;
}

static void wr_start(struct ibv_qp_ex *q)
{
	struct sr_qp *qp = qpx_to_sqp(q);

	sr_shm_lock(&qp->shm->sq_lock);
	qp->wr_err =
	    can_post_send(atomic_load_explicit(&qp->shm->state, memory_order_acquire)) ? 0 : EINVAL;
	qp->wr_start_head = atomic_load_explicit(&qp->shm->sq.head, memory_order_relaxed);
	qp->wr_cur = NULL;
}

static int wr_complete(struct ibv_qp_ex *q)
{
	struct sr_qp *qp = qpx_to_sqp(q);
	int ret = qp->wr_err;

	void *arena = to_sctx(q->qp_base.context)->dc.arena;

	if (!ret)
		atomic_store_explicit(&qp->shm->sq.head, qp->wr_start_head, memory_order_release);
	sr_epoch_enter(arena);
	run_sq(to_sctx(q->qp_base.context), qp->shm);
	sr_epoch_exit();
	sr_shm_unlock(&qp->shm->sq_lock);
	if (qp->shm->wire) {
		bool all;

		sr_epoch_enter(arena);
		all = sr_wire_post(to_sctx(q->qp_base.context), qp->shm);
		sr_epoch_exit();
		if (!all)
			wire_kick(to_sctx(q->qp_base.context), qp->shm);
	}
	return ret;
}

static void wr_abort(struct ibv_qp_ex *q)
{
	sr_shm_unlock(&qpx_to_sqp(q)->shm->sq_lock);
}

static void wr_send(struct ibv_qp_ex *q)
{
	wr_new(q, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct sr_send_wqe *w = wr_new(q, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_or_inv = imm;
}

static void wr_send_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct sr_send_wqe *w = wr_new(q, IBV_WR_SEND_WITH_INV);

	if (w)
		w->imm_or_inv = rkey;
}

static void wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	qpx_to_sqp(q)->wr_err = EOPNOTSUPP;
}

static void wr_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		    __be32 imm)
{
	struct sr_send_wqe *w = wr_new(q, op);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->imm_or_inv = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, __be32 imm)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t cmp,
			      uint64_t swap)
{
	struct sr_send_wqe *w = wr_new(q, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = cmp;
		w->swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t add)
{
	struct sr_send_wqe *w = wr_new(q, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = add;
	}
}

static void wr_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, const void *val)
{
	qpx_to_sqp(q)->wr_err = EOPNOTSUPP;
}

static void wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct sr_send_wqe *w;

	if (!mw || mw->type != IBV_MW_TYPE_2 || !info) {
		qpx_to_sqp(q)->wr_err = EINVAL;
		return;
	}
	w = wr_new(q, IBV_WR_BIND_MW);
	if (w) {
		w->bind_mw_key = rkey;
		w->bind_mr_key = info->mr ? info->mr->lkey : 0;
		w->bind_addr = info->addr;
		w->bind_length = info->length;
		w->bind_access = info->mw_access_flags;
	}
}

static void wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct sr_send_wqe *w = wr_new(q, IBV_WR_LOCAL_INV);

	if (w)
		w->imm_or_inv = rkey;
}

static void wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct sr_qp *qp = qpx_to_sqp(q);

	if (qp->wr_cur && ah)
		set_ud(to_sctx(q->qp_base.context), qp->wr_cur, ah, qpn, qkey);
	else if (!qp->wr_err)
		qp->wr_err = EINVAL;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn)
{
	struct sr_qp *qp = qpx_to_sqp(q);

	if (qp->wr_cur && q->qp_base.qp_type == IBV_QPT_XRC_SEND)
		qp->wr_cur->xrc_srqn = srqn;
	else if (!qp->wr_err)
		qp->wr_err = EINVAL;
}

static void wr_set_sge_list(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *sg)
{
	struct sr_qp *qp = qpx_to_sqp(q);
	struct sr_send_wqe *w = qp->wr_cur;
	struct sr_sge_shm *sge;
	uint64_t total = 0;

	if (!w) {
		if (!qp->wr_err)
			qp->wr_err = EINVAL;
		return;
	}
	if (n > qp->shm->sq.max_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	sge = (struct sr_sge_shm *)(w + 1);
	for (size_t i = 0; i < n; i++) {
		sge[i].addr = sg[i].addr;
		sge[i].length = sg[i].length;
		sge[i].lkey = sg[i].lkey;
		total += sg[i].length;
	}
	w->num_sge = n;
	w->total_len = total;
	if (!atomic_len_ok(w->opcode, total))
		qp->wr_err = EINVAL;
}

static void wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge s = {.addr = addr, .length = length, .lkey = lkey};

	wr_set_sge_list(q, 1, &s);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n, const struct ibv_data_buf *b)
{
	struct sr_qp *qp = qpx_to_sqp(q);
	struct sr_send_wqe *w = qp->wr_cur;
	uint64_t total = 0;
	char *dst;

	if (!w) {
		if (!qp->wr_err)
			qp->wr_err = EINVAL;
		return;
	}
	for (size_t i = 0; i < n; i++)
		total += b[i].length;
	if (total > qp->shm->sq.max_inline) {
		qp->wr_err = EINVAL;
		return;
	}
	dst = (char *)(w + 1);
	for (size_t i = 0; i < n; i++) {
		memcpy(dst, b[i].addr, b[i].length);
		dst += b[i].length;
	}
	w->flags |= SR_WQE_INLINE;
	w->total_len = total;
}

static void wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};

	wr_set_inline_data_list(q, 1, &b);
}

void sr_qp_ex_init(struct sr_qp *qp)
{
	struct ibv_qp_ex *q = &qp->qpx;

	q->comp_mask = 0;
	q->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	q->wr_atomic_fetch_add = wr_atomic_fetch_add;
	q->wr_bind_mw = wr_bind_mw;
	q->wr_local_inv = wr_local_inv;
	q->wr_rdma_read = wr_rdma_read;
	q->wr_rdma_write = wr_rdma_write;
	q->wr_rdma_write_imm = wr_rdma_write_imm;
	q->wr_send = wr_send;
	q->wr_send_imm = wr_send_imm;
	q->wr_send_inv = wr_send_inv;
	q->wr_send_tso = wr_send_tso;
	q->wr_set_ud_addr = wr_set_ud_addr;
	q->wr_set_xrc_srqn = wr_set_xrc_srqn;
	q->wr_set_inline_data = wr_set_inline_data;
	q->wr_set_inline_data_list = wr_set_inline_data_list;
	q->wr_set_sge = wr_set_sge;
	q->wr_set_sge_list = wr_set_sge_list;
	q->wr_start = wr_start;
	q->wr_complete = wr_complete;
	q->wr_abort = wr_abort;
	q->wr_atomic_write = wr_atomic_write;
}
