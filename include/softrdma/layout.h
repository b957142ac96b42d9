/*
 * The host-wide shared-memory layout ("arena") that softrdmad creates and
 * every client process maps.  It is the contract between the library's data
 * path, the daemon and any other process on the host, so it is versioned,
 * holds offsets instead of pointers, and pins every size with static_assert.
 *
 * Arena map (offsets from the arena base):
 *   0                 struct sr_arena_hdr
 *   keytab_off        struct sr_key_entry[SR_MAX_KEYS]   memory keys (MR, MW)
 *   qptab_off         struct sr_qpn_slot[SR_MAX_QPS]     QPN -> QP object
 *   srqtab_off        struct sr_qpn_slot[SR_MAX_SRQS]    SRQN -> SRQ object
 *   mcasttab_off      struct sr_mcast_group[SR_MAX_MCAST_GRP] UD multicast groups
 *   epochtab_off      struct sr_epoch_slot[SR_MAX_EPOCH_SLOTS] data-path readers
 *   lifetab_off       struct sr_life_slot[SR_MAX_LIVES]  processes' lives
 *   heap_off ...      objects allocated by the daemon (QPs, CQs, rings)
 *
 * Ownership: only the daemon allocates and frees heap objects and table
 * slots (slow path, serialized in its event loop).  Clients mutate the
 * fields marked "data path" under the object's process-shared lock or with
 * the atomics named next to them.
 */
#ifndef SOFTRDMA_LAYOUT_H
#define SOFTRDMA_LAYOUT_H

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/futex.h>
#include <pthread.h>

#include "core/shmlock.h"

#define SR_ARENA_MAGIC 0x534f4654524d4131ull /* "SOFTRMA1" */
/* 5: processes' lives (struct sr_life_slot) */
#define SR_ARENA_VERSION 5u

#define SR_CACHELINE	      64
#define SR_MAX_KEYS	      (1u << 18) /* = 2^SR_KEY_INDEX_BITS */
#define SR_MAX_QPS	      (1u << 17) /* = 2^SR_QPN_INDEX_BITS */
#define SR_MAX_SRQS	      (1u << 17)
#define SR_ARENA_DEFAULT_SIZE (8ull << 30) /* sparse memfd: pages cost only when touched */

/* The RoCEv2 engine's receive sockets: a SO_REUSEPORT group on UDP 4791
 * whose kernel-side program steers a datagram by bits of its BTH
 * destination QPN (SR_QPN_MEMBER_SHIFT, core/idalloc.h) to the member of
 * the process that owns the QP (docs/architecture.md, "The receive half").
 * Member 0 is the engine's alone (QP1, multicast, what a process without a
 * member of its own owns). */
#define SR_RX_MEMBERS 16

/* The last SR_EPOCH_OVERFLOW_SLOTS epoch slots: one per process, shared by
 * its threads when the others are all taken (src/shm/epoch.h). */
#define SR_EPOCH_OVERFLOW_SLOTS 256

/* Device capabilities: advertised by query_device and enforced by the daemon. */
#define SR_MAX_QP_WR	    16384
#define SR_MAX_SGE	    32
#define SR_MAX_INLINE	    512
#define SR_MAX_CQE	    (1 << 20)
#define SR_MAX_SRQ_WR	    16384
#define SR_MAX_RD_ATOM	    128
#define SR_MAX_MR_SIZE	    (1ull << 40)
#define SR_MAX_PD	    (1u << 16)
#define SR_MAX_AH	    (1u << 20)
#define SR_MAX_MCAST_GRP    1024
#define SR_QPN_MCAST	    0xFFFFFFu /* the multicast QPN, permissive DQPN */
#define SR_MAX_EPOCH_SLOTS  4096      /* data-path threads host-wide (a slot each, for life) */
#define SR_MAX_MCAST_ATTACH 64
#define SR_GID_TBL_LEN	    16
#define SR_PKEY_TBL_LEN	    1
#define SR_NUM_COMP_VECTORS 1
#define SR_DB_SLOTS	    4096	/* engine doorbell queue (power of two) */
#define SR_UDTX_SLOTS	    64		/* UD datagrams handed to the engine (power of two) */
#define SR_UDTX_DATA	    (40 + 4096) /* headers (wire/bth.h SR_MAX_HDR_LEN) + MTU */
#define SR_RXFWD_SLOTS	    32		/* datagrams an application read for the engine */

/* Memory-key table entry.  Readers (any process) validate remote and local
 * accesses against it; the daemon writes it.  `seq` is a seqlock: odd while
 * the daemon (or a MW bind on the data path) is rewriting the entry. */
enum sr_key_kind {
	SR_KEY_FREE = 0,
	SR_KEY_MR = 1,
	SR_KEY_MW1 = 2,
	SR_KEY_MW2 = 3,
};

