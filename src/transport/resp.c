/*
 * The RoCEv2 responder (IBTA 9.7.5 and 9.8.3): requests that arrive for a
 * local QP.  It checks the PSN against the expected one (duplicates are
 * answered again, a gap is NAKed once with a sequence error, C9-102 /
 * C9-114), checks that the opcode continues the message in progress
 * (C9-89 ff.), and then does what the request asks through the same-host
 * executor's code (shm/responder.h): the receive WQE, the scatter, the key
 * checks, the atomic, the completion.  RC acknowledges: once per received
 * batch for the newest PSN that asked (AckReq), at once for NAKs, READ
 * responses and atomic acknowledgements.  UC never answers; UD checks the
 * Q_Key and hands the GRH built from the IP header to the receive.
 *
 * An XRC_RECV QP (annex A14) answers as RC, with XRC response opcodes; each
 * request names in its XRCETH the SRQ it is for, which the executor's code
 * takes the receive WQE from and checks keys against (an SRQ number that
 * is no XRC SRQ of the QP's domain: invalid request NAK, as on one host).
 */
#include <string.h>

#include "core/copy.h"
#include "core/env.h"
#include "core/qp_state.h"
#include "core/shmlock.h"
#include "transport/transport.h"
#include "wire/reqhdr.h"
#include "wire/grh.h"
#include "shm/exec.h"
#include "shm/qp_err.h"
#include "shm/devctx.h"

/* The transport bits of the QP's responses: XRC answers with XRC opcodes. */
static uint8_t resp_tr(const struct sr_qp_shm *qp)
{
	return qp->type == IBV_QPT_XRC_RECV ? SR_TR_XRC : SR_TR_RC;
}

/* ---- answers ---- */

static void send_aeth(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		      uint8_t opcode, uint32_t psn, uint8_t syndrome, const void *extra,
		      unsigned elen, const struct iovec *pay, unsigned npay, uint32_t paylen)
{
	uint8_t h[SR_MAX_HDR_LEN];

	sr_bth_put(h, opcode, false, 0, SR_DEFAULT_PKEY, qp->dest_qpn, false, psn);
	sr_aeth_put(h + SR_BTH_LEN, syndrome, q->resp.msn);
	q->trail.ack_tx_at = e->now;
	q->trail.ack_tx_psn = psn;
	q->trail.ack_tx_pid = e->pid;
	q->trail.ack_txs++;
	if (elen)
		memcpy(h + SR_BTH_LEN + SR_AETH_LEN, extra, elen);
	sr_eng_send(e, &(struct sr_link_addr){qp->sgid, qp->dgid, q->qpn}, h,
		    SR_BTH_LEN + SR_AETH_LEN + elen, pay, npay, paylen);
}

static void send_nak(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t psn,
		     uint8_t syndrome)
{
	if ((syndrome & 0xe0) == SR_AETH_RNR_NAK)
		sr_eng_count(&e->cnt[SR_ENG_RNR_TX], 1);
	else
		sr_eng_count(&e->cnt[SR_ENG_NAK_TX], 1);
	send_aeth(e, qp, q, resp_tr(qp) | SR_IB_ACK, psn, syndrome, NULL, 0, NULL, 0, 0);
}

static void ack_later(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	struct sr_eng_slot *s = sr_eng_slot_of(e, q);

	q->resp.ack_due = true;
	s->ack_qp = qp;
	if (s->on_ack)
		return;
	s->on_ack = true;
	s->next_ack = e->acks;
	e->acks = s;
}

/*
 * ---- ACKs that go with the QP's next request ----
 *
 * In a ping-pong (ib_write_lat, ibv_rc_pingpong) the responder's process
 * answers a message with a request of its own a few microseconds after
 * the data lands, and its posting thread sends that request itself
 * (datapath/wire_tx.c).  Sent at once, the ACK wakes the peer's engine once,
 * and the answer wakes it again; on a machine whose CPUs are busy
 * polling, each wake-up costs more than the wire.  So when a posting
 * thread of the QP sent one of its WQEs within SR_ENG_DACK_RECENT_NS, a
 * plain ACK is handed to it instead (sr_qp_shm.wtx_ack, under wtx_lock):
 * the thread that sends the QP's next request sends the ACK just before
 * it, in the same system call, and the peer's engine takes both in one
 * wake-up.  If no request comes, the engine sends the ACK after at most
 * dack_ns (SOFTRDMA_ACK_DEFER_US in the daemon's environment, 50 by
 * default, 0: never), or sooner when it sends a request of the QP itself.
 * The requester cannot tell an ACK that waited from one the wire delayed;
 * its own timers are milliseconds.  NAKs, RNR NAKs, READ responses and
 * atomic ACKs never wait.  A copy of the ACK's addressing is kept, so an
 * owner that destroys the QP after seeing the data does not keep it from
 * the requester (an HCA sends it before the completion is seen).
 */
uint64_t sr_eng_dack_ns(void)
{
	static int us = -1;

	/* never as long as the requester's first probe (SR_ENG_PROBE_NS) */
	return (uint64_t)sr_env_num("SOFTRDMA_ACK_DEFER_US", &us, SR_ENG_DACK_MAX_US,
				    SR_ENG_DACK_NS / 1000) *
	       1000;
}

