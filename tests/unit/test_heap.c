/*
 * Unit test of the daemon's arena and heap (src/daemon/heap.c) on a small
 * arena of its own, no daemon running: the arena's tables laid out in
 * order and the heap after them; size classes (powers of two from 256 B,
 * naturally aligned up to 64 KiB); chunks that never overlap, checked by a
 * tag written into each live chunk over a long random alloc/free run;
 * freed chunks reused, and handed out zeroed; exhaustion; and reclamation:
 * a chunk freed later is not reused while a reader's published epoch is
 * older than the one it was retired at (an own slot, an overflow slot, the
 * unslotted counter), and is once the reader leaves or publishes a newer
 * one; a reader whose process died inside is forgotten.  The readers are
 * hand-made slots and, in forked children, the library's own sections
 * (src/shm/epoch.c) on the shared arena.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "daemon/daemon.h"
#include "shm/epoch.h"

#define ARENA_SIZE (64ull << 20) /* the tables take about 22 MiB */

static unsigned long sec_total, sec_failed;

static void section(const char *name)
{
	printf("  %-32s %6lu checks, %lu failed\n", name, check_total - sec_total,
	       check_failed - sec_failed);
	sec_total = check_total;
	sec_failed = check_failed;
}

static struct sr_daemon d;

static struct sr_arena_hdr *hdr(void)
{
	return d.arena;
}

static void test_layout(void)
{
	struct sr_arena_hdr *h = hdr();
	const uint64_t end[] = {
	    h->keytab_off + (uint64_t)SR_MAX_KEYS * sizeof(struct sr_key_entry),
	    h->qptab_off + (uint64_t)SR_MAX_QPS * sizeof(struct sr_qpn_slot),
	    h->srqtab_off + (uint64_t)SR_MAX_SRQS * sizeof(struct sr_qpn_slot),
	    h->mcasttab_off + (uint64_t)SR_MAX_MCAST_GRP * sizeof(struct sr_mcast_group),
	    h->epochtab_off + (uint64_t)SR_MAX_EPOCH_SLOTS * sizeof(struct sr_epoch_slot),
	    h->udtxtab_off + (uint64_t)SR_UDTX_SLOTS * sizeof(struct sr_udtx_slot),
	    h->rxfwdtab_off + (uint64_t)SR_RXFWD_SLOTS * sizeof(struct sr_udtx_slot),
	    h->lifetab_off + (uint64_t)SR_MAX_LIVES * sizeof(struct sr_life_slot),
	};
	const uint64_t start[] = {h->keytab_off,   h->qptab_off,   h->srqtab_off,   h->mcasttab_off,
				  h->epochtab_off, h->udtxtab_off, h->rxfwdtab_off, h->lifetab_off};

	CHECK_CTX("layout");
	CHECK_EQ(h->magic, SR_ARENA_MAGIC);
	CHECK_EQ(h->version, sr_arena_layout_version());
	CHECK_EQ(h->size, ARENA_SIZE);
	CHECK(h->keytab_off >= sizeof(*h));
	CHECK_EQ(h->keytab_off % 4096, 0);
	CHECK_EQ(h->epochtab_off % SR_CACHELINE, 0);
	CHECK_EQ(h->lifetab_off % SR_CACHELINE, 0);
	for (unsigned i = 1; i < sizeof(start) / sizeof(start[0]); i++)
		CHECK(start[i] >= end[i - 1]); /* in order, none overlapping */
	CHECK(h->heap_off >= end[7]);
	CHECK_EQ(h->heap_off % 65536, 0);
	CHECK_EQ(h->heap_off + h->heap_size, ARENA_SIZE);
	CHECK_EQ(atomic_load(&h->epoch), 1);
	CHECK_EQ(sr_heap_used(), 0);
	/* the doorbell and the slot queues start empty (core/doorbell.h) */
	CHECK_EQ(atomic_load(&h->db_ring[5]) >> 32, 5);
	CHECK_EQ(atomic_load(&sr_arena_udtxtab(h)[3].seq) >> 32, 3);
	section("arena layout");
}

