/*
 * softrdmad internals: the per-host daemon that plays the HCA firmware and
 * the kernel's uverbs layer.  It owns the arena (layout.h), allocates every
 * host-wide number (QPN, SRQN, keys), keeps the registry of resources per
 * client process, validates control verbs, and reclaims everything a client
 * held when its socket closes (exit, crash or SIGKILL alike).
 */
#ifndef SR_DAEMON_H
#define SR_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <softrdma/layout.h>
#include <softrdma/proto.h>

#include "core/idalloc.h"

enum sr_obj_kind {
	SR_OBJ_FD = 1,
	SR_OBJ_PD,
	SR_OBJ_MR,
	SR_OBJ_MW,
	SR_OBJ_CQ,
	SR_OBJ_SRQ,
	SR_OBJ_QP,
	SR_OBJ_AH,
	SR_OBJ_MCAST,
	SR_OBJ_XRCD,  /* a client's handle on an XRC domain (struct sr_xrcd_dom) */
	SR_OBJ_QPREF, /* a client's ibv_open_qp of another's XRC_RECV QP */
	SR_OBJ_KINDS
};

struct sr_client;

/* An XRC domain (IBTA A14): host-wide, named by the inode of the file a
 * process opened it with (as the kernel's table keyed by inode), or
 * private (no file).  Lives while any client holds a handle on it; the
 * daemon keeps the file open meanwhile, so the inode cannot be reused. */
struct sr_xrcd_dom {
	uint32_t id; /* the number SRQs and XRC_RECV QPs carry in the arena */
	uint32_t handles;
	int fd; /* -1: private */
	uint64_t dev, ino;
	struct sr_xrcd_dom *next;
};

/* One registered resource.  `users` counts objects that depend on this one
 * (QPs on a CQ, MRs on a PD...): destroying it while users > 0 is EBUSY,
 * as in the kernel. */
struct sr_obj {
	enum sr_obj_kind kind;
	uint32_t handle; /* handle, QPN, SRQN or key */
	struct sr_client *owner;
	struct sr_obj *cnext, *cprev; /* owner's list */
	uint32_t users;
	struct sr_obj *deps[4]; /* objects this one holds a use of */
	/* XRC_RECV QP: the SR_OBJ_QPREFs of other clients that opened it
	 * (ibv_open_qp), linked by ref_next; the QP passes to one of them when
	 * its owner destroys it or goes (IBTA A14: it lives while opened) */
	struct sr_obj *refs, *ref_next;
	union {
		struct {
			int fd;
			uint32_t kind;
		} fd;
		struct {
			uint64_t addr, length, iova;
			uint64_t reg_seq;
			uint32_t access;
			uint32_t nsegs;
			struct sr_mr_seg *segs; /* malloc'd */
		} mr;
		struct {
			uint64_t off;
			uint64_t size;
			/* CQ: its ring, kept here because any process of the
			 * user can write the arena and the heap's bookkeeping
			 * must not follow: the ring's chunk once resized (0:
			 * inside the first chunk) and its entry count */
			uint64_t ring_off;
			uint32_t cqe_cnt;
			/* connected QP: the chunk of the engine's state for
			 * it (sr_qp_shm.eng_off), kept here for the same reason */
			uint64_t eng_off, eng_size;
		} shm; /* CQ, QP, SRQ: heap chunk */
		struct {
			uint32_t type;
		} mw;
		struct {
			uint8_t gid[16];
			uint16_t lid;
			uint32_t qpn;
		} mcast;
		struct {
			struct sr_xrcd_dom *dom;
		} xrcd;
		struct {
			struct sr_obj *qp;
			uint32_t async_fd_id;
			uint64_t user_handle;
		} qpref;
	} u;
};

struct sr_reply;

struct sr_client {
	int sock;
	pid_t pid;
	uid_t uid;   /* SO_PEERCRED: its effective uid when it connected */
	uint32_t id; /* 0 until its HELLO is accepted */
	bool monitor;
	bool internal; /* the daemon's own RoCEv2 engine (engine.c) */
	bool foreign;  /* another uid (or unknown): refused at its first request */
	bool refused;  /* refusal sent: client.c drops the connection */
	uint64_t since_ms;
	bool broken;	   /* a reply was lost: dropped once its request is done */
	uint32_t fds_held; /* descriptors it registered (REG_FD) */
	char comm[32];
	struct sr_obj *objs; /* newest first */
	/* Replies its socket had no room for, oldest first (client.c).  While
	 * there are any, the daemon reads no more of its requests. */
	struct sr_reply *out, **out_tail;
	/* A request waiting for arena locks (SR_RETRY), run again every poll
	 * round; meanwhile no more of its requests are read either. */
	struct sr_req *deferred;
	struct sr_mr_seg *staged; /* MR_SEGS records for the next REG_MR or REREG_MR */
	uint32_t nstaged;
	uint32_t rx_member; /* its member of the engine's socket group (0: none) */
	uint32_t life;	    /* its process's struct sr_life_slot + 1 (life.c; 0: none) */
	struct sr_client *next;
};

