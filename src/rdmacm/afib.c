/*
 * AF_IB addresses (struct sockaddr_ib, <infiniband/ib.h>) in librdmacm.
 * An AF_IB address names a port by its GID and a service by its 64-bit
 * service ID.  On a RoCE port a GID is an IP address of the host
 * (IPv4-mapped ::ffff:a.b.c.d or the IPv6 address itself), so the daemon,
 * which resolves, binds and routes IP addresses, gets the IP address the
 * GID stands for, the service ID's port and port space, and the flag that
 * the id is AF_IB (its REQ carries no IP CM header).  The addresses the
 * application reads back (route.addr, rdma_get_local_addr and _peer_addr)
 * are turned into sockaddr_ib again here.  The kernel refuses AF_IB on a
 * RoCE port (its address and route resolution need an IB port); what
 * this does instead is in docs/architecture.md ("AF_IB addresses").
 */
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/ib.h>
#include <netinet/in.h>

#include "rdmacm/internal.h"

#define PS_MASK	  0xFFFFFFFFFFFF0000ULL /* the port space part of a service ID */
#define PORT_MASK 0x000000000000FFFFULL

static uint64_t sid_of(enum rdma_port_space ps, uint16_t port)
{
	return ((uint64_t)ps << 16) + port;
}

bool cm_addr_is_ib(const struct sockaddr *a)
{
	return a && a->sa_family == AF_IB;
}

uint16_t cm_ib_port(const struct sockaddr_ib *sib)
{
	return (uint16_t)(be64toh(sib->sib_sid) & be64toh(sib->sib_sid_mask) & PORT_MASK);
}

int cm_ib_bind_ps(enum rdma_port_space ps, const struct sockaddr_ib *sib)
{
	uint64_t mask = be64toh(sib->sib_sid_mask) & PS_MASK;
	uint64_t sid = be64toh(sib->sib_sid) & mask;

	/* the service ID's port space, where the id's allows it (a PS_IB id
	 * takes any of the three, as the kernel's cma_select_ib_ps); bits
	 * outside the mask are free */
	if (ps == RDMA_PS_IB && sid == (sid_of(RDMA_PS_IB, 0) & mask))
		return RDMA_PS_IB;
	if ((ps == RDMA_PS_IB || ps == RDMA_PS_TCP) && sid == (sid_of(RDMA_PS_TCP, 0) & mask))
		return RDMA_PS_TCP;
	if ((ps == RDMA_PS_IB || ps == RDMA_PS_UDP) && sid == (sid_of(RDMA_PS_UDP, 0) & mask))
		return RDMA_PS_UDP;
	return -EPROTONOSUPPORT;
}

static bool gid_v4_mapped(const uint8_t g[16])
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(g, pre, sizeof(pre));
}

void cm_ib_to_ip(const struct sockaddr_ib *sib, struct sockaddr_storage *out)
{
	const uint8_t *g = sib->sib_addr.sib_raw;
	uint16_t port = htons(cm_ib_port(sib));

	memset(out, 0, sizeof(*out));
	if (gid_v4_mapped(g)) {
		struct sockaddr_in *s = (struct sockaddr_in *)out;

		s->sin_family = AF_INET;
		s->sin_port = port;
		memcpy(&s->sin_addr, g + 12, 4);
	} else {
		/* the zero GID is the IPv6 wildcard, which takes IPv4 too */
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)out;

		s->sin6_family = AF_INET6;
		s->sin6_port = port;
		s->sin6_flowinfo = sib->sib_flowinfo;
		memcpy(&s->sin6_addr, g, 16);
		s->sin6_scope_id = (uint32_t)sib->sib_scope_id;
	}
}

void cm_ip_to_ib(const struct sockaddr *ip, uint64_t sid, struct sockaddr_ib *out)
{
	memset(out, 0, sizeof(*out));
	out->sib_family = AF_IB;
	out->sib_pkey = htons(0xffff);
	if (ip->sa_family == AF_INET) {
		/* the IPv4 wildcard is the zero GID, as any other wildcard */
		if (((const struct sockaddr_in *)ip)->sin_addr.s_addr != htonl(INADDR_ANY))
			out->sib_addr.sib_raw[10] = out->sib_addr.sib_raw[11] = 0xff;
		memcpy(&out->sib_addr.sib_raw[12], &((const struct sockaddr_in *)ip)->sin_addr, 4);
	} else if (ip->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ip;

		memcpy(out->sib_addr.sib_raw, &s->sin6_addr, 16);
		out->sib_flowinfo = s->sin6_flowinfo;
		out->sib_scope_id = s->sin6_scope_id;
	}
	out->sib_sid = htobe64(sid);
	out->sib_sid_mask = htobe64(~0ULL);
}

int cm_ip_to_ib_ai(const struct sockaddr *ip, enum rdma_port_space ps, struct sockaddr **out,
		   socklen_t *len)
{
	struct sockaddr_ib *sib = calloc(1, sizeof(*sib));
	uint16_t port = 0;

	if (!sib)
		return EAI_MEMORY;
	if (ip->sa_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)ip)->sin_port);
	else if (ip->sa_family == AF_INET6)
		port = ntohs(((const struct sockaddr_in6 *)ip)->sin6_port);
	cm_ip_to_ib(ip, sid_of(ps, port), sib);
	/* as rdma-core: the port space is fixed when known, the port too
	 * when one was given; the rest of the service ID is free */
	sib->sib_sid_mask = htobe64((ps ? PS_MASK : 0) | (port ? PORT_MASK : 0));
	*out = (struct sockaddr *)sib;
	*len = sizeof(*sib);
	return 0;
}

void cm_id_ib_addrs(struct cm_id *id)
{
	struct rdma_addr *a = &id->id.route.addr;
	uint64_t sid = sid_of(id->ib_ps, ntohs(rdma_get_src_port(&id->id)));
	struct sockaddr_ib sib;

	if (a->src_addr.sa_family == AF_INET || a->src_addr.sa_family == AF_INET6) {
		cm_ip_to_ib(&a->src_addr, sid, &sib);
		memcpy(&a->src_addr, &sib, sizeof(sib));
	}
	if (a->dst_addr.sa_family == AF_INET || a->dst_addr.sa_family == AF_INET6) {
		/* the service ID the REQ named: a listener's child's own */
		cm_ip_to_ib(&a->dst_addr, id->dst_sid ? id->dst_sid : sid, &sib);
		memcpy(&a->dst_addr, &sib, sizeof(sib));
	}
}
