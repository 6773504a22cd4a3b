/*
 * task_manager.c — replica copy/move tasks and replica clear on the master (task_manager.h).
 *
 * Every task is on exactly one of three rings by status (pending, processing, finished — oldest
 * first) and in a hash chain by id. A PROCESSING task owns its reserved target extents
 * (tgt[0..ntgt), allocator cookie NULL, counted by the debug account hook); each is given back
 * exactly once, when the task leaves PROCESSING, unless its segment's mount is gone (tgt_gen no
 * longer the segment's generation: the memory went with the mount).
 *
 * Everything here runs under the master's lock.
 */
#include "task_manager.h"

#include "extension.h"

#include "ids.h"
#include "log.h"
#include "master_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

_Static_assert(MC_TASK_ID_LEN == MC_UUID_TEXT_LEN, "task ids are text UUIDs");

#define TASK_HASH_BUCKETS 4096 /* chains stay short up to the 30000 tasks the bounds allow */
#define SEGMENT_NAME_MAX 272

typedef struct mc_task {
    struct mc_task *prev, *next; /* its ring (RING_*) */
    int ring;
    struct mc_task *hnext; /* id hash chain */
    char id[MC_TASK_ID_LEN + 1];
    mc_task_type_t type;
    mc_task_status_t status;
    uint64_t created_epoch_ms, updated_epoch_ms; /* wall clock */
    uint64_t state_ms;                           /* master clock when the status was entered */
    uint32_t attempts;                           /* fetches that found no room */
    char client[MC_CLIENT_ID_MAX];               /* the executor (owner of the source) */
    char source[SEGMENT_NAME_MAX];
    char targets[MC_MAX_REPLICAS][SEGMENT_NAME_MAX];
    unsigned ntargets;
    char message[256];
    /* PROCESSING */
    uint64_t value_id, size;
    mc_replica_ref_t src;
    mc_replica_ref_t tgt[MC_MAX_REPLICAS];
    uint32_t tgt_gen[MC_MAX_REPLICAS];
    unsigned ntgt;
    /* The targets' fencing token, and whether an executor was given them (then a release
     * quarantines them until their owners' fences: its writes may still arrive). */
    uint64_t token;
    int handed;
    size_t key_len;
    char key[];
} mc_task_t;

struct mc_task_manager {
    mc_task_t rings[4]; /* sentinels: pending, processing, finished, draining */
    size_t count[4];
    mc_task_t *hash[TASK_HASH_BUCKETS];
    uint64_t next_value_id;
    uint64_t succeeded, failed;
};

/* DRAINING: FAILED by a timeout while its executor may still be writing into the reserved
 * extents; they are given back when it reports, expires, or after another timeout period. */
enum { RING_PENDING = 0, RING_PROCESSING = 1, RING_FINISHED = 2, RING_DRAINING = 3 };
#define MC_TASK_DRAIN_DEFAULT_MS 60000 /* with --processing_task_timeout_sec 0 */

