/*
 * The 40 bytes a UD receive gets before the payload on RoCEv2 (IBTA Annex
 * A17): the IP header of the datagram, IPv4 in the last 20 bytes (the
 * first 20 zero) when both GIDs are IPv4-mapped, IPv6 whole otherwise.
 * Built here for both paths, from the wire (transport/resp.c) and from a
 * peer on the same host (shm/exec.c), so a program sees the same bytes
 * wherever its peer is.
 */
#include <string.h>

#include "wire/grh.h"

void sr_grh_build(uint8_t grh[SR_GRH_BYTES], const uint8_t sgid[16], const uint8_t dgid[16],
		  uint32_t udp_len)
{
	static const uint8_t v4pfx[12] = {[10] = 0xff, [11] = 0xff};

	memset(grh, 0, SR_GRH_BYTES);
	if (!memcmp(sgid, v4pfx, 12) && !memcmp(dgid, v4pfx, 12)) {
		uint8_t *ip = grh + 20;
		uint32_t sum = 0, tot = 20 + udp_len;

		ip[0] = 0x45;
		ip[2] = (uint8_t)(tot >> 8);
		ip[3] = (uint8_t)tot;
		ip[6] = 0x40; /* DF */
		ip[8] = 64;
		ip[9] = 17;
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
		for (int i = 0; i < 20; i += 2)
			sum += (uint32_t)ip[i] << 8 | ip[i + 1];
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		sum = ~sum & 0xffff;
		ip[10] = (uint8_t)(sum >> 8);
		ip[11] = (uint8_t)sum;
		return;
	}
	grh[0] = 0x60;
	grh[4] = (uint8_t)(udp_len >> 8);
	grh[5] = (uint8_t)udp_len;
	grh[6] = 17; /* next header: UDP */
	grh[7] = 64;
	memcpy(grh + 8, sgid, 16);
	memcpy(grh + 24, dgid, 16);
}
