/*
 * A one-sided WRITE to a process that was SIGKILLed and reaped must fail
 * (issue 35, item 6).  On hardware the kernel destroys a process's QPs
 * while it exits, before its parent can reap it, so a WRITE posted after
 * waitpid finds no QP, gets no ACK and ends in IBV_WC_RETRY_EXC_ERR.
 *
 *   sr_reap RUNS MY_GID_INDEX TARGET_GID_INDEX [PREFIX...]
 *
 * Each run starts a target (this program with --target, through PREFIX:
 * e.g. `ip netns exec NS env ...` to put it on another host, each word
 * exec'ing the next so the child's pid stays the target's), connects an RC
 * QP to it (timeout 13, retry_cnt 3), checks that a first WRITE succeeds,
 * SIGKILLs and reaps the target, and at once posts a second WRITE, which
 * must complete with RETRY_EXC_ERR.  The target and the initiator speak
 * over the target's stdin and stdout.  Prints "N passed, M failed".
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF 4096

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	char *buf;
	union ibv_gid gid;
	int gidx;
};

static void die(const char *what)
{
	fprintf(stderr, "sr_reap: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void end_open(struct end *e, int gidx, int access)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	if (!l || !l[0])
		die("no device");
	e->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!e->ctx)
		die("ibv_open_device");
	e->gidx = gidx;
	if (ibv_query_gid(e->ctx, 1, gidx, &e->gid))
		die("ibv_query_gid");
	e->pd = ibv_alloc_pd(e->ctx);
	e->buf = aligned_alloc(4096, BUF);
	if (!e->pd || !e->buf)
		die("pd");
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, access);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	if (!e->mr || !e->cq)
		die("mr, cq");
}

static struct ibv_qp *qp_make(struct end *e)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = e->cq,
	    .recv_cq = e->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	if (!qp ||
	    ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("qp to INIT");
	return qp;
}

static void qp_connect(struct end *e, struct ibv_qp *qp, uint32_t dqpn, uint32_t dpsn,
		       uint32_t mypsn, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = IBV_MTU_1024,
				.dest_qp_num = dqpn,
				.rq_psn = dpsn,
				.max_dest_rd_atomic = 1,
				.min_rnr_timer = 12,
				.ah_attr = {.is_global = 1, .port_num = 1}};

	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = e->gidx;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("qp to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = mypsn;
	/* 33.6 ms, 3 retries: near the program that found the defect (12, 2),
	 * with room for a loaded machine's first WRITE to the live target */
	a.timeout = 13;
	a.retry_cnt = 3;
	a.rnr_retry = 2;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("qp to RTS");
}

static void gid_put(FILE *f, const union ibv_gid *g)
{
	for (int i = 0; i < 16; i++)
		fprintf(f, "%02x", g->raw[i]);
}

static int gid_get(FILE *f, union ibv_gid *g)
{
	for (int i = 0; i < 16; i++) {
		unsigned v;

		if (fscanf(f, "%2x", &v) != 1)
			return -1;
		g->raw[i] = (uint8_t)v;
	}
	return 0;
}

/* The target: its QP, MR and address out on stdout; the initiator's QP in
 * on stdin; then it waits to be killed. */
static int target_main(int gidx)
{
	union ibv_gid dgid;
	unsigned dqpn, dpsn;
	struct ibv_qp *qp;
	struct end e;
	char c;

	end_open(&e, gidx, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	qp = qp_make(&e);
	printf("%u %u %u %" PRIu64 " ", qp->qp_num, 0x123u, e.mr->rkey, (uint64_t)(uintptr_t)e.buf);
	gid_put(stdout, &e.gid);
	printf("\n");
	fflush(stdout);
	if (scanf("%u %u ", &dqpn, &dpsn) != 2 || gid_get(stdin, &dgid))
		return 2;
	qp_connect(&e, qp, dqpn, dpsn, 0x123, &dgid);
	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static int write_once(struct end *e, struct ibv_qp *qp, uint32_t rkey, uint64_t raddr,
		      enum ibv_wc_status *st)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = 8, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 7,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr = {.rdma = {.remote_addr = raddr, .rkey = rkey}}};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	uint64_t deadline = now_ms() + 10000;
	int n;

	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(e->cq, 1, &wc)) == 0 && now_ms() < deadline)
		;
	if (n != 1)
		return -1;
	*st = wc.status;
	return 0;
}

