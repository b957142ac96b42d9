/*
 * roce_gen: writes a pcap of N random RoCEv2 packets through src/wire
 * (ICRC, frame, pcap writer), for the scapy and tshark oracles.
 *
 *   roce_gen OUT.pcap N SEED [MAXPAY]
 *
 * Half the packets travel over IPv4 (some with a non-zero identification,
 * as GSO segments have), half over IPv6; payloads up to MAXPAY bytes
 * (default 4096) reach the writer split into random iovecs.  One line per
 * packet on stdout says what was written:
 *
 *   INDEX 4|6 OPCODE DQPN PSN PADCNT IPID ICRC ICRC_REF
 *
 * (numbers in decimal but ICRC and ICRC_REF: 8 hex digits, the CRC value,
 * sent least significant byte first; ICRC_REF from tests/wire/icrc_ref.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "icrc_ref.h"
#include "roce_pkt.h"
#include "wire/icrc.h"
#include "wire/pcap.h"

int main(int argc, char **argv)
{
	struct sr_pcap *pc;
	uint64_t rng;
	size_t maxpay = argc > 4 ? strtoul(argv[4], NULL, 0) : 4096;
	uint8_t *buf = malloc(ROCE_PKT_HDR_MAX + maxpay + 3 + SR_ICRC_LEN);
	long n;
	int ret;

	if (argc < 4) {
		fprintf(stderr, "usage: %s OUT.pcap N SEED [MAXPAY]\n", argv[0]);
		return 2;
	}
	n = atol(argv[2]);
	rng = strtoull(argv[3], NULL, 0) * 0x9e3779b97f4a7c15ull | 1;
	ret = sr_pcap_open(&pc, argv[1]);
	if (ret) {
		fprintf(stderr, "roce_gen: %s: error %d\n", argv[1], ret);
		return 1;
	}
	for (long i = 0; i < n; i++) {
		uint8_t s[16], d[16];
		struct roce_pkt pkt;
		struct iovec iov[4], whole;
		struct timespec ts = {1700000000 + i / 1000, (i % 1000) * 1000000 + 123};
		int v4 = (int)(roce_rand(&rng) & 1), cnt = 0;
		uint16_t sport = (uint16_t)(0xc000 | (roce_rand(&rng) & 0x3fff));
		uint16_t id = v4 && roce_rand(&rng) % 4 == 0 ? (uint16_t)roce_rand(&rng) : 0;
		uint32_t icrc, ref;
		size_t len, cut;

		roce_rand_gid(&rng, s, v4);
		roce_rand_gid(&rng, d, v4);
		len = roce_pkt_make(buf, maxpay, &rng, &pkt);
		/* headers, two pieces of payload, ICRC: as the engine gathers them */
		cut = pkt.hdr_len + (size_t)(roce_rand(&rng) % (len - pkt.hdr_len + 1));
		iov[cnt++] = (struct iovec){buf, pkt.hdr_len};
		iov[cnt++] = (struct iovec){buf + pkt.hdr_len, cut - pkt.hdr_len};
		iov[cnt++] = (struct iovec){buf + cut, len - cut};
		icrc = sr_icrc_id(s, d, sport, 4791, id, iov, cnt);
		whole = (struct iovec){buf, len};
		ref = sr_icrc_ref(s, d, sport, 4791, id, &whole, 1);
		sr_icrc_put(buf + len, icrc);
		iov[cnt++] = (struct iovec){buf + len, SR_ICRC_LEN};
		ret = sr_pcap_write(pc, &ts, s, d, sport, 4791, id, iov, cnt);
		if (ret) {
			fprintf(stderr, "roce_gen: write: error %d\n", ret);
			return 1;
		}
		printf("%ld %d %u %u %u %u %u %08x %08x\n", i, v4 ? 4 : 6, pkt.opcode, pkt.dqpn,
		       pkt.psn, pkt.padcnt, id, icrc, ref);
	}
	free(buf);
	return sr_pcap_close(pc) ? 1 : 0;
}