struct sr_daemon {
	int listen_fd;
	uid_t uid; /* geteuid(): the only uid it serves */
	int arena_fd;
	void *arena;
	uint64_t arena_size;
	struct sr_dev_info dev;
	struct sr_client *clients;
	uint32_t next_client_id;
	int idle_timeout_s;
	/* Descriptors clients registered (REG_FD), and how many they may: the
	 * rest of RLIMIT_NOFILE stays for client sockets and queued replies,
	 * and one process may hold half of the budget, so that a process
	 * hoarding descriptors locks neither new clients nor others out. */
	uint32_t fds_held, fds_budget;
	uint64_t accept_paused_until; /* ms: out of descriptors at accept */

	struct sr_idalloc ids[SR_OBJ_KINDS]; /* PD, CQ, FD, AH, MCAST handles */
	struct sr_idalloc qpn_ids, srqn_ids, key_ids;
	struct sr_obj **by_handle[SR_OBJ_KINDS]; /* handle index -> object */
	struct sr_obj **qp_by_idx, **srq_by_idx, **key_by_idx;
	struct sr_cm *cm; /* the connection manager (cm/) */
	struct sr_xrcd_dom *xrcds;
	uint32_t next_xrcd_id;
	uint32_t rx_members_used, rx_member_last; /* obj_qp.c, rx_member */
};

/* device.c */
void sr_device_init(struct sr_dev_info *dev);

/* heap.c: arena creation and the heap allocator (offsets, size classes) */
int sr_heap_init(struct sr_daemon *d, uint64_t size);
uint64_t sr_heap_alloc(struct sr_daemon *d, uint64_t size, uint64_t *got);
void sr_heap_free(struct sr_daemon *d, uint64_t off, uint64_t size);
/* Retires a destroyed object's chunk (its table slot already cleared): reused
 * once no data-path reader that could have found it is still inside. */
void sr_heap_free_later(struct sr_daemon *d, uint64_t off, uint64_t size);
/* Reuses the retired chunks that are safe now (all: every one, at exit). */
void sr_heap_reap(struct sr_daemon *d, bool all);
/* The oldest epoch a live reader published (UINT64_MAX: none, 0: an
 * unslotted reader is inside); clears the slots of dead processes. */
uint64_t sr_heap_min_reader(struct sr_daemon *d);
/* Frees every epoch slot of a process that is gone. */
void sr_heap_forget_pid(struct sr_daemon *d, uint32_t pid);

/* life.c: the slot of a process's life (layout.h struct sr_life_slot) */
uint32_t sr_life_attach(struct sr_daemon *d, struct sr_client *c);
void sr_life_detach(struct sr_daemon *d, struct sr_client *c);
/* Frees the slots of every process that is gone, pinning or not (a fork
 * child's, whose connection carries its parent's pid). */
void sr_heap_sweep_slots(struct sr_daemon *d);
/* Chunks retired and not yet reusable, and their bytes. */
size_t sr_heap_deferred(uint64_t *bytes);
uint64_t sr_daemon_now_ms(void);
uint64_t sr_heap_used(void);
void sr_heap_fini(struct sr_daemon *d);

/* registry.c: the registry of every client's objects, and their teardown */
int sr_objects_init(struct sr_daemon *d);
void sr_objects_fini(struct sr_daemon *d);
struct sr_obj *sr_obj_lookup(struct sr_daemon *d, enum sr_obj_kind kind, uint32_t handle);
void sr_client_teardown(struct sr_daemon *d, struct sr_client *c);
/* dispatch.c: handles one request and replies, or returns SR_RETRY without
 * replying: an arena lock it needs is held (registry.c, sr_lock_all), run
 * it again later.  The handlers are in obj_*.c (objects.h). */
#define SR_RETRY 1
/* A handler that sent its reply itself (one larger than struct sr_rep). */
#define SR_REPLIED 2
int sr_handle_request(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req, int *fds,
		      int nfds);
