/*
 * The IB CM state machine (IBTA vol. 1 12.9) of the daemon's CM agent:
 * each librdmacm call that speaks to the peer builds a message and queues
 * its MAD (cm_mad_queue.c); each MAD that arrives is parsed (cm_mad.c) and
 * moves the id it names, producing the rdma_cm events of KRN cma.c's
 * cma_ib_handler / cma_req_handler.  Connection requests carry the Annex
 * A11 IP header; listeners are found by service ID, then address.  AF_IB
 * ids send no header and their listeners take every REQ of their service
 * ID (KRN cma.c: the header is for IP addresses only).
 *   active RC:  REQ -> (REP: the QP to RTR and RTS, the RTU, ESTABLISHED,
 *               if the library's QP and its moves came with the CONNECT;
 *               else CONNECT_RESPONSE, and the library moves its QP and
 *               asks for the RTU) | (REJ: REJECTED reason) | timeout:
 *               UNREACHABLE
 *   passive RC: REQ -> CONNECT_REQUEST; accept -> REP; RTU -> ESTABLISHED
 *   teardown:   DREQ -> DISCONNECTED on both sides (DREP, or crossing DREQs)
 *   UD:         SIDR_REQ -> CONNECT_REQUEST; accept -> SIDR_REP ->
 *               ESTABLISHED with the peer's QPN and Q_Key
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "daemon/cm/cm.h"

static void send_msg(struct sr_daemon *d, struct sr_cm_id *id, struct sr_cm_msg *m,
		     const uint8_t sgid[16], const uint8_t dgid[16], bool keep)
{
	uint8_t bytes[SR_CM_MAD_SIZE];

	m->tid = (uint64_t)(id ? id->comm_id : m->local_comm_id) | (uint64_t)m->attr << 32;
	if (sr_cm_mad_build(m, bytes)) {
		sr_warn("cm: cannot build %s", sr_cm_attr_name(m->attr));
		return;
	}
	if (keep && id)
		memcpy(id->mad, bytes, sizeof(bytes));
	sr_cm_mad_queue(d, sgid, dgid, bytes);
}

static uint32_t conv_ms(uint8_t t)
{
	return 1u << (t > 8 ? t - 8 : 0); /* IBTA: 4.096 us << t, as the kernel rounds it */
}

/* A connection's end (DREQ and DREP, or a DREQ that went unanswered): the
 * id waits out timewait, then the application gets TIMEWAIT_EXIT (the QP
 * may be reused), as from the kernel's CM. */
static void enter_timewait(struct sr_daemon *d, struct sr_cm_id *id)
{
	id->state = SR_CM_TIMEWAIT;
	sr_cm_timer_set(d, id, conv_ms(SR_CM_TIMEWAIT_TIMEOUT), 0);
}

static void conn_event(struct sr_cm_event *ev, const struct sr_cm_msg *m)
{
	/* the receiver's view: the peer's initiator depth bounds our
	 * responder resources and the other way round (KRN cm_format_req_event) */
	ev->w.conn.responder_resources = m->initiator_depth;
	ev->w.conn.initiator_depth = m->responder_resources;
	ev->w.conn.flow_control = m->flow_control;
	ev->w.conn.retry_count = m->retry_count;
	ev->w.conn.rnr_retry_count = m->rnr_retry_count;
	ev->w.conn.srq = m->srq;
	ev->w.conn.qp_num = m->local_qpn;
	ev->w.conn.qkey = m->qkey;
	ev->w.remote_psn = m->starting_psn;
}

static void copy_priv(struct sr_cm_msg *m, const struct sr_req *req)
{
	m->private_len = req->u.cm.private_len;
	memcpy(m->private_data, req->u.cm.private_data, m->private_len);
}

