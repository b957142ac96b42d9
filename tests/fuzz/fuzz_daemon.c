/*
 * libFuzzer target: softrdmad's control socket, in process.  The daemon's
 * state is built once as main.c builds it (device model, arena, registry);
 * each input then plays a sequence of operations of four fake clients
 * (fuzz_input.h): records of any bytes and length with descriptors of any
 * kind and number, sent through sr_client_record() exactly as main.c's
 * poll loop dispatches what recvmsg returned, clients that stop reading
 * their replies, disconnect (reclaim) and reconnect, the daemon's timer
 * work, and for the connection manager's state machine CM MADs from other
 * hosts or this one (play_mad) and its deadlines coming (FZ_CM_DUE).  At
 * the end of every input all clients are gone, and the daemon must hold
 * nothing: no descriptor more than before the input (counted in
 * /proc/self/fd), no arena bytes, no allocated number, no multicast
 * member, no CM id or channel.  ASan and UBSan report the rest.  It runs
 * in a network namespace of its own (isolate_network).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/msg.h"
#include "core/shmlock.h"
#include "daemon/cm/cm.h"
#include "daemon/daemon.h"
#include "shm/qp_err.h"
#include "wire/cm_mad.h"
#include "fuzz_input.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz_client {
	struct sr_client *c; /* NULL: not connected */
	int peer;	     /* the client's end of the socket pair */
	bool noread;	     /* stopped reading its replies */
};

static struct sr_daemon fz_d;
static struct fz_client fz_cl[FZ_CLIENTS];
static uint32_t fz_handles[FZ_HANDLES];
static unsigned fz_nhandles;
static uint32_t fz_last_op; /* of the last record sent: what the replies read next answer */
/* The other ends of pipes, and copies of memfds, sent in this input */
static int fz_pipe_ends[256], fz_memfds[256];
static unsigned fz_npipe_ends, fz_nmemfds;
static bool fz_trace;			/* FUZZ_TRACE=1: print every record and reply */
static _Atomic uint32_t fz_stopped_tid; /* a thread that only sleeps: "stopped" */

static void *stopped_thread(void *arg)
{
	atomic_store(&fz_stopped_tid, sr_thread_id());
	for (;;)
		pause();
	return NULL;
}

/*
 * The daemon must never wait for a client: a write or sendmsg that would
 * block (an eventfd at its maximum, a full pipe or socket) would stop it
 * for every client.  The fuzzer is linked with --wrap for both, so each
 * such call of the daemon's is checked before it is made: a descriptor in
 * blocking mode that has no room now is a finding, whatever the load on
 * the machine (a time limit would need the call to return).
 */
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
ssize_t __real_sendmsg(int fd, const struct msghdr *mh, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *mh, int flags);

static void check_no_wait(int fd, const char *call)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int fl = fcntl(fd, F_GETFL);

	if (fd > 2 && fl >= 0 && !(fl & O_NONBLOCK) && poll(&p, 1, 0) == 0) {
		fprintf(stderr, "fuzz_daemon: %s on fd %d would wait for a client\n", call, fd);
		abort();
	}
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	check_no_wait(fd, "write");
	return __real_write(fd, buf, n);
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	if (!(flags & MSG_DONTWAIT))
		check_no_wait(fd, "sendmsg");
	return __real_sendmsg(fd, mh, flags);
}

/* Every file the harness made in this input (socket pairs, memfds,
 * pipes, eventfds, /dev/null): once all clients are gone and the harness
 * has closed its own ends, none may be open in this process, i.e. in the
 * daemon.  Files, not a count of descriptors: libFuzzer and LeakSanitizer
 * open descriptors of their own for a moment. */
struct fz_file {
	dev_t dev;
	ino_t ino;
};
static struct fz_file fz_files[2048];
static unsigned fz_nfiles;
/* What was open before any input (inherited, the arena): not ours */
static struct fz_file fz_base[64];
static int fz_base_fd[64];
static unsigned fz_nbase;

