/*
 * CM ids and event channels in the daemon: allocation (an id's index is the
 * low 17 bits of its local comm ID, so a MAD finds its id in one lookup),
 * the per-channel event queues with their eventfds, and the port spaces
 * (bind, ephemeral ports).  A channel's eventfd counts events: one write per
 * event queued, one read by the library per event it fetches.  The daemon
 * never reads a client's eventfd (it could block): events it drops or moves
 * at the library's request (DESTROY_ID, MIGRATE) are counted in the old
 * channel first and their number goes back in the reply, and the library
 * takes those counts out, so that each channel polls readable exactly while
 * its own queue holds events (the kernel's ucma_migrate_id).  Events dropped
 * on the daemon's own account leave their counts behind; the library treats
 * a fetch that finds nothing as "read again".
 */
#include <errno.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "daemon/cm/cm.h"
#include "engine/engine.h"

static struct sr_cm *cm_of(struct sr_daemon *d)
{
	return d->cm;
}

static void unsignalled_forget(struct sr_cm_chan *ch);

struct sr_cm_id *sr_cm_id_new(struct sr_daemon *d, struct sr_client *owner, struct sr_cm_chan *chan,
			      uint32_t ps, uint32_t qp_type)
{
	struct sr_cm *cm = cm_of(d);
	struct sr_cm_id *id;
	int64_t idx = sr_idalloc_get(&cm->id_alloc);

	if (idx < 0)
		return NULL;
	id = calloc(1, sizeof(*id));
	if (!id) {
		sr_idalloc_put(&cm->id_alloc, (uint32_t)idx);
		return NULL;
	}
	id->handle = (uint32_t)idx;
	id->comm_id = (sr_random32() << 17) | id->handle;
	if (!(id->comm_id >> 17))
		id->comm_id |= 1u << 17; /* never 0: REJ uses 0 for "no id" */
	id->owner = owner;
	id->chan = chan;
	id->ps = ps;
	id->qp_type = qp_type;
	cm->ids[idx] = id;
	id->next = cm->all;
	if (cm->all)
		cm->all->pprev = &id->next;
	id->pprev = &cm->all;
	cm->all = id;
	return id;
}

/* The two indexes of ids (enum sr_cm_index): doubly linked lists hung
 * from buckets. */
static void index_add(struct sr_cm_id **head, struct sr_cm_id *id, enum sr_cm_index i)
{
	id->inext[i] = *head;
	if (*head)
		(*head)->ipprev[i] = &id->inext[i];
	id->ipprev[i] = head;
	*head = id;
}

static void index_del(struct sr_cm_id *id, enum sr_cm_index i)
{
	if (!id->ipprev[i])
		return;
	*id->ipprev[i] = id->inext[i];
	if (id->inext[i])
		id->inext[i]->ipprev[i] = id->ipprev[i];
	id->ipprev[i] = NULL;
}

void sr_cm_id_free(struct sr_daemon *d, struct sr_cm_id *id)
{
	struct sr_cm *cm = cm_of(d);

	sr_cm_events_drop(d, id);
	sr_cm_timer_set(d, id, 0, 0);
	sr_cm_resolve_cancel(d, id);
	sr_cm_unpark(d, id, false);
	/* children not yet reported lose their listener with it */
	if (id->state == SR_CM_LISTEN) {
		for (struct sr_cm_id *o = cm->all; o; o = o->next)
			if (o->listener == id)
				o->listener = NULL;
	}
	if (id->listener)
		id->listener->pending--;
	index_del(id, SR_CM_BY_PORT);
	index_del(id, SR_CM_BY_REQ);
	*id->pprev = id->next;
	if (id->next)
		id->next->pprev = id->pprev;
	cm->ids[id->handle] = NULL;
	sr_idalloc_put(&cm->id_alloc, id->handle);
	free(id);
}

struct sr_cm_id *sr_cm_port_ids(struct sr_daemon *d, uint16_t port)
{
	return cm_of(d)->by_port[port];
}

void sr_cm_req_index(struct sr_daemon *d, struct sr_cm_id *id)
{
	index_del(id, SR_CM_BY_REQ);
	index_add(&cm_of(d)->by_req[id->remote_comm_id % SR_CM_REQ_BUCKETS], id, SR_CM_BY_REQ);
}

struct sr_cm_id *sr_cm_req_ids(struct sr_daemon *d, uint32_t comm_id)
{
	return cm_of(d)->by_req[comm_id % SR_CM_REQ_BUCKETS];
}

struct sr_cm_id *sr_cm_id_by_comm(struct sr_daemon *d, uint32_t comm_id)
{
	struct sr_cm_id *id = cm_of(d)->ids[comm_id & (SR_CM_MAX_IDS - 1)];

	return id && id->comm_id == comm_id ? id : NULL;
}

