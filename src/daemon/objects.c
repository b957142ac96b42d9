/*
 * The resource registry and the control-verb handlers of softrdmad.  Each
 * handler validates a request the way the kernel's uverbs layer and an HCA's
 * firmware would (ownership, object kinds, capability limits, the QP state
 * machine), allocates host-wide numbers, initialises the shared object in
 * the arena, and records it on the client's list.  sr_client_teardown()
 * destroys a client's objects newest first, so dependents always go before
 * what they depend on.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"
#include "core/msg.h"
#include "core/qp_state.h"
#include "core/seqlock.h"
#include "core/shmlock.h"
#include "daemon/daemon.h"
#include "engine/engine.h"
#include "wire/gid.h"
#include "shm/qp_err.h"

#define SR_HANDLE_LIMIT (1u << 18)

static uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

static uint32_t align64(uint32_t v)
{
	return (v + 63) & ~63u;
}

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

/* Looks up an object the requesting client owns. */
static struct sr_obj *owned(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
			    uint32_t handle)
{
	struct sr_obj *o = sr_obj_lookup(d, kind, handle);

	return o && o->owner == c ? o : NULL;
}

static struct sr_obj *obj_new(struct sr_client *c, enum sr_obj_kind kind)
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

static void obj_hold(struct sr_obj *o, struct sr_obj *dep)
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

static void obj_unlink(struct sr_obj *o)
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
static void obj_to_front(struct sr_obj *o)
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
static void obj_give(struct sr_obj *o, struct sr_client *c)
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

static void handle_free(struct sr_daemon *d, struct sr_obj *o)
{
	d->by_handle[o->kind][o->handle] = NULL;
	sr_idalloc_put(&d->ids[o->kind], o->handle);
}

static struct sr_key_entry *key_entry(struct sr_daemon *d, uint32_t key)
{
	return &sr_arena_keytab(d->arena)[sr_key_index(key) % SR_MAX_KEYS];
}

static void key_publish(struct sr_key_entry *e, const struct sr_key_entry *val)
{
	sr_seq_write(&e->seq, (const char *)val + sizeof(e->seq), sizeof(*e) - sizeof(e->seq));
}

static void key_clear(struct sr_daemon *d, uint32_t key)
{
	struct sr_key_entry z;

	memset(&z, 0, sizeof(z));
	key_publish(key_entry(d, key), &z);
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

static void key_free(struct sr_daemon *d, struct sr_obj *o)
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
static int lock_all(struct sr_lock *const *l, int n)
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

/* ---- fds ---- */

/* The descriptor is what its kind says: a memfd (registered memory, which
 * peers map) or an eventfd (which the daemon and peers write to). */
static bool fd_kind_ok(int fd, uint32_t kind)
{
	static const char eventfd_link[] = "anon_inode:[eventfd]";
	char path[64], link[sizeof(eventfd_link)];
	struct stat st;
	ssize_t n;

	if (kind == SR_FD_MEM) /* memfds (and other shmem files) have seals */
		return !fstat(fd, &st) && S_ISREG(st.st_mode) && fcntl(fd, F_GET_SEALS) >= 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link));
	if (n < 0)
		return true; /* no /proc: cannot tell (daemon_signal still checks for room) */
	return n == sizeof(eventfd_link) - 1 && !memcmp(link, eventfd_link, n);
}

/* An event fd id a new CQ, QP or SRQ names: none, or one of the client's
 * event fds. */
static bool event_fd_ok(struct sr_daemon *d, struct sr_client *c, uint32_t fd_id)
{
	struct sr_obj *f = fd_id ? owned(d, c, SR_OBJ_FD, fd_id) : NULL;

	return !fd_id || (f && f->u.fd.kind == SR_FD_EVENT);
}

/* Descriptors registered by all connections of one process. */
static uint32_t pid_fds(const struct sr_daemon *d, pid_t pid)
{
	uint32_t n = 0;

	for (const struct sr_client *c = d->clients; c; c = c->next)
		if (c->pid == pid)
			n += c->fds_held;
	return n;
}

static int do_reg_fd(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req, int *fds,
		     int nfds, struct sr_rep *rep)
{
	struct sr_obj *o;
	int ret;

	if (nfds != 1 || (req->u.reg_fd.kind != SR_FD_MEM && req->u.reg_fd.kind != SR_FD_EVENT))
		return -EINVAL;
	if (!fd_kind_ok(fds[0], req->u.reg_fd.kind))
		return -EBADF;
	if (d->fds_held >= d->fds_budget || pid_fds(d, c->pid) >= d->fds_budget / 2)
		return -EMFILE;
	o = obj_new(c, SR_OBJ_FD);
	if (!o)
		return -ENOMEM;
	ret = handle_new(d, o);
	if (ret) {
		obj_unlink(o);
		return ret;
	}
	o->u.fd.fd = fds[0];
	o->u.fd.kind = req->u.reg_fd.kind;
	fds[0] = -1; /* consumed */
	d->fds_held++;
	c->fds_held++;
	rep->handle = o->handle;
	return 0;
}

static void fd_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	close(o->u.fd.fd);
	d->fds_held--;
	o->owner->fds_held--;
	handle_free(d, o);
	obj_unlink(o);
}

/* ---- XRC domains (IBTA A14; the kernel's ib_uverbs_open_xrcd) ---- */

static int do_open_xrcd(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			int *fds, int nfds, struct sr_rep *rep)
{
	uint32_t of = req->u.xrcd.oflags;
	struct sr_xrcd_dom *dom = NULL;
	struct stat st;
	struct sr_obj *o;
	int ret;

	if (nfds > 1 || (of & ~(uint32_t)(O_CREAT | O_EXCL)))
		return -EINVAL;
	if (nfds == 1) {
		if (fstat(fds[0], &st))
			return -EBADF;
		for (dom = d->xrcds; dom; dom = dom->next)
			if (dom->fd >= 0 && dom->dev == (uint64_t)st.st_dev &&
			    dom->ino == (uint64_t)st.st_ino)
				break;
		/* as the kernel: a file with no domain yet needs O_CREAT, and
		 * O_EXCL refuses one that has a domain already */
		if (!dom && !(of & O_CREAT))
			return -EAGAIN;
		if (dom && (of & O_EXCL))
			return -EINVAL;
		if (!dom && d->fds_held >= d->fds_budget)
			return -EMFILE;
	}
	o = obj_new(c, SR_OBJ_XRCD);
	if (!o)
		return -ENOMEM;
	ret = handle_new(d, o);
	if (ret) {
		obj_unlink(o);
		return ret;
	}
	if (!dom) {
		dom = calloc(1, sizeof(*dom));
		if (!dom) {
			handle_free(d, o);
			obj_unlink(o);
			return -ENOMEM;
		}
		dom->id = ++d->next_xrcd_id ? d->next_xrcd_id : ++d->next_xrcd_id;
		dom->fd = -1;
		if (nfds == 1) {
			dom->fd = fds[0];
			fds[0] = -1; /* kept: the inode stays ours while the domain lives */
			dom->dev = st.st_dev;
			dom->ino = st.st_ino;
			d->fds_held++;
		}
		dom->next = d->xrcds;
		d->xrcds = dom;
	}
	dom->handles++;
	o->u.xrcd.dom = dom;
	rep->handle = o->handle;
	return 0;
}

static void xrcd_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	struct sr_xrcd_dom *dom = o->u.xrcd.dom;

	if (!--dom->handles) {
		for (struct sr_xrcd_dom **p = &d->xrcds; *p; p = &(*p)->next) {
			if (*p == dom) {
				*p = dom->next;
				break;
			}
		}
		if (dom->fd >= 0) {
			close(dom->fd);
			d->fds_held--;
		}
		free(dom);
	}
	handle_free(d, o);
	obj_unlink(o);
}

/* ---- PD ---- */

static int do_alloc_pd(struct sr_daemon *d, struct sr_client *c, struct sr_rep *rep)
{
	struct sr_obj *o = obj_new(c, SR_OBJ_PD);
	int ret;

	if (!o)
		return -ENOMEM;
	ret = handle_new(d, o);
	if (ret) {
		obj_unlink(o);
		return -ENOMEM;
	}
	rep->handle = o->handle;
	return 0;
}

static void pd_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	handle_free(d, o);
	obj_unlink(o);
}

/* ---- MR / MW ---- */

#define SR_ACCESS_ALL                                                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |                   \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

/* Stages segments of the next REG_MR or REREG_MR of this client (an MR over
 * more backings than one record carries). */
static int do_mr_segs(struct sr_client *c, const struct sr_req *req)
{
	const __typeof__(req->u.mr_segs) *r = &req->u.mr_segs;
	struct sr_mr_seg *n;

	if (r->first == 0)
		c->nstaged = 0;
	if (r->first != c->nstaged || !r->nsegs || r->nsegs > SR_MR_SEGS_PER_REC ||
	    r->nsegs > SR_MR_MAX_SEGS - c->nstaged)
		return -EINVAL;
	n = realloc(c->staged, sizeof(*n) * (c->nstaged + r->nsegs));
	if (!n)
		return -ENOMEM;
	memcpy(n + c->nstaged, r->segs, sizeof(*n) * r->nsegs);
	c->staged = n;
	c->nstaged += r->nsegs;
	return 0;
}

/* The segments of a REG_MR or REREG_MR: those MR_SEGS staged, then the
 * request's own, in one malloc'd array (*segsp, *np).  The staged ones are
 * this request's whatever its outcome. */
