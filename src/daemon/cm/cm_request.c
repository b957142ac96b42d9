/*
 * librdmacm's requests to the CM (SR_OP_CM_*): each is checked (the id or
 * channel must be the client's, addresses of a known family, lengths
 * within bounds) and handed to cm_id.c, cm_addr.c or cm_proto.c.  Also
 * the module's life: init, fini, and a client's exit or death, which
 * leaves its connections as destroying their ids does (the peers get REJ
 * or DREQ, so a survivor sees REJECTED or DISCONNECTED).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "daemon/cm/cm.h"

int sr_cm_init(struct sr_daemon *d)
{
	struct sr_cm *cm = calloc(1, sizeof(*cm));

	if (!cm)
		return -ENOMEM;
	cm->ids = calloc(SR_CM_MAX_IDS, sizeof(*cm->ids));
	cm->chans = calloc(SR_CM_MAX_CHANS, sizeof(*cm->chans));
	cm->by_port = calloc(65536, sizeof(*cm->by_port));
	cm->by_req = calloc(SR_CM_REQ_BUCKETS, sizeof(*cm->by_req));
	if (!cm->ids || !cm->chans || !cm->by_port || !cm->by_req ||
	    sr_idalloc_init(&cm->id_alloc, 1, SR_CM_MAX_IDS) ||
	    sr_idalloc_init(&cm->chan_alloc, 1, SR_CM_MAX_CHANS)) {
		free(cm->ids);
		free(cm->chans);
		free(cm->by_port);
		free(cm->by_req);
		free(cm);
		return -ENOMEM;
	}
	cm->q_tail = &cm->q_head;
	d->cm = cm;
	return 0;
}

void sr_cm_fini(struct sr_daemon *d)
{
	struct sr_cm *cm = d->cm;

	if (!cm)
		return;
	while (cm->q_head) {
		struct sr_cm_mad *q = cm->q_head;

		cm->q_head = q->next;
		free(q);
	}
	sr_cm_linger_fini(d);
	sr_idalloc_fini(&cm->id_alloc);
	sr_idalloc_fini(&cm->chan_alloc);
	free(cm->ids);
	free(cm->chans);
	free(cm->by_port);
	free(cm->by_req);
	free(cm);
	d->cm = NULL;
}

void sr_cm_client_gone(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_cm *cm = d->cm;

	if (!cm)
		return;
	for (struct sr_cm_id *id = cm->all, *next; id; id = next) {
		next = id->next;
		if (id->owner != c)
			continue;
		sr_cm_abandon(d, id);
		id->chan = NULL; /* its channel goes below: no events to drop one by one */
		sr_cm_id_free(d, id);
		/* freeing a listener may have freed children later in the list */
		next = cm->all;
	}
	for (uint32_t i = 0; i < SR_CM_MAX_CHANS; i++)
		if (cm->chans[i] && cm->chans[i]->owner == c)
			sr_cm_chan_free(d, cm->chans[i]);
	sr_cm_mad_run(d);
	sr_cm_signal_flush();
}

bool sr_cm_tick(struct sr_daemon *d)
{
	bool more = d->cm && sr_cm_mad_run(d);

	sr_cm_signal_flush();
	return more;
}

static bool is_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = 0;
	return !strcmp(target, "anon_inode:[eventfd]");
}

static int valid_ps(uint32_t ps, uint32_t qp_type)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC || qp_type == IBV_QPT_UD ||
		       qp_type == IBV_QPT_XRC_SEND || qp_type == IBV_QPT_XRC_RECV;
	case RDMA_PS_UDP:
		return qp_type == IBV_QPT_UD;
	case RDMA_PS_IPOIB:
		return 0; /* IB link layers only (KRN cma_acquire_dev: -EINVAL on RoCE) */
	default:
		return 0;
	}
}

int sr_cm_ib_request(struct sr_cm_id *id, const struct sr_req *req)
{
	uint32_t ps = req->u.cm.ps;

	if (!(req->u.cm.flags & SR_CM_AF_IB))
		return id->af_ib ? -EINVAL : 0; /* one family per id */
	if (ps && !id->bound) {
		if (ps != id->ps &&
		    !(id->ps == RDMA_PS_IB && (ps == RDMA_PS_TCP || ps == RDMA_PS_UDP)))
			return -EPROTONOSUPPORT;
		id->ps = ps;
	}
	id->af_ib = true;
	id->dst_sid = req->u.cm.sid;
	return 0;
}

