/*
 * softrdmad: the per-host daemon.  One instance per user and network
 * namespace, found at an abstract Unix socket (see proto.h).  It is started
 * on demand by the library (or by `softrdma daemon` in the foreground),
 * serves control requests (and the CM agent's MADs) in one thread's poll
 * loop beside the RoCEv2 engine's thread (src/engine/engine.c), reclaims
 * the resources of clients whose socket closes, and exits after an idle
 * period with no clients.  It serves only processes of its own effective uid (the
 * abstract name has no permissions): see accept_client.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/ctl_spin.h"
#include "core/daemon_link.h"
#include "core/env.h"
#include "core/log.h"
#include "daemon/daemon.h"
#include "engine/ctl.h"
#include "engine/engine.h"

/* SOFTRDMA_IDLE_TIMEOUT and SOFTRDMA_ARENA_MB at most (a year; 1 TiB) */
#define SR_IDLE_MAX_S	(365 * 86400)
#define SR_ARENA_MAX_MB (1 << 20)

static volatile sig_atomic_t sr_stop;

static void on_signal(int sig)
{
	(void)sig;
	sr_stop = 1;
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

/*
 * Every connection is let in and its credentials kept: one of another
 * effective uid (root's included, see docs/architecture.md "Trust model")
 * or of unknown credentials is marked foreign, and its first request,
 * whatever it is, gets the refusal record and the close (dispatch.c).
 * Answering instead of closing at once tells the user why.
 */
static void accept_client(struct sr_daemon *d)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	uid_t uid = (uid_t)-1; /* unknown credentials: foreign */
	pid_t pid = 0;
	int fd;

	fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		/* out of descriptors: the connection waits in the backlog;
		 * poll the listening socket again in 100 ms, not at once */
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			d->accept_paused_until = sr_daemon_now_ms() + 100;
		return;
	}
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) && clen == sizeof(cred)) {
		pid = cred.pid;
		uid = cred.uid;
	}
	if (!sr_client_add(d, fd, pid, uid))
		close(fd);
}

/* The RoCEv2 engine's connection: a client like any other, served by this
 * loop, but one that neither keeps the daemon alive nor shows as a process. */
static int add_engine_client(struct sr_daemon *d)
{
	struct sr_client *c;
	int sp[2], ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp))
		return -errno;
	c = sr_client_add(d, sp[0], getpid(), d->uid);
	if (!c) {
		close(sp[0]);
		close(sp[1]);
		return -ENOMEM;
	}
	c->internal = true;
	snprintf(c->comm, sizeof(c->comm), "roce-engine");
	ret = sr_engine_start(sp[1]);
	if (ret) {
		close(sp[1]);
		sr_info("RoCEv2 engine off: %s", strerror(-ret));
		return ret;
	}
	sr_engine_gsi_attach(d->arena); /* the CM agent's own QP1 I/O (gsi.c) */
	return 0;
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
	fprintf(stderr, "usage: softrdmad [--idle SECONDS] [--fault SPEC]\n"
			"  --idle 0: never exit when idle\n"
			"  --fault SPEC: fault injection on the RoCEv2 wire from the start\n"
			"    (default: $SOFTRDMA_FAULT; grammar in `softrdma fault --help`)\n");
}

