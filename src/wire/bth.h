/*
 * RoCEv2 transport headers (IBTA vol. 1 ch. 9, Annex A17): the Base
 * Transport Header and the extension headers, their wire encoding
 * (big-endian, packed), and the opcode table that says which headers each
 * opcode carries.  Everything that reads or writes a header goes through
 * these accessors; the engine (src/engine) never computes an offset itself.
 *
 * A RoCEv2 packet is the payload of a UDP datagram to port 4791:
 *   BTH (12) | extension headers | payload | pad (0-3) | ICRC (4)
 * An XRC request (annex A14) carries its XRCETH first, right after the
 * BTH, then the RC request's own headers (RETH, ImmDt, IETH, AtomicETH).
 * The IP header plays the part of the GRH, so there is no LRH or GRH.
 */
#ifndef SR_WIRE_BTH_H
#define SR_WIRE_BTH_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define SR_ROCE_PORT	  4791
#define SR_BTH_LEN	  12
#define SR_RETH_LEN	  16
#define SR_AETH_LEN	  4
#define SR_ATOMETH_LEN	  28
#define SR_ATOMACKETH_LEN 8
#define SR_IMMDT_LEN	  4
#define SR_IETH_LEN	  4
#define SR_DETH_LEN	  8
#define SR_XRCETH_LEN	  4
#ifndef SR_ICRC_LEN
#define SR_ICRC_LEN 4 /* also in icrc.h */
#endif
/* the largest header stack: BTH + XRCETH + AtomicETH (XRC CmpSwap), before
 * BTH + XRCETH + RETH + ImmDt (XRC WRITE_ONLY_IMM) */
#define SR_MAX_HDR_LEN 44
/* a UD datagram's: BTH + DETH + ImmDt (the arena's UD transmit slots) */
#define SR_UD_MAX_HDR_LEN (SR_BTH_LEN + SR_DETH_LEN + SR_IMMDT_LEN)

#define SR_PSN_MASK	0xffffffu
#define SR_QPN_MASK	0xffffffu
#define SR_DEFAULT_PKEY 0xffff
#define SR_GSI_QKEY	0x80010000u

/* OpCode = transport (bits 7-5) | operation (bits 4-0) (IBTA 9.2, table 38) */
enum sr_transport {
	SR_TR_RC = 0x00,
	SR_TR_UC = 0x20,
	SR_TR_RD = 0x40,
	SR_TR_UD = 0x60,
	SR_TR_XRC = 0xa0, /* annex A14: the RC operations, requests with an XRCETH */
};

/* The Congestion Notification Packet (annex A17.9.3): BTH with BECN set,
 * 16 reserved bytes, the ICRC; DestQP is the QP whose sending caused it. */
#define SR_CNP_OPCODE	0x81
#define SR_CNP_RSVD_LEN 16
#define SR_CNP_HDR_LEN	(SR_BTH_LEN + SR_CNP_RSVD_LEN)

enum sr_ib_op {
	SR_IB_SEND_FIRST = 0x00,
	SR_IB_SEND_MIDDLE = 0x01,
	SR_IB_SEND_LAST = 0x02,
	SR_IB_SEND_LAST_IMM = 0x03,
	SR_IB_SEND_ONLY = 0x04,
	SR_IB_SEND_ONLY_IMM = 0x05,
	SR_IB_WRITE_FIRST = 0x06,
	SR_IB_WRITE_MIDDLE = 0x07,
	SR_IB_WRITE_LAST = 0x08,
	SR_IB_WRITE_LAST_IMM = 0x09,
	SR_IB_WRITE_ONLY = 0x0a,
	SR_IB_WRITE_ONLY_IMM = 0x0b,
	SR_IB_READ_REQUEST = 0x0c,
	SR_IB_READ_RESP_FIRST = 0x0d,
	SR_IB_READ_RESP_MIDDLE = 0x0e,
	SR_IB_READ_RESP_LAST = 0x0f,
	SR_IB_READ_RESP_ONLY = 0x10,
	SR_IB_ACK = 0x11,
	SR_IB_ATOMIC_ACK = 0x12,
	SR_IB_CMP_SWAP = 0x13,
	SR_IB_FETCH_ADD = 0x14,
	SR_IB_SEND_LAST_INV = 0x16,
	SR_IB_SEND_ONLY_INV = 0x17,
};

