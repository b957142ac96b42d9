/*
 * The peer host gone under an established connection (issue #11), one side
 * per process so that each can run on its own host (cm_twohost_gone.sh):
 *   cm_gone server PORT        accept one connection, print ESTABLISHED,
 *                              then wait for ever (the test kills it and
 *                              its host's daemon)
 *   cm_gone client ADDR PORT GO
 *                              connect, print ESTABLISHED, wait for a line
 *                              from the file (a FIFO) GO (the peer host is
 *                              gone by then),
 *                              then SEND 64 bytes and wait for the
 *                              completion: RETRY_EXC_ERR once the local ACK
 *                              timeout rdma_cm sets for RoCE (ack timeout
 *                              18, 1.07 s) has run out retry_count + 1 (8)
 *                              times; exits 0 when the status is that and
 *                              it came within that budget plus 2 s.
 * Everything through the synchronous rdma_cm calls (rdma_create_ep,
 * rdma_connect, rdma_verbs.h), as an rdma-core program writes them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "cm_gone: " __VA_ARGS__);                                          \
		fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));                       \
		exit(1);                                                                           \
	} while (0)

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static struct rdma_cm_id *make_ep(const char *node, const char *port, int passive)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;
	struct ibv_qp_init_attr qa = {
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1};
	struct rdma_cm_id *id;

	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(node, port, &hints, &res))
		FAIL("rdma_getaddrinfo %s:%s", node ? node : "*", port);
	if (rdma_create_ep(&id, res, NULL, passive ? NULL : &qa))
		FAIL("rdma_create_ep");
	rdma_freeaddrinfo(res);
	return id;
}

static int server(const char *port)
{
	struct rdma_cm_id *lid = make_ep(NULL, port, 1), *id;
	struct ibv_qp_init_attr qa = {
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1};

	if (rdma_listen(lid, 1))
		FAIL("rdma_listen");
	if (rdma_get_request(lid, &id))
		FAIL("rdma_get_request");
	if (rdma_create_qp(id, NULL, &qa))
		FAIL("rdma_create_qp");
	if (rdma_accept(id, NULL))
		FAIL("rdma_accept");
	printf("ESTABLISHED pid %d\n", (int)getpid()); /* the test kills this pid */
	fflush(stdout);
	for (;;)
		pause();
}

static int client(const char *addr, const char *port, const char *go)
{
	struct rdma_cm_id *id = make_ep(addr, port, 0);
	struct rdma_conn_param p = {.retry_count = 7, .rnr_retry_count = 7};
	static char buf[64] = "the peer host is gone";
	double t0, secs, budget = 8 * 4.096e-6 * (1 << 18) + 2.0;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	char line[16];
	FILE *f;
	int n;

	if (rdma_connect(id, &p))
		FAIL("rdma_connect");
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	if (!mr)
		FAIL("rdma_reg_msgs");
	printf("ESTABLISHED\n");
	fflush(stdout);
	f = fopen(go, "r");
	if (!f || !fgets(line, sizeof(line), f))
		FAIL("no go-ahead from %s", go);
	fclose(f);
	t0 = now();
	if (rdma_post_send(id, NULL, buf, sizeof(buf), mr, 0))
		FAIL("rdma_post_send");
	n = rdma_get_send_comp(id, &wc);
	secs = now() - t0;
	if (n != 1)
		FAIL("rdma_get_send_comp returned %d", n);
	printf("SEND completed with %s (%d) after %.2f s (budget %.2f s)\n",
	       ibv_wc_status_str(wc.status), wc.status, secs, budget);
	fflush(stdout);
	if (wc.status != IBV_WC_RETRY_EXC_ERR || secs > budget)
		return 1;
	/* no rdma_disconnect: on a synchronous id it waits for DISCONNECTED,
	 * which comes only when the DREQ's retries run out (minutes, as with
	 * the kernel's CM); exiting leaves that DREQ to the daemon */
	printf("PASS\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: cm_gone server PORT | client ADDR PORT GO\n");
	return 2;
}
