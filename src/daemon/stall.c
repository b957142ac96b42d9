/*
 * The daemon's timer for QPs whose process is not polling: send queues
 * whose RNR or ACK wait has run out fail, owed SQ flushes are paid, and
 * their completion channels and async event fds are signalled for them,
 * so that a process blocked in ibv_get_cq_event still hears.
 */
#include <poll.h>
#include <unistd.h>

#include "core/log.h"
#include "core/shmlock.h"
#include "daemon/daemon.h"
#include "shm/qp_err.h"

/*
 * Signals a completion channel or async event fd for a process that is not
 * running its data path.  Only an event fd, and never waiting: the daemon
 * serves every client from one thread, and a write to an eventfd whose
 * counter is at its maximum (2^64 - 2 events nobody read) blocks until its
 * owner reads.  Such an event is dropped, for an owner that was not reading
 * anyway.
 */
static void daemon_signal(void *arg, uint32_t fd_id)
{
	struct sr_obj *f = sr_obj_lookup(arg, SR_OBJ_FD, fd_id);
	struct pollfd p;
	uint64_t one = 1;

	if (!f || f->u.fd.kind != SR_FD_EVENT)
		return;
	p = (struct pollfd){.fd = f->u.fd.fd, .events = POLLOUT};
	if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT)) {
		sr_dbg("signal fd %u: no room, event dropped", fd_id);
		return;
	}
	if (write(f->u.fd.fd, &one, sizeof(one)) < 0)
		sr_dbg("signal fd %u: %m", fd_id);
}

/*
 * A sender waiting for a receive (RNR) at a responder that no longer
 * exists would wait forever with rnr_retry = 7; on a fabric its retries
 * would go unanswered instead, so the wait becomes an ACK timeout
 * (IBTA 9.7.6.1.3: timeout x (retry_cnt + 1), then RETRY_EXC_ERR).
 */
static void responder_gone(struct sr_daemon *d, struct sr_qp_shm *qp, uint64_t now)
{
	uint32_t idx = sr_qpn_index(qp->dest_qpn) % SR_MAX_QPS;
	struct sr_obj *peer = d->qp_by_idx[idx];

	if (atomic_load_explicit(&qp->stalled, memory_order_relaxed) != SR_STALL_RNR ||
	    (peer && peer->handle == qp->dest_qpn))
		return;
	if (sr_shm_trylock(&qp->sq_lock))
		return; /* its owner is running it: it will see the responder gone itself */
	atomic_store_explicit(&qp->stall_deadline_ns, sr_ack_wait_deadline(qp, now),
			      memory_order_relaxed);
	atomic_store_explicit(&qp->stalled, SR_STALL_NO_ACK, memory_order_release);
	sr_shm_unlock(&qp->sq_lock);
}

/*
 * Fails send queues whose RNR or ACK wait has run out, and pays owed SQ
 * flushes (sr_sq_flush_later), for processes that are not polling (blocked
 * in ibv_get_cq_event, or busy elsewhere): the completion and its event
 * must come anyway.  Returns true while any QP
 * still waits, so the caller keeps ticking often.
 */
bool sr_daemon_tick(struct sr_daemon *d)
{
	uint64_t now = sr_now_ns();
	bool waiting = false;

	for (struct sr_client *c = d->clients; c; c = c->next) {
		for (struct sr_obj *o = c->objs; o; o = o->cnext) {
			struct sr_qp_shm *qp;

			if (o->kind != SR_OBJ_QP)
				continue;
			qp = sr_arena_at(d->arena, o->u.shm.off);
			if (sr_sq_flush_owed(d->arena, qp, daemon_signal, d)) {
				waiting = true;
				continue;
			}
			if (!atomic_load_explicit(&qp->stalled, memory_order_acquire))
				continue;
			responder_gone(d, qp, now);
			if (!sr_qp_check_stall(d->arena, qp, now, 0, daemon_signal, d) &&
			    atomic_load_explicit(&qp->stalled, memory_order_relaxed) &&
			    atomic_load_explicit(&qp->stall_deadline_ns, memory_order_relaxed) !=
				UINT64_MAX)
				waiting = true;
		}
	}
	return waiting;
}
