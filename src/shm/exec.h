/*
 * The same-host executor (exec.c).  A sender that finds no receive WQE
 * raises the ring's `waiting` flag, fences and looks again; post_recv
 * publishes its WQE, fences and then takes the flag and kicks the sender
 * (struct sr_wq in layout.h), so a waiting sender is always run again (no
 * lost wake-up) although the two sides share no lock.
 */
#ifndef SR_SHM_EXEC_H
#define SR_SHM_EXEC_H

#include <stdbool.h>

#include <infiniband/verbs.h>

#include <softrdma/layout.h>

struct sr_devctx;

/*
 * post_send's direct path.  A lone RDMA WRITE or SEND (RC or UC), or RDMA
 * READ or atomic (RC), with one gather/scatter entry, on a QP in RTS whose
 * send queue is idle (nothing queued, no wait), is executed straight from
 * the caller's ibv_send_wr, by the same
 * code that executes a WQE from the ring (exec.c), but without writing the
 * WQE, running the queue or completing it there: that is most of the
 * per-message cost left once the copy is small.  Caller holds sq_lock.
 *
 * Returns true when the work request completed (successfully; its CQE is
 * pushed when signaled).  Otherwise it did not complete, and *pending says
 * why (a wait for a receive or for the responder, or an error, with side
 * effects at the responder already done): the caller writes the work
 * request into the ring as the SQ head, exactly as the ring path would
 * have, and calls sr_exec_direct_queued, which carries on from that outcome
 * as the ring's executor would (the wait is retried from the ring; an error
 * completes the head and fails the QP).
 */
struct sr_exec_pending {
	int res; /* the executor's outcome (exec.c) */
	enum ibv_wc_status status;
	struct sr_qp_shm *responder_err, *stall_target;
	struct sr_send_wqe wqe; /* scratch header the executor reads */
};

bool sr_exec_direct(struct sr_devctx *ctx, struct sr_qp_shm *qp, const struct ibv_send_wr *wr,
		    struct sr_exec_pending *pending);
void sr_exec_direct_queued(struct sr_devctx *ctx, struct sr_qp_shm *qp,
			   const struct sr_exec_pending *pending);

/* Runs the QP's SQ from exec_pos as far as it can; caller holds sq_lock.
 * Returns the number of WQEs completed. */
int sr_exec_sq_locked(struct sr_devctx *ctx, struct sr_qp_shm *qp);
/* Retries a stalled initiator (takes its sq_lock). */
void sr_exec_kick(struct sr_devctx *ctx, struct sr_qp_shm *initiator);
/* The same from a responder's post_recv, but only if the initiator's
 * sq_lock is free now: a holder runs the SQ itself when it lets go. */
void sr_exec_kick_try(struct sr_devctx *ctx, struct sr_qp_shm *initiator);
/* For every library holder of an sq_lock, after releasing it: if the QP
 * waits for a receive (RNR) and its responder now has one, runs the SQ
 * (unless another thread got the lock first, which then does the same).
 * Callers of the kicks and of this are inside a reader section (epoch.h). */
void sr_exec_recheck(struct sr_devctx *ctx, struct sr_qp_shm *qp);
struct sr_qp_shm *sr_exec_qp_lookup(struct sr_devctx *ctx, uint32_t qpn);
/* The same, for a peer's request: NULL once the QP's process has exited. */
struct sr_qp_shm *sr_exec_peer_lookup(struct sr_devctx *ctx, uint32_t qpn);
/* The SRQ numbered srqn, or NULL. */
struct sr_srq_shm *sr_exec_srq_lookup(struct sr_devctx *ctx, uint32_t srqn);
/* This process's UDP socket for packets its posting threads send to other
 * hosts themselves (bound to an ephemeral port: *sport, if not NULL), or
 * -errno. */
int sr_exec_wire_sock(uint16_t *sport);
/* sr_signal_fn for the library: signals an eventfd by daemon id. */
void sr_signal_fd(void *arg, uint32_t fd_id);
/*
 * A thread that takes in a batch of packets from another host holds back
 * the events its receive completions raise (not async events, which stay
 * ahead of the ACK) until the packets it queued in answer have been sent
 * (the transport's ACKs): sr_exec_signals_hold before the
 * batch, sr_exec_signals_raise after each flush of the transmit batch,
 * with stop at the batch's end.  Else a program woken by its receive's
 * event can post its reply before the ACK of what it received leaves, the
 * peer completes its receive before its send, and a program that reaps
 * its send CQ once per event (perftest -e, whose send CQ has room for one)
 * overflows it, as it could not on an HCA, which acknowledges a request
 * long before its owner can answer it.
 */
void sr_exec_signals_hold(void);
void sr_exec_signals_raise(bool stop);

#endif