static int mr_take_segs(struct sr_client *c, const struct sr_req *req, struct sr_mr_seg **segsp,
			uint32_t *np)
{
	const __typeof__(req->u.reg_mr) *r = &req->u.reg_mr;
	struct sr_mr_seg *segs = c->staged, *all;
	uint32_t nsegs = r->staged + r->nsegs;
	bool ok = r->staged == c->nstaged;

	c->staged = NULL;
	c->nstaged = 0;
	if (!ok || !nsegs || r->nsegs > SR_MR_SEGS_PER_REC || nsegs > SR_MR_MAX_SEGS) {
		free(segs);
		return -EINVAL;
	}
	all = realloc(segs, sizeof(*segs) * nsegs);
	if (!all) {
		free(segs);
		return -ENOMEM;
	}
	memcpy(all + r->staged, r->segs, sizeof(*all) * r->nsegs);
	*segsp = all;
	*np = nsegs;
	return 0;
}

/* What a registration request must satisfy; segs (nsegs of them): the pages
 * it names (REG_MR always, REREG_MR when the range changes), NULL if none. */
static int mr_req_check(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			const struct sr_mr_seg *segs, uint32_t nsegs)
{
	const __typeof__(req->u.reg_mr) *r = &req->u.reg_mr;
	uint64_t total = 0;

	if (!owned(d, c, SR_OBJ_PD, r->pd))
		return -EINVAL;
	if (r->access & ~SR_ACCESS_ALL)
		return -EINVAL;
	/* IBTA 10.6.3.1 (C10-26): remote write or atomic requires local write */
	if ((r->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(r->access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (!segs)
		return 0;
	if (!r->length || r->length > SR_MAX_MR_SIZE)
		return -EINVAL;
	for (uint32_t i = 0; i < nsegs; i++) {
		/* any context of the same process may have registered the pages */
		struct sr_obj *f = sr_obj_lookup(d, SR_OBJ_FD, segs[i].fd_id);

		if (!f || f->owner->pid != c->pid || f->u.fd.kind != SR_FD_MEM)
			return -EINVAL;
		total += segs[i].len;
	}
	return total < r->length ? -EINVAL : 0;
}

/* Publishes o's key entry from its record, under the entry's seqlock; a
 * reg_seq other than the entry's makes peers map the pages again.  The
 * daemon's own copy (o->u.mr.reg_seq) is what MR_MAP reports. */
static void mr_publish(struct sr_daemon *d, struct sr_obj *o, uint32_t pd, uint64_t reg_seq)
{
	struct sr_key_entry e;

	memset(&e, 0, sizeof(e));
	e.key = o->handle;
	e.kind = SR_KEY_MR;
	e.pd = pd;
	e.access = o->u.mr.access;
	e.owner_pid = o->owner->pid;
	e.iova = o->u.mr.iova;
	e.length = o->u.mr.length;
	e.addr = o->u.mr.addr;
	e.reg_seq = reg_seq;
	o->u.mr.reg_seq = reg_seq;
	key_publish(key_entry(d, o->handle), &e);
}

static uint64_t reg_seq_new(struct sr_daemon *d)
{
	return atomic_fetch_add(&((struct sr_arena_hdr *)d->arena)->reg_seq, 1) + 1;
}

/* o takes the range and segments (and owns segs from now on). */
static void mr_set_translation(struct sr_obj *o, const struct sr_req *req, struct sr_mr_seg *segs,
			       uint32_t nsegs)
{
	o->u.mr.addr = req->u.reg_mr.addr;
	o->u.mr.length = req->u.reg_mr.length;
	free(o->u.mr.segs);
	o->u.mr.segs = segs;
	o->u.mr.nsegs = nsegs;
}

static int do_reg_mr(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_rep *rep)
{
	const __typeof__(req->u.reg_mr) *r = &req->u.reg_mr;
	struct sr_mr_seg *segs;
	struct sr_obj *o;
	uint32_t nsegs;
	int ret;

	ret = mr_take_segs(c, req, &segs, &nsegs);
	if (ret)
		return ret;
	ret = mr_req_check(d, c, req, segs, nsegs);
	if (ret)
		goto out;
	ret = -ENOMEM;
	o = obj_new(c, SR_OBJ_MR);
	if (!o)
		goto out;
	ret = key_alloc(d, o);
	if (ret) {
		obj_unlink(o);
		goto out;
	}
	obj_hold(o, owned(d, c, SR_OBJ_PD, r->pd));
	mr_set_translation(o, req, segs, nsegs);
	segs = NULL;
	o->u.mr.iova = r->iova;
	o->u.mr.access = r->access;
	mr_publish(d, o, r->pd, reg_seq_new(d));
	rep->handle = o->handle;
	rep->u.mr.lkey = rep->u.mr.rkey = o->handle;
	ret = 0;
out:
	free(segs);
	return ret;
}

/*
 * ibv_rereg_mr: the MR changes in place and keeps its keys, as rxe's MRs
 * always do and mlx5's do when it can (UMR): a peer holding the rkey, or a
 * program that kept the lkey, goes on using it.  The key entry is rewritten
 * under its seqlock, which every cached resolution (the per-thread key
 * caches of mrmap.c) revalidates against; a new range (segments given, in
 * MR_SEGS records and the request as REG_MR's) also gets a new registration
 * number, so peers map the new pages.  No segments keep the pages (PD or
 * access change), and then addr and length must be the MR's.
 */
static int do_rereg_mr(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		       struct sr_rep *rep)
{
	const __typeof__(req->u.reg_mr) *r = &req->u.reg_mr;
	struct sr_obj *o = owned(d, c, SR_OBJ_MR, req->handle);
	bool translation = r->nsegs != 0 || r->staged != 0;
	struct sr_mr_seg *segs = NULL;
	uint32_t nsegs = 0;
	struct sr_obj *pd;
	uint64_t reg_seq;
	int ret;

	if (translation) {
		ret = mr_take_segs(c, req, &segs, &nsegs);
		if (ret)
			return ret;
	} else {
		free(c->staged);
		c->staged = NULL;
		c->nstaged = 0;
	}
	ret = -EINVAL;
	if (!o)
		goto out;
	ret = mr_req_check(d, c, req, segs, nsegs);
	if (ret)
		goto out;
	ret = -EINVAL;
	if (!translation && (r->addr != o->u.mr.addr || r->length != o->u.mr.length))
		goto out;
	pd = owned(d, c, SR_OBJ_PD, r->pd);
	if (o->deps[0] != pd) {
		o->deps[0]->users--;
		o->deps[0] = pd;
		pd->users++;
		/* teardown goes newest first: the MR must go before the PD it now
		 * holds, which may be younger than the MR */
		obj_to_front(o);
	}
	reg_seq = o->u.mr.reg_seq;
	if (translation) {
		mr_set_translation(o, req, segs, nsegs);
		segs = NULL;
		reg_seq = reg_seq_new(d);
	}
	o->u.mr.iova = r->iova;
	o->u.mr.access = r->access;
	mr_publish(d, o, r->pd, reg_seq);
	rep->handle = o->handle;
	rep->u.mr.lkey = rep->u.mr.rkey = o->handle;
	ret = 0;
out:
	free(segs);
	return ret;
}

static void mr_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	key_free(d, o);
	free(o->u.mr.segs);
	obj_unlink(o);
}

/* Hands the memfds behind a key's MR to any client that must reach it
 * (the initiator of a one-sided operation, or a SEND's executor), at most
 * SR_MR_SEGS_PER_REC per request. */
static int do_mr_map(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_rep *rep, int *out_fds, int *nout)
{
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_MR, req->handle);
	uint32_t first = req->u.mr_map.first, count;

	if (!o)
		return -ENOENT;
	if (first >= o->u.mr.nsegs)
		return -EINVAL;
	count = o->u.mr.nsegs - first;
	if (count > SR_MR_SEGS_PER_REC)
		count = SR_MR_SEGS_PER_REC;
	rep->u.mr_map.iova = o->u.mr.iova;
	rep->u.mr_map.length = o->u.mr.length;
	rep->u.mr_map.reg_seq = o->u.mr.reg_seq;
	rep->u.mr_map.owner_pid = o->owner->pid;
	rep->u.mr_map.nsegs = o->u.mr.nsegs;
	rep->u.mr_map.first = first;
	rep->u.mr_map.count = count;
	for (uint32_t i = 0; i < count; i++) {
		const struct sr_mr_seg *s = &o->u.mr.segs[first + i];
		struct sr_obj *f = sr_obj_lookup(d, SR_OBJ_FD, s->fd_id);

		if (!f)
			return -ENOENT;
		rep->u.mr_map.segs[i] = *s;
		rep->u.mr_map.segs[i].fd_id = i;
		out_fds[i] = f->u.fd.fd;
	}
	*nout = count;
	rep->handle = o->handle;
	return 0;
}

static int do_alloc_mw(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		       struct sr_rep *rep)
{
	struct sr_obj *pd = owned(d, c, SR_OBJ_PD, req->u.mw.pd);
	struct sr_key_entry e;
	struct sr_obj *o;
	int ret;

	if (!pd)
		return -EINVAL;
	if (req->u.mw.type != IBV_MW_TYPE_1 && req->u.mw.type != IBV_MW_TYPE_2)
		return -EINVAL;
	o = obj_new(c, SR_OBJ_MW);
	if (!o)
		return -ENOMEM;
	ret = key_alloc(d, o);
	if (ret) {
		obj_unlink(o);
		return ret;
	}
	obj_hold(o, pd);
	o->u.mw.type = req->u.mw.type;
	memset(&e, 0, sizeof(e));
	e.key = o->handle;
	e.kind = req->u.mw.type == IBV_MW_TYPE_1 ? SR_KEY_MW1 : SR_KEY_MW2;
	e.pd = req->u.mw.pd;
	e.owner_pid = c->pid;
	e.reg_seq = atomic_fetch_add(&((struct sr_arena_hdr *)d->arena)->reg_seq, 1) + 1;
	key_publish(key_entry(d, o->handle), &e);
	rep->handle = o->handle;
	rep->u.mw.rkey = o->handle;
	return 0;
}

static void mw_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	key_free(d, o);
	obj_unlink(o);
}

/* ---- CQ ---- */

