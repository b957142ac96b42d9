/*
 * Data-path reader sections for the daemon's epoch-based reclamation
 * (struct sr_epoch_slot in layout.h; the daemon's side is heap.c).
 *
 * Every library call that looks up another process's objects (a peer QP
 * by number, then its RQ, CQ or SRQ) runs between sr_epoch_enter() and
 * sr_epoch_exit(), so a chunk it may still be using is never handed to a
 * new object, however long the thread is descheduled or stopped in between
 * (a debugger, SIGSTOP).  Sections do not nest (none of the callers runs
 * another's code), which keeps the fast path at a dozen instructions.
 *
 * The cost is a TLS check and two stores to the thread's own cache line,
 * plus one full barrier between publishing and the first lookup.
 * sr_epoch_enter_locking() is for callers whose very next step is a lock
 * acquisition (a locked read-modify-write, itself a full barrier on x86):
 * there the barrier is the lock's, as Linux's smp_mb__after_atomic() is a
 * no-op on x86; other architectures get an explicit fence.
 */
#ifndef SR_SHM_EPOCH_H
#define SR_SHM_EPOCH_H

#include <stdatomic.h>
#include <stdbool.h>

#include <softrdma/layout.h>

struct sr_epoch_tls {
	void *arena;		    /* the mapping `slot` is in; NULL: no slot */
	struct sr_epoch_slot *slot; /* this thread's */
	unsigned long gen;	    /* sr_epoch_gen when it was claimed */
	bool unslotted;		    /* inside, counted in epoch_unslotted */
};

extern __thread struct sr_epoch_tls sr_epoch_tls __attribute__((tls_model("initial-exec")));
/* Advanced by every ibv_close_device: slots claimed before may have been
 * given back with the arena mapping they were in. */
extern _Atomic unsigned long sr_epoch_gen;

/* Entry when the thread has no valid slot in this arena mapping yet. */
void sr_epoch_enter_slow(void *arena);
/* Exit of an unslotted section. */
void sr_epoch_exit_unslotted(void *arena);

static inline void sr_epoch_publish(void *arena, bool full_barrier)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;
	const struct sr_arena_hdr *h = arena;
	uint64_t e;

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
	if (full_barrier)
		atomic_exchange_explicit(&t->slot->epoch, e, memory_order_seq_cst);
	else {
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

/* A context's arena mapping is about to go: the slots claimed in it are
 * given back (no thread may be inside a call on that context now). */
void sr_epoch_arena_closing(void *arena);

static inline void sr_epoch_exit(void *arena)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;

	if (__builtin_expect(t->unslotted, 0)) {
		sr_epoch_exit_unslotted(arena);
		return;
	}
	/* release: every access of the section happens before the daemon,
	 * reading 0 here, reuses a chunk */
	atomic_store_explicit(&t->slot->epoch, 0, memory_order_release);
}

#endif