struct sr_cm_id *sr_cm_id_owned(struct sr_daemon *d, struct sr_client *c, uint32_t handle)
{
	struct sr_cm_id *id;

	if (handle >= SR_CM_MAX_IDS)
		return NULL;
	id = cm_of(d)->ids[handle];
	return id && id->owner == c ? id : NULL;
}

struct sr_cm_chan *sr_cm_chan_owned(struct sr_daemon *d, struct sr_client *c, uint32_t handle)
{
	struct sr_cm_chan *ch;

	if (handle >= SR_CM_MAX_CHANS)
		return NULL;
	ch = cm_of(d)->chans[handle];
	return ch && ch->owner == c ? ch : NULL;
}

int sr_cm_chan_new(struct sr_daemon *d, struct sr_client *c, int efd, uint32_t *handle)
{
	struct sr_cm *cm = cm_of(d);
	struct sr_cm_chan *ch;
	int64_t idx;

	if (d->fds_held >= d->fds_budget || c->fds_held >= d->fds_budget / 2)
		return -EMFILE;
	idx = sr_idalloc_get(&cm->chan_alloc);
	if (idx < 0)
		return -ENOSPC;
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		sr_idalloc_put(&cm->chan_alloc, (uint32_t)idx);
		return -ENOMEM;
	}
	ch->handle = (uint32_t)idx;
	ch->owner = c;
	ch->efd = efd;
	ch->tail = &ch->head;
	cm->chans[idx] = ch;
	d->fds_held++;
	c->fds_held++;
	*handle = ch->handle;
	return 0;
}

void sr_cm_chan_free(struct sr_daemon *d, struct sr_cm_chan *ch)
{
	struct sr_cm *cm = cm_of(d);

	while (ch->head) {
		struct sr_cm_event *ev = ch->head;

		ch->head = ev->next;
		free(ev);
	}
	unsignalled_forget(ch);
	close(ch->efd);
	d->fds_held--;
	ch->owner->fds_held--;
	cm->chans[ch->handle] = NULL;
	sr_idalloc_put(&cm->chan_alloc, ch->handle);
	free(ch);
}

struct sr_cm_event *sr_cm_event_new(struct sr_cm_id *id, uint32_t type, int32_t status)
{
	struct sr_cm_event *ev = calloc(1, sizeof(*ev));

	if (!ev) {
		sr_warn("cm id %u: no memory for an event: lost", id->handle);
		return NULL;
	}
	ev->w.event = type;
	ev->w.status = status;
	ev->w.id = id->handle;
	return ev;
}

/* Never waits: an eventfd at its maximum count would block the daemon
 * (as daemon_signal in stall.c). */
static void signal_chan(struct sr_cm_chan *ch, uint64_t n)
{
	struct pollfd p = {.fd = ch->efd, .events = POLLOUT};

	if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) && write(ch->efd, &n, sizeof(n)) < 0)
		sr_dbg("cm channel %u: %m", ch->handle);
}

/*
 * Channels with events posted and not yet counted.  The counts are written
 * when the request or tick that posted them is done: after a reply that
 * carries the events along (cm_request.c), so the process is not woken for
 * them before it has them, and one write for several events.
 */
static struct sr_cm_chan *unsignalled;

void sr_cm_event_post(struct sr_cm_id *id, struct sr_cm_event *ev)
{
	struct sr_cm_chan *ch = id->chan;

	if (!ev)
		return;
	ev->next = NULL;
	*ch->tail = ev;
	ch->tail = &ev->next;
	if (!ch->unsignalled++) {
		ch->next_unsignalled = unsignalled;
		unsignalled = ch;
	}
}

void sr_cm_signal_flush(void)
{
	sr_engine_gsi_flush(); /* the MADs this thread sent itself */
	while (unsignalled) {
		struct sr_cm_chan *ch = unsignalled;

		unsignalled = ch->next_unsignalled;
		signal_chan(ch, ch->unsignalled);
		ch->unsignalled = 0;
	}
}

static void unsignalled_forget(struct sr_cm_chan *ch)
{
	if (!ch->unsignalled)
		return;
	for (struct sr_cm_chan **pp = &unsignalled; *pp; pp = &(*pp)->next_unsignalled) {
		if (*pp == ch) {
			*pp = ch->next_unsignalled;
			break;
		}
	}
	ch->unsignalled = 0;
}

int sr_cm_event_get(struct sr_daemon *d, struct sr_cm_chan *ch, struct sr_cm_event_wire *w)
{
	struct sr_cm_event *ev = ch->head;
	struct sr_cm_id *id;

	if (!ev)
		return -EAGAIN;
	ch->head = ev->next;
	if (!ch->head)
		ch->tail = &ch->head;
	*w = ev->w;
	free(ev);
	id = cm_of(d)->ids[w->id];
	if (id) {
		sr_cm_id_info(id, &w->info);
		if (w->event == RDMA_CM_EVENT_CONNECT_REQUEST && id->listener) {
			id->listener->pending--;
			id->listener = NULL; /* reported: the application's now */
		}
	}
	return 0;
}

