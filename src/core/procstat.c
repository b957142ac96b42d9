/*
 * /proc/<pid>/stat lines (see procstat.h).
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/procstat.h"

const char *sr_procstat_fields(const char *path, char *buf, size_t len)
{
	const char *p;
	ssize_t got;
	int fd;

	if (len < 2)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	got = read(fd, buf, len - 1);
	close(fd);
	if (got <= 0)
		return NULL;
	buf[got] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}
