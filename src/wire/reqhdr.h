/*
 * The headers of a request packet, from the work request's opcode: for a
 * SEND or RDMA WRITE which IBTA opcode a packet of the message is (first,
 * middle, last or only) and the extension headers it carries after the BTH
 * (RETH on a WRITE's first packet, ImmDt and IETH on the last); for an
 * RDMA READ or an atomic its one request's opcode and RETH or AtomicETH.
 * One definition for the engine's requester (transport/req.c) and for a
 * posting thread that sends a message itself (datapath/wire_tx.c).
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

/* Whether work request opcode wr_op asks the responder for data back
 * (one request; the PSNs of its response packets). */
static inline bool sr_wr_rd_atomic(uint8_t wr_op)
{
	return wr_op == IBV_WR_RDMA_READ || wr_op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       wr_op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* The PSNs a message of work request opcode wr_op and len bytes takes in
 * packets of mtu bytes (IBTA 9.7.1): an atomic one, a READ one per
 * response packet, a SEND or WRITE one per packet (one if empty).  The
 * engine's requester, a posting thread that sends and the responder
 * count them alike. */
static inline uint32_t sr_wr_npkts(uint8_t wr_op, uint64_t len, uint32_t mtu)
{
	if (wr_op == IBV_WR_ATOMIC_CMP_AND_SWP || wr_op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	return len ? (uint32_t)((len + mtu - 1) / mtu) : 1;
}

/* A READ request for len bytes at va, or an atomic at va (CmpSwap: swap,
 * then compare, as 9.5 orders them; FetchAdd: the addend), at h: its
 * opcode (with the transport bits tr) into *op; returns the header's
 * length. */
static inline unsigned sr_rd_atomic_put(uint8_t *h, uint8_t tr, uint8_t wr_op, uint64_t va,
					uint32_t rkey, uint32_t len, uint64_t swap,
					uint64_t compare_add, uint8_t *op)
{
	if (wr_op == IBV_WR_RDMA_READ) {
		*op = tr | SR_IB_READ_REQUEST;
		sr_reth_put(h, va, rkey, len);
		return SR_RETH_LEN;
	}
	if (wr_op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		*op = tr | SR_IB_CMP_SWAP;
		sr_atometh_put(h, va, rkey, swap, compare_add);
	} else {
		*op = tr | SR_IB_FETCH_ADD;
		sr_atometh_put(h, va, rkey, compare_add, 0);
	}
	return SR_ATOMETH_LEN;
}

#endif
