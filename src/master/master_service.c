/*
 * master_service.c — the root of the Master Service core (master_service.h): the default
 * configuration, the master clock, and the extension events, each calling every extension's
 * hook in table order (extension.h). The rest of the core is cut by concern into files that
 * call one another in layers (core_internal.h draws them): extents.c, clients.c, objects.c,
 * segments.c, puts.c, reads.c, removal.c, stats.c and monitor.c. Creating and destroying a
 * master and its two background threads are master_lifecycle.c's, the eviction policy is
 * eviction.c's, offload tasks and disk replicas are offload.c's; the state they all share is in
 * master_internal.h.
 *
 * One mutex guards all state: every operation is a few hash probes and allocator steps, so
 * sharding would buy little below millions of operations per second and cost clarity. The only
 * O(objects) work under the lock is an eviction pass and the stats scan; remove_all and
 * remove_by_regex take the lock one slice of the index at a time and match keys outside it.
 *
 * Layer: the lowest of the core. It calls no other file of the folder (the hooks are function
 * pointers), so every file of the core may raise an event here.
 */
#include "master_internal.h"

#include "clock.h"
#include "core_internal.h"
#include "extension.h"

/* ---- configuration, clock -------------------------------------------------------------------- */

void mc_master_config_default(mc_master_config_t *config)
{
    *config = (mc_master_config_t){
        .default_kv_lease_ttl_ms = 10000,
        .default_kv_soft_pin_ttl_ms = 1800000,
        .max_kv_soft_pin_ttl_ms = 86400000,
        .allow_evict_soft_pinned_objects = 1,
        .eviction_ratio = 0.05,
        .eviction_high_watermark_ratio = 0.90,
        .client_ttl_ms = 10000,
        .put_start_discard_timeout_ms = 30000,
        .put_start_release_timeout_ms = 600000,
        .enable_offload = 0,
        .offload_on_evict = 0,
        .offload_backend = MC_OFFLOAD_BACKEND_NONE,
        .distributed_fs_type = "",
        .offload_task_timeout_ms = 60000,
        .offload_max_attempts = 3,
        .offload_put_wait_ms = 10000,
        .fence_put_wait_ms = 1000,
        .offloading_queue_limit = 50000,
        .promotion_admission_threshold = 2,
        .promotion_queue_limit = 50000,
        .promotion_max_per_heartbeat = 1,
        .max_segment_size = MC_MASTER_DEFAULT_MAX_SEGMENT_SIZE,
        .task_max_finished = 10000,
        .task_max_pending = 10000,
        .task_max_processing = 10000,
        .task_pending_timeout_ms = 300000,
        .task_processing_timeout_ms = 300000,
        .task_max_retry_attempts = 10,
    };
}

uint64_t mc_master_default_clock(void *arg)
{
    (void)arg;
    return mc_now_ms();
}

/* ---- extension events (extension.h): every extension's hook, in table order --------------- */

void mc_master_replica_lost_locked(mc_master_t *m, mc_object_t *o, uint32_t slot)
{
    MC_MASTER_ASSERT_LOCKED(m);
    MC_EXT_EACH(m, replica_lost, m, o, slot);
}

void mc_master_executor_gone_locked(mc_master_t *m, const struct mc_offloader *off)
{
    MC_MASTER_ASSERT_LOCKED(m);
    MC_EXT_EACH(m, executor_gone, m, off);
}

uint64_t mc_master_executor_backlog_locked(const mc_master_t *m, const struct mc_offloader *off)
{
    MC_MASTER_ASSERT_LOCKED(m);
    uint64_t n = 0;
    for (const mc_master_ext_t *const *x = m->ext; *x; x++)
        n += (*x)->executor_backlog ? (*x)->executor_backlog(m, off) : 0;
    return n;
}

int mc_master_evict_instead_locked(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->evict_instead && (*x)->evict_instead(m, o, now))
            return 1;
    }
    return 0;
}

int mc_master_eviction_held_locked(const mc_master_t *m)
{
    MC_MASTER_ASSERT_LOCKED(m);
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->holds_eviction && (*x)->holds_eviction(m))
            return 1;
    }
    return 0;
}

int mc_master_ext_hides_key_locked(mc_master_t *m, const char *key, size_t len)
{
    MC_MASTER_ASSERT_LOCKED(m);
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->hides_key && (*x)->hides_key(m, key, len))
            return 1;
    }
    return 0;
}

size_t mc_master_ext_fill_descs_locked(const mc_master_t *m, const mc_object_t *o,
                                       mc_replica_desc_t *out, size_t capacity, size_t n)
{
    MC_MASTER_ASSERT_LOCKED(m);
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->fill_descs)
            n = (*x)->fill_descs(m, o, out, capacity, n);
    }
    return n;
}

/* ---- a test's clock (master_service.h) ------------------------------------------------------- */

void mc_master_set_clock(mc_master_t *m, uint64_t (*now_ms)(void *arg), void *arg)
{
    pthread_mutex_lock(&m->lock);
    m->clock = now_ms ? now_ms : mc_master_default_clock;
    m->clock_arg = now_ms ? arg : NULL;
    pthread_mutex_unlock(&m->lock);
}
