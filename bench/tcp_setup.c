/*
 * The floor for connection set-up (issue #11's bench row): what the
 * kernel's TCP takes to set up and tear down N connections on the same
 * path as cmtime's N rdma_cm connections, measured the way cmtime measures
 * its steps (all started at once, the step's time until the last is done).
 *   tcp_setup server PORT N        accept N connections, wait until each
 *                                  is closed by the client, exit
 *   tcp_setup client ADDR PORT N   N non-blocking connects at once; prints
 *                                  "connect: T ms" (until every socket is
 *                                  connected) and "disconnect: T ms" (from
 *                                  the first shutdown until the server's
 *                                  FIN has come back on every socket)
 * IPv4 only (the bench's addresses are).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int server(int port, int n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, got = 0, open_n = 0;

	if (l < 0 || !p)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, n))
		die("bind/listen");
	while (got < n) {
		int c = accept(l, NULL, NULL);

		if (c < 0)
			die("accept");
		p[got].fd = c;
		p[got++].events = POLLIN;
		open_n++;
	}
	/* each client shutdown reads as end of stream: close ours back */
	while (open_n) {
		if (poll(p, (nfds_t)n, -1) < 0)
			die("poll");
		for (int i = 0; i < n; i++) {
			char b;

			if (p[i].fd >= 0 && p[i].revents && read(p[i].fd, &b, 1) <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_n--;
			}
		}
	}
	close(l);
	return 0;
}

static int client(const char *addr, int port, int n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	double t0, t1;
	int left;

	if (!p || inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		die("address");
	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		p[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (p[i].fd < 0)
			die("socket");
		if (connect(p[i].fd, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS)
			die("connect");
		p[i].events = POLLOUT;
	}
	for (left = n; left;) {
		if (poll(p, (nfds_t)n, -1) < 0)
			die("poll");
		for (int i = 0; i < n; i++) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (!p[i].events || !p[i].revents)
				continue;
			if (getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
				errno = err;
				die("connect (async)");
			}
			p[i].events = 0;
			left--;
		}
	}
	t1 = now_ms();
	printf("connect: %.2f ms\n", t1 - t0);
	/* disconnect: our FIN out, the server's back (its read sees EOF) */
	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		shutdown(p[i].fd, SHUT_WR);
		p[i].events = POLLIN;
	}
	for (left = n; left;) {
		if (poll(p, (nfds_t)n, -1) < 0)
			die("poll");
		for (int i = 0; i < n; i++) {
			char b;

			if (p[i].events && p[i].revents && read(p[i].fd, &b, 1) <= 0) {
				p[i].events = 0;
				left--;
			}
		}
	}
	t1 = now_ms();
	printf("disconnect: %.2f ms\n", t1 - t0);
	for (int i = 0; i < n; i++)
		close(p[i].fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: tcp_setup server PORT N | client ADDR PORT N\n");
	return 2;
}
