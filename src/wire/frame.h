/*
 * The Ethernet, IP and UDP headers around a RoCEv2 datagram, as the kernel
 * (and a NIC) would put them on the wire, for captures (pcap.h): we send
 * through UDP sockets and never see those headers ourselves.
 *
 * - Ethernet: fixed dummy MACs, locally administered unicast, derived from
 *   the GID so each address keeps one MAC in a capture:
 *   02:<GID bytes 11..15> (02:ff:0a:00:00:01 for 10.0.0.1).
 * - IPv4 (both GIDs IPv4-mapped): IHL 5, TOS 0, the given identification
 *   (0 for a datagram of an unconnected socket with IP_PMTUDISC_DO; k for
 *   segment k of a GSO send: icrc.h), DF, TTL 64, the real header checksum.
 * - IPv6 otherwise: traffic class 0, flow label 0 (Linux puts a flow hash
 *   there by default; it is masked out of the ICRC), hop limit 64.
 * - UDP: the real checksum over the payload, as the kernel computes it for
 *   our sockets: for IPv4 unless SO_NO_CHECK is set, and always for IPv6,
 *   where a zero checksum is illegal (RFC 8200) unless UDP_NO_CHECK6_TX.
 *   rxe sends 0 in both; we send what our sockets send, so a capture of
 *   the daemon's traffic matches the real one, and no tool flags the IPv6
 *   zero.  It costs one pass over the payload, only when capturing.
 */
#ifndef SR_WIRE_FRAME_H
#define SR_WIRE_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SR_FRAME_ETH_LEN 14
#define SR_FRAME_HDR_MAX (SR_FRAME_ETH_LEN + 40 + 8)
#define SR_FRAME_TTL	 64

/* The dummy MAC of a GID. */
void sr_frame_mac(uint8_t mac[6], const uint8_t gid[16]);

/*
 * Writes the Ethernet + IP + UDP headers of a datagram from sgid:sport to
 * dgid:dport (ports in host byte order) whose UDP payload (BTH up to and
 * including the ICRC) is the iovec; returns their length (42 or 62), or 0
 * if the payload does not fit the IP length fields.
 */
size_t sr_frame_hdr(uint8_t out[SR_FRAME_HDR_MAX], const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t sport, uint16_t dport, uint16_t ip_id, const struct iovec *iov,
		    int iovcnt);

#endif
