/*
 * `softrdma status`: a text report of the device, port, GID table, every
 * client process and every live resource it holds, like `rdma resource
 * show` and `ibv_devinfo` together.  The daemon formats it so that the CLI
 * stays a thin client.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/qp_state.h"
#include "daemon/daemon.h"
#include "engine/engine.h"

struct sbuf {
	char *p;
	size_t len, cap;
};

static void __attribute__((format(printf, 2, 3))) put(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->p && b->len + n < b->cap) {
			b->len += n;
			return;
		}
		size_t ncap = (b->cap ? b->cap * 2 : 8192) + n;
		char *np = realloc(b->p, ncap);

		if (!np)
			return;
		b->p = np;
		b->cap = ncap;
	}
}

static const char *qp_type_name(uint32_t t)
{
	switch (t) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	default:
		return "?";
	}
}

static void put_gid(struct sbuf *b, const uint8_t *gid)
{
	char s[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, gid, s, sizeof(s));
	put(b, "%s", s);
}

static void put_obj(struct sr_daemon *d, struct sbuf *b, const struct sr_obj *o)
{
	switch (o->kind) {
	case SR_OBJ_PD:
		put(b, "    pd %u\n", o->handle);
		break;
	case SR_OBJ_MR:
		put(b,
		    "    mr lkey 0x%08x rkey 0x%08x pd %u addr 0x%llx len %llu iova 0x%llx access "
		    "0x%x\n",
		    o->handle, o->handle, o->deps[0] ? o->deps[0]->handle : 0,
		    (unsigned long long)o->u.mr.addr, (unsigned long long)o->u.mr.length,
		    (unsigned long long)o->u.mr.iova, o->u.mr.access);
		break;
	case SR_OBJ_MW:
		put(b, "    mw rkey 0x%08x type %u pd %u\n", o->handle, o->u.mw.type,
		    o->deps[0] ? o->deps[0]->handle : 0);
		break;
	case SR_OBJ_CQ: {
		const struct sr_cq_shm *cq = sr_arena_at(d->arena, o->u.shm.off);

		put(b, "    cq %u cqe %u pending %u\n", o->handle, cq->max_cqe,
		    atomic_load_explicit(&cq->prod, memory_order_acquire) -
			atomic_load_explicit(&cq->cons, memory_order_acquire));
		break;
	}
	case SR_OBJ_SRQ: {
		const struct sr_srq_shm *srq = sr_arena_at(d->arena, o->u.shm.off);

		put(b, "    srq 0x%06x max_wr %u posted %u limit %u\n", o->handle, srq->rq.max_wr,
		    atomic_load_explicit(&srq->rq.head, memory_order_acquire) -
			atomic_load_explicit(&srq->rq.tail, memory_order_acquire),
		    srq->rq.limit);
		break;
	}
	case SR_OBJ_QP: {
		const struct sr_qp_shm *qp = sr_arena_at(d->arena, o->u.shm.off);

		put(b,
		    "    qp 0x%06x %s %s pd %u dest_qpn 0x%06x sq_psn 0x%06x rq_psn 0x%06x sq "
		    "%u/%u rq %u/%u\n",
		    o->handle, qp_type_name(qp->type),
		    sr_qp_state_name(atomic_load_explicit(&qp->state, memory_order_acquire)),
		    qp->pd, qp->dest_qpn, qp->sq_psn, qp->rq_psn,
		    atomic_load_explicit(&qp->sq.head, memory_order_acquire) -
			atomic_load_explicit(&qp->sq.tail, memory_order_acquire),
		    qp->sq.max_wr,
		    qp->srqn ? 0
			     : atomic_load_explicit(&qp->rq.head, memory_order_acquire) -
				   atomic_load_explicit(&qp->rq.tail, memory_order_acquire),
		    qp->srqn ? 0 : qp->rq.max_wr);
		if (qp->cnt[SR_CNT_SEND_WQE] || qp->cnt[SR_CNT_RDMA_WRITE] ||
		    qp->cnt[SR_CNT_RDMA_READ] || qp->cnt[SR_CNT_ATOMIC] || qp->cnt[SR_CNT_RNR] ||
		    qp->cnt[SR_CNT_REM_ACCESS_ERR])
			put(b,
			    "      sent: send %llu write %llu read %llu atomic %llu bytes %llu"
			    " rnr %llu rem_access_err %llu direct %llu\n",
			    (unsigned long long)qp->cnt[SR_CNT_SEND_WQE],
			    (unsigned long long)qp->cnt[SR_CNT_RDMA_WRITE],
			    (unsigned long long)qp->cnt[SR_CNT_RDMA_READ],
			    (unsigned long long)qp->cnt[SR_CNT_ATOMIC],
			    (unsigned long long)qp->cnt[SR_CNT_BYTES],
			    (unsigned long long)qp->cnt[SR_CNT_RNR],
			    (unsigned long long)qp->cnt[SR_CNT_REM_ACCESS_ERR],
			    (unsigned long long)qp->cnt[SR_CNT_DIRECT]);
		break;
	}
	case SR_OBJ_FD:
		put(b, "    fd %u (%s)\n", o->handle,
		    o->u.fd.kind == SR_FD_MEM ? "memory" : "event");
		break;
	default:
		break;
	}
}

/* Chunks of destroyed objects waiting for data-path readers, and the
 * threads inside a data-path call right now (epoch slots, layout.h). */
