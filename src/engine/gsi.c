/*
 * QP1, the General Services Interface, on the RoCEv2 wire: how the
 * daemon's CM agent (src/daemon/cm) exchanges its MADs with the agent of
 * another host.  A MAD goes out as every other datagram is built (gsi_send,
 * sr_eng_send: UD SEND_ONLY to destination QP 1, DETH with the GSI Q_Key
 * 0x80010000 and source QP 1, the default P_Key); a datagram that arrives
 * for QP 1 is parsed and its ICRC checked as every other one, then checked
 * as the GSI's (opcode, P_Key, Q_Key, a 256-byte MAD) and handed to the CM
 * state machine, the same one that serves connections within the host.
 *
 * Two ways, one code.  As a rule the daemon's thread does both itself, as
 * a posting thread and a receive half do for a process's QPs (datapath/wire_tx.c,
 * datapath/wire_rx.c), on an sr_engine of its own whose counters go into the
 * host's: it sends from a socket of its own, and QP1 has a member of the
 * engine's socket group of its own (wire/udp.c steers destination QP 1 to
 * it), which its poll loop watches.  A MAD then wakes one thread, the peer's
 * CM agent, instead of this host's engine, the peer's engine and then the
 * agent; measured, that is most of a two-host connect (docs/architecture.md,
 * "The CM agent's own QP1").  Receive fault rules that drop, duplicate or
 * corrupt it applies itself.  What must go through the engine thread does:
 * everything while a capture runs or a fault rule holds or sends packets
 * (wire_taps, rx_taps: the thread then queues MADs for the engine, and
 * forwards what it reads to it through the arena, rxfwd), and everything
 * when the kernel gave no socket group.  On that
 * path the engine pops the MADs the daemon queued (gsi_tx) and queues the
 * ones it received (gsi_rx) for the daemon, whose poll loop wakes on an
 * eventfd (sr_engine_gsi_recv).
 *
 * The two queues and the PSN counter are the only state the two threads
 * share here: a mutex guards each queue, taken once per batch; the engine
 * looks at an atomic count first, so an idle CM costs it one load per loop
 * turn.  A full queue drops the MAD, as a full QP1 receive queue would: the
 * CM's retransmission recovers it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/internal.h"
#include "roce/roce.h"

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

static int gsi_sock = -1; /* QP1's own member of the socket group */

#define GSI_READ_BUFS 4

/* The daemon thread's receive half and sender for QP1. */
struct gsi_direct {
	struct sr_engine e; /* first: the receive callback gets &e */
	uint64_t shown_cnt[SR_ENG_CNT_MAX], shown_drops[SR_DROP_MAX];
	sr_gsi_mad_fn fn;
	void *arg;
	bool kick;   /* datagrams queued for the engine */
	int tx_sock; /* sends: a socket of its own (-1: through the engine) */
	uint16_t tx_sport;
	struct sr_roce roce; /* its link: every flow through tx_sock */
	struct sr_roce_rxbuf b[GSI_READ_BUFS];
};

static struct gsi_direct *direct;

int sr_eng_gsi_init(int qp1_sock)
{
	gsi_sock = qp1_sock;
	if (gsi_sock >= 0 && !(direct = calloc(1, sizeof(*direct)))) {
		/* a member nobody reads: out of the group, QP1 goes by hash */
		close(gsi_sock);
		gsi_sock = -1;
	}
	if (gsi_rx_fd < 0)
		gsi_rx_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return gsi_rx_fd < 0 ? -errno : 0;
}

/* UD packets carry a PSN the receiver ignores (no PSN checks on
 * UD); one counter for QP1, as a QP's sq_psn, whichever thread sends */
static _Atomic uint32_t gsi_psn;

/* m as a UD SEND_ONLY to QP 1 into e's transmit batch; its payload, mad,
 * must stay until the batch is flushed. */
static void gsi_send(struct sr_engine *e, const struct sr_gsi_mad *m, const uint8_t *mad)
{
	uint8_t hdr[SR_UD_MAX_HDR_LEN];
	struct iovec iov = {(void *)mad, SR_GSI_MAD_SIZE};
	uint32_t psn = atomic_fetch_add_explicit(&gsi_psn, 1, memory_order_relaxed);
	unsigned hl = sr_ud_hdr_put(hdr, false, false, SR_DEFAULT_PKEY, GSI_QPN, psn & SR_PSN_MASK,
				    SR_GSI_QKEY, GSI_QPN, 0);

	sr_eng_send(e, &(struct sr_link_addr){m->sgid, m->dgid, GSI_QPN}, hdr, hl, &iov, 1,
		    SR_GSI_MAD_SIZE);
}

/* ---- the engine thread ---- */

void sr_eng_gsi_turn(struct sr_engine *e)
{
	/* read in place when the batch is flushed: kept until the end of
	 * this function, which flushes */
	static struct sr_gsi_mad out[SR_ENG_TX_BATCH];
	unsigned n = pop(&gsi_tx, out, SR_ENG_TX_BATCH);

	for (unsigned i = 0; i < n; i++)
		gsi_send(e, &out[i], out[i].mad);
	if (n)
		sr_eng_flush_tx(e);
}

