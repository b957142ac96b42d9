/*
 * Unit test of src/wire: the ICRC against the independent reference
 * (tests/wire/icrc_ref.c) on random packets, IPv4 and IPv6, random ports
 * and identifications, payloads of 0..9000 bytes with pads, split into
 * random iovecs with zero-length entries; known vectors from scapy (IPv4)
 * and from Python's zlib over a hand-built pseudo-packet (IPv6); the
 * masked fields really are masked; sr_icrc_ipv4_id() recovers the
 * identification and rejects corruption; frame headers carry valid
 * checksums; the pcap writer keeps whole records under concurrent appends
 * and cuts a torn record off when a write fails.  The packet parser
 * (wire/opcode.c) reads the independent generator's packets of every
 * opcode, XRC's included, with the headers and payload it wrote.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "check.h"
#include "icrc_ref.h"
#include "roce_pkt.h"
#include "wire/bth.h"
#include "wire/frame.h"
#include "wire/gid.h"
#include "wire/icrc.h"
#include "wire/pcap.h"

static uint8_t *unhex(const char *s, size_t *n)
{
	size_t len = strlen(s) / 2;
	uint8_t *b = malloc(len + 1);

	for (size_t i = 0; i < len; i++)
		sscanf(s + 2 * i, "%2hhx", &b[i]);
	*n = len;
	return b;
}

static void gid4(uint8_t gid[16], uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	const uint8_t addr[4] = {a, b, c, d};

	sr_gid_from_ipv4(gid, addr);
}

static void test_engine(void)
{
	static const uint8_t ff[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

	CHECK_CTX("engine");
	CHECK_EQ(sr_crc32_bitwise("123456789", 9), 0xcbf43926u); /* the CRC-32 check value */
	/* rxe's seed 0xDEBB20E3 is the un-inverted state after 8 x 0xFF. */
	CHECK_EQ(~sr_crc32_bitwise(ff, 8), 0xdebb20e3u);
}

/* Known vectors: the UDP payload without ICRC, and the ICRC. */
static void test_vectors(void)
{
	uint8_t s[16], d[16];
	size_t n;
	uint8_t *b, wire[4];
	struct iovec iov;

	/* scapy 2.5: Ether()/IP(src=10.0.0.1, dst=10.0.0.2, id=0, flags=DF)/
	 * UDP(sport=0xc123, dport=4791)/BTH(opcode=4, padcount=3, dqpn=0x11,
	 * psn=1, ackreq=1)/Raw(b"hello\0\0\0"): ICRC bytes 31 d7 a5 6f. */
	CHECK_CTX("vector v4 send_only");
	gid4(s, 10, 0, 0, 1);
	gid4(d, 10, 0, 0, 2);
	b = unhex("0430ffff000000118000000168656c6c6f000000", &n);
	iov = (struct iovec){b, n};
	CHECK_EQ(sr_icrc(s, d, 0xc123, 4791, &iov, 1), 0x6fa5d731);
	CHECK_EQ(sr_icrc_ref(s, d, 0xc123, 4791, 0, &iov, 1), 0x6fa5d731);
	sr_icrc_put(wire, 0x6fa5d731);
	CHECK(wire[0] == 0x31 && wire[1] == 0xd7 && wire[2] == 0xa5 && wire[3] == 0x6f);
	CHECK(sr_icrc_ok(s, d, 0xc123, 4791, &iov, 1, wire));
	free(b);

	/* scapy: IP(192.168.1.7 -> 172.16.0.9, id=0x1234, DF, ttl=3, tos=2)/
	 * UDP(0xd00d -> 4791)/BTH(ACK, fecn=1, becn=1, dqpn=0xabcdef,
	 * psn=0xfffffe)/AETH(0x1f, 0x42). */
	CHECK_CTX("vector v4 ack id 0x1234");
	gid4(s, 192, 168, 1, 7);
	gid4(d, 172, 16, 0, 9);
	b = unhex("1100ffffc0abcdef00fffffe1f000042", &n);
	iov = (struct iovec){b, n};
	CHECK_EQ(sr_icrc_id(s, d, 0xd00d, 4791, 0x1234, &iov, 1), 0x56aa7c54);
	CHECK_EQ(sr_icrc_ref(s, d, 0xd00d, 4791, 0x1234, &iov, 1), 0x56aa7c54);
	sr_icrc_put(wire, 0x56aa7c54);
	CHECK_EQ(sr_icrc_ipv4_id(s, d, 0xd00d, 4791, &iov, 1, wire), 0x1234);
	free(b);

	/* Python zlib.crc32 over a hand-built IPv6 pseudo-packet:
	 * fe80::1 -> 2001:db8::2, UDP 0xc000 -> 4791, UD SEND_ONLY with DETH
	 * (Q_Key 0x80010000, source QP 1), payload "RoCEv2!\0". */
	CHECK_CTX("vector v6 ud send");
	memset(s, 0, 16);
	s[0] = 0xfe;
	s[1] = 0x80;
	s[15] = 1;
	memset(d, 0, 16);
	d[0] = 0x20;
	d[1] = 0x01;
	d[2] = 0x0d;
	d[3] = 0xb8;
	d[15] = 2;
	b = unhex("6400ffff00000001800000078001000000000001526f434576322100", &n);
	iov = (struct iovec){b, n};
	CHECK_EQ(sr_icrc(s, d, 0xc000, 4791, &iov, 1), 0x6ffddd52);
	CHECK_EQ(sr_icrc_ref(s, d, 0xc000, 4791, 0, &iov, 1), 0x6ffddd52);
	CHECK_EQ(sr_icrc_ipv4_id(s, d, 0xc000, 4791, &iov, 1, wire), -EINVAL);
	free(b);
}

