/*
 * The receive half of placement (b) (docs/architecture.md, "The receive
 * half"): a thread that polls a CQ and finds it empty, in a process with
 * QPs whose peers are on other hosts, reads its process's member of the
 * RoCEv2 engine's socket group itself and runs the engine's own code
 * (transport/core.c, req.c, resp.c) on what it gets, under each QP's
 * wtx_lock, with the QP's transport state in the arena.  The ACK and the
 * peer's next request that a ping-pong waits for then land and complete in
 * the polling thread, and no thread is woken for them: on a machine whose
 * CPUs are busy polling, that wake-up was most of a message's latency.
 *
 * The daemon gives each process a member of the group (SR_OP_WIRE_RX), and
 * numbers its QPs so that the kernel steers their datagrams to it
 * (wire/udp.c, udp_steer), so a thread reads its own process's traffic:
 * one preempted or stopped holds up nobody else's.  A datagram for another
 * process's QP (a kernel that coalesced two flows) is processed all the
 * same: the same-host executor can execute into any process's memory (the
 * key table, mrmap.c).  What only the engine takes (QP1's MADs for the
 * daemon's CM agent, multicast) goes to it through the arena (rxfwd).
 * This thread's part of the protocol is the responder's (execution, ACKs,
 * NAKs, READ responses), the completer's (completions) and, while the
 * engine lends it the member, the requester's after an ACK or response
 * (a stream's next packets: transport/req.c, app_sends), sent before it lets
 * go of the QP's lock and never before the engine's own are out, so that
 * neither overtakes the other.  What the engine must take over (something
 * to send when the member is not lent, a timer it does not know, a grant
 * it must keep) it is told through the doorbell after the batch.  While
 * threads poll, the engine leaves the member to them; a thread about to
 * block in the kernel tells it so (sr_wire_rx_sleep), and one that stops
 * polling otherwise has its datagrams taken by the engine within
 * SR_ENG_RX_RECHECK_NS (engine.c, rx_lend).  One reader of a member at a
 * time (transport/rx_member.h), and nobody waits for another.
 *
 * Injected faults that drop, duplicate or corrupt it applies itself, from
 * the rules in the arena (transport/fault_decide.c), to what it receives and
 * what it sends.  Off while the engine has packets to hold for a fault
 * (delay, reorder) or a capture to write (rx_taps): every datagram then
 * goes through the engine.  SOFTRDMA_WIRE_RX=0 turns it off.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"
#include "core/shmlock.h"
#include "core/thread_obj.h"
#include "core/doorbell.h"
#include "transport/transport.h"
#include "transport/rx_member.h"
#include "shm/exec.h"
#include "shm/fdcache.h"
#include "datapath/wire_rx.h"
#include "roce/roce.h"
#include "verbs/objects.h"

#define RX_BUFS 4 /* GRO buffers per look (64 KiB each) */

/* A thread's receive half for one context: a small engine of its own
 * (transmit batch, counters, its records of the QPs it touched). */
struct rx_half {
	struct sr_context *ctx;
	uint64_t serial; /* ctx's: a closed context's address may come back */
	struct sr_engine e;
	struct sr_roce roce; /* its link: its process's one socket */
	uint64_t shown_cnt[SR_ENG_CNT_MAX], shown_drops[SR_DROP_MAX];
	uint64_t poll_noted;  /* when this thread last wrote its member's poll_at */
	uint32_t posted_seen; /* ctx->wire_posted at its last poll */
	bool kick;	      /* it queued datagrams for the engine */
	struct sr_roce_rxbuf b[RX_BUFS];
};

static bool rx_on(void)
{
	static int on = -1;

	return sr_env_on("SOFTRDMA_WIRE_RX", &on);
}

static bool tx_on(void)
{
	static int on = -1;

	return sr_env_on("SOFTRDMA_WIRE_SEND", &on);
}

/* Whether this thread sends its QPs' requests too (transport/req.c,
 * app_sends): while the engine leaves its member to its process's threads
 * and has nothing to capture or hold (rx_taps).  Drops, duplicates and
 * corruptions this thread applies itself (transport/fault_decide.c). */
static bool may_send(struct sr_arena_hdr *h, struct sr_rx_member *mb)
{
	return tx_on() && atomic_load_explicit(&mb->lent, memory_order_relaxed) &&
	       !atomic_load_explicit(&h->rx_taps, memory_order_relaxed);
}

static void half_fini(struct rx_half *r)
{
	if (r->e.slots) {
		for (uint32_t i = 0; i < SR_MAX_QPS; i++)
			free(r->e.slots[i]);
		free(r->e.slots);
	}
	r->e.slots = NULL;
	free(r->e.stage);
	r->e.stage = NULL;
}

static void half_free(void *p)
{
	if (p) {
		half_fini(p);
		free(p);
	}
}

static struct sr_thread_obj halves = SR_THREAD_OBJ(sizeof(struct rx_half), half_free);

