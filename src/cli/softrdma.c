/*
 * softrdma: the command-line tool.
 *   softrdma run -- PROGRAM ARGS   run an unmodified program on softrdma
 *   softrdma status                device, GIDs, processes and resources
 *   softrdma daemon [--idle S]     run softrdmad in the foreground
 *   softrdma fault SPEC|off        fault injection on the RoCEv2 wire
 *   softrdma trace FILE|off        capture the RoCEv2 wire into a pcap
 * `run` puts softrdma's libraries first on LD_LIBRARY_PATH (so the program
 * binds to our libibverbs.so.1 / librdmacm.so.1), makes sure the host's
 * daemon is up before the program starts, and (unless --no-devnodes) gives
 * the program /dev/infiniband/<dev_name> and /sys/class/infiniband/<dev> in
 * private namespaces (devns.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <softrdma/proto.h>

#include "cli/devns.h"
#include "core/daemon_link.h"
#include "core/msg.h"

static int usage(void)
{
	fprintf(stderr, "usage: softrdma run [--no-devnodes] [-q] [--] PROGRAM [ARGS...]\n"
			"       softrdma status\n"
			"       softrdma daemon [--idle SECONDS] [--fault SPEC]\n"
			"       softrdma fault SPEC | off | --help\n"
			"       softrdma trace FILE | off\n");
	return 2;
}

static const char fault_help[] =
    "softrdma fault SPEC: fault injection on this host's RoCEv2 wire (its daemon's engine)\n"
    "  SPEC: comma-separated key=value items; ';' starts a clause for another direction\n"
    "    seed=N            PRNG seed (default 1): same seed, same packets -> same faults\n"
    "    dir=tx|rx|both    direction of the clause (default tx)\n"
    "    qp=N|all          only packets whose BTH DestQP is N (tx: the peer's QPN)\n"
    "    drop=P dup=P corrupt=P reorder=P[:T] delay=P:T\n"
    "                      probability P (0..1 or N%) per packet; T: time (ns, us, ms, s)\n"
    "    drop_nth=N dup_nth=N corrupt_nth=N reorder_nth=N delay_nth=N\n"
    "                      the Nth matching packet gets that fault\n"
    "  e.g. softrdma fault seed=7,drop=0.01\n"
    "       softrdma fault dir=rx,qp=0x12,dup=0.05,delay=0.02:500us,drop_nth=3\n"
    "  softrdma fault off: none.  Counters: softrdma status.  At daemon start:\n"
    "  SOFTRDMA_FAULT=SPEC or softrdmad --fault SPEC.\n";

/* Connects as a monitor (no resources); -1 after saying why. */
static int monitor_connect(void)
{
	struct sr_dev_info info;
	char why[512];
	int sock, ret;

	sock = sr_daemon_connect(false, NULL);
	if (sock < 0) {
		fprintf(stderr, "softrdma: no softrdmad is running in this network namespace\n");
		return -1;
	}
	ret = sr_daemon_hello(sock, true, &info, NULL, why, sizeof(why));
	if (ret) {
		if (why[0])
			fprintf(stderr, "softrdma: %s\n", why);
		else
			fprintf(stderr, "softrdma: daemon handshake failed: %s\n", strerror(-ret));
		close(sock);
		return -1;
	}
	return sock;
}

static int request(int sock, struct sr_req *req, int fd, struct sr_rep *rep)
{
	if (sr_msg_send(sock, req, sizeof(*req), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0) ||
	    sr_msg_recv(sock, rep, sizeof(*rep), NULL, NULL) != sizeof(*rep)) {
		fprintf(stderr, "softrdma: no reply from softrdmad\n");
		return -1;
	}
	return 0;
}

static int cmd_fault(int argc, char **argv)
{
	struct sr_req req;
	struct sr_rep rep;
	int sock;

	if (argc != 1)
		return usage();
	if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
		fputs(fault_help, stdout);
		return 0;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_FAULT;
	if (strlen(argv[0]) >= sizeof(req.u.fault.spec)) {
		fprintf(stderr, "softrdma: fault spec too long\n");
		return 2;
	}
	strcpy(req.u.fault.spec, argv[0]);
	sock = monitor_connect();
	if (sock < 0 || request(sock, &req, -1, &rep))
		return 1;
	close(sock);
	rep.u.fault.text[sizeof(rep.u.fault.text) - 1] = 0;
	if (rep.status) {
		fprintf(stderr, "softrdma: fault: %s\n",
			rep.u.fault.text[0] ? rep.u.fault.text : strerror(-rep.status));
		return rep.status == -EINVAL ? 2 : 1;
	}
	printf("fault: %s\n", rep.u.fault.text);
	return 0;
}

