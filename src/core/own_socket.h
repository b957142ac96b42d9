/*
 * The libraries' own sockets (the wire socket a process sends its RoCEv2
 * datagrams from, the link to the daemon), made with the system call
 * itself rather than through libc's socket(), which the application may
 * interpose.  librspreload does, for every socket of the process: it made
 * the wire socket a datagram rsocket and handed back its placeholder, an
 * fd of /dev/null, so that every datagram a receive half or a posting
 * thread sent failed with ENOTSOCK (iperf3 under librspreload across
 * hosts: a receive half's ACKs never left, and the peer resent one PSN
 * until its retries ran out).  A socket made so is an ordinary fd to such
 * a shim (it is in none of its tables), so the calls made on it later
 * (setsockopt, bind, sendmmsg, close) reach the kernel as they are.
 */
#ifndef SR_CORE_OWN_SOCKET_H
#define SR_CORE_OWN_SOCKET_H

#include <sys/syscall.h>
#include <unistd.h>

/* socket(2) past any interposer: the fd, or -1 with errno set. */
static inline int sr_own_socket(int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}

#endif
