/*
 * The CM agent's MADs between hosts: the daemon's side of QP1 over RoCEv2.
 * A MAD whose destination GID belongs to another host goes to
 * src/engine/gsi.c, which builds the UD datagram to QP 1 of that GID and,
 * as a rule, sends it from this thread; MADs for QP1 come back here and go
 * to sr_cm_recv, the state machine that also serves connections within
 * this host, whether this thread read them from QP1's own member of the
 * engine's socket group (the rule) or the engine received them (while a
 * capture or a fault rule needs it to see them).  Without an engine on
 * this host (UDP port 4791 held by another daemon, SOFTRDMA_ROCE=0)
 * nothing can leave: the MAD is dropped and counted, and resolution
 * refuses other hosts' addresses (cm_addr.c) so no connection waits on it.
 */
#include <string.h>

#include "daemon/cm/cm.h"
#include "engine/engine.h"

bool sr_cm_wire_up(void)
{
	return sr_engine_running();
}

bool sr_cm_wire_send(struct sr_daemon *d, const struct sr_cm_mad *q)
{
	struct sr_gsi_mad m;
	int ret;

	_Static_assert(SR_GSI_MAD_SIZE == SR_CM_MAD_SIZE, "a MAD is 256 bytes on both sides");
	memcpy(m.sgid, q->sgid, 16);
	memcpy(m.dgid, q->dgid, 16);
	memcpy(m.mad, q->bytes, SR_GSI_MAD_SIZE);
	ret = sr_engine_gsi_send(&m);
	if (ret < 0)
		return false;
	d->cm->mads_wire_tx++;
	d->cm->mads_wire_tx_own += ret == 1;
	return true;
}

int sr_cm_wire_fd(void)
{
	return sr_engine_gsi_fd();
}

void sr_cm_wire_clear(void)
{
	sr_engine_gsi_clear();
}

/* QP1's member held datagrams at the last poll: read it at the next
 * sr_cm_wire_poll, and until a read takes less than a batch */
static bool sock_ready;

int sr_cm_wire_sock(void)
{
	return sr_engine_gsi_sock();
}

void sr_cm_wire_sock_ready(void)
{
	sock_ready = true;
}

static void wire_mad(void *arg, const struct sr_gsi_mad *m)
{
	struct sr_daemon *d = arg;

	d->cm->mads_wire_rx++;
	d->cm->mads_wire_rx_own++;
	sr_cm_recv(d, m->sgid, m->dgid, m->mad, SR_GSI_MAD_SIZE);
}

void sr_cm_wire_poll(struct sr_daemon *d)
{
	struct sr_gsi_mad in[32];
	unsigned n;

	if (sock_ready)
		sock_ready = sr_engine_gsi_read(wire_mad, d);
	if (sr_engine_gsi_fd() < 0)
		return;
	/* a bounded number per call: the poll loop comes back at once when
	 * the fd stays readable */
	n = sr_engine_gsi_recv(in, 32);
	for (unsigned i = 0; i < n; i++) {
		/* the engine has checked the datagram; the MAD's own checks
		 * are the parser's, as for a MAD from this host */
		d->cm->mads_wire_rx++;
		sr_cm_recv(d, in[i].sgid, in[i].dgid, in[i].mad, SR_GSI_MAD_SIZE);
	}
}
