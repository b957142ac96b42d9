/*
 * Unit test of the CQ ring (include/softrdma/layout.h struct sr_cq_shm,
 * struct sr_cqe): its producers (src/shm/cq_push.c) and its consumer
 * (src/datapath/cq_poll.c: ibv_poll_cq, the extended poll, arming, the filter
 * of destroyed QPs, sr_cq_clean_qp), on a ring laid out in plain memory as
 * the daemon lays it out (daemon/obj_cq.c, sr_op_create_cq), with the least of
 * a library context that polling reads (the arena, the QP list) and no
 * daemon.  Checks: entries come out in the order they went in, with every
 * field; the ring wraps at its size and the 32-bit counters wrap; a full
 * ring (cqe_cnt - 1 entries) refuses the next one, raises `overflow` and
 * IBV_EVENT_CQ_ERR once; arming raises one event for the next (solicited)
 * completion; a destroyed QP's entries are dropped at poll; cleaning one
 * QP's entries keeps the others in order and frees their slots (and gives
 * an SRQ its receive WQEs back); a polled receive completion frees its RQ
 * slot; producers on several threads against one consumer, every entry
 * polled exactly once and in its producer's order, with and without
 * overflow, and with one QP's entries cleaned meanwhile.
 *
 * cq_poll.c is compiled into this test (it is libibverbs' own); it runs
 * on srengine, which holds the rest of the data path, except the receive
 * half (datapath/wire_rx.c), stubbed below: an empty poll reads no socket.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "check.h"
#include "core/idalloc.h"
#include "core/shmlock.h"
#include "shm/cq_push.h"
#include "datapath/wire_rx.h"
#include "verbs/internal.h"

/* ---- the receive half, absent ---- */

int sr_wire_rx_poll(struct sr_context *ctx)
{
	return 0;
}

void sr_wire_rx_sleep(struct sr_context *ctx)
{
}

static unsigned long sec_total, sec_failed;

static void section(const char *name)
{
	printf("  %-34s %7lu checks, %lu failed\n", name, check_total - sec_total,
	       check_failed - sec_failed);
	sec_total = check_total;
	sec_failed = check_failed;
}

/* ---- an arena and a context ---- */

#define ARENA_SIZE (64ull << 20)
#define HEAP_OFF   (4ull << 20)

static void *arena;
static uint64_t bump = HEAP_OFF;
static struct sr_context *ctx;

