/*
 * The connection manager's error cases (issue #11), one per run:
 *   cm_errors no_listener | sidr_no_listener | reject_private | peer_killed | private_limit |
 *             addr_error | destroy_blocks | nonblock | timewait_exit |
 *             bind_rules | depths | bind_privileged | port_range
 * Client and server are separate processes (the server is forked before
 * either touches librdmacm).  Each case prints what it saw and exits 0 when
 * the behaviour is rdma-core's (CM.md sections 1.1 and 2).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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

static const char reject_msg[] = "softrdma says no: go away";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct sockaddr_in addr4(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev;

	CHECK(rdma_get_cm_event(ch, &ev) == 0);
	printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
	if (ev->event != t) {
		fprintf(stderr, "FAILED: expected %s\n", rdma_event_str(t));
		exit(1);
	}
	return ev;
}

/* An active id on ch with an RC QP, route resolved to 127.0.0.1:port. */
static struct rdma_cm_id *client_id(struct rdma_event_channel *ch, int port)
{
	struct sockaddr_in dst = addr4("127.0.0.1", port);
	struct ibv_qp_init_attr qa = {.cap = {1, 1, 1, 1, 0}, .qp_type = IBV_QPT_RC};
	struct rdma_cm_id *id;

	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(rdma_create_qp(id, NULL, &qa) == 0);
	return id;
}

static int pick_port(void)
{
	srand(getpid() ^ time(NULL));
	return 20000 + rand() % 20000;
}

/* A server process listening on port: on each request it runs `what`.
 * It tells the parent over `ready` when it listens. */
enum server_mode {
	SERVE_REJECT,
	SERVE_ACCEPT_AND_HANG,
	SERVE_ACCEPT_AND_TIMEWAIT,
	SERVE_ACCEPT_DEPTHS, /* accepts with responder resources 2, initiator depth 5 */
};

static void server(int port, enum server_mode mode, int ready)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = addr4("127.0.0.1", port);
	struct rdma_cm_id *l;
	struct rdma_cm_event *ev;
	char c = 1;

	CHECK(ch);
	CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&a) == 0);
	CHECK(rdma_listen(l, 4) == 0);
	CHECK(write(ready, &c, 1) == 1);
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	printf("server: request private_data_len %u\n", ev->param.conn.private_data_len);
	CHECK(ev->param.conn.private_data_len == 56);
	if (mode == SERVE_REJECT) {
		char big[200] = {0};
		struct rdma_conn_param p = {.private_data = big, .private_data_len = 197};

		/* over the limits: EINVAL, and nothing sent */
		errno = 0;
		CHECK(rdma_reject(ev->id, big, 149) == -1 && errno == EINVAL);
		errno = 0;
		CHECK(rdma_accept(ev->id, &p) == -1 && errno == EINVAL);
		CHECK(rdma_reject(ev->id, reject_msg, sizeof(reject_msg)) == 0);
		rdma_ack_cm_event(ev);
		exit(0);
	}
	{
		struct rdma_cm_id *id = ev->id;
		struct ibv_qp_init_attr qa = {.cap = {1, 1, 1, 1, 0}, .qp_type = IBV_QPT_RC};
		struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1};

		if (mode == SERVE_ACCEPT_DEPTHS) {
			p.responder_resources = 2;
			p.initiator_depth = 5;
		}
		CHECK(rdma_create_qp(id, NULL, &qa) == 0);
		CHECK(rdma_accept(id, &p) == 0);
		rdma_ack_cm_event(ev);
		rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
		if (mode == SERVE_ACCEPT_DEPTHS) {
			struct ibv_qp_init_attr qia;
			struct ibv_qp_attr qpa;

			CHECK(ibv_query_qp(id->qp, &qpa,
					   IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC,
					   &qia) == 0);
			printf("server: max_rd_atomic %u max_dest_rd_atomic %u\n",
			       qpa.max_rd_atomic, qpa.max_dest_rd_atomic);
			CHECK(qpa.max_rd_atomic == 5 && qpa.max_dest_rd_atomic == 2);
		}
		CHECK(write(ready, &c, 1) == 1);
		if (mode == SERVE_ACCEPT_AND_TIMEWAIT) {
			double t0;

			/* the client disconnects: DISCONNECTED, our answer (DREP),
			 * then timewait and its end */
			rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
			CHECK(rdma_disconnect(id) == 0);
			t0 = now();
			rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT));
			printf("server: TIMEWAIT_EXIT %.3f s after its rdma_disconnect\n",
			       now() - t0);
			CHECK(now() - t0 > 0.2 && now() - t0 < 3.0);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			exit(0);
		}
		for (;;)
			pause(); /* until SIGKILLed */
	}
}

