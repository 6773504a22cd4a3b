/*
 * key_regex.c — RemoveByRegex patterns on PCRE2 with bounded work per key (key_regex.h).
 *
 * One compile context (pattern length cap, newline convention) and one match context (match,
 * depth and heap limits) per compiled pattern, and one match-data block reused for every key, so
 * matching a key allocates nothing.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "key_regex.h"

#include "mooncake/errors.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ECMAScript behaviour where PCRE2's default differs (see key_regex.h). */
#define KEY_REGEX_OPTIONS                                                                          \
    (PCRE2_ALT_BSUX | PCRE2_MATCH_UNSET_BACKREF | PCRE2_ALLOW_EMPTY_CLASS | PCRE2_DOLLAR_ENDONLY)

struct mc_key_regex {
    pcre2_code *code;
    pcre2_match_context *mctx;
    pcre2_match_data *md;
};

void mc_key_regex_free(mc_key_regex_t *re)
{
    if (!re)
        return;
    pcre2_match_data_free(re->md);
    pcre2_match_context_free(re->mctx);
    pcre2_code_free(re->code);
    free(re);
}

int mc_key_regex_compile(const char *pattern, mc_key_regex_t **out, char *msg, size_t msglen)
{
    *out = NULL;
    size_t len = strnlen(pattern, MC_KEY_REGEX_MAX_PATTERN + 1);
    if (len > MC_KEY_REGEX_MAX_PATTERN) {
        snprintf(msg, msglen, "pattern longer than %d bytes", MC_KEY_REGEX_MAX_PATTERN);
        return MC_ERR_INVALID_PARAMS;
    }
    mc_key_regex_t *re = calloc(1, sizeof(*re));
    pcre2_compile_context *cctx = pcre2_compile_context_create(NULL);
    if (!re || !cctx) {
        free(re);
        pcre2_compile_context_free(cctx);
        return MC_ERR_INTERNAL_ERROR;
    }
    pcre2_set_max_pattern_length(cctx, MC_KEY_REGEX_MAX_PATTERN);
    pcre2_set_newline(cctx, PCRE2_NEWLINE_ANYCRLF);
    int err = 0;
    PCRE2_SIZE at = 0;
    re->code = pcre2_compile((PCRE2_SPTR)pattern, len, KEY_REGEX_OPTIONS, &err, &at, cctx);
    pcre2_compile_context_free(cctx);
    if (!re->code) {
        PCRE2_UCHAR text[160];
        pcre2_get_error_message(err, text, sizeof(text));
        snprintf(msg, msglen, "bad pattern at offset %zu: %s", (size_t)at, (const char *)text);
        mc_key_regex_free(re);
        return MC_ERR_INVALID_PARAMS;
    }
    re->mctx = pcre2_match_context_create(NULL);
    re->md = pcre2_match_data_create(1, NULL); /* no captures wanted: whether it matched */
    if (!re->mctx || !re->md) {
        mc_key_regex_free(re);
        return MC_ERR_INTERNAL_ERROR;
    }
    pcre2_set_match_limit(re->mctx, MC_KEY_REGEX_MATCH_LIMIT);
    pcre2_set_depth_limit(re->mctx, MC_KEY_REGEX_DEPTH_LIMIT);
    pcre2_set_heap_limit(re->mctx, MC_KEY_REGEX_HEAP_LIMIT_KIB);
    *out = re;
    return 0;
}

int mc_key_regex_match(mc_key_regex_t *re, const char *key, size_t len, char *msg, size_t msglen)
{
    int rc = pcre2_match(re->code, (PCRE2_SPTR)key, len, 0, 0, re->md, re->mctx);
    if (rc >= 0)
        return 1;
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT) {
        const char *what = rc == PCRE2_ERROR_MATCHLIMIT   ? "match limit"
                           : rc == PCRE2_ERROR_DEPTHLIMIT ? "depth limit"
                                                          : "heap limit";
        unsigned limit = rc == PCRE2_ERROR_MATCHLIMIT   ? MC_KEY_REGEX_MATCH_LIMIT
                         : rc == PCRE2_ERROR_DEPTHLIMIT ? MC_KEY_REGEX_DEPTH_LIMIT
                                                        : MC_KEY_REGEX_HEAP_LIMIT_KIB;
        snprintf(msg, msglen, "pattern exceeds the %s (%u) on a key of %zu bytes", what, limit,
                 len);
        return MC_ERR_INVALID_PARAMS;
    }
    PCRE2_UCHAR text[160];
    pcre2_get_error_message(rc, text, sizeof(text));
    snprintf(msg, msglen, "matching failed: %s", (const char *)text);
    return MC_ERR_INTERNAL_ERROR;
}