static void arena_init(void)
{
	struct sr_arena_hdr *h;

	arena = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (arena == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	h = arena;
	h->magic = SR_ARENA_MAGIC;
	h->epochtab_off = 64 << 10; /* the reader sections of the poll (epoch.h) */
	h->qptab_off = 1 << 20;	    /* SR_MAX_QPS slots: 1 MiB */
	h->srqtab_off = 2 << 20;
	atomic_store(&h->epoch, 1);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		exit(2);
	ctx->dc.arena = arena;
	ctx->dc.arena_size = ARENA_SIZE;
	pthread_mutex_init(&ctx->lock, NULL);
	sr_list_init(&ctx->qps);
	sr_list_init(&ctx->srqs);
	sr_list_init(&ctx->cqs);
}

static uint64_t arena_alloc(uint64_t size)
{
	uint64_t off = bump;

	bump = (bump + size + 4095) & ~4095ull;
	if (bump > ARENA_SIZE) {
		fprintf(stderr, "test arena full\n");
		exit(2);
	}
	memset((char *)arena + off, 0, size);
	return off;
}

/* A CQ of cnt entries (a power of two) as the daemon makes one: header,
 * then the ring, zeroed; and the library's handle of it. */
/* every handle made, freed at the end (the rings live in the test arena) */
static struct sr_cq *cqs_made[64];
static unsigned ncqs_made;

static struct sr_cq *cq_new(uint32_t cnt, uint32_t channel_fd_id, uint32_t async_fd_id)
{
	uint64_t ring = (sizeof(struct sr_cq_shm) + 63) & ~63ull;
	uint64_t off = arena_alloc(ring + (uint64_t)cnt * sizeof(struct sr_cqe));
	struct sr_cq_shm *s = sr_arena_at(arena, off);
	struct sr_cq *cq = calloc(1, sizeof(*cq));

	if (!cq || ncqs_made == sizeof(cqs_made) / sizeof(cqs_made[0]))
		exit(2);
	cqs_made[ncqs_made++] = cq;
	s->cqe_cnt = cnt;
	s->max_cqe = cnt - 1;
	s->channel_fd_id = channel_fd_id;
	s->async_fd_id = async_fd_id;
	s->ring_off = off + ring;
	sr_shm_lock_init(&s->lock);
	cq->shm = s;
	sr_shm_lock_init(&cq->poll_lock);
	cq->cq.context = &ctx->vctx.context;
	cq->cq.cqe = (int)s->max_cqe;
	sr_cq_ex_init(cq);
	return cq;
}

static struct ibv_cq *ib(struct sr_cq *cq)
{
	return ibv_cq_ex_to_cq(&cq->cq);
}

static struct sr_cqe *ring_of(struct sr_cq *cq)
{
	return sr_arena_at(arena, cq->shm->ring_off);
}

/* ---- producing ---- */

static struct {
	unsigned n;
	uint32_t fd_id[8];
} sig;

static void record_signal(void *arg, uint32_t fd_id)
{
	if (sig.n < 8)
		sig.fd_id[sig.n] = fd_id;
	sig.n++;
}

/* An entry whose every field derives from (qpn, k). */
static struct sr_cqe cqe_of(uint32_t qpn, uint32_t k)
{
	struct sr_cqe e = {0};

	e.status = k % 3 ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR;
	e.wr_id = ((uint64_t)qpn << 32) | k;
	e.opcode = k % 2 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
	e.byte_len = k * 7;
	e.imm_data = k ^ 0x5a5a5a5a;
	e.qp_num = qpn;
	e.src_qp = qpn + 1000;
	e.wc_flags = k % 2 ? IBV_WC_WITH_IMM : 0;
	e.vendor_err = k % 3 ? 0 : 0x99;
	e.pkey_index = (uint16_t)(k & 0xff);
	e.slid = (uint16_t)(k >> 3);
	e.sl = (uint8_t)(k & 15);
	e.dlid_path_bits = (uint8_t)(k & 7);
	return e;
}

static bool push(struct sr_cq *cq, uint32_t qpn, uint32_t k)
{
	struct sr_cqe e = cqe_of(qpn, k);

	return sr_cq_push(arena, cq->shm, &e, false, record_signal, NULL);
}

/* Whether wc is what cqe_of(qpn, k) produced. */
static bool wc_is(const struct ibv_wc *wc, uint32_t qpn, uint32_t k)
{
	struct sr_cqe e = cqe_of(qpn, k);

	return wc->wr_id == e.wr_id && wc->status == (enum ibv_wc_status)e.status &&
	       wc->opcode == (enum ibv_wc_opcode)e.opcode && wc->byte_len == e.byte_len &&
	       wc->imm_data == e.imm_data && wc->qp_num == e.qp_num && wc->src_qp == e.src_qp &&
	       wc->wc_flags == e.wc_flags && wc->vendor_err == e.vendor_err &&
	       wc->pkey_index == e.pkey_index && wc->slid == e.slid && wc->sl == e.sl &&
	       wc->dlid_path_bits == e.dlid_path_bits;
}

/* Polls everything there is in batches of `batch`; returns how many. */
static int poll_all(struct sr_cq *cq, struct ibv_wc *wc, int max, int batch)
{
	int n = 0, got;

	while (n < max && (got = sr_poll_cq(ib(cq), batch < max - n ? batch : max - n, wc + n)) > 0)
		n += got;
	return n;
}

/* ---- tests ---- */

static void test_order(void)
{
	struct sr_cq *cq = cq_new(8, 0, 0);
	struct ibv_wc wc[8];
	int n;

	CHECK_CTX("order");
	CHECK_EQ(sr_poll_cq(ib(cq), 4, wc), 0);
	CHECK_EQ(sr_poll_cq(ib(cq), -1, wc), -EINVAL);
	for (uint32_t k = 0; k < 5; k++)
		CHECK(push(cq, 1, k));
	CHECK_EQ(atomic_load(&cq->shm->prod), 5);
	CHECK_EQ(sr_poll_cq(ib(cq), 0, wc), 0); /* asks for none: takes none */
	CHECK_EQ(atomic_load(&cq->shm->cons), 0);
	n = sr_poll_cq(ib(cq), 3, wc);
	CHECK_EQ(n, 3);
	CHECK_EQ(atomic_load(&cq->shm->cons), 3);
	n += sr_poll_cq(ib(cq), 8, wc + 3);
	CHECK_EQ(n, 5);
	for (int i = 0; i < n; i++)
		CHECK(wc_is(&wc[i], 1, (uint32_t)i));
	CHECK_EQ(sr_poll_cq(ib(cq), 8, wc), 0);
	/* published with the sequence word of its index */
	for (uint32_t i = 0; i < 5; i++)
		CHECK_EQ(atomic_load(&ring_of(cq)[i].seq), i + 1);
	CHECK_EQ(sig.n, 0); /* no channel, no async fd: nobody signalled */
	section("push/poll order, fields");
}

static void test_wrap(void)
{
	struct sr_cq *cq = cq_new(8, 0, 0);
	struct ibv_wc wc[8];
	uint32_t k = 0, next = 0, bad = 0;

	CHECK_CTX("wrap");
	for (unsigned round = 0; round < 400; round++) {
		unsigned in = 1 + round % 7, out = 1 + (round * 5) % 7;

		for (unsigned i = 0; i < in && k - next < 7; i++)
			CHECK(push(cq, 2, k++));
		for (int got = sr_poll_cq(ib(cq), (int)out, wc), i = 0; i < got; i++)
			bad += !wc_is(&wc[i], 2, next++);
	}
	for (int got = poll_all(cq, wc, 8, 3), i = 0; i < got; i++)
		bad += !wc_is(&wc[i], 2, next++);
	CHECK_EQ(bad, 0);
	CHECK_EQ(next, k);
	CHECK(k > 100 * 8); /* laps enough */
	CHECK_EQ(atomic_load(&cq->shm->overflow), 0);
	section("wrap at the ring size");

	/* counters that wrap at 2^32: the ring as a long-lived CQ has it,
	 * each slot's sequence word from the lap before */
	cq = cq_new(8, 0, 0);
	CHECK_CTX("wrap 2^32");
	{
		uint32_t start = 0xfffffff0u;

		for (uint32_t i = 0; i < 8; i++) {
			uint32_t p = start + i;

			atomic_store(&ring_of(cq)[p & 7].seq, p - 8 + 1);
		}
		atomic_store(&cq->shm->prod, start);
		atomic_store(&cq->shm->cons, start);
		cq->shm->cons_cache = start;
		next = k = 0;
		for (unsigned round = 0; round < 40; round++) {
			for (unsigned i = 0; i < 1 + round % 7 && k - next < 7; i++)
				CHECK(push(cq, 3, k++));
			for (int got = sr_poll_cq(ib(cq), 1 + (int)(round % 4), wc), i = 0; i < got;
			     i++)
				bad += !wc_is(&wc[i], 3, next++);
		}
		for (int got = poll_all(cq, wc, 8, 8), i = 0; i < got; i++)
			bad += !wc_is(&wc[i], 3, next++);
		CHECK_EQ(bad, 0);
		CHECK_EQ(next, k);
		CHECK(atomic_load(&cq->shm->cons) < start); /* it wrapped */
		CHECK_EQ(atomic_load(&cq->shm->cons), start + k);
	}
	section("wrap of the 32-bit counters");
}

static void test_overflow(void)
{
	struct sr_cq *cq = cq_new(8, 0, 42);
	struct ibv_wc wc[8];
	struct sr_cqe e = cqe_of(4, 99), *slot;
	int n;

	CHECK_CTX("overflow");
	sig.n = 0;
	for (uint32_t k = 0; k < 7; k++)
		CHECK(push(cq, 4, k)); /* cqe_cnt - 1: max_cqe, as reported */
	CHECK_EQ(atomic_load(&cq->shm->overflow), 0);
	CHECK_EQ(sig.n, 0);
	CHECK(!push(cq, 4, 7)); /* lost */
	CHECK_EQ(atomic_load(&cq->shm->overflow), 1);
	CHECK_EQ(atomic_load(&cq->shm->async_events), 1u << IBV_EVENT_CQ_ERR);
	CHECK_EQ(sig.n, 1); /* the owner's async fd */
	CHECK_EQ(sig.fd_id[0], 42);
	CHECK(!push(cq, 4, 8));
	CHECK_EQ(sig.n, 1); /* raised once until the owner takes it */
	/* the two-step producer refuses too, with the lock given back */
	CHECK(sr_cq_reserve(arena, cq->shm, record_signal, NULL) == NULL);
	CHECK_EQ(atomic_load(&cq->shm->lock.holder), 0);
	CHECK_EQ(atomic_load(&cq->shm->prod), 7);
	n = sr_poll_cq(ib(cq), 2, wc);
	CHECK_EQ(n, 2);
	CHECK(wc_is(&wc[0], 4, 0) && wc_is(&wc[1], 4, 1));
	/* room again: the next ones go in, after the ones kept */
	CHECK(push(cq, 4, 9));
	slot = sr_cq_reserve(arena, cq->shm, record_signal, NULL);
	CHECK(slot != NULL);
	if (slot)
		sr_cq_publish(cq->shm, slot, &e, false, record_signal, NULL);
	CHECK(!push(cq, 4, 11));
	n = poll_all(cq, wc, 8, 8);
	CHECK_EQ(n, 7);
	for (int i = 0; i < 5; i++)
		CHECK(wc_is(&wc[i], 4, (uint32_t)i + 2));
	CHECK(wc_is(&wc[5], 4, 9));
	CHECK(wc_is(&wc[6], 4, 99));
	CHECK_EQ(atomic_load(&cq->shm->overflow), 1); /* sticky: the CQ is in error */

	/* no async fd: the bit, no signal */
	cq = cq_new(2, 0, 0);
	sig.n = 0;
	CHECK(push(cq, 5, 0));
	CHECK(!push(cq, 5, 1));
	CHECK_EQ(atomic_load(&cq->shm->async_events), 1u << IBV_EVENT_CQ_ERR);
	CHECK_EQ(sig.n, 0);
	section("full ring, overflow, CQ_ERR");
}

static void test_events(void)
{
	struct sr_cq *cq = cq_new(16, 3, 0);
	struct sr_cqe e = cqe_of(6, 0);
	struct ibv_wc wc[16];

	CHECK_CTX("events");
	sig.n = 0;
	CHECK(push(cq, 6, 0)); /* not armed */
	CHECK_EQ(sig.n, 0);
	CHECK_EQ(sr_req_notify_cq(ib(cq), 0), 0);
	CHECK_EQ(atomic_load(&cq->shm->arm), SR_CQ_ARM_NEXT);
	CHECK(push(cq, 6, 1));
	CHECK_EQ(sig.n, 1);
	CHECK_EQ(sig.fd_id[0], 3);
	CHECK_EQ(atomic_load(&cq->shm->events), 1);
	CHECK_EQ(atomic_load(&cq->shm->arm), SR_CQ_DISARMED);
	CHECK(push(cq, 6, 2)); /* one event per arming */
	CHECK_EQ(sig.n, 1);

	CHECK_EQ(sr_req_notify_cq(ib(cq), 1), 0);
	CHECK_EQ(atomic_load(&cq->shm->arm), SR_CQ_ARM_SOLICITED);
	CHECK(push(cq, 6, 3)); /* not solicited */
	CHECK_EQ(sig.n, 1);
	CHECK(sr_cq_push(arena, cq->shm, &e, true, record_signal, NULL));
	CHECK_EQ(sig.n, 2);
	CHECK_EQ(atomic_load(&cq->shm->events), 2);

	/* asking for solicited only never weakens an armed "next" */
	sr_req_notify_cq(ib(cq), 0);
	sr_req_notify_cq(ib(cq), 1);
	CHECK_EQ(atomic_load(&cq->shm->arm), SR_CQ_ARM_NEXT);
	CHECK(push(cq, 6, 4));
	CHECK_EQ(sig.n, 3);
	CHECK_EQ(poll_all(cq, wc, 16, 16), 6);

	/* no channel: no event, armed or not */
	cq = cq_new(4, 0, 0);
	sig.n = 0;
	sr_req_notify_cq(ib(cq), 0);
	CHECK(push(cq, 6, 5));
	CHECK_EQ(sig.n, 0);
	CHECK_EQ(atomic_load(&cq->shm->events), 0);
	section("arming, completion events");
}

static void test_extended(void)
{
	struct sr_cq *cq = cq_new(8, 0, 0);
	struct ibv_poll_cq_attr attr = {0};
	struct ibv_cq_ex *x = &cq->cq;
	uint32_t k = 0;

	CHECK_CTX("extended");
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);
	cq->shm->flags |= SR_CQ_TIMESTAMPS;
	for (uint32_t i = 0; i < 3; i++)
		CHECK(push(cq, 7, i));
	CHECK_EQ(ibv_start_poll(x, &attr), 0);
	do {
		struct sr_cqe e = cqe_of(7, k);

		CHECK_EQ(x->wr_id, e.wr_id);
		CHECK_EQ(x->status, e.status);
		CHECK_EQ(ibv_wc_read_opcode(x), e.opcode);
		CHECK_EQ(ibv_wc_read_byte_len(x), e.byte_len);
		CHECK_EQ(ibv_wc_read_qp_num(x), 7);
		CHECK_EQ(ibv_wc_read_src_qp(x), e.src_qp);
		CHECK_EQ(ibv_wc_read_vendor_err(x), e.vendor_err);
		CHECK(ibv_wc_read_completion_ts(x) != 0);
		k++;
	} while (!ibv_next_poll(x));
	ibv_end_poll(x);
	CHECK_EQ(k, 3);
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);
	attr.comp_mask = 1;
	CHECK_EQ(ibv_start_poll(x, &attr), EINVAL);
	section("extended poll");
}

