/*
 * Internal objects of the libibverbs front.  Each public verbs object is
 * embedded first in a private struct (as rdma-core providers do), so the
 * application's pointer converts back with container_of.  The context keeps
 * the control socket to softrdmad and the arena mapping; the other objects
 * keep the daemon's handle and a pointer to their shared state in the arena.
 */
#ifndef SR_VERBS_INTERNAL_H
#define SR_VERBS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <softrdma/layout.h>
#include <softrdma/proto.h>

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Mirrors rdma-core's `struct verbs_device { struct ibv_device; const ops *; }`:
 * the real libmlx5/libefa read the word after ibv_device to recognise their
 * own devices, so it must be readable and not theirs. */
struct sr_device {
	struct ibv_device dev;
	const void *ops_tail;
	struct sr_dev_info info;
};

struct sr_list {
	struct sr_list *next, *prev;
};

struct sr_context {
	struct verbs_context vctx; /* must be first: &vctx.context is handed out */
	int sock;		   /* control socket to softrdmad */
	pthread_mutex_t sock_lock; /* one request in flight per context */
	void *arena;
	uint64_t arena_size;
	struct sr_dev_info dev;
	uint32_t async_fd_id;
	pthread_mutex_t lock; /* the object lists below */
	struct sr_list qps, srqs, cqs;
	/* the receive half (shm/wire_rx.c): this context's number among the
	 * process's (threads' records name it, not its address, which a
	 * later context may reuse); whether it has QPs on the wire (set by
	 * posting to one); its member of the engine's socket group once
	 * asked for (state 0: not yet, 1: wire_rx_fd, member wire_rx_member;
	 * 2: none) */
	uint64_t serial;
	_Atomic uint32_t wire_rx_want;
	_Atomic uint32_t wire_rx_state;
	int wire_rx_fd;
	uint32_t wire_rx_member;
	/* posts to its wire QPs, by any thread (shm/wire_rx.h) */
	alignas(64) _Atomic uint32_t wire_posted;
};

struct sr_pd {
	struct ibv_pd pd;
	uint32_t handle;
	_Atomic uint32_t ah_users; /* AHs are library-only: the daemon cannot count them */
};

struct sr_mr {
	struct ibv_mr mr;
	uint64_t iova;
	unsigned int access;
	unsigned int nbacking;
	struct sr_backing **backing; /* regions this MR holds a use of */
};

struct sr_mw {
	struct ibv_mw mw;
};

struct sr_comp_channel {
	struct ibv_comp_channel ch;
	uint32_t fd_id;
	struct sr_context *ctx;
};

/* destroyed QPs a CQ remembers (cq_poll.c) */
#define SR_CQ_DEAD_QPNS 16

struct sr_cq {
	struct ibv_cq_ex cq; /* ibv_cq_ex first: ibv_cq_ex_to_cq is a cast */
	struct sr_list link;
	uint32_t handle;
	struct sr_cq_shm *shm;
	uint64_t wc_flags;	  /* ibv_create_cq_ex wc_flags */
	struct sr_cqe cur;	  /* extended polling: the entry being read */
	struct sr_lock poll_lock; /* consumers within this process (the arena lock type: one CAS) */
	uint32_t events_reported; /* by ibv_get_cq_event; under cq.mutex */
	uint32_t async_reported;  /* by ibv_get_async_event; under cq.mutex */
	/* QPs of this CQ destroyed lately, whose completions polling drops
	 * (cq_poll.c, "Completions of destroyed QPs"); under poll_lock */
	uint32_t ndead, dead_next;
	uint32_t dead_qpn[SR_CQ_DEAD_QPNS];
};

struct sr_srq {
	struct ibv_srq srq;
	struct sr_list link;
	uint32_t srqn;
	struct sr_srq_shm *shm;
	bool xrc;		 /* IBV_SRQT_XRC */
	uint32_t async_reported; /* by ibv_get_async_event; under srq.mutex */
};

struct sr_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t handle; /* the daemon's XRCD handle */
};

struct sr_qp {
	struct ibv_qp_ex qpx; /* qp_base first: an ibv_qp_ex for the wr_* API */
	struct sr_list link;
	bool has_qpx;	      /* created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
	uint32_t opened_xrcd; /* ibv_open_qp: the XRCD handle it was opened through */
	struct sr_qp_shm *shm;
	struct ibv_qp_cap cap;
	uint32_t async_reported; /* by ibv_get_async_event; under qp_base.mutex */
	/* ibv_wr_* builder state */
	int wr_err;
	uint32_t wr_start_head;
	struct sr_send_wqe *wr_cur;
};