/*
 * ---- after the QP is gone ----
 *
 * An owner that sees its last message arrive may destroy the QP at once
 * (ibv_rc_pingpong does); if the ACK of that message is lost on the way,
 * the requester resends it to a QP that no longer exists and, with nobody
 * to answer, fails with RETRY_EXC_ERR although its data arrived.  TCP
 * answers the same problem with TIME_WAIT.  So when the daemon destroys a
 * connected QP whose peer is on another host, it tells the engine how far
 * the responder had received (sr_engine_gone: the last PSN, the MSN, the
 * addressing), and for SR_ENG_GONE_NS after, while no QP has that number,
 * a SEND or WRITE from the same peer that repeats a PSN up to there gets
 * that ACK again (acks_after_destroy; the packet is still dropped as
 * drop_qpn: nothing executes).  READs and atomics are not answered: their
 * results went with the QP.  A receive half that reads such a datagram
 * hands it to the engine (datapath/wire_rx.c).
 */
static void dack_send(struct sr_engine *e, struct sr_eng_dack *d)
{
	uint8_t h[SR_ACK_HDR_LEN];

	d->valid = false;
	sr_ack_hdr_put(h, d->dest_qpn, d->psn, d->msn);
	sr_eng_send(e, &(struct sr_link_addr){d->sgid, d->dgid, d->qpn}, h, sizeof(h), NULL, 0, 0);
}

/* The QP object the handed ACK belongs to, if it is still that QP. */
static struct sr_qp_shm *dack_qp(struct sr_engine *e, const struct sr_eng_dack *d, bool *gone)
{
	struct sr_qp_shm *qp = sr_exec_qp_lookup(e->ctx, d->qpn);

	*gone = !qp || (uint64_t)((char *)qp - (char *)e->arena) != d->off;
	if (*gone || atomic_load_explicit(&qp->wire_gen, memory_order_acquire) != d->gen)
		return NULL;
	return qp;
}

/* Withdraws the handed ACK d (wtx_lock held): true if no thread took it.
 * A receive half may have handed a later one of the same connection in
 * its place (datapath/wire_rx.c): that one goes. */
static bool dack_withdraw(struct sr_qp_shm *qp, struct sr_eng_dack *d)
{
	bool mine = d->valid && qp->wtx_ack;

	if (mine)
		sr_wtx_ack_take(qp, d->gen, &d->psn, &d->msn); /* else its own */
	qp->wtx_ack = 0;
	d->valid = false;
	return mine;
}

/* Sends the ACK of q's connection a receive half handed to q's next
 * request, if there is one (wtx_lock held). */
static void handed_send(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	struct sr_eng_dack d;

	memset(&d, 0, sizeof(d));
	if (!sr_wtx_ack_take(qp, q->gen, &d.psn, &d.msn))
		return;
	d.qpn = q->qpn;
	d.dest_qpn = qp->dest_qpn;
	memcpy(d.sgid, qp->sgid, 16);
	memcpy(d.dgid, qp->dgid, 16);
	dack_send(e, &d);
}

void sr_eng_resp_handed_tick(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	/* the engine's own handed ACK has its own timer (sr_eng_resp_dacks) */
	if (!sr_eng_slot_of(e, q)->dack.valid &&
	    (int64_t)(e->now - qp->wtx_ack_at) >= (int64_t)e->dack_ns)
		handed_send(e, qp, q);
}

void sr_eng_resp_dack_take(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	struct sr_eng_slot *s = sr_eng_slot_of(e, q);
	struct sr_eng_dack *d = &s->dack;

	/* (one of a QP this slot held before stays for sr_eng_resp_dacks) */
	if (d->valid && d->qpn == s->qpn && d->off == s->off && d->gen == s->gen) {
		if (dack_withdraw(qp, d))
			dack_send(e, d);
	} else if (!e->app) {
		handed_send(e, qp, q); /* a receive half's (datapath/wire_rx.c) */
	}
}

/* Whether CQ off has a completion channel: its owner may sleep for its
 * completions (whether it is armed at a given moment says little: a
 * program re-arms a CQ when it takes its event). */
static bool cq_evented(const struct sr_engine *e, uint64_t off)
{
	const struct sr_cq_shm *cq;

	if (!off || off + sizeof(*cq) > e->ctx->arena_size)
		return false;
	cq = sr_arena_ptr(e->arena, off);
	return cq->channel_fd_id != 0;
}

/* Hands q's ACK of psn to the QP's next request, if that is worth it
 * (wtx_lock held). */
static bool ack_defer(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t psn)
{
	const struct sr_arena_hdr *h = e->arena;
	struct sr_eng_slot *s = sr_eng_slot_of(e, q);
	struct sr_eng_dack *d = &s->dack;
	bool ok;

	if (!e->dack_ns || qp->type != IBV_QPT_RC || !q->grant.direct_sent_at ||
	    e->now - q->grant.direct_sent_at > SR_ENG_DACK_RECENT_NS ||
	    atomic_load_explicit(&h->wire_taps, memory_order_relaxed))
		return false;
	/* A receive half's ACK waits only for a WRITE: its initiator, once
	 * its WQE completes, may next watch memory for the answer, which no
	 * poll sees come, so the ACK goes with that answer, and the poll
	 * that waits for the ACK takes both.  A SEND's initiator learns of
	 * the answer by polling.  The thread sends it late itself (its next
	 * poll, sr_eng_resp_dacks) or, if it stops polling, the engine's
	 * grant tick does (sr_eng_resp_handed_tick): only while the engine
	 * holds the grant. */
	if (e->app && (!q->grant.eng_granted || q->resp.ack_send))
		return false;
	/* An owner that may wait for completion events answers after a
	 * wake-up, tens of microseconds later: the ACK goes now, as an HCA's
	 * would.  Held for the answer, it made the requester's send
	 * completion and the answer's receive completion come together, and
	 * a program that takes one event and then polls the CQ it expects
	 * (perftest's -e latency loops) re-armed a CQ whose completion was
	 * already there and slept for good. */
	if (cq_evented(e, qp->send_cq_off) || cq_evented(e, qp->recv_cq_off))
		return false;
	/* What posting threads sent until now is taken in first: the request
	 * this message answers left before it came, and the ACK waits for
	 * the next one.  Without that, a message that came ahead of the ACK
	 * of our last request (two or more packets, then the ACK, as a
	 * posting thread sends them) had its own ACK sent at once.  What
	 * cannot be taken in (the engine in the middle of a WQE, no grant)
	 * sends it now (the caller). */
	sr_eng_req_absorb(e, qp, q);
	ok = q->req.req_init && qp->wtx_spos == q->req.spos;
	if (ok) {
		qp->wtx_ack = 1;
		qp->wtx_ack_psn = psn;
		qp->wtx_ack_msn = q->resp.msn;
		qp->wtx_ack_gen = q->gen; /* a reset QP's posting threads never take it */
		qp->wtx_ack_at = e->now;
		q->trail.handed_at = e->now;
		q->trail.handed_pid = e->pid;
		q->trail.handed++;
	}
	if (!ok)
		return false;
	if (!d->valid) /* the oldest waits at most dack_ns */
		d->at = e->now + e->dack_ns;
	d->valid = true;
	d->off = s->off;
	d->qpn = s->qpn;
	d->gen = s->gen;
	d->dest_qpn = qp->dest_qpn;
	d->psn = psn;
	d->msn = q->resp.msn;
	memcpy(d->sgid, qp->sgid, 16);
	memcpy(d->dgid, qp->dgid, 16);
	if (!d->linked) {
		d->linked = true;
		d->next = e->dacks;
		e->dacks = s;
	}
	return true;
}