int sr_cm_connect(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_req *req)
{
	const struct sr_cm_conn *c = &req->u.cm.conn;
	bool ud = id->qp_type == IBV_QPT_UD;
	uint32_t hdr = id->af_ib ? 0 : SR_CM_IP_HDR_LEN;
	uint32_t room = (ud ? SR_CM_SIDR_REQ_PRIV : SR_CM_REQ_PRIV) - hdr;
	struct sr_cm_msg m;

	if (id->state == SR_CM_ADDR_RESOLVED && req->u.cm.flags & SR_CM_ROUTE_LOCAL)
		id->state = SR_CM_ROUTE_RESOLVED; /* the library's rdma_resolve_route */
	if (id->state != SR_CM_ROUTE_RESOLVED)
		return -EINVAL;
	if (req->u.cm.private_len > room)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	if (hdr && sr_cm_ip_hdr_build(m.private_data, (struct sockaddr *)&id->src,
				      (struct sockaddr *)&id->dst))
		return -EINVAL;
	memcpy(m.private_data + hdr, req->u.cm.private_data, req->u.cm.private_len);
	m.private_len = hdr + req->u.cm.private_len;
	m.local_comm_id = id->comm_id;
	m.service_id = id->af_ib ? id->dst_sid : sr_cm_service_id(id->ps, sr_cm_port(&id->dst));
	id->conn = *c;
	id->qpn = c->qp_num;
	id->psn = req->u.cm.psn & 0xffffff;
	id->finish.n = 0;
	if (req->u.cm.flags & SR_CM_FINISH && !ud && c->has_qp &&
	    req->u.cm.qp.n == SR_CM_QP_MOVES && req->u.cm.qp.qpn == c->qp_num)
		id->finish = req->u.cm.qp;
	if (ud) {
		m.attr = SR_CM_SIDR_REQ;
		m.pkey = 0xffff;
		id->state = SR_CM_SIDR_REQ_SENT;
		send_msg(d, id, &m, id->sgid, id->dgid, true);
		/* SIDR_REQ wait: 1 << (20 - 8) ms, as the kernel's CMA */
		sr_cm_timer_set(d, id, conv_ms(SR_CM_RESPONSE_TIMEOUT), 3);
		return 0;
	}
	m.attr = SR_CM_REQ;
	m.local_ca_guid = d->dev.node_guid;
	m.local_qpn = id->qpn;
	m.responder_resources = c->responder_resources;
	m.initiator_depth = c->initiator_depth;
	m.remote_cm_timeout = SR_CM_RESPONSE_TIMEOUT;
	m.transport = id->qp_type == IBV_QPT_UC ? 1 : id->qp_type == IBV_QPT_XRC_SEND ? 3 : 0;
	m.flow_control = c->flow_control;
	m.starting_psn = id->psn;
	m.local_cm_timeout = SR_CM_RESPONSE_TIMEOUT;
	m.retry_count = c->retry_count > 7 ? 7 : c->retry_count;
	m.rnr_retry_count = c->rnr_retry_count > 7 ? 7 : c->rnr_retry_count;
	m.pkey = 0xffff;
	m.path_mtu = (uint8_t)d->dev.active_mtu;
	m.max_cm_retries = SR_CM_MAX_RETRIES;
	m.srq = c->srq;
	m.local_lid = m.remote_lid = 0xffff; /* RoCE: routed, no LIDs */
	memcpy(m.local_gid, id->sgid, 16);
	memcpy(m.remote_gid, id->dgid, 16);
	m.traffic_class = id->tos;
	m.sl = id->tos >> 5;
	m.hop_limit = 64;
	m.local_ack_timeout = 18;
	id->state = SR_CM_REQ_SENT;
	send_msg(d, id, &m, id->sgid, id->dgid, true);
	sr_cm_timer_set(d, id, 2 * conv_ms(SR_CM_RESPONSE_TIMEOUT), SR_CM_MAX_RETRIES);
	return 0;
}

