/*
 * The same-host executor: carries out a QP's send-queue WQEs directly
 * against the responder's memory and queues, in the calling thread.  The
 * initiator runs it from post_send; the responder's process runs it from
 * post_recv when a sender waits for a receive (RNR); so progress never needs
 * the other side's CPU.  One copy: payload goes from the source buffer
 * straight into the destination buffer (both mapped here).
 *
 * Each WQE executes whole or not at all.  Outcomes follow the IBTA
 * requester/responder rules: a missing receive is an RNR NAK (RC) or a
 * silent drop (UC, UD); key, bounds, access and PD violations are remote
 * access errors (RC; dropped on UC); a message longer than the receive
 * buffer is a local length error at the responder and an invalid-request
 * NAK at the requester; a responder that is absent or not ready never ACKs.
 *
 * Locks, always in this order: initiator sq_lock -> responder rq_lock (or
 * SRQ lock) -> CQ locks.  Nobody takes an sq_lock while holding an rq_lock.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/copy.h"
#include "core/env.h"
#include "core/log.h"
#include "core/idalloc.h"
#include "core/qp_state.h"
#include "core/seqlock.h"
#include "core/shmlock.h"
#include "core/doorbell.h"
#include "shm/exec.h"
#include "shm/fdcache.h"
#include "shm/mrmap.h"
#include "shm/qp_err.h"
#include "shm/responder.h"
#include "wire/gid.h"
#include "wire/grh.h"
#include "wire/udp.h"
#include "shm/devctx.h"

#define SR_GRH_LEN 40
/* deliver(): messages up to this size reserve their CQE before the copy */
#define SR_EARLY_CQE_MAX 4096

enum xres {
	X_DONE,
	X_STALL_RNR,
	X_STALL_NOACK,
	X_ERR,
};

struct xfer {
	struct sr_devctx *ctx;
	struct sr_qp_shm *qp; /* initiator */
	struct sr_send_wqe *w;
	enum ibv_wc_status status; /* requester completion on X_ERR */
	uint32_t byte_len;
	struct sr_qp_shm *responder_err; /* responder QP to move to ERR after unlocking */
	struct sr_qp_shm *stall_target;	 /* RNR: responder whose RQ we wait on */
};

/* The events this thread holds back (sr_exec_signals_hold): the fd ids,
 * as many as were raised (a completion channel is a semaphore eventfd: one
 * write per event, each read takes one), all of one context (another's go
 * at once).  Small: libibverbs' static TLS must stay small, or a dlopen of
 * it fails (core/thread_obj.h). */
#define HELD_MAX 14
static __thread struct {
	bool on;
	uint8_t n;
	struct sr_devctx *ctx;
	uint32_t fd_id[HELD_MAX];
} held;

void sr_signal_fd(void *arg, uint32_t fd_id)
{
	sr_fdcache_signal(arg, fd_id);
}

/* The signal of a receive's completion event: held back while the thread
 * holds them.  (Async events, the SRQ limit's among them, and the other
 * completions' events go at once.) */
static void signal_recv_event(void *arg, uint32_t fd_id)
{
	if (held.on && held.n < HELD_MAX && (!held.n || held.ctx == arg)) {
		held.ctx = arg;
		held.fd_id[held.n++] = fd_id;
		return;
	}
	sr_fdcache_signal(arg, fd_id);
}

void sr_exec_signals_hold(void)
{
	held.on = true;
}

void sr_exec_signals_raise(bool stop)
{
	unsigned n = held.n;

	held.n = 0;
	if (stop)
		held.on = false;
	for (unsigned i = 0; i < n; i++)
		sr_fdcache_signal(held.ctx, held.fd_id[i]);
}

