/*
 * Event channels and events.  A channel's fd is an eventfd in semaphore
 * mode that the daemon writes once per event it queues for the channel:
 * pollable, blocking by default, -1/EAGAIN once the application makes it
 * O_NONBLOCK.  rdma_get_cm_event reads one count, then fetches the event
 * (with its private data) from the daemon and finishes what rdma-core's
 * librdmacm finishes in user space: the new id of a CONNECT_REQUEST, the
 * QP's RTR/RTS and the RTU on a CONNECT_RESPONSE (reported as ESTABLISHED),
 * the QP to ERR on REJECTED.  A count with no event behind it (an event
 * the daemon dropped on its own account) is read past.  Each event is
 * counted on its id until acked (a CONNECT_REQUEST on its listener, as
 * rdma-core's): rdma_destroy_id and rdma_migrate_id wait for that.
 *
 * One fetch takes up to SR_CM_EVENT_BATCH queued events at once (a process
 * with a thousand ids in flight would otherwise pay a round trip to the
 * daemon per event); those not handed out yet wait in the channel, their
 * counts still in the eventfd.  Destroying or migrating an id does to them
 * what the daemon does to its queued ones (drop, or move to the new
 * channel), under the channel's lock, so no fetch slips in between.  The
 * counts go with the events: the new channel's eventfd gets one for each
 * moved, and the old one loses those of the events that left it (the
 * daemon says how many of its queued ones), so that each fd polls readable
 * exactly while its own channel holds events, as the kernel's do.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rdmacm/internal.h"

struct rdma_event_channel *cm_channel_new(void)
{
	struct sr_req req;
	struct sr_rep rep;
	struct cm_chan *c;
	int efd, ret;

	if (cm_init())
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (efd < 0) {
		free(c);
		return NULL;
	}
	cm_req_init(&req, SR_OP_CM_CHANNEL_CREATE, 0);
	ret = cm_request(&req, &rep, &efd, 1);
	if (ret) {
		close(efd);
		free(c);
		errno = -ret;
		return NULL;
	}
	c->ch.fd = efd;
	c->handle = rep.handle;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->landed, NULL);
	c->tail = &c->head;
	return &c->ch;
}

/*
 * Takes the counts of n events that left c out of its eventfd, never
 * waiting (the application's fd may be blocking): a count a reader of c
 * took meanwhile is not there to take, and that reader's fetch then finds
 * no event and reads again, as it would have blocked or seen EAGAIN had the
 * event never been there.
 */
static void chan_uncount(struct cm_chan *c, uint32_t n)
{
	int saved = errno;
	uint64_t v;
	struct iovec iov = {.iov_base = &v, .iov_len = sizeof(v)};

	while (n) {
		ssize_t r = preadv2(c->ch.fd, &iov, 1, -1, RWF_NOWAIT);

		if (r < 0 && errno == EOPNOTSUPP) {
			/* a kernel without RWF_NOWAIT on eventfds (before
			 * 5.12): read only what poll says is there */
			struct pollfd p = {.fd = c->ch.fd, .events = POLLIN};

			if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
				break;
			r = read(c->ch.fd, &v, sizeof(v));
		}
		if (r == sizeof(v))
			n--;
		else if (r >= 0 || errno != EINTR)
			break;
	}
	errno = saved;
}

/* Takes the fetched events that fit (those of id, and CONNECT_REQUESTs for
 * listener id; every one with all) out of c, into *out in order; how many.
 * Under c->lock. */
static uint32_t cached_take(struct cm_chan *c, uint32_t id, bool all, struct cm_cached **out)
{
	struct cm_cached **pp = &c->head, **ot = out;
	uint32_t n = 0;

	while (*ot)
		ot = &(*ot)->next;
	c->tail = &c->head;
	while (*pp) {
		struct cm_cached *e = *pp;

		if (all || e->w.id == id ||
		    (e->w.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->w.listen_id == id)) {
			*pp = e->next;
			e->next = NULL;
			*ot = e;
			ot = &e->next;
			n++;
			continue;
		}
		c->tail = &e->next;
		pp = &e->next;
	}
	return n;
}

/* Destroys id handle in the daemon: how many of its queued events left its
 * channel then (0 on an error). */
static uint32_t destroy_in_daemon(uint32_t handle)
{
	struct sr_req req;
	struct sr_rep rep;

	cm_req_init(&req, SR_OP_CM_DESTROY_ID, handle);
	return cm_request(&req, &rep, NULL, 0) ? 0 : rep.handle;
}

