/*
 * A private softrdmad for a test that runs the transport in its own
 * process (tests/fuzz/fuzz_rx.c, tests/unit/test_transport.c): started on
 * a control socket named after the test and its pid, with its own engine
 * off (SOFTRDMA_ROCE=0: the test's engine, sr_engine_attach, is the one
 * that runs), never spawned by the library, and ended with the test (also
 * when the test is killed: PR_SET_PDEATHSIG).  Header only: the fuzz
 * targets build apart from the tree's libraries.
 */
#ifndef SR_TESTS_INPROC_DAEMON_H
#define SR_TESTS_INPROC_DAEMON_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/daemon_link.h"

static pid_t inproc_daemon_pid;

static void inproc_daemon_stop(void)
{
	if (inproc_daemon_pid > 0) {
		kill(inproc_daemon_pid, SIGTERM);
		waitpid(inproc_daemon_pid, NULL, 0);
		inproc_daemon_pid = 0;
	}
}

/* Starts bin (a path, or a name looked up in PATH) as the daemon of this
 * process's verbs, its output to /dev/null if quiet, and waits until it
 * answers; false if it did not come up within 5 s.  name tells its
 * control socket apart. */
static bool inproc_daemon_start(const char *bin, const char *name, bool quiet)
{
	char sock[64];

	snprintf(sock, sizeof(sock), "softrdma-%s-%d", name, (int)getpid());
	setenv("SOFTRDMA_SOCKET", sock, 1);
	setenv("SOFTRDMA_ROCE", "0", 1); /* its engine off: the test's runs */
	setenv("SOFTRDMA_NO_SPAWN", "1", 1);
	inproc_daemon_pid = fork();
	if (inproc_daemon_pid < 0)
		return false;
	if (inproc_daemon_pid == 0) {
		int null = quiet ? open("/dev/null", O_RDWR) : -1;

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		execlp(bin, "softrdmad", "--idle", "0", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = sr_daemon_connect(false, NULL);

		if (fd >= 0) {
			close(fd);
			return true;
		}
		usleep(10000);
	}
	return false;
}

#endif
