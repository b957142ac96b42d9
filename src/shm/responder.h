/*
 * What a request does at its responder, for requests that arrive from the
 * wire (src/transport/resp.c).  These are the same-host executor's own
 * functions (exec.c): the key and access checks, atomics, receive-WQE
 * consumption and scatter, completions, invalidation and the move to ERR
 * are one implementation for both paths, so a program cannot tell which
 * path its peer is on except by the latency.
 */
#ifndef SR_SHM_RESPONDER_H
#define SR_SHM_RESPONDER_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <softrdma/layout.h>

struct sr_devctx;

/* A message that fits one packet, into the responder's next receive WQE
 * (w: opcode, imm_or_inv, flags of the request; grh: UD's 40 bytes).
 * 0: delivered (or dropped, UC/UD); -EAGAIN: no receive posted (RC: RNR
 * NAK); -EIO: failed, *req_status is what the requester completes with and
 * the responder's QP must go to ERR (RC). */
int sr_resp_deliver(struct sr_devctx *ctx, struct sr_qp_shm *t, uint32_t sender_type,
		    uint32_t src_qpn, const struct sr_send_wqe *w, const void *payload,
		    uint32_t len, const uint8_t *grh, enum ibv_wc_status *req_status);

/* The QPNs attached to multicast group `mgid` (at most SR_MAX_MCAST_ATTACH,
 * into qpn); 0 if none. */
uint32_t sr_mcast_members(void *arena, const uint8_t *mgid, uint32_t *qpn);

/* `xrc_srqn` below: for an XRC_RECV QP, the SRQ the request names (its
 * XRCETH), whose PD the keys must be of (A14); ignored for other QPs. */

/* False if t is an XRC_RECV QP and xrc_srqn no XRC SRQ of its domain: the
 * request is invalid (an RDMA WRITE is NAKed so before it writes). */
bool sr_resp_xrc_ok(struct sr_devctx *ctx, const struct sr_qp_shm *t, uint32_t xrc_srqn);

/* RDMA WRITE / READ target range: true and *p if the responder QP and the
 * rkey allow `need` on [va, va + len). */
bool sr_resp_rkey(struct sr_devctx *ctx, struct sr_qp_shm *t, uint32_t xrc_srqn, uint32_t rkey,
		  uint64_t va, uint64_t len, uint32_t need, void **p);

/* An atomic at the responder (wr_opcode: IBV_WR_ATOMIC_*): SUCCESS and the
 * original value, or the requester's error status. */
enum ibv_wc_status sr_resp_atomic(struct sr_devctx *ctx, struct sr_qp_shm *t, uint32_t xrc_srqn,
				  uint8_t wr_opcode, uint64_t va, uint32_t rkey,
				  uint64_t compare_add, uint64_t swap, uint64_t *orig);

/* A receive WQE taken for a message of several packets. */
struct sr_recv_ticket {
	uint64_t wr_id;
	uint64_t cap; /* bytes its scatter list holds */
	uint32_t index;
	uint32_t num_sge;
	uint32_t srqn; /* set by the caller: XRC, the XRCETH's SRQ number; else 0 */
	uint32_t pd;   /* set by take: the PD of the receive buffers' keys */
	struct sr_sge_shm sge[SR_MAX_SGE];
};

/* Takes the next receive WQE (RC raises the RNR handshake flag when there
 * is none); -EAGAIN if there is none, -EINVAL if tk->srqn is no XRC SRQ of
 * the XRC_RECV QP's domain (an invalid request). */
int sr_resp_recv_take(struct sr_devctx *ctx, struct sr_qp_shm *t, bool rc,
		      struct sr_recv_ticket *tk);
/* Scatters `len` payload bytes at message offset `off`: SUCCESS,
 * LOC_LEN_ERR (past the buffers) or LOC_PROT_ERR (a key no longer valid). */
enum ibv_wc_status sr_resp_recv_put(struct sr_devctx *ctx, struct sr_qp_shm *t,
				    const struct sr_recv_ticket *tk, uint64_t off,
				    const void *payload, uint32_t len);
/* Completes the WQE (st: SUCCESS or what sr_resp_recv_put returned; on
 * success the opcode's immediate or invalidation applies, which may itself
 * fail).  Returns SUCCESS, or the status the requester completes with
 * (RC: the NAK's). */
enum ibv_wc_status sr_resp_recv_finish(struct sr_devctx *ctx, struct sr_qp_shm *t,
				       const struct sr_recv_ticket *tk, enum ibv_wc_status st,
				       uint8_t wr_opcode, uint32_t byte_len, uint32_t imm_or_inv,
				       uint32_t src_qpn, bool solicited, bool grh);

/* A local operation of a wire QP's send queue (BIND_MW, LOCAL_INV), as the
 * same-host executor does it: SUCCESS or the completion's error status. */
enum ibv_wc_status sr_exec_local_op(struct sr_devctx *ctx, struct sr_qp_shm *qp,
				    struct sr_send_wqe *w);

/* The responder's QP to ERR after a failed request (RC), with its flushes. */
void sr_resp_to_error(struct sr_devctx *ctx, struct sr_qp_shm *t);

#endif