struct sr_key_entry {
	_Atomic uint32_t seq; /* seqlock; release on write end, acquire on read */
	uint32_t key;	      /* full 32-bit lkey/rkey, 0 when invalid */
	uint32_t kind;	      /* enum sr_key_kind */
	uint32_t pd;	      /* daemon PD handle (host-wide unique) */
	uint32_t access;      /* IBV_ACCESS_* */
	uint32_t owner_pid;   /* process whose address space holds `addr` */
	uint64_t iova;	      /* first byte address as seen on the wire */
	uint64_t length;
	uint64_t addr;	     /* owner's virtual address of iova (MR: region start) */
	uint64_t reg_seq;    /* registration number: never reused; cache tag */
	uint32_t parent_key; /* MW: the MR it is bound to; 0 when unbound */
	uint32_t mw_qpn;     /* type-2 MW: QP it is bound to */
	uint32_t state;	     /* MW: 0 free, 1 bound, 2 invalidated */
	uint32_t pad;
};
static_assert(sizeof(struct sr_key_entry) == 72, "key entry layout");

/* One slot per QPN or SRQN index: the object's heap offset, published with
 * release after the object is initialised; readers load with acquire. */
struct sr_qpn_slot {
	_Atomic uint64_t obj_off; /* 0 = free */
};
static_assert(sizeof(struct sr_qpn_slot) == 8, "qpn slot layout");

/*
 * A work queue (SQ, RQ or SRQ ring).  head is advanced by the producer
 * (post_*), tail by the consumer (the executor); each on its own cache line.
 *
 * SQ: producer and consumer both hold the QP's sq_lock; the consumer
 * load-acquires head (store-release by post_send) before reading a WQE.
 *
 * RQ and SRQ: producers (post_recv threads) serialize on prod_lock,
 * consumers (executors delivering a message, flushes) on the QP's rq_lock or
 * the SRQ's lock, and neither side writes a line the other side writes: a
 * receive WQE is published by the store-release of its own `seq` (its index
 * + 1), which the consumer load-acquires, so the consumer never reads the
 * producer's line and the producer's lock stays in the owner's cache.  The
 * consumer store-releases tail; the producer load-acquires it only when the
 * ring looks full (tail_cache).  `waiting` is the RNR handshake: a consumer
 * that finds the ring empty sets it, issues a full fence and looks again; a
 * producer publishes, issues a full fence and then takes the flag and runs
 * the waiting sender (exec.h).  One of the two always sees the other.
 */
struct sr_wq {
	uint32_t wqe_cnt; /* power of two */
	uint32_t stride;  /* bytes per WQE, multiple of 64 */
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t max_wr;  /* as reported to the application */
	uint32_t limit;	  /* SRQ limit (srq_limit event threshold), 0 = disarmed */
	uint64_t wqe_off; /* arena offset of WQE 0 */
	uint32_t flags;	  /* enum sr_wq_flags */
	/* producer line */
	alignas(SR_CACHELINE) _Atomic uint32_t head;
	uint32_t tail_cache;	  /* producer's last view of tail (producer side only) */
	struct sr_lock prod_lock; /* RQ/SRQ producers */
	_Atomic uint32_t waiting; /* RQ/SRQ: a sender waits (RNR) for a receive here */
	_Atomic uint32_t polled;  /* SR_WQ_FREED_BY_POLL: index + 1 of the newest WQE whose
				     completion the owner has polled (cq_poll.c); only grows */
	/* consumer line */
	alignas(SR_CACHELINE) _Atomic uint32_t tail;
};
static_assert(sizeof(struct sr_wq) == 3 * SR_CACHELINE, "wq header layout");

enum sr_wq_flags {
	/* A QP's own RQ and an SRQ, as on mlx5: a receive WQE stays
	 * outstanding (counts against max_wr) until the owner polls its
	 * completion (for an SRQ, on any of its QPs' CQs), so post_recv
	 * learns of free slots from poll_cq in its own process instead of
	 * reading the consumer's tail line, which the peer writes for every
	 * message.  The ring has twice max_wr slots, so the slots post_recv
	 * writes next were consumed long ago and can be prefetched for write
	 * while nobody reads them. */
	SR_WQ_FREED_BY_POLL = 1 << 0,
};

struct sr_sge_shm {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};
static_assert(sizeof(struct sr_sge_shm) == 16, "sge layout");

enum sr_wqe_flags {
	SR_WQE_SIGNALED = 1 << 0,
	SR_WQE_SOLICITED = 1 << 1,
	SR_WQE_FENCE = 1 << 2,
	SR_WQE_INLINE = 1 << 3,
};

