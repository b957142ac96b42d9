/*
 * Address resolution's view of the kernel's tables, through rtnetlink: the
 * route towards a destination (its output interface and gateway) and the
 * state of that next hop in the neighbour table (ARP for IPv4, neighbour
 * discovery for IPv6).  The kernel's rdma_resolve_addr waits for exactly
 * this before it reports ADDR_RESOLVED (the RoCE path needs the next hop's
 * MAC); here the kernel's own UDP stack sends the datagrams, so the MAC is
 * not needed, but a destination whose next hop never answers must still
 * fail resolution as it does there instead of sending CM MADs into the
 * void.  Asking the kernel to resolve a next hop (RTM_NEWNEIGH with
 * NTF_USE, what `ip neigh replace ... use` does) needs CAP_NET_ADMIN in
 * the namespace; an unprivileged daemon reports the next hop valid and the
 * first datagram makes the kernel resolve it.
 */
#include <errno.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/cm/cm.h"

struct nl_req {
	struct nlmsghdr h;
	union {
		struct rtmsg rt;
		struct ndmsg nd;
	} u;
	char attrs[64];
};

static void add_attr(struct nl_req *r, unsigned short type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)r + NLMSG_ALIGN(r->h.nlmsg_len));

	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	r->h.nlmsg_len = NLMSG_ALIGN(r->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* One request, one answer into buf; its length or -errno (an NLMSG_ERROR's). */
static int nl_talk(struct nl_req *r, char *buf, size_t len)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	ssize_t n;
	int ret;

	if (s < 0)
		return -errno;
	r->h.nlmsg_seq = 1;
	if (sendto(s, r, r->h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		ret = -errno;
		close(s);
		return ret;
	}
	n = recv(s, buf, len, 0);
	ret = n < 0 ? -errno : (int)n;
	close(s);
	if (ret >= (int)sizeof(struct nlmsghdr)) {
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (h->nlmsg_type == NLMSG_ERROR &&
		    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			return e->error; /* 0: an acknowledgement */
		}
	}
	return ret;
}

static const void *addr_of(const struct sockaddr_storage *a, size_t *len)
{
	if (a->ss_family == AF_INET) {
		*len = 4;
		return &((const struct sockaddr_in *)a)->sin_addr;
	}
	*len = 16;
	return &((const struct sockaddr_in6 *)a)->sin6_addr;
}

/* The route to dst: output interface and next hop (the gateway, or dst). */
static int route_get(const struct sockaddr_storage *dst, int *oif, uint8_t nh[16], size_t *alen)
{
	struct nl_req r;
	char buf[4096];
	size_t len;
	const void *a = addr_of(dst, &len);
	int n;

	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	r.h.nlmsg_type = RTM_GETROUTE;
	r.h.nlmsg_flags = NLM_F_REQUEST;
	r.u.rt.rtm_family = (unsigned char)dst->ss_family;
	r.u.rt.rtm_dst_len = (unsigned char)(len * 8);
	add_attr(&r, RTA_DST, a, len);
	n = nl_talk(&r, buf, sizeof(buf));
	if (n < 0)
		return n;
	struct nlmsghdr *h = (struct nlmsghdr *)buf;

	if (!NLMSG_OK(h, (unsigned)n) || h->nlmsg_type != RTM_NEWROUTE)
		return -EPROTO;
	struct rtmsg *rt = NLMSG_DATA(h);
	int rlen = (int)RTM_PAYLOAD(h);

	switch (rt->rtm_type) {
	case RTN_UNICAST:
	case RTN_LOCAL:
		break;
	case RTN_BLACKHOLE:
	case RTN_UNREACHABLE:
		return -EHOSTUNREACH;
	case RTN_PROHIBIT:
		return -EACCES;
	default:
		return -ENETUNREACH;
	}
	*oif = 0;
	memcpy(nh, a, len);
	*alen = len;
	for (struct rtattr *at = RTM_RTA(rt); RTA_OK(at, rlen); at = RTA_NEXT(at, rlen)) {
		if (at->rta_type == RTA_OIF && RTA_PAYLOAD(at) >= 4)
			memcpy(oif, RTA_DATA(at), 4);
		else if (at->rta_type == RTA_GATEWAY && RTA_PAYLOAD(at) == len)
			memcpy(nh, RTA_DATA(at), len);
	}
	return rt->rtm_type == RTN_LOCAL ? 1 : 0;
}

/* The neighbour entry's NUD state, or -ENOENT. */
static int neigh_get(int family, int oif, const uint8_t *nh, size_t len)
{
	struct nl_req r;
	char buf[1024];
	int n;

	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
	r.h.nlmsg_type = RTM_GETNEIGH;
	r.h.nlmsg_flags = NLM_F_REQUEST;
	r.u.nd.ndm_family = (unsigned char)family;
	r.u.nd.ndm_ifindex = oif;
	add_attr(&r, NDA_DST, nh, len);
	n = nl_talk(&r, buf, sizeof(buf));
	if (n < 0)
		return n;
	struct nlmsghdr *h = (struct nlmsghdr *)buf;

	if (!NLMSG_OK(h, (unsigned)n) || h->nlmsg_type != RTM_NEWNEIGH)
		return -EPROTO;
	return ((struct ndmsg *)NLMSG_DATA(h))->ndm_state;
}

/* Asks the kernel to resolve the next hop (creating its entry). */
static int neigh_use(int family, int oif, const uint8_t *nh, size_t len)
{
	struct nl_req r;
	char buf[1024];

	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
	r.h.nlmsg_type = RTM_NEWNEIGH;
	r.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
	r.u.nd.ndm_family = (unsigned char)family;
	r.u.nd.ndm_ifindex = oif;
	r.u.nd.ndm_state = NUD_NONE;
	r.u.nd.ndm_flags = NTF_USE;
	add_attr(&r, NDA_DST, nh, len);
	return nl_talk(&r, buf, sizeof(buf));
}

static int neigh_state(const struct sockaddr_storage *dst, bool kick);

int sr_cm_neigh_check(const struct sockaddr_storage *dst, bool kick)
{
	int ret;

	if (dst->ss_family != AF_INET && dst->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (sr_cm_route_cached_neigh(dst))
		return SR_CM_NEIGH_VALID;
	ret = neigh_state(dst, kick);
	if (ret == SR_CM_NEIGH_VALID)
		sr_cm_route_keep_neigh(dst);
	return ret;
}

static int neigh_state(const struct sockaddr_storage *dst, bool kick)
{
	const int valid =
	    NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
	uint8_t nh[16];
	size_t len;
	int oif, state, ret;

	ret = route_get(dst, &oif, nh, &len);
	if (ret < 0)
		return ret;
	if (ret == 1 || !oif)
		return SR_CM_NEIGH_VALID; /* this host's own address */
	state = neigh_get(dst->ss_family, oif, nh, len);
	if (state >= 0 && (state & valid))
		return SR_CM_NEIGH_VALID;
	if (state >= 0 && (state & NUD_INCOMPLETE))
		return SR_CM_NEIGH_PENDING;
	if (!kick)
		return state >= 0 && (state & NUD_FAILED) ? SR_CM_NEIGH_FAILED
							  : SR_CM_NEIGH_PENDING;
	ret = neigh_use(dst->ss_family, oif, nh, len);
	if (ret == -EPERM || ret == -EACCES)
		return SR_CM_NEIGH_VALID; /* not ours to ask: the first MAD resolves it */
	if (ret < 0)
		return ret;
	/* NTF_USE on an interface without ARP (tunnels, point-to-point)
	 * leaves no entry to wait for */
	state = neigh_get(dst->ss_family, oif, nh, len);
	if (state >= 0 && (state & valid))
		return SR_CM_NEIGH_VALID;
	if (state == -ENOENT)
		return SR_CM_NEIGH_VALID;
	return SR_CM_NEIGH_PENDING;
}
