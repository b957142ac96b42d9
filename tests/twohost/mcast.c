/*
 * sr_mcast: UD multicast across hosts.  The receiver (one host) attaches a
 * UD QP to a group; the sender (the other host) attaches a QP of its own
 * to the same group, then sends N datagrams to QPN 0xFFFFFF through an
 * address handle on the group's MGID.  Every member, the remote one over
 * the IP multicast group on the wire and the sender's own through memory,
 * must receive each datagram exactly once, intact, with the sender's QPN
 * and a GRH naming the group.
 *
 *   receiver: sr_mcast -g GID_INDEX -p PORT -m MGID
 *   sender:   sr_mcast -g GID_INDEX -p PORT -m MGID [-n N] RECEIVER_ADDR
 *
 * MGID: an IPv4-mapped multicast GID, e.g. ::ffff:239.1.2.3 (the RoCEv2
 * form rdma_cm gives IPv4 groups).
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "side.h"

#define MSG   1000
#define QKEY  0x11111111u
#define SLOTS 64
#define BATCH 32 /* datagrams between the sender's waits */

struct member {
	struct ibv_cq *cq, *scq; /* receives, sends */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf; /* SLOTS receive slots of 40 + MSG bytes */
	uint32_t got;
};

static struct ibv_context *dev;
static struct ibv_pd *pd;

static void post_slot(struct member *m, uint32_t i)
{
	struct ibv_sge sg = {(uintptr_t)m->buf + i * (40 + MSG), 40 + MSG, m->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sg, .num_sge = 1}, *bad;

	if (ibv_post_recv(m->qp, &wr, &bad))
		DIE("ibv_post_recv: %s", strerror(errno));
}

