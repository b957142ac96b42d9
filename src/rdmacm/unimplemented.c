/*
 * The parts of librdmacm not implemented yet, failing cleanly: rsockets
 * (every call -1/ENOSYS, riowrite (size_t)-1; rpoll()/rselect() work on
 * ordinary descriptors, which with no rsockets in existence are all there
 * is), multicast joins, and ECE (which a RoCE device without ECE support
 * reports as EOPNOTSUPP in rdma-core too).  Prototypes come from
 * <rdma/rdma_cma.h> and <rdma/rsocket.h> so the compiler checks every
 * signature.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

static int not_implemented(void)
{
	errno = ENOSYS;
	return -1;
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return not_implemented();
}

int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
			   void *context)
{
	return not_implemented();
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return not_implemented();
}

int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return -1;
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return -1;
}

/* ------------------------------------------------------------------ */
/* rsockets                                                           */
/* ------------------------------------------------------------------ */

int rsocket(int domain, int type, int protocol)
{
	return not_implemented();
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return not_implemented();
}

int rlisten(int socket, int backlog)
{
	return not_implemented();
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return not_implemented();
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return not_implemented();
}

int rshutdown(int socket, int how)
{
	return not_implemented();
}

int rclose(int socket)
{
	return not_implemented();
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	return not_implemented();
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
		  socklen_t *addrlen)
{
	return not_implemented();
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	return not_implemented();
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	return not_implemented();
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	return not_implemented();
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	return not_implemented();
}

ssize_t rread(int socket, void *buf, size_t count)
{
	return not_implemented();
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return not_implemented();
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return not_implemented();
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return not_implemented();
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return not_implemented();
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return not_implemented();
}

int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	return not_implemented();
}

int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	return not_implemented();
}

int riounmap(int socket, void *buf, size_t len)
{
	return not_implemented();
}

int rfcntl(int socket, int cmd, ...)
{
	errno = ENOSYS;
	return -1;
}

off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	errno = ENOSYS;
	return -1;
}

/* rsockets reports a failed riowrite() as (size_t)-1. */
size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	errno = ENOSYS;
	return (size_t)-1;
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}