int sr_cm_accept(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_req *req)
{
	const struct sr_cm_conn *c = &req->u.cm.conn;
	struct sr_cm_msg m;

	memset(&m, 0, sizeof(m));
	if (id->state == SR_CM_SIDR_REQ_RCVD) {
		if (req->u.cm.private_len > SR_CM_SIDR_REP_PRIV)
			return -EINVAL;
		m.attr = SR_CM_SIDR_REP;
		m.local_comm_id = id->remote_comm_id; /* the request ID */
		m.status = SR_CM_SIDR_SUCCESS;
		m.local_qpn = c->qp_num;
		m.qkey = c->qkey ? c->qkey : RDMA_UDP_QKEY;
		m.service_id = sr_cm_service_id(id->ps, sr_cm_port(&id->src));
		copy_priv(&m, req);
		/* kept (no timer) for a repeated SIDR_REQ: the reply was lost */
		send_msg(d, id, &m, id->sgid, id->dgid, true);
		id->state = SR_CM_TIMEWAIT; /* SIDR has nothing after the reply */
		return 0;
	}
	if (id->state != SR_CM_REQ_RCVD)
		return -EINVAL;
	if (req->u.cm.private_len > SR_CM_REP_PRIV)
		return -EINVAL;
	id->conn = *c;
	id->qpn = c->qp_num;
	id->psn = req->u.cm.psn & 0xffffff;
	m.attr = SR_CM_REP;
	m.local_comm_id = id->comm_id;
	m.remote_comm_id = id->remote_comm_id;
	m.local_qpn = id->qpn;
	m.starting_psn = id->psn;
	m.responder_resources = c->responder_resources;
	m.initiator_depth = c->initiator_depth;
	m.target_ack_delay = 0;
	m.flow_control = c->flow_control;
	m.rnr_retry_count = c->rnr_retry_count > 7 ? 7 : c->rnr_retry_count;
	m.srq = c->srq;
	m.local_ca_guid = d->dev.node_guid;
	copy_priv(&m, req);
	id->state = SR_CM_REP_SENT;
	send_msg(d, id, &m, id->sgid, id->dgid, true);
	sr_cm_timer_set(d, id, 2 * conv_ms(SR_CM_RESPONSE_TIMEOUT), SR_CM_MAX_RETRIES);
	return 0;
}

static void send_rej(struct sr_daemon *d, struct sr_cm_id *id, uint16_t reason, const void *priv,
		     uint32_t len)
{
	struct sr_cm_msg m;

	memset(&m, 0, sizeof(m));
	m.attr = SR_CM_REJ;
	m.local_comm_id = id->comm_id;
	m.remote_comm_id = id->remote_comm_id;
	m.msg_rejected = id->state == SR_CM_REQ_RCVD ? 0 : 1;
	m.reason = reason;
	if (reason == SR_CM_REJ_TIMEOUT) { /* ARI: our CA GUID (IBTA 12.6.7.2) */
		for (int b = 0; b < 8; b++)
			m.ari[b] = (uint8_t)(d->dev.node_guid >> (56 - 8 * b));
		m.ari_len = 8;
	}
	m.private_len = len;
	if (len)
		memcpy(m.private_data, priv, len);
	send_msg(d, id, &m, id->sgid, id->dgid, false);
}

static void send_sidr_status(struct sr_daemon *d, const uint8_t sgid[16], const uint8_t dgid[16],
			     const struct sr_cm_msg *req, uint8_t status)
{
	struct sr_cm_msg m;

	memset(&m, 0, sizeof(m));
	m.attr = SR_CM_SIDR_REP;
	m.local_comm_id = req->local_comm_id;
	m.status = status;
	m.service_id = req->service_id;
	send_msg(d, NULL, &m, sgid, dgid, false);
}

int sr_cm_reject(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_req *req)
{
	uint32_t reason = req->u.cm.reason ? req->u.cm.reason : SR_CM_REJ_CONSUMER_DEFINED;

	if (id->state == SR_CM_SIDR_REQ_RCVD) {
		struct sr_cm_msg m;

		if (req->u.cm.private_len > SR_CM_SIDR_REP_PRIV)
			return -EINVAL;
		memset(&m, 0, sizeof(m));
		m.attr = SR_CM_SIDR_REP;
		m.local_comm_id = id->remote_comm_id;
		m.status = SR_CM_SIDR_REJECT;
		m.service_id = sr_cm_service_id(id->ps, sr_cm_port(&id->src));
		copy_priv(&m, req);
		send_msg(d, id, &m, id->sgid, id->dgid, false);
		id->state = SR_CM_TIMEWAIT;
		return 0;
	}
	if (id->state != SR_CM_REQ_RCVD && id->state != SR_CM_REP_RCVD)
		return -EINVAL;
	if (req->u.cm.private_len > SR_CM_REJ_PRIV || reason > 0xffff)
		return -EINVAL;
	send_rej(d, id, (uint16_t)reason, req->u.cm.private_data, req->u.cm.private_len);
	id->state = SR_CM_TIMEWAIT;
	sr_cm_timer_set(d, id, 0, 0);
	return 0;
}

static void send_rtu(struct sr_daemon *d, struct sr_cm_id *id)
{
	struct sr_cm_msg m;

	memset(&m, 0, sizeof(m));
	m.attr = SR_CM_RTU;
	m.local_comm_id = id->comm_id;
	m.remote_comm_id = id->remote_comm_id;
	send_msg(d, id, &m, id->sgid, id->dgid, false);
}

