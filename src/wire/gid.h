/*
 * GIDs as RoCEv2 addresses: a RoCEv2 GID is the IPv6 address of the port,
 * and an IPv4 address is the IPv4-mapped GID ::ffff:a.b.c.d.  A packet
 * whose source and destination GIDs are both IPv4-mapped travels over IPv4,
 * any other pair over IPv6 (RoCEv2, IBTA Annex A17).
 */
#ifndef SR_WIRE_GID_H
#define SR_WIRE_GID_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ::ffff:a.b.c.d */
static inline bool sr_gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = {[10] = 0xff, [11] = 0xff};

	return !memcmp(gid, prefix, sizeof(prefix));
}

/* IPv4 when both ends are IPv4-mapped. */
static inline bool sr_gid_pair_is_v4(const uint8_t sgid[16], const uint8_t dgid[16])
{
	return sr_gid_is_v4(sgid) && sr_gid_is_v4(dgid);
}

/* A multicast GID (MGID): an IB/IPv6 multicast address (ff00::/8) or, for
 * RoCEv2 over IPv4, an IPv4-mapped multicast address (::ffff:224.0.0.0/4),
 * the form rdma_cm maps IPv4 groups to. */
static inline bool sr_gid_is_mcast(const uint8_t gid[16])
{
	return gid[0] == 0xff || (sr_gid_is_v4(gid) && (gid[12] & 0xf0) == 0xe0);
}

/* The IPv4-mapped GID of an IPv4 address given in network byte order. */
static inline void sr_gid_from_ipv4(uint8_t gid[16], const uint8_t addr[4])
{
	memset(gid, 0, 10);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, addr, 4);
}

#endif
