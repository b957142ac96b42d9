/*
 * sr_trust: the other account's side of the trust test (trust.sh).  It talks
 * to softrdmad through the library, and also by hand, as an attacker would,
 * with none of the library's own checks.
 *
 *   sr_trust list             ibv_get_device_list, then ibv_open_device of
 *                             what it found: prints "list: N device(s)" or
 *                             "list: NULL errno E", then "open: ok" or
 *                             "open: errno E"
 *   sr_trust open-at NAME     lists the device of $SOFTRDMA_SOCKET (a daemon
 *                             of our own), then opens it at NAME: "open: ..."
 *   sr_trust probe OP         sends OP (hello, monitor, status, get_fd,
 *                             mr_map) as its first request: prints
 *                             "reply: status S reason R fds N", then sends a
 *                             GET_FD and prints "then: closed" if the daemon
 *                             hung up, else "then: answered status S fds N"
 *   sr_trust silent           connects and sends nothing: prints
 *                             "silent: closed after MS ms" when the daemon
 *                             hangs up, or "silent: still open after MS ms"
 *   sr_trust get-fds          as the daemon's own user: registers an MR, then
 *                             asks GET_FD for every small handle on a
 *                             connection of its own: prints "get_fd: E
 *                             eventfd(s), M memfd(s)"; exits 1 if M > 0
 *                             (memory is handed out by key only, MR_MAP)
 *   sr_trust fake-daemon NAME binds NAME and answers one HELLO as a daemon
 *                             would (success, a memfd as the arena): prints
 *                             "fake: ready", then "fake: client sent op N"
 *                             for each further request, and "fake: client
 *                             closed" when it hangs up
 * Exit status 0 unless the program itself failed (trust.sh judges output).
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <softrdma/proto.h>

#include "core/msg.h"

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "?";
}

static void try_open(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);

	if (ctx) {
		printf("open: ok\n");
		ibv_close_device(ctx);
	} else {
		printf("open: errno %s\n", errname(errno));
	}
}

static int cmd_list(const char *open_at)
{
	struct ibv_device **list;
	int n = -1;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		printf("list: NULL errno %s\n", errname(errno));
		return 0;
	}
	printf("list: %d device(s)\n", n);
	if (n > 0) {
		if (open_at)
			setenv("SOFTRDMA_SOCKET", open_at, 1);
		try_open(list[0]);
	}
	ibv_free_device_list(list);
	return 0;
}

static int addr_of(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(name) + 2 > sizeof(sa->sun_path))
		return -1;
	strcpy(sa->sun_path + 1, name); /* abstract: sun_path[0] = 0 */
	*len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
	return 0;
}

static int connect_raw(void)
{
	const char *name = getenv("SOFTRDMA_SOCKET");
	struct sockaddr_un sa;
	socklen_t len;
	int fd;

	if (!name || addr_of(name, &sa, &len))
		return -1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len)) {
		perror("sr_trust: connect");
		exit(1);
	}
	return fd;
}

/* One request, one reply; returns bytes received (0: closed) or -errno. */
static long ask(int fd, const struct sr_req *req, struct sr_rep *rep, int *nfds)
{
	int fds[SR_MSG_MAX_FDS];
	int ret;
	long n;

	*nfds = SR_MSG_MAX_FDS;
	memset(rep, 0, sizeof(*rep));
	ret = sr_msg_send(fd, req, sizeof(*req), NULL, 0);
	if (ret) {
		*nfds = 0;
		return ret;
	}
	n = sr_msg_recv(fd, rep, sizeof(*rep), fds, nfds);
	if (n < 0)
		*nfds = 0;
	for (int i = 0; i < *nfds; i++)
		close(fds[i]);
	return n;
}

static int cmd_probe(const char *op)
{
	struct sr_req req;
	struct sr_rep rep;
	int fd = connect_raw(), nfds;
	long n;

	memset(&req, 0, sizeof(req));
	if (!strcmp(op, "hello") || !strcmp(op, "monitor")) {
		req.op = SR_OP_HELLO;
		req.u.hello.version = SR_PROTO_VERSION;
		req.u.hello.flags = !strcmp(op, "monitor");
		req.u.hello.pid = (uint32_t)getpid();
	} else if (!strcmp(op, "status")) {
		req.op = SR_OP_STATUS;
	} else if (!strcmp(op, "get_fd")) {
		req.op = SR_OP_GET_FD;
		req.handle = 1;
	} else if (!strcmp(op, "mr_map")) {
		req.op = SR_OP_MR_MAP;
		req.handle = 1u << 14;
	} else {
		fprintf(stderr, "sr_trust: unknown probe %s\n", op);
		return 2;
	}
	n = ask(fd, &req, &rep, &nfds);
	if (n <= 0) {
		printf("reply: none (%s)\n", n ? errname((int)-n) : "closed");
	} else {
		printf("reply: status %d reason %u fds %d\n", rep.status,
		       rep.status ? rep.u.refused.reason : 0, nfds);
		if (rep.status)
			printf("refused: daemon uid %u client uid %u\n", rep.u.refused.daemon_uid,
			       rep.u.refused.client_uid);
	}
	/* the daemon hangs up after a refusal: nothing more can be asked */
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_GET_FD;
	req.handle = 1;
	n = ask(fd, &req, &rep, &nfds);
	if (n == 0 || n == -EPIPE || n == -ECONNRESET)
		printf("then: closed\n");
	else if (n < 0)
		printf("then: error %s\n", errname((int)-n));
	else
		printf("then: answered status %d fds %d\n", rep.status, nfds);
	close(fd);
	return 0;
}