static bool in_base(int fd, const struct stat *st)
{
	for (unsigned k = 0; k < fz_nbase; k++)
		if (fz_base_fd[k] == fd && fz_base[k].dev == st->st_dev &&
		    fz_base[k].ino == st->st_ino)
			return true;
	return false;
}

static void note_base(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	struct stat st;

	while (dir && (e = readdir(dir))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] != '.' && fd != dirfd(dir) && !fstat(fd, &st) &&
		    fz_nbase < sizeof(fz_base) / sizeof(fz_base[0])) {
			fz_base_fd[fz_nbase] = fd;
			fz_base[fz_nbase++] = (struct fz_file){st.st_dev, st.st_ino};
		}
	}
	if (dir)
		closedir(dir);
}

static void remember(int fd)
{
	struct stat st;

	if (fd >= 0 && fz_nfiles < sizeof(fz_files) / sizeof(fz_files[0]) && !fstat(fd, &st))
		fz_files[fz_nfiles++] = (struct fz_file){st.st_dev, st.st_ino};
}

/* Descriptors still open on a file of this input's. */
static int leaked_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!dir)
		abort();
	while ((e = readdir(dir))) {
		int fd = atoi(e->d_name);
		char path[300], link[256];
		struct stat st;
		ssize_t len;

		if (e->d_name[0] == '.' || fd == dirfd(dir) || fstat(fd, &st) || in_base(fd, &st))
			continue;
		for (unsigned k = 0; k < fz_nfiles; k++) {
			if (fz_files[k].dev != st.st_dev || fz_files[k].ino != st.st_ino)
				continue;
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			len = readlink(path, link, sizeof(link) - 1);
			fprintf(stderr, "  fd %d -> %.*s\n", fd, (int)(len > 0 ? len : 0), link);
			n++;
			break;
		}
	}
	closedir(dir);
	return n;
}

static pid_t client_pid(unsigned i)
{
	/* 0 and 1 are two contexts of one process (this one), 2 and 3 of a
	 * process that no longer exists (above pid_max) */
	return i < 2 ? getpid() : 0x3fffff00;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		fprintf(stderr, "fuzz_daemon: %s: %s\n", path, strerror(errno));
		abort();
	}
	close(fd);
}

/*
 * The daemon resolves the addresses a record names as a real one does:
 * cm_neigh.c asks the kernel for the next hop (NTF_USE), and the kernel
 * sends ARP requests and neighbour solicitations for it.  The fuzzer's
 * addresses are anyone's, so the daemon runs in a network namespace of its
 * own (a user namespace too where it is not root) with loopback alone, up:
 * nothing it does reaches a network.  No namespace, no fuzzing.
 */
static void isolate_network(void)
{
	struct ifreq ifr = {0};
	int fd;

	if (unshare(CLONE_NEWNET)) {
		char map[64];
		uid_t uid = geteuid();
		gid_t gid = getegid();

		if (unshare(CLONE_NEWUSER | CLONE_NEWNET)) {
			fprintf(stderr,
				"fuzz_daemon: no network namespace of its own (%s): "
				"it would resolve the fuzzer's addresses on this host's "
				"network\n",
				strerror(errno));
			abort();
		}
		write_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
		write_file("/proc/self/uid_map", map);
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
		write_file("/proc/self/gid_map", map);
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	strcpy(ifr.ifr_name, "lo");
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr))) {
		fprintf(stderr, "fuzz_daemon: loopback not up: %s\n", strerror(errno));
		abort();
	}
	close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *e = getenv("SOFTRDMA_LOG");
	int ret;

	isolate_network();
	signal(SIGPIPE, SIG_IGN); /* as main.c */
	sr_log_init("fuzz_daemon");
	if (!e || !*e)
		sr_log_level = SR_LOG_ERR;
	sr_device_init(&fz_d.dev);
	/* 256 MiB: large requests meet ENOMEM, as a full arena would */
	ret = sr_heap_init(&fz_d, 256ull << 20);
	if (!ret)
		ret = sr_objects_init(&fz_d);
	if (!ret)
		ret = sr_cm_init(&fz_d); /* the connection manager's requests too */
	if (ret) {
		fprintf(stderr, "fuzz_daemon: no daemon state: %s\n", strerror(-ret));
		abort();
	}
	fz_d.dev.arena_size = fz_d.arena_size;
	fz_d.dev.daemon_pid = getpid();
	fz_d.uid = geteuid(); /* its fake clients are of the daemon's uid */
	fz_d.listen_fd = -1;
	pthread_t t;

	if (pthread_create(&t, NULL, stopped_thread, NULL))
		abort();
	while (!atomic_load(&fz_stopped_tid))
		usleep(1000);
	note_base();
	e = getenv("FUZZ_TRACE");
	fz_trace = e && *e == '1';
	return 0;
}