int sr_cm_establish(struct sr_daemon *d, struct sr_cm_id *id)
{
	if (id->state != SR_CM_REP_RCVD)
		return -EINVAL;
	send_rtu(d, id);
	id->state = SR_CM_ESTABLISHED;
	return 0;
}

static void send_dreq(struct sr_daemon *d, struct sr_cm_id *id)
{
	struct sr_cm_msg m;

	memset(&m, 0, sizeof(m));
	m.attr = SR_CM_DREQ;
	m.local_comm_id = id->comm_id;
	m.remote_comm_id = id->remote_comm_id;
	m.local_qpn = id->remote_qpn;
	send_msg(d, id, &m, id->sgid, id->dgid, true);
}

static void send_drep(struct sr_daemon *d, const uint8_t sgid[16], const uint8_t dgid[16],
		      uint32_t local, uint32_t remote)
{
	struct sr_cm_msg m;

	memset(&m, 0, sizeof(m));
	m.attr = SR_CM_DREP;
	m.local_comm_id = local;
	m.remote_comm_id = remote;
	send_msg(d, NULL, &m, sgid, dgid, false);
}

int sr_cm_disconnect(struct sr_daemon *d, struct sr_cm_id *id)
{
	switch (id->state) {
	case SR_CM_ESTABLISHED:
	case SR_CM_REP_SENT:
	case SR_CM_REP_RCVD:
		send_dreq(d, id);
		id->state = SR_CM_DREQ_SENT;
		sr_cm_timer_set(d, id, 2 * conv_ms(SR_CM_RESPONSE_TIMEOUT), SR_CM_MAX_RETRIES);
		return 0;
	case SR_CM_DREQ_RCVD:
		send_drep(d, id->sgid, id->dgid, id->comm_id, id->remote_comm_id);
		enter_timewait(d, id);
		return 0;
	case SR_CM_DREQ_SENT:
	case SR_CM_TIMEWAIT:
		return 0; /* already on its way down: nothing more to say */
	default:
		return -EINVAL;
	}
}

void sr_cm_abandon(struct sr_daemon *d, struct sr_cm_id *id)
{
	switch (id->state) {
	case SR_CM_REQ_SENT:
		send_rej(d, id, SR_CM_REJ_TIMEOUT, NULL, 0);
		break;
	case SR_CM_REQ_RCVD:
	case SR_CM_REP_RCVD:
		send_rej(d, id, SR_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case SR_CM_SIDR_REQ_RCVD: {
		struct sr_cm_msg m;

		memset(&m, 0, sizeof(m));
		m.local_comm_id = id->remote_comm_id;
		send_sidr_status(d, id->sgid, id->dgid, &m, SR_CM_SIDR_REJECT);
		break;
	}
	case SR_CM_REP_SENT:
	case SR_CM_ESTABLISHED:
		send_dreq(d, id);
		sr_cm_timer_set(d, id, 2 * conv_ms(SR_CM_RESPONSE_TIMEOUT), SR_CM_MAX_RETRIES);
		sr_cm_linger(d, id);
		break;
	case SR_CM_DREQ_SENT: /* the DREQ goes on without its id */
		sr_cm_linger(d, id);
		break;
	case SR_CM_DREQ_RCVD:
		send_drep(d, id->sgid, id->dgid, id->comm_id, id->remote_comm_id);
		break;
	default:
		break;
	}
	id->state = SR_CM_TIMEWAIT;
	sr_cm_timer_set(d, id, 0, 0);
}

/* ---- receiving ---- */

static bool ip_match(const struct sr_cm_id *l, const struct sockaddr_storage *dst)
{
	const struct sockaddr_storage *a = &l->src;

	if (sr_cm_addr_any(a))
		return a->ss_family == dst->ss_family || (a->ss_family == AF_INET6 && !l->afonly);
	if (a->ss_family != dst->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;

		return s->sin_addr.s_addr == ((const struct sockaddr_in *)dst)->sin_addr.s_addr ||
		       ntohl(s->sin_addr.s_addr) >> 24 == 127; /* a loopback bind accepts any */
	}
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)dst)->sin6_addr, 16) ||
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/* The id of the service in state (SR_CM_LISTEN, or SR_CM_ADDR_BOUND: a
 * bound id that does not listen yet) that takes a REQ: with dst NULL an
 * AF_IB one, which takes any REQ for its service with or without the IP
 * header (KRN cma.c cma_match_private_data); else one whose address
 * matches dst.  A program may tell its peer the port between
 * rdma_bind_addr and rdma_listen (qperf 0.4.11 does, CM.md section 4): on
 * a fabric the REQ's flight time usually hides the race, on one host it
 * never does, so a REQ for a bound id waits on it until it listens (or
 * goes away: REJ 8 then, as the kernel sends at once). */
