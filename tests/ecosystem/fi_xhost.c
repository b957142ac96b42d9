/*
 * A libfabric program of ours for the paths fi_pingpong cannot take across
 * hosts (issue #13): fi_pingpong 1.17 has no option for a source address,
 * and without one the verbs provider binds its listener to "localhost", so
 * its msg and rxm endpoints only ever meet on one host.  Here each side
 * names its own address, as an application on a cluster does:
 *   fi_xhost server PROV msg|rdm ADDR PORT ITERS
 *   fi_xhost client PROV msg|rdm SERVER_ADDR PORT ITERS MY_ADDR
 * PROV is "verbs" (msg endpoints, through rdma_cm) or "verbs;ofi_rxm"
 * (rdm).  The client sends ITERS messages of sizes 1 B to 64 KiB, each a
 * pattern of its iteration, and the server answers each with a pattern of
 * its own; both check every byte.  For rdm the client's first message
 * carries its endpoint name, which the server puts in its address vector.
 * Prints "fi_xhost: PASS, N messages each way, B bytes" and exits 0, or
 * says what failed and exits 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define MAX_MSG	 (64 * 1024)
#define NAME_LEN 256

#define TRY(call)                                                                                  \
	do {                                                                                       \
		int ret_ = (int)(call);                                                            \
		if (ret_) {                                                                        \
			fprintf(stderr, "fi_xhost: %s: %s (%d)\n", #call, fi_strerror(-ret_),      \
				ret_);                                                             \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_eq *eq;
static struct fid_mr *mr;
static uint8_t *buf; /* [0, MAX_MSG + NAME_LEN) receive, then the same to send */
static fi_addr_t peer = FI_ADDR_UNSPEC;
static struct fi_context2 recv_ctx, send_ctx; /* FI_CONTEXT(2) mode: ours to give */
static int rdm;

static uint8_t pat(size_t i, unsigned iter, int from_server)
{
	return (uint8_t)(i * 7 + iter * 13 + (i >> 8) + (from_server ? 101 : 0));
}

static size_t size_of(unsigned iter)
{
	static const size_t sizes[] = {1, 7, 64, 1000, 4096, 9000, 65536};

	return sizes[iter % (sizeof(sizes) / sizeof(sizes[0]))];
}

static void wait_cq(const char *what)
{
	struct fi_cq_entry e;
	ssize_t n;

	do {
		n = fi_cq_read(cq, &e, 1);
	} while (n == -FI_EAGAIN);
	if (n != 1) {
		struct fi_cq_err_entry err = {0};

		fi_cq_readerr(cq, &err, 0);
		fprintf(stderr, "fi_xhost: %s: completion error %s (%d), provider's %d\n", what,
			fi_strerror(err.err), err.err, err.prov_errno);
		exit(1);
	}
}

/* rxm answers -FI_EAGAIN while it connects to a peer for the first time:
 * progress (a zero-entry CQ read) and try again */
#define RETRY(call)                                                                                \
	do {                                                                                       \
		ssize_t r_;                                                                        \
		while ((r_ = (call)) == -FI_EAGAIN)                                                \
			fi_cq_read(cq, NULL, 0);                                                   \
		TRY(r_);                                                                           \
	} while (0)

static void post_recv(void)
{
	RETRY(fi_recv(ep, buf, MAX_MSG + NAME_LEN, fi_mr_desc(mr), FI_ADDR_UNSPEC, &recv_ctx));
}

static void send_msg(const void *data, size_t len)
{
	uint8_t *s = buf + MAX_MSG + NAME_LEN;

	memcpy(s, data, len);
	RETRY(fi_send(ep, s, len, fi_mr_desc(mr), peer, &send_ctx));
	wait_cq("send");
}

static struct fi_info *hints_for(const char *prov, const char *type)
{
	struct fi_info *h = fi_allocinfo();

	rdm = !strcmp(type, "rdm");
	h->caps = FI_MSG;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = rdm ? FI_EP_RDM : FI_EP_MSG;
	h->addr_format = FI_SOCKADDR_IN;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->fabric_attr->prov_name = strdup(prov);
	return h;
}

/* Domain, CQ, (AV), endpoint bound and enabled, buffer registered. */
static void open_ep(struct fi_info *info)
{
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 64};

	if (!fabric)
		TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	TRY(fi_cq_open(domain, &ca, &cq, NULL));
	TRY(fi_endpoint(domain, info, &ep, NULL));
	if (rdm) {
		struct fi_av_attr aa = {.type = FI_AV_MAP};

		TRY(fi_av_open(domain, &aa, &av, NULL));
		TRY(fi_ep_bind(ep, &av->fid, 0));
	} else {
		TRY(fi_ep_bind(ep, &eq->fid, 0));
	}
	TRY(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(ep));
	printf("fi_xhost: provider %s, domain %s\n", info->fabric_attr->prov_name,
	       info->domain_attr->name);
	fflush(stdout);
	buf = aligned_alloc(4096, 2 * (MAX_MSG + NAME_LEN) + 4096);
	TRY(fi_mr_reg(domain, buf, 2 * (MAX_MSG + NAME_LEN), FI_SEND | FI_RECV, 0, 0, 0, &mr,
		      NULL));
}

