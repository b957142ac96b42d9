/*
 * Minimal assertion harness for the unit tests. Each test program is a single
 * translation unit that includes this header: CHECK()/CHECK_EQ() count every
 * check and print file, line, the failing expression (and for CHECK_EQ both
 * values) plus the current context string set with CHECK_CTX(); checks never
 * abort, so one run reports every failure. CHECK_SUMMARY() prints
 * "<name>: N checks, M failed" and yields the exit status (1 on any failure).
 */
#ifndef SOFTRDMA_TESTS_CHECK_H
#define SOFTRDMA_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static unsigned long check_total;
static unsigned long check_failed;
static char check_ctx[256];

/* Context printed with every failure, e.g. the transition under test. */
static inline void __attribute__((format(printf, 1, 2), unused)) check_set_ctx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(check_ctx, sizeof(check_ctx), fmt, ap);
	va_end(ap);
}

static inline void __attribute__((unused)) check_fail_head(const char *file, int line)
{
	check_failed++;
	fprintf(stderr, "%s:%d: FAIL", file, line);
	if (check_ctx[0])
		fprintf(stderr, " [%s]", check_ctx);
	fprintf(stderr, ": ");
}

#define CHECK_CTX(...) check_set_ctx(__VA_ARGS__)

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		check_total++;                                                                     \
		if (!(cond)) {                                                                     \
			check_fail_head(__FILE__, __LINE__);                                       \
			fprintf(stderr, "%s\n", #cond);                                            \
		}                                                                                  \
	} while (0)

/* Compares as long long; prints both sides in decimal and hex. */
#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long check_a_ = (long long)(a);                                               \
		long long check_b_ = (long long)(b);                                               \
		check_total++;                                                                     \
		if (check_a_ != check_b_) {                                                        \
			check_fail_head(__FILE__, __LINE__);                                       \
			fprintf(stderr, "%s == %s: %lld (0x%llx) != %lld (0x%llx)\n", #a, #b,      \
				check_a_, (unsigned long long)check_a_, check_b_,                  \
				(unsigned long long)check_b_);                                     \
		}                                                                                  \
	} while (0)

#define CHECK_SUMMARY(name)                                                                        \
	(printf("%s: %lu checks, %lu failed\n", (name), check_total, check_failed),                \
	 check_failed ? 1 : 0)

#endif /* SOFTRDMA_TESTS_CHECK_H */
