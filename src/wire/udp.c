/*
 * RoCEv2 datagrams through kernel UDP sockets (see udp.h).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "wire/gid.h"
#include "wire/icrc.h"
#include "wire/udp.h"

int sr_udp_socket(uint16_t port, uint16_t *bound)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	socklen_t len = sizeof(sa);
	int fd, zero = 0, one = 1, pmtu4 = IP_PMTUDISC_DO, pmtu6 = IPV6_PMTUDISC_DO;
	int buf = 8 << 20;

	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	/* DF, and for IPv4 identification 0 on unconnected sockets (icrc.h) */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu4, sizeof(pmtu4));
	setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof(pmtu6));
	/* multicast: this host's members get a datagram through memory, the
	 * kernel must not hand it back to our own socket as well */
	setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &zero, sizeof(zero));
	setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &zero, sizeof(zero));
	/* the destination address of each datagram: the ICRC covers it */
	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	/* past rmem_max/wmem_max where we may (root, CAP_NET_ADMIN): a burst
	 * of a whole window must not overflow the receiver */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	*bound = ntohs(sa.sin6_port);
	return fd;
}

void sr_udp_build(struct sr_udp_pkt *t, const uint8_t sgid[16], const uint8_t dgid[16],
		  uint16_t sport, const uint8_t *hdr, unsigned hlen, const struct iovec *pay,
		  unsigned npay, uint32_t paylen)
{
	unsigned pad = (4 - (paylen & 3)) & 3, n = 0;
	struct cmsghdr *cm;

	memcpy(t->hdr, hdr, hlen);
	t->hdr[1] = (uint8_t)((t->hdr[1] & ~0x30) | (pad << 4));
	t->iov[n++] = (struct iovec){t->hdr, hlen};
	for (unsigned i = 0; i < npay && n < SR_UDP_MAX_IOV - 1; i++)
		if (pay[i].iov_len)
			t->iov[n++] = pay[i];
	memset(t->trailer, 0, pad);
	if (pad)
		t->iov[n++] = (struct iovec){t->trailer, pad};
	sr_icrc_put(t->trailer + pad, sr_icrc(sgid, dgid, sport, SR_ROCE_PORT, t->iov, (int)n));
	if (pad)
		t->iov[n - 1].iov_len = pad + SR_ICRC_LEN;
	else
		t->iov[n++] = (struct iovec){t->trailer, SR_ICRC_LEN};
	t->niov = n;
	memset(&t->dst, 0, sizeof(t->dst));
	t->dst.sin6_family = AF_INET6;
	t->dst.sin6_port = htons(SR_ROCE_PORT);
	memcpy(&t->dst.sin6_addr, dgid, 16);
	memset(&t->ctl, 0, sizeof(t->ctl));
	cm = &t->ctl.align;
	if (sr_gid_is_v4(sgid)) {
		struct in_pktinfo pi = {0};

		memcpy(&pi.ipi_spec_dst, sgid + 12, 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	} else {
		struct in6_pktinfo pi = {0};

		memcpy(&pi.ipi6_addr, sgid, 16);
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	}
	t->mh = (struct msghdr){.msg_name = &t->dst,
				.msg_namelen = sizeof(t->dst),
				.msg_iov = t->iov,
				.msg_iovlen = n,
				.msg_control = t->ctl.buf,
				.msg_controllen = CMSG_SPACE(cm->cmsg_len - CMSG_LEN(0))};
}
