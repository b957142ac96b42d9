/*
 * Unit test of src/core/idalloc.c: argument checks, exhaustion (-ENOSPC),
 * double and out-of-range frees (-EINVAL), the rotating cursor (a freed
 * index is not handed out again until the allocator wraps), bitmap word
 * boundaries, a long randomised get/put run checked against a shadow array,
 * and the key/QPN composition helpers (round trips, reserved values, tag
 * variation).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "core/idalloc.h"
#include "check.h"

static void test_init(void)
{
	struct sr_idalloc a;

	CHECK_CTX("init");
	CHECK_EQ(sr_idalloc_init(NULL, 0, 10), -EINVAL);
	CHECK_EQ(sr_idalloc_init(&a, 10, 10), -EINVAL);
	CHECK_EQ(sr_idalloc_init(&a, 11, 10), -EINVAL);
	CHECK_EQ(sr_idalloc_init(&a, 0, 1), 0);
	CHECK_EQ(a.base, 0);
	CHECK_EQ(a.limit, 1);
	CHECK_EQ(a.in_use, 0);
	CHECK(a.bitmap != NULL);
	CHECK_EQ(sr_idalloc_get(&a), 0);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);
	sr_idalloc_fini(&a);
	CHECK(a.bitmap == NULL);
	sr_idalloc_fini(NULL);
	/* A finalised allocator refuses everything. */
	CHECK_EQ(sr_idalloc_get(&a), -EINVAL);
	CHECK_EQ(sr_idalloc_put(&a, 0), -EINVAL);
	CHECK(!sr_idalloc_test(&a, 0));
	CHECK_EQ(sr_idalloc_get(NULL), -EINVAL);
	CHECK_EQ(sr_idalloc_put(NULL, 0), -EINVAL);
	CHECK(!sr_idalloc_test(NULL, 0));
}

static void test_small(void)
{
	struct sr_idalloc a;
	int64_t i;

	CHECK_CTX("small [2,10)");
	CHECK_EQ(sr_idalloc_init(&a, 2, 10), 0);
	for (i = 2; i < 10; i++) {
		CHECK(!sr_idalloc_test(&a, (uint32_t)i));
		CHECK_EQ(sr_idalloc_get(&a), i);
		CHECK(sr_idalloc_test(&a, (uint32_t)i));
	}
	CHECK_EQ(a.in_use, 8);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);
	CHECK_EQ(a.in_use, 8);

	/* Out of range and double frees. */
	CHECK_EQ(sr_idalloc_put(&a, 0), -EINVAL);
	CHECK_EQ(sr_idalloc_put(&a, 1), -EINVAL);
	CHECK_EQ(sr_idalloc_put(&a, 10), -EINVAL);
	CHECK_EQ(sr_idalloc_put(&a, 63), -EINVAL);
	CHECK_EQ(sr_idalloc_put(&a, UINT32_MAX), -EINVAL);
	CHECK(!sr_idalloc_test(&a, 1));
	CHECK(!sr_idalloc_test(&a, 10));
	CHECK(!sr_idalloc_test(&a, UINT32_MAX));
	CHECK_EQ(sr_idalloc_put(&a, 5), 0);
	CHECK(!sr_idalloc_test(&a, 5));
	CHECK_EQ(sr_idalloc_put(&a, 5), -EINVAL);
	CHECK_EQ(a.in_use, 7);

	/* The only free index is found even though the cursor is past it. */
	CHECK_EQ(sr_idalloc_get(&a), 5);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);

	/* Free everything; all puts succeed once. */
	for (i = 2; i < 10; i++)
		CHECK_EQ(sr_idalloc_put(&a, (uint32_t)i), 0);
	for (i = 2; i < 10; i++)
		CHECK_EQ(sr_idalloc_put(&a, (uint32_t)i), -EINVAL);
	CHECK_EQ(a.in_use, 0);
	sr_idalloc_fini(&a);
}

