/*
 * Registration under concurrent writes (sr_mr_race): other threads keep
 * writing the pages a registration moves onto shared memory, and no write
 * may be lost.  ibv_reg_mr copies the pages covering a region into a memfd
 * and mremap()s the copy in place; ibv_dereg_mr copies them back to private
 * memory the same way.  A write to those pages between the copy and the
 * mremap went to the old pages and vanished (docs/architecture.md, "Memory
 * registration").  The bytes around a region on its first and last page
 * belong to someone else (a malloc neighbour), so the tests write there.
 *
 * Run through tests/verbs/run.sh like sr_control (one ctest per test).
 * SR_RACE_MS sets how long each stress test runs (default 1500 ms).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "sr_test.h"

enum {
	NBUF = 8,    /* buffers: 2 private mmap'd, 4 malloc'd, 2 shared */
	NWRITER = 2, /* threads incrementing counters on the edge pages */
	NREG = 2,    /* threads registering and deregistering the buffers */
	PAGES = 3,   /* pages per buffer */
	EDGE = 64,   /* bytes kept outside the region at each end */
};

enum { BUF_PRIVATE, BUF_HEAP, BUF_SHARED, BUF_KINDS };

struct edge_counters {
	volatile uint64_t c[NWRITER]; /* one per writer: plain, unshared stores */
};

struct buf {
	char *mem;			   /* what was allocated */
	char *base;			   /* start of the layout below */
	size_t len;			   /* EDGE + region + EDGE */
	int kind;			   /* BUF_* */
	struct edge_counters *head, *tail; /* on the first and last page */
};

struct race {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct buf b[NBUF];
	atomic_bool stop;
	uint64_t done[NWRITER][NBUF][2]; /* increments each writer made */
	unsigned long regs[NREG];
	int reg_errno[NREG];
};

static unsigned race_ms(void)
{
	const char *e = getenv("SR_RACE_MS");

	return e && *e ? (unsigned)atoi(e) : 1500;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

/* BUF_PRIVATE: mmap'd private anonymous pages; BUF_HEAP: malloc'd, spanning
 * PAGES or PAGES + 1 pages wherever malloc puts it; BUF_SHARED: MAP_SHARED
 * anonymous (shmem) pages. */
static void buf_init(struct buf *b, int kind)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);

	b->kind = kind;
	if (kind == BUF_HEAP) {
		b->len = PAGES * ps - 96; /* the tail counters 8-byte aligned */
		b->mem = malloc(b->len);
		REQUIRE(b->mem);
	} else {
		b->len = PAGES * ps;
		b->mem =
		    mmap(NULL, b->len, PROT_READ | PROT_WRITE,
			 (kind == BUF_SHARED ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
		REQUIRE(b->mem != MAP_FAILED);
	}
	b->base = b->mem;
	for (size_t i = EDGE; i < b->len - EDGE; i++)
		b->base[i] = (char)pattern(i);
	b->head = (struct edge_counters *)b->base;
	b->tail = (struct edge_counters *)(b->base + b->len - EDGE);
	memset((void *)b->head, 0, sizeof(*b->head));
	memset((void *)b->tail, 0, sizeof(*b->tail));
}

static void buf_fini(struct buf *b)
{
	if (b->kind == BUF_HEAP)
		free(b->mem);
	else
		munmap(b->mem, b->len);
}

static bool region_intact(const struct buf *b)
{
	for (size_t i = EDGE; i < b->len - EDGE; i++)
		if ((uint8_t)b->base[i] != pattern(i))
			return false;
	return true;
}

struct writer_arg {
	struct race *r;
	int id;
};

static void *writer(void *p)
{
	struct writer_arg *a = p;
	struct race *r = a->r;
	uint64_t n[NBUF][2];

	memset(n, 0, sizeof(n));
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		for (int i = 0; i < NBUF; i++) {
			for (int k = 0; k < 64; k++) {
				r->b[i].head->c[a->id]++;
				r->b[i].tail->c[a->id]++;
			}
			n[i][0] += 64;
			n[i][1] += 64;
		}
	}
	memcpy(r->done[a->id], n, sizeof(n));
	return NULL;
}

struct reg_arg {
	struct race *r;
	int id;
	uint64_t until;
};

