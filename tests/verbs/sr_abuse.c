/*
 * sr_abuse: the control socket's robustness against a real softrdmad
 * (robust.sh runs both modes at once against a private daemon).
 *
 *   sr_abuse abuse      a client speaking the raw protocol badly: garbage
 *                       records before and after HELLO, records truncated at
 *                       every length, oversized and empty ones, 10 and 40
 *                       descriptors on one record, descriptors of the wrong
 *                       kind, another connection's handles, requests out of
 *                       order, descriptors hoarded, a QP's lock held in the
 *                       arena, then a flood of 100,000 requests whose
 *                       replies it never reads.  Every record must get a reply, or
 *                       (oversized, empty) the connection dropped; never
 *                       silence.  Prints what it saw; exit 0 if as expected.
 *   sr_abuse good STOP  a well-behaved verbs client meanwhile: open the
 *                       device, PD, MR, CQ, an RC QP taken to RTS, destroy
 *                       everything, again and again until file STOP exists.
 *                       Fails on any error or a round slower than 5 s (the
 *                       daemon stalled).
 *   sr_abuse once       one such round, and exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <softrdma/proto.h>

#include "core/daemon_link.h"
#include "core/msg.h"

#define REPLY_WAIT_MS 5000
#define FLOOD_TOTAL   100000

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __func__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state >> 16);
}

static int connect_daemon(void)
{
	int s = sr_daemon_connect(false, NULL);

	if (s < 0) {
		fprintf(stderr, "sr_abuse: cannot reach the daemon: %s\n", strerror(-s));
		exit(1);
	}
	return s;
}

enum outcome { REPLY, DROPPED, SILENT };

/* Sends one record (any length) with descriptors and waits for what comes
 * back: a reply record, the connection closed, or nothing (a failure). */
static enum outcome xchg(int s, const void *rec, size_t len, const int *fds, int nfds,
			 struct sr_rep *rep)
{
	struct iovec iov = {.iov_base = (void *)rec, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 64)];
		struct cmsghdr align;
	} cbuf;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct pollfd p = {.fd = s, .events = POLLIN};
	int rfds[SR_MSG_MAX_FDS], nr = SR_MSG_MAX_FDS;
	long n;

	if (nfds) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	if (sendmsg(s, &mh, MSG_NOSIGNAL) < 0)
		return errno == EPIPE || errno == ECONNRESET ? DROPPED : SILENT;
	if (poll(&p, 1, REPLY_WAIT_MS) != 1)
		return SILENT;
	memset(rep, 0, sizeof(*rep));
	n = sr_msg_recv(s, rep, sizeof(*rep), rfds, &nr);
	for (int i = 0; i < nr; i++)
		close(rfds[i]);
	if (n == 0 || n == -ECONNRESET)
		return DROPPED;
	if (n > 0 && len >= 4 && !memcmp(rec, &(uint32_t){SR_OP_STATUS}, 4) && !rep->status) {
		/* the status text follows in records of its own */
		for (uint32_t got = 0; got < rep->u.status.len; got += n) {
			char text[SR_STATUS_CHUNK];

			if (poll(&p, 1, REPLY_WAIT_MS) != 1)
				return SILENT;
			n = recv(s, text, sizeof(text), 0);
			if (n <= 0)
				return n ? SILENT : DROPPED;
		}
	}
	return n > 0 ? REPLY : SILENT;
}

static struct sr_req req_of(enum sr_op op, uint32_t handle)
{
	struct sr_req r;

	memset(&r, 0, sizeof(r));
	r.op = op;
	r.handle = handle;
	return r;
}

/* A request that must get a reply with this status. */
static void expect(int s, const struct sr_req *r, const int *fds, int nfds, int status,
		   struct sr_rep *out, const char *what)
{
	struct sr_rep rep;
	enum outcome o = xchg(s, r, sizeof(*r), fds, nfds, &rep);

