/*
 * The parts of librdmacm not implemented yet, failing cleanly: multicast
 * joins, and ECE (which a RoCE device without ECE support reports as
 * EOPNOTSUPP in rdma-core too).  rsockets are rsocket*.c.  Prototypes come
 * from <rdma/rdma_cma.h> so the compiler checks every signature.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

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