static struct sr_cm_id *find_service(struct sr_daemon *d, uint64_t service_id,
				     enum sr_cm_state state, const struct sockaddr_storage *dst)
{
	for (struct sr_cm_id *l = sr_cm_port_ids(d, (uint16_t)service_id); l;
	     l = l->inext[SR_CM_BY_PORT])
		if (l->state == state &&
		    sr_cm_service_id(l->ps, sr_cm_port(&l->src)) == service_id &&
		    (dst ? ip_match(l, dst) : l->af_ib))
			return l;
	return NULL;
}

/* The IP addresses of an AF_IB request: the GIDs it came from and to
 * (RoCE GIDs are IP addresses); the peer's port is not known. */
static void ib_req_addrs(const uint8_t sgid[16], const uint8_t mygid[16],
			 struct sockaddr_storage *peer, struct sockaddr_storage *self)
{
	static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *g[2] = {sgid, mygid};
	struct sockaddr_storage *a[2] = {peer, self};

	for (int i = 0; i < 2; i++) {
		memset(a[i], 0, sizeof(*a[i]));
		if (!memcmp(g[i], v4, sizeof(v4))) {
			a[i]->ss_family = AF_INET;
			memcpy(&((struct sockaddr_in *)a[i])->sin_addr, g[i] + 12, 4);
		} else {
			a[i]->ss_family = AF_INET6;
			memcpy(&((struct sockaddr_in6 *)a[i])->sin6_addr, g[i], 16);
		}
	}
}

static void park(struct sr_cm_id *b, const uint8_t sgid[16], const uint8_t dgid[16],
		 const struct sr_cm_msg *m)
{
	struct sr_cm_mad *q, **pp = &b->parked;
	int n = 0;

	for (; *pp; pp = &(*pp)->next)
		if (++n >= 64)
			return; /* enough: the rest retry */
	q = malloc(sizeof(*q));
	if (!q)
		return;
	q->next = NULL;
	memcpy(q->sgid, sgid, 16);
	memcpy(q->dgid, dgid, 16);
	if (sr_cm_mad_build(m, q->bytes)) {
		free(q);
		return;
	}
	*pp = q;
}

void sr_cm_unpark(struct sr_daemon *d, struct sr_cm_id *id, bool deliver)
{
	while (id->parked) {
		struct sr_cm_mad *q = id->parked;
		struct sr_cm_msg m, r;

		id->parked = q->next;
		if (deliver) {
			sr_cm_mad_queue(d, q->sgid, q->dgid, q->bytes);
		} else if (!sr_cm_mad_parse(q->bytes, sizeof(q->bytes), &m)) {
			memset(&r, 0, sizeof(r));
			r.attr = SR_CM_REJ;
			r.remote_comm_id = m.local_comm_id;
			r.reason = SR_CM_REJ_INVALID_SERVICE_ID;
			send_msg(d, NULL, &r, q->dgid, q->sgid, false);
		}
		free(q);
	}
}

/* A repeated REQ or SIDR_REQ (the sender timed out waiting): the id it
 * already made, if any. */
static struct sr_cm_id *find_dup(struct sr_daemon *d, const struct sr_cm_msg *m,
				 const uint8_t sgid[16])
{
	for (struct sr_cm_id *o = sr_cm_req_ids(d, m->local_comm_id); o; o = o->inext[SR_CM_BY_REQ])
		if (o->remote_comm_id == m->local_comm_id && !memcmp(o->dgid, sgid, 16))
			return o;
	return NULL;
}

static void set_port(struct sockaddr_storage *a, uint16_t port)
{
	if (a->ss_family == AF_INET)
		((struct sockaddr_in *)a)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)a)->sin6_port = htons(port);
}

