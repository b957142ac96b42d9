/*
 * The transport: the part of the HCA that turns a QP's work requests into
 * packets and packets into memory accesses, receive completions and
 * acknowledgements, for QPs whose peer is on another host.  After Linux
 * rxe's structure: a requester (req.c: send WQEs to packets, PSNs,
 * segmentation at the path MTU, retransmission), a completer
 * (sr_eng_comp_rx, in req.c: ACKs and responses to completions, timers)
 * and a responder (resp.c: PSN checks, execution, ACK/NAK, READ
 * responses, the atomic replay cache), driven by one opcode table
 * (wire/opcode.c).  What a request does at its target is the same-host
 * executor's code (shm/responder.h).
 *
 * Who runs it: any thread that maps the arena.  A struct sr_engine is one
 * thread's instance (its lists, its send batch, its counters; built by
 * sr_eng_init); a QP's transport state (struct sr_eng_qp) is in the arena
 * under the QP's wtx_lock, so the daemon's engine thread (src/engine), a
 * posting thread (datapath/wire_tx.c) and a polling thread's receive half
 * (datapath/wire_rx.c) each take a QP's turn in it.  Packets go out and
 * come in through a link (link.h), which knows what carries them: today
 * RoCEv2 over kernel UDP sockets (src/roce).  The
 * reasons, and the measurements behind them, are in docs/architecture.md
 * ("The transport") and docs/decisions.md.
 */
#ifndef SR_TRANSPORT_TRANSPORT_H
#define SR_TRANSPORT_TRANSPORT_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <softrdma/layout.h>

#include "core/idalloc.h"
#include "transport/fault.h"
#include "transport/rate.h"
#include "shm/responder.h"
#include "transport/link.h"
#include "wire/bth.h"

struct sr_devctx;
struct sr_fault;
struct sr_pcap;

/* Requester limits, as rxe's (rxe_param.h) unless said otherwise. */
#define SR_ENG_WINDOW	    256		   /* unacknowledged packets per QP ... */
#define SR_ENG_WINDOW_MAX   512		   /* ... up to this many while no loss is seen */
#define SR_ENG_ACKREQ_EVERY 32		   /* AckReq at least every this many packets */
#define SR_ENG_READ_CHUNK   64		   /* response packets one READ request asks for (req.c) */
#define SR_ENG_OOO	    1024	   /* PSNs past a gap a responder may place (resp.c) */
#define SR_ENG_AHEAD	    16		   /* ... in this many WRITEs after the one in progress */
#define SR_ENG_PROBE_NS	    2000000	   /* first tail-loss probe after this (req.c) */
#define SR_ENG_REC_MIN_NS   100000	   /* a packet resent alone: its timer's floor (req.c) */
#define SR_ENG_REPLAY	    SR_MAX_RD_ATOM /* atomic replay cache: max_dest_rd_atomic of the device */
#define SR_ENG_TX_BATCH	    SR_LINK_BATCH /* packets per flush (link.h) */
#define SR_ENG_STAGE_MAX    4096	  /* the largest path MTU's payload */
/* The longest message a posting thread sends itself (datapath/wire_tx.c),
 * in packets of the QP's path MTU (64 KiB at 4096): longer ones are the
 * engine's, which batches a stream better than one system call per
 * message does. */
#define SR_WIRE_DIRECT_PKTS 16
/* While posting threads may send a QP's WQEs, the engine takes in what they
 * sent (and arms its timers) at least this often, and withdraws the grant
 * after SR_ENG_GRANT_IDLE_NS without anything sent or acknowledged. */
#define SR_ENG_GRANT_TICK_NS  1000000
#define SR_ENG_GRANT_IDLE_NS  100000000
#define SR_ENG_GRANT_QUIET_NS 10000000
/* A responder's ACK waits for the QP's own next request (resp.c ack_defer)
 * only if a posting thread sent one of its WQEs within this long (a
 * ping-pong), and at most SR_ENG_DACK_NS (SOFTRDMA_ACK_DEFER_US, 0: never) */
