/*
 * Where the CM agent's MADs go.  A MAD is queued with its source and
 * destination GIDs; sr_cm_mad_run hands each one, as bytes, to the agent
 * that owns the destination GID.  On one host that is this daemon: the
 * bytes go back through sr_cm_recv's parser, exactly as if they had come
 * off the wire.  A destination GID this host does not own goes out on QP1
 * over RoCEv2 (cm_wire.c); MADs from other hosts come in through the same
 * parser.  Without an engine such MADs are dropped and counted (the
 * sender's retransmission timer then runs out).
 *
 * Timers: an id waiting for an answer (REQ, REP, DREQ, SIDR_REQ) keeps the
 * MAD it sent and a deadline; when the deadline passes the MAD is sent
 * again, and after its retries the wait fails (sr_cm_timeout).  A DREQ
 * whose id goes away before the DREP (rping destroys its id right after
 * rdma_disconnect) keeps its retries on a list of its own: across a lossy
 * wire the peer would otherwise never hear of the disconnection (the
 * kernel's CM cancels it with the id; the peer then waits for ever).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "daemon/cm/cm.h"

uint64_t sr_cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sr_cm_mad_queue(struct sr_daemon *d, const uint8_t sgid[16], const uint8_t dgid[16],
		     const uint8_t bytes[SR_CM_MAD_SIZE])
{
	struct sr_cm *cm = d->cm;
	struct sr_cm_mad *q = malloc(sizeof(*q));

	if (!q) { /* lost, as on a wire: the sender's timer covers it */
		cm->mads_dropped++;
		return;
	}
	q->next = NULL;
	memcpy(q->sgid, sgid, 16);
	memcpy(q->dgid, dgid, 16);
	memcpy(q->bytes, bytes, SR_CM_MAD_SIZE);
	*cm->q_tail = q;
	cm->q_tail = &q->next;
	cm->mads_sent++;
}

void sr_cm_timer_set(struct sr_daemon *d, struct sr_cm_id *id, uint32_t timeout_ms, int retries)
{
	if (id->deadline_ms)
		d->cm->timers--;
	id->deadline_ms = 0;
	id->timeout_ms = timeout_ms;
	id->retries = retries;
	if (timeout_ms) {
		id->deadline_ms = sr_cm_now_ms() + timeout_ms;
		d->cm->timers++;
	}
}

static bool gid_local(struct sr_daemon *d, const uint8_t gid[16])
{
	for (uint32_t i = 0; i < d->dev.gid_cnt; i++)
		if (!memcmp(d->dev.gids[i].gid, gid, 16))
			return true;
	return false;
}

void sr_cm_linger(struct sr_daemon *d, const struct sr_cm_id *id)
{
	struct sr_cm_linger *l;

	if (!id->deadline_ms || id->retries <= 0 || d->cm->nlinger >= SR_CM_MAX_IDS)
		return;
	l = malloc(sizeof(*l));
	if (!l)
		return; /* the peer learns it from its QP, as without a DREQ */
	l->comm_id = id->comm_id;
	memcpy(l->sgid, id->sgid, 16);
	memcpy(l->dgid, id->dgid, 16);
	memcpy(l->mad, id->mad, SR_CM_MAD_SIZE);
	l->deadline_ms = id->deadline_ms;
	l->timeout_ms = id->timeout_ms;
	l->retries = id->retries;
	l->next = d->cm->lingering;
	d->cm->lingering = l;
	d->cm->nlinger++;
}

void sr_cm_linger_done(struct sr_daemon *d, uint32_t comm_id)
{
	for (struct sr_cm_linger **pp = &d->cm->lingering; *pp; pp = &(*pp)->next) {
		struct sr_cm_linger *l = *pp;

		if (l->comm_id == comm_id) {
			*pp = l->next;
			free(l);
			d->cm->nlinger--;
			return;
		}
	}
}

void sr_cm_linger_fini(struct sr_daemon *d)
{
	while (d->cm->lingering) {
		struct sr_cm_linger *l = d->cm->lingering;

		d->cm->lingering = l->next;
		free(l);
	}
	d->cm->nlinger = 0;
}

static void run_lingering(struct sr_daemon *d, uint64_t now)
{
	struct sr_cm_linger **pp = &d->cm->lingering;

	while (*pp) {
		struct sr_cm_linger *l = *pp;

		if (now >= l->deadline_ms) {
			if (l->retries-- <= 0) {
				*pp = l->next;
				free(l);
				d->cm->nlinger--;
				continue;
			}
			l->deadline_ms = now + l->timeout_ms;
			sr_cm_mad_queue(d, l->sgid, l->dgid, l->mad);
		}
		pp = &l->next;
	}
}

static void run_timers(struct sr_daemon *d)
{
	uint64_t now = sr_cm_now_ms();

	run_lingering(d, now);
	for (struct sr_cm_id *id = d->cm->all, *next; id; id = next) {
		next = id->next;
		if (!id->deadline_ms || now < id->deadline_ms)
			continue;
		if (id->retries-- > 0) {
			id->deadline_ms = now + id->timeout_ms;
			sr_cm_mad_queue(d, id->sgid, id->dgid, id->mad);
			continue;
		}
		sr_cm_timer_set(d, id, 0, 0);
		sr_cm_timeout(d, id);
	}
}

bool sr_cm_mad_run(struct sr_daemon *d)
{
	struct sr_cm *cm = d->cm;
	bool more = false;

	sr_cm_wire_poll(d);
	if (cm->resolving)
		more = sr_cm_resolve_poll(d);
	/* deadlines are seconds apart: a scan every 50 ms at most, not one
	 * per request (thousands of connections in flight would make each
	 * request a walk over every id) */
	if ((cm->timers || cm->lingering) && sr_cm_now_ms() >= cm->next_timer_scan_ms) {
		run_timers(d);
		cm->next_timer_scan_ms = sr_cm_now_ms() + 50;
	}
	/* MADs queued while delivering are delivered in the same pass */
	while (cm->q_head) {
		struct sr_cm_mad *q = cm->q_head;

		cm->q_head = q->next;
		if (!cm->q_head)
			cm->q_tail = &cm->q_head;
		if (gid_local(d, q->dgid)) {
			sr_dbg("cm: %s to self",
			       sr_cm_attr_name((uint16_t)(q->bytes[16] << 8 | q->bytes[17])));
			sr_cm_recv(d, q->sgid, q->dgid, q->bytes, SR_CM_MAD_SIZE);
		} else if (!sr_cm_wire_send(d, q)) {
			cm->mads_dropped++; /* no engine, or its queue is full */
		}
		free(q);
	}
	/* timers count in seconds: the poll loop's 100 ms round is fine for them */
	return cm->q_head != NULL || more;
}
