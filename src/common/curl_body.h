/*
 * curl_body.h — collecting a libcurl response body into memory, bounded.
 *
 *     mc_curl_body_t b = {.max = LIMIT};
 *     curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mc_curl_body_write);
 *     curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
 *     ... curl_easy_perform ...; use b.data[0..b.len) (NUL-terminated); free(b.data);
 *
 * A body longer than max makes the transfer fail with CURLE_WRITE_ERROR and sets overflow, so
 * a peer cannot make us buffer without bound. One body belongs to one transfer at a time.
 */
#ifndef MC_COMMON_CURL_BODY_H
#define MC_COMMON_CURL_BODY_H

#include <stddef.h>

typedef struct mc_curl_body {
    char *data;   /* malloc'd, NUL after the len bytes; NULL until the first byte arrives */
    size_t len;   /* bytes received */
    size_t cap;   /* bytes allocated at data */
    size_t max;   /* the most bytes accepted (set by the caller) */
    int overflow; /* 1 when the body was cut off for passing max */
} mc_curl_body_t;

/*
 * CURLOPT_WRITEFUNCTION for a body whose CURLOPT_WRITEDATA is an mc_curl_body_t: appends the
 * chunk and returns its size, or 0 (curl then fails the transfer) past max or out of memory.
 */
size_t mc_curl_body_write(char *ptr, size_t size, size_t nmemb, void *userdata);

#endif /* MC_COMMON_CURL_BODY_H */
