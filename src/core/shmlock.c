/*
 * Slow paths of the arena locks (see shmlock.h): thread ids, and waiting
 * for a held lock, taking it over if its holder has died.
 */
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/shmlock.h"

/* initial-exec: no __tls_get_addr call on the data path */
static __thread uint32_t sr_tid __attribute__((tls_model("initial-exec")));

static void forget_tid(void)
{
	sr_tid = 0; /* runs in the fork child's only thread */
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_tid);
}

uint32_t sr_thread_id(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (__builtin_expect(sr_tid == 0, 0)) {
		pthread_once(&once, register_atfork);
		sr_tid = (uint32_t)syscall(SYS_gettid);
	}
	return sr_tid;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* A thread id that no longer exists: its process died holding the lock. */
static int holder_dead(uint32_t tid)
{
	return kill((pid_t)tid, 0) != 0 && errno == ESRCH;
}

/* this process's longest wait for a lock since the last look
 * (sr_shm_lock_worst), and the thread that held it */
static _Atomic uint64_t worst_ns, worst_at;
static _Atomic uint32_t worst_holder;

static void note_wait(uint64_t since, uint32_t holder)
{
	uint64_t t = now_ns(), d = t - since;

	if (d <= atomic_load_explicit(&worst_ns, memory_order_relaxed))
		return;
	atomic_store_explicit(&worst_ns, d, memory_order_relaxed);
	atomic_store_explicit(&worst_at, t, memory_order_relaxed);
	atomic_store_explicit(&worst_holder, holder, memory_order_relaxed);
}

void sr_shm_lock_worst(uint64_t *ns, int64_t *ago, uint32_t *holder)
{
	uint64_t at = atomic_load_explicit(&worst_at, memory_order_relaxed);

	*ns = atomic_exchange_explicit(&worst_ns, 0, memory_order_relaxed);
	*ago = at ? (int64_t)(now_ns() - at) : -1;
	*holder = atomic_load_explicit(&worst_holder, memory_order_relaxed);
}

void sr_shm_lock_slow(struct sr_lock *l, uint32_t me)
{
	uint64_t next_check = 0, since = 0;
	uint32_t last = 0;

	for (unsigned spins = 0;; spins++) {
		uint32_t h = atomic_load_explicit(&l->holder, memory_order_relaxed);

		if (h == 0) {
			if (atomic_compare_exchange_weak_explicit(
				&l->holder, &h, me, memory_order_acquire, memory_order_relaxed)) {
				if (since)
					note_wait(since, last);
				return;
			}
			continue;
		}
		last = h;
		if (spins < 256) {
			__builtin_ia32_pause();
			continue;
		}
		/* two cores: a preempted holder needs the CPU we would spin on */
		sched_yield();
		if ((spins & 63) == 0) {
			uint64_t t = now_ns();

			if (!next_check) {
				since = t;
				next_check = t + 5000000;
			} else if (t >= next_check) {
				next_check = t + 5000000;
				if (holder_dead(h) && atomic_compare_exchange_strong_explicit(
							  &l->holder, &h, me, memory_order_acquire,
							  memory_order_relaxed))
					return;
			}
		}
	}
}

int sr_shm_lock_nowait(struct sr_lock *l)
{
	uint32_t h;

	if (!sr_shm_trylock(l))
		return 0;
	h = atomic_load_explicit(&l->holder, memory_order_relaxed);
	if (h && holder_dead(h) &&
	    atomic_compare_exchange_strong_explicit(&l->holder, &h, sr_thread_id(),
						    memory_order_acquire, memory_order_relaxed))
		return 0;
	return EBUSY;
}
