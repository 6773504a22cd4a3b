/*
 * checksum.c — CRC32C on isa-l (checksum.h).
 */
#include "checksum.h"

#include <isa-l/crc.h>
#include <string.h>

/* isa-l's crc32_iscsi takes an int length: feed it at most this much at a time. */
#define CRC_STEP ((size_t)1 << 30)
/* Bytes copied before they are checksummed: well inside L2, so the checksum reads cache. */
#define COPY_CHUNK ((size_t)64 << 10)

uint32_t mc_crc32c(uint32_t crc, const void *buf, size_t len)
{
    /* crc32_iscsi(buf, len, ~0) is CRC32C without the final inversion; chain on the raw value. */
    uint32_t raw = ~crc;
    const unsigned char *p = buf;
    while (len > 0) {
        size_t n = len < CRC_STEP ? len : CRC_STEP;
        raw = crc32_iscsi((unsigned char *)p, (int)n, raw);
        p += n;
        len -= n;
    }
    return ~raw;
}

uint32_t mc_copy_crc32c(void *dst, const void *src, size_t len, uint32_t crc, int of_source)
{
    uint32_t raw = ~crc;
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (len > 0) {
        size_t n = len < COPY_CHUNK ? len : COPY_CHUNK;
        memcpy(d, s, n);
        raw = crc32_iscsi((unsigned char *)(of_source ? s : d), (int)n, raw);
        d += n;
        s += n;
        len -= n;
    }
    return ~raw;
}
