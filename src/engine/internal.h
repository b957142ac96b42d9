/*
 * What the engine thread's files (engine.c, mcast.c, gsi.c, fault.c,
 * ctl.c) share among themselves and nobody else: the multicast groups and
 * QP1 on the wire, as the engine thread runs them.
 */
#ifndef SR_ENGINE_INTERNAL_H
#define SR_ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "transport/transport.h"

/* mcast.c: UD multicast groups on the wire */
/* Joins (or leaves) sock to the IP group of an IPv4-mapped MGID on every
 * multicast interface; 0 or -errno.  Other MGIDs: nothing to do. */
int sr_eng_mcast_join(int sock, const uint8_t *mgid, bool join);
/* A datagram for QPN 0xFFFFFF to group dgid: to each member QP. */
void sr_eng_mcast_rx(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		     const uint8_t *dgid);

/* gsi.c: QP1 (the GSI) on the wire, for the daemon's CM agent */
/* Sets up the receive wake-up (before the engine starts), and the CM
 * agent's own member of the socket group, qp1_sock (-1: none; QP1's
 * datagrams then come through the engine); 0 or -errno. */
int sr_eng_gsi_init(int qp1_sock);
/* Engine thread: sends the MADs the daemon queued; a datagram for QP1. */
void sr_eng_gsi_turn(struct sr_engine *e);
void sr_eng_gsi_rx(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		   const uint8_t *dgid);
#endif
