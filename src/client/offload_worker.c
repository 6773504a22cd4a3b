/*
 * offload_worker.c — the offload worker (offload_worker.h): the control thread (heartbeats,
 * deletions, resync, health), the writer threads, and the ledger of files this client holds.
 *
 * Locks: w->lock guards the task queue and the control state; the ledger has its own lock. No
 * lock is held across an RPC or a file operation.
 *
 * Task queue invariants: a task taken from the master is either queued (q) or active (being
 * written by one writer); both kinds are reported as in flight so their leases renew. The queue
 * holds at most w->qcap tasks; the heartbeat asks for the room left.
 */
#include "offload_worker.h"

#include "failpoint.h"
#include "log.h"
#include "master_client.h"
#include "mooncake/errors.h"
#include "net.h"
#include "object_layout.h" /* mc_crc32c */
#include "pb_decode.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUEUE_PER_THREAD 4
#define RESYNC_BATCH 1024
#define MAX_DELETIONS 1024
#define RETRY_MS 1000
#define HEALTH_MIN_MS 5000
/* After a heartbeat that handed out deletions, heartbeats follow every 20 ms for this long: the
 * next remove or upsert of a series finds its deletions taken at once, not at the next ping. */
#define DELETE_LINGER_MS 500

/* ---- the ledger -------------------------------------------------------------------------------
 */

typedef struct ledger_entry {
    struct ledger_entry *prev, *next; /* FIFO ring, oldest first */
    struct ledger_entry *hnext;       /* hash chain */
    uint64_t hash, version, size;
    uint32_t crc; /* CRC32C of the value, when has_crc */
    int has_crc;
    char key[];
} ledger_entry_t;

typedef struct ledger {
    pthread_mutex_t lock;
    ledger_entry_t **buckets;
    size_t nbuckets;
    ledger_entry_t ring; /* sentinel */
    uint64_t count, used;
    uint64_t reserved_bytes, reserved_count; /* writes in progress */
} ledger_t;

static uint64_t ledger_hash(const char *key, uint64_t version)
{
    uint64_t h = 1469598103934665603ull ^ version;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h ? h : 1;
}

static int ledger_init(ledger_t *l)
{
    memset(l, 0, sizeof(*l));
    l->nbuckets = 1024;
    l->buckets = calloc(l->nbuckets, sizeof(*l->buckets));
    l->ring.next = l->ring.prev = &l->ring;
    pthread_mutex_init(&l->lock, NULL);
    return l->buckets ? 0 : MC_ERR_INTERNAL_ERROR;
}

static void ledger_fini(ledger_t *l)
{
    for (ledger_entry_t *e = l->ring.next, *n; e != &l->ring; e = n) {
        n = e->next;
        free(e);
    }
    free(l->buckets);
    pthread_mutex_destroy(&l->lock);
}

static void ledger_grow_locked(ledger_t *l)
{
    size_t nb = l->nbuckets * 2;
    ledger_entry_t **b = calloc(nb, sizeof(*b));
    if (!b)
        return; /* chains just get longer */
    for (ledger_entry_t *e = l->ring.next; e != &l->ring; e = e->next) {
        e->hnext = b[e->hash & (nb - 1)];
        b[e->hash & (nb - 1)] = e;
    }
    free(l->buckets);
    l->buckets = b;
    l->nbuckets = nb;
}

static ledger_entry_t **ledger_slot_locked(ledger_t *l, const char *key, uint64_t version,
                                           uint64_t hash)
{
    ledger_entry_t **pp = &l->buckets[hash & (l->nbuckets - 1)];
    while (*pp && !((*pp)->hash == hash && (*pp)->version == version && !strcmp((*pp)->key, key)))
        pp = &(*pp)->hnext;
    return pp;
}

/* Adds (key, version) as the newest file; an entry already there is kept. */
static void ledger_add(ledger_t *l, const char *key, uint64_t version, uint64_t size, int has_crc,
                       uint32_t crc)
{
    uint64_t h = ledger_hash(key, version);
    pthread_mutex_lock(&l->lock);
    ledger_entry_t **pp = ledger_slot_locked(l, key, version, h);
    if (!*pp) {
        size_t klen = strlen(key);
        ledger_entry_t *e = malloc(sizeof(*e) + klen + 1);
        if (e) {
            memcpy(e->key, key, klen + 1);
            e->hash = h;
            e->version = version;
            e->size = size;
            e->crc = crc;
            e->has_crc = has_crc;
            e->hnext = NULL;
            *pp = e;
            e->next = &l->ring;
            e->prev = l->ring.prev;
            l->ring.prev->next = e;
            l->ring.prev = e;
            l->count++;
            l->used += size;
            if (l->count > l->nbuckets)
                ledger_grow_locked(l);
        }
    }
    pthread_mutex_unlock(&l->lock);
}

static void ledger_unlink_locked(ledger_t *l, ledger_entry_t *e)
{
    ledger_entry_t **pp = ledger_slot_locked(l, e->key, e->version, e->hash);
    *pp = e->hnext;
    e->prev->next = e->next;
    e->next->prev = e->prev;
    l->count--;
    l->used -= e->size;
}

/* 1 when (key, version) was in the ledger (and is now gone). */
static int ledger_remove(ledger_t *l, const char *key, uint64_t version)
{
    uint64_t h = ledger_hash(key, version);
    pthread_mutex_lock(&l->lock);
    ledger_entry_t *e = *ledger_slot_locked(l, key, version, h);
    if (e)
        ledger_unlink_locked(l, e);
    pthread_mutex_unlock(&l->lock);
    free(e);
    return e != NULL;
}

/* ---- the worker -------------------------------------------------------------------------------
 */

typedef struct wtask {
    uint64_t id, size, address, version;
    char *key;
    int has_checksum;
    uint32_t checksum; /* the value's CRC32C, as its writer computed it */
} wtask_t;

struct mc_offload_worker {
    char client_id[64];
    char endpoint[MC_ENDPOINT_MAX];
    mc_rpc_client_t *rpc;
    mc_offload_backend_t *backend;
    uintptr_t seg_base;
    uint64_t seg_size;
    mc_transfer_engine_t *te; /* owns the segment: promotions copy under its write fence */
    mc_offload_env_t env;
    ledger_t ledger;