/* Send WQE header; sge[num_sge] or inline bytes follow it. */
struct sr_send_wqe {
	uint64_t wr_id;
	uint8_t opcode; /* enum ibv_wr_opcode */
	uint8_t flags;	/* enum sr_wqe_flags */
	uint16_t num_sge;
	uint32_t imm_or_inv; /* imm_data (network order) or invalidate_rkey */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t total_len; /* sum of SGE lengths or inline length */
	uint64_t compare_add;
	uint64_t swap;
	uint32_t ud_qpn; /* UD: destination QPN */
	uint32_t ud_qkey;
	uint32_t bind_mw_key; /* BIND_MW: the window's rkey (new value) */
	uint32_t bind_mr_key; /* BIND_MW: the MR's lkey */
	uint64_t bind_addr;
	uint64_t bind_length;
	uint32_t bind_access;
	uint32_t ud_ah_global; /* UD: AH had is_global */
	uint8_t ud_dgid[16];   /* UD: destination GID (multicast group when ud_qpn is 0xffffff) */
	uint8_t ud_sgid[16];   /* UD: source GID, for the receiver's GRH */
	uint32_t xrc_srqn;     /* XRC_SEND: the SRQ at the target (the XRCETH's SRQN) */
	uint8_t pad[4];
};
static_assert(sizeof(struct sr_send_wqe) == 128, "send wqe layout");

struct sr_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	_Atomic uint32_t seq; /* ring index + 1 once published (struct sr_wq) */
};
static_assert(sizeof(struct sr_recv_wqe) == 16, "recv wqe layout");

/* A completion as stored in a CQ ring.  `seq` publishes the entry:
 * the producer writes the body then store-release(seq = index + 1); the
 * consumer load-acquires seq and compares it with the index it expects. */
struct sr_cqe {
	_Atomic uint32_t seq;
	uint32_t status; /* enum ibv_wc_status */
	uint64_t wr_id;
	uint32_t opcode; /* enum ibv_wc_opcode */
	uint32_t byte_len;
	uint32_t imm_data; /* network order, or invalidated rkey */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	union {
		uint32_t vendor_err;
		uint32_t xrc_srqn; /* when `xrc`: the XRC SRQ whose WQE it completes */
	};
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t xrc; /* a receive through an XRC target QP (vendor_err reads 0) */
	uint8_t pad;
	uint32_t wqe_index; /* receive completions: the RQ/SRQ index of the WQE */
	uint64_t timestamp; /* CLOCK_MONOTONIC ns */
};
static_assert(sizeof(struct sr_cqe) == 64, "cqe layout");

enum sr_cq_flags {
	SR_CQ_TIMESTAMPS = 1 << 0, /* completions carry a timestamp (cq_ex asked for it) */
};

enum sr_cq_arm {
	SR_CQ_DISARMED = 0,
	SR_CQ_ARM_NEXT = 1,
	SR_CQ_ARM_SOLICITED = 2,
};

/* Completion queue: many producers (any process executing work for a QP
 * bound to it) under `lock`; one consumer side (the owner's poll_cq). */
struct sr_cq_shm {
	uint32_t cqe_cnt;	/* ring entries, power of two */
	uint32_t max_cqe;	/* as reported to the application */
	uint32_t channel_fd_id; /* daemon fd-registry id of the comp channel, 0 none */
	uint32_t async_fd_id;	/* owner context's async event fd id */
	uint32_t handle;	/* daemon CQ handle */
	uint32_t owner_pid;
	_Atomic uint32_t arm;	 /* enum sr_cq_arm; producer exchanges it to 0 */
	_Atomic uint32_t events; /* events raised, not yet taken by get_cq_event */
	_Atomic uint32_t overflow;
	_Atomic uint32_t async_events; /* bit (1 << IBV_EVENT_CQ_ERR) pending for the owner */
	_Atomic uint32_t stall_hint; /* a QP sending to this CQ waits (RNR/ACK): poll retries it */
	uint32_t flags;		     /* enum sr_cq_flags, set by the owner at creation */
	uint64_t ring_off;	     /* arena offset of struct sr_cqe[cqe_cnt] */
	/* producer line: only producers write it (the consumer never reads it
	 * on the fast path), so it does not bounce with every poll */
	alignas(SR_CACHELINE) struct sr_lock lock; /* producers (any process) */
	_Atomic uint32_t prod;			   /* next slot to fill (under lock) */
	uint32_t cons_cache;			   /* producers' last view of cons (under lock) */
	/* consumer line */
	alignas(SR_CACHELINE) _Atomic uint32_t cons; /* next slot to poll (owner) */
};

