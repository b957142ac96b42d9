/*
 * Datagram rsockets (SOCK_DGRAM) over a UD QP, our own protocol (both ends
 * are ours).  Each socket has a UD QP with receive slots of one MTU plus
 * the 40-byte GRH area, and its rdma_cm id (RDMA_PS_UDP) bound and
 * listening in the UDP port space, so a peer finds the socket's QPN by SIDR
 * (rdma_connect on a UD id answers with the QPN and Q_Key).  A datagram is
 * one SEND WITH IMM of at most one MTU: the immediate carries the sender's
 * port, the GRH area its IP address, so rrecvfrom() reports the sender
 * without a header of ours.  Destinations are cached: one SIDR lookup per
 * new destination (blocking, a few round trips on one host), and a sender
 * seen in a receive needs none (its AH comes from the work completion).
 * As UDP, a datagram nobody can take (no receive posted, no socket at the
 * address) is dropped silently.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rdmacm/internal.h"
#include "rdmacm/rsocket_int.h"

#define DG_NRECV 256
#define DG_NSEND 64
#define DG_GRH	 40
#define DG_QKEY	 0x01234567u /* RDMA_UDP_QKEY */

struct dg_peer {
	struct dg_peer *next;
	struct sockaddr_storage addr;
	struct ibv_ah *ah;
	uint32_t qpn, qkey;
};

struct rs_dgram {
	struct ibv_qp *qp;
	uint32_t mtu, slot;
	uint8_t *rbufs, *sbufs;
	struct ibv_mr *rmr, *smr;
	uint32_t s_next, s_used;
	/* received, not yet read: slot numbers in arrival order */
	uint32_t ready[DG_NRECV], r_head, r_count;
	uint32_t len[DG_NRECV];
	struct sockaddr_storage from[DG_NRECV];
	struct dg_peer *peers;
	struct sockaddr_storage dst; /* rconnect()'s default destination */
	bool connected, listening;
};

