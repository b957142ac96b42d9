/*
 * Moving a process's own pages in place without losing other threads'
 * writes.  Registration copies the pages covering a region into a memfd and
 * mremap()s the copy over them (mr.c); deregistration does the same back to
 * private memory.  A write by another thread to those pages between the copy
 * and the mremap lands in the old pages and is lost; on the first and last
 * page that is typically a malloc neighbour (allocator metadata, a lock...).
 *
 * So the range is write-protected with userfaultfd for the move:
 * UFFDIO_REGISTER_MODE_WP + UFFDIO_WRITEPROTECT, then the copy, then the
 * mremap, then the userfaultfd is closed.  A writer meanwhile takes a
 * write-protect fault and sleeps in the kernel (nobody reads the fault
 * messages; closing the userfaultfd wakes every waiter, and clears the
 * protection if the move failed); the kernel then retries its fault, which
 * finds the new mapping, so the write goes to the new pages.  Readers are not
 * stopped.  The thread that moves must not write the range meanwhile (its
 * write would wait for itself), nor take a lock a waiting writer may hold:
 * from the protection to the close it makes raw system calls only (no
 * errno, no sanitizer interceptor: its TLS may be on those pages, as the
 * main thread's is at the start of the heap), and takes no signal (the
 * kernel would write the frame on its stack; a handler could write the
 * range).  Its stack is the one thing it must write: when the range holds
 * it (a stack buffer registered by its own thread; or its TCB, where a
 * sanitizer keeps writing), a helper thread of ours
 * (the "mover", created then, all signals blocked) moves the range while the
 * caller waits.  A process whose only thread is the caller needs no
 * protection: it moves in place, signals blocked, and on the mover when the
 * range holds its stack (the copy would catch its own frames mid-write).
 *
 * The userfaultfd is privileged (kernel faults wait too) when the process
 * may have one (CAP_SYS_PTRACE, or vm.unprivileged_userfaultfd = 1), else
 * UFFD_USER_MODE_ONLY (Linux 5.11), which needs no privilege: then a system
 * call of another thread that writes into the range during the move (read()
 * into a neighbour) fails with EFAULT instead of waiting.  Unpopulated
 * anonymous pages are protected with UFFD_FEATURE_WP_UNPOPULATED (Linux 6.4);
 * before that the range is populated first (MADV_POPULATE_WRITE).  Shared
 * memory (memfd, shmem: a registered range going back) needs
 * UFFD_FEATURE_WP_HUGETLBFS_SHMEM (Linux 6.0).  The kernel cannot
 * write-protect private file mappings (initialised globals, MAP_PRIVATE
 * file mmaps) nor shared mappings of ordinary files: those move unprotected,
 * as everything does where userfaultfd is not available.
 *
 * SOFTRDMA_MR_PROTECT (tests, measurements): "user" forces
 * UFFD_USER_MODE_ONLY, "linux6.1" also forgoes what Linux 6.1 lacks
 * (WP_UNPOPULATED, PROCMAP_QUERY), "off" moves unprotected.
 */
#include <errno.h>
#include <fcntl.h>
#include <assert.h>
#include <inttypes.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define SR_HAVE_SINGLE_THREADED 1
#endif

#include "core/env.h"
#include "core/procstat.h"
#include "core/log.h"
#include "verbs/pagemove.h"

/* Newer than Debian 12's kernel headers (Linux 6.1). */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* PROCMAP_QUERY (Linux 6.11): one mapping of /proc/self/maps by ioctl. */
struct sr_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
static_assert(sizeof(struct sr_procmap_query) == 104, "PROCMAP_QUERY ABI");
#define SR_PROCMAP_QUERY	 _IOWR('f', 17, struct sr_procmap_query)
#define SR_PROCMAP_READ		 0x01
#define SR_PROCMAP_WRITE	 0x02
#define SR_PROCMAP_EXEC		 0x04
#define SR_PROCMAP_SHARED	 0x08
#define SR_PROCMAP_COVER_OR_NEXT 0x10

enum protect_mode { PROTECT_AUTO, PROTECT_USER, PROTECT_LINUX61, PROTECT_OFF };

