/*
 * Fault injection on the RoCEv2 wire (issue #10, deliverable 6): what netem
 * would do, inside the engine, seeded and reproducible.  This kernel has no
 * netem, and a user testing an RDMA program wants loss without root.
 *
 * A spec is a string of comma-separated key=value items, optionally several
 * clauses separated by ';' (one per direction):
 *
 *   seed=N             PRNG seed (default 1); shared by every clause
 *   dir=tx|rx|both     which direction the clause applies to (default tx)
 *   qp=N|all           only packets whose BTH DestQP is N (hex 0x.. or
 *                      decimal): on tx the peer's QPN, on rx ours
 *   drop=P dup=P reorder=P[:T] corrupt=P delay=P:T
 *                      probability P (0..1, or N%) per matching packet;
 *                      T a time with unit ns, us, ms or s (bare: us);
 *                      reorder holds the packet until the next one of the
 *                      same direction has passed, at most T (default 1ms)
 *   drop_nth=N dup_nth=N reorder_nth=N corrupt_nth=N delay_nth=N
 *                      the rule: the Nth matching packet (from 1, counted
 *                      since the spec was set) gets that fault
 *   off                no fault (also the empty spec)
 *
 * e.g. "seed=7,drop=0.01" or
 *      "dir=rx,qp=0x12,dup=0.05,reorder=0.02,corrupt=0.01,delay=0.02:500us,drop_nth=3".
 *
 * Determinism: the matching packets of a direction are numbered from 1,
 * and packet n's draws are splitmix64's outputs number 8n+k (k = 0..4 the
 * kinds in the order drop, dup, reorder, corrupt, delay; 5 the bit a
 * corruption flips) from a start set by the seed and the direction: a
 * counter-based generator, so the same seed and the same sequence of
 * packets give the same decisions, whatever the timing and whichever
 * thread takes the packet.  A drop overrides the rest; delay overrides
 * reorder.  Corruption flips one bit after the BTH (extension headers,
 * payload, pad or the ICRC itself; on transmit only the bytes the sender
 * owns: extension headers and ICRC), so the packet still parses and the
 * receiver's ICRC check catches it.
 *
 * Who applies them: transmit faults act on every packet that goes through
 * sr_eng_send (the engine's, and the receive halves' ACKs, READ responses
 * and stream requests); receive faults on the datagrams as they come off
 * the socket, before parsing, in the engine and in the receive halves.
 * The rules and the packet numbers are in the arena (struct sr_fault_shm)
 * for both.  While any transmit rule is set, posting threads send nothing
 * themselves (wire_taps: the engine sends their single-packet messages
 * and takes their UD datagrams).  Held packets (delay, reorder) are
 * copied and released by the engine's loop (sr_eng_fault_turn), whose
 * sleep is bounded by the earliest release: no polling when idle.  Only
 * the engine can hold, so while a rule delays or reorders, the receive
 * halves are off (rx_taps) and every packet is the engine's.  The daemon
 * changes the spec through the engine's control mailbox (ctl.h).
 */
#ifndef SR_TRANSPORT_FAULT_H
#define SR_TRANSPORT_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "softrdma/layout.h"

struct sr_engine;
struct sr_link_addr;

enum sr_fault_dir { SR_FAULT_TX, SR_FAULT_RX, SR_FAULT_DIRS };

enum sr_fault_kind { SR_FK_DROP, SR_FK_DUP, SR_FK_REORDER, SR_FK_CORRUPT, SR_FK_DELAY, SR_FK_MAX };

extern const char *const sr_fault_kind_name[SR_FK_MAX];

#define SR_FAULT_TEXT	  512
#define SR_FAULT_HOLD_MAX 4096 /* held packets per direction; beyond, they pass */

struct sr_fault_rule {
	bool on;
	bool one_qp;
	uint32_t qpn;
	double prob[SR_FK_MAX];
	uint64_t thresh[SR_FK_MAX]; /* prob as a fraction of 2^64 (0: never) */
	uint64_t nth[SR_FK_MAX];    /* 0: no rule */
	uint64_t delay_ns;
	uint64_t reorder_ns;
};

struct sr_fault_cfg {
	uint64_t seed;
	struct sr_fault_rule dir[SR_FAULT_DIRS];
	char text[SR_FAULT_TEXT]; /* canonical form */
};

/* What was injected, per direction (snapshot for `softrdma status`). */
struct sr_fault_counts {
	uint64_t matched[SR_FAULT_DIRS];
	uint64_t kind[SR_FAULT_DIRS][SR_FK_MAX];
	uint64_t held_now[SR_FAULT_DIRS];
};

