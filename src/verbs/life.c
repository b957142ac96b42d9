/*
 * This process's life, held (include/softrdma/layout.h, struct
 * sr_life_slot): a thread of the library's own locks the robust mutex of
 * the slot the daemon gave the process and then only waits, for ever, so
 * that the kernel marks the mutex's owner dead exactly when the process
 * exits (or execs), before its parent can reap it.  From then on every
 * executor of the host treats the process's QPs as destroyed, as the
 * kernel's uverbs release makes them on hardware.
 *
 * A thread of its own, not the caller's: the thread that opens a device
 * may end long before the process does (the robust list is per thread).
 * It blocks every signal, so the application's signals go to its own
 * threads, and it only ever try-locks, so that a slot it cannot take never
 * stalls the verb.  It starts with the process's first QP (the only
 * objects a peer reaches through the slot), so that a program that only
 * queries the device stays single-threaded (`softrdma run` unshares a user
 * namespace after it has looked at the device, which a threaded process
 * cannot).  The mutex is let go before the arena it lies in is unmapped:
 * the kernel walks the robust list through the mutexes themselves, and a
 * walk that meets an unmapped one stops there, leaving the word held by a
 * dead thread.  After fork the child has no such thread: its first QP
 * starts one for its own slot.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "verbs/internal.h"

static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t life_cond = PTHREAD_COND_INITIALIZER;
struct life_req {
	pthread_mutex_t *mu; /* to lock, or NULL: let go of what lies in [lo, hi) */
	uintptr_t lo, hi;
	int ret;
	bool done;
};

/* What the thread holds (at most one slot per daemon: per arena mapped). */
#define LIFE_HELD 8
static pthread_mutex_t *life_held[LIFE_HELD];
static struct life_req *life_req; /* for the thread to do; NULL when taken */
static pid_t life_pid;		  /* the process whose thread runs (0: none) */
static pthread_once_t life_once = PTHREAD_ONCE_INIT;

static int life_do(struct life_req *r)
{
	int ret, i;

	if (!r->mu) {
		for (i = 0; i < LIFE_HELD; i++) {
			uintptr_t a = (uintptr_t)life_held[i];

			if (life_held[i] && a >= r->lo && a < r->hi) {
				pthread_mutex_unlock(life_held[i]);
				life_held[i] = NULL;
			}
		}
		return 0;
	}
	for (i = 0; i < LIFE_HELD && life_held[i]; i++)
		;
	if (i == LIFE_HELD)
		return ENOSPC;
	ret = pthread_mutex_trylock(r->mu);
	if (ret == EOWNERDEAD) /* a fresh slot never is; be safe */
		ret = pthread_mutex_consistent(r->mu);
	if (!ret)
		life_held[i] = r->mu;
	return ret;
}

static void *life_main(void *arg)
{
	pthread_mutex_lock(&life_lock);
	for (;;) {
		struct life_req *r;

		while (!life_req)
			pthread_cond_wait(&life_cond, &life_lock);
		r = life_req;
		life_req = NULL;
		r->ret = life_do(r);
		r->done = true;
		pthread_cond_broadcast(&life_cond);
	}
	return arg;
}

/* Called with life_lock held: hands r to the thread and waits for it. */
static int life_ask(struct life_req *r)
{
	while (life_req)
		pthread_cond_wait(&life_cond, &life_lock);
	life_req = r;
	pthread_cond_broadcast(&life_cond);
	while (!r->done)
		pthread_cond_wait(&life_cond, &life_lock);
	return r->ret;
}

static void life_fork_child(void)
{
	pthread_mutex_init(&life_lock, NULL);
	pthread_cond_init(&life_cond, NULL);
	life_req = NULL;
	life_pid = 0;
	memset(life_held, 0, sizeof(life_held)); /* the parent's thread holds them */
}

static void life_register(void)
{
	pthread_atfork(NULL, NULL, life_fork_child);
}

/* Called with life_lock held. */
static int life_start(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	ret = pthread_create(&t, &attr, life_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		return ret;
	pthread_setname_np(t, "softrdma-life");
	life_pid = getpid();
	return 0;
}

void sr_life_hold(void *arena, uint32_t life)
{
	struct life_req r = {0};
	int ret = 0;

	if (!life || life > SR_MAX_LIVES)
		return;
	r.mu = &sr_arena_lifetab(arena)[life - 1].mu;
	pthread_once(&life_once, life_register);
	pthread_mutex_lock(&life_lock);
	if (life_pid != getpid())
		ret = life_start();
	for (int i = 0; !ret && i < LIFE_HELD; i++)
		if (life_held[i] == r.mu)
			goto out; /* held already */
	if (!ret)
		ret = life_ask(&r);
out:
	pthread_mutex_unlock(&life_lock);
	if (ret)
		sr_warn("cannot hold this process's life (slot %u: %s): a peer may reach its QPs "
			"after it exits, until the daemon reclaims them",
			life, strerror(ret));
}

void sr_life_let_go(void *arena, size_t size)
{
	struct life_req r = {.lo = (uintptr_t)arena, .hi = (uintptr_t)arena + size};

	pthread_mutex_lock(&life_lock);
	if (life_pid == getpid())
		life_ask(&r);
	pthread_mutex_unlock(&life_lock);
}
