/*
 * The connection manager inside softrdmad: what the kernel's ib_cm and
 * rdma_cm do for a RoCE device.  librdmacm (src/rdmacm) drives it with
 * SR_OP_CM_* requests, as ucma's commands drive the kernel; its ids, event
 * channels and the IB CM state machine live here, and every connection is
 * set up with real IB CM MADs (src/wire/cm_mad.h) that go through the MAD
 * queue (cm_mad_queue.c): on one host the queue hands the bytes back to this
 * same state machine; between hosts QP1 over RoCEv2 carries them
 * (cm_wire.c, through the engine).  Files: cm_request.c (requests, validation), cm_id.c (ids,
 * channels, events, ports), cm_addr.c (address and route resolution),
 * cm_proto.c (sending and receiving REQ/REP/RTU/REJ/DREQ/DREP, SIDR),
 * cm_mad_queue.c (MAD delivery, retransmission timers), cm_wire.c (MADs to
 * and from other hosts), cm_neigh.c (routes and neighbours for resolution).
 */
#ifndef SR_DAEMON_CM_H
#define SR_DAEMON_CM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include "core/idalloc.h"
#include "daemon/daemon.h"
#include "wire/cm_mad.h"

#define SR_CM_MAX_IDS	  (1u << 17) /* comm ID = random tag << 17 | index */
#define SR_CM_MAX_CHANS	  (1u << 16)
#define SR_CM_MAX_BACKLOG 1024
/* CM response timeout 20 (IBTA 12.7.22: 4.096 us << 20 = 4.3 s per try) and
 * retries, as the kernel's CMA; an MRA's service timeout extends a wait */
#define SR_CM_RESPONSE_TIMEOUT 20
#define SR_CM_MAX_RETRIES      15
/* How long a disconnected id stays in timewait before TIMEWAIT_EXIT: the
 * kernel's CM waits its AV's timeout, the packet life time RoCE gets from
 * rdma_cm (16) plus one: 4.096 us << 17, 0.5 s */
#define SR_CM_TIMEWAIT_TIMEOUT 17

enum sr_cm_state {
	SR_CM_IDLE,
	SR_CM_ADDR_BOUND,
	SR_CM_ADDR_RESOLVED,
	SR_CM_ROUTE_RESOLVED,
	SR_CM_LISTEN,
	SR_CM_REQ_SENT,
	SR_CM_REQ_RCVD,
	SR_CM_REP_SENT,
	SR_CM_REP_RCVD,
	SR_CM_ESTABLISHED,
	SR_CM_DREQ_SENT,
	SR_CM_DREQ_RCVD,
	SR_CM_TIMEWAIT, /* disconnected: nothing more comes */
	SR_CM_SIDR_REQ_SENT,
	SR_CM_SIDR_REQ_RCVD,
};

struct sr_cm_event {
	struct sr_cm_event *next;
	struct sr_cm_event_wire w;
};

struct sr_cm_chan {
	uint32_t handle;
	struct sr_client *owner;
	int efd; /* the library's eventfd (semaphore mode): one count per event */
	struct sr_cm_event *head, **tail;
	uint32_t unsignalled; /* events posted, not counted in efd yet (cm_id.c) */
	struct sr_cm_chan *next_unsignalled;
};

