/*
 * The RoCEv2 opcode table (IBTA vol. 1, table 38 and 9.3) and the packet
 * parser built on it.  One row per opcode: its name (as Wireshark prints
 * it), which extension headers it carries and where, whether it carries a
 * payload, and its place in a message.  The requester, the responder and
 * the completer all read this table; nothing else knows a header offset.
 */
#include "wire/bth.h"

/* Header layouts, BTH first; offsets are from the start of the BTH. */
#define H_BTH	   (SR_BTH_LEN)
#define RETH_AT(o) .reth_off = (o)
#define ROW(nm, fl, len, ...)                                                                      \
	{                                                                                          \
		.name = nm, .flags = SR_OPF_VALID | (fl), .hdr_len = (len), __VA_ARGS__            \
	}

/* Rows shared by RC and UC (SEND and RDMA WRITE), RC-only ones, UD. */
#define SEND_ROWS(T, tn)                                                                           \
	[T | SR_IB_SEND_FIRST] = ROW(                                                              \
	    tn " Send First", SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_PAYLOAD, H_BTH),    \
	     [T | SR_IB_SEND_MIDDLE] =                                                             \
		 ROW(tn " Send Middle", SR_OPF_REQ | SR_OPF_SEND | SR_OPF_MIDDLE | SR_OPF_PAYLOAD, \
		     H_BTH),                                                                       \
	     [T | SR_IB_SEND_LAST] = ROW(                                                          \
		 tn " Send Last", SR_OPF_REQ | SR_OPF_SEND | SR_OPF_LAST | SR_OPF_PAYLOAD, H_BTH), \
	     [T | SR_IB_SEND_LAST_IMM] =                                                           \
		 ROW(tn " Send Last with Immediate",                                               \
		     SR_OPF_REQ | SR_OPF_SEND | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IMMDT,       \
		     H_BTH + SR_IMMDT_LEN, .immdt_off = H_BTH),                                    \
	     [T | SR_IB_SEND_ONLY] = ROW(                                                          \
		 tn " Send Only",                                                                  \
		 SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD, H_BTH),   \
	     [T | SR_IB_SEND_ONLY_IMM] = ROW(tn " Send Only with Immediate",                       \
					     SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST |             \
						 SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IMMDT,      \
					     H_BTH + SR_IMMDT_LEN, .immdt_off = H_BTH),            \
	     [T | SR_IB_WRITE_FIRST] =                                                             \
		 ROW(tn " RDMA Write First",                                                       \
		     SR_OPF_REQ | SR_OPF_WRITE | SR_OPF_FIRST | SR_OPF_PAYLOAD | SR_OPF_RETH,      \
		     H_BTH + SR_RETH_LEN, RETH_AT(H_BTH)),                                         \
	     [T | SR_IB_WRITE_MIDDLE] =                                                            \
		 ROW(tn " RDMA Write Middle",                                                      \
		     SR_OPF_REQ | SR_OPF_WRITE | SR_OPF_MIDDLE | SR_OPF_PAYLOAD, H_BTH),           \
	     [T | SR_IB_WRITE_LAST] =                                                              \
		 ROW(tn " RDMA Write Last",                                                        \
		     SR_OPF_REQ | SR_OPF_WRITE | SR_OPF_LAST | SR_OPF_PAYLOAD, H_BTH),             \
	     [T | SR_IB_WRITE_LAST_IMM] =                                                          \
		 ROW(tn " RDMA Write Last with Immediate",                                         \
		     SR_OPF_REQ | SR_OPF_WRITE | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IMMDT,      \
		     H_BTH + SR_IMMDT_LEN, .immdt_off = H_BTH),                                    \
	     [T | SR_IB_WRITE_ONLY] = ROW(tn " RDMA Write Only",                                   \
					  SR_OPF_REQ | SR_OPF_WRITE | SR_OPF_FIRST | SR_OPF_LAST | \
					      SR_OPF_PAYLOAD | SR_OPF_RETH,                        \
					  H_BTH + SR_RETH_LEN, RETH_AT(H_BTH)),                    \
	     [T | SR_IB_WRITE_ONLY_IMM] =                                                          \
		 ROW(tn " RDMA Write Only with Immediate",                                         \
		     SR_OPF_REQ | SR_OPF_WRITE | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD |     \
			 SR_OPF_RETH | SR_OPF_IMMDT,                                               \
		     H_BTH + SR_RETH_LEN + SR_IMMDT_LEN, RETH_AT(H_BTH),                           \
		     .immdt_off = H_BTH + SR_RETH_LEN)

