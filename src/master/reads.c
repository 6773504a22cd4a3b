/*
 * reads.c — reads and their leases: GetReplicaList (a read lease that keeps the value's extents,
 * and upstream's lease), ExistKey, QueryKey, and the release of read leases, those of values
 * removed, evicted or replaced meanwhile included (they count against the deferred extents).
 *
 * Invariant (mc_object_t): while o->readers > 0 and o->read_until is ahead, o's extents stay
 * (mc_object_being_read); read lease groups are numbered from 1 (m->last_lease_id), so that a
 * release of an earlier group never counts against a later one.
 *
 * Layer: above segments.c (descriptors), extents.c (deferred frees) and master_service.c;
 * removal.c calls it.
 */
#include "master_internal.h"

#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- reads ----------------------------------------------------------------------------------- */

/* The COMPLETE object for a valid key, NULL when absent; *rc the key error otherwise. */
mc_object_t *mc_master_find_complete_locked(mc_master_t *m, const char *key, int *rc)
{
    MC_MASTER_ASSERT_LOCKED(m);
    int64_t len = mc_master_key_length(key);
    *rc = len < 0 ? (int)len : 0;
    if (len < 0)
        return NULL;
    mc_object_t *o = mc_index_find(&m->index, key, (size_t)len);
    return o && o->complete ? o : NULL;
}

/* Upstream's lease (exist, get): refuses a Remove without force until it ends. */
static void grant_lease(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    uint64_t until = now + m->cfg.default_kv_lease_ttl_ms;
    if (until > o->lease_timeout)
        o->lease_timeout = until;
    o->access_ms = now;
}

/* A reader's lease (get): also keeps the value's extents until released or over. Returns the
 * group id the reader releases it with, 0 when the TTL is 0 (nothing is held). */
static uint64_t grant_read_lease(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    grant_lease(m, o, now);
    uint64_t ttl = m->cfg.default_kv_lease_ttl_ms;
    if (ttl == 0)
        return 0;
    if (!mc_object_being_read(o, now)) {
        o->read_lease_id = ++m->last_lease_id; /* no earlier release can count against it */
        o->readers = 0;
        o->read_until = 0;
    }
    if (now + ttl > o->read_until)
        o->read_until = now + ttl;
    if (o->readers == UINT32_MAX)
        return 0; /* not counted: this lease runs its whole TTL */
    o->readers++;
    return o->read_lease_id;
}

/* Every descriptor of o's value carries its checksum (memory and disk replicas alike). */
static void set_checksums(const mc_object_t *o, mc_replica_desc_t *out, size_t n, size_t capacity)
{
    for (size_t i = 0; i < n && i < capacity; i++) {
        out[i].has_checksum = o->has_checksum;
        out[i].checksum = o->checksum;
    }
}

int mc_master_get_replica_list(mc_master_t *m, const char *key, mc_replica_desc_t *out,
                               size_t capacity, size_t *count, uint64_t *size,
                               uint64_t *lease_ttl_ms)
{
    return mc_master_get_replica_list_leased(m, key, out, capacity, count, size, lease_ttl_ms,
                                             NULL);
}

int mc_master_get_replica_list_leased(mc_master_t *m, const char *key, mc_replica_desc_t *out,
                                      size_t capacity, size_t *count, uint64_t *size,
                                      uint64_t *lease_ttl_ms, uint64_t *lease_id)
{
    if (!m || !count || (capacity > 0 && !out))
        return MC_ERR_INVALID_PARAMS;
    int rc;
    pthread_mutex_lock(&m->lock);
    mc_object_t *o = mc_master_find_complete_locked(m, key, &rc);
    if (o) {
        uint64_t id = grant_read_lease(m, o, mc_master_now_locked(m));
        if (lease_id)
            *lease_id = id;
        *count = mc_master_fill_descs_locked(m, o->rep, o->nrep, o->size, MC_REPLICA_COMPLETE, out,
                                             capacity);
        *count = mc_master_ext_fill_descs_locked(m, o, out, capacity, *count);
        set_checksums(o, out, *count, capacity);
        if (size)
            *size = o->size;
        if (lease_ttl_ms)
            *lease_ttl_ms = m->cfg.default_kv_lease_ttl_ms;
        MC_EXT_EACH(m, read_hit, m, o, mc_master_now_locked(m));
    } else if (rc == 0) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The run of `id` in the sorted ids[0..n): its first index in *at, its length returned. */
static size_t find_sorted(const uint64_t *ids, size_t n, uint64_t id, size_t *at)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = 0;
    while (lo + k < n && ids[lo + k] == id)
        k++;
    *at = lo;
    return k;
}