/* rdma_bind_addr: an id that fails to bind is as it was. */
static int bind_id(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_req *req,
		   const struct sockaddr_storage *src)
{
	uint32_t ps = id->ps;
	int ret = sr_cm_ib_request(id, req);

	if (!ret)
		ret = sr_cm_bind(d, id, (const struct sockaddr *)src);
	if (ret) {
		id->ps = ps;
		id->af_ib = false;
	}
	return ret;
}

/*
 * A reply that carries up to max of ch's queued events (ch NULL: none):
 * the first in rep->u.cm_event, the others after struct sr_rep in the same
 * record, rep->handle says how many.  GET_EVENT asks for it, so a process
 * with many ids in flight (cmtime's 1,000) fetches a channel's queue in a
 * few round trips, not one per event; so do the requests whose events are
 * queued while they run (resolve, connect, accept...), and the library
 * then finds them without asking.  The eventfd keeps one count per event,
 * which the library consumes as it hands each one out.
 */
static int reply_events(struct sr_daemon *d, struct sr_client *c, struct sr_cm_chan *ch,
			uint32_t max, int status)
{
	size_t wl = sizeof(struct sr_cm_event_wire), len = sizeof(struct sr_rep);
	char buf[sizeof(struct sr_rep) + (SR_CM_EVENT_BATCH - 1) * sizeof(struct sr_cm_event_wire)]
	    __attribute__((aligned(8)));
	struct sr_rep *rep = (struct sr_rep *)buf;
	struct sr_cm_event_wire w;
	uint32_t n = 0;

	memset(rep, 0, sizeof(*rep));
	rep->status = status;
	if (max > SR_CM_EVENT_BATCH)
		max = SR_CM_EVENT_BATCH;
	if (ch && max && !sr_cm_event_get(d, ch, &rep->u.cm_event))
		n = 1;
	while (n && n < max && !sr_cm_event_get(d, ch, &w)) {
		memcpy(buf + len, &w, wl);
		len += wl;
		n++;
	}
	rep->handle = n;
	if (sr_client_send(c, buf, len, NULL, 0))
		sr_dbg("client %u: reply lost", c->id);
	return SR_REPLIED;
}

/* Requests that may carry their channel's events back (u.cm.value > 1,
 * u.cm.channel the id's channel as the library knows it). */
static bool carries_events(uint32_t op)
{
	switch (op) {
	case SR_OP_CM_RESOLVE_ADDR:
	case SR_OP_CM_RESOLVE_ROUTE:
	case SR_OP_CM_CONNECT:
	case SR_OP_CM_ACCEPT:
	case SR_OP_CM_REJECT:
	case SR_OP_CM_ESTABLISH:
	case SR_OP_CM_DISCONNECT:
		return true;
	default:
		return false;
	}
}