struct sr_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

static inline struct sr_context *to_sctx(struct ibv_context *c)
{
	return container_of(c, struct sr_context, vctx.context);
}

static inline struct sr_device *to_sdev(struct ibv_device *d)
{
	return container_of(d, struct sr_device, dev);
}

#define to_spd(p)      container_of(p, struct sr_pd, pd)
#define to_smr(p)      container_of(p, struct sr_mr, mr)
#define to_scq(p)      container_of((struct ibv_cq_ex *)(p), struct sr_cq, cq)
#define to_sqp(p)      container_of(p, struct sr_qp, qpx.qp_base)
#define to_ssrq(p)     container_of(p, struct sr_srq, srq)
#define to_sah(p)      container_of(p, struct sr_ah, ah)
#define to_schannel(p) container_of(p, struct sr_comp_channel, ch)
#define to_sxrcd(p)    container_of(p, struct sr_xrcd, xrcd)

static inline void sr_list_init(struct sr_list *l)
{
	l->next = l->prev = l;
}

static inline void sr_list_add(struct sr_list *head, struct sr_list *n)
{
	n->next = head->next;
	n->prev = head;
	head->next->prev = n;
	head->next = n;
}

static inline void sr_list_del(struct sr_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

/* client.c: control requests (0 or -errno) */
int sr_ctx_request(struct sr_context *ctx, struct sr_req *req, struct sr_rep *rep, const int *fds,
		   int nfds, int *rfds, int *nrfds);
int sr_ctx_reg_fd(struct sr_context *ctx, int fd, uint32_t kind, uint32_t *fd_id);
void sr_ctx_close_fd(struct sr_context *ctx, uint32_t fd_id);
int sr_ctx_get_fd(struct sr_context *ctx, uint32_t fd_id);

/* ops.c */
void sr_ctx_set_ops(struct sr_context *ctx);
/* life.c: hold this process's life slot (layout.h struct sr_life_slot) */
void sr_life_hold(void *arena, uint32_t life);
void sr_life_let_go(void *arena, size_t size);

/* device.c */
int sr_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr,
		  size_t attr_len);
int sr_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *attr, size_t attr_size);

/* mr.c */
void sr_mr_context_closing(struct sr_context *ctx);
struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int sr_dealloc_mw(struct ibv_mw *mw);

/* cq.c */
struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);
int sr_cq_modify(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);

/* qp.c */
struct ibv_qp *sr_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
/* The hook of cm_hooks.h: ibv_create_qp_ex, and the modify init made with it. */
struct ibv_qp *sr_create_qp_init(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr,
				 const struct ibv_qp_attr *init, int init_mask);

/* srq.c */
struct ibv_srq *sr_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr);

/* xrc.c */
struct ibv_xrcd *sr_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr);
int sr_close_xrcd(struct ibv_xrcd *xrcd);
int sr_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_qp *sr_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr);

/* async.c: signal the owner of an arena object that it has an async event */
void sr_async_raise(struct sr_context *ctx, _Atomic uint32_t *bits, enum ibv_event_type ev,
		    uint32_t async_fd_id);

/* datapath (src/shm): installed into the ops table */
int sr_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int sr_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int sr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int sr_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc);
void sr_cq_qp_destroyed(struct ibv_cq *cq, uint32_t qpn);
void sr_cq_qp_created(struct ibv_cq *cq, uint32_t qpn);
/* Removes every completion of QP qpn from cq (cq_poll.c); srq_wq: its SRQ's queue */
void sr_cq_clean_qp(struct ibv_cq *cq, uint32_t qpn, struct sr_wq *srq_wq);
int sr_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
void sr_cq_ex_init(struct sr_cq *cq);
void sr_qp_ex_init(struct sr_qp *qp);
void sr_qp_flush(struct sr_context *ctx, struct sr_qp *qp);
/* The hook of cm_hooks.h: the daemon moved qp from state was for librdmacm. */
void sr_qp_moved_elsewhere(struct ibv_qp *qp, enum ibv_qp_state was);

#endif