/* A shared receive queue. */
struct sr_srq_shm {
	uint32_t srqn;
	uint32_t pd;
	uint32_t owner_pid;
	uint32_t async_fd_id;
	uint64_t user_handle; /* owner's struct ibv_srq * for async events */
	_Atomic uint32_t limit_armed;
	_Atomic uint32_t async_events; /* bits (1 << enum ibv_event_type) pending for the owner */
	/* XRC SRQ (IBV_SRQT_XRC): its XRC domain's number (0: a basic SRQ), and
	 * the CQ its receive completions go to, whichever XRC_RECV QP of the
	 * domain delivered the message (IBTA A14) */
	uint32_t xrcd;
	/* XRC: the last XRC_SEND QP that waited here for a receive (RNR), for
	 * post_srq_recv to run it (its responder QP may be in any process) */
	_Atomic uint32_t waiter_qpn;
	uint64_t cq_off;
	struct sr_lock lock; /* consumers (executors), and modify_srq's limit */
	struct sr_wq rq;
};

enum sr_counter {
	SR_CNT_SEND_WQE,
	SR_CNT_RDMA_WRITE,
	SR_CNT_RDMA_READ,
	SR_CNT_ATOMIC,
	SR_CNT_RNR,
	SR_CNT_REM_ACCESS_ERR,
	SR_CNT_BYTES,
	SR_CNT_DIRECT, /* of those, executed by post_send's direct path (exec.h) */
	SR_CNT_MAX
};

/* A queue pair.  Fields under "attributes" are written by the daemon on
 * modify_qp (slow path) before it replies; executors read them. */
struct sr_qp_shm {
	uint32_t qpn;
	uint32_t type;		/* enum ibv_qp_type */
	_Atomic uint32_t state; /* enum ibv_qp_state; the daemon or an executor (to ERR/SQE) */
	uint32_t pd;
	uint32_t owner_pid;
	uint32_t async_fd_id;
	uint32_t owner_life; /* the owner process's struct sr_life_slot + 1; 0: none */
	uint32_t unused0;
	uint64_t user_handle; /* owner's struct ibv_qp * for async events */
	uint32_t srqn;	      /* 0 = own RQ */
	uint32_t sq_sig_all;
	uint64_t send_cq_off;
	uint64_t recv_cq_off;
	uint64_t srq_off;
	/* attributes */
	uint32_t dest_qpn;
	uint32_t qkey;
	uint32_t access; /* qp_access_flags */
	uint32_t sq_psn;
	uint32_t rq_psn;
	uint8_t path_mtu, timeout, retry_cnt, rnr_retry;
	uint8_t min_rnr_timer, max_rd_atomic, max_dest_rd_atomic, port_num;
	uint16_t pkey_index;
	uint8_t sq_draining;
	uint8_t en_sqd_async_notify;
	uint32_t xrcd;	     /* XRC_RECV: its XRC domain's number; SRQs of that domain only */
	uint8_t ah_attr[32]; /* struct ibv_ah_attr as given (opaque here) */
	uint8_t alt_ah_attr[32];
	uint32_t alt_port_num, alt_pkey_index, alt_timeout, path_mig_state;
	_Atomic uint32_t async_events; /* bits (1 << enum ibv_event_type) pending for the owner */
	/* RoCEv2 (src/engine), set by the daemon's modify_qp: `wire` = 1 when
	 * the connected peer (RC/UC) is on another host, found by its GID;
	 * then the host's engine, not the same-host executor, runs the SQ,
	 * sending from `sgid` (a local GID) to `dgid`.  `wire_gen` changes
	 * at every modify, so the engine resynchronises its own state. */
	uint32_t wire;
	_Atomic uint32_t wire_gen;
	uint8_t sgid[16], dgid[16];
	/* connected QPs (RC, UC, XRC): the arena chunk of the engine's
	 * transport state for this QP (src/engine/engine.h struct sr_eng_qp),
	 * given at creation, fixed for the QP's life; 0 for UD */
	uint64_t eng_off;
	/* data path, requester side: written by whoever holds sq_lock */
	alignas(SR_CACHELINE) struct sr_lock sq_lock; /* post_send and the SQ executor */
	_Atomic uint32_t stalled;		      /* SQ head waits: enum sr_stall */
	_Atomic uint64_t
	    stall_deadline_ns;	  /* when the wait turns into an error; UINT64_MAX = never */
	uint32_t exec_pos;	  /* SQ index of the next WQE to execute (under sq_lock) */
	_Atomic uint32_t wire_db; /* wire QP: 1 while queued on the engine's doorbell */
	/* 1: the QP went to ERR while another held sq_lock, so its SQ flush is
	 * owed (sr_sq_flush_owed: the owner's next poll or the daemon's tick) */
	_Atomic uint32_t flush_pending;
	/* Per-QP counters, written only by the sq_lock holder (plain load +
	 * store, no locked instruction: no cache line shared host-wide on the
	 * data path); `softrdma status` adds them up. */
	_Atomic uint64_t cnt[SR_CNT_MAX];
	/* RoCEv2 requester, shared by the engine and posting threads
	 * (src/shm/wire_tx.c): under wtx_lock the engine publishes where its
	 * requester stands, and whether a posting thread may itself send the
	 * WQE at SQ index wtx_spos as PSN wtx_npsn (wtx_ok, for wire_gen
	 * wtx_gen; wtx_room packets it may send: 1 per grant, given only to an
	 * idle requester, engine/req.c sr_eng_req_grant); a thread that does
	 * moves wtx_spos and wtx_npsn on, and the engine takes those WQEs into
	 * its own state the next time it holds the lock.  The responder's
	 * ACK may wait here for the QP's next request (wtx_ack: the ACK of
	 * PSN wtx_ack_psn with MSN wtx_ack_msn, engine/resp.c ack_defer): the
	 * thread that sends that request sends the ACK with it and clears it,
	 * or the engine sends it when it next runs the requester or soon */
	alignas(SR_CACHELINE) struct sr_lock wtx_lock;
	uint32_t wtx_ok, wtx_gen, wtx_spos, wtx_npsn, wtx_room;
	/* the grant was given by the daemon at RTS (engine/req.c,
	 * sr_eng_req_rts) and the engine has not taken it over: the thread
	 * that sends under it rings the doorbell after its send */
	uint32_t wtx_unseen;
	uint32_t wtx_ack, wtx_ack_psn, wtx_ack_msn, wtx_ack_gen; /* for wire_gen wtx_ack_gen */
	uint64_t wtx_ack_at; /* when it was handed (ns): the engine's tick sends it late */
	/* data path, responder side: written by executors delivering to this
	 * QP (post_recv writes only rq's producer line), on its own line */
	alignas(SR_CACHELINE) struct sr_lock rq_lock; /* consumers of the RQ (executors, flush) */
	struct sr_wq sq;
	struct sr_wq rq;
};

