/*
 * The GRH area of a UD receive on RoCEv2: the IP header (grh.c).
 */
#ifndef SR_WIRE_GRH_H
#define SR_WIRE_GRH_H

#include <stdint.h>

#define SR_GRH_BYTES 40

/* The IP header of a datagram from sgid to dgid whose UDP part (header,
 * BTH and the rest, ICRC included) is udp_len bytes. */
void sr_grh_build(uint8_t grh[SR_GRH_BYTES], const uint8_t sgid[16], const uint8_t dgid[16],
		  uint32_t udp_len);

#endif
