/*
 * RoCEv2 (IBTA annex A17) as a link beneath the transport
 * (transport/link.h): packets as UDP datagrams to port 4791 through the
 * kernel's sockets (wire/udp.h).  Sending: a pool of source sockets, each
 * flow (the sending QP) on one of them, so that a QP's datagrams keep
 * their order and the pool's ports spread QPs over the receivers' queues;
 * a queue sent in runs of UDP GSO (one pass through the kernel per run);
 * the fault rules and the capture applied to each datagram as it is
 * queued.  Receiving: batches read with recvmmsg, GRO buffers split, each
 * datagram handed to the reader with its addresses (IP_PKTINFO), and the
 * ICRC checked over the IP and UDP fields it covers.
 *
 * Who has one: the daemon's engine thread (its pool of SR_ROCE_SOCKS
 * sockets), a polling thread's receive half and the daemon's QP1 reader
 * (one socket: their process's), a posting thread's own sends (datapath/
 * wire_tx.c, without an engine: no taps).
 */
#ifndef SR_ROCE_ROCE_H
#define SR_ROCE_ROCE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/link.h"
#include "wire/udp.h"

#define SR_ROCE_SOCKS 8 /* the source-port pool: flow f sends from socks[f % 8] */

struct sr_roce {
	struct sr_link link; /* first: a struct sr_link * is one of these */
	int socks[SR_ROCE_SOCKS];
	uint16_t sports[SR_ROCE_SOCKS];
	unsigned ntx;
	struct sr_udp_pkt tx[SR_LINK_BATCH];
	int txsock[SR_LINK_BATCH];
	struct sr_udp_sender sender;
};

/* r serving e (NULL: none), with no sockets yet: what it sends before it
 * has one goes nowhere (EBADF, lost as on a wire). */
void sr_roce_init(struct sr_roce *r, struct sr_engine *e);
/* Every flow sends from sock, bound to sport (a process's one socket). */
void sr_roce_one_sock(struct sr_roce *r, int sock, uint16_t sport);
/* A pool of its own: SR_ROCE_SOCKS sockets bound to any port; where one
 * cannot be made, fallback (bound to fallback_port) stands in. */
void sr_roce_pool(struct sr_roce *r, int fallback, uint16_t fallback_port);

/* ---- receiving ---- */

/* One receive buffer: a GRO buffer of datagrams, their source and cmsgs. */
struct sr_roce_rxbuf {
	uint8_t buf[65536]; /* up to 64 KiB of datagrams of one flow */
	struct sockaddr_in6 src;
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) +
			 CMSG_SPACE(sizeof(struct in_pktinfo)) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov;
};
#define SR_ROCE_RX_BATCH 8 /* buffers per recvmmsg */

/* A received datagram, from its BTH to its ICRC (a reader may flip bits of
 * it: the receive taps). */
typedef void (*sr_roce_rx_fn)(struct sr_engine *e, uint8_t *pkt, uint32_t len,
			      const struct sr_link_addr *from);
/* Reads what sock holds (MSG_DONTWAIT) into up to nb buffers and hands
 * every datagram (a GRO buffer split) to fn(r->link.e, ...); sets the
 * engine's congested while it does if the socket is filling (transport.h,
 * CNPs).  Buffers filled, 0 if none, or -errno. */
int sr_roce_rx_read(struct sr_roce *r, int sock, struct sr_roce_rxbuf *b, unsigned nb,
		    sr_roce_rx_fn fn);

#endif