/* wtx_lock held: takes the ACK handed to the QP's next request if it is
 * one of connection generation gen (its PSN and MSN); false if none is. */
static inline bool sr_wtx_ack_take(struct sr_qp_shm *qp, uint32_t gen, uint32_t *psn, uint32_t *msn)
{
	if (!qp->wtx_ack || qp->wtx_ack_gen != gen)
		return false;
	*psn = qp->wtx_ack_psn;
	*msn = qp->wtx_ack_msn;
	qp->wtx_ack = 0;
	return true;
}

/* A UD multicast group: the daemon rewrites it under the seqlock on
 * attach/detach; senders read a consistent copy of the member list. */
struct sr_mcast_group {
	_Atomic uint32_t seq;
	uint32_t nqp; /* 0 = free slot */
	uint8_t gid[16];
	uint32_t qpn[SR_MAX_MCAST_ATTACH];
};

/* Why a QP's send queue head is waiting (IBTA 9.7.5.2.8 RNR, 9.7.6.1.3 timeout). */
enum sr_stall {
	SR_STALL_NONE = 0,
	SR_STALL_RNR = 1,    /* no receive WQE at the responder: RNR NAK, retried */
	SR_STALL_NO_ACK = 2, /* responder absent or not ready: no ACK, retried */
};

/*
 * Epoch-based reclamation of heap chunks (src/shm/epoch.h, daemon heap.c).
 * A thread that is about to look up other processes' objects (a peer QP by
 * number, its CQ, its SRQ) publishes the global epoch it read in its own
 * slot, and clears it when it is done; the daemon reuses a destroyed
 * object's chunk only once every published epoch is at least the one the
 * object was retired at.  One slot per cache line: each is written on
 * every post_send by its thread only.
 */
struct sr_epoch_slot {
	_Atomic uint64_t epoch; /* 0: not inside; else the epoch read on entry */
	_Atomic uint32_t pid;	/* owner process (getpid), 0: free */
	_Atomic uint32_t tid;	/* owner thread, for `softrdma status` */
	char pad[SR_CACHELINE - 16];
};
static_assert(sizeof(struct sr_epoch_slot) == SR_CACHELINE, "one slot per line");

/*
 * A process's life, as the kernel ends it.  On hardware a process's QPs
 * are destroyed while it exits (the uverbs file's release runs before its
 * parent can reap it), so from then on a peer's request finds no QP.  Here
 * the daemon reclaims a dead process's objects only when it gets round to
 * its closed socket, so peers need another witness: each process that uses
 * the verbs holds `mu`, a robust, process-shared mutex, from a thread of
 * its own that never lets it go (src/core/life.c).  The kernel marks the
 * futex word FUTEX_OWNER_DIED while that thread exits (exit_robust_list, in
 * exit_mm, before exit_notify tells the parent), so a load of the word says
 * "dead" to every executor of the host from the moment the exit completes.
 * The daemon initialises a slot for each process it serves (by pid),
 * frees it only once its word says dead or unheld, and reuses it only once
 * no reader can still hold a QP of the old owner (src/daemon/life.c); QPs
 * name their owner's slot (sr_qp_shm.owner_life).  The word is glibc's __data.__lock, the
 * futex of its robust mutexes (the TID of the owner, then the bits of
 * <linux/futex.h>): a layout of glibc's public struct, read, never written.
 */
