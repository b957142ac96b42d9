/*
 * AF_IB addresses (struct sockaddr_ib) through our librdmacm, one case per
 * run:
 *   cm_afib getaddrinfo   rdma_getaddrinfo with RAI_FAMILY + AF_IB +
 *                         RAI_NUMERICHOST: the GID, service ID and mask
 *                         rdma-core 44 gives; a bad GID fails as there
 *   cm_afib connect       an AF_IB listener and an AF_IB client (separate
 *                         processes): 92 bytes of private data delivered
 *                         as they were sent, sockaddr_ib addresses and
 *                         ports from the service ID on both sides
 *   cm_afib bind          the service ID's port space rules (PS_IB takes
 *                         a PS_TCP service ID, PS_TCP refuses PS_IB's),
 *                         and an AF_IB REQ to an IP listener: REJECTED 8
 *   cm_afib mcast         AF_IB multicast joins on an IP-bound id (as
 *                         mckey -M): the MGID as given, one group with
 *                         the IP join of ::ffff:a.b.c.d, an IPv6 MGID,
 *                         and the errors (unbound, zero or unicast MGID,
 *                         second join, leave of a group not joined)
 * Prints what it saw; exits 0 when all is as expected.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: FAILED: %s (errno %d %s)\n", __FILE__, __LINE__,   \
				#c, errno, strerror(errno));                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#define SID_TCP 0x0000000001060000ULL
#define SID_UDP 0x0000000001110000ULL
#define SID_IB	0x00000000013F0000ULL

static const char *gid_str(const struct sockaddr_ib *s, char *b)
{
	return inet_ntop(AF_INET6, &s->sib_addr, b, INET6_ADDRSTRLEN);
}

static void show(const char *what, const struct sockaddr *a)
{
	const struct sockaddr_ib *s = (const void *)a;
	char b[INET6_ADDRSTRLEN];

	CHECK(a->sa_family == AF_IB);
	printf("%s: AF_IB gid %s sid 0x%016llx mask 0x%016llx pkey 0x%04x\n", what, gid_str(s, b),
	       (unsigned long long)be64toh(s->sib_sid),
	       (unsigned long long)be64toh(s->sib_sid_mask), ntohs(s->sib_pkey));
}

/* One rdma_getaddrinfo for a GID: the sockaddr_ib it gives. */
static const struct sockaddr_ib *gai(const char *node, const char *svc, int flags, int ps,
				     struct rdma_addrinfo **res)
{
	struct rdma_addrinfo h = {.ai_flags = RAI_FAMILY | RAI_NUMERICHOST | flags,
				  .ai_family = AF_IB,
				  .ai_port_space = ps};
	const struct sockaddr_ib *s;
	char what[128];

	CHECK(rdma_getaddrinfo(node, svc, &h, res) == 0);
	CHECK((*res)->ai_family == AF_IB);
	if (flags & RAI_PASSIVE) {
		CHECK((*res)->ai_src_len == sizeof(struct sockaddr_ib) && !(*res)->ai_dst_addr);
		s = (const void *)(*res)->ai_src_addr;
	} else {
		CHECK((*res)->ai_dst_len == sizeof(struct sockaddr_ib) && !(*res)->ai_src_addr);
		s = (const void *)(*res)->ai_dst_addr;
	}
	snprintf(what, sizeof(what), "rdma_getaddrinfo(%s, %s)", node ? node : "NULL",
		 svc ? svc : "NULL");
	show(what, (const struct sockaddr *)s);
	CHECK(ntohs(s->sib_pkey) == 0xffff);
	return s;
}

static void expect_gai(const char *node, const char *svc, int ps, const char *gid, uint64_t sid,
		       uint64_t mask, int flags)
{
	struct rdma_addrinfo *r;
	const struct sockaddr_ib *s = gai(node, svc, flags, ps, &r);
	char b[INET6_ADDRSTRLEN];

	CHECK(!strcmp(gid_str(s, b), gid));
	CHECK(be64toh(s->sib_sid) == sid);
	CHECK(be64toh(s->sib_sid_mask) == mask);
	rdma_freeaddrinfo(r);
}