#define RESP_LAST (SR_OPF_LAST | SR_OPF_READ | SR_OPF_PAYLOAD | SR_OPF_AETH)

const struct sr_opcode_info sr_opcode_info[256] = {
    SEND_ROWS(SR_TR_RC, "RC"),
    SEND_ROWS(SR_TR_UC, "UC"),
    [SR_TR_RC | SR_IB_READ_REQUEST] = ROW(
	"RC RDMA Read Request", SR_OPF_REQ | SR_OPF_READ | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_RETH,
	H_BTH + SR_RETH_LEN, RETH_AT(H_BTH)),
    [SR_TR_RC | SR_IB_READ_RESP_FIRST] = ROW(
	"RC RDMA Read Response First", SR_OPF_FIRST | SR_OPF_READ | SR_OPF_PAYLOAD | SR_OPF_AETH,
	H_BTH + SR_AETH_LEN, .aeth_off = H_BTH),
    [SR_TR_RC | SR_IB_READ_RESP_MIDDLE] =
	ROW("RC RDMA Read Response Middle", SR_OPF_MIDDLE | SR_OPF_READ | SR_OPF_PAYLOAD, H_BTH),
    [SR_TR_RC | SR_IB_READ_RESP_LAST] =
	ROW("RC RDMA Read Response Last", RESP_LAST, H_BTH + SR_AETH_LEN, .aeth_off = H_BTH),
    [SR_TR_RC | SR_IB_READ_RESP_ONLY] = ROW("RC RDMA Read Response Only", RESP_LAST | SR_OPF_FIRST,
					    H_BTH + SR_AETH_LEN, .aeth_off = H_BTH),
    [SR_TR_RC | SR_IB_ACK] =
	ROW("RC Acknowledge", SR_OPF_ACK | SR_OPF_AETH, H_BTH + SR_AETH_LEN, .aeth_off = H_BTH),
    [SR_TR_RC | SR_IB_ATOMIC_ACK] =
	ROW("RC Atomic Acknowledge", SR_OPF_ACK | SR_OPF_AETH | SR_OPF_ATOMACKETH,
	    H_BTH + SR_AETH_LEN + SR_ATOMACKETH_LEN, .aeth_off = H_BTH),
    [SR_TR_RC | SR_IB_CMP_SWAP] =
	ROW("RC CmpSwap", SR_OPF_REQ | SR_OPF_ATOMIC | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_ATOMETH,
	    H_BTH + SR_ATOMETH_LEN, .atom_off = H_BTH),
    [SR_TR_RC | SR_IB_FETCH_ADD] =
	ROW("RC FetchAdd", SR_OPF_REQ | SR_OPF_ATOMIC | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_ATOMETH,
	    H_BTH + SR_ATOMETH_LEN, .atom_off = H_BTH),
    [SR_TR_RC | SR_IB_SEND_LAST_INV] =
	ROW("RC Send Last with Invalidate",
	    SR_OPF_REQ | SR_OPF_SEND | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IETH,
	    H_BTH + SR_IETH_LEN, .ieth_off = H_BTH),
    [SR_TR_RC | SR_IB_SEND_ONLY_INV] =
	ROW("RC Send Only with Invalidate",
	    SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IETH,
	    H_BTH + SR_IETH_LEN, .ieth_off = H_BTH),
    [SR_TR_UD | SR_IB_SEND_ONLY] =
	ROW("UD Send Only",
	    SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_DETH,
	    H_BTH + SR_DETH_LEN, .deth_off = H_BTH),
    [SR_TR_UD | SR_IB_SEND_ONLY_IMM] = ROW("UD Send Only with Immediate",
					   SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST |
					       SR_OPF_PAYLOAD | SR_OPF_DETH | SR_OPF_IMMDT,
					   H_BTH + SR_DETH_LEN + SR_IMMDT_LEN, .deth_off = H_BTH,
					   .immdt_off = H_BTH + SR_DETH_LEN),
};

