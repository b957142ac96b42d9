/*
 * Connecting: rdma_connect / accept / reject / disconnect / establish /
 * get_request, and the QP attributes and transitions around them, at the
 * moments rdma-core's librdmacm makes them (it drives ibv_modify_qp itself
 * with attributes from the CM, and so do we):
 *   rdma_create_qp        INIT (qp.c)
 *   connect response      RTR, RTS, then the RTU (cm_conn_response), and the
 *                         application sees ESTABLISHED
 *   rdma_accept           RTR, RTS before the REP goes out, so data may come
 *                         before the RTU
 *   REJECTED, disconnect  ERR
 * The moves around a CM step travel in that step's request (ACCEPT and
 * ESTABLISH carry RTR and RTS, DISCONNECT carries ERR; request_at_rts):
 * the daemon makes them first, so they cost no round trip of their own.
 * PSNs are random 24-bit numbers per connection: each side's send queue
 * starts at its own, its receive queue at the peer's (IBTA 12.7.26).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/idalloc.h"
#include "rdmacm/internal.h"
#include "verbs/cm_hooks.h"

static uint8_t dev_max_resp(void)
{
	int m = cm_g.attr.max_qp_rd_atom;

	return (uint8_t)(m > 255 ? 255 : m);
}

static uint8_t dev_max_init(void)
{
	int m = cm_g.attr.max_qp_init_rd_atom;

	return (uint8_t)(m > 255 ? 255 : m);
}

int rdma_init_qp_attr(struct rdma_cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	struct cm_id *id = (struct cm_id *)cid;

	if (!id || !a || !mask)
		return cm_err(EINVAL);
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		memset(a, 0, sizeof(*a));
		a->qp_state = IBV_QPS_INIT;
		a->pkey_index = 0;
		a->port_num = cid->port_num ? cid->port_num : 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (cid->qp_type == IBV_QPT_UD) {
			a->qkey =
			    cid->ps == RDMA_PS_UDP || cid->ps == RDMA_PS_IPOIB ? RDMA_UDP_QKEY : 0;
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					     IBV_ACCESS_REMOTE_ATOMIC;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		memset(a, 0, sizeof(*a));
		a->qp_state = IBV_QPS_RTR;
		*mask = IBV_QP_STATE;
		if (cid->qp_type == IBV_QPT_UD)
			return 0;
		/* the port's, or the REQ's if smaller (a passive id: the
		 * kernel's CM takes the REQ's path MTU; a larger one than the
		 * port's would not pass our link) */
		a->path_mtu = (enum ibv_mtu)cm_g.dev.active_mtu;
		if (id->info.path_mtu && id->info.path_mtu < (uint32_t)a->path_mtu)
			a->path_mtu = (enum ibv_mtu)id->info.path_mtu;
		a->dest_qp_num = id->remote_qpn;
		a->rq_psn = id->remote_psn;
		a->ah_attr.is_global = 1;
		memcpy(a->ah_attr.grh.dgid.raw, id->info.dgid, 16);
		a->ah_attr.grh.sgid_index = (uint8_t)cm_gid_index(id->info.sgid);
		a->ah_attr.grh.hop_limit = 64;
		a->ah_attr.grh.traffic_class = id->tos;
		a->ah_attr.sl = id->tos >> 5;
		a->ah_attr.port_num = cid->port_num ? cid->port_num : 1;
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (cm_qpt_connected(cid->qp_type)) {
			a->max_dest_rd_atomic = id->resp_res;
			a->min_rnr_timer = 0; /* 655 ms, as the kernel's CM leaves it */
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		memset(a, 0, sizeof(*a));
		a->qp_state = IBV_QPS_RTS;
		a->sq_psn = id->psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (cid->qp_type == IBV_QPT_UD)
			return 0;
		if (cm_qpt_connected(cid->qp_type)) {
			a->timeout = id->ack_timeout;
			a->retry_cnt = id->retry > 7 ? 7 : id->retry;
			a->rnr_retry = id->rnr_retry > 7 ? 7 : id->rnr_retry;
			a->max_rd_atomic = id->init_depth;
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC;
		}
		return 0;
	default:
		return cm_err(EINVAL);
	}
}

int cm_modify_qp(struct cm_id *id, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = {.qp_state = state};
	int mask, ret;

	if (rdma_init_qp_attr(&id->id, &a, &mask))
		return -errno;
	ret = ibv_modify_qp(id->id.qp, &a, mask);
	return ret > 0 ? -ret : ret;
}

