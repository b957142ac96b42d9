/*
 * softrdmad's requests, one at a time: the checks every request passes
 * first (another account's process is refused, HELLO comes first, a
 * monitor may only look), then the handler its op names in one table
 * (obj_*.c, or the destroy of one object kind), the CM's requests to cm/,
 * and the reply with its descriptors.  HELLO, STATUS and the refusal are
 * the connection's business and answered here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/msg.h"
#include "daemon/objects.h"

static int send_status(struct sr_daemon *d, struct sr_client *c, struct sr_rep *rep)
{
	size_t len;
	char *text = sr_status_text(d, &len);
	int ret;

	if (!text)
		return -ENOMEM;
	rep->status = 0;
	rep->u.status.len = len;
	ret = sr_client_send(c, rep, sizeof(*rep), NULL, 0);
	for (size_t off = 0; !ret && off < len; off += SR_STATUS_CHUNK) {
		size_t n = len - off < SR_STATUS_CHUNK ? len - off : SR_STATUS_CHUNK;

		ret = sr_client_send(c, text + off, n, NULL, 0);
	}
	free(text);
	return ret;
}

/*
 * The one way of turning a client away: a reply that carries the reason and
 * nothing else (no descriptor, no device, no state), after which client.c
 * drops the connection.  The client's library prints why (daemon_link.c).
 * Sent without waiting (the client's first request: its socket is empty);
 * a refusal the socket has no room for is lost, not queued, as the
 * connection closes at once.
 */
static void refuse(struct sr_daemon *d, struct sr_client *c, enum sr_refusal why, int status)
{
	struct sr_rep rep;

	memset(&rep, 0, sizeof(rep));
	rep.status = status;
	rep.u.refused.reason = why;
	rep.u.refused.version = SR_PROTO_VERSION;
	rep.u.refused.daemon_uid = (uint32_t)d->uid;
	rep.u.refused.client_uid = (uint32_t)c->uid;
	rep.u.refused.client_pid = (uint32_t)c->pid;
	if (sr_msg_try_send(c->sock, &rep, sizeof(rep), NULL, 0))
		sr_dbg("refusal to pid %d lost", (int)c->pid);
	c->refused = true;
}

static int op_hello(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	if (c->id)
		return -EPROTO;
	if (req->u.hello.version != SR_PROTO_VERSION) {
		sr_warn("refusing %s (pid %d): protocol %u, this daemon speaks %u", c->comm,
			(int)c->pid, req->u.hello.version, SR_PROTO_VERSION);
		refuse(d, c, SR_REFUSED_VERSION, -EPROTO);
		return SR_REPLIED;
	}
	/* Locks and reader slots in the arena name processes by pid
	 * (holder_dead, the epoch sweep): a client whose pid we see
	 * differently lives in another pid namespace, where those ids
	 * mean other processes.  A monitor touches neither. */
	if (!(req->u.hello.flags & 1) && req->u.hello.pid != (uint32_t)c->pid) {
		sr_warn("refusing %s (pid %u to itself, %u here): another pid namespace; "
			"it needs a softrdmad of its own",
			c->comm, req->u.hello.pid, (unsigned)c->pid);
		refuse(d, c, SR_REFUSED_PIDNS, -EXDEV);
		return SR_REPLIED;
	}
	c->id = ++d->next_client_id;
	c->monitor = req->u.hello.flags & 1;
	io->rep->u.hello = d->dev;
	io->rep->u.hello.client_id = c->id;
	io->rep->u.hello.life = c->monitor || c->internal ? 0 : sr_life_attach(d, c);
	io->out_fds[0] = d->arena_fd;
	io->nout = 1;
	return 0;
}

static int op_status(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		     struct sr_op_io *io)
{
	if (send_status(d, c, io->rep))
		sr_warn("client %u: status reply failed", c->id);
	return SR_REPLIED;
}

/* the wire's fault injection and capture (control.c) */
static int op_fault(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	return sr_ctl_fault(d, req, io->rep);
}

static int op_trace(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	return sr_ctl_trace(d, req, io->fds, io->nfds, io->rep);
}

/* Per op its handler, or for a request that only destroys an object the
 * kind of that object (sr_obj_destroy_owned).  An op with neither goes to
 * the CM if it lies in the CM's range (which the XRC ops and WIRE_RX
 * share), else is unknown. */