static void *registrar(void *p)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct reg_arg *a = p;
	struct race *r = a->r;
	unsigned long n = 0;

	while (now_ms() < a->until) {
		for (int i = a->id; i < NBUF; i += NREG) {
			struct buf *b = &r->b[i];
			struct ibv_mr *mr, *sub = NULL;

			mr = ibv_reg_mr(r->pd, b->base + EDGE, b->len - 2 * EDGE, acc);
			if (!mr) {
				r->reg_errno[a->id] = errno;
				return NULL;
			}
			/* now and then a second, overlapping one: shared backings */
			if (n % 4 == 0)
				sub = ibv_reg_mr(r->pd, b->base + EDGE, 100, acc);
			if (ibv_dereg_mr(mr) || (sub && ibv_dereg_mr(sub))) {
				r->reg_errno[a->id] = errno ? errno : EIO;
				return NULL;
			}
			n++;
		}
	}
	r->regs[a->id] = n;
	return NULL;
}

/*
 * NWRITER threads increment their own counters on the first and last page
 * of NBUF buffers (outside the registered bytes) while NREG threads
 * register and deregister those buffers; every increment must be there at
 * the end, and the registered bytes unchanged.
 */
static void test_mr_race_edges(void)
{
	struct race *r = calloc(1, sizeof(*r));
	struct writer_arg wa[NWRITER];
	struct reg_arg ra[NREG];
	pthread_t wt[NWRITER], rt[NREG];
	uint64_t lost = 0, total = 0;
	unsigned long regs = 0;

	REQUIRE(r);
	r->ctx = open_soft0();
	REQUIRE(r->ctx);
	r->pd = ibv_alloc_pd(r->ctx);
	REQUIRE(r->pd);
	for (int i = 0; i < NBUF; i++)
		buf_init(&r->b[i], i % 4 == 3 ? BUF_HEAP : i % 4);
	for (int w = 0; w < NWRITER; w++) {
		wa[w] = (struct writer_arg){r, w};
		REQUIRE(pthread_create(&wt[w], NULL, writer, &wa[w]) == 0);
	}
	for (int g = 0; g < NREG; g++) {
		ra[g] = (struct reg_arg){r, g, now_ms() + race_ms()};
		REQUIRE(pthread_create(&rt[g], NULL, registrar, &ra[g]) == 0);
	}
	for (int g = 0; g < NREG; g++)
		pthread_join(rt[g], NULL);
	atomic_store(&r->stop, true);
	for (int w = 0; w < NWRITER; w++)
		pthread_join(wt[w], NULL);

	for (int g = 0; g < NREG; g++) {
		CHECK_EQ(r->reg_errno[g], 0);
		regs += r->regs[g];
	}
	for (int i = 0; i < NBUF; i++) {
		struct buf *b = &r->b[i];

		for (int w = 0; w < NWRITER; w++) {
			uint64_t h = b->head->c[w], t = b->tail->c[w];

			total += r->done[w][i][0] + r->done[w][i][1];
			lost += r->done[w][i][0] - h + r->done[w][i][1] - t;
			CHECK_EQ(h, r->done[w][i][0]);
			CHECK_EQ(t, r->done[w][i][1]);
		}
		CHECK(region_intact(b));
	}
	printf("  %lu registrations, %llu increments, %llu lost\n", regs, (unsigned long long)total,
	       (unsigned long long)lost);
	CHECK_GT(regs, 0);
	for (int i = 0; i < NBUF; i++)
		buf_fini(&r->b[i]);
	CHECK_RET(ibv_dealloc_pd(r->pd), 0);
	CHECK_RET(ibv_close_device(r->ctx), 0);
	free(r);
}

/* ------------------------------------------------ a buffer on the stack */

struct counter_arg {
	volatile uint64_t *ctr;
	atomic_bool stop;
	uint64_t done;
};

static void *count(void *p)
{
	struct counter_arg *a = p;
	uint64_t n = 0;

	while (!atomic_load_explicit(&a->stop, memory_order_relaxed)) {
		(*a->ctr)++;
		n++;
	}
	a->done = n;
	return NULL;
}

