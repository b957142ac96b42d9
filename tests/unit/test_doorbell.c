/*
 * Unit test of the RoCEv2 engine's doorbell (src/core/doorbell.h), the
 * bounded multi-producer single-consumer queue of QPNs in the arena header,
 * and of the same queue carrying slots (the UD transmit queue), on an arena
 * header in plain memory: FIFO order from one thread; a QP queued at most
 * once until the consumer clears its wire_db flag; a full queue refusing
 * the next QP and raising db_overflow; the wake-up answer from
 * engine_sleeping; positions whose 32-bit sequence wraps; producers on
 * several threads against one consumer, every ring seen exactly once and
 * in each producer's order; several threads ringing one QP at once queue
 * it once.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "core/doorbell.h"

static unsigned long sec_total, sec_failed;

/* One line per section: its name and how many of the checks it made failed. */
static void section(const char *name)
{
	printf("  %-28s %5lu checks, %lu failed\n", name, check_total - sec_total,
	       check_failed - sec_failed);
	sec_total = check_total;
	sec_failed = check_failed;
}

/* The arena's first bytes as the daemon lays them out for the queues
 * (daemon/heap.c sr_heap_init): the header, then the UD transmit and
 * receive-forward tables, each cell's sequence its index. */
static struct sr_arena_hdr *arena_new(void)
{
	size_t hdr = (sizeof(struct sr_arena_hdr) + 4095) & ~(size_t)4095;
	size_t size = hdr + (SR_UDTX_SLOTS + SR_RXFWD_SLOTS) * sizeof(struct sr_udtx_slot);
	struct sr_arena_hdr *h = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);

	if (!h) {
		perror("aligned_alloc");
		exit(2);
	}
	memset(h, 0, size);
	sr_db_init(h);
	h->udtxtab_off = hdr;
	h->rxfwdtab_off = hdr + SR_UDTX_SLOTS * sizeof(struct sr_udtx_slot);
	for (uint64_t i = 0; i < SR_UDTX_SLOTS; i++)
		atomic_store_explicit(&sr_arena_udtxtab(h)[i].seq, i << 32, memory_order_relaxed);
	for (uint64_t i = 0; i < SR_RXFWD_SLOTS; i++)
		atomic_store_explicit(&sr_arena_rxfwdtab(h)[i].seq, i << 32, memory_order_relaxed);
	return h;
}

static struct sr_qp_shm *qps_new(unsigned n, uint32_t first_qpn)
{
	struct sr_qp_shm *q = aligned_alloc(SR_CACHELINE, n * sizeof(*q));

	if (!q) {
		perror("aligned_alloc");
		exit(2);
	}
	memset(q, 0, n * sizeof(*q));
	for (unsigned i = 0; i < n; i++)
		q[i].qpn = first_qpn + i;
	return q;
}

/* What the engine does with a popped QPN: clears the QP's flag, so that the
 * next post rings again. */
static void engine_took(struct sr_qp_shm *qps, uint32_t first_qpn, uint32_t qpn)
{
	atomic_store_explicit(&qps[qpn - first_qpn].wire_db, 0, memory_order_release);
}

