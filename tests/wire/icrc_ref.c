/*
 * The reference ICRC (see icrc_ref.h): IBTA vol. 1 7.8.1 and Annex A17
 * read literally.
 */
#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>

#include "icrc_ref.h"

uint32_t sr_crc32_bitwise(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		crc ^= b[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

uint32_t sr_icrc_ref(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t sport, uint16_t dport,
		     uint16_t ip_id, const struct iovec *iov, int iovcnt)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	int v4 = !memcmp(sgid, v4mapped, 12) && !memcmp(dgid, v4mapped, 12);
	size_t pay = 0, iplen = v4 ? sizeof(struct iphdr) : sizeof(struct ip6_hdr), n, off;
	struct udphdr udp;
	uint8_t *buf;
	uint32_t crc;

	for (int i = 0; i < iovcnt; i++)
		pay += iov[i].iov_len;
	n = 8 + iplen + sizeof(udp) + pay;
	buf = malloc(n);
	if (!buf)
		abort();
	memset(buf, 0xff, 8); /* the LRH, all ones */
	off = 8;
	if (v4) {
		struct iphdr ip;

		memset(&ip, 0, sizeof(ip));
		ip.version = 4;
		ip.ihl = 5;
		ip.tos = 0xff;
		ip.tot_len = htons((uint16_t)(iplen + sizeof(udp) + pay + 4));
		ip.id = htons(ip_id);
		ip.frag_off = htons(IP_DF);
		ip.ttl = 0xff;
		ip.protocol = IPPROTO_UDP;
		ip.check = 0xffff;
		memcpy(&ip.saddr, sgid + 12, 4);
		memcpy(&ip.daddr, dgid + 12, 4);
		memcpy(buf + off, &ip, sizeof(ip));
	} else {
		struct ip6_hdr ip6;

		memset(&ip6, 0, sizeof(ip6));
		ip6.ip6_flow = htonl(6u << 28 | 0xff << 20 | 0xfffff);
		ip6.ip6_plen = htons((uint16_t)(sizeof(udp) + pay + 4));
		ip6.ip6_nxt = IPPROTO_UDP;
		ip6.ip6_hlim = 0xff;
		memcpy(&ip6.ip6_src, sgid, 16);
		memcpy(&ip6.ip6_dst, dgid, 16);
		memcpy(buf + off, &ip6, sizeof(ip6));
	}
	off += iplen;
	udp.source = htons(sport);
	udp.dest = htons(dport);
	udp.len = htons((uint16_t)(sizeof(udp) + pay + 4));
	udp.check = 0xffff;
	memcpy(buf + off, &udp, sizeof(udp));
	off += sizeof(udp);
	for (int i = 0; i < iovcnt; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	if (pay > 4)
		buf[8 + iplen + sizeof(udp) + 4] = 0xff; /* BTH: FECN, BECN, reserved */
	crc = sr_crc32_bitwise(buf, n);
	free(buf);
	return crc;
}
