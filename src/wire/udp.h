/*
 * RoCEv2 datagrams through the kernel's UDP sockets: the socket set-up every
 * sender and receiver needs (dual-stack, path-MTU discovery "do" so the
 * IPv4 identification is 0 as the ICRC assumes, packet info on receive),
 * and the one function that turns headers and payload pieces into a
 * datagram ready for sendmsg: pad, ICRC, destination, and the source
 * address given per packet (IP_PKTINFO / IPV6_PKTINFO).  The engine
 * (src/engine) sends these in batches with sr_udp_send: runs of equal
 * datagrams to one destination leave as one UDP GSO send (UDP_SEGMENT),
 * the rest through sendmmsg; its receive socket takes GRO (UDP_GRO) and
 * splits what arrives with sr_udp_gro_size.  The library sends UD
 * datagrams to other hosts with them directly (shm/exec.c).
 */
#ifndef SR_WIRE_UDP_H
#define SR_WIRE_UDP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "wire/bth.h"

#define SR_UDP_MAX_IOV (32 + 3) /* header, payload pieces, pad + ICRC */

struct sr_udp_pkt {
	uint32_t len; /* the UDP payload: headers, payload, pad, ICRC */
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

/* The buffers each socket asks for (the kernel counts twice as much).
 * The receive buffer stands in for a lossless link's headroom: it holds
 * what arrives while no thread reads, and on a host with fewer CPUs than
 * busy threads the scheduler leaves a socket unread for up to ~30 ms
 * (2.5 GB/s for 30 ms is 75 MB of datagrams, 1.5-2.5x that counted).
 * Only where the daemon may pass rmem_max; else it gets rmem_max. */
#define SR_UDP_RCVBUF (128 << 20)
#define SR_UDP_SNDBUF (32 << 20)

/* A non-blocking dual-stack UDP socket bound to `port` (0: any); its port
 * in *bound.  -errno on failure. */
int sr_udp_socket(uint16_t port, uint16_t *bound);

/* n (a power of two) such sockets bound together to `port`
 * (SO_REUSEPORT), the kernel steering each datagram to
 * fds[((BTH destination QPN >> shift) - salt) % n] (to fds[0] for QP0,
 * the multicast QPN or a runt); only fds[0] takes multicast.  QP1's
 * datagrams go to one more member, *qp1_fd, if qp1_fd is not NULL (-1 there
 * if it could not be made: then to fds[0]).  Returns how many it made of
 * the n: n, or 1 if the kernel refuses a group (then fds[0] takes
 * everything, *qp1_fd is -1), or -errno. */
int sr_udp_socket_group(uint16_t port, unsigned shift, unsigned salt, int *fds, unsigned n,
			int *qp1_fd);

/* The destination (dgid, port 4791) and the control message that sends
 * from sgid (IP_PKTINFO / IPV6_PKTINFO) into *dst and cm, which has room
 * for CMSG_SPACE(sizeof(struct in6_pktinfo)); returns msg_controllen. */
size_t sr_udp_route(struct sockaddr_in6 *dst, struct cmsghdr *cm, const uint8_t sgid[16],
		    const uint8_t dgid[16]);

/* Builds a datagram in *t from sgid:sport to dgid:4791: the headers (hlen
 * bytes; PadCnt is filled in), then at most 32 payload pieces of paylen
 * bytes in all, read in place when it is sent.  t->mh is ready for
 * sendmsg (or an mmsghdr). */
void sr_udp_build(struct sr_udp_pkt *t, const uint8_t sgid[16], const uint8_t dgid[16],
		  uint16_t sport, const uint8_t *hdr, unsigned hlen, const struct iovec *pay,
		  unsigned npay, uint32_t paylen);

/* Enables UDP GRO on a receiving socket: recvmsg may then return several
 * datagrams of one flow back to back (sr_udp_gro_size).  -errno if the
 * kernel refuses (before Linux 5.0); receiving works as before. */
int sr_udp_gro(int fd);

/* The size of each datagram in a buffer received on a GRO socket (the
 * last one may be shorter), or 0 if it holds a single datagram. */
uint32_t sr_udp_gro_size(struct msghdr *mh);

/* Whether what waits in a receiving socket holds at least pct percent of
 * its receive buffer (the kernel's accounting, SO_MEMINFO): the reader is
 * falling behind.  False if the kernel does not say. */
bool sr_udp_rx_filled(int fd, unsigned pct);

/*
 * Batched sending.  A run of datagrams with the same source, destination
 * and length (the last may be shorter) leaves in one sendmsg with
 * UDP_SEGMENT, at most SR_UDP_GSO_SEGS of them and SR_UDP_GSO_BYTES in all:
 * the kernel cuts it back into the same datagrams, which costs one pass
 * through the stack instead of one per datagram.  The payload stays where
 * the iovecs point (the MR's pages) until the kernel copies it.  A device
 * that cannot segment (EIO: no checksum offload) turns GSO off for the
 * sender; everything else goes through sendmmsg.
 */
#define SR_UDP_BATCH	 64
#define SR_UDP_GSO_SEGS	 64    /* every kernel with UDP_SEGMENT takes 64 (WIRE.md: 128 here) */
#define SR_UDP_GSO_BYTES 65507 /* the largest UDP payload over IPv4 */

struct sr_udp_sender {
	bool no_gso;
	uint64_t gso_sends, gso_segs; /* GSO sends and the datagrams they carried */
	struct mmsghdr mm[SR_UDP_BATCH];
	struct iovec iov[SR_UDP_BATCH * SR_UDP_MAX_IOV];
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl[SR_UDP_BATCH];
};

/* Sends p[0..n) on sock, waiting (briefly) when the socket buffer is
 * full.  A datagram the kernel refuses is dropped (the transport's timer
 * recovers it).  Returns the datagrams handed to the kernel. */
unsigned sr_udp_send(struct sr_udp_sender *s, int sock, struct sr_udp_pkt *p, unsigned n);

#endif
