/*
 * The RoCEv2 requester and completer of RC, UC and XRC (IBTA 9.7.4 /
 * 9.7.5.2, 9.8.x, annex A14): send WQEs become packets of at most the path MTU with
 * consecutive PSNs (a READ request reserves one PSN per response packet),
 * within a window of SR_ENG_WINDOW unacknowledged PSNs and the QP's
 * max_rd_atomic outstanding READs and atomics (a fenced WQE waits for
 * them).  AckReq goes on the last packet of every message and every
 * SR_ENG_ACKREQ_EVERY packets.
 *
 * The completer retires WQEs in order as ACKs, READ responses and atomic
 * acknowledgements come back, through the same completion code as the
 * same-host path (shm/qp_err.h).  Recovery is go-back-N: a sequence-error
 * NAK, an RNR NAK (after the responder's RNR timer, rnr_retry times, 7 =
 * for ever) or the local ACK timeout (4.096 us x 2^timeout, retry_cnt
 * times; timeout 0 = never) rewinds the requester to the first PSN not
 * acknowledged; a gap in READ responses re-requests the rest of the READ at
 * once.  UC completes a WQE when its last packet is sent.  An XRC_SEND QP
 * is RC with XRC opcodes: every request packet carries the WQE's SRQ
 * number in its XRCETH, and the answers come back as XRC responses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "core/log.h"
#include "core/shmlock.h"
#include "transport/transport.h"
#include "shm/exec.h"
#include "shm/mrmap.h"
#include "shm/qp_err.h"
#include "shm/devctx.h"
#include "wire/reqhdr.h"

static void req_run(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);
static void reposition(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		       uint32_t psn);

static bool is_local(uint8_t op)
{
	return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
}

static uint32_t npkts_of(const struct sr_qp_shm *qp, const struct sr_send_wqe *w)
{
	return is_local(w->opcode)
		   ? 0
		   : sr_wr_npkts(w->opcode, w->total_len, sr_mtu_bytes(qp->path_mtu));
}

/*
 * A READ is asked for in chunks of at most SR_ENG_READ_CHUNK response
 * packets, each its own READ request with consecutive PSNs (a responder
 * sees ordinary READs), so that what the responder sends at once fits the
 * window and the receiver's socket buffer instead of a whole message of up
 * to 2 GiB in one burst.  Chunks start at multiples of the chunk size; a
 * retry asks for the rest of the chunk it resumes in.
 */
static uint64_t read_chunk_bytes(const struct sr_qp_shm *qp)
{
	return (uint64_t)SR_ENG_READ_CHUNK * sr_mtu_bytes(qp->path_mtu);
}

static uint64_t read_chunk_end(const struct sr_qp_shm *qp, const struct sr_send_wqe *w,
			       uint64_t off)
{
	uint64_t cb = read_chunk_bytes(qp), end = (off / cb + 1) * cb;

	return end < w->total_len ? end : w->total_len;
}

/* READ requests (chunks) of a fully requested READ still unanswered. */
static uint32_t read_chunks_out(const struct sr_qp_shm *qp, const struct sr_send_wqe *w,
				const struct sr_eng_swqe *sw)
{
	uint64_t cb = read_chunk_bytes(qp);
	uint64_t n = w->total_len ? (w->total_len + cb - 1) / cb : 1;

	return (uint32_t)(n - sw->resp_off / cb);
}

/*
 * Two clocks per requester.  The IBTA's local ACK timeout (rto_at) counts
 * retry_cnt.  Before it, a probe (deadline) retransmits from the oldest
 * unacknowledged PSN after SR_ENG_PROBE_NS, doubling up to the timeout,
 * without spending the retry budget: a lost tail (the last packets before
 * the requester waits, which no later packet reveals to the responder)
 * costs a couple of milliseconds instead of a whole timeout, 67 ms at
 * perftest's 14.  The retry budget and RETRY_EXC_ERR keep their meaning.
 */
static uint64_t probe_cap(const struct sr_qp_shm *qp)
{
	uint64_t t = sr_ack_timeout_ns(qp->timeout);

	return t ? t : 4096ull << 14; /* infinite timeout: probes keep going */
}

static void set_deadline(struct sr_engine *e, struct sr_eng_qp *q)
{
	q->comp.deadline = e->now + q->comp.probe_ns;
	if (q->comp.rto_at && q->comp.rto_at < q->comp.deadline)
		q->comp.deadline = q->comp.rto_at;
	sr_eng_activate(e, q);
}

/* Progress, or the first packet after idle: both clocks start again.  From
 * the clock, not from the turn's e->now: a thread that lost its CPU for
 * milliseconds since the turn began (two vCPUs shared with busy pollers)
 * would otherwise arm a probe that is already due, and resend at once
 * packets whose ACK is a round trip away (a trace of ibv_rc_pingpong
 * across two hosts caught arm_timer 3.9 ms behind the clock). */
static void arm_timer(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	uint64_t t = sr_ack_timeout_ns(qp->timeout), cap = probe_cap(qp);

	e->now = sr_eng_clock();
	q->comp.rto_at = t ? e->now + t : 0;
	q->comp.probe_ns = SR_ENG_PROBE_NS < cap ? SR_ENG_PROBE_NS : cap;
	set_deadline(e, q);
}

/* ---- completions: the same code as the same-host path ---- */

static void complete_head(struct sr_engine *e, struct sr_qp_shm *qp, enum ibv_wc_status st,
			  uint32_t byte_len)
{
	sr_shm_lock(&qp->sq_lock);
	sr_sq_complete_head(e->arena, qp, st, byte_len, sr_signal_fd, e->ctx);
	sr_shm_unlock(&qp->sq_lock);
}

/* The head WQE failed: QP to ERR, the head completes with `st`, everything
 * else is flushed (shm/qp_err.h). */
static void fail_head(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		      enum ibv_wc_status st)
{
	sr_shm_lock(&qp->sq_lock);
	sr_sq_head_fails(e->arena, qp, st, sr_signal_fd, e->ctx);
	sr_shm_unlock(&qp->sq_lock);
	q->comp.deadline = 0;
	q->req.req_init = false;
}

/* Microseconds from t to now, -1: never. */
static long long us_since(const struct sr_engine *e, uint64_t t)
{
	return t ? (long long)(int64_t)(e->now - t) / 1000 : -1;
}

/*
 * Says (at info) why q's retries ran out (run by the engine, whose timers
 * they are): what the QP last received, sent and handed, by which process
 * (the daemon's engine, or a receive half's pid), what delayed the engine
 * thread since the last such line (its longest turn, the latest it woke
 * from a timed sleep, the daemon's longest wait for an arena lock), and
 * who read the host's members.  Both ends of a connection whose ACKs stop
 * say it, so the two lines tell a packet that did not come from one that
 * came and was not answered (docs/decisions.md 54).
 */
