/*
 * Building and parsing IB CM MADs (see cm_mad.h).  Offsets are those of
 * IBTA vol. 1 tables 106-120, counted from the end of the 24-byte MAD
 * header; bit fields are MSB first.  parse accepts only a whole MAD of
 * class 0x07 version 2 with a known attribute and reads only inside it.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "wire/cm_mad.h"

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}
static void put24(uint8_t *p, uint32_t v)
{
	p[0] = v >> 16;
	p[1] = v >> 8;
	p[2] = v;
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}
static void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}
static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}
static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

struct kind {
	uint16_t attr;
	uint16_t priv_off; /* in the data, after the MAD header */
	uint16_t priv_len;
	const char *name;
};

static const struct kind kinds[] = {
    {SR_CM_REQ, 140, SR_CM_REQ_PRIV, "REQ"},
    {SR_CM_MRA, 10, SR_CM_MRA_PRIV, "MRA"},
    {SR_CM_REJ, 84, SR_CM_REJ_PRIV, "REJ"},
    {SR_CM_REP, 36, SR_CM_REP_PRIV, "REP"},
    {SR_CM_RTU, 8, SR_CM_RTU_PRIV, "RTU"},
    {SR_CM_DREQ, 12, SR_CM_DREQ_PRIV, "DREQ"},
    {SR_CM_DREP, 8, SR_CM_DREP_PRIV, "DREP"},
    {SR_CM_SIDR_REQ, 16, SR_CM_SIDR_REQ_PRIV, "SIDR_REQ"},
    {SR_CM_SIDR_REP, 96, SR_CM_SIDR_REP_PRIV, "SIDR_REP"},
};

static const struct kind *kind_of(uint16_t attr)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kinds[i].attr == attr)
			return &kinds[i];
	return NULL;
}

uint32_t sr_cm_priv_size(uint16_t attr)
{
	const struct kind *k = kind_of(attr);

	return k ? k->priv_len : 0;
}

const char *sr_cm_attr_name(uint16_t attr)
{
	const struct kind *k = kind_of(attr);

	return k ? k->name : "?";
}