static int ring_of(mc_task_status_t s)
{
    return s == MC_TASK_PENDING      ? RING_PENDING
           : s == MC_TASK_PROCESSING ? RING_PROCESSING
                                     : RING_FINISHED;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* 1 when s is a text UUID (8-4-4-4-12 hex digits). */
static int uuid_ok(const char *s)
{
    if (!s || strlen(s) != MC_TASK_ID_LEN)
        return 0;
    for (int i = 0; i < MC_TASK_ID_LEN; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        int c = (unsigned char)s[i];
        int hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (dash ? c != '-' : !hex)
            return 0;
    }
    return 1;
}

static size_t bucket_of(const char *id)
{
    char lower[MC_TASK_ID_LEN + 1];
    size_t i = 0;
    for (; i < MC_TASK_ID_LEN && id[i]; i++)
        lower[i] = (char)((id[i] >= 'A' && id[i] <= 'F') ? id[i] - 'A' + 'a' : id[i]);
    lower[i] = '\0';
    return (size_t)(mc_client_hash(lower) & (TASK_HASH_BUCKETS - 1));
}

static void ring_push(struct mc_task_manager *tm, int r, mc_task_t *t)
{
    mc_task_t *head = &tm->rings[r];
    t->next = head;
    t->prev = head->prev;
    head->prev->next = t;
    head->prev = t;
    t->ring = r;
    tm->count[r]++;
}

static void ring_unlink(struct mc_task_manager *tm, mc_task_t *t)
{
    t->prev->next = t->next;
    t->next->prev = t->prev;
    tm->count[t->ring]--;
}

static mc_task_t *task_find(struct mc_task_manager *tm, const char *id)
{
    for (mc_task_t *t = tm->hash[bucket_of(id)]; t; t = t->hnext) {
        if (strcasecmp(t->id, id) == 0)
            return t;
    }
    return NULL;
}

static void task_free(struct mc_task_manager *tm, mc_task_t *t)
{
    mc_task_t **pp = &tm->hash[bucket_of(t->id)];
    while (*pp != t)
        pp = &(*pp)->hnext;
    *pp = t->hnext;
    ring_unlink(tm, t);
    free(t);
}

static void set_status_in(mc_master_t *m, mc_task_t *t, mc_task_status_t status, int ring)
{
    ring_unlink(m->tasks, t);
    t->status = status;
    t->state_ms = mc_master_now_locked(m);
    t->updated_epoch_ms = wall_ms();
    ring_push(m->tasks, ring, t);
}

static void set_status(mc_master_t *m, mc_task_t *t, mc_task_status_t status)
{
    set_status_in(m, t, status, ring_of(status));
}

/* The mounted segment named `name` (an endpoint), its slot in *slot; NULL when none. */
static mc_segment_t *segment_named(mc_master_t *m, const char *name, uint32_t *slot)
{
    for (size_t k = 0; k < m->seg_cap; k++) {
        if (m->segs[k] && strcmp(m->segs[k]->info.name, name) == 0) {
            *slot = (uint32_t)k;
            return m->segs[k];
        }
    }
    return NULL;
}

static int has_replica_on(const mc_object_t *o, uint32_t slot)
{
    for (unsigned i = 0; i < o->nrep; i++) {
        if (o->rep[i].seg == slot)
            return 1;
    }
    return 0;
}

/* Gives back the reserved extents whose mount is still the one they were reserved in. */
static void release_targets(mc_master_t *m, mc_task_t *t)
{
    uint64_t now = t->handed ? mc_master_now_locked(m) : 0;
    for (unsigned i = 0; i < t->ntgt; i++) {
        mc_segment_t *s = mc_master_segment_locked(m, t->tgt[i].seg);
        if (t->size > 0 && s && s->gen == t->tgt_gen[i]) {
            if (t->handed)
                mc_master_extent_quarantine_locked(m, t->tgt[i], t->token, now);
            else
                mc_alloc_free(s->alloc, t->tgt[i].handle);
        }
    }
    t->ntgt = 0;
    t->handed = 0;
}

static void prune_finished(struct mc_task_manager *tm, uint64_t max)
{
    while (tm->count[RING_FINISHED] > max)
        task_free(tm, tm->rings[RING_FINISHED].next);
}

/* A draining task's extents are given back; it joins the finished ones. */
static void drained(mc_master_t *m, mc_task_t *t)
{
    release_targets(m, t);
    ring_unlink(m->tasks, t);
    ring_push(m->tasks, RING_FINISHED, t);
    prune_finished(m->tasks, m->cfg.task_max_finished);
}

/* Ends a task FAILED with a message naming the code (0: `why` alone). Its extents are given back,
 * unless `drain`: then they stay reserved until the executor is done with them (RING_DRAINING). */
static void task_fail_in(mc_master_t *m, mc_task_t *t, int code, const char *why, int drain)
{
    int was_processing = t->status == MC_TASK_PROCESSING;
    drain = drain && t->ntgt > 0;
    if (!drain)
        release_targets(m, t);
    if (code)
        snprintf(t->message, sizeof(t->message), "%s: %s", mc_error_name(code), why);
    else
        snprintf(t->message, sizeof(t->message), "%s", why);
    set_status_in(m, t, MC_TASK_FAILED, drain ? RING_DRAINING : RING_FINISHED);
    m->tasks->failed++;
    if (was_processing)
        mc_master_count_op(
            m, t->type == MC_TASK_REPLICA_COPY ? MC_OP_COPY_REVOKE : MC_OP_MOVE_REVOKE, 0);
    MC_INFO("task %s (%s of %.64s) failed: %s", t->id,
            t->type == MC_TASK_REPLICA_COPY ? "copy" : "move", t->key, t->message);
    prune_finished(m->tasks, m->cfg.task_max_finished);
}

static void task_fail(mc_master_t *m, mc_task_t *t, int code, const char *why)
{
    task_fail_in(m, t, code, why, 0);
}

static mc_task_t *task_new(mc_master_t *m, const char *key, size_t len, mc_task_type_t type,
                           const char *client, const char *source)
{
    mc_task_t *t = calloc(1, sizeof(*t) + len + 1);
    if (!t)
        return NULL;
    do {
        if (mc_uuid_v4(t->id) != 0) {
            free(t);
            return NULL;
        }
    } while (task_find(m->tasks, t->id));
    t->type = type;
    t->status = MC_TASK_PENDING;
    t->created_epoch_ms = t->updated_epoch_ms = wall_ms();
    t->state_ms = mc_master_now_locked(m);
    snprintf(t->client, sizeof(t->client), "%s", client);
    snprintf(t->source, sizeof(t->source), "%s", source);
    memcpy(t->key, key, len);
    t->key_len = len;
    size_t b = bucket_of(t->id);
    t->hnext = m->tasks->hash[b];
    m->tasks->hash[b] = t;
    ring_push(m->tasks, RING_PENDING, t);
    return t;
}

static int key_ok(const char *key, size_t *len)
{
    if (!key)
        return 0;
    *len = strnlen(key, MC_MAX_KEY_LEN + 1);
    return *len > 0 && *len <= MC_MAX_KEY_LEN;
}

/* A complete object with a memory replica; its owner's client id and segment name of replica
 * `pick` (or of the one on segment `source` when source is given). */
static int find_source(mc_master_t *m, const mc_object_t *o, const char *source,
                       const char **client, const char **name)
{
    unsigned n = 0;
    for (unsigned i = 0; i < o->nrep; i++) {
        const mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
        if (s && (o->size > 0 || s->gen == o->rep[i].handle))
            n++;
    }
    if (n == 0)
        return source ? MC_ERR_INVALID_PARAMS : MC_ERR_REPLICA_NOT_FOUND;
    uint64_t r = 0;
    if (!source && mc_random_u64(&r) != 0)
        r = mc_master_now_locked(m);
    unsigned pick = source ? 0 : r % n; /* upstream picks the source at random */
    for (unsigned i = 0, seen = 0; i < o->nrep; i++) {
        const mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
        if (!s || (o->size == 0 && s->gen != o->rep[i].handle))
            continue;
        if (source ? strcmp(s->info.name, source) == 0 : seen++ == pick) {
            *client = s->info.client_id;
            *name = s->info.name;
            return 0;
        }
    }
    return MC_ERR_INVALID_PARAMS; /* no replica on `source` */
}

static int create_task(mc_master_t *m, const char *key, mc_task_type_t type, const char *source,
                       const char *const *targets, size_t n, char *id_out)
{
    size_t len;
    if (!m || !id_out || !key_ok(key, &len))
        return key && m && id_out ? MC_ERR_INVALID_KEY : MC_ERR_INVALID_PARAMS;
    if (!targets || n == 0 || n > MC_MAX_REPLICAS)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        if (!targets[i] || !targets[i][0] || strlen(targets[i]) >= SEGMENT_NAME_MAX)
            return MC_ERR_INVALID_PARAMS;
    }
    if (type == MC_TASK_REPLICA_MOVE &&
        (!source || !source[0] || strlen(source) >= SEGMENT_NAME_MAX ||
         !strcmp(source, targets[0])))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    mc_object_t *o = mc_index_find(&m->index, key, len);
    const char *client = NULL, *name = NULL;
    uint32_t slot;
    if (!o || !o->complete)
        rc = MC_ERR_OBJECT_NOT_FOUND;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!segment_named(m, targets[i], &slot))
            rc = MC_ERR_INVALID_PARAMS; /* upstream: target_segment_not_mounted */
    }
    if (rc == 0)
        rc = find_source(m, o, type == MC_TASK_REPLICA_MOVE ? source : NULL, &client, &name);
    if (rc == 0 && m->tasks->count[RING_PENDING] >= m->cfg.task_max_pending)
        rc = MC_ERR_TASK_PENDING_LIMIT_EXCEEDED;
    mc_task_t *t = NULL;
    if (rc == 0 && !(t = task_new(m, key, len, type, client, name)))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            snprintf(t->targets[i], SEGMENT_NAME_MAX, "%s", targets[i]);
        t->ntargets = (unsigned)n;
        memcpy(id_out, t->id, MC_TASK_ID_LEN + 1);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int mc_master_create_copy_task(mc_master_t *m, const char *key, const char *const *targets,
                               size_t n, char *id_out)
{
    return create_task(m, key, MC_TASK_REPLICA_COPY, NULL, targets, n, id_out);
}

