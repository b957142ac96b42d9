/*
 * The receive half: a thread that polls an empty CQ takes the host's RoCEv2
 * datagrams itself (see wire_rx.c).
 */
#ifndef SR_DATAPATH_WIRE_RX_H
#define SR_DATAPATH_WIRE_RX_H

#include <stdatomic.h>

#include "verbs/objects.h"

/* Inside a reader section (shm/epoch.h): reads what the engine's socket
 * holds and processes it; how many receive buffers it took (0: none, or
 * the receive half is off for this process). */
int sr_wire_rx_poll(struct sr_context *ctx);
/* A thread posted to a wire QP of ctx: its pollers read the engine's
 * socket from now on, but the poll that follows a post does not (a
 * program that polls once after each post, as rsockets' sends do, would
 * pay a system call a message for nothing: its peer cannot have answered
 * yet). */
static inline void sr_wire_rx_posted(struct sr_context *ctx)
{
	if (!atomic_load_explicit(&ctx->wire_rx_want, memory_order_relaxed))
		atomic_store_explicit(&ctx->wire_rx_want, 1, memory_order_relaxed);
	atomic_store_explicit(&ctx->wire_posted,
			      atomic_load_explicit(&ctx->wire_posted, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}
/* The calling thread may block in the kernel now (ibv_req_notify_cq): the
 * engine takes the socket back. */
void sr_wire_rx_sleep(struct sr_context *ctx);

#endif
