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
 */
#ifndef SR_ENGINE_DOORBELL_H
#define SR_ENGINE_DOORBELL_H

#include <stdbool.h>
#include <stdint.h>

#include <softrdma/layout.h>

static inline void sr_db_init(struct sr_arena_hdr *h)
{
	for (uint64_t i = 0; i < SR_DB_SLOTS; i++)
		atomic_store_explicit(&h->db_ring[i], i << 32, memory_order_relaxed);
	atomic_store_explicit(&h->db_head, 0, memory_order_relaxed);
	atomic_store_explicit(&h->db_tail, 0, memory_order_relaxed);
}

/* Producer.  Returns true if the engine sleeps and must be woken. */
static inline bool sr_db_ring(struct sr_arena_hdr *h, struct sr_qp_shm *qp)
{
	if (!atomic_exchange_explicit(&qp->wire_db, 1, memory_order_acq_rel)) {
		uint64_t pos = atomic_load_explicit(&h->db_head, memory_order_relaxed);

		for (;;) {
			_Atomic uint64_t *cell = &h->db_ring[pos & (SR_DB_SLOTS - 1)];
			uint32_t seq =
			    (uint32_t)(atomic_load_explicit(cell, memory_order_acquire) >> 32);
			int32_t dif = (int32_t)(seq - (uint32_t)pos);

			if (dif == 0) {
				if (atomic_compare_exchange_weak_explicit(
					&h->db_head, &pos, pos + 1, memory_order_relaxed,
					memory_order_relaxed)) {
					/* pairs with sr_db_pop's load-acquire */
					atomic_store_explicit(
					    cell, ((uint64_t)(uint32_t)(pos + 1) << 32) | qp->qpn,
					    memory_order_release);
					break;
				}
			} else if (dif < 0) {
				atomic_store_explicit(&h->db_overflow, 1, memory_order_release);
				break;
			} else {
				pos = atomic_load_explicit(&h->db_head, memory_order_relaxed);
			}
		}
	}
	/* pairs with the engine's fence between raising engine_sleeping and
	 * its last look at the queue */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&h->engine_sleeping, memory_order_relaxed);
}

/* The engine (single consumer): the next QPN, or 0 if the queue is empty. */
static inline uint32_t sr_db_pop(struct sr_arena_hdr *h)
{
	uint64_t pos = atomic_load_explicit(&h->db_tail, memory_order_relaxed);
	_Atomic uint64_t *cell = &h->db_ring[pos & (SR_DB_SLOTS - 1)];
	uint64_t v = atomic_load_explicit(cell, memory_order_acquire);

	if ((uint32_t)(v >> 32) != (uint32_t)(pos + 1))
		return 0;
	atomic_store_explicit(cell, (uint64_t)(uint32_t)(pos + SR_DB_SLOTS) << 32,
			      memory_order_release);
	atomic_store_explicit(&h->db_tail, pos + 1, memory_order_relaxed);
	return (uint32_t)v;
}

static inline bool sr_db_empty(struct sr_arena_hdr *h)
{
	uint64_t pos = atomic_load_explicit(&h->db_tail, memory_order_relaxed);
	uint64_t v =
	    atomic_load_explicit(&h->db_ring[pos & (SR_DB_SLOTS - 1)], memory_order_acquire);

	return (uint32_t)(v >> 32) != (uint32_t)(pos + 1) &&
	       !atomic_load_explicit(&h->db_overflow, memory_order_acquire);
}

#endif
