/*
 * Large payload copies (copy.h): SR_COPY_CHUNK pieces, walked forwards and
 * backwards on alternate calls from the same thread, the last piece always
 * last.
 */
#include <unistd.h>

#include "core/copy.h"

size_t sr_copy_split_min = 512u * 1024;

__attribute__((constructor)) static void probe_l2(void)
{
	long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE); /* glibc reads it from CPUID */
	size_t m = l2 > 0 ? (size_t)l2 / 8 * 3 : 0;

	if (m)
		sr_copy_split_min = m > 4 * SR_COPY_CHUNK ? m : 4 * SR_COPY_CHUNK;
}

/* one bit per thread: no sharing, no atomics; a thread that drives several
 * QPs alternates across all of them, which is what the cache sees too */
static __thread unsigned copy_backwards;

void sr_copy_large(void *dst, const void *src, size_t len)
{
	char *d = dst;
	const char *s = src;
	size_t last = (len - 1) / SR_COPY_CHUNK * SR_COPY_CHUNK; /* offset of the last piece */

	copy_backwards ^= 1;
	if (copy_backwards) {
		for (size_t off = last; off;) {
			off -= SR_COPY_CHUNK;
			memcpy(d + off, s + off, SR_COPY_CHUNK);
		}
	} else {
		memcpy(d, s, last);
	}
	memcpy(d + last, s + last, len - last);
}
