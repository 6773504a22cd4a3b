/*
 * monitor.c — what the monitor does every MC_MONITOR_PERIOD_MS (mc_master_monitor_sweep_locked,
 * run by master_lifecycle.c's thread and by mc_master_tick): clients that stopped pinging
 * expire, puts unfinished after put_start_release_timeout_ms are revoked, drained segments are
 * unmounted, deferred frees whose gates opened are freed, ended range fences are dropped, and
 * every extension sweeps. Also the departure of a client liveness.c found gone, and the debug
 * builds' whole-state check that mc_master_tick asserts.
 *
 * Layer: the top of the core: it calls segments.c, clients.c, objects.c and extents.c.
 */
#include "master_internal.h"

#include "core_internal.h"
#include "log.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- liveness, timeouts, deferred frees ------------------------------------------------------ */

/* Unmounts every segment of client id and revokes its unfinished puts. 0, or -1 when out of
 * memory (the caller tries again later). */
static int drop_client_memory(mc_master_t *m, const char *id)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k] && strcmp(m->segs[k]->info.client_id, id) == 0 &&
            mc_master_unmount_locked(m, (uint32_t)k, 1) != 0)
            return -1;
    }
    for (mc_pending_put_t *p = m->pending.next, *next; p != &m->pending; p = next) {
        next = p->next;
        if (strcmp(p->client_id, id) == 0)
            mc_master_pending_revoke_locked(m, p->obj, 1, UINT32_MAX);
    }
    return 0;
}

/* Drops a client that stopped pinging: its segments, its puts, its offloaded files, itself. 0
 * when it is gone. */
static int expire_client(mc_master_t *m, size_t idx, uint64_t now)
{
    char id[MC_CLIENT_ID_MAX];
    snprintf(id, sizeof(id), "%s", m->clients[idx].id);
    MC_WARN("client %s expired (no ping for %" PRIu64 " ms): unmounting its segments", id,
            mc_master_elapsed_ms(now, m->clients[idx].last_seen_ms));
    if (drop_client_memory(m, id) != 0)
        return -1; /* out of memory: try again on the next sweep */
    MC_EXT_EACH(m, client_gone, m, id);
    m->clients[idx] = m->clients[--m->client_count];
    m->expired_clients++;
    return 0;
}

size_t mc_master_client_endpoints(mc_master_t *m, const char *client_id,
                                  char (*names)[MC_SEGMENT_NAME_MAX], size_t cap,
                                  uint64_t *last_seen_ms)
{
    if (!m || !mc_master_client_id_ok(client_id))
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&m->lock);
    const mc_client_t *c = mc_master_client_locked(m, client_id);
    for (size_t k = 0; c && !c->gone && k < m->seg_cap; k++) {
        const mc_segment_t *s = m->segs[k];
        if (!s || strcmp(s->info.client_id, client_id) != 0)
            continue;
        int seen = 0;
        for (size_t j = 0; j < n && j < cap; j++)
            seen |= strcmp(names[j], s->info.name) == 0;
        if (seen)
            continue;
        if (n < cap)
            snprintf(names[n], MC_SEGMENT_NAME_MAX, "%s", s->info.name);
        n++;
    }
    if (last_seen_ms)
        *last_seen_ms = c ? c->last_seen_ms : 0;
    pthread_mutex_unlock(&m->lock);
    return n;
}

