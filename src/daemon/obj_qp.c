/*
 * Queue pairs (CREATE_QP, MODIFY_QP, DESTROY_QP, OPEN_QP, WIRE_RX, and the
 * moves a CM request carries): a QP's queues in the arena and its number,
 * the state machine's checks and their effect (routing by GID over the
 * wire or on this host), XRC_RECV QPs that other clients open and that
 * outlive their creator (IBTA A14), and the member of the RoCEv2 engine's
 * socket group a client's QPs receive on.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/log.h"
#include "core/qp_state.h"
#include "core/shmlock.h"
#include "daemon/objects.h"
#include "engine/engine.h"
#include "transport/transport.h"
#include "wire/gid.h"

/*
 * The member of the RoCEv2 engine's receive socket group that c's QPs'
 * datagrams are steered to (layout.h, SR_RX_MEMBERS; their QPNs name it):
 * one of its own from its first QP while one is free, so that its polling
 * threads read only its own datagrams (datapath/wire_rx.c); else the engine's
 * (0).  Members go round, so that a freed one is not reused at once (late
 * datagrams for its old QPs find unknown QPNs).
 */
static uint32_t rx_member(struct sr_daemon *d, struct sr_client *c)
{
	unsigned n = sr_engine_rx_members();

	if (c->rx_member || c->internal || n < 2)
		return c->rx_member;
	for (unsigned i = 1; i < n; i++) {
		unsigned m = 1 + (d->rx_member_last + i - 1) % (n - 1);
		struct sr_rx_member *mb = &((struct sr_arena_hdr *)d->arena)->rx_members[m];

		if (d->rx_members_used & 1u << m)
			continue;
		d->rx_members_used |= 1u << m;
		d->rx_member_last = m;
		c->rx_member = m;
		atomic_store_explicit(&mb->poll_at, 0, memory_order_relaxed);
		break;
	}
	return c->rx_member;
}

void sr_rx_member_release(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_rx_member *mb = &((struct sr_arena_hdr *)d->arena)->rx_members[c->rx_member];

	if (!c->rx_member)
		return;
	atomic_store_explicit(&mb->poll_at, 0, memory_order_relaxed);
	d->rx_members_used &= ~(1u << c->rx_member);
	c->rx_member = 0;
	sr_engine_kick(); /* it reads the member from now on */
}

/* A receive half reads its member (datapath/wire_rx.c). */
int sr_op_wire_rx(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		  struct sr_op_io *io)
{
	io->out_fds[0] = c->rx_member ? sr_engine_rx_fd(c->rx_member) : -1;
	io->rep->handle = c->rx_member;
	if (io->out_fds[0] < 0)
		return -ENODEV;
	io->nout = 1;
	return 0;
}

/*
 * The random tag bits of a QPN.  SOFTRDMA_TEST_QPN_TAG=N (tests only) fixes
 * them, so two fresh daemons number their first QPs alike: the two-host
 * tests use it to give a local QP the number of a remote peer and check
 * that the peer's traffic is routed by GID first (docs/architecture.md).
 */
static uint32_t qpn_tag(struct sr_daemon *d, struct sr_client *c)
{
	static int fixed = -1;
	static uint32_t tag;

	if (fixed < 0) {
		const char *v = sr_env_str("SOFTRDMA_TEST_QPN_TAG");

		fixed = v != NULL;
		tag = fixed ? (uint32_t)strtoul(v, NULL, 0) : 0;
	}
	return fixed ? tag
		     : sr_qpn_member_rnd(sr_engine_rx_qpn_bits(rx_member(d, c)), sr_random32());
}

