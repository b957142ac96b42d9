/*
 * rsockets, the data path of a stream rsocket over its RC QP: the
 * resources of a connection (one CQ with its completion channel, the
 * receive ring the peer writes into, a staging ring for what we send, the
 * iomap inbox), the byte stream as RDMA WRITE WITH IMM into the peer's ring
 * with credits flowing back, FIN, and riomap/riounmap/riowrite.  The
 * protocol is described in docs/architecture.md ("rsockets").
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rdmacm/rsocket_int.h"

#define RS_WR_RECV	(1ull << 63) /* wr_id of a receive */
#define RS_CTRL_RESERVE 4	     /* send WRs kept for control messages */
#define RS_MAX_CHUNK	(256u * 1024)
#define RS_INLINE_QP	64 /* inline room every QP asks for (iomap entries) */
#define RS_MAX_INLINE	512

static void *map_bytes(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void rs_io_teardown(struct rs *rs)
{
	int i;

	rs_dgram_teardown(rs); /* its QP before the CQ below */
	if (rs->qp) {
		rdma_destroy_qp(rs->id);
		rs->qp = NULL;
	}
	if (rs->cq) {
		ibv_destroy_cq(rs->cq);
		rs->cq = NULL;
	}
	if (rs->cch) {
		ibv_destroy_comp_channel(rs->cch);
		rs->cch = NULL;
	}
	for (i = 0; i < RS_IOMAP_SLOTS; i++) {
		if (rs->lmaps[i].used && rs->lmaps[i].mr)
			ibv_dereg_mr(rs->lmaps[i].mr);
		rs->lmaps[i].used = false;
	}
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->inbox_mr)
		ibv_dereg_mr(rs->inbox_mr);
	rs->rmr = rs->smr = rs->inbox_mr = NULL;
	if (rs->rbuf)
		munmap(rs->rbuf, rs->rbuf_size);
	if (rs->sbuf)
		munmap(rs->sbuf, rs->sbuf_size);
	if (rs->inbox)
		munmap(rs->inbox, RS_IOMAP_SLOTS * sizeof(*rs->inbox));
	rs->rbuf = rs->sbuf = NULL;
	rs->inbox = NULL;
}

static int post_recv(struct rs *rs)
{
	struct ibv_recv_wr wr = {.wr_id = RS_WR_RECV}, *bad;

	return ibv_post_recv(rs->qp, &wr, &bad);
}

