/*
 * Seqlock-protected records in the arena (memory-key entries, multicast
 * groups).  One writer at a time (the daemon, or the owner binding a memory
 * window under the QP's lock); any number of lock-free readers in any
 * process.  Fields are copied with relaxed atomic word accesses so the race
 * the seqlock resolves is not undefined behaviour (and ThreadSanitizer sees
 * it as intended).
 *
 * Pairing: writer  seq++ (odd), body stores (release), seq++ (release)
 *          reader  seq load-acquire, body loads (acquire), seq reload; the
 *          reader's acquire of a body word written after the odd seq makes
 *          that odd seq (or later) visible to the re-read.
 */
#ifndef SR_CORE_SEQLOCK_H
#define SR_CORE_SEQLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Copies `words` 32-bit words starting after the seq word. */
static inline void sr_seq_read(const _Atomic uint32_t *seq, void *dst, size_t bytes)
{
	const uint32_t *src = (const uint32_t *)(seq + 1);
	uint32_t *d = dst;
	uint32_t s0, s1;

	for (;;) {
		s0 = atomic_load_explicit(seq, memory_order_acquire);
		if (s0 & 1)
			continue;
		/* acquire loads keep the re-read of seq after the body
		 * (free on x86; and ThreadSanitizer models them, not fences) */
		for (size_t i = 0; i < bytes / 4; i++)
			d[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
		s1 = atomic_load_explicit(seq, memory_order_relaxed);
		if (s0 == s1)
			return;
	}
}

static inline void sr_seq_write(_Atomic uint32_t *seq, const void *src, size_t bytes)
{
	uint32_t *dst = (uint32_t *)(seq + 1);
	const uint32_t *s = src;

	atomic_fetch_add_explicit(seq, 1, memory_order_relaxed);
	/* release stores keep the odd seq before the body */
	for (size_t i = 0; i < bytes / 4; i++)
		__atomic_store_n(&dst[i], s[i], __ATOMIC_RELEASE);
	atomic_fetch_add_explicit(seq, 1, memory_order_release);
}

#endif
