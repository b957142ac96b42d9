/*
 * Small, device-independent parts of the libibverbs ABI: the enum-to-string
 * helpers, the IB static-rate conversions, the kernel-ABI struct converters
 * (ibv_copy_*_from/to_kern), the sysfs helpers, fork-safety controls
 * (ibv_fork_init, ibv_is_fork_initialized, ibv_dontfork/dofork_range), and the
 * verbs that softrdma does not support at all (object import across processes
 * by kernel handle, ECE, Ethernet L2 resolution), which fail with EOPNOTSUPP
 * the same way rdma-core does for a provider that lacks them.  Behaviour
 * follows rdma-core 44 as documented in its man pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include "abi_private.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* enum -> string                                                     */
/* ------------------------------------------------------------------ */

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const str[] = {
	    [IBV_WC_SUCCESS] = "success",
	    [IBV_WC_LOC_LEN_ERR] = "local length error",
	    [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
	    [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
	    [IBV_WC_LOC_PROT_ERR] = "local protection error",
	    [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
	    [IBV_WC_MW_BIND_ERR] = "memory management operation error",
	    [IBV_WC_BAD_RESP_ERR] = "bad response error",
	    [IBV_WC_LOC_ACCESS_ERR] = "local access error",
	    [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
	    [IBV_WC_REM_ACCESS_ERR] = "remote access error",
	    [IBV_WC_REM_OP_ERR] = "remote operation error",
	    [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
	    [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
	    [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
	    [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
	    [IBV_WC_REM_ABORT_ERR] = "aborted error",
	    [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
	    [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
	    [IBV_WC_FATAL_ERR] = "fatal error",
	    [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
	    [IBV_WC_GENERAL_ERR] = "general error",
	    [IBV_WC_TM_ERR] = "TM error",
	    [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	if ((unsigned int)status >= ARRAY_SIZE(str) || !str[status])
		return "unknown";
	return str[status];
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const str[] = {
	    [IBV_EVENT_CQ_ERR] = "CQ error",
	    [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
	    [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
	    [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
	    [IBV_EVENT_COMM_EST] = "communication established",
	    [IBV_EVENT_SQ_DRAINED] = "send queue drained",
	    [IBV_EVENT_PATH_MIG] = "path migrated",
	    [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
	    [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
	    [IBV_EVENT_PORT_ACTIVE] = "port active",
	    [IBV_EVENT_PORT_ERR] = "port error",
	    [IBV_EVENT_LID_CHANGE] = "LID change",
	    [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
	    [IBV_EVENT_SM_CHANGE] = "SM change",
	    [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
	    [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
	    [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
	    [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
	    [IBV_EVENT_GID_CHANGE] = "GID table change",
	    [IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	if ((unsigned int)event >= ARRAY_SIZE(str) || !str[event])
		return "unknown";
	return str[event];
}

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	switch (node_type) {
	case IBV_NODE_CA:
		return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH:
		return "InfiniBand switch";
	case IBV_NODE_ROUTER:
		return "InfiniBand router";
	case IBV_NODE_RNIC:
		return "iWARP NIC";
	case IBV_NODE_USNIC:
		return "usNIC";
	case IBV_NODE_USNIC_UDP:
		return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED:
		return "unspecified";
	case IBV_NODE_UNKNOWN:
	default:
		return "unknown";
	}
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	switch (port_state) {
	case IBV_PORT_NOP:
		return "no state change (NOP)";
	case IBV_PORT_DOWN:
		return "down";
	case IBV_PORT_INIT:
		return "init";
	case IBV_PORT_ARMED:
		return "armed";
	case IBV_PORT_ACTIVE:
		return "active";
	case IBV_PORT_ACTIVE_DEFER:
		return "active defer";
	default:
		return "unknown";
	}
}

/* ------------------------------------------------------------------ */
/* static rate conversions                                            */
/* ------------------------------------------------------------------ */

/*
 * One row per enum ibv_rate value: the rate in Mbit/s and its multiple of
 * the 2.5 Gbit/s base rate, or 0 when rdma-core reports none (-1).  As in
 * rdma-core, the FDR/EDR/HDR-era rates 14..300 Gbit/s have no multiple,
 * while 28 and 50 Gbit/s and the NDR/XDR rates are given rounded multiples.
 */
static const struct {
	enum ibv_rate rate;
	int mbps;
	int mult;
} rate_table[] = {
    {.rate = IBV_RATE_2_5_GBPS, .mbps = 2500, .mult = 1},
    {.rate = IBV_RATE_5_GBPS, .mbps = 5000, .mult = 2},
    {.rate = IBV_RATE_10_GBPS, .mbps = 10000, .mult = 4},
    {.rate = IBV_RATE_20_GBPS, .mbps = 20000, .mult = 8},
    {.rate = IBV_RATE_30_GBPS, .mbps = 30000, .mult = 12},
    {.rate = IBV_RATE_40_GBPS, .mbps = 40000, .mult = 16},
    {.rate = IBV_RATE_60_GBPS, .mbps = 60000, .mult = 24},
    {.rate = IBV_RATE_80_GBPS, .mbps = 80000, .mult = 32},
    {.rate = IBV_RATE_120_GBPS, .mbps = 120000, .mult = 48},
    {.rate = IBV_RATE_14_GBPS, .mbps = 14062, .mult = 0},
    {.rate = IBV_RATE_56_GBPS, .mbps = 56250, .mult = 0},
    {.rate = IBV_RATE_112_GBPS, .mbps = 112500, .mult = 0},
    {.rate = IBV_RATE_168_GBPS, .mbps = 168750, .mult = 0},
    {.rate = IBV_RATE_25_GBPS, .mbps = 25781, .mult = 0},
    {.rate = IBV_RATE_100_GBPS, .mbps = 103125, .mult = 0},
    {.rate = IBV_RATE_200_GBPS, .mbps = 206250, .mult = 0},
    {.rate = IBV_RATE_300_GBPS, .mbps = 309375, .mult = 0},
    {.rate = IBV_RATE_28_GBPS, .mbps = 28125, .mult = 11},
    {.rate = IBV_RATE_50_GBPS, .mbps = 53125, .mult = 20},
    {.rate = IBV_RATE_400_GBPS, .mbps = 425000, .mult = 160},
    {.rate = IBV_RATE_600_GBPS, .mbps = 637500, .mult = 240},
    {.rate = IBV_RATE_800_GBPS, .mbps = 850000, .mult = 320},
    {.rate = IBV_RATE_1200_GBPS, .mbps = 1275000, .mult = 480},
};

int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].rate == rate)
			return rate_table[i].mult ? rate_table[i].mult : -1;
	return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].mult && rate_table[i].mult == mult)
			return rate_table[i].rate;
	return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].rate == rate)
			return rate_table[i].mbps;
	return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].mbps == mbps)
			return rate_table[i].rate;
	return IBV_RATE_MAX;
}

/* ------------------------------------------------------------------ */
/* kernel ABI struct converters                                       */
/* ------------------------------------------------------------------ */

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;

	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

/*
 * Every field of the kernel structure is copied, qp_state included (rdma-core
 * 44 happens to leave dst->qp_state untouched).
 */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->qp_state = src->qp_state;
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;

	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;

	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));

	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));

	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

/* ------------------------------------------------------------------ */
/* sysfs helpers                                                      */
/* ------------------------------------------------------------------ */

static char sysfs_path[PATH_MAX];
static pthread_once_t sysfs_path_once = PTHREAD_ONCE_INIT;

static void sysfs_path_init(void)
{
	const char *env = secure_getenv("SYSFS_PATH");
	size_t len;

	if (!env || !*env)
		env = "/sys";
	len = strnlen(env, sizeof(sysfs_path) - 1);
	memcpy(sysfs_path, env, len);
	/* "/sys/" and "/sys" name the same tree; keep the short form. */
	while (len > 1 && sysfs_path[len - 1] == '/')
		len--;
	sysfs_path[len] = '\0';
}

const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_path_once, sysfs_path_init);
	return sysfs_path;
}

/*
 * Read "<dir>/<file>" into buf as a NUL-terminated string with the trailing
 * newline removed; returns the string length, or -1 with errno set (ENOENT
 * when the attribute does not exist, which is always the case for softrdma
 * devices: they have no sysfs presence).  A file whose contents do not fit
 * in buf including the terminator is an error (EOVERFLOW) rather than being
 * silently truncated.
 */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX];
	ssize_t len;
	int fd, n, saved;

	if (!dir || !file || !buf || !size) {
		errno = EINVAL;
		return -1;
	}
	n = snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do
		len = read(fd, buf, size);
	while (len < 0 && errno == EINTR);
	saved = errno;
	close(fd);
	if (len < 0) {
		errno = saved;
		return -1;
	}

	if (len > 0 && buf[len - 1] == '\n') {
		buf[--len] = '\0';
	} else if ((size_t)len < size) {
		buf[len] = '\0';
	} else {
		errno = EOVERFLOW;
		return -1;
	}
	return (int)len;
}

/* ------------------------------------------------------------------ */
/* fork support                                                       */
/* ------------------------------------------------------------------ */

static atomic_bool fork_requested;

/*
 * rdma-core refuses (EINVAL) once memory was registered without fork
 * protection, because pages already pinned for DMA cannot be fixed up.
 * softrdma pins nothing, so fork protection can be turned on at any time.
 */
int ibv_fork_init(void)
{
	atomic_store(&fork_requested, true);
	return 0;
}

static bool env_set(const char *name)
{
	return getenv(name) != NULL;
}

/* softrdma gives a fork child private copies of registered pages (mr.c),
 * the copy-on-fork behaviour rdma-core reports as "unneeded" on kernels
 * that pin pages fork-safely. */
enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/*
 * As in rdma-core, the ranges are only marked when fork support is enabled
 * (ibv_fork_init() or RDMAV_FORK_SAFE/IBV_FORK_SAFE); otherwise the calls are
 * successful no-ops.  Unlike rdma-core there is no reference counting of
 * overlapping ranges: softrdma does not pin memory for DMA, so a page that a
 * child inherits after fork can never corrupt the parent's RDMA traffic.
 */
static int madvise_range(void *base, size_t size, int advice)
{
	uintptr_t page, start, end;
	long psz = sysconf(_SC_PAGESIZE);

	if (!size)
		return 0;
	if (!atomic_load_explicit(&fork_requested, memory_order_acquire) &&
	    !env_set("RDMAV_FORK_SAFE") && !env_set("IBV_FORK_SAFE"))
		return 0;

	page = psz > 0 ? (uintptr_t)psz : 4096;
	start = (uintptr_t)base & ~(page - 1);
	end = ((uintptr_t)base + size + page - 1) & ~(page - 1);
	if (end <= start)
		return EINVAL;
	if (madvise((void *)start, end - start, advice))
		return errno;
	return 0;
}

int ibv_dontfork_range(void *base, size_t size)
{
	return madvise_range(base, size, MADV_DONTFORK);
}

int ibv_dofork_range(void *base, size_t size)
{
	return madvise_range(base, size, MADV_DOFORK);
}

/* ------------------------------------------------------------------ */
/* unsupported verbs                                                  */
/* ------------------------------------------------------------------ */

/*
 * Importing objects shares kernel handles between processes through a
 * uverbs command FD; softrdma has no such FD, so every import fails.
 */
struct ibv_context *ibv_import_device(int cmd_fd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* Nothing can have been imported, so there is nothing to release. */
void ibv_unimport_pd(struct ibv_pd *pd)
{
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
}

/* Enhanced Connection Establishment is a vendor (mlx5) feature. */
int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

/* RoCE neighbour resolution; softrdma's link layer is not Ethernet. */
int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
				uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	return EOPNOTSUPP;
}