/* Fetched events nobody will see, taken out of c: a connection request's
 * new id (not except), which the daemon counts as reported, is destroyed,
 * so the requester gets a REJ, as for a request dropped in the daemon. */
static void cached_free(struct cm_chan *c, struct cm_cached *list, uint32_t except)
{
	while (list) {
		struct cm_cached *e = list;

		list = e->next;
		if (e->w.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->w.id != except)
			chan_uncount(c, destroy_in_daemon(e->w.id));
		free(e);
	}
}

/* Appends the events in list to c, each with a count in c's eventfd. */
static void cached_put(struct cm_chan *c, struct cm_cached *list)
{
	uint64_t one = 1;

	while (list) {
		struct cm_cached *e = list;

		list = e->next;
		e->next = NULL;
		*c->tail = e;
		c->tail = &e->next;
		if (write(c->ch.fd, &one, sizeof(one)) != sizeof(one))
			break; /* a full count cannot happen: the daemon's would first */
	}
}

/* A reply with events (len bytes at buf: rep->handle events, the first in
 * rep->u.cm_event, from == 0) or from its second one on (from == 1): kept
 * in c, in order.  Under c->lock. */
static void cached_add(struct cm_chan *c, const char *buf, size_t len, uint32_t from)
{
	const struct sr_rep *rep = (const struct sr_rep *)buf;
	size_t wl = sizeof(struct sr_cm_event_wire);

	for (uint32_t i = from; i < rep->handle; i++) {
		size_t off = i ? sizeof(*rep) + (i - 1) * wl : 0;
		struct cm_cached *e;

		if (i && off + wl > len)
			break;
		e = malloc(sizeof(*e));
		if (!e)
			break; /* lost, as the daemon loses one without memory */
		memcpy(&e->w, i ? buf + off : (const char *)&rep->u.cm_event, wl);
		e->next = NULL;
		*c->tail = e;
		c->tail = &e->next;
	}
}

/* The next event for c: a fetched one, else a fetch (-EAGAIN: none).
 * Under c->lock.  A request in flight may be bringing the event whose
 * count the caller read (cm_id_request): its reply is awaited first. */
static int chan_next(struct cm_chan *c, struct sr_cm_event_wire *w)
{
	char buf[SR_CM_EVENTS_REPLY] __attribute__((aligned(8)));
	struct sr_rep *rep = (struct sr_rep *)buf;
	struct cm_cached *e;
	struct sr_req req;
	size_t len;
	int ret;

	while (!c->head && c->inflight)
		pthread_cond_wait(&c->landed, &c->lock);
	e = c->head;
	if (e) {
		c->head = e->next;
		if (!c->head)
			c->tail = &c->head;
		*w = e->w;
		free(e);
		return 0;
	}
	cm_req_init(&req, SR_OP_CM_GET_EVENT, c->handle);
	req.u.cm.value = SR_CM_EVENT_BATCH;
	ret = cm_request_long(&req, rep, sizeof(buf), &len);
	if (ret)
		return ret;
	*w = rep->u.cm_event;
	cached_add(c, buf, len, 1); /* a daemon that sends one says 0 or 1 */
	return 0;
}

int cm_id_request(struct cm_id *id, struct sr_req *req, struct sr_rep *rep)
{
	struct cm_chan *c = (struct cm_chan *)id->id.channel;
	char buf[SR_CM_EVENTS_REPLY] __attribute__((aligned(8)));
	size_t len = 0;
	int ret;

	/* not under c->lock: the event thread keeps handing out fetched
	 * events meanwhile (the daemon counts this reply's events in the
	 * eventfd only once it is sent) */
	pthread_mutex_lock(&c->lock);
	c->inflight++;
	pthread_mutex_unlock(&c->lock);
	req->u.cm.channel = c->handle;
	req->u.cm.value = SR_CM_EVENT_BATCH;
	ret = cm_request_long(req, (struct sr_rep *)buf, sizeof(buf), &len);
	pthread_mutex_lock(&c->lock);
	if (len >= sizeof(*rep))
		cached_add(c, buf, len, 0);
	c->inflight--;
	pthread_cond_broadcast(&c->landed);
	pthread_mutex_unlock(&c->lock);
	if (len >= sizeof(*rep))
		memcpy(rep, buf, sizeof(*rep));
	return ret;
}