/* Reads whatever replies wait on the client's end, keeping the handles.
 * Returns the number of records read. */
static unsigned drain(struct fz_client *fc)
{
	unsigned got = 0;

	for (;;) {
		union {
			struct sr_rep rep;
			char text[SR_STATUS_CHUNK];
		} u;
		union {
			char buf[CMSG_SPACE(sizeof(int) * SR_MSG_MAX_FDS)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = {.iov_base = &u, .iov_len = sizeof(u)};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf.buf,
				    .msg_controllen = sizeof(cbuf.buf)};
		ssize_t n = recvmsg(fc->peer, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n <= 0)
			return got;
		got++;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			int cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int), fd;

			for (int i = 0; i < cnt; i++) {
				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
				close(fd);
			}
		}
		if (fz_trace)
			fprintf(stderr, "  reply %zd bytes: status %d handle %#x\n", n,
				n == sizeof(u.rep) ? u.rep.status : 0,
				n == sizeof(u.rep) ? u.rep.handle : 0);
		if (fz_trace && n == sizeof(u.rep) && !u.rep.status && u.rep.handle)
			fprintf(stderr, "  slot %u\n", fz_nhandles % FZ_HANDLES);
		if (n == sizeof(u.rep) && !u.rep.status && u.rep.handle)
			fz_handles[fz_nhandles++ % FZ_HANDLES] = u.rep.handle;
		/* CM events name ids the daemon made (a CONNECT_REQUEST's new
		 * id): handles too, for ACCEPT, REJECT, DISCONNECT ... */
		if (fz_last_op == SR_OP_CM_GET_EVENT && n >= (ssize_t)sizeof(u.rep) &&
		    !u.rep.status) {
			const struct sr_cm_event_wire *more = (const void *)(&u.rep + 1);
			size_t nmore = ((size_t)n - sizeof(u.rep)) / sizeof(*more);

			for (size_t k = 0; k <= nmore; k++) {
				uint32_t id = k ? more[k - 1].id : u.rep.u.cm_event.id;

				if (id && id != u.rep.handle) {
					if (fz_trace)
						fprintf(stderr, "  event of id %#x: slot %u\n", id,
							fz_nhandles % FZ_HANDLES);
					fz_handles[fz_nhandles++ % FZ_HANDLES] = id;
				}
			}
		}
	}
}

static bool connect_client(unsigned i)
{
	struct fz_client *fc = &fz_cl[i];
	int sv[2];

	int small = 4096;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return false;
	/* the smallest send buffer the kernel allows (a few replies): a client
	 * that stops reading fills it within a short input */
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	remember(sv[0]);
	fc->c = sr_client_add(&fz_d, sv[0], client_pid(i), fz_d.uid);
	if (!fc->c) {
		close(sv[0]);
		close(sv[1]);
		return false;
	}
	fc->peer = sv[1];
	fc->noread = false;
	return true;
}

/* The daemon saw the socket close (or dropped the client itself). */
static void gone(struct fz_client *fc)
{
	close(fc->peer);
	fc->c = NULL;
}

/* The client reads its replies; as its socket gets room, main.c's poll
 * loop (POLLOUT) sends what waits in the daemon's queue. */
static void read_replies(struct fz_client *fc)
{
	drain(fc);
	while (fc->c->out) {
		if (sr_client_flush(&fz_d, fc->c) < 0) {
			gone(fc);
			return;
		}
		if (!drain(fc))
			return;
	}
}

