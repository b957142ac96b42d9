/*
 * rsockets, the socket side: the table from socket numbers to rsockets,
 * rsocket/rbind/rlisten/rconnect/raccept/rshutdown/rclose on top of our own
 * rdma_cm (each rsocket has an event channel of its own; its fd is the
 * socket number, so rpoll can mix rsockets and normal fds), the connection
 * state machine driven by CM events, socket options, rfcntl and the names.
 * The data path is rsocket_io.c, waiting rsocket_poll.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdmacm/rsocket_int.h"

#define RS_DEF_QSIZE  384
#define RS_DEF_INLINE 64
#define RS_DEF_BUF    (128u * 1024)
#define RS_MIN_BUF    (4u * 1024)
#define RS_MAX_BUF    (64u * 1024 * 1024)
#define RS_MAX_QSIZE  8192
#define RS_RESOLVE_MS 2000

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rs **tab;
static int tab_len;

int rs_debug;

__attribute__((constructor)) static void rs_debug_init(void)
{
	const char *v = getenv("RS_DEBUG");

	rs_debug = v && *v && *v != '0';
}

void rs_dbg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "rsocket[%d]: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int rs_set_errno(int e)
{
	errno = e;
	return -1;
}

static int tab_insert(struct rs *rs)
{
	pthread_mutex_lock(&tab_lock);
	if (rs->fd >= tab_len) {
		int n = tab_len ? tab_len : 64;
		struct rs **t;

		while (n <= rs->fd)
			n *= 2;
		t = realloc(tab, (size_t)n * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&tab_lock);
			return -ENOMEM;
		}
		memset(t + tab_len, 0, (size_t)(n - tab_len) * sizeof(*t));
		tab = t;
		tab_len = n;
	}
	tab[rs->fd] = rs;
	rs->refs = 1; /* the table's */
	pthread_mutex_unlock(&tab_lock);
	return 0;
}

struct rs *rs_get(int fd)
{
	struct rs *rs = NULL;

	pthread_mutex_lock(&tab_lock);
	if (fd >= 0 && fd < tab_len && tab[fd]) {
		rs = tab[fd];
		rs->refs++;
	}
	pthread_mutex_unlock(&tab_lock);
	return rs;
}

struct rs *rs_next(int *fd)
{
	struct rs *rs = NULL;

	pthread_mutex_lock(&tab_lock);
	for (; *fd < tab_len && !rs; (*fd)++) {
		rs = tab[*fd];
		if (rs)
			rs->refs++;
	}
	pthread_mutex_unlock(&tab_lock);
	return rs;
}

static void rs_destroy(struct rs *rs)
{
	struct rs_pending *p;

	rs_io_teardown(rs);
	while ((p = rs->pend_head)) {
		rs->pend_head = p->next;
		rdma_reject(p->id, NULL, 0);
		rdma_destroy_id(p->id);
		free(p);
	}
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	pthread_cond_destroy(&rs->cond);
	free(rs);
}

void rs_put(struct rs *rs)
{
	bool last;

	pthread_mutex_lock(&tab_lock);
	last = --rs->refs == 0;
	pthread_mutex_unlock(&tab_lock);
	if (last)
		rs_destroy(rs);
}

/* A new rsocket with its own channel (the socket number) and, unless
 * adopting an accepted id, a new id. */
static struct rs *rs_alloc(int domain, int type, const struct rs *inherit)
{
	struct rs *rs = calloc(1, sizeof(*rs));

	if (!rs) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_condattr_t ca;

	pthread_mutex_init(&rs->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rs->cond, &ca);
	pthread_condattr_destroy(&ca);
	rs->domain = domain;
	rs->type = type;
	rs->fd = -1;
	if (inherit) {
		rs->sq_size = inherit->sq_size;
		rs->rq_size = inherit->rq_size;
		rs->inline_size = inherit->inline_size;
		rs->iomap_size = inherit->iomap_size;
		rs->rbuf_size = inherit->rbuf_size;
		rs->sbuf_size = inherit->sbuf_size;
		rs->nodelay = inherit->nodelay;
		rs->keepalive = inherit->keepalive;
		rs->keepidle = inherit->keepidle;
		rs->keepcnt = inherit->keepcnt;
		rs->keepintvl = inherit->keepintvl;
		rs->maxseg = inherit->maxseg;
		rs->oobinline = inherit->oobinline;
		rs->linger = inherit->linger;
	} else {
		rs->sq_size = rs->rq_size = RS_DEF_QSIZE;
		rs->inline_size = RS_DEF_INLINE;
		rs->rbuf_size = rs->sbuf_size = RS_DEF_BUF;
		rs->keepidle = 7200;
		rs->keepcnt = 9;
		rs->keepintvl = 75;
		rs->maxseg = 1460;
	}
	rs->afonly = -1;
	rs->ch = rdma_create_event_channel();
	if (!rs->ch) {
		int e = errno;

		pthread_mutex_destroy(&rs->lock);
		pthread_cond_destroy(&rs->cond);
		free(rs);
		errno = e;
		return NULL;
	}
	/* the application's O_NONBLOCK is ours to honour (rs->nonblock):
	 * internally the channel never blocks */
	fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK);
	rs->fd = rs->ch->fd;
	return rs;
}