static int create_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_rep *rep)
{
	const __typeof__(req->u.create_qp) *r = &req->u.create_qp;
	bool xrc_recv = r->type == IBV_QPT_XRC_RECV, xrc_send = r->type == IBV_QPT_XRC_SEND;
	struct sr_obj *pd = sr_obj_owned(d, c, SR_OBJ_PD, r->pd);
	struct sr_obj *scq = sr_obj_owned(d, c, SR_OBJ_CQ, r->send_cq);
	struct sr_obj *rcq = sr_obj_owned(d, c, SR_OBJ_CQ, r->recv_cq);
	struct sr_obj *srq = NULL, *xrcd = NULL, *o;
	struct sr_req_qp_caps cap = r->cap;
	uint32_t sstride, rstride, scnt, rcnt;
	uint64_t off, got, hdr, sq_bytes, eng_off = 0, eng_size = 0;
	bool no_rq;
	struct sr_qp_shm *qp;
	int64_t idx;

	if (r->type != IBV_QPT_RC && r->type != IBV_QPT_UC && r->type != IBV_QPT_UD && !xrc_recv &&
	    !xrc_send)
		return -EOPNOTSUPP;
	if (!sr_event_fd_ok(d, c, r->async_fd_id))
		return -EINVAL;
	if (xrc_recv) {
		/* IBTA A14: an XRC target QP belongs to a domain, not a PD; it
		 * has no queues and no CQs (its SRQs have them) */
		xrcd = sr_obj_owned(d, c, SR_OBJ_XRCD, r->xrcd);
		if (!xrcd)
			return -EINVAL;
		pd = scq = rcq = NULL;
		memset(&cap, 0, sizeof(cap));
	} else if (xrc_send) {
		/* the initiator side: a send queue only */
		if (!pd || !scq || r->srqn)
			return -EINVAL;
		rcq = NULL;
		cap.max_recv_wr = cap.max_recv_sge = 0;
	} else if (!pd || !scq || !rcq) {
		return -EINVAL;
	}
	if (r->srqn) {
		srq = sr_obj_owned(d, c, SR_OBJ_SRQ, r->srqn);
		if (!srq || ((struct sr_srq_shm *)sr_arena_at(d->arena, srq->u.shm.off))->xrcd)
			return -EINVAL; /* an XRC SRQ is fed through XRC_RECV QPs only */
	}
	no_rq = srq || xrc_recv || xrc_send;
	if (cap.max_send_wr > SR_MAX_QP_WR || cap.max_send_sge > SR_MAX_SGE ||
	    cap.max_inline_data > SR_MAX_INLINE)
		return -EINVAL;
	if (!no_rq && (cap.max_recv_wr > SR_MAX_QP_WR || cap.max_recv_sge > SR_MAX_SGE))
		return -EINVAL;
	if (no_rq)
		cap.max_recv_wr = cap.max_recv_sge = 0;
	if (!cap.max_send_sge && !xrc_recv)
		cap.max_send_sge = 1;
	if (!no_rq && !cap.max_recv_sge)
		cap.max_recv_sge = 1;
	sstride = sr_wq_send_stride(cap.max_send_sge ? cap.max_send_sge : 1, cap.max_inline_data);
	rstride = sr_wq_recv_stride(cap.max_recv_sge ? cap.max_recv_sge : 1);
	scnt = roundup_pow2(cap.max_send_wr ? cap.max_send_wr : 1);
	rcnt = no_rq ? 0 : roundup_pow2(cap.max_recv_wr ? cap.max_recv_wr : 1);
	/* SR_WQ_FREED_BY_POLL: twice the slots of max_wr (layout.h) */
	hdr = align64(sizeof(*qp));
	sq_bytes = (uint64_t)scnt * sstride;
	off = sr_heap_alloc(d, hdr + sq_bytes + 2ull * rcnt * rstride, &got);
	if (!off)
		return -ENOMEM;
	/* a connected QP may have its peer on another host: the engine's
	 * state for it, in a chunk of its own (untouched, so costing no
	 * memory, unless the QP goes over the wire) */
	if (r->type != IBV_QPT_UD) {
		eng_off = sr_heap_alloc(d, sr_eng_state_size(scnt), &eng_size);
		if (!eng_off) {
			sr_heap_free(d, off, got);
			return -ENOMEM;
		}
	}
	idx = sr_idalloc_get(&d->qpn_ids);
	o = idx >= 0 ? sr_obj_new(c, SR_OBJ_QP) : NULL;
	if (!o) {
		if (idx >= 0)
			sr_idalloc_put(&d->qpn_ids, idx);
		sr_heap_free(d, off, got);
		sr_heap_free(d, eng_off, eng_size);
		return -ENOMEM;
	}
	if (xrcd)
		sr_obj_hold(o, xrcd); /* deps[0]: passed on with the QP (qp_pass_on) */
	if (pd)
		sr_obj_hold(o, pd);
	if (scq)
		sr_obj_hold(o, scq);
	if (rcq)
		sr_obj_hold(o, rcq);
	if (srq)
		sr_obj_hold(o, srq);
	o->handle = sr_qpn_make(idx, qpn_tag(d, c));
	o->u.shm.off = off;
	o->u.shm.size = got;
	o->u.shm.eng_off = eng_off;
	o->u.shm.eng_size = eng_size;
	d->qp_by_idx[idx] = o;

	qp = sr_arena_ptr(d->arena, off);
	qp->qpn = o->handle;
	qp->type = r->type;
	atomic_store_explicit(&qp->state, IBV_QPS_RESET, memory_order_relaxed);
	qp->pd = pd ? r->pd : 0;
	qp->xrcd = xrcd ? xrcd->u.xrcd.dom->id : 0;
	qp->owner_pid = c->pid;
	/* an XRC target QP lives while any process has it open (A14): the
	 * daemon, not its creator's exit, decides when it goes */
	qp->owner_life = r->type == IBV_QPT_XRC_RECV ? 0 : c->life;
	qp->async_fd_id = r->async_fd_id;
	qp->user_handle = r->user_handle;
	qp->srqn = r->srqn;
	qp->sq_sig_all = r->sq_sig_all;
	qp->send_cq_off = scq ? scq->u.shm.off : 0;
	qp->recv_cq_off = rcq ? rcq->u.shm.off : 0;
	qp->srq_off = srq ? srq->u.shm.off : 0;
	qp->port_num = 1;
	qp->eng_off = eng_off;
	sr_shm_lock_init(&qp->sq_lock);
	sr_shm_lock_init(&qp->rq_lock);
	sr_wq_init(&qp->sq, scnt, cap.max_send_sge, sstride - sizeof(struct sr_send_wqe), sstride,
		   off + hdr);
	if (xrc_recv)
		qp->sq.max_wr = 0; /* a ring of one, never posted to */
	if (!no_rq) {
		sr_wq_init(&qp->rq, 2 * rcnt, cap.max_recv_sge, 0, rstride, off + hdr + sq_bytes);
		qp->rq.max_wr = rcnt;
		qp->rq.flags = SR_WQ_FREED_BY_POLL;
	}
	atomic_store_explicit(&sr_arena_qptab(d->arena)[idx].obj_off, off, memory_order_release);

	rep->handle = o->handle;
	rep->u.qp.off = off;
	rep->u.qp.cap.max_send_wr = qp->sq.max_wr;
	rep->u.qp.cap.max_send_sge = cap.max_send_sge;
	rep->u.qp.cap.max_inline_data = xrc_recv ? 0 : qp->sq.max_inline;
	rep->u.qp.cap.max_recv_wr = no_rq ? 0 : qp->rq.max_wr;
	rep->u.qp.cap.max_recv_sge = no_rq ? 0 : cap.max_recv_sge;
	rep->u.qp.type = r->type;
	return 0;
}

