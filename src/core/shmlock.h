/*
 * Locks for objects in the arena, shared by every process of the host.
 *
 * A lock is one word holding its holder's thread id (0 = free).  Taking a
 * free lock is one compare-and-swap, releasing it one store-release; no
 * system call either way.  This replaced robust pthread mutexes, whose
 * robust-list bookkeeping cost ~60 instructions per lock/unlock pair on
 * the data path.  A contended taker spins, yields after a while, and every
 * few milliseconds checks that the holder still exists: a process killed
 * while holding a lock (SIGKILL mid-post) leaves the word set, and the lock
 * is then taken over.  The protected data is safe to take over: rings
 * publish their indices only after the entries are written.
 *
 * Pairing: the acquire CAS in sr_shm_lock pairs with the store-release in
 * sr_shm_unlock (everything written under the lock is visible to the next
 * holder).
 */
#ifndef SR_CORE_SHMLOCK_H
#define SR_CORE_SHMLOCK_H

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

struct sr_lock {
	_Atomic uint32_t holder; /* thread id of the holder, 0 = free */
};

uint32_t sr_thread_id(void); /* cached gettid(), reset in a fork child */
void sr_shm_lock_slow(struct sr_lock *l, uint32_t me);
/* This process's longest wait for a held lock since the last call (0: none
 * that yielded), how long ago it ended (ns; -1: never) and the thread that
 * held it. */
void sr_shm_lock_worst(uint64_t *ns, int64_t *ago, uint32_t *holder);

static inline int sr_shm_lock_init(struct sr_lock *l)
{
	atomic_init(&l->holder, 0);
	return 0;
}

static inline void sr_shm_lock(struct sr_lock *l)
{
	uint32_t me = sr_thread_id(), free_ = 0;

	if (__builtin_expect(atomic_compare_exchange_strong_explicit(&l->holder, &free_, me,
								     memory_order_acquire,
								     memory_order_relaxed),
			     1))
		return;
	sr_shm_lock_slow(l, me);
}

/* 0 on success, EBUSY if held. */
static inline int sr_shm_trylock(struct sr_lock *l)
{
	uint32_t free_ = 0;

	return atomic_compare_exchange_strong_explicit(&l->holder, &free_, sr_thread_id(),
						       memory_order_acquire, memory_order_relaxed)
		   ? 0
		   : EBUSY;
}

/* For who must never wait (the daemon): 0 if taken, free or from a holder
 * that died, EBUSY while a live thread holds it. */
int sr_shm_lock_nowait(struct sr_lock *l);

static inline void sr_shm_unlock(struct sr_lock *l)
{
	atomic_store_explicit(&l->holder, 0, memory_order_release);
}

#endif
