/*
 * Address handles and multicast membership.  An AH is local state (the
 * destination a UD send goes to); on the same host the destination QPN
 * alone routes the datagram, and the AH's GRH fields become the 40-byte GRH
 * the receiver finds in front of its data.  Multicast attach/detach go to
 * the daemon, which keeps the group table in the arena.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/internal.h"
#include "wire/gid.h"

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sr_context *ctx;
	struct sr_ah *ah;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_sctx(pd->context);
	/* The port is RoCE (link layer Ethernet): a destination is a GID, so an
	 * AH without a GRH names none.  EINVAL, as mlx5_create_ah and the
	 * kernel's rdma_check_ah_attr (rxe) return. */
	if (attr->port_num != 1 || !attr->is_global ||
	    attr->grh.sgid_index >= ctx->dc.dev.gid_cnt || attr->static_rate > IBV_RATE_400_GBPS) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *attr;
	atomic_fetch_add_explicit(&to_spd(pd)->ah_users, 1, memory_order_relaxed);
	return &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	if (!ah)
		return EINVAL;
	atomic_fetch_sub_explicit(&to_spd(ah->pd)->ah_users, 1, memory_order_release);
	free(to_sah(ah));
	return 0;
}

int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
			struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	struct sr_context *ctx;

	if (!context || !wc || !ah_attr || port_num != 1 || ((wc->wc_flags & IBV_WC_GRH) && !grh)) {
		errno = EINVAL;
		return -1;
	}
	ctx = to_sctx(context);
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		static const uint8_t zero[20];
		const uint8_t *raw = (const uint8_t *)grh;
		uint8_t mine[16];
		uint32_t i;

		ah_attr->is_global = 1;
		ah_attr->grh.hop_limit = 0xff;
		if (!memcmp(raw, zero, 20) && (raw[20] >> 4) == 4) {
			/* RoCEv2 over IPv4: the GRH area holds the datagram's
			 * IPv4 header in its last 20 bytes (wire/grh.c), as
			 * rdma-core reads it on a RoCEv2 port */
			const uint8_t *ip = raw + 20;

			sr_gid_from_ipv4(ah_attr->grh.dgid.raw, ip + 12);
			sr_gid_from_ipv4(mine, ip + 16);
			ah_attr->grh.traffic_class = ip[1];
		} else {
			memcpy(&ah_attr->grh.dgid, &grh->sgid, sizeof(grh->sgid));
			memcpy(mine, grh->dgid.raw, 16);
			ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
			ah_attr->grh.traffic_class =
			    (be32toh(grh->version_tclass_flow) >> 20) & 0xff;
		}
		/* reply from the GID the request was sent to */
		for (i = 0; i < ctx->dc.dev.gid_cnt; i++)
			if (!memcmp(ctx->dc.dev.gids[i].gid, mine, 16))
				break;
		ah_attr->grh.sgid_index = i < ctx->dc.dev.gid_cnt ? i : 0;
	}
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
				     uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

static int mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid, enum sr_op op)
{
	struct sr_req req;
	struct sr_rep rep;

	if (!qp || !gid)
		return EINVAL;
	memset(&req, 0, sizeof(req));
	req.op = op;
	req.handle = qp->qp_num;
	memcpy(req.u.mcast.gid, gid->raw, 16);
	req.u.mcast.lid = lid;
	return -sr_ctx_request(&to_sctx(qp->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
}

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast(qp, gid, lid, SR_OP_ATTACH_MCAST);
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast(qp, gid, lid, SR_OP_DETACH_MCAST);
}
