/*
 * The input format of the control-socket fuzzer (fuzz_daemon.c), shared
 * with the seed generator (gen_seeds.c).  An input is a sequence of
 * operations against four fake clients, each
 *
 *   byte 0   client (bits 0-1) and action ((byte >> 2) % FZ_ACTIONS,
 *            enum fz_action)
 *   byte 1   descriptors sent with the record: count fz_nfds[byte & 7]
 *   byte 2-3 the kind of each descriptor, 3 bits per fd (enum fz_fd_kind),
 *            fd i taking bits 3*(i%5) of the little-endian word
 *   byte 4-5 record length L, little endian, 10 bits: L > sizeof(struct
 *            sr_req) is an oversized record (recvmsg's MSG_TRUNC), 0 an
 *            end of stream
 *   byte 6   number of patches P (bits 0-2)
 *   P x 2    patch: byte offset / 4 in the record, source (enum fz_src)
 *   L bytes  the record
 *
 * A patch writes a value the harness knows and the fuzzer cannot guess into
 * the record: a handle, QPN or key from an earlier reply (of any client,
 * so one client can name another's objects), or the client's pid (HELLO).
 * Actions FZ_SEND and FZ_SEND_NOREAD carry bytes 1.. above; FZ_DATAPATH
 * carries two bytes (enum fz_dp, enum fz_hold); FZ_MAD carries
 *
 *   byte 1   where it comes from (enum fz_mad_from)
 *   byte 2   its length - 1 (1-256 bytes)
 *   byte 3   what the harness writes into it (enum fz_mad_fix)
 *   N bytes  the MAD
 *
 * and the others none.
 */
#ifndef SR_FUZZ_INPUT_H
#define SR_FUZZ_INPUT_H

#include <stdint.h>

#define FZ_CLIENTS 4
#define FZ_HANDLES 16 /* the last 16 non-zero handles replied */

enum fz_action {
	FZ_SEND = 0,	    /* send a record, then read the replies */
	FZ_SEND_NOREAD = 1, /* send a record; the client stops reading replies */
	FZ_READ = 2,	    /* the client reads its replies again */
	FZ_CLOSE = 3,	    /* the client's socket closes (reclaim) */
	FZ_TICK = 4,	    /* the daemon's timer work of one poll round */
	FZ_DATAPATH = 5,    /* a QP's owner does what its data path may do */
	FZ_MAD = 6,	    /* a CM MAD arrives (from another host, or this one) */
	FZ_CM_DUE = 7,	    /* every CM deadline comes (a resend, a timeout, the
			     * end of a timewait), then the timer work runs */
	FZ_ACTIONS
};

/* FZ_MAD's source: bits 0-1 its sender's GID, one of two other hosts
 * (IPv4 and IPv6) or this host's first or last GID; bit 2 sent to a GID
 * this host does not own (else to its first). */
enum fz_mad_from {
	FZ_MAD_FROM = 3,
	FZ_MAD_TO_OTHER = 1 << 2,
};

/* FZ_MAD's fixes: values the fuzzer cannot guess, taken from the k-th CM
 * id of the daemon (bits 4-6, counted in its list of ids): */
enum fz_mad_fix {
	FZ_MAD_HDR = 1 << 0,	 /* a CM MAD header (the attribute kept) */
	FZ_MAD_THEIR = 1 << 1,	 /* the id's comm ID as the remote comm ID */
	FZ_MAD_PEERS = 1 << 2,	 /* the id's peer's comm ID as the local one */
	FZ_MAD_SERVICE = 1 << 3, /* REQ, SIDR_REQ: the id's service ID and an IP CM
				  * header from the sender to the id's address */
	FZ_MAD_ID = 7 << 4,
	FZ_MAD_REQ_ID = 1 << 7, /* the id's comm ID as the local one (a SIDR_REP's
				 * request ID) */
};

/* FZ_DATAPATH's byte: a QP (the handle table's entry, bits 0-3) and what
 * its owner's library does in the arena, as post_send and poll_cq do, for
 * the daemon's timer work (FZ_TICK) to meet.  Nothing a library never
 * writes. */
enum fz_dp {
	FZ_DP_QP = 15,
	FZ_DP_NO_ACK = 1 << 4,	   /* stall the posted SEND on no ACK rather than RNR */
	FZ_DP_ARM = 1 << 5,	   /* arm the send CQ (ibv_req_notify_cq) */
	FZ_DP_FILL_CQ = 1 << 6,	   /* fill the send CQ (nobody polls it) */
	FZ_DP_FLUSH_OWED = 1 << 7, /* a QP in ERR: its SQ flush is owed */
};

/* FZ_DATAPATH's second byte: locks of that QP that a thread of its owner
 * holds, stopped there (SIGSTOP, a debugger) inside post_send, post_recv
 * or a completion push, until FZ_HOLD_RELEASE.  While any is held the
 * daemon's timer work is not run (a known limit: it waits for them). */
enum fz_hold {
	FZ_HOLD_SQ = 1 << 0,	  /* sq_lock */
	FZ_HOLD_RQ = 1 << 1,	  /* rq_lock */
	FZ_HOLD_RQ_PROD = 1 << 2, /* the RQ's producer lock */
	FZ_HOLD_SEND_CQ = 1 << 3, /* the send CQ's lock */
	FZ_HOLD_SRQ = 1 << 4,	  /* the SRQ's lock */
	/* Not the library: a process of the user writes garbage over the send
	 * CQ's ring offset and size in the arena, which it can.  The request
	 * handlers (resize, destroy, reclaim) must not follow them; the timer
	 * work and data path do (a known limit), so they stop for the input. */
	FZ_SCRIBBLE_CQ = 1 << 6,
	FZ_HOLD_RELEASE = 1 << 7, /* the thread continues: every lock let go */
};

enum fz_fd_kind {
	FZ_FD_MEMFD = 0,    /* memfd of 4 KiB */
	FZ_FD_MEMFD_EMPTY,  /* memfd of 0 bytes */
	FZ_FD_MEMFD_HUGE,   /* sparse memfd of 1 TiB */
	FZ_FD_PIPE_R,	    /* read end of a pipe */
	FZ_FD_PIPE_W,	    /* write end of a pipe (nobody reads) */
	FZ_FD_DEVNULL,	    /* /dev/null */
	FZ_FD_EVENTFD,	    /* eventfd, semaphore mode (as the library's) */
	FZ_FD_EVENTFD_FULL, /* eventfd whose counter is at its maximum */
};

static const uint8_t fz_nfds[8] = {0, 1, 2, 3, 1, 10, 32, 1};

enum fz_src {
	FZ_SRC_HANDLE = 0, /* 0..15: the handle table */
	FZ_SRC_PID = 16,   /* the client's pid */
	FZ_SRC_MAX = 17,
};

#endif
