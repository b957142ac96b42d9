/*
 * sr_behave: the runner of softrdma's same-host behaviour suite.
 *
 *   sr_behave --list          the test names, one per line
 *   sr_behave NAME            run one test
 *
 * A run starts a private softrdmad (`softrdmad --idle 0` on a unique
 * SOFTRDMA_SOCKET, with SOFTRDMA_NO_SPAWN=1 so nothing can fall back to a
 * shared daemon), runs the test in its own process group with a deadline,
 * kills what is left of that group, stops the daemon by PID, and prints
 * "NAME: N passed, M failed".  The exit status is 0 only if no check failed,
 * at least one passed, and every process of the test exited cleanly.
 *
 * Environment: SR_BEHAVE_SEED reproduces a run's random choices;
 * SR_BEHAVE_DAEMON overrides the daemon binary; SR_BEHAVE_TIMEOUT_SCALE
 * stretches deadlines (sanitizer builds).
 *
 * Remote mode (SR_BEHAVE_PEER_NETNS, see hosts.h): a second private daemon
 * is started inside the peer host's network namespace and stopped the same
 * way; the agents use it.  A test that only makes sense on one host is not
 * run: it prints why and exits 77 (ctest's SKIP_RETURN_CODE).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hosts.h"
#include "runner.h"
#include "tests.h"

#ifndef SR_DAEMON_PATH
#define SR_DAEMON_PATH "softrdmad"
#endif

#define SR_TABLE_ENTRY(name, timeout) {#name, test_##name, timeout},
static const struct sr_test sr_tests[] = {SR_TEST_LIST(SR_TABLE_ENTRY)};
#define SR_NTESTS (sizeof(sr_tests) / sizeof(sr_tests[0]))

#define SR_EXIT_SKIP 77

static bool daemon_reachable(const char *name, int nsfd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t len;
	int fd, ok;

	len = offsetof(struct sockaddr_un, sun_path) + 1 +
	      snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "%s", name);
	fd = sr_unix_socket_in(nsfd);
	if (fd < 0)
		return false;
	ok = !connect(fd, (struct sockaddr *)&sa, len);
	close(fd);
	return ok;
}

/* A private daemon on socket `sock`, in network namespace nsfd (-1: ours). */
static pid_t start_daemon(const char *sock, int nsfd)
{
	const char *path = getenv("SR_BEHAVE_DAEMON");
	pid_t self = getpid(), pid;
	int st;

	if (!path || !*path)
		path = SR_DAEMON_PATH;
	setenv("SOFTRDMA_NO_SPAWN", "1", 1);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != self)
			_exit(127);
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET)) {
			fprintf(stderr, "setns for softrdmad: %s\n", strerror(errno));
			_exit(127);
		}
		setenv("SOFTRDMA_SOCKET", sock, 1);
		execl(path, path, "--idle", "0", (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		if (daemon_reachable(sock, nsfd))
			return pid;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "softrdmad exited during start-up (status %#x)\n", st);
			return -1;
		}
		sr_sleep_ms(10);
	}
	fprintf(stderr, "softrdmad did not come up\n");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* Stops a daemon by PID; false if it had died during the test. */
static bool stop_daemon(pid_t pid, const char *which)
{
	bool alive = true;
	int st = 0;

	if (waitpid(pid, &st, WNOHANG) == pid) {
		alive = false;
	} else {
		kill(pid, SIGTERM);
		for (int i = 0; i < 500; i++) {
			if (waitpid(pid, &st, WNOHANG) == pid)
				break;
			sr_sleep_ms(10);
			if (i == 499) {
				fprintf(stderr, "softrdmad%s ignored SIGTERM: killed\n", which);
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
			}
		}
	}
	if (!alive)
		fprintf(stderr, "softrdmad%s died during the test (status %#x)\n", which, st);
	else if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "softrdmad%s exit status %#x after SIGTERM\n", which, st);
	return alive;
}

/* `softrdma status`'s RoCE lines of the daemon on sock (in nsfd, -1: ours),
 * the CLI found next to the daemon. */