static int do_create_cq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			struct sr_rep *rep)
{
	uint32_t cqe = req->u.cq.cqe, cnt;
	struct sr_cq_shm *cq;
	struct sr_obj *o, *ch = NULL;
	uint64_t off, got, ring, size;
	int ret;

	if (cqe < 1 || cqe > SR_MAX_CQE)
		return -EINVAL;
	if (!event_fd_ok(d, c, req->u.cq.channel_fd_id) ||
	    !event_fd_ok(d, c, req->u.cq.async_fd_id))
		return -EINVAL;
	if (req->u.cq.channel_fd_id)
		ch = owned(d, c, SR_OBJ_FD, req->u.cq.channel_fd_id);
	cnt = roundup_pow2(cqe + 1);
	ring = align64(sizeof(*cq));
	size = ring + (uint64_t)cnt * sizeof(struct sr_cqe);
	off = sr_heap_alloc(d, size, &got);
	if (!off)
		return -ENOMEM;
	o = obj_new(c, SR_OBJ_CQ);
	if (!o || handle_new(d, o)) {
		if (o)
			obj_unlink(o);
		sr_heap_free(d, off, got);
		return -ENOMEM;
	}
	if (ch)
		obj_hold(o, ch);
	o->u.shm.off = off;
	o->u.shm.size = got;
	cq = sr_arena_ptr(d->arena, off);
	cq->cqe_cnt = cnt;
	cq->max_cqe = cnt - 1;
	cq->channel_fd_id = req->u.cq.channel_fd_id;
	cq->async_fd_id = req->u.cq.async_fd_id;
	cq->handle = o->handle;
	cq->owner_pid = c->pid;
	cq->ring_off = off + ring;
	o->u.shm.cqe_cnt = cnt;
	ret = sr_shm_lock_init(&cq->lock);
	if (ret)
		sr_warn("cq mutex init: %d", ret);
	rep->handle = o->handle;
	rep->u.cq.off = off;
	rep->u.cq.max_cqe = cq->max_cqe;
	return 0;
}

/* Moves a CQ's ring to a new chunk, keeping unpolled completions in order.
 * The owner polls under the same lock, so nobody sees the ring move. */
static int do_resize_cq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			struct sr_rep *rep)
{
	struct sr_obj *o = owned(d, c, SR_OBJ_CQ, req->handle);
	uint32_t cqe = req->u.cq.cqe, cnt, pending;
	struct sr_cq_shm *cq;
	uint64_t off, got, size;
	struct sr_cqe *old, *nr;
	uint32_t prod, cons;

	if (!o)
		return -EINVAL;
	if (cqe < 1 || cqe > SR_MAX_CQE)
		return -EINVAL;
	cq = sr_arena_at(d->arena, o->u.shm.off);
	cnt = roundup_pow2(cqe + 1);
	size = (uint64_t)cnt * sizeof(struct sr_cqe);
	if (lock_all(&(struct sr_lock *){&cq->lock}, 1))
		return SR_RETRY;
	off = sr_heap_alloc(d, size, &got);
	if (!off) {
		sr_shm_unlock(&cq->lock);
		return -ENOMEM;
	}
	prod = atomic_load_explicit(&cq->prod, memory_order_relaxed);
	cons = atomic_load_explicit(&cq->cons, memory_order_relaxed);
	pending = prod - cons;
	if (pending > cnt - 1) {
		sr_shm_unlock(&cq->lock);
		sr_heap_free(d, off, got);
		return -EINVAL;
	}
	/* the ring as the daemon made it, not as the arena says now: the
	 * copy stays inside it whatever prod and cons read */
	old = sr_arena_at(d->arena, o->u.shm.ring_off ? o->u.shm.ring_off
						      : o->u.shm.off + align64(sizeof(*cq)));
	nr = sr_arena_ptr(d->arena, off);
	for (uint32_t i = 0; i < pending; i++) {
		nr[i] = old[(cons + i) & (o->u.shm.cqe_cnt - 1)];
		atomic_store_explicit(&nr[i].seq, i + 1, memory_order_relaxed);
	}
	/* the old ring lives in the first chunk (after the header) unless already resized */
	if (o->u.shm.ring_off)
		sr_heap_free(d, o->u.shm.ring_off,
			     (uint64_t)o->u.shm.cqe_cnt * sizeof(struct sr_cqe));
	o->u.shm.ring_off = off;
	o->u.shm.cqe_cnt = cnt;
	cq->ring_off = off;
	cq->cqe_cnt = cnt;
	cq->max_cqe = cnt - 1;
	atomic_store_explicit(&cq->cons, 0, memory_order_relaxed);
	cq->cons_cache = 0;
	atomic_store_explicit(&cq->prod, pending, memory_order_release);
	sr_shm_unlock(&cq->lock);
	rep->u.cq.max_cqe = cnt - 1;
	rep->u.cq.off = o->u.shm.off;
	return 0;
}

static void cq_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	if (o->u.shm.ring_off)
		sr_heap_free_later(d, o->u.shm.ring_off,
				   (uint64_t)o->u.shm.cqe_cnt * sizeof(struct sr_cqe));
	sr_heap_free_later(d, o->u.shm.off, o->u.shm.size);
	handle_free(d, o);
	obj_unlink(o);
}

/* ---- work queues ---- */

static uint32_t send_stride(uint32_t sge, uint32_t inl)
{
	uint32_t body = sge * sizeof(struct sr_sge_shm);

	if (inl > body)
		body = inl;
	return align64(sizeof(struct sr_send_wqe) + body);
}

static uint32_t recv_stride(uint32_t sge)
{
	return align64(sizeof(struct sr_recv_wqe) + sge * sizeof(struct sr_sge_shm));
}

static void wq_init(struct sr_wq *wq, uint32_t max_wr, uint32_t max_sge, uint32_t max_inline,
		    uint32_t stride, uint64_t wqe_off)
{
	wq->wqe_cnt = roundup_pow2(max_wr ? max_wr : 1);
	wq->max_wr = wq->wqe_cnt;
	wq->max_sge = max_sge;
	wq->stride = stride;
	wq->max_inline = max_inline;
	wq->wqe_off = wqe_off;
	sr_shm_lock_init(&wq->prod_lock);
}

/* ---- SRQ ---- */

static int do_create_srq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			 struct sr_rep *rep)
{
	struct sr_obj *pd = owned(d, c, SR_OBJ_PD, req->u.srq.pd), *o;
	struct sr_obj *xrcd = NULL, *cq = NULL;
	uint32_t max_wr = req->u.srq.max_wr, sge = req->u.srq.max_sge, stride, cnt;
	struct sr_srq_shm *srq;
	uint64_t off, got, hdr;
	int64_t idx;

	if (!pd || !event_fd_ok(d, c, req->u.srq.async_fd_id))
		return -EINVAL;
	if (req->u.srq.xrcd) { /* an XRC SRQ: its domain and its CQ */
		xrcd = owned(d, c, SR_OBJ_XRCD, req->u.srq.xrcd);
		cq = owned(d, c, SR_OBJ_CQ, req->u.srq.cq);
		if (!xrcd || !cq)
			return -EINVAL;
	}
	if (!max_wr || max_wr > SR_MAX_SRQ_WR || sge > SR_MAX_SGE || req->u.srq.srq_limit > max_wr)
		return -EINVAL;
	if (!sge)
		sge = 1;
	stride = recv_stride(sge);
	cnt = roundup_pow2(max_wr);
	hdr = align64(sizeof(*srq));
	/* SR_WQ_FREED_BY_POLL: twice the slots of max_wr (layout.h) */
	off = sr_heap_alloc(d, hdr + 2ull * cnt * stride, &got);
	if (!off)
		return -ENOMEM;
	idx = sr_idalloc_get(&d->srqn_ids);
	o = idx >= 0 ? obj_new(c, SR_OBJ_SRQ) : NULL;
	if (!o) {
		if (idx >= 0)
			sr_idalloc_put(&d->srqn_ids, idx);
		sr_heap_free(d, off, got);
		return -ENOMEM;
	}
	obj_hold(o, pd);
	if (xrcd) {
		obj_hold(o, xrcd);
		obj_hold(o, cq);
	}
	o->handle = sr_qpn_make(idx, sr_random32());
	o->u.shm.off = off;
	o->u.shm.size = got;
	d->srq_by_idx[idx] = o;
	srq = sr_arena_ptr(d->arena, off);
	srq->srqn = o->handle;
	srq->pd = req->u.srq.pd;
	srq->owner_pid = c->pid;
	srq->async_fd_id = req->u.srq.async_fd_id;
	srq->user_handle = req->u.srq.user_handle;
	srq->xrcd = xrcd ? xrcd->u.xrcd.dom->id : 0;
	srq->cq_off = cq ? cq->u.shm.off : 0;
	atomic_store_explicit(&srq->waiter_qpn, 0, memory_order_relaxed);
	sr_shm_lock_init(&srq->lock);
	wq_init(&srq->rq, 2 * cnt, sge, 0, stride, off + hdr);
	srq->rq.max_wr = cnt;
	srq->rq.flags = SR_WQ_FREED_BY_POLL;
	srq->rq.limit = req->u.srq.srq_limit;
	atomic_store_explicit(&srq->limit_armed, srq->rq.limit != 0, memory_order_relaxed);
	atomic_store_explicit(&sr_arena_srqtab(d->arena)[idx].obj_off, off, memory_order_release);
	rep->handle = o->handle;
	rep->u.srq.off = off;
	rep->u.srq.max_wr = srq->rq.max_wr;
	rep->u.srq.max_sge = sge;
	return 0;
}

/*
 * Routing by GID: a connected QP (RC, UC, XRC) whose destination GID is
 * not one of this host's goes over the wire (RoCEv2, src/engine), whatever
 * its dest_qp_num may also name here; a local GID keeps the same-host path.
 * Only ah_attr with a GRH can name another host (RoCE requires one).
 */