struct stack_arg {
	struct ibv_pd *pd;
	unsigned ms;
	unsigned long regs;
	uint64_t incs, lost;
	bool ok;
};

/* Registers a buffer on this thread's stack over and over while another
 * thread increments a counter just before it.  The first page of the region
 * also holds this thread's deeper frames (ibv_reg_mr's own): the thread that
 * registers writes the pages it is moving. */
static void __attribute__((noinline)) stack_rounds(struct stack_arg *a)
{
	char frame[3 * 4096] __attribute__((aligned(64)));
	struct counter_arg c = {.ctr = (volatile uint64_t *)frame};
	uint64_t until = now_ms() + a->ms;
	pthread_t t;

	memset(frame, 0x5c, sizeof(frame));
	*c.ctr = 0;
	a->ok = pthread_create(&t, NULL, count, &c) == 0;
	if (!a->ok)
		return;
	while (a->ok && now_ms() < until) {
		struct ibv_mr *mr = ibv_reg_mr(a->pd, frame + EDGE, sizeof(frame) - 2 * EDGE,
					       IBV_ACCESS_LOCAL_WRITE);

		a->ok = mr && !ibv_dereg_mr(mr);
		a->regs++;
	}
	atomic_store(&c.stop, true);
	pthread_join(t, NULL);
	a->incs = c.done;
	a->lost = c.done - *c.ctr;
	for (size_t i = EDGE; i < sizeof(frame); i++)
		a->ok = a->ok && frame[i] == 0x5c;
}

static void *stack_thread(void *p)
{
	stack_rounds(p);
	return NULL;
}

/* A stack buffer registered by the thread whose stack it is (a new thread's,
 * then the main thread's), with a neighbour written meanwhile. */
static void test_mr_race_stack(void)
{
	struct ibv_context *ctx = open_soft0();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct stack_arg a[2];
	pthread_t t;

	REQUIRE(pd);
	for (int i = 0; i < 2; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].pd = pd;
		a[i].ms = race_ms() / 4;
	}
	REQUIRE(pthread_create(&t, NULL, stack_thread, &a[0]) == 0);
	pthread_join(t, NULL);
	stack_rounds(&a[1]);
	for (int i = 0; i < 2; i++) {
		printf("  %s stack: %lu registrations, %llu increments, %llu lost\n",
		       i ? "main" : "thread", a[i].regs, (unsigned long long)a[i].incs,
		       (unsigned long long)a[i].lost);
		CHECK(a[i].ok);
		CHECK_GT(a[i].regs, 0);
		CHECK_EQ(a[i].lost, 0);
	}
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------ a system call's writes */

struct sys_arg {
	int rfd, wfd;
	uint64_t *dst; /* next to a region being registered */
	atomic_bool stop;
	uint64_t sent, got, efault, wrong;
};

static void *pipe_feeder(void *p)
{
	struct sys_arg *a = p;
	uint64_t n = 0;

	while (!atomic_load_explicit(&a->stop, memory_order_relaxed) &&
	       write(a->wfd, &n, sizeof(n)) == sizeof(n))
		n++;
	a->sent = n;
	close(a->wfd); /* the reader stops at the end of the pipe */
	return NULL;
}

static void *pipe_reader(void *p)
{
	struct sys_arg *a = p;

	for (uint64_t want = 0;; want++) {
		ssize_t got = read(a->rfd, a->dst, sizeof(*a->dst));

		while (got < 0 && errno == EFAULT) {
			a->efault++; /* the pipe keeps the bytes: try again */
			got = read(a->rfd, a->dst, sizeof(*a->dst));
		}
		if (got != sizeof(*a->dst))
			break;
		if (__atomic_load_n(a->dst, __ATOMIC_RELAXED) != want)
			a->wrong++;
		a->got++;
	}
	return NULL;
}

/*
 * Other threads keep a pipe busy, one read()ing into the bytes before a
 * region that is registered and deregistered meanwhile: the kernel's writes
 * into the page must not be lost either.  With a privileged userfaultfd they
 * wait for the move; with one for user mode only (SOFTRDMA_MR_PROTECT=user,
 * or no CAP_SYS_PTRACE) the read fails with EFAULT, the bytes left in the
 * pipe.
 */
