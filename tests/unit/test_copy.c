/*
 * Unit test of src/core/copy.c: large copies are byte-exact at every size
 * and alignment around the split threshold and the chunk size, in both
 * directions; and the order in which the destination is written is the
 * documented one.  The order is observed, not assumed: the destination is
 * mapped read-only, and a SIGSEGV handler records each page the copy first
 * writes and then makes it writable, so the list of pieces in first-write
 * order is exactly what the copy did: one pass in ascending order, the next
 * descending, and the last piece last in both.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/copy.h"
#include "check.h"

static size_t page;
static char *watch_base;
static size_t watch_pages;
static size_t touched[4096]; /* page indexes in first-write order */
static size_t ntouched;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	char *a = si->si_addr;
	size_t pg;

	(void)uc;
	if (!watch_base || a < watch_base || a >= watch_base + watch_pages * page) {
		signal(sig, SIG_DFL); /* a real crash: let it happen */
		return;
	}
	pg = (size_t)(a - watch_base) / page;
	if (ntouched < sizeof(touched) / sizeof(touched[0]))
		touched[ntouched++] = pg;
	mprotect(watch_base + pg * page, page, PROT_READ | PROT_WRITE);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

/* Copies `len` bytes at the given misalignments, twice (both directions),
 * and checks every byte and the guard bytes around the destination. */
static void check_exact(size_t len, size_t soff, size_t doff)
{
	unsigned char *src = malloc(len + soff + 64), *dst = malloc(len + doff + 64);

	CHECK_CTX("exact len %zu soff %zu doff %zu", len, soff, doff);
	for (int pass = 0; pass < 2; pass++) {
		fill(src, len + soff + 64, (unsigned)(len + pass));
		memset(dst, 0xee, len + doff + 64);
		sr_copy(dst + doff, src + soff, len);
		CHECK(memcmp(dst + doff, src + soff, len) == 0);
		for (size_t i = 0; i < doff; i++)
			if (dst[i] != 0xee) {
				CHECK(!"byte written before the destination");
				break;
			}
		for (size_t i = 0; i < 64; i++)
			if (dst[doff + len + i] != 0xee) {
				CHECK(!"byte written after the destination");
				break;
			}
	}
	free(src);
	free(dst);
}

/* First-write order of the pieces of one sr_copy of `len` bytes into a
 * page-aligned, read-only destination: out[k] is the k-th piece written. */
static size_t piece_order(const char *src, size_t len, size_t *out, size_t max)
{
	size_t npieces = (len + SR_COPY_CHUNK - 1) / SR_COPY_CHUNK, n = 0;
	int seen[256] = {0};

	watch_pages = (len + page - 1) / page;
	watch_base = mmap(NULL, watch_pages * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (watch_base == MAP_FAILED || npieces > 256) {
		CHECK(!"mmap");
		return 0;
	}
	ntouched = 0;
	sr_copy(watch_base, src, len);
	CHECK(memcmp(watch_base, src, len) == 0);
	for (size_t i = 0; i < ntouched && n < max; i++) {
		size_t piece = touched[i] * page / SR_COPY_CHUNK;

		if (!seen[piece]) {
			seen[piece] = 1;
			out[n++] = piece;
		}
	}
	munmap(watch_base, watch_pages * page);
	watch_base = NULL;
	return n;
}

static void check_order(size_t len)
{
	size_t npieces = (len + SR_COPY_CHUNK - 1) / SR_COPY_CHUNK;
	size_t a[256], b[256], na, nb, *fwd, *bwd;
	char *src = malloc(len);

	CHECK_CTX("order len %zu (%zu pieces)", len, npieces);
	fill((unsigned char *)src, len, 7);
	na = piece_order(src, len, a, 256);
	nb = piece_order(src, len, b, 256);
	CHECK_EQ(na, npieces);
	CHECK_EQ(nb, npieces);
	if (na != npieces || nb != npieces) {
		free(src);
		return;
	}
	/* one of two consecutive copies goes up, the other down */
	fwd = a[0] == 0 ? a : b;
	bwd = a[0] == 0 ? b : a;
	CHECK(fwd != bwd && bwd[0] != 0);
	for (size_t k = 0; k < npieces; k++)
		CHECK_EQ(fwd[k], k);
	for (size_t k = 0; k + 1 < npieces; k++)
		CHECK_EQ(bwd[k], npieces - 2 - k);
	CHECK_EQ(bwd[npieces - 1], npieces - 1); /* the last piece last */
	/* and a third copy goes the same way as the first */
	na = piece_order(src, len, b, 256);
	CHECK_EQ(b[0], a[0]);
	free(src);
}

int main(void)
{
	struct sigaction sa;
	size_t m = sr_copy_split_min, c = SR_COPY_CHUNK;

	page = (size_t)sysconf(_SC_PAGESIZE);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);

	CHECK_CTX("threshold");
	CHECK(m >= 4 * c);
	CHECK(m % 8 == 0);

	const size_t lens[] = {
	    0, 1, 63, 4096, m - 1, m, m + 1, m + c - 1, m + c, m + c + 1, 2 * m + 3 * c + 17};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t soff = 0; soff < 3; soff++)
			check_exact(lens[i], soff * 7, soff * 13 % 64);

	check_order(m);		       /* whole pieces */
	check_order(m + 1);	       /* a last piece of one byte */
	check_order(m + 5 * c + 1000); /* a partial last piece */
	return CHECK_SUMMARY("test_copy");
}
