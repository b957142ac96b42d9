/*
 * The side channel of the two-host test programs (xfer.c, mcast.c): a TCP
 * connection between client and server for exchanging set-up records, as
 * perftest does, and the tests' fatal-error macro.
 */
#ifndef SR_TWOHOST_SIDE_H
#define SR_TWOHOST_SIDE_H

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DIE(...)                                                                                   \
	do {                                                                                       \
		fprintf(stderr, "%s: ", program_invocation_short_name);                            \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

/* Exchanges len bytes each way. */
static inline void xchg(int sock, void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len)
		DIE("side channel write: %s", strerror(errno));
	for (size_t got = 0; got < len;) {
		ssize_t r = read(sock, (char *)in + got, len - got);

		if (r <= 0)
			DIE("side channel read: %s", r ? strerror(errno) : "closed");
		got += (size_t)r;
	}
}

/* Connects to host:port (client) or accepts one connection on port (host NULL). */
static inline int side_channel(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = host ? 0 : AI_PASSIVE};
	struct addrinfo *ai;
	int s, one = 1;

	if (getaddrinfo(host, port, &hints, &ai))
		DIE("getaddrinfo %s", host ? host : "");
	s = socket(ai->ai_family, SOCK_STREAM, 0);
	if (s < 0)
		DIE("socket");
	if (host) {
		if (connect(s, ai->ai_addr, ai->ai_addrlen))
			DIE("connect %s: %s", host, strerror(errno));
	} else {
		int l;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 1))
			DIE("bind/listen: %s", strerror(errno));
		l = accept(s, NULL, NULL);
		if (l < 0)
			DIE("accept");
		close(s);
		s = l;
	}
	freeaddrinfo(ai);
	return s;
}

#endif
