/*
 * test_parse.c — sizes, durations, booleans and numbers as src/common/parse.h promises to read
 * them, and the one-sentence errors it gives for everything else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mooncake/errors.h"
#include "parse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define GiB (1ull << 30)

/* Parses `text` as a size and returns the bytes, failing the test on an error. */
static uint64_t size_of(const char *text)
{
    char err[256] = "";
    uint64_t bytes = 12345;
    int rc = mc_parse_size(text, &bytes, err, sizeof(err));
    if (rc != 0)
        fail_msg("mc_parse_size(\"%s\") failed: %s", text, err);
    return bytes;
}

/* Asserts `text` is rejected as a size with an error containing `expect`; leaves *bytes alone. */
static void assert_size_rejected(const char *text, const char *expect)
{
    char err[256] = "";
    uint64_t bytes = 777;
    assert_int_equal(mc_parse_size(text, &bytes, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(bytes, 777);
    if (!strstr(err, expect))
        fail_msg("error for \"%s\" was \"%s\", expected it to contain \"%s\"", text, err, expect);
}

static uint64_t duration_of(const char *text)
{
    char err[256] = "";
    uint64_t ms = 12345;
    int rc = mc_parse_duration_ms(text, &ms, err, sizeof(err));
    if (rc != 0)
        fail_msg("mc_parse_duration_ms(\"%s\") failed: %s", text, err);
    return ms;
}

static void assert_duration_rejected(const char *text, const char *expect)
{
    char err[256] = "";
    uint64_t ms = 777;
    assert_int_equal(mc_parse_duration_ms(text, &ms, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(ms, 777);
    if (!strstr(err, expect))
        fail_msg("error for \"%s\" was \"%s\", expected it to contain \"%s\"", text, err, expect);
}

/* ---- sizes: accepted forms ---- */

static void test_size_plain_bytes(void **state)
{
    assert_int_equal(size_of("4096"), 4096);
    assert_int_equal(size_of("1"), 1);
}

static void test_size_zero(void **state)
{
    assert_int_equal(size_of("0"), 0);
    assert_int_equal(size_of("0GB"), 0);
}

static void test_size_32_gb_with_space_is_32_gibibytes(void **state)
{
    assert_int_equal(size_of("32 GB"), 34359738368ull);
}

static void test_size_1_gb_with_space(void **state)
{
    assert_int_equal(size_of("1 GB"), GiB);
}

static void test_size_16mb_without_space(void **state)
{
    assert_int_equal(size_of("16MB"), 16ull << 20);
}

static void test_size_decimal_with_short_lowercase_unit(void **state)
{
    assert_int_equal(size_of("1.5g"), 1610612736ull);
}

static void test_size_kib_with_space(void **state)
{
    assert_int_equal(size_of("64 KiB"), 64ull << 10);
}

static void test_size_every_unit_spelling(void **state)
{
    assert_int_equal(size_of("3B"), 3);
    assert_int_equal(size_of("3K"), 3ull << 10);
    assert_int_equal(size_of("3KB"), 3ull << 10);
    assert_int_equal(size_of("3KiB"), 3ull << 10);
    assert_int_equal(size_of("3M"), 3ull << 20);
    assert_int_equal(size_of("3MB"), 3ull << 20);
    assert_int_equal(size_of("3MiB"), 3ull << 20);
    assert_int_equal(size_of("3G"), 3ull << 30);
    assert_int_equal(size_of("3GB"), 3ull << 30);
    assert_int_equal(size_of("3GiB"), 3ull << 30);
    assert_int_equal(size_of("3T"), 3ull << 40);
    assert_int_equal(size_of("3TB"), 3ull << 40);
    assert_int_equal(size_of("3TiB"), 3ull << 40);
}

static void test_size_units_are_case_insensitive(void **state)
{
    assert_int_equal(size_of("2gb"), 2 * GiB);
    assert_int_equal(size_of("2Gb"), 2 * GiB);
    assert_int_equal(size_of("2gIB"), 2 * GiB);
    assert_int_equal(size_of("2b"), 2);
    assert_int_equal(size_of("2tib"), 2ull << 40);
}

static void test_size_surrounding_whitespace_is_ignored(void **state)
{
    assert_int_equal(size_of("  16MB  "), 16ull << 20);
    assert_int_equal(size_of("\t32\tGB\n"), 32 * GiB);
}

static void test_size_fraction_of_a_byte_is_dropped(void **state)
{
    assert_int_equal(size_of("0.3k"), 307); /* 307.2 bytes */
    assert_int_equal(size_of("1.9"), 1);
    assert_int_equal(size_of("4096.0"), 4096);
}

static void test_size_long_fraction_is_exact(void **state)
{
    assert_int_equal(size_of("0.25 TiB"), 1ull << 38);
    assert_int_equal(size_of("0.000000000001t"), 1); /* 1.0995 bytes */
    assert_int_equal(size_of("1.00000000000000000000000001g"), GiB);
}

static void test_size_largest_accepted_is_int64_max(void **state)
{
    assert_int_equal(size_of("9223372036854775807"), (uint64_t)INT64_MAX);
    assert_int_equal(size_of("8388607.99999999999999999999TB"), (uint64_t)INT64_MAX);
}

/* ---- sizes: rejections ---- */

static void test_size_rejects_percent(void **state)
{
    char err[256];
    uint64_t bytes;
    assert_int_equal(mc_parse_size("50%", &bytes, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_string_equal(err, "invalid size \"50%\": percentages are not sizes; use bytes or a "
                             "unit like 16MB");
}

static void test_size_rejects_negative(void **state)
{
    assert_size_rejected("-1", "negative sizes are not allowed");
    assert_size_rejected("-16MB", "negative");
}

static void test_size_rejects_empty(void **state)
{
    assert_size_rejected("", "empty");
}

static void test_size_rejects_only_whitespace(void **state)
{
    assert_size_rejected("  ", "empty");
}

static void test_size_rejects_exponent_notation(void **state)
{
    assert_size_rejected("1e3", "exponent notation is not supported");
    assert_size_rejected("1E+3", "exponent");
}

static void test_size_rejects_garbage(void **state)
{
    assert_size_rejected("abc", "not a number");
    assert_size_rejected("GB", "not a number");
    assert_size_rejected("+5", "not a number");
    assert_size_rejected(".5g", "not a number");
    assert_size_rejected("1.g", "not a number");
    assert_size_rejected("0x10", "unexpected text \"x10\" after the number");
    assert_size_rejected("16 MB extra", "unexpected text \"extra\" after the number");
    assert_size_rejected("1.2.3", "unexpected text \".3\"");
    assert_size_rejected("16MB!", "unexpected text \"!\"");
}

static void test_size_rejects_unknown_unit(void **state)
{
    assert_size_rejected("5PB", "unknown unit \"PB\"");
    assert_size_rejected("5 bytes", "unknown unit \"bytes\"");
    assert_size_rejected("5ms", "unknown unit");
}

static void test_size_rejects_overflow(void **state)
{
    assert_size_rejected("9223372036854775808", "too large");
    assert_size_rejected("8388608TB", "too large");
    assert_size_rejected("99999999999999999999999999999", "too large");
}

static void test_size_rejects_null_without_crashing(void **state)
{
    char err[256];
    uint64_t bytes = 1;
    assert_int_equal(mc_parse_size(NULL, &bytes, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(bytes, 1);
    assert_int_equal(mc_parse_size("16MB", NULL, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_size(NULL, NULL, NULL, 0), MC_ERR_INVALID_PARAMS);
}

static void test_size_error_is_optional_and_truncated(void **state)
{
    uint64_t bytes;
    char small[8];
    assert_int_equal(mc_parse_size("x", &bytes, NULL, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_size("x", &bytes, small, sizeof(small)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    small[0] = 'q';
    assert_int_equal(mc_parse_size("x", &bytes, small, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(small[0], 'q');
}

/* ---- durations ---- */

static void test_duration_plain_number_is_milliseconds(void **state)
{
    assert_int_equal(duration_of("500"), 500);
    assert_int_equal(duration_of("0"), 0);
}

static void test_duration_suffixes(void **state)
{
    assert_int_equal(duration_of("500ms"), 500);
    assert_int_equal(duration_of("10s"), 10000);
    assert_int_equal(duration_of("1m"), 60000);
    assert_int_equal(duration_of("2h"), 7200000);
}

static void test_duration_space_case_and_decimals(void **state)
{
    assert_int_equal(duration_of("10 s"), 10000);
    assert_int_equal(duration_of("10S"), 10000);
    assert_int_equal(duration_of("1.5s"), 1500);
    assert_int_equal(duration_of("0.5h"), 1800000);
}

static void test_duration_largest_accepted_is_int64_max(void **state)
{
    assert_int_equal(duration_of("9223372036854775.807s"), (uint64_t)INT64_MAX);
}

static void test_duration_rejects_unknown_unit(void **state)
{
    assert_duration_rejected("5d", "unknown unit \"d\"; use ms, s, m or h");
    assert_duration_rejected("5us", "unknown unit");
    assert_duration_rejected("5min", "unknown unit");
}

static void test_duration_rejects_bad_text(void **state)
{
    assert_duration_rejected("", "empty");
    assert_duration_rejected(" ", "empty");
    assert_duration_rejected("-5s", "negative durations are not allowed");
    assert_duration_rejected("50%", "percentages are not durations");
    assert_duration_rejected("1e3", "exponent");
    assert_duration_rejected("soon", "not a number");
    assert_duration_rejected("99999999999999999999", "too large");
    assert_duration_rejected("9223372036854775.9s", "too large"); /* fraction pushes it over */
    assert_duration_rejected(NULL, "no text given");
}

/* ---- booleans ---- */

static int bool_of(const char *text)
{
    int v = -1;
    char err[128];
    if (mc_parse_bool(text, &v, err, sizeof(err)) != 0)
        fail_msg("mc_parse_bool(\"%s\") failed: %s", text, err);
    return v;
}

static void test_bool_true_spellings(void **state)
{
    assert_int_equal(bool_of("1"), 1);
    assert_int_equal(bool_of("true"), 1);
    assert_int_equal(bool_of("TRUE"), 1);
    assert_int_equal(bool_of("yes"), 1);
    assert_int_equal(bool_of("On"), 1);
}

static void test_bool_false_spellings(void **state)
{
    assert_int_equal(bool_of("0"), 0);
    assert_int_equal(bool_of("false"), 0);
    assert_int_equal(bool_of("False"), 0);
    assert_int_equal(bool_of("no"), 0);
    assert_int_equal(bool_of("OFF"), 0);
}

static void test_bool_rejects_other_text(void **state)
{
    int v = 7;
    char err[128];
    assert_int_equal(mc_parse_bool("maybe", &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "not a boolean"));
    assert_int_equal(mc_parse_bool("", &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_bool("2", &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_bool("truee", &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_bool(NULL, &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_bool("1", NULL, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(v, 7);
}

/* ---- int64 ---- */

static void test_int64_accepts_signed_decimal_in_bounds(void **state)
{
    int64_t v;
    assert_int_equal(mc_parse_int64("50051", 1, 65535, &v, NULL, 0), 0);
    assert_int_equal(v, 50051);
    assert_int_equal(mc_parse_int64("-42", INT64_MIN, INT64_MAX, &v, NULL, 0), 0);
    assert_int_equal(v, -42);
    assert_int_equal(mc_parse_int64("+7", 0, 10, &v, NULL, 0), 0);
    assert_int_equal(v, 7);
    assert_int_equal(mc_parse_int64(" 12 ", 0, 100, &v, NULL, 0), 0);
    assert_int_equal(v, 12);
}

static void test_int64_accepts_both_extremes(void **state)
{
    int64_t v;
    assert_int_equal(mc_parse_int64("9223372036854775807", INT64_MIN, INT64_MAX, &v, NULL, 0), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(mc_parse_int64("-9223372036854775808", INT64_MIN, INT64_MAX, &v, NULL, 0), 0);
    assert_true(v == INT64_MIN);
}

static void test_int64_rejects_out_of_bounds(void **state)
{
    int64_t v = 3;
    char err[256];
    assert_int_equal(mc_parse_int64("70000", 1, 65535, &v, err, sizeof(err)),
                     MC_ERR_INVALID_PARAMS);
    assert_string_equal(err,
                        "invalid integer \"70000\": out of range; must be between 1 and 65535");
    assert_int_equal(mc_parse_int64("0", 1, 65535, &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(v, 3);
}

static void test_int64_rejects_overflow(void **state)
{
    int64_t v;
    char err[256];
    assert_int_equal(
        mc_parse_int64("9223372036854775808", INT64_MIN, INT64_MAX, &v, err, sizeof(err)),
        MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "out of range for a 64-bit integer"));
    assert_int_equal(
        mc_parse_int64("-9223372036854775809", INT64_MIN, INT64_MAX, &v, err, sizeof(err)),
        MC_ERR_INVALID_PARAMS);
}

static void test_int64_rejects_non_integers(void **state)
{
    const char *bad[] = {"", " ", "abc", "12abc", "1.0", "1e3", "0x10", "-", "+", "1 2", NULL};
    int64_t v;
    char err[256];
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(mc_parse_int64(bad[i], INT64_MIN, INT64_MAX, &v, err, sizeof(err)),
                         MC_ERR_INVALID_PARAMS);
        assert_non_null(strstr(err, "not an integer"));
    }
    assert_int_equal(mc_parse_int64(NULL, 0, 1, &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_int64("1", 0, 1, NULL, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
}

/* ---- double ---- */

static void test_double_accepts_decimals_and_exponents(void **state)
{
    double v;
    assert_int_equal(mc_parse_double("0.95", 0, 1, &v, NULL, 0), 0);
    assert_true(v == 0.95);
    assert_int_equal(mc_parse_double("-2.5", -10, 10, &v, NULL, 0), 0);
    assert_true(v == -2.5);
    assert_int_equal(mc_parse_double("1e3", 0, 1e6, &v, NULL, 0), 0);
    assert_true(v == 1000.0);
    assert_int_equal(mc_parse_double(" 3 ", 0, 10, &v, NULL, 0), 0);
    assert_true(v == 3.0);
}

static void test_double_rejects_out_of_bounds(void **state)
{
    double v = 0.5;
    char err[256];
    assert_int_equal(mc_parse_double("1.5", 0, 1, &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "out of range; must be between 0 and 1"));
    assert_true(v == 0.5);
}

static void test_double_rejects_non_finite_and_non_decimal(void **state)
{
    const char *bad[] = {"",      "abc",  "nan", "inf",   "-infinity",
                         "0x1p3", "1.5x", "1e",  "1e999", NULL};
    double v;
    char err[256];
    for (int i = 0; bad[i]; i++) {
        if (mc_parse_double(bad[i], -DBL_MAX, DBL_MAX, &v, err, sizeof(err)) !=
            MC_ERR_INVALID_PARAMS)
            fail_msg("\"%s\" was accepted as a double", bad[i]);
    }
    assert_int_equal(mc_parse_double(NULL, 0, 1, &v, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_parse_double("1", 0, 1, NULL, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
}

/* ---- mc_format_size ---- */

static void test_format_size_small_values_in_bytes(void **state)
{
    char buf[32];
    assert_string_equal(mc_format_size(0, buf, sizeof(buf)), "0 B");
    assert_string_equal(mc_format_size(512, buf, sizeof(buf)), "512 B");
    assert_string_equal(mc_format_size(1023, buf, sizeof(buf)), "1023 B");
}

static void test_format_size_binary_units(void **state)
{
    char buf[32];
    assert_string_equal(mc_format_size(1024, buf, sizeof(buf)), "1.0 KiB");
    assert_string_equal(mc_format_size(1536, buf, sizeof(buf)), "1.5 KiB");
    assert_string_equal(mc_format_size(16ull << 20, buf, sizeof(buf)), "16.0 MiB");
    assert_string_equal(mc_format_size(32 * GiB, buf, sizeof(buf)), "32.0 GiB");
    assert_string_equal(mc_format_size(3ull << 40, buf, sizeof(buf)), "3.0 TiB");
    assert_string_equal(mc_format_size((1ull << 20) - 1, buf, sizeof(buf)), "1.0 MiB");
}

static void test_format_size_output_parses_back(void **state)
{
    char buf[32];
    assert_int_equal(size_of(mc_format_size(32 * GiB, buf, sizeof(buf))), 32 * GiB);
    assert_int_equal(size_of(mc_format_size(512, buf, sizeof(buf))), 512);
}

static void test_format_size_respects_buffer_length(void **state)
{
    char buf[4] = "zzz";
    assert_ptr_equal(mc_format_size(32 * GiB, buf, sizeof(buf)), buf);
    assert_string_equal(buf, "32.");
    assert_null(mc_format_size(1, NULL, 10));
    assert_ptr_equal(mc_format_size(1, buf, 0), buf);
}

/* ---- robustness ---- */

/* xorshift64*: a fixed seed keeps the random-text test reproducible. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static void test_parsers_survive_random_text(void **state)
{
    static const char alphabet[] = "0123456789.+-eEkKmMgGtTbBiIsShH% \t\x01\xff";
    uint64_t seed = 42;
    char text[24], err[64];
    for (int n = 0; n < 200000; n++) {
        size_t len = rng_next(&seed) % sizeof(text);
        for (size_t i = 0; i < len; i++)
            text[i] = alphabet[rng_next(&seed) % (sizeof(alphabet) - 1)];
        text[len] = '\0';

        uint64_t u = 0;
        int64_t i64 = 0;
        double d = 0;
        int b = 0;
        if (mc_parse_size(text, &u, err, sizeof(err)) == 0)
            assert_true(u <= (uint64_t)INT64_MAX);
        else
            assert_true(strlen(err) > 0);
        if (mc_parse_duration_ms(text, &u, err, sizeof(err)) == 0)
            assert_true(u <= (uint64_t)INT64_MAX);
        if (mc_parse_int64(text, -1000, 1000, &i64, err, sizeof(err)) == 0)
            assert_true(i64 >= -1000 && i64 <= 1000);
        if (mc_parse_double(text, -1e6, 1e6, &d, err, sizeof(err)) == 0)
            assert_true(d >= -1e6 && d <= 1e6);
        if (mc_parse_bool(text, &b, err, sizeof(err)) == 0)
            assert_true(b == 0 || b == 1);
    }
}

/* ---- mc_meminfo, mc_cpus_contended ---------------------------------------------------------- */

static void test_meminfo_reads_the_kernel_fields(void **state)
{
    (void)state;
    int64_t total = mc_meminfo("MemTotal"), avail = mc_meminfo("MemAvailable");
    assert_true(total > 0);
    assert_true(avail >= 0 && avail <= total);
    assert_int_equal(mc_meminfo("NoSuchField"), -1);
    assert_int_equal(mc_meminfo("MemTot"), -1); /* a prefix of a field is not the field */
}

static atomic_int spinners_stop;

static void *spin_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&spinners_stop))
        ;
    return NULL;
}

/* More busy threads than CPUs: mc_cpus_contended() reports it within a few re-reads. */
static void test_cpus_contended_sees_more_runnable_threads_than_cpus(void **state)
{
    (void)state;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    assert_true(cpus > 0);
    int n = (int)cpus + 2;
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    assert_non_null(t);
    atomic_store(&spinners_stop, 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&t[i], NULL, spin_main, NULL), 0);
    int seen = 0;
    for (int i = 0; i < 200 && !seen; i++) { /* up to 10 s; the cache lasts 100 ms */
        seen = mc_cpus_contended();
        usleep(50000);
    }
    atomic_store(&spinners_stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    free(t);
    assert_true(seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meminfo_reads_the_kernel_fields),
        cmocka_unit_test(test_cpus_contended_sees_more_runnable_threads_than_cpus),
        cmocka_unit_test(test_size_plain_bytes),
        cmocka_unit_test(test_size_zero),
        cmocka_unit_test(test_size_32_gb_with_space_is_32_gibibytes),
        cmocka_unit_test(test_size_1_gb_with_space),
        cmocka_unit_test(test_size_16mb_without_space),
        cmocka_unit_test(test_size_decimal_with_short_lowercase_unit),
        cmocka_unit_test(test_size_kib_with_space),
        cmocka_unit_test(test_size_every_unit_spelling),
        cmocka_unit_test(test_size_units_are_case_insensitive),
        cmocka_unit_test(test_size_surrounding_whitespace_is_ignored),
        cmocka_unit_test(test_size_fraction_of_a_byte_is_dropped),
        cmocka_unit_test(test_size_long_fraction_is_exact),
        cmocka_unit_test(test_size_largest_accepted_is_int64_max),
        cmocka_unit_test(test_size_rejects_percent),
        cmocka_unit_test(test_size_rejects_negative),
        cmocka_unit_test(test_size_rejects_empty),
        cmocka_unit_test(test_size_rejects_only_whitespace),
        cmocka_unit_test(test_size_rejects_exponent_notation),
        cmocka_unit_test(test_size_rejects_garbage),
        cmocka_unit_test(test_size_rejects_unknown_unit),
        cmocka_unit_test(test_size_rejects_overflow),
        cmocka_unit_test(test_size_rejects_null_without_crashing),
        cmocka_unit_test(test_size_error_is_optional_and_truncated),
        cmocka_unit_test(test_duration_plain_number_is_milliseconds),
        cmocka_unit_test(test_duration_suffixes),
        cmocka_unit_test(test_duration_space_case_and_decimals),
        cmocka_unit_test(test_duration_largest_accepted_is_int64_max),
        cmocka_unit_test(test_duration_rejects_unknown_unit),
        cmocka_unit_test(test_duration_rejects_bad_text),
        cmocka_unit_test(test_bool_true_spellings),
        cmocka_unit_test(test_bool_false_spellings),
        cmocka_unit_test(test_bool_rejects_other_text),
        cmocka_unit_test(test_int64_accepts_signed_decimal_in_bounds),
        cmocka_unit_test(test_int64_accepts_both_extremes),
        cmocka_unit_test(test_int64_rejects_out_of_bounds),
        cmocka_unit_test(test_int64_rejects_overflow),
        cmocka_unit_test(test_int64_rejects_non_integers),
        cmocka_unit_test(test_double_accepts_decimals_and_exponents),
        cmocka_unit_test(test_double_rejects_out_of_bounds),
        cmocka_unit_test(test_double_rejects_non_finite_and_non_decimal),
        cmocka_unit_test(test_format_size_small_values_in_bytes),
        cmocka_unit_test(test_format_size_binary_units),
        cmocka_unit_test(test_format_size_output_parses_back),
        cmocka_unit_test(test_format_size_respects_buffer_length),
        cmocka_unit_test(test_parsers_survive_random_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