int mc_master_create_move_task(mc_master_t *m, const char *key, const char *source,
                               const char *target, char *id_out)
{
    return create_task(m, key, MC_TASK_REPLICA_MOVE, source, &target, target ? 1 : 0, id_out);
}

int mc_master_query_task(mc_master_t *m, const char *task_id, mc_task_info_t *out)
{
    if (!m || !out || !uuid_ok(task_id))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    const mc_task_t *t = task_find(m->tasks, task_id);
    if (t) {
        memset(out, 0, sizeof(*out));
        memcpy(out->id, t->id, sizeof(out->id));
        out->type = t->type;
        out->status = t->status;
        out->created_at_ms_epoch = t->created_epoch_ms;
        out->last_updated_at_ms_epoch = t->updated_epoch_ms;
        snprintf(out->assigned_client, sizeof(out->assigned_client), "%s", t->client);
        snprintf(out->message, sizeof(out->message), "%s", t->message);
    }
    pthread_mutex_unlock(&m->lock);
    return t ? 0 : MC_ERR_TASK_NOT_FOUND;
}

/* The replica of `o` on the segment named t->source, into t->src; 0 or a code. */
static int locate_source(mc_master_t *m, const mc_object_t *o, mc_task_t *t)
{
    for (unsigned i = 0; i < o->nrep; i++) {
        const mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
        if (s && !strcmp(s->info.name, t->source) && !strcmp(s->info.client_id, t->client) &&
            (o->size > 0 || s->gen == o->rep[i].handle)) {
            t->src = o->rep[i];
            return 0;
        }
    }
    return MC_ERR_REPLICA_NOT_FOUND;
}

