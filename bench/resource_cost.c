/*
 * resource_cost: what one QP and one MR cost under softrdma.
 *
 *   resource_cost SOFTRDMA_CLI N_QP N_MR
 *
 * Run under `softrdma run --` (it must bind to softrdma's libibverbs).  It
 * opens the first device, makes a PD and a CQ, then measures, around each
 * of three batches:
 *   qp      N_QP RC QPs (max_send_wr 128, max_recv_wr 128, 1 SGE, no
 *           inline) on the one CQ, left in RESET;
 *   mr-same N_MR MRs all over the same 4 KiB page (pure registration
 *           bookkeeping: the page moves onto shared memory once);
 *   mr-own  N_MR MRs, each over its own 4 KiB page (each page moves onto
 *           its own shared-memory backing).
 * the daemon's "KiB in objects" (arena heap in use, from `SOFTRDMA_CLI
 * status`), this process's VmRSS, and the daemon's VmRSS (the daemon's pid
 * comes from the same status text).  Every buffer this program allocates
 * is touched before the "before" reading, so the RSS deltas are what
 * softrdma adds.  Output, one line per batch:
 *
 *   KIND N arena_kib arena_resident_kib proc_rss_kib daemon_rss_kib seconds
 *
 * (all deltas over the batch; seconds is the time the batch took)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *cli;

struct snap {
	long arena_kib, arena_res_kib, proc_kib, daemon_kib;
	double t;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long rss_kib(long pid)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Resident size of the daemon's arena memfd: the pages actually allocated
 * in it (st_blocks of /proc/PID/fd/N), whatever the heap has reserved. */
static long arena_resident_kib(long dpid)
{
	char dir[64], path[320], link[256];
	struct dirent *de;
	struct stat st;
	long v = -1;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%ld/fd", dpid);
	d = opendir(dir);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (strstr(link, "softrdma-arena") && !stat(path, &st)) {
			v = (long)(st.st_blocks * 512 / 1024);
			break;
		}
	}
	closedir(d);
	return v;
}

static void take(struct snap *s)
{
	char cmd[4200], line[512];
	long dpid = -1, v;
	FILE *p;

	s->arena_kib = -1;
	snprintf(cmd, sizeof(cmd), "'%s' status", cli);
	p = popen(cmd, "r");
	if (p) {
		while (fgets(line, sizeof(line), p)) {
			char *a = strstr(line, "daemon pid ");
			char *b = strstr(line, "MiB mapped, ");

			if (a)
				dpid = strtol(a + 11, NULL, 10);
			if (b && sscanf(b, "MiB mapped, %ld KiB in objects", &v) == 1)
				s->arena_kib = v;
		}
		pclose(p);
	}
	s->daemon_kib = rss_kib(dpid);
	s->arena_res_kib = arena_resident_kib(dpid);
	s->proc_kib = rss_kib(0);
	s->t = now_s();
}

static void report(const char *kind, int n, const struct snap *a, const struct snap *b, double secs)
{
	printf("%s %d %ld %ld %ld %ld %.6f\n", kind, n, b->arena_kib - a->arena_kib,
	       b->arena_res_kib - a->arena_res_kib, b->proc_kib - a->proc_kib,
	       b->daemon_kib - a->daemon_kib, secs);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp **qps;
	struct ibv_mr **mrs;
	struct snap a, b;
	struct rlimit rl;
	char *pages;
	int nqp, nmr, n;
	double t0;
	long ps = sysconf(_SC_PAGESIZE);

	if (argc != 4) {
		fprintf(stderr, "usage: %s SOFTRDMA_CLI N_QP N_MR\n", argv[0]);
		return 2;
	}
	cli = argv[1];
	nqp = atoi(argv[2]);
	nmr = atoi(argv[3]);
	/* a backing memfd per MR in the mr-own batch */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "no RDMA device (run under softrdma run --)\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	qps = calloc(nqp, sizeof(*qps));
	mrs = calloc(nmr, sizeof(*mrs));
	pages = mmap(NULL, (size_t)(nmr + 1) * ps, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!cq || !qps || !mrs || pages == MAP_FAILED) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	memset(pages, 1, (size_t)(nmr + 1) * ps);

	/* QPs */
	take(&a);
	t0 = now_s();
	for (int i = 0; i < nqp; i++) {
		struct ibv_qp_init_attr ia = {
		    .send_cq = cq,
		    .recv_cq = cq,
		    .cap = {.max_send_wr = 128,
			    .max_recv_wr = 128,
			    .max_send_sge = 1,
			    .max_recv_sge = 1},
		    .qp_type = IBV_QPT_RC,
		};

		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i]) {
			perror("ibv_create_qp");
			return 1;
		}
	}
	double tq = now_s() - t0;

	take(&b);
	report("qp", nqp, &a, &b, tq);
	for (int i = 0; i < nqp; i++)
		ibv_destroy_qp(qps[i]);

	/* MRs over one shared page */
	take(&a);
	t0 = now_s();
	for (int i = 0; i < nmr; i++) {
		mrs[i] = ibv_reg_mr(pd, pages + (size_t)nmr * ps, ps,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ);
		if (!mrs[i]) {
			perror("ibv_reg_mr (same page)");
			return 1;
		}
	}
	double tm = now_s() - t0;

	take(&b);
	report("mr-same", nmr, &a, &b, tm);
	for (int i = 0; i < nmr; i++)
		ibv_dereg_mr(mrs[i]);

	/* MRs, each over its own page (every other page, so no two adjoin) */
	int nown = nmr / 2;

	take(&a);
	t0 = now_s();
	for (int i = 0; i < nown; i++) {
		mrs[i] = ibv_reg_mr(pd, pages + (size_t)2 * i * ps, ps,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ);
		if (!mrs[i]) {
			perror("ibv_reg_mr (own page)");
			return 1;
		}
	}
	tm = now_s() - t0;
	take(&b);
	report("mr-own", nown, &a, &b, tm);
	for (int i = 0; i < nown; i++)
		ibv_dereg_mr(mrs[i]);

	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