int cm_chan_local_event(struct cm_id *id, uint32_t event)
{
	struct cm_chan *c = (struct cm_chan *)id->id.channel;
	struct cm_cached *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->w.event = event;
	e->w.id = id->handle;
	e->w.info = id->info;
	pthread_mutex_lock(&c->lock);
	cached_put(c, e);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int cm_id_op_events(struct cm_id *id, uint32_t op)
{
	struct sr_req req;
	struct sr_rep rep;

	cm_req_init(&req, op, id->handle);
	return cm_id_request(id, &req, &rep);
}

void cm_chan_destroy_id(struct cm_id *id)
{
	struct cm_chan *c = (struct cm_chan *)id->id.channel;
	struct cm_cached *gone = NULL;
	uint32_t n;

	pthread_mutex_lock(&c->lock);
	n = destroy_in_daemon(id->handle);
	n += cached_take(c, id->handle, false, &gone);
	chan_uncount(c, n);
	pthread_mutex_unlock(&c->lock);
	cached_free(c, gone, id->handle);
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
	return cm_channel_new();
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_chan *c = (struct cm_chan *)channel;
	struct cm_cached *gone = NULL;
	struct sr_req req;
	struct sr_rep rep;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	cached_take(c, 0, true, &gone);
	pthread_mutex_unlock(&c->lock);
	cached_free(c, gone, 0);
	cm_req_init(&req, SR_OP_CM_CHANNEL_DESTROY, c->handle);
	cm_request(&req, &rep, NULL, 0);
	close(c->ch.fd);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->landed);
	free(c);
}

/* What a REP tells the active side (its CONNECT_RESPONSE). */
static void conn_response_fields(struct cm_id *id, const struct sr_cm_event_wire *w)
{
	id->remote_qpn = w->conn.qp_num;
	id->remote_psn = w->remote_psn;
	id->peer_resp_res = w->conn.responder_resources;
	id->peer_init_depth = w->conn.initiator_depth;
}

/* The event's payload in the application's terms. */
static void fill_conn(struct cm_event *e, const struct sr_cm_event_wire *w)
{
	struct rdma_conn_param *p = &e->ev.param.conn;

	memcpy(e->priv, w->private_data, sizeof(e->priv));
	p->private_data = w->private_len ? e->priv : NULL;
	p->private_data_len = (uint8_t)(w->private_len > 255 ? 255 : w->private_len);
	p->responder_resources = w->conn.responder_resources;
	p->initiator_depth = w->conn.initiator_depth;
	p->flow_control = w->conn.flow_control;
	p->retry_count = w->conn.retry_count;
	p->rnr_retry_count = w->conn.rnr_retry_count;
	p->srq = w->conn.srq;
	p->qp_num = w->conn.qp_num;
}

static void fill_ud(struct cm_event *e, struct cm_id *id, const struct sr_cm_event_wire *w, bool ah)
{
	struct rdma_ud_param *p = &e->ev.param.ud;

	memcpy(e->priv, w->private_data, sizeof(e->priv));
	p->private_data = w->private_len ? e->priv : NULL;
	p->private_data_len = (uint8_t)(w->private_len > 255 ? 255 : w->private_len);
	p->qp_num = w->conn.qp_num;
	p->qkey = w->conn.qkey;
	if (ah) {
		p->ah_attr.is_global = 1;
		memcpy(p->ah_attr.grh.dgid.raw, id->info.dgid, 16);
		p->ah_attr.grh.sgid_index = (uint8_t)cm_gid_index(id->info.sgid);
		p->ah_attr.grh.hop_limit = 64;
		p->ah_attr.grh.traffic_class = id->tos;
		p->ah_attr.port_num = 1;
	}
}

/* A CONNECT_REQUEST's new id: the listener's channel and context. */
static struct cm_id *new_child(struct cm_id *l, const struct sr_cm_event_wire *w)
{
	struct cm_id *c = cm_id_alloc(l->id.channel, l->id.context, l->id.ps, l->id.qp_type, w->id);

	if (!c)
		return NULL;
	c->tos = l->tos;
	c->ack_timeout = l->ack_timeout;
	c->af_ib = l->af_ib;
	c->ib_ps = l->ib_ps;
	c->remote_qpn = w->conn.qp_num;
	c->remote_psn = w->remote_psn;
	c->remote_qkey = w->conn.qkey;
	c->peer_resp_res = w->conn.responder_resources;
	c->peer_init_depth = w->conn.initiator_depth;
	c->retry = w->conn.retry_count;
	c->rnr_retry = w->conn.rnr_retry_count;
	/* a synchronous listener's requests go to ids of their own */
	if (l->sync && rdma_migrate_id(&c->id, NULL)) {
		struct sr_req req;
		struct sr_rep rep;

		cm_req_init(&req, SR_OP_CM_DESTROY_ID, c->handle);
		cm_request(&req, &rep, NULL, 0);
		cm_id_table_set(c->handle, NULL);
		free(c);
		return NULL;
	}
	return c;
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_chan *c = (struct cm_chan *)channel;
	struct sr_cm_event_wire wire, *w = &wire;
	struct cm_event *e;
	struct sr_req req;
	struct sr_rep rep;
	struct cm_id *id, *listen = NULL;
	uint64_t v;
	int ret;

