/*
 * Prototypes for symbols that softrdma's libibverbs.so.1 exports for binary
 * compatibility with rdma-core 44 but that the public rdma-core headers do not
 * declare: the IBVERBS_1.0/1.1 helpers that rdma-core keeps in its internal
 * driver.h/marshall.h (sysfs helpers, fork-range helpers, kernel-ABI struct
 * converters), and the IBVERBS_PRIVATE_34 provider interface that the real
 * libmlx5/libefa link against.  The private entry points are stubs (see
 * abi_private.c); they exist so that those providers can be loaded into a
 * process that uses softrdma, not to be called.  Only the symbol names are
 * ABI-relevant: where rdma-core passes arguments that the stubs never look
 * at, the prototypes here take none (callers own argument set-up and clean-up
 * in the x86-64 and AArch64 calling conventions, so the extra arguments are
 * harmless).
 */
#ifndef SOFTRDMA_VERBS_ABI_PRIVATE_H
#define SOFTRDMA_VERBS_ABI_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct ib_uverbs_ah_attr;
struct ib_uverbs_qp_attr;
struct ib_user_path_rec;
struct ibv_sa_path_rec;
struct ibv_command_buffer;
struct verbs_device_ops;

/* ---- public-ABI helpers without a public prototype (abi_misc.c) ---- */

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

/* ---- IBVERBS_PRIVATE_34 (abi_private.c) ---- */

/* Log levels understood by __verbs_log (rdma-core's numbering). */
enum {
	SOFTRDMA_VERBS_LOG_NONE = 0,
	SOFTRDMA_VERBS_LOG_ERR = 1,
	SOFTRDMA_VERBS_LOG_WARN = 2,
	SOFTRDMA_VERBS_LOG_INFO = 3,
	SOFTRDMA_VERBS_LOG_DEBUG = 4,
};

extern bool verbs_allow_disassociate_destroy;

void verbs_register_driver_34(const struct verbs_device_ops *ops);
void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx, const void *ops);
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context, struct ibv_comp_channel *channel,
		   void *cq_context);
struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt, ...)
    __attribute__((format(printf, 4, 5)));
int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct ibv_command_buffer *link);

/*
 * The ibv_cmd_* kernel-command helpers.  All return int in rdma-core: 0 or a
 * positive errno value, except ibv_cmd_poll_cq (a completion count, or
 * negative on error).
 */
int ibv_cmd_advise_mr(void);
int ibv_cmd_alloc_dm(void);
int ibv_cmd_alloc_mw(void);
int ibv_cmd_alloc_pd(void);
int ibv_cmd_attach_mcast(void);
int ibv_cmd_close_xrcd(void);
int ibv_cmd_create_ah(void);
int ibv_cmd_create_counters(void);
int ibv_cmd_create_cq(void);
int ibv_cmd_create_cq_ex(void);
int ibv_cmd_create_flow(void);
int ibv_cmd_create_flow_action_esp(void);
int ibv_cmd_create_qp(void);
int ibv_cmd_create_qp_ex(void);
int ibv_cmd_create_qp_ex2(void);
int ibv_cmd_create_rwq_ind_table(void);
int ibv_cmd_create_srq(void);
int ibv_cmd_create_srq_ex(void);
int ibv_cmd_create_wq(void);
int ibv_cmd_dealloc_mw(void);
int ibv_cmd_dealloc_pd(void);
int ibv_cmd_dereg_mr(void);
int ibv_cmd_destroy_ah(void);
int ibv_cmd_destroy_counters(void);
int ibv_cmd_destroy_cq(void);
int ibv_cmd_destroy_flow(void);
int ibv_cmd_destroy_flow_action(void);
int ibv_cmd_destroy_qp(void);
int ibv_cmd_destroy_rwq_ind_table(void);
int ibv_cmd_destroy_srq(void);
int ibv_cmd_destroy_wq(void);
int ibv_cmd_detach_mcast(void);
int ibv_cmd_free_dm(void);
int ibv_cmd_get_context(void);
int ibv_cmd_modify_cq(void);
int ibv_cmd_modify_flow_action_esp(void);
int ibv_cmd_modify_qp(void);
int ibv_cmd_modify_qp_ex(void);
int ibv_cmd_modify_srq(void);
int ibv_cmd_modify_wq(void);
int ibv_cmd_open_qp(void);
int ibv_cmd_open_xrcd(void);
int ibv_cmd_poll_cq(void);
int ibv_cmd_post_recv(void);
int ibv_cmd_post_send(void);
int ibv_cmd_post_srq_recv(void);
int ibv_cmd_query_context(void);
int ibv_cmd_query_device_any(void);
int ibv_cmd_query_mr(void);
int ibv_cmd_query_port(void);
int ibv_cmd_query_qp(void);
int ibv_cmd_query_srq(void);
int ibv_cmd_read_counters(void);
int ibv_cmd_reg_dm_mr(void);
int ibv_cmd_reg_dmabuf_mr(void);
int ibv_cmd_reg_mr(void);
int ibv_cmd_req_notify_cq(void);
int ibv_cmd_rereg_mr(void);
int ibv_cmd_resize_cq(void);

#endif /* SOFTRDMA_VERBS_ABI_PRIVATE_H */
