/*
 * Edge cases of our rsockets, a server and a client as two processes (the
 * client is forked before either touches librdmacm): connect to a port
 * nobody listens on, names, rpoll with a timeout and mixed with a pipe,
 * non-blocking EAGAIN on both directions, a large transfer checked byte for
 * byte while both directions run from two threads, riowrite into a riomap'd
 * buffer, and the peer's close seen as end of stream (rrecv 0).
 *
 * usage: rs_edge [PORT]   (default: one from the pid, 20000-39999)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#define BIG   (24u * 1024 * 1024)
#define IOMAP (1u * 1024 * 1024)
#define FILL  (4u * 1024 * 1024)

static int port;

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s: FAIL line %d: %s (errno %d %s)\n", role, __LINE__,    \
				#c, errno, strerror(errno));                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static const char *role = "?";

static long long ms_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static uint8_t pat(size_t i, unsigned seed)
{
	return (uint8_t)((i * 2654435761u) >> 13 ^ seed);
}

static struct sockaddr_in addr_of(int p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static void xfer_all(int s, void *buf, size_t len, bool send)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = send ? rsend(s, (uint8_t *)buf + off, len - off, 0)
				 : rrecv(s, (uint8_t *)buf + off, len - off, MSG_WAITALL);

		CHECK(n > 0);
		off += (size_t)n;
	}
}

struct dir {
	int s;
	unsigned seed;
	bool send;
};

/* One direction of the big transfer, in uneven pieces. */
static void *big_dir(void *arg)
{
	struct dir *d = arg;
	uint8_t *buf = malloc(BIG);
	size_t off = 0, piece = 1;
	size_t i;

	CHECK(buf);
	if (d->send)
		for (i = 0; i < BIG; i++)
			buf[i] = pat(i, d->seed);
	while (off < BIG) {
		size_t n = piece < BIG - off ? piece : BIG - off;

		xfer_all(d->s, buf + off, n, d->send);
		off += n;
		piece = piece * 3 + 7;
		if (piece > 3u * 1024 * 1024)
			piece = 1000;
	}
	if (!d->send)
		for (i = 0; i < BIG; i++)
			CHECK(buf[i] == pat(i, d->seed));
	free(buf);
	return NULL;
}

static void big_both_ways(int s, bool server)
{
	struct dir tx = {s, server ? 1u : 2u, true}, rx = {s, server ? 2u : 1u, false};
	pthread_t t;

	CHECK(!pthread_create(&t, NULL, big_dir, &tx));
	big_dir(&rx);
	CHECK(!pthread_join(t, NULL));
}

static void server(int ready_fd)
{
	struct sockaddr_in a = addr_of(port), peer;
	socklen_t len = sizeof(peer);
	int l, s, v = 1, pfd[2];
	struct pollfd p[2];
	uint8_t *map, c;
	long long t0;
	size_t i;

	role = "server";
	l = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0);
	CHECK(!rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)));
	v = 4;
	CHECK(!rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof(v)));
	CHECK(!rbind(l, (struct sockaddr *)&a, sizeof(a)));
	CHECK(!rlisten(l, 4));
	/* a non-blocking listener with nobody connecting: EAGAIN, and rpoll
	 * times out */
	CHECK(!rfcntl(l, F_SETFL, O_NONBLOCK));
	CHECK(raccept(l, NULL, NULL) < 0 && errno == EAGAIN);
	p[0].fd = l;
	p[0].events = POLLIN;
	t0 = ms_now();
	CHECK(rpoll(p, 1, 150) == 0);
	CHECK(ms_now() - t0 >= 140);
	CHECK(write(ready_fd, "r", 1) == 1);
	/* the client connects: POLLIN on the listener */
	CHECK(rpoll(p, 1, 20000) == 1 && (p[0].revents & POLLIN));
	s = raccept(l, (struct sockaddr *)&peer, &len);
	CHECK(s >= 0);
	CHECK(peer.sin_family == AF_INET && peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));

	/* rpoll over the rsocket and a pipe: the pipe wakes it, with a
	 * timeout long enough to tell */
	CHECK(!pipe(pfd));
	p[0].fd = s;
	p[0].events = POLLIN;
	p[1].fd = pfd[0];
	p[1].events = POLLIN;
	t0 = ms_now();
	CHECK(rpoll(p, 2, 100) == 0);
	CHECK(ms_now() - t0 >= 90);
	CHECK(write(pfd[1], "x", 1) == 1);
	CHECK(rpoll(p, 2, 5000) == 1 && p[1].revents == POLLIN && !p[0].revents);
	close(pfd[0]);
	close(pfd[1]);

	/* non-blocking rrecv with nothing there */
	CHECK(!rfcntl(s, F_SETFL, O_NONBLOCK));
	CHECK(rrecv(s, &c, 1, 0) < 0 && errno == EAGAIN);
	CHECK(!rfcntl(s, F_SETFL, 0));
	xfer_all(s, "go", 2, true);

	/* the client fills our ring non-blocking until EAGAIN; we drain it */
	xfer_all(s, &c, 1, false);
	CHECK(c == 'F');
	{
		uint64_t total;
		uint8_t *buf = malloc(1 << 20);
		size_t got = 0;

		CHECK(buf);
		xfer_all(s, &total, sizeof(total), false);
		CHECK(total == FILL);
		usleep(200000);
		while (got < total) {
			size_t n = total - got < (1 << 20) ? total - got : (1 << 20);

			xfer_all(s, buf, n, false);
			for (i = 0; i < n; i++)
				CHECK(buf[i] == pat(got + i, 9));
			got += n;
		}
		free(buf);
	}

	big_both_ways(s, true);

	/* riowrite: the client writes into our mapping, then says so */
	map = mmap(NULL, IOMAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(map != MAP_FAILED);
	memset(map, 0, IOMAP);
	CHECK(riomap(s, map, IOMAP, PROT_WRITE, 0, 0) == 0);
	xfer_all(s, "m", 1, true);
	xfer_all(s, &c, 1, false);
	CHECK(c == 'w');
	for (i = 0; i < IOMAP; i++)
		CHECK(map[i] == pat(i, 5));
	CHECK(!riounmap(s, map, IOMAP));

	/* the client closes: end of stream, then POLLIN|POLLHUP stays */
	CHECK(rrecv(s, &c, 1, 0) == 0);
	p[0].fd = s;
	p[0].events = POLLIN;
	CHECK(rpoll(p, 1, 5000) == 1 && (p[0].revents & POLLIN));
	CHECK(rrecv(s, &c, 1, 0) == 0);
	CHECK(!rclose(s));
	CHECK(!rclose(l));
	printf("server: PASS\n");
}

