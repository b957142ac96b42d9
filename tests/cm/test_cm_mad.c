/*
 * src/wire/cm_mad: every message kind built and parsed back with random
 * field values, fields at the byte offsets of IBTA vol. 1 tables 106-120,
 * the parser's refusals (short, wrong class, version, attribute), and the
 * Annex A11 IP header for IPv4 and IPv6.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/cm_mad.h"

static int fails;

#define EXPECT(c)                                                                                  \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #c);            \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

static uint32_t rnd(uint32_t bits)
{
	uint32_t v = (uint32_t)random() ^ ((uint32_t)random() << 16);

	return bits >= 32 ? v : v & ((1u << bits) - 1);
}

static void random_msg(struct sr_cm_msg *m, uint16_t attr)
{
	memset(m, 0, sizeof(*m));
	m->attr = attr;
	m->tid = (uint64_t)rnd(32) << 32 | rnd(32);
	m->local_comm_id = rnd(32);
	m->remote_comm_id = rnd(32);
	m->service_id = (uint64_t)rnd(32) << 32 | rnd(32);
	m->local_ca_guid = (uint64_t)rnd(32) << 32 | rnd(32);
	m->qkey = rnd(32);
	m->local_qpn = rnd(24);
	m->starting_psn = rnd(24);
	m->responder_resources = (uint8_t)rnd(8);
	m->initiator_depth = (uint8_t)rnd(8);
	m->transport = (uint8_t)rnd(2);
	m->flow_control = (uint8_t)rnd(1);
	m->retry_count = (uint8_t)rnd(3);
	m->rnr_retry_count = (uint8_t)rnd(3);
	m->srq = (uint8_t)rnd(1);
	m->remote_cm_timeout = (uint8_t)rnd(5);
	m->local_cm_timeout = (uint8_t)rnd(5);
	m->max_cm_retries = (uint8_t)rnd(4);
	m->path_mtu = (uint8_t)rnd(4);
	m->pkey = (uint16_t)rnd(16);
	m->local_lid = (uint16_t)rnd(16);
	m->remote_lid = (uint16_t)rnd(16);
	for (int i = 0; i < 16; i++) {
		m->local_gid[i] = (uint8_t)rnd(8);
		m->remote_gid[i] = (uint8_t)rnd(8);
	}
	m->flow_label = rnd(20);
	m->packet_rate = (uint8_t)rnd(6);
	m->traffic_class = (uint8_t)rnd(8);
	m->hop_limit = (uint8_t)rnd(8);
	m->sl = (uint8_t)rnd(4);
	m->subnet_local = (uint8_t)rnd(1);
	m->local_ack_timeout = (uint8_t)rnd(5);
	m->target_ack_delay = (uint8_t)rnd(5);
	m->failover = (uint8_t)rnd(2);
	m->msg_rejected = (uint8_t)rnd(2);
	m->ari_len = (uint8_t)(rnd(7) % 73);
	m->reason = (uint16_t)rnd(16);
	for (int i = 0; i < m->ari_len; i++)
		m->ari[i] = (uint8_t)rnd(8);
	m->service_timeout = (uint8_t)rnd(5);
	m->status = (uint8_t)rnd(8);
	m->private_len = sr_cm_priv_size(attr);
	for (uint32_t i = 0; i < m->private_len; i++)
		m->private_data[i] = (uint8_t)rnd(8);
}

/* The fields each kind carries must come back; the others stay zero. */
static void roundtrip(uint16_t attr)
{
	struct sr_cm_msg m, p;
	uint8_t mad[SR_CM_MAD_SIZE];

	random_msg(&m, attr);
	EXPECT(sr_cm_mad_build(&m, mad) == 0);
	EXPECT(sr_cm_mad_parse(mad, sizeof(mad), &p) == 0);
	EXPECT(p.attr == attr && p.tid == m.tid && p.local_comm_id == m.local_comm_id);
	EXPECT(p.private_len == m.private_len &&
	       !memcmp(p.private_data, m.private_data, m.private_len));
	switch (attr) {
	case SR_CM_REQ:
		EXPECT(p.service_id == m.service_id && p.local_ca_guid == m.local_ca_guid);
		EXPECT(p.qkey == m.qkey && p.local_qpn == m.local_qpn &&
		       p.starting_psn == m.starting_psn);
		EXPECT(p.responder_resources == m.responder_resources &&
		       p.initiator_depth == m.initiator_depth);
		EXPECT(p.transport == m.transport && p.flow_control == m.flow_control);
		EXPECT(p.retry_count == m.retry_count && p.rnr_retry_count == m.rnr_retry_count);
		EXPECT(p.remote_cm_timeout == m.remote_cm_timeout &&
		       p.local_cm_timeout == m.local_cm_timeout);
		EXPECT(p.max_cm_retries == m.max_cm_retries && p.srq == m.srq);
		EXPECT(p.path_mtu == m.path_mtu && p.pkey == m.pkey);
		EXPECT(p.local_lid == m.local_lid && p.remote_lid == m.remote_lid);
		EXPECT(!memcmp(p.local_gid, m.local_gid, 16) &&
		       !memcmp(p.remote_gid, m.remote_gid, 16));
		EXPECT(p.flow_label == m.flow_label && p.packet_rate == m.packet_rate);
		EXPECT(p.traffic_class == m.traffic_class && p.hop_limit == m.hop_limit);
		EXPECT(p.sl == m.sl && p.subnet_local == m.subnet_local &&
		       p.local_ack_timeout == m.local_ack_timeout);
		/* table 106: service ID at 8, local QPN at 32, private data at 140 */
		EXPECT(mad[24 + 8] == (uint8_t)(m.service_id >> 56));
		EXPECT(mad[24 + 34] == (uint8_t)m.local_qpn);
		EXPECT(mad[24 + 140] == m.private_data[0] && mad[255] == m.private_data[91]);
		break;
	case SR_CM_REP:
		EXPECT(p.remote_comm_id == m.remote_comm_id && p.qkey == m.qkey);
		EXPECT(p.local_qpn == m.local_qpn && p.starting_psn == m.starting_psn);
		EXPECT(p.responder_resources == m.responder_resources &&
		       p.initiator_depth == m.initiator_depth);
		EXPECT(p.target_ack_delay == m.target_ack_delay && p.failover == m.failover &&
		       p.flow_control == m.flow_control);
		EXPECT(p.rnr_retry_count == m.rnr_retry_count && p.srq == m.srq &&
		       p.local_ca_guid == m.local_ca_guid);
		EXPECT(mad[24 + 36] == m.private_data[0]);
		break;
	case SR_CM_REJ:
		EXPECT(p.remote_comm_id == m.remote_comm_id && p.reason == m.reason);
		EXPECT(p.msg_rejected == m.msg_rejected && p.ari_len == m.ari_len &&
		       !memcmp(p.ari, m.ari, m.ari_len));
		EXPECT(mad[24 + 10] == (uint8_t)(m.reason >> 8) &&
		       mad[24 + 11] == (uint8_t)m.reason);
		EXPECT(mad[24 + 84] == m.private_data[0]);
		break;
	case SR_CM_MRA:
		EXPECT(p.remote_comm_id == m.remote_comm_id && p.msg_rejected == m.msg_rejected &&
		       p.service_timeout == m.service_timeout);
		break;
	case SR_CM_RTU:
	case SR_CM_DREP:
		EXPECT(p.remote_comm_id == m.remote_comm_id);
		EXPECT(mad[24 + 8] == m.private_data[0]);
		break;
	case SR_CM_DREQ:
		EXPECT(p.remote_comm_id == m.remote_comm_id && p.local_qpn == m.local_qpn);
		EXPECT(mad[24 + 12] == m.private_data[0]);
		break;
	case SR_CM_SIDR_REQ:
		EXPECT(p.pkey == m.pkey && p.service_id == m.service_id);
		EXPECT(mad[24 + 16] == m.private_data[0]);
		break;
	case SR_CM_SIDR_REP:
		EXPECT(p.status == m.status && p.local_qpn == m.local_qpn &&
		       p.service_id == m.service_id && p.qkey == m.qkey);
		EXPECT(mad[24 + 96] == m.private_data[0]);
		break;
	}
}

