/*
 * Multicast joins (rdma_join_multicast, _ex, rdma_leave_multicast), as
 * rdma-core's librdmacm over a RoCE device: the daemon checks the id and
 * queues MULTICAST_JOIN at once (RoCE has no SA: the kernel's iboe join
 * completes locally too), with the group's MGID (IPv4 a.b.c.d ->
 * ::ffff:a.b.c.d, an IPv6 group as itself), QPN 0xFFFFFF and the UDP
 * Q_Key; the library fills the AH attributes, hands the join's context
 * back as param.ud.private_data, and attaches the id's QP to the MGID when
 * it reports the event, unless the member is send-only.  Leave detaches,
 * and waits until the group's events are acked.  An AF_IB group
 * (sockaddr_ib, mckey -M) names its MGID itself; on RoCE that MGID is an
 * IP group (::ffff:a.b.c.d the IPv4 group a.b.c.d, any other the IPv6
 * group of its bytes), so the daemon is given that IP group and AF_IB and
 * IP members of one group share it (docs/architecture.md, "Multicast").
 */
#include <errno.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/internal.h"

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
	if (a->sa_family == AF_IB)
		return !memcmp(&((const struct sockaddr_ib *)a)->sib_addr,
			       &((const struct sockaddr_ib *)b)->sib_addr, 16);
	return false;
}

/* The IP group the daemon joins: an AF_IB group's MGID read as an IP
 * address (afib.c: IPv4-mapped -> IPv4, else IPv6), an IP group itself.
 * The daemon's MGID of that IP group is the AF_IB group's MGID again. */
static int group_ip(const struct sockaddr *a, struct sockaddr_storage *ip)
{
	socklen_t len;

	if (a->sa_family == AF_IB) {
		cm_ib_to_ip((const struct sockaddr_ib *)a, ip);
		return 0;
	}
	len = cm_addr_len(a);
	if (!len || len > SR_CM_ADDR_LEN)
		return -EINVAL;
	memset(ip, 0, sizeof(*ip));
	memcpy(ip, a, len);
	return 0;
}

