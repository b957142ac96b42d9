/*
 * Memory registration.  A registered region must be reachable by other
 * processes (a peer executing a one-sided operation, or a SEND's executor)
 * without this process's CPU, as an HCA reaches pinned pages by DMA.  At
 * registration the pages covering the region are moved onto a memfd: the
 * current contents are copied into a fresh memfd mapping, which mremap()
 * then puts in place of the old pages in one step, so the application's
 * pointers stay valid.  Peers map the same memfd (the daemon hands it out by
 * key).  Page runs already moved by an earlier registration are reused, so
 * overlapping registrations share pages; an MR is a list of segments over
 * such "backings".  When the last MR using a backing goes, the pages become
 * private anonymous memory again.  A fork child gets private copies of
 * registered pages (see fork_child).
 *
 * The move write-protects the pages so that other threads' writes to them
 * (a malloc neighbour on the first or last page) wait and land in the new
 * pages (pagemove.c).  The new pages keep the protection of the old ones, and
 * a region that is not writable cannot be registered for writing (EFAULT, as
 * the kernel's pinning with FOLL_WRITE).
 *
 * Limits (docs/architecture.md): private anonymous state (e.g. a MAP_SHARED
 * file mapping) is not preserved; private file mappings move unprotected.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/log.h"
#include "verbs/internal.h"
#include "verbs/pagemove.h"

/*
 * The daemon scopes a registered fd to the client (context) that registered
 * it, and contexts close independently: a backing shared by MRs of two
 * contexts registers its memfd once per context, and ibv_close_device drops
 * that context's entries (sr_mr_context_closing).  With a single
 * registration, closing the first context left the other context's MRs
 * unreachable for peers and a dangling context pointer here.
 */
struct sr_backing_fd {
	struct sr_context *ctx;
	uint32_t fd_id;
	struct sr_backing_fd *next;
};

struct sr_backing {
	uintptr_t start, end; /* page aligned */
	int memfd;
	struct sr_backing_fd *fds; /* one per context with MRs on it */
	unsigned refs;
	struct sr_backing *next; /* sorted by start */
};

static pthread_mutex_t sr_backing_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t sr_fork_once = PTHREAD_ONCE_INIT;
static struct sr_backing *sr_backings;
static _Atomic uintptr_t sr_page_size;

static uintptr_t page_size(void)
{
	uintptr_t ps = atomic_load_explicit(&sr_page_size, memory_order_relaxed);

	if (!ps) {
		ps = (uintptr_t)sysconf(_SC_PAGESIZE);
		atomic_store_explicit(&sr_page_size, ps, memory_order_relaxed);
	}
	return ps;
}

/* The pieces of vmas[0..n) within [start, end), clipped, in a malloc'd array. */
static struct sr_vma *vmas_clip(const struct sr_vma *vmas, unsigned n, uintptr_t start,
				uintptr_t end, unsigned *cnt)
{
	struct sr_vma *out = malloc(n * sizeof(*out));
	unsigned k = 0;

	if (!out)
		return NULL;
	for (unsigned i = 0; i < n; i++) {
		if (vmas[i].end <= start || vmas[i].start >= end)
			continue;
		out[k] = vmas[i];
		if (out[k].start < start)
			out[k].start = start;
		if (out[k].end > end)
			out[k].end = end;
		k++;
	}
	*cnt = k;
	return out;
}

