/*
 * master_service.c — the Master Service core (master_service.h): segments and their allocators,
 * the client table and its liveness, placement, the put/upsert protocol, reads and leases,
 * removal, deferred frees, stats, and the two background threads. Eviction policy is in
 * eviction.c, offload tasks and disk replicas in offload.c; the state they share is in
 * master_internal.h.
 *
 * One mutex guards all state: every operation is a few hash probes and allocator steps, so
 * sharding would buy little below millions of operations per second and cost clarity. The only
 * O(objects) work under the lock is an eviction pass and the stats scan; remove_all and
 * remove_by_regex take the lock one slice of the index at a time and match keys outside it.
 *
 * How a value's extents are released depends on who may still read them. A reader holds a read
 * lease from GetReplicaList until it releases it (its transfer is done) or the lease runs out;
 * extents of a value that is removed, evicted or replaced while readers hold leases go on the
 * deferred-free list (a fence) and are freed when the last of them releases or the leases end;
 * otherwise at once. Upstream's lease (lease_timeout, granted by exist and get for the TTL
 * whatever the reader does) only refuses a Remove without force. Extents of puts in progress are
 * invisible to readers and freed at once on revoke.
 */
#include "master_internal.h"

#include "extension.h"
#include "key_regex.h"
#include "log.h"
#include "net.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- configuration, clock, small helpers ---------------------------------------------------- */

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

#define EXT_EACH(m, hook, ...)                                                                     \
    do {                                                                                           \
        for (const mc_master_ext_t *const *x_ = (m)->ext; *x_; x_++) {                             \
            if ((*x_)->hook)                                                                       \
                (*x_)->hook(__VA_ARGS__);                                                          \
        }                                                                                          \
    } while (0)

void mc_master_replica_lost_locked(mc_master_t *m, mc_object_t *o, uint32_t slot)
{
    EXT_EACH(m, replica_lost, m, o, slot);
}

void mc_master_executor_gone_locked(mc_master_t *m, const struct mc_offloader *off)
{
    EXT_EACH(m, executor_gone, m, off);
}

uint64_t mc_master_executor_backlog_locked(const mc_master_t *m, const struct mc_offloader *off)
{
    uint64_t n = 0;
    for (const mc_master_ext_t *const *x = m->ext; *x; x++)
        n += (*x)->executor_backlog ? (*x)->executor_backlog(m, off) : 0;
    return n;
}

int mc_master_evict_instead_locked(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->evict_instead && (*x)->evict_instead(m, o, now))
            return 1;
    }
    return 0;
}

int mc_master_eviction_held_locked(const mc_master_t *m)
{
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->holds_eviction && (*x)->holds_eviction(m))
            return 1;
    }
    return 0;
}

static int ext_hides_key(mc_master_t *m, const char *key, size_t len)
{
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->hides_key && (*x)->hides_key(m, key, len))
            return 1;
    }
    return 0;
}

static size_t ext_fill_descs(const mc_master_t *m, const mc_object_t *o, mc_replica_desc_t *out,
                             size_t capacity, size_t n)
{
    for (const mc_master_ext_t *const *x = m->ext; *x; x++) {
        if ((*x)->fill_descs)
            n = (*x)->fill_descs(m, o, out, capacity, n);
    }
    return n;
}

/* Milliseconds from `since` to `now`; 0 if a test clock went backwards. */
static uint64_t elapsed_ms(uint64_t now, uint64_t since)
{
    return now > since ? now - since : 0;
}

