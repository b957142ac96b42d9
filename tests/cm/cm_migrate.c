/*
 * rdma_migrate_id and the event channels' readiness (issue #35, defect 2),
 * one case per run:
 *   cm_migrate pending | pending_nonblock | listener | sync | acked |
 *              three_serial | three_concurrent
 * The kernel's ucma_migrate_id moves the id's queued events (those whose
 * context is the id: a listener's CONNECT_REQUESTs too) to the new
 * channel's queue, and each channel's fd polls readable while its own queue
 * is not empty; rdma-core's rdma_migrate_id then waits until the events of
 * the id already handed out are acked (a CONNECT_REQUEST counts against
 * its listener, not the new id).  The three_* cases do what librpma's
 * example 13 does: one listener channel (O_NONBLOCK, as its epoll loop
 * makes it), three clients, each new id migrated to a channel of its own
 * right after rdma_accept, its ESTABLISHED taken there, then ping-pongs
 * over the three QPs sharing one SRQ.  Clients are processes forked before
 * anyone touches librdmacm.  Each case exits 0 when the behaviour is the
 * kernel's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: FAILED: %s (errno %d %s)\n", __FILE__, __LINE__,   \
				#c, errno, strerror(errno));                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#define NCLIENTS 3
#define ROUNDS	 5
#define SLOT	 64

static struct sockaddr_in addr4(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static int pick_port(void)
{
	srand(getpid() ^ time(NULL));
	return 20000 + rand() % 20000;
}

/* 1 when fd polls readable within ms, else 0. */
static int readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, ms);

	CHECK(n >= 0);
	return n == 1 && (p.revents & POLLIN);
}

static void set_nonblock(struct rdma_event_channel *ch)
{
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
}

/* The next event of ch, of type t: ch must poll readable within ms, and a
 * channel that polled readable must give an event (never EAGAIN). */
static struct rdma_cm_event *take(struct rdma_event_channel *ch, enum rdma_cm_event_type t, int ms)
{
	struct rdma_cm_event *ev;

	if (!readable(ch->fd, ms)) {
		fprintf(stderr, "FAILED: no %s on fd %d within %d ms\n", rdma_event_str(t), ch->fd,
			ms);
		exit(1);
	}
	if (rdma_get_cm_event(ch, &ev)) {
		fprintf(stderr, "FAILED: fd %d polled readable, rdma_get_cm_event: %s\n", ch->fd,
			strerror(errno));
		exit(1);
	}
	printf("fd %d: %s status %d\n", ch->fd, rdma_event_str(ev->event), ev->status);
	if (ev->event != t) {
		fprintf(stderr, "FAILED: expected %s\n", rdma_event_str(t));
		exit(1);
	}
	return ev;
}

/* An O_NONBLOCK channel with nothing queued: not readable, and EAGAIN. */
static void empty_nonblock(struct rdma_event_channel *ch, const char *what)
{
	struct rdma_cm_event *ev;

	if (readable(ch->fd, 0)) {
		fprintf(stderr, "FAILED: %s: fd %d polls readable with its queue empty\n", what,
			ch->fd);
		exit(1);
	}
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN);
}

/* ADDR_RESOLVED queued on ch for a new id (its fd readable). */
static struct rdma_cm_id *id_with_event(struct rdma_event_channel *ch)
{
	struct sockaddr_in dst = addr4("127.0.0.1", 7471);
	struct rdma_cm_id *id;

	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	CHECK(readable(ch->fd, 2000));
	return id;
}

/* One id, its event queued on a, migrated to b (and back): the event and
 * the readiness move with it; a second id's event stays where it is. */