static void wire_route(struct sr_daemon *d, struct sr_qp_shm *qp)
{
	struct ibv_ah_attr ah;
	bool local = false;

	static_assert(sizeof(ah) <= sizeof(qp->ah_attr), "ah_attr fits");
	memcpy(&ah, qp->ah_attr, sizeof(ah));
	qp->wire = 0;
	/* XRC (A14) as RC: an XRC_SEND QP whose target is on another host, and
	 * an XRC_RECV QP whose initiator is (RTR gives it the AV, as the
	 * kernel's table requires for XRC_TGT) */
	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC && qp->type != IBV_QPT_XRC_SEND &&
	     qp->type != IBV_QPT_XRC_RECV) ||
	    !ah.is_global)
		return;
	for (uint32_t i = 0; i < d->dev.gid_cnt; i++)
		if (!memcmp(d->dev.gids[i].gid, ah.grh.dgid.raw, 16))
			local = true;
	if (local || ah.grh.sgid_index >= d->dev.gid_cnt)
		return;
	memcpy(qp->sgid, d->dev.gids[ah.grh.sgid_index].gid, 16);
	memcpy(qp->dgid, ah.grh.dgid.raw, 16);
	qp->wire = 1;
}

static int do_modify_srq(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			 struct sr_rep *rep)
{
	struct sr_obj *o = owned(d, c, SR_OBJ_SRQ, req->handle);
	uint32_t mask = req->u.srq.max_sge; /* reused field: attr mask */
	struct sr_srq_shm *srq;

	if (!o)
		return -EINVAL;
	srq = sr_arena_at(d->arena, o->u.shm.off);
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return -EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return -EINVAL; /* SRQ resize is not supported (as on mlx5) */
	if (mask & IBV_SRQ_LIMIT) {
		if (req->u.srq.srq_limit > srq->rq.max_wr)
			return -EINVAL;
		if (lock_all(&(struct sr_lock *){&srq->lock}, 1))
			return SR_RETRY;
		srq->rq.limit = req->u.srq.srq_limit;
		atomic_store_explicit(&srq->limit_armed, srq->rq.limit != 0, memory_order_release);
		sr_shm_unlock(&srq->lock);
	}
	return 0;
}

static void srq_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	uint32_t idx = sr_qpn_index(o->handle);

	atomic_store_explicit(&sr_arena_srqtab(d->arena)[idx].obj_off, 0, memory_order_release);
	d->srq_by_idx[idx] = NULL;
	sr_idalloc_put(&d->srqn_ids, idx);
	sr_heap_free_later(d, o->u.shm.off, o->u.shm.size);
	obj_unlink(o);
}

/*
 * The member of the RoCEv2 engine's receive socket group that c's QPs'
 * datagrams are steered to (layout.h, SR_RX_MEMBERS; their QPNs name it):
 * one of its own from its first QP while one is free, so that its polling
 * threads read only its own datagrams (shm/wire_rx.c); else the engine's
 * (0).  Members go round, so that a freed one is not reused at once (late
 * datagrams for its old QPs find unknown QPNs).
 */
static uint32_t rx_member(struct sr_daemon *d, struct sr_client *c)
{
	unsigned n = sr_engine_rx_members();

	if (c->rx_member || c->internal || n < 2)
		return c->rx_member;
	for (unsigned i = 1; i < n; i++) {
		unsigned m = 1 + (d->rx_member_last + i - 1) % (n - 1);
		struct sr_rx_member *mb = &((struct sr_arena_hdr *)d->arena)->rx_members[m];

		if (d->rx_members_used & 1u << m)
			continue;
		d->rx_members_used |= 1u << m;
		d->rx_member_last = m;
		c->rx_member = m;
		atomic_store_explicit(&mb->poll_at, 0, memory_order_relaxed);
		break;
	}
	return c->rx_member;
}

static void rx_member_release(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_rx_member *mb = &((struct sr_arena_hdr *)d->arena)->rx_members[c->rx_member];

	if (!c->rx_member)
		return;
	atomic_store_explicit(&mb->poll_at, 0, memory_order_relaxed);
	d->rx_members_used &= ~(1u << c->rx_member);
	c->rx_member = 0;
	sr_engine_kick(); /* it reads the member from now on */
}

/*
 * The random tag bits of a QPN.  SOFTRDMA_TEST_QPN_TAG=N (tests only) fixes
 * them, so two fresh daemons number their first QPs alike: the two-host
 * tests use it to give a local QP the number of a remote peer and check
 * that the peer's traffic is routed by GID first (docs/architecture.md).
 */
static uint32_t qpn_tag(struct sr_daemon *d, struct sr_client *c)
{
	static int fixed = -1;
	static uint32_t tag;

	if (fixed < 0) {
		const char *v = sr_env_str("SOFTRDMA_TEST_QPN_TAG");

		fixed = v != NULL;
		tag = fixed ? (uint32_t)strtoul(v, NULL, 0) : 0;
	}
	return fixed ? tag
		     : sr_qpn_member_rnd(sr_engine_rx_qpn_bits(rx_member(d, c)), sr_random32());
}

/* ---- QP ---- */

static int do_create_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			struct sr_rep *rep)
{
	const __typeof__(req->u.create_qp) *r = &req->u.create_qp;
	bool xrc_recv = r->type == IBV_QPT_XRC_RECV, xrc_send = r->type == IBV_QPT_XRC_SEND;
	struct sr_obj *pd = owned(d, c, SR_OBJ_PD, r->pd);
	struct sr_obj *scq = owned(d, c, SR_OBJ_CQ, r->send_cq);
	struct sr_obj *rcq = owned(d, c, SR_OBJ_CQ, r->recv_cq);
	struct sr_obj *srq = NULL, *xrcd = NULL, *o;
	struct sr_req_qp_caps cap = r->cap;
	uint32_t sstride, rstride, scnt, rcnt;
	uint64_t off, got, hdr, sq_bytes, eng_off = 0, eng_size = 0;
	bool no_rq;
	struct sr_qp_shm *qp;
	int64_t idx;

	if (r->type != IBV_QPT_RC && r->type != IBV_QPT_UC && r->type != IBV_QPT_UD && !xrc_recv &&
	    !xrc_send)
		return -EOPNOTSUPP;
	if (!event_fd_ok(d, c, r->async_fd_id))
		return -EINVAL;
	if (xrc_recv) {
		/* IBTA A14: an XRC target QP belongs to a domain, not a PD; it
		 * has no queues and no CQs (its SRQs have them) */
		xrcd = owned(d, c, SR_OBJ_XRCD, r->xrcd);
		if (!xrcd)
			return -EINVAL;
		pd = scq = rcq = NULL;
		memset(&cap, 0, sizeof(cap));
	} else if (xrc_send) {
		/* the initiator side: a send queue only */
		if (!pd || !scq || r->srqn)
			return -EINVAL;
		rcq = NULL;
		cap.max_recv_wr = cap.max_recv_sge = 0;
	} else if (!pd || !scq || !rcq) {
		return -EINVAL;
	}
	if (r->srqn) {
		srq = owned(d, c, SR_OBJ_SRQ, r->srqn);
		if (!srq || ((struct sr_srq_shm *)sr_arena_at(d->arena, srq->u.shm.off))->xrcd)
			return -EINVAL; /* an XRC SRQ is fed through XRC_RECV QPs only */
	}
	no_rq = srq || xrc_recv || xrc_send;
	if (cap.max_send_wr > SR_MAX_QP_WR || cap.max_send_sge > SR_MAX_SGE ||
	    cap.max_inline_data > SR_MAX_INLINE)
		return -EINVAL;
	if (!no_rq && (cap.max_recv_wr > SR_MAX_QP_WR || cap.max_recv_sge > SR_MAX_SGE))
		return -EINVAL;
	if (no_rq)
		cap.max_recv_wr = cap.max_recv_sge = 0;
	if (!cap.max_send_sge && !xrc_recv)
		cap.max_send_sge = 1;
	if (!no_rq && !cap.max_recv_sge)
		cap.max_recv_sge = 1;
	sstride = send_stride(cap.max_send_sge ? cap.max_send_sge : 1, cap.max_inline_data);
	rstride = recv_stride(cap.max_recv_sge ? cap.max_recv_sge : 1);
	scnt = roundup_pow2(cap.max_send_wr ? cap.max_send_wr : 1);
	rcnt = no_rq ? 0 : roundup_pow2(cap.max_recv_wr ? cap.max_recv_wr : 1);
	/* SR_WQ_FREED_BY_POLL: twice the slots of max_wr (layout.h) */
	hdr = align64(sizeof(*qp));
	sq_bytes = (uint64_t)scnt * sstride;
	off = sr_heap_alloc(d, hdr + sq_bytes + 2ull * rcnt * rstride, &got);
	if (!off)
		return -ENOMEM;
	/* a connected QP may have its peer on another host: the engine's
	 * state for it, in a chunk of its own (untouched, so costing no
	 * memory, unless the QP goes over the wire) */
	if (r->type != IBV_QPT_UD) {
		eng_off = sr_heap_alloc(d, sr_eng_state_size(scnt), &eng_size);
		if (!eng_off) {
			sr_heap_free(d, off, got);
			return -ENOMEM;
		}
	}
	idx = sr_idalloc_get(&d->qpn_ids);
	o = idx >= 0 ? obj_new(c, SR_OBJ_QP) : NULL;
	if (!o) {
		if (idx >= 0)
			sr_idalloc_put(&d->qpn_ids, idx);
		sr_heap_free(d, off, got);
		sr_heap_free(d, eng_off, eng_size);
		return -ENOMEM;
	}
	if (xrcd)
		obj_hold(o, xrcd); /* deps[0]: passed on with the QP (qp_pass_on) */
	if (pd)
		obj_hold(o, pd);
	if (scq)
		obj_hold(o, scq);
	if (rcq)
		obj_hold(o, rcq);
	if (srq)
		obj_hold(o, srq);
	o->handle = sr_qpn_make(idx, qpn_tag(d, c));
	o->u.shm.off = off;
	o->u.shm.size = got;
	o->u.shm.eng_off = eng_off;
	o->u.shm.eng_size = eng_size;
	d->qp_by_idx[idx] = o;

	qp = sr_arena_ptr(d->arena, off);
	qp->qpn = o->handle;
	qp->type = r->type;
	atomic_store_explicit(&qp->state, IBV_QPS_RESET, memory_order_relaxed);
	qp->pd = pd ? r->pd : 0;
	qp->xrcd = xrcd ? xrcd->u.xrcd.dom->id : 0;
	qp->owner_pid = c->pid;
	/* an XRC target QP lives while any process has it open (A14): the
	 * daemon, not its creator's exit, decides when it goes */
	qp->owner_life = r->type == IBV_QPT_XRC_RECV ? 0 : c->life;
	qp->async_fd_id = r->async_fd_id;
	qp->user_handle = r->user_handle;
	qp->srqn = r->srqn;
	qp->sq_sig_all = r->sq_sig_all;
	qp->send_cq_off = scq ? scq->u.shm.off : 0;
	qp->recv_cq_off = rcq ? rcq->u.shm.off : 0;
	qp->srq_off = srq ? srq->u.shm.off : 0;
	qp->port_num = 1;
	qp->eng_off = eng_off;
	sr_shm_lock_init(&qp->sq_lock);
	sr_shm_lock_init(&qp->rq_lock);
	wq_init(&qp->sq, scnt, cap.max_send_sge, sstride - sizeof(struct sr_send_wqe), sstride,
		off + hdr);
	if (xrc_recv)
		qp->sq.max_wr = 0; /* a ring of one, never posted to */
	if (!no_rq) {
		wq_init(&qp->rq, 2 * rcnt, cap.max_recv_sge, 0, rstride, off + hdr + sq_bytes);
		qp->rq.max_wr = rcnt;
		qp->rq.flags = SR_WQ_FREED_BY_POLL;
	}
	atomic_store_explicit(&sr_arena_qptab(d->arena)[idx].obj_off, off, memory_order_release);

	rep->handle = o->handle;
	rep->u.qp.off = off;
	rep->u.qp.cap.max_send_wr = qp->sq.max_wr;
	rep->u.qp.cap.max_send_sge = cap.max_send_sge;
	rep->u.qp.cap.max_inline_data = xrc_recv ? 0 : qp->sq.max_inline;
	rep->u.qp.cap.max_recv_wr = no_rq ? 0 : qp->rq.max_wr;
	rep->u.qp.cap.max_recv_sge = no_rq ? 0 : cap.max_recv_sge;
	rep->u.qp.type = r->type;
	return 0;
}