static void test_order(void)
{
	struct sr_arena_hdr *h = arena_new();
	struct sr_qp_shm *q = qps_new(100, 1);

	CHECK_CTX("empty");
	CHECK(sr_db_empty(h));
	CHECK_EQ(sr_db_pop(h), 0);

	CHECK_CTX("order");
	for (unsigned i = 0; i < 100; i++) {
		CHECK(!sr_db_ring(h, &q[i])); /* the engine is awake: nobody to wake */
		CHECK_EQ(atomic_load(&q[i].wire_db), 1);
	}
	CHECK(!sr_db_empty(h));
	for (unsigned i = 0; i < 100; i++) {
		uint32_t qpn = sr_db_pop(h);

		CHECK_EQ(qpn, i + 1);
		if (qpn)
			engine_took(q, 1, qpn);
	}
	CHECK_EQ(sr_db_pop(h), 0);
	CHECK(sr_db_empty(h));
	CHECK_EQ(atomic_load(&h->db_overflow), 0);

	/* queued once while its flag is up, whatever it rings */
	CHECK_CTX("once");
	sr_db_ring(h, &q[7]);
	sr_db_ring(h, &q[7]);
	sr_db_ring(h, &q[3]);
	sr_db_ring(h, &q[7]);
	CHECK_EQ(sr_db_pop(h), 8);
	CHECK_EQ(sr_db_pop(h), 4);
	CHECK_EQ(sr_db_pop(h), 0);
	sr_db_ring(h, &q[7]); /* flag still up: the engine has not run it */
	CHECK_EQ(sr_db_pop(h), 0);
	engine_took(q, 1, 8);
	sr_db_ring(h, &q[7]);
	CHECK_EQ(sr_db_pop(h), 8);
	CHECK_EQ(atomic_load(&h->db_head), atomic_load(&h->db_tail));

	/* the Dekker pair's producer half: wake only a sleeping engine */
	CHECK_CTX("sleeping");
	atomic_store(&h->engine_sleeping, 1);
	CHECK(sr_db_ring(h, &q[50]));
	CHECK(sr_db_ring(h, &q[50])); /* even when already queued */
	atomic_store(&h->engine_sleeping, 0);
	CHECK(!sr_db_ring(h, &q[51]));
	CHECK_EQ(sr_db_pop(h), 51);
	CHECK_EQ(sr_db_pop(h), 52);
	CHECK_EQ(sr_db_pop(h), 0);
	free(q);
	free(h);
	section("order, once, sleeping");
}

/* Fills the queue from position `start` (db_head = db_tail = start, each
 * cell's sequence the position it serves next): SR_DB_SLOTS QPs go in, the
 * next one raises db_overflow and is not queued; they come out in order. */
static void fill_and_drain(uint64_t start, unsigned laps)
{
	struct sr_arena_hdr *h = arena_new();
	struct sr_qp_shm *q = qps_new(SR_DB_SLOTS + 1, 1);
	unsigned bad = 0;

	CHECK_CTX("full from %#llx", (unsigned long long)start);
	for (uint64_t i = 0; i < SR_DB_SLOTS; i++) {
		uint64_t p = start + i;

		atomic_store(&h->db_ring[p & (SR_DB_SLOTS - 1)], (uint64_t)(uint32_t)p << 32);
	}
	atomic_store(&h->db_head, start);
	atomic_store(&h->db_tail, start);

	for (unsigned lap = 0; lap < laps; lap++) {
		for (unsigned i = 0; i < SR_DB_SLOTS; i++)
			sr_db_ring(h, &q[i]);
		CHECK_EQ(atomic_load(&h->db_overflow), 0);
		CHECK_EQ(atomic_load(&h->db_head) - atomic_load(&h->db_tail), SR_DB_SLOTS);
		sr_db_ring(h, &q[SR_DB_SLOTS]);
		CHECK_EQ(atomic_load(&h->db_overflow), 1);
		CHECK(!sr_db_empty(h));
		for (unsigned i = 0; i < SR_DB_SLOTS; i++) {
			uint32_t qpn = sr_db_pop(h);

			bad += qpn != i + 1;
			if (qpn)
				engine_took(q, 1, qpn);
		}
		CHECK_EQ(bad, 0);
		CHECK_EQ(sr_db_pop(h), 0);
		/* the engine's rescan, after which it lowers the flag */
		CHECK(!sr_db_empty(h));
		atomic_store(&h->db_overflow, 0);
		engine_took(q, 1, SR_DB_SLOTS + 1);
		CHECK(sr_db_empty(h));
		/* half a lap more, so the next lap starts mid-ring */
		for (unsigned i = 0; i < SR_DB_SLOTS / 2 + 3; i++)
			sr_db_ring(h, &q[i]);
		for (unsigned i = 0; i < SR_DB_SLOTS / 2 + 3; i++) {
			uint32_t qpn = sr_db_pop(h);

			bad += qpn != i + 1;
			if (qpn)
				engine_took(q, 1, qpn);
		}
		CHECK_EQ(bad, 0);
	}
	CHECK_EQ(atomic_load(&h->db_tail), start + laps * (SR_DB_SLOTS + SR_DB_SLOTS / 2 + 3));
	free(q);
	free(h);
}