static bool same(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

static socklen_t alen(const struct sockaddr *a)
{
	return a->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static int post_recv_slot(struct rs_dgram *dg, uint32_t i)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(dg->rbufs + (size_t)i * dg->slot),
			      .length = dg->slot,
			      .lkey = dg->rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(dg->qp, &wr, &bad);
}

int rs_dgram_setup(struct rs *rs)
{
	struct ibv_qp_init_attr qa = {0};
	struct ibv_qp_attr a = {0};
	struct ibv_port_attr port;
	struct rs_dgram *dg;
	int e;

	if (cm_init())
		return errno;
	dg = calloc(1, sizeof(*dg));
	if (!dg)
		return ENOMEM;
	rs->dg = dg;
	if (ibv_query_port(cm_g.verbs, 1, &port))
		return EIO;
	dg->mtu = 128u << port.active_mtu; /* IBV_MTU_256 = 1 */
	dg->slot = dg->mtu + DG_GRH;
	rs->cch = ibv_create_comp_channel(cm_g.verbs);
	if (!rs->cch)
		return errno;
	/* rs_wait and rpoll drain it after poll(): never block there */
	fcntl(rs->cch->fd, F_SETFL, fcntl(rs->cch->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(cm_g.verbs, DG_NRECV + DG_NSEND, rs, rs->cch, 0);
	if (!rs->cq)
		return errno;
	qa.send_cq = qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = DG_NSEND;
	qa.cap.max_recv_wr = DG_NRECV;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	dg->qp = ibv_create_qp(cm_g.pd, &qa);
	if (!dg->qp)
		return errno;
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = DG_QKEY;
	if ((e = ibv_modify_qp(dg->qp, &a,
			       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)))
		return e;
	a.qp_state = IBV_QPS_RTR;
	if ((e = ibv_modify_qp(dg->qp, &a, IBV_QP_STATE)))
		return e;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if ((e = ibv_modify_qp(dg->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)))
		return e;
	dg->rbufs = mmap(NULL, (size_t)DG_NRECV * dg->slot, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dg->sbufs = mmap(NULL, (size_t)DG_NSEND * dg->mtu, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dg->rbufs == MAP_FAILED || dg->sbufs == MAP_FAILED) {
		if (dg->rbufs == MAP_FAILED)
			dg->rbufs = NULL;
		if (dg->sbufs == MAP_FAILED)
			dg->sbufs = NULL;
		return ENOMEM;
	}
	dg->rmr =
	    ibv_reg_mr(cm_g.pd, dg->rbufs, (size_t)DG_NRECV * dg->slot, IBV_ACCESS_LOCAL_WRITE);
	dg->smr = ibv_reg_mr(cm_g.pd, dg->sbufs, (size_t)DG_NSEND * dg->mtu, 0);
	if (!dg->rmr || !dg->smr)
		return errno ? errno : ENOMEM;
	for (uint32_t i = 0; i < DG_NRECV; i++)
		if ((e = post_recv_slot(dg, i)))
			return e;
	ibv_req_notify_cq(rs->cq, 0);
	return 0;
}

void rs_dgram_teardown(struct rs *rs)
{
	struct rs_dgram *dg = rs->dg;

	if (!dg)
		return;
	if (dg->qp)
		ibv_destroy_qp(dg->qp);
	while (dg->peers) {
		struct dg_peer *p = dg->peers;

		dg->peers = p->next;
		ibv_destroy_ah(p->ah);
		free(p);
	}
	if (dg->rmr)
		ibv_dereg_mr(dg->rmr);
	if (dg->smr)
		ibv_dereg_mr(dg->smr);
	if (dg->rbufs)
		munmap(dg->rbufs, (size_t)DG_NRECV * dg->slot);
	if (dg->sbufs)
		munmap(dg->sbufs, (size_t)DG_NSEND * dg->mtu);
	free(dg);
	rs->dg = NULL;
}

/* Bound (and listening, so SIDR finds us): rbind's second half, or an
 * implicit bind to a free port before the first send.  Lock held. */
int rs_dgram_listen(struct rs *rs)
{
	if (rs->dg->listening)
		return 0;
	if (rs->state == RS_INIT) {
		struct sockaddr_in6 any6 = {.sin6_family = AF_INET6};
		struct sockaddr_in any4 = {.sin_family = AF_INET};

		if (rdma_bind_addr(rs->id, rs->domain == AF_INET6 ? (struct sockaddr *)&any6
								  : (struct sockaddr *)&any4))
			return errno;
		rs->state = RS_BOUND;
	}
	if (rdma_listen(rs->id, 0))
		return errno;
	rs->dg->listening = true;
	return 0;
}

/* The socket's CM events: SIDR requests answered with our QPN. */
void rs_dgram_cm(struct rs *rs)
{
	struct rdma_cm_event *ev;

	while (rs->ch && !rdma_get_cm_event(rs->ch, &ev)) {
		struct rdma_cm_id *child =
		    ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;

		rdma_ack_cm_event(ev);
		if (child) {
			struct rdma_conn_param p = {.qp_num = rs->dg->qp->qp_num};

			if (rdma_accept(child, &p))
				RS_DBG("rs %d: SIDR accept: errno %d", rs->fd, errno);
			rdma_destroy_id(child);
		}
	}
}

/* The sender of a receive, from its GRH area (RoCEv2: an IPv4 header in
 * the last 20 bytes, or an IPv6 header) and the port in the immediate. */
static void sender(struct rs *rs, const uint8_t *grh, uint16_t port, struct sockaddr_storage *out)
{
	uint8_t ip6[16] = {0};

	memset(out, 0, sizeof(*out));
	if ((grh[20] >> 4) == 4) {
		ip6[10] = ip6[11] = 0xff;
		memcpy(ip6 + 12, grh + 20 + 12, 4);
	} else {
		memcpy(ip6, grh + 8, 16);
	}
	if (rs->domain == AF_INET) {
		struct sockaddr_in *s = (void *)out;

		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		memcpy(&s->sin_addr, ip6 + 12, 4);
	} else {
		struct sockaddr_in6 *s = (void *)out;

		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		memcpy(&s->sin6_addr, ip6, 16);
	}
}

static struct dg_peer *peer_find(struct rs_dgram *dg, const struct sockaddr *a)
{
	for (struct dg_peer *p = dg->peers; p; p = p->next)
		if (same(&p->addr, a))
			return p;
	return NULL;
}

static void peer_add(struct rs_dgram *dg, const struct sockaddr *a, struct ibv_ah *ah, uint32_t qpn,
		     uint32_t qkey)
{
	struct dg_peer *p = calloc(1, sizeof(*p));

	if (!p) {
		ibv_destroy_ah(ah);
		return;
	}
	memcpy(&p->addr, a, alen(a));
	p->ah = ah;
	p->qpn = qpn;
	p->qkey = qkey;
	p->next = dg->peers;
	dg->peers = p;
}

bool rs_dgram_cq(struct rs *rs)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_wc wc[32];
	bool any = false;
	int n;

	while ((n = ibv_poll_cq(rs->cq, 32, wc)) > 0) {
		any = true;
		for (int i = 0; i < n; i++) {
			uint32_t slot = (uint32_t)wc[i].wr_id;
			const uint8_t *g;

			if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR)
				RS_DBG("rs %d: wc status %d opcode %d", rs->fd, wc[i].status,
				       wc[i].opcode);
			if (!(wc[i].opcode & IBV_WC_RECV)) {
				dg->s_used--;
				continue;
			}
			if (wc[i].status != IBV_WC_SUCCESS || !(wc[i].wc_flags & IBV_WC_WITH_IMM) ||
			    wc[i].byte_len < DG_GRH || dg->r_count == DG_NRECV) {
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					post_recv_slot(dg, slot);
				continue;
			}
			g = dg->rbufs + (size_t)slot * dg->slot;
			dg->len[slot] = wc[i].byte_len - DG_GRH;
			sender(rs, g, (uint16_t)ntohl(wc[i].imm_data), &dg->from[slot]);
			if (!peer_find(dg, (struct sockaddr *)&dg->from[slot])) {
				struct ibv_ah *ah = ibv_create_ah_from_wc(
				    cm_g.pd, &wc[i], (struct ibv_grh *)(uintptr_t)g, 1);

				if (ah)
					peer_add(dg, (struct sockaddr *)&dg->from[slot], ah,
						 wc[i].src_qp, DG_QKEY);
			}
			dg->ready[(dg->r_head + dg->r_count) % DG_NRECV] = slot;
			dg->r_count++;
		}
	}
	return any;
}

short rs_dgram_revents(struct rs *rs, short events)
{
	short r = 0;

	rs_dgram_cm(rs);
	rs_dgram_cq(rs);
	if (rs->dg->r_count)
		r |= POLLIN;
	if (rs->dg->s_used < DG_NSEND)
		r |= POLLOUT;
	return r & (events | POLLERR | POLLHUP);
}

/* A destination's AH and QPN by SIDR; NULL when nobody answers there. */
static struct dg_peer *resolve(struct rs *rs, const struct sockaddr *to)
{
	struct rdma_conn_param p = {0};
	struct rdma_cm_id *id;
	struct dg_peer *peer = NULL;
	struct ibv_ah *ah;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP))
		return NULL;
	if (!rdma_resolve_addr(id, NULL, (struct sockaddr *)to, 2000) &&
	    !rdma_resolve_route(id, 2000) && !rdma_connect(id, &p) && id->event &&
	    id->event->event == RDMA_CM_EVENT_ESTABLISHED) {
		struct rdma_ud_param *u = &id->event->param.ud;

		ah = ibv_create_ah(cm_g.pd, &u->ah_attr);
		if (ah) {
			peer_add(rs->dg, to, ah, u->qp_num, u->qkey);
			peer = rs->dg->peers;
		}
	}
	RS_DBG("rs %d: SIDR lookup: %s", rs->fd, peer ? "found" : "nobody there");
	rdma_destroy_id(id);
	return peer;
}

