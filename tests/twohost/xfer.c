/*
 * sr_xfer: moves a given amount of data over one RC QP between two
 * processes (two hosts in the loss suite, tests/twohost/loss.sh) and checks
 * every byte and every completion, as a user of a lossy link would:
 *
 *   write   the client RDMA WRITEs rounds of a pattern into the server's
 *           buffer (random message sizes, 1-4 SGEs each), then a SEND with
 *           immediate closes the round; the server checks the whole round
 *   read    the server fills its buffer with a round's pattern; the client
 *           RDMA READs it back in random pieces and checks each
 *   send    SENDs of random sizes, each carrying its sequence number; the
 *           server checks that each arrives exactly once, in order, intact
 *   atomic  fetch-and-adds on one server counter: every value 0..N-1 is
 *           returned exactly once and the counter ends at N
 *   churn   the client RDMA READs the server's buffer while the server
 *           rewrites it all the time (a store serving READs while it
 *           updates): what arrives is undefined, but every READ must
 *           complete, and no packet may fail its ICRC for it (the script
 *           checks drop_icrc); "churnpoll": the server also polls its CQ
 *           between 64 KiB pieces, so that its own thread may answer
 *           the READs (the receive half) instead of its host's engine
 *
 * Every work request is signaled; completions must come back in posting
 * order (wr_id) with IBV_WC_SUCCESS.  Exit 0 only if everything held.
 *
 *   server: sr_xfer -g GID_INDEX -p PORT
 *   client: sr_xfer -g GID_INDEX -p PORT [-b BYTES] [-n ATOMICS] [-s SEED]
 *                   [-o write,read,churn,send,atomic] [-D] SERVER_ADDR
 *
 * -D (with SOFTRDMA_TEST_QPN_TAG set for both daemons): the client first
 * makes a decoy QP, which gets the same number as the server's QP, ready
 * to receive; the transfer must reach the server and never the decoy
 * (routing by GID, then QPN).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "side.h"

#define BUF_SIZE  (16u << 20) /* the server's target buffer: one round */
#define MAX_MSG	  (1u << 20)
#define DEPTH	  32 /* work requests in flight */
#define RECV_SIZE (MAX_MSG + 16)

struct peer {
	uint32_t qpn, psn, rkey, crkey; /* crkey: the counter's MR */
	uint64_t addr;			/* the buffer */
	uint64_t counter;		/* the atomic target */
	uint8_t gid[16];
};

struct ctx {
	struct ibv_context *dev;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr, *cmr;
	char *buf; /* BUF_SIZE (+ receive slots on the server) */
	uint64_t *counter;
	int sock;
	uint64_t posted, completed; /* wr_ids in order */
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The pattern: byte i of stream s. */
static inline uint8_t pat(uint64_t s, uint64_t i)
{
	uint64_t z = s * 0x9e3779b97f4a7c15ull + (i >> 3) * 0xd1342543de82ef95ull;

	z ^= z >> 29;
	z *= 0xbf58476d1ce4e5b9ull;
	z ^= z >> 32;
	return (uint8_t)(z >> ((i & 7) * 8));
}

static void fill(char *p, uint64_t s, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = (char)pat(s, off + i);
}

static int64_t check(const char *p, uint64_t s, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if ((uint8_t)p[i] != pat(s, off + i))
			return (int64_t)i;
	return -1;
}

static void sync_point(struct ctx *c)
{
	char a = 's', b;

	xchg(c->sock, &a, &b, 1);
}

/* Waits for the next completion; it must be the oldest posted, successful. */
static struct ibv_wc next_wc(struct ctx *c)
{
	struct ibv_wc wc;
	time_t start = time(NULL);
	int n;

	while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 0) {
		sched_yield(); /* two cores: leave room for the engines */
		if (time(NULL) - start > 60)
			DIE("no completion for 60 s (posted %" PRIu64 ", completed %" PRIu64 ")",
			    c->posted, c->completed);
	}
	if (n < 0)
		DIE("ibv_poll_cq failed");
	if (wc.status != IBV_WC_SUCCESS)
		DIE("completion %" PRIu64 " (opcode %d): %s", (uint64_t)wc.wr_id, wc.opcode,
		    ibv_wc_status_str(wc.status));
	return wc;
}