/* Parses spec into *cfg (0), or -EINVAL with a reason in err. */
int sr_fault_parse(const char *spec, struct sr_fault_cfg *cfg, char *err, size_t errlen);
/* True if cfg injects anything. */
bool sr_fault_cfg_on(const struct sr_fault_cfg *cfg);

/* True if cfg delays or reorders in some direction: packets are then held,
 * which only the engine can do, so the receive halves stay off. */
bool sr_fault_cfg_holds(const struct sr_fault_cfg *cfg);

/* ---- the decisions, by any thread (fault_decide.c) ---- */

struct sr_fault_shm; /* in the arena (softrdma/layout.h) */

/* A thread's copy of the rules, read again only when they change. */
struct sr_fault_view {
	uint32_t seq; /* the seqlock's value it was read at; odd: never read */
	struct sr_fault_rules rules;
};

/* Installs cfg (NULL: off) for every thread; the counts restart
 * (the engine thread only). */
void sr_fault_publish(struct sr_fault_shm *sh, const struct sr_fault_cfg *cfg);
/* Whether direction d has a rule. */
static inline bool sr_fault_dir_on(const struct sr_fault_shm *sh, enum sr_fault_dir d)
{
	return atomic_load_explicit(&sh->dirs, memory_order_relaxed) & (1u << d);
}
/* The decision for one packet: a mask of (1 << enum sr_fault_kind), and
 * for SR_FK_CORRUPT the bit to flip, below nbits. */
unsigned sr_fault_decide(struct sr_fault_shm *sh, struct sr_fault_view *v, enum sr_fault_dir d,
			 uint32_t dqpn, uint32_t nbits, uint32_t *bit);
/* What was decided so far, by everyone (held_now left 0). */
void sr_fault_shm_counts(const struct sr_fault_shm *sh, struct sr_fault_counts *out);

/* The taps, run by the engine and by the receive halves.  What only the
 * engine does (holding packets, the capture) it does through e->taps;
 * a receive half has none, and passes a packet it was told to hold (the
 * rules changed under it: halves are off while any rule holds). */
struct sr_eng_taps {
	/* keeps a copy of the datagram for later; false: it passes now */
	bool (*hold)(struct sr_engine *e, enum sr_fault_dir d, unsigned mask, int sock,
		     const uint8_t *sgid, const uint8_t *dgid, uint16_t sport,
		     const struct iovec *iov, unsigned niov);
	/* a datagram went through in direction d (reordered ones may follow) */
	void (*passed)(struct sr_engine *e, enum sr_fault_dir d);
	/* the capture (ctl.h, sr_eng_trace) */
	void (*trace)(struct sr_engine *e, const uint8_t *sgid, const uint8_t *dgid, uint16_t sport,
		      uint16_t dport, const struct iovec *iov, int iovcnt);
};
/* Receive: how many times to process the datagram (0, 1 or 2); may flip
 * a bit of buf or keep a copy for later.  (Transmit's taps are the
 * link's: roce/roce.c.) */
unsigned sr_eng_rx_tap(struct sr_engine *e, uint8_t *buf, uint32_t len,
		       const struct sr_link_addr *from);

/* ---- the engine's state (fault.c; engine thread only) ---- */

struct sr_fault;

/* Publishes cfg in sh too. */
struct sr_fault *sr_fault_new(const struct sr_fault_cfg *cfg, struct sr_fault_shm *sh);
/* Installs a new spec (NULL: off): counters and packet numbers restart,
 * held packets are released at the next turn. */
void sr_fault_set(struct sr_fault *f, const struct sr_fault_cfg *cfg);
void sr_fault_free(struct sr_fault *f);
/* Whether transmit faults are set (the engine then takes posters' UD). */
bool sr_fault_tx_on(const struct sr_fault *f);
/* Whether the rules hold packets (sr_fault_cfg_holds). */
bool sr_fault_holds(const struct sr_fault *f);
void sr_fault_counts(const struct sr_fault *f, struct sr_fault_counts *out);

/* The engine's holding and capture (e->taps). */
extern const struct sr_eng_taps sr_eng_fault_taps;
/* Releases the held packets that are due (rx ones through sr_eng_rx_one,
 * tx ones straight to their socket); returns the next release time (ns,
 * CLOCK_MONOTONIC), 0 if none. */
uint64_t sr_eng_fault_turn(struct sr_engine *e);

#endif