static void test_rotation(void)
{
	struct sr_idalloc a;
	int64_t i, prev, got;
	bool distinct = true;

	CHECK_CTX("rotation");
	CHECK_EQ(sr_idalloc_init(&a, 2, 100), 0);
	CHECK_EQ(sr_idalloc_get(&a), 2);
	CHECK_EQ(sr_idalloc_get(&a), 3);
	CHECK_EQ(sr_idalloc_get(&a), 4);
	CHECK_EQ(sr_idalloc_put(&a, 3), 0);
	/* 3 is free but the cursor is at 5. */
	CHECK_EQ(sr_idalloc_get(&a), 5);
	for (i = 6; i < 100; i++)
		CHECK_EQ(sr_idalloc_get(&a), i);
	/* Wrapped: now 3 comes back. */
	CHECK_EQ(sr_idalloc_get(&a), 3);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);
	sr_idalloc_fini(&a);

	/* get/put in a loop: every index differs until the wrap. */
	CHECK_EQ(sr_idalloc_init(&a, 2, 1000), 0);
	prev = -1;
	for (i = 0; i < 998; i++) {
		got = sr_idalloc_get(&a);
		if (got != i + 2 || got == prev)
			distinct = false;
		CHECK_EQ(sr_idalloc_put(&a, (uint32_t)got), 0);
		prev = got;
	}
	CHECK(distinct);
	CHECK_EQ(sr_idalloc_get(&a), 2); /* wrapped */
	sr_idalloc_fini(&a);
}

static void test_word_boundaries(void)
{
	static const uint32_t holes[] = {0, 63, 64, 127, 128, 129};
	struct sr_idalloc a;
	uint32_t i;

	CHECK_CTX("word boundaries [0,130)");
	CHECK_EQ(sr_idalloc_init(&a, 0, 130), 0);
	for (i = 0; i < 130; i++)
		CHECK_EQ(sr_idalloc_get(&a), i);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);
	for (i = 0; i < sizeof(holes) / sizeof(holes[0]); i++)
		CHECK_EQ(sr_idalloc_put(&a, holes[i]), 0);
	CHECK_EQ(a.in_use, 130 - 6);
	for (i = 0; i < sizeof(holes) / sizeof(holes[0]); i++)
		CHECK_EQ(sr_idalloc_get(&a), holes[i]);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);
	sr_idalloc_fini(&a);

	/* Base and limit inside words; limit exactly on a word boundary. */
	CHECK_CTX("word boundaries [62,128)");
	CHECK_EQ(sr_idalloc_init(&a, 62, 128), 0);
	for (i = 62; i < 128; i++)
		CHECK_EQ(sr_idalloc_get(&a), i);
	CHECK_EQ(sr_idalloc_get(&a), -ENOSPC);
	CHECK_EQ(sr_idalloc_put(&a, 127), 0);
	CHECK_EQ(sr_idalloc_put(&a, 62), 0);
	CHECK_EQ(sr_idalloc_get(&a), 62);
	CHECK_EQ(sr_idalloc_get(&a), 127);
	sr_idalloc_fini(&a);
}

/* Full QPN-sized space: exhaustion and uniqueness. */
static void test_large(void)
{
	const uint32_t base = 2, limit = SR_QPN_INDEX_MAX + 1;
	struct sr_idalloc a;
	uint8_t *seen;
	uint32_t n = 0;
	bool unique = true, in_range = true;
	int64_t got;

	CHECK_CTX("large");
	seen = calloc(limit, 1);
	CHECK(seen != NULL);
	if (!seen)
		return;
	CHECK_EQ(sr_idalloc_init(&a, base, limit), 0);
	while ((got = sr_idalloc_get(&a)) >= 0) {
		if (got < base || got >= limit) {
			in_range = false;
			break;
		}
		if (seen[got])
			unique = false;
		seen[got] = 1;
		n++;
	}
	CHECK_EQ(got, -ENOSPC);
	CHECK(unique);
	CHECK(in_range);
	CHECK_EQ(n, limit - base);
	CHECK_EQ(a.in_use, limit - base);
	sr_idalloc_fini(&a);
	free(seen);
}

