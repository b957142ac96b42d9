/*
 * Writes the seed corpus of the control-socket fuzzer (fuzz_input.h):
 * valid request sequences as the library sends them (HELLO, PD, a memfd
 * and an MR on it, CQs, QPs through INIT/RTR/RTS, SRQ, MW, multicast,
 * events, status, destroy or reclaim; the connection manager's ids, a
 * listener and a connection on this host, and CM MADs from other hosts),
 * so that mutations start deep in the handlers.  Handles come from
 * earlier replies through patches; the comments give each reply's slot in
 * the handle table.
 *   gen_seeds DIR
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <softrdma/proto.h>

#include "wire/cm_mad.h"
#include "fuzz_input.h"

static uint8_t buf[65536];
static size_t len;
static enum fz_action send_action = FZ_SEND;

struct patch {
	size_t off;
	unsigned src;
};

#define P(field, src)                                                                              \
	{                                                                                          \
		offsetof(struct sr_req, field), (src)                                              \
	}

static void op(unsigned client, enum fz_action a)
{
	buf[len++] = client | a << 2;
}

/* A record of rlen bytes (0: the whole request) with descriptors. */
static void send_fds(unsigned client, const struct sr_req *req, size_t rlen, unsigned nfd_code,
		     unsigned kinds, const struct patch *p, unsigned np)
{
	if (!rlen)
		rlen = sizeof(*req);
	op(client, send_action);
	buf[len++] = nfd_code;
	buf[len++] = kinds & 0xff;
	buf[len++] = kinds >> 8;
	buf[len++] = rlen & 0xff;
	buf[len++] = rlen >> 8;
	buf[len++] = np;
	for (unsigned k = 0; k < np; k++) {
		buf[len++] = p[k].off / 4;
		buf[len++] = p[k].src;
	}
	memcpy(buf + len, req, rlen);
	len += rlen;
}

static void send_req(unsigned client, const struct sr_req *req, const struct patch *p, unsigned np)
{
	/* the fields past the union member in use are zeroes: send less, as
	 * the daemon pads a short record with zeroes */
	size_t rlen = sizeof(*req);

	while (rlen > offsetof(struct sr_req, u) && !((const uint8_t *)req)[rlen - 1])
		rlen--;
	for (unsigned k = 0; k < np; k++) /* patches land inside the record only */
		if (rlen < p[k].off + 4)
			rlen = p[k].off + 4;
	send_fds(client, req, rlen, 0, 0, p, np);
}

static struct sr_req R(enum sr_op op_) {
	struct sr_req r;

	memset(&r, 0, sizeof(r));
	r.op = op_;
	return r;
}

static void
hello(unsigned client, uint32_t flags)
{
	struct sr_req r = R(SR_OP_HELLO);
	struct patch p[] = {P(u.hello.pid, FZ_SRC_PID)};

	r.u.hello.version = SR_PROTO_VERSION;
	r.u.hello.flags = flags;
	send_req(client, &r, p, 1);
}

static void simple(unsigned client, enum sr_op o, int handle_slot)
{
	struct sr_req r = R(o);
	struct patch p[] = {P(handle, handle_slot)};

	r.handle = 0xdeadbeef; /* kept if handle_slot < 0 */
	send_req(client, &r, p, handle_slot >= 0);
}

static void reg_fd(unsigned client, uint32_t kind, unsigned fd_kind)
{
	struct sr_req r = R(SR_OP_REG_FD);

	r.u.reg_fd.kind = kind;
	send_fds(client, &r, offsetof(struct sr_req, u) + sizeof(r.u.reg_fd), 1, fd_kind, NULL, 0);
}

static void reg_mr(unsigned client, unsigned pd, unsigned fd, uint32_t access)
{
	struct sr_req r = R(SR_OP_REG_MR);
	struct patch p[] = {P(u.reg_mr.pd, pd), P(u.reg_mr.segs[0].fd_id, fd)};

	r.u.reg_mr.access = access;
	r.u.reg_mr.addr = 0x7f0000001000;
	r.u.reg_mr.length = 4096;
	r.u.reg_mr.iova = 0x7f0000001000;
	r.u.reg_mr.nsegs = 1;
	r.u.reg_mr.segs[0].len = 4096;
	send_req(client, &r, p, 2);
}

