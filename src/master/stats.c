/*
 * stats.c — observation: the stats (one O(objects) scan under the lock, plus every extension's
 * fields), upstream's operation counters (atomics, counted without the lock), and the list of
 * mounted segments.
 *
 * Layer: above segments.c (usage); the top of the core with removal.c and monitor.c.
 */
#include "master_internal.h"

#include "core_internal.h"

#include <string.h>

/* ---- observation ----------------------------------------------------------------------------- */

void mc_master_get_stats(mc_master_t *m, mc_master_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    mc_master_usage_locked(m, &out->used_bytes, &out->capacity_bytes);
    out->key_count = mc_index_count(&m->index);
    out->complete_count = m->complete_count;
    out->processing_count = out->key_count - m->complete_count;
    out->client_count = m->client_count;
    out->segment_count = m->seg_count;
    size_t cursor = 0;
    mc_object_t *o;
    while ((o = mc_index_next(&m->index, &cursor)) != NULL) {
        if (!o->complete)
            continue;
        out->leased_count += o->lease_timeout > now;
        out->reading_count += mc_object_being_read(o, now);
        out->soft_pinned_count += o->soft_pin_until > now;
        out->hard_pinned_count += o->hard_pinned;
        unsigned ndisk = mc_offload_ndisk(o);
        for (unsigned i = 0; i < ndisk; i++)
            out->dfs_replicas += o->offload->disk[i].type == MC_REPLICA_DFS;
        out->disk_replicas += ndisk;
        out->disk_replica_bytes += ndisk ? o->size : 0;
        out->disk_only_objects += ndisk && o->nrep == 0;
        out->memory_objects += o->nrep > 0;
        out->disk_objects += ndisk > 0;
    }
    MC_EXT_EACH(m, stats, m, out);
    out->evicted_keys = m->evicted_keys;
    out->eviction_runs = m->eviction_runs;
    out->expired_clients = m->expired_clients;
    out->gone_clients = m->gone_clients;
    out->revoked_puts = m->revoked_puts;
    out->quarantined_extents = m->quarantined_extents;
    out->quarantine_freed = m->quarantine_freed;
    out->fenced_bytes = m->fenced_bytes;
    out->lease_releases = m->lease_releases;
    out->put_fence_waits = m->put_fence_waits;
    out->checksum_mismatches = m->checksum_mismatches;
    out->regex_refused = m->regex_refused;
    out->mounts_refused = m->mounts_refused;
    pthread_mutex_unlock(&m->lock);
}

const uint64_t mc_value_size_bounds[MC_VALUE_SIZE_BUCKETS] = {4096,    65536,    262144,  1048576,
                                                              4194304, 16777216, 67108864};

static void count(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

void mc_master_count_op(mc_master_t *m, mc_master_op_t op, int failed)
{
    if ((unsigned)op >= MC_OP_COUNT)
        return;
    count(&m->ops.requests[op], 1);
    count(&m->ops.failures[op], failed != 0);
}

void mc_master_count_batch(mc_master_t *m, mc_master_batch_op_t op, uint64_t items, uint64_t failed)
{
    if ((unsigned)op >= MC_BATCH_COUNT)
        return;
    count(&m->ops.batch_requests[op], 1);
    count(&m->ops.batch_items[op], items);
    count(&m->ops.batch_failed_items[op], failed);
    count(&m->ops.batch_failures[op], failed > 0 && failed == items);
    count(&m->ops.batch_partial[op], failed > 0 && failed < items);
}

void mc_master_count_put_start(mc_master_t *m, int rc, uint64_t size, size_t given, size_t asked)
{
    if (rc == MC_ERR_NO_AVAILABLE_HANDLE)
        count(&m->ops.put_start_alloc_failures, 1);
    if (rc != 0)
        return;
    count(&m->ops.put_start_partial_allocations, size > 0 && given < asked);
    size_t b = 0;
    while (b < MC_VALUE_SIZE_BUCKETS && size > mc_value_size_bounds[b])
        b++;
    count(&m->ops.value_size_counts[b], 1);
    count(&m->ops.value_size_sum, size);
    count(&m->ops.value_size_count, 1);
}

void mc_master_count_get(mc_master_t *m, int rc, mc_replica_type_t first, uint64_t size)
{
    count(&m->ops.total_gets, 1);
    if (rc != 0)
        return;
    count(&m->ops.valid_gets, 1);
    if (first == MC_REPLICA_MEMORY) {
        count(&m->ops.mem_hits, 1);
        count(&m->ops.mem_hit_bytes, size);
    } else {
        count(&m->ops.file_hits, 1);
        count(&m->ops.file_hit_bytes, size);
    }
}

void mc_master_get_op_stats(mc_master_t *m, mc_master_op_stats_t *out)
{
    const uint64_t *src = (const uint64_t *)&m->ops;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

size_t mc_master_list_segments(mc_master_t *m, mc_segment_info_t *out, size_t capacity)
{
    pthread_mutex_lock(&m->lock);
    size_t n = 0;
    for (size_t k = 0; k < m->seg_cap; k++) {
        mc_segment_t *s = m->segs[k];
        if (!s)
            continue;
        if (n < capacity) {
            out[n] = s->info;
            out[n].used = mc_alloc_used(s->alloc);
        }
        n++;
    }
    pthread_mutex_unlock(&m->lock);
    return n;
}