int rsocket(int domain, int type, int protocol)
{
	int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rs *rs;
	int ret;

	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	/* AF_IB: stream sockets only (datagram rsockets address their
	 * peers by IP address) */
	if (domain != AF_INET && domain != AF_INET6 && !(domain == AF_IB && type == SOCK_STREAM))
		return rs_set_errno(EAFNOSUPPORT);
	if (type != SOCK_STREAM && type != SOCK_DGRAM)
		return rs_set_errno(ENOTSUP);
	if (protocol && protocol != (type == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP))
		return rs_set_errno(EPROTONOSUPPORT);
	rs = rs_alloc(domain, type, NULL);
	if (!rs)
		return -1;
	if (rdma_create_id(rs->ch, &rs->id, rs, type == SOCK_STREAM ? RDMA_PS_TCP : RDMA_PS_UDP)) {
		ret = errno;
		rs_destroy(rs);
		return rs_set_errno(ret);
	}
	if (type == SOCK_DGRAM && (ret = rs_dgram_setup(rs))) {
		rs_destroy(rs);
		return rs_set_errno(ret);
	}
	rs->nonblock = flags & SOCK_NONBLOCK;
	if (!(flags & SOCK_CLOEXEC))
		fcntl(rs->fd, F_SETFD, 0);
	ret = tab_insert(rs);
	if (ret) {
		rs_destroy(rs);
		return rs_set_errno(-ret);
	}
	return rs->fd;
}

static int addr_ok(const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return EFAULT;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return 0;
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		return 0;
	if (addr->sa_family == AF_IB && len >= sizeof(struct sockaddr_ib))
		return 0;
	return EINVAL;
}

static void apply_id_options(struct rs *rs)
{
	int v;

	if (rs->reuseaddr) {
		v = 1;
		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v));
	}
	if (rs->afonly >= 0) {
		v = rs->afonly;
		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v));
	}
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_INIT) {
		ret = EINVAL;
	} else if (!(ret = addr_ok(addr, addrlen))) {
		apply_id_options(rs);
		if (rdma_bind_addr(rs->id, (struct sockaddr *)addr))
			ret = errno == ENODEV ? EADDRNOTAVAIL : errno;
		else
			rs->state = RS_BOUND;
		if (!ret && rs->dg)
			ret = rs_dgram_listen(rs);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

int rlisten(int socket, int backlog)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_LISTEN) {
		ret = 0;
	} else if (rs->state != RS_BOUND && rs->state != RS_INIT) {
		ret = EINVAL;
	} else {
		if (rs->state == RS_INIT) {
			/* listen on an unbound socket: any address, a free port */
			struct sockaddr_in6 any6 = {.sin6_family = AF_INET6};
			struct sockaddr_in any4 = {.sin_family = AF_INET};
			struct sockaddr_ib anyib = {.sib_family = AF_IB}; /* zero GID, any port */

			apply_id_options(rs);
			if (rdma_bind_addr(rs->id, rs->domain == AF_INET6 ? (struct sockaddr *)&any6
						   : rs->domain == AF_IB
						       ? (struct sockaddr *)&anyib
						       : (struct sockaddr *)&any4))
				ret = errno;
		}
		if (!ret && rdma_listen(rs->id, backlog > 0 ? backlog : 1))
			ret = errno;
		if (!ret)
			rs->state = RS_LISTEN;
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

static void rs_fail(struct rs *rs, int e)
{
	rs->state = RS_ERROR;
	rs->err = e;
	rs->fatal = e;
}

/* A CONNECT_REQUEST on a listener: queued for raccept. */
static bool queue_request(struct rs *rs, struct rdma_cm_event *ev)
{
	const struct rdma_conn_param *p = &ev->param.conn;
	struct rs_pending *q = calloc(1, sizeof(*q));

	if (!q)
		return false; /* rejected and destroyed once the event is acked */
	q->id = ev->id;
	if (p->private_data && p->private_data_len >= sizeof(q->hello)) {
		memcpy(&q->hello, p->private_data, sizeof(q->hello));
		q->hello_ok = q->hello.version == RS_HELLO_VERSION;
	}
	if (rs->pend_tail)
		rs->pend_tail->next = q;
	else
		rs->pend_head = q;
	rs->pend_tail = q;
	rs->npend++;
	return true;
}

static int cm_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return ETIMEDOUT;
	case RDMA_CM_EVENT_ADDR_ERROR:
		return EHOSTUNREACH;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ENETUNREACH;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return ENODEV;
	default:
		return ev->status < 0 ? -ev->status : (ev->status ? ev->status : ECONNREFUSED);
	}
}

