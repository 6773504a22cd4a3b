/*
 * puts.c — the put/upsert protocol: PutStart (checks, placement of replicas on distinct
 * segments, and when memory is short a sweep of the fences, a wait for them, or an eviction
 * pass), PutEnd and PutRevoke, their upsert twins, and how long a client whose put found no
 * room may usefully wait before it retries.
 *
 * A put in progress is invisible to readers, and only its writer ends or revokes it; a put of a
 * key whose put in progress is older than put_start_discard_timeout_ms replaces it (monitor.c
 * revokes one older than put_start_release_timeout_ms).
 *
 * Layer: above segments.c (placement, descriptors), objects.c (attach, commit, revoke),
 * extents.c and master_service.c; the eviction policy is reached through m->eviction.
 */
#include "master_internal.h"

#include "core_internal.h"
#include "log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64 over m->rng: where placement starts among the segments. */
static uint64_t next_random(mc_master_t *m)
{
    uint64_t x = m->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    m->rng = x;
    return x;
}

/* ---- the fences a put short of memory waits for ---------------------------------------------- */

static int fence_worth_waiting(const mc_master_t *m, const mc_deferred_free_t *d, uint64_t now)
{
    return d->free_at > now &&
           (d->waited_from == 0 || now - d->waited_from < m->cfg.fence_put_wait_ms);
}

/* Bytes of fences a put may still wait for (cfg.fence_put_wait_ms). */
static uint64_t waitable_fenced_bytes(const mc_master_t *m, uint64_t now)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < m->deferred_count; i++) {
        const mc_deferred_free_t *d = &m->deferred[i];
        if (fence_worth_waiting(m, d, now))
            bytes += mc_alloc_extent_size(mc_master_segment_locked(m, d->seg)->alloc, d->handle);
    }
    return bytes;
}

/* A put waits for the fences: their patience starts now unless an earlier put started it. */
static void fences_waited_for(mc_master_t *m, uint64_t now)
{
    for (size_t i = 0; i < m->deferred_count; i++) {
        mc_deferred_free_t *d = &m->deferred[i];
        if (d->waited_from == 0 && fence_worth_waiting(m, d, now))
            d->waited_from = now;
    }
}

/* ---- placement ------------------------------------------------------------------------------- */

/* Adds a replica on segment `slot` to p when it is mounted, unused by p, and has room. */
static void place_on(mc_master_t *m, uint32_t slot, mc_pending_put_t *p)
{
    mc_segment_t *s = mc_master_segment_locked(m, slot);
    if (!s || s->drain_until || mc_master_replicas_use_segment(p->rep, p->nrep, slot))
        return;
    mc_replica_ref_t ref = {.seg = slot, .handle = s->gen};
    if (p->size > 0) {
        uint64_t addr;
        if (mc_alloc_alloc(s->alloc, p->size, NULL, &addr, &ref.handle) != 0)
            return;
    }
    p->rep[p->nrep++] = ref;
}

static void place_on_named(mc_master_t *m, const char *name, mc_pending_put_t *p, unsigned want)
{
    if (!name || !name[0])
        return;
    for (size_t k = 0; k < m->seg_cap && p->nrep < want; k++) {
        if (m->segs[k] && strcmp(m->segs[k]->info.name, name) == 0)
            place_on(m, (uint32_t)k, p);
    }
}

/*
 * Fills p->rep with up to `want` replicas on distinct segments: the preferred segments (by name,
 * in order) first, then every other segment from a random start. A 0-byte value gets one nominal
 * replica. Best effort: p->nrep may end below `want`, or 0.
 */
static void place(mc_master_t *m, const mc_replicate_config_t *cfg, unsigned want,
                  mc_pending_put_t *p)
{
    p->nrep = 0;
    if (p->size == 0)
        want = 1;
    place_on_named(m, cfg->preferred_segment, p, want);
    for (size_t i = 0; i < cfg->preferred_segment_count && p->nrep < want; i++)
        place_on_named(m, cfg->preferred_segments[i], p, want);
    if (m->seg_count == 0 || p->nrep >= want)
        return;
    size_t start = (size_t)(next_random(m) % m->seg_cap);
    for (size_t i = 0; i < m->seg_cap && p->nrep < want; i++)
        place_on(m, (uint32_t)((start + i) % m->seg_cap), p);
}

