/*
 * Unit test of the memory-key checks (src/shm/mrmap.c, sr_key_resolve and
 * its slow path) on a key table in plain memory, every region this
 * process's own (so no daemon maps anything): a table of cases, each run
 * cold and then from the per-thread cache, for key index, tag and key byte,
 * bounds (the ends, zero length, overflowing sums), access rights, the PD,
 * and memory windows (remote only, bound only, type 2 to its QP alone,
 * inside the MR it is bound to, the MR a live one); entries rewritten
 * (deregistered, registered again under a new tag, a window rebound, the
 * MR shrunk by a re-registration) seen at once through the cache; and a
 * reader against a writer rewriting one entry under its seqlock, which
 * must never see a mixture of the two versions.  IBTA 10.6.3 (MR checks),
 * 10.6.7 (windows), C10-72 (a type-2 window serves only its QP).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/idalloc.h"
#include "shm/mrmap.h"
#include "shm/devctx.h"

static unsigned long sec_total, sec_failed;

static void section(const char *name)
{
	printf("  %-30s %6lu checks, %lu failed\n", name, check_total - sec_total,
	       check_failed - sec_failed);
	sec_total = check_total;
	sec_failed = check_failed;
}

#define ARENA_SIZE (32ull << 20) /* the key table: 18 MiB */

static void *arena;
static struct sr_devctx *ctx;
static char buf[8192] __attribute__((aligned(64)));

static void setup(void)
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
	h->keytab_off = 64 << 10;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		exit(2);
	ctx->arena = arena;
	ctx->arena_size = ARENA_SIZE;
}

/* Writes an entry as the daemon does (under its seqlock). */
static void put(const struct sr_key_entry *e)
{
	sr_key_store(arena, sr_key_index(e->key), e);
}

static struct sr_key_entry mr(uint32_t key, uint32_t pd, uint32_t access, uint64_t iova,
			      uint64_t length, void *addr)
{
	static uint64_t reg;

	return (struct sr_key_entry){.key = key,
				     .kind = SR_KEY_MR,
				     .pd = pd,
				     .access = access,
				     .owner_pid = (uint32_t)getpid(),
				     .iova = iova,
				     .length = length,
				     .addr = (uintptr_t)addr,
				     .reg_seq = ++reg};
}

static struct sr_key_entry mw(uint32_t key, uint32_t kind, uint32_t state, uint32_t parent,
			      uint32_t qpn, uint32_t pd, uint32_t access, uint64_t iova,
			      uint64_t length)
{
	return (struct sr_key_entry){.key = key,
				     .kind = kind,
				     .pd = pd,
				     .access = access,
				     .owner_pid = (uint32_t)getpid(),
				     .iova = iova,
				     .length = length,
				     .parent_key = parent,
				     .mw_qpn = qpn,
				     .state = state};
}

#define LW  IBV_ACCESS_LOCAL_WRITE
#define RR  IBV_ACCESS_REMOTE_READ
#define RW  IBV_ACCESS_REMOTE_WRITE
#define RA  IBV_ACCESS_REMOTE_ATOMIC
#define QPN 0x1234

static uint32_t kA, kB, kC, kD, kE, kF, kG, kH, kI;

static void table(void)
{
	kA = sr_key_make(5, 0x1111);
	kB = sr_key_make(6, 0x2222);
	kC = sr_key_make(7, 0x3333);
	kD = sr_key_make(8, 0x4444);
	kE = sr_key_make(9, 0x5555);
	kF = sr_key_make(10, 0x6666);
	kG = sr_key_make(11, 0x7777);
	kH = sr_key_make(12, 0x8888);
	kI = sr_key_make(13, 0x9999);
	/* A: 4 KiB at iova 0x10000, PD 1; B: 100 B local read only, PD 2 */
	put(&(struct sr_key_entry){0});
	{
		struct sr_key_entry a = mr(kA, 1, LW | RR | RW, 0x10000, 4096, buf);
		struct sr_key_entry b = mr(kB, 2, 0, 0x20000, 100, buf + 4096);

		put(&a);
		put(&b);
	}
	/* windows on A: C type 1 (read), D type 2 bound to QPN (write), E
	 * type 2 never bound, F invalidated, G reaching past A's end, H
	 * bound to a key that is not A's (A's index, another tag), I bound
	 * to a window */
	{
		struct sr_key_entry w[] = {
		    mw(kC, SR_KEY_MW1, 1, kA, 0, 1, RR, 0x10100, 256),
		    mw(kD, SR_KEY_MW2, 1, kA, QPN, 1, RW, 0x10200, 512),
		    mw(kE, SR_KEY_MW2, 0, 0, 0, 1, RR | RW, 0, 0),
		    mw(kF, SR_KEY_MW2, 2, kA, QPN, 1, RR, 0x10000, 64),
		    mw(kG, SR_KEY_MW1, 1, kA, 0, 1, RR, 0x10f00, 512),
		    mw(kH, SR_KEY_MW1, 1, sr_key_make(5, 0x1112), 0, 1, RR, 0x10000, 64),
		    mw(kI, SR_KEY_MW1, 1, kC, 0, 1, RR, 0x10100, 16),
		};

		for (unsigned i = 0; i < sizeof(w) / sizeof(w[0]); i++)
			put(&w[i]);
	}
}