void cm_qp_to_err(struct cm_id *id)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (id->id.qp && id->id.qp_type != IBV_QPT_UD)
		ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

static int to_rts(struct cm_id *id)
{
	int ret;

	/* rdma-core re-applies INIT first: the QP may have been reset */
	if (id->id.qp->state == IBV_QPS_RESET) {
		ret = cm_modify_qp(id, IBV_QPS_INIT);
		if (ret)
			return ret;
	}
	ret = cm_modify_qp(id, IBV_QPS_RTR);
	if (!ret)
		ret = cm_modify_qp(id, IBV_QPS_RTS);
	return ret;
}

/* The RTR and RTS moves of the id's QP, for the daemon to make before the
 * CM step req asks for: 0 or -errno. */
static int add_moves(struct cm_id *id, struct sr_req *req)
{
	static const enum ibv_qp_state to[SR_CM_QP_MOVES] = {IBV_QPS_RTR, IBV_QPS_RTS};
	struct sr_cm_qp_moves *m = &req->u.cm.qp;

	for (int i = 0; i < SR_CM_QP_MOVES; i++) {
		struct ibv_qp_attr a = {.qp_state = to[i]};
		int mask;

		if (rdma_init_qp_attr(&id->id, &a, &mask))
			return -errno;
		sr_qp_attr_to_wire(&a, &m->attr[i]);
		m->mask[i] = (uint32_t)mask;
	}
	m->qpn = id->id.qp->qp_num;
	m->n = SR_CM_QP_MOVES;
	return 0;
}

/*
 * The id's QP to RTS, then the CM step req asks for (ACCEPT, ESTABLISH),
 * in one round trip: the daemon makes the moves first and the step only
 * if they succeed (sr_cm_qp_moves).  0 or -errno; *at_rts says whether
 * the QP got there (if not, the step was not made).  Without the verbs
 * library's hook the moves are ibv_modify_qp calls of their own.
 */
static int request_at_rts(struct cm_id *id, struct sr_req *req, bool *at_rts)
{
	struct ibv_qp *qp = id->id.qp;
	const struct sr_verbs_hooks *h = sr_verbs_hooks_of(qp->context);
	enum ibv_qp_state was;
	struct sr_rep rep;
	int ret;

	*at_rts = false;
	if (!h) {
		ret = to_rts(id);
		if (ret)
			return ret;
		*at_rts = true;
		return cm_id_request(id, req, &rep);
	}
	/* rdma-core re-applies INIT first: the QP may have been reset */
	if (qp->state == IBV_QPS_RESET) {
		ret = cm_modify_qp(id, IBV_QPS_INIT);
		if (ret)
			return ret;
	}
	ret = add_moves(id, req);
	if (ret)
		return ret;
	was = qp->state;
	ret = cm_id_request(id, req, &rep);
	h->qp_moved(qp, was); /* the library's view of the QP, as ibv_modify_qp leaves it */
	*at_rts = qp->state == IBV_QPS_RTS;
	return ret;
}

/* What we asked for, bounded by what the REP offers, in our view (the
 * peer's initiator depth is our responder resources and the other way
 * round; the kernel's cm_rep_handler).  The daemon bounds the moves it
 * makes at the REP the same way (cm_proto.c, finish). */
void cm_conn_bound(struct cm_id *id)
{
	if (id->peer_resp_res < id->resp_res)
		id->resp_res = id->peer_resp_res;
	if (id->peer_init_depth < id->init_depth)
		id->init_depth = id->peer_init_depth;
}

int cm_conn_response(struct cm_id *id)
{
	struct sr_req req;
	bool at_rts;
	int ret;

	cm_conn_bound(id);
	cm_req_init(&req, SR_OP_CM_ESTABLISH, id->handle);
	ret = request_at_rts(id, &req, &at_rts);
	if (ret && !at_rts) {
		cm_qp_to_err(id);
		cm_id_op_events(id, SR_OP_CM_REJECT);
	}
	return ret;
}

/* The conn_param rules of rdma-core (CM.md 1.1): NULL = device maxima,
 * 255 = "the device's maximum", more than the device has = EINVAL. */
