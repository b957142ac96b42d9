/*
 * Unit test of src/core/qp_state.c. For every transport (RC, UC, UD and the
 * two XRC halves) and every (current, next) state pair it checks that a legal
 * transition succeeds with exactly its required mask, fails when any required
 * bit is missing, succeeds with each optional bit added and fails with any
 * other bit added, and that illegal transitions fail whatever the mask. The
 * expected masks are written out below independently of the module's table.
 * Then every value check is probed at its boundary.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/qp_state.h"
#include "check.h"

#define NSTATES	      (IBV_QPS_ERR + 1)
#define LAST_MASK_BIT 31 /* probe every bit of the int mask */

static const struct sr_qp_limits test_lim = {
    .port_count = 2,
    .pkey_table_len = 64,
    .max_mtu = IBV_MTU_4096,
    .max_rd_atom = 16,
    .max_dest_rd_atom = 8,
    .max_send_wr = 1024,
    .max_recv_wr = 1024,
    .max_send_sge = 4,
    .max_recv_sge = 4,
    .max_inline_data = 256,
};

static const char *type_name(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_XRC_SEND:
		return "XRC_SEND";
	case IBV_QPT_XRC_RECV:
		return "XRC_RECV";
	default:
		return "?";
	}
}

/* An attribute block in which every field holds an acceptable value. */
static void good_attr(struct ibv_qp_attr *a, enum ibv_qp_state cur, enum ibv_qp_state to)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = to;
	a->cur_qp_state = cur;
	a->path_mtu = IBV_MTU_1024;
	a->path_mig_state = IBV_MIG_MIGRATED;
	a->qkey = 0x11111111;
	a->rq_psn = 0x123456;
	a->sq_psn = 0x654321;
	a->dest_qp_num = 0xABCDE;
	a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a->cap.max_send_wr = 1;
	a->cap.max_recv_wr = 1;
	a->cap.max_send_sge = 1;
	a->cap.max_recv_sge = 1;
	a->ah_attr.port_num = 1;
	a->alt_ah_attr.port_num = 1;
	a->pkey_index = 0;
	a->alt_pkey_index = 0;
	a->en_sqd_async_notify = 1;
	a->max_rd_atomic = 1;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	a->port_num = 1;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->alt_port_num = 1;
	a->alt_timeout = 14;
	a->rate_limit = 1000;
}

/*
 * Expected rules, spelled out per transition from the IBTA Modify QP table
 * (as encoded by Linux ib_modify_qp_is_ok); "any → RESET/ERR" is legal.
 * Returns false for an illegal transition.
 */
static bool expect(enum ibv_qp_type t, int from, int to, uint32_t *req, uint32_t *opt)
{
	bool rc = t == IBV_QPT_RC, uc = t == IBV_QPT_UC, ud = t == IBV_QPT_UD;
	bool xs = t == IBV_QPT_XRC_SEND, xr = t == IBV_QPT_XRC_RECV;

	*req = 0;
	*opt = 0;
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return true;

	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
		*req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		return true;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) {
		*opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		return true;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
		if (ud) {
			*opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
			return true;
		}
		*req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (rc || xr)
			*req |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		*opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		return true;
	}
	if ((from == IBV_QPS_RTR || from == IBV_QPS_RTS || from == IBV_QPS_SQD) &&
	    to == IBV_QPS_RTS) {
		if (from == IBV_QPS_RTR) {
			if (rc || xs)
				*req = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
			else if (xr)
				*req = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
			else
				*req = IBV_QP_SQ_PSN;
		}
		if (ud)
			*opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		else
			*opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_PATH_MIG_STATE | ((rc || xr) ? IBV_QP_MIN_RNR_TIMER : 0);
		return true;
	}
	if (from == IBV_QPS_RTS && to == IBV_QPS_SQD) {
		*opt = IBV_QP_EN_SQD_ASYNC_NOTIFY;
		return true;
	}
	if (from == IBV_QPS_SQD && to == IBV_QPS_SQD) {
		if (ud)
			*opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		else if (uc)
			*opt = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE;
		else {
			*opt = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_ALT_PATH |
			       IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE;
			if (rc || xs) /* initiator side */
				*opt |=
				    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
			if (rc || xr) /* responder side */
				*opt |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return true;
	}
	if (from == IBV_QPS_SQE && to == IBV_QPS_RTS) {
		if (ud)
			*opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		else if (uc)
			*opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS;
		return true;
	}
	return false;
}

