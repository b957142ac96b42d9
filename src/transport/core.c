/*
 * The transport's core: a thread's instance (sr_eng_init), a QP's
 * transport state (sr_eng_qp in the arena, the slot that is this thread's
 * record of it), what it sends through its link (link.h), and a received
 * packet's checks up to the requester or responder of its QP.  The
 * daemon's engine thread (src/engine) runs it, and so may any thread that
 * maps the arena and holds the QP's wtx_lock, which guards every field of
 * its sr_eng_qp (req.c, resp.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"
#include "core/procstat.h"
#include "core/shmlock.h"
#include "core/doorbell.h"
#include "transport/transport.h"
#include "transport/rx_member.h"
#include "shm/exec.h"
#include "shm/devctx.h"

/* ---- who holds a member of the receive socket group (rx_member.h) ---- */

bool sr_rx_thread_runnable(int32_t tid, uint64_t now)
{
	/* a thread that keeps finding the same hold looks once a millisecond */
	static __thread int32_t seen_tid;
	static __thread uint64_t seen_at;
	static __thread bool seen_runnable;
	char path[48], buf[256];
	const char *st;

	if (tid <= 0)
		return false;
	if (tid == seen_tid && now - seen_at < 1000000)
		return seen_runnable;
	seen_tid = tid;
	seen_at = now;
	seen_runnable = false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	st = sr_procstat_fields(path, buf, sizeof(buf)); /* NULL: gone */
	seen_runnable = st && st[0] == 'R';
	return seen_runnable;
}

int32_t sr_rx_self_tid(void)
{
	static __thread int32_t tid;

	if (!tid)
		tid = (int32_t)syscall(SYS_gettid);
	return tid;
}

/* ---- per-QP transport state ---- */

bool sr_eng_qp_is(const struct sr_engine *e, const struct sr_qp_shm *qp, const struct sr_eng_qp *q)
{
	const struct sr_eng_slot *s = sr_eng_slot_at(e, qp->qpn);
	uint64_t off = (uint64_t)((const char *)qp - (const char *)e->arena);

	return s && s->q == q && s->qpn == qp->qpn && s->off == off &&
	       s->gen == atomic_load_explicit(&qp->wire_gen, memory_order_acquire) &&
	       s->st_off == qp->eng_off && s->cnt == qp->sq.wqe_cnt;
}

void sr_eng_state_fresh(const struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t gen, uint32_t cnt)
{
	if (q->qpn != qp->qpn || q->gen != gen || q->swqe_cnt != cnt) {
		/* qpn stays: it names the chunk's slot for lock-free readers */
		memset((char *)q + offsetof(struct sr_eng_qp, gen), 0,
		       sr_eng_state_size(cnt) - offsetof(struct sr_eng_qp, gen));
		q->qpn = qp->qpn;
		q->gen = gen;
		q->swqe_cnt = cnt;
		q->resp.cur_op = 0xff;
	}
}

struct sr_eng_qp *sr_eng_qp_get(struct sr_engine *e, struct sr_qp_shm *qp)
{
	uint32_t idx = sr_qpn_index(qp->qpn) % SR_MAX_QPS;
	uint64_t off = (uint64_t)((char *)qp - (char *)e->arena);
	uint32_t gen = atomic_load_explicit(&qp->wire_gen, memory_order_acquire);
	uint64_t st_off = qp->eng_off;
	uint32_t cnt = qp->sq.wqe_cnt;
	struct sr_eng_slot *s = e->slots[idx];
	struct sr_eng_qp *q;

	if (s && s->q && sr_eng_qp_is(e, qp, s->q))
		return s->q;
	/* the chunk must be one the daemon could have given: inside the
	 * arena, after its header, whole (any process of the user can write
	 * the QP object) */
	if (!st_off || !cnt || (cnt & (cnt - 1)) || cnt > SR_MAX_QP_WR * 2 ||
	    st_off < sizeof(struct sr_arena_hdr) || st_off % 8 ||
	    st_off + sr_eng_state_size(cnt) > e->ctx->arena_size)
		return NULL;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		e->slots[idx] = s;
	}
	/* a new QP in this slot, or this one reset or re-routed: start over,
	 * unless another thread already has for this generation (the chunk
	 * says whose it is; the slot is only this thread's copy) */
	q = sr_arena_at(e->arena, st_off);
	sr_shm_lock(&qp->wtx_lock);
	sr_eng_state_fresh(qp, q, gen, cnt);
	sr_shm_unlock(&qp->wtx_lock);
	s->q = q;
	s->qpn = qp->qpn;
	s->gen = gen;
	s->cnt = cnt;
	s->off = off;
	s->st_off = st_off;
	return q;
}

void sr_eng_activate(struct sr_engine *e, struct sr_eng_qp *q)
{
	struct sr_eng_slot *s = sr_eng_slot_of(e, q);

	if (!e->app) /* the receive half asks the engine if it must look sooner */
		q->grant.eng_due = q->comp.deadline;
	if (s->active)
		return;
	s->active = true;
	s->next_active = e->active;
	e->active = s;
}

