/*
 * Unit test of the wire's fault injection (src/engine/fault.c,
 * fault_decide.c): the spec grammar (accepted, refused, canonical form),
 * and the decisions: the same seed over the same packet sequence gives the
 * same decisions, also when several threads (views of the shared rules)
 * take turns at the packets, another seed others; the shared counts add
 * up to what was decided; probabilities come out near what was asked; an _nth rule
 * hits exactly that packet; a QP filter lets every other QP through; a
 * drop overrides the rest, a delay a reorder; a corruption's bit stays
 * below the limit given.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "transport/fault.h"

#define NPKT 200000

/* Decides NPKT packets (every third one received), the way the engine and
 * nviews - 1 receive halves would take turns at them: each with its own
 * view of the rules in the shared record. */
static void run_by(const char *spec, unsigned *masks, uint32_t *bits, unsigned nviews)
{
	static struct sr_fault_shm sh;
	struct sr_fault_view views[3];
	struct sr_fault_counts c;
	struct sr_fault_cfg cfg;
	char err[128];
	uint64_t kinds = 0, marks = 0;

	CHECK_EQ(sr_fault_parse(spec, &cfg, err, sizeof(err)), 0);
	memset(views, 0, sizeof(views));
	sr_fault_publish(&sh, NULL); /* what an earlier run left goes */
	sr_fault_publish(&sh, &cfg);
	for (unsigned i = 0; i < NPKT; i++) {
		enum sr_fault_dir d = i % 3 ? SR_FAULT_TX : SR_FAULT_RX;

		bits[i] = 0;
		masks[i] =
		    sr_fault_decide(&sh, &views[i % nviews], d, 0x12 + (i % 5), 1000, &bits[i]);
		for (int k = 0; k < SR_FK_MAX; k++)
			marks += !!(masks[i] & (1u << k));
	}
	/* what `softrdma status` shows: every decision, whoever made it */
	sr_fault_shm_counts(&sh, &c);
	for (int d = 0; d < SR_FAULT_DIRS; d++)
		for (int k = 0; k < SR_FK_MAX; k++)
			kinds += c.kind[d][k];
	CHECK_EQ(kinds, marks);
	CHECK(c.matched[SR_FAULT_TX] + c.matched[SR_FAULT_RX] <= NPKT);
	CHECK(c.matched[SR_FAULT_TX] > 0);
}

static void run(const char *spec, unsigned *masks, uint32_t *bits)
{
	run_by(spec, masks, bits, 1);
}

static unsigned count(const unsigned *m, enum sr_fault_kind k)
{
	unsigned n = 0;

	for (unsigned i = 0; i < NPKT; i++)
		n += !!(m[i] & (1u << k));
	return n;
}