/* Bits the module ignores for XRC (Linux uverbs modify_qp_mask()). */
static uint32_t ignored_bits(enum ibv_qp_type t)
{
	if (t == IBV_QPT_XRC_SEND)
		return IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (t == IBV_QPT_XRC_RECV)
		return IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
	return 0;
}

static int run(enum ibv_qp_type t, enum ibv_qp_state cur, const struct ibv_qp_attr *a,
	       uint32_t mask, enum ibv_qp_state *next)
{
	*next = IBV_QPS_UNKNOWN;
	return sr_qp_modify_check(t, cur, a, (int)mask, &test_lim, next);
}

/* One (type, from, to) cell of the matrix; with_state=false drops the STATE bit. */
static void matrix_cell(enum ibv_qp_type t, int from, int to, bool with_state)
{
	struct ibv_qp_attr a;
	enum ibv_qp_state next;
	uint32_t req, opt, base, ign = ignored_bits(t);
	uint32_t st = with_state ? IBV_QP_STATE : 0;
	bool legal = expect(t, from, to, &req, &opt);
	int bit;

	CHECK_CTX("%s %s->%s%s", type_name(t), sr_qp_state_name(from), sr_qp_state_name(to),
		  with_state ? "" : " (no STATE bit)");
	good_attr(&a, from, to);
	base = st | req;

	if (!legal) {
		CHECK_EQ(run(t, from, &a, base, &next), -EINVAL);
		CHECK_EQ(next, IBV_QPS_UNKNOWN);
		for (bit = 0; bit <= LAST_MASK_BIT; bit++)
			CHECK_EQ(run(t, from, &a, base | (1u << bit), &next), -EINVAL);
		return;
	}

	/* Exactly the required mask. */
	CHECK_EQ(run(t, from, &a, base, &next), 0);
	CHECK_EQ(next, to);
	/* Each required bit is needed. */
	for (bit = 0; bit <= LAST_MASK_BIT; bit++) {
		uint32_t b = 1u << bit;

		if (!(req & b))
			continue;
		CHECK_CTX("%s %s->%s%s minus bit %d", type_name(t), sr_qp_state_name(from),
			  sr_qp_state_name(to), with_state ? "" : " (no STATE bit)", bit);
		CHECK_EQ(run(t, from, &a, base & ~b, &next), -EINVAL);
	}
	/* Each optional bit is accepted, and all of them together. */
	for (bit = 0; bit <= LAST_MASK_BIT; bit++) {
		uint32_t b = 1u << bit;

		if (!(opt & b))
			continue;
		CHECK_CTX("%s %s->%s%s plus optional bit %d", type_name(t), sr_qp_state_name(from),
			  sr_qp_state_name(to), with_state ? "" : " (no STATE bit)", bit);
		CHECK_EQ(run(t, from, &a, base | b, &next), 0);
		CHECK_EQ(next, to);
	}
	CHECK_CTX("%s %s->%s%s all optional", type_name(t), sr_qp_state_name(from),
		  sr_qp_state_name(to), with_state ? "" : " (no STATE bit)");
	CHECK_EQ(run(t, from, &a, base | opt, &next), 0);
	/* Any other bit is refused, except the XRC bits that are ignored. */
	for (bit = 0; bit <= LAST_MASK_BIT; bit++) {
		uint32_t b = 1u << bit;

		if ((req | opt | IBV_QP_STATE) & b)
			continue;
		CHECK_CTX("%s %s->%s%s plus foreign bit %d", type_name(t), sr_qp_state_name(from),
			  sr_qp_state_name(to), with_state ? "" : " (no STATE bit)", bit);
		CHECK_EQ(run(t, from, &a, base | b, &next), (ign & b) ? 0 : -EINVAL);
	}
}

static void test_matrix(void)
{
	static const enum ibv_qp_type types[] = {
	    IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
	};
	unsigned int i;
	int from, to;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		for (from = 0; from < NSTATES; from++) {
			for (to = 0; to < NSTATES; to++)
				matrix_cell(types[i], from, to, true);
			/* Without IBV_QP_STATE the target is the current state. */
			matrix_cell(types[i], from, from, false);
		}
	}
	CHECK_CTX("%s", "");
}

