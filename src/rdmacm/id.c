/*
 * CM ids and their addresses: create and destroy (destroy waits until every
 * event reported for the id is acked, as rdma-core does), bind, address
 * and route resolution, listen, options, port getters.  The daemon resolves
 * (src/daemon/cm/cm_addr.c); each event brings the id's addresses and path
 * back here (cm_id_apply_info).
 */
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <infiniband/ib.h>
#include <stdlib.h>
#include <string.h>

#include "core/idalloc.h"
#include "rdmacm/internal.h"

socklen_t cm_addr_len(const struct sockaddr *a)
{
	switch (a->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	case AF_IB:
		return sizeof(struct sockaddr_ib);
	default:
		return 0;
	}
}

struct cm_id *cm_id_alloc(struct rdma_event_channel *ch, void *context, enum rdma_port_space ps,
			  enum ibv_qp_type qp_type, uint32_t handle)
{
	struct cm_id *id = calloc(1, sizeof(*id));

	if (!id) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&id->lock, NULL);
	pthread_cond_init(&id->cond, NULL);
	id->handle = handle;
	id->id.channel = ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qp_type;
	id->id.verbs = cm_g.verbs; /* a request's id is on the device */
	id->id.pd = cm_g.pd;
	id->id.port_num = 1;
	id->ack_timeout = 18;
	/* the SQ's starting PSN, chosen once per id as the kernel's CMA does:
	 * an application-managed QP (rping -q) reads it through
	 * rdma_init_qp_attr(RTS) before rdma_accept sends it in the REP */
	id->psn = sr_random32() & 0xffffff;
	cm_id_table_set(handle, id);
	return id;
}

void cm_id_apply_info(struct cm_id *id, const struct sr_cm_info *info)
{
	struct rdma_addr *a = &id->id.route.addr;
	sa_family_t fam;

	id->info = *info;
	memcpy(&fam, info->src, sizeof(fam));
	if (fam)
		memcpy(&a->src_addr, info->src, cm_addr_len((struct sockaddr *)info->src));
	memcpy(&fam, info->dst, sizeof(fam));
	if (fam)
		memcpy(&a->dst_addr, info->dst, cm_addr_len((struct sockaddr *)info->dst));
	if (id->af_ib || info->flags & SR_CM_AF_IB) {
		id->af_ib = true;
		if (!id->ib_ps)
			id->ib_ps = (uint16_t)id->id.ps;
		cm_id_ib_addrs(id);
	}
	memcpy(a->addr.ibaddr.sgid.raw, info->sgid, 16);
	memcpy(a->addr.ibaddr.dgid.raw, info->dgid, 16);
	a->addr.ibaddr.pkey = 0xffff;
	if (info->port_num) {
		id->id.port_num = (uint8_t)info->port_num;
		id->id.verbs = cm_g.verbs;
		id->id.pd = cm_g.pd;
	}
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out, void *context,
		   enum rdma_port_space ps)
{
	enum ibv_qp_type qp_type =
	    ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
	struct rdma_event_channel *ch = channel;
	struct sr_req req;
	struct sr_rep rep;
	struct cm_id *id;
	int ret;

	if (!out)
		return cm_err(EINVAL);
	if (cm_init())
		return -1;
	if (!ch) {
		ch = cm_channel_new();
		if (!ch)
			return -1;
	}
	cm_req_init(&req, SR_OP_CM_CREATE_ID, 0);
	req.u.cm.channel = ((struct cm_chan *)ch)->handle;
	req.u.cm.ps = ps;
	req.u.cm.qp_type = qp_type;
	ret = cm_request(&req, &rep, NULL, 0);
	if (ret) {
		if (!channel)
			rdma_destroy_event_channel(ch);
		return cm_err(-ret);
	}
	id = cm_id_alloc(ch, context, ps, qp_type, rep.handle);
	if (!id) {
		cm_req_init(&req, SR_OP_CM_DESTROY_ID, rep.handle);
		cm_request(&req, &rep, NULL, 0);
		if (!channel)
			rdma_destroy_event_channel(ch);
		return -1;
	}
	/* a listen or unbound id is not on a device yet */
	id->id.verbs = NULL;
	id->id.pd = NULL;
	id->id.port_num = 0;
	id->sync = !channel;
	id->fresh = true;
	*out = &id->id;
	return 0;
}