/* Reserves the target extents of a pending task. 0, a code that fails the task, or
 * MC_ERR_NO_AVAILABLE_HANDLE (no room now: retried on a later fetch). */
static int reserve_targets(mc_master_t *m, mc_object_t *o, mc_task_t *t)
{
    t->ntgt = 0;
    t->handed = 0;
    t->size = o->size;
    t->token = mc_master_next_token_locked(m);
    for (unsigned i = 0; i < t->ntargets; i++) {
        uint32_t slot;
        mc_segment_t *s = segment_named(m, t->targets[i], &slot);
        if (!s) {
            release_targets(m, t);
            return MC_ERR_SEGMENT_NOT_FOUND;
        }
        if (has_replica_on(o, slot) && (o->size > 0 || o->rep[0].handle == s->gen))
            continue; /* already holds one (upstream: skipped) */
        int dup = 0;
        for (unsigned j = 0; j < t->ntgt; j++)
            dup |= t->tgt[j].seg == slot;
        if (dup)
            continue;
        mc_replica_ref_t ref = {.seg = slot, .handle = s->gen};
        if (o->size > 0) {
            uint64_t addr;
            int rc = mc_alloc_alloc(s->alloc, o->size, NULL, &addr, &ref.handle);
            if (rc != 0) {
                release_targets(m, t);
                return rc == MC_ERR_INVALID_PARAMS ? MC_ERR_NO_AVAILABLE_HANDLE : rc;
            }
        }
        t->tgt_gen[t->ntgt] = s->gen;
        t->tgt[t->ntgt++] = ref;
    }
    if (o->nrep + t->ntgt > MC_MAX_REPLICAS) {
        release_targets(m, t);
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

int mc_master_fetch_tasks(mc_master_t *m, const char *client_id, size_t max,
                          mc_task_assignment_cb on_task, void *arg)
{
    if (!m || !client_id || !client_id[0] || !on_task)
        return MC_ERR_INVALID_PARAMS;
    if (max > MC_TASK_MAX_BATCH)
        max = MC_TASK_MAX_BATCH;
    pthread_mutex_lock(&m->lock);
    struct mc_task_manager *tm = m->tasks;
    int handed = 0;
    mc_task_t *head = &tm->rings[RING_PENDING];
    for (mc_task_t *t = head->next, *next; t != head && (size_t)handed < max; t = next) {
        next = t->next;
        if (strcmp(t->client, client_id) != 0)
            continue;
        if (tm->count[RING_PROCESSING] >= m->cfg.task_max_processing)
            break;
        mc_object_t *o = mc_index_find(&m->index, t->key, t->key_len);
        if (!o || !o->complete) {
            task_fail(m, t, MC_ERR_OBJECT_NOT_FOUND, "the object was removed");
            continue;
        }
        int rc = locate_source(m, o, t);
        if (rc == 0)
            rc = reserve_targets(m, o, t);
        if (rc == MC_ERR_NO_AVAILABLE_HANDLE && ++t->attempts <= m->cfg.task_max_retry_attempts)
            continue; /* stays pending */
        if (rc != 0) {
            task_fail(m, t, rc,
                      rc == MC_ERR_SEGMENT_NOT_FOUND   ? "a target segment is not mounted"
                      : rc == MC_ERR_REPLICA_NOT_FOUND ? "the source replica is gone"
                      : rc == MC_ERR_NO_AVAILABLE_HANDLE
                          ? "no room on a target (max retry attempts reached)"
                          : "the targets cannot be reserved");
            continue;
        }
        if (o->value_id == 0)
            o->value_id = ++tm->next_value_id;
        t->value_id = o->value_id;
        set_status(m, t, MC_TASK_PROCESSING);
        mc_master_count_op(m, t->type == MC_TASK_REPLICA_COPY ? MC_OP_COPY_START : MC_OP_MOVE_START,
                           0);
        mc_replica_desc_t descs[MC_MAX_REPLICAS];
        for (unsigned i = 0; i < t->ntgt; i++) {
            mc_master_fill_desc_locked(m, t->tgt[i], t->size, MC_REPLICA_PROCESSING, &descs[i]);
            descs[i].fence_token = t->token; /* its writes carry it; a failure fences it */
        }
        t->handed = 1;
        const mc_segment_t *src = mc_master_segment_locked(m, t->src.seg);
        mc_task_assignment_t a = {
            .id = t->id,
            .type = t->type,
            .key = t->key,
            .size = t->size,
            .source_address =
                t->size > 0 ? mc_alloc_extent_addr(src->alloc, t->src.handle) : src->info.base,
            .has_checksum = o->has_checksum,
            .checksum = o->checksum,
            .targets = descs,
            .ntargets = t->ntgt,
        };
        handed++;
        if (on_task(arg, &a) != 0)
            break;
    }
    pthread_mutex_unlock(&m->lock);
    return handed;
}

/* Why a successful copy cannot be committed (0: it can). */
static int commit_check(mc_master_t *m, const mc_object_t *o, const mc_task_t *t, const char **why)
{
    if (!o || !o->complete) {
        *why = "the object was removed during the task";
        return MC_ERR_OBJECT_NOT_FOUND;
    }
    if (o->value_id != t->value_id) {
        *why = "the object was replaced during the task";
        return MC_ERR_OBJECT_NOT_FOUND;
    }
    int src_kept = 0;
    for (unsigned i = 0; i < o->nrep; i++)
        src_kept |= o->rep[i].seg == t->src.seg && o->rep[i].handle == t->src.handle;
    if (!src_kept) {
        *why = "the source replica went during the task";
        return MC_ERR_REPLICA_NOT_FOUND;
    }
    for (unsigned i = 0; i < t->ntgt; i++) {
        const mc_segment_t *s = mc_master_segment_locked(m, t->tgt[i].seg);
        if (!s || s->gen != t->tgt_gen[i]) {
            *why = "a target segment was unmounted during the task";
            return MC_ERR_SEGMENT_NOT_FOUND;
        }
    }
    return 0;
}

/* Adds the target extents to the object (a move drops its source); the task succeeds. */
static int commit(mc_master_t *m, mc_task_t *t)
{
    const char *why = NULL;
    mc_object_t *o = mc_index_find(&m->index, t->key, t->key_len);
    int rc = commit_check(m, o, t, &why);
    uint32_t slot;
    if (rc == 0 && t->type == MC_TASK_REPLICA_MOVE && t->ntgt == 0 &&
        !(segment_named(m, t->targets[0], &slot) && has_replica_on(o, slot))) {
        /* the target held a replica at fetch time, no more: the source must stay */
        why = "the target's replica went during the task";
        rc = MC_ERR_REPLICA_NOT_FOUND;
    }
    if (rc != 0) {
        task_fail(m, t, rc, why);
        return 0;
    }
    unsigned add = 0;
    for (unsigned i = 0; i < t->ntgt; i++) {
        if (has_replica_on(o, t->tgt[i].seg)) { /* another task got there first */
            if (t->size > 0)
                mc_alloc_free(mc_master_segment_locked(m, t->tgt[i].seg)->alloc, t->tgt[i].handle);
            continue;
        }
        t->tgt[add] = t->tgt[i];
        t->tgt_gen[add++] = t->tgt_gen[i];
    }
    t->ntgt = add;
    if (o->nrep + add > o->rep_cap) {
        mc_object_t *n = mc_master_object_regrow_locked(m, o, o->nrep + add);
        if (!n) {
            task_fail(m, t, MC_ERR_INTERNAL_ERROR, "out of memory");
            return 0;
        }
        o = n;
    }
    memcpy(o->rep + o->nrep, t->tgt, add * sizeof(o->rep[0]));
    mc_master_set_cookies_locked(m, o->rep + o->nrep, add, o->size, o);
    o->nrep = (uint8_t)(o->nrep + add);
    t->ntgt = 0;                           /* the object owns them now */
    if (t->type == MC_TASK_REPLICA_MOVE) { /* the target holds it now */
        uint64_t now = mc_master_now_locked(m);
        unsigned kept = 0;
        mc_master_replica_lost_locked(m, o, t->src.seg);
        for (unsigned i = 0; i < o->nrep; i++) {
            if (o->rep[i].seg == t->src.seg && o->rep[i].handle == t->src.handle) {
                if (o->size > 0)
                    mc_master_extent_release_locked(m, o->rep[i], o, now);
            } else {
                o->rep[kept++] = o->rep[i];
            }
        }
        o->nrep = (uint8_t)kept;
    }
    mc_journal_set_locked(m, o);
    snprintf(t->message, sizeof(t->message), "Task completed successfully");
    set_status(m, t, MC_TASK_SUCCESS);
    m->tasks->succeeded++;
    mc_master_count_op(m, t->type == MC_TASK_REPLICA_COPY ? MC_OP_COPY_END : MC_OP_MOVE_END, 0);
    prune_finished(m->tasks, m->cfg.task_max_finished);
    return 0;
}

int mc_master_complete_task(mc_master_t *m, const char *client_id, const char *task_id,
                            mc_task_status_t status, int error, const char *message)
{
    if (!m || !client_id || !uuid_ok(task_id) ||
        (status != MC_TASK_SUCCESS && status != MC_TASK_FAILED))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_task_t *t = task_find(m->tasks, task_id);
    int rc = 0;
    if (!t)
        rc = MC_ERR_TASK_NOT_FOUND;
    else if (strcmp(t->client, client_id) != 0)
        rc = MC_ERR_ILLEGAL_CLIENT;
    else {
        /* A success means every write it made was acknowledged: none can land later, so its
         * extents need no fence if they are given back. A failure's may still arrive. */
        if (status == MC_TASK_SUCCESS)
            t->handed = 0;
        if (t->ring == RING_DRAINING)
            drained(m, t); /* timed out meanwhile: the executor is done with the extents now */
        else if (t->status != MC_TASK_PROCESSING)
            rc = 0; /* already finished (reported twice) */
        else if (status == MC_TASK_SUCCESS)
            rc = commit(m, t);
        else
            task_fail(m, t, error < 0 ? error : MC_ERR_INTERNAL_ERROR,
                      message && message[0] ? message : "the executor failed");
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int clear_on_segment(mc_master_t *m, mc_object_t *o, const char *segment_name, uint64_t now)
{
    unsigned kept = 0, dropped = 0;
    for (unsigned i = 0; i < o->nrep; i++) {
        const mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
        if (s && !strcmp(s->info.name, segment_name)) {
            mc_master_replica_lost_locked(m, o, o->rep[i].seg);
            dropped++;
        }
    }
    if (dropped == 0)
        return 0;
    for (unsigned i = 0; i < o->nrep; i++) {
        const mc_segment_t *s = mc_master_segment_locked(m, o->rep[i].seg);
        if (s && !strcmp(s->info.name, segment_name)) {
            if (o->size > 0)
                mc_master_extent_release_locked(m, o->rep[i], o, now);
        } else {
            o->rep[kept++] = o->rep[i];
        }
    }
    o->nrep = (uint8_t)kept;
    if (kept == 0 && mc_offload_ndisk(o) == 0)
        mc_master_value_lost_locked(m, o);
    else
        mc_journal_set_locked(m, o);
    return 1;
}

int mc_master_batch_replica_clear(mc_master_t *m, const char *client_id, const char *const *keys,
                                  size_t n, const char *segment_name, int *cleared)
{
    if (!m || !client_id || !client_id[0] || (!keys && n) || (!cleared && n))
        return MC_ERR_INVALID_PARAMS;
    uint64_t writer = mc_client_hash(client_id);
    pthread_mutex_lock(&m->lock);
    uint64_t now = mc_master_now_locked(m);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        cleared[i] = 0;
        if (!key_ok(keys[i], &len))
            continue;
        mc_object_t *o = mc_index_find(&m->index, keys[i], len);
        if (!o || !o->complete || o->writer != writer || o->lease_timeout > now)
            continue; /* absent, another client's, or leased (upstream skips them) */
        if (!segment_name || !segment_name[0]) {
            if (o->pending)
                continue; /* a put in progress: upstream's "incomplete replicas" */
            mc_master_drop_value_locked(m, o, now);
            cleared[i] = 1;
        } else {
            cleared[i] = clear_on_segment(m, o, segment_name, now);
        }
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}

void mc_master_task_stats(mc_master_t *m, mc_task_stats_t *out)
{
    pthread_mutex_lock(&m->lock);
    out->pending = m->tasks->count[RING_PENDING];
    out->processing = m->tasks->count[RING_PROCESSING];
    out->finished = m->tasks->count[RING_FINISHED] + m->tasks->count[RING_DRAINING];
    out->succeeded = m->tasks->succeeded;
    out->failed = m->tasks->failed;
    pthread_mutex_unlock(&m->lock);
}

static void tasks_sweep(mc_master_t *m, uint64_t now)
{
    struct mc_task_manager *tm = m->tasks;
    for (int r = RING_PENDING; r <= RING_PROCESSING; r++) {
        uint64_t timeout =
            r == RING_PENDING ? m->cfg.task_pending_timeout_ms : m->cfg.task_processing_timeout_ms;
        mc_task_t *head = &tm->rings[r];
        for (mc_task_t *t = head->next, *next; t != head; t = next) {
            next = t->next;
            if (!mc_master_client_locked(m, t->client))
                task_fail(m, t, MC_ERR_CLIENT_NOT_FOUND, "the executor (source holder) is gone");
            else if (timeout && now - t->state_ms > timeout)
                task_fail_in(m, t, 0, r == RING_PENDING ? "pending timeout" : "processing timeout",
                             r == RING_PROCESSING);
        }
    }
    uint64_t drain_ms = m->cfg.task_processing_timeout_ms ? m->cfg.task_processing_timeout_ms
                                                          : MC_TASK_DRAIN_DEFAULT_MS;
    mc_task_t *head = &tm->rings[RING_DRAINING];
    for (mc_task_t *t = head->next, *next; t != head; t = next) {
        next = t->next;
        if (!mc_master_client_locked(m, t->client) || now - t->state_ms > drain_ms)
            drained(m, t);
    }
    prune_finished(tm, m->cfg.task_max_finished);
}

static void tasks_account(const mc_master_t *m, uint64_t *seg_used)
{
    const int rings[2] = {RING_PROCESSING, RING_DRAINING};
    for (int r = 0; r < 2; r++) {
        const mc_task_t *head = &m->tasks->rings[rings[r]];
        for (const mc_task_t *t = head->next; t != head; t = t->next) {
            for (unsigned i = 0; t->size > 0 && i < t->ntgt; i++) {
                const mc_segment_t *s = mc_master_segment_locked(m, t->tgt[i].seg);
                if (s && s->gen == t->tgt_gen[i])
                    seg_used[t->tgt[i].seg] += mc_alloc_extent_size(s->alloc, t->tgt[i].handle);
            }
        }
    }
}

static int tasks_init(mc_master_t *m)
{
    m->tasks = calloc(1, sizeof(*m->tasks));
    if (!m->tasks)
        return MC_ERR_INTERNAL_ERROR;
    for (int r = 0; r < 4; r++)
        m->tasks->rings[r].next = m->tasks->rings[r].prev = &m->tasks->rings[r];
    return 0;
}

static void tasks_fini(mc_master_t *m)
{
    if (!m->tasks)
        return;
    for (int r = 0; r < 4; r++) {
        while (m->tasks->rings[r].next != &m->tasks->rings[r])
            task_free(m->tasks, m->tasks->rings[r].next);
    }
    free(m->tasks);
    m->tasks = NULL;
}

/* Timeouts, expired executors and pruning run in the monitor sweep; the reserved target extents
 * count in the debug check. */
const mc_master_ext_t mc_tasks_extension = {
    .name = "tasks",
    .init = tasks_init,
    .fini = tasks_fini,
    .sweep = tasks_sweep,
    .account = tasks_account,
};