static void disconnect(struct fz_client *fc)
{
	if (!fc->c)
		return;
	/* as main.c: recvmsg returned 0 */
	if (sr_client_record(&fz_d, fc->c, NULL, 0, NULL, 0) < 0)
		gone(fc);
}

static int make_fd(unsigned kind)
{
	int fd = -1, p[2];

	switch (kind) {
	case FZ_FD_MEMFD:
	case FZ_FD_MEMFD_EMPTY:
	case FZ_FD_MEMFD_HUGE:
		if (fz_nmemfds == sizeof(fz_memfds) / sizeof(fz_memfds[0]))
			break;
		fd = memfd_create("fuzz", MFD_CLOEXEC);
		if (fd >= 0 && kind != FZ_FD_MEMFD_EMPTY &&
		    ftruncate(fd, kind == FZ_FD_MEMFD ? 4096 : 1ll << 40)) {
			close(fd);
			fd = -1;
		}
		/* a copy, to see at the end that the daemon never wrote into
		 * what is registered memory */
		if (fd >= 0)
			fz_memfds[fz_nmemfds++] = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		break;
	case FZ_FD_PIPE_R:
	case FZ_FD_PIPE_W:
		if (fz_npipe_ends == sizeof(fz_pipe_ends) / sizeof(fz_pipe_ends[0]) ||
		    pipe2(p, O_CLOEXEC))
			break;
		/* the other end stays open until the input ends: a write end
		 * fills up and blocks, as when a client never reads */
		fd = p[kind == FZ_FD_PIPE_R ? 0 : 1];
		fz_pipe_ends[fz_npipe_ends++] = p[kind == FZ_FD_PIPE_R ? 1 : 0];
		break;
	case FZ_FD_DEVNULL:
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		break;
	case FZ_FD_EVENTFD:
	case FZ_FD_EVENTFD_FULL:
		fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
		if (fd >= 0 && kind == FZ_FD_EVENTFD_FULL) {
			uint64_t v = UINT64_MAX - 1;

			if (write(fd, &v, sizeof(v)) != sizeof(v)) {
				close(fd);
				fd = -1;
			}
		}
		break;
	}
	remember(fd);
	return fd;
}

/* Parses and plays one send operation; returns the bytes it used, or 0
 * at the end of the input. */
static size_t play_send(unsigned i, bool noread, const uint8_t *p, size_t left)
{
	struct fz_client *fc = &fz_cl[i];
	uint8_t rec[1024 + 4];
	int fds[SR_MSG_MAX_FDS];
	unsigned nfds, kinds, len, npatch;
	size_t used;
	long n;

	if (left < 6)
		return 0;
	nfds = fz_nfds[p[0] & 7];
	kinds = p[1] | p[2] << 8;
	len = (p[3] | p[4] << 8) & 1023;
	npatch = p[5] & 7;
	used = 6 + 2 * npatch;
	if (left < used + len)
		return 0;
	memset(rec, 0, sizeof(rec));
	memcpy(rec, p + used, len);
	for (unsigned k = 0; k < npatch; k++) {
		unsigned off = p[6 + 2 * k] * 4u, src = p[7 + 2 * k] % FZ_SRC_MAX;
		uint32_t v = src == FZ_SRC_PID ? (uint32_t)client_pid(i) : fz_handles[src];

		if (off + 4 <= len)
			memcpy(rec + off, &v, 4);
	}
	used += len;

	if (!fc->c && !connect_client(i))
		return used;
	/* main.c does not poll it for requests now: the record waits */
	if (fc->c->out || fc->c->deferred)
		return used;
	for (unsigned k = 0; k < nfds; k++) {
		fds[k] = make_fd((kinds >> (3 * (k % 5))) & 7);
		if (fds[k] < 0) { /* out of descriptors: not the daemon's fault */
			while (k--)
				close(fds[k]);
			return used;
		}
	}
	/* as sr_msg_recv: a record longer than the buffer is MSG_TRUNC */
	n = len > sizeof(struct sr_req) ? -EMSGSIZE : (long)len;
	fz_last_op = len >= 4 ? rec[0] | rec[1] << 8 | rec[2] << 16 | (uint32_t)rec[3] << 24 : 0;
	if (fz_trace)
		fprintf(stderr, "client %u: op %u, %ld bytes, %u fds\n", i,
			len >= 4 ? rec[0] | rec[1] << 8 : 0, n, nfds);
	if (sr_client_record(&fz_d, fc->c, rec, n, fds, nfds) < 0) {
		gone(fc);
		return used;
	}
	/* a monitor (softrdma status) holds nothing: the idle exit and the
	 * status listing do not count it */
	if (fc->c->monitor && fc->c->objs) {
		fprintf(stderr, "fuzz_daemon: monitor client %u holds objects\n", fc->c->id);
		abort();
	}
	fc->noread |= noread;
	if (!fc->noread)
		read_replies(fc);
	return used;
}