static void test_dead_qps(void)
{
	struct sr_cq *cq = cq_new(16, 0, 0);
	struct ibv_wc wc[16];
	int n;

	CHECK_CTX("destroyed QPs");
	for (uint32_t k = 0; k < 6; k++)
		CHECK(push(cq, 10 + k % 3, k)); /* QPs 10, 11, 12 in turn */
	sr_cq_qp_destroyed(ib(cq), 11);
	CHECK(push(cq, 11, 6)); /* a late one of the destroyed QP */
	n = poll_all(cq, wc, 16, 2);
	CHECK_EQ(n, 4);
	CHECK(wc_is(&wc[0], 10, 0) && wc_is(&wc[1], 12, 2) && wc_is(&wc[2], 10, 3) &&
	      wc_is(&wc[3], 12, 5));
	CHECK_EQ(atomic_load(&cq->shm->cons), 7); /* consumed, not returned */
	/* a new QP with that number: its completions are returned again */
	sr_cq_qp_created(ib(cq), 11);
	CHECK(push(cq, 11, 7));
	CHECK_EQ(sr_poll_cq(ib(cq), 16, wc), 1);
	CHECK(wc_is(&wc[0], 11, 7));
	section("destroyed QPs' entries dropped");
}

/* Fills cq from a cons of `start` with entries of QPs 1..3 per `pattern`
 * (a digit per entry), cleans QP 2 and checks the rest come out in order. */
