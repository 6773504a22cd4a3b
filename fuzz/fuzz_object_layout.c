/*
 * fuzz_object_layout.c — fuzz target for the pure decoders of the object file format
 * (src/storage/object_layout.h): the file header (mc_obj_header_decode), object names
 * (mc_obj_unescape_name), hash directory names (mc_obj_parse_dir_name) and temporary / probe
 * names (mc_obj_parse_temp_name), plus the scatter-gather cutting of a byte stream
 * (mc_obj_build_iovs) with fuzzed ranges.
 *
 * Input: byte 0 picks the decoder, the rest is its input. Header inputs with bit 0x80 of byte
 * 0 get the header CRC a writer would have stored (so mutated fields reach the checks behind
 * it). Checks: a decoded header's key lies inside the buffer and encodes back to the same bytes;
 * an unescaped name escapes back to itself; a parsed temporary name formats back to itself.
 */
#include "checksum.h"
#include "fuzz_common.h"
#include "mooncake/errors.h"
#include "object_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_object_layout: %s\n", what);
        abort();
    }
}

/* The header CRC over bytes [0, 32) and [36, 40 + key_len) (object_layout.h's layout). */
static void fix_header_crc(uint8_t *p, size_t len)
{
    if (len < MC_OBJ_HEADER_FIXED)
        return;
    uint32_t key_len =
        (uint32_t)p[24] | (uint32_t)p[25] << 8 | (uint32_t)p[26] << 16 | (uint32_t)p[27] << 24;
    if (key_len > len - MC_OBJ_HEADER_FIXED)
        return;
    uint32_t crc = mc_crc32c(mc_crc32c(0, p, 32), p + 36, 4 + key_len);
    for (int i = 0; i < 4; i++)
        p[32 + i] = (uint8_t)(crc >> (8 * i));
}

static void fuzz_header(uint8_t *p, size_t len)
{
    mc_obj_header_t h;
    if (mc_obj_header_decode(p, len, &h) != 0)
        return;
    check(h.key >= (const char *)p && h.key_len <= len - MC_OBJ_HEADER_FIXED, "key outside");
    check(h.header_len == mc_obj_header_len(h.key_len, h.value_size), "header length");
    size_t hlen = mc_obj_header_len(h.key_len, h.value_size);
    uint8_t *again = malloc(hlen);
    if (!again)
        abort();
    mc_obj_header_encode(again, h.key, h.key_len, h.value_size, h.value_crc);
    size_t min = mc_obj_header_min_len(h.key_len);
    /* flags and reserved bytes are not checked by the decoder: compare what it vouches for */
    check(memcmp(again, p, 10) == 0 && memcmp(again + 12, p + 12, 20) == 0 &&
              memcmp(again + MC_OBJ_HEADER_FIXED, p + MC_OBJ_HEADER_FIXED,
                     min - MC_OBJ_HEADER_FIXED) == 0,
          "a decoded header encodes differently");
    free(again);
}

static void fuzz_names(int which, const char *name)
{
    char key[MC_FS_KEY_MAX + 1], back[MC_OBJ_NAME_MAX];
    size_t key_len = 0;
    unsigned index = 0;
    mc_obj_temp_id_t id;
    switch (which) {
    case 1:
        if (mc_obj_unescape_name(name, key, sizeof(key), &key_len) == 0) {
            check(key_len > 0 && key_len == strlen(key), "key length");
            check(mc_obj_escape_key(key, key_len, back, sizeof(back)) == 0 && !strcmp(back, name),
                  "an unescaped name escapes differently");
        }
        break;
    case 2:
        if (mc_obj_parse_dir_name(name, &index)) {
            check(index < MC_OBJ_DIR_COUNT, "a directory index");
            mc_obj_dir_name(index, back);
            check(!strcmp(back, name), "a directory name formats differently");
        }
        break;
    default:
        if (mc_obj_parse_temp_name(name, which == 4, &id) && name[0] == '.') {
            mc_obj_temp_name(&id, back);
            check(!strcmp(back, name), "a temporary name formats differently");
        }
        mc_obj_is_object_name(name);
        break;
    }
}

static void fuzz_iovs(mc_fuzz_in_t *in)
{
    static uint8_t a[512], b[4096];
    mc_obj_seg_t segs[2] = {{a, mc_fuzz_u16(in) % (sizeof(a) + 1)},
                            {b, mc_fuzz_u16(in) % (sizeof(b) + 1)}};
    uint64_t off = mc_fuzz_u32(in), len = mc_fuzz_u32(in); /* file offsets: never near 2^64 */
    unsigned pieces = mc_fuzz_u16(in);
    struct iovec iov[64];
    size_t n = mc_obj_build_iovs(segs, 2, off, len, pieces, iov, 64);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *base = iov[i].iov_base;
        int in_a = base >= a && base + iov[i].iov_len <= a + segs[0].len;
        int in_b = base >= b && base + iov[i].iov_len <= b + segs[1].len;
        check(in_a || in_b, "an iovec outside the stream");
        total += iov[i].iov_len;
    }
    check(n == 0 || total == len, "iovecs that do not cover the range");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    uint8_t mode = mc_fuzz_u8(&in);
    int which = mode & 7;
    if (which == 5) {
        fuzz_iovs(&in);
        return 0;
    }
    /* The input in a buffer of exactly its size (a name is NUL-terminated): a read past it is
     * caught. */
    uint8_t *p = malloc(in.n + 1);
    if (!p)
        abort();
    memcpy(p, in.p, in.n);
    if (which == 0) {
        if (mode & 0x80)
            fix_header_crc(p, in.n);
        fuzz_header(p, in.n);
    } else {
        p[in.n] = '\0';
        fuzz_names(which, (const char *)p);
    }
    free(p);
    return 0;
}
