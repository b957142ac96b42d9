/*
 * Devices and contexts: the device list (one device, described by the host's
 * softrdmad), opening a context (control socket + arena mapping + async
 * event fd), and the query verbs for device, port, GID and P_Key.  Query
 * results come from the device model the daemon sent at HELLO, so queries
 * cost no round trip.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/daemon_link.h"
#include "core/log.h"
#include "shm/epoch.h"
#include "verbs/internal.h"

/* Not in the public headers: rdma-core's private sysfs GID type. */
enum sr_gid_type_sysfs {
	SR_GID_TYPE_SYSFS_IB_ROCE_V1,
	SR_GID_TYPE_SYSFS_ROCE_V2,
};
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum sr_gid_type_sysfs *type);

static const char sr_tail_marker[] = "softrdma";
static struct sr_device sr_the_device;
static pthread_mutex_t sr_dev_lock = PTHREAD_MUTEX_INITIALIZER;
static bool sr_dev_valid;

static void sr_device_fill(const struct sr_dev_info *info)
{
	struct sr_device *d = &sr_the_device;

	d->info = *info;
	if (sr_dev_valid)
		return;
	d->dev.node_type = IBV_NODE_CA;
	d->dev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->dev.name, sizeof(d->dev.name), "%s", info->name);
	strcpy(d->dev.dev_name, "uverbs0");
	strcpy(d->dev.dev_path, "/sys/class/infiniband_verbs/uverbs0");
	snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/sys/class/infiniband/%s",
		 info->name);
	d->ops_tail = sr_tail_marker;
	sr_dev_valid = true;
}

/*
 * No reachable daemon means no device (an empty list, as on a host without
 * an HCA); a daemon that refuses us (another user's, or of another build)
 * makes the request fail: NULL with errno EACCES (EPROTO), the failure
 * ibv_get_device_list(3) allows for (its EPERM, permission denied), after
 * one line on stderr that says why.
 */
#undef ibv_get_device_list
struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;
	struct sr_dev_info info;
	char why[512];
	int sock, n = 0, ret;

	if (num_devices)
		*num_devices = 0; /* perftest reads it even on failure */
	sr_log_init("libibverbs");
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	sock = sr_daemon_connect(true, (const void *)ibv_get_device_list);
	if (sock >= 0) {
		ret = sr_daemon_hello(sock, true, &info, NULL, why, sizeof(why));
		close(sock);
		if (!ret) {
			pthread_mutex_lock(&sr_dev_lock);
			sr_device_fill(&info);
			pthread_mutex_unlock(&sr_dev_lock);
			list[n++] = &sr_the_device.dev;
		} else if (why[0]) {
			sr_err("%s", why);
			free(list);
			errno = -ret;
			return NULL;
		}
	} else {
		sr_warn("no softrdmad reachable: %s", strerror(-sock));
	}
	if (num_devices)
		*num_devices = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list); /* devices themselves are static and outlive the list */
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return NULL;
	}
	return device->name;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return 0;
	}
	return htobe64(to_sdev(device)->info.node_guid);
}

int ibv_get_device_index(struct ibv_device *device)
{
	return device ? 0 : -1;
}

/*
 * One mapping of the arena per process, shared by all its contexts on the
 * same daemon (recognised by the memfd's inode): 8 GiB of address space and
 * page tables once, not per context, and one epoch slot per thread
 * (src/shm/epoch.h) whatever context it posts on.
 */
struct arena_map {
	dev_t dev;
	ino_t ino;
	void *base;
	size_t size;
	unsigned refs;
};

static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
static struct arena_map arena_maps[8];

