/*
 * segments.c — mounted segments: mount and remount, unmount (at once, or after a grace period
 * during which no put is placed there), the range fences that keep a mount off memory still
 * under read leases of its previous mount, the write-fence pings that let quarantined extents
 * go (extents.c), mount epochs, and the replica descriptors clients are shown.
 *
 * Invariants (mc_segment_t, mc_fence_t): a slot of m->segs is NULL or a mounted segment, which
 * replicas name by slot; m->seg_count counts them and m->largest_capacity is the largest of
 * their allocators' capacities; mounted segments of one name do not overlap; a mount's gen is
 * unique, and its epoch_gen is that of the owner's segment of the same name already mounted, if
 * any. Unmounting takes everything in the segment away from its objects (their extents go with
 * the memory), revokes the puts with an extent there and forgets the deferred frees there.
 *
 * Layer: above objects.c, extents.c, clients.c (a mount registers its client) and
 * master_service.c; puts.c, reads.c, stats.c and monitor.c call it.
 */
#include "master_internal.h"

#include "core_internal.h"
#include "log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- segments -------------------------------------------------------------------------------- */

static int segment_find(const mc_master_t *m, const char *id)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k] && strcmp(m->segs[k]->info.id, id) == 0)
            return (int)k;
    }
    return -1;
}

void mc_master_usage_locked(mc_master_t *m, uint64_t *used, uint64_t *capacity)
{
    MC_MASTER_ASSERT_LOCKED(m);
    *used = *capacity = 0;
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k]) {
            *used += mc_alloc_used(m->segs[k]->alloc);
            *capacity += m->segs[k]->info.size;
        }
    }
}

/* Recomputes m->largest_capacity after a mount or unmount. */
static void update_largest_capacity(mc_master_t *m)
{
    m->largest_capacity = 0;
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k] && mc_alloc_capacity(m->segs[k]->alloc) > m->largest_capacity)
            m->largest_capacity = mc_alloc_capacity(m->segs[k]->alloc);
    }
}

int mc_master_replicas_use_segment(const mc_replica_ref_t *rep, unsigned n, uint32_t slot)
{
    for (unsigned i = 0; i < n; i++) {
        if (rep[i].seg == slot)
            return 1;
    }
    return 0;
}

/* ---- mount / unmount ------------------------------------------------------------------------- */

static int segment_info_ok(const mc_segment_info_t *seg)
{
    return mc_master_text_ok(seg->id, sizeof(seg->id)) &&
           mc_master_text_ok(seg->name, sizeof(seg->name)) &&
           strnlen(seg->protocol, sizeof(seg->protocol)) < sizeof(seg->protocol) && seg->size > 0 &&
           seg->size <= UINT64_MAX - seg->base;
}

static int segment_overlaps(const mc_master_t *m, const mc_segment_info_t *seg)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        const mc_segment_info_t *s = m->segs[k] ? &m->segs[k]->info : NULL;
        if (s && strcmp(s->name, seg->name) == 0 && seg->base < s->base + s->size &&
            s->base < seg->base + seg->size)
            return 1;
    }
    return 0;
}

/* A live fence over [seg->base, +size) of seg->name, or NULL. */
static const mc_fence_t *fence_find(const mc_master_t *m, const mc_segment_info_t *seg,
                                    uint64_t now)
{
    for (size_t i = 0; i < m->fence_count; i++) {
        const mc_fence_t *f = &m->fences[i];
        if (f->until > now && strcmp(f->name, seg->name) == 0 && seg->base < f->base + f->size &&
            f->base < seg->base + seg->size)
            return f;
    }
    return NULL;
}

/* Fences segment s's range until `until` (see mc_fence_t). */
static void fence_add(mc_master_t *m, const mc_segment_t *s, uint64_t until)
{
    if (m->fence_count == m->fence_cap) {
        size_t cap = m->fence_cap ? m->fence_cap * 2 : 8;
        mc_fence_t *v = realloc(m->fences, cap * sizeof(*v));
        if (!v) {
            MC_ERROR("out of memory fencing segment %s: a reader inside its lease may see the "
                     "range's next occupant (its checksum still catches it)",
                     s->info.id);
            return;
        }
        m->fences = v;
        m->fence_cap = cap;
    }
    mc_fence_t *f = &m->fences[m->fence_count++];
    snprintf(f->name, sizeof(f->name), "%s", s->info.name);
    f->base = s->info.base;
    f->size = s->info.size;
    f->until = until;
}