/*
 * Releases of groups no longer on their object (it was removed, evicted or replaced while being
 * read): they count against the fenced extents, and an extent is freed with its last release.
 * One pass over the deferred list for the whole batch; returns the releases that matched.
 */
static size_t release_deferred(mc_master_t *m, uint64_t *ids, size_t n)
{
    if (n == 0 || m->deferred_count == 0)
        return 0;
    qsort(ids, n, sizeof(ids[0]), u64_cmp);
    unsigned char *used = calloc(n, 1); /* which releases matched (a group may fence several) */
    for (size_t i = 0; i < m->deferred_count;) {
        mc_deferred_free_t *d = &m->deferred[i];
        size_t at, k = find_sorted(ids, n, d->lease_id, &at);
        if (k == 0) {
            i++;
            continue;
        }
        if (used)
            memset(used + at, 1, k);
        d->readers = k >= d->readers ? 0 : d->readers - (uint32_t)k;
        if (d->readers == 0 && d->jseq <= m->jdurable)
            mc_master_deferred_free_at_locked(m, i); /* entry i is now another one */
        else
            i++;
    }
    size_t matched = 0;
    for (size_t i = 0; used && i < n; i++)
        matched += used[i];
    free(used);
    return matched;
}

size_t mc_master_release_read_leases(mc_master_t *m, const char *const *keys,
                                     const uint64_t *lease_ids, size_t n)
{
    if (!m || (n > 0 && (!keys || !lease_ids)))
        return 0;
    uint64_t *missed = malloc((n ? n : 1) * sizeof(*missed));
    if (!missed)
        return 0; /* the leases run out on their own */
    size_t released = 0, n_missed = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        if (lease_ids[i] == 0)
            continue;
        int rc;
        mc_object_t *o = mc_master_find_complete_locked(m, keys[i], &rc);
        if (o && o->read_lease_id == lease_ids[i] && o->readers > 0) {
            if (--o->readers == 0)
                m->evict_retry_at = 0; /* it may be evicted now */
            released++;
        } else {
            missed[n_missed++] = lease_ids[i];
        }
    }
    released += release_deferred(m, missed, n_missed);
    m->lease_releases += released;
    pthread_mutex_unlock(&m->lock);
    free(missed);
    return released;
}

int mc_master_exist_key(mc_master_t *m, const char *key)
{
    if (!m)
        return MC_ERR_INVALID_PARAMS;
    int rc;
    pthread_mutex_lock(&m->lock);
    mc_object_t *o = mc_master_find_complete_locked(m, key, &rc);
    if (o)
        grant_lease(m, o, mc_master_now_locked(m));
    pthread_mutex_unlock(&m->lock);
    return rc < 0 ? rc : o != NULL;
}

int mc_master_query_key(mc_master_t *m, const char *key, mc_replica_desc_t *out, size_t capacity,
                        size_t *count, uint64_t *size, uint64_t *lease_remaining_ms)
{
    if (!m || !count || (capacity > 0 && !out))
        return MC_ERR_INVALID_PARAMS;
    int rc;
    pthread_mutex_lock(&m->lock);
    mc_object_t *o = mc_master_find_complete_locked(m, key, &rc);
    if (o) {
        *count = mc_master_fill_descs_locked(m, o->rep, o->nrep, o->size, MC_REPLICA_COMPLETE, out,
                                             capacity);
        *count = mc_master_ext_fill_descs_locked(m, o, out, capacity, *count);
        set_checksums(o, out, *count, capacity);
        if (size)
            *size = o->size;
        if (lease_remaining_ms)
            *lease_remaining_ms = mc_master_elapsed_ms(o->lease_timeout, mc_master_now_locked(m));
    } else if (rc == 0) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