int rdma_destroy_id(struct rdma_cm_id *cid)
{
	struct cm_id *id = (struct cm_id *)cid;

	if (!id)
		return cm_err(EINVAL);
	if (cid->event) {
		rdma_ack_cm_event(cid->event);
		cid->event = NULL;
	}
	/* out of the table first: an event still in flight for it is then
	 * either counted (cm_id_table_hold) or dropped by rdma_get_cm_event */
	cm_id_table_set(id->handle, NULL);
	cm_chan_destroy_id(id);
	/* every event reported for it must be acked first (rdma-core) */
	pthread_mutex_lock(&id->lock);
	while (id->events_unacked)
		pthread_cond_wait(&id->cond, &id->lock);
	pthread_mutex_unlock(&id->lock);
	if (id->sync)
		rdma_destroy_event_channel(cid->channel);
	cm_mc_free_all(id);
	pthread_mutex_destroy(&id->lock);
	pthread_cond_destroy(&id->cond);
	free(id);
	return 0;
}

static int put_addr(uint8_t raw[SR_CM_ADDR_LEN], const struct sockaddr *a)
{
	struct sockaddr_storage ip;
	socklen_t len;

	memset(raw, 0, SR_CM_ADDR_LEN);
	if (!a)
		return 0;
	if (cm_addr_is_ib(a)) { /* the IP address its GID is */
		cm_ib_to_ip((const struct sockaddr_ib *)a, &ip);
		a = (const struct sockaddr *)&ip;
	}
	len = cm_addr_len(a);
	if (!len || len > SR_CM_ADDR_LEN)
		return -EAFNOSUPPORT;
	memcpy(raw, a, len);
	return 0;
}

/* An AF_IB source: the port space its service ID binds in. */
static int ib_service(struct cm_id *id, struct sr_req *req, const struct sockaddr_ib *sib)
{
	int ps = cm_ib_bind_ps(id->id.ps, sib);

	if (ps < 0)
		return ps;
	req->u.cm.flags |= SR_CM_AF_IB;
	req->u.cm.ps = (uint32_t)ps;
	return 0;
}

int rdma_bind_addr(struct rdma_cm_id *cid, struct sockaddr *addr)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!id || !addr)
		return cm_err(EINVAL);
	cm_req_init(&req, SR_OP_CM_BIND, id->handle);
	ret = put_addr(req.u.cm.src, addr);
	if (!ret && cm_addr_is_ib(addr))
		ret = ib_service(id, &req, (struct sockaddr_ib *)addr);
	if (ret)
		return cm_err(-ret);
	ret = cm_request(&req, &rep, NULL, 0);
	if (ret)
		return cm_err(-ret);
	if (cm_addr_is_ib(addr)) {
		id->af_ib = true;
		id->ib_ps = (uint16_t)req.u.cm.ps;
	}
	cm_id_apply_info(id, &rep.u.cm_info);
	if (!rep.u.cm_info.port_num) { /* a wildcard: on no device (rdma-core) */
		cid->verbs = NULL;
		cid->pd = NULL;
		cid->port_num = 0;
	}
	return 0;
}

/* AF_IB on both ends or on neither (an id bound to one family resolves
 * only addresses of that family); the service ID the REQ will carry. */
static int ib_resolve(struct cm_id *id, struct sr_req *req, const struct sockaddr *src,
		      const struct sockaddr *dst)
{
	bool ib = cm_addr_is_ib(dst);
	int ret;

	if ((src && src->sa_family && cm_addr_is_ib(src) != ib) ||
	    ((id->info.src[0] || id->info.src[1]) && id->af_ib != ib))
		return -EINVAL;
	if (!ib)
		return 0;
	if (cm_addr_is_ib(src) && !id->af_ib) {
		ret = ib_service(id, req, (const struct sockaddr_ib *)src);
		if (ret)
			return ret;
	}
	req->u.cm.flags |= SR_CM_AF_IB;
	req->u.cm.sid = be64toh(((const struct sockaddr_ib *)dst)->sib_sid);
	return 0;
}

/*
 * cmtime and its kind resolve a thousand ids in a row and take the events
 * afterwards: each resolution was a round trip to the daemon whose answer
 * is 0 whenever the id is new and the destination an IP address, every
 * real failure (no route, no neighbour, no GID) being ADDR_ERROR's.  Those
 * leave without a reply (SR_CM_NO_REPLY); any other resolution waits for
 * the reply.
 */

