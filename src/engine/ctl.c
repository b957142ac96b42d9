/*
 * The engine's control mailbox (see ctl.h), the status snapshot it
 * answers with, the capture (`softrdma trace`: every datagram the engine
 * sends and receives, through wire/pcap.h), and the per-QP retransmission
 * counts that `softrdma status` shows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/idalloc.h"
#include "core/log.h"
#include "core/shmlock.h"
#include "engine/ctl.h"
#include "engine/internal.h"
#include "shm/exec.h"
#include "shm/devctx.h"
#include "wire/pcap.h"

enum ctl_kind { CTL_FAULT = 1, CTL_TRACE, CTL_SNAP };

static struct {
	_Atomic uint32_t req, ack;
	enum ctl_kind kind;
	struct sr_fault_cfg cfg; /* CTL_FAULT */
	bool cfg_on;
	struct sr_pcap *pc, *old; /* CTL_TRACE: in, out */
	uint64_t pkts;		  /* CTL_TRACE: out */
	struct sr_eng_snap snap;  /* CTL_SNAP: out */
} mb;

/* the initial spec, taken by the engine at its first turn */
static struct sr_fault_cfg initial;
static _Atomic bool initial_set;
/* the daemon's copy of the spec in force (its thread only) */
static char fault_text[SR_FAULT_TEXT] = "off";

const char *sr_engine_fault_text(void)
{
	return fault_text;
}