	CHECK(o == REPLY, "%s: %s", what, o == DROPPED ? "connection dropped" : "no reply");
	if (o == REPLY)
		CHECK(rep.status == status, "%s: status %d, expected %d", what, rep.status, status);
	if (out)
		*out = rep;
}

static int hello(int s)
{
	struct sr_req r = req_of(SR_OP_HELLO, 0);
	struct sr_rep rep;

	r.u.hello.version = SR_PROTO_VERSION;
	r.u.hello.pid = (uint32_t)getpid();
	expect(s, &r, NULL, 0, 0, &rep, "HELLO");
	return rep.status;
}

static int memfd(size_t size)
{
	int fd = memfd_create("sr_abuse", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, size)) {
		perror("sr_abuse: memfd");
		exit(1);
	}
	return fd;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* Garbage: random lengths and bytes, descriptors now and then. */
static void garbage(int *s, int rounds, bool after_hello, unsigned *replies, unsigned *drops)
{
	for (int k = 0; k < rounds; k++) {
		uint8_t rec[sizeof(struct sr_req)];
		size_t len = 1 + rnd() % sizeof(rec);
		int fds[3], nfds = rnd() % 4 == 0 ? 1 + rnd() % 3 : 0;
		struct sr_rep rep;
		enum outcome o;

		for (size_t i = 0; i < len; i++)
			rec[i] = rnd();
		if (after_hello && len >= 4) { /* mostly real opcodes, to get past the switch */
			uint32_t op = 1 + rnd() % (SR_OP_MAX + 1);

			memcpy(rec, &op, 4);
		}
		for (int i = 0; i < nfds; i++)
			fds[i] = i == 0 ? memfd(4096) : eventfd(0, EFD_CLOEXEC);
		o = xchg(*s, rec, len, fds, nfds, &rep);
		close_all(fds, nfds);
		CHECK(o != SILENT, "garbage record %d (%zu bytes): no reply", k, len);
		if (o == REPLY) {
			++*replies;
			if (!after_hello)
				CHECK(rep.status != 0, "garbage before HELLO succeeded");
		} else {
			++*drops; /* allowed: the daemon may drop a client; come back */
			close(*s);
			*s = connect_daemon();
			if (after_hello)
				hello(*s);
		}
	}
}

static void truncated(int s)
{
	struct sr_req r = req_of(SR_OP_REG_MR, 1);
	unsigned replies = 0;

	r.u.reg_mr.length = 4096;
	r.u.reg_mr.nsegs = 1;
	for (size_t len = 1; len < sizeof(r); len++) {
		struct sr_rep rep;
		enum outcome o = xchg(s, &r, len, NULL, 0, &rep);

		CHECK(o == REPLY, "REG_MR truncated to %zu bytes: %s", len,
		      o == DROPPED ? "dropped" : "no reply");
		replies += o == REPLY;
		if (o == REPLY)
			CHECK(rep.status != 0, "REG_MR truncated to %zu bytes succeeded", len);
	}
	printf("truncated: %u records of 1..%zu bytes, %u replies\n", (unsigned)sizeof(r) - 1,
	       sizeof(r) - 1, replies);
}