static void test_full_and_wrap(void)
{
	fill_and_drain(0, 3);
	section("full queue, overflow");
	/* the cells' 32-bit sequence wraps while positions go on */
	fill_and_drain((1ull << 32) - SR_DB_SLOTS - 5, 4);
	fill_and_drain((1ull << 33) - 7, 2);
	section("sequence wrap");
}

/* The same algorithm on slots at a stride: the UD transmit queue. */
static void test_udtx(void)
{
	struct sr_arena_hdr *h = arena_new();
	struct sr_udtx_slot *s;
	uint64_t pos;

	CHECK_CTX("udtx");
	CHECK(sr_udtx_peek(h) == NULL);
	for (unsigned lap = 0; lap < 3; lap++) {
		for (unsigned i = 0; i < SR_UDTX_SLOTS; i++) {
			s = sr_udtx_claim(h, &pos);
			CHECK(s != NULL);
			if (!s)
				break;
			CHECK_EQ(pos, (uint64_t)lap * SR_UDTX_SLOTS + i);
			s->qpn = 1000 + i;
			CHECK(sr_udtx_peek(h) == (i ? sr_arena_udtxtab(h) : NULL));
			sr_mpsc_publish(&s->seq, pos, 0);
		}
		CHECK(sr_udtx_claim(h, &pos) == NULL); /* full */
		CHECK(!sr_db_empty(h));		       /* the engine has datagrams to send */
		for (unsigned i = 0; i < SR_UDTX_SLOTS; i++) {
			s = sr_udtx_peek(h);
			CHECK(s != NULL);
			if (!s)
				break;
			CHECK_EQ(s->qpn, 1000 + i);
			/* the k-th after the tail is ready as long as it was published */
			CHECK((sr_udtx_at(h, SR_UDTX_SLOTS - 1 - i) != NULL));
			CHECK(sr_udtx_at(h, SR_UDTX_SLOTS - i) == NULL);
			sr_udtx_release(h);
		}
		CHECK(sr_udtx_peek(h) == NULL);
		CHECK(sr_db_empty(h));
	}
	free(h);
	section("udtx slot queue");
}

/* ---- producers on several threads, one consumer ---- */

#define NPROD  3
#define PER_QP 1024	  /* QPs per producer: NPROD * PER_QP <= SR_DB_SLOTS */
#define RINGS  60000	  /* rings per producer */
#define QPN0   (1u << 12) /* producer p's QPs: QPN0 * (p + 1) + j */

#define NAME "test_doorbell"
#include "stress.h"

struct stress {
	struct sr_arena_hdr *h;
	struct sr_qp_shm *qps[NPROD];
	unsigned p;
};

static void *producer(void *arg)
{
	struct stress *st = arg;
	struct sr_qp_shm *qps = st->qps[st->p];

	for (unsigned k = 0; k < RINGS; k++) {
		struct sr_qp_shm *qp = &qps[k % PER_QP];

		/* its previous ring is taken: this one must queue it again */
		while (atomic_load_explicit(&qp->wire_db, memory_order_acquire)) {
			if (atomic_load_explicit(&give_up, memory_order_relaxed))
				return NULL;
			sched_yield();
		}
		sr_db_ring(st->h, qp);
	}
	return NULL;
}