static pthread_once_t sr_config_once = PTHREAD_ONCE_INIT;
static enum protect_mode sr_protect_mode;
static int sr_uffd_flags = -1;		 /* for userfaultfd(2); -1: none to be had */
static uint64_t sr_uffd_features;	 /* wanted and supported */
static _Atomic bool sr_no_procmap_query; /* the kernel has no PROCMAP_QUERY */

static void config(void)
{
	const char *e = sr_env_str("SOFTRDMA_MR_PROTECT");
	const uint64_t want = UFFD_FEATURE_WP_UNPOPULATED | UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
	struct uffdio_api api;
	int fd = -1;

	if (e && !strcmp(e, "user"))
		sr_protect_mode = PROTECT_USER;
	else if (e && !strcmp(e, "linux6.1"))
		sr_protect_mode = PROTECT_LINUX61;
	else if (e && !strcmp(e, "off"))
		sr_protect_mode = PROTECT_OFF;
	if (sr_protect_mode == PROTECT_LINUX61)
		sr_no_procmap_query = true;
	if (sr_protect_mode == PROTECT_OFF)
		return;
	/* privileged if we may (kernel faults wait too), else user mode only */
	if (sr_protect_mode != PROTECT_USER)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		sr_uffd_flags = 0;
	} else {
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
		if (fd >= 0)
			sr_uffd_flags = UFFD_USER_MODE_ONLY;
	}
	if (fd < 0) {
		sr_warn("no userfaultfd (%s): memory registration cannot write-protect the pages "
			"it moves, so other threads' writes to them meanwhile can be lost",
			strerror(errno));
		return;
	}
	/* asking for no feature answers with every feature the kernel has */
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	if (ioctl(fd, UFFDIO_API, &api)) {
		sr_warn("userfaultfd API: %s: memory registration cannot write-protect the pages "
			"it moves",
			strerror(errno));
		sr_uffd_flags = -1;
	}
	sr_uffd_features = api.features & want;
	if (sr_protect_mode == PROTECT_LINUX61)
		sr_uffd_features &= ~(uint64_t)UFFD_FEATURE_WP_UNPOPULATED;
	close(fd);
	sr_dbg("userfaultfd %s, features %#" PRIx64,
	       sr_uffd_flags ? "user mode only" : "privileged", sr_uffd_features);
}

/* ---- what maps a range ---- */

/* Pieces are stored while they fit: a fork child has no heap to spare (its
 * heap pages may still be shared with its parent). */
struct vma_out {
	struct sr_vma *v;
	unsigned cap, n;
};

static void vma_add(struct vma_out *o, const struct sr_vma *x)
{
	if (o->n < o->cap)
		o->v[o->n] = *x;
	o->n++;
}

/* 1: answered, 0: no PROCMAP_QUERY here, < 0: -errno */
static int vmas_by_query(int fd, uintptr_t start, uintptr_t end, struct vma_out *o)
{
	uintptr_t addr = start;

	while (addr < end) {
		struct sr_procmap_query q;
		struct sr_vma x;

		memset(&q, 0, sizeof(q));
		q.size = sizeof(q);
		q.query_flags = SR_PROCMAP_COVER_OR_NEXT;
		q.query_addr = addr;
		if (ioctl(fd, SR_PROCMAP_QUERY, &q)) {
			if (errno == ENOTTY || (errno == EINVAL && addr == start))
				return 0;
			return errno == ENOENT ? -EFAULT : -errno;
		}
		if (q.vma_start > addr)
			return -EFAULT; /* a hole */
		x.start = addr;
		x.end = q.vma_end < end ? q.vma_end : end;
		x.prot = (q.vma_flags & SR_PROCMAP_READ ? PROT_READ : 0) |
			 (q.vma_flags & SR_PROCMAP_WRITE ? PROT_WRITE : 0) |
			 (q.vma_flags & SR_PROCMAP_EXEC ? PROT_EXEC : 0);
		x.shared = q.vma_flags & SR_PROCMAP_SHARED;
		x.inode = q.inode;
		x.page_size = q.vma_page_size;
		vma_add(o, &x);
		addr = x.end;
	}
	return 1;
}