/* obj_qp.c: the QP moves a CM request carries (ACCEPT, ESTABLISH), one
 * after another under the QP's locks, as that many MODIFY_QPs would make
 * them: 0, -errno of the first that fails (those before it stay made), or
 * SR_RETRY with none made.  from >= 0: only from that state (else -EINVAL,
 * none made). */
struct sr_cm_qp_moves;
int sr_qp_moves(struct sr_daemon *d, struct sr_client *c, const struct sr_cm_qp_moves *m, int from);
/* stall.c: the timer of QPs whose process is not polling (true: some wait) */
bool sr_daemon_tick(struct sr_daemon *d);

/* client.c: one connection (main.c's poll loop and the fuzzer call these) */
/* A connection of process pid running as uid: one of another uid than the
 * daemon's is foreign (refused at its first request).  NULL (the caller
 * closes sock) without memory, or when SR_FOREIGN_MAX foreign connections
 * wait already. */
struct sr_client *sr_client_add(struct sr_daemon *d, int sock, pid_t pid, uid_t uid);
/* Whether the client's process has capability cap (linux/capability.h)
 * now, in the daemon's user namespace: its CapEff, if it shares that
 * namespace (a process that is root only in a namespace of its own has
 * none of the kernel's capable() here).  False when it cannot be read. */
bool sr_client_capable(const struct sr_client *c, int cap);
/* Drops foreign connections that sent no request for SR_FOREIGN_WAIT_MS. */
void sr_client_drop_silent_foreign(struct sr_daemon *d);
/* Reclaims everything the client holds, closes its socket, frees it. */
void sr_client_drop(struct sr_daemon *d, struct sr_client *c, const char *why);
/* Receives one record from the client's socket and dispatches it. */
int sr_client_serve(struct sr_daemon *d, struct sr_client *c);
/* Sends a reply record without ever blocking: what the socket has no room
 * for waits in c->out.  0, or -errno (the client is then broken). */
int sr_client_send(struct sr_client *c, const void *buf, size_t len, const int *fds, int nfds);
/* Sends what waits in c->out, as far as the socket takes it.  Returns 0,
 * or -1 when the client was dropped (its socket failed). */
int sr_client_flush(struct sr_daemon *d, struct sr_client *c);
/* Runs c->deferred again.  Returns 0, or -1 when the client was dropped. */
int sr_client_retry(struct sr_daemon *d, struct sr_client *c);
/* Dispatches one received record: n bytes of buf as sr_msg_recv returned
 * them (<= 0: the socket closed or failed) with the nfds descriptors that
 * came with it, which the call consumes.  Returns 0, or -1 when the client
 * was dropped (c is freed). */
int sr_client_record(struct sr_daemon *d, struct sr_client *c, const void *buf, long n, int *fds,
		     int nfds);

/* cm/: the connection manager (cm/cm.h).  sr_cm_request answers the
 * SR_OP_CM_* requests; sr_cm_client_gone leaves a client's connections;
 * sr_cm_tick delivers queued CM MADs and runs CM timers (true: more to do). */
struct sr_cm;
int sr_cm_init(struct sr_daemon *d);
void sr_cm_fini(struct sr_daemon *d);
int sr_cm_request(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req, int *fds,
		  int nfds, struct sr_rep *rep);
void sr_cm_client_gone(struct sr_daemon *d, struct sr_client *c);
bool sr_cm_tick(struct sr_daemon *d);
/* Readable when CM MADs from other hosts wait for sr_cm_tick (-1: none);
 * cleared by sr_cm_wire_clear once a poll found it readable (taking the
 * MADs, after every request and tick, then costs no system call). */
int sr_cm_wire_fd(void);
void sr_cm_wire_clear(void);
/* Readable when QP1's own member of the socket group holds datagrams (-1:
 * none); the poll loop says so with sr_cm_wire_sock_ready, and the next
 * sr_cm_tick (or request) reads them. */
int sr_cm_wire_sock(void);
void sr_cm_wire_sock_ready(void);
/* malloc'd text for `softrdma status` (cm_status.c), NULL without a CM */
char *sr_cm_status_text(struct sr_daemon *d);

/* status.c */
char *sr_status_text(struct sr_daemon *d, size_t *len);
/* control.c: `softrdma fault` / `softrdma trace` and the engine's status */
int sr_ctl_fault(struct sr_daemon *d, const struct sr_req *req, struct sr_rep *rep);
int sr_ctl_trace(struct sr_daemon *d, const struct sr_req *req, int *fds, int nfds,
		 struct sr_rep *rep);
/* The engine's lines of `softrdma status` (malloc'd), or NULL. */
char *sr_ctl_status_text(void);

#endif