/* Moves [start, end), mapped as vmas[0..n) describe, onto a new memfd. */
static struct sr_backing *backing_create(uintptr_t start, uintptr_t end, const struct sr_vma *vmas,
					 unsigned n)
{
	size_t len = end - start;
	struct sr_backing *b;
	struct sr_vma *mine;
	unsigned nmine;
	void *tmp;
	int fd, ret;

	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	mine = vmas_clip(vmas, n, start, end, &nmine);
	if (!mine)
		goto err_free;
	fd = memfd_create("softrdma-mr", MFD_CLOEXEC);
	if (fd < 0)
		goto err_free;
	if (ftruncate(fd, len))
		goto err_close;
	tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tmp == MAP_FAILED)
		goto err_close;
	/* The kernel may place tmp in a hole of the range being registered (it
	 * just became free address space): then the copy would read tmp itself
	 * and the mremap onto it fail with EINVAL.  Overlap proves part of the
	 * range is unmapped: EFAULT, as pinning it would. */
	if ((uintptr_t)tmp < end && (uintptr_t)tmp + len > start) {
		munmap(tmp, len);
		errno = EFAULT;
		goto err_close;
	}
	/* atomically replace the old pages by the memfd pages */
	ret = sr_pages_move(start, len, tmp, -1, mine, nmine, true);
	if (ret) {
		munmap(tmp, len);
		errno = -ret;
		goto err_close;
	}
	free(mine);
	b->start = start;
	b->end = end;
	b->memfd = fd;
	return b;

err_close:
	close(fd);
err_free:
	free(mine);
	free(b);
	return NULL;
}

/* True if [start,end) is still mapped from this backing's memfd: the
 * application may have unmapped (freed) it before deregistering.  No
 * allocation: it also runs in a fork child. */
static bool backing_still_mapped(const struct sr_backing *b)
{
	struct sr_vma v[16];
	uintptr_t pos = b->start;
	struct stat st;

	if (fstat(b->memfd, &st))
		return false;
	while (pos < b->end) {
		int n = sr_vmas_fill(pos, b->end, v, 16);

		if (n <= 0)
			return false;
		if (n > 16)
			n = 16;
		for (int i = 0; i < n; i++)
			if (!v[i].shared || v[i].inode != (uint64_t)st.st_ino)
				return false;
		pos = v[n - 1].end;
	}
	return true;
}

/* Turns the backing's pages back into private anonymous memory with the
 * same contents and protections.  `protect`: other threads may be writing;
 * without, this is a fork child, whose only thread this is, and which must
 * not write its heap (maybe on those pages, still shared with the parent)
 * before they are private: no allocation then. */
static void privatize(struct sr_backing *b, bool protect)
{
	size_t len = b->end - b->start;
	struct sr_vma few[32], *v = few, *got = NULL;
	unsigned n;
	void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int cnt;

	if (tmp == MAP_FAILED)
		return;
	cnt = sr_vmas_fill(b->start, b->end, few, 32);
	if (cnt > 32 && protect && !sr_vmas_get(b->start, b->end, &got, &n)) {
		v = got;
		cnt = (int)n;
	}
	if (cnt <= 0 || (v == few && cnt > 32)) {
		/* unknown (or too many pieces for a fork child): read-write */
		v = few;
		few[0] = (struct sr_vma){
		    .start = b->start, .end = b->end, .prot = PROT_READ | PROT_WRITE};
		cnt = 1;
	}
	if (sr_pages_move(b->start, len, tmp, b->memfd, v, (unsigned)cnt, protect))
		munmap(tmp, len);
	free(got);
}

/*
 * fork(): registered pages are MAP_SHARED memfd pages, which a child would
 * share with its parent.  The child gets private copies instead, so it sees
 * ordinary copy-on-fork memory (heap neighbours included) and cannot write
 * into the parent's registered buffers; its inherited MRs are unusable, as
 * with rdma-core after fork.  This is why no MADV_DONTFORK is needed (it
 * would take whole heap pages away from the child).
 */
static void fork_child(void)
{
	sr_pages_fork_child();
	for (struct sr_backing *b = sr_backings; b; b = b->next)
		if (backing_still_mapped(b))
			privatize(b, false);
	sr_backings = NULL; /* the parent's bookkeeping; the child has no MRs */
	pthread_mutex_init(&sr_backing_lock, NULL);
}

/* No fork in the middle of a registration: the child would get pages already
 * moved that are not on the list yet, still shared with its parent. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&sr_backing_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&sr_backing_lock);
}

static void watch_fork(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void backing_release(struct sr_backing *b)
{
	if (backing_still_mapped(b))
		privatize(b, true);
	while (b->fds) {
		struct sr_backing_fd *f = b->fds;

		b->fds = f->next;
		sr_ctx_close_fd(&f->ctx->dc, f->fd_id);
		free(f);
	}
	close(b->memfd);
	free(b);
}

/* The daemon's id of b's memfd for ctx, registering it on first use.
 * Called with sr_backing_lock held. */
