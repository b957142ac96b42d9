/*
 * Host-wide number allocator for QPNs, SRQNs and memory keys. The daemon keeps
 * one struct sr_idalloc per number space in its own memory; indices come from
 * a bitmap searched from a rotating start, so a freed index is handed out
 * again only after the allocator has wrapped (like PIDs) and a stale key or
 * QPN held by a dead peer rarely matches a new object. The helpers below turn
 * an index into a wire number by adding random tag bits, which makes numbers
 * unpredictable (ReDMArk, USENIX Security 2021). Not thread-safe: the caller
 * serialises access.
 */
#ifndef SOFTRDMA_CORE_IDALLOC_H
#define SOFTRDMA_CORE_IDALLOC_H

#include <stdbool.h>
#include <stdint.h>

struct sr_idalloc {
	uint32_t base;	/* smallest index handed out (e.g. 2: QPN 0 and 1 are reserved) */
	uint32_t limit; /* indices are in [base, limit) */
	uint32_t next;	/* rotating search start: indices are not reused at once */
	uint32_t in_use;
	uint64_t *bitmap; /* limit bits, caller allocates with sr_idalloc_init */
};

int sr_idalloc_init(struct sr_idalloc *a, uint32_t base,
		    uint32_t limit); /* 0 / -ENOMEM / -EINVAL */
void sr_idalloc_fini(struct sr_idalloc *a);
int64_t sr_idalloc_get(struct sr_idalloc *a); /* index, or -ENOSPC when full */
int sr_idalloc_put(struct sr_idalloc *a,
		   uint32_t idx); /* 0, or -EINVAL if idx not allocated / out of range */
bool sr_idalloc_test(const struct sr_idalloc *a, uint32_t idx);

/*
 * Number composition. Keys (lkey/rkey) are 32 bits: [31:14] index (18 bits),
 * [13:8] random tag, [7:0] key byte (the consumer-owned byte that
 * ibv_inc_rkey changes for type-2 memory windows). QPNs/SRQNs are 24 bits:
 * [23:17] random tag (7 bits), [16:0] index (17 bits). The tag makes numbers
 * unpredictable (ReDMArk, USENIX Sec 2021).
 *
 * Index bits above the field width are dropped: size key allocators with
 * limit <= SR_KEY_INDEX_MAX + 1 and QPN/SRQN allocators with
 * limit <= SR_QPN_INDEX_MAX + 1.
 */
#define SR_KEY_INDEX_BITS 18
#define SR_QPN_INDEX_BITS 17
#define SR_KEY_INDEX_MAX  ((1u << SR_KEY_INDEX_BITS) - 1)
#define SR_QPN_INDEX_MAX  ((1u << SR_QPN_INDEX_BITS) - 1)

/*
 * Tag and key byte from rnd. Never returns 0; moreover bits [31:8] are never
 * all zero, so no ibv_inc_rkey() sequence can reach 0 either.
 */
uint32_t sr_key_make(uint32_t index, uint32_t rnd);
/* Inline: the data path splits keys and QPNs on every work request. */
static inline uint32_t sr_key_index(uint32_t key)
{
	return key >> (32 - SR_KEY_INDEX_BITS);
}
/*
 * Tag from rnd. Never returns 0, 1 (IBTA QP0/QP1) or 0xFFFFFF (the multicast
 * QPN); the tag is adjusted when it would.
 */
uint32_t sr_qpn_make(uint32_t index, uint32_t rnd);
static inline uint32_t sr_qpn_index(uint32_t qpn)
{
	return qpn & SR_QPN_INDEX_MAX;
}
/*
 * The top SR_QPN_MEMBER_BITS of a QPN's 7 tag bits name the member of the
 * RoCEv2 engine's receive socket group its datagrams are steered to
 * (layout.h, SR_RX_MEMBERS; wire/udp.c, udp_steer), offset by a salt of
 * the daemon's (engine.c, sr_engine_rx_qpn_bits); the 3 below them stay
 * random.  sr_qpn_member_rnd gives sr_qpn_make's rnd for such bits, and
 * sr_qpn_member reads them back.
 */
#define SR_QPN_MEMBER_SHIFT 20
#define SR_QPN_MEMBER_BITS  4
static inline uint32_t sr_qpn_member_rnd(uint32_t member, uint32_t rnd)
{
	return member << (SR_QPN_MEMBER_SHIFT - SR_QPN_INDEX_BITS) |
	       (rnd & ((1u << (SR_QPN_MEMBER_SHIFT - SR_QPN_INDEX_BITS)) - 1));
}
static inline uint32_t sr_qpn_member(uint32_t qpn)
{
	return qpn == 0xFFFFFF ? 0
			       : (qpn >> SR_QPN_MEMBER_SHIFT) & ((1u << SR_QPN_MEMBER_BITS) - 1);
}
uint32_t
sr_random32(void); /* from getrandom(2) (GRND_NONBLOCK), falling back to a seeded xorshift */

#endif /* SOFTRDMA_CORE_IDALLOC_H */
