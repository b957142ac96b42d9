/*
 * Process-wide cache of descriptors the daemon hands out by id (eventfds of
 * completion channels and async event fds of other processes), so that
 * signalling a peer's channel costs one write(2) and no daemon round trip
 * after the first time.
 */
#ifndef SR_SHM_FDCACHE_H
#define SR_SHM_FDCACHE_H

#include <stdint.h>

struct sr_devctx;

/* Returns the fd for fd_id (fetching it from the daemon once) or -errno. */
int sr_fdcache_get(struct sr_devctx *ctx, uint32_t fd_id);
/* Records a descriptor this process owns. */
void sr_fdcache_put_own(uint32_t fd_id, int fd);
/* Drops an entry (the owner closed it). */
void sr_fdcache_forget(uint32_t fd_id);
/* Signals an eventfd by id: one event. */
void sr_fdcache_signal(struct sr_devctx *ctx, uint32_t fd_id);

#endif
