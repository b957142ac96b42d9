/*
 * Payload copy: every byte the same-host data path moves between two
 * registered buffers goes through sr_copy().
 *
 * Below sr_copy_split_min it is glibc's memcpy.  From there up the copy is
 * done in SR_COPY_CHUNK pieces, and every other large copy a thread makes
 * walks those pieces from the end towards the start.  A buffer pair that is
 * moved again (a benchmark loop, a ring of message buffers, an iterative
 * solver) then starts with the lines the previous pass touched last, which
 * are the ones still in this core's L2; a forward-only copy of a footprint
 * larger than the L2 evicts each line just before it is needed again, so
 * every pass misses it entirely.  Streaming through fresh buffers gains
 * nothing and loses nothing (docs/architecture.md, "Payload copy").
 *
 * The last piece is always copied last, in both directions, so a peer that
 * watches the final byte of a buffer sees it no earlier than memcpy alone
 * would let it (ibv_query_qp_data_in_order() still promises nothing).
 */
#ifndef SR_CORE_COPY_H
#define SR_CORE_COPY_H

#include <stddef.h>
#include <string.h>

#define SR_COPY_CHUNK (64u * 1024)

/* Copies from this size up are split: 3/8 of this core's L2, i.e. where the
 * source and destination together pass 3/4 of it (768 KiB on a 2 MiB L2);
 * 512 KiB when the L2 size is unknown.  Set once at load. */
extern size_t sr_copy_split_min;

void sr_copy_large(void *dst, const void *src, size_t len);

static inline void sr_copy(void *dst, const void *src, size_t len)
{
	if (__builtin_expect(len < sr_copy_split_min, 1))
		memcpy(dst, src, len);
	else
		sr_copy_large(dst, src, len);
}

#endif
