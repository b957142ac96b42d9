/*
 * A posting thread's own transmission of an RC QP's work requests to
 * another host (wire_tx.c): the send half of the engine's placement (b),
 * docs/architecture.md "Where the engine runs".
 */
#ifndef SR_DATAPATH_WIRE_TX_H
#define SR_DATAPATH_WIRE_TX_H

#include <stdbool.h>

#include <softrdma/layout.h>

struct sr_context;

/* After post_send published WQEs on wire QP s (sq_lock released): sends
 * what the engine allows from this thread.  True if every posted WQE has
 * gone, false if the engine must be rung: for the rest, or to take over
 * a grant the daemon gave at RTS (layout.h, wtx_unseen). */
bool sr_wire_post(struct sr_context *ctx, struct sr_qp_shm *s);
/* Before ibv_destroy_qp: an ACK handed to the QP's next request (by the
 * engine or a receive half, wire_rx.c) goes now, as an HCA acknowledges
 * what it received whatever the owner does next. */
void sr_wire_flush_ack(struct sr_context *ctx, struct sr_qp_shm *s);

#endif
