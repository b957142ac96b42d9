/*
 * The arena (a sparse memfd every client maps) and the daemon's allocator
 * for objects inside it.  Chunks come in power-of-two size classes from
 * 256 B; freed chunks go on per-class free lists kept in daemon memory (the
 * arena holds no allocator metadata a client could corrupt).  Chunks of
 * 64 KiB and more have their pages punched out on free, so memory returns
 * to the system when QPs and CQs are destroyed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "daemon/daemon.h"
#include "core/doorbell.h"

#define SR_HEAP_MIN_SHIFT 8
#define SR_HEAP_CLASSES	  32

struct sr_freelist {
	uint64_t *offs;
	size_t cnt, cap;
};

static struct sr_freelist sr_free[SR_HEAP_CLASSES];
static uint64_t sr_heap_bump, sr_heap_end, sr_heap_inuse;

/* A bit per 256-byte unit, set at the first unit of each chunk handed out:
 * a chunk freed twice (a daemon bug) would be handed out twice, to two
 * objects at once, so the second free is refused, logged and leaked. */
static uint64_t *sr_heap_live;

static bool live_flip(uint64_t off, bool to)
{
	uint64_t u = off >> SR_HEAP_MIN_SHIFT, bit = 1ull << (u % 64);
	bool was = sr_heap_live[u / 64] & bit;

	if (was == to)
		return false;
	sr_heap_live[u / 64] ^= bit;
	return true;
}

/* Marks the chunk at off free; false (logged) if it was not in use. */
static bool retire(uint64_t off, uint64_t size, const char *how)
{
	if (live_flip(off, false))
		return true;
	sr_err("heap: chunk %#llx (%llu bytes) %s while not in use: kept out of use",
	       (unsigned long long)off, (unsigned long long)size, how);
	return false;
}

static unsigned size_class(uint64_t size)
{
	unsigned c = 0;

	while ((1ull << (c + SR_HEAP_MIN_SHIFT)) < size)
		c++;
	return c;
}

int sr_heap_init(struct sr_daemon *d, uint64_t size)
{
	struct sr_arena_hdr *h;
	uint64_t off;

	d->arena_fd = memfd_create("softrdma-arena", MFD_CLOEXEC);
	if (d->arena_fd < 0)
		return -errno;
	if (ftruncate(d->arena_fd, size))
		return -errno;
	d->arena = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, d->arena_fd, 0);
	if (d->arena == MAP_FAILED)
		return -errno;
	d->arena_size = size;
	sr_heap_live = calloc((size >> SR_HEAP_MIN_SHIFT) / 64 + 1, sizeof(uint64_t));
	if (!sr_heap_live)
		return -ENOMEM;

	h = d->arena;
	h->magic = SR_ARENA_MAGIC;
	h->version = sr_arena_layout_version();
	h->hdr_size = sizeof(*h);
	h->size = size;
	sr_db_init(h);
	off = (sizeof(*h) + 4095) & ~4095ull;
	h->keytab_off = off;
	off += (uint64_t)SR_MAX_KEYS * sizeof(struct sr_key_entry);
	off = (off + 4095) & ~4095ull;
	h->qptab_off = off;
	off += (uint64_t)SR_MAX_QPS * sizeof(struct sr_qpn_slot);
	h->srqtab_off = off;
	off += (uint64_t)SR_MAX_SRQS * sizeof(struct sr_qpn_slot);
	h->mcasttab_off = off;
	off += (uint64_t)SR_MAX_MCAST_GRP * sizeof(struct sr_mcast_group);
	off = (off + SR_CACHELINE - 1) & ~(uint64_t)(SR_CACHELINE - 1);
	h->epochtab_off = off;
	off += (uint64_t)SR_MAX_EPOCH_SLOTS * sizeof(struct sr_epoch_slot);
	h->udtxtab_off = off;
	for (uint64_t i = 0; i < SR_UDTX_SLOTS; i++)
		atomic_store_explicit(&sr_arena_udtxtab(h)[i].seq, i << 32, memory_order_relaxed);
	off += (uint64_t)SR_UDTX_SLOTS * sizeof(struct sr_udtx_slot);
	h->rxfwdtab_off = off;
	for (uint64_t i = 0; i < SR_RXFWD_SLOTS; i++)
		atomic_store_explicit(&sr_arena_rxfwdtab(h)[i].seq, i << 32, memory_order_relaxed);
	off += (uint64_t)SR_RXFWD_SLOTS * sizeof(struct sr_udtx_slot);
	off = (off + SR_CACHELINE - 1) & ~(uint64_t)(SR_CACHELINE - 1);
	h->lifetab_off = off;
	off += (uint64_t)SR_MAX_LIVES * sizeof(struct sr_life_slot);
	atomic_store_explicit(&h->epoch, 1, memory_order_relaxed);
	off = (off + 65535) & ~65535ull;
	h->heap_off = off;
	h->heap_size = size - off;
	sr_heap_bump = off;
	sr_heap_end = size;
	return 0;
}