static void create_cq(unsigned client, uint32_t cqe, int channel)
{
	struct sr_req r = R(SR_OP_CREATE_CQ);
	struct patch p[] = {P(u.cq.channel_fd_id, channel)};

	r.u.cq.cqe = cqe;
	r.u.cq.user_handle = 0x1234;
	send_req(client, &r, p, channel >= 0);
}

static void create_qp(unsigned client, uint32_t type, unsigned pd, unsigned cq, int srq)
{
	struct sr_req r = R(SR_OP_CREATE_QP);
	struct patch p[] = {P(u.create_qp.pd, pd), P(u.create_qp.send_cq, cq),
			    P(u.create_qp.recv_cq, cq), P(u.create_qp.srqn, srq)};

	r.u.create_qp.type = type;
	r.u.create_qp.cap.max_send_wr = 16;
	r.u.create_qp.cap.max_recv_wr = 16;
	r.u.create_qp.cap.max_send_sge = 1;
	r.u.create_qp.cap.max_recv_sge = 1;
	r.u.create_qp.cap.max_inline_data = 64;
	send_req(client, &r, p, srq >= 0 ? 4 : 3);
}

static void modify_qp(unsigned client, unsigned qp, uint32_t type, enum ibv_qp_state to,
		      int dest_slot)
{
	struct sr_req r = R(SR_OP_MODIFY_QP);
	struct patch p[] = {P(handle, qp), P(u.modify_qp.attr.dest_qp_num, dest_slot)};
	struct ibv_qp_attr a;
	uint32_t mask = IBV_QP_STATE;

	memset(&a, 0, sizeof(a));
	a.qp_state = to;
	switch (to) {
	case IBV_QPS_INIT:
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		mask |= type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
		a.port_num = 1;
		a.qkey = 0x11111111;
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		break;
	case IBV_QPS_RTR:
		if (type != IBV_QPT_UD) {
			mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
			a.ah_attr.port_num = 1;
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.hop_limit = 1;
			a.path_mtu = IBV_MTU_1024;
			a.rq_psn = 1;
		}
		if (type == IBV_QPT_RC) {
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
		}
		break;
	case IBV_QPS_RTS:
		mask |= IBV_QP_SQ_PSN;
		a.sq_psn = 1;
		if (type == IBV_QPT_RC) {
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
			a.timeout = 14;
			a.retry_cnt = 7;
			a.rnr_retry = 7;
			a.max_rd_atomic = 1;
		}
		break;
	default:
		break;
	}
	r.u.modify_qp.attr_mask = mask;
	sr_qp_attr_to_wire(&a, &r.u.modify_qp.attr);
	send_req(client, &r, p, (mask & IBV_QP_DEST_QPN) && dest_slot >= 0 ? 2 : 1);
}

static void to_rts(unsigned client, unsigned qp, uint32_t type, int dest)
{
	modify_qp(client, qp, type, IBV_QPS_INIT, -1);
	modify_qp(client, qp, type, IBV_QPS_RTR, dest);
	modify_qp(client, qp, type, IBV_QPS_RTS, -1);
}

static void dp(unsigned client, unsigned what, unsigned hold)
{
	op(client, FZ_DATAPATH);
	buf[len++] = what;
	buf[len++] = hold;
}

static void save(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	len = 0;
}

/* ---- the connection manager ---- */

#define PS_TCP 0x0106 /* enum rdma_port_space */
#define PS_UDP 0x0111

static void cm_addr(uint8_t raw[SR_CM_ADDR_LEN], const char *ip, uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, ip, &a.sin_addr);
	memset(raw, 0, SR_CM_ADDR_LEN);
	memcpy(raw, &a, sizeof(a));
}

/* An event channel on an eventfd (its handle is the reply's) */
static void cm_channel(unsigned client)
{
	struct sr_req r = R(SR_OP_CM_CHANNEL_CREATE);

	send_fds(client, &r, offsetof(struct sr_req, u), 1, FZ_FD_EVENTFD, NULL, 0);
}

static void cm_create_id(unsigned client, unsigned chan, uint32_t ps, uint32_t qp_type)
{
	struct sr_req r = R(SR_OP_CM_CREATE_ID);
	struct patch p[] = {P(u.cm.channel, chan)};

	r.u.cm.ps = ps;
	r.u.cm.qp_type = qp_type;
	send_req(client, &r, p, 1);
}

