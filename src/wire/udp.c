/*
 * RoCEv2 datagrams through kernel UDP sockets (see udp.h).
 */
#include <errno.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <netinet/udp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "core/own_socket.h"
#include "wire/gid.h"
#include "wire/icrc.h"
#include "wire/udp.h"

static int udp_socket(uint16_t port, bool group, uint16_t *bound)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	socklen_t len = sizeof(sa);
	int fd, zero = 0, one = 1, pmtu4 = IP_PMTUDISC_DO, pmtu6 = IPV6_PMTUDISC_DO;
	int rbuf = SR_UDP_RCVBUF, sbuf = SR_UDP_SNDBUF;

	/* not the application's socket(): own_socket.h */
	fd = sr_own_socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
	/* past rmem_max/wmem_max where we may (root, CAP_NET_ADMIN) */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rbuf, sizeof(rbuf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rbuf, sizeof(rbuf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sbuf, sizeof(sbuf)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sbuf, sizeof(sbuf));
	/* a group's members all take the group's datagrams, and each only
	 * the multicast groups it joined itself (the kernel's default hands
	 * every member every group this host joined) */
	if (group && (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
		      setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero)) ||
		      setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof(zero)))) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	*bound = ntohs(sa.sin6_port);
	return fd;
}

int sr_udp_socket(uint16_t port, uint16_t *bound)
{
	return udp_socket(port, false, bound);
}

/*
 * The kernel's choice of member for each datagram that reaches the group
 * (SO_ATTACH_REUSEPORT_CBPF, unprivileged): classic BPF run on the UDP
 * payload, returning the member's index in the order the members were
 * bound: (QPN >> shift) - salt, modulo n (a power of two).  QP1 goes to
 * member qp1 (the CM agent's own, bound after the n; 0 without one); QP0,
 * the multicast QPN and a datagram too short to load from go to member 0
 * (a failed load returns 0; the kernel's fallback for a bad index is a
 * hash, which would scatter a QP's datagrams).
 */
static int udp_steer(int fd, unsigned shift, unsigned salt, unsigned n, unsigned qp1)
{
	struct sock_filter code[] = {
	    /* A = the BTH's word at offset 4: reserved byte, destination QPN */
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
	    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xFFFFFF),
	    /* the multicast QPN and QP0: the engine's; QP1: the CM agent's */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xFFFFFF, 6, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 6, 0),
	    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 2, 0, 4),
	    BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, shift),
	    BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, n - salt % n),
	    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, n - 1),
	    BPF_STMT(BPF_RET | BPF_A, 0),
	    BPF_STMT(BPF_RET | BPF_K, 0),
	    BPF_STMT(BPF_RET | BPF_K, qp1),
	};
	struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};

	if (n & (n - 1))
		return -EINVAL;
	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) ? -errno
											 : 0;
}

int sr_udp_socket_group(uint16_t port, unsigned shift, unsigned salt, int *fds, unsigned n,
			int *qp1_fd)
{
	uint16_t bound;
	unsigned i;
	int ret = 0, qp1 = -1;

	for (i = 0; i < n && ret >= 0; i++) {
		ret = udp_socket(port, true, &bound);
		fds[i] = ret;
	}
	if (ret >= 0 && qp1_fd) {
		qp1 = udp_socket(port, true, &bound);
		if (qp1 < 0)
			qp1 = -1; /* QP1 then goes to member 0 */
	}
	if (ret >= 0)
		ret = udp_steer(fds[0], shift, salt, n, qp1 >= 0 ? n : 0);
	if (ret >= 0) {
		if (qp1_fd)
			*qp1_fd = qp1;
		return (int)n;
	}
	/* no group (an old kernel, a port taken without SO_REUSEPORT): one
	 * socket takes everything */
	if (qp1 >= 0)
		close(qp1);
	while (i--)
		if (fds[i] >= 0)
			close(fds[i]);
	ret = sr_udp_socket(port, &bound);
	fds[0] = ret;
	if (qp1_fd)
		*qp1_fd = -1;
	return ret < 0 ? ret : 1;
}

/*
 * The interface of a link-local source GID (fe80::/10): a link-local
 * destination means nothing to the kernel without it.  getifaddrs on a
 * miss, the last answer kept per thread (the engine's, a UD poster's).
 */