int main(int argc, char **argv)
{
	struct sr_daemon d;
	struct pollfd *pfd = NULL;
	struct sr_client **who = NULL;
	size_t cap = 0;
	uint64_t idle_since, last_sweep = 0, last_tick = 0, last_reap = 0;
	bool waiting = false, tick_waiting = false, deferred, active = false;
	struct rlimit rl;
	static int idle = -1, arena_mb = -1;
	const char *fault;
	int ret;

	memset(&d, 0, sizeof(d));
	sr_log_init("softrdmad");
	d.idle_timeout_s = sr_env_num("SOFTRDMA_IDLE_TIMEOUT", &idle, SR_IDLE_MAX_S, 10);
	fault = sr_env_str("SOFTRDMA_FAULT");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--idle") && i + 1 < argc) {
			d.idle_timeout_s = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--fault") && i + 1 < argc) {
			fault = argv[++i];
		} else {
			usage();
			return 2;
		}
	}
	if (fault && *fault) {
		struct sr_fault_cfg cfg;
		char why[256];

		if (sr_fault_parse(fault, &cfg, why, sizeof(why))) {
			sr_err("fault spec '%s': %s", fault, why);
			return 2;
		}
		sr_engine_fault_initial(&cfg);
		if (sr_fault_cfg_on(&cfg))
			sr_info("fault injection: %s", cfg.text);
	}
	/* every client's registered memory and event fds are descriptors
	 * here: take what the hard limit allows */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	sr_device_init(&d.dev);
	ret = sr_heap_init(&d, (uint64_t)sr_env_num("SOFTRDMA_ARENA_MB", &arena_mb, SR_ARENA_MAX_MB,
						    SR_ARENA_DEFAULT_SIZE >> 20)
				   << 20);
	if (!ret)
		ret = sr_objects_init(&d);
	if (!ret)
		ret = sr_cm_init(&d);
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
		/* the listening socket and the CM's wire MADs: through the
		 * engine, and on QP1's own socket */
		size_t n = 3;
		int wire_fd = sr_cm_wire_fd(), wire_sock = sr_cm_wire_sock();

		for (struct sr_client *c = d.clients; c; c = c->next)
			n++;
		if (n > cap) {
			cap = n * 2;
			pfd = realloc(pfd, cap * sizeof(*pfd));
			who = realloc(who, cap * sizeof(*who));
			if (!pfd || !who)
				return 1;
		}
		pfd[0] = (struct pollfd){
		    .fd = sr_daemon_now_ms() < d.accept_paused_until ? -1 : d.listen_fd,
		    .events = POLLIN};
		n = 1;
		deferred = false;
		for (struct sr_client *c = d.clients; c; c = c->next) {
			/* replies waiting: no more requests until they are sent;
			 * a request waiting for locks: none until it is done */
			pfd[n] = (struct pollfd){.fd = c->sock,
						 .events = c->out	 ? POLLOUT
							   : c->deferred ? 0
									 : POLLIN};
			who[n++] = c;
			deferred |= c->deferred != NULL;
		}
		/* last, outside the clients' range: sr_cm_tick below takes them */
		pfd[n] = (struct pollfd){.fd = wire_fd, .events = POLLIN};
		pfd[n + 1] = (struct pollfd){.fd = wire_sock, .events = POLLIN};
		/* right after a request the next one often follows within
		 * microseconds: look again for a while before sleeping */
		ret = active ? sr_ctl_spin_poll(pfd, n + 2) : 0;
		if (ret == 0)
			ret = poll(pfd, n + 2, waiting || deferred ? 1 : 100);
		active = ret > 0;
		if (ret < 0 && errno != EINTR)
			break;
		if (ret > 0 && pfd[n].revents & POLLIN)
			sr_cm_wire_clear(); /* before sr_cm_tick takes the MADs */
		if (ret > 0 && pfd[n + 1].revents & POLLIN)
			sr_cm_wire_sock_ready();
		if (ret > 0) {
			/* serve clients first: accept_client changes the list head */
			for (size_t i = 1; i < n; i++) {
				if (!pfd[i].revents)
					continue;
				if (!who[i]->out && !who[i]->deferred)
					sr_client_serve(&d, who[i]);
				else if (pfd[i].revents & (POLLHUP | POLLERR))
					sr_client_drop(&d, who[i], "hung up");
				else if (who[i]->out)
					sr_client_flush(&d, who[i]);
			}
			if (pfd[0].revents & POLLIN)
				accept_client(&d);
		}
		for (struct sr_client *c = d.clients, *next; c; c = next) {
			next = c->next;
			if (c->deferred)
				sr_client_retry(&d, c);
		}
		/* the tick walks every QP of every client: at most once a
		 * millisecond (its deadlines have that grain), not after each
		 * request, or 1,000 connections set up at once cost O(n^2) */
		if (ret == 0 || sr_daemon_now_ms() != last_tick) {
			last_tick = sr_daemon_now_ms();
			tick_waiting = sr_daemon_tick(&d);
		}
		waiting = tick_waiting;
		waiting |= sr_cm_tick(&d);
		/* the reap looks at every reader's slot: in a burst of
		 * requests once a millisecond, and always before sleeping */
		if (!active || sr_daemon_now_ms() != last_reap) {
			last_reap = sr_daemon_now_ms();
			sr_heap_reap(&d, false);
		}
		if (sr_daemon_now_ms() - last_sweep >= 1000) {
			sr_client_drop_silent_foreign(&d);
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
		sr_client_drop(&d, d.clients, "the daemon stops");
	close(d.listen_fd);
	sr_cm_fini(&d);
	sr_objects_fini(&d);
	sr_heap_fini(&d);
	free(pfd);
	free(who);
	return 0;
}