static void *arena_get(int fd, size_t size)
{
	struct arena_map *m, *unused = NULL;
	struct stat st;
	void *base = MAP_FAILED;

	if (fstat(fd, &st))
		return MAP_FAILED;
	pthread_mutex_lock(&arena_mu);
	for (m = arena_maps; m < arena_maps + 8; m++) {
		if (m->refs && m->dev == st.st_dev && m->ino == st.st_ino && m->size == size) {
			m->refs++;
			base = m->base;
			goto out;
		}
		if (!m->refs && !unused)
			unused = m;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base != MAP_FAILED && unused)
		*unused = (struct arena_map){st.st_dev, st.st_ino, base, size, 1};
	/* (more than 8 daemons at once: this one stays private to the context) */
out:
	pthread_mutex_unlock(&arena_mu);
	return base;
}

static void arena_put(void *base, size_t size)
{
	pthread_mutex_lock(&arena_mu);
	for (struct arena_map *m = arena_maps; m < arena_maps + 8; m++)
		if (m->refs && m->base == base) {
			if (--m->refs) {
				pthread_mutex_unlock(&arena_mu);
				return;
			}
			break;
		}
	/* the last context on it: no thread may be inside a call on it now */
	sr_epoch_arena_closing(base);
	sr_life_let_go(base, size);
	munmap(base, size);
	pthread_mutex_unlock(&arena_mu);
}

/* Fails with EACCES (another user's daemon), EXDEV (another pid
 * namespace's) or EPROTO (another build's), after one line on stderr. */
struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sr_context *ctx;
	char why[512];
	int arena_fd = -1, ret, efd;

	if (!device || device != &sr_the_device.dev) {
		errno = EINVAL;
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (ctx) {
		static _Atomic uint64_t serials;

		ctx->serial = atomic_fetch_add(&serials, 1) + 1;
		ctx->wire_rx_fd = -1;
	}
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&ctx->dc.sock_lock, NULL);
	pthread_mutex_init(&ctx->lock, NULL);
	sr_list_init(&ctx->qps);
	sr_list_init(&ctx->srqs);
	sr_list_init(&ctx->cqs);
	ctx->vctx.context.async_fd = -1;
	ctx->dc.sock = sr_daemon_connect(true, (const void *)ibv_open_device);
	if (ctx->dc.sock < 0) {
		ret = ctx->dc.sock;
		goto err_free;
	}
	ret = sr_daemon_hello(ctx->dc.sock, false, &ctx->dc.dev, &arena_fd, why, sizeof(why));
	if (ret) {
		if (why[0])
			sr_err("%s", why);
		goto err_sock;
	}
	ctx->dc.arena = arena_get(arena_fd, ctx->dc.dev.arena_size);
	close(arena_fd);
	if (ctx->dc.arena == MAP_FAILED) {
		ret = -errno;
		goto err_sock;
	}
	ctx->dc.arena_size = ctx->dc.dev.arena_size;
	if (((struct sr_arena_hdr *)ctx->dc.arena)->magic != SR_ARENA_MAGIC ||
	    ((struct sr_arena_hdr *)ctx->dc.arena)->version != sr_arena_layout_version()) {
		sr_err("softrdmad's shared-memory layout is not this library's (a daemon from "
		       "another build is running: stop it, or use SOFTRDMA_SOCKET)");
		ret = -EPROTO;
		goto err_unmap;
	}
	efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (efd < 0) {
		ret = -errno;
		goto err_unmap;
	}
	ctx->vctx.context.async_fd = efd;
	ret = sr_ctx_reg_fd(&ctx->dc, efd, SR_FD_EVENT, &ctx->async_fd_id);
	if (ret)
		goto err_efd;

	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.context.device = device;
	ctx->vctx.context.cmd_fd = ctx->dc.sock;
	ctx->vctx.context.num_comp_vectors = SR_NUM_COMP_VECTORS;
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	ctx->vctx.context.abi_compat = (void *)UINTPTR_MAX; /* __VERBS_ABI_IS_EXTENDED */
	sr_ctx_set_ops(ctx);
	return &ctx->vctx.context;

err_efd:
	close(efd);
err_unmap:
	arena_put(ctx->dc.arena, ctx->dc.dev.arena_size);
