/*
 * The data path (src/datapath), as the verbs front installs it in a
 * context's ops table and calls it at a QP's or CQ's creation and
 * destruction: posting (post.c), polling (cq_poll.c), and a QP's flush.
 */
#ifndef SR_DATAPATH_DATAPATH_H
#define SR_DATAPATH_DATAPATH_H

#include <infiniband/verbs.h>

#include "verbs/objects.h"

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

#endif
