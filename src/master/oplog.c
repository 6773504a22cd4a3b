/*
 * oplog.c — the operation log in etcd: group-committed batches written by the leader under its
 * view, tailed and applied by standbys (oplog.h).
 */
#include "oplog.h"

#include "checksum.h"
#include "log.h"
#include "master_view.h"
#include "mooncake/errors.h"
#include "net.h"
#include "oplog.pb-c.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH_MAX_BYTES (1u << 20) /* below etcd's 1.5 MiB request limit */
#define TAIL_PAGE 64               /* batches read per range request */
#define FLUSH_ON_STOP_MS 3000

typedef struct pending_entry {
    uint64_t seq, local_seq;
    uint32_t type;
    char *key;
    uint8_t *record;
    size_t len;
    struct pending_entry *next;
} pending_entry_t;

struct mc_oplog {
    mc_oplog_config_t cfg;
    char *cluster_id;
    char prefix[512]; /* /oplog/<cluster>/batches/ */
    char prefix_end[512];
    char view_key[512];
    int64_t view_version;

    pthread_mutex_t lock; /* the queue and the counters below */
    pthread_cond_t cond;
    pending_entry_t *head, *tail;
    uint64_t npending;
    uint64_t last_seq;      /* assigned (leader) or applied (standby) */
    uint64_t last_batch_id; /* committed (leader) or applied (standby) */
    int stop, failed;

    pthread_t thread;
    int thread_running, leading;
    atomic_uint_fast64_t durable_seq, batches_committed, entries_applied, write_failures,
        checksum_failures, bp_waits, bp_timeouts;
    pthread_cond_t room; /* signalled when a batch committed */
};

static void batch_key(const mc_oplog_t *log, uint64_t id, char *out, size_t cap)
{
    snprintf(out, cap, "%s%020" PRIu64, log->prefix, id);
}

int mc_oplog_create(const mc_oplog_config_t *config, mc_oplog_t **out)
{
    if (!config || !out || !config->etcd || !config->cluster_id || !config->apply)
        return MC_ERR_INVALID_PARAMS;
    mc_oplog_t *log = calloc(1, sizeof(*log));
    if (!log)
        return MC_ERR_INTERNAL_ERROR;
    log->cfg = *config;
    if (!log->cfg.batch_max_entries)
        log->cfg.batch_max_entries = MC_OPLOG_DEFAULT_BATCH_MAX_ENTRIES;
    if (log->cfg.poll_interval_ms <= 0)
        log->cfg.poll_interval_ms = MC_OPLOG_DEFAULT_POLL_MS;
    log->cluster_id = strdup(config->cluster_id);
    size_t n = strlen(config->cluster_id);
    while (n > 0 && config->cluster_id[n - 1] == '/')
        n--;
    snprintf(log->prefix, sizeof(log->prefix), "/oplog/%.*s/batches/", (int)n, config->cluster_id);
    snprintf(log->prefix_end, sizeof(log->prefix_end), "/oplog/%.*s/batches0", (int)n,
             config->cluster_id);
    if (!log->cluster_id ||
        mc_master_view_key(config->cluster_id, log->view_key, sizeof(log->view_key)) != 0) {
        free(log->cluster_id);
        free(log);
        return MC_ERR_INVALID_PARAMS;
    }
    pthread_mutex_init(&log->lock, NULL);
    pthread_cond_init(&log->cond, NULL);
    pthread_cond_init(&log->room, NULL);
    *out = log;
    return 0;
}

/* ---- reading: standby tail and catch-up ----------------------------------------------------- */