/* The GSI's receive checks on a parsed datagram for QP1 (counted if not). */
static bool gsi_ok(struct sr_engine *e, const struct sr_pkt *p)
{
	if (p->bth.opcode != (SR_TR_UD | SR_IB_SEND_ONLY)) {
		sr_eng_count(&e->drops[SR_DROP_TRANSPORT], 1);
		return false;
	}
	/* QP1 answers on every P_Key of the port; ours has one, the default */
	if ((p->bth.pkey & 0x7fff) != 0x7fff) {
		sr_eng_count(&e->drops[SR_DROP_PKEY], 1);
		return false;
	}
	if (p->qkey != SR_GSI_QKEY) { /* QP1's Q_Key is the GSI key */
		sr_eng_count(&e->drops[SR_DROP_QKEY], 1);
		return false;
	}
	if (p->paylen != SR_GSI_MAD_SIZE) { /* a MAD is exactly 256 bytes */
		sr_eng_count(&e->drops[SR_DROP_LENGTH], 1);
		return false;
	}
	return true;
}

static void mad_of(struct sr_gsi_mad *m, const struct sr_pkt *p, const uint8_t *sgid,
		   const uint8_t *dgid)
{
	memcpy(m->sgid, sgid, 16);
	memcpy(m->dgid, dgid, 16);
	memcpy(m->mad, p->payload, SR_GSI_MAD_SIZE);
}

void sr_eng_gsi_rx(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		   const uint8_t *dgid)
{
	struct sr_gsi_mad m;
	uint64_t one = 1;

	if (!gsi_ok(e, p))
		return;
	mad_of(&m, p, sgid, dgid);
	if (push(&gsi_rx, &m) && write(gsi_rx_fd, &one, sizeof(one)) < 0)
		sr_dbg("engine: gsi wake: %m");
}

/* ---- the daemon's thread ---- */

static bool direct_send(const struct sr_gsi_mad *m);

int sr_engine_gsi_send(const struct sr_gsi_mad *m)
{
	if (!sr_engine_running())
		return -ENOTSUP;
	if (direct_send(m))
		return 1;
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

/* ---- the daemon's thread: QP1's own member, and its own sends ---- */

void sr_engine_gsi_attach(void *arena)
{
	if (!direct || direct->e.arena)
		return;
	sr_eng_init(&direct->e, NULL, arena, true, false);
	sr_roce_init(&direct->roce, &direct->e);
	direct->e.link = &direct->roce.link;
	direct->tx_sock = sr_udp_socket(0, &direct->tx_sport);
	if (direct->tx_sock < 0)
		direct->tx_sock = -1;
	/* its sends leave through its own socket, whatever their flow */
	sr_roce_one_sock(&direct->roce, direct->tx_sock, direct->tx_sport);
}

int sr_engine_gsi_sock(void)
{
	return direct && direct->e.arena ? gsi_sock : -1;
}

static void direct_take(struct sr_engine *e, uint8_t *buf, uint32_t len,
			const struct sr_link_addr *from)
{
	struct gsi_direct *r = (struct gsi_direct *)e;
	struct sr_arena_hdr *h = e->arena;
	uint32_t dqpn = sr_bth_dqpn_raw(buf, len);
	struct sr_gsi_mad m;
	struct sr_pkt p;

	/* a capture to write or packets to hold are the engine's alone; and
	 * what is not for QP1 (the kernel steered it by the same word, so
	 * only a runt) is the engine's to count */
	if (dqpn != GSI_QPN || atomic_load_explicit(&h->rx_taps, memory_order_relaxed)) {
		r->kick |= sr_eng_rxfwd(h, buf, len, from);
		return;
	}
	/* injected faults, as the engine would apply them (drop, dup, corrupt) */
	for (unsigned times = sr_eng_rx_copies(e, buf, len, from); times--;) {
		if (!sr_eng_rx_parse(e, buf, len, from, &p) || !gsi_ok(e, &p))
			return;
		mad_of(&m, &p, from->sgid, from->dgid);
		r->fn(r->arg, &m);
	}
}

bool sr_engine_gsi_read(sr_gsi_mad_fn fn, void *arg)
{
	int n;

	if (sr_engine_gsi_sock() < 0)
		return false;
	direct->fn = fn;
	direct->arg = arg;
	n = sr_roce_rx_read(&direct->roce, gsi_sock, direct->b, GSI_READ_BUFS, direct_take);
	if (direct->kick) {
		direct->kick = false;
		sr_engine_kick();
	}
	sr_eng_counts_publish(&direct->e, direct->shown_cnt, direct->shown_drops);
	return n == GSI_READ_BUFS;
}

/* Sends m from this thread (batched until sr_engine_gsi_flush), as
 * posting threads send UD datagrams (datapath/wire_tx.c): unless a capture or
 * a fault rule on sends is on (wire_taps), which the engine applies. */
static bool direct_send(const struct sr_gsi_mad *m)
{
	struct sr_arena_hdr *h;
	const void *mad;

	if (!direct || !direct->e.arena || direct->tx_sock < 0)
		return false;
	h = direct->e.arena;
	if (atomic_load_explicit(&h->wire_taps, memory_order_relaxed))
		return false;
	/* a copy kept until the flush (m is the caller's) */
	mad = sr_eng_stage(&direct->e, m->mad, SR_GSI_MAD_SIZE);
	gsi_send(&direct->e, m, mad);
	if (mad == m->mad) /* no room for a copy: out before m goes */
		sr_engine_gsi_flush();
	return true;
}

void sr_engine_gsi_flush(void)
{
	if (!direct || !direct->e.link || !direct->e.link->ops->queued(direct->e.link))
		return;
	sr_eng_flush_tx(&direct->e);
	sr_eng_counts_publish(&direct->e, direct->shown_cnt, direct->shown_drops);
}
