/*
 * rsockets, waiting: rpoll over any mix of rsockets and normal fds (what
 * librspreload hands it), rselect on top of it, and the blocking wait of
 * one rsocket.  An rsocket is ready from its own state (rs_revents); to
 * sleep, its CQ is armed and its two fds are polled with the normal ones:
 * the completion channel (a completion arrived) and the CM event channel,
 * which is the socket number itself (a connection event arrived).  A short
 * spin on the CQ comes first, as a completion on the same host usually
 * follows within microseconds.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include "rdmacm/rsocket_int.h"

#define RS_SPIN_NS  20000
#define RS_SLICE_MS 20

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void drain_cq_events(struct rs *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	while (rs->cch && !ibv_get_cq_event(rs->cch, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
}

/* Arms the CQ; true if something completed meanwhile (no need to sleep). */
static bool arm(struct rs *rs)
{
	if (!rs->cq)
		return false;
	ibv_req_notify_cq(rs->cq, 0);
	return rs_cq_progress(rs);
}

void rs_wait(struct rs *rs, int timeout_ms)
{
	long long end = now_ns() + RS_SPIN_NS;
	struct pollfd p[2];
	int n = 0, slice;

	while (rs->cq && now_ns() < end) {
		if (rs_cq_progress(rs))
			return;
		pthread_mutex_unlock(&rs->lock); /* let other threads of rs in */
		pthread_mutex_lock(&rs->lock);
	}
	slice = timeout_ms < 0 || timeout_ms > RS_SLICE_MS ? RS_SLICE_MS : timeout_ms;
	if (rs->polling) {
		/* another thread of ours sleeps on the fds: it wakes us */
		struct timespec t;

		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += slice * 1000000L;
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		rs->waiters++;
		pthread_cond_timedwait(&rs->cond, &rs->lock, &t);
		rs->waiters--;
		return;
	}
	if (arm(rs))
		return;
	p[n].fd = rs->fd;
	p[n++].events = POLLIN;
	if (rs->cch) {
		p[n].fd = rs->cch->fd;
		p[n++].events = POLLIN;
	}
	rs->polling = true;
	pthread_mutex_unlock(&rs->lock);
	/* a slice, not for ever: an rpoll of another thread may take the
	 * completion event meant for us */
	poll(p, (nfds_t)n, slice);
	pthread_mutex_lock(&rs->lock);
	rs->polling = false;
	if (n > 1 && p[1].revents)
		drain_cq_events(rs);
	rs_cm_progress(rs);
	rs_cq_progress(rs);
	pthread_cond_broadcast(&rs->cond);
}