/* Takes id's events out of ch (those of id itself, and a listener's
 * CONNECT_REQUESTs: the kernel's ucma_move_events moves the events whose
 * context is the id) onto *out, reversed; how many.  Every event of ch is
 * counted in its eventfd first, so that the library, told how many went,
 * can take exactly their counts out of it. */
static uint32_t unlink_events(struct sr_cm_chan *ch, uint32_t handle, struct sr_cm_event **out)
{
	struct sr_cm_event **pp = &ch->head;
	uint32_t n = 0;

	ch->tail = &ch->head;
	while (*pp) {
		struct sr_cm_event *ev = *pp;

		if (ev->w.id == handle ||
		    (ev->w.event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->w.listen_id == handle)) {
			*pp = ev->next;
			ev->next = *out;
			*out = ev;
			n++;
			continue;
		}
		ch->tail = &ev->next;
		pp = &ev->next;
	}
	if (n && ch->unsignalled) {
		uint32_t u = ch->unsignalled;

		unsignalled_forget(ch);
		signal_chan(ch, u);
	}
	return n;
}

uint32_t sr_cm_events_drop(struct sr_daemon *d, struct sr_cm_id *id)
{
	struct sr_cm_event *gone = NULL;
	uint32_t n;

	if (!id->chan)
		return 0;
	n = unlink_events(id->chan, id->handle, &gone);
	while (gone) {
		struct sr_cm_event *ev = gone;
		struct sr_cm_id *child;

		gone = ev->next;
		/* a connection request nobody will see: refused, its id freed */
		if (ev->w.event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->w.id != id->handle &&
		    (child = cm_of(d)->ids[ev->w.id])) {
			sr_cm_abandon(d, child);
			n += sr_cm_events_drop(d, child); /* on the same channel */
			sr_cm_id_free(d, child);
		}
		free(ev);
	}
	return n;
}

uint32_t sr_cm_events_move(struct sr_daemon *d, struct sr_cm_id *id, struct sr_cm_chan *to)
{
	struct sr_cm_event *moved = NULL, *rev = NULL;
	struct sr_cm_chan *from = id->chan;
	uint32_t n = 0;

	if (from)
		n = unlink_events(from, id->handle, &moved);
	while (moved) { /* unlink_events reversed them */
		struct sr_cm_event *ev = moved;

		moved = ev->next;
		ev->next = rev;
		rev = ev;
	}
	id->chan = to;
	/* a listener's requests not yet reported: their new ids are made on
	 * the channel the request is taken from (the library's new_child) */
	for (struct sr_cm_id *o = cm_of(d)->all; o && id->state == SR_CM_LISTEN; o = o->next)
		if (o->listener == id && o->chan == from)
			o->chan = to;
	while (rev) {
		struct sr_cm_event *ev = rev;

		rev = ev->next;
		sr_cm_event_post(id, ev);
	}
	return n;
}

static void put_addr(uint8_t raw[SR_CM_ADDR_LEN], const struct sockaddr_storage *a)
{
	memset(raw, 0, SR_CM_ADDR_LEN);
	if (a->ss_family == AF_INET)
		memcpy(raw, a, sizeof(struct sockaddr_in));
	else if (a->ss_family == AF_INET6)
		memcpy(raw, a, sizeof(struct sockaddr_in6));
}

void sr_cm_id_info(const struct sr_cm_id *id, struct sr_cm_info *info)
{
	memset(info, 0, sizeof(*info));
	put_addr(info->src, &id->src);
	put_addr(info->dst, &id->dst);
	memcpy(info->sgid, id->sgid, 16);
	memcpy(info->dgid, id->dgid, 16);
	info->port_num = id->port_num;
	info->state = id->state;
	info->flags = id->af_ib ? SR_CM_AF_IB : 0;
	info->path_mtu = id->path_mtu;
}

uint16_t sr_cm_port(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)a)->sin_port);
	if (a->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	return 0;
}

static void set_port(struct sockaddr_storage *a, uint16_t port)
{
	if (a->ss_family == AF_INET)
		((struct sockaddr_in *)a)->sin_port = htons(port);
	else if (a->ss_family == AF_INET6)
		((struct sockaddr_in6 *)a)->sin6_port = htons(port);
}