	if (!c || !event)
		return cm_err(EINVAL);
again:
	if (read(c->ch.fd, &v, sizeof(v)) != sizeof(v)) {
		if (errno == EINTR)
			goto again;
		return -1; /* EAGAIN on an O_NONBLOCK channel */
	}
	pthread_mutex_lock(&c->lock);
	ret = chan_next(c, w);
	pthread_mutex_unlock(&c->lock);
	if (ret == -EAGAIN)
		goto again; /* a count left by an event the daemon dropped or moved */
	if (ret)
		return cm_err(-ret);
	if (w->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		/* counted on the listener until acked, not on the new id
		 * (rdma-core's evt->id_priv): the new id can be migrated or
		 * destroyed before the request is acked, and the listener
		 * cannot be destroyed before */
		listen = cm_id_table_hold(w->listen_id);
		if (!listen)
			goto again; /* its listener is being destroyed */
		id = new_child(listen, w);
		if (!id) {
			cm_id_release(listen);
			cm_req_init(&req, SR_OP_CM_REJECT, w->id);
			cm_request(&req, &rep, NULL, 0);
			goto again;
		}
	} else {
		id = cm_id_table_hold(w->id);
		if (!id)
			goto again; /* being destroyed */
	}
	cm_id_apply_info(id, &w->info);
	e = calloc(1, sizeof(*e));
	if (!e) {
		cm_id_release(listen ? listen : id);
		return cm_err(ENOMEM);
	}
	e->ev.id = &id->id;
	e->ev.listen_id = listen ? &listen->id : NULL;
	e->ev.event = w->event;
	e->ev.status = w->status;
	e->owner = listen ? listen : id;

