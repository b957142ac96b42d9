/*
 * rsockets: the state every rsocket file shares (rsocket.c: sockets, the
 * connection manager side, options; rsocket_io.c: the data path over the
 * RC QP; rsocket_poll.c: rpoll, rselect and blocking waits).  The wire
 * protocol between two rsockets is described in docs/architecture.md
 * ("rsockets").
 */
#ifndef SR_RSOCKET_INT_H
#define SR_RSOCKET_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

/* immediate data of a WRITE WITH IMM: type in bits 31-30, value below */
#define RS_IMM_DATA   0u /* value: bytes written into the receive ring */
#define RS_IMM_CREDIT 1u /* value: bytes of the ring the peer has freed */
#define RS_IMM_CTRL   2u /* value: RS_CTRL_* (| slot << 8 for IOMAP) */
#define RS_IMM_VAL    0x3fffffffu
#define RS_CTRL_FIN   1u /* no more data from this side (shutdown/close) */
#define RS_CTRL_IOMAP 2u /* the sender rewrote iomap inbox slot (value >> 8) */
#define RS_CTRL_RQ    3u /* the sender posted (value >> 8) more receive WQEs */

#define RS_HELLO_VERSION 1
#define RS_IOMAP_SLOTS	 64 /* inbox entries: the most riomap()s per socket */

/* Connection private data, both directions (REQ and REP): where the
 * sender's receive ring and iomap inbox are.  40 bytes, little-endian. */
struct rs_hello {
	uint8_t version;
	uint8_t flags;
	uint16_t reserved;
	uint32_t rbuf_rkey;
	uint64_t rbuf_addr;
	uint32_t rbuf_size;
	uint32_t inbox_rkey;
	uint64_t inbox_addr;
	uint32_t inbox_slots;
	uint32_t rq_size; /* receive WQEs posted at the start (0: not counted) */
};

/* One iomap inbox slot, written by the peer with an RDMA WRITE. */
struct rs_iomap_wire {
	uint64_t offset; /* the riomap offset the peer chose */
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t valid;
};

struct rs_iomap {
	void *buf;
	size_t len;
	off_t offset;
	struct ibv_mr *mr;
	bool used;
};

/* A CONNECT_REQUEST waiting for raccept() on a listening rsocket. */
struct rs_pending {
	struct rs_pending *next;
	struct rdma_cm_id *id;
	struct rs_hello hello;
	bool hello_ok;
};

enum rs_state {
	RS_INIT,       /* rsocket(): an id, nothing more */
	RS_BOUND,      /* rbind() */
	RS_LISTEN,     /* rlisten() */
	RS_RESOLVING,  /* rconnect(): address and route being resolved */
	RS_CONNECTING, /* REQ sent, waiting for the REP */
	RS_ACCEPTING,  /* raccept(): REP sent, waiting for the RTU */
	RS_CONNECTED,  /* data may flow both ways */
	RS_ERROR,      /* the connection failed or broke (rs->err) */
};

struct rs {
	int fd; /* the socket number: the event channel's fd */
	int domain, type;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* threads waiting while another polls the fds */
	bool polling;	     /* a thread sleeps in rs_wait's poll */
	unsigned waiters;    /* threads on cond */
	unsigned refs;	     /* under the table lock */
	bool closing;
	enum rs_state state;
	int err;       /* SO_ERROR: pending error of a connect */
	int fatal;     /* errno of a broken connection */
	bool nonblock; /* O_NONBLOCK (rfcntl) */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	/* options (inherited by accepted sockets) */
	uint32_t sq_size, rq_size, inline_size, iomap_size;
	uint32_t rbuf_size, sbuf_size;
	int reuseaddr, reuseport, nodelay, keepalive, keepidle, keepcnt, keepintvl, maxseg,
	    oobinline;
	/* keepalive (rsocket_keepalive.c): work requests posted so far, and what
	 * the keepalive thread saw of them and when */
	uint64_t tx_count, ka_seen;
	long long ka_since_ns;
	bool ka_probed; /* a probe went since the last real send */
	int afonly;	/* -1: not set */
	struct linger linger;
	/* listening */
	struct rs_pending *pend_head, *pend_tail;
	unsigned npend;
	/* the connection */
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t sq_max;     /* send WRs the QP holds */
	uint32_t sq_used;    /* send WRs posted, not completed */
	uint32_t inline_max; /* the QP's inline capacity */
	uint8_t *rbuf;	     /* receive ring the peer writes into */
	struct ibv_mr *rmr;
	uint32_t rd_off;	/* next byte to read */
	uint32_t ravail;	/* bytes received, not read */
	uint32_t unreported;	/* bytes read, not yet credited to the peer */
	uint32_t rq_unreported; /* receive WQEs reposted, not yet reported (RQ) */
	uint8_t *sbuf;		/* staging ring for sends and riowrite */
	struct ibv_mr *smr;
	uint32_t s_head, s_used;
	uint64_t peer_rbuf;
	uint32_t peer_rkey, peer_rbuf_size;
	uint32_t peer_off;    /* where our next write lands in the peer's ring */
	uint32_t peer_credit; /* bytes of the peer's ring we may fill */
	/* messages with an immediate the peer has receive WQEs for: every
	 * WRITE WITH IMM takes one, and the peer reports its reposts */
	uint32_t peer_rq_credit;
	uint64_t peer_inbox;
	uint32_t peer_inbox_rkey, peer_inbox_slots;
	struct rs_iomap_wire *inbox; /* the peer's mappings, written by it */
	struct ibv_mr *inbox_mr;
	struct rs_iomap_wire rmaps[RS_IOMAP_SLOTS]; /* copies, taken in order */
	struct rs_iomap lmaps[RS_IOMAP_SLOTS];	    /* ours */
	/* control messages owed when the send queue had no room */
	bool owe_credit, owe_fin, owe_rq;
	uint32_t owe_iomap_mask_lo, owe_iomap_mask_hi;
	bool fin_sent, fin_rcvd, peer_gone, shut_rd, shut_wr, established;
	struct rs_dgram *dg; /* SOCK_DGRAM: the UD side (rsocket_dgram.c) */
};

