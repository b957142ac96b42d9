/*
 * The library's link to the CM in softrdmad: the device opened once per
 * process through our libibverbs (one shared ibv_context and default PD,
 * as rdma-core keeps per device), a control connection of its own to the
 * daemon (the rdma_cm "character device"), one request at a time, and the
 * table that maps the daemon's id handles to the application's ids.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ctl_spin.h"
#include "core/daemon_link.h"
#include "core/msg.h"
#include "rdmacm/internal.h"

struct cm_global cm_g;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sock_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int cm_sock = -1;
static bool inited;
static struct cm_id **table;

#define TABLE_SIZE (1u << 17) /* the daemon's id handles are below this */

int cm_err(int e)
{
	errno = e;
	return -1;
}

static int open_device(void)
{
	struct ibv_device **list;
	int n;

	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	cm_g.verbs = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!cm_g.verbs)
		return -ENODEV;
	if (ibv_query_device(cm_g.verbs, &cm_g.attr))
		memset(&cm_g.attr, 0, sizeof(cm_g.attr));
	cm_g.pd = ibv_alloc_pd(cm_g.verbs);
	if (!cm_g.pd) {
		ibv_close_device(cm_g.verbs);
		cm_g.verbs = NULL;
		return -ENODEV;
	}
	return 0;
}

int cm_init(void)
{
	char why[256];
	int ret = 0, s;

	pthread_mutex_lock(&init_lock);
	if (inited)
		goto out;
	table = calloc(TABLE_SIZE, sizeof(*table));
	if (!table) {
		ret = -ENOMEM;
		goto out;
	}
	ret = open_device();
	if (ret)
		goto out;
	s = sr_daemon_connect(true, (const void *)cm_init);
	if (s < 0) {
		ret = -ENODEV;
		goto out;
	}
	ret = sr_daemon_hello(s, false, &cm_g.dev, NULL, why, sizeof(why));
	if (ret) {
		close(s);
		ret = -ENODEV;
		goto out;
	}
	cm_sock = s;
	inited = true;
out:
	if (ret) {
		free(table);
		table = NULL;
	}
	pthread_mutex_unlock(&init_lock);
	return ret ? cm_err(-ret) : 0;
}

void cm_req_init(struct sr_req *req, uint32_t op, uint32_t handle)
{
	memset(req, 0, sizeof(*req));
	req->op = op;
	req->handle = handle;
}

int cm_id_op(uint32_t handle, uint32_t op)
{
	struct sr_req req;
	struct sr_rep rep;

	cm_req_init(&req, op, handle);
	return cm_request(&req, &rep, NULL, 0);
}

/* One exchange whose reply is a struct sr_rep and perhaps more (up to cap
 * bytes): the reply's length in *len, 0 or -errno. */
static int exchange(struct sr_req *req, struct sr_rep *rep, size_t cap, size_t *len, const int *fds,
		    int nfds)
{
	int nr = 0, ret;
	long n;

	pthread_mutex_lock(&sock_lock);
	ret = sr_msg_send(cm_sock, req, sizeof(*req), fds, nfds);
	if (!ret) {
		sr_ctl_spin_readable(cm_sock); /* the daemon answers in microseconds */
		n = sr_msg_recv(cm_sock, rep, cap, NULL, &nr);
		if (n == 0)
			ret = -EIO;
		else if (n < 0)
			ret = (int)n;
		else if ((size_t)n < sizeof(*rep))
			ret = -EPROTO;
		else
			ret = rep->status;
		*len = n > 0 ? (size_t)n : 0;
	} else if (ret == -EPIPE || ret == -ECONNRESET) {
		ret = -EIO;
	}
	pthread_mutex_unlock(&sock_lock);
	return ret;
}

int cm_send_only(struct sr_req *req)
{
	int ret;

	pthread_mutex_lock(&sock_lock);
	ret = sr_msg_send(cm_sock, req, sizeof(*req), NULL, 0);
	pthread_mutex_unlock(&sock_lock);
	return ret == -EPIPE || ret == -ECONNRESET ? -EIO : ret;
}

int cm_request(struct sr_req *req, struct sr_rep *rep, const int *fds, int nfds)
{
	size_t len;

	return exchange(req, rep, sizeof(*rep), &len, fds, nfds);
}

int cm_request_long(struct sr_req *req, struct sr_rep *rep, size_t cap, size_t *len)
{
	return exchange(req, rep, cap, len, NULL, 0);
}

void cm_id_table_set(uint32_t handle, struct cm_id *id)
{
	if (handle >= TABLE_SIZE)
		return;
	pthread_mutex_lock(&table_lock);
	table[handle] = id;
	pthread_mutex_unlock(&table_lock);
}

struct cm_id *cm_id_table_get(uint32_t handle)
{
	struct cm_id *id;

	if (handle >= TABLE_SIZE)
		return NULL;
	pthread_mutex_lock(&table_lock);
	id = table[handle];
	pthread_mutex_unlock(&table_lock);
	return id;
}

struct cm_id *cm_id_table_hold(uint32_t handle)
{
	struct cm_id *id;

	if (handle >= TABLE_SIZE)
		return NULL;
	/* under the table lock, so that rdma_destroy_id, which takes the id
	 * out of the table first, then waits for its events' acks, either
	 * sees this event counted or keeps it from being found */
	pthread_mutex_lock(&table_lock);
	id = table[handle];
	if (id) {
		pthread_mutex_lock(&id->lock);
		id->events_unacked++;
		pthread_mutex_unlock(&id->lock);
	}
	pthread_mutex_unlock(&table_lock);
	return id;
}

int cm_gid_index(const uint8_t gid[16])
{
	for (uint32_t i = 0; i < cm_g.dev.gid_cnt && i < SR_GID_TBL_LEN; i++)
		if (!memcmp(cm_g.dev.gids[i].gid, gid, 16))
			return (int)i;
	return 0;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	if (num_devices)
		*num_devices = 0;
	if (cm_init())
		return NULL;
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = cm_g.verbs;
	if (num_devices)
		*num_devices = 1;
	return list;
}

void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
