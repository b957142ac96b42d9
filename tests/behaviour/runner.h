/*
 * What the runner (main.c) and the harness (harness.c) share: the check
 * counters, which live in a MAP_SHARED page so every helper process and
 * thread of a test adds to the same totals, and the run's seed.
 */
#ifndef SR_BEHAVE_RUNNER_H
#define SR_BEHAVE_RUNNER_H

#include <stdatomic.h>
#include <stdint.h>

struct sr_counters {
	_Atomic unsigned long passed;
	_Atomic unsigned long failed;
	_Atomic int status_shown; /* the daemons' state was printed at a failure */
};

extern struct sr_counters *sr_counters;
extern const char *sr_proc_name;
void sr_set_seed(uint64_t seed);
/* Called (if set) by the process whose check fails first, in the test */
extern void (*sr_on_first_failure)(void);

#endif
