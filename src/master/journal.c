/*
 * journal.c — the master's durable object state (see journal.h), the part the core calls:
 * object records (protobuf-c mc.ObjectRecord), the journal of index changes and its release
 * gate, and the restore table that holds imported records whose memory replicas wait for their
 * owner's re-mount (restore_table.h). Export, import and revival are restore.c's.
 *
 * Locking: everything here runs under the master's lock (functions named *_locked expect it;
 * the public ones take it).
 */
#include "journal.h"

#include "log.h"
#include "master_internal.h"
#include "restore_table.h"
#include "mooncake/errors.h"
#include "snapshot.pb-c.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- the restore table ---------------------------------------------------------------------- */

uint32_t mc_restore_ref_intern(mc_restore_table_t *t, const char *id, const char *client,
                               const char *name)
{
    for (size_t i = t->nrefs; i-- > 0;) {
        const seg_ref_t *r = &t->refs[i];
        if (!strcmp(r->id, id) && !strcmp(r->client_id, client) && !strcmp(r->name, name))
            return (uint32_t)i;
    }
    if (t->nrefs == t->refs_cap) {
        size_t cap = t->refs_cap ? t->refs_cap * 2 : 16;
        seg_ref_t *v = cap < UINT32_MAX ? realloc(t->refs, cap * sizeof(*v)) : NULL;
        if (!v)
            return UINT32_MAX;
        t->refs = v;
        t->refs_cap = cap;
    }
    seg_ref_t *r = &t->refs[t->nrefs];
    snprintf(r->id, sizeof(r->id), "%s", id);
    snprintf(r->client_id, sizeof(r->client_id), "%s", client);
    snprintf(r->name, sizeof(r->name), "%s", name);
    return (uint32_t)t->nrefs++;
}

/* Frees the reservation of a mem being verified (when its segment is still that mount). */
static void mem_release(mc_master_t *m, const mc_restore_mem_t *x)
{
    if (!x->verifying)
        return;
    mc_segment_t *s = mc_master_segment_locked(m, x->slot);
    if (s && s->gen == x->gen)
        mc_alloc_free(s->alloc, x->handle);
}

void mc_restore_entry_free(mc_master_t *m, mc_restore_entry_t *e)
{
    for (unsigned i = 0; i < e->nmem; i++)
        mem_release(m, &e->mem[i]);
    free(e);
}

mc_restore_table_t *mc_restore_table_of(mc_master_t *m)
{
    if (!m->restore) {
        m->restore = calloc(1, sizeof(*m->restore));
        if (m->restore) {
            m->restore->cap = 1024;
            m->restore->b = calloc(m->restore->cap, sizeof(*m->restore->b));
            if (!m->restore->b) {
                free(m->restore);
                m->restore = NULL;
            }
        }
    }
    return m->restore;
}

mc_restore_entry_t **mc_restore_entry_slot(mc_restore_table_t *t, const char *key, size_t len,
                                           uint64_t h)
{
    mc_restore_entry_t **p = &t->b[h & (t->cap - 1)];
    while (*p && !((*p)->hash == h && (*p)->key_len == len && !memcmp((*p)->key, key, len)))
        p = &(*p)->next;
    return p;
}

mc_restore_entry_t *mc_restore_entry_find(mc_master_t *m, const char *key, size_t len)
{
    if (!m->restore || m->restore->count == 0)
        return NULL;
    return *mc_restore_entry_slot(m->restore, key, len, XXH3_64bits(key, len));
}

void mc_restore_entry_unlink(mc_restore_table_t *t, mc_restore_entry_t *e)
{
    mc_restore_entry_t **p = mc_restore_entry_slot(t, e->key, e->key_len, e->hash);
    *p = e->next;
    t->count--;
}

void mc_restore_table_grow(mc_restore_table_t *t)
{
    size_t cap = t->cap * 2;
    mc_restore_entry_t **b = calloc(cap, sizeof(*b));
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < t->cap; i++) {
        for (mc_restore_entry_t *e = t->b[i], *n; e; e = n) {
            n = e->next;
            e->next = b[e->hash & (cap - 1)];
            b[e->hash & (cap - 1)] = e;
        }
    }
    free(t->b);
    t->b = b;
    t->cap = cap;
}

void mc_restore_forget_locked(mc_master_t *m, const char *key, size_t len)
{
    mc_restore_entry_t *e = mc_restore_entry_find(m, key, len);
    if (!e)
        return;
    mc_restore_entry_unlink(m->restore, e);
    m->restore_superseded++;
    mc_restore_entry_free(m, e);
}

int mc_restore_hides_key_locked(mc_master_t *m, const char *key, size_t len)
{
    return m->restore && m->restore->count > 0 && mc_restore_entry_find(m, key, len) != NULL;
}

int mc_restore_pending_locked(const mc_master_t *m)
{
    return m->restore && m->restore->count > 0;
}

void mc_restore_fini(mc_master_t *m)
{
    mc_restore_table_t *t = m->restore;
    if (!t)
        return;
    for (size_t i = 0; i < t->cap; i++) {
        for (mc_restore_entry_t *e = t->b[i], *n; e; e = n) {
            n = e->next;
            free(e); /* the segments go with the master: nothing to release */
        }
    }
    for (size_t i = 0; i < t->nitems; i++)
        free(t->items[i].key);
    free(t->items);
    free(t->refs);
    free(t->b);
    free(t);
    m->restore = NULL;
}

/* ---- records --------------------------------------------------------------------------------- */

