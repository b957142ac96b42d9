/*
 * The RoCEv2 engine's thread (engine.h): its context, its sockets, its
 * loop, in which it runs the transport (src/transport) for the host.  It
 * sleeps in epoll when there is nothing to do (no doorbell, no datagram,
 * no timer due), so an idle host costs nothing; a doorbell from a posting
 * process, a datagram or the earliest retransmission deadline wakes it.
 * Each turn of the loop is one reader section (shm/epoch.h): the QPs, CQs
 * and mappings it uses stay valid until it is over.
 *
 * Sockets: one AF_INET6 dual-stack socket bound to port 4791 receives
 * (IPv4 arrives as IPv4-mapped addresses, which is what a RoCEv2 GID of an
 * IPv4 address is), and a pool of sockets bound to ephemeral ports sends,
 * so that QPs use different UDP source ports (ECMP entropy, as rxe's
 * 0xC000 | hash(qpn)).  All are unconnected with path-MTU discovery "do":
 * DF set and IPv4 identification 0, which the ICRC covers (wire/icrc.h).
 * The source address of each datagram is the QP's source GID, given per
 * packet with IP_PKTINFO / IPV6_PKTINFO.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "core/env.h"
#include "core/log.h"
#include "core/shmlock.h"
#include "engine/ctl.h"
#include "core/doorbell.h"
#include "transport/fault.h"
#include "transport/rx_member.h"
#include "core/daemon_link.h"
#include "core/idalloc.h"
#include "engine/internal.h"
#include "shm/epoch.h"
#include "shm/exec.h"
#include "shm/qp_err.h"
#include "shm/devctx.h"
#include "roce/roce.h"
#include "wire/icrc.h"
#include "wire/udp.h"

/* The engine thread's instance and the link it sends and reads through:
 * RoCEv2 over its socket group and its pool of sending sockets. */
struct engine_inst {
	struct sr_engine e; /* first: the struct sr_engine * is one of these */
	struct sr_roce roce;
	/* the receive socket group (layout.h, SR_RX_MEMBERS): nrx members,
	 * rx_sock = rx_socks[0]; rx_out: the members out of the epoll set
	 * (lent to a process that polls, or held by it) */
	int rx_sock;
	int rx_socks[SR_RX_MEMBERS];
	unsigned nrx;
	uint32_t rx_out;
	/* members lent (taken out of the set for a polling process), looks
	 * that found a member held, members taken back with datagrams
	 * stranded in them (status: rx_lends, rx_left_held, rx_stranded) */
	_Atomic uint64_t rx_lends, rx_left_held, rx_stranded;
	/* per member (rx_lend): its pkts at the engine's last look and when;
	 * datagrams the engine itself took from it; the processes' reads at
	 * its last stranding; no lending before this time */
	uint64_t rx_seen[SR_RX_MEMBERS], rx_seen_at[SR_RX_MEMBERS];
	uint64_t rx_own[SR_RX_MEMBERS], rx_app_at_strand[SR_RX_MEMBERS];
	uint64_t rx_lend_after[SR_RX_MEMBERS];
	/* its doorbell's eventfd and its epoll set */
	int db_fd, ep_fd;
};

static struct engine_inst *inst(struct sr_engine *e)
{
	return (struct engine_inst *)e;
}

static const struct engine_inst *cinst(const struct sr_engine *e)
{
	return (const struct engine_inst *)e;
}

static struct sr_roce *engine_roce(struct sr_engine *e)
{
	return &inst(e)->roce;
}

/* e (a struct engine_inst) made, with its link and no sockets yet. */
static int engine_new(struct sr_engine *e)
{
	int ret = sr_eng_init(e, NULL, NULL, false, true);

	sr_roce_init(engine_roce(e), e);
	e->link = &engine_roce(e)->link;
	inst(e)->rx_sock = inst(e)->db_fd = inst(e)->ep_fd = -1;
	return ret;
}

/* ---- the engine's lists of QPs ---- */

/* The QP slot s stands for now and its state, or NULL if it is gone or
 * was reset or re-routed since s was linked. */
static struct sr_qp_shm *qp_of(struct sr_engine *e, struct sr_eng_slot *s, struct sr_eng_qp **qo)
{
	struct sr_qp_shm *qp = sr_exec_qp_lookup(e->ctx, s->qpn);

	if (!qp || !s->q || !sr_eng_qp_is(e, qp, s->q))
		return NULL;
	*qo = s->q;
	return qp;
}

static void granted_add(struct sr_engine *e, struct sr_eng_slot *s)
{
	if (s->granted)
		return;
	s->granted = true;
	s->next_granted = e->granted;
	e->granted = s;
	if (!e->grant_tick)
		e->grant_tick = e->now + SR_ENG_GRANT_TICK_NS;
}

/* End of a turn, the engine's packets sent: the grants of the QPs it ran. */
static void grant_turn(struct sr_engine *e)
{
	while (e->pending) {
		struct sr_eng_slot *s = e->pending;
		struct sr_eng_qp *q;
		struct sr_qp_shm *qp;

		e->pending = s->next_pending;
		s->grant_pending = false;
		qp = qp_of(e, s, &q);
		if (qp && qp->wire && sr_eng_req_grant(e, qp, q, false))
			granted_add(e, s);
	}
}