int rs_io_setup(struct rs *rs)
{
	struct rdma_cm_id *id = rs->id;
	struct ibv_qp_init_attr attr = {0};
	uint32_t i;
	int e;

	rs->cch = ibv_create_comp_channel(id->verbs);
	if (!rs->cch)
		goto fail;
	fcntl(rs->cch->fd, F_SETFL, fcntl(rs->cch->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(id->verbs, (int)(rs->sq_size + rs->rq_size), rs, rs->cch, 0);
	if (!rs->cq)
		goto fail;
	attr.send_cq = attr.recv_cq = rs->cq;
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 1;
	attr.cap.max_send_wr = rs->sq_size;
	attr.cap.max_recv_wr = rs->rq_size;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = rs->inline_size > RS_INLINE_QP ? rs->inline_size : RS_INLINE_QP;
	if (attr.cap.max_inline_data > RS_MAX_INLINE)
		attr.cap.max_inline_data = RS_MAX_INLINE;
	if (rdma_create_qp(id, id->pd, &attr))
		goto fail;
	rs->qp = id->qp;
	rs->sq_max = attr.cap.max_send_wr;
	rs->inline_max = attr.cap.max_inline_data;
	if (rs->inline_size > rs->inline_max)
		rs->inline_size = rs->inline_max;
	rs->rbuf = map_bytes(rs->rbuf_size);
	rs->sbuf = map_bytes(rs->sbuf_size);
	rs->inbox = map_bytes(RS_IOMAP_SLOTS * sizeof(*rs->inbox));
	if (!rs->rbuf || !rs->sbuf || !rs->inbox) {
		errno = ENOMEM;
		goto fail;
	}
	rs->rmr = ibv_reg_mr(id->pd, rs->rbuf, rs->rbuf_size,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rs->smr = ibv_reg_mr(id->pd, rs->sbuf, rs->sbuf_size, IBV_ACCESS_LOCAL_WRITE);
	rs->inbox_mr = ibv_reg_mr(id->pd, rs->inbox, RS_IOMAP_SLOTS * sizeof(*rs->inbox),
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->rmr || !rs->smr || !rs->inbox_mr)
		goto fail;
	for (i = 0; i < rs->rq_size; i++) {
		e = post_recv(rs);
		if (e) {
			errno = e;
			goto fail;
		}
	}
	return 0;
fail:
	e = errno ? errno : ENOMEM;
	rs_io_teardown(rs);
	errno = e;
	return -1;
}

void rs_fill_hello(struct rs *rs, struct rs_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->version = RS_HELLO_VERSION;
	h->rbuf_rkey = htole32(rs->rmr->rkey);
	h->rbuf_addr = htole64((uint64_t)(uintptr_t)rs->rbuf);
	h->rbuf_size = htole32(rs->rbuf_size);
	h->inbox_rkey = htole32(rs->inbox_mr->rkey);
	h->inbox_addr = htole64((uint64_t)(uintptr_t)rs->inbox);
	h->inbox_slots = htole32(RS_IOMAP_SLOTS);
	h->rq_size = htole32(rs->rq_size);
}

void rs_take_hello(struct rs *rs, const struct rs_hello *h)
{
	rs->peer_rkey = le32toh(h->rbuf_rkey);
	rs->peer_rbuf = le64toh(h->rbuf_addr);
	rs->peer_rbuf_size = le32toh(h->rbuf_size);
	rs->peer_inbox_rkey = le32toh(h->inbox_rkey);
	rs->peer_inbox = le64toh(h->inbox_addr);
	rs->peer_inbox_slots = le32toh(h->inbox_slots);
	if (rs->peer_inbox_slots > RS_IOMAP_SLOTS)
		rs->peer_inbox_slots = RS_IOMAP_SLOTS;
	rs->peer_off = 0;
	rs->peer_credit = rs->peer_rbuf_size;
	/* a peer that does not say how many receives it posted: not counted */
	rs->peer_rq_credit = h->rq_size ? le32toh(h->rq_size) : UINT32_MAX;
	rs->rq_unreported = 0;
}

/* One RDMA WRITE (WITH IMM when with_imm), signaled. */
static int post_write(struct rs *rs, const void *laddr, uint32_t len, bool inl, uint64_t raddr,
		      uint32_t rkey, bool with_imm, uint32_t imm, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)laddr, .length = len, .lkey = rs->smr->lkey};
	struct ibv_send_wr wr = {0}, *bad;
	int ret;

	wr.wr_id = wr_id;
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ret = ibv_post_send(rs->qp, &wr, &bad);
	if (ret) {
		errno = ret;
		return -1;
	}
	rs->sq_used++;
	rs->tx_count++;
	if (with_imm && rs->peer_rq_credit != UINT32_MAX)
		rs->peer_rq_credit--;
	return 0;
}

/* A zero-length WRITE WITH IMM: 0, or -1 when the send queue is full. */
int rs_post_ctrl(struct rs *rs, uint32_t imm)
{
	if (!rs->qp || rs->sq_used >= rs->sq_max || !rs->peer_rq_credit)
		return -1;
	return post_write(rs, NULL, 0, false, rs->peer_rbuf, rs->peer_rkey, true, imm, 0);
}

int rs_post_probe(struct rs *rs)
{
	if (!rs->qp || rs->sq_used >= rs->sq_max)
		return -1;
	return post_write(rs, NULL, 0, false, rs->peer_rbuf, rs->peer_rkey, false, 0, 0);
}

static void iomap_announce(struct rs *rs, int slot)
{
	struct rs_iomap_wire w = {0};
	struct rs_iomap *m = &rs->lmaps[slot];
	uint32_t *mask = slot < 32 ? &rs->owe_iomap_mask_lo : &rs->owe_iomap_mask_hi;
	uint32_t bit = 1u << (slot & 31);

	/* before ESTABLISHED the peer's QP may not be ready to receive */
	if (!rs->established || rs->sq_used + 2 > rs->sq_max ||
	    (uint32_t)slot >= rs->peer_inbox_slots) {
		*mask |= bit;
		return;
	}
	if (m->used) {
		w.offset = (uint64_t)m->offset;
		w.addr = (uint64_t)(uintptr_t)m->buf;
		w.len = m->len;
		w.rkey = m->mr->rkey;
		w.valid = 1;
	}
	if (post_write(rs, &w, sizeof(w), true, rs->peer_inbox + (uint64_t)slot * sizeof(w),
		       rs->peer_inbox_rkey, false, 0, 0) ||
	    rs_post_ctrl(rs, RS_IMM_CTRL << 30 | RS_CTRL_IOMAP | (uint32_t)slot << 8)) {
		*mask |= bit;
		return;
	}
	*mask &= ~bit;
}

static void send_credit(struct rs *rs)
{
	if (!rs->unreported || rs->peer_gone || rs->fatal)
		return;
	if (rs_post_ctrl(rs, RS_IMM_CREDIT << 30 | rs->unreported)) {
		rs->owe_credit = true;
		return;
	}
	rs->unreported = 0;
	rs->owe_credit = false;
}

/* Tells the peer how many receive WQEs we posted again since the last
 * report: it sends a message with an immediate only when we have a receive
 * for it, because an RNR NAK costs the responder's RNR timer (rdma_cm
 * leaves min_rnr_timer 0, 655 ms), and polling, not sending, frees WQEs. */
static void send_rq_report(struct rs *rs)
{
	if (!rs->rq_unreported || rs->peer_gone || rs->fatal)
		return;
	if (rs_post_ctrl(rs, RS_IMM_CTRL << 30 | RS_CTRL_RQ | rs->rq_unreported << 8)) {
		rs->owe_rq = true;
		return;
	}
	rs->rq_unreported = 0;
	rs->owe_rq = false;
}

static void flush_owed(struct rs *rs)
{
	int i;

	if (!rs->qp || rs->fatal || !rs->established)
		return;
	if (rs->owe_rq)
		send_rq_report(rs);
	if (rs->owe_credit)
		send_credit(rs);
	for (i = 0; i < RS_IOMAP_SLOTS; i++) {
		uint32_t m = i < 32 ? rs->owe_iomap_mask_lo : rs->owe_iomap_mask_hi;

		if (m & (1u << (i & 31)))
			iomap_announce(rs, i);
	}
	if (rs->owe_fin && !rs_post_ctrl(rs, RS_IMM_CTRL << 30 | RS_CTRL_FIN)) {
		rs->owe_fin = false;
		rs->fin_sent = true;
	}
}

static void take_imm(struct rs *rs, uint32_t imm)
{
	uint32_t val = imm & RS_IMM_VAL, slot;

	switch (imm >> 30) {
	case RS_IMM_DATA:
		rs->ravail += val;
		break;
	case RS_IMM_CREDIT:
		rs->peer_credit += val;
		break;
	case RS_IMM_CTRL:
		if ((val & 0xff) == RS_CTRL_FIN) {
			rs->fin_rcvd = true;
		} else if ((val & 0xff) == RS_CTRL_RQ) {
			if (rs->peer_rq_credit != UINT32_MAX)
				rs->peer_rq_credit += val >> 8;
		} else if ((val & 0xff) == RS_CTRL_IOMAP) {
			slot = val >> 8;
			if (slot < RS_IOMAP_SLOTS)
				rs->rmaps[slot] = rs->inbox[slot];
			RS_DBG("rs %d: iomap slot %u valid %u off %llu len %llu", rs->fd, slot,
			       rs->rmaps[slot].valid, (unsigned long long)rs->rmaps[slot].offset,
			       (unsigned long long)rs->rmaps[slot].len);
		}
		break;
	default:
		break;
	}
}

bool rs_cq_progress(struct rs *rs)
{
	struct ibv_wc wc[32];
	bool any = false;
	int n, i;

	if (rs->dg)
		return rs_dgram_cq(rs);
	if (!rs->cq)
		return false;
	while ((n = ibv_poll_cq(rs->cq, 32, wc)) > 0) {
		any = true;
		for (i = 0; i < n; i++) {
			bool recv = wc[i].wr_id & RS_WR_RECV;

			if (!recv) {
				rs->sq_used--;
				rs->s_used -= (uint32_t)wc[i].wr_id;
				if (!rs->s_used)
					rs->s_head = 0;
			}
			if (wc[i].status != IBV_WC_SUCCESS) {
				RS_DBG("rs %d: completion %s (wr_id %llx, vendor %u)", rs->fd,
				       ibv_wc_status_str(wc[i].status),
				       (unsigned long long)wc[i].wr_id, wc[i].vendor_err);
				/* retries run out: the peer is gone, as a TCP
				 * socket's ETIMEDOUT */
				if (!rs->fatal)
					rs->fatal = wc[i].status == IBV_WC_WR_FLUSH_ERR ? ECONNRESET
						    : wc[i].status == IBV_WC_RETRY_EXC_ERR
							? ETIMEDOUT
							: EIO;
				continue;
			}
			if (recv) {
				take_imm(rs, ntohl(wc[i].imm_data));
				if (post_recv(rs)) {
					if (!rs->fatal)
						rs->fatal = ECONNRESET;
				} else {
					rs->rq_unreported++;
				}
			}
		}
	}
	/* half the ring at the latest, so the peer never runs dry while we poll */
	if (rs->rq_unreported && rs->rq_unreported >= rs->rq_size / 2)
		rs->owe_rq = true;
	flush_owed(rs);
	if (any && rs->waiters)
		pthread_cond_broadcast(&rs->cond);
	return any;
}

void rs_send_fin(struct rs *rs, int timeout_ms)
{
	struct timespec t0, t;

	if (!rs->qp || rs->fin_sent || rs->peer_gone || rs->fatal || !rs->established)
		goto out;
	rs->owe_fin = true;
	flush_owed(rs);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* everything posted (the FIN last) is acknowledged: it is in the
	 * peer's CQ, whatever becomes of the connection next */
	for (;;) {
		long el;

		rs_cq_progress(rs);
		if ((!rs->sq_used && !rs->owe_fin) || rs->peer_gone || rs->fatal)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (el >= timeout_ms)
			break;
		rs_wait(rs, (int)(timeout_ms - el));
	}
out:
	rs->fin_sent = true;
}

/* The largest contiguous piece of the staging ring for want bytes (at
 * most): its position, and what it costs the ring (with padding). */
static uint32_t sbuf_alloc(struct rs *rs, uint32_t want, uint32_t *pos, uint32_t *cost)
{
	uint32_t S = rs->sbuf_size, start, end_room;

	if (!rs->s_used) {
		rs->s_head = 0;
		*pos = 0;
		*cost = want < S ? want : S;
		return *cost;
	}
	start = (rs->s_head + S - rs->s_used) % S;
	if (rs->s_used >= S)
		return 0;
	if (start < rs->s_head) {
		end_room = S - rs->s_head;
		if (end_room >= want || end_room >= start) {
			*pos = rs->s_head;
			*cost = want < end_room ? want : end_room;
			return *cost;
		}
		*pos = 0;
		want = want < start ? want : start;
		*cost = end_room + want;
		return want;
	}
	*pos = rs->s_head;
	*cost = want < start - rs->s_head ? want : start - rs->s_head;
	return *cost;
}

struct iov_cur {
	const struct iovec *iov;
	int cnt, idx;
	size_t off;
};

static void gather(struct iov_cur *c, uint8_t *dst, size_t len)
{
	while (len) {
		size_t n = c->iov[c->idx].iov_len - c->off;

		if (n > len)
			n = len;
		memcpy(dst, (const uint8_t *)c->iov[c->idx].iov_base + c->off, n);
		dst += n;
		len -= n;
		c->off += n;
		if (c->off == c->iov[c->idx].iov_len) {
			c->idx++;
			c->off = 0;
		}
	}
}

/* One piece of stream data or riowrite: to raddr/rkey (iowrite) or to the
 * peer's ring.  Returns bytes posted, 0 when nothing has room, -1. */
static ssize_t post_piece(struct rs *rs, struct iov_cur *c, size_t left, bool io, uint64_t raddr,
			  uint32_t rkey)
{
	uint32_t want, pos, cost, n;
	uint8_t small[RS_MAX_INLINE];

	if (rs->sq_used + RS_CTRL_RESERVE >= rs->sq_max ||
	    (!io && rs->peer_rq_credit <= RS_CTRL_RESERVE))
		return 0;
	want = left > RS_MAX_CHUNK ? RS_MAX_CHUNK : (uint32_t)left;
	if (!io) {
		if (want > rs->peer_credit)
			want = rs->peer_credit;
		if (want > rs->peer_rbuf_size - rs->peer_off)
			want = rs->peer_rbuf_size - rs->peer_off;
		raddr = rs->peer_rbuf + rs->peer_off;
		rkey = rs->peer_rkey;
	}
	if (!want)
		return 0;
	if (want <= rs->inline_size) {
		gather(c, small, want);
		if (post_write(rs, small, want, true, raddr, rkey, !io, RS_IMM_DATA << 30 | want,
			       0))
			return -1;
		n = want;
	} else {
		n = sbuf_alloc(rs, want, &pos, &cost);
		if (!n)
			return 0;
		gather(c, rs->sbuf + pos, n);
		if (post_write(rs, rs->sbuf + pos, n, false, raddr, rkey, !io,
			       RS_IMM_DATA << 30 | n, cost))
			return -1;
		rs->s_head = pos + n;
		rs->s_used += cost;
	}
	if (!io) {
		rs->peer_off += n;
		if (rs->peer_off == rs->peer_rbuf_size)
			rs->peer_off = 0;
		rs->peer_credit -= n;
	}
	return n;
}

/* Why this socket cannot send (an errno), or 0. */
static int send_state(struct rs *rs)
{
	if (rs->shut_wr || rs->fin_sent)
		return EPIPE;
	if (rs->fatal)
		return rs->fatal;
	if (rs->peer_gone)
		return EPIPE;
	switch (rs->state) {
	case RS_CONNECTED:
		return 0;
	case RS_ACCEPTING:
	case RS_RESOLVING:
	case RS_CONNECTING:
		return EAGAIN; /* until ESTABLISHED */
	case RS_ERROR:
		return rs->fatal ? rs->fatal : ECONNRESET;
	default:
		return ENOTCONN;
	}
}

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t t = 0;
	int i;

	for (i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/*
 * The common start of a vector send or receive: the socket (held, its
 * lock taken), the bytes the iovec asks for (at most SSIZE_MAX), whether
 * the call may block, and connection progress first.  NULL with errno set
 * (EBADF, EINVAL) if there is nothing to do it on.
 */
static struct rs *io_begin(int socket, const struct iovec *iov, int iovcnt, int flags, size_t *len,
			   bool *nb)
{
	struct rs *rs = rs_get(socket);

	if (!rs) {
		rs_set_errno(EBADF);
		return NULL;
	}
	if (iovcnt < 0 || (iovcnt && !iov)) {
		rs_put(rs);
		rs_set_errno(EINVAL);
		return NULL;
	}
	*len = iov_total(iov, iovcnt);
	if (*len > SSIZE_MAX)
		*len = SSIZE_MAX;
	pthread_mutex_lock(&rs->lock);
	*nb = rs->nonblock || (flags & MSG_DONTWAIT);
	if (rs->state != RS_CONNECTED)
		rs_cm_progress(rs);
	return rs;
}

/* A datagram socket's I/O (rsocket_dgram.c), or -2 with errno untouched
 * when socket is not one. */
static ssize_t dg_io(int socket, const struct iovec *iov, int iovcnt, int flags, bool send,
		     const struct sockaddr *to, socklen_t tolen, struct sockaddr *from,
		     socklen_t *fromlen)
{
	struct rs *rs = rs_get(socket);
	ssize_t r;

	if (!rs)
		return -2;
	if (!rs->dg) {
		rs_put(rs);
		return -2;
	}
	if (iovcnt < 0 || (iovcnt && !iov)) {
		rs_put(rs);
		return rs_set_errno(EINVAL);
	}
	pthread_mutex_lock(&rs->lock);
	r = send ? rs_dgram_sendto(rs, iov, iovcnt, flags, to, tolen)
		 : rs_dgram_recvfrom(rs, iov, iovcnt, flags, from, fromlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return r < 0 ? rs_set_errno((int)-r) : r;
}

/*
 * Posts total bytes from c as pieces (stream data into the peer's ring, or
 * with io to raddr/rkey, riowrite), waiting for room unless nb.  Lock held.
 * Returns the bytes posted; *e is the errno that stopped it, or 0.
 */
static size_t send_pieces(struct rs *rs, struct iov_cur *c, size_t total, bool nb, bool io,
			  uint64_t raddr, uint32_t rkey, int *e)
{
	size_t sent = 0;

	*e = 0;
	while (sent < total) {
		ssize_t n;

		*e = send_state(rs);
		if (*e && *e != EAGAIN)
			break;
		n = *e ? 0 : post_piece(rs, c, total - sent, io, raddr + sent, rkey);
		if (n < 0) {
			*e = errno;
			break;
		}
		if (n > 0) {
			sent += (size_t)n;
			*e = 0;
			continue;
		}
		if (rs_cq_progress(rs))
			continue; /* completions or credit came: room again, maybe */
		if (nb) {
			*e = EAGAIN;
			break;
		}
		rs_wait(rs, -1);
		rs_cq_progress(rs);
	}
	return sent;
}

static ssize_t rs_sendv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct iov_cur c = {iov, iovcnt, 0, 0};
	size_t total, sent = 0;
	bool nb;
	int e = 0;
	ssize_t d = dg_io(socket, iov, iovcnt, flags, true, NULL, 0, NULL, NULL);
	struct rs *rs;

	if (d != -2)
		return d;
	rs = io_begin(socket, iov, iovcnt, flags, &total, &nb);

	if (!rs)
		return -1;
	rs_cq_progress(rs);
	e = send_state(rs);
	if (total && (!e || e == EAGAIN))
		sent = send_pieces(rs, &c, total, nb, false, 0, 0, &e);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (sent || (!e && !total))
		return (ssize_t)sent;
	return rs_set_errno(e);
}

/* Copies up to len bytes out of the receive ring at rd_off + skip. */
static void ring_copy(struct rs *rs, uint32_t skip, struct iov_cur *c, size_t len)
{
	uint32_t R = rs->rbuf_size, off = (rs->rd_off + skip) % R;

	while (len) {
		size_t n = R - off, m = c->iov[c->idx].iov_len - c->off;

		if (n > len)
			n = len;
		if (n > m)
			n = m;
		memcpy((uint8_t *)c->iov[c->idx].iov_base + c->off, rs->rbuf + off, n);
		len -= n;
		off = (uint32_t)((off + n) % R);
		c->off += n;
		if (c->off == c->iov[c->idx].iov_len) {
			c->idx++;
			c->off = 0;
		}
	}
}

static ssize_t rs_recvv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct iov_cur c = {iov, iovcnt, 0, 0};
	size_t want, got = 0;
	bool nb, waitall = flags & MSG_WAITALL, peek = flags & MSG_PEEK;
	int e = 0;
	ssize_t d = dg_io(socket, iov, iovcnt, flags, false, NULL, 0, NULL, NULL);
	struct rs *rs;

	if (d != -2)
		return d;
	rs = io_begin(socket, iov, iovcnt, flags, &want, &nb);

	if (!rs)
		return -1;
	while (got < want) {
		uint32_t have;

		rs_cq_progress(rs);
		have = peek ? rs->ravail - (uint32_t)got : rs->ravail;
		if (have && !rs->shut_rd) {
			size_t n = want - got < have ? want - got : have;

			ring_copy(rs, peek ? (uint32_t)got : 0, &c, n);
			got += n;
			if (!peek) {
				rs->rd_off = (uint32_t)((rs->rd_off + n) % rs->rbuf_size);
				rs->ravail -= (uint32_t)n;
				rs->unreported += (uint32_t)n;
				if (rs->unreported >= rs->rbuf_size / 2)
					send_credit(rs);
			}
			if (!waitall || peek)
				break;
			continue;
		}
		if (rs->shut_rd || rs->fin_rcvd || rs->peer_gone)
			break; /* end of stream */
		if (rs->fatal) {
			e = rs->fatal;
			break;
		}
		if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING) {
			e = rs->state == RS_RESOLVING || rs->state == RS_CONNECTING ? EAGAIN
			    : rs->state == RS_ERROR ? (rs->fatal ? rs->fatal : ECONNRESET)
						    : ENOTCONN;
			if (e != EAGAIN || nb)
				break;
		}
		if (nb) {
			e = got ? 0 : EAGAIN;
			break;
		}
		rs_wait(rs, -1);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (got || !e)
		return (ssize_t)got;
	return rs_set_errno(e);
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = {buf, len};

	return rs_recvv(socket, &v, 1, flags);
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
		  socklen_t *addrlen)
{
	struct iovec v = {buf, len};
	ssize_t n = dg_io(socket, &v, 1, flags, false, NULL, 0, src_addr, addrlen);

	if (n != -2)
		return n;
	n = rrecv(socket, buf, len, flags);

	if (n >= 0 && src_addr && addrlen) {
		int e = errno;

		if (rgetpeername(socket, src_addr, addrlen))
			errno = e;
	}
	return n;
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (!msg)
		return rs_set_errno(EFAULT);
	if (msg->msg_control && msg->msg_controllen)
		msg->msg_controllen = 0;
	msg->msg_flags = 0;
	return rs_recvv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_recvv(socket, iov, iovcnt, 0);
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = {(void *)buf, len};

	return rs_sendv(socket, &v, 1, flags);
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct iovec v = {(void *)buf, len};
	ssize_t n = dg_io(socket, &v, 1, flags, true, dest_addr, addrlen, NULL, NULL);

	if (n != -2)
		return n;
	/* a connected stream ignores the address, as TCP does */
	return rsend(socket, buf, len, flags);
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg)
		return rs_set_errno(EFAULT);
	return rs_sendv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_sendv(socket, iov, iovcnt, 0);
}