static const struct sr_op_entry {
	sr_op_fn *fn;
	enum sr_obj_kind destroys;
} ops[SR_OP_MAX] = {
    [SR_OP_HELLO] = {.fn = op_hello},
    [SR_OP_STATUS] = {.fn = op_status},
    [SR_OP_FAULT] = {.fn = op_fault},
    [SR_OP_TRACE] = {.fn = op_trace},
    [SR_OP_REG_FD] = {.fn = sr_op_reg_fd},
    [SR_OP_GET_FD] = {.fn = sr_op_get_fd},
    [SR_OP_CLOSE_FD] = {.destroys = SR_OBJ_FD},
    [SR_OP_WIRE_RX] = {.fn = sr_op_wire_rx},
    [SR_OP_ALLOC_PD] = {.fn = sr_op_alloc_pd},
    [SR_OP_DEALLOC_PD] = {.destroys = SR_OBJ_PD},
    [SR_OP_MR_SEGS] = {.fn = sr_op_mr_segs},
    [SR_OP_REG_MR] = {.fn = sr_op_reg_mr},
    [SR_OP_DEREG_MR] = {.destroys = SR_OBJ_MR},
    [SR_OP_MR_MAP] = {.fn = sr_op_mr_map},
    [SR_OP_REREG_MR] = {.fn = sr_op_rereg_mr},
    [SR_OP_CREATE_CQ] = {.fn = sr_op_create_cq},
    [SR_OP_RESIZE_CQ] = {.fn = sr_op_resize_cq},
    [SR_OP_DESTROY_CQ] = {.destroys = SR_OBJ_CQ},
    [SR_OP_CREATE_QP] = {.fn = sr_op_create_qp},
    [SR_OP_MODIFY_QP] = {.fn = sr_op_modify_qp},
    [SR_OP_DESTROY_QP] = {.fn = sr_op_destroy_qp},
    [SR_OP_OPEN_QP] = {.fn = sr_op_open_qp},
    [SR_OP_OPEN_XRCD] = {.fn = sr_op_open_xrcd},
    [SR_OP_CLOSE_XRCD] = {.destroys = SR_OBJ_XRCD},
    [SR_OP_CREATE_SRQ] = {.fn = sr_op_create_srq},
    [SR_OP_MODIFY_SRQ] = {.fn = sr_op_modify_srq},
    [SR_OP_DESTROY_SRQ] = {.destroys = SR_OBJ_SRQ},
    [SR_OP_ALLOC_MW] = {.fn = sr_op_alloc_mw},
    [SR_OP_DEALLOC_MW] = {.destroys = SR_OBJ_MW},
    [SR_OP_ATTACH_MCAST] = {.fn = sr_op_attach_mcast},
    [SR_OP_DETACH_MCAST] = {.fn = sr_op_detach_mcast},
};

int sr_handle_request(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req, int *fds,
		      int nfds)
{
	const struct sr_op_entry *e = req->op < SR_OP_MAX ? &ops[req->op] : NULL;
	struct sr_rep rep;
	int out_fds[SR_MR_SEGS_PER_REC];
	struct sr_op_io io = {.fds = fds, .nfds = nfds, .rep = &rep, .out_fds = out_fds};
	int ret;

	memset(&rep, 0, sizeof(rep));
	/* Another account's process: whatever it asks, it learns nothing but
	 * the refusal (docs/architecture.md, "Trust model"). */
	if (c->foreign) {
		sr_warn("refusing %s (pid %d, uid %d): not this daemon's user (uid %u)", c->comm,
			(int)c->pid, (int)c->uid, (unsigned)d->uid);
		refuse(d, c, SR_REFUSED_UID, -EACCES);
		ret = 0; /* answered: never deferred */
		goto out;
	}
	if (req->op != SR_OP_HELLO && !c->id) {
		ret = -EPROTO;
		goto reply;
	}
	/* A monitor (softrdma status) was let in without the pid check and
	 * counts for neither the idle exit nor the status listing: it may
	 * only look.  HELLO is once per connection: a second one could turn a
	 * client holding resources into a monitor. */
	if (c->monitor && req->op != SR_OP_STATUS && req->op != SR_OP_HELLO &&
	    req->op != SR_OP_FAULT && req->op != SR_OP_TRACE) {
		ret = -EPERM;
		goto reply;
	}
	if (e && e->fn)
		ret = e->fn(d, c, req, &io);
	else if (e && e->destroys)
		ret = sr_obj_destroy_owned(d, c, e->destroys, req->handle);
	else if (req->op >= SR_OP_CM_CHANNEL_CREATE && req->op < SR_OP_MAX)
		ret = sr_cm_request(d, c, req, fds, nfds, &rep);
	else
		ret = -EOPNOTSUPP;
reply:
	if (ret == SR_RETRY)
		goto out; /* these requests take no descriptors */
	if (ret == SR_REPLIED) {
		ret = 0;
		goto out;
	}
	rep.status = ret;
	if (ret)
		io.nout = 0;
	if (sr_client_send(c, &rep, sizeof(rep), out_fds, io.nout))
		sr_dbg("client %u: reply lost", c->id);
out:
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return ret == SR_RETRY ? SR_RETRY : 0;
}