/* Splits [p, p+n) into up to max random iovec entries, some empty. */
static int rand_split(uint64_t *rng, uint8_t *p, size_t n, struct iovec *iov, int max)
{
	int cnt = 0;

	while (cnt < max - 1 && roce_rand(rng) % 3) {
		size_t take = n ? (size_t)(roce_rand(rng) % (n + 1)) : 0;

		if (roce_rand(rng) % 4 == 0)
			take = 0;
		else if (roce_rand(rng) % 3 == 0 && n)
			take =
			    (size_t)(roce_rand(rng) % (n < 14 ? n + 1 : 14)); /* inside the BTH */
		iov[cnt++] = (struct iovec){p, take};
		p += take;
		n -= take;
	}
	iov[cnt++] = (struct iovec){p, n};
	return cnt;
}

static void test_random(void)
{
	uint64_t rng = 0x5eed1234abcdull;
	uint8_t *buf = malloc(ROCE_PKT_HDR_MAX + 9000 + 3);
	unsigned long v4 = 0, v6 = 0, bad_pass = 0;

	for (int it = 0; it < 4000; it++) {
		uint8_t s[16], d[16], wire[4];
		struct roce_pkt pkt;
		struct iovec iov[12];
		int kind = (int)(roce_rand(&rng) % 4), cnt;
		uint16_t sport = (uint16_t)roce_rand(&rng), dport = (uint16_t)roce_rand(&rng);
		uint16_t id = roce_rand(&rng) & 1 ? (uint16_t)roce_rand(&rng) : 0;

		if (id && roce_rand(&rng) & 1)
			id &= 63; /* a GSO segment's */
		size_t max = it < 100 ? (size_t)it : (size_t)(roce_rand(&rng) % 9001);
		uint32_t got, want;

		/* kind 0: v4 pair; 1: v6 pair; 2, 3: mixed pairs travel as IPv6 */
		roce_rand_gid(&rng, s, kind == 0 || kind == 2);
		roce_rand_gid(&rng, d, kind == 0 || kind == 3);
		roce_pkt_make(buf, max, &rng, &pkt);
		cnt = rand_split(&rng, buf, pkt.len, iov, 12);
		CHECK_CTX("random #%d kind %d opcode 0x%02x len %zu iovcnt %d id %u", it, kind,
			  pkt.opcode, pkt.len, cnt, id);
		got = sr_icrc_id(s, d, sport, dport, id, iov, cnt);
		want = sr_icrc_ref(s, d, sport, dport, id, iov, cnt);
		CHECK_EQ(got, want);
		if (kind) {
			/* IPv6 has no identification. */
			CHECK_EQ(sr_icrc(s, d, sport, dport, iov, cnt), want);
			v6++;
		} else {
			CHECK_EQ(sr_icrc(s, d, sport, dport, iov, cnt),
				 sr_icrc_ref(s, d, sport, dport, 0, iov, cnt));
			v4++;
		}
		sr_icrc_put(wire, got);
		CHECK(sr_icrc_ok(s, d, sport, dport, iov, cnt, wire) == (kind || !id));
		if (!kind)
			CHECK_EQ(sr_icrc_ipv4_id(s, d, sport, dport, iov, cnt, wire), id);
		/* GSO: the ICRC for id = the one for 0 XOR a function of the length */
		if (!kind)
			CHECK_EQ(sr_icrc_id(s, d, sport, dport, 0, iov, cnt) ^
				     sr_icrc_id_delta(pkt.len, id),
				 got);
		/* a receiver taking GSO segments: identifications up to 63 */
		CHECK(sr_icrc_ok_upto(s, d, sport, dport, iov, cnt, wire, 63) ==
		      (kind || id <= 63));
		CHECK(sr_icrc_ok_upto(s, d, sport, dport, iov, cnt, wire, 0) == (kind || !id));

		/* FECN/BECN may change in flight: not covered. */
		buf[4] ^= 0xc0;
		CHECK_EQ(sr_icrc_id(s, d, sport, dport, id, iov, cnt), got);
		buf[4] ^= 0xc0;
		/* Anything else is: one flipped bit anywhere in the packet. */
		{
			size_t at = (size_t)(roce_rand(&rng) % pkt.len);
			uint8_t bit = (uint8_t)(1u << (roce_rand(&rng) % 8));

			if (at == 4)
				at = 5;
			buf[at] ^= bit;
			CHECK(sr_icrc_id(s, d, sport, dport, id, iov, cnt) != got);
			if (!kind && sr_icrc_ipv4_id(s, d, sport, dport, iov, cnt, wire) >= 0)
				bad_pass++; /* a corrupt packet taken with another id */
			buf[at] ^= bit;
		}
		/* Addresses and ports count. */
		CHECK(sr_icrc_id(s, d, sport ^ 1, dport, id, iov, cnt) != got);
		s[15] ^= 0x10;
		CHECK(sr_icrc_id(s, d, sport, dport, id, iov, cnt) != got);
	}
	printf("random: %lu IPv4, %lu IPv6 packets; %lu corrupt IPv4 packets passed "
	       "sr_icrc_ipv4_id (expect ~2^-16 of them)\n",
	       v4, v6, bad_pass);
	CHECK(bad_pass <= 2);
	free(buf);
}

