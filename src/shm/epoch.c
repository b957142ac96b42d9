/*
 * Epoch slots (epoch.h): claiming one per thread and arena mapping, giving
 * it back when the thread exits or the mapping is closed, forgetting the
 * parent's in a fork child, and the two fallbacks when slots run out (the
 * process's shared overflow slot, then the host-wide counter).
 *
 * The process keeps a list of the slots it claimed, under a mutex, so that
 * closing a mapping can give back the ones in it, and a thread exit never
 * writes into a mapping that is gone.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/env.h"
#include "core/shmlock.h"
#include "shm/epoch.h"
#include "shm/qp_err.h" /* sr_now_ns */

__thread struct sr_epoch_tls sr_epoch_tls __attribute__((tls_model("initial-exec")));
_Atomic unsigned long sr_epoch_gen;

struct claimed {
	struct sr_epoch_slot *slot;
	void *arena;
	uint32_t tid; /* the thread it is for, 0: the process's overflow slot (a
		       * slot given back at a close may be claimed again, by
		       * another thread) */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct claimed *list;
static size_t nlist, caplist;
static pthread_key_t slot_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* the overflow slot: its mapping, and how many threads are inside on it */
static struct sr_epoch_slot *shared_slot;
static void *shared_arena;
static unsigned shared_inside;
/* How many slots threads may take for their own (own_slot_limit), and until
 * when not to look for one again after finding none free: a thread on the
 * overflow slot enters the slow path every time, and a scan of thousands of
 * slots each time made it slow (the scan is retried every 10 ms, so a slot
 * given back is still found). */
static unsigned own_slots;
static uint64_t own_full_until_ns;

/* Only if it is still ours: the daemon frees a process's slots when its
 * last connection closes, and another process may have claimed one since. */
static void give_back(struct sr_epoch_slot *s)
{
	uint32_t me = (uint32_t)getpid();

	if (atomic_load_explicit(&s->pid, memory_order_relaxed) != me)
		return;
	atomic_store_explicit(&s->epoch, 0, memory_order_release);
	atomic_compare_exchange_strong_explicit(&s->pid, &me, 0, memory_order_release,
						memory_order_relaxed);
}

/* Gives back and forgets entry i; caller holds mu. */
static void drop(size_t i)
{
	if (list[i].slot == shared_slot) {
		shared_slot = NULL;
		shared_arena = NULL;
	}
	give_back(list[i].slot);
	list[i] = list[--nlist];
}

static void exit_shared_locked(void)
{
	if (!--shared_inside && shared_slot)
		atomic_store_explicit(&shared_slot->epoch, 0, memory_order_release);
}

/* Thread exit, also by cancellation inside a section (the key's
 * destructor, with the thread's TLS still readable). */
static void thread_gone(void *unused)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;
	uint32_t me = sr_thread_id();

	(void)unused;
	pthread_mutex_lock(&mu);
	if (t->depth && t->mode == SR_EPOCH_SHARED)
		exit_shared_locked();
	if (t->depth && t->mode == SR_EPOCH_UNSLOTTED)
		atomic_fetch_sub_explicit(&((struct sr_arena_hdr *)t->mode_arena)->epoch_unslotted,
					  1, memory_order_release);
	for (size_t i = 0; i < nlist; i++)
		if (list[i].slot == t->slot && list[i].tid == me) {
			drop(i);
			break;
		}
	pthread_mutex_unlock(&mu);
	*t = (struct sr_epoch_tls){0};
}

/* In a fork child the slots are the parent's: take new ones. */
static void fork_child(void)
{
	sr_epoch_tls = (struct sr_epoch_tls){0};
	pthread_mutex_init(&mu, NULL);
	nlist = 0;
	shared_slot = NULL;
	shared_arena = NULL;
	shared_inside = 0;
	own_full_until_ns = 0;
}

static unsigned own_slot_limit(void);

static void init_once(void)
{
	own_slots = own_slot_limit();
	pthread_key_create(&slot_key, thread_gone);
	pthread_atfork(NULL, NULL, fork_child);
}

/* Claims a free slot in [from, to) and lists it for `tid`; caller holds mu. */
static struct sr_epoch_slot *claim(void *arena, unsigned from, unsigned to, uint32_t tid)
{
	struct sr_epoch_slot *tab = sr_arena_epochtab(arena);
	uint32_t me = (uint32_t)getpid();

