/*
 * Ethernet/IP/UDP headers for captures (see frame.h), with the Internet
 * checksums (RFC 1071) computed over an iovec that may split the payload
 * at any byte.
 */
#include <string.h>

#include "wire/frame.h"
#include "wire/gid.h"

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define IPPROTO_UDP_   17

static inline void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void sr_frame_mac(uint8_t mac[6], const uint8_t gid[16])
{
	mac[0] = 0x02; /* locally administered, unicast */
	memcpy(mac + 1, gid + 11, 5);
}

/* One's-complement sum state: a wide accumulator and the byte parity. */
struct csum {
	uint64_t sum;
	size_t odd; /* the next byte is the low half of a 16-bit word */
};

static void csum_add(struct csum *c, const uint8_t *p, size_t n)
{
	if (n && c->odd) {
		c->sum += *p++;
		n--;
		c->odd = 0;
	}
	for (; n >= 2; p += 2, n -= 2)
		c->sum += (uint32_t)p[0] << 8 | p[1];
	if (n) {
		c->sum += (uint32_t)p[0] << 8;
		c->odd = 1;
	}
}

static uint16_t csum_fold(const struct csum *c)
{
	uint64_t s = c->sum;

	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

size_t sr_frame_hdr(uint8_t out[SR_FRAME_HDR_MAX], const uint8_t sgid[16], const uint8_t dgid[16],
		    uint16_t sport, uint16_t dport, uint16_t ip_id, const struct iovec *iov,
		    int iovcnt)
{
	bool v4 = sr_gid_pair_is_v4(sgid, dgid);
	size_t len = 0, iplen = v4 ? 20 : 40, udp_len;
	struct csum c = {0, 0};
	uint8_t *ip = out + SR_FRAME_ETH_LEN, *udp = ip + iplen, pseudo[4];
	uint16_t check;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	udp_len = 8 + len;
	if (udp_len + (v4 ? iplen : 0) > 0xffff)
		return 0;

	sr_frame_mac(out, dgid);
	sr_frame_mac(out + 6, sgid);
	put16(out + 12, v4 ? ETHERTYPE_IPV4 : ETHERTYPE_IPV6);

	if (v4) {
		struct csum hc = {0, 0};

		ip[0] = 0x45;
		ip[1] = 0;
		put16(ip + 2, (uint32_t)(iplen + udp_len));
		put16(ip + 4, ip_id);
		put16(ip + 6, 0x4000); /* DF */
		ip[8] = SR_FRAME_TTL;
		ip[9] = IPPROTO_UDP_;
		put16(ip + 10, 0);
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
		csum_add(&hc, ip, 20);
		put16(ip + 10, csum_fold(&hc));
		csum_add(&c, ip + 12, 8); /* UDP pseudo-header: addresses */
	} else {
		put16(ip, 0x6000);
		put16(ip + 2, 0);
		put16(ip + 4, (uint32_t)udp_len);
		ip[6] = IPPROTO_UDP_;
		ip[7] = SR_FRAME_TTL;
		memcpy(ip + 8, sgid, 16);
		memcpy(ip + 24, dgid, 16);
		csum_add(&c, ip + 8, 32);
	}
	/* The rest of the pseudo-header: zero, protocol, UDP length (RFC 768;
	 * RFC 8200 8.1 has a 32-bit length, which sums the same here). */
	pseudo[0] = 0;
	pseudo[1] = IPPROTO_UDP_;
	put16(pseudo + 2, (uint32_t)udp_len);
	csum_add(&c, pseudo, 4);

	put16(udp, sport);
	put16(udp + 2, dport);
	put16(udp + 4, (uint32_t)udp_len);
	put16(udp + 6, 0);
	csum_add(&c, udp, 8);
	for (int i = 0; i < iovcnt; i++)
		csum_add(&c, iov[i].iov_base, iov[i].iov_len);
	check = csum_fold(&c);
	put16(udp + 6, check ? check : 0xffff); /* 0 means "none": sent as all ones */
	return SR_FRAME_ETH_LEN + iplen + 8;
}