static uint32_t link_ifindex(const uint8_t sgid[16])
{
	static __thread uint8_t last[16];
	static __thread uint32_t last_if;
	struct ifaddrs *ifa;

	if (last_if && !memcmp(last, sgid, 16))
		return last_if;
	if (getifaddrs(&ifa))
		return 0;
	last_if = 0;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)i->ifa_addr;

		if (a && a->sin6_family == AF_INET6 && !memcmp(&a->sin6_addr, sgid, 16)) {
			last_if = a->sin6_scope_id;
			memcpy(last, sgid, 16);
			break;
		}
	}
	freeifaddrs(ifa);
	return last_if;
}

static bool gid_link_local(const uint8_t gid[16])
{
	return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

size_t sr_udp_route(struct sockaddr_in6 *dst, struct cmsghdr *cm, const uint8_t sgid[16],
		    const uint8_t dgid[16])
{
	memset(dst, 0, sizeof(*dst));
	dst->sin6_family = AF_INET6;
	dst->sin6_port = htons(SR_ROCE_PORT);
	memcpy(&dst->sin6_addr, dgid, 16);
	memset(cm, 0, CMSG_SPACE(sizeof(struct in6_pktinfo)));
	if (sr_gid_is_v4(sgid)) {
		struct in_pktinfo pi = {0};

		memcpy(&pi.ipi_spec_dst, sgid + 12, 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		return CMSG_SPACE(sizeof(pi));
	}
	struct in6_pktinfo pi = {0};

	memcpy(&pi.ipi6_addr, sgid, 16);
	if (gid_link_local(dgid) || gid_link_local(sgid))
		pi.ipi6_ifindex = dst->sin6_scope_id = link_ifindex(sgid);
	cm->cmsg_level = IPPROTO_IPV6;
	cm->cmsg_type = IPV6_PKTINFO;
	cm->cmsg_len = CMSG_LEN(sizeof(pi));
	memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	return CMSG_SPACE(sizeof(pi));
}

void sr_udp_build(struct sr_udp_pkt *t, const uint8_t sgid[16], const uint8_t dgid[16],
		  uint16_t sport, const uint8_t *hdr, unsigned hlen, const struct iovec *pay,
		  unsigned npay, uint32_t paylen)
{
	unsigned pad = (4 - (paylen & 3)) & 3, n = 0;
	size_t ctl_len;

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
	t->len = hlen + paylen + pad + SR_ICRC_LEN;
	ctl_len = sr_udp_route(&t->dst, &t->ctl.align, sgid, dgid);
	t->mh = (struct msghdr){.msg_name = &t->dst,
				.msg_namelen = sizeof(t->dst),
				.msg_iov = t->iov,
				.msg_iovlen = n,
				.msg_control = t->ctl.buf,
				.msg_controllen = ctl_len};
}

int sr_udp_gro(int fd)
{
	int one = 1;

	return setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) ? -errno : 0;
}

bool sr_udp_rx_filled(int fd, unsigned pct)
{
	uint32_t mi[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mi);

	if (!pct)
		return true;
	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) || len <= SK_MEMINFO_RCVBUF * 4)
		return false;
	return (uint64_t)mi[SK_MEMINFO_RMEM_ALLOC] * 100 >= (uint64_t)mi[SK_MEMINFO_RCVBUF] * pct;
}

uint32_t sr_udp_gro_size(struct msghdr *mh)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
		if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
			int seg;

			memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
			return seg > 0 ? (uint32_t)seg : 0;
		}
	return 0;
}

static bool same_path(const struct sr_udp_pkt *a, const struct sr_udp_pkt *b)
{
	return !memcmp(&a->dst.sin6_addr, &b->dst.sin6_addr, sizeof(a->dst.sin6_addr)) &&
	       a->mh.msg_controllen == b->mh.msg_controllen &&
	       !memcmp(a->ctl.buf, b->ctl.buf, a->mh.msg_controllen);
}

/* How many of p[0..n) one GSO send can carry (1: send it alone). */
static unsigned gso_run(const struct sr_udp_pkt *p, unsigned n, unsigned iov_room)
{
	uint32_t bytes = p[0].len;
	unsigned k = 1, iovs = p[0].niov;

	while (k < n && k < SR_UDP_GSO_SEGS) {
		const struct sr_udp_pkt *q = &p[k];

		if (q->len > p[0].len || bytes + q->len > SR_UDP_GSO_BYTES ||
		    iovs + q->niov > iov_room || !same_path(&p[0], q))
			break;
		bytes += q->len;
		iovs += q->niov;
		k++;
		if (q->len < p[0].len)
			break; /* only the last may be shorter */
	}
	return k;
}

