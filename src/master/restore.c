/*
 * restore.c — the restore extension (extension.h) and the records' way out and in (journal.h):
 * export of every record for snapshots and standbys, import into the restore table, revival of
 * restored replicas when their owner re-mounts, verification of untrusted ones, and expiry of
 * those never re-mounted. The table is restore_table.c's, the record encoding journal.c's
 * (restore_table.h).
 *
 * Locking: everything here runs under the master's lock (functions named *_locked and the hooks
 * expect it; the public ones take it). Export takes it for one slice at a time.
 */
#include "journal.h"

#include "extension.h"
#include "log.h"
#include "master_internal.h"
#include "mooncake/errors.h"
#include "restore_table.h"
#include "snapshot.pb-c.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define EXPORT_SLICE 1024      /* objects encoded per lock hold */
#define RESTORE_TTL_FACTOR 3   /* restored replicas wait this many client TTLs for a re-mount */
#define VERIFY_PAGE 1024       /* extents per fetch reply */
#define VERIFY_SCAN (4 * 1024) /* items looked at per fetch */

/* ---- export ---------------------------------------------------------------------------------- */

typedef struct enc_list {
    uint8_t **buf;
    size_t *len;
    size_t n, cap;
    int oom;
} enc_list_t;

static void enc_add(enc_list_t *l, uint8_t *buf, size_t len)
{
    if (!buf) {
        l->oom = 1;
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        uint8_t **b = realloc(l->buf, cap * sizeof(*b));
        size_t *n = b ? realloc(l->len, cap * sizeof(*n)) : NULL;
        if (b)
            l->buf = b;
        if (!n) {
            free(buf);
            l->oom = 1;
            return;
        }
        l->len = n;
        l->cap = cap;
    }
    l->buf[l->n] = buf;
    l->len[l->n++] = len;
}

typedef struct export_scan {
    mc_master_t *m;
    enc_list_t *out;
    uint64_t now;
} export_scan_t;

static void export_object(void *arg, mc_object_t *o)
{
    export_scan_t *x = arg;
    if (!o->complete || x->out->oom)
        return;
    size_t len;
    uint8_t *buf = mc_record_encode(x->m, o, mc_restore_entry_of(x->m, o), x->now, &len);
    enc_add(x->out, buf, len);
}

/* Hands the slice's records to cb and empties the list; cb's first non-zero value. */
static int enc_flush(enc_list_t *l, mc_master_export_fn cb, void *arg)
{
    int rc = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (rc == 0 && !l->oom)
            rc = cb(arg, l->buf[i], l->len[i]);
        free(l->buf[i]);
    }
    l->n = 0;
    return rc;
}

int mc_master_export(mc_master_t *m, uint64_t *start_seq, mc_master_export_fn cb, void *arg)
{
    if (!m || !cb)
        return MC_ERR_INVALID_PARAMS;
    enc_list_t l = {0};
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    if (start_seq)
        *start_seq = m->jseq;
    pthread_mutex_unlock(&m->lock);
    size_t cursor = 0;
    do { /* objects of the index */
        pthread_mutex_lock(&m->lock);
        export_scan_t x = {.m = m, .out = &l, .now = mc_master_now_locked(m)};
        do
            cursor = mc_index_scan(&m->index, cursor, export_object, &x);
        while (cursor != 0 && l.n < EXPORT_SLICE && !l.oom);
        pthread_mutex_unlock(&m->lock);
        rc = enc_flush(&l, cb, arg);
    } while (cursor != 0 && rc == 0 && !l.oom);
    /* restored records with no visible replica yet (the table's buckets, a slice at a time;
     * a bucket changed meanwhile may be missed or seen twice: the journal fixes that too) */
    for (size_t bucket = 0; rc == 0 && !l.oom;) {
        pthread_mutex_lock(&m->lock);
        mc_restore_table_t *t = m->restore;
        if (!t || bucket >= t->cap) {
            pthread_mutex_unlock(&m->lock);
            break;
        }
        for (; bucket < t->cap && l.n < EXPORT_SLICE && !l.oom; bucket++) {
            for (const mc_restore_entry_t *e = t->b[bucket]; e; e = e->next) {
                const mc_object_t *o = mc_index_find(&m->index, e->key, e->key_len);
                if (o && o->complete && o->restore_tag == e->tag)
                    continue; /* exported with its object */
                size_t len;
                uint8_t *buf = mc_record_encode(m, NULL, e, 0, &len);
                enc_add(&l, buf, len);
            }
        }
        pthread_mutex_unlock(&m->lock);
        rc = enc_flush(&l, cb, arg);
    }
    int oom = l.oom;
    enc_flush(&l, cb, arg);
    free(l.buf);
    free(l.len);
    return rc ? rc : oom ? MC_ERR_INTERNAL_ERROR : 0;
}

