/*
 * curl_body.c — libcurl's write callback into a bounded, growing buffer (curl_body.h).
 */
#include "curl_body.h"

#include <stdlib.h>
#include <string.h>

/* The first allocation; doubled as the body grows. */
#define CURL_BODY_INITIAL_CAP 1024

size_t mc_curl_body_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    mc_curl_body_t *b = userdata;
    size_t n = size * nmemb;
    if (b->len > b->max || n > b->max - b->len) {
        b->overflow = 1;
        return 0; /* CURLE_WRITE_ERROR */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : CURL_BODY_INITIAL_CAP;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}