static int backing_fd_id(struct sr_backing *b, struct sr_context *ctx, uint32_t *fd_id)
{
	struct sr_backing_fd *f;
	int ret;

	for (f = b->fds; f; f = f->next) {
		if (f->ctx == ctx) {
			*fd_id = f->fd_id;
			return 0;
		}
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	ret = sr_ctx_reg_fd(&ctx->dc, b->memfd, SR_FD_MEM, &f->fd_id);
	if (ret) {
		free(f);
		return ret;
	}
	f->ctx = ctx;
	f->next = b->fds;
	b->fds = f;
	*fd_id = f->fd_id;
	return 0;
}

/* Declared here and in device.c (its only caller) to keep the fix inside
 * the .c files; belongs in verbs/internal.h. */

/* ibv_close_device: forget ctx's registrations (the daemon drops them with
 * the connection).  Backings still used by MRs left in ctx stay as they are. */
void sr_mr_context_closing(struct sr_context *ctx)
{
	pthread_mutex_lock(&sr_backing_lock);
	for (struct sr_backing *b = sr_backings; b; b = b->next) {
		for (struct sr_backing_fd **pp = &b->fds; *pp;) {
			struct sr_backing_fd *f = *pp;

			if (f->ctx == ctx) {
				*pp = f->next;
				free(f);
			} else {
				pp = &f->next;
			}
		}
	}
	pthread_mutex_unlock(&sr_backing_lock);
}

static void backing_insert(struct sr_backing *n)
{
	struct sr_backing **pp = &sr_backings;

	while (*pp && (*pp)->start < n->start)
		pp = &(*pp)->next;
	n->next = *pp;
	*pp = n;
}

static void backing_unlink(struct sr_backing *b)
{
	for (struct sr_backing **pp = &sr_backings; *pp; pp = &(*pp)->next) {
		if (*pp == b) {
			*pp = b->next;
			return;
		}
	}
}

static void mr_put_backings(struct sr_mr *mr)
{
	for (unsigned i = 0; i < mr->nbacking; i++) {
		struct sr_backing *b = mr->backing[i];

		if (--b->refs == 0) {
			backing_unlink(b);
			backing_release(b);
		}
	}
	free(mr->backing);
	mr->backing = NULL;
	mr->nbacking = 0;
}

/* Finds or creates the backings covering [addr, addr+len) in order and
 * takes a reference on each; vmas[0..nv) are the mappings of its pages.
 * Called with sr_backing_lock held. */
static int mr_get_backings(struct sr_mr *mr, uintptr_t addr, size_t len, const struct sr_vma *vmas,
			   unsigned nv)
{
	uintptr_t ps = page_size();
	uintptr_t pos = addr & ~(ps - 1);
	uintptr_t end = (addr + len + ps - 1) & ~(ps - 1);
	unsigned cap = 4;

	mr->backing = calloc(cap, sizeof(*mr->backing));
	if (!mr->backing)
		return -ENOMEM;
	while (pos < end) {
		struct sr_backing *b = sr_backings, *use = NULL;
		uintptr_t gap_end = end;

		for (; b; b = b->next) {
			if (b->start <= pos && pos < b->end) {
				use = b;
				break;
			}
			if (b->start > pos) {
				gap_end = b->start < end ? b->start : end;
				break;
			}
		}
		if (!use) {
			use = backing_create(pos, gap_end, vmas, nv);
			if (!use) {
				int e = errno ? errno : ENOMEM;

				mr_put_backings(mr);
				return -e;
			}
			backing_insert(use);
		}
		if (mr->nbacking == cap) {
			struct sr_backing **n = realloc(mr->backing, 2 * cap * sizeof(*n));

			if (!n) {
				if (!use->refs) {
					backing_unlink(use);
					backing_release(use);
				}
				mr_put_backings(mr);
				return -ENOMEM;
			}
			mr->backing = n;
			cap *= 2;
		}
		use->refs++;
		mr->backing[mr->nbacking++] = use;
		pos = use->end;
	}
	return 0;
}

#define SR_ACCESS_SUPPORTED                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)
/* What needs writable pages: the kernel's ib_access_writable(), which makes
 * ib_umem_get() pin with FOLL_WRITE (binding a window can grant writes). */
#define SR_ACCESS_WRITABLE                                                                         \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |             \
	 IBV_ACCESS_MW_BIND)