/* ---- import ---------------------------------------------------------------------------------- */

static int text_fits(const char *s, size_t cap)
{
    return s && strnlen(s, cap) < cap;
}

static void extend_deadline(mc_master_t *m)
{
    uint64_t until = mc_master_now_locked(m) + RESTORE_TTL_FACTOR * m->cfg.client_ttl_ms;
    if (m->restore && m->restore->deadline < until)
        m->restore->deadline = until;
}

static int import(mc_master_t *m, const uint8_t *record, size_t len, int trusted)
{
    if (!m || !record)
        return MC_ERR_INVALID_PARAMS;
    Mc__ObjectRecord *r = mc__object_record__unpack(NULL, len, record);
    if (!r)
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_ERR_INVALID_PARAMS;
    size_t klen = r->key ? strlen(r->key) : 0;
    if (klen == 0 || klen > MC_MAX_KEY_LEN || r->n_memory > MC_MAX_REPLICAS)
        goto out;
    for (size_t i = 0; i < r->n_memory; i++) {
        const Mc__MemoryReplicaRecord *x = r->memory[i];
        if (!text_fits(x->segment_id, MC_SEGMENT_ID_MAX) || !x->segment_id[0] ||
            !text_fits(x->client_id, MC_CLIENT_ID_MAX) || !text_fits(x->segment_name, 272) ||
            x->length != r->size || (r->size > 0 && x->address % MC_ALLOC_ALIGN))
            goto out;
    }
    mc_restore_entry_t *e = calloc(1, sizeof(*e) + r->n_memory * sizeof(e->mem[0]) + klen + 1);
    rc = MC_ERR_INTERNAL_ERROR;
    if (!e)
        goto out;
    e->key = (char *)(e->mem + r->n_memory);
    memcpy(e->key, r->key, klen + 1);
    e->key_len = klen;
    e->hash = XXH3_64bits(r->key, klen);
    e->size = r->size;
    e->has_checksum = r->has_checksum;
    e->checksum = r->checksum;
    e->soft_pin_ms = r->soft_pin_remaining_ms;
    e->hard_pinned = r->hard_pinned;
    e->trusted = (uint8_t)trusted;
    pthread_mutex_lock(&m->lock);
    mc_restore_table_t *t = mc_restore_table_of(m);
    for (size_t i = 0; t && i < r->n_memory; i++) {
        mc_restore_mem_t *x = &e->mem[e->nmem++];
        x->ref = mc_restore_ref_intern(t, r->memory[i]->segment_id, r->memory[i]->client_id,
                                       r->memory[i]->segment_name);
        x->address = r->memory[i]->address;
        if (x->ref == UINT32_MAX)
            t = NULL;
    }
    if (!t) {
        pthread_mutex_unlock(&m->lock);
        free(e);
        goto out;
    }
    e->tag = ++m->restore_tag;
    mc_restore_entry_t **p = mc_restore_entry_slot(t, e->key, e->key_len, e->hash);
    if (*p) { /* SET replaces */
        mc_restore_entry_t *old = *p;
        e->next = old->next;
        mc_restore_entry_free(m, old);
        *p = e;
    } else if (e->nmem > 0) {
        e->next = NULL;
        *p = e;
        if (++t->count > t->cap)
            mc_restore_table_grow(t);
    } else {
        free(e); /* disk-only: the file rescan brings it back (journal.h) */
    }
    extend_deadline(m);
    pthread_mutex_unlock(&m->lock);
    rc = 0;
out:
    mc__object_record__free_unpacked(r, NULL);
    return rc;
}

