/*
 * The receive half: a thread that polls an empty CQ takes the host's RoCEv2
 * datagrams itself (see wire_rx.c).
 */
#ifndef SR_SHM_WIRE_RX_H
#define SR_SHM_WIRE_RX_H

struct sr_context;

/* Inside a reader section (shm/epoch.h): reads what the engine's socket
 * holds and processes it; how many receive buffers it took (0: none, or
 * the receive half is off for this process). */
int sr_wire_rx_poll(struct sr_context *ctx);
/* The calling thread may block in the kernel now (ibv_req_notify_cq): the
 * engine takes the socket back. */
void sr_wire_rx_sleep(struct sr_context *ctx);

#endif