static void descriptors(int s)
{
	struct sr_req r;
	struct sr_rep rep;
	int fds[40], p[2];

	for (int i = 0; i < 40; i++)
		fds[i] = memfd(4096);
	r = req_of(SR_OP_ALLOC_PD, 0);
	expect(s, &r, fds, 10, 0, NULL, "ALLOC_PD with 10 fds");
	expect(s, &r, fds, 40, 0, NULL, "ALLOC_PD with 40 fds");
	r = req_of(SR_OP_REG_FD, 0);
	r.u.reg_fd.kind = SR_FD_MEM;
	expect(s, &r, fds, 10, -EINVAL, NULL, "REG_FD with 10 fds");
	expect(s, &r, NULL, 0, -EINVAL, NULL, "REG_FD with none");
	close_all(fds, 40);

	if (pipe2(p, O_CLOEXEC))
		exit(1);
	expect(s, &r, &p[1], 1, -EBADF, NULL, "REG_FD of a pipe as memory");
	r.u.reg_fd.kind = SR_FD_EVENT;
	expect(s, &r, &p[1], 1, -EBADF, NULL, "REG_FD of a pipe as event fd");
	close_all(p, 2);
	fds[0] = open("/dev/null", O_RDWR | O_CLOEXEC);
	expect(s, &r, fds, 1, -EBADF, NULL, "REG_FD of /dev/null as event fd");
	close(fds[0]);
	r.u.reg_fd.kind = 77;
	fds[0] = eventfd(0, EFD_CLOEXEC);
	expect(s, &r, fds, 1, -EINVAL, NULL, "REG_FD of an unknown kind");
	close(fds[0]);

	/* a huge memfd is fine as memory; but not as a CQ's async event fd */
	fds[0] = memfd(1ull << 40);
	r = req_of(SR_OP_REG_FD, 0);
	r.u.reg_fd.kind = SR_FD_MEM;
	expect(s, &r, fds, 1, 0, &rep, "REG_FD of a 1 TiB memfd");
	close(fds[0]);
	r = req_of(SR_OP_CREATE_CQ, 0);
	r.u.cq.cqe = 4;
	r.u.cq.async_fd_id = rep.handle;
	expect(s, &r, NULL, 0, -EINVAL, NULL, "CREATE_CQ with a memfd as async fd");
	r.u.cq.async_fd_id = 0;
	r.u.cq.channel_fd_id = rep.handle;
	expect(s, &r, NULL, 0, -EINVAL, NULL, "CREATE_CQ with a memfd as channel");
	printf("descriptors: 10 and 40 on one record, wrong kinds refused\n");
}

static void out_of_order(int s)
{
	int s2 = connect_daemon();
	struct sr_req r;
	struct sr_rep pd2, pd, fd2;
	int efd;

	r = req_of(SR_OP_ALLOC_PD, 0);
	expect(s2, &r, NULL, 0, -EPROTO, NULL, "ALLOC_PD before HELLO");
	hello(s2);
	expect(s2, &r, NULL, 0, 0, &pd2, "ALLOC_PD (second connection)");
	expect(s, &r, NULL, 0, 0, &pd, "ALLOC_PD");

	r = req_of(SR_OP_DEALLOC_PD, pd2.handle);
	expect(s, &r, NULL, 0, -EINVAL, NULL, "DEALLOC_PD of another connection's PD");
	efd = eventfd(0, EFD_CLOEXEC);
	r = req_of(SR_OP_REG_FD, 0);
	r.u.reg_fd.kind = SR_FD_EVENT;
	expect(s2, &r, &efd, 1, 0, &fd2, "REG_FD (second connection)");
	close(efd);
	r = req_of(SR_OP_CLOSE_FD, fd2.handle);
	expect(s, &r, NULL, 0, -EINVAL, NULL, "CLOSE_FD of another connection's fd");
	r = req_of(SR_OP_CREATE_CQ, 0);
	r.u.cq.cqe = 4;
	r.u.cq.channel_fd_id = fd2.handle;
	expect(s, &r, NULL, 0, -EINVAL, NULL, "CREATE_CQ on another connection's channel");
	r = req_of(SR_OP_DESTROY_QP, 0x123456);
	expect(s, &r, NULL, 0, -EINVAL, NULL, "DESTROY_QP of an unknown QP");
	r = req_of(SR_OP_DEALLOC_PD, pd.handle);
	expect(s, &r, NULL, 0, 0, NULL, "DEALLOC_PD");
	expect(s, &r, NULL, 0, -EINVAL, NULL, "DEALLOC_PD twice");
	r = req_of(SR_OP_MODIFY_QP, 0x2);
	r.u.modify_qp.attr_mask = IBV_QP_STATE;
	r.u.modify_qp.attr.qp_state = IBV_QPS_INIT;
	expect(s, &r, NULL, 0, -EINVAL, NULL, "MODIFY_QP of a QP that does not exist");
	r = req_of(SR_OP_HELLO, 0);
	r.u.hello.version = SR_PROTO_VERSION;
	r.u.hello.flags = 1;
	expect(s, &r, NULL, 0, -EPROTO, NULL, "a second HELLO, as a monitor");
	r = req_of(SR_OP_MAX + 100, 0);
	expect(s, &r, NULL, 0, -EOPNOTSUPP, NULL, "an unknown opcode");
	close(s2);
	printf("out of order: refused as expected\n");
}