    pthread_mutex_t lock;
    pthread_cond_t control_cond; /* wakes the control thread */
    pthread_cond_t work_cond;    /* wakes writers */
    wtask_t *q;                  /* ring of qcap */
    size_t qcap, qhead, qlen;
    uint64_t *active;            /* ids being written, one slot per writer (0 = idle) */
    const wtask_t **active_task; /* the task each writer is writing (NULL = idle) */
    int *cancel; /* 1: the master discarded the value being written: its writer deletes the file
                    (once it is written) and confirms the deletion */
    uint64_t deleted_ms; /* mc_now_ms() of the last heartbeat that handed out deletions */
    int stopping;
    uint64_t drain_deadline; /* mc_now_ms(); 0 = no drain */
    int wake;
    int offloading;
    int healthy;
    int storage_silent;  /* a write met the storage not answering: probed every RETRY_MS until it
                            answers, taking no tasks meanwhile */
    int resync;          /* the master asked for this client's files (its ledger) */
    int rescan;          /* the master asked for every file under the distributed root */
    int report_done;     /* what was asked is reported: say so in the next heartbeat */
    uint64_t remaining;  /* tasks the master still has for us, as of the last heartbeat */
    uint64_t promotions; /* promotions the master has for us, as of the last heartbeat */

    pthread_t control;
    pthread_t *writers;
    unsigned nwriters;

    atomic_uint_fast64_t done, failed, stale, bytes, evicted;
};

static size_t active_count_locked(const mc_offload_worker_t *w)
{
    size_t n = 0;
    for (unsigned i = 0; i < w->nwriters; i++)
        n += w->active[i] != 0;
    return n;
}

static int rpc_trouble(int rc)
{
    return rc == MC_ERR_RPC_FAIL || rc == MC_ERR_RPC_TIMEOUT;
}

/* ---- results and capacity ---------------------------------------------------------------------
 */

static int notify(mc_offload_worker_t *w, uint64_t task_id, const char *key, uint64_t version,
                  uint64_t size, int code)
{
    Mc__OffloadResult r = MC__OFFLOAD_RESULT__INIT;
    Mc__OffloadResult *rp = &r;
    r.task_id = task_id;
    r.key = (char *)key;
    r.version = version;
    r.size = size;
    r.code = code;
    Mc__NotifyOffloadRequest req = MC__NOTIFY_OFFLOAD_REQUEST__INIT;
    req.client_id = w->client_id;
    req.n_results = 1;
    req.results = &rp;
    Mc__CodesResponse *resp = NULL;
    int rc = mc_master_call_notify_offload(w->rpc, &req, &resp);
    if (rc != 0)
        return rc;
    rc = resp->code ? resp->code : resp->n_codes == 1 ? resp->codes[0] : MC_ERR_DESERIALIZE_FAIL;
    mc__codes_response__free_unpacked(resp, NULL);
    return rc;
}

/* Tells the master, then deletes the files. Entries are freed. */
static void evict_files(mc_offload_worker_t *w, ledger_entry_t **v, size_t n)
{
    Mc__DiskFile *files = calloc(n, sizeof(*files));
    Mc__DiskFile **ptrs = calloc(n, sizeof(*ptrs));
    if (files && ptrs) {
        for (size_t i = 0; i < n; i++) {
            Mc__DiskFile init = MC__DISK_FILE__INIT;
            files[i] = init;
            files[i].key = v[i]->key;
            files[i].version = v[i]->version;
            files[i].size = v[i]->size;
            ptrs[i] = &files[i];
        }
        Mc__EvictDiskRequest req = MC__EVICT_DISK_REQUEST__INIT;
        req.client_id = w->client_id;
        req.n_files = n;
        req.files = ptrs;
        Mc__CodesResponse *resp = NULL;
        int rc = mc_master_call_evict_disk(w->rpc, &req, &resp);
        if (rc == 0)
            mc__codes_response__free_unpacked(resp, NULL);
        else
            MC_WARN("offload: telling the master about %zu evicted files failed (%s); deleting "
                    "them anyway (reads of them fail as missing)",
                    n, mc_error_name(rc));
    }
    free(files);
    free(ptrs);
    for (size_t i = 0; i < n; i++) {
        int rc = mc_offload_backend_remove(w->backend, v[i]->key, v[i]->version);
        if (rc != 0 && rc != MC_ERR_FILE_NOT_FOUND)
            MC_WARN("offload: cannot delete the file of %.64s: %s", v[i]->key, mc_error_name(rc));
        free(v[i]);
    }
    atomic_fetch_add(&w->evicted, n);
}

/*
 * Makes room for `size` more bytes and one more file within the limits, evicting the oldest
 * files (FIFO) when allowed. 0 with the room reserved, or MC_ERR_DFS_QUOTA_EXCEEDED.
 */
static int reserve(mc_offload_worker_t *w, uint64_t size)
{
    ledger_t *l = &w->ledger;
    const uint64_t limit = w->env.total_size_limit, keys = w->env.total_keys_limit;
    if (size > limit)
        return MC_ERR_DFS_QUOTA_EXCEEDED;
    size_t cap = 16, n = 0;
    ledger_entry_t **victims = malloc(cap * sizeof(*victims));
    if (!victims)
        return MC_ERR_INTERNAL_ERROR;
    int rc = 0;
    pthread_mutex_lock(&l->lock);
    while (l->used + l->reserved_bytes + size > limit || l->count + l->reserved_count + 1 > keys) {
        ledger_entry_t *e = l->ring.next;
        if (!w->env.enable_eviction || e == &l->ring) {
            rc = MC_ERR_DFS_QUOTA_EXCEEDED;
            break;
        }
        if (n == cap) {
            ledger_entry_t **more = realloc(victims, 2 * cap * sizeof(*victims));
            if (!more) {
                rc = MC_ERR_INTERNAL_ERROR;
                break;
            }
            victims = more;
            cap *= 2;
        }
        ledger_unlink_locked(l, e);
        victims[n++] = e;
    }
    if (rc == 0) {
        l->reserved_bytes += size;
        l->reserved_count++;
    }
    pthread_mutex_unlock(&l->lock);
    if (n > 0)
        evict_files(w, victims, n);
    free(victims);
    return rc;
}

