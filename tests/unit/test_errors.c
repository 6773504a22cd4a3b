/*
 * test_errors.c — the error-code names of include/mooncake/errors.h match upstream Mooncake's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "mooncake/errors.h"

static void test_error_name_of_success_is_ok(void **state)
{
    assert_string_equal(mc_error_name(MC_OK), "OK");
    assert_string_equal(mc_error_name(0), "OK");
}

static void test_error_name_matches_upstream_numbers(void **state)
{
    assert_string_equal(mc_error_name(-1), "INTERNAL_ERROR");
    assert_string_equal(mc_error_name(-200), "NO_AVAILABLE_HANDLE");
    assert_string_equal(mc_error_name(-600), "INVALID_PARAMS");
    assert_string_equal(mc_error_name(-704), "OBJECT_NOT_FOUND");
    assert_string_equal(mc_error_name(-706), "OBJECT_HAS_LEASE");
    assert_string_equal(mc_error_name(-1702), "TENANT_NOT_EMPTY");
}

static void test_error_enum_values_are_upstream_numbers(void **state)
{
    assert_int_equal(MC_ERR_NO_AVAILABLE_HANDLE, -200);
    assert_int_equal(MC_ERR_INVALID_PARAMS, -600);
    assert_int_equal(MC_ERR_OBJECT_NOT_FOUND, -704);
    assert_int_equal(MC_ERR_OBJECT_HAS_LEASE, -706);
}

static void test_error_name_of_unknown_code_is_unknown_error(void **state)
{
    assert_string_equal(mc_error_name(-2), "UNKNOWN_ERROR");
    assert_string_equal(mc_error_name(1), "UNKNOWN_ERROR");
    assert_string_equal(mc_error_name(-99999), "UNKNOWN_ERROR");
    assert_false(mc_error_is_known(-2));
    assert_false(mc_error_is_known(1));
}

/* Rebuild the list here from the same X-macro, so every entry is checked by its own name. */
#define CODE_ENTRY(name, value) {(value), #name},
static const struct {
    int code;
    const char *name;
} all_codes[] = {MC_ERROR_LIST(CODE_ENTRY)};
#undef CODE_ENTRY

static void test_every_listed_code_is_known_by_its_name(void **state)
{
    size_t n = sizeof(all_codes) / sizeof(all_codes[0]);
    assert_true(n > 60);
    for (size_t i = 0; i < n; i++) {
        assert_true(mc_error_is_known(all_codes[i].code));
        assert_string_equal(mc_error_name(all_codes[i].code), all_codes[i].name);
    }
}

static void test_listed_codes_are_distinct_and_not_positive(void **state)
{
    size_t n = sizeof(all_codes) / sizeof(all_codes[0]);
    for (size_t i = 0; i < n; i++) {
        assert_true(all_codes[i].code <= 0);
        for (size_t j = i + 1; j < n; j++)
            assert_int_not_equal(all_codes[i].code, all_codes[j].code);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_name_of_success_is_ok),
        cmocka_unit_test(test_error_name_matches_upstream_numbers),
        cmocka_unit_test(test_error_enum_values_are_upstream_numbers),
        cmocka_unit_test(test_error_name_of_unknown_code_is_unknown_error),
        cmocka_unit_test(test_every_listed_code_is_known_by_its_name),
        cmocka_unit_test(test_listed_codes_are_distinct_and_not_positive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