static int cmd_trace(int argc, char **argv)
{
	struct sr_req req;
	struct sr_rep rep;
	int sock, fd = -1;

	if (argc != 1)
		return usage();
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_TRACE;
	if (strcmp(argv[0], "off")) {
		char *abs;

		/* created here, with the user's rights and working directory */
		fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "softrdma: %s: %s\n", argv[0], strerror(errno));
			return 1;
		}
		abs = realpath(argv[0], NULL);
		snprintf(req.u.trace.path, sizeof(req.u.trace.path), "%s", abs ? abs : argv[0]);
		free(abs);
	}
	sock = monitor_connect();
	if (sock < 0 || request(sock, &req, fd, &rep))
		return 1;
	close(sock);
	if (fd >= 0)
		close(fd);
	if (rep.status) {
		fprintf(stderr, "softrdma: trace: %s\n",
			rep.status == -ENOTSUP ? "no RoCEv2 engine on this host"
					       : strerror(-rep.status));
		return 1;
	}
	if (fd >= 0)
		printf("trace: capturing RoCEv2 packets into %s\n", req.u.trace.path);
	else
		printf("trace: off (%llu packets in the last capture)\n",
		       (unsigned long long)rep.u.trace.pkts);
	return 0;
}

static void self_dir(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0) {
		snprintf(buf, len, ".");
		return;
	}
	exe[n] = 0;
	snprintf(buf, len, "%s", dirname(exe));
}

static int cmd_run(int argc, char **argv)
{
	char dir[PATH_MAX], lib[PATH_MAX + 8], *path;
	const char *old = getenv("LD_LIBRARY_PATH");
	bool devnodes = true, quiet = false;
	int sock;

	for (; argc > 0 && argv[0][0] == '-'; argc--, argv++) {
		if (!strcmp(argv[0], "--no-devnodes")) {
			devnodes = false;
		} else if (!strcmp(argv[0], "-q") || !strcmp(argv[0], "--quiet")) {
			quiet = true;
		} else if (!strcmp(argv[0], "--")) {
			argc--;
			argv++;
			break;
		} else {
			return usage();
		}
	}
	if (argc < 1)
		return usage();
	self_dir(dir, sizeof(dir));
	snprintf(lib, sizeof(lib), "%s/../lib", dir);
	if (old && *old) {
		path = malloc(strlen(lib) + strlen(old) + 2);
		if (!path)
			return 1;
		sprintf(path, "%s:%s", lib, old);
	} else {
		path = strdup(lib);
	}
	setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	sock = sr_daemon_connect(true, (const void *)cmd_run);
	if (sock < 0)
		fprintf(stderr, "softrdma: cannot reach or start softrdmad: %s\n", strerror(-sock));
	else
		close(sock);
	/* after the daemon is up: one started from inside would live in the
	 * program's namespaces */
	if (sock >= 0 && devnodes)
		sr_devns_setup(quiet);
	execvp(argv[0], argv);
	fprintf(stderr, "softrdma: %s: %s\n", argv[0], strerror(errno));
	return 127;
}

/* Only the daemon's own user gets an answer: another one is refused
 * (sr_daemon_hello says why on stderr) and prints nothing on stdout. */
static int cmd_status(void)
{
	struct sr_dev_info info;
	struct sr_req req;
	struct sr_rep rep;
	char why[512];
	int sock, ret;
	long n;

	sock = sr_daemon_connect(false, NULL);
	if (sock < 0) {
		printf("no softrdmad is running in this network namespace\n");
		return 0;
	}
	/* monitor: holds no resources */
	ret = sr_daemon_hello(sock, true, &info, NULL, why, sizeof(why));
	if (ret) {
		if (why[0])
			fprintf(stderr, "softrdma: %s\n", why);
		else
			fprintf(stderr, "softrdma: daemon handshake failed: %s\n", strerror(-ret));
		close(sock);
		return 1;
	}
	memset(&req, 0, sizeof(req));
	req.op = SR_OP_STATUS;
	if (sr_msg_send(sock, &req, sizeof(req), NULL, 0) ||
	    sr_msg_recv(sock, &rep, sizeof(rep), NULL, NULL) != sizeof(rep) || rep.status) {
		fprintf(stderr, "softrdma: status request failed\n");
		return 1;
	}
	for (uint32_t got = 0; got < rep.u.status.len;) {
		char buf[SR_STATUS_CHUNK];

		n = sr_msg_recv(sock, buf, sizeof(buf), NULL, NULL);
		if (n <= 0)
			return 1;
		fwrite(buf, 1, n, stdout);
		got += n;
	}
	close(sock);
	return 0;
}

static int cmd_daemon(int argc, char **argv)
{
	char path[PATH_MAX];
	char **av = calloc(argc + 2, sizeof(char *));

	if (!av)
		return 1;
	sr_daemon_path((const void *)cmd_daemon, path, sizeof(path));
	av[0] = path;
	for (int i = 0; i < argc; i++)
		av[i + 1] = argv[i];
	execvp(path, av);
	fprintf(stderr, "softrdma: %s: %s\n", path, strerror(errno));
	return 127;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "status"))
		return cmd_status();
	if (!strcmp(argv[1], "fault"))
		return cmd_fault(argc - 2, argv + 2);
	if (!strcmp(argv[1], "trace"))
		return cmd_trace(argc - 2, argv + 2);
	if (!strcmp(argv[1], "daemon"))
		return cmd_daemon(argc - 2, argv + 2);
	return usage();
}