/* Every SR_ENG_GRANT_TICK_NS while grants are out: take in what posting
 * threads sent (its timers start then: a lost packet is probed), and
 * withdraw the grants of QPs idle for SR_ENG_GRANT_IDLE_NS. */
static void grant_tick(struct sr_engine *e)
{
	struct sr_eng_slot **pp = &e->granted;

	if (!e->granted || e->now < e->grant_tick)
		return;
	while (*pp) {
		struct sr_eng_slot *s = *pp;
		struct sr_eng_qp *q = NULL;
		struct sr_qp_shm *qp = qp_of(e, s, &q);

		if (qp && sr_eng_req_grant(e, qp, q, true)) {
			pp = &s->next_granted;
			continue;
		}
		*pp = s->next_granted;
		s->granted = false;
	}
	e->grant_tick = e->granted ? e->now + SR_ENG_GRANT_TICK_NS : 0;
}

/* ---- receive ---- */

static void drop(struct sr_engine *e, enum sr_drop why)
{
	sr_eng_count(&e->drops[why], 1);
}

static void rx_one(struct sr_engine *e, const uint8_t *buf, uint32_t len,
		   const struct sr_link_addr *from)
{
	const uint8_t *sgid = from->sgid, *dgid = from->dgid;
	struct sr_pkt p;

	if (!sr_eng_rx_parse(e, buf, len, from, &p))
		return;
	if (p.bth.dqpn == 1) { /* QP1: a MAD for the daemon's CM agent (gsi.c) */
		sr_eng_gsi_rx(e, &p, sgid, dgid);
		return;
	}
	if (p.bth.dqpn == SR_QPN_MCAST) {
		if (!sr_eng_opcode_fits(p.bth.opcode, IBV_QPT_UD))
			drop(e, SR_DROP_TRANSPORT);
		else
			sr_eng_mcast_rx(e, &p, sgid, dgid);
		return;
	}
	sr_eng_rx_unicast(e, &p, sgid, dgid);
}

void sr_eng_rx_one(struct sr_engine *e, const uint8_t *buf, uint32_t len,
		   const struct sr_link_addr *from)
{
	uint64_t r0 = atomic_load_explicit(&e->cnt[SR_ENG_RETRANS], memory_order_relaxed);

	rx_one(e, buf, len, from);
	/* a NAK makes its QP retransmit: count it there (ctl.h) */
	if (len >= SR_BTH_LEN &&
	    atomic_load_explicit(&e->cnt[SR_ENG_RETRANS], memory_order_relaxed) != r0) {
		uint32_t dqpn = sr_bth_dqpn_raw(buf, len);
		struct sr_eng_slot *s = sr_eng_slot_at(e, dqpn);

		if (s && s->q && s->qpn == dqpn)
			sr_eng_vis_retrans(e, s->qpn, s->gen, r0);
	}
}

static struct sr_roce_rxbuf *rx_slots;

/* A datagram off the socket: through the receive taps, then processed. */
static void rx_tapped(struct sr_engine *e, uint8_t *buf, uint32_t len,
		      const struct sr_link_addr *from)
{
	/* capture, then drop, dup, hold, corrupt */
	for (unsigned times = sr_eng_rx_copies(e, buf, len, from); times--;)
		sr_eng_rx_one(e, buf, len, from);
}

/* Takes what member m holds, up to a batch: true if it took any; *more
 * says whether it may hold more (a full batch).  A member a receive half
 * holds is left to it (rx_member.h). */
static bool rx_batch(struct sr_engine *e, unsigned m, bool *more)
{
	struct sr_rx_member *mb = &((struct sr_arena_hdr *)e->arena)->rx_members[m];
	uint64_t hold = 0;
	int n;

	*more = false;
	if (m && !(hold = sr_rx_take_or_leave(mb, e->now))) {
		sr_eng_count(&inst(e)->rx_left_held, 1);
		return false;
	}
	n = sr_roce_rx_read(engine_roce(e), inst(e)->rx_socks[m], rx_slots, SR_ROCE_RX_BATCH,
			    rx_tapped);
	if (n > 0) {
		sr_eng_resp_acks(e);
		/* its answers leave before a later reader's (READ responses
		 * out of order would be asked for again), and before the
		 * events of what it completed (shm/exec.h) */
		sr_eng_flush_tx(e);
		sr_exec_signals_raise(false);
		atomic_fetch_add_explicit(&mb->pkts, (uint64_t)n, memory_order_relaxed);
		inst(e)->rx_own[m] += (uint64_t)n;
	}
	if (hold)
		sr_rx_give(mb, hold); /* (missed is only the engine's to set) */
	*more = n == SR_ROCE_RX_BATCH;
	return n > 0;
}

/* ---- the loop ---- */

