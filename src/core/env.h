/*
 * The one reader of softrdma's settings from the environment (SOFTRDMA_*;
 * every one of them is in README.md's "Environment" tables): sr_env_str
 * the text (NULL if unset or empty), and, read once per process,
 * sr_env_on is on unless set to "0", sr_env_set off unless set to "1",
 * sr_env_num a decimal number, at most max (a larger one is max; no number
 * or a negative one gives the default).  A set-user-ID (AT_SECURE)
 * program takes none of them from its caller (secure_getenv): it would
 * otherwise let the caller choose the daemon binary it starts
 * (SOFTRDMA_DAEMON) or the daemon it trusts (SOFTRDMA_SOCKET).  rdma-core's
 * own variables (VERBS_LOG_LEVEL, RDMAV_FORK_SAFE, RS_DEBUG, ...) are read
 * where rdma-core reads them, as it does.
 */
#ifndef SR_CORE_ENV_H
#define SR_CORE_ENV_H

#include <stdbool.h>
#include <stdlib.h>

static inline const char *sr_env_str(const char *name)
{
	const char *e = secure_getenv(name);

	return e && *e ? e : NULL;
}

/* *cache starts at -1; racing first readers compute the same value. */
static inline bool sr_env_on(const char *name, int *cache)
{
	int v = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *e = sr_env_str(name);

		v = !(e && *e == '0');
		__atomic_store_n(cache, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* *cache starts at -1. */
static inline bool sr_env_set(const char *name, int *cache)
{
	int v = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *e = sr_env_str(name);

		v = e && *e == '1';
		__atomic_store_n(cache, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* *cache starts at -1; 0 <= dflt <= max < INT_MAX. */
static inline int sr_env_num(const char *name, int *cache, int max, int dflt)
{
	int v = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *e = sr_env_str(name);
		char *end = NULL;
		long l = e ? strtol(e, &end, 10) : -1;

		v = l < 0 || !end || *end ? dflt : l > max ? max : (int)l;
		__atomic_store_n(cache, v, __ATOMIC_RELAXED);
	}
	return v;
}

#endif
