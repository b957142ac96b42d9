/*
 * A test preload for client/server pairs that make more than one CM
 * connection in turn (perftest's -R: a control connection, then the test's
 * own): a process's k-th successful rdma_listen creates DIR/listen.k, and a
 * process's k-th rdma_connect waits until DIR/listen.k exists, DIR being
 * SR_TEST_CM_ORDER.  Both programs get it; the server never connects and
 * the client never listens.
 *
 * Why: perftest's server creates and binds its test listener only after
 * the control connection, while its client goes straight from that
 * connection to the test connection's REQ (or SIDR REQ for UD).  A REQ that
 * wins gets what the kernel's CM answers: REJ reason 8 (invalid service ID,
 * RDMA_CM_EVENT_REJECTED), or for SIDR a SIDR REP with status 1
 * (RDMA_CM_EVENT_UNREACHABLE); cm_err_no_listener and
 * cm_err_sidr_no_listener check those.  perftest then retries, and the
 * retry of Debian 12's perftest 4.5-0.17 reuses the CM nodes it has just
 * freed and crashes (fixed upstream by perftest commit 3d9d8d0, "Fix
 * crashes and logical flaws in RDMA CM connection retry").  The preload
 * takes that race out of the tests.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

typedef int (*listen_fn)(struct rdma_cm_id *, int);
typedef int (*connect_fn)(struct rdma_cm_id *, struct rdma_conn_param *);

static int listens, connects;

static void mark_path(char *out, size_t len, int k)
{
	snprintf(out, len, "%s/listen.%d", getenv("SR_TEST_CM_ORDER"), k);
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	listen_fn next = (listen_fn)dlsym(RTLD_NEXT, "rdma_listen");
	char path[PATH_MAX];
	FILE *f;
	int ret;

	if (!next)
		abort();
	ret = next(id, backlog);
	if (ret || !getenv("SR_TEST_CM_ORDER"))
		return ret;
	mark_path(path, sizeof(path), __atomic_add_fetch(&listens, 1, __ATOMIC_RELAXED));
	f = fopen(path, "w");
	if (f)
		fclose(f);
	return ret;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	connect_fn next = (connect_fn)dlsym(RTLD_NEXT, "rdma_connect");
	struct timespec step = {0, 5 * 1000 * 1000};
	char path[PATH_MAX];
	int n;

	if (!next)
		abort();
	if (!getenv("SR_TEST_CM_ORDER"))
		return next(id, param);
	mark_path(path, sizeof(path), __atomic_add_fetch(&connects, 1, __ATOMIC_RELAXED));
	for (n = 0; n < 6000 && access(path, F_OK); n++)
		nanosleep(&step, NULL);
	if (n == 6000)
		fprintf(stderr, "cm_order: %s did not appear in 30 s\n", path);
	return next(id, param);
}