static void refusals(void)
{
	struct sr_cm_msg m, p;
	uint8_t mad[SR_CM_MAD_SIZE];

	random_msg(&m, SR_CM_REQ);
	EXPECT(sr_cm_mad_build(&m, mad) == 0);
	EXPECT(mad[0] == 1 && mad[1] == 0x07 && mad[2] == 2 && mad[3] == 0x03);
	EXPECT(mad[16] == 0 && mad[17] == 0x10);
	EXPECT(sr_cm_mad_parse(mad, SR_CM_MAD_SIZE - 1, &p) == -EINVAL);
	mad[1] = 0x06;
	EXPECT(sr_cm_mad_parse(mad, sizeof(mad), &p) == -EINVAL);
	mad[1] = 0x07;
	mad[2] = 1;
	EXPECT(sr_cm_mad_parse(mad, sizeof(mad), &p) == -EPROTONOSUPPORT);
	mad[2] = 2;
	mad[17] = 0x1b; /* not a CM attribute */
	EXPECT(sr_cm_mad_parse(mad, sizeof(mad), &p) == -EINVAL);
	m.private_len = SR_CM_REQ_PRIV + 1;
	EXPECT(sr_cm_mad_build(&m, mad) == -EINVAL);
	m.attr = 0x99;
	m.private_len = 0;
	EXPECT(sr_cm_mad_build(&m, mad) == -EINVAL);
}

