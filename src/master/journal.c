/*
 * journal.c — the master's durable object state (see journal.h), the part the core calls:
 * object records (protobuf-c mc.ObjectRecord) and the journal of index changes. The journal's
 * release gate over the deferred frees is extents.c's; the restore table, whose hidden replicas
 * a key's record carries, is restore_table.c's; export, import and revival are restore.c's.
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
#include <stdlib.h>

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
    MC_MASTER_ASSERT_LOCKED(m);
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
    MC_MASTER_ASSERT_LOCKED(m);
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
