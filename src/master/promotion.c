/*
 * promotion.c — promotion of disk-only objects back to memory on a hit (master_service.h,
 * "Promotion"; matches upstream's --promotion_on_hit: TryPushPromotionQueue, PromotionAllocStart,
 * NotifyPromotionSuccess / NotifyPromotionFailure).
 *
 * A GetReplicaList of a complete object with no memory replica and a LOCAL_DISK replica counts a
 * hit in a count-min sketch. Gates, in upstream's order: (1) the sketch's count reaches
 * promotion_admission_threshold; (2) memory use is below eviction_high_watermark_ratio; (3) no
 * put and no promotion is in progress on the object; (4) fewer than promotion_queue_limit
 * promotions are in flight. Then a task is queued for the client holding the file (its offload
 * heartbeat learns it waits). That client takes it (mc_master_promotion_take): the master
 * allocates a PROCESSING extent in the client's own segment — held by the task, not by the
 * object, so no reader sees it and eviction never takes it — and the client reads the file into
 * it, checks the value's CRC32C and reports (mc_master_promotion_result); on success the extent
 * becomes a memory replica of the same value (same checksum).
 *
 * What can happen meanwhile: the value is removed, replaced or lost — the task is cancelled (a
 * task already taken keeps its extent, unpublished, until its client reports or the bound runs
 * out, so a late copy never lands in memory someone else owns); the extent's segment is
 * unmounted — cancelled; the client goes away — cancelled (a taken extent is kept until the
 * bound or its segment's unmount: a copy may still be under way); no report within
 * put_start_release_timeout_ms of queueing — expired. An extent whose copy was handed out and
 * never reported (expired, or its client gone) may still be written — the client's file read can
 * hang (a DFS that stopped answering) past any bound — so it is not freed but quarantined with
 * the task's fencing token, as a revoked put's extent: it is reused only once its holder refused
 * the token and its write fence completed, which waits for a copy admitted before (the client
 * admits every copy under its fence with that token, offload_worker.c).
 *
 * Differences from upstream: no retry candidates (a rejected hit is simply counted; the next hit
 * tries again); the extent is placed in the executor's own segment (the copy is a local file
 * read, no Transfer Engine hop); DFS-only objects are not promoted (as upstream).
 *
 * All functions run under the master's lock.
 */
#include "master_internal.h"

#include "extension.h"

#include "log.h"
#include "mooncake/errors.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Count-min sketch: CMS_ROWS rows of CMS_WIDTH saturating 8-bit counters. Every CMS_DECAY hits
 * every counter is halved, so old popularity fades. */
#define CMS_ROWS 4
#define CMS_WIDTH 4096u
#define CMS_DECAY (CMS_WIDTH * 8u)

/* A promotion. On p->promo->ring; obj->offload->promotion == this while obj != NULL. */
typedef struct mc_promotion {
    struct mc_promotion *prev, *next;
    mc_object_t *obj;               /* NULL: cancelled, waits for its client's report */
    const mc_offloader_t *executor; /* the client holding the file */
    uint64_t id, version, size, created_ms;
    uint64_t token;       /* the extent's fencing token, from its allocation */
    mc_replica_ref_t dst; /* the PROCESSING extent, when has_dst */
    uint8_t has_dst, taken;
} mc_promotion_t;

typedef struct mc_promotion_state {
    uint8_t cms[CMS_ROWS][CMS_WIDTH];
    uint64_t cms_hits;
    mc_promotion_t ring; /* sentinel */
    size_t count;        /* records on the ring */
    uint64_t next_id;
    uint64_t admitted, completed, completed_bytes, expired, failed, cancelled;
    uint64_t rejected_frequency, rejected_watermark, rejected_cap;
} mc_promotion_state_t;

static int active(const mc_master_t *m)
{
    return m->cfg.enable_offload && m->cfg.promotion_on_hit;
}

static mc_promotion_state_t *state(mc_master_t *m)
{
    if (!m->promo && active(m)) {
        m->promo = calloc(1, sizeof(*m->promo));
        if (m->promo)
            m->promo->ring.next = m->promo->ring.prev = &m->promo->ring;
    }
    return m->promo;
}