static void run_doorbells(struct sr_engine *e)
{
	struct sr_arena_hdr *h = e->arena;
	uint32_t qpn;

	if (atomic_exchange_explicit(&h->db_overflow, 0, memory_order_acq_rel)) {
		/* the queue was full: every QP we know may have work */
		for (uint32_t i = 0; i < SR_MAX_QPS; i++)
			if (e->slots[i]) {
				struct sr_qp_shm *qp = sr_exec_qp_lookup(e->ctx, e->slots[i]->qpn);
				struct sr_eng_qp *q;

				if (qp && qp->wire) {
					atomic_store_explicit(&qp->wire_db, 0,
							      memory_order_release);
					q = sr_eng_qp_get(e, qp);
					if (q)
						sr_eng_req_run(e, qp, q);
				}
			}
	}
	while ((qpn = sr_db_pop(h))) {
		struct sr_qp_shm *qp = sr_exec_qp_lookup(e->ctx, qpn);
		struct sr_eng_qp *q;

		if (!qp)
			continue;
		/* cleared before the SQ is read: a later post rings again */
		atomic_exchange_explicit(&qp->wire_db, 0, memory_order_acq_rel);
		if (!qp->wire)
			continue;
		q = sr_eng_qp_get(e, qp);
		if (q && !sr_eng_req_keep(e, qp, q))
			sr_eng_req_run(e, qp, q);
	}
}

/*
 * UD datagrams that posting threads queued while the transmit taps are on
 * (exec.c udtx_queue): sent like the engine's own packets, through the
 * fault taps and the capture.  The slots hold the bytes the batch's iovecs
 * point at, so they go back to the producers only after the flush.
 */
static void run_udtx(struct sr_engine *e)
{
	struct sr_arena_hdr *h = e->arena;
	struct sr_udtx_slot *t;
	uint64_t k = 0;

	while (k < SR_UDTX_SLOTS && (t = sr_udtx_at(h, k))) {
		uint32_t hl = t->hlen, pl = t->paylen; /* the arena is the user's */

		k++;
		if (hl < SR_BTH_LEN || hl > SR_MAX_HDR_LEN || pl > SR_UDTX_DATA - hl)
			continue; /* a process of the user scribbled on the slot */
		sr_eng_send(e, &(struct sr_link_addr){t->sgid, t->dgid, t->qpn}, t->data, hl,
			    &(struct iovec){t->data + hl, pl}, 1, pl);
	}
	if (!k)
		return;
	sr_eng_flush_tx(e);
	while (k--)
		sr_udtx_release(h);
}

/* The daemon's notes of QPs it destroyed (sr_engine_gone): one producer
 * (the daemon's thread), one consumer (the engine's). */
#define GONE_SLOTS 256
static struct sr_eng_gone gone_ring[GONE_SLOTS];
static _Atomic uint32_t gone_head, gone_tail;

void sr_engine_gone(const struct sr_eng_gone *g)
{
	uint32_t h = atomic_load_explicit(&gone_head, memory_order_relaxed);

	if (h - atomic_load_explicit(&gone_tail, memory_order_acquire) >= GONE_SLOTS)
		return; /* only a late ACK is lost: the requester's retries decide */
	gone_ring[h % GONE_SLOTS] = *g;
	atomic_store_explicit(&gone_head, h + 1, memory_order_release);
}

static void run_gone(struct sr_engine *e)
{
	uint32_t t = atomic_load_explicit(&gone_tail, memory_order_relaxed);

	while (t != atomic_load_explicit(&gone_head, memory_order_acquire)) {
		const struct sr_eng_gone *g = &gone_ring[t % GONE_SLOTS];
		struct sr_eng_slot **sp = &e->slots[sr_qpn_index(g->qpn) % SR_MAX_QPS];

		if (!*sp)
			*sp = calloc(1, sizeof(**sp));
		if (*sp) {
			struct sr_eng_dack *l = &(*sp)->last;

			l->valid = true;
			l->at = e->now;
			l->qpn = g->qpn;
			l->dest_qpn = g->dest_qpn;
			l->psn = g->psn;
			l->msn = g->msn;
			memcpy(l->sgid, g->sgid, 16);
			memcpy(l->dgid, g->dgid, 16);
		}
		atomic_store_explicit(&gone_tail, ++t, memory_order_release);
	}
}

/*
 * Datagrams a receive half read but only the engine takes (QP1's MADs,
 * multicast: datapath/wire_rx.c), processed as if from the socket.
 */
static void run_rxfwd(struct sr_engine *e)
{
	struct sr_slotq fq = sr_rxfwd_q(e->arena);
	struct sr_udtx_slot *t;

	while ((t = sr_slotq_at(fq, 0))) {
		uint32_t len = t->paylen; /* the arena is the user's */

		if (len <= SR_UDTX_DATA)
			rx_tapped(e, t->data, len,
				  &(struct sr_link_addr){t->sgid, t->dgid, t->qpn});
		sr_slotq_release(fq);
	}
}

/*
 * Whether lent member m holds a datagram that its process has not read
 * for SR_ENG_RX_STRAND_NS: its threads polled a CQ lately, but now watch
 * memory (a WRITE's target that spins on the data, rsockets' riostream),
 * and nobody would read it before the engine's next look.  Then it is
 * taken back at once, and if that keeps happening (its threads took fewer
 * than SR_ENG_RX_STRAND_READS datagrams since the last time) it is not
 * lent again for SR_ENG_RX_STRAND_PAUSE_NS: the engine's wake-up costs
 * less than the wait.
 */