static int take_param(struct cm_id *id, const struct rdma_conn_param *p, bool accept)
{
	uint8_t mr = dev_max_resp(), mi = dev_max_init();

	if (!p) {
		id->resp_res = accept ? (id->peer_resp_res < mr ? id->peer_resp_res : mr) : mr;
		id->init_depth =
		    accept ? (id->peer_init_depth < mi ? id->peer_init_depth : mi) : mi;
		if (!accept)
			id->retry = id->rnr_retry = 7;
		return 0;
	}
	id->resp_res = p->responder_resources == RDMA_MAX_RESP_RES ? mr : p->responder_resources;
	id->init_depth = p->initiator_depth == RDMA_MAX_INIT_DEPTH ? mi : p->initiator_depth;
	if (id->id.ps == RDMA_PS_TCP && (id->resp_res > mr || id->init_depth > mi))
		return -EINVAL;
	if (id->resp_res > mr)
		id->resp_res = mr;
	if (id->init_depth > mi)
		id->init_depth = mi;
	if (!accept) {
		id->retry = p->retry_count;
		id->rnr_retry = p->rnr_retry_count;
	} else {
		id->rnr_retry = p->rnr_retry_count; /* ours to the peer; retry is the REQ's */
	}
	return 0;
}

static void fill_req(struct cm_id *id, struct sr_req *req, const struct rdma_conn_param *p)
{
	struct sr_cm_conn *c = &req->u.cm.conn;

	c->responder_resources = id->resp_res;
	c->initiator_depth = id->init_depth;
	c->retry_count = id->retry;
	c->rnr_retry_count = id->rnr_retry;
	c->flow_control = p ? p->flow_control : 1;
	if (id->id.qp) {
		c->has_qp = 1;
		c->qp_num = id->id.qp->qp_num;
		c->srq = id->id.qp->srq != NULL;
	} else if (p) {
		c->qp_num = p->qp_num;
		c->srq = p->srq;
	}
	if (id->id.qp_type == IBV_QPT_UD)
		c->qkey = id->id.ps == RDMA_PS_UDP ? RDMA_UDP_QKEY : 0;
	req->u.cm.psn = id->psn;
	if (p && p->private_data_len) {
		req->u.cm.private_len = p->private_data_len;
		memcpy(req->u.cm.private_data, p->private_data, p->private_data_len);
	}
}

/*
 * A QP this library made (rdma_create_qp, still in INIT) is finished by
 * the daemon when the REP comes: the CONNECT carries its RTR and RTS moves
 * as far as they are known now (the peer's QPN and PSN, and the depths it
 * offers, the daemon fills in from the REP) and the event is ESTABLISHED
 * (cm_conn_moved), saving the round trip of cm_conn_response.  If the
 * daemon cannot make them, the event is CONNECT_RESPONSE as before.
 */
static void finish_at_rep(struct cm_id *id, struct sr_req *req)
{
	struct ibv_qp *qp = id->id.qp;

	if (!qp || id->id.qp_type == IBV_QPT_UD || qp->state != IBV_QPS_INIT ||
	    !sr_verbs_hooks_of(qp->context) || add_moves(id, req))
		return;
	req->u.cm.flags |= SR_CM_FINISH;
}

/* The daemon finished the connection at the REP (finish_at_rep): the QP
 * is at RTS and the RTU went out. */
void cm_conn_moved(struct cm_id *id)
{
	const struct sr_verbs_hooks *h = sr_verbs_hooks_of(id->id.qp->context);

	cm_conn_bound(id);
	h->qp_moved(id->id.qp, IBV_QPS_INIT);
}

int rdma_connect(struct rdma_cm_id *cid, struct rdma_conn_param *p)
{
	struct cm_id *id = (struct cm_id *)cid;
	uint32_t room;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	id->fresh = false;
	/* less the IP CM header, which AF_IB does not send */
	room = (cid->qp_type == IBV_QPT_UD ? 216 : 92) - (id->af_ib ? 0 : 36);
	if (p && (p->private_data_len > room || (p->private_data_len && !p->private_data)))
		return cm_err(EINVAL);
	if (!cid->qp && !p && cid->ps == RDMA_PS_TCP)
		return cm_err(EINVAL);
	ret = take_param(id, p, false);
	if (ret)
		return cm_err(-ret);
	id->connect_error = false;
	cm_req_init(&req, SR_OP_CM_CONNECT, id->handle);
	fill_req(id, &req, p);
	finish_at_rep(id, &req);
	if (id->route_local)
		req.u.cm.flags |= SR_CM_ROUTE_LOCAL;
	ret = cm_id_request(id, &req, &rep);
	if (ret)
		return cm_err(-ret);
	return cm_complete(id);
}