/* Applies one batch read from etcd. 0, or MC_ERR_INCOMPLETE_OPLOG_CATCH_UP (logged). */
static int apply_batch(mc_oplog_t *log, const mc_etcd_kv_t *kv)
{
    /* etcd answers keys in the range asked for; one that is not is refused, never read past. */
    size_t plen = strlen(log->prefix);
    if (strncmp(kv->key, log->prefix, plen) != 0) {
        MC_ERROR("oplog: etcd answered key %.128s, not a batch of %s", kv->key, log->prefix);
        return MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
    }
    uint64_t id = strtoull(kv->key + plen, NULL, 10);
    if (id != log->last_batch_id + 1) {
        MC_ERROR("oplog: batch %" PRIu64 " follows batch %" PRIu64 ": a gap in %s", id,
                 log->last_batch_id, log->prefix);
        return MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
    }
    /* The value: CRC32C (4 bytes, little endian) of the packed batch that follows. */
    uint32_t want = 0, crc = 0;
    if (kv->value_len >= 4) {
        want = (uint32_t)kv->value[0] | (uint32_t)kv->value[1] << 8 | (uint32_t)kv->value[2] << 16 |
               (uint32_t)kv->value[3] << 24;
        crc = mc_crc32c(0, kv->value + 4, kv->value_len - 4);
    }
    if (kv->value_len < 4 || crc != want) {
        MC_ERROR("oplog: batch %" PRIu64 " (%zu bytes) fails its checksum (CRC32C %08x, recorded "
                 "%08x)",
                 id, kv->value_len, crc, want);
        atomic_fetch_add(&log->checksum_failures, 1);
        return MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
    }
    Mc__OplogBatch *b = mc__oplog_batch__unpack(NULL, kv->value_len - 4, kv->value + 4);
    if (!b) {
        MC_ERROR("oplog: batch %" PRIu64 " (%zu bytes) does not decode", id, kv->value_len);
        atomic_fetch_add(&log->checksum_failures, 1);
        return MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
    }
    int rc = 0;
    if (b->batch_id != id) {
        MC_ERROR("oplog: the value under batch %" PRIu64 " says batch %" PRIu64, id, b->batch_id);
        rc = MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
    } else if (b->n_entries && log->last_seq && b->first_seq != log->last_seq + 1) {
        MC_ERROR("oplog: batch %" PRIu64 " starts at seq %" PRIu64 ", expected %" PRIu64, id,
                 b->first_seq, log->last_seq + 1);
        rc = MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
    }
    for (size_t i = 0; rc == 0 && i < b->n_entries; i++) {
        const Mc__OplogEntry *e = b->entries[i];
        int arc = log->cfg.apply(log->cfg.arg, e->type, e->key ? e->key : "", e->record.data,
                                 e->record.len);
        if (arc != 0) {
            MC_ERROR("oplog: entry seq %" PRIu64 " (%s of %.128s) in batch %" PRIu64
                     " cannot be applied: %s",
                     e->seq, e->type == MC_OPLOG_SET ? "SET" : "DEL", e->key ? e->key : "", id,
                     mc_error_name(arc));
            rc = MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
            break;
        }
        atomic_fetch_add(&log->entries_applied, 1);
        log->last_seq = e->seq;
    }
    if (rc == 0)
        log->last_batch_id = id;
    mc__oplog_batch__free_unpacked(b, NULL);
    return rc;
}

/* Reads and applies every batch after last_batch_id. 0 when the end was reached; an error when
 * etcd could not be read (MC_ERR_ETCD_OPERATION_ERROR) or a batch could not be applied. */
static int catch_up(mc_oplog_t *log)
{
    for (;;) {
        char from[600];
        batch_key(log, log->last_batch_id + 1, from, sizeof(from));
        mc_etcd_kv_t *kvs = NULL;
        size_t n = 0;
        int more = 0;
        int rc =
            mc_etcd_range(log->cfg.etcd, from, log->prefix_end, TAIL_PAGE, &kvs, &n, &more, NULL);
        if (rc != 0)
            return rc;
        for (size_t i = 0; rc == 0 && i < n; i++)
            rc = apply_batch(log, &kvs[i]);
        mc_etcd_kv_free(kvs, n, 1);
        if (rc != 0)
            return rc;
        if (!more || n == 0)
            return 0;
    }
}

static int wait_stop(mc_oplog_t *log, int ms)
{
    struct timespec ts;
    mc_deadline_after_ms(&ts, CLOCK_REALTIME, (uint64_t)ms);
    pthread_mutex_lock(&log->lock);
    if (!log->stop)
        pthread_cond_timedwait(&log->cond, &log->lock, &ts);
    int stop = log->stop;
    pthread_mutex_unlock(&log->lock);
    return stop;
}

