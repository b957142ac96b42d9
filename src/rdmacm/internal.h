/*
 * softrdma's librdmacm: shared declarations.  The library is the user-space
 * half of the connection manager, as rdma-core's librdmacm is over
 * /dev/infiniband/rdma_cm: ids, channels and the IB CM state machine live
 * in softrdmad (src/daemon/cm), reached over one control connection per
 * process (link.c); the library keeps the application-visible structs,
 * turns daemon events into struct rdma_cm_event with their payloads, and
 * drives the application's QP through INIT/RTR/RTS/ERR at the moments
 * rdma-core's librdmacm does (conn.c).
 */
#ifndef SR_RDMACM_INTERNAL_H
#define SR_RDMACM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <softrdma/proto.h>

/* The longest reply: struct sr_rep and SR_CM_EVENT_BATCH - 1 more events. */
#define SR_CM_EVENTS_REPLY                                                                         \
	(sizeof(struct sr_rep) + (SR_CM_EVENT_BATCH - 1) * sizeof(struct sr_cm_event_wire))

/* An event fetched from the daemon with others, not handed out yet. */
struct cm_cached {
	struct cm_cached *next;
	struct sr_cm_event_wire w;
};

struct cm_chan {
	struct rdma_event_channel ch; /* first: what the application sees */
	uint32_t handle;
	/* events fetched in a batch, oldest first; each still has its count
	 * in the eventfd.  The lock also covers the fetch itself (channel.c). */
	pthread_mutex_t lock;
	struct cm_cached *head, **tail;
	uint32_t inflight;     /* requests whose replies may bring events */
	pthread_cond_t landed; /* one of them added its events */
};

/* A multicast group the id joined (mcast.c). */
struct cm_mc {
	struct cm_mc *next;
	struct sockaddr_storage addr;
	uint8_t mgid[16];
	void *context;
	bool sendonly, attached, reported;
	uint32_t unacked; /* its events not yet acked (under the id's lock) */
};

struct cm_id {
	struct rdma_cm_id id; /* first: what the application sees */
	uint32_t handle;
	bool sync;	    /* created without a channel: calls wait for their event */
	bool connect_error; /* later REJECTED/DISCONNECTED are swallowed */
	bool own_send_cq, own_recv_cq;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t events_unacked;
	/* the connection, as the events told it */
	struct sr_cm_info info;
	uint32_t psn, remote_qpn, remote_psn, remote_qkey;
	uint8_t resp_res, init_depth, retry, rnr_retry; /* ours, as sent */
	uint8_t peer_resp_res, peer_init_depth;		/* the peer's, in our view */
	uint8_t tos, ack_timeout;
	/* ADDR_RESOLVED was handed out, and no resolve since: the route step
	 * is the library's (id.c); route_local: it was taken, the daemon's id
	 * still says ADDR_RESOLVED until the CONNECT (SR_CM_ROUTE_LOCAL) */
	bool addr_ok, route_local;
	/* made by rdma_create_id, and neither resolved, listened, connected
	 * nor joined since: its first RESOLVE_ADDR needs no reply (id.c) */
	bool fresh;
	/* AF_IB (afib.c): the addresses the application sees are sockaddr_ib;
	 * ib_ps is the port space of the bound service ID, dst_sid the
	 * service ID the application connects to */
	bool af_ib;
	uint16_t ib_ps;
	uint64_t dst_sid;
	/* rdma_create_ep on a passive id: what rdma_get_request builds */
	bool ep_qp;
	struct ibv_pd *ep_pd;
	struct ibv_qp_init_attr ep_attr;
	struct cm_mc *mcs; /* groups joined */
};

struct cm_event {
	struct rdma_cm_event ev; /* first: what the application sees */
	struct cm_id *owner;	 /* whose count the ack settles */
	struct cm_mc *mc;	 /* MULTICAST_JOIN/ERROR: the group's count too */
	uint8_t priv[224];
};

/* link.c: the device, the daemon connection, the id table */
/* RC and the two halves of XRC: a connection's QP with RC's attributes
 * (the kernel strips those an XRC half does not take) */
static inline bool cm_qpt_connected(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV;
}

struct cm_global {
	struct ibv_context *verbs;
	struct ibv_pd *pd;     /* the device's default PD (id->pd) */
	struct ibv_xrcd *xrcd; /* the device's XRC domain, made when first needed */
	struct sr_dev_info dev;
	struct ibv_device_attr attr;
};
extern struct cm_global cm_g;
/* Opens the device and the daemon connection once.  0 or -1/errno (ENODEV). */
int cm_init(void);
/* One request and its reply: 0 or -errno (the daemon's status). */
int cm_request(struct sr_req *req, struct sr_rep *rep, const int *fds, int nfds);
/* A request the daemon does not answer (SR_CM_NO_REPLY): 0 or -errno. */
int cm_send_only(struct sr_req *req);
/* The same for a reply that may be longer than struct sr_rep (cap bytes at
 * rep): its length in *len. */
