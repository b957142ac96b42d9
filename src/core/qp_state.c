/*
 * IBTA queue pair state machine for ibv_modify_qp. The const rule table below
 * lists, for every legal (current state, next state) pair and every supported
 * transport, the attribute-mask bits the consumer must supply and the bits it
 * may supply (IBTA Vol. 1 rel. 1.4, 11.2.5.2 "Modify Queue Pair" and Table
 * "QP state transition properties"; the same facts Linux keeps in
 * drivers/infiniband/core/verbs.c for ib_modify_qp_is_ok()). Any state may go
 * to RESET or ERR with no other attribute. After the mask check each present
 * attribute is range-checked against the device limits. No state is kept
 * here; the daemon owns the QP and applies the attributes on success.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "qp_state.h"

/* Transport columns of the rule table. */
enum sr_qp_col {
	SR_COL_RC,
	SR_COL_UC,
	SR_COL_UD,
	SR_COL_XRC_SEND, /* XRC initiator: RC send side */
	SR_COL_XRC_RECV, /* XRC target: RC receive side */
	SR_COL_NUM
};

/* Short names so the table stays readable. */
#define M_CUR	IBV_QP_CUR_STATE
#define M_SQDN	IBV_QP_EN_SQD_ASYNC_NOTIFY
#define M_ACC	IBV_QP_ACCESS_FLAGS
#define M_PKEY	IBV_QP_PKEY_INDEX
#define M_PORT	IBV_QP_PORT
#define M_QKEY	IBV_QP_QKEY
#define M_AV	IBV_QP_AV
#define M_MTU	IBV_QP_PATH_MTU
#define M_TMO	IBV_QP_TIMEOUT
#define M_RTY	IBV_QP_RETRY_CNT
#define M_RNRR	IBV_QP_RNR_RETRY
#define M_RQPSN IBV_QP_RQ_PSN
#define M_RDAT	IBV_QP_MAX_QP_RD_ATOMIC
#define M_ALT	IBV_QP_ALT_PATH
#define M_RNRT	IBV_QP_MIN_RNR_TIMER
#define M_SQPSN IBV_QP_SQ_PSN
#define M_DRDAT IBV_QP_MAX_DEST_RD_ATOMIC
#define M_MIG	IBV_QP_PATH_MIG_STATE
#define M_DQPN	IBV_QP_DEST_QPN

/* Attributes that may be changed while RTS/SQD → RTS (connected types). */
#define M_RC_RTS_OPT (M_CUR | M_ALT | M_ACC | M_RNRT | M_MIG)
#define M_UC_RTS_OPT (M_CUR | M_ALT | M_ACC | M_MIG)
#define M_UD_RTS_OPT (M_CUR | M_QKEY)

struct sr_qp_rule {
	enum ibv_qp_state from;
	enum ibv_qp_state to;
	uint32_t req[SR_COL_NUM];
	uint32_t opt[SR_COL_NUM];
};

/*
 * Legal transitions other than "any → RESET" and "any → ERR". Column order:
 * RC, UC, UD, XRC_SEND, XRC_RECV.
 */