#define SR_ENG_DACK_RECENT_NS 1000000
#define SR_ENG_DACK_NS	      50000
#define SR_ENG_DACK_MAX_US    1000
/* The receive half (datapath/wire_rx.c, engine.c rx_lend): an application
 * thread that polled a CQ this recently reads the socket itself; the
 * engine looks again this often while one does. */
#define SR_ENG_RX_LEND_NS    200000
#define SR_ENG_RX_RECHECK_NS 300000
/* ... once its threads have polled this long without a break */
#define SR_ENG_RX_STREAK_NS 50000
/* A lent member holding a datagram that its process has not read for this
 * long is taken back (its threads watch memory, not a CQ); if they took
 * fewer than SR_ENG_RX_STRAND_READS datagrams since the last time, it is
 * not lent for SR_ENG_RX_STRAND_PAUSE_NS. */
#define SR_ENG_RX_STRAND_NS	  20000
#define SR_ENG_RX_STRAND_READS	  8
#define SR_ENG_RX_STRAND_PAUSE_NS 20000000
/* Congestion notification (annex A17.9; core.c, resp.c, req.c).  A
 * receiving thread whose read filled its batch looks at its socket's
 * backlog: past 1/SR_ENG_CNP_FILL_DIV of the receive buffer
 * (SOFTRDMA_CNP_FILL_PCT overrides; 0: every batch, for tests) it sends each
 * connected QP whose requests it then takes a CNP, at most one per QP
 * every SR_ENG_CNP_GAP_NS.  A requester that receives one halves its
 * window (RC, XRC: grown back by ACKs, down to SR_ENG_CNP_WIN_MIN) or its
 * sending rate (UC, which has no window: rate.h). */
#define SR_ENG_CNP_FILL_DIV 2
#define SR_ENG_CNP_GAP_NS   50000
#define SR_ENG_CNP_WIN_MIN  16
/* UC: packets the engine sends of a QP per turn, so that it reads (and
 * reacts to a CNP) between them */
#define SR_ENG_UC_TURN SR_ENG_WINDOW
/* A destroyed QP's last ACK is sent again to a duplicate of its last
 * message for this long (resp.c, sr_eng_resp_gone). */
#define SR_ENG_GONE_NS 10000000000ull

/* Port counters of the engine (`softrdma status`). */
enum sr_eng_cnt {
	SR_ENG_TX_PKTS,
	SR_ENG_TX_BYTES,
	SR_ENG_RX_PKTS,
	SR_ENG_RX_BYTES,
	SR_ENG_RETRANS,
	SR_ENG_NAK_TX,
	SR_ENG_NAK_RX,
	SR_ENG_RNR_TX,
	SR_ENG_RNR_RX,
	SR_ENG_PROBES,
	SR_ENG_OOO_PLACED,
	SR_ENG_GSO_SENDS, /* sends that carried several datagrams (udp.h) */
	SR_ENG_GSO_DGRAMS,
	SR_ENG_GRO_RECVS, /* receives that returned several datagrams */
	SR_ENG_GRO_DGRAMS,
	SR_ENG_APP_REQS, /* request packets receive halves sent (req.c, app_sends) */
	SR_ENG_CNP_TX,	 /* congestion notifications sent (resp.c) */
	SR_ENG_CNP_RX,	 /* ... received for a QP of ours (req.c) */
	SR_ENG_CNT_MAX
};

/* Per send WQE the requester has started: where its packets are. */
struct sr_eng_swqe {
	uint32_t first_psn;
	uint32_t npkts;	   /* PSNs it uses (a READ: its response packets) */
	uint32_t resp_off; /* READ: response bytes placed so far (requested: soff) */
	uint32_t idx;	   /* the SQ index it was started at */
	uint8_t rd_atomic; /* a READ or an atomic: completed by its response */
	bool local_done;   /* BIND_MW / LOCAL_INV: executed */
	uint8_t local_err; /* enum ibv_wc_status: failed before it was sent */
};

/*
 * One connected QP's transport state (RC, UC or XRC with a remote peer):
 * what the requester, completer and responder know of it.  It lives in the
 * arena, in a chunk the daemon gives every connected QP at creation
 * (sr_qp_shm.eng_off, sr_eng_state_size bytes: this, then one
 * sr_eng_swqe per SQ slot), so that a thread of another process that maps
 * the arena can one day run the same code on it (docs/architecture.md,
 * "The receive half").  No pointers here: the engine's own lists and
 * whatever it must not take from memory any process of the user can write
 * are in its private struct sr_eng_slot.
 */