static bool rx_stranded(struct sr_engine *e, unsigned m, struct sr_rx_member *mb)
{
	uint64_t pkts = atomic_load_explicit(&mb->pkts, memory_order_relaxed), apps;
	int queued = 0;

	if (ioctl(inst(e)->rx_socks[m], SIOCINQ, &queued) || queued <= 0 ||
	    pkts != inst(e)->rx_seen[m] || e->now - inst(e)->rx_seen_at[m] < SR_ENG_RX_STRAND_NS) {
		if (pkts != inst(e)->rx_seen[m] || queued <= 0) {
			inst(e)->rx_seen[m] = pkts;
			inst(e)->rx_seen_at[m] = e->now;
		}
		return false;
	}
	sr_eng_count(&inst(e)->rx_stranded, 1);
	apps = pkts - inst(e)->rx_own[m];
	if (apps - inst(e)->rx_app_at_strand[m] < SR_ENG_RX_STRAND_READS)
		inst(e)->rx_lend_after[m] = e->now + SR_ENG_RX_STRAND_PAUSE_NS;
	inst(e)->rx_app_at_strand[m] = apps;
	return true;
}

/* Whether member m's process polls now: a thread of it polled within
 * SR_ENG_RX_LEND_NS, its threads having polled for SR_ENG_RX_STREAK_NS
 * without a break, and m is not paused (rx_stranded). */
static bool polled(const struct sr_engine *e, unsigned m, struct sr_rx_member *mb)
{
	uint64_t at = atomic_load_explicit(&mb->poll_at, memory_order_relaxed);
	uint64_t since = atomic_load_explicit(&mb->poll_since, memory_order_relaxed);

	return at && (int64_t)(e->now - at) < SR_ENG_RX_LEND_NS &&
	       (int64_t)(at - since) >= SR_ENG_RX_STREAK_NS && e->now >= cinst(e)->rx_lend_after[m];
}

/*
 * Which members are left to receive halves (datapath/wire_rx.c): while a thread
 * of the process a member belongs to polled a CQ within SR_ENG_RX_LEND_NS
 * (it reads the member then, and runs this code on what it gets), its
 * threads having polled for SR_ENG_RX_STREAK_NS without a break, or one
 * holds it now, the engine takes the member out of its epoll set, so that
 * those datagrams do not wake it, and looks again every
 * SR_ENG_RX_RECHECK_NS: a poller that stops (blocks, is stopped, exits)
 * has its datagrams taken by the engine within that, and one that watches
 * memory instead sooner (rx_stranded).  A thread that is about to block
 * clears its member's poll_at and wakes the engine (sr_wire_rx_sleep).
 * Never while the receive halves are off (rx_taps: a capture, or a fault
 * that holds packets).  Returns whether any member is out.
 */
static bool rx_lend(struct sr_engine *e)
{
	struct sr_arena_hdr *h = e->arena;
	bool taps = atomic_load_explicit(&h->rx_taps, memory_order_relaxed);

	for (unsigned m = 1; m < inst(e)->nrx; m++) {
		struct sr_rx_member *mb = &h->rx_members[m];
		bool lend = !taps && polled(e, m, mb), out;
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = m};

		if (lend && (inst(e)->rx_out & 1u << m) && rx_stranded(e, m, mb))
			lend = false;
		out = lend || (!taps && sr_rx_held(mb, e->now));
		if (lend && !atomic_load_explicit(&mb->lent, memory_order_relaxed)) {
			/* a Dekker pair with sr_wire_rx_sleep, which clears
			 * poll_at, then wakes us if it sees lent: one of the two
			 * sees the other's store, so a thread going to sleep
			 * never leaves its datagrams lent to nobody */
			atomic_store_explicit(&mb->lent, 1, memory_order_relaxed);
			atomic_thread_fence(memory_order_seq_cst);
			lend = polled(e, m, mb);
			out = lend || sr_rx_held(mb, e->now);
		}
		if (!lend && atomic_load_explicit(&mb->lent, memory_order_relaxed))
			atomic_store_explicit(&mb->lent, 0, memory_order_relaxed);
		if (out == !!(inst(e)->rx_out & 1u << m))
			continue;
		if (epoll_ctl(inst(e)->ep_fd, out ? EPOLL_CTL_DEL : EPOLL_CTL_ADD,
			      inst(e)->rx_socks[m], &ev))
			continue;
		inst(e)->rx_out ^= 1u << m;
		if (out) {
			sr_eng_count(&inst(e)->rx_lends, 1);
			inst(e)->rx_seen[m] = atomic_load_explicit(&mb->pkts, memory_order_relaxed);
			inst(e)->rx_seen_at[m] = e->now;
		}
	}
	return inst(e)->rx_out != 0;
}

/* Runs due timers; returns the earliest deadline still pending (0: none). */
/* q's next timer (0: none), read under the lock that guards it; what the
 * engine will look at is noted there for receive halves (eng_due). */
