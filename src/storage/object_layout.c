/*
 * object_layout.c — the Mooncake-style object format (object_layout.h): header encoding and
 * verification (CRC32C: common/checksum.h), the hash directory of a key, reversible key escaping,
 * temporary names and the cutting of an object's byte stream into transfers and scatter-gather
 * pieces.
 *
 * Both adapters and the benchmark use these functions and nothing else to decide what goes
 * where, so a directory written by one adapter is readable by the other.
 */
#include "object_layout.h"

#include "mooncake/errors.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

static const char hex_upper[] = "0123456789ABCDEF";
static const char hex_lower[] = "0123456789abcdef";

size_t mc_obj_header_min_len(size_t key_len)
{
    return MC_OBJ_HEADER_FIXED + key_len;
}

size_t mc_obj_header_len(size_t key_len, uint64_t value_size)
{
    size_t len = mc_obj_header_min_len(key_len);
    if (value_size < MC_OBJ_ALIGN_MIN)
        return len;
    return (len + MC_OBJ_VALUE_ALIGN - 1) / MC_OBJ_VALUE_ALIGN * MC_OBJ_VALUE_ALIGN;
}

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The header CRC covers the fixed fields but its own (bytes 32..35), and the key. */
static uint32_t header_crc(const unsigned char *h, size_t min_len)
{
    uint32_t crc = mc_crc32c(0, h, 32);
    return mc_crc32c(crc, h + 36, min_len - 36);
}

void mc_obj_header_encode(void *out, const char *key, size_t key_len, uint64_t value_size,
                          uint32_t value_crc)
{
    unsigned char *h = out;
    size_t min_len = mc_obj_header_min_len(key_len);
    size_t header_len = mc_obj_header_len(key_len, value_size);
    memcpy(h, MC_OBJ_MAGIC, MC_OBJ_MAGIC_LEN);
    put_u16(h + 8, MC_OBJ_VERSION);
    put_u16(h + 10, 0);
    put_u32(h + 12, (uint32_t)header_len);
    put_u64(h + 16, value_size);
    put_u32(h + 24, (uint32_t)key_len);
    put_u32(h + 28, value_crc);
    put_u32(h + 32, 0);
    put_u32(h + 36, 0);
    memcpy(h + MC_OBJ_HEADER_FIXED, key, key_len);
    memset(h + min_len, 0, header_len - min_len);
    put_u32(h + 32, header_crc(h, min_len));
}

int mc_obj_header_decode(const void *buf, size_t len, mc_obj_header_t *h)
{
    const unsigned char *p = buf;
    if (len < MC_OBJ_HEADER_FIXED)
        return MC_ERR_FILE_READ_FAIL;
    if (memcmp(p, MC_OBJ_MAGIC, MC_OBJ_MAGIC_LEN) != 0 || get_u16(p + 8) != MC_OBJ_VERSION)
        return MC_ERR_CHECKSUM_MISMATCH;
    uint32_t header_len = get_u32(p + 12);
    uint64_t value_size = get_u64(p + 16);
    uint32_t key_len = get_u32(p + 24);
    if (key_len == 0 || key_len > MC_FS_KEY_MAX ||
        header_len != mc_obj_header_len(key_len, value_size))
        return MC_ERR_CHECKSUM_MISMATCH;
    size_t min_len = mc_obj_header_min_len(key_len);
    if (len < min_len)
        return MC_ERR_FILE_READ_FAIL;
    if (get_u32(p + 32) != header_crc(p, min_len))
        return MC_ERR_CHECKSUM_MISMATCH;
    h->version = MC_OBJ_VERSION;
    h->header_len = header_len;
    h->value_size = value_size;
    h->key_len = key_len;
    h->value_crc = get_u32(p + 28);
    h->key = (const char *)p + MC_OBJ_HEADER_FIXED;
    return 0;
}

unsigned mc_obj_dir_index(const char *key, size_t key_len)
{
    return (unsigned)(XXH3_64bits(key, key_len) >> 56);
}

void mc_obj_dir_name(unsigned index, char *out)
{
    if (index >= MC_OBJ_DIR_COUNT) {
        memcpy(out, MC_OBJ_PROBE_DIR_NAME, sizeof(MC_OBJ_PROBE_DIR_NAME));
        return;
    }
    out[0] = hex_lower[index >> 4];
    out[1] = hex_lower[index & 15];
    out[2] = '\0';
}

static int hex_value(char c, const char *digits)
{
    const char *p = strchr(digits, c);
    return (c != '\0' && p) ? (int)(p - digits) : -1;
}

int mc_obj_parse_dir_name(const char *name, unsigned *index)
{
    if (strlen(name) != 2)
        return 0;
    int hi = hex_value(name[0], hex_lower), lo = hex_value(name[1], hex_lower);
    if (hi < 0 || lo < 0)
        return 0;
    *index = (unsigned)(hi * 16 + lo);
    return 1;
}

/* Bytes kept as they are in a name; everything else is %XX. */
static int is_plain_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

int mc_obj_escape_key(const char *key, size_t key_len, char *name, size_t cap)
{
    if (!key || key_len == 0 || key_len > MC_FS_KEY_MAX || memchr(key, '\0', key_len) ||
        cap < MC_OBJ_NAME_MAX)
        return MC_ERR_INVALID_PARAMS;
    size_t n = 0;
    for (size_t i = 0; i < key_len && n <= MC_FS_NAME_MAX_ESCAPED; i++) {
        unsigned char c = (unsigned char)key[i];
        if (is_plain_byte(c) && !(i == 0 && c == '.')) {
            name[n++] = (char)c;
        } else {
            name[n++] = '%';
            name[n++] = hex_upper[c >> 4];
            name[n++] = hex_upper[c & 15];
        }
    }
    if (n <= MC_FS_NAME_MAX_ESCAPED) {
        name[n] = '\0';
        return 0;
    }
    XXH128_hash_t h = XXH3_128bits(key, key_len);
    snprintf(name + MC_OBJ_HASHED_PREFIX, cap - MC_OBJ_HASHED_PREFIX, "~%016llx%016llx",
             (unsigned long long)h.high64, (unsigned long long)h.low64);
    return 1;
}

