/*
 * Connecting to softrdmad (see daemon_link.h).  Starting it is a double
 * fork + setsid so the daemon is not a child of the application (it must
 * not receive the application's signals or be reaped by it); concurrent
 * starters race on bind() of the abstract name, and the losers exit.  The
 * HELLO exchange is here too, shared by the library and the CLI, so both
 * tell the user the same thing when a daemon refuses them or is not theirs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/auxv.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <softrdma/proto.h>

#include "core/daemon_link.h"
#include "core/env.h"
#include "core/msg.h"
#include "core/own_socket.h"

/*
 * A set-user-ID (or otherwise privileged, AT_SECURE) program takes nothing
 * of this from its caller's environment (secure_getenv) and starts no
 * daemon: SOFTRDMA_DAEMON would otherwise run any binary with its
 * privileges.  The default name carries the effective uid, the one the
 * daemon checks, so such a program finds its own account's daemon.
 */
void sr_daemon_socket_name(char *buf, unsigned len)
{
	const char *e = sr_env_str("SOFTRDMA_SOCKET");
	struct stat st;

	if (e)
		snprintf(buf, len, "%s", e);
	else /* no /proc: 0, and the daemon still refuses a mismatch */
		snprintf(buf, len, SR_SOCKET_FMT, (unsigned)geteuid(),
			 stat("/proc/self/ns/pid", &st) ? 0ul : (unsigned long)st.st_ino);
}

void sr_daemon_path(const void *self, char *buf, unsigned len)
{
	const char *e = sr_env_str("SOFTRDMA_DAEMON");
	Dl_info info;

	if (e) {
		snprintf(buf, len, "%s", e);
		return;
	}
	if (self && dladdr(self, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
		char tmp[PATH_MAX];
		char real[PATH_MAX];

		snprintf(tmp, sizeof(tmp), "%s", info.dli_fname);
		if (realpath(tmp, real)) {
			snprintf(buf, len, "%s/../bin/softrdmad", dirname(real));
			if (!access(buf, X_OK))
				return;
			snprintf(buf, len, "%s/softrdmad", dirname(real));
			if (!access(buf, X_OK))
				return;
		}
	}
	snprintf(buf, len, "softrdmad");
}

static int try_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char name[100];
	socklen_t len;
	int fd;

	sr_daemon_socket_name(name, sizeof(name));
	len = offsetof(struct sockaddr_un, sun_path) + 1 +
	      snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "%s", name);
	fd = sr_own_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, len)) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/*
 * The environment a daemon started on demand gets: the application's,
 * less its preloads and less every SOFTRDMA_* setting but the two passed
 * on (README.md, "Environment"): SOFTRDMA_SOCKET, the name the daemon
 * must listen on for its starter to find it, and SOFTRDMA_LOG, which
 * changes only what it says (and keeps its stderr, the starter's).  The
 * daemon is shared by every later program of the user: its tuning
 * (SOFTRDMA_FAULT, SOFTRDMA_IDLE_TIMEOUT, SOFTRDMA_ACK_DEFER_US, ...)
 * must not depend on which program happened to start it; a daemon run by
 * hand or by a test takes all of them.  Built before the fork: the child
 * of a threaded program may not allocate.
 */
static char **daemon_env(void)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ && environ[n])
		n++;
	env = malloc((n + 1) * sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *v = environ[i];

		if (!strncmp(v, "LD_PRELOAD=", 11))
			continue;
		if (!strncmp(v, "SOFTRDMA_", 9) && strncmp(v, "SOFTRDMA_SOCKET=", 16) &&
		    strncmp(v, "SOFTRDMA_LOG=", 13))
			continue;
		env[k++] = environ[i];
	}
	env[k] = NULL;
	return env;
}

static int spawn_daemon(const void *self)
{
	char path[PATH_MAX];
	char *argv[] = {path, NULL};
	bool keep_stderr = sr_env_str("SOFTRDMA_LOG") != NULL;
	char **env;
	pid_t pid;
	int status;

	sr_daemon_path(self, path, sizeof(path));
	env = daemon_env();
	if (!env)
		return -ENOMEM;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		free(env);
		return -e;
	}
	if (pid == 0) {
		int fd;

		setsid();
		if (fork() != 0)
			_exit(0);
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			if (!keep_stderr)
				dup2(fd, 2);
		}
		execvpe(path, argv, env);
		_exit(127);
	}
	free(env);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* SOFTRDMA_NO_SPAWN=1: never start a daemon.  Read at every connect, not
 * once: a program (the tests) may set it after its first connect. */
