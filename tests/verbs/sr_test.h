/*
 * A small libuv-style test runner for the verbs tests.  Each test is a
 * function listed in a table (SR_TEST / SR_TEST_KNOWN_BUG entries, which
 * tests/verbs/CMakeLists.txt also reads to register one ctest per test) and
 * runs in its own forked process, so a crash, a hang (alarm) or a leak
 * reported by LeakSanitizer fails that test alone.
 *
 *   PROGRAM            run every test
 *   PROGRAM NAME...    run the named tests
 *   PROGRAM --list     print the test names
 *
 * Assertions print both values with file:line and go on (a test keeps
 * checking after a failure).  The closing line is "N passed, M failed",
 * counting assertions; a test that crashes or leaks adds one failure.
 *
 * A test marked SR_TEST_KNOWN_BUG checks a documented defect of a part the
 * tests do not own: its failing assertions are reported as XFAIL and do not
 * fail the run; if they all pass, the run fails with XPASS so the mark gets
 * removed once the bug is fixed.
 */
#ifndef SR_TEST_H
#define SR_TEST_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct sr_test_case {
	const char *name;
	void (*fn)(void);
	const char *known_bug; /* NULL, or what is wrong and where */
};

#define SR_TEST(n)		  {#n, test_##n, NULL},
#define SR_TEST_KNOWN_BUG(n, why) {#n, test_##n, why},

struct sr_test_counts {
	unsigned passed, failed, xfailed;
};

static struct sr_test_counts sr_cnt;
static bool sr_in_known_bug;

#define SR_ERRNO(x)                                                                                \
	{                                                                                          \
		x, #x                                                                              \
	}
static const struct {
	int e;
	const char *name;
} sr_errnos[] = {
    SR_ERRNO(0),	 SR_ERRNO(EPERM),	    SR_ERRNO(ENOENT), SR_ERRNO(EINTR),
    SR_ERRNO(EIO),	 SR_ERRNO(EBADF),	    SR_ERRNO(EAGAIN), SR_ERRNO(ENOMEM),
    SR_ERRNO(EACCES),	 SR_ERRNO(EFAULT),	    SR_ERRNO(EBUSY),  SR_ERRNO(EEXIST),
    SR_ERRNO(ENODEV),	 SR_ERRNO(EINVAL),	    SR_ERRNO(ENOSPC), SR_ERRNO(ERANGE),
    SR_ERRNO(ENOSYS),	 SR_ERRNO(ENODATA),	    SR_ERRNO(EPROTO), SR_ERRNO(EOPNOTSUPP),
    SR_ERRNO(ETIMEDOUT), SR_ERRNO(EPROTONOSUPPORT),
};
#undef SR_ERRNO

static const char *sr_errno_name(int e)
{
	static char buf[32];

	for (size_t i = 0; i < sizeof(sr_errnos) / sizeof(sr_errnos[0]); i++)
		if (sr_errnos[i].e == e)
			return sr_errnos[i].name;
	snprintf(buf, sizeof(buf), "errno %d", e);
	return buf;
}

static inline bool sr_report(bool ok, const char *file, int line)
{
	if (ok) {
		sr_cnt.passed++;
		return true;
	}
	if (sr_in_known_bug) {
		sr_cnt.xfailed++;
		printf("XFAIL %s:%d: ", file, line);
	} else {
		sr_cnt.failed++;
		printf("FAIL %s:%d: ", file, line);
	}
	return false;
}

static inline bool sr_check(bool ok, const char *file, int line, const char *expr)
{
	if (!sr_report(ok, file, line))
		printf("CHECK(%s)\n", expr);
	return ok;
}

static inline bool sr_check_ll(bool ok, const char *file, int line, const char *op, const char *ea,
			       const char *eb, long long a, long long b)
{
	if (!sr_report(ok, file, line))
		printf("%s %s %s: %lld (0x%llx) vs %lld (0x%llx)\n", ea, op, eb, a,
		       (unsigned long long)a, b, (unsigned long long)b);
	return ok;
}

static inline bool sr_check_errno(bool ok, const char *file, int line, const char *expr, int got,
				  int want)
{
	if (!sr_report(ok, file, line)) {
		printf("%s: got %s (%d), want %s (%d)\n", expr, sr_errno_name(got), got,
		       sr_errno_name(want), want);
	}
	return ok;
}

