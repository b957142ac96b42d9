/*
 * link_probe: the link's own limits between two hosts (network namespaces
 * joined by a veth pair), measured with plain UDP sockets, for the RoCEv2
 * engine to be compared against.  One process per host:
 *
 *   link_probe bw rx  [-m MODE] [-a BIND] [-p PORT] [-s SEG] [-O OVH] [-b RCVBUF] [-w IDLE_S] [-c
 * CPU] link_probe bw tx  PEER [-m MODE] [-p PORT] [-s SEG] [-O OVH] [-t SECONDS] [-B BATCH] [-c
 * CPU] link_probe lat pong [-m MODE] [-a BIND] [-p PORT] [-R] [-w IDLE_S] [-c CPU] [-C CPU]
 *   link_probe lat ping PEER [-m MODE] [-p PORT] [-S SIZE] [-n ITERS] [-R] [-c CPU] [-C CPU]
 *   link_probe sys     what a system call costs here (getppid, an empty
 *                      non-blocking recv, clock_gettime for scale)
 *
 * bw (one direction, tx -> rx; every segment starts with a sequence number):
 *   -m gso        the sender hands up to 64 KB to one send() with UDP_SEGMENT
 *                 (segments of SEG bytes, at most 128), the receiver enables
 *                 UDP_GRO and splits what it gets by the cmsg's segment size
 *   -m gso-nogro  GSO sender, receiver without GRO (the kernel splits)
 *   -m plain      sendmmsg / recvmmsg of BATCH single datagrams (default 32)
 *   SEG is the UDP payload of one datagram; default 4112 = a 4096-byte RoCE
 *   MTU payload + BTH (12) + ICRC (4); -O (default 16) is that per-datagram
 *   overhead, so data_GBps counts what an RDMA payload would be.  The sender
 *   does not pace (the receiver's buffer, -b, default 4 MiB as far as
 *   rmem_max allows, overflows: that is the loss reported).  Both sides print
 *   one line; the receiver's udp_GBps / data_GBps are the link's figure.
 *
 * lat (ping-pong of SIZE-byte datagrams, default 64; the ponger echoes;
 * one-way = half the round trip; ITERS default 20000 after 1000 warm-up):
 *   -m busy          both sides busy-poll the socket (non-blocking recv loop)
 *   -m block         both sides block in recv
 *   -m thread-spin   on both sides a second thread receives (blocking recv,
 *                    or busy-polling with -R) and hands the datagram to the
 *                    main thread through shared memory, which the main thread
 *                    busy-polls ("a daemon thread receives, the app sees
 *                    memory")
 *   -m thread-event  the same, but the main thread blocks on an eventfd the
 *                    receiving thread writes after the handoff
 *   A round trip that gets no answer within 200 ms counts as lost.
 *   -c / -C pin the main / receiving thread (default: not pinned; -c also
 *   pins bw's sender and receiver).
 *
 * Lines starting with '#' are progress ("# ready" once the receiving side
 * listens); the result is one line of key=value pairs on stdout.
 */
#ifndef _GNU_SOURCE /* the CMake build defines it for everything */
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define MAGIC	      0x4c4e4b50u /* "LNKP" */
#define K_DATA	      1
#define K_END	      2
#define K_PING	      3
#define K_STOP	      4
#define GSO_MAX_BYTES 65507
#define GSO_MAX_SEGS  128
#define RX_BUF	      (1 << 16)
#define LOST_AFTER_NS 200000000ll
#define WARMUP	      1000
#define RING	      256
#define MAX_DGRAM     9000

struct hdr {
	uint32_t magic;
	uint32_t kind;
	uint64_t seq;
};

enum mode { M_GSO, M_GSO_NOGRO, M_PLAIN, M_BUSY, M_BLOCK, M_TSPIN, M_TEVENT };

static const char *mode_name[] = {"gso",   "gso-nogro",	  "plain",	 "busy",
				  "block", "thread-spin", "thread-event"};