/* BIND, RESOLVE_ADDR (src NULL, dst), LISTEN, CONNECT ... on the id */
static void cm_op(unsigned client, enum sr_op o, unsigned id, const char *src, const char *dst,
		  uint16_t port)
{
	struct sr_req r = R(o);
	struct patch p[] = {P(handle, id)};

	if (src)
		cm_addr(r.u.cm.src, src, port);
	if (dst)
		cm_addr(r.u.cm.dst, dst, port);
	r.u.cm.backlog = 4;
	r.u.cm.timeout_ms = 2000;
	r.u.cm.conn = (struct sr_cm_conn){.responder_resources = 1,
					  .initiator_depth = 1,
					  .retry_count = 7,
					  .rnr_retry_count = 7,
					  .has_qp = 1,
					  .qp_num = 0x1234};
	r.u.cm.psn = 77;
	send_req(client, &r, p, 1);
}

static void cm_events(unsigned client, unsigned chan)
{
	struct sr_req r = R(SR_OP_CM_GET_EVENT);
	struct patch p[] = {P(handle, chan)};

	r.u.cm.value = 8;
	send_req(client, &r, p, 1);
}

/* A process listening on ip:port: HELLO, channel (slot chan), id (chan + 1),
 * BIND, LISTEN */
static void cm_listener(unsigned client, unsigned chan, uint32_t ps, uint32_t qp_type,
			const char *ip, uint16_t port)
{
	hello(client, 0);
	cm_channel(client);
	cm_create_id(client, chan, ps, qp_type);
	cm_op(client, SR_OP_CM_BIND, chan + 1, ip, NULL, port);
	cm_op(client, SR_OP_CM_LISTEN, chan + 1, NULL, NULL, 0);
}

/* A process connecting to ip:port: HELLO, channel (slot chan), id (chan +
 * 1), its address and route resolved, CONNECT (the REQ queued) */
static void cm_active(unsigned client, unsigned chan, uint32_t ps, uint32_t qp_type, const char *ip,
		      uint16_t port)
{
	hello(client, 0);
	cm_channel(client);
	cm_create_id(client, chan, ps, qp_type);
	cm_op(client, SR_OP_CM_RESOLVE_ADDR, chan + 1, NULL, ip, port);
	op(client, FZ_TICK);
	cm_op(client, SR_OP_CM_RESOLVE_ROUTE, chan + 1, NULL, NULL, 0);
	op(client, FZ_TICK);
	cm_op(client, SR_OP_CM_CONNECT, chan + 1, NULL, NULL, 0);
}

/* A CM MAD of attribute attr as a host would send it (header and fields
 * valid, what it needs of the daemon's ids left to the fixes). */
static void mad(unsigned from, uint16_t attr, unsigned fix)
{
	struct sr_cm_msg m;
	uint8_t out[SR_CM_MAD_SIZE];

	memset(&m, 0, sizeof(m));
	m.attr = attr;
	m.tid = 0x77;
	m.local_comm_id = 0x5eed0001;
	m.local_qpn = 0x4321;
	m.starting_psn = 99;
	m.responder_resources = m.initiator_depth = 1;
	m.remote_cm_timeout = m.local_cm_timeout = 18;
	m.retry_count = m.rnr_retry_count = 7;
	m.max_cm_retries = 15;
	m.pkey = 0xffff;
	m.path_mtu = 3;
	m.local_lid = m.remote_lid = 0xffff;
	m.hop_limit = 64;
	m.local_ack_timeout = 18;
	m.qkey = 0x11111111;
	m.reason = 28;
	m.private_len = 8;
	memcpy(m.private_data, "seedseed", 8);
	if (sr_cm_mad_build(&m, out)) {
		fprintf(stderr, "gen_seeds: cannot build a MAD of attribute %#x\n", attr);
		exit(1);
	}
	op(0, FZ_MAD);
	buf[len++] = from;
	buf[len++] = SR_CM_MAD_SIZE - 1;
	buf[len++] = fix;
	memcpy(buf + len, out, SR_CM_MAD_SIZE);
	len += SR_CM_MAD_SIZE;
}