/*
 * Segment i of a GSO send leaves with IPv4 identification i (icrc.h), which
 * the ICRC covers: turn each ICRC computed for 0 into the one for i (an
 * XOR, so calling it again undoes it, and a bit flipped by the fault
 * injector stays flipped).  IPv6 has no identification.
 */
static void gso_ids(struct sr_udp_pkt *p, unsigned k)
{
	if (!sr_gid_is_v4((const uint8_t *)&p[0].dst.sin6_addr))
		return;
	for (unsigned i = 1; i < k; i++) {
		struct iovec *last = &p[i].iov[p[i].niov - 1];
		uint8_t *icrc = (uint8_t *)last->iov_base + last->iov_len - SR_ICRC_LEN;

		sr_icrc_put(icrc, sr_icrc_get(icrc) ^
				      sr_icrc_id_delta(p[i].len - SR_ICRC_LEN, (uint16_t)i));
	}
}

/* Message g carries p[0..k): one datagram, or k segments of p[0].len. */
static unsigned build_msg(struct sr_udp_sender *s, unsigned g, struct iovec *iov,
			  struct sr_udp_pkt *p, unsigned k)
{
	struct msghdr *mh = &s->mm[g].msg_hdr;
	unsigned n = 0;

	for (unsigned i = 0; i < k; i++) {
		memcpy(iov + n, p[i].iov, p[i].niov * sizeof(*iov));
		n += p[i].niov;
	}
	memcpy(s->ctl[g].buf, p[0].ctl.buf, p[0].mh.msg_controllen);
	*mh = (struct msghdr){.msg_name = (void *)&p[0].dst,
			      .msg_namelen = sizeof(p[0].dst),
			      .msg_iov = iov,
			      .msg_iovlen = n,
			      .msg_control = s->ctl[g].buf,
			      .msg_controllen = p[0].mh.msg_controllen};
	if (k > 1) {
		struct cmsghdr *cm = (struct cmsghdr *)(s->ctl[g].buf + mh->msg_controllen);
		uint16_t seg = (uint16_t)p[0].len;

		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(seg));
		memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
		mh->msg_controllen += CMSG_SPACE(sizeof(seg));
		gso_ids(p, k);
	}
	return n;
}

unsigned sr_udp_send(struct sr_udp_sender *s, int sock, struct sr_udp_pkt *p, unsigned n)
{
	unsigned pos = 0, sent = 0, plain_end = 0; /* p[..plain_end) one by one */

	while (pos < n) {
		unsigned cnt[SR_UDP_BATCH], g = 0, iovs = 0, at = pos;

		/* up to SR_UDP_BATCH messages from p[pos..n) */
		while (at < n && g < SR_UDP_BATCH) {
			unsigned room = SR_UDP_BATCH * SR_UDP_MAX_IOV - iovs;
			unsigned k =
			    s->no_gso || at < plain_end ? 1 : gso_run(p + at, n - at, room);

			if (p[at].niov > room)
				break;
			iovs += build_msg(s, g, s->iov + iovs, p + at, k);
			cnt[g++] = k;
			at += k;
		}
		for (unsigned done = 0; done < g;) {
			int r = sendmmsg(sock, s->mm + done, g - done, 0);

			if (r > 0) {
				for (int i = 0; i < r; i++) {
					if (cnt[done + (unsigned)i] > 1) {
						s->gso_sends++;
						s->gso_segs += cnt[done + (unsigned)i];
					}
					pos += cnt[done + (unsigned)i];
					sent += cnt[done + (unsigned)i];
				}
				done += (unsigned)r;
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
				struct pollfd pf = {.fd = sock, .events = POLLOUT};

				poll(&pf, 1, 1);
				continue;
			}
			/*
			 * Message `done` was refused.  A GSO send: the device
			 * cannot segment (EIO) or something in it is wrong; send
			 * its datagrams one by one.  A single datagram: drop it.
			 * The messages after it are built again from p[pos], so
			 * every built GSO message goes back to identification 0.
			 */
			for (unsigned m = done, at2 = pos; m < g; at2 += cnt[m++])
				if (cnt[m] > 1)
					gso_ids(p + at2, cnt[m]);
			if (cnt[done] > 1) {
				if (errno == EIO)
					s->no_gso = true;
				plain_end = pos + cnt[done];
			} else {
				pos++;
			}
			break;
		}
	}
	return sent;
}