struct sr_eng_qp {
	uint32_t qpn;
	uint32_t gen;	   /* sr_qp_shm.wire_gen this state belongs to */
	uint32_t swqe_cnt; /* entries of swqe[] (the SQ's slots) */

	/* the requester: what it sends next (req.c) */
	struct sr_eng_req {
		bool req_init;
		uint32_t spos;	     /* SQ index of the WQE being sent */
		uint64_t soff;	     /* bytes of it already sent */
		uint32_t npsn;	     /* next PSN to send */
		uint32_t hpsn;	     /* the furthest PSN sent + 1 (before a rewind) */
		uint32_t hspos;	     /* SQ index after the furthest WQE started */
		uint32_t since_ack;  /* packets sent since the last AckReq */
		uint32_t win;	     /* unacknowledged packets it may have now (req.c, acked_to) */
		struct sr_rate rate; /* UC: its sending rate after CNPs (rate.h) */
		/* this turn's first request took the ACK handed to the QP's
		 * next request (req.c, send_one) */
		bool dack_looked;
	} req;

	/* the completer: acknowledgements, timers and loss recovery (req.c,
	 * sr_eng_comp_rx, sr_eng_req_timer) */
	struct sr_eng_comp {
		uint32_t una;	   /* oldest PSN not acknowledged */
		uint32_t rd_out;   /* READs and atomics outstanding */
		uint32_t clean;	   /* PSNs acknowledged since its last loss or window step */
		uint64_t deadline; /* next timer: probe, timeout or RNR wait end, ns; 0: none */
		uint64_t rto_at;   /* the local ACK timeout expires (0: infinite) */
		uint64_t probe_ns; /* the current probe interval */
		bool rnr_wait;
		bool recovering;   /* after a sequence NAK, until progress */
		bool regap;	   /* rewound since the last progress: answers after the
				    * oldest unanswered one may be stale, no new gap */
		uint32_t rec_psn;  /* the packet last resent alone (req.c, resend_alone) */
		bool rec_on;	   /* ... and sending goes on past it meanwhile (rec_span) */
		uint32_t rec_mark; /* the furthest PSN sent + 1 when the NAK came */
		uint64_t rec_at;   /* when it went (ns) */
		uint64_t rec_due;  /* it goes again then, unless acknowledged (0: no) */
		uint64_t rec_rtt;  /* resend to its ACK, smoothed (ns; 0: none seen) */
		uint8_t retry_left, rnr_left;
	} comp;

	/* the responder (resp.c) */
	struct sr_eng_resp {
		bool resp_init;
		uint32_t epsn;	  /* expected PSN */
		uint32_t msn;	  /* messages completed */
		bool nak_sent;	  /* a sequence-error NAK for epsn is out */
		bool ack_due;	  /* an ACK is owed for epsn - 1 */
		bool ack_send;	  /* ... for a SEND (not a WRITE) */
		uint8_t cur_op;	  /* message in progress: its first opcode's operation, or 0xff */
		uint64_t cur_off; /* bytes of it placed */
		uint64_t wr_va;	  /* WRITE: target address of the next byte */
		uint32_t wr_rkey, wr_left;
		uint32_t wr_srqn; /* XRC: the SRQ the WRITE named (its PD checks the key) */
		uint64_t cnp_at;  /* its last CNP went then (ns) */
		bool have_ticket;
		struct sr_recv_ticket ticket;
		struct {
			uint32_t psn;
			uint64_t orig;
			bool valid;
		} replay[SR_ENG_REPLAY];
		uint32_t replay_next;
		/* WRITE packets placed ahead of a gap, by PSN % SR_ENG_OOO */
		uint32_t ooo_n;
		uint64_t ooo[SR_ENG_OOO / 64];
		/* WRITEs that began past the gap, one right after another from
		 * the end of the one in progress: what their RETHs said, until
		 * the in-order walk reaches their FIRST (resp.c, place_ahead) */
		uint32_t ahead_n;
		struct sr_eng_ahead {
			uint32_t psn; /* its FIRST or ONLY */
			uint32_t len; /* the RETH's DMA length */
			uint64_t va;
			uint32_t rkey;
			uint32_t srqn;
			uint8_t op; /* the FIRST's (or ONLY's) opcode */
		} ahead[SR_ENG_AHEAD];
	} resp;

