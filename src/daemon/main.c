/*
 * softrdmad: the per-host daemon.  One instance per user and network
 * namespace, found at an abstract Unix socket (see proto.h).  It is started
 * on demand by the library (or by `softrdma daemon` in the foreground),
 * serves control requests in a single-threaded poll loop, reclaims the
 * resources of clients whose socket closes, and exits after an idle period
 * with no clients.  It serves only processes of its own effective uid (the
 * abstract name has no permissions): see accept_client.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/daemon_link.h"
#include "core/log.h"
#include "core/msg.h"
#include "daemon/daemon.h"
#include "engine/engine.h"

static volatile sig_atomic_t sr_stop;

static void on_signal(int sig)
{
	(void)sig;
	sr_stop = 1;
}

uint64_t sr_daemon_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int listen_socket(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t len;
	int fd;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* abstract name: sun_path[0] = 0 */
	char name[100];

	sr_daemon_socket_name(name, sizeof(name));
	len = offsetof(struct sockaddr_un, sun_path) + 1 +
	      snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "%s", name);
	if (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 128)) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* Another uid's connections held open at once, waiting for their first
 * request (to be refused): beyond that they are closed unanswered, and
 * after SR_FOREIGN_WAIT_MS without a request too, so another account can
 * neither run the daemon out of descriptors nor keep it from exiting. */
#define SR_FOREIGN_MAX	   16
#define SR_FOREIGN_WAIT_MS 1000

static unsigned count_foreign(const struct sr_daemon *d)
{
	unsigned n = 0;

	for (const struct sr_client *c = d->clients; c; c = c->next)
		n += c->foreign;
	return n;
}

/*
 * Every connection is let in and its credentials kept: one of another
 * effective uid (root's included, see docs/architecture.md "Trust model")
 * or of unknown credentials is marked foreign, and its first request,
 * whatever it is, gets the refusal record and the close (objects.c).
 * Answering instead of closing at once tells the user why.
 */
static void accept_client(struct sr_daemon *d)
{
	struct sr_client *c;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	bool foreign = true;
	char path[64];
	int fd, cfd;

	fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) && clen == sizeof(cred))
		foreign = cred.uid != d->uid;
	else
		cred = (struct ucred){.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
	if (foreign && count_foreign(d) >= SR_FOREIGN_MAX) {
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->sock = fd;
	c->pid = cred.pid;
	c->uid = cred.uid;
	c->foreign = foreign;
	c->since_ms = sr_daemon_now_ms();
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)c->pid);
	cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd >= 0) {
		ssize_t n = read(cfd, c->comm, sizeof(c->comm) - 1);

		if (n > 0 && c->comm[n - 1] == '\n')
			c->comm[n - 1] = 0;
		close(cfd);
	}
	c->next = d->clients;
	d->clients = c;
}

/* The RoCEv2 engine's connection: a client like any other, served by this
 * loop, but one that neither keeps the daemon alive nor shows as a process. */
static int add_engine_client(struct sr_daemon *d)
{
	struct sr_client *c;
	int sp[2], ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp))
		return -errno;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(sp[0]);
		close(sp[1]);
		return -ENOMEM;
	}
	c->sock = sp[0];
	c->pid = getpid();
	c->uid = geteuid();
	c->since_ms = sr_daemon_now_ms();
	c->internal = true;
	snprintf(c->comm, sizeof(c->comm), "roce-engine");
	c->next = d->clients;
	d->clients = c;
	ret = sr_engine_start(sp[1]);
	if (ret) {
		close(sp[1]);
		sr_info("RoCEv2 engine off: %s", strerror(-ret));
	}
	return ret;
}

static void drop_client(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_client **pp;

	/* A client never admitted holds nothing, and its pid (another uid's,
	 * perhaps already dead and reused) must not free anyone's reader slots. */
	if (c->id)
		sr_client_teardown(d, c);
	for (pp = &d->clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	close(c->sock);
	free(c);
}

static void serve_client(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_req req;
	int fds[SR_MSG_MAX_FDS];
	int nfds = SR_MSG_MAX_FDS;
	long n;

	n = sr_msg_recv(c->sock, &req, sizeof(req), fds, &nfds);
	if (n <= 0) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		drop_client(d, c);
		return;
	}
	if ((size_t)n < offsetof(struct sr_req, u)) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	if ((size_t)n < sizeof(req))
		memset((char *)&req + n, 0, sizeof(req) - n);
	sr_handle_request(d, c, &req, fds, nfds);
	if (c->refused)
		drop_client(d, c);
}