static void unreserve(mc_offload_worker_t *w, uint64_t size)
{
    pthread_mutex_lock(&w->ledger.lock);
    w->ledger.reserved_bytes -= size;
    w->ledger.reserved_count--;
    pthread_mutex_unlock(&w->ledger.lock);
}

/* ---- writers ----------------------------------------------------------------------------------
 */

/* A file the master is deleting: its key and version. */
typedef struct gone_file {
    const char *key;
    uint64_t version;
} gone_file_t;

/*
 * Tells the master these files are gone (deleted, or never written): NotifyOffload results with
 * task id 0 and code MC_ERR_FILE_NOT_FOUND. A remove or upsert waiting for them is acknowledged
 * then. Not told (master unreachable): the master hands the deletions out again later.
 */
static void confirm_gone(mc_offload_worker_t *w, const gone_file_t *v, size_t n)
{
    Mc__OffloadResult *r = calloc(n ? n : 1, sizeof(*r));
    Mc__OffloadResult **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    for (size_t i = 0; r && ptrs && i < n; i++) {
        Mc__OffloadResult init = MC__OFFLOAD_RESULT__INIT;
        r[i] = init;
        r[i].key = (char *)v[i].key;
        r[i].version = v[i].version;
        r[i].code = MC_ERR_FILE_NOT_FOUND;
        ptrs[i] = &r[i];
    }
    for (size_t off = 0; r && ptrs && off < n; off += RESYNC_BATCH) {
        Mc__NotifyOffloadRequest req = MC__NOTIFY_OFFLOAD_REQUEST__INIT;
        req.client_id = w->client_id;
        req.n_results = n - off < RESYNC_BATCH ? n - off : RESYNC_BATCH;
        req.results = ptrs + off;
        Mc__CodesResponse *resp = NULL;
        int rc = mc_master_call_notify_offload(w->rpc, &req, &resp);
        if (rc == 0)
            mc__codes_response__free_unpacked(resp, NULL);
        else
            MC_WARN("offload: telling the master %zu files are deleted failed: %s", req.n_results,
                    mc_error_name(rc));
    }
    free(r);
    free(ptrs);
}

static void write_task(mc_offload_worker_t *w, const wtask_t *t, unsigned slot)
{
    int code = 0;
    if (t->address < w->seg_base || t->size > w->seg_size ||
        t->address - w->seg_base > w->seg_size - t->size) {
        MC_ERROR("offload: task for %.64s points outside this client's segment", t->key);
        code = MC_ERR_INVALID_PARAMS;
    }
    int reserved = 0;
    if (code == 0) {
        code = reserve(w, t->size);
        reserved = code == 0;
    }
    /* A memory replica that no longer holds its writer's bytes is never persisted. */
    if (code == 0 && t->has_checksum &&
        mc_crc32c(0, (const void *)(uintptr_t)t->address, (size_t)t->size) != t->checksum) {
        MC_ERROR("offload: the memory replica of %.64s does not match its checksum; not written",
                 t->key);
        code = MC_ERR_CHECKSUM_MISMATCH;
    }
    if (code == 0)
        code = mc_offload_backend_write(w->backend, t->key, t->version,
                                        (const void *)(uintptr_t)t->address, t->size);
    /* Done writing: from here a deletion of this file finds it on disk, not in flight. */
    pthread_mutex_lock(&w->lock);
    int cancelled = w->cancel[slot];
    w->cancel[slot] = 0;
    w->active[slot] = 0;
    w->active_task[slot] = NULL;
    pthread_mutex_unlock(&w->lock);
    if (cancelled) {
        /* The value was removed or replaced while it was being written. */
        if (code == 0)
            mc_offload_backend_remove(w->backend, t->key, t->version);
        gone_file_t g = {t->key, t->version};
        confirm_gone(w, &g, 1);
        atomic_fetch_add(&w->stale, 1);
        if (reserved)
            unreserve(w, t->size);
        return;
    }
    int rc = notify(w, t->id, t->key, t->version, t->size, code);
    if (code == 0 && (rc == 0 || rpc_trouble(rc))) {
        /* Unreported (master unreachable): the file stays; a resync or a retry settles it. */
        ledger_add(&w->ledger, t->key, t->version, t->size, t->has_checksum, t->checksum);
        if (rc == 0) {
            atomic_fetch_add(&w->done, 1);
            atomic_fetch_add(&w->bytes, t->size);
        }
    } else if (code == 0) {
        /* Stale (removed or replaced meanwhile) or refused: nobody will read this file. */
        atomic_fetch_add(&w->stale, 1);
        mc_offload_backend_remove(w->backend, t->key, t->version);
    } else {
        atomic_fetch_add(&w->failed, 1);
        MC_WARN("offload of %.64s (%" PRIu64 " bytes) failed: %s", t->key, t->size,
                mc_error_name(code));
    }
    if (mc_offload_storage_unavailable(code)) {
        pthread_mutex_lock(&w->lock);
        int was = w->storage_silent;
        w->storage_silent = 1;
        w->healthy = 0; /* the next heartbeat says so: the master hands out no more tasks */
        pthread_mutex_unlock(&w->lock);
        if (!was)
            MC_ERROR("offload: the %s backend at %s does not answer (%s): taking no tasks, the "
                     "memory replicas stay, probing it every %d ms",
                     mc_offload_backend_fs_type(w->backend), mc_offload_backend_root(w->backend),
                     mc_error_name(code), RETRY_MS);
    }
    if (reserved)
        unreserve(w, t->size);
}

