/*
 * The RoCEv2 engine's doorbell: how a posting process tells the host's
 * engine (a thread of softrdmad) that a QP whose peer is on another host
 * has new send work, without a system call while the engine is awake.
 *
 * A QP is queued at most once (its `wire_db` flag: set by the poster,
 * cleared by the engine before it runs the SQ), on a bounded
 * multi-producer, single-consumer queue of QPNs in the arena header: each
 * slot holds (sequence << 32 | qpn), the classic bounded queue with one
 * sequence per cell (a producer claims a slot by CAS on db_head when the
 * slot's sequence equals its position, then store-releases the sequence
 * position + 1; the engine load-acquires it).  If the queue is full the
 * poster raises db_overflow and the engine rescans every wire QP.
 *
 * Waking: the engine raises engine_sleeping, fences, and looks at the
 * queue once more before it blocks; a poster publishes, fences, then reads
 * engine_sleeping and writes the eventfd only if it is set (a Dekker pair:
 * one of them always sees the other, so no doorbell is lost).
 *
 * The same queue algorithm carries UD datagrams to other hosts that
 * posting threads hand to the engine while its transmit taps are on
 * (struct sr_udtx_slot): the engine then injects faults into them,
 * captures and counts them like its own packets.
 */
#ifndef SR_CORE_DOORBELL_H
#define SR_CORE_DOORBELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <softrdma/layout.h>

static inline void sr_db_init(struct sr_arena_hdr *h)
{
	for (uint64_t i = 0; i < SR_DB_SLOTS; i++)
		atomic_store_explicit(&h->db_ring[i], i << 32, memory_order_relaxed);
	atomic_store_explicit(&h->db_head, 0, memory_order_relaxed);
	atomic_store_explicit(&h->db_tail, 0, memory_order_relaxed);
}

/*
 * The queue's core, shared by the doorbell (cells are the ring's words)
 * and the UD transmit queue (cells are the first word of each slot, at a
 * stride): a producer claims position pos when its cell's sequence (the
 * high 32 bits) equals pos; it returns the cell, or NULL when the queue is
 * full.  The producer then fills the slot and publishes it with
 * sr_mpsc_publish (sequence pos + 1); the consumer sees it ready, uses it
 * and hands it back with sr_mpsc_release (sequence pos + slots).
 */
static inline _Atomic uint64_t *sr_mpsc_cell(_Atomic uint64_t *cell0, size_t stride, uint64_t slots,
					     uint64_t pos)
{
	return (_Atomic uint64_t *)((char *)cell0 + (pos & (slots - 1)) * stride);
}

static inline _Atomic uint64_t *sr_mpsc_claim(_Atomic uint64_t *head, _Atomic uint64_t *cell0,
					      size_t stride, uint64_t slots, uint64_t *posp)
{
	uint64_t pos = atomic_load_explicit(head, memory_order_relaxed);

	for (;;) {
		_Atomic uint64_t *cell = sr_mpsc_cell(cell0, stride, slots, pos);
		uint32_t seq = (uint32_t)(atomic_load_explicit(cell, memory_order_acquire) >> 32);
		int32_t dif = (int32_t)(seq - (uint32_t)pos);

		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(
				head, &pos, pos + 1, memory_order_relaxed, memory_order_relaxed)) {
				*posp = pos;
				return cell;
			}
		} else if (dif < 0) {
			return NULL;
		} else {
			pos = atomic_load_explicit(head, memory_order_relaxed);
		}
	}
}

/* pairs with the consumer's load-acquire in sr_mpsc_ready */
static inline void sr_mpsc_publish(_Atomic uint64_t *cell, uint64_t pos, uint32_t low)
{
	atomic_store_explicit(cell, ((uint64_t)(uint32_t)(pos + 1) << 32) | low,
			      memory_order_release);
}

/* The consumer: the cell at *tail if it is published (its word in *v). */
static inline _Atomic uint64_t *sr_mpsc_ready(_Atomic uint64_t *tail, _Atomic uint64_t *cell0,
					      size_t stride, uint64_t slots, uint64_t *v)
{
	uint64_t pos = atomic_load_explicit(tail, memory_order_relaxed);
	_Atomic uint64_t *cell = sr_mpsc_cell(cell0, stride, slots, pos);

	*v = atomic_load_explicit(cell, memory_order_acquire);
	return (uint32_t)(*v >> 32) == (uint32_t)(pos + 1) ? cell : NULL;
}

/* The consumer is done with the cell at *tail: producers may claim it again
 * one lap later. */
static inline void sr_mpsc_release(_Atomic uint64_t *tail, _Atomic uint64_t *cell, uint64_t slots)
{
	uint64_t pos = atomic_load_explicit(tail, memory_order_relaxed);

	atomic_store_explicit(cell, (uint64_t)(uint32_t)(pos + slots) << 32, memory_order_release);
	atomic_store_explicit(tail, pos + 1, memory_order_relaxed);
}

/* Whether the engine sleeps (and must be woken by its eventfd) after a
 * producer published. */
