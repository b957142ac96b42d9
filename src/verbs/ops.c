/*
 * The context's operation tables.  Inline functions in <infiniband/verbs.h>
 * jump through these slots, some without a NULL check (ibv_close_xrcd,
 * ibv_bind_mw, the cq_ex/qp_ex wrappers), so every slot is filled: with our
 * implementation where softrdma has one, else with a dummy of the exact
 * signature that fails with EOPNOTSUPP, as rdma-core's verbs_dummy_ops do.
 */
#include <errno.h>
#include <stddef.h>
#include <time.h>

#include "verbs/cm_hooks.h"
#include "verbs/internal.h"

#define UNSUPPORTED_PTR                                                                            \
	do {                                                                                       \
		errno = EOPNOTSUPP;                                                                \
		return NULL;                                                                       \
	} while (0)

static struct ibv_mr *dummy_alloc_null_mr(struct ibv_pd *pd)
{
	UNSUPPORTED_PTR;
}

static int dummy_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			   struct ibv_sge *sg_list, uint32_t num_sges)
{
	return EOPNOTSUPP;
}

static int dummy_read_counters(struct ibv_counters *c, uint64_t *v, uint32_t n, uint32_t flags)
{
	return EOPNOTSUPP;
}

static int dummy_attach_counters_point_flow(struct ibv_counters *c,
					    struct ibv_counter_attach_attr *a, struct ibv_flow *f)
{
	return EOPNOTSUPP;
}

static struct ibv_counters *dummy_create_counters(struct ibv_context *ctx,
						  struct ibv_counters_init_attr *a)
{
	UNSUPPORTED_PTR;
}

static int dummy_destroy_counters(struct ibv_counters *c)
{
	return EOPNOTSUPP;
}

static struct ibv_mr *dummy_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off,
				      size_t len, unsigned int access)
{
	UNSUPPORTED_PTR;
}

static struct ibv_dm *dummy_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *a)
{
	UNSUPPORTED_PTR;
}

static int dummy_free_dm(struct ibv_dm *dm)
{
	return EOPNOTSUPP;
}

static int dummy_modify_flow_action_esp(struct ibv_flow_action *a,
					struct ibv_flow_action_esp_attr *attr)
{
	return EOPNOTSUPP;
}

static int dummy_destroy_flow_action(struct ibv_flow_action *a)
{
	return EOPNOTSUPP;
}

static struct ibv_flow_action *dummy_create_flow_action_esp(struct ibv_context *ctx,
							    struct ibv_flow_action_esp_attr *a)
{
	UNSUPPORTED_PTR;
}

static int dummy_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *a)
{
	return EOPNOTSUPP;
}

static struct ibv_pd *dummy_alloc_parent_domain(struct ibv_context *ctx,
						struct ibv_parent_domain_init_attr *a)
{
	UNSUPPORTED_PTR;
}

static int dummy_dealloc_td(struct ibv_td *td)
{
	return EOPNOTSUPP;
}

static struct ibv_td *dummy_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *a)
{
	UNSUPPORTED_PTR;
}

static int dummy_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op, struct ibv_ops_wr **bad)
{
	if (bad)
		*bad = op;
	return EOPNOTSUPP;
}

static int dummy_destroy_rwq_ind_table(struct ibv_rwq_ind_table *t)
{
	return EOPNOTSUPP;
}

static struct ibv_rwq_ind_table *dummy_create_rwq_ind_table(struct ibv_context *ctx,
							    struct ibv_rwq_ind_table_init_attr *a)
{
	UNSUPPORTED_PTR;
}

static int dummy_destroy_wq(struct ibv_wq *wq)
{
	return EOPNOTSUPP;
}

static int dummy_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a)
{
	return EOPNOTSUPP;
}

static struct ibv_wq *dummy_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *a)
{
	UNSUPPORTED_PTR;
}

static int query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values)
{
	struct timespec ts;

	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK)
		values->raw_clock = ts;
	return 0;
}

static int dummy_destroy_flow(struct ibv_flow *flow)
{
	return EOPNOTSUPP;
}

static struct ibv_flow *dummy_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	UNSUPPORTED_PTR;
}

static int compat_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return ibv_query_device(ctx, attr);
}

static int compat_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *a)
{
	return sr_query_port(ctx, port, (struct ibv_port_attr *)a,
			     offsetof(struct ibv_port_attr, port_cap_flags2));
}

static void *compat_placeholder(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_flow *abi_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	UNSUPPORTED_PTR;
}