static void test_classes(void)
{
	static const struct {
		uint64_t ask, got;
	} cases[] = {
	    {1, 256},	     {255, 256},	 {256, 256},	     {257, 512},
	    {4096, 4096},    {4097, 8192},	 {65535, 65536},     {65536, 65536},
	    {65537, 131072}, {1000000, 1 << 20}, {3 << 20, 4 << 20},
	};
	uint64_t offs[sizeof(cases) / sizeof(cases[0])], got, used = 0;

	CHECK_CTX("classes");
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t align = cases[i].got < 65536 ? cases[i].got : 65536;

		CHECK_CTX("classes: %llu", (unsigned long long)cases[i].ask);
		got = 0;
		offs[i] = sr_heap_alloc(&d, cases[i].ask, &got);
		CHECK(offs[i] != 0);
		CHECK_EQ(got, cases[i].got);
		CHECK_EQ(offs[i] % align, 0);
		CHECK(offs[i] >= hdr()->heap_off);
		CHECK(offs[i] + got <= ARENA_SIZE);
		used += got;
		CHECK_EQ(sr_heap_used(), used);
	}
	CHECK_CTX("classes: exhaustion");
	CHECK_EQ(sr_heap_alloc(&d, ARENA_SIZE, &got), 0); /* more than is left */
	CHECK_EQ(sr_heap_alloc(&d, 1ull << 40, &got), 0); /* beyond the last class */
	CHECK_EQ(sr_heap_alloc(&d, 1ull << 62, NULL), 0);
	CHECK_EQ(sr_heap_used(), used);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		sr_heap_free(&d, offs[i], cases[i].ask);
	sr_heap_free(&d, 0, 4096); /* no chunk: nothing */
	CHECK_EQ(sr_heap_used(), 0);
	section("size classes, alignment");
}

static void test_reuse(void)
{
	uint64_t a, b, c, big, again, got;
	unsigned char *p;
	bool zero = true;

	CHECK_CTX("reuse");
	a = sr_heap_alloc(&d, 1000, &got);
	b = sr_heap_alloc(&d, 1000, &got);
	CHECK(a && b && a != b);
	memset((char *)d.arena + a, 0xa5, 1024);
	sr_heap_free(&d, a, 1000);
	c = sr_heap_alloc(&d, 600, &got); /* same class: the freed chunk */
	CHECK_EQ(c, a);
	p = (unsigned char *)d.arena + c;
	for (unsigned i = 0; i < 1024; i++)
		zero &= !p[i];
	CHECK(zero);			  /* handed out zeroed */
	c = sr_heap_alloc(&d, 300, &got); /* another class: not that chunk */
	CHECK(c != a && c != b);
	sr_heap_free(&d, c, 300);

	/* 64 KiB and more: the pages are punched out on free */
	big = sr_heap_alloc(&d, 200000, &got);
	CHECK_EQ(got, 262144);
	memset((char *)d.arena + big, 0x5a, got);
	sr_heap_free(&d, big, 200000);
	again = sr_heap_alloc(&d, 262144, &got);
	CHECK_EQ(again, big);
	p = (unsigned char *)d.arena + again;
	zero = true;
	for (uint64_t i = 0; i < got; i += 511)
		zero &= !p[i];
	CHECK(zero);
	sr_heap_free(&d, again, got);
	sr_heap_free(&d, a, 1000);
	sr_heap_free(&d, b, 1000);
	CHECK_EQ(sr_heap_used(), 0);
	section("reuse, zeroing");
}

/* A long random run of allocations and frees: every live chunk carries its
 * tag in its first and last words, which no other allocation may touch. */
#define LIVE 400