int mc_master_import(mc_master_t *m, const uint8_t *record, size_t len)
{
    return import(m, record, len, 1);
}

int mc_master_import_untrusted(mc_master_t *m, const uint8_t *record, size_t len)
{
    return import(m, record, len, 0);
}

int mc_master_import_del(mc_master_t *m, const char *key, size_t key_len)
{
    if (!m || !key || key_len == 0 || key_len > MC_MAX_KEY_LEN)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_restore_entry_t *e = mc_restore_entry_find(m, key, key_len);
    if (e) {
        mc_restore_entry_unlink(m->restore, e);
        mc_restore_entry_free(m, e);
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int mc_master_restore_hold(mc_master_t *m)
{
    if (!m)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_restore_table_t *t = mc_restore_table_of(m);
    if (t)
        t->hold = 1;
    pthread_mutex_unlock(&m->lock);
    return t ? 0 : MC_ERR_INTERNAL_ERROR;
}

void mc_master_import_trust_all(mc_master_t *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    mc_restore_table_t *t = m->restore;
    for (size_t i = 0; t && i < t->cap; i++) {
        for (mc_restore_entry_t *e = t->b[i]; e; e = e->next)
            e->trusted = 1;
    }
    if (t)
        t->hold = 0; /* serving now: owners have 3 client TTLs from here to re-mount */
    extend_deadline(m);
    pthread_mutex_unlock(&m->lock);
}

void mc_master_restore_stats(mc_master_t *m, mc_restore_stats_t *out)
{
    if (!m || !out)
        return;
    pthread_mutex_lock(&m->lock);
    out->pending = m->restore ? m->restore->count : 0;
    out->revived = m->restore_revived;
    out->expired = m->restore_expired;
    out->untrusted = m->restore_untrusted;
    out->superseded = m->restore_superseded;
    out->verified = m->restore_verified;
    out->verify_failed = m->restore_verify_failed;
    pthread_mutex_unlock(&m->lock);
}

/* ---- revival at re-mount --------------------------------------------------------------------- */

typedef struct revive {
    mc_restore_entry_t *e;
    uint64_t address;
    uint32_t ref;
} revive_t;

static int revive_cmp(const void *a, const void *b)
{
    uint64_t x = ((const revive_t *)a)->address, y = ((const revive_t *)b)->address;
    return (x > y) - (x < y);
}

/* Drops e's hidden replica on segment `ref` (and e once it has none). */
static void entry_drop_mem(mc_master_t *m, mc_restore_entry_t *e, uint32_t ref)
{
    for (unsigned i = 0; i < e->nmem; i++) {
        if (e->mem[i].ref == ref) {
            e->mem[i] = e->mem[--e->nmem];
            break;
        }
    }
    if (e->nmem == 0) {
        mc_restore_entry_unlink(m->restore, e);
        mc_restore_entry_free(m, e);
    }
}

/* Makes e's replica at `address` in segment `slot` visible: 0, or -1 (dropped). `handle`:
 * the extent already reserved for it, or MC_ALLOC_HANDLE_NONE (reserved here). */
static int revive_one(mc_master_t *m, mc_restore_entry_t *e, uint32_t slot, uint64_t address,
                      uint32_t handle, uint32_t *hint, uint64_t now)
{
    mc_segment_t *s = mc_master_segment_locked(m, slot);
    mc_object_t *o = mc_index_find(&m->index, e->key, e->key_len);
    int reserved = handle != MC_ALLOC_HANDLE_NONE;
    if (o && !(o->complete && o->restore_tag == e->tag)) {
        m->restore_superseded++; /* written (or being written) since: the newer value wins */
        goto drop;
    }
    if (o && o->nrep >= o->rep_cap) {
        mc_object_t *n = mc_master_object_regrow_locked(m, o, o->nrep + 1u);
        if (!n)
            goto drop;
        o = n;
    }
    mc_replica_ref_t ref = {.seg = slot, .handle = s->gen};
    if (e->size > 0 && reserved) {
        ref.handle = handle;
    } else if (e->size > 0) {
        int rc = mc_alloc_reserve(s->alloc, address, e->size, NULL, &ref.handle, hint);
        if (rc != 0) {
            MC_WARN("restore: %.64s at 0x%" PRIx64 " (+%" PRIu64 ") in segment %s does not fit "
                    "its free space (%d): replica dropped",
                    e->key, address, e->size, s->info.id, rc);
            m->restore_expired++;
            return -1;
        }
    }
    if (!o) {
        o = mc_object_new(e->key, e->key_len, e->nmem);
        if (!o || mc_index_insert(&m->index, o) != 0) {
            mc_object_free(o);
            if (e->size > 0)
                mc_alloc_free(s->alloc, ref.handle);
            return -1;
        }
        o->size = e->size;
        o->complete = 1;
        o->complete_ms = now;
        o->access_ms = now;
        o->has_checksum = e->has_checksum;
        o->checksum = e->checksum;
        o->hard_pinned = e->hard_pinned;
        o->soft_pin_until = e->soft_pin_ms ? now + e->soft_pin_ms : 0;
        /* upstream §5.4: restored objects get a fresh lease */
        o->lease_timeout =
            m->cfg.default_kv_lease_ttl_ms ? now + m->cfg.default_kv_lease_ttl_ms : 0;
        o->restore_tag = e->tag;
        m->complete_count++;
        m->evict_retry_at = 0;
    }
    o->rep[o->nrep++] = ref;
    mc_master_set_cookies_locked(m, &ref, 1, o->size, o);
    m->restore_revived++;
    return 0;
drop:
    if (reserved && e->size > 0)
        mc_alloc_free(s->alloc, handle);
    return -1;
}

/* After e's replica on segment `ref` was revived (ok) or dropped: e forgets it, and the journal
 * gets the key's new state. */
static void replica_settled(mc_master_t *m, mc_restore_entry_t *e, uint32_t ref, int ok)
{
    char key[MC_MAX_KEY_LEN + 1];
    size_t klen = e->key_len;
    memcpy(key, e->key, klen + 1);
    entry_drop_mem(m, e, ref); /* e may be freed */
    mc_object_t *o = mc_index_find(&m->index, key, klen);
    if (ok)
        mc_journal_set_locked(m, o);
    else if (!mc_restore_entry_find(m, key, klen) && !o)
        mc_journal_del_locked(m, key, klen); /* none of it is left */
}

/* Holds e's replica k (on segment `slot`, reserved as `handle`) for the owner to verify. */
static int verify_hold(mc_master_t *m, mc_restore_entry_t *e, unsigned k, uint32_t slot,
                       uint32_t handle)
{
    mc_restore_table_t *t = m->restore;
    const mc_segment_t *s = mc_master_segment_locked(m, slot);
    if (t->nitems == t->items_cap) {
        size_t cap = t->items_cap ? t->items_cap * 2 : 256;
        verify_item_t *v = realloc(t->items, cap * sizeof(*v));
        if (!v)
            return -1;
        t->items = v;
        t->items_cap = cap;
    }
    verify_item_t *it = &t->items[t->nitems];
    it->key = malloc(e->key_len + 1);
    if (!it->key)
        return -1;
    memcpy(it->key, e->key, e->key_len + 1);
    it->key_len = e->key_len;
    it->tag = e->tag;
    it->address = e->mem[k].address;
    it->size = e->size;
    it->checksum = e->checksum;
    it->slot = slot;
    it->gen = s->gen;
    it->done = 0;
    t->nitems++;
    t->items_open++;
    e->mem[k].verifying = 1;
    e->mem[k].slot = slot;
    e->mem[k].gen = s->gen;
    e->mem[k].handle = handle;
    return 0;
}

static void restore_segment_mounted(mc_master_t *m, uint32_t slot)
{
    mc_restore_table_t *t = m->restore;
    if (!t || t->count == 0)
        return;
    const mc_segment_t *s = mc_master_segment_locked(m, slot);
    const char *client_id = s->info.client_id;
    revive_t *v = NULL;
    size_t n = 0, cap = 0;
    uint8_t *match = calloc(t->nrefs + 1, 1); /* refs naming this segment of this owner */
    size_t nmatch = 0;
    for (size_t i = 0; match && i < t->nrefs; i++) {
        match[i] = !strcmp(t->refs[i].id, s->info.id) && !strcmp(t->refs[i].client_id, client_id);
        nmatch += match[i];
    }
    if (!match || nmatch == 0) {
        if (!match)
            MC_ERROR("restore: out of memory reviving segment %s: its restored replicas stay "
                     "hidden",
                     s->info.id);
        free(match);
        return;
    }
    for (size_t i = 0; i < t->cap; i++) {
        for (mc_restore_entry_t *e = t->b[i]; e; e = e->next) {
            for (unsigned k = 0; k < e->nmem; k++) {
                if (e->mem[k].verifying || !match[e->mem[k].ref])
                    continue;
                if (n == cap) {
                    cap = cap ? cap * 2 : 256;
                    revive_t *nv = realloc(v, cap * sizeof(*nv));
                    if (!nv) {
                        MC_ERROR("restore: out of memory reviving segment %s: its restored "
                                 "replicas stay hidden",
                                 s->info.id);
                        free(v);
                        free(match);
                        return;
                    }
                    v = nv;
                }
                v[n].e = e;
                v[n].address = e->mem[k].address;
                v[n].ref = e->mem[k].ref;
                n++;
            }
        }
    }
    free(match);
    if (n == 0) {
        free(v);
        return;
    }
    qsort(v, n, sizeof(*v), revive_cmp);
    uint64_t now = mc_master_now_locked(m);
    uint32_t hint = MC_ALLOC_HANDLE_NONE;
    size_t revived = 0, untrusted = 0, held = 0;
    for (size_t i = 0; i < n; i++) {
        mc_restore_entry_t *e = v[i].e;
        if (!e->trusted && e->has_checksum && e->size > 0) {
            /* the owner verifies its bytes first (fetch/confirm); reserved meanwhile */
            uint32_t handle;
            unsigned k = 0;
            while (k < e->nmem && e->mem[k].ref != v[i].ref)
                k++;
            if (mc_alloc_reserve(s->alloc, v[i].address, e->size, NULL, &handle, &hint) == 0) {
                if (verify_hold(m, e, k, slot, handle) == 0) {
                    held++;
                    continue;
                }
                mc_alloc_free(s->alloc, handle);
            }
            m->restore_expired++;
            replica_settled(m, e, v[i].ref, 0);
            continue;
        }
        int ok = -1;
        if (!e->trusted) {
            m->restore_untrusted++; /* no checksum to verify it by */
            untrusted++;
        } else {
            ok = revive_one(m, e, slot, v[i].address, MC_ALLOC_HANDLE_NONE, &hint, now);
        }
        revived += ok == 0;
        replica_settled(m, e, v[i].ref, ok == 0);
    }
    free(v);
    if (n > 0)
        MC_INFO("restore: segment %s of client %s re-mounted: %zu restored replicas visible, %zu "
                "held for the owner to verify, %zu dropped (untrusted without checksum: %zu)",
                s->info.id, client_id, revived, held, n - revived - held, untrusted);
}

/* The mounted segment `segment_id` when `client_id` owns it, else NULL (*rc says why). */
static mc_segment_t *owned_segment(mc_master_t *m, const char *client_id, const char *segment_id,
                                   uint32_t *slot, int *rc)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        mc_segment_t *s = m->segs[k];
        if (s && !strcmp(s->info.id, segment_id)) {
            if (strcmp(s->info.client_id, client_id) != 0) {
                *rc = MC_ERR_ILLEGAL_CLIENT;
                return NULL;
            }
            *slot = (uint32_t)k;
            return s;
        }
    }
    *rc = MC_ERR_SEGMENT_NOT_FOUND;
    return NULL;
}

