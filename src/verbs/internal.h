/*
 * The verbs front's own declarations: what its files (device, PD, MR, CQ,
 * QP, SRQ, XRC, AH, async events, the ops table) call of each other.  The
 * objects are in objects.h; the data path's entry points in
 * datapath/datapath.h.
 */
#ifndef SR_VERBS_INTERNAL_H
#define SR_VERBS_INTERNAL_H

#include "datapath/datapath.h"
#include "verbs/objects.h"

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

/* The hook of cm_hooks.h: the daemon moved qp from state was for librdmacm. */
void sr_qp_moved_elsewhere(struct ibv_qp *qp, enum ibv_qp_state was);

#endif
