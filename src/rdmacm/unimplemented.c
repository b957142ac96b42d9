/*
 * The part of librdmacm not implemented, failing cleanly: ECE (which a
 * RoCE device without ECE support reports as EOPNOTSUPP in rdma-core too).
 * Multicast is mcast.c, rsockets are rsocket*.c.  Prototypes come
 * from <rdma/rdma_cma.h> so the compiler checks every signature.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

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