/* Counts a hit of key; returns the sketch's estimate of its hits (saturating at 255). */
static unsigned cms_hit(mc_promotion_state_t *ps, const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    unsigned est = 255;
    for (unsigned r = 0; r < CMS_ROWS; r++) {
        uint64_t x = (h + r * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
        uint8_t *c = &ps->cms[r][(x >> 32) & (CMS_WIDTH - 1)];
        if (*c < 255)
            (*c)++;
        est = *c < est ? *c : est;
    }
    if (++ps->cms_hits % CMS_DECAY == 0) {
        for (unsigned r = 0; r < CMS_ROWS; r++)
            for (unsigned i = 0; i < CMS_WIDTH; i++)
                ps->cms[r][i] >>= 1;
    }
    return est;
}

/* Gives p's extent up: freed when no copy into it can still run (never handed out, or its
 * client reported), else quarantined until its holder's fence (see the top of the file). */
static void extent_drop(mc_master_t *m, mc_promotion_t *p, int reported, uint64_t now)
{
    if (!p->has_dst)
        return;
    mc_segment_t *s = mc_master_segment_locked(m, p->dst.seg);
    if (s && p->taken && !reported)
        mc_master_extent_quarantine_locked(m, p->dst, p->token, now);
    else if (s)
        mc_alloc_free(s->alloc, p->dst.handle);
    p->has_dst = 0;
}

/* Unlinks and frees p: its extent is given up (extent_drop), its object (if any) forgets it. */
static void promo_free(mc_master_t *m, mc_promotion_t *p, int reported, uint64_t now)
{
    extent_drop(m, p, reported, now);
    if (p->obj && p->obj->offload)
        p->obj->offload->promotion = NULL;
    p->prev->next = p->next;
    p->next->prev = p->prev;
    m->promo->count--;
    free(p);
}

/* The client holding a LOCAL_DISK replica of o that takes tasks and has a segment here. */
static const mc_offloader_t *executor_of(const mc_master_t *m, const mc_object_t *o)
{
    for (unsigned i = 0; o->offload && i < o->offload->ndisk; i++) {
        const mc_disk_replica_t *d = &o->offload->disk[i];
        if (d->type != MC_REPLICA_LOCAL_DISK || !mc_offload_takes_tasks(d->owner))
            continue;
        for (size_t k = 0; k < m->seg_cap; k++) {
            if (m->segs[k] && m->segs[k]->offloader == d->owner)
                return d->owner;
        }
    }
    return NULL;
}

static uint64_t disk_version_of(const mc_object_t *o, const mc_offloader_t *owner)
{
    for (unsigned i = 0; o->offload && i < o->offload->ndisk; i++) {
        if (o->offload->disk[i].type == MC_REPLICA_LOCAL_DISK && o->offload->disk[i].owner == owner)
            return o->offload->disk[i].version;
    }
    return 0;
}

static void promotion_read_hit(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    if (!active(m) || o->nrep > 0 || o->size == 0 || !executor_of(m, o))
        return;
    mc_promotion_state_t *ps = state(m);
    if (!ps)
        return;
    if (cms_hit(ps, mc_object_key(o), o->key_len) < m->cfg.promotion_admission_threshold) {
        ps->rejected_frequency++;
        return;
    }
    uint64_t used = 0, capacity = 0;
    mc_master_usage_locked(m, &used, &capacity);
    uint64_t aligned = (o->size + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
    if (capacity == 0 ||
        (double)(used + aligned) > m->cfg.eviction_high_watermark_ratio * (double)capacity) {
        ps->rejected_watermark++;
        return;
    }
    if (o->pending || o->offload->promotion)
        return;
    if (ps->count >= m->cfg.promotion_queue_limit) {
        ps->rejected_cap++;
        return;
    }
    mc_promotion_t *p = calloc(1, sizeof(*p));
    if (!p)
        return;
    p->obj = o;
    p->executor = executor_of(m, o);
    p->id = ++ps->next_id;
    p->version = disk_version_of(o, p->executor);
    p->size = o->size;
    p->created_ms = now;
    p->next = &ps->ring;
    p->prev = ps->ring.prev;
    ps->ring.prev->next = p;
    ps->ring.prev = p;
    ps->count++;
    o->offload->promotion = p;
    ps->admitted++;
    MC_VLOG(1, "promotion of %.64s (%" PRIu64 " bytes) queued for client %s", mc_object_key(o),
            o->size, p->executor->client_id);
}

static void promotion_value_discarding(mc_master_t *m, mc_object_t *o)
{
    mc_promotion_t *p = o->offload ? o->offload->promotion : NULL;
    if (!p)
        return;
    o->offload->promotion = NULL;
    p->obj = NULL;
    m->promo->cancelled++;
    if (!p->taken)
        promo_free(m, p, 0, 0); /* nobody writes its extent (it has none) */
    /* else the extent stays, unpublished, until its client reports or the bound runs out */
}

static void promotion_object_moved(mc_object_t *n)
{
    if (n->offload && n->offload->promotion)
        n->offload->promotion->obj = n;
}

static void promotion_segment_gone(mc_master_t *m, uint32_t slot)
{
    if (!m->promo)
        return;
    for (mc_promotion_t *p = m->promo->ring.next, *next; p != &m->promo->ring; p = next) {
        next = p->next;
        if (!p->has_dst || p->dst.seg != slot)
            continue;
        p->has_dst = 0; /* the extent goes with the segment's allocator */
        if (p->obj)
            m->promo->cancelled++;
        promo_free(m, p, 0, 0); /* no extent left to give up */
    }
}

static void promotion_executor_gone(mc_master_t *m, const mc_offloader_t *off)
{
    if (!m->promo)
        return;
    for (mc_promotion_t *p = m->promo->ring.next, *next; p != &m->promo->ring; p = next) {
        next = p->next;
        if (p->executor != off)
            continue;
        if (p->obj)
            m->promo->cancelled++;
        p->executor = NULL;
        if (!p->has_dst) {
            promo_free(m, p, 0, 0);
            continue;
        }
        /* Taken: a copy may still be under way (a client leaving, or one only presumed dead),
         * so its extent stays, unpublished, until the bound or its segment's unmount. */
        if (p->obj)
            p->obj->offload->promotion = NULL;
        p->obj = NULL;
    }
}

static void promotion_sweep(mc_master_t *m, uint64_t now)
{
    if (!m->promo)
        return;
    for (mc_promotion_t *p = m->promo->ring.next, *next; p != &m->promo->ring; p = next) {
        next = p->next;
        if (now - p->created_ms < m->cfg.put_start_release_timeout_ms)
            continue;
        if (p->obj) {
            m->promo->expired++;
            MC_WARN("promotion of %.64s by client %s not reported within %" PRIu64
                    " ms; its memory replica is dropped (the object stays readable from disk)",
                    mc_object_key(p->obj), p->executor->client_id,
                    m->cfg.put_start_release_timeout_ms);
        }
        promo_free(m, p, 0, now); /* a taken extent is quarantined: its copy may still run */
    }
}

static uint64_t promotion_executor_backlog(const mc_master_t *m, const mc_offloader_t *off)
{
    uint64_t n = 0;
    if (!m->promo)
        return 0;
    for (const mc_promotion_t *p = m->promo->ring.next; p != &m->promo->ring; p = p->next)
        n += p->executor == off && p->obj && !p->taken;
    return n;
}

static void promotion_account(const mc_master_t *m, uint64_t *seg_used)
{
    if (!m->promo)
        return;
    for (const mc_promotion_t *p = m->promo->ring.next; p != &m->promo->ring; p = p->next) {
        const mc_segment_t *s = p->has_dst ? mc_master_segment_locked(m, p->dst.seg) : NULL;
        if (s)
            seg_used[p->dst.seg] += mc_alloc_extent_size(s->alloc, p->dst.handle);
    }
}

static void promotion_stats(mc_master_t *m, mc_master_stats_t *out)
{
    const mc_promotion_state_t *ps = m->promo;
    if (!ps)
        return;
    out->promotion_in_flight = ps->count;
    out->promotion_admitted = ps->admitted;
    out->promotion_completed = ps->completed;
    out->promotion_completed_bytes = ps->completed_bytes;
    out->promotion_expired = ps->expired;
    out->promotion_failed = ps->failed;
    out->promotion_cancelled = ps->cancelled;
    out->promotion_rejected_frequency = ps->rejected_frequency;
    out->promotion_rejected_watermark = ps->rejected_watermark;
    out->promotion_rejected_cap = ps->rejected_cap;
}

static void promotion_fini(mc_master_t *m)
{
    if (!m->promo)
        return;
    while (m->promo->ring.next != &m->promo->ring) {
        mc_promotion_t *p = m->promo->ring.next;
        p->has_dst = 0; /* the allocators are destroyed with their segments */
        promo_free(m, p, 0, 0);
    }
    free(m->promo);
    m->promo = NULL;
}

/* Allocates p's extent in one of its client's segments; 0 or MC_ERR_NO_AVAILABLE_HANDLE. */
static int alloc_dst(mc_master_t *m, mc_promotion_t *p, uint64_t *addr)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        mc_segment_t *s = m->segs[k];
        uint32_t handle;
        if (s && s->offloader == p->executor &&
            mc_alloc_alloc(s->alloc, p->size, NULL, addr, &handle) == 0) {
            p->dst = (mc_replica_ref_t){.seg = (uint32_t)k, .handle = handle};
            p->has_dst = 1;
            return 0;
        }
    }
    return MC_ERR_NO_AVAILABLE_HANDLE;
}

