/*
 * Bounded, yielding spin before a control-socket sleep (see ctl_spin.h).
 */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "core/ctl_spin.h"

#define CTL_SPIN_DEFAULT_US 30
#define CTL_SPIN_MAX_US	    1000

unsigned sr_ctl_spin_us(void)
{
	static int budget = -1; /* racing first readers compute the same value */
	int b = __atomic_load_n(&budget, __ATOMIC_RELAXED);

	if (b < 0) {
		const char *e = getenv("SOFTRDMA_CTL_SPIN_US");
		long v = e && *e ? strtol(e, NULL, 10) : CTL_SPIN_DEFAULT_US;

		b = v < 0 ? 0 : v > CTL_SPIN_MAX_US ? CTL_SPIN_MAX_US : (int)v;
		__atomic_store_n(&budget, b, __ATOMIC_RELAXED);
	}
	return (unsigned)b;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int sr_ctl_spin_poll(struct pollfd *pfd, nfds_t n)
{
	unsigned us = sr_ctl_spin_us();
	long long end;
	int ret;

	ret = poll(pfd, n, 0);
	if (ret || !us)
		return ret;
	end = now_ns() + us * 1000LL;
	do {
		/* the peer may be waiting for this CPU */
		sched_yield();
		ret = poll(pfd, n, 0);
	} while (!ret && now_ns() < end);
	return ret;
}

int sr_ctl_spin_readable(int sock)
{
	struct pollfd pfd = {.fd = sock, .events = POLLIN};

	return sr_ctl_spin_poll(&pfd, 1) > 0;
}
