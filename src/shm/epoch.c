/*
 * Epoch slots (epoch.h): claiming one per thread and arena mapping, giving
 * it back when the thread exits or the mapping is closed, forgetting the
 * parent's in a fork child, and the fallback when all SR_MAX_EPOCH_SLOTS
 * are taken (a shared counter, which pins every retired chunk while it is
 * non-zero: correct, only slower to reclaim).
 *
 * The process keeps a list of the slots its threads claimed, under a
 * mutex, so that ibv_close_device can give back the ones in the mapping it
 * unmaps, and a thread exit never writes into a mapping that is gone.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/shmlock.h"
#include "shm/epoch.h"

__thread struct sr_epoch_tls sr_epoch_tls __attribute__((tls_model("initial-exec")));
_Atomic unsigned long sr_epoch_gen;

struct claimed {
	struct sr_epoch_slot *slot;
	void *arena;
	uint32_t tid; /* the thread it is for (a slot given back at a close
		       * may be claimed again, by another thread) */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct claimed *list;
static size_t nlist, caplist;
static pthread_key_t slot_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void give_back(struct sr_epoch_slot *s)
{
	atomic_store_explicit(&s->epoch, 0, memory_order_relaxed);
	atomic_store_explicit(&s->pid, 0, memory_order_release);
}

/* Gives back and forgets entry i; caller holds mu. */
static void drop(size_t i)
{
	give_back(list[i].slot);
	list[i] = list[--nlist];
}

/* Thread exit (the key's destructor): its slot, if still listed. */
static void thread_gone(void *slot)
{
	uint32_t me = sr_thread_id();

	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < nlist; i++)
		if (list[i].slot == slot && list[i].tid == me) {
			drop(i);
			break;
		}
	pthread_mutex_unlock(&mu);
}

/* In a fork child the slots are the parent's threads': take new ones. */
static void fork_child(void)
{
	sr_epoch_tls = (struct sr_epoch_tls){0};
	pthread_mutex_init(&mu, NULL);
	nlist = 0;
}

static void init_once(void)
{
	pthread_key_create(&slot_key, thread_gone);
	pthread_atfork(NULL, NULL, fork_child);
}

/* Claims a free slot and lists it; caller holds mu. */
static struct sr_epoch_slot *claim(void *arena)
{
	struct sr_epoch_slot *tab = sr_arena_epochtab(arena);
	uint32_t me = (uint32_t)getpid(), tid = sr_thread_id();

	if (nlist == caplist) {
		size_t ncap = caplist ? 2 * caplist : 16;
		struct claimed *n = realloc(list, ncap * sizeof(*n));

		if (!n)
			return NULL;
		list = n;
		caplist = ncap;
	}
	for (unsigned i = 0; i < SR_MAX_EPOCH_SLOTS; i++) {
		uint32_t free_ = 0;

		if (atomic_load_explicit(&tab[i].pid, memory_order_relaxed))
			continue;
		if (atomic_compare_exchange_strong_explicit(
			&tab[i].pid, &free_, me, memory_order_acquire, memory_order_relaxed)) {
			tab[i].tid = tid;
			list[nlist++] = (struct claimed){&tab[i], arena, tid};
			return &tab[i];
		}
	}
	return NULL;
}

void sr_epoch_enter_slow(void *arena)
{
	struct sr_epoch_tls *t = &sr_epoch_tls;
	struct sr_arena_hdr *h = arena;
	struct sr_epoch_slot *s = NULL;
	uint32_t me = sr_thread_id();

	pthread_once(&once, init_once);
	pthread_mutex_lock(&mu);
	/* the slot we had, if it is still ours: a close of its mapping, or
	 * of another context, may have given it back or advanced the gen */
	for (size_t i = 0; t->slot && i < nlist; i++)
		if (list[i].slot == t->slot && list[i].tid == me) {
			if (list[i].arena == arena)
				s = t->slot;
			else
				drop(i); /* another daemon's arena: move the slot */
			break;
		}
	if (!s)
		s = claim(arena);
	t->gen = atomic_load_explicit(&sr_epoch_gen, memory_order_relaxed);
	pthread_mutex_unlock(&mu);
	if (!s) {
		/* every slot taken: count ourselves in; the RMW is the barrier */
		t->slot = NULL;
		t->arena = NULL;
		t->unslotted = true;
		atomic_fetch_add_explicit(&h->epoch_unslotted, 1, memory_order_seq_cst);
		return;
	}
	t->slot = s;
	t->arena = arena;
	t->unslotted = false;
	pthread_setspecific(slot_key, s);
	atomic_store_explicit(&s->epoch, atomic_load_explicit(&h->epoch, memory_order_acquire),
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

void sr_epoch_exit_unslotted(void *arena)
{
	struct sr_arena_hdr *h = arena;

	sr_epoch_tls.unslotted = false;
	atomic_fetch_sub_explicit(&h->epoch_unslotted, 1, memory_order_release);
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