static void clean_case(uint32_t cnt, uint32_t start, const char *pattern, uint32_t clean_qpn)
{
	struct sr_cq *cq = cq_new(cnt, 0, 0);
	struct ibv_wc *wc = calloc(cnt, sizeof(*wc));
	uint32_t n = (uint32_t)strlen(pattern), kept = 0, k, cons0, bad = 0;
	int got;

	CHECK_CTX("clean %u from %u: %s", cnt, start, pattern);
	/* move cons and prod to start by pushing and polling */
	for (k = 0; k < start; k++) {
		CHECK(push(cq, 9, k));
		CHECK_EQ(sr_poll_cq(ib(cq), 1, wc), 1);
	}
	for (k = 0; k < n; k++)
		CHECK(push(cq, (uint32_t)(pattern[k] - '0'), k));
	cons0 = atomic_load(&cq->shm->cons);
	sr_cq_clean_qp(ib(cq), clean_qpn, NULL);
	for (k = 0; k < n; k++)
		kept += (uint32_t)(pattern[k] - '0') != clean_qpn;
	CHECK_EQ(atomic_load(&cq->shm->prod) - atomic_load(&cq->shm->cons), kept);
	CHECK_EQ(atomic_load(&cq->shm->cons) - cons0, n - kept);
	/* the slots freed are free: the ring takes as many more */
	for (k = 0; k < cnt - 1 - kept; k++)
		CHECK(push(cq, 8, k));
	CHECK(!push(cq, 8, k));
	got = poll_all(cq, wc, (int)cnt, 3);
	CHECK_EQ(got, cnt - 1);
	{
		int i = 0;

		for (k = 0; k < n; k++)
			if ((uint32_t)(pattern[k] - '0') != clean_qpn)
				bad +=
				    i >= got || !wc_is(&wc[i++], (uint32_t)(pattern[k] - '0'), k);
		for (k = 0; i < got; k++)
			bad += !wc_is(&wc[i++], 8, k);
	}
	CHECK_EQ(bad, 0);
	free(wc);
}