static void send_done(struct ctx *c)
{
	struct ibv_wc wc = next_wc(c);

	if (wc.opcode & IBV_WC_RECV)
		DIE("a receive completion on the client's CQ");
	if (wc.wr_id != c->completed)
		DIE("completion out of order or twice: wr_id %" PRIu64 ", expected %" PRIu64,
		    (uint64_t)wc.wr_id, c->completed);
	c->completed++;
}

static void post(struct ctx *c, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	while (c->posted - c->completed >= DEPTH)
		send_done(c);
	wr->wr_id = c->posted++;
	wr->send_flags |= IBV_SEND_SIGNALED;
	if (ibv_post_send(c->qp, wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
}

static void drain(struct ctx *c)
{
	while (c->completed != c->posted)
		send_done(c);
}

/* 1-4 SGEs over [off, off + len) of the local buffer */
static int sges(struct ctx *c, struct ibv_sge *sg, uint64_t off, uint32_t len)
{
	int n = 1 + (int)(rnd() % 4);

	if ((uint32_t)n > len)
		n = len ? (int)len : 1;
	for (int i = 0; i < n; i++) {
		uint32_t piece =
		    i == n - 1 ? len : (uint32_t)(rnd() % (len / (uint32_t)(n - i) + 1));

		sg[i] = (struct ibv_sge){(uintptr_t)c->buf + off, piece, c->mr->lkey};
		off += piece;
		len -= piece;
	}
	return n;
}

static uint32_t msg_size(void)
{
	/* mostly large, some small, some odd: 1 B .. 1 MiB */
	switch (rnd() % 4) {
	case 0:
		return 1 + (uint32_t)(rnd() % 4096);
	case 1:
		return 1 + (uint32_t)(rnd() % 65536);
	default:
		return 1 + (uint32_t)(rnd() % MAX_MSG);
	}
}

static void post_recv(struct ctx *c, uint32_t slot)
{
	struct ibv_sge sg = {(uintptr_t)c->buf + BUF_SIZE + (uint64_t)slot * RECV_SIZE, RECV_SIZE,
			     c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sg, .num_sge = 1}, *bad;

	if (ibv_post_recv(c->qp, &wr, &bad))
		DIE("ibv_post_recv: %s", strerror(errno));
}

static struct ibv_wc recv_one(struct ctx *c)
{
	struct ibv_wc wc = next_wc(c);

	if (!(wc.opcode & IBV_WC_RECV))
		DIE("a send completion on the server's CQ");
	return wc;
}

/* ---- the operations, client side (C) and server side (S) ---- */

static uint64_t round_bytes(uint64_t left)
{
	return left < BUF_SIZE ? left : BUF_SIZE;
}

/* RDMA WRITEs or READs of random sizes over [0, len) of the peer's buffer,
 * each from the same offset of ours through 1-4 SGEs. */
static void post_range(struct ctx *c, const struct peer *p, enum ibv_wr_opcode op, uint64_t len)
{
	for (uint64_t off = 0; off < len;) {
		uint32_t m = msg_size();
		struct ibv_send_wr wr = {0};
		struct ibv_sge sg[4];

		if (m > len - off)
			m = (uint32_t)(len - off);
		wr.opcode = op;
		wr.sg_list = sg;
		wr.num_sge = sges(c, sg, off, m);
		wr.wr.rdma.remote_addr = p->addr + off;
		wr.wr.rdma.rkey = p->rkey;
		post(c, &wr);
		off += m;
	}
}

static void write_c(struct ctx *c, const struct peer *p, uint64_t total)
{
	for (uint64_t done = 0, round = 1; done < total; round++) {
		uint64_t len = round_bytes(total - done);
		struct ibv_send_wr wr;

		drain(c); /* the local buffer is reused */
		fill(c->buf, round, 0, len);
		post_range(c, p, IBV_WR_RDMA_WRITE, len);
		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl((uint32_t)round);
		post(c, &wr); /* ordered after the writes: the round is complete */
		drain(c);
		sync_point(c); /* the server checked it */
		done += len;
	}
	printf("write: %" PRIu64 " bytes, checked by the server\n", total);
}

static void write_s(struct ctx *c, uint64_t total)
{
	for (uint64_t done = 0, round = 1; done < total; round++) {
		uint64_t len = round_bytes(total - done);
		struct ibv_wc wc = recv_one(c);
		int64_t bad;

		if (wc.opcode != IBV_WC_RECV || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
		    ntohl(wc.imm_data) != round)
			DIE("write round %" PRIu64 ": wrong closing SEND (imm %u)", round,
			    ntohl(wc.imm_data));
		post_recv(c, (uint32_t)wc.wr_id);
		bad = check(c->buf, round, 0, len);
		if (bad >= 0)
			DIE("write round %" PRIu64 ": byte %" PRId64 " differs", round, bad);
		sync_point(c);
		done += len;
	}
	printf("write: %" PRIu64 " bytes checked\n", total);
}

static void read_c(struct ctx *c, const struct peer *p, uint64_t total)
{
	for (uint64_t done = 0, round = 1; done < total; round++) {
		uint64_t len = round_bytes(total - done);
		int64_t bad;

		sync_point(c); /* the server filled its buffer */
		memset(c->buf, 0, len);
		post_range(c, p, IBV_WR_RDMA_READ, len);
		drain(c);
		bad = check(c->buf, round + 1000000, 0, len);
		if (bad >= 0)
			DIE("read round %" PRIu64 ": byte %" PRId64 " differs", round, bad);
		sync_point(c);
		done += len;
	}
	printf("read: %" PRIu64 " bytes checked\n", total);
}

static void read_s(struct ctx *c, uint64_t total)
{
	for (uint64_t done = 0, round = 1; done < total; round++) {
		uint64_t len = round_bytes(total - done);

		fill(c->buf, round + 1000000, 0, len);
		sync_point(c);
		sync_point(c); /* the client has read it */
		done += len;
	}
}

static void churn_c(struct ctx *c, const struct peer *p, uint64_t total)
{
	for (uint64_t done = 0; done < total;) {
		uint64_t len = round_bytes(total - done);

		post_range(c, p, IBV_WR_RDMA_READ, len);
		drain(c);
		done += len;
	}
	sync_point(c);
	printf("churn: %" PRIu64 " bytes read while the server rewrote them\n", total);
}

static void churn_s(struct ctx *c, bool poll_cq)
{
	struct pollfd pf = {.fd = c->sock, .events = POLLIN};
	uint64_t passes = 0;
	struct ibv_wc wc;

	do {
		for (uint32_t off = 0; off < BUF_SIZE; off += 65536) {
			memset(c->buf + off, (int)passes, 65536);
			if (poll_cq && ibv_poll_cq(c->cq, 1, &wc) != 0)
				DIE("churn: a completion nobody asked for");
		}
		passes++;
	} while (poll(&pf, 1, 0) == 0);
	sync_point(c);
	printf("churn: the buffer rewritten %" PRIu64 " times\n", passes);
}

static void send_c(struct ctx *c, uint64_t total)
{
	uint64_t seq = 0;

	for (uint64_t done = 0; done < total; seq++) {
		uint32_t m = msg_size();
		uint64_t off;
		struct ibv_send_wr wr = {0};
		struct ibv_sge sg[4];

		if (m < 16)
			m = 16;
		if (m > total - done && total - done >= 16)
			m = (uint32_t)(total - done);
		/* the local buffer is a ring of DEPTH + 1 slots of MAX_MSG */
		off = (seq % (DEPTH + 1)) * (uint64_t)MAX_MSG;
		while (c->posted - c->completed >= DEPTH)
			send_done(c);
		memcpy(c->buf + off, &seq, 8);
		memcpy(c->buf + off + 8, &m, 4);
		memset(c->buf + off + 12, 0, 4);
		fill(c->buf + off + 16, seq, 0, m - 16);
		wr.opcode = IBV_WR_SEND;
		wr.sg_list = sg;
		wr.num_sge = sges(c, sg, off, m);
		post(c, &wr);
		done += m;
	}
	drain(c);
	{
		uint64_t got;

		xchg(c->sock, &seq, &got, 8); /* how many; the server says it got them */
		if (got != seq)
			DIE("send: %" PRIu64 " sent, the server got %" PRIu64, seq, got);
	}
	printf("send: %" PRIu64 " messages, %" PRIu64 " bytes\n", seq, total);
}

static bool readable(int fd)
{
	struct timeval tv = {0, 0};
	fd_set fds;

	FD_ZERO(&fds);
	FD_SET(fd, &fds);
	return select(fd + 1, &fds, NULL, NULL, &tv) > 0;
}

static void send_s(struct ctx *c)
{
	uint64_t count = 0, bytes = 0, sent = UINT64_MAX;
	time_t last = time(NULL);

	/* the client says how many it sent once they all completed there */
	while (count != sent) {
		struct ibv_wc wc;
		char *p;
		uint64_t seq;
		uint32_t m;
		int n = ibv_poll_cq(c->cq, 1, &wc);

		if (n < 0)
			DIE("ibv_poll_cq failed");
		if (n == 0) {
			if (sent == UINT64_MAX && readable(c->sock) && read(c->sock, &sent, 8) != 8)
				DIE("side channel");
			if (time(NULL) - last > 60)
				DIE("send: no message for 60 s after %" PRIu64, count);
			sched_yield();
			continue;
		}
		last = time(NULL);
		if (wc.status != IBV_WC_SUCCESS)
			DIE("receive %" PRIu64 ": %s", count, ibv_wc_status_str(wc.status));
		p = c->buf + BUF_SIZE + (uint64_t)wc.wr_id * RECV_SIZE;
		memcpy(&seq, p, 8);
		memcpy(&m, p + 8, 4);
		if (seq != count)
			DIE("send: message %" PRIu64 " arrived where %" PRIu64 " was due", seq,
			    count);
		if (wc.byte_len != m || check(p + 16, seq, 0, m - 16) >= 0)
			DIE("send: message %" PRIu64 " damaged (%u bytes, %u sent)", seq,
			    wc.byte_len, m);
		post_recv(c, (uint32_t)wc.wr_id);
		count++;
		bytes += m;
		if (sent != UINT64_MAX && count > sent)
			DIE("send: more messages than were sent");
	}
	if (write(c->sock, &count, 8) != 8)
		DIE("side channel");
	printf("send: %" PRIu64 " messages in order, %" PRIu64 " bytes checked\n", count, bytes);
}

static void atomic_c(struct ctx *c, const struct peer *p, uint64_t n)
{
	uint64_t *ret = (uint64_t *)c->buf; /* DEPTH result slots */
	uint8_t *seen = calloc(n, 1);

	if (!seen)
		DIE("out of memory");
	for (uint64_t i = 0; i < n + DEPTH; i++) {
		if (i >= DEPTH) {
			uint64_t v;

			send_done(c);
			v = ret[(i - DEPTH) % DEPTH];
			if (v >= n || seen[v]++)
				DIE("atomic: value %" PRIu64 " returned twice or out of range", v);
		}
		if (i < n) {
			struct ibv_sge sg = {(uintptr_t)&ret[i % DEPTH], 8, c->mr->lkey};
			struct ibv_send_wr wr = {0};

			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.sg_list = &sg;
			wr.num_sge = 1;
			wr.wr.atomic.remote_addr = p->counter;
			wr.wr.atomic.rkey = p->rkey;
			wr.wr.atomic.compare_add = 1;
			post(c, &wr);
		}
	}
	free(seen);
	sync_point(c);
	printf("atomic: %" PRIu64 " fetch-and-adds, each value once\n", n);
}

static void atomic_s(struct ctx *c, uint64_t n)
{
	sync_point(c);
	if (*c->counter != n)
		DIE("atomic: the counter is %" PRIu64 " after %" PRIu64 " adds", *c->counter, n);
	printf("atomic: counter %" PRIu64 "\n", *c->counter);
}

/* ---- set-up ---- */

/* A QP numbered like the server's, on the client's host, able to receive. */
struct decoy {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static void decoy_make(struct ctx *c, struct decoy *d)
{
	struct ibv_qp_init_attr ia = {0};

	d->cq = ibv_create_cq(c->dev, 4, NULL, NULL, 0);
	if (!d->cq)
		DIE("decoy CQ");
	ia.send_cq = ia.recv_cq = d->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 2;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	d->qp = ibv_create_qp(c->pd, &ia);
	if (!d->qp)
		DIE("decoy QP: %s", strerror(errno));
}

static void connect_qp(struct ctx *c, struct ibv_qp *qp, int gidx, const struct peer *me,
		       const struct peer *p);

static void decoy_arm(struct ctx *c, struct decoy *d, int gidx, const struct peer *me)
{
	struct peer self = *me;
	struct ibv_sge sg = {(uintptr_t)c->counter + 64, 64, c->cmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 7, .sg_list = &sg, .num_sge = 1}, *bad;

	self.qpn = d->qp->qp_num; /* to itself, on this host */
	connect_qp(c, d->qp, gidx, &self, &self);
	if (ibv_post_recv(d->qp, &wr, &bad))
		DIE("decoy receive");
}

static void decoy_check(struct decoy *d)
{
	struct ibv_wc wc;

	if (ibv_poll_cq(d->cq, 1, &wc) != 0)
		DIE("the decoy QP 0x%x got a completion (opcode %d, status %s): another "
		    "host's traffic was routed by QPN alone",
		    d->qp->qp_num, wc.opcode, ibv_wc_status_str(wc.status));
	printf("decoy QP 0x%x, numbered like the server's, received nothing\n", d->qp->qp_num);
}

static void open_ctx(struct ctx *c, bool server, struct decoy *d)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	size_t len =
	    BUF_SIZE + (server ? (size_t)DEPTH * RECV_SIZE : (size_t)(DEPTH + 1) * MAX_MSG);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_qp_init_attr ia = {0};

	if (!list || !list[0])
		DIE("no RDMA device");
	c->dev = ibv_open_device(list[0]);
	if (!c->dev)
		DIE("ibv_open_device");
	c->pd = ibv_alloc_pd(c->dev);
	c->cq = ibv_create_cq(c->dev, 2 * DEPTH + 2, NULL, NULL, 0);
	c->buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096); /* C11: a multiple */
	c->counter = aligned_alloc(4096, 4096);
	if (!c->pd || !c->cq || !c->buf || !c->counter)
		DIE("resources");
	memset(c->buf, 0, len);
	*c->counter = 0;
	c->mr = ibv_reg_mr(c->pd, c->buf, len, acc);
	c->cmr = ibv_reg_mr(c->pd, c->counter, 4096, acc);
	if (!c->mr || !c->cmr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	if (d)
		decoy_make(c, d); /* first: the number the server's first QP gets */
	ia.send_cq = ia.recv_cq = c->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = DEPTH;
	ia.cap.max_recv_wr = DEPTH;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 1;
	c->qp = ibv_create_qp(c->pd, &ia);
	if (!c->qp)
		DIE("ibv_create_qp: %s", strerror(errno));
	ibv_free_device_list(list);
}

/* Everything open_ctx (and decoy_make) made, given back: a sanitizer
 * build's leak check then has nothing to report. */
static void close_ctx(struct ctx *c, struct decoy *d)
{
	if (d && d->qp) {
		ibv_destroy_qp(d->qp);
		ibv_destroy_cq(d->cq);
	}
	if (ibv_destroy_qp(c->qp) || ibv_dereg_mr(c->mr) || ibv_dereg_mr(c->cmr) ||
	    ibv_destroy_cq(c->cq) || ibv_dealloc_pd(c->pd) || ibv_close_device(c->dev))
		DIE("teardown: %s", strerror(errno));
	free(c->buf);
	free(c->counter);
	close(c->sock);
}

static void connect_qp(struct ctx *c, struct ibv_qp *qp, int gidx, const struct peer *me,
		       const struct peer *p)
{
	side_rc_connect(c->dev, qp, gidx, p->gid, p->qpn, p->psn, me->psn,
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
			16);
}

int main(int argc, char **argv)
{
	const char *ops = "write,read,send,atomic", *port = "18515";
	uint64_t bytes = 64ull << 20, natomic = 10000;
	struct peer me = {0}, p;
	struct ctx c = {0};
	union ibv_gid gid;
	int gidx = 0, opt;
	bool server, decoy = false;
	struct decoy dc = {0};

	rng_state = 1;
	while ((opt = getopt(argc, argv, "g:p:b:n:s:o:D")) != -1) {
		switch (opt) {
		case 'g':
			gidx = atoi(optarg);
			break;
		case 'p':
			port = optarg;
			break;
		case 'b':
			bytes = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			natomic = strtoull(optarg, NULL, 0);
			break;
		case 's':
			rng_state = strtoull(optarg, NULL, 0);
			break;
		case 'o':
			ops = optarg;
			break;
		case 'D':
			decoy = true;
			break;
		default:
			fprintf(stderr, "usage: sr_xfer [-g gid] [-p port] [-b bytes] [-n atomics] "
					"[-s seed] [-o ops] [server]\n");
			return 2;
		}
	}
	server = optind >= argc;
	decoy = decoy && !server;
	open_ctx(&c, server, decoy && !server ? &dc : NULL);
	if (ibv_query_gid(c.dev, 1, gidx, &gid))
		DIE("ibv_query_gid %d", gidx);
	me.qpn = c.qp->qp_num;
	me.psn = (uint32_t)(rnd() & 0xffffff) | 0x800000; /* near the wrap sometimes */
	me.rkey = c.mr->rkey;
	me.addr = (uintptr_t)c.buf;
	me.counter = (uintptr_t)c.counter;
	me.crkey = c.cmr->rkey;
	memcpy(me.gid, gid.raw, 16);
	c.sock = side_channel(server ? NULL : argv[optind], port);
	xchg(c.sock, &me, &p, sizeof(me));
	if (decoy) {
		if (dc.qp->qp_num != p.qpn)
			DIE("no collision: the decoy is 0x%x, the server's QP 0x%x (both daemons "
			    "need the same SOFTRDMA_TEST_QPN_TAG)",
			    dc.qp->qp_num, p.qpn);
		decoy_arm(&c, &dc, gidx, &me);
	}
	connect_qp(&c, c.qp, gidx, &me, &p);
	if (server)
		for (uint32_t i = 0; i < DEPTH; i++)
			post_recv(&c, i);
	/* parameters from the client */
	{
		uint64_t prm[2] = {bytes, natomic}, got[2];
		char o[64] = {0}, og[64];

		snprintf(o, sizeof(o), "%s", ops);
		xchg(c.sock, prm, got, sizeof(prm));
		xchg(c.sock, o, og, sizeof(o));
		if (server) {
			bytes = got[0];
			natomic = got[1];
			ops = strdup(og);
		}
	}
	sync_point(&c);
	if (strstr(ops, "write"))
		server ? write_s(&c, bytes) : write_c(&c, &p, bytes);
	if (strstr(ops, "read"))
		server ? read_s(&c, bytes) : read_c(&c, &p, bytes);
	if (strstr(ops, "churn"))
		server ? churn_s(&c, strstr(ops, "churnpoll")) : churn_c(&c, &p, bytes);
	if (strstr(ops, "send"))
		server ? send_s(&c) : send_c(&c, bytes);
	if (strstr(ops, "atomic")) {
		struct peer q = p;

		q.rkey = p.crkey;
		server ? atomic_s(&c, natomic) : atomic_c(&c, &q, natomic);
	}
	sync_point(&c);
	if (decoy)
		decoy_check(&dc);
	close_ctx(&c, decoy ? &dc : NULL);
	if (server)
		free((char *)ops);
	printf("sr_xfer: all checks passed\n");
	return 0;
}
