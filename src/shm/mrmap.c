/*
 * Key resolution and the per-process cache of mappings of other processes'
 * registered memory (see mrmap.h).  A cache slot per key index points to an
 * immutable record {key, reg_seq, base}; a registration number that no
 * longer matches the key table means the region was deregistered (and maybe
 * the index reused) or given new pages by ibv_rereg_mr (same key), so the
 * record is replaced and the stale mapping retired (see mr_base).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/idalloc.h"
#include "core/seqlock.h"
#include "shm/mrmap.h"
#include "shm/devctx.h"

struct sr_mrmap {
	uint32_t key;
	uint64_t reg_seq;
	char *base; /* address of the region's first byte (iova) here */
	void *map;  /* what to munmap */
	size_t map_len;
	struct sr_mrmap *retired; /* the record this one replaced (see mr_base) */
};

static _Atomic(_Atomic(struct sr_mrmap *) *) sr_maps;
static _Atomic uint32_t sr_my_pid; /* getpid() is a system call: cached, reset by fork */

static void forget_pid(void)
{
	atomic_store_explicit(&sr_my_pid, 0, memory_order_relaxed);
}

static void watch_fork(void)
{
	pthread_atfork(NULL, NULL, forget_pid);
}

static uint32_t my_pid(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uint32_t p = atomic_load_explicit(&sr_my_pid, memory_order_relaxed);

	if (!p) {
		pthread_once(&once, watch_fork);
		p = (uint32_t)getpid();
		atomic_store_explicit(&sr_my_pid, p, memory_order_relaxed);
	}
	return p;
}
static pthread_mutex_t sr_mrmap_lock = PTHREAD_MUTEX_INITIALIZER;

bool sr_key_lookup(void *arena, uint32_t key, struct sr_key_entry *out)
{
	struct sr_key_entry *e = &sr_arena_keytab(arena)[sr_key_index(key) % SR_MAX_KEYS];

	sr_seq_read(&e->seq, (char *)out + sizeof(out->seq), sizeof(*out) - sizeof(out->seq));
	return out->key == key && key != 0 && out->kind != SR_KEY_FREE;
}

void sr_key_store(void *arena, uint32_t index, const struct sr_key_entry *val)
{
	struct sr_key_entry *e = &sr_arena_keytab(arena)[index % SR_MAX_KEYS];

	sr_seq_write(&e->seq, (const char *)val + sizeof(val->seq),
		     sizeof(*val) - sizeof(val->seq));
}

static _Atomic(struct sr_mrmap *) *map_slots(void)
{
	_Atomic(struct sr_mrmap *) *s = atomic_load_explicit(&sr_maps, memory_order_acquire);

	if (s)
		return s;
	pthread_mutex_lock(&sr_mrmap_lock);
	s = atomic_load_explicit(&sr_maps, memory_order_relaxed);
	if (!s) {
		/* 2 MiB of virtual space; pages are touched only for used
		 * indices (calloc maps a block this size fresh from the kernel).
		 * From the heap, not mmap: LeakSanitizer then sees the records
		 * the slots point to as reachable. */
		s = calloc(SR_MAX_KEYS, sizeof(*s));
		if (s)
			atomic_store_explicit(&sr_maps, s, memory_order_release);
	}
	pthread_mutex_unlock(&sr_mrmap_lock);
	return s;
}

/* Maps the memfd segments of a registration contiguously, fetching them
 * SR_MR_SEGS_PER_REC at a time. */
static struct sr_mrmap *map_region(struct sr_devctx *ctx, uint32_t key, uint64_t reg_seq)
{
	uintptr_t ps = sysconf(_SC_PAGESIZE);
	char *res = NULL;
	struct sr_mrmap *m;
	uint64_t o = 0, total = 0, pos = 0;
	uint32_t next = 0, nsegs = 1;