int main(void)
{
	static unsigned m1[NPKT], m2[NPKT], m3[NPKT];
	static uint32_t b1[NPKT], b2[NPKT], b3[NPKT];
	static const char *const bad[] = {
	    "drop=2",	    "drop=-0.1",    "dorp=0.1",		  "delay=0.1",	   "drop",
	    "dir=up",	    "qp=0x1000000", "delay=0.1:5parsecs", "drop_nth=0",	   "seed=-1",
	    "drop=0.1:5us", "qp=zz",	    "delay=0.1:nan",	  "delay=0.1:inf", "drop=nan"};
	struct sr_fault_cfg cfg;
	char err[128];
	const char *spec = "seed=7,drop=0.01,dup=0.05,reorder=0.02,corrupt=0.03,delay=0.04:500us;"
			   "dir=rx,qp=0x12,dup=0.1,drop_nth=3";

	/* grammar */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_CTX("spec %s", bad[i]);
		CHECK_EQ(sr_fault_parse(bad[i], &cfg, err, sizeof(err)), -EINVAL);
		CHECK(err[0] != 0);
	}
	CHECK_CTX("grammar");
	CHECK_EQ(sr_fault_parse("", &cfg, err, sizeof(err)), 0);
	CHECK(!sr_fault_cfg_on(&cfg));
	CHECK_EQ(strcmp(cfg.text, "off"), 0);
	CHECK_EQ(sr_fault_parse("off", &cfg, err, sizeof(err)), 0);
	CHECK(!sr_fault_cfg_on(&cfg));
	CHECK_EQ(sr_fault_parse("seed=7,drop=0.01", &cfg, err, sizeof(err)), 0);
	CHECK(cfg.dir[SR_FAULT_TX].on && !cfg.dir[SR_FAULT_RX].on);
	CHECK_EQ(strcmp(cfg.text, "seed=7;dir=tx,drop=0.01"), 0);
	CHECK_EQ(
	    sr_fault_parse("dir=rx,qp=0x12,dup=0.05,reorder=0.02,corrupt=0.01,delay=0.02:500us,"
			   "drop_nth=3",
			   &cfg, err, sizeof(err)),
	    0);
	CHECK(cfg.dir[SR_FAULT_RX].on && !cfg.dir[SR_FAULT_TX].on);
	CHECK(cfg.dir[SR_FAULT_RX].one_qp && cfg.dir[SR_FAULT_RX].qpn == 0x12);
	CHECK_EQ(cfg.dir[SR_FAULT_RX].delay_ns, 500000);
	CHECK_EQ(cfg.dir[SR_FAULT_RX].nth[SR_FK_DROP], 3);
	CHECK_EQ(sr_fault_parse("dir=both,drop=5%,delay=1:2ms", &cfg, err, sizeof(err)), 0);
	CHECK(cfg.dir[SR_FAULT_RX].on && cfg.dir[SR_FAULT_TX].on);
	CHECK(cfg.dir[SR_FAULT_TX].prob[SR_FK_DROP] == 0.05);
	CHECK_EQ(cfg.dir[SR_FAULT_RX].delay_ns, 2000000);
	/* the canonical form parses back to itself */
	{
		struct sr_fault_cfg again;

		CHECK_EQ(sr_fault_parse(spec, &cfg, err, sizeof(err)), 0);
		CHECK_EQ(sr_fault_parse(cfg.text, &again, err, sizeof(err)), 0);
		CHECK_EQ(strcmp(cfg.text, again.text), 0);
	}

	/* determinism */
	CHECK_CTX("seed");
	run(spec, m1, b1);
	run(spec, m2, b2);
	CHECK_EQ(memcmp(m1, m2, sizeof(m1)), 0);
	CHECK_EQ(memcmp(b1, b2, sizeof(b1)), 0);
	/* whichever thread takes each packet: three taking turns decide as one */
	run_by(spec, m2, b2, 3);
	CHECK_EQ(memcmp(m1, m2, sizeof(m1)), 0);
	CHECK_EQ(memcmp(b1, b2, sizeof(b1)), 0);
	run("seed=8,drop=0.01,dup=0.05,reorder=0.02,corrupt=0.03,delay=0.04:500us;"
	    "dir=rx,qp=0x12,dup=0.1,drop_nth=3",
	    m3, b3);
	CHECK(memcmp(m1, m3, sizeof(m1)) != 0);

	/* rates (tx: 2/3 of the packets, every QP) */
	CHECK_CTX("rates");
	{
		unsigned tx = 0, drop = 0, dup = 0, rx12 = 0, rxdup = 0, other = 0;

		for (unsigned i = 0; i < NPKT; i++) {
			if (i % 3) {
				tx++;
				drop += !!(m1[i] & (1u << SR_FK_DROP));
				dup += !!(m1[i] & (1u << SR_FK_DUP));
				CHECK(!(m1[i] & (1u << SR_FK_DROP)) || m1[i] == (1u << SR_FK_DROP));
				CHECK(!(m1[i] & (1u << SR_FK_DELAY)) ||
				      !(m1[i] & (1u << SR_FK_REORDER)));
				CHECK(b1[i] < 1000);
			} else if (0x12 + (i % 5) == 0x12) {
				rx12++;
				rxdup += !!(m1[i] & (1u << SR_FK_DUP));
			} else {
				other += m1[i] != 0;
			}
		}
		/* 1% of 133333: 1333 +- 4 sigma (146) */
		CHECK(drop > 1333 - 146 && drop < 1333 + 146);
		/* dup 5% of the 99% not dropped */
		CHECK(dup > 6600 - 330 && dup < 6600 + 330);
		CHECK_EQ(other, 0); /* rx: only QP 0x12 */
		CHECK(rxdup > rx12 / 10 - rx12 / 50 && rxdup < rx12 / 10 + rx12 / 50);
		/* drop_nth=3 on rx QP 0x12: its 3rd packet, i = 30 */
		CHECK_EQ(m1[30], 1u << SR_FK_DROP);
		CHECK_EQ(count(m1, SR_FK_DROP) - drop, 1);
	}
	return CHECK_SUMMARY("unit_fault");
}
