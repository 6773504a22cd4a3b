/*
 * clock.c — the one clock of the code base (clock.h): monotonic time in ns and ms, and absolute
 * deadlines for pthread_cond_timedwait.
 */
#include "clock.h"

#include <time.h>

uint64_t mc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mc_deadline_after_ms(struct timespec *ts, int clock, uint64_t ms)
{
    clock_gettime((clockid_t)clock, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

uint64_t mc_now_ms(void)
{
    return mc_now_ns() / 1000000ull;
}
