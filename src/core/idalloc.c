/*
 * Bitmap index allocator and wire-number composition (QPN/SRQN, lkey/rkey).
 * One bit per index; a set bit means "in use". Allocation scans for a clear
 * bit from the rotating cursor a->next up to a->limit, then wraps to a->base,
 * a whole 64-bit word at a time, so a just-freed index is not reused until
 * every other free index ahead of the cursor has been handed out. The random
 * helpers use getrandom(2) and, if the kernel cannot provide bytes without
 * blocking, a stateless xorshift seeded from clocks, pid and a stack address.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "idalloc.h"

#include <softrdma/layout.h>

#define SR_KEY_TAG_BITS	   6
#define SR_KEY_TAG_SHIFT   8
#define SR_KEY_INDEX_SHIFT (SR_KEY_TAG_SHIFT + SR_KEY_TAG_BITS) /* 14 */
#define SR_QPN_TAG_BITS	   7
#define SR_QPN_TAG_SHIFT   SR_QPN_INDEX_BITS /* 17 */

_Static_assert(SR_KEY_INDEX_SHIFT + SR_KEY_INDEX_BITS == 32, "key layout");
_Static_assert(SR_QPN_TAG_SHIFT + SR_QPN_TAG_BITS == 24, "QPN layout");
_Static_assert(SR_QPN_MEMBER_SHIFT + SR_QPN_MEMBER_BITS == 24 &&
		   SR_QPN_MEMBER_SHIFT > SR_QPN_TAG_SHIFT &&
		   1u << SR_QPN_MEMBER_BITS == SR_RX_MEMBERS,
	       "QPN member bits");

static uint64_t sr_idalloc_words(uint32_t limit)
{
	return ((uint64_t)limit + 63) / 64;
}

int sr_idalloc_init(struct sr_idalloc *a, uint32_t base, uint32_t limit)
{
	if (!a || base >= limit)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->bitmap = calloc(sr_idalloc_words(limit), sizeof(uint64_t));
	if (!a->bitmap)
		return -ENOMEM;
	a->base = base;
	a->limit = limit;
	a->next = base;
	return 0;
}

void sr_idalloc_fini(struct sr_idalloc *a)
{
	if (!a)
		return;
	free(a->bitmap);
	memset(a, 0, sizeof(*a));
}

/* First clear bit in [from, to), or -1. */
static int64_t sr_idalloc_find_clear(const struct sr_idalloc *a, uint32_t from, uint32_t to)
{
	uint64_t w, bits;
	uint32_t pos = from;

	while (pos < to) {
		w = pos / 64;
		bits = ~a->bitmap[w];
		bits &= ~0ULL << (pos % 64);	  /* drop bits below pos */
		if (to - (uint32_t)(w * 64) < 64) /* drop bits at/after to */
			bits &= (1ULL << (to - w * 64)) - 1;
		if (bits)
			return (int64_t)(w * 64 + (uint64_t)__builtin_ctzll(bits));
		if (w * 64 + 64 >= to)
			break;
		pos = (uint32_t)(w * 64 + 64);
	}
	return -1;
}

int64_t sr_idalloc_get(struct sr_idalloc *a)
{
	int64_t idx;

	if (!a || !a->bitmap)
		return -EINVAL;
	if (a->in_use >= a->limit - a->base)
		return -ENOSPC;
	if (a->next < a->base || a->next >= a->limit)
		a->next = a->base;

	idx = sr_idalloc_find_clear(a, a->next, a->limit);
	if (idx < 0)
		idx = sr_idalloc_find_clear(a, a->base, a->next);
	if (idx < 0)
		return -ENOSPC; /* in_use out of sync; never expected */

	a->bitmap[idx / 64] |= 1ULL << (idx % 64);
	a->in_use++;
	a->next = (uint32_t)idx + 1;
	if (a->next >= a->limit)
		a->next = a->base;
	return idx;
}

bool sr_idalloc_test(const struct sr_idalloc *a, uint32_t idx)
{
	if (!a || !a->bitmap || idx < a->base || idx >= a->limit)
		return false;
	return (a->bitmap[idx / 64] >> (idx % 64)) & 1;
}

int sr_idalloc_put(struct sr_idalloc *a, uint32_t idx)
{
	if (!sr_idalloc_test(a, idx))
		return -EINVAL;
	a->bitmap[idx / 64] &= ~(1ULL << (idx % 64));
	a->in_use--;
	return 0;
}

uint32_t sr_key_make(uint32_t index, uint32_t rnd)
{
	uint32_t tag = (rnd >> SR_KEY_TAG_SHIFT) & ((1u << SR_KEY_TAG_BITS) - 1);
	uint32_t keybyte = rnd & 0xFF;

	index &= SR_KEY_INDEX_MAX;
	/* Keep bits [31:8] non-zero so the key and every ibv_inc_rkey() of it
	 * differ from 0. */
	if (index == 0 && tag == 0)
		tag = 1;
	return (index << SR_KEY_INDEX_SHIFT) | (tag << SR_KEY_TAG_SHIFT) | keybyte;
}

uint32_t sr_qpn_make(uint32_t index, uint32_t rnd)
{
	uint32_t tag = rnd & ((1u << SR_QPN_TAG_BITS) - 1);
	uint32_t qpn;

	index &= SR_QPN_INDEX_MAX;
	qpn = (tag << SR_QPN_TAG_SHIFT) | index;
	/* 0 and 1 are the special QPs, 0xFFFFFF is the multicast QPN. */
	if (qpn <= 1 || qpn == SR_QPN_MCAST)
		qpn ^= 1u << SR_QPN_TAG_SHIFT; /* flip the lowest tag bit */
	return qpn;
}

/* One round of splitmix64 finalisation followed by xorshift64*. */
static uint64_t sr_random_mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ULL;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	x ^= x >> 31;
	if (!x)
		x = 0x2545F4914F6CDD1DULL;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return x * 0x2545F4914F6CDD1DULL;
}

uint32_t sr_random32(void)
{
	struct timespec mono = {0}, real = {0};
	uint32_t v;
	uint64_t seed;
	ssize_t n;

	do {
		n = getrandom(&v, sizeof(v), GRND_NONBLOCK);
	} while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(v))
		return v;

	/* Fallback: no state is kept, so seed every call afresh. */
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	seed = (uint64_t)mono.tv_sec * 1000000000ULL + (uint64_t)mono.tv_nsec;
	seed ^= ((uint64_t)real.tv_nsec << 32) ^ (uint64_t)real.tv_sec;
	seed ^= (uint64_t)getpid() << 16;
	seed ^= (uint64_t)(uintptr_t)&seed;
	return (uint32_t)(sr_random_mix(seed) >> 32);
}
