/*
 * A requester's sending rate under congestion notification (see rate.h).
 */
#include "transport/rate.h"

static uint64_t elapsed(uint64_t from, uint64_t now)
{
	return now > from ? now - from : 0;
}

void sr_rate_cnp(struct sr_rate *r, uint64_t now)
{
	uint64_t base = r->rate, t = elapsed(r->meas_at, now);

	if (r->rate && r->cut_at && elapsed(r->cut_at, now) < SR_RATE_CUT_GAP_NS)
		return;
	if (!base) {
		/* what it sent lately: the last whole period, or this one
		 * if that is long enough to tell */
		base = r->seen;
		if (t >= SR_RATE_MEAS_NS / 16 && r->meas_bytes * 1000000ull / t > base)
			base = r->meas_bytes * 1000000ull / t;
		if (!base)
			base = SR_RATE_START;
		r->tokens = 0;
		r->tok_at = now;
	}
	r->rate = base / 2 > SR_RATE_MIN ? base / 2 : SR_RATE_MIN;
	r->cut_at = now ? now : 1;
	r->raise_at = now + SR_RATE_RAISE_NS;
}

uint64_t sr_rate_wait(struct sr_rate *r, uint64_t now)
{
	if (!r->rate)
		return 0;
	while (now >= r->raise_at && r->rate) {
		r->rate += r->rate / 8;
		r->raise_at += SR_RATE_RAISE_NS;
		if (r->rate > SR_RATE_OFF)
			r->rate = 0;
	}
	if (!r->rate)
		return 0;
	r->tokens += (int64_t)(elapsed(r->tok_at, now) * r->rate / 1000000ull);
	if (r->tokens > SR_RATE_BURST)
		r->tokens = SR_RATE_BURST;
	if (now > r->tok_at)
		r->tok_at = now;
	if (r->tokens >= 0)
		return 0; /* it may overdraw by the next packet */
	return now + (uint64_t)(-r->tokens) * 1000000ull / r->rate + 1;
}

void sr_rate_sent(struct sr_rate *r, uint64_t now, uint32_t bytes)
{
	uint64_t t = elapsed(r->meas_at, now);

	if (r->rate)
		r->tokens -= bytes;
	if (!r->meas_at) {
		r->meas_at = now ? now : 1;
		r->meas_bytes = 0;
		return;
	}
	r->meas_bytes += bytes;
	if (t >= SR_RATE_MEAS_NS) {
		r->seen = r->meas_bytes * 1000000ull / t;
		r->meas_bytes = 0;
		r->meas_at = now;
	}
}