/* The next step of an active open after ROUTE_RESOLVED: resources, then
 * the REQ with our hello. */
static void start_connect(struct rs *rs)
{
	struct rdma_conn_param param = {0};
	struct rs_hello h;

	if (rs_io_setup(rs)) {
		rs_fail(rs, errno ? errno : ENOMEM);
		return;
	}
	rs_fill_hello(rs, &h);
	param.private_data = &h;
	param.private_data_len = sizeof(h);
	param.flow_control = 1;
	param.retry_count = 7;
	param.rnr_retry_count = 7; /* a full receive queue is waited out (RNR) */
	if (rdma_connect(rs->id, &param)) {
		rs_fail(rs, errno);
		return;
	}
	rs->state = RS_CONNECTING;
}

static void handle_event(struct rs *rs, struct rdma_cm_event *ev, bool *destroy_child)
{
	const struct rdma_conn_param *p = &ev->param.conn;

	if (rs->state == RS_LISTEN) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			*destroy_child =
			    ev->listen_id != rs->id || rs->closing || !queue_request(rs, ev);
		return;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state != RS_RESOLVING)
			break;
		if (rdma_resolve_route(rs->id, RS_RESOLVE_MS))
			rs_fail(rs, errno);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state == RS_RESOLVING)
			start_connect(rs);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state == RS_CONNECTING) {
			if (!p->private_data || p->private_data_len < sizeof(struct rs_hello) ||
			    ((const struct rs_hello *)p->private_data)->version !=
				RS_HELLO_VERSION) {
				rs_fail(rs, EPROTO);
				rdma_disconnect(rs->id);
				break;
			}
			rs_take_hello(rs, p->private_data);
			rs->state = RS_CONNECTED;
			rs->established = true;
		} else if (rs->state == RS_ACCEPTING) {
			rs->state = RS_CONNECTED;
			rs->established = true;
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rs->peer_gone = true;
		if (rs->state == RS_ACCEPTING || rs->state == RS_CONNECTING)
			rs_fail(rs, ECONNRESET);
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		if (rs->state == RS_RESOLVING || rs->state == RS_CONNECTING ||
		    rs->state == RS_ACCEPTING)
			rs_fail(rs, cm_errno(ev));
		else if (rs->state == RS_CONNECTED)
			rs->peer_gone = true;
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rs_fail(rs, ENODEV);
		break;
	default:
		break;
	}
}

void rs_cm_progress(struct rs *rs)
{
	struct rdma_cm_event *ev;

	if (rs->dg) {
		rs_dgram_cm(rs);
		return;
	}
	while (rs->ch && !rdma_get_cm_event(rs->ch, &ev)) {
		bool destroy_child = false;
		struct rdma_cm_id *child = ev->id;

		handle_event(rs, ev, &destroy_child);
		rdma_ack_cm_event(ev);
		if (destroy_child) {
			rdma_reject(child, NULL, 0);
			rdma_destroy_id(child);
		}
	}
}

