/*
 * master_lifecycle.c — creating and destroying a master (master_service.h): its state, its
 * extensions (extension.h, in table order) and its two background threads, the eviction check
 * every MC_EVICTION_PERIOD_MS and the monitor sweep every MC_MONITOR_PERIOD_MS.
 *
 * This file sits above the core (master_service.c) and the extensions: it is the one place
 * that names the extension table and the eviction policy, so the core reaches both only through
 * the pointers set here and never calls up into them by name.
 */
#include "master_internal.h"

#include "extension.h"
#include "log.h"
#include "net.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Waits up to ms on m->wake (lock held); returns early on shutdown. */
static void timed_wait_locked(mc_master_t *m, unsigned ms)
{
    MC_MASTER_ASSERT_LOCKED(m);
    struct timespec ts;
    mc_deadline_after_ms(&ts, CLOCK_MONOTONIC, (uint64_t)ms);
    pthread_cond_timedwait(&m->wake, &m->lock, &ts);
}

static void *eviction_thread(void *arg)
{
    mc_master_t *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stopping) {
        timed_wait_locked(m, MC_EVICTION_PERIOD_MS);
        if (m->stopping || mc_now_ms() < m->evict_retry_at)
            continue;
        int ran;
        size_t evicted = m->eviction(m, mc_master_now_locked(m), 0, &ran);
        /* Above the watermark with nothing evictable: rescanning every 10 ms would only burn
         * the lock; look again after a commit or a second. */
        if (ran && evicted == 0)
            m->evict_retry_at = mc_now_ms() + MC_EVICTION_IDLE_RETRY_MS;
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

/*
 * The master itself did not run for `gap` ms (stopped, a paused VM, a swap storm): it could not
 * read the pings its clients kept sending, so that time must not count as their silence. Every
 * client's last ping moves forward by the gap before the sweep judges them — otherwise a master
 * resumed after more than --client_ttl would expire every live holder and drop their objects.
 */
static void forgive_own_stall_locked(mc_master_t *m, uint64_t gap, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    MC_WARN("this master did not run for %" PRIu64 " ms (stopped or starved): that time is not "
            "counted against its %zu clients' pings",
            gap, m->client_count);
    for (size_t i = 0; i < m->client_count; i++) {
        uint64_t seen = m->clients[i].last_seen_ms + gap;
        m->clients[i].last_seen_ms = seen < now ? seen : now;
    }
}

static void *monitor_thread(void *arg)
{
    mc_master_t *m = arg;
    pthread_mutex_lock(&m->lock);
    uint64_t last = mc_now_ms();
    while (!m->stopping) {
        timed_wait_locked(m, MC_MONITOR_PERIOD_MS);
        uint64_t real = mc_now_ms();
        if (real - last > MC_MONITOR_PERIOD_MS + MC_MONITOR_STALL_MS)
            forgive_own_stall_locked(m, real - last - MC_MONITOR_PERIOD_MS,
                                     mc_master_now_locked(m));
        last = real;
        if (!m->stopping)
            mc_master_monitor_sweep_locked(m, mc_master_now_locked(m));
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

static int config_valid(const mc_master_config_t *c)
{
    return c->eviction_ratio >= 0.0 && c->eviction_ratio <= 1.0 &&
           c->eviction_high_watermark_ratio >= 0.0 && c->eviction_high_watermark_ratio <= 1.0 &&
           c->offload_backend >= MC_OFFLOAD_BACKEND_NONE &&
           c->offload_backend <= MC_OFFLOAD_BACKEND_DISTRIBUTED && c->offload_max_attempts >= 1 &&
           c->offload_task_timeout_ms > 0 &&
           memchr(c->distributed_fs_type, '\0', sizeof(c->distributed_fs_type)) != NULL;
}

static uint64_t instance_token(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Frees all state; threads must be stopped. */
static void master_free(mc_master_t *m)
{
    /* In table order, as before extensions were a table: restore's reservations first, then
     * tasks, then promotion (it refers to offload state), then offload. */
    for (const mc_master_ext_t *const *x = m->ext; x && *x; x++) {
        if ((*x)->fini)
            (*x)->fini(m);
    }
    size_t cursor = 0;
    mc_object_t *o;
    while ((o = mc_index_next(&m->index, &cursor)) != NULL) {
        free(o->pending);
        free(o->offload);
        mc_object_free(o);
    }
    mc_index_fini(&m->index);
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k]) {
            mc_alloc_destroy(m->segs[k]->alloc);
            free(m->segs[k]->fence_tokens);
            free(m->segs[k]->fence_seqs);
            free(m->segs[k]);
        }
    }
    free(m->segs);
    free(m->clients);
    free(m->deferred);
    free(m->fences);
    free(m->cand);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* Initialises the extensions in table order; on a failure, those done are finalised again. */
static int extensions_init(mc_master_t *m)
{
    for (size_t i = 0; m->ext[i]; i++) {
        int rc = m->ext[i]->init ? m->ext[i]->init(m) : 0;
        if (rc == 0)
            continue;
        MC_ERROR("master: extension %s failed to start: %d", m->ext[i]->name, rc);
        for (size_t k = 0; k < i; k++) {
            if (m->ext[k]->fini)
                m->ext[k]->fini(m);
        }
        return rc;
    }
    return 0;
}

int mc_master_create(const mc_master_config_t *config, mc_master_t **out)
{
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_master_config_t defaults;
    mc_master_config_default(&defaults);
    if (!config)
        config = &defaults;
    if (!config_valid(config))
        return MC_ERR_INVALID_PARAMS;
    mc_master_t *m = calloc(1, sizeof(*m));
    if (!m)
        return MC_ERR_INTERNAL_ERROR;
    m->cfg = *config;
    m->view_version = instance_token();
    m->clock = mc_master_default_clock;
    m->rng = m->view_version | 1;
    m->pending.next = m->pending.prev = &m->pending;
    m->ext = mc_master_extensions;
    m->eviction = mc_eviction_run_locked;
    mc_index_init(&m->index);
    int rc = extensions_init(m);
    if (rc != 0) {
        mc_index_fini(&m->index);
        free(m);
        return rc;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, &attr);
    pthread_condattr_destroy(&attr);

    if (pthread_create(&m->evict_thread, NULL, eviction_thread, m) != 0) {
        master_free(m);
        return MC_ERR_INTERNAL_ERROR;
    }
    if (pthread_create(&m->monitor_thread, NULL, monitor_thread, m) != 0) {
        pthread_mutex_lock(&m->lock);
        m->stopping = 1;
        pthread_cond_broadcast(&m->wake);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->evict_thread, NULL);
        master_free(m);
        return MC_ERR_INTERNAL_ERROR;
    }
    *out = m;
    return 0;
}

void mc_master_destroy(mc_master_t *master)
{
    if (!master)
        return;
    pthread_mutex_lock(&master->lock);
    master->stopping = 1;
    pthread_cond_broadcast(&master->wake);
    pthread_mutex_unlock(&master->lock);
    pthread_join(master->evict_thread, NULL);
    pthread_join(master->monitor_thread, NULL);
    master_free(master);
}