/* The QP a client may modify or destroy: its own, or an XRC_RECV QP it
 * opened (ibv_open_qp); *ref is then the client's SR_OBJ_QPREF. */
static struct sr_obj *qp_for(struct sr_daemon *d, struct sr_client *c, uint32_t qpn,
			     struct sr_obj **ref)
{
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, qpn);

	*ref = NULL;
	if (!o || o->owner == c)
		return o && o->owner == c ? o : NULL;
	for (struct sr_obj *r = o->refs; r; r = r->ref_next)
		if (r->owner == c) {
			*ref = r;
			return o;
		}
	return NULL;
}

static void wq_reset(struct sr_wq *wq)
{
	atomic_store_explicit(&wq->head, 0, memory_order_relaxed);
	wq->tail_cache = 0;
	atomic_store_explicit(&wq->tail, 0, memory_order_relaxed);
}

/* Empties a receive ring.  Its WQEs carry their index (seq), so the indices
 * go on from head rather than back to 0, where a slot's old seq could pass
 * for a new one. */
static void rq_discard(struct sr_wq *wq)
{
	uint32_t head = atomic_load_explicit(&wq->head, memory_order_relaxed);

	wq->tail_cache = head;
	atomic_store_explicit(&wq->tail, head, memory_order_relaxed);
	atomic_store_explicit(&wq->polled, head, memory_order_relaxed);
	atomic_store_explicit(&wq->waiting, 0, memory_order_relaxed);
}

static const struct sr_qp_limits qp_limits = {
    .port_count = 1,
    .pkey_table_len = SR_PKEY_TBL_LEN,
    .max_mtu = IBV_MTU_4096,
    .max_rd_atom = SR_MAX_RD_ATOM,
    .max_dest_rd_atom = SR_MAX_RD_ATOM,
    .max_send_wr = SR_MAX_QP_WR,
    .max_recv_wr = SR_MAX_QP_WR,
    .max_send_sge = SR_MAX_SGE,
    .max_recv_sge = SR_MAX_SGE,
    .max_inline_data = SR_MAX_INLINE,
    .grh_required = true, /* the port's link layer is Ethernet */
};

/* Checks one modify against the QP's state now: its next state in *next. */
static int qp_modify_check(struct sr_qp_shm *qp, const struct ibv_qp_attr *a, uint32_t mask,
			   enum ibv_qp_state *next)
{
	int ret;

	ret = sr_qp_modify_check(qp->type, atomic_load_explicit(&qp->state, memory_order_acquire),
				 a, mask, &qp_limits, next);
	if (ret)
		return ret;
	if (mask & IBV_QP_CAP)
		return -EINVAL; /* resizing a QP's queues is not supported */
	return 0;
}

/* Applies a checked modify; the caller holds the QP's three locks. */
static void qp_modify_apply(struct sr_daemon *d, struct sr_qp_shm *qp, const struct ibv_qp_attr *a,
			    uint32_t mask, enum ibv_qp_state next)
{
	/* what the check ignores for XRC (qp_state.h) is not applied either */
	if (qp->type == IBV_QPT_XRC_SEND)
		mask &= ~(uint32_t)(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	else if (qp->type == IBV_QPT_XRC_RECV)
		mask &= ~(uint32_t)(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
	if (mask & IBV_QP_PKEY_INDEX)
		qp->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->port_num = a->port_num;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->access = a->qp_access_flags;
	if (mask & IBV_QP_QKEY)
		qp->qkey = a->qkey;
	if (mask & IBV_QP_AV)
		memcpy(qp->ah_attr, &a->ah_attr, sizeof(qp->ah_attr));
	if (mask & IBV_QP_ALT_PATH) {
		memcpy(qp->alt_ah_attr, &a->alt_ah_attr, sizeof(qp->alt_ah_attr));
		qp->alt_port_num = a->alt_port_num;
		qp->alt_pkey_index = a->alt_pkey_index;
		qp->alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_PATH_MTU)
		qp->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		qp->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		qp->rq_psn = a->rq_psn & SR_QP_PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		qp->sq_psn = a->sq_psn & SR_QP_PSN_MASK;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		qp->dest_qpn = a->dest_qp_num;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->en_sqd_async_notify = a->en_sqd_async_notify;
	if (next == IBV_QPS_RESET) {
		/* IBTA 10.3.1: RESET discards every outstanding WQE */
		wq_reset(&qp->sq);
		if (!qp->srqn)
			rq_discard(&qp->rq);
		qp->exec_pos = 0;
		atomic_store(&qp->stalled, SR_STALL_NONE);
		atomic_store(&qp->flush_pending, 0);
	}
	if (next == IBV_QPS_RESET)
		qp->wire = 0;
	else if (next == IBV_QPS_RTR && (mask & IBV_QP_AV))
		wire_route(d, qp);
	/* The engine starts this QP's transport state over (PSNs, the
	 * responder's expected PSN and duplicate detection) only for a new
	 * connection: a reset, or a new peer or PSN at RTR.  Not for RTR->RTS
	 * (the requester takes sq_psn when it first sends) nor for attribute
	 * changes in RTS (libfabric sets min_rnr_timer after ESTABLISHED):
	 * starting over then took the expected PSN back to rq_psn, and a
	 * retransmitted SEND already delivered was delivered again. */
	if (next == IBV_QPS_RESET || (mask & (IBV_QP_AV | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN)))
		atomic_fetch_add_explicit(&qp->wire_gen, 1, memory_order_release);
	atomic_store_explicit(&qp->state, next, memory_order_release);
}

/* After a move from prev (the QP's locks let go: the engine takes
 * wtx_lock before sq_lock): an RC QP to another host that can now send
 * has its requester set up and its posting threads granted before the
 * move returns, so that the connection's first message leaves from the
 * thread that posts it (engine/req.c, sr_eng_req_rts).  The engine is not
 * rung: woken now, it would meet the application's first post half done
 * and send that WQE itself; the posting thread rings it after its send. */
static void wire_rts(struct sr_daemon *d, const struct sr_obj *o, struct sr_qp_shm *qp,
		     uint32_t prev)
{
	if (prev != IBV_QPS_RTS && o->u.shm.eng_off && qp->wire &&
	    atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_RTS)
		sr_eng_req_rts(d->arena, qp, sr_arena_at(d->arena, o->u.shm.eng_off),
			       o->u.shm.eng_size);
}

static bool qp_lock(struct sr_qp_shm *qp)
{
	return !lock_all((struct sr_lock *[]){&qp->sq_lock, &qp->rq_lock, &qp->rq.prod_lock}, 3);
}

static void qp_unlock(struct sr_qp_shm *qp)
{
	sr_shm_unlock(&qp->rq.prod_lock);
	sr_shm_unlock(&qp->rq_lock);
	sr_shm_unlock(&qp->sq_lock);
}

/*
 * A path's source and destination GIDs must be of one family: RoCEv2 puts
 * a packet whose GIDs are both IPv4-mapped in an IPv4 datagram and any
 * other pair in an IPv6 one (Annex A17.4.5.1), so an IPv4-mapped source
 * with an IPv6 destination (or the reverse) names no route, and a RoCE
 * device refuses it when it resolves the path at modify_qp (EINVAL), as
 * the kernel's address resolution does.  Accepted, every packet of the QP
 * would die at the peer for its ICRC.  The source GID must exist.
 */
static int path_check(struct sr_daemon *d, const struct sr_obj *o, const struct ibv_ah_attr *ah,
		      const char *which)
{
	const uint8_t *sgid;

	if (!ah->is_global)
		return 0;
	if (ah->grh.sgid_index >= d->dev.gid_cnt) {
		sr_warn("qp %u: %s sgid_index %u: the GID table has %u entries", o->handle, which,
			ah->grh.sgid_index, d->dev.gid_cnt);
		return -EINVAL;
	}
	sgid = d->dev.gids[ah->grh.sgid_index].gid;
	if (sr_gid_is_v4(sgid) != sr_gid_is_v4(ah->grh.dgid.raw)) {
		char s[INET6_ADDRSTRLEN], g[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, sgid, s, sizeof(s));
		inet_ntop(AF_INET6, ah->grh.dgid.raw, g, sizeof(g));
		sr_warn("qp %u: %s sgid %s (index %u) and dgid %s are of different families "
			"(IPv4-mapped and IPv6): RoCEv2 has no route between them",
			o->handle, which, s, ah->grh.sgid_index, g);
		return -EINVAL;
	}
	return 0;
}

static int do_modify_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			struct sr_rep *rep)
{
	struct sr_obj *ref, *o = qp_for(d, c, req->handle, &ref);
	uint32_t mask = req->u.modify_qp.attr_mask;
	enum ibv_qp_state next;
	struct ibv_qp_attr a;
	struct sr_qp_shm *qp;
	uint32_t prev;
	int ret;

	if (!o)
		return -EINVAL;
	qp = sr_arena_at(d->arena, o->u.shm.off);
	sr_qp_attr_from_wire(&req->u.modify_qp.attr, &a);
	ret = qp_modify_check(qp, &a, mask, &next);
	if (!ret && (mask & IBV_QP_AV))
		ret = path_check(d, o, &a.ah_attr, "primary path:");
	if (!ret && (mask & IBV_QP_ALT_PATH))
		ret = path_check(d, o, &a.alt_ah_attr, "alternate path:");
	if (ret)
		return ret;
	if (!qp_lock(qp))
		return SR_RETRY;
	prev = atomic_load_explicit(&qp->state, memory_order_relaxed);
	qp_modify_apply(d, qp, &a, mask, next);
	qp_unlock(qp);
	wire_rts(d, o, qp, prev);
	rep->u.modify_qp.state = next;
	return 0;
}

/* CREATE_QP with the modify librdmacm makes next (INIT): checked before
 * the QP exists, so a bad one creates nothing, as rdma_create_qp leaves
 * nothing when its INIT fails. */
static int do_create_qp_init(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			     struct sr_rep *rep)
{
	uint32_t mask = req->u.create_qp.init_mask;
	enum ibv_qp_state next = IBV_QPS_RESET;
	struct ibv_qp_attr a = {0};
	struct sr_qp_shm *qp;
	int ret;

	if (mask) {
		sr_qp_attr_from_wire(&req->u.create_qp.init, &a);
		ret = sr_qp_modify_check(req->u.create_qp.type, IBV_QPS_RESET, &a, mask, &qp_limits,
					 &next);
		if (ret)
			return ret;
		if (mask & IBV_QP_CAP)
			return -EINVAL;
	}
	ret = do_create_qp(d, c, req, rep);
	rep->u.qp.state = IBV_QPS_RESET;
	if (ret || !mask)
		return ret;
	qp = sr_arena_at(d->arena, rep->u.qp.off);
	if (!qp_lock(qp))
		return 0; /* nobody holds a new QP's locks; else the library moves it */
	qp_modify_apply(d, qp, &a, mask, next);
	qp_unlock(qp);
	rep->u.qp.state = next;
	return 0;
}

static bool same_process(const struct sr_client *a, const struct sr_client *c)
{
	return a && a->pid == c->pid && a->uid == c->uid;
}

/* A QP of the process c belongs to, made or opened through any of its
 * connections (librdmacm's is not the one its verbs context uses). */
static struct sr_obj *qp_of_process(struct sr_daemon *d, struct sr_client *c, uint32_t qpn)
{
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, qpn);

	if (!o || same_process(o->owner, c))
		return o;
	for (struct sr_obj *r = o->refs; r; r = r->ref_next)
		if (same_process(r->owner, c))
			return o;
	return NULL;
}

