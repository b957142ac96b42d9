/*
 * The agent: a helper process that owns its own verbs context and does what
 * the test process asks over a socketpair (create a QP, register memory,
 * post, poll, read its memory back, wait for an event...).  It makes the
 * "other process" of every two-sided test, while the test's logic and all
 * its checks stay in one place, in the order they happen.
 *
 * Objects in the agent are named by small indices (handles) it returns.
 * Requests and replies are a fixed header with twelve integer arguments and
 * an optional payload.
 */
#ifndef SR_BEHAVE_AGENT_H
#define SR_BEHAVE_AGENT_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include "harness.h"
#include "vutil.h"

enum ag_op {
	AG_INFO = 1,	 /* -> a0 active_mtu enum, a1 max_sge; payload: GID 0 */
	AG_CQ_CREATE,	 /* a0 cqe, a1 with channel -> a0 cq */
	AG_SRQ_CREATE,	 /* a0 max_wr, a1 max_sge, a2 limit -> a0 srq, a1 srqn */
	AG_SRQ_MODIFY,	 /* a0 srq, a1 limit */
	AG_SRQ_QUERY,	 /* a0 srq -> a0 max_wr, a1 limit */
	AG_QP_CREATE,	 /* a0 type, a1 scq, a2 rcq, a3 srq|-1, a4 sig_all, a5 send_wr,
			    a6 recv_wr, a7 send_sge, a8 recv_sge, a9 inline, a10 pd (0|1)
			    -> a0 qp, a1 qpn, a2 max_inline, a3 max_send_sge, a4 max_recv_sge */
	AG_QP_CONNECT,	 /* a0 qp, a1 rqpn, a2 rpsn, a3 lpsn, a4 access, a5 timeout,
			    a6 retry_cnt, a7 rnr_retry, a8 min_rnr_timer, a9 qkey; payload: GID */
	AG_QP_STATE,	 /* a0 qp, a1 new state or -1 -> a0 state */
	AG_QP_DESTROY,	 /* a0 qp */
	AG_MR_REG,	 /* a0 len, a1 guard, a2 access, a3 pd (0|1), a4 fill stream
			    -> a0 mr, a1 addr, a2 rkey, a3 lkey */
	AG_MR_DEREG,	 /* a0 mr */
	AG_MEM_READ,	 /* a0 mr, a1 off (from the region start; negative: guard), a2 len */
	AG_MEM_FILL,	 /* a0 mr, a1 off, a2 len, a3 stream, a4 pos */
	AG_MEM_CHECK,	 /* a0 mr, a1 off, a2 len, a3 stream (-1: guard bytes), a4 pos
			    -> a0 offset of first difference or -1 */
	AG_GUARD_CHECK,	 /* a0 mr -> a0 damaged offset or -1 */
	AG_POST_RECV,	 /* a0 qp or srq, a1 is srq, a2 wr_id, a3 nsge; payload: pieces */
	AG_POST_SEND,	 /* payload: struct ag_wr + pieces -> a0 post result, a1 new rkey */
	AG_BIND_MW1,	 /* a0 qp, a1 mw, a2 mr, a3 off, a4 len, a5 access, a6 wr_id
			    -> a0 post result, a1 new rkey */
	AG_MW_ALLOC,	 /* a0 type -> a0 mw, a1 rkey */
	AG_POLL,	 /* a0 cq, a1 n, a2 timeout ms -> a0 got; payload: ibv_wc[] */
	AG_REQ_NOTIFY,	 /* a0 cq, a1 solicited only */
	AG_GET_CQ_EVENT, /* a0 cq (and its channel), a1 nonblocking, a2 timeout ms (poll first)
			    -> a0 result, a1 errno, a2 event was for this cq */
	AG_GET_ASYNC,	 /* a0 nonblocking -> a0 result, a1 errno, a2 event type,
			    a3 srq or qp index of the element */
	AG_MCAST,	 /* a0 qp, a1 attach; payload: GID */
	AG_ATOMIC_LOOP,	 /* a0 qp, a1 cq, a2 raddr, a3 rkey, a4 count, a5 op (0 FAA, 1 CAS
			    increment), a6 batch -> a0 errors; payload: returned values */
	AG_UD_SEND_LOOP, /* a0 qp, a1 cq, a2 count, a3 dest qpn, a4 qkey, a5 tag; payload: dest
			    GID (see ud_send_loop) -> a0 errors */
	AG_WRITE_LOOP,	 /* a0 qp, a1 cq, a2 raddr, a3 rkey, a4 count, a5 len, a6 stream: count
			    signaled RDMA WRITEs of len bytes of stream, one at a time
			    -> a0 errors */
	AG_EXIT,
};