/*
 * What a QP's owner does in the arena on the data path that the daemon's
 * timer work then acts on: a SEND posted and stalled (RNR or no ACK) with
 * its wait already over, as post_send leaves it; the send CQ armed, or
 * full; an SQ flush owed (sr_sq_flush_later).  Written the way the library
 * writes them, to reach the daemon's signalling of eventfds.
 */
/* Locks a stopped thread of an owner holds (FZ_HOLD_*), with the object
 * each is in: let go before the object's chunk can be reused. */
struct fz_held {
	struct sr_lock *l;
	enum sr_obj_kind kind;
	uint32_t handle;
};
static struct fz_held fz_held[16];
static unsigned fz_nheld;
static bool fz_scribbled; /* FZ_SCRIBBLE_CQ happened in this input */
static void hold(struct sr_lock *l, enum sr_obj_kind kind, uint32_t handle)
{
	uint32_t free_ = 0;

	if (fz_nheld < sizeof(fz_held) / sizeof(fz_held[0]) &&
	    atomic_compare_exchange_strong(&l->holder, &free_, atomic_load(&fz_stopped_tid)))
		fz_held[fz_nheld++] = (struct fz_held){l, kind, handle};
}

/* Lets go of the locks (all, or those in destroyed objects, whose chunks
 * the next reap may reuse). */
static void release(bool all)
{
	unsigned k = 0;

	for (unsigned i = 0; i < fz_nheld; i++) {
		if (all || !sr_obj_lookup(&fz_d, fz_held[i].kind, fz_held[i].handle))
			atomic_store(&fz_held[i].l->holder, 0);
		else
			fz_held[k++] = fz_held[i];
	}
	fz_nheld = k;
}

/* The daemon spins on an arena lock only when it waits for one: with a
 * stopped thread holding locks, that wait would never end. */
int __real_sched_yield(void);
int __wrap_sched_yield(void);

int __wrap_sched_yield(void)
{
	if (fz_nheld) {
		fprintf(stderr,
			"fuzz_daemon: the daemon waits for a lock a stopped thread holds\n");
		abort();
	}
	return __real_sched_yield();
}

