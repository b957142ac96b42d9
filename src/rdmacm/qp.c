/*
 * Verbs helpers of librdmacm: rdma_create_qp(_ex) with the device's default
 * PD and, for a missing send or receive CQ, one the library makes with its
 * own completion channel and cq_context = the id (rdma_verbs.h's
 * rdma_get_*_comp rely on it); the QP goes to INIT at once (UD all the way
 * to RTS, it needs no peer).  rdma_create_srq(_ex), and rdma_create_ep /
 * rdma_destroy_ep, which wrap a synchronous id around all of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/internal.h"
#include "verbs/cm_hooks.h"

static void destroy_cqs(struct cm_id *id)
{
	if (id->own_recv_cq && id->id.recv_cq) {
		ibv_destroy_cq(id->id.recv_cq);
		if (id->id.recv_cq_channel)
			ibv_destroy_comp_channel(id->id.recv_cq_channel);
	}
	if (id->own_send_cq && id->id.send_cq && id->id.send_cq != id->id.recv_cq) {
		ibv_destroy_cq(id->id.send_cq);
		if (id->id.send_cq_channel)
			ibv_destroy_comp_channel(id->id.send_cq_channel);
	}
	if (id->own_recv_cq) {
		id->id.recv_cq = NULL;
		id->id.recv_cq_channel = NULL;
	}
	if (id->own_send_cq) {
		id->id.send_cq = NULL;
		id->id.send_cq_channel = NULL;
	}
	id->own_send_cq = id->own_recv_cq = false;
}

static struct ibv_cq *make_cq(struct cm_id *id, uint32_t size, struct ibv_comp_channel **ch)
{
	struct ibv_cq *cq;

	*ch = ibv_create_comp_channel(id->id.verbs);
	if (!*ch)
		return NULL;
	cq = ibv_create_cq(id->id.verbs, size ? (int)size : 1, id, *ch, 0);
	if (!cq) {
		ibv_destroy_comp_channel(*ch);
		*ch = NULL;
	}
	return cq;
}

static int create_cqs(struct cm_id *id, uint32_t send_size, uint32_t recv_size, bool need_send,
		      bool need_recv)
{
	if (need_recv) {
		id->id.recv_cq = make_cq(id, recv_size, &id->id.recv_cq_channel);
		if (!id->id.recv_cq)
			return -1;
		id->own_recv_cq = true;
	}
	if (need_send) {
		id->id.send_cq = make_cq(id, send_size, &id->id.send_cq_channel);
		if (!id->id.send_cq) {
			destroy_cqs(id);
			return -1;
		}
		id->own_send_cq = true;
	}
	return 0;
}

static int qp_initial_state(struct cm_id *id)
{
	/* INIT as a rule made with the QP (create_qp) */
	int ret = id->id.qp->state == IBV_QPS_INIT ? 0 : cm_modify_qp(id, IBV_QPS_INIT);

	if (!ret && id->id.qp_type == IBV_QPT_UD) {
		ret = cm_modify_qp(id, IBV_QPS_RTR);
		if (!ret)
			ret = cm_modify_qp(id, IBV_QPS_RTS);
	}
	return ret;
}

/* The XRC domain librdmacm opens for the device when an XRC_RECV QP or an
 * XRC SRQ names none, as rdma-core's does (one per device, never shared
 * through a file). */
static struct ibv_xrcd *default_xrcd(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct ibv_xrcd_init_attr a = {
	    .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
	    .fd = -1,
	    .oflags = O_CREAT,
	};

	pthread_mutex_lock(&lock);
	if (!cm_g.xrcd)
		cm_g.xrcd = ibv_open_xrcd(cm_g.verbs, &a);
	pthread_mutex_unlock(&lock);
	return cm_g.xrcd;
}

/* ibv_create_qp_ex and, in the same round trip where our libibverbs
 * offers it (cm_hooks.h), the move to INIT that qp_initial_state makes. */
static struct ibv_qp *create_qp(struct cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	const struct sr_verbs_hooks *h = sr_verbs_hooks_of(id->id.verbs);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT};
	int mask;

	if (!h || rdma_init_qp_attr(&id->id, &a, &mask))
		return ibv_create_qp_ex(id->id.verbs, attr);
	return h->create_qp_init(id->id.verbs, attr, &a, mask);
}