struct sr_cm_id {
	uint32_t handle; /* index: also the low bits of the comm ID */
	uint32_t comm_id;
	struct sr_client *owner;
	struct sr_cm_chan *chan;
	struct sr_cm_id *listener; /* a child not yet reported: its listener */
	enum sr_cm_state state;
	uint32_t ps, qp_type;
	bool bound; /* holds its port in the port space */
	bool afonly, reuseaddr;
	/* AF_IB (librdmacm's sockaddr_ib, as IP addresses here): no IP CM
	 * header; a listener takes its service ID's REQs whatever their
	 * private data; dst_sid is the service ID a REQ goes to */
	bool af_ib;
	uint64_t dst_sid;
	uint8_t tos;
	int backlog, pending; /* LISTEN: CONNECT_REQUESTs queued, not yet read */
	struct sockaddr_storage src, dst;
	uint8_t sgid[16], dgid[16];
	uint32_t port_num;
	uint32_t remote_comm_id;
	uint64_t remote_guid;
	uint32_t qpn, psn, remote_qpn, remote_psn;
	uint8_t path_mtu;	/* a REQ's: the passive side's path (0: the port's) */
	struct sr_cm_conn conn; /* ours (CONNECT/ACCEPT) */
	/* CONNECT with SR_CM_FINISH: the QP's RTR and RTS moves, made when
	 * the REP comes (finish.n 0: the library finishes) */
	struct sr_cm_qp_moves finish;
	/* the message that waits for an answer: resent at deadline */
	uint8_t mad[SR_CM_MAD_SIZE];
	uint64_t deadline_ms; /* 0: no timer */
	uint32_t timeout_ms;
	int retries;
	struct sr_cm_id *next, **pprev; /* every id */
	/* its places in the two indexes (enum sr_cm_index): the bound ids of
	 * one port, for port clashes and listeners; the ids a REQ made, by
	 * the sender's comm ID, for repeated REQs */
	struct sr_cm_id *inext[2], **ipprev[2];
	/* resolve_addr waiting for the next hop's link address (cm_addr.c) */
	uint64_t resolve_deadline_ms; /* 0: not waiting */
	uint64_t resolve_next_ms;
	/* REQs for this bound id that came before its rdma_listen (cm_proto.c) */
	struct sr_cm_mad *parked;
};

struct sr_cm_mad {
	struct sr_cm_mad *next;
	uint8_t dgid[16], sgid[16];
	uint8_t bytes[SR_CM_MAD_SIZE];
};

/* A DREQ that outlives its id (destroyed, or its process gone) until the
 * peer's DREP or the last retry (cm_mad_queue.c) */
struct sr_cm_linger {
	struct sr_cm_linger *next;
	uint32_t comm_id;
	uint8_t sgid[16], dgid[16];
	uint8_t mad[SR_CM_MAD_SIZE];
	uint64_t deadline_ms;
	uint32_t timeout_ms;
	int retries;
};

struct sr_cm {
	struct sr_idalloc id_alloc, chan_alloc;
	struct sr_cm_id **ids;	   /* by index */
	struct sr_cm_chan **chans; /* by handle */
	struct sr_cm_id *all;
	struct sr_cm_id **by_port; /* [65536]: bound ids by source port */
	struct sr_cm_id **by_req;  /* [SR_CM_REQ_BUCKETS]: by remote_comm_id */
	struct sr_cm_mad *q_head, **q_tail;
	uint32_t timers; /* ids with a deadline */
	uint64_t next_timer_scan_ms;
	uint64_t mads_sent, mads_dropped, mads_bad;
	uint64_t mads_wire_tx, mads_wire_rx; /* to and from other hosts (cm_wire.c) */
	/* of those, sent and read by this thread itself (engine/gsi.c) */
	uint64_t mads_wire_tx_own, mads_wire_rx_own;
	uint32_t resolving; /* ids waiting for their neighbour (cm_addr.c) */
	struct sr_cm_linger *lingering;
	uint32_t nlinger;
};

/* cm_id.c */
struct sr_cm_id *sr_cm_id_new(struct sr_daemon *d, struct sr_client *owner, struct sr_cm_chan *chan,
			      uint32_t ps, uint32_t qp_type);
void sr_cm_id_free(struct sr_daemon *d, struct sr_cm_id *id);
enum sr_cm_index { SR_CM_BY_PORT, SR_CM_BY_REQ };
#define SR_CM_REQ_BUCKETS 4096
/* The first bound id of a port (then inext[SR_CM_BY_PORT]). */
struct sr_cm_id *sr_cm_port_ids(struct sr_daemon *d, uint16_t port);
/* Lists an id a REQ made under the REQ's comm ID (remote_comm_id set). */
void sr_cm_req_index(struct sr_daemon *d, struct sr_cm_id *id);
/* The first id made by a REQ whose comm ID hashes as comm_id's (then
 * inext[SR_CM_BY_REQ]). */
