/*
 * sr_ackpp: an RDMA WRITE ping-pong between two hosts, as ib_write_lat
 * runs it (each side spins on its buffer for the peer's WRITE, then
 * WRITEs back, every WRITE signaled), checking what a responder's ACK
 * handed to the next request (src/transport/resp.c, "ACKs that go with the
 * QP's next request") must keep true:
 *
 *  - every WRITE completes with IBV_WC_SUCCESS, in order, and every value
 *    arrives; the client reports how many of its rounds took longer than
 *    the engine's first tail-loss probe (2 ms: an ACK that waited for a
 *    request that never came would show there);
 *  - with -R, last, the client WRITEs once more and the server, as soon as
 *    it sees that value, resets its QP and connects it to a second QP of
 *    the client, then WRITEs to it: the ACK the old connection owed (left
 *    for the QP's next request) must never go with the new connection's
 *    requests (xfer.sh checks that host b counted no drop_state: the new
 *    QP posts nothing, so an ACK reaching it would be counted there);
 *  - otherwise, last, the client WRITEs once more and the server, as soon as it sees
 *    that value, destroys its QP without answering: the ACK it owed can
 *    no longer ride with a request and its QP is gone, yet the client's
 *    WRITE must complete with IBV_WC_SUCCESS (an HCA sends the ACK before
 *    the owner sees the data), not after retries with RETRY_EXC_ERR.
 *
 *  - with -H FILE (client), before that last WRITE the client creates FILE
 *    and waits until it is removed: a script makes that ACK get lost
 *    meanwhile (tests/twohost/ack_gone.sh), and the WRITE must still
 *    complete with IBV_WC_SUCCESS, its resend answered by the engine of a
 *    host whose QP is gone (transport/resp.c, sr_eng_resp_gone).
 *
 *  - with -s SIZE, each WRITE carries SIZE bytes (8 to 32768; the value
 *    in its first and last 8), a message of several packets, and the
 *    target waits for its last 8 bytes, as ib_write_lat does for its last
 *    byte; the first must be there by then too.
 *
 *  - with -C, the CQ has a completion channel (the program still spins):
 *    its owner may sleep for events, so its responder never holds an ACK
 *    for its next request (xfer.sh checks acks_with_requests is 0).
 *
 *   server: sr_ackpp -g GID_INDEX -p PORT [-C]
 *   client: sr_ackpp -g GID_INDEX -p PORT [-n ROUNDS] [-s SIZE] [-R] [-H FILE] [-C] SERVER_ADDR
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "side.h"

struct peer {
	uint32_t qpn, psn, rkey, rounds; /* the server takes the client's rounds */
	uint32_t size;			 /* ... and size */
	uint32_t qpn2, psn2, reconnect;	 /* -R: the client's second QP */
	uint64_t addr;
	uint8_t gid[16];
};

struct ctx {
	struct ibv_context *dev;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch; /* -C */
	struct ibv_cq *cq;
	struct ibv_qp *qp, *qp2;
	struct ibv_mr *mr;
	volatile uint64_t *in; /* the peer WRITEs here */
	uint64_t *out;	       /* we WRITE from here */
	uint32_t size;	       /* bytes a WRITE (-s) */
	struct peer peer;
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static bool with_channel; /* -C */

#define SIZE_MAX_BYTES 32768 /* -s at most */

static void open_ctx(struct ctx *c)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia = {0};
	uint64_t *buf;

