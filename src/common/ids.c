/*
 * ids.c — random bytes from getrandom(2) and the UUIDs made of them (ids.h).
 */
#include "ids.h"

#include "mooncake/errors.h"

#include <errno.h>
#include <stdio.h>
#include <sys/random.h>

int mc_random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        /* Requests above 256 bytes may return short, and a signal may interrupt any of them. */
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return MC_ERR_INTERNAL_ERROR;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

int mc_random_u64(uint64_t *out)
{
    return mc_random_bytes(out, sizeof(*out));
}

int mc_uuid_v4(char out[MC_UUID_TEXT_LEN + 1])
{
    unsigned char b[16];
    out[0] = '\0';
    if (mc_random_bytes(b, sizeof(b)) != 0)
        return MC_ERR_INTERNAL_ERROR;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, MC_UUID_TEXT_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    return 0;
}