static void test_random(void)
{
	struct {
		uint64_t off, size, got;
	} live[LIVE] = {{0}};
	uint64_t seed = 0x9e3779b97f4a7c15ull, used = 0;
	unsigned bad_tag = 0, bad_range = 0, fails = 0;

	CHECK_CTX("random");
	for (unsigned step = 0; step < 40000; step++) {
		unsigned i;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		i = (unsigned)(seed >> 33) % LIVE;
		if (live[i].off) {
			uint64_t *w = (uint64_t *)((char *)d.arena + live[i].off);

			if (w[0] != live[i].off || w[live[i].size / 8 - 1] != ~live[i].off)
				bad_tag++;
			sr_heap_free(&d, live[i].off, live[i].size);
			used -= live[i].got;
			live[i].off = 0;
			continue;
		}
		/* mostly small objects, now and then a ring of up to 256 KiB */
		live[i].size = 8 * (2 + (seed >> 20) % ((seed & 15) ? 512 : 32768));
		live[i].off = sr_heap_alloc(&d, live[i].size, &live[i].got);
		if (!live[i].off) {
			fails++;
			continue;
		}
		used += live[i].got;
		if (live[i].off < hdr()->heap_off || live[i].off + live[i].got > ARENA_SIZE ||
		    live[i].got < live[i].size)
			bad_range++;
		{
			uint64_t *w = (uint64_t *)((char *)d.arena + live[i].off);

			w[0] = live[i].off;
			w[live[i].size / 8 - 1] = ~live[i].off;
		}
	}
	CHECK_EQ(bad_tag, 0);
	CHECK_EQ(bad_range, 0);
	CHECK_EQ(fails, 0);
	CHECK_EQ(sr_heap_used(), used);
	/* and pairwise: no two live chunks share a byte */
	for (unsigned i = 0; i < LIVE; i++)
		for (unsigned j = i + 1; j < LIVE; j++)
			if (live[i].off && live[j].off && live[i].off < live[j].off + live[j].got &&
			    live[j].off < live[i].off + live[i].got)
				bad_range++;
	CHECK_EQ(bad_range, 0);
	for (unsigned i = 0; i < LIVE; i++)
		if (live[i].off)
			sr_heap_free(&d, live[i].off, live[i].size);
	CHECK_EQ(sr_heap_used(), 0);
	section("random run, no overlap");
}

/* ---- reclamation ---- */

static struct sr_epoch_slot *slot(unsigned i)
{
	return &sr_arena_epochtab(d.arena)[i];
}

static void reader(unsigned i, uint32_t pid, uint64_t epoch)
{
	atomic_store(&slot(i)->pid, pid);
	atomic_store(&slot(i)->epoch, epoch);
}

/* Retires a fresh chunk of `size`; returns its offset and the epoch it was
 * retired at. */
static uint64_t retire(uint64_t size, uint64_t *at)
{
	uint64_t off = sr_heap_alloc(&d, size, NULL);

	sr_heap_free_later(&d, off, size);
	*at = atomic_load(&hdr()->epoch);
	return off;
}

/* Whether the next allocation of the class gets `off` back (the chunk is
 * then put back where it was, on top of its free list). */
static bool reused(uint64_t off, uint64_t size)
{
	uint64_t o = sr_heap_alloc(&d, size, NULL);

	sr_heap_free(&d, o, size);
	return o == off;
}

