/*
 * A second ICRC, for tests only, written to share nothing with
 * src/wire/icrc.c: the whole masked pseudo-packet is built in one linear
 * buffer from the C library's struct iphdr / ip6_hdr / udphdr, and the
 * CRC is the bit-at-a-time reflected CRC-32 (init and final XOR all ones).
 * Slow and obvious.  scapy 2.5 checks IPv4 only; this checks IPv6.
 */
#ifndef SR_TESTS_ICRC_REF_H
#define SR_TESTS_ICRC_REF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Same meaning as sr_icrc_id(). */
uint32_t sr_icrc_ref(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		     uint16_t ip_id, const struct iovec *iov, int iovcnt);

/* The bitwise CRC-32 of a buffer (zlib's crc32(0, p, n)). */
uint32_t sr_crc32_bitwise(const void *p, size_t n);

#endif
