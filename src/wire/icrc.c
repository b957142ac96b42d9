/*
 * The RoCEv2 ICRC (see icrc.h): the masked pseudo-header is built in a
 * 60-byte stack buffer together with a masked copy of the BTH (gathered
 * from the iovec, which may split it anywhere), CRC'd in one call, and the
 * CRC then continues over the caller's memory in place.  The solver behind
 * sr_icrc_ipv4_id() is GF(2) arithmetic modulo the CRC polynomial.
 */
#include <errno.h>
#include <stdatomic.h>
#include <isa-l/crc.h>
#include <string.h>

#include "core/thread_obj.h"
#include "wire/gid.h"
#include "wire/icrc.h"

#define LRH_LEN	       8
#define IPV4_LEN       20
#define IPV6_LEN       40
#define UDP_LEN	       8
#define BTH_LEN	       12
#define BTH_MASKED     4	   /* FECN, BECN, reserved: may change in flight */
#define IPV4_ID_OFFSET 4	   /* in the IPv4 header */
#define CRC_POLY       0xedb88320u /* reflected 0x04C11DB7 */

/*
 * crc32(0, 8 x 0xFF) in zlib's convention (inverted on entry and exit): the
 * state after the LRH placeholder.  rxe seeds its non-inverting CRC with
 * 0xDEBB20E3, which is this value's complement.  Checked by test_icrc.
 */
#define ICRC_SEED 0x2144df1cu

static inline void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * The masked IP and UDP headers for a UDP payload of udp_len bytes
 * (ICRC included), as the kernel would build them; returns their length.
 */
static size_t pseudo_hdr(uint8_t *h, const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport,
			 uint16_t dport, uint16_t ip_id, size_t udp_len)
{
	uint8_t *p = h;

	if (sr_gid_pair_is_v4(sgid, dgid)) {
		p[0] = 0x45; /* version 4, IHL 5 */
		p[1] = 0xff; /* TOS: masked */
		put16(p + 2, (uint32_t)(IPV4_LEN + UDP_LEN + udp_len));
		put16(p + 4, ip_id);
		p[6] = 0x40; /* DF, fragment offset 0 */
		p[7] = 0;
		p[8] = 0xff;	      /* TTL: masked */
		p[9] = 17;	      /* UDP */
		p[10] = p[11] = 0xff; /* header checksum: masked */
		memcpy(p + 12, sgid + 12, 4);
		memcpy(p + 16, dgid + 12, 4);
		p += IPV4_LEN;
	} else {
		p[0] = 0x6f; /* version 6, traffic class and flow label masked */
		p[1] = p[2] = p[3] = 0xff;
		put16(p + 4, (uint32_t)(UDP_LEN + udp_len));
		p[6] = 17;   /* next header UDP */
		p[7] = 0xff; /* hop limit: masked */
		memcpy(p + 8, sgid, 16);
		memcpy(p + 24, dgid, 16);
		p += IPV6_LEN;
	}
	put16(p, sport);
	put16(p + 2, dport);
	put16(p + 4, (uint32_t)(UDP_LEN + udp_len));
	p[6] = p[7] = 0xff; /* UDP checksum: masked */
	return (size_t)(p + UDP_LEN - h);
}

/*
 * isa-l's AVX-512 CRC (crc32_gzip_refl_by16_10) returns without
 * VZEROUPPER, leaving the upper halves of the vector registers dirty: every
 * SSE instruction of ours after it (gcc's default x86-64 code: memset,
 * struct copies) then paid a transition, and perf put 60-76% of the
 * samples of the functions that called it on the first such instruction
 * (sr_udp_build, sr_eng_rx_one).  So the CRC's callers clear them, on a CPU
 * that has AVX (VZEROUPPER is an AVX instruction).
 */
static void vector_upper_clear(void)
{
#if defined(__x86_64__) || defined(__i386__)
	static int avx = -1; /* racing first callers store the same value */
	int v = __atomic_load_n(&avx, __ATOMIC_RELAXED);

	if (__builtin_expect(v < 0, 0)) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx") ? 1 : 0;
		__atomic_store_n(&avx, v, __ATOMIC_RELAXED);
	}
	if (v)
		__asm__ volatile("vzeroupper" ::: "memory");