/* The QP a client may modify or destroy: its own, or an XRC_RECV QP it
 * opened (ibv_open_qp); *ref is then the client's SR_OBJ_QPREF. */
static struct sr_obj *qp_for(struct sr_daemon *d, struct sr_client *c, uint32_t qpn,
			     struct sr_obj **ref)
{
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, qpn);

	*ref = NULL;
	if (!o || o->owner == c)
		return o && o->owner == c ? o : NULL;
	for (struct sr_obj *r = o->refs; r; r = r->ref_next)
		if (r->owner == c) {
			*ref = r;
			return o;
		}
	return NULL;
}

static void wq_reset(struct sr_wq *wq)
{
	atomic_store_explicit(&wq->head, 0, memory_order_relaxed);
	wq->tail_cache = 0;
	atomic_store_explicit(&wq->tail, 0, memory_order_relaxed);
}

/* Empties a receive ring.  Its WQEs carry their index (seq), so the indices
 * go on from head rather than back to 0, where a slot's old seq could pass
 * for a new one. */
static void rq_discard(struct sr_wq *wq)
{
	uint32_t head = atomic_load_explicit(&wq->head, memory_order_relaxed);

	wq->tail_cache = head;
	atomic_store_explicit(&wq->tail, head, memory_order_relaxed);
	atomic_store_explicit(&wq->polled, head, memory_order_relaxed);
	atomic_store_explicit(&wq->waiting, 0, memory_order_relaxed);
}