static uint64_t align_up(uint64_t size)
{
    return (size + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
}

static uint64_t next_random(mc_master_t *m)
{
    uint64_t x = m->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    m->rng = x;
    return x;
}

/* Length of a valid key, or MC_ERR_INVALID_KEY. */
static int64_t key_length(const char *key)
{
    if (!key)
        return MC_ERR_INVALID_KEY;
    size_t n = strnlen(key, MC_MAX_KEY_LEN + 1);
    if (n == 0 || n > MC_MAX_KEY_LEN)
        return MC_ERR_INVALID_KEY;
    return (int64_t)n;
}

/* A NUL-terminated, non-empty string that fits in `cap` bytes. */
static int text_ok(const char *s, size_t cap)
{
    return s && s[0] && strnlen(s, cap) < cap;
}

static int client_id_ok(const char *id)
{
    return text_ok(id, MC_CLIENT_ID_MAX);
}

/* ---- segments -------------------------------------------------------------------------------- */

static mc_segment_t *segment_at(const mc_master_t *m, uint32_t slot)
{
    return mc_master_segment_locked(m, slot);
}

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

/* ---- extents --------------------------------------------------------------------------------- */

static void extent_free(mc_master_t *m, mc_replica_ref_t ref)
{
    int rc = mc_alloc_free(segment_at(m, ref.seg)->alloc, ref.handle);
    assert(rc == 0);
    (void)rc;
}

/* Appends a deferred-free entry (its extent's cookie already cleared) and counts it fenced. */
static void deferred_push(mc_master_t *m, mc_deferred_free_t e)
{
    mc_alloc_t *a = segment_at(m, e.seg)->alloc;
    if (m->deferred_count == m->deferred_cap) {
        size_t cap = m->deferred_cap ? m->deferred_cap * 2 : 64;
        mc_deferred_free_t *d = realloc(m->deferred, cap * sizeof(*d));
        if (!d) {
            /* Freeing now could hand a leased reader's bytes (or a revoked put's late ones) to
             * a writer; keeping the extent until its segment is unmounted only costs space. */
            MC_ERROR("out of memory deferring a free: extent kept until its segment unmounts");
            return;
        }
        m->deferred = d;
        m->deferred_cap = cap;
    }
    m->deferred[m->deferred_count++] = e;
    if (e.jseq == UINT64_MAX)
        m->j_untagged++;
    m->fenced_bytes += mc_alloc_extent_size(a, e.handle);
}

/* Frees the extent now, or, while readers hold leases on `o`'s value, once they are done. */
static void extent_release(mc_master_t *m, mc_replica_ref_t ref, const mc_object_t *o, uint64_t now)
{
    int read = mc_object_being_read(o, now);
    if (!read && !m->journal.set) {
        extent_free(m, ref);
        return;
    }
    mc_alloc_set_cookie(segment_at(m, ref.seg)->alloc, ref.handle, NULL);
    /* With a journal, the extent also waits for the entry that drops it to be durable
     * (journal.h: the release gate); the entry tags it when it is assigned. */
    deferred_push(m, (mc_deferred_free_t){.seg = ref.seg,
                                          .handle = ref.handle,
                                          .readers = read ? o->readers : 0,
                                          .lease_id = read ? o->read_lease_id : 0,
                                          .free_at = read ? o->read_until : 0,
                                          .jseq = m->journal.set ? UINT64_MAX : 0});
}

/* A fencing token: unique, and above every token an earlier master instance handed out (they
 * are nanoseconds of the wall clock, bumped past the last one), so an owner that still refuses
 * an old token never refuses a new put's. */
uint64_t mc_master_next_token_locked(mc_master_t *m)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    m->last_token = t > m->last_token ? t : m->last_token + 1;
    return m->last_token;
}

/*
 * A revoked put's extent on a live segment: the put's bytes may still arrive (its owner was
 * stalled with them queued, or a same-host writer stopped mid-copy), so the extent is freed
 * only after the segment's owner confirmed a write fence refusing the put's token (its ping
 * carries the confirmation; mc_master_fence_ping). Until then it counts as fenced memory.
 */
void mc_master_extent_quarantine_locked(mc_master_t *m, mc_replica_ref_t ref, uint64_t token,
                                        uint64_t now)
{
    mc_segment_t *s = segment_at(m, ref.seg);
    if (s->fence_count == s->fence_cap) {
        size_t cap = s->fence_cap ? s->fence_cap * 2 : 16;
        uint64_t *t = realloc(s->fence_tokens, cap * sizeof(*t));
        if (t)
            s->fence_tokens = t;
        uint64_t *q = t ? realloc(s->fence_seqs, cap * sizeof(*q)) : NULL;
        if (!q) {
            MC_ERROR("out of memory fencing a revoked put: its extent is kept until segment %s "
                     "unmounts",
                     s->info.id);
            mc_alloc_set_cookie(s->alloc, ref.handle, NULL);
            return;
        }
        s->fence_seqs = q;
        s->fence_cap = cap;
    }
    uint64_t seq = ++m->fence_seq;
    s->fence_tokens[s->fence_count] = token;
    s->fence_seqs[s->fence_count++] = seq;
    m->quarantined_extents++;
    /* free_at: a put short of memory may wait a moment for it (its owner confirms within a
     * ping or two) rather than evict live objects. */
    deferred_push(m, (mc_deferred_free_t){.seg = ref.seg,
                                          .handle = ref.handle,
                                          .free_at = now + m->cfg.fence_put_wait_ms,
                                          .wfence = seq});
}

/* 1 when deferred entry d's readers are done (now), its journal entry is durable and its
 * segment's owner confirmed its write fence. */
static int deferred_may_free(const mc_master_t *m, const mc_deferred_free_t *d, uint64_t now)
{
    if (d->wfence)
        return segment_at(m, d->seg)->fence_acked >= d->wfence;
    return (d->free_at <= now || d->readers == 0) && d->jseq <= m->jdurable;
}