	/* who else sends and reads for this QP: posting threads (datapath/wire_tx.c)
	 * and receive halves (datapath/wire_rx.c), and what the engine thread
	 * itself will do about it */
	struct sr_eng_grant {
		/* until PSN direct_end is acknowledged nothing new goes after a
		 * packet a posting thread sent: it left through another socket
		 * and maybe another CPU's backlog, and a packet of ours sent
		 * right after could arrive first (a sequence NAK, a
		 * retransmission) */
		bool direct_wait;
		uint32_t direct_end;
		uint64_t direct_at; /* a posting thread or the engine last moved it */
		/* a stream, not a ping-pong, was held up behind one: no grants
		 * until then (the engine batches a stream better than one
		 * packet per call) */
		uint64_t direct_quiet_until;
		/* a posting thread last sent one of its WQEs (absorbed then) */
		uint64_t direct_sent_at;
		/* what the engine thread does about this QP, for a receive half
		 * that ran the code meanwhile to tell whether it must ring the
		 * doorbell: the timer the engine will look at (0: none), whether
		 * it holds a grant for posting threads; and the requester has
		 * something to send, which only the engine sends */
		uint64_t eng_due;
		bool eng_granted;
		bool run_wanted;
		/* the engine's requests of this QP are out once the arena's
		 * eng_tx_flushed reaches this (req.c, app_sends) */
		uint64_t eng_tx_seq;
	} grant;

	/* the last of each kind of packet this QP took and gave, and which
	 * process handled it (the engine's or a receive half's), for the log
	 * line of a QP whose retries ran out (req.c, why_failed); written
	 * under wtx_lock */
	struct sr_eng_trail {
		uint64_t req_at, ack_at, tx_at, ack_tx_at, handed_at; /* ns; 0: never */
		uint32_t req_psn, ack_psn, tx_psn, ack_tx_psn;
		int32_t req_pid, ack_pid, tx_pid, ack_tx_pid, handed_pid;
		uint32_t reqs, acks, txs, ack_txs, handed;
	} trail;

	struct sr_eng_swqe swqe[]; /* [swqe_cnt], by SQ index */
};

/* The bytes of a QP's state chunk for an SQ of wqe_cnt slots. */
static inline uint64_t sr_eng_state_size(uint32_t wqe_cnt)
{
	return sizeof(struct sr_eng_qp) + (uint64_t)wqe_cnt * sizeof(struct sr_eng_swqe);
}

/*
 * The engine's private record of a QP slot (by QPN index): the lists it is
 * on, the ACK it handed to posting threads, and its own copies of whose
 * state the arena chunk holds (checked on every look-up, never read back
 * from the arena).
 */
struct sr_eng_slot {
	struct sr_eng_qp *q; /* the state in the arena; NULL: none yet */
	uint32_t qpn, gen, cnt;
	uint64_t off;	 /* the QP object's arena offset */
	uint64_t st_off; /* the state chunk's */
	bool active;	 /* on the timer list */
	struct sr_eng_slot *next_active;
	bool on_ack; /* on the list of QPs owing an ACK */
	struct sr_eng_slot *next_ack;
	/* the QP object owing it: valid to the end of the engine's reader
	 * section even if the owner destroys the QP meanwhile (shm/epoch.h) */
	struct sr_qp_shm *ack_qp;
	/* posting threads may send its next WQEs themselves (req.c,
	 * sr_eng_req_grant): on the list of QPs to grant at the end of this
	 * turn, on the list of granted ones the engine looks at every
	 * SR_ENG_GRANT_TICK_NS */
	bool grant_pending, granted;
	struct sr_eng_slot *next_pending, *next_granted;
	/* the ACK handed to posting threads (resp.c ack_defer); here, not in
	 * the arena, so that it still goes if the QP is destroyed or reset */
	struct sr_eng_dack {
		bool linked, valid;
		struct sr_eng_slot *next;
		uint64_t at; /* the engine sends it then */
		uint64_t off;
		uint32_t qpn, gen, dest_qpn, psn, msn;
		uint8_t sgid[16], dgid[16];
	} dack;
	/* what the QP's responder had received when the daemon destroyed
	 * it (the last PSN, the MSN, the addressing; at: when), ACKed again
	 * to a duplicate request (resp.c, sr_eng_resp_gone) */
	struct sr_eng_dack last;
};