static int pending_case(bool nonblock)
{
	struct rdma_event_channel *a = rdma_create_event_channel(),
				  *b = rdma_create_event_channel();
	struct rdma_cm_id *id, *other;
	struct rdma_cm_event *ev;

	CHECK(a && b);
	if (nonblock) {
		set_nonblock(a);
		set_nonblock(b);
	}
	id = id_with_event(a);
	CHECK(rdma_migrate_id(id, b) == 0);
	CHECK(id->channel == b);
	printf("after migrate: a %d, b %d\n", readable(a->fd, 0), readable(b->fd, 0));
	CHECK(!readable(a->fd, 0));
	CHECK(readable(b->fd, 0));
	if (nonblock)
		empty_nonblock(a, "old channel");
	/* back to a: a is readable again, b is not */
	CHECK(rdma_migrate_id(id, a) == 0);
	CHECK(!readable(b->fd, 0));
	ev = take(a, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	CHECK(ev->id == id);
	rdma_ack_cm_event(ev);
	CHECK(!readable(a->fd, 0));
	/* two ids' events on a, one of them moved: a keeps exactly one (the
	 * other id's queued first, so it surely is there when it moves) */
	other = id_with_event(a);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	CHECK(rdma_migrate_id(other, b) == 0);
	ev = take(a, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000);
	CHECK(ev->id == id);
	rdma_ack_cm_event(ev);
	CHECK(!readable(a->fd, 0));
	ev = take(b, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	CHECK(ev->id == other);
	rdma_ack_cm_event(ev);
	CHECK(!readable(b->fd, 0));
	if (nonblock) {
		empty_nonblock(a, "a at the end");
		empty_nonblock(b, "b at the end");
	}
	/* a destroyed id's queued event goes with it */
	CHECK(rdma_resolve_route(other, 2000) == 0);
	CHECK(readable(b->fd, 2000));
	CHECK(rdma_destroy_id(other) == 0);
	CHECK(!readable(b->fd, 0));
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(a);
	rdma_destroy_event_channel(b);
	return 0;
}

static int pending(void)
{
	return pending_case(false);
}

static int pending_nonblock(void)
{
	return pending_case(true);
}

/* Migrating an id to no channel (synchronous mode): its queued event
 * leaves the old channel for the id's own. */
static int sync_case(void)
{
	struct rdma_event_channel *a = rdma_create_event_channel();
	struct rdma_cm_id *id;

	CHECK(a);
	set_nonblock(a);
	id = id_with_event(a);
	CHECK(rdma_migrate_id(id, NULL) == 0);
	CHECK(id->channel && id->channel != a);
	printf("after migrate to NULL: old %d, own %d\n", readable(a->fd, 0),
	       readable(id->channel->fd, 0));
	empty_nonblock(a, "old channel");
	CHECK(readable(id->channel->fd, 0));
	errno = 0;
	CHECK(rdma_migrate_id(id, NULL) == -1 && errno == EINVAL); /* already synchronous */
	CHECK(rdma_destroy_id(id) == 0);
	empty_nonblock(a, "old channel at the end");
	rdma_destroy_event_channel(a);
	return 0;
}

static volatile int migrated;

static void *migrator(void *arg)
{
	void **p = arg;

	CHECK(rdma_migrate_id(p[0], p[1]) == 0);
	migrated = 1;
	return NULL;
}

/* An event of the id already handed out: rdma_migrate_id returns once it
 * is acked (rdma-core waits for events_completed >= events_reported). */
static int acked(void)
{
	struct rdma_event_channel *a = rdma_create_event_channel(),
				  *b = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	pthread_t t;
	void *args[2];

	CHECK(a && b);
	id = id_with_event(a);
	ev = take(a, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	args[0] = id;
	args[1] = b;
	CHECK(pthread_create(&t, NULL, migrator, args) == 0);
	usleep(300 * 1000);
	CHECK(!migrated);
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	CHECK(migrated);
	printf("migrate returned after the ack\n");
	CHECK(id->channel == b);
	CHECK(!readable(a->fd, 0) && !readable(b->fd, 0));
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(a);
	rdma_destroy_event_channel(b);
	return 0;
}

/* A client process: connects when told (a byte on go), ROUNDS ping-pongs
 * of 8-byte values (the server answers each with the value + 1), then
 * disconnects. */
static void client(int idx, int port, int go)
{
	struct sockaddr_in dst = addr4("127.0.0.1", port);
	struct ibv_qp_init_attr qa = {.cap = {4, 4, 1, 1, 0}, .qp_type = IBV_QPT_RC};
	struct rdma_conn_param p = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	uint64_t buf[2];
	char c;

	CHECK(read(go, &c, 1) == 1);
	ch = rdma_create_event_channel();
	CHECK(ch);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	rdma_ack_cm_event(take(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
	CHECK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(take(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000));
	CHECK(rdma_create_qp(id, NULL, &qa) == 0);
	mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK(rdma_connect(id, &p) == 0);
	rdma_ack_cm_event(take(ch, RDMA_CM_EVENT_ESTABLISHED, 10000));
	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_sge rs = {(uintptr_t)&buf[1], 8, mr->lkey},
			       ss = {(uintptr_t)&buf[0], 8, mr->lkey};
		struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *brw;
		struct ibv_send_wr sw = {.wr_id = 2,
					 .sg_list = &ss,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bsw;
		int got = 0;
		time_t t0 = time(NULL);

		buf[0] = (uint64_t)idx * 1000 + (uint64_t)r;
		buf[1] = 0;
		CHECK(ibv_post_recv(id->qp, &rw, &brw) == 0);
		CHECK(ibv_post_send(id->qp, &sw, &bsw) == 0);
		while (got < 2) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(id->send_cq, 1, &wc);

			if (!n && id->recv_cq != id->send_cq)
				n = ibv_poll_cq(id->recv_cq, 1, &wc);
			CHECK(n >= 0);
			if (n) {
				CHECK(wc.status == IBV_WC_SUCCESS);
				got++;
			}
			CHECK(time(NULL) - t0 < 10);
		}
		CHECK(buf[1] == buf[0] + 1);
	}
	printf("client %d: %d ping-pongs done\n", idx, ROUNDS);
	CHECK(rdma_disconnect(id) == 0);
	rdma_ack_cm_event(take(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	rdma_destroy_qp(id);
	ibv_dereg_mr(mr);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	exit(0);
}

static int reap(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct srv {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	char buf[2 * NCLIENTS * SLOT];
	struct rdma_cm_id *ids[NCLIENTS];
	struct rdma_event_channel *chs[NCLIENTS];
};

static void post_srq_recv(struct srv *s, int slot)
{
	struct ibv_sge sge = {(uintptr_t)(s->buf + slot * SLOT), SLOT, s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;

	CHECK(ibv_post_srq_recv(s->srq, &wr, &bad) == 0);
}

/* The shared resources, made on the first request's device. */
static void srv_resources(struct srv *s, struct ibv_context *verbs)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 2 * NCLIENTS, .max_sge = 1}};

	if (s->pd)
		return;
	s->pd = ibv_alloc_pd(verbs);
	CHECK(s->pd);
	s->cq = ibv_create_cq(verbs, 64, NULL, NULL, 0);
	CHECK(s->cq);
	s->srq = ibv_create_srq(s->pd, &sa);
	CHECK(s->srq);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(s->mr);
	for (int i = 0; i < NCLIENTS; i++)
		post_srq_recv(s, i);
}

/* A CONNECT_REQUEST taken from the listener channel: a QP on the SRQ,
 * rdma_accept, the new id to a channel of its own (client 1's before its
 * request is acked, the others' after, as librpma does), then its
 * ESTABLISHED from there.  serial: the ESTABLISHED is first waited for on
 * the listener channel, so it is surely queued there when the id moves. */
static void srv_accept(struct srv *s, struct rdma_event_channel *lch, int n, bool serial)
{
	struct rdma_cm_event *ev = take(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	struct ibv_qp_init_attr qa = {.cap = {4, 0, 1, 0, 0}, .qp_type = IBV_QPT_RC};
	struct rdma_conn_param p = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	struct rdma_cm_id *id = ev->id;
	bool ack_first = n != 1;

	srv_resources(s, id->verbs);
	qa.send_cq = qa.recv_cq = s->cq;
	qa.srq = s->srq;
	CHECK(rdma_create_qp(id, s->pd, &qa) == 0);
	CHECK(rdma_accept(id, &p) == 0);
	if (ack_first)
		rdma_ack_cm_event(ev);
	s->chs[n] = rdma_create_event_channel();
	CHECK(s->chs[n]);
	if (serial) {
		/* the ESTABLISHED waits on the listener's channel now */
		CHECK(readable(lch->fd, 10000));
	}
	CHECK(rdma_migrate_id(id, s->chs[n]) == 0);
	if (!ack_first)
		rdma_ack_cm_event(ev);
	s->ids[n] = id;
	if (serial) {
		printf("migrated id %d: listener %d, own %d\n", n, readable(lch->fd, 0),
		       readable(s->chs[n]->fd, 0));
		CHECK(readable(s->chs[n]->fd, 0));
		empty_nonblock(lch, "listener after the migration");
		rdma_ack_cm_event(take(s->chs[n], RDMA_CM_EVENT_ESTABLISHED, 0));
	}
}

/* Answers every ping (ROUNDS per client) with its value + 1 on the QP it
 * came on. */
static void srv_pingpong(struct srv *s)
{
	int answered = 0, sent = 0, next_send = NCLIENTS;
	time_t t0 = time(NULL);

	while (answered < NCLIENTS * ROUNDS || sent < answered) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(s->cq, 1, &wc), k;

		CHECK(n >= 0);
		CHECK(time(NULL) - t0 < 20);
		if (!n)
			continue;
		CHECK(wc.status == IBV_WC_SUCCESS);
		if (wc.opcode == IBV_WC_SEND) {
			sent++;
			continue;
		}
		CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == 8);
		for (k = 0; k < NCLIENTS && s->ids[k]->qp->qp_num != wc.qp_num; k++)
			;
		CHECK(k < NCLIENTS);
		{
			uint64_t v;
			char *out = s->buf + next_send * SLOT;
			struct ibv_sge sge = {(uintptr_t)out, 8, s->mr->lkey};
			struct ibv_send_wr wr = {.wr_id = (uint64_t)next_send,
						 .sg_list = &sge,
						 .num_sge = 1,
						 .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;

			memcpy(&v, s->buf + wc.wr_id * SLOT, 8);
			CHECK(v / 1000 < NCLIENTS);
			v++;
			memcpy(out, &v, 8);
			next_send = next_send + 1 < 2 * NCLIENTS ? next_send + 1 : NCLIENTS;
			post_srq_recv(s, (int)wc.wr_id);
			CHECK(ibv_post_send(s->ids[k]->qp, &wr, &bad) == 0);
		}
		answered++;
	}
	printf("server: %d pings answered over %d QPs on one SRQ\n", answered, NCLIENTS);
}

static int three(bool serial)
{
	int port = pick_port(), go[NCLIENTS];
	pid_t pids[NCLIENTS];
	struct srv *s = calloc(1, sizeof(*s));
	struct rdma_event_channel *lch;
	struct sockaddr_in a;
	struct rdma_cm_id *l;
	int rc = 0;

	CHECK(s);
	for (int i = 0; i < NCLIENTS; i++) {
		int p[2];

		CHECK(pipe(p) == 0);
		pids[i] = fork();
		CHECK(pids[i] >= 0);
		if (!pids[i]) {
			close(p[1]);
			client(i, port, p[0]);
		}
		close(p[0]);
		go[i] = p[1];
	}
	lch = rdma_create_event_channel();
	CHECK(lch);
	set_nonblock(lch);
	a = addr4("127.0.0.1", port);
	CHECK(rdma_create_id(lch, &l, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&a) == 0);
	CHECK(rdma_listen(l, NCLIENTS) == 0);
	empty_nonblock(lch, "listener before any request");
	if (!serial)
		for (int i = 0; i < NCLIENTS; i++)
			CHECK(write(go[i], "g", 1) == 1);
	for (int i = 0; i < NCLIENTS; i++) {
		if (serial)
			CHECK(write(go[i], "g", 1) == 1);
		srv_accept(s, lch, i, serial);
	}
	if (!serial) {
		for (int i = 0; i < NCLIENTS; i++)
			rdma_ack_cm_event(take(s->chs[i], RDMA_CM_EVENT_ESTABLISHED, 10000));
		usleep(100 * 1000);
	}
	empty_nonblock(lch, "listener with every request taken");
	srv_pingpong(s);
	for (int i = 0; i < NCLIENTS; i++) {
		rdma_ack_cm_event(take(s->chs[i], RDMA_CM_EVENT_DISCONNECTED, 10000));
		CHECK(rdma_disconnect(s->ids[i]) == 0); /* the DREP */
		CHECK(!readable(s->chs[i]->fd, 0));
	}
	empty_nonblock(lch, "listener at the end");
	for (int i = 0; i < NCLIENTS; i++) {
		int r = reap(pids[i]);

		printf("client %d exited %d\n", i, r);
		rc |= r;
		close(go[i]);
		rdma_destroy_qp(s->ids[i]);
		CHECK(rdma_destroy_id(s->ids[i]) == 0);
		rdma_destroy_event_channel(s->chs[i]);
	}
	CHECK(rdma_destroy_id(l) == 0);
	rdma_destroy_event_channel(lch);
	ibv_dereg_mr(s->mr);
	CHECK(ibv_destroy_srq(s->srq) == 0);
	CHECK(ibv_destroy_cq(s->cq) == 0);
	CHECK(ibv_dealloc_pd(s->pd) == 0);
	free(s);
	return rc;
}

static int three_serial(void)
{
	return three(true);
}

static int three_concurrent(void)
{
	return three(false);
}

/* A listener's queued CONNECT_REQUEST moves with the listener (the
 * kernel's event context is the listener); the new id is on the listener's
 * new channel. */
static int listener(void)
{
	int port = pick_port(), go[2];
	struct rdma_event_channel *a, *b;
	struct sockaddr_in sa = addr4("127.0.0.1", port);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *nid;
	pid_t pid;

	CHECK(pipe(go) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		/* a client that is rejected or never answered: it only asks */
		struct rdma_event_channel *ch;
		struct rdma_cm_id *id;
		struct ibv_qp_init_attr qa = {.cap = {1, 1, 1, 1, 0}, .qp_type = IBV_QPT_RC};
		struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1};
		char c;

		close(go[1]);
		CHECK(read(go[0], &c, 1) == 1);
		ch = rdma_create_event_channel();
		CHECK(ch);
		CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
		CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000) == 0);
		rdma_ack_cm_event(take(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
		CHECK(rdma_resolve_route(id, 2000) == 0);
		rdma_ack_cm_event(take(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000));
		CHECK(rdma_create_qp(id, NULL, &qa) == 0);
		CHECK(rdma_connect(id, &p) == 0);
		rdma_ack_cm_event(take(ch, RDMA_CM_EVENT_REJECTED, 10000));
		rdma_destroy_qp(id);
		CHECK(rdma_destroy_id(id) == 0);
		rdma_destroy_event_channel(ch);
		exit(0);
	}
	close(go[0]);
	a = rdma_create_event_channel();
	b = rdma_create_event_channel();
	CHECK(a && b);
	set_nonblock(a);
	CHECK(rdma_create_id(a, &l, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&sa) == 0);
	CHECK(rdma_listen(l, 1) == 0);
	CHECK(write(go[1], "g", 1) == 1);
	CHECK(readable(a->fd, 10000));
	CHECK(rdma_migrate_id(l, b) == 0);
	empty_nonblock(a, "listener's old channel");
	ev = take(b, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	CHECK(ev->listen_id == l && ev->id->channel == b);
	nid = ev->id;
	CHECK(rdma_reject(nid, NULL, 0) == 0);
	rdma_ack_cm_event(ev);
	CHECK(rdma_destroy_id(nid) == 0);
	CHECK(reap(pid) == 0);
	CHECK(!readable(b->fd, 0));
	CHECK(rdma_destroy_id(l) == 0);
	rdma_destroy_event_channel(a);
	rdma_destroy_event_channel(b);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} cases[] = {
	    {"pending", pending},
	    {"pending_nonblock", pending_nonblock},
	    {"listener", listener},
	    {"sync", sync_case},
	    {"acked", acked},
	    {"three_serial", three_serial},
	    {"three_concurrent", three_concurrent},
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(90); /* a hang is a failure */
	for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(argv[1], cases[i].name)) {
			int ret = cases[i].fn();

			if (!ret)
				printf("PASS %s\n", argv[1]);
			return ret;
		}
	fprintf(stderr, "usage: cm_migrate CASE\n");
	return 2;
}
