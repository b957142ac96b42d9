/*
 * A client connection of softrdmad: accepting it, dispatching each record
 * it sends (with the descriptors that came with it) to the request
 * handlers, and dropping it, which reclaims everything it held.  main.c's
 * poll loop and the control-socket fuzzer (tests/fuzz) both go through
 * these functions, so the fuzzer drives exactly what a socket does.
 *
 * Replies never block the daemon: a client that sends requests and does not
 * read the replies (a flood, a stopped process) would otherwise fill its
 * socket and stop the daemon for every other client in sendmsg().  What the
 * socket has no room for waits in the client's queue, with duplicates of
 * the descriptors it carries, and the poll loop reads no more requests from
 * that client until the queue is sent: backpressure, as a kernel socket
 * gives, and one request's replies at most wait at a time.  Likewise a
 * request that finds an arena lock held (registry.c, SR_RETRY) waits in its
 * client and is run again every poll round.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/msg.h"
#include "daemon/daemon.h"

/* here rather than in main.c: the fuzzer, which has no main.c, needs it */
uint64_t sr_daemon_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Another uid's connections held open at once, waiting for their first
 * request (to be refused): beyond that they are closed unanswered, and
 * after SR_FOREIGN_WAIT_MS without a request too, so another account can
 * neither run the daemon out of descriptors nor keep it from exiting. */
#define SR_FOREIGN_MAX	   16
#define SR_FOREIGN_WAIT_MS 1000

static unsigned count_foreign(const struct sr_daemon *d)
{
	unsigned n = 0;

	for (const struct sr_client *c = d->clients; c; c = c->next)
		n += c->foreign;
	return n;
}

/*
 * Every connection is let in and its credentials kept: one of another
 * effective uid (root's included, see docs/architecture.md "Trust model")
 * or of unknown credentials ((uid_t)-1) is marked foreign, and its first
 * request, whatever it is, gets the refusal record and the drop
 * (dispatch.c).  Answering instead of closing at once tells the user why.
 */
struct sr_client *sr_client_add(struct sr_daemon *d, int sock, pid_t pid, uid_t uid)
{
	bool foreign = uid == (uid_t)-1 || uid != d->uid;
	struct sr_client *c;
	char path[64];
	int cfd;

	if (foreign && count_foreign(d) >= SR_FOREIGN_MAX)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sock = sock;
	c->pid = pid;
	c->uid = uid;
	c->foreign = foreign;
	c->since_ms = sr_daemon_now_ms();
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)c->pid);
	cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd >= 0) {
		ssize_t n = read(cfd, c->comm, sizeof(c->comm) - 1);

		if (n > 0 && c->comm[n - 1] == '\n')
			c->comm[n - 1] = 0;
		close(cfd);
	}
	c->next = d->clients;
	d->clients = c;
	return c;
}

static bool same_user_ns(pid_t pid)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	return !stat(path, &a) && !stat("/proc/self/ns/user", &b) && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

bool sr_client_capable(const struct sr_client *c, int cap)
{
	char path[64], line[128];
	unsigned long long eff = 0;
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)c->pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &eff) == 1;
	fclose(f);
	return found && cap >= 0 && cap < 64 && (eff >> cap & 1) && same_user_ns(c->pid);
}

void sr_client_drop_silent_foreign(struct sr_daemon *d)
{
	uint64_t now = sr_daemon_now_ms();
	struct sr_client *c = d->clients, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->foreign && now - c->since_ms > SR_FOREIGN_WAIT_MS)
			sr_client_drop(d, c, "another user's, silent");
	}
}

struct sr_reply {
	struct sr_reply *next;
	size_t len;
	int nfds;
	int fds[SR_MSG_MAX_FDS]; /* the daemon's duplicates, closed once sent */
	char buf[];
};

static void reply_free(struct sr_reply *r)
{
	for (int i = 0; i < r->nfds; i++)
		close(r->fds[i]);
	free(r);
}