static uint64_t deadline_of(struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	uint64_t d;

	sr_shm_lock(&qp->wtx_lock);
	d = q->comp.deadline;
	q->grant.eng_due = d;
	sr_shm_unlock(&qp->wtx_lock);
	return d;
}

static uint64_t run_timers(struct sr_engine *e)
{
	struct sr_eng_slot **pp = &e->active;
	uint64_t next = 0;

	while (*pp) {
		struct sr_eng_slot *s = *pp;
		struct sr_eng_qp *q = NULL;
		struct sr_qp_shm *qp = qp_of(e, s, &q);
		uint64_t d = qp ? deadline_of(qp, q) : 0;

		if (d && d <= e->now) {
			uint64_t r0 =
			    atomic_load_explicit(&e->cnt[SR_ENG_RETRANS], memory_order_relaxed);

			sr_eng_req_timer(e, qp, q);
			sr_eng_vis_retrans(e, s->qpn, s->gen, r0);
			d = deadline_of(qp, q);
		}
		if (!d) {
			*pp = s->next_active;
			s->active = false;
			continue;
		}
		if (!next || d < next)
			next = d;
		pp = &s->next_active;
	}
	return next;
}

/* The members an epoll_pwait2 that returned n found readable (all members
 * in the set after an error such as EINTR: look), its doorbell count
 * cleared. */
static uint32_t ready_of(struct sr_engine *e, const struct epoll_event *ev, int n)
{
	uint32_t ready = n < 0 ? ((1u << inst(e)->nrx) - 1) & ~inst(e)->rx_out : 0;

	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 < SR_RX_MEMBERS)
			ready |= 1u << ev[i].data.u32;
		else if (ev[i].data.u32 == SR_RX_MEMBERS) {
			uint64_t v;

			if (read(inst(e)->db_fd, &v, sizeof(v)) < 0)
				v = 0;
		}
	return ready;
}

static _Atomic int engine_stop; /* the daemon's thread asks, the engine's reads */

/*
 * The engine shares two CPUs with applications that busy-poll.  Under
 * Linux's EEVDF scheduler a thread that wakes (a datagram, a doorbell) runs
 * only when its virtual deadline is the earliest, which with the default
 * slice can be milliseconds behind a spinning poller.  A short slice
 * (sched_attr.sched_runtime for SCHED_OTHER, Linux 6.12+, no privilege
 * needed) makes it preempt at wake-up instead.  Best effort: older kernels
 * refuse and keep the default.
 */
static void short_slice(void)
{
	struct {
		uint32_t size, policy;
		uint64_t flags;
		int32_t nice;
		uint32_t prio;
		uint64_t runtime, deadline, period;
	} a = {.size = 48, .policy = 0 /* SCHED_OTHER */, .runtime = 100000 /* ns */};

	if (syscall(SYS_sched_setattr, 0, &a, 0))
		sr_dbg("engine: no short scheduler slice: %m");
}