static int cmd_get_fds(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct sr_req req;
	struct sr_rep rep;
	static char buf[8192];
	int fd, nev = 0, nmem = 0, n = 0;

	list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0])) || !(pd = ibv_alloc_pd(ctx)) ||
	    !(ch = ibv_create_comp_channel(ctx)) ||
	    !(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE))) {
		perror("sr_trust: set-up");
		return 1;
	}
	fd = connect_raw();
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_HELLO;
	req.u.hello.version = SR_PROTO_VERSION;
	req.u.hello.pid = (uint32_t)getpid();
	if (ask(fd, &req, &rep, &n) != sizeof(rep) || rep.status) {
		fprintf(stderr, "sr_trust: HELLO failed\n");
		return 1;
	}
	for (uint32_t h = 0; h < 64; h++) {
		int fds[SR_MSG_MAX_FDS], nfds = SR_MSG_MAX_FDS;
		char path[64], target[256];
		ssize_t len;

		memset(&req, 0, sizeof(req));
		req.op = SR_OP_GET_FD;
		req.handle = h;
		if (sr_msg_send(fd, &req, sizeof(req), NULL, 0) ||
		    sr_msg_recv(fd, &rep, sizeof(rep), fds, &nfds) != sizeof(rep))
			return 1;
		for (int i = 0; i < nfds; i++) {
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[i]);
			len = readlink(path, target, sizeof(target) - 1);
			target[len > 0 ? len : 0] = 0;
			nev += !!strstr(target, "eventfd");
			nmem += !!strstr(target, "memfd:");
			close(fds[i]);
		}
	}
	printf("get_fd: %d eventfd(s), %d memfd(s)\n", nev, nmem);
	close(fd);
	ibv_dereg_mr(mr);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return nmem || !nev;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmd_silent(void)
{
	uint64_t t0 = now_ms();
	struct pollfd p = {.fd = connect_raw(), .events = POLLIN};
	char c;

	/* POLLIN or POLLHUP when the daemon closes; nothing else can come */
	if (poll(&p, 1, 5000) == 1 && recv(p.fd, &c, 1, 0) <= 0)
		printf("silent: closed after %llu ms\n", (unsigned long long)(now_ms() - t0));
	else
		printf("silent: still open after %llu ms\n", (unsigned long long)(now_ms() - t0));
	close(p.fd);
	return 0;
}

static int cmd_fake_daemon(const char *name)
{
	struct sockaddr_un sa;
	struct sr_req req;
	struct sr_rep rep;
	socklen_t len;
	int lfd, fd, arena, nfds = 0;
	long n;

	alarm(30);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (lfd < 0 || addr_of(name, &sa, &len) || bind(lfd, (struct sockaddr *)&sa, len) ||
	    listen(lfd, 4)) {
		perror("sr_trust: fake daemon");
		return 1;
	}
	printf("fake: ready\n");
	fflush(stdout);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return 1;
	n = sr_msg_recv(fd, &req, sizeof(req), NULL, &nfds);
	if (n <= 0 || req.op != SR_OP_HELLO) {
		printf("fake: no HELLO\n");
		return 1;
	}
	/* what a squatter would hand out: success and an arena of its own */
	arena = memfd_create("fake-arena", MFD_CLOEXEC);
	if (arena < 0 || ftruncate(arena, 1 << 20))
		return 1;
	memset(&rep, 0, sizeof(rep));
	snprintf(rep.u.hello.name, sizeof(rep.u.hello.name), SR_DEV_NAME);
	rep.u.hello.arena_size = 1 << 20;
	rep.u.hello.daemon_pid = (uint32_t)getpid();
	if (sr_msg_send(fd, &rep, sizeof(rep), &arena, 1))
		return 1;
	for (;;) {
		int fds[SR_MSG_MAX_FDS];

		nfds = SR_MSG_MAX_FDS;
		n = sr_msg_recv(fd, &req, sizeof(req), fds, &nfds);
		if (n <= 0)
			break;
		printf("fake: client sent op %u with %d fd(s)\n", req.op, nfds);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		memset(&rep, 0, sizeof(rep));
		rep.status = -EINVAL;
		sr_msg_send(fd, &rep, sizeof(rep), NULL, 0);
	}
	printf("fake: client closed\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "list"))
		return cmd_list(NULL);
	if (argc == 3 && !strcmp(argv[1], "open-at"))
		return cmd_list(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "probe"))
		return cmd_probe(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "silent"))
		return cmd_silent();
	if (argc == 2 && !strcmp(argv[1], "get-fds"))
		return cmd_get_fds();
	if (argc == 3 && !strcmp(argv[1], "fake-daemon"))
		return cmd_fake_daemon(argv[2]);
	fprintf(stderr, "usage: sr_trust list | open-at NAME | probe OP | silent | get-fds | "
			"fake-daemon NAME\n");
	return 2;
}