static void *writer_main(void *arg)
{
    mc_offload_worker_t *w = ((void **)arg)[0];
    unsigned slot = (unsigned)(uintptr_t)((void **)arg)[1];
    free(arg);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        /* While draining (stopping with a deadline) writers keep taking tasks. */
        while (w->qlen == 0 && !(w->stopping && !w->drain_deadline))
            pthread_cond_wait(&w->work_cond, &w->lock);
        if (w->stopping && !w->drain_deadline)
            break;
        wtask_t t = w->q[w->qhead];
        w->qhead = (w->qhead + 1) % w->qcap;
        w->qlen--;
        w->active[slot] = t.id;
        w->active_task[slot] = &t;
        pthread_mutex_unlock(&w->lock);
        write_task(w, &t, slot);
        free(t.key);
        pthread_mutex_lock(&w->lock);
        w->active[slot] = 0;
        pthread_cond_signal(&w->control_cond); /* room for more */
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* ---- control ----------------------------------------------------------------------------------
 */

static void fill_info(mc_offload_worker_t *w, Mc__OffloadHeartbeatRequest *req, int offloading,
                      int healthy)
{
    req->client_id = w->client_id;
    req->backend = mc_offload_backend_kind(w->backend);
    req->fs_type = (char *)mc_offload_backend_fs_type(w->backend);
    req->storage_id = (char *)mc_offload_backend_storage_id(w->backend);
    req->root_dir = (char *)mc_offload_backend_root(w->backend);
    req->endpoint = w->endpoint;
    req->offloading = offloading;
    req->healthy = healthy;
    req->capacity_bytes = w->env.total_size_limit;
    pthread_mutex_lock(&w->ledger.lock);
    req->used_bytes = w->ledger.used;
    pthread_mutex_unlock(&w->ledger.lock);
}

/* A file reported to the master as found on disk (task id 0). */
typedef struct report_item {
    char *key;
    uint64_t version, size;
    uint32_t crc;
    int has_crc;
} report_item_t;

typedef struct report_stats {
    size_t registered, dropped;
} report_stats_t;

/*
 * Reports v[0..n) to the master as files found on disk, in batches; files it says are obsolete
 * (an older value than the one it knows) are deleted. 0 when every batch was answered.
 */
static int report_files(mc_offload_worker_t *w, const report_item_t *v, size_t n,
                        report_stats_t *st)
{
    Mc__OffloadResult *r = calloc(n ? n : 1, sizeof(*r));
    Mc__OffloadResult **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    int rc = r && ptrs ? 0 : MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        Mc__OffloadResult init = MC__OFFLOAD_RESULT__INIT;
        r[i] = init;
        r[i].key = v[i].key;
        r[i].version = v[i].version;
        r[i].size = v[i].size;
        r[i].has_checksum = v[i].has_crc;
        r[i].checksum = v[i].crc;
        ptrs[i] = &r[i];
    }
    for (size_t off = 0; rc == 0 && off < n; off += RESYNC_BATCH) {
        Mc__NotifyOffloadRequest req = MC__NOTIFY_OFFLOAD_REQUEST__INIT;
        req.client_id = w->client_id;
        req.n_results = n - off < RESYNC_BATCH ? n - off : RESYNC_BATCH;
        req.results = ptrs + off;
        Mc__CodesResponse *resp = NULL;
        rc = mc_master_call_notify_offload(w->rpc, &req, &resp);
        if (rc == 0 && (resp->code != 0 || resp->n_codes != req.n_results))
            rc = resp->code ? resp->code : MC_ERR_DESERIALIZE_FAIL;
        for (size_t i = 0; rc == 0 && i < req.n_results; i++) {
            const report_item_t *x = &v[off + i];
            if (resp->codes[i] == 0) {
                st->registered++;
            } else if (resp->codes[i] == MC_ERR_OBJECT_ALREADY_EXISTS) {
                /* The master knows a newer value of the key: this file is obsolete. */
                ledger_remove(&w->ledger, x->key, x->version);
                mc_offload_backend_remove(w->backend, x->key, x->version);
                st->dropped++;
            }
        }
        if (resp)
            mc__codes_response__free_unpacked(resp, NULL);
    }
    if (rc != 0)
        MC_WARN("offload: reporting files to the master failed: %s", mc_error_name(rc));
    free(r);
    free(ptrs);
    return rc;
}

/*
 * Sends the ledger to the master as recovered files; files of keys it knows otherwise go.
 * Distributed: nothing — other clients delete shared files too, so this client's ledger may list
 * files that are gone; the root's rescan (which the master asks one client for after it starts)
 * reports every file that is there.
 */
static int resync(mc_offload_worker_t *w)
{
    if (mc_offload_backend_kind(w->backend) == MC_OFFLOAD_DISTRIBUTED)
        return 0;
    ledger_t *l = &w->ledger;
    pthread_mutex_lock(&l->lock);
    size_t n = (size_t)l->count, k = 0;
    report_item_t *v = calloc(n ? n : 1, sizeof(*v));
    for (ledger_entry_t *e = l->ring.next; v && e != &l->ring; e = e->next) {
        v[k] = (report_item_t){strdup(e->key), e->version, e->size, e->crc, e->has_crc};
        if (v[k].key)
            k++;
    }
    pthread_mutex_unlock(&l->lock);
    report_stats_t st = {0, 0};
    int rc = v ? report_files(w, v, k, &st) : MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < k; i++)
        free(v[i].key);
    free(v);
    if (rc == 0 && k)
        MC_INFO("offload: reported %zu files to the master: %zu registered, %zu obsolete (deleted)",
                k, st.registered, st.dropped);
    return rc;
}

/* The distributed root rescan: files are reported as they are listed, RESYNC_BATCH at a time. */
typedef struct root_scan {
    mc_offload_worker_t *w;
    report_item_t batch[RESYNC_BATCH];
    size_t n;
    uint64_t listed;
    report_stats_t st;
} root_scan_t;

static int root_scan_flush(root_scan_t *r)
{
    int rc = report_files(r->w, r->batch, r->n, &r->st);
    for (size_t i = 0; i < r->n; i++)
        free(r->batch[i].key);
    r->n = 0;
    return rc;
}

static int root_scan_one(const char *key, uint64_t version, uint64_t size, uint32_t crc, void *arg)
{
    root_scan_t *r = arg;
    char *k = strdup(key);
    if (!k)
        return MC_ERR_INTERNAL_ERROR;
    r->batch[r->n++] = (report_item_t){k, version, size, crc, 1};
    r->listed++;
    /* k belongs to r->batch now, freed by root_scan_flush: cppcheck does not follow that. */
    // cppcheck-suppress memleak
    return r->n == RESYNC_BATCH ? root_scan_flush(r) : 0;
}

