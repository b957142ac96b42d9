/*
 * spin_probe: the placement probe.  One-way latency between two processes
 * that ping-pong a busy-polled flag in MAP_SHARED memory.
 *
 *   spin_probe [-t MS] [-c CPU_PARENT,CPU_CHILD]
 *
 * The parent stores 2k+1, the child spins until it sees it and stores 2k+2,
 * the parent spins until it sees that: one round trip, two one-way hops of
 * the cache line.  Round trips are timed in batches of 64 for about MS
 * milliseconds (default 20); the line printed is
 *
 *   median_one_way_ns min_one_way_ns max_one_way_ns batches
 *
 * On this kind of VM the two vCPUs move between host placements and the
 * one-way figure flips between ~40 ns and ~270 ns (sometimes ~900 ns), so
 * every benchmark row records this probe, run right before the row.
 * Nothing is pinned unless -c is given.
 */
#ifndef _GNU_SOURCE /* the CMake build defines it for everything */
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH	    64
#define MAX_BATCHES 200000
#define STOP	    UINT64_MAX

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Spins until *f == want (or STOP); yields now and then so that the probe
 * cannot live-lock if both processes ever share one CPU. */
static uint64_t wait_for(_Atomic uint64_t *f, uint64_t want)
{
	unsigned spins = 0;
	uint64_t v;

	while ((v = atomic_load_explicit(f, memory_order_acquire)) != want && v != STOP) {
		relax();
		if (++spins == 1u << 20) {
			sched_yield();
			spins = 0;
		}
	}
	return v;
}

static void pin(int cpu)
{
	cpu_set_t s;

	if (cpu < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		perror("sched_setaffinity");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	double target_ms = 20, *batch;
	int cpu_p = -1, cpu_c = -1, opt, nb = 0, st;
	_Atomic uint64_t *flag;
	pid_t child;

	while ((opt = getopt(argc, argv, "t:c:")) != -1) {
		switch (opt) {
		case 't':
			target_ms = atof(optarg);
			break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &cpu_p, &cpu_c) != 2) {
				fprintf(stderr, "-c wants CPU_PARENT,CPU_CHILD\n");
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: %s [-t MS] [-c CPU_PARENT,CPU_CHILD]\n", argv[0]);
			return 2;
		}
	}
	/* the flag has its cache line to itself */
	flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	batch = malloc(MAX_BATCHES * sizeof(*batch));
	if (flag == MAP_FAILED || !batch) {
		perror("probe setup");
		return 1;
	}
	atomic_store(flag, 0);
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		alarm(30);
		pin(cpu_c);
		for (uint64_t k = 0;; k++) {
			if (wait_for(flag, 2 * k + 1) == STOP)
				_exit(0);
			atomic_store_explicit(flag, 2 * k + 2, memory_order_release);
		}
	}
	alarm(30);
	pin(cpu_p);
	uint64_t k = 0;
	/* warm-up: both sides running and the line bouncing */
	for (int i = 0; i < 2000; i++, k++) {
		atomic_store_explicit(flag, 2 * k + 1, memory_order_release);
		wait_for(flag, 2 * k + 2);
	}
	double start = now_ns(), end = start + target_ms * 1e6, t0, t1;

	do {
		t0 = now_ns();
		for (int i = 0; i < BATCH; i++, k++) {
			atomic_store_explicit(flag, 2 * k + 1, memory_order_release);
			wait_for(flag, 2 * k + 2);
		}
		t1 = now_ns();
		batch[nb++] = (t1 - t0) / (2.0 * BATCH);
	} while (t1 < end && nb < MAX_BATCHES);
	atomic_store_explicit(flag, STOP, memory_order_release);
	waitpid(child, &st, 0);
	qsort(batch, nb, sizeof(*batch), cmp_double);
	printf("%.1f %.1f %.1f %d\n", batch[nb / 2], batch[0], batch[nb - 1], nb);
	return 0;
}