err_sock:
	close(ctx->dc.sock);
err_free:
	free(ctx);
	errno = -ret;
	return NULL;
}

int ibv_close_device(struct ibv_context *context)
{
	struct sr_context *ctx;

	if (!context)
		return EINVAL;
	ctx = to_sctx(context);
	/* backings outlive the context when another context's MRs share them:
	 * they must not keep its (soon freed) pointer */
	sr_mr_context_closing(ctx);
	/* the mapping first: its epoch slots are given back while they are
	 * still ours (the daemon frees a process's slots when its last
	 * connection closes, and another process may claim them at once) */
	arena_put(ctx->dc.arena, ctx->dc.arena_size);
	/* closing the socket makes the daemon reclaim whatever is left */
	close(ctx->dc.sock);
	close(context->async_fd);
	if (ctx->wire_rx_fd >= 0)
		close(ctx->wire_rx_fd);
	free(ctx);
	return 0;
}

static bool valid_port(uint8_t port)
{
	return port == 1;
}

static void fill_device_attr(struct sr_context *ctx, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softrdma %u", SR_PROTO_VERSION);
	a->node_guid = htobe64(ctx->dc.dev.node_guid);
	a->sys_image_guid = htobe64(ctx->dc.dev.sys_image_guid);
	a->max_mr_size = SR_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000; /* 4 KiB and up */
	a->vendor_id = ctx->dc.dev.vendor_id;
	a->vendor_part_id = ctx->dc.dev.vendor_part_id;
	a->hw_ver = ctx->dc.dev.hw_ver;
	a->max_qp = SR_MAX_QPS - 2;
	a->max_qp_wr = SR_MAX_QP_WR;
	a->device_cap_flags =
	    IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_RC_RNR_NAK_GEN |
	    IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_MEM_WINDOW |
	    IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_MEM_MGT_EXTENSIONS |
	    IBV_DEVICE_UD_AV_PORT_ENFORCE | IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_XRC;
	a->max_sge = SR_MAX_SGE;
	a->max_sge_rd = SR_MAX_SGE;
	a->max_cq = 1 << 18;
	a->max_cqe = SR_MAX_CQE;
	a->max_mr = SR_MAX_KEYS - 1;
	a->max_pd = SR_MAX_PD;
	a->max_qp_rd_atom = SR_MAX_RD_ATOM;
	a->max_res_rd_atom = SR_MAX_RD_ATOM * 1024;
	a->max_qp_init_rd_atom = SR_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mw = SR_MAX_KEYS - 1;
	a->max_mcast_grp = SR_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SR_MAX_MCAST_ATTACH;
	a->max_total_mcast_qp_attach = SR_MAX_MCAST_GRP * SR_MAX_MCAST_ATTACH;
	a->max_ah = SR_MAX_AH;
	a->max_srq = SR_MAX_SRQS - 1;
	a->max_srq_wr = SR_MAX_SRQ_WR;
	a->max_srq_sge = SR_MAX_SGE;
	a->max_pkeys = SR_PKEY_TBL_LEN;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	if (!context || !attr)
		return EINVAL;
	fill_device_attr(to_sctx(context), attr);
	return 0;
}

int sr_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;

	if (!context || !attr)
		return EINVAL;
	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(a.orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	fill_device_attr(to_sctx(context), &a.orig_attr);
	/* completions carry CLOCK_MONOTONIC nanoseconds: a 1 GHz "HCA clock" */
	a.completion_timestamp_mask = UINT64_MAX;
	a.hca_core_clock = 1000000; /* kHz */
	a.phys_port_cnt_ex = 1;
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

int sr_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr,
		  size_t attr_len)
{
	struct sr_context *ctx;
	struct ibv_port_attr a;

	if (!context || !attr)
		return EINVAL;
	if (!valid_port(port_num))
		return EINVAL;
	ctx = to_sctx(context);
	memset(&a, 0, sizeof(a));
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = ctx->dc.dev.max_mtu;
	a.active_mtu = ctx->dc.dev.active_mtu;
	a.gid_tbl_len = SR_GID_TBL_LEN;
	a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a.max_msg_sz = 1u << 31;
	a.pkey_tbl_len = SR_PKEY_TBL_LEN;
	a.max_vl_num = 1;
	a.active_width = 2;  /* 4X */
	a.active_speed = 32; /* EDR: 100 Gb/s at 4X */
	a.phys_state = 5;    /* LinkUp */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	memcpy(attr, &a, attr_len < sizeof(a) ? attr_len : sizeof(a));
	return 0;
}

