/*
 * Harness internals (see harness.h): shared check counters, the per-thread
 * note, seeded randomness and data patterns, helper processes, socket I/O.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "runner.h"

#define SR_MAX_PRINTED_FAILURES 40

static struct sr_counters sr_local_counters;
struct sr_counters *sr_counters = &sr_local_counters;
const char *sr_proc_name = "test";
void (*sr_on_first_failure)(void);
static uint64_t sr_the_seed;
static _Atomic unsigned long sr_failed_in_process;
static _Thread_local char sr_note_buf[256];

void sr_set_seed(uint64_t s)
{
	sr_the_seed = s;
}

uint64_t sr_seed(void)
{
	return sr_the_seed;
}

void sr__pass(void)
{
	atomic_fetch_add_explicit(&sr_counters->passed, 1, memory_order_relaxed);
}

void sr__fail(const char *file, int line, const char *fmt, ...)
{
	unsigned long n = atomic_fetch_add(&sr_failed_in_process, 1);
	char msg[768];
	va_list ap;

	bool first = atomic_fetch_add(&sr_counters->failed, 1) == 0;

	if (n >= SR_MAX_PRINTED_FAILURES) {
		if (n == SR_MAX_PRINTED_FAILURES)
			fprintf(stderr, "[%s %d] further failures not printed\n", sr_proc_name,
				(int)getpid());
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[%s %d] %s:%d: FAIL%s%s%s: %s\n", sr_proc_name, (int)getpid(), file, line,
		sr_note_buf[0] ? " [" : "", sr_note_buf, sr_note_buf[0] ? "]" : "", msg);
	if (first && sr_on_first_failure)
		sr_on_first_failure();
}

void sr__fatal(void)
{
	fflush(stdout);
	fflush(stderr);
	_exit(3);
}

void sr_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sr_note_buf, sizeof(sr_note_buf), fmt, ap);
	va_end(ap);
}

unsigned long sr_failed_total(void)
{
	return atomic_load(&sr_counters->failed);
}

unsigned long sr_failed_here(void)
{
	return atomic_load(&sr_failed_in_process);
}

void sr__check_mem(const char *file, int line, const char *what, const void *got, const void *want,
		   size_t len)
{
	const unsigned char *g = got, *w = want;

	if (!memcmp(g, w, len)) {
		sr__pass();
		return;
	}
	for (size_t i = 0; i < len; i++) {
		if (g[i] != w[i]) {
			sr__fail(file, line,
				 "%s: %zu bytes differ from offset %zu: got 0x%02x, want 0x%02x",
				 what, len, i, g[i], w[i]);
			return;
		}
	}
}

/* ---- time and randomness ---- */

uint64_t sr_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + ts.tv_nsec / 1000;
}

void sr_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void rng_init(struct rng *r, uint64_t stream)
{
	r->s = splitmix(sr_the_seed ^ splitmix(stream + 0x51ed));
}

uint64_t rng_next(struct rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return splitmix(r->s);
}

uint64_t rng_range(struct rng *r, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + rng_next(r) % (hi - lo + 1);
}

uint64_t rng_size(struct rng *r, uint64_t max)
{
	switch (rng_next(r) % 4) {
	case 0:
		return rng_range(r, 0, max < 64 ? max : 64);
	case 1:
		return rng_range(r, 0, max < 4096 ? max : 4096);
	default:
		return rng_range(r, 0, max);
	}
}

static uint64_t pat_word(uint64_t stream, uint64_t word)
{
	return splitmix(sr_the_seed * 31 + splitmix(stream) + word);
}

void pat_fill(void *dst, size_t len, uint64_t stream, uint64_t pos)
{
	unsigned char *d = dst;

	for (size_t i = 0; i < len;) {
		uint64_t p = pos + i, w = pat_word(stream, p >> 3);

		for (unsigned b = p & 7; b < 8 && i < len; b++, i++)
			d[i] = (unsigned char)(w >> (8 * b));
	}
}

long pat_find_diff(const void *src, size_t len, uint64_t stream, uint64_t pos)
{
	const unsigned char *s = src;

	for (size_t i = 0; i < len;) {
		uint64_t p = pos + i, w = pat_word(stream, p >> 3);

		for (unsigned b = p & 7; b < 8 && i < len; b++, i++)
			if (s[i] != (unsigned char)(w >> (8 * b)))
				return (long)i;
	}
	return -1;
}

void sr__check_pat(const char *file, int line, const char *what, const void *p, size_t len,
		   uint64_t stream, uint64_t pos)
{
	long d = pat_find_diff(p, len, stream, pos);
	unsigned char want;

	if (d < 0) {
		sr__pass();
		return;
	}
	pat_fill(&want, 1, stream, pos + d);
	sr__fail(
	    file, line,
	    "%s: %zu bytes of data stream %llu differ from offset %ld: got 0x%02x, want 0x%02x",
	    what, len, (unsigned long long)stream, d, ((const unsigned char *)p)[d], want);
}

/* ---- processes ---- */

struct child sr_fork(const char *name, void (*fn)(int fd, void *arg), void *arg)
{
	struct child c = {-1, -1};
	pid_t parent = getpid();
	int sv[2];

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	fflush(stdout);
	fflush(stderr);
	c.pid = fork();
	REQUIRE(c.pid >= 0);
	if (c.pid == 0) {
		close(sv[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(4);
		sr_proc_name = name;
		sr_failed_in_process = 0;
		fn(sv[1], arg);
		fflush(stdout);
		fflush(stderr);
		_exit(sr_failed_here() ? 1 : 0);
	}
	close(sv[1]);
	c.fd = sv[0];
	return c;
}

int sr_child_wait(struct child *c, int timeout_ms)
{
	uint64_t end = sr_now_us() + (uint64_t)timeout_ms * 1000;
	int st = 0;

	if (c->pid <= 0)
		return -1;
	for (;;) {
		pid_t r = waitpid(c->pid, &st, WNOHANG);

		if (r == c->pid)
			break;
		if (r < 0 && errno != EINTR) {
			st = -1;
			break;
		}
		if (sr_now_us() > end) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
			st = -1;
			break;
		}
		sr_sleep_ms(2);
	}
	c->pid = -1;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	return st;
}

/* ---- socket I/O ---- */

void sr_write_all(int fd, const void *p, size_t len)
{
	const char *s = p;

	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			sr__fail(__FILE__, __LINE__, "peer socket write failed: %s",
				 strerror(errno));
			sr__fatal();
		}
		s += n;
		len -= n;
	}
}

bool sr_read_timeout(int fd, void *p, size_t len, int timeout_ms)
{
	uint64_t end = sr_now_us() + (uint64_t)timeout_ms * 1000;
	char *d = p;

	while (len) {
		struct pollfd pfd = {fd, POLLIN, 0};
		int64_t left = (int64_t)(end - sr_now_us());
		ssize_t n;

		if (left <= 0)
			return false;
		if (poll(&pfd, 1, (int)((left + 999) / 1000)) <= 0)
			continue;
		n = read(fd, d, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		d += n;
		len -= n;
	}
	return true;
}

void sr_read_all(int fd, void *p, size_t len)
{
	if (!sr_read_timeout(fd, p, len, 60000)) {
		sr__fail(__FILE__, __LINE__, "peer socket: closed or silent for 60 s");
		sr__fatal();
	}
}