/* librdmacm's way in, through verbs_context.priv (cm_hooks.h) */
static const struct sr_verbs_hooks sr_cm_hooks = {
    .magic = SR_VERBS_HOOKS_MAGIC,
    .qp_moved = sr_qp_moved_elsewhere,
    .create_qp_init = sr_create_qp_init,
};

void sr_ctx_set_ops(struct sr_context *ctx)
{
	struct verbs_context *v = &ctx->vctx;
	struct ibv_context_ops *o = &v->context.ops;

	o->_compat_query_device = compat_query_device;
	o->_compat_query_port = compat_query_port;
	o->_compat_alloc_pd = compat_placeholder;
	o->_compat_dealloc_pd = compat_placeholder;
	o->_compat_reg_mr = compat_placeholder;
	o->_compat_rereg_mr = compat_placeholder;
	o->_compat_dereg_mr = compat_placeholder;
	o->alloc_mw = sr_alloc_mw;
	o->bind_mw = sr_bind_mw;
	o->dealloc_mw = sr_dealloc_mw;
	o->_compat_create_cq = compat_placeholder;
	o->poll_cq = sr_poll_cq;
	o->req_notify_cq = sr_req_notify_cq;
	o->_compat_cq_event = compat_placeholder;
	o->_compat_resize_cq = compat_placeholder;
	o->_compat_destroy_cq = compat_placeholder;
	o->_compat_create_srq = compat_placeholder;
	o->_compat_modify_srq = compat_placeholder;
	o->_compat_query_srq = compat_placeholder;
	o->_compat_destroy_srq = compat_placeholder;
	o->post_srq_recv = sr_post_srq_recv;
	o->_compat_create_qp = compat_placeholder;
	o->_compat_query_qp = compat_placeholder;
	o->_compat_modify_qp = compat_placeholder;
	o->_compat_destroy_qp = compat_placeholder;
	o->post_send = sr_post_send;
	o->post_recv = sr_post_recv;
	o->_compat_create_ah = compat_placeholder;
	o->_compat_destroy_ah = compat_placeholder;
	o->_compat_attach_mcast = compat_placeholder;
	o->_compat_detach_mcast = compat_placeholder;
	o->_compat_async_event = compat_placeholder;

	v->query_port = sr_query_port;
	v->advise_mr = dummy_advise_mr;
	v->alloc_null_mr = dummy_alloc_null_mr;
	v->read_counters = dummy_read_counters;
	v->attach_counters_point_flow = dummy_attach_counters_point_flow;
	v->create_counters = dummy_create_counters;
	v->destroy_counters = dummy_destroy_counters;
	v->reg_dm_mr = dummy_reg_dm_mr;
	v->alloc_dm = dummy_alloc_dm;
	v->free_dm = dummy_free_dm;
	v->modify_flow_action_esp = dummy_modify_flow_action_esp;
	v->destroy_flow_action = dummy_destroy_flow_action;
	v->create_flow_action_esp = dummy_create_flow_action_esp;
	v->modify_qp_rate_limit = dummy_modify_qp_rate_limit;
	v->alloc_parent_domain = dummy_alloc_parent_domain;
	v->dealloc_td = dummy_dealloc_td;
	v->alloc_td = dummy_alloc_td;
	v->modify_cq = sr_cq_modify;
	v->post_srq_ops = dummy_post_srq_ops;
	v->destroy_rwq_ind_table = dummy_destroy_rwq_ind_table;
	v->create_rwq_ind_table = dummy_create_rwq_ind_table;
	v->destroy_wq = dummy_destroy_wq;
	v->modify_wq = dummy_modify_wq;
	v->create_wq = dummy_create_wq;
	v->query_rt_values = query_rt_values;
	v->create_cq_ex = sr_create_cq_ex;
	v->priv = (struct verbs_ex_private *)(uintptr_t)&sr_cm_hooks;
	v->query_device_ex = sr_query_device_ex;
	v->ibv_destroy_flow = dummy_destroy_flow;
	v->ABI_placeholder2 = (void (*)(void))dummy_destroy_flow; /* old binaries' destroy_flow */
	v->ibv_create_flow = dummy_create_flow;
	v->ABI_placeholder1 = (void (*)(void))abi_create_flow; /* old binaries' create_flow */
	v->open_qp = sr_open_qp;
	v->create_qp_ex = sr_create_qp_ex;
	v->get_srq_num = sr_get_srq_num;
	v->create_srq_ex = sr_create_srq_ex;
	v->open_xrcd = sr_open_xrcd;
	v->close_xrcd = sr_close_xrcd;
}