static void *engine_main(void *arg)
{
	struct sr_engine *e = arg;
	struct sr_arena_hdr *h = e->arena;
	struct epoll_event ev[SR_RX_MEMBERS + 1];
	/* which members may hold datagrams: not after a look that found none,
	 * or a wake-up for something else (a doorbell, a MAD to send, a
	 * timer), which then costs no recvmmsg that finds nothing */
	uint32_t rx_ready = (1u << inst(e)->nrx) - 1; /* by member */

	short_slice();
	while (!atomic_load_explicit(&engine_stop, memory_order_relaxed)) {
		uint64_t next, held, dack_at, turn_at, turn,
		    tx0 = atomic_load_explicit(&e->cnt[SR_ENG_TX_PKTS], memory_order_relaxed);
		bool busy;

		sr_epoch_enter(e->arena);
		/* completions' events wait for the ACKs (shm/exec.h) */
		sr_exec_signals_hold();
		sr_eng_ctl_poll(e); /* the daemon's requests (ctl.h) */
		sr_eng_taps_publish(e);
		e->now = sr_eng_clock();
		turn_at = e->now;
		run_doorbells(e);
		run_udtx(e);
		run_gone(e);
		run_rxfwd(e);
		sr_eng_gsi_turn(e); /* the CM agent's MADs (gsi.c) */
		busy = false;
		for (unsigned m = 0; m < inst(e)->nrx; m++) {
			bool more;

			if (!(rx_ready & 1u << m))
				continue;
			busy |= rx_batch(e, m, &more);
			if (!more)
				rx_ready &= ~(1u << m);
		}
		e->now = sr_eng_clock();
		grant_tick(e);
		next = run_timers(e);
		dack_at = sr_eng_resp_dacks(e); /* ACKs no request took in time */
		if (dack_at && (!next || dack_at < next))
			next = dack_at;
		sr_eng_flush_tx(e);
		/* packets held by fault injection, released after the batch */
		held = sr_eng_fault_turn(e);
		if (held) {
			sr_eng_flush_tx(e);
			if (!next || held < next)
				next = held;
		}
		grant_turn(e); /* after the flush: no posting thread overtakes it */
		if (e->grant_tick && (!next || e->grant_tick < next))
			next = e->grant_tick;
		sr_exec_signals_raise(true);
		sr_epoch_exit();
		/* its longest turn, for a QP's record of why it failed (req.c) */
		turn = sr_eng_clock() - turn_at;
		if (turn > e->turn_worst) {
			e->turn_worst = turn;
			e->turn_worst_at = turn_at;
		}
		/* a stream (doorbells, or packets in and out this turn): look
		 * again at once, so that the engine does not pass through its
		 * sleep (and posting threads ring it) between datagrams; what
		 * only came in (a MAD, an ACK) is answered later, and the
		 * sleep's epoll tells whether more came meanwhile */
		if (!sr_db_empty(h) ||
		    (busy && (rx_ready || atomic_load_explicit(&e->cnt[SR_ENG_TX_PKTS],
							       memory_order_relaxed) != tx0))) {
			/* one epoll look says which members hold datagrams,
			 * instead of a recvmmsg on each (most find nothing:
			 * a READ responder's stream reads a request now and
			 * then, while it sends all the time) */
			struct timespec zero = {0, 0};

			rx_ready |= ready_of(
			    e, ev,
			    epoll_pwait2(inst(e)->ep_fd, ev, SR_RX_MEMBERS + 1, &zero, NULL));
			continue;
		}
		/* (taken back, a member is in the set again: a datagram that
		 * came meanwhile ends the sleep at once) */
		if (rx_lend(e)) {
			uint64_t t = e->now + SR_ENG_RX_RECHECK_NS;

			if (!next || t < next)
				next = t;
		}
		atomic_store_explicit(&h->engine_sleeping, 1, memory_order_relaxed);
		/* pairs with sr_db_ring's fence after it queued */
		atomic_thread_fence(memory_order_seq_cst);
		if (sr_db_empty(h)) {
			struct timespec ts, *tp = NULL;

			if (next) {
				uint64_t d = next > e->now ? next - e->now : 0;

				ts.tv_sec = (time_t)(d / 1000000000ull);
				ts.tv_nsec = (long)(d % 1000000000ull);
				tp = &ts;
			}
			int n = epoll_pwait2(inst(e)->ep_fd, ev, SR_RX_MEMBERS + 1, tp, NULL);

			/* how late a timed sleep ended: the CPU the engine waited
			 * for once it was due (req.c, why_failed) */
			if (!n && next) {
				int64_t late = (int64_t)(sr_eng_clock() - next);

				if (late > (int64_t)e->late_worst) {
					e->late_worst = (uint64_t)late;
					e->late_worst_at = next;
				}
			}
			rx_ready = ready_of(e, ev, n);
		}
		atomic_store_explicit(&h->engine_sleeping, 0, memory_order_relaxed);
	}
	return NULL;
}

static struct sr_engine *_Atomic engine_for_status;

static_assert(SR_ENG_CNT_MAX <= 24 && SR_DROP_MAX <= 16, "sr_arena_hdr.app_cnt, app_drops");

static unsigned engine_nrx; /* set before the engine thread starts */
static int engine_rx_socks[SR_RX_MEMBERS];
/* random per daemon: member m's QPNs carry (m + salt) % SR_RX_MEMBERS, so
 * that two hosts' first processes do not number their QPs alike (3
 * random tag bits would make a cross-host QPN collision 1 in 8) */
static unsigned engine_rx_salt;

unsigned sr_engine_rx_qpn_bits(unsigned member)
{
	return (member + engine_rx_salt) % SR_RX_MEMBERS;
}

unsigned sr_engine_rx_members(void)
{
	return engine_nrx;
}

int sr_engine_rx_fd(unsigned member)
{
	return member < engine_nrx ? engine_rx_socks[member] : -1;
}