#endif
}

uint32_t sr_icrc_id(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		    uint16_t ip_id, const struct iovec *iov, int iovcnt)
{
	uint8_t h[IPV6_LEN + UDP_LEN + BTH_LEN];
	size_t len = 0, n, got = 0, off = 0;
	uint32_t crc;
	int i;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	n = pseudo_hdr(h, sgid, dgid, sport, dport, ip_id, len + SR_ICRC_LEN);

	/* A masked copy of the BTH, wherever the iovec splits it. */
	for (i = 0; i < iovcnt && got < BTH_LEN;) {
		size_t take = iov[i].iov_len - off;

		if (take > BTH_LEN - got)
			take = BTH_LEN - got;
		memcpy(h + n + got, (const uint8_t *)iov[i].iov_base + off, take);
		got += take;
		off += take;
		if (off == iov[i].iov_len) {
			i++;
			off = 0;
		}
	}
	if (got > BTH_MASKED)
		h[n + BTH_MASKED] = 0xff;
	crc = crc32_gzip_refl(ICRC_SEED, h, n + got);

	/* The rest, in place. */
	for (; i < iovcnt; i++, off = 0)
		if (iov[i].iov_len > off)
			crc = crc32_gzip_refl(crc, (const uint8_t *)iov[i].iov_base + off,
					      iov[i].iov_len - off);
	vector_upper_clear();
	return crc;
}

uint32_t sr_icrc(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		 const struct iovec *iov, int iovcnt)
{
	return sr_icrc_id(sgid, dgid, sport, dport, 0, iov, iovcnt);
}

bool sr_icrc_ok(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		const struct iovec *iov, int iovcnt, const uint8_t icrc[SR_ICRC_LEN])
{
	return sr_icrc_id(sgid, dgid, sport, dport, 0, iov, iovcnt) == sr_icrc_get(icrc);
}

/*
 * GF(2)[x] modulo the CRC polynomial, in the reflected representation
 * (bit 31 is x^0): a * b mod P.
 */
static uint32_t mulmod(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (; m; m >>= 1) {
		if (a & m)
			p ^= b;
		b = b & 1 ? (b >> 1) ^ CRC_POLY : b >> 1;
	}
	return p;
}

/* x^(8 n) mod P: the effect on a CRC of n more bytes after it. */
static uint32_t x8n(size_t n)
{
	uint32_t r = 1u << 31, sq = 1u << 23; /* 1 and x^8 */

	for (; n; n >>= 1) {
		if (n & 1)
			r = mulmod(r, sq);
		sq = mulmod(sq, sq);
	}
	return r;
}

/* The CRC register, from 0, after two bytes (no inversion): linear in them. */
static uint32_t raw2(uint16_t v)
{
	uint32_t c = 0;

	for (int byte = 0; byte < 2; byte++) {
		c ^= byte ? (v & 0xff) : (v >> 8);
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC_POLY : c >> 1;
	}
	return c;
}

/*
 * Two pseudo-packets of equal length that differ only in the IPv4
 * identification have CRCs that differ by raw2(id0 ^ id1) * x^(8 n), n
 * being the number of bytes after the field: a linear, injective map of
 * the 16 bits.  So the identification is the solution of 16 unknowns in 32
 * equations, found by elimination (an XOR basis keyed by leading bit).
 * Everything but the difference depends on the length alone, so it is
 * kept per thread for the last few lengths seen (packets of a stream
 * mostly have one or two).
 */
struct id_map {
	size_t len; /* UDP payload without the ICRC; 0: empty */
	uint32_t shift;
	uint32_t vec[32], comb[32];
	uint32_t delta[16]; /* the CRC difference identification bit b makes */
};

