/*
 * offload.c — the master's side of offload (master_service.h, "offload"): which client writes
 * which object to disk, the disk replicas that result, and the file deletions owed to clients.
 *
 * State (master_internal.h, all under the master's lock):
 *  - an offloader record per client that registered with an offload heartbeat: its backend, two
 *    task rings (queued, leased) and a queue of its local files to delete;
 *  - per object, an mc_object_offload_t: its pending task (at most one) and its disk replicas;
 *  - a cluster-wide queue of DFS files to delete (any distributed client may delete them).
 *
 * A task pins its object's memory (eviction skips it) until it ends: done (a disk replica is
 * added), cancelled (the value was removed, replaced or its memory replica unmounted: a late
 * result is refused as stale and the client deletes what it wrote), or failed after
 * offload_max_attempts leases (counted and logged; the object stays memory-only). Nothing here
 * blocks: a put short of memory learns from mc_master_put_wait_ms (this file's put_wait_ms hook)
 * how long retrying may help, and the client retries.
 */
#include "master_internal.h"

#include "extension.h"

#include "log.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A file is named "<16 hex digits of version>/<key>"; keys longer than this cannot be offloaded
 * (the FS adapter's key limit is MC_MAX_KEY_LEN bytes). */
#define OFFLOAD_KEY_MAX (MC_MAX_KEY_LEN - 17)
/* Deletions waiting in one queue; beyond this the files are left behind (counted, logged). */
#define OFFLOAD_MAX_PENDING_DELETES (1u << 20)

/* ---- task rings ------------------------------------------------------------------------------ */

static void ring_init(mc_offload_task_t *head)
{
    head->next = head->prev = head;
}

static void ring_push_back(mc_offload_task_t *head, mc_offload_task_t *t)
{
    t->next = head;
    t->prev = head->prev;
    head->prev->next = t;
    head->prev = t;
}

static void ring_unlink(mc_offload_task_t *t)
{
    t->prev->next = t->next;
    t->next->prev = t->prev;
    t->next = t->prev = t;
}

/* ---- deletions ------------------------------------------------------------------------------ */

static void dlink_init(mc_dlink_t *head)
{
    head->next = head->prev = head;
}

static void dlink_push_back(mc_dlink_t *head, mc_dlink_t *l)
{
    l->next = head;
    l->prev = head->prev;
    head->prev->next = l;
    head->prev = l;
}

static void dlink_unlink(mc_dlink_t *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->next = l->prev = l;
}

#define DEL_OF_QLINK(l) ((mc_disk_delete_t *)((char *)(l)-offsetof(mc_disk_delete_t, qlink)))
#define DEL_OF_SLINK(l) ((mc_disk_delete_t *)((char *)(l)-offsetof(mc_disk_delete_t, slink)))

static void delq_init(mc_delete_queue_t *q)
{
    dlink_init(&q->waiting);
    dlink_init(&q->handed);
    q->nwaiting = q->nhanded = 0;
}

static uint64_t key_hash(const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    return h;
}

/* Takes d off whatever ring it is on (its queue's, or the graveyard). */
static void del_detach(mc_disk_delete_t *d)
{
    mc_delete_queue_t *q = d->queue;
    if (q && d->handed_ms)
        q->nhanded--;
    else if (q)
        q->nwaiting--;
    dlink_unlink(&d->qlink);
    d->queue = NULL;
    d->handed_ms = 0;
}

/* Puts d at the end of q's waiting ring (not handed out). */
static void del_enqueue(mc_delete_queue_t *q, mc_disk_delete_t *d)
{
    del_detach(d);
    d->queue = q;
    dlink_push_back(&q->waiting, &d->qlink);
    q->nwaiting++;
}

static void del_hash_grow(mc_master_t *m)
{
    size_t cap = m->del_hash_cap ? m->del_hash_cap * 2 : 1024;
    mc_disk_delete_t **b = calloc(cap, sizeof(*b));
    if (!b)
        return; /* chains just get longer */
    for (size_t i = 0; i < m->del_hash_cap; i++) {
        for (mc_disk_delete_t *d = m->del_hash[i], *next; d; d = next) {
            next = d->hnext;
            d->hnext = b[d->key_hash & (cap - 1)];
            b[d->key_hash & (cap - 1)] = d;
        }
    }
    free(m->del_hash);
    m->del_hash = b;
    m->del_hash_cap = cap;
}

/*
 * Records that file (key, version) must be deleted, by `owner` (or, owner NULL and type DFS, by
 * any distributed client), waiting on queue q. Returns the record, or NULL when the limit is
 * reached or memory is short (the file is left behind: counted, logged; a waiter for it then
 * times out, since nothing confirms it).
 */
static mc_disk_delete_t *del_create(mc_master_t *m, mc_delete_queue_t *q, mc_offloader_t *owner,
                                    uint8_t type, const char *key, uint64_t version, uint64_t size)
{
    size_t len = strlen(key);
    if (m->del_count >= OFFLOAD_MAX_PENDING_DELETES) {
        m->deletes_dropped++;
        MC_WARN("offload: %zu file deletions already pending; the file of %.64s (version "
                "%016" PRIx64 ") is left behind",
                m->del_count, key, version);
        return NULL;
    }
    if (m->del_count >= m->del_hash_cap)
        del_hash_grow(m);
    mc_disk_delete_t *d = m->del_hash_cap ? calloc(1, sizeof(*d) + len + 1) : NULL;
    if (!d) {
        m->deletes_dropped++;
        return NULL;
    }
    memcpy(d->key, key, len + 1);
    d->key_len = len;
    d->key_hash = key_hash(key, len);
    d->version = version;
    d->size = size;
    d->type = type;
    d->owner = owner;
    d->seq = ++m->del_seq;
    if (owner)
        snprintf(d->storage_id, sizeof(d->storage_id), "%s", owner->info.storage_id);
    dlink_init(&d->qlink);
    dlink_push_back(&m->deletes_by_seq, &d->slink);
    size_t b = d->key_hash & (m->del_hash_cap - 1);
    d->hnext = m->del_hash[b];
    m->del_hash[b] = d;
    m->del_count++;
    del_enqueue(q, d);
    return d;
}

static void del_free(mc_master_t *m, mc_disk_delete_t *d)
{
    del_detach(d);
    dlink_unlink(&d->slink);
    mc_disk_delete_t **pp = &m->del_hash[d->key_hash & (m->del_hash_cap - 1)];
    while (*pp != d)
        pp = &(*pp)->hnext;
    *pp = d->hnext;
    m->del_count--;
    free(d);
}

/* The record of file (key, version) of this type, or NULL. */
static mc_disk_delete_t *del_find(const mc_master_t *m, const char *key, size_t len,
                                  uint64_t version, uint8_t type)
{
    if (!m->del_hash_cap)
        return NULL;
    uint64_t h = key_hash(key, len);
    for (mc_disk_delete_t *d = m->del_hash[h & (m->del_hash_cap - 1)]; d; d = d->hnext) {
        if (d->key_hash == h && d->version == version && d->type == type && d->key_len == len &&
            memcmp(d->key, key, len) == 0)
            return d;
    }
    return NULL;
}

/*
 * Hands out up to `max` deletions of q to cb (which copies them); they move to the handed ring
 * until confirmed. Returns how many went.
 */
static size_t delq_hand_out(mc_delete_queue_t *q, size_t max, mc_disk_file_cb cb, void *arg,
                            uint64_t now)
{
    size_t n = 0;
    while (q->waiting.next != &q->waiting && n < max) {
        mc_disk_delete_t *d = DEL_OF_QLINK(q->waiting.next);
        mc_disk_file_desc_t f = {d->key, d->version, d->size};
        if (cb && cb(arg, &f) != 0)
            break;
        dlink_unlink(&d->qlink);
        q->nwaiting--;
        d->handed_ms = now ? now : 1;
        dlink_push_back(&q->handed, &d->qlink);
        q->nhanded++;
        n++;
    }
    return n;
}

/* Handed-out deletions not confirmed within timeout_ms go back to waiting (a lost reply). */
static void delq_expire(mc_delete_queue_t *q, uint64_t now, uint64_t timeout_ms)
{
    while (q->handed.next != &q->handed) {
        mc_disk_delete_t *d = DEL_OF_QLINK(q->handed.next);
        if (now - d->handed_ms < timeout_ms)
            break;
        del_enqueue(q, d);
    }
}

/*
 * A client confirms file (key, version) is gone (deleted, or never written). Only the client the
 * deletion is for may confirm a local one; any distributed client a DFS one no single client
 * must do. While the distributed root's rescan runs a confirmed DFS deletion stays as a
 * tombstone (the rescanner may have listed the file before it went). 0, or
 * MC_ERR_REPLICA_NOT_FOUND when nothing of that file is pending for this client.
 */
static int del_confirm(mc_master_t *m, mc_offloader_t *off, const char *key, size_t len,
                       uint64_t version)
{
    uint8_t type = off->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED ? MC_REPLICA_DFS
                                                                       : MC_REPLICA_LOCAL_DISK;
    mc_disk_delete_t *d = del_find(m, key, len, version, type);
    if (!d || !d->queue || (d->owner && d->owner != off) ||
        (!d->owner && d->queue != &m->dfs_deletes))
        return MC_ERR_REPLICA_NOT_FOUND;
    if (type == MC_REPLICA_DFS && m->dfs_recovery == MC_DFS_RECOVERY_RUNNING) {
        del_detach(d);
        dlink_push_back(&m->graveyard, &d->qlink);
        return 0;
    }
    del_free(m, d);
    return 0;
}

static void graveyard_free(mc_master_t *m)
{
    while (m->graveyard.next != &m->graveyard)
        del_free(m, DEL_OF_QLINK(m->graveyard.next));
}

/* Deletions not yet confirmed among seqs [from, to]: of `keys` (n > 0), or all (n == 0). */
static uint64_t del_pending(const mc_master_t *m, const char *const *keys, size_t n, uint64_t from,
                            uint64_t to)
{
    uint64_t pending = 0;
    if (n == 0) {
        for (const mc_dlink_t *l = m->deletes_by_seq.prev; l != &m->deletes_by_seq; l = l->prev) {
            const mc_disk_delete_t *d = DEL_OF_SLINK(l);
            if (d->seq < from)
                break;
            pending += d->seq <= to && d->queue != NULL;
        }
        return pending;
    }
    for (size_t i = 0; i < n && m->del_hash_cap; i++) {
        size_t len = strlen(keys[i]);
        uint64_t h = key_hash(keys[i], len);
        for (const mc_disk_delete_t *d = m->del_hash[h & (m->del_hash_cap - 1)]; d; d = d->hnext)
            pending += d->key_hash == h && d->key_len == len && !memcmp(d->key, keys[i], len) &&
                       d->seq >= from && d->seq <= to && d->queue != NULL;
    }
    return pending;
}

/* ---- offloaders ------------------------------------------------------------------------------ */

static mc_offloader_t *offloader_find(const mc_master_t *m, const char *client_id)
{
    for (size_t i = 0; i < m->n_offloaders; i++) {
        if (strcmp(m->offloaders[i]->client_id, client_id) == 0)
            return m->offloaders[i];
    }
    return NULL;
}

static mc_offloader_t *offloader_add(mc_master_t *m, const char *client_id)
{
    if (m->n_offloaders == m->offloaders_cap) {
        size_t cap = m->offloaders_cap ? m->offloaders_cap * 2 : 8;
        mc_offloader_t **v = realloc(m->offloaders, cap * sizeof(*v));
        if (!v)
            return NULL;
        m->offloaders = v;
        m->offloaders_cap = cap;
    }
    mc_offloader_t *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    snprintf(o->client_id, sizeof(o->client_id), "%s", client_id);
    ring_init(&o->queued);
    ring_init(&o->leased);
    delq_init(&o->deletes);
    m->offloaders[m->n_offloaders++] = o;
    /* The client's worker offloads from the segment of its setup, its first mount: segments it
     * mounts at run time (mc_store_allocate_and_mount_segment) are not offloaded. */
    mc_segment_t *first = NULL;
    for (size_t k = 0; k < m->seg_cap; k++) {
        mc_segment_t *s = m->segs[k];
        if (s && strcmp(s->info.client_id, client_id) == 0 && (!first || s->gen < first->gen))
            first = s;
    }
    if (first)
        first->offloader = o;
    return o;
}

static int offloader_takes_tasks(const mc_offloader_t *o)
{
    return o && o->info.offloading && o->info.healthy;
}

mc_offloader_t *mc_offload_find_locked(const mc_master_t *m, const char *client_id)
{
    MC_MASTER_ASSERT_LOCKED(m);
    return offloader_find(m, client_id);
}

int mc_offload_takes_tasks(const mc_offloader_t *o)
{
    return offloader_takes_tasks(o);
}

/* ---- object offload state -------------------------------------------------------------------- */

static mc_object_offload_t *offload_state(mc_object_t *o)
{
    if (!o->offload)
        o->offload = calloc(1, sizeof(*o->offload));
    return o->offload;
}

static void offload_state_trim(mc_object_t *o)
{
    if (o->offload && !o->offload->task && !o->offload->promotion && o->offload->ndisk == 0) {
        free(o->offload);
        o->offload = NULL;
    }
}

static int disk_add(mc_object_t *o, uint8_t type, uint64_t version, mc_offloader_t *owner)
{
    mc_object_offload_t *st = offload_state(o);
    if (!st)
        return MC_ERR_INTERNAL_ERROR;
    if (st->ndisk == MC_MAX_DISK_REPLICAS) {
        offload_state_trim(o);
        return MC_ERR_REPLICA_ALREADY_EXISTS;
    }
    st->disk[st->ndisk++] = (mc_disk_replica_t){
        .version = version, .owner = type == MC_REPLICA_LOCAL_DISK ? owner : NULL, .type = type};
    return 0;
}

/* Index of o's disk replica (version, owner) or -1; a DFS replica matches any owner. */
static int disk_find(const mc_object_t *o, uint64_t version, const mc_offloader_t *owner)
{
    const mc_object_offload_t *st = o->offload;
    for (unsigned i = 0; st && i < st->ndisk; i++) {
        if (st->disk[i].version == version &&
            (st->disk[i].type == MC_REPLICA_DFS || st->disk[i].owner == owner))
            return (int)i;
    }
    return -1;
}

static void disk_remove_at(mc_object_t *o, unsigned i)
{
    mc_object_offload_t *st = o->offload;
    st->disk[i] = st->disk[--st->ndisk];
    offload_state_trim(o);
}

/* Queues the deletion of o's disk replica i (its file outlives the replica). */
static void disk_queue_delete(mc_master_t *m, const mc_object_t *o, const mc_disk_replica_t *d)
{
    if (d->type == MC_REPLICA_DFS)
        del_create(m, &m->dfs_deletes, NULL, MC_REPLICA_DFS, mc_object_key(o), d->version, o->size);
    else
        del_create(m, &d->owner->deletes, d->owner, MC_REPLICA_LOCAL_DISK, mc_object_key(o),
                   d->version, o->size);
}

/*
 * Task t is dropped before its result came: if it was ever handed out, its writer may still
 * publish the file (or has, and crashed before reporting). That file must go too — and only that
 * writer can be sure no rename of it is still to come, so the deletion is its own (a DFS one
 * included; it goes to any distributed client only if the writer leaves).
 */
static void task_forget_write(mc_master_t *m, const mc_offload_task_t *t)
{
    if (t->attempts == 0)
        return;
    uint8_t type = t->owner->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED ? MC_REPLICA_DFS
                                                                            : MC_REPLICA_LOCAL_DISK;
    del_create(m, &t->owner->deletes, t->owner, type, mc_object_key(t->obj), t->version,
               t->obj->size);
}

/* ---- tasks ----------------------------------------------------------------------------------- */

static void task_unlink(mc_master_t *m, mc_offload_task_t *t)
{
    ring_unlink(t);
    if (t->lease_until)
        t->owner->n_leased--;
    else
        t->owner->n_queued--;
    m->tasks_outstanding--;
}

/* Ends a task (done, cancelled or failed): the object is unpinned. */
static void task_end(mc_master_t *m, mc_offload_task_t *t)
{
    task_unlink(m, t);
    mc_object_t *o = t->obj;
    o->offload->task = NULL;
    offload_state_trim(o);
    free(t);
    m->evict_retry_at = 0; /* the object may be an eviction candidate now */
}

static void task_enqueue(mc_master_t *m, mc_offload_task_t *t, uint64_t now)
{
    t->lease_until = 0;
    t->queued_ms = now;
    ring_push_back(&t->owner->queued, t);
    t->owner->n_queued++;
    m->tasks_outstanding++;
}

/* A lease expired or a write failed: queue the task again, or fail it after its last attempt. */
static void task_retry_or_fail(mc_master_t *m, mc_offload_task_t *t, uint64_t now, const char *why)
{
    task_unlink(m, t);
    if (t->attempts - t->unanswered >= m->cfg.offload_max_attempts) {
        m->offload_failed++;
        MC_WARN("offload of %.64s (%" PRIu64 " bytes) by client %s failed after %u attempts (%s); "
                "the object stays in memory only",
                mc_object_key(t->obj), t->obj->size, t->owner->client_id, t->attempts, why);
        t->obj->offload->task = NULL;
        offload_state_trim(t->obj);
        free(t);
        m->evict_retry_at = 0;
        return;
    }
    m->offload_retried++;
    MC_VLOG(1, "offload of %.64s by client %s: %s; queued again (attempt %u of %u)",
            mc_object_key(t->obj), t->owner->client_id, why, t->attempts + 1,
            m->cfg.offload_max_attempts);
    task_enqueue(m, t, now);
}

/*
 * Queues an offload of o's value to the offloading owner of one of its memory replicas. Returns 1
 * when queued, 0 when no replica's owner takes tasks (or its queue is full, or the key is too
 * long for a file name).
 */
static int task_create(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    assert(o->complete && !mc_offload_pinned(o));
    if (o->size == 0 || o->key_len > OFFLOAD_KEY_MAX)
        return 0;
    mc_offloader_t *owner = NULL;
    mc_replica_ref_t src = {0};
    for (unsigned i = 0; i < o->nrep && !owner; i++) {
        mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
        if (s && offloader_takes_tasks(s->offloader)) {
            owner = s->offloader;
            src = o->rep[i];
        }
    }
    if (!owner)
        return 0;
    if (owner->n_queued + owner->n_leased >= m->cfg.offloading_queue_limit) {
        if (m->offload_skipped++ % 1000 == 0)
            MC_WARN("offload: client %s already has %zu tasks (--offloading_queue_limit); %.64s "
                    "is not queued (%" PRIu64 " skipped so far)",
                    owner->client_id, owner->n_queued + owner->n_leased, mc_object_key(o),
                    m->offload_skipped);
        return 0;
    }
    mc_offload_task_t *t = calloc(1, sizeof(*t));
    mc_object_offload_t *st = t ? offload_state(o) : NULL;
    if (!st) {
        free(t);
        return 0;
    }
    t->obj = o;
    t->owner = owner;
    t->id = ++m->next_task_id;
    t->version = ++m->next_version;
    t->src = src;
    st->task = t;
    task_enqueue(m, t, now);
    return 1;
}

/* ---- hooks from the rest of the master ------------------------------------------------------- */

static void offload_value_committed(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    if (!m->cfg.enable_offload || m->cfg.offload_on_evict || mc_offload_pinned(o) ||
        mc_offload_ndisk(o) > 0)
        return;
    task_create(m, o, now);
}

static int offload_evict_instead(mc_master_t *m, mc_object_t *o, uint64_t now)
{
    if (!m->cfg.enable_offload || !m->cfg.offload_on_evict)
        return 0;
    return task_create(m, o, now);
}

/* After promotion's hook (table order): its promotion of `o` is already cancelled. */
static void offload_value_discarding(mc_master_t *m, mc_object_t *o)
{
    mc_object_offload_t *st = o->offload;
    if (!st)
        return;
    if (st->task) {
        mc_offload_task_t *t = st->task;
        task_forget_write(m, t);
        task_unlink(m, t);
        free(t);
        st->task = NULL;
    }
    for (unsigned i = 0; i < st->ndisk; i++)
        disk_queue_delete(m, o, &st->disk[i]);
    free(st);
    o->offload = NULL;
}

static void offload_replica_lost(mc_master_t *m, mc_object_t *o, uint32_t slot)
{
    if (mc_offload_pinned(o) && o->offload->task->src.seg == slot) {
        task_forget_write(m, o->offload->task);
        task_end(m, o->offload->task);
    }
}

static void offload_object_moved(mc_object_t *n)
{
    if (n->offload && n->offload->task)
        n->offload->task->obj = n;
}

static void offload_segment_mounted(mc_master_t *m, uint32_t slot)
{
    mc_segment_t *s = mc_master_segment_locked(m, slot);
    mc_offloader_t *off = offloader_find(m, s->info.client_id);
    for (size_t k = 0; off && k < m->seg_cap; k++) {
        if (m->segs[k] && m->segs[k] != s && m->segs[k]->offloader == off)
            return; /* it offloads from another segment (see offloader_add) */
    }
    s->offloader = off;
}

/* Drops an offloader: its tasks end (objects unpinned), its local-disk replicas go. */
static void offloader_remove(mc_master_t *m, mc_offloader_t *off)
{
    mc_master_executor_gone_locked(m, off); /* its promotions end first */
    mc_offload_task_t *rings[2] = {&off->queued, &off->leased};
    for (int r = 0; r < 2; r++) {
        while (rings[r]->next != rings[r])
            task_end(m, rings[r]->next);
    }
    /* Objects that lose their last replica are deleted: collect first, the index must not change
     * while it is iterated. */
    size_t cap = mc_index_count(&m->index), n = 0, cursor = 0;
    mc_object_t **hit = malloc((cap + 1) * sizeof(*hit));
    mc_object_t *o;
    while (hit && (o = mc_index_next(&m->index, &cursor)) != NULL) {
        for (unsigned i = 0; o->offload && i < o->offload->ndisk; i++) {
            if (o->offload->disk[i].owner == off) {
                hit[n++] = o;
                break;
            }
        }
    }
    if (!hit)
        MC_ERROR("offload: out of memory dropping the local-disk replicas of client %s",
                 off->client_id);
    size_t lost = 0;
    for (size_t j = 0; j < n; j++) {
        o = hit[j];
        for (unsigned i = 0; o->offload && i < o->offload->ndisk;) {
            if (o->offload->disk[i].owner == off)
                disk_remove_at(o, i);
            else
                i++;
        }
        if (o->complete && o->nrep == 0 && mc_offload_ndisk(o) == 0) {
            mc_master_value_lost_locked(m, o);
            lost++;
        } else {
            mc_journal_set_locked(m, o);
        }
    }
    free(hit);
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k] && m->segs[k]->offloader == off)
            m->segs[k]->offloader = NULL;
    }
    if (m->dfs_rescanner == off) {
        m->dfs_rescanner = NULL;
        m->dfs_recovery = MC_DFS_RECOVERY_NEEDED; /* the next distributed offloader rescans */
    }
    /* Its deletions outlive it: a local file's goes to the client that already has its storage
     * back (it restarted), or waits for it, parked by storage id; a DFS file (of its cancelled
     * writes) is left to any distributed client. */
    mc_offloader_t *heir = NULL; /* a newer client of the same local storage (a restart) */
    for (size_t i = 0; i < m->n_offloaders && off->info.storage_id[0]; i++) {
        mc_offloader_t *o = m->offloaders[i];
        if (o != off && o->info.backend == MC_OFFLOAD_BACKEND_LOCAL &&
            !strcmp(o->info.storage_id, off->info.storage_id))
            heir = o;
    }
    size_t parked = 0;
    mc_dlink_t *dels[2] = {&off->deletes.waiting, &off->deletes.handed};
    for (int r = 0; r < 2; r++) {
        while (dels[r]->next != dels[r]) {
            mc_disk_delete_t *d = DEL_OF_QLINK(dels[r]->next);
            if (d->type == MC_REPLICA_DFS) {
                d->owner = NULL;
                del_enqueue(&m->dfs_deletes, d);
            } else {
                d->owner = heir;
                parked += !heir;
                del_enqueue(heir ? &heir->deletes : &m->parked, d);
            }
        }
    }
    if (parked)
        MC_WARN("offload: client %s left with %zu of its files still to delete; they are deleted "
                "when a client with its storage (%s) registers",
                off->client_id, parked, off->info.storage_id[0] ? off->info.storage_id : "none");
    for (size_t i = 0; i < m->n_offloaders; i++) {
        if (m->offloaders[i] == off) {
            m->offloaders[i] = m->offloaders[--m->n_offloaders];
            break;
        }
    }
    MC_INFO("offload: client %s no longer offloads (%zu local-disk replicas dropped, %zu objects "
            "lost)",
            off->client_id, n, lost);
    free(off);
}