static struct {
	enum mode mode;
	const char *peer, *bind;
	int port, seg, ovh, batch, size, rx_spin, cpu_main, cpu_rx;
	long iters;
	double secs, idle;
	int rcvbuf;
} opt = {
    .port = 4791,
    .seg = 4096 + 16,
    .ovh = 16,
    .batch = 32,
    .size = 64,
    .iters = 20000,
    .secs = 2,
    .idle = 10,
    .rcvbuf = 4 << 20,
    .cpu_main = -1,
    .cpu_rx = -1,
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void die(const char *what)
{
	fprintf(stderr, "link_probe: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t s;

	if (cpu < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (pthread_setaffinity_np(pthread_self(), sizeof(s), &s))
		fprintf(stderr, "link_probe: cannot pin to CPU %d\n", cpu);
}

static void set_timeout(int fd, int64_t ns)
{
	struct timeval tv = {.tv_sec = ns / 1000000000, .tv_usec = ns % 1000000000 / 1000};

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		die("SO_RCVTIMEO");
}

/* A socket bound to BIND (default: every address, both families) or, with a
 * peer, connected to PEER. */
static int open_socket(const char *peer)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICHOST}, *ai;
	char port[16];
	int fd, rc, zero = 0;

	snprintf(port, sizeof(port), "%d", opt.port);
	if (peer) {
		rc = getaddrinfo(peer, port, &hints, &ai);
	} else {
		hints.ai_flags |= AI_PASSIVE;
		hints.ai_family = opt.bind ? AF_UNSPEC : AF_INET6;
		rc = getaddrinfo(opt.bind, port, &hints, &ai);
	}
	if (rc) {
		fprintf(stderr, "link_probe: %s: %s\n", peer ? peer : opt.bind, gai_strerror(rc));
		exit(2);
	}
	fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	if (peer) {
		if (connect(fd, ai->ai_addr, ai->ai_addrlen))
			die("connect");
	} else {
		if (ai->ai_family == AF_INET6 && !opt.bind)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen))
			die("bind");
	}
	freeaddrinfo(ai);
	return fd;
}

static double secs_between(int64_t a, int64_t b)
{
	return (b - a) / 1e9;
}

/* ------------------------------------------------------------------ bw */

static int bw_tx(void)
{
	int fd = open_socket(opt.peer), seg = opt.seg;
	int nseg = opt.mode == M_PLAIN ? opt.batch : GSO_MAX_BYTES / seg;
	uint64_t seq = 0, calls = 0, errs = 0;
	struct mmsghdr *mm = NULL;
	struct iovec *iov = NULL;
	char *buf;
	int64_t t0, end, t1;

	if (seg < (int)sizeof(struct hdr) || seg > MAX_DGRAM) {
		fprintf(stderr, "link_probe: segment size %d out of range\n", seg);
		return 2;
	}
	if (nseg > GSO_MAX_SEGS)
		nseg = GSO_MAX_SEGS;
	pin(opt.cpu_main);
	buf = calloc(nseg, seg);
	if (!buf)
		die("calloc");
	for (int i = 0; i < nseg * seg; i++)
		buf[i] = (char)i;
	if (opt.mode == M_PLAIN) {
		mm = calloc(nseg, sizeof(*mm));
		iov = calloc(nseg, sizeof(*iov));
		if (!mm || !iov)
			die("calloc");
		for (int i = 0; i < nseg; i++) {
			iov[i].iov_base = buf + (size_t)i * seg;
			iov[i].iov_len = seg;
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
		}
	} else if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg))) {
		die("UDP_SEGMENT");
	}
	t0 = now_ns();
	end = t0 + (int64_t)(opt.secs * 1e9);
	do {
		for (int i = 0; i < nseg; i++) {
			struct hdr *h = (struct hdr *)(buf + (size_t)i * seg);

			h->magic = MAGIC;
			h->kind = K_DATA;
			h->seq = seq + i;
		}
		if (opt.mode == M_PLAIN) {
			int sent = 0;

			while (sent < nseg) {
				int r = sendmmsg(fd, mm + sent, nseg - sent, 0);

				if (r < 0) {
					if (errno != ENOBUFS && errno != EAGAIN &&
					    errno != ECONNREFUSED)
						die("sendmmsg");
					errs++;
					break;
				}
				sent += r;
			}
			seq += sent;
		} else {
			ssize_t r = send(fd, buf, (size_t)nseg * seg, 0);

			if (r < 0) {
				if (errno == EIO) {
					fprintf(stderr, "link_probe: GSO send gave EIO (no "
							"checksum offload)\n");
					return 1;
				}
				if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED)
					die("send");
				errs++;
			} else {
				seq += nseg;
			}
		}
		calls++;
		t1 = now_ns();
	} while (t1 < end);
	for (int i = 0; i < 5; i++) {
		struct hdr h = {MAGIC, K_END, seq};

		usleep(20000);
		if (send(fd, &h, sizeof(h), 0) < 0 && errno != ECONNREFUSED)
			die("send end");
	}
	printf("bw-tx mode=%s seg=%d segs_per_call=%d secs=%.3f calls=%llu send_errors=%llu "
	       "sent_segs=%llu "
	       "sent_udp_GBps=%.3f\n",
	       mode_name[opt.mode], seg, nseg, secs_between(t0, t1), (unsigned long long)calls,
	       (unsigned long long)errs, (unsigned long long)seq,
	       (double)seq * seg / 1e9 / secs_between(t0, t1));
	return 0;
}

