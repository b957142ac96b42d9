/*
 * Memory regions and memory windows (REG_MR, REREG_MR, DEREG_MR, MR_SEGS,
 * MR_MAP, ALLOC_MW, DEALLOC_MW): the checks of a registration, its
 * segments (the client's registered memfds behind the range), and the key
 * entry in the arena that the data path resolves lkeys and rkeys with.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/objects.h"

#define SR_ACCESS_ALL                                                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |                   \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

/* Stages segments of the next REG_MR or REREG_MR of this client (an MR over
 * more backings than one record carries). */
int sr_op_mr_segs(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		  struct sr_op_io *io)
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

	if (!sr_obj_owned(d, c, SR_OBJ_PD, r->pd))
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

/* Takes the request's iova and access into o's record and publishes its key
 * entry, under the entry's seqlock, then fills in the reply; a reg_seq other
 * than the entry's makes peers map the pages again.  The daemon's own copy
 * (o->u.mr.reg_seq) is what MR_MAP reports. */
static void mr_publish(struct sr_daemon *d, struct sr_obj *o,
		       const __typeof__(((struct sr_req *)0)->u.reg_mr) *r, uint64_t reg_seq,
		       struct sr_rep *rep)
{
	struct sr_key_entry e;

	o->u.mr.iova = r->iova;
	o->u.mr.access = r->access;
	memset(&e, 0, sizeof(e));
	e.key = o->handle;
	e.kind = SR_KEY_MR;
	e.pd = r->pd;
	e.access = o->u.mr.access;
	e.owner_pid = o->owner->pid;
	e.iova = o->u.mr.iova;
	e.length = o->u.mr.length;
	e.addr = o->u.mr.addr;
	e.reg_seq = reg_seq;
	o->u.mr.reg_seq = reg_seq;
	sr_key_publish(sr_key_slot(d, o->handle), &e);
	rep->handle = o->handle;
	rep->u.mr.lkey = rep->u.mr.rkey = o->handle;
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

int sr_op_reg_mr(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		 struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
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
	ret = sr_obj_new_numbered(d, c, SR_OBJ_MR, &o);
	if (ret)
		goto out;
	sr_obj_hold(o, sr_obj_owned(d, c, SR_OBJ_PD, r->pd));
	mr_set_translation(o, req, segs, nsegs);
	segs = NULL;
	mr_publish(d, o, r, reg_seq_new(d), rep);
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
int sr_op_rereg_mr(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		   struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	const __typeof__(req->u.reg_mr) *r = &req->u.reg_mr;
	struct sr_obj *o = sr_obj_owned(d, c, SR_OBJ_MR, req->handle);
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
	pd = sr_obj_owned(d, c, SR_OBJ_PD, r->pd);
	if (o->deps[0] != pd) {
		o->deps[0]->users--;
		o->deps[0] = pd;
		pd->users++;
		/* teardown goes newest first: the MR must go before the PD it now
		 * holds, which may be younger than the MR */
		sr_obj_to_front(o);
	}
	reg_seq = o->u.mr.reg_seq;
	if (translation) {
		mr_set_translation(o, req, segs, nsegs);
		segs = NULL;
		reg_seq = reg_seq_new(d);
	}
	mr_publish(d, o, r, reg_seq, rep);
	ret = 0;
out:
	free(segs);
	return ret;
}

void sr_mr_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	sr_key_free(d, o);
	free(o->u.mr.segs);
	sr_obj_unlink(o);
}

/* Hands the memfds behind a key's MR to any client that must reach it
 * (the initiator of a one-sided operation, or a SEND's executor), at most
 * SR_MR_SEGS_PER_REC per request. */
int sr_op_mr_map(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		 struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
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
		io->out_fds[i] = f->u.fd.fd;
	}
	io->nout = count;
	rep->handle = o->handle;
	return 0;
}

int sr_op_alloc_mw(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		   struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	struct sr_obj *pd = sr_obj_owned(d, c, SR_OBJ_PD, req->u.mw.pd);
	struct sr_key_entry e;
	struct sr_obj *o;
	int ret;

	if (!pd)
		return -EINVAL;
	if (req->u.mw.type != IBV_MW_TYPE_1 && req->u.mw.type != IBV_MW_TYPE_2)
		return -EINVAL;
	ret = sr_obj_new_numbered(d, c, SR_OBJ_MW, &o);
	if (ret)
		return ret;
	sr_obj_hold(o, pd);
	o->u.mw.type = req->u.mw.type;
	memset(&e, 0, sizeof(e));
	e.key = o->handle;
	e.kind = req->u.mw.type == IBV_MW_TYPE_1 ? SR_KEY_MW1 : SR_KEY_MW2;
	e.pd = req->u.mw.pd;
	e.owner_pid = c->pid;
	e.reg_seq = atomic_fetch_add(&((struct sr_arena_hdr *)d->arena)->reg_seq, 1) + 1;
	sr_key_publish(sr_key_slot(d, o->handle), &e);
	rep->handle = o->handle;
	rep->u.mw.rkey = o->handle;
	return 0;
}

void sr_mw_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	sr_key_free(d, o);
	sr_obj_unlink(o);
}