static const struct sr_qp_rule
    sr_qp_rules[] =
	{
	    /* Reset → Init: bind the QP to a port and partition (IBTA 10.3.1.2). */
	    {IBV_QPS_RESET, IBV_QPS_INIT,
	     .req =
		 {
		     [SR_COL_RC] = M_PKEY | M_PORT | M_ACC,
		     [SR_COL_UC] = M_PKEY | M_PORT | M_ACC,
		     [SR_COL_UD] = M_PKEY | M_PORT | M_QKEY,
		     [SR_COL_XRC_SEND] = M_PKEY | M_PORT | M_ACC,
		     [SR_COL_XRC_RECV] = M_PKEY | M_PORT | M_ACC,
		 }},
	    /* Init → Init: the Reset → Init attributes may be changed again. */
	    {IBV_QPS_INIT, IBV_QPS_INIT,
	     .opt =
		 {
		     [SR_COL_RC] = M_PKEY | M_PORT | M_ACC,
		     [SR_COL_UC] = M_PKEY | M_PORT | M_ACC,
		     [SR_COL_UD] = M_PKEY | M_PORT | M_QKEY,
		     [SR_COL_XRC_SEND] = M_PKEY | M_PORT | M_ACC,
		     [SR_COL_XRC_RECV] = M_PKEY | M_PORT | M_ACC,
		 }},
	    /* Init → RTR: the receive side learns its peer (IBTA 10.3.1.3). */
	    {IBV_QPS_INIT, IBV_QPS_RTR,
	     .req =
		 {
		     [SR_COL_RC] = M_AV | M_MTU | M_DQPN | M_RQPSN | M_DRDAT | M_RNRT,
		     [SR_COL_UC] = M_AV | M_MTU | M_DQPN | M_RQPSN,
		     [SR_COL_UD] = 0,
		     [SR_COL_XRC_SEND] = M_AV | M_MTU | M_DQPN | M_RQPSN,
		     [SR_COL_XRC_RECV] = M_AV | M_MTU | M_DQPN | M_RQPSN | M_DRDAT | M_RNRT,
		 },
	     .opt =
		 {
		     [SR_COL_RC] = M_ALT | M_ACC | M_PKEY,
		     [SR_COL_UC] = M_ALT | M_ACC | M_PKEY,
		     [SR_COL_UD] = M_PKEY | M_QKEY,
		     [SR_COL_XRC_SEND] = M_ALT | M_ACC | M_PKEY,
		     [SR_COL_XRC_RECV] = M_ALT | M_ACC | M_PKEY,
		 }},
	    /* RTR → RTS: the send side gets its PSN and retry policy (IBTA 10.3.1.4). */
	    {IBV_QPS_RTR, IBV_QPS_RTS,
	     .req =
		 {
		     [SR_COL_RC] = M_TMO | M_RTY | M_RNRR | M_SQPSN | M_RDAT,
		     [SR_COL_UC] = M_SQPSN,
		     [SR_COL_UD] = M_SQPSN,
		     [SR_COL_XRC_SEND] = M_TMO | M_RTY | M_RNRR | M_SQPSN | M_RDAT,
		     [SR_COL_XRC_RECV] = M_TMO | M_SQPSN,
		 },
	     .opt =
		 {
		     [SR_COL_RC] = M_RC_RTS_OPT,
		     [SR_COL_UC] = M_UC_RTS_OPT,
		     [SR_COL_UD] = M_UD_RTS_OPT,
		     [SR_COL_XRC_SEND] = M_UC_RTS_OPT,
		     [SR_COL_XRC_RECV] = M_RC_RTS_OPT,
		 }},
	    /* RTS → RTS: run-time tuning. */
	    {IBV_QPS_RTS, IBV_QPS_RTS,
	     .opt =
		 {
		     [SR_COL_RC] = M_RC_RTS_OPT,
		     [SR_COL_UC] = M_UC_RTS_OPT,
		     [SR_COL_UD] = M_UD_RTS_OPT,
		     [SR_COL_XRC_SEND] = M_UC_RTS_OPT,
		     [SR_COL_XRC_RECV] = M_RC_RTS_OPT,
		 }},
	    /* RTS → SQD: drain the send queue (IBTA 10.3.1.5). */
	    {IBV_QPS_RTS, IBV_QPS_SQD,
	     .opt =
		 {
		     [SR_COL_RC] = M_SQDN,
		     [SR_COL_UC] = M_SQDN,
		     [SR_COL_UD] = M_SQDN,
		     [SR_COL_XRC_SEND] = M_SQDN,
		     [SR_COL_XRC_RECV] = M_SQDN,
		 }},
	    /* SQD → RTS: resume. */
	    {IBV_QPS_SQD, IBV_QPS_RTS,
	     .opt =
		 {
		     [SR_COL_RC] = M_RC_RTS_OPT,
		     [SR_COL_UC] = M_UC_RTS_OPT,
		     [SR_COL_UD] = M_UD_RTS_OPT,
		     [SR_COL_XRC_SEND] = M_UC_RTS_OPT,
		     [SR_COL_XRC_RECV] = M_RC_RTS_OPT,
		 }},
	    /* SQD → SQD: the path and most transport parameters may be reloaded. */
	    {IBV_QPS_SQD, IBV_QPS_SQD,
	     .opt =
		 {
		     [SR_COL_RC] = M_PORT | M_AV | M_TMO | M_RTY | M_RNRR | M_RDAT | M_DRDAT |
				   M_ALT | M_ACC | M_PKEY | M_RNRT | M_MIG,
		     [SR_COL_UC] = M_AV | M_ALT | M_ACC | M_PKEY | M_MIG,
		     [SR_COL_UD] = M_PKEY | M_QKEY,
		     [SR_COL_XRC_SEND] = M_PORT | M_AV | M_TMO | M_RTY | M_RNRR | M_RDAT |
					 M_ALT | M_ACC | M_PKEY | M_MIG,
		     [SR_COL_XRC_RECV] =
			 M_PORT | M_AV | M_TMO | M_DRDAT | M_ALT | M_ACC | M_PKEY | M_RNRT | M_MIG,
		 }},
	    /*
	     * SQE → RTS: recover from a send error (IBTA 10.3.1.7). Only UD and UC
	     * ever enter SQE (an RC error goes to ERR); the RC/XRC rows accept the
	     * bare state change like Linux does.
	     */
	    {IBV_QPS_SQE, IBV_QPS_RTS,
	     .opt =
		 {
		     [SR_COL_UC] = M_CUR | M_ACC,
		     [SR_COL_UD] = M_CUR | M_QKEY,
		 }},
};

