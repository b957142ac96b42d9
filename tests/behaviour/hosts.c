/*
 * Remote mode (see hosts.h): entering the peer host, and the tests that only
 * make sense on one host.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "hosts.h"

/*
 * Tests that look at what only exists between processes of one host: the
 * shared-memory executor's internals and the local daemon's view of them.
 * Their cross-host counterparts are the other tests' semantics.
 */
static const struct {
	const char *name, *reason;
} samehost_only[] = {
    {"direct_path", "checks post_send's shared-memory direct path (src/shm/exec.h) and its "
		    "per-QP counters in `softrdma status`; a remote peer has no such path"},
    {"reclaim_waits_for_readers",
     "checks epoch reclamation of shared-memory chunks pinned by a stopped process that "
     "maps them (src/shm/epoch.h); a process on another host maps none"},
    {"err_destroy_drops_cqes",
     "checks what polling returns after ibv_destroy_qp, with QPs that never leave this "
     "process (flushed in INIT/ERR); there is no peer to put on another host"},
};

bool sr_remote(void)
{
	const char *e = getenv(SR_ENV_PEER_NETNS);

	return e && *e;
}

const char *sr_remote_skip_reason(const char *name)
{
	for (size_t i = 0; i < sizeof(samehost_only) / sizeof(samehost_only[0]); i++)
		if (!strcmp(samehost_only[i].name, name))
			return samehost_only[i].reason;
	return NULL;
}

void sr_host_enter_peer(void)
{
	const char *ns = getenv(SR_ENV_PEER_NETNS), *sock = getenv(SR_ENV_PEER_SOCKET),
		   *addr = getenv(SR_ENV_PEER_ADDR);
	int fd;

	if (!sr_remote())
		return;
	REQUIRE(sock && *sock && addr && *addr);
	fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		sr__fail(__FILE__, __LINE__, "entering the peer host %s: %s", ns, strerror(errno));
		sr__fatal();
	}
	close(fd);
	REQUIRE(setenv("SOFTRDMA_SOCKET", sock, 1) == 0);
	REQUIRE(setenv(SR_ENV_ADDR, addr, 1) == 0);
}

int sr_unix_socket_in(int nsfd)
{
	int own, fd, e;

	if (nsfd < 0)
		return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (own < 0)
		return -1;
	if (setns(nsfd, CLONE_NEWNET)) {
		close(own);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	e = errno;
	if (setns(own, CLONE_NEWNET)) {
		/* stranded in the other namespace: nothing after this is valid */
		fprintf(stderr, "cannot return to our network namespace: %s\n", strerror(errno));
		_exit(2);
	}
	close(own);
	errno = e;
	return fd;
}
