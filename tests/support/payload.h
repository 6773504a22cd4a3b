/*
 * payload.h — deterministic test values: the bytes of value `seed` are a splitmix64 stream, so a
 * reader can check every byte of what it got and tell which value (seed) it was, or that it was
 * none (torn, another key's, garbage). Header-only, shared by tests and their child programs.
 */
#ifndef MC_TEST_PAYLOAD_H
#define MC_TEST_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t mc_payload_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fills buf[0..len) with value `seed`. */
static inline void mc_payload_fill(void *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x100000001B3ull + 1;
    unsigned char *p = buf;
    while (len >= 8) {
        uint64_t v = mc_payload_next(&x);
        memcpy(p, &v, 8);
        p += 8;
        len -= 8;
    }
    if (len) {
        uint64_t v = mc_payload_next(&x);
        memcpy(p, &v, len);
    }
}

/* Offset of the first byte of buf[0..len) that differs from value `seed`, or len when none. */
static inline size_t mc_payload_diff(const void *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x100000001B3ull + 1;
    const unsigned char *p = buf;
    size_t off = 0;
    while (off < len) {
        uint64_t v = mc_payload_next(&x);
        size_t n = len - off < 8 ? len - off : 8;
        if (memcmp(p + off, &v, n) != 0) {
            for (size_t i = 0; i < n; i++) {
                if (p[off + i] != ((const unsigned char *)&v)[i])
                    return off + i;
            }
        }
        off += n;
    }
    return len;
}

#endif
