/*
 * The RoCEv2 opcode table (IBTA vol. 1, table 38 and 9.3; XRC: annex A14)
 * and the packet parser built on it.  One row per opcode: its name (as
 * Wireshark prints it), which extension headers it carries and where,
 * whether it carries a payload, and its place in a message.  The requester, the responder and
 * the completer all read this table; nothing else knows a header offset.
 */
#include "wire/bth.h"

/* Header layouts, BTH first; offsets are from the start of the BTH. */
#define H_BTH	   (SR_BTH_LEN)
#define H_XRC	   (SR_BTH_LEN + SR_XRCETH_LEN) /* an XRC request's headers after the XRCETH */
#define RETH_AT(o) .reth_off = (o)
#define ROW(nm, fl, len, ...)                                                                      \
	{                                                                                          \
		.name = nm, .flags = SR_OPF_VALID | (fl), .hdr_len = (len), __VA_ARGS__            \
	}

/* The transports' requests: RC and UC (no XRCETH: H = H_BTH, XF = 0, XI =
 * no offset) and XRC (H = H_XRC, XF = SR_OPF_XRCETH, XI = its offset). */
#define NO_XRC			      0, .xrceth_off = 0
#define WITH_XRC		      SR_OPF_XRCETH, .xrceth_off = H_BTH
#define RQ(nm, fl, len, X, ...)	      RQ_(nm, fl, len, X, __VA_ARGS__)
#define RQ_(nm, fl, len, xf, xi, ...) ROW(nm, SR_OPF_REQ | (fl) | (xf), len, xi, __VA_ARGS__)

/* SEND and RDMA WRITE: RC, UC and XRC */
#define SEND_ROWS(T, tn, H, X)                                                                     \
	[T | SR_IB_SEND_FIRST] =                                                                   \
	    RQ(tn " Send First", SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_PAYLOAD, H, X),               \
	     [T | SR_IB_SEND_MIDDLE] =                                                             \
		 RQ(tn " Send Middle", SR_OPF_SEND | SR_OPF_MIDDLE | SR_OPF_PAYLOAD, H, X),        \
	     [T | SR_IB_SEND_LAST] =                                                               \
		 RQ(tn " Send Last", SR_OPF_SEND | SR_OPF_LAST | SR_OPF_PAYLOAD, H, X),            \
	     [T | SR_IB_SEND_LAST_IMM] =                                                           \
		 RQ(tn " Send Last with Immediate",                                                \
		    SR_OPF_SEND | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IMMDT, (H) + SR_IMMDT_LEN, \
		    X, .immdt_off = (H)),                                                          \
	     [T | SR_IB_SEND_ONLY] =                                                               \
		 RQ(tn " Send Only", SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD, H, \
		    X),                                                                            \
	     [T | SR_IB_SEND_ONLY_IMM] =                                                           \
		 RQ(tn " Send Only with Immediate",                                                \
		    SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IMMDT,      \
		    (H) + SR_IMMDT_LEN, X, .immdt_off = (H)),                                      \
	     [T | SR_IB_WRITE_FIRST] =                                                             \
		 RQ(tn " RDMA Write First",                                                        \
		    SR_OPF_WRITE | SR_OPF_FIRST | SR_OPF_PAYLOAD | SR_OPF_RETH, (H) + SR_RETH_LEN, \
		    X, RETH_AT(H)),                                                                \
	     [T | SR_IB_WRITE_MIDDLE] = RQ(tn " RDMA Write Middle",                                \
					   SR_OPF_WRITE | SR_OPF_MIDDLE | SR_OPF_PAYLOAD, H, X, ), \
	     [T | SR_IB_WRITE_LAST] =                                                              \
		 RQ(tn " RDMA Write Last", SR_OPF_WRITE | SR_OPF_LAST | SR_OPF_PAYLOAD, H, X, ),   \
	     [T | SR_IB_WRITE_LAST_IMM] =                                                          \
		 RQ(tn " RDMA Write Last with Immediate",                                          \
		    SR_OPF_WRITE | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IMMDT,                    \
		    (H) + SR_IMMDT_LEN, X, .immdt_off = (H)),                                      \
	     [T | SR_IB_WRITE_ONLY] =                                                              \
		 RQ(tn " RDMA Write Only",                                                         \
		    SR_OPF_WRITE | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_RETH,      \
		    (H) + SR_RETH_LEN, X, RETH_AT(H)),                                             \
	     [T | SR_IB_WRITE_ONLY_IMM] = RQ(tn " RDMA Write Only with Immediate",                 \
					     SR_OPF_WRITE | SR_OPF_FIRST | SR_OPF_LAST |           \
						 SR_OPF_PAYLOAD | SR_OPF_RETH | SR_OPF_IMMDT,      \
					     (H) + SR_RETH_LEN + SR_IMMDT_LEN, X, RETH_AT(H),      \
					     .immdt_off = (H) + SR_RETH_LEN)

#define RESP_LAST (SR_OPF_LAST | SR_OPF_READ | SR_OPF_PAYLOAD | SR_OPF_AETH)

/*
 * What RC and XRC have and UC has not: READ, its responses, the ACKs,
 * atomics, SEND with invalidate.  The responses of XRC are XRC opcodes
 * (0xAD..0xB2) with the RC layouts, no XRCETH (A14; Wireshark's
 * packet-infiniband.c and rdma-core's opcode list agree).
 */
