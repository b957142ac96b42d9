/*
 * Address and route resolution for CM ids, from this host's (network
 * namespace's) own interfaces: an address is ours when the device has its
 * GID (device.c builds the table from the interface addresses), and the
 * source address for a destination is the one the kernel's routing picks,
 * learnt by connect() on a UDP socket and getsockname(): no packet is sent.
 * RoCE needs no SA query, so a route is the two GIDs.
 *
 * Another host's address resolves as on a RoCE port of the kernel: its GID
 * is the RoCEv2 GID of the IP address (IPv4-mapped for IPv4), ours the GID
 * of the source address routing picks, and ADDR_RESOLVED waits until the
 * next hop's link address is known (cm_neigh.c: ARP or neighbour
 * discovery, at most the caller's timeout; ADDR_ERROR -ETIMEDOUT if it
 * never answers, the routing error at once if there is no route).  A host
 * whose daemon has no engine cannot reach others: ADDR_ERROR -ENODEV, as
 * the kernel for an egress interface without an RDMA device.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "daemon/cm/cm.h"

int sr_cm_sockaddr_in(const uint8_t raw[SR_CM_ADDR_LEN], struct sockaddr_storage *out)
{
	sa_family_t fam;

	memcpy(&fam, raw, sizeof(fam));
	memset(out, 0, sizeof(*out));
	if (fam == AF_INET)
		memcpy(out, raw, sizeof(struct sockaddr_in));
	else if (fam == AF_INET6)
		memcpy(out, raw, sizeof(struct sockaddr_in6));
	else
		return fam ? -EAFNOSUPPORT : -ENOENT;
	return 0;
}

int sr_cm_gid_of(struct sr_daemon *d, const struct sockaddr_storage *a, uint8_t gid[16])
{
	uint8_t g[16];

	memset(g, 0, sizeof(g));
	if (a->ss_family == AF_INET) {
		g[10] = g[11] = 0xff;
		memcpy(g + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else if (a->ss_family == AF_INET6) {
		memcpy(g, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	} else {
		return -1;
	}
	for (uint32_t i = 0; i < d->dev.gid_cnt; i++) {
		if (!memcmp(d->dev.gids[i].gid, g, 16)) {
			memcpy(gid, g, 16);
			return (int)i;
		}
	}
	return -1;
}

/* The kernel's choice of source address towards dst (port kept 0). */
static int route_src(const struct sockaddr_storage *dst, struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	struct sockaddr_storage to = *dst;
	int s, ret = 0;

	if (sr_cm_route_cached_src(dst, src))
		return 0;
	if (to.ss_family == AF_INET)
		((struct sockaddr_in *)&to)->sin_port = htons(4791);
	else
		((struct sockaddr_in6 *)&to)->sin6_port = htons(4791);
	s = socket(dst->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&to,
		    to.ss_family == AF_INET ? sizeof(struct sockaddr_in)
					    : sizeof(struct sockaddr_in6)) ||
	    getsockname(s, (struct sockaddr *)src, &len))
		ret = -errno;
	close(s);
	if (!ret) {
		if (src->ss_family == AF_INET)
			((struct sockaddr_in *)src)->sin_port = 0;
		else
			((struct sockaddr_in6 *)src)->sin6_port = 0;
		sr_cm_route_keep_src(dst, src);
	}
	return ret;
}

static void addr_error(struct sr_cm_id *id, int status)
{
	sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_ADDR_ERROR, status));
}

/* The RoCEv2 GID of an IP address (RoCE v2 GID type, IBTA A17.8). */
static void gid_from_addr(const struct sockaddr_storage *a, uint8_t gid[16]);

bool sr_cm_addr_mcast(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr));
	if (a->ss_family == AF_INET6)
		return IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)a)->sin6_addr);
	return false;
}

void sr_cm_mgid_of(const struct sockaddr_storage *a, uint8_t gid[16])
{
	gid_from_addr(a, gid);
}