int rdma_create_qp_ex(struct rdma_cm_id *cid, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *id = (struct cm_id *)cid;
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr || cid->qp)
		return cm_err(EINVAL);
	if (!cid->verbs)
		return cm_err(EINVAL);
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		/* a target QP: an XRC domain, no PD, CQ or queue of its own */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = default_xrcd();
			if (!attr->xrcd)
				return -1;
			attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
		}
		attr->comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_PD;
		attr->pd = NULL;
		attr->send_cq = attr->recv_cq = NULL;
		attr->srq = NULL;
		memset(&attr->cap, 0, sizeof(attr->cap));
		goto create;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = cid->pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (!attr->pd || attr->pd->context != cid->verbs)
		return cm_err(EINVAL);
	if (attr->qp_type == IBV_QPT_XRC_SEND) {
		/* an initiator QP: a send queue only */
		attr->recv_cq = NULL;
		attr->srq = NULL;
		attr->cap.max_recv_wr = attr->cap.max_recv_sge = 0;
	}
	if ((!attr->send_cq || (!attr->recv_cq && attr->qp_type != IBV_QPT_XRC_SEND)) &&
	    create_cqs(id, attr->cap.max_send_wr, attr->cap.max_recv_wr, !attr->send_cq,
		       !attr->recv_cq && attr->qp_type != IBV_QPT_XRC_SEND))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = cid->send_cq;
	else if (!cid->send_cq)
		cid->send_cq = attr->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = cid->recv_cq;
	else if (!cid->recv_cq)
		cid->recv_cq = attr->recv_cq;
	if (!attr->srq && cid->srq && attr->qp_type != IBV_QPT_XRC_SEND)
		attr->srq = cid->srq;
create:
	qp = create_qp(id, attr);
	if (!qp) {
		ret = errno;
		destroy_cqs(id);
		return cm_err(ret);
	}
	cid->qp = qp;
	ret = qp_initial_state(id);
	if (ret) {
		cid->qp = NULL;
		ibv_destroy_qp(qp);
		destroy_cqs(id);
		return cm_err(-ret);
	}
	return 0;
}

int rdma_create_qp(struct rdma_cm_id *cid, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	int ret;

	if (!cid || !qp_init_attr)
		return cm_err(EINVAL);
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd ? pd : cid->pd;
	ret = rdma_create_qp_ex(cid, &ex);
	if (ret)
		return ret;
	/* the caps the QP got, and the CQs it uses, back to the caller */
	qp_init_attr->send_cq = ex.send_cq;
	qp_init_attr->recv_cq = ex.recv_cq;
	qp_init_attr->srq = ex.srq;
	qp_init_attr->cap = ex.cap;
	return 0;
}

void rdma_destroy_qp(struct rdma_cm_id *cid)
{
	struct cm_id *id = (struct cm_id *)cid;

	if (!id)
		return;
	if (cid->qp) {
		ibv_destroy_qp(cid->qp);
		cid->qp = NULL;
	}
	destroy_cqs(id);
}

int rdma_create_srq_ex(struct rdma_cm_id *cid, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!cid || !attr || !cid->verbs)
		return cm_err(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = cid->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		attr->srq_type = IBV_SRQT_BASIC;
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	if (attr->srq_type == IBV_SRQT_XRC &&
	    (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = default_xrcd();
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
	}
	if (attr->srq_type == IBV_SRQT_XRC && !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ)) {
		struct cm_id *id = (struct cm_id *)cid;

		if (!cid->recv_cq && create_cqs(id, 0, attr->attr.max_wr, false, true))
			return -1;
		attr->cq = cid->recv_cq;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(cid->verbs, attr);
	if (!srq)
		return -1;
	cid->srq = srq;
	return 0;
}

int rdma_create_srq(struct rdma_cm_id *cid, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	int ret;

	if (!cid || !attr)
		return cm_err(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	ex.pd = pd ? pd : cid->pd;
	ex.srq_type = cid->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ret = rdma_create_srq_ex(cid, &ex);
	if (!ret)
		attr->attr = ex.attr;
	return ret;
}

void rdma_destroy_srq(struct rdma_cm_id *cid)
{
	if (!cid || !cid->srq)
		return;
	ibv_destroy_srq(cid->srq);
	cid->srq = NULL;
}

int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *id;
	int ret;

	if (!out || !res)
		return cm_err(EINVAL);
	ret = rdma_create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space);
	if (ret)
		return ret;
	id = (struct cm_id *)cid;
	if (res->ai_qp_type)
		cid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cid, res->ai_src_addr);
		if (ret)
			goto err;
		if (qp_init_attr) {
			id->ep_qp = true;
			id->ep_pd = pd;
			id->ep_attr = *qp_init_attr;
			id->ep_attr.qp_type = (enum ibv_qp_type)res->ai_qp_type;
		}
		*out = cid;
		return 0;
	}
	ret = rdma_resolve_addr(cid, res->ai_src_len ? res->ai_src_addr : NULL, res->ai_dst_addr,
				2000);
	if (ret)
		goto err;
	ret = rdma_resolve_route(cid, 2000);
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		ret = rdma_create_qp(cid, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	*out = cid;
	return 0;
err:
	ret = errno;
	rdma_destroy_id(cid);
	return cm_err(ret);
}

void rdma_destroy_ep(struct rdma_cm_id *cid)
{
	if (!cid)
		return;
	rdma_destroy_qp(cid);
	rdma_destroy_srq(cid);
	rdma_destroy_id(cid);
}