/* Frees deferred entry i (the last entry takes its place). */
static void deferred_free_at(mc_master_t *m, size_t i)
{
    mc_deferred_free_t d = m->deferred[i];
    mc_alloc_t *a = segment_at(m, d.seg)->alloc;
    m->fenced_bytes -= mc_alloc_extent_size(a, d.handle);
    extent_free(m, (mc_replica_ref_t){.seg = d.seg, .handle = d.handle});
    if (d.wfence)
        m->quarantine_freed++;
    if (d.jseq == UINT64_MAX)
        m->j_untagged--;
    m->deferred[i] = m->deferred[--m->deferred_count];
}

/* Frees the deferred extents whose leases have all run out; returns how many. */
static size_t deferred_sweep(mc_master_t *m, uint64_t now)
{
    size_t freed = 0;
    for (size_t i = 0; i < m->deferred_count;) {
        if (deferred_may_free(m, &m->deferred[i], now)) {
            deferred_free_at(m, i);
            freed++;
        } else {
            i++;
        }
    }
    return freed;
}

void mc_master_deferred_sweep_locked(mc_master_t *m, uint64_t now)
{
    deferred_sweep(m, now);
}

/* The journal's release gate (journal.h): attaching a journal, and the durable sequence that
 * lets deferred extents go back to their allocators. Here, beside the deferred-free list it
 * gates; the journal's entries themselves are journal.c's. */

int mc_master_set_journal(mc_master_t *m, const mc_master_journal_t *j)
{
    if (!m || (j && (!j->set || !j->del)))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    if (j) {
        m->journal = *j;
    } else {
        memset(&m->journal, 0, sizeof(m->journal));
        m->jdurable = UINT64_MAX - 1; /* no gate: everything counts as durable */
        for (size_t i = 0; i < m->deferred_count; i++)
            m->deferred[i].jseq = 0;
        m->j_untagged = 0;
        mc_master_deferred_sweep_locked(m, mc_master_now_locked(m));
        m->jdurable = m->jseq;
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}

void mc_master_journal_durable(mc_master_t *m, uint64_t seq)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if (seq > m->jdurable) {
        m->jdurable = seq;
        mc_master_deferred_sweep_locked(m, mc_master_now_locked(m));
    }
    pthread_mutex_unlock(&m->lock);
}

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
            bytes += mc_alloc_extent_size(segment_at(m, d->seg)->alloc, d->handle);
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

/* The value's extents have been released: its readers' leases went with them (to the deferred
 * entries), and a new value starts with none. */
static void readers_forget(mc_object_t *o)
{
    o->readers = 0;
    o->read_lease_id = 0;
    o->read_until = 0;
}

static void set_cookies(mc_master_t *m, const mc_replica_ref_t *rep, unsigned n, uint64_t size,
                        void *cookie)
{
    if (size == 0)
        return; /* nominal replicas: nothing allocated */
    for (unsigned i = 0; i < n; i++)
        mc_alloc_set_cookie(segment_at(m, rep[i].seg)->alloc, rep[i].handle, cookie);
}

static int replicas_use_segment(const mc_replica_ref_t *rep, unsigned n, uint32_t slot)
{
    for (unsigned i = 0; i < n; i++) {
        if (rep[i].seg == slot)
            return 1;
    }
    return 0;
}

/* ---- objects and puts in progress ------------------------------------------------------------ */

static void object_forget(mc_master_t *m, mc_object_t *o)
{
    assert(!o->complete && !o->pending);
    mc_index_remove(&m->index, o);
    mc_object_free(o);
}

static void pending_link(mc_master_t *m, mc_pending_put_t *p)
{
    p->next = &m->pending;
    p->prev = m->pending.prev;
    m->pending.prev->next = p;
    m->pending.prev = p;
    m->pending_count++;
}

static void pending_unlink(mc_master_t *m, mc_pending_put_t *p)
{
    p->prev->next = p->next;
    p->next->prev = p->prev;
    m->pending_count--;
}

/*
 * Drops the put in progress on `o`; its extents are quarantined until their owners confirm a
 * write fence (extent_quarantine: nobody reads them, but the put's bytes may still arrive),
 * except those in segment slot `gone` (being unmounted: its memory goes with it; UINT32_MAX:
 * none). `counted`: revoked by the master (timeout, client expiry), not by the writer. Returns
 * 1 when `o` was deleted (it had no readable value).
 */
static int pending_revoke(mc_master_t *m, mc_object_t *o, int counted, uint32_t gone)
{
    mc_pending_put_t *p = o->pending;
    if (p->size > 0) {
        uint64_t now = mc_master_now_locked(m);
        for (unsigned i = 0; i < p->nrep; i++) {
            if (p->rep[i].seg == gone) {
                extent_free(m, p->rep[i]);
                continue;
            }
            mc_alloc_set_cookie(segment_at(m, p->rep[i].seg)->alloc, p->rep[i].handle, NULL);
            mc_master_extent_quarantine_locked(m, p->rep[i], p->token, now);
        }
    }
    pending_unlink(m, p);
    o->pending = NULL;
    free(p);
    if (counted)
        m->revoked_puts++;
    if (o->complete)
        return 0;
    object_forget(m, o);
    return 1;
}