#define SR_QP_RULES_NUM (sizeof(sr_qp_rules) / sizeof(sr_qp_rules[0]))

/* Bits Linux strips from XRC requests before checking (modify_qp_mask()). */
static const uint32_t sr_qp_ignored[SR_COL_NUM] = {
    [SR_COL_XRC_SEND] = M_DRDAT | M_RNRT,
    [SR_COL_XRC_RECV] = M_RDAT | M_RTY | M_RNRR,
};

/* Access flags a QP may carry; LOCAL_WRITE and MW_BIND are tolerated no-ops. */
#define SR_QP_ACCESS_OK                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

static int sr_qp_col_of(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return SR_COL_RC;
	case IBV_QPT_UC:
		return SR_COL_UC;
	case IBV_QPT_UD:
		return SR_COL_UD;
	case IBV_QPT_XRC_SEND:
		return SR_COL_XRC_SEND;
	case IBV_QPT_XRC_RECV:
		return SR_COL_XRC_RECV;
	default:
		return -1;
	}
}

static bool sr_qp_state_ok(unsigned int s)
{
	return s <= IBV_QPS_ERR;
}

/*
 * Looks up the required and optional masks of from → to for column col.
 * Returns false if the transition is not legal.
 */
static bool sr_qp_rule_find(enum ibv_qp_state from, enum ibv_qp_state to, int col, uint32_t *req,
			    uint32_t *opt)
{
	size_t i;

	/* Modify QP to Reset or Error is legal from every state. */
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
		*req = 0;
		*opt = 0;
		return true;
	}
	for (i = 0; i < SR_QP_RULES_NUM; i++) {
		if (sr_qp_rules[i].from == from && sr_qp_rules[i].to == to) {
			*req = sr_qp_rules[i].req[col];
			*opt = sr_qp_rules[i].opt[col];
			return true;
		}
	}
	return false;
}

static bool sr_qp_port_ok(unsigned int port, const struct sr_qp_limits *lim)
{
	return port >= 1 && port <= lim->port_count;
}