/* What an opcode carries and means (sr_opcode_info[opcode]). */
enum sr_opflag {
	SR_OPF_VALID = 1 << 0,
	SR_OPF_RETH = 1 << 1,
	SR_OPF_AETH = 1 << 2,
	SR_OPF_ATOMETH = 1 << 3,
	SR_OPF_ATOMACKETH = 1 << 4,
	SR_OPF_IMMDT = 1 << 5,
	SR_OPF_IETH = 1 << 6,
	SR_OPF_DETH = 1 << 7,
	SR_OPF_PAYLOAD = 1 << 8,
	SR_OPF_REQ = 1 << 9, /* a request (to the responder); else a response */
	SR_OPF_FIRST = 1 << 10,
	SR_OPF_MIDDLE = 1 << 11,
	SR_OPF_LAST = 1 << 12, /* FIRST|LAST = ONLY */
	SR_OPF_SEND = 1 << 13,
	SR_OPF_WRITE = 1 << 14,
	SR_OPF_READ = 1 << 15, /* READ request or response */
	SR_OPF_ATOMIC = 1 << 16,
	SR_OPF_ACK = 1 << 17,
	SR_OPF_XRCETH = 1 << 18, /* XRC request: XRCETH right after the BTH */
	SR_OPF_CNP = 1 << 19,	 /* a congestion notification (no transport of its own) */
};

struct sr_opcode_info {
	const char *name;
	uint32_t flags;	 /* enum sr_opflag */
	uint8_t hdr_len; /* BTH and every extension header */
	uint8_t reth_off, aeth_off, atom_off, immdt_off, ieth_off, deth_off;
	uint8_t xrceth_off;
};

extern const struct sr_opcode_info sr_opcode_info[256];

/* ---- BTH ---- */

struct sr_bth {
	uint8_t opcode;
	uint8_t flags; /* SE 0x80, MigReq 0x40, PadCnt 0x30, TVer 0x0f */
	uint16_t pkey; /* big-endian on the wire, host order here */
	uint32_t dqpn; /* 24 bits */
	uint32_t psn;  /* 24 bits */
	bool ackreq;
	bool becn, fecn;
};

#define SR_BTH_SE     0x80
#define SR_BTH_MIGREQ 0x40

static inline uint32_t sr_get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static inline void sr_put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static inline uint64_t sr_get_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static inline void sr_put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static inline void sr_bth_put(uint8_t *p, uint8_t opcode, bool se, unsigned padcnt, uint16_t pkey,
			      uint32_t dqpn, bool ackreq, uint32_t psn)
{
	p[0] = opcode;
	p[1] = (se ? SR_BTH_SE : 0) | (uint8_t)((padcnt & 3) << 4);
	p[2] = pkey >> 8;
	p[3] = (uint8_t)pkey;
	sr_put_be32(p + 4, dqpn & SR_QPN_MASK); /* byte 4: FECN/BECN/reserved = 0 */
	sr_put_be32(p + 8, (ackreq ? 0x80000000u : 0) | (psn & SR_PSN_MASK));
}

static inline void sr_bth_get(const uint8_t *p, struct sr_bth *b)
{
	uint32_t w1 = sr_get_be32(p + 4), w2 = sr_get_be32(p + 8);

	b->opcode = p[0];
	b->flags = p[1];
	b->pkey = (uint16_t)(p[2] << 8 | p[3]);
	b->fecn = p[4] & 0x80;
	b->becn = p[4] & 0x40;
	b->dqpn = w1 & SR_QPN_MASK;
	b->ackreq = w2 & 0x80000000u;
	b->psn = w2 & SR_PSN_MASK;
}

