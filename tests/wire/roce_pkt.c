/*
 * Random RoCEv2 packets (see roce_pkt.h).  The layout table is ours, from
 * the IBTA's header tables; header order after the BTH is XRCETH (annex
 * A14: XRC requests), DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH
 * (vol. 1 9.2, figure 118).
 */
#include <string.h>

#include "roce_pkt.h"

enum {
	X_RETH = 1 << 0,   /* 16: VA, R_Key, DMA length */
	X_AETH = 1 << 1,   /* 4: syndrome, MSN */
	X_ATOMIC = 1 << 2, /* 28: VA, R_Key, swap/add, compare */
	X_AACK = 1 << 3,   /* 8: original remote data */
	X_IMM = 1 << 4,	   /* 4 */
	X_IETH = 1 << 5,   /* 4: R_Key to invalidate */
	X_DETH = 1 << 6,   /* 8: Q_Key, reserved, source QP */
	X_PAY = 1 << 7,	   /* carries payload */
	X_FULL = 1 << 8,   /* FIRST/MIDDLE: payload is whole MTUs, no pad */
	X_CNP = 1 << 9,	   /* 16 reserved bytes */
	X_XRC = 1 << 10,   /* 4: reserved, XRC SRQ number */
};

static const struct {
	uint8_t opcode;
	unsigned x;
} ops[] = {
    /* RC */
    {0x00, X_PAY | X_FULL},	     /* SEND_FIRST */
    {0x01, X_PAY | X_FULL},	     /* SEND_MIDDLE */
    {0x02, X_PAY},		     /* SEND_LAST */
    {0x03, X_IMM | X_PAY},	     /* SEND_LAST_WITH_IMMEDIATE */
    {0x04, X_PAY},		     /* SEND_ONLY */
    {0x05, X_IMM | X_PAY},	     /* SEND_ONLY_WITH_IMMEDIATE */
    {0x06, X_RETH | X_PAY | X_FULL}, /* RDMA_WRITE_FIRST */
    {0x07, X_PAY | X_FULL},	     /* RDMA_WRITE_MIDDLE */
    {0x08, X_PAY},		     /* RDMA_WRITE_LAST */
    {0x09, X_IMM | X_PAY},	     /* RDMA_WRITE_LAST_WITH_IMMEDIATE */
    {0x0a, X_RETH | X_PAY},	     /* RDMA_WRITE_ONLY */
    {0x0b, X_RETH | X_IMM | X_PAY},  /* RDMA_WRITE_ONLY_WITH_IMMEDIATE */
    {0x0c, X_RETH},		     /* RDMA_READ_REQUEST */
    {0x0d, X_AETH | X_PAY | X_FULL}, /* RDMA_READ_RESPONSE_FIRST */
    {0x0e, X_PAY | X_FULL},	     /* RDMA_READ_RESPONSE_MIDDLE */
    {0x0f, X_AETH | X_PAY},	     /* RDMA_READ_RESPONSE_LAST */
    {0x10, X_AETH | X_PAY},	     /* RDMA_READ_RESPONSE_ONLY */
    {0x11, X_AETH},		     /* ACKNOWLEDGE */
    {0x12, X_AETH | X_AACK},	     /* ATOMIC_ACKNOWLEDGE */
    {0x13, X_ATOMIC},		     /* COMPARE_SWAP */
    {0x14, X_ATOMIC},		     /* FETCH_ADD */
    {0x16, X_IETH | X_PAY},	     /* SEND_LAST_WITH_INVALIDATE */
    {0x17, X_IETH | X_PAY},	     /* SEND_ONLY_WITH_INVALIDATE */
    /* UC */
    {0x20, X_PAY | X_FULL},
    {0x21, X_PAY | X_FULL},
    {0x22, X_PAY},
    {0x23, X_IMM | X_PAY},
    {0x24, X_PAY},
    {0x25, X_IMM | X_PAY},
    {0x26, X_RETH | X_PAY | X_FULL},
    {0x27, X_PAY | X_FULL},
    {0x28, X_PAY},
    {0x29, X_IMM | X_PAY},
    {0x2a, X_RETH | X_PAY},
    {0x2b, X_RETH | X_IMM | X_PAY},
    /* UD */
    {0x64, X_DETH | X_PAY},	    /* SEND_ONLY */
    {0x65, X_DETH | X_IMM | X_PAY}, /* SEND_ONLY_WITH_IMMEDIATE */
    /* XRC (annex A14): the RC operations; requests with an XRCETH, the
     * responses (0xad..0xb2) as RC's */
    {0xa0, X_XRC | X_PAY | X_FULL},
    {0xa1, X_XRC | X_PAY | X_FULL},
    {0xa2, X_XRC | X_PAY},
    {0xa3, X_XRC | X_IMM | X_PAY},
    {0xa4, X_XRC | X_PAY},
    {0xa5, X_XRC | X_IMM | X_PAY},
    {0xa6, X_XRC | X_RETH | X_PAY | X_FULL},
    {0xa7, X_XRC | X_PAY | X_FULL},
    {0xa8, X_XRC | X_PAY},
    {0xa9, X_XRC | X_IMM | X_PAY},
    {0xaa, X_XRC | X_RETH | X_PAY},
    {0xab, X_XRC | X_RETH | X_IMM | X_PAY},
    {0xac, X_XRC | X_RETH},
    {0xad, X_AETH | X_PAY | X_FULL},
    {0xae, X_PAY | X_FULL},
    {0xaf, X_AETH | X_PAY},
    {0xb0, X_AETH | X_PAY},
    {0xb1, X_AETH},
    {0xb2, X_AETH | X_AACK},
    {0xb3, X_XRC | X_ATOMIC},
    {0xb4, X_XRC | X_ATOMIC},
    {0xb6, X_XRC | X_IETH | X_PAY},
    {0xb7, X_XRC | X_IETH | X_PAY},
    /* Congestion notification */
    {0x81, X_CNP},
};