/* Range checks of the attributes named in mask (already mask-checked). */
static int sr_qp_values_check(const struct ibv_qp_attr *attr, uint32_t mask,
			      const struct sr_qp_limits *lim)
{
	if ((mask & M_ACC) && (attr->qp_access_flags & ~SR_QP_ACCESS_OK))
		return -EINVAL;
	if ((mask & M_PKEY) && attr->pkey_index >= lim->pkey_table_len)
		return -EINVAL;
	if ((mask & M_PORT) && !sr_qp_port_ok(attr->port_num, lim))
		return -EINVAL;
	if (mask & M_AV) {
		/* Linux uverbs: the AV must name a valid port ... */
		if (!sr_qp_port_ok(attr->ah_attr.port_num, lim))
			return -EINVAL;
		/* ... and agree with IBV_QP_PORT when both are given (SQD → SQD). */
		if ((mask & M_PORT) && attr->ah_attr.port_num != attr->port_num)
			return -EINVAL;
		/* A RoCE address is a GID: no GRH, no destination (Linux
		 * rdma_check_ah_attr, from _ib_modify_qp for the AV and the
		 * alternate path alike). */
		if (lim->grh_required && !attr->ah_attr.is_global)
			return -EINVAL;
	}
	if ((mask & M_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > lim->max_mtu))
		return -EINVAL;
	/* Local ACK timeout, RNR NAK timer: 5-bit fields (IBTA 9.7.6.1.3, 9.7.5.2.8). */
	if ((mask & M_TMO) && attr->timeout > 31)
		return -EINVAL;
	if ((mask & M_RNRT) && attr->min_rnr_timer > 31)
		return -EINVAL;
	/* Retry counters: 3-bit fields; rnr_retry 7 means "infinite". */
	if ((mask & M_RTY) && attr->retry_cnt > 7)
		return -EINVAL;
	if ((mask & M_RNRR) && attr->rnr_retry > 7)
		return -EINVAL;
	if ((mask & M_RDAT) && attr->max_rd_atomic > lim->max_rd_atom)
		return -EINVAL;
	if ((mask & M_DRDAT) && attr->max_dest_rd_atomic > lim->max_dest_rd_atom)
		return -EINVAL;
	if ((mask & M_DQPN) && attr->dest_qp_num > SR_QP_QPN_MASK)
		return -EINVAL;
	if ((mask & M_MIG) && (unsigned int)attr->path_mig_state > IBV_MIG_ARMED)
		return -EINVAL;
	if (mask & M_ALT) {
		/* Accepted but unused: we do not implement APM. */
		if (!sr_qp_port_ok(attr->alt_port_num, lim) ||
		    !sr_qp_port_ok(attr->alt_ah_attr.port_num, lim) ||
		    attr->alt_port_num != attr->alt_ah_attr.port_num)
			return -EINVAL;
		if (attr->alt_pkey_index >= lim->pkey_table_len)
			return -EINVAL;
		if (attr->alt_timeout > 31)
			return -EINVAL;
		if (lim->grh_required && !attr->alt_ah_attr.is_global)
			return -EINVAL;
	}
	/* QKEY, SQ/RQ PSN (masked by the caller) and EN_SQD_ASYNC_NOTIFY: any value. */
	return 0;
}

int sr_qp_modify_check(enum ibv_qp_type type, enum ibv_qp_state cur, const struct ibv_qp_attr *attr,
		       int attr_mask, const struct sr_qp_limits *lim, enum ibv_qp_state *next)
{
	uint32_t mask = (uint32_t)attr_mask;
	enum ibv_qp_state to;
	uint32_t req, opt;
	int col;

	col = sr_qp_col_of(type);
	if (col < 0 || !attr || !lim || !next)
		return -EINVAL;
	if (!sr_qp_state_ok(cur))
		return -EINVAL;

	/*
	 * "Current QP state" is the consumer's assertion of the state it
	 * believes the QP is in (used to leave SQE/SQD without racing an
	 * asynchronous state change). Linux looks the transition up from the
	 * asserted state; a HCA then refuses the command if the QP is really
	 * elsewhere. We fold both into one rule: it must name the real state.
	 * Whether the bit is allowed at all is decided by the rule table.
	 */
	if (mask & M_CUR) {
		if (!sr_qp_state_ok(attr->cur_qp_state) || attr->cur_qp_state != cur)
			return -EINVAL;
	}
	if (mask & IBV_QP_STATE) {
		if (!sr_qp_state_ok(attr->qp_state))
			return -EINVAL;
		to = attr->qp_state;
	} else {
		to = cur; /* no state change: "same state" rules apply */
	}

	mask &= ~sr_qp_ignored[col];

	if (!sr_qp_rule_find(cur, to, col, &req, &opt))
		return -EINVAL;
	if ((mask & req) != req)
		return -EINVAL;
	/* IBV_QP_CAP and IBV_QP_RATE_LIMIT are in no rule: always rejected. */
	if (mask & ~(req | opt | IBV_QP_STATE))
		return -EINVAL;
	if (sr_qp_values_check(attr, mask, lim))
		return -EINVAL;

	*next = to;
	return 0;
}

const char *sr_qp_state_name(enum ibv_qp_state s)
{
	static const char *const names[] = {
	    [IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
	    [IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",	[IBV_QPS_SQE] = "SQE",
	    [IBV_QPS_ERR] = "ERR",
	};

	if ((unsigned int)s < sizeof(names) / sizeof(names[0]))
		return names[s];
	return "UNKNOWN";
}