void sr_eng_resp_gone(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		      const uint8_t *dgid)
{
	struct sr_eng_slot *s = sr_eng_slot_at(e, p->bth.dqpn);
	struct sr_eng_dack *l = s ? &s->last : NULL;
	uint8_t op = p->bth.opcode & 0x1f, tr = p->bth.opcode & 0xe0;
	struct sr_eng_dack d;
	int32_t behind;

	if (!l || !l->valid || l->qpn != p->bth.dqpn || e->now - l->at > SR_ENG_GONE_NS ||
	    !(p->op->flags & SR_OPF_REQ) || (tr != SR_TR_RC && tr != SR_TR_XRC) ||
	    op == SR_IB_READ_REQUEST || op == SR_IB_CMP_SWAP || op == SR_IB_FETCH_ADD ||
	    memcmp(sgid, l->dgid, 16) || memcmp(dgid, l->sgid, 16))
		return;
	behind = sr_psn_diff(p->bth.psn, l->psn);
	if (behind > 0 || behind < -(int32_t)(SR_PSN_MASK / 2))
		return; /* not a repeat: a new message for a QP that is gone */
	d = *l;
	dack_send(e, &d);
	sr_eng_count(&e->acks_gone, 1);
}

uint64_t sr_eng_resp_dacks(struct sr_engine *e)
{
	struct sr_eng_slot **pp = &e->dacks;
	uint64_t next = 0;

	while (*pp) {
		struct sr_eng_slot *s = *pp;
		struct sr_eng_dack *d = &s->dack;
		bool send = false, wait = false;

		if (d->valid) {
			bool gone;
			struct sr_qp_shm *qp = dack_qp(e, d, &gone);

			if (qp) {
				sr_shm_lock(&qp->wtx_lock);
				/* neither taken by a request nor due: keep it */
				wait = qp->wtx_ack && d->at > e->now;
				if (!wait)
					send = dack_withdraw(qp, d);
				sr_shm_unlock(&qp->wtx_lock);
			} else {
				send = gone; /* destroyed: the copy goes now; reset: nothing */
			}
		}
		if (wait) {
			if (!next || d->at < next)
				next = d->at;
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		d->linked = false;
		d->valid = false;
		if (send)
			dack_send(e, d);
	}
	return next;
}

void sr_eng_resp_acks(struct sr_engine *e)
{
	while (e->acks) {
		struct sr_eng_slot *s = e->acks;
		struct sr_qp_shm *qp = s->ack_qp;
		struct sr_eng_qp *q = s->q;
		uint32_t psn;

		e->acks = s->next_ack;
		s->on_ack = false;
		/*
		 * Not looked up again by QPN: an owner that saw the completion
		 * may already have destroyed the QP, and the requester still
		 * waits for this ACK (an HCA sends it before the CQE is seen).
		 * The object stays readable to the end of this section; only
		 * a reset or re-route of it (wire_gen) cancels the ACK.
		 */
		if (!q || !sr_eng_qp_is(e, qp, q))
			continue;
		sr_shm_lock(&qp->wtx_lock);
		if (q->resp.ack_due) {
			q->resp.ack_due = false;
			psn = sr_psn_add(q->resp.epsn, SR_PSN_MASK);
			if (!ack_defer(e, qp, q, psn)) {
				if (s->dack.valid) /* this one supersedes a handed one */
					dack_withdraw(qp, &s->dack);
				send_aeth(e, qp, q, resp_tr(qp) | SR_IB_ACK, psn,
					  SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT, NULL, 0, NULL, 0,
					  0);
			}
		}
		sr_shm_unlock(&qp->wtx_lock);
	}
}

/* A requester-side error status from the executor's code, as a NAK. */
static uint8_t nak_of(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_REM_ACCESS_ERR:
		return SR_AETH_NAK | SR_NAK_REM_ACCESS;
	case IBV_WC_REM_OP_ERR:
		return SR_AETH_NAK | SR_NAK_REM_OP;
	default:
		return SR_AETH_NAK | SR_NAK_INV_REQ;
	}
}