static void test_mr_race_syscall(void)
{
	const char *mode = getenv("SOFTRDMA_MR_PROTECT");
	struct ibv_context *ctx = open_soft0();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	size_t len = 2 * (size_t)sysconf(_SC_PAGESIZE);
	char *buf = malloc(len);
	struct sys_arg a;
	uint64_t until = now_ms() + race_ms() / 3;
	unsigned long regs = 0;
	int pfd[2];
	pthread_t feeder, reader;
	bool ok = true;

	REQUIRE(pd && buf);
	REQUIRE(pipe(pfd) == 0);
	memset(&a, 0, sizeof(a));
	a.rfd = pfd[0];
	a.wfd = pfd[1];
	a.dst = (uint64_t *)buf;
	REQUIRE(pthread_create(&reader, NULL, pipe_reader, &a) == 0);
	REQUIRE(pthread_create(&feeder, NULL, pipe_feeder, &a) == 0);
	while (ok && now_ms() < until) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf + EDGE, len - EDGE, IBV_ACCESS_LOCAL_WRITE);

		ok = mr && !ibv_dereg_mr(mr);
		regs++;
	}
	atomic_store(&a.stop, true);
	pthread_join(feeder, NULL);
	pthread_join(reader, NULL);
	close(pfd[0]);
	printf("  %lu registrations, %llu reads, %llu EFAULT, %llu lost\n", regs,
	       (unsigned long long)a.got, (unsigned long long)a.efault,
	       (unsigned long long)a.wrong);
	CHECK(ok);
	CHECK_EQ(a.got, a.sent);
	CHECK_EQ(a.wrong, 0);
	if (!mode || strcmp(mode, "user"))
		CHECK_EQ(a.efault, 0);
	free(buf);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------ fork meanwhile */

struct fork_arg {
	struct ibv_pd *pd;
	char *buf;
	size_t len;
	atomic_bool stop;
	bool ok;
};

static void *fork_registrar(void *p)
{
	struct fork_arg *a = p;

	a->ok = true;
	while (a->ok && !atomic_load(&a->stop)) {
		struct ibv_mr *mr =
		    ibv_reg_mr(a->pd, a->buf + EDGE, a->len - 2 * EDGE, IBV_ACCESS_LOCAL_WRITE);

		a->ok = mr && !ibv_dereg_mr(mr);
	}
	return NULL;
}

/* fork() while another thread registers: the child gets the buffer and its
 * heap as private memory, whatever the registration was doing. */
static void test_mr_race_fork(void)
{
	struct ibv_context *ctx = open_soft0();
	struct fork_arg a = {.pd = ctx ? ibv_alloc_pd(ctx) : NULL};
	pthread_t t;
	int bad = 0;

	REQUIRE(a.pd);
	a.len = 3 * (size_t)sysconf(_SC_PAGESIZE);
	a.buf = malloc(a.len);
	REQUIRE(a.buf);
	memset(a.buf, 0x3e, a.len);
	REQUIRE(pthread_create(&t, NULL, fork_registrar, &a) == 0);
	for (int i = 0; i < 20; i++) {
		int status = -1;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			char *p = malloc(100);
			bool same = true;

			for (size_t k = 0; k < a.len; k++)
				same = same && a.buf[k] == 0x3e;
			memset(a.buf, 0x11, a.len); /* its own copy */
			free(p);
			_exit(same ? 0 : 1);
		}
		waitpid(pid, &status, 0);
		bad += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		usleep(1000);
	}
	atomic_store(&a.stop, true);
	pthread_join(t, NULL);
	CHECK(a.ok);
	CHECK_EQ(bad, 0);
	for (size_t k = 0; k < a.len; k++)
		if (a.buf[k] != 0x3e) {
			CHECK_EQ(a.buf[k], 0x3e);
			break;
		}
	free(a.buf);
	CHECK_RET(ibv_dealloc_pd(a.pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
}

/* clang-format off */
static const struct sr_test_case tests[] = {
	SR_TEST(mr_race_edges)
	SR_TEST(mr_race_stack)
	SR_TEST(mr_race_syscall)
	SR_TEST(mr_race_fork)
};
/* clang-format on */

int main(int argc, char **argv)
{
	return sr_test_main(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