	if (nlist == caplist) {
		size_t ncap = caplist ? 2 * caplist : 16;
		struct claimed *n = realloc(list, ncap * sizeof(*n));

		if (!n)
			return NULL;
		list = n;
		caplist = ncap;
	}
	for (unsigned i = from; i < to; i++) {
		uint32_t free_ = 0;

		if (atomic_load_explicit(&tab[i].pid, memory_order_relaxed))
			continue;
		if (atomic_compare_exchange_strong_explicit(
			&tab[i].pid, &free_, me, memory_order_acquire, memory_order_relaxed)) {
			atomic_store_explicit(&tab[i].tid, sr_thread_id(), memory_order_relaxed);
			list[nlist++] = (struct claimed){&tab[i], arena, tid};
			return &tab[i];
		}
	}
	return NULL;
}

/* Publishes the current epoch in s, then the full barrier. */
static void publish(void *arena, struct sr_epoch_slot *s)
{
	struct sr_arena_hdr *h = arena;

	atomic_store_explicit(&s->epoch, atomic_load_explicit(&h->epoch, memory_order_acquire),
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

/* How many slots threads may take for their own: all but the overflow
 * ones, or fewer with SOFTRDMA_EPOCH_OWN_SLOTS (fault injection: the tests
 * run the shared-slot path with it). */
static unsigned own_slot_limit(void)
{
	const unsigned all = SR_MAX_EPOCH_SLOTS - SR_EPOCH_OVERFLOW_SLOTS;
	static int n = -1;

	return (unsigned)sr_env_num("SOFTRDMA_EPOCH_OWN_SLOTS", &n, (int)all, (int)all);
}

void sr_epoch_enter_slow(void *arena)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;
	struct sr_arena_hdr *h = arena;
	struct sr_epoch_slot *s = NULL;
	uint32_t me = sr_thread_id();

	pthread_once(&once, init_once);
	pthread_setspecific(slot_key, (void *)1); /* the destructor runs */
	pthread_mutex_lock(&mu);
	/* the slot we had, if it is still ours: a close of its mapping may
	 * have given it back and advanced the gen */
	for (size_t i = 0; t->slot && i < nlist; i++)
		if (list[i].slot == t->slot && list[i].tid == me) {
			if (list[i].arena == arena)
				s = t->slot;
			else
				drop(i); /* another daemon's arena: move the slot */
			break;
		}
	if (!s && sr_now_ns() >= own_full_until_ns) {
		s = claim(arena, 0, own_slots, me);
		if (!s)
			own_full_until_ns = sr_now_ns() + 10000000;
	}
	t->gen = atomic_load_explicit(&sr_epoch_gen, memory_order_relaxed);
	t->slot = s;
	t->arena = s ? arena : NULL;
	t->mode_arena = arena;
	if (s) {
		t->mode = SR_EPOCH_OWN;
		pthread_mutex_unlock(&mu);
		publish(arena, s);
		return;
	}
	/* no slot of our own: the process's overflow slot */
	if (shared_slot && shared_arena != arena && !shared_inside)
		for (size_t i = 0; i < nlist; i++)
			if (list[i].slot == shared_slot) {
				drop(i);
				break;
			}
	if (!shared_slot) {
		shared_slot = claim(arena, SR_MAX_EPOCH_SLOTS - SR_EPOCH_OVERFLOW_SLOTS,
				    SR_MAX_EPOCH_SLOTS, 0);
		shared_arena = shared_slot ? arena : NULL;
	}
	if (shared_slot && shared_arena == arena) {
		t->mode = SR_EPOCH_SHARED;
		/* the first one in publishes; later ones are covered by its
		 * older epoch, and each still fences before its lookups */
		if (!shared_inside++)
			publish(arena, shared_slot);
		else
			atomic_thread_fence(memory_order_seq_cst);
		pthread_mutex_unlock(&mu);
		return;
	}
	pthread_mutex_unlock(&mu);
	/* every slot taken: count ourselves in */
	t->mode = SR_EPOCH_UNSLOTTED;
	atomic_fetch_add_explicit(&h->epoch_unslotted, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

void sr_epoch_exit_slow(void)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;

	if (t->mode == SR_EPOCH_SHARED) {
		pthread_mutex_lock(&mu);
		exit_shared_locked();
		pthread_mutex_unlock(&mu);
	} else {
		atomic_fetch_sub_explicit(&((struct sr_arena_hdr *)t->mode_arena)->epoch_unslotted,
					  1, memory_order_release);
	}
	t->mode = SR_EPOCH_OWN;
}

void sr_epoch_arena_closing(void *arena)
{
	pthread_mutex_lock(&mu);
	atomic_fetch_add_explicit(&sr_epoch_gen, 1, memory_order_relaxed);
	for (size_t i = 0; i < nlist;)
		if (list[i].arena == arena)
			drop(i);
		else
			i++;
	pthread_mutex_unlock(&mu);
}