static void why_failed(struct sr_engine *e, const struct sr_qp_shm *qp, const struct sr_eng_qp *q)
{
	const struct sr_eng_trail *t = &q->trail;
	struct sr_arena_hdr *h = e->arena;
	char mbs[SR_RX_MEMBERS * 64];
	uint64_t lock_ns;
	int64_t lock_ago;
	uint32_t lock_tid;
	size_t n = 0;

	if (SR_LOG_INFO > sr_log_level)
		return;
	sr_shm_lock_worst(&lock_ns, &lock_ago, &lock_tid);
	mbs[0] = 0;
	for (unsigned m = 1; m < SR_RX_MEMBERS && n < sizeof(mbs) - 64; m++) {
		struct sr_rx_member *mb = &h->rx_members[m];
		uint64_t poll = atomic_load_explicit(&mb->poll_at, memory_order_relaxed);
		uint64_t hold = atomic_load_explicit(&mb->hold, memory_order_relaxed);

		if (!poll && !hold && !atomic_load_explicit(&mb->pkts, memory_order_relaxed))
			continue;
		n += (size_t)snprintf(mbs + n, sizeof(mbs) - n,
				      " [%u: lent %u, held %lld us by %d, polled %lld us ago]", m,
				      atomic_load_explicit(&mb->lent, memory_order_relaxed),
				      us_since(e, hold & ~1ull),
				      atomic_load_explicit(&mb->holder, memory_order_relaxed),
				      us_since(e, poll));
	}
	sr_info("qp 0x%06x (peer 0x%06x): retries ran out at PSN 0x%06x (next 0x%06x); "
		"in: ACK 0x%06x %lld us ago by %d (%u), request 0x%06x %lld us ago by %d (%u), "
		"expected 0x%06x; "
		"out: request 0x%06x %lld us ago by %d (%u), ACK 0x%06x %lld us ago by %d (%u), "
		"handed %lld us ago by %d (%u, waiting %u); grant %u, waiting %u; "
		"engine: longest turn %llu us (%lld us ago), latest wake-up %llu us late (%lld us "
		"ago), longest lock wait %llu us (for %u, %lld us ago); members%s",
		q->qpn, qp->dest_qpn, q->comp.una, q->req.npsn, t->ack_psn, us_since(e, t->ack_at),
		t->ack_pid, t->acks, t->req_psn, us_since(e, t->req_at), t->req_pid, t->reqs,
		q->resp.epsn, t->tx_psn, us_since(e, t->tx_at), t->tx_pid, t->txs, t->ack_tx_psn,
		us_since(e, t->ack_tx_at), t->ack_tx_pid, t->ack_txs, us_since(e, t->handed_at),
		t->handed_pid, t->handed, qp->wtx_ack, q->grant.eng_granted, q->grant.direct_wait,
		(unsigned long long)e->turn_worst / 1000, us_since(e, e->turn_worst_at),
		(unsigned long long)e->late_worst / 1000, us_since(e, e->late_worst_at),
		(unsigned long long)lock_ns / 1000, lock_tid,
		lock_ago < 0 ? -1 : (long long)(lock_ago / 1000), mbs);
	e->turn_worst = e->late_worst = 0;
}

static void flush_err(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	sr_shm_lock(&qp->sq_lock);
	sr_sq_flush_locked(e->arena, qp, sr_signal_fd, e->ctx);
	sr_shm_unlock(&qp->sq_lock);
	q->comp.deadline = 0;
	q->req.req_init = false;
}

/* ---- building packets ---- */

/* The bytes [off, off + len) of a WQE's gather/scatter list as iovecs
 * straight into the registered memory, each piece's key checked for
 * `need` (0: a local read).  False if a key does not allow it. */
static bool sge_pieces(struct sr_engine *e, struct sr_qp_shm *qp, const struct sr_send_wqe *w,
		       uint64_t off, uint32_t len, uint32_t need, struct iovec *iov, unsigned *niov)
{
	return !sr_sge_map(e->ctx, e->arena, (const struct sr_sge_shm *)(w + 1), w->num_sge, off,
			   len, need, qp->pd, qp->qpn, iov, niov);
}

/* The payload bytes [off, off + len) of a SEND or WRITE: in place in the
 * registered memory, or the WQE itself for inline data. */
static enum ibv_wc_status gather(struct sr_engine *e, struct sr_qp_shm *qp,
				 const struct sr_send_wqe *w, uint64_t off, uint32_t len,
				 struct iovec *iov, unsigned *niov)
{
	if (w->flags & SR_WQE_INLINE) {
		iov[0] = (struct iovec){(char *)(w + 1) + off, len};
		*niov = len ? 1 : 0;
		return IBV_WC_SUCCESS;
	}
	return sge_pieces(e, qp, w, off, len, 0, iov, niov) ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR;
}

/* The transport bits of the QP's request opcodes. */
static uint8_t transport_of(const struct sr_qp_shm *qp)
{
	return qp->type == IBV_QPT_UC	      ? SR_TR_UC
	       : qp->type == IBV_QPT_XRC_SEND ? SR_TR_XRC
					      : SR_TR_RC;
}

/* AckReq at least this often: within half the window, which CNPs may
 * have cut below SR_ENG_ACKREQ_EVERY (sr_eng_req_cnp). */
static uint32_t ackreq_every(const struct sr_eng_qp *q)
{
	return q->req.win && q->req.win / 2 < SR_ENG_ACKREQ_EVERY ? q->req.win / 2
								  : SR_ENG_ACKREQ_EVERY;
}

/* Sends one packet of WQE w at message offset q->req.soff; returns false if
 * the WQE failed locally (its error is recorded in its swqe). */
static bool send_one(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		     struct sr_send_wqe *w, struct sr_eng_swqe *sw)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu);
	uint8_t h[SR_MAX_HDR_LEN];
	struct iovec iov[SR_MAX_SGE];
	unsigned hl = SR_BTH_LEN, niov = 0;
	uint32_t len = 0;
	bool first = q->req.soff == 0, last, ackreq;
	uint8_t op, tr = transport_of(qp);

	/* An ACK handed to the QP's next request (resp.c, ack_defer) goes
	 * with the first one this turn sends, just before it.  Not on every
	 * entry: one for a message that came in just before the ACK of our
	 * last request (a message of two or more packets, then the ACK, as
	 * a posting thread sends them) was sent at once when that ACK came,
	 * and the peer, its request complete, went to watch memory for the
	 * answer, whose datagrams then waited in its socket for the engine's
	 * next look (ib_write_lat 8 KiB: half its round trips 300 µs). */
	if (!q->req.dack_looked) {
		q->req.dack_looked = true;
		sr_eng_resp_dack_take(e, qp, q);
	}

	/* A14: an XRC request names its SRQ at the responder, first of all */
	if (tr == SR_TR_XRC) {
		sr_xrceth_put(h + hl, w->xrc_srqn);
		hl += SR_XRCETH_LEN;
	}
	if (w->opcode == IBV_WR_RDMA_READ) {
		/* one READ request for the rest of the chunk at soff (read_chunk) */
		uint64_t end = read_chunk_end(qp, w, q->req.soff);

		hl += sr_rd_atomic_put(h + hl, tr, w->opcode, w->remote_addr + q->req.soff, w->rkey,
				       (uint32_t)(end - q->req.soff), 0, 0, &op);
		sr_bth_put(h, op, false, 0, SR_DEFAULT_PKEY, qp->dest_qpn, true,
			   sr_psn_add(sw->first_psn, (uint32_t)(q->req.soff / mtu)));
		last = end >= w->total_len;
		q->req.npsn = last ? sr_psn_add(sw->first_psn, sw->npkts)
				   : sr_psn_add(sw->first_psn, (uint32_t)(end / mtu));
		q->req.soff = end;
	} else if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		   w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		hl += sr_rd_atomic_put(h + hl, tr, w->opcode, w->remote_addr, w->rkey, 0, w->swap,
				       w->compare_add, &op);
		last = true;
		sr_bth_put(h, op, false, 0, SR_DEFAULT_PKEY, qp->dest_qpn, true, q->req.npsn);
		q->req.npsn = sr_psn_add(q->req.npsn, 1);
	} else {
		len =
		    w->total_len - q->req.soff < mtu ? (uint32_t)(w->total_len - q->req.soff) : mtu;
		last = q->req.soff + len >= w->total_len;
		op = sr_data_opcode(tr, w->opcode, first, last);
		hl += sr_data_ext_put(h + hl, op, w->remote_addr, w->rkey, w->total_len,
				      w->imm_or_inv);
		if (gather(e, qp, w, q->req.soff, len, iov, &niov) != IBV_WC_SUCCESS)
			return false;
		/* within half a window cut by CNPs too, or it waits for a probe */
		ackreq = last || ++q->req.since_ack >= ackreq_every(q) ||
			 (q->comp.recovering && q->req.npsn == q->comp.rec_psn);
		if (ackreq)
			q->req.since_ack = 0;
		sr_bth_put(h, op, last && (w->flags & SR_WQE_SOLICITED), 0, SR_DEFAULT_PKEY,
			   qp->dest_qpn, ackreq && qp->type != IBV_QPT_UC, q->req.npsn);
		q->req.npsn = sr_psn_add(q->req.npsn, 1);
	}
	sr_eng_send(e, &(struct sr_link_addr){qp->sgid, qp->dgid, q->qpn}, h, hl, iov, niov, len);
	q->trail.tx_at = e->now;
	q->trail.tx_psn = sr_psn_add(q->req.npsn, SR_PSN_MASK);
	q->trail.tx_pid = e->pid;
	q->trail.txs++;
	if (e->app) {
		e->app_sent = true; /* sent before the lock goes (req_leave) */
		sr_eng_count(&e->cnt[SR_ENG_APP_REQS], 1);
	} else {
		q->grant.eng_tx_seq = e->tx_flushes + 1; /* out with the next batch */
	}
	q->req.soff += len;
	if (last)
		q->req.soff = UINT64_MAX; /* the WQE is sent */
	return true;
}