static int check_access(unsigned int access)
{
	access &= ~IBV_ACCESS_OPTIONAL_RANGE; /* optional bits may be ignored by definition */
	if (access & IBV_ACCESS_ON_DEMAND)
		return -EOPNOTSUPP; /* no ODP: the device does not advertise it */
	if (access & ~(SR_ACCESS_SUPPORTED | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB))
		return -EINVAL;
	/* IBTA C10-26: remote write/atomic access requires local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}

/* The pages must be mapped and readable, and writable for write access:
 * what pinning them checks in the kernel (EFAULT otherwise). */
static int check_pages(const struct sr_vma *vmas, unsigned n, unsigned int access)
{
	for (unsigned i = 0; i < n; i++) {
		if (!(vmas[i].prot & PROT_READ))
			return -EFAULT;
		if ((access & SR_ACCESS_WRITABLE) && !(vmas[i].prot & PROT_WRITE))
			return -EFAULT;
	}
	return 0;
}

/* Sends the segments of an MR: all but the last record's worth staged by
 * MR_SEGS requests, the rest in REG_MR itself. */
static int send_reg_mr(struct sr_context *ctx, struct sr_req *req, const struct sr_mr_seg *segs,
		       unsigned n, struct sr_rep *rep)
{
	unsigned staged =
	    n > SR_MR_SEGS_PER_REC ? (n - 1) / SR_MR_SEGS_PER_REC * SR_MR_SEGS_PER_REC : 0;
	int ret;

	for (unsigned first = 0; first < staged; first += SR_MR_SEGS_PER_REC) {
		struct sr_req sreq;
		struct sr_rep srep;

		memset(&sreq, 0, sizeof(sreq));
		sreq.op = SR_OP_MR_SEGS;
		sreq.u.mr_segs.first = first;
		sreq.u.mr_segs.nsegs = SR_MR_SEGS_PER_REC;
		memcpy(sreq.u.mr_segs.segs, segs + first, sizeof(*segs) * SR_MR_SEGS_PER_REC);
		ret = sr_ctx_request(&ctx->dc, &sreq, &srep, NULL, 0, NULL, NULL);
		if (ret)
			return ret;
	}
	req->u.reg_mr.staged = staged;
	req->u.reg_mr.nsegs = n - staged;
	memcpy(req->u.reg_mr.segs, segs + staged, sizeof(*segs) * (n - staged));
	return sr_ctx_request(&ctx->dc, req, rep, NULL, 0, NULL, NULL);
}

/* Takes the pages of [a, a+length) into mr's backings (checked for
 * access) and describes them as segments (*segs, *n; the caller frees).
 * Called with sr_backing_lock held; on failure nothing is kept. */
static int mr_take_pages(struct sr_context *ctx, struct sr_mr *mr, uintptr_t a, uint64_t length,
			 unsigned int access, struct sr_mr_seg **segsp, unsigned *np)
{
	uintptr_t ps = page_size();
	struct sr_mr_seg *segs = NULL;
	struct sr_vma *vmas = NULL;
	uint64_t covered = 0;
	unsigned n = 0, nv;
	int ret;

	ret = sr_vmas_get(a & ~(ps - 1), (a + length + ps - 1) & ~(ps - 1), &vmas, &nv);
	if (!ret)
		ret = check_pages(vmas, nv, access);
	if (!ret)
		ret = mr_get_backings(mr, a, length, vmas, nv);
	free(vmas);
	if (ret)
		return ret;
	segs = calloc(mr->nbacking, sizeof(*segs));
	if (!segs)
		ret = -ENOMEM;
	for (unsigned i = 0; !ret && i < mr->nbacking && covered < length; i++) {
		struct sr_backing *b = mr->backing[i];
		uintptr_t s = a + covered;
		uint64_t seg = b->end - s;

		if (seg > length - covered)
			seg = length - covered;
		if (n == SR_MR_MAX_SEGS) {
			ret = -ENOMEM; /* the device's limit, SR_MR_MAX_SEGS */
			break;
		}
		ret = backing_fd_id(b, ctx, &segs[n].fd_id);
		if (ret)
			break;
		segs[n].fd_off = s - b->start;
		segs[n].len = seg;
		n++;
		covered += seg;
	}
	if (ret) {
		free(segs);
		mr_put_backings(mr);
		return ret;
	}
	*segsp = segs;
	*np = n;
	return 0;
}

/* Registers [addr, addr+length) into `mr` (already allocated). */
static int mr_register(struct ibv_pd *pd, struct sr_mr *mr, void *addr, size_t length,
		       uint64_t iova, unsigned int access)
{
	struct sr_context *ctx = to_sctx(pd->context);
	uintptr_t a = (uintptr_t)addr;
	struct sr_mr_seg *segs = NULL;
	struct sr_req req;
	struct sr_rep rep;
	unsigned n = 0;
	int ret;

	ret = check_access(access);
	if (ret)
		return ret;
	access &= SR_ACCESS_SUPPORTED | IBV_ACCESS_ZERO_BASED;
	if (!length || !addr || length > SR_MAX_MR_SIZE || a + length < a)
		return -EINVAL;

	pthread_once(&sr_fork_once, watch_fork);
	pthread_mutex_lock(&sr_backing_lock);
	ret = mr_take_pages(ctx, mr, a, length, access, &segs, &n);
	if (ret)
		goto out;
	{
		memset(&req, 0, sizeof(req));
		req.op = SR_OP_REG_MR;
		req.u.reg_mr.pd = to_spd(pd)->handle;
		req.u.reg_mr.access = access;
		req.u.reg_mr.addr = a;
		req.u.reg_mr.length = length;
		req.u.reg_mr.iova = access & IBV_ACCESS_ZERO_BASED ? 0 : iova;
		ret = send_reg_mr(ctx, &req, segs, n, &rep);
	}
	free(segs);
	if (ret) {
		mr_put_backings(mr);
		goto out;
	}
	mr->mr.context = pd->context;
	mr->mr.pd = pd;
	mr->mr.addr = addr;
	mr->mr.length = length;
	mr->mr.handle = rep.handle;
	mr->mr.lkey = rep.u.mr.lkey;
	mr->mr.rkey = rep.u.mr.rkey;
	mr->iova = req.u.reg_mr.iova;
	mr->access = access;
out:
	pthread_mutex_unlock(&sr_backing_lock);
	return ret;
}

static int mr_deregister(struct sr_mr *mr)
{
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	memset(&req, 0, sizeof(req));
	req.op = SR_OP_DEREG_MR;
	req.handle = mr->mr.handle;
	ret = sr_ctx_request(&to_sctx(mr->mr.context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret)
		return ret;
	pthread_mutex_lock(&sr_backing_lock);
	mr_put_backings(mr);
	pthread_mutex_unlock(&sr_backing_lock);
	return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	struct sr_mr *mr;
	int ret;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = mr_register(pd, mr, addr, length, iova, access);
	if (ret) {
		free(mr);
		errno = -ret;
		return NULL;
	}
	return &mr->mr;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

#undef ibv_reg_mr_iova
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			       int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, access);
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
				 int fd, int access)
{
	errno = EOPNOTSUPP; /* no device memory to import */
	return NULL;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	int ret;

	if (!mr)
		return EINVAL;
	ret = mr_deregister(to_smr(mr));
	if (ret)
		return -ret;
	free(to_smr(mr));
	return 0;
}

/*
 * The MR changes in place and keeps its lkey and rkey (the daemon's
 * sr_op_rereg_mr says why); a new range takes its pages as a registration
 * does and gives the old ones back.  On failure nothing has changed: the MR
 * is still the old one, usable and deregisterable.
 */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		 int access)
{
	bool translation = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	struct sr_mr *smr, nb;
	struct ibv_pd *npd;
	uintptr_t a;
	size_t nlen;
	unsigned int nacc;
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	/* as rdma-core: input errors set errno to EINVAL, and access is only
	 * given with IBV_REREG_MR_CHANGE_ACCESS */
	if (!mr || !flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	smr = to_smr(mr);
	npd = flags & IBV_REREG_MR_CHANGE_PD ? pd : mr->pd;
	a = translation ? (uintptr_t)addr : (uintptr_t)mr->addr;
	nlen = translation ? length : mr->length;
	nacc = flags & IBV_REREG_MR_CHANGE_ACCESS ? (unsigned int)access : smr->access;
	if (!npd || npd->context != mr->context || !nlen || !a) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	ret = check_access(nacc);
	if (ret) {
		errno = -ret;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (nlen > SR_MAX_MR_SIZE || a + nlen < a) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	nacc &= SR_ACCESS_SUPPORTED | IBV_ACCESS_ZERO_BASED;
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_REREG_MR;
	req.handle = mr->handle;
	req.u.reg_mr.pd = to_spd(npd)->handle;
	req.u.reg_mr.access = nacc;
	req.u.reg_mr.addr = a;
	req.u.reg_mr.length = nlen;
	/* the iova stays unless the translation changes (an MR of
	 * ibv_reg_mr_iova2 keeps its addressing) */
	req.u.reg_mr.iova = nacc & IBV_ACCESS_ZERO_BASED ? 0 : translation ? a : smr->iova;
	memset(&nb, 0, sizeof(nb));
	pthread_once(&sr_fork_once, watch_fork);
	pthread_mutex_lock(&sr_backing_lock);
	if (translation) {
		/* the new pages are taken and checked as ibv_reg_mr's, and
		 * their segments sent the same way (MR_SEGS records first) */
		struct sr_mr_seg *segs = NULL;
		unsigned n = 0;

		ret = mr_take_pages(to_sctx(mr->context), &nb, a, nlen, nacc, &segs, &n);
		if (!ret)
			ret = send_reg_mr(to_sctx(mr->context), &req, segs, n, &rep);
		free(segs);
	} else {
		ret = sr_ctx_request(&to_sctx(mr->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	}
	if (ret) {
		mr_put_backings(&nb);
		pthread_mutex_unlock(&sr_backing_lock);
		errno = -ret;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (translation) {
		mr_put_backings(smr);
		smr->backing = nb.backing;
		smr->nbacking = nb.nbacking;
	}
	pthread_mutex_unlock(&sr_backing_lock);
	mr->pd = npd;
	mr->addr = (void *)a;
	mr->length = nlen;
	mr->lkey = rep.u.mr.lkey;
	mr->rkey = rep.u.mr.rkey;
	smr->iova = req.u.reg_mr.iova;
	smr->access = nacc;
	return 0;
}

/* ---- memory windows (allocation; binding is a work request, see the data path) ---- */

struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sr_req req;
	struct sr_rep rep;
	struct sr_mw *mw;
	int ret;

	if (!pd || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
		errno = EINVAL;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_ALLOC_MW;
	req.u.mw.pd = to_spd(pd)->handle;
	req.u.mw.type = type;
	ret = sr_ctx_request(&to_sctx(pd->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret) {
		free(mw);
		errno = -ret;
		return NULL;
	}
	mw->mw.context = pd->context;
	mw->mw.pd = pd;
	mw->mw.rkey = rep.u.mw.rkey;
	mw->mw.handle = rep.handle;
	mw->mw.type = type;
	return &mw->mw;
}

int sr_dealloc_mw(struct ibv_mw *mw)
{
	struct sr_req req;
	struct sr_rep rep;
	int ret;

	if (!mw)
		return EINVAL;
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_DEALLOC_MW;
	req.handle = mw->handle;
	ret = sr_ctx_request(&to_sctx(mw->context)->dc, &req, &rep, NULL, 0, NULL, NULL);
	if (ret)
		return -ret;
	free(container_of(mw, struct sr_mw, mw));
	return 0;
}
