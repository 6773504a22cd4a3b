/*
 * removal.c — Remove, RemoveAll and RemoveByRegex. A value under upstream's lease is removed
 * only with force; a key an extension hides answers "unavailable" (retry later), not "not
 * found". RemoveAll and RemoveByRegex walk the index a slice per lock hold (below).
 *
 * Layer: above reads.c (the lookup), objects.c (the drop) and master_service.c; the top of the
 * core with stats.c and monitor.c.
 */
#include "master_internal.h"

#include "core_internal.h"
#include "key_regex.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

/* ---- removal --------------------------------------------------------------------------------- */

int mc_master_remove(mc_master_t *m, const char *key, int force)
{
    if (!m)
        return MC_ERR_INVALID_PARAMS;
    int rc;
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    mc_object_t *o = mc_master_find_complete_locked(m, key, &rc);
    if (o && o->lease_timeout > now && !force)
        rc = MC_ERR_OBJECT_HAS_LEASE;
    else if (o)
        mc_master_drop_value_locked(m, o, now);
    else if (rc == 0)
        rc = MC_ERR_OBJECT_NOT_FOUND;
    if (rc == MC_ERR_OBJECT_NOT_FOUND && mc_master_ext_hides_key_locked(m, key, strlen(key)))
        rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS; /* restored: retry once its owner re-mounted */
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/*
 * remove_all and remove_by_regex walk the index in slices (mc_index_scan) and take the lock for
 * one slice at a time: at most MC_REMOVE_SLICE records are collected (and, for remove_all,
 * removed) per lock hold, so other requests wait a millisecond at most, not for the whole walk.
 * Semantics under concurrent writes: an object present and removable for the whole call is
 * removed; one put, removed or leased meanwhile may or may not be.
 */
#define MC_REMOVE_SLICE 1024

typedef struct object_list {
    mc_object_t **v;
    size_t n, cap;
    int oom;
} object_list_t;

static void collect_object(void *arg, mc_object_t *o)
{
    object_list_t *l = arg;
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : MC_REMOVE_SLICE;
        mc_object_t **v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = o;
}

/* Scans on from *cursor (lock held) until `min` records were collected or the scan ended. */
static void collect_slice(mc_master_t *m, size_t *cursor, size_t min, mc_index_scan_fn fn,
                          void *list, const size_t *count)
{
    do
        *cursor = mc_index_scan(&m->index, *cursor, fn, list);
    while (*cursor != 0 && *count < min);
}

/* Drops o's value when it is COMPLETE and removable now; 1 when dropped. */
static int remove_if_removable(mc_master_t *m, mc_object_t *o, int force, uint64_t now)
{
    if (!o || !o->complete || (o->lease_timeout > now && !force))
        return 0;
    mc_master_drop_value_locked(m, o, now);
    return 1;
}

int64_t mc_master_remove_all(mc_master_t *m, int force)
{
    if (!m)
        return MC_ERR_INVALID_PARAMS;
    object_list_t l = {0};
    size_t cursor = 0;
    int64_t removed = 0;
    do {
        l.n = 0;
        pthread_mutex_lock(&m->lock);
        collect_slice(m, &cursor, MC_REMOVE_SLICE, collect_object, &l, &l.n);
        uint64_t now = mc_master_now_locked(m);
        for (size_t i = 0; !l.oom && i < l.n; i++)
            removed += remove_if_removable(m, l.v[i], force, now);
        /* Hidden restored records stay (an extension's hides_key): they become visible when
         * their owners re-mount, or are dropped when they do not in time. */
        pthread_mutex_unlock(&m->lock);
    } while (cursor != 0 && !l.oom);
    free(l.v);
    return l.oom ? MC_ERR_INTERNAL_ERROR : removed;
}

/* Copies of keys, packed: per key a size_t length, then its bytes (unaligned; memcpy'd). */
typedef struct key_list {
    char *buf;
    size_t used, cap;
    size_t n;
    int oom;
} key_list_t;

static void key_list_add(key_list_t *l, const char *key, size_t len)
{
    if (l->oom)
        return;
    size_t need = sizeof(size_t) + len;
    if (l->cap - l->used < need) {
        size_t cap = l->cap ? l->cap : 64 * 1024;
        while (cap - l->used < need)
            cap *= 2;
        char *b = realloc(l->buf, cap);
        if (!b) {
            l->oom = 1;
            return;
        }
        l->buf = b;
        l->cap = cap;
    }
    memcpy(l->buf + l->used, &len, sizeof(len));
    memcpy(l->buf + l->used + sizeof(len), key, len);
    l->used += need;
    l->n++;
}

/* The key at byte offset *at of l; advances *at past it. */
static const char *key_list_next(const key_list_t *l, size_t *at, size_t *len)
{
    memcpy(len, l->buf + *at, sizeof(*len));
    const char *key = l->buf + *at + sizeof(*len);
    *at += sizeof(*len) + *len;
    return key;
}

static void collect_complete_key(void *arg, mc_object_t *o)
{
    if (o->complete)
        key_list_add(arg, mc_object_key(o), o->key_len);
}

/*
 * Phase 1 of remove_by_regex: the keys of COMPLETE objects are copied out a slice at a time under
 * the lock and matched outside it; the matching ones are appended to `matched`. Returns 0, or the
 * error of the first key on which the pattern exceeded a limit (nothing is removed then).
 */
static int match_keys(mc_master_t *m, mc_key_regex_t *re, key_list_t *matched, char *msg,
                      size_t msglen)
{
    key_list_t slice = {0};
    size_t cursor = 0;
    int rc = 0;
    do {
        slice.used = slice.n = 0;
        pthread_mutex_lock(&m->lock);
        collect_slice(m, &cursor, MC_REMOVE_SLICE, collect_complete_key, &slice, &slice.n);
        pthread_mutex_unlock(&m->lock);
        size_t at = 0;
        for (size_t i = 0; rc == 0 && !slice.oom && i < slice.n; i++) {
            size_t len;
            const char *key = key_list_next(&slice, &at, &len);
            int hit = mc_key_regex_match(re, key, len, msg, msglen);
            if (hit == 1)
                key_list_add(matched, key, len);
            else if (hit < 0)
                rc = hit;
        }
        if (rc == 0 && (slice.oom || matched->oom))
            rc = MC_ERR_INTERNAL_ERROR;
    } while (cursor != 0 && rc == 0);
    free(slice.buf);
    return rc;
}

/* Phase 2: removes the matched keys still COMPLETE and removable, a slice per lock hold. */
static int64_t remove_keys(mc_master_t *m, const key_list_t *keys, int force)
{
    int64_t removed = 0;
    size_t at = 0;
    for (size_t i = 0; i < keys->n;) {
        pthread_mutex_lock(&m->lock);
        uint64_t now = mc_master_now_locked(m);
        for (size_t end = i + MC_REMOVE_SLICE; i < keys->n && i < end; i++) {
            size_t len;
            const char *key = key_list_next(keys, &at, &len);
            removed += remove_if_removable(m, mc_index_find(&m->index, key, len), force, now);
        }
        pthread_mutex_unlock(&m->lock);
    }
    return removed;
}

int64_t mc_master_remove_by_regex(mc_master_t *m, const char *regex, int force)
{
    if (!m || !regex)
        return MC_ERR_INVALID_PARAMS;
    char msg[256] = "";
    mc_key_regex_t *re = NULL;
    int rc = mc_key_regex_compile(regex, &re, msg, sizeof(msg));
    if (rc != 0) {
        MC_WARN("remove_by_regex refused: %s", msg);
        return rc;
    }
    key_list_t matched = {0};
    rc = match_keys(m, re, &matched, msg, sizeof(msg));
    mc_key_regex_free(re);
    int64_t removed = rc;
    if (rc == 0) {
        removed = remove_keys(m, &matched, force);
    } else if (rc == MC_ERR_INVALID_PARAMS) {
        pthread_mutex_lock(&m->lock);
        m->regex_refused++;
        pthread_mutex_unlock(&m->lock);
        MC_WARN("remove_by_regex refused, nothing removed: %s (pattern of %zu bytes)", msg,
                strlen(regex));
    }
    free(matched.buf);
    return removed;
}