/* The engine's clock (CLOCK_MONOTONIC, ns): what e->now is set from at the
 * start of a turn, by the engine thread and by receive halves alike. */
static inline uint64_t sr_eng_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct sr_engine {
	struct sr_devctx *ctx;
	/* a receive half in an application (datapath/wire_rx.c), not the engine
	 * thread: it answers requests and completes WQEs, sends requests
	 * only while app_tx (req.c, app_sends), and leaves timers and
	 * grants' upkeep to the engine */
	bool app;
	int32_t pid; /* its process's (sr_eng_trail) */
	/* app: it may send the requests of the QPs it serves too (its
	 * process's member is lent to its threads: req.c, app_sends), and it
	 * sent some since its last flush; engine: transmit batches sent */
	bool app_tx, app_sent;
	/* app: the datagram it just read is for no QP (its caller hands it
	 * to the engine) */
	bool app_unknown;
	/* the last QPN a packet came for that had no QP, and the QPN its
	 * slot held then (0: none) (core.c, unknown_qpn; status) */
	_Atomic uint32_t unknown_qpn, unknown_slot;
	/* the batch being read filled a receive socket past the mark:
	 * its requesters get CNPs (roce/roce.c sr_roce_rx_read, resp.c) */
	bool congested;
	uint64_t tx_flushes;
	void *arena;
	/* duplicates of a destroyed QP's last message ACKed again (resp.c,
	 * sr_eng_resp_gone; status: acks_after_destroy) */
	_Atomic uint64_t acks_gone;
	struct sr_eng_slot **slots; /* [SR_MAX_QPS], by QPN index */
	struct sr_eng_slot *active;
	struct sr_eng_slot *acks;	       /* responders owing an ACK this turn */
	struct sr_eng_slot *dacks;	       /* ACKs waiting for a request (resp.c) */
	uint64_t dack_ns;		       /* how long at most; 0: never */
	struct sr_eng_slot *pending, *granted; /* posting threads' sending (req.c) */
	uint64_t grant_tick;		       /* next look at the granted QPs */
	uint64_t now; /* this turn's time (sr_eng_clock); a timer armed later reads the clock */
	/* what it sends through (link.h): its queue is the transmit batch */
	struct sr_link *link;
	/* READ response payloads copied for this batch (sr_eng_stage):
	 * SR_ENG_TX_BATCH slots of SR_ENG_STAGE_MAX, made at first use */
	uint8_t *stage;
	unsigned nstage;
	/* counters (softrdma status): written by the engine thread only,
	 * read by the daemon's status (relaxed atomics, no locked instruction) */
	_Atomic uint64_t cnt[SR_ENG_CNT_MAX];
	_Atomic uint64_t drops[SR_DROP_MAX];
	/* fault injection and capture (fault.h, ctl.h): the rules as this
	 * thread last read them from the arena; the engine's holding and
	 * capture (NULL in a receive half), and its state */
	struct sr_fault_view fault_view;
	const struct sr_eng_taps *taps;
	struct sr_fault *fault; /* NULL: never set */
	struct sr_pcap *trace;	/* NULL: no capture */
	uint64_t trace_pkts;
	int trace_err;
	void *vis; /* per-QP retransmission counts (ctl.c) */
	/* since the last QP failed (req.c, why_failed): the engine thread's
	 * longest turn and when it began, and the latest it woke from a timed
	 * sleep (the scheduler's delay) and when it was due */
	uint64_t turn_worst, turn_worst_at, late_worst, late_worst_at;
};

/* The host's fault rules and counts (fault.h), in the arena. */
static inline struct sr_fault_shm *sr_eng_fault_shm(const struct sr_engine *e)
{
	return &((struct sr_arena_hdr *)e->arena)->fault;
}

