/*
 * IB CM messages as MADs (IBTA vol. 1 ch. 12, tables 106-120): the wire
 * format of the connection manager, built and parsed as real bytes.  One
 * struct (sr_cm_msg) holds the fields of every message kind; build writes
 * the 256-byte MAD for msg->attr, parse checks the MAD header and length and
 * fills the fields of that kind.  Also the IP CM private-data header of
 * Annex A11 (36 bytes before the user's data in REQ and SIDR_REQ for the IP
 * port spaces) and the IP CM service IDs.  Pure functions, no state: the
 * same bytes go to the daemon itself on one host and onto QP1 between hosts.
 */
#ifndef SR_WIRE_CM_MAD_H
#define SR_WIRE_CM_MAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SR_CM_MAD_SIZE	    256
#define SR_CM_MAD_HDR	    24
#define SR_CM_MGMT_CLASS    0x07
#define SR_CM_CLASS_VERSION 2
#define SR_CM_METHOD_SEND   0x03

enum sr_cm_attr {
	SR_CM_REQ = 0x0010,
	SR_CM_MRA = 0x0011,
	SR_CM_REJ = 0x0012,
	SR_CM_REP = 0x0013,
	SR_CM_RTU = 0x0014,
	SR_CM_DREQ = 0x0015,
	SR_CM_DREP = 0x0016,
	SR_CM_SIDR_REQ = 0x0017,
	SR_CM_SIDR_REP = 0x0018,
};

/* private data each message carries (bytes) */
#define SR_CM_REQ_PRIV	    92
#define SR_CM_MRA_PRIV	    222
#define SR_CM_REJ_PRIV	    148
#define SR_CM_REP_PRIV	    196
#define SR_CM_RTU_PRIV	    224
#define SR_CM_DREQ_PRIV	    220
#define SR_CM_DREP_PRIV	    224
#define SR_CM_SIDR_REQ_PRIV 216
#define SR_CM_SIDR_REP_PRIV 136
#define SR_CM_MAX_PRIV	    224

/* Annex A11: the IP CM header before the user's private data */
#define SR_CM_IP_HDR_LEN 36

/* REJ reasons used here (IBTA table 112) */
enum {
	SR_CM_REJ_TIMEOUT = 4,
	SR_CM_REJ_INVALID_SERVICE_ID = 8,
	SR_CM_REJ_STALE_CONN = 10,
	SR_CM_REJ_CONSUMER_DEFINED = 28,
};
/* SIDR_REP status (IBTA table 119) */
enum {
	SR_CM_SIDR_SUCCESS = 0,
	SR_CM_SIDR_UNSUPPORTED = 1,
	SR_CM_SIDR_REJECT = 2,
};

struct sr_cm_msg {
	uint16_t attr; /* enum sr_cm_attr */
	uint64_t tid;
	uint32_t local_comm_id, remote_comm_id; /* sender's view; SIDR: request_id in local */
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t qkey;
	uint32_t local_qpn; /* REQ, REP, SIDR_REP (qpn); DREQ: remote QPN */
	uint32_t starting_psn;
	uint8_t responder_resources, initiator_depth;
	uint8_t transport; /* 0 RC, 1 UC, 3 XRC */
	uint8_t flow_control, retry_count, rnr_retry_count, srq;
	uint8_t remote_cm_timeout, local_cm_timeout, max_cm_retries;
	uint8_t path_mtu; /* enum ibv_mtu */
	uint16_t pkey;
	uint16_t local_lid, remote_lid;
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label;
	uint8_t packet_rate, traffic_class, hop_limit, sl, subnet_local, local_ack_timeout;
	uint8_t target_ack_delay, failover;
	/* REJ / MRA */
	uint8_t msg_rejected; /* 0 REQ, 1 REP, 2 other; MRA: message MRAed */
	uint8_t ari_len;
	uint16_t reason;
	uint8_t ari[72];
	uint8_t service_timeout;
	/* SIDR_REP */
	uint8_t status;
	uint8_t private_data[SR_CM_MAX_PRIV];
	uint32_t private_len; /* as many as the kind carries (build pads with zeros) */
};

/* The private data size of a message kind, 0 for an unknown one. */
uint32_t sr_cm_priv_size(uint16_t attr);
/* Writes the MAD for m->attr into out.  0, or -EINVAL for an unknown kind
 * or private data larger than the kind carries. */
int sr_cm_mad_build(const struct sr_cm_msg *m, uint8_t out[SR_CM_MAD_SIZE]);
/* Parses len bytes: 0, -EINVAL (short, not a CM MAD, unknown attribute),
 * -EPROTONOSUPPORT (another class version). */
int sr_cm_mad_parse(const void *buf, size_t len, struct sr_cm_msg *m);
const char *sr_cm_attr_name(uint16_t attr);

/* IP CM service ID: (port space << 16) + port (RDMA_PS_TCP 0x106 ...). */
static inline uint64_t sr_cm_service_id(uint32_t ps, uint16_t port)
{
	return ((uint64_t)ps << 16) + port;
}
/* Writes the 36-byte header (MajV/MinV 0, IP version, source port, source
 * and destination IP) for two addresses of the same family.  0 or -EINVAL. */
int sr_cm_ip_hdr_build(uint8_t out[SR_CM_IP_HDR_LEN], const struct sockaddr *src,
		       const struct sockaddr *dst);
/* Reads it back into two sockaddr_in or sockaddr_in6 (dst's port left 0:
 * it is in the service ID).  0 or -EINVAL. */
int sr_cm_ip_hdr_parse(const uint8_t in[SR_CM_IP_HDR_LEN], struct sockaddr_storage *src,
		       struct sockaddr_storage *dst);

#endif
