/*
 * objects.c — an object's values: a put in progress attached (PROCESSING), committed (COMPLETE,
 * or an upsert's swap of values) or revoked; a readable value dropped or lost, or only its
 * memory dropped when a disk replica keeps it readable; a record regrown for more replicas.
 * Each change raises the extension events and writes the journal entries that go with it.
 *
 * Invariants (mc_object_t, mc_pending_put_t): a record in the index is COMPLETE, has a put in
 * progress, or both; o->pending->obj == o and the put is on m->pending (m->pending_count counts
 * them); m->complete_count counts the COMPLETE records; the allocator cookie of an extent an
 * object owns is that object (set_cookies), and NULL once the object let go of it (extents.c).
 *
 * Layer: above extents.c (and journal.c, the index); below every file that changes objects.
 */
#include "master_internal.h"

#include "core_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- objects and puts in progress ------------------------------------------------------------ */

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
        mc_alloc_set_cookie(mc_master_segment_locked(m, rep[i].seg)->alloc, rep[i].handle, cookie);
}

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
int mc_master_pending_revoke_locked(mc_master_t *m, mc_object_t *o, int counted, uint32_t gone)
{
    MC_MASTER_ASSERT_LOCKED(m);
    mc_pending_put_t *p = o->pending;
    if (p->size > 0) {
        uint64_t now = mc_master_now_locked(m);
        for (unsigned i = 0; i < p->nrep; i++) {
            if (p->rep[i].seg == gone) {
                mc_master_extent_free_locked(m, p->rep[i]);
                continue;
            }
            mc_alloc_set_cookie(mc_master_segment_locked(m, p->rep[i].seg)->alloc, p->rep[i].handle,
                                NULL);
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
    MC_EXT_EACH(m, value_discarding, m, o); /* its disk files and tasks go with it */
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
    MC_MASTER_ASSERT_LOCKED(m);
    return value_lost(m, o);
}

void mc_master_drop_memory_locked(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    assert(o->complete && !mc_offload_pinned(o) && mc_offload_ndisk(o) > 0);
    if (o->size > 0) {
        for (unsigned i = 0; i < o->nrep; i++)
            mc_master_extent_release_locked(m, o->rep[i], o, now);
    }
    o->nrep = 0;
    readers_forget(o);
    mc_journal_set_locked(m, o);
}

int mc_master_drop_value_locked(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    assert(o->complete);
    if (o->size > 0) {
        for (unsigned i = 0; i < o->nrep; i++)
            mc_master_extent_release_locked(m, o->rep[i], o, now);
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
    MC_EXT_EACH(m, object_moved, n);
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
int mc_master_pending_commit_locked(mc_master_t *m, mc_object_t *o, uint64_t now,
                                    const uint32_t *checksum)
{
    MC_MASTER_ASSERT_LOCKED(m);
    mc_pending_put_t *p = o->pending;
    if (p->nrep > o->rep_cap) {
        o = object_regrow(m, o, p->nrep);
        if (!o)
            return MC_ERR_INTERNAL_ERROR;
    }
    if (o->complete) {
        if (o->size > 0) {
            for (unsigned i = 0; i < o->nrep; i++)
                mc_master_extent_release_locked(m, o->rep[i], o, now);
        }
        readers_forget(o);
        MC_EXT_EACH(m, value_discarding, m, o); /* the old value's tasks and files */
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
    MC_EXT_EACH(m, value_committing, m, o); /* e.g. a restored record of the key is stale now */
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
    MC_EXT_EACH(m, value_committed, m, o, now);
    return 0;
}

mc_object_t *mc_master_object_regrow_locked(mc_master_t *m, mc_object_t *o, unsigned cap)
{
    MC_MASTER_ASSERT_LOCKED(m);
    return object_regrow(m, o, cap);
}

void mc_master_set_cookies_locked(mc_master_t *m, const mc_replica_ref_t *rep, unsigned n,
                                  uint64_t size, void *cookie)
{
    MC_MASTER_ASSERT_LOCKED(m);
    set_cookies(m, rep, n, size, cookie);
}

/* Attaches the placed put `p` to `o` (an upsert), or to a new PROCESSING object. */
int mc_master_pending_attach_locked(mc_master_t *m, mc_object_t *o, const char *key, size_t len,
                                    mc_pending_put_t *p, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
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
