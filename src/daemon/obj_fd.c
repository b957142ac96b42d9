/*
 * Registered descriptors (REG_FD, GET_FD, CLOSE_FD): the memfds behind
 * registered memory and the eventfds of completion channels and async
 * events, which the daemon keeps open for the client's peers to fetch, and
 * the descriptor budget that keeps one process from hoarding them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/objects.h"

/* The descriptor is what its kind says: a memfd (registered memory, which
 * peers map) or an eventfd (which the daemon and peers write to). */
static bool fd_kind_ok(int fd, uint32_t kind)
{
	static const char eventfd_link[] = "anon_inode:[eventfd]";
	char path[64], link[sizeof(eventfd_link)];
	struct stat st;
	ssize_t n;

	if (kind == SR_FD_MEM) /* memfds (and other shmem files) have seals */
		return !fstat(fd, &st) && S_ISREG(st.st_mode) && fcntl(fd, F_GET_SEALS) >= 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link));
	if (n < 0)
		return true; /* no /proc: cannot tell (daemon_signal still checks for room) */
	return n == sizeof(eventfd_link) - 1 && !memcmp(link, eventfd_link, n);
}

/* An event fd id a new CQ, QP or SRQ names: none, or one of the client's
 * event fds. */
bool sr_event_fd_ok(struct sr_daemon *d, struct sr_client *c, uint32_t fd_id)
{
	struct sr_obj *f = fd_id ? sr_obj_owned(d, c, SR_OBJ_FD, fd_id) : NULL;

	return !fd_id || (f && f->u.fd.kind == SR_FD_EVENT);
}

/* Descriptors registered by all connections of one process. */
static uint32_t pid_fds(const struct sr_daemon *d, pid_t pid)
{
	uint32_t n = 0;

	for (const struct sr_client *c = d->clients; c; c = c->next)
		if (c->pid == pid)
			n += c->fds_held;
	return n;
}

int sr_op_reg_fd(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		 struct sr_op_io *io)
{
	struct sr_obj *o;
	int ret;

	if (io->nfds != 1 || (req->u.reg_fd.kind != SR_FD_MEM && req->u.reg_fd.kind != SR_FD_EVENT))
		return -EINVAL;
	if (!fd_kind_ok(io->fds[0], req->u.reg_fd.kind))
		return -EBADF;
	if (d->fds_held >= d->fds_budget || pid_fds(d, c->pid) >= d->fds_budget / 2)
		return -EMFILE;
	ret = sr_obj_new_numbered(d, c, SR_OBJ_FD, &o);
	if (ret)
		return ret;
	o->u.fd.fd = io->fds[0];
	o->u.fd.kind = req->u.reg_fd.kind;
	io->fds[0] = -1; /* consumed */
	d->fds_held++;
	c->fds_held++;
	io->rep->handle = o->handle;
	return 0;
}

void sr_fd_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	close(o->u.fd.fd);
	d->fds_held--;
	o->owner->fds_held--;
	sr_handle_free(d, o);
	sr_obj_unlink(o);
}

/* Any client's eventfd (an executor signals the channel of a peer's CQ);
 * registered memory only by key (MR_MAP). */
int sr_op_get_fd(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		 struct sr_op_io *io)
{
	struct sr_obj *f = sr_obj_lookup(d, SR_OBJ_FD, req->handle);

	if (f && f->u.fd.kind != SR_FD_EVENT)
		f = NULL;
	if (!f)
		return -ENOENT;
	io->out_fds[0] = f->u.fd.fd;
	io->nout = 1;
	return 0;
}