int rdma_resolve_addr(struct rdma_cm_id *cid, struct sockaddr *src_addr, struct sockaddr *dst_addr,
		      int timeout_ms)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!id || !dst_addr)
		return cm_err(EINVAL);
	id->addr_ok = id->route_local = false;
	cm_req_init(&req, SR_OP_CM_RESOLVE_ADDR, id->handle);
	ret = put_addr(req.u.cm.src, src_addr);
	if (!ret)
		ret = put_addr(req.u.cm.dst, dst_addr);
	if (!ret)
		ret = ib_resolve(id, &req, src_addr, dst_addr);
	if (ret)
		return cm_err(-ret);
	req.u.cm.timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
	if (id->fresh && (!src_addr || !src_addr->sa_family) &&
	    (dst_addr->sa_family == AF_INET || dst_addr->sa_family == AF_INET6) &&
	    !(req.u.cm.flags & SR_CM_AF_IB) && !id->af_ib) {
		/* the daemon's answer could only be 0 (its id is IDLE or
		 * ADDR_BOUND, no source to bind, an IP destination): every
		 * failure is the ADDR_ERROR event's, so nothing waits here */
		id->fresh = false;
		req.u.cm.flags |= SR_CM_NO_REPLY;
		ret = cm_send_only(&req);
	} else {
		id->fresh = false;
		ret = cm_id_request(id, &req, &rep);
	}
	if (ret)
		return cm_err(-ret);
	if (req.u.cm.flags & SR_CM_AF_IB) {
		id->af_ib = true;
		id->ib_ps = (uint16_t)(req.u.cm.ps ? req.u.cm.ps : (uint32_t)cid->ps);
		id->dst_sid = req.u.cm.sid;
	}
	memcpy(&cid->route.addr.dst_addr, dst_addr, cm_addr_len(dst_addr));
	return cm_complete(id);
}

/*
 * On RoCE the route is known once the address is: the kernel's
 * rdma_resolve_route only looks the path up again from the same neighbour
 * and reports ROUTE_RESOLVED, and the daemon's step only moves the id's
 * state.  So after ADDR_RESOLVED (and no resolve since) the library
 * reports the event itself, on the id's channel and counted in its
 * eventfd like any other, and saves the round trip to the daemon (one per
 * connection, cmtime's "resolve route" step); the CONNECT then tells the
 * daemon (SR_CM_ROUTE_LOCAL).  Anything else (an id whose address was not
 * resolved) asks the daemon, which gives rdma-core's answers (EINVAL in
 * the wrong state).
 */

int rdma_resolve_route(struct rdma_cm_id *cid, int timeout_ms)
{
	struct cm_id *id = (struct cm_id *)cid;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	(void)timeout_ms;
	if (id->addr_ok && !cm_chan_local_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED)) {
		id->route_local = true;
		return cm_complete(id);
	}
	ret = cm_id_op_events(id, SR_OP_CM_RESOLVE_ROUTE);
	if (ret)
		return cm_err(-ret);
	return cm_complete(id);
}

int rdma_listen(struct rdma_cm_id *cid, int backlog)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!id)
		return cm_err(EINVAL);
	id->fresh = false;
	if (!id->info.src[0] && !id->info.src[1]) {
		/* not bound: the kernel binds to the IPv4 wildcard, any port */
		struct sockaddr_in any = {.sin_family = AF_INET};

		if (rdma_bind_addr(cid, (struct sockaddr *)&any))
			return -1;
	}
	cm_req_init(&req, SR_OP_CM_LISTEN, id->handle);
	req.u.cm.backlog = backlog;
	ret = cm_request(&req, &rep, NULL, 0);
	return ret ? cm_err(-ret) : 0;
}

int rdma_set_option(struct rdma_cm_id *cid, int level, int optname, void *optval, size_t optlen)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!id || !optval)
		return cm_err(EINVAL);
	if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		return optlen % sizeof(struct ibv_path_data) ? cm_err(EINVAL) : 0;
	if (level != RDMA_OPTION_ID)
		return cm_err(ENOSYS);
	cm_req_init(&req, SR_OP_CM_SET_OPTION, id->handle);
	req.u.cm.option = (uint32_t)optname;
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			return cm_err(EINVAL);
		id->tos = *(uint8_t *)optval;
		req.u.cm.value = id->tos;
		break;
	case RDMA_OPTION_ID_REUSEADDR:
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int))
			return cm_err(EINVAL);
		req.u.cm.value = *(int *)optval != 0;
		break;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t))
			return cm_err(EINVAL);
		id->ack_timeout = *(uint8_t *)optval; /* applied at RTS (conn.c) */
		return 0;
	default:
		return cm_err(ENOSYS);
	}
	ret = cm_request(&req, &rep, NULL, 0);
	return ret ? cm_err(-ret) : 0;
}

static __be16 port_of(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_port;
	if (a->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)a)->sin6_port;
	if (a->sa_family == AF_IB) /* the service ID's port */
		return htons(cm_ib_port((const struct sockaddr_ib *)a));
	return 0;
}

__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.src_addr) : 0;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? port_of(&id->route.addr.dst_addr) : 0;
}

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	/* the RTU always arrives on one host: nothing to hurry */
	return id ? 0 : cm_err(EINVAL);
}
