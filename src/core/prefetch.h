/*
 * Prefetch for write.  On the same-host path most misses are lines another
 * core modified or read last (ring heads, WQEs, lock words); a line we are
 * about to store to is best requested with ownership (PREFETCHW), so the
 * store does not later need a second, serialized upgrade.  GCC emits
 * PREFETCHW for __builtin_prefetch(p, 1) only when the target has it
 * (-mprfchw), which the baseline x86-64 target does not; we check CPUID once
 * instead (Intel since Broadwell, every AMD64) and fall back to a plain
 * prefetch.
 */
#ifndef SR_CORE_PREFETCH_H
#define SR_CORE_PREFETCH_H

#include <stdbool.h>

extern bool sr_have_prefetchw;

static inline void sr_prefetchw(const void *p)
{
#if defined(__x86_64__)
	if (__builtin_expect(sr_have_prefetchw, 1)) {
		__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
		return;
	}
#endif
	__builtin_prefetch(p, 1);
}

#endif