static void test_clean(void)
{
	clean_case(16, 0, "1213221312", 2);
	clean_case(16, 11, "1213221312", 2);	 /* across the ring's end */
	clean_case(16, 5, "222222222222222", 2); /* all of it, a full ring */
	clean_case(16, 5, "131313", 2);		 /* none of it */
	clean_case(16, 9, "2221", 2);		 /* at the consumer's end */
	clean_case(16, 9, "1222", 2);		 /* at the producer's end */
	clean_case(8, 3, "3212321", 3);
	clean_case(2, 1, "2", 2);
	section("clean one QP's entries");

	/* the SRQ's receive WQEs the cleaned completions consumed are free */
	{
		struct sr_cq *cq = cq_new(16, 0, 0);
		struct sr_wq *srq = aligned_alloc(SR_CACHELINE, sizeof(*srq));
		struct ibv_wc wc[16];
		struct sr_cqe e;

		CHECK_CTX("clean: srq");
		memset(srq, 0, sizeof(*srq));
		srq->flags = SR_WQ_FREED_BY_POLL;
		atomic_store(&srq->head, 20);
		atomic_store(&srq->polled, 3);
		for (uint32_t k = 0; k < 6; k++) {
			e = cqe_of(k % 2 ? 2 : 1, k);
			e.opcode = IBV_WC_RECV;
			e.wqe_index = 3 + k;
			CHECK(sr_cq_push(arena, cq->shm, &e, false, NULL, NULL));
		}
		e = cqe_of(2, 6); /* a send completion frees no receive */
		e.wqe_index = 15;
		CHECK(sr_cq_push(arena, cq->shm, &e, false, NULL, NULL));
		sr_cq_clean_qp(ib(cq), 2, srq);
		CHECK_EQ(atomic_load(&srq->polled), 3 + 5 + 1); /* up to QP 2's last receive */
		CHECK_EQ(poll_all(cq, wc, 16, 16), 3);
		CHECK(wc[0].wr_id == 0x100000000ull && wc[1].wr_id == 0x100000002ull &&
		      wc[2].wr_id == 0x100000004ull);
		free(srq);
	}
	section("clean: SRQ WQEs given back");
}