int sr_qp_moves(struct sr_daemon *d, struct sr_client *c, const struct sr_cm_qp_moves *m, int from)
{
	struct sr_obj *o;
	struct sr_qp_shm *qp;
	uint32_t prev;
	int ret = 0;

	if (!m->n)
		return 0;
	o = qp_of_process(d, c, m->qpn);
	if (!o || m->n > SR_CM_QP_MOVES)
		return -EINVAL;
	qp = sr_arena_at(d->arena, o->u.shm.off);
	if (!qp_lock(qp))
		return SR_RETRY; /* nothing moved yet: run again as a whole */
	prev = atomic_load_explicit(&qp->state, memory_order_relaxed);
	if (from >= 0 && prev != (uint32_t)from)
		ret = -EINVAL;
	for (uint32_t i = 0; i < m->n && !ret; i++) {
		enum ibv_qp_state next;
		struct ibv_qp_attr a;

		sr_qp_attr_from_wire(&m->attr[i], &a);
		ret = qp_modify_check(qp, &a, m->mask[i], &next);
		if (!ret)
			qp_modify_apply(d, qp, &a, m->mask[i], next);
	}
	qp_unlock(qp);
	wire_rts(d, o, qp, prev);
	return ret;
}

static void mcast_detach_qp(struct sr_daemon *d, uint32_t qpn, const uint8_t *gid);

static void obj_destroy(struct sr_daemon *d, struct sr_obj *o);

/* An XRC_RECV QP whose owner destroys it (or goes) while other clients
 * have it open passes to the first of them, with that client's use of its
 * XRCD handle, async event fd and handle, instead of being destroyed. */
static void qp_pass_on(struct sr_daemon *d, struct sr_obj *o)
{
	struct sr_qp_shm *qp = sr_arena_at(d->arena, o->u.shm.off);
	struct sr_obj *r = o->refs;

	o->refs = r->ref_next;
	o->deps[0]->users--;
	o->deps[0] = r->deps[0]; /* r's use of its XRCD handle, taken over */
	r->deps[0] = NULL;
	obj_give(o, r->owner);
	qp->owner_pid = r->owner->pid;
	qp->async_fd_id = r->u.qpref.async_fd_id;
	qp->user_handle = r->u.qpref.user_handle;
	handle_free(d, r);
	obj_unlink(r);
}

/* A client's ibv_destroy_qp of a QP it opened, or its teardown. */
static void qpref_destroy(struct sr_daemon *d, struct sr_obj *r)
{
	struct sr_obj *qp = r->u.qpref.qp;

	for (struct sr_obj **p = &qp->refs; *p; p = &(*p)->ref_next) {
		if (*p == r) {
			*p = r->ref_next;
			break;
		}
	}
	handle_free(d, r);
	obj_unlink(r);
}

static int do_open_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		      struct sr_rep *rep)
{
	struct sr_obj *xrcd = owned(d, c, SR_OBJ_XRCD, req->u.open_qp.xrcd);
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, req->handle), *r;
	struct sr_qp_shm *qp;
	int ret;

	/* as the kernel's ib_open_qp: an XRC target QP of the opener's domain */
	if (!xrcd || !o || !event_fd_ok(d, c, req->u.open_qp.async_fd_id))
		return -EINVAL;
	qp = sr_arena_at(d->arena, o->u.shm.off);
	if (qp->type != IBV_QPT_XRC_RECV || qp->xrcd != xrcd->u.xrcd.dom->id)
		return -EINVAL;
	r = obj_new(c, SR_OBJ_QPREF);
	if (!r)
		return -ENOMEM;
	ret = handle_new(d, r);
	if (ret) {
		obj_unlink(r);
		return ret;
	}
	obj_hold(r, xrcd); /* deps[0], as a QP's: its XRCD is busy while it is open */
	r->u.qpref.qp = o;
	r->u.qpref.async_fd_id = req->u.open_qp.async_fd_id;
	r->u.qpref.user_handle = req->u.open_qp.user_handle;
	r->ref_next = o->refs;
	o->refs = r;
	rep->handle = o->handle;
	rep->u.qp.off = o->u.shm.off;
	rep->u.qp.type = qp->type;
	return 0;
}

static int do_destroy_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req)
{
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, req->handle);

	if (!o)
		return -EINVAL;
	if (req->u.open_qp.xrcd) { /* the library's handle from ibv_open_qp */
		for (struct sr_obj *r = o->refs; r; r = r->ref_next) {
			if (r->owner == c && r->deps[0] &&
			    r->deps[0]->handle == req->u.open_qp.xrcd) {
				qpref_destroy(d, r);
				return 0;
			}
		}
		/* none left: the QP passed to this client when its creator went */
		if (o->owner != c)
			return -EINVAL;
	}
	if (o->owner != c)
		return -EINVAL;
	if (o->users)
		return -EBUSY;
	if (o->refs)
		qp_pass_on(d, o);
	else
		obj_destroy(d, o);
	return 0;
}

/* A connected QP's responder over the wire: the engine answers a repeat
 * of its last message after it is gone (engine/resp.c, sr_eng_resp_gone).
 * Read under the QP's lock, which the daemon never waits for: a holder
 * that died is taken over, a live one (the engine, a polling thread) is
 * given a few turns, and a stopped one leaves nothing noted. */