/* A free slot index, growing the table; -1 when out of memory. */
static int segment_free_slot(mc_master_t *m)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (!m->segs[k])
            return (int)k;
    }
    size_t cap = m->seg_cap ? m->seg_cap * 2 : 8;
    mc_segment_t **v = realloc(m->segs, cap * sizeof(*v));
    if (!v)
        return -1;
    memset(v + m->seg_cap, 0, (cap - m->seg_cap) * sizeof(*v));
    int slot = (int)m->seg_cap;
    m->segs = v;
    m->seg_cap = cap;
    return slot;
}

static int mount_locked(mc_master_t *m, const char *client_id, const mc_segment_info_t *seg,
                        uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    if (seg->size > m->cfg.max_segment_size) {
        m->mounts_refused++;
        MC_WARN("mount of segment %s (%s) by %s refused: %" PRIu64 " bytes is above the %" PRIu64
                "-byte limit (--max_segment_size)",
                seg->id, seg->name, client_id, seg->size, m->cfg.max_segment_size);
        return MC_ERR_INVALID_PARAMS;
    }
    int rc = mc_master_client_touch_locked(m, client_id, now);
    if (rc != 0)
        return rc;
    int k = segment_find(m, seg->id);
    if (k >= 0) {
        if (strcmp(m->segs[k]->info.client_id, client_id) == 0)
            return 0;
        MC_WARN("mount of segment %s by %s refused: it belongs to client %s", seg->id, client_id,
                m->segs[k]->info.client_id);
        return MC_ERR_SEGMENT_ALREADY_EXISTS;
    }
    const mc_fence_t *f = fence_find(m, seg, now);
    if (f) {
        MC_INFO("mount of segment %s (%s) deferred: read leases on its previous mount's memory "
                "run for %" PRIu64 " ms more",
                seg->id, seg->name, f->until - now);
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    if (segment_overlaps(m, seg)) {
        MC_WARN("mount of segment %s refused: [0x%" PRIx64 ", +%" PRIu64 ") of %s overlaps a "
                "mounted segment",
                seg->id, seg->base, seg->size, seg->name);
        return MC_ERR_SEGMENT_ALREADY_EXISTS;
    }
    int slot = segment_free_slot(m);
    mc_segment_t *s = slot >= 0 ? calloc(1, sizeof(*s)) : NULL;
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    rc = mc_alloc_create(seg->base, seg->size, &s->alloc);
    if (rc != 0) {
        free(s);
        return rc;
    }
    s->info = *seg;
    snprintf(s->info.client_id, sizeof(s->info.client_id), "%s", client_id);
    s->info.used = 0;
    s->gen = ++m->mount_gen;
    s->epoch_gen = s->gen;
    for (size_t k = 0; k < m->seg_cap; k++) {
        const mc_segment_t *o = m->segs[k];
        if (o && !strcmp(o->info.client_id, client_id) && !strcmp(o->info.name, seg->name)) {
            s->epoch_gen = o->epoch_gen; /* the owner's engine holds one epoch */
            break;
        }
    }
    m->segs[slot] = s;
    m->seg_count++;
    update_largest_capacity(m);
    MC_EXT_EACH(m, segment_mounted, m, (uint32_t)slot); /* before any put can allocate in it */
    MC_INFO("mounted segment %s (%s, %" PRIu64 " bytes, %s) for client %s", seg->id, seg->name,
            seg->size, seg->protocol, client_id);
    return 0;
}

int mc_master_mount_segment(mc_master_t *m, const char *client_id, const mc_segment_info_t *seg)
{
    if (!m || !mc_master_client_id_ok(client_id) || !seg || !segment_info_ok(seg))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    int rc = mount_locked(m, client_id, seg, mc_master_now_locked(m));
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_remount_segments(mc_master_t *m, const char *client_id, const mc_segment_info_t *segs,
                               size_t n)
{
    if (!m || !mc_master_client_id_ok(client_id) || (n > 0 && !segs))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        if (!segment_info_ok(&segs[i]))
            return MC_ERR_INVALID_PARAMS;
    }
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    int rc = mc_master_client_touch_locked(m, client_id,
                                           now); /* registers a client with no segments too */
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = mount_locked(m, client_id, &segs[i], now);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

typedef struct owner_list {
    mc_object_t **v;
    size_t n;
} owner_list_t;

static void collect_owner(void *arg, uint32_t handle, uint64_t addr, uint64_t size, void *cookie)
{
    owner_list_t *list = arg;
    if (cookie) /* NULL: a deferred free */
        list->v[list->n++] = cookie;
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (mc_object_t *const *)a;
    uintptr_t y = (uintptr_t) * (mc_object_t *const *)b;
    return (x > y) - (x < y);
}

/* Takes everything in segment `slot` away from `o`. */
static void detach_segment(mc_master_t *m, mc_object_t *o, uint32_t slot, int counted)
{
    mc_pending_put_t *p = o->pending;
    if (p && p->size > 0 && mc_master_replicas_use_segment(p->rep, p->nrep, slot)) {
        if (mc_master_pending_revoke_locked(m, o, counted, slot))
            return;
    }
    if (!o->complete || o->size == 0 || !mc_master_replicas_use_segment(o->rep, o->nrep, slot))
        return;
    mc_master_replica_lost_locked(m, o, slot);
    unsigned kept = 0;
    for (unsigned i = 0; i < o->nrep; i++) {
        if (o->rep[i].seg == slot)
            mc_master_extent_free_locked(m,
                                         o->rep[i]); /* the memory is going away with the segment */
        else
            o->rep[kept++] = o->rep[i];
    }
    o->nrep = (uint8_t)kept;
    if (kept == 0 && mc_offload_ndisk(o) == 0)
        mc_master_value_lost_locked(m, o); /* else it stays readable from disk */
    else
        mc_journal_set_locked(m, o);
}

/*
 * Unmounts the segment in `slot`: objects lose their replicas there (and are deleted when none is
 * left), puts with an extent there are revoked, deferred frees there are forgotten.
 */
int mc_master_unmount_locked(mc_master_t *m, uint32_t slot, int counted)
{
    MC_MASTER_ASSERT_LOCKED(m);
    mc_segment_t *s = m->segs[slot];
    owner_list_t owners = {.v = malloc((mc_alloc_extent_count(s->alloc) + 1) * sizeof(void *))};
    if (!owners.v)
        return MC_ERR_INTERNAL_ERROR;
    mc_alloc_foreach_used(s->alloc, collect_owner, &owners);
    /* An object may own two extents here (its value and its upsert in progress): visit once. */
    qsort(owners.v, owners.n, sizeof(owners.v[0]), ptr_cmp);
    /* Readers inside a lease may still copy from this memory: fence the range until the last
     * such lease (and every deferred free here) has ended. */
    uint64_t now = mc_master_now_locked(m), until = 0;
    for (size_t i = 0; i < owners.n; i++) {
        const mc_object_t *o = owners.v[i];
        if (o->complete && mc_master_replicas_use_segment(o->rep, o->nrep, slot) &&
            o->lease_timeout > until)
            until = o->lease_timeout;
    }
    for (size_t i = 0; i < m->deferred_count; i++) {
        if (m->deferred[i].seg == slot && m->deferred[i].free_at > until)
            until = m->deferred[i].free_at;
    }
    if (until > now)
        fence_add(m, s, until);
    for (size_t i = 0; i < owners.n; i++) {
        if (i == 0 || owners.v[i] != owners.v[i - 1])
            detach_segment(m, owners.v[i], slot, counted);
    }
    free(owners.v);

    size_t kept = 0;
    for (size_t i = 0; i < m->deferred_count; i++) {
        if (m->deferred[i].seg != slot)
            m->deferred[kept++] = m->deferred[i];
        else
            m->fenced_bytes -= mc_alloc_extent_size(s->alloc, m->deferred[i].handle);
    }
    m->deferred_count = kept;
    MC_EXT_EACH(m, segment_gone, m, slot); /* extents extensions hold there go with it */

    MC_INFO("unmounted segment %s (%s) of client %s: %zu objects affected", s->info.id,
            s->info.name, s->info.client_id, owners.n);
    mc_alloc_destroy(s->alloc);
    free(s->fence_tokens);
    free(s->fence_seqs);
    free(s);
    m->segs[slot] = NULL;
    m->seg_count--;
    update_largest_capacity(m);
    return 0;
}

int mc_master_unmount_segment(mc_master_t *m, const char *client_id, const char *segment_id)
{
    if (!m || !segment_id)
        return MC_ERR_INVALID_PARAMS;
    if (!client_id || !client_id[0])
        return MC_ERR_ILLEGAL_CLIENT; /* only the owner unmounts, and it names itself */
    pthread_mutex_lock(&m->lock);
    int k = segment_find(m, segment_id);
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    if (k >= 0 && strcmp(m->segs[k]->info.client_id, client_id) == 0)
        rc = mc_master_unmount_locked(m, (uint32_t)k, 0);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_graceful_unmount_segment(mc_master_t *m, const char *client_id,
                                       const char *segment_id, uint64_t grace_period_ms)
{
    if (grace_period_ms == 0)
        return mc_master_unmount_segment(m, client_id, segment_id);
    if (!m || !segment_id)
        return MC_ERR_INVALID_PARAMS;
    if (!client_id || !client_id[0])
        return MC_ERR_ILLEGAL_CLIENT;
    pthread_mutex_lock(&m->lock);
    int k = segment_find(m, segment_id);
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    if (k >= 0 && strcmp(m->segs[k]->info.client_id, client_id) == 0) {
        mc_segment_t *s = m->segs[k];
        if (!s->drain_until) {
            uint64_t now = mc_master_now_locked(m);
            s->drain_until =
                grace_period_ms > UINT64_MAX - now ? UINT64_MAX : now + grace_period_ms;
            MC_INFO("segment %s (%s) of client %s drains: unmounted in %" PRIu64 " ms", s->info.id,
                    s->info.name, client_id, grace_period_ms);
        }
        rc = 0;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* ---- write fences (the quarantine of extents.c) ---------------------------------------------- */

typedef struct fence_item {
    uint64_t seq, token;
} fence_item_t;

static int fence_item_cmp(const void *a, const void *b)
{
    uint64_t x = ((const fence_item_t *)a)->seq, y = ((const fence_item_t *)b)->seq;
    return (x > y) - (x < y);
}

int mc_master_fence_ping(mc_master_t *m, const char *client_id, uint64_t view, uint64_t acked,
                         uint64_t *tokens, size_t capacity, size_t *n, uint64_t *upto)
{
    if (!m || !mc_master_client_id_ok(client_id) || !n || !upto || (capacity > 0 && !tokens))
        return MC_ERR_INVALID_PARAMS;
    *n = 0;
    *upto = 0;
    pthread_mutex_lock(&m->lock);
    /* A confirmation names the master instance it was for: another instance's sequences mean
     * nothing here. Nor can it confirm what was not asked yet. */
    if (view != m->view_version)
        acked = 0;
    if (acked > m->fence_seq)
        acked = m->fence_seq;
    size_t pending = 0;
    int freed_any = 0;
    for (size_t k = 0; k < m->seg_cap; k++) {
        mc_segment_t *s = m->segs[k];
        if (!s || strcmp(s->info.client_id, client_id) != 0)
            continue;
        if (acked > s->fence_acked) {
            s->fence_acked = acked;
            freed_any = 1;
        }
        size_t kept = 0;
        for (size_t i = 0; i < s->fence_count; i++) {
            if (s->fence_seqs[i] > s->fence_acked) {
                s->fence_tokens[kept] = s->fence_tokens[i];
                s->fence_seqs[kept++] = s->fence_seqs[i];
            }
        }
        s->fence_count = kept;
        pending += kept;
    }
    int rc = 0;
    if (pending > 0 && capacity > 0) {
        fence_item_t *v = malloc(pending * sizeof(*v));
        if (v) {
            size_t c = 0;
            for (size_t k = 0; k < m->seg_cap; k++) {
                const mc_segment_t *s = m->segs[k];
                if (!s || strcmp(s->info.client_id, client_id) != 0)
                    continue;
                for (size_t i = 0; i < s->fence_count; i++)
                    v[c++] = (fence_item_t){s->fence_seqs[i], s->fence_tokens[i]};
            }
            /* The oldest first: a confirmation of `upto` covers every sequence up to it. */
            qsort(v, c, sizeof(*v), fence_item_cmp);
            for (size_t i = 0; i < c && i < capacity; i++) {
                tokens[i] = v[i].token;
                *upto = v[i].seq;
                (*n)++;
            }
            free(v);
        } else {
            rc = MC_ERR_INTERNAL_ERROR;
        }
    }
    if (freed_any)
        mc_master_deferred_sweep_locked(m, mc_master_now_locked(m));
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* ---- epochs and replica descriptors ---------------------------------------------------------- */

/* A mount's epoch: its epoch generation (its own, or shared with the owner's segments of the
 * same name mounted before it), above this master instance's token so that epochs of two master
 * lifetimes never collide. */
static uint64_t segment_epoch(const mc_master_t *m, const mc_segment_t *s)
{
    return ((m->view_version >> 20) & 0xffffffffull) << 32 | s->epoch_gen;
}

uint64_t mc_master_slot_epoch_locked(const mc_master_t *m, uint32_t slot)
{
    MC_MASTER_ASSERT_LOCKED(m);
    return segment_epoch(m, mc_master_segment_locked(m, slot));
}

uint64_t mc_master_segment_epoch(mc_master_t *m, const char *segment_id)
{
    if (!m || !segment_id)
        return 0;
    pthread_mutex_lock(&m->lock);
    int k = segment_find(m, segment_id);
    uint64_t epoch = k >= 0 ? segment_epoch(m, m->segs[k]) : 0;
    pthread_mutex_unlock(&m->lock);
    return epoch;
}

static void fill_desc(const mc_master_t *m, mc_replica_ref_t ref, uint64_t size,
                      mc_replica_status_t status, mc_replica_desc_t *out)
{
    const mc_segment_t *s = mc_master_segment_locked(m, ref.seg);
    memset(out, 0, sizeof(*out));
    out->epoch = segment_epoch(m, s);
    out->type = MC_REPLICA_MEMORY;
    out->status = status;
    snprintf(out->segment_name, sizeof(out->segment_name), "%s", s->info.name);
    out->address = size > 0 ? mc_alloc_extent_addr(s->alloc, ref.handle) : s->info.base;
    out->size = size;
}

void mc_master_fill_desc_locked(const mc_master_t *m, mc_replica_ref_t ref, uint64_t size,
                                mc_replica_status_t status, mc_replica_desc_t *out)
{
    MC_MASTER_ASSERT_LOCKED(m);
    fill_desc(m, ref, size, status, out);
}

/* A 0-byte value's nominal replica is shown only while its segment is still the one it named. */
static int replica_visible(const mc_master_t *m, mc_replica_ref_t ref, uint64_t size)
{
    if (size > 0)
        return 1;
    const mc_segment_t *s = mc_master_segment_locked(m, ref.seg);
    return s && s->gen == ref.handle;
}

/* Writes up to `capacity` descriptors; returns how many replicas there are. */
size_t mc_master_fill_descs_locked(const mc_master_t *m, const mc_replica_ref_t *rep, unsigned nrep,
                                   uint64_t size, mc_replica_status_t status,
                                   mc_replica_desc_t *out, size_t capacity)
{
    MC_MASTER_ASSERT_LOCKED(m);
    size_t n = 0;
    for (unsigned i = 0; i < nrep; i++) {
        if (!replica_visible(m, rep[i], size))
            continue;
        if (n < capacity)
            fill_desc(m, rep[i], size, status, &out[n]);
        n++;
    }
    return n;
}