#undef ibv_query_port
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr);
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr)
{
	/* the exported symbol serves binaries built against the old, shorter struct */
	/* the compat struct is the current one without port_cap_flags2 (48 bytes) */
	return sr_query_port(context, port_num, (struct ibv_port_attr *)port_attr,
			     offsetof(struct ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	struct sr_context *ctx;

	if (!context || !gid || !valid_port(port_num) || index < 0 || index >= SR_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	ctx = to_sctx(context);
	memset(gid, 0, sizeof(*gid));
	if ((uint32_t)index < ctx->dc.dev.gid_cnt)
		memcpy(gid->raw, ctx->dc.dev.gids[index].gid, 16);
	return 0;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	if (!context || !pkey || !valid_port(port_num) || index < 0 || index >= SR_PKEY_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff); /* the default full-membership P_Key */
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	if (!context || !valid_port(port_num)) {
		errno = EINVAL;
		return -1;
	}
	/* membership bit aside, 0x7fff and 0xffff name the default partition */
	if ((be16toh(pkey) & 0x7fff) == 0x7fff)
		return 0;
	errno = ENOENT;
	return -1;
}

static void fill_gid_entry(struct sr_context *ctx, uint32_t i, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->gid.raw, ctx->dc.dev.gids[i].gid, 16);
	e->gid_index = i;
	e->port_num = 1;
	e->gid_type = ctx->dc.dev.gids[i].type;
	e->ndev_ifindex = ctx->dc.dev.gids[i].ifindex;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct sr_context *ctx;
	struct ibv_gid_entry e;

	if (!context || !entry || flags || port_num != 1 || gid_index >= SR_GID_TBL_LEN)
		return EINVAL;
	ctx = to_sctx(context);
	if (gid_index >= ctx->dc.dev.gid_cnt)
		return ENODATA; /* empty GID slot */
	fill_gid_entry(ctx, gid_index, &e);
	memcpy(entry, &e, entry_size < sizeof(e) ? entry_size : sizeof(e));
	return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags, size_t entry_size);
ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct sr_context *ctx;
	size_t esz;

	if (!context || (!entries && max_entries) || flags)
		return -EINVAL;
	ctx = to_sctx(context);
	if (max_entries < ctx->dc.dev.gid_cnt)
		return -EINVAL;
	esz = entry_size < sizeof(struct ibv_gid_entry) ? entry_size : sizeof(struct ibv_gid_entry);
	for (uint32_t i = 0; i < ctx->dc.dev.gid_cnt; i++) {
		struct ibv_gid_entry e;

		fill_gid_entry(ctx, i, &e);
		memcpy((char *)entries + i * entry_size, &e, esz);
	}
	return ctx->dc.dev.gid_cnt;
}

int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum sr_gid_type_sysfs *type)
{
	struct sr_context *ctx;

	if (!context || !type || !valid_port(port_num) || index >= SR_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	ctx = to_sctx(context);
	if (index >= ctx->dc.dev.gid_cnt) {
		errno = ENODATA;
		return -1;
	}
	*type = ctx->dc.dev.gids[index].type == IBV_GID_TYPE_ROCE_V2 ? SR_GID_TYPE_SYSFS_ROCE_V2
								     : SR_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}
