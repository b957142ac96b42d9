/*
 * What softrdma's libibverbs offers its own librdmacm beyond the verbs ABI,
 * without exporting a symbol (the ABI check allows none beyond rdma-core
 * 44's): a table that the context's verbs_context.priv points at.  In
 * rdma-core that pointer is the library's private state, which programs
 * and the public headers' inline functions never read.  librdmacm uses it
 * when the daemon moved a QP for it inside a CM request (conn.c), so that
 * the library's view of the QP stays what ibv_modify_qp would have left,
 * and to create a QP and move it to INIT in one request (qp.c).
 */
#ifndef SR_VERBS_CM_HOOKS_H
#define SR_VERBS_CM_HOOKS_H

#include <stdint.h>

#include <infiniband/verbs.h>

#define SR_VERBS_HOOKS_MAGIC 0x73726b32u /* "srk2": changes with the table */

struct sr_verbs_hooks {
	uint32_t magic;
	/* The QP was moved by the daemon on another library's request, from
	 * state was: takes its new state (ibv_qp.state) from the shared
	 * state and does what ibv_modify_qp does after the daemon's reply. */
	void (*qp_moved)(struct ibv_qp *qp, enum ibv_qp_state was);
	/* ibv_create_qp_ex, with the modify (attr, mask) made on the new QP
	 * in the same round trip: rdma_create_qp's INIT.  The QP's state
	 * (ibv_qp.state) says whether it was made (a new QP nobody can have
	 * locked: as a rule it is); a modify the QP cannot take fails the
	 * whole call with errno, creating nothing. */
	struct ibv_qp *(*create_qp_init)(struct ibv_context *context,
					 struct ibv_qp_init_attr_ex *attr,
					 const struct ibv_qp_attr *init, int init_mask);
};

/* The table of a context of softrdma's libibverbs, or NULL. */
static inline const struct sr_verbs_hooks *sr_verbs_hooks_of(struct ibv_context *c)
{
	struct verbs_context *v = c ? verbs_get_ctx(c) : NULL;
	const struct sr_verbs_hooks *h = v ? (const void *)v->priv : NULL;

	return h && h->magic == SR_VERBS_HOOKS_MAGIC ? h : NULL;
}

#endif
