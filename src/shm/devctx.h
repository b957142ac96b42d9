/*
 * A device as the data path sees it: the control connection to softrdmad,
 * the arena it maps and the device's attributes.  Each ibv_context holds
 * one (struct sr_context, verbs/internal.h), and so does the daemon's
 * engine thread, which is a client of its own daemon like any process.
 * The executor, the key checks and the fd cache need nothing more of a
 * context than this.  devctx.c is the client side of the control protocol.
 */
#ifndef SR_SHM_DEVCTX_H
#define SR_SHM_DEVCTX_H

#include <pthread.h>
#include <stdint.h>

#include <softrdma/proto.h>

struct sr_devctx {
	int sock;		   /* control socket to softrdmad */
	pthread_mutex_t sock_lock; /* one request in flight */
	void *arena;		   /* the device's arena, mapped */
	uint64_t arena_size;
	struct sr_dev_info dev; /* as the daemon said at hello */
};

/* One request and its reply (rep->status returned); fds passed with the
 * request, and up to *nrfds received into rfds.  -EIO once the daemon is
 * gone. */
int sr_ctx_request(struct sr_devctx *ctx, struct sr_req *req, struct sr_rep *rep, const int *fds,
		   int nfds, int *rfds, int *nrfds);
/* Registers fd with the daemon (SR_OP_REG_FD) as *fd_id; closes, gets a
 * copy of, a registered fd. */
int sr_ctx_reg_fd(struct sr_devctx *ctx, int fd, uint32_t kind, uint32_t *fd_id);
void sr_ctx_close_fd(struct sr_devctx *ctx, uint32_t fd_id);
int sr_ctx_get_fd(struct sr_devctx *ctx, uint32_t fd_id);

#endif
