/*
 * What the unit tests' multi-thread stresses share: a run that stops
 * making progress (an entry lost inside the code under test) fails instead
 * of hanging.  The consumer gives up after STALL_MS without progress and
 * sets give_up for the producers; join() fails the run at once on a
 * producer stuck longer.  Include after check.h, with NAME defined.
 */
#ifndef SR_TEST_UNIT_STRESS_H
#define SR_TEST_UNIT_STRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STALL_MS 3000

static _Atomic int give_up;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void join(pthread_t t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += STALL_MS / 1000 + 2;
	if (pthread_timedjoin_np(t, NULL, &ts)) {
		fprintf(stderr, "%s: FAIL: a producer is stuck\n", NAME);
		check_failed++;
		exit(CHECK_SUMMARY(NAME));
	}
}

#endif
