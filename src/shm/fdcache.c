/*
 * Descriptor cache (see fdcache.h): a lazily allocated array indexed by the
 * daemon's fd id, each slot holding fd + 1 (0 = not cached).  Lookups are a
 * single acquire load; misses take a mutex and ask the daemon.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "shm/fdcache.h"
#include "shm/devctx.h"

#define SR_FDCACHE_SLOTS (1u << 18)

static _Atomic(_Atomic int *) sr_fd_slots;
static pthread_mutex_t sr_fdcache_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic int *slots(void)
{
	_Atomic int *s = atomic_load_explicit(&sr_fd_slots, memory_order_acquire);

	if (s)
		return s;
	pthread_mutex_lock(&sr_fdcache_lock);
	s = atomic_load_explicit(&sr_fd_slots, memory_order_relaxed);
	if (!s) {
		s = calloc(SR_FDCACHE_SLOTS, sizeof(*s));
		atomic_store_explicit(&sr_fd_slots, s, memory_order_release);
	}
	pthread_mutex_unlock(&sr_fdcache_lock);
	return s;
}

int sr_fdcache_get(struct sr_devctx *ctx, uint32_t fd_id)
{
	_Atomic int *s = slots();
	int v, fd;

	if (!s || fd_id >= SR_FDCACHE_SLOTS)
		return -EINVAL;
	v = atomic_load_explicit(&s[fd_id], memory_order_acquire);
	if (v)
		return v - 1;
	pthread_mutex_lock(&sr_fdcache_lock);
	v = atomic_load_explicit(&s[fd_id], memory_order_relaxed);
	if (!v) {
		fd = sr_ctx_get_fd(ctx, fd_id);
		if (fd >= 0)
			atomic_store_explicit(&s[fd_id], fd + 1, memory_order_release);
		v = fd + 1;
	}
	pthread_mutex_unlock(&sr_fdcache_lock);
	return v - 1;
}

void sr_fdcache_put_own(uint32_t fd_id, int fd)
{
	_Atomic int *s = slots();

	if (s && fd_id < SR_FDCACHE_SLOTS)
		atomic_store_explicit(&s[fd_id], fd + 1, memory_order_release);
}

void sr_fdcache_forget(uint32_t fd_id)
{
	_Atomic int *s = slots();

	if (s && fd_id < SR_FDCACHE_SLOTS)
		atomic_store_explicit(&s[fd_id], 0, memory_order_release);
}

void sr_fdcache_signal(struct sr_devctx *ctx, uint32_t fd_id)
{
	uint64_t one = 1;
	int fd = sr_fdcache_get(ctx, fd_id);

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		(void)0; /* a full eventfd already wakes the reader */
}