/* ---- posting threads' sending (req.c sr_eng_req_grant) ---- */

void sr_eng_grant_later(struct sr_engine *e, struct sr_eng_qp *q)
{
	struct sr_eng_slot *s = sr_eng_slot_of(e, q);

	if (s->grant_pending)
		return;
	s->grant_pending = true;
	s->next_pending = e->pending;
	e->pending = s;
}

/* ---- transmit ---- */

void sr_eng_flush_tx(struct sr_engine *e)
{
	unsigned sent = e->link->ops->flush(e->link);

	e->nstage = 0;
	e->app_sent = false;
	if (!e->app && sent) { /* receive halves' sending waits for this (req.c, app_sends) */
		struct sr_arena_hdr *h = e->arena;

		atomic_store_explicit(&h->eng_tx_flushed, ++e->tx_flushes, memory_order_release);
	}
}

void sr_eng_send(struct sr_engine *e, const struct sr_link_addr *to, const uint8_t *hdr,
		 unsigned hlen, const struct iovec *pay, unsigned npay, uint32_t paylen)
{
	/* room for it and a duplicate the taps may add: the link never
	 * flushes by itself (eng_tx_flushed counts every flush) */
	if (e->link->ops->queued(e->link) + 2 > SR_ENG_TX_BATCH)
		sr_eng_flush_tx(e);
	sr_eng_count(&e->cnt[SR_ENG_TX_PKTS], 1);
	sr_eng_count(&e->cnt[SR_ENG_TX_BYTES], paylen);
	e->link->ops->send(e->link, to, hdr, hlen, pay, npay, paylen);
}

/*
 * A READ response is computed from memory its owner may be writing at the
 * same moment (a store that serves READs while it updates them): the ICRC
 * is computed when the packet is queued and the kernel copies the payload
 * at the flush, so a byte changed in between left as a packet whose ICRC
 * does not match, which the requester dropped (drop_icrc) and asked for
 * again, for ever under a steady writer.  An HCA reads the memory once and
 * sends what it read, whatever it was; so do we, from a copy.  Room is
 * kept for the packet and a duplicate of it (fault_decide.c), so that no
 * flush comes between the copy and the packets that point at it.
 */
const void *sr_eng_stage(struct sr_engine *e, const void *src, uint32_t len)
{
	/* glibc's: knowing len <= 4096, GCC would expand the call into a
	 * rep movsq, 2-3x slower here (13% of a READ responder) */
	static void *(*const volatile copy)(void *, const void *, size_t) = memcpy;
	uint8_t *dst;

	if (len > SR_ENG_STAGE_MAX)
		return src;
	if (e->link->ops->queued(e->link) + 2 > SR_ENG_TX_BATCH || e->nstage == SR_ENG_TX_BATCH)
		sr_eng_flush_tx(e);
	if (!e->stage && !(e->stage = malloc((size_t)SR_ENG_TX_BATCH * SR_ENG_STAGE_MAX)))
		return src;
	dst = e->stage + (size_t)e->nstage++ * SR_ENG_STAGE_MAX;
	copy(dst, src, len);
	return dst;
}

/* ---- receive ---- */

bool sr_eng_rxfwd(void *arena, const uint8_t *buf, uint32_t len, const struct sr_link_addr *from)
{
	struct sr_arena_hdr *h = arena;
	struct sr_udtx_slot *t;
	uint64_t pos;

	if (len > SR_UDTX_DATA || !(t = sr_slotq_claim(sr_rxfwd_q(h), &pos))) {
		atomic_fetch_add_explicit(&h->rxfwd_full, 1, memory_order_relaxed);
		return false; /* lost as on a full receive queue; MADs are resent */
	}
	memcpy(t->sgid, from->sgid, 16);
	memcpy(t->dgid, from->dgid, 16);
	t->qpn = from->flow; /* (the link's word: RoCEv2's source port) */
	t->hlen = 0;
	t->paylen = len;
	memcpy(t->data, buf, len);
	sr_mpsc_publish(&t->seq, pos, 0);
	return true;
}

static void add_new(const _Atomic uint64_t *v, uint64_t *shown, _Atomic uint64_t *to, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t x = atomic_load_explicit(&v[i], memory_order_relaxed);

		if (x != shown[i]) {
			atomic_fetch_add_explicit(&to[i], x - shown[i], memory_order_relaxed);
			shown[i] = x;
		}
	}
}

int sr_eng_init(struct sr_engine *e, struct sr_devctx *ctx, void *arena, bool app, bool slots)
{
	memset(e, 0, sizeof(*e));
	e->ctx = ctx;
	e->arena = arena;
	e->app = app;
	e->pid = (int32_t)getpid();
	/* ACKs may go with requests (resp.c ack_defer) */
	e->dack_ns = sr_eng_dack_ns();
	if (slots && !(e->slots = calloc(SR_MAX_QPS, sizeof(*e->slots))))
		return -ENOMEM;
	return 0;
}