static void offload_client_gone(mc_master_t *m, const char *client_id)
{
    mc_offloader_t *off = offloader_find(m, client_id);
    if (off)
        offloader_remove(m, off);
}

/* After promotion's sweep (table order). */
static void offload_sweep(mc_master_t *m, uint64_t now)
{
    delq_expire(&m->dfs_deletes, now, m->cfg.offload_task_timeout_ms);
    for (size_t i = 0; i < m->n_offloaders; i++) {
        mc_offloader_t *off = m->offloaders[i];
        delq_expire(&off->deletes, now, m->cfg.offload_task_timeout_ms);
        for (mc_offload_task_t *t = off->leased.next, *next; t != &off->leased; t = next) {
            next = t->next;
            if (t->lease_until <= now)
                task_retry_or_fail(m, t, now, "lease expired");
        }
        /* Queued tasks of a client that does not take them (unhealthy, paused or silent) age
         * out like leases, so their objects are not pinned for ever. */
        int idle = !offloader_takes_tasks(off) ||
                   now - off->last_heartbeat_ms > m->cfg.offload_task_timeout_ms;
        if (!idle)
            continue;
        for (mc_offload_task_t *t = off->queued.next, *next; t != &off->queued; t = next) {
            next = t->next;
            if (now - t->queued_ms > m->cfg.offload_task_timeout_ms) {
                t->attempts++;
                task_retry_or_fail(m, t, now, "the client does not take tasks");
            }
        }
    }
}