/* Oversized and empty records: the daemon drops the connection. */
static void dropped(void)
{
	static char big[65536];
	size_t sizes[] = {sizeof(struct sr_req) + 1, sizeof(big), 0};

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		int s = connect_daemon();
		struct sr_rep rep;
		enum outcome o;

		hello(s);
		memset(big, 0x5a, sizeof(big));
		o = xchg(s, big, sizes[k], NULL, 0, &rep);
		CHECK(o == DROPPED, "a %zu-byte record: %s", sizes[k],
		      o == REPLY ? "answered" : "no reply and not dropped");
		close(s);
	}
	printf("oversized and empty records: connection dropped\n");
}

/*
 * 100,000 requests whose replies are never read.  The daemon stops reading
 * a connection whose replies wait (backpressure), so each connection takes
 * a few hundred until its socket has no room for 10 ms; then it is closed
 * (reclaim) and the next one goes on.  Half the requests allocate a PD.
 */
static void flood(void)
{
	unsigned sent = 0, conns = 0, most = 0, stuck_sent = 0;
	uint64_t t0 = now_ms();
	int stuck = connect_daemon();

	/* one connection fills its socket and stays open, reading nothing,
	 * for the whole flood: the daemon must not wait for it */
	hello(stuck);
	for (;;) {
		struct sr_req r = req_of(SR_OP_DEALLOC_PD, 0);
		struct pollfd p = {.fd = stuck, .events = POLLOUT};

		if (send(stuck, &r, sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(r))
			stuck_sent++;
		else if (errno != EAGAIN || poll(&p, 1, 10) != 1)
			break;
	}
	while (sent < FLOOD_TOTAL) {
		int s = connect_daemon();
		unsigned here = 0;

		hello(s);
		conns++;
		while (sent < FLOOD_TOTAL) {
			struct sr_req r = req_of(here & 1 ? SR_OP_ALLOC_PD : SR_OP_DEALLOC_PD, 0);
			struct pollfd p = {.fd = s, .events = POLLOUT};

			if (send(s, &r, sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(r)) {
				sent++;
				here++;
				continue;
			}
			if (errno != EAGAIN) {
				CHECK(0, "flood: send: %s", strerror(errno));
				break;
			}
			if (poll(&p, 1, 10) != 1)
				break; /* the daemon stopped reading us */
		}
		most = here > most ? here : most;
		close(s);
	}
	close(stuck);
	printf("flood: %u requests unread over %u connections (at most %u each) in %llu ms, "
	       "one more connection stuck with %u\n",
	       sent, conns, most, (unsigned long long)(now_ms() - t0), stuck_sent);
	CHECK(conns > 1, "flood: one connection took all %u requests: no backpressure", sent);
}

/*
 * Descriptors held: one connection registers the same eventfd again and
 * again (each arrival is a new descriptor in the daemon) until refused.
 * The daemon must refuse (EMFILE) while it has room for others: a new
 * client gets in and is served, and the well-behaved one goes on
 * registering memory.
 */
static void hoard(void)
{
	int s = connect_daemon(), s2, efd = eventfd(0, EFD_CLOEXEC);
	struct sr_req r = req_of(SR_OP_REG_FD, 0);
	struct sr_rep rep;
	unsigned held = 0;

	hello(s);
	r.u.reg_fd.kind = SR_FD_EVENT;
	for (;;) {
		enum outcome o = xchg(s, &r, sizeof(r), &efd, 1, &rep);

		if (o != REPLY) {
			CHECK(0, "REG_FD %u: %s", held, o == DROPPED ? "dropped" : "no reply");
			break;
		}
		if (rep.status) {
			CHECK(rep.status == -EMFILE, "REG_FD %u refused with %d, expected EMFILE",
			      held, rep.status);
			break;
		}
		held++;
	}
	s2 = connect_daemon();
	hello(s2);
	r = req_of(SR_OP_ALLOC_PD, 0);
	expect(s2, &r, NULL, 0, 0, NULL, "ALLOC_PD of a new client while another holds the most");
	close(s2);
	close(s);
	close(efd);
	printf("hoard: %u descriptors registered, then EMFILE; a new client was served\n", held);
}

/*
 * A lock in the arena held by a live thread (as by a thread stopped inside
 * post_send; here this process writes the lock word, which any process of
 * the user can): MODIFY_QP of that QP must wait for it without stopping the
 * daemon (the well-behaved client goes on meanwhile), and complete once the
 * lock is let go.  A lock whose holder is dead is taken over at once.
 */
static void stuck_lock(void)
{
	int s = connect_daemon(), s2, afd = -1, nfds = 1;
	struct sr_req r = req_of(SR_OP_HELLO, 0), r2;
	struct sr_rep rep, pd, cq, qp;
	struct pollfd pl = {.fd = s, .events = POLLIN};
	struct sr_qp_shm *q;
	struct ibv_qp_attr a;
	uint64_t t0;
	pid_t dead;
	void *arena;

	r.u.hello.version = SR_PROTO_VERSION;
	r.u.hello.pid = (uint32_t)getpid();
	if (sr_msg_send(s, &r, sizeof(r), NULL, 0) ||
	    sr_msg_recv(s, &rep, sizeof(rep), &afd, &nfds) != sizeof(rep) || rep.status ||
	    nfds != 1) {
		CHECK(0, "HELLO with the arena");
		return;
	}
	arena = mmap(NULL, rep.u.hello.arena_size, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
	close(afd);
	if (arena == MAP_FAILED)
		exit(1);
	r = req_of(SR_OP_ALLOC_PD, 0);
	expect(s, &r, NULL, 0, 0, &pd, "ALLOC_PD");
	r = req_of(SR_OP_CREATE_CQ, 0);
	r.u.cq.cqe = 4;
	expect(s, &r, NULL, 0, 0, &cq, "CREATE_CQ");
	r = req_of(SR_OP_CREATE_QP, 0);
	r.u.create_qp.pd = pd.handle;
	r.u.create_qp.type = IBV_QPT_RC;
	r.u.create_qp.send_cq = r.u.create_qp.recv_cq = cq.handle;
	r.u.create_qp.cap.max_send_wr = r.u.create_qp.cap.max_recv_wr = 4;
	expect(s, &r, NULL, 0, 0, &qp, "CREATE_QP");
	q = sr_arena_at(arena, qp.u.qp.off);

	atomic_store(&q->sq_lock.holder, (uint32_t)getpid()); /* this thread: alive */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	r = req_of(SR_OP_MODIFY_QP, qp.handle);
	r.u.modify_qp.attr_mask =
	    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	sr_qp_attr_to_wire(&a, &r.u.modify_qp.attr);
	if (sr_msg_send(s, &r, sizeof(r), NULL, 0))
		exit(1);
	CHECK(poll(&pl, 1, 500) == 0, "MODIFY_QP answered while its sq_lock is held");
	/* meanwhile another client is served at once */
	t0 = now_ms();
	s2 = connect_daemon();
	hello(s2);
	r2 = req_of(SR_OP_ALLOC_PD, 0);
	expect(s2, &r2, NULL, 0, 0, NULL, "ALLOC_PD while a request waits for a lock");
	close(s2);
	CHECK(now_ms() - t0 < 1000, "another client waited %llu ms",
	      (unsigned long long)(now_ms() - t0));
	CHECK(poll(&pl, 1, 0) == 0, "MODIFY_QP answered while its sq_lock is held");
	t0 = now_ms();
	atomic_store(&q->sq_lock.holder, 0);
	CHECK(poll(&pl, 1, REPLY_WAIT_MS) == 1 &&
		  sr_msg_recv(s, &rep, sizeof(rep), NULL, NULL) == sizeof(rep) && !rep.status,
	      "MODIFY_QP not done once its sq_lock is free");
	printf("stuck lock: MODIFY_QP waits for a held sq_lock, others are served, it is done "
	       "%llu ms after the lock is let go\n",
	       (unsigned long long)(now_ms() - t0));

	/* a holder that died: a child that exited */
	dead = fork();
	if (!dead)
		_exit(0);
	waitpid(dead, NULL, 0);
	atomic_store(&q->sq_lock.holder, (uint32_t)dead);
	a.qp_state = IBV_QPS_ERR;
	r = req_of(SR_OP_MODIFY_QP, qp.handle);
	r.u.modify_qp.attr_mask = IBV_QP_STATE;
	sr_qp_attr_to_wire(&a, &r.u.modify_qp.attr);
	t0 = now_ms();
	expect(s, &r, NULL, 0, 0, NULL, "MODIFY_QP with a dead holder's sq_lock");
	printf("stuck lock: a dead holder's lock taken over in %llu ms\n",
	       (unsigned long long)(now_ms() - t0));
	munmap(arena, rep.u.hello.arena_size);
	close(s);
}

static int abuse(void)
{
	unsigned replies = 0, drops = 0;
	int s = connect_daemon();

	garbage(&s, 300, false, &replies, &drops);
	printf("garbage before HELLO: %u replies, %u connections dropped\n", replies, drops);
	hello(s);
	replies = drops = 0;
	garbage(&s, 5000, true, &replies, &drops);
	printf("garbage after HELLO: %u replies, %u connections dropped\n", replies, drops);
	truncated(s);
	descriptors(s);
	out_of_order(s);
	close(s);
	dropped();
	hoard();
	stuck_lock();
	flood();
	printf("abuse: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}

/* ---- the well-behaved client ---- */

static void die(const char *what)
{
	fprintf(stderr, "sr_abuse good: %s failed: %s\n", what, strerror(errno));
	exit(1);
}

static void one_round(void *buf)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;

	if (!list || !list[0])
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		die("ibv_open_device");
	if (ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	mr = ibv_reg_mr(pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		die("destroy");
}

static int good(const char *stop)
{
	void *buf = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t worst = 0;
	unsigned rounds = 0;

	if (buf == MAP_FAILED)
		die("mmap");
	while (access(stop, F_OK)) {
		uint64_t t0 = now_ms(), t;

		one_round(buf);
		t = now_ms() - t0;
		worst = t > worst ? t : worst;
		rounds++;
	}
	printf("good: %u rounds, slowest %llu ms\n", rounds, (unsigned long long)worst);
	if (worst > 5000 || rounds < 5) {
		fprintf(stderr, "sr_abuse good: FAIL (%s)\n",
			rounds < 5 ? "too few rounds" : "a round waited over 5 s");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "abuse"))
		return abuse();
	if (argc == 3 && !strcmp(argv[1], "good"))
		return good(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "once")) {
		void *buf =
		    mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (buf == MAP_FAILED)
			die("mmap");
		one_round(buf);
		printf("once: a new client opened, created and destroyed everything\n");
		return 0;
	}
	fprintf(stderr, "usage: sr_abuse abuse | good STOPFILE | once\n");
	return 2;
}
