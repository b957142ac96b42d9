/*
 * QP error handling shared by the library and softrdmad: completing send
 * WQEs, moving a QP to the error state and flushing its queues (IBTA 10.3.1:
 * every outstanding and every later WQE completes with WR_FLUSH_ERR), and
 * turning an expired RNR or ACK wait into RNR_RETRY_EXC_ERR or
 * RETRY_EXC_ERR.  These need only the arena, so the daemon can apply them
 * to a process that is blocked or gone.
 */
#ifndef SR_SHM_QP_ERR_H
#define SR_SHM_QP_ERR_H

#include <stdint.h>

#include "shm/cq_push.h"

static inline struct sr_send_wqe *sr_sq_wqe(void *arena, const struct sr_qp_shm *qp, uint32_t i)
{
	return (struct sr_send_wqe *)((char *)arena + qp->sq.wqe_off +
				      (uint64_t)(i & (qp->sq.wqe_cnt - 1)) * qp->sq.stride);
}

static inline struct sr_recv_wqe *sr_rq_wqe(void *arena, const struct sr_wq *wq, uint32_t i)
{
	return (struct sr_recv_wqe *)((char *)arena + wq->wqe_off +
				      (uint64_t)(i & (wq->wqe_cnt - 1)) * wq->stride);
}

uint64_t sr_now_ns(void);
enum ibv_wc_opcode sr_wc_opcode(uint8_t wr_opcode);

/* Moves a QP to ERR from the data path.  A QP on an SRQ then reports the
 * affiliated event Last WQE Reached (IBTA 11.6.3), as it does when the
 * application moves it there (ibv_modify_qp); only on the transition. */
void sr_qp_to_error(struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg);

/* Pushes a send completion to the QP's send CQ. */
void sr_sq_push_cqe(void *arena, struct sr_qp_shm *qp, uint64_t wr_id, enum ibv_wc_opcode op,
		    enum ibv_wc_status status, uint32_t byte_len, sr_signal_fn *signal, void *arg);
/* Completes the SQ head WQE (caller holds sq_lock) with `status`, advancing
 * exec_pos and the SQ tail.  Success completions only when signaled. */
void sr_sq_complete_head(void *arena, struct sr_qp_shm *qp, enum ibv_wc_status status,
			 uint32_t byte_len, sr_signal_fn *signal, void *arg);
/* Flushes the SQ from exec_pos (caller holds sq_lock). */
void sr_sq_flush_locked(void *arena, struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg);
/* The SQ's head WQE failed with `status` (caller holds sq_lock): the QP
 * goes to ERR, then the head completes with status (if there is one) and
 * the rest of the SQ and the RQ are flushed.  The state goes first: whoever
 * sees the error completion (another thread, or the owner when a peer's
 * process ran this) finds the QP in ERR, as after an HCA's error CQE. */
void sr_sq_head_fails(void *arena, struct sr_qp_shm *qp, enum ibv_wc_status status,
		      sr_signal_fn *signal, void *arg);
/* Tells the owner's poll_cq (retry_stalled) to look at this QP's SQ: a
 * wait to retry or time out, or an owed flush. */
void sr_hint_owner(void *arena, struct sr_qp_shm *qp);
/* For a QP just moved to ERR whose sq_lock someone else holds (it may not
 * see the new state before it lets go): records that its SQ flush is owed
 * and tells the owner's send CQ to look.  Neither waits for the lock. */
void sr_sq_flush_later(void *arena, struct sr_qp_shm *qp);
/* Pays an owed SQ flush if sq_lock is free now.  Returns 1 if one is still
 * owed (the lock was busy), 0 otherwise. */
int sr_sq_flush_owed(void *arena, struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg);
/* Flushes the QP's own RQ (takes rq_lock). */
void sr_rq_flush(void *arena, struct sr_qp_shm *qp, sr_signal_fn *signal, void *arg);
/* If the SQ head has waited past its deadline, fails it and moves the QP to
 * ERR.  Takes sq_lock with trylock unless `block`; returns 1 if it failed
 * the QP, 0 otherwise. */
int sr_qp_check_stall(void *arena, struct sr_qp_shm *qp, uint64_t now, int block,
		      sr_signal_fn *signal, void *arg);
/* RNR timer value in ns for an encoded min_rnr_timer (IBTA table 45). */
uint64_t sr_rnr_timer_ns(uint8_t enc);
/* The local ACK timeout in ns (IBTA 9.7.6.1.3: 4.096 us x 2^timeout);
 * 0: timeout 0, which is infinite. */
uint64_t sr_ack_timeout_ns(uint8_t timeout);
/* When a send queue head that gets no ACK fails, waiting from now: after
 * retry_cnt + 1 tries of the local ACK timeout; UINT64_MAX: never. */
uint64_t sr_ack_wait_deadline(const struct sr_qp_shm *qp, uint64_t now);

#endif
