/*
 * Record framing for the control socket (see msg.h): a thin, EINTR-safe
 * wrapper around sendmsg/recvmsg with SCM_RIGHTS descriptor passing.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/msg.h"

static int send_record(int sock, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SR_MSG_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds > SR_MSG_MAX_FDS)
		return -EINVAL;
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);

		if (n >= 0)
			return n == (ssize_t)len ? 0 : -EMSGSIZE;
		if (errno != EINTR)
			return -errno;
	}
}

int sr_msg_send(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	return send_record(sock, buf, len, fds, nfds, 0);
}

int sr_msg_try_send(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	return send_record(sock, buf, len, fds, nfds, MSG_DONTWAIT);
}

long sr_msg_recv(int sock, void *buf, size_t len, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SR_MSG_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.buf,
			    .msg_controllen = sizeof(cbuf.buf)};
	int cap = nfds ? *nfds : 0;
	ssize_t n;

	if (nfds)
		*nfds = 0;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[SR_MSG_MAX_FDS];

		memcpy(got, CMSG_DATA(c), sizeof(int) * cnt);
		for (int i = 0; i < cnt; i++) {
			if (nfds && *nfds < cap)
				fds[(*nfds)++] = got[i];
			else
				close(got[i]); /* more than the caller expects */
		}
	}
	if (mh.msg_flags & MSG_TRUNC)
		return -EMSGSIZE;
	return n;
}