void sr_eng_counts_publish(const struct sr_engine *e, uint64_t *shown_cnt, uint64_t *shown_drops)
{
	struct sr_arena_hdr *h = e->arena;

	add_new(e->cnt, shown_cnt, h->app_cnt, SR_ENG_CNT_MAX);
	add_new(e->drops, shown_drops, h->app_drops, SR_DROP_MAX);
}

static void drop(struct sr_engine *e, enum sr_drop why)
{
	sr_eng_count(&e->drops[why], 1);
}

bool sr_eng_opcode_fits(uint8_t opcode, uint32_t type)
{
	switch (opcode & 0xe0) {
	case SR_TR_XRC:
		return type == (sr_opcode_info[opcode].flags & SR_OPF_REQ ? IBV_QPT_XRC_RECV
									  : IBV_QPT_XRC_SEND);
	case SR_TR_RC:
		return type == IBV_QPT_RC;
	case SR_TR_UC:
		return type == IBV_QPT_UC;
	case SR_TR_UD:
		return type == IBV_QPT_UD;
	default:
		return false;
	}
}

bool sr_eng_rx_parse(struct sr_engine *e, const uint8_t *buf, uint32_t len,
		     const struct sr_link_addr *from, struct sr_pkt *p)
{
	enum sr_drop why = sr_pkt_parse(buf, len, p);

	if (why) {
		drop(e, why);
		return false;
	}
	if (!e->link->ops->rx_check(e->link, buf, len, from)) {
		drop(e, SR_DROP_ICRC);
		return false;
	}
	sr_eng_count(&e->cnt[SR_ENG_RX_PKTS], 1);
	sr_eng_count(&e->cnt[SR_ENG_RX_BYTES], p->paylen);
	return true;
}

/* Notes what the QPN table's slot of a QPN held when a packet for it found
 * no QP there: none, or another QP (status: unknown_qpn, unknown_slot);
 * logged once per QPN (info). */
static void unknown_qpn(struct sr_engine *e, uint32_t qpn)
{
	const struct sr_qpn_slot *slot = &sr_arena_qptab(e->arena)[sr_qpn_index(qpn) % SR_MAX_QPS];
	uint64_t off = atomic_load_explicit(&slot->obj_off, memory_order_acquire);
	const struct sr_qp_shm *q = sr_arena_ptr(e->arena, off);
	uint32_t there = q ? q->qpn : 0;

	if (qpn == atomic_load_explicit(&e->unknown_qpn, memory_order_relaxed))
		return;
	atomic_store_explicit(&e->unknown_qpn, qpn, memory_order_relaxed);
	atomic_store_explicit(&e->unknown_slot, there, memory_order_relaxed);
	if (q)
		sr_info("a packet for QPN 0x%06x: its slot holds QPN 0x%06x (state %u)", qpn, there,
			atomic_load_explicit(&q->state, memory_order_relaxed));
	else
		sr_info("a packet for QPN 0x%06x: no QP in its slot", qpn);
}

void sr_eng_rx_unicast(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		       const uint8_t *dgid)
{
	struct sr_qp_shm *qp = sr_exec_peer_lookup(e->ctx, p->bth.dqpn);
	struct sr_eng_qp *q;

	if (!qp) {
		if (e->app) { /* the engine may still answer it (resp.c, sr_eng_resp_gone) */
			e->app_unknown = true;
			return;
		}
		/* the QP is there but its process has exited, or there is none */
		if (sr_exec_qp_lookup(e->ctx, p->bth.dqpn)) {
			drop(e, SR_DROP_GONE);
		} else {
			drop(e, SR_DROP_QPN);
			unknown_qpn(e, p->bth.dqpn);
		}
		sr_eng_resp_gone(e, p, sgid, dgid);
		return;
	}
	/* a CNP is for a requester: a connected QP that sends */
	if ((p->op->flags & SR_OPF_CNP) ? qp->type == IBV_QPT_UD || qp->type == IBV_QPT_XRC_RECV
					: !sr_eng_opcode_fits(p->bth.opcode, qp->type)) {
		drop(e, SR_DROP_TRANSPORT);
		return;
	}
	if (p->bth.pkey != SR_DEFAULT_PKEY && p->bth.pkey != 0x7fff) {
		drop(e, SR_DROP_PKEY); /* one partition: the default (C9-42) */
		return;
	}
	if (qp->type == IBV_QPT_UD) {
		sr_eng_resp_ud(e, qp, p, sgid, dgid);
		return;
	}
	/* RC/UC/XRC: only from the peer the QP is connected to, over the wire */
	if (!qp->wire || memcmp(qp->dgid, sgid, 16) || memcmp(qp->sgid, dgid, 16)) {
		drop(e, SR_DROP_SRC);
		return;
	}
	q = sr_eng_qp_get(e, qp);
	if (!q) {
		drop(e, SR_DROP_STATE); /* no state chunk: not a QP the daemon made */
		return;
	}
	if (p->op->flags & SR_OPF_CNP)
		sr_eng_req_cnp(e, qp, q);
	else if (p->op->flags & SR_OPF_REQ)
		sr_eng_resp_rx(e, qp, q, p, sgid, dgid);
	else
		sr_eng_comp_rx(e, qp, q, p);
}