static int case_getaddrinfo(void)
{
	struct rdma_addrinfo h = {.ai_flags = RAI_FAMILY | RAI_NUMERICHOST, .ai_family = AF_IB},
			     *r = NULL;
	int ret;

	expect_gai("::ffff:127.0.0.1", "7471", RDMA_PS_TCP, "::ffff:127.0.0.1", SID_TCP + 7471,
		   ~0ULL, 0);
	expect_gai("fe80::1", "7471", RDMA_PS_IB, "fe80::1", SID_IB + 7471, ~0ULL, 0);
	expect_gai("::1", NULL, RDMA_PS_UDP, "::1", SID_UDP, 0xFFFFFFFFFFFF0000ULL, 0);
	expect_gai(NULL, "7471", RDMA_PS_TCP, "::", SID_TCP + 7471, ~0ULL, RAI_PASSIVE);
	/* an IPv4 numeric node is its IPv4-mapped GID (rdma-core reads the
	 * sockaddr_in as a sockaddr_in6: see docs/architecture.md) */
	expect_gai("127.0.0.1", "7471", RDMA_PS_TCP, "::ffff:127.0.0.1", SID_TCP + 7471, ~0ULL, 0);
	/* not a GID: getaddrinfo's code, as rdma-core returns it */
	ret = rdma_getaddrinfo("not-a-gid", "7471", &h, &r);
	printf("rdma_getaddrinfo(not-a-gid): %d (%s)\n", ret, gai_strerror(ret));
	CHECK(ret == EAI_NONAME && !r);
	ret = rdma_getaddrinfo("fe80::zz", "7471", &h, &r);
	printf("rdma_getaddrinfo(fe80::zz): %d (%s)\n", ret, gai_strerror(ret));
	CHECK(ret == EAI_NONAME && !r);
	/* AF_IB without RAI_NUMERICHOST: no family in particular */
	h.ai_flags = RAI_FAMILY;
	CHECK(rdma_getaddrinfo("::1", "7471", &h, &r) == 0);
	printf("rdma_getaddrinfo(::1) without RAI_NUMERICHOST: family %d\n", r->ai_family);
	CHECK(r->ai_family == AF_INET6);
	rdma_freeaddrinfo(r);
	return 0;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev;

	CHECK(rdma_get_cm_event(ch, &ev) == 0);
	printf("[%d] event %s status %d\n", (int)getpid(), rdma_event_str(ev->event), ev->status);
	if (ev->event != t) {
		fprintf(stderr, "FAILED: expected %s\n", rdma_event_str(t));
		exit(1);
	}
	return ev;
}

static int pick_port(void)
{
	srand(getpid() ^ time(NULL));
	return 20000 + rand() % 20000;
}

static struct ibv_qp_init_attr qp_attr(void)
{
	struct ibv_qp_init_attr qa = {.cap = {1, 1, 1, 1, 0}, .qp_type = IBV_QPT_RC};

	return qa;
}

/* The AF_IB server: accepts one request, checks it, waits for the end. */
static void server(const char *port, int ready)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_qp_init_attr qa = qp_attr();
	struct rdma_cm_id *l, *c;
	struct rdma_addrinfo *r;
	struct rdma_cm_event *ev;
	const uint8_t *p;

	CHECK(ch && rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0);
	gai(NULL, port, RAI_PASSIVE, RDMA_PS_TCP, &r);
	CHECK(rdma_bind_addr(l, r->ai_src_addr) == 0);
	rdma_freeaddrinfo(r);
	show("listener local", rdma_get_local_addr(l));
	CHECK(ntohs(rdma_get_src_port(l)) == atoi(port));
	CHECK(rdma_listen(l, 1) == 0);
	CHECK(write(ready, "r", 1) == 1);
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	c = ev->id;
	printf("request private_data_len %d\n", ev->param.conn.private_data_len);
	CHECK(ev->param.conn.private_data_len == 92);
	p = ev->param.conn.private_data;
	for (int i = 0; i < 92; i++)
		CHECK(p[i] == (uint8_t)(i + 1)); /* as sent: no IP CM header */
	show("request local", rdma_get_local_addr(c));
	show("request peer", rdma_get_peer_addr(c));
	CHECK(be64toh(((struct sockaddr_ib *)rdma_get_local_addr(c))->sib_sid) ==
	      SID_TCP + (uint64_t)atoi(port));
	CHECK(ntohs(rdma_get_src_port(c)) == atoi(port));
	rdma_ack_cm_event(ev);
	CHECK(rdma_create_qp(c, NULL, &qa) == 0);
	CHECK(rdma_accept(c, NULL) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_disconnect(c);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	exit(0);
}

