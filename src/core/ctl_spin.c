/*
 * Bounded, yielding spin before a control-socket sleep (see ctl_spin.h).
 */
#include <sched.h>
#include <time.h>

#include "core/ctl_spin.h"
#include "core/env.h"

#define CTL_SPIN_DEFAULT_US 30
#define CTL_SPIN_MAX_US	    1000

unsigned sr_ctl_spin_us(void)
{
	static int budget = -1;

	return (unsigned)sr_env_num("SOFTRDMA_CTL_SPIN_US", &budget, CTL_SPIN_MAX_US,
				    CTL_SPIN_DEFAULT_US);
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* A yield that gave the CPU away for longer than this met a task that
 * does not sleep (a busy poller, a compute job): it keeps the CPU for its
 * whole slice whenever we yield to it, so for a while we sleep instead. */
#define CTL_SPIN_CONTENDED_NS 200000LL
#define CTL_SPIN_BACKOFF_NS   100000000LL

int sr_ctl_spin_poll(struct pollfd *pfd, nfds_t n)
{
	static _Thread_local long long quiet_until; /* no looking before this */
	unsigned us = sr_ctl_spin_us();
	long long now, end, t;
	int ret;

	ret = poll(pfd, n, 0);
	if (ret || !us)
		return ret;
	now = now_ns();
	if (now < quiet_until)
		return 0;
	end = now + us * 1000LL;
	do {
		/* the peer may be waiting for this CPU */
		sched_yield();
		t = now_ns();
		if (t - now > CTL_SPIN_CONTENDED_NS) {
			quiet_until = t + CTL_SPIN_BACKOFF_NS;
			return poll(pfd, n, 0);
		}
		now = t;
		ret = poll(pfd, n, 0);
	} while (!ret && now < end);
	return ret;
}

int sr_ctl_spin_readable(int sock)
{
	struct pollfd pfd = {.fd = sock, .events = POLLIN};

	return sr_ctl_spin_poll(&pfd, 1) > 0;
}
