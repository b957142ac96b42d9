/*
 * The same-host executor (exec.c).  A sender that finds no receive WQE sets
 * the responder's `rnr_waiting` flag while holding the responder's RQ lock;
 * post_recv adds its WQE under the same lock and then checks the flag, so
 * a waiting sender is always kicked (no lost wake-up).
 */
#ifndef SR_SHM_EXEC_H
#define SR_SHM_EXEC_H

#include <softrdma/layout.h>

struct sr_context;

/* Runs the QP's SQ from exec_pos as far as it can; caller holds sq_lock.
 * Returns the number of WQEs completed. */
int sr_exec_sq_locked(struct sr_context *ctx, struct sr_qp_shm *qp);
/* Retries a stalled initiator (takes its sq_lock). */
void sr_exec_kick(struct sr_context *ctx, struct sr_qp_shm *initiator);
struct sr_qp_shm *sr_exec_qp_lookup(struct sr_context *ctx, uint32_t qpn);
/* sr_signal_fn for the library: signals an eventfd by daemon id. */
void sr_signal_fd(void *arg, uint32_t fd_id);

#endif