static void qp_note_gone(struct sr_daemon *d, struct sr_qp_shm *qp, uint64_t eng_off)
{
	struct sr_eng_qp *q = sr_arena_at(d->arena, eng_off);
	struct sr_eng_gone g;
	int tries = 0;
	bool ok;

	if (!qp->wire || (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_XRC_RECV))
		return;
	while (sr_shm_lock_nowait(&qp->wtx_lock)) {
		if (++tries > 64)
			return;
		sched_yield();
	}
	ok = q->qpn == qp->qpn &&
	     q->gen == atomic_load_explicit(&qp->wire_gen, memory_order_acquire) && q->resp_init;
	if (ok) {
		g.qpn = qp->qpn;
		g.dest_qpn = qp->dest_qpn;
		g.psn = sr_psn_add(q->epsn, SR_PSN_MASK);
		g.msn = q->msn;
		memcpy(g.sgid, qp->sgid, 16);
		memcpy(g.dgid, qp->dgid, 16);
	}
	sr_shm_unlock(&qp->wtx_lock);
	if (ok)
		sr_engine_gone(&g);
}

static void qp_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	uint32_t idx = sr_qpn_index(o->handle);
	struct sr_qp_shm *qp = sr_arena_at(d->arena, o->u.shm.off);
	struct sr_arena_hdr *h = d->arena;

	for (int c = 0; c < SR_CNT_MAX; c++) /* keep the host totals */
		h->counters[c] += atomic_load_explicit(&qp->cnt[c], memory_order_relaxed);

	if (qp->type == IBV_QPT_UD) /* only UD QPs join groups */
		mcast_detach_qp(d, o->handle, NULL);
	if (o->u.shm.eng_off)
		qp_note_gone(d, qp, o->u.shm.eng_off);
	atomic_store_explicit(&sr_arena_qptab(d->arena)[idx].obj_off, 0, memory_order_release);
	d->qp_by_idx[idx] = NULL;
	sr_idalloc_put(&d->qpn_ids, idx);
	sr_heap_free_later(d, o->u.shm.off, o->u.shm.size);
	if (o->u.shm.eng_off)
		sr_heap_free_later(d, o->u.shm.eng_off, o->u.shm.eng_size);
	obj_unlink(o);
}

/* ---- multicast ---- */

static struct sr_mcast_group *mcast_find(struct sr_daemon *d, const uint8_t *gid, bool create)
{
	struct sr_mcast_group *t = sr_arena_mcasttab(d->arena), *free_slot = NULL;

	for (uint32_t i = 0; i < SR_MAX_MCAST_GRP; i++) {
		if (t[i].nqp && !memcmp(t[i].gid, gid, 16))
			return &t[i];
		if (!t[i].nqp && !free_slot)
			free_slot = &t[i];
	}
	return create ? free_slot : NULL;
}

static void mcast_write(struct sr_mcast_group *g, const struct sr_mcast_group *val)
{
	sr_seq_write(&g->seq, (const char *)val + sizeof(g->seq), sizeof(*g) - sizeof(g->seq));
}

/* Removes qpn from one group (gid) or from all groups (gid NULL). */
static void mcast_detach_qp(struct sr_daemon *d, uint32_t qpn, const uint8_t *gid)
{
	struct sr_mcast_group *t = sr_arena_mcasttab(d->arena);

	for (uint32_t i = 0; i < SR_MAX_MCAST_GRP; i++) {
		struct sr_mcast_group g;
		uint32_t k = 0;

		/* this thread is the tables' only writer: a plain look first,
		 * the copy (a few hundred bytes) only for a group in use */
		if (!t[i].nqp || (gid && memcmp(t[i].gid, gid, 16)))
			continue;
		g = t[i];
		for (uint32_t j = 0; j < g.nqp; j++)
			if (g.qpn[j] != qpn)
				g.qpn[k++] = g.qpn[j];
		if (k != g.nqp) {
			g.nqp = k;
			mcast_write(&t[i], &g);
			if (!k)
				sr_engine_mcast(g.gid, false); /* the host left the group */
		}
	}
}

static int do_attach_mcast(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			   bool attach)
{
	struct sr_obj *o = owned(d, c, SR_OBJ_QP, req->handle);
	struct sr_mcast_group *slot, g;
	struct sr_qp_shm *qp;

	if (!o)
		return -EINVAL;
	qp = sr_arena_at(d->arena, o->u.shm.off);
	if (qp->type != IBV_QPT_UD || !sr_gid_is_mcast(req->u.mcast.gid))
		return -EINVAL; /* only UD QPs join, and only multicast GIDs (IBTA 4.1.1) */
	if (!attach) {
		bool member = false;

		slot = mcast_find(d, req->u.mcast.gid, false);
		for (uint32_t j = 0; slot && j < slot->nqp; j++)
			member |= slot->qpn[j] == req->handle;
		if (!member)
			return -EINVAL; /* as rxe and mlx5: not attached to that group */
		mcast_detach_qp(d, req->handle, req->u.mcast.gid);
		return 0;
	}
	slot = mcast_find(d, req->u.mcast.gid, true);
	if (!slot)
		return -ENOMEM;
	g = *slot;
	if (!g.nqp)
		memcpy(g.gid, req->u.mcast.gid, 16);
	for (uint32_t j = 0; j < g.nqp; j++)
		if (g.qpn[j] == req->handle)
			return 0; /* already attached: idempotent, as the kernel */
	if (g.nqp >= SR_MAX_MCAST_ATTACH)
		return -ENOMEM;
	g.qpn[g.nqp++] = req->handle;
	mcast_write(slot, &g);
	if (g.nqp == 1) {
		/* the first member on this host: other hosts' datagrams to it */
		int ret = sr_engine_mcast(g.gid, true);

		if (ret)
			sr_info("multicast: cannot join the group on the wire: %s", strerror(-ret));
	}
	return 0;
}

/* ---- dispatch ---- */

static void obj_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	switch (o->kind) {
	case SR_OBJ_FD:
		fd_destroy(d, o);
		break;
	case SR_OBJ_PD:
		pd_destroy(d, o);
		break;
	case SR_OBJ_MR:
		mr_destroy(d, o);
		break;
	case SR_OBJ_MW:
		mw_destroy(d, o);
		break;
	case SR_OBJ_CQ:
		cq_destroy(d, o);
		break;
	case SR_OBJ_SRQ:
		srq_destroy(d, o);
		break;
	case SR_OBJ_QP:
		if (o->refs)
			qp_pass_on(d, o); /* its owner goes; it lives on, opened */
		else
			qp_destroy(d, o);
		break;
	case SR_OBJ_XRCD:
		xrcd_destroy(d, o);
		break;
	case SR_OBJ_QPREF:
		qpref_destroy(d, o);
		break;
	default:
		obj_unlink(o);
	}
}

static int do_destroy(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
		      uint32_t handle)
{
	struct sr_obj *o = owned(d, c, kind, handle);

	if (!o)
		return -EINVAL;
	if (o->users)
		return -EBUSY;
	obj_destroy(d, o);
	return 0;
}

static int send_status(struct sr_daemon *d, struct sr_client *c, struct sr_rep *rep)
{
	size_t len;
	char *text = sr_status_text(d, &len);
	int ret;

	if (!text)
		return -ENOMEM;
	rep->status = 0;
	rep->u.status.len = len;
	ret = sr_client_send(c, rep, sizeof(*rep), NULL, 0);
	for (size_t off = 0; !ret && off < len; off += SR_STATUS_CHUNK) {
		size_t n = len - off < SR_STATUS_CHUNK ? len - off : SR_STATUS_CHUNK;

		ret = sr_client_send(c, text + off, n, NULL, 0);
	}
	free(text);
	return ret;
}

/*
 * The one way of turning a client away: a reply that carries the reason and
 * nothing else (no descriptor, no device, no state), after which client.c
 * drops the connection.  The client's library prints why (daemon_link.c).
 * Sent without waiting (the client's first request: its socket is empty);
 * a refusal the socket has no room for is lost, not queued, as the
 * connection closes at once.
 */
static void refuse(struct sr_daemon *d, struct sr_client *c, enum sr_refusal why, int status)
{
	struct sr_rep rep;

	memset(&rep, 0, sizeof(rep));
	rep.status = status;
	rep.u.refused.reason = why;
	rep.u.refused.version = SR_PROTO_VERSION;
	rep.u.refused.daemon_uid = (uint32_t)d->uid;
	rep.u.refused.client_uid = (uint32_t)c->uid;
	rep.u.refused.client_pid = (uint32_t)c->pid;
	if (sr_msg_try_send(c->sock, &rep, sizeof(rep), NULL, 0))
		sr_dbg("refusal to pid %d lost", (int)c->pid);
	c->refused = true;
}