	while (next < nsegs) {
		int fds[SR_MR_SEGS_PER_REC], nfds = SR_MR_SEGS_PER_REC;
		struct sr_req req;
		struct sr_rep rep;
		bool ok;

		memset(&req, 0, sizeof(req));
		req.op = SR_OP_MR_MAP;
		req.handle = key;
		req.u.mr_map.first = next;
		if (sr_ctx_request(ctx, &req, &rep, NULL, 0, fds, &nfds))
			goto err;
		/* every part must be of the registration we looked up: between
		 * two requests it may have gone, and the key come back */
		ok = nfds == (int)rep.u.mr_map.count && nfds > 0 && rep.u.mr_map.first == next &&
		     rep.u.mr_map.reg_seq == reg_seq && (!res || rep.u.mr_map.nsegs == nsegs);
		if (ok && !res) {
			nsegs = rep.u.mr_map.nsegs;
			o = rep.u.mr_map.segs[0].fd_off & (ps - 1);
			total = (o + rep.u.mr_map.length + ps - 1) & ~(ps - 1);
			res = mmap(NULL, total, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (res == MAP_FAILED) {
				res = NULL;
				ok = false;
			}
		}
		for (int i = 0; ok && i < nfds; i++) {
			const struct sr_mr_seg *s = &rep.u.mr_map.segs[i];
			uint64_t lead = next + i == 0 ? o : 0;
			uint64_t mlen = (lead + s->len + ps - 1) & ~(ps - 1);

			if (pos + mlen > total)
				mlen = total - pos;
			if (mmap(res + pos, mlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
				 fds[i], s->fd_off - lead) == MAP_FAILED)
				ok = false;
			pos += mlen;
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (!ok)
			goto err;
		next += (uint32_t)nfds;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		goto err;
	m->key = key;
	m->reg_seq = reg_seq;
	m->base = res + o;
	m->map = res;
	m->map_len = total;
	return m;

err:
	if (res)
		munmap(res, total);
	return NULL;
}

static char *mr_base(struct sr_devctx *ctx, const struct sr_key_entry *e)
{
	_Atomic(struct sr_mrmap *) *slots;
	struct sr_mrmap *m, *old;
	uint32_t idx = sr_key_index(e->key) % SR_MAX_KEYS;

	if (e->owner_pid == my_pid())
		return (char *)(uintptr_t)e->addr;
	slots = map_slots();
	if (!slots)
		return NULL;
	m = atomic_load_explicit(&slots[idx], memory_order_acquire);
	if (m && m->reg_seq == e->reg_seq && m->key == e->key)
		return m->base;
	pthread_mutex_lock(&sr_mrmap_lock);
	old = atomic_load_explicit(&slots[idx], memory_order_relaxed);
	if (old && old->reg_seq == e->reg_seq && old->key == e->key) {
		pthread_mutex_unlock(&sr_mrmap_lock);
		return old->base;
	}
	m = map_region(ctx, e->key, e->reg_seq);
	if (m) {
		atomic_store_explicit(&slots[idx], m, memory_order_release);
		if (old) {
			/* The old registration is gone (deregistered, or given new
			 * pages by ibv_rereg_mr, which keeps the key), but another
			 * thread of ours may have resolved it just before and still
			 * be copying through it.  So its pages are swapped for
			 * anonymous memory, where such a late copy lands harmlessly
			 * (the owner's memory is released now), and the record and
			 * address range are freed one replacement later. */
			mmap(old->map, old->map_len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
			if (old->retired) {
				munmap(old->retired->map, old->retired->map_len);
				free(old->retired);
				old->retired = NULL;
			}
			m->retired = old;
		}
	}
	pthread_mutex_unlock(&sr_mrmap_lock);
	return m ? m->base : NULL;
}

/*
 * Per-thread cache of resolved keys.  A hit costs one acquire load of the
 * entry's sequence word (and of the parent MR's, for a window): any change
 * to the entry (deregistration, rebind, invalidation) bumps it, so an
 * unchanged word means the cached copy is still the truth.  Checks that
 * depend on the request (PD, rights, bounds) are always redone.  Only a
 * pointer lives in initial-exec TLS (libibverbs may be dlopen'ed, and big
 * static TLS blocks then fail to load); the cache itself is malloc'ed.
 */
__thread struct sr_kcache_ent *sr_kcache __attribute__((tls_model("initial-exec")));
static pthread_key_t sr_kcache_key;
static pthread_once_t sr_kcache_once = PTHREAD_ONCE_INIT;

static void kcache_key_init(void)
{
	pthread_key_create(&sr_kcache_key, free);
}

static struct sr_kcache_ent *kcache(void)
{
	if (__builtin_expect(!sr_kcache, 0)) {
		pthread_once(&sr_kcache_once, kcache_key_init);
		void *p = NULL;

		if (!posix_memalign(&p, SR_CACHELINE, SR_KCACHE * sizeof(*sr_kcache))) {
			memset(p, 0, SR_KCACHE * sizeof(*sr_kcache));
			sr_kcache = p;
			pthread_setspecific(sr_kcache_key, sr_kcache);
		}
	}
	return sr_kcache;
}

static uint32_t entry_seq(void *arena, uint32_t index)
{
	return atomic_load_explicit(&sr_arena_keytab(arena)[index % SR_MAX_KEYS].seq,
				    memory_order_acquire);
}

static enum sr_key_result check(const struct sr_key_entry *e, const struct sr_key_entry *mr,
				char *base, uint64_t va, uint64_t len, uint32_t need, uint32_t pd,
				uint32_t qpn, bool remote, void **ptr)
{
	if (e->kind != SR_KEY_MR) {
		/* memory windows are remote keys only, and only while bound (IBTA 10.6.7) */
		if (!remote || e->state != 1)
			return SR_KEY_INVALID;
		if (e->kind == SR_KEY_MW2 && e->mw_qpn != qpn)
			return SR_KEY_PD; /* C10-72: a type-2 window serves only its QP */
		/* the window lay inside its MR when bound, but ibv_rereg_mr may
		 * have moved or shrunk the MR since (it keeps the key) */
		if (e->iova < mr->iova || e->length > mr->length ||
		    e->iova - mr->iova > mr->length - e->length)
			return SR_KEY_BOUNDS;
	}
	if (e->pd != pd)
		return SR_KEY_PD;
	if ((e->access & need) != need)
		return SR_KEY_ACCESS;
	if (va < e->iova || len > e->length || va - e->iova > e->length - len)
		return SR_KEY_BOUNDS;
	*ptr = base + (va - mr->iova);
	return SR_KEY_OK;
}

enum sr_key_result sr_key_resolve_slow(struct sr_devctx *ctx, uint32_t key, uint64_t va,
				       uint64_t len, uint32_t need, uint32_t pd, uint32_t qpn,
				       bool remote, void **ptr)
{
	struct sr_kcache_ent *c = kcache(), *ce = NULL;
	uint32_t idx = sr_key_index(key);
	struct sr_key_entry e, mr;
	uint32_t seq, mr_seq = 0;
	char *base;

	if (__builtin_expect(c != NULL, 1)) {
		ce = &c[idx % SR_KCACHE];
		/* (the MR hit is handled inline by sr_key_resolve) a window hit */
		if (ce->key == key && ce->base && ce->kind != SR_KEY_MR &&
		    entry_seq(ctx->arena, idx) == ce->seq &&
		    entry_seq(ctx->arena, ce->mr_index) == ce->mr_seq)
			return check(&ce->e, &ce->mr, ce->base, va, len, need, pd, qpn, remote,
				     ptr);
	}
	seq = entry_seq(ctx->arena, idx);
	if (!sr_key_lookup(ctx->arena, key, &e))
		return SR_KEY_INVALID;
	if (e.kind == SR_KEY_MR) {
		mr = e;
	} else {
		if (!remote || e.state != 1)
			return SR_KEY_INVALID;
		mr_seq = entry_seq(ctx->arena, sr_key_index(e.parent_key));
		if (!sr_key_lookup(ctx->arena, e.parent_key, &mr) || mr.kind != SR_KEY_MR)
			return SR_KEY_INVALID;
	}
	base = mr_base(ctx, &mr);
	if (!base)
		return SR_KEY_NOMAP;
	/* cache only a copy read under an unchanged, even sequence word */
	if (ce && !(seq & 1) && entry_seq(ctx->arena, idx) == seq &&
	    (e.kind == SR_KEY_MR ||
	     (!(mr_seq & 1) && entry_seq(ctx->arena, sr_key_index(e.parent_key)) == mr_seq))) {
		ce->key = key;
		ce->seq = seq;
		ce->kind = e.kind;
		ce->pd = e.pd;
		ce->access = e.access;
		ce->iova = e.iova;
		ce->length = e.length;
		ce->mr_seq = mr_seq;
		ce->mr_index = sr_key_index(e.parent_key);
		ce->e = e;
		ce->mr = mr;
		ce->base = base;
	}
	return check(&e, &mr, base, va, len, need, pd, qpn, remote, ptr);
}