/* The destination QPN of a datagram that may be a runt (0 if shorter
 * than a BTH), read before it is parsed: which thread takes it, which
 * fault rule matches it. */
static inline uint32_t sr_bth_dqpn_raw(const uint8_t *p, uint32_t len)
{
	return len >= SR_BTH_LEN ? sr_get_be32(p + 4) & 0xFFFFFF : 0;
}

static inline unsigned sr_bth_padcnt(const struct sr_bth *b)
{
	return (b->flags >> 4) & 3;
}

static inline unsigned sr_bth_tver(const struct sr_bth *b)
{
	return b->flags & 0x0f;
}

/* ---- extension headers ---- */

static inline void sr_reth_put(uint8_t *p, uint64_t va, uint32_t rkey, uint32_t len)
{
	sr_put_be64(p, va);
	sr_put_be32(p + 8, rkey);
	sr_put_be32(p + 12, len);
}

/* AETH syndrome (IBTA 9.7.5.1, table 42): bits 7-5 the kind, 4-0 a value */
enum sr_aeth_kind {
	SR_AETH_ACK = 0x00,	/* value: credit count, 0x1f = no limit */
	SR_AETH_RNR_NAK = 0x20, /* value: RNR timer code */
	SR_AETH_NAK = 0x60,	/* value: enum sr_nak_code */
};

enum sr_nak_code {
	SR_NAK_PSN_SEQ = 0,
	SR_NAK_INV_REQ = 1,
	SR_NAK_REM_ACCESS = 2,
	SR_NAK_REM_OP = 3,
	SR_NAK_INV_RD_REQ = 4,
};

#define SR_AETH_NO_CREDIT_LIMIT 0x1f

static inline void sr_aeth_put(uint8_t *p, uint8_t syndrome, uint32_t msn)
{
	sr_put_be32(p, (uint32_t)syndrome << 24 | (msn & 0xffffff));
}

/* A plain RC ACK of PSN psn to QP dqpn: BTH and AETH (no credit limit). */
#define SR_ACK_HDR_LEN (SR_BTH_LEN + SR_AETH_LEN)
static inline void sr_ack_hdr_put(uint8_t *p, uint32_t dqpn, uint32_t psn, uint32_t msn)
{
	sr_bth_put(p, SR_TR_RC | SR_IB_ACK, false, 0, SR_DEFAULT_PKEY, dqpn, false, psn);
	sr_aeth_put(p + SR_BTH_LEN, SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT, msn);
}

/* A CNP to QP dqpn (A17.9.3): P_Key as every packet of ours, BECN 1, PSN 0. */
static inline void sr_cnp_put(uint8_t *p, uint32_t dqpn)
{
	sr_bth_put(p, SR_CNP_OPCODE, false, 0, SR_DEFAULT_PKEY, dqpn, false, 0);
	p[4] |= 0x40;
	memset(p + SR_BTH_LEN, 0, SR_CNP_RSVD_LEN);
}

static inline void sr_atometh_put(uint8_t *p, uint64_t va, uint32_t rkey, uint64_t swap_add,
				  uint64_t compare)
{
	sr_put_be64(p, va);
	sr_put_be32(p + 8, rkey);
	sr_put_be64(p + 12, swap_add);
	sr_put_be64(p + 20, compare);
}

/* XRCETH (A14): 8 reserved bits, the 24-bit XRC SRQ number */
static inline void sr_xrceth_put(uint8_t *p, uint32_t srqn)
{
	sr_put_be32(p, srqn & SR_QPN_MASK);
}

static inline void sr_deth_put(uint8_t *p, uint32_t qkey, uint32_t src_qpn)
{
	sr_put_be32(p, qkey);
	sr_put_be32(p + 4, src_qpn & SR_QPN_MASK);
}

/*
 * A UD SEND_ONLY's headers at p (SR_UD_MAX_HDR_LEN bytes at most): BTH
 * (pad count 0: the payload follows unpadded, the caller pads), DETH and,
 * when imm, ImmDt (imm_be in wire order).  Returns their length.
 */