static void test_free_later(void)
{
	uint32_t me = (uint32_t)getpid();
	uint64_t off, at, e0, bytes;

	CHECK_CTX("free_later: no reader");
	CHECK_EQ(sr_heap_min_reader(&d), UINT64_MAX);
	e0 = atomic_load(&hdr()->epoch);
	off = retire(2048, &at);
	CHECK_EQ(at, e0 + 1); /* each retirement advances the epoch */
	CHECK_EQ(sr_heap_used(), 0);
	CHECK_EQ(sr_heap_deferred(&bytes), 1);
	CHECK_EQ(bytes, 2048);
	CHECK(!reused(off, 2048)); /* not before a reap */
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 0);
	CHECK(reused(off, 2048));

	/* a reader inside since before the retirement pins the chunk */
	CHECK_CTX("free_later: older reader");
	reader(10, me, atomic_load(&hdr()->epoch));
	off = retire(2048, &at);
	CHECK_EQ(sr_heap_min_reader(&d), at - 1);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 1);
	CHECK(!reused(off, 2048));
	/* it leaves: reaped */
	atomic_store(&slot(10)->epoch, 0);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 0);
	CHECK(reused(off, 2048));
	reader(10, 0, 0);

	/* one that entered at the retirement epoch (it found the table slot
	 * cleared) does not pin it; one epoch older does */
	CHECK_CTX("free_later: boundary");
	off = retire(4096, &at);
	reader(11, me, at);
	CHECK_EQ(sr_heap_min_reader(&d), at);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 0);
	CHECK(reused(off, 4096));
	/* of several readers the oldest counts; publishing anew moves it on */
	off = retire(4096, &at);
	reader(11, me, at);
	reader(12, me, at - 1);
	CHECK_EQ(sr_heap_min_reader(&d), at - 1);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 1);
	CHECK(!reused(off, 4096));
	reader(12, me, at);
	CHECK_EQ(sr_heap_min_reader(&d), at);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 0);
	CHECK(reused(off, 4096));
	reader(11, 0, 0);
	reader(12, 0, 0);

	/* several chunks retired at successive epochs: a reader between them
	 * lets the older go and keeps the newer */
	CHECK_CTX("free_later: partial");
	{
		uint64_t o1, a1, o2, a2;

		o1 = retire(8192, &a1);
		reader(13, me, a1);
		o2 = retire(8192, &a2);
		sr_heap_reap(&d, false);
		CHECK_EQ(sr_heap_deferred(&bytes), 1);
		CHECK(reused(o1, 8192));
		CHECK(!reused(o2, 8192));
		atomic_store(&slot(13)->epoch, 0);
		sr_heap_reap(&d, false);
		CHECK(reused(o2, 8192));
		reader(13, 0, 0);
	}

	/* a reader in an overflow slot (the last ones) counts the same */
	CHECK_CTX("free_later: overflow slot");
	reader(SR_MAX_EPOCH_SLOTS - 1, me, atomic_load(&hdr()->epoch));
	off = retire(2048, &at);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 1);
	CHECK(!reused(off, 2048));
	atomic_store(&slot(SR_MAX_EPOCH_SLOTS - 1)->epoch, 0);
	sr_heap_reap(&d, false);
	CHECK(reused(off, 2048));
	reader(SR_MAX_EPOCH_SLOTS - 1, 0, 0);

	/* a reader without a slot pins every retired chunk while counted */
	CHECK_CTX("free_later: unslotted");
	atomic_store(&hdr()->epoch_unslotted, 1);
	CHECK_EQ(sr_heap_min_reader(&d), 0);
	off = retire(2048, &at);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 1);
	CHECK(!reused(off, 2048));
	atomic_store(&hdr()->epoch_unslotted, 0);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 0);
	CHECK(reused(off, 2048));

	/* teardown reaps all, readers or not */
	CHECK_CTX("free_later: reap all");
	reader(14, me, 1);
	off = retire(2048, &at);
	sr_heap_reap(&d, true);
	CHECK_EQ(sr_heap_deferred(NULL), 0);
	CHECK(reused(off, 2048));
	reader(14, 0, 0);
	CHECK_EQ(sr_heap_used(), 0);
	section("free_later, epochs, slots");
}

/* A process that is gone: its slots do not pin anything. */
static void test_dead_reader(void)
{
	pid_t dead = fork();
	uint64_t off, at;

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	CHECK_CTX("dead reader");
	reader(20, (uint32_t)dead, 1);
	reader(21, (uint32_t)dead, 1);
	off = retire(2048, &at);
	CHECK_EQ(sr_heap_min_reader(&d), UINT64_MAX);
	CHECK_EQ(atomic_load(&slot(20)->pid), 0); /* forgotten */
	CHECK_EQ(atomic_load(&slot(20)->epoch), 0);
	sr_heap_reap(&d, false);
	CHECK(reused(off, 2048));
	/* the sweep frees a dead process's slots, not a live one's */
	reader(22, (uint32_t)dead, 0);
	reader(23, (uint32_t)getpid(), 0);
	sr_heap_sweep_slots(&d);
	CHECK_EQ(atomic_load(&slot(22)->pid), 0);
	CHECK_EQ(atomic_load(&slot(23)->pid), (uint32_t)getpid());
	reader(23, 0, 0);
	section("dead readers forgotten");
}

