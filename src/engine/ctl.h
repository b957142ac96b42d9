/*
 * The engine's control mailbox and the status snapshot (issue #10,
 * deliverables 6 and 7): how the daemon's thread changes the fault spec,
 * starts and stops a capture, and reads the engine's per-QP state, none of
 * which it may touch itself (engine state belongs to the engine thread).
 *
 * One request at a time (the daemon has one thread): the daemon fills the
 * request, store-releases `req`, kicks the engine's eventfd and waits (at
 * most SR_ENG_CTL_WAIT_MS) until the engine store-releases `ack`; the
 * engine load-acquires `req` at the start of each loop turn, inside its
 * reader section.  Every byte of the request and of the snapshot is
 * written by one side before its release and read by the other after its
 * acquire: no data race, no lock, and nothing on the engine's data path
 * but one relaxed-cost load per turn.  A request the engine does not take
 * in time (it is stuck, e.g. on a stopped process's lock) is left to it:
 * the daemon answers -ETIMEDOUT and sends no other until it is taken.
 */
#ifndef SR_ENGINE_CTL_H
#define SR_ENGINE_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/fault.h"

struct sr_engine;
struct sr_pcap;

#define SR_ENG_SNAP_QPS	   256 /* QPs listed by `softrdma status` */
#define SR_ENG_CTL_WAIT_MS 1000

/* One wire QP as the engine sees it. */
struct sr_eng_qp_snap {
	uint32_t qpn, dest_qpn, type, state;
	bool req_init, resp_init, rnr_wait, timer;
	uint32_t npsn, una, epsn, msn;
	uint32_t outstanding, rd_out;
	uint8_t retry_left, rnr_left;
	uint64_t retrans;
};

struct sr_eng_snap {
	bool fault_on;
	struct sr_fault_counts fault;
	bool trace_on;
	int trace_err;
	uint64_t trace_pkts;
	uint32_t nqps, more_qps;
	struct sr_eng_qp_snap qps[SR_ENG_SNAP_QPS];
};

/* Engine thread: h->wire_taps and h->rx_taps from its capture and fault
 * rules (layout.h), each loop turn and before it acks a request. */
void sr_eng_taps_publish(struct sr_engine *e);

/* The daemon's side (its thread only).  -ENOTSUP: no engine on this host. */
/* Installs a copy of cfg (NULL or off: no fault). */
int sr_engine_fault(const struct sr_fault_cfg *cfg);
/* The spec at start (SOFTRDMA_FAULT, --fault): before sr_engine_start. */
void sr_engine_fault_initial(const struct sr_fault_cfg *cfg);
/* Starts capturing into pc (NULL: stops); *old is the capture it replaced
 * (the caller closes it), *pkts the packets written to it. */
int sr_engine_trace(struct sr_pcap *pc, struct sr_pcap **old, uint64_t *pkts);
/* A snapshot of the engine, valid until the next call. */
int sr_engine_snapshot(const struct sr_eng_snap **out);
/* The text of the spec in force ("off"), as the daemon last set it. */
const char *sr_engine_fault_text(void);

/* The engine's side: takes a pending request (each loop turn). */
void sr_eng_ctl_poll(struct sr_engine *e);
/* Writes one datagram to the capture, if there is one. */
void sr_eng_trace(struct sr_engine *e, const uint8_t *sgid, const uint8_t *dgid, uint16_t sport,
		  uint16_t dport, const struct iovec *iov, int iovcnt);
/* Attributes the retransmissions counted since `before` (the port's
 * SR_ENG_RETRANS) to the QP with this QPN. */
void sr_eng_vis_retrans(struct sr_engine *e, uint32_t qpn, uint32_t gen, uint64_t before);

#endif
