/*
 * Stub libmlx5.so.1.  perftest, UCX's libuct_ib and pyverbs' mlx5 modules
 * NEED libmlx5.so.1 and are linked BIND_NOW, so every mlx5dv_* symbol they
 * import (with its MLX5_1.x version) must exist before they can even start.
 * softrdma has no mlx5 hardware, so this library exports the complete
 * rdma-core 44 libmlx5 interface and every entry point reports "not
 * supported" the way the real library does for a non-mlx5 device:
 * mlx5dv_is_supported() is false, int-returning calls return EOPNOTSUPP
 * (rdma-core returns positive errno values) with errno also set, calls that
 * create objects return NULL with errno = EOPNOTSUPP, release calls do
 * nothing, and the few calls with other conventions (a byte count, a file
 * descriptor, a -errno count) are written out individually.  Prototypes come
 * from <infiniband/mlx5dv.h>, so the compiler checks every signature.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <infiniband/mlx5dv.h>

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

/* MLX5_1.0 */
int mlx5dv_query_device(struct ibv_context *ctx_in, struct mlx5dv_context *attrs_out)
{
	return unsupported();
}

/* MLX5_1.1 */
struct ibv_cq_ex *mlx5dv_create_cq(struct ibv_context *context, struct ibv_cq_init_attr_ex *cq_attr,
				   struct mlx5dv_cq_init_attr *mlx5_cq_attr)
{
	return unsupported_ptr();
}

/* MLX5_1.2 */
/*
 * mlx5dv_init_obj has two versions in rdma-core: the current @@MLX5_1.2 and
 * an older @MLX5_1.0 kept for binaries built before MLX5_1.2 (libmlx5.map
 * lists the name in both nodes).  Both fail the same way here; __typeof__
 * checks the internal names against the header's prototype.
 */
__typeof__(mlx5dv_init_obj) mlx5dv_init_obj_1_0, mlx5dv_init_obj_1_2;
__asm__(".symver mlx5dv_init_obj_1_0, mlx5dv_init_obj@MLX5_1.0");
__asm__(".symver mlx5dv_init_obj_1_2, mlx5dv_init_obj@@MLX5_1.2");

int mlx5dv_init_obj_1_0(struct mlx5dv_obj *obj, uint64_t obj_type)
{
	return unsupported();
}

int mlx5dv_init_obj_1_2(struct mlx5dv_obj *obj, uint64_t obj_type)
{
	return unsupported();
}

int mlx5dv_set_context_attr(struct ibv_context *context, enum mlx5dv_set_ctx_attr_type type,
			    void *attr)
{
	return unsupported();
}

/* MLX5_1.3 */
struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context, struct ibv_qp_init_attr_ex *qp_attr,
				struct mlx5dv_qp_init_attr *mlx5_qp_attr)
{
	return unsupported_ptr();
}

struct ibv_wq *mlx5dv_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr,
				struct mlx5dv_wq_init_attr *mlx5_wq_attr)
{
	return unsupported_ptr();
}

/* MLX5_1.4 */
int mlx5dv_get_clock_info(struct ibv_context *context, struct mlx5dv_clock_info *clock_info)
{
	return unsupported();
}

/* MLX5_1.5 */
struct ibv_flow_action *mlx5dv_create_flow_action_esp(struct ibv_context *ctx,
						      struct ibv_flow_action_esp_attr *esp,
						      struct mlx5dv_flow_action_esp *mlx5_attr)
{
	return unsupported_ptr();
}

/* MLX5_1.6 */
struct ibv_flow *mlx5dv_create_flow(struct mlx5dv_flow_matcher *matcher,
				    struct mlx5dv_flow_match_parameters *match_value,
				    size_t num_actions,
				    struct mlx5dv_flow_action_attr actions_attr[])
{
	return unsupported_ptr();
}

struct mlx5dv_flow_matcher *
mlx5dv_create_flow_matcher(struct ibv_context *context,
			   struct mlx5dv_flow_matcher_attr *matcher_attr)
{
	return unsupported_ptr();
}

int mlx5dv_destroy_flow_matcher(struct mlx5dv_flow_matcher *matcher)
{
	return unsupported();
}

/* MLX5_1.7 */
struct ibv_flow_action *
mlx5dv_create_flow_action_modify_header(struct ibv_context *ctx, size_t actions_sz,
					uint64_t actions[],
					enum mlx5_ib_uapi_flow_table_type ft_type)
{
	return unsupported_ptr();
}