int cm_request_long(struct sr_req *req, struct sr_rep *rep, size_t cap, size_t *len);
void cm_req_init(struct sr_req *req, uint32_t op, uint32_t handle);
/* A request that carries nothing but the id's handle: 0 or -errno. */
int cm_id_op(uint32_t handle, uint32_t op);
void cm_id_table_set(uint32_t handle, struct cm_id *id);
struct cm_id *cm_id_table_get(uint32_t handle);
/* The id of an event being reported, with the event counted on it. */
struct cm_id *cm_id_table_hold(uint32_t handle);
/* An event counted on id that is not handed out after all. */
void cm_id_release(struct cm_id *id);
/* -1 with errno = e (e > 0) */
int cm_err(int e);
int cm_gid_index(const uint8_t gid[16]);

/* channel.c */
struct rdma_event_channel *cm_channel_new(void);
/* rdma-core's ucma_complete: collects the event a synchronous call waits for. */
int cm_complete(struct cm_id *id);
/* A request about id whose reply may bring events of id's channel queued
 * meanwhile (kept for rdma_get_cm_event, which then need not ask): 0 or
 * -errno, as cm_request. */
int cm_id_request(struct cm_id *id, struct sr_req *req, struct sr_rep *rep);
/* The same for a request that carries nothing but the id's handle. */
int cm_id_op_events(struct cm_id *id, uint32_t op);
/* Queues an event of this library's own making on id's channel (its
 * addresses as the last event told them), counted in the eventfd as the
 * daemon counts its own.  0 or -errno. */
int cm_chan_local_event(struct cm_id *id, uint32_t event);
/* Destroys the id in the daemon, then drops the events of it that the
 * channel fetched but did not hand out (the handle may be reused next). */
void cm_chan_destroy_id(struct cm_id *id);

/* mcast.c */
/* A MULTICAST_JOIN from the daemon: the UD parameters, the join's context,
 * the QP attached (or MULTICAST_ERROR). */
void cm_mc_event(struct cm_event *e, struct cm_id *id, const struct sr_cm_event_wire *w);
void cm_mc_acked(struct cm_id *id, struct cm_mc *mc);
void cm_mc_free_all(struct cm_id *id);

/* id.c */
struct cm_id *cm_id_alloc(struct rdma_event_channel *ch, void *context, enum rdma_port_space ps,
			  enum ibv_qp_type qp_type, uint32_t handle);
void cm_id_apply_info(struct cm_id *id, const struct sr_cm_info *info);
socklen_t cm_addr_len(const struct sockaddr *a);

/* afib.c: AF_IB addresses, carried to the daemon as the IP addresses
 * their GIDs are */
struct sockaddr_ib;
bool cm_addr_is_ib(const struct sockaddr *a);
/* The port of a service ID (its low 16 bits, as far as the mask says). */
uint16_t cm_ib_port(const struct sockaddr_ib *sib);
/* The port space an id of port space ps binds the service ID in, or
 * -EPROTONOSUPPORT (the kernel's rule). */
int cm_ib_bind_ps(enum rdma_port_space ps, const struct sockaddr_ib *sib);
/* The IP address a GID stands for (IPv4-mapped: AF_INET), port set. */
void cm_ib_to_ip(const struct sockaddr_ib *sib, struct sockaddr_storage *out);
void cm_ip_to_ib(const struct sockaddr *ip, uint64_t sid, struct sockaddr_ib *out);
/* rdma_getaddrinfo's AF_IB result for an address getaddrinfo found:
 * an EAI_* code or 0. */
int cm_ip_to_ib_ai(const struct sockaddr *ip, enum rdma_port_space ps, struct sockaddr **out,
		   socklen_t *len);
/* An AF_IB id's route.addr, which the daemon gave as IP addresses. */
void cm_id_ib_addrs(struct cm_id *id);

/* conn.c */
/* The QP moves rdma-core makes on a connect response: RTR, RTS, then the
 * RTU.  0 or -errno. */
int cm_conn_response(struct cm_id *id);
/* The same, made by the daemon when the REP came (an ESTABLISHED with
 * SR_CM_EV_QP_MOVED): the library's view of the id and its QP follows. */
void cm_conn_moved(struct cm_id *id);
/* Our read/atomic depths, bounded by what the REP offered. */
void cm_conn_bound(struct cm_id *id);
int cm_modify_qp(struct cm_id *id, enum ibv_qp_state state);
void cm_qp_to_err(struct cm_id *id);

#endif