static void put_reclaim(struct sbuf *b, struct sr_daemon *d)
{
	const struct sr_arena_hdr *h = d->arena;
	const struct sr_epoch_slot *tab = sr_arena_epochtab(d->arena);
	uint64_t bytes, min = sr_heap_min_reader(d);
	size_t n = sr_heap_deferred(&bytes);
	unsigned slots = 0;

	for (unsigned i = 0; i < SR_MAX_EPOCH_SLOTS; i++)
		slots += atomic_load_explicit(&tab[i].pid, memory_order_relaxed) != 0;
	put(b, "  reclaim: epoch %llu, %zu retired chunks (%llu KiB) waiting, %u reader slots",
	    (unsigned long long)atomic_load_explicit(&h->epoch, memory_order_relaxed), n,
	    (unsigned long long)(bytes >> 10), slots);
	if (atomic_load_explicit(&h->epoch_unslotted, memory_order_relaxed))
		put(b, ", %u readers without a slot",
		    atomic_load_explicit(&h->epoch_unslotted, memory_order_relaxed));
	put(b, "\n");
	if (min == UINT64_MAX || min == 0)
		return;
	for (unsigned i = 0; i < SR_MAX_EPOCH_SLOTS; i++) {
		uint64_t e = atomic_load_explicit(&tab[i].epoch, memory_order_relaxed);

		if (e)
			put(b, "    inside: pid %u tid %u since epoch %llu\n",
			    atomic_load_explicit(&tab[i].pid, memory_order_relaxed), tab[i].tid,
			    (unsigned long long)e);
	}
}

char *sr_status_text(struct sr_daemon *d, size_t *len)
{
	static const char *const kinds[] = {
	    [SR_OBJ_PD] = "pd", [SR_OBJ_MR] = "mr",   [SR_OBJ_MW] = "mw",
	    [SR_OBJ_CQ] = "cq", [SR_OBJ_SRQ] = "srq", [SR_OBJ_QP] = "qp"};
	const struct sr_arena_hdr *h = d->arena;
	struct sbuf b = {0};
	unsigned nclients = 0;

	put(&b, "device %s  node_guid %016llx  daemon pid %u\n", d->dev.name,
	    (unsigned long long)d->dev.node_guid, (unsigned)getpid());
	put(&b, "  port 1: state ACTIVE  link_layer Ethernet  active_mtu %u  max_mtu %u\n",
	    128u << d->dev.active_mtu, 128u << d->dev.max_mtu);
	for (uint32_t i = 0; i < d->dev.gid_cnt; i++) {
		put(&b, "    GID[%2u] ", i);
		put_gid(&b, d->dev.gids[i].gid);
		put(&b, "  RoCE v2  %s\n", d->dev.gids[i].ifname[0] ? d->dev.gids[i].ifname : "-");
	}
	put(&b, "  arena: %llu MiB mapped, %llu KiB in objects\n",
	    (unsigned long long)(d->arena_size >> 20), (unsigned long long)(sr_heap_used() >> 10));
	put_reclaim(&b, d);
	uint64_t tot[SR_CNT_MAX];

	for (int c = 0; c < SR_CNT_MAX; c++)
		tot[c] = h->counters[c];
	for (struct sr_client *c = d->clients; c; c = c->next)
		for (struct sr_obj *o = c->objs; o; o = o->cnext)
			if (o->kind == SR_OBJ_QP) {
				struct sr_qp_shm *qp = sr_arena_at(d->arena, o->u.shm.off);

				for (int k = 0; k < SR_CNT_MAX; k++)
					tot[k] +=
					    atomic_load_explicit(&qp->cnt[k], memory_order_relaxed);
			}
	put(&b,
	    "  counters: send %llu write %llu read %llu atomic %llu rnr %llu rem_access_err %llu "
	    "bytes %llu\n",
	    (unsigned long long)tot[SR_CNT_SEND_WQE], (unsigned long long)tot[SR_CNT_RDMA_WRITE],
	    (unsigned long long)tot[SR_CNT_RDMA_READ], (unsigned long long)tot[SR_CNT_ATOMIC],
	    (unsigned long long)tot[SR_CNT_RNR], (unsigned long long)tot[SR_CNT_REM_ACCESS_ERR],
	    (unsigned long long)tot[SR_CNT_BYTES]);
	{
		char line[1024];

		sr_engine_status(line, sizeof(line));
		put(&b, "%s", line);
	}
	{
		char *t = sr_ctl_status_text(); /* fault, trace, wire QPs (control.c) */

		if (t) {
			put(&b, "%s", t);
			free(t);
		}
		char *cm = sr_cm_status_text(d);

		if (cm)
			put(&b, "%s", cm);
		free(cm);
	}
	for (struct sr_client *c = d->clients; c; c = c->next) {
		unsigned cnt[SR_OBJ_KINDS] = {0};

		if (c->monitor || c->internal || !c->id)
			continue;
		nclients++;
		for (struct sr_obj *o = c->objs; o; o = o->cnext)
			cnt[o->kind]++;
		put(&b, "process %d (%s) client %u:", (int)c->pid, c->comm, c->id);
		for (int k = SR_OBJ_PD; k <= SR_OBJ_QP; k++)
			put(&b, " %s %u", kinds[k], cnt[k]);
		put(&b, "\n");
		/* oldest first reads naturally: PDs, then MRs, CQs, QPs */
		struct sr_obj *last = c->objs;

		while (last && last->cnext)
			last = last->cnext;
		for (struct sr_obj *o = last; o; o = o->cprev)
			put_obj(d, &b, o);
	}
	put(&b, "%u process(es) with resources\n", nclients);
	*len = b.len;
	return b.p;
}
