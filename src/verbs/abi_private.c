/*
 * The IBVERBS_PRIVATE_34 surface of libibverbs: the interface between
 * rdma-core's libibverbs and its provider libraries.  Debian's real
 * libmlx5.so.1/libefa.so.1 import these symbols (and register themselves from
 * an ELF constructor), so they must exist for those libraries to load into a
 * process that uses softrdma.  softrdma has no kernel uverbs device and loads
 * no providers, so registration is ignored, every kernel-command helper
 * (ibv_cmd_*, execute_ioctl) fails with EOPNOTSUPP, and context construction
 * fails; the real providers never get that far, because they reject softrdma
 * devices by identity first.  __verbs_log is a working logger, since the
 * providers report those rejections through it.  ibv_query_gid_type, also
 * in this version node, is implemented with the device code elsewhere.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "abi_private.h"

/*
 * rdma-core sets this from RDMAV_ALLOW_DISASSOC_DESTROY; providers consult it
 * when a destroy fails because the device was hot-unplugged.  softrdma
 * devices are never disassociated, so it stays false.
 */
bool verbs_allow_disassociate_destroy;

void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
}

/* ------------------------------------------------------------------ */
/* logging                                                            */
/* ------------------------------------------------------------------ */

/*
 * rdma-core semantics: a message is written when its level is at or below
 * VERBS_LOG_LEVEL (a number: 0 none, the default; 1 error; 2 warning;
 * 3 info; 4 debug), to the file named by VERBS_LOG_FILE (opened for append)
 * if set, else to stderr.
 */
static uint32_t log_level = SOFTRDMA_VERBS_LOG_NONE;
static FILE *log_fp;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void log_init(void)
{
	const char *env = getenv("VERBS_LOG_LEVEL");
	const char *file;
	char *end;
	long v;

	log_fp = stderr;
	if (!env || !*env)
		return;
	v = strtol(env, &end, 0);
	if (*end || v < 0)
		return;
	log_level = v > SOFTRDMA_VERBS_LOG_DEBUG ? SOFTRDMA_VERBS_LOG_DEBUG : (uint32_t)v;
	if (log_level == SOFTRDMA_VERBS_LOG_NONE)
		return;
	file = secure_getenv("VERBS_LOG_FILE");
	if (file && *file) {
		FILE *fp = fopen(file, "ae");

		if (fp)
			log_fp = fp;
	}
}

void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)
{
	va_list ap;

	pthread_once(&log_once, log_init);
	if (level == SOFTRDMA_VERBS_LOG_NONE || level > log_level || !fmt)
		return;

	va_start(ap, fmt);
	pthread_mutex_lock(&log_lock);
	vfprintf(log_fp, fmt, ap);
	fflush(log_fp);
	pthread_mutex_unlock(&log_lock);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* provider context construction                                      */
/* ------------------------------------------------------------------ */

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id)
{
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* No context can have been built by the two functions above. */
void verbs_uninit_context(struct verbs_context *context)
{
}

void verbs_set_ops(struct verbs_context *vctx, const void *ops)
{
}

void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context, struct ibv_comp_channel *channel,
		   void *cq_context)
{
}

int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt, ...)
{
	errno = EOPNOTSUPP;
	return -1;
}

/* ------------------------------------------------------------------ */
/* kernel command helpers                                             */
/* ------------------------------------------------------------------ */

int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd)
{
	return EOPNOTSUPP;
}

/*
 * Sizes a command buffer that is linked to another one.  The stub cannot see
 * inside struct ibv_command_buffer; the count is only used to size a buffer
 * that execute_ioctl() then refuses, so the caller's own count is enough.
 */
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct ibv_command_buffer *link)
{
	return num_attrs;
}

/* rdma-core's ibv_cmd_* helpers return 0 or a positive errno value. */
static int cmd_unsupported(void)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

int ibv_cmd_advise_mr(void)
{
	return cmd_unsupported();
}

int ibv_cmd_alloc_dm(void)
{
	return cmd_unsupported();
}

int ibv_cmd_alloc_mw(void)
{
	return cmd_unsupported();
}

int ibv_cmd_alloc_pd(void)
{
	return cmd_unsupported();
}

int ibv_cmd_attach_mcast(void)
{
	return cmd_unsupported();
}

int ibv_cmd_close_xrcd(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_ah(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_counters(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_cq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_cq_ex(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_flow(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_flow_action_esp(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_qp(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_qp_ex(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_qp_ex2(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_rwq_ind_table(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_srq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_srq_ex(void)
{
	return cmd_unsupported();
}

int ibv_cmd_create_wq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_dealloc_mw(void)
{
	return cmd_unsupported();
}

int ibv_cmd_dealloc_pd(void)
{
	return cmd_unsupported();
}

int ibv_cmd_dereg_mr(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_ah(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_counters(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_cq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_flow(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_flow_action(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_qp(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_rwq_ind_table(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_srq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_destroy_wq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_detach_mcast(void)
{
	return cmd_unsupported();
}

int ibv_cmd_free_dm(void)
{
	return cmd_unsupported();
}

int ibv_cmd_get_context(void)
{
	return cmd_unsupported();
}

int ibv_cmd_modify_cq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_modify_flow_action_esp(void)
{
	return cmd_unsupported();
}

int ibv_cmd_modify_qp(void)
{
	return cmd_unsupported();
}

int ibv_cmd_modify_qp_ex(void)
{
	return cmd_unsupported();
}

int ibv_cmd_modify_srq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_modify_wq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_open_qp(void)
{
	return cmd_unsupported();
}

int ibv_cmd_open_xrcd(void)
{
	return cmd_unsupported();
}

/* Returns a completion count like ibv_poll_cq(), so the error is negative. */
int ibv_cmd_poll_cq(void)
{
	errno = EOPNOTSUPP;
	return -1;
}

int ibv_cmd_post_recv(void)
{
	return cmd_unsupported();
}

int ibv_cmd_post_send(void)
{
	return cmd_unsupported();
}

int ibv_cmd_post_srq_recv(void)
{
	return cmd_unsupported();
}

int ibv_cmd_query_context(void)
{
	return cmd_unsupported();
}

int ibv_cmd_query_device_any(void)
{
	return cmd_unsupported();
}

int ibv_cmd_query_mr(void)
{
	return cmd_unsupported();
}

int ibv_cmd_query_port(void)
{
	return cmd_unsupported();
}

int ibv_cmd_query_qp(void)
{
	return cmd_unsupported();
}

int ibv_cmd_query_srq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_read_counters(void)
{
	return cmd_unsupported();
}

int ibv_cmd_reg_dm_mr(void)
{
	return cmd_unsupported();
}

int ibv_cmd_reg_dmabuf_mr(void)
{
	return cmd_unsupported();
}

int ibv_cmd_reg_mr(void)
{
	return cmd_unsupported();
}

int ibv_cmd_req_notify_cq(void)
{
	return cmd_unsupported();
}

int ibv_cmd_rereg_mr(void)
{
	return cmd_unsupported();
}

int ibv_cmd_resize_cq(void)
{
	return cmd_unsupported();
}