/* Whether direction d's packets go through the taps (the link's on
 * sending, sr_eng_rx_tap): a capture (the engine's), or a fault rule for d. */
static inline bool sr_eng_tapped(const struct sr_engine *e, enum sr_fault_dir d)
{
	return e->trace || sr_fault_dir_on(sr_eng_fault_shm(e), d);
}

/* The first step of each intake of a received datagram (the engine's, a
 * receive half's, the GSI reader's): how many times to process it, as the
 * receive taps decide (sr_eng_rx_tap: 0, 1 or 2), and 1 without taps. */
static inline unsigned sr_eng_rx_copies(struct sr_engine *e, uint8_t *buf, uint32_t len,
					const struct sr_link_addr *from)
{
	return sr_eng_tapped(e, SR_FAULT_RX) ? sr_eng_rx_tap(e, buf, len, from) : 1;
}

static inline void sr_eng_count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* core.c: a thread's instance, its QPs, and what it sends */
/* qp's transport state, started over if qp was reset or re-routed since;
 * NULL if it has none (not a connected QP, or its chunk is not sound). */
struct sr_eng_qp *sr_eng_qp_get(struct sr_engine *e, struct sr_qp_shm *qp);
/* wtx_lock held: q set up for the QP's connection gen (SQ of cnt WQEs),
 * unless it already is (core.c) */
void sr_eng_state_fresh(const struct sr_qp_shm *qp, struct sr_eng_qp *q, uint32_t gen,
			uint32_t cnt);
/* This thread's record of QPN's slot (NULL: never used). */
static inline struct sr_eng_slot *sr_eng_slot_at(const struct sr_engine *e, uint32_t qpn)
{
	return e->slots[sr_qpn_index(qpn) % SR_MAX_QPS];
}
/* The record of q's slot (q came from sr_eng_qp_get). */
static inline struct sr_eng_slot *sr_eng_slot_of(const struct sr_engine *e,
						 const struct sr_eng_qp *q)
{
	return sr_eng_slot_at(e, q->qpn);
}
/* Whether q is the current state of qp (no reset or re-route since). */
bool sr_eng_qp_is(const struct sr_engine *e, const struct sr_qp_shm *qp, const struct sr_eng_qp *q);
void sr_eng_activate(struct sr_engine *e, struct sr_eng_qp *q);
/* Queues a packet on e's link to `to`: hdr (hlen bytes, from the BTH on)
 * and payload pieces; the link adds its headers, the pad and the ICRC
 * (link.h).  Counted here. */
void sr_eng_send(struct sr_engine *e, const struct sr_link_addr *to, const uint8_t *hdr,
		 unsigned hlen, const struct iovec *pay, unsigned npay, uint32_t paylen);
void sr_eng_flush_tx(struct sr_engine *e);
/* A READ response's payload (len <= SR_ENG_STAGE_MAX) copied out of the
 * responder's MR into memory of the transmit batch, to be sent as the next
 * packet queued; the copy, or src itself without memory for one. */
const void *sr_eng_stage(struct sr_engine *e, const void *src, uint32_t len);

/* core.c: taking in datagrams (what reads them is the link's: roce/roce.h) */
/* A datagram only the engine thread takes (QP1's MADs, multicast) read by
 * another thread: queued for it in the arena (run_rxfwd); false if the
 * queue was full (lost, as on a full receive queue, and counted).  The
 * caller then wakes the engine. */
bool sr_eng_rxfwd(void *arena, const uint8_t *buf, uint32_t len, const struct sr_link_addr *from);
/* Makes e an engine on arena (ctx: the context whose executor it runs;
 * NULL for none), with no link or taps yet (the caller sets what it
 * uses) and, with slots, its records of the QPs it touches.  app: a thread
 * of a process or the daemon's QP1 reader, not the engine thread.  The
 * one constructor of the engine thread's, a receive half's, the GSI
 * reader's and a test's engine.  0 or -ENOMEM. */
int sr_eng_init(struct sr_engine *e, struct sr_devctx *ctx, void *arena, bool app, bool slots);
/* What another thread's engine e counted since *shown_cnt, *shown_drops
 * (its last call), into the host's counters (`softrdma status`). */
