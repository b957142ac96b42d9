/*
 * QP1, the General Services Interface, on the RoCEv2 wire: how the
 * daemon's CM agent (src/daemon/cm) exchanges its MADs with the agent of
 * another host.  The daemon's thread hands a MAD and its two GIDs to the
 * engine (sr_engine_gsi_send); the engine thread builds the datagram as it
 * builds every other one (sr_eng_send: UD SEND_ONLY to destination QP 1,
 * DETH with the GSI Q_Key 0x80010000 and source QP 1, the default P_Key),
 * so the fault injector and `softrdma trace` see it.  A datagram that
 * arrives for QP 1 is checked (opcode, P_Key, Q_Key, a 256-byte MAD) and
 * queued for the daemon, whose poll loop wakes on an eventfd and passes it
 * to the CM state machine (sr_engine_gsi_recv), the same one that serves
 * connections within the host.
 *
 * The two queues are the only state the two threads share here: a mutex
 * guards each, taken once per batch; the engine looks at an atomic count
 * first, so an idle CM costs it one load per loop turn.  A full queue drops
 * the MAD, as a full QP1 receive queue would: the CM's retransmission
 * recovers it.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/engine.h"

#define GSI_QLEN 1024
#define GSI_QPN	 1

struct gsi_queue {
	pthread_mutex_t mu;
	struct sr_gsi_mad m[GSI_QLEN];
	unsigned head, n;
	_Atomic unsigned count; /* n, readable without the mutex */
	_Atomic uint64_t dropped;
};

static struct gsi_queue gsi_tx = {.mu = PTHREAD_MUTEX_INITIALIZER};
static struct gsi_queue gsi_rx = {.mu = PTHREAD_MUTEX_INITIALIZER};
static int gsi_rx_fd = -1; /* the daemon polls it: MADs from the wire wait */

static bool push(struct gsi_queue *q, const struct sr_gsi_mad *m)
{
	bool ok;

	pthread_mutex_lock(&q->mu);
	ok = q->n < GSI_QLEN;
	if (ok) {
		q->m[(q->head + q->n) % GSI_QLEN] = *m;
		q->n++;
		atomic_store_explicit(&q->count, q->n, memory_order_relaxed);
	}
	pthread_mutex_unlock(&q->mu);
	if (!ok)
		sr_eng_count(&q->dropped, 1);
	return ok;
}

static unsigned pop(struct gsi_queue *q, struct sr_gsi_mad *out, unsigned max)
{
	unsigned k = 0;

	if (!atomic_load_explicit(&q->count, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&q->mu);
	while (k < max && q->n) {
		out[k++] = q->m[q->head];
		q->head = (q->head + 1) % GSI_QLEN;
		q->n--;
	}
	atomic_store_explicit(&q->count, q->n, memory_order_relaxed);
	pthread_mutex_unlock(&q->mu);
	return k;
}

int sr_eng_gsi_init(void)
{
	if (gsi_rx_fd < 0)
		gsi_rx_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return gsi_rx_fd < 0 ? -errno : 0;
}

/* ---- the engine thread ---- */

void sr_eng_gsi_turn(struct sr_engine *e)
{
	/* read in place when the batch is flushed: kept until the end of
	 * this function, which flushes */
	static struct sr_gsi_mad out[SR_ENG_TX_BATCH];
	static uint32_t psn;
	unsigned n = pop(&gsi_tx, out, SR_ENG_TX_BATCH);
	int sock = e->socks[GSI_QPN % SR_ENG_SOCKS];
	uint16_t sport = e->sports[GSI_QPN % SR_ENG_SOCKS];

	for (unsigned i = 0; i < n; i++) {
		uint8_t hdr[SR_BTH_LEN + SR_DETH_LEN];
		struct iovec iov = {out[i].mad, SR_GSI_MAD_SIZE};

		/* UD packets carry a PSN the receiver ignores (C9-xx: no PSN
		 * checks on UD); one counter for QP1, as a QP's sq_psn */
		sr_bth_put(hdr, SR_TR_UD | SR_IB_SEND_ONLY, false, 0, SR_DEFAULT_PKEY, GSI_QPN,
			   false, psn);
		psn = sr_psn_add(psn, 1);
		sr_deth_put(hdr + SR_BTH_LEN, SR_GSI_QKEY, GSI_QPN);
		sr_eng_send(e, NULL, out[i].sgid, out[i].dgid, sock, sport, hdr, sizeof(hdr), &iov,
			    1, SR_GSI_MAD_SIZE);
	}
	if (n)
		sr_eng_flush_tx(e);
}

void sr_eng_gsi_rx(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		   const uint8_t *dgid)
{
	struct sr_gsi_mad m;
	uint64_t one = 1;

	if (p->bth.opcode != (SR_TR_UD | SR_IB_SEND_ONLY)) {
		sr_eng_count(&e->drops[SR_DROP_TRANSPORT], 1);
		return;
	}
	/* QP1 answers on every P_Key of the port; ours has one, the default */
	if ((p->bth.pkey & 0x7fff) != 0x7fff) {
		sr_eng_count(&e->drops[SR_DROP_PKEY], 1);
		return;
	}
	if (p->qkey != SR_GSI_QKEY) { /* C10-xx: QP1's Q_Key is the GSI key */
		sr_eng_count(&e->drops[SR_DROP_QKEY], 1);
		return;
	}
	if (p->paylen != SR_GSI_MAD_SIZE) { /* a MAD is exactly 256 bytes */
		sr_eng_count(&e->drops[SR_DROP_LENGTH], 1);
		return;
	}
	memcpy(m.sgid, sgid, 16);
	memcpy(m.dgid, dgid, 16);
	memcpy(m.mad, p->payload, SR_GSI_MAD_SIZE);
	if (push(&gsi_rx, &m) && write(gsi_rx_fd, &one, sizeof(one)) < 0)
		sr_dbg("engine: gsi wake: %m");
}

/* ---- the daemon's thread ---- */

int sr_engine_gsi_send(const struct sr_gsi_mad *m)
{
	if (!sr_engine_running())
		return -ENOTSUP;
	if (!push(&gsi_tx, m))
		return -ENOBUFS;
	sr_engine_kick();
	return 0;
}

int sr_engine_gsi_fd(void)
{
	return sr_engine_running() ? gsi_rx_fd : -1;
}

void sr_engine_gsi_clear(void)
{
	uint64_t v;

	if (gsi_rx_fd >= 0 && read(gsi_rx_fd, &v, sizeof(v)) < 0)
		v = 0;
}

unsigned sr_engine_gsi_recv(struct sr_gsi_mad *out, unsigned max)
{
	unsigned n;

	/* the count first: the daemon calls this after every request, and
	 * an empty queue costs it no system call */
	if (gsi_rx_fd < 0)
		return 0;
	n = pop(&gsi_rx, out, max);
	if (n == max && write(gsi_rx_fd, &(uint64_t){1}, sizeof(uint64_t)) < 0) /* more may wait */
		sr_dbg("engine: gsi rewake: %m");
	return n;
}

uint64_t sr_engine_gsi_dropped(void)
{
	return atomic_load_explicit(&gsi_tx.dropped, memory_order_relaxed) +
	       atomic_load_explicit(&gsi_rx.dropped, memory_order_relaxed);
}