/*
 * Routing by GID: a connected QP (RC, UC, XRC) whose destination GID is
 * not one of this host's goes over the wire (RoCEv2, src/engine), whatever
 * its dest_qp_num may also name here; a local GID keeps the same-host path.
 * Only ah_attr with a GRH can name another host (RoCE requires one).
 */
static void wire_route(struct sr_daemon *d, struct sr_qp_shm *qp)
{
	struct ibv_ah_attr ah;
	bool local = false;

	static_assert(sizeof(ah) <= sizeof(qp->ah_attr), "ah_attr fits");
	memcpy(&ah, qp->ah_attr, sizeof(ah));
	qp->wire = 0;
	/* XRC (A14) as RC: an XRC_SEND QP whose target is on another host, and
	 * an XRC_RECV QP whose initiator is (RTR gives it the AV, as the
	 * kernel's table requires for XRC_TGT) */
	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC && qp->type != IBV_QPT_XRC_SEND &&
	     qp->type != IBV_QPT_XRC_RECV) ||
	    !ah.is_global)
		return;
	for (uint32_t i = 0; i < d->dev.gid_cnt; i++)
		if (!memcmp(d->dev.gids[i].gid, ah.grh.dgid.raw, 16))
			local = true;
	if (local || ah.grh.sgid_index >= d->dev.gid_cnt)
		return;
	memcpy(qp->sgid, d->dev.gids[ah.grh.sgid_index].gid, 16);
	memcpy(qp->dgid, ah.grh.dgid.raw, 16);
	qp->wire = 1;
}

static const struct sr_qp_limits qp_limits = {
    .port_count = 1,
    .pkey_table_len = SR_PKEY_TBL_LEN,
    .max_mtu = IBV_MTU_4096,
    .max_rd_atom = SR_MAX_RD_ATOM,
    .max_dest_rd_atom = SR_MAX_RD_ATOM,
    .max_send_wr = SR_MAX_QP_WR,
    .max_recv_wr = SR_MAX_QP_WR,
    .max_send_sge = SR_MAX_SGE,
    .max_recv_sge = SR_MAX_SGE,
    .max_inline_data = SR_MAX_INLINE,
    .grh_required = true, /* the port's link layer is Ethernet */
};

/* Checks one modify against the QP's state now: its next state in *next. */
static int qp_modify_check(struct sr_qp_shm *qp, const struct ibv_qp_attr *a, uint32_t mask,
			   enum ibv_qp_state *next)
{
	int ret;

	ret = sr_qp_modify_check(qp->type, atomic_load_explicit(&qp->state, memory_order_acquire),
				 a, mask, &qp_limits, next);
	if (ret)
		return ret;
	if (mask & IBV_QP_CAP)
		return -EINVAL; /* resizing a QP's queues is not supported */
	return 0;
}

