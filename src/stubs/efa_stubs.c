/*
 * Stub libefa.so.1.  perftest, libfabric and pyverbs' efa module NEED
 * libefa.so.1 and are linked BIND_NOW, so the six efadv_* symbols (EFA_1.0 to
 * EFA_1.2) must exist before they can start.  softrdma has no AWS EFA
 * device, so each call reports "not supported" as the real library does for
 * a non-EFA device: efadv_query_device()/efadv_query_ah() return EOPNOTSUPP
 * (rdma-core returns positive errno values) with errno also set, and the
 * object-returning calls return NULL with errno = EOPNOTSUPP.  Prototypes
 * come from <infiniband/efadv.h>, so the compiler checks every signature.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/efadv.h>

/* rdma-core convention for int-returning calls: a positive errno value. */
static int unsupported(void)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

static void *unsupported_ptr(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* EFA_1.0 */
struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *ibvpd, struct ibv_qp_init_attr *attr,
				      uint32_t driver_qp_type)
{
	return unsupported_ptr();
}

/* EFA_1.1 */
struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx, struct ibv_qp_init_attr_ex *attr_ex,
				  struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
	return unsupported_ptr();
}

int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen)
{
	return unsupported();
}

int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr, uint32_t inlen)
{
	return unsupported();
}

/* EFA_1.2 */
struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ibvcqx)
{
	return unsupported_ptr();
}

struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ibvctx, struct ibv_cq_init_attr_ex *attr_ex,
				  struct efadv_cq_init_attr *efa_attr, uint32_t inlen)
{
	return unsupported_ptr();
}