/* This thread's receive half for ctx, made at its first use (NULL: none). */
static struct rx_half *half(struct sr_context *ctx)
{
	struct rx_half *r;
	uint16_t sport;
	int sock;

	r = sr_thread_obj(&halves);
	if (!r)
		return NULL;
	if (r->ctx == ctx && r->serial == ctx->serial)
		return r;
	sock = sr_exec_wire_sock(&sport);
	if (sock < 0)
		return NULL;
	/* its first use, or another context (a second ibv_open_device) */
	half_fini(r);
	memset(r->shown_cnt, 0, sizeof(r->shown_cnt));
	memset(r->shown_drops, 0, sizeof(r->shown_drops));
	r->poll_noted = 0;
	r->ctx = NULL;
	if (sr_eng_init(&r->e, &ctx->dc, ctx->dc.arena, true, true))
		return NULL;
	sr_roce_init(&r->roce, &r->e);
	sr_roce_one_sock(&r->roce, sock, sport);
	r->e.link = &r->roce.link;
	r->ctx = ctx;
	r->serial = ctx->serial;
	return r;
}

/* ctx's member of the engine's socket group, asked of the daemon once
 * (-1: none). */
static int rx_sock(struct sr_context *ctx)
{
	uint32_t st = atomic_load_explicit(&ctx->wire_rx_state, memory_order_acquire);
	struct sr_req req;
	struct sr_rep rep;
	int fd = -1, nfds = 1;

	if (st)
		return st == 1 ? ctx->wire_rx_fd : -1;
	pthread_mutex_lock(&ctx->lock);
	if (!atomic_load_explicit(&ctx->wire_rx_state, memory_order_relaxed)) {
		memset(&req, 0, sizeof(req));
		req.op = SR_OP_WIRE_RX;
		if (!sr_ctx_request(&ctx->dc, &req, &rep, NULL, 0, &fd, &nfds) && nfds == 1 &&
		    fd >= 0 && rep.handle && rep.handle < SR_RX_MEMBERS) {
			ctx->wire_rx_fd = fd;
			ctx->wire_rx_member = rep.handle;
		} else if (fd >= 0) {
			close(fd);
		}
		atomic_store_explicit(&ctx->wire_rx_state, ctx->wire_rx_fd >= 0 ? 1 : 2,
				      memory_order_release);
	}
	pthread_mutex_unlock(&ctx->lock);
	return atomic_load_explicit(&ctx->wire_rx_state, memory_order_acquire) == 1
		   ? ctx->wire_rx_fd
		   : -1;
}

static void take(struct sr_engine *e, uint8_t *buf, uint32_t len, const struct sr_link_addr *from)
{
	struct rx_half *r = (struct rx_half *)((char *)e - offsetof(struct rx_half, e));
	uint32_t dqpn = sr_bth_dqpn_raw(buf, len);
	struct sr_pkt p;

	if (dqpn == 1 || dqpn == SR_QPN_MCAST) {
		r->kick |= sr_eng_rxfwd(e->arena, buf, len, from);
		return;
	}
	/* injected faults, as the engine would apply them (drop, dup, corrupt) */
	for (unsigned times = sr_eng_rx_copies(e, buf, len, from); times--;) {
		if (!sr_eng_rx_parse(e, buf, len, from, &p))
			return;
		sr_eng_rx_unicast(e, &p, from->sgid, from->dgid);
		/* for a QP that is gone: the engine counts it (not twice), and
		 * may ACK it again */
		if (e->app_unknown) {
			e->app_unknown = false;
			sr_eng_count(&e->cnt[SR_ENG_RX_PKTS], (uint64_t)-1);
			sr_eng_count(&e->cnt[SR_ENG_RX_BYTES], (uint64_t) - (uint64_t)p.paylen);
			r->kick |= sr_eng_rxfwd(e->arena, buf, len, from);
			return;
		}
	}
}

static void ring(struct rx_half *r, struct sr_qp_shm *qp)
{
	struct sr_arena_hdr *h = r->e.arena;

	if (sr_db_ring(h, qp) && h->engine_fd_id)
		sr_fdcache_signal(&r->ctx->dc, h->engine_fd_id);
}

/* After a batch: the grants this thread's completions made possible, and
 * what the engine must take over. */
