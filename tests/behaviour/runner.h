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
};

extern struct sr_counters *sr_counters;
extern const char *sr_proc_name;
void sr_set_seed(uint64_t seed);

#endif
