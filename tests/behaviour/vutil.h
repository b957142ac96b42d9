/*
 * Verbs helpers for the behaviour tests: opening the device, guarded
 * buffers, creating and connecting QPs the way applications do (RESET ->
 * INIT -> RTR -> RTS with a RoCE global address), polling with a deadline,
 * and random scatter/gather layouts over several regions.
 */
#ifndef SR_BEHAVE_VUTIL_H
#define SR_BEHAVE_VUTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "harness.h"

#define GUARD_BYTE 0xa5
#define MCAST_QPN  0xffffffu
#define GRH_LEN	   40

struct vdev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_pd *pd2; /* a second protection domain, for cross-PD checks */
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	union ibv_gid gid; /* GID sgid_index: the source GID of our QPs and AHs */
	int sgid_index;	   /* 0, or the GID of SR_BEHAVE_ADDR (hosts.h) */
	uint32_t mtu;	   /* active MTU in bytes */
};

void vdev_open(struct vdev *d);
void vdev_close(struct vdev *d);

/* A buffer whose region [p, p+len) sits between `guard` bytes of GUARD_BYTE
 * on each side, in the same pages, registered (if access >= 0). */
struct vbuf {
	char *map;
	size_t maplen;
	char *p;
	size_t len;
	size_t guard;
	struct ibv_mr *mr;
};

void vbuf_alloc(struct vbuf *b, size_t len, size_t guard);
void vbuf_reg(struct vdev *d, struct vbuf *b, size_t len, size_t guard, int access,
	      struct ibv_pd *pd);
void vbuf_free(struct vbuf *b);
/* Offset of the first guard byte that changed, or -1. */
long vbuf_guard_damage(const struct vbuf *b);

struct qp_spec {
	enum ibv_qp_type type;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_pd *pd; /* NULL: the device's first PD */
	int sig_all;
	uint32_t send_wr, recv_wr, send_sge, recv_sge, inline_data;
};

/* Connection attributes (the responder-side ones apply where we are one). */
struct conn {
	uint32_t access; /* qp_access_flags */
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint32_t qkey; /* UD */
};
extern const struct conn CONN_DEFAULT;

struct ibv_qp *vqp_create(struct vdev *d, const struct qp_spec *s);
/* RESET -> INIT -> RTR -> RTS.  For UD the remote fields are ignored. */
void vqp_connect(struct vdev *d, struct ibv_qp *qp, uint32_t lpsn, uint32_t rqpn, uint32_t rpsn,
		 const union ibv_gid *rgid, const struct conn *c);
int vqp_state(struct ibv_qp *qp);
int vqp_set_state(struct ibv_qp *qp, enum ibv_qp_state s);

/* Polls until n completions or timeout; returns how many it got. */
int vpoll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms);
/* Exactly one completion within 10 s (REQUIRE). */
void vpoll1(struct ibv_cq *cq, struct ibv_wc *wc);
/* Counts completions arriving within ms (expected: none). */
int vpoll_none(struct ibv_cq *cq, int ms);

struct ibv_ah *vah_create(struct vdev *d, const union ibv_gid *dgid);

/* Sends `count` datagrams: datagram k holds 8 bytes (tag << 32 | k), then
 * data stream UD_STREAM(tag, k), UD_LEN(k) bytes in all.  Returns the number
 * of sends that failed. */
#define UD_STREAM(tag, k) (1000u + (uint64_t)(tag)*100000u + (uint64_t)(k))
#define UD_LEN(k)	  (8u + (uint32_t)((k) % 200))
int ud_send_loop(struct vdev *d, struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_ah *ah,
		 uint32_t qpn, uint32_t qkey, uint64_t tag, int count);

/* ---- random scatter/gather layouts ---- */

#define LAYOUT_MAX 32

struct piece {
	int mr;	      /* index into the caller's region list */
	uint64_t off; /* offset in that region */
	uint32_t len;
};

/* Splits `total` bytes into 1..max_sge pieces (0 or 1 empty piece for total
 * 0) at random non-overlapping offsets over the regions (lengths in
 * region_len[]); returns the number of pieces. */
int layout_make(struct rng *r, const size_t *region_len, int nregion, uint64_t total, int max_sge,
		struct piece *out);
/* Local SGEs for pieces over local buffers. */
void layout_sges(const struct piece *pc, int n, struct vbuf *const *bufs, struct ibv_sge *sge);
/* Fills the gather list with data stream `stream` (position 0 at piece 0). */
void layout_fill(const struct piece *pc, int n, struct vbuf *const *bufs, uint64_t stream,
		 uint64_t pos);
/* Copies the scattered bytes out into one buffer. */
void layout_gather(const struct piece *pc, int n, struct vbuf *const *bufs, void *out, size_t cap);

#endif
