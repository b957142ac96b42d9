/*
 * A posting thread's own transmission of an RC QP's work requests to
 * another host: the send half of placement (b) (docs/architecture.md,
 * "Where the engine runs").  Without it every work request crosses from
 * the posting thread to the engine's thread, a wake-up each way on a
 * machine whose CPUs are busy polling; with it a SEND or RDMA WRITE of up
 * to SR_WIRE_DIRECT_PKTS packets leaves from the thread that posted it,
 * through this process's UDP socket, with the PSNs the engine set aside
 * for it (one UDP GSO send), and so does the one request of an RDMA READ
 * of up to as many response packets or of an atomic (their responses are
 * the completer's, whoever sent the request).
 *
 * The requester's state stays the engine's (transport/req.c).  Under the
 * QP's wtx_lock the engine publishes the SQ index and PSN of the next WQE
 * and grants (wtx_ok) only when nothing else is under way; a posting
 * thread that gets the lock without waiting sends from there and moves
 * the published position on, and the engine takes those WQEs into its own
 * state (their PSNs) before it next touches the requester, so ACKs,
 * timers, retransmission and completions treat them as its own.  Anything
 * else (a larger message or READ, a fence, a key that does not resolve,
 * no grant, the lock busy) is left to the engine's doorbell.
 *
 * The responder's ACK of the peer's last message may wait in the same
 * record for this QP's next request (transport/resp.c, "ACKs that go with the
 * QP's next request"): the thread that claims a WQE takes it too and sends
 * both in one system call, so the peer's engine wakes once for the two.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "datapath/wire_rx.h"
#include "datapath/wire_tx.h"
#include "core/log.h"
#include "core/shmlock.h"
#include "core/thread_obj.h"
#include "transport/transport.h"
#include "shm/exec.h"
#include "shm/mrmap.h"
#include "shm/qp_err.h"
#include "verbs/objects.h"
#include "wire/reqhdr.h"
#include "roce/roce.h"

/* A message this thread may send: a SEND or WRITE of at most
 * SR_WIRE_DIRECT_PKTS packets, a READ of at most as many response packets
 * (one request: within the engine's READ chunk), an atomic; no fence. */
static bool sendable(const struct sr_send_wqe *w, uint8_t op, uint32_t len, uint32_t mtu)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		break;
	default:
		return false;
	}
	static_assert(SR_WIRE_DIRECT_PKTS <= SR_ENG_READ_CHUNK, "a direct READ is one request");
	return !(w->flags & SR_WQE_FENCE) && len <= (uint64_t)SR_WIRE_DIRECT_PKTS * mtu;
}

/* A WQE this thread claimed: its length, path MTU and packets read once
 * under the lock (the SQ and the QP's record are the process's memory,
 * which another of its threads could change meanwhile), its first PSN. */
struct claimed {
	struct sr_send_wqe *w;
	uint8_t op;
	uint32_t len, mtu, np, psn;
	uint64_t va, swap, compare_add; /* a READ's or atomic's */
	uint32_t rkey;
};

/* The len bytes at message offset off of the payload iov[0..n), as iovecs
 * into out (at most n of them); returns how many. */
static unsigned slice(const struct iovec *iov, unsigned n, uint64_t off, uint32_t len,
		      struct iovec *out)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n && len; i++) {
		size_t take;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		take = iov[i].iov_len - off < len ? iov[i].iov_len - off : len;
		out[k++] = (struct iovec){(char *)iov[i].iov_base + off, take};
		len -= (uint32_t)take;
		off = 0;
	}
	return k;
}

/* The payload as iovecs into the registered memory (or the WQE, inline);
 * false if a key does not resolve: the engine then fails the WQE. */
static bool payload(struct sr_context *ctx, const struct sr_qp_shm *s, const struct sr_send_wqe *w,
		    struct iovec *iov, unsigned *n)
{
	const struct sr_sge_shm *sge = (const void *)(w + 1);

	*n = 0;
	if (w->flags & SR_WQE_INLINE) {
		iov[0] = (struct iovec){(void *)(w + 1), w->total_len};
		*n = w->total_len ? 1 : 0;
		return true;
	}
	return !sr_sge_map(&ctx->dc, ctx->dc.arena, sge,
			   w->num_sge < SR_MAX_SGE ? w->num_sge : SR_MAX_SGE, 0, w->total_len, 0,
			   s->pd, s->qpn, iov, n);
}

/* This thread's link for a message's packets and an ACK (roce/roce.h:
 * one GSO send through its process's socket; about 90 KiB), made at its
 * first post on a wire QP and freed when the thread exits; NULL without
 * memory (the engine then sends everything).  It has no engine: its sends
 * are off while a tap is on (wire_taps). */
