/*
 * Verbs helpers (see vutil.h).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hosts.h"
#include "vutil.h"

const struct conn CONN_DEFAULT = {
    .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	      IBV_ACCESS_REMOTE_ATOMIC,
    .timeout = 14,
    .retry_cnt = 7,
    .rnr_retry = 7,
    .min_rnr_timer = 1,
    .qkey = 0x11111111,
};

/*
 * The index of the RoCE v2 GID of address `addr` (IPv4, as the GID
 * ::ffff:a.b.c.d, or IPv6) in port 1's table, or -1.
 */
static int gid_index_of(struct ibv_context *ctx, int table_len, const char *addr)
{
	union ibv_gid want;
	struct in_addr v4;

	memset(&want, 0, sizeof(want));
	if (inet_pton(AF_INET, addr, &v4) == 1) {
		want.raw[10] = want.raw[11] = 0xff;
		memcpy(&want.raw[12], &v4, 4);
	} else if (inet_pton(AF_INET6, addr, want.raw) != 1) {
		return -1;
	}
	for (int i = 0; i < table_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0))
			continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, want.raw, 16))
			return i;
	}
	return -1;
}

void vdev_open(struct vdev *d)
{
	const char *addr = getenv(SR_ENV_ADDR);

	struct ibv_device **list;
	int n = 0;

	memset(d, 0, sizeof(*d));
	list = ibv_get_device_list(&n);
	REQUIRE(list && n >= 1);
	d->ctx = ibv_open_device(list[0]);
	REQUIRE(d->ctx);
	ibv_free_device_list(list);
	d->pd = ibv_alloc_pd(d->ctx);
	d->pd2 = ibv_alloc_pd(d->ctx);
	REQUIRE(d->pd && d->pd2);
	REQUIRE_OK(ibv_query_device(d->ctx, &d->attr));
	REQUIRE_OK(ibv_query_port(d->ctx, 1, &d->port));
	if (addr && *addr) {
		d->sgid_index = gid_index_of(d->ctx, d->port.gid_tbl_len, addr);
		if (d->sgid_index < 0)
			sr__fail(__FILE__, __LINE__, "no RoCE v2 GID for %s=%s", SR_ENV_ADDR, addr);
		REQUIRE(d->sgid_index >= 0);
	}
	REQUIRE_OK(ibv_query_gid(d->ctx, 1, d->sgid_index, &d->gid));
	REQUIRE(d->port.state == IBV_PORT_ACTIVE);
	d->mtu = 128u << d->port.active_mtu; /* IBV_MTU_256 is 1 */
}

void vdev_close(struct vdev *d)
{
	CHECK_EQ(ibv_dealloc_pd(d->pd2), 0);
	CHECK_EQ(ibv_dealloc_pd(d->pd), 0);
	CHECK_EQ(ibv_close_device(d->ctx), 0);
	memset(d, 0, sizeof(*d));
}

void vbuf_alloc(struct vbuf *b, size_t len, size_t guard)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);

	memset(b, 0, sizeof(*b));
	b->maplen = (len + 2 * guard + ps - 1) / ps * ps;
	if (!b->maplen)
		b->maplen = ps;
	b->map = mmap(NULL, b->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(b->map != MAP_FAILED);
	memset(b->map, GUARD_BYTE, b->maplen);
	b->p = b->map + guard;
	b->len = len;
	b->guard = guard;
	memset(b->p, 0, len);
}

void vbuf_reg(struct vdev *d, struct vbuf *b, size_t len, size_t guard, int access,
	      struct ibv_pd *pd)
{
	vbuf_alloc(b, len, guard);
	if (access < 0)
		return;
	b->mr = ibv_reg_mr(pd ? pd : d->pd, b->p, len, access);
	if (!b->mr)
		sr__fail(__FILE__, __LINE__, "ibv_reg_mr(len %zu, access %#x): errno %d", len,
			 access, errno);
	REQUIRE(b->mr);
}

void vbuf_free(struct vbuf *b)
{
	if (b->mr)
		CHECK_EQ(ibv_dereg_mr(b->mr), 0);
	if (b->map)
		munmap(b->map, b->maplen);
	memset(b, 0, sizeof(*b));
}

