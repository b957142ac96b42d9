/*
 * Event channels and events.  A channel's fd is an eventfd in semaphore
 * mode that the daemon writes once per event it queues for the channel:
 * pollable, blocking by default, -1/EAGAIN once the application makes it
 * O_NONBLOCK.  rdma_get_cm_event reads one count, then fetches the event
 * (with its private data) from the daemon and finishes what rdma-core's
 * librdmacm finishes in user space: the new id of a CONNECT_REQUEST, the
 * QP's RTR/RTS and the RTU on a CONNECT_RESPONSE (reported as ESTABLISHED),
 * the QP to ERR on REJECTED.  A count with no event behind it (the daemon
 * dropped or moved the event) is read past.  Each event is counted on its
 * id until acked: rdma_destroy_id waits for that.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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
	return &c->ch;
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
	return cm_channel_new();
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_chan *c = (struct cm_chan *)channel;
	struct sr_req req;
	struct sr_rep rep;

	if (!c)
		return;
	cm_req_init(&req, SR_OP_CM_CHANNEL_DESTROY, c->handle);
	cm_request(&req, &rep, NULL, 0);
	close(c->ch.fd);
	free(c);
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
	struct sr_cm_event_wire *w;
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
	cm_req_init(&req, SR_OP_CM_GET_EVENT, c->handle);
	ret = cm_request(&req, &rep, NULL, 0);
	if (ret == -EAGAIN)
		goto again; /* a count left by an event the daemon dropped or moved */
	if (ret)
		return cm_err(-ret);
	w = &rep.u.cm_event;
	if (w->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		listen = cm_id_table_get(w->listen_id);
		if (!listen)
			goto again; /* its listener is being destroyed */
		id = new_child(listen, w);
		if (!id) {
			req.op = SR_OP_CM_REJECT;
			req.handle = w->id;
			cm_request(&req, &rep, NULL, 0);
			goto again;
		}
		pthread_mutex_lock(&id->lock);
		id->events_unacked++; /* a new id: nobody else knows it yet */
		pthread_mutex_unlock(&id->lock);
	} else {
		id = cm_id_table_hold(w->id);
		if (!id)
			goto again; /* being destroyed */
	}
	cm_id_apply_info(id, &w->info);
	e = calloc(1, sizeof(*e));
	if (!e) {
		cm_id_release(id);
		return cm_err(ENOMEM);
	}
	e->ev.id = &id->id;
	e->ev.listen_id = listen ? &listen->id : NULL;
	e->ev.event = w->event;
	e->ev.status = w->status;
	e->owner = id;

	switch (w->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		id->id.verbs = cm_g.verbs;
		id->id.pd = cm_g.pd;
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
		id->remote_qpn = w->conn.qp_num;
		id->remote_psn = w->remote_psn;
		id->peer_resp_res = w->conn.responder_resources;
		id->peer_init_depth = w->conn.initiator_depth;
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

int rdma_migrate_id(struct rdma_cm_id *cid, struct rdma_event_channel *channel)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct rdma_event_channel *old = cid->channel;
	bool was_sync = id->sync, sync = !channel;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (was_sync && !channel)
		return cm_err(EINVAL);
	if (!channel) {
		channel = cm_channel_new();
		if (!channel)
			return -1;
	}
	cm_req_init(&req, SR_OP_CM_MIGRATE, id->handle);
	req.u.cm.channel = ((struct cm_chan *)channel)->handle;
	ret = cm_request(&req, &rep, NULL, 0);
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