/* Sanity of the expectation itself against well-known facts. */
static void test_known_legal_counts(void)
{
	uint32_t req, opt;
	int from, to, n = 0;

	for (from = 0; from < NSTATES; from++)
		for (to = 0; to < NSTATES; to++)
			n += expect(IBV_QPT_RC, from, to, &req, &opt);
	/* 7 → RESET, 7 → ERR, plus R→I, I→I, I→RTR, RTR→RTS, RTS→RTS,
	 * RTS→SQD, SQD→RTS, SQD→SQD, SQE→RTS. */
	CHECK_EQ(n, 14 + 9);
}

/* Result of a single-transition probe with one tweaked attribute. */
static int probe(enum ibv_qp_type t, int from, int to, uint32_t extra,
		 void (*tweak)(struct ibv_qp_attr *, long), long v)
{
	struct ibv_qp_attr a;
	enum ibv_qp_state next;
	uint32_t req, opt;

	expect(t, from, to, &req, &opt);
	good_attr(&a, from, to);
	if (tweak)
		tweak(&a, v);
	return run(t, from, &a, IBV_QP_STATE | req | extra, &next);
}

static void set_port(struct ibv_qp_attr *a, long v)
{
	a->port_num = (uint8_t)v;
}
static void set_pkey(struct ibv_qp_attr *a, long v)
{
	a->pkey_index = (uint16_t)v;
}
static void set_access(struct ibv_qp_attr *a, long v)
{
	a->qp_access_flags = (unsigned int)v;
}
static void set_qkey(struct ibv_qp_attr *a, long v)
{
	a->qkey = (uint32_t)v;
}
static void set_ah_port(struct ibv_qp_attr *a, long v)
{
	a->ah_attr.port_num = (uint8_t)v;
}
static void set_mtu(struct ibv_qp_attr *a, long v)
{
	a->path_mtu = (enum ibv_mtu)v;
}
static void set_dqpn(struct ibv_qp_attr *a, long v)
{
	a->dest_qp_num = (uint32_t)v;
}
static void set_rq_psn(struct ibv_qp_attr *a, long v)
{
	a->rq_psn = (uint32_t)v;
}
static void set_sq_psn(struct ibv_qp_attr *a, long v)
{
	a->sq_psn = (uint32_t)v;
}
static void set_drdat(struct ibv_qp_attr *a, long v)
{
	a->max_dest_rd_atomic = (uint8_t)v;
}
static void set_rdat(struct ibv_qp_attr *a, long v)
{
	a->max_rd_atomic = (uint8_t)v;
}
static void set_rnrt(struct ibv_qp_attr *a, long v)
{
	a->min_rnr_timer = (uint8_t)v;
}
static void set_timeout(struct ibv_qp_attr *a, long v)
{
	a->timeout = (uint8_t)v;
}
static void set_retry(struct ibv_qp_attr *a, long v)
{
	a->retry_cnt = (uint8_t)v;
}
static void set_rnr_retry(struct ibv_qp_attr *a, long v)
{
	a->rnr_retry = (uint8_t)v;
}
static void set_mig(struct ibv_qp_attr *a, long v)
{
	a->path_mig_state = (enum ibv_mig_state)v;
}
static void set_alt_port(struct ibv_qp_attr *a, long v)
{
	a->alt_port_num = (uint8_t)v;
}
static void set_alt_ah_port(struct ibv_qp_attr *a, long v)
{
	a->alt_ah_attr.port_num = (uint8_t)v;
}
static void set_alt_ports(struct ibv_qp_attr *a, long v)
{
	a->alt_port_num = (uint8_t)v;
	a->alt_ah_attr.port_num = (uint8_t)v;
}
static void set_alt_pkey(struct ibv_qp_attr *a, long v)
{
	a->alt_pkey_index = (uint16_t)v;
}
static void set_alt_timeout(struct ibv_qp_attr *a, long v)
{
	a->alt_timeout = (uint8_t)v;
}
static void set_sqd_notify(struct ibv_qp_attr *a, long v)
{
	a->en_sqd_async_notify = (uint8_t)v;
}
static void set_both_ports(struct ibv_qp_attr *a, long v)
{
	a->port_num = (uint8_t)v;
	a->ah_attr.port_num = (uint8_t)v;
}
static void set_cur(struct ibv_qp_attr *a, long v)
{
	a->cur_qp_state = (enum ibv_qp_state)v;
}
static void set_state(struct ibv_qp_attr *a, long v)
{
	a->qp_state = (enum ibv_qp_state)v;
}