static uint16_t sum16(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

static void test_frame(void)
{
	uint8_t s[16], d[16], h[SR_FRAME_HDR_MAX], pay[64] = {0x04, 0, 0xff, 0xff};
	struct iovec iov[3] = {{pay, 13}, {pay + 13, 0}, {pay + 13, 51}};
	uint8_t big[8];
	struct iovec too_big = {big, 65536};

	CHECK_CTX("frame v4");
	gid4(s, 10, 1, 2, 3);
	gid4(d, 10, 4, 5, 6);
	CHECK_EQ(sr_frame_hdr(h, s, d, 0xc001, 4791, 7, iov, 3), 42);
	CHECK(h[0] == 0x02 && h[1] == 0xff && h[2] == 10 && h[5] == 6); /* dst MAC */
	CHECK(h[12] == 0x08 && h[13] == 0x00);
	CHECK_EQ(sum16(h + 14, 20), 0xffff); /* header checksum verifies */
	CHECK(h[14 + 4] == 0 && h[14 + 5] == 7 && h[14 + 6] == 0x40 && h[14 + 8] == 64);
	CHECK_EQ(h[14 + 2] << 8 | h[14 + 3], 20 + 8 + 64);
	CHECK_EQ(sr_frame_hdr(h, s, d, 0, 4791, 0, &too_big, 1), 0);

	CHECK_CTX("frame v6");
	roce_rand_gid(&(uint64_t){42}, s, 0);
	CHECK_EQ(sr_frame_hdr(h, s, d, 0xc001, 4791, 7, iov, 3), 62);
	CHECK(h[12] == 0x86 && h[13] == 0xdd && h[14] == 0x60 && h[14 + 7] == 64);
	CHECK_EQ(h[14 + 4] << 8 | h[14 + 5], 8 + 64);
	CHECK(h[14 + 40 + 6] || h[14 + 40 + 7]); /* IPv6: never a zero checksum */
}

struct writer_arg {
	struct sr_pcap *pc;
	int seed;
	int errors;
};

static void *writer(void *p)
{
	struct writer_arg *a = p;
	uint64_t rng = 0x1234 + (uint64_t)a->seed;
	uint8_t buf[ROCE_PKT_HDR_MAX + 2000 + 3 + 4], s[16], d[16];

	for (int i = 0; i < 500; i++) {
		struct roce_pkt pkt;
		struct iovec iov[12];
		int cnt;
		size_t len;

		roce_rand_gid(&rng, s, a->seed & 1);
		roce_rand_gid(&rng, d, a->seed & 1);
		len = roce_pkt_make(buf, 2000, &rng, &pkt);
		sr_icrc_put(buf + len, sr_icrc(s, d, 0xc000, 4791, &(struct iovec){buf, len}, 1));
		cnt = rand_split(&rng, buf, len + 4, iov, 12);
		if (sr_pcap_write(a->pc, NULL, s, d, 0xc000, 4791, 0, iov, cnt))
			a->errors++;
	}
	return NULL;
}

/* Walks a pcap file: whole records to the end; returns their number or -1. */
static long pcap_records(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint32_t fh[6], rh[4];
	long n = 0;
	char *skip = malloc(1 << 17);

	if (!f || fread(fh, 4, 6, f) != 6 || fh[0] != 0xa1b23c4d || fh[5] != 1)
		n = -1;
	while (n >= 0) {
		size_t r = fread(rh, 4, 4, f);

		if (r == 0 && feof(f))
			break;
		if (r != 4 || rh[2] != rh[3] || rh[2] > (1 << 17) || rh[3] < 42 ||
		    fread(skip, 1, rh[2], f) != rh[2] || rh[1] >= 1000000000u)
			n = -1;
		else
			n++;
	}
	if (f)
		fclose(f);
	free(skip);
	return n;
}

static void test_pcap(void)
{
	char path[] = "/tmp/sr_test_pcap_XXXXXX";
	struct writer_arg args[4];
	pthread_t th[4];
	struct sr_pcap *pc;
	int fd = mkstemp(path), status;
	pid_t pid;

	CHECK_CTX("pcap threads");
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(sr_pcap_open(&pc, path), 0);
	for (int t = 0; t < 4; t++) {
		args[t] = (struct writer_arg){pc, t, 0};
		pthread_create(&th[t], NULL, writer, &args[t]);
	}
	for (int t = 0; t < 4; t++) {
		pthread_join(th[t], NULL);
		CHECK_EQ(args[t].errors, 0);
	}
	CHECK_EQ(sr_pcap_close(pc), 0);
	CHECK_EQ(pcap_records(path), 2000);

	CHECK_CTX("pcap errors");
	CHECK_EQ(sr_pcap_open(&pc, "/nonexistent/dir/x.pcap"), -ENOENT);
	/* A file size limit makes a write fail half-way: the torn record is
	 * cut off, the error sticks, and the file reads to the end. */
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = {20000, 20000};
		uint8_t pay[1000] = {0x04, 0, 0xff, 0xff}, s[16], d[16];
		struct iovec iov = {pay, sizeof(pay)};
		int ret = 0, i;

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		gid4(s, 10, 0, 0, 1);
		gid4(d, 10, 0, 0, 2);
		if (sr_pcap_open(&pc, path))
			_exit(10);
		for (i = 0; i < 100 && !ret; i++)
			ret = sr_pcap_write(pc, NULL, s, d, 1, 4791, 0, &iov, 1);
		if (ret != -EFBIG)
			_exit(11);
		if (sr_pcap_write(pc, NULL, s, d, 1, 4791, 0, &iov, 1) != -EFBIG)
			_exit(12);
		if (sr_pcap_close(pc) != -EFBIG)
			_exit(13);
		_exit(i - 1 == 18 ? 0 : 14); /* 24 + 18 records of 1058 bytes fit in 20000 */
	}
	waitpid(pid, &status, 0);
	CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
	CHECK_EQ(pcap_records(path), 18);
	unlink(path);
}