static int connect_result(struct rs *rs)
{
	int e;

	if (rs->state == RS_CONNECTED)
		return 0;
	if (rs->state == RS_ERROR) {
		e = rs->err ? rs->err : rs->fatal;
		rs->err = 0;
		return e ? e : ECONNREFUSED;
	}
	return EINPROGRESS;
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->dg) { /* a datagram socket's default destination */
		ret = addr_ok(addr, addrlen);
		if (!ret)
			ret = rs_dgram_connect(rs, addr, addrlen);
		pthread_mutex_unlock(&rs->lock);
		rs_put(rs);
		return ret ? rs_set_errno(ret) : 0;
	}
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		ret = addr_ok(addr, addrlen);
		if (ret)
			break;
		if (rs->state == RS_INIT)
			apply_id_options(rs);
		if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, RS_RESOLVE_MS)) {
			ret = errno;
			break;
		}
		rs->state = RS_RESOLVING;
		/* non-blocking: the connection is under way, whatever the
		 * events already say (rdma-core's rconnect returns
		 * EINPROGRESS here too; POLLOUT tells the rest) */
		if (rs->nonblock) {
			ret = EINPROGRESS;
			goto out;
		}
		break;
	case RS_RESOLVING:
	case RS_CONNECTING:
		if (rs->nonblock) {
			rs_cm_progress(rs);
			ret = connect_result(rs);
			if (ret == EINPROGRESS)
				ret = EALREADY;
			goto out;
		}
		break;
	case RS_CONNECTED:
		ret = EISCONN;
		goto out;
	case RS_LISTEN:
	case RS_ACCEPTING:
		ret = EINVAL;
		goto out;
	case RS_ERROR:
		ret = connect_result(rs);
		goto out;
	}
	if (ret)
		goto out;
	for (;;) {
		rs_cm_progress(rs);
		ret = connect_result(rs);
		if (ret != EINPROGRESS || rs->nonblock)
			break;
		rs_wait(rs, -1);
	}
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

/* The passive open of one queued request: a socket of its own (the id
 * moves to its channel), resources, the REP with our hello. */
static struct rs *accept_one(struct rs *l, struct rs_pending *q, int *err)
{
	struct rdma_conn_param param = {0};
	struct rs_hello h;
	struct rs *rs;

	if (!q->hello_ok) {
		*err = ECONNABORTED;
		goto reject;
	}
	rs = rs_alloc(l->domain, l->type, l);
	if (!rs) {
		*err = errno;
		goto reject;
	}
	if (rdma_migrate_id(q->id, rs->ch)) {
		*err = errno;
		rs_destroy(rs);
		goto reject;
	}
	rs->id = q->id;
	rs->id->context = rs;
	rs->state = RS_ACCEPTING;
	rs_take_hello(rs, &q->hello);
	if (rs_io_setup(rs)) {
		*err = errno ? errno : ENOMEM;
		rdma_reject(rs->id, NULL, 0);
		rs_destroy(rs);
		return NULL;
	}
	rs_fill_hello(rs, &h);
	param.private_data = &h;
	param.private_data_len = sizeof(h);
	param.flow_control = 1;
	param.rnr_retry_count = 7;
	if (rdma_accept(rs->id, &param)) {
		*err = errno;
		rs_destroy(rs);
		return NULL;
	}
	if (tab_insert(rs)) {
		*err = ENOMEM;
		rdma_disconnect(rs->id);
		rs_destroy(rs);
		return NULL;
	}
	return rs;
reject:
	rdma_reject(q->id, NULL, 0);
	rdma_destroy_id(q->id);
	return NULL;
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rs *l = rs_get(socket), *rs = NULL;
	struct rs_pending *q;
	int ret = 0, fd;

	if (!l)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&l->lock);
	if (l->state != RS_LISTEN) {
		ret = EINVAL;
		goto out;
	}
	for (;;) {
		rs_cm_progress(l);
		q = l->pend_head;
		if (q) {
			l->pend_head = q->next;
			if (!l->pend_head)
				l->pend_tail = NULL;
			l->npend--;
			rs = accept_one(l, q, &ret);
			free(q);
			if (rs)
				break;
			continue; /* that one failed: the next, or wait */
		}
		if (l->nonblock) {
			ret = EAGAIN;
			goto out;
		}
		rs_wait(l, -1);
	}
	ret = 0;
	fd = rs->fd;
	pthread_mutex_unlock(&l->lock);
	rs_put(l);
	if (addr && addrlen)
		rgetpeername(fd, addr, addrlen);
	return fd;
out:
	pthread_mutex_unlock(&l->lock);
	rs_put(l);
	return rs_set_errno(ret);
}