static inline bool sr_db_sleeping(struct sr_arena_hdr *h)
{
	/* pairs with the engine's fence between raising engine_sleeping and
	 * its last look at the queues */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&h->engine_sleeping, memory_order_relaxed);
}

/* Producer.  Returns true if the engine sleeps and must be woken. */
static inline bool sr_db_ring(struct sr_arena_hdr *h, struct sr_qp_shm *qp)
{
	if (!atomic_exchange_explicit(&qp->wire_db, 1, memory_order_acq_rel)) {
		uint64_t pos;
		_Atomic uint64_t *cell = sr_mpsc_claim(&h->db_head, h->db_ring,
						       sizeof(h->db_ring[0]), SR_DB_SLOTS, &pos);

		if (cell)
			sr_mpsc_publish(cell, pos, qp->qpn);
		else
			atomic_store_explicit(&h->db_overflow, 1, memory_order_release);
	}
	return sr_db_sleeping(h);
}

/* The engine (single consumer): the next QPN, or 0 if the queue is empty. */
static inline uint32_t sr_db_pop(struct sr_arena_hdr *h)
{
	uint64_t v;
	_Atomic uint64_t *cell =
	    sr_mpsc_ready(&h->db_tail, h->db_ring, sizeof(h->db_ring[0]), SR_DB_SLOTS, &v);

	if (!cell)
		return 0;
	sr_mpsc_release(&h->db_tail, cell, SR_DB_SLOTS);
	return (uint32_t)v;
}

/*
 * Queues of datagrams in slots (struct sr_udtx_slot), producers anywhere,
 * the engine the one consumer: udtx, UD datagrams posting threads hand it
 * to send; rxfwd, datagrams a receiving application hands it (QP1,
 * multicast: datapath/wire_rx.c).
 */
struct sr_slotq {
	struct sr_udtx_slot *tab;
	_Atomic uint64_t *head, *tail;
	uint64_t slots;
};

static inline struct sr_slotq sr_udtx_q(struct sr_arena_hdr *h)
{
	return (struct sr_slotq){sr_arena_udtxtab(h), &h->udtx_head, &h->udtx_tail, SR_UDTX_SLOTS};
}

static inline struct sr_slotq sr_rxfwd_q(struct sr_arena_hdr *h)
{
	return (struct sr_slotq){sr_arena_rxfwdtab(h), &h->rxfwd_head, &h->rxfwd_tail,
				 SR_RXFWD_SLOTS};
}

/* A producer's slot to fill, or NULL if the queue is full. */
static inline struct sr_udtx_slot *sr_slotq_claim(struct sr_slotq q, uint64_t *pos)
{
	if (!sr_mpsc_claim(q.head, &q.tab[0].seq, sizeof(*q.tab), q.slots, pos))
		return NULL;
	return &q.tab[*pos & (q.slots - 1)];
}

/* The engine: the k-th slot after the queue's tail if it is published (and
 * so are the k before it, which the caller has looked at), or NULL. */
static inline struct sr_udtx_slot *sr_slotq_at(struct sr_slotq q, uint64_t k)
{
	uint64_t pos = atomic_load_explicit(q.tail, memory_order_relaxed) + k;
	struct sr_udtx_slot *t = &q.tab[pos & (q.slots - 1)];

	return (uint32_t)(atomic_load_explicit(&t->seq, memory_order_acquire) >> 32) ==
		       (uint32_t)(pos + 1)
		   ? t
		   : NULL;
}

/* The engine is done with the slot at the tail. */
static inline void sr_slotq_release(struct sr_slotq q)
{
	struct sr_udtx_slot *t = sr_slotq_at(q, 0);

	if (t)
		sr_mpsc_release(q.tail, &t->seq, q.slots);
}

static inline struct sr_udtx_slot *sr_udtx_claim(struct sr_arena_hdr *h, uint64_t *pos)
{
	return sr_slotq_claim(sr_udtx_q(h), pos);
}

static inline struct sr_udtx_slot *sr_udtx_at(struct sr_arena_hdr *h, uint64_t k)
{
	return sr_slotq_at(sr_udtx_q(h), k);
}

static inline struct sr_udtx_slot *sr_udtx_peek(struct sr_arena_hdr *h)
{
	return sr_udtx_at(h, 0);
}

static inline void sr_udtx_release(struct sr_arena_hdr *h)
{
	sr_slotq_release(sr_udtx_q(h));
}

static inline bool sr_db_empty(struct sr_arena_hdr *h)
{
	uint64_t pos = atomic_load_explicit(&h->db_tail, memory_order_relaxed);
	uint64_t v =
	    atomic_load_explicit(&h->db_ring[pos & (SR_DB_SLOTS - 1)], memory_order_acquire);

	return (uint32_t)(v >> 32) != (uint32_t)(pos + 1) &&
	       !atomic_load_explicit(&h->db_overflow, memory_order_acquire) && !sr_udtx_peek(h) &&
	       !sr_slotq_at(sr_rxfwd_q(h), 0);
}

#endif