static int bw_rx(void)
{
	int fd = open_socket(NULL), one = 1, vlen = opt.mode == M_GSO ? 8 : 64;
	int rcvbuf = opt.rcvbuf, eff;
	socklen_t sl = sizeof(eff);
	struct mmsghdr *mm = calloc(vlen, sizeof(*mm));
	struct iovec *iov = calloc(vlen, sizeof(*iov));
	char *bufs = malloc((size_t)vlen * RX_BUF);
	char(*ctl)[CMSG_SPACE(sizeof(int))] = calloc(vlen, sizeof(*ctl));
	uint64_t segs = 0, bytes = 0, reads = 0, dgrams = 0, bad = 0, max_seq = 0,
		 total = UINT64_MAX;
	int64_t first = 0, last = 0, idle_until;
	int last_seg = 0;

	if (!mm || !iov || !bufs || !ctl)
		die("malloc");
	pin(opt.cpu_main);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &eff, &sl);
	if (opt.mode == M_GSO && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)))
		die("UDP_GRO");
	set_timeout(fd, 100000000);
	printf("# ready port=%d rcvbuf=%d\n", opt.port, eff);
	fflush(stdout);
	idle_until = now_ns() + (int64_t)(opt.idle * 1e9);
	while (total == UINT64_MAX) {
		int n;

		for (int i = 0; i < vlen; i++) {
			iov[i].iov_base = bufs + (size_t)i * RX_BUF;
			iov[i].iov_len = RX_BUF;
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
			mm[i].msg_hdr.msg_control = ctl[i];
			mm[i].msg_hdr.msg_controllen = sizeof(ctl[i]);
		}
		n = recvmmsg(fd, mm, vlen, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				die("recvmmsg");
			if (now_ns() > idle_until)
				break;
			continue;
		}
		int64_t t = now_ns();

		idle_until = t + (int64_t)(opt.idle * 1e9);
		reads++;
		for (int i = 0; i < n; i++) {
			char *p = iov[i].iov_base;
			int len = mm[i].msg_len, gso = len;
			struct cmsghdr *c;

			for (c = CMSG_FIRSTHDR(&mm[i].msg_hdr); c;
			     c = CMSG_NXTHDR(&mm[i].msg_hdr, c))
				if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO)
					memcpy(&gso, CMSG_DATA(c), sizeof(gso));
			if (gso <= 0)
				gso = len;
			dgrams++;
			for (int off = 0; off < len; off += gso) {
				struct hdr h;
				int sl2 = len - off < gso ? len - off : gso;

				if (sl2 < (int)sizeof(h)) {
					bad++;
					continue;
				}
				memcpy(&h, p + off, sizeof(h));
				if (h.magic != MAGIC) {
					bad++;
				} else if (h.kind == K_END) {
					total = h.seq;
				} else if (h.kind == K_DATA) {
					if (!segs)
						first = t;
					last = t;
					segs++;
					bytes += sl2;
					last_seg = sl2;
					if (h.seq > max_seq)
						max_seq = h.seq;
				}
			}
		}
	}
	if (total == UINT64_MAX)
		total = segs ? max_seq + 1 : 0;
	double s = secs_between(first, last), udp = s > 0 ? bytes / 1e9 / s : 0;
	double seg = last_seg ? last_seg : opt.seg;

	printf("bw-rx mode=%s seg=%.0f rcvbuf=%d secs=%.3f recv_segs=%llu sent_segs=%llu "
	       "loss_pct=%.2f "
	       "bad=%llu reads=%llu segs_per_dgram=%.1f udp_GBps=%.3f data_GBps=%.3f\n",
	       mode_name[opt.mode], seg, eff, s, (unsigned long long)segs,
	       (unsigned long long)total, total ? 100.0 * (1.0 - (double)segs / total) : 0.0,
	       (unsigned long long)bad, (unsigned long long)reads,
	       dgrams ? (double)segs / dgrams : 0.0, udp, udp * (seg - opt.ovh) / seg);
	return segs ? 0 : 1;
}

