/*
 * RoCEv2 over kernel UDP sockets, the transport's first link (roce.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "core/env.h"
#include "roce/roce.h"
#include "transport/fault.h"
#include "transport/transport.h"
#include "wire/icrc.h"

/* ---- sending ---- */

static unsigned roce_flush(struct sr_link *l)
{
	struct sr_roce *r = (struct sr_roce *)l;
	unsigned i = 0;

	while (i < r->ntx) {
		unsigned n = 1;

		/* one sr_udp_send per run of datagrams on the same socket */
		while (i + n < r->ntx && r->txsock[i + n] == r->txsock[i])
			n++;
		sr_udp_send(&r->sender, r->txsock[i], r->tx + i, n);
		i += n;
	}
	r->ntx = 0;
	if (l->e) {
		atomic_store_explicit(&l->e->cnt[SR_ENG_GSO_SENDS], r->sender.gso_sends,
				      memory_order_relaxed);
		atomic_store_explicit(&l->e->cnt[SR_ENG_GSO_DGRAMS], r->sender.gso_segs,
				      memory_order_relaxed);
	}
	return i;
}

_Static_assert(SR_LINK_BATCH <= SR_UDP_BATCH, "a link's queue goes out in one sr_udp_send per run");

#define HOLDING ((1u << SR_FK_DELAY) | (1u << SR_FK_REORDER))

/*
 * The transmit taps (fault.h): r->tx[r->ntx] was just built from these
 * arguments; queues it, or not, or twice, or holds a copy, and captures
 * what leaves.  Run by every sender that has an engine, with the rules
 * in the arena, so whoever sends a packet decides it the same way.
 */
static void tx_tap(struct sr_roce *r, const uint8_t *sgid, const uint8_t *dgid, uint16_t sport,
		   const uint8_t *hdr, unsigned hlen, const struct iovec *pay, unsigned npay,
		   uint32_t paylen)
{
	struct sr_engine *e = r->link.e;
	struct sr_udp_pkt *t = &r->tx[r->ntx];
	struct sr_fault_shm *sh = sr_eng_fault_shm(e);
	int sock = r->txsock[r->ntx];
	unsigned mask = 0;
	uint32_t bit = 0;

	if (sr_fault_dir_on(sh, SR_FAULT_TX)) {
		/* the bytes the sender owns after the BTH: extension headers and ICRC */
		uint32_t nbits = (hlen > SR_BTH_LEN ? hlen - SR_BTH_LEN : 0) * 8 + SR_ICRC_LEN * 8;

		mask = sr_fault_decide(sh, &e->fault_view, SR_FAULT_TX, sr_bth_dqpn_raw(hdr, hlen),
				       nbits, &bit);
	}
	if (mask & (1u << SR_FK_DROP))
		return;
	if (mask & (1u << SR_FK_CORRUPT)) {
		uint32_t ext = hlen > SR_BTH_LEN ? (hlen - SR_BTH_LEN) * 8 : 0;
		struct iovec *last = &t->iov[t->niov - 1];

		if (bit < ext)
			t->hdr[SR_BTH_LEN + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		else
			((uint8_t *)
			     last->iov_base)[last->iov_len - SR_ICRC_LEN + (bit - ext) / 8] ^=
			    (uint8_t)(1u << ((bit - ext) % 8));
	}
	if ((mask & HOLDING) && e->taps &&
	    e->taps->hold(e, SR_FAULT_TX, mask, sock, sgid, dgid, sport, t->iov, t->niov))
		return;
	if (e->taps)
		e->taps->trace(e, sgid, dgid, sport, SR_ROCE_PORT, t->iov, (int)t->niov);
	r->ntx++;
	if (e->taps)
		e->taps->passed(e, SR_FAULT_TX);
	if (mask & (1u << SR_FK_DUP)) {
		/* an identical datagram, built again (the queue may be sent in between) */
		if (r->ntx == SR_LINK_BATCH)
			roce_flush(&r->link);
		t = &r->tx[r->ntx];
		r->txsock[r->ntx] = sock;
		sr_udp_build(t, sgid, dgid, sport, hdr, hlen, pay, npay, paylen);
		if (e->taps)
			e->taps->trace(e, sgid, dgid, sport, SR_ROCE_PORT, t->iov, (int)t->niov);
		r->ntx++;
	}
}

static void roce_send(struct sr_link *l, const struct sr_link_addr *to, const uint8_t *hdr,
		      unsigned hlen, const struct iovec *pay, unsigned npay, uint32_t paylen)
{
	struct sr_roce *r = (struct sr_roce *)l;
	unsigned k = to->flow % SR_ROCE_SOCKS; /* the flow's socket of the pool */
	uint16_t sport = r->sports[k];

	if (r->ntx == SR_LINK_BATCH)
		roce_flush(l);
	r->txsock[r->ntx] = r->socks[k];
	sr_udp_build(&r->tx[r->ntx], to->sgid, to->dgid, sport, hdr, hlen, pay, npay, paylen);
	/* drop, dup, hold, corrupt; capture */
	if (l->e && sr_eng_tapped(l->e, SR_FAULT_TX))
		tx_tap(r, to->sgid, to->dgid, sport, hdr, hlen, pay, npay, paylen);
	else
		r->ntx++;
}

static unsigned roce_queued(const struct sr_link *l)
{
	return ((const struct sr_roce *)l)->ntx;
}

/* The ICRC over the IP and UDP fields it covers (annex A17.3.3); the
 * IPv4 identification is 0, or 1..63 for the segments of a GSO send
 * (wire/udp.h). */
static bool roce_rx_check(const struct sr_link *l, const uint8_t *pkt, uint32_t len,
			  const struct sr_link_addr *from)
{
	struct iovec iov = {(void *)pkt, len - SR_ICRC_LEN};

	(void)l;
	return sr_icrc_ok_upto(from->sgid, from->dgid, (uint16_t)from->flow, SR_ROCE_PORT, &iov, 1,
			       pkt + len - SR_ICRC_LEN, SR_UDP_GSO_SEGS - 1);
}

static const struct sr_link_ops roce_ops = {
    .send = roce_send,
    .flush = roce_flush,
    .queued = roce_queued,
    .rx_check = roce_rx_check,
};

void sr_roce_init(struct sr_roce *r, struct sr_engine *e)
{
	memset(r, 0, sizeof(*r));
	r->link.ops = &roce_ops;
	r->link.e = e;
	for (int i = 0; i < SR_ROCE_SOCKS; i++)
		r->socks[i] = -1;
}

void sr_roce_one_sock(struct sr_roce *r, int sock, uint16_t sport)
{
	for (int i = 0; i < SR_ROCE_SOCKS; i++) {
		r->socks[i] = sock;
		r->sports[i] = sport;
	}
}

void sr_roce_pool(struct sr_roce *r, int fallback, uint16_t fallback_port)
{
	for (int i = 0; i < SR_ROCE_SOCKS; i++) {
		r->socks[i] = sr_udp_socket(0, &r->sports[i]);
		if (r->socks[i] < 0) {
			r->socks[i] = fallback;
			r->sports[i] = fallback_port;
		}
	}
}

/* ---- receiving ---- */

/* The destination address of a received datagram, as a GID (IP_PKTINFO). */
static bool rx_dst_gid(struct msghdr *mh, uint8_t *dgid)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			memset(dgid, 0, 10);
			dgid[10] = dgid[11] = 0xff;
			memcpy(dgid + 12, &pi.ipi_addr, 4);
			return true;
		}
		if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			memcpy(dgid, &pi.ipi6_addr, 16);
			return true;
		}
	}
	return false;
}

