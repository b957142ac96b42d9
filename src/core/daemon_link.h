/*
 * Finding, and if needed starting, the host's softrdmad.  Shared by the
 * library and the CLI.  Environment:
 *   SOFTRDMA_SOCKET   abstract socket name (default "softrdma-<uid>-<pidns>"); tests
 *                     use it to run isolated daemons side by side
 *   SOFTRDMA_DAEMON   daemon binary (default: ../bin/softrdmad next to the
 *                     library or CLI that asks, then PATH)
 *   SOFTRDMA_NO_SPAWN never start a daemon; fail with ECONNREFUSED
 * (<uid> is the effective uid.  A set-user-ID program ignores the first two
 * and never starts a daemon.)
 */
#ifndef SR_CORE_DAEMON_LINK_H
#define SR_CORE_DAEMON_LINK_H

#include <stdbool.h>
#include <stddef.h>

#include <softrdma/proto.h>

/* Connects to the daemon, starting it when absent and `spawn` is set.
 * `self` is any address inside the calling binary (to locate softrdmad).
 * Returns a SOCK_SEQPACKET fd or -errno. */
int sr_daemon_connect(bool spawn, const void *self);
/* HELLO on a fresh connection: fills *info and, if arena_fd is not NULL,
 * hands over the arena (else closes it).  Returns 0 or -errno: -EACCES
 * when the daemon belongs to another user (it refused us, or we refuse a
 * daemon not of our effective uid), -EXDEV for another pid namespace,
 * -EPROTO for another protocol version; in those cases `why` holds one line
 * that says so and names the socket (else why[0] = 0). */
int sr_daemon_hello(int sock, bool monitor, struct sr_dev_info *info, int *arena_fd, char *why,
		    size_t whylen);
/* Fills buf with the abstract socket name (without the leading NUL). */
void sr_daemon_socket_name(char *buf, unsigned len);
/* Path of the daemon binary next to `self` (or from the environment). */
void sr_daemon_path(const void *self, char *buf, unsigned len);

#endif