int sr_client_send(struct sr_client *c, const void *buf, size_t len, const int *fds, int nfds)
{
	struct sr_reply *r;
	int ret;

	if (c->broken)
		return -EPIPE;
	if (!c->out) {
		ret = sr_msg_try_send(c->sock, buf, len, fds, nfds);
		if (ret != -EAGAIN)
			return ret; /* sent, or the socket failed: its hang-up drops the client */
	}
	/* the descriptors may be closed before the queue is sent (another
	 * client's memfd), so the queue holds its own */
	r = nfds <= SR_MSG_MAX_FDS ? malloc(sizeof(*r) + len) : NULL;
	if (!r)
		goto broken;
	r->next = NULL;
	r->len = len;
	memcpy(r->buf, buf, len);
	for (r->nfds = 0; r->nfds < nfds; r->nfds++) {
		r->fds[r->nfds] = fcntl(fds[r->nfds], F_DUPFD_CLOEXEC, 0);
		if (r->fds[r->nfds] < 0) {
			reply_free(r);
			goto broken;
		}
	}
	if (!c->out)
		c->out_tail = &c->out;
	*c->out_tail = r;
	c->out_tail = &r->next;
	return 0;
broken:
	/* a lost reply would pair every later request with the wrong one */
	sr_warn("client %u: no memory or descriptor to queue a reply: dropping it", c->id);
	c->broken = true;
	return -ENOMEM;
}

int sr_client_flush(struct sr_daemon *d, struct sr_client *c)
{
	while (c->out) {
		struct sr_reply *r = c->out;
		int ret = sr_msg_try_send(c->sock, r->buf, r->len, r->fds, r->nfds);

		if (ret == -EAGAIN)
			return 0;
		if (ret) {
			sr_client_drop(d, c, strerror(-ret));
			return -1;
		}
		c->out = r->next;
		reply_free(r);
	}
	return 0;
}

void sr_client_drop(struct sr_daemon *d, struct sr_client *c, const char *why)
{
	struct sr_client **pp;

	/* why a process's objects go: its connection's end is the only sign
	 * of its exit the daemon trusts (a live one dropped would find its
	 * QPs gone, every packet for them counted drop_qpn) */
	if (c->id)
		sr_info("client %u (pid %d, %s): connection dropped: %s", c->id, (int)c->pid,
			c->comm, why);

	while (c->out) {
		struct sr_reply *r = c->out;

		c->out = r->next;
		reply_free(r);
	}
	free(c->deferred);
	/* A client never admitted holds nothing, and its pid (another uid's,
	 * perhaps already dead and reused) must not free anyone's reader slots. */
	if (c->id)
		sr_client_teardown(d, c);
	for (pp = &d->clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	close(c->sock);
	free(c);
}

int sr_client_record(struct sr_daemon *d, struct sr_client *c, const void *buf, long n, int *fds,
		     int nfds)
{
	struct sr_req req;

	if (n <= 0) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		sr_client_drop(d, c, n ? strerror((int)-n) : "closed");
		return -1;
	}
	/* a foreign client's record, whatever it is, is answered with the
	 * refusal alone (sr_handle_request) */
	if ((size_t)n < offsetof(struct sr_req, u) && !c->foreign) {
		/* not even an opcode: still one reply per record, or the
		 * client's next request would get this one's answer */
		struct sr_rep rep = {.status = -EPROTO};

		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		sr_client_send(c, &rep, sizeof(rep), NULL, 0);
		if (c->broken) {
			sr_client_drop(d, c, "a reply could not be queued");
			return -1;
		}
		return 0;
	}
	if ((size_t)n > sizeof(req))
		n = sizeof(req);
	memcpy(&req, buf, n);
	if ((size_t)n < sizeof(req))
		memset((char *)&req + n, 0, sizeof(req) - n);
	if (sr_handle_request(d, c, &req, fds, nfds) == SR_RETRY) {
		c->deferred = malloc(sizeof(req));
		if (c->deferred)
			*c->deferred = req;
		else
			c->broken = true; /* it would wait for a reply forever */
	}
	if (c->broken || c->refused) {
		sr_client_drop(d, c, c->refused ? "refused" : "a reply could not be queued");
		return -1;
	}
	return 0;
}

int sr_client_retry(struct sr_daemon *d, struct sr_client *c)
{
	if (sr_handle_request(d, c, c->deferred, NULL, 0) == SR_RETRY)
		return 0;
	free(c->deferred);
	c->deferred = NULL;
	if (c->broken) {
		sr_client_drop(d, c, "a reply could not be queued");
		return -1;
	}
	return 0;
}

int sr_client_serve(struct sr_daemon *d, struct sr_client *c)
{
	struct sr_req req;
	int fds[SR_MSG_MAX_FDS];
	int nfds = SR_MSG_MAX_FDS;
	long n;

	n = sr_msg_recv(c->sock, &req, sizeof(req), fds, &nfds);
	return sr_client_record(d, c, &req, n, fds, nfds);
}