int sr_cm_mad_build(const struct sr_cm_msg *m, uint8_t out[SR_CM_MAD_SIZE])
{
	const struct kind *k = kind_of(m->attr);
	uint8_t *d = out + SR_CM_MAD_HDR;

	if (!k || m->private_len > k->priv_len)
		return -EINVAL;
	memset(out, 0, SR_CM_MAD_SIZE);
	out[0] = 1; /* BaseVersion */
	out[1] = SR_CM_MGMT_CLASS;
	out[2] = SR_CM_CLASS_VERSION;
	out[3] = SR_CM_METHOD_SEND;
	put64(out + 8, m->tid);
	put16(out + 16, m->attr);

	switch (m->attr) {
	case SR_CM_REQ:
		put32(d + 0, m->local_comm_id);
		put64(d + 8, m->service_id);
		put64(d + 16, m->local_ca_guid);
		put32(d + 28, m->qkey);
		put24(d + 32, m->local_qpn);
		d[35] = m->responder_resources;
		d[39] = m->initiator_depth;
		d[43] = (uint8_t)((m->remote_cm_timeout & 0x1f) << 3 | (m->transport & 3) << 1 |
				  (m->flow_control & 1));
		put24(d + 44, m->starting_psn);
		d[47] = (uint8_t)((m->local_cm_timeout & 0x1f) << 3 | (m->retry_count & 7));
		put16(d + 48, m->pkey);
		d[50] = (uint8_t)((m->path_mtu & 0xf) << 4 | (m->rnr_retry_count & 7));
		d[51] = (uint8_t)((m->max_cm_retries & 0xf) << 4 | (m->srq & 1) << 3);
		put16(d + 52, m->local_lid);
		put16(d + 54, m->remote_lid);
		memcpy(d + 56, m->local_gid, 16);
		memcpy(d + 72, m->remote_gid, 16);
		put32(d + 88, (m->flow_label & 0xfffff) << 12 | (m->packet_rate & 0x3f));
		d[92] = m->traffic_class;
		d[93] = m->hop_limit;
		d[94] = (uint8_t)((m->sl & 0xf) << 4 | (m->subnet_local & 1) << 3);
		d[95] = (uint8_t)((m->local_ack_timeout & 0x1f) << 3);
		break;
	case SR_CM_MRA:
		put32(d + 0, m->local_comm_id);
		put32(d + 4, m->remote_comm_id);
		d[8] = (uint8_t)((m->msg_rejected & 3) << 6);
		d[9] = (uint8_t)((m->service_timeout & 0x1f) << 3);
		break;
	case SR_CM_REJ:
		if (m->ari_len > sizeof(m->ari))
			return -EINVAL;
		put32(d + 0, m->local_comm_id);
		put32(d + 4, m->remote_comm_id);
		d[8] = (uint8_t)((m->msg_rejected & 3) << 6);
		d[9] = (uint8_t)((m->ari_len & 0x7f) << 1);
		put16(d + 10, m->reason);
		memcpy(d + 12, m->ari, m->ari_len);
		break;
	case SR_CM_REP:
		put32(d + 0, m->local_comm_id);
		put32(d + 4, m->remote_comm_id);
		put32(d + 8, m->qkey);
		put24(d + 12, m->local_qpn);
		put24(d + 20, m->starting_psn);
		d[24] = m->responder_resources;
		d[25] = m->initiator_depth;
		d[26] = (uint8_t)((m->target_ack_delay & 0x1f) << 3 | (m->failover & 3) << 1 |
				  (m->flow_control & 1));
		d[27] = (uint8_t)((m->rnr_retry_count & 7) << 5 | (m->srq & 1) << 4);
		put64(d + 28, m->local_ca_guid);
		break;
	case SR_CM_RTU:
	case SR_CM_DREP:
		put32(d + 0, m->local_comm_id);
		put32(d + 4, m->remote_comm_id);
		break;
	case SR_CM_DREQ:
		put32(d + 0, m->local_comm_id);
		put32(d + 4, m->remote_comm_id);
		put24(d + 8, m->local_qpn);
		break;
	case SR_CM_SIDR_REQ:
		put32(d + 0, m->local_comm_id);
		put16(d + 4, m->pkey);
		put64(d + 8, m->service_id);
		break;
	case SR_CM_SIDR_REP:
		put32(d + 0, m->local_comm_id);
		d[4] = m->status;
		put24(d + 8, m->local_qpn);
		put64(d + 12, m->service_id);
		put32(d + 20, m->qkey);
		break;
	}
	memcpy(d + k->priv_off, m->private_data, m->private_len);
	return 0;
}

