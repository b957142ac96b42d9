/*
 * reg_cost: what ibv_reg_mr and ibv_dereg_mr cost, by region size.
 *
 *   reg_cost [-t] [REPS [SIZE...]] (sizes in bytes, K/M/G suffixes; default
 *                                   REPS 15, sizes 4K 1M 256M)
 *
 * -t starts an idle second thread first: a process with other threads pays
 * for the write protection of the pages it moves (src/verbs/pagemove.c),
 * a single-threaded one does not.
 *
 * Run under `softrdma run --`.  For each size it maps a fresh private
 * anonymous region, writes every page (an application registers buffers it
 * has filled), registers it with LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ,
 * deregisters it, and unmaps it; REPS times.  A 4 KiB size is also measured
 * as a malloc'd buffer (heap pages shared with neighbours, two pages when it
 * straddles).  Output, one line per case: the median and the minimum of
 * each call in microseconds.
 *
 *   CASE SIZE reg_median_us reg_min_us dereg_median_us dereg_min_us
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G':
	case 'g':
		v <<= 10; /* fall through */
	case 'M':
	case 'm':
		v <<= 10; /* fall through */
	case 'K':
	case 'k':
		v <<= 10;
	}
	return v;
}

static void run(struct ibv_pd *pd, const char *name, size_t size, int reps, int heap)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	double *reg = calloc(reps, sizeof(double)), *dereg = calloc(reps, sizeof(double));

	for (int i = 0; i < reps; i++) {
		char *buf, *keep = NULL;
		struct ibv_mr *mr;
		double t0, t1, t2;

		if (heap) {
			keep = malloc(size + 64); /* a neighbour after it, alive */
			buf = keep;
		} else {
			buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				   -1, 0);
			if (buf == MAP_FAILED)
				buf = NULL;
		}
		if (!buf) {
			perror("buffer");
			exit(1);
		}
		memset(buf, i, size);
		t0 = now_us();
		mr = ibv_reg_mr(pd, buf, size, acc);
		t1 = now_us();
		if (!mr) {
			perror("ibv_reg_mr");
			exit(1);
		}
		if (ibv_dereg_mr(mr)) {
			perror("ibv_dereg_mr");
			exit(1);
		}
		t2 = now_us();
		reg[i] = t1 - t0;
		dereg[i] = t2 - t1;
		if (heap)
			free(keep);
		else
			munmap(buf, size);
	}
	qsort(reg, reps, sizeof(double), cmp_double);
	qsort(dereg, reps, sizeof(double), cmp_double);
	printf("%-5s %10zu %10.1f %10.1f %10.1f %10.1f\n", name, size, reg[reps / 2], reg[0],
	       dereg[reps / 2], dereg[0]);
	free(reg);
	free(dereg);
}

static void *idle(void *arg)
{
	for (;;)
		pause();
	return arg;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int reps, n = 0;
	pthread_t t;

	if (argc > 1 && !strcmp(argv[1], "-t")) {
		if (pthread_create(&t, NULL, idle, NULL)) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
		argv++;
		argc--;
	}
	reps = argc > 1 ? atoi(argv[1]) : 15;
	list = ibv_get_device_list(&n);

	if (!list || !n || !(ctx = ibv_open_device(list[0])) || !(pd = ibv_alloc_pd(ctx))) {
		fprintf(stderr, "no device\n");
		return 1;
	}
	printf("%-5s %10s %10s %10s %10s %10s\n", "case", "bytes", "reg_med", "reg_min",
	       "dereg_med", "dereg_min");
	if (argc > 2) {
		for (int i = 2; i < argc; i++)
			run(pd, "mmap", parse_size(argv[i]), reps, 0);
	} else {
		run(pd, "heap", 4096, reps, 1);
		run(pd, "mmap", 4096, reps, 0);
		run(pd, "mmap", 1 << 20, reps, 0);
		run(pd, "mmap", (size_t)256 << 20, reps, 0);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