/* A receive completion polled frees its slot in the QP's own RQ (found
 * by number in the arena's QP table), if it is of what was posted. */
static void test_rq_slot(void)
{
	struct sr_cq *cq = cq_new(16, 0, 0);
	uint32_t qpn = sr_qpn_make(77, 0x5); /* any number the table can hold */
	uint64_t off = arena_alloc(sizeof(struct sr_qp_shm));
	struct sr_qp_shm *qp = sr_arena_at(arena, off);
	struct ibv_wc wc[16];
	struct sr_cqe e;

	CHECK_CTX("rq slot");
	qp->qpn = qpn;
	qp->rq.flags = SR_WQ_FREED_BY_POLL;
	atomic_store(&qp->rq.head, 4);
	atomic_store(&sr_arena_qptab(arena)[sr_qpn_index(qpn) % SR_MAX_QPS].obj_off, off);
	for (uint32_t k = 0; k < 3; k++) {
		e = cqe_of(qpn, k);
		e.opcode = IBV_WC_RECV;
		e.wqe_index = k;
		CHECK(sr_cq_push(arena, cq->shm, &e, false, NULL, NULL));
	}
	CHECK_EQ(sr_poll_cq(ib(cq), 2, wc), 2);
	CHECK_EQ(atomic_load(&qp->rq.polled), 2);
	CHECK_EQ(sr_poll_cq(ib(cq), 2, wc), 1);
	CHECK_EQ(atomic_load(&qp->rq.polled), 3);
	/* beyond what was posted (an earlier life's): frees nothing */
	e = cqe_of(qpn, 9);
	e.opcode = IBV_WC_RECV;
	e.wqe_index = 7;
	CHECK(sr_cq_push(arena, cq->shm, &e, false, NULL, NULL));
	CHECK_EQ(sr_poll_cq(ib(cq), 2, wc), 1);
	CHECK_EQ(atomic_load(&qp->rq.polled), 3);
	atomic_store(&sr_arena_qptab(arena)[sr_qpn_index(qpn) % SR_MAX_QPS].obj_off, 0);
	section("polled receive frees its RQ slot");
}

