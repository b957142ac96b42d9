/*
 * CQ producer (see cq_push.h).  Producers serialize on the CQ's one-word
 * lock (core/shmlock.h) on the producer line; the entry is published with store-release of its
 * sequence word, which the consumer load-acquires (cq_poll.c).  Event
 * generation follows the verbs rule: one event per arming, for the next
 * completion (or the next solicited one), whoever produces it.
 */
#include <stdatomic.h>

#include "core/shmlock.h"
#include "shm/cq_push.h"
#include "shm/qp_err.h"

void sr_async_set(_Atomic uint32_t *bits, int ev, uint32_t async_fd_id, sr_signal_fn *signal,
		  void *arg)
{
	uint32_t bit = 1u << ev;

	if (atomic_fetch_or_explicit(bits, bit, memory_order_release) & bit)
		return;
	if (async_fd_id && signal)
		signal(arg, async_fd_id);
}

struct sr_cqe *sr_cq_reserve(void *arena, struct sr_cq_shm *cq, sr_signal_fn *signal, void *arg)
{
	uint32_t prod, cons;

	sr_shm_lock(&cq->lock);
	prod = atomic_load_explicit(&cq->prod, memory_order_relaxed);
	cons = cq->cons_cache;
	if (prod - cons >= cq->cqe_cnt - 1) {
		/* looks full: look at the consumer's line only now.  Pairs with
		 * the consumer's store-release of cons after reading an entry */
		cons = atomic_load_explicit(&cq->cons, memory_order_acquire);
		cq->cons_cache = cons;
	}
	if (prod - cons >= cq->cqe_cnt - 1) {
		sr_shm_unlock(&cq->lock);
		atomic_store_explicit(&cq->overflow, 1, memory_order_relaxed);
		sr_async_set(&cq->async_events, IBV_EVENT_CQ_ERR, cq->async_fd_id, signal, arg);
		return NULL;
	}
	return (struct sr_cqe *)sr_arena_ptr(arena, cq->ring_off) + (prod & (cq->cqe_cnt - 1));
}

void sr_cq_publish(struct sr_cq_shm *cq, struct sr_cqe *slot, const struct sr_cqe *e,
		   bool solicited, sr_signal_fn *signal, void *arg)
{
	uint32_t prod = atomic_load_explicit(&cq->prod, memory_order_relaxed), arm;

	slot->status = e->status;
	slot->wr_id = e->wr_id;
	slot->opcode = e->opcode;
	slot->byte_len = e->byte_len;
	slot->imm_data = e->imm_data;
	slot->qp_num = e->qp_num;
	slot->src_qp = e->src_qp;
	slot->wc_flags = e->wc_flags;
	slot->vendor_err = e->vendor_err;
	slot->pkey_index = e->pkey_index;
	slot->slid = e->slid;
	slot->sl = e->sl;
	slot->dlid_path_bits = e->dlid_path_bits;
	slot->xrc = e->xrc;
	slot->wqe_index = e->wqe_index;
	slot->timestamp = (cq->flags & SR_CQ_TIMESTAMPS) ? sr_now_ns() : 0;
	/* publish: pairs with the consumer's load-acquire of seq */
	atomic_store_explicit(&slot->seq, prod + 1, memory_order_release);
	atomic_store_explicit(&cq->prod, prod + 1, memory_order_release);
	sr_shm_unlock(&cq->lock);

	/* No channel, no events: nobody could wait for one. */
	if (!cq->channel_fd_id)
		return;
	/* Store-buffer pairing with sr_req_notify_cq, which stores arm, fences
	 * and polls: either it sees this entry, or we see it armed.  Without
	 * the fences each side could miss the other's store (x86 lets a load
	 * pass an earlier store) and the owner would sleep in ibv_get_cq_event
	 * over a completion that is already there: seen as a rare hang of
	 * ibv_rc_pingpong -e, both sides waiting for an event. */
	atomic_thread_fence(memory_order_seq_cst);
	arm = atomic_load_explicit(&cq->arm, memory_order_acquire);
	if (arm == SR_CQ_ARM_NEXT || (arm == SR_CQ_ARM_SOLICITED && solicited)) {
		if (atomic_compare_exchange_strong(&cq->arm, &arm, SR_CQ_DISARMED)) {
			atomic_fetch_add_explicit(&cq->events, 1, memory_order_release);
			if (signal)
				signal(arg, cq->channel_fd_id);
		}
	}
}

bool sr_cq_push(void *arena, struct sr_cq_shm *cq, const struct sr_cqe *e, bool solicited,
		sr_signal_fn *signal, void *arg)
{
	struct sr_cqe *slot = sr_cq_reserve(arena, cq, signal, arg);

	if (!slot)
		return false;
	sr_cq_publish(cq, slot, e, solicited, signal, arg);
	return true;
}
