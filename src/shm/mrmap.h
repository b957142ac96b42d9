/*
 * Memory-key checks and address translation for the data path.  Every
 * access a work request makes (a local SGE, a remote rkey range) is checked
 * against the host-wide key table in the arena: the key must be live and
 * exactly equal, the range inside the region, the access rights granted,
 * the PD the QP's own (IBTA 10.6.3 / 10.6.7), and a type-2 window bound to
 * this QP.  A region owned by another process is reached through a mapping
 * of its memfds, made once per registration and cached.
 */
#ifndef SR_SHM_MRMAP_H
#define SR_SHM_MRMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <softrdma/layout.h>

#include "core/idalloc.h"

struct sr_devctx;

enum sr_key_result {
	SR_KEY_OK = 0,
	SR_KEY_INVALID, /* no such key, stale key, wrong kind, invalidated window */
	SR_KEY_BOUNDS,	/* range outside the region */
	SR_KEY_ACCESS,	/* access right not granted */
	SR_KEY_PD,	/* key of another protection domain or QP */
	SR_KEY_NOMAP,	/* the region's pages could not be mapped here */
};

/* need: IBV_ACCESS_* bits required (0 for a local read). remote: the key is
 * an rkey (windows allowed) rather than an lkey. */
enum sr_key_result sr_key_resolve_slow(struct sr_devctx *ctx, uint32_t key, uint64_t va,
				       uint64_t len, uint32_t need, uint32_t pd, uint32_t qpn,
				       bool remote, void **ptr);

/* Per-thread cache of resolved keys (mrmap.c): a hit is revalidated by one
 * load of the key entry's sequence word, which every change bumps. */
#define SR_KCACHE 32

struct sr_kcache_ent {
	/* first line: all that an MR hit reads (sr_key_resolve); copies of
	 * e's fields, so that a hit costs one line of ours, not three, when a
	 * large copy has just evicted them */
	uint32_t key;
	uint32_t seq;
	uint32_t kind, pd, access;
	uint32_t mr_seq;
	uint64_t iova, length;
	char *base;
	uint32_t mr_index;
	/* the whole entries: windows (sr_key_resolve_slow) */
	alignas(SR_CACHELINE) struct sr_key_entry e, mr;
} __attribute__((aligned(SR_CACHELINE)));

extern __thread struct sr_kcache_ent *sr_kcache __attribute__((tls_model("initial-exec")));

/* The data path's entry point: the common case (an MR key seen before and
 * unchanged) inline, everything else in sr_key_resolve_slow. */
static inline enum sr_key_result sr_key_resolve(struct sr_devctx *ctx, void *arena, uint32_t key,
						uint64_t va, uint64_t len, uint32_t need,
						uint32_t pd, uint32_t qpn, bool remote, void **ptr)
{
	struct sr_kcache_ent *c = sr_kcache;
	uint32_t idx = sr_key_index(key);

	if (__builtin_expect(c != NULL, 1)) {
		const struct sr_kcache_ent *ce = &c[idx % SR_KCACHE];
		const struct sr_arena_hdr *h = arena;
		const struct sr_key_entry *ke =
		    (const struct sr_key_entry *)((const char *)arena + h->keytab_off) +
		    (idx % SR_MAX_KEYS);

		if (ce->key == key && ce->kind == SR_KEY_MR && ce->base &&
		    atomic_load_explicit(&ke->seq, memory_order_acquire) == ce->seq) {
			if (ce->pd != pd)
				return SR_KEY_PD;
			if ((ce->access & need) != need)
				return SR_KEY_ACCESS;
			if (va < ce->iova || len > ce->length || va - ce->iova > ce->length - len)
				return SR_KEY_BOUNDS;
			*ptr = ce->base + (va - ce->iova);
			return SR_KEY_OK;
		}
	}
	return sr_key_resolve_slow(ctx, key, va, len, need, pd, qpn, remote, ptr);
}

/* The bytes a gather or scatter list holds. */
static inline uint64_t sr_sge_len(const struct sr_sge_shm *sge, unsigned n)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < n; i++)
		sum += sge[i].length;
	return sum;
}

/*
 * The bytes [off, off + len) of a gather or scatter list (n entries) as
 * pieces of memory, one per entry the range touches (at most n, into iov;
 * *niov: how many), each entry's local key checked for `need` (0: a local
 * read, IBV_ACCESS_LOCAL_WRITE: a scatter) in protection domain pd for QP
 * qpn.  Only the entries the range touches are checked, as an HCA's DMA
 * touches only those; a range past the list's end is cut at it (the
 * caller compares with sr_sge_len first).  The one gather and scatter of
 * both paths: the same-host executor's, the posting threads' sends and the
 * engine's requester and responder.
 */
static inline enum sr_key_result sr_sge_map(struct sr_devctx *ctx, void *arena,
					    const struct sr_sge_shm *sge, unsigned n, uint64_t off,
					    uint64_t len, uint32_t need, uint32_t pd, uint32_t qpn,
					    struct iovec *iov, unsigned *niov)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n && len; i++) {
		enum sr_key_result r;
		uint64_t take;
		void *p;

		if (off >= sge[i].length) {
			off -= sge[i].length;
			continue;
		}
		take = sge[i].length - off < len ? sge[i].length - off : len;
		r = sr_key_resolve(ctx, arena, sge[i].lkey, sge[i].addr + off, take, need, pd, qpn,
				   false, &p);
		if (r)
			return r;
		iov[k++] = (struct iovec){p, take};
		len -= take;
		off = 0;
	}
	*niov = k;
	return SR_KEY_OK;
}

/* Reads a consistent copy of a key-table entry; false if key does not match. */
bool sr_key_lookup(void *arena, uint32_t key, struct sr_key_entry *out);
/* Rewrites a key-table entry (memory-window bind / invalidate). */
void sr_key_store(void *arena, uint32_t index, const struct sr_key_entry *val);

#endif
