/*
 * The work queues' layout in the arena, one for a QP's send and receive
 * queues and an SRQ's: a WQE's stride for its scatter/gather entries and
 * inline data, and a ring's geometry and producer lock.
 */
#include "core/shmlock.h"
#include "daemon/objects.h"

uint32_t sr_wq_send_stride(uint32_t sge, uint32_t inl)
{
	uint32_t body = sge * sizeof(struct sr_sge_shm);

	if (inl > body)
		body = inl;
	return align64(sizeof(struct sr_send_wqe) + body);
}

uint32_t sr_wq_recv_stride(uint32_t sge)
{
	return align64(sizeof(struct sr_recv_wqe) + sge * sizeof(struct sr_sge_shm));
}

void sr_wq_init(struct sr_wq *wq, uint32_t max_wr, uint32_t max_sge, uint32_t max_inline,
		uint32_t stride, uint64_t wqe_off)
{
	wq->wqe_cnt = roundup_pow2(max_wr ? max_wr : 1);
	wq->max_wr = wq->wqe_cnt;
	wq->max_sge = max_sge;
	wq->stride = stride;
	wq->max_inline = max_inline;
	wq->wqe_off = wqe_off;
	sr_shm_lock_init(&wq->prod_lock);
}