struct ag_req {
	uint32_t op;
	uint32_t len;
	int64_t a[12];
};

struct ag_rep {
	int64_t ret; /* 0, or -errno: the agent could not carry the request out */
	uint32_t len;
	uint32_t pad;
	int64_t a[12];
};

/* A work request for AG_POST_SEND, followed by nsge pieces over agent MRs. */
struct ag_wr {
	uint32_t qp, opcode, flags, nsge;
	uint64_t wr_id;
	uint32_t imm; /* network order, as in ibv_send_wr */
	uint32_t inv_rkey;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t ud_qpn, ud_qkey;
	uint32_t mw; /* BIND_MW (type 2) */
	uint64_t compare_add, swap;
	uint8_t ud_dgid[16];
	int32_t bind_mr;
	uint32_t bind_access;
	uint64_t bind_off, bind_len;
};

struct ag_piece {
	int32_t mr;
	uint32_t len;
	uint64_t off;
};

struct agent {
	struct child c;
	union ibv_gid gid;
	int max_sge;
	enum ibv_mtu active_mtu;
};

/* Forks an agent (call before opening any verbs object). */
void agent_start(struct agent *ag, const char *name);
/* Asks it to exit and waits. */
void agent_stop(struct agent *ag);

/* One request; REQUIREs that it was carried out (rep.ret == 0) unless
 * `may_fail`.  Reply payload goes to out (up to cap bytes). */
int64_t ag_call(struct agent *ag, const struct ag_req *rq, const void *payload, struct ag_rep *rp,
		void *out, size_t cap, int may_fail);
/* Sends a request without waiting (the reply is read with ag_reply). */
void ag_send(struct agent *ag, const struct ag_req *rq, const void *payload);
int64_t ag_reply(struct agent *ag, struct ag_rep *rp, void *out, size_t cap);

/* Convenience wrappers (REQUIRE success). */
int ag_cq(struct agent *ag, int cqe, int channel);
struct ag_qp {
	int h;
	uint32_t qpn;
	uint32_t max_inline, max_send_sge, max_recv_sge;
};
struct ag_qp ag_qp_create(struct agent *ag, enum ibv_qp_type type, int scq, int rcq, int srq,
			  int sig_all, int pd);
/* With explicit queue sizes: {send_wr, recv_wr, send_sge, recv_sge, inline}. */
struct ag_qp ag_qp_create_caps(struct agent *ag, enum ibv_qp_type type, int scq, int rcq, int srq,
			       int sig_all, int pd, const uint32_t caps[5]);
void ag_qp_connect(struct agent *ag, int qp, uint32_t lpsn, uint32_t rqpn, uint32_t rpsn,
		   const union ibv_gid *rgid, const struct conn *c);
int ag_qp_state(struct agent *ag, int qp);
struct ag_mr {
	int h;
	uint64_t addr;
	uint32_t rkey, lkey;
	uint64_t len;
};
struct ag_mr ag_mr_reg(struct agent *ag, uint64_t len, uint64_t guard, int access, int pd,
		       int64_t fill_stream);
/* Returns the post result (an errno, 0 on success). */
int ag_post_recv(struct agent *ag, int qp, int is_srq, uint64_t wr_id, const struct piece *pc,
		 int n, const int *mr_handles);
int ag_post_send(struct agent *ag, const struct ag_wr *wr, const struct piece *pc,
		 const int *mr_handles, uint32_t *new_rkey);
int ag_poll(struct agent *ag, int cq, struct ibv_wc *wc, int n, int timeout_ms);
long ag_mem_check(struct agent *ag, int mr, int64_t off, uint64_t len, int64_t stream,
		  uint64_t pos);
/* ag_mem_check until it finds no difference or timeout_ms pass: for data
 * that may still be on its way (a UC WRITE completes when sent). */
long ag_mem_wait(struct agent *ag, int mr, int64_t off, uint64_t len, int64_t stream, uint64_t pos,
		 int timeout_ms);
long ag_guard_check(struct agent *ag, int mr);
void ag_mem_read(struct agent *ag, int mr, int64_t off, uint64_t len, void *out);
void ag_mem_fill(struct agent *ag, int mr, int64_t off, uint64_t len, uint64_t stream,
		 uint64_t pos);

/* A connected RC/UC pair: our QP and the agent's, connected both ways. */
void pair_connect(struct vdev *d, struct ibv_qp *lqp, const struct conn *lc, struct agent *ag,
		  const struct ag_qp *aq, const struct conn *ac, struct rng *r);

#endif
