/*
 * test_log.c — unit tests of the log rate limiter (src/common/log.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "log.h"

#include <unistd.h>

/* "Within the interval" is asserted with a 60 s interval and "past it" with a 200 ms one after
 * sleeping 250 ms, so a test thread descheduled for a while on a loaded machine cannot turn a
 * suppressed line into an allowed one (the interval is an argument of each call; the counter
 * holds only when the last line was allowed). */
static void test_ratelimit_allows_the_first_line_then_one_per_interval(void **state)
{
    atomic_uint_fast64_t last = 0;
    assert_int_equal(mc_log_ratelimit(&last, 200), 1);
    assert_int_equal(mc_log_ratelimit(&last, 60000), 0);
    assert_int_equal(mc_log_ratelimit(&last, 60000), 0);
    usleep(250 * 1000);
    assert_int_equal(mc_log_ratelimit(&last, 60000), 0); /* 250 ms: still within 60 s */
    assert_int_equal(mc_log_ratelimit(&last, 200), 1);   /* but past 200 ms */
    assert_int_equal(mc_log_ratelimit(&last, 60000), 0); /* and counted from this line on */
}

static void test_ratelimit_counters_are_independent(void **state)
{
    atomic_uint_fast64_t a = 0, b = 0;
    assert_int_equal(mc_log_ratelimit(&a, 60000), 1);
    assert_int_equal(mc_log_ratelimit(&b, 60000), 1);
    assert_int_equal(mc_log_ratelimit(&a, 60000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ratelimit_allows_the_first_line_then_one_per_interval),
        cmocka_unit_test(test_ratelimit_counters_are_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