struct sr_cm_id *sr_cm_req_ids(struct sr_daemon *d, uint32_t comm_id);
struct sr_cm_id *sr_cm_id_by_comm(struct sr_daemon *d, uint32_t comm_id);
struct sr_cm_id *sr_cm_id_owned(struct sr_daemon *d, struct sr_client *c, uint32_t handle);
struct sr_cm_chan *sr_cm_chan_owned(struct sr_daemon *d, struct sr_client *c, uint32_t handle);
int sr_cm_chan_new(struct sr_daemon *d, struct sr_client *c, int efd, uint32_t *handle);
void sr_cm_chan_free(struct sr_daemon *d, struct sr_cm_chan *ch);
/* A new event for id on its channel; NULL without memory (the event is lost). */
struct sr_cm_event *sr_cm_event_new(struct sr_cm_id *id, uint32_t type, int32_t status);
void sr_cm_event_post(struct sr_cm_id *id, struct sr_cm_event *ev);
/* Counts the events posted since the last call in their channels' eventfds
 * (at the end of each request, after a reply that carries events, and of
 * each tick). */
void sr_cm_signal_flush(void);
/* Pops the oldest event of ch into w; -EAGAIN when none waits. */
int sr_cm_event_get(struct sr_daemon *d, struct sr_cm_chan *ch, struct sr_cm_event_wire *w);
/* Drops id's queued events; rejects children still waiting to be reported.
 * How many events left id's channel (each counted in its eventfd). */
uint32_t sr_cm_events_drop(struct sr_daemon *d, struct sr_cm_id *id);
/* Moves id's queued events (a listener's requests too) to channel to, in
 * order; how many left the old one (each counted in its eventfd). */
uint32_t sr_cm_events_move(struct sr_daemon *d, struct sr_cm_id *id, struct sr_cm_chan *to);
void sr_cm_id_info(const struct sr_cm_id *id, struct sr_cm_info *info);
/* Binds id to addr (port 0: an ephemeral one).  0 or -errno. */
int sr_cm_bind(struct sr_daemon *d, struct sr_cm_id *id, const struct sockaddr *addr);
/* Before a bound id listens: 0, or EADDRINUSE / EADDRNOTAVAIL when it is a
 * REUSEADDR id whose port another id shares (the kernel's rdma_listen). */
int sr_cm_listen_check(struct sr_daemon *d, const struct sr_cm_id *id);
uint16_t sr_cm_port(const struct sockaddr_storage *a);
bool sr_cm_addr_any(const struct sockaddr_storage *a);
/* An IPv4 or IPv6 multicast group address. */
bool sr_cm_addr_mcast(const struct sockaddr_storage *a);
/* The MGID of a group on RoCEv2: ::ffff:a.b.c.d, or the IPv6 group itself. */
void sr_cm_mgid_of(const struct sockaddr_storage *a, uint8_t gid[16]);

/* cm_request.c */
/* An AF_IB bind or resolve: the id takes the port space of its address's
 * service ID (a PS_IB id any of PS_IB, PS_TCP, PS_UDP).  0 or -errno. */
int sr_cm_ib_request(struct sr_cm_id *id, const struct sr_req *req);

/* cm_addr.c */
/* The device GID for an address of this host, its index, or -1. */
int sr_cm_gid_of(struct sr_daemon *d, const struct sockaddr_storage *a, uint8_t gid[16]);
int sr_cm_resolve_addr(struct sr_daemon *d, struct sr_cm_id *id, const struct sockaddr *src,
		       const struct sockaddr *dst, uint32_t timeout_ms);
int sr_cm_resolve_route(struct sr_daemon *d, struct sr_cm_id *id);
int sr_cm_sockaddr_in(const uint8_t raw[SR_CM_ADDR_LEN], struct sockaddr_storage *out);
/* Finishes or fails the resolutions that wait for a neighbour; true while
 * some still wait. */