const char *const sr_drop_name[SR_DROP_MAX] = {
    [SR_DROP_NONE] = "none",	    [SR_DROP_SHORT] = "short",	 [SR_DROP_OPCODE] = "opcode",
    [SR_DROP_ICRC] = "icrc",	    [SR_DROP_QPN] = "qpn",	 [SR_DROP_TRANSPORT] = "transport",
    [SR_DROP_PKEY] = "pkey",	    [SR_DROP_QKEY] = "qkey",	 [SR_DROP_STATE] = "state",
    [SR_DROP_PSN] = "psn",	    [SR_DROP_LENGTH] = "length", [SR_DROP_SRC] = "source",
    [SR_DROP_NOBUF] = "no-receive",
};

enum sr_drop sr_pkt_parse(const uint8_t *buf, uint32_t len, struct sr_pkt *pkt)
{
	const struct sr_opcode_info *op;
	uint32_t pad;

	if (len < SR_BTH_LEN + SR_ICRC_LEN)
		return SR_DROP_SHORT;
	sr_bth_get(buf, &pkt->bth);
	op = &sr_opcode_info[pkt->bth.opcode];
	if (!(op->flags & SR_OPF_VALID) || sr_bth_tver(&pkt->bth) != 0)
		return SR_DROP_OPCODE;
	pad = sr_bth_padcnt(&pkt->bth);
	if (len < (uint32_t)op->hdr_len + pad + SR_ICRC_LEN)
		return SR_DROP_SHORT;
	pkt->op = op;
	pkt->payload = buf + op->hdr_len;
	pkt->paylen = len - op->hdr_len - pad - SR_ICRC_LEN;
	/* C9-xx (and the ATOMIC_WRITE leak rxe had): a packet of an opcode
	 * without payload carries exactly its headers */
	if (!(op->flags & SR_OPF_PAYLOAD) && (pkt->paylen || pad))
		return SR_DROP_LENGTH;
	if (op->flags & SR_OPF_RETH) {
		pkt->va = sr_get_be64(buf + op->reth_off);
		pkt->rkey = sr_get_be32(buf + op->reth_off + 8);
		pkt->dma_len = sr_get_be32(buf + op->reth_off + 12);
	}
	if (op->flags & SR_OPF_ATOMETH) {
		pkt->va = sr_get_be64(buf + op->atom_off);
		pkt->rkey = sr_get_be32(buf + op->atom_off + 8);
		pkt->swap_add = sr_get_be64(buf + op->atom_off + 12);
		pkt->compare = sr_get_be64(buf + op->atom_off + 20);
		pkt->dma_len = 8;
	}
	if (op->flags & SR_OPF_AETH) {
		uint32_t a = sr_get_be32(buf + op->aeth_off);

		pkt->syndrome = a >> 24;
		pkt->msn = a & 0xffffff;
	}
	if (op->flags & SR_OPF_ATOMACKETH)
		pkt->atomic_orig = sr_get_be64(buf + op->aeth_off + SR_AETH_LEN);
	if (op->flags & SR_OPF_IMMDT)
		memcpy(&pkt->imm_be, buf + op->immdt_off, 4);
	if (op->flags & SR_OPF_IETH)
		pkt->inv_rkey = sr_get_be32(buf + op->ieth_off);
	if (op->flags & SR_OPF_DETH) {
		pkt->qkey = sr_get_be32(buf + op->deth_off);
		pkt->src_qpn = sr_get_be32(buf + op->deth_off + 4) & SR_QPN_MASK;
	}
	return SR_DROP_NONE;
}
