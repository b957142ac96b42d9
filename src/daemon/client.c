/*
 * A client connection of softrdmad: accepting it, dispatching each record
 * it sends (with the descriptors that came with it) to the request
 * handlers, and dropping it, which reclaims everything it held.  main.c's
 * poll loop and the control-socket fuzzer (tests/fuzz) both go through
 * these functions, so the fuzzer drives exactly what a socket does.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/msg.h"
#include "daemon/daemon.h"

struct sr_client *sr_client_add(struct sr_daemon *d, int sock, pid_t pid)
{
	struct sr_client *c;
	char path[64];
	int cfd;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sock = sock;
	c->pid = pid;
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
	return c;
}

void sr_client_drop(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_client **pp;

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

int sr_client_record(struct sr_daemon *d, struct sr_client *c, const void *buf, long n, int *fds,
		     int nfds)
{
	struct sr_req req;

	if (n <= 0) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		sr_client_drop(d, c);
		return -1;
	}
	if ((size_t)n < offsetof(struct sr_req, u)) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return 0;
	}
	if ((size_t)n > sizeof(req))
		n = sizeof(req);
	memcpy(&req, buf, n);
	if ((size_t)n < sizeof(req))
		memset((char *)&req + n, 0, sizeof(req) - n);
	sr_handle_request(d, c, &req, fds, nfds);
	return 0;
}

int sr_client_serve(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_req req;
	int fds[SR_MSG_MAX_FDS];
	int nfds = SR_MSG_MAX_FDS;
	long n;

	n = sr_msg_recv(c->sock, &req, sizeof(req), fds, &nfds);
	return sr_client_record(d, c, &req, n, fds, nfds);
}