/* ---- several producers, one consumer ---- */

#define NPROD 3
#define PER   40000 /* entries per producer */

#define NAME "test_cq"
#include "stress.h"

struct stress {
	struct sr_cq *cq;
	uint32_t p;
	uint32_t window;	 /* 0: no flow control (the ring overflows) */
	_Atomic uint32_t *taken; /* the consumer's count of this producer's */
	unsigned char *ok;	 /* [PER]: its push succeeded */
	_Atomic int *done;
};

static void *producer(void *arg)
{
	struct stress *st = arg;

	for (uint32_t k = 0; k < PER; k++) {
		if (st->window)
			while (k - atomic_load_explicit(st->taken, memory_order_acquire) >=
			       st->window) {
				if (atomic_load_explicit(&give_up, memory_order_relaxed))
					goto out;
				sched_yield();
			}
		st->ok[k] = push(st->cq, st->p + 1, k);
		if (!st->window && k % 64 == 0)
			sched_yield();
	}
out:
	atomic_fetch_add(st->done, 1);
	return NULL;
}

/* mode 0: windows that keep the ring from filling; 1: free running on a
 * small ring (overflows); 2: as 0, with QP 2's entries cleaned now and then */
static void stress(int mode)
{
	static struct stress st[NPROD];
	static unsigned char ok[NPROD][PER], seen[NPROD][PER];
	static _Atomic uint32_t taken[NPROD];
	static struct ibv_wc wc[32];
	uint32_t cnt = mode == 1 ? 16 : 256;
	struct sr_cq *cq = cq_new(cnt, 0, 0);
	pthread_t t[NPROD];
	_Atomic int done = 0;
	int64_t last[NPROD];
	unsigned stray = 0, order = 0, twice = 0, lost = 0, ghost = 0, failed = 0;
	unsigned long polls = 0, cleaned = 0;
	uint64_t last_at;

	CHECK_CTX("stress mode %d", mode);
	memset(ok, 0, sizeof(ok));
	memset(seen, 0, sizeof(seen));
	for (int p = 0; p < NPROD; p++) {
		atomic_store(&taken[p], 0);
		last[p] = -1;
		st[p] = (struct stress){cq,	   (uint32_t)p, mode == 1 ? 0 : (cnt - 1) / NPROD,
					&taken[p], ok[p],	&done};
		if (pthread_create(&t[p], NULL, producer, &st[p])) {
			perror("pthread_create");
			exit(2);
		}
	}
	/* free running: let the producers fill the ring before the first poll,
	 * so that the run does overflow however the threads are scheduled */
	while (mode == 1 && !atomic_load(&cq->shm->overflow) && atomic_load(&done) < NPROD)
		sched_yield();
	last_at = now_ms();
	for (;;) {
		int fin = atomic_load(&done) == NPROD; /* before the poll that may be the last */
		int n = sr_poll_cq(ib(cq), 1 + (int)(polls++ % 32), wc);

		for (int i = 0; i < n; i++) {
			uint32_t p = (uint32_t)(wc[i].wr_id >> 32) - 1, k = (uint32_t)wc[i].wr_id;

			if (p >= NPROD || k >= PER || !wc_is(&wc[i], p + 1, k)) {
				stray++;
				continue;
			}
			twice += seen[p][k]++ != 0;
			order += (int64_t)k <= last[p];
			last[p] = k;
			atomic_fetch_add_explicit(&taken[p], 1, memory_order_release);
		}
		if (mode == 2 && polls % 7 == 0) {
			/* the only consumer: what moves cons meanwhile is the clean */
			uint32_t c0 = atomic_load(&cq->shm->cons);

			sr_cq_clean_qp(ib(cq), 2, NULL);
			cleaned += atomic_load(&cq->shm->cons) - c0;
			atomic_fetch_add_explicit(&taken[1], atomic_load(&cq->shm->cons) - c0,
						  memory_order_release);
		}
		if (!n && fin)
			break;
		if (n) {
			last_at = now_ms();
		} else if (now_ms() - last_at > STALL_MS) {
			atomic_store(&give_up, 1);
			CHECK(!"no progress");
			last_at = now_ms(); /* the producers give up: fin next */
		} else {
			sched_yield();
		}
	}
	for (int p = 0; p < NPROD; p++)
		join(t[p]);
	for (int p = 0; p < NPROD; p++)
		for (uint32_t k = 0; k < PER; k++) {
			failed += !ok[p][k];
			if (mode == 2 && p == 1)
				continue; /* some were cleaned: counted below */
			lost += ok[p][k] && !seen[p][k];
			ghost += !ok[p][k] && seen[p][k];
		}
	CHECK_EQ(stray, 0);
	CHECK_EQ(twice, 0);
	CHECK_EQ(order, 0);
	CHECK_EQ(lost, 0);
	CHECK_EQ(ghost, 0);
	if (mode == 1) {
		/* every entry is polled once or was refused, and refusals raise
		 * overflow; the run must have filled the ring for this to mean
		 * something */
		CHECK(failed > 0);
		CHECK_EQ(atomic_load(&cq->shm->overflow), failed > 0);
	} else {
		CHECK_EQ(failed, 0);
		CHECK_EQ(atomic_load(&cq->shm->overflow), 0);
	}
	if (mode == 2) {
		unsigned seen2 = 0;

		for (uint32_t k = 0; k < PER; k++)
			seen2 += seen[1][k];
		CHECK(cleaned > 0);
		CHECK_EQ(seen2 + cleaned, PER); /* polled or cleaned, never both */
	}
	CHECK_EQ(atomic_load(&cq->shm->prod), atomic_load(&cq->shm->cons));
	printf("    mode %d: %u refused, %lu cleaned, %lu polls\n", mode, failed, cleaned, polls);
}

static void test_stress(void)
{
	stress(0);
	section("x3 producers, one consumer");
	stress(1);
	section("x3 producers, ring overflowing");
	stress(2);
	section("x3 producers, QP 2 cleaned meanwhile");
}

int main(void)
{
	arena_init();
	test_order();
	test_wrap();
	test_overflow();
	test_events();
	test_extended();
	test_dead_qps();
	test_clean();
	test_rq_slot();
	test_stress();
	while (ncqs_made)
		free(cqs_made[--ncqs_made]);
	return CHECK_SUMMARY(NAME);
}