/* ---- put / upsert ---------------------------------------------------------------------------- */

static int config_ok(const mc_master_t *m, const mc_replicate_config_t *cfg)
{
    if (cfg->replica_num > MC_MAX_REPLICAS)
        return 0;
    if (cfg->soft_pin_action != MC_SOFT_PIN_PRESERVE &&
        cfg->soft_pin_action != MC_SOFT_PIN_ENABLE && cfg->soft_pin_action != MC_SOFT_PIN_DISABLE)
        return 0;
    if (cfg->has_soft_pin_ttl && (cfg->soft_pin_action != MC_SOFT_PIN_ENABLE ||
                                  cfg->soft_pin_ttl_ms > m->cfg.max_kv_soft_pin_ttl_ms))
        return 0;
    return cfg->preferred_segment_count == 0 || cfg->preferred_segments;
}

static int start_locked(mc_master_t *m, const char *key, size_t len, int upsert,
                        const mc_replicate_config_t *cfg, unsigned want, mc_pending_put_t *p,
                        uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    if (p->size > 0 && mc_master_align_up(p->size) > m->largest_capacity)
        return MC_ERR_NO_AVAILABLE_HANDLE; /* no eviction can make room for it */
    int swept = 0, evicted = 0;
    for (;;) {
        mc_object_t *o = mc_index_find(&m->index, key, len);
        if (o && o->complete && !upsert)
            return MC_ERR_OBJECT_ALREADY_EXISTS;
        if (mc_master_ext_hides_key_locked(m, key,
                                           len)) /* e.g. restored, its owner not re-mounted yet */
            return upsert ? MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS : MC_ERR_OBJECT_ALREADY_EXISTS;
        if (o && o->pending) {
            uint64_t age = mc_master_elapsed_ms(now, o->pending->start_ms);
            if (age < m->cfg.put_start_discard_timeout_ms)
                return MC_ERR_REPLICA_IS_NOT_READY; /* not "exists": that put may still fail */
            MC_INFO("put of %.64s by %s abandoned for %" PRIu64 " ms: replaced", key,
                    o->pending->client_id, age);
            __atomic_fetch_add(&m->ops.put_start_discards, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&m->ops.put_start_releases, 1, __ATOMIC_RELAXED);
            if (mc_master_pending_revoke_locked(m, o, 1, UINT32_MAX))
                o = NULL;
        }
        place(m, cfg, want, p);
        if (p->nrep > 0 || p->size == 0) {
            int rc = mc_master_pending_attach_locked(m, o, key, len, p, now);
            if (rc != 0 && p->size > 0) {
                for (unsigned i = 0; i < p->nrep; i++)
                    mc_master_extent_free_locked(m, p->rep[i]);
            }
            return rc;
        }
        /* Short of memory: first the fences whose leases are over (the monitor frees them only
         * every second), then, rather than evict live objects, wait for fences that would make
         * room (mc_master_put_wait_ms tells the client to retry) while their patience lasts,
         * then evict. */
        if (!swept) {
            swept = 1;
            if (mc_master_deferred_sweep_locked(m, now) > 0)
                continue;
        }
        if (evicted)
            return MC_ERR_NO_AVAILABLE_HANDLE;
        if (waitable_fenced_bytes(m, now) >= mc_master_align_up(p->size)) {
            fences_waited_for(m, now);
            m->put_fence_waits++;
            return MC_ERR_NO_AVAILABLE_HANDLE;
        }
        evicted = 1;
        m->eviction(m, now, 1, NULL); /* may delete `o`: looked up again above */
    }
}

uint64_t mc_master_put_wait_ms(mc_master_t *m, uint64_t size)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    uint64_t ext_ms = 0;
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        uint64_t ms = (*x)->put_wait_ms ? (*x)->put_wait_ms(m, size) : 0;
        ext_ms = ms > ext_ms ? ms : ext_ms;
    }
    uint64_t now = mc_master_now_locked(m);
    /* Twice the patience: by then the fences are free, or waited for long enough that a put
     * evicts instead. */
    uint64_t fence_ms = size > 0 && waitable_fenced_bytes(m, now) >= mc_master_align_up(size)
                            ? 2 * m->cfg.fence_put_wait_ms
                            : 0;
    pthread_mutex_unlock(&m->lock);
    return ext_ms > fence_ms ? ext_ms : fence_ms;
}