int mc_master_restore_verify_fetch(mc_master_t *m, const char *client_id, const char *segment_id,
                                   uint64_t from, mc_restore_extent_t *out, size_t capacity,
                                   size_t *n, uint64_t *next)
{
    if (!m || !client_id || !segment_id || !n || !next || (capacity && !out))
        return MC_ERR_INVALID_PARAMS;
    *n = 0;
    *next = 0;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    uint32_t slot;
    mc_segment_t *s = owned_segment(m, client_id, segment_id, &slot, &rc);
    mc_restore_table_t *t = m->restore;
    if (s && t && t->items_open > 0) {
        size_t i = (size_t)(from < t->nitems ? from : t->nitems), scanned = 0;
        for (; i < t->nitems && *n < capacity && scanned < VERIFY_SCAN; i++, scanned++) {
            const verify_item_t *it = &t->items[i];
            if (it->done || it->slot != slot || it->gen != s->gen)
                continue;
            out[*n] = (mc_restore_extent_t){
                .id = i + 1, .address = it->address, .size = it->size, .checksum = it->checksum};
            (*n)++;
        }
        *next = i < t->nitems ? i : 0;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_restore_verify_confirm(mc_master_t *m, const char *client_id, const char *segment_id,
                                     const uint64_t *ids, const uint8_t *ok, size_t n,
                                     size_t *confirmed)
{
    if (!m || !client_id || !segment_id || (n && (!ids || !ok)))
        return MC_ERR_INVALID_PARAMS;
    if (confirmed)
        *confirmed = 0;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    uint32_t slot;
    mc_segment_t *s = owned_segment(m, client_id, segment_id, &slot, &rc);
    mc_restore_table_t *t = m->restore;
    uint64_t now = mc_master_now_locked(m);
    for (size_t j = 0; s && t && j < n; j++) {
        if (ids[j] == 0 || ids[j] > t->nitems)
            continue;
        verify_item_t *it = &t->items[ids[j] - 1];
        if (it->done || it->slot != slot || it->gen != s->gen)
            continue;
        it->done = 1;
        t->items_open--;
        mc_restore_entry_t *e = mc_restore_entry_find(m, it->key, it->key_len);
        unsigned k = 0;
        while (e && k < e->nmem &&
               !(e->mem[k].verifying && e->mem[k].slot == slot && e->mem[k].gen == s->gen))
            k++;
        if (!e || e->tag != it->tag || k == e->nmem)
            continue; /* superseded or dropped meanwhile: its reservation went with it */
        mc_restore_mem_t x = e->mem[k];
        e->mem[k].verifying = 0; /* the reservation passes to the object, or is freed here */
        int good = -1;
        if (ok[j]) {
            uint32_t hint = MC_ALLOC_HANDLE_NONE;
            good = revive_one(m, e, slot, x.address, x.handle, &hint, now);
            m->restore_verified += good == 0;
        } else {
            mc_alloc_free(s->alloc, x.handle);
            m->restore_verify_failed++;
        }
        if (confirmed && good == 0)
            (*confirmed)++;
        replica_settled(m, e, x.ref, good == 0);
    }
    if (t && t->items_open == 0 && t->nitems > 0) { /* all settled: start afresh */
        for (size_t i = 0; i < t->nitems; i++)
            free(t->items[i].key);
        t->nitems = 0;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static void restore_segment_gone(mc_master_t *m, uint32_t slot)
{
    mc_restore_table_t *t = m->restore;
    if (!t || t->items_open == 0)
        return;
    const mc_segment_t *s = mc_master_segment_locked(m, slot);
    for (size_t i = 0; i < t->cap; i++) {
        for (mc_restore_entry_t *e = t->b[i]; e; e = e->next) {
            for (unsigned k = 0; k < e->nmem; k++) {
                if (e->mem[k].verifying && e->mem[k].slot == slot && e->mem[k].gen == s->gen)
                    e->mem[k].verifying = 0; /* the extent goes with the segment; it may be
                                                re-mounted (and verified) again */
            }
        }
    }
    for (size_t i = 0; i < t->nitems; i++) {
        verify_item_t *it = &t->items[i];
        if (!it->done && it->slot == slot && it->gen == s->gen) {
            it->done = 1;
            t->items_open--;
        }
    }
}

static void restore_account(const mc_master_t *m, uint64_t *seg_used)
{
    const mc_restore_table_t *t = m->restore;
    for (size_t i = 0; t && t->items_open && i < t->cap; i++) {
        for (const mc_restore_entry_t *e = t->b[i]; e; e = e->next) {
            for (unsigned k = 0; k < e->nmem; k++) {
                const mc_segment_t *s = mc_master_segment_locked(m, e->mem[k].slot);
                if (e->mem[k].verifying && s && s->gen == e->mem[k].gen)
                    seg_used[e->mem[k].slot] += mc_alloc_extent_size(s->alloc, e->mem[k].handle);
            }
        }
    }
}

static void restore_sweep(mc_master_t *m, uint64_t now)
{
    mc_restore_table_t *t = m->restore;
    if (!t || t->count == 0 || t->hold || now < t->deadline)
        return;
    uint64_t dropped = 0;
    for (size_t i = 0; i < t->cap; i++) {
        for (mc_restore_entry_t *e = t->b[i], *n; e; e = n) {
            n = e->next;
            dropped += e->nmem;
            m->restore_expired += e->nmem;
            t->b[i] = n;
            t->count--;
            mc_object_t *o = mc_index_find(&m->index, e->key, e->key_len);
            if (o && o->complete && o->restore_tag == e->tag)
                mc_journal_set_locked(m, o); /* its hidden replicas are gone */
            else if (!o || !o->complete)
                mc_journal_del_locked(m, e->key, e->key_len);
            mc_restore_entry_free(m, e);
        }
    }
    for (size_t i = 0; i < t->nitems; i++)
        free(t->items[i].key);
    t->nitems = t->items_open = 0; /* their entries are gone */
    MC_WARN("restore: %" PRIu64 " restored memory replicas were not re-mounted by their owners "
            "within %d client TTLs: dropped",
            dropped, RESTORE_TTL_FACTOR);
}

static void restore_value_committing(mc_master_t *m, mc_object_t *o)
{
    /* a newer value supersedes the record */
    mc_restore_forget_locked(m, mc_object_key(o), o->key_len);
}

/* Restore comes first in the table: at a mount its reservations must precede anything that
 * could allocate in the new segment, and a committed key's stale record must be gone before the
 * commit is journaled (value_committing). */
const mc_master_ext_t mc_restore_extension = {
    .name = "restore",
    .fini = mc_restore_fini,
    .value_committing = restore_value_committing,
    .segment_mounted = restore_segment_mounted,
    .segment_gone = restore_segment_gone,
    .sweep = restore_sweep,
    .hides_key = mc_restore_hides_key_locked,
    .holds_eviction = mc_restore_pending_locked,
    .account = restore_account,
};