static struct sr_thread_obj senders = SR_THREAD_OBJ(sizeof(struct sr_roce), NULL);

/* This thread's link, sending from sock (NULL: none). */
static struct sr_link *direct_link(int sock, uint16_t sport)
{
	struct sr_roce *r = sr_thread_obj(&senders);

	if (!r)
		return NULL;
	if (!r->link.ops)
		sr_roce_init(r, NULL);
	sr_roce_one_sock(r, sock, sport);
	return &r->link;
}

/* The responder's ACK the engine handed to this QP's next request
 * (transport/resp.c, ack_defer): PSN and MSN, taken under wtx_lock. */
struct handed_ack {
	bool on;
	uint32_t psn, msn;
};

/* Sends WQE w (its payload at iov) as PSNs from psn, and the ACK *a after
 * it if there is one, through this thread's link l: all in one system
 * call, as one UDP GSO send where the sizes allow (the kernel's path is
 * then walked once, and a receiver with GRO takes them in one buffer). */
static void send_wqe(struct sr_context *ctx, struct sr_qp_shm *s, const struct claimed *c,
		     const struct iovec *iov, unsigned n, const struct handed_ack *a,
		     struct sr_link *l)
{
	struct sr_arena_hdr *h = ctx->dc.arena;
	const struct sr_send_wqe *w = c->w;
	uint32_t mtu = c->mtu, np = c->np, off = 0;
	uint8_t hdr[SR_WIRE_DIRECT_PKTS][SR_MAX_HDR_LEN], ack[SR_ACK_HDR_LEN];
	const struct sr_link_addr to = {s->sgid, s->dgid, s->qpn};

	if (sr_wr_rd_atomic(c->op)) {
		/* one request; its PSN span is its responses' (np) */
		uint8_t op;
		unsigned hl = SR_BTH_LEN;

		hl += sr_rd_atomic_put(hdr[0] + hl, SR_TR_RC, c->op, c->va, c->rkey, c->len,
				       c->swap, c->compare_add, &op);
		sr_bth_put(hdr[0], op, false, 0, SR_DEFAULT_PKEY, s->dest_qpn, true, c->psn);
		l->ops->send(l, &to, hdr[0], hl, NULL, 0, 0);
		np = 0;
	}
	for (uint32_t i = 0; i < np; i++) {
		bool first = i == 0, last = i + 1 == np;
		uint32_t len = last ? c->len - off : mtu;
		uint8_t op = sr_data_opcode(SR_TR_RC, c->op, first, last);
		struct iovec piece[SR_MAX_SGE];
		unsigned hl = SR_BTH_LEN, pn = slice(iov, n, off, len, piece);

		hl += sr_data_ext_put(hdr[i] + hl, op, c->va, c->rkey, c->len, w->imm_or_inv);
		/* the last packet of a message asks for an ACK, as the
		 * engine's do (and within its AckReq interval: np is less) */
		sr_bth_put(hdr[i], op, last && (w->flags & SR_WQE_SOLICITED), 0, SR_DEFAULT_PKEY,
			   s->dest_qpn, last, sr_psn_add(c->psn, i));
		l->ops->send(l, &to, hdr[i], hl, piece, pn, len);
		off += len;
	}
	if (a->on) {
		sr_ack_hdr_put(ack, s->dest_qpn, a->psn, a->msn);
		l->ops->send(l, &to, ack, sizeof(ack), NULL, 0, 0);
	}
	/* a packet the kernel refuses is lost on the wire: the engine's probe
	 * and retransmission recover it like any other */
	l->ops->flush(l);
	atomic_fetch_add_explicit(&h->wire_direct[0], 1, memory_order_relaxed);
	if (!sr_wr_rd_atomic(c->op)) /* bytes sent */
		atomic_fetch_add_explicit(&h->wire_direct[1], c->len, memory_order_relaxed);
	if (a->on)
		atomic_fetch_add_explicit(&h->wire_acks, 1, memory_order_relaxed);
}

/*
 * Claims the next WQE for this thread under the lock, if the engine's
 * grant covers it and it can go from here: *c and its payload.
 * The packets are sent after the lock is let go, so that a thread
 * preempted in the kernel's send path does not hold up the engine.  The
 * grant is for one message, and this thread posts the next WQE only after
 * this one has gone, so the engine's next packet cannot overtake it (a WQE
 * another thread posts meanwhile might: go-back-N recovers that).
 */
