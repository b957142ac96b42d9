/*
 * Process-shared, robust mutexes for objects in the arena.  Uncontended
 * lock/unlock is a single atomic each (no system call).  If a process dies
 * holding a lock, the next locker gets EOWNERDEAD: the object may be
 * half-updated by the dead process, but every such object is either owned by
 * the dead process (and is being torn down) or a ring whose indices are only
 * published after the body is written, so marking it consistent is safe.
 */
#ifndef SR_CORE_SHMLOCK_H
#define SR_CORE_SHMLOCK_H

#include <errno.h>
#include <pthread.h>

static inline int sr_shm_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int ret;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	ret = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return -ret;
}

static inline void sr_shm_lock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m) == EOWNERDEAD)
		pthread_mutex_consistent(m);
}

static inline int sr_shm_trylock(pthread_mutex_t *m)
{
	int ret = pthread_mutex_trylock(m);

	if (ret == EOWNERDEAD) {
		pthread_mutex_consistent(m);
		ret = 0;
	}
	return ret;
}

static inline void sr_shm_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

#endif