long vbuf_guard_damage(const struct vbuf *b)
{
	for (size_t i = 0; i < b->guard; i++) {
		if ((unsigned char)b->map[i] != GUARD_BYTE)
			return (long)i - (long)b->guard;
		if ((unsigned char)b->p[b->len + i] != GUARD_BYTE)
			return (long)(b->len + i);
	}
	return -1;
}

struct ibv_qp *vqp_create(struct vdev *d, const struct qp_spec *s)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.qp_type = s->type;
	a.send_cq = s->scq;
	a.recv_cq = s->rcq ? s->rcq : s->scq;
	a.srq = s->srq;
	a.sq_sig_all = s->sig_all;
	a.cap.max_send_wr = s->send_wr ? s->send_wr : 16;
	a.cap.max_recv_wr = s->srq ? 0 : (s->recv_wr ? s->recv_wr : 16);
	a.cap.max_send_sge = s->send_sge ? s->send_sge : 1;
	a.cap.max_recv_sge = s->srq ? 0 : (s->recv_sge ? s->recv_sge : 1);
	a.cap.max_inline_data = s->inline_data;
	qp = ibv_create_qp(s->pd ? s->pd : d->pd, &a);
	if (!qp)
		sr__fail(__FILE__, __LINE__, "ibv_create_qp(type %d): errno %d", s->type, errno);
	REQUIRE(qp);
	return qp;
}

void vqp_connect(struct vdev *d, struct ibv_qp *qp, uint32_t lpsn, uint32_t rqpn, uint32_t rpsn,
		 const union ibv_gid *rgid, const struct conn *c)
{
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = c->qkey;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = c->access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	REQUIRE_OK(ibv_modify_qp(qp, &a, mask));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = d->port.active_mtu;
		a.dest_qp_num = rqpn;
		a.rq_psn = rpsn;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *rgid;
		a.ah_attr.grh.sgid_index = (uint8_t)d->sgid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 16;
			a.min_rnr_timer = c->min_rnr_timer;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	REQUIRE_OK(ibv_modify_qp(qp, &a, mask));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = lpsn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = c->timeout;
		a.retry_cnt = c->retry_cnt;
		a.rnr_retry = c->rnr_retry;
		a.max_rd_atomic = 16;
		mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	REQUIRE_OK(ibv_modify_qp(qp, &a, mask));
}

int vqp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

int vqp_set_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = s;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

int vpoll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms)
{
	uint64_t end = sr_now_us() + (uint64_t)timeout_ms * 1000;
	unsigned spins = 0;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0) {
			sr__fail(__FILE__, __LINE__, "ibv_poll_cq returned %d", r);
			return got;
		}
		got += r;
		if (got >= n)
			break;
		if (r == 0 && ++spins > 64) {
			if (sr_now_us() > end)
				break;
			if (spins > 4096)
				sr_sleep_ms(0); /* a short nanosleep: lets the peer run */
		}
	}
	return got;
}

void vpoll1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n = vpoll(cq, wc, 1, 10000);

	if (n != 1)
		sr__fail(__FILE__, __LINE__, "no completion within 10 s");
	REQUIRE(n == 1);
}

int vpoll_none(struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc[8];
	uint64_t end = sr_now_us() + (uint64_t)ms * 1000;
	int got = 0;

	while (sr_now_us() < end) {
		int r = ibv_poll_cq(cq, 8, wc);

		if (r > 0) {
			got += r;
			for (int i = 0; i < r; i++)
				sr__fail(__FILE__, __LINE__,
					 "unexpected completion: wr_id %llu status %s opcode %d",
					 (unsigned long long)wc[i].wr_id,
					 ibv_wc_status_str(wc[i].status), wc[i].opcode);
		}
		sr_sleep_ms(1);
	}
	if (!got)
		sr__pass();
	return got;
}

struct ibv_ah *vah_create(struct vdev *d, const union ibv_gid *dgid)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.grh.dgid = *dgid;
	a.grh.sgid_index = (uint8_t)d->sgid_index;
	a.grh.hop_limit = 64;
	a.port_num = 1;
	ah = ibv_create_ah(d->pd, &a);
	REQUIRE(ah);
	return ah;
}

