/*
 * base64.c — standard padded base64 over OpenSSL's block functions (base64.h).
 *
 * EVP_DecodeBlock alone is too lenient and counts wrong for our use: it skips leading and
 * trailing whitespace, decodes '=' anywhere as zero bits, and returns 3 bytes per 4 characters
 * including the padding. So the text is checked here first, and the padding subtracted after.
 * Both block functions take int lengths, so long inputs go through in chunks (a multiple of 3
 * bytes when encoding and of 4 characters when decoding, so only the last chunk can pad).
 */
#include "base64.h"

#include "mooncake/errors.h"

#include <openssl/evp.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bytes per EVP_EncodeBlock call: its 4/3 larger output still fits an int. */
#define B64_ENCODE_CHUNK ((size_t)3 << 28)
/* Characters per EVP_DecodeBlock call. */
#define B64_DECODE_CHUNK ((size_t)1 << 30)

char *mc_base64_encode(const void *data, size_t len, size_t *text_len)
{
    if (len > (SIZE_MAX / 4 - 1) * 3)
        return NULL;
    size_t n = (len + 2) / 3 * 4;
    unsigned char *out = malloc(n + 1);
    if (!out)
        return NULL;
    const unsigned char *src = data;
    size_t o = 0;
    for (size_t off = 0; off < len; off += B64_ENCODE_CHUNK) {
        size_t chunk = len - off < B64_ENCODE_CHUNK ? len - off : B64_ENCODE_CHUNK;
        o += (size_t)EVP_EncodeBlock(out + o, src + off, (int)chunk);
    }
    out[o] = '\0';
    if (text_len)
        *text_len = o;
    return (char *)out;
}

static int b64_char_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

/* The number of padding characters of a well-formed text, or -1 when it is malformed. */
static int b64_padding(const char *text, size_t n)
{
    if (n % 4 != 0)
        return -1;
    size_t pad = 0;
    if (n > 0 && text[n - 1] == '=')
        pad = n > 1 && text[n - 2] == '=' ? 2 : 1;
    for (size_t i = 0; i < n - pad; i++) {
        if (!b64_char_ok((unsigned char)text[i]))
            return -1;
    }
    return (int)pad;
}

int mc_base64_decode(const char *text, size_t text_len, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    int pad = b64_padding(text, text_len);
    if (pad < 0)
        return MC_ERR_DESERIALIZE_FAIL;
    uint8_t *buf = malloc(text_len / 4 * 3 + 1);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    size_t o = 0;
    for (size_t off = 0; off < text_len; off += B64_DECODE_CHUNK) {
        size_t chunk = text_len - off < B64_DECODE_CHUNK ? text_len - off : B64_DECODE_CHUNK;
        int got = EVP_DecodeBlock(buf + o, (const unsigned char *)text + off, (int)chunk);
        if (got < 0) { /* cannot happen on checked text; refuse rather than trust it */
            free(buf);
            return MC_ERR_DESERIALIZE_FAIL;
        }
        o += (size_t)got;
    }
    o -= (size_t)pad;
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    return 0;
}