/*
 * Lists the whole distributed root (names, then one header read per file: no stat) and reports
 * every file to the master, which registers the ones it does not know (the master asks one
 * client for this after it starts; several doing it would be harmless, only slower).
 */
static int rescan_root(mc_offload_worker_t *w)
{
    root_scan_t *r = calloc(1, sizeof(*r));
    if (!r)
        return MC_ERR_INTERNAL_ERROR;
    r->w = w;
    uint64_t t0 = mc_now_ms();
    int rc = mc_offload_backend_scan(w->backend, root_scan_one, r);
    if (rc == 0)
        rc = root_scan_flush(r);
    for (size_t i = 0; i < r->n; i++)
        free(r->batch[i].key);
    if (rc == 0)
        MC_INFO("offload: rescanned %s: %" PRIu64 " files in %" PRIu64 " ms, %zu registered, %zu "
                "obsolete (deleted)",
                mc_offload_backend_root(w->backend), r->listed, mc_now_ms() - t0, r->st.registered,
                r->st.dropped);
    else
        MC_WARN("offload: rescan of %s failed after %" PRIu64 " files: %s; retrying",
                mc_offload_backend_root(w->backend), r->listed, mc_error_name(rc));
    free(r);
    return rc;
}

/* Drops a queued (not yet started) task writing (key, version); 1 when there was one. Lock held. */
static int queue_drop_locked(mc_offload_worker_t *w, const char *key, uint64_t version)
{
    size_t kept = 0, dropped = 0;
    for (size_t i = 0; i < w->qlen; i++) {
        wtask_t t = w->q[(w->qhead + i) % w->qcap];
        if (t.version == version && !strcmp(t.key, key)) {
            free(t.key);
            dropped++;
            continue;
        }
        w->q[(w->qhead + kept++) % w->qcap] = t;
    }
    w->qlen = kept;
    return dropped > 0;
}

/*
 * Deletes the files the master hands out and confirms each one gone. A file still to be written
 * by a queued task is never written (the task is dropped); one being written is its writer's to
 * delete once written (write_task), so no rename can bring it back after the confirmation.
 */
static void apply_deletions(mc_offload_worker_t *w, const Mc__OffloadHeartbeatResponse *resp)
{
    size_t n = resp->n_deletions, ngone = 0;
    gone_file_t *gone = calloc(n ? n : 1, sizeof(*gone));
    for (size_t i = 0; i < n; i++) {
        const Mc__DiskFile *d = resp->deletions[i];
        int in_flight = 0;
        pthread_mutex_lock(&w->lock);
        queue_drop_locked(w, d->key, d->version);
        for (unsigned k = 0; k < w->nwriters; k++) {
            const wtask_t *t = w->active_task[k];
            if (t && t->version == d->version && !strcmp(t->key, d->key)) {
                w->cancel[k] = 1;
                in_flight = 1;
            }
        }
        pthread_mutex_unlock(&w->lock);
        if (in_flight)
            continue;
        ledger_remove(&w->ledger, d->key, d->version);
        int rc = mc_offload_backend_remove(w->backend, d->key, d->version);
        if (rc != 0 && rc != MC_ERR_FILE_NOT_FOUND)
            MC_WARN("offload: cannot delete the file of %.64s: %s", d->key, mc_error_name(rc));
        else if (gone)
            gone[ngone++] = (gone_file_t){d->key, d->version};
    }
    confirm_gone(w, gone, ngone);
    free(gone);
}

/* One heartbeat; returns its code, and how many tasks were asked for / received. */
static int heartbeat(mc_offload_worker_t *w, int leaving, size_t *asked, size_t *got)
{
    Mc__OffloadHeartbeatRequest req = MC__OFFLOAD_HEARTBEAT_REQUEST__INIT;
    pthread_mutex_lock(&w->lock);
    int taking = w->offloading && w->healthy && !leaving &&
                 (!w->stopping || (w->drain_deadline && mc_now_ms() < w->drain_deadline));
    size_t busy = w->qlen + active_count_locked(w);
    size_t want = taking && w->qcap > busy ? w->qcap - busy : 0;
    uint64_t *ids = calloc(busy + 1, sizeof(*ids));
    size_t nids = 0;
    for (size_t i = 0; ids && i < w->qlen; i++)
        ids[nids++] = w->q[(w->qhead + i) % w->qcap].id;
    for (unsigned i = 0; ids && i < w->nwriters; i++) {
        if (w->active[i])
            ids[nids++] = w->active[i];
    }
    int healthy = w->healthy;
    pthread_mutex_unlock(&w->lock);
    fill_info(w, &req, 1, healthy);
    req.max_tasks = (uint32_t)want;
    req.max_deletions = leaving ? 0 : MAX_DELETIONS;
    req.inflight = ids;
    req.n_inflight = nids;
    req.leaving = leaving;
    pthread_mutex_lock(&w->lock);
    int done_sent = w->report_done;
    pthread_mutex_unlock(&w->lock);
    req.resync_done = done_sent;
    Mc__OffloadHeartbeatResponse *resp = NULL;
    int rc = mc_master_call_offload_heartbeat(w->rpc, &req, &resp);
    free(ids);
    *asked = want;
    *got = 0;
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0) {
        apply_deletions(w, resp);
        if (resp->n_deletions > 0)
            w->deleted_ms = mc_now_ms();
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < resp->n_tasks && w->qlen < w->qcap; i++) {
            const Mc__OffloadTask *t = resp->tasks[i];
            char *key = strdup(t->key);
            if (!key)
                break; /* its lease expires and the master queues it again */
            w->q[(w->qhead + w->qlen) % w->qcap] = (wtask_t){
                t->task_id, t->size, t->address, t->version, key, t->has_checksum, t->checksum};
            w->qlen++;
            (*got)++;
        }
        if (*got)
            pthread_cond_broadcast(&w->work_cond);
        w->remaining = resp->remaining;
        w->promotions = resp->promotions;
        if (done_sent)
            w->report_done = 0;
        if (resp->resync)
            w->resync = 1;
        if (resp->rescan)
            w->rescan = 1;
        pthread_mutex_unlock(&w->lock);
    } else if (rc == MC_ERR_INVALID_PARAMS || rc == MC_ERR_UNABLE_OFFLOAD) {
        MC_ERROR("offload: the master refused this client's backend: %s",
                 resp->message && resp->message[0] ? resp->message : mc_error_name(rc));
    }
    mc__offload_heartbeat_response__free_unpacked(resp, NULL);
    return rc;
}