/* ----------------------------------------------------------------- lat */

struct slot {
	int len;
	socklen_t alen;
	struct sockaddr_storage from;
	char data[MAX_DGRAM];
};

/* receiving thread -> main thread: single producer, single consumer */
static struct {
	_Alignas(64) _Atomic uint64_t head; /* written by the receiving thread */
	_Alignas(64) _Atomic uint64_t tail; /* written by the main thread */
	_Alignas(64) atomic_bool stop;
	uint64_t dropped;
	int fd, efd;
	struct slot slot[RING];
} ring;

static void *rx_thread(void *arg)
{
	(void)arg;
	pin(opt.cpu_rx);
	while (!atomic_load_explicit(&ring.stop, memory_order_relaxed)) {
		uint64_t h = atomic_load_explicit(&ring.head, memory_order_relaxed);
		struct slot *s = &ring.slot[h % RING];
		ssize_t n;

		if (h - atomic_load_explicit(&ring.tail, memory_order_acquire) >= RING) {
			/* full: take the datagram off the socket anyway */
			char junk[MAX_DGRAM];

			if (recv(ring.fd, junk, sizeof(junk), opt.rx_spin ? MSG_DONTWAIT : 0) > 0)
				ring.dropped++;
			continue;
		}
		s->alen = sizeof(s->from);
		n = recvfrom(ring.fd, s->data, sizeof(s->data), opt.rx_spin ? MSG_DONTWAIT : 0,
			     (struct sockaddr *)&s->from, &s->alen);
		if (n < 0) {
			if (opt.rx_spin)
				relax();
			continue;
		}
		s->len = n;
		atomic_store_explicit(&ring.head, h + 1, memory_order_release);
		if (opt.mode == M_TEVENT) {
			uint64_t one = 1;

			if (write(ring.efd, &one, sizeof(one)) != sizeof(one))
				die("eventfd write");
		}
	}
	return NULL;
}

/* The next datagram for the main thread, by the mode's means; -1 when
 * nothing came before DEADLINE. */