bool sr_cm_addr_any(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (a->ss_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
	return true;
}

static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* Two bindings of one port clash unless both name different addresses
 * (a wildcard takes the port for every address of its family, and an IPv6
 * wildcard without AFONLY for IPv4 too): 0, or the kernel's errno for the
 * clash, EADDRNOTAVAIL when either is a wildcard, EADDRINUSE when both name
 * the same address (KRN cma.c cma_check_port). */
static int port_taken(struct sr_daemon *d, const struct sr_cm_id *self,
		      const struct sockaddr_storage *a, uint16_t port, bool reuse)
{
	struct sr_cm *cm = cm_of(d);

	for (const struct sr_cm_id *o = cm->by_port[port]; o; o = o->inext[SR_CM_BY_PORT]) {
		if (o == self || o->ps != self->ps)
			continue;
		if (reuse && o->reuseaddr && self->reuseaddr && o->state != SR_CM_LISTEN)
			continue;
		if (sr_cm_addr_any(&o->src) || sr_cm_addr_any(a)) {
			if (o->src.ss_family == a->ss_family)
				return -EADDRNOTAVAIL;
			if ((o->src.ss_family == AF_INET6 && sr_cm_addr_any(&o->src) &&
			     !o->afonly) ||
			    (a->ss_family == AF_INET6 && sr_cm_addr_any(a) && !self->afonly))
				return -EADDRNOTAVAIL;
			continue;
		}
		if (same_ip(&o->src, a))
			return -EADDRINUSE;
	}
	return 0;
}

/* A REUSEADDR id that shares its port may not listen on it: the port
 * judged again with REUSEADDR left out, as the kernel's rdma_listen does
 * (cma_bind_listen), 0 or its errno. */
int sr_cm_listen_check(struct sr_daemon *d, const struct sr_cm_id *id)
{
	return id->reuseaddr && id->bound ? port_taken(d, id, &id->src, sr_cm_port(&id->src), false)
					  : 0;
}

/* The network namespace's ip_local_port_range, which the kernel's CM
 * picks ephemeral ports from (cma_alloc_any_port), read again at most once
 * a second: its first port in *lo, how many in *n (32768-60999 if it
 * cannot be read). */
static void local_range(uint32_t *lo, uint32_t *n)
{
	static uint32_t low = 32768, high = 60999;
	static uint64_t read_ms;
	uint64_t now = sr_cm_now_ms();

	if (!read_ms || now - read_ms >= 1000) {
		FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
		unsigned a, b;

		if (f) {
			if (fscanf(f, "%u %u", &a, &b) == 2 && a > 0 && a <= b && b <= 65535) {
				low = a;
				high = b;
			}
			fclose(f);
		}
		read_ms = now;
	}
	*lo = low;
	*n = high - low + 1;
}

int sr_cm_bind(struct sr_daemon *d, struct sr_cm_id *id, const struct sockaddr *addr)
{
	struct sockaddr_storage a;
	uint16_t port;
	uint8_t gid[16];

	memset(&a, 0, sizeof(a));
	if (addr->sa_family == AF_INET)
		memcpy(&a, addr, sizeof(struct sockaddr_in));
	else if (addr->sa_family == AF_INET6)
		memcpy(&a, addr, sizeof(struct sockaddr_in6));
	else
		return -EAFNOSUPPORT;
	if (!sr_cm_addr_any(&a) && sr_cm_gid_of(d, &a, gid) < 0)
		return -EADDRNOTAVAIL;
	port = sr_cm_port(&a);
	if (port) {
		int ret;

		/* a privileged port, as for the kernel's sockets: its CM asks
		 * the caller for CAP_NET_BIND_SERVICE below 1024 (KRN cma.c
		 * cma_use_port, PROT_SOCK; not the sysctl sockets follow) */
		if (port < 1024 &&
		    (!id->owner || !sr_client_capable(id->owner, CAP_NET_BIND_SERVICE)))
			return -EACCES;
		ret = port_taken(d, id, &a, port, true);
		if (ret)
			return ret;
	} else {
		/* an ephemeral port, as the kernel picks one: a random start
		 * in the namespace's local range, then the next free one */
		uint32_t lo, n, start, i;

		local_range(&lo, &n);
		start = sr_random32() % n;

		for (i = 0; i < n; i++) {
			port = (uint16_t)(lo + (start + i) % n);
			if (!port_taken(d, id, &a, port, true))
				break;
		}
		if (i == n)
			return -EADDRNOTAVAIL;
		set_port(&a, port);
	}
	id->src = a;
	id->bound = true;
	/* indexed by its port; the port never changes once bound (resolve
	 * may fill in a wildcard's address, not its port) */
	index_del(id, SR_CM_BY_PORT);
	index_add(&cm_of(d)->by_port[port], id, SR_CM_BY_PORT);
	if (!sr_cm_addr_any(&a)) {
		sr_cm_gid_of(d, &a, id->sgid);
		id->port_num = 1;
	}
	if (id->state == SR_CM_IDLE)
		id->state = SR_CM_ADDR_BOUND;
	return 0;
}