#define SR_MAX_LIVES 4096

struct sr_life_slot {
	pthread_mutex_t mu;
	uint32_t pid; /* 0: free (the daemon's, slow path) */
	char pad[SR_CACHELINE - sizeof(pthread_mutex_t) - 4];
};
static_assert(sizeof(struct sr_life_slot) == SR_CACHELINE, "one slot per line");

/* One member of the engine's receive socket group (SR_RX_MEMBERS), in the
 * arena.  poll_at: when a thread of the process it is lent to last polled
 * (ns, CLOCK_MONOTONIC; 0: its threads sleep); while that is recent the
 * engine leaves the socket to them (lent).  hold: whoever reads the socket
 * and processes what it read holds it (the CLOCK_MONOTONIC time it took it;
 * 0: free), so that a QP's datagrams are handled in the order they came
 * (UC loses a message to a gap).  Nobody waits for it: a reader that finds
 * it held leaves the datagrams to the holder, and one held longer than
 * SR_RX_HOLD_STALE_NS (its holder stopped or preempted) may be taken over:
 * what the old holder read is then handled late, as a network reorders. */
struct sr_rx_member {
	alignas(SR_CACHELINE) _Atomic uint64_t poll_at;
	_Atomic uint64_t poll_since; /* when its threads' current polling began */
	_Atomic uint64_t hold;
	_Atomic uint64_t pkts;	 /* datagrams read from it, by anyone */
	_Atomic uint32_t lent;	 /* the engine leaves it to the process now */
	_Atomic uint32_t missed; /* the engine found it held (engine/rx_member.h) */
	/* the holder's thread id, and holds taken over from a thread that
	 * was stopped or gone (engine/rx_member.h) */
	_Atomic int32_t holder;
	_Atomic uint64_t takeovers;
};

/* A UD datagram to another host that the posting thread hands to the
 * engine instead of sending it itself, while the engine's transmit taps
 * (fault injection, capture) are on: the cell of a bounded multi-producer
 * queue (the doorbell's algorithm, engine/doorbell.h), then the packet. */
struct sr_udtx_slot {
	_Atomic uint64_t seq; /* sequence << 32, as a doorbell cell */
	uint8_t sgid[16], dgid[16];
	uint32_t qpn;  /* the sending QP: its socket and UDP source port */
	uint32_t hlen; /* BTH, DETH, ImmDt */
	uint32_t paylen;
	uint8_t data[SR_UDTX_DATA]; /* headers, then payload */
};

/* Fault injection's rules and counts (src/engine/fault.h), where every
 * thread that sends or receives for the host reads them: the engine and
 * the receive halves (shm/wire_rx.c) decide each packet's faults from the
 * same rules and number the packets from the same counters, so a rule
 * such as drop_nth counts the host's packets whoever handles them.  Only
 * the engine writes the rules, under the seqlock (core/seqlock.h, which
 * copies the 32-bit words after seq: hence the word before it, so that
 * the rules start 8-aligned). */
#define SR_FAULT_KINDS 5 /* = SR_FK_MAX */

struct sr_fault_rule_shm {
	uint32_t on, one_qp, qpn, unused;
	uint64_t thresh[SR_FAULT_KINDS]; /* probability as a fraction of 2^64 (0: never) */
	uint64_t nth[SR_FAULT_KINDS];	 /* 0: no rule */
};

struct sr_fault_rules {
	uint64_t seed;
	struct sr_fault_rule_shm dir[2]; /* enum sr_fault_dir */
};

struct sr_fault_shm {
	uint32_t unused;
	_Atomic uint32_t seq;
	struct sr_fault_rules rules;
	_Atomic uint32_t dirs; /* a bit per direction with a rule: the one look when none */
	_Atomic uint64_t matched[2];
	_Atomic uint64_t kind[2][SR_FAULT_KINDS];
};