#define RC_ROWS(T, tn, H, X)                                                                       \
	[T | SR_IB_READ_REQUEST] =                                                                 \
	    RQ(tn " RDMA Read Request", SR_OPF_READ | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_RETH,    \
	       (H) + SR_RETH_LEN, X, RETH_AT(H)),                                                  \
	     [T | SR_IB_READ_RESP_FIRST] =                                                         \
		 ROW(tn " RDMA Read Response First",                                               \
		     SR_OPF_FIRST | SR_OPF_READ | SR_OPF_PAYLOAD | SR_OPF_AETH,                    \
		     H_BTH + SR_AETH_LEN, .aeth_off = H_BTH),                                      \
	     [T | SR_IB_READ_RESP_MIDDLE] =                                                        \
		 ROW(tn " RDMA Read Response Middle",                                              \
		     SR_OPF_MIDDLE | SR_OPF_READ | SR_OPF_PAYLOAD, H_BTH),                         \
	     [T | SR_IB_READ_RESP_LAST] = ROW(tn " RDMA Read Response Last", RESP_LAST,            \
					      H_BTH + SR_AETH_LEN, .aeth_off = H_BTH),             \
	     [T | SR_IB_READ_RESP_ONLY] =                                                          \
		 ROW(tn " RDMA Read Response Only", RESP_LAST | SR_OPF_FIRST, H_BTH + SR_AETH_LEN, \
		     .aeth_off = H_BTH),                                                           \
	     [T | SR_IB_ACK] = ROW(tn " Acknowledge", SR_OPF_ACK | SR_OPF_AETH,                    \
				   H_BTH + SR_AETH_LEN, .aeth_off = H_BTH),                        \
	     [T | SR_IB_ATOMIC_ACK] =                                                              \
		 ROW(tn " Atomic Acknowledge", SR_OPF_ACK | SR_OPF_AETH | SR_OPF_ATOMACKETH,       \
		     H_BTH + SR_AETH_LEN + SR_ATOMACKETH_LEN, .aeth_off = H_BTH),                  \
	     [T | SR_IB_CMP_SWAP] =                                                                \
		 RQ(tn " CmpSwap", SR_OPF_ATOMIC | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_ATOMETH,    \
		    (H) + SR_ATOMETH_LEN, X, .atom_off = (H)),                                     \
	     [T | SR_IB_FETCH_ADD] =                                                               \
		 RQ(tn " FetchAdd", SR_OPF_ATOMIC | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_ATOMETH,   \
		    (H) + SR_ATOMETH_LEN, X, .atom_off = (H)),                                     \
	     [T | SR_IB_SEND_LAST_INV] =                                                           \
		 RQ(tn " Send Last with Invalidate",                                               \
		    SR_OPF_SEND | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IETH, (H) + SR_IETH_LEN,   \
		    X, .ieth_off = (H)),                                                           \
	     [T | SR_IB_SEND_ONLY_INV] =                                                           \
		 RQ(tn " Send Only with Invalidate",                                               \
		    SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_IETH,       \
		    (H) + SR_IETH_LEN, X, .ieth_off = (H))

const struct sr_opcode_info sr_opcode_info[256] = {
    SEND_ROWS(SR_TR_RC, "RC", H_BTH, NO_XRC),
    RC_ROWS(SR_TR_RC, "RC", H_BTH, NO_XRC),
    SEND_ROWS(SR_TR_UC, "UC", H_BTH, NO_XRC),
    SEND_ROWS(SR_TR_XRC, "XRC", H_XRC, WITH_XRC),
    RC_ROWS(SR_TR_XRC, "XRC", H_XRC, WITH_XRC),
    [SR_TR_UD | SR_IB_SEND_ONLY] =
	ROW("UD Send Only",
	    SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST | SR_OPF_PAYLOAD | SR_OPF_DETH,
	    H_BTH + SR_DETH_LEN, .deth_off = H_BTH),
    [SR_TR_UD | SR_IB_SEND_ONLY_IMM] = ROW("UD Send Only with Immediate",
					   SR_OPF_REQ | SR_OPF_SEND | SR_OPF_FIRST | SR_OPF_LAST |
					       SR_OPF_PAYLOAD | SR_OPF_DETH | SR_OPF_IMMDT,
					   H_BTH + SR_DETH_LEN + SR_IMMDT_LEN, .deth_off = H_BTH,
					   .immdt_off = H_BTH + SR_DETH_LEN),
    [SR_CNP_OPCODE] = ROW("CNP", SR_OPF_CNP, SR_CNP_HDR_LEN),
};

const char *const sr_drop_name[SR_DROP_MAX] = {
    [SR_DROP_NONE] = "none",	    [SR_DROP_SHORT] = "short",	 [SR_DROP_OPCODE] = "opcode",
    [SR_DROP_ICRC] = "icrc",	    [SR_DROP_QPN] = "qpn",	 [SR_DROP_TRANSPORT] = "transport",
    [SR_DROP_PKEY] = "pkey",	    [SR_DROP_QKEY] = "qkey",	 [SR_DROP_STATE] = "state",
    [SR_DROP_PSN] = "psn",	    [SR_DROP_LENGTH] = "length", [SR_DROP_SRC] = "source",
    [SR_DROP_NOBUF] = "no-receive", [SR_DROP_GONE] = "gone",
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
	/* (rxe once leaked ATOMIC_WRITE payloads this way) a packet of an opcode
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
	if (op->flags & SR_OPF_XRCETH)
		pkt->xrc_srqn = sr_get_be32(buf + op->xrceth_off) & SR_QPN_MASK;
	if (op->flags & SR_OPF_DETH) {
		pkt->qkey = sr_get_be32(buf + op->deth_off);
		pkt->src_qpn = sr_get_be32(buf + op->deth_off + 4) & SR_QPN_MASK;
	}
	return SR_DROP_NONE;
}