	if (!list || !list[0])
		DIE("no RDMA device");
	c->dev = ibv_open_device(list[0]);
	if (!c->dev)
		DIE("ibv_open_device");
	ibv_free_device_list(list);
	c->pd = ibv_alloc_pd(c->dev);
	if (with_channel) {
		c->ch = ibv_create_comp_channel(c->dev);
		if (!c->ch)
			DIE("ibv_create_comp_channel");
	}
	c->cq = ibv_create_cq(c->dev, 16, NULL, c->ch, 0);
	buf = aligned_alloc(4096, 2 * SIZE_MAX_BYTES);
	if (!c->pd || !c->cq || !buf)
		DIE("resources");
	memset(buf, 0, 2 * SIZE_MAX_BYTES);
	c->in = buf;
	c->out = buf + SIZE_MAX_BYTES / 8;
	c->mr = ibv_reg_mr(c->pd, buf, 2 * SIZE_MAX_BYTES,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->mr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	ia.send_cq = ia.recv_cq = c->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	c->qp = ibv_create_qp(c->pd, &ia);
	c->qp2 = ibv_create_qp(c->pd, &ia);
	if (!c->qp || !c->qp2)
		DIE("ibv_create_qp: %s", strerror(errno));
}

/* WRITEs v into the peer's buffer and waits for its completion; returns
 * how long that took, in microseconds. */
static uint64_t write_value(struct ctx *c, uint64_t v)
{
	struct ibv_sge sg = {(uintptr_t)c->out, c->size, c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = v,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	uint64_t t0 = now_us();
	int n;

	c->out[0] = v;
	c->out[c->size / 8 - 1] = v;
	wr.wr.rdma.remote_addr = c->peer.addr;
	wr.wr.rdma.rkey = c->peer.rkey;
	if (ibv_post_send(c->qp, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
	while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 0)
		;
	if (n < 0)
		DIE("ibv_poll_cq");
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != v)
		DIE("WRITE %" PRIu64 ": %s (wr_id %" PRIu64 ")", v, ibv_wc_status_str(wc.status),
		    wc.wr_id);
	return now_us() - t0;
}

static void wait_value(struct ctx *c, uint64_t v)
{
	volatile uint64_t *last = c->in + c->size / 8 - 1;
	uint64_t t0 = now_us();

	while (*last != v)
		if (now_us() - t0 > 10000000)
			DIE("value %" PRIu64 " did not arrive in 10 s (have %" PRIu64 ")", v,
			    *last);
	if (c->in[0] != v)
		DIE("value %" PRIu64 ": its last 8 bytes came, its first 8 are %" PRIu64, v,
		    c->in[0]);
}

/*
 * -R's last phase.  The server, as soon as it sees value rounds + 1 (its
 * ACK still owed), resets its QP and connects it to the client's second QP,
 * then WRITEs three more values to it; the client, which did not wait for
 * that last WRITE's completion, destroys its first QP and takes them on
 * the second one.
 */
static void reconnect_phase(struct ctx *c, int s, bool server, int gidx, const struct peer *me,
			    unsigned rounds)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
	struct ibv_sge sg = {(uintptr_t)c->out, c->size, c->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	uint32_t psn = ((uint32_t)rand() & 0xffffff), peer_psn;
	char k = 'k', peer_k;

	if (server) {
		wait_value(c, rounds + 1);
		if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE))
			DIE("RESET: %s", strerror(errno));
		side_rc_connect(c->dev, c->qp, gidx, c->peer.gid, c->peer.qpn2, c->peer.psn2, psn,
				IBV_ACCESS_REMOTE_WRITE, 0);
		xchg(s, &psn, &peer_psn, sizeof(psn));
		xchg(s, &k, &peer_k, 1); /* the client's second QP in RTS */
		for (uint64_t v = rounds + 2; v <= rounds + 4; v++)
			write_value(c, v);
		printf("server: QP reset on value %u with its ACK owed, connected again to the "
		       "client's second QP, three WRITEs completed\n",
		       rounds + 1);
		return;
	}
	c->out[0] = rounds + 1;
	c->out[c->size / 8 - 1] = rounds + 1;
	wr.wr_id = rounds + 1;
	wr.wr.rdma.remote_addr = c->peer.addr;
	wr.wr.rdma.rkey = c->peer.rkey;
	if (ibv_post_send(c->qp, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
	xchg(s, &psn, &peer_psn, sizeof(psn)); /* the server's QP reset, connected again */
	if (ibv_destroy_qp(c->qp))
		DIE("ibv_destroy_qp: %s", strerror(errno));
	c->qp = c->qp2;
	side_rc_connect(c->dev, c->qp, gidx, c->peer.gid, c->peer.qpn, peer_psn, me->psn2,
			IBV_ACCESS_REMOTE_WRITE, 0);
	xchg(s, &k, &peer_k, 1);
	wait_value(c, rounds + 4);
	printf("client: the server's QP moved to our second QP; its three WRITEs arrived\n");
}

/* -H: creates path, then waits (up to 30 s) until it is removed. */
static void hold_at(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f || fclose(f))
		DIE("-H %s: %s", path, strerror(errno));
	for (int ms = 0; access(path, F_OK) == 0; ms++) {
		if (ms > 30000)
			DIE("-H %s: not removed within 30 s", path);
		usleep(1000);
	}
}

int main(int argc, char **argv)
{
	const char *port = "18515";
	unsigned rounds = 2000, slow = 0;
	struct peer me = {0};
	struct ctx c = {0};
	union ibv_gid gid;
	int gidx = 0, opt, s;
	bool server, reconnect = false;
	uint64_t last_us;
	char done = 'd', peer_done;
	const char *hold = NULL;

	c.size = 8;
	while ((opt = getopt(argc, argv, "g:p:n:s:RH:C")) != -1) {
		switch (opt) {
		case 'g':
			gidx = atoi(optarg);
			break;
		case 'p':
			port = optarg;
			break;
		case 'n':
			rounds = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 's':
			c.size = (uint32_t)strtoul(optarg, NULL, 0);
			if (c.size < 8 || c.size > SIZE_MAX_BYTES || c.size % 8)
				DIE("-s: 8 to %d bytes, a multiple of 8", SIZE_MAX_BYTES);
			break;
		case 'R':
			reconnect = true;
			break;
		case 'H':
			hold = optarg;
			break;
		case 'C':
			with_channel = true;
			break;
		default:
			fprintf(stderr,
				"usage: sr_ackpp [-g gid] [-p port] [-n rounds] [-s size] [-R] "
				"[-H file] [-C] [server]\n");
			return 2;
		}
	}
	server = optind >= argc;
	open_ctx(&c);
	if (ibv_query_gid(c.dev, 1, gidx, &gid))
		DIE("ibv_query_gid %d", gidx);
	srand((unsigned)getpid());
	me.qpn = c.qp->qp_num;
	me.psn = (uint32_t)rand() & 0xffffff;
	me.rkey = c.mr->rkey;
	me.rounds = rounds;
	me.size = c.size;
	me.qpn2 = c.qp2->qp_num;
	me.psn2 = (uint32_t)rand() & 0xffffff;
	me.reconnect = reconnect;
	me.addr = (uintptr_t)c.in;
	memcpy(me.gid, gid.raw, 16);
	s = side_channel(server ? NULL : argv[optind], port);
	xchg(s, &me, &c.peer, sizeof(me));
	if (server) {
		rounds = c.peer.rounds;
		reconnect = c.peer.reconnect;
		c.size = c.peer.size;
		if (c.size < 8 || c.size > SIZE_MAX_BYTES || c.size % 8)
			DIE("the client's size %u is not one of -s's", c.size);
	}
	side_rc_connect(c.dev, c.qp, gidx, c.peer.gid, c.peer.qpn, c.peer.psn, me.psn,
			IBV_ACCESS_REMOTE_WRITE, 0);
	/* for a failure's record: which QPs (softrdma status, unknown_qpn) */
	printf("%s: QPN 0x%06x, peer's 0x%06x\n", server ? "server" : "client", me.qpn, c.peer.qpn);
	xchg(s, &done, &peer_done, 1); /* both sides in RTS */

	for (uint64_t i = 1; i <= rounds; i++) {
		if (server) {
			wait_value(&c, i);
			if (write_value(&c, i) > 2000)
				slow++;
		} else {
			if (write_value(&c, i) > 2000)
				slow++;
			wait_value(&c, i);
		}
	}
	if (reconnect) {
		reconnect_phase(&c, s, server, gidx, &me, rounds);
	} else if (server) {
		/* the last value: gone at once, the ACK still owed */
		wait_value(&c, rounds + 1);
		if (ibv_destroy_qp(c.qp))
			DIE("ibv_destroy_qp: %s", strerror(errno));
		printf("server: %u rounds, %u completions after more than 2 ms; QP destroyed "
		       "as soon as value %u arrived\n",
		       rounds, slow, rounds + 1);
		fflush(stdout); /* ack_gone.sh waits for this line */
	} else {
		if (hold)
			hold_at(hold);
		last_us = write_value(&c, rounds + 1);
		printf("client: %u rounds, %u completions after more than 2 ms; the last WRITE, "
		       "whose target destroyed its QP on seeing it, completed in %" PRIu64 " us\n",
		       rounds, slow, last_us);
	}
	xchg(s, &done, &peer_done, 1);
	close(s);
	printf("all checks passed\n");
	return 0;
}