static inline unsigned sr_ud_hdr_put(uint8_t *p, bool imm, bool se, uint16_t pkey, uint32_t dqpn,
				     uint32_t psn, uint32_t qkey, uint32_t src_qpn, uint32_t imm_be)
{
	sr_bth_put(p, SR_TR_UD | (imm ? SR_IB_SEND_ONLY_IMM : SR_IB_SEND_ONLY), se, 0, pkey, dqpn,
		   false, psn);
	sr_deth_put(p + SR_BTH_LEN, qkey, src_qpn);
	if (!imm)
		return SR_BTH_LEN + SR_DETH_LEN;
	memcpy(p + SR_BTH_LEN + SR_DETH_LEN, &imm_be, SR_IMMDT_LEN);
	return SR_UD_MAX_HDR_LEN;
}

/* ---- a parsed packet ---- */

/*
 * The headers of one received packet, checked for length against its
 * opcode (sr_pkt_parse).  Immediate data and the IETH's key stay in wire
 * order (imm_be), as ibv_wc.imm_data is.
 */
struct sr_pkt {
	struct sr_bth bth;
	const struct sr_opcode_info *op;
	/* RETH / AtomicETH */
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
	uint64_t swap_add, compare;
	/* AETH */
	uint8_t syndrome;
	uint32_t msn;
	/* AtomicAckETH */
	uint64_t atomic_orig;
	/* ImmDt (network order) or IETH (host order) */
	uint32_t imm_be;
	uint32_t inv_rkey;
	/* DETH */
	uint32_t qkey;
	uint32_t src_qpn;
	/* XRCETH: the XRC SRQ the request is for */
	uint32_t xrc_srqn;
	/* payload, without pad and ICRC */
	const uint8_t *payload;
	uint32_t paylen;
};

/* Why a packet was dropped (counted per reason: `softrdma status`). */
enum sr_drop {
	SR_DROP_NONE = 0,
	SR_DROP_SHORT,	   /* shorter than its opcode's headers + ICRC */
	SR_DROP_OPCODE,	   /* unknown or unsupported opcode, TVer != 0 */
	SR_DROP_ICRC,	   /* invariant CRC mismatch */
	SR_DROP_QPN,	   /* no such QP */
	SR_DROP_TRANSPORT, /* opcode of another transport than the QP's */
	SR_DROP_PKEY,	   /* P_Key does not match */
	SR_DROP_QKEY,	   /* UD: Q_Key does not match */
	SR_DROP_STATE,	   /* QP not in a state that accepts it */
	SR_DROP_PSN,	   /* out of the window (duplicate handled, or too far) */
	SR_DROP_LENGTH,	   /* payload length wrong for the opcode or the MTU */
	SR_DROP_SRC,	   /* connected QP: packet from another address than its peer */
	SR_DROP_NOBUF,	   /* UD/UC: no receive posted */
	SR_DROP_GONE,	   /* the QP's process has exited (layout.h, struct sr_life_slot) */
	SR_DROP_MAX
};

extern const char *const sr_drop_name[SR_DROP_MAX];

/* Parses and length-checks the headers of a RoCEv2 UDP payload of `len`
 * bytes (including the ICRC, which it does not verify).  Returns
 * SR_DROP_NONE or the reason to drop it. */
enum sr_drop sr_pkt_parse(const uint8_t *buf, uint32_t len, struct sr_pkt *pkt);

/* ---- PSN arithmetic (24 bits, IBTA 9.7.1) ---- */

/* a - b as a signed distance in the 24-bit circle */
static inline int32_t sr_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t sr_psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & SR_PSN_MASK;
}

/* The IB MTU enum (1 = 256 ... 5 = 4096) in bytes. */
static inline uint32_t sr_mtu_bytes(unsigned enc)
{
	return enc >= 1 && enc <= 5 ? 128u << enc : 256;
}

#endif
