/*
 * Record framing for the control socket: one sendmsg/recvmsg per record,
 * with optional file descriptors passed as SCM_RIGHTS.
 */
#ifndef SR_CORE_MSG_H
#define SR_CORE_MSG_H

#include <stddef.h>

#define SR_MSG_MAX_FDS 32

/* Returns 0 or -errno. */
int sr_msg_send(int sock, const void *buf, size_t len, const int *fds, int nfds);
/* The same, never blocking: -EAGAIN when the socket has no room. */
int sr_msg_try_send(int sock, const void *buf, size_t len, const int *fds, int nfds);
/* Returns bytes received (0 = peer closed) or -errno; *nfds in: capacity,
 * out: number received.  Received fds are O_CLOEXEC. */
long sr_msg_recv(int sock, void *buf, size_t len, int *fds, int *nfds);

#endif
