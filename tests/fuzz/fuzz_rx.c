/*
 * libFuzzer target: the RoCEv2 receive path past the parser, in process.
 * A real softrdmad (its own engine off: SOFTRDMA_ROCE=0) holds a device
 * with four QPs connected to a peer on "another host" (RC responder, RC
 * requester with work outstanding, UC, UD), one MR inside guard regions,
 * and receives posted; an engine with no thread and no socket
 * (sr_engine_attach) maps the same arena and is handed each input's packets
 * with sr_eng_rx_one, exactly as the engine thread hands it what recvmmsg
 * returned: responder, completer, UD delivery, the executor's key checks,
 * atomics, receive consumption, CQEs and errors all run on them.  What it
 * sends in return goes nowhere (every socket is -1).
 *
 * An input is up to 16 packets, each: a QP selector, flags, a length and
 * the bytes from the BTH on.  The harness then makes them reachable, as a
 * peer would: the destination QPN of the selected QP, optionally the PSN
 * the QP expects, the MR's real rkey and an address inside it, the UD
 * QP's Q_Key, and a
 * correct ICRC from the QP's peer address (unless asked to be wrong).
 * Every input starts from the same state (QPs reset and connected again),
 * so a finding replays alone (regress_rx/, replayed by fuzz_rx_regress).
 * Checks besides ASan/UBSan and libFuzzer's hang detection: no byte of the
 * guard regions around the MR ever changes (no write outside a registered
 * region), and the device keeps working.
 */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "core/daemon_link.h"
#include "engine/engine.h"
#include "transport/transport.h"
#include "shm/epoch.h"
#include "shm/exec.h"
#include "wire/bth.h"
#include "wire/icrc.h"

#include "../inproc_daemon.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { Q_RC_RESP, Q_RC_REQ, Q_UC, Q_UD, NQ };

#define MR_LEN	  (64 * 1024)
#define GUARD_LEN (16 * 1024)
#define RECVS	  32
#define QKEY	  0x11111111u

static struct ibv_context *fz_ctx;
static struct ibv_pd *fz_pd;
static struct ibv_cq *fz_cq;
static struct ibv_mr *fz_mr;
static struct ibv_qp *fz_qp[NQ];
static unsigned fz_recvs[NQ]; /* receives posted and not completed */
static unsigned fz_sends;     /* requester WRs outstanding */
static uint8_t *fz_buf;	      /* guard | MR | guard */
static int fz_gid_index;
static struct sr_engine *fz_eng;

static const uint8_t fz_peer[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 255, 0, 2};

static void die(const char *what)
{
	fprintf(stderr, "fuzz_rx: %s: %s\n", what, strerror(errno));
	abort();
}

/* FUZZ_STATS=1: what the packets reached, printed at exit */
static void stats(void)
{
	if (!fz_eng || !getenv("FUZZ_STATS"))
		return;
	fprintf(stderr,
		"fuzz_rx: rx_pkts %llu retransmits %llu naks_sent %llu rnr_naks_sent %llu "
		"tx_pkts %llu;",
		(unsigned long long)fz_eng->cnt[SR_ENG_RX_PKTS],
		(unsigned long long)fz_eng->cnt[SR_ENG_RETRANS],
		(unsigned long long)fz_eng->cnt[SR_ENG_NAK_TX],
		(unsigned long long)fz_eng->cnt[SR_ENG_RNR_TX],
		(unsigned long long)fz_eng->cnt[SR_ENG_TX_PKTS]);
	for (int i = 1; i < SR_DROP_MAX; i++)
		fprintf(stderr, " drop_%s %llu", sr_drop_name[i],
			(unsigned long long)fz_eng->drops[i]);
	fprintf(stderr, "\n");
}

static void stop_daemon(void)
{
	stats();
	inproc_daemon_stop();
}

/* It dies with us, also when libFuzzer ends us with _exit (a timeout, a
 * crash), and writes nowhere our output goes. */
static void start_daemon(void)
{
	const char *bin = getenv("FUZZ_SOFTRDMAD");

	if (!inproc_daemon_start(bin ? bin : "softrdmad", "fuzz-rx", true))
		die("softrdmad did not come up (FUZZ_SOFTRDMAD)");
	atexit(stop_daemon);
}