/* RC: a fatal request error.  NAK it, and the responder's QP goes to ERR
 * (IBTA 9.9.3.1: remote access and invalid request errors are fatal on
 * both sides); UC drops the message. */
static void fail(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		 const struct sr_pkt *p, enum ibv_wc_status st)
{
	q->resp.cur_op = 0xff;
	if (!sr_qpt_reliable(qp->type))
		return;
	send_nak(e, qp, q, p->bth.psn, nak_of(st));
	sr_resp_to_error(e->ctx, qp);
}

/* ---- READ responses (9.7.5.1.5): payload straight from the MR ---- */

static void read_respond(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
			 uint32_t psn, const char *src, uint32_t len)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu), n = len ? (len + mtu - 1) / mtu : 1;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t chunk = len - i * mtu < mtu ? len - i * mtu : mtu;
		struct iovec iov = {NULL, chunk};
		uint8_t op;

		if (src && chunk) /* core.c: what the ICRC covers is what leaves */
			iov.iov_base = (void *)sr_eng_stage(e, src + (uint64_t)i * mtu, chunk);
		if (n == 1)
			op = SR_IB_READ_RESP_ONLY;
		else if (i == 0)
			op = SR_IB_READ_RESP_FIRST;
		else if (i == n - 1)
			op = SR_IB_READ_RESP_LAST;
		else
			op = SR_IB_READ_RESP_MIDDLE;
		if (op == SR_IB_READ_RESP_MIDDLE) {
			uint8_t h[SR_BTH_LEN];

			sr_bth_put(h, resp_tr(qp) | op, false, 0, SR_DEFAULT_PKEY, qp->dest_qpn,
				   false, sr_psn_add(psn, i));
			sr_eng_send(e, &(struct sr_link_addr){qp->sgid, qp->dgid, q->qpn}, h,
				    SR_BTH_LEN, &iov, 1, chunk);
		} else {
			send_aeth(e, qp, q, resp_tr(qp) | op, sr_psn_add(psn, i),
				  SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT, NULL, 0, &iov,
				  chunk ? 1 : 0, chunk);
		}
	}
}

static uint32_t read_npkts(const struct sr_qp_shm *qp, uint32_t len)
{
	return sr_wr_npkts(IBV_WR_RDMA_READ, len, sr_mtu_bytes(qp->path_mtu));
}

static void do_read(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p, bool dup)
{
	void *src = NULL;

	if (!sr_resp_rkey(e->ctx, qp, p->xrc_srqn, p->rkey, p->va, p->dma_len,
			  IBV_ACCESS_REMOTE_READ, &src)) {
		if (!dup)
			fail(e, qp, q, p, IBV_WC_REM_ACCESS_ERR);
		return;
	}
	if (!dup) {
		q->resp.msn++;
		q->resp.epsn = sr_psn_add(q->resp.epsn, read_npkts(qp, p->dma_len));
	}
	read_respond(e, qp, q, p->bth.psn, src, p->dma_len);
}

/* ---- atomics (IBTA 9.7.5.1.6: executed once, replayed from the cache) ---- */

static void atomic_ack(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t psn,
		       uint64_t orig)
{
	uint8_t v[SR_ATOMACKETH_LEN];

	sr_put_be64(v, orig);
	send_aeth(e, qp, q, resp_tr(qp) | SR_IB_ATOMIC_ACK, psn,
		  SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT, v, sizeof(v), NULL, 0, 0);
}

static void do_atomic(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		      const struct sr_pkt *p, bool dup)
{
	uint8_t wop = (p->bth.opcode & 0x1f) == SR_IB_CMP_SWAP ? IBV_WR_ATOMIC_CMP_AND_SWP
							       : IBV_WR_ATOMIC_FETCH_AND_ADD;
	enum ibv_wc_status st;
	uint64_t orig = 0;

	if (dup) {
		for (unsigned i = 0; i < SR_ENG_REPLAY; i++)
			if (q->resp.replay[i].valid && q->resp.replay[i].psn == p->bth.psn) {
				atomic_ack(e, qp, q, p->bth.psn, q->resp.replay[i].orig);
				return;
			}
		return; /* older than the cache holds: the requester has its answer */
	}
	/* CmpSwap: swap_add is the swap value, compare the compare; FetchAdd:
	 * swap_add is the addend (9.5.x) */
	if (wop == IBV_WR_ATOMIC_CMP_AND_SWP)
		st = sr_resp_atomic(e->ctx, qp, p->xrc_srqn, wop, p->va, p->rkey, p->compare,
				    p->swap_add, &orig);
	else
		st = sr_resp_atomic(e->ctx, qp, p->xrc_srqn, wop, p->va, p->rkey, p->swap_add, 0,
				    &orig);
	if (st != IBV_WC_SUCCESS) {
		fail(e, qp, q, p, st);
		return;
	}
	q->resp.replay[q->resp.replay_next].psn = p->bth.psn;
	q->resp.replay[q->resp.replay_next].orig = orig;
	q->resp.replay[q->resp.replay_next].valid = true;
	q->resp.replay_next = (q->resp.replay_next + 1) % SR_ENG_REPLAY;
	q->resp.msn++;
	q->resp.epsn = sr_psn_add(q->resp.epsn, 1);
	atomic_ack(e, qp, q, p->bth.psn, orig);
}

/* ---- SEND and RDMA WRITE ---- */

/* FIRST and MIDDLE packets carry exactly the path MTU, LAST 1..MTU
 * (0 only when... never), ONLY 0..MTU. */
