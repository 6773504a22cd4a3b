/*
 * test_errbuf.c — the caller's error buffer (src/common/errbuf.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "errbuf.h"
#include "mooncake/errors.h"

static void test_fail_formats_the_message_and_returns_invalid_params(void **state)
{
    char err[64];
    assert_int_equal(mc_fail(err, sizeof(err), "bad --%s: %d", "port", 70000),
                     MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "bad --port: 70000");
}

static void test_fail_cuts_a_long_message_and_terminates_it(void **state)
{
    char err[8];
    memset(err, 'x', sizeof(err));
    assert_int_equal(mc_fail(err, sizeof(err), "%s", "0123456789abcdef"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "0123456");
}

static void test_fail_leaves_a_zero_length_buffer_alone(void **state)
{
    char err[4] = "abc";
    assert_int_equal(mc_fail(err, 0, "message"), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "abc");
}

static void test_fail_without_a_buffer_only_returns(void **state)
{
    assert_int_equal(mc_fail(NULL, 64, "message %d", 1), MC_ERR_INVALID_PARAMS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_formats_the_message_and_returns_invalid_params),
        cmocka_unit_test(test_fail_cuts_a_long_message_and_terminates_it),
        cmocka_unit_test(test_fail_leaves_a_zero_length_buffer_alone),
        cmocka_unit_test(test_fail_without_a_buffer_only_returns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
