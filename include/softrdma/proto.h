/*
 * The control protocol between the library (libibverbs.so.1) and softrdmad:
 * fixed-size request and reply records over a SOCK_SEQPACKET Unix socket,
 * one reply per request, file descriptors (memfds, eventfds, the arena)
 * carried with SCM_RIGHTS.  This is the "slow path" of DESIGN.md: every
 * verb that creates, changes or destroys a resource goes through here, like
 * a kernel uverbs command; the data path never does.
 *
 * The daemon is found at the abstract socket name SR_SOCKET_FMT(uid, pid
 * namespace); the abstract namespace is per network namespace, so each
 * (netns, pid namespace) pair is one host.  The pid namespace is in the name
 * because the arena's locks and reader slots name processes and threads by
 * their ids: a daemon refuses a data-path client whose getpid() is not the
 * pid it sees (SO_PEERCRED), i.e. one from another pid namespace that was
 * pointed at it with SOFTRDMA_SOCKET (HELLO fails with EXDEV).
 *
 * Abstract names carry no permissions, so the daemon serves only processes
 * of its own effective uid (SO_PEERCRED): any other one gets, whatever its
 * first request, a refusal record (struct sr_rep, status -EACCES, u.refused)
 * and nothing else, and the daemon closes the connection.  Every refusal
 * (another uid, another pid namespace, another protocol version) is that one
 * record with its reason, followed by the close.
 */
#ifndef SOFTRDMA_PROTO_H
#define SOFTRDMA_PROTO_H

#include <assert.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

#include <softrdma/layout.h>

#define SR_PROTO_VERSION 12u
#define SR_SOCKET_FMT	 "softrdma-%u-%lu" /* abstract name: uid, pid namespace inode */
#define SR_DEV_NAME	 "soft0"
/* An MR is a list of segments, one per memfd backing it spans (earlier
 * registrations' page runs and the gaps between them).  A record carries
 * SR_MR_SEGS_PER_REC of them: REG_MR takes the ones MR_SEGS records staged
 * before it, and MR_MAP hands them out from a given index on. */
#define SR_MR_SEGS_PER_REC 32
#define SR_MR_MAX_SEGS	   (1u << 16)
#define SR_CTL_TEXT	   512 /* FAULT spec and TRACE path */

enum sr_op {
	SR_OP_HELLO = 1,
	SR_OP_ALLOC_PD,
	SR_OP_DEALLOC_PD,
	SR_OP_REG_FD,
	SR_OP_GET_FD,
	SR_OP_CLOSE_FD,
	SR_OP_REG_MR,
	SR_OP_DEREG_MR,
	SR_OP_MR_MAP,
	SR_OP_CREATE_CQ,
	SR_OP_RESIZE_CQ,
	SR_OP_DESTROY_CQ,
	SR_OP_CREATE_QP,
	SR_OP_MODIFY_QP,
	SR_OP_DESTROY_QP,
	SR_OP_CREATE_SRQ,
	SR_OP_MODIFY_SRQ,
	SR_OP_DESTROY_SRQ,
	SR_OP_ALLOC_MW,
	SR_OP_DEALLOC_MW,
	SR_OP_ATTACH_MCAST,
	SR_OP_DETACH_MCAST,
	SR_OP_STATUS,
	SR_OP_REREG_MR, /* handle: the key; u.reg_mr as REG_MR (MR_SEGS first); no segments keep the
			   pages */
	SR_OP_MR_SEGS,
	SR_OP_FAULT, /* u.fault.spec: fault injection on the wire (engine/fault.h); "off" */
	SR_OP_TRACE, /* one fd: capture the wire into it (u.trace.path shown); no fd: stop */
	/* the connection manager (src/daemon/cm): librdmacm's requests, as
	 * ucma's commands on /dev/infiniband/rdma_cm */
	SR_OP_CM_CHANNEL_CREATE, /* fds[0]: the channel's eventfd; rep.handle: channel */
	SR_OP_CM_CHANNEL_DESTROY,
	SR_OP_CM_CREATE_ID,    /* u.cm: channel, ps, qp_type; rep.handle: id */
	SR_OP_CM_DESTROY_ID,   /* rep.u.cm_info.events: events it had delivered */
	SR_OP_CM_BIND,	       /* u.cm.src; rep.u.cm_info */
	SR_OP_CM_RESOLVE_ADDR, /* u.cm.src (family 0: none), dst, timeout_ms */
	SR_OP_CM_RESOLVE_ROUTE,
	SR_OP_CM_LISTEN,  /* u.cm.backlog */
	SR_OP_CM_CONNECT, /* u.cm: qpn, psn, conn, private data */
	SR_OP_CM_ACCEPT,  /* u.cm.qp: QP moves first (as ESTABLISH) */
	SR_OP_CM_REJECT,
	SR_OP_CM_DISCONNECT, /* u.cm.qp: a move to ERR first (its failure ignored) */
	SR_OP_CM_ESTABLISH,  /* RTU after a CONNECT_RESPONSE; u.cm.qp.n > 0: the QP
			      * moves made first, the RTU only if they all succeed */
	SR_OP_CM_GET_EVENT,  /* handle: channel; rep.u.cm_event (status -EAGAIN: none);
			      * u.cm.value > 1: up to that many (SR_CM_EVENT_BATCH at
			      * most), rep.handle says how many: the first in
			      * rep.u.cm_event, the others follow rep in the record */
	SR_OP_CM_MIGRATE,    /* u.cm.channel: the new one */
	SR_OP_CM_QUERY,	     /* rep.u.cm_info */
	SR_OP_CM_SET_OPTION, /* u.cm.option, u.cm.value */
	/* XRC (IBTA A14): domains, and XRC_RECV QPs opened by number */
	SR_OP_OPEN_XRCD,  /* fds[0]: the file naming the domain (none: a private one);
			     u.xrcd.oflags; rep.handle: this client's handle */
	SR_OP_CLOSE_XRCD, /* handle: EBUSY while SRQs or QPs were made through it */
	SR_OP_OPEN_QP,	  /* handle: an XRC_RECV QPN; u.open_qp; rep.u.qp as CREATE_QP */
	SR_OP_CM_JOIN,	  /* u.cm.dst: an IP multicast group; queues MULTICAST_JOIN */
	SR_OP_WIRE_RX,	  /* fds[0] in the reply: the caller's member of the RoCEv2
			     engine's receive socket group, handle its index
			     (shm/wire_rx.c); -ENODEV without one */
	SR_OP_MAX
};