static void hand_over(struct rx_half *r)
{
	struct sr_engine *e = &r->e;
	struct sr_arena_hdr *h = e->arena;

	while (e->pending) {
		struct sr_eng_slot *s = e->pending;
		struct sr_qp_shm *qp = sr_exec_qp_lookup(e->ctx, s->qpn);

		e->pending = s->next_pending;
		s->grant_pending = false;
		if (qp && s->q && sr_eng_qp_is(e, qp, s->q))
			sr_eng_req_grant(e, qp, s->q, false);
	}
	while (e->active) {
		struct sr_eng_slot *s = e->active;
		struct sr_qp_shm *qp = sr_exec_qp_lookup(e->ctx, s->qpn);
		struct sr_eng_qp *q = s->q;
		bool need = false;

		e->active = s->next_active;
		s->active = false;
		if (!qp || !q || !sr_eng_qp_is(e, qp, q))
			continue;
		sr_shm_lock(&qp->wtx_lock);
		/* a timer the engine will not look at in time, or requests to send */
		need = q->grant.run_wanted ||
		       (q->comp.deadline &&
			(!q->grant.eng_due || q->comp.deadline < q->grant.eng_due));
		sr_shm_unlock(&qp->wtx_lock);
		if (need)
			ring(r, qp);
	}
	if (r->kick) {
		r->kick = false;
		if (sr_db_sleeping(h) && h->engine_fd_id)
			sr_fdcache_signal(&r->ctx->dc, h->engine_fd_id);
	}
	/* what it counted, into the host's counters (`softrdma status`) */
	sr_eng_counts_publish(e, r->shown_cnt, r->shown_drops);
}

int sr_wire_rx_poll(struct sr_context *ctx)
{
	struct sr_arena_hdr *h = ctx->dc.arena;
	struct sr_rx_member *mb;
	struct rx_half *r;
	uint64_t hold;
	uint32_t posted;
	int sock, n;

	if (!atomic_load_explicit(&ctx->wire_rx_want, memory_order_relaxed) || !rx_on() ||
	    atomic_load_explicit(&h->rx_taps, memory_order_relaxed))
		return 0;
	sock = rx_sock(ctx);
	r = sock >= 0 ? half(ctx) : NULL;
	if (!r)
		return 0;
	mb = &h->rx_members[ctx->wire_rx_member];
	r->e.now = sr_eng_clock();
	r->e.app_tx = may_send(h, mb);
	/* its ACKs that waited for a request in vain go now (resp.c) */
	if (r->e.dacks) {
		sr_eng_resp_dacks(&r->e);
		sr_eng_flush_tx(&r->e);
	}
	/* the poll right after this thread posted (or another one did)
	 * looks next time: the peer cannot have answered yet */
	posted = atomic_load_explicit(&ctx->wire_posted, memory_order_relaxed);
	if (posted != r->posted_seen) {
		r->posted_seen = posted;
		return 0;
	}
	/* the engine leaves the member to pollers that keep polling: say so,
	 * not on every look (one cache line for the process's threads), and
	 * when this polling began (a thread that looks a few times before it
	 * sleeps, as rsockets' blocking calls do, is not worth lending to:
	 * engine.c, rx_lend) */
	if (r->e.now - r->poll_noted > SR_ENG_RX_LEND_NS / 8) {
		uint64_t last = atomic_load_explicit(&mb->poll_at, memory_order_relaxed);

		if (!last || r->e.now - last > SR_ENG_RX_LEND_NS)
			atomic_store_explicit(&mb->poll_since, r->e.now, memory_order_relaxed);
		atomic_store_explicit(&mb->poll_at, r->e.now, memory_order_relaxed);
		r->poll_noted = r->e.now;
	}
	/* another reader is at it (a thread, the engine): what it takes it
	 * processes, in order */
	n = 0;
	sr_exec_signals_hold(); /* events after the ACKs (shm/exec.h) */
	for (int looks = 0; looks < 4; looks++) {
		int got;

		hold = sr_rx_take(mb, r->e.now);
		if (!hold)
			break;
		got = sr_roce_rx_read(&r->roce, sock, r->b, RX_BUFS, take);
		if (got > 0) {
			n += got;
			sr_eng_resp_acks(&r->e);
			/* before any grant (no posting thread overtakes it),
			 * before a later reader's answers, and before the
			 * events of what it completed */
			sr_eng_flush_tx(&r->e);
			sr_exec_signals_raise(false);
		}
		/* the engine left a datagram to us that came after our look */
		if (!sr_rx_give(mb, hold))
			break;
	}
	sr_exec_signals_raise(true);
	if (n <= 0)
		return 0;
	atomic_fetch_add_explicit(&mb->pkts, (uint64_t)n, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->app_rx, (uint64_t)n, memory_order_relaxed);
	hand_over(r);
	return n;
}

void sr_wire_rx_sleep(struct sr_context *ctx)
{
	struct sr_arena_hdr *h = ctx->dc.arena;
	struct sr_rx_member *mb;
	struct rx_half *r;

	if (atomic_load_explicit(&ctx->wire_rx_state, memory_order_relaxed) != 1)
		return;
	mb = &h->rx_members[ctx->wire_rx_member];
	atomic_store_explicit(&mb->poll_at, 0, memory_order_relaxed);
	r = sr_thread_obj_peek(&halves);
	if (r)
		r->poll_noted = 0; /* when it polls again, it says so at once */
	/* the engine lent the member: it takes it back before this thread
	 * sleeps (a Dekker pair with engine.c's rx_lend; the engine may be
	 * on its way to sleep, so it is woken whether it said so or not) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&mb->lent, memory_order_relaxed) && h->engine_fd_id)
		sr_fdcache_signal(&ctx->dc, h->engine_fd_id);
}