static bool length_ok(const struct sr_qp_shm *qp, const struct sr_pkt *p)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu), f = p->op->flags;

	if ((f & (SR_OPF_FIRST | SR_OPF_LAST)) == (SR_OPF_FIRST | SR_OPF_LAST))
		return p->paylen <= mtu;
	if (f & SR_OPF_LAST)
		return p->paylen >= 1 && p->paylen <= mtu;
	return p->paylen == mtu;
}

static uint8_t wr_opcode_of(const struct sr_pkt *p)
{
	uint32_t f = p->op->flags;

	if (f & SR_OPF_WRITE)
		return (f & SR_OPF_IMMDT) ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	if (f & SR_OPF_IMMDT)
		return IBV_WR_SEND_WITH_IMM;
	if (f & SR_OPF_IETH)
		return IBV_WR_SEND_WITH_INV;
	return IBV_WR_SEND;
}

/* Returns 0 when the packet was consumed, -EAGAIN for an RNR NAK. */
static int do_send(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		   const struct sr_pkt *p)
{
	bool first = p->op->flags & SR_OPF_FIRST, last = p->op->flags & SR_OPF_LAST;
	bool rc = sr_qpt_reliable(qp->type);
	enum ibv_wc_status st;
	int r;

	if (first && last && !q->resp.have_ticket) {
		/* one packet: exactly the same-host delivery (the sender's type:
		 * an XRC target's peer is an XRC_SEND QP) */
		struct sr_send_wqe w = {.opcode = wr_opcode_of(p),
					.flags = (p->bth.flags & SR_BTH_SE) ? SR_WQE_SOLICITED : 0,
					.imm_or_inv =
					    (p->op->flags & SR_OPF_IETH) ? p->inv_rkey : p->imm_be,
					.xrc_srqn = p->xrc_srqn};

		r = sr_resp_deliver(e->ctx, qp,
				    qp->type == IBV_QPT_XRC_RECV ? IBV_QPT_XRC_SEND : qp->type,
				    qp->dest_qpn, &w, p->payload, p->paylen, NULL, &st);

		if (r == -EAGAIN)
			return -EAGAIN;
		if (r) {
			fail(e, qp, q, p, st);
			return 0;
		}
		return 0;
	}
	if (first && !q->resp.have_ticket) {
		q->resp.ticket.srqn = p->xrc_srqn;
		r = sr_resp_recv_take(e->ctx, qp, rc, &q->resp.ticket);
		if (r == -EINVAL) {
			fail(e, qp, q, p, IBV_WC_REM_INV_REQ_ERR); /* A14: no SRQ of the domain */
			return 0;
		}
		if (r)
			return rc ? -EAGAIN : (sr_eng_count(&e->drops[SR_DROP_NOBUF], 1), 0);
		q->resp.have_ticket = true;
	}
	if (first)
		q->resp.cur_off = 0;
	st = sr_resp_recv_put(e->ctx, qp, &q->resp.ticket, q->resp.cur_off, p->payload, p->paylen);
	q->resp.cur_off += p->paylen;
	if (st != IBV_WC_SUCCESS || last) {
		enum ibv_wc_status done;

		q->resp.have_ticket = false;
		done = sr_resp_recv_finish(e->ctx, qp, &q->resp.ticket, st, wr_opcode_of(p),
					   (uint32_t)q->resp.cur_off,
					   (p->op->flags & SR_OPF_IETH) ? p->inv_rkey : p->imm_be,
					   qp->dest_qpn, p->bth.flags & SR_BTH_SE, false);
		if (done != IBV_WC_SUCCESS)
			fail(e, qp, q, p, done);
	}
	return 0;
}

static int do_write(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p)
{
	bool first = p->op->flags & SR_OPF_FIRST, last = p->op->flags & SR_OPF_LAST;
	bool rc = sr_qpt_reliable(qp->type);
	void *dst = NULL;
	int r;

	if (first) {
		q->resp.wr_va = p->va;
		q->resp.wr_rkey = p->rkey;
		q->resp.wr_left = p->dma_len;
		q->resp.wr_srqn = p->xrc_srqn;
		q->resp.cur_off = 0;
		if (!sr_resp_xrc_ok(e->ctx, qp, q->resp.wr_srqn)) {
			fail(e, qp, q, p, IBV_WC_REM_INV_REQ_ERR); /* A14: no SRQ of the domain */
			return 0;
		}
		if (!sr_resp_rkey(e->ctx, qp, q->resp.wr_srqn, p->rkey, p->va, p->dma_len,
				  IBV_ACCESS_REMOTE_WRITE, &dst)) {
			fail(e, qp, q, p, IBV_WC_REM_ACCESS_ERR);
			return 0;
		}
	}
	if (p->paylen > q->resp.wr_left || (last && p->paylen != q->resp.wr_left)) {
		fail(e, qp, q, p, IBV_WC_REM_INV_REQ_ERR); /* DMA length mismatch */
		return 0;
	}
	/* the immediate needs a receive WQE: find out before writing (RNR) */
	if (last && (p->op->flags & SR_OPF_IMMDT) && !q->resp.have_ticket) {
		q->resp.ticket.srqn = q->resp.wr_srqn;
		r = sr_resp_recv_take(e->ctx, qp, rc, &q->resp.ticket);
		if (r == -EINVAL) {
			fail(e, qp, q, p, IBV_WC_REM_INV_REQ_ERR);
			return 0;
		}
		if (r)
			return rc ? -EAGAIN : (sr_eng_count(&e->drops[SR_DROP_NOBUF], 1), 0);
		q->resp.have_ticket = true;
	}
	if (p->paylen) {
		if (!sr_resp_rkey(e->ctx, qp, q->resp.wr_srqn, q->resp.wr_rkey, q->resp.wr_va,
				  p->paylen, IBV_ACCESS_REMOTE_WRITE, &dst)) {
			fail(e, qp, q, p, IBV_WC_REM_ACCESS_ERR);
			return 0;
		}
		/* each byte stored once, the last ones last, as a NIC's DMA:
		 * a peer polling the final byte may write it right after */
		sr_copy(dst, p->payload, p->paylen);
	}
	q->resp.wr_va += p->paylen;
	q->resp.wr_left -= p->paylen;
	q->resp.cur_off += p->paylen;
	if (last && (p->op->flags & SR_OPF_IMMDT)) {
		q->resp.have_ticket = false;
		sr_resp_recv_finish(e->ctx, qp, &q->resp.ticket, IBV_WC_SUCCESS,
				    IBV_WR_RDMA_WRITE_WITH_IMM, (uint32_t)q->resp.cur_off,
				    p->imm_be, qp->dest_qpn, p->bth.flags & SR_BTH_SE, false);
	}
	return 0;
}