#define RC	IBV_QPT_RC
#define UC	IBV_QPT_UC
#define UD	IBV_QPT_UD
#define S_RESET IBV_QPS_RESET
#define S_INIT	IBV_QPS_INIT
#define S_RTR	IBV_QPS_RTR
#define S_RTS	IBV_QPS_RTS
#define S_SQD	IBV_QPS_SQD
#define S_SQE	IBV_QPS_SQE
#define S_ERR	IBV_QPS_ERR

static void test_values(void)
{
	static const enum ibv_qp_type conn[] = {RC, UC};
	unsigned int i;

	CHECK_CTX("value checks");
	/* port_num: 1..port_count (2). */
	CHECK_EQ(probe(RC, S_RESET, S_INIT, 0, set_port, 0), -EINVAL);
	CHECK_EQ(probe(RC, S_RESET, S_INIT, 0, set_port, 1), 0);
	CHECK_EQ(probe(RC, S_RESET, S_INIT, 0, set_port, 2), 0);
	CHECK_EQ(probe(RC, S_RESET, S_INIT, 0, set_port, 3), -EINVAL);
	CHECK_EQ(probe(UD, S_RESET, S_INIT, 0, set_port, 3), -EINVAL);
	CHECK_EQ(probe(UD, S_INIT, S_INIT, IBV_QP_PORT, set_port, 0), -EINVAL);
	CHECK_EQ(probe(UD, S_INIT, S_INIT, IBV_QP_PORT, set_port, 2), 0);

	/* pkey_index < pkey_table_len (64). */
	CHECK_EQ(probe(RC, S_RESET, S_INIT, 0, set_pkey, 63), 0);
	CHECK_EQ(probe(RC, S_RESET, S_INIT, 0, set_pkey, 64), -EINVAL);
	CHECK_EQ(probe(UD, S_RESET, S_INIT, 0, set_pkey, 64), -EINVAL);
	CHECK_EQ(probe(UD, S_SQD, S_SQD, IBV_QP_PKEY_INDEX, set_pkey, 64), -EINVAL);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, IBV_QP_PKEY_INDEX, set_pkey, 63), 0);

	/* Access flags. */
	for (i = 0; i < sizeof(conn) / sizeof(conn[0]); i++) {
		CHECK_EQ(probe(conn[i], S_RESET, S_INIT, 0, set_access, 0), 0);
		CHECK_EQ(probe(conn[i], S_RESET, S_INIT, 0, set_access,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				   IBV_ACCESS_MW_BIND),
			 0);
		CHECK_EQ(probe(conn[i], S_RESET, S_INIT, 0, set_access, IBV_ACCESS_ZERO_BASED),
			 -EINVAL);
		CHECK_EQ(probe(conn[i], S_RESET, S_INIT, 0, set_access, IBV_ACCESS_ON_DEMAND),
			 -EINVAL);
		CHECK_EQ(probe(conn[i], S_RESET, S_INIT, 0, set_access, IBV_ACCESS_HUGETLB),
			 -EINVAL);
		CHECK_EQ(
		    probe(conn[i], S_RESET, S_INIT, 0, set_access, IBV_ACCESS_RELAXED_ORDERING),
		    -EINVAL);
		CHECK_EQ(probe(conn[i], S_RTS, S_RTS, IBV_QP_ACCESS_FLAGS, set_access, 1L << 30),
			 -EINVAL);
	}

	/* Q_Key: any 32-bit value. */
	CHECK_EQ(probe(UD, S_RESET, S_INIT, 0, set_qkey, 0), 0);
	CHECK_EQ(probe(UD, S_RESET, S_INIT, 0, set_qkey, 0xFFFFFFFFL), 0);

	/* Primary AV port. */
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_ah_port, 0), -EINVAL);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_ah_port, 1), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_ah_port, 2), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_ah_port, 3), -EINVAL);
	CHECK_EQ(probe(UC, S_INIT, S_RTR, 0, set_ah_port, 3), -EINVAL);
	CHECK_EQ(probe(UC, S_SQD, S_SQD, IBV_QP_AV, set_ah_port, 0), -EINVAL);
	/* AV and PORT together (SQD → SQD) must agree. */
	CHECK_EQ(probe(RC, S_SQD, S_SQD, IBV_QP_AV | IBV_QP_PORT, set_both_ports, 2), 0);
	CHECK_EQ(probe(RC, S_SQD, S_SQD, IBV_QP_AV | IBV_QP_PORT, set_ah_port, 2), -EINVAL);
	CHECK_EQ(probe(RC, S_SQD, S_SQD, IBV_QP_AV | IBV_QP_PORT, set_port, 2), -EINVAL);

	/* path_mtu in [256, max_mtu]. */
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_mtu, 0), -EINVAL);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_mtu, IBV_MTU_256), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_mtu, IBV_MTU_4096), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_mtu, IBV_MTU_4096 + 1), -EINVAL);
	CHECK_EQ(probe(UC, S_INIT, S_RTR, 0, set_mtu, -1), -EINVAL);
	{
		struct sr_qp_limits small = test_lim;
		struct ibv_qp_attr a;
		enum ibv_qp_state next;
		uint32_t req, opt;

		small.max_mtu = IBV_MTU_1024;
		expect(RC, S_INIT, S_RTR, &req, &opt);
		good_attr(&a, S_INIT, S_RTR);
		a.path_mtu = IBV_MTU_1024;
		CHECK_EQ(sr_qp_modify_check(RC, S_INIT, &a, IBV_QP_STATE | req, &small, &next), 0);
		a.path_mtu = IBV_MTU_2048;
		CHECK_EQ(sr_qp_modify_check(RC, S_INIT, &a, IBV_QP_STATE | req, &small, &next),
			 -EINVAL);
	}

	/* dest_qp_num is 24 bits. */
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_dqpn, 0xFFFFFF), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_dqpn, 0x1000000), -EINVAL);
	CHECK_EQ(probe(UC, S_INIT, S_RTR, 0, set_dqpn, 0xFFFFFFFFL), -EINVAL);

	/* PSNs: accepted even above 24 bits (the caller masks them). */
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_rq_psn, 0xFFFFFF), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_rq_psn, 0xFFFFFFFFL), 0);
	CHECK_EQ(probe(UD, S_RTR, S_RTS, 0, set_sq_psn, 0xFFFFFFFFL), 0);

	/* max_dest_rd_atomic <= 8, max_rd_atomic <= 16. */
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_drdat, 0), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_drdat, 8), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_drdat, 9), -EINVAL);
	CHECK_EQ(probe(RC, S_SQD, S_SQD, IBV_QP_MAX_DEST_RD_ATOMIC, set_drdat, 9), -EINVAL);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_rdat, 0), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_rdat, 16), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_rdat, 17), -EINVAL);
	CHECK_EQ(probe(RC, S_SQD, S_SQD, IBV_QP_MAX_QP_RD_ATOMIC, set_rdat, 17), -EINVAL);

	/* 5-bit timers. */
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_rnrt, 0), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_rnrt, 31), 0);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, 0, set_rnrt, 32), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_MIN_RNR_TIMER, set_rnrt, 32), -EINVAL);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_timeout, 0), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_timeout, 31), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_timeout, 32), -EINVAL);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_timeout, 255), -EINVAL);

	/* 3-bit retry counters. */
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_retry, 0), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_retry, 7), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_retry, 8), -EINVAL);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_rnr_retry, 7), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, 0, set_rnr_retry, 8), -EINVAL);
	CHECK_EQ(probe(RC, S_SQD, S_SQD, IBV_QP_RETRY_CNT, set_retry, 8), -EINVAL);
	CHECK_EQ(probe(RC, S_SQD, S_SQD, IBV_QP_RNR_RETRY, set_rnr_retry, 8), -EINVAL);

	/* Path migration state. */
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_PATH_MIG_STATE, set_mig, IBV_MIG_MIGRATED), 0);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_PATH_MIG_STATE, set_mig, IBV_MIG_REARM), 0);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_PATH_MIG_STATE, set_mig, IBV_MIG_ARMED), 0);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_PATH_MIG_STATE, set_mig, IBV_MIG_ARMED + 1),
		 -EINVAL);
	CHECK_EQ(probe(UC, S_RTS, S_RTS, IBV_QP_PATH_MIG_STATE, set_mig, -1), -EINVAL);

	/* Alternate path (accepted, not implemented). */
	for (i = 0; i < sizeof(conn) / sizeof(conn[0]); i++) {
		CHECK_EQ(probe(conn[i], S_RTS, S_RTS, IBV_QP_ALT_PATH, NULL, 0), 0);
		CHECK_EQ(probe(conn[i], S_RTS, S_RTS, IBV_QP_ALT_PATH, set_alt_ports, 2), 0);
		CHECK_EQ(probe(conn[i], S_RTS, S_RTS, IBV_QP_ALT_PATH, set_alt_ports, 0), -EINVAL);
		CHECK_EQ(probe(conn[i], S_RTS, S_RTS, IBV_QP_ALT_PATH, set_alt_ports, 3), -EINVAL);
		CHECK_EQ(probe(conn[i], S_RTS, S_RTS, IBV_QP_ALT_PATH, set_alt_port, 2), -EINVAL);
		CHECK_EQ(probe(conn[i], S_RTS, S_RTS, IBV_QP_ALT_PATH, set_alt_ah_port, 2),
			 -EINVAL);
		CHECK_EQ(probe(conn[i], S_INIT, S_RTR, IBV_QP_ALT_PATH, set_alt_pkey, 63), 0);
		CHECK_EQ(probe(conn[i], S_INIT, S_RTR, IBV_QP_ALT_PATH, set_alt_pkey, 64), -EINVAL);
		CHECK_EQ(probe(conn[i], S_RTR, S_RTS, IBV_QP_ALT_PATH, set_alt_timeout, 31), 0);
		CHECK_EQ(probe(conn[i], S_RTR, S_RTS, IBV_QP_ALT_PATH, set_alt_timeout, 32),
			 -EINVAL);
	}

	/* EN_SQD_ASYNC_NOTIFY: any value. */
	CHECK_EQ(probe(RC, S_RTS, S_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, set_sqd_notify, 0), 0);
	CHECK_EQ(probe(UD, S_RTS, S_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, set_sqd_notify, 255), 0);

	/* IBV_QP_CAP and IBV_QP_RATE_LIMIT are never accepted. */
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_CAP, NULL, 0), -EINVAL);
	CHECK_EQ(probe(UD, S_INIT, S_INIT, IBV_QP_CAP, NULL, 0), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_RATE_LIMIT, NULL, 0), -EINVAL);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, IBV_QP_RATE_LIMIT, NULL, 0), -EINVAL);
	CHECK_CTX("%s", "");
}

