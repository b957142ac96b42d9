/*
 * What address resolution learnt from the kernel, per destination: the
 * source address routing picks (cm_addr.c) and whether the next hop's link
 * address is known (cm_neigh.c).  cmtime resolves a thousand ids towards
 * one address at once; asking the kernel each time costs a socket and two
 * rtnetlink exchanges per id.  The answers stay valid until the kernel's
 * tables change, and every such change (a link, address, route or
 * neighbour added, removed or changing state) is announced on rtnetlink's
 * multicast groups: a socket subscribed to them is drained before a
 * look-up (at most once a millisecond), and anything on it (or an
 * overrun) empties the cache.  Only
 * successes are kept, so a failure (no route, no ARP answer) is always
 * asked again.  Without the socket nothing is cached.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/cm/cm.h"

#define CACHE_SIZE 64

struct route_entry {
	struct sockaddr_storage dst, via;
	bool used, via_ok, neigh_ok;
};

static struct route_entry cache[CACHE_SIZE];
static unsigned cache_next;
static int watch_fd = -2; /* -2: not opened yet; -1: cannot */

static void cache_flush(void)
{
	memset(cache, 0, sizeof(cache));
	cache_next = 0;
}

static int watch_open(void)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
				 .nl_groups = RTMGRP_LINK | RTMGRP_NEIGH | RTMGRP_IPV4_IFADDR |
					      RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR |
					      RTMGRP_IPV6_ROUTE};
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

	if (s < 0)
		return -1;
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa))) {
		close(s);
		return -1;
	}
	return s;
}

static uint64_t last_look_ms;

/* True when the cache may be used: what changed since is dropped first. */
static bool cache_fresh(void)
{
	char buf[4096];
	bool changed = false;
	ssize_t n;

	if (watch_fd == -2)
		watch_fd = watch_open();
	if (watch_fd < 0)
		return false;
	/* once a millisecond: a burst of resolutions (1,000 connections set
	 * up at once) costs no recv each; a change reaches the cache within a
	 * millisecond of its notification */
	if (sr_cm_now_ms() == last_look_ms)
		return true;
	last_look_ms = sr_cm_now_ms();
	while ((n = recv(watch_fd, buf, sizeof(buf), MSG_DONTWAIT)) != 0) {
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		changed = true; /* a notification, or ENOBUFS: some were lost */
		if (n < 0 && errno != ENOBUFS)
			break;
	}
	if (changed)
		cache_flush();
	return true;
}

static bool same_dst(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, 16) &&
		       ((const struct sockaddr_in6 *)a)->sin6_scope_id ==
			   ((const struct sockaddr_in6 *)b)->sin6_scope_id;
	return false;
}

static struct route_entry *find(const struct sockaddr_storage *dst)
{
	for (unsigned i = 0; i < CACHE_SIZE; i++)
		if (cache[i].used && same_dst(&cache[i].dst, dst))
			return &cache[i];
	return NULL;
}

/* dst's entry, made (replacing the oldest) if there is none. */
static struct route_entry *entry_for(const struct sockaddr_storage *dst)
{
	struct route_entry *e = find(dst);

	if (e)
		return e;
	e = &cache[cache_next];
	cache_next = (cache_next + 1) % CACHE_SIZE;
	memset(e, 0, sizeof(*e));
	e->dst = *dst;
	e->used = true;
	return e;
}

bool sr_cm_route_cached_src(const struct sockaddr_storage *dst, struct sockaddr_storage *via)
{
	struct route_entry *e;

	if (!cache_fresh())
		return false;
	e = find(dst);
	if (!e || !e->via_ok)
		return false;
	*via = e->via;
	return true;
}

void sr_cm_route_keep_src(const struct sockaddr_storage *dst, const struct sockaddr_storage *via)
{
	struct route_entry *e;

	if (!cache_fresh())
		return;
	e = entry_for(dst);
	e->via = *via;
	e->via_ok = true;
}

bool sr_cm_route_cached_neigh(const struct sockaddr_storage *dst)
{
	struct route_entry *e;

	if (!cache_fresh())
		return false;
	e = find(dst);
	return e && e->neigh_ok;
}

void sr_cm_route_keep_neigh(const struct sockaddr_storage *dst)
{
	if (cache_fresh())
		entry_for(dst)->neigh_ok = true;
}
