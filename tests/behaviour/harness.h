/*
 * The behaviour suite's test harness (after libuv's runner): every test is a
 * function listed in tests.h; `sr_behave NAME` runs one in a fresh process
 * group against a private softrdmad, `sr_behave --list` lists them.
 *
 * Checks never abort: CHECK* count a pass or print the failure (file, line,
 * both values, the current note) and count it; REQUIRE* do the same and then
 * end the calling process, for when going on makes no sense.  The counters
 * live in a shared page, so checks made in helper processes and threads all
 * add up to the one closing line "NAME: N passed, M failed".
 *
 * Helper processes ("agents", agent.h) are forked before the test opens any
 * verbs object, and die with their parent (PR_SET_PDEATHSIG).
 */
#ifndef SR_BEHAVE_HARNESS_H
#define SR_BEHAVE_HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sr_test {
	const char *name;
	void (*fn)(void);
	int timeout_s;
};

/* ---- checks ---- */

void sr__pass(void);
void sr__fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sr__fatal(void) __attribute__((noreturn));
/* Sets the context printed with this thread's failures (e.g. the iteration). */
void sr_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned long sr_failed_total(void);
unsigned long sr_failed_here(void); /* in this process */

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (c)                                                                             \
			sr__pass();                                                                \
		else                                                                               \
			sr__fail(__FILE__, __LINE__, "%s", #c);                                    \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);     \
		if (a_ == b_)                                                                      \
			sr__pass();                                                                \
		else                                                                               \
			sr__fail(__FILE__, __LINE__, "%s == %s: %lld (0x%llx) != %lld (0x%llx)",   \
				 #a, #b, (long long)a_, a_, (long long)b_, b_);                    \
	} while (0)

#define CHECK_NE(a, b)                                                                             \
	do {                                                                                       \
		unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);     \
		if (a_ != b_)                                                                      \
			sr__pass();                                                                \
		else                                                                               \
			sr__fail(__FILE__, __LINE__, "%s != %s: both %lld (0x%llx)", #a, #b,       \
				 (long long)a_, a_);                                               \
	} while (0)

/* Signed comparison with any operator: CHECK_CMP(elapsed_ms, <=, 900). */
#define CHECK_CMP(a, op, b)                                                                        \
	do {                                                                                       \
		long long a_ = (long long)(a), b_ = (long long)(b);                                \
		if (a_ op b_)                                                                      \
			sr__pass();                                                                \
		else                                                                               \
			sr__fail(__FILE__, __LINE__, "%s %s %s: %lld vs %lld", #a, #op, #b, a_,    \
				 b_);                                                              \
	} while (0)

/* Work completion status, printed by name. */
#define CHECK_STATUS(st, want)                                                                     \
	do {                                                                                       \
		int s_ = (int)(st), w_ = (int)(want);                                              \
		if (s_ == w_)                                                                      \
			sr__pass();                                                                \
		else                                                                               \
			sr__fail(__FILE__, __LINE__, "%s: got %s (%d), want %s (%d)", #st,         \
				 ibv_wc_status_str(s_), s_, ibv_wc_status_str(w_), w_);            \
	} while (0)

/* Byte-for-byte comparison; prints the first differing offset. */
#define CHECK_MEM(got, want, len) sr__check_mem(__FILE__, __LINE__, #got, (got), (want), (len))
void sr__check_mem(const char *file, int line, const char *what, const void *got, const void *want,
		   size_t len);

#define REQUIRE(c)                                                                                 \
	do {                                                                                       \
		if (c) {                                                                           \
			sr__pass();                                                                \
		} else {                                                                           \
			sr__fail(__FILE__, __LINE__, "required: %s", #c);                          \
			sr__fatal();                                                               \
		}                                                                                  \
	} while (0)

#define REQUIRE_EQ(a, b)                                                                           \
	do {                                                                                       \
		unsigned long f_ = sr_failed_here();                                               \
		CHECK_EQ(a, b);                                                                    \
		if (sr_failed_here() != f_)                                                        \
			sr__fatal();                                                               \
	} while (0)

/* A verbs call that returns 0 or an errno (or -1 + errno). */
#define REQUIRE_OK(call)                                                                           \
	do {                                                                                       \
		int r_ = (call);                                                                   \
		if (r_ == 0) {                                                                     \
			sr__pass();                                                                \
		} else {                                                                           \
			sr__fail(__FILE__, __LINE__, "%s: returned %d (errno %d)", #call, r_,      \
				 errno);                                                           \
			sr__fatal();                                                               \
		}                                                                                  \
	} while (0)

/* ---- time, randomness, data patterns ---- */

uint64_t sr_now_us(void);
void sr_sleep_ms(unsigned ms);

/* The run's seed (printed at start; SR_BEHAVE_SEED=... reproduces a run). */
uint64_t sr_seed(void);

struct rng {
	uint64_t s;
};
void rng_init(struct rng *r, uint64_t stream);
uint64_t rng_next(struct rng *r);
/* Uniform in [lo, hi] (inclusive). */
uint64_t rng_range(struct rng *r, uint64_t lo, uint64_t hi);
/* A message size in [0, max]: small, medium and large sizes all common. */
uint64_t rng_size(struct rng *r, uint64_t max);

/* Deterministic contents: byte `pos` of data stream `stream` of this run. */
void pat_fill(void *dst, size_t len, uint64_t stream, uint64_t pos);
/* Offset of the first byte that differs from the stream, or -1. */
long pat_find_diff(const void *p, size_t len, uint64_t stream, uint64_t pos);
#define CHECK_PAT(p, len, stream, pos)                                                             \
	sr__check_pat(__FILE__, __LINE__, #p, (p), (len), (stream), (pos))
void sr__check_pat(const char *file, int line, const char *what, const void *p, size_t len,
		   uint64_t stream, uint64_t pos);

/* ---- processes and messages ---- */

/* Forks a helper that runs fn(fd, arg) and exits; the parent keeps the other
 * end of a stream socketpair.  Call before opening any verbs object. */
struct child {
	pid_t pid;
	int fd;
};
struct child sr_fork(const char *name, void (*fn)(int fd, void *arg), void *arg);
/* Waits for a helper to exit (killing it after timeout_ms); returns the
 * wait status, or -1 if it had to be killed. */
int sr_child_wait(struct child *c, int timeout_ms);

/* Exact-length stream I/O over a socket; the peer vanishing or a 60 s
 * silence is a REQUIRE failure, so a broken test never hangs. */
void sr_write_all(int fd, const void *p, size_t len);
void sr_read_all(int fd, void *p, size_t len);
/* Like sr_read_all with a time limit; false on timeout or EOF. */
bool sr_read_timeout(int fd, void *p, size_t len, int timeout_ms);

#endif
