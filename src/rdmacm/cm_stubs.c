/*
 * Placeholder librdmacm.so.1: the complete rdma-core 44 librdmacm interface
 * (RDMACM_1.0 to 1.3, including rsockets) with the connection manager not
 * yet implemented.  Every program that links librdmacm (rdmacm-utils,
 * perftest, qperf, UCX, libfabric, pyverbs, librspreload) can load and run
 * its non-CM paths, and every CM call fails cleanly:
 * rdma_create_event_channel() and rdma_get_devices() report ENODEV, as
 * rdma-core does on a host without RDMA CM devices (UCX treats ENODEV/ENOENT
 * as "no CM devices" and carries on quietly), all other calls fail with ENOSYS
 * (-1, or (size_t)-1 for riowrite), the port getters report port 0, and
 * release calls accept anything this library could have returned (NULL).
 * rpoll()/rselect() work on ordinary descriptors, as rsockets' do: with no
 * rsockets in existence, every descriptor is an ordinary one.  Prototypes
 * come from <rdma/rdma_cma.h> and <rdma/rsocket.h> so the compiler checks
 * every signature.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

/* The failure of every CM and rsockets call: -1 with errno ENOSYS. */
static int not_implemented(void)
{
	errno = ENOSYS;
	return -1;
}

/* ------------------------------------------------------------------ */
/* device discovery and event channels                                */
/* ------------------------------------------------------------------ */

struct rdma_event_channel *rdma_create_event_channel(void)
{
	errno = ENODEV;
	return NULL;
}

/* No channel can exist; NULL (or anything else) is ignored. */
void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	errno = ENODEV;
	return NULL;
}

void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR:
		return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE:
		return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED:
		return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED:
		return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED:
		return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE:
		return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	default:
		return "UNKNOWN EVENT";
	}
}

/* ------------------------------------------------------------------ */
/* address resolution                                                 */
/* ------------------------------------------------------------------ */

int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	return not_implemented();
}

/*
 * rdma_getaddrinfo() never returns a list here, but free a well-formed one
 * completely anyway, so that this stays correct once it does.
 */
void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* ------------------------------------------------------------------ */
/* connection identifiers                                             */
/* ------------------------------------------------------------------ */

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	return not_implemented();
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	return not_implemented();
}

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	return not_implemented();
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return not_implemented();
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
		      int timeout_ms)
{
	return not_implemented();
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	return not_implemented();
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	return not_implemented();
}

int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *qp_init_attr)
{
	return not_implemented();
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	return not_implemented();
}

int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	return not_implemented();
}

void rdma_destroy_srq(struct rdma_cm_id *id)
{
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return not_implemented();
}

int rdma_establish(struct rdma_cm_id *id)
{
	return not_implemented();
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	return not_implemented();
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	return not_implemented();
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return not_implemented();
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return not_implemented();
}

int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return not_implemented();
}

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	return not_implemented();
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	return not_implemented();
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

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	return not_implemented();
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	return not_implemented();
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	return not_implemented();
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	return not_implemented();
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	return not_implemented();
}

int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return not_implemented();
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return not_implemented();
}

/* rdma-core returns port 0 for an id without a usable address. */
__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return 0;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return 0;
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
