/*
 * extents.c — what becomes of an extent once its object lets go of it: freed at once, deferred
 * (a fence) while readers hold leases on it or while the journal entry that dropped it is not
 * durable, or quarantined while a revoked writer's bytes may still land; the fencing tokens the
 * quarantine refuses; and the journal's release gate over the deferred-free list.
 *
 * How a value's extents are released depends on who may still read them. A reader holds a read
 * lease from GetReplicaList until it releases it (its transfer is done) or the lease runs out;
 * extents of a value that is removed, evicted or replaced while readers hold leases go on the
 * deferred-free list (a fence) and are freed when the last of them releases or the leases end;
 * otherwise at once. Upstream's lease (lease_timeout, granted by exist and get for the TTL
 * whatever the reader does) only refuses a Remove without force. Extents of puts in progress are
 * invisible to readers and freed at once on revoke.
 *
 * Invariants (mc_deferred_free_t): a deferred entry's extent is live in its segment's allocator
 * with a NULL cookie and waits for at least one gate (readers, journal entry, write fence);
 * m->fenced_bytes is the sum of their sizes; m->j_untagged counts the entries whose journal
 * entry is not assigned yet (jseq == UINT64_MAX).
 *
 * Layer: the lowest of the core with master_service.c; it calls only allocator.c.
 */
#include "master_internal.h"

#include "core_internal.h"
#include "log.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- extents --------------------------------------------------------------------------------- */

void mc_master_extent_free_locked(mc_master_t *m, mc_replica_ref_t ref)
{
    MC_MASTER_ASSERT_LOCKED(m);
    int rc = mc_alloc_free(mc_master_segment_locked(m, ref.seg)->alloc, ref.handle);
    assert(rc == 0);
    (void)rc;
}

/* Appends a deferred-free entry (its extent's cookie already cleared) and counts it fenced. */
static void deferred_push(mc_master_t *m, mc_deferred_free_t e)
{
    mc_alloc_t *a = mc_master_segment_locked(m, e.seg)->alloc;
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
        mc_master_extent_free_locked(m, ref);
        return;
    }
    mc_alloc_set_cookie(mc_master_segment_locked(m, ref.seg)->alloc, ref.handle, NULL);
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
    MC_MASTER_ASSERT_LOCKED(m);
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
    MC_MASTER_ASSERT_LOCKED(m);
    mc_segment_t *s = mc_master_segment_locked(m, ref.seg);
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
        return mc_master_segment_locked(m, d->seg)->fence_acked >= d->wfence;
    return (d->free_at <= now || d->readers == 0) && d->jseq <= m->jdurable;
}

/* Frees deferred entry i (the last entry takes its place). */
void mc_master_deferred_free_at_locked(mc_master_t *m, size_t i)
{
    MC_MASTER_ASSERT_LOCKED(m);
    mc_deferred_free_t d = m->deferred[i];
    mc_alloc_t *a = mc_master_segment_locked(m, d.seg)->alloc;
    m->fenced_bytes -= mc_alloc_extent_size(a, d.handle);
    mc_master_extent_free_locked(m, (mc_replica_ref_t){.seg = d.seg, .handle = d.handle});
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
            mc_master_deferred_free_at_locked(m, i);
            freed++;
        } else {
            i++;
        }
    }
    return freed;
}

size_t mc_master_deferred_sweep_locked(mc_master_t *m, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    return deferred_sweep(m, now);
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

void mc_master_extent_release_locked(mc_master_t *m, mc_replica_ref_t ref, const mc_object_t *o,
                                     uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    extent_release(m, ref, o, now);
}
