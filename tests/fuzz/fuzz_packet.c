/*
 * libFuzzer target for the RoCEv2 receive path's parsing (wire/opcode.c
 * and wire/icrc.c): any bytes, as the UDP payload of a datagram from any
 * address, must parse to a drop reason or to headers and a payload that lie
 * inside the datagram, and the ICRC check must not read outside it.
 * ASan+UBSan catch the rest.  The first 33 bytes choose the addresses
 * (IPv4 or IPv6) and the source port; the rest is the datagram.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/bth.h"
#include "wire/icrc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t sgid[16], dgid[16];
	struct sr_pkt p;
	uint8_t *buf;
	uint32_t len;
	uint16_t sport;

	if (size < 33 || size > 33 + 9216)
		return 0;
	memcpy(sgid, data, 16);
	memcpy(dgid, data + 16, 16);
	if (data[32] & 1) { /* IPv4-mapped */
		memset(sgid, 0, 10);
		memset(dgid, 0, 10);
		sgid[10] = sgid[11] = dgid[10] = dgid[11] = 0xff;
	}
	sport = (uint16_t)(data[32] << 8 | data[0]);
	len = (uint32_t)(size - 33);
	buf = malloc(len ? len : 1); /* exactly the datagram: ASan sees any overread */
	if (!buf)
		return 0;
	memcpy(buf, data + 33, len);
	if (sr_pkt_parse(buf, len, &p) == SR_DROP_NONE) {
		struct iovec iov = {buf, len - SR_ICRC_LEN};
		const uint8_t *end = buf + len;

		if (!p.op || !(p.op->flags & SR_OPF_VALID) || p.payload < buf + SR_BTH_LEN ||
		    p.payload + p.paylen + sr_bth_padcnt(&p.bth) + SR_ICRC_LEN != end)
			abort();
		if (!(p.op->flags & SR_OPF_PAYLOAD) && p.paylen)
			abort();
		(void)sr_icrc_ok(sgid, dgid, sport, SR_ROCE_PORT, &iov, 1, end - SR_ICRC_LEN);
	}
	free(buf);
	return 0;
}
