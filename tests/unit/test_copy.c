/*
 * Unit test of src/core/copy.c: copies are byte-exact at every size and
 * alignment around each tier bound and piece size, in both directions; and
 * the order in which the destination is written is the documented one, in
 * each tier.  The order is observed, not assumed: the destination is
 * mapped read-only, and a SIGSEGV handler records each page the copy first
 * writes and then makes it writable, so the list of pieces in first-write
 * order is exactly what the copy did: a new buffer pair ascending, a repeat
 * descending, the last piece last in both, and a rotation of pairs never
 * descending.
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

/* First-write order of the pieces of one sr_copy of `len` bytes into `dst`
 * (page-aligned, made read-only here): out[k] is the k-th piece written. */
static size_t piece_order(char *dst, const char *src, size_t len, size_t piece, size_t *out,
			  size_t max)
{
	size_t n = 0;
	static int seen[4096];

	memset(seen, 0, sizeof(seen));
	watch_pages = (len + page - 1) / page;
	watch_base = dst;
	mprotect(dst, watch_pages * page, PROT_READ);
	ntouched = 0;
	sr_copy(dst, src, len);
	CHECK(memcmp(dst, src, len) == 0);
	for (size_t i = 0; i < ntouched && n < max; i++) {
		size_t k = touched[i] * page / piece;

		if (!seen[k]) {
			seen[k] = 1;
			out[n++] = k;
		}
	}
	watch_base = NULL;
	return n;
}

static void check_forwards(const size_t *o, size_t n, size_t npieces)
{
	CHECK_EQ(n, npieces);
	for (size_t k = 0; k < n && k < npieces; k++)
		CHECK_EQ(o[k], k);
}

static void check_backwards(const size_t *o, size_t n, size_t npieces)
{
	CHECK_EQ(n, npieces);
	if (n != npieces)
		return;
	for (size_t k = 0; k + 1 < npieces; k++)
		CHECK_EQ(o[k], npieces - 2 - k);
	CHECK_EQ(o[npieces - 1], npieces - 1); /* the last piece last */
}

/* `piece` 0: the copy must not be split: every pass writes the pages in
 * the same order.  Otherwise a new buffer pair goes forwards, a repeat of
 * the previous pair the other way from it, and a pair that was not the
 * previous one forwards again (a rotation of buffers is never reversed). */
static void check_order(size_t len, size_t piece)
{
	size_t unit = piece ? piece : page, n = (len + unit - 1) / unit;
	size_t mapped = (len + page - 1) / page * page;
	static size_t o[5][4096];
	size_t no[5];
	char *src = malloc(len);
	char *d1 = mmap(NULL, mapped, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *d2 = mmap(NULL, mapped, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK_CTX("order len %zu (%zu pieces)", len, piece ? n : 1);
	if (d1 == MAP_FAILED || d2 == MAP_FAILED || n > 4096) {
		CHECK(!"mmap");
		return;
	}
	fill((unsigned char *)src, len, 7);
	no[0] = piece_order(d1, src, len, unit, o[0], 4096); /* new pair */
	no[1] = piece_order(d1, src, len, unit, o[1], 4096); /* repeat */
	no[2] = piece_order(d1, src, len, unit, o[2], 4096); /* repeat */
	no[3] = piece_order(d2, src, len, unit, o[3], 4096); /* another pair */
	no[4] = piece_order(d1, src, len, unit, o[4], 4096); /* back: not a repeat */
	if (!piece) {
		for (int i = 1; i < 5; i++)
			CHECK(no[i] == no[0] && memcmp(o[i], o[0], no[0] * sizeof(o[0][0])) == 0);
	} else {
		check_forwards(o[0], no[0], n);
		check_backwards(o[1], no[1], n);
		check_forwards(o[2], no[2], n);
		check_forwards(o[3], no[3], n);
		check_forwards(o[4], no[4], n);
	}
	munmap(d1, mapped);
	munmap(d2, mapped);
	free(src);
}

int main(void)
{
	struct sigaction sa;
	size_t p = sr_copy_plain_max, l1 = sr_copy_l1_max, l2 = sr_copy_l2_min;
	size_t c1 = SR_COPY_PIECE_L1, c2 = SR_COPY_PIECE_L2;

	page = (size_t)sysconf(_SC_PAGESIZE);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);

	CHECK_CTX("tiers: plain %zu, L1 pieces to %zu, L2 pieces from %zu", p, l1, l2);
	CHECK(c1 == page); /* the order check below observes pages */
	CHECK(p >= 2 * c1 && p < l1 && l1 < l2);
	CHECK(l2 >= 4 * c2 && l2 % 8 == 0);

	const size_t lens[] = {0,
			       1,
			       63,
			       4096,
			       p - 1,
			       p,
			       p + 1,
			       p + c1 - 1,
			       p + c1,
			       p + c1 + 1,
			       l1 - 1,
			       l1,
			       l1 + 1,
			       l2 - 1,
			       l2,
			       l2 + 1,
			       l2 + c2 - 1,
			       l2 + c2 + 1,
			       2 * l2 + 3 * c2 + 17};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t soff = 0; soff < 3; soff++)
			check_exact(lens[i], soff * 7, soff * 13 % 64);

	check_order(p, 0);		     /* fits the L1 with its source: memcpy */
	check_order(p + c1, c1);	     /* whole L1 pieces */
	check_order(p + 1, c1);		     /* a last piece of one byte */
	check_order(l1 - 1000, c1);	     /* a partial last piece */
	check_order(l1 + c1, 0);	     /* between the tiers: memcpy */
	check_order(l2, c2);		     /* whole L2 pieces */
	check_order(l2 + 1, c2);	     /* a last piece of one byte */
	check_order(l2 + 5 * c2 + 1000, c2); /* a partial last piece */
	return CHECK_SUMMARY("test_copy");
}