void sr_engine_status(char *buf, size_t len)
{
	static const char *const name[SR_ENG_CNT_MAX] = {
	    "tx_pkts",	    "tx_bytes",	     "rx_pkts",	      "rx_bytes",	   "retransmits",
	    "naks_sent",    "naks_received", "rnr_naks_sent", "rnr_naks_received", "probes",
	    "placed_ahead", "gso_sends",     "gso_datagrams", "gro_receives",	   "gro_datagrams",
	    "reqs_by_apps", "cnps_sent",     "cnps_received"};
	struct sr_engine *e = engine_for_status;
	struct sr_arena_hdr *h;
	size_t n = 0;

	buf[0] = 0;
	if (!e)
		return;
	h = e->arena;
	n += (size_t)snprintf(buf + n, len - n, "  roce v2 (udp %d):", SR_ROCE_PORT);
	for (int i = 0; i < SR_ENG_CNT_MAX && n < len; i++) {
		uint64_t v = atomic_load_explicit(&e->cnt[i], memory_order_relaxed) +
			     atomic_load_explicit(&h->app_cnt[i], memory_order_relaxed);

		/* UD datagrams and RC packets that posting threads sent themselves */
		if (i == SR_ENG_TX_PKTS || i == SR_ENG_TX_BYTES)
			v += atomic_load_explicit(&h->ud_direct[i == SR_ENG_TX_BYTES],
						  memory_order_relaxed) +
			     atomic_load_explicit(&h->wire_direct[i == SR_ENG_TX_BYTES],
						  memory_order_relaxed);
		if (i == SR_ENG_TX_PKTS)
			v += atomic_load_explicit(&h->wire_acks, memory_order_relaxed);
		n += (size_t)snprintf(buf + n, len - n, " %s %llu", name[i], (unsigned long long)v);
	}
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, " posted_direct %llu",
				      (unsigned long long)atomic_load_explicit(
					  &h->wire_direct[0], memory_order_relaxed));
	if (n < len)
		n += (size_t)snprintf(
		    buf + n, len - n, " acks_with_requests %llu",
		    (unsigned long long)atomic_load_explicit(&h->wire_acks, memory_order_relaxed));
	if (n < len)
		n += (size_t)snprintf(
		    buf + n, len - n, " rx_by_apps %llu rx_handed_full %llu",
		    (unsigned long long)atomic_load_explicit(&h->app_rx, memory_order_relaxed),
		    (unsigned long long)atomic_load_explicit(&h->rxfwd_full, memory_order_relaxed));
	/* datagrams each member of the socket group took (0: the engine's own) */
	if (n < len)
		n += (size_t)snprintf(
		    buf + n, len - n,
		    " rx_lends %llu rx_left_held %llu rx_stranded %llu acks_after_destroy %llu",
		    (unsigned long long)atomic_load_explicit(&inst(e)->rx_lends,
							     memory_order_relaxed),
		    (unsigned long long)atomic_load_explicit(&inst(e)->rx_left_held,
							     memory_order_relaxed),
		    (unsigned long long)atomic_load_explicit(&inst(e)->rx_stranded,
							     memory_order_relaxed),
		    (unsigned long long)atomic_load_explicit(&e->acks_gone, memory_order_relaxed));
	if (n < len) {
		uint64_t t = 0;

		for (unsigned m = 0; m < inst(e)->nrx; m++)
			t +=
			    atomic_load_explicit(&h->rx_members[m].takeovers, memory_order_relaxed);
		n +=
		    (size_t)snprintf(buf + n, len - n, " rx_takeovers %llu", (unsigned long long)t);
	}
	if (n < len)
		n +=
		    (size_t)snprintf(buf + n, len - n, " rx_members %u rx_by_member", inst(e)->nrx);
	for (unsigned m = 0; m < inst(e)->nrx && n < len; m++)
		n += (size_t)snprintf(buf + n, len - n, "%c%llu", m ? ',' : ' ',
				      (unsigned long long)atomic_load_explicit(
					  &h->rx_members[m].pkts, memory_order_relaxed));
	if (n < len)
		n += (size_t)snprintf(
		    buf + n, len - n, " ud_queue_full %llu",
		    (unsigned long long)atomic_load_explicit(&h->udtx_full, memory_order_relaxed));
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, " unknown_qpn 0x%06x unknown_slot 0x%06x",
				      atomic_load_explicit(&e->unknown_qpn, memory_order_relaxed),
				      atomic_load_explicit(&e->unknown_slot, memory_order_relaxed));
	for (int i = 1; i < SR_DROP_MAX && n < len; i++)
		n += (size_t)snprintf(
		    buf + n, len - n, " drop_%s %llu", sr_drop_name[i],
		    (unsigned long long)(atomic_load_explicit(&e->drops[i], memory_order_relaxed) +
					 atomic_load_explicit(&h->app_drops[i],
							      memory_order_relaxed)));
	if (n < len)
		snprintf(buf + n, len - n, "\n");
}

static pthread_t engine_thread;
static bool engine_running;
static int engine_db_fd = -1;

static int context_open(struct sr_engine *e, int sock)
{
	struct sr_devctx *ctx = calloc(1, sizeof(*ctx));
	int arena_fd = -1, ret;

	if (!ctx)
		return -ENOMEM;
	ctx->sock = sock;
	pthread_mutex_init(&ctx->sock_lock, NULL);
	char why[256];

	ret = sr_daemon_hello(sock, false, &ctx->dev, &arena_fd, why, sizeof(why));
	if (ret)
		goto fail;
	ctx->arena =
	    mmap(NULL, ctx->dev.arena_size, PROT_READ | PROT_WRITE, MAP_SHARED, arena_fd, 0);
	close(arena_fd);
	if (ctx->arena == MAP_FAILED) {
		ret = -errno;
		goto fail;
	}
	ctx->arena_size = ctx->dev.arena_size;
	e->ctx = ctx;
	e->arena = ctx->arena;
	return 0;
fail:
	free(ctx);
	return ret;
}

