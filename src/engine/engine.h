/*
 * The RoCEv2 engine: the thread of softrdmad that runs the transport
 * (src/transport) for the host's QPs whose peer is on another host, where
 * no application thread does: it answers the doorbell of posting
 * processes, reads the UDP socket group's members nobody is reading,
 * keeps the timers, holds and captures packets (fault injection, trace),
 * and carries QP1's MADs for the daemon's CM agent.  This is what the
 * daemon starts and asks of it; the engine thread's own code is engine.c,
 * mcast.c, gsi.c, fault.c and ctl.c.
 */
#ifndef SR_ENGINE_ENGINE_H
#define SR_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sr_engine;
struct sr_link_addr;

/* QP1 (the GSI) on the wire, for the daemon's CM agent (gsi.c). */
#define SR_GSI_MAD_SIZE 256
struct sr_gsi_mad {
	uint8_t sgid[16], dgid[16]; /* ours and the peer's (sending), or the other way */
	uint8_t mad[SR_GSI_MAD_SIZE];
};
/* Daemon thread: sends a MAD (1: from this thread, see below) or queues it
 * for the engine (0; -ENOTSUP: no engine on this host, -ENOBUFS: queue
 * full); the fd that becomes readable when MADs came
 * (-1: no engine), cleared by sr_engine_gsi_clear once a poll found it
 * readable (before the MADs are taken, so none is left behind); takes up
 * to max of them (the fd made readable again if more wait); MADs lost to
 * full queues. */
int sr_engine_gsi_send(const struct sr_gsi_mad *m);
int sr_engine_gsi_fd(void);
void sr_engine_gsi_clear(void);
unsigned sr_engine_gsi_recv(struct sr_gsi_mad *out, unsigned max);
uint64_t sr_engine_gsi_dropped(void);
/* Daemon thread: QP1's own member of the socket group, which it reads
 * itself, and MADs it sends itself.  sr_engine_gsi_attach sets both up on
 * the daemon's mapping of the arena, once the engine started with such a
 * member (nothing otherwise: everything then goes through the engine).
 * sr_engine_gsi_sock: the member (-1: none).  sr_engine_gsi_read reads
 * what it holds (up to a batch) and hands each MAD that passes the
 * engine's checks to fn; datagrams the engine must see (a capture, held
 * faults: rx_taps) go to the engine instead, which queues them for
 * sr_engine_gsi_recv.  Returns whether it read a full batch (more may
 * wait).  sr_engine_gsi_send sends from this thread while nothing is to be
 * captured or held on the way out (wire_taps), batched until
 * sr_engine_gsi_flush, which the CM calls when a request or tick is done. */
typedef void (*sr_gsi_mad_fn)(void *arg, const struct sr_gsi_mad *m);
void sr_engine_gsi_attach(void *arena);
int sr_engine_gsi_sock(void);
bool sr_engine_gsi_read(sr_gsi_mad_fn fn, void *arg);
void sr_engine_gsi_flush(void);

/* The daemon's side: starts the engine thread (its context connected to
 * the daemon through `sock`), or returns -errno. */
int sr_engine_start(int sock);
/* How many members the engine's receive socket group has (0: no engine
 * socket; 1: no group, member 0 takes everything); the daemon gives a
 * process member m > 0 (its QPNs say so, core/idalloc.h), and
 * sr_engine_rx_fd(m) is the socket its receive halves read
 * (SR_OP_WIRE_RX), or -1. */
unsigned sr_engine_rx_members(void);
/* What a QPN of member m's process carries in its member bits. */
unsigned sr_engine_rx_qpn_bits(unsigned member);
int sr_engine_rx_fd(unsigned member);
/* Appends the engine's port counters to buf as one line (none: nothing). */
void sr_engine_status(char *buf, size_t len);
/* The first QP of this host joined MGID (join) or the last one left it:
 * the engine's socket follows; 0 or -errno (no engine: 0). */
int sr_engine_mcast(const uint8_t *mgid, bool join);
/* Stops it (at daemon exit). */
void sr_engine_stop(void);
/* True once the engine thread runs its loop; sr_engine_kick wakes it. */
bool sr_engine_running(void);
/*
 * An engine with no thread and no socket, attached to a daemon through
 * sock (a client connection, not yet said hello on): it maps the arena and
 * finds QPs like the real one, and what it sends goes nowhere (every
 * socket is -1).  For the receive-path fuzzer (tests/fuzz/fuzz_rx.c), which
 * hands it packets with sr_eng_rx_one inside an epoch section.
 */
struct sr_engine *sr_engine_attach(int sock);
void sr_engine_kick(void);
/* The daemon destroyed a connected QP whose peer is on another host: its
 * responder had received up to psn (msn messages); the engine answers a
 * repeat of it for a while (resp.c, sr_eng_resp_gone).  Dropped if the
 * engine is far behind. */
struct sr_eng_gone {
	uint32_t qpn, dest_qpn, psn, msn;
	uint8_t sgid[16], dgid[16];
};
void sr_engine_gone(const struct sr_eng_gone *g);

/* The fuzzer's engine (sr_engine_attach): one received datagram (from its
 * BTH to its ICRC), after the fault tap, as the engine thread takes it from
 * its link. */
void sr_eng_rx_one(struct sr_engine *e, const uint8_t *buf, uint32_t len,
		   const struct sr_link_addr *from);

#endif