int rshutdown(int socket, int how)
{
	struct rs *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		rs_put(rs);
		return rs_set_errno(EINVAL);
	}
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING && rs->state != RS_ERROR) {
		ret = ENOTCONN;
	} else {
		if (how != SHUT_WR)
			rs->shut_rd = true;
		if (how != SHUT_RD) {
			rs->shut_wr = true;
			rs_send_fin(rs, 10000);
		}
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

int rclose(int socket)
{
	struct rs *rs;

	pthread_mutex_lock(&tab_lock);
	if (socket < 0 || socket >= tab_len || !tab[socket]) {
		pthread_mutex_unlock(&tab_lock);
		return rs_set_errno(EBADF);
	}
	rs = tab[socket];
	tab[socket] = NULL; /* the table's reference is ours now */
	pthread_mutex_unlock(&tab_lock);

	pthread_mutex_lock(&rs->lock);
	rs->closing = true;
	rs_cm_progress(rs);

	if (rs->qp && (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING)) {
		/* what was sent reaches the peer before the disconnect */
		rs_send_fin(rs, 10000);
		rdma_disconnect(rs->id);
	} else if (rs->state == RS_CONNECTING) {
		rdma_disconnect(rs->id);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
}

static int name_out(const struct sockaddr *sa, struct sockaddr *addr, socklen_t *addrlen)
{
	socklen_t len;

	if (!addrlen)
		return EFAULT;
	len = sa->sa_family == AF_INET6	 ? sizeof(struct sockaddr_in6)
	      : sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
	      : sa->sa_family == AF_IB	 ? sizeof(struct sockaddr_ib)
					 : sizeof(struct sockaddr_storage);
	if (addr)
		memcpy(addr, sa, *addrlen < len ? *addrlen : len);
	*addrlen = len;
	return 0;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rs *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING && rs->state != RS_CONNECTING)
		ret = ENOTCONN;
	else
		ret = name_out(rdma_get_peer_addr(rs->id), addr, addrlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rs *rs = rs_get(socket);
	struct sockaddr_storage none = {0};
	struct sockaddr *sa;
	int ret;

	if (!rs)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&rs->lock);
	sa = rdma_get_local_addr(rs->id);
	if (rs->state == RS_INIT || !sa->sa_family) {
		/* unbound: the wildcard of the socket's family, port 0 */
		none.ss_family = (sa_family_t)rs->domain;
		sa = (struct sockaddr *)&none;
	}
	ret = name_out(sa, addr, addrlen);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

static int int_opt(const void *optval, socklen_t optlen, int *v)
{
	if (!optval || optlen < sizeof(int))
		return EINVAL;
	memcpy(v, optval, sizeof(int));
	return 0;
}

static uint32_t clamp_u32(int v, uint32_t lo, uint32_t hi)
{
	if (v < (int)lo)
		return lo;
	if ((uint32_t)v > hi)
		return hi;
	return (uint32_t)v;
}

int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rs *rs = rs_get(socket);
	int ret = 0, v = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (level == SOL_RDMA && optname == RDMA_ROUTE) {
		/* a path from rdma_getaddrinfo: ours resolve the same route
		 * locally, so the hint is taken and not needed */
		if (!optval || !optlen)
			ret = EINVAL;
		goto out;
	}
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (!optval || optlen < sizeof(struct linger))
			ret = EINVAL;
		else
			memcpy(&rs->linger, optval, sizeof(rs->linger));
		goto out;
	}
	ret = int_opt(optval, optlen, &v);
	if (ret)
		goto out;
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			rs->reuseaddr = !!v;
			if (rs->state == RS_INIT && rs->id)
				apply_id_options(rs);
			break;
		case SO_RCVBUF:
			if (!rs->qp)
				rs->rbuf_size = clamp_u32(v, RS_MIN_BUF, RS_MAX_BUF);
			break;
		case SO_SNDBUF:
			if (!rs->qp)
				rs->sbuf_size = clamp_u32(v, RS_MIN_BUF, RS_MAX_BUF);
			break;
		case SO_KEEPALIVE:
			rs->keepalive = !!v;
			if (rs->keepalive)
				rs_keepalive_start();
			break;
		case SO_OOBINLINE:
			rs->oobinline = !!v;
			break;
		case SO_REUSEPORT: /* taken; ports are shared per listener anyway */
			rs->reuseport = !!v;
			break;
		default:
			ret = ENOTSUP;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY: /* every send goes out at once anyway */
			rs->nodelay = !!v;
			break;
		case TCP_MAXSEG:
			rs->maxseg = v;
			break;
		case TCP_KEEPIDLE:
			rs->keepidle = v;
			break;
		case TCP_KEEPCNT:
			rs->keepcnt = v;
			break;
		case TCP_KEEPINTVL:
			rs->keepintvl = v;
			break;
		default:
			ret = ENOTSUP;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY) {
			rs->afonly = !!v;
			if (rs->state == RS_INIT)
				apply_id_options(rs);
		} else {
			ret = ENOTSUP;
		}
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			if (!rs->qp)
				rs->sq_size = clamp_u32(v, 4, RS_MAX_QSIZE);
			break;
		case RDMA_RQSIZE:
			if (!rs->qp)
				rs->rq_size = clamp_u32(v, 4, RS_MAX_QSIZE);
			break;
		case RDMA_INLINE:
			/* a connected socket takes it up to what its QP holds */
			rs->inline_size = clamp_u32(v, 0, rs->qp ? rs->inline_max : 512);
			break;
		case RDMA_IOMAPSIZE:
			rs->iomap_size = clamp_u32(v, 0, RS_IOMAP_SLOTS);
			break;
		default:
			ret = ENOTSUP;
		}
		break;
	default:
		ret = ENOTSUP;
	}
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rs *rs = rs_get(socket);
	int ret = 0, v = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	if (!optval || !optlen) {
		rs_put(rs);
		return rs_set_errno(EFAULT);
	}
	pthread_mutex_lock(&rs->lock);
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		socklen_t n = *optlen < sizeof(rs->linger) ? *optlen : sizeof(rs->linger);

		memcpy(optval, &rs->linger, n);
		*optlen = n;
		goto out;
	}
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_ERROR:
			v = rs->err;
			rs->err = 0;
			break;
		case SO_TYPE:
			v = rs->type;
			break;
		case SO_DOMAIN:
			v = rs->domain;
			break;
		case SO_PROTOCOL:
			v = IPPROTO_TCP;
			break;
		case SO_ACCEPTCONN:
			v = rs->state == RS_LISTEN;
			break;
		case SO_REUSEADDR:
			v = rs->reuseaddr;
			break;
		case SO_REUSEPORT:
			v = rs->reuseport;
			break;
		case SO_RCVBUF:
			v = (int)rs->rbuf_size;
			break;
		case SO_SNDBUF:
			v = (int)rs->sbuf_size;
			break;
		case SO_KEEPALIVE:
			v = rs->keepalive;
			break;
		case SO_OOBINLINE:
			v = rs->oobinline;
			break;
		default:
			ret = ENOTSUP;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			v = rs->nodelay;
			break;
		case TCP_MAXSEG:
			v = rs->maxseg;
			break;
		case TCP_KEEPIDLE:
			v = rs->keepidle;
			break;
		case TCP_KEEPCNT:
			v = rs->keepcnt;
			break;
		case TCP_KEEPINTVL:
			v = rs->keepintvl;
			break;
		default:
			ret = ENOTSUP;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			v = rs->afonly > 0;
		else
			ret = ENOTSUP;
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			v = (int)rs->sq_size;
			break;
		case RDMA_RQSIZE:
			v = (int)rs->rq_size;
			break;
		case RDMA_INLINE:
			v = (int)rs->inline_size;
			break;
		case RDMA_IOMAPSIZE:
			v = (int)rs->iomap_size;
			break;
		default:
			ret = ENOTSUP;
		}
		break;
	default:
		ret = ENOTSUP;
	}
	if (!ret) {
		socklen_t n = *optlen < sizeof(int) ? *optlen : sizeof(int);

		memcpy(optval, &v, n);
		*optlen = n;
	}
out:
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret ? rs_set_errno(ret) : 0;
}

int rfcntl(int socket, int cmd, ...)
{
	struct rs *rs = rs_get(socket);
	va_list ap;
	long arg;
	int ret = 0;

	if (!rs)
		return rs_set_errno(EBADF);
	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	pthread_mutex_lock(&rs->lock);
	switch (cmd) {
	case F_GETFL:
		ret = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
		break;
	case F_SETFL:
		rs->nonblock = (arg & O_NONBLOCK) != 0;
		break;
	case F_GETFD:
	case F_SETFD:
		/* close-on-exec is the descriptor's own */
		ret = cmd == F_GETFD ? fcntl(rs->fd, F_GETFD) : fcntl(rs->fd, F_SETFD, (int)arg);
		if (ret < 0)
			ret = -errno;
		break;
	default:
		ret = -EINVAL;
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return ret < 0 ? rs_set_errno(-ret) : ret;
}