/* On a RoCE port (grh_required) the AV and the alternate path need a GRH. */
static int roce(enum ibv_qp_type t, enum ibv_qp_state cur, const struct ibv_qp_attr *a,
		uint32_t mask)
{
	struct sr_qp_limits lim = test_lim;
	enum ibv_qp_state next;

	lim.grh_required = true;
	return sr_qp_modify_check(t, cur, a, (int)mask, &lim, &next);
}

static void test_grh_required(void)
{
	const enum ibv_qp_type conn[] = {RC, UC};
	struct ibv_qp_attr a;
	enum ibv_qp_state next;
	uint32_t req, opt;

	for (int i = 0; i < 2; i++) {
		CHECK_CTX("%s", type_name(conn[i]));
		expect(conn[i], S_INIT, S_RTR, &req, &opt);
		good_attr(&a, S_INIT, S_RTR);
		CHECK_EQ(run(conn[i], S_INIT, &a, IBV_QP_STATE | req, &next), 0);
		CHECK_EQ(roce(conn[i], S_INIT, &a, IBV_QP_STATE | req), -EINVAL);
		a.ah_attr.is_global = 1;
		CHECK_EQ(roce(conn[i], S_INIT, &a, IBV_QP_STATE | req), 0);
		expect(conn[i], S_RTR, S_RTS, &req, &opt);
		good_attr(&a, S_RTR, S_RTS);
		CHECK_EQ(roce(conn[i], S_RTR, &a, IBV_QP_STATE | req), 0); /* no AV given */
		CHECK_EQ(roce(conn[i], S_RTR, &a, IBV_QP_STATE | req | IBV_QP_ALT_PATH), -EINVAL);
		a.alt_ah_attr.is_global = 1;
		CHECK_EQ(roce(conn[i], S_RTR, &a, IBV_QP_STATE | req | IBV_QP_ALT_PATH), 0);
	}
	/* UD takes no AV in modify_qp (its AHs are checked by ibv_create_ah) */
	expect(UD, S_INIT, S_RTR, &req, &opt);
	good_attr(&a, S_INIT, S_RTR);
	CHECK_EQ(roce(UD, S_INIT, &a, IBV_QP_STATE | req), 0);
}