/* The furthest the requester has sent: after a go-back-N rewind, an ACK up
 * to there moves it forward again (the responder kept what it could). */
static void note_high(struct sr_eng_qp *q)
{
	uint32_t top = q->req.spos + (q->req.soff ? 1 : 0);

	if ((int32_t)(top - q->req.hspos) > 0)
		q->req.hspos = top;
	if (sr_psn_diff(q->req.npsn, q->req.hpsn) > 0)
		q->req.hpsn = q->req.npsn;
}

/* UC: the requester's only timer, when it sends again (req_timer). */
static void set_wakeup(struct sr_eng_qp *q, uint64_t at)
{
	if (!q->comp.deadline || at < q->comp.deadline)
		q->comp.deadline = at ? at : 1;
}

static void req_init(struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	q->req.npsn = qp->sq_psn;
	q->comp.una = qp->sq_psn;
	q->req.win = SR_ENG_WINDOW;
	q->comp.clean = 0;
	q->req.spos = qp->exec_pos;
	q->req.soff = 0;
	q->comp.rd_out = 0;
	q->req.since_ack = 0;
	q->comp.deadline = 0;
	q->comp.rnr_wait = false;
	q->comp.regap = false;
	q->comp.recovering = false;
	q->comp.rec_due = 0;
	q->comp.rec_rtt = 0;
	q->comp.retry_left = qp->retry_cnt;
	q->comp.rnr_left = qp->rnr_retry;
	q->req.hspos = q->req.spos;
	q->req.hpsn = q->req.npsn;
	q->req.req_init = true;
}

/*
 * Whether a receive half sends q's requests itself (datapath/wire_rx.c, "The
 * send half"): while its process's threads poll (the engine lent them
 * their member, so the QP's ACKs and responses come to them) it runs the
 * requester where the engine would have been woken to, so that a stream's
 * sending is done by the thread that waits for it and not by a third
 * thread on the same CPUs.  Never before the requests the engine batched
 * for the QP are out (eng_tx_seq): those would leave after the thread's,
 * and the responder would NAK the gap.  The thread sends its own before
 * it lets go of the QP's lock (req_leave), so the engine's next ones
 * cannot overtake them either.
 */
static bool app_sends(const struct sr_engine *e, const struct sr_eng_qp *q)
{
	const struct sr_arena_hdr *h = e->arena;

	return e->app_tx &&
	       (int64_t)(atomic_load_explicit(&h->eng_tx_flushed, memory_order_acquire) -
			 q->grant.eng_tx_seq) >= 0;
}

/*
 * While a packet resent alone fills a gap that the responder placed past
 * (placed_past_gap), the requester goes on sending from where it stood:
 * the window counts from the gap, which holds the oldest unacknowledged
 * PSN still while the resend's round trip lasts, and with only the base
 * window the link would stand idle for that time (a 1 MiB WRITE stream at
 * 1% loss spent a quarter of its time so: 3.5 round trips per gap, since
 * each ACK reveals only the next hole).  Twice the window, no more than
 * the responder can place past its gap.
 */
static uint32_t rec_span(const struct sr_eng_qp *q)
{
	uint32_t w = 2 * (q->req.win ? q->req.win : SR_ENG_WINDOW);

	return w < SR_ENG_OOO ? w : SR_ENG_OOO;
}

/*
 * Whether a WQE may start within the window.  A WRITE may as soon as one
 * of its packets fits: the responder places a WRITE that begins past a
 * gap in the one before it (resp.c, place_ahead), so a loss there does
 * not cost what was sent of this one.  Anything else only when all of it
 * fits, or nothing is outstanding: past a gap the responder drops it, and
 * it would be sent again.
 */