/* Applies a checked modify; the caller holds the QP's three locks. */
static void qp_modify_apply(struct sr_daemon *d, struct sr_qp_shm *qp, const struct ibv_qp_attr *a,
			    uint32_t mask, enum ibv_qp_state next)
{
	/* what the check ignores for XRC (qp_state.h) is not applied either */
	if (qp->type == IBV_QPT_XRC_SEND)
		mask &= ~(uint32_t)(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	else if (qp->type == IBV_QPT_XRC_RECV)
		mask &= ~(uint32_t)(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
	if (mask & IBV_QP_PKEY_INDEX)
		qp->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->port_num = a->port_num;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->access = a->qp_access_flags;
	if (mask & IBV_QP_QKEY)
		qp->qkey = a->qkey;
	if (mask & IBV_QP_AV)
		memcpy(qp->ah_attr, &a->ah_attr, sizeof(qp->ah_attr));
	if (mask & IBV_QP_ALT_PATH) {
		memcpy(qp->alt_ah_attr, &a->alt_ah_attr, sizeof(qp->alt_ah_attr));
		qp->alt_port_num = a->alt_port_num;
		qp->alt_pkey_index = a->alt_pkey_index;
		qp->alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_PATH_MTU)
		qp->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		qp->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		qp->rq_psn = a->rq_psn & SR_QP_PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		qp->sq_psn = a->sq_psn & SR_QP_PSN_MASK;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		qp->dest_qpn = a->dest_qp_num;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->en_sqd_async_notify = a->en_sqd_async_notify;
	if (next == IBV_QPS_RESET) {
		/* IBTA 10.3.1: RESET discards every outstanding WQE */
		wq_reset(&qp->sq);
		if (!qp->srqn)
			rq_discard(&qp->rq);
		qp->exec_pos = 0;
		atomic_store(&qp->stalled, SR_STALL_NONE);
		atomic_store(&qp->flush_pending, 0);
	}
	if (next == IBV_QPS_RESET)
		qp->wire = 0;
	else if (next == IBV_QPS_RTR && (mask & IBV_QP_AV))
		wire_route(d, qp);
	/* The engine starts this QP's transport state over (PSNs, the
	 * responder's expected PSN and duplicate detection) only for a new
	 * connection: a reset, or a new peer or PSN at RTR.  Not for RTR->RTS
	 * (the requester takes sq_psn when it first sends) nor for attribute
	 * changes in RTS (libfabric sets min_rnr_timer after ESTABLISHED):
	 * starting over then took the expected PSN back to rq_psn, and a
	 * retransmitted SEND already delivered was delivered again. */
	if (next == IBV_QPS_RESET || (mask & (IBV_QP_AV | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN)))
		atomic_fetch_add_explicit(&qp->wire_gen, 1, memory_order_release);
	atomic_store_explicit(&qp->state, next, memory_order_release);
}

/* After a move from prev (the QP's locks let go: the engine takes
 * wtx_lock before sq_lock): an RC QP to another host that can now send
 * has its requester set up and its posting threads granted before the
 * move returns, so that the connection's first message leaves from the
 * thread that posts it (transport/req.c, sr_eng_req_rts).  The engine is not
 * rung: woken now, it would meet the application's first post half done
 * and send that WQE itself; the posting thread rings it after its send. */
static void wire_rts(struct sr_daemon *d, const struct sr_obj *o, struct sr_qp_shm *qp,
		     uint32_t prev)
{
	if (prev != IBV_QPS_RTS && o->u.shm.eng_off && qp->wire &&
	    atomic_load_explicit(&qp->state, memory_order_acquire) == IBV_QPS_RTS)
		sr_eng_req_rts(d->arena, qp, sr_arena_at(d->arena, o->u.shm.eng_off),
			       o->u.shm.eng_size);
}

static bool qp_lock(struct sr_qp_shm *qp)
{
	return !sr_lock_all((struct sr_lock *[]){&qp->sq_lock, &qp->rq_lock, &qp->rq.prod_lock}, 3);
}

static void qp_unlock(struct sr_qp_shm *qp)
{
	sr_shm_unlock(&qp->rq.prod_lock);
	sr_shm_unlock(&qp->rq_lock);
	sr_shm_unlock(&qp->sq_lock);
}

/*
 * A path's source and destination GIDs must be of one family: RoCEv2 puts
 * a packet whose GIDs are both IPv4-mapped in an IPv4 datagram and any
 * other pair in an IPv6 one (Annex A17.4.5.1), so an IPv4-mapped source
 * with an IPv6 destination (or the reverse) names no route, and a RoCE
 * device refuses it when it resolves the path at modify_qp (EINVAL), as
 * the kernel's address resolution does.  Accepted, every packet of the QP
 * would die at the peer for its ICRC.  The source GID must exist.
 */
static int path_check(struct sr_daemon *d, const struct sr_obj *o, const struct ibv_ah_attr *ah,
		      const char *which)
{
	const uint8_t *sgid;

	if (!ah->is_global)
		return 0;
	if (ah->grh.sgid_index >= d->dev.gid_cnt) {
		sr_warn("qp %u: %s sgid_index %u: the GID table has %u entries", o->handle, which,
			ah->grh.sgid_index, d->dev.gid_cnt);
		return -EINVAL;
	}
	sgid = d->dev.gids[ah->grh.sgid_index].gid;
	if (sr_gid_is_v4(sgid) != sr_gid_is_v4(ah->grh.dgid.raw)) {
		char s[INET6_ADDRSTRLEN], g[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, sgid, s, sizeof(s));
		inet_ntop(AF_INET6, ah->grh.dgid.raw, g, sizeof(g));
		sr_warn("qp %u: %s sgid %s (index %u) and dgid %s are of different families "
			"(IPv4-mapped and IPv6): RoCEv2 has no route between them",
			o->handle, which, s, ah->grh.sgid_index, g);
		return -EINVAL;
	}
	return 0;
}

int sr_op_modify_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	struct sr_obj *ref, *o = qp_for(d, c, req->handle, &ref);
	uint32_t mask = req->u.modify_qp.attr_mask;
	enum ibv_qp_state next;
	struct ibv_qp_attr a;
	struct sr_qp_shm *qp;
	uint32_t prev;
	int ret;

	if (!o)
		return -EINVAL;
	qp = sr_arena_at(d->arena, o->u.shm.off);
	sr_qp_attr_from_wire(&req->u.modify_qp.attr, &a);
	ret = qp_modify_check(qp, &a, mask, &next);
	if (!ret && (mask & IBV_QP_AV))
		ret = path_check(d, o, &a.ah_attr, "primary path:");
	if (!ret && (mask & IBV_QP_ALT_PATH))
		ret = path_check(d, o, &a.alt_ah_attr, "alternate path:");
	if (ret)
		return ret;
	if (!qp_lock(qp))
		return SR_RETRY;
	prev = atomic_load_explicit(&qp->state, memory_order_relaxed);
	qp_modify_apply(d, qp, &a, mask, next);
	qp_unlock(qp);
	wire_rts(d, o, qp, prev);
	rep->u.modify_qp.state = next;
	return 0;
}

/* CREATE_QP with the modify librdmacm makes next (INIT): checked before
 * the QP exists, so a bad one creates nothing, as rdma_create_qp leaves
 * nothing when its INIT fails. */
int sr_op_create_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	uint32_t mask = req->u.create_qp.init_mask;
	enum ibv_qp_state next = IBV_QPS_RESET;
	struct ibv_qp_attr a = {0};
	struct sr_qp_shm *qp;
	int ret;

	if (mask) {
		sr_qp_attr_from_wire(&req->u.create_qp.init, &a);
		ret = sr_qp_modify_check(req->u.create_qp.type, IBV_QPS_RESET, &a, mask, &qp_limits,
					 &next);
		if (ret)
			return ret;
		if (mask & IBV_QP_CAP)
			return -EINVAL;
	}
	ret = create_qp(d, c, req, rep);
	rep->u.qp.state = IBV_QPS_RESET;
	if (ret || !mask)
		return ret;
	qp = sr_arena_at(d->arena, rep->u.qp.off);
	if (!qp_lock(qp))
		return 0; /* nobody holds a new QP's locks; else the library moves it */
	qp_modify_apply(d, qp, &a, mask, next);
	qp_unlock(qp);
	rep->u.qp.state = next;
	return 0;
}