static void expect_event(uint32_t want, struct fi_eq_cm_entry *entry)
{
	uint32_t ev;
	ssize_t n = fi_eq_sread(eq, &ev, entry, sizeof(*entry), 30000, 0);

	if (n != (ssize_t)sizeof(*entry) || ev != want) {
		fprintf(stderr, "fi_xhost: CM event %u (%zd), wanted %u\n", ev, n, want);
		exit(1);
	}
}

static int check(size_t len, unsigned iter, int from_server)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pat(i, iter, from_server)) {
			fprintf(stderr,
				"fi_xhost: iteration %u, %zu bytes: byte %zu is %#x, not %#x\n",
				iter, len, i, buf[i], pat(i, iter, from_server));
			return 1;
		}
	return 0;
}

static void fill_send(size_t len, unsigned iter, int from_server)
{
	static uint8_t tmp[MAX_MSG];

	for (size_t i = 0; i < len; i++)
		tmp[i] = pat(i, iter, from_server);
	send_msg(tmp, len);
}

int main(int argc, char **argv)
{
	int server = argc == 7 && !strcmp(argv[1], "server");
	int client = argc == 8 && !strcmp(argv[1], "client");
	struct fi_eq_attr ea = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_info *hints, *info;
	unsigned iters;
	uint64_t bytes = 0;

	if (!server && !client) {
		fprintf(stderr,
			"usage: fi_xhost server PROV msg|rdm ADDR PORT ITERS\n"
			"       fi_xhost client PROV msg|rdm SERVER_ADDR PORT ITERS MY_ADDR\n");
		return 2;
	}
	iters = (unsigned)atoi(argv[6]);
	hints = hints_for(argv[2], argv[3]);
	if (server) {
		/* our own address: the listener (or rxm's) binds there */
		TRY(fi_getinfo(FI_VERSION(1, 17), argv[4], argv[5], FI_SOURCE, hints, &info));
		TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
		if (rdm) {
			open_ep(info);
		} else {
			struct fid_pep *pep;
			struct fi_eq_cm_entry e;

			TRY(fi_eq_open(fabric, &ea, &eq, NULL));
			TRY(fi_passive_ep(fabric, info, &pep, NULL));
			TRY(fi_pep_bind(pep, &eq->fid, 0));
			TRY(fi_listen(pep));
			printf("fi_xhost: listening on %s:%s\n", argv[4], argv[5]);
			fflush(stdout);
			expect_event(FI_CONNREQ, &e);
			open_ep(e.info);
			post_recv();
			TRY(fi_accept(ep, NULL, 0));
			expect_event(FI_CONNECTED, &e);
		}
		if (rdm) {
			printf("fi_xhost: rdm endpoint ready on %s:%s\n", argv[4], argv[5]);
			fflush(stdout);
			post_recv();
		}
		for (unsigned it = 0; it < iters; it++) {
			size_t len = size_of(it);

			wait_cq("receive");
			if (rdm && it == 0) {
				/* the first message starts with the client's name */
				TRY(fi_av_insert(av, buf, 1, &peer, 0, NULL) != 1);
				memmove(buf, buf + NAME_LEN, len);
			}
			if (check(len, it, 0))
				return 1;
			post_recv();
			fill_send(len, it, 1);
			bytes += 2 * len;
		}
	} else {
		struct fi_info *mine;

		if (rdm) {
			/* rxm's own listener at our address: the server answers there */
			TRY(fi_getinfo(FI_VERSION(1, 17), argv[7], "0", FI_SOURCE, hints, &mine));
			open_ep(mine);
			TRY(fi_av_insertsvc(av, argv[4], argv[5], &peer, 0, NULL) != 1);
		} else {
			struct fi_eq_cm_entry e;

			hints->src_addr = NULL;
			TRY(fi_getinfo(FI_VERSION(1, 17), argv[4], argv[5], 0, hints, &info));
			TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
			TRY(fi_eq_open(fabric, &ea, &eq, NULL));
			open_ep(info);
			post_recv();
			TRY(fi_connect(ep, info->dest_addr, NULL, 0));
			expect_event(FI_CONNECTED, &e);
		}
		if (rdm)
			post_recv();
		for (unsigned it = 0; it < iters; it++) {
			size_t len = size_of(it);
			static uint8_t first[NAME_LEN + MAX_MSG];

			if (rdm && it == 0) {
				size_t nl = NAME_LEN;

				memset(first, 0, sizeof(first));
				TRY(fi_getname(&ep->fid, first, &nl));
				for (size_t i = 0; i < len; i++)
					first[NAME_LEN + i] = pat(i, it, 0);
				send_msg(first, NAME_LEN + len);
			} else {
				fill_send(len, it, 0);
			}
			wait_cq("receive");
			if (check(len, it, 1))
				return 1;
			post_recv();
			bytes += 2 * len;
		}
	}
	printf("fi_xhost: PASS, %u messages each way, %llu bytes\n", iters,
	       (unsigned long long)bytes);
	return 0;
}
