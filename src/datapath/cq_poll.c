/*
 * Polling completions: ibv_poll_cq, ibv_req_notify_cq and the extended
 * ibv_start_poll/next_poll/end_poll + ibv_wc_read_* interface.  The owner
 * process is the only consumer; its threads serialize on poll_lock (as
 * rdma-core providers lock their CQ).  An entry is valid when its sequence
 * word equals the consumer index + 1 (published by cq_push.c).  An empty
 * poll also gives waiting senders a chance: QPs whose send CQ this is are
 * retried, and failed once their RNR or ACK deadline has passed.
 *
 * Completions of destroyed QPs.  Once ibv_destroy_qp returns, a ConnectX
 * never returns a completion of that QP: mlx5's destroy removes the QP's
 * entries from its send and receive CQs.  Programs rely on it: libfabric's
 * verbs provider frees its work-request contexts when it closes an endpoint,
 * and rxm, closing a connection, reposts the receive buffer of any
 * completion it polls afterwards on the endpoint named by that context
 * (SIGSEGV in fi_close, test ecosystem_fi_pingpong_rxm, one run in ten
 * before this).  Here an entry cannot be taken out of the ring in place:
 * other processes produce into it, and an executor that looked the QP up
 * just before the destroy may still publish one of its completions after
 * it (the epochs, docs/architecture.md).  So destroy records the QP number
 * in each of its CQs (the last SR_CQ_DEAD_QPNS) and polling consumes
 * that QP's entries without returning them, those already there and late
 * ones alike; creating a QP that gets the same number again takes it off.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/shmlock.h"
#include "shm/epoch.h"
#include "shm/exec.h"
#include "shm/qp_err.h"
#include "datapath/wire_rx.h"
#include "datapath/datapath.h"
#include "verbs/objects.h"

/* Caller is inside a reader section (epoch.h), entered before this walks
 * the context's QP list: the retries look up the responders. */
static void retry_stalled(struct sr_context *ctx, struct sr_cq *cq)
{
	/* Every stalled QP of this CQ, however many: a fixed cap (it was 16)
	 * left the others unretried once the first ones got through, so they
	 * failed with RETRY_EXC_ERR although their responder had become ready
	 * (behaviour test many_stalled_qps). */
	struct sr_qp_shm *local[16], **stalled = local;
	unsigned n = 0, cap = 16;
	uint64_t now;

	if (!atomic_load_explicit(&cq->shm->stall_hint, memory_order_acquire))
		return;
	atomic_store_explicit(&cq->shm->stall_hint, 0, memory_order_relaxed);
	pthread_mutex_lock(&ctx->lock);
	for (struct sr_list *l = ctx->qps.next; l != &ctx->qps; l = l->next) {
		struct sr_qp *qp = container_of(l, struct sr_qp, link);

		if (qp->qpx.qp_base.send_cq != ibv_cq_ex_to_cq(&cq->cq) ||
		    (!atomic_load_explicit(&qp->shm->stalled, memory_order_relaxed) &&
		     !atomic_load_explicit(&qp->shm->flush_pending, memory_order_relaxed)))
			continue;
		if (n == cap) {
			struct sr_qp_shm **more = malloc(2 * cap * sizeof(*more));

			if (!more) {
				/* retry the ones we have; the rest next time */
				atomic_store_explicit(&cq->shm->stall_hint, 1,
						      memory_order_relaxed);
				break;
			}
			memcpy(more, stalled, n * sizeof(*more));
			if (stalled != local)
				free(stalled);
			stalled = more;
			cap *= 2;
		}
		stalled[n++] = qp->shm;
	}
	pthread_mutex_unlock(&ctx->lock);
	now = sr_now_ns();
	for (unsigned i = 0; i < n; i++) {
		struct sr_qp_shm *q = stalled[i];

		if (sr_sq_flush_owed(ctx->dc.arena, q, sr_signal_fd, ctx)) {
			atomic_store_explicit(&cq->shm->stall_hint, 1, memory_order_relaxed);
			continue;
		}
		if (sr_qp_check_stall(ctx->dc.arena, q, now, 0, sr_signal_fd, ctx))
			continue;
		/* an RNR wait is ended by the responder's post_recv; an ACK wait
		 * (responder absent or not ready) is retried here */
		if (atomic_load_explicit(&q->stalled, memory_order_relaxed) == SR_STALL_NO_ACK &&
		    !sr_shm_trylock(&q->sq_lock)) {
			sr_exec_sq_locked(&ctx->dc, q);
			sr_shm_unlock(&q->sq_lock);
		}
		sr_exec_recheck(&ctx->dc, q); /* an RNR wait the responder has ended */
		if (atomic_load_explicit(&q->stalled, memory_order_relaxed))
			atomic_store_explicit(&cq->shm->stall_hint, 1, memory_order_relaxed);
	}
	if (stalled != local)
		free(stalled);
}

