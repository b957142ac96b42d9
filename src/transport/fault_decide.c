/*
 * Fault injection's decisions and taps, run by every thread that sends or
 * receives RoCEv2 packets for the host: the engine, and the receive
 * halves of the processes (datapath/wire_rx.c), which link this file into
 * libibverbs.  The rules and the packet numbers are in the arena (struct
 * sr_fault_shm), so whoever takes a packet decides it the same way (see
 * fault.h for the grammar and the determinism rules).  The transmit taps
 * are the link's (roce/roce.c), the receive taps here.  What only the
 * engine does, holding packets for delay and reorder, and the capture,
 * it does through e->taps (fault.c, ctl.c).
 *
 * The generator is splitmix64 (Steele, Lea and Flood) used as a counter:
 * draw i of a direction is the mix of start + (i + 1) * gamma, written here
 * from its published definition.
 */
#include <string.h>

#include "core/seqlock.h"
#include "transport/transport.h"
#include "transport/fault.h"

_Static_assert(SR_FK_MAX == SR_FAULT_KINDS, "layout.h's SR_FAULT_KINDS is SR_FK_MAX");
_Static_assert(SR_FAULT_DIRS == 2, "layout.h's fault rules are for two directions");

#define DRAWS_PER_PKT 8 /* the kinds, the corrupted bit, room */

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Draw k of packet n (from 1) in direction d. */
static uint64_t draw(uint64_t seed, enum sr_fault_dir d, uint64_t n, unsigned k)
{
	static const uint64_t salt[SR_FAULT_DIRS] = {0x7478000000000000ull, 0x7278000000000000ull};

	return mix((seed ^ salt[d]) + (n * DRAWS_PER_PKT + k + 1) * 0x9e3779b97f4a7c15ull);
}

void sr_fault_publish(struct sr_fault_shm *sh, const struct sr_fault_cfg *cfg)
{
	struct sr_fault_rules r;
	uint32_t dirs = 0;

	memset(&r, 0, sizeof(r));
	if (cfg) {
		r.seed = cfg->seed;
		for (int d = 0; d < SR_FAULT_DIRS; d++) {
			const struct sr_fault_rule *c = &cfg->dir[d];

			if (!c->on)
				continue;
			r.dir[d].on = 1;
			r.dir[d].one_qp = c->one_qp;
			r.dir[d].qpn = c->qpn;
			memcpy(r.dir[d].thresh, c->thresh, sizeof(r.dir[d].thresh));
			memcpy(r.dir[d].nth, c->nth, sizeof(r.dir[d].nth));
			dirs |= 1u << d;
		}
	}
	sr_seq_write(&sh->seq, &r, sizeof(r));
	for (int d = 0; d < SR_FAULT_DIRS; d++) {
		atomic_store_explicit(&sh->matched[d], 0, memory_order_relaxed);
		for (int k = 0; k < SR_FK_MAX; k++)
			atomic_store_explicit(&sh->kind[d][k], 0, memory_order_relaxed);
	}
	atomic_store_explicit(&sh->dirs, dirs, memory_order_release);
}

unsigned sr_fault_decide(struct sr_fault_shm *sh, struct sr_fault_view *v, enum sr_fault_dir d,
			 uint32_t dqpn, uint32_t nbits, uint32_t *bit)
{
	const struct sr_fault_rule_shm *r = &v->rules.dir[d];
	uint32_t seq = atomic_load_explicit(&sh->seq, memory_order_acquire);
	unsigned mask = 0;
	uint64_t n;

	if (seq != v->seq) { /* changed since this thread last looked (or never read) */
		sr_seq_read(&sh->seq, &v->rules, sizeof(v->rules));
		v->seq = seq;
		/* a write under way: read again next time */
		if (atomic_load_explicit(&sh->seq, memory_order_acquire) != seq || (seq & 1))
			v->seq = 1;
	}
	if (!r->on || (r->one_qp && r->qpn != dqpn))
		return 0;
	n = atomic_fetch_add_explicit(&sh->matched[d], 1, memory_order_relaxed) + 1;
	for (unsigned k = 0; k < SR_FK_MAX; k++) {
		if (r->thresh[k] &&
		    draw(v->rules.seed, d, n, k) <= r->thresh[k] - (r->thresh[k] != UINT64_MAX))
			mask |= 1u << k;
		if (r->nth[k] == n)
			mask |= 1u << k;
	}
	if (r->thresh[SR_FK_CORRUPT] || r->nth[SR_FK_CORRUPT])
		*bit = nbits ? (uint32_t)(draw(v->rules.seed, d, n, SR_FK_MAX) % nbits) : 0;
	if (mask & (1u << SR_FK_DROP))
		mask = 1u << SR_FK_DROP;
	if (mask & (1u << SR_FK_DELAY))
		mask &= ~(1u << SR_FK_REORDER);
	if ((mask & (1u << SR_FK_CORRUPT)) && !nbits)
		mask &= ~(1u << SR_FK_CORRUPT);
	for (unsigned k = 0; k < SR_FK_MAX; k++)
		if (mask & (1u << k))
			atomic_fetch_add_explicit(&sh->kind[d][k], 1, memory_order_relaxed);
	return mask;
}

void sr_fault_shm_counts(const struct sr_fault_shm *sh, struct sr_fault_counts *out)
{
	memset(out, 0, sizeof(*out));
	for (int d = 0; d < SR_FAULT_DIRS; d++) {
		out->matched[d] = atomic_load_explicit(&sh->matched[d], memory_order_relaxed);
		for (int k = 0; k < SR_FK_MAX; k++)
			out->kind[d][k] =
			    atomic_load_explicit(&sh->kind[d][k], memory_order_relaxed);
	}
}

/* ---- the taps ---- */

#define HOLDING ((1u << SR_FK_DELAY) | (1u << SR_FK_REORDER))

unsigned sr_eng_rx_tap(struct sr_engine *e, uint8_t *buf, uint32_t len,
		       const struct sr_link_addr *from)
{
	const uint8_t *sgid = from->sgid, *dgid = from->dgid;
	uint16_t sport = (uint16_t)from->flow;
	struct sr_fault_shm *sh = sr_eng_fault_shm(e);
	struct iovec iov = {buf, len};
	unsigned mask;
	uint32_t bit = 0;

	/* recorded as it came off the socket, before any fault */
	if (e->taps)
		e->taps->trace(e, sgid, dgid, sport, SR_ROCE_PORT, &iov, 1);
	if (!sr_fault_dir_on(sh, SR_FAULT_RX) || len < SR_BTH_LEN)
		return 1; /* (a runt is not ours to judge: the parser drops it) */
	mask = sr_fault_decide(sh, &e->fault_view, SR_FAULT_RX, sr_bth_dqpn_raw(buf, len),
			       (len - SR_BTH_LEN) * 8, &bit);
	if (mask & (1u << SR_FK_DROP))
		return 0;
	if (mask & (1u << SR_FK_CORRUPT))
		buf[SR_BTH_LEN + bit / 8] ^= (uint8_t)(1u << (bit % 8));
	if ((mask & HOLDING) && e->taps &&
	    e->taps->hold(e, SR_FAULT_RX, mask, -1, sgid, dgid, sport, &iov, 1))
		return 0;
	if (e->taps)
		e->taps->passed(e, SR_FAULT_RX);
	return mask & (1u << SR_FK_DUP) ? 2 : 1;
}
