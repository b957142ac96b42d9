/*
 * UD multicast on the wire: an IPv4-mapped MGID (::ffff:224.0.0.0/4) is
 * its IPv4 multicast group, any other MGID (ff00::/8) is itself an IPv6
 * multicast address.  The daemon joins the
 * engine's receive socket to a group on every multicast-capable interface
 * when the first QP of this host attaches, and leaves it when the last one
 * detaches; a datagram for QPN 0xFFFFFF is delivered to each member QP
 * through the same UD receive code as a unicast one (resp.c).  Sending is
 * the executor's (shm/exec.c): local members through memory, one datagram
 * to the group for the other hosts.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>

#include "engine/internal.h"
#include "shm/exec.h"
#include "shm/responder.h"
#include "wire/gid.h"

/* Joins or leaves the group on one interface: 1 done, 0 already so, -errno. */
static int join_one(int sock, const uint8_t *mgid, bool v4, unsigned ifindex, bool join)
{
	int ret;

	if (v4) {
		struct ip_mreqn mr = {.imr_ifindex = (int)ifindex};

		memcpy(&mr.imr_multiaddr, mgid + 12, 4);
		ret = setsockopt(sock, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
				 &mr, sizeof(mr));
	} else {
		struct ipv6_mreq mr = {.ipv6mr_interface = ifindex};

		memcpy(&mr.ipv6mr_multiaddr, mgid, 16);
		ret =
		    setsockopt(sock, IPPROTO_IPV6,
			       join ? IPV6_ADD_MEMBERSHIP : IPV6_DROP_MEMBERSHIP, &mr, sizeof(mr));
	}
	if (!ret)
		return 1;
	return errno == EADDRINUSE || errno == EADDRNOTAVAIL ? 0 : -errno;
}

int sr_eng_mcast_join(int sock, const uint8_t *mgid, bool join)
{
	bool v4 = sr_gid_is_v4(mgid);
	struct ifaddrs *ifa, *i;
	int joined = 0, err = 0;

	if (!sr_gid_is_mcast(mgid))
		return 0;
	if (getifaddrs(&ifa))
		return -errno;
	/* an interface is listed once per address: the second join (or
	 * leave) of it answers "already" */
	for (i = ifa; i; i = i->ifa_next) {
		int r;

		if (!i->ifa_addr || i->ifa_addr->sa_family != (v4 ? AF_INET : AF_INET6) ||
		    !(i->ifa_flags & IFF_UP) || !(i->ifa_flags & IFF_MULTICAST) ||
		    (i->ifa_flags & IFF_LOOPBACK))
			continue;
		r = join_one(sock, mgid, v4, if_nametoindex(i->ifa_name), join);
		if (r > 0)
			joined++;
		else if (r < 0)
			err = r;
	}
	freeifaddrs(ifa);
	return joined || !err ? 0 : err;
}

void sr_eng_mcast_rx(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		     const uint8_t *dgid)
{
	uint32_t m[SR_MAX_MCAST_ATTACH];
	uint32_t n = sr_mcast_members(e->arena, dgid, m);

	if (!n) {
		sr_eng_count(&e->drops[SR_DROP_QPN], 1);
		return;
	}
	for (uint32_t j = 0; j < n; j++) {
		struct sr_qp_shm *qp = sr_exec_peer_lookup(e->ctx, m[j]);

		if (qp && qp->type == IBV_QPT_UD)
			sr_eng_resp_ud(e, qp, p, sgid, dgid);
	}
}