static inline struct sr_cqe *next_cqe(struct sr_context *ctx, struct sr_cq_shm *s, uint32_t cons)
{
	struct sr_cqe *ring = sr_arena_ptr(ctx->dc.arena, s->ring_off);
	struct sr_cqe *e = &ring[cons & (s->cqe_cnt - 1)];

	/* pairs with the producer's store-release of seq */
	return atomic_load_explicit(&e->seq, memory_order_acquire) == cons + 1 ? e : NULL;
}

static inline void to_wc(const struct sr_cqe *e, struct ibv_wc *wc)
{
	wc->wr_id = e->wr_id;
	wc->status = e->status;
	wc->opcode = e->opcode;
	wc->vendor_err = e->xrc ? 0 : e->vendor_err;
	wc->byte_len = e->byte_len;
	wc->imm_data = e->imm_data;
	wc->qp_num = e->qp_num;
	wc->src_qp = e->src_qp;
	wc->wc_flags = e->wc_flags;
	wc->pkey_index = e->pkey_index;
	wc->slid = e->slid;
	wc->sl = e->sl;
	wc->dlid_path_bits = e->dlid_path_bits;
}

/* A polled receive completion frees its slot in the QP's RQ, or in its
 * SRQ, for post_recv (SR_WQ_FREED_BY_POLL, layout.h).  Ignored unless it is
 * newer than what was freed and not beyond what was posted: a completion
 * from before a RESET, or of an earlier QP that had this number, frees
 * nothing.  An SRQ's completions can be polled out of order (its QPs may
 * use several CQs, polled by several threads): `polled` only grows, by
 * compare-and-swap, and a WQE polled before an older one frees the older
 * one's slot too, which is safe as consumers take WQEs in order. */