/* Random get/put against a shadow copy; deterministic xorshift for replay. */
static void test_random_ops(void)
{
	const uint32_t base = 5, limit = 3000;
	struct sr_idalloc a;
	bool *shadow;
	uint64_t s = 0x9E3779B97F4A7C15ULL;
	uint32_t count = 0, i, idx;
	unsigned long bad_get = 0, bad_put = 0, bad_test = 0;
	int64_t got;
	int ret;

	CHECK_CTX("random ops");
	shadow = calloc(limit, sizeof(*shadow));
	CHECK(shadow != NULL);
	if (!shadow)
		return;
	CHECK_EQ(sr_idalloc_init(&a, base, limit), 0);
	for (i = 0; i < 400000; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		if ((s & 3) != 0) { /* bias toward get so the space fills */
			got = sr_idalloc_get(&a);
			if (count == limit - base) {
				bad_get += got != -ENOSPC;
				continue;
			}
			if (got < base || got >= limit || shadow[got]) {
				bad_get++;
				continue;
			}
			shadow[got] = true;
			count++;
		} else {
			idx = (uint32_t)(s >> 32) % (limit + 10);
			ret = sr_idalloc_put(&a, idx);
			if (idx >= base && idx < limit && shadow[idx]) {
				bad_put += ret != 0;
				shadow[idx] = false;
				count--;
			} else {
				bad_put += ret != -EINVAL;
			}
		}
		if (a.in_use != count)
			bad_get++;
	}
	for (idx = 0; idx < limit + 10; idx++)
		bad_test += sr_idalloc_test(&a, idx) != (idx < limit && shadow[idx]);
	CHECK_EQ(bad_get, 0);
	CHECK_EQ(bad_put, 0);
	CHECK_EQ(bad_test, 0);
	sr_idalloc_fini(&a);
	free(shadow);
}