short rs_revents(struct rs *rs, short events)
{
	short r = 0;

	if (rs->dg)
		return rs_dgram_revents(rs, events);
	rs_cm_progress(rs);
	rs_cq_progress(rs);
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		r = POLLOUT | POLLHUP;
		break;
	case RS_LISTEN:
		if (rs->pend_head)
			r = POLLIN;
		break;
	case RS_RESOLVING:
	case RS_CONNECTING:
		break;
	case RS_ERROR:
		r = POLLIN | POLLOUT | POLLERR | POLLHUP;
		break;
	case RS_ACCEPTING:
	case RS_CONNECTED:
		if (rs->ravail || rs->fin_rcvd || rs->peer_gone || rs->shut_rd || rs->fatal)
			r |= POLLIN;
		if (rs->peer_gone || rs->fatal || rs->shut_wr) {
			r |= POLLOUT; /* a write would not block: it fails */
			/* a peer that sent its last bytes and left: POLLIN alone
			 * until they are read, as a TCP socket (rdma-core says
			 * POLLHUP at once, and rstream -T a, which stops at
			 * POLLHUP, then loses the end of the transfer) */
			if ((rs->peer_gone && !rs->ravail) || rs->fatal)
				r |= POLLHUP;
			if (rs->fatal)
				r |= POLLERR;
		} else if (rs->state == RS_CONNECTED && rs->peer_credit &&
			   rs->sq_used + RS_CTRL_RESERVE < rs->sq_max &&
			   rs->peer_rq_credit > RS_CTRL_RESERVE &&
			   (rs->inline_size || rs->s_used < rs->sbuf_size)) {
			r |= POLLOUT;
		}
		break;
	}
	return r & (events | POLLERR | POLLHUP);
}

