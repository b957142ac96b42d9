/*
 * rdma_getaddrinfo / rdma_freeaddrinfo, as rdma-core's addrinfo.c defines
 * them: getaddrinfo(3) underneath (its EAI_* codes are returned as they
 * are), the first result only, RAI_PASSIVE filling ai_src_addr and
 * otherwise ai_dst_addr (plus a copy of hints->ai_src_addr), the QP type
 * and port space from the hints or else from the socket type.  There is no
 * ibacm here, so ai_route and ai_connect stay empty, as rdma-core's are
 * without it.  RAI_FAMILY with AF_IB and RAI_NUMERICHOST reads the node as
 * a GID ("::ffff:10.0.0.1", "fe80::1"; an IPv4 numeric address is taken as
 * its IPv4-mapped GID) and gives a sockaddr_ib whose service ID is the
 * port in the port space (afib.c); without RAI_NUMERICHOST, AF_IB asks
 * for no family in particular, as rdma-core does.
 * With neither node nor service, rdma-core builds the result from the hints
 * alone (their flags, family, QP type, port space, source and destination
 * addresses): libfabric's verbs provider asks so for the address it already
 * holds (an rxm endpoint's source address) and gives up on the device if
 * that fails.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/internal.h"

static int copy_addr(struct sockaddr **dst, socklen_t *dlen, const struct sockaddr *src,
		     socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return EAI_MEMORY;
	memcpy(*dst, src, len);
	*dlen = len;
	return 0;
}

static int from_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));
	int ret = 0;

	if (!r)
		return EAI_MEMORY;
	r->ai_flags = hints->ai_flags;
	r->ai_family = hints->ai_family;
	r->ai_qp_type = hints->ai_qp_type;
	r->ai_port_space = hints->ai_port_space;
	if (hints->ai_dst_addr && hints->ai_dst_len)
		ret = copy_addr(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr,
				hints->ai_dst_len);
	if (!ret && hints->ai_src_addr && hints->ai_src_len)
		ret = copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr,
				hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(r);
		return ret;
	}
	*res = r;
	return 0;
}

/* A GID asked for: AF_IB with a numeric node (rdma-core's condition). */
static bool want_ib(const struct rdma_addrinfo *hints)
{
	return hints && hints->ai_flags & RAI_FAMILY && hints->ai_family == AF_IB &&
	       hints->ai_flags & RAI_NUMERICHOST;
}

static int ib_result(struct rdma_addrinfo *r, const struct sockaddr *ip)
{
	r->ai_family = AF_IB;
	if (r->ai_flags & RAI_PASSIVE)
		return cm_ip_to_ib_ai(ip, r->ai_port_space, &r->ai_src_addr, &r->ai_src_len);
	return cm_ip_to_ib_ai(ip, r->ai_port_space, &r->ai_dst_addr, &r->ai_dst_len);
}

int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	struct addrinfo gh, *gres = NULL;
	struct rdma_addrinfo *r;
	int ret;

	if (!res || (!node && !service && !hints)) {
		errno = EINVAL;
		return EAI_NONAME;
	}
	if (cm_init())
		return EAI_SYSTEM;
	if (!node && !service)
		return from_hints(hints, res);
	memset(&gh, 0, sizeof(gh));
	if (hints) {
		gh.ai_flags = (hints->ai_flags & RAI_PASSIVE ? AI_PASSIVE : 0) |
			      (hints->ai_flags & RAI_NUMERICHOST ? AI_NUMERICHOST : 0);
		gh.ai_family = hints->ai_family == AF_IB ? AF_UNSPEC : hints->ai_family;
		if (hints->ai_port_space == RDMA_PS_UDP || hints->ai_qp_type == IBV_QPT_UD)
			gh.ai_socktype = SOCK_DGRAM;
		else
			gh.ai_socktype = SOCK_STREAM;
	} else {
		gh.ai_socktype = SOCK_STREAM;
	}
	ret = getaddrinfo(node, service, &gh, &gres);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r) {
		freeaddrinfo(gres);
		return EAI_MEMORY;
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = gres->ai_family;
	r->ai_qp_type = hints && hints->ai_qp_type	  ? hints->ai_qp_type
			: gres->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD
							  : IBV_QPT_RC;
	r->ai_port_space = hints && hints->ai_port_space     ? hints->ai_port_space
			   : gres->ai_socktype == SOCK_DGRAM ? RDMA_PS_UDP
							     : RDMA_PS_TCP;
	if (want_ib(hints))
		ret = ib_result(r, gres->ai_addr);
	else if (r->ai_flags & RAI_PASSIVE)
		ret = copy_addr(&r->ai_src_addr, &r->ai_src_len, gres->ai_addr, gres->ai_addrlen);
	else
		ret = copy_addr(&r->ai_dst_addr, &r->ai_dst_len, gres->ai_addr, gres->ai_addrlen);
	if (!ret && !r->ai_src_addr && hints && hints->ai_src_addr && hints->ai_src_len)
		ret = copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr,
				hints->ai_src_len);
	if (!ret && gres->ai_canonname) {
		char **name =
		    r->ai_flags & RAI_PASSIVE ? &r->ai_src_canonname : &r->ai_dst_canonname;

		*name = strdup(gres->ai_canonname);
		if (!*name)
			ret = EAI_MEMORY;
	}
	freeaddrinfo(gres);
	if (ret) {
		rdma_freeaddrinfo(r);
		return ret;
	}
	*res = r;
	return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}