static void play_datapath(uint8_t b, uint8_t h)
{
	struct sr_obj *o = sr_obj_lookup(&fz_d, SR_OBJ_QP, fz_handles[b & FZ_DP_QP]);
	struct sr_qp_shm *qp;
	struct sr_cq_shm *cq;
	uint32_t state, head;

	if (h & FZ_HOLD_RELEASE)
		release(true);
	if (!o)
		return;
	qp = sr_arena_at(fz_d.arena, o->u.shm.off);
	cq = sr_arena_ptr(fz_d.arena, qp->send_cq_off);
	if (h & FZ_HOLD_SQ)
		hold(&qp->sq_lock, SR_OBJ_QP, o->handle);
	if (h & FZ_HOLD_RQ)
		hold(&qp->rq_lock, SR_OBJ_QP, o->handle);
	if (h & FZ_HOLD_RQ_PROD)
		hold(&qp->rq.prod_lock, SR_OBJ_QP, o->handle);
	if (h & FZ_HOLD_SEND_CQ)
		hold(&cq->lock, SR_OBJ_CQ, cq->handle);
	if ((h & FZ_HOLD_SRQ) && qp->srqn) {
		struct sr_obj *so = sr_obj_lookup(&fz_d, SR_OBJ_SRQ, qp->srqn);

		if (so)
			hold(&((struct sr_srq_shm *)sr_arena_at(fz_d.arena, so->u.shm.off))->lock,
			     SR_OBJ_SRQ, so->handle);
	}
	if (h & FZ_SCRIBBLE_CQ) {
		cq->ring_off = ((uint64_t)b << 40) | 0x123456789;
		cq->cqe_cnt = 0;
		fz_scribbled = true;
	}
	if (fz_nheld || fz_scribbled)
		return; /* what follows takes locks (the harness would wait for
			 * itself) or writes the CQ ring (wherever it says) */
	state = atomic_load(&qp->state);
	if (b & FZ_DP_FILL_CQ) {
		struct sr_cqe e = {
		    .status = IBV_WC_SUCCESS, .opcode = IBV_WC_SEND, .qp_num = qp->qpn};

		/* full, not overflowed: the daemon's push is the one to overflow */
		for (uint32_t k = 0; cq->cqe_cnt <= 4096 && k + 1 < cq->cqe_cnt; k++)
			if (!sr_cq_push(fz_d.arena, cq, &e, false, NULL, NULL))
				break;
	}
	if (b & FZ_DP_ARM)
		atomic_store(&cq->arm, SR_CQ_ARM_NEXT);
	if ((b & FZ_DP_FLUSH_OWED) && state == IBV_QPS_ERR)
		sr_sq_flush_later(fz_d.arena, qp);
	head = atomic_load(&qp->sq.head);
	if (state == IBV_QPS_RTS && !atomic_load(&qp->stalled) &&
	    head - atomic_load(&qp->sq.tail) < qp->sq.max_wr) {
		struct sr_send_wqe *w = sr_sq_wqe(fz_d.arena, qp, head);

		sr_shm_lock(&qp->sq_lock);
		memset(w, 0, sizeof(*w));
		w->wr_id = 0xf022;
		w->opcode = IBV_WR_SEND;
		w->flags = SR_WQE_SIGNALED;
		atomic_store(&qp->sq.head, head + 1);
		atomic_store(&qp->stall_deadline_ns, 0);
		atomic_store(&qp->stalled, b & FZ_DP_NO_ACK ? SR_STALL_NO_ACK : SR_STALL_RNR);
		sr_shm_unlock(&qp->sq_lock);
	}
}

/* The k-th CM id of the daemon (wrapping), NULL if it has none. */
static struct sr_cm_id *cm_id_at(unsigned k)
{
	struct sr_cm_id *id = fz_d.cm->all;
	unsigned n = 0;

	for (struct sr_cm_id *i = id; i; i = i->next)
		n++;
	for (k = n ? k % n : 0; id && k; k--)
		id = id->next;
	return id;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* An address of the sender's, of the family of the id's own. */
static void sender_addr(const struct sr_cm_id *id, struct sockaddr_storage *a)
{
	memset(a, 0, sizeof(*a));
	if (id->src.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)a;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(4000);
		inet_pton(AF_INET6, "2001:db8::7", &s6->sin6_addr);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)a;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(4000);
		inet_pton(AF_INET, "198.51.100.7", &s4->sin_addr);
	}
}

/*
 * A CM MAD arrives, as cm_wire.c hands one from QP1 to sr_cm_recv, or as
 * sr_cm_mad_run hands one this host sent itself: from another host's GID
 * or one of this host's, with what the fuzzer cannot guess (comm IDs,
 * service IDs, an IP CM header) written in where the input asks.  Its
 * answers go to the MAD queue, which FZ_TICK runs.
 */