struct sr_arena_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;
	uint64_t size;
	uint64_t keytab_off;
	uint64_t qptab_off;
	uint64_t srqtab_off;
	uint64_t mcasttab_off;
	uint64_t epochtab_off;
	uint64_t udtxtab_off;  /* struct sr_udtx_slot[SR_UDTX_SLOTS] */
	uint64_t rxfwdtab_off; /* struct sr_udtx_slot[SR_RXFWD_SLOTS] */
	uint64_t lifetab_off;  /* struct sr_life_slot[SR_MAX_LIVES] */
	uint64_t heap_off;
	uint64_t heap_size;
	_Atomic uint64_t reg_seq; /* source of sr_key_entry.reg_seq */
	uint64_t counters[16];	  /* totals of destroyed QPs (enum sr_counter); daemon only */
	/* reclamation (struct sr_epoch_slot): the daemon advances `epoch` (from
	 * 1, store-release) after clearing a destroyed object's table slot;
	 * `epoch_unslotted` counts readers that found no free slot (each pins
	 * every chunk retired while it is inside) */
	alignas(SR_CACHELINE) _Atomic uint64_t epoch;
	_Atomic uint32_t epoch_unslotted;
	/* The RoCEv2 engine's doorbell (src/engine/doorbell.h): a bounded
	 * multi-producer queue of QPNs whose send queue has new work, and the
	 * engine's eventfd (a daemon fd id), written only when it sleeps. */
	alignas(SR_CACHELINE) _Atomic uint32_t engine_sleeping;
	uint32_t engine_fd_id; /* 0: no engine (RoCEv2 off on this host) */
	/* the engine's transmit batches sent so far: a QP's requests it
	 * batched are out once this reaches sr_eng_qp.eng_tx_seq (a receive
	 * half sends the QP's next ones only then: engine/req.c) */
	_Atomic uint64_t eng_tx_flushed;
	alignas(SR_CACHELINE) _Atomic uint64_t db_head; /* producers: next slot to claim */
	alignas(SR_CACHELINE) _Atomic uint64_t db_tail; /* the engine: next slot to read */
	_Atomic uint32_t db_overflow; /* a producer found the queue full: the engine rescans */
	alignas(SR_CACHELINE) _Atomic uint64_t db_ring[SR_DB_SLOTS]; /* (seq << 32) | qpn */
	/* UD datagrams to other hosts: the engine raises wire_taps while a
	 * transmit fault or a capture is on, and posting threads then queue
	 * them on udtx (struct sr_udtx_slot) instead of sending them; what they
	 * send themselves they count in ud_direct (packets, bytes), which
	 * `softrdma status` adds to the engine's tx counters */
	alignas(SR_CACHELINE) _Atomic uint32_t wire_taps;
	/* a capture, or a fault that holds packets (delay, reorder): the
	 * receive halves read nothing */
	_Atomic uint32_t rx_taps;
	_Atomic uint64_t ud_direct[2];
	_Atomic uint64_t wire_direct[2]; /* RC packets posting threads sent (wire_tx.c) */
	_Atomic uint64_t wire_acks;	 /* ACKs they sent with them (wire_tx.c) */
	_Atomic uint64_t udtx_full;	 /* queue full: datagram dropped */
	alignas(SR_CACHELINE) _Atomic uint64_t udtx_head;
	alignas(SR_CACHELINE) _Atomic uint64_t udtx_tail;
	/* The receive half (src/shm/wire_rx.c): a thread polling a CQ reads
	 * its process's member of the engine's socket group and runs the
	 * engine's code on what it gets (struct sr_rx_member).  What only the
	 * engine can take (QP1's MADs, multicast) they queue on rxfwd (struct
	 * sr_udtx_slot: qpn holds the UDP source port, paylen the datagram's
	 * length); what they count they add to app_cnt and app_drops, which
	 * `softrdma status` adds to the engine's own counters. */
	struct sr_rx_member rx_members[SR_RX_MEMBERS];
	alignas(SR_CACHELINE) _Atomic uint64_t app_cnt[24]; /* engine.h enum sr_eng_cnt */
	_Atomic uint64_t app_drops[16];			    /* wire/bth.h enum sr_drop */
	_Atomic uint64_t rxfwd_full;			    /* queue full: datagram dropped */
	_Atomic uint64_t app_rx;			    /* datagrams they took off the socket */
	alignas(SR_CACHELINE) _Atomic uint64_t rxfwd_head;
	alignas(SR_CACHELINE) _Atomic uint64_t rxfwd_tail;
	alignas(SR_CACHELINE) struct sr_fault_shm fault;
};

/*
 * What sr_arena_hdr.version holds: SR_ARENA_VERSION mixed with the size and
 * the key offsets of every shared structure, so a library and a daemon built
 * from different sources (an old softrdmad still running after a rebuild)
 * refuse each other instead of reading each other's fields at the wrong
 * offsets, even when nobody remembered to bump the version.
 */
