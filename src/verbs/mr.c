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
 * Limits (docs/architecture.md): pages are made read-write and private
 * anonymous state (e.g. a MAP_SHARED file mapping) is not preserved; other
 * threads must not write the pages while they are being registered.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/log.h"
#include "verbs/internal.h"

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
static uintptr_t sr_page_size;

static uintptr_t page_size(void)
{
	if (!sr_page_size)
		sr_page_size = sysconf(_SC_PAGESIZE);
	return sr_page_size;
}

/* Copies len bytes of our own memory, failing with EFAULT (not SIGSEGV)
 * where the range is not mapped readable: the kernel's pinning would fail
 * the same way. */
static int copy_own(void *dst, const void *src, size_t len)
{
	/* one call moves at most MAX_RW_COUNT (just under 2 GiB) and reports a
	 * short count beyond: copy in 1 GiB steps, or every registration of
	 * 2 GiB or more fails with EFAULT */
	const size_t step = (size_t)1 << 30;

	for (size_t off = 0; off < len; off += step) {
		size_t cnt = len - off < step ? len - off : step;
		struct iovec l = {(char *)dst + off, cnt}, r = {(char *)src + off, cnt};
		ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);

		if (n != (ssize_t)cnt)
			return n < 0 ? -errno : -EFAULT;
	}
	return 0;
}

static struct sr_backing *backing_create(uintptr_t start, uintptr_t end)
{
	size_t len = end - start;
	struct sr_backing *b;
	void *tmp;
	int fd, ret;

	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	fd = memfd_create("softrdma-mr", MFD_CLOEXEC);
	if (fd < 0)
		goto err_free;
	if (ftruncate(fd, len))
		goto err_close;
	tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tmp == MAP_FAILED)
		goto err_close;
	/* The kernel may place tmp in a hole of the range being registered (it
	 * just became free address space): then copy_own would read tmp itself
	 * and the mremap onto it fail with EINVAL.  Overlap proves part of the
	 * range is unmapped: EFAULT, as pinning it would. */
	if ((uintptr_t)tmp < end && (uintptr_t)tmp + len > start) {
		munmap(tmp, len);
		errno = EFAULT;
		goto err_close;
	}
	ret = copy_own(tmp, (void *)start, len);
	if (ret) {
		munmap(tmp, len);
		errno = -ret;
		goto err_close;
	}
	/* atomically replace the old pages by the memfd pages */
	if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)start) == MAP_FAILED) {
		int e = errno;

		munmap(tmp, len);
		errno = e;
		goto err_close;
	}
	b->start = start;
	b->end = end;
	b->memfd = fd;
	return b;

err_close:
	close(fd);
err_free:
	free(b);
	return NULL;
}

/* True if [start,end) is still mapped from this backing's memfd: the
 * application may have unmapped (freed) it before deregistering. */
static bool backing_still_mapped(const struct sr_backing *b)
{
	struct stat st;
	char line[512];
	bool ok = false;
	FILE *f;

	if (fstat(b->memfd, &st))
		return false;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t s, e;
		unsigned long long ino;

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %llu", &s, &e, &ino) != 3)
			continue;
		if (s <= b->start && e >= b->end && ino == (unsigned long long)st.st_ino) {
			ok = true;
			break;
		}
	}
	fclose(f);
	return ok;
}

/* Turns the backing's pages back into private anonymous memory with the
 * same contents.  Only system calls: it also runs in a fork child. */
static void privatize(struct sr_backing *b)
{
	size_t len = b->end - b->start, done = 0;
	void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (tmp == MAP_FAILED)
		return;
	/* Read the pages from the memfd rather than memcpy them: whole pages
	 * include bytes the application does not own (allocator metadata,
	 * sanitizer redzones), and an instrumented memcpy reports them as
	 * overflows under ASan. */
	while (done < len) {
		ssize_t n = pread(b->memfd, (char *)tmp + done, len - done, (off_t)done);

		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
		if (n > 0)
			done += (size_t)n;
	}
	if (done != len ||
	    mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)b->start) == MAP_FAILED)
		munmap(tmp, len);
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
	for (struct sr_backing *b = sr_backings; b; b = b->next)
		privatize(b);
	sr_backings = NULL; /* the parent's bookkeeping; the child has no MRs */
	pthread_mutex_init(&sr_backing_lock, NULL);
}