static int do_request(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req, int *fds,
		      int nfds, struct sr_rep *rep)
{
	struct sockaddr_storage src, dst;
	struct sr_cm_chan *ch;
	struct sr_cm_id *id = NULL;
	int ret;

	switch (req->op) {
	case SR_OP_CM_CHANNEL_CREATE:
		if (nfds != 1 || !is_eventfd(fds[0]))
			return -EINVAL;
		ret = sr_cm_chan_new(d, c, fds[0], &rep->handle);
		if (!ret)
			fds[0] = -1; /* consumed */
		return ret;
	case SR_OP_CM_CHANNEL_DESTROY:
		ch = sr_cm_chan_owned(d, c, req->handle);
		if (!ch)
			return -EINVAL;
		for (struct sr_cm_id *o = d->cm->all; o; o = o->next)
			if (o->chan == ch)
				return -EBUSY;
		sr_cm_chan_free(d, ch);
		return 0;
	case SR_OP_CM_CREATE_ID:
		ch = sr_cm_chan_owned(d, c, req->u.cm.channel);
		if (!ch)
			return -EINVAL;
		if (req->u.cm.ps == RDMA_PS_IPOIB)
			return -EINVAL;
		if (!valid_ps(req->u.cm.ps, req->u.cm.qp_type))
			return -EPROTONOSUPPORT;
		id = sr_cm_id_new(d, c, ch, req->u.cm.ps, req->u.cm.qp_type);
		if (!id)
			return -ENOMEM;
		rep->handle = id->handle;
		return 0;
	case SR_OP_CM_GET_EVENT:
		ch = sr_cm_chan_owned(d, c, req->handle);
		if (!ch)
			return -EINVAL;
		if (req->u.cm.value > 1)
			return reply_events(d, c, ch, req->u.cm.value, 0);
		return sr_cm_event_get(d, ch, &rep->u.cm_event);
	default:
		break;
	}
	id = sr_cm_id_owned(d, c, req->handle);
	if (!id)
		return -EINVAL;
	if (req->u.cm.private_len > sizeof(req->u.cm.private_data))
		return -EINVAL;
	switch (req->op) {
	case SR_OP_CM_DESTROY_ID:
		/* rep->handle: the events dropped from the id's channel, whose
		 * counts the library takes out of its eventfd */
		sr_cm_abandon(d, id);
		rep->handle = sr_cm_events_drop(d, id);
		sr_cm_id_free(d, id);
		return 0;
	case SR_OP_CM_QUERY:
		sr_cm_id_info(id, &rep->u.cm_info);
		return 0;
	case SR_OP_CM_BIND:
		ret = sr_cm_sockaddr_in(req->u.cm.src, &src);
		if (ret)
			return ret == -ENOENT ? -EINVAL : ret;
		if (id->bound || id->state != SR_CM_IDLE)
			return -EINVAL;
		ret = bind_id(d, id, req, &src);
		sr_cm_id_info(id, &rep->u.cm_info);
		return ret;
	case SR_OP_CM_RESOLVE_ADDR:
		ret = sr_cm_sockaddr_in(req->u.cm.dst, &dst);
		if (ret)
			return ret == -ENOENT ? -EINVAL : ret;
		ret = sr_cm_sockaddr_in(req->u.cm.src, &src);
		if (ret && ret != -ENOENT)
			return ret;
		if ((req->u.cm.flags & SR_CM_AF_IB || id->af_ib) &&
		    (id->state == SR_CM_IDLE || id->state == SR_CM_ADDR_BOUND ||
		     id->state == SR_CM_ADDR_RESOLVED)) {
			int r = sr_cm_ib_request(id, req);

			if (r)
				return r;
		}
		return sr_cm_resolve_addr(d, id, ret ? NULL : (struct sockaddr *)&src,
					  (struct sockaddr *)&dst, req->u.cm.timeout_ms);
	case SR_OP_CM_RESOLVE_ROUTE:
		return sr_cm_resolve_route(d, id);
	case SR_OP_CM_LISTEN:
		if (id->state == SR_CM_LISTEN) { /* a new backlog, as the kernel allows */
			id->backlog = req->u.cm.backlog;
		} else {
			if (!id->bound)
				return -EINVAL; /* the library binds first */
			if (id->state != SR_CM_ADDR_BOUND && id->state != SR_CM_ADDR_RESOLVED)
				return -EINVAL;
			ret = sr_cm_listen_check(d, id);
			if (ret)
				return ret;
			id->state = SR_CM_LISTEN;
		}
		sr_cm_unpark(d, id, true); /* REQs that came before the listen */
		id->backlog = req->u.cm.backlog <= 0 || req->u.cm.backlog > SR_CM_MAX_BACKLOG
				  ? SR_CM_MAX_BACKLOG
				  : req->u.cm.backlog;
		return 0;
	case SR_OP_CM_CONNECT:
		return sr_cm_connect(d, id, req);
	case SR_OP_CM_ACCEPT:
		return sr_cm_accept(d, id, req);
	case SR_OP_CM_REJECT:
		return sr_cm_reject(d, id, req);
	case SR_OP_CM_ESTABLISH:
		return sr_cm_establish(d, id);
	case SR_OP_CM_DISCONNECT:
		return sr_cm_disconnect(d, id);
	case SR_OP_CM_MIGRATE:
		ch = sr_cm_chan_owned(d, c, req->u.cm.channel);
		if (!ch)
			return -EINVAL;
		/* rep->handle: the events moved off the old channel (as for
		 * DESTROY_ID) */
		if (ch != id->chan)
			rep->handle = sr_cm_events_move(d, id, ch);
		return 0;
	case SR_OP_CM_JOIN: {
		struct sr_cm_event *ev;

		/* rdma-core: a UD id bound to the device (bound to a local
		 * address, or its address resolved); RoCE has no SA, so the
		 * join completes here and now (the kernel's iboe join) */
		ret = sr_cm_sockaddr_in(req->u.cm.dst, &dst);
		if (ret)
			return ret == -ENOENT ? -EINVAL : ret;
		if (!sr_cm_addr_mcast(&dst) || id->qp_type != IBV_QPT_UD || !id->port_num ||
		    (id->state != SR_CM_ADDR_BOUND && id->state != SR_CM_ADDR_RESOLVED))
			return -EINVAL;
		ev = sr_cm_event_new(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
		if (!ev)
			return -ENOMEM;
		ev->w.conn.qp_num = 0xFFFFFF;
		ev->w.conn.qkey = 0x01234567; /* RDMA_UDP_QKEY */
		sr_cm_mgid_of(&dst, ev->w.private_data);
		ev->w.private_len = 16;
		sr_cm_event_post(id, ev);
		return 0;
	}
	case SR_OP_CM_SET_OPTION:
		switch (req->u.cm.option) {
		case RDMA_OPTION_ID_TOS:
			id->tos = (uint8_t)req->u.cm.value;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
			if (id->bound)
				return -EINVAL;
			id->reuseaddr = req->u.cm.value != 0;
			return 0;
		case RDMA_OPTION_ID_AFONLY:
			if (id->bound)
				return -EINVAL;
			id->afonly = req->u.cm.value != 0;
			return 0;
		default:
			return -ENOSYS;
		}
	default:
		return -EINVAL;
	}
}

/* ACCEPT and ESTABLISH may carry the QP moves librdmacm makes just before
 * them (RTR, RTS): made first, and the step only if they all succeed, so
 * a connection's QP moves cost no round trip of their own.  DISCONNECT
 * may carry the move to ERR, which librdmacm never let fail it. */
static int qp_moves(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req)
{
	int ret;

	if (req->op != SR_OP_CM_ACCEPT && req->op != SR_OP_CM_ESTABLISH &&
	    req->op != SR_OP_CM_DISCONNECT)
		return 0;
	if (!req->u.cm.qp.n)
		return 0;
	if (!sr_cm_id_owned(d, c, req->handle))
		return -EINVAL;
	ret = sr_qp_moves(d, c, &req->u.cm.qp, -1);
	return ret && ret != SR_RETRY && req->op == SR_OP_CM_DISCONNECT ? 0 : ret;
}

int sr_cm_request(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req, int *fds,
		  int nfds, struct sr_rep *rep)
{
	struct sr_cm_id *qid = NULL;
	bool quiet;
	int ret;

	if (!d->cm)
		return -ENODEV;
	ret = qp_moves(d, c, req);
	if (ret == SR_RETRY)
		return SR_RETRY; /* nothing done: the whole request runs again */
	/* (proto.h) a resolution that wants no reply, on an id of this
	 * client's (any other record, garbage included, is answered) */
	quiet = req->op == SR_OP_CM_RESOLVE_ADDR && (req->u.cm.flags & SR_CM_NO_REPLY) &&
		(qid = sr_cm_id_owned(d, c, req->handle)) != NULL;
	if (!ret)
		ret = do_request(d, c, req, fds, nfds, rep);
	if (quiet) {
		/* a failure the reply would have carried: the id's ADDR_ERROR */
		if (ret && qid->chan)
			sr_cm_event_post(qid, sr_cm_event_new(qid, RDMA_CM_EVENT_ADDR_ERROR, ret));
		sr_cm_signal_flush();
		return SR_REPLIED;
	}
	/* what the request queued goes before its reply, so the events it
	 * causes are there when the library reads them */
	sr_cm_mad_run(d);
	if (ret != SR_REPLIED && carries_events(req->op) && req->u.cm.value > 1) {
		struct sr_cm_id *id = sr_cm_id_owned(d, c, req->handle);
		struct sr_cm_chan *ch = sr_cm_chan_owned(d, c, req->u.cm.channel);

		ret = reply_events(d, c, id && id->chan == ch ? ch : NULL, req->u.cm.value, ret);
	}
	sr_cm_signal_flush();
	return ret;
}