/* Foreign connections that never sent their first request. */
static void drop_silent_foreign(struct sr_daemon *d)
{
	uint64_t now = sr_daemon_now_ms();
	struct sr_client *c = d->clients, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->foreign && now - c->since_ms > SR_FOREIGN_WAIT_MS)
			drop_client(d, c);
	}
}

static bool has_resource_clients(const struct sr_daemon *d)
{
	for (const struct sr_client *c = d->clients; c; c = c->next)
		if (!c->monitor && !c->foreign && !c->internal)
			return true;
	return false;
}

static void usage(void)
{
	fprintf(stderr, "usage: softrdmad [--idle SECONDS]   (0 = never exit when idle)\n");
}

int main(int argc, char **argv)
{
	struct sr_daemon d;
	struct pollfd *pfd = NULL;
	struct sr_client **who = NULL;
	size_t cap = 0;
	uint64_t idle_since, last_sweep = 0;
	bool waiting = false;
	const char *e;
	int ret;

	memset(&d, 0, sizeof(d));
	sr_log_init("softrdmad");
	d.idle_timeout_s = 10;
	e = getenv("SOFTRDMA_IDLE_TIMEOUT");
	if (e && *e)
		d.idle_timeout_s = atoi(e);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--idle") && i + 1 < argc) {
			d.idle_timeout_s = atoi(argv[++i]);
		} else {
			usage();
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	sr_device_init(&d.dev);
	e = getenv("SOFTRDMA_ARENA_MB");
	ret = sr_heap_init(&d, e && *e ? strtoull(e, NULL, 0) << 20 : SR_ARENA_DEFAULT_SIZE);
	if (!ret)
		ret = sr_objects_init(&d);
	if (ret) {
		sr_err("cannot set up the arena: %s", strerror(-ret));
		return 1;
	}
	d.dev.arena_size = d.arena_size;
	d.dev.daemon_pid = getpid();
	d.uid = geteuid();
	d.listen_fd = listen_socket();
	if (d.listen_fd < 0) {
		if (d.listen_fd == -EADDRINUSE) {
			sr_info("another softrdmad serves this namespace");
			return 0;
		}
		sr_err("cannot listen: %s", strerror(-d.listen_fd));
		return 1;
	}
	sr_info("serving %s, idle timeout %d s", d.dev.name, d.idle_timeout_s);
	add_engine_client(&d);
	idle_since = sr_daemon_now_ms();

	while (!sr_stop) {
		size_t n = 1;

		for (struct sr_client *c = d.clients; c; c = c->next)
			n++;
		if (n > cap) {
			cap = n * 2;
			pfd = realloc(pfd, cap * sizeof(*pfd));
			who = realloc(who, cap * sizeof(*who));
			if (!pfd || !who)
				return 1;
		}
		pfd[0] = (struct pollfd){.fd = d.listen_fd, .events = POLLIN};
		n = 1;
		for (struct sr_client *c = d.clients; c; c = c->next) {
			pfd[n] = (struct pollfd){.fd = c->sock, .events = POLLIN};
			who[n++] = c;
		}
		ret = poll(pfd, n, waiting ? 1 : 100);
		if (ret < 0 && errno != EINTR)
			break;
		if (ret > 0) {
			/* serve clients first: accept_client changes the list head */
			for (size_t i = 1; i < n; i++)
				if (pfd[i].revents)
					serve_client(&d, who[i]);
			if (pfd[0].revents & POLLIN)
				accept_client(&d);
		}
		waiting = sr_daemon_tick(&d);
		sr_heap_reap(&d, false);
		if (sr_daemon_now_ms() - last_sweep >= 1000) {
			drop_silent_foreign(&d);
			sr_heap_sweep_slots(&d);
			last_sweep = sr_daemon_now_ms();
		}
		if (has_resource_clients(&d)) {
			idle_since = sr_daemon_now_ms();
		} else if (d.idle_timeout_s > 0 &&
			   sr_daemon_now_ms() - idle_since > (uint64_t)d.idle_timeout_s * 1000) {
			sr_info("idle for %d s, exiting", d.idle_timeout_s);
			break;
		}
	}
	/* a request the engine may be waiting on fails rather than hangs */
	for (struct sr_client *c = d.clients; c; c = c->next)
		if (c->internal)
			shutdown(c->sock, SHUT_RDWR);
	sr_engine_stop();
	while (d.clients)
		drop_client(&d, d.clients);
	close(d.listen_fd);
	sr_objects_fini(&d);
	sr_heap_fini(&d);
	free(pfd);
	free(who);
	return 0;
}