bool sr_cm_resolve_poll(struct sr_daemon *d);
/* Stops id's pending resolution (the id goes away or resolves again). */
void sr_cm_resolve_cancel(struct sr_daemon *d, struct sr_cm_id *id);

/* cm_neigh.c: the kernel's routing and neighbour tables (rtnetlink) */
enum sr_cm_neigh {
	SR_CM_NEIGH_VALID,   /* the next hop's link address is known */
	SR_CM_NEIGH_PENDING, /* being resolved (ARP / neighbour discovery) */
	SR_CM_NEIGH_FAILED,  /* the kernel gave up on it */
};
/* The state of the next hop towards dst; with kick, asks the kernel to
 * resolve it if it is not valid (no privilege to: VALID, the first
 * datagram resolves it).  -errno when there is no route. */
int sr_cm_neigh_check(const struct sockaddr_storage *dst, bool kick);

/* cm_route_cache.c: the answers above per destination, until the kernel's
 * tables change (successes only) */
bool sr_cm_route_cached_src(const struct sockaddr_storage *dst, struct sockaddr_storage *via);
void sr_cm_route_keep_src(const struct sockaddr_storage *dst, const struct sockaddr_storage *via);
bool sr_cm_route_cached_neigh(const struct sockaddr_storage *dst);
void sr_cm_route_keep_neigh(const struct sockaddr_storage *dst);

/* cm_wire.c: MADs to and from other hosts through the engine's QP1 */
bool sr_cm_wire_up(void);
bool sr_cm_wire_send(struct sr_daemon *d, const struct sr_cm_mad *q);
void sr_cm_wire_poll(struct sr_daemon *d);

/* cm_proto.c */
int sr_cm_connect(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_req *req);
int sr_cm_accept(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_req *req);
int sr_cm_reject(struct sr_daemon *d, struct sr_cm_id *id, const struct sr_req *req);
int sr_cm_establish(struct sr_daemon *d, struct sr_cm_id *id);
int sr_cm_disconnect(struct sr_daemon *d, struct sr_cm_id *id);
/* Leaves the connection as destroying the id does (REJ, DREQ or DREP). */
void sr_cm_abandon(struct sr_daemon *d, struct sr_cm_id *id);
/* A MAD from sgid to this agent's dgid. */
void sr_cm_recv(struct sr_daemon *d, const uint8_t sgid[16], const uint8_t dgid[16],
		const uint8_t *buf, size_t len);
void sr_cm_timeout(struct sr_daemon *d, struct sr_cm_id *id);
/* The REQs parked on a bound id: delivered again once it listens, else
 * (deliver false: the id goes away) rejected with reason 8. */
void sr_cm_unpark(struct sr_daemon *d, struct sr_cm_id *id, bool deliver);

/* cm_mad_queue.c */
/* Queues a MAD's bytes for the CM agent that owns dgid. */
void sr_cm_mad_queue(struct sr_daemon *d, const uint8_t sgid[16], const uint8_t dgid[16],
		     const uint8_t bytes[SR_CM_MAD_SIZE]);
/* Runs the timers and delivers what is queued.  True if MADs remain. */
bool sr_cm_mad_run(struct sr_daemon *d);
/* Arms id's retransmission of its last MAD (0: disarm). */
void sr_cm_timer_set(struct sr_daemon *d, struct sr_cm_id *id, uint32_t timeout_ms, int retries);
uint64_t sr_cm_now_ms(void);
/* id goes away with its DREQ unanswered: the DREQ keeps its retries. */
void sr_cm_linger(struct sr_daemon *d, const struct sr_cm_id *id);
/* A DREP for comm_id, which no id has: ends a lingering DREQ's wait. */
void sr_cm_linger_done(struct sr_daemon *d, uint32_t comm_id);
void sr_cm_linger_fini(struct sr_daemon *d);

#endif