static void *engine_boot(void *arg)
{
	struct sr_engine *e = arg;
	struct epoll_event ev = {.events = EPOLLIN};
	uint32_t fd_id;
	int ret;

	ret = sr_ctx_reg_fd(e->ctx, inst(e)->db_fd, SR_FD_EVENT, &fd_id);
	if (ret) {
		sr_err("engine: cannot register its doorbell: %s", strerror(-ret));
		return NULL;
	}
	((struct sr_arena_hdr *)e->arena)->engine_fd_id = fd_id;
	ev.data.u32 = SR_RX_MEMBERS;
	epoll_ctl(inst(e)->ep_fd, EPOLL_CTL_ADD, inst(e)->db_fd, &ev);
	for (unsigned m = 0; m < inst(e)->nrx; m++) {
		ev.data.u32 = m;
		epoll_ctl(inst(e)->ep_fd, EPOLL_CTL_ADD, inst(e)->rx_socks[m], &ev);
	}
	return engine_main(e);
}

static void *engine_start_thread(void *arg)
{
	struct sr_engine *e = arg;
	int sock = inst(e)->rx_sock; /* carried in rx_sock until the context is open */
	int ret;

	inst(e)->rx_sock = -1;
	ret = context_open(e, sock);
	if (ret) {
		sr_err("engine: cannot open its context: %s", strerror(-ret));
		return NULL;
	}
	if (!engine_nrx) {
		sr_err("engine: cannot bind UDP port %d: %s; RoCEv2 is off on this host",
		       SR_ROCE_PORT, strerror(-engine_rx_socks[0]));
		return NULL;
	}
	inst(e)->nrx = engine_nrx;
	memcpy(inst(e)->rx_socks, engine_rx_socks, sizeof(inst(e)->rx_socks));
	inst(e)->rx_sock = inst(e)->rx_socks[0];
	/* GRO on every member: the kernel coalesces before it picks one */
	for (unsigned m = 0; m < inst(e)->nrx; m++)
		if (sr_udp_gro(inst(e)->rx_socks[m]) && !m)
			sr_info("engine: no UDP GRO on this kernel: one datagram per receive");
	if (inst(e)->nrx == 1)
		sr_info("engine: no SO_REUSEPORT group: applications' threads read nothing");
	sr_roce_pool(engine_roce(e), inst(e)->rx_sock, SR_ROCE_PORT);
	sr_info("engine: RoCEv2 on UDP port %d", SR_ROCE_PORT);
	engine_for_status = e;
	return engine_boot(e);
}

int sr_engine_start(int sock)
{
	struct sr_engine *e;
	int qp1_sock = -1;
	static int roce = -1;
	int ret;

	if (!sr_env_on("SOFTRDMA_ROCE", &roce))
		return -ENOTSUP;
	e = malloc(sizeof(struct engine_inst));
	rx_slots = calloc(SR_ROCE_RX_BATCH, sizeof(*rx_slots));
	if (!e || !rx_slots || engine_new(e))
		return -ENOMEM;
	inst(e)->db_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	inst(e)->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	if (inst(e)->db_fd < 0 || inst(e)->ep_fd < 0)
		return -ENOMEM;
	engine_db_fd = inst(e)->db_fd;
	/* bound now: the daemon gives processes members before the thread runs */
	engine_rx_salt = sr_random32() % SR_RX_MEMBERS;
	ret = sr_udp_socket_group(SR_ROCE_PORT, SR_QPN_MEMBER_SHIFT, engine_rx_salt,
				  engine_rx_socks, SR_RX_MEMBERS, &qp1_sock);
	engine_nrx = ret > 0 ? (unsigned)ret : 0;
	if (ret < 0)
		engine_rx_socks[0] = ret; /* the thread says why */
	ret = sr_eng_gsi_init(qp1_sock);
	if (ret)
		return ret;
	inst(e)->rx_sock = sock;
	e->taps = &sr_eng_fault_taps;
	ret = pthread_create(&engine_thread, NULL, engine_start_thread, e);
	if (ret)
		return -ret;
	engine_running = true;
	return 0;
}

struct sr_engine *sr_engine_attach(int sock)
{
	struct sr_engine *e = malloc(sizeof(struct engine_inst));

	if (!e)
		return NULL;
	if (!rx_slots)
		rx_slots = calloc(SR_ROCE_RX_BATCH, sizeof(*rx_slots));
	if (engine_new(e) || !rx_slots || context_open(e, sock)) {
		free(e->slots);
		free(e);
		return NULL;
	}
	e->taps = &sr_eng_fault_taps;
	e->now = sr_eng_clock();
	return e;
}

bool sr_engine_running(void)
{
	return atomic_load_explicit(&engine_for_status, memory_order_acquire) != NULL;
}

void sr_engine_kick(void)
{
	uint64_t one = 1;

	if (engine_db_fd >= 0 && write(engine_db_fd, &one, sizeof(one)) < 0)
		sr_dbg("engine: kick: %m");
}

int sr_engine_mcast(const uint8_t *mgid, bool join)
{
	struct sr_engine *e = engine_for_status; /* set once its socket is bound */

	return e ? sr_eng_mcast_join(inst(e)->rx_sock, mgid, join) : 0;
}

void sr_engine_stop(void)
{
	uint64_t one = 1;

	if (!engine_running)
		return;
	atomic_store_explicit(&engine_stop, 1, memory_order_relaxed);
	if (write(engine_db_fd, &one, sizeof(one)) < 0)
		sr_dbg("engine: stop: %m");
	pthread_join(engine_thread, NULL);
	engine_running = false;
}