/* ---- heartbeat ------------------------------------------------------------------------------- */

static const char *backend_name(int b)
{
    return b == MC_OFFLOAD_BACKEND_LOCAL         ? "local"
           : b == MC_OFFLOAD_BACKEND_DISTRIBUTED ? "distributed"
                                                 : "none";
}

static size_t dfs_replica_count(const mc_master_t *m, size_t *distributed_offloaders)
{
    *distributed_offloaders = 0;
    for (size_t i = 0; i < m->n_offloaders; i++)
        *distributed_offloaders += m->offloaders[i]->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED;
    size_t n = 0, cursor = 0;
    const mc_object_t *o;
    while ((o = mc_index_next(&m->index, &cursor)) != NULL) {
        for (unsigned i = 0; o->offload && i < o->offload->ndisk; i++)
            n += o->offload->disk[i].type == MC_REPLICA_DFS;
    }
    return n;
}

/* 1 when two directory paths are the same text but for trailing slashes. */
static int same_dir(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (lb > 1 && b[lb - 1] == '/')
        lb--;
    return la == lb && memcmp(a, b, la) == 0;
}

/* Checks a client's backend against the cluster's; 0 or MC_ERR_INVALID_PARAMS with msg. */
static int backend_check(mc_master_t *m, const mc_offloader_info_t *in, const char *client_id,
                         char *msg, size_t msglen)
{
    if (in->backend != MC_OFFLOAD_BACKEND_LOCAL && in->backend != MC_OFFLOAD_BACKEND_DISTRIBUTED) {
        snprintf(msg, msglen, "unknown offload backend %d", in->backend);
        return MC_ERR_INVALID_PARAMS;
    }
    if (m->cfg.offload_backend == MC_OFFLOAD_BACKEND_LOCAL &&
        in->backend == MC_OFFLOAD_BACKEND_DISTRIBUTED) {
        snprintf(msg, msglen,
                 "the master declares --offload-backend local; this client uses the distributed "
                 "backend");
        return MC_ERR_INVALID_PARAMS;
    }
    if (in->backend == MC_OFFLOAD_BACKEND_LOCAL)
        return 0;
    const char *fs = m->cfg.offload_backend == MC_OFFLOAD_BACKEND_DISTRIBUTED
                         ? m->cfg.distributed_fs_type
                         : m->seen_fs_type;
    if (fs[0] && strcmp(fs, in->fs_type) != 0) {
        snprintf(msg, msglen,
                 "the cluster's distributed fs type is %s; this client uses %s (set "
                 "MOONCAKE_DISTRIBUTED_FS_TYPE=%s)",
                 fs, in->fs_type, fs);
        return MC_ERR_INVALID_PARAMS;
    }
    if (!in->storage_id[0]) {
        snprintf(msg, msglen, "the distributed backend reported no storage id");
        return MC_ERR_INVALID_PARAMS;
    }
    /* The master's --distributed-root-dir defines the cluster's storage: a client pointed
     * elsewhere would register another storage, and every other client would be refused. */
    if (m->cfg.distributed_root_dir[0] && in->root_dir[0] &&
        !same_dir(m->cfg.distributed_root_dir, in->root_dir)) {
        snprintf(msg, msglen,
                 "this client's MOONCAKE_DISTRIBUTED_ROOT_DIR is %s but the master's "
                 "--distributed-root-dir is %s: give every client the master's root",
                 in->root_dir, m->cfg.distributed_root_dir);
        return MC_ERR_INVALID_PARAMS;
    }
    if (m->dfs_storage_id[0] && strcmp(m->dfs_storage_id, in->storage_id) != 0) {
        size_t others;
        size_t replicas = dfs_replica_count(m, &others);
        const mc_offloader_t *self = offloader_find(m, client_id);
        if (self && self->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED)
            others--;
        if (replicas > 0 || others > 0) {
            snprintf(msg, msglen,
                     "this client's distributed root is different storage (cluster id %s) from "
                     "the cluster's (cluster id %s): every client must mount the same storage",
                     in->storage_id, m->dfs_storage_id);
            return MC_ERR_INVALID_PARAMS;
        }
        MC_INFO("offload: no distributed replica or client is left; the cluster's storage is now "
                "%s (was %s)",
                in->storage_id, m->dfs_storage_id);
    }
    if (!m->dfs_storage_id[0] || strcmp(m->dfs_storage_id, in->storage_id) != 0)
        snprintf(m->dfs_storage_id, sizeof(m->dfs_storage_id), "%s", in->storage_id);
    if (!m->seen_fs_type[0])
        snprintf(m->seen_fs_type, sizeof(m->seen_fs_type), "%s", in->fs_type);
    return 0;
}