static pid_t start_server(int port, enum server_mode mode, int *rd)
{
	int p[2];
	pid_t pid;
	char c;

	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		close(p[0]);
		server(port, mode, p[1]);
		exit(0);
	}
	close(p[1]);
	CHECK(read(p[0], &c, 1) == 1);
	*rd = p[0];
	return pid;
}

static int reap(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int no_listener(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param p = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	double t0;

	CHECK(ch);
	id = client_id(ch, pick_port());
	t0 = now();
	CHECK(rdma_connect(id, &p) == 0);
	ev = expect(ch, RDMA_CM_EVENT_REJECTED);
	printf("rejected after %.3f s, status %d\n", now() - t0, ev->status);
	CHECK(ev->status == 8);
	CHECK(now() - t0 < 1.0);
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* A SIDR REQ for a UDP port nobody listens on, while the same port listens
 * in RDMA_PS_TCP (perftest's control connection beside its UD data port):
 * UNREACHABLE with the SIDR REP's status 1, "service ID not supported"
 * (IB_SIDR_UNSUPPORTED), at once, as the kernel's cm_sidr_req_handler answers. */
static int sidr_no_listener(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int port = pick_port();
	struct sockaddr_in a = addr4("127.0.0.1", port);
	struct rdma_conn_param p = {0};
	struct rdma_cm_id *tcp, *id;
	struct rdma_cm_event *ev;
	double t0;

	CHECK(ch);
	CHECK(rdma_create_id(ch, &tcp, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(tcp, (struct sockaddr *)&a) == 0);
	CHECK(rdma_listen(tcp, 4) == 0);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	t0 = now();
	CHECK(rdma_connect(id, &p) == 0);
	ev = expect(ch, RDMA_CM_EVENT_UNREACHABLE);
	printf("unreachable after %.3f s, status %d\n", now() - t0, ev->status);
	CHECK(ev->status == 1);
	CHECK(ev->id == id);
	CHECK(now() - t0 < 1.0);
	rdma_ack_cm_event(ev);
	CHECK(rdma_destroy_id(id) == 0);
	CHECK(rdma_destroy_id(tcp) == 0);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int reject_private(void)
{
	int port = pick_port(), rd;
	pid_t pid = start_server(port, SERVE_REJECT, &rd);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	CHECK(ch);
	id = client_id(ch, port);
	CHECK(rdma_connect(id, &p) == 0);
	ev = expect(ch, RDMA_CM_EVENT_REJECTED);
	printf("status %d private_data_len %u: \"%s\"\n", ev->status,
	       ev->param.conn.private_data_len,
	       ev->param.conn.private_data ? (const char *)ev->param.conn.private_data : "");
	CHECK(ev->status == 28);
	CHECK(ev->param.conn.private_data_len == 148);
	CHECK(!memcmp(ev->param.conn.private_data, reject_msg, sizeof(reject_msg)));
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	CHECK(reap(pid) == 0);
	return 0;
}

static int peer_killed(void)
{
	int port = pick_port(), rd;
	pid_t pid = start_server(port, SERVE_ACCEPT_AND_HANG, &rd);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param p = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7};
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct rdma_cm_id *id;
	double t0;
	char c;

	CHECK(ch);
	id = client_id(ch, port);
	CHECK(rdma_connect(id, &p) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(read(rd, &c, 1) == 1); /* the server saw ESTABLISHED too */
	t0 = now();
	CHECK(kill(pid, SIGKILL) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	printf("DISCONNECTED %.3f s after the kill\n", now() - t0);
	CHECK(now() - t0 < 5.0);
	/* the survivor's QP: in error once it answers with rdma_disconnect,
	 * as rdma-core applications do on DISCONNECTED (neither the kernel's
	 * CM nor rdma-core touches it before) */
	CHECK(rdma_disconnect(id) == 0);
	CHECK(ibv_query_qp(id->qp, &qa, IBV_QP_STATE, &qia) == 0);
	printf("survivor QP state %d after rdma_disconnect\n", qa.qp_state);
	CHECK(qa.qp_state == IBV_QPS_ERR);
	reap(pid);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* After a disconnect both sides get TIMEWAIT_EXIT once the id has waited
 * out timewait (the kernel's CM: its AV timeout, 0.5 s for RoCE): from then
 * on the QP may be reused. */
static int timewait_exit(void)
{
	int port = pick_port(), rd;
	pid_t pid = start_server(port, SERVE_ACCEPT_AND_TIMEWAIT, &rd);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1};
	struct rdma_cm_id *id;
	double t0, t;
	char c;

	CHECK(ch);
	id = client_id(ch, port);
	CHECK(rdma_connect(id, &p) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(read(rd, &c, 1) == 1);
	t0 = now();
	CHECK(rdma_disconnect(id) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT));
	t = now() - t0;
	printf("client: TIMEWAIT_EXIT %.3f s after its rdma_disconnect\n", t);
	CHECK(t > 0.2 && t < 3.0);
	CHECK(reap(pid) == 0);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int private_limit(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	char big[64] = {0};
	struct rdma_conn_param p = {.responder_resources = 1,
				    .initiator_depth = 1,
				    .private_data = big,
				    .private_data_len = 57};
	struct rdma_cm_id *id;

	CHECK(ch);
	id = client_id(ch, pick_port());
	errno = 0;
	CHECK(rdma_connect(id, &p) == -1 && errno == EINVAL);
	printf("connect with 57 bytes of private data: EINVAL\n");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int addr_error(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	/* TEST-NET-2: no interface of this host owns it */
	/* TEST-NET-2 by default, run where no route reaches it (cm_run.sh
	 * gives the test a network namespace of its own); CM_ERR_DST names
	 * another address and CM_ERR_STATUS the status expected (the
	 * two-host tests: an address of the veth's subnet that nobody owns,
	 * whose ARP never answers: -ETIMEDOUT) */
	const char *ip = getenv("CM_ERR_DST"), *want = getenv("CM_ERR_STATUS");
	struct sockaddr_in dst = addr4(ip ? ip : "198.51.100.77", 7471);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct timespec t0, t1;

	CHECK(ch);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	/* no route before an address (the kernel: EINVAL) */
	CHECK(rdma_resolve_route(id, 2000) == -1 && errno == EINVAL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	ev = expect(ch, RDMA_CM_EVENT_ADDR_ERROR);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("resolve of %s: status %d after %.3f s\n", ip ? ip : "198.51.100.77", ev->status,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	CHECK(ev->status < 0);
	if (want)
		CHECK(ev->status == atoi(want));
	rdma_ack_cm_event(ev);
	/* nor after an address that failed (librdmacm answers a resolved
	 * one's route itself: it must not for this one) */
	CHECK(rdma_resolve_route(id, 2000) == -1 && errno == EINVAL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static volatile int destroyed;

static void *destroyer(void *arg)
{
	rdma_destroy_id(arg);
	destroyed = 1;
	return NULL;
}

static int destroy_blocks(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = addr4("127.0.0.1", 7471);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	pthread_t t;

	CHECK(ch);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	ev = expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(pthread_create(&t, NULL, destroyer, id) == 0);
	usleep(300000);
	printf("destroy returned before the ack: %s\n", destroyed ? "yes" : "no");
	CHECK(!destroyed);
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	CHECK(destroyed);
	printf("destroy returned after the ack\n");
	rdma_destroy_event_channel(ch);
	return 0;
}

static int nonblock(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = addr4("127.0.0.1", 7471);
	struct pollfd pfd;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	CHECK(ch);
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN);
	pfd = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	CHECK(poll(&pfd, 1, 0) == 0);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	CHECK(poll(&pfd, 1, 2000) == 1 && (pfd.revents & POLLIN));
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	CHECK(poll(&pfd, 1, 0) == 0);
	printf("O_NONBLOCK: EAGAIN when empty, POLLIN when an event waits\n");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static uint16_t bound_port(struct rdma_cm_id *id)
{
	return ntohs(rdma_get_src_port(id));
}

/* bind to ip:port; 0 or the errno of the failure */
static int try_bind(struct rdma_cm_id *id, const char *ip, uint16_t port)
{
	struct sockaddr_in a = addr4(ip, port);

	errno = 0;
	return rdma_bind_addr(id, (struct sockaddr *)&a) ? errno : 0;
}

/* Port clashes as the kernel's cma_check_port judges them: the same
 * address and port EADDRINUSE, a wildcard against anything on the port
 * EADDRNOTAVAIL, other port spaces and REUSEADDR pairs apart, a destroyed
 * id's port free again, ephemeral ports all different. */
static int bind_rules(void)
{
	enum { NEPH = 200 };
	struct rdma_cm_id *a, *b, *c, *u, *r1, *r2, *eph[NEPH];
	int one = 1;
	uint16_t p, q;

	CHECK(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP) == 0);
	CHECK(try_bind(a, "127.0.0.1", 0) == 0);
	p = bound_port(a);
	CHECK(p != 0);
	CHECK(try_bind(b, "127.0.0.1", p) == EADDRINUSE);
	printf("same address and port: EADDRINUSE\n");
	CHECK(try_bind(b, "0.0.0.0", p) == EADDRNOTAVAIL);
	printf("wildcard on a port an address holds: EADDRNOTAVAIL\n");
	CHECK(rdma_create_id(NULL, &u, NULL, RDMA_PS_UDP) == 0);
	CHECK(try_bind(u, "127.0.0.1", p) == 0);
	printf("the same port in RDMA_PS_UDP: bound\n");
	CHECK(rdma_destroy_id(a) == 0);
	CHECK(try_bind(b, "127.0.0.1", p) == 0);
	printf("after the holder is destroyed: bound\n");
	CHECK(rdma_create_id(NULL, &c, NULL, RDMA_PS_TCP) == 0);
	CHECK(try_bind(c, "0.0.0.0", 0) == 0);
	q = bound_port(c);
	CHECK(rdma_destroy_id(b) == 0);
	CHECK(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP) == 0);
	CHECK(try_bind(b, "127.0.0.1", q) == EADDRNOTAVAIL);
	printf("an address on a port a wildcard holds: EADDRNOTAVAIL\n");
	/* REUSEADDR on both: the same address and port twice */
	CHECK(rdma_create_id(NULL, &r1, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_create_id(NULL, &r2, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_set_option(r1, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)) ==
	      0);
	CHECK(rdma_set_option(r2, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)) ==
	      0);
	CHECK(try_bind(r1, "127.0.0.1", 0) == 0);
	CHECK(try_bind(r2, "127.0.0.1", bound_port(r1)) == 0);
	printf("REUSEADDR on both: the same address and port twice\n");
	/* but neither listens while the other holds the port (the kernel's
	 * rdma_listen judges it again without REUSEADDR) */
	errno = 0;
	CHECK(rdma_listen(r1, 4) == -1 && errno == EADDRINUSE);
	printf("listen on a port another REUSEADDR id shares: EADDRINUSE\n");
	for (int i = 0; i < NEPH; i++) {
		CHECK(rdma_create_id(NULL, &eph[i], NULL, RDMA_PS_TCP) == 0);
		CHECK(try_bind(eph[i], "127.0.0.1", 0) == 0);
		for (int j = 0; j < i; j++)
			CHECK(bound_port(eph[j]) != bound_port(eph[i]));
	}
	printf("%d ephemeral binds: %d different ports\n", NEPH, NEPH);
	for (int i = 0; i < NEPH; i++)
		CHECK(rdma_destroy_id(eph[i]) == 0);
	CHECK(rdma_destroy_id(r1) == 0 && rdma_destroy_id(r2) == 0);
	CHECK(rdma_destroy_id(b) == 0 && rdma_destroy_id(c) == 0 && rdma_destroy_id(u) == 0);
	return 0;
}

/* Whether this process holds CAP_NET_BIND_SERVICE (bit 10 of CapEff). */
static bool may_bind_low(void)
{
	char line[128];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff >> 10 & 1;
}

/* A port below 1024 needs CAP_NET_BIND_SERVICE, as the kernel's CM asks
 * (cma_use_port): EACCES without it, and the same port bound with it;
 * ports from 1024 up either way.  CMake runs it as root and as root
 * without the capability (setpriv). */
static int bind_privileged(void)
{
	bool cap = may_bind_low();
	struct rdma_cm_id *a, *b;
	int ret;

	CHECK(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP) == 0);
	ret = try_bind(a, "127.0.0.1", 999);
	printf("CAP_NET_BIND_SERVICE %s: bind to port 999: %s\n", cap ? "held" : "not held",
	       ret ? strerror(ret) : "bound");
	CHECK(ret == (cap ? 0 : EACCES));
	CHECK(try_bind(b, "127.0.0.1", (uint16_t)(pick_port() | 1024)) == 0);
	printf("a port above 1023: bound\n");
	CHECK(rdma_destroy_id(a) == 0 && rdma_destroy_id(b) == 0);
	return 0;
}

/* Ephemeral ports come from the namespace's ip_local_port_range, as the
 * kernel's CM takes them (cma_alloc_any_port): with a range of at most 64
 * ports every one is handed out once, then EADDRNOTAVAIL. */
static int port_range(void)
{
	enum { MAXN = 64 };
	struct rdma_cm_id *ids[MAXN + 1];
	unsigned lo, hi, n;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	CHECK(f && fscanf(f, "%u %u", &lo, &hi) == 2);
	fclose(f);
	n = hi - lo + 1;
	printf("ip_local_port_range %u-%u\n", lo, hi);
	CHECK(n <= MAXN);
	for (unsigned i = 0; i < n; i++) {
		uint16_t p;

		CHECK(rdma_create_id(NULL, &ids[i], NULL, RDMA_PS_TCP) == 0);
		CHECK(try_bind(ids[i], "127.0.0.1", 0) == 0);
		p = bound_port(ids[i]);
		CHECK(p >= lo && p <= hi);
		for (unsigned j = 0; j < i; j++)
			CHECK(bound_port(ids[j]) != p);
	}
	printf("%u ephemeral binds: every port of the range once\n", n);
	CHECK(rdma_create_id(NULL, &ids[n], NULL, RDMA_PS_TCP) == 0);
	CHECK(try_bind(ids[n], "127.0.0.1", 0) == EADDRNOTAVAIL);
	printf("one more: EADDRNOTAVAIL\n");
	for (unsigned i = 0; i <= n; i++)
		CHECK(rdma_destroy_id(ids[i]) == 0);
	return 0;
}

/*
 * The active side's read/atomic depths after a connection whose REP
 * offers less than it asked, and other amounts each way: its initiator
 * depth (max_rd_atomic) is bounded by the peer's responder resources,
 * its responder resources (max_dest_rd_atomic) by the peer's initiator
 * depth, as the kernel's CM sets them from the REP (here the daemon
 * finishes the connection at the REP, src/rdmacm/conn.c finish_at_rep).
 */
static int depths(void)
{
	int port = pick_port(), rd;
	pid_t pid = start_server(port, SERVE_ACCEPT_DEPTHS, &rd);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param p = {.responder_resources = 6, .initiator_depth = 7};
	struct ibv_qp_init_attr qia;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr a;
	struct rdma_cm_id *id;
	char c;

	CHECK(ch);
	id = client_id(ch, port);
	CHECK(rdma_connect(id, &p) == 0);
	ev = expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	printf("ESTABLISHED: responder_resources %u initiator_depth %u\n",
	       ev->param.conn.responder_resources, ev->param.conn.initiator_depth);
	rdma_ack_cm_event(ev);
	CHECK(ibv_query_qp(id->qp, &a,
			   IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC,
			   &qia) == 0);
	printf("client: state %d max_rd_atomic %u max_dest_rd_atomic %u\n", a.qp_state,
	       a.max_rd_atomic, a.max_dest_rd_atomic);
	CHECK(a.qp_state == IBV_QPS_RTS);
	CHECK(a.max_rd_atomic == 2 && a.max_dest_rd_atomic == 5);
	CHECK(read(rd, &c, 1) == 1); /* the server saw ESTABLISHED and checked its QP */
	CHECK(kill(pid, SIGKILL) == 0);
	reap(pid);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_disconnect(id);
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} cases[] = {
	    {"no_listener", no_listener},
	    {"sidr_no_listener", sidr_no_listener},
	    {"reject_private", reject_private},
	    {"peer_killed", peer_killed},
	    {"private_limit", private_limit},
	    {"addr_error", addr_error},
	    {"destroy_blocks", destroy_blocks},
	    {"nonblock", nonblock},
	    {"timewait_exit", timewait_exit},
	    {"bind_rules", bind_rules},
	    {"depths", depths},
	    {"bind_privileged", bind_privileged},
	    {"port_range", port_range},
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(argv[1], cases[i].name)) {
			int ret = cases[i].fn();

			if (!ret)
				printf("PASS %s\n", argv[1]);
			return ret;
		}
	fprintf(stderr, "usage: cm_errors CASE\n");
	return 2;
}