/* One line of /proc/self/maps; false when done (end reached, or a hole). */
static bool vmas_line(const char *line, uintptr_t *addr, uintptr_t end, struct vma_out *o, int *ret)
{
	unsigned long long ino;
	uintptr_t s, e;
	char perm[8];
	struct sr_vma x;

	if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %*s %*s %llu", &s, &e, perm, &ino) != 4 ||
	    e <= *addr)
		return true;
	if (s > *addr) {
		*ret = -EFAULT; /* a hole */
		return false;
	}
	x.start = *addr;
	x.end = e < end ? e : end;
	x.prot = (perm[0] == 'r' ? PROT_READ : 0) | (perm[1] == 'w' ? PROT_WRITE : 0) |
		 (perm[2] == 'x' ? PROT_EXEC : 0);
	x.shared = perm[3] == 's';
	x.inode = ino;
	x.page_size = 0;
	vma_add(o, &x);
	*addr = x.end;
	if (*addr >= end)
		*ret = 0;
	return *addr < end;
}

/* The text of /proc/self/maps, for kernels before 6.11, read without stdio
 * (no allocation).  Of a line longer than the buffer (a long path) the head
 * is parsed and the rest dropped. */
static int vmas_by_text(uintptr_t start, uintptr_t end, struct vma_out *o)
{
	char buf[4096];
	size_t have = 0;
	uintptr_t addr = start;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), ret = -EFAULT;
	bool more = true, skip = false;

	if (fd < 0)
		return -errno;
	while (more) {
		ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		have += (size_t)got;
		buf[have] = 0;
		while (more && (nl = strchr(line, '\n'))) {
			*nl = 0;
			if (!skip)
				more = vmas_line(line, &addr, end, o, &ret);
			skip = false;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) {
			/* a line longer than the buffer: parse its head, drop the rest */
			more = vmas_line(buf, &addr, end, o, &ret);
			have = 0;
			skip = true;
		}
	}
	close(fd);
	return ret;
}

/* Fills vmas[0..cap) with the pieces of [start, end); the count, or -errno. */
static int vmas_read(uintptr_t start, uintptr_t end, struct sr_vma *vmas, unsigned cap)
{
	struct vma_out o = {vmas, cap, 0};
	int ret = 0;

	pthread_once(&sr_config_once, config);
	if (!sr_no_procmap_query) {
		int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return -errno;
		ret = vmas_by_query(fd, start, end, &o);
		close(fd);
		if (ret == 0) {
			sr_no_procmap_query = true;
			o.n = 0;
		}
	}
	if (sr_no_procmap_query)
		ret = vmas_by_text(start, end, &o);
	return ret < 0 ? ret : (int)o.n;
}

int sr_vmas_get(uintptr_t start, uintptr_t end, struct sr_vma **vmas, unsigned *n)
{
	struct sr_vma few[8], *v;
	int cnt = vmas_read(start, end, few, 8);

	if (cnt < 0)
		return cnt;
	if (cnt <= 8) {
		v = malloc((cnt ? cnt : 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memcpy(v, few, cnt * sizeof(*v));
		*vmas = v;
		*n = (unsigned)cnt;
		return 0;
	}
	for (;;) {
		int again;

		v = malloc(cnt * sizeof(*v));
		if (!v)
			return -ENOMEM;
		again = vmas_read(start, end, v, (unsigned)cnt);
		if (again >= 0 && again <= cnt) {
			*vmas = v;
			*n = (unsigned)again;
			return 0;
		}
		free(v); /* more than a moment ago, or gone */
		if (again < 0)
			return again;
		cnt = again;
	}
}

int sr_vmas_fill(uintptr_t start, uintptr_t end, struct sr_vma *vmas, unsigned cap)
{
	return vmas_read(start, end, vmas, cap);
}

/* ---- the move ---- */

/*
 * The protected part of a move makes raw system calls only: they write no
 * memory of ours.  glibc's wrappers set errno on failure and a sanitizer's
 * interceptors write their thread state, both in the calling thread's TLS,
 * which may be on the pages being moved (the main thread's TLS is at the
 * start of the brk heap): a write there would wait for itself.  They return
 * -errno.  Elsewhere the mover thread makes every protected move.
 */
#if defined(__x86_64__)
#define SR_RAW_SYSCALLS 1
static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__)
#define SR_RAW_SYSCALLS 1
static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}
#else
static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret = syscall(nr, a, b, c, d, e, f);

	return ret < 0 ? -errno : ret;
}
#endif