static int case_connect(void)
{
	struct rdma_event_channel *ch;
	struct ibv_qp_init_attr qa = qp_attr();
	struct rdma_conn_param cp = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 5};
	struct rdma_addrinfo *r;
	struct rdma_cm_id *id;
	uint8_t priv[93];
	char port[16];
	int fds[2], st;
	pid_t pid;

	snprintf(port, sizeof(port), "%d", pick_port());
	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		close(fds[0]);
		server(port, fds[1]);
	}
	close(fds[1]);
	CHECK(read(fds[0], priv, 1) == 1);
	ch = rdma_create_event_channel();
	CHECK(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	gai("::ffff:127.0.0.1", port, 0, RDMA_PS_TCP, &r);
	CHECK(rdma_resolve_addr(id, NULL, r->ai_dst_addr, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	show("client local", rdma_get_local_addr(id));
	show("client peer", rdma_get_peer_addr(id));
	CHECK(ntohs(rdma_get_dst_port(id)) == atoi(port));
	CHECK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(rdma_create_qp(id, NULL, &qa) == 0);
	for (int i = 0; i < 93; i++)
		priv[i] = (uint8_t)(i + 1);
	cp.private_data = priv;
	cp.private_data_len = 93; /* one more than a REQ holds */
	CHECK(rdma_connect(id, &cp) == -1 && errno == EINVAL);
	cp.private_data_len = 92; /* all of it: AF_IB sends no IP CM header */
	CHECK(rdma_connect(id, &cp) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	show("established peer", rdma_get_peer_addr(id));
	CHECK(rdma_disconnect(id) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_freeaddrinfo(r);
	rdma_destroy_event_channel(ch);
	CHECK(waitpid(pid, &st, 0) == pid);
	printf("server exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static struct sockaddr_ib sib_any(uint64_t sid)
{
	struct sockaddr_ib s = {.sib_family = AF_IB};

	s.sib_pkey = htons(0xffff);
	s.sib_sid = htobe64(sid);
	s.sib_sid_mask = htobe64(~0ULL);
	return s;
}

static int case_bind(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int port = pick_port();
	struct sockaddr_ib s = sib_any(SID_IB + port);
	struct sockaddr_in ip = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct ibv_qp_init_attr qa = qp_attr();
	struct rdma_addrinfo *r;
	struct rdma_cm_id *a, *b, *l;
	struct rdma_cm_event *ev;

	CHECK(ch && rdma_create_id(ch, &a, NULL, RDMA_PS_TCP) == 0);
	errno = 0;
	CHECK(rdma_bind_addr(a, (struct sockaddr *)&s) == -1);
	printf("PS_TCP id, PS_IB service ID: errno %d (%s)\n", errno, strerror(errno));
	CHECK(errno == EPROTONOSUPPORT);
	CHECK(rdma_create_id(ch, &b, NULL, RDMA_PS_IB) == 0);
	s = sib_any(SID_TCP + port);
	CHECK(rdma_bind_addr(b, (struct sockaddr *)&s) == 0);
	show("PS_IB id, PS_TCP service ID", rdma_get_local_addr(b));
	/* the same port of PS_TCP is now taken, for IP addresses too; both
	 * binds are wildcards: EADDRNOTAVAIL (KRN cma.c cma_check_port) */
	CHECK(rdma_bind_addr(a, (struct sockaddr *)&ip) == -1 && errno == EADDRNOTAVAIL);
	printf("IP bind of the same PS_TCP port: EADDRNOTAVAIL\n");
	rdma_destroy_id(b);
	/* an IP listener does not take an AF_IB REQ (no IP CM header) */
	CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&ip) == 0 && rdma_listen(l, 1) == 0);
	rdma_destroy_id(a);
	CHECK(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP) == 0);
	{
		char svc[16];

		snprintf(svc, sizeof(svc), "%d", port);
		gai("::ffff:127.0.0.1", svc, 0, RDMA_PS_TCP, &r);
	}
	CHECK(rdma_resolve_addr(a, NULL, r->ai_dst_addr, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(a, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(rdma_create_qp(a, NULL, &qa) == 0);
	CHECK(rdma_connect(a, NULL) == 0);
	ev = expect(ch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev->status == 8);
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(a);
	rdma_destroy_id(a);
	rdma_destroy_id(l);
	rdma_freeaddrinfo(r);
	rdma_destroy_event_channel(ch);
	return 0;
}

static struct sockaddr_ib sib_mgid(const char *mgid)
{
	struct sockaddr_ib s = {.sib_family = AF_IB};

	/* as mckey -M: the family and the GID, nothing else */
	CHECK(inet_pton(AF_INET6, mgid, &s.sib_addr) == 1);
	return s;
}

/* Joins @a (AF_IB or IP) and checks its MULTICAST_JOIN: dgid @mgid. */
static void join_ok(struct rdma_event_channel *ch, struct rdma_cm_id *id, struct sockaddr *a,
		    const char *mgid, void *ctx)
{
	struct rdma_cm_event *ev;
	char b[INET6_ADDRSTRLEN];

	CHECK(rdma_join_multicast(id, a, ctx) == 0);
	ev = expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	inet_ntop(AF_INET6, ev->param.ud.ah_attr.grh.dgid.raw, b, sizeof(b));
	printf("join (%s): dgid %s qp_num 0x%x qkey 0x%x global %d\n",
	       a->sa_family == AF_IB ? "AF_IB" : "IP", b, ev->param.ud.qp_num, ev->param.ud.qkey,
	       ev->param.ud.ah_attr.is_global);
	CHECK(!strcmp(b, mgid) && ev->param.ud.ah_attr.is_global);
	CHECK(ev->param.ud.qp_num == 0xFFFFFF && ev->param.ud.qkey == 0x01234567);
	CHECK(ev->param.ud.private_data == ctx);
	rdma_ack_cm_event(ev);
}

static void join_fails(struct rdma_cm_id *id, struct sockaddr *a, int err, const char *what)
{
	errno = 0;
	CHECK(rdma_join_multicast(id, a, NULL) == -1);
	printf("%s: errno %d (%s)\n", what, errno, strerror(errno));
	CHECK(errno == err);
}

static int case_mcast(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in grp = {.sin_family = AF_INET};
	struct sockaddr_ib g4 = sib_mgid("::ffff:239.1.2.3"), g6 = sib_mgid("ff0e::1234");
	struct sockaddr_ib zero = sib_mgid("::"), uni = sib_mgid("::ffff:127.0.0.1");
	struct rdma_cm_id *id;
	int ctx;

	CHECK(inet_pton(AF_INET, "239.1.2.3", &grp.sin_addr) == 1);
	CHECK(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	join_fails(id, (struct sockaddr *)&g4, EINVAL, "AF_IB join, id not bound");
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&lo) == 0);
	join_fails(id, (struct sockaddr *)&zero, EINVAL, "AF_IB join, zero MGID");
	join_fails(id, (struct sockaddr *)&uni, EINVAL, "AF_IB join, unicast MGID");
	join_ok(ch, id, (struct sockaddr *)&g4, "::ffff:239.1.2.3", &ctx);
	join_fails(id, (struct sockaddr *)&grp, EADDRINUSE, "IP join of the AF_IB member's group");
	join_fails(id, (struct sockaddr *)&g4, EADDRINUSE, "AF_IB join again");
	join_ok(ch, id, (struct sockaddr *)&g6, "ff0e::1234", NULL);
	/* leave finds the group by the address it was joined with (rdma-core) */
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&grp) == -1 && errno == EADDRNOTAVAIL);
	printf("IP leave of an AF_IB member: EADDRNOTAVAIL\n");
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&g4) == 0);
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&g4) == -1 && errno == EADDRNOTAVAIL);
	join_ok(ch, id, (struct sockaddr *)&grp, "::ffff:239.1.2.3", &ctx);
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&grp) == 0);
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&g6) == 0);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(void);
	} cases[] = {{"getaddrinfo", case_getaddrinfo},
		     {"connect", case_connect},
		     {"bind", case_bind},
		     {"mcast", case_mcast}};

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!strcmp(argv[1], cases[i].name)) {
			int ret = cases[i].run();

			printf("%s: %s\n", argv[1], ret ? "FAIL" : "PASS");
			return ret;
		}
	}
	fprintf(stderr, "usage: %s getaddrinfo|connect|bind|mcast\n", argv[0]);
	return 2;
}