uint8_t *mc_record_encode(const mc_master_t *m, const mc_object_t *o, const mc_restore_entry_t *e,
                          uint64_t now, size_t *len)
{
    Mc__ObjectRecord r = MC__OBJECT_RECORD__INIT;
    Mc__MemoryReplicaRecord mem[2 * MC_MAX_REPLICAS], *memp[2 * MC_MAX_REPLICAS];
    Mc__DiskReplicaRecord disk[MC_MAX_DISK_REPLICAS], *diskp[MC_MAX_DISK_REPLICAS];
    size_t nm = 0, nd = 0;
    if (o) {
        r.key = (char *)mc_object_key(o);
        r.size = o->size;
        r.has_checksum = o->has_checksum;
        r.checksum = o->checksum;
        r.soft_pin_remaining_ms = o->soft_pin_until > now ? o->soft_pin_until - now : 0;
        r.hard_pinned = o->hard_pinned;
        for (unsigned i = 0; i < o->nrep; i++) {
            const mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
            if (!s || (o->size == 0 && s->gen != o->rep[i].handle))
                continue; /* a 0-byte value's segment went */
            mc__memory_replica_record__init(&mem[nm]);
            mem[nm].segment_id = (char *)s->info.id;
            mem[nm].client_id = (char *)s->info.client_id;
            mem[nm].segment_name = (char *)s->info.name;
            mem[nm].address =
                o->size > 0 ? mc_alloc_extent_addr(s->alloc, o->rep[i].handle) : s->info.base;
            mem[nm].length = o->size;
            memp[nm] = &mem[nm];
            nm++;
        }
        for (unsigned i = 0; i < mc_offload_ndisk(o); i++) {
            const mc_disk_replica_t *d = &o->offload->disk[i];
            mc__disk_replica_record__init(&disk[nd]);
            disk[nd].type = d->type;
            disk[nd].version = d->version;
            disk[nd].owner_client = d->owner ? (char *)d->owner->client_id : (char *)"";
            diskp[nd] = &disk[nd];
            nd++;
        }
    } else {
        r.key = (char *)e->key;
        r.size = e->size;
        r.has_checksum = e->has_checksum;
        r.checksum = e->checksum;
        r.soft_pin_remaining_ms = e->soft_pin_ms;
        r.hard_pinned = e->hard_pinned;
    }
    for (unsigned i = 0; e && i < e->nmem && nm < 2 * MC_MAX_REPLICAS; i++) {
        const seg_ref_t *ref = &m->restore->refs[e->mem[i].ref];
        mc__memory_replica_record__init(&mem[nm]);
        mem[nm].segment_id = (char *)ref->id;
        mem[nm].client_id = (char *)ref->client_id;
        mem[nm].segment_name = (char *)ref->name;
        mem[nm].address = e->mem[i].address;
        mem[nm].length = e->size;
        memp[nm] = &mem[nm];
        nm++;
    }
    r.n_memory = nm;
    r.memory = memp;
    r.n_disk = nd;
    r.disk = diskp;
    *len = mc__object_record__get_packed_size(&r);
    uint8_t *buf = malloc(*len ? *len : 1);
    if (buf)
        mc__object_record__pack(&r, buf);
    return buf;
}

mc_restore_entry_t *mc_restore_entry_of(mc_master_t *m, const mc_object_t *o)
{
    if (!o->restore_tag)
        return NULL;
    mc_restore_entry_t *e = mc_restore_entry_find(m, mc_object_key(o), o->key_len);
    return e && e->tag == o->restore_tag ? e : NULL;
}

/* ---- the journal ----------------------------------------------------------------------------- */

/* Deferred frees released by the entry just assigned wait for it (they are at the tail of the
 * deferred list: nothing frees in between within one locked operation). */
static void tag_deferred(mc_master_t *m, uint64_t seq)
{
    for (size_t i = m->deferred_count; i-- > 0 && m->j_untagged > 0;) {
        if (m->deferred[i].jseq == UINT64_MAX) {
            m->deferred[i].jseq = seq;
            m->j_untagged--;
        }
    }
}

void mc_journal_set_locked(mc_master_t *m, const mc_object_t *o)
{
    if (!m->journal.set || !o->complete)
        return;
    size_t len = 0;
    uint8_t *buf = mc_record_encode(m, o, mc_restore_entry_of(m, o), mc_master_now_locked(m), &len);
    uint64_t seq = ++m->jseq;
    tag_deferred(m, seq);
    if (!buf) {
        MC_ERROR("journal: out of memory encoding the record of %.64s (entry %" PRIu64
                 " lost: a failover may miss this change)",
                 mc_object_key(o), seq);
        return;
    }
    m->journal.set(m->journal.arg, seq, buf, len);
    free(buf);
}

void mc_journal_del_locked(mc_master_t *m, const char *key, size_t len)
{
    if (!m->journal.set)
        return;
    uint64_t seq = ++m->jseq;
    tag_deferred(m, seq);
    m->journal.del(m->journal.arg, seq, key, len);
}

void mc_master_journal_start_at(mc_master_t *m, uint64_t seq)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if (seq > m->jseq)
        m->jseq = seq;
    if (seq > m->jdurable)
        m->jdurable = seq;
    pthread_mutex_unlock(&m->lock);
}

uint64_t mc_master_journal_seq(mc_master_t *m)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    uint64_t seq = m->jseq;
    pthread_mutex_unlock(&m->lock);
    return seq;
}
