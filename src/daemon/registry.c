/*
 * The registry of softrdmad's resources: every object a client holds, on
 * its list newest first and found by handle, QPN, SRQN or key (the tables
 * of struct sr_daemon); the host-wide numbers and the arena's key table;
 * and an object's end, through each kind's destroy (obj_*.c): one at a
 * destroy request, or all of a client's when it goes.  sr_client_teardown()
 * destroys a client's objects newest first, so dependents always go before
 * what they depend on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/log.h"
#include "core/seqlock.h"
#include "core/shmlock.h"
#include "daemon/objects.h"

#define SR_HANDLE_LIMIT (1u << 18)

int sr_objects_init(struct sr_daemon *d)
{
	static const enum sr_obj_kind handle_kinds[] = {SR_OBJ_FD,    SR_OBJ_PD,   SR_OBJ_CQ,
							SR_OBJ_MCAST, SR_OBJ_XRCD, SR_OBJ_QPREF};
	struct rlimit rl;

	/* a quarter of the descriptors (at least 64) for sockets and replies */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur > (1u << 30))
		rl.rlim_cur = 1u << 20;
	d->fds_budget = rl.rlim_cur > 256 ? rl.rlim_cur - rl.rlim_cur / 4 : rl.rlim_cur / 2;
	d->fds_held = 0;

	for (size_t i = 0; i < sizeof(handle_kinds) / sizeof(handle_kinds[0]); i++) {
		enum sr_obj_kind k = handle_kinds[i];

		if (sr_idalloc_init(&d->ids[k], 1, SR_HANDLE_LIMIT))
			return -ENOMEM;
		d->by_handle[k] = calloc(SR_HANDLE_LIMIT, sizeof(struct sr_obj *));
		if (!d->by_handle[k])
			return -ENOMEM;
	}
	/* QPN 0 and 1 are QP0/QP1 (IBTA 3.5.4); index 0 is never handed out for keys or SRQs */
	if (sr_idalloc_init(&d->qpn_ids, 2, SR_MAX_QPS) ||
	    sr_idalloc_init(&d->srqn_ids, 1, SR_MAX_SRQS) ||
	    sr_idalloc_init(&d->key_ids, 1, SR_MAX_KEYS))
		return -ENOMEM;
	d->qp_by_idx = calloc(SR_MAX_QPS, sizeof(struct sr_obj *));
	d->srq_by_idx = calloc(SR_MAX_SRQS, sizeof(struct sr_obj *));
	d->key_by_idx = calloc(SR_MAX_KEYS, sizeof(struct sr_obj *));
	if (!d->qp_by_idx || !d->srq_by_idx || !d->key_by_idx)
		return -ENOMEM;
	return 0;
}

void sr_objects_fini(struct sr_daemon *d)
{
	for (int k = 0; k < SR_OBJ_KINDS; k++) {
		if (d->by_handle[k]) {
			sr_idalloc_fini(&d->ids[k]);
			free(d->by_handle[k]);
			d->by_handle[k] = NULL;
		}
	}
	sr_idalloc_fini(&d->qpn_ids);
	sr_idalloc_fini(&d->srqn_ids);
	sr_idalloc_fini(&d->key_ids);
	free(d->qp_by_idx);
	free(d->srq_by_idx);
	free(d->key_by_idx);
}

struct sr_obj *sr_obj_lookup(struct sr_daemon *d, enum sr_obj_kind kind, uint32_t handle)
{
	struct sr_obj *o = NULL;

	switch (kind) {
	case SR_OBJ_QP:
		o = d->qp_by_idx[sr_qpn_index(handle) % SR_MAX_QPS];
		break;
	case SR_OBJ_SRQ:
		o = d->srq_by_idx[sr_qpn_index(handle) % SR_MAX_SRQS];
		break;
	case SR_OBJ_MR:
	case SR_OBJ_MW:
		o = d->key_by_idx[sr_key_index(handle) % SR_MAX_KEYS];
		break;
	default:
		if (handle < SR_HANDLE_LIMIT && d->by_handle[kind])
			o = d->by_handle[kind][handle];
	}
	if (o && (o->kind != kind || o->handle != handle))
		return NULL;
	return o;
}

struct sr_obj *sr_obj_owned(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
			    uint32_t handle)
{
	struct sr_obj *o = sr_obj_lookup(d, kind, handle);

	return o && o->owner == c ? o : NULL;
}

struct sr_obj *sr_obj_new(struct sr_client *c, enum sr_obj_kind kind)
{
	struct sr_obj *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->kind = kind;
	o->owner = c;
	o->cnext = c->objs;
	if (c->objs)
		c->objs->cprev = o;
	c->objs = o;
	return o;
}

void sr_obj_hold(struct sr_obj *o, struct sr_obj *dep)
{
	for (int i = 0; i < 4; i++) {
		if (!o->deps[i]) {
			o->deps[i] = dep;
			dep->users++;
			return;
		}
	}
	abort(); /* callers never hold more than four */
}

void sr_obj_unlink(struct sr_obj *o)
{
	struct sr_client *c = o->owner;

	for (int i = 0; i < 4; i++)
		if (o->deps[i])
			o->deps[i]->users--;
	if (o->cprev)
		o->cprev->cnext = o->cnext;
	else
		c->objs = o->cnext;
	if (o->cnext)
		o->cnext->cprev = o->cprev;
	free(o);
}

/* Makes o the client's newest object (the first its teardown destroys). */
void sr_obj_to_front(struct sr_obj *o)
{
	struct sr_client *c = o->owner;

	if (c->objs == o)
		return;
	o->cprev->cnext = o->cnext;
	if (o->cnext)
		o->cnext->cprev = o->cprev;
	o->cprev = NULL;
	o->cnext = c->objs;
	c->objs->cprev = o;
	c->objs = o;
}

