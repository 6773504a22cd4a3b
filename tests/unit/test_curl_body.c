/*
 * test_curl_body.c — the bounded libcurl response buffer (src/common/curl_body.h), fed the way
 * libcurl feeds it: chunk by chunk through the write callback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "curl_body.h"

static void test_chunks_are_appended_and_nul_terminated(void **state)
{
    mc_curl_body_t b = {.max = 1 << 20};
    char chunk[700];
    memset(chunk, 'a', sizeof(chunk));
    for (int i = 0; i < 10; i++)
        assert_int_equal(mc_curl_body_write(chunk, 1, sizeof(chunk), &b), sizeof(chunk));
    assert_int_equal(b.len, 7000);
    assert_true(b.cap > b.len);
    assert_int_equal(b.data[b.len], '\0');
    assert_int_equal(b.overflow, 0);
    free(b.data);
}

static void test_a_body_of_exactly_max_bytes_is_accepted(void **state)
{
    mc_curl_body_t b = {.max = 8};
    assert_int_equal(mc_curl_body_write("abcd", 2, 2, &b), 4);
    assert_int_equal(mc_curl_body_write("efgh", 1, 4, &b), 4);
    assert_string_equal(b.data, "abcdefgh");
    assert_int_equal(b.overflow, 0);
    free(b.data);
}

static void test_a_body_past_max_fails_the_transfer_and_says_so(void **state)
{
    mc_curl_body_t b = {.max = 8};
    assert_int_equal(mc_curl_body_write("abcdef", 1, 6, &b), 6);
    assert_int_equal(mc_curl_body_write("ghi", 1, 3, &b), 0);
    assert_int_equal(b.overflow, 1);
    assert_int_equal(b.len, 6);
    assert_string_equal(b.data, "abcdef");
    free(b.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks_are_appended_and_nul_terminated),
        cmocka_unit_test(test_a_body_of_exactly_max_bytes_is_accepted),
        cmocka_unit_test(test_a_body_past_max_fails_the_transfer_and_says_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
