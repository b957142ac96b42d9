/*
 * The objects of libibverbs: each public verbs object embedded first in a
 * private struct (as rdma-core providers do), so the application's pointer
 * converts back with container_of.  The context keeps the control socket
 * to softrdmad and the arena mapping (its struct sr_devctx, which the
 * executor is handed); the other objects keep the daemon's handle and a
 * pointer to their shared state in the arena.  The verbs front (this
 * folder) makes them; the data path (src/datapath) posts to and polls
 * them, as a provider's post_send runs on its own QP.
 */
#ifndef SR_VERBS_OBJECTS_H
#define SR_VERBS_OBJECTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <softrdma/layout.h>
#include <softrdma/proto.h>

#include "shm/devctx.h"

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
	struct sr_devctx dc;	   /* what the data path needs of it (shm/devctx.h) */
	uint32_t async_fd_id;
	pthread_mutex_t lock; /* the object lists below */
	struct sr_list qps, srqs, cqs;
	/* the receive half (datapath/wire_rx.c): this context's number among the
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
	/* posts to its wire QPs, by any thread (datapath/wire_rx.h) */
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

#endif
