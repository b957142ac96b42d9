/*
 * crc_bench: throughput of the CRC-32 engines the ICRC could use, and of
 * sr_icrc() itself on whole packets.
 *
 *   crc_bench [-t MS] [-r REPS] [SIZE...]      (default sizes 64 1K 4K 64K)
 *
 * Engines, all the reflected CRC-32 of zlib and Ethernet (checked equal on
 * every buffer before timing):
 *   isal   isa-l's crc32_gzip_refl (Debian libisal2; PCLMULQDQ, or
 *          VPCLMULQDQ with AVX-512, chosen at run time)
 *   zlib   zlib's crc32 (Debian zlib1g)
 *   table  a plain slicing-by-8 table loop (no carry-less multiply)
 *   byte   the one-table, byte-at-a-time loop (the textbook reference)
 * then `icrc` = sr_icrc() over an IPv4 RoCEv2 packet whose UDP payload is
 * a 12-byte BTH + a 16-byte RETH in one iovec entry and SIZE payload bytes
 * in a second, as the engine hands it over (GB/s counted on SIZE).
 *
 * Each repetition runs for about MS milliseconds (default 50) over a
 * SIZE-byte buffer that stays in cache; the median of REPS repetitions
 * (default 5) is printed in GB/s (10^9 bytes/s), one line per size.
 */
#include <isa-l/crc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <zlib.h>

#include "wire/icrc.h"

static uint32_t tab[8][256];

static void tab_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
		tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xff];
}

static uint32_t crc_table8(uint32_t crc, const unsigned char *p, size_t n)
{
	crc = ~crc;
	while (n >= 8) {
		uint32_t a, b;

		memcpy(&a, p, 4);
		memcpy(&b, p + 4, 4);
		a ^= crc;
		crc = tab[7][a & 0xff] ^ tab[6][(a >> 8) & 0xff] ^ tab[5][(a >> 16) & 0xff] ^
		      tab[4][a >> 24] ^ tab[3][b & 0xff] ^ tab[2][(b >> 8) & 0xff] ^
		      tab[1][(b >> 16) & 0xff] ^ tab[0][b >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

static uint32_t crc_byte(uint32_t crc, const unsigned char *p, size_t n)
{
	crc = ~crc;
	while (n--)
		crc = (crc >> 8) ^ tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

static uint32_t crc_isal(uint32_t crc, const unsigned char *p, size_t n)
{
	return crc32_gzip_refl(crc, p, n);
}

static uint32_t crc_zlib(uint32_t crc, const unsigned char *p, size_t n)
{
	return (uint32_t)crc32(crc, p, (uInt)n);
}

static const uint8_t sgid[16] = {[10] = 0xff, [11] = 0xff, 10, 0, 0, 1};
static const uint8_t dgid[16] = {[10] = 0xff, [11] = 0xff, 10, 0, 0, 2};
static unsigned char hdr[28] = {0x0a, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1};

static uint32_t crc_icrc(uint32_t crc, const unsigned char *p, size_t n)
{
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)p, n}};

	return sr_icrc(sgid, dgid, 0xc000, 4791, iov, 2) ^ crc;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

typedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t);

static double measure(crc_fn fn, const unsigned char *buf, size_t n, double ms, int reps)
{
	double r[64];
	volatile uint32_t sink = 0;

	for (int i = 0; i < reps; i++) {
		size_t iters = 0;
		double t0 = now(), t;

		do {
			for (int k = 0; k < 64; k++)
				sink = fn(sink, buf, n);
			iters += 64;
			t = now();
		} while (t - t0 < ms * 1e-3);
		r[i] = (double)iters * n / (t - t0) / 1e9;
	}
	qsort(r, reps, sizeof(r[0]), cmp_double);
	return r[reps / 2];
}

static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 0);

	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	return v;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		crc_fn fn;
	} eng[] = {{"isal", crc_isal},
		   {"zlib", crc_zlib},
		   {"table", crc_table8},
		   {"byte", crc_byte},
		   {"icrc", crc_icrc}};
	size_t def[] = {64, 1024, 4096, 65536}, sizes[32];
	int nsizes = 0, reps = 5, a = 1;
	double ms = 50;

	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "-t") && a + 1 < argc)
			ms = atof(argv[++a]);
		else if (!strcmp(argv[a], "-r") && a + 1 < argc)
			reps = atoi(argv[++a]);
		else {
			fprintf(stderr, "usage: %s [-t MS] [-r REPS] [SIZE...]\n", argv[0]);
			return 2;
		}
	}
	if (reps < 1 || reps > 64)
		reps = 5;
	for (; a < argc && nsizes < 32; a++)
		sizes[nsizes++] = parse_size(argv[a]);
	if (!nsizes) {
		memcpy(sizes, def, sizeof(def));
		nsizes = 4;
	}
	tab_init();
	printf("# GB/s (10^9 B/s), median of %d x %.0f ms\n%-8s", reps, ms, "size");
	for (size_t e = 0; e < sizeof(eng) / sizeof(eng[0]); e++)
		printf(" %8s", eng[e].name);
	printf("\n");
	for (int s = 0; s < nsizes; s++) {
		size_t n = sizes[s];
		unsigned char *buf = malloc(n ? n : 1);
		uint32_t ref;

		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)(i * 131 + 7);
		ref = crc_byte(0, buf, n);
		for (size_t e = 0; e < 4; e++)
			if (eng[e].fn(0, buf, n) != ref) {
				fprintf(stderr, "%s disagrees at size %zu\n", eng[e].name, n);
				return 1;
			}
		printf("%-8zu", n);
		for (size_t e = 0; e < sizeof(eng) / sizeof(eng[0]); e++) {
			printf(" %8.2f", measure(eng[e].fn, buf, n, ms, reps));
			fflush(stdout);
		}
		printf("\n");
		free(buf);
	}
	return 0;
}