/* A local holder's storage is back: the deletions of files in it that waited are its own now. */
static void adopt_parked(mc_master_t *m, mc_offloader_t *off)
{
    size_t n = 0;
    for (mc_dlink_t *l = m->parked.waiting.next, *next; l != &m->parked.waiting; l = next) {
        next = l->next;
        mc_disk_delete_t *d = DEL_OF_QLINK(l);
        if (strcmp(d->storage_id, off->info.storage_id) != 0)
            continue;
        d->owner = off;
        del_enqueue(&off->deletes, d);
        n++;
    }
    if (n)
        MC_INFO("offload: client %s has the storage %s back: %zu of its files to delete",
                off->client_id, off->info.storage_id, n);
}

/* `off` reported every file it was asked for (its own, and the root's when it rescanned). */
static void recovery_reported(mc_master_t *m, mc_offloader_t *off)
{
    off->reporting = 0;
    if (m->dfs_recovery == MC_DFS_RECOVERY_RUNNING && m->dfs_rescanner == off) {
        m->dfs_recovery = MC_DFS_RECOVERY_DONE;
        m->dfs_rescanner = NULL;
        graveyard_free(m); /* no listing is left that could bring those files back */
        MC_INFO("offload: the distributed root is rescanned (%" PRIu64 " files recovered so far)",
                m->recovered_files);
    }
}

