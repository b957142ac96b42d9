/*
 * Random RoCEv2 packets for the wire tests: a BTH and the extension headers
 * its opcode carries, hand-encoded here from IBTA vol. 1 9.2-9.5 (and
 * /work/shared/WIRE.md) independently of the engine's own encoders, then
 * payload and pad.  Also a small PRNG, so every test run is reproducible
 * from its seed.
 */
#ifndef SR_TESTS_ROCE_PKT_H
#define SR_TESTS_ROCE_PKT_H

#include <stddef.h>
#include <stdint.h>

#define ROCE_PKT_HDR_MAX 44 /* BTH + XRCETH + AtomicETH */

struct roce_pkt {
	uint8_t opcode;
	uint32_t dqpn, psn;
	unsigned padcnt;
	size_t hdr_len; /* BTH and extension headers */
	size_t pay_len; /* payload, without the pad */
	size_t len;	/* UDP payload without the ICRC: hdr_len + pay_len + padcnt */
};

uint64_t roce_rand(uint64_t *state);

/* A random 16-byte GID: IPv4-mapped (10.0.0.0/8) or IPv6 (fd00::/8). */
void roce_rand_gid(uint64_t *rng, uint8_t gid[16], int v4);

/*
 * Writes one random packet (a random opcode of RC, UC, UD, XRC or CNP with its
 * headers, up to max_pay payload bytes) into buf, which must hold
 * ROCE_PKT_HDR_MAX + max_pay + 3 bytes; returns its length (pkt->len).
 */
size_t roce_pkt_make(uint8_t *buf, size_t max_pay, uint64_t *rng, struct roce_pkt *pkt);

#endif
