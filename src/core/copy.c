/*
 * Split payload copies (copy.h): a thread that copies the same buffer pair
 * again walks its pieces the other way from last time, the last piece
 * always last, its final bytes stored once each (copy.h); the piece size is
 * the cache level the pair can stay warm in.
 */
#include <unistd.h>

#include "core/copy.h"

size_t sr_copy_plain_max = 16u * 1024;
size_t sr_copy_l1_max = 128u * 1024;
size_t sr_copy_l2_min = 512u * 1024;

__attribute__((constructor)) static void probe_caches(void)
{
	long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);

	if (l1 >= 2 * (long)SR_COPY_PIECE_L1) {
		sr_copy_plain_max = (size_t)l1 / 2;
		sr_copy_l1_max = 4 * (size_t)l1;
	}
	if (l2 > 0) {
		size_t m = (size_t)l2 / 8 * 3;

		sr_copy_l2_min = m > 4 * SR_COPY_PIECE_L2 ? m : 4 * SR_COPY_PIECE_L2;
	}
	if (sr_copy_l1_max >= sr_copy_l2_min) /* an odd cache shape: the L2 tier wins */
		sr_copy_l1_max = sr_copy_l2_min - 1;
}

/* What this thread copied last, to tell a repeat from a new pair: only a
 * repeat finds the previous pass's lines in the cache.  Per thread: no
 * sharing, no atomics. */
static __thread struct {
	void *dst;
	const void *src;
	size_t len;
	unsigned backwards;
} last_copy;

void sr_copy_split(void *dst, const void *src, size_t len)
{
	char *d = dst;
	const char *s = src;
	size_t piece, last;
	int again;

	if (len <= sr_copy_l1_max)
		piece = SR_COPY_PIECE_L1;
	else if (len >= sr_copy_l2_min)
		piece = SR_COPY_PIECE_L2;
	else {
		sr_copy_plain(dst, src, len);
		return;
	}
	again = dst == last_copy.dst && src == last_copy.src && len == last_copy.len;
	last_copy.dst = dst;
	last_copy.src = src;
	last_copy.len = len;
	/* a repeat goes the other way from its predecessor; a new pair goes
	 * forwards: walking a buffer backwards when nothing of it is cached
	 * costs ~5% (the prefetchers restart at every piece) */
	last_copy.backwards = again && !last_copy.backwards;
	last = (len - 1) / piece * piece; /* offset of the last piece */
	if (last_copy.backwards) {
		for (size_t off = last; off;) {
			off -= piece;
			memcpy(d + off, s + off, piece);
		}
	} else {
		memcpy(d, s, last);
	}
	sr_copy_plain(d + last, s + last, len - last);
}
