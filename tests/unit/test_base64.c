/*
 * test_base64.c — standard padded base64 (src/common/base64.h): RFC 4648's vectors, round trips
 * of every byte value, and refusal of everything that is not exactly that form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "mooncake/errors.h"

static const struct {
    const char *plain, *coded;
} rfc4648[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

static void test_encode_gives_the_rfc4648_vectors(void **state)
{
    for (size_t i = 0; i < sizeof(rfc4648) / sizeof(rfc4648[0]); i++) {
        size_t n = 99;
        char *text = mc_base64_encode(rfc4648[i].plain, strlen(rfc4648[i].plain), &n);
        assert_non_null(text);
        assert_string_equal(text, rfc4648[i].coded);
        assert_int_equal(n, strlen(rfc4648[i].coded));
        free(text);
    }
}

static void test_decode_gives_the_rfc4648_vectors_nul_terminated(void **state)
{
    for (size_t i = 0; i < sizeof(rfc4648) / sizeof(rfc4648[0]); i++) {
        uint8_t *out = NULL;
        size_t n = 99;
        const char *coded = rfc4648[i].coded;
        assert_int_equal(mc_base64_decode(coded, strlen(coded), &out, &n), 0);
        assert_non_null(out);
        assert_int_equal(n, strlen(rfc4648[i].plain));
        assert_string_equal((const char *)out, rfc4648[i].plain);
        free(out);
    }
}

static void test_every_byte_value_and_length_round_trips(void **state)
{
    uint8_t data[300];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(255 - i * 7); /* covers '+', '/' and zero bytes */
    for (size_t len = 0; len <= sizeof(data); len++) {
        size_t tlen;
        char *text = mc_base64_encode(data, len, &tlen);
        assert_non_null(text);
        assert_int_equal(tlen, (len + 2) / 3 * 4);
        assert_null(strchr(text, '\n'));
        uint8_t *back;
        size_t blen;
        assert_int_equal(mc_base64_decode(text, tlen, &back, &blen), 0);
        assert_int_equal(blen, len);
        assert_memory_equal(back, data, len);
        free(back);
        free(text);
    }
}

static void assert_refused(const char *text, size_t len)
{
    static uint8_t untouched;
    uint8_t *out = &untouched;
    size_t n = 99;
    assert_int_equal(mc_base64_decode(text, len, &out, &n), MC_ERR_DESERIALIZE_FAIL);
    assert_null(out);
    assert_int_equal(n, 0);
}

static void test_decode_refuses_a_length_not_a_multiple_of_4(void **state)
{
    assert_refused("Zg=", 3);
    assert_refused("Zm9vY", 5);
    assert_refused("Z", 1);
}

static void test_decode_refuses_misplaced_padding(void **state)
{
    assert_refused("Zg=A", 4);     /* a lone '=' not last */
    assert_refused("Z===", 4);     /* three of them */
    assert_refused("====", 4);     /* nothing but padding */
    assert_refused("Zg==Zm9v", 8); /* padding before the last group */
    assert_refused("=m9v", 4);
}

static void test_decode_refuses_characters_outside_the_standard_alphabet(void **state)
{
    assert_refused("Zm9-", 4); /* URL-safe alphabet */
    assert_refused("Zm9_", 4);
    assert_refused("Zm 9", 4);              /* whitespace inside */
    assert_refused("    Zm9v", 8);          /* leading whitespace (OpenSSL alone would skip it) */
    assert_refused("Zm9vYmE=\n\n\n\n", 12); /* trailing line breaks */
    assert_refused("Zm\0v", 4);             /* a NUL inside the counted length */
    assert_refused("Zm9\xc3", 4);
}

static void test_decode_keeps_accepting_nonzero_bits_after_the_last_byte(void **state)
{
    /* "Zh==" is not canonical ("Zg==" is) but decodes to "f", as it always has here. */
    uint8_t *out;
    size_t n;
    assert_int_equal(mc_base64_decode("Zh==", 4, &out, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 'f');
    free(out);
}

static void test_empty_text_decodes_to_an_empty_string(void **state)
{
    uint8_t *out = NULL;
    size_t n = 99;
    assert_int_equal(mc_base64_decode("", 0, &out, &n), 0);
    assert_non_null(out);
    assert_int_equal(n, 0);
    assert_int_equal(out[0], '\0');
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_gives_the_rfc4648_vectors),
        cmocka_unit_test(test_decode_gives_the_rfc4648_vectors_nul_terminated),
        cmocka_unit_test(test_every_byte_value_and_length_round_trips),
        cmocka_unit_test(test_decode_refuses_a_length_not_a_multiple_of_4),
        cmocka_unit_test(test_decode_refuses_misplaced_padding),
        cmocka_unit_test(test_decode_refuses_characters_outside_the_standard_alphabet),
        cmocka_unit_test(test_decode_keeps_accepting_nonzero_bits_after_the_last_byte),
        cmocka_unit_test(test_empty_text_decodes_to_an_empty_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