int mc_master_client_gone(mc_master_t *m, const char *client_id, uint64_t last_seen_ms)
{
    if (!m || !mc_master_client_id_ok(client_id))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_client_t *c = mc_master_client_locked(m, client_id);
    int rc = 0;
    if (!c || c->gone)
        rc = MC_ERR_CLIENT_NOT_FOUND;
    else if (c->last_seen_ms != last_seen_ms)
        rc = 1; /* it pinged while it was probed: alive after all */
    else if (drop_client_memory(m, client_id) != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0) {
        c = mc_master_client_locked(m,
                                    client_id); /* unmounting does not move clients, but be exact */
        if (c)
            c->gone = 1;
        m->gone_clients++;
        MC_WARN("client %s is gone (its connection closed and its endpoints refuse "
                "connections): its segments are unmounted and its puts revoked",
                client_id);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void mc_master_monitor_sweep_locked(mc_master_t *m, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    for (size_t i = 0; i < m->client_count;) {
        if (mc_master_elapsed_ms(now, m->clients[i].last_seen_ms) > m->cfg.client_ttl_ms &&
            expire_client(m, i, now) == 0)
            continue; /* slot i now holds another client */
        i++;
    }
    for (mc_pending_put_t *p = m->pending.next, *next; p != &m->pending; p = next) {
        next = p->next;
        if (mc_master_elapsed_ms(now, p->start_ms) >= m->cfg.put_start_release_timeout_ms) {
            MC_WARN("put of %.64s by %s unfinished after %" PRIu64 " ms: revoked",
                    mc_object_key(p->obj), p->client_id, mc_master_elapsed_ms(now, p->start_ms));
            __atomic_fetch_add(&m->ops.put_start_releases, 1, __ATOMIC_RELAXED);
            mc_master_pending_revoke_locked(m, p->obj, 1, UINT32_MAX);
        }
    }
    for (size_t k = 0; k < m->seg_cap; k++) {
        const mc_segment_t *s = m->segs[k];
        if (s && s->drain_until && now >= s->drain_until)
            mc_master_unmount_locked(m, (uint32_t)k,
                                     0); /* out of memory: again on the next sweep */
    }
    mc_master_deferred_sweep_locked(m, now);
    size_t kept = 0;
    for (size_t i = 0; i < m->fence_count; i++) {
        if (m->fences[i].until > now)
            m->fences[kept++] = m->fences[i];
    }
    m->fence_count = kept;
    MC_EXT_EACH(m, sweep, m, now);
}

#ifndef NDEBUG
#define INVARIANT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            MC_ERROR("master invariant broken: " __VA_ARGS__);                                     \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

/* Every replica ref is a live extent owned by its object, counted once per segment. */
static int refs_hold(mc_master_t *m, const mc_object_t *o, const mc_replica_ref_t *rep, unsigned n,
                     uint64_t size, uint64_t *seg_used)
{
    for (unsigned i = 0; i < n; i++) {
        INVARIANT(!mc_master_replicas_use_segment(rep, i, rep[i].seg),
                  "%s: two replicas on one segment", mc_object_key(o));
        if (size == 0)
            continue;
        mc_segment_t *s = mc_master_segment_locked(m, rep[i].seg);
        INVARIANT(s && mc_alloc_is_live(s->alloc, rep[i].handle) &&
                      mc_alloc_cookie(s->alloc, rep[i].handle) == o &&
                      mc_alloc_extent_size(s->alloc, rep[i].handle) == mc_master_align_up(size),
                  "%s: replica %u is not its live extent", mc_object_key(o), i);
        seg_used[rep[i].seg] += mc_master_align_up(size);
    }
    return 1;
}

static int ext_object_ok(const mc_master_t *m, const mc_object_t *o)
{
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->object_ok && !(*x)->object_ok(m, o))
            return 0;
    }
    return 1;
}

/* Walks everything (O(objects)); used by mc_master_tick in debug builds. */
static int invariants_hold(mc_master_t *m)
{
    uint64_t *seg_used = calloc(m->seg_cap + 1, sizeof(*seg_used));
    if (!seg_used)
        return 1; /* cannot check without memory; not a violation */
    int ok = 1;
    size_t cursor = 0, complete = 0, pending = 0;
    mc_object_t *o;
    while (ok && (o = mc_index_next(&m->index, &cursor)) != NULL) {
        complete += o->complete;
        ok = (o->complete || o->pending) && (o->complete || o->nrep == 0) &&
             (!o->complete || o->size == 0 || o->nrep > 0 || mc_offload_ndisk(o) > 0) &&
             ext_object_ok(m, o) &&
             refs_hold(m, o, o->rep, o->nrep, o->complete ? o->size : 0, seg_used);
        if (ok && o->pending) {
            const mc_pending_put_t *p = o->pending;
            pending++;
            ok = p->obj == o && (p->size == 0 || p->nrep > 0) &&
                 refs_hold(m, o, p->rep, p->nrep, p->size, seg_used);
        }
    }
    uint64_t fenced = 0;
    MC_EXT_EACH(m, account, m, seg_used); /* extents the extensions hold */
    for (size_t i = 0; ok && i < m->deferred_count; i++) {
        mc_segment_t *s = mc_master_segment_locked(m, m->deferred[i].seg);
        ok = s && mc_alloc_is_live(s->alloc, m->deferred[i].handle) &&
             !mc_alloc_cookie(s->alloc, m->deferred[i].handle) &&
             (m->deferred[i].readers > 0 || m->deferred[i].jseq != 0 || m->deferred[i].wfence != 0);
        if (ok) {
            seg_used[m->deferred[i].seg] += mc_alloc_extent_size(s->alloc, m->deferred[i].handle);
            fenced += mc_alloc_extent_size(s->alloc, m->deferred[i].handle);
        }
    }
    ok = ok && fenced == m->fenced_bytes;
    for (size_t k = 0; ok && k < m->seg_cap; k++) {
        if (m->segs[k])
            ok = mc_alloc_check(m->segs[k]->alloc) == 0 &&
                 mc_alloc_used(m->segs[k]->alloc) == seg_used[k];
    }
    free(seg_used);
    if (ok && (complete != m->complete_count || pending != m->pending_count))
        ok = 0;
    if (!ok)
        MC_ERROR("master invariant broken (see above, or per-segment used bytes / counts)");
    return ok;
}
#endif

void mc_master_tick(mc_master_t *m)
{
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    mc_master_monitor_sweep_locked(m, now);
    m->eviction(m, now, 0, NULL);
    assert(invariants_hold(m));
    pthread_mutex_unlock(&m->lock);
}