/* sr_pkt_parse against roce_pkt.c's own layout table: every opcode it
 * makes is one of ours (CNP too, since the engine reacts to it), with the
 * header length, payload and XRCETH the generator wrote. */
static void test_parse(void)
{
	uint64_t rng = 0xa14a14ull;
	uint8_t *buf = malloc(ROCE_PKT_HDR_MAX + 9000 + 3 + SR_ICRC_LEN);
	unsigned xrc = 0;

	for (int it = 0; it < 4000; it++) {
		struct roce_pkt pkt;
		struct sr_pkt p;
		enum sr_drop why;
		bool xrc_req;

		roce_pkt_make(buf, (size_t)(roce_rand(&rng) % 4097), &rng, &pkt);
		memset(buf + pkt.len, 0, SR_ICRC_LEN);
		why = sr_pkt_parse(buf, (uint32_t)(pkt.len + SR_ICRC_LEN), &p);
		CHECK_CTX("parse #%d opcode 0x%02x len %zu", it, pkt.opcode, pkt.len);
		CHECK_EQ(why, SR_DROP_NONE);
		if (why)
			continue;
		CHECK_EQ(p.op->hdr_len, pkt.hdr_len);
		CHECK_EQ(p.paylen, pkt.pay_len);
		CHECK(p.payload == buf + pkt.hdr_len);
		CHECK_EQ(p.bth.dqpn, pkt.dqpn);
		CHECK_EQ(p.bth.psn, pkt.psn);
		/* A14: XRC requests carry the XRCETH, XRC responses do not */
		xrc_req = (pkt.opcode & 0xe0) == SR_TR_XRC && (p.op->flags & SR_OPF_REQ);
		CHECK_EQ(!!(p.op->flags & SR_OPF_XRCETH), xrc_req);
		CHECK(!xrc_req || (pkt.opcode & 0x1f) < 0x0d || (pkt.opcode & 0x1f) > 0x12);
		if (xrc_req) {
			CHECK_EQ(p.xrc_srqn, sr_get_be32(buf + SR_BTH_LEN) & 0xffffff);
			xrc++;
		}
	}
	CHECK(xrc > 0);
	free(buf);
}

int main(void)
{
	test_parse();
	test_engine();
	test_vectors();
	test_random();
	test_frame();
	test_pcap();
	return CHECK_SUMMARY("test_icrc");
}