static void mgid_of(const struct sockaddr *a, uint8_t mgid[16])
{
	memset(mgid, 0, 16);
	if (a->sa_family == AF_INET) {
		mgid[10] = mgid[11] = 0xff;
		memcpy(mgid + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else if (a->sa_family == AF_IB) {
		memcpy(mgid, &((const struct sockaddr_ib *)a)->sib_addr, 16);
	} else {
		memcpy(mgid, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
}

int rdma_join_multicast_ex(struct rdma_cm_id *cid, struct rdma_cm_join_mc_attr_ex *attr,
			   void *context)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct sockaddr_storage ip;
	const struct sockaddr *addr;
	struct cm_mc *mc;
	struct sr_req req;
	struct sr_rep rep;
	socklen_t len;
	int ret;

	if (!id || !attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) || !attr->addr ||
	    attr->comp_mask &
		~(uint32_t)(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags > RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return cm_err(EINVAL);
	id->fresh = false;
	addr = attr->addr;
	len = cm_addr_len(addr);
	if (!len || len > sizeof(mc->addr) || group_ip(addr, &ip))
		return cm_err(EINVAL);
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return cm_err(ENOMEM);
	memcpy(&mc->addr, addr, len);
	mgid_of(addr, mc->mgid);
	mc->context = context;
	mc->sendonly = attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	pthread_mutex_lock(&id->lock);
	for (struct cm_mc *o = id->mcs; o; o = o->next)
		if (!memcmp(o->mgid, mc->mgid, 16)) {
			/* the kernel's answer to a second join; an AF_IB and an
			 * IP join of one group are one group (one attach) */
			pthread_mutex_unlock(&id->lock);
			free(mc);
			return cm_err(EADDRINUSE);
		}
	mc->next = id->mcs;
	id->mcs = mc;
	pthread_mutex_unlock(&id->lock);
	cm_req_init(&req, SR_OP_CM_JOIN, id->handle);
	memcpy(req.u.cm.dst, &ip, cm_addr_len((struct sockaddr *)&ip));
	ret = cm_request(&req, &rep, NULL, 0);
	if (ret) {
		pthread_mutex_lock(&id->lock);
		for (struct cm_mc **p = &id->mcs; *p; p = &(*p)->next)
			if (*p == mc) {
				*p = mc->next;
				break;
			}
		pthread_mutex_unlock(&id->lock);
		free(mc);
		return cm_err(-ret);
	}
	return cm_complete(id);
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	struct rdma_cm_join_mc_attr_ex attr = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
							    RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
					       .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER,
					       .addr = addr};

	return rdma_join_multicast_ex(id, &attr, context);
}

int rdma_leave_multicast(struct rdma_cm_id *cid, struct sockaddr *addr)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct cm_mc *mc = NULL;

	if (!id || !addr)
		return cm_err(EINVAL);
	pthread_mutex_lock(&id->lock);
	for (struct cm_mc **p = &id->mcs; *p; p = &(*p)->next)
		if (same_addr((struct sockaddr *)&(*p)->addr, addr)) {
			mc = *p;
			*p = mc->next;
			break;
		}
	pthread_mutex_unlock(&id->lock);
	if (!mc)
		return cm_err(EADDRNOTAVAIL);
	if (mc->attached && cid->qp)
		ibv_detach_mcast(cid->qp, (union ibv_gid *)mc->mgid, 0);
	/* rdma-core: the group's events must be acked first */
	pthread_mutex_lock(&id->lock);
	while (mc->unacked)
		pthread_cond_wait(&id->cond, &id->lock);
	pthread_mutex_unlock(&id->lock);
	free(mc);
	return 0;
}

void cm_mc_event(struct cm_event *e, struct cm_id *id, const struct sr_cm_event_wire *w)
{
	struct rdma_ud_param *p = &e->ev.param.ud;
	struct cm_mc *mc = NULL;
	int ret;

	pthread_mutex_lock(&id->lock);
	for (struct cm_mc *o = id->mcs; o; o = o->next)
		if (!memcmp(o->mgid, w->private_data, 16) && !o->reported) {
			mc = o;
			break;
		}
	if (mc) {
		mc->reported = true;
		mc->unacked++;
	}
	pthread_mutex_unlock(&id->lock);
	e->mc = mc;
	p->qp_num = w->conn.qp_num;
	p->qkey = w->conn.qkey;
	p->ah_attr.is_global = 1;
	memcpy(p->ah_attr.grh.dgid.raw, w->private_data, 16);
	p->ah_attr.grh.sgid_index = (uint8_t)cm_gid_index(id->info.sgid);
	p->ah_attr.grh.hop_limit = 64;
	p->ah_attr.grh.traffic_class = id->tos;
	p->ah_attr.port_num = (uint8_t)(id->id.port_num ? id->id.port_num : 1);
	if (!mc)
		return; /* left meanwhile: reported without a context, as rdma-core */
	p->private_data = mc->context;
	if (id->id.qp && !mc->sendonly) {
		ret = ibv_attach_mcast(id->id.qp, (union ibv_gid *)mc->mgid, 0);
		if (ret) {
			e->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
			e->ev.status = -ret;
		} else {
			mc->attached = true;
		}
	}
}

void cm_mc_acked(struct cm_id *id, struct cm_mc *mc)
{
	pthread_mutex_lock(&id->lock);
	mc->unacked--;
	pthread_cond_broadcast(&id->cond);
	pthread_mutex_unlock(&id->lock);
}

void cm_mc_free_all(struct cm_id *id)
{
	while (id->mcs) {
		struct cm_mc *mc = id->mcs;

		id->mcs = mc->next;
		free(mc);
	}
}