enum sr_fd_kind {
	SR_FD_MEM = 1,	 /* memfd backing registered memory */
	SR_FD_EVENT = 2, /* eventfd: completion channel or async event fd */
};

/* Why a daemon will not serve a client (sr_rep.u.refused.reason). */
enum sr_refusal {
	SR_REFUSED_UID = 1,	/* another user's process: status -EACCES */
	SR_REFUSED_PIDNS = 2,	/* a data-path client of another pid namespace: -EXDEV */
	SR_REFUSED_VERSION = 3, /* another protocol version: -EPROTO */
};

struct sr_gid_info {
	uint8_t gid[16];
	uint32_t type; /* enum ibv_gid_type */
	uint32_t ifindex;
	char ifname[16];
};

/* Device and port model, sent with the HELLO reply. */
struct sr_dev_info {
	char name[64];
	uint64_t node_guid;
	uint64_t sys_image_guid;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	uint32_t active_mtu; /* enum ibv_mtu */
	uint32_t max_mtu;
	uint32_t gid_cnt;
	struct sr_gid_info gids[SR_GID_TBL_LEN];
	uint64_t arena_size;
	uint32_t client_id;
	uint32_t daemon_pid;
	uint32_t life; /* this process's struct sr_life_slot + 1, to hold (0: none) */
	uint32_t unused;
};