struct ibv_flow_action *mlx5dv_create_flow_action_packet_reformat(
    struct ibv_context *ctx, size_t data_sz, void *data,
    enum mlx5_ib_uapi_flow_action_packet_reformat_type reformat_type,
    enum mlx5_ib_uapi_flow_table_type ft_type)
{
	return unsupported_ptr();
}

struct mlx5dv_devx_uar *mlx5dv_devx_alloc_uar(struct ibv_context *context, uint32_t flags)
{
	return unsupported_ptr();
}

void mlx5dv_devx_free_uar(struct mlx5dv_devx_uar *devx_uar)
{
}

int mlx5dv_devx_general_cmd(struct ibv_context *context, const void *in, size_t inlen, void *out,
			    size_t outlen)
{
	return unsupported();
}

struct mlx5dv_devx_obj *mlx5dv_devx_obj_create(struct ibv_context *context, const void *in,
					       size_t inlen, void *out, size_t outlen)
{
	return unsupported_ptr();
}

int mlx5dv_devx_obj_destroy(struct mlx5dv_devx_obj *obj)
{
	return unsupported();
}

int mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen, void *out,
			   size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_obj_query(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen, void *out,
			  size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_query_eqn(struct ibv_context *context, uint32_t vector, uint32_t *eqn)
{
	return unsupported();
}

int mlx5dv_devx_umem_dereg(struct mlx5dv_devx_umem *umem)
{
	return unsupported();
}

struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg(struct ibv_context *ctx, void *addr, size_t size,
					      uint32_t access)
{
	return unsupported_ptr();
}

struct ibv_context *mlx5dv_open_device(struct ibv_device *device, struct mlx5dv_context_attr *attr)
{
	return unsupported_ptr();
}

/* MLX5_1.8 */
int mlx5dv_devx_cq_modify(struct ibv_cq *cq, const void *in, size_t inlen, void *out, size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_cq_query(struct ibv_cq *cq, const void *in, size_t inlen, void *out, size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_ind_tbl_modify(struct ibv_rwq_ind_table *ind_tbl, const void *in, size_t inlen,
			       void *out, size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_ind_tbl_query(struct ibv_rwq_ind_table *ind_tbl, const void *in, size_t inlen,
			      void *out, size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_qp_modify(struct ibv_qp *qp, const void *in, size_t inlen, void *out, size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_qp_query(struct ibv_qp *qp, const void *in, size_t inlen, void *out, size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_srq_modify(struct ibv_srq *srq, const void *in, size_t inlen, void *out,
			   size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_srq_query(struct ibv_srq *srq, const void *in, size_t inlen, void *out,
			  size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_wq_modify(struct ibv_wq *wq, const void *in, size_t inlen, void *out, size_t outlen)
{
	return unsupported();
}

int mlx5dv_devx_wq_query(struct ibv_wq *wq, const void *in, size_t inlen, void *out, size_t outlen)
{
	return unsupported();
}

/* No softrdma device is an mlx5 device. */
bool mlx5dv_is_supported(struct ibv_device *device)
{
	return false;
}

/* MLX5_1.9 */
struct mlx5dv_devx_cmd_comp *mlx5dv_devx_create_cmd_comp(struct ibv_context *context)
{
	return unsupported_ptr();
}

void mlx5dv_devx_destroy_cmd_comp(struct mlx5dv_devx_cmd_comp *cmd_comp)
{
}

int mlx5dv_devx_get_async_cmd_comp(struct mlx5dv_devx_cmd_comp *cmd_comp,
				   struct mlx5_ib_uapi_devx_async_cmd_hdr *cmd_resp,
				   size_t cmd_resp_len)
{
	return unsupported();
}

int mlx5dv_devx_obj_query_async(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
				size_t outlen, uint64_t wr_id,
				struct mlx5dv_devx_cmd_comp *cmd_comp)
{
	return unsupported();
}

/* MLX5_1.10 */
struct ibv_dm *mlx5dv_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *dm_attr,
			       struct mlx5dv_alloc_dm_attr *mlx5_dm_attr)
{
	return unsupported_ptr();
}

struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *mkey_init_attr)
{
	return unsupported_ptr();
}

int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey)
{
	return unsupported();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_ibv_qp(struct ibv_qp *ibqp)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_table(struct mlx5dv_dr_table *table)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_vport(struct mlx5dv_dr_domain *domain,
							    uint32_t vport)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_drop(void)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_flow_counter(struct mlx5dv_devx_obj *devx_obj,
							      uint32_t offset)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_modify_header(struct mlx5dv_dr_domain *domain,
							       uint32_t flags, size_t actions_sz,
							       __be64 actions[])
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_packet_reformat(
    struct mlx5dv_dr_domain *domain, uint32_t flags,
    enum mlx5_ib_uapi_flow_action_packet_reformat_type reformat_type, size_t data_sz, void *data)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_tag(uint32_t tag_value)
{
	return unsupported_ptr();
}

int mlx5dv_dr_action_destroy(struct mlx5dv_dr_action *action)
{
	return unsupported();
}

struct mlx5dv_dr_domain *mlx5dv_dr_domain_create(struct ibv_context *ctx,
						 enum mlx5dv_dr_domain_type type)
{
	return unsupported_ptr();
}

int mlx5dv_dr_domain_destroy(struct mlx5dv_dr_domain *domain)
{
	return unsupported();
}

int mlx5dv_dr_domain_sync(struct mlx5dv_dr_domain *domain, uint32_t flags)
{
	return unsupported();
}

struct mlx5dv_dr_matcher *mlx5dv_dr_matcher_create(struct mlx5dv_dr_table *table, uint16_t priority,
						   uint8_t match_criteria_enable,
						   struct mlx5dv_flow_match_parameters *mask)
{
	return unsupported_ptr();
}

int mlx5dv_dr_matcher_destroy(struct mlx5dv_dr_matcher *matcher)
{
	return unsupported();
}

struct mlx5dv_dr_rule *mlx5dv_dr_rule_create(struct mlx5dv_dr_matcher *matcher,
					     struct mlx5dv_flow_match_parameters *value,
					     size_t num_actions, struct mlx5dv_dr_action *actions[])
{
	return unsupported_ptr();
}

int mlx5dv_dr_rule_destroy(struct mlx5dv_dr_rule *rule)
{
	return unsupported();
}

struct mlx5dv_dr_table *mlx5dv_dr_table_create(struct mlx5dv_dr_domain *domain, uint32_t level)
{
	return unsupported_ptr();
}

int mlx5dv_dr_table_destroy(struct mlx5dv_dr_table *table)
{
	return unsupported();
}

struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
	return unsupported_ptr();
}

/* MLX5_1.11 */
struct mlx5dv_devx_event_channel *
mlx5dv_devx_create_event_channel(struct ibv_context *context,
				 enum mlx5_ib_uapi_devx_create_event_channel_flags flags)
{
	return unsupported_ptr();
}

void mlx5dv_devx_destroy_event_channel(struct mlx5dv_devx_event_channel *event_channel)
{
}

/* A read()-like call: failure is -1 with errno. */
ssize_t mlx5dv_devx_get_event(struct mlx5dv_devx_event_channel *event_channel,
			      struct mlx5_ib_uapi_devx_async_event_hdr *event_data,
			      size_t event_resp_len)
{
	errno = EOPNOTSUPP;
	return -1;
}

int mlx5dv_devx_subscribe_devx_event(struct mlx5dv_devx_event_channel *event_channel,
				     struct mlx5dv_devx_obj *obj, uint16_t events_sz,
				     uint16_t events_num[], uint64_t cookie)
{
	return unsupported();
}

int mlx5dv_devx_subscribe_devx_event_fd(struct mlx5dv_devx_event_channel *event_channel, int fd,
					struct mlx5dv_devx_obj *obj, uint16_t event_num)
{
	return unsupported();
}

/* MLX5_1.12 */
struct mlx5dv_var *mlx5dv_alloc_var(struct ibv_context *context, uint32_t flags)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_flow_meter(struct mlx5dv_dr_flow_meter_attr *attr)
{
	return unsupported_ptr();
}

int mlx5dv_dr_action_modify_flow_meter(struct mlx5dv_dr_action *action,
				       struct mlx5dv_dr_flow_meter_attr *attr,
				       __be64 modify_field_select)
{
	return unsupported();
}

int mlx5dv_dump_dr_domain(FILE *fout, struct mlx5dv_dr_domain *domain)
{
	return unsupported();
}

int mlx5dv_dump_dr_matcher(FILE *fout, struct mlx5dv_dr_matcher *matcher)
{
	return unsupported();
}

int mlx5dv_dump_dr_rule(FILE *fout, struct mlx5dv_dr_rule *rule)
{
	return unsupported();
}

int mlx5dv_dump_dr_table(FILE *fout, struct mlx5dv_dr_table *table)
{
	return unsupported();
}

void mlx5dv_free_var(struct mlx5dv_var *dv_var)
{
}

/* MLX5_1.13 */
struct mlx5dv_pp *mlx5dv_pp_alloc(struct ibv_context *context, size_t pp_context_sz,
				  const void *pp_context, uint32_t flags)
{
	return unsupported_ptr();
}

void mlx5dv_pp_free(struct mlx5dv_pp *pp)
{
}

/* MLX5_1.14 */
struct mlx5dv_dr_action *mlx5dv_dr_action_create_default_miss(void)
{
	return unsupported_ptr();
}

void mlx5dv_dr_domain_set_reclaim_device_memory(struct mlx5dv_dr_domain *dmn, bool enable)
{
}

int mlx5dv_modify_qp_lag_port(struct ibv_qp *qp, uint8_t port_num)
{
	return unsupported();
}

int mlx5dv_query_qp_lag_port(struct ibv_qp *qp, uint8_t *port_num, uint8_t *active_port_num)
{
	return unsupported();
}

/* MLX5_1.15 */
struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_devx_tir(struct mlx5dv_devx_obj *devx_obj)
{
	return unsupported_ptr();
}

/* MLX5_1.16 */
struct mlx5dv_dr_action *
mlx5dv_dr_action_create_dest_array(struct mlx5dv_dr_domain *domain, size_t num_dest,
				   struct mlx5dv_dr_action_dest_attr *dests[])
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *
mlx5dv_dr_action_create_flow_sampler(struct mlx5dv_dr_flow_sampler_attr *attr)
{
	return unsupported_ptr();
}

/* MLX5_1.17 */
struct mlx5dv_dr_action *mlx5dv_dr_action_create_aso(struct mlx5dv_dr_domain *domain,
						     struct mlx5dv_devx_obj *devx_obj,
						     uint32_t offset, uint32_t flags,
						     uint8_t return_reg_c)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_pop_vlan(void)
{
	return unsupported_ptr();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_push_vlan(struct mlx5dv_dr_domain *domain,
							   __be32 vlan_hdr)
{
	return unsupported_ptr();
}

int mlx5dv_dr_action_modify_aso(struct mlx5dv_dr_action *action, uint32_t offset, uint32_t flags,
				uint8_t return_reg_c)
{
	return unsupported();
}

int mlx5dv_modify_qp_sched_elem(struct ibv_qp *qp, const struct mlx5dv_sched_leaf *requestor,
				const struct mlx5dv_sched_leaf *responder)
{
	return unsupported();
}

int mlx5dv_modify_qp_udp_sport(struct ibv_qp *qp, uint16_t udp_sport)
{
	return unsupported();
}

struct mlx5dv_sched_leaf *mlx5dv_sched_leaf_create(struct ibv_context *context,
						   const struct mlx5dv_sched_attr *sched_attr)
{
	return unsupported_ptr();
}

int mlx5dv_sched_leaf_destroy(struct mlx5dv_sched_leaf *leaf)
{
	return unsupported();
}

int mlx5dv_sched_leaf_modify(struct mlx5dv_sched_leaf *leaf,
			     const struct mlx5dv_sched_attr *sched_attr)
{
	return unsupported();
}

struct mlx5dv_sched_node *mlx5dv_sched_node_create(struct ibv_context *context,
						   const struct mlx5dv_sched_attr *sched_attr)
{
	return unsupported_ptr();
}

int mlx5dv_sched_node_destroy(struct mlx5dv_sched_node *node)
{
	return unsupported();
}

int mlx5dv_sched_node_modify(struct mlx5dv_sched_node *node,
			     const struct mlx5dv_sched_attr *sched_attr)
{
	return unsupported();
}

/* MLX5_1.18 */
int mlx5dv_reserved_qpn_alloc(struct ibv_context *ctx, uint32_t *qpn)
{
	return unsupported();
}

int mlx5dv_reserved_qpn_dealloc(struct ibv_context *ctx, uint32_t qpn)
{
	return unsupported();
}

/* MLX5_1.19 */
int _mlx5dv_query_port(struct ibv_context *context, uint32_t port_num,
		       struct mlx5_ib_uapi_query_port *info, size_t info_len)
{
	return unsupported();
}

struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg_ex(struct ibv_context *ctx,
						 struct mlx5dv_devx_umem_in *umem_in)
{
	return unsupported_ptr();
}

void *mlx5dv_dm_map_op_addr(struct ibv_dm *dm, uint8_t op)
{
	return unsupported_ptr();
}

/* MLX5_1.20 */
int _mlx5dv_mkey_check(struct mlx5dv_mkey *mkey, struct mlx5dv_mkey_err *err_info,
		       size_t err_info_size)
{
	return unsupported();
}

void mlx5dv_dr_domain_allow_duplicate_rules(struct mlx5dv_dr_domain *domain, bool allow)
{
}

int mlx5dv_map_ah_to_qp(struct ibv_ah *ah, uint32_t qp_num)
{
	return unsupported();
}

/* Returns the number of cancelled WRs, or -errno. */
int mlx5dv_qp_cancel_posted_send_wrs(struct mlx5dv_qp_ex *mqp, uint64_t wr_id)
{
	errno = EOPNOTSUPP;
	return -EOPNOTSUPP;
}

/* MLX5_1.21 */
int mlx5dv_crypto_login(struct ibv_context *context, struct mlx5dv_crypto_login_attr *login_attr)
{
	return unsupported();
}

int mlx5dv_crypto_login_query_state(struct ibv_context *context,
				    enum mlx5dv_crypto_login_state *state)
{
	return unsupported();
}

int mlx5dv_crypto_logout(struct ibv_context *context)
{
	return unsupported();
}

int mlx5dv_dci_stream_id_reset(struct ibv_qp *qp, uint16_t stream_id)
{
	return unsupported();
}

struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context,
				     struct mlx5dv_dek_init_attr *init_attr)
{
	return unsupported_ptr();
}

int mlx5dv_dek_destroy(struct mlx5dv_dek *dek)
{
	return unsupported();
}

int mlx5dv_dek_query(struct mlx5dv_dek *dek, struct mlx5dv_dek_attr *attr)
{
	return unsupported();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_ib_port(struct mlx5dv_dr_domain *domain,
							      uint32_t ib_port)
{
	return unsupported_ptr();
}

int mlx5dv_dr_matcher_set_layout(struct mlx5dv_dr_matcher *matcher,
				 struct mlx5dv_dr_matcher_layout *layout)
{
	return unsupported();
}

struct ibv_device **mlx5dv_get_vfio_device_list(struct mlx5dv_vfio_context_attr *attr)
{
	return unsupported_ptr();
}

/* Returns a file descriptor, so failure is -1 with errno. */
int mlx5dv_vfio_get_events_fd(struct ibv_context *ibctx)
{
	errno = EOPNOTSUPP;
	return -1;
}

int mlx5dv_vfio_process_events(struct ibv_context *context)
{
	return unsupported();
}

/* MLX5_1.22 */
int mlx5dv_dr_aso_other_domain_link(struct mlx5dv_devx_obj *devx_obj,
				    struct mlx5dv_dr_domain *peer_dmn, struct mlx5dv_dr_domain *dmn,
				    uint32_t flags, uint8_t return_reg_c)
{
	return unsupported();
}

int mlx5dv_dr_aso_other_domain_unlink(struct mlx5dv_devx_obj *devx_obj,
				      struct mlx5dv_dr_domain *dmn)
{
	return unsupported();
}

/* MLX5_1.23 */
struct mlx5dv_devx_msi_vector *mlx5dv_devx_alloc_msi_vector(struct ibv_context *ibctx)
{
	return unsupported_ptr();
}

struct mlx5dv_devx_eq *mlx5dv_devx_create_eq(struct ibv_context *ibctx, const void *in,
					     size_t inlen, void *out, size_t outlen)
{
	return unsupported_ptr();
}

int mlx5dv_devx_destroy_eq(struct mlx5dv_devx_eq *eq)
{
	return unsupported();
}

int mlx5dv_devx_free_msi_vector(struct mlx5dv_devx_msi_vector *msi)
{
	return unsupported();
}

/* MLX5_1.24 */
struct mlx5dv_steering_anchor *
mlx5dv_create_steering_anchor(struct ibv_context *context, struct mlx5dv_steering_anchor_attr *attr)
{
	return unsupported_ptr();
}

struct mlx5dv_crypto_login_obj *
mlx5dv_crypto_login_create(struct ibv_context *context,
			   struct mlx5dv_crypto_login_attr_ex *login_attr)
{
	return unsupported_ptr();
}

int mlx5dv_crypto_login_destroy(struct mlx5dv_crypto_login_obj *crypto_login)
{
	return unsupported();
}

int mlx5dv_crypto_login_query(struct mlx5dv_crypto_login_obj *crypto_login,
			      struct mlx5dv_crypto_login_query_attr *query_attr)
{
	return unsupported();
}

int mlx5dv_destroy_steering_anchor(struct mlx5dv_steering_anchor *sa)
{
	return unsupported();
}

struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_root_table(struct mlx5dv_dr_table *table,
								 uint16_t priority)
{
	return unsupported_ptr();
}