int mc_master_promotion_take(mc_master_t *m, const char *client_id, size_t max,
                             mc_promotion_task_cb cb, void *arg)
{
    if (!m || !client_id || !cb)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    const mc_offloader_t *off = mc_offload_find_locked(m, client_id);
    int n = 0;
    size_t cap = m->cfg.promotion_max_per_heartbeat ? m->cfg.promotion_max_per_heartbeat : 1;
    if (max > cap)
        max = cap;
    if (!off || !m->promo) {
        pthread_mutex_unlock(&m->lock);
        return off ? 0 : MC_ERR_CLIENT_NOT_FOUND;
    }
    for (mc_promotion_t *p = m->promo->ring.next, *next; p != &m->promo->ring && (size_t)n < max;
         p = next) {
        next = p->next;
        if (p->executor != off || !p->obj || p->taken)
            continue;
        mc_object_t *o = p->obj;
        uint64_t addr = 0;
        if (o->nrep > 0 || alloc_dst(m, p, &addr) != 0) {
            m->promo->failed += o->nrep == 0;
            MC_VLOG(1, "promotion of %.64s: no room in the segments of client %s", mc_object_key(o),
                    client_id);
            promo_free(m, p, 0, 0); /* no extent */
            continue;
        }
        p->token = mc_master_next_token_locked(m);
        mc_promotion_task_desc_t d = {.task_id = p->id,
                                      .key = mc_object_key(o),
                                      .size = p->size,
                                      .version = p->version,
                                      .address = addr,
                                      .has_checksum = o->has_checksum,
                                      .checksum = o->checksum,
                                      .fence_token = p->token,
                                      .epoch = mc_master_slot_epoch_locked(m, p->dst.seg)};
        if (cb(arg, &d) != 0) {
            extent_drop(m, p, 0, 0); /* not handed out: freed */
            break;
        }
        p->taken = 1;
        n++;
    }
    pthread_mutex_unlock(&m->lock);
    return n;
}

