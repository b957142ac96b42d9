/*
 * The client side of the control protocol on a device context (devctx.h):
 * one request/reply exchange at a time (serialized by sock_lock), with
 * descriptor passing.  A closed socket means the daemon died: every later
 * control request fails with EIO, as the kernel's uverbs does after a
 * device is disassociated.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/ctl_spin.h"
#include "core/msg.h"
#include "shm/devctx.h"

static int exchange(int sock, const struct sr_req *req, struct sr_rep *rep, const int *fds,
		    int nfds, int *rfds, int *nrfds)
{
	int cap = nrfds ? *nrfds : 0;
	long n;
	int ret;

	ret = sr_msg_send(sock, req, sizeof(*req), fds, nfds);
	if (ret)
		return ret == -EPIPE || ret == -ECONNRESET ? -EIO : ret;
	sr_ctl_spin_readable(sock); /* the daemon answers in microseconds */
	n = sr_msg_recv(sock, rep, sizeof(*rep), rfds, nrfds ? nrfds : &cap);
	if (n == 0)
		return -EIO;
	if (n < 0)
		return (int)n;
	if ((size_t)n != sizeof(*rep))
		return -EPROTO;
	return rep->status;
}

int sr_ctx_request(struct sr_devctx *ctx, struct sr_req *req, struct sr_rep *rep, const int *fds,
		   int nfds, int *rfds, int *nrfds)
{
	int ret;

	pthread_mutex_lock(&ctx->sock_lock);
	ret = exchange(ctx->sock, req, rep, fds, nfds, rfds, nrfds);
	pthread_mutex_unlock(&ctx->sock_lock);
	return ret;
}

int sr_ctx_reg_fd(struct sr_devctx *ctx, int fd, uint32_t kind, uint32_t *fd_id)
{
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	memset(&req, 0, sizeof(req));
	req.op = SR_OP_REG_FD;
	req.u.reg_fd.kind = kind;
	ret = sr_ctx_request(ctx, &req, &rep, &fd, 1, NULL, NULL);
	if (!ret)
		*fd_id = rep.handle;
	return ret;
}

void sr_ctx_close_fd(struct sr_devctx *ctx, uint32_t fd_id)
{
	struct sr_req req;
	struct sr_rep rep;

	memset(&req, 0, sizeof(req));
	req.op = SR_OP_CLOSE_FD;
	req.handle = fd_id;
	sr_ctx_request(ctx, &req, &rep, NULL, 0, NULL, NULL);
}

int sr_ctx_get_fd(struct sr_devctx *ctx, uint32_t fd_id)
{
	struct sr_req req;
	struct sr_rep rep;
	int fd = -1, nfds = 1, ret;

	memset(&req, 0, sizeof(req));
	req.op = SR_OP_GET_FD;
	req.handle = fd_id;
	ret = sr_ctx_request(ctx, &req, &rep, NULL, 0, &fd, &nfds);
	if (ret)
		return ret;
	return nfds == 1 ? fd : -EPROTO;
}
