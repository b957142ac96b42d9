/*
 * Who reads a member of the engine's receive socket group (layout.h,
 * struct sr_rx_member): the engine, or a receive half in the process the
 * member belongs to (datapath/wire_rx.c).  One reader at a time, nobody waits:
 * a reader that finds the member held leaves its datagrams to the holder.
 * A hold older than SR_RX_HOLD_STALE_NS is taken over if its holder is
 * stopped, gone or asleep with datagrams in hand (they are handled late,
 * as a network reorders, which RC recovers from); a holder that is only
 * preempted, runnable, keeps it up to SR_RX_HOLD_MAX_NS: a taker would
 * handle newer datagrams before the holder's older ones, and UC loses a
 * message to that (perftest's UC latency test across the hosts hung one
 * run in ten, every packet received, drop_opcode counting the rest of
 * the broken message).
 */
#ifndef SR_TRANSPORT_RX_MEMBER_H
#define SR_TRANSPORT_RX_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

#include <softrdma/layout.h>

#define SR_RX_HOLD_STALE_NS 5000000ull
#define SR_RX_HOLD_MAX_NS   200000000ull

/* Whether thread tid (of this pid namespace) is running or runnable
 * (transport/core.c: /proc/<tid>/stat, looked at once a millisecond). */
bool sr_rx_thread_runnable(int32_t tid, uint64_t now);
/* This thread's id (cached). */
int32_t sr_rx_self_tid(void);

/* Whether a hold taken at v (0: none) still stands at now. */
static inline bool sr_rx_hold_stands(struct sr_rx_member *m, uint64_t v, uint64_t now)
{
	if (!v)
		return false;
	if ((int64_t)(now - v) < (int64_t)SR_RX_HOLD_STALE_NS)
		return true;
	return (int64_t)(now - v) < (int64_t)SR_RX_HOLD_MAX_NS &&
	       sr_rx_thread_runnable(atomic_load_explicit(&m->holder, memory_order_relaxed), now);
}

/* (the engine then leaves m out of its epoll set: no spinning on a
 * readable socket that a preempted holder keeps) */
static inline bool sr_rx_held(struct sr_rx_member *m, uint64_t now)
{
	return sr_rx_hold_stands(m, atomic_load_explicit(&m->hold, memory_order_relaxed), now);
}

/* Takes m at `now` (CLOCK_MONOTONIC ns): the value sr_rx_give wants, or 0
 * if someone else holds it. */
static inline uint64_t sr_rx_take(struct sr_rx_member *m, uint64_t now)
{
	uint64_t v = atomic_load_explicit(&m->hold, memory_order_relaxed), mine = now | 1;

	if (sr_rx_hold_stands(m, v, now))
		return 0;
	/* pairs with sr_rx_give's release: what the last holder sent and
	 * wrote is before what this one reads */
	if (!atomic_compare_exchange_strong_explicit(&m->hold, &v, mine, memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	atomic_store_explicit(&m->holder, sr_rx_self_tid(), memory_order_relaxed);
	if (v)
		atomic_fetch_add_explicit(&m->takeovers, 1, memory_order_relaxed);
	return mine;
}

/* The engine's take: if m is held, the holder is told to look again when
 * it gives m back (missed), as a datagram that woke the engine may have
 * come after the holder's last look, and the engine no longer watches a
 * held member.  A Dekker pair with sr_rx_give: either the holder sees
 * missed, or the engine's second try finds m given back. */
static inline uint64_t sr_rx_take_or_leave(struct sr_rx_member *m, uint64_t now)
{
	uint64_t v = sr_rx_take(m, now);

	if (v)
		return v;
	atomic_store_explicit(&m->missed, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return sr_rx_take(m, now);
}

/* Gives m back, unless it was taken over meanwhile (then it is not ours).
 * True if the engine found m held meanwhile: the caller looks again. */
static inline bool sr_rx_give(struct sr_rx_member *m, uint64_t mine)
{
	atomic_compare_exchange_strong_explicit(&m->hold, &mine, 0, memory_order_release,
						memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&m->missed, memory_order_relaxed) &&
	       atomic_exchange_explicit(&m->missed, 0, memory_order_relaxed);
}

#endif