int mc_master_promotion_result(mc_master_t *m, const char *client_id, uint64_t task_id,
                               const char *key, int code)
{
    if (!m || !client_id || !key)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    const mc_offloader_t *off = mc_offload_find_locked(m, client_id);
    mc_promotion_t *p = NULL;
    for (mc_promotion_t *q = m->promo ? m->promo->ring.next : NULL; q && q != &m->promo->ring;
         q = q->next) {
        if (q->id == task_id) {
            p = q;
            break;
        }
    }
    int rc = 0;
    if (!p || !off || p->executor != off || !p->taken) {
        rc = MC_ERR_TASK_NOT_FOUND;
    } else if (!p->obj || strcmp(mc_object_key(p->obj), key) != 0) {
        rc = MC_ERR_TASK_NOT_FOUND; /* cancelled meanwhile: the copy is discarded */
        promo_free(m, p, 1, 0);     /* reported: its copy is over */
    } else if (code != 0 || p->obj->nrep != 0 || p->obj->rep_cap == 0 || !p->has_dst) {
        m->promo->failed++;
        MC_VLOG(1, "promotion of %.64s by client %s failed (%s)", key, client_id,
                mc_error_name(code));
        promo_free(m, p, 1, 0);
    } else {
        mc_object_t *o = p->obj;
        mc_segment_t *s = mc_master_segment_locked(m, p->dst.seg);
        mc_alloc_set_cookie(s->alloc, p->dst.handle, o);
        o->rep[o->nrep++] = p->dst;
        p->has_dst = 0; /* the object owns it now */
        mc_journal_set_locked(m, o);
        m->promo->completed++;
        m->promo->completed_bytes += o->size;
        m->evict_retry_at = 0; /* a new eviction candidate */
        promo_free(m, p, 1, 0);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* Promotion follows hits on disk-only values and the life of the offloaders that run it; its
 * state hangs off an object's offload state, so it comes before offload in the table. */
const mc_master_ext_t mc_promotion_extension = {
    .name = "promotion",
    .fini = promotion_fini,
    .value_discarding = promotion_value_discarding,
    .object_moved = promotion_object_moved,
    .segment_gone = promotion_segment_gone,
    .executor_gone = promotion_executor_gone,
    .executor_backlog = promotion_executor_backlog,
    .read_hit = promotion_read_hit,
    .sweep = promotion_sweep,
    .stats = promotion_stats,
    .account = promotion_account,
};
