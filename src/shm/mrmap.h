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

#include <softrdma/layout.h>

struct sr_context;

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
enum sr_key_result sr_key_resolve(struct sr_context *ctx, uint32_t key, uint64_t va, uint64_t len,
				  uint32_t need, uint32_t pd, uint32_t qpn, bool remote,
				  void **ptr);

/* Reads a consistent copy of a key-table entry; false if key does not match. */
bool sr_key_lookup(void *arena, uint32_t key, struct sr_key_entry *out);
/* Rewrites a key-table entry (memory-window bind / invalidate). */
void sr_key_store(void *arena, uint32_t index, const struct sr_key_entry *val);

#endif