/* ------------------------------------------------------------------ */
/* iomap: the peer RDMA WRITEs into our mapped buffers (riowrite)      */
/* ------------------------------------------------------------------ */

off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rs *rs = rs_get(socket);
	int i, slot = -1, used = 0, e = 0;
	off_t next = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	(void)flags;
	pthread_mutex_lock(&rs->lock);
	if (prot != PROT_WRITE || !buf || !len) {
		e = EINVAL;
		goto out;
	}
	if (!rs->qp || (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING)) {
		e = ENOTCONN;
		goto out;
	}
	for (i = 0; i < RS_IOMAP_SLOTS; i++) {
		struct rs_iomap *m = &rs->lmaps[i];

		if (!m->used) {
			if (slot < 0)
				slot = i;
			continue;
		}
		used++;
		if (m->offset + (off_t)m->len > next)
			next = m->offset + (off_t)m->len;
		if (offset != -1 && offset < m->offset + (off_t)m->len &&
		    m->offset < offset + (off_t)len) {
			e = EINVAL; /* overlaps a mapping */
			goto out;
		}
	}
	if (used >= (int)rs->iomap_size || slot < 0) {
		e = ENOMEM;
		goto out;
	}
	if (offset == -1)
		offset = next;
	else if (offset < 0) {
		e = EINVAL;
		goto out;
	}
	rs->lmaps[slot].mr =
	    ibv_reg_mr(rs->id->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->lmaps[slot].mr) {
		e = errno;
		goto out;
	}
	rs->lmaps[slot].buf = buf;
	rs->lmaps[slot].len = len;
	rs->lmaps[slot].offset = offset;
	rs->lmaps[slot].used = true;
	iomap_announce(rs, slot);
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return e ? rs_set_errno(e) : offset;
}