struct kcase {
	const char *what;
	uint32_t *key;
	uint32_t key_xor; /* applied to the key: another tag or key byte */
	uint64_t va, len;
	uint32_t need, pd, qpn;
	bool remote;
	enum sr_key_result want;
	long at; /* SR_KEY_OK: the byte of buf it resolves to */
};

static const struct kcase cases[] = {
    {"mr: all of it", &kA, 0, 0x10000, 4096, 0, 1, QPN, false, SR_KEY_OK, 0},
    {"mr: inside, local write", &kA, 0, 0x10010, 16, LW, 1, QPN, false, SR_KEY_OK, 16},
    {"mr: remote read+write", &kA, 0, 0x10ff0, 16, RR | RW, 1, QPN, true, SR_KEY_OK, 4080},
    {"mr: zero length at the end", &kA, 0, 0x11000, 0, 0, 1, QPN, false, SR_KEY_OK, 4096},
    {"mr: one byte past the end", &kA, 0, 0x10001, 4096, 0, 1, QPN, false, SR_KEY_BOUNDS, 0},
    {"mr: last byte", &kA, 0, 0x10fff, 1, 0, 1, QPN, false, SR_KEY_OK, 4095},
    {"mr: at the end", &kA, 0, 0x11000, 1, 0, 1, QPN, false, SR_KEY_BOUNDS, 0},
    {"mr: below", &kA, 0, 0xffff, 2, 0, 1, QPN, false, SR_KEY_BOUNDS, 0},
    {"mr: length overflows", &kA, 0, 0x10000, UINT64_MAX, 0, 1, QPN, false, SR_KEY_BOUNDS, 0},
    {"mr: va + len wraps", &kA, 0, UINT64_MAX, 2, 0, 1, QPN, false, SR_KEY_BOUNDS, 0},
    {"mr: len wraps va back in", &kA, 0, 0x10010, UINT64_MAX - 8, 0, 1, QPN, false, SR_KEY_BOUNDS,
     0},
    {"mr: other PD", &kA, 0, 0x10000, 16, 0, 2, QPN, false, SR_KEY_PD, 0},
    {"mr: atomic not granted", &kA, 0, 0x10000, 8, RA, 1, QPN, true, SR_KEY_ACCESS, 0},
    {"mr: PD before access", &kA, 0, 0x10000, 8, RA, 2, QPN, true, SR_KEY_PD, 0},
    {"mr: access before bounds", &kA, 0, 0x20000, 8, RA, 1, QPN, true, SR_KEY_ACCESS, 0},
    {"mr: another tag", &kA, 1u << 8, 0x10000, 16, 0, 1, QPN, false, SR_KEY_INVALID, 0},
    {"mr: another key byte", &kA, 1, 0x10000, 16, 0, 1, QPN, false, SR_KEY_INVALID, 0},
    {"mr: another index", &kA, 1u << 20, 0x10000, 16, 0, 1, QPN, false, SR_KEY_INVALID, 0},
    {"mr: local read only", &kB, 0, 0x20000, 100, 0, 2, QPN, false, SR_KEY_OK, 4096},
    {"mr: no local write", &kB, 0, 0x20000, 1, LW, 2, QPN, false, SR_KEY_ACCESS, 0},
    {"mr: no remote read", &kB, 0, 0x20000, 1, RR, 2, QPN, true, SR_KEY_ACCESS, 0},
    {"mw1: remote read", &kC, 0, 0x10100, 256, RR, 1, QPN, true, SR_KEY_OK, 0x100},
    {"mw1: any QP", &kC, 0, 0x10180, 8, RR, 1, QPN + 1, true, SR_KEY_OK, 0x180},
    {"mw1: not as an lkey", &kC, 0, 0x10100, 8, 0, 1, QPN, false, SR_KEY_INVALID, 0},
    {"mw1: no write", &kC, 0, 0x10100, 8, RW, 1, QPN, true, SR_KEY_ACCESS, 0},
    {"mw1: past its end, in the MR", &kC, 0, 0x101ff, 2, RR, 1, QPN, true, SR_KEY_BOUNDS, 0},
    {"mw1: before it, in the MR", &kC, 0, 0x100ff, 1, RR, 1, QPN, true, SR_KEY_BOUNDS, 0},
    {"mw1: other PD", &kC, 0, 0x10100, 8, RR, 2, QPN, true, SR_KEY_PD, 0},
    {"mw2: its QP", &kD, 0, 0x10200, 512, RW, 1, QPN, true, SR_KEY_OK, 0x200},
    {"mw2: another QP", &kD, 0, 0x10200, 8, RW, 1, QPN + 1, true, SR_KEY_PD, 0},
    {"mw2: QP before PD", &kD, 0, 0x10200, 8, RW, 2, QPN + 1, true, SR_KEY_PD, 0},
    {"mw2: another key byte", &kD, 0x80, 0x10200, 8, RW, 1, QPN, true, SR_KEY_INVALID, 0},
    {"mw2: never bound", &kE, 0, 0, 0, 0, 1, QPN, true, SR_KEY_INVALID, 0},
    {"mw2: invalidated", &kF, 0, 0x10000, 8, RR, 1, QPN, true, SR_KEY_INVALID, 0},
    {"mw: past its MR", &kG, 0, 0x10f00, 8, RR, 1, QPN, true, SR_KEY_BOUNDS, 0},
    {"mw: bound to a stale key", &kH, 0, 0x10000, 8, RR, 1, QPN, true, SR_KEY_INVALID, 0},
    {"mw: bound to a window", &kI, 0, 0x10100, 8, RR, 1, QPN, true, SR_KEY_INVALID, 0},
    {"free entry", &kE, 1u << 30, 0, 0, 0, 1, QPN, false, SR_KEY_INVALID, 0},
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void run_case(const struct kcase *c, const char *pass)
{
	void *p = NULL;
	uint32_t key = *c->key ^ c->key_xor;
	enum sr_key_result r;

	CHECK_CTX("%s (%s)", c->what, pass);
	r = sr_key_resolve(ctx, arena, key, c->va, c->len, c->need, c->pd, c->qpn, c->remote, &p);
	CHECK_EQ(r, c->want);
	if (c->want == SR_KEY_OK)
		CHECK_EQ((char *)p - buf, c->at);
}

static void test_table(void)
{
	CHECK_CTX("keys");
	CHECK(sr_key_make(5, 0x1112) != kA); /* H's parent is not A */
	CHECK(sr_key_index(sr_key_make(5, 0x1112)) == 5);
	for (unsigned i = 0; i < NCASES; i++) {
		run_case(&cases[i], "cold");
		run_case(&cases[i], "cached");
	}
	/* each case after every other, so that each sees the cache as any
	 * other left it */
	for (unsigned i = 0; i < NCASES; i++)
		for (unsigned j = 0; j < NCASES; j++) {
			run_case(&cases[j], "after another");
			run_case(&cases[i], "after another");
		}
	section("table of cases");
}

/* Changes to the table are seen at once, cached or not. */
static void test_rewrite(void)
{
	void *p;
	struct sr_key_entry e;
	uint32_t kA2 = sr_key_make(5, 0xabcd);

	CHECK_CTX("rewrite: deregister");
	CHECK_EQ(sr_key_resolve(ctx, arena, kA, 0x10000, 8, 0, 1, QPN, false, &p), SR_KEY_OK);
	put(&(struct sr_key_entry){.key = kA}); /* freed: kind FREE */
	CHECK_EQ(sr_key_resolve(ctx, arena, kA, 0x10000, 8, 0, 1, QPN, false, &p), SR_KEY_INVALID);
	CHECK_EQ(sr_key_resolve(ctx, arena, kC, 0x10100, 8, RR, 1, QPN, true, &p),
		 SR_KEY_INVALID); /* its windows with it */
	CHECK(!sr_key_lookup(arena, kA, &e));

	CHECK_CTX("rewrite: the index again, another tag");
	e = mr(kA2, 3, LW, 0x50000, 64, buf + 128);
	put(&e);
	CHECK_EQ(sr_key_resolve(ctx, arena, kA, 0x10000, 8, 0, 1, QPN, false, &p), SR_KEY_INVALID);
	p = NULL;
	CHECK_EQ(sr_key_resolve(ctx, arena, kA2, 0x50008, 8, LW, 3, QPN, false, &p), SR_KEY_OK);
	CHECK(p == buf + 136);
	CHECK(sr_key_lookup(arena, kA2, &e) && e.pd == 3);

	CHECK_CTX("rewrite: the window rebound");
	e = mr(kA, 1, LW | RR | RW, 0x10000, 4096, buf); /* A back, for its windows */
	put(&e);
	CHECK_EQ(sr_key_resolve(ctx, arena, kD, 0x10200, 8, RW, 1, QPN, true, &p), SR_KEY_OK);
	e = mw(kD, SR_KEY_MW2, 1, kA, QPN + 7, 1, RW, 0x10200, 512);
	put(&e);
	CHECK_EQ(sr_key_resolve(ctx, arena, kD, 0x10200, 8, RW, 1, QPN, true, &p), SR_KEY_PD);
	CHECK_EQ(sr_key_resolve(ctx, arena, kD, 0x10200, 8, RW, 1, QPN + 7, true, &p), SR_KEY_OK);

	CHECK_CTX("rewrite: the MR shrunk under its window");
	CHECK_EQ(sr_key_resolve(ctx, arena, kC, 0x10100, 8, RR, 1, QPN, true, &p), SR_KEY_OK);
	e = mr(kA, 1, LW | RR | RW, 0x10000, 256, buf); /* ibv_rereg_mr keeps the key */
	put(&e);
	CHECK_EQ(sr_key_resolve(ctx, arena, kC, 0x10100, 8, RR, 1, QPN, true, &p), SR_KEY_BOUNDS);
	CHECK_EQ(sr_key_resolve(ctx, arena, kA, 0x10100, 8, 0, 1, QPN, false, &p), SR_KEY_BOUNDS);
	CHECK_EQ(sr_key_resolve(ctx, arena, kA, 0x100f8, 8, 0, 1, QPN, false, &p), SR_KEY_OK);
	section("entries rewritten");
}

/* ---- a writer rewriting an entry under its seqlock, a reader ---- */

static uint32_t kS;
static _Atomic int reader_done;

/* Two versions of one key: X (PD 1, iova 0x30000, 1 KiB at buf) and Y
 * (PD 2, iova 0x40000, 2 KiB at buf + 1024), in turn until the reader has
 * had enough. */
static void *writer(void *arg)
{
	struct sr_key_entry x = mr(kS, 1, LW, 0x30000, 1024, buf);
	struct sr_key_entry y = mr(kS, 2, LW, 0x40000, 2048, buf + 1024);

	for (unsigned i = 0; !atomic_load_explicit(&reader_done, memory_order_relaxed); i++)
		put(i % 2 ? &x : &y);
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_seqlock(void)
{
	pthread_t t;
	unsigned torn = 0, ok_x = 0, ok_y = 0, rounds = 0;
	uint64_t end = now_ms() + 2000;

	CHECK_CTX("seqlock");
	kS = sr_key_make(20, 0x4242);
	{
		struct sr_key_entry x = mr(kS, 1, LW, 0x30000, 1024, buf);

		put(&x);
	}
	pthread_create(&t, NULL, writer, NULL);
	/* until both versions were read often, or 2 s */
	while ((ok_x < 1000 || ok_y < 1000 || rounds < 20000) && now_ms() < end) {
		void *p = NULL;
		enum sr_key_result r;

		rounds++;
		/* X's PD with X's range: OK at X's address, or PD (it reads Y) */
		r = sr_key_resolve(ctx, arena, kS, 0x30010, 16, LW, 1, 0, false, &p);
		if (r == SR_KEY_OK)
			ok_x++, torn += p != buf + 16;
		else
			torn += r != SR_KEY_PD;
		/* Y's PD with Y's range */
		r = sr_key_resolve(ctx, arena, kS, 0x40010, 16, LW, 2, 0, false, &p);
		if (r == SR_KEY_OK)
			ok_y++, torn += p != buf + 1024 + 16;
		else
			torn += r != SR_KEY_PD;
		/* mixtures: OK only from a torn copy */
		torn +=
		    sr_key_resolve(ctx, arena, kS, 0x40010, 16, LW, 1, 0, false, &p) == SR_KEY_OK;
		torn +=
		    sr_key_resolve(ctx, arena, kS, 0x30010, 16, LW, 2, 0, false, &p) == SR_KEY_OK;
		/* Y's length with X's base: beyond X's 1 KiB */
		torn += sr_key_resolve(ctx, arena, kS, 0x30000 + 1500, 16, LW, 1, 0, false, &p) ==
			SR_KEY_OK;
	}
	atomic_store(&reader_done, 1);
	pthread_join(t, NULL);
	CHECK_EQ(torn, 0);
	CHECK(ok_x > 0 && ok_y > 0); /* it did read while the writer wrote */
	printf("    %u rounds: X %u, Y %u\n", rounds, ok_x, ok_y);
	section("seqlock: reader vs writer");
}

int main(void)
{
	setup();
	table();
	test_table();
	test_rewrite();
	test_seqlock();
	return CHECK_SUMMARY("test_keys");
}