static bool same_process(const struct sr_client *a, const struct sr_client *c)
{
	return a && a->pid == c->pid && a->uid == c->uid;
}

/* A QP of the process c belongs to, made or opened through any of its
 * connections (librdmacm's is not the one its verbs context uses). */
static struct sr_obj *qp_of_process(struct sr_daemon *d, struct sr_client *c, uint32_t qpn)
{
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, qpn);

	if (!o || same_process(o->owner, c))
		return o;
	for (struct sr_obj *r = o->refs; r; r = r->ref_next)
		if (same_process(r->owner, c))
			return o;
	return NULL;
}

int sr_qp_moves(struct sr_daemon *d, struct sr_client *c, const struct sr_cm_qp_moves *m, int from)
{
	struct sr_obj *o;
	struct sr_qp_shm *qp;
	uint32_t prev;
	int ret = 0;

	if (!m->n)
		return 0;
	o = qp_of_process(d, c, m->qpn);
	if (!o || m->n > SR_CM_QP_MOVES)
		return -EINVAL;
	qp = sr_arena_at(d->arena, o->u.shm.off);
	if (!qp_lock(qp))
		return SR_RETRY; /* nothing moved yet: run again as a whole */
	prev = atomic_load_explicit(&qp->state, memory_order_relaxed);
	if (from >= 0 && prev != (uint32_t)from)
		ret = -EINVAL;
	for (uint32_t i = 0; i < m->n && !ret; i++) {
		enum ibv_qp_state next;
		struct ibv_qp_attr a;

		sr_qp_attr_from_wire(&m->attr[i], &a);
		ret = qp_modify_check(qp, &a, m->mask[i], &next);
		if (!ret)
			qp_modify_apply(d, qp, &a, m->mask[i], next);
	}
	qp_unlock(qp);
	wire_rts(d, o, qp, prev);
	return ret;
}