static bool starts_in(const struct sr_qp_shm *qp, const struct sr_eng_qp *q,
		      const struct sr_send_wqe *w, uint32_t win)
{
	int32_t out = sr_psn_diff(q->req.npsn, q->comp.una);

	if (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return out < (int32_t)win;
	return out + npkts_of(qp, w) <= win || q->req.npsn == q->comp.una;
}

static void req_run(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	uint32_t state = atomic_load_explicit(&qp->state, memory_order_acquire);
	uint32_t head = atomic_load_explicit(&qp->sq.head, memory_order_acquire);
	uint32_t max_rd = qp->max_rd_atomic ? qp->max_rd_atomic : 1;
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu);
	/* recovering from a sequence NAK: the missing packet alone, AckReq,
	 * and then, if the responder holds what came after it, new packets
	 * from where sending stood (rec_span) */
	uint32_t win = !q->comp.recovering ? (q->req.win ? q->req.win : SR_ENG_WINDOW)
		       : q->req.npsn == q->comp.rec_psn || !q->comp.rec_on ? 1
									   : rec_span(q);
	bool sent = false;

	if (e->app && (state != IBV_QPS_RTS || !q->req.req_init || !app_sends(e, q) ||
		       qp->type == IBV_QPT_UC)) {
		/* what is left to send (new WQEs, a rewind, a flush) is the
		 * engine's, rung after the batch (datapath/wire_rx.c).  UC's is
		 * always: its packets sent by two threads through two sockets
		 * can pass each other in the kernel, which RC repairs and UC
		 * cannot (a message lost, drop_opcode) */
		if (state == IBV_QPS_ERR ||
		    (state == IBV_QPS_RTS && q->req.req_init && !q->comp.rnr_wait &&
		     (q->req.spos != head || q->req.soff || q->req.spos != q->req.hspos))) {
			q->grant.run_wanted = true;
			sr_eng_activate(e, q);
		}
		return;
	}
	q->grant.run_wanted = false;
	if (state == IBV_QPS_ERR) {
		flush_err(e, qp, q);
		return;
	}
	if (state != IBV_QPS_RTS)
		return; /* SQD, SQE: hold the queue */
	if (!q->req.req_init)
		req_init(qp, q);
	if (q->comp.rnr_wait)
		return; /* the RNR timer resumes it */
	/* WQEs completed past where the requester stands: an ACK beyond
	 * what it had resent retired them (the responder had kept them).  Go
	 * on from the oldest unacknowledged PSN.  Starting over from the
	 * connection's first PSN (req_init, as this did) sent only
	 * duplicates from then on, whose ACKs lay beyond anything sent and
	 * were ignored: RETRY_EXC_ERR with nothing lost (sr_xfer's SEND
	 * phase, one run in 20-40).  A reset QP starts over through
	 * wire_gen, a flushed one through flush_err. */
	if ((int32_t)(q->req.spos - qp->exec_pos) < 0)
		reposition(e, qp, q, q->comp.una);
	if (q->grant.direct_wait && sr_psn_diff(q->comp.una, q->grant.direct_end) >= 0) {
		q->grant.direct_wait = false;
		if (q->req.spos != head) /* WQEs waited behind it: a stream */
			q->grant.direct_quiet_until = e->now + SR_ENG_GRANT_QUIET_NS;
	}
	while (q->req.spos != head) {
		struct sr_send_wqe *w = sr_sq_wqe(e->arena, qp, q->req.spos);
		struct sr_eng_swqe *sw = &q->swqe[q->req.spos & (q->swqe_cnt - 1)];

		bool read = w->opcode == IBV_WR_RDMA_READ;

		/* nothing past a posting thread's packet before its ACK (a
		 * resend of it, after a rewind, goes) */
		if (q->grant.direct_wait && sr_psn_diff(q->req.npsn, q->grant.direct_end) >= 0)
			break;

		if (q->req.soff == 0) {
			/* a WQE starts: fence, the window (a READ: per chunk) */
			if ((w->flags & SR_WQE_FENCE) && q->comp.rd_out)
				break;
			if (!read && !starts_in(qp, q, w, win))
				break;
			if (is_local(w->opcode)) {
				/* executed once, even if a rewind passes it again */
				if (!sw->local_done || sw->idx != q->req.spos) {
					sw->local_err = sr_exec_local_op(e->ctx, qp, w);
					sw->local_done = true;
				}
				sw->idx = q->req.spos;
				sw->first_psn = q->req.npsn;
				sw->npkts = 0;
				sw->rd_atomic = false;
				q->req.spos++;
				note_high(q);
				continue;
			}
			sw->idx = q->req.spos;
			sw->local_done = false;
			sw->resp_off = 0; /* a rewind into a READ's middle skips this */
			sw->first_psn = q->req.npsn;
			sw->npkts = npkts_of(qp, w);
			sw->rd_atomic = sr_wr_rd_atomic(w->opcode);
			sw->local_err = IBV_WC_SUCCESS;
		} else if (!read && sr_psn_diff(q->req.npsn, q->comp.una) >= (int32_t)win) {
			break;
		}
		if (sw->rd_atomic) {
			/* each READ request (chunk) and atomic: max_rd_atomic, window */
			uint64_t end = read ? read_chunk_end(qp, w, q->req.soff) : 0;
			uint32_t n = read && w->total_len
					 ? (uint32_t)((end - q->req.soff + mtu - 1) / mtu)
					 : 1;

			if (q->comp.rd_out >= max_rd)
				break;
			if (sr_psn_diff(q->req.npsn, q->comp.una) + n > win &&
			    q->req.npsn != q->comp.una)
				break;
			q->comp.rd_out++;
		}
		if (qp->type == IBV_QPT_UC) { /* its rate after a CNP (rate.h) */
			uint64_t at = sr_rate_wait(&q->req.rate, e->now);

			if (at) {
				set_wakeup(q, at);
				break;
			}
			sr_rate_sent(&q->req.rate, e->now,
				     w->total_len - q->req.soff < mtu
					 ? (uint32_t)(w->total_len - q->req.soff)
					 : mtu);
		}
		if (!send_one(e, qp, q, w, sw)) {
			sw->local_err = IBV_WC_LOC_PROT_ERR;
			q->req.soff = 0;
			q->req.spos++;
			break; /* completed in error when it is the head */
		}
		sent = true;
		if (q->req.soff == UINT64_MAX) {
			q->req.soff = 0;
			q->req.spos++;
		}
		note_high(q);
		if (q->comp.recovering && q->req.npsn == sr_psn_add(q->comp.rec_psn, 1)) {
			/* the resend is out */
			if (!q->comp.rec_on || q->req.npsn == q->req.hpsn)
				break;
			reposition(e, qp, q, q->req.hpsn);
			win = rec_span(q);
		}
	}
	if (qp->type == IBV_QPT_UC) {
		/* no ACKs on UC: a WQE is done once sent */
		while (qp->exec_pos != q->req.spos) {
			struct sr_send_wqe *w = sr_sq_wqe(e->arena, qp, qp->exec_pos);
			struct sr_eng_swqe *sw = &q->swqe[qp->exec_pos & (q->swqe_cnt - 1)];

			if (sw->local_err != IBV_WC_SUCCESS) {
				fail_head(e, qp, q, sw->local_err);
				return;
			}
			complete_head(e, qp, IBV_WC_SUCCESS, w->total_len);
		}
		q->comp.una = q->req.npsn;
		/* the window only held us back: nothing will come to reopen
		 * it.  The rest goes in the engine's next turn, after it has
		 * read what came (a CNP), not in one burst of the whole SQ
		 * (a thousand 8 MiB messages overflowed the receiver) */
		if (sent && q->req.spos != head)
			set_wakeup(q, e->now);
		return;
	}
	if (sent && !q->comp.deadline)
		arm_timer(e, qp, q);
	/* a head that failed locally or a local operation at the head completes now */
	sr_eng_comp_retire(e, qp, q, sr_psn_add(q->comp.una, SR_PSN_MASK));
}

/* ---- the completer ---- */

/*
 * Retires WQEs from the head while they are done: everything whose last PSN
 * is at or before `acked` (a SEND or WRITE), a local operation, a WQE that
 * failed locally (completed in error: the QP fails).  READs and atomics
 * retire only through their responses.
 */
void sr_eng_comp_retire(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
			uint32_t acked)
{
	while (qp->exec_pos != q->req.spos) {
		struct sr_send_wqe *w = sr_sq_wqe(e->arena, qp, qp->exec_pos);
		struct sr_eng_swqe *sw = &q->swqe[qp->exec_pos & (q->swqe_cnt - 1)];

		if (sw->local_err != IBV_WC_SUCCESS) {
			fail_head(e, qp, q, sw->local_err);
			return;
		}
		if (is_local(w->opcode)) {
			complete_head(e, qp, IBV_WC_SUCCESS, 0);
			continue;
		}
		if (sw->rd_atomic ||
		    sr_psn_diff(sr_psn_add(sw->first_psn, sw->npkts - 1), acked) > 0)
			break;
		complete_head(e, qp, IBV_WC_SUCCESS, w->total_len);
	}
}

/* The requester goes on from PSN `psn` (not yet acknowledged), back
 * (go-back-N) or forward (an ACK past what it resent). */
static void reposition(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t psn)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu), i;

	q->comp.rd_out = 0;
	for (i = qp->exec_pos; i != q->req.hspos; i++) {
		struct sr_send_wqe *w = sr_sq_wqe(e->arena, qp, i);
		struct sr_eng_swqe *sw = &q->swqe[i & (q->swqe_cnt - 1)];
		int32_t d = sr_psn_diff(psn, sw->first_psn);

		if (is_local(w->opcode))
			continue;
		if (d < (int32_t)sw->npkts) {
			q->req.spos = i;
			if (w->opcode == IBV_WR_RDMA_READ) {
				/* ask again from the first byte not received */
				q->req.soff = sw->resp_off;
				q->req.npsn = sr_psn_add(sw->first_psn, sw->resp_off / mtu);
			} else if (sw->rd_atomic) {
				q->req.soff = 0;
				q->req.npsn = sw->first_psn;
			} else {
				if (d < 0)
					d = 0;
				q->req.soff = (uint64_t)d * mtu;
				q->req.npsn = sr_psn_add(sw->first_psn, (uint32_t)d);
			}
			break;
		}
		if (w->opcode == IBV_WR_RDMA_READ)
			q->comp.rd_out += read_chunks_out(qp, w, sw);
		else if (sw->rd_atomic)
			q->comp.rd_out++;
	}
	if (i == q->req.hspos) {
		/* past everything started: go on with the next WQE */
		q->req.spos = q->req.hspos;
		q->req.soff = 0;
		q->req.npsn = psn;
	}
	q->req.since_ack = 0;
	sr_eng_activate(e, q);
}

/* Go-back-N: resend from `psn`. */
static void rewind_to(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t psn)
{
	/* a loss: back to the base window (acked_to) */
	q->req.win = SR_ENG_WINDOW;
	q->comp.clean = 0;
	q->comp.regap = true;
	reposition(e, qp, q, psn);
	sr_eng_count(&e->cnt[SR_ENG_RETRANS], 1);
}