static void recv_req(struct sr_daemon *d, const uint8_t sgid[16], const uint8_t mygid[16],
		     const struct sr_cm_msg *m)
{
	bool sidr = m->attr == SR_CM_SIDR_REQ;
	struct sockaddr_storage peer, self;
	struct sr_cm_id *l, *id, *dup;
	struct sr_cm_event *ev;
	uint32_t hdr;

	/* the agent answers from the GID the request was sent to */
	dup = find_dup(d, m, sgid);
	if (dup) {
		if (dup->state == SR_CM_REQ_RCVD && !sidr) { /* still deciding: MRA */
			struct sr_cm_msg a;

			memset(&a, 0, sizeof(a));
			a.attr = SR_CM_MRA;
			a.local_comm_id = dup->comm_id;
			a.remote_comm_id = dup->remote_comm_id;
			a.msg_rejected = 0;
			a.service_timeout = 24;
			send_msg(d, dup, &a, dup->sgid, dup->dgid, false);
		} else if ((dup->state == SR_CM_REP_SENT && !sidr) ||
			   (dup->state == SR_CM_TIMEWAIT && sidr && dup->qp_type == IBV_QPT_UD)) {
			/* our REP or SIDR_REP was lost on the way: the same
			 * again (IBTA 12.9: a repeated REQ in REP Sent gets the REP) */
			sr_cm_mad_queue(d, dup->sgid, dup->dgid, dup->mad);
		}
		return;
	}
	l = find_service(d, m->service_id, SR_CM_LISTEN, NULL);
	if (!l && !sidr && (l = find_service(d, m->service_id, SR_CM_ADDR_BOUND, NULL))) {
		park(l, sgid, mygid, m);
		return;
	}
	if (l) {
		ib_req_addrs(sgid, mygid, &peer, &self);
	} else if (!sr_cm_ip_hdr_parse(m->private_data, &peer, &self)) {
		l = find_service(d, m->service_id, SR_CM_LISTEN, &self);
		if (!l && !sidr && (l = find_service(d, m->service_id, SR_CM_ADDR_BOUND, &self))) {
			park(l, sgid, mygid, m);
			return;
		}
	} /* else no IP header (an AF_IB peer's REQ): no IP listener matches */
	if (!l) {
		if (sidr) {
			send_sidr_status(d, mygid, sgid, m, SR_CM_SIDR_UNSUPPORTED);
		} else {
			struct sr_cm_msg r;

			memset(&r, 0, sizeof(r));
			r.attr = SR_CM_REJ;
			r.remote_comm_id = m->local_comm_id;
			r.msg_rejected = 0;
			r.reason = SR_CM_REJ_INVALID_SERVICE_ID;
			send_msg(d, NULL, &r, mygid, sgid, false);
		}
		return;
	}
	/* backlog full: dropped without a REJ, so the sender retries (KRN cm.c) */
	if (l->pending >= l->backlog)
		return;
	id = sr_cm_id_new(d, l->owner, l->chan, l->ps, l->qp_type);
	if (!id) {
		if (!sidr) {
			struct sr_cm_msg r;

			memset(&r, 0, sizeof(r));
			r.attr = SR_CM_REJ;
			r.remote_comm_id = m->local_comm_id;
			r.reason = 3; /* no resources */
			send_msg(d, NULL, &r, mygid, sgid, false);
		}
		return;
	}
	id->state = sidr ? SR_CM_SIDR_REQ_RCVD : SR_CM_REQ_RCVD;
	id->listener = l;
	l->pending++;
	id->afonly = l->afonly;
	id->af_ib = l->af_ib;
	id->tos = l->tos;
	id->src = self;
	set_port(&id->src, sr_cm_port(&l->src));
	id->dst = peer;
	memcpy(id->sgid, mygid, 16);
	memcpy(id->dgid, sgid, 16);
	id->port_num = 1;
	id->remote_comm_id = m->local_comm_id;
	sr_cm_req_index(d, id);
	id->remote_qpn = m->local_qpn;
	id->remote_psn = m->starting_psn;
	id->remote_guid = m->local_ca_guid;
	/* the passive side takes the path the REQ describes (KRN cm.c
	 * cm_req_handler: path_mtu from the REQ), so a smaller MTU on the
	 * requester's side holds for both directions */
	id->path_mtu = m->path_mtu;
	ev = sr_cm_event_new(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!ev) {
		sr_cm_abandon(d, id);
		sr_cm_id_free(d, id);
		return;
	}
	ev->w.listen_id = l->handle;
	conn_event(ev, m);
	/* the user's part, zero-padded: always 56 (REQ) or 180 (SIDR) bytes;
	 * an AF_IB listener gets all of it, 92 or 216 (a header too, if any) */
	hdr = l->af_ib ? 0 : SR_CM_IP_HDR_LEN;
	ev->w.private_len = m->private_len - hdr;
	memcpy(ev->w.private_data, m->private_data + hdr, ev->w.private_len);
	sr_cm_event_post(id, ev);
}