/* The receive backlog, in percent of the socket's buffer, past which a
 * full batch sends CNPs (transport.h). */
static unsigned cnp_fill_pct(void)
{
	static int pct = -1;

	return (unsigned)sr_env_num("SOFTRDMA_CNP_FILL_PCT", &pct, 100, 100 / SR_ENG_CNP_FILL_DIV);
}

int sr_roce_rx_read(struct sr_roce *r, int sock, struct sr_roce_rxbuf *b, unsigned nb,
		    sr_roce_rx_fn fn)
{
	struct sr_engine *e = r->link.e;
	struct mmsghdr mm[SR_ROCE_RX_BATCH];
	unsigned pct;
	int n;

	if (nb > SR_ROCE_RX_BATCH)
		nb = SR_ROCE_RX_BATCH;
	for (unsigned i = 0; i < nb; i++) {
		b[i].iov = (struct iovec){b[i].buf, sizeof(b[i].buf)};
		mm[i].msg_hdr = (struct msghdr){.msg_name = &b[i].src,
						.msg_namelen = sizeof(b[i].src),
						.msg_iov = &b[i].iov,
						.msg_iovlen = 1,
						.msg_control = b[i].ctl.buf,
						.msg_controllen = sizeof(b[i].ctl.buf)};
	}
	n = recvmmsg(sock, mm, nb, MSG_DONTWAIT, NULL);
	if (n <= 0)
		return n < 0 ? -errno : 0;
	/* a full batch: the socket may be filling faster than it is read
	 * (SOFTRDMA_CNP_FILL_PCT=0: every batch counts as congested) */
	pct = cnp_fill_pct();
	e->congested = !pct || ((unsigned)n == nb && sr_udp_rx_filled(sock, pct));
	for (int i = 0; i < n; i++) {
		struct sr_roce_rxbuf *s = &b[i];
		uint8_t dgid[16];

		if ((mm[i].msg_hdr.msg_flags & MSG_TRUNC) || !rx_dst_gid(&mm[i].msg_hdr, dgid)) {
			sr_eng_count(&e->drops[SR_DROP_SHORT], 1);
			continue;
		}
		struct sr_link_addr from = {(const uint8_t *)&s->src.sin6_addr, dgid,
					    ntohs(s->src.sin6_port)};
		uint32_t len = mm[i].msg_len, seg = sr_udp_gro_size(&mm[i].msg_hdr);

		if (!seg || seg > len)
			seg = len;
		if (seg < len) {
			sr_eng_count(&e->cnt[SR_ENG_GRO_RECVS], 1);
			sr_eng_count(&e->cnt[SR_ENG_GRO_DGRAMS], (len + seg - 1) / seg);
		}
		/* a GRO buffer holds datagrams of seg bytes, the last may be shorter */
		for (uint32_t off = 0; off < len; off += seg)
			fn(e, s->buf + off, len - off < seg ? len - off : seg, &from);
	}
	e->congested = false; /* (packets handled later, e.g. held ones, were not in it) */
	return n;
}
