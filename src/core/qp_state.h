/*
 * QP state machine checks for ibv_modify_qp. This is a pure module: given a
 * QP's transport type, its current state, the caller's ibv_qp_attr and mask,
 * and the device limits, it decides whether the request is a legal IBTA
 * transition (IBTA Vol. 1, 10.3 "QP state machine" and 11.2.5 "Modify QP",
 * the same rules Linux encodes in ib_modify_qp_is_ok()), whether every
 * required attribute is present and no foreign one is, and whether the
 * supplied values are in range. It never changes the QP; the caller (the
 * daemon) applies the attributes after a successful check.
 */
#ifndef SOFTRDMA_CORE_QP_STATE_H
#define SOFTRDMA_CORE_QP_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct sr_qp_limits {		  /* device/port limits used for value checks */
	uint8_t port_count;	  /* valid ports are 1..port_count */
	uint16_t pkey_table_len;  /* pkey_index must be < this */
	enum ibv_mtu max_mtu;	  /* path_mtu must be IBV_MTU_256..max_mtu */
	uint8_t max_rd_atom;	  /* max_rd_atomic (initiator depth) limit */
	uint8_t max_dest_rd_atom; /* max_dest_rd_atomic (responder) limit */
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge,
	    max_inline_data; /* for IBV_QP_CAP */
	bool grh_required;   /* RoCE port: every AV (primary, alternate) has a GRH */
};

/*
 * PSNs are 24 bits (IBTA 9.7.1). Like Linux (_ib_modify_qp), out-of-range
 * sq_psn/rq_psn values are accepted by sr_qp_modify_check(); the caller must
 * store (psn & SR_QP_PSN_MASK).
 */
#define SR_QP_PSN_MASK 0xFFFFFFu
/* QPNs are 24 bits; dest_qp_num above this is rejected. */
#define SR_QP_QPN_MASK 0xFFFFFFu

/*
 * Checks a modify request; returns 0 and sets *next, or -EINVAL. cur is the
 * QP's current state. Supported types: IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
 * IBV_QPT_XRC_SEND and IBV_QPT_XRC_RECV (anything else gives -EINVAL).
 *
 * For XRC types the bits Linux silently drops (uverbs modify_qp_mask()) are
 * ignored here too: IBV_QP_MAX_DEST_RD_ATOMIC and IBV_QP_MIN_RNR_TIMER on
 * XRC_SEND, IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_RETRY_CNT and IBV_QP_RNR_RETRY
 * on XRC_RECV. The caller must not apply those attributes.
 */
int sr_qp_modify_check(enum ibv_qp_type type, enum ibv_qp_state cur, const struct ibv_qp_attr *attr,
		       int attr_mask, const struct sr_qp_limits *lim, enum ibv_qp_state *next);

/* A QP in state s takes requests as a responder (IBTA 10.3.1: RTR and
 * after, until ERR). */
static inline bool sr_qps_can_receive(uint32_t s)
{
	return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

/* A reliable service: ACKs, NAKs, RNR and retries (RC; XRC, whose send
 * half is a requester and receive half a responder). */
static inline bool sr_qpt_reliable(uint32_t type)
{
	return type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;
}

/* "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"; "UNKNOWN" otherwise. */
const char *sr_qp_state_name(enum ibv_qp_state s);

#endif /* SOFTRDMA_CORE_QP_STATE_H */