#define CHECK(c) sr_check(!!(c), __FILE__, __LINE__, #c)
#define CHECK_OP_(a, op, b)                                                                        \
	({                                                                                         \
		long long a_ = (long long)(a), b_ = (long long)(b);                                \
		sr_check_ll(a_ op b_, __FILE__, __LINE__, #op, #a, #b, a_, b_);                    \
	})
#define CHECK_EQ(a, b)	  CHECK_OP_(a, ==, b)
#define CHECK_NE(a, b)	  CHECK_OP_(a, !=, b)
#define CHECK_GE(a, b)	  CHECK_OP_(a, >=, b)
#define CHECK_LE(a, b)	  CHECK_OP_(a, <=, b)
#define CHECK_GT(a, b)	  CHECK_OP_(a, >, b)
#define CHECK_LT(a, b)	  CHECK_OP_(a, <, b)
#define CHECK_NOT_NULL(p) sr_check((p) != NULL, __FILE__, __LINE__, #p " != NULL")
#define CHECK_STR(a, b)                                                                            \
	({                                                                                         \
		const char *a_ = (a), *b_ = (b);                                                   \
		bool ok_ = !strcmp(a_, b_);                                                        \
		if (!sr_report(ok_, __FILE__, __LINE__))                                           \
			printf("%s == %s: \"%s\" vs \"%s\"\n", #a, #b, a_, b_);                    \
		ok_;                                                                               \
	})

/* An int-returning verb that returns 0 or an errno value (ibv_modify_qp...). */
#define CHECK_RET(expr, want)                                                                      \
	({                                                                                         \
		int r_ = (expr);                                                                   \
		sr_check_errno(r_ == (want), __FILE__, __LINE__, #expr, r_, want);                 \
	})
/* A verb that returns -1 (or a negative value) and sets errno. */
#define CHECK_NEG_ERRNO(expr, want)                                                                \
	({                                                                                         \
		errno = 0;                                                                         \
		long long r_ = (long long)(expr);                                                  \
		int e_ = errno;                                                                    \
		bool ok_ = r_ < 0 && e_ == (want);                                                 \
		sr_check_errno(ok_, __FILE__, __LINE__, #expr, r_ < 0 ? e_ : 0, want);             \
	})
/* A create verb that returns NULL and sets errno; a surprise object is
 * returned so the caller can release it. */
#define CHECK_NULL_ERRNO(expr, want)                                                               \
	({                                                                                         \
		errno = 0;                                                                         \
		void *p_ = (void *)(expr);                                                         \
		int e_ = errno;                                                                    \
		sr_check_errno(!p_ && e_ == (want), __FILE__, __LINE__, #expr, p_ ? 0 : e_, want); \
		p_;                                                                                \
	})

/* Fatal: the rest of the test cannot run without it. */
#define REQUIRE(c)                                                                                 \
	do {                                                                                       \
		if (!CHECK(c)) {                                                                   \
			printf("  (stopping this test)\n");                                        \
			sr_test_finish();                                                          \
		}                                                                                  \
	} while (0)

static int sr_report_fd = -1;

static void __attribute__((noreturn)) sr_test_finish(void)
{
	fflush(stdout);
	if (sr_report_fd >= 0 && write(sr_report_fd, &sr_cnt, sizeof(sr_cnt)) != sizeof(sr_cnt))
		_exit(3);
	exit(0); /* exit, not _exit: LeakSanitizer checks at exit */
}

/* Runs one test in a child; adds its counts to *total; returns true if it passed. */
static bool sr_run_one(const struct sr_test_case *t, struct sr_test_counts *total, unsigned tmo)
{
	struct sr_test_counts c = {0, 0, 0};
	int pfd[2], status;
	bool got = false, ok;
	pid_t pid;

	fflush(stdout);
	if (pipe(pfd)) {
		perror("pipe");
		exit(2);
	}
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		close(pfd[0]);
		/* programs the test execs (daemons, peers) must not hold the
		 * report pipe open: the runner reads until the test is done */
		fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
		sr_report_fd = pfd[1];
		sr_in_known_bug = t->known_bug != NULL;
		alarm(tmo);
		t->fn();
		sr_test_finish();
	}
	close(pfd[1]);
	got = read(pfd[0], &c, sizeof(c)) == (ssize_t)sizeof(c);
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	total->passed += c.passed;
	total->failed += c.failed;
	total->xfailed += c.xfailed;
	ok = got && WIFEXITED(status) && WEXITSTATUS(status) == 0 && c.failed == 0;
	if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		total->failed++;
		if (WIFSIGNALED(status))
			printf("FAIL %s: killed by signal %d (%s)%s\n", t->name, WTERMSIG(status),
			       strsignal(WTERMSIG(status)),
			       WTERMSIG(status) == SIGALRM ? ", timed out" : "");
		else
			printf("FAIL %s: exit status %d%s\n", t->name, WEXITSTATUS(status),
			       got ? "" : " before reporting");
	}
	if (ok && t->known_bug) {
		if (c.xfailed) {
			printf("xfail %s  (known bug: %s)\n", t->name, t->known_bug);
		} else {
			printf("FAIL %s: XPASS, the known bug seems fixed (%s): remove the mark\n",
			       t->name, t->known_bug);
			total->failed++;
			ok = false;
		}
	} else {
		printf("%s %s  (%u checks)\n", ok ? "ok" : "not ok", t->name, c.passed + c.failed);
	}
	return ok;
}

static int sr_test_main(const struct sr_test_case *tests, size_t n, int argc, char **argv)
{
	struct sr_test_counts total = {0, 0, 0};
	unsigned tmo = 60, nfail = 0;
	const char *e = getenv("SR_TEST_TIMEOUT");

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (e && *e)
		tmo = (unsigned)atoi(e);
	if (argc > 1 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", tests[i].name);
		return 0;
	}
	if (argc <= 1) {
		for (size_t i = 0; i < n; i++)
			nfail += !sr_run_one(&tests[i], &total, tmo);
	}
	for (int a = 1; a < argc; a++) {
		size_t i;

		for (i = 0; i < n && strcmp(tests[i].name, argv[a]); i++)
			;
		if (i == n) {
			printf("unknown test %s (try --list)\n", argv[a]);
			return 2;
		}
		nfail += !sr_run_one(&tests[i], &total, tmo);
	}
	if (total.xfailed)
		printf("%u expected failures (known bugs)\n", total.xfailed);
	printf("%u passed, %u failed\n", total.passed, total.failed);
	return nfail || total.failed ? 1 : 0;
}

/* The softrdma device, opened (NULL if it is not listed or will not open). */
static inline struct ibv_context *open_soft0(void)
{
	struct ibv_context *ctx = NULL;
	struct ibv_device **list;
	int n = -1;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (int i = 0; i < n; i++)
		if (!ctx && !strcmp(ibv_get_device_name(list[i]), "soft0"))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

#endif
