/*
 * `softrdma run`'s device nodes: /dev/infiniband/<dev_name> and
 * /sys/class/infiniband/<dev> for the program about to be exec'd, in
 * private namespaces (devns.c).
 */
#ifndef SR_CLI_DEVNS_H
#define SR_CLI_DEVNS_H

#include <stdbool.h>

/* Enters the namespaces and builds both trees; on failure says why on
 * stderr, leaves the view of the system as it was and returns -1 (the
 * program can still run, without them).  Must be called single-threaded. */
int sr_devns_setup(bool quiet);

#endif