/*
 * What librdmacm does with a CONNECT_RESPONSE when it made the QP
 * (ucma_process_conn_resp: RTR, RTS, then the RTU), done here when the
 * REP comes, if the CONNECT carried the moves (SR_CM_FINISH): it saves the
 * library a round trip per connection and sends the RTU without waiting
 * for the application to read its event.  The REP fills in what the
 * library could not know: the peer's QPN and PSN, and each side's
 * read/atomic depth bounded by what the peer offers (as conn.c's
 * cm_conn_response).  True if the QP is at RTS; false if nothing was
 * moved (a QP lock held, the QP no longer in INIT, a move refused): the
 * event is then CONNECT_RESPONSE and the library finishes as before.
 */
static bool finish(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_cm_msg *m)
{
	struct sr_cm_qp_moves mv = id->finish;
	struct sr_qp_attr_wire *rtr = &mv.attr[0], *rts = &mv.attr[1];

	id->finish.n = 0;
	if (mv.n != SR_CM_QP_MOVES || !id->owner)
		return false;
	rtr->dest_qp_num = m->local_qpn;
	rtr->rq_psn = m->starting_psn;
	if (m->initiator_depth < rtr->max_dest_rd_atomic)
		rtr->max_dest_rd_atomic = m->initiator_depth;
	if (m->responder_resources < rts->max_rd_atomic)
		rts->max_rd_atomic = m->responder_resources;
	return sr_qp_moves(d, id->owner, &mv, IBV_QPS_INIT) == 0;
}

static void recv_rep(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_cm_msg *m)
{
	struct sr_cm_event *ev;

	if (id->state == SR_CM_ESTABLISHED || id->state == SR_CM_REP_RCVD) {
		if (id->remote_comm_id == m->local_comm_id && id->state == SR_CM_ESTABLISHED)
			send_rtu(d, id); /* our RTU was lost: again */
		return;
	}
	if (id->state != SR_CM_REQ_SENT)
		return;
	sr_cm_timer_set(d, id, 0, 0);
	id->state = SR_CM_REP_RCVD;
	id->remote_comm_id = m->local_comm_id;
	id->remote_qpn = m->local_qpn;
	id->remote_psn = m->starting_psn;
	id->remote_guid = m->local_ca_guid;
	if (finish(d, id, m)) {
		send_rtu(d, id);
		id->state = SR_CM_ESTABLISHED;
		ev = sr_cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
		if (ev)
			ev->w.flags = SR_CM_EV_QP_MOVED;
	} else {
		ev = sr_cm_event_new(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	}
	if (!ev)
		return;
	conn_event(ev, m);
	ev->w.private_len = m->private_len;
	memcpy(ev->w.private_data, m->private_data, m->private_len);
	sr_cm_event_post(id, ev);
}

static void recv_rej(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_cm_msg *m)
{
	struct sr_cm_event *ev;

	if (id->state != SR_CM_REQ_SENT && id->state != SR_CM_REP_SENT &&
	    id->state != SR_CM_REP_RCVD)
		return;
	sr_cm_timer_set(d, id, 0, 0);
	id->state = SR_CM_TIMEWAIT;
	ev = sr_cm_event_new(id, RDMA_CM_EVENT_REJECTED, m->reason);
	if (!ev)
		return;
	ev->w.private_len = m->private_len;
	memcpy(ev->w.private_data, m->private_data, m->private_len);
	sr_cm_event_post(id, ev);
}

static void recv_dreq(struct sr_daemon *d, struct sr_cm_id *id, const uint8_t sgid[16],
		      const uint8_t mygid[16], const struct sr_cm_msg *m)
{
	switch (id ? id->state : SR_CM_IDLE) {
	case SR_CM_ESTABLISHED:
	case SR_CM_REP_SENT:
	case SR_CM_REP_RCVD:
		sr_cm_timer_set(d, id, 0, 0);
		id->state = SR_CM_DREQ_RCVD;
		sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_DISCONNECTED, 0));
		return;
	case SR_CM_DREQ_SENT: /* crossing DREQs: each side answers the other's */
		send_drep(d, id->sgid, id->dgid, id->comm_id, id->remote_comm_id);
		enter_timewait(d, id);
		sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_DISCONNECTED, 0));
		return;
	case SR_CM_DREQ_RCVD:
		return; /* the application has not answered yet */
	default:
		/* gone or in timewait: a DREP ends the sender's wait */
		send_drep(d, mygid, sgid, m->remote_comm_id, m->local_comm_id);
		return;
	}
}