static inline uint32_t sr_arena_layout_version(void)
{
	uint64_t h = SR_ARENA_VERSION;
	const uint64_t v[] = {
	    sizeof(struct sr_arena_hdr),
	    sizeof(struct sr_key_entry),
	    sizeof(struct sr_qpn_slot),
	    sizeof(struct sr_wq),
	    sizeof(struct sr_sge_shm),
	    sizeof(struct sr_send_wqe),
	    sizeof(struct sr_recv_wqe),
	    sizeof(struct sr_cqe),
	    sizeof(struct sr_cq_shm),
	    offsetof(struct sr_cq_shm, lock),
	    offsetof(struct sr_cq_shm, cons),
	    sizeof(struct sr_srq_shm),
	    offsetof(struct sr_srq_shm, rq),
	    sizeof(struct sr_qp_shm),
	    offsetof(struct sr_qp_shm, sq_lock),
	    offsetof(struct sr_qp_shm, cnt),
	    offsetof(struct sr_qp_shm, rq_lock),
	    offsetof(struct sr_qp_shm, sq),
	    offsetof(struct sr_cqe, wqe_index),
	    offsetof(struct sr_wq, polled),
	    sizeof(struct sr_mcast_group),
	    sizeof(struct sr_epoch_slot),
	    offsetof(struct sr_arena_hdr, epoch),
	    offsetof(struct sr_arena_hdr, db_ring),
	    offsetof(struct sr_arena_hdr, udtx_head),
	    offsetof(struct sr_arena_hdr, rx_members),
	    sizeof(struct sr_rx_member),
	    SR_RX_MEMBERS,
	    offsetof(struct sr_arena_hdr, rxfwd_head),
	    sizeof(struct sr_udtx_slot),
	    SR_UDTX_SLOTS,
	    SR_RXFWD_SLOTS,
	    offsetof(struct sr_qp_shm, eng_off),
	    offsetof(struct sr_qp_shm, wire),
	    SR_DB_SLOTS,
	    SR_MAX_EPOCH_SLOTS,
	    SR_EPOCH_OVERFLOW_SLOTS,
	    SR_CNT_MAX,
	    SR_MAX_KEYS,
	    SR_MAX_QPS,
	    sizeof(struct sr_life_slot),
	    SR_MAX_LIVES,
	    offsetof(struct sr_qp_shm, owner_life),
	    offsetof(struct sr_arena_hdr, lifetab_off),
	};

	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		h = (h ^ v[i]) * 0x100000001b3ull; /* FNV-1a step */
	return (uint32_t)(h ^ (h >> 32));
}

static inline void *sr_arena_ptr(void *base, uint64_t off)
{
	return off ? (char *)base + off : (void *)0;
}

/* For offsets known to be valid (non-zero). */
static inline void *sr_arena_at(void *base, uint64_t off)
{
	return (char *)base + off;
}

static inline struct sr_key_entry *sr_arena_keytab(void *base)
{
	const struct sr_arena_hdr *h = base;
	return (struct sr_key_entry *)((char *)base + h->keytab_off);
}

static inline struct sr_qpn_slot *sr_arena_qptab(void *base)
{
	const struct sr_arena_hdr *h = base;
	return (struct sr_qpn_slot *)((char *)base + h->qptab_off);
}

static inline struct sr_qpn_slot *sr_arena_srqtab(void *base)
{
	const struct sr_arena_hdr *h = base;
	return (struct sr_qpn_slot *)((char *)base + h->srqtab_off);
}

static inline struct sr_udtx_slot *sr_arena_rxfwdtab(void *base)
{
	struct sr_arena_hdr *h = (struct sr_arena_hdr *)base;

	return (struct sr_udtx_slot *)((char *)base + h->rxfwdtab_off);
}

static inline struct sr_udtx_slot *sr_arena_udtxtab(void *base)
{
	const struct sr_arena_hdr *h = base;
	return (struct sr_udtx_slot *)((char *)base + h->udtxtab_off);
}

static inline struct sr_mcast_group *sr_arena_mcasttab(void *base)
{
	const struct sr_arena_hdr *h = base;
	return (struct sr_mcast_group *)((char *)base + h->mcasttab_off);
}

static inline struct sr_life_slot *sr_arena_lifetab(void *base)
{
	const struct sr_arena_hdr *h = base;
	return (struct sr_life_slot *)((char *)base + h->lifetab_off);
}

/* Whether the process that owns qp has exited (struct sr_life_slot): its
 * QP then answers nobody, as a destroyed one would. */
static inline bool sr_qp_owner_gone(void *base, const struct sr_qp_shm *qp)
{
	if (!qp->owner_life)
		return false;
	return __atomic_load_n(&sr_arena_lifetab(base)[qp->owner_life - 1].mu.__data.__lock,
			       __ATOMIC_ACQUIRE) &
	       FUTEX_OWNER_DIED;
}

static inline struct sr_epoch_slot *sr_arena_epochtab(void *base)
{
	const struct sr_arena_hdr *h = base;
	return (struct sr_epoch_slot *)((char *)base + h->epochtab_off);
}

#endif