static inline void rq_slot_polled(struct sr_context *ctx, const struct sr_cqe *e)
{
	struct sr_qp_shm *q;
	struct sr_wq *wq;
	uint32_t done, polled;

	if (!(e->opcode & IBV_WC_RECV))
		return;
	if (e->xrc) { /* XRC: the SRQ the message named, not one of the QP's */
		struct sr_srq_shm *x = sr_exec_srq_lookup(&ctx->dc, e->xrc_srqn);

		if (!x)
			return;
		wq = &x->rq;
		q = NULL;
	} else {
		q = sr_exec_qp_lookup(&ctx->dc, e->qp_num);
		if (!q)
			return;
		wq = q->srqn ? &((struct sr_srq_shm *)sr_arena_ptr(ctx->dc.arena, q->srq_off))->rq
			     : &q->rq;
	}
	if (!(wq->flags & SR_WQ_FREED_BY_POLL))
		return;
	done = e->wqe_index + 1;
	polled = atomic_load_explicit(&wq->polled, memory_order_relaxed);
	if ((int32_t)(atomic_load_explicit(&wq->head, memory_order_relaxed) - done) < 0)
		return;
	if (q && !q->srqn) { /* one CQ, polled under its lock: in order */
		if ((int32_t)(done - polled) > 0)
			atomic_store_explicit(&wq->polled, done, memory_order_relaxed);
		return;
	}
	while ((int32_t)(done - polled) > 0 &&
	       !atomic_compare_exchange_weak_explicit(&wq->polled, &polled, done,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* Caller holds poll_lock */
static bool qp_dead(const struct sr_cq *cq, uint32_t qpn)
{
	for (uint32_t i = 0; i < cq->ndead; i++)
		if (cq->dead_qpn[i] == qpn)
			return true;
	return false;
}

void sr_cq_qp_destroyed(struct ibv_cq *ibcq, uint32_t qpn)
{
	struct sr_cq *cq;

	if (!ibcq)
		return; /* XRC QPs have no CQ of their own (XRC_RECV none at all) */
	cq = to_scq(ibcq);
	sr_shm_lock(&cq->poll_lock);
	if (!qp_dead(cq, qpn)) {
		cq->dead_qpn[cq->dead_next] = qpn;
		cq->dead_next = (cq->dead_next + 1) % SR_CQ_DEAD_QPNS;
		if (cq->ndead < SR_CQ_DEAD_QPNS)
			cq->ndead++;
	}
	sr_shm_unlock(&cq->poll_lock);
}

void sr_cq_qp_created(struct ibv_cq *ibcq, uint32_t qpn)
{
	struct sr_cq *cq;

	if (!ibcq)
		return; /* XRC QPs have no CQ of their own (XRC_RECV none at all) */
	cq = to_scq(ibcq);
	sr_shm_lock(&cq->poll_lock);
	for (uint32_t i = 0; i < cq->ndead; i++) {
		if (cq->dead_qpn[i] != qpn)
			continue;
		/* keep the list dense: the slot takes a surviving entry, and
		 * the next one recorded goes to the end */
		cq->dead_qpn[i] = cq->dead_qpn[--cq->ndead];
		cq->dead_next = cq->ndead;
		break;
	}
	sr_shm_unlock(&cq->poll_lock);
}

/* A receive WQE of an SRQ whose completion is removed, not polled, is free
 * for post_srq_recv all the same (as rq_slot_polled frees it). */
static void srq_slot_dropped(struct sr_wq *wq, const struct sr_cqe *e)
{
	uint32_t done = e->wqe_index + 1;
	uint32_t polled = atomic_load_explicit(&wq->polled, memory_order_relaxed);

	if (!(e->opcode & IBV_WC_RECV) || !(wq->flags & SR_WQ_FREED_BY_POLL) ||
	    (int32_t)(atomic_load_explicit(&wq->head, memory_order_relaxed) - done) < 0)
		return;
	while ((int32_t)(done - polled) > 0 &&
	       !atomic_compare_exchange_weak_explicit(&wq->polled, &polled, done,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/*
 * Completions of a QP moved to RESET (or destroyed): as on a ConnectX,
 * whose provider cleans them out of the QP's CQs (mlx5_cq_clean), none of
 * the QP's earlier life is returned afterwards; a program that restates a
 * QP from ERR through RESET polls only what its new life completes
 * (pyverbs' test_mr_rereg_pd).  Unlike the destroyed QPs' filter above,
 * the entries go from the ring at once: the QP lives on under the same
 * number.  Its completions are produced with its sq_lock or rq_lock held,
 * which the daemon's RESET took, so none of the old life comes after this
 * (but a message an executor found the QP ready for just before the RESET
 * may still complete into an SRQ, whose lock the RESET does not take).
 * The producers' lock keeps every other producer
 * (another process's executor, the daemon's engine) out while the entries
 * between cons and prod move, poll_lock this process's consumers.  The
 * other QPs' entries keep their order and move towards prod, each under
 * the sequence word of its new index; cons moves past the slots freed.
 * Arming is left alone: an event already raised stays raised, as on an
 * HCA.  srq_wq, if not NULL: the SRQ whose receive WQEs the removed
 * receive completions consumed, given back as mlx5 gives them back.
 */
void sr_cq_clean_qp(struct ibv_cq *ibcq, uint32_t qpn, struct sr_wq *srq_wq)
{
	struct sr_context *ctx;
	struct sr_cq_shm *s;
	struct sr_cqe *ring;
	struct sr_cq *cq;
	uint32_t cons, prod, mask, nfreed = 0;

	if (!ibcq)
		return; /* XRC QPs have no CQ of their own (XRC_RECV none at all) */
	cq = to_scq(ibcq);
	ctx = to_sctx(ibcq->context);
	s = cq->shm;
	sr_shm_lock(&cq->poll_lock);
	sr_shm_lock(&s->lock);
	/* under both locks: no entry is half published, ring_off and
	 * cqe_cnt hold (resize_cq takes poll_lock) */
	ring = sr_arena_ptr(ctx->dc.arena, s->ring_off);
	mask = s->cqe_cnt - 1;
	cons = atomic_load_explicit(&s->cons, memory_order_relaxed);
	prod = atomic_load_explicit(&s->prod, memory_order_relaxed);
	for (uint32_t i = prod; i != cons;) {
		struct sr_cqe *e = &ring[--i & mask], *to;

		if (e->qp_num == qpn) {
			if (srq_wq)
				srq_slot_dropped(srq_wq, e);
			nfreed++;
			continue;
		}
		if (!nfreed)
			continue;
		to = &ring[(i + nfreed) & mask];
		memcpy((char *)to + offsetof(struct sr_cqe, status),
		       (const char *)e + offsetof(struct sr_cqe, status),
		       sizeof(*e) - offsetof(struct sr_cqe, status));
		atomic_store_explicit(&to->seq, i + nfreed + 1, memory_order_release);
	}
	if (nfreed)
		/* frees the slots: pairs with the producers' load-acquire of cons */
		atomic_store_explicit(&s->cons, cons + nfreed, memory_order_release);
	sr_shm_unlock(&s->lock);
	sr_shm_unlock(&cq->poll_lock);
}

int sr_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct sr_context *ctx = to_sctx(ibcq->context);
	struct sr_cq *cq = to_scq(ibcq);
	struct sr_cq_shm *s = cq->shm;
	uint32_t cons;
	int n = 0;
	bool rx_looked = false;

	if (num < 0)
		return -EINVAL;
	/* a polled receive frees its slot in our QP, which another thread may
	 * be destroying; retries look up responders */
	sr_epoch_enter_locking(ctx->dc.arena);
again:
	sr_shm_lock(&cq->poll_lock);
	cons = atomic_load_explicit(&s->cons, memory_order_relaxed);
	while (n < num) {
		struct sr_cqe *e = next_cqe(ctx, s, cons);

		if (!e)
			break;
		cons++;
		if (__builtin_expect(cq->ndead != 0, 0) && qp_dead(cq, e->qp_num))
			continue;
		to_wc(e, &wc[n++]);
		rq_slot_polled(ctx, e);
	}
	if (cons != atomic_load_explicit(&s->cons, memory_order_relaxed))
		/* frees the slots: pairs with the producer's load-acquire of cons */
		atomic_store_explicit(&s->cons, cons, memory_order_release);
	sr_shm_unlock(&cq->poll_lock);
	if (!n) {
		retry_stalled(ctx, cq);
		/* the host's datagrams, taken here (wire_rx.c): once, then
		 * what they completed */
		if (!rx_looked && sr_wire_rx_poll(ctx) > 0) {
			rx_looked = true;
			goto again;
		}
	}
	sr_epoch_exit();
	return n;
}

int sr_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sr_cq_shm *s = to_scq(ibcq)->shm;

	/* the caller may block for the event next: datagrams are the
	 * engine's to take meanwhile */
	sr_wire_rx_sleep(to_sctx(ibcq->context));
	if (solicited_only) {
		uint32_t off = SR_CQ_DISARMED;

		/* never weaken an armed "next completion" request */
		atomic_compare_exchange_strong(&s->arm, &off, SR_CQ_ARM_SOLICITED);
	} else {
		atomic_store_explicit(&s->arm, SR_CQ_ARM_NEXT, memory_order_release);
	}
	/* pairs with the producer's fence between publishing an entry and
	 * reading arm (sr_cq_publish): the poll that follows an arming sees
	 * every completion that raised no event */
	atomic_thread_fence(memory_order_seq_cst);
	return 0;
}

/* ---- extended CQ ---- */

static struct sr_cq *cqx(struct ibv_cq_ex *c)
{
	return container_of(c, struct sr_cq, cq);
}

static int take_one(struct sr_cq *cq)
{
	struct sr_context *ctx = to_sctx(cq->cq.context);
	uint32_t cons = atomic_load_explicit(&cq->shm->cons, memory_order_relaxed);
	struct sr_cqe *e;

	while ((e = next_cqe(ctx, cq->shm, cons)) && __builtin_expect(cq->ndead != 0, 0) &&
	       qp_dead(cq, e->qp_num))
		atomic_store_explicit(&cq->shm->cons, ++cons, memory_order_release);
	if (!e)
		return ENOENT;
	cq->cur = *e;
	rq_slot_polled(ctx, e);
	cq->cq.status = e->status;
	cq->cq.wr_id = e->wr_id;
	atomic_store_explicit(&cq->shm->cons, cons + 1, memory_order_release);
	return 0;
}

static int start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	struct sr_cq *cq = cqx(c);
	int ret;

	if (attr && attr->comp_mask)
		return EINVAL;
	/* as in sr_poll_cq; the section lasts until end_poll */
	sr_epoch_enter_locking(to_sctx(c->context)->dc.arena);
	sr_shm_lock(&cq->poll_lock);
	ret = take_one(cq);
	if (ret) {
		sr_shm_unlock(&cq->poll_lock);
		retry_stalled(to_sctx(c->context), cq);
		if (sr_wire_rx_poll(to_sctx(c->context)) > 0) { /* as sr_poll_cq */
			sr_shm_lock(&cq->poll_lock);
			ret = take_one(cq);
			if (!ret)
				return 0;
			sr_shm_unlock(&cq->poll_lock);
		}
		sr_epoch_exit();
	}
	return ret;
}

static int next_poll(struct ibv_cq_ex *c)
{
	return take_one(cqx(c));
}

static void end_poll(struct ibv_cq_ex *c)
{
	sr_shm_unlock(&cqx(c)->poll_lock);
	sr_epoch_exit();
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.opcode;
}

static uint32_t read_vendor_err(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.xrc ? 0 : cqx(c)->cur.vendor_err;
}

static uint32_t read_byte_len(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.byte_len;
}

static __be32 read_imm_data(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.imm_data;
}

static uint32_t read_qp_num(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.qp_num;
}

static uint32_t read_src_qp(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.src_qp;
}

static unsigned int read_wc_flags(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.wc_flags;
}

static uint32_t read_slid(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.slid;
}

static uint8_t read_sl(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.sl;
}

static uint8_t read_dlid_path_bits(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.dlid_path_bits;
}

static uint64_t read_completion_ts(struct ibv_cq_ex *c)
{
	return cqx(c)->cur.timestamp;
}

static uint64_t read_completion_wallclock_ns(struct ibv_cq_ex *c)
{
	struct timespec r, m;

	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return cqx(c)->cur.timestamp + ((uint64_t)r.tv_sec * 1000000000ull + r.tv_nsec) -
	       ((uint64_t)m.tv_sec * 1000000000ull + m.tv_nsec);
}

static uint16_t read_cvlan(struct ibv_cq_ex *c)
{
	return 0;
}

static uint32_t read_flow_tag(struct ibv_cq_ex *c)
{
	return 0;
}

static void read_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *tm)
{
	tm->tag = 0;
	tm->priv = 0;
}

void sr_cq_ex_init(struct sr_cq *cq)
{
	struct ibv_cq_ex *c = &cq->cq;

	c->start_poll = start_poll;
	c->next_poll = next_poll;
	c->end_poll = end_poll;
	c->read_opcode = read_opcode;
	c->read_vendor_err = read_vendor_err;
	c->read_byte_len = read_byte_len;
	c->read_imm_data = read_imm_data;
	c->read_qp_num = read_qp_num;
	c->read_src_qp = read_src_qp;
	c->read_wc_flags = read_wc_flags;
	c->read_slid = read_slid;
	c->read_sl = read_sl;
	c->read_dlid_path_bits = read_dlid_path_bits;
	c->read_completion_ts = read_completion_ts;
	c->read_cvlan = read_cvlan;
	c->read_flow_tag = read_flow_tag;
	c->read_tm_info = read_tm_info;
	c->read_completion_wallclock_ns = read_completion_wallclock_ns;
}
