/*
 * Logging for the library and the daemon.  SOFTRDMA_LOG=<0..4> (error,
 * warn, info, debug, trace) sets the level; default warn.  Messages carry
 * the function name; errno is preserved across a log call.
 */
#ifndef SR_CORE_LOG_H
#define SR_CORE_LOG_H

enum sr_log_level { SR_LOG_ERR, SR_LOG_WARN, SR_LOG_INFO, SR_LOG_DEBUG, SR_LOG_TRACE };

extern int sr_log_level;
void sr_log_init(const char *who);
void sr_log_printf(int level, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define sr_log(lvl, ...)                                                                           \
	do {                                                                                       \
		if ((lvl) <= sr_log_level)                                                         \
			sr_log_printf((lvl), __func__, __VA_ARGS__);                               \
	} while (0)
#define sr_err(...)  sr_log(SR_LOG_ERR, __VA_ARGS__)
#define sr_warn(...) sr_log(SR_LOG_WARN, __VA_ARGS__)
#define sr_info(...) sr_log(SR_LOG_INFO, __VA_ARGS__)
#define sr_dbg(...)  sr_log(SR_LOG_DEBUG, __VA_ARGS__)

#endif