static void gid_from_addr(const struct sockaddr_storage *a, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (a->ss_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else {
		memcpy(gid, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
}

static void addr_resolved(struct sr_cm_id *id)
{
	id->state = SR_CM_ADDR_RESOLVED;
	sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0));
}

void sr_cm_resolve_cancel(struct sr_daemon *d, struct sr_cm_id *id)
{
	if (!id->resolve_deadline_ms)
		return;
	id->resolve_deadline_ms = 0;
	d->cm->resolving--;
}

bool sr_cm_resolve_poll(struct sr_daemon *d)
{
	uint64_t now = sr_cm_now_ms();

	for (struct sr_cm_id *id = d->cm->all; id; id = id->next) {
		int ret;

		if (!id->resolve_deadline_ms || now < id->resolve_next_ms)
			continue;
		id->resolve_next_ms = now + 5;
		ret = sr_cm_neigh_check(&id->dst, false);
		if (ret == SR_CM_NEIGH_PENDING && now < id->resolve_deadline_ms)
			continue;
		sr_cm_resolve_cancel(d, id);
		if (ret == SR_CM_NEIGH_VALID)
			addr_resolved(id);
		else /* the kernel's ARP gave up, or our timeout passed */
			addr_error(id, ret < 0 ? ret : -ETIMEDOUT);
	}
	return d->cm->resolving != 0;
}

int sr_cm_resolve_addr(struct sr_daemon *d, struct sr_cm_id *id, const struct sockaddr *src,
		       const struct sockaddr *dst, uint32_t timeout_ms)
{
	struct sockaddr_storage via, dest;
	bool remote = false;
	int ret;

	memset(&dest, 0, sizeof(dest));
	if (dst->sa_family == AF_INET)
		memcpy(&dest, dst, sizeof(struct sockaddr_in));
	else if (dst->sa_family == AF_INET6)
		memcpy(&dest, dst, sizeof(struct sockaddr_in6));
	else
		return -EAFNOSUPPORT;
	if (id->state != SR_CM_IDLE && id->state != SR_CM_ADDR_BOUND &&
	    id->state != SR_CM_ADDR_RESOLVED)
		return -EINVAL;
	sr_cm_resolve_cancel(d, id);
	if (src && src->sa_family) {
		if (src->sa_family != dst->sa_family)
			return -EINVAL;
		if (!id->bound) {
			ret = sr_cm_bind(d, id, src);
			if (ret)
				return ret;
		}
	}
	/* a wildcard destination is this host, as in the kernel */
	if (sr_cm_addr_any(&dest)) {
		if (dest.ss_family == AF_INET)
			((struct sockaddr_in *)&dest)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else
			((struct sockaddr_in6 *)&dest)->sin6_addr = in6addr_loopback;
	}
	id->dst = dest;
	ret = route_src(&dest, &via);
	if (ret) {
		addr_error(id, ret);
		return 0;
	}
	if (sr_cm_addr_mcast(&dest)) {
		/* a multicast group (rdma_join_multicast): its MGID, as RoCEv2
		 * maps the group (IPv4-mapped), and no neighbour to wait for */
		gid_from_addr(&dest, id->dgid);
	} else if (sr_cm_gid_of(d, &dest, id->dgid) < 0) {
		/* another host's: over the wire, if this host has an engine */
		if (!sr_cm_wire_up()) {
			addr_error(id, -ENODEV);
			return 0;
		}
		gid_from_addr(&dest, id->dgid);
		remote = true;
	}
	if (!id->bound) {
		ret = sr_cm_bind(d, id, (struct sockaddr *)&via);
		if (ret) {
			addr_error(id, ret);
			return 0;
		}
	} else if (sr_cm_addr_any(&id->src)) {
		uint16_t port = sr_cm_port(&id->src);

		if (via.ss_family != id->src.ss_family) {
			addr_error(id, -EINVAL);
			return 0;
		}
		id->src = via;
		if (via.ss_family == AF_INET)
			((struct sockaddr_in *)&id->src)->sin_port = htons(port);
		else
			((struct sockaddr_in6 *)&id->src)->sin6_port = htons(port);
	}
	if (sr_cm_gid_of(d, &id->src, id->sgid) < 0) {
		addr_error(id, -EADDRNOTAVAIL);
		return 0;
	}
	id->port_num = 1;
	if (remote) {
		ret = sr_cm_neigh_check(&dest, true);
		if (ret < 0 || ret == SR_CM_NEIGH_FAILED) {
			addr_error(id, ret < 0 ? ret : -ETIMEDOUT);
			return 0;
		}
		if (ret == SR_CM_NEIGH_PENDING) { /* sr_cm_resolve_poll finishes it */
			id->resolve_deadline_ms = sr_cm_now_ms() + (timeout_ms ? timeout_ms : 2000);
			id->resolve_next_ms = 0;
			d->cm->resolving++;
			return 0;
		}
	}
	addr_resolved(id);
	return 0;
}

int sr_cm_resolve_route(struct sr_daemon *d, struct sr_cm_id *id)
{
	(void)d;
	if (id->state != SR_CM_ADDR_RESOLVED && id->state != SR_CM_ROUTE_RESOLVED)
		return -EINVAL;
	id->state = SR_CM_ROUTE_RESOLVED;
	sr_cm_event_post(id, sr_cm_event_new(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0));
	return 0;
}