struct sr_req_qp_caps {
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

/* A modify_qp request carries the attributes in a flattened form so that the
 * protocol does not depend on the library's struct padding. */
struct sr_qp_attr_wire {
	uint32_t qp_state, cur_qp_state, path_mtu, path_mig_state;
	uint32_t qkey, rq_psn, sq_psn, dest_qp_num;
	uint32_t qp_access_flags;
	uint16_t pkey_index, alt_pkey_index;
	uint8_t en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic;
	uint8_t min_rnr_timer, port_num, timeout, retry_cnt;
	uint8_t rnr_retry, alt_port_num, alt_timeout, pad;
	uint32_t rate_limit;
	struct sr_req_qp_caps cap;
	uint8_t ah_attr[32];
	uint8_t alt_ah_attr[32];
};
static_assert(sizeof(struct ibv_ah_attr) == 32, "ibv_ah_attr size");

/* Every scalar field of struct ibv_qp_attr that travels, once: both
 * conversions below expand this list, so they cannot drift apart. */
/* clang-format off */
#define SR_QP_ATTR_WIRE_FIELDS(X) \
	X(qp_state) X(cur_qp_state) X(path_mtu) X(path_mig_state) X(qkey) \
	X(rq_psn) X(sq_psn) X(dest_qp_num) X(qp_access_flags) X(cap.max_send_wr) \
	X(cap.max_recv_wr) X(cap.max_send_sge) X(cap.max_recv_sge) \
	X(cap.max_inline_data) X(pkey_index) X(alt_pkey_index) \
	X(en_sqd_async_notify) X(sq_draining) X(max_rd_atomic) \
	X(max_dest_rd_atomic) X(min_rnr_timer) X(port_num) X(timeout) X(retry_cnt) \
	X(rnr_retry) X(alt_port_num) X(alt_timeout) X(rate_limit)
/* clang-format on */

static inline void sr_qp_attr_to_wire(const struct ibv_qp_attr *a, struct sr_qp_attr_wire *w)
{
	memset(w, 0, sizeof(*w));
#define SR_X(f) w->f = a->f;
	SR_QP_ATTR_WIRE_FIELDS(SR_X)
#undef SR_X
	memcpy(w->ah_attr, &a->ah_attr, sizeof(w->ah_attr));
	memcpy(w->alt_ah_attr, &a->alt_ah_attr, sizeof(w->alt_ah_attr));
}

static inline void sr_qp_attr_from_wire(const struct sr_qp_attr_wire *w, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
#define SR_X(f) a->f = w->f;
	SR_QP_ATTR_WIRE_FIELDS(SR_X)
#undef SR_X
	memcpy(&a->ah_attr, w->ah_attr, sizeof(a->ah_attr));
	memcpy(&a->alt_ah_attr, w->alt_ah_attr, sizeof(a->alt_ah_attr));
}

struct sr_mr_seg {
	uint32_t fd_id; /* SR_FD_MEM registered by this client */
	uint32_t pad;
	uint64_t fd_off; /* offset in the memfd of the segment's first byte */
	uint64_t len;
};

/* QP moves a CM request makes before its own step (ACCEPT, ESTABLISH),
 * as ibv_modify_qp would one after another: librdmacm's RTR and RTS
 * without a round trip each.  The QP is one of the requesting process's. */
#define SR_CM_QP_MOVES 2
struct sr_cm_qp_moves {
	uint32_t qpn;
	uint32_t n; /* 0: none */
	uint32_t mask[SR_CM_QP_MOVES];
	struct sr_qp_attr_wire attr[SR_CM_QP_MOVES];
};

/* Connection parameters as they travel in CM requests and events. */
struct sr_cm_conn {
	uint8_t responder_resources, initiator_depth, flow_control, retry_count;
	uint8_t rnr_retry_count, srq, has_qp, pad;
	uint32_t qp_num, qkey;
};

/* A sockaddr_in6.  The daemon works in IP addresses: librdmacm turns an
 * AF_IB address (a GID, which on RoCE is an IP address) into one, and
 * says so with SR_CM_AF_IB (src/rdmacm/afib.c). */
#define SR_CM_ADDR_LEN 28
#define SR_CM_AF_IB    1u /* sr_req.u.cm.flags, sr_cm_info.flags */
/* sr_req.u.cm.flags of a CONNECT whose u.cm.qp holds the RTR and RTS
 * moves of the id's QP (from INIT), the REP's fields still to fill in:
 * the daemon makes them when the REP comes and sends the RTU itself, and
 * the event is ESTABLISHED with SR_CM_EV_QP_MOVED instead of
 * CONNECT_RESPONSE (cm_proto.c, recv_rep) */
#define SR_CM_FINISH 2u
/* sr_req.u.cm.flags of a CONNECT on an id whose route librdmacm reported
 * resolved itself (rdma_resolve_route after ADDR_RESOLVED: the daemon's
 * step would only have changed the state): the daemon takes the id from
 * ADDR_RESOLVED to ROUTE_RESOLVED first (cm_proto.c, sr_cm_connect) */
#define SR_CM_ROUTE_LOCAL 4u
/* sr_req.u.cm.flags of a RESOLVE_ADDR that gets no reply: librdmacm sends
 * it only where the daemon's answer can only be 0 (a fresh id, no source
 * address, an IP destination), so that a thousand resolutions leave back
 * to back; whatever fails is told by the event (ADDR_ERROR), as the
 * resolution's own failures always were (rdma_resolve_addr in id.c).  A
 * record whose handle is no id of the client's is answered as usual: every
 * record but this one gets a reply, garbage included (verbs_robust) */
#define SR_CM_NO_REPLY 8u

/* What the daemon knows of an id's addresses and path. */
struct sr_cm_info {
	uint8_t src[SR_CM_ADDR_LEN], dst[SR_CM_ADDR_LEN];
	uint8_t sgid[16], dgid[16];
	uint32_t port_num; /* 0: not bound to the device yet */
	uint32_t events;   /* DESTROY_ID: events of the id delivered by GET_EVENT */
	uint32_t state;
	uint32_t flags; /* SR_CM_AF_IB: the id speaks AF_IB (no IP CM header) */
	/* enum ibv_mtu: a passive id's path MTU, the REQ's (0: the port's) */
	uint32_t path_mtu;
};

/* Events one reply may hand over at most (one round trip for many): a
 * GET_EVENT's, and that of RESOLVE_ADDR, RESOLVE_ROUTE, CONNECT, ACCEPT,
 * REJECT, ESTABLISH and DISCONNECT when u.cm.value > 1 and u.cm.channel is
 * the id's channel (the events queued on it by then, as GET_EVENT gives). */
#define SR_CM_EVENT_BATCH 16

/* One event, as GET_EVENT hands it over. */
struct sr_cm_event_wire {
	uint32_t event; /* enum rdma_cm_event_type */
	int32_t status;
	uint32_t id;	    /* the id it is about (CONNECT_REQUEST: the new one) */
	uint32_t listen_id; /* CONNECT_REQUEST: the listener */
	struct sr_cm_conn conn;
	struct sr_cm_info info; /* the id's addresses and path now */
	uint32_t remote_psn;	/* the peer's starting PSN */
	uint32_t flags;		/* SR_CM_EV_QP_MOVED */
	uint32_t private_len;
	uint8_t private_data[224];
};
/* sr_cm_event_wire.flags: an active side's ESTABLISHED made by the daemon
 * (SR_CM_FINISH): the id's QP is at RTS and the RTU went out */
#define SR_CM_EV_QP_MOVED 1u

struct sr_req {
	uint32_t op;	 /* enum sr_op */
	uint32_t handle; /* object the request is about (PD, CQ, QPN, ...) */
	union {
		struct {
			uint32_t version;
			uint32_t flags; /* 1 = monitor (softrdma status): holds no resources */
			uint32_t pid;	/* the client's getpid(), in its own pid namespace */
		} hello;
		struct {
			uint32_t kind; /* enum sr_fd_kind */
		} reg_fd;
		struct {
			uint32_t pd;
			uint32_t access;
			uint64_t addr;
			uint64_t length;
			uint64_t iova;
			uint32_t nsegs;	 /* in this record, after the staged ones */
			uint32_t staged; /* staged by MR_SEGS before, 0 if none */
			struct sr_mr_seg segs[SR_MR_SEGS_PER_REC];
		} reg_mr;
		struct {
			uint32_t first; /* index of segs[0]: 0 starts a new list */
			uint32_t nsegs;
			struct sr_mr_seg segs[SR_MR_SEGS_PER_REC];
		} mr_segs;
		struct {
			uint32_t first; /* the segments from this index on */
		} mr_map;
		struct {
			uint32_t cqe;
			uint32_t channel_fd_id;
			uint32_t async_fd_id;
			uint32_t pad;
			uint64_t user_handle;
		} cq;
		struct {
			uint32_t pd;
			uint32_t type;
			uint32_t send_cq, recv_cq; /* CQ handles */
			uint32_t srqn;
			uint32_t sq_sig_all;
			uint32_t async_fd_id;
			uint32_t xrcd; /* XRC_RECV: the XRCD handle (no PD, CQs or queues) */
			uint64_t user_handle;
			struct sr_req_qp_caps cap;
			/* non-zero: a modify (to INIT) made on the new QP at
			 * once, as MODIFY_QP would; rep.u.qp.state says */
			uint32_t init_mask;
			uint32_t pad;
			struct sr_qp_attr_wire init;
		} create_qp;
		struct {
			uint32_t attr_mask;
			uint32_t pad;
			struct sr_qp_attr_wire attr;
		} modify_qp;
		struct {
			uint32_t pd;
			uint32_t max_wr, max_sge, srq_limit;
			uint32_t async_fd_id;
			uint32_t xrcd; /* IBV_SRQT_XRC: the XRCD handle, else 0 */
			uint64_t user_handle;
			uint32_t cq; /* IBV_SRQT_XRC: the CQ of its receive completions */
			uint32_t pad;
		} srq;
		struct {
			uint32_t oflags; /* O_CREAT, O_EXCL, as ibv_xrcd_init_attr */
		} xrcd;
		struct {
			uint32_t xrcd; /* the opener's XRCD handle of the QP's domain */
			uint32_t async_fd_id;
			uint64_t user_handle;
		} open_qp;
		struct {
			uint32_t pd;
			uint32_t type; /* IBV_MW_TYPE_1/2 */
		} mw;
		struct {
			uint8_t gid[16];
			uint16_t lid;
		} mcast;
		struct {
			char spec[SR_CTL_TEXT]; /* NUL-terminated */
		} fault;
		struct {
			char path[SR_CTL_TEXT]; /* for `softrdma status` only */
		} trace;
		struct {
			uint32_t channel;
			uint32_t ps; /* enum rdma_port_space */
			uint32_t qp_type;
			uint32_t timeout_ms;
			int32_t backlog;
			uint32_t psn;	 /* CONNECT/ACCEPT: our starting PSN */
			uint32_t reason; /* REJECT */
			uint32_t option, value;
			uint32_t private_len;
			struct sr_cm_conn conn;
			/* BIND, RESOLVE_ADDR with SR_CM_AF_IB: ps is the port
			 * space of the address's service ID, sid the
			 * destination's service ID as the REQ carries it */
			uint32_t flags;
			uint64_t sid;
			uint8_t src[SR_CM_ADDR_LEN], dst[SR_CM_ADDR_LEN];
			uint8_t private_data[224];
			struct sr_cm_qp_moves
			    qp; /* ACCEPT, ESTABLISH, DISCONNECT; CONNECT (SR_CM_FINISH) */
		} cm;
	} u;
};

struct sr_rep {
	int32_t status;	 /* 0 or -errno */
	uint32_t handle; /* new object's handle/number */
	union {
		struct sr_dev_info hello;
		/* the only reply a refused client gets; then the daemon closes */
		struct {
			uint32_t reason;     /* enum sr_refusal */
			uint32_t version;    /* the daemon's SR_PROTO_VERSION */
			uint32_t daemon_uid; /* its effective uid */
			uint32_t client_uid; /* the client's, as the daemon sees it (SO_PEERCRED) */
			uint32_t client_pid; /* the client's pid, as the daemon sees it */
		} refused;
		struct {
			uint32_t fd_id;
		} reg_fd;
		struct {
			uint32_t lkey, rkey;
		} mr;
		struct {
			uint64_t iova, length;
			uint64_t reg_seq; /* registration number of these pages */
			uint32_t owner_pid;
			uint32_t nsegs; /* of the MR */
			uint32_t first; /* index of segs[0] */
			uint32_t count; /* segments (and fds) in this record */
			struct sr_mr_seg segs[SR_MR_SEGS_PER_REC]; /* fd_id replaced by the order of
								      passed fds */
		} mr_map;
		struct {
			uint64_t off; /* arena offset of struct sr_cq_shm */
			uint32_t max_cqe;
		} cq;
		struct {
			uint64_t off; /* arena offset of struct sr_qp_shm */
			struct sr_req_qp_caps cap;
			uint32_t type;	/* OPEN_QP: the QP's type */
			uint32_t state; /* CREATE_QP: after u.create_qp.init_mask's modify */
		} qp;
		struct {
			uint32_t state; /* new QP state */
		} modify_qp;
		struct {
			uint64_t off; /* arena offset of struct sr_srq_shm */
			uint32_t max_wr, max_sge;
		} srq;
		struct {
			uint32_t rkey;
		} mw;
		struct {
			uint32_t len; /* STATUS: text bytes that follow in further records */
		} status;
		struct {
			char text[SR_CTL_TEXT]; /* FAULT: the spec in force, or why not */
		} fault;
		struct {
			uint64_t pkts; /* TRACE: packets written to the capture it ended */
		} trace;
		struct sr_cm_info cm_info;
		struct sr_cm_event_wire cm_event;
	} u;
};

#define SR_STATUS_CHUNK 4096

#endif
