/*
 * The device and port model: one RoCE device per host (network namespace),
 * one port, always ACTIVE.  The node GUID is derived from the host name and
 * the network namespace, so two namespaces are two distinct HCAs.  The GID
 * table is built from the namespace's interface addresses, as rxe and RoCE
 * NICs do: entry 0 is the link-local GID formed from the GUID, then one
 * RoCEv2 GID per address (IPv4 as ::ffff:a.b.c.d, IPv6 as is).
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
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

void sr_device_init(struct sr_dev_info *dev)
{
	char host[256] = "";
	struct stat st;
	struct ifaddrs *ifa, *i;
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

	/* GID 0: fe80::/64 + GUID (what an IB port or rxe shows first) */
	memset(gid, 0, sizeof(gid));
	gid[0] = 0xfe;
	gid[1] = 0x80;
	for (int b = 0; b < 8; b++)
		gid[8 + b] = dev->node_guid >> (56 - 8 * b);
	add_gid(dev, gid, NULL);

	if (!getifaddrs(&ifa)) {
		for (i = ifa; i; i = i->ifa_next) {
			if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
				continue;
			memset(gid, 0, sizeof(gid));
			if (i->ifa_addr->sa_family == AF_INET) {
				const struct sockaddr_in *s = (const void *)i->ifa_addr;

				gid[10] = gid[11] = 0xff;
				memcpy(&gid[12], &s->sin_addr, 4);
			} else if (i->ifa_addr->sa_family == AF_INET6) {
				const struct sockaddr_in6 *s = (const void *)i->ifa_addr;

				memcpy(gid, &s->sin6_addr, 16);
			} else {
				continue;
			}
			add_gid(dev, gid, i->ifa_name);
			if (!(i->ifa_flags & IFF_LOOPBACK)) {
				int mtu = if_mtu(i->ifa_name);

				if (mtu > 0 && (!min_mtu || mtu < min_mtu))
					min_mtu = mtu;
			}
		}
		freeifaddrs(ifa);
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
