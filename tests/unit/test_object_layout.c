/*
 * test_object_layout.c — the Mooncake-style object format (src/storage/object_layout.h): key
 * escaping round trips (every byte, '/', leading '.', long keys), names that must not be taken
 * for objects, the header's encoding and its verification, CRC32C, and the cutting of an object
 * stream into transfers and scatter-gather pieces.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/errors.h"
#include "object_layout.h"

/* Escapes `key`, checks the name is a valid single path component, unescapes and compares. */
static void assert_round_trip(const char *key, size_t key_len)
{
    char name[MC_OBJ_NAME_MAX];
    int hashed = mc_obj_escape_key(key, key_len, name, sizeof(name));
    assert_int_equal(hashed, 0);
    assert_true(strlen(name) <= MC_FS_NAME_MAX_ESCAPED);
    assert_null(strchr(name, '/'));
    assert_true(mc_obj_is_object_name(name));
    char back[MC_FS_KEY_MAX + 1];
    size_t back_len = 0;
    assert_int_equal(mc_obj_unescape_name(name, back, sizeof(back), &back_len), 0);
    assert_int_equal(back_len, key_len);
    assert_memory_equal(back, key, key_len);
}

static void test_plain_key_is_kept_as_is(void **state)
{
    char name[MC_OBJ_NAME_MAX];
    assert_int_equal(mc_obj_escape_key("layer0-block_17.kv", 18, name, sizeof(name)), 0);
    assert_string_equal(name, "layer0-block_17.kv");
    assert_round_trip("layer0-block_17.kv", 18);
}

static void test_slash_and_percent_are_escaped(void **state)
{
    char name[MC_OBJ_NAME_MAX];
    assert_int_equal(mc_obj_escape_key("a/b%c~d", 7, name, sizeof(name)), 0);
    assert_string_equal(name, "a%2Fb%25c%7Ed");
    assert_round_trip("a/b%c~d", 7);
    assert_round_trip("/", 1);
    assert_round_trip("//..//", 6);
}

static void test_leading_dot_never_makes_a_hidden_name(void **state)
{
    char name[MC_OBJ_NAME_MAX];
    assert_int_equal(mc_obj_escape_key(".", 1, name, sizeof(name)), 0);
    assert_string_equal(name, "%2E");
    assert_int_equal(mc_obj_escape_key("..", 2, name, sizeof(name)), 0);
    assert_string_equal(name, "%2E.");
    assert_int_equal(mc_obj_escape_key(".t0123", 6, name, sizeof(name)), 0);
    assert_true(mc_obj_is_object_name(name));
    assert_round_trip(".", 1);
    assert_round_trip("..", 2);
    assert_round_trip(".hidden", 7);
}

static void test_every_nonzero_byte_round_trips(void **state)
{
    char key[2];
    for (int c = 1; c < 256; c++) {
        key[0] = (char)c;
        key[1] = 'x';
        assert_round_trip(key, 2);
        assert_round_trip(key, 1);
    }
    char all[255];
    for (int c = 1; c < 256; c++)
        all[c - 1] = (char)c;
    char name[MC_OBJ_NAME_MAX];
    /* 255 bytes, most escaped: too long for a plain name. */
    assert_int_equal(mc_obj_escape_key(all, 60, name, sizeof(name)), 0);
    assert_round_trip(all, 60);
}

static void test_long_key_gets_a_hashed_name(void **state)
{
    char key[MC_FS_KEY_MAX];
    memset(key, 'k', sizeof(key));
    char name[MC_OBJ_NAME_MAX], name2[MC_OBJ_NAME_MAX];
    assert_int_equal(mc_obj_escape_key(key, MC_FS_NAME_MAX_ESCAPED, name, sizeof(name)), 0);
    assert_int_equal(mc_obj_escape_key(key, MC_FS_NAME_MAX_ESCAPED + 1, name, sizeof(name)), 1);
    assert_true(strlen(name) <= MC_FS_NAME_MAX_ESCAPED);
    assert_non_null(strchr(name, '~'));
    assert_true(mc_obj_is_object_name(name));
    char back[16];
    size_t back_len;
    assert_int_equal(mc_obj_unescape_name(name, back, sizeof(back), &back_len), 1);
    /* Keys differing only after the kept prefix still get different names. */
    key[MC_FS_KEY_MAX - 1] = 'z';
    assert_int_equal(mc_obj_escape_key(key, MC_FS_KEY_MAX, name, sizeof(name)), 1);
    key[MC_FS_KEY_MAX - 1] = 'y';
    assert_int_equal(mc_obj_escape_key(key, MC_FS_KEY_MAX, name2, sizeof(name2)), 1);
    assert_string_not_equal(name, name2);
}