static bool claim(struct sr_context *ctx, struct sr_qp_shm *s, struct claimed *c, struct iovec *iov,
		  unsigned *n, bool *all, struct handed_ack *a)
{
	uint32_t head;
	bool got = false;

	*all = false;
	if (sr_shm_trylock(&s->wtx_lock))
		return false;
	head = atomic_load_explicit(&s->sq.head, memory_order_acquire);
	if (s->wtx_ok && s->wtx_gen == atomic_load_explicit(&s->wire_gen, memory_order_acquire) &&
	    atomic_load_explicit(&s->state, memory_order_acquire) == IBV_QPS_RTS) {
		*all = s->wtx_spos == head;
		if (!*all && s->wtx_room) {
			c->w = sr_sq_wqe(ctx->dc.arena, s, s->wtx_spos);
			c->op = __atomic_load_n(&c->w->opcode, __ATOMIC_RELAXED);
			c->len = __atomic_load_n(&c->w->total_len, __ATOMIC_RELAXED);
			c->mtu = sr_mtu_bytes(__atomic_load_n(&s->path_mtu, __ATOMIC_RELAXED));
			c->np = sr_wr_npkts(c->op, c->len, c->mtu);
			c->va = __atomic_load_n(&c->w->remote_addr, __ATOMIC_RELAXED);
			c->rkey = __atomic_load_n(&c->w->rkey, __ATOMIC_RELAXED);
			c->swap = __atomic_load_n(&c->w->swap, __ATOMIC_RELAXED);
			c->compare_add = __atomic_load_n(&c->w->compare_add, __ATOMIC_RELAXED);
			/* a READ or atomic is one packet and carries no payload:
			 * where its answer lands is the completer's (transport/req.c) */
			got = sendable(c->w, c->op, c->len, c->mtu) &&
			      (sr_wr_rd_atomic(c->op) || payload(ctx, s, c->w, iov, n));
		}
		if (got) {
			c->psn = s->wtx_npsn;
			s->wtx_spos++;
			s->wtx_npsn = sr_psn_add(s->wtx_npsn, c->np);
			s->wtx_room--;
			*all = s->wtx_spos == head;
			/* only an ACK of this connection (wtx_gen is wire_gen here) */
			a->on = sr_wtx_ack_take(s, s->wtx_gen, &a->psn, &a->msn);
			/* a grant the engine has not taken over (given at RTS,
			 * transport/req.c sr_eng_req_rts): it is rung after the send */
			if (s->wtx_unseen)
				*all = false;
		}
	}
	sr_shm_unlock(&s->wtx_lock);
	return got;
}

bool sr_wire_post(struct sr_context *ctx, struct sr_qp_shm *s)
{
	struct sr_arena_hdr *h = ctx->dc.arena;
	struct iovec iov[SR_MAX_SGE];
	struct claimed c;
	struct handed_ack a = {0};
	struct sr_link *l;
	uint16_t sport;
	unsigned n;
	int sock;
	bool all = false;

	/* this process has QPs on the wire: its pollers read the engine's
	 * socket from now on, but not in the poll right after a post
	 * (wire_rx.c) */
	sr_wire_rx_posted(ctx);
	if (s->type != IBV_QPT_RC || atomic_load_explicit(&h->wire_taps, memory_order_relaxed) ||
	    (sock = sr_exec_wire_sock(&sport)) < 0 || !(l = direct_link(sock, sport)))
		return false;
	if (claim(ctx, s, &c, iov, &n, &all, &a))
		send_wqe(ctx, s, &c, iov, n, &a, l);
	return all;
}

void sr_wire_flush_ack(struct sr_context *ctx, struct sr_qp_shm *s)
{
	uint8_t ack[SR_ACK_HDR_LEN];
	struct sr_link *l;
	uint32_t psn, msn;
	uint16_t sport;
	int sock;
	bool on;

	/* (without a link of this thread's the engine sends it when due) */
	if (!s->wire || s->type != IBV_QPT_RC || (sock = sr_exec_wire_sock(&sport)) < 0 ||
	    !(l = direct_link(sock, sport)))
		return;
	sr_shm_lock(&s->wtx_lock);
	on = sr_wtx_ack_take(s, atomic_load_explicit(&s->wire_gen, memory_order_acquire), &psn,
			     &msn);
	sr_shm_unlock(&s->wtx_lock);
	if (!on)
		return;
	sr_ack_hdr_put(ack, s->dest_qpn, psn, msn);
	l->ops->send(l, &(struct sr_link_addr){s->sgid, s->dgid, s->qpn}, ack, sizeof(ack), NULL, 0,
		     0);
	l->ops->flush(l);
	atomic_fetch_add_explicit(&((struct sr_arena_hdr *)ctx->dc.arena)->wire_acks, 1,
				  memory_order_relaxed);
}
