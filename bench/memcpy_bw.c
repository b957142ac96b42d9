/*
 * memcpy_bw: the single-thread copy limit, per message size.
 *
 *   memcpy_bw [-a] [-t MS] [-r REPS] SIZE...
 *   memcpy_bw -p
 *
 * For each SIZE (bytes; K/M suffixes accepted) it copies a SIZE-byte source
 * buffer to a SIZE-byte destination buffer over and over, so that the two
 * buffers stay in whatever cache level a real transfer of SIZE bytes would
 * see.  Each repetition runs for about MS milliseconds (default 20); the
 * median of REPS repetitions (default 5) is printed as
 *
 *   SIZE GB/s(median) GB/s(min) GB/s(max)
 *
 * with GB = 10^9 bytes.  The copy is glibc's memcpy, called through a
 * volatile pointer so that the compiler can neither inline nor hoist it:
 * that is the routine the softrdma data path calls too.
 *
 * -a copies with sr_copy() instead (src/core/copy.c, linked in by
 * bench/run.sh): what the data path really does, which above half the L1d
 * walks the buffer in pieces (4 KiB up to 4 x L1d, 64 KiB from 3/8 of the
 * L2), alternately forwards and backwards, so that a copy repeated on the
 * same buffers starts where the last one left the cache warm.  -p prints
 * sr_copy's tier bounds on this machine (plain_max l1_max l2_min) and exits.  Both are limits of a
 * single thread copying; the report's targets use plain memcpy, as the issue defines them.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/copy.h"

static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static void *alt_copy(void *dst, const void *src, size_t len)
{
	sr_copy(dst, src, len);
	return dst;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k':
	case 'K':
		v *= 1024;
		break;
	case 'm':
	case 'M':
		v *= 1024 * 1024;
		break;
	case 'g':
	case 'G':
		v *= 1024.0 * 1024 * 1024;
		break;
	default:
		break;
	}
	return (size_t)v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Copies `iters` times; returns the elapsed seconds. */
static double run(char *dst, const char *src, size_t size, uint64_t iters)
{
	double t0 = now_s();

	for (uint64_t i = 0; i < iters; i++) {
		copy_fn(dst, src, size);
		__asm__ volatile("" ::"r"(dst) : "memory");
	}
	return now_s() - t0;
}

static void measure(size_t size, double target_s, int reps)
{
	char *src, *dst;
	double gbps[64], t;
	uint64_t iters = 1;

	if (posix_memalign((void **)&src, 4096, size ? size : 1) ||
	    posix_memalign((void **)&dst, 4096, size ? size : 1)) {
		perror("posix_memalign");
		exit(1);
	}
	memset(src, 0x5a, size);
	memset(dst, 0xa5, size);
	/* calibrate: grow the count until one batch takes >= target/8 */
	for (;;) {
		t = run(dst, src, size, iters);
		if (t >= target_s / 8 || iters > (1ull << 40))
			break;
		iters *= 2;
	}
	iters = (uint64_t)(iters * (target_s / (t > 0 ? t : 1e-9)));
	if (!iters)
		iters = 1;
	run(dst, src, size, iters / 4 + 1); /* warm */
	for (int r = 0; r < reps; r++) {
		t = run(dst, src, size, iters);
		gbps[r] = (double)size * iters / t / 1e9;
	}
	qsort(gbps, reps, sizeof(gbps[0]), cmp_double);
	printf("%zu %.3f %.3f %.3f\n", size, gbps[reps / 2], gbps[0], gbps[reps - 1]);
	fflush(stdout);
	free(src);
	free(dst);
}

int main(int argc, char **argv)
{
	double target_ms = 20;
	int reps = 5, opt;

	while ((opt = getopt(argc, argv, "apt:r:")) != -1) {
		switch (opt) {
		case 'p':
			printf("%zu %zu %zu\n", sr_copy_plain_max, sr_copy_l1_max, sr_copy_l2_min);
			return 0;
		case 'a':
			copy_fn = alt_copy;
			break;
		case 't':
			target_ms = atof(optarg);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [-a] [-t MS] [-r REPS] SIZE...\n", argv[0]);
			return 2;
		}
	}
	if (reps < 1)
		reps = 1;
	if (reps > 64)
		reps = 64;
	if (optind >= argc) {
		fprintf(stderr, "usage: %s [-a] [-t MS] [-r REPS] SIZE...\n", argv[0]);
		return 2;
	}
	for (int i = optind; i < argc; i++)
		measure(parse_size(argv[i]), target_ms / 1000.0, reps);
	return 0;
}
