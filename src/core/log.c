/*
 * Logging (see log.h): one line per message to stderr, prefixed with the
 * component name and pid, so interleaved daemon and client output reads.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"

int sr_log_level = SR_LOG_WARN;
static const char *sr_log_who = "softrdma";

void sr_log_init(const char *who)
{
	int level = -1; /* read at every init */

	if (who)
		sr_log_who = who;
	sr_log_level = sr_env_num("SOFTRDMA_LOG", &level, SR_LOG_TRACE, SR_LOG_WARN);
}

void sr_log_printf(int level, const char *func, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
	int saved = errno;
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%s[%d] %s: %s: ", sr_log_who, (int)getpid(),
		     names[level < 0   ? 0
			   : level > 4 ? 4
				       : level],
		     func);
	va_start(ap, fmt);
	if (n > 0 && n < (int)sizeof(line))
		vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
	errno = saved;
}