/* A newly registered offloader gets the objects already in its segments (eager offload). */
static void queue_existing(mc_master_t *m, mc_offloader_t *off, uint64_t now)
{
    if (m->cfg.offload_on_evict || !offloader_takes_tasks(off))
        return;
    size_t cursor = 0, queued = 0;
    mc_object_t *o;
    while ((o = mc_index_next(&m->index, &cursor)) != NULL) {
        if (!o->complete || mc_offload_pinned(o) || mc_offload_ndisk(o) > 0)
            continue;
        for (unsigned i = 0; i < o->nrep; i++) {
            mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
            if (s && s->offloader == off) {
                queued += (size_t)task_create(m, o, now);
                break;
            }
        }
    }
    if (queued)
        MC_INFO("offload: %zu objects already in the segments of client %s queued for offload",
                queued, off->client_id);
}

int mc_master_offload_heartbeat(mc_master_t *m, const char *client_id,
                                const mc_offloader_info_t *info, int leaving,
                                const uint64_t *inflight, size_t n_inflight, size_t max_tasks,
                                size_t max_deletions, mc_offload_task_cb on_task,
                                mc_disk_file_cb on_delete, void *arg,
                                mc_offload_heartbeat_out_t *out, char *msg, size_t msglen)
{
    if (!m || !client_id || !info || !out || (n_inflight && !inflight))
        return MC_ERR_INVALID_PARAMS;
    memset(out, 0, sizeof(*out));
    if (msg && msglen)
        msg[0] = '\0';
    char scratch[8];
    if (!msg) {
        msg = scratch;
        msglen = sizeof(scratch);
    }
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    out->lease_ms = m->cfg.offload_task_timeout_ms;
    int rc = 0;
    mc_offloader_t *off = NULL;
    if (!m->cfg.enable_offload) {
        rc = MC_ERR_UNABLE_OFFLOAD;
        snprintf(msg, msglen, "the master runs without --enable_offload");
    } else if (!mc_master_client_locked(m, client_id)) {
        rc = MC_ERR_CLIENT_NOT_FOUND;
        snprintf(msg, msglen, "unknown client %s: mount or remount first", client_id);
    } else if (leaving) {
        off = offloader_find(m, client_id);
        if (off)
            offloader_remove(m, off);
        off = NULL;
    } else {
        rc = backend_check(m, info, client_id, msg, msglen);
    }
    if (rc == 0 && !leaving) {
        if (!m->seen_backend)
            m->seen_backend = info->backend;
        off = offloader_find(m, client_id);
        if (!off && info->offloading) {
            off = offloader_add(m, client_id);
            if (!off)
                rc = MC_ERR_INTERNAL_ERROR;
            else {
                out->resync = 1;
                MC_INFO("offload: client %s offloads to its %s backend%s%s%s", client_id,
                        backend_name(info->backend), info->endpoint[0] ? " (reads at " : "",
                        info->endpoint, info->endpoint[0] ? ")" : "");
            }
        }
    }
    if (rc == 0 && off) {
        if (out->resync)
            off->reporting = 1;
        else if (info->resync_done)
            recovery_reported(m, off);
        if (info->backend == MC_OFFLOAD_BACKEND_DISTRIBUTED && info->offloading && info->healthy &&
            (m->dfs_recovery == MC_DFS_RECOVERY_NEEDED ||
             (m->dfs_recovery == MC_DFS_RECOVERY_RUNNING && m->dfs_rescanner == off))) {
            if (m->dfs_recovery == MC_DFS_RECOVERY_NEEDED)
                MC_INFO("offload: client %s lists the distributed root %s and reports its files",
                        client_id, m->dfs_storage_id);
            m->dfs_recovery = MC_DFS_RECOVERY_RUNNING;
            m->dfs_rescanner = off;
            out->rescan = 1;
        }
        int was_taking = offloader_takes_tasks(off) || out->resync;
        if (off->info.healthy && !info->healthy && !out->resync)
            MC_WARN("offload: client %s reports its backend unhealthy; it takes no tasks",
                    client_id);
        else if (!off->info.healthy && info->healthy && !out->resync)
            MC_INFO("offload: client %s reports its backend healthy again", client_id);
        off->info = *info;
        off->last_heartbeat_ms = now;
        if (out->resync && info->backend == MC_OFFLOAD_BACKEND_LOCAL && info->storage_id[0])
            adopt_parked(m, off);
        if (out->resync || (!was_taking && offloader_takes_tasks(off)))
            queue_existing(m, off, now);
        for (size_t i = 0; i < n_inflight; i++) {
            for (mc_offload_task_t *t = off->leased.next; t != &off->leased; t = t->next) {
                if (t->id == inflight[i]) {
                    t->lease_until = now + m->cfg.offload_task_timeout_ms;
                    break;
                }
            }
        }
        for (size_t i = 0;
             offloader_takes_tasks(off) && i < max_tasks && off->queued.next != &off->queued; i++) {
            mc_offload_task_t *t = off->queued.next;
            mc_offload_task_desc_t d = {
                .task_id = t->id,
                .key = mc_object_key(t->obj),
                .size = t->obj->size,
                .address = mc_alloc_extent_addr(mc_master_segment_locked(m, t->src.seg)->alloc,
                                                t->src.handle),
                .version = t->version,
                .has_checksum = t->obj->has_checksum,
                .checksum = t->obj->checksum,
            };
            if (on_task && on_task(arg, &d) != 0)
                break;
            ring_unlink(t);
            off->n_queued--;
            t->lease_until = now + m->cfg.offload_task_timeout_ms;
            t->attempts++;
            ring_push_back(&off->leased, t);
            off->n_leased++;
        }
        if (info->offloading) {
            size_t sent = delq_hand_out(&off->deletes, max_deletions, on_delete, arg, now);
            if (info->backend == MC_OFFLOAD_BACKEND_DISTRIBUTED && info->healthy)
                delq_hand_out(&m->dfs_deletes, max_deletions - sent, on_delete, arg, now);
        }
        out->remaining = off->n_queued + off->n_leased;
        out->promotions =
            offloader_takes_tasks(off) ? mc_master_executor_backlog_locked(m, off) : 0;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* ---- results, recovery, disk eviction -------------------------------------------------------- */

/* The highest version among o's disk replicas. */
static uint64_t disk_max_version(const mc_object_t *o)
{
    uint64_t v = 0;
    for (unsigned i = 0; o->offload && i < o->offload->ndisk; i++)
        v = o->offload->disk[i].version > v ? o->offload->disk[i].version : v;
    return v;
}

/* Makes o (no readable value yet) the recovered value of file r. */
static int recover_value(mc_master_t *m, mc_object_t *o, uint8_t type, mc_offloader_t *off,
                         const mc_offload_result_t *r, uint64_t now)
{
    int rc = disk_add(o, type, r->version, off);
    if (rc != 0)
        return rc;
    o->offload->recovered = 1;
    o->size = r->size;
    o->complete = 1;
    o->complete_ms = now;
    o->has_checksum = r->has_checksum;
    o->checksum = r->checksum;
    m->complete_count++;
    return 0;
}

/* A recovered value gives way to a file of a higher version of its key: the older files go. */
static int recover_newer(mc_master_t *m, mc_object_t *o, uint8_t type, mc_offloader_t *off,
                         const mc_offload_result_t *r)
{
    mc_object_offload_t *st = o->offload;
    while (st->ndisk > 0) {
        disk_queue_delete(m, o, &st->disk[st->ndisk - 1]);
        st->ndisk--;
    }
    st->disk[st->ndisk++] = (mc_disk_replica_t){
        .version = r->version, .owner = type == MC_REPLICA_LOCAL_DISK ? off : NULL, .type = type};
    o->size = r->size;
    o->has_checksum = r->has_checksum;
    o->checksum = r->checksum;
    return 0;
}

/*
 * A rescanned file (task id 0). Versions grow with every value of a key (and across master
 * restarts), so the outcome does not depend on the order files are reported in:
 *  - unknown key: the file is the key's value again;
 *  - the file is one of the key's disk replicas already: recorded once (several clients may
 *    rescan one shared root; a local holder restarted before its old incarnation expired takes
 *    its files over);
 *  - an offload in flight is writing exactly this file: left alone;
 *  - the key's value is itself recovered and older: the file replaces it;
 *  - otherwise (an older recovered file, or a value put through this master): obsolete.
 */
static int notify_recovered(mc_master_t *m, mc_offloader_t *off, const mc_offload_result_t *r,
                            size_t len, uint64_t now)
{
    uint8_t type = off->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED ? MC_REPLICA_DFS
                                                                       : MC_REPLICA_LOCAL_DISK;
    if (r->size > MC_MAX_VALUE_SIZE || r->size == 0)
        return MC_ERR_INVALID_PARAMS;
    if (del_find(m, r->key, len, r->version, type))
        return MC_ERR_OBJECT_ALREADY_EXISTS; /* its value was discarded: the file goes */
    int rc = 0;
    mc_object_t *o = mc_index_find(&m->index, r->key, len);
    if (!o) {
        o = mc_object_new(r->key, len, 1);
        if (!o || mc_index_insert(&m->index, o) != 0) {
            mc_object_free(o);
            return MC_ERR_INTERNAL_ERROR;
        }
        rc = recover_value(m, o, type, off, r, now);
        if (rc != 0) {
            mc_index_remove(&m->index, o);
            mc_object_free(o);
            return rc;
        }
    } else if (!o->complete) {
        /* A put in progress on a key with no readable value: the file is its value until that
         * put commits (and replaces it, deleting the file) or is revoked. */
        rc = recover_value(m, o, type, off, r, now);
    } else {
        mc_object_offload_t *st = o->offload;
        for (unsigned i = 0; st && i < st->ndisk; i++) {
            mc_disk_replica_t *d = &st->disk[i];
            if (d->version != r->version || d->type != type)
                continue;
            if (type == MC_REPLICA_LOCAL_DISK)
                d->owner = off; /* the file is where its latest reporter is */
            return 0;
        }
        if (st && st->task && st->task->version == r->version)
            return MC_ERR_REPLICA_IS_NOT_READY;
        if (!(st && st->recovered && o->nrep == 0 && !st->task) ||
            r->version <= disk_max_version(o))
            return MC_ERR_OBJECT_ALREADY_EXISTS;
        rc = recover_newer(m, o, type, off, r);
    }
    if (rc != 0)
        return rc;
    m->recovered_files++;
    if (r->version > m->next_version)
        m->next_version = r->version; /* keep new versions above every file seen */
    return 0;
}

static int notify_one(mc_master_t *m, mc_offloader_t *off, const mc_offload_result_t *r,
                      uint64_t now)
{
    size_t len = r->key ? strnlen(r->key, MC_MAX_KEY_LEN + 1) : 0;
    if (len == 0 || len > MC_MAX_KEY_LEN)
        return MC_ERR_INVALID_KEY;
    if (r->task_id == 0 && r->code == MC_ERR_FILE_NOT_FOUND)
        return del_confirm(m, off, r->key, len, r->version);
    if (r->task_id == 0)
        return r->code == 0 ? notify_recovered(m, off, r, len, now) : 0;
    mc_object_t *o = mc_index_find(&m->index, r->key, len);
    mc_offload_task_t *t = o && o->offload ? o->offload->task : NULL;
    if (!t || t->id != r->task_id || t->owner != off || !t->lease_until)
        return MC_ERR_TASK_NOT_FOUND;
    if (r->code != 0) {
        char why[64];
        snprintf(why, sizeof(why), "the client reported %s", mc_error_name(r->code));
        if (r->code == MC_ERR_DFS_NETWORK_TIMEOUT || r->code == MC_ERR_DFS_SERVICE_UNAVAILABLE)
            t->unanswered++;
        task_retry_or_fail(m, t, now, why);
        return 0;
    }
    if (r->version != t->version || r->size != o->size) {
        task_retry_or_fail(m, t, now, "the client reported another version or size");
        return MC_ERR_TASK_NOT_FOUND;
    }
    uint8_t type = off->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED ? MC_REPLICA_DFS
                                                                       : MC_REPLICA_LOCAL_DISK;
    int rc = disk_add(o, type, r->version, off);
    task_end(m, t);
    if (rc != 0)
        return rc == MC_ERR_REPLICA_ALREADY_EXISTS ? MC_ERR_TASK_NOT_FOUND : rc;
    m->offload_done++;
    m->offload_bytes += o->size;
    mc_journal_set_locked(m, o);
    return 0;
}

int mc_master_offload_notify(mc_master_t *m, const char *client_id,
                             const mc_offload_result_t *results, size_t n, int *codes)
{
    if (!m || !client_id || (n && (!results || !codes)))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    mc_offloader_t *off = offloader_find(m, client_id);
    int rc = off ? 0 : MC_ERR_CLIENT_NOT_FOUND;
    for (size_t i = 0; off && i < n; i++)
        codes[i] = notify_one(m, off, &results[i], now);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_evict_disk_replicas(mc_master_t *m, const char *client_id,
                                  const mc_disk_file_desc_t *files, size_t n, int *codes)
{
    if (!m || !client_id || (n && (!files || !codes)))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_offloader_t *off = offloader_find(m, client_id);
    int rc = off ? 0 : MC_ERR_CLIENT_NOT_FOUND;
    for (size_t i = 0; off && i < n; i++) {
        size_t len = files[i].key ? strnlen(files[i].key, MC_MAX_KEY_LEN + 1) : 0;
        mc_object_t *o =
            len && len <= MC_MAX_KEY_LEN ? mc_index_find(&m->index, files[i].key, len) : NULL;
        int at = o ? disk_find(o, files[i].version, off) : -1;
        codes[i] = at < 0 ? MC_ERR_REPLICA_NOT_FOUND : 0;
        if (at < 0)
            continue;
        disk_remove_at(o, (unsigned)at);
        m->disk_evicted++;
        if (o->complete && o->nrep == 0 && mc_offload_ndisk(o) == 0)
            mc_master_value_lost_locked(m, o);
        else
            mc_journal_set_locked(m, o);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static uint64_t offload_put_wait_ms(const mc_master_t *m, uint64_t size)
{
    uint64_t aligned = (size + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
    return m->cfg.enable_offload && m->tasks_outstanding > 0 && aligned <= m->largest_capacity
               ? m->cfg.offload_put_wait_ms
               : 0;
}

uint64_t mc_master_offload_ping(mc_master_t *m, const char *client_id, uint64_t fallback_reads)
{
    if (!m || !client_id || !m->cfg.enable_offload) /* cfg never changes after create */
        return 0;
    pthread_mutex_lock(&m->lock);
    mc_client_t *c = mc_master_client_locked(m, client_id);
    if (c) {
        m->fallback_reads += fallback_reads >= c->fallback_reads
                                 ? fallback_reads - c->fallback_reads
                                 : fallback_reads;
        c->fallback_reads = fallback_reads;
    }
    mc_offloader_t *off = offloader_find(m, client_id);
    uint64_t queued = off && offloader_takes_tasks(off)
                          ? off->n_queued + mc_master_executor_backlog_locked(m, off)
                          : 0;
    if (off && off->info.offloading) { /* deletions wait for it too: wake it */
        queued += off->deletes.nwaiting;
        if (off->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED && off->info.healthy)
            queued += m->dfs_deletes.nwaiting;
    }
    pthread_mutex_unlock(&m->lock);
    return queued;
}

/* ---- waiting for deletions ------------------------------------------------------------------ */

uint64_t mc_master_offload_deletion_seq(mc_master_t *m)
{
    pthread_mutex_lock(&m->lock);
    uint64_t seq = m->del_seq;
    pthread_mutex_unlock(&m->lock);
    return seq;
}

int mc_master_offload_deletions_pending(mc_master_t *m, const char *const *keys, size_t n,
                                        uint64_t from, uint64_t to, uint64_t *pending)
{
    if (!m || !pending || (n && !keys) || from > to)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    if (from < m->del_seq_base || to > m->del_seq)
        rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS; /* another master's deletions: unknown */
    else
        *pending = del_pending(m, keys, n, from, to);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* ---- descriptors, stats, lifetime ------------------------------------------------------------ */

static size_t offload_fill_descs(const mc_master_t *m, const mc_object_t *o, mc_replica_desc_t *out,
                                 size_t capacity, size_t n)
{
    const mc_object_offload_t *st = o->offload;
    for (unsigned i = 0; st && i < st->ndisk; i++, n++) {
        if (n >= capacity)
            continue;
        const mc_disk_replica_t *d = &st->disk[i];
        mc_replica_desc_t *r = &out[n];
        memset(r, 0, sizeof(*r));
        r->type = (mc_replica_type_t)d->type;
        r->status = MC_REPLICA_COMPLETE;
        if (d->owner)
            snprintf(r->segment_name, sizeof(r->segment_name), "%s", d->owner->info.endpoint);
        r->address = d->version;
        r->size = o->size;
        snprintf(r->file_path, sizeof(r->file_path), "%016" PRIx64 "/%s", d->version,
                 mc_object_key(o));
    }
    return n;
}

static void offload_stats(mc_master_t *m, mc_master_stats_t *out)
{
    out->offload_enabled = (uint64_t)m->cfg.enable_offload;
    for (size_t i = 0; i < m->n_offloaders; i++) {
        const mc_offloader_t *off = m->offloaders[i];
        out->offloaders += off->info.offloading;
        out->offloaders_unhealthy += off->info.offloading && !off->info.healthy;
        out->offload_queued += off->n_queued;
        out->offload_leased += off->n_leased;
        out->disk_used_bytes += off->info.used_bytes;
        out->disk_capacity_bytes += off->info.capacity_bytes;
    }
    out->pending_deletions = m->del_count;
    for (const mc_dlink_t *l = m->graveyard.next; l != &m->graveyard; l = l->next)
        out->pending_deletions--; /* confirmed, kept as tombstones */
    size_t dfs_offloaders = 0;
    for (size_t i = 0; i < m->n_offloaders; i++) {
        out->offload_recovering += (uint64_t)m->offloaders[i]->reporting;
        dfs_offloaders += m->offloaders[i]->info.backend == MC_OFFLOAD_BACKEND_DISTRIBUTED &&
                          m->offloaders[i]->info.offloading;
    }
    out->offload_recovering += m->dfs_recovery == MC_DFS_RECOVERY_RUNNING ||
                               (m->dfs_recovery == MC_DFS_RECOVERY_NEEDED && dfs_offloaders > 0);
    out->recovered_files = m->recovered_files;
    out->offload_done = m->offload_done;
    out->offload_failed = m->offload_failed;
    out->offload_retried = m->offload_retried;
    out->offload_skipped = m->offload_skipped;
    out->offload_bytes = m->offload_bytes;
    out->disk_evicted = m->disk_evicted;
    out->fallback_reads = m->fallback_reads;
    out->offload_backend = m->cfg.offload_backend ? m->cfg.offload_backend : m->seen_backend;
    snprintf(out->offload_fs_type, sizeof(out->offload_fs_type), "%s",
             m->cfg.offload_backend == MC_OFFLOAD_BACKEND_DISTRIBUTED ? m->cfg.distributed_fs_type
                                                                      : m->seen_fs_type);
}

static int offload_init(mc_master_t *m)
{
    /* Versions must stay unique across master restarts (files outlive the master): start from
     * the wall clock in nanoseconds. */
    m->next_version = m->view_version;
    /* Deletion seqs likewise: a waiter holding seqs of a previous master is told they are
     * unknown, never that they are done. */
    m->del_seq = m->view_version;
    m->del_seq_base = m->view_version + 1;
    delq_init(&m->dfs_deletes);
    delq_init(&m->parked);
    dlink_init(&m->graveyard);
    dlink_init(&m->deletes_by_seq);
    return 0;
}

/* After promotion's fini (table order). */
static void offload_fini(mc_master_t *m)
{
    /* Deletion records first: they are linked into the offloaders' queues. */
    while (m->deletes_by_seq.next != &m->deletes_by_seq)
        del_free(m, DEL_OF_SLINK(m->deletes_by_seq.next));
    for (size_t i = 0; i < m->n_offloaders; i++) {
        mc_offloader_t *off = m->offloaders[i];
        mc_offload_task_t *rings[2] = {&off->queued, &off->leased};
        for (int r = 0; r < 2; r++) {
            while (rings[r]->next != rings[r]) {
                mc_offload_task_t *t = rings[r]->next;
                ring_unlink(t);
                t->obj->offload->task = NULL;
                free(t);
            }
        }
        free(off);
    }
    free(m->offloaders);
    m->offloaders = NULL;
    m->n_offloaders = 0;
    free(m->del_hash);
    m->del_hash = NULL;
}

#ifndef NDEBUG
static int offload_object_ok(const mc_master_t *m, const mc_object_t *o)
{
    const mc_object_offload_t *st = o->offload;
    if (!st)
        return 1;
    if (!o->complete || (!st->task && !st->promotion && st->ndisk == 0) ||
        st->ndisk > MC_MAX_DISK_REPLICAS)
        return 0;
    for (unsigned i = 0; i < st->ndisk; i++) {
        if ((st->disk[i].type == MC_REPLICA_LOCAL_DISK) != (st->disk[i].owner != NULL))
            return 0;
    }
    const mc_offload_task_t *t = st->task;
    if (!t)
        return 1;
    if (t->obj != o || !t->owner)
        return 0;
    for (unsigned i = 0; i < o->nrep; i++) {
        if (o->rep[i].seg == t->src.seg && o->rep[i].handle == t->src.handle)
            return mc_master_segment_locked(m, t->src.seg) != NULL;
    }
    return 0;
}
#endif

/* Offload keeps values readable from disk: it follows every value's life (queue an offload at
 * commit, or at eviction with offload_on_evict; drop its files when the value goes), the
 * offloaders' segments and expiry, and adds the disk replicas to every replica list. */
const mc_master_ext_t mc_offload_extension = {
    .name = "offload",
    .init = offload_init,
    .fini = offload_fini,
    .value_committed = offload_value_committed,
    .value_discarding = offload_value_discarding,
    .object_moved = offload_object_moved,
    .replica_lost = offload_replica_lost,
    .segment_mounted = offload_segment_mounted,
    .client_gone = offload_client_gone,
    .sweep = offload_sweep,
    .evict_instead = offload_evict_instead,
    .fill_descs = offload_fill_descs,
    .put_wait_ms = offload_put_wait_ms,
    .stats = offload_stats,
#ifndef NDEBUG
    .object_ok = offload_object_ok,
#endif
};
