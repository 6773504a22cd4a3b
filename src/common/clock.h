/*
 * clock.h — the one clock of the code base: monotonic time (CLOCK_MONOTONIC, never steps back;
 * what every timeout and deadline in the code is measured on) and absolute deadlines for
 * condition variables. Thread-safe.
 */
#ifndef MC_COMMON_CLOCK_H
#define MC_COMMON_CLOCK_H

#include <stdint.h>

/* Monotonic clock, in ns and in ms. */
uint64_t mc_now_ns(void);
uint64_t mc_now_ms(void);
/* *ts = now on `clock` (CLOCK_REALTIME, or CLOCK_MONOTONIC for condition variables set up with
 * it) plus ms: the absolute deadline pthread_cond_timedwait takes. */
struct timespec;
void mc_deadline_after_ms(struct timespec *ts, int clock, uint64_t ms);

#endif /* MC_COMMON_CLOCK_H */