static int wait_msg(int fd, char *buf, struct sockaddr_storage *from, socklen_t *alen,
		    int64_t deadline)
{
	unsigned spins = 0;
	ssize_t n;

	switch (opt.mode) {
	case M_BUSY:
		for (;;) {
			*alen = sizeof(*from);
			n = recvfrom(fd, buf, MAX_DGRAM, MSG_DONTWAIT, (struct sockaddr *)from,
				     alen);
			if (n >= 0)
				return n;
			if (errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
				die("recvfrom");
			if (!(++spins & 255) && now_ns() > deadline)
				return -1;
		}
	case M_BLOCK:
		for (;;) {
			*alen = sizeof(*from);
			n = recvfrom(fd, buf, MAX_DGRAM, 0, (struct sockaddr *)from, alen);
			if (n >= 0)
				return n;
			if (errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
				die("recvfrom");
			if (now_ns() > deadline)
				return -1;
		}
	default: {
		uint64_t t = atomic_load_explicit(&ring.tail, memory_order_relaxed), v;

		while (atomic_load_explicit(&ring.head, memory_order_acquire) == t) {
			if (opt.mode == M_TSPIN) {
				relax();
				if (!(++spins & 1023) && now_ns() > deadline)
					return -1;
			} else {
				struct pollfd p = {.fd = ring.efd, .events = POLLIN};
				int64_t left = (deadline - now_ns()) / 1000000;

				if (left < 0)
					return -1;
				if (poll(&p, 1, left > 50 ? 50 : (int)left + 1) > 0 &&
				    read(ring.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					die("eventfd read");
			}
		}
		struct slot *s = &ring.slot[t % RING];

		n = s->len;
		memcpy(buf, s->data, n);
		memcpy(from, &s->from, s->alen);
		*alen = s->alen;
		atomic_store_explicit(&ring.tail, t + 1, memory_order_release);
		return n;
	}
	}
}

static pthread_t start_rx(int fd)
{
	pthread_t th = 0;

	if (opt.mode != M_TSPIN && opt.mode != M_TEVENT)
		return 0;
	ring.fd = fd;
	ring.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ring.efd < 0)
		die("eventfd");
	if (pthread_create(&th, NULL, rx_thread, NULL))
		die("pthread_create");
	return th;
}

static void stop_rx(pthread_t th)
{
	if (!th)
		return;
	atomic_store(&ring.stop, true);
	pthread_join(th, NULL);
}

static int lat_pong(void)
{
	int fd = open_socket(NULL);
	char buf[MAX_DGRAM];
	struct sockaddr_storage from;
	socklen_t alen;
	uint64_t echoed = 0;
	pthread_t th;

	set_timeout(fd, 50000000);
	th = start_rx(fd);
	pin(opt.cpu_main);
	printf("# ready port=%d\n", opt.port);
	fflush(stdout);
	for (;;) {
		int n = wait_msg(fd, buf, &from, &alen, now_ns() + (int64_t)(opt.idle * 1e9));
		struct hdr h;

		if (n < 0) {
			fprintf(stderr, "link_probe: no ping for %.0f s, giving up\n", opt.idle);
			break;
		}
		if (n < (int)sizeof(h))
			continue;
		memcpy(&h, buf, sizeof(h));
		if (h.magic != MAGIC)
			continue;
		if (h.kind == K_STOP)
			break;
		if (sendto(fd, buf, n, 0, (struct sockaddr *)&from, alen) < 0)
			die("sendto");
		echoed++;
	}
	stop_rx(th);
	printf("lat-pong mode=%s echoed=%llu\n", mode_name[opt.mode], (unsigned long long)echoed);
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int lat_ping(void)
{
	int fd = open_socket(opt.peer),
	    size = opt.size < (int)sizeof(struct hdr) ? (int)sizeof(struct hdr) : opt.size;
	int64_t *rtt = malloc(opt.iters * sizeof(*rtt)), t0, t1, start;
	char out[MAX_DGRAM] = {0}, in[MAX_DGRAM];
	struct sockaddr_storage from;
	socklen_t alen;
	long lost = 0, got = 0, stale = 0;
	double sum = 0;
	pthread_t th;

	if (!rtt)
		die("malloc");
	if (size > MAX_DGRAM)
		size = MAX_DGRAM;
	set_timeout(fd, 50000000);
	th = start_rx(fd);
	pin(opt.cpu_main);
	start = now_ns();
	for (long i = 0; i < WARMUP + opt.iters; i++) {
		struct hdr h = {MAGIC, K_PING, i}, r;
		int n;

		memcpy(out, &h, sizeof(h));
		t0 = now_ns();
		if (send(fd, out, size, 0) < 0 && errno != ECONNREFUSED)
			die("send");
		for (;;) {
			n = wait_msg(fd, in, &from, &alen, t0 + LOST_AFTER_NS);
			if (n < 0)
				break;
			memcpy(&r, in, sizeof(r));
			if (n >= (int)sizeof(r) && r.magic == MAGIC && r.seq == (uint64_t)i)
				break;
			stale++;
		}
		t1 = now_ns();
		if (n < 0) {
			if (i >= WARMUP)
				lost++;
			continue;
		}
		if (i >= WARMUP) {
			rtt[got++] = t1 - t0;
			sum += t1 - t0;
		}
	}
	int64_t end = now_ns();

	for (int i = 0; i < 3; i++) {
		struct hdr h = {MAGIC, K_STOP, 0};

		send(fd, &h, sizeof(h), 0);
		usleep(10000);
	}
	stop_rx(th);
	if (!got) {
		printf("lat mode=%s size=%d n=0 lost=%ld\n", mode_name[opt.mode], size, lost);
		return 1;
	}
	qsort(rtt, got, sizeof(*rtt), cmp_i64);
	/* one-way = half the round trip */
	printf("lat mode=%s%s size=%d n=%ld lost=%ld stale=%ld secs=%.3f min_ns=%.0f p50_ns=%.0f "
	       "p90_ns=%.0f "
	       "p99_ns=%.0f max_ns=%.0f mean_ns=%.0f\n",
	       mode_name[opt.mode], opt.rx_spin && opt.mode >= M_TSPIN ? "-rxspin" : "", size, got,
	       lost, stale, secs_between(start, end), rtt[0] / 2.0, rtt[got / 2] / 2.0,
	       rtt[got * 9 / 10] / 2.0, rtt[got * 99 / 100] / 2.0, rtt[got - 1] / 2.0,
	       sum / got / 2.0);
	free(rtt);
	return 0;
}

/* ----------------------------------------------------------------- sys */

/* What one system call costs here (min over batches of 1000): the floor
 * under every per-packet syscall above.  Some VMs (page-table isolation
 * forced on, paravirtualised page tables) charge a microsecond for it. */
static int sys_cost(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	double best[3] = {1e12, 1e12, 1e12};
	char b[64];

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
		die("socket");
	for (int round = 0; round < 100; round++) {
		int64_t t0 = now_ns();

		for (int i = 0; i < 1000; i++)
			getppid();
		int64_t t1 = now_ns();

		for (int i = 0; i < 1000; i++)
			recv(fd, b, sizeof(b), MSG_DONTWAIT);
		int64_t t2 = now_ns();

		for (int i = 0; i < 1000; i++)
			now_ns();
		int64_t t3 = now_ns();

		if ((t1 - t0) / 1000.0 < best[0])
			best[0] = (t1 - t0) / 1000.0;
		if ((t2 - t1) / 1000.0 < best[1])
			best[1] = (t2 - t1) / 1000.0;
		if ((t3 - t2) / 1000.0 < best[2])
			best[2] = (t3 - t2) / 1000.0;
	}
	printf("sys getppid_ns=%.0f recv_eagain_ns=%.0f clock_gettime_ns=%.0f\n", best[0], best[1],
	       best[2]);
	return 0;
}

static int usage(void)
{
	fprintf(
	    stderr,
	    "usage: link_probe bw rx [-m gso|gso-nogro|plain] [-a BIND] [-p PORT] [-s SEG] [-O "
	    "OVH] "
	    "[-b RCVBUF] [-w IDLE_S] [-c CPU]\n"
	    "       link_probe bw tx PEER [-m gso|gso-nogro|plain] [-p PORT] [-s SEG] [-t SECONDS] "
	    "[-B BATCH] [-c CPU]\n"
	    "       link_probe lat pong [-m busy|block|thread-spin|thread-event] [-a BIND] [-p "
	    "PORT] [-R] "
	    "[-w IDLE_S] [-c CPU] [-C CPU]\n"
	    "       link_probe lat ping PEER [-m MODE] [-p PORT] [-S SIZE] [-n ITERS] [-R] [-c "
	    "CPU] "
	    "[-C CPU]\n");
	return 2;
}

int main(int argc, char **argv)
{
	bool bw, server;
	int o;

	if (argc == 2 && !strcmp(argv[1], "sys"))
		return sys_cost();
	if (argc < 3)
		return usage();
	bw = !strcmp(argv[1], "bw");
	if (!bw && strcmp(argv[1], "lat"))
		return usage();
	server = !strcmp(argv[2], bw ? "rx" : "pong");
	if (!server && strcmp(argv[2], bw ? "tx" : "ping"))
		return usage();
	optind = 3;
	if (!server) {
		if (argc < 4 || argv[3][0] == '-')
			return usage();
		opt.peer = argv[3];
		optind = 4;
	}
	opt.mode = bw ? M_GSO : M_BUSY;
	while ((o = getopt(argc, argv, "m:a:p:s:O:b:w:t:B:S:n:Rc:C:")) != -1) {
		switch (o) {
		case 'm': {
			int m;

			for (m = 0; m <= M_TEVENT; m++)
				if (!strcmp(optarg, mode_name[m]))
					break;
			if (m > M_TEVENT || (bw != (m <= M_PLAIN)))
				return usage();
			opt.mode = m;
			break;
		}
		case 'a':
			opt.bind = optarg;
			break;
		case 'p':
			opt.port = atoi(optarg);
			break;
		case 's':
			opt.seg = atoi(optarg);
			break;
		case 'O':
			opt.ovh = atoi(optarg);
			break;
		case 'b':
			opt.rcvbuf = atoi(optarg);
			break;
		case 'w':
			opt.idle = atof(optarg);
			break;
		case 't':
			opt.secs = atof(optarg);
			break;
		case 'B':
			opt.batch = atoi(optarg);
			break;
		case 'S':
			opt.size = atoi(optarg);
			break;
		case 'n':
			opt.iters = atol(optarg);
			break;
		case 'R':
			opt.rx_spin = 1;
			break;
		case 'c':
			opt.cpu_main = atoi(optarg);
			break;
		case 'C':
			opt.cpu_rx = atoi(optarg);
			break;
		default:
			return usage();
		}
	}
	if (optind != argc || opt.iters < 1 || opt.batch < 1 || opt.batch > 1024)
		return usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (bw)
		return server ? bw_rx() : bw_tx();
	return server ? lat_pong() : lat_ping();
}