static void post_recvs(int i)
{
	while (fz_recvs[i] < RECVS) {
		struct ibv_sge sge = {(uintptr_t)fz_buf + GUARD_LEN + (uint64_t)i * 8192, 8192,
				      fz_mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;

		if (ibv_post_recv(fz_qp[i], &wr, &bad))
			die("ibv_post_recv");
		fz_recvs[i]++;
	}
}

/* RESET -> INIT -> RTR -> RTS, connected to fz_peer (another host). */
static void connect_qp(int i)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
	enum ibv_qp_type t = fz_qp[i]->qp_type;

	if (ibv_modify_qp(fz_qp[i], &a, IBV_QP_STATE))
		die("modify RESET");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC,
				 .qkey = QKEY};
	if (ibv_modify_qp(fz_qp[i], &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
		die("modify INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = 0xabc000u + (uint32_t)i,
				 .rq_psn = 0,
				 .max_dest_rd_atomic = 16,
				 .min_rnr_timer = 1,
				 .ah_attr = {.is_global = 1, .port_num = 1}};
	memcpy(a.ah_attr.grh.dgid.raw, fz_peer, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)fz_gid_index;
	a.ah_attr.grh.hop_limit = 64;
	int mask = IBV_QP_STATE;

	if (t == IBV_QPT_RC)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	else if (t == IBV_QPT_UC)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (ibv_modify_qp(fz_qp[i], &a, mask))
		die("modify RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = 14,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .sq_psn = 0,
				 .max_rd_atomic = 16};
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (t == IBV_QPT_RC)
		mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(fz_qp[i], &a, mask))
		die("modify RTS");
	fz_recvs[i] = 0;
	if (i == Q_RC_REQ)
		fz_sends = 0;
	post_recvs(i);
}

/* A GID of the device that is not the peer's: IPv4-mapped if there is one. */
static int pick_gid(void)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(fz_ctx, 1, &pa))
		die("ibv_query_port");
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;

		if (ibv_query_gid(fz_ctx, 1, i, &g))
			continue;
		if (!memcmp(g.raw, fz_peer, 12) && memcmp(g.raw, fz_peer, 16))
			return i;
	}
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct ibv_device **list;
	int fd;

	start_daemon();
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("no device");
	fz_ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!fz_ctx)
		die("ibv_open_device");
	fz_gid_index = pick_gid();
	fz_pd = ibv_alloc_pd(fz_ctx);
	fz_cq = ibv_create_cq(fz_ctx, 1024, NULL, NULL, 0);
	fz_buf = mmap(NULL, MR_LEN + 2 * GUARD_LEN, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!fz_pd || !fz_cq || fz_buf == MAP_FAILED)
		die("pd/cq/buffer");
	memset(fz_buf, 0xa5, MR_LEN + 2 * GUARD_LEN);
	fz_mr = ibv_reg_mr(fz_pd, fz_buf + GUARD_LEN, MR_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!fz_mr)
		die("ibv_reg_mr");
	for (int i = 0; i < NQ; i++) {
		struct ibv_qp_init_attr ia = {.send_cq = fz_cq,
					      .recv_cq = fz_cq,
					      .cap = {.max_send_wr = 64,
						      .max_recv_wr = 64,
						      .max_send_sge = 2,
						      .max_recv_sge = 2},
					      .qp_type = i == Q_UC   ? IBV_QPT_UC
							 : i == Q_UD ? IBV_QPT_UD
								     : IBV_QPT_RC};

		fz_qp[i] = ibv_create_qp(fz_pd, &ia);
		if (!fz_qp[i])
			die("ibv_create_qp");
		connect_qp(i);
	}
	/* the engine, attached like the daemon's own (a client of it) */
	fd = sr_daemon_connect(false, NULL);
	if (fd < 0)
		die("connect");
	fz_eng = sr_engine_attach(fd);
	if (!fz_eng)
		die("sr_engine_attach");
	return 0;
}

static void check_guards(void)
{
	const uint8_t *g[2] = {fz_buf, fz_buf + GUARD_LEN + MR_LEN};

	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < GUARD_LEN; i++)
			if (g[k][i] != 0xa5) {
				fprintf(stderr, "fuzz_rx: a guard byte changed (%s the MR, +%zu)\n",
					k ? "after" : "before", i);
				abort();
			}
}

/* The requester keeps a few operations in flight to a fake remote MR, so
 * that responses (ACKs, READ data, atomic answers) find work to match. */
static void post_requests(void)
{
	static unsigned n;

	while (fz_sends < 4) {
		struct ibv_sge sge = {(uintptr_t)fz_buf + GUARD_LEN + 32768 + (n % 4) * 4096,
				      (n % 3) == 2 ? 8 : 2048, fz_mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 100 + n,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		switch (n++ % 3) {
		case 0:
			wr.opcode = IBV_WR_RDMA_WRITE;
			break;
		case 1:
			wr.opcode = IBV_WR_RDMA_READ;
			break;
		default:
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.wr.atomic.compare_add = 1;
			break;
		}
		wr.wr.rdma.remote_addr = 0x10000;
		wr.wr.rdma.rkey = 0x1234;
		if (wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr.wr.atomic.remote_addr = 0x10000;
			wr.wr.atomic.rkey = 0x1234;
		}
		if (ibv_post_send(fz_qp[Q_RC_REQ], &wr, &bad))
			return; /* the QP is in error: reset below */
		fz_sends++;
	}
}

static void drain(void)
{
	struct ibv_wc wc[32];
	int n;

	while ((n = ibv_poll_cq(fz_cq, 32, wc)) > 0)
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id >= 100) {
				if (fz_sends)
					fz_sends--;
			} else if (wc[i].wr_id < NQ && fz_recvs[wc[i].wr_id]) {
				fz_recvs[wc[i].wr_id]--;
			}
		}
}