static void ip_header(void)
{
	struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons(7174)}, d4 = s4;
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons(7471)}, d6 = s6;
	struct sockaddr_storage a, b;
	uint8_t h[SR_CM_IP_HDR_LEN];

	inet_pton(AF_INET, "192.0.2.1", &s4.sin_addr);
	inet_pton(AF_INET, "198.51.100.2", &d4.sin_addr);
	EXPECT(sr_cm_ip_hdr_build(h, (struct sockaddr *)&s4, (struct sockaddr *)&d4) == 0);
	EXPECT(h[0] == 0 && h[1] == 0x40 && h[2] == 7174 >> 8 && h[3] == (7174 & 0xff));
	EXPECT(h[16] == 192 && h[19] == 1 && h[32] == 198 && h[35] == 2 && h[4] == 0);
	EXPECT(sr_cm_ip_hdr_parse(h, &a, &b) == 0);
	EXPECT(a.ss_family == AF_INET &&
	       !memcmp(&((struct sockaddr_in *)&a)->sin_addr, &s4.sin_addr, 4));
	EXPECT(((struct sockaddr_in *)&a)->sin_port == s4.sin_port);
	EXPECT(!memcmp(&((struct sockaddr_in *)&b)->sin_addr, &d4.sin_addr, 4));
	inet_pton(AF_INET6, "fd00::2", &s6.sin6_addr);
	inet_pton(AF_INET6, "::1", &d6.sin6_addr);
	EXPECT(sr_cm_ip_hdr_build(h, (struct sockaddr *)&s6, (struct sockaddr *)&d6) == 0);
	EXPECT(h[1] == 0x60 && h[4] == 0xfd && h[35] == 1);
	EXPECT(sr_cm_ip_hdr_parse(h, &a, &b) == 0 && a.ss_family == AF_INET6);
	EXPECT(!memcmp(&((struct sockaddr_in6 *)&b)->sin6_addr, &d6.sin6_addr, 16));
	EXPECT(sr_cm_ip_hdr_build(h, (struct sockaddr *)&s4, (struct sockaddr *)&d6) == -EINVAL);
	h[1] = 0x50;
	EXPECT(sr_cm_ip_hdr_parse(h, &a, &b) == -EINVAL);
	EXPECT(sr_cm_service_id(0x0106, 7471) == 0x0000000001061D2Full);
}

int main(void)
{
	static const uint16_t kinds[] = {SR_CM_REQ,  SR_CM_MRA,	     SR_CM_REJ,
					 SR_CM_REP,  SR_CM_RTU,	     SR_CM_DREQ,
					 SR_CM_DREP, SR_CM_SIDR_REQ, SR_CM_SIDR_REP};

	srandom(1);
	for (int round = 0; round < 1000; round++)
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
			roundtrip(kinds[k]);
	refusals();
	ip_header();
	if (fails)
		return 1;
	printf("cm_mad: every kind round-trips, offsets and refusals as IBTA tables 106-120\n");
	return 0;
}