/* An XRC_RECV QP whose owner destroys it (or goes) while other clients
 * have it open passes to the first of them, with that client's use of its
 * XRCD handle, async event fd and handle, instead of being destroyed. */
static void qp_pass_on(struct sr_daemon *d, struct sr_obj *o)
{
	struct sr_qp_shm *qp = sr_arena_at(d->arena, o->u.shm.off);
	struct sr_obj *r = o->refs;

	o->refs = r->ref_next;
	o->deps[0]->users--;
	o->deps[0] = r->deps[0]; /* r's use of its XRCD handle, taken over */
	r->deps[0] = NULL;
	sr_obj_give(o, r->owner);
	qp->owner_pid = r->owner->pid;
	qp->async_fd_id = r->u.qpref.async_fd_id;
	qp->user_handle = r->u.qpref.user_handle;
	sr_handle_free(d, r);
	sr_obj_unlink(r);
}

/* A client's ibv_destroy_qp of a QP it opened, or its teardown. */
void sr_qpref_destroy(struct sr_daemon *d, struct sr_obj *r)
{
	struct sr_obj *qp = r->u.qpref.qp;

	for (struct sr_obj **p = &qp->refs; *p; p = &(*p)->ref_next) {
		if (*p == r) {
			*p = r->ref_next;
			break;
		}
	}
	sr_handle_free(d, r);
	sr_obj_unlink(r);
}

int sr_op_open_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		  struct sr_op_io *io)
{
	struct sr_rep *rep = io->rep;
	struct sr_obj *xrcd = sr_obj_owned(d, c, SR_OBJ_XRCD, req->u.open_qp.xrcd);
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, req->handle), *r;
	struct sr_qp_shm *qp;
	int ret;

	/* as the kernel's ib_open_qp: an XRC target QP of the opener's domain */
	if (!xrcd || !o || !sr_event_fd_ok(d, c, req->u.open_qp.async_fd_id))
		return -EINVAL;
	qp = sr_arena_at(d->arena, o->u.shm.off);
	if (qp->type != IBV_QPT_XRC_RECV || qp->xrcd != xrcd->u.xrcd.dom->id)
		return -EINVAL;
	ret = sr_obj_new_numbered(d, c, SR_OBJ_QPREF, &r);
	if (ret)
		return ret;
	sr_obj_hold(r, xrcd); /* deps[0], as a QP's: its XRCD is busy while it is open */
	r->u.qpref.qp = o;
	r->u.qpref.async_fd_id = req->u.open_qp.async_fd_id;
	r->u.qpref.user_handle = req->u.open_qp.user_handle;
	r->ref_next = o->refs;
	o->refs = r;
	rep->handle = o->handle;
	rep->u.qp.off = o->u.shm.off;
	rep->u.qp.type = qp->type;
	return 0;
}