int riounmap(int socket, void *buf, size_t len)
{
	struct rs *rs = rs_get(socket);
	int i, e = EINVAL;

	if (!rs)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&rs->lock);
	for (i = 0; i < RS_IOMAP_SLOTS; i++) {
		struct rs_iomap *m = &rs->lmaps[i];

		if (m->used && m->buf == buf && m->len == len) {
			ibv_dereg_mr(m->mr);
			memset(m, 0, sizeof(*m));
			iomap_announce(rs, i); /* the peer's copy becomes invalid */
			e = 0;
			break;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return e ? rs_set_errno(e) : 0;
}

static const struct rs_iomap_wire *find_rmap(struct rs *rs, off_t offset)
{
	int i;

	for (i = 0; i < RS_IOMAP_SLOTS; i++) {
		const struct rs_iomap_wire *w = &rs->rmaps[i];

		if (w->valid && (uint64_t)offset >= w->offset &&
		    (uint64_t)offset < w->offset + w->len)
			return w;
	}
	return NULL;
}

size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rs *rs = rs_get(socket);
	struct iovec v = {(void *)buf, count};
	struct iov_cur c = {&v, 1, 0, 0};
	const struct rs_iomap_wire *found;
	struct rs_iomap_wire wm, *w = &wm;
	size_t sent = 0;
	bool nb;
	int e = 0;

	if (!rs) {
		errno = EBADF;
		return (size_t)-1;
	}
	pthread_mutex_lock(&rs->lock);
	nb = rs->nonblock || (flags & MSG_DONTWAIT);
	rs_cq_progress(rs); /* mappings announced so far */
	found = offset >= 0 ? find_rmap(rs, offset) : NULL;
	if (!found) {
		e = EINVAL;
		goto out;
	}
	wm = *found; /* the peer may remap while we wait */
	if (count > w->len - ((uint64_t)offset - w->offset))
		count = (size_t)(w->len - ((uint64_t)offset - w->offset));
	sent = send_pieces(rs, &c, count, nb, true, w->addr + ((uint64_t)offset - w->offset),
			   w->rkey, &e);
out:
	RS_DBG("rs %d: riowrite %zu at %lld: %zu errno %d", rs->fd, count, (long long)offset, sent,
	       e);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	if (sent || !e)
		return sent;
	errno = e;
	return (size_t)-1;
}