	switch (w->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		id->id.verbs = cm_g.verbs;
		id->id.pd = cm_g.pd;
		id->addr_ok = !w->status;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		id->id.route.num_paths = 1;
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		/* UD: the AH back to the requester too, where the kernel
		 * leaves it zero (qperf's UD accept builds its AH from it) */
		if (id->id.qp_type == IBV_QPT_UD)
			fill_ud(e, id, w, true);
		else
			fill_conn(e, w);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		conn_response_fields(id, w);
		fill_conn(e, w);
		if (id->id.qp) {
			/* rdma-core's ucma_process_conn_resp: the library
			 * finishes the connection and reports ESTABLISHED */
			ret = cm_conn_response(id);
			if (ret) {
				e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
				e->ev.status = ret;
				id->connect_error = true;
			} else {
				e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
			}
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (id->id.qp_type == IBV_QPT_UD) {
			id->remote_qpn = w->conn.qp_num;
			id->remote_qkey = w->conn.qkey;
			fill_ud(e, id, w, true);
		} else {
			if (w->flags & SR_CM_EV_QP_MOVED && id->id.qp) {
				/* the CONNECT_RESPONSE the daemon finished */
				conn_response_fields(id, w);
				cm_conn_moved(id);
			}
			fill_conn(e, w);
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (id->connect_error) {
			free(e);
			cm_id_release(id);
			goto again;
		}
		cm_qp_to_err(id);
		fill_conn(e, w);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		if (id->id.qp_type == IBV_QPT_UD)
			fill_ud(e, id, w, false);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		cm_mc_event(e, id, w);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (id->connect_error) {
			free(e);
			cm_id_release(id);
			goto again;
		}
		break;
	default:
		break;
	}
	*event = &e->ev;
	return 0;
}

void cm_id_release(struct cm_id *id)
{
	pthread_mutex_lock(&id->lock);
	id->events_unacked--;
	pthread_cond_broadcast(&id->cond);
	pthread_mutex_unlock(&id->lock);
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;
	struct cm_id *id;

	if (!e)
		return cm_err(EINVAL);
	id = e->owner;
	if (e->mc)
		cm_mc_acked(id, e->mc);
	free(e);
	cm_id_release(id);
	return 0;
}

int cm_complete(struct cm_id *id)
{
	struct rdma_cm_event *ev;
	int ret;

	if (!id->sync)
		return 0;
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	ret = rdma_get_cm_event(id->id.channel, &id->id.event);
	if (ret)
		return ret;
	ev = id->id.event;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			return cm_err(ECONNREFUSED);
		return cm_err(ev->status < 0 ? -ev->status : ev->status);
	}
	return 0;
}

/*
 * Moves id's events to channel `to` in the daemon, then its fetched ones,
 * with their counts (the kernel's ucma_move_events): both channels locked
 * throughout, so neither hands out an event of the id out of order, and
 * none of from's requests in flight (their replies may bring the id's
 * events into from); one migration at a time, so two of them never wait
 * for each other's channels.  0 or -errno.
 */
static int migrate(struct cm_id *id, struct cm_chan *from, struct cm_chan *to)
{
	static pthread_mutex_t migrate_lock = PTHREAD_MUTEX_INITIALIZER;
	struct cm_cached *moved = NULL;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	pthread_mutex_lock(&migrate_lock);
	if (from == to)
		from = NULL;
	/* both channels' locks in address order, with from's requests landed
	 * (waited for under from's lock alone: a landing reply takes it) */
	for (;;) {
		if (from) {
			pthread_mutex_lock(&from->lock);
			while (from->inflight)
				pthread_cond_wait(&from->landed, &from->lock);
			pthread_mutex_unlock(&from->lock);
		}
		pthread_mutex_lock(from && from < to ? &from->lock : &to->lock);
		if (from)
			pthread_mutex_lock(from < to ? &to->lock : &from->lock);
		if (!from || !from->inflight)
			break;
		pthread_mutex_unlock(&to->lock);
		pthread_mutex_unlock(&from->lock);
	}
	cm_req_init(&req, SR_OP_CM_MIGRATE, id->handle);
	req.u.cm.channel = to->handle;
	ret = cm_request(&req, &rep, NULL, 0);
	if (!ret && from) {
		uint32_t n = rep.handle; /* the daemon's, counted in from */

		n += cached_take(from, id->handle, false, &moved);
		/* a listener's requests fetched, not handed out yet: their new
		 * ids are made on its channel (new_child), so they go there
		 * too, with whatever events they have (the daemon moves those
		 * of requests it still holds itself) */
		for (struct cm_cached *e = moved; e; e = e->next) {
			if (e->w.event != RDMA_CM_EVENT_CONNECT_REQUEST || e->w.id == id->handle)
				continue;
			cm_req_init(&req, SR_OP_CM_MIGRATE, e->w.id);
			req.u.cm.channel = to->handle;
			if (!cm_request(&req, &rep, NULL, 0))
				n += rep.handle;
			n += cached_take(from, e->w.id, false, &moved);
		}
		cached_put(to, moved);
		chan_uncount(from, n);
	}
	pthread_mutex_unlock(&to->lock);
	if (from)
		pthread_mutex_unlock(&from->lock);
	pthread_mutex_unlock(&migrate_lock);
	return ret;
}

int rdma_migrate_id(struct rdma_cm_id *cid, struct rdma_event_channel *channel)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct rdma_event_channel *old = cid->channel;
	bool was_sync = id->sync, sync = !channel;
	int ret;

	if (was_sync && !channel)
		return cm_err(EINVAL);
	if (!channel) {
		channel = cm_channel_new();
		if (!channel)
			return -1;
	}
	ret = migrate(id, (struct cm_chan *)old, (struct cm_chan *)channel);
	if (ret) {
		if (sync)
			rdma_destroy_event_channel(channel);
		return cm_err(-ret);
	}
	/*
	 * A synchronous id keeps its last event (rdma_create_ep's
	 * ROUTE_RESOLVED, for one) in id->event for the caller to look at;
	 * nobody else will ack it, so leaving synchronous mode acks it, as
	 * rdma-core does (libfabric's verbs provider migrates such an id to
	 * its event queue's channel and would otherwise wait here forever).
	 * Other events already handed out stay the old channel's until acked.
	 */
	if (was_sync && cid->event) {
		rdma_ack_cm_event(cid->event);
		cid->event = NULL;
	}
	pthread_mutex_lock(&id->lock);
	while (id->events_unacked)
		pthread_cond_wait(&id->cond, &id->lock);
	cid->channel = channel;
	id->sync = sync;
	pthread_mutex_unlock(&id->lock);
	if (was_sync && old)
		rdma_destroy_event_channel(old);
	return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR:
		return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE:
		return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED:
		return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED:
		return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED:
		return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE:
		return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	default:
		return "UNKNOWN EVENT";
	}
}