/* C9-89 ff.: a FIRST or ONLY packet starts a message only when none is in
 * progress; MIDDLE and LAST continue one of the same kind. */
static bool sequence_ok(const struct sr_eng_qp *q, const struct sr_pkt *p)
{
	uint32_t f = p->op->flags, kind = f & (SR_OPF_SEND | SR_OPF_WRITE);

	if (f & SR_OPF_FIRST)
		return q->resp.cur_op == 0xff;
	return q->resp.cur_op != 0xff &&
	       (sr_opcode_info[q->resp.cur_op].flags & (SR_OPF_SEND | SR_OPF_WRITE)) == kind;
}

static void duplicate(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		      const struct sr_pkt *p)
{
	uint32_t f = p->op->flags;

	if (f & SR_OPF_READ)
		do_read(e, qp, q, p, true); /* re-read: 9.7.5.2.x allows it */
	else if (f & SR_OPF_ATOMIC)
		do_atomic(e, qp, q, p, true);
	else if (p->bth.ackreq || (f & SR_OPF_LAST)) {
		ack_later(e, qp, q); /* ACK the duplicate again */
	}
}

/*
 * Loss recovery without resending everything (our responder's choice; the
 * wire stays go-back-N).  A WRITE packet that arrives past a gap is placed
 * at once where it belongs, and its PSN remembered, when its target is
 * known: a MIDDLE, or the LAST of a WRITE without immediate data, of the
 * WRITE in progress (its RETH checked the whole range at FIRST), or of a
 * WRITE that began past the gap (place_ahead).  When the missing packet
 * comes, the expected PSN jumps over what was placed and the ACK tells the
 * requester, which goes on from there (req.c) instead of resending it.  A
 * standard requester resends it anyway and gets it acknowledged as a
 * duplicate.  Nothing that completes a receive WQE is taken early, so
 * completions stay in order.
 */
static bool placed(const struct sr_eng_qp *q, uint32_t psn)
{
	uint32_t b = psn % SR_ENG_OOO;

	return q->resp.ooo[b / 64] >> (b % 64) & 1;
}

static uint32_t write_pkts(uint64_t len, uint32_t mtu)
{
	return len ? (uint32_t)((len + mtu - 1) / mtu) : 1;
}

/* Forget the WRITEs begun ahead that the expected PSN passed without
 * the walk (their FIRST was not placed after all, and came in order). */
static void ahead_trim(struct sr_eng_qp *q)
{
	uint32_t n = 0;

	while (n < q->resp.ahead_n && sr_psn_diff(q->resp.ahead[n].psn, q->resp.epsn) < 0)
		n++;
	if (n) {
		q->resp.ahead_n -= n;
		memmove(&q->resp.ahead[0], &q->resp.ahead[n],
			q->resp.ahead_n * sizeof(q->resp.ahead[0]));
	}
}

/*
 * A WRITE's FIRST or ONLY past the gap starts a message only the PSN
 * right after the last one known can start: after the WRITE in progress
 * (its RETH gave its length) or after the last WRITE begun this way.
 * Nothing else can lie between, so nothing the gap hides (a SEND with
 * invalidate, a failing request) can come before it in a way that
 * changes what this WRITE may do, except that the QP may yet fail on a
 * packet in the gap: then this WRITE's bytes are written and the WRITE
 * never completes, which a NIC placing out of order does too (the IBTA
 * leaves a failed or flushed WRITE's target undefined).  Its checks are
 * the in-order FIRST's (do_write), over the whole range.
 */
static struct sr_eng_ahead *begin_ahead(struct sr_engine *e, struct sr_qp_shm *qp,
					struct sr_eng_qp *q, const struct sr_pkt *p, uint32_t d,
					uint32_t cur_pkts)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu), f = p->op->flags, end = cur_pkts;
	struct sr_eng_ahead *a;
	void *dst = NULL;

	if (q->resp.ahead_n) {
		a = &q->resp.ahead[q->resp.ahead_n - 1];
		end = (uint32_t)sr_psn_diff(sr_psn_add(a->psn, write_pkts(a->len, mtu)),
					    q->resp.epsn);
	}
	if (d != end || q->resp.ahead_n == SR_ENG_AHEAD || !p->dma_len ||
	    ((f & SR_OPF_LAST) ? p->paylen != p->dma_len || p->paylen > mtu
			       : p->paylen != mtu || p->dma_len <= mtu) ||
	    !sr_resp_xrc_ok(e->ctx, qp, p->xrc_srqn) ||
	    !sr_resp_rkey(e->ctx, qp, p->xrc_srqn, p->rkey, p->va, p->dma_len,
			  IBV_ACCESS_REMOTE_WRITE, &dst))
		return NULL; /* the in-order pass reports what is wrong */
	a = &q->resp.ahead[q->resp.ahead_n++];
	a->psn = p->bth.psn;
	a->len = p->dma_len;
	a->va = p->va;
	a->rkey = p->rkey;
	a->srqn = p->xrc_srqn;
	a->op = p->bth.opcode;
	return a;
}

