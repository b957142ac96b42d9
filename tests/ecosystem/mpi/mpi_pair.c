/*
 * A two-rank MPI program for the ecosystem tests (issue 13): what an MPI
 * user would run first on a new fabric, every byte checked.
 *   1. ping-pong at sizes from 1 B to 1 MiB: rank 0 sends a pattern, rank 1
 *      checks it and answers with a pattern of its own, which rank 0 checks;
 *   2. MPI_Allreduce (sum of 64-bit integers and of doubles) checked against
 *      the sum the ranks' contributions must give;
 *   3. one-sided: a window of 1 MiB per rank, MPI_Put into the peer's window
 *      and MPI_Get from it between fences, at several sizes and offsets.
 * Rank 0 prints one line per step, the payload bytes both ranks moved
 * ("payload bytes N": what the transport must at least have carried), and
 * "mpi_pair: PASS" at the end; any mismatch prints where and exits non-zero
 * (MPI_Abort).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZE (1 << 20)

static int rank;
static unsigned long long moved; /* payload bytes between the ranks (rank 0 counts) */

static void fail(const char *what, size_t size, size_t at, unsigned got, unsigned want)
{
	fprintf(stderr, "mpi_pair: rank %d: FAIL %s, size %zu: byte %zu is %#x, expected %#x\n",
		rank, what, size, at, got, want);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The byte at i of message (tag, iteration, sender): differs between every
 * message, so a stale or misplaced buffer shows. */
static uint8_t pat(size_t i, unsigned seed)
{
	return (uint8_t)((i * 131 + seed * 7 + (i >> 8) * 17) ^ (seed >> 3));
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(i, seed);
}

static void check(const char *what, const uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(i, seed))
			fail(what, n, i, b[i], pat(i, seed));
}

static void pingpong(uint8_t *sbuf, uint8_t *rbuf)
{
	static const size_t sizes[] = {1, 7, 64, 1000, 4096, 8192, 65536, 262144, MAX_SIZE};
	int peer = !rank;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		int iters = n >= 65536 ? 10 : 100;
		double t0;

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int it = 0; it < iters; it++) {
			unsigned s0 = (unsigned)(k * 1000 + it) * 2, s1 = s0 + 1;

			memset(rbuf, 0, n);
			if (rank == 0) {
				fill(sbuf, n, s0);
				MPI_Send(sbuf, (int)n, MPI_BYTE, peer, (int)k, MPI_COMM_WORLD);
				MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, (int)k, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				check("ping-pong reply", rbuf, n, s1);
			} else {
				MPI_Status st;
				int cnt;

				MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, (int)k, MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_BYTE, &cnt);
				if ((size_t)cnt != n)
					fail("ping-pong length", n, 0, (unsigned)cnt, (unsigned)n);
				check("ping-pong message", rbuf, n, s0);
				fill(sbuf, n, s1);
				MPI_Send(sbuf, (int)n, MPI_BYTE, peer, (int)k, MPI_COMM_WORLD);
			}
		}
		if (rank == 0) {
			double us = (MPI_Wtime() - t0) * 1e6 / iters;

			moved += 2ull * n * (unsigned)iters;
			printf("ping-pong %7zu B x %3d: checked, %.1f us round trip, %.1f MB/s\n",
			       n, iters, us, 2.0 * (double)n / us);
		}
	}
}

static void allreduce(void)
{
	enum { N = 4096 };
	static int64_t in[N], out[N];
	static double din[N], dout[N];
	int size;

	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int i = 0; i < N; i++) {
		in[i] = (int64_t)(rank + 1) * (i + 1) * 1000003;
		din[i] = (rank + 1) * 0.5 * i;
	}
	MPI_Allreduce(in, out, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(din, dout, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	/* sum over ranks r of (r + 1) = size (size + 1) / 2 */
	for (int i = 0; i < N; i++) {
		int64_t want = (int64_t)size * (size + 1) / 2 * (i + 1) * 1000003;
		double dwant = size * (size + 1) / 2 * 0.5 * i;

		if (out[i] != want || dout[i] != dwant) {
			fprintf(stderr,
				"mpi_pair: rank %d: FAIL allreduce element %d: %lld / %g, expected "
				"%lld / %g\n",
				rank, i, (long long)out[i], dout[i], (long long)want, dwant);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	if (rank == 0)
		printf("allreduce: %d int64 and %d double sums over %d ranks checked\n", N, N,
		       size);
}

static void onesided(uint8_t *buf)
{
	static const size_t sizes[] = {1, 8, 100, 4096, 65536, MAX_SIZE};
	uint8_t *base;
	MPI_Win win;
	int peer = !rank;

	MPI_Win_allocate(MAX_SIZE, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k], off = n == MAX_SIZE ? 0 : (k * 4099) % (MAX_SIZE - n);
		unsigned sput = 5000 + (unsigned)k * 4 + (unsigned)rank, sget = sput + 2;

		/* Put: each rank writes its pattern into the peer's window */
		MPI_Win_fence(0, win);
		memset(base, 0xee, MAX_SIZE);
		MPI_Win_fence(0, win);
		fill(buf, n, sput);
		MPI_Put(buf, (int)n, MPI_BYTE, peer, (MPI_Aint)off, (int)n, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		check("MPI_Put target", base + off, n, 5000 + (unsigned)k * 4 + (unsigned)peer);
		if (off && base[off - 1] != 0xee)
			fail("MPI_Put wrote before its range", n, off - 1, base[off - 1], 0xee);
		if (off + n < MAX_SIZE && base[off + n] != 0xee)
			fail("MPI_Put wrote past its range", n, off + n, base[off + n], 0xee);

		/* Get: each rank fills its own window, then reads the peer's */
		fill(base + off, n, sget);
		MPI_Win_fence(0, win);
		memset(buf, 0, n);
		MPI_Get(buf, (int)n, MPI_BYTE, peer, (MPI_Aint)off, (int)n, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		check("MPI_Get result", buf, n, 5000 + (unsigned)k * 4 + (unsigned)peer + 2);
		moved += 4ull * n; /* a Put and a Get by each rank */
		if (rank == 0)
			printf("one-sided %7zu B at offset %6zu: MPI_Put and MPI_Get checked\n", n,
			       off);
	}
	MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
	uint8_t *sbuf, *rbuf;
	int size;
	char host[MPI_MAX_PROCESSOR_NAME];
	int hlen;
	char netns[64];
	ssize_t n;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &hlen);
	/* the network namespace says which host (namespace) the rank ran in */
	n = readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
	netns[n > 0 ? n : 0] = 0;
	printf("mpi_pair: rank %d of %d on %s, %s\n", rank, size, host, netns);
	fflush(stdout);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_pair: needs exactly 2 ranks, got %d\n", size);
		MPI_Finalize();
		return 2;
	}
	sbuf = malloc(MAX_SIZE);
	rbuf = malloc(MAX_SIZE);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	pingpong(sbuf, rbuf);
	allreduce();
	onesided(sbuf);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("payload bytes %llu\nmpi_pair: PASS\n", moved);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
