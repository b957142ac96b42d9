/*
 * Payload copy: every byte the same-host data path moves between two
 * registered buffers goes through sr_copy(), and every byte the RoCEv2
 * engine stores into one (a WRITE's payload, a READ response).
 *
 * A copy whose source and destination together fit in this core's L1d is
 * glibc's memcpy.  Above that, the copy is done in pieces, and when a thread
 * copies the same buffer pair as its previous split copy (a benchmark loop,
 * an iterative solver sending the same halo, a single bounce buffer), it
 * walks them in the opposite order from that copy.  The repeat then starts
 * with the lines the previous pass touched last, which are the ones still
 * in the cache; a forward-only copy of a footprint larger than the cache
 * evicts each line just before it is needed again, so every pass misses it
 * entirely.  A new pair goes forwards: walking pieces backwards through
 * lines that are not cached costs a few percent.  Two tiers, one
 * mechanism:
 *
 *   L1 tier  (L1d/2, 4 x L1d]   4 KiB pieces (the span of one L1 way: x86's
 *                               L1d is virtually indexed, so size/ways is a
 *                               page); 64 KiB copied again: 54 -> 70 GB/s
 *                               on this project's 48 KiB-L1d machine
 *   between                     memcpy: too little of it stays anywhere
 *   L2 tier  [3/8 L2, ...)      64 KiB pieces, for the L2
 *
 * Streaming through fresh buffers, or a rotation of several buffers, gains
 * nothing and loses nothing (docs/architecture.md, "Payload copy").
 *
 * The last piece is always copied last, in both directions, so a peer that
 * watches the final byte of a buffer sees it no earlier than memcpy alone
 * would let it (ibv_query_qp_data_in_order() still promises nothing).
 *
 * The final bytes (up to SR_COPY_TAIL) are written once each, in ascending
 * order, after everything else, as a NIC's DMA writes them.  memcpy does
 * not promise that: glibc's copies store two overlapping vectors for a
 * size between one and two vector widths, so at exactly one width (64 B
 * with AVX-512, 32 B with AVX2, and 2, 4, 8 or 16 B) every byte is stored
 * twice, and the big copies store their first vector after the loop.  A
 * peer polling the last byte (riostream, any "poll the flag byte" RDMA
 * program) could see it, store its own value into it, and then lose that
 * store to the copy's second store of the old value: riostream hung that
 * way, both sides waiting for a marker the other had written.
 */
#ifndef SR_CORE_COPY_H
#define SR_CORE_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SR_COPY_PIECE_L1 4096u
#define SR_COPY_PIECE_L2 (64u * 1024)

/* The tier bounds, set once at load from sysconf (glibc reads CPUID):
 * copies up to sr_copy_plain_max are plain memcpy (L1d/2: 24 KiB on a
 * 48 KiB L1d; 16 KiB if unknown); up to sr_copy_l1_max (4 x L1d) they are
 * split in L1 pieces; from sr_copy_l2_min (3/8 of the L2, at least
 * 256 KiB; 512 KiB if unknown) in L2 pieces. */
extern size_t sr_copy_plain_max, sr_copy_l1_max, sr_copy_l2_min;

void sr_copy_split(void *dst, const void *src, size_t len);

#define SR_COPY_TAIL 64u

/* Unaligned, may-alias views for the tail's stores; volatile so the
 * compiler keeps each as one store, in program order. */
typedef char sr_copy_v16 __attribute__((vector_size(16), aligned(1), may_alias));
typedef uint64_t sr_copy_u64 __attribute__((aligned(1), may_alias));
typedef uint32_t sr_copy_u32 __attribute__((aligned(1), may_alias));
typedef uint16_t sr_copy_u16 __attribute__((aligned(1), may_alias));

/* len <= SR_COPY_TAIL bytes, each destination byte stored exactly once,
 * in ascending address order (x86 and the others we build for keep one
 * thread's plain stores in order for other cores only with TSO; on weaker
 * machines the order is the compiler's, and only the single store holds). */
static inline void sr_copy_once(void *dst, const void *src, size_t len)
{
	char *d = dst;
	const char *s = src;

	for (unsigned n = len & (SR_COPY_TAIL | 32u | 16u); n; n -= 16, d += 16, s += 16)
		*(volatile sr_copy_v16 *)d = *(const sr_copy_v16 *)s;
	if (len & 8) {
		*(volatile sr_copy_u64 *)d = *(const sr_copy_u64 *)s;
		d += 8;
		s += 8;
	}
	if (len & 4) {
		*(volatile sr_copy_u32 *)d = *(const sr_copy_u32 *)s;
		d += 4;
		s += 4;
	}
	if (len & 2) {
		*(volatile sr_copy_u16 *)d = *(const sr_copy_u16 *)s;
		d += 2;
		s += 2;
	}
	if (len & 1)
		*(volatile char *)d = *s;
}

/* memcpy, but the final bytes as sr_copy_once, after the rest. */
static inline void sr_copy_plain(void *dst, const void *src, size_t len)
{
	if (len > SR_COPY_TAIL) {
		size_t bulk = len - SR_COPY_TAIL;

		memcpy(dst, src, bulk);
		dst = (char *)dst + bulk;
		src = (const char *)src + bulk;
		len = SR_COPY_TAIL;
	}
	sr_copy_once(dst, src, len);
}

static inline void sr_copy(void *dst, const void *src, size_t len)
{
	if (__builtin_expect(len <= sr_copy_plain_max, 1))
		sr_copy_plain(dst, src, len);
	else
		sr_copy_split(dst, src, len);
}

#endif