static void place_ahead(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
			const struct sr_pkt *p, uint32_t d)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu), b = p->bth.psn % SR_ENG_OOO;
	uint32_t f = p->op->flags, len = p->paylen, cur_pkts, k, rkey, srqn;
	uint64_t va, total, off;
	void *dst = NULL;

	/* not one with immediate data (it completes a receive WQE) */
	if (d >= SR_ENG_OOO || !(f & SR_OPF_WRITE) || (f & SR_OPF_IMMDT) ||
	    q->resp.cur_op == 0xff || !(sr_opcode_info[q->resp.cur_op].flags & SR_OPF_WRITE) ||
	    placed(q, p->bth.psn))
		return;
	ahead_trim(q);
	cur_pkts = write_pkts(q->resp.wr_left, mtu);
	if (d < cur_pkts) { /* the WRITE in progress: wr_va is epsn's byte */
		va = q->resp.wr_va;
		total = q->resp.wr_left;
		rkey = q->resp.wr_rkey;
		srqn = q->resp.wr_srqn;
		k = d;
	} else {
		const struct sr_eng_ahead *a = NULL;

		for (uint32_t i = 0; i < q->resp.ahead_n && !a; i++) {
			uint32_t at = (uint32_t)sr_psn_diff(p->bth.psn, q->resp.ahead[i].psn);

			if (at < write_pkts(q->resp.ahead[i].len, mtu))
				a = &q->resp.ahead[i];
		}
		if (!a && (f & SR_OPF_FIRST))
			a = begin_ahead(e, qp, q, p, d, cur_pkts);
		if (!a)
			return;
		va = a->va;
		total = a->len;
		rkey = a->rkey;
		srqn = a->srqn;
		k = (uint32_t)sr_psn_diff(p->bth.psn, a->psn);
	}
	/* exactly where the RETH's length puts it: a FIRST only as the one
	 * that began its WRITE above, a MIDDLE of a full MTU short of the
	 * end, a LAST (the WRITE's end, which completes nothing here) ending
	 * there */
	off = (uint64_t)k * mtu;
	if ((f & SR_OPF_FIRST)	? k != 0 || d < cur_pkts
	    : (f & SR_OPF_LAST) ? !len || len > mtu || off + len != total
				: len != mtu || off + mtu >= total)
		return;
	if (!sr_resp_rkey(e->ctx, qp, srqn, rkey, va + off, len, IBV_ACCESS_REMOTE_WRITE, &dst))
		return; /* the in-order pass reports it */
	sr_copy(dst, p->payload, len);
	q->resp.ooo[b / 64] |= 1ull << (b % 64);
	q->resp.ooo_n++;
	sr_eng_count(&e->cnt[SR_ENG_OOO_PLACED], 1);
}

/* The walk reaches a WRITE that began past the gap: it is in progress. */
static bool take_ahead(struct sr_eng_qp *q)
{
	const struct sr_eng_ahead *a = &q->resp.ahead[0];

	ahead_trim(q);
	if (!q->resp.ahead_n || a->psn != q->resp.epsn)
		return false;
	q->resp.cur_op = a->op;
	q->resp.wr_va = a->va;
	q->resp.wr_left = a->len;
	q->resp.wr_rkey = a->rkey;
	q->resp.wr_srqn = a->srqn;
	q->resp.cur_off = 0;
	memmove(&q->resp.ahead[0], &q->resp.ahead[1], --q->resp.ahead_n * sizeof(q->resp.ahead[0]));
	return true;
}

/* After an in-order packet: skip the packets already placed, through the
 * WRITEs whose ends came (a placed packet with no more than the MTU left
 * of its WRITE is its LAST: a MIDDLE never ends it). */
static void take_placed(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu);
	bool moved = false;

	while (q->resp.ooo_n && placed(q, q->resp.epsn)) {
		uint32_t b = q->resp.epsn % SR_ENG_OOO, len;

		if (q->resp.cur_op == 0xff && !take_ahead(q))
			break;
		len = q->resp.wr_left < mtu ? q->resp.wr_left : mtu;
		q->resp.ooo[b / 64] &= ~(1ull << (b % 64));
		q->resp.ooo_n--;
		q->resp.wr_va += len;
		q->resp.wr_left -= len;
		q->resp.cur_off += len;
		q->resp.epsn = sr_psn_add(q->resp.epsn, 1);
		moved = true;
		if (!q->resp.wr_left) {
			q->resp.cur_op = 0xff;
			q->resp.msn++;
		}
	}
	if (moved)
		ack_later(e, qp, q); /* let the requester skip them */
}