/*
 * The first PSN whose answer a READ or atomic still waits for, among the
 * WQEs sent (none: false).  An acknowledgement beyond it is an implied NAK
 * (9.7.5.2.x): that response was lost, the request must go again.
 */
static bool first_unanswered(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
			     uint32_t *psn, struct sr_eng_swqe **swp)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu);

	for (uint32_t i = qp->exec_pos; i != q->req.hspos; i++) {
		struct sr_eng_swqe *sw = &q->swqe[i & (q->swqe_cnt - 1)];

		if (sw->rd_atomic) {
			*psn = sr_psn_add(sw->first_psn, sw->resp_off / mtu);
			*swp = sw;
			return true;
		}
	}
	return false;
}

/*
 * Whether the oldest unacknowledged packet is one our responder places
 * when it comes past a gap (resp.c, place_ahead): a WRITE's MIDDLE, or the
 * LAST of one without immediate data.  Then it holds what came after it,
 * WRITEs begun after it included, and the packet alone fills its gap.
 */
static bool placed_past_gap(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	if (q->comp.rd_out)
		return false;
	for (uint32_t i = qp->exec_pos; i != q->req.hspos; i++) {
		const struct sr_send_wqe *w = sr_sq_wqe(e->arena, qp, i);
		const struct sr_eng_swqe *sw = &q->swqe[i & (q->swqe_cnt - 1)];
		int32_t d = sr_psn_diff(q->comp.una, sw->first_psn);

		if (is_local(w->opcode) || d >= (int32_t)sw->npkts)
			continue;
		return d > 0 &&
		       (w->opcode == IBV_WR_RDMA_WRITE ||
			w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
		       !(w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && d == (int32_t)sw->npkts - 1);
	}
	return false;
}

/* ... and everything sent after it is a SEND or WRITE, so that sending
 * can go on from where it stood (rec_span): a READ or atomic there would
 * be asked again from its start (reposition). */
static bool sends_on_past_gap(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	if (!placed_past_gap(e, qp, q))
		return false;
	for (uint32_t i = qp->exec_pos; i != q->req.hspos; i++) {
		const struct sr_send_wqe *w = sr_sq_wqe(e->arena, qp, i);

		if (w->opcode == IBV_WR_RDMA_READ || sr_wr_rd_atomic(w->opcode))
			return false;
	}
	return true;
}

/* The oldest unacknowledged packet goes again alone, with AckReq: the ACK
 * says how far the responder got past it (resp.c places ahead). */
static void resend_alone(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	uint64_t t = q->comp.rec_rtt * 4;

	rewind_to(e, qp, q, q->comp.una);
	q->comp.recovering = true;
	q->comp.rec_psn = q->comp.una;
	q->comp.rec_on = sends_on_past_gap(e, qp, q);
	req_run(e, qp, q); /* (or the engine, soon: datapath/wire_rx.c) */
	/* it or its ACK may be lost too, and no NAK would say so (one per
	 * gap): it goes again after four of its round trips, not after a
	 * probe's milliseconds */
	if (t < SR_ENG_REC_MIN_NS)
		t = SR_ENG_REC_MIN_NS;
	if (t > q->comp.probe_ns)
		t = q->comp.probe_ns;
	q->comp.rec_at = e->now;
	q->comp.rec_due = e->now + t;
	if (q->comp.rto_at && q->comp.rto_at < q->comp.rec_due)
		q->comp.rec_due = q->comp.rto_at;
	q->comp.deadline = q->comp.rec_due; /* before the probe's, which it stands for meanwhile */
	sr_eng_activate(e, q);
}

/*
 * The ACK of a resent packet came back short of what had been sent before
 * the NAK (rec_mark): the responder placed what it could past the gap and
 * stopped at the next packet it lacks, which a loss of 1% makes likely
 * within a window of a few hundred.  That one goes alone too, when the
 * responder did place (the ACK went past the resent packet) and the packet
 * is one it places (a WRITE's MIDDLE, or the LAST of one without
 * immediate): each further loss then costs a round trip, not the resend
 * of everything after it.  Anything else is go-back-N from there.
 */
static bool next_hole(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		      uint32_t resent)
{
	if (sr_psn_diff(q->comp.una, sr_psn_add(resent, 1)) <= 0 ||
	    sr_psn_diff(q->comp.una, q->comp.rec_mark) >= 0 || !placed_past_gap(e, qp, q))
		return false;
	resend_alone(e, qp, q);
	return true;
}

/*
 * The window: SR_ENG_WINDOW packets (1 MiB at a 4096-byte MTU), and a
 * quarter more each time twice the window was acknowledged with no loss
 * (no rewind) in between, up to SR_ENG_WINDOW_MAX packets and 2 MiB; any
 * loss takes it back to SR_ENG_WINDOW (rewind_to).  A stream on a clean
 * link keeps more in flight (ib_write_bw 1 MiB at MTU 9000, six
 * interleaved pairs: 17.8 against 15.8 Gb/s with a fixed 2 MiB window),
 * while at 1% loss go-back-N resends no more than before (a fixed 2 MiB
 * window cost 20% there).
 */
static void grow_window(struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t acked)
{
	uint32_t max = (2u << 20) / sr_mtu_bytes(qp->path_mtu);

	if (max > SR_ENG_WINDOW_MAX)
		max = SR_ENG_WINDOW_MAX;
	if (!q->req.win)
		q->req.win = SR_ENG_WINDOW;
	q->comp.clean += acked;
	if (q->comp.clean < 2 * q->req.win || q->req.win >= max)
		return;
	q->comp.clean = 0;
	q->req.win += SR_ENG_WINDOW / 4;
	if (q->req.win > max)
		q->req.win = max;
}

/* PSNs up to `psn` are acknowledged; returns true if that implied a NAK
 * and the requester was rewound. */
static bool acked_to(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t psn)
{
	uint32_t next = sr_psn_add(psn, 1), u, resent = q->comp.rec_psn;
	bool implied = false, rec = q->comp.recovering, moved = false;
	struct sr_eng_swqe *sw;

	/* only a PSN we sent moves anything (others are ignored) */
	if (sr_psn_diff(next, q->comp.una) <= 0 || sr_psn_diff(next, q->req.hpsn) > 0)
		return false;
	if (first_unanswered(e, qp, q, &u, &sw) && sr_psn_diff(next, u) > 0) {
		next = u;
		implied = !q->comp.regap; /* once, until progress */
	}
	if (sr_psn_diff(next, q->comp.una) > 0) {
		if (rec && q->comp.rec_due && sr_psn_diff(next, resent) > 0) {
			uint64_t rtt = e->now - q->comp.rec_at;

			q->comp.rec_rtt = q->comp.rec_rtt ? (q->comp.rec_rtt * 7 + rtt) / 8 : rtt;
			q->comp.rec_due = 0;
		}
		grow_window(qp, q, (uint32_t)sr_psn_diff(next, q->comp.una));
		q->comp.una = next;
		q->comp.regap = false;
		q->comp.recovering = false;
		q->comp.retry_left = qp->retry_cnt; /* progress: the retry budget starts again */
		sr_eng_comp_retire(e, qp, q, sr_psn_add(next, SR_PSN_MASK));
		moved = true;
	}
	if (implied) {
		rewind_to(e, qp, q, q->comp.una);
		return true;
	}
	if (rec && moved && next_hole(e, qp, q, resent))
		return false;
	if (sr_psn_diff(q->comp.una, q->req.npsn) > 0 ||
	    (rec && moved && sr_psn_diff(q->comp.una, sr_psn_add(resent, 1)) >= 0 &&
	     sr_psn_diff(q->comp.una, q->comp.rec_mark) < 0))
		/* no need to resend what came; and the ACK of a resend that
		 * stops short of where sending stood at the NAK, at a packet
		 * the responder does not place (next_hole): go-back-N from
		 * there, whatever was sent since */
		reposition(e, qp, q, q->comp.una);
	if (q->comp.una == q->req.npsn && qp->exec_pos == q->req.spos && !q->req.soff)
		q->comp.deadline = 0;
	else
		arm_timer(e, qp, q);
	return false;
}

static enum ibv_wc_status nak_status(uint8_t code)
{
	switch (code) {
	case SR_NAK_REM_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case SR_NAK_REM_OP:
		return IBV_WC_REM_OP_ERR;
	default:
		return IBV_WC_REM_INV_REQ_ERR;
	}
}

static void on_ack(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		   const struct sr_pkt *p)
{
	uint8_t kind = p->syndrome & 0xe0, val = p->syndrome & 0x1f;
	uint32_t before = sr_psn_add(p->bth.psn, SR_PSN_MASK);

	if (kind == SR_AETH_ACK) {
		acked_to(e, qp, q, p->bth.psn);
		return;
	}
	/* a NAK acknowledges everything before its PSN (9.7.5.2.x) */
	if (sr_psn_diff(p->bth.psn, q->comp.una) < 0 || sr_psn_diff(p->bth.psn, q->req.npsn) >= 0)
		return; /* stale */
	if (p->bth.psn != q->comp.una && acked_to(e, qp, q, before))
		return; /* an answer to a READ or atomic before it was lost: retried */
	if (kind == SR_AETH_RNR_NAK) {
		sr_eng_count(&e->cnt[SR_ENG_RNR_RX], 1);
		/* C9-152: rnr_retry 7 retries for ever */
		if (qp->rnr_retry != 7 && q->comp.rnr_left-- == 0) {
			fail_head(e, qp, q, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		rewind_to(e, qp, q, p->bth.psn);
		q->comp.rnr_wait = true;
		q->comp.deadline = e->now + sr_rnr_timer_ns(val);
		sr_eng_activate(e, q);
		return;
	}
	sr_eng_count(&e->cnt[SR_ENG_NAK_RX], 1);
	if (kind == SR_AETH_NAK && val == SR_NAK_PSN_SEQ) {
		/* the packet is on its way again (next_hole, from the ACK
		 * this NAK implies or one before it): this NAK is older */
		if (q->comp.recovering && q->comp.rec_psn == q->comp.una)
			return;
		q->comp.rec_mark = q->req.hpsn;
		resend_alone(e, qp, q);
		return;
	}
	/* remote access, invalid request, remote operational error: fatal */
	fail_head(e, qp, q, nak_status(val));
}

/* The head must be the READ or atomic this response answers. */
static struct sr_send_wqe *resp_head(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
				     uint32_t psn, struct sr_eng_swqe **swp)
{
	struct sr_send_wqe *w;
	struct sr_eng_swqe *sw;

	/* a response acknowledges every request before it (9.7.5.2.x) */
	for (;;) {
		if (qp->exec_pos == q->req.spos && !q->req.soff)
			return NULL;
		w = sr_sq_wqe(e->arena, qp, qp->exec_pos);
		sw = &q->swqe[qp->exec_pos & (q->swqe_cnt - 1)];
		if (sw->rd_atomic || sw->local_err != IBV_WC_SUCCESS)
			break;
		if (sr_psn_diff(psn, sw->first_psn) < (int32_t)sw->npkts)
			return NULL;
		/* a WRITE or SEND still being sent retires nothing: then the
		 * response answers no request of ours (fuzz_rx found the loop) */
		uint32_t before = qp->exec_pos;

		sr_eng_comp_retire(e, qp, q, sr_psn_add(sw->first_psn, sw->npkts - 1));
		if (qp->exec_pos == before)
			return NULL;
	}
	if (sw->local_err != IBV_WC_SUCCESS) {
		sr_eng_comp_retire(e, qp, q, psn);
		return NULL;
	}
	*swp = sw;
	return w;
}

static void read_done(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		      struct sr_send_wqe *w, struct sr_eng_swqe *sw, enum ibv_wc_status st,
		      uint32_t byte_len)
{
	uint32_t last = sr_psn_add(sw->first_psn, sw->npkts - 1);

	sw->resp_off = 0;
	if (q->comp.rd_out)
		q->comp.rd_out--;
	if (st != IBV_WC_SUCCESS) {
		fail_head(e, qp, q, st);
		return;
	}
	(void)w;
	complete_head(e, qp, IBV_WC_SUCCESS, byte_len);
	if (sr_psn_diff(sr_psn_add(last, 1), q->comp.una) > 0)
		q->comp.una = sr_psn_add(last, 1);
	q->comp.regap = false;
	q->comp.retry_left = qp->retry_cnt;
	sr_eng_comp_retire(e, qp, q, sr_psn_add(q->comp.una, SR_PSN_MASK));
	if (q->comp.una == q->req.npsn && qp->exec_pos == q->req.spos && !q->req.soff)
		q->comp.deadline = 0;
	else
		arm_timer(e, qp, q);
	req_run(e, qp, q);
}

/* A response for a PSN after `expect` (the head's): the head's answer was
 * lost; ask again for the rest (once: after a rewind, later answers may
 * be stale ones, until progress shows the new round). */
static void answer_gap(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t psn,
		       uint32_t expect)
{
	if (sr_psn_diff(psn, expect) > 0 && !q->comp.regap) {
		rewind_to(e, qp, q, expect);
		req_run(e, qp, q);
	}
}

static void on_read_resp(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
			 const struct sr_pkt *p)
{
	uint32_t mtu = sr_mtu_bytes(qp->path_mtu);
	struct sr_eng_swqe *sw;
	struct sr_send_wqe *w = resp_head(e, qp, q, p->bth.psn, &sw);
	struct iovec iov[SR_MAX_SGE];
	unsigned niov = 0;
	uint32_t expect, len = p->paylen;
	const char *src = (const char *)p->payload;

	if (!w || w->opcode != IBV_WR_RDMA_READ)
		return; /* duplicate or stray */
	expect = sr_psn_add(sw->first_psn, sw->resp_off / mtu);
	if (p->bth.psn != expect) {
		answer_gap(e, qp, q, p->bth.psn, expect);
		return;
	}
	if ((p->op->flags & SR_OPF_AETH) && (p->syndrome & 0xe0) != SR_AETH_ACK) {
		read_done(e, qp, q, w, sw, nak_status(p->syndrome & 0x1f), 0);
		return;
	}
	if (sw->resp_off + len > w->total_len || (!(p->op->flags & SR_OPF_LAST) && len != mtu) ||
	    ((p->op->flags & SR_OPF_LAST) &&
	     read_chunk_end(qp, w, sw->resp_off) != sw->resp_off + len)) {
		read_done(e, qp, q, w, sw, IBV_WC_BAD_RESP_ERR, 0);
		return;
	}
	/* scatter into the WQE's own buffers at resp_off */
	if (!sge_pieces(e, qp, w, sw->resp_off, len, IBV_ACCESS_LOCAL_WRITE, iov, &niov)) {
		read_done(e, qp, q, w, sw, IBV_WC_LOC_PROT_ERR, 0);
		return;
	}
	for (unsigned i = 0; i < niov; i++) {
		sr_copy(iov[i].iov_base, src, iov[i].iov_len); /* the tail once, last */
		src += iov[i].iov_len;
	}
	sw->resp_off += p->paylen;
	if ((p->op->flags & SR_OPF_LAST) && sw->resp_off == w->total_len) {
		read_done(e, qp, q, w, sw, IBV_WC_SUCCESS, w->total_len);
		return;
	}
	/* each response packet in order acknowledges its PSN: the window
	 * moves on and a retry asks only for what has not come */
	q->comp.una = sr_psn_add(p->bth.psn, 1);
	q->comp.regap = false;
	if ((p->op->flags & SR_OPF_LAST) && q->comp.rd_out)
		q->comp.rd_out--; /* a chunk is answered */
	q->comp.retry_left = qp->retry_cnt;
	arm_timer(e, qp, q);
}

static void on_atomic_ack(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
			  const struct sr_pkt *p)
{
	struct sr_eng_swqe *sw;
	struct sr_send_wqe *w = resp_head(e, qp, q, p->bth.psn, &sw);
	const struct sr_sge_shm *sge;
	void *dst = NULL;

	if (!w || !sw->rd_atomic)
		return;
	if (w->opcode == IBV_WR_RDMA_READ || p->bth.psn != sw->first_psn) {
		answer_gap(e, qp, q, p->bth.psn,
			   sr_psn_add(sw->first_psn, sw->resp_off / sr_mtu_bytes(qp->path_mtu)));
		return;
	}
	if ((p->syndrome & 0xe0) != SR_AETH_ACK) {
		read_done(e, qp, q, w, sw, nak_status(p->syndrome & 0x1f), 0);
		return;
	}
	sge = (const void *)(w + 1);
	if (w->num_sge < 1 || sge[0].length < 8 ||
	    sr_key_resolve(e->ctx, e->arena, sge[0].lkey, sge[0].addr, 8, IBV_ACCESS_LOCAL_WRITE,
			   qp->pd, qp->qpn, false, &dst)) {
		read_done(e, qp, q, w, sw, IBV_WC_LOC_PROT_ERR, 0);
		return;
	}
	memcpy(dst, &p->atomic_orig, 8);
	read_done(e, qp, q, w, sw, IBV_WC_SUCCESS, 8);
}

static void comp_rx(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p)
{
	uint32_t state = atomic_load_explicit(&qp->state, memory_order_acquire);

	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_XRC_SEND) || !q->req.req_init ||
	    (state != IBV_QPS_RTS && state != IBV_QPS_SQD && state != IBV_QPS_SQE)) {
		sr_eng_count(&e->drops[SR_DROP_STATE], 1);
		return;
	}
	q->trail.ack_at = e->now;
	q->trail.ack_psn = p->bth.psn;
	q->trail.ack_pid = e->pid;
	q->trail.acks++;
	if (p->op->flags & SR_OPF_READ)
		on_read_resp(e, qp, q, p);
	else if (p->op->flags & SR_OPF_ATOMACKETH)
		on_atomic_ack(e, qp, q, p);
	else
		on_ack(e, qp, q, p);
	if (!q->comp.rnr_wait)
		req_run(e, qp, q);
}

static void req_timer(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	if (atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_ERR) {
		flush_err(e, qp, q);
		return;
	}
	if (q->comp.rnr_wait) {
		q->comp.rnr_wait = false;
		q->comp.deadline = 0;
		req_run(e, qp, q);
		return;
	}
	if (qp->type == IBV_QPT_UC) { /* its rate allows the next packet, or a new turn */
		q->comp.deadline = 0;
		req_run(e, qp, q);
		return;
	}
	if (q->comp.una == q->req.npsn && q->req.npsn == q->req.hpsn) {
		/* nothing unacknowledged: nothing to probe (a stream's last
		 * ACK can come by a path that leaves the timer set) */
		q->comp.deadline = 0;
		req_run(e, qp, q);
		return;
	}
	if ((!q->comp.rto_at || e->now < q->comp.rto_at) && q->comp.rec_due &&
	    e->now >= q->comp.rec_due && q->comp.recovering) {
		/* a packet resent alone, not acknowledged in four of its
		 * round trips: it (or its ACK) was lost, it goes again; the
		 * round trip is taken as twice as long until one comes */
		sr_eng_count(&e->cnt[SR_ENG_PROBES], 1);
		q->comp.rec_due = 0;
		q->comp.rec_rtt = q->comp.rec_rtt ? q->comp.rec_rtt * 2 : SR_ENG_REC_MIN_NS / 2;
		set_deadline(e, q);
		resend_alone(e, qp, q);
		return;
	}
	if (!q->comp.rto_at || e->now < q->comp.rto_at) {
		/* a probe: go back to the oldest unacknowledged PSN, keep the
		 * deadline set so that sending does not restart the clocks */
		sr_eng_count(&e->cnt[SR_ENG_PROBES], 1);
		q->comp.recovering = false;
		q->comp.probe_ns =
		    q->comp.probe_ns * 2 < probe_cap(qp) ? q->comp.probe_ns * 2 : probe_cap(qp);
		set_deadline(e, q);
		if (placed_past_gap(e, qp, q)) {
			/* the responder holds what it got past the oldest
			 * packet (its NAK was lost, most likely): that one
			 * alone, as after a NAK */
			q->comp.rec_mark = q->req.hpsn;
			resend_alone(e, qp, q);
			return;
		}
		rewind_to(e, qp, q, q->comp.una);
		req_run(e, qp, q);
		return;
	}
	/* local ACK timeout (9.7.6.1.3): retry from the oldest unacknowledged PSN */
	if (q->comp.retry_left == 0) {
		why_failed(e, qp, q);
		fail_head(e, qp, q, IBV_WC_RETRY_EXC_ERR);
		return;
	}
	q->comp.retry_left--;
	q->comp.recovering = false;
	q->comp.deadline = 0;
	rewind_to(e, qp, q, q->comp.una);
	req_run(e, qp, q);
	if (!q->comp.deadline)
		arm_timer(e, qp, q);
}

/* ---- the requester shared with posting threads (datapath/wire_tx.c) ---- */

/*
 * A posting thread may send a SEND or WRITE of an RC QP of up to
 * SR_WIRE_DIRECT_PKTS packets itself when the engine has said where the
 * requester stands (the SQ index and PSN of the next WQE) and that nothing
 * else is under way: no rewind, RNR wait or recovery, no WQE half sent,
 * nothing unacknowledged (one message at a time: a stream of messages is
 * better batched by the engine).  The engine holds the QP's wtx_lock
 * whenever it touches the requester, and first takes in what posting
 * threads sent meanwhile as if it had sent it (each WQE's PSNs), so ACKs,
 * timers and retransmission work on them as on its own.  Its own packets
 * of a turn are in its transmit batch until the turn ends, so the grant
 * is given only then (sr_eng_req_grant), and no posting thread's packet
 * overtakes them.
 */

/* The WQEs posting threads sent since the engine last held the lock. */
static void absorb(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	uint32_t n = qp->wtx_spos - q->req.spos;

	if (!qp->wtx_ok || qp->wtx_gen != q->gen || !q->req.req_init || !n || n > q->swqe_cnt ||
	    q->req.soff)
		return;
	while (q->req.spos != qp->wtx_spos) {
		struct sr_eng_swqe *sw = &q->swqe[q->req.spos & (q->swqe_cnt - 1)];
		const struct sr_send_wqe *w;
		uint32_t k;

		sw->idx = q->req.spos;
		sw->local_done = false;
		sw->resp_off = 0;
		sw->first_psn = q->req.npsn;
		/* a message of up to SR_WIRE_DIRECT_PKTS packets (datapath/wire_tx.c);
		 * a WQE its process rewrote since is held to what it could send */
		w = sr_sq_wqe(e->arena, qp, q->req.spos);
		k = npkts_of(qp, w);
		sw->npkts = k >= 1 && k <= SR_WIRE_DIRECT_PKTS ? k : 1;
		/* a READ (its responses' PSNs) or an atomic: outstanding, as
		 * the engine counts its own (the grant wanted none out) */
		sw->rd_atomic = sr_wr_rd_atomic(w->opcode);
		if (sw->rd_atomic)
			q->comp.rd_out++;
		sw->local_err = IBV_WC_SUCCESS;
		q->req.npsn = sr_psn_add(q->req.npsn, sw->npkts);
		q->req.spos++;
		note_high(q);
	}
	q->req.since_ack = 0;
	q->grant.direct_sent_at = e->now;
	q->grant.direct_at = e->now;
	q->grant.direct_wait = true;
	q->grant.direct_end = q->req.npsn;
	if (!q->comp.deadline)
		arm_timer(e, qp, q);
}

void sr_eng_req_absorb(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	absorb(e, qp, q);
	if (q->comp.deadline) /* their timers: as req_leave */
		sr_eng_activate(e, q);
}

static void req_enter(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	sr_shm_lock(&qp->wtx_lock);
	absorb(e, qp, q);
	q->req.dack_looked = false; /* an ACK waiting for a request: send_one */
	qp->wtx_ok = 0;		    /* until this turn's packets are out: sr_eng_req_grant */
}

static void req_leave(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	if (e->app_sent) /* a receive half's requests leave under the lock (app_sends) */
		sr_eng_flush_tx(e);
	if (q->comp.deadline) /* armed by whoever held the lock: the timer walk's */
		sr_eng_activate(e, q);
	if (qp->type == IBV_QPT_RC) {
		q->grant.direct_at = e->now;
		sr_eng_grant_later(e, q);
	}
	sr_shm_unlock(&qp->wtx_lock);
}

void sr_eng_req_run(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	req_enter(e, qp, q);
	req_run(e, qp, q);
	req_leave(e, qp, q);
}

void sr_eng_comp_rx(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p)
{
	req_enter(e, qp, q);
	comp_rx(e, qp, q, p);
	req_leave(e, qp, q);
}

void sr_eng_req_timer(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	req_enter(e, qp, q);
	req_timer(e, qp, q);
	req_leave(e, qp, q);
}

/*
 * A CNP for this QP (A17.9.3): the reaction point.  RC and XRC halve
 * their window, which clean ACKs grow back (grow_window); UC, which has
 * neither window nor ACKs, cuts its sending rate (rate.h).
 */
void sr_eng_req_cnp(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	req_enter(e, qp, q);
	sr_eng_count(&e->cnt[SR_ENG_CNP_RX], 1);
	if (qp->type == IBV_QPT_UC) {
		sr_rate_cnp(&q->req.rate, e->now);
	} else {
		uint32_t w = (q->req.win ? q->req.win : SR_ENG_WINDOW) / 2;

		q->req.win = w > SR_ENG_CNP_WIN_MIN ? w : SR_ENG_CNP_WIN_MIN;
		q->comp.clean = 0;
	}
	req_leave(e, qp, q);
}

/* wtx_lock held: where the requester stands, for posting threads, and
 * whether they may send the next message themselves (one: wtx_room) */
static void publish(struct sr_qp_shm *qp, const struct sr_eng_qp *q, bool ok)
{
	qp->wtx_spos = q->req.spos;
	qp->wtx_npsn = q->req.npsn;
	qp->wtx_room = ok ? 1 : 0;
	qp->wtx_gen = q->gen;
	qp->wtx_ok = ok;
}

/*
 * The first grant, given by the daemon's thread as the QP reaches RTS
 * (daemon/obj_qp.c).  Given by the engine, as every later one is, it came
 * only after the engine had run in answer to the first post's doorbell: a
 * connection's first message then always left from the engine, and on a
 * machine whose CPUs are busy polling the engine's thread may wait a
 * scheduler tick to run (docs/architecture.md, "Known limits").  The
 * requester's state is the QP's engine chunk in the arena, which every
 * thread touches only under wtx_lock, so whichever thread holds the lock
 * may set it up.  The engine does not know of this grant (it is on none
 * of its lists, so nothing would time a lost packet out) until the thread
 * that sends under it rings the doorbell after its send (wtx_unseen,
 * datapath/wire_tx.c): the engine then takes what was sent in (sr_eng_req_keep)
 * off the message's path, and the grant over.
 */
bool sr_eng_req_rts(const void *arena, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint64_t q_size)
{
	const struct sr_arena_hdr *h = arena;
	uint32_t gen = atomic_load_explicit(&qp->wire_gen, memory_order_acquire);
	/* read once: the QP object is writable by any process of the user,
	 * and the chunk set up for cnt WQEs must be the one the daemon gave */
	uint32_t cnt = __atomic_load_n(&qp->sq.wqe_cnt, __ATOMIC_RELAXED);
	bool ok = false;

	if (qp->type != IBV_QPT_RC || !qp->wire || !cnt || (cnt & (cnt - 1)) ||
	    sr_eng_state_size(cnt) > q_size ||
	    atomic_load_explicit(&h->wire_taps, memory_order_relaxed))
		return false;
	sr_shm_lock(&qp->wtx_lock);
	sr_eng_state_fresh(qp, q, gen, cnt);
	if (!q->req.req_init &&
	    atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_RTS &&
	    qp->exec_pos == atomic_load_explicit(&qp->sq.head, memory_order_acquire)) {
		req_init(qp, q);
		q->grant.direct_at = sr_eng_clock();
		qp->wtx_unseen = 1;
		publish(qp, q, true);
		ok = true;
	}
	sr_shm_unlock(&qp->wtx_lock);
	return ok;
}

bool sr_eng_req_keep(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q)
{
	bool keep;

	sr_shm_lock(&qp->wtx_lock);
	keep = qp->wtx_ok && qp->wtx_gen == q->gen && q->req.req_init &&
	       atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_RTS &&
	       qp->wtx_spos == atomic_load_explicit(&qp->sq.head, memory_order_acquire);
	if (keep)
		sr_eng_req_absorb(e, qp, q);
	sr_shm_unlock(&qp->wtx_lock);
	if (keep) /* the grant's upkeep: on the list of granted QPs (engine.c) */
		sr_eng_grant_later(e, q);
	return keep;
}

bool sr_eng_req_grant(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, bool tick)
{
	const struct sr_arena_hdr *h = e->arena;
	uint32_t out;
	bool ok, keep, stay;

	sr_shm_lock(&qp->wtx_lock);
	/* the tick withdraws the grant of a QP idle for SR_ENG_GRANT_IDLE_NS
	 * (signed: the daemon's RTS grant may be stamped after this turn's
	 * clock) */
	keep = !tick || (int64_t)(e->now - q->grant.direct_at) < SR_ENG_GRANT_IDLE_NS ||
	       q->comp.una != q->req.npsn;
	absorb(e, qp, q);
	if (tick && !e->app)
		sr_eng_resp_handed_tick(e, qp, q);
	if (q->comp.deadline)
		sr_eng_activate(e, q);
	out = (uint32_t)sr_psn_diff(q->req.npsn, q->comp.una);
	/* only an idle requester: a posting thread sends one message per
	 * syscall, the engine many (GSO, sendmmsg), so a stream of messages
	 * is the engine's, and a ping-pong's messages leave from their thread */
	/* a ping-pong's QP, active: the engine keeps looking at it every
	 * tick, also while a request is out (a receive half may take the
	 * answer, and the posting thread's next request then needs a grant) */
	stay = keep && qp->type == IBV_QPT_RC && qp->wire &&
	       atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_RTS &&
	       q->req.req_init;
	ok = stay && !q->comp.rnr_wait && !q->comp.recovering && !q->comp.regap && !q->req.soff &&
	     q->req.spos == q->req.hspos && q->req.npsn == q->req.hpsn && !out && !q->comp.rd_out &&
	     q->swqe_cnt && e->now >= q->grant.direct_quiet_until &&
	     !atomic_load_explicit(&h->wire_taps, memory_order_relaxed);
	if (!e->app) { /* on the engine's list of granted QPs (engine.c) */
		q->grant.eng_granted = tick ? stay : sr_eng_slot_of(e, q)->granted || ok;
		if (ok)
			qp->wtx_unseen = 0;
	} else if (ok && !q->grant.eng_granted) {
		/* the engine must hold the grant too: it takes in what
		 * posting threads send, and so times their packets out */
		q->grant.run_wanted = true;
		sr_eng_activate(e, q);
	}
	publish(qp, q, ok);
	sr_shm_unlock(&qp->wtx_lock);
	return tick ? stay : ok;
}