static void client(int ready_fd)
{
	struct sockaddr_in a = addr_of(port), none = addr_of(port + 1), me, peer;
	socklen_t len;
	int s, v;
	uint8_t c, *buf;
	size_t i, sent = 0;
	uint64_t total;
	long long t0;
	int eagain = 0;

	role = "client";
	/* nobody listens on port + 1 */
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	t0 = ms_now();
	CHECK(rconnect(s, (struct sockaddr *)&none, sizeof(none)) < 0 && errno == ECONNREFUSED);
	CHECK(ms_now() - t0 < 5000);
	CHECK(!rclose(s));

	CHECK(read(ready_fd, &c, 1) == 1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	v = 1 << 16; /* a small staging ring: more pieces */
	CHECK(!rsetsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)));
	/* a non-blocking connect: EINPROGRESS, then POLLOUT and SO_ERROR 0 */
	CHECK(!rfcntl(s, F_SETFL, O_NONBLOCK));
	CHECK(rconnect(s, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == EINPROGRESS);
	{
		struct pollfd p = {.fd = s, .events = POLLOUT};
		int err = -1;

		len = sizeof(err);
		CHECK(rpoll(&p, 1, 20000) == 1 && (p.revents & POLLOUT));
		CHECK(!rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) && err == 0);
	}
	CHECK(!rfcntl(s, F_SETFL, 0));
	len = sizeof(me);
	CHECK(!rgetsockname(s, (struct sockaddr *)&me, &len) && me.sin_family == AF_INET);
	len = sizeof(peer);
	CHECK(!rgetpeername(s, (struct sockaddr *)&peer, &len));
	CHECK(peer.sin_port == htons((uint16_t)port));
	xfer_all(s, &c, 1, false);
	CHECK(c == 'g');
	xfer_all(s, &c, 1, false);
	CHECK(c == 'o');

	/* fill the server's ring without blocking: EAGAIN comes (the server
	 * reads only after 200 ms), then rpoll POLLOUT once it reads */
	buf = malloc(FILL);
	CHECK(buf);
	for (i = 0; i < FILL; i++)
		buf[i] = pat(i, 9);
	xfer_all(s, "F", 1, true);
	total = FILL;
	xfer_all(s, &total, sizeof(total), true);
	CHECK(!rfcntl(s, F_SETFL, O_NONBLOCK));
	while (sent < FILL) {
		ssize_t n = rsend(s, buf + sent, FILL - sent, 0);

		if (n < 0) {
			struct pollfd p = {.fd = s, .events = POLLOUT};

			CHECK(errno == EAGAIN);
			eagain++;
			CHECK(rpoll(&p, 1, 20000) == 1 && (p.revents & POLLOUT));
			continue;
		}
		sent += (size_t)n;
	}
	CHECK(eagain > 0);
	CHECK(!rfcntl(s, F_SETFL, 0));
	free(buf);

	big_both_ways(s, false);

	/* riowrite into the server's mapping once it says it is there */
	xfer_all(s, &c, 1, false);
	CHECK(c == 'm');
	buf = malloc(IOMAP);
	CHECK(buf);
	for (i = 0; i < IOMAP; i++)
		buf[i] = pat(i, 5);
	for (sent = 0; sent < IOMAP;) {
		size_t n = riowrite(s, buf + sent, IOMAP - sent, (off_t)sent, 0);

		CHECK(n != (size_t)-1 && n > 0);
		sent += n;
	}
	CHECK(riowrite(s, buf, 1, IOMAP + 10, 0) == (size_t)-1 && errno == EINVAL);
	xfer_all(s, "w", 1, true);
	free(buf);
	CHECK(!rshutdown(s, SHUT_RDWR));
	CHECK(!rclose(s));
	printf("client: PASS (%d EAGAINs)\n", eagain);
	exit(0);
}

int main(int argc, char **argv)
{
	int sv[2], st;
	pid_t pid;

	port = argc > 1 ? atoi(argv[1]) : 20000 + (int)(getpid() % 19999);
	setvbuf(stdout, NULL, _IONBF, 0);
	if (pipe(sv))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		close(sv[1]);
		client(sv[0]);
		return 0;
	}
	close(sv[0]);
	server(sv[1]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "client failed (status %x)\n", st);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