/* AETH syndromes: ACK with credits (0x1f: none), RNR NAK, the four NAKs. */
static const uint8_t syndromes[] = {0x1f, 0x00, 0x05, 0x20, 0x2e, 0x60, 0x61, 0x62, 0x63};

uint64_t roce_rand(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static void rand_bytes(uint64_t *rng, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(roce_rand(rng) >> 32);
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

void roce_rand_gid(uint64_t *rng, uint8_t gid[16], int v4)
{
	if (v4) {
		memset(gid, 0, 10);
		gid[10] = gid[11] = 0xff;
		gid[12] = 10;
		rand_bytes(rng, gid + 13, 3);
	} else {
		gid[0] = 0xfd;
		rand_bytes(rng, gid + 1, 15);
	}
}

size_t roce_pkt_make(uint8_t *buf, size_t max_pay, uint64_t *rng, struct roce_pkt *pkt)
{
	unsigned k = (unsigned)(roce_rand(rng) % (sizeof(ops) / sizeof(ops[0])));
	unsigned x = ops[k].x;
	uint8_t *p = buf;
	size_t pay = 0;

	pkt->opcode = ops[k].opcode;
	pkt->dqpn = (uint32_t)roce_rand(rng) & 0xffffff;
	pkt->psn = (uint32_t)roce_rand(rng) & 0xffffff;
	if (x & X_PAY) {
		pay = (size_t)(roce_rand(rng) % (max_pay + 1));
		if (x & X_FULL)
			pay &= ~(size_t)63; /* an MTU multiple in real traffic */
	}
	pkt->pay_len = pay;
	pkt->padcnt = (unsigned)(-pay & 3);

	/* BTH (vol. 1 9.2): FECN/BECN random (masked out of the ICRC). */
	p[0] = pkt->opcode;
	p[1] = (uint8_t)((roce_rand(rng) & 0xc0) | pkt->padcnt << 4); /* SE, M, PadCnt, TVer 0 */
	p[2] = p[3] = 0xff;					      /* P_Key */
	p[4] = (uint8_t)(roce_rand(rng) & 0xc0);		      /* FECN, BECN */
	put32(p + 4, (uint32_t)p[4] << 24 | pkt->dqpn);
	put32(p + 8, (uint32_t)(roce_rand(rng) & 0x80000000u) | pkt->psn); /* AckReq */
	p += 12;

	if (x & X_XRC)
		p = put32(p, (uint32_t)roce_rand(rng) & 0xffffff);
	if (x & X_DETH) {
		p = put32(p, roce_rand(rng) & 1 ? 0x80010000u : (uint32_t)roce_rand(rng));
		p = put32(p, (uint32_t)roce_rand(rng) & 0xffffff);
	}
	if (x & X_RETH) {
		rand_bytes(rng, p, 12);
		p = put32(p + 12, (uint32_t)pay);
	}
	if (x & X_ATOMIC) {
		rand_bytes(rng, p, 28);
		p += 28;
	}
	if (x & X_AETH) {
		uint8_t syn = syndromes[roce_rand(rng) % sizeof(syndromes)];

		p = put32(p, (uint32_t)syn << 24 | ((uint32_t)roce_rand(rng) & 0xffffff));
	}
	if (x & X_AACK) {
		rand_bytes(rng, p, 8);
		p += 8;
	}
	if (x & (X_IMM | X_IETH)) {
		rand_bytes(rng, p, 4);
		p += 4;
	}
	if (x & X_CNP) {
		memset(p, 0, 16);
		p += 16;
	}
	pkt->hdr_len = (size_t)(p - buf);
	rand_bytes(rng, p, pay);
	memset(p + pay, 0, pkt->padcnt);
	pkt->len = pkt->hdr_len + pay + pkt->padcnt;
	return pkt->len;
}