int sr_op_destroy_qp(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_op_io *io)
{
	struct sr_obj *o = sr_obj_lookup(d, SR_OBJ_QP, req->handle);

	if (!o)
		return -EINVAL;
	if (req->u.open_qp.xrcd) { /* the library's handle from ibv_open_qp */
		for (struct sr_obj *r = o->refs; r; r = r->ref_next) {
			if (r->owner == c && r->deps[0] &&
			    r->deps[0]->handle == req->u.open_qp.xrcd) {
				sr_qpref_destroy(d, r);
				return 0;
			}
		}
		/* none left: the QP passed to this client when its creator went */
		if (o->owner != c)
			return -EINVAL;
	}
	if (o->owner != c)
		return -EINVAL;
	if (o->users)
		return -EBUSY;
	sr_qp_destroy(d, o);
	return 0;
}

/* A connected QP's responder over the wire: the engine answers a repeat
 * of its last message after it is gone (transport/resp.c, sr_eng_resp_gone).
 * Read under the QP's lock, which the daemon never waits for: a holder
 * that died is taken over, a live one (the engine, a polling thread) is
 * given a few turns, and a stopped one leaves nothing noted. */
static void qp_note_gone(struct sr_daemon *d, struct sr_qp_shm *qp, uint64_t eng_off)
{
	struct sr_eng_qp *q = sr_arena_at(d->arena, eng_off);
	struct sr_eng_gone g;
	int tries = 0;
	bool ok;

	if (!qp->wire || (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_XRC_RECV))
		return;
	while (sr_shm_lock_nowait(&qp->wtx_lock)) {
		if (++tries > 64)
			return;
		sched_yield();
	}
	ok = q->qpn == qp->qpn &&
	     q->gen == atomic_load_explicit(&qp->wire_gen, memory_order_acquire) &&
	     q->resp.resp_init;
	if (ok) {
		g.qpn = qp->qpn;
		g.dest_qpn = qp->dest_qpn;
		g.psn = sr_psn_add(q->resp.epsn, SR_PSN_MASK);
		g.msn = q->resp.msn;
		memcpy(g.sgid, qp->sgid, 16);
		memcpy(g.dgid, qp->dgid, 16);
	}
	sr_shm_unlock(&qp->wtx_lock);
	if (ok)
		sr_engine_gone(&g);
}

static void qp_free(struct sr_daemon *d, struct sr_obj *o)
{
	uint32_t idx = sr_qpn_index(o->handle);
	struct sr_qp_shm *qp = sr_arena_at(d->arena, o->u.shm.off);
	struct sr_arena_hdr *h = d->arena;

	for (int c = 0; c < SR_CNT_MAX; c++) /* keep the host totals */
		h->counters[c] += atomic_load_explicit(&qp->cnt[c], memory_order_relaxed);

	if (qp->type == IBV_QPT_UD) /* only UD QPs join groups */
		sr_mcast_detach_qp(d, o->handle, NULL);
	if (o->u.shm.eng_off)
		qp_note_gone(d, qp, o->u.shm.eng_off);
	atomic_store_explicit(&sr_arena_qptab(d->arena)[idx].obj_off, 0, memory_order_release);
	d->qp_by_idx[idx] = NULL;
	sr_idalloc_put(&d->qpn_ids, idx);
	sr_heap_free_later(d, o->u.shm.off, o->u.shm.size);
	if (o->u.shm.eng_off)
		sr_heap_free_later(d, o->u.shm.eng_off, o->u.shm.eng_size);
	sr_obj_unlink(o);
}

/* A QP's end, at DESTROY_QP or its owner's teardown: one that other
 * clients have open passes to one of them and lives on (IBTA A14). */
void sr_qp_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	if (o->refs)
		qp_pass_on(d, o);
	else
		qp_free(d, o);
}
