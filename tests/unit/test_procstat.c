/*
 * Unit test of /proc/<pid>/stat reading (src/core/procstat.c): this
 * running process's own line gives state R; a thread of ours that sleeps
 * shows S, and field 20 (num_threads) grows with it (a
 * sanitizer may have threads of its own); a pid that does not exist gives
 * NULL.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "core/procstat.h"

static const char *field(const char *p, int n) /* p: field 3 */
{
	for (int f = 3; p && f < n; f++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	return p;
}

static _Atomic pid_t sleeper_tid;

static void *sleeper(void *arg)
{
	(void)arg;
	atomic_store(&sleeper_tid, (pid_t)syscall(SYS_gettid));
	pause();
	return NULL;
}

int main(void)
{
	char buf[512], path[64];
	const char *p;
	pthread_t t;
	int n0;

	p = sr_procstat_fields("/proc/self/stat", buf, sizeof(buf));
	CHECK(p != NULL);
	CHECK(p && p[0] == 'R');
	p = field(p, 20);
	CHECK(p && atoi(p) >= 1);
	n0 = p ? atoi(p) : 0;

	pthread_create(&t, NULL, sleeper, NULL);
	while (!atomic_load(&sleeper_tid))
		usleep(1000);
	usleep(20000);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)atomic_load(&sleeper_tid));
	p = sr_procstat_fields(path, buf, sizeof(buf));
	CHECK(p && p[0] == 'S');
	p = field(sr_procstat_fields("/proc/self/stat", buf, sizeof(buf)), 20);
	CHECK(p && atoi(p) > n0);

	CHECK(sr_procstat_fields("/proc/999999999/stat", buf, sizeof(buf)) == NULL);
	return CHECK_SUMMARY("test_procstat");
}
