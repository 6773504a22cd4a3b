/*
 * eviction.c — which objects the master drops when memory runs short (upstream's BatchEvict).
 *
 * A pass is due when used/capacity exceeds eviction_high_watermark_ratio, or when a put could not
 * be placed anywhere. "Used" counts live extents only: fenced ones (of values dropped while being
 * read, freed as soon as their readers are done) are no reason to evict anything live. A pass
 * evicts the fraction t = max(eviction_ratio, used_ratio - high_wm + eviction_ratio) of the
 * candidates (at least one): COMPLETE objects with bytes, not being read (no read lease that is
 * neither released nor over), not hard-pinned, no upsert in flight. Least recently put or read
 * first — upstream's order: its put grants a lease that is over at once, its reads one that ends
 * a TTL later, and it evicts the earliest lease end first — and objects under an active soft pin
 * only after every other candidate, and only when allow_evict_soft_pinned_objects. Evicted
 * extents are freed at once (no reader holds them).
 *
 * With offload, objects whose memory is being offloaded are pinned (never candidates), and
 * objects that already have a disk replica come first (tier 0): evicting them only drops their
 * memory replicas — they stay readable from disk. With offload_on_evict, a picked object without a
 * disk replica is queued for offload instead of dropped (it is dropped by a later pass, once its
 * disk replica exists).
 *
 * Selection is a quickselect of the k oldest (O(candidates)), not a full sort: with a million
 * objects a pass costs one scan of the index.
 */
#include "master_internal.h"

#include "log.h"

#include <math.h>
#include <stdlib.h>

static int cand_older(const mc_evict_cand_t *a, const mc_evict_cand_t *b)
{
    if (a->tier != b->tier)
        return a->tier < b->tier;
    return a->access < b->access;
}

static void cand_swap(mc_evict_cand_t *a, mc_evict_cand_t *b)
{
    mc_evict_cand_t t = *a;
    *a = *b;
    *b = t;
}

static mc_evict_cand_t median_of_three(const mc_evict_cand_t *a, const mc_evict_cand_t *b,
                                       const mc_evict_cand_t *c)
{
    if (cand_older(a, b)) {
        if (cand_older(b, c))
            return *b;
        return cand_older(a, c) ? *c : *a;
    }
    if (cand_older(a, c))
        return *a;
    return cand_older(b, c) ? *c : *b;
}

/* Reorders c[0..n) so that c[0..k) are the k oldest (in no particular order). */
static void select_oldest(mc_evict_cand_t *c, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        mc_evict_cand_t pivot = median_of_three(&c[lo], &c[lo + (hi - lo) / 2], &c[hi - 1]);
        /* Three-way partition: [lo,lt) older than pivot, [lt,gt) equal, [gt,hi) younger. */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (cand_older(&c[i], &pivot))
                cand_swap(&c[lt++], &c[i++]);
            else if (cand_older(&pivot, &c[i]))
                cand_swap(&c[i], &c[--gt]);
            else
                i++;
        }
        if (k < lt)
            hi = lt;
        else if (k <= gt)
            return;
        else
            lo = gt;
    }
}

static int ensure_cand_room(mc_master_t *m, size_t need)
{
    if (need <= m->cand_cap)
        return 0;
    size_t cap = m->cand_cap ? m->cand_cap : 1024;
    while (cap < need)
        cap *= 2;
    mc_evict_cand_t *c = realloc(m->cand, cap * sizeof(*c));
    if (!c)
        return -1;
    m->cand = c;
    m->cand_cap = cap;
    return 0;
}

/*
 * Fills m->cand: ordinary candidates at the front (*n_plain), soft-pinned ones at the back
 * (*n_soft, in m->cand[cap - n_soft .. cap)).
 */