uint64_t sr_heap_alloc(struct sr_daemon *d, uint64_t size, uint64_t *got)
{
	unsigned c = size_class(size);
	uint64_t csize, off;
	struct sr_freelist *fl;

	if (c >= SR_HEAP_CLASSES)
		return 0; /* (before indexing sr_free: UBSan caught the order) */
	csize = 1ull << (c + SR_HEAP_MIN_SHIFT);
	fl = &sr_free[c];
	if (fl->cnt) {
		off = fl->offs[--fl->cnt];
		if (csize < 65536) /* punched chunks read back as zeroes already */
			memset((char *)d->arena + off, 0, csize);
	} else {
		/* natural alignment up to 64 KiB keeps punch-hole page aligned */
		uint64_t align = csize < 65536 ? csize : 65536;

		off = (sr_heap_bump + align - 1) & ~(align - 1);
		if (off + csize > sr_heap_end)
			return 0;
		sr_heap_bump = off + csize;
	}
	live_flip(off, true);
	sr_heap_inuse += csize;
	if (got)
		*got = csize;
	return off;
}

/* Puts a chunk back on its free list (accounting done by the caller). */
static void release(struct sr_daemon *d, uint64_t off, uint64_t size)
{
	unsigned c = size_class(size);
	uint64_t csize = 1ull << (c + SR_HEAP_MIN_SHIFT);
	struct sr_freelist *fl = &sr_free[c];

	if (csize >= 65536 &&
	    fallocate(d->arena_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, csize))
		sr_warn("punch hole at %#llx: %m", (unsigned long long)off);
	if (fl->cnt == fl->cap) {
		size_t ncap = fl->cap ? fl->cap * 2 : 64;
		uint64_t *n = realloc(fl->offs, ncap * sizeof(*n));

		if (!n)
			return; /* leak the chunk rather than fail teardown */
		fl->offs = n;
		fl->cap = ncap;
	}
	fl->offs[fl->cnt++] = off;
}

void sr_heap_free(struct sr_daemon *d, uint64_t off, uint64_t size)
{
	if (!off || !retire(off, size, "freed"))
		return;
	sr_heap_inuse -= 1ull << (size_class(size) + SR_HEAP_MIN_SHIFT);
	release(d, off, size);
}

/*
 * Destroyed QPs, CQs and SRQs: their table slots are cleared at once (no
 * new lookup finds them), but an executor in another process may have
 * looked one up just before and still be writing into it, however long it
 * was descheduled or stopped (a debugger, SIGSTOP).  So each chunk is
 * retired at a new epoch and reused only when no thread that entered a
 * data-path call before that epoch is still inside it (struct
 * sr_epoch_slot, layout.h).  They no longer count as objects meanwhile.
 *
 * The pairing: the daemon clears the table slot, advances the epoch
 * (store-release), fences and then reads the slots; a reader publishes its
 * epoch, fences and then looks up.  Either the daemon sees the reader's
 * slot, or the reader's lookup sees the cleared table slot; and a reader
 * that read the new epoch also sees the table slot cleared.
 */
struct sr_deferred {
	uint64_t off, size, epoch;
};

static struct sr_deferred *sr_defer;
static size_t sr_ndefer, sr_capdefer;

