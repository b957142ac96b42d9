/*
 * Multicast (ATTACH_MCAST, DETACH_MCAST): the arena's table of the groups
 * UD QPs on this host have joined, written under each group's seqlock for
 * the data path to read, and the host's membership on the wire (the
 * engine), joined with a group's first member and left with its last.
 */
#include <errno.h>
#include <string.h>

#include "core/log.h"
#include "core/seqlock.h"
#include "daemon/objects.h"
#include "engine/engine.h"
#include "wire/gid.h"

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
void sr_mcast_detach_qp(struct sr_daemon *d, uint32_t qpn, const uint8_t *gid)
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

static int mcast_attach(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
			bool attach)
{
	struct sr_obj *o = sr_obj_owned(d, c, SR_OBJ_QP, req->handle);
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
		sr_mcast_detach_qp(d, req->handle, req->u.mcast.gid);
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

int sr_op_attach_mcast(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		       struct sr_op_io *io)
{
	return mcast_attach(d, c, req, true);
}

int sr_op_detach_mcast(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		       struct sr_op_io *io)
{
	return mcast_attach(d, c, req, false);
}
