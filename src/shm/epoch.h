/*
 * Data-path reader sections for the daemon's epoch-based reclamation
 * (struct sr_epoch_slot in layout.h; the daemon's side is heap.c).
 *
 * Every library call that looks up another process's objects (a peer QP
 * by number, then its RQ, CQ or SRQ), or one of its own that another
 * thread may be destroying, runs between sr_epoch_enter() and
 * sr_epoch_exit(), so a chunk it may still be using is never handed to a
 * new object, however long the thread is descheduled or stopped in between
 * (a debugger, SIGSTOP).  Sections nest (an extended-CQ poll spans the
 * application's code between start_poll and end_poll); only the outermost
 * publishes.
 *
 * The cost is a TLS check and two stores to the thread's own cache line,
 * plus one full barrier between publishing and the first lookup.
 * sr_epoch_enter_locking() is for callers whose very next step is a lock
 * acquisition (a locked read-modify-write, itself a full barrier on x86):
 * there the barrier is the lock's, as Linux's smp_mb__after_atomic() is a
 * no-op on x86; other architectures get an explicit fence.
 *
 * A thread keeps its slot for its life.  When the slots for threads are
 * all taken, a thread shares its process's overflow slot (one of the last
 * SR_EPOCH_OVERFLOW_SLOTS), published while any thread of the process is
 * inside; when even those are taken, a host-wide counter that pins every
 * retired chunk while it is non-zero.
 */
#ifndef SR_SHM_EPOCH_H
#define SR_SHM_EPOCH_H

#include <stdatomic.h>
#include <stdbool.h>

#include <softrdma/layout.h>

enum sr_epoch_mode {
	SR_EPOCH_OWN,	   /* the thread's own slot */
	SR_EPOCH_SHARED,   /* the process's overflow slot */
	SR_EPOCH_UNSLOTTED /* counted in epoch_unslotted */
};

struct sr_epoch_tls {
	void *arena;		    /* the mapping `slot` is in; NULL: no own slot */
	struct sr_epoch_slot *slot; /* this thread's own */
	unsigned long gen;	    /* sr_epoch_gen when it was claimed */
	unsigned depth;		    /* sections entered and not left */
	enum sr_epoch_mode mode;    /* of the outermost section */
	void *mode_arena;	    /* the arena that section is in */
};

extern __thread struct sr_epoch_tls sr_epoch_tls __attribute__((tls_model("initial-exec")));
/* Advanced by every last close of an arena mapping: slots claimed before
 * may have been given back with it. */
extern _Atomic unsigned long sr_epoch_gen;

/* Outermost entry when the thread has no valid own slot in this mapping. */
void sr_epoch_enter_slow(void *arena);
/* Outermost exit of a section on the overflow slot or the counter. */
void sr_epoch_exit_slow(void);

static inline void sr_epoch_publish(void *arena, bool full_barrier)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;
	const struct sr_arena_hdr *h = arena;
	uint64_t e;

	if (t->depth++)
		return;
	if (__builtin_expect(t->arena != arena ||
				 t->gen !=
				     atomic_load_explicit(&sr_epoch_gen, memory_order_relaxed),
			     0)) {
		sr_epoch_enter_slow(arena); /* always with a full barrier */
		return;
	}
	/* acquire: a reader that sees the new epoch sees the table slots the
	 * daemon cleared before advancing it */
	e = atomic_load_explicit(&h->epoch, memory_order_acquire);
#if defined(__x86_64__) || defined(__i386__)
	if (full_barrier) {
		atomic_exchange_explicit(&t->slot->epoch, e, memory_order_seq_cst);
	} else {
		atomic_store_explicit(&t->slot->epoch, e, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst); /* stays before the lock */
	}
#else
	(void)full_barrier;
	atomic_store_explicit(&t->slot->epoch, e, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* Enters a section; the caller looks up objects right after. */
static inline void sr_epoch_enter(void *arena)
{
	sr_epoch_publish(arena, true);
}

/* Enters a section whose next step takes a process-shared lock
 * (sr_shm_lock: a locked compare-exchange) before any lookup. */
static inline void sr_epoch_enter_locking(void *arena)
{
	sr_epoch_publish(arena, false);
}

/* The arena mapping is about to go (its last context closes): the slots
 * claimed in it are given back.  No thread may be inside a call on it. */
void sr_epoch_arena_closing(void *arena);

static inline void sr_epoch_exit(void)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;

	if (--t->depth)
		return;
	if (__builtin_expect(t->mode != SR_EPOCH_OWN, 0)) {
		sr_epoch_exit_slow();
		return;
	}
	/* release: every access of the section happens before the daemon,
	 * reading 0 here, reuses a chunk */
	atomic_store_explicit(&t->slot->epoch, 0, memory_order_release);
}

#endif