void sr_engine_fault_initial(const struct sr_fault_cfg *cfg)
{
	if (!sr_fault_cfg_on(cfg))
		return;
	initial = *cfg;
	atomic_store_explicit(&initial_set, true, memory_order_release);
	snprintf(fault_text, sizeof(fault_text), "%s", cfg->text);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Posts the request filled in mb and waits for the engine to take it. */
static int post(enum ctl_kind kind)
{
	uint32_t r = atomic_load_explicit(&mb.req, memory_order_relaxed);
	uint64_t end;

	mb.kind = kind;
	/* the request's fields happen-before the engine's read of them */
	atomic_store_explicit(&mb.req, r + 1, memory_order_release);
	sr_engine_kick();
	end = mono_ms() + SR_ENG_CTL_WAIT_MS;
	while (atomic_load_explicit(&mb.ack, memory_order_acquire) != r + 1) {
		struct timespec ts = {0, 50000};

		if (mono_ms() > end)
			return -ETIMEDOUT;
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* A request the engine has not taken yet keeps the mailbox. */
static int ready(void)
{
	if (!sr_engine_running())
		return -ENOTSUP;
	if (atomic_load_explicit(&mb.ack, memory_order_acquire) !=
	    atomic_load_explicit(&mb.req, memory_order_relaxed))
		return -EBUSY;
	return 0;
}

int sr_engine_fault(const struct sr_fault_cfg *cfg)
{
	int ret = ready();

	if (ret)
		return ret;
	mb.cfg_on = sr_fault_cfg_on(cfg);
	if (mb.cfg_on)
		mb.cfg = *cfg;
	ret = post(CTL_FAULT);
	if (!ret || ret == -ETIMEDOUT)
		snprintf(fault_text, sizeof(fault_text), "%s", mb.cfg_on ? cfg->text : "off");
	return ret;
}

int sr_engine_trace(struct sr_pcap *pc, struct sr_pcap **old, uint64_t *pkts)
{
	int ret = ready();

	*old = NULL;
	*pkts = 0;
	if (ret)
		return ret;
	mb.pc = pc;
	ret = post(CTL_TRACE);
	if (!ret) {
		*old = mb.old;
		*pkts = mb.pkts;
	}
	return ret;
}

int sr_engine_snapshot(const struct sr_eng_snap **out)
{
	int ret = ready();

	if (ret)
		return ret;
	ret = post(CTL_SNAP);
	if (!ret)
		*out = &mb.snap;
	return ret;
}

/* ---- the engine's side ---- */

struct vis_qp {
	uint32_t qpn, gen;
	uint64_t retrans;
};

void sr_eng_vis_retrans(struct sr_engine *e, uint32_t qpn, uint32_t gen, uint64_t before)
{
	uint64_t now = atomic_load_explicit(&e->cnt[SR_ENG_RETRANS], memory_order_relaxed);
	struct vis_qp *v;

	if (now == before)
		return;
	if (!e->vis) {
		e->vis = calloc(SR_MAX_QPS, sizeof(struct vis_qp));
		if (!e->vis)
			return;
	}
	v = &((struct vis_qp *)e->vis)[sr_qpn_index(qpn) % SR_MAX_QPS];
	if (v->qpn != qpn || v->gen != gen) {
		v->qpn = qpn;
		v->gen = gen;
		v->retrans = 0;
	}
	v->retrans += now - before;
}

static uint64_t vis_get(struct sr_engine *e, uint32_t qpn, uint32_t gen)
{
	struct vis_qp *v;

	if (!e->vis)
		return 0;
	v = &((struct vis_qp *)e->vis)[sr_qpn_index(qpn) % SR_MAX_QPS];
	return v->qpn == qpn && v->gen == gen ? v->retrans : 0;
}

void sr_eng_trace(struct sr_engine *e, const uint8_t *sgid, const uint8_t *dgid, uint16_t sport,
		  uint16_t dport, const struct iovec *iov, int iovcnt)
{
	int ret;

	if (!e->trace || e->trace_err)
		return;
	ret = sr_pcap_write(e->trace, NULL, sgid, dgid, sport, dport, 0, iov, iovcnt);
	if (ret) {
		e->trace_err = ret;
		sr_warn("engine: trace: %s: capture stopped", strerror(-ret));
		return;
	}
	e->trace_pkts++;
}

static void snap(struct sr_engine *e, struct sr_eng_snap *s)
{
	memset(s, 0, offsetof(struct sr_eng_snap, qps));
	s->fault_on = e->fault != NULL;
	if (e->fault)
		sr_fault_counts(e->fault, &s->fault);
	s->trace_on = e->trace != NULL;
	s->trace_err = e->trace_err;
	s->trace_pkts = e->trace_pkts;
	for (uint32_t i = 0; i < SR_MAX_QPS; i++) {
		struct sr_eng_slot *sl = e->slots[i];
		struct sr_eng_qp *q;
		struct sr_eng_qp_snap *o;
		struct sr_qp_shm *qp;

		if (!sl || !sl->q)
			continue;
		qp = sr_exec_qp_lookup(e->ctx, sl->qpn);
		if (!qp || !qp->wire || !sr_eng_qp_is(e, qp, sl->q))
			continue;
		q = sl->q;
		if (s->nqps == SR_ENG_SNAP_QPS) {
			s->more_qps++;
			continue;
		}
		sr_shm_lock(&qp->wtx_lock); /* guards q (core.c) */
		o = &s->qps[s->nqps++];
		memset(o, 0, sizeof(*o));
		o->qpn = q->qpn;
		o->dest_qpn = qp->dest_qpn;
		o->type = qp->type;
		o->state = atomic_load_explicit(&qp->state, memory_order_acquire);
		o->req_init = q->req.req_init;
		o->resp_init = q->resp.resp_init;
		o->rnr_wait = q->comp.rnr_wait;
		o->timer = q->comp.deadline != 0;
		o->npsn = q->req.npsn;
		o->una = q->comp.una;
		o->epsn = q->resp.epsn;
		o->msn = q->resp.msn;
		o->outstanding =
		    q->req.req_init ? q->req.spos - qp->exec_pos + (q->req.soff ? 1 : 0) : 0;
		o->rd_out = q->comp.rd_out;
		o->retry_left = q->comp.retry_left;
		o->rnr_left = q->comp.rnr_left;
		sr_shm_unlock(&qp->wtx_lock);
		o->retrans = vis_get(e, sl->qpn, sl->gen);
	}
}

void sr_eng_ctl_poll(struct sr_engine *e)
{
	uint32_t r = atomic_load_explicit(&mb.req, memory_order_acquire);

	if (atomic_load_explicit(&initial_set, memory_order_acquire)) {
		atomic_store_explicit(&initial_set, false, memory_order_relaxed);
		if (!e->fault)
			e->fault = sr_fault_new(&initial, sr_eng_fault_shm(e));
	}
	if (r == atomic_load_explicit(&mb.ack, memory_order_relaxed))
		return;
	switch (mb.kind) {
	case CTL_FAULT:
		if (!mb.cfg_on) {
			if (e->fault)
				sr_fault_set(e->fault, NULL); /* held packets go at once */
		} else if (e->fault) {
			sr_fault_set(e->fault, &mb.cfg);
		} else {
			e->fault = sr_fault_new(&mb.cfg, sr_eng_fault_shm(e));
		}
		break;
	case CTL_TRACE:
		mb.old = e->trace;
		mb.pkts = e->trace_pkts;
		e->trace = mb.pc;
		e->trace_pkts = 0;
		e->trace_err = 0;
		break;
	case CTL_SNAP:
		snap(e, &mb.snap);
		break;
	}
	/* what goes through the taps now is published before the ack: the
	 * daemon's thread, which sends and reads QP1 itself unless they are
	 * on (gsi.c), does not send a MAD past a capture it just started */
	sr_eng_taps_publish(e);
	/* the engine's writes (snapshot, old capture, taps) happen-before
	 * the daemon's reads of them */
	atomic_store_explicit(&mb.ack, r, memory_order_release);
}

void sr_eng_taps_publish(struct sr_engine *e)
{
	struct sr_arena_hdr *h = e->arena;

	/* posting threads hand their UD datagrams to us while these are on */
	atomic_store_explicit(&h->wire_taps, e->trace || (e->fault && sr_fault_tx_on(e->fault)),
			      memory_order_relaxed);
	/* packets held for delay or reorder, and the capture, are the
	 * engine's alone: the receive halves then read nothing */
	atomic_store_explicit(&h->rx_taps, e->trace || (e->fault && sr_fault_holds(e->fault)),
			      memory_order_relaxed);
}