static void *tail_main(void *arg)
{
    mc_oplog_t *log = arg;
    int broken = 0;
    while (!wait_stop(log, broken ? log->cfg.poll_interval_ms * 5 : 0)) {
        int rc = catch_up(log);
        if (rc == MC_ERR_INCOMPLETE_OPLOG_CATCH_UP) {
            if (!broken)
                MC_ERROR("oplog: this standby cannot follow the log (see above); it will not "
                         "take over");
            broken = 1;
        }
        if (wait_stop(log, log->cfg.poll_interval_ms))
            break;
    }
    return NULL;
}

int mc_oplog_start_standby(mc_oplog_t *log)
{
    if (log->thread_running)
        return 0;
    if (pthread_create(&log->thread, NULL, tail_main, log) != 0)
        return MC_ERR_INTERNAL_ERROR;
    log->thread_running = 1;
    return 0;
}

static void stop_thread(mc_oplog_t *log)
{
    if (!log->thread_running)
        return;
    pthread_mutex_lock(&log->lock);
    log->stop = 1;
    pthread_cond_broadcast(&log->cond);
    pthread_mutex_unlock(&log->lock);
    pthread_join(log->thread, NULL);
    log->thread_running = 0;
    pthread_mutex_lock(&log->lock);
    log->stop = 0;
    pthread_mutex_unlock(&log->lock);
}

/* ---- writing: the leader's appender --------------------------------------------------------- */

static void free_entries(pending_entry_t *e)
{
    while (e) {
        pending_entry_t *next = e->next;
        free(e->key);
        free(e->record);
        free(e);
        e = next;
    }
}

int mc_oplog_wait_room(mc_oplog_t *log, uint64_t max_pending, int timeout_ms)
{
    pthread_mutex_lock(&log->lock);
    if (log->npending <= max_pending || !log->leading) {
        pthread_mutex_unlock(&log->lock);
        return 1;
    }
    atomic_fetch_add(&log->bp_waits, 1);
    struct timespec ts;
    mc_deadline_after_ms(&ts, CLOCK_REALTIME, (uint64_t)timeout_ms);
    int rc = 0;
    while (log->npending > max_pending && !log->failed && rc == 0)
        rc = pthread_cond_timedwait(&log->room, &log->lock, &ts);
    int room = log->npending <= max_pending;
    pthread_mutex_unlock(&log->lock);
    if (!room)
        atomic_fetch_add(&log->bp_timeouts, 1);
    return room;
}

void mc_oplog_append(mc_oplog_t *log, uint64_t local_seq, uint32_t type, const char *key,
                     const uint8_t *record, size_t len)
{
    pending_entry_t *e = calloc(1, sizeof(*e));
    if (e) {
        e->key = strdup(key ? key : "");
        e->record = malloc(len ? len : 1);
    }
    if (!e || !e->key || !e->record) {
        free_entries(e);
        pthread_mutex_lock(&log->lock);
        log->failed = 1; /* an entry is missing: the log can no longer be trusted */
        pthread_cond_broadcast(&log->cond);
        pthread_mutex_unlock(&log->lock);
        return;
    }
    if (len)
        memcpy(e->record, record, len);
    e->len = len;
    e->type = type;
    e->local_seq = local_seq;
    pthread_mutex_lock(&log->lock);
    e->seq = ++log->last_seq;
    if (log->tail)
        log->tail->next = e;
    else
        log->head = e;
    log->tail = e;
    if (++log->npending > MC_OPLOG_MAX_PENDING)
        log->failed = 1;
    pthread_cond_signal(&log->cond);
    pthread_mutex_unlock(&log->lock);
}

/* Takes the next batch off the queue (at most batch_max_entries entries, ~BATCH_MAX_BYTES). */
static pending_entry_t *take_batch(mc_oplog_t *log, size_t *count)
{
    pending_entry_t *first = log->head, *last = NULL, *e = first;
    size_t n = 0, bytes = 0;
    while (e && n < log->cfg.batch_max_entries &&
           (n == 0 || bytes + e->len + strlen(e->key) + 32 <= BATCH_MAX_BYTES)) {
        bytes += e->len + strlen(e->key) + 32;
        last = e;
        e = e->next;
        n++;
    }
    if (!last)
        return NULL;
    log->head = last->next;
    if (!log->head)
        log->tail = NULL;
    last->next = NULL;
    *count = n;
    return first;
}