static void test_states(void)
{
	struct ibv_qp_attr a;
	enum ibv_qp_state next;

	CHECK_CTX("state arguments");
	/* cur_qp_state must name the real state ... */
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_CUR_STATE, set_cur, S_RTS), 0);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_CUR_STATE, set_cur, S_SQD), -EINVAL);
	CHECK_EQ(probe(UD, S_SQE, S_RTS, IBV_QP_CUR_STATE, set_cur, S_SQE), 0);
	CHECK_EQ(probe(UD, S_SQE, S_RTS, IBV_QP_CUR_STATE, set_cur, S_RTS), -EINVAL);
	CHECK_EQ(probe(UC, S_SQD, S_RTS, IBV_QP_CUR_STATE, set_cur, S_SQD), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, IBV_QP_CUR_STATE, set_cur, S_RTR), 0);
	CHECK_EQ(probe(RC, S_RTR, S_RTS, IBV_QP_CUR_STATE, set_cur, S_RTS), -EINVAL);
	/* ... be a valid state ... */
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_CUR_STATE, set_cur, IBV_QPS_UNKNOWN), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_CUR_STATE, set_cur, 1000), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, IBV_QP_CUR_STATE, set_cur, -1), -EINVAL);
	/* ... and is allowed only where the table lists it. */
	CHECK_EQ(probe(RC, S_RESET, S_INIT, IBV_QP_CUR_STATE, set_cur, S_RESET), -EINVAL);
	CHECK_EQ(probe(RC, S_INIT, S_RTR, IBV_QP_CUR_STATE, set_cur, S_INIT), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_SQD, IBV_QP_CUR_STATE, set_cur, S_RTS), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_ERR, IBV_QP_CUR_STATE, set_cur, S_RTS), -EINVAL);
	/* Without STATE, only CUR_STATE: a no-op RTS → RTS. */
	good_attr(&a, S_RTS, S_RTS);
	CHECK_EQ(sr_qp_modify_check(RC, S_RTS, &a, IBV_QP_CUR_STATE, &test_lim, &next), 0);
	CHECK_EQ(next, S_RTS);

	/* qp_state must be a real state. */
	CHECK_EQ(probe(RC, S_RTS, S_RTS, 0, set_state, IBV_QPS_UNKNOWN), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, 0, set_state, 1000), -EINVAL);
	CHECK_EQ(probe(RC, S_RTS, S_RTS, 0, set_state, -1), -EINVAL);

	/* cur must be a real state. */
	good_attr(&a, S_RESET, S_ERR);
	CHECK_EQ(sr_qp_modify_check(RC, IBV_QPS_UNKNOWN, &a, IBV_QP_STATE, &test_lim, &next),
		 -EINVAL);
	CHECK_EQ(
	    sr_qp_modify_check(RC, (enum ibv_qp_state) - 1, &a, IBV_QP_STATE, &test_lim, &next),
	    -EINVAL);

	/* Unsupported transports and bad pointers. */
	good_attr(&a, S_RESET, S_INIT);
	a.qp_access_flags = 0;
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_RAW_PACKET, S_RESET, &a, IBV_QP_STATE | IBV_QP_PORT,
				    &test_lim, &next),
		 -EINVAL);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_DRIVER, S_RESET, &a, IBV_QP_STATE, &test_lim, &next),
		 -EINVAL);
	CHECK_EQ(
	    sr_qp_modify_check((enum ibv_qp_type)0, S_RESET, &a, IBV_QP_STATE, &test_lim, &next),
	    -EINVAL);
	CHECK_EQ(sr_qp_modify_check(RC, S_RESET, NULL, 0, &test_lim, &next), -EINVAL);
	CHECK_EQ(sr_qp_modify_check(RC, S_RESET, &a, 0, NULL, &next), -EINVAL);
	CHECK_EQ(sr_qp_modify_check(RC, S_RESET, &a, 0, &test_lim, NULL), -EINVAL);
	/* A negative mask (bit 31) is a foreign bit. */
	CHECK_EQ(sr_qp_modify_check(RC, S_RESET, &a, (int)0x80000000u, &test_lim, &next), -EINVAL);

	/* *next is untouched on failure. */
	next = S_SQE;
	good_attr(&a, S_RESET, S_RTS);
	CHECK_EQ(sr_qp_modify_check(RC, S_RESET, &a, IBV_QP_STATE, &test_lim, &next), -EINVAL);
	CHECK_EQ(next, S_SQE);
	CHECK_CTX("%s", "");
}

