/*
 * A short, yielding wait before a control-socket sleep.  On a small VM a
 * process that blocks for a reply and the daemon that blocks for the next
 * request each pay a wake-up (tens of microseconds when the other CPU is
 * idle), while the daemon's answer takes a few.  Both sides therefore look
 * again for a bounded time (SOFTRDMA_CTL_SPIN_US, default 30, 0 = never),
 * giving the CPU away between looks so the peer they wait for can run, and
 * only then sleep.  Only right after activity: an idle device never spins.
 * A thread that finds its CPU taken by a task that does not sleep (a yield
 * that lasted a scheduler slice) stops looking for 100 ms: yielding to such
 * a task costs its whole slice, more than the wake-up the look saves.
 */
#ifndef SR_CORE_CTL_SPIN_H
#define SR_CORE_CTL_SPIN_H

#include <poll.h>

/* The budget in microseconds (read from the environment once). */
unsigned sr_ctl_spin_us(void);
/* Looks at pfd until an event, or the budget passes: poll's result (0 =
 * nothing yet, then sleep in poll as before). */
int sr_ctl_spin_poll(struct pollfd *pfd, nfds_t n);
/* The same for one socket's readability: true when a record is waiting. */
int sr_ctl_spin_readable(int sock);

#endif