int sr_handle_request(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req, int *fds,
		      int nfds)
{
	struct sr_rep rep;
	int out_fds[SR_MR_SEGS_PER_REC];
	int nout = 0, ret;

	memset(&rep, 0, sizeof(rep));
	/* Another account's process: whatever it asks, it learns nothing but
	 * the refusal (docs/architecture.md, "Trust model"). */
	if (c->foreign) {
		sr_warn("refusing %s (pid %d, uid %d): not this daemon's user (uid %u)", c->comm,
			(int)c->pid, (int)c->uid, (unsigned)d->uid);
		refuse(d, c, SR_REFUSED_UID, -EACCES);
		ret = 0; /* answered: never deferred */
		goto out;
	}
	if (req->op != SR_OP_HELLO && !c->id) {
		ret = -EPROTO;
		goto reply;
	}
	/* A monitor (softrdma status) was let in without the pid check and
	 * counts for neither the idle exit nor the status listing: it may
	 * only look.  HELLO is once per connection: a second one could turn a
	 * client holding resources into a monitor. */
	if (c->monitor && req->op != SR_OP_STATUS && req->op != SR_OP_HELLO &&
	    req->op != SR_OP_FAULT && req->op != SR_OP_TRACE) {
		ret = -EPERM;
		goto reply;
	}
	switch (req->op) {
	case SR_OP_HELLO:
		if (c->id) {
			ret = -EPROTO;
			break;
		}
		if (req->u.hello.version != SR_PROTO_VERSION) {
			sr_warn("refusing %s (pid %d): protocol %u, this daemon speaks %u", c->comm,
				(int)c->pid, req->u.hello.version, SR_PROTO_VERSION);
			refuse(d, c, SR_REFUSED_VERSION, -EPROTO);
			ret = 0;
			goto out;
		}
		/* Locks and reader slots in the arena name processes by pid
		 * (holder_dead, the epoch sweep): a client whose pid we see
		 * differently lives in another pid namespace, where those ids
		 * mean other processes.  A monitor touches neither. */
		if (!(req->u.hello.flags & 1) && req->u.hello.pid != (uint32_t)c->pid) {
			sr_warn("refusing %s (pid %u to itself, %u here): another pid namespace; "
				"it needs a softrdmad of its own",
				c->comm, req->u.hello.pid, (unsigned)c->pid);
			refuse(d, c, SR_REFUSED_PIDNS, -EXDEV);
			ret = 0;
			goto out;
		}
		c->id = ++d->next_client_id;
		c->monitor = req->u.hello.flags & 1;
		rep.u.hello = d->dev;
		rep.u.hello.client_id = c->id;
		rep.u.hello.life = c->monitor || c->internal ? 0 : sr_life_attach(d, c);
		out_fds[0] = d->arena_fd;
		nout = 1;
		ret = 0;
		break;
	case SR_OP_STATUS:
		if (send_status(d, c, &rep))
			sr_warn("client %u: status reply failed", c->id);
		ret = 0;
		goto out;
	case SR_OP_FAULT: /* the wire's fault injection (control.c) */
		ret = sr_ctl_fault(d, req, &rep);
		break;
	case SR_OP_TRACE:
		ret = sr_ctl_trace(d, req, fds, nfds, &rep);
		break;
	case SR_OP_REG_FD:
		ret = do_reg_fd(d, c, req, fds, nfds, &rep);
		break;
	case SR_OP_GET_FD: {
		/* Any client's eventfd (an executor signals the channel of a
		 * peer's CQ); registered memory only by key (MR_MAP). */
		struct sr_obj *f = sr_obj_lookup(d, SR_OBJ_FD, req->handle);

		if (f && f->u.fd.kind != SR_FD_EVENT)
			f = NULL;
		ret = f ? 0 : -ENOENT;
		if (f) {
			out_fds[0] = f->u.fd.fd;
			nout = 1;
		}
		break;
	}
	case SR_OP_CLOSE_FD:
		ret = do_destroy(d, c, SR_OBJ_FD, req->handle);
		break;
	case SR_OP_WIRE_RX: /* a receive half reads its member (shm/wire_rx.c) */
		out_fds[0] = c->rx_member ? sr_engine_rx_fd(c->rx_member) : -1;
		ret = out_fds[0] < 0 ? -ENODEV : 0;
		nout = ret ? 0 : 1;
		rep.handle = c->rx_member;
		break;
	case SR_OP_ALLOC_PD:
		ret = do_alloc_pd(d, c, &rep);
		break;
	case SR_OP_DEALLOC_PD:
		ret = do_destroy(d, c, SR_OBJ_PD, req->handle);
		break;
	case SR_OP_MR_SEGS:
		ret = do_mr_segs(c, req);
		break;
	case SR_OP_REG_MR:
		ret = do_reg_mr(d, c, req, &rep);
		break;
	case SR_OP_DEREG_MR:
		ret = do_destroy(d, c, SR_OBJ_MR, req->handle);
		break;
	case SR_OP_MR_MAP:
		ret = do_mr_map(d, c, req, &rep, out_fds, &nout);
		break;
	case SR_OP_REREG_MR:
		ret = do_rereg_mr(d, c, req, &rep);
		break;
	case SR_OP_CREATE_CQ:
		ret = do_create_cq(d, c, req, &rep);
		break;
	case SR_OP_RESIZE_CQ:
		ret = do_resize_cq(d, c, req, &rep);
		break;
	case SR_OP_DESTROY_CQ:
		ret = do_destroy(d, c, SR_OBJ_CQ, req->handle);
		break;
	case SR_OP_CREATE_QP:
		ret = do_create_qp_init(d, c, req, &rep);
		break;
	case SR_OP_MODIFY_QP:
		ret = do_modify_qp(d, c, req, &rep);
		break;
	case SR_OP_DESTROY_QP:
		ret = do_destroy_qp(d, c, req);
		break;
	case SR_OP_OPEN_QP:
		ret = do_open_qp(d, c, req, &rep);
		break;
	case SR_OP_OPEN_XRCD:
		ret = do_open_xrcd(d, c, req, fds, nfds, &rep);
		break;
	case SR_OP_CLOSE_XRCD:
		ret = do_destroy(d, c, SR_OBJ_XRCD, req->handle);
		break;
	case SR_OP_CREATE_SRQ:
		ret = do_create_srq(d, c, req, &rep);
		break;
	case SR_OP_MODIFY_SRQ:
		ret = do_modify_srq(d, c, req, &rep);
		break;
	case SR_OP_DESTROY_SRQ:
		ret = do_destroy(d, c, SR_OBJ_SRQ, req->handle);
		break;
	case SR_OP_ALLOC_MW:
		ret = do_alloc_mw(d, c, req, &rep);
		break;
	case SR_OP_DEALLOC_MW:
		ret = do_destroy(d, c, SR_OBJ_MW, req->handle);
		break;
	case SR_OP_ATTACH_MCAST:
		ret = do_attach_mcast(d, c, req, true);
		break;
	case SR_OP_DETACH_MCAST:
		ret = do_attach_mcast(d, c, req, false);
		break;
	default:
		if (req->op >= SR_OP_CM_CHANNEL_CREATE && req->op < SR_OP_MAX)
			ret = sr_cm_request(d, c, req, fds, nfds, &rep);
		else
			ret = -EOPNOTSUPP;
	}
reply:
	if (ret == SR_RETRY)
		goto out; /* these requests take no descriptors */
	if (ret == SR_REPLIED) {
		ret = 0;
		goto out;
	}
	rep.status = ret;
	if (ret)
		nout = 0;
	if (sr_client_send(c, &rep, sizeof(rep), out_fds, nout))
		sr_dbg("client %u: reply lost", c->id);
out:
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return ret == SR_RETRY ? SR_RETRY : 0;
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
	rx_member_release(d, c);
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

/* ---- timers ---- */

/*
 * Signals a completion channel or async event fd for a process that is not
 * running its data path.  Only an event fd, and never waiting: the daemon
 * serves every client from one thread, and a write to an eventfd whose
 * counter is at its maximum (2^64 - 2 events nobody read) blocks until its
 * owner reads.  Such an event is dropped, for an owner that was not reading
 * anyway.
 */
static void daemon_signal(void *arg, uint32_t fd_id)
{
	struct sr_obj *f = sr_obj_lookup(arg, SR_OBJ_FD, fd_id);
	struct pollfd p;
	uint64_t one = 1;

	if (!f || f->u.fd.kind != SR_FD_EVENT)
		return;
	p = (struct pollfd){.fd = f->u.fd.fd, .events = POLLOUT};
	if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT)) {
		sr_dbg("signal fd %u: no room, event dropped", fd_id);
		return;
	}
	if (write(f->u.fd.fd, &one, sizeof(one)) < 0)
		sr_dbg("signal fd %u: %m", fd_id);
}

/*
 * A sender waiting for a receive (RNR) at a responder that no longer
 * exists would wait forever with rnr_retry = 7; on a fabric its retries
 * would go unanswered instead, so the wait becomes an ACK timeout
 * (IBTA 9.7.6.1.3: timeout x (retry_cnt + 1), then RETRY_EXC_ERR).
 */
static void responder_gone(struct sr_daemon *d, struct sr_qp_shm *qp, uint64_t now)
{
	uint32_t idx = sr_qpn_index(qp->dest_qpn) % SR_MAX_QPS;
	struct sr_obj *peer = d->qp_by_idx[idx];
	uint64_t deadline = UINT64_MAX;

	if (atomic_load_explicit(&qp->stalled, memory_order_relaxed) != SR_STALL_RNR ||
	    (peer && peer->handle == qp->dest_qpn))
		return;
	if (sr_shm_trylock(&qp->sq_lock))
		return; /* its owner is running it: it will see the responder gone itself */
	if (qp->timeout)
		deadline = now + (4096ull << qp->timeout) * (qp->retry_cnt + 1ull);
	atomic_store_explicit(&qp->stall_deadline_ns, deadline, memory_order_relaxed);
	atomic_store_explicit(&qp->stalled, SR_STALL_NO_ACK, memory_order_release);
	sr_shm_unlock(&qp->sq_lock);
}

/*
 * Fails send queues whose RNR or ACK wait has run out, and pays owed SQ
 * flushes (sr_sq_flush_later), for processes that are not polling (blocked
 * in ibv_get_cq_event, or busy elsewhere): the completion and its event
 * must come anyway.  Returns true while any QP
 * still waits, so the caller keeps ticking often.
 */
bool sr_daemon_tick(struct sr_daemon *d)
{
	uint64_t now = sr_now_ns();
	bool waiting = false;

	for (struct sr_client *c = d->clients; c; c = c->next) {
		for (struct sr_obj *o = c->objs; o; o = o->cnext) {
			struct sr_qp_shm *qp;

			if (o->kind != SR_OBJ_QP)
				continue;
			qp = sr_arena_at(d->arena, o->u.shm.off);
			if (sr_sq_flush_owed(d->arena, qp, daemon_signal, d)) {
				waiting = true;
				continue;
			}
			if (!atomic_load_explicit(&qp->stalled, memory_order_acquire))
				continue;
			responder_gone(d, qp, now);
			if (!sr_qp_check_stall(d->arena, qp, now, 0, daemon_signal, d) &&
			    atomic_load_explicit(&qp->stalled, memory_order_relaxed) &&
			    atomic_load_explicit(&qp->stall_deadline_ns, memory_order_relaxed) !=
				UINT64_MAX)
				waiting = true;
		}
	}
	return waiting;
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