int sr_cm_mad_parse(const void *buf, size_t len, struct sr_cm_msg *m)
{
	const uint8_t *p = buf, *d = p + SR_CM_MAD_HDR;
	const struct kind *k;

	if (len < SR_CM_MAD_SIZE || p[0] != 1 || p[1] != SR_CM_MGMT_CLASS)
		return -EINVAL;
	if (p[2] != SR_CM_CLASS_VERSION)
		return -EPROTONOSUPPORT;
	k = kind_of(get16(p + 16));
	if (!k || p[3] != SR_CM_METHOD_SEND)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->attr = k->attr;
	m->tid = get64(p + 8);
	m->local_comm_id = get32(d + 0);

	switch (m->attr) {
	case SR_CM_REQ:
		m->service_id = get64(d + 8);
		m->local_ca_guid = get64(d + 16);
		m->qkey = get32(d + 28);
		m->local_qpn = get24(d + 32);
		m->responder_resources = d[35];
		m->initiator_depth = d[39];
		m->remote_cm_timeout = d[43] >> 3;
		m->transport = (d[43] >> 1) & 3;
		m->flow_control = d[43] & 1;
		m->starting_psn = get24(d + 44);
		m->local_cm_timeout = d[47] >> 3;
		m->retry_count = d[47] & 7;
		m->pkey = get16(d + 48);
		m->path_mtu = d[50] >> 4;
		m->rnr_retry_count = d[50] & 7;
		m->max_cm_retries = d[51] >> 4;
		m->srq = (d[51] >> 3) & 1;
		m->local_lid = get16(d + 52);
		m->remote_lid = get16(d + 54);
		memcpy(m->local_gid, d + 56, 16);
		memcpy(m->remote_gid, d + 72, 16);
		m->flow_label = get32(d + 88) >> 12;
		m->packet_rate = d[91] & 0x3f;
		m->traffic_class = d[92];
		m->hop_limit = d[93];
		m->sl = d[94] >> 4;
		m->subnet_local = (d[94] >> 3) & 1;
		m->local_ack_timeout = d[95] >> 3;
		break;
	case SR_CM_MRA:
		m->remote_comm_id = get32(d + 4);
		m->msg_rejected = d[8] >> 6;
		m->service_timeout = d[9] >> 3;
		break;
	case SR_CM_REJ:
		m->remote_comm_id = get32(d + 4);
		m->msg_rejected = d[8] >> 6;
		m->ari_len = d[9] >> 1;
		if (m->ari_len > sizeof(m->ari))
			m->ari_len = sizeof(m->ari);
		m->reason = get16(d + 10);
		memcpy(m->ari, d + 12, m->ari_len);
		break;
	case SR_CM_REP:
		m->remote_comm_id = get32(d + 4);
		m->qkey = get32(d + 8);
		m->local_qpn = get24(d + 12);
		m->starting_psn = get24(d + 20);
		m->responder_resources = d[24];
		m->initiator_depth = d[25];
		m->target_ack_delay = d[26] >> 3;
		m->failover = (d[26] >> 1) & 3;
		m->flow_control = d[26] & 1;
		m->rnr_retry_count = d[27] >> 5;
		m->srq = (d[27] >> 4) & 1;
		m->local_ca_guid = get64(d + 28);
		break;
	case SR_CM_RTU:
	case SR_CM_DREP:
		m->remote_comm_id = get32(d + 4);
		break;
	case SR_CM_DREQ:
		m->remote_comm_id = get32(d + 4);
		m->local_qpn = get24(d + 8);
		break;
	case SR_CM_SIDR_REQ:
		m->pkey = get16(d + 4);
		m->service_id = get64(d + 8);
		break;
	case SR_CM_SIDR_REP:
		m->status = d[4];
		m->local_qpn = get24(d + 8);
		m->service_id = get64(d + 12);
		m->qkey = get32(d + 20);
		break;
	}
	m->private_len = k->priv_len;
	memcpy(m->private_data, d + k->priv_off, k->priv_len);
	return 0;
}

int sr_cm_ip_hdr_build(uint8_t out[SR_CM_IP_HDR_LEN], const struct sockaddr *src,
		       const struct sockaddr *dst)
{
	memset(out, 0, SR_CM_IP_HDR_LEN);
	if (src->sa_family != dst->sa_family)
		return -EINVAL;
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)src, *t = (const void *)dst;

		out[1] = 4 << 4;
		memcpy(out + 2, &s->sin_port, 2);
		memcpy(out + 4 + 12, &s->sin_addr, 4);
		memcpy(out + 20 + 12, &t->sin_addr, 4);
		return 0;
	}
	if (src->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)src, *t = (const void *)dst;

		out[1] = 6 << 4;
		memcpy(out + 2, &s->sin6_port, 2);
		memcpy(out + 4, &s->sin6_addr, 16);
		memcpy(out + 20, &t->sin6_addr, 16);
		return 0;
	}
	return -EINVAL;
}

int sr_cm_ip_hdr_parse(const uint8_t in[SR_CM_IP_HDR_LEN], struct sockaddr_storage *src,
		       struct sockaddr_storage *dst)
{
	memset(src, 0, sizeof(*src));
	memset(dst, 0, sizeof(*dst));
	if (in[0] != 0)
		return -EINVAL; /* MajV/MinV 0 */
	if (in[1] >> 4 == 4) {
		struct sockaddr_in *s = (void *)src, *t = (void *)dst;

		s->sin_family = t->sin_family = AF_INET;
		memcpy(&s->sin_port, in + 2, 2);
		memcpy(&s->sin_addr, in + 4 + 12, 4);
		memcpy(&t->sin_addr, in + 20 + 12, 4);
		return 0;
	}
	if (in[1] >> 4 == 6) {
		struct sockaddr_in6 *s = (void *)src, *t = (void *)dst;

		s->sin6_family = t->sin6_family = AF_INET6;
		memcpy(&s->sin6_port, in + 2, 2);
		memcpy(&s->sin6_addr, in + 4, 16);
		memcpy(&t->sin6_addr, in + 20, 16);
		return 0;
	}
	return -EINVAL;
}