static int collect_candidates(mc_master_t *m, uint64_t now, size_t *n_plain, size_t *n_soft)
{
    *n_plain = *n_soft = 0;
    if (ensure_cand_room(m, mc_index_count(&m->index)) != 0)
        return -1;
    size_t cursor = 0;
    mc_object_t *o;
    while ((o = mc_index_next(&m->index, &cursor)) != NULL) {
        if (!o->complete || o->pending || o->hard_pinned || o->size == 0 ||
            mc_object_being_read(o, now) || o->nrep == 0 || mc_offload_pinned(o))
            continue;
        mc_evict_cand_t c = {.access =
                                 o->access_ms > o->complete_ms ? o->access_ms : o->complete_ms,
                             .obj = o,
                             .tier = mc_offload_ndisk(o) > 0 ? 0 : 1};
        if (o->soft_pin_until <= now)
            m->cand[(*n_plain)++] = c;
        else if (m->cfg.allow_evict_soft_pinned_objects)
            m->cand[m->cand_cap - ++(*n_soft)] = c;
    }
    return 0;
}

/* Evicts the k oldest of c[0..n); returns how many gave their memory back. */
static size_t evict_first(mc_master_t *m, mc_evict_cand_t *c, size_t n, size_t k, uint64_t now)
{
    if (k < n)
        select_oldest(c, n, k);
    size_t freed = 0;
    for (size_t i = 0; i < k; i++) {
        mc_object_t *o = c[i].obj;
        uint64_t size = o->size;
        if (mc_offload_ndisk(o) > 0) {
            mc_master_drop_memory_locked(m, o, now);
            freed++;
            __atomic_fetch_add(&m->ops.evicted_bytes, size, __ATOMIC_RELAXED);
        } else if (!mc_master_evict_instead_locked(m, o, now)) {
            mc_master_drop_value_locked(m, o, now);
            freed++;
            __atomic_fetch_add(&m->ops.evicted_bytes, size, __ATOMIC_RELAXED);
        }
    }
    return freed;
}

size_t mc_eviction_run_locked(mc_master_t *m, uint64_t now, int needed, int *ran)
{
    MC_MASTER_ASSERT_LOCKED(m);
    uint64_t used, capacity;
    if (ran)
        *ran = 0;
    mc_master_usage_locked(m, &used, &capacity);
    if (capacity == 0)
        return 0;
    used -= m->fenced_bytes <= used ? m->fenced_bytes : used;
    double ratio = (double)used / (double)capacity;
    double high = m->cfg.eviction_high_watermark_ratio;
    if (!needed && !(ratio > high))
        return 0;
    /* While restored records wait for their owners to re-mount, the mounted segments carry more
     * than their share of the restored objects: no watermark pass until they are all back (or
     * dropped); a put that finds no room still evicts. */
    if (!needed && mc_master_eviction_held_locked(m))
        return 0;
    if (ran)
        *ran = 1;
    m->eviction_runs++;
    __atomic_fetch_add(&m->ops.evictions_attempted, 1, __ATOMIC_RELAXED);

    size_t n_plain, n_soft;
    if (collect_candidates(m, now, &n_plain, &n_soft) != 0) {
        MC_ERROR("eviction: out of memory collecting candidates");
        return 0;
    }
    size_t total = n_plain + n_soft;
    if (total == 0)
        return 0;
    double t = fmax(m->cfg.eviction_ratio, ratio - high + m->cfg.eviction_ratio);
    if (t > 1.0)
        t = 1.0;
    size_t k = (size_t)ceil((double)total * t - 1e-9); /* 1e-9: 0.05 * 20 is 1, not 2 */
    if (k == 0)
        k = 1;
    if (k > total)
        k = total;

    size_t evicted = evict_first(m, m->cand, n_plain, k < n_plain ? k : n_plain, now);
    if (k > n_plain)
        evicted += evict_first(m, m->cand + m->cand_cap - n_soft, n_soft, k - n_plain, now);
    m->evicted_keys += evicted;
    __atomic_fetch_add(&m->ops.evictions_successful, evicted > 0, __ATOMIC_RELAXED);
    MC_VLOG(1, "eviction: used %.3f of capacity, %zu candidates (%zu soft-pinned), evicted %zu",
            ratio, total, n_soft, evicted);
    return evicted;
}