static bool no_spawn(void)
{
	int v = -1;

	return sr_env_set("SOFTRDMA_NO_SPAWN", &v);
}

int sr_daemon_connect(bool spawn, const void *self)
{
	struct timespec ts = {0, 5 * 1000 * 1000};
	int fd = try_connect();

	if (fd >= 0 || !spawn || no_spawn() || getauxval(AT_SECURE))
		return fd;
	if (fd != -ECONNREFUSED && fd != -ENOENT)
		return fd;
	fd = spawn_daemon(self);
	if (fd < 0)
		return fd;
	for (int i = 0; i < 1000; i++) { /* up to 5 s */
		fd = try_connect();
		if (fd >= 0)
			return fd;
		nanosleep(&ts, NULL);
	}
	return fd;
}

static void refusal_text(const struct sr_rep *rep, const char *name, char *why, size_t len)
{
	const __typeof__(rep->u.refused) *r = &rep->u.refused;

	switch (r->reason) {
	case SR_REFUSED_UID:
		snprintf(why, len,
			 "daemon at @%s belongs to uid %u, you are uid %u: refused (each user "
			 "has a softrdmad of their own: unset SOFTRDMA_SOCKET)",
			 name, r->daemon_uid, r->client_uid);
		break;
	case SR_REFUSED_PIDNS:
		snprintf(why, len,
			 "daemon at @%s runs in another pid namespace than this process (pid %u "
			 "here, %u there): refused; the shared memory's locks name processes by "
			 "pid, so each pid namespace needs its own daemon: unset SOFTRDMA_SOCKET, "
			 "or give it a name of this namespace's own",
			 name, (unsigned)getpid(), r->client_pid);
		break;
	case SR_REFUSED_VERSION:
		snprintf(why, len,
			 "daemon at @%s speaks protocol %u, this library %u: refused (a softrdmad "
			 "of another build is running: stop it, or use SOFTRDMA_SOCKET)",
			 name, r->version, SR_PROTO_VERSION);
		break;
	default:
		snprintf(why, len, "daemon at @%s refused this process (reason %u): %s", name,
			 r->reason, strerror(-rep->status));
	}
}

int sr_daemon_hello(int sock, bool monitor, struct sr_dev_info *info, int *arena_fd, char *why,
		    size_t whylen)
{
	struct sr_req req;
	struct sr_rep rep;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	char name[100];
	int fds[SR_MSG_MAX_FDS], nfds = SR_MSG_MAX_FDS, ret;
	long n;

	why[0] = 0;
	memset(&rep, 0, sizeof(rep));
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_HELLO;
	req.u.hello.version = SR_PROTO_VERSION;
	req.u.hello.flags = monitor ? 1 : 0;
	req.u.hello.pid = (uint32_t)getpid();
	ret = sr_msg_send(sock, &req, sizeof(req), NULL, 0);
	if (ret)
		return ret == -EPIPE || ret == -ECONNRESET ? -EIO : ret;
	n = sr_msg_recv(sock, &rep, sizeof(rep), fds, &nfds);
	if (n <= 0)
		return n ? (int)n : -EIO;
	sr_daemon_socket_name(name, sizeof(name));
	ret = (size_t)n != sizeof(rep) ? -EPROTO : rep.status;
	if (ret && rep.status && rep.u.refused.reason &&
	    (size_t)n >= offsetof(struct sr_rep, u) + sizeof(rep.u.refused))
		refusal_text(&rep, name, why, whylen);
	/* The other direction: any account can bind a free abstract name, so
	 * a "daemon" of another uid at ours could hand us an arena it writes
	 * and collect our registered memory.  We use only our own uid's. */
	if (!ret &&
	    (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) || cred.uid != geteuid())) {
		snprintf(why, whylen,
			 "daemon at @%s runs as uid %d, you are uid %u: not using it (another "
			 "user's process holds this name: unset SOFTRDMA_SOCKET, or pick a name "
			 "of your own)",
			 name, clen == sizeof(cred) ? (int)cred.uid : -1, (unsigned)geteuid());
		ret = -EACCES;
	}
	if (!ret && nfds != 1)
		ret = -EPROTO;
	if (ret) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return ret;
	}
	*info = rep.u.hello;
	if (arena_fd)
		*arena_fd = fds[0];
	else
		close(fds[0]);
	return 0;
}
