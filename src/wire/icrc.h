/*
 * The RoCEv2 invariant CRC (ICRC, IBTA Annex A17 and vol. 1 7.8.1), for
 * packets sent and received through the kernel's UDP sockets.
 *
 * The kernel writes the IP and UDP headers, so the ICRC is computed from
 * what the sender knows: the two GIDs (both IPv4-mapped: IPv4, otherwise
 * IPv6; see gid.h), the UDP ports, and the UDP payload (BTH, extension
 * headers, payload and pad; not the 4 ICRC bytes) as an iovec array, read
 * in place (payload straight from registered memory, never linearised).
 * The CRC covers 8 bytes of 0xFF for the LRH, the IP header with the
 * fields a router may change set to all ones (IPv4 TOS, TTL, header
 * checksum; IPv6 traffic class, flow label, hop limit), the UDP header
 * with its checksum all ones, the BTH with byte 4 (FECN, BECN, reserved)
 * all ones, and the rest of the payload.
 *
 * The IPv4 header is the one Linux builds for a datagram sent from an
 * unconnected UDP socket with IP_MTU_DISCOVER = IP_PMTUDISC_DO: IHL 5, DF,
 * protocol 17, and identification 0.  Checked on Linux 6.18 with captures
 * (tests/wire/capture.sh), which also found:
 *   - a *connected* socket numbers its datagrams with a per-socket counter
 *     (random start), and the default IP_PMTUDISC_WANT gives a hashed
 *     identification even though DF is set: neither is predictable;
 *   - a UDP_SEGMENT (GSO) send of n segments leaves with identifications
 *     0, 1, ..., n-1, one per segment, each sendmsg starting again at 0
 *     (software segmentation; a NIC doing it numbers them the same way).
 * So segment k of a GSO send needs sr_icrc_id(..., k, ...).  A receiver
 * using a UDP socket never sees the identification the sender used (no
 * cmsg carries it): sr_icrc_ok() assumes 0, which is what our own senders
 * produce outside GSO, and sr_icrc_ipv4_id() finds the identification
 * that makes a packet check, for peers that number theirs (rxe, HCAs, our
 * own GSO segments), at the price of 16 of the 32 bits of protection.
 *
 * The CRC engine is isa-l's crc32_gzip_refl (PCLMULQDQ/VPCLMULQDQ; the
 * fastest measured here by far, see bench/crc_bench.c), seeded with the
 * state after the 8 constant 0xFF bytes.
 *
 * Values are returned as the CRC-32 is usually written (zlib's crc32() of
 * the pseudo-packet); on the wire the least significant byte goes first
 * (sr_icrc_put / sr_icrc_get), on every host.
 *
 * Ports are in host byte order.  The caller keeps the UDP payload within
 * SR_ICRC_UDP_MAX_V4 / _V6 (the IP length fields are 16 bits).
 */
#ifndef SR_WIRE_ICRC_H
#define SR_WIRE_ICRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SR_ICRC_LEN 4
/* Largest UDP payload without the ICRC that an IPv4 / IPv6 datagram holds. */
#define SR_ICRC_UDP_MAX_V4 (65535 - 20 - 8 - SR_ICRC_LEN)
#define SR_ICRC_UDP_MAX_V6 (65535 - 8 - SR_ICRC_LEN)

/* The ICRC of a datagram with IPv4 identification 0 (ignored for IPv6). */
uint32_t sr_icrc(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		 const struct iovec *iov, int iovcnt);

/* The same with an explicit IPv4 identification (segment k of a GSO send: k). */
uint32_t sr_icrc_id(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		    uint16_t ip_id, const struct iovec *iov, int iovcnt);

/* True when the 4 received ICRC bytes match, IPv4 identification 0. */
bool sr_icrc_ok(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		const struct iovec *iov, int iovcnt, const uint8_t icrc[SR_ICRC_LEN]);

/*
 * IPv4 only: the identification (0..65535) with which the received ICRC
 * matches, or -EBADMSG if there is none (-EINVAL for an IPv6 pair).  The CRC
 * is linear, so this costs one CRC pass plus a 16-unknown solve; a corrupt
 * packet passes with probability 2^-16 instead of 2^-32.
 */
int sr_icrc_ipv4_id(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		    const struct iovec *iov, int iovcnt, const uint8_t icrc[SR_ICRC_LEN]);

/*
 * What to XOR into the ICRC of an IPv4 datagram computed with
 * identification 0 to get the one with identification id, for a UDP
 * payload of len bytes without the ICRC (any addresses and ports: the
 * difference depends on the length alone).  For segment k of a GSO send.
 */
uint32_t sr_icrc_id_delta(size_t len, uint16_t id);
/*
 * sr_icrc_ok, also accepting (IPv4 only) identifications 1..max_id: what
 * a GSO sender of at most max_id + 1 segments produces.  A corrupt packet
 * passes with probability (max_id + 1) / 2^32 instead of 2^-32.
 */
bool sr_icrc_ok_upto(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		     const struct iovec *iov, int iovcnt, const uint8_t icrc[SR_ICRC_LEN],
		     uint16_t max_id);
/* Wire order: least significant byte first (IBTA; rxe's cpu_to_le32 store). */
static inline void sr_icrc_put(uint8_t out[SR_ICRC_LEN], uint32_t icrc)
{
	out[0] = (uint8_t)icrc;
	out[1] = (uint8_t)(icrc >> 8);
	out[2] = (uint8_t)(icrc >> 16);
	out[3] = (uint8_t)(icrc >> 24);
}

static inline uint32_t sr_icrc_get(const uint8_t in[SR_ICRC_LEN])
{
	return in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
}

#endif
