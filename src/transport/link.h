/*
 * The link beneath the transport: the one interface through which the
 * requester, completer and responder (req.c, resp.c, core.c) hand packets
 * to whatever carries them, so that the same transport runs over more than
 * one link layer.  A packet crosses it as the transport's part of it, from
 * the BTH on (the BTH, its extension headers, the payload); the link adds
 * what its layer puts around that (RoCEv2: the IP and UDP headers it gets
 * from the kernel's socket, the pad count's bytes and the ICRC; the
 * InfiniBand link would add the LRH, the ICRC and the VCRC).
 *
 * Sending is batched: send() queues a packet, flush() hands the queue to
 * the layer below.  The payload pieces are read in place until the flush
 * (the MR's pages), so memory they point at must stay until then
 * (sr_eng_stage copies what must not).  Receiving is the link's own loop
 * (roce/roce.h for RoCEv2), which hands each datagram to a function of the
 * reader, with its addressing, and checks the link's own integrity word
 * (rx_check) when the transport has parsed the headers.
 *
 * Implementations: src/roce (RoCEv2 over kernel UDP sockets), and a
 * capture link in the unit tests (tests/unit/test_transport.c).
 */
#ifndef SR_TRANSPORT_LINK_H
#define SR_TRANSPORT_LINK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct sr_engine;
struct sr_link;

/*
 * A packet's addressing as the transport knows it.  Sending: the path of
 * the QP it is for and its flow, the sending QP's number, whose packets a
 * link keeps in order and which it may spread (RoCEv2: over a pool of
 * source ports, as rxe's 0xC000 | hash(qpn)).  Receiving: where it came
 * from and went to, and the link's own word that its integrity check
 * covers (RoCEv2: the UDP source port).  The GIDs are the IP addresses on
 * RoCEv2, the GRH's on InfiniBand.
 */
struct sr_link_addr {
	const uint8_t *sgid, *dgid;
	uint32_t flow;
};

struct sr_link_ops {
	/* Queues a packet to `to`: hdr (hlen bytes, from the BTH on; the pad
	 * count is filled in) and paylen bytes in npay pieces.  What the
	 * fault rules and the capture do to a packet happens here (fault.h,
	 * sr_eng_tapped), as a wire would do it. */
	void (*send)(struct sr_link *l, const struct sr_link_addr *to, const uint8_t *hdr,
		     unsigned hlen, const struct iovec *pay, unsigned npay, uint32_t paylen);
	/* Hands what is queued to the layer below; how many packets. */
	unsigned (*flush)(struct sr_link *l);
	/* Packets queued and not yet flushed. */
	unsigned (*queued)(const struct sr_link *l);
	/* Whether a received packet (len bytes from its BTH, the ICRC its
	 * last 4) is whole, as the link's integrity word says. */
	bool (*rx_check)(const struct sr_link *l, const uint8_t *pkt, uint32_t len,
			 const struct sr_link_addr *from);
};

/* Every link's queue holds at least this many packets before send()
 * flushes it by itself. */
#define SR_LINK_BATCH 64

struct sr_link {
	const struct sr_link_ops *ops;
	/* the engine whose counters, fault rules and capture it applies;
	 * NULL for a link used without one (a posting thread's own sends,
	 * which are off while any tap is on) */
	struct sr_engine *e;
};

#endif
