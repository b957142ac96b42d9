/*
 * Unit test of the UC requester's rate under congestion notification
 * (src/transport/rate.c): no limit until a CNP; the first cut halves the rate
 * it measured sending; one cut per SR_RATE_CUT_GAP_NS however many CNPs
 * come; the token bucket lets through what the rate allows over a long
 * run (within a packet and a burst) and says when the next packet may go;
 * the rate is raised by 1/8 per SR_RATE_RAISE_NS without a CNP until the
 * limit goes; a cut never goes below SR_RATE_MIN.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "transport/rate.h"

#define MS  1000000ull
#define PKT 4096u

/* Sends as fast as the bucket allows from t0 for `dur` ns, packets of PKT
 * bytes; returns the bytes sent. */
static uint64_t stream(struct sr_rate *r, uint64_t t0, uint64_t dur)
{
	uint64_t t = t0, sent = 0;

	while (t < t0 + dur) {
		uint64_t at = sr_rate_wait(r, t);

		if (at) {
			CHECK(at > t);
			t = at;
			continue;
		}
		sr_rate_sent(r, t, PKT);
		sent += PKT;
		t += 100; /* the sender's own pace: 40 GB/s */
	}
	return sent;
}

int main(void)
{
	struct sr_rate r;
	uint64_t t, sent, rate;

	/* no CNP: never held back, whatever it sends */
	memset(&r, 0, sizeof(r));
	CHECK_CTX("unlimited");
	for (t = 1000; t < 2 * MS; t += 1000) {
		CHECK_EQ(sr_rate_wait(&r, t), 0);
		sr_rate_sent(&r, t, PKT); /* 4 GB/s */
	}
	CHECK_EQ(r.rate, 0);

	/* the first cut: half of the 4 GB/s it measured (bytes per ms) */
	CHECK_CTX("first cut");
	sr_rate_cnp(&r, 2 * MS);
	CHECK(r.rate >= 1900000 && r.rate <= 2100000);
	rate = r.rate;
	/* more CNPs within the gap: no further cut */
	for (t = 2 * MS; t < 2 * MS + SR_RATE_CUT_GAP_NS - 1000; t += 50000)
		sr_rate_cnp(&r, t);
	CHECK_EQ(r.rate, rate);
	/* after it: the next one halves again */
	sr_rate_cnp(&r, 2 * MS + SR_RATE_CUT_GAP_NS);
	CHECK_EQ(r.rate, rate / 2);

	/* the bucket: over 0.4 ms (no raise comes before 0.5 ms after the
	 * cut) it lets through the rate's worth, within a packet and a burst */
	CHECK_CTX("bucket");
	rate = r.rate;
	t = 2 * MS + SR_RATE_CUT_GAP_NS;
	sent = stream(&r, t, 400000);
	CHECK(sent <= rate * 400000 / MS + SR_RATE_BURST + PKT);
	CHECK(sent + 2 * PKT >= rate * 400000 / MS);
	CHECK_EQ(r.rate, rate);

	/* no CNP for a while: 1/8 more per SR_RATE_RAISE_NS ... */
	CHECK_CTX("raise");
	t = r.raise_at;
	(void)sr_rate_wait(&r, t);
	CHECK_EQ(r.rate, rate + rate / 8);
	/* ... until the limit goes */
	(void)sr_rate_wait(&r, t + 200 * SR_RATE_RAISE_NS);
	CHECK_EQ(r.rate, 0);
	CHECK_EQ(sr_rate_wait(&r, t + 200 * SR_RATE_RAISE_NS), 0);

	/* cuts in a row end at the floor, and a limited sender still moves */
	CHECK_CTX("floor");
	memset(&r, 0, sizeof(r));
	t = MS;
	for (int i = 0; i < 40; i++, t += SR_RATE_CUT_GAP_NS)
		sr_rate_cnp(&r, t);
	CHECK_EQ(r.rate, SR_RATE_MIN);
	sent = stream(&r, t - SR_RATE_CUT_GAP_NS, 400000); /* before a raise */
	CHECK(sent > 0 && sent <= SR_RATE_MIN * 4 / 10 + SR_RATE_BURST + PKT);

	/* a first CNP with nothing measured: from SR_RATE_START */
	CHECK_CTX("unmeasured");
	memset(&r, 0, sizeof(r));
	sr_rate_cnp(&r, 5 * MS);
	CHECK_EQ(r.rate, SR_RATE_START / 2);
	return CHECK_SUMMARY("test_rate");
}
