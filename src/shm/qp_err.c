/*
 * QP error paths shared by library and daemon (see qp_err.h).
 */
#include <time.h>

#include "core/shmlock.h"
#include "shm/qp_err.h"

uint64_t sr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

enum ibv_wc_opcode sr_wc_opcode(uint8_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

uint64_t sr_rnr_timer_ns(uint8_t enc)
{
	/* IBTA Vol 1 table 45, in units of 10 us; entry 0 is 655.36 ms */
	static const uint32_t t10us[32] = {
	    65536, 1,	 2,    3,    4,	   6,	  8,	 12,	16,    24,    32,
	    48,	   64,	 96,   128,  192,  256,	  384,	 512,	768,   1024,  1536,
	    2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
	};
	return (uint64_t)t10us[enc & 31] * 10000;
}

uint64_t sr_ack_timeout_ns(uint8_t timeout)
{
	return timeout ? 4096ull << timeout : 0;
}

uint64_t sr_ack_wait_deadline(const struct sr_qp_shm *qp, uint64_t now)
{
	uint64_t t = sr_ack_timeout_ns(qp->timeout);

	return t ? now + t * (qp->retry_cnt + 1ull) : UINT64_MAX;
}

void sr_sq_push_cqe(void *arena, struct sr_qp_shm *qp, uint64_t wr_id, enum ibv_wc_opcode op,
		    enum ibv_wc_status status, uint32_t byte_len, sr_signal_fn *signal, void *arg)
{
	struct sr_cqe e = {0};

	e.wr_id = wr_id;
	e.status = status;
	e.opcode = op;
	e.byte_len = byte_len;
	e.qp_num = qp->qpn;
	sr_cq_push(arena, sr_arena_ptr(arena, qp->send_cq_off), &e, false, signal, arg);
}

void sr_qp_to_error(struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg)
{
	/* it was a plain store: an SRQ consumer whose QP failed on the data path
	 * (remote access error as responder, failed WR as requester, retries
	 * exhausted) never heard Last WQE Reached (behaviour test srq_last_wqe) */
	if (atomic_exchange_explicit(&qp->state, IBV_QPS_ERR, memory_order_acq_rel) !=
		IBV_QPS_ERR &&
	    qp->srqn)
		sr_async_set(&qp->async_events, IBV_EVENT_QP_LAST_WQE_REACHED, qp->async_fd_id,
			     signal, arg);
}

void sr_sq_complete_head(void *arena, struct sr_qp_shm *qp, enum ibv_wc_status status,
			 uint32_t byte_len, sr_signal_fn *signal, void *arg)
{
	struct sr_send_wqe *w = sr_sq_wqe(arena, qp, qp->exec_pos);

	if (status != IBV_WC_SUCCESS || (w->flags & SR_WQE_SIGNALED) || qp->sq_sig_all)
		sr_sq_push_cqe(arena, qp, w->wr_id, sr_wc_opcode(w->opcode), status, byte_len,
			       signal, arg);
	qp->exec_pos++;
	/* frees the slot: pairs with post_send's load-acquire of tail */
	atomic_store_explicit(&qp->sq.tail, qp->exec_pos, memory_order_release);
}

void sr_sq_flush_locked(void *arena, struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg)
{
	uint32_t head = atomic_load_explicit(&qp->sq.head, memory_order_acquire);

	atomic_store_explicit(&qp->flush_pending, 0, memory_order_relaxed);
	while (qp->exec_pos != head)
		sr_sq_complete_head(arena, qp, IBV_WC_WR_FLUSH_ERR, 0, signal, arg);
	atomic_store_explicit(&qp->stalled, SR_STALL_NONE, memory_order_relaxed);
}

void sr_sq_head_fails(void *arena, struct sr_qp_shm *qp, enum ibv_wc_status status,
		      sr_signal_fn *signal, void *arg)
{
	sr_qp_to_error(qp, signal, arg);
	if (qp->exec_pos != atomic_load_explicit(&qp->sq.head, memory_order_acquire))
		sr_sq_complete_head(arena, qp, status, 0, signal, arg);
	sr_sq_flush_locked(arena, qp, signal, arg);
	sr_rq_flush(arena, qp, signal, arg);
}

void sr_hint_owner(void *arena, struct sr_qp_shm *qp)
{
	struct sr_cq_shm *cq = sr_arena_ptr(arena, qp->send_cq_off);

	atomic_store_explicit(&cq->stall_hint, 1, memory_order_release);
}

void sr_sq_flush_later(void *arena, struct sr_qp_shm *qp)
{
	atomic_store_explicit(&qp->flush_pending, 1, memory_order_release);
	/* the owner's next poll of its send CQ pays it (retry_stalled); the
	 * daemon's tick, within 100 ms, if the owner is blocked or busy */
	sr_hint_owner(arena, qp);
}

int sr_sq_flush_owed(void *arena, struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg)
{
	if (!atomic_load_explicit(&qp->flush_pending, memory_order_acquire))
		return 0;
	if (sr_shm_trylock(&qp->sq_lock))
		return 1; /* still busy: next time */
	/* a QP reset since (modify_qp clears the flag under this lock too) or
	 * already flushed by the holder owes nothing more */
	if (atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_ERR)
		sr_sq_flush_locked(arena, qp, signal, arg);
	atomic_store_explicit(&qp->flush_pending, 0, memory_order_relaxed);
	sr_shm_unlock(&qp->sq_lock);
	return 0;
}

void sr_rq_flush(void *arena, struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg)
{
	struct sr_cq_shm *cq = sr_arena_ptr(arena, qp->recv_cq_off);
	uint32_t head, tail;

	if (qp->srqn)
		return; /* an SRQ's WQEs belong to the SRQ, not to this QP */
	sr_shm_lock(&qp->rq_lock);
	head = atomic_load_explicit(&qp->rq.head, memory_order_acquire);
	tail = atomic_load_explicit(&qp->rq.tail, memory_order_relaxed);
	for (; tail != head; tail++) {
		struct sr_cqe e = {0};

		e.wr_id = sr_rq_wqe(arena, &qp->rq, tail)->wr_id;
		e.wqe_index = tail;
		e.status = IBV_WC_WR_FLUSH_ERR;
		e.opcode = IBV_WC_RECV;
		e.qp_num = qp->qpn;
		sr_cq_push(arena, cq, &e, false, signal, arg);
	}
	atomic_store_explicit(&qp->rq.tail, tail, memory_order_release);
	sr_shm_unlock(&qp->rq_lock);
}

int sr_qp_check_stall(void *arena, struct sr_qp_shm *qp, uint64_t now, int block,
		      sr_signal_fn *signal, void *arg)
{
	uint32_t why;

	if (!atomic_load_explicit(&qp->stalled, memory_order_acquire) ||
	    now < atomic_load_explicit(&qp->stall_deadline_ns, memory_order_relaxed))
		return 0;
	if (block)
		sr_shm_lock(&qp->sq_lock);
	else if (sr_shm_trylock(&qp->sq_lock))
		return 0;
	why = atomic_load_explicit(&qp->stalled, memory_order_relaxed);
	if (!why || now < atomic_load_explicit(&qp->stall_deadline_ns, memory_order_relaxed) ||
	    qp->exec_pos == atomic_load_explicit(&qp->sq.head, memory_order_acquire)) {
		sr_shm_unlock(&qp->sq_lock);
		return 0;
	}
	/* C9-143 (RNR retries exhausted) / C9-140 (transport retries exhausted).
	 * The QP is in ERR before its error completion can be seen: the owner,
	 * woken by the completion (the daemon runs this too), may query at once
	 * (it was set after: behaviour test err_peer_killed_waiting found the
	 * QP still in RTS after taking the RETRY_EXC_ERR completion). */
	sr_sq_head_fails(arena, qp,
			 why == SR_STALL_RNR ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_RETRY_EXC_ERR,
			 signal, arg);
	sr_shm_unlock(&qp->sq_lock);
	return 1;
}