int rdma_accept(struct rdma_cm_id *cid, struct rdma_conn_param *p)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct sr_req req;
	struct sr_rep rep;
	uint32_t room;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	room = cid->qp_type == IBV_QPT_UD ? 136 : 196;
	if (p && (p->private_data_len > room || (p->private_data_len && !p->private_data)))
		return cm_err(EINVAL);
	if (!cid->qp && !p && cid->ps == RDMA_PS_TCP)
		return cm_err(EINVAL);
	ret = take_param(id, p, true);
	if (ret)
		return cm_err(-ret);
	cm_req_init(&req, SR_OP_CM_ACCEPT, id->handle);
	fill_req(id, &req, p);
	if (cid->qp_type == IBV_QPT_UD && !cid->qp && !(p && p->qp_num))
		return cm_err(EINVAL);
	if (cid->qp && cid->qp_type != IBV_QPT_UD) {
		/* RTR and RTS before the REP goes out, in the ACCEPT's round trip */
		bool at_rts;

		ret = request_at_rts(id, &req, &at_rts);
		if (ret && !at_rts) {
			cm_qp_to_err(id);
			rdma_reject(cid, NULL, 0);
		}
	} else {
		ret = cm_id_request(id, &req, &rep);
	}
	if (ret)
		return cm_err(-ret);
	if (cid->qp_type == IBV_QPT_UD)
		return 0; /* SIDR: nothing follows the reply */
	return cm_complete(id);
}

int rdma_reject(struct rdma_cm_id *cid, const void *private_data, uint8_t len)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	if (len > (cid->qp_type == IBV_QPT_UD ? 136 : 148) || (len && !private_data))
		return cm_err(EINVAL);
	cm_req_init(&req, SR_OP_CM_REJECT, id->handle);
	req.u.cm.private_len = len;
	if (len)
		memcpy(req.u.cm.private_data, private_data, len);
	ret = cm_id_request(id, &req, &rep);
	return ret ? cm_err(-ret) : 0;
}

int rdma_reject_ece(struct rdma_cm_id *cid, const void *private_data, uint8_t len)
{
	return rdma_reject(cid, private_data, len);
}

int rdma_establish(struct rdma_cm_id *cid)
{
	struct cm_id *id = (struct cm_id *)cid;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	ret = cm_id_op_events(id, SR_OP_CM_ESTABLISH);
	return ret ? cm_err(-ret) : 0;
}

/* The QP to ERR first, then the DREQ (or DREP): one round trip where the
 * verbs library lets the DISCONNECT carry the move (a failed move is
 * ignored, as cm_qp_to_err ignores it). */
static int disconnect_request(struct cm_id *id)
{
	struct ibv_qp *qp = id->id.qp;
	const struct sr_verbs_hooks *h =
	    qp && id->id.qp_type != IBV_QPT_UD ? sr_verbs_hooks_of(qp->context) : NULL;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	enum ibv_qp_state was;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!h) {
		cm_qp_to_err(id);
		return cm_id_op_events(id, SR_OP_CM_DISCONNECT);
	}
	cm_req_init(&req, SR_OP_CM_DISCONNECT, id->handle);
	req.u.cm.qp.qpn = qp->qp_num;
	req.u.cm.qp.n = 1;
	req.u.cm.qp.mask[0] = IBV_QP_STATE;
	sr_qp_attr_to_wire(&a, &req.u.cm.qp.attr[0]);
	was = qp->state;
	ret = cm_id_request(id, &req, &rep);
	h->qp_moved(qp, was);
	return ret;
}

int rdma_disconnect(struct rdma_cm_id *cid)
{
	struct cm_id *id = (struct cm_id *)cid;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	ret = disconnect_request(id);
	if (ret)
		return cm_err(-ret);
	/* a synchronous id waits for its DISCONNECTED, unless it was had */
	if (id->sync && !(cid->event && cid->event->event == RDMA_CM_EVENT_DISCONNECTED))
		return cm_complete(id);
	return 0;
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct cm_id *l = (struct cm_id *)listen;
	struct rdma_cm_event *ev;
	struct cm_id *c;
	int ret;

	if (!l || !out || !l->sync)
		return cm_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = rdma_get_cm_event(listen->channel, &ev);
	if (ret)
		return ret;
	if (ev->status) {
		ret = ev->status;
		rdma_ack_cm_event(ev);
		return cm_err(ret < 0 ? -ret : ret);
	}
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		return cm_err(EINVAL);
	}
	c = (struct cm_id *)ev->id;
	if (l->ep_qp) {
		struct ibv_qp_init_attr attr = l->ep_attr;

		if (rdma_create_qp(&c->id, l->ep_pd, &attr)) {
			ret = errno;
			rdma_reject(&c->id, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(&c->id);
			return cm_err(ret);
		}
	}
	c->id.event = ev;
	*out = &c->id;
	return 0;
}
