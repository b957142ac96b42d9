/*
 * Protection domains (ALLOC_PD, DEALLOC_PD) and XRC domains (OPEN_XRCD,
 * CLOSE_XRCD; IBTA A14, the kernel's ib_uverbs_open_xrcd): a PD is a
 * handle that MRs, MWs, SRQs and QPs hold a use of; an XRC domain is
 * host-wide, shared by every client that opens it through the same file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/objects.h"

int sr_op_alloc_pd(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		   struct sr_op_io *io)
{
	struct sr_obj *o;

	if (sr_obj_new_numbered(d, c, SR_OBJ_PD, &o))
		return -ENOMEM;
	io->rep->handle = o->handle;
	return 0;
}

void sr_pd_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	sr_handle_free(d, o);
	sr_obj_unlink(o);
}

/* ---- XRC domains (IBTA A14; the kernel's ib_uverbs_open_xrcd) ---- */

int sr_op_open_xrcd(struct sr_daemon *d, struct sr_client *c, const struct sr_req *req,
		    struct sr_op_io *io)
{
	uint32_t of = req->u.xrcd.oflags;
	struct sr_xrcd_dom *dom = NULL;
	struct stat st;
	struct sr_obj *o;
	int ret;

	if (io->nfds > 1 || (of & ~(uint32_t)(O_CREAT | O_EXCL)))
		return -EINVAL;
	if (io->nfds == 1) {
		if (fstat(io->fds[0], &st))
			return -EBADF;
		for (dom = d->xrcds; dom; dom = dom->next)
			if (dom->fd >= 0 && dom->dev == (uint64_t)st.st_dev &&
			    dom->ino == (uint64_t)st.st_ino)
				break;
		/* as the kernel: a file with no domain yet needs O_CREAT, and
		 * O_EXCL refuses one that has a domain already */
		if (!dom && !(of & O_CREAT))
			return -EAGAIN;
		if (dom && (of & O_EXCL))
			return -EINVAL;
		if (!dom && d->fds_held >= d->fds_budget)
			return -EMFILE;
	}
	ret = sr_obj_new_numbered(d, c, SR_OBJ_XRCD, &o);
	if (ret)
		return ret;
	if (!dom) {
		dom = calloc(1, sizeof(*dom));
		if (!dom) {
			sr_handle_free(d, o);
			sr_obj_unlink(o);
			return -ENOMEM;
		}
		dom->id = ++d->next_xrcd_id ? d->next_xrcd_id : ++d->next_xrcd_id;
		dom->fd = -1;
		if (io->nfds == 1) {
			dom->fd = io->fds[0];
			io->fds[0] = -1; /* kept: the inode stays ours while the domain lives */
			dom->dev = st.st_dev;
			dom->ino = st.st_ino;
			d->fds_held++;
		}
		dom->next = d->xrcds;
		d->xrcds = dom;
	}
	dom->handles++;
	o->u.xrcd.dom = dom;
	io->rep->handle = o->handle;
	return 0;
}

void sr_xrcd_destroy(struct sr_daemon *d, struct sr_obj *o)
{
	struct sr_xrcd_dom *dom = o->u.xrcd.dom;

	if (!--dom->handles) {
		for (struct sr_xrcd_dom **p = &d->xrcds; *p; p = &(*p)->next) {
			if (*p == dom) {
				*p = dom->next;
				break;
			}
		}
		if (dom->fd >= 0) {
			close(dom->fd);
			d->fds_held--;
		}
		free(dom);
	}
	sr_handle_free(d, o);
	sr_obj_unlink(o);
}