static size_t play_mad(const uint8_t *p, size_t left)
{
	static const uint8_t others[2][16] = {
	    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 7},
	    {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}};
	static const uint8_t nobody[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
					   0,	 0,    0,    0,	   0, 0, 0, 0x99};
	const struct sr_dev_info *dev = &fz_d.dev;
	uint8_t mad[SR_CM_MAD_SIZE] = {0};
	const uint8_t *sgid, *dgid;
	struct sr_cm_id *id;
	size_t len;
	unsigned from, fix;

	if (left < 3)
		return left;
	from = p[0];
	len = p[1] + 1u;
	fix = p[2];
	if (left < 3 + len)
		return left;
	memcpy(mad, p + 3, len);
	switch (from & FZ_MAD_FROM) {
	case 0:
	case 1:
		sgid = others[from & 1];
		break;
	case 2:
		sgid = dev->gid_cnt ? dev->gids[0].gid : others[0];
		break;
	default:
		sgid = dev->gid_cnt ? dev->gids[dev->gid_cnt - 1].gid : others[1];
		break;
	}
	dgid = (from & FZ_MAD_TO_OTHER) || !dev->gid_cnt ? nobody : dev->gids[0].gid;
	if (fix & FZ_MAD_HDR) {
		mad[0] = 1;
		mad[1] = SR_CM_MGMT_CLASS;
		mad[2] = SR_CM_CLASS_VERSION;
		mad[3] = SR_CM_METHOD_SEND;
	}
	id = cm_id_at((fix & FZ_MAD_ID) >> 4);
	if (id && (fix & FZ_MAD_THEIR))
		put_be32(mad + SR_CM_MAD_HDR + 4, id->comm_id);
	if (id && (fix & FZ_MAD_PEERS))
		put_be32(mad + SR_CM_MAD_HDR, id->remote_comm_id);
	if (id && (fix & FZ_MAD_REQ_ID))
		put_be32(mad + SR_CM_MAD_HDR, id->comm_id);
	if (id && (fix & FZ_MAD_SERVICE)) {
		uint16_t attr = (uint16_t)(mad[16] << 8 | mad[17]);
		uint64_t sid = sr_cm_service_id(id->ps, sr_cm_port(&id->src));
		struct sockaddr_storage peer;

		for (int b = 0; b < 8; b++)
			mad[SR_CM_MAD_HDR + 8 + b] = (uint8_t)(sid >> (56 - 8 * b));
		sender_addr(id, &peer);
		/* the private data's offsets (IBTA tables 106 and 118) */
		if (attr == SR_CM_REQ || attr == SR_CM_SIDR_REQ)
			sr_cm_ip_hdr_build(mad + SR_CM_MAD_HDR + (attr == SR_CM_REQ ? 140 : 16),
					   (struct sockaddr *)&peer, (struct sockaddr *)&id->src);
	}
	if (fz_trace)
		fprintf(stderr, "MAD %zu bytes, attribute %#x, fixes %#x\n", len,
			mad[16] << 8 | mad[17], fix);
	sr_cm_recv(&fz_d, sgid, dgid, mad, len);
	return 3 + len;
}