/* The readable value is gone (its extents already released): PROCESSING again, or deleted. */
static int value_lost(mc_master_t *m, mc_object_t *o)
{
    mc_journal_del_locked(m, mc_object_key(o), o->key_len);
    EXT_EACH(m, value_discarding, m, o); /* its disk files and tasks go with it */
    o->complete = 0;
    o->nrep = 0;
    readers_forget(o);
    o->lease_timeout = 0;
    o->soft_pin_until = 0;
    o->hard_pinned = 0;
    o->has_checksum = 0;
    o->value_id = 0;
    o->writer = 0;
    o->restore_tag = 0;
    m->complete_count--;
    if (o->pending)
        return 0;
    object_forget(m, o);
    return 1;
}

int mc_master_value_lost_locked(mc_master_t *m, mc_object_t *o)
{
    return value_lost(m, o);
}

void mc_master_drop_memory_locked(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    assert(o->complete && !mc_offload_pinned(o) && mc_offload_ndisk(o) > 0);
    if (o->size > 0) {
        for (unsigned i = 0; i < o->nrep; i++)
            extent_release(m, o->rep[i], o, now);
    }
    o->nrep = 0;
    readers_forget(o);
    mc_journal_set_locked(m, o);
}

int mc_master_drop_value_locked(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    assert(o->complete);
    if (o->size > 0) {
        for (unsigned i = 0; i < o->nrep; i++)
            extent_release(m, o->rep[i], o, now);
    }
    return value_lost(m, o);
}

/* Moves `o` into a record with room for `cap` replicas; NULL (and `o` untouched) on no memory. */
static mc_object_t *object_regrow(mc_master_t *m, mc_object_t *o, unsigned cap)
{
    mc_object_t *n = mc_object_new(mc_object_key(o), o->key_len, cap);
    if (!n)
        return NULL;
    n->size = o->size;
    n->lease_timeout = o->lease_timeout;
    n->soft_pin_until = o->soft_pin_until;
    n->complete_ms = o->complete_ms;
    n->access_ms = o->access_ms;
    n->read_lease_id = o->read_lease_id;
    n->read_until = o->read_until;
    n->readers = o->readers;
    n->pending = o->pending;
    n->offload = o->offload;
    n->nrep = o->nrep;
    n->complete = o->complete;
    n->hard_pinned = o->hard_pinned;
    n->has_checksum = o->has_checksum;
    n->checksum = o->checksum;
    n->value_id = o->value_id;
    n->writer = o->writer;
    n->restore_tag = o->restore_tag;
    memcpy(n->rep, o->rep, o->nrep * sizeof(n->rep[0]));
    mc_index_replace(&m->index, o, n);
    EXT_EACH(m, object_moved, n);
    if (n->complete)
        set_cookies(m, n->rep, n->nrep, n->size, n);
    if (n->pending) {
        n->pending->obj = n;
        set_cookies(m, n->pending->rep, n->pending->nrep, n->pending->size, n);
    }
    mc_object_free(o);
    return n;
}

/* PROCESSING -> COMPLETE (or an upsert's swap); `checksum` NULL when the writer sent none. */
static int pending_commit(mc_master_t *m, mc_object_t *o, uint64_t now, const uint32_t *checksum)
{
    mc_pending_put_t *p = o->pending;
    if (p->nrep > o->rep_cap) {
        o = object_regrow(m, o, p->nrep);
        if (!o)
            return MC_ERR_INTERNAL_ERROR;
    }
    if (o->complete) {
        if (o->size > 0) {
            for (unsigned i = 0; i < o->nrep; i++)
                extent_release(m, o->rep[i], o, now);
        }
        readers_forget(o);
        EXT_EACH(m, value_discarding, m, o); /* the old value's tasks and files */
    } else {
        m->complete_count++;
    }
    memcpy(o->rep, p->rep, p->nrep * sizeof(o->rep[0]));
    o->nrep = p->nrep;
    o->size = p->size;
    o->complete = 1;
    o->complete_ms = now;
    o->access_ms = now;
    o->has_checksum = checksum != NULL;
    o->checksum = checksum ? *checksum : 0;
    o->value_id = 0; /* a new value: tasks of the old one no longer match (task_manager.c) */
    o->writer = mc_client_hash(p->client_id);
    o->restore_tag = 0;
    EXT_EACH(m, value_committing, m, o); /* e.g. a restored record of the key is stale now */
    if (p->soft_pin_action == MC_SOFT_PIN_ENABLE)
        o->soft_pin_until = now + p->soft_pin_ttl_ms;
    else if (p->soft_pin_action == MC_SOFT_PIN_DISABLE)
        o->soft_pin_until = 0;
    o->hard_pinned |= p->hard_pin;
    set_cookies(m, o->rep, o->nrep, o->size, o);
    pending_unlink(m, p);
    o->pending = NULL;
    free(p);
    m->evict_retry_at = 0; /* a new eviction candidate exists */
    mc_journal_set_locked(m, o);
    EXT_EACH(m, value_committed, m, o, now);
    return 0;
}