static void recv_sidr_rep(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_cm_msg *m)
{
	struct sr_cm_event *ev;

	if (id->state != SR_CM_SIDR_REQ_SENT)
		return;
	sr_cm_timer_set(d, id, 0, 0);
	id->state = SR_CM_TIMEWAIT;
	if (m->status != SR_CM_SIDR_SUCCESS) {
		ev = sr_cm_event_new(id, RDMA_CM_EVENT_UNREACHABLE, m->status);
	} else {
		ev = sr_cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
		if (ev) {
			ev->w.conn.qp_num = m->local_qpn;
			ev->w.conn.qkey = m->qkey;
		}
	}
	if (!ev)
		return;
	ev->w.private_len = m->private_len;
	memcpy(ev->w.private_data, m->private_data, m->private_len);
	sr_cm_event_post(id, ev);
}

void sr_cm_recv(struct sr_daemon *d, const uint8_t sgid[16], const uint8_t dgid[16],
		const uint8_t *buf, size_t len)
{
	struct sr_cm_msg m;
	struct sr_cm_id *id;

	if (sr_cm_mad_parse(buf, len, &m)) {
		d->cm->mads_bad++;
		return;
	}
	if (m.attr == SR_CM_REQ || m.attr == SR_CM_SIDR_REQ) {
		recv_req(d, sgid, dgid, &m);
		return;
	}
	/* everything else names our comm ID (SIDR_REP: our request ID) */
	id = sr_cm_id_by_comm(d, m.attr == SR_CM_SIDR_REP ? m.local_comm_id : m.remote_comm_id);
	if (id && m.attr != SR_CM_SIDR_REP && m.attr != SR_CM_REJ && id->remote_comm_id &&
	    id->remote_comm_id != m.local_comm_id)
		id = NULL; /* another connection's message (IBTA 12.9.8.2) */
	switch (m.attr) {
	case SR_CM_REP:
		if (id)
			recv_rep(d, id, &m);
		break;
	case SR_CM_RTU:
		if (id && id->state == SR_CM_REP_SENT) {
			sr_cm_timer_set(d, id, 0, 0);
			id->state = SR_CM_ESTABLISHED;
			sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0));
		}
		break;
	case SR_CM_REJ:
		if (id)
			recv_rej(d, id, &m);
		break;
	case SR_CM_MRA:
		/* the peer needs longer: wait its service timeout (IBTA 12.6.6) */
		if (id && (id->state == SR_CM_REQ_SENT || id->state == SR_CM_REP_SENT))
			sr_cm_timer_set(
			    d, id, 2 * conv_ms(SR_CM_RESPONSE_TIMEOUT) + conv_ms(m.service_timeout),
			    id->retries);
		break;
	case SR_CM_DREQ:
		recv_dreq(d, id, sgid, dgid, &m);
		break;
	case SR_CM_DREP:
		if (!id)
			sr_cm_linger_done(d, m.remote_comm_id);
		if (id && id->state == SR_CM_DREQ_SENT) {
			enter_timewait(d, id);
			sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_DISCONNECTED, 0));
		}
		break;
	case SR_CM_SIDR_REP:
		if (id)
			recv_sidr_rep(d, id, &m);
		break;
	}
}

/* A message went unanswered through all its retries. */
void sr_cm_timeout(struct sr_daemon *d, struct sr_cm_id *id)
{
	switch (id->state) {
	case SR_CM_REQ_SENT:
	case SR_CM_SIDR_REQ_SENT:
		id->state = SR_CM_TIMEWAIT;
		sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT));
		break;
	case SR_CM_REP_SENT: /* no RTU: the connection never came */
		id->state = SR_CM_TIMEWAIT;
		sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT));
		break;
	case SR_CM_DREQ_SENT:
		enter_timewait(d, id);
		sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT));
		break;
	case SR_CM_TIMEWAIT: /* timewait over (enter_timewait) */
		sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
		break;
	default:
		break;
	}
}