struct move_job {
	uintptr_t start;
	size_t len;
	char *dst;
	int src_fd;
	const struct sr_vma *vmas;
	unsigned n;
	int uffd; /* registered for the range, or -1: unprotected */
	long pid;
	/* results, logged once the range is no longer protected */
	int ret;
	int wp_err;	 /* UFFDIO_WRITEPROTECT failed: moved unprotected */
	uintptr_t moved; /* when a later piece failed: [start, moved) moved */
	bool done;
};

/* Copies our own memory, failing with EFAULT (not SIGSEGV) where the range
 * is not mapped readable: the kernel's pinning would fail the same way. */
static int copy_own(const struct move_job *j)
{
	/* one call moves at most MAX_RW_COUNT (just under 2 GiB) and reports a
	 * short count beyond: copy in 1 GiB steps, or every registration of
	 * 2 GiB or more fails with EFAULT */
	const size_t step = (size_t)1 << 30;

	for (size_t off = 0; off < j->len;) {
		size_t cnt = j->len - off < step ? j->len - off : step;
		struct iovec l = {j->dst + off, cnt}, r = {(char *)j->start + off, cnt};
		long got = sys6(SYS_process_vm_readv, j->pid, (long)&l, 1, (long)&r, 1, 0);

		if (got == -EINTR)
			continue;
		if (got != (long)cnt)
			return got < 0 ? (int)got : -EFAULT;
		off += cnt;
	}
	return 0;
}

/* Reads rather than memcpy: whole pages include bytes the application does
 * not own (allocator metadata, sanitizer redzones), which an instrumented
 * memcpy reports as overflows under ASan. */
