/*
 * sr_blocked: a process that stops polling its CQ and blocks in the kernel
 * still gets its datagrams (docs/architecture.md, "The receive half",
 * *Progress*): with every receive-half switch at its default, the server
 * polls its CQ without a break for 1 ms before each wait (so that its
 * host's engine leaves its member of the socket group to it, src/engine/
 * engine.c rx_lend), then blocks in one of:
 *
 *   -w poll   the CQ armed, poll() on the completion channel's fd
 *   -w epoll  the CQ armed, epoll_wait() on it
 *   -w event  the CQ armed, ibv_get_cq_event()
 *   -w sleep  nothing armed: nanosleep() for 100 ms, then it polls again
 *
 * and the client SENDs it one message per round at delays from 0.5 to
 * 2.25 ms after the last answer, around the end of the server's polling
 * and past it.  In the first three modes the server answers each message
 * with a SEND once woken; every answer must come within -t ms (100 by
 * default; a datagram nobody takes would leave the server asleep for
 * good).  With -w sleep nobody answers: each SEND must complete (its ACK,
 * which only the engine can send while the server sleeps) within -t ms
 * (less than the server's sleep), and at the end the server, having found
 * every message, answers once.  Every completion must be IBV_WC_SUCCESS
 * and carry the round's value.  Works on one host and across two.
 *
 *   server: sr_blocked -g GID_INDEX -p PORT
 *   client: sr_blocked -g GID_INDEX -p PORT [-w MODE] [-n ROUNDS] [-t MS] SERVER_ADDR
 */
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "side.h"

enum mode { M_POLL, M_EPOLL, M_EVENT, M_SLEEP };
static const char *const mode_name[] = {"poll", "epoll", "event", "sleep"};

#define MAX_ROUNDS 400
#define SPIN_NS	   1000000ull
#define SLEEP_NS   100000000ull

struct peer {
	uint32_t qpn, psn, rounds, mode, limit_ms;
	uint8_t gid[16];
};