void mc_master_extent_release_locked(mc_master_t *m, mc_replica_ref_t ref, const mc_object_t *o,
                                     uint64_t now)
{
    extent_release(m, ref, o, now);
}

mc_object_t *mc_master_object_regrow_locked(mc_master_t *m, mc_object_t *o, unsigned cap)
{
    return object_regrow(m, o, cap);
}

void mc_master_set_cookies_locked(mc_master_t *m, const mc_replica_ref_t *rep, unsigned n,
                                  uint64_t size, void *cookie)
{
    set_cookies(m, rep, n, size, cookie);
}

/* ---- placement ------------------------------------------------------------------------------- */

/* Adds a replica on segment `slot` to p when it is mounted, unused by p, and has room. */
static void place_on(mc_master_t *m, uint32_t slot, mc_pending_put_t *p)
{
    mc_segment_t *s = segment_at(m, slot);
    if (!s || s->drain_until || replicas_use_segment(p->rep, p->nrep, slot))
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

/* ---- clients --------------------------------------------------------------------------------- */

static mc_client_t *client_find(mc_master_t *m, const char *id)
{
    for (size_t i = 0; i < m->client_count; i++) {
        if (strcmp(m->clients[i].id, id) == 0)
            return &m->clients[i];
    }
    return NULL;
}

mc_client_t *mc_master_client_locked(mc_master_t *m, const char *client_id)
{
    return client_find(m, client_id);
}

/* Registers the client or refreshes its liveness. */
static int client_touch(mc_master_t *m, const char *id, uint64_t now)
{
    mc_client_t *c = client_find(m, id);
    if (c) {
        c->last_seen_ms = now;
        c->gone = 0;
        return 0;
    }
    if (m->client_count == m->client_cap) {
        size_t cap = m->client_cap ? m->client_cap * 2 : 16;
        mc_client_t *v = realloc(m->clients, cap * sizeof(*v));
        if (!v)
            return MC_ERR_INTERNAL_ERROR;
        m->clients = v;
        m->client_cap = cap;
    }
    c = &m->clients[m->client_count++];
    memset(c, 0, sizeof(*c));
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->last_seen_ms = now;
    MC_INFO("client %s registered", id);
    return 0;
}

/* ---- mount / unmount ------------------------------------------------------------------------- */

static int segment_info_ok(const mc_segment_info_t *seg)
{
    return text_ok(seg->id, sizeof(seg->id)) && text_ok(seg->name, sizeof(seg->name)) &&
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
    if (seg->size > m->cfg.max_segment_size) {
        m->mounts_refused++;
        MC_WARN("mount of segment %s (%s) by %s refused: %" PRIu64 " bytes is above the %" PRIu64
                "-byte limit (--max_segment_size)",
                seg->id, seg->name, client_id, seg->size, m->cfg.max_segment_size);
        return MC_ERR_INVALID_PARAMS;
    }
    int rc = client_touch(m, client_id, now);
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
    EXT_EACH(m, segment_mounted, m, (uint32_t)slot); /* before any put can allocate in it */
    MC_INFO("mounted segment %s (%s, %" PRIu64 " bytes, %s) for client %s", seg->id, seg->name,
            seg->size, seg->protocol, client_id);
    return 0;
}

int mc_master_mount_segment(mc_master_t *m, const char *client_id, const mc_segment_info_t *seg)
{
    if (!m || !client_id_ok(client_id) || !seg || !segment_info_ok(seg))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    int rc = mount_locked(m, client_id, seg, mc_master_now_locked(m));
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_remount_segments(mc_master_t *m, const char *client_id, const mc_segment_info_t *segs,
                               size_t n)
{
    if (!m || !client_id_ok(client_id) || (n > 0 && !segs))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        if (!segment_info_ok(&segs[i]))
            return MC_ERR_INVALID_PARAMS;
    }
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    int rc = client_touch(m, client_id, now); /* registers a client with no segments too */
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
    if (p && p->size > 0 && replicas_use_segment(p->rep, p->nrep, slot)) {
        if (pending_revoke(m, o, counted, slot))
            return;
    }
    if (!o->complete || o->size == 0 || !replicas_use_segment(o->rep, o->nrep, slot))
        return;
    mc_master_replica_lost_locked(m, o, slot);
    unsigned kept = 0;
    for (unsigned i = 0; i < o->nrep; i++) {
        if (o->rep[i].seg == slot)
            extent_free(m, o->rep[i]); /* the memory is going away with the segment */
        else
            o->rep[kept++] = o->rep[i];
    }
    o->nrep = (uint8_t)kept;
    if (kept == 0 && mc_offload_ndisk(o) == 0)
        value_lost(m, o); /* else it stays readable from disk */
    else
        mc_journal_set_locked(m, o);
}

/*
 * Unmounts the segment in `slot`: objects lose their replicas there (and are deleted when none is
 * left), puts with an extent there are revoked, deferred frees there are forgotten.
 */
static int unmount_locked(mc_master_t *m, uint32_t slot, int counted)
{
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
        if (o->complete && replicas_use_segment(o->rep, o->nrep, slot) && o->lease_timeout > until)
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
    EXT_EACH(m, segment_gone, m, slot); /* extents extensions hold there go with it */

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
        rc = unmount_locked(m, (uint32_t)k, 0);
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

int mc_master_ping(mc_master_t *m, const char *client_id, uint64_t *view_version,
                   mc_client_status_t *status)
{
    if (!m || !client_id_ok(client_id) || !status)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_client_t *c = client_find(m, client_id);
    if (c)
        c->last_seen_ms = mc_master_now_locked(m);
    /* One found gone that pings after all re-mounts: its segments were unmounted. */
    *status = c && !c->gone ? MC_CLIENT_OK : MC_CLIENT_NEED_REMOUNT;
    if (view_version)
        *view_version = m->view_version;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

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
    if (!m || !client_id_ok(client_id) || !n || !upto || (capacity > 0 && !tokens))
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
        deferred_sweep(m, mc_master_now_locked(m));
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_client_is_live(mc_master_t *m, const char *client_id)
{
    if (!m || !client_id_ok(client_id))
        return 0;
    pthread_mutex_lock(&m->lock);
    int live = client_find(m, client_id) != NULL;
    pthread_mutex_unlock(&m->lock);
    return live;
}

void mc_master_report_checksum_mismatches(mc_master_t *m, const char *client_id, uint64_t total)
{
    if (!m || !client_id)
        return;
    pthread_mutex_lock(&m->lock);
    mc_client_t *c = client_find(m, client_id);
    if (c) {
        m->checksum_mismatches +=
            total >= c->checksum_mismatches ? total - c->checksum_mismatches : total;
        c->checksum_mismatches = total;
    }
    pthread_mutex_unlock(&m->lock);
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

/* A mount's epoch: its epoch generation (its own, or shared with the owner's segments of the
 * same name mounted before it), above this master instance's token so that epochs of two master
 * lifetimes never collide. */
static uint64_t segment_epoch(const mc_master_t *m, const mc_segment_t *s)
{
    return ((m->view_version >> 20) & 0xffffffffull) << 32 | s->epoch_gen;
}

uint64_t mc_master_slot_epoch_locked(const mc_master_t *m, uint32_t slot)
{
    return segment_epoch(m, segment_at(m, slot));
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
    const mc_segment_t *s = segment_at(m, ref.seg);
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
    fill_desc(m, ref, size, status, out);
}

/* A 0-byte value's nominal replica is shown only while its segment is still the one it named. */
static int replica_visible(const mc_master_t *m, mc_replica_ref_t ref, uint64_t size)
{
    if (size > 0)
        return 1;
    const mc_segment_t *s = segment_at(m, ref.seg);
    return s && s->gen == ref.handle;
}

/* Writes up to `capacity` descriptors; returns how many replicas there are. */
static size_t fill_descs(const mc_master_t *m, const mc_replica_ref_t *rep, unsigned nrep,
                         uint64_t size, mc_replica_status_t status, mc_replica_desc_t *out,
                         size_t capacity)
{
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

/* Attaches the placed put `p` to `o` (an upsert), or to a new PROCESSING object. */
static int pending_attach(mc_master_t *m, mc_object_t *o, const char *key, size_t len,
                          mc_pending_put_t *p, uint64_t now)
{
    if (!o) {
        o = mc_object_new(key, len, p->nrep);
        if (!o || mc_index_insert(&m->index, o) != 0) {
            mc_object_free(o);
            return MC_ERR_INTERNAL_ERROR;
        }
        o->size = p->size;
    }
    p->obj = o;
    p->start_ms = now;
    o->pending = p;
    set_cookies(m, p->rep, p->nrep, p->size, o);
    pending_link(m, p);
    return 0;
}

static int start_locked(mc_master_t *m, const char *key, size_t len, int upsert,
                        const mc_replicate_config_t *cfg, unsigned want, mc_pending_put_t *p,
                        uint64_t now)
{
    if (p->size > 0 && align_up(p->size) > m->largest_capacity)
        return MC_ERR_NO_AVAILABLE_HANDLE; /* no eviction can make room for it */
    int swept = 0, evicted = 0;
    for (;;) {
        mc_object_t *o = mc_index_find(&m->index, key, len);
        if (o && o->complete && !upsert)
            return MC_ERR_OBJECT_ALREADY_EXISTS;
        if (ext_hides_key(m, key, len)) /* e.g. restored, its owner not re-mounted yet */
            return upsert ? MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS : MC_ERR_OBJECT_ALREADY_EXISTS;
        if (o && o->pending) {
            uint64_t age = elapsed_ms(now, o->pending->start_ms);
            if (age < m->cfg.put_start_discard_timeout_ms)
                return MC_ERR_REPLICA_IS_NOT_READY; /* not "exists": that put may still fail */
            MC_INFO("put of %.64s by %s abandoned for %" PRIu64 " ms: replaced", key,
                    o->pending->client_id, age);
            __atomic_fetch_add(&m->ops.put_start_discards, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&m->ops.put_start_releases, 1, __ATOMIC_RELAXED);
            if (pending_revoke(m, o, 1, UINT32_MAX))
                o = NULL;
        }
        place(m, cfg, want, p);
        if (p->nrep > 0 || p->size == 0) {
            int rc = pending_attach(m, o, key, len, p, now);
            if (rc != 0 && p->size > 0) {
                for (unsigned i = 0; i < p->nrep; i++)
                    extent_free(m, p->rep[i]);
            }
            return rc;
        }
        /* Short of memory: first the fences whose leases are over (the monitor frees them only
         * every second), then, rather than evict live objects, wait for fences that would make
         * room (mc_master_put_wait_ms tells the client to retry) while their patience lasts,
         * then evict. */
        if (!swept) {
            swept = 1;
            if (deferred_sweep(m, now) > 0)
                continue;
        }
        if (evicted)
            return MC_ERR_NO_AVAILABLE_HANDLE;
        if (waitable_fenced_bytes(m, now) >= align_up(p->size)) {
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
    uint64_t fence_ms = size > 0 && waitable_fenced_bytes(m, now) >= align_up(size)
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
    int64_t len = key_length(key);
    if (len < 0)
        return (int)len;
    if (!cfg)
        cfg = &default_cfg;
    if (!m || !client_id_ok(client_id) || !count || size > MC_MAX_VALUE_SIZE || !config_ok(m, cfg))
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
        *count = fill_descs(m, p->rep, p->nrep, size, MC_REPLICA_PROCESSING, out, capacity);
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
    int64_t len = key_length(key);
    if (len < 0)
        return (int)len;
    if (!m || !client_id_ok(client_id))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    mc_object_t *o = mc_index_find(&m->index, key, (size_t)len);
    if (!o || !o->pending)
        rc = MC_ERR_OBJECT_NOT_FOUND;
    else if (strcmp(o->pending->client_id, client_id) != 0)
        rc = MC_ERR_ILLEGAL_CLIENT;
    else if (commit)
        rc = pending_commit(m, o, mc_master_now_locked(m), checksum);
    else
        pending_revoke(m, o, 0, UINT32_MAX);
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

/* ---- reads ----------------------------------------------------------------------------------- */

/* The COMPLETE object for a valid key, NULL when absent; *rc the key error otherwise. */
static mc_object_t *find_complete(mc_master_t *m, const char *key, int *rc)
{
    int64_t len = key_length(key);
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
    mc_object_t *o = find_complete(m, key, &rc);
    if (o) {
        uint64_t id = grant_read_lease(m, o, mc_master_now_locked(m));
        if (lease_id)
            *lease_id = id;
        *count = fill_descs(m, o->rep, o->nrep, o->size, MC_REPLICA_COMPLETE, out, capacity);
        *count = ext_fill_descs(m, o, out, capacity, *count);
        set_checksums(o, out, *count, capacity);
        if (size)
            *size = o->size;
        if (lease_ttl_ms)
            *lease_ttl_ms = m->cfg.default_kv_lease_ttl_ms;
        EXT_EACH(m, read_hit, m, o, mc_master_now_locked(m));
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
            deferred_free_at(m, i); /* entry i is now another one */
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
        mc_object_t *o = find_complete(m, keys[i], &rc);
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
    mc_object_t *o = find_complete(m, key, &rc);
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
    mc_object_t *o = find_complete(m, key, &rc);
    if (o) {
        *count = fill_descs(m, o->rep, o->nrep, o->size, MC_REPLICA_COMPLETE, out, capacity);
        *count = ext_fill_descs(m, o, out, capacity, *count);
        set_checksums(o, out, *count, capacity);
        if (size)
            *size = o->size;
        if (lease_remaining_ms)
            *lease_remaining_ms = elapsed_ms(o->lease_timeout, mc_master_now_locked(m));
    } else if (rc == 0) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* ---- removal --------------------------------------------------------------------------------- */

int mc_master_remove(mc_master_t *m, const char *key, int force)
{
    if (!m)
        return MC_ERR_INVALID_PARAMS;
    int rc;
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    mc_object_t *o = find_complete(m, key, &rc);
    if (o && o->lease_timeout > now && !force)
        rc = MC_ERR_OBJECT_HAS_LEASE;
    else if (o)
        mc_master_drop_value_locked(m, o, now);
    else if (rc == 0)
        rc = MC_ERR_OBJECT_NOT_FOUND;
    if (rc == MC_ERR_OBJECT_NOT_FOUND && ext_hides_key(m, key, strlen(key)))
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
    EXT_EACH(m, stats, m, out);
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

/* ---- liveness, timeouts, deferred frees ------------------------------------------------------ */

/* Unmounts every segment of client id and revokes its unfinished puts. 0, or -1 when out of
 * memory (the caller tries again later). */
static int drop_client_memory(mc_master_t *m, const char *id)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k] && strcmp(m->segs[k]->info.client_id, id) == 0 &&
            unmount_locked(m, (uint32_t)k, 1) != 0)
            return -1;
    }
    for (mc_pending_put_t *p = m->pending.next, *next; p != &m->pending; p = next) {
        next = p->next;
        if (strcmp(p->client_id, id) == 0)
            pending_revoke(m, p->obj, 1, UINT32_MAX);
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
            elapsed_ms(now, m->clients[idx].last_seen_ms));
    if (drop_client_memory(m, id) != 0)
        return -1; /* out of memory: try again on the next sweep */
    EXT_EACH(m, client_gone, m, id);
    m->clients[idx] = m->clients[--m->client_count];
    m->expired_clients++;
    return 0;
}

size_t mc_master_client_endpoints(mc_master_t *m, const char *client_id,
                                  char (*names)[MC_SEGMENT_NAME_MAX], size_t cap,
                                  uint64_t *last_seen_ms)
{
    if (!m || !client_id_ok(client_id))
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&m->lock);
    const mc_client_t *c = client_find(m, client_id);
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
    if (!m || !client_id_ok(client_id))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_client_t *c = client_find(m, client_id);
    int rc = 0;
    if (!c || c->gone)
        rc = MC_ERR_CLIENT_NOT_FOUND;
    else if (c->last_seen_ms != last_seen_ms)
        rc = 1; /* it pinged while it was probed: alive after all */
    else if (drop_client_memory(m, client_id) != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0) {
        c = client_find(m, client_id); /* unmounting does not move clients, but be exact */
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
    for (size_t i = 0; i < m->client_count;) {
        if (elapsed_ms(now, m->clients[i].last_seen_ms) > m->cfg.client_ttl_ms &&
            expire_client(m, i, now) == 0)
            continue; /* slot i now holds another client */
        i++;
    }
    for (mc_pending_put_t *p = m->pending.next, *next; p != &m->pending; p = next) {
        next = p->next;
        if (elapsed_ms(now, p->start_ms) >= m->cfg.put_start_release_timeout_ms) {
            MC_WARN("put of %.64s by %s unfinished after %" PRIu64 " ms: revoked",
                    mc_object_key(p->obj), p->client_id, elapsed_ms(now, p->start_ms));
            __atomic_fetch_add(&m->ops.put_start_releases, 1, __ATOMIC_RELAXED);
            pending_revoke(m, p->obj, 1, UINT32_MAX);
        }
    }
    for (size_t k = 0; k < m->seg_cap; k++) {
        const mc_segment_t *s = m->segs[k];
        if (s && s->drain_until && now >= s->drain_until)
            unmount_locked(m, (uint32_t)k, 0); /* out of memory: again on the next sweep */
    }
    deferred_sweep(m, now);
    size_t kept = 0;
    for (size_t i = 0; i < m->fence_count; i++) {
        if (m->fences[i].until > now)
            m->fences[kept++] = m->fences[i];
    }
    m->fence_count = kept;
    EXT_EACH(m, sweep, m, now);
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
        INVARIANT(!replicas_use_segment(rep, i, rep[i].seg), "%s: two replicas on one segment",
                  mc_object_key(o));
        if (size == 0)
            continue;
        mc_segment_t *s = segment_at(m, rep[i].seg);
        INVARIANT(s && mc_alloc_is_live(s->alloc, rep[i].handle) &&
                      mc_alloc_cookie(s->alloc, rep[i].handle) == o &&
                      mc_alloc_extent_size(s->alloc, rep[i].handle) == align_up(size),
                  "%s: replica %u is not its live extent", mc_object_key(o), i);
        seg_used[rep[i].seg] += align_up(size);
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
    EXT_EACH(m, account, m, seg_used); /* extents the extensions hold */
    for (size_t i = 0; ok && i < m->deferred_count; i++) {
        mc_segment_t *s = segment_at(m, m->deferred[i].seg);
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

void mc_master_set_clock(mc_master_t *m, uint64_t (*now_ms)(void *arg), void *arg)
{
    pthread_mutex_lock(&m->lock);
    m->clock = now_ms ? now_ms : mc_master_default_clock;
    m->clock_arg = now_ms ? arg : NULL;
    pthread_mutex_unlock(&m->lock);
}
