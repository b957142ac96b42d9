/*
 * The headers of a SEND or RDMA WRITE request packet, from the work
 * request's opcode: which IBTA opcode a packet of the message is (first,
 * middle, last or only) and the extension headers it carries after the BTH
 * (RETH on a WRITE's first packet, ImmDt and IETH on the last).  One
 * definition for the engine's requester (engine/req.c) and for a posting
 * thread that sends a single-packet message itself (shm/wire_tx.c).
 */
#ifndef SR_WIRE_REQHDR_H
#define SR_WIRE_REQHDR_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "wire/bth.h"

/* tr: the transport bits (SR_TR_RC, SR_TR_UC, SR_TR_XRC). */
static inline uint8_t sr_data_opcode(uint8_t tr, uint8_t wr_op, bool first, bool last)
{
	bool write = wr_op == IBV_WR_RDMA_WRITE || wr_op == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool imm = wr_op == IBV_WR_SEND_WITH_IMM || wr_op == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool inv = wr_op == IBV_WR_SEND_WITH_INV;

	if (first && last) {
		if (write)
			return tr | (imm ? SR_IB_WRITE_ONLY_IMM : SR_IB_WRITE_ONLY);
		return tr | (imm   ? SR_IB_SEND_ONLY_IMM
			     : inv ? SR_IB_SEND_ONLY_INV
				   : SR_IB_SEND_ONLY);
	}
	if (first)
		return tr | (write ? SR_IB_WRITE_FIRST : SR_IB_SEND_FIRST);
	if (!last)
		return tr | (write ? SR_IB_WRITE_MIDDLE : SR_IB_SEND_MIDDLE);
	if (write)
		return tr | (imm ? SR_IB_WRITE_LAST_IMM : SR_IB_WRITE_LAST);
	return tr | (imm ? SR_IB_SEND_LAST_IMM : inv ? SR_IB_SEND_LAST_INV : SR_IB_SEND_LAST);
}

/* Appends the extension headers opcode op carries at h; returns their
 * length.  imm_or_inv: the immediate as the WQE holds it (network order)
 * or the rkey to invalidate (host order). */
static inline unsigned sr_data_ext_put(uint8_t *h, uint8_t op, uint64_t va, uint32_t rkey,
				       uint32_t total_len, uint32_t imm_or_inv)
{
	unsigned n = 0;

	if (sr_opcode_info[op].flags & SR_OPF_RETH) {
		sr_reth_put(h, va, rkey, total_len);
		n += SR_RETH_LEN;
	}
	if (sr_opcode_info[op].flags & SR_OPF_IMMDT) {
		memcpy(h + n, &imm_or_inv, 4);
		n += SR_IMMDT_LEN;
	}
	if (sr_opcode_info[op].flags & SR_OPF_IETH) {
		sr_put_be32(h + n, imm_or_inv);
		n += SR_IETH_LEN;
	}
	return n;
}

#endif