int main(int argc, char **argv)
{
	unsigned passed = 0, failed = 0, runs;
	char self[4096];
	struct end e;
	ssize_t n;

	if (argc == 3 && !strcmp(argv[1], "--target"))
		return target_main(atoi(argv[2]));
	if (argc < 4) {
		fprintf(stderr, "usage: %s RUNS MY_GID_INDEX TARGET_GID_INDEX [PREFIX...]\n",
			argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		die("readlink /proc/self/exe");
	self[n] = 0;
	runs = (unsigned)atoi(argv[1]);
	end_open(&e, atoi(argv[2]), IBV_ACCESS_LOCAL_WRITE);
	for (unsigned r = 0; r < runs; r++) {
		int to[2], from[2], status;
		unsigned tqpn, tpsn, trkey;
		enum ibv_wc_status st = IBV_WC_GENERAL_ERR;
		union ibv_gid tgid;
		uint64_t taddr;
		struct ibv_qp *qp;
		char line[16];
		FILE *in, *out;
		pid_t pid;

		if (pipe(to) || pipe(from))
			die("pipe");
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid) {
			char **av = calloc((size_t)argc + 4, sizeof(*av));
			int k = 0;

			dup2(to[0], 0);
			dup2(from[1], 1);
			close(to[0]), close(to[1]), close(from[0]), close(from[1]);
			for (int i = 4; i < argc; i++)
				av[k++] = argv[i];
			av[k++] = self;
			av[k++] = "--target";
			av[k++] = argv[3];
			execvp(av[0], av);
			_exit(127);
		}
		close(to[0]), close(from[1]);
		in = fdopen(from[0], "r");
		out = fdopen(to[1], "w");
		if (fscanf(in, "%u %u %u %" SCNu64 " ", &tqpn, &tpsn, &trkey, &taddr) != 4 ||
		    gid_get(in, &tgid) || !fgets(line, sizeof(line), in)) {
			fprintf(stderr, "run %u: the target said nothing\n", r);
			failed++;
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fclose(in), fclose(out);
			continue;
		}
		qp = qp_make(&e);
		fprintf(out, "%u %u ", qp->qp_num, 0x456u);
		gid_put(out, &e.gid);
		fprintf(out, "\n");
		fflush(out);
		qp_connect(&e, qp, tqpn, tpsn, 0x456, &tgid);
		if (!fgets(line, sizeof(line), in) || strcmp(line, "ready\n")) {
			fprintf(stderr, "run %u: the target did not connect\n", r);
			failed++;
		} else if (write_once(&e, qp, trkey, taddr, &st) || st != IBV_WC_SUCCESS) {
			fprintf(stderr, "run %u: the WRITE to the live target failed: %s\n", r,
				ibv_wc_status_str(st));
			failed++;
		} else {
			pid_t got;

			kill(pid, SIGKILL);
			got = waitpid(pid, &status, 0);
			if (got != pid || !WIFSIGNALED(status)) {
				fprintf(stderr, "run %u: waitpid gave %d, status %#x\n", r,
					(int)got, status);
				failed++;
			} else if ((pid = 0), write_once(&e, qp, trkey, taddr, &st)) {
				fprintf(stderr,
					"run %u: no completion for the WRITE after the reap\n", r);
				failed++;
			} else if (st != IBV_WC_RETRY_EXC_ERR) {
				fprintf(stderr, "run %u: the WRITE after the reap: %s, want %s\n",
					r, ibv_wc_status_str(st),
					ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR));
				failed++;
			} else {
				passed++;
			}
		}
		if (pid) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		fclose(in), fclose(out);
		if (ibv_destroy_qp(qp))
			die("ibv_destroy_qp");
	}
	printf("%u of %u WRITEs after the target's reap failed with RETRY_EXC_ERR\n", passed, runs);
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