int mc_obj_unescape_name(const char *name, char *key, size_t cap, size_t *key_len)
{
    if (strchr(name, '~'))
        return 1;
    if (strlen(name) > MC_FS_NAME_MAX_ESCAPED) /* such a key gets a hashed name */
        return MC_ERR_INVALID_PARAMS;
    size_t n = 0;
    for (size_t i = 0; name[i] != '\0'; i++) {
        if (n + 1 >= cap)
            return MC_ERR_INVALID_PARAMS;
        unsigned char c = (unsigned char)name[i];
        if (c != '%') {
            if (!is_plain_byte(c) || (i == 0 && c == '.'))
                return MC_ERR_INVALID_PARAMS;
            key[n++] = (char)c;
            continue;
        }
        int hi = hex_value(name[i + 1], hex_upper);
        int lo = hi < 0 ? -1 : hex_value(name[i + 2], hex_upper);
        if (lo < 0)
            return MC_ERR_INVALID_PARAMS;
        unsigned char decoded = (unsigned char)(hi * 16 + lo);
        /* Only the canonical form is a name we produced: no escaped plain bytes, no NUL. */
        if (decoded == '\0' || (is_plain_byte(decoded) && !(n == 0 && decoded == '.')))
            return MC_ERR_INVALID_PARAMS;
        key[n++] = (char)decoded;
        i += 2;
    }
    if (n == 0)
        return MC_ERR_INVALID_PARAMS;
    key[n] = '\0';
    *key_len = n;
    return 0;
}

int mc_obj_is_object_name(const char *name)
{
    return name[0] != '\0' && name[0] != '.';
}

void mc_obj_temp_name(const mc_obj_temp_id_t *id, char *out)
{
    snprintf(out, MC_OBJ_TEMP_NAME_LEN + 1, MC_OBJ_TEMP_PREFIX "%08x%06x%08x%07x",
             (unsigned)id->host, (unsigned)(id->pid & 0xFFFFFFu), (unsigned)id->ctime,
             (unsigned)(id->counter & 0xFFFFFFFu));
}

/* Parses `n` lowercase hex digits at s into *v; 0 when one is not a hex digit. */
static int parse_hex(const char *s, int n, uint32_t *v)
{
    uint32_t x = 0;
    for (int i = 0; i < n; i++) {
        int d = hex_value(s[i], hex_lower);
        if (d < 0)
            return 0;
        x = (x << 4) | (uint32_t)d;
    }
    *v = x;
    return 1;
}

int mc_obj_parse_temp_name(const char *name, int probe, mc_obj_temp_id_t *id)
{
    const char *hex;
    size_t plen = strlen(MC_OBJ_PROBE_PREFIX);
    if (!strncmp(name, MC_OBJ_TEMP_PREFIX, 2) && strlen(name) == MC_OBJ_TEMP_NAME_LEN)
        hex = name + 2;
    else if (probe && !strncmp(name, MC_OBJ_PROBE_PREFIX, plen) &&
             strlen(name) > plen + MC_OBJ_TEMP_ID_HEX && name[plen + MC_OBJ_TEMP_ID_HEX] == '-')
        hex = name + plen;
    else
        return 0;
    return parse_hex(hex, 8, &id->host) && parse_hex(hex + 8, 6, &id->pid) &&
           parse_hex(hex + 14, 8, &id->ctime) && parse_hex(hex + 22, 7, &id->counter);
}

uint64_t mc_obj_xfer_count(uint64_t total, uint64_t xfer)
{
    if (xfer == 0 || total <= xfer)
        return 1;
    return (total + xfer - 1) / xfer;
}

/* Appends the part of [off, off+len) of the stream to iov; returns the new count or 0. */
static size_t map_range(const mc_obj_seg_t *segs, size_t nsegs, uint64_t off, uint64_t len,
                        struct iovec *iov, size_t n, size_t max_iov)
{
    uint64_t seg_start = 0;
    for (size_t s = 0; s < nsegs && len > 0; s++) {
        uint64_t seg_end = seg_start + segs[s].len;
        if (off < seg_end) {
            uint64_t in = off - seg_start;
            uint64_t take = segs[s].len - in < len ? segs[s].len - in : len;
            if (n >= max_iov)
                return 0;
            iov[n].iov_base = (char *)segs[s].base + in;
            iov[n].iov_len = (size_t)take;
            n++;
            off += take;
            len -= take;
        }
        seg_start = seg_end;
    }
    return len == 0 ? n : 0;
}

size_t mc_obj_build_iovs(const mc_obj_seg_t *segs, size_t nsegs, uint64_t off, uint64_t len,
                         unsigned pieces, struct iovec *iov, size_t max_iov)
{
    if (pieces == 0)
        pieces = 1;
    if (len == 0)
        return 0;
    if ((uint64_t)pieces > len)
        pieces = (unsigned)len;
    /* Piece i is [i*len/pieces, (i+1)*len/pieces): exactly `pieces` non-empty pieces. */
    size_t n = 0;
    uint64_t start = 0;
    for (unsigned i = 1; i <= pieces; i++) {
        uint64_t end = (uint64_t)((unsigned __int128)len * i / pieces);
        n = map_range(segs, nsegs, off + start, end - start, iov, n, max_iov);
        if (n == 0)
            return 0;
        start = end;
    }
    return n;
}