/*
 * x^(8 n) for the bytes after the identification, by length: what every
 * map below starts from.  Kept process-wide in single 64-bit words (length
 * + 1 above, the value below), so that racing threads at worst compute it
 * twice.  (Nothing here is in TLS: a library that the loader places in the
 * static TLS block, the initial-exec model of shm/epoch.h, must keep its
 * thread-local data small, or programs that dlopen it, UCX's modules, fail
 * to load it.)
 */
static uint32_t id_shift(size_t len)
{
	static _Atomic uint64_t cache[16];
	_Atomic uint64_t *c = &cache[len % 16];
	uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
	uint32_t shift;

	if (v >> 32 == len + 1)
		return (uint32_t)v;
	shift = x8n((IPV4_LEN - IPV4_ID_OFFSET - 2) + UDP_LEN + len);
	atomic_store_explicit(c, (uint64_t)(len + 1) << 32 | shift, memory_order_relaxed);
	return shift;
}

/* Each thread's maps for the last lengths it saw (core/thread_obj.h: not
 * in TLS); without memory the caller builds a map on its stack. */
static struct sr_thread_obj id_maps = SR_THREAD_OBJ(8 * sizeof(struct id_map), NULL);

static const struct id_map *id_map(size_t len, struct id_map *spare)
{
	struct id_map *cache = sr_thread_obj(&id_maps);
	struct id_map *m = cache ? &cache[len % 8] : spare;

	if (m->len == len && cache)
		return m;
	memset(m, 0, sizeof(*m));
	m->len = len;
	m->shift = id_shift(len);
	for (int b = 0; b < 16; b++) {
		uint32_t v = mulmod(raw2((uint16_t)(1u << b)), m->shift), cb = 1u << b;

		m->delta[b] = v;

		for (int top = 31; top >= 0 && v; top--) {
			if (!(v >> top & 1))
				continue;
			if (!m->vec[top]) {
				m->vec[top] = v;
				m->comb[top] = cb;
				break;
			}
			v ^= m->vec[top];
			cb ^= m->comb[top];
		}
	}
	return m;
}

/* The identification that explains the difference d, or -EBADMSG. */
static int solve_id(uint32_t d, size_t len)
{
	struct id_map spare;
	const struct id_map *m = id_map(len, &spare);
	uint32_t c = 0;

	for (int top = 31; top >= 0 && d; top--) {
		if (!(d >> top & 1))
			continue;
		if (!m->vec[top])
			return -EBADMSG;
		d ^= m->vec[top];
		c ^= m->comb[top];
	}
	return d ? -EBADMSG : (int)c;
}

static size_t iov_len(const struct iovec *iov, int iovcnt)
{
	size_t len = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* Linear in the identification's bits: the XOR of each set bit's
 * difference, from the thread's map for this length (a GSO send asks for
 * every segment's, at the same length). */
uint32_t sr_icrc_id_delta(size_t len, uint16_t id)
{
	struct id_map spare;
	const struct id_map *m = id_map(len, &spare);
	uint32_t d = 0;

	for (int b = 0; id; b++, id >>= 1)
		if (id & 1)
			d ^= m->delta[b];
	return d;
}

int sr_icrc_ipv4_id(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		    const struct iovec *iov, int iovcnt, const uint8_t icrc[SR_ICRC_LEN])
{
	uint32_t d;

	if (!sr_gid_pair_is_v4(sgid, dgid))
		return -EINVAL;
	d = sr_icrc_id(sgid, dgid, sport, dport, 0, iov, iovcnt) ^ sr_icrc_get(icrc);
	return d ? solve_id(d, iov_len(iov, iovcnt)) : 0;
}

bool sr_icrc_ok_upto(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		     const struct iovec *iov, int iovcnt, const uint8_t icrc[SR_ICRC_LEN],
		     uint16_t max_id)
{
	uint32_t d = sr_icrc_id(sgid, dgid, sport, dport, 0, iov, iovcnt) ^ sr_icrc_get(icrc);
	int id;

	if (!d)
		return true;
	if (!max_id || !sr_gid_pair_is_v4(sgid, dgid))
		return false;
	id = solve_id(d, iov_len(iov, iovcnt));
	return id > 0 && id <= max_id;
}
