/*
 * An object per thread, on the heap, found through a pthread key and freed
 * when its thread exits.  Not thread-local storage: libibverbs' static TLS
 * must stay small, or dlopen of it fails (UCX loads it so;
 * docs/architecture.md, "ACKs that go with the next request").
 */
#ifndef SR_CORE_THREAD_OBJ_H
#define SR_CORE_THREAD_OBJ_H

#include <pthread.h>
#include <stdlib.h>

struct sr_thread_obj {
	pthread_mutex_t mu;
	int state; /* 0: no key yet, 1: key made, -1: none can be */
	pthread_key_t key;
	size_t size;	      /* zeroed at first use */
	void (*dtor)(void *); /* at thread exit (NULL: free) */
};
#define SR_THREAD_OBJ(sz, d)                                                                       \
	{                                                                                          \
		PTHREAD_MUTEX_INITIALIZER, 0, 0, (sz), (d)                                         \
	}

/* This thread's object (made at its first call), or NULL without memory. */
static inline void *sr_thread_obj(struct sr_thread_obj *o)
{
	void *p;

	if (__atomic_load_n(&o->state, __ATOMIC_ACQUIRE) == 0) {
		pthread_mutex_lock(&o->mu);
		if (o->state == 0)
			__atomic_store_n(&o->state,
					 pthread_key_create(&o->key, o->dtor ? o->dtor : free) ? -1
											       : 1,
					 __ATOMIC_RELEASE);
		pthread_mutex_unlock(&o->mu);
	}
	if (__atomic_load_n(&o->state, __ATOMIC_ACQUIRE) < 0)
		return NULL;
	p = pthread_getspecific(o->key);
	if (!p) {
		p = calloc(1, o->size);
		if (p && pthread_setspecific(o->key, p)) {
			free(p);
			p = NULL;
		}
	}
	return p;
}

/* This thread's object if it has made one, else NULL. */
static inline void *sr_thread_obj_peek(struct sr_thread_obj *o)
{
	return __atomic_load_n(&o->state, __ATOMIC_ACQUIRE) > 0 ? pthread_getspecific(o->key)
								: NULL;
}

#endif