int ud_send_loop(struct vdev *d, struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_ah *ah,
		 uint32_t qpn, uint32_t qkey, uint64_t tag, int count)
{
	struct vbuf buf;
	int errors = 0;

	vbuf_reg(d, &buf, 256, 0, IBV_ACCESS_LOCAL_WRITE, NULL);
	for (int k = 0; k < count; k++) {
		uint64_t hdr = tag << 32 | (uint64_t)k;
		struct ibv_sge sge = {(uintptr_t)buf.p, UD_LEN(k), buf.mr->lkey};
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;

		memcpy(buf.p, &hdr, 8);
		pat_fill(buf.p + 8, UD_LEN(k) - 8, UD_STREAM(tag, k), 0);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)k;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn;
		wr.wr.ud.remote_qkey = qkey;
		if (ibv_post_send(qp, &wr, &bad) || vpoll(cq, &wc, 1, 10000) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			errors++;
	}
	vbuf_free(&buf);
	return errors;
}

/* ---- layouts ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int layout_make(struct rng *r, const size_t *region_len, int nregion, uint64_t total, int max_sge,
		struct piece *out)
{
	uint64_t cuts[LAYOUT_MAX + 1], cursor[16];
	int n, k = 0;

	REQUIRE(nregion >= 1 && nregion <= 16 && max_sge >= 1);
	if (max_sge > LAYOUT_MAX)
		max_sge = LAYOUT_MAX;
	if (!total) {
		n = (int)rng_range(r, 0, 1);
	} else {
		n = (int)rng_range(r, 1, (uint64_t)max_sge < total ? (uint64_t)max_sge : total);
		/* n-1 distinct cut points in (0, total) */
		for (int i = 0; i < n - 1; i++)
			cuts[i] = rng_range(r, 1, total - 1);
		qsort(cuts, n - 1, sizeof(cuts[0]), cmp_u64);
		k = 0;
		for (int i = 0; i < n - 1; i++)
			if (!k || cuts[i] != cuts[k - 1])
				cuts[k++] = cuts[i];
		n = k + 1;
		cuts[k] = total;
	}
	for (int i = 0; i < nregion; i++)
		cursor[i] = rng_range(r, 0, 63);
	for (int i = 0; i < n; i++) {
		uint64_t len = !total ? 0 : cuts[i] - (i ? cuts[i - 1] : 0);
		int m = (int)rng_range(r, 0, nregion - 1), tries;

		for (tries = 0; tries < nregion; tries++, m = (m + 1) % nregion)
			if (cursor[m] + len <= region_len[m])
				break;
		if (tries == nregion) {
			/* the regions are sized so this cannot happen */
			sr__fail(__FILE__, __LINE__, "layout: %llu bytes do not fit",
				 (unsigned long long)len);
			sr__fatal();
		}
		out[i].mr = m;
		out[i].off = cursor[m];
		out[i].len = (uint32_t)len;
		cursor[m] += len + rng_range(r, 0, 63);
	}
	return n;
}

void layout_sges(const struct piece *pc, int n, struct vbuf *const *bufs, struct ibv_sge *sge)
{
	for (int i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)(bufs[pc[i].mr]->p + pc[i].off);
		sge[i].length = pc[i].len;
		sge[i].lkey = bufs[pc[i].mr]->mr->lkey;
	}
}

void layout_fill(const struct piece *pc, int n, struct vbuf *const *bufs, uint64_t stream,
		 uint64_t pos)
{
	for (int i = 0; i < n; i++) {
		pat_fill(bufs[pc[i].mr]->p + pc[i].off, pc[i].len, stream, pos);
		pos += pc[i].len;
	}
}

void layout_gather(const struct piece *pc, int n, struct vbuf *const *bufs, void *out, size_t cap)
{
	size_t pos = 0;

	for (int i = 0; i < n && pos < cap; i++) {
		size_t l = pc[i].len < cap - pos ? pc[i].len : cap - pos;

		memcpy((char *)out + pos, bufs[pc[i].mr]->p + pc[i].off, l);
		pos += l;
	}
}
