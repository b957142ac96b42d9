/*
 * Producing completions into a CQ ring in the arena, from any process (the
 * owner, a peer executing work for a QP bound to the CQ, or the daemon), and
 * raising the completion event when the CQ is armed.  Shared by the library
 * and softrdmad; `signal` writes one event to the channel eventfd with the
 * given daemon fd id (each side has its own way to reach the fd).
 */
#ifndef SR_SHM_CQ_PUSH_H
#define SR_SHM_CQ_PUSH_H

#include <stdbool.h>

#include <infiniband/verbs.h>

#include <softrdma/layout.h>

typedef void sr_signal_fn(void *arg, uint32_t fd_id);

/* Returns false if the CQ overflowed (the completion is lost and a CQ_ERR
 * async event is raised through `signal` on the CQ's async fd). */
bool sr_cq_push(void *arena, struct sr_cq_shm *cq, const struct sr_cqe *e, bool solicited,
		sr_signal_fn *signal, void *arg);

/* The same in two steps, for a producer that wants the slot (and the
 * producer lock, which a locked instruction takes) before it writes the data
 * the completion reports: reserve returns the slot with the lock held, or
 * NULL on overflow (handled as above, lock released); publish fills the
 * slot, releases the lock and raises the event. */
struct sr_cqe *sr_cq_reserve(void *arena, struct sr_cq_shm *cq, sr_signal_fn *signal, void *arg);
void sr_cq_publish(struct sr_cq_shm *cq, struct sr_cqe *slot, const struct sr_cqe *e,
		   bool solicited, sr_signal_fn *signal, void *arg);

/* Sets an async-event bit on an arena object and signals its owner. */
void sr_async_set(_Atomic uint32_t *bits, int ev, uint32_t async_fd_id, sr_signal_fn *signal,
		  void *arg);

#endif