static int copy_fd(const struct move_job *j)
{
	size_t done = 0;

	while (done < j->len) {
		long got = sys6(SYS_pread64, j->src_fd, (long)(j->dst + done),
				(long)(j->len - done), (long)done, 0, 0);

		if (got == -EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? (int)got : -EIO;
		done += (size_t)got;
	}
	return 0;
}

/* Puts dst's pages in place, one run of equal protection at a time (mremap
 * moves one mapping, and mprotect splits dst).  On failure *moved is where
 * the pieces moved end. */
static int install(const struct move_job *j, uintptr_t *moved)
{
	unsigned i = 0;

	while (i < j->n) {
		uintptr_t s = j->vmas[i].start, e = j->vmas[i].end;
		int prot = j->vmas[i].prot;
		long src, ret = 0;

		while (++i < j->n && j->vmas[i].prot == prot && j->vmas[i].start == e)
			e = j->vmas[i].end;
		src = (long)(j->dst + (s - j->start));
		if (prot != (PROT_READ | PROT_WRITE))
			ret = sys6(SYS_mprotect, src, (long)(e - s), prot, 0, 0, 0);
		if (!ret)
			ret = sys6(SYS_mremap, src, (long)(e - s), (long)(e - s),
				   MREMAP_MAYMOVE | MREMAP_FIXED, (long)s, 0);
		if (ret < 0 && ret > -4096) {
			*moved = s;
			return (int)ret;
		}
	}
	return 0;
}

/* The move itself.  With j->uffd, everything between the write protection
 * and the close touches no memory of the application's but the range
 * (read) and dst, and this thread's stack below the caller's frame, not in
 * the range: a writer we wait for may hold any of its locks, and this
 * thread's own writes would wait for themselves.  So the results go to *j
 * (maybe on a protected page: the mover's caller's frame) only after. */
static void move_now(struct move_job *j)
{
	uintptr_t moved = 0;
	int ret, wp_err = 0;

	if (j->uffd >= 0) {
		struct uffdio_writeprotect wp = {.range = {j->start, j->len},
						 .mode = UFFDIO_WRITEPROTECT_MODE_WP};

		wp_err =
		    (int)-sys6(SYS_ioctl, j->uffd, (long)UFFDIO_WRITEPROTECT, (long)&wp, 0, 0, 0);
	}
	ret = j->src_fd >= 0 ? copy_fd(j) : copy_own(j);
	if (!ret)
		ret = install(j, &moved);
	/* wakes every writer waiting (they retry, on the new pages), and on
	 * failure lifts the protection from the pages still in place */
	if (j->uffd >= 0)
		sys6(SYS_close, j->uffd, 0, 0, 0, 0, 0);
	j->wp_err = wp_err;
	j->moved = moved;
	j->ret = ret;
}

/* The mover thread: moves a range that holds the caller's stack or TCB, see
 * the top of the file. */
static pthread_mutex_t sr_mover_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sr_mover_cond = PTHREAD_COND_INITIALIZER;
static struct move_job *sr_mover_job;
static _Atomic int sr_mover_state;   /* 0: not started, 1: running, -1: could not start */
static _Atomic bool sr_seen_threads; /* once, then assumed: protection is never wrong */

static void *mover_main(void *arg)
{
	pthread_mutex_lock(&sr_mover_lock);
	for (;;) {
		struct move_job *j;

		while (!sr_mover_job || sr_mover_job->done)
			pthread_cond_wait(&sr_mover_cond, &sr_mover_lock);
		j = sr_mover_job;
		pthread_mutex_unlock(&sr_mover_lock);
		move_now(j);
		pthread_mutex_lock(&sr_mover_lock);
		j->done = true;
		pthread_cond_broadcast(&sr_mover_cond);
	}
	return arg;
}

/* Called with sr_mover_lock held. */
static bool mover_start(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	if (sr_mover_state)
		return sr_mover_state > 0;
	/* the thread inherits a mask with every signal blocked: the
	 * application's signals go to its own threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&t, &attr, mover_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		sr_warn("no mover thread (%s): registration does not write-protect the pages it "
			"moves",
			strerror(ret));
		sr_mover_state = -1;
		return false;
	}
	pthread_setname_np(t, "softrdma-mr");
	sr_mover_state = 1;
	return true;
}

void sr_pages_fork_child(void)
{
	pthread_mutex_init(&sr_mover_lock, NULL);
	pthread_cond_init(&sr_mover_cond, NULL);
	sr_mover_job = NULL;
	sr_mover_state = 0;
	sr_seen_threads = false;
}

/* A userfaultfd with [start, start + len) registered for write protection,
 * or -1: the move goes unprotected. */
static int protect_open(uintptr_t start, size_t len, const struct sr_vma *vmas, unsigned n)
{
	struct uffdio_register reg = {.range = {start, len}, .mode = UFFDIO_REGISTER_MODE_WP};
	struct uffdio_api api = {.api = UFFD_API, .features = sr_uffd_features};
	int fd;

	if (sr_uffd_flags < 0)
		return -1;
	/* without WP_UNPOPULATED only present pages of anonymous memory are
	 * protected: a write to one never touched would go to a fresh page */
	if (!(sr_uffd_features & UFFD_FEATURE_WP_UNPOPULATED)) {
		for (unsigned i = 0; i < n; i++) {
			if (vmas[i].inode || !(vmas[i].prot & PROT_WRITE))
				continue;
			if (madvise((void *)vmas[i].start, vmas[i].end - vmas[i].start,
				    MADV_POPULATE_WRITE)) {
				sr_dbg("MADV_POPULATE_WRITE: %s: moving unprotected",
				       strerror(errno));
				return -1;
			}
		}
	}
	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | sr_uffd_flags);
	if (fd < 0) {
		sr_dbg("userfaultfd: %s: moving unprotected", strerror(errno));
		return -1;
	}
	if (ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &reg) ||
	    !(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT))) {
		/* e.g. a private file mapping, a shared one of a regular file,
		 * or a range the application registered with a userfaultfd */
		sr_dbg("[%#" PRIxPTR ", %#" PRIxPTR ") cannot be write-protected (%s): moving "
		       "unprotected",
		       start, start + len, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* True if this thread is the process's only one: then nobody else can write
 * the range.  glibc's flag stays false in the fork child of a process that
 * had threads, so ask the kernel then, until we have seen another thread. */
static bool alone(void)
{
	char buf[512];
	const char *p;
	int field = 3; /* where sr_procstat_fields points */

#ifdef SR_HAVE_SINGLE_THREADED
	if (__libc_single_threaded)
		return true;
#endif
	if (atomic_load_explicit(&sr_seen_threads, memory_order_relaxed))
		return false;
	/* num_threads is field 20 */
	p = sr_procstat_fields("/proc/self/stat", buf, sizeof(buf));
	while (p && field < 20) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
		field++;
	}
	if (p && atoi(p) == 1)
		return true;
	atomic_store_explicit(&sr_seen_threads, true, memory_order_relaxed);
	return false;
}

/* True if the range holds what this thread writes while it moves the range:
 * its stack below `fa`, the frame of sr_pages_move (the callers' frames
 * wait), or, under a sanitizer, which instruments every access, its thread
 * state near the thread pointer (the TCB, static TLS: at the top of a
 * thread's stack, or at the start of the main thread's heap). */
static bool holds_mine(uintptr_t start, size_t len, uintptr_t fa)
{
	if (start < fa + 4096 && start + len > fa - (256 << 10))
		return true;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	{
		uintptr_t tp = (uintptr_t)pthread_self();

		if (start < tp + (64 << 10) && start + len > tp - (64 << 10))
			return true;
	}
#endif
	return false;
}

int sr_pages_move(uintptr_t start, size_t len, void *dst, int src_fd, const struct sr_vma *vmas,
		  unsigned n, bool protect)
{
	struct move_job j = {.start = start,
			     .len = len,
			     .dst = dst,
			     .src_fd = src_fd,
			     .vmas = vmas,
			     .n = n,
			     .uffd = -1,
			     .pid = getpid()};
	bool protected, mine, mover = false;
	sigset_t all, old;

	pthread_once(&sr_config_once, config);
	protected = protect && sr_uffd_flags >= 0 && !alone();
	/* the frame address, not a local's: ASan may keep locals on a fake stack */
	mine = holds_mine(start, len, (uintptr_t)__builtin_frame_address(0));
#ifdef SR_RAW_SYSCALLS
	if (mine) {
#else
	if (mine || protected) {
#endif
		pthread_mutex_lock(&sr_mover_lock);
		mover = mover_start();
		pthread_mutex_unlock(&sr_mover_lock);
	}
	/* this thread's own writes to the range would wait for themselves */
#ifdef SR_RAW_SYSCALLS
	if (protected && (mover || !mine))
#else
	if (protected && mover)
#endif
		j.uffd = protect_open(start, len, vmas, n);
	/* From the write protection on (or the copy, unprotected), this thread
	 * takes no signal: a handler could write the range, and the kernel
	 * writes the frame on the stack, which may be in the range. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!mover) {
		move_now(&j);
	} else {
		pthread_mutex_lock(&sr_mover_lock);
		while (sr_mover_job)
			pthread_cond_wait(&sr_mover_cond, &sr_mover_lock);
		sr_mover_job = &j;
		pthread_cond_broadcast(&sr_mover_cond);
		while (!j.done)
			pthread_cond_wait(&sr_mover_cond, &sr_mover_lock);
		sr_mover_job = NULL;
		pthread_cond_broadcast(&sr_mover_cond);
		pthread_mutex_unlock(&sr_mover_lock);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (j.wp_err)
		sr_dbg("UFFDIO_WRITEPROTECT: %s: moved unprotected", strerror(j.wp_err));
	if (j.moved > start)
		sr_warn("moved [%#" PRIxPTR ", %#" PRIxPTR ") of [%#" PRIxPTR ", %#" PRIxPTR
			") only: %s",
			start, j.moved, start, start + len, strerror(-j.ret));
	return j.ret;
}