/* HELLO, PD (slot 0), memfd (1), MR (2), CQ (3), RC QP (4) */
static void basic_setup(unsigned client)
{
	hello(client, 0);
	simple(client, SR_OP_ALLOC_PD, -1);
	reg_fd(client, SR_FD_MEM, FZ_FD_MEMFD);
	reg_mr(client, 0, 1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	create_cq(client, 16, -1);
	create_qp(client, IBV_QPT_RC, 0, 3, -1);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_seeds DIR\n");
		return 2;
	}
	const char *dir = argv[1];

	/* the whole life of an RC QP, every object destroyed in order */
	basic_setup(0);
	to_rts(0, 4, IBV_QPT_RC, 4);
	simple(0, SR_OP_MR_MAP, 2);
	simple(0, SR_OP_DESTROY_QP, 4);
	simple(0, SR_OP_DESTROY_CQ, 3);
	simple(0, SR_OP_DEREG_MR, 2);
	simple(0, SR_OP_CLOSE_FD, 1);
	simple(0, SR_OP_DEALLOC_PD, 0);
	save(dir, "rc_lifecycle");

	/* the same left for reclaim, the QP in RTS */
	basic_setup(0);
	to_rts(0, 4, IBV_QPT_RC, 4);
	op(0, FZ_CLOSE);
	save(dir, "rc_reclaim");

	/* two processes: client 2 maps client 0's MR, fetches its fd, and
	 * tries to destroy and modify client 0's objects */
	basic_setup(0);
	hello(2, 0);
	simple(2, SR_OP_MR_MAP, 2);
	simple(2, SR_OP_GET_FD, 1);
	simple(2, SR_OP_DESTROY_QP, 4);
	modify_qp(2, 4, IBV_QPT_RC, IBV_QPS_INIT, -1);
	simple(2, SR_OP_DEALLOC_PD, 0);
	simple(2, SR_OP_ALLOC_PD, -1);		 /* slot 5 */
	reg_mr(2, 5, 1, IBV_ACCESS_LOCAL_WRITE); /* another process's memfd */
	op(0, FZ_CLOSE);
	op(2, FZ_CLOSE);
	save(dir, "two_processes");

	/* two contexts of one process: client 1 registers client 0's memfd */
	hello(0, 0);
	reg_fd(0, SR_FD_MEM, FZ_FD_MEMFD); /* slot 0 */
	hello(1, 0);
	simple(1, SR_OP_ALLOC_PD, -1);		 /* 1 */
	reg_mr(1, 1, 0, IBV_ACCESS_LOCAL_WRITE); /* 2 */
	op(0, FZ_CLOSE);
	simple(1, SR_OP_MR_MAP, 2);
	save(dir, "two_contexts");

	/* SRQ, a QP on it, SRQ limit; a UD QP in multicast groups; MWs;
	 * a CQ on a completion channel, resized */
	hello(0, 0);
	simple(0, SR_OP_ALLOC_PD, -1);	       /* 0 */
	reg_fd(0, SR_FD_EVENT, FZ_FD_EVENTFD); /* 1 */
	create_cq(0, 8, 1);		       /* 2 */
	{
		struct sr_req r = R(SR_OP_CREATE_SRQ);
		struct patch p[] = {P(u.srq.pd, 0)};

		r.u.srq.max_wr = 32;
		r.u.srq.max_sge = 2;
		r.u.srq.srq_limit = 4;
		send_req(0, &r, p, 1);		   /* 3 */
		create_qp(0, IBV_QPT_RC, 0, 2, 3); /* 4 */
		r = R(SR_OP_MODIFY_SRQ);
		struct patch q[] = {P(handle, 3)};

		r.u.srq.max_sge = IBV_SRQ_LIMIT;
		r.u.srq.srq_limit = 8;
		send_req(0, &r, q, 1);
	}
	to_rts(0, 4, IBV_QPT_RC, 4);
	create_qp(0, IBV_QPT_UD, 0, 2, -1); /* 5 */
	to_rts(0, 5, IBV_QPT_UD, -1);
	for (int k = 0; k < 2; k++) {
		struct sr_req r = R(k ? SR_OP_DETACH_MCAST : SR_OP_ATTACH_MCAST);
		struct patch p[] = {P(handle, 5)};

		r.u.mcast.gid[0] = 0xff;
		r.u.mcast.gid[1] = 0x12;
		r.u.mcast.gid[15] = 1;
		send_req(0, &r, p, 1);
		if (!k)
			send_req(0, &r, p, 1); /* again: idempotent */
	}
	for (uint32_t type = IBV_MW_TYPE_1; type <= IBV_MW_TYPE_2; type++) {
		struct sr_req r = R(SR_OP_ALLOC_MW);
		struct patch p[] = {P(u.mw.pd, 0)};

		r.u.mw.type = type;
		send_req(0, &r, p, 1); /* 6, 7 */
	}
	simple(0, SR_OP_DEALLOC_MW, 6);
	{
		struct sr_req r = R(SR_OP_RESIZE_CQ);
		struct patch p[] = {P(handle, 2)};

		r.u.cq.cqe = 100;
		send_req(0, &r, p, 1);
	}
	simple(0, SR_OP_DESTROY_CQ, 2);	 /* busy */
	simple(0, SR_OP_DESTROY_SRQ, 3); /* busy */
	op(0, FZ_TICK);
	op(0, FZ_CLOSE);
	save(dir, "srq_ud_mw_events");

	/* a monitor asks for the status while a process holds resources */
	basic_setup(0);
	hello(3, 1);
	simple(3, SR_OP_STATUS, -1);
	save(dir, "status");

	/* a monitor sets fault specs (parsed, then refused: no engine here)
	 * and starts and stops a capture */
	hello(3, 1);
	{
		static const char *const specs[] = {
		    "seed=7,drop=0.01",
		    "dir=rx,qp=0x12,dup=0.05,reorder=0.02,corrupt=0.01,delay=0.02:500us,drop_nth=3",
		    "seed=1;dir=tx,reorder=5%:1ms,corrupt_nth=2;dir=both,delay=1:0.5s", "off"};
		struct sr_req r = R(SR_OP_FAULT);

		for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
			memset(r.u.fault.spec, 0, sizeof(r.u.fault.spec));
			strcpy(r.u.fault.spec, specs[i]);
			send_req(3, &r, NULL, 0);
		}
		r = R(SR_OP_TRACE);
		strcpy(r.u.trace.path, "/tmp/x.pcap");
		send_fds(3, &r, 0, 1, FZ_FD_DEVNULL, NULL, 0);
		r = R(SR_OP_TRACE);
		send_req(3, &r, NULL, 0);
	}
	save(dir, "fault_trace");

	/* out of order: requests before HELLO, double destroy, modify of a
	 * destroyed QP, a second HELLO */
	simple(0, SR_OP_ALLOC_PD, -1);
	basic_setup(0);
	simple(0, SR_OP_DESTROY_QP, 4);
	simple(0, SR_OP_DESTROY_QP, 4);
	modify_qp(0, 4, IBV_QPT_RC, IBV_QPS_INIT, -1);
	hello(0, 1);
	simple(0, SR_OP_ALLOC_PD, -1);
	save(dir, "out_of_order");

	/* wrong descriptors: none, three, ten, a pipe for a memfd, a full
	 * eventfd for an event fd, a huge memfd */
	hello(0, 0);
	{
		struct sr_req r = R(SR_OP_REG_FD);

		r.u.reg_fd.kind = SR_FD_MEM;
		send_fds(0, &r, 12, 0, 0, NULL, 0);
		send_fds(0, &r, 12, 3, 0x1c8, NULL, 0);
		send_fds(0, &r, 12, 5, 0x7fff, NULL, 0);
		send_fds(0, &r, 12, 1, FZ_FD_PIPE_W, NULL, 0);
		send_fds(0, &r, 12, 1, FZ_FD_MEMFD_HUGE, NULL, 0);
		r.u.reg_fd.kind = SR_FD_EVENT;
		send_fds(0, &r, 12, 1, FZ_FD_EVENTFD_FULL, NULL, 0);
		send_fds(0, &r, 12, 1, FZ_FD_DEVNULL, NULL, 0);
		r = R(SR_OP_ALLOC_PD);
		send_fds(0, &r, 8, 6, 0x1234, NULL, 0); /* 32 fds with a request that takes none */
		send_fds(0, &r, 4, 1, 0, NULL, 0);	/* truncated header */
		send_fds(0, &r, sizeof(r) + 1, 2, 0, NULL, 0); /* oversized */
	}
	save(dir, "wrong_fds");

	/* events: an RC QP's SEND stalls and times out (RNR, then no ACK)
	 * with its send CQ armed on a channel; a full CQ; an SQ flush owed
	 * after the QP went to ERR; the daemon's tick delivers them */
	hello(0, 0);
	simple(0, SR_OP_ALLOC_PD, -1);	       /* 0 */
	reg_fd(0, SR_FD_EVENT, FZ_FD_EVENTFD); /* 1 */
	create_cq(0, 8, 1);		       /* 2 */
	create_qp(0, IBV_QPT_RC, 0, 2, -1);    /* 3 */
	to_rts(0, 3, IBV_QPT_RC, 3);
	dp(0, 3 | FZ_DP_ARM, 0);
	op(0, FZ_TICK);
	modify_qp(0, 3, IBV_QPT_RC, IBV_QPS_RESET, -1);
	to_rts(0, 3, IBV_QPT_RC, 3);
	dp(0, 3 | FZ_DP_NO_ACK | FZ_DP_FILL_CQ, 0);
	op(0, FZ_TICK);
	dp(0, 3 | FZ_DP_FLUSH_OWED, 0);
	op(0, FZ_TICK);
	save(dir, "events");

	/* a CQ whose async event fd is a memfd (registered memory) overflows */
	hello(0, 0);
	simple(0, SR_OP_ALLOC_PD, -1);	   /* 0 */
	reg_fd(0, SR_FD_MEM, FZ_FD_MEMFD); /* 1 */
	{
		struct sr_req r = R(SR_OP_CREATE_CQ);
		struct patch p[] = {P(u.cq.async_fd_id, 1)};

		r.u.cq.cqe = 2;
		send_req(0, &r, p, 1); /* 2 */
	}
	create_qp(0, IBV_QPT_RC, 0, 2, -1); /* 3 */
	to_rts(0, 3, IBV_QPT_RC, 3);
	dp(0, 3 | FZ_DP_FILL_CQ, 0);
	op(0, FZ_TICK);
	save(dir, "async_fd_memfd");

	/* a stopped thread of the owner holds the QP's, its CQ's and its
	 * SRQ's locks while the owner modifies the QP, resizes the CQ and
	 * sets the SRQ limit; then it continues */
	hello(0, 0);
	simple(0, SR_OP_ALLOC_PD, -1); /* 0 */
	create_cq(0, 8, -1);	       /* 1 */
	{
		struct sr_req r = R(SR_OP_CREATE_SRQ);
		struct patch p[] = {P(u.srq.pd, 0)};

		r.u.srq.max_wr = 16;
		r.u.srq.max_sge = 1;
		send_req(0, &r, p, 1); /* 2 */
	}
	create_qp(0, IBV_QPT_RC, 0, 1, -1); /* 3 */
	create_qp(0, IBV_QPT_RC, 0, 1, 2);  /* 4 */
	to_rts(0, 3, IBV_QPT_RC, 3);
	dp(0, 3, FZ_HOLD_SQ | FZ_HOLD_RQ | FZ_HOLD_RQ_PROD | FZ_HOLD_SEND_CQ);
	dp(0, 4, FZ_HOLD_SRQ);
	modify_qp(0, 3, IBV_QPT_RC, IBV_QPS_ERR, -1);
	op(0, FZ_TICK);
	dp(0, 0, FZ_HOLD_RELEASE);
	op(0, FZ_TICK);
	dp(0, 3, FZ_HOLD_SEND_CQ);
	{
		struct sr_req r = R(SR_OP_RESIZE_CQ);
		struct patch p[] = {P(handle, 1)};

		r.u.cq.cqe = 32;
		send_req(0, &r, p, 1);
	}
	dp(0, 0, FZ_HOLD_RELEASE);
	op(0, FZ_TICK);
	dp(0, 4, FZ_HOLD_SRQ);
	{
		struct sr_req r = R(SR_OP_MODIFY_SRQ);
		struct patch p[] = {P(handle, 2)};

		r.u.srq.max_sge = IBV_SRQ_LIMIT;
		r.u.srq.srq_limit = 4;
		send_req(0, &r, p, 1);
	}
	op(0, FZ_CLOSE); /* gone while its request waits */
	save(dir, "stopped_holder");

	/* a process writes garbage over a CQ's ring offset and size in the
	 * arena, then resizes the CQ twice and destroys it */
	hello(0, 0);
	simple(0, SR_OP_ALLOC_PD, -1);	    /* 0 */
	create_cq(0, 8, -1);		    /* 1 */
	create_qp(0, IBV_QPT_RC, 0, 1, -1); /* 2 */
	dp(0, 2, FZ_SCRIBBLE_CQ);
	for (int k = 0; k < 2; k++) {
		struct sr_req r = R(SR_OP_RESIZE_CQ);
		struct patch p[] = {P(handle, 1)};

		r.u.cq.cqe = 100 + k;
		send_req(0, &r, p, 1);
		dp(0, 2, FZ_SCRIBBLE_CQ);
	}
	simple(0, SR_OP_DESTROY_QP, 2);
	simple(0, SR_OP_DESTROY_CQ, 1);
	save(dir, "scribbled_cq");

	/* a listener; another host connects (REQ), the listener's owner
	 * takes the CONNECT_REQUEST, the peer's RTU, DREQ and a repeated
	 * REQ arrive; every MAD for the ids the daemon has */
	cm_listener(0, 0, PS_TCP, IBV_QPT_RC, "0.0.0.0", 7471); /* 0, 1 */
	mad(0, SR_CM_REQ, FZ_MAD_SERVICE);
	op(0, FZ_TICK);
	cm_events(0, 0); /* 2: the event count; 3: the CONNECT_REQUEST's new id */
	cm_op(0, SR_OP_CM_ACCEPT, 3, NULL, NULL, 0);
	op(0, FZ_TICK);
	for (unsigned k = 0; k < 2; k++) {
		unsigned id = k << 4;

		mad(0, SR_CM_RTU, FZ_MAD_THEIR | FZ_MAD_PEERS | id);
		mad(0, SR_CM_MRA, FZ_MAD_THEIR | FZ_MAD_PEERS | id);
		mad(0, SR_CM_DREQ, FZ_MAD_THEIR | FZ_MAD_PEERS | id);
		mad(0, SR_CM_REQ, FZ_MAD_SERVICE | id);
	}
	op(0, FZ_TICK);
	cm_events(0, 0);
	cm_op(0, SR_OP_CM_DISCONNECT, 3, NULL, NULL, 0);
	mad(0, SR_CM_DREP, FZ_MAD_THEIR | FZ_MAD_PEERS);
	op(0, FZ_TICK);
	op(0, FZ_CLOSE);
	save(dir, "cm_listener_wire");

	/* a connection on this host over 127.0.0.1: its REQ, REP and RTU
	 * through the daemon's MAD queue, ESTABLISH, DISCONNECT; then another
	 * host's REP, REJ and DREP for the ids the daemon has */
	cm_listener(0, 0, PS_TCP, IBV_QPT_RC, "127.0.0.1", 7472); /* 0, 1 */
	cm_active(1, 2, PS_TCP, IBV_QPT_RC, "127.0.0.1", 7472);	  /* 2, 3 */
	op(1, FZ_TICK);
	cm_events(0, 0); /* 4: the event count; 5: the CONNECT_REQUEST's new id */
	cm_op(0, SR_OP_CM_ACCEPT, 5, NULL, NULL, 0);
	op(0, FZ_TICK);
	cm_events(1, 2);
	cm_op(1, SR_OP_CM_ESTABLISH, 3, NULL, NULL, 0);
	op(1, FZ_TICK);
	cm_events(0, 0);
	cm_op(1, SR_OP_CM_DISCONNECT, 3, NULL, NULL, 0);
	op(1, FZ_TICK);
	cm_events(0, 0);
	cm_events(1, 2);
	for (unsigned k = 0; k < 3; k++) {
		unsigned id = k << 4;

		mad(2, SR_CM_REP, FZ_MAD_THEIR | id);
		mad(0, SR_CM_REJ, FZ_MAD_THEIR | id);
		mad(0, SR_CM_DREP, FZ_MAD_THEIR | FZ_MAD_PEERS | id);
	}
	op(1, FZ_CLOSE);
	op(0, FZ_CLOSE);
	save(dir, "cm_loopback");

	/* UD through SIDR on this host, then SIDR MADs from another host */
	cm_listener(0, 0, PS_UDP, IBV_QPT_UD, "127.0.0.1", 7473); /* 0, 1 */
	cm_active(1, 2, PS_UDP, IBV_QPT_UD, "127.0.0.1", 7473);	  /* 2, 3 */
	op(1, FZ_TICK);
	cm_events(0, 0); /* 4: the event count; 5: the new id */
	cm_op(0, SR_OP_CM_ACCEPT, 5, NULL, NULL, 0);
	op(0, FZ_TICK);
	cm_events(1, 2);
	for (unsigned k = 0; k < 3; k++)
		mad(1, SR_CM_SIDR_REP, FZ_MAD_REQ_ID | k << 4);
	mad(0, SR_CM_SIDR_REQ, FZ_MAD_SERVICE | 2 << 4);
	op(0, FZ_TICK);
	op(1, FZ_CLOSE);
	op(0, FZ_CLOSE);
	save(dir, "cm_sidr");

	/* processes gone in the middle of a connection: the active side's
	 * (REQ sent: a REJ, timeout) and then the passive side's (REQ
	 * received: a REJ, consumer defined) */
	cm_listener(0, 0, PS_TCP, IBV_QPT_RC, "127.0.0.1", 7474); /* 0, 1 */
	for (unsigned k = 0; k < 2; k++) {
		cm_active(1, 2 + 2 * k, PS_TCP, IBV_QPT_RC, "127.0.0.1", 7474); /* 2, 3; 4, 5 */
		if (k)
			op(1, FZ_TICK);
		op(1, FZ_CLOSE);
		op(0, FZ_TICK);
	}
	op(0, FZ_CLOSE);
	save(dir, "cm_abandon");

	/* time passes on every CM wait: a REQ to a port bound but not
	 * listening (parked) resent until UNREACHABLE; a REP never answered by
	 * an RTU (CONNECT_ERROR); a connection's DREQ lingering after its
	 * process left, then the survivor's timewait over */
	hello(0, 0);
	cm_channel(0);				/* 0 */
	cm_create_id(0, 0, PS_TCP, IBV_QPT_RC); /* 1 */
	cm_op(0, SR_OP_CM_BIND, 1, "127.0.0.1", NULL, 7475);
	cm_active(1, 2, PS_TCP, IBV_QPT_RC, "127.0.0.1", 7475); /* 2, 3 */
	op(1, FZ_TICK);
	for (int k = 0; k < 20; k++)
		op(1, FZ_CM_DUE); /* its events stay unread: no slots taken */
	cm_listener(2, 4, PS_TCP, IBV_QPT_RC, "0.0.0.0", 7476); /* 4, 5 */
	mad(0, SR_CM_REQ, FZ_MAD_SERVICE);
	op(2, FZ_TICK);
	cm_events(2, 4); /* 6: the event count; 7: the new id */
	cm_op(2, SR_OP_CM_ACCEPT, 7, NULL, NULL, 0);
	for (int k = 0; k < 20; k++)
		op(2, FZ_CM_DUE);
	cm_events(2, 4);
	op(0, FZ_CLOSE);
	op(1, FZ_CLOSE);
	op(2, FZ_CLOSE);
	cm_listener(0, 10, PS_TCP, IBV_QPT_RC, "127.0.0.1", 7477); /* 10, 11 */
	cm_active(1, 12, PS_TCP, IBV_QPT_RC, "127.0.0.1", 7477);   /* 12, 13 */
	op(1, FZ_TICK);
	cm_events(0, 10); /* 14, 15: the new id */
	cm_op(0, SR_OP_CM_ACCEPT, 15, NULL, NULL, 0);
	op(1, FZ_TICK);
	cm_events(1, 12);
	cm_op(1, SR_OP_CM_ESTABLISH, 13, NULL, NULL, 0);
	cm_op(1, SR_OP_CM_DISCONNECT, 13, NULL, NULL, 0);
	op(1, FZ_CLOSE); /* its DREQ lingers */
	for (int k = 0; k < 20; k++)
		op(0, FZ_CM_DUE);
	cm_events(0, 10);
	save(dir, "cm_deadlines");

	/* MADs for nobody: a REQ for a service nobody listens on (a REJ), a
	 * DREQ of an unknown connection (a DREP), a SIDR_REQ (unsupported) */
	mad(0, SR_CM_REQ, 0);
	mad(1, SR_CM_DREQ, 0);
	mad(0, SR_CM_SIDR_REQ, 0);
	mad(4, SR_CM_REP, 0);
	op(0, FZ_TICK);
	save(dir, "cm_mads_for_nobody");

	/* a client that stops reading its replies, then reads again */
	hello(0, 0);
	send_action = FZ_SEND_NOREAD;
	for (int k = 0; k < 64; k++)
		simple(0, SR_OP_ALLOC_PD, -1);
	send_action = FZ_SEND;
	op(0, FZ_READ);
	save(dir, "noread");
	return 0;
}