/* Packs entries as batch `id`. *out malloc'd. */
static int pack_batch(mc_oplog_t *log, uint64_t id, pending_entry_t *list, size_t n, uint8_t **out,
                      size_t *out_len)
{
    Mc__OplogEntry *ents = calloc(n, sizeof(*ents));
    Mc__OplogEntry **ptrs = calloc(n, sizeof(*ptrs));
    if (!ents || !ptrs) {
        free(ents);
        free(ptrs);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t i = 0;
    for (pending_entry_t *e = list; e; e = e->next, i++) {
        mc__oplog_entry__init(&ents[i]);
        ents[i].seq = e->seq;
        ents[i].type = e->type;
        ents[i].key = e->key;
        ents[i].record.data = e->record;
        ents[i].record.len = e->len;
        ptrs[i] = &ents[i];
    }
    Mc__OplogBatch b = MC__OPLOG_BATCH__INIT;
    b.batch_id = id;
    b.view_version = log->view_version;
    b.first_seq = list->seq;
    b.n_entries = n;
    b.entries = ptrs;
    size_t len = mc__oplog_batch__get_packed_size(&b);
    *out_len = 4 + len;
    *out = malloc(*out_len);
    if (*out) { /* CRC32C of the packed batch first (apply_batch checks it before decoding) */
        mc__oplog_batch__pack(&b, *out + 4);
        uint32_t crc = mc_crc32c(0, *out + 4, len);
        for (int k = 0; k < 4; k++)
            (*out)[k] = (uint8_t)(crc >> (8 * k));
    }
    free(ents);
    free(ptrs);
    return *out ? 0 : MC_ERR_INTERNAL_ERROR;
}

/*
 * Commits one packed batch: 0 committed, 1 the view is no longer ours (nothing written),
 * <0 etcd unreachable (retry). A transaction that timed out may have been applied: finding the
 * batch key already holding exactly these bytes counts as committed.
 */
static int commit_batch(mc_oplog_t *log, uint64_t id, const uint8_t *buf, size_t len)
{
    char key[600];
    batch_key(log, id, key, sizeof(key));
    mc_etcd_cmp_t cmps[2] = {
        {.key = log->view_key,
         .target = MC_ETCD_CMP_CREATE,
         .result = MC_ETCD_EQUAL,
         .number = log->view_version},
        {.key = key, .target = MC_ETCD_CMP_CREATE, .result = MC_ETCD_EQUAL, .number = 0},
    };
    mc_etcd_op_t put = {.kind = MC_ETCD_OP_PUT, .key = key, .value = buf, .value_len = len};
    int ok = 0;
    int rc = mc_etcd_txn(log->cfg.etcd, cmps, 2, &put, 1, NULL, 0, &ok, NULL, NULL, NULL);
    if (rc != 0)
        return rc;
    if (ok)
        return 0;
    mc_etcd_kv_t kv;
    rc = mc_etcd_get(log->cfg.etcd, key, &kv, NULL);
    if (rc == 0) {
        int same = kv.value_len == len && memcmp(kv.value, buf, len) == 0;
        mc_etcd_kv_free(&kv, 1, 0);
        if (same)
            return 0;
    }
    return 1;
}

static void *append_main(void *arg)
{
    mc_oplog_t *log = arg;
    for (;;) {
        pthread_mutex_lock(&log->lock);
        while (!log->head && !log->stop && !log->failed)
            pthread_cond_wait(&log->cond, &log->lock);
        if (log->failed) {
            pthread_mutex_unlock(&log->lock);
            if (log->cfg.on_fail)
                log->cfg.on_fail(log->cfg.arg, "the operation log lost an entry or has more than "
                                               "MC_OPLOG_MAX_PENDING entries waiting for etcd");
            return NULL;
        }
        if (!log->head) { /* stop, nothing left */
            pthread_mutex_unlock(&log->lock);
            return NULL;
        }
        if (log->cfg.linger_ms > 0 && !log->stop &&
            log->npending < log->cfg.batch_max_entries) { /* let the batch fill a little */
            struct timespec ts;
            mc_deadline_after_ms(&ts, CLOCK_REALTIME, (uint64_t)log->cfg.linger_ms);
            while (!log->stop && !log->failed && log->npending < log->cfg.batch_max_entries &&
                   pthread_cond_timedwait(&log->cond, &log->lock, &ts) == 0) {
            }
        }
        size_t n = 0;
        pending_entry_t *list = take_batch(log, &n);
        uint64_t id = log->last_batch_id + 1;
        pthread_mutex_unlock(&log->lock);

        uint64_t max_local = 0;
        for (pending_entry_t *e = list; e; e = e->next)
            max_local = e->local_seq > max_local ? e->local_seq : max_local;
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = pack_batch(log, id, list, n, &buf, &len);
        uint64_t deadline = 0;
        while (rc == 0) {
            rc = commit_batch(log, id, buf, len);
            if (rc <= 0 && rc != MC_ERR_ETCD_OPERATION_ERROR)
                break;
            if (rc == 1)
                break;
            atomic_fetch_add(&log->write_failures, 1);
            pthread_mutex_lock(&log->lock);
            int stopping = log->stop;
            pthread_mutex_unlock(&log->lock);
            if (stopping) {
                if (!deadline)
                    deadline = mc_now_ms() + FLUSH_ON_STOP_MS;
                else if (mc_now_ms() >= deadline)
                    break;
            }
            usleep(100 * 1000);
            rc = 0;
        }
        free(buf);
        uint64_t last_seq = 0;
        for (pending_entry_t *e = list; e; e = e->next)
            last_seq = e->seq;
        free_entries(list);
        if (rc == 0) {
            pthread_mutex_lock(&log->lock);
            log->last_batch_id = id;
            log->npending -= n;
            pthread_cond_broadcast(&log->room);
            pthread_mutex_unlock(&log->lock);
            atomic_store(&log->durable_seq, last_seq);
            atomic_fetch_add(&log->batches_committed, 1);
            if (log->cfg.durable)
                log->cfg.durable(log->cfg.arg, max_local);
            continue;
        }
        MC_ERROR("oplog: batch %" PRIu64 " (%zu entries) not committed: %s", id, n,
                 rc == 1 ? "this master's view is no longer the leader's" : mc_error_name(rc));
        if (log->cfg.on_fail)
            log->cfg.on_fail(log->cfg.arg, rc == 1 ? "the operation log belongs to a newer leader"
                                                   : "the operation log cannot be written");
        return NULL;
    }
}

int mc_oplog_promote(mc_oplog_t *log, int64_t view_version)
{
    stop_thread(log);
    int rc = catch_up(log);
    if (rc != 0) {
        MC_ERROR("oplog: catching up before serving failed: %s", mc_error_name(rc));
        return rc == MC_ERR_ETCD_OPERATION_ERROR ? rc : MC_ERR_INCOMPLETE_OPLOG_CATCH_UP;
    }
    log->view_version = view_version;
    log->leading = 1;
    MC_INFO("oplog: caught up to batch %" PRIu64 " (seq %" PRIu64 ", %" PRIu64
            " entries applied); appending as view %lld",
            log->last_batch_id, log->last_seq, (uint64_t)atomic_load(&log->entries_applied),
            (long long)view_version);
    if (pthread_create(&log->thread, NULL, append_main, log) != 0)
        return MC_ERR_INTERNAL_ERROR;
    log->thread_running = 1;
    return 0;
}

void mc_oplog_destroy(mc_oplog_t *log)
{
    if (!log)
        return;
    stop_thread(log); /* the appender drains the queue first (bounded by FLUSH_ON_STOP_MS) */
    free_entries(log->head);
    pthread_mutex_destroy(&log->lock);
    pthread_cond_destroy(&log->cond);
    pthread_cond_destroy(&log->room);
    free(log->cluster_id);
    free(log);
}

void mc_oplog_get_stats(mc_oplog_t *log, mc_oplog_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&log->lock);
    out->last_seq = log->last_seq;
    out->last_batch_id = log->last_batch_id;
    out->pending = log->npending;
    pthread_mutex_unlock(&log->lock);
    out->durable_seq = atomic_load(&log->durable_seq);
    out->batches_committed = atomic_load(&log->batches_committed);
    out->entries_applied = atomic_load(&log->entries_applied);
    out->write_failures = atomic_load(&log->write_failures);
    out->checksum_failures = atomic_load(&log->checksum_failures);
    out->backpressure_waits = atomic_load(&log->bp_waits);
    out->backpressure_timeouts = atomic_load(&log->bp_timeouts);
}