static void health_check(mc_offload_worker_t *w, uint64_t *next_ms)
{
    uint64_t now = mc_now_ms();
    pthread_mutex_lock(&w->lock);
    int silent = w->storage_silent;
    pthread_mutex_unlock(&w->lock);
    if ((!w->env.health_check && !silent) || (now < *next_ms && !silent))
        return;
    uint64_t period = (uint64_t)w->env.heartbeat_interval_s * 1000;
    *next_ms = now + (period > HEALTH_MIN_MS ? period : HEALTH_MIN_MS);
    int rc = mc_offload_backend_health(w->backend);
    pthread_mutex_lock(&w->lock);
    int was = w->healthy;
    w->healthy = rc == 0;
    if (rc == 0)
        w->storage_silent = 0;
    pthread_mutex_unlock(&w->lock);
    if (was && rc != 0)
        MC_ERROR("offload: the %s backend at %s failed its health check (%s): taking no tasks "
                 "until it passes",
                 mc_offload_backend_fs_type(w->backend), mc_offload_backend_root(w->backend),
                 mc_error_name(rc));
    else if (!was && rc == 0)
        MC_INFO("offload: the backend at %s is healthy again", mc_offload_backend_root(w->backend));
}

/* Waits up to ms on control_cond (lock held) unless woken. */
static void control_wait_locked(mc_offload_worker_t *w, uint64_t ms)
{
    if (w->wake) {
        w->wake = 0;
        return;
    }
    struct timespec ts;
    mc_deadline_after_ms(&ts, CLOCK_MONOTONIC, (uint64_t)ms);
    pthread_cond_timedwait(&w->control_cond, &w->lock, &ts);
    w->wake = 0;
}

/* Stopping and nothing more to wait for (drain over). Lock held. */
static int control_done_locked(mc_offload_worker_t *w)
{
    if (!w->stopping)
        return 0;
    if (!w->drain_deadline || mc_now_ms() >= w->drain_deadline)
        return 1;
    return w->qlen == 0 && active_count_locked(w) == 0 && w->remaining == 0;
}

/* ---- promotion (the master's promotion.c) -----------------------------------------------------
 * The master asks this client, the holder of a disk-only object's file, to copy the value back
 * into memory: it allocates the extent in this client's own segment, so the copy is a read of the
 * file straight into local memory. The bytes are checked against the value's CRC32C before the
 * client reports success; the master publishes the extent as a memory replica only then. Runs on
 * the control thread, at most promotion_max_per_heartbeat values per heartbeat. */

/* Copies one promoted value into its extent; 0 when the extent holds its verified bytes. */
static int promote_one(mc_offload_worker_t *w, const Mc__PromotionTask *t)
{
    if (t->address < w->seg_base || t->size > w->seg_size ||
        t->address - w->seg_base > w->seg_size - t->size) {
        MC_ERROR("promotion: task for %.64s points outside this client's segment", t->key);
        return MC_ERR_INVALID_PARAMS;
    }
    void *dst = (void *)(uintptr_t)t->address;
    /* The file is read into memory of this call's own and verified there; only then are the
     * bytes copied into the extent, admitted under the segment's write fence with the extent's
     * token and mount epoch. So a read that hangs (a file system that stopped answering) holds
     * no fence, and a copy that comes after the master gave the task up (its bound ran out, or
     * this client re-mounted: expired, a failover) is refused instead of landing in memory
     * that may hold another object by then. */
    void *bounce = malloc(t->size ? (size_t)t->size : 1);
    if (!bounce)
        return MC_ERR_INTERNAL_ERROR;
    int code = mc_offload_backend_read(w->backend, t->key, t->version, bounce, t->size);
    if (code == 0 && t->has_checksum && mc_crc32c(0, bounce, (size_t)t->size) != t->checksum) {
        MC_ERROR("promotion: the file of %.64s does not match the value's checksum; not promoted",
                 t->key);
        code = MC_ERR_CHECKSUM_MISMATCH;
    }
    mc_failpoint("promotion.before_copy");
    uint64_t pass = 0;
    if (code == 0 && w->te)
        code = mc_te_admit_write(w->te, t->epoch, t->fence_token, &pass);
    if (code == 0) {
        memcpy(dst, bounce, (size_t)t->size);
        mc_failpoint("promotion.after_copy");
        if (w->te)
            mc_te_end_write(w->te, pass);
    }
    free(bounce);
    mc_failpoint("promotion.before_report");
    return code;
}

static void promote(mc_offload_worker_t *w)
{
    Mc__PromotionTakeRequest req = MC__PROMOTION_TAKE_REQUEST__INIT;
    req.client_id = w->client_id;
    req.max_tasks = 64; /* the master caps it at --promotion_max_per_heartbeat */
    Mc__PromotionTakeResponse *resp = NULL;
    int rc = mc_rpc_call_pb(w->rpc, MC_RPC_PROMOTION_TAKE, &req.base,
                            &mc__promotion_take_response__descriptor, (ProtobufCMessage **)&resp);
    if (rc != 0 || resp->code != 0) {
        MC_VLOG(1, "promotion: taking tasks failed: %s", mc_error_name(rc ? rc : resp->code));
        if (resp)
            mc__promotion_take_response__free_unpacked(resp, NULL);
        return;
    }
    for (size_t i = 0; i < resp->n_tasks; i++) {
        const Mc__PromotionTask *t = resp->tasks[i];
        Mc__PromotionResultRequest r = MC__PROMOTION_RESULT_REQUEST__INIT;
        r.client_id = w->client_id;
        r.task_id = t->task_id;
        r.key = t->key;
        r.code = promote_one(w, t);
        Mc__CodesResponse *cr = NULL;
        rc = mc_rpc_call_pb(w->rpc, MC_RPC_PROMOTION_RESULT, &r.base,
                            &mc__codes_response__descriptor, (ProtobufCMessage **)&cr);
        MC_VLOG(1, "promotion of %.64s: %s, master: %s", t->key, mc_error_name(r.code),
                mc_error_name(rc ? rc : cr->code));
        if (cr)
            mc__codes_response__free_unpacked(cr, NULL);
    }
    mc__promotion_take_response__free_unpacked(resp, NULL);
}

