/*
 * test_frame.c — the wire layer's bounded decoding: the 24-byte frame header of src/wire/frame.h
 * and protobuf-c bodies (transfer.proto) never accept what they should not and never crash on
 * truncated or random input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "mooncake/errors.h"
#include "pb_decode.h"
#include "store.pb-c.h"
#include "transfer.pb-c.h"

#include <stdio.h>

/* xorshift64*: a fixed seed keeps the random-header test reproducible. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- frame header ---- */

static void test_frame_round_trip_keeps_every_field(void **state)
{
    uint8_t buf[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    mc_frame_encode(0xbeef, 0x0123456789abcdefull, 4096, 0xdeadbeef, buf);
    assert_int_equal(mc_frame_decode(buf, MC_FRAME_DEFAULT_MAX_BODY, &h), 0);
    assert_int_equal(h.magic, MC_FRAME_MAGIC);
    assert_int_equal(h.version, MC_FRAME_VERSION);
    assert_int_equal(h.opcode, 0xbeef);
    assert_true(h.request_id == 0x0123456789abcdefull);
    assert_int_equal(h.body_len, 4096);
    assert_int_equal(h.flags, 0xdeadbeef);
}

static void test_frame_encoding_is_little_endian_mck1(void **state)
{
    uint8_t buf[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(2, 1, 0, 0, buf);
    assert_memory_equal(buf, "MCK1", 4);
    assert_int_equal(buf[4], MC_FRAME_VERSION);
    assert_int_equal(buf[5], 0);
    assert_int_equal(buf[6], 2);
    assert_int_equal(buf[8], 1);
}

static void test_frame_rejects_bad_magic(void **state)
{
    uint8_t buf[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h = {0};
    mc_frame_encode(1, 2, 3, 4, buf);
    buf[0] ^= 0x01;
    assert_int_equal(mc_frame_decode(buf, MC_FRAME_DEFAULT_MAX_BODY, &h), MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(h.magic, 0); /* *out untouched on failure */
}

static void test_frame_rejects_bad_version(void **state)
{
    uint8_t buf[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    mc_frame_encode(1, 2, 3, 4, buf);
    buf[4] = MC_FRAME_VERSION + 1;
    assert_int_equal(mc_frame_decode(buf, MC_FRAME_DEFAULT_MAX_BODY, &h), MC_ERR_DESERIALIZE_FAIL);
    buf[4] = 0;
    assert_int_equal(mc_frame_decode(buf, MC_FRAME_DEFAULT_MAX_BODY, &h), MC_ERR_DESERIALIZE_FAIL);
}

static void test_frame_rejects_body_over_max(void **state)
{
    uint8_t buf[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    mc_frame_encode(1, 2, 1025, 0, buf);
    assert_int_equal(mc_frame_decode(buf, 1024, &h), MC_ERR_BUFFER_OVERFLOW);
    mc_frame_encode(1, 2, UINT32_MAX, 0, buf);
    assert_int_equal(mc_frame_decode(buf, MC_FRAME_DEFAULT_MAX_BODY, &h), MC_ERR_BUFFER_OVERFLOW);
}

static void test_frame_accepts_body_exactly_at_max(void **state)
{
    uint8_t buf[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    mc_frame_encode(1, 2, 1024, 0, buf);
    assert_int_equal(mc_frame_decode(buf, 1024, &h), 0);
    assert_int_equal(h.body_len, 1024);
}

static void test_frame_random_headers_never_pass_with_bad_magic(void **state)
{
    int accepted = 0;
    for (int n = 0; n < 100000; n++) {
        uint8_t buf[MC_FRAME_HEADER_SIZE];
        for (int i = 0; i < MC_FRAME_HEADER_SIZE; i += 8) {
            uint64_t r = rng_next();
            memcpy(buf + i, &r, 8);
        }
        /* Some headers get the right magic (and version), so the later checks run too. */
        if (n % 4 == 0)
            memcpy(buf, "MCK1", 4);
        if (n % 8 == 0)
            memcpy(buf + 4, "\x01\x00", 2);

        mc_frame_header_t h;
        int rc = mc_frame_decode(buf, MC_FRAME_DEFAULT_MAX_BODY, &h);
        int good_magic = le32(buf) == MC_FRAME_MAGIC;
        int good_version = buf[4] == MC_FRAME_VERSION && buf[5] == 0;
        if (!good_magic || !good_version) {
            assert_int_equal(rc, MC_ERR_DESERIALIZE_FAIL);
        } else if (le32(buf + 16) > MC_FRAME_DEFAULT_MAX_BODY) {
            assert_int_equal(rc, MC_ERR_BUFFER_OVERFLOW);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(h.magic, MC_FRAME_MAGIC);
            accepted++;
        }
    }
    /* 12500 well-formed prefixes, a body_len within 16 MiB for about 1 in 256 of them. */
    assert_true(accepted > 0);
}

/* ---- protobuf-c bodies ---- */

static void test_transfer_header_round_trip(void **state)
{
    Mc__TransferHeader in = MC__TRANSFER_HEADER__INIT;
    in.addr = 0x7f0012345678ull;
    in.length = 1ull << 33;
    size_t len = mc__transfer_header__get_packed_size(&in);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    assert_int_equal(mc__transfer_header__pack(&in, buf), len);

    Mc__TransferHeader *out = mc__transfer_header__unpack(NULL, len, buf);
    assert_non_null(out);
    assert_true(out->addr == in.addr);
    assert_true(out->length == in.length);
    mc__transfer_header__free_unpacked(out, NULL);
    free(buf);
}

static void test_transfer_header_truncated_prefixes_never_crash(void **state)
{
    Mc__TransferHeader in = MC__TRANSFER_HEADER__INIT;
    in.addr = UINT64_MAX - 1;
    in.length = 0x0102030405060708ull;
    size_t len = mc__transfer_header__get_packed_size(&in);
    assert_true(len > 4);
    uint8_t *full = malloc(len);
    assert_non_null(full);
    mc__transfer_header__pack(&in, full);

    /* Each prefix in its own exact-size allocation, so ASan catches any read past the end. */
    for (size_t n = 0; n < len; n++) {
        uint8_t *prefix = malloc(n ? n : 1);
        assert_non_null(prefix);
        memcpy(prefix, full, n);
        Mc__TransferHeader *out = mc__transfer_header__unpack(NULL, n, prefix);
        if (out) {
            /* A prefix that ends on a field boundary is a valid message with fewer fields. */
            assert_true(out->addr == 0 || out->addr == in.addr);
            assert_true(out->length == 0 || out->length == in.length);
            mc__transfer_header__free_unpacked(out, NULL);
        }
        free(prefix);
    }
    free(full);
}

/* ---- decoding within a memory budget (pb_decode.h) ---------------------------------------- */

/* A body of n bytes of "\x12\x00": field 2 (keys), empty, again and again. */
static uint8_t *empty_keys_body(size_t n)
{
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i += 2) {
        b[i] = 0x12;
        b[i + 1] = 0x00;
    }
    return b;
}

static void test_decode_refuses_a_body_of_empty_strings_over_its_budget(void **state)
{
    size_t n = 8u << 20; /* 4 million empty keys: a few hundred MiB decoded */
    uint8_t *body = empty_keys_body(n);
    uint64_t refused = mc_pb_decode_refused();
    ProtobufCMessage *msg = NULL;
    assert_int_equal(mc_pb_decode(&mc__keys_request__descriptor, body, n, &msg),
                     MC_ERR_BUFFER_OVERFLOW);
    assert_null(msg);
    assert_int_equal(mc_pb_decode_refused(), refused + 1);
    assert_int_equal(mc_pb_count_field(body, n, 2, 65536), 65537); /* stops past the max */
    assert_int_equal(mc_pb_count_field(body, 1000, 2, 65536), 500);
    assert_int_equal(mc_pb_count_field(body, n, 3, 65536), 0);
    /* Not over budget, just malformed: a string running past the end. */
    uint8_t bad[] = {0x12, 0x05, 'a'};
    assert_int_equal(mc_pb_decode(&mc__keys_request__descriptor, bad, sizeof(bad), &msg),
                     MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(mc_pb_count_field(bad, sizeof(bad), 2, 10), 0);
    free(body);
}

static void test_decode_fits_the_largest_legitimate_requests(void **state)
{
    enum { KEYS = 65536 };
    /* The batch limit of one-byte keys, with a size and a checksum each. */
    char **keys = calloc(KEYS, sizeof(*keys));
    uint64_t *sizes = calloc(KEYS, sizeof(*sizes));
    uint32_t *crcs = calloc(KEYS, sizeof(*crcs));
    char *text = malloc((size_t)KEYS * 2);
    assert_true(keys && sizes && crcs && text);
    for (size_t i = 0; i < KEYS; i++) {
        text[2 * i] = (char)('a' + i % 26);
        text[2 * i + 1] = '\0';
        keys[i] = &text[2 * i];
        sizes[i] = i;
        crcs[i] = (uint32_t)i * 2654435761u;
    }
    Mc__KeysRequest req = MC__KEYS_REQUEST__INIT;
    req.client_id = (char *)"client";
    req.keys = keys;
    req.n_keys = KEYS;
    req.sizes = sizes;
    req.n_sizes = KEYS;
    req.checksums = crcs;
    req.n_checksums = KEYS;
    size_t len = mc__keys_request__get_packed_size(&req);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    mc__keys_request__pack(&req, buf);
    Mc__KeysRequest *out = NULL;
    assert_int_equal(
        mc_pb_decode(&mc__keys_request__descriptor, buf, len, (ProtobufCMessage **)&out), 0);
    assert_int_equal(out->n_keys, KEYS);
    assert_int_equal(mc_pb_count_field(buf, len, 2, KEYS), KEYS);
    mc__keys_request__free_unpacked(out, NULL);
    free(buf);
    free(keys);
    free(sizes);
    free(crcs);
    free(text);
}

static void test_decode_fits_a_64_mib_reply_of_replica_lists(void **state)
{
    enum { KEYS = 65536, REPLICAS = 16 };
    Mc__Replica rep = MC__REPLICA__INIT;
    rep.segment_name = (char *)"10.0.0.1:12345";
    rep.address = 0x7f0000001000ull;
    rep.size = 1u << 20;
    rep.epoch = 0x1234567800000001ull;
    rep.has_checksum = 1;
    rep.checksum = 0xdeadbeef;
    Mc__Replica *reps[REPLICAS];
    for (int i = 0; i < REPLICAS; i++)
        reps[i] = &rep;
    Mc__KeyResult res = MC__KEY_RESULT__INIT;
    res.replicas = reps;
    res.n_replicas = REPLICAS;
    res.size = 1u << 20;
    Mc__KeyResult **results = calloc(KEYS, sizeof(*results));
    assert_non_null(results);
    for (size_t i = 0; i < KEYS; i++)
        results[i] = &res;
    Mc__KeysResponse resp = MC__KEYS_RESPONSE__INIT;
    resp.results = results;
    resp.n_results = KEYS;
    size_t len = mc__keys_response__get_packed_size(&resp);
    assert_true(len <= (64u << 20)); /* what the master may send */
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    mc__keys_response__pack(&resp, buf);
    Mc__KeysResponse *out = NULL;
    assert_int_equal(
        mc_pb_decode_reply(&mc__keys_response__descriptor, buf, len, (ProtobufCMessage **)&out), 0);
    assert_int_equal(out->n_results, KEYS);
    assert_int_equal(out->results[KEYS - 1]->n_replicas, REPLICAS);
    mc__keys_response__free_unpacked(out, NULL);
    free(buf);
    free(results);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_round_trip_keeps_every_field),
        cmocka_unit_test(test_frame_encoding_is_little_endian_mck1),
        cmocka_unit_test(test_frame_rejects_bad_magic),
        cmocka_unit_test(test_frame_rejects_bad_version),
        cmocka_unit_test(test_frame_rejects_body_over_max),
        cmocka_unit_test(test_frame_accepts_body_exactly_at_max),
        cmocka_unit_test(test_frame_random_headers_never_pass_with_bad_magic),
        cmocka_unit_test(test_transfer_header_round_trip),
        cmocka_unit_test(test_transfer_header_truncated_prefixes_never_crash),
        cmocka_unit_test(test_decode_refuses_a_body_of_empty_strings_over_its_budget),
        cmocka_unit_test(test_decode_fits_the_largest_legitimate_requests),
        cmocka_unit_test(test_decode_fits_a_64_mib_reply_of_replica_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
