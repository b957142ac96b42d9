/*
 * rsockets, keepalive (SO_KEEPALIVE with TCP_KEEPIDLE and TCP_KEEPINTVL).
 * An RC connection with nothing to send notices nothing when its peer's
 * host is gone: no DREQ comes, and a reader blocked in rrecv waits for
 * ever.  As TCP probes an idle connection, a thread of the library,
 * started by the first SO_KEEPALIVE, looks at every connected stream
 * rsocket with it once a second; one that has posted nothing for
 * TCP_KEEPIDLE seconds (then TCP_KEEPINTVL) gets a zero-length RDMA WRITE
 * into its peer's ring.  It takes no receive WQE at the peer and the peer
 * sees nothing; when the peer is gone, its retries run out
 * (RETRY_EXC_ERR), the rsocket fails with ETIMEDOUT and a blocked reader
 * wakes with it (rdma-core's rsockets probes with a control message on
 * the same schedule).  TCP_KEEPCNT is kept but the QP's own retry count
 * decides: one probe is retried until the local ACK timeout runs out.
 */
#include <pthread.h>
#include <time.h>

#include "rdmacm/rsocket_int.h"

static long long mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One rsocket's turn, its lock held. */
static void check(struct rs *rs, long long now)
{
	long long wait_s;

	if (!rs->keepalive || rs->dg || rs->state != RS_CONNECTED || !rs->established ||
	    rs->fatal || rs->peer_gone || !rs->qp)
		return;
	if (rs->tx_count != rs->ka_seen || !rs->ka_since_ns) {
		/* it sent something since the last look: idle from now */
		rs->ka_seen = rs->tx_count;
		rs->ka_since_ns = now;
		rs->ka_probed = false;
		return;
	}
	/* the first probe after keepidle, the next ones keepintvl apart */
	wait_s = rs->ka_probed ? rs->keepintvl : rs->keepidle;
	if (now - rs->ka_since_ns < wait_s * 1000000000LL)
		return;
	if (!rs_post_probe(rs)) {
		rs->ka_seen = rs->tx_count;
		rs->ka_probed = true;
	}
	rs->ka_since_ns = now;
}

static void *keepalive_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec one = {1, 0};
		long long now;
		struct rs *rs;
		int fd = 0;

		nanosleep(&one, NULL);
		now = mono_ns();
		while ((rs = rs_next(&fd))) {
			pthread_mutex_lock(&rs->lock);
			check(rs, now);
			pthread_mutex_unlock(&rs->lock);
			rs_put(rs);
		}
	}
	return NULL;
}

static void start(void)
{
	pthread_attr_t a;
	pthread_t t;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, keepalive_main, NULL))
		RS_DBG("keepalive: no thread; idle connections are not probed");
	pthread_attr_destroy(&a);
}

void rs_keepalive_start(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, start);
}