static void show_status(const char *sock, int nsfd, const char *which)
{
	const char *daemon = getenv("SR_BEHAVE_DAEMON");
	char cli[4096];
	const char *slash;
	pid_t pid;

	if (!daemon || !*daemon)
		daemon = SR_DAEMON_PATH;
	if (!(slash = strrchr(daemon, '/')))
		return;
	snprintf(cli, sizeof(cli), "%.*s/softrdma", (int)(slash - daemon), daemon);
	printf("# softrdma status of %s:\n", which);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET))
			_exit(127);
		setenv("SOFTRDMA_SOCKET", sock, 1);
		execl("/bin/sh", "sh", "-c", "\"$0\" status | grep -E 'roce v2|^ *qp|wire'", cli,
		      (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* The two daemons of the running test, for show_both (set before the fork). */
static char run_sock[96], run_peer_sock[104];
static int run_peer_ns = -1;
static pid_t run_test_pid;

/* Both engines' counters and QPs; at the first failing check this is while
 * the test's QPs still exist (their PSNs and queues say where they stand). */
static void show_both(void)
{
	if (!sr_remote() || getpid() != run_test_pid ||
	    atomic_exchange(&sr_counters->status_shown, 1))
		return;
	fflush(stderr);
	show_status(run_sock, -1, "this host");
	show_status(run_peer_sock, run_peer_ns, "the peer host");
}

static uint64_t pick_seed(void)
{
	const char *e = getenv("SR_BEHAVE_SEED");
	struct timespec ts;

	if (e && *e)
		return strtoull(e, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
}

static int run_one(const struct sr_test *t)
{
	const char *sc = getenv("SR_BEHAVE_TIMEOUT_SCALE");
	int timeout_s = t->timeout_s * (sc && atoi(sc) > 0 ? atoi(sc) : 1);
	uint64_t seed = pick_seed(), start = sr_now_us(), deadline;
	char *sock = run_sock, *peer_sock = run_peer_sock;
	pid_t daemon, peer_daemon = -1, pid;
	int st = 0, peer_ns = -1;
	bool timed_out = false, daemon_ok;
	unsigned long passed, failed;

	sr_counters = mmap(NULL, sizeof(*sr_counters), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sr_counters == MAP_FAILED)
		return 2;
	sr_set_seed(seed);
	printf("# %s: seed %llu (rerun with SR_BEHAVE_SEED=%llu)\n", t->name,
	       (unsigned long long)seed, (unsigned long long)seed);
	fflush(stdout);

	snprintf(sock, sizeof(run_sock), "softrdma-behave-%d-%llx", (int)getpid(),
		 (unsigned long long)(seed & 0xffffffffu));
	if (sr_remote()) {
		const char *ns = getenv(SR_ENV_PEER_NETNS), *a = getenv(SR_ENV_ADDR),
			   *pa = getenv(SR_ENV_PEER_ADDR);

		if (!a || !*a || !pa || !*pa) {
			fprintf(stderr, "%s needs %s and %s\n", SR_ENV_PEER_NETNS, SR_ENV_ADDR,
				SR_ENV_PEER_ADDR);
			return 2;
		}
		peer_ns = open(ns, O_RDONLY | O_CLOEXEC);
		if (peer_ns < 0) {
			fprintf(stderr, "%s=%s: %s\n", SR_ENV_PEER_NETNS, ns, strerror(errno));
			return 2;
		}
		printf("# %s: across hosts: we are %s, the agents %s in %s\n", t->name, a, pa, ns);
		snprintf(peer_sock, sizeof(run_peer_sock), "%s-peer", sock);
		run_peer_ns = peer_ns;
		setenv(SR_ENV_PEER_SOCKET, peer_sock, 1);
		peer_daemon = start_daemon(peer_sock, peer_ns);
		if (peer_daemon < 0) {
			printf("%s: 0 passed, 1 failed (no daemon on the peer host)\n", t->name);
			return 1;
		}
	}
	daemon = start_daemon(sock, -1);
	if (daemon < 0) {
		printf("%s: 0 passed, 1 failed (no daemon)\n", t->name);
		if (peer_daemon > 0)
			stop_daemon(peer_daemon, " of the peer host");
		return 1;
	}
	setenv("SOFTRDMA_SOCKET", sock, 1);

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sr_proc_name = t->name;
		run_test_pid = getpid();
		sr_on_first_failure = show_both;
		t->fn();
		fflush(stdout);
		fflush(stderr);
		_exit(sr_failed_here() ? 1 : 0);
	}
	setpgid(pid, pid);
	deadline = start + (uint64_t)timeout_s * 1000000u;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (sr_now_us() > deadline) {
			timed_out = true;
			fprintf(stderr, "%s: TIMEOUT after %d s: killing the test's processes\n",
				t->name, timeout_s);
			kill(-pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		sr_sleep_ms(5);
	}
	kill(-pid, SIGKILL); /* helpers left behind, if any */
	if (sr_remote() && (atomic_load(&sr_counters->failed) || timed_out) &&
	    !atomic_exchange(&sr_counters->status_shown, 1)) {
		/* what both engines saw, for the failure's report */
		show_status(sock, -1, "this host");
		show_status(peer_sock, peer_ns, "the peer host");
	}
	daemon_ok = stop_daemon(daemon, "");
	if (peer_daemon > 0 && !stop_daemon(peer_daemon, " of the peer host"))
		daemon_ok = false;

	passed = atomic_load(&sr_counters->passed);
	failed = atomic_load(&sr_counters->failed);
	if (timed_out || !daemon_ok || !WIFEXITED(st) || WEXITSTATUS(st)) {
		if (!timed_out && (!WIFEXITED(st) || WEXITSTATUS(st)) && !failed)
			fprintf(stderr, "%s: test process ended with status %#x\n", t->name, st);
		if (!failed)
			failed = 1;
	}
	if (!passed && !failed)
		failed = 1; /* a test that checked nothing proves nothing */
	printf("%s: %lu passed, %lu failed (%.2f s)\n", t->name, passed, failed,
	       (double)(sr_now_us() - start) / 1e6);
	fflush(stdout);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < SR_NTESTS; i++)
			printf("%s\n", sr_tests[i].name);
		return 0;
	}
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: %s --list | TEST\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < SR_NTESTS; i++) {
		const char *why;

		if (strcmp(argv[1], sr_tests[i].name))
			continue;
		why = sr_remote() ? sr_remote_skip_reason(argv[1]) : NULL;
		if (why) {
			printf("%s: SKIP across hosts: %s\n", argv[1], why);
			return SR_EXIT_SKIP;
		}
		return run_one(&sr_tests[i]);
	}
	fprintf(stderr, "%s: no test named %s (see --list)\n", argv[0], argv[1]);
	return 2;
}