ssize_t rs_dgram_sendto(struct rs *rs, const struct iovec *iov, int iovcnt, int flags,
			const struct sockaddr *to, socklen_t tolen)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_sge sge;
	struct dg_peer *peer;
	size_t len = 0, off = 0;
	uint8_t *buf;
	int e;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (!to) {
		if (!dg->connected)
			return -EDESTADDRREQ;
		to = (struct sockaddr *)&dg->dst;
	} else if ((to->sa_family != AF_INET && to->sa_family != AF_INET6) || tolen < alen(to)) {
		return -EINVAL;
	}
	if (len > dg->mtu)
		return -EMSGSIZE;
	e = rs_dgram_listen(rs); /* the port our datagrams come from */
	if (e)
		return -e;
	while (dg->s_used >= DG_NSEND) {
		rs_dgram_cq(rs);
		if (dg->s_used < DG_NSEND)
			break;
		if (rs->nonblock || (flags & MSG_DONTWAIT))
			return -EAGAIN;
		rs_wait(rs, -1);
	}
	peer = peer_find(dg, to);
	if (!peer)
		peer = resolve(rs, to);
	if (!peer)
		return (ssize_t)len; /* nobody there: lost, as UDP */
	buf = dg->sbufs + (size_t)dg->s_next * dg->mtu;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	sge.addr = (uintptr_t)buf;
	sge.length = (uint32_t)len;
	sge.lkey = dg->smr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(ntohs(rdma_get_src_port(rs->id)));
	wr.wr.ud.ah = peer->ah;
	wr.wr.ud.remote_qpn = peer->qpn;
	wr.wr.ud.remote_qkey = peer->qkey;
	e = ibv_post_send(dg->qp, &wr, &bad);
	if (e)
		return -e;
	dg->s_next = (dg->s_next + 1) % DG_NSEND;
	dg->s_used++;
	return (ssize_t)len;
}

