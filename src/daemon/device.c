/*
 * The device and port model: one RoCE device per host (network namespace),
 * one port, always ACTIVE.  The node GUID is derived from the host name and
 * the network namespace, so two namespaces are two distinct HCAs.  The GID
 * table is built from the namespace's interface addresses, one RoCEv2 GID
 * per address (IPv4 as ::ffff:a.b.c.d, IPv6 as is), in the order a RoCE NIC
 * or rxe shows them, so that programs choosing a GID by themselves (UCX: the
 * first RoCE v2 IPv4 GID; perftest without -x: the first IPv4 one) choose a
 * routable address: the real interfaces first, by interface index, each
 * with its link-local IPv6 address, then its IPv4, then its other IPv6
 * addresses; then the port's own link-local GID formed from the GUID (no
 * interface); loopback's addresses last.  Only RoCE v2 entries: the device
 * speaks RoCEv2 alone, so it lists no RoCE v1 twin as a ConnectX does.
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "daemon/daemon.h"

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int if_mtu(const char *name)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int mtu = 0;

	if (s < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (!ioctl(s, SIOCGIFMTU, &ifr))
		mtu = ifr.ifr_mtu;
	close(s);
	return mtu;
}

static void add_gid(struct sr_dev_info *dev, const uint8_t gid[16], const char *ifname)
{
	struct sr_gid_info *g;

	if (dev->gid_cnt >= SR_GID_TBL_LEN)
		return;
	for (uint32_t i = 0; i < dev->gid_cnt; i++)
		if (!memcmp(dev->gids[i].gid, gid, 16))
			return;
	g = &dev->gids[dev->gid_cnt++];
	memcpy(g->gid, gid, 16);
	g->type = IBV_GID_TYPE_ROCE_V2;
	g->ifindex = ifname ? if_nametoindex(ifname) : 0;
	if (ifname)
		strncpy(g->ifname, ifname, sizeof(g->ifname) - 1);
}

/* One interface address as a GID, with where it goes in the table. */
struct gid_cand {
	uint8_t gid[16];
	const char *ifname;
	unsigned ifindex;
	int loopback; /* loopback's addresses go last */
	int rank;     /* within an interface: link-local IPv6, IPv4, other IPv6 */
	int seq;      /* getifaddrs order, to keep the sort stable */
};

static int cand_cmp(const void *pa, const void *pb)
{
	const struct gid_cand *a = pa, *b = pb;

	if (a->loopback != b->loopback)
		return a->loopback - b->loopback;
	if (a->ifindex != b->ifindex)
		return a->ifindex < b->ifindex ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank - b->rank;
	return a->seq - b->seq;
}

/* The interfaces' addresses (up interfaces only) in table order; returns
 * how many, at most max.  *min_mtu: the smallest non-loopback link MTU. */
static int gather(struct ifaddrs *ifa, struct gid_cand *c, int max, int *min_mtu)
{
	int n = 0;

	for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
		struct gid_cand *e = &c[n];

		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
			continue;
		memset(e, 0, sizeof(*e));
		if (i->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *s = (const void *)i->ifa_addr;

			e->gid[10] = e->gid[11] = 0xff;
			memcpy(&e->gid[12], &s->sin_addr, 4);
			e->rank = 1;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			const struct sockaddr_in6 *s = (const void *)i->ifa_addr;

			memcpy(e->gid, &s->sin6_addr, 16);
			e->rank = IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr) ? 0 : 2;
		} else {
			continue;
		}
		e->ifname = i->ifa_name;
		e->ifindex = if_nametoindex(i->ifa_name);
		e->loopback = !!(i->ifa_flags & IFF_LOOPBACK);
		e->seq = n++;
		if (!e->loopback) {
			int mtu = if_mtu(i->ifa_name);

			if (mtu > 0 && (!*min_mtu || mtu < *min_mtu))
				*min_mtu = mtu;
		}
	}
	qsort(c, (size_t)n, sizeof(*c), cand_cmp);
	return n;
}

void sr_device_init(struct sr_dev_info *dev)
{
	char host[256] = "";
	struct stat st;
	struct ifaddrs *ifa;
	uint64_t h = 0xcbf29ce484222325ull;
	int min_mtu = 0;
	uint8_t gid[16];

	memset(dev, 0, sizeof(*dev));
	strcpy(dev->name, SR_DEV_NAME);
	gethostname(host, sizeof(host) - 1);
	h = fnv1a(h, host, strlen(host));
	if (!stat("/proc/self/ns/net", &st))
		h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
	/* EUI-64 style: locally administered, never zero */
	dev->node_guid = (h & 0x00ffffffffffffffull) | 0x0200000000000000ull;
	dev->sys_image_guid = dev->node_guid;
	dev->vendor_id = 0xffffff; /* as rxe: no PCI vendor, and not one perftest special-cases */
	dev->vendor_part_id = 0x5352; /* "SR": absent from perftest's table, so its generic path */
	dev->hw_ver = 1;

	/* the port's link-local GID: fe80::/64 + GUID, no interface */
	memset(gid, 0, sizeof(gid));
	gid[0] = 0xfe;
	gid[1] = 0x80;
	for (int b = 0; b < 8; b++)
		gid[8 + b] = dev->node_guid >> (56 - 8 * b);

	if (!getifaddrs(&ifa)) {
		struct gid_cand c[64];
		int n = gather(ifa, c, 64, &min_mtu), nlo = 0;

		for (int k = 0; k < n; k++)
			nlo += c[k].loopback;
		/* the real interfaces' addresses, leaving room for the GUID's
		 * GID and loopback's (same-host programs and the CM use them) */
		for (int k = 0; k < n && !c[k].loopback; k++)
			if (dev->gid_cnt + 1 + (uint32_t)nlo < SR_GID_TBL_LEN)
				add_gid(dev, c[k].gid, c[k].ifname);
		add_gid(dev, gid, NULL);
		for (int k = n - nlo; k < n; k++)
			add_gid(dev, c[k].gid, c[k].ifname);
		freeifaddrs(ifa);
	} else {
		add_gid(dev, gid, NULL);
	}
	/* RoCE path MTU is the largest IB MTU that fits the link MTU with the
	 * IP/UDP/BTH/ICRC overhead; loopback-only hosts get 4096. */
	dev->max_mtu = IBV_MTU_4096;
	if (!min_mtu || min_mtu >= 4096 + 100)
		dev->active_mtu = IBV_MTU_4096;
	else if (min_mtu >= 2048 + 100)
		dev->active_mtu = IBV_MTU_2048;
	else if (min_mtu >= 1024 + 100)
		dev->active_mtu = IBV_MTU_1024;
	else
		dev->active_mtu = IBV_MTU_512;
	sr_info("device %s guid %#llx, %u GIDs, active mtu %u", dev->name,
		(unsigned long long)dev->node_guid, dev->gid_cnt, 128u << dev->active_mtu);
}