static void test_keys(void)
{
	static const uint32_t idx[] = {
	    0, 1, 2, 3, 255, 256, 12345, 0x20000, SR_KEY_INDEX_MAX - 1, SR_KEY_INDEX_MAX};
	static const uint32_t rnd[] = {0,      1,	   0xFF,       0x100,
				       0x3F00, 0xFFFFFFFF, 0x12345678, 0x80000000};
	unsigned long bad = 0;
	unsigned int i, j, k;
	uint32_t key, k2;

	CHECK_CTX("keys");
	CHECK_EQ(SR_KEY_INDEX_BITS, 18);
	for (i = 0; i < sizeof(idx) / sizeof(idx[0]); i++) {
		for (j = 0; j < sizeof(rnd) / sizeof(rnd[0]); j++) {
			key = sr_key_make(idx[i], rnd[j]);
			CHECK_CTX("key index %u rnd 0x%x -> 0x%08x", idx[i], rnd[j], key);
			CHECK_EQ(sr_key_index(key), idx[i]);
			CHECK(key != 0);
			CHECK((key >> 8) != 0);
			CHECK_EQ(key & 0xFF, rnd[j] & 0xFF); /* key byte from rnd */
			/* ibv_inc_rkey keeps the index and never yields 0. */
			k2 = key;
			for (k = 0; k < 256; k++) {
				k2 = ibv_inc_rkey(k2);
				bad += sr_key_index(k2) != idx[i] || k2 == 0;
			}
			CHECK_EQ(k2, key);
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_CTX("keys");
	/* The tag comes from rnd bits [13:8]. */
	CHECK(sr_key_make(7, 0x0100) != sr_key_make(7, 0x0200));
	CHECK_EQ(sr_key_make(7, 0x0100) & 0xFF, 0);
	/* Worst case input still yields a non-zero key. */
	CHECK(sr_key_make(0, 0) != 0);
	/* Index bits beyond 18 are dropped, never spill into other fields. */
	CHECK_EQ(sr_key_index(sr_key_make(SR_KEY_INDEX_MAX + 1 + 9, 0)), 9);
}

static void test_qpns(void)
{
	static const uint32_t idx[] = {
	    0, 1, 2, 3, 1000, 0x10000, SR_QPN_INDEX_MAX - 1, SR_QPN_INDEX_MAX};
	unsigned long bad = 0;
	unsigned int i;
	uint32_t r, q;

	CHECK_CTX("qpns");
	CHECK_EQ(SR_QPN_INDEX_BITS, 17);
	for (i = 0; i < sizeof(idx) / sizeof(idx[0]); i++) {
		for (r = 0; r < 256; r++) {
			q = sr_qpn_make(idx[i], r * 0x01010101u);
			bad += sr_qpn_index(q) != idx[i];
			bad += q > 0xFFFFFF;
			bad += q == 0 || q == 1 || q == 0xFFFFFF;
		}
	}
	CHECK_EQ(bad, 0);
	/* The reserved values are steered away from. */
	CHECK(sr_qpn_make(0, 0) != 0);
	CHECK(sr_qpn_make(1, 0) != 1);
	CHECK(sr_qpn_make(SR_QPN_INDEX_MAX, 0x7F) != 0xFFFFFF);
	CHECK_EQ(sr_qpn_index(sr_qpn_make(SR_QPN_INDEX_MAX, 0x7F)), SR_QPN_INDEX_MAX);
	/* Ordinary values are composed as documented. */
	CHECK_EQ(sr_qpn_make(2, 0), 2);
	CHECK_EQ(sr_qpn_make(0x1234, 0x05), (0x05u << 17) | 0x1234);
	CHECK_EQ(sr_qpn_make(0x1234, 0x85), (0x05u << 17) | 0x1234);
	CHECK_EQ(sr_qpn_index(0xFE0000 | 0x1ABCD), 0x1ABCD);
	/* The member of the receive socket group a QPN names survives every
	 * index and random value, the special-QPN adjustments included; QP1
	 * and the multicast QPN name the engine's own (0). */
	{
		static const uint32_t at[] = {0, 1, 2, SR_QPN_INDEX_MAX};
		unsigned wrong = 0;

		for (uint32_t m = 0; m < 1u << SR_QPN_MEMBER_BITS; m++)
			for (uint32_t k = 0; k < 8; k++)
				for (unsigned j = 0; j < 4; j++)
					wrong +=
					    sr_qpn_member(sr_qpn_make(
						at[j], sr_qpn_member_rnd(m, k * 0x11111111u))) != m;
		CHECK_EQ(wrong, 0);
	}
	CHECK_EQ(sr_qpn_member(1), 0);
	CHECK_EQ(sr_qpn_member(0xFFFFFF), 0);
	CHECK_EQ(sr_qpn_member(0xA00000 | 0x1234), 0xA);
}

static void test_random(void)
{
	enum { N = 2000 };
	static uint32_t v[N];
	bool qtag[128] = {false}, ktag[64] = {false};
	unsigned int i, j, dup = 0, nq = 0, nk = 0, ones = 0;

	CHECK_CTX("random");
	for (i = 0; i < N; i++)
		v[i] = sr_random32();
	for (i = 0; i < N; i++)
		for (j = i + 1; j < N; j++)
			dup += v[i] == v[j];
	/* Birthday bound for 2000 draws from 2^32: expect ~0.0005 pairs. */
	CHECK(dup <= 1);
	for (i = 0; i < N; i++) {
		qtag[sr_qpn_make(9, v[i]) >> 17] = true;
		ktag[(sr_key_make(9, v[i]) >> 8) & 0x3F] = true;
		ones += (unsigned int)__builtin_popcount(v[i]);
	}
	for (i = 0; i < 128; i++)
		nq += qtag[i];
	for (i = 0; i < 64; i++)
		nk += ktag[i];
	/* 2000 draws cover all 128 QPN tags / 64 key tags with near certainty. */
	CHECK(nq >= 120);
	CHECK(nk >= 60);
	/* Roughly half of the bits are set (mean 16 per word). */
	CHECK(ones > N * 15 && ones < N * 17);
}

int main(void)
{
	test_init();
	test_small();
	test_rotation();
	test_word_boundaries();
	test_large();
	test_random_ops();
	test_keys();
	test_qpns();
	test_random();
	return CHECK_SUMMARY("test_idalloc");
}