ssize_t rs_dgram_recvfrom(struct rs *rs, const struct iovec *iov, int iovcnt, int flags,
			  struct sockaddr *from, socklen_t *fromlen)
{
	struct rs_dgram *dg = rs->dg;
	uint32_t slot;
	size_t got = 0, left;
	const uint8_t *p;

	for (;;) {
		rs_dgram_cm(rs);
		rs_dgram_cq(rs);
		if (dg->r_count)
			break;
		if (rs->nonblock || (flags & MSG_DONTWAIT))
			return -EAGAIN;
		rs_wait(rs, -1);
	}
	slot = dg->ready[dg->r_head];
	p = dg->rbufs + (size_t)slot * dg->slot + DG_GRH;
	left = dg->len[slot];
	for (int i = 0; i < iovcnt && left; i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;

		memcpy(iov[i].iov_base, p + got, n);
		got += n;
		left -= n;
	}
	if (from && fromlen) {
		socklen_t l = alen((struct sockaddr *)&dg->from[slot]);

		memcpy(from, &dg->from[slot], *fromlen < l ? *fromlen : l);
		*fromlen = l;
	}
	if (!(flags & MSG_PEEK)) {
		dg->r_head = (dg->r_head + 1) % DG_NRECV;
		dg->r_count--;
		post_recv_slot(dg, slot);
	}
	return (ssize_t)got; /* the rest of a longer datagram is dropped, as UDP */
}

int rs_dgram_connect(struct rs *rs, const struct sockaddr *to, socklen_t tolen)
{
	if ((to->sa_family != AF_INET && to->sa_family != AF_INET6) || tolen < alen(to))
		return EINVAL;
	memcpy(&rs->dg->dst, to, alen(to));
	rs->dg->connected = true;
	return 0;
}
