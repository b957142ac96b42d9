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
 * again, and after its retries the wait fails (sr_cm_timeout).
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

static void run_timers(struct sr_daemon *d)
{
	uint64_t now = sr_cm_now_ms();

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
	if (cm->timers && sr_cm_now_ms() >= cm->next_timer_scan_ms) {
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
