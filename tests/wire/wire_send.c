/*
 * wire_send: sends RoCEv2 datagrams through a kernel UDP socket the way
 * the engine will (unconnected, IP_PMTUDISC_DO), each carrying the ICRC
 * sr_icrc() predicts for the IP header the kernel is going to build, so a
 * capture can check the prediction (tests/wire/capture.sh).
 *
 *   wire_send SRC DST plain N      N datagrams, one sendto each
 *   wire_send SRC DST gso N        one sendmsg of N segments (UDP_SEGMENT),
 *                                  segment k predicted with identification k
 *
 * SRC and DST are IPv4 or IPv6 addresses (same family); the destination
 * port is 4791, the source port the one the kernel binds.  PSNs start at
 * 0x100000 (plain) or 0x200000 (gso), plus 0x10000 for IPv6, so listings
 * can be concatenated.  One line per datagram on stdout: PSN IPID ICRC
 * (ICRC: 8 hex digits, the CRC value).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/gid.h"
#include "wire/icrc.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define SEG_PAY 256 /* payload of each GSO segment: 12 + 256 + 4 bytes */

static int to_gid(const char *a, uint8_t gid[16], struct sockaddr_storage *ss, uint16_t port)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, a, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		sr_gid_from_ipv4(gid, (const uint8_t *)&s4->sin_addr);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, a, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(gid, &s6->sin6_addr, 16);
		return AF_INET6;
	}
	return -1;
}

/* A SEND packet: BTH (opcode, dqpn 0x000abc, psn) and a patterned payload. */
static size_t make(uint8_t *p, uint8_t opcode, uint32_t psn, size_t pay)
{
	unsigned pad = (unsigned)(-pay & 3);

	memset(p, 0, 12);
	p[0] = opcode;
	p[1] = (uint8_t)(pad << 4);
	p[2] = p[3] = 0xff;
	p[6] = 0x0a;
	p[7] = 0xbc;
	p[9] = (uint8_t)(psn >> 16);
	p[10] = (uint8_t)(psn >> 8);
	p[11] = (uint8_t)psn;
	for (size_t i = 0; i < pay; i++)
		p[12 + i] = (uint8_t)(psn + i);
	memset(p + 12 + pay, 0, pad);
	return 12 + pay + pad;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage src, dst;
	socklen_t sl = sizeof(src);
	uint8_t sgid[16], dgid[16];
	int fam, fd, n, gso, on;
	uint32_t psn0;
	uint16_t sport;

	if (argc != 5 || (strcmp(argv[3], "plain") && strcmp(argv[3], "gso"))) {
		fprintf(stderr, "usage: %s SRC DST plain|gso N\n", argv[0]);
		return 2;
	}
	fam = to_gid(argv[1], sgid, &src, 0);
	if (fam < 0 || to_gid(argv[2], dgid, &dst, 4791) != fam) {
		fprintf(stderr, "wire_send: bad addresses\n");
		return 2;
	}
	gso = !strcmp(argv[3], "gso");
	n = atoi(argv[4]);
	fd = socket(fam, SOCK_DGRAM, 0);
	on = fam == AF_INET ? IP_PMTUDISC_DO : IPV6_PMTUDISC_DO;
	if (fd < 0 ||
	    setsockopt(fd, fam == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		       fam == AF_INET ? IP_MTU_DISCOVER : IPV6_MTU_DISCOVER, &on, sizeof(on)) ||
	    bind(fd, (struct sockaddr *)&src,
		 fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) ||
	    getsockname(fd, (struct sockaddr *)&src, &sl)) {
		perror("wire_send: socket");
		return 1;
	}
	sport = ntohs(((struct sockaddr_in *)&src)->sin_port); /* same offset in sin6 */
	psn0 = (gso ? 0x200000u : 0x100000u) + (fam == AF_INET6 ? 0x10000u : 0);

	if (!gso) {
		uint8_t buf[12 + 1024 + 3 + 4];

		for (int i = 0; i < n; i++) {
			uint32_t psn = psn0 + (uint32_t)i;
			size_t len = make(buf, 0x04, psn, (size_t)(i * 37) % 1024);
			struct iovec iov = {buf, len};
			uint32_t icrc = sr_icrc(sgid, dgid, sport, 4791, &iov, 1);

			sr_icrc_put(buf + len, icrc);
			if (sendto(fd, buf, len + 4, 0, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
				perror("wire_send: sendto");
				return 1;
			}
			printf("%u 0 %08x\n", psn, icrc);
		}
	} else {
		size_t seg = 12 + SEG_PAY + 4;
		uint8_t *buf = malloc(seg * (size_t)n);
		uint16_t gso_size = (uint16_t)seg;
		char cbuf[CMSG_SPACE(sizeof(uint16_t))] = {0};
		struct iovec iov = {buf, 0};
		struct msghdr mh = {.msg_name = &dst,
				    .msg_namelen = sizeof(dst),
				    .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		/* n - 1 full SEND_MIDDLE segments, then a shorter SEND_LAST */
		for (int k = 0; k < n; k++) {
			uint32_t psn = psn0 + (uint32_t)k;
			uint8_t *p = buf + iov.iov_len;
			size_t len = make(p, k < n - 1 ? 0x01 : 0x02, psn,
					  k < n - 1 ? SEG_PAY : SEG_PAY / 2 + 1);
			struct iovec one = {p, len};
			uint32_t icrc = sr_icrc_id(sgid, dgid, sport, 4791, (uint16_t)k, &one, 1);

			sr_icrc_put(p + len, icrc);
			iov.iov_len += len + 4;
			printf("%u %d %08x\n", psn, fam == AF_INET ? k : 0, icrc);
		}
		cm->cmsg_level = IPPROTO_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(cm), &gso_size, sizeof(gso_size));
		if (sendmsg(fd, &mh, 0) < 0) {
			perror("wire_send: sendmsg UDP_SEGMENT");
			return 1;
		}
		free(buf);
	}
	close(fd);
	return 0;
}
