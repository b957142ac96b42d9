/*
 * A /proc/<pid>/stat line (proc(5)), read for the fields after the command
 * name: the name (field 2) is in parentheses and may hold spaces and ')',
 * so the fields start after the last ')'.
 */
#ifndef SR_CORE_PROCSTAT_H
#define SR_CORE_PROCSTAT_H

#include <stddef.h>

/* Reads path into buf (len bytes) and returns where field 3 (the state)
 * starts, or NULL if the file cannot be read (the task is gone). */
const char *sr_procstat_fields(const char *path, char *buf, size_t len);

#endif
