/*
 * test_ids.c — random bytes and UUIDs (src/common/ids.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "ids.h"
#include "mooncake/errors.h"

static int is_lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static void test_uuid_is_36_lowercase_hex_digits_and_dashes(void **state)
{
    char id[MC_UUID_TEXT_LEN + 1];
    assert_int_equal(mc_uuid_v4(id), 0);
    assert_int_equal(strlen(id), MC_UUID_TEXT_LEN);
    for (int i = 0; i < MC_UUID_TEXT_LEN; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            assert_int_equal(id[i], '-');
        else
            assert_true(is_lower_hex(id[i]));
    }
}

static void test_uuid_has_version_4_and_rfc4122_variant_bits(void **state)
{
    for (int n = 0; n < 256; n++) {
        char id[MC_UUID_TEXT_LEN + 1];
        assert_int_equal(mc_uuid_v4(id), 0);
        assert_int_equal(id[14], '4');
        assert_non_null(strchr("89ab", id[19]));
    }
}

static void test_uuids_differ(void **state)
{
    char a[MC_UUID_TEXT_LEN + 1], b[MC_UUID_TEXT_LEN + 1];
    assert_int_equal(mc_uuid_v4(a), 0);
    assert_int_equal(mc_uuid_v4(b), 0);
    assert_string_not_equal(a, b);
}

static void test_random_bytes_fill_a_large_buffer(void **state)
{
    /* Over getrandom's 256-byte single-read guarantee, so short reads must be continued. */
    static uint8_t buf[1 << 20];
    memset(buf, 0, sizeof(buf));
    assert_int_equal(mc_random_bytes(buf, sizeof(buf)), 0);
    size_t zeros = 0;
    for (size_t i = 0; i < sizeof(buf); i++)
        zeros += buf[i] == 0;
    /* About 1/256 of random bytes are 0; all-zero tails would show a short read left unfilled. */
    assert_true(zeros < sizeof(buf) / 128);
    assert_true(zeros > 0);
}

static void test_random_bytes_of_nothing_is_fine(void **state)
{
    assert_int_equal(mc_random_bytes(NULL, 0), 0);
}

static void test_random_u64s_differ(void **state)
{
    uint64_t a = 0, b = 0;
    assert_int_equal(mc_random_u64(&a), 0);
    assert_int_equal(mc_random_u64(&b), 0);
    assert_true(a != b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_is_36_lowercase_hex_digits_and_dashes),
        cmocka_unit_test(test_uuid_has_version_4_and_rfc4122_variant_bits),
        cmocka_unit_test(test_uuids_differ),
        cmocka_unit_test(test_random_bytes_fill_a_large_buffer),
        cmocka_unit_test(test_random_bytes_of_nothing_is_fine),
        cmocka_unit_test(test_random_u64s_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