static void *control_main(void *arg)
{
    mc_offload_worker_t *w = arg;
    uint64_t next_health = mc_now_ms() + (uint64_t)w->env.heartbeat_interval_s * 1000;
    int last_rc = 0;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int done = control_done_locked(w);
        int do_resync = w->resync, do_rescan = w->rescan;
        w->resync = w->rescan = 0;
        pthread_mutex_unlock(&w->lock);
        if (done)
            break;
        if (do_resync || do_rescan) {
            int rc = do_resync ? resync(w) : 0;
            if (rc == 0 && do_rescan)
                rc = rescan_root(w);
            pthread_mutex_lock(&w->lock);
            if (rc == 0) {
                w->report_done = 1;
            } else { /* try again after the next heartbeat */
                w->resync |= do_resync;
                w->rescan |= do_rescan;
            }
            pthread_mutex_unlock(&w->lock);
        }
        health_check(w, &next_health);
        size_t asked = 0, got = 0;
        int rc = heartbeat(w, 0, &asked, &got);
        if (rc != last_rc && rc != 0 && rc != MC_ERR_INVALID_PARAMS && rc != MC_ERR_UNABLE_OFFLOAD)
            MC_WARN("offload: heartbeat to the master failed: %s; retrying", mc_error_name(rc));
        else if (rc == 0 && last_rc != 0)
            MC_INFO("offload: heartbeats to the master work again");
        last_rc = rc;
        pthread_mutex_lock(&w->lock);
        uint64_t promotions = rc == 0 && !w->stopping ? w->promotions : 0;
        pthread_mutex_unlock(&w->lock);
        if (promotions > 0)
            promote(w);
        uint64_t wait_ms = (uint64_t)w->env.heartbeat_interval_s * 1000;
        pthread_mutex_lock(&w->lock);
        int silent = w->storage_silent;
        pthread_mutex_unlock(&w->lock);
        if ((rc != 0 || silent) && wait_ms > RETRY_MS)
            wait_ms = RETRY_MS;
        pthread_mutex_lock(&w->lock);
        if (rc == 0 && mc_now_ms() - w->deleted_ms < DELETE_LINGER_MS) {
            /* Deletions are flowing, and a remove or upsert waits for each: ask again soon. */
            control_wait_locked(w, 20);
        } else if (rc == 0 && got > 0) {
            /* Tasks are flowing: ask again as soon as a writer frees room (or shortly). */
            if (w->qlen + active_count_locked(w) >= w->qcap)
                control_wait_locked(w, wait_ms);
            else
                control_wait_locked(w, 20);
        } else if (!w->stopping || (rc == 0 && w->remaining > 0 && got == 0)) {
            control_wait_locked(w, w->stopping ? 100 : wait_ms);
        } else {
            control_wait_locked(w, 20);
        }
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------------
 */

/* Local backend: the files found at start, oldest version first (FIFO order). */
typedef struct scan_item {
    char *key;
    uint64_t version, size;
    uint32_t crc;
} scan_item_t;

typedef struct scan_list {
    scan_item_t *v;
    size_t n, cap;
} scan_list_t;

static int collect_one(const char *key, uint64_t version, uint64_t size, uint32_t crc, void *arg)
{
    scan_list_t *s = arg;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        scan_item_t *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return MC_ERR_INTERNAL_ERROR;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].key = strdup(key);
    if (!s->v[s->n].key)
        return MC_ERR_INTERNAL_ERROR;
    s->v[s->n].version = version;
    s->v[s->n].size = size;
    s->v[s->n].crc = crc;
    s->n++;
    return 0;
}

static int by_version(const void *a, const void *b)
{
    uint64_t x = ((const scan_item_t *)a)->version, y = ((const scan_item_t *)b)->version;
    return (x > y) - (x < y);
}

static int rescan(mc_offload_worker_t *w)
{
    scan_list_t s = {0};
    int rc = mc_offload_backend_scan(w->backend, collect_one, &s);
    if (rc == 0 && s.n > 0) {
        qsort(s.v, s.n, sizeof(*s.v), by_version);
        for (size_t i = 0; i < s.n; i++)
            ledger_add(&w->ledger, s.v[i].key, s.v[i].version, s.v[i].size, 1, s.v[i].crc);
        if (s.n)
            MC_INFO("offload: found %zu files (%" PRIu64 " bytes) under %s", s.n, w->ledger.used,
                    mc_offload_backend_root(w->backend));
    } else if (rc != 0) {
        MC_ERROR("offload: cannot list %s: %s", mc_offload_backend_root(w->backend),
                 mc_error_name(rc));
    }
    for (size_t i = 0; i < s.n; i++)
        free(s.v[i].key);
    free(s.v);
    return rc;
}

static void worker_free(mc_offload_worker_t *w)
{
    for (size_t i = 0; i < w->qlen; i++)
        free(w->q[(w->qhead + i) % w->qcap].key);
    free(w->q);
    free(w->active);
    free(w->active_task);
    free(w->cancel);
    free(w->writers);
    ledger_fini(&w->ledger);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->control_cond);
    pthread_cond_destroy(&w->work_cond);
    free(w);
}