static int start_put(mc_master_t *m, const char *client_id, const char *key, uint64_t size,
                     const mc_replicate_config_t *cfg, mc_replica_desc_t *out, size_t capacity,
                     size_t *count, int upsert)
{
    static const mc_replicate_config_t default_cfg = MC_REPLICATE_CONFIG_INIT;
    int64_t len = mc_master_key_length(key);
    if (len < 0)
        return (int)len;
    if (!cfg)
        cfg = &default_cfg;
    if (!m || !mc_master_client_id_ok(client_id) || !count || size > MC_MAX_VALUE_SIZE ||
        !config_ok(m, cfg))
        return MC_ERR_INVALID_PARAMS;
    unsigned want = cfg->replica_num ? cfg->replica_num : 1;
    if (!out || capacity < want)
        return MC_ERR_INVALID_PARAMS;
    *count = 0;

    mc_pending_put_t *p = calloc(1, sizeof(*p));
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    p->size = size;
    p->soft_pin_action = (uint8_t)cfg->soft_pin_action;
    p->soft_pin_ttl_ms =
        cfg->has_soft_pin_ttl ? cfg->soft_pin_ttl_ms : m->cfg.default_kv_soft_pin_ttl_ms;
    p->hard_pin = cfg->with_hard_pin ? 1 : 0;
    snprintf(p->client_id, sizeof(p->client_id), "%s", client_id);

    pthread_mutex_lock(&m->lock);
    p->token = mc_master_next_token_locked(m);
    int rc = start_locked(m, key, (size_t)len, upsert, cfg, want, p, mc_master_now_locked(m));
    if (rc == 0) {
        *count = mc_master_fill_descs_locked(m, p->rep, p->nrep, size, MC_REPLICA_PROCESSING, out,
                                             capacity);
        for (size_t i = 0; i < *count && i < capacity; i++)
            out[i].fence_token = p->token; /* its writes carry it; a revoke fences it */
    }
    pthread_mutex_unlock(&m->lock);
    if (rc != 0)
        free(p);
    return rc;
}

int mc_master_put_start(mc_master_t *m, const char *client_id, const char *key, uint64_t size,
                        const mc_replicate_config_t *config, mc_replica_desc_t *out,
                        size_t capacity, size_t *count)
{
    return start_put(m, client_id, key, size, config, out, capacity, count, 0);
}

int mc_master_upsert_start(mc_master_t *m, const char *client_id, const char *key, uint64_t size,
                           const mc_replicate_config_t *config, mc_replica_desc_t *out,
                           size_t capacity, size_t *count)
{
    return start_put(m, client_id, key, size, config, out, capacity, count, 1);
}

/* End (commit = 1) or revoke the caller's put in progress on key. */
static int finish_put(mc_master_t *m, const char *client_id, const char *key, int commit,
                      const uint32_t *checksum)
{
    int64_t len = mc_master_key_length(key);
    if (len < 0)
        return (int)len;
    if (!m || !mc_master_client_id_ok(client_id))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    mc_object_t *o = mc_index_find(&m->index, key, (size_t)len);
    if (!o || !o->pending)
        rc = MC_ERR_OBJECT_NOT_FOUND;
    else if (strcmp(o->pending->client_id, client_id) != 0)
        rc = MC_ERR_ILLEGAL_CLIENT;
    else if (commit)
        rc = mc_master_pending_commit_locked(m, o, mc_master_now_locked(m), checksum);
    else
        mc_master_pending_revoke_locked(m, o, 0, UINT32_MAX);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_put_end(mc_master_t *m, const char *client_id, const char *key)
{
    return finish_put(m, client_id, key, 1, NULL);
}

int mc_master_put_end_checksum(mc_master_t *m, const char *client_id, const char *key,
                               const uint32_t *checksum)
{
    return finish_put(m, client_id, key, 1, checksum);
}

int mc_master_put_revoke(mc_master_t *m, const char *client_id, const char *key)
{
    return finish_put(m, client_id, key, 0, NULL);
}

int mc_master_upsert_end(mc_master_t *m, const char *client_id, const char *key)
{
    return finish_put(m, client_id, key, 1, NULL);
}

int mc_master_upsert_revoke(mc_master_t *m, const char *client_id, const char *key)
{
    return finish_put(m, client_id, key, 0, NULL);
}