static void member_make(struct member *m, const union ibv_gid *mgid)
{
	struct ibv_qp_init_attr ia = {0};
	struct ibv_qp_attr a = {0};

	m->cq = ibv_create_cq(dev, SLOTS + 4, NULL, NULL, 0);
	m->scq = ibv_create_cq(dev, SLOTS + 4, NULL, NULL, 0);
	m->buf = calloc(SLOTS, 40 + MSG);
	if (!m->cq || !m->scq || !m->buf)
		DIE("resources");
	m->mr = ibv_reg_mr(pd, m->buf, SLOTS * (40 + MSG), IBV_ACCESS_LOCAL_WRITE);
	ia.send_cq = m->scq;
	ia.recv_cq = m->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = SLOTS;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	m->qp = ibv_create_qp(pd, &ia);
	if (!m->mr || !m->qp)
		DIE("MR/QP: %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	if (ibv_modify_qp(m->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		DIE("INIT: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(m->qp, &a, IBV_QP_STATE))
		DIE("RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(m->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		DIE("RTS: %s", strerror(errno));
	if (ibv_attach_mcast(m->qp, mgid, 0))
		DIE("ibv_attach_mcast: %s", strerror(errno));
	for (uint32_t i = 0; i < SLOTS; i++)
		post_slot(m, i);
}

/* Takes the receive completions there are; checks each datagram. */
static void member_poll(struct member *m, uint32_t sender_qpn, const union ibv_gid *mgid)
{
	struct ibv_wc wc[8];
	int n = ibv_poll_cq(m->cq, 8, wc);

	if (n < 0)
		DIE("ibv_poll_cq");
	for (int i = 0; i < n; i++) {
		const char *p = m->buf + wc[i].wr_id * (40 + MSG);
		uint32_t seq;

		if (wc[i].status != IBV_WC_SUCCESS)
			DIE("receive: %s", ibv_wc_status_str(wc[i].status));
		if (wc[i].byte_len != 40 + MSG || wc[i].src_qp != sender_qpn ||
		    !(wc[i].wc_flags & IBV_WC_GRH))
			DIE("datagram %u: %u bytes from QPN 0x%x (flags 0x%x)", m->got,
			    wc[i].byte_len, wc[i].src_qp, wc[i].wc_flags);
		/* RoCEv2 over IPv4: the IP header in the GRH's last 20 bytes,
		 * its destination the group */
		if (memcmp(p + 20 + 16, mgid->raw + 12, 4))
			DIE("datagram %u: the GRH does not name the group", m->got);
		memcpy(&seq, p + 40, 4);
		if (seq != m->got)
			DIE("datagram %u arrived as number %u: lost, twice or reordered", seq,
			    m->got);
		for (uint32_t k = 4; k < MSG; k++)
			if ((uint8_t)p[40 + k] != (uint8_t)(seq * 7 + k))
				DIE("datagram %u: byte %u differs", seq, k);
		m->got++;
		post_slot(m, (uint32_t)wc[i].wr_id);
	}
}

static void wait_all(struct member *m, uint32_t n, uint32_t sender_qpn, const union ibv_gid *mgid)
{
	time_t start = time(NULL);

	while (m->got < n) {
		member_poll(m, sender_qpn, mgid);
		if (time(NULL) - start > 30)
			DIE("%u of %u datagrams after 30 s", m->got, n);
		sched_yield();
	}
}

int main(int argc, char **argv)
{
	const char *port = "18516", *group = "::ffff:239.1.2.3";
	struct ibv_device **list;
	union ibv_gid mgid, sgid;
	struct member m = {0};
	uint32_t n = 200, peer_qpn, go = 1;
	int gidx = 0, opt, sock;
	bool sender;

	while ((opt = getopt(argc, argv, "g:p:m:n:")) != -1) {
		if (opt == 'g')
			gidx = atoi(optarg);
		else if (opt == 'p')
			port = optarg;
		else if (opt == 'm')
			group = optarg;
		else if (opt == 'n')
			n = (uint32_t)atoi(optarg);
		else
			return 2;
	}
	sender = optind < argc;
	if (inet_pton(AF_INET6, group, mgid.raw) != 1)
		DIE("bad MGID %s", group);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0] || !(dev = ibv_open_device(list[0])) || !(pd = ibv_alloc_pd(dev)))
		DIE("no device");
	if (ibv_query_gid(dev, 1, gidx, &sgid))
		DIE("GID %d", gidx);
	member_make(&m, &mgid);
	sock = side_channel(sender ? argv[optind] : NULL, port);
	xchg(sock, &m.qp->qp_num, &peer_qpn, 4);
	{
		uint32_t theirs;

		xchg(sock, &n, &theirs, 4); /* the receiver takes the sender's count */
		if (!sender)
			n = theirs;
	}
	if (!sender) {
		xchg(sock, &go, &go, 4); /* attached: the sender may start */
		/* UD drops what finds no receive WQE: the sender waits for
		 * every BATCH to be taken here (SLOTS are posted) */
		for (uint32_t k = BATCH; k < n; k += BATCH) {
			wait_all(&m, k, peer_qpn, &mgid);
			xchg(sock, &go, &go, 4);
		}
		wait_all(&m, n, peer_qpn, &mgid);
		xchg(sock, &m.got, &go, 4);
		printf("sr_mcast: %u datagrams received once each from QPN 0x%x over the "
		       "wire\n",
		       m.got, peer_qpn);
		return 0;
	}
	{
		struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
		struct ibv_ah *ah;
		char *sbuf = calloc(1, MSG);
		struct ibv_mr *smr = sbuf ? ibv_reg_mr(pd, sbuf, MSG, 0) : NULL;

		if (!smr)
			DIE("send buffer");
		aa.grh.dgid = mgid;
		aa.grh.sgid_index = (uint8_t)gidx;
		aa.grh.hop_limit = 1;
		ah = ibv_create_ah(pd, &aa);
		if (!ah)
			DIE("ibv_create_ah: %s", strerror(errno));
		xchg(sock, &go, &go, 4);
		for (uint32_t seq = 0; seq < n; seq++) {
			struct ibv_sge sg = {(uintptr_t)sbuf, MSG, smr->lkey};
			struct ibv_send_wr wr = {.sg_list = &sg, .num_sge = 1}, *bad;
			struct ibv_wc wc;
			int k;

			memcpy(sbuf, &seq, 4);
			for (uint32_t i = 4; i < MSG; i++)
				sbuf[i] = (char)(uint8_t)(seq * 7 + i);
			wr.opcode = IBV_WR_SEND;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = 0xffffff;
			wr.wr.ud.remote_qkey = QKEY;
			if (ibv_post_send(m.qp, &wr, &bad))
				DIE("ibv_post_send: %s", strerror(errno));
			/* one at a time: the send completes, our own copy comes */
			while ((k = ibv_poll_cq(m.scq, 1, &wc)) == 0)
				sched_yield();
			if (k < 0 || wc.status != IBV_WC_SUCCESS)
				DIE("send %u failed", seq);
			wait_all(&m, seq + 1, m.qp->qp_num, &mgid);
			if ((seq + 1) % BATCH == 0 && seq + 1 < n)
				xchg(sock, &go, &go, 4);
		}
		xchg(sock, &go, &go, 4); /* the receiver's count */
		if (go != n)
			DIE("the other host received %u of %u", go, n);
	}
	printf("sr_mcast: %u datagrams sent; this host's member got each once, the other "
	       "host's too\n",
	       n);
	return 0;
}
