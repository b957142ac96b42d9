/*
 * Protection domains.  The PD handle is the daemon's (host-wide unique), and
 * every MR, MW, QP and SRQ records it, so the data path can enforce that an
 * access uses a key of the QP's own PD (IBTA 10.2.3).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/internal.h"

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct sr_req req;
	struct sr_rep rep;
	struct sr_pd *pd;
	int ret;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_ALLOC_PD;
	ret = sr_ctx_request(&to_sctx(context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) {
		free(pd);
		errno = -ret;
		return NULL;
	}
	pd->handle = rep.handle;
	pd->pd.context = context;
	pd->pd.handle = rep.handle;
	return &pd->pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!pd)
		return EINVAL;
	if (atomic_load_explicit(&to_spd(pd)->ah_users, memory_order_acquire))
		return EBUSY; /* as the kernel: an AH still uses it */
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_DEALLOC_PD;
	req.handle = to_spd(pd)->handle;
	ret = sr_ctx_request(&to_sctx(pd->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret)
		return -ret; /* EBUSY while MRs, QPs, SRQs or MWs use it */
	free(to_spd(pd));
	return 0;
}