static void test_stress(void)
{
	static struct stress st[NPROD];
	pthread_t t[NPROD];
	struct sr_arena_hdr *h = arena_new();
	unsigned next[NPROD] = {0}, wrong = 0, stray = 0, got = 0;
	uint64_t last_at;

	CHECK_CTX("stress");
	for (unsigned p = 0; p < NPROD; p++)
		st[0].qps[p] = qps_new(PER_QP, QPN0 * (p + 1));
	for (unsigned p = 0; p < NPROD; p++) {
		st[p].h = h;
		st[p].p = p;
		if (p)
			memcpy(st[p].qps, st[0].qps, sizeof(st[p].qps));
		if (pthread_create(&t[p], NULL, producer, &st[p])) {
			perror("pthread_create");
			exit(2);
		}
	}
	last_at = now_ms();
	while (got < NPROD * RINGS) {
		uint32_t qpn = sr_db_pop(h);
		unsigned p;

		if (!qpn) {
			if (now_ms() - last_at > STALL_MS) {
				atomic_store(&give_up, 1);
				break;
			}
			sched_yield();
			continue;
		}
		got++;
		last_at = now_ms();
		p = qpn / QPN0 - 1;
		if (p >= NPROD || qpn % QPN0 >= PER_QP) {
			stray++;
			continue;
		}
		/* each producer's rings come out in its order, each once */
		if (qpn % QPN0 != next[p] % PER_QP)
			wrong++;
		next[p]++;
		engine_took(st[0].qps[p], QPN0 * (p + 1), qpn);
	}
	for (unsigned p = 0; p < NPROD; p++)
		join(t[p]);
	CHECK_EQ(got, NPROD * RINGS);
	CHECK_EQ(stray, 0);
	CHECK_EQ(wrong, 0);
	for (unsigned p = 0; p < NPROD; p++)
		CHECK_EQ(next[p], RINGS);
	CHECK_EQ(sr_db_pop(h), 0);
	CHECK_EQ(atomic_load(&h->db_overflow), 0); /* never more in flight than slots */
	CHECK_EQ(atomic_load(&h->db_head), (uint64_t)NPROD * RINGS);
	for (unsigned p = 0; p < NPROD; p++)
		free(st[0].qps[p]);
	free(h);
	section("producers x3, one consumer");
}

/* Several threads ring the same QP at once: it is queued once. */
#define SAME_ROUNDS 1500

struct same {
	struct sr_arena_hdr *h;
	struct sr_qp_shm *qp;
	pthread_barrier_t *bar;
};

static void *same_ringer(void *arg)
{
	struct same *s = arg;

	for (unsigned r = 0; r < SAME_ROUNDS; r++) {
		pthread_barrier_wait(&s->bar[0]);
		sr_db_ring(s->h, s->qp);
		pthread_barrier_wait(&s->bar[1]);
		pthread_barrier_wait(&s->bar[2]); /* the consumer looked */
	}
	return NULL;
}

static void test_same_qp(void)
{
	struct sr_arena_hdr *h = arena_new();
	struct sr_qp_shm *qp = qps_new(1, 77);
	pthread_barrier_t bar[3];
	struct same s = {h, qp, bar};
	pthread_t t[NPROD];
	unsigned twice = 0, none = 0;

	CHECK_CTX("same qp");
	for (int i = 0; i < 3; i++)
		pthread_barrier_init(&bar[i], NULL, NPROD + 1);
	for (unsigned p = 0; p < NPROD; p++)
		pthread_create(&t[p], NULL, same_ringer, &s);
	for (unsigned r = 0; r < SAME_ROUNDS; r++) {
		pthread_barrier_wait(&bar[0]);
		pthread_barrier_wait(&bar[1]);
		none += sr_db_pop(h) != 77;
		twice += sr_db_pop(h) != 0;
		engine_took(qp, 77, 77);
		pthread_barrier_wait(&bar[2]);
	}
	for (unsigned p = 0; p < NPROD; p++)
		pthread_join(t[p], NULL);
	CHECK_EQ(none, 0);
	CHECK_EQ(twice, 0);
	CHECK_EQ(atomic_load(&h->db_head), SAME_ROUNDS);
	for (int i = 0; i < 3; i++)
		pthread_barrier_destroy(&bar[i]);
	free(qp);
	free(h);
	section("one QP rung by x3 at once");
}

int main(void)
{
	test_order();
	test_full_and_wrap();
	test_udtx();
	test_stress();
	test_same_qp();
	return CHECK_SUMMARY(NAME);
}
