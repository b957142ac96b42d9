/*
 * Processes' lives (include/softrdma/layout.h, struct sr_life_slot): the
 * daemon gives each process it serves a slot of the arena's life table,
 * the same one to every connection of that pid, with a robust mutex the
 * process's library locks from a thread of its own (src/verbs/life.c) and
 * never unlocks.  Executors read its futex word; this file only hands the
 * slots out and takes them back.
 *
 * A slot is free again once no connection of its process is left and its
 * word says the holder died (FUTEX_OWNER_DIED) or nobody holds it.  A
 * process that closed every connection but lives on keeps its slot (its
 * thread still holds the mutex, and the mutex is on that thread's robust
 * list, which runs through the mutex itself): it gets the same slot back
 * if it connects again, and the slot is swept when the table has no free
 * one left and its holder has died by then.
 *
 * A freed slot keeps its word (dead) until every data-path reader that
 * may still hold one of its QPs has left (the reclamation epochs of
 * heap.c, as a QP's own chunk): an executor that found a QP just before
 * the daemon destroyed it must still read "dead", not the next process's
 * "alive", or it would go on to the destroyed QP's memory keys and
 * complete with a remote access error where the peer's answer is none.
 */
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <string.h>

#include "core/log.h"
#include "daemon/daemon.h"

/* connections of the slot's process, and the epoch a freed slot's last
 * QP readers may still be in (daemon thread only) */
static uint16_t life_users[SR_MAX_LIVES];
static uint64_t life_retired[SR_MAX_LIVES];

static int life_word(const struct sr_life_slot *l)
{
	return __atomic_load_n(&l->mu.__data.__lock, __ATOMIC_ACQUIRE);
}

/* The holder has died, or nobody holds it. */
static bool life_over(const struct sr_life_slot *l)
{
	int w = life_word(l);

	return !w || (w & FUTEX_OWNER_DIED);
}

static int life_init(struct sr_life_slot *l, pid_t pid)
{
	pthread_mutexattr_t a;
	int ret;

	memset(l, 0, sizeof(*l));
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	/* each context the process opens locks it again (life.c) */
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	ret = pthread_mutex_init(&l->mu, &a);
	pthread_mutexattr_destroy(&a);
	if (!ret)
		l->pid = (uint32_t)pid;
	return ret;
}

uint32_t sr_life_attach(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_life_slot *tab = sr_arena_lifetab(d->arena);
	uint32_t i, free_i = SR_MAX_LIVES, stale_i = SR_MAX_LIVES;
	uint64_t readers = UINT64_MAX;
	bool scanned = false;

	for (struct sr_client *o = d->clients; o; o = o->next)
		if (o != c && o->life && o->pid == c->pid) {
			life_users[o->life - 1]++;
			return c->life = o->life;
		}
	for (i = 0; i < SR_MAX_LIVES; i++) {
		if (life_users[i])
			continue;
		/* its own slot, kept since its last connection closed */
		if (tab[i].pid == (uint32_t)c->pid && !(life_word(&tab[i]) & FUTEX_OWNER_DIED))
			break;
		if (tab[i].pid ? stale_i < SR_MAX_LIVES || !life_over(&tab[i])
			       : free_i < SR_MAX_LIVES)
			continue;
		if (life_retired[i] && !scanned) {
			readers = sr_heap_min_reader(d);
			scanned = true;
		}
		if (life_retired[i] > readers)
			continue; /* a reader may still see its last QPs */
		if (tab[i].pid)
			stale_i = i;
		else
			free_i = i;
	}
	if (i == SR_MAX_LIVES) {
		i = free_i < SR_MAX_LIVES ? free_i : stale_i;
		if (i == SR_MAX_LIVES || life_init(&tab[i], c->pid)) {
			sr_warn("pid %d: no slot for its life (%u processes hold one): a peer may "
				"reach its QPs until the daemon reclaims them after it exits",
				(int)c->pid, SR_MAX_LIVES);
			return c->life = 0;
		}
	}
	life_users[i]++;
	return c->life = i + 1;
}

void sr_life_detach(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_life_slot *l;
	uint32_t i = c->life;

	if (!i--)
		return;
	c->life = 0;
	if (--life_users[i])
		return;
	l = &sr_arena_lifetab(d->arena)[i];
	/* its QPs are destroyed: readers in the epoch now may still hold one */
	life_retired[i] =
	    atomic_load_explicit(&((struct sr_arena_hdr *)d->arena)->epoch, memory_order_relaxed);
	if (life_over(l))
		l->pid = 0; /* free, the word left as it is (dead) until reused */
}
