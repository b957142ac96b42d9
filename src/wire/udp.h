/*
 * RoCEv2 datagrams through the kernel's UDP sockets: the socket set-up every
 * sender and receiver needs (dual-stack, path-MTU discovery "do" so the
 * IPv4 identification is 0 as the ICRC assumes, packet info on receive),
 * and the one function that turns headers and payload pieces into a
 * datagram ready for sendmsg: pad, ICRC, destination, and the source
 * address given per packet (IP_PKTINFO / IPV6_PKTINFO).  The engine
 * (src/engine) batches these with sendmmsg; the library sends UD
 * datagrams to other hosts with them directly (shm/exec.c).
 */
#ifndef SR_WIRE_UDP_H
#define SR_WIRE_UDP_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "wire/bth.h"

#define SR_UDP_MAX_IOV (32 + 3) /* header, payload pieces, pad + ICRC */

struct sr_udp_pkt {
	uint8_t hdr[SR_MAX_HDR_LEN + 8];
	uint8_t trailer[3 + SR_ICRC_LEN]; /* pad, then the ICRC */
	struct iovec iov[SR_UDP_MAX_IOV];
	unsigned niov;
	struct sockaddr_in6 dst;
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh;
};

/* A non-blocking dual-stack UDP socket bound to `port` (0: any); its port
 * in *bound.  -errno on failure. */
int sr_udp_socket(uint16_t port, uint16_t *bound);

/* Builds a datagram in *t from sgid:sport to dgid:4791: the headers (hlen
 * bytes; PadCnt is filled in), then at most 32 payload pieces of paylen
 * bytes in all, read in place when it is sent.  t->mh is ready for
 * sendmsg (or an mmsghdr). */
void sr_udp_build(struct sr_udp_pkt *t, const uint8_t sgid[16], const uint8_t dgid[16],
		  uint16_t sport, const uint8_t *hdr, unsigned hlen, const struct iovec *pay,
		  unsigned npay, uint32_t paylen);

#endif