/* The library's side in another process (shm/epoch.c) on the shared
 * arena: a child inside a section pins what is retired meanwhile; it is
 * reaped after the child leaves, or after it is killed inside.  own: the
 * child's own slot, or (SOFTRDMA_EPOCH_OWN_SLOTS=0) its process's overflow
 * slot. */
static void child_section(bool own, bool leave)
{
	int in[2], out[2];
	uint64_t off, at;
	pid_t pid;
	char c = 0;

	if (pipe(in) || pipe(out)) {
		perror("pipe");
		exit(2);
	}
	pid = fork();
	if (pid == 0) {
		if (!own)
			setenv("SOFTRDMA_EPOCH_OWN_SLOTS", "0", 1);
		sr_epoch_enter(d.arena);
		if (write(out[1], &c, 1) != 1 || read(in[0], &c, 1) != 1)
			_exit(3);
		sr_epoch_exit();
		if (write(out[1], &c, 1) != 1)
			_exit(3);
		_exit(0);
	}
	CHECK_CTX("library reader (%s slot, %s)", own ? "own" : "overflow",
		  leave ? "leaves" : "killed");
	CHECK(read(out[0], &c, 1) == 1); /* the child is inside */
	{
		unsigned found = 0, where = 0;

		for (unsigned i = 0; i < SR_MAX_EPOCH_SLOTS; i++)
			if (atomic_load(&slot(i)->pid) == (uint32_t)pid) {
				found++;
				where = i;
			}
		CHECK_EQ(found, 1);
		if (own)
			CHECK(where < SR_MAX_EPOCH_SLOTS - SR_EPOCH_OVERFLOW_SLOTS);
		else
			CHECK(where >= SR_MAX_EPOCH_SLOTS - SR_EPOCH_OVERFLOW_SLOTS);
	}
	off = retire(2048, &at);
	CHECK_EQ(sr_heap_min_reader(&d), at - 1);
	sr_heap_reap(&d, false);
	CHECK_EQ(sr_heap_deferred(NULL), 1);
	CHECK(!reused(off, 2048));
	if (leave) {
		CHECK(write(in[1], &c, 1) == 1);
		CHECK(read(out[0], &c, 1) == 1); /* it left */
		sr_heap_reap(&d, false);
		CHECK_EQ(sr_heap_deferred(NULL), 0);
		CHECK(reused(off, 2048));
		waitpid(pid, NULL, 0);
	} else {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		sr_heap_reap(&d, false);
		CHECK_EQ(sr_heap_deferred(NULL), 0);
		CHECK(reused(off, 2048));
	}
	sr_heap_sweep_slots(&d); /* gives back the exited child's slot */
	for (int i = 0; i < 2; i++) {
		close(in[i]);
		close(out[i]);
	}
}

static void test_library_readers(void)
{
	child_section(true, true);
	child_section(true, false);
	child_section(false, true);
	child_section(false, false);
	for (unsigned i = 0; i < SR_MAX_EPOCH_SLOTS; i++)
		if (atomic_load(&slot(i)->pid))
			CHECK_EQ(atomic_load(&slot(i)->pid), 0);
	section("library readers (epoch.c)");
}

int main(void)
{
	int ret = sr_heap_init(&d, ARENA_SIZE);

	if (ret) {
		fprintf(stderr, "sr_heap_init: %s\n", strerror(-ret));
		return 2;
	}
	test_layout();
	test_classes();
	test_reuse();
	test_random();
	test_free_later();
	test_dead_reader();
	test_library_readers();
	sr_heap_fini(&d);
	return CHECK_SUMMARY("test_heap");
}
