/*
 * restore_table.c — the restore table (restore_table.h): imported records whose memory replicas
 * wait, hidden, for their owner's re-mount, in a chained hash by key, with the segments they
 * name interned. journal.c reads it (a key's record carries its hidden replicas) and restore.c
 * fills and empties it (import, revival, expiry); it calls neither, so both may call it.
 *
 * Locking: everything here runs under the master's lock (functions named *_locked expect it).
 */
#include "restore_table.h"

#include "master_internal.h"

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
    MC_MASTER_ASSERT_LOCKED(m);
    mc_restore_entry_t *e = mc_restore_entry_find(m, key, len);
    if (!e)
        return;
    mc_restore_entry_unlink(m->restore, e);
    m->restore_superseded++;
    mc_restore_entry_free(m, e);
}

int mc_restore_hides_key_locked(mc_master_t *m, const char *key, size_t len)
{
    MC_MASTER_ASSERT_LOCKED(m);
    return m->restore && m->restore->count > 0 && mc_restore_entry_find(m, key, len) != NULL;
}

int mc_restore_pending_locked(const mc_master_t *m)
{
    MC_MASTER_ASSERT_LOCKED(m);
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
