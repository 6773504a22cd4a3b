/*
 * base64.h — standard base64 (RFC 4648 section 4: A-Z a-z 0-9 + /, '=' padding, no line breaks),
 * on OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock. The form etcd's JSON gateway carries keys and
 * values in, and the metadata service its binary descriptor fields.
 *
 * Pure and thread-safe; results are malloc'd and the caller frees them.
 */
#ifndef MC_COMMON_BASE64_H
#define MC_COMMON_BASE64_H

#include <stddef.h>
#include <stdint.h>

/*
 * The padded base64 of data[0..len) as a malloc'd NUL-terminated string (4 * ceil(len / 3)
 * characters; "" for len 0). *text_len, when text_len is not NULL, receives its length. NULL when
 * out of memory. data may be NULL when len is 0.
 */
char *mc_base64_encode(const void *data, size_t len, size_t *text_len);

/*
 * Decodes text[0..text_len). Accepted: a multiple of 4 characters from the standard alphabet, of
 * which only the last one or two may be '=' (and a lone '=' only last); nothing else — no
 * whitespace, line breaks, NULs or URL-safe characters. On 0, *out is a malloc'd buffer of
 * *out_len bytes with a NUL after them (so decoded text is a C string; "" for an empty text),
 * which the caller frees. MC_ERR_DESERIALIZE_FAIL on malformed text, MC_ERR_INTERNAL_ERROR when
 * out of memory; *out is then NULL and *out_len 0.
 */
int mc_base64_decode(const char *text, size_t text_len, uint8_t **out, size_t *out_len);

#endif /* MC_COMMON_BASE64_H */