/* Single writer (the sq_lock holder): no locked instruction needed. */
static inline void count(struct sr_qp_shm *qp, enum sr_counter c, uint64_t n)
{
	atomic_store_explicit(&qp->cnt[c],
			      atomic_load_explicit(&qp->cnt[c], memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static struct sr_qp_shm *qp_lookup(void *arena, uint32_t qpn)
{
	struct sr_qpn_slot *slot = &sr_arena_qptab(arena)[sr_qpn_index(qpn) % SR_MAX_QPS];
	uint64_t off = atomic_load_explicit(&slot->obj_off, memory_order_acquire);
	struct sr_qp_shm *q = sr_arena_ptr(arena, off);

	return q && q->qpn == qpn ? q : NULL;
}

struct sr_qp_shm *sr_exec_qp_lookup(struct sr_devctx *ctx, uint32_t qpn)
{
	return qp_lookup(ctx->arena, qpn);
}

/* A QP as a peer's request finds it: none once its process has exited
 * (layout.h, struct sr_life_slot), even before the daemon reclaims it. */
static struct sr_qp_shm *peer_lookup(void *arena, uint32_t qpn)
{
	struct sr_qp_shm *q = qp_lookup(arena, qpn);

	return q && !sr_qp_owner_gone(arena, q) ? q : NULL;
}

struct sr_qp_shm *sr_exec_peer_lookup(struct sr_devctx *ctx, uint32_t qpn)
{
	return peer_lookup(ctx->arena, qpn);
}

struct sr_srq_shm *sr_exec_srq_lookup(struct sr_devctx *ctx, uint32_t srqn)
{
	struct sr_qpn_slot *slot = &sr_arena_srqtab(ctx->arena)[sr_qpn_index(srqn) % SR_MAX_SRQS];
	struct sr_srq_shm *s =
	    sr_arena_ptr(ctx->arena, atomic_load_explicit(&slot->obj_off, memory_order_acquire));

	return s && s->srqn == srqn ? s : NULL;
}

static bool can_receive(const struct sr_qp_shm *t)
{
	return sr_qps_can_receive(atomic_load_explicit(&t->state, memory_order_acquire));
}

/* copy_segs() for more than one segment on either side. */
static void __attribute__((noinline))
copy_segs_list(struct iovec *dst, unsigned nd, const struct iovec *src, unsigned ns, uint64_t len)
{
	unsigned di = 0, si = 0;
	uint64_t doff = 0, soff = 0;

	while (len && di < nd && si < ns) {
		uint64_t n = dst[di].iov_len - doff;

		if (src[si].iov_len - soff < n)
			n = src[si].iov_len - soff;
		if (len < n)
			n = len;
		if (n)
			sr_copy((char *)dst[di].iov_base + doff, (char *)src[si].iov_base + soff,
				n);
		doff += n;
		soff += n;
		len -= n;
		if (doff == dst[di].iov_len) {
			di++;
			doff = 0;
		}
		if (soff == src[si].iov_len) {
			si++;
			soff = 0;
		}
	}
}

/* Copies `len` bytes from a gather list into a scatter list.  Inline for
 * the common case, one buffer to one buffer (a zero-length SGE maps to
 * NULL, and memcpy from NULL is undefined even for 0 bytes). */
static inline void copy_segs(struct iovec *dst, unsigned nd, const struct iovec *src, unsigned ns,
			     uint64_t len)
{
	if (nd == 1 && ns == 1 && len <= dst[0].iov_len && len <= src[0].iov_len) {
		if (len)
			sr_copy(dst[0].iov_base, src[0].iov_base, len);
		return;
	}
	copy_segs_list(dst, nd, src, ns, len);
}

/* The initiator's payload as a gather list. */
static enum sr_key_result gather(struct xfer *x, struct iovec *src, unsigned *ns, uint64_t *total)
{
	struct sr_send_wqe *w = x->w;

	if (w->flags & SR_WQE_INLINE) {
		src[0].iov_base = w + 1;
		src[0].iov_len = w->total_len;
		*ns = 1;
		*total = w->total_len;
		return SR_KEY_OK;
	}
	*total = w->total_len;
	return sr_sge_map(x->ctx, x->ctx->arena, (const struct sr_sge_shm *)(w + 1), w->num_sge, 0,
			  w->total_len, 0, x->qp->pd, x->qp->qpn, src, ns);
}

/* ---- the responder's receive queue ---- */

struct rq_ref {
	struct sr_lock *lock;
	struct sr_wq *wq;
	struct sr_srq_shm *srq;
	uint64_t cq_off; /* where its receive completions go */
	uint32_t pd;	 /* the PD its receive buffers' keys must be of */
};

/* The XRC SRQ numbered `srqn`, if it belongs to XRC domain `xrcd` (IBTA
 * A14: an XRC target QP delivers only to SRQs of its own domain). */
static struct sr_srq_shm *xrc_srq(void *arena, uint32_t xrcd, uint32_t srqn)
{
	struct sr_qpn_slot *slot = &sr_arena_srqtab(arena)[sr_qpn_index(srqn) % SR_MAX_SRQS];
	struct sr_srq_shm *s =
	    sr_arena_ptr(arena, atomic_load_explicit(&slot->obj_off, memory_order_acquire));

	return s && s->srqn == srqn && xrcd && s->xrcd == xrcd ? s : NULL;
}

/* The receive queue a message to `t` consumes: its own RQ, its SRQ, or for
 * an XRC target QP the SRQ the message names (XRCETH); false when that is
 * not an SRQ of the target's domain. */
static bool rq_of(void *arena, struct sr_qp_shm *t, uint32_t xrc_srqn, struct rq_ref *r)
{
	if (t->type == IBV_QPT_XRC_RECV) {
		r->srq = xrc_srq(arena, t->xrcd, xrc_srqn);
		if (!r->srq)
			return false;
		r->lock = &r->srq->lock;
		r->wq = &r->srq->rq;
		r->cq_off = r->srq->cq_off;
		r->pd = r->srq->pd;
		return true;
	}
	if (t->srqn) {
		r->srq = sr_arena_ptr(arena, t->srq_off);
		r->lock = &r->srq->lock;
		r->wq = &r->srq->rq;
	} else {
		r->srq = NULL;
		r->lock = &t->rq_lock;
		r->wq = &t->rq;
	}
	r->cq_off = t->recv_cq_off;
	r->pd = t->pd;
	return true;
}

/* RC only (the consumer lock held, no receive posted): an XRC SRQ records
 * the sender that waits, for a post_srq_recv in any process to run it. */
static inline void rq_note_waiter(struct rq_ref *r, uint32_t sender_qpn)
{
	if (r->srq && r->srq->xrcd)
		atomic_store_explicit(&r->srq->waiter_qpn, sender_qpn, memory_order_relaxed);
}

/* Starts fetching the next WQE (written by the producer on the other core)
 * before the consumer lock's locked instruction would serialize the miss. */
static inline void rq_prefetch(void *arena, struct rq_ref *r)
{
	__builtin_prefetch(
	    sr_rq_wqe(arena, r->wq, atomic_load_explicit(&r->wq->tail, memory_order_relaxed)));
}

/* With the consumer lock held: the next receive WQE, or NULL. */
static struct sr_recv_wqe *rq_peek(void *arena, struct rq_ref *r)
{
	uint32_t tail = atomic_load_explicit(&r->wq->tail, memory_order_relaxed);
	struct sr_recv_wqe *w = sr_rq_wqe(arena, r->wq, tail);

	/* pairs with post_recv's store-release of seq */
	return atomic_load_explicit(&w->seq, memory_order_acquire) == tail + 1 ? w : NULL;
}

/* With the consumer lock held, RC only: the ring is empty, so the sender
 * will wait for a receive (RNR).  Raises the waiting flag for the producer,
 * then looks once more (struct sr_wq: the fences pair with post_recv's, so
 * either it sees the flag or we see its WQE).  Returns the WQE if one came,
 * and then lowers the flag again if we raised it (another sender's stays). */
static struct sr_recv_wqe *rq_wait(void *arena, struct rq_ref *r)
{
	uint32_t was = atomic_exchange_explicit(&r->wq->waiting, 1, memory_order_seq_cst);
	struct sr_recv_wqe *w;

	atomic_thread_fence(memory_order_seq_cst);
	w = rq_peek(arena, r);
	if (w && !was)
		atomic_store_explicit(&r->wq->waiting, 0, memory_order_relaxed);
	return w;
}

/* With the consumer lock held: the receive WQE a message takes, or NULL
 * (RC raises the RNR handshake flag first, rq_wait). */
static struct sr_recv_wqe *rq_take(void *arena, struct rq_ref *r, bool rc)
{
	struct sr_recv_wqe *w = rq_peek(arena, r);

	return w || !rc ? w : rq_wait(arena, r);
}

/* What a message's receive completion says of it: its opcode, the flags
 * its WR opcode gives and the immediate or the invalidated key. */
struct recv_wc {
	enum ibv_wc_opcode op;
	uint32_t flags, imm;
};

static inline struct recv_wc recv_wc_of(uint8_t wr_opcode, uint32_t imm_or_inv)
{
	switch (wr_opcode) {
	case IBV_WR_SEND_WITH_IMM:
		return (struct recv_wc){IBV_WC_RECV, IBV_WC_WITH_IMM, imm_or_inv};
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return (struct recv_wc){IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_WITH_IMM, imm_or_inv};
	case IBV_WR_SEND_WITH_INV:
		return (struct recv_wc){IBV_WC_RECV, IBV_WC_WITH_INV, imm_or_inv};
	default:
		return (struct recv_wc){IBV_WC_RECV, 0, 0};
	}
}

/* Why a message fails at its receive WQE, and the two completions that
 * follow: the responder's, and the requester's, which an RC responder
 * NAKs (IBTA 9.7.5.2.8 and 9.9.3.1: a message longer than the receive
 * buffers, or a SEND with Invalidate whose key cannot be invalidated, is
 * an invalid request; a receive buffer whose local key fails its check is
 * the responder's own fault, a remote operation error). */
enum recv_fault { RECV_TOO_LONG, RECV_BAD_LKEY, RECV_BAD_INV };

static const struct {
	enum ibv_wc_status responder, requester;
} recv_fault_status[] = {
    [RECV_TOO_LONG] = {IBV_WC_LOC_LEN_ERR, IBV_WC_REM_INV_REQ_ERR},
    [RECV_BAD_LKEY] = {IBV_WC_LOC_PROT_ERR, IBV_WC_REM_OP_ERR},
    [RECV_BAD_INV] = {IBV_WC_LOC_PROT_ERR, IBV_WC_REM_INV_REQ_ERR},
};

/* Consumes the WQE rq_peek returned; returns its ring index. */
static uint32_t rq_consume(struct sr_devctx *ctx, struct rq_ref *r)
{
	uint32_t tail = atomic_load_explicit(&r->wq->tail, memory_order_relaxed) + 1;

	atomic_store_explicit(&r->wq->tail, tail, memory_order_release);
	if (r->srq && atomic_load_explicit(&r->srq->limit_armed, memory_order_relaxed)) {
		uint32_t left = atomic_load_explicit(&r->wq->head, memory_order_relaxed) - tail;
		uint32_t one = 1;

		/* IBTA 10.2.9.2: the limit event fires once, then disarms */
		if (left < r->wq->limit &&
		    atomic_compare_exchange_strong(&r->srq->limit_armed, &one, 0))
			sr_async_set(&r->srq->async_events, IBV_EVENT_SRQ_LIMIT_REACHED,
				     r->srq->async_fd_id, sr_signal_fd, ctx);
	}
	return tail - 1;
}

/* Completes a receive.  `slot` is a slot reserved beforehand (deliver), or
 * NULL to reserve one now. */
/*
 * The SL of a RoCE UD receive: what a ConnectX reports there (its CQE's
 * sl field, which rdma-core's mlx5 provider hands out as wc.sl) is the
 * packet type, bit 3 for "the frame has a UDP header" (RoCEv2) and bits
 * 2..0 for the L3 header, 1 for IPv6 and 2 for IPv4.  UCX's UD transport
 * reads it to know where the destination address lies in the 40 bytes
 * before the payload (the last 4 bytes for IPv4, 16 for IPv6) and drops
 * every datagram whose address is not one of the device's GIDs, so with
 * sl 0 it took an IPv4 datagram for IPv6 and dropped them all.  The GRH
 * area (wire/grh.c) holds an IPv6 header exactly when its version nibble
 * says 6.
 */
static uint8_t roce_pkt_type(const uint8_t *grh)
{
	return 0x8 | ((grh[0] >> 4) == 6 ? 0x1 : 0x2);
}

static void push_recv_cqe(struct sr_devctx *ctx, struct sr_qp_shm *t, uint64_t cq_off,
			  uint32_t xrc_srqn, struct sr_cqe *slot, uint32_t index, uint64_t wr_id,
			  enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t len,
			  uint32_t flags, uint32_t imm, uint32_t src_qp, bool solicited, uint8_t sl)
{
	struct sr_cq_shm *cq = sr_arena_ptr(ctx->arena, cq_off);
	struct sr_cqe e = {0};

	e.wqe_index = index;
	e.wr_id = wr_id;
	e.status = st;
	e.opcode = op;
	e.byte_len = len;
	e.wc_flags = flags;
	e.imm_data = imm;
	e.qp_num = t->qpn;
	e.src_qp = src_qp;
	e.sl = sl;
	if (t->type == IBV_QPT_XRC_RECV) {
		e.xrc = 1;
		e.xrc_srqn = xrc_srqn;
	}
	if (!slot)
		slot = sr_cq_reserve(ctx->arena, cq, sr_signal_fd, ctx);
	if (slot)
		sr_cq_publish(cq, slot, &e, solicited, signal_recv_event, ctx);
}

/* Invalidates a type-2 window (or fails) for SEND_WITH_INV / LOCAL_INV. */
static bool invalidate_key(struct sr_devctx *ctx, uint32_t key, uint32_t pd)
{
	struct sr_key_entry e;

	if (!sr_key_lookup(ctx->arena, key, &e) || e.kind != SR_KEY_MW2 || e.state != 1 ||
	    e.pd != pd)
		return false;
	e.state = 2;
	sr_key_store(ctx->arena, sr_key_index(key), &e);
	return true;
}

/*
 * Delivers a message into the responder's next receive WQE.  `src` is the
 * payload (NULL for RDMA WRITE with immediate, whose data went by rkey);
 * `grh` prefixes UD deliveries.
 */
static inline __attribute__((always_inline)) enum xres
deliver_msg(struct sr_devctx *ctx, const struct sr_send_wqe *w, uint32_t type, uint32_t src_qpn,
	    struct sr_qp_shm *t, const struct iovec *src, unsigned ns, uint64_t len,
	    const uint8_t *grh, enum ibv_wc_status *req_status)
{
	bool rc = sr_qpt_reliable(type);
	struct iovec dst[SR_MAX_SGE + 1], hsrc[SR_MAX_SGE + 1];
	struct recv_wc c = recv_wc_of(w->opcode, w->imm_or_inv);
	enum recv_fault why;
	struct sr_recv_wqe *rw;
	struct sr_cqe *slot = NULL;
	struct rq_ref r;
	uint64_t need = len + (grh ? SR_GRH_LEN : 0);
	unsigned nd = 0;
	enum xres res = X_DONE;

	if (!rq_of(ctx->arena, t, w->xrc_srqn, &r)) {
		/* A14: an SRQ number that is no SRQ of the target's XRC domain
		 * is an invalid request (NAK) */
		*req_status = IBV_WC_REM_INV_REQ_ERR;
		return X_ERR;
	}
	rq_prefetch(ctx->arena, &r);
	sr_shm_lock(r.lock);
	rw = rq_take(ctx->arena, &r, rc);
	if (!rw) {
		if (rc) {
			/* a sender on another host is no QP here: its engine
			 * retries after the RNR NAK's timer */
			if (!t->wire)
				rq_note_waiter(&r, src_qpn);
			res = X_STALL_RNR;
		}
		sr_shm_unlock(r.lock);
		return res; /* UC/UD: dropped (no RNR on an unreliable service) */
	}
	if (grh)
		c.flags |= IBV_WC_GRH;
	if (w->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
		const struct sr_sge_shm *sge = (const void *)(rw + 1);

		/* the checks in the order of the engine's (sr_resp_recv_put,
		 * sr_resp_recv_finish): length, keys, invalidation */
		if (need > sr_sge_len(sge, rw->num_sge)) {
			why = RECV_TOO_LONG;
			goto fail;
		}
		if (sr_sge_map(ctx, ctx->arena, sge, rw->num_sge, 0, need, IBV_ACCESS_LOCAL_WRITE,
			       r.pd, t->qpn, dst, &nd)) {
			why = RECV_BAD_LKEY;
			goto fail;
		}
		/* A14: an XRC_RECV QP has no PD; its SRQ's is the responder's */
		if (w->opcode == IBV_WR_SEND_WITH_INV &&
		    !invalidate_key(ctx, w->imm_or_inv,
				    t->type == IBV_QPT_XRC_RECV ? r.pd : t->pd)) {
			why = RECV_BAD_INV;
			goto fail;
		}
		/* A small message takes the CQ's producer lock before writing the
		 * payload: the locked instruction then does not wait for the
		 * payload stores' cache-line transfers, and on x86 those and the
		 * CQE's overlap (one cross-core miss instead of two in a row).
		 * A large copy is not worth holding up the CQ's other producers. */
		if (need <= SR_EARLY_CQE_MAX)
			slot = sr_cq_reserve(ctx->arena, sr_arena_ptr(ctx->arena, r.cq_off),
					     sr_signal_fd, ctx);
		if (grh) {
			hsrc[0].iov_base = (void *)grh;
			hsrc[0].iov_len = SR_GRH_LEN;
			if (ns) /* a UD datagram of 0 bytes has no source piece */
				memcpy(&hsrc[1], src, ns * sizeof(*src));
			copy_segs(dst, nd, hsrc, ns + 1, need);
		} else {
			copy_segs(dst, nd, src, ns, len);
		}
	}
	push_recv_cqe(ctx, t, r.cq_off, w->xrc_srqn, slot, rq_consume(ctx, &r), rw->wr_id,
		      IBV_WC_SUCCESS, c.op, (uint32_t)need, c.flags, c.imm, src_qpn,
		      w->flags & SR_WQE_SOLICITED, grh ? roce_pkt_type(grh) : 0);
	sr_shm_unlock(r.lock);
	return X_DONE;

fail:
	*req_status = recv_fault_status[why].requester;
	push_recv_cqe(ctx, t, r.cq_off, w->xrc_srqn, NULL, rq_consume(ctx, &r), rw->wr_id,
		      recv_fault_status[why].responder, c.op, 0, 0, 0, src_qpn, false, 0);
	sr_shm_unlock(r.lock);
	if (type == IBV_QPT_UD)
		return X_DONE; /* a datagram's failure stays at the responder */
	return X_ERR;	       /* the responder goes to ERR; UC's requester never hears of it */
}

static inline __attribute__((always_inline)) enum xres deliver(struct xfer *x, struct sr_qp_shm *t,
							       const struct iovec *src, unsigned ns,
							       uint64_t len, const uint8_t *grh)
{
	enum xres res =
	    deliver_msg(x->ctx, x->w, x->qp->type, x->qp->qpn, t, src, ns, len, grh, &x->status);

	if (res == X_STALL_RNR)
		x->stall_target = t;
	if (res == X_ERR) {
		x->responder_err = t;
		if (!sr_qpt_reliable(x->qp->type))
			return X_DONE;
	}
	return res;
}

/* IBTA 10.6.3: a remote access needs the right on the responder QP
 * (qp_access_flags) and on the key, the key of the QP's PD, the range
 * inside the region. */
static inline __attribute__((always_inline)) bool rkey_ok(struct sr_devctx *ctx,
							  struct sr_qp_shm *t, uint32_t pd,
							  uint32_t rkey, uint64_t va, uint64_t len,
							  uint32_t need, void **p)
{
	return (t->access & need) &&
	       !sr_key_resolve(ctx, ctx->arena, rkey, va, len, need, pd, t->qpn, true, p);
}

/* The PD a remote access to `t` is checked against: its own, or for an
 * XRC target QP that of the SRQ the request names (A14), 0 if none. */
static uint32_t target_pd(void *arena, const struct sr_qp_shm *t, uint32_t xrc_srqn)
{
	struct sr_srq_shm *s;

	if (t->type != IBV_QPT_XRC_RECV)
		return t->pd;
	s = xrc_srq(arena, t->xrcd, xrc_srqn);
	return s ? s->pd : 0;
}

/* CMP_AND_SWP / FETCH_AND_ADD at the responder: SUCCESS and the original
 * value, or the requester's error status. */
static enum ibv_wc_status atomic_at(struct sr_devctx *ctx, struct sr_qp_shm *t, uint32_t pd,
				    uint8_t opcode, uint64_t va, uint32_t rkey,
				    uint64_t compare_add, uint64_t swap, uint64_t *orig)
{
	void *p = NULL;

	if (!pd)
		return IBV_WC_REM_INV_REQ_ERR; /* XRC: no SRQ of the domain named */
	if (va & 7)
		return IBV_WC_REM_INV_REQ_ERR; /* atomics: naturally aligned */
	if (!rkey_ok(ctx, t, pd, rkey, va, 8, IBV_ACCESS_REMOTE_ATOMIC, &p))
		return IBV_WC_REM_ACCESS_ERR;
	/* a real atomic instruction on the shared page: atomic against every initiator */
	if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		*orig = compare_add;
		__atomic_compare_exchange_n((uint64_t *)p, orig, swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		*orig = __atomic_fetch_add((uint64_t *)p, compare_add, __ATOMIC_SEQ_CST);
	}
	return IBV_WC_SUCCESS;
}

/* ---- opcodes ---- */

static struct sr_qp_shm *connected_peer(struct xfer *x)
{
	struct sr_qp_shm *t = peer_lookup(x->ctx->arena, x->qp->dest_qpn);
	uint32_t peer = x->qp->type == IBV_QPT_XRC_SEND ? IBV_QPT_XRC_RECV : x->qp->type;

	if (!t || t->type != peer || !can_receive(t))
		return NULL;
	return t;
}

static enum xres remote_fail(struct xfer *x, struct sr_qp_shm *t, enum ibv_wc_status st)
{
	count(x->qp, SR_CNT_REM_ACCESS_ERR, 1);
	if (!sr_qpt_reliable(x->qp->type))
		return X_DONE; /* UC: the responder drops the message silently */
	x->status = st;
	x->responder_err = t;
	return X_ERR;
}

/* SEND on RC/UC, the payload gathered: into the connected peer's RQ. */
static inline __attribute__((always_inline)) enum xres
send_connected(struct xfer *x, const struct iovec *src, unsigned ns, uint64_t len)
{
	struct sr_qp_shm *t = connected_peer(x);
	enum xres res;

	if (!t)
		return sr_qpt_reliable(x->qp->type) ? X_STALL_NOACK : X_DONE;
	res = deliver(x, t, src, ns, len, NULL);
	if (res == X_DONE) {
		count(x->qp, SR_CNT_SEND_WQE, 1);
		count(x->qp, SR_CNT_BYTES, len);
	}
	return res;
}

static bool gid_local(const struct sr_devctx *ctx, const uint8_t *gid)
{
	for (uint32_t i = 0; i < ctx->dev.gid_cnt && i < SR_GID_TBL_LEN; i++)
		if (!memcmp(ctx->dev.gids[i].gid, gid, 16))
			return true;
	return false;
}

/* This process's socket for what its posting threads send to other hosts
 * themselves: UD datagrams, and RC packets (wire_tx.c). */
static int ud_sock = -1;
static uint16_t ud_sport;
uint32_t sr_mcast_members(void *arena, const uint8_t *mgid, uint32_t *qpn)
{
	struct sr_mcast_group *tab = sr_arena_mcasttab(arena);

	for (uint32_t i = 0; i < SR_MAX_MCAST_GRP; i++) {
		struct sr_mcast_group g;

		sr_seq_read(&tab[i].seq, (char *)&g + sizeof(g.seq), sizeof(g) - sizeof(g.seq));
		if (!g.nqp || memcmp(g.gid, mgid, 16))
			continue;
		if (g.nqp > SR_MAX_MCAST_ATTACH)
			g.nqp = SR_MAX_MCAST_ATTACH; /* the arena is the user's to scribble on */
		memcpy(qpn, g.qpn, g.nqp * sizeof(*qpn));
		return g.nqp;
	}
	return 0;
}

static pthread_mutex_t ud_sock_mu = PTHREAD_MUTEX_INITIALIZER;

int sr_exec_wire_sock(uint16_t *sport)
{
	if (ud_sock < 0) {
		pthread_mutex_lock(&ud_sock_mu);
		if (ud_sock < 0)
			ud_sock = sr_udp_socket(0, &ud_sport);
		pthread_mutex_unlock(&ud_sock_mu);
	}
	if (sport)
		*sport = ud_sport;
	return ud_sock;
}

static_assert(SR_UDTX_DATA >= SR_UD_MAX_HDR_LEN + 4096, "a UD transmit slot holds an MTU");

/*
 * While the engine's transmit taps are on (a fault rule, a capture), a UD
 * datagram to another host goes through the engine, so that it is captured,
 * counted and subject to the rules like the engine's own packets: copied
 * into the arena's UD transmit queue (doorbell.h).  A full queue holds the
 * poster up to 10 ms, as a NIC's full send queue would, then the datagram
 * is dropped and counted (`udtx_full`).
 */
static void udtx_queue(struct xfer *x, const uint8_t *h, unsigned hl, const struct iovec *src,
		       unsigned ns, uint64_t len)
{
	struct sr_devctx *ctx = x->ctx;
	struct sr_arena_hdr *ah = ctx->arena;
	struct sr_udtx_slot *t;
	uint64_t pos, off = hl;

	for (unsigned tries = 0; !(t = sr_udtx_claim(ah, &pos)); tries++) {
		struct timespec ts = {0, 10000};

		if (tries == 1000) {
			atomic_fetch_add_explicit(&ah->udtx_full, 1, memory_order_relaxed);
			return;
		}
		nanosleep(&ts, NULL);
	}
	memcpy(t->sgid, x->w->ud_sgid, 16);
	memcpy(t->dgid, x->w->ud_dgid, 16);
	t->qpn = x->qp->qpn;
	t->hlen = hl;
	t->paylen = (uint32_t)len;
	memcpy(t->data, h, hl);
	for (unsigned i = 0; i < ns; i++) {
		if (src[i].iov_len)
			memcpy(t->data + off, src[i].iov_base, src[i].iov_len);
		off += src[i].iov_len;
	}
	sr_mpsc_publish(&t->seq, pos, 0);
	if (sr_db_sleeping(ah) && ah->engine_fd_id)
		sr_fdcache_signal(ctx, ah->engine_fd_id);
}

/*
 * UD to another host: one RoCEv2 datagram (BTH, DETH, ImmDt, payload),
 * sent from the posting thread, payload read in place from the gather
 * list (or through the engine while its taps are on: udtx_queue).
 * Unreliable: the WQE completes once it is handed to the kernel;
 * a message longer than the path MTU is a local length error.
 */
static enum xres send_ud_wire(struct xfer *x, const struct iovec *src, unsigned ns, uint64_t len,
			      uint32_t qkey)
{
	struct sr_arena_hdr *ah = x->ctx->arena;
	struct sr_send_wqe *w = x->w;
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	uint8_t h[SR_MAX_HDR_LEN];
	struct iovec iov[SR_MAX_SGE];
	struct sr_udp_pkt pkt;
	unsigned hl, n = 0;

	if (len > sr_mtu_bytes(x->ctx->dev.active_mtu)) {
		x->status = IBV_WC_LOC_LEN_ERR;
		return X_ERR;
	}
	hl = sr_ud_hdr_put(h, imm, w->flags & SR_WQE_SOLICITED, SR_DEFAULT_PKEY, w->ud_qpn,
			   x->qp->sq_psn, qkey, x->qp->qpn, w->imm_or_inv);
	x->qp->sq_psn = sr_psn_add(x->qp->sq_psn, 1);
	if (atomic_load_explicit(&ah->wire_taps, memory_order_relaxed) && ah->engine_fd_id) {
		udtx_queue(x, h, hl, src, ns, len);
		count(x->qp, SR_CNT_SEND_WQE, 1);
		count(x->qp, SR_CNT_BYTES, len);
		return X_DONE;
	}
	if (sr_exec_wire_sock(NULL) < 0) {
		x->status = IBV_WC_GENERAL_ERR;
		return X_ERR;
	}
	for (unsigned i = 0; i < ns; i++)
		if (src[i].iov_len)
			iov[n++] = src[i];
	sr_udp_build(&pkt, w->ud_sgid, w->ud_dgid, ud_sport, h, hl, iov, n, (uint32_t)len);
	if (sendmsg(ud_sock, &pkt.mh, 0) < 0)
		sr_dbg("UD to another host: %m"); /* unreliable: lost like on a fabric */
	atomic_fetch_add_explicit(&ah->ud_direct[0], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ah->ud_direct[1], len, memory_order_relaxed);
	count(x->qp, SR_CNT_SEND_WQE, 1);
	count(x->qp, SR_CNT_BYTES, len);
	return X_DONE;
}

static enum xres exec_send(struct xfer *x)
{
	struct sr_devctx *ctx = x->ctx;
	struct sr_send_wqe *w = x->w;
	struct iovec src[SR_MAX_SGE];
	unsigned ns;
	uint64_t len;

	if (gather(x, src, &ns, &len)) {
		x->status = IBV_WC_LOC_PROT_ERR;
		return X_ERR;
	}
	x->byte_len = len;
	if (x->qp->type == IBV_QPT_UD) {
		uint8_t grh[SR_GRH_LEN];
		uint32_t qkey;

		/* the IP header the datagram would have on the wire (RoCEv2):
		 * UDP, BTH, DETH, ImmDt, payload, pad, ICRC */
		sr_grh_build(grh, w->ud_sgid, w->ud_dgid,
			     (uint32_t)(8 + SR_BTH_LEN + SR_DETH_LEN +
					(w->opcode == IBV_WR_SEND_WITH_IMM ? SR_IMMDT_LEN : 0) +
					len + ((4 - (len & 3)) & 3) + SR_ICRC_LEN));
		/* C10-15: a Q_Key with the high bit set means "use the QP's own" */
		qkey = (w->ud_qkey & 0x80000000u) ? x->qp->qkey : w->ud_qkey;
		/* routing by GID: another host's GID goes over the wire */
		if (w->ud_ah_global && !sr_gid_is_mcast(w->ud_dgid) && !gid_local(ctx, w->ud_dgid))
			return send_ud_wire(x, src, ns, len, qkey);
		if (w->ud_qpn == SR_QPN_MCAST) {
			uint32_t m[SR_MAX_MCAST_ATTACH];
			uint32_t n = sr_mcast_members(ctx->arena, w->ud_dgid, m);

			/* this host's members through memory; other hosts' through
			 * the IP multicast group of the MGID, IPv4 (an IPv4-mapped
			 * MGID) or IPv6 (the kernel does not loop it back to us) */
			for (uint32_t j = 0; j < n; j++) {
				struct sr_qp_shm *t = peer_lookup(ctx->arena, m[j]);

				if (t && t->type == IBV_QPT_UD && can_receive(t) && t->qkey == qkey)
					deliver(x, t, src, ns, len, grh);
			}
			if (w->ud_ah_global && sr_gid_is_mcast(w->ud_dgid) &&
			    sr_gid_is_v4(w->ud_dgid) == sr_gid_is_v4(w->ud_sgid))
				return send_ud_wire(x, src, ns, len, qkey);
			return X_DONE;
		}
		struct sr_qp_shm *t = peer_lookup(ctx->arena, w->ud_qpn);

		if (!t || t->type != IBV_QPT_UD || !can_receive(t) || t->qkey != qkey)
			return X_DONE; /* silently dropped (UD: no such QP, type or Q_Key) */
		return deliver(x, t, src, ns, len, grh);
	}
	return send_connected(x, src, ns, len);
}

/* RDMA WRITE (with immediate), the payload gathered: into the peer's memory. */
static inline __attribute__((always_inline)) enum xres
write_connected(struct xfer *x, const struct iovec *src, unsigned ns, uint64_t len)
{
	struct sr_devctx *ctx = x->ctx;
	struct sr_send_wqe *w = x->w;
	struct iovec dst;
	struct sr_qp_shm *t;
	uint32_t pd;
	void *p = NULL;

	t = connected_peer(x);
	if (!t)
		return sr_qpt_reliable(x->qp->type) ? X_STALL_NOACK : X_DONE;
	pd = target_pd(ctx->arena, t, w->xrc_srqn);
	if (!pd)
		return remote_fail(x, t, IBV_WC_REM_INV_REQ_ERR);
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		/* the immediate needs a receive WQE: find out before writing (RNR) */
		struct rq_ref r;
		bool have;

		rq_of(ctx->arena, t, w->xrc_srqn, &r);
		sr_shm_lock(r.lock);
		have = rq_peek(ctx->arena, &r) != NULL;
		if (!have && sr_qpt_reliable(x->qp->type)) {
			have = rq_wait(ctx->arena, &r) != NULL;
			if (!have) {
				rq_note_waiter(&r, x->qp->qpn);
				x->stall_target = t;
			}
		}
		sr_shm_unlock(r.lock);
		if (!have)
			return sr_qpt_reliable(x->qp->type) ? X_STALL_RNR : X_DONE;
	}
	if (len) {
		/* IBTA 10.6.3: the responder QP must allow remote writes, and the key too */
		if (!rkey_ok(ctx, t, pd, w->rkey, w->remote_addr, len, IBV_ACCESS_REMOTE_WRITE, &p))
			return remote_fail(x, t, IBV_WC_REM_ACCESS_ERR);
		dst.iov_base = p;
		dst.iov_len = len;
		copy_segs(&dst, 1, src, ns, len);
	}
	count(x->qp, SR_CNT_RDMA_WRITE, 1);
	count(x->qp, SR_CNT_BYTES, len);
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return deliver(x, t, NULL, 0, len, NULL);
	return X_DONE;
}

static enum xres exec_write(struct xfer *x)
{
	struct iovec src[SR_MAX_SGE];
	unsigned ns;
	uint64_t len;

	if (gather(x, src, &ns, &len)) {
		x->status = IBV_WC_LOC_PROT_ERR;
		return X_ERR;
	}
	x->byte_len = len;
	return write_connected(x, src, ns, len);
}

/* RDMA READ, the local scatter list mapped: from the peer's memory. */
static inline __attribute__((always_inline)) enum xres
read_connected(struct xfer *x, struct iovec *dst, unsigned nd, uint64_t len)
{
	struct sr_devctx *ctx = x->ctx;
	struct sr_send_wqe *w = x->w;
	struct sr_qp_shm *t;
	struct iovec src;
	void *p = NULL;

	t = connected_peer(x);
	if (!t)
		return X_STALL_NOACK;
	if (len) {
		if (!rkey_ok(ctx, t, target_pd(ctx->arena, t, w->xrc_srqn), w->rkey, w->remote_addr,
			     len, IBV_ACCESS_REMOTE_READ, &p))
			return remote_fail(x, t, IBV_WC_REM_ACCESS_ERR);
		src.iov_base = p;
		src.iov_len = len;
		copy_segs(dst, nd, &src, 1, len);
	}
	count(x->qp, SR_CNT_RDMA_READ, 1);
	count(x->qp, SR_CNT_BYTES, len);
	return X_DONE;
}

/* READ and atomics: the WQE's scatter list, which the response is written
 * into; false (LOC_PROT_ERR set) if a key does not allow it. */
static bool map_response_dst(struct xfer *x, struct iovec *dst, unsigned *nd, uint64_t *len)
{
	struct sr_send_wqe *w = x->w;

	*len = w->total_len;
	if (sr_sge_map(x->ctx, x->ctx->arena, (const struct sr_sge_shm *)(w + 1), w->num_sge, 0,
		       w->total_len, IBV_ACCESS_LOCAL_WRITE, x->qp->pd, x->qp->qpn, dst, nd)) {
		x->status = IBV_WC_LOC_PROT_ERR;
		return false;
	}
	return true;
}

static enum xres exec_read(struct xfer *x)
{
	struct iovec dst[SR_MAX_SGE];
	unsigned nd;
	uint64_t len;

	if (!map_response_dst(x, dst, &nd, &len))
		return X_ERR;
	x->byte_len = len;
	return read_connected(x, dst, nd, len);
}

/* CMP_AND_SWP / FETCH_AND_ADD, the local result buffer mapped (len bytes,
 * which must be 8). */
static enum xres atomic_connected(struct xfer *x, struct iovec *dst, unsigned nd, uint64_t len)
{
	struct sr_devctx *ctx = x->ctx;
	struct sr_send_wqe *w = x->w;
	struct sr_qp_shm *t;
	enum ibv_wc_status st;
	uint64_t orig;

	if (len != 8) {
		x->status = IBV_WC_LOC_LEN_ERR;
		return X_ERR;
	}
	x->byte_len = 8;
	t = connected_peer(x);
	if (!t)
		return X_STALL_NOACK;
	st = atomic_at(ctx, t, target_pd(ctx->arena, t, w->xrc_srqn), w->opcode, w->remote_addr,
		       w->rkey, w->compare_add, w->swap, &orig);
	if (st != IBV_WC_SUCCESS)
		return remote_fail(x, t, st);
	struct iovec src = {(char *)&orig, 8};

	copy_segs(dst, nd, &src, 1, 8);
	count(x->qp, SR_CNT_ATOMIC, 1);
	return X_DONE;
}

static enum xres exec_atomic(struct xfer *x)
{
	struct iovec dst[SR_MAX_SGE];
	unsigned nd;
	uint64_t len;

	if (!map_response_dst(x, dst, &nd, &len))
		return X_ERR;
	return atomic_connected(x, dst, nd, len);
}

static enum xres exec_bind(struct xfer *x)
{
	struct sr_devctx *ctx = x->ctx;
	struct sr_send_wqe *w = x->w;
	struct sr_key_entry mw, mr;
	uint32_t idx = sr_key_index(w->bind_mw_key);
	struct sr_key_entry *raw = &sr_arena_keytab(ctx->arena)[idx % SR_MAX_KEYS];

	/* the window is looked up by index: a bind gives it a new key byte */
	sr_seq_read(&raw->seq, (char *)&mw + sizeof(mw.seq), sizeof(mw) - sizeof(mw.seq));
	if ((mw.kind != SR_KEY_MW1 && mw.kind != SR_KEY_MW2) || sr_key_index(mw.key) != idx ||
	    mw.pd != x->qp->pd) {
		x->status = IBV_WC_MW_BIND_ERR;
		return X_ERR;
	}
	if (mw.kind == SR_KEY_MW2 && mw.state == 1) {
		x->status = IBV_WC_MW_BIND_ERR; /* C10-70: a bound type-2 window must be invalidated
						   first */
		return X_ERR;
	}
	if (w->bind_length) {
		if (!sr_key_lookup(ctx->arena, w->bind_mr_key, &mr) || mr.kind != SR_KEY_MR ||
		    mr.pd != x->qp->pd || !(mr.access & IBV_ACCESS_MW_BIND) ||
		    w->bind_addr < mr.iova || w->bind_length > mr.length ||
		    w->bind_addr - mr.iova > mr.length - w->bind_length ||
		    /* remote write/atomic through a window needs local write on the MR */
		    ((w->bind_access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		     !(mr.access & IBV_ACCESS_LOCAL_WRITE))) {
			x->status = IBV_WC_MW_BIND_ERR;
			return X_ERR;
		}
		mw.parent_key = w->bind_mr_key;
		mw.iova = w->bind_addr;
		mw.length = w->bind_length;
		mw.access = w->bind_access;
		mw.state = 1;
	} else {
		mw.state = 2; /* zero-length bind unbinds (type 1) */
	}
	mw.key = w->bind_mw_key;
	mw.mw_qpn = x->qp->qpn;
	sr_key_store(ctx->arena, idx, &mw);
	return X_DONE;
}

static enum xres exec_one(struct xfer *x)
{
	switch (x->w->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return exec_send(x);
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return exec_write(x);
	case IBV_WR_RDMA_READ:
		return exec_read(x);
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return exec_atomic(x);
	case IBV_WR_BIND_MW:
		return exec_bind(x);
	case IBV_WR_LOCAL_INV:
		if (!invalidate_key(x->ctx, x->w->imm_or_inv, x->qp->pd)) {
			x->status = IBV_WC_MW_BIND_ERR;
			return X_ERR;
		}
		return X_DONE;
	default:
		x->status = IBV_WC_LOC_QP_OP_ERR;
		return X_ERR;
	}
}

/* Fault injection for the tests: SOFTRDMA_FAULT_RESPONDER_SQ_BUSY=1 makes
 * every responder's sq_lock look held when an error moves it to ERR, so the
 * owed-flush path runs deterministically (behaviour test
 * err_responder_sq_busy).  Read at the first such error. */
static bool fault_responder_sq_busy(void)
{
	static int on = -1;

	return sr_env_set("SOFTRDMA_FAULT_RESPONDER_SQ_BUSY", &on);
}

static void responder_to_error(struct sr_devctx *ctx, struct sr_qp_shm *t)
{
	sr_qp_to_error(t, sr_signal_fd, ctx);
	sr_rq_flush(ctx->arena, t, sr_signal_fd, ctx);
	/* Its SQ: flushed here if its lock is free.  If not, the holder may have
	 * read the state before ERR and leave WQEs behind (one waiting for an
	 * RNR retry would wait for ever), so the flush is recorded as owed. */
	if (!fault_responder_sq_busy() && !sr_shm_trylock(&t->sq_lock)) {
		sr_sq_flush_locked(ctx->arena, t, sr_signal_fd, ctx);
		sr_shm_unlock(&t->sq_lock);
	} else {
		sr_sq_flush_later(ctx->arena, t);
	}
}

static void stall(struct sr_qp_shm *qp, struct sr_qp_shm *t, enum xres why)
{
	uint32_t kind = why == X_STALL_RNR ? SR_STALL_RNR : SR_STALL_NO_ACK;
	uint64_t deadline = UINT64_MAX, now = sr_now_ns();

	if (atomic_load_explicit(&qp->stalled, memory_order_relaxed) == kind)
		return; /* the clock runs from the first attempt */
	if (kind == SR_STALL_RNR)
		count(qp, SR_CNT_RNR, 1); /* RNR NAKs, once per wait */
	if (kind == SR_STALL_RNR) {
		/* C9-152: rnr_retry 7 retries forever */
		if (qp->rnr_retry < 7)
			deadline =
			    now + (qp->rnr_retry + 1) * sr_rnr_timer_ns(t ? t->min_rnr_timer : 0);
	} else {
		deadline = sr_ack_wait_deadline(qp, now);
	}
	atomic_store_explicit(&qp->stall_deadline_ns, deadline, memory_order_relaxed);
	atomic_store_explicit(&qp->stalled, kind, memory_order_release);
}

/* The SQ head failed its wait (RNR or ACK retries exhausted): complete it
 * in error, QP to ERR, flush. */
static void fail_stalled(struct sr_devctx *ctx, struct sr_qp_shm *qp)
{
	sr_sq_head_fails(ctx->arena, qp,
			 atomic_load_explicit(&qp->stalled, memory_order_acquire) == SR_STALL_RNR
			     ? IBV_WC_RNR_RETRY_EXC_ERR
			     : IBV_WC_RETRY_EXC_ERR,
			 sr_signal_fd, ctx);
}

/* The SQ head WQE executed with outcome `r` other than X_DONE: the queue
 * waits (RNR, no ACK) or the QP fails.  Caller holds sq_lock. */
static void head_not_done(struct sr_devctx *ctx, struct sr_qp_shm *qp, const struct xfer *x,
			  enum xres r)
{
	if (r == X_STALL_RNR || r == X_STALL_NOACK) {
		stall(qp, x->stall_target, r);
		sr_hint_owner(ctx->arena, qp);
		/* an expired wait fails now rather than at the next poll */
		if (atomic_load_explicit(&qp->stall_deadline_ns, memory_order_relaxed) <=
		    sr_now_ns())
			fail_stalled(ctx, qp);
		return;
	}
	/* X_ERR: QP to ERR, complete in error, flush.  An RC responder that
	 * failed the request is in ERR before the requester's completion too
	 * (the NAK comes from a responder already in error). */
	atomic_store_explicit(&qp->stalled, SR_STALL_NONE, memory_order_relaxed);
	if (x->responder_err && sr_qpt_reliable(qp->type))
		responder_to_error(ctx, x->responder_err);
	sr_sq_head_fails(ctx->arena, qp, x->status, sr_signal_fd, ctx);
}

int sr_exec_sq_locked(struct sr_devctx *ctx, struct sr_qp_shm *qp)
{
	int done = 0;

	if (qp->wire)
		return 0; /* the RoCEv2 engine runs this SQ (src/engine) */

	for (;;) {
		uint32_t head = atomic_load_explicit(&qp->sq.head, memory_order_acquire);
		uint32_t state = atomic_load_explicit(&qp->state, memory_order_acquire);
		struct xfer x = {.ctx = ctx, .qp = qp};
		enum xres r;

		if (qp->exec_pos == head)
			break;
		if (state == IBV_QPS_ERR) {
			sr_sq_flush_locked(ctx->arena, qp, sr_signal_fd, ctx);
			break;
		}
		if (state != IBV_QPS_RTS)
			break; /* SQD/SQE: hold the queue */
		x.w = sr_sq_wqe(ctx->arena, qp, qp->exec_pos);
		r = exec_one(&x);
		if (r != X_DONE) {
			head_not_done(ctx, qp, &x, r);
			break;
		}
		atomic_store_explicit(&qp->stalled, SR_STALL_NONE, memory_order_relaxed);
		sr_sq_complete_head(ctx->arena, qp, IBV_WC_SUCCESS, x.byte_len, sr_signal_fd, ctx);
		done++;
	}
	return done;
}

bool sr_exec_direct(struct sr_devctx *ctx, struct sr_qp_shm *qp, const struct ibv_send_wr *wr,
		    struct sr_exec_pending *pending)
{
	const struct ibv_sge *sg = wr->sg_list;
	struct sr_send_wqe *w = &pending->wqe;
	struct xfer x = {.ctx = ctx, .qp = qp, .w = w};
	struct iovec buf = {NULL, sg->length};
	bool atomic =
	    wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	/* READ and atomics write the local buffer, WRITE and SEND read it */
	bool into_local = atomic || wr->opcode == IBV_WR_RDMA_READ;
	enum xres r;

	/* what the peer-side code reads of a WQE */
	w->opcode = wr->opcode;
	w->flags = (wr->send_flags & IBV_SEND_SOLICITED) ? SR_WQE_SOLICITED : 0;
	w->imm_or_inv = 0;
	if (atomic) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	}
	x.byte_len = sg->length;
	if (!sg->length)
		; /* nothing to map (and nothing to copy) */
	else if (!into_local && (wr->send_flags & IBV_SEND_INLINE))
		buf.iov_base =
		    (void *)(uintptr_t)sg->addr; /* inline: no key check, as in the ring */
	else if (sr_key_resolve(ctx, ctx->arena, sg->lkey, sg->addr, sg->length,
				into_local ? IBV_ACCESS_LOCAL_WRITE : 0, qp->pd, qp->qpn, false,
				&buf.iov_base)) {
		x.status = IBV_WC_LOC_PROT_ERR;
		r = X_ERR;
		goto not_done;
	}
	switch (wr->opcode) {
	case IBV_WR_SEND:
		r = send_connected(&x, &buf, 1, sg->length);
		break;
	case IBV_WR_RDMA_WRITE:
		r = write_connected(&x, &buf, 1, sg->length);
		break;
	case IBV_WR_RDMA_READ:
		r = read_connected(&x, &buf, 1, sg->length);
		break;
	default: /* the two atomics */
		r = atomic_connected(&x, &buf, 1, sg->length);
		break;
	}
	if (r == X_DONE) {
		if ((wr->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all)
			sr_sq_push_cqe(ctx->arena, qp, wr->wr_id, sr_wc_opcode(wr->opcode),
				       IBV_WC_SUCCESS, sg->length, sr_signal_fd, ctx);
		count(qp, SR_CNT_DIRECT, 1);
		return true;
	}
not_done:
	pending->res = r;
	pending->status = x.status;
	pending->responder_err = x.responder_err;
	pending->stall_target = x.stall_target;
	return false;
}

void sr_exec_direct_queued(struct sr_devctx *ctx, struct sr_qp_shm *qp,
			   const struct sr_exec_pending *pending)
{
	struct xfer x = {.ctx = ctx,
			 .qp = qp,
			 .status = pending->status,
			 .responder_err = pending->responder_err,
			 .stall_target = pending->stall_target};

	head_not_done(ctx, qp, &x, pending->res);
}

/* Without locks: true if the responder of `qp` has a receive posted now, or
 * is gone. */
static bool rnr_ready(struct sr_devctx *ctx, const struct sr_qp_shm *qp)
{
	struct sr_qp_shm *t = qp_lookup(ctx->arena, qp->dest_qpn);
	uint32_t srqn = 0;
	struct rq_ref r;

	if (!t)
		return true;		  /* gone: the executor finds out */
	if (qp->type == IBV_QPT_XRC_SEND) /* the SRQ its head waits on */
		srqn = sr_sq_wqe(ctx->arena, qp, qp->exec_pos)->xrc_srqn;
	if (!rq_of(ctx->arena, t, srqn, &r))
		return true;
	return rq_peek(ctx->arena, &r) != NULL;
}

__attribute__((noinline, cold)) void sr_exec_recheck(struct sr_devctx *ctx, struct sr_qp_shm *qp)
{
	while (atomic_load_explicit(&qp->stalled, memory_order_relaxed) == SR_STALL_RNR) {
		/* pairs with the fence of the responder's post_recv (take_waiting)
		 * before its failed trylock: it saw our lock held, so we see its
		 * receive */
		atomic_thread_fence(memory_order_seq_cst);
		if (!rnr_ready(ctx, qp) || sr_shm_trylock(&qp->sq_lock))
			return; /* nothing yet, or the new holder rechecks */
		sr_exec_sq_locked(ctx, qp);
		sr_shm_unlock(&qp->sq_lock);
	}
}

void sr_exec_kick_try(struct sr_devctx *ctx, struct sr_qp_shm *initiator)
{
	if (!initiator || sr_shm_trylock(&initiator->sq_lock))
		return; /* its holder runs it when it lets go (sr_exec_recheck) */
	sr_exec_sq_locked(ctx, initiator);
	sr_shm_unlock(&initiator->sq_lock);
	sr_exec_recheck(ctx, initiator);
}

void sr_exec_kick(struct sr_devctx *ctx, struct sr_qp_shm *initiator)
{
	/* No peek at `stalled` first: the sender sets the responder's waiting
	 * flag before it records its own stall, both under its sq_lock, so
	 * taking that lock is what guarantees we see the stall (no lost
	 * wake-up).  Callers only kick when a flag or a state change says so. */
	if (!initiator)
		return;
	sr_shm_lock(&initiator->sq_lock);
	sr_exec_sq_locked(ctx, initiator);
	sr_shm_unlock(&initiator->sq_lock);
	sr_exec_recheck(ctx, initiator);
}

/* ---- the responder's side, for requests that come from the wire ----
 *
 * The RoCEv2 responder (src/transport/resp.c) runs the same code as the
 * same-host executor above for everything a request does at the target:
 * key and access checks, atomics, receive-WQE consumption, scatter, CQEs,
 * invalidation, the responder's move to ERR.  Only the packetisation
 * differs: a message of several packets takes its receive WQE at the first
 * packet and completes it at the last (IBTA 9.7.5.1.4 / C9-91). */

int sr_resp_deliver(struct sr_devctx *ctx, struct sr_qp_shm *t, uint32_t sender_type,
		    uint32_t src_qpn, const struct sr_send_wqe *w, const void *payload,
		    uint32_t len, const uint8_t *grh, enum ibv_wc_status *req_status)
{
	struct iovec src = {(void *)payload, len};

	switch (deliver_msg(ctx, w, sender_type, src_qpn, t, len ? &src : NULL, len ? 1 : 0, len,
			    grh, req_status)) {
	case X_DONE:
		return 0;
	case X_STALL_RNR:
		return -EAGAIN;
	default:
		return -EIO;
	}
}

bool sr_resp_xrc_ok(struct sr_devctx *ctx, const struct sr_qp_shm *t, uint32_t xrc_srqn)
{
	return t->type != IBV_QPT_XRC_RECV || target_pd(ctx->arena, t, xrc_srqn) != 0;
}

bool sr_resp_rkey(struct sr_devctx *ctx, struct sr_qp_shm *t, uint32_t xrc_srqn, uint32_t rkey,
		  uint64_t va, uint64_t len, uint32_t need, void **p)
{
	if (!len) {
		*p = NULL;
		return true; /* a zero-length access checks no key */
	}
	return rkey_ok(ctx, t, target_pd(ctx->arena, t, xrc_srqn), rkey, va, len, need, p);
}

enum ibv_wc_status sr_resp_atomic(struct sr_devctx *ctx, struct sr_qp_shm *t, uint32_t xrc_srqn,
				  uint8_t wr_opcode, uint64_t va, uint32_t rkey,
				  uint64_t compare_add, uint64_t swap, uint64_t *orig)
{
	return atomic_at(ctx, t, target_pd(ctx->arena, t, xrc_srqn), wr_opcode, va, rkey,
			 compare_add, swap, orig);
}

int sr_resp_recv_take(struct sr_devctx *ctx, struct sr_qp_shm *t, bool rc,
		      struct sr_recv_ticket *tk)
{
	struct sr_recv_wqe *rw;
	struct rq_ref r;

	if (!rq_of(ctx->arena, t, tk->srqn, &r))
		return -EINVAL;
	tk->pd = r.pd;
	sr_shm_lock(r.lock);
	rw = rq_take(ctx->arena, &r, rc);
	if (!rw) {
		sr_shm_unlock(r.lock);
		return -EAGAIN;
	}
	tk->wr_id = rw->wr_id;
	tk->num_sge = rw->num_sge < SR_MAX_SGE ? rw->num_sge : SR_MAX_SGE;
	memcpy(tk->sge, rw + 1, tk->num_sge * sizeof(tk->sge[0]));
	tk->index = rq_consume(ctx, &r);
	sr_shm_unlock(r.lock);
	tk->cap = sr_sge_len(tk->sge, tk->num_sge);
	return 0;
}

enum ibv_wc_status sr_resp_recv_put(struct sr_devctx *ctx, struct sr_qp_shm *t,
				    const struct sr_recv_ticket *tk, uint64_t off,
				    const void *payload, uint32_t len)
{
	struct iovec dst[SR_MAX_SGE], src = {(void *)payload, len};
	unsigned nd;

	if (off + len > tk->cap)
		return IBV_WC_LOC_LEN_ERR;
	if (sr_sge_map(ctx, ctx->arena, tk->sge, tk->num_sge, off, len, IBV_ACCESS_LOCAL_WRITE,
		       tk->pd, t->qpn, dst, &nd))
		return IBV_WC_LOC_PROT_ERR;
	copy_segs(dst, nd, &src, 1, len);
	return IBV_WC_SUCCESS;
}

enum ibv_wc_status sr_resp_recv_finish(struct sr_devctx *ctx, struct sr_qp_shm *t,
				       const struct sr_recv_ticket *tk, enum ibv_wc_status st,
				       uint8_t wr_opcode, uint32_t byte_len, uint32_t imm_or_inv,
				       uint32_t src_qpn, bool solicited, bool grh)
{
	struct recv_wc c = recv_wc_of(wr_opcode, imm_or_inv);
	enum ibv_wc_status req = IBV_WC_SUCCESS;
	struct rq_ref r;

	if (st == IBV_WC_SUCCESS && wr_opcode == IBV_WR_SEND_WITH_INV &&
	    !invalidate_key(ctx, imm_or_inv, t->type == IBV_QPT_XRC_RECV ? tk->pd : t->pd))
		st = IBV_WC_LOC_PROT_ERR, req = recv_fault_status[RECV_BAD_INV].requester;
	else if (st != IBV_WC_SUCCESS) /* sr_resp_recv_put's */
		req = recv_fault_status[st == IBV_WC_LOC_LEN_ERR ? RECV_TOO_LONG : RECV_BAD_LKEY]
			  .requester;
	if (st != IBV_WC_SUCCESS) {
		c.flags = c.imm = byte_len = 0;
		solicited = false;
	} else if (grh) {
		c.flags |= IBV_WC_GRH;
	}
	/* the CQ lock orders this completion after the consumer's earlier ones */
	if (!rq_of(ctx->arena, t, tk->srqn, &r))
		return req; /* the SRQ went meanwhile: nowhere to complete */
	sr_shm_lock(r.lock);
	push_recv_cqe(ctx, t, r.cq_off, tk->srqn, NULL, tk->index, tk->wr_id, st, c.op, byte_len,
		      c.flags, c.imm, src_qpn, solicited, 0);
	sr_shm_unlock(r.lock);
	return req;
}

void sr_resp_to_error(struct sr_devctx *ctx, struct sr_qp_shm *t)
{
	responder_to_error(ctx, t);
}

enum ibv_wc_status sr_exec_local_op(struct sr_devctx *ctx, struct sr_qp_shm *qp,
				    struct sr_send_wqe *w)
{
	struct xfer x = {.ctx = ctx, .qp = qp, .w = w};

	return exec_one(&x) == X_DONE ? IBV_WC_SUCCESS : x.status;
}