/* XRC: RC send side / receive side, with the bits Linux silently drops. */
static void test_xrc(void)
{
	struct ibv_qp_attr a;
	enum ibv_qp_state next;
	const uint32_t rc_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const uint32_t rc_rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

	CHECK_CTX("XRC");
	/* An RC-style mask works for both halves. */
	good_attr(&a, S_INIT, S_RTR);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_SEND, S_INIT, &a, (int)rc_rtr, &test_lim, &next),
		 0);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_RECV, S_INIT, &a, (int)rc_rtr, &test_lim, &next),
		 0);
	good_attr(&a, S_RTR, S_RTS);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_SEND, S_RTR, &a, (int)rc_rts, &test_lim, &next), 0);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_RECV, S_RTR, &a, (int)rc_rts, &test_lim, &next), 0);
	CHECK_EQ(next, S_RTS);
	/* Ignored bits are not value-checked. */
	good_attr(&a, S_INIT, S_RTR);
	a.min_rnr_timer = 99;
	a.max_dest_rd_atomic = 200;
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_SEND, S_INIT, &a, (int)rc_rtr, &test_lim, &next),
		 0);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_RECV, S_INIT, &a, (int)rc_rtr, &test_lim, &next),
		 -EINVAL);
	good_attr(&a, S_RTR, S_RTS);
	a.retry_cnt = 9;
	a.rnr_retry = 9;
	a.max_rd_atomic = 200;
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_RECV, S_RTR, &a, (int)rc_rts, &test_lim, &next), 0);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_SEND, S_RTR, &a, (int)rc_rts, &test_lim, &next),
		 -EINVAL);
	/* The target still needs its timeout and SQ PSN. */
	good_attr(&a, S_RTR, S_RTS);
	CHECK_EQ(sr_qp_modify_check(IBV_QPT_XRC_RECV, S_RTR, &a, (int)(rc_rts & ~IBV_QP_TIMEOUT),
				    &test_lim, &next),
		 -EINVAL);
	CHECK_CTX("%s", "");
}