/* One pass: every entry's revents now; the count of ready entries. */
static int check_all(struct pollfd *fds, nfds_t nfds, struct rs **rss, struct pollfd *tmp,
		     int *nnormal)
{
	nfds_t i;
	int cnt = 0, k = 0;

	for (i = 0; i < nfds; i++) {
		if (rss[i]) {
			pthread_mutex_lock(&rss[i]->lock);
			fds[i].revents = rs_revents(rss[i], fds[i].events);
			pthread_mutex_unlock(&rss[i]->lock);
		} else {
			tmp[k].fd = fds[i].fd;
			tmp[k].events = fds[i].events;
			tmp[k++].revents = 0;
		}
	}
	if (k && poll(tmp, (nfds_t)k, 0) < 0)
		return -1;
	k = 0;
	for (i = 0; i < nfds; i++) {
		if (!rss[i])
			fds[i].revents = tmp[k++].revents;
		if (fds[i].revents)
			cnt++;
	}
	*nnormal = k;
	return cnt;
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct rs *small_rss[16], **rss = small_rss;
	struct pollfd small_tmp[48], *tmp = small_tmp, *pf;
	long long start = now_ns(), deadline = timeout >= 0 ? start + timeout * 1000000LL : -1;
	nfds_t i;
	int cnt = 0, nrs = 0, nnormal, k;

	if (nfds > 16) {
		rss = calloc(nfds, sizeof(*rss));
		if (!rss)
			return rs_set_errno(ENOMEM);
	}
	for (i = 0; i < nfds; i++) {
		rss[i] = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;
		nrs += rss[i] != NULL;
	}
	if (!nrs) {
		if (rss != small_rss)
			free(rss);
		return poll(fds, nfds, timeout);
	}
	/* room for the normal fds, then two fds per rsocket */
	if (nfds + (nfds_t)nrs > sizeof(small_tmp) / sizeof(small_tmp[0])) {
		tmp = calloc(nfds + (nfds_t)nrs, sizeof(*tmp));
		if (!tmp) {
			cnt = rs_set_errno(ENOMEM);
			goto out;
		}
	}
	for (;;) {
		long long now;
		int wait_ms, ret;

		cnt = check_all(fds, nfds, rss, tmp, &nnormal);
		if (cnt)
			break;
		now = now_ns();
		if (timeout == 0 || (deadline >= 0 && now >= deadline))
			break;
		if (now - start < RS_SPIN_NS)
			continue;
		/* sleep: arm every CQ, then poll all the fds together */
		k = 0;
		for (i = 0; i < nfds; i++) {
			if (!rss[i]) {
				tmp[k].fd = fds[i].fd;
				tmp[k++].events = fds[i].events;
			}
		}
		pf = tmp + k;
		for (i = 0; i < nfds; i++) {
			struct rs *rs = rss[i];
			bool ready;

			if (!rs)
				continue;
			pthread_mutex_lock(&rs->lock);
			ready = arm(rs) || rs_revents(rs, fds[i].events);
			tmp[k].fd = rs->fd;
			tmp[k++].events = POLLIN;
			tmp[k].fd = rs->cch ? rs->cch->fd : -1;
			tmp[k++].events = POLLIN;
			pthread_mutex_unlock(&rs->lock);
			if (ready)
				goto again;
		}
		wait_ms = deadline < 0 ? -1 : (int)((deadline - now + 999999) / 1000000);
		ret = poll(tmp, (nfds_t)k, wait_ms);
		if (ret < 0) {
			cnt = -1;
			break;
		}
		for (i = 0; i < nfds; i++) {
			struct rs *rs = rss[i];

			if (!rs)
				continue;
			if (pf[1].revents) {
				pthread_mutex_lock(&rs->lock);
				drain_cq_events(rs);
				pthread_mutex_unlock(&rs->lock);
			}
			pf += 2;
		}
	again:;
	}
	if (cnt <= 0)
		for (i = 0; i < nfds; i++)
			fds[i].revents = cnt < 0 ? fds[i].revents : 0;
out:
	for (i = 0; i < nfds; i++)
		if (rss[i])
			rs_put(rss[i]);
	if (rss != small_rss)
		free(rss);
	if (tmp != small_tmp)
		free(tmp);
	return cnt;
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *fds;
	int fd, n = 0, i, ret, cnt = 0, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_set_errno(EINVAL);
	fds = calloc((size_t)nfds + 1, sizeof(*fds));
	if (!fds)
		return rs_set_errno(ENOMEM);
	for (fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (ev || (exceptfds && FD_ISSET(fd, exceptfds))) {
			fds[n].fd = fd;
			fds[n++].events = ev;
		}
	}
	to = timeout ? (int)(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
	ret = rpoll(fds, (nfds_t)n, to);
	if (ret < 0) {
		free(fds);
		return ret;
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	for (i = 0; i < n; i++) {
		short r = fds[i].revents;

		if (readfds && (r & (POLLIN | POLLHUP | POLLERR)) && (fds[i].events & POLLIN)) {
			FD_SET(fds[i].fd, readfds);
			cnt++;
		}
		if (writefds && (r & (POLLOUT | POLLERR)) && (fds[i].events & POLLOUT)) {
			FD_SET(fds[i].fd, writefds);
			cnt++;
		}
		if (exceptfds && (r & POLLPRI)) {
			FD_SET(fds[i].fd, exceptfds);
			cnt++;
		}
	}
	if (timeout && !ret) {
		timeout->tv_sec = 0;
		timeout->tv_usec = 0;
	}
	free(fds);
	return cnt;
}