void sr_eng_counts_publish(const struct sr_engine *e, uint64_t *shown_cnt, uint64_t *shown_drops);
/* Whether an opcode is of the QP type's transport (IBTA 9.2 and annex A14). */
bool sr_eng_opcode_fits(uint8_t opcode, uint32_t type);
/* Parses a received packet into *p and has its link check its integrity
 * (the ICRC): false if dropped (counted). */
bool sr_eng_rx_parse(struct sr_engine *e, const uint8_t *buf, uint32_t len,
		     const struct sr_link_addr *from, struct sr_pkt *p);
/* A parsed datagram for a QP of this host (not QP1, not multicast). */
void sr_eng_rx_unicast(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		       const uint8_t *dgid);

/* req.c: the requester and completer of RC, UC and XRC_SEND */
void sr_eng_req_run(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);
/* A CNP for qp came: its requester slows down. */
void sr_eng_req_cnp(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);
void sr_eng_comp_rx(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p);
/* Retires the head WQEs that are done, up to PSN `acked` acknowledged. */
void sr_eng_comp_retire(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
			uint32_t acked);
/* A timer of q expired (retransmit or end of an RNR wait). */
void sr_eng_req_timer(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);
/* Takes in what posting threads sent, then says whether they may send the
 * next WQEs themselves; true if they may.  tick: the periodic look, which
 * returns whether the engine keeps looking (false for a QP idle for
 * SR_ENG_GRANT_IDLE_NS). */
bool sr_eng_req_grant(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q, bool tick);
/* The daemon's thread, an RC QP to another host just moved to RTS (q: the
 * engine state it gave the QP, q_size bytes): the requester set up and the
 * posting threads granted before the move returns; false if not granted.
 * The engine takes the grant over once the first thread that sends under
 * it rings (req.c). */
bool sr_eng_req_rts(const void *arena, struct sr_qp_shm *qp, struct sr_eng_qp *q, uint64_t q_size);
/* A doorbell for a QP whose posting threads hold a grant and have sent
 * all there is (the daemon's ring after sr_eng_req_rts): what they sent
 * taken in and the grant kept, not withdrawn for a turn as
 * sr_eng_req_run would; false (nothing done) for any other QP. */
bool sr_eng_req_keep(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);
/* Takes in the WQEs posting threads sent since the engine last held
 * q's wtx_lock (held), as if it had sent them, their timers armed. */
void sr_eng_req_absorb(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);
/* engine.c: q's grant is decided at the end of this turn, once the
 * engine's own packets are sent. */
void sr_eng_grant_later(struct sr_engine *e, struct sr_eng_qp *q);

/* resp.c: the responder */
void sr_eng_resp_rx(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q,
		    const struct sr_pkt *p, const uint8_t *sgid, const uint8_t *dgid);
void sr_eng_resp_ud(struct sr_engine *e, struct sr_qp_shm *qp, const struct sr_pkt *p,
		    const uint8_t *sgid, const uint8_t *dgid);
/* A request for a QP that is gone (no QP has its number): the engine
 * ACKs it again if it repeats what the QP had received (sr_engine_gone). */
void sr_eng_resp_gone(struct sr_engine *e, const struct sr_pkt *p, const uint8_t *sgid,
		      const uint8_t *dgid);
/* Sends the ACKs the responder owes (coalesced: once per received batch),
 * or hands them to the QP's next request (a ping-pong). */
void sr_eng_resp_acks(struct sr_engine *e);
/* How long an ACK may wait for a request (SOFTRDMA_ACK_DEFER_US). */
uint64_t sr_eng_dack_ns(void);
/* Sends the handed ACKs whose time has come; the next such time, or 0. */
uint64_t sr_eng_resp_dacks(struct sr_engine *e);
/* wtx_lock held, at the engine's grant tick: an ACK a receive half
 * handed to q's next request that has waited dack_ns goes now. */
void sr_eng_resp_handed_tick(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);
/* With the QP's wtx_lock held, before the engine sends requests of q:
 * the ACK waiting for them goes first, from the engine. */
void sr_eng_resp_dack_take(struct sr_engine *e, struct sr_qp_shm *qp, struct sr_eng_qp *q);

#endif