static void resp_rx(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p)
{
	bool rc = sr_qpt_reliable(qp->type);
	uint32_t f = p->op->flags;
	int32_t d;
	int r = 0;

	if (!sr_qps_can_receive(atomic_load_explicit(&qp->state, memory_order_acquire))) {
		sr_eng_count(&e->drops[SR_DROP_STATE], 1);
		return;
	}
	if (!q->resp.resp_init) {
		q->resp.epsn = qp->rq_psn;
		q->resp.ooo_n = 0;
		memset(q->resp.ooo, 0, sizeof(q->resp.ooo));
		q->resp.ahead_n = 0;
		q->resp.resp_init = true;
	}
	d = sr_psn_diff(p->bth.psn, q->resp.epsn);
	if (rc && d < 0) {
		duplicate(e, qp, q, p);
		return;
	}
	if (rc && d > 0) {
		place_ahead(e, qp, q, p, (uint32_t)d);
		/* C9-114: one NAK per gap, until the expected packet comes */
		if (!q->resp.nak_sent) {
			send_nak(e, qp, q, q->resp.epsn, SR_AETH_NAK | SR_NAK_PSN_SEQ);
			q->resp.nak_sent = true;
		}
		sr_eng_count(&e->drops[SR_DROP_PSN], 1);
		return;
	}
	if (!rc && d != 0) {
		/* UC (9.8.3): a lost packet loses its message; resynchronise
		 * on the next FIRST or ONLY, keeping a receive WQE taken */
		q->resp.cur_op = 0xff;
		q->resp.epsn = p->bth.psn;
	}
	if (!sequence_ok(q, p)) {
		if (rc) {
			fail(e, qp, q, p, IBV_WC_REM_INV_REQ_ERR);
		} else {
			q->resp.epsn = sr_psn_add(p->bth.psn, 1);
			sr_eng_count(&e->drops[SR_DROP_OPCODE], 1);
		}
		return;
	}
	q->resp.nak_sent = false;
	if ((f & SR_OPF_READ) || (f & SR_OPF_ATOMIC)) {
		if (f & SR_OPF_READ) {
			if (!(qp->access & IBV_ACCESS_REMOTE_READ) && p->dma_len) {
				fail(e, qp, q, p, IBV_WC_REM_ACCESS_ERR);
				return;
			}
			do_read(e, qp, q, p, false);
		} else {
			do_atomic(e, qp, q, p, false);
		}
		return;
	}
	if (!length_ok(qp, p)) {
		fail(e, qp, q, p, IBV_WC_REM_INV_REQ_ERR);
		return;
	}
	if (f & SR_OPF_FIRST)
		q->resp.cur_op = p->bth.opcode;
	r = (f & SR_OPF_SEND) ? do_send(e, qp, q, p) : do_write(e, qp, q, p);
	if (r == -EAGAIN) {
		/* 9.7.5.2.8: RNR NAK with our timer; the requester retries this PSN */
		if (f & SR_OPF_FIRST)
			q->resp.cur_op = 0xff;
		send_nak(e, qp, q, p->bth.psn, SR_AETH_RNR_NAK | (qp->min_rnr_timer & 0x1f));
		return;
	}
	if (atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_ERR)
		return; /* failed above */
	q->resp.epsn = sr_psn_add(q->resp.epsn, 1);
	if (f & SR_OPF_LAST) {
		q->resp.cur_op = 0xff;
		q->resp.msn++;
	}
	if (q->resp.ooo_n)
		take_placed(e, qp, q);
	if (rc && (p->bth.ackreq || (f & SR_OPF_LAST))) {
		q->resp.ack_send = (f & SR_OPF_SEND) != 0;
		ack_later(e, qp, q);
	}
}

/*
 * The socket this request came through is filling faster than it is read
 * (core.c, e->congested): its sender is told to slow down (A17.9.2, the
 * notification point), at most once per SR_ENG_CNP_GAP_NS.  The kernel
 * drops what overflows the socket, which RC recovers at a cost and UC
 * cannot (a lost packet loses its message); a veth has no PFC.
 */
static void notify_congestion(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	uint8_t h[SR_CNP_HDR_LEN];

	if (!e->congested || (q->resp.cnp_at && e->now - q->resp.cnp_at < SR_ENG_CNP_GAP_NS))
		return;
	q->resp.cnp_at = e->now;
	sr_cnp_put(h, qp->dest_qpn);
	sr_eng_count(&e->cnt[SR_ENG_CNP_TX], 1);
	sr_eng_send(e, &(struct sr_link_addr){qp->sgid, qp->dgid, q->qpn}, h, sizeof(h), NULL, 0,
		    0);
}

void sr_eng_resp_rx(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p, const uint8_t *sgid, const uint8_t *dgid)
{
	(void)sgid;
	(void)dgid;
	sr_shm_lock(&qp->wtx_lock);
	q->trail.req_at = e->now;
	q->trail.req_psn = p->bth.psn;
	q->trail.req_pid = e->pid;
	q->trail.reqs++;
	notify_congestion(e, qp, q);
	resp_rx(e, qp, q, p);
	sr_shm_unlock(&qp->wtx_lock);
}

/* ---- UD (IBTA 9.8.2) ---- */

void sr_eng_resp_ud(struct sr_engine *e, struct sr_qp_shm *qp, const struct sr_pkt *p,
		    const uint8_t *sgid, const uint8_t *dgid)
{
	struct sr_send_wqe w = {.opcode = (p->op->flags & SR_OPF_IMMDT) ? IBV_WR_SEND_WITH_IMM
									: IBV_WR_SEND,
				.flags = (p->bth.flags & SR_BTH_SE) ? SR_WQE_SOLICITED : 0,
				.imm_or_inv = p->imm_be};
	enum ibv_wc_status st;
	uint8_t grh[40];

	if (!sr_qps_can_receive(atomic_load_explicit(&qp->state, memory_order_acquire))) {
		sr_eng_count(&e->drops[SR_DROP_STATE], 1);
		return;
	}
	/* the Q_Key must match (QP1's is the GSI key) */
	if (p->qkey != qp->qkey) {
		sr_eng_count(&e->drops[SR_DROP_QKEY], 1);
		return;
	}
	sr_grh_build(grh, sgid, dgid,
		     8 + p->op->hdr_len + p->paylen + sr_bth_padcnt(&p->bth) + SR_ICRC_LEN);
	sr_resp_deliver(e->ctx, qp, IBV_QPT_UD, p->src_qpn, &w, p->payload, p->paylen, grh, &st);
}