/* A realistic connection bring-up and tear-down per transport. */
static void test_walk(void)
{
	struct ibv_qp_attr a;
	enum ibv_qp_state st, next;
	static const enum ibv_qp_type types[] = {RC, UC, UD};
	static const int path[] = {S_INIT, S_RTR, S_RTS, S_SQD, S_RTS, S_ERR, S_RESET};
	unsigned int i, j;
	uint32_t req, opt;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		st = S_RESET;
		for (j = 0; j < sizeof(path) / sizeof(path[0]); j++) {
			CHECK_CTX("walk %s %s->%s", type_name(types[i]), sr_qp_state_name(st),
				  sr_qp_state_name(path[j]));
			CHECK(expect(types[i], st, path[j], &req, &opt));
			good_attr(&a, st, path[j]);
			CHECK_EQ(sr_qp_modify_check(types[i], st, &a, (int)(IBV_QP_STATE | req),
						    &test_lim, &next),
				 0);
			CHECK_EQ(next, path[j]);
			st = next;
		}
	}
	CHECK_CTX("%s", "");
}

static void test_names(void)
{
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_RESET), "RESET"));
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_INIT), "INIT"));
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_RTR), "RTR"));
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_RTS), "RTS"));
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_SQD), "SQD"));
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_SQE), "SQE"));
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_ERR), "ERR"));
	CHECK(!strcmp(sr_qp_state_name(IBV_QPS_UNKNOWN), "UNKNOWN"));
	CHECK(!strcmp(sr_qp_state_name((enum ibv_qp_state) - 1), "UNKNOWN"));
	CHECK(!strcmp(sr_qp_state_name((enum ibv_qp_state)12345), "UNKNOWN"));
}

int main(void)
{
	test_known_legal_counts();
	test_matrix();
	test_values();
	test_grh_required();
	test_states();
	test_xrc();
	test_walk();
	test_names();
	return CHECK_SUMMARY("test_qp_state");
}
