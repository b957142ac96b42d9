/*
 * What the files of softrdmad's control verbs share, and no other part of
 * the daemon sees: the registry's primitives (registry.c), each object
 * kind's handlers and destroy (obj_*.c), which dispatch.c's table and
 * registry.c's teardown call, and the few helpers one kind lends another.
 * A handler validates a request the way the kernel's uverbs layer and an
 * HCA's firmware would (ownership, object kinds, capability limits, the QP
 * state machine), allocates host-wide numbers, initialises the shared
 * object in the arena, and records it on the client's list.
 */
#ifndef SR_DAEMON_OBJECTS_H
#define SR_DAEMON_OBJECTS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/shmlock.h"
#include "daemon/daemon.h"

static inline uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

static inline uint32_t align64(uint32_t v)
{
	return (v + 63) & ~63u;
}

/* registry.c: a client's objects, their handles and keys */
/* The object of that kind and handle, if the requesting client owns it. */
struct sr_obj *sr_obj_owned(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
			    uint32_t handle);
struct sr_obj *sr_obj_new(struct sr_client *c, enum sr_obj_kind kind);
/* A new object of c's with its number, a handle or (MR, MW) a key: 0, or
 * -ENOMEM or the number allocator's error, with nothing left behind. */
int sr_obj_new_numbered(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
			struct sr_obj **op);
/* o holds a use of dep (at most four: o->deps), given back by sr_obj_unlink. */
void sr_obj_hold(struct sr_obj *o, struct sr_obj *dep);
void sr_obj_unlink(struct sr_obj *o);
void sr_obj_to_front(struct sr_obj *o);
void sr_obj_give(struct sr_obj *o, struct sr_client *c);
void sr_handle_free(struct sr_daemon *d, struct sr_obj *o);
struct sr_key_entry *sr_key_slot(struct sr_daemon *d, uint32_t key);
void sr_key_publish(struct sr_key_entry *e, const struct sr_key_entry *val);
void sr_key_free(struct sr_daemon *d, struct sr_obj *o);
/* Takes all n arena locks or none: 0, or SR_RETRY when one is held. */
int sr_lock_all(struct sr_lock *const *l, int n);
/* A pure destroy request (DEALLOC_PD, DEREG_MR, ...): the client's own
 * object of that kind, unless others use it. */
int sr_obj_destroy_owned(struct sr_daemon *d, struct sr_client *c, enum sr_obj_kind kind,
			 uint32_t handle);

/* How each kind goes (registry.c's table): its numbers and arena state
 * freed, its uses given back, o unlinked. */
typedef void sr_obj_destroy_fn(struct sr_daemon *d, struct sr_obj *o);

/* What a request brings and takes back besides itself (dispatch.c): the
 * descriptors that came with it (a handler that keeps one sets it to -1;
 * the rest are closed), the reply, and the descriptors that go with the
 * reply when it succeeds. */
struct sr_op_io {
	int *fds;
	int nfds;
	struct sr_rep *rep;
	int *out_fds; /* room for SR_MR_SEGS_PER_REC */
	int nout;
};

/* A request handler (dispatch.c's table): 0 or -errno for the reply's
 * status, or SR_RETRY or SR_REPLIED (daemon.h). */
typedef int sr_op_fn(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_op_io *io);

/* obj_fd.c: registered descriptors */
sr_op_fn sr_op_reg_fd, sr_op_get_fd;
sr_obj_destroy_fn sr_fd_destroy;
/* An event fd id a new CQ, QP or SRQ names: none, or one of the client's. */
bool sr_event_fd_ok(struct sr_daemon *d, struct sr_client *c, uint32_t fd_id);

/* obj_pd.c: PDs and XRC domains */
sr_op_fn sr_op_alloc_pd, sr_op_open_xrcd;
sr_obj_destroy_fn sr_pd_destroy, sr_xrcd_destroy;

/* obj_mr.c: MRs and MWs */
sr_op_fn sr_op_mr_segs, sr_op_reg_mr, sr_op_rereg_mr, sr_op_mr_map, sr_op_alloc_mw;
sr_obj_destroy_fn sr_mr_destroy, sr_mw_destroy;

/* obj_cq.c */
sr_op_fn sr_op_create_cq, sr_op_resize_cq;
sr_obj_destroy_fn sr_cq_destroy;

/* obj_wq.c: the work queues' layout, a QP's and an SRQ's */
uint32_t sr_wq_send_stride(uint32_t sge, uint32_t inl);
uint32_t sr_wq_recv_stride(uint32_t sge);
void sr_wq_init(struct sr_wq *wq, uint32_t max_wr, uint32_t max_sge, uint32_t max_inline,
		uint32_t stride, uint64_t wqe_off);

/* obj_srq.c */
sr_op_fn sr_op_create_srq, sr_op_modify_srq;
sr_obj_destroy_fn sr_srq_destroy;

/* obj_qp.c.  sr_qp_destroy: a QP that other clients opened passes to one
 * of them instead.  sr_rx_member_release: a client that goes frees its
 * member of the engine's socket group. */
sr_op_fn sr_op_create_qp, sr_op_modify_qp, sr_op_destroy_qp, sr_op_open_qp, sr_op_wire_rx;
sr_obj_destroy_fn sr_qp_destroy, sr_qpref_destroy;
void sr_rx_member_release(struct sr_daemon *d, struct sr_client *c);

/* obj_mcast.c.  A QP that goes leaves its groups (gid NULL: all). */
sr_op_fn sr_op_attach_mcast, sr_op_detach_mcast;
void sr_mcast_detach_qp(struct sr_daemon *d, uint32_t qpn, const uint8_t *gid);

#endif