static void check_empty(void)
{
	const struct sr_mcast_group *g = sr_arena_mcasttab(fz_d.arena);
	uint64_t bytes = 0;
	int n;

	if (fz_d.clients) {
		fprintf(stderr, "fuzz_daemon: a client survived its socket\n");
		abort();
	}
	sr_heap_reap(&fz_d, false);
	n = leaked_fds();
	if (n) {
		fprintf(stderr, "fuzz_daemon: %d descriptors of this input's files still open\n",
			n);
		abort();
	}
	if (sr_heap_used() || sr_heap_deferred(&bytes)) {
		fprintf(stderr, "fuzz_daemon: %llu arena bytes still in use, %llu retired\n",
			(unsigned long long)sr_heap_used(), (unsigned long long)bytes);
		abort();
	}
	for (int k = 0; k < SR_OBJ_KINDS; k++) {
		if (fz_d.by_handle[k] && fz_d.ids[k].in_use) {
			fprintf(stderr, "fuzz_daemon: %u handles of kind %d still allocated\n",
				fz_d.ids[k].in_use, k);
			abort();
		}
	}
	if (fz_d.fds_held) {
		fprintf(stderr, "fuzz_daemon: %u registered descriptors counted\n", fz_d.fds_held);
		abort();
	}
	if (fz_d.qpn_ids.in_use || fz_d.srqn_ids.in_use || fz_d.key_ids.in_use) {
		fprintf(stderr, "fuzz_daemon: %u QPNs, %u SRQNs, %u keys still allocated\n",
			fz_d.qpn_ids.in_use, fz_d.srqn_ids.in_use, fz_d.key_ids.in_use);
		abort();
	}
	if (fz_d.cm->all || fz_d.cm->id_alloc.in_use || fz_d.cm->chan_alloc.in_use) {
		fprintf(stderr, "fuzz_daemon: %u CM ids and %u channels left without clients\n",
			fz_d.cm->id_alloc.in_use, fz_d.cm->chan_alloc.in_use);
		abort();
	}
	for (unsigned k = 0; k < SR_MAX_MCAST_GRP; k++) {
		if (g[k].nqp) {
			fprintf(stderr, "fuzz_daemon: multicast group %u keeps %u members\n", k,
				g[k].nqp);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t pos = 0;

	memset(fz_handles, 0, sizeof(fz_handles));
	fz_nhandles = 0;
	fz_nfiles = 0;
	fz_scribbled = false;
	while (pos < size) {
		unsigned i = data[pos] & 3, action = (data[pos] >> 2) % FZ_ACTIONS;
		size_t used = 0;

		pos++;
		switch (action) {
		case FZ_SEND:
		case FZ_SEND_NOREAD:
			used = play_send(i, action == FZ_SEND_NOREAD, data + pos, size - pos);
			if (!used)
				pos = size;
			break;
		case FZ_READ:
			if (fz_cl[i].c) {
				fz_cl[i].noread = false;
				read_replies(&fz_cl[i]);
			}
			break;
		case FZ_CLOSE:
			disconnect(&fz_cl[i]);
			break;
		case FZ_DATAPATH:
			if (pos + 1 < size)
				play_datapath(data[pos], data[pos + 1]);
			used = 2;
			break;
		case FZ_MAD:
			used = play_mad(data + pos, size - pos);
			break;
		case FZ_CM_DUE:
			/* seconds pass: what waits for an answer is resent or
			 * gives up, a timewait ends, a lingering DREQ goes again */
			for (struct sr_cm_id *id = fz_d.cm->all; id; id = id->next)
				if (id->deadline_ms)
					id->deadline_ms = 1;
			for (struct sr_cm_linger *l = fz_d.cm->lingering; l; l = l->next)
				l->deadline_ms = 1;
			fz_d.cm->next_timer_scan_ms = 0;
			sr_cm_tick(&fz_d);
			break;
		case FZ_TICK:
			/* one round of main.c's loop, minus the socket */
			for (unsigned k = 0; k < FZ_CLIENTS; k++)
				if (fz_cl[k].c && fz_cl[k].c->deferred &&
				    sr_client_retry(&fz_d, fz_cl[k].c) < 0)
					gone(&fz_cl[k]);
			release(false);
			if (!fz_nheld && !fz_scribbled)
				sr_daemon_tick(&fz_d);
			sr_cm_tick(&fz_d); /* CM MADs queued, CM timers */
			sr_heap_reap(&fz_d, false);
			sr_heap_sweep_slots(&fz_d);
			break;
		}
		pos += used;
	}
	release(true);
	for (unsigned i = 0; i < FZ_CLIENTS; i++)
		disconnect(&fz_cl[i]);
	while (fz_npipe_ends)
		close(fz_pipe_ends[--fz_npipe_ends]);
	while (fz_nmemfds) {
		int fd = fz_memfds[--fz_nmemfds];
		struct stat st;
		uint64_t first = 0;

		if (fd < 0)
			continue;
		if (fstat(fd, &st) ||
		    (st.st_size != 0 && st.st_size != 4096 && st.st_size != 1ll << 40) ||
		    (st.st_size && pread(fd, &first, sizeof(first), 0) != sizeof(first)) || first) {
			fprintf(stderr,
				"fuzz_daemon: a memfd was written: %lld bytes, first word "
				"%#llx\n",
				(long long)st.st_size, (unsigned long long)first);
			abort();
		}
		close(fd);
	}
	check_empty();
	return 0;
}