/* rsocket.c */
struct rs *rs_get(int fd); /* a reference, or NULL (not an rsocket) */
void rs_put(struct rs *rs);
/* Takes every queued CM event of rs and acts on it.  Lock held. */
void rs_cm_progress(struct rs *rs);
int rs_set_errno(int e);
/* RS_DEBUG=1 in the environment: one line per unusual event on stderr */
extern int rs_debug;
void rs_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define RS_DBG(...)                                                                                \
	do {                                                                                       \
		if (rs_debug)                                                                      \
			rs_dbg(__VA_ARGS__);                                                       \
	} while (0)

/* rsocket_io.c */
/* Polls the CQ, handles what completed, sends owed control messages.
 * Lock held.  Returns true if anything happened. */
bool rs_cq_progress(struct rs *rs);
/* Sends FIN (once) and waits up to timeout_ms for the send queue to empty.
 * Lock held (dropped while waiting). */
void rs_send_fin(struct rs *rs, int timeout_ms);
int rs_post_ctrl(struct rs *rs, uint32_t imm);
/* A zero-length RDMA WRITE to the peer's ring (no receive WQE taken): 0,
 * or -1 when the send queue is full.  Lock held. */
int rs_post_probe(struct rs *rs);
int rs_io_setup(struct rs *rs);
void rs_io_teardown(struct rs *rs);
void rs_fill_hello(struct rs *rs, struct rs_hello *h);
void rs_take_hello(struct rs *rs, const struct rs_hello *h);
/* what rpoll would report for rs now (events asked | POLLERR/HUP). Lock held. */
short rs_revents(struct rs *rs, short events);

/* rsocket_dgram.c: SOCK_DGRAM over a UD QP.  Lock held; errnos positive,
 * the I/O calls return -errno. */
int rs_dgram_setup(struct rs *rs);
void rs_dgram_teardown(struct rs *rs);
int rs_dgram_listen(struct rs *rs);
void rs_dgram_cm(struct rs *rs);
bool rs_dgram_cq(struct rs *rs);
short rs_dgram_revents(struct rs *rs, short events);
ssize_t rs_dgram_sendto(struct rs *rs, const struct iovec *iov, int iovcnt, int flags,
			const struct sockaddr *to, socklen_t tolen);
ssize_t rs_dgram_recvfrom(struct rs *rs, const struct iovec *iov, int iovcnt, int flags,
			  struct sockaddr *from, socklen_t *fromlen);
int rs_dgram_connect(struct rs *rs, const struct sockaddr *to, socklen_t tolen);

/* rsocket_poll.c */
/* Blocks until rs may have changed (a completion or CM event) or timeout_ms
 * passes (-1: for ever).  Lock held on entry and return, dropped inside. */
void rs_wait(struct rs *rs, int timeout_ms);
/* rsocket.c: the next rsocket at a socket number >= *fd, with a reference
 * (rs_put), *fd moved past it; NULL at the end. */
struct rs *rs_next(int *fd);

/* rsocket_keepalive.c: starts the keepalive thread (once per process). */
void rs_keepalive_start(void);

#endif