void sr_heap_free_later(struct sr_daemon *d, uint64_t off, uint64_t size)
{
	struct sr_arena_hdr *h = d->arena;
	uint64_t e;

	if (!off || !retire(off, size, "retired"))
		return;
	e = atomic_load_explicit(&h->epoch, memory_order_relaxed) + 1;
	atomic_store_explicit(&h->epoch, e, memory_order_release);
	sr_heap_inuse -= 1ull << (size_class(size) + SR_HEAP_MIN_SHIFT);
	if (sr_ndefer == sr_capdefer) {
		size_t ncap = sr_capdefer ? 2 * sr_capdefer : 64;
		struct sr_deferred *n = realloc(sr_defer, ncap * sizeof(*n));

		if (!n) {
			sr_warn("no memory to defer a chunk of %llu bytes: leaked",
				(unsigned long long)size);
			return; /* never reuse it early */
		}
		sr_defer = n;
		sr_capdefer = ncap;
	}
	sr_defer[sr_ndefer++] = (struct sr_deferred){off, size, e};
}

static bool pid_gone(pid_t pid)
{
	return kill(pid, 0) && errno == ESRCH;
}

uint64_t sr_heap_min_reader(struct sr_daemon *d)
{
	struct sr_arena_hdr *h = d->arena;
	struct sr_epoch_slot *tab = sr_arena_epochtab(d->arena);
	uint64_t min = UINT64_MAX;

	/* pairs with the reader's barrier between publishing and looking up */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->epoch_unslotted, memory_order_relaxed))
		min = 0;
	for (unsigned i = 0; min && i < SR_MAX_EPOCH_SLOTS; i++) {
		uint64_t e = atomic_load_explicit(&tab[i].epoch, memory_order_relaxed);
		uint32_t pid;

		if (!e || e >= min)
			continue;
		pid = atomic_load_explicit(&tab[i].pid, memory_order_relaxed);
		if (pid && pid_gone((pid_t)pid)) { /* died inside (SIGKILL) */
			sr_heap_forget_pid(d, pid);
			continue;
		}
		min = e;
	}
	/* what readers did before leaving (their release stores of 0) happens
	 * before the caller reuses a chunk */
	atomic_thread_fence(memory_order_acquire);
	return min;
}

void sr_heap_sweep_slots(struct sr_daemon *d)
{
	struct sr_epoch_slot *tab = sr_arena_epochtab(d->arena);
	uint32_t last = 0;
	bool last_gone = false;

	for (unsigned i = 0; i < SR_MAX_EPOCH_SLOTS; i++) {
		uint32_t pid = atomic_load_explicit(&tab[i].pid, memory_order_relaxed);

		if (!pid)
			continue;
		if (pid != last) { /* a process's slots are usually together */
			last = pid;
			last_gone = pid_gone((pid_t)pid);
		}
		if (last_gone)
			sr_heap_forget_pid(d, pid);
	}
}

void sr_heap_forget_pid(struct sr_daemon *d, uint32_t pid)
{
	struct sr_epoch_slot *tab = sr_arena_epochtab(d->arena);

	for (unsigned i = 0; i < SR_MAX_EPOCH_SLOTS; i++) {
		if (atomic_load_explicit(&tab[i].pid, memory_order_relaxed) != pid)
			continue;
		atomic_store_explicit(&tab[i].epoch, 0, memory_order_relaxed);
		atomic_store_explicit(&tab[i].pid, 0, memory_order_release);
	}
}

void sr_heap_reap(struct sr_daemon *d, bool all)
{
	uint64_t min;
	size_t k = 0;

	if (!sr_ndefer)
		return;
	min = all ? UINT64_MAX : sr_heap_min_reader(d);
	for (size_t i = 0; i < sr_ndefer; i++) {
		if (sr_defer[i].epoch <= min)
			release(d, sr_defer[i].off, sr_defer[i].size);
		else
			sr_defer[k++] = sr_defer[i];
	}
	sr_ndefer = k;
}

size_t sr_heap_deferred(uint64_t *bytes)
{
	uint64_t b = 0;

	for (size_t i = 0; i < sr_ndefer; i++)
		b += sr_defer[i].size;
	if (bytes)
		*bytes = b;
	return sr_ndefer;
}

uint64_t sr_heap_used(void)
{
	return sr_heap_inuse;
}

void sr_heap_fini(struct sr_daemon *d)
{
	sr_heap_reap(d, true);
	free(sr_defer);
	sr_defer = NULL;
	sr_ndefer = sr_capdefer = 0;
	for (unsigned c = 0; c < SR_HEAP_CLASSES; c++) {
		free(sr_free[c].offs);
		sr_free[c] = (struct sr_freelist){0};
	}
	free(sr_heap_live);
	sr_heap_live = NULL;
	munmap(d->arena, d->arena_size);
	close(d->arena_fd);
}