static void watch_fork(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

static void backing_release(struct sr_backing *b)
{
	if (backing_still_mapped(b))
		privatize(b);
	while (b->fds) {
		struct sr_backing_fd *f = b->fds;

		b->fds = f->next;
		sr_ctx_close_fd(f->ctx, f->fd_id);
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
	ret = sr_ctx_reg_fd(ctx, b->memfd, SR_FD_MEM, &f->fd_id);
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
 * takes a reference on each.  Called with sr_backing_lock held. */
static int mr_get_backings(struct sr_mr *mr, uintptr_t addr, size_t len)
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
			use = backing_create(pos, gap_end);
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

/* Registers [addr, addr+length) into `mr` (already allocated). */
static int mr_register(struct ibv_pd *pd, struct sr_mr *mr, void *addr, size_t length,
		       uint64_t iova, unsigned int access)
{
	struct sr_context *ctx = to_sctx(pd->context);
	uintptr_t a = (uintptr_t)addr;
	struct sr_req req;
	struct sr_rep rep;
	uint64_t covered = 0;
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
	ret = mr_get_backings(mr, a, length);
	if (ret)
		goto out;
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_REG_MR;
	req.u.reg_mr.pd = to_spd(pd)->handle;
	req.u.reg_mr.access = access;
	req.u.reg_mr.addr = a;
	req.u.reg_mr.length = length;
	req.u.reg_mr.iova = access & IBV_ACCESS_ZERO_BASED ? 0 : iova;
	for (unsigned i = 0; i < mr->nbacking && covered < length; i++) {
		struct sr_backing *b = mr->backing[i];
		uintptr_t s = a + covered;
		uint64_t seg = b->end - s;

		if (seg > length - covered)
			seg = length - covered;
		if (n == SR_MR_MAX_SEGS) {
			ret = -ENOMEM; /* too fragmented by earlier registrations */
			break;
		}
		ret = backing_fd_id(b, ctx, &req.u.reg_mr.segs[n].fd_id);
		if (ret)
			break;
		req.u.reg_mr.segs[n].fd_off = s - b->start;
		req.u.reg_mr.segs[n].len = seg;
		n++;
		covered += seg;
	}
	req.u.reg_mr.nsegs = n;
	if (!ret)
		ret = sr_ctx_request(ctx, &req, &rep, NULL, 0, NULL, NULL);
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
	ret = sr_ctx_request(to_sctx(mr->mr.context), &req, &rep, NULL, 0, NULL, NULL);
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

/* Describes [a, a+len) over mr's backings (already taken) as the segments
 * of a REREG_MR request.  Called with sr_backing_lock held. */
static int rereg_segs(struct sr_context *ctx, struct sr_mr *mr, uintptr_t a, uint64_t len,
		      struct sr_req *req)
{
	uint64_t covered = 0;
	unsigned n = 0;
	int ret;

	for (unsigned i = 0; i < mr->nbacking && covered < len; i++) {
		struct sr_backing *b = mr->backing[i];
		uint64_t seg = b->end - (a + covered);

		if (seg > len - covered)
			seg = len - covered;
		if (n == SR_MR_MAX_SEGS)
			return -ENOMEM; /* too fragmented by earlier registrations */
		ret = backing_fd_id(b, ctx, &req->u.reg_mr.segs[n].fd_id);
		if (ret)
			return ret;
		req->u.reg_mr.segs[n].fd_off = a + covered - b->start;
		req->u.reg_mr.segs[n].len = seg;
		n++;
		covered += seg;
	}
	req->u.reg_mr.nsegs = n;
	return 0;
}

/*
 * The MR changes in place and keeps its lkey and rkey (the daemon's
 * do_rereg_mr says why); a new range takes its pages as a registration
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
	pthread_mutex_lock(&sr_backing_lock);
	if (translation) {
		ret = mr_get_backings(&nb, a, nlen);
		if (!ret)
			ret = rereg_segs(to_sctx(mr->context), &nb, a, nlen, &req);
	}
	if (!ret)
		ret = sr_ctx_request(to_sctx(mr->context), &req, &rep, NULL, 0, NULL, NULL);
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
	ret = sr_ctx_request(to_sctx(pd->context), &req, &rep, NULL, 0, NULL, NULL);
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
	ret = sr_ctx_request(to_sctx(mw->context), &req, &rep, NULL, 0, NULL, NULL);
	if (ret)
		return -ret;
	free(container_of(mw, struct sr_mw, mw));
	return 0;
}