int mc_offload_check_registration(mc_rpc_client_t *rpc, const char *client_id,
                                  mc_offload_backend_t *backend)
{
    Mc__OffloadHeartbeatRequest req = MC__OFFLOAD_HEARTBEAT_REQUEST__INIT;
    req.client_id = (char *)client_id;
    req.backend = mc_offload_backend_kind(backend);
    req.fs_type = (char *)mc_offload_backend_fs_type(backend);
    req.storage_id = (char *)mc_offload_backend_storage_id(backend);
    req.root_dir = (char *)mc_offload_backend_root(backend);
    req.healthy = 1;
    Mc__OffloadHeartbeatResponse *resp = NULL;
    int rc = mc_master_call_offload_heartbeat(rpc, &req, &resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc != 0 && rc != MC_ERR_UNABLE_OFFLOAD)
        MC_ERROR("offload: the master refused this client's %s backend: %s",
                 req.backend == MC_OFFLOAD_DISTRIBUTED ? "distributed" : "local",
                 resp->message && resp->message[0] ? resp->message : mc_error_name(rc));
    mc__offload_heartbeat_response__free_unpacked(resp, NULL);
    return rc;
}

int mc_offload_worker_start(const mc_offload_worker_config_t *cfg, mc_offload_worker_t **out)
{
    *out = NULL;
    mc_offload_worker_t *w = calloc(1, sizeof(*w));
    if (!w)
        return MC_ERR_INTERNAL_ERROR;
    snprintf(w->client_id, sizeof(w->client_id), "%s", cfg->client_id);
    snprintf(w->endpoint, sizeof(w->endpoint), "%s", cfg->endpoint ? cfg->endpoint : "");
    w->rpc = cfg->rpc;
    w->backend = cfg->backend;
    w->seg_base = cfg->segment_base;
    w->seg_size = cfg->segment_size;
    w->te = cfg->te;
    w->env = *cfg->env;
    w->nwriters = w->env.io_threads;
    w->qcap = (size_t)w->nwriters * QUEUE_PER_THREAD;
    w->offloading = 1;
    w->healthy = 1;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->control_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_cond_init(&w->work_cond, NULL);
    w->q = calloc(w->qcap, sizeof(*w->q));
    w->active = calloc(w->nwriters, sizeof(*w->active));
    w->active_task = calloc(w->nwriters, sizeof(*w->active_task));
    w->cancel = calloc(w->nwriters, sizeof(*w->cancel));
    w->writers = calloc(w->nwriters, sizeof(*w->writers));
    int rc = ledger_init(&w->ledger);
    if (rc == 0 && (!w->q || !w->active || !w->active_task || !w->cancel || !w->writers))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && mc_offload_backend_kind(w->backend) == MC_OFFLOAD_LOCAL)
        rc = rescan(w);
    size_t asked, got;
    if (rc == 0) {
        rc = heartbeat(w, 0, &asked, &got); /* registers; tasks taken wait for the writers */
        if (rc != 0 && rc != MC_ERR_INVALID_PARAMS && rc != MC_ERR_UNABLE_OFFLOAD)
            MC_ERROR("offload: cannot register with the master: %s", mc_error_name(rc));
    }
    if (rc != 0) {
        worker_free(w);
        return rc;
    }
    if (pthread_create(&w->control, NULL, control_main, w) != 0) {
        worker_free(w);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (unsigned i = 0; i < w->nwriters; i++) {
        void **arg = malloc(2 * sizeof(void *));
        if (arg) {
            arg[0] = w;
            arg[1] = (void *)(uintptr_t)i;
        }
        if (!arg || pthread_create(&w->writers[i], NULL, writer_main, arg) != 0) {
            free(arg);
            w->nwriters = i; /* stop joins only the started ones */
            MC_ERROR("offload: cannot start writer thread %u", i);
            mc_offload_worker_stop(w, 0);
            return MC_ERR_INTERNAL_ERROR;
        }
    }
    MC_INFO("offload: worker started: %s backend (%s) at %s, %u writers, heartbeat every %u s, "
            "limit %" PRIu64 " bytes / %" PRIu64 " files",
            mc_offload_backend_kind(w->backend) == MC_OFFLOAD_DISTRIBUTED ? "distributed" : "local",
            mc_offload_backend_fs_type(w->backend), mc_offload_backend_root(w->backend),
            w->nwriters, w->env.heartbeat_interval_s, w->env.total_size_limit,
            w->env.total_keys_limit);
    *out = w;
    return 0;
}

void mc_offload_worker_wake(mc_offload_worker_t *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->wake = 1;
    pthread_cond_signal(&w->control_cond);
    pthread_mutex_unlock(&w->lock);
}

void mc_offload_worker_set_offloading(mc_offload_worker_t *w, int enabled)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->offloading = enabled ? 1 : 0;
    w->wake = 1;
    pthread_cond_signal(&w->control_cond);
    pthread_mutex_unlock(&w->lock);
}

void mc_offload_worker_get_stats(mc_offload_worker_t *w, mc_offload_worker_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!w)
        return;
    out->done = atomic_load(&w->done);
    out->failed = atomic_load(&w->failed);
    out->stale = atomic_load(&w->stale);
    out->bytes = atomic_load(&w->bytes);
    out->evicted = atomic_load(&w->evicted);
    pthread_mutex_lock(&w->ledger.lock);
    out->files = w->ledger.count;
    out->disk_bytes = w->ledger.used;
    pthread_mutex_unlock(&w->ledger.lock);
    pthread_mutex_lock(&w->lock);
    out->queued = w->qlen + active_count_locked(w);
    out->healthy = w->healthy;
    out->offloading = w->offloading;
    pthread_mutex_unlock(&w->lock);
}

void mc_offload_worker_stop(mc_offload_worker_t *w, uint64_t drain_ms)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    w->drain_deadline = drain_ms ? mc_now_ms() + drain_ms : 0;
    w->wake = 1;
    pthread_cond_broadcast(&w->control_cond);
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->control, NULL);
    /* Drain over: writers finish the task in hand and exit. */
    pthread_mutex_lock(&w->lock);
    w->drain_deadline = 0;
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < w->nwriters; i++)
        pthread_join(w->writers[i], NULL);
    size_t asked, got;
    int rc = heartbeat(w, 1, &asked, &got);
    if (rc != 0)
        MC_WARN("offload: could not tell the master this client stops offloading: %s",
                mc_error_name(rc));
    uint64_t left = w->qlen;
    if (left)
        MC_WARN("offload: stopped with %" PRIu64 " tasks not written (the master retries them "
                "elsewhere or counts them failed)",
                left);
    worker_free(w);
}
