/*
 * UD multicast on the wire (RoCEv2 over IPv4): an IPv4-mapped MGID
 * (::ffff:224.0.0.0/4) is its IP multicast group.  The daemon joins the
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

#include "engine/engine.h"
#include "shm/exec.h"
#include "shm/responder.h"
#include "wire/gid.h"

int sr_eng_mcast_join(int sock, const uint8_t *mgid, bool join)
{
	struct ifaddrs *ifa, *i;
	int joined = 0, err = 0;

	if (!sr_gid_is_v4(mgid) || !sr_gid_is_mcast(mgid))
		return 0; /* IPv6 groups: this host's members only (docs) */
	if (getifaddrs(&ifa))
		return -errno;
	for (i = ifa; i; i = i->ifa_next) {
		struct ip_mreqn mr = {0};

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
		    !(i->ifa_flags & IFF_MULTICAST) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		memcpy(&mr.imr_multiaddr, mgid + 12, 4);
		mr.imr_ifindex = (int)if_nametoindex(i->ifa_name);
		if (!setsockopt(sock, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
				&mr, sizeof(mr)))
			joined++;
		else if (errno != EADDRINUSE && errno != EADDRNOTAVAIL)
			err = -errno;
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
		struct sr_qp_shm *qp = sr_exec_qp_lookup(e->ctx, m[j]);

		if (qp && qp->type == IBV_QPT_UD)
			sr_eng_resp_ud(e, qp, p, sgid, dgid);
	}
}