static void test_invalid_keys_are_refused(void **state)
{
    char name[MC_OBJ_NAME_MAX];
    assert_int_equal(mc_obj_escape_key("", 0, name, sizeof(name)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_obj_escape_key("a\0b", 3, name, sizeof(name)), MC_ERR_INVALID_PARAMS);
    char *big = malloc(MC_FS_KEY_MAX + 1);
    memset(big, 'a', MC_FS_KEY_MAX + 1);
    assert_int_equal(mc_obj_escape_key(big, MC_FS_KEY_MAX + 1, name, sizeof(name)),
                     MC_ERR_INVALID_PARAMS);
    free(big);
}

static void test_foreign_names_do_not_unescape(void **state)
{
    char key[64];
    size_t len;
    const char *bad[] = {"%", "%2", "%zz", "%2f", "a b", "%41", ".tmp", "%00", "", "x%2E"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(mc_obj_unescape_name(bad[i], key, sizeof(key), &len),
                         MC_ERR_INVALID_PARAMS);
    assert_false(mc_obj_is_object_name(".t0000"));
    assert_false(mc_obj_is_object_name("."));
    assert_false(mc_obj_is_object_name(".."));
}

static void test_dir_names(void **state)
{
    char name[8];
    unsigned idx;
    mc_obj_dir_name(0, name);
    assert_string_equal(name, "00");
    mc_obj_dir_name(171, name);
    assert_string_equal(name, "ab");
    assert_true(mc_obj_parse_dir_name("ab", &idx));
    assert_int_equal(idx, 171);
    assert_false(mc_obj_parse_dir_name("AB", &idx));
    assert_false(mc_obj_parse_dir_name("abc", &idx));
    mc_obj_dir_name(MC_OBJ_PROBE_DIR, name);
    assert_string_equal(name, MC_OBJ_PROBE_DIR_NAME);
    /* Keys spread over the directories. */
    int seen[MC_OBJ_DIR_COUNT] = {0};
    char key[32];
    for (int i = 0; i < 4096; i++) {
        int n = snprintf(key, sizeof(key), "key-%d", i);
        seen[mc_obj_dir_index(key, (size_t)n)]++;
    }
    for (int d = 0; d < MC_OBJ_DIR_COUNT; d++)
        assert_true(seen[d] > 0);
}

static void test_crc32c_matches_the_standard_check_value(void **state)
{
    assert_int_equal(mc_crc32c(0, "123456789", 9), 0xE3069283u);
    uint32_t part = mc_crc32c(0, "1234", 4);
    assert_int_equal(mc_crc32c(part, "56789", 5), 0xE3069283u);
    assert_int_equal(mc_crc32c(0, NULL, 0), 0);
}

static void test_large_values_start_on_a_page_boundary(void **state)
{
    assert_int_equal(mc_obj_header_len(8, 0), MC_OBJ_HEADER_FIXED + 8);
    assert_int_equal(mc_obj_header_len(8, MC_OBJ_ALIGN_MIN - 1), MC_OBJ_HEADER_FIXED + 8);
    assert_int_equal(mc_obj_header_len(8, MC_OBJ_ALIGN_MIN), MC_OBJ_VALUE_ALIGN);
    assert_int_equal(mc_obj_header_len(MC_FS_KEY_MAX, 1ull << 40), 2 * MC_OBJ_VALUE_ALIGN);
    assert_int_equal(mc_obj_header_min_len(8), MC_OBJ_HEADER_FIXED + 8);
    /* The padding is zeros, and the header decodes from its first 40 + key_len bytes. */
    static unsigned char buf[2 * MC_OBJ_VALUE_ALIGN];
    memset(buf, 0xff, sizeof(buf));
    mc_obj_header_encode(buf, "padded", 6, MC_OBJ_ALIGN_MIN, 1);
    for (size_t i = mc_obj_header_min_len(6); i < MC_OBJ_VALUE_ALIGN; i++)
        assert_int_equal(buf[i], 0);
    assert_int_equal(buf[MC_OBJ_VALUE_ALIGN], 0xff);
    mc_obj_header_t h;
    assert_int_equal(mc_obj_header_decode(buf, mc_obj_header_min_len(6), &h), 0);
    assert_int_equal(h.header_len, MC_OBJ_VALUE_ALIGN);
    assert_int_equal(h.value_size, MC_OBJ_ALIGN_MIN);
}

static void test_header_round_trip(void **state)
{
    unsigned char buf[MC_OBJ_HEADER_MAX];
    const char *key = "some/key";
    size_t hlen = mc_obj_header_min_len(strlen(key));
    assert_int_equal(hlen, MC_OBJ_HEADER_FIXED + 8);
    mc_obj_header_encode(buf, key, strlen(key), 12345, 0xdeadbeef);
    assert_memory_equal(buf, MC_OBJ_MAGIC, MC_OBJ_MAGIC_LEN);
    mc_obj_header_t h;
    assert_int_equal(mc_obj_header_decode(buf, hlen, &h), 0);
    assert_int_equal(h.value_size, 12345);
    assert_int_equal(h.value_crc, 0xdeadbeef);
    assert_int_equal(h.key_len, strlen(key));
    assert_memory_equal(h.key, key, strlen(key));
    /* Extra bytes after the header (the value) are fine. */
    assert_int_equal(mc_obj_header_decode(buf, sizeof(buf), &h), 0);
}

static void test_header_damage_is_detected(void **state)
{
    unsigned char buf[MC_OBJ_HEADER_MAX], copy[MC_OBJ_HEADER_MAX];
    size_t hlen = mc_obj_header_len(5, 42);
    mc_obj_header_encode(buf, "hello", 5, 42, 7);
    mc_obj_header_t h;
    for (size_t i = 0; i < hlen; i++) {
        memcpy(copy, buf, hlen);
        copy[i] ^= 0x10;
        int rc = mc_obj_header_decode(copy, hlen, &h);
        assert_true(rc == MC_ERR_CHECKSUM_MISMATCH || rc == MC_ERR_FILE_READ_FAIL);
    }
    memcpy(copy, buf, hlen);
    copy[37] ^= 1; /* the reserved field is covered by the header CRC */
    assert_int_equal(mc_obj_header_decode(copy, hlen, &h), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(mc_obj_header_decode(buf, hlen - 1, &h), MC_ERR_FILE_READ_FAIL);
    assert_int_equal(mc_obj_header_decode(buf, 10, &h), MC_ERR_FILE_READ_FAIL);
}

static void test_xfer_count(void **state)
{
    assert_int_equal(mc_obj_xfer_count(100, 0), 1);
    assert_int_equal(mc_obj_xfer_count(100, 100), 1);
    assert_int_equal(mc_obj_xfer_count(101, 100), 2);
    assert_int_equal(mc_obj_xfer_count(8388608 + 41, 1048576), 9);
}

/* Concatenates what the iovecs point at. */
static size_t gather(const struct iovec *iov, size_t n, unsigned char *out)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
    }
    return len;
}

static void test_iovs_cover_the_stream_exactly(void **state)
{
    unsigned char hdr[50], val[1000], stream[1050], out[1050];
    for (size_t i = 0; i < sizeof(hdr); i++)
        hdr[i] = (unsigned char)i;
    for (size_t i = 0; i < sizeof(val); i++)
        val[i] = (unsigned char)(i * 7 + 3);
    memcpy(stream, hdr, 50);
    memcpy(stream + 50, val, 1000);
    mc_obj_seg_t segs[2] = {{hdr, 50}, {val, 1000}};
    struct iovec iov[64];
    unsigned pieces_list[] = {0, 1, 2, 3, 4, 7, 16};
    uint64_t xfers[] = {0, 1, 49, 50, 51, 100, 333, 1049, 1050, 4096};
    for (size_t p = 0; p < sizeof(pieces_list) / sizeof(pieces_list[0]); p++) {
        for (size_t x = 0; x < sizeof(xfers) / sizeof(xfers[0]); x++) {
            uint64_t xfer = xfers[x] ? xfers[x] : 1050;
            size_t total = 0;
            for (uint64_t off = 0; off < 1050; off += xfer) {
                uint64_t len = 1050 - off < xfer ? 1050 - off : xfer;
                size_t n = mc_obj_build_iovs(segs, 2, off, len, pieces_list[p], iov, 64);
                assert_true(n >= 1);
                unsigned want = pieces_list[p] ? pieces_list[p] : 1;
                if (want > len)
                    want = (unsigned)len;
                assert_true(n >= want && n <= want + 1);
                total += gather(iov, n, out + off);
            }
            assert_int_equal(total, 1050);
            assert_memory_equal(out, stream, 1050);
        }
    }
}

static void test_iovs_refuse_what_does_not_fit(void **state)
{
    unsigned char a[10];
    mc_obj_seg_t seg = {a, 10};
    struct iovec iov[4];
    assert_int_equal(mc_obj_build_iovs(&seg, 1, 0, 10, 8, iov, 4), 0);
    assert_int_equal(mc_obj_build_iovs(&seg, 1, 5, 10, 1, iov, 4), 0);
    assert_int_equal(mc_obj_build_iovs(&seg, 1, 0, 10, 4, iov, 4), 4);
}

static void test_temp_names_are_hidden(void **state)
{
    char t[32];
    mc_obj_temp_id_t id = {0x01234567u, 0x3fffffu, 0x89abcdefu, 42}, back;
    mc_obj_temp_name(&id, t);
    assert_string_equal(t, ".t012345673fffff89abcdef000002a");
    assert_int_equal(strlen(t), MC_OBJ_TEMP_NAME_LEN);
    assert_false(mc_obj_is_object_name(t));
    assert_int_equal(mc_obj_parse_temp_name(t, 0, &back), 1);
    assert_int_equal(back.host, id.host);
    assert_int_equal(back.pid, id.pid);
    assert_int_equal(back.ctime, id.ctime);
    assert_int_equal(back.counter, 42);
}

static void test_temp_and_probe_names_carry_their_writer(void **state)
{
    mc_obj_temp_id_t id;
    /* a probe object: "probe-<29 hex>-<n>" */
    assert_int_equal(mc_obj_parse_temp_name("probe-012345673fffff89abcdef000002a-7", 1, &id), 1);
    assert_int_equal(id.pid, 0x3fffff);
    assert_int_equal(mc_obj_parse_temp_name("probe-012345673fffff89abcdef000002a-7", 0, &id), 0);
    /* the old 24-digit temporaries, objects and other hidden files are not ours to judge */
    assert_int_equal(mc_obj_parse_temp_name(".t0123456789abcdef0000002a", 0, &id), 0);
    assert_int_equal(mc_obj_parse_temp_name("0000000000000001%2Fkey", 1, &id), 0);
    assert_int_equal(mc_obj_parse_temp_name(".t012345673fffff89abcdef00000ZZ", 0, &id), 0);
    assert_int_equal(mc_obj_parse_temp_name(".probe", 1, &id), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_key_is_kept_as_is),
        cmocka_unit_test(test_slash_and_percent_are_escaped),
        cmocka_unit_test(test_leading_dot_never_makes_a_hidden_name),
        cmocka_unit_test(test_every_nonzero_byte_round_trips),
        cmocka_unit_test(test_long_key_gets_a_hashed_name),
        cmocka_unit_test(test_invalid_keys_are_refused),
        cmocka_unit_test(test_foreign_names_do_not_unescape),
        cmocka_unit_test(test_dir_names),
        cmocka_unit_test(test_crc32c_matches_the_standard_check_value),
        cmocka_unit_test(test_large_values_start_on_a_page_boundary),
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_header_damage_is_detected),
        cmocka_unit_test(test_xfer_count),
        cmocka_unit_test(test_iovs_cover_the_stream_exactly),
        cmocka_unit_test(test_iovs_refuse_what_does_not_fit),
        cmocka_unit_test(test_temp_names_are_hidden),
        cmocka_unit_test(test_temp_and_probe_names_carry_their_writer),
    };
    return cmocka_run_group_tests_name("object_layout", tests, NULL, NULL);
}
