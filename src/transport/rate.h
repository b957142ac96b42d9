/*
 * The reaction point of congestion control for a requester without a
 * window (UC): a sending rate cut when a CNP comes (annex A17.9) and raised
 * again while none does, enforced by a token bucket.  DCQCN's shape, made
 * simple: no byte counter stages and no alpha, one cut per
 * SR_RATE_CUT_GAP_NS at most (the receiver's backlog takes a while to
 * drain after the sender slowed, and CNPs keep coming meanwhile).  Pure
 * arithmetic on a record in the QP's transport state (transport.h); the
 * caller holds the QP's wtx_lock.  Rates are in bytes per millisecond.
 */
#ifndef SR_TRANSPORT_RATE_H
#define SR_TRANSPORT_RATE_H

#include <stdint.h>

#define SR_RATE_MIN	   10000ull	/* 10 MB/s: the floor of a cut */
#define SR_RATE_START	   1000000ull	/* 1 GB/s: the first cut's base, unmeasured */
#define SR_RATE_OFF	   100000000ull /* 100 GB/s: raised past this, no limit */
#define SR_RATE_BURST	   262144	/* bytes the bucket holds */
#define SR_RATE_CUT_GAP_NS 300000ull	/* one cut per this at most */
#define SR_RATE_RAISE_NS   500000ull	/* +1/8 per this without a CNP */
#define SR_RATE_MEAS_NS	   1000000ull	/* the sending rate is measured over this */

struct sr_rate {
	uint64_t rate;	 /* allowed; 0: no limit */
	int64_t tokens;	 /* bytes it may send now (may go below 0 by a packet) */
	uint64_t tok_at; /* tokens counted up to then (ns) */
	uint64_t cut_at; /* the last cut (ns; 0: none yet) */
	uint64_t raise_at;
	/* what it sent since meas_at, and the rate of the last whole period */
	uint64_t meas_at, meas_bytes, seen;
};

/* A CNP came at now: the rate is halved (from what it measured sending,
 * the first time). */
void sr_rate_cnp(struct sr_rate *r, uint64_t now);
/* 0 if the next packet may go at now (the bucket is not in debt), else
 * the time it may. */
uint64_t sr_rate_wait(struct sr_rate *r, uint64_t now);
/* A packet of `bytes` went at now. */
void sr_rate_sent(struct sr_rate *r, uint64_t now, uint32_t bytes);

#endif