/* Moves o from its owner's list to the front of c's (an XRC_RECV QP that
 * passes to a client that opened it). */
void sr_obj_give(struct sr_obj *o, struct sr_client *c)
{
	if (o->cprev)
		o->cprev->cnext = o->cnext;
	else
		o->owner->objs = o->cnext;
	if (o->cnext)
		o->cnext->cprev = o->cprev;
	o->owner = c;
	o->cprev = NULL;
	o->cnext = c->objs;
	if (c->objs)
		c->objs->cprev = o;
	c->objs = o;
}

static int handle_new(struct sr_daemon *d, struct sr_obj *o)
{
	int64_t h = sr_idalloc_get(&d->ids[o->kind]);

	if (h < 0)
		return (int)h;
	o->handle = h;
	d->by_handle[o->kind][h] = o;
	return 0;
}

void sr_handle_free(struct sr_daemon *d, struct sr_obj *o)
{
	d->by_handle[o->kind][o->handle] = NULL;
	sr_idalloc_put(&d->ids[o->kind], o->handle);
}

struct sr_key_entry *sr_key_slot(struct sr_daemon *d, uint32_t key)
{
	return &sr_arena_keytab(d->arena)[sr_key_index(key) % SR_MAX_KEYS];
}

void sr_key_publish(struct sr_key_entry *e, const struct sr_key_entry *val)
{
	sr_seq_write(&e->seq, (const char *)val + sizeof(e->seq), sizeof(*e) - sizeof(e->seq));
}

static void key_clear(struct sr_daemon *d, uint32_t key)
{
	struct sr_key_entry z;

	memset(&z, 0, sizeof(z));
	sr_key_publish(sr_key_slot(d, key), &z);
}

/* Allocates a key index and composes a key with fresh random bits. */
static int key_alloc(struct sr_daemon *d, struct sr_obj *o)
{
	int64_t idx = sr_idalloc_get(&d->key_ids);

	if (idx < 0)
		return -ENOMEM;
	o->handle = sr_key_make(idx, sr_random32());
	d->key_by_idx[idx] = o;
	return 0;
}

int sr_obj_new_numbered(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
			struct sr_obj **op)
{
	struct sr_obj *o = sr_obj_new(c, kind);
	int ret;

	*op = NULL;
	if (!o)
		return -ENOMEM;
	ret = kind == SR_OBJ_MR || kind == SR_OBJ_MW ? key_alloc(d, o) : handle_new(d, o);
	if (ret) {
		sr_obj_unlink(o);
		return ret;
	}
	*op = o;
	return 0;
}

void sr_key_free(struct sr_daemon *d, struct sr_obj *o)
{
	uint32_t idx = sr_key_index(o->handle);

	key_clear(d, o->handle);
	d->key_by_idx[idx] = NULL;
	sr_idalloc_put(&d->key_ids, idx);
}

/*
 * The daemon serves every client from one thread, so it never waits for an
 * arena lock: a thread of any process may hold one for as long as it is
 * stopped (SIGSTOP, a debugger inside post_send or a completion push).  A
 * request that needs locks takes them all or none; if one is held it
 * returns SR_RETRY, and client.c runs it again on the next poll round (a
 * millisecond later) while its client waits for the reply.
 */
int sr_lock_all(struct sr_lock *const *l, int n)
{
	for (int i = 0; i < n; i++) {
		if (sr_shm_lock_nowait(l[i])) {
			while (i--)
				sr_shm_unlock(l[i]);
			return SR_RETRY;
		}
	}
	return 0;
}

/* Each kind's destroy (obj_*.c); a kind without one is only unlinked.  The
 * QP's passes a QP that other clients opened to one of them instead. */
static sr_obj_destroy_fn *const destroy_fns[SR_OBJ_KINDS] = {
    [SR_OBJ_FD] = sr_fd_destroy, [SR_OBJ_PD] = sr_pd_destroy,	  [SR_OBJ_MR] = sr_mr_destroy,
    [SR_OBJ_MW] = sr_mw_destroy, [SR_OBJ_CQ] = sr_cq_destroy,	  [SR_OBJ_SRQ] = sr_srq_destroy,
    [SR_OBJ_QP] = sr_qp_destroy, [SR_OBJ_XRCD] = sr_xrcd_destroy, [SR_OBJ_QPREF] = sr_qpref_destroy,
};

static void obj_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	if (destroy_fns[o->kind])
		destroy_fns[o->kind](d, o);
	else
		sr_obj_unlink(o);
}

int sr_obj_destroy_owned(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
			 uint32_t handle)
{
	struct sr_obj *o = sr_obj_owned(d, c, kind, handle);

	if (!o)
		return -EINVAL;
	if (o->users)
		return -EBUSY;
	obj_destroy(d, o);
	return 0;
}

void sr_client_teardown(struct sr_daemon *d, struct sr_client *c)
{
	unsigned n = 0;

	sr_cm_client_gone(d, c); /* its connections first: peers hear REJ or DREQ */
	while (c->objs) {
		obj_destroy(d, c->objs);
		n++;
	}
	free(c->staged);
	c->staged = NULL;
	c->nstaged = 0;
	sr_rx_member_release(d, c);
	sr_life_detach(d, c);
	if (n)
		sr_info("client %u (pid %d) gone: reclaimed %u objects", c->id, (int)c->pid, n);
	/* its last connection: no thread of it can be inside the data path
	 * any more (or it is dead), so its epoch slots pin nothing */
	for (struct sr_client *o = d->clients; o; o = o->next)
		if (o != c && o->id && o->pid == c->pid)
			return;
	sr_heap_forget_pid(d, (uint32_t)c->pid);
}