struct ctx {
	struct ibv_context *dev;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq, *scq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint64_t *buf; /* [0]: what is sent, [1..]: receives */
};

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void nap_ns(uint64_t ns)
{
	struct timespec t = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

static void post_recv(struct ctx *c, uint32_t slot)
{
	struct ibv_sge sge = {(uintptr_t)&c->buf[1 + slot], 8, c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(c->qp, &wr, &bad))
		DIE("ibv_post_recv: %s", strerror(errno));
}

static void post_send(struct ctx *c, uint64_t v)
{
	struct ibv_sge sge = {(uintptr_t)&c->buf[0], 8, c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = v,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	c->buf[0] = v;
	if (ibv_post_send(c->qp, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
}

/* Spins on cq for one completion until deadline (CLOCK_MONOTONIC ns):
 * true if there is one, in *wc, and it succeeded. */
static bool spin_one(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t deadline)
{
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			DIE("ibv_poll_cq: %d", n);
		if (n) {
			if (wc->status != IBV_WC_SUCCESS)
				DIE("completion of wr %" PRIu64 ": %s", wc->wr_id,
				    ibv_wc_status_str(wc->status));
			return true;
		}
		if (now_ns() >= deadline)
			return false;
	}
}

/* The server's wait for its next message after 1 ms of polling: the
 * receive's completion in *wc.  An event may be left over from a
 * completion that came while the CQ was being armed (found by the poll
 * after arming): then it arms and waits again. */
static void server_wait(struct ctx *c, enum mode m, int ep, struct ibv_wc *wc)
{
	struct ibv_cq *ecq;
	void *ectx;

	if (spin_one(c->rcq, wc, now_ns() + SPIN_NS))
		return;
	for (;;) {
		if (ibv_req_notify_cq(c->rcq, 0))
			DIE("ibv_req_notify_cq");
		if (ibv_poll_cq(c->rcq, 1, wc) == 1) /* came while arming */
			break;
		if (m == M_POLL) {
			struct pollfd p = {.fd = c->ch->fd, .events = POLLIN};

			if (poll(&p, 1, 10000) != 1)
				DIE("poll: no completion event within 10 s");
		} else if (m == M_EPOLL) {
			struct epoll_event ev;

			if (epoll_wait(ep, &ev, 1, 10000) != 1)
				DIE("epoll_wait: no completion event within 10 s");
		}
		alarm(10); /* ibv_get_cq_event blocks (M_EVENT); dies on SIGALRM */
		if (ibv_get_cq_event(c->ch, &ecq, &ectx))
			DIE("ibv_get_cq_event: %s", strerror(errno));
		alarm(0);
		ibv_ack_cq_events(ecq, 1);
		if (ibv_poll_cq(c->rcq, 1, wc) == 1)
			break;
	}
	if (wc->status != IBV_WC_SUCCESS)
		DIE("receive: %s", ibv_wc_status_str(wc->status));
}

static void server(struct ctx *c, const struct peer *pr)
{
	enum mode m = (enum mode)pr->mode;
	struct ibv_wc wc;
	int ep = -1;

	if (m == M_EPOLL) {
		struct epoll_event ev = {.events = EPOLLIN};

		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->ch->fd, &ev))
			DIE("epoll: %s", strerror(errno));
	}
	if (m == M_SLEEP) {
		uint32_t got = 0;

		/* poll 1 ms, sleep 100 ms, until every message is in */
		while (got < pr->rounds) {
			uint64_t end = now_ns() + SPIN_NS;

			while (got < pr->rounds && spin_one(c->rcq, &wc, end)) {
				if (c->buf[1 + wc.wr_id] != wc.wr_id)
					DIE("message %" PRIu64 " carries %" PRIu64, wc.wr_id,
					    c->buf[1 + wc.wr_id]);
				got++;
			}
			if (got < pr->rounds)
				nap_ns(SLEEP_NS);
		}
		post_send(c, pr->rounds);
		if (!spin_one(c->scq, &wc, now_ns() + 5000000000ull))
			DIE("the final answer did not complete");
		printf("server: %u messages found between sleeps\n", got);
		return;
	}
	for (uint32_t i = 0; i < pr->rounds; i++) {
		server_wait(c, m, ep, &wc);
		if (wc.wr_id != i || c->buf[1 + i] != i)
			DIE("round %u: message %" PRIu64 " carries %" PRIu64, i, wc.wr_id,
			    c->buf[1 + wc.wr_id]);
		post_send(c, i);
		if (!spin_one(c->scq, &wc, now_ns() + 5000000000ull))
			DIE("round %u: the answer did not complete within 5 s", i);
	}
	printf("server: %u rounds, each woken from %s\n", pr->rounds, mode_name[m]);
}

static void client(struct ctx *c, const struct peer *pr)
{
	enum mode m = (enum mode)pr->mode;
	uint64_t limit = (uint64_t)pr->limit_ms * 1000000ull, worst = 0, sum = 0;
	struct ibv_wc wc;

	for (uint32_t i = 0; i < pr->rounds; i++) {
		uint64_t t0, t;

		nap_ns(500000ull + (i % 8) * 250000ull);
		t0 = now_ns();
		post_send(c, i);
		if (m == M_SLEEP) {
			if (!spin_one(c->scq, &wc, t0 + limit))
				DIE("round %u: the SEND was not acknowledged within %u ms while "
				    "its target slept",
				    i, pr->limit_ms);
		} else {
			if (!spin_one(c->scq, &wc, t0 + 5000000000ull))
				DIE("round %u: the SEND did not complete within 5 s", i);
			if (!spin_one(c->rcq, &wc, t0 + limit))
				DIE("round %u: no answer within %u ms from a server blocked in "
				    "%s",
				    i, pr->limit_ms, mode_name[m]);
			if (c->buf[1 + wc.wr_id] != i)
				DIE("round %u: answer %" PRIu64, i, c->buf[1 + wc.wr_id]);
			post_recv(c, (uint32_t)wc.wr_id);
		}
		t = now_ns() - t0;
		sum += t;
		if (t > worst)
			worst = t;
	}
	if (m == M_SLEEP && !spin_one(c->rcq, &wc, now_ns() + 5000000000ull))
		DIE("no final answer");
	printf("client: %u rounds (%s), average %.1f us, worst %.1f us\n", pr->rounds, mode_name[m],
	       (double)sum / pr->rounds / 1000.0, (double)worst / 1000.0);
}

int main(int argc, char **argv)
{
	const char *port = NULL, *host = NULL;
	struct peer me = {.rounds = 100, .limit_ms = 100}, them;
	struct ibv_device **list;
	struct ibv_qp_init_attr qa = {0};
	union ibv_gid gid;
	struct ctx c = {0};
	int gidx = -1, opt, sock;

	while ((opt = getopt(argc, argv, "g:p:w:n:t:")) != -1) {
		switch (opt) {
		case 'g':
			gidx = atoi(optarg);
			break;
		case 'p':
			port = optarg;
			break;
		case 'w':
			for (me.mode = 0; me.mode < 4 && strcmp(optarg, mode_name[me.mode]);
			     me.mode++)
				;
			if (me.mode == 4)
				DIE("-w: poll, epoll, event or sleep");
			break;
		case 'n':
			me.rounds = (uint32_t)atoi(optarg);
			break;
		case 't':
			me.limit_ms = (uint32_t)atoi(optarg);
			break;
		default:
			DIE("usage: %s -g GID_INDEX -p PORT [-w MODE] [-n ROUNDS] [-t MS] [SERVER]",
			    argv[0]);
		}
	}
	if (optind < argc)
		host = argv[optind];
	if (gidx < 0 || !port || !me.rounds || me.rounds > MAX_ROUNDS)
		DIE("-g and -p needed; 1 to %d rounds", MAX_ROUNDS);
	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0] || !(c.dev = ibv_open_device(list[0])))
		DIE("no device");
	c.pd = ibv_alloc_pd(c.dev);
	c.ch = ibv_create_comp_channel(c.dev);
	c.buf = calloc(1 + MAX_ROUNDS + 1, 8);
	if (!c.pd || !c.ch || !c.buf)
		DIE("pd/channel");
	c.mr = ibv_reg_mr(c.pd, c.buf, (1 + MAX_ROUNDS + 1) * 8, IBV_ACCESS_LOCAL_WRITE);
	/* the receive CQ has the channel (its owner may sleep on it), the
	 * send CQ none */
	c.rcq = ibv_create_cq(c.dev, 2 * MAX_ROUNDS, NULL, c.ch, 0);
	c.scq = ibv_create_cq(c.dev, 2 * MAX_ROUNDS, NULL, NULL, 0);
	if (!c.mr || !c.rcq || !c.scq)
		DIE("mr/cq");
	qa.send_cq = c.scq;
	qa.recv_cq = c.rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 4;
	qa.cap.max_recv_wr = MAX_ROUNDS + 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	c.qp = ibv_create_qp(c.pd, &qa);
	if (!c.qp || ibv_query_gid(c.dev, 1, gidx, &gid))
		DIE("qp/gid");
	me.qpn = c.qp->qp_num;
	me.psn = (uint32_t)(now_ns() & 0xffffff);
	memcpy(me.gid, gid.raw, 16);
	sock = side_channel(host, port);
	xchg(sock, &me, &them, sizeof(me));
	if (!host) { /* the client says how */
		me.rounds = them.rounds;
		me.mode = them.mode;
		me.limit_ms = them.limit_ms;
	}
	if (me.rounds > MAX_ROUNDS || me.mode > M_SLEEP)
		DIE("bad parameters from the client");
	side_rc_connect(c.dev, c.qp, gidx, them.gid, them.qpn, them.psn, me.psn, 0, 0);
	/* every receive posted before the peer may send (after the exchange) */
	for (uint32_t i = 0; i < (host ? 1 : me.rounds); i++)
		post_recv(&c, i);
	xchg(sock, &me, &them, sizeof(me)); /* both at RTS */
	if (host)
		client(&c, &me);
	else
		server(&c, &me);
	xchg(sock, &me, &them, sizeof(me)); /* both done */
	close(sock);
	ibv_destroy_qp(c.qp);
	ibv_destroy_cq(c.scq);
	ibv_destroy_cq(c.rcq);
	ibv_dereg_mr(c.mr);
	ibv_destroy_comp_channel(c.ch);
	ibv_dealloc_pd(c.pd);
	ibv_close_device(c.dev);
	ibv_free_device_list(list);
	printf("all checks passed\n");
	return 0;
}