static struct sr_qp_shm *qp_shm(int i)
{
	return sr_exec_qp_lookup(fz_eng->ctx, fz_qp[i]->qp_num);
}

/* One packet from the fuzzer's bytes, made reachable as the flags ask. */
static void one_packet(uint8_t sel, uint8_t flags, const uint8_t *b, uint32_t n)
{
	uint8_t buf[4400];
	int qi = sel % (NQ + 1);
	struct sr_qp_shm *qp = qi < NQ ? qp_shm(qi) : NULL;
	uint8_t sgid[16], dgid[16];
	struct sr_pkt p;

	if (n < SR_BTH_LEN || n + SR_ICRC_LEN > sizeof(buf))
		return;
	memcpy(buf, b, n);
	if (qp) {
		uint32_t qpn = qp->qpn;

		buf[5] = (uint8_t)(qpn >> 16);
		buf[6] = (uint8_t)(qpn >> 8);
		buf[7] = (uint8_t)qpn;
		memcpy(sgid, qp->dgid, 16); /* from the peer ... */
		memcpy(dgid, qp->sgid, 16); /* ... to us */
		if (qp->type == IBV_QPT_UD) {
			memcpy(sgid, fz_peer, 16);
			if (ibv_query_gid(fz_ctx, 1, fz_gid_index, (union ibv_gid *)dgid))
				return;
		}
	} else {
		memcpy(sgid, fz_peer, 16);
		memcpy(dgid, fz_peer, 16);
		dgid[15] = 1;
	}
	if (flags & 8)
		sgid[15] ^= 0x40; /* not the QP's peer */
	if (qp && (flags & 3)) {
		struct sr_eng_qp *q = sr_eng_qp_get(fz_eng, qp);
		uint32_t psn = q ? ((flags & 1) ? q->resp.epsn : q->comp.una) : 0;

		buf[9] = (uint8_t)(psn >> 16);
		buf[10] = (uint8_t)(psn >> 8);
		buf[11] = (uint8_t)psn;
	}
	/* the MR's own rkey and an address inside it, where a RETH or
	 * AtomicETH follows the BTH (and a DETH, for UD: none of these) */
	if ((flags & 0x10) && sr_pkt_parse(buf, n + SR_ICRC_LEN, &p) == SR_DROP_NONE &&
	    (p.op->flags & (SR_OPF_RETH | SR_OPF_ATOMETH))) {
		uint64_t va = (uintptr_t)fz_mr->addr + ((uint64_t)buf[13] << 8 | buf[14]) % MR_LEN;

		if (p.op->flags & SR_OPF_ATOMETH)
			va &= ~7ull;
		for (int k = 0; k < 8; k++)
			buf[SR_BTH_LEN + k] = (uint8_t)(va >> (56 - 8 * k));
		for (int k = 0; k < 4; k++)
			buf[SR_BTH_LEN + 8 + k] = (uint8_t)(fz_mr->rkey >> (24 - 8 * k));
	}
	/* the UD QP's Q_Key in a DETH */
	if ((flags & 0x20) && n >= SR_BTH_LEN + 8 && (buf[0] & 0xe0) == 0x60)
		for (int k = 0; k < 4; k++)
			buf[SR_BTH_LEN + k] = (uint8_t)(QKEY >> (24 - 8 * k));
	{
		struct iovec iov = {buf, n};
		uint16_t sport = (uint16_t)(0xc000 | sel);

		sr_icrc_put(buf + n, sr_icrc(sgid, dgid, sport, SR_ROCE_PORT, &iov, 1) ^
					 ((flags & 4) ? 0x10u : 0));
		sr_eng_rx_one(fz_eng, buf, n + SR_ICRC_LEN,
			      &(struct sr_link_addr){sgid, dgid, sport});
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	/* every input starts from the same state, so that a finding replays
	 * on its own: QPs reset and connected again, PSNs from 0, receives
	 * posted, the requester's four operations (PSNs 0-1, 2-3, 4, 5-6) */
	drain();
	for (int i = 0; i < NQ; i++)
		connect_qp(i);
	post_requests();
	sr_epoch_enter(fz_eng->arena);
	{
		struct sr_qp_shm *qp = qp_shm(Q_RC_REQ);
		struct sr_eng_qp *q = qp ? sr_eng_qp_get(fz_eng, qp) : NULL;

		if (q)
			sr_eng_req_run(fz_eng, qp, q); /* sent into nowhere */
	}
	for (int k = 0; k < 16 && off + 4 <= size; k++) {
		uint8_t sel = data[off], flags = data[off + 1];
		uint32_t n = (uint32_t)data[off + 2] | (uint32_t)(data[off + 3] & 0x1f) << 8;

		off += 4;
		if (n > size - off)
			n = (uint32_t)(size - off);
		one_packet(sel, flags, data + off, n);
		off += n;
	}
	sr_eng_resp_acks(fz_eng);
	sr_eng_flush_tx(fz_eng);
	sr_epoch_exit();
	check_guards();
	drain();
	return 0;
}
