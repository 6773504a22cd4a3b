/*
 * store_client.c — the real client: the store backend (store_backend.h) with its own segment,
 * Transfer Engine and master connection, set up by mc_store_setup (include/mooncake/store.h).
 * store.c checks every call's arguments and brackets it; what runs here is the work.
 *
 * A put asks the master for space (PutStart: one extent per replica, on distinct segments),
 * writes the value straight into every extent through the Transfer Engine, then publishes it
 * (PutEnd) — or gives the space back (PutRevoke) if any write failed. A get asks for the complete
 * replicas (GetReplicaList, which grants a read lease), reads from the best one straight into the
 * caller's buffer, falls back to the other replicas if that read fails, and refuses the result if
 * the lease ran out before the bytes were in (the extent may have been reused); then it gives the
 * leases back (lease_release.h), so the memory of an object removed meanwhile is free at once.
 * Batches make one master call per phase and one Transfer Engine batch for all their bytes.
 *
 * With offload (offload.h), a get whose key has no readable memory replica left reads a disk
 * replica instead (a DFS file directly, a LOCAL_DISK file through its owner), and a put that
 * finds no memory while offloads are pending retries for as long as the master says freeing
 * memory may take (KeysResponse.offload_wait_ms) before returning -200.
 *
 * Besides the segment of setup, a client may mount more at run time (mc_store_allocate_and_mount_
 * segment, mc_store_mount_file_segment: mc_run_segment_t) and unmount them, at once or after a
 * grace period; their freed addresses stay reserved for a while (mc_segment_hole_t).
 *
 * A background thread pings the master every second; when the master answers NEED_REMOUNT (it
 * restarted, or this client was expired) every segment is mounted again; it also unmounts and
 * frees run-time segments whose grace period is over. The ping also carries the
 * count of disk reads, and its answer wakes the offload worker when tasks wait for it.
 */
#include "mooncake/store.h"

#include "auth.h"
#include "client_http.h"
#include "failpoint.h"
#include "ids.h"
#include "log.h"
#include "master_client.h"
#include "master_view.h"
#include "snapshot.pb-c.h" /* restore_verify */
#include "mooncake/transfer_engine.h"
#include "net.h"
#include "checksum.h"
#include "lease_release.h"
#include "offload.h"
#include "prefault.h"
#include "store_backend.h"
#include "store_client.h"
#include "task_executor.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MC_PING_INTERVAL_MS 1000
#define MC_DEFAULT_MASTER "127.0.0.1:50051"
#define MC_PUT_RETRY_MIN_MS 5
#define MC_PUT_RETRY_MAX_MS 100
#define MC_PUT_BUSY_WAIT_MS 5000        /* a put waits this long for another put of its key */
#define MC_MOUNT_FENCE_WAIT_MS 30000    /* setup waits this long for a fenced range (leases) */
#define MC_MASTER_WAIT_DEFAULT_MS 30000 /* setup waits this long for an unreachable master */
#define MC_MASTER_WAIT_ENV "MC_MASTER_WAIT_TIMEOUT" /* seconds; overrides the default */
/* A remove or upsert waits this long (MC_STORE_DELETE_WAIT_MS) for its old files to go. */
#define MC_DELETE_WAIT_DEFAULT_MS 10000
#define MC_DELETE_POLL_MIN_MS 2
#define MC_DELETE_POLL_MAX_MS 50

typedef struct mc_buffer_range {
    uintptr_t addr;
    size_t length;
} mc_buffer_range_t;

/*
 * A segment mounted at run time, beside the one of setup (upstream's mount_segment /
 * allocate_and_mount_segment). Its memory is registered in this client's Transfer Engine, so
 * peers reach it through the same endpoint ("host:port"); the master knows it by its own id.
 * Invariant: while drain_until == 0 it is mounted (or, after a master restart, re-mounted by the
 * ping thread) and its memory registered; once draining, no re-mount names it, and the ping
 * thread unmounts and frees it at drain_until.
 */
typedef enum mc_run_segment_kind {
    MC_RUN_SEGMENT_ALLOCATED = 1, /* engine memory (mc_te_alloc_segment_memory): shm-reachable */
    MC_RUN_SEGMENT_FILE = 2,      /* an mmap(MAP_SHARED) of a file, registered with the engine */
} mc_run_segment_kind_t;

typedef struct mc_run_segment {
    char id[MC_STORE_SEGMENT_ID_MAX];
    void *base;
    uint64_t size;
    mc_run_segment_kind_t kind;
    uint64_t drain_until; /* 0: mounted; else mc_now_ms() at which it is unmounted and freed */
} mc_run_segment_t;

/*
 * Address range of an unmounted run-time segment, kept reserved (PROT_NONE, nothing registered
 * there) until `until` so that no later mapping — above all a new segment — reuses the address
 * while a peer's transfer that named the old segment (a read inside its lease, a write of a put
 * the unmount revoked) may still arrive: such a transfer finds nothing registered and fails, it
 * never reaches another object's bytes.
 */
typedef struct mc_segment_hole {
    void *addr;
    size_t length;
    uint64_t until; /* mc_now_ms() */
} mc_segment_hole_t;

/* How long an unmounted segment's addresses stay reserved: the transfer timeout (30 s) plus a
 * margin, which also covers the default read lease (10 s). */
#define MC_SEGMENT_HOLE_MS 35000
/* upstream's allocate_and_mount_segment rounds sizes up to its slab size (cachelib 4 MiB) */
#define MC_RUN_SEGMENT_ALIGN (4ull << 20)

typedef struct mc_real_client {
    char client_id[40];
    char segment_id[40];
    char *master_addr;
    uint64_t global_segment_size;
    uint64_t local_buffer_size;
    mc_transfer_engine_t *te;
    int te_borrowed; /* 1: te is config.transfer_engine, the caller's: never destroyed here */
    mc_rpc_client_t *rpc;
    mc_auth_t *auth; /* the cluster secret, NULL = none (wire/auth.h) */
    mc_offload_t *offload;
    mc_lease_releaser_t *releases; /* read leases this client is done with */
    void *segment;
    mc_prefault_opts_t prefault_opts; /* MC_SEGMENT_PREFAULT* (prefault.h), read at setup */
    mc_prefault_t *prefault;          /* the segment's pre-fault pass; NULL: none or over */
    void *local_buffer;
    atomic_int closing; /* close has begun (begin_close): waits in calls end, /health says so */
    atomic_int master_reachable;
    int checksum;            /* 1: CRC32C on put, verified on get */
    uint64_t delete_wait_ms; /* how long a remove/upsert waits for its old files to go */
    atomic_uint_fast64_t checksum_mismatches; /* replicas whose bytes failed verification */
    /*
     * The write fence (owner side; ping thread only): tokens of revoked puts on our segments
     * come with pings (fence_view: the master instance); fence_raised: the sequence of the last
     * batch our engine refuses, whose fence is generation fence_gen; fence_acked: the highest
     * sequence whose fence completed, confirmed in every ping.
     */
    uint64_t fence_view, fence_raised, fence_gen, fence_acked;
    atomic_uint_fast64_t last_mismatch_log_ms;
    atomic_uint_fast64_t last_master_error_ms; /* rate limit: one failure line per second */

    /* Following an elected master (master address "etcd://..."): the etcd handle the
     * RPC client's resolver reads the leader's address through. NULL: a fixed master. */
    mc_etcd_t *view_etcd;
    char view_cluster[256];

    pthread_t ping_thread;
    int ping_started;
    pthread_t view_thread; /* following an elected master: re-reads the view every second */
    int view_started;
    int remount_pending; /* ping thread only: the last re-mount failed */
    pthread_mutex_t ping_lock;
    pthread_cond_t ping_cond;
    int ping_stop;

    int zero_copy_io;          /* serves dummies: the zero-copy calls run without a local buffer */
    mc_task_executor_t *tasks; /* copy/move tasks of this segment's replicas; NULL: no segment */
    mc_client_metrics_t *metrics; /* NULL: off (MC_STORE_CLIENT_METRIC=0) */
    mc_client_http_t *http;       /* the client HTTP server, NULL when not asked or not bound */

    pthread_rwlock_t buffers_lock; /* user buffers registered for the zero-copy calls */
    mc_buffer_range_t *buffers;
    size_t buffer_count, buffer_capacity;

    /* Segments mounted at run time (mc_store_mount_file_segment & co.), and the holes their
     * memory left (see mc_run_segment_t). segs_lock also serialises every mount, unmount and
     * re-mount call to the master, so a re-mount never names a segment being unmounted. */
    pthread_mutex_t segs_lock;
    mc_run_segment_t *run_segs;
    size_t run_seg_count, run_seg_cap;
    mc_segment_hole_t *holes;
    size_t hole_count, hole_cap;
    uint64_t epoch; /* the epoch last given to the engine (0 none) */
} mc_real_client_t;

/* ---- helpers ---------------------------------------------------------------------------- */

/* Distinguishes this process's ids from each other when the kernel gives no randomness. */
static atomic_uint_fast64_t fallback_seq;

/* A client or segment id: a random UUID, or (no randomness) pid, sequence and clock. */
static void make_uuid(char out[40])
{
    _Static_assert(40 > MC_UUID_TEXT_LEN, "room for a UUID");
    if (mc_uuid_v4(out) != 0)
        snprintf(out, 40, "%08x-%04x-%llx", (unsigned)getpid(),
                 (unsigned)(atomic_fetch_add(&fallback_seq, 1) & 0xffff),
                 (unsigned long long)mc_now_ns());
}

/* Keeps the strings of a replicate config alive for the protobuf request. */
typedef struct pb_config {
    Mc__ReplicateConfig msg;
    char **preferred;
} pb_config_t;

static int config_to_pb(const mc_replicate_config_t *c, pb_config_t *out)
{
    mc__replicate_config__init(&out->msg);
    out->preferred = NULL;
    mc_replicate_config_t def = MC_REPLICATE_CONFIG_INIT;
    if (!c)
        c = &def;
    out->msg.replica_num = c->replica_num ? c->replica_num : 1;
    size_t n = (c->preferred_segment && *c->preferred_segment ? 1 : 0) +
               (c->preferred_segments ? c->preferred_segment_count : 0);
    if (n) {
        out->preferred = calloc(n, sizeof(char *));
        if (!out->preferred)
            return MC_ERR_INTERNAL_ERROR;
        size_t k = 0;
        if (c->preferred_segment && *c->preferred_segment)
            out->preferred[k++] = (char *)c->preferred_segment;
        for (size_t i = 0; c->preferred_segments && i < c->preferred_segment_count; i++) {
            if (!c->preferred_segments[i]) { /* store.c refuses it first; never leaked here */
                free(out->preferred);
                out->preferred = NULL;
                return MC_ERR_INVALID_PARAMS;
            }
            out->preferred[k++] = (char *)c->preferred_segments[i];
        }
        out->msg.n_preferred_segments = k;
        out->msg.preferred_segments = out->preferred;
    }
    out->msg.soft_pin_action = (int32_t)c->soft_pin_action;
    out->msg.has_soft_pin_ttl = c->has_soft_pin_ttl ? 1 : 0;
    out->msg.soft_pin_ttl_ms = c->soft_pin_ttl_ms;
    out->msg.with_hard_pin = c->with_hard_pin ? 1 : 0;
    return 0;
}

static int keys_call_req(mc_real_client_t *s, uint16_t opcode, Mc__KeysRequest *req, size_t n,
                         Mc__KeysResponse **resp);

static int keys_call(mc_real_client_t *s, uint16_t opcode, char **keys, uint64_t *sizes, size_t n,
                     Mc__ReplicateConfig *config, int force, const char *regex,
                     Mc__KeysResponse **resp)
{
    Mc__KeysRequest req = MC__KEYS_REQUEST__INIT;
    req.client_id = s->client_id;
    req.n_keys = n;
    req.keys = keys;
    if (sizes) {
        req.n_sizes = n;
        req.sizes = sizes;
    }
    req.config = config;
    req.force = force ? 1 : 0;
    req.regex = (char *)(regex ? regex : "");
    return keys_call_req(s, opcode, &req, n, resp);
}

/*
 * "Acknowledged means kept": a remove or upsert returns success only once the files of the
 * values it discarded (disk replicas, and files an offload in flight may still publish) are
 * confirmed gone by the clients holding them — otherwise a crash of the master with those
 * clients would let the restart rescan bring the old value back. Waits until the master has no
 * deletion of seqs [from, to] (of `keys`, or of any key when n == 0) left unconfirmed, polling
 * with a short backoff for up to s->delete_wait_ms. Returns 0, or MC_ERR_PERSISTENT_FAIL: the
 * value is removed or replaced in the master, but a file of the old one could not be confirmed
 * deleted in time (its holder is down, no distributed client is there to delete it, or the
 * master restarted meanwhile) — a crash before it is deleted could bring the old value back.
 */
static int wait_deletions(mc_real_client_t *s, char **keys, size_t n, uint64_t from, uint64_t to)
{
    if (to == 0)
        return 0;
    Mc__DeletionsPendingRequest req = MC__DELETIONS_PENDING_REQUEST__INIT;
    req.client_id = s->client_id;
    req.keys = keys;
    req.n_keys = n;
    req.from_seq = from;
    req.to_seq = to;
    uint64_t deadline = mc_now_ms() + s->delete_wait_ms, pause = MC_DELETE_POLL_MIN_MS;
    uint64_t pending = 0;
    int rc = 0;
    for (;;) {
        Mc__DeletionsPendingResponse *resp = NULL;
        rc = mc_master_call_deletions_pending(s->rpc, &req, &resp);
        if (rc == 0) {
            rc = resp->code;
            pending = resp->pending;
            mc__deletions_pending_response__free_unpacked(resp, NULL);
            if (rc == 0 && pending == 0)
                return 0;
            if (rc != 0)
                break; /* the master does not know these deletions (it restarted) */
        }
        if (mc_now_ms() + pause > deadline)
            break;
        usleep((useconds_t)pause * 1000);
        pause = pause * 2 > MC_DELETE_POLL_MAX_MS ? MC_DELETE_POLL_MAX_MS : pause * 2;
    }
    MC_WARN("%zu file(s) of removed or replaced values not confirmed deleted within %" PRIu64
            " ms (%s); the operation is done in the master but not durable: a crash could bring "
            "the old values back",
            rc == 0 ? (size_t)pending : (size_t)0, s->delete_wait_ms,
            rc == 0 ? "their holder is down or busy" : mc_error_name(rc));
    return MC_ERR_PERSISTENT_FAIL;
}

/* PutEnd / UpsertEnd with one CRC32C per key (crcs NULL: the writer does not checksum). */
static int keys_call_checksums(mc_real_client_t *s, uint16_t opcode, char **keys, size_t n,
                               uint32_t *crcs, Mc__KeysResponse **resp)
{
    Mc__KeysRequest req = MC__KEYS_REQUEST__INIT;
    req.client_id = s->client_id;
    req.n_keys = n;
    req.keys = keys;
    req.regex = (char *)"";
    if (crcs) {
        req.n_checksums = n;
        req.checksums = crcs;
    }
    return keys_call_req(s, opcode, &req, n, resp);
}

static int keys_call_req(mc_real_client_t *s, uint16_t opcode, Mc__KeysRequest *req, size_t n,
                         Mc__KeysResponse **resp)
{
    int rc = mc_master_call_keys(s->rpc, opcode, req, resp);
    if (rc != 0) {
        if (mc_log_ratelimit(&s->last_master_error_ms, 1000))
            MC_ERROR("master %s: %s failed: %s (repeats within a second are not logged)",
                     s->master_addr, mc_rpc_method_name(opcode), mc_error_name(rc));
        return rc;
    }
    if ((*resp)->code != 0 ||
        (*resp)->n_results != (opcode == MC_RPC_REMOVE_ALL || opcode == MC_RPC_REMOVE_BY_REGEX
                                   ? (*resp)->n_results
                                   : n)) {
        rc = (*resp)->code ? (*resp)->code : MC_ERR_DESERIALIZE_FAIL;
        mc__keys_response__free_unpacked(*resp, NULL);
        *resp = NULL;
    }
    return rc;
}

/* ---- write path ------------------------------------------------------------------------- */

typedef struct write_job {
    size_t key_index;
    int failed;
} write_job_t;

/*
 * Puts (or upserts) n objects. results[i] arrives with key i's check (0: to put; store_backend.h)
 * and gets its outcome; returns 0 or the first error. *stored (the client metrics' write bytes)
 * grows by the sizes of the values PutEnd published: not those of keys that already existed,
 * which a put answers 0 without writing.
 */
static int write_objects(mc_real_client_t *s, int upsert, const char *const *keys,
                         const void *const *values, const size_t *sizes, size_t n,
                         const mc_replicate_config_t *config, int *results, uint64_t *wait_ms,
                         uint64_t *stored)
{
    uint16_t op_start = upsert ? MC_RPC_UPSERT_START : MC_RPC_PUT_START;
    uint16_t op_end = upsert ? MC_RPC_UPSERT_END : MC_RPC_PUT_END;
    uint16_t op_revoke = upsert ? MC_RPC_UPSERT_REVOKE : MC_RPC_PUT_REVOKE;
    int rc = 0;
    char **ks = calloc(n ? n : 1, sizeof(char *));
    uint64_t *sz = calloc(n ? n : 1, sizeof(uint64_t));
    size_t *idx = calloc(n ? n : 1, sizeof(size_t));
    int *started = calloc(n ? n : 1, sizeof(int));
    uint32_t *crcs = calloc(n ? n : 1, sizeof(uint32_t)); /* per started key j */
    char *fused = calloc(n ? n : 1, 1);                   /* crcs[j] came with the copy */
    pb_config_t pbc;
    Mc__KeysResponse *resp = NULL;
    mc_transfer_req_t *reqs = NULL;
    size_t *req_owner = NULL;
    if (!ks || !sz || !idx || !started || !crcs || !fused || config_to_pb(config, &pbc) != 0) {
        free(ks);
        free(sz);
        free(idx);
        free(started);
        free(crcs);
        free(fused);
        return MC_ERR_INTERNAL_ERROR;
    }

    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (results[i] == 0 && sizes[i] > 0 && !values[i])
            results[i] = MC_ERR_INVALID_PARAMS;
        if (results[i] == 0 && sizes[i] > MC_MAX_VALUE_SIZE)
            results[i] = MC_ERR_INVALID_PARAMS;
        if (results[i] == 0) {
            ks[m] = (char *)keys[i];
            sz[m] = sizes[i];
            idx[m] = i;
            m++;
        }
    }
    if (m == 0)
        goto done;
    rc = keys_call(s, op_start, ks, sz, m, &pbc.msg, 0, NULL, &resp);
    if (rc != 0) {
        for (size_t j = 0; j < m; j++)
            results[idx[j]] = rc;
        goto done;
    }
    *wait_ms = resp->offload_wait_ms;
    mc_failpoint("put.after_start");

    size_t nreq = 0;
    for (size_t j = 0; j < m; j++)
        nreq += resp->results[j]->code == 0 ? resp->results[j]->n_replicas : 0;
    reqs = calloc(nreq ? nreq : 1, sizeof(*reqs));
    req_owner = calloc(nreq ? nreq : 1, sizeof(*req_owner));
    if (!reqs || !req_owner) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto done;
    }
    nreq = 0;
    for (size_t j = 0; j < m; j++) {
        Mc__KeyResult *r = resp->results[j];
        size_t i = idx[j];
        if (r->code == MC_ERR_OBJECT_ALREADY_EXISTS && !upsert) {
            results[i] = 0; /* upstream put: an existing key is success; the value is kept */
            continue;
        }
        if (r->code != 0) {
            results[i] = r->code;
            continue;
        }
        started[j] = 1;
        for (size_t k = 0; k < r->n_replicas && sizes[i] > 0; k++) {
            mc_segment_id_t seg;
            int orc = mc_te_open_segment(s->te, r->replicas[k]->segment_name, &seg);
            if (orc != 0) {
                results[i] = MC_ERR_TRANSFER_FAIL;
                break;
            }
            reqs[nreq] = (mc_transfer_req_t){MC_TRANSFER_WRITE, (void *)values[i], seg,
                                             r->replicas[k]->address, sizes[i]};
            /* The owner refuses it once its segment was mounted again (tcp, local): a put
             * allocated by a master that since died or was deposed must not land in memory
             * the next one handed out. */
            reqs[nreq].epoch = r->replicas[k]->epoch;
            /* Once the master revoked this put (we failed, or it timed us out) the owner
             * refuses these writes, however late they arrive. */
            reqs[nreq].fence_token = r->replicas[k]->fence_token;
            /* The first replica's copy computes the value's checksum when it is a memcpy. */
            reqs[nreq].want_crc32c = s->checksum && k == 0;
            req_owner[nreq++] = j;
        }
    }
    if (nreq > 0) {
        mc_batch_t *b = NULL;
        int brc = mc_te_batch_create(s->te, nreq, &b);
        if (brc == 0)
            brc = mc_te_submit(b, reqs, nreq);
        if (brc == 0) {
            mc_te_wait(b, -1);
            for (size_t q = 0; q < nreq; q++) {
                mc_transfer_status_t st;
                mc_te_get_status(b, q, &st);
                if (st.state != MC_TRANSFER_COMPLETED)
                    results[idx[req_owner[q]]] = st.error ? st.error : MC_ERR_TRANSFER_FAIL;
                else if (st.has_crc32c) {
                    fused[req_owner[q]] = 1;
                    crcs[req_owner[q]] = st.crc32c;
                }
            }
        }
        mc_te_batch_free(b);
        if (brc != 0) {
            for (size_t q = 0; q < nreq; q++)
                results[idx[req_owner[q]]] = brc;
        }
    }

    /* Publish what was written (with each value's CRC32C), give back what was not. */
    size_t nend = 0, nrevoke = 0;
    char **end_keys = ks, **revoke_keys = calloc(m, sizeof(char *));
    size_t *end_idx = calloc(m, sizeof(size_t));
    uint32_t *end_crcs = calloc(m, sizeof(uint32_t));
    if (!revoke_keys || !end_idx || !end_crcs) {
        free(revoke_keys);
        free(end_idx);
        free(end_crcs);
        rc = MC_ERR_INTERNAL_ERROR;
        goto done;
    }
    for (size_t j = 0; j < m; j++) {
        if (!started[j])
            continue;
        if (results[idx[j]] == 0) {
            end_keys[nend] = (char *)keys[idx[j]];
            /* Fused with the copy (local, shm), else after the transfer: the source was just
             * read, so it is likely still in cache. */
            if (s->checksum)
                end_crcs[nend] = fused[j] ? crcs[j] : mc_crc32c(0, values[idx[j]], sizes[idx[j]]);
            end_idx[nend++] = idx[j];
        } else {
            revoke_keys[nrevoke++] = (char *)keys[idx[j]];
        }
    }
    if (nend) {
        Mc__KeysResponse *er = NULL;
        int erc =
            keys_call_checksums(s, op_end, end_keys, nend, s->checksum ? end_crcs : NULL, &er);
        for (size_t j = 0; j < nend; j++) {
            results[end_idx[j]] = erc ? erc : er->results[j]->code;
            *stored += results[end_idx[j]] == 0 ? sizes[end_idx[j]] : 0;
        }
        if (erc == 0 && upsert && er->deletions_to) {
            /* The replaced values' files go before the upserts are acknowledged. */
            char **wk = calloc(nend, sizeof(char *));
            size_t nw = 0;
            for (size_t j = 0; wk && j < nend; j++) {
                if (results[end_idx[j]] == 0)
                    wk[nw++] = end_keys[j];
            }
            /* (out of memory: wait on any key of the range) */
            int wrc = wait_deletions(s, wk, nw, er->deletions_from, er->deletions_to);
            free(wk);
            if (wrc != 0) {
                for (size_t j = 0; j < nend; j++) {
                    if (results[end_idx[j]] == 0)
                        results[end_idx[j]] = MC_ERR_PERSISTENT_FAIL;
                }
            }
        }
        if (er)
            mc__keys_response__free_unpacked(er, NULL);
    }
    if (nrevoke) {
        Mc__KeysResponse *rr = NULL;
        if (keys_call(s, op_revoke, revoke_keys, NULL, nrevoke, NULL, 0, NULL, &rr) == 0)
            mc__keys_response__free_unpacked(rr, NULL);
    }
    free(revoke_keys);
    free(end_idx);
    free(end_crcs);

done:
    if (resp)
        mc__keys_response__free_unpacked(resp, NULL);
    free(reqs);
    free(req_owner);
    free(pbc.preferred);
    free(ks);
    free(sz);
    free(idx);
    free(started);
    free(crcs);
    free(fused);
    if (rc == 0) {
        for (size_t i = 0; i < n; i++) {
            if (results[i] != 0) {
                rc = results[i];
                break;
            }
        }
    }
    return rc;
}

/* ---- read path -------------------------------------------------------------------------- */

/* Replica order: this client's own segment first (a memcpy), then as the master listed them. */
static size_t pick_order(mc_real_client_t *s, const Mc__KeyResult *r, size_t *order)
{
    size_t k = 0;
    const char *self = mc_te_local_segment_name(s->te);
    for (size_t i = 0; i < r->n_replicas; i++) {
        if (r->replicas[i]->type == MC_REPLICA_MEMORY &&
            !strcmp(r->replicas[i]->segment_name, self))
            order[k++] = i;
    }
    for (size_t i = 0; i < r->n_replicas; i++) {
        if (r->replicas[i]->type == MC_REPLICA_MEMORY && strcmp(r->replicas[i]->segment_name, self))
            order[k++] = i;
    }
    return k;
}

/*
 * Checks the bytes read from replica `rep` against the writer's CRC32C. 0 when they match (or
 * nothing can be checked: checksums off, or an object written without one), else
 * MC_ERR_CHECKSUM_MISMATCH, counted and logged (rate-limited).
 */
static int verify_replica(mc_real_client_t *s, const char *key, const Mc__Replica *rep,
                          const void *buf, uint64_t size, const mc_transfer_status_t *st)
{
    if (!s->checksum || !rep->has_checksum || size == 0)
        return 0;
    /* Computed during the copy by the Transfer Engine (local, shm), else here. */
    uint32_t crc = st && st->has_crc32c ? st->crc32c : mc_crc32c(0, buf, (size_t)size);
    if (crc == rep->checksum)
        return 0;
    atomic_fetch_add(&s->checksum_mismatches, 1);
    if (mc_log_ratelimit(&s->last_mismatch_log_ms, 1000))
        MC_WARN("checksum mismatch reading %.64s (%llu bytes) from its %s replica on %s: CRC32C "
                "%08x, expected %08x; trying the next replica (repeats within a second are not "
                "logged)",
                key, (unsigned long long)size, rep->type == MC_REPLICA_MEMORY ? "memory" : "disk",
                rep->segment_name, crc, rep->checksum);
    return MC_ERR_CHECKSUM_MISMATCH;
}

/*
 * Reads a disk replica of the key when no memory replica could be read: every disk replica in the
 * master's order until one succeeds and verifies. Returns the size or the last error (a checksum
 * mismatch is an error: never wrong bytes).
 */
static int64_t read_from_disk(mc_real_client_t *s, const char *key, const Mc__KeyResult *r,
                              void *buf, int64_t memory_error)
{
    int64_t result = memory_error;
    for (size_t k = 0; k < r->n_replicas; k++) {
        const Mc__Replica *rep = r->replicas[k];
        if (rep->type != MC_REPLICA_LOCAL_DISK && rep->type != MC_REPLICA_DFS)
            continue;
        int rc = mc_offload_read(s->offload, s->te, key, rep, buf, r->size);
        if (rc == 0)
            rc = verify_replica(s, key, rep, buf, r->size, NULL);
        if (rc == 0)
            return (int64_t)r->size;
        result = rc;
    }
    return result;
}

static void replica_request(mc_real_client_t *s, const Mc__Replica *rep, void *buf, uint64_t size,
                            mc_segment_id_t seg, mc_transfer_req_t *out)
{
    *out = (mc_transfer_req_t){MC_TRANSFER_READ, buf, seg, rep->address, size};
    out->epoch = rep->epoch; /* the owner refuses a read of a previous mount's memory */
    out->want_crc32c = s->checksum && rep->has_checksum;
}

/* 1 when a memory read's result may still be bettered by another replica. */
static int retryable(int64_t result)
{
    return result == MC_ERR_TRANSFER_FAIL || result == MC_ERR_CHECKSUM_MISMATCH;
}

/* Gets n objects; results[i] arrives with key i's check (0: to read; store_backend.h) and gets
 * its size or error. Returns 0 or the first error. */
static int read_objects(mc_real_client_t *s, const char *const *keys, void *const *bufs,
                        const size_t *caps, size_t n, int64_t *results)
{
    int rc = 0;
    char **ks = calloc(n ? n : 1, sizeof(char *));
    size_t *idx = calloc(n ? n : 1, sizeof(size_t));
    size_t *first = calloc(n ? n : 1, sizeof(size_t));      /* replica tried first, per valid key */
    char *from_disk = calloc(n ? n : 1, 1);                 /* per valid key: read from disk */
    uint64_t *finish = calloc(n ? n : 1, sizeof(uint64_t)); /* per valid key: last memory read */
    size_t *alt = calloc(n ? n : 1, sizeof(size_t)); /* per valid key: replica of this round */
    Mc__KeysResponse *resp = NULL;
    mc_transfer_req_t *reqs = NULL;
    size_t *req_owner = NULL;
    if (!ks || !idx || !first || !from_disk || !finish || !alt) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto done;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (results[i] == 0) {
            ks[m] = (char *)keys[i];
            idx[m++] = i;
        }
    }
    if (m == 0)
        goto done;
    uint64_t t0 = mc_now_ms();
    rc = keys_call(s, MC_RPC_GET_REPLICA_LIST, ks, NULL, m, NULL, 0, NULL, &resp);
    if (rc != 0) {
        for (size_t j = 0; j < m; j++)
            results[idx[j]] = rc;
        goto done;
    }
    mc_failpoint("get.after_lookup");
    reqs = calloc(m, sizeof(*reqs));
    req_owner = calloc(m, sizeof(*req_owner));
    if (!reqs || !req_owner) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto done;
    }
    size_t nreq = 0;
    for (size_t j = 0; j < m; j++) {
        Mc__KeyResult *r = resp->results[j];
        size_t i = idx[j];
        if (r->code != 0) {
            results[i] = r->code;
            continue;
        }
        if (r->size > caps[i]) {
            results[i] = MC_ERR_BUFFER_OVERFLOW;
            continue;
        }
        results[i] = (int64_t)r->size;
        if (r->size == 0)
            continue;
        if (!bufs[i]) {
            results[i] = MC_ERR_INVALID_PARAMS;
            continue;
        }
        size_t order[MC_MAX_REPLICAS * 2];
        if (r->n_replicas > MC_MAX_REPLICAS * 2 || pick_order(s, r, order) == 0) {
            results[i] = MC_ERR_REPLICA_IS_NOT_READY;
            continue;
        }
        first[j] = order[0];
        mc_segment_id_t seg;
        if (mc_te_open_segment(s->te, r->replicas[order[0]]->segment_name, &seg) != 0) {
            results[i] = MC_ERR_TRANSFER_FAIL; /* retried on the other replicas below */
            continue;
        }
        replica_request(s, r->replicas[order[0]], bufs[i], r->size, seg, &reqs[nreq]);
        req_owner[nreq++] = j;
    }
    if (nreq > 0) {
        mc_batch_t *b = NULL;
        int brc = mc_te_batch_create(s->te, nreq, &b);
        if (brc == 0)
            brc = mc_te_submit(b, reqs, nreq);
        if (brc == 0)
            mc_te_wait(b, -1);
        uint64_t now = mc_now_ms();
        for (size_t q = 0; q < nreq; q++) {
            size_t j = req_owner[q];
            mc_transfer_status_t st = {MC_TRANSFER_FAILED, brc, 0, 0, 0, 0};
            if (brc == 0)
                mc_te_get_status(b, q, &st);
            finish[j] = st.finish_ms ? st.finish_ms : now;
            if (st.state != MC_TRANSFER_COMPLETED)
                results[idx[j]] = MC_ERR_TRANSFER_FAIL;
            else if (verify_replica(s, keys[idx[j]], resp->results[j]->replicas[first[j]],
                                    bufs[idx[j]], resp->results[j]->size, &st) != 0)
                results[idx[j]] = MC_ERR_CHECKSUM_MISMATCH;
        }
        mc_te_batch_free(b);
    }
    /*
     * A failed or unverified read tries the object's other replicas: round t reads, in one
     * Transfer Engine call (one deadline), the t-th other replica of every key still failing.
     * So a batch fails over within one deadline per replica, not one per key and replica.
     */
    for (size_t t = 0;; t++) {
        size_t nalt = 0, any = 0;
        for (size_t j = 0; j < m; j++) {
            size_t i = idx[j];
            Mc__KeyResult *r = resp->results[j];
            if (r->code != 0 || !retryable(results[i]))
                continue;
            size_t order[MC_MAX_REPLICAS * 2];
            size_t k = pick_order(s, r, order), u = 0, pick = SIZE_MAX;
            for (size_t o = 0; o < k && pick == SIZE_MAX; o++)
                if (order[o] != first[j] && u++ == t)
                    pick = order[o];
            if (pick == SIZE_MAX)
                continue;
            any = 1;
            mc_segment_id_t seg;
            if (mc_te_open_segment(s->te, r->replicas[pick]->segment_name, &seg) != 0) {
                finish[j] = mc_now_ms();
                continue;
            }
            replica_request(s, r->replicas[pick], bufs[i], r->size, seg, &reqs[nalt]);
            alt[j] = pick;
            req_owner[nalt++] = j;
        }
        if (!any)
            break;
        if (nalt == 0)
            continue;
        mc_batch_t *b = NULL;
        int brc = mc_te_batch_create(s->te, nalt, &b);
        if (brc == 0)
            brc = mc_te_submit(b, reqs, nalt);
        if (brc == 0)
            mc_te_wait(b, -1);
        uint64_t now = mc_now_ms();
        for (size_t q = 0; q < nalt; q++) {
            size_t j = req_owner[q], i = idx[j];
            mc_transfer_status_t st = {MC_TRANSFER_FAILED, brc, 0, 0, 0, 0};
            if (brc == 0)
                mc_te_get_status(b, q, &st);
            finish[j] = st.finish_ms ? st.finish_ms : now;
            if (st.state != MC_TRANSFER_COMPLETED)
                continue; /* the key keeps its error and tries its next replica */
            Mc__KeyResult *r = resp->results[j];
            results[i] = verify_replica(s, keys[i], r->replicas[alt[j]], bufs[i], r->size, &st)
                             ? MC_ERR_CHECKSUM_MISMATCH
                             : (int64_t)r->size;
        }
        mc_te_batch_free(b);
    }
    /* No memory replica left, or none readable: the disk replicas (offload). */
    for (size_t j = 0; j < m; j++) {
        size_t i = idx[j];
        Mc__KeyResult *r = resp->results[j];
        if (r->code != 0 || r->size == 0 || !bufs[i] ||
            (!retryable(results[i]) && results[i] != MC_ERR_REPLICA_IS_NOT_READY))
            continue;
        int64_t got = read_from_disk(s, keys[i], r, bufs[i], results[i]);
        from_disk[j] = got >= 0;
        results[i] = got;
    }
    /* Bytes read after the lease ran out may come from an extent already reused (a disk replica's
     * file is never reused: it is named by its version). Judged per key: when its last memory
     * read ended. */
    for (size_t j = 0; j < m && resp->lease_ttl_ms > 0; j++) {
        size_t i = idx[j];
        if (results[i] > 0 && !from_disk[j] && finish[j] > t0 &&
            finish[j] - t0 > resp->lease_ttl_ms) {
            MC_WARN("get of %.64s took %llu ms, longer than its %llu ms read lease; result dropped",
                    keys[i], (unsigned long long)(finish[j] - t0),
                    (unsigned long long)resp->lease_ttl_ms);
            results[i] = MC_ERR_LEASE_EXPIRED;
        }
    }
done:
    /* Done with the bytes, whatever the outcome: the leases go back. */
    for (size_t j = 0; resp && j < resp->n_results; j++)
        mc_lease_releaser_add(s->releases, ks[j], resp->results[j]->lease_id);
    if (resp)
        mc__keys_response__free_unpacked(resp, NULL);
    free(reqs);
    free(req_owner);
    free(ks);
    free(idx);
    free(first);
    free(from_disk);
    free(finish);
    free(alt);
    if (rc == 0) {
        for (size_t i = 0; i < n; i++) {
            if (results[i] < 0) {
                rc = (int)results[i];
                break;
            }
        }
    }
    return rc;
}

/* A read result that a new lookup may better: no replica verified (the object was replaced or
 * removed and put again meanwhile), or the disk replica's file was gone (evicted or removed
 * between the lookup and the read: a new lookup says -704, or names the object's files now). */
static int reread(const mc_real_client_t *s, int64_t result)
{
    return (result == MC_ERR_CHECKSUM_MISMATCH && s->checksum) || result == MC_ERR_FILE_NOT_FOUND;
}

/*
 * read_objects, then once more for the keys whose result reread() says a new lookup may better:
 * with --default_kv_lease_ttl=0 nothing holds the old extents, and disk eviction may delete a
 * file between the lookup and the read; a new lookup finds the new value or the miss.
 */
static int read_verified(mc_real_client_t *s, const char *const *keys, void *const *bufs,
                         const size_t *caps, size_t n, int64_t *results)
{
    int rc = read_objects(s, keys, bufs, caps, n, results);
    if (rc == 0)
        return rc;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += reread(s, results[i]);
    if (m == 0)
        return rc;
    const char **k2 = calloc(m, sizeof(*k2));
    void **b2 = calloc(m, sizeof(*b2));
    size_t *c2 = calloc(m, sizeof(*c2)), *at = calloc(m, sizeof(*at));
    int64_t *r2 = calloc(m, sizeof(*r2)); /* zeroed: these keys passed their check */
    if (k2 && b2 && c2 && at && r2) {
        m = 0;
        for (size_t i = 0; i < n; i++) {
            if (reread(s, results[i])) {
                k2[m] = keys[i];
                b2[m] = bufs[i];
                c2[m] = caps[i];
                at[m++] = i;
            }
        }
        read_objects(s, k2, b2, c2, m, r2);
        for (size_t j = 0; j < m; j++)
            results[at[j]] = r2[j];
        rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = results[i] < 0 ? (int)results[i] : 0;
    }
    free(k2);
    free(b2);
    free(c2);
    free(at);
    free(r2);
    return rc;
}

/* ---- registered buffers ----------------------------------------------------------------- */

static int buffer_registered(mc_real_client_t *s, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;
    int ok = 0;
    pthread_rwlock_rdlock(&s->buffers_lock);
    for (size_t i = 0; i < s->buffer_count && !ok; i++) {
        const mc_buffer_range_t *b = &s->buffers[i];
        ok = a >= b->addr && len <= b->length && a - b->addr <= b->length - len;
    }
    pthread_rwlock_unlock(&s->buffers_lock);
    if (!ok)
        MC_ERROR("buffer %p (+%zu) is not inside a registered buffer", p, len);
    return ok;
}

static int real_register_buffer(void *impl, void *buf, size_t size)
{
    mc_real_client_t *s = impl;
    int rc = mc_te_register_memory(s->te, buf, size);
    if (rc != 0)
        return rc;
    pthread_rwlock_wrlock(&s->buffers_lock);
    if (s->buffer_count == s->buffer_capacity) {
        size_t cap = s->buffer_capacity ? s->buffer_capacity * 2 : 8;
        mc_buffer_range_t *nb = realloc(s->buffers, cap * sizeof(*nb));
        if (!nb) {
            pthread_rwlock_unlock(&s->buffers_lock);
            mc_te_unregister_memory(s->te, buf);
            return MC_ERR_INTERNAL_ERROR;
        }
        s->buffers = nb;
        s->buffer_capacity = cap;
    }
    s->buffers[s->buffer_count++] = (mc_buffer_range_t){(uintptr_t)buf, size};
    pthread_rwlock_unlock(&s->buffers_lock);
    return 0;
}

static int real_unregister_buffer(void *impl, void *buf)
{
    mc_real_client_t *s = impl;
    int rc = MC_ERR_INVALID_PARAMS;
    pthread_rwlock_wrlock(&s->buffers_lock);
    for (size_t i = 0; i < s->buffer_count; i++) {
        if (s->buffers[i].addr == (uintptr_t)buf) {
            s->buffers[i] = s->buffers[--s->buffer_count];
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&s->buffers_lock);
    if (rc == 0)
        rc = mc_te_unregister_memory(s->te, buf);
    return rc;
}

/* ---- public API: objects ---------------------------------------------------------------- */

static int check_registered_all(mc_real_client_t *s, const void *const *bufs, const size_t *sizes,
                                size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (sizes[i] > 0 && !buffer_registered(s, bufs[i], sizes[i]))
            return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

/*
 * Retries, with backoff, the keys whose put may still succeed:
 *  - no memory (-200) while the master had offloads pending: until they fit or the master's wait
 *    (offload_wait_ms, from the first attempt) runs out;
 *  - another put of the key in progress (-703): until that put's outcome is known (the key is
 *    complete: 0; it was revoked: this put goes ahead) or MC_PUT_BUSY_WAIT_MS passed.
 */
static void retry_pending_keys(mc_real_client_t *s, int upsert, const char *const *keys,
                               const void *const *values, const size_t *sizes, size_t n,
                               const mc_replicate_config_t *config, int *results, uint64_t wait_ms,
                               uint64_t *stored)
{
    const char **k2 = calloc(n, sizeof(*k2));
    const void **v2 = calloc(n, sizeof(*v2));
    size_t *s2 = calloc(n, sizeof(*s2)), *at = calloc(n, sizeof(*at));
    int *r2 = calloc(n, sizeof(*r2));
    uint64_t now = mc_now_ms();
    uint64_t memory_deadline = now + wait_ms, busy_deadline = now + MC_PUT_BUSY_WAIT_MS;
    unsigned backoff = MC_PUT_RETRY_MIN_MS;
    while (k2 && v2 && s2 && at && r2) {
        now = mc_now_ms();
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            int memory = results[i] == MC_ERR_NO_AVAILABLE_HANDLE && now < memory_deadline;
            int busy = results[i] == MC_ERR_REPLICA_IS_NOT_READY && now < busy_deadline;
            if (memory || busy) {
                k2[m] = keys[i];
                v2[m] = values[i];
                s2[m] = sizes[i];
                at[m++] = i;
            }
        }
        if (m == 0)
            break;
        usleep(backoff * 1000u);
        backoff = backoff * 2 > MC_PUT_RETRY_MAX_MS ? MC_PUT_RETRY_MAX_MS : backoff * 2;
        uint64_t more_ms = 0;           /* the first attempt's offload wait bounds every retry */
        memset(r2, 0, m * sizeof(*r2)); /* these keys passed their check: all are put again */
        write_objects(s, upsert, k2, v2, s2, m, config, r2, &more_ms, stored);
        for (size_t j = 0; j < m; j++)
            results[at[j]] = r2[j];
    }
    free(k2);
    free(v2);
    free(s2);
    free(at);
    free(r2);
}

/*
 * A store with local_buffer_size 0 is a pure server: it refuses the put and get family, unless it
 * serves dummies (mc_store_allow_zero_copy_io: every byte is then in the dummies' memory). The
 * call then writes nothing and reads nothing: every results[i] says so.
 */
static int refuses_io(const mc_real_client_t *s)
{
    if (s->local_buffer_size > 0 || s->zero_copy_io)
        return 0;
    MC_ERROR("this store has local_buffer_size 0: it is a pure server and cannot put or get");
    return 1;
}

/* put / upsert, plain or zero-copy, single or batch: one path (the write slot). */
static int real_write(void *impl, mc_client_op_t op, int upsert, int zero_copy,
                      const char *const *keys, const void *const *values, const size_t *sizes,
                      size_t n, const mc_replicate_config_t *config, int *results)
{
    mc_real_client_t *s = impl;
    uint64_t t0 = mc_now_ns();
    if (refuses_io(s) || (zero_copy && check_registered_all(s, values, sizes, n) != 0)) {
        for (size_t i = 0; i < n; i++)
            results[i] = MC_ERR_INVALID_PARAMS; /* nothing of the batch is written */
        return MC_ERR_INVALID_PARAMS;
    }
    uint64_t wait_ms = 0;
    uint64_t stored = 0;
    int rc = write_objects(s, upsert, keys, values, sizes, n, config, results, &wait_ms, &stored);
    if (rc == MC_ERR_INTERNAL_ERROR) { /* out of memory before any key ran: none was written */
        for (size_t i = 0; i < n; i++)
            if (results[i] == 0)
                results[i] = rc;
    }
    if (rc != 0) {
        retry_pending_keys(s, upsert, keys, values, sizes, n, config, results, wait_ms, &stored);
        rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = results[i];
    }
    mc_client_metrics_record(s->metrics, op, n, stored, (mc_now_ns() - t0) / 1000);
    return rc;
}

/* get, plain or zero-copy, single or batch: one path (the read slot). */
static int real_read(void *impl, mc_client_op_t op, int zero_copy, const char *const *keys,
                     void *const *bufs, const size_t *capacities, size_t n, int64_t *results)
{
    mc_real_client_t *s = impl;
    uint64_t t0 = mc_now_ns();
    if (refuses_io(s) ||
        (zero_copy && check_registered_all(s, (const void *const *)bufs, capacities, n) != 0)) {
        for (size_t i = 0; i < n; i++)
            results[i] = MC_ERR_INVALID_PARAMS;
        return MC_ERR_INVALID_PARAMS;
    }
    int rc = read_verified(s, keys, bufs, capacities, n, results);
    if (s->metrics) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < n; i++)
            bytes += results[i] > 0 ? (uint64_t)results[i] : 0;
        mc_client_metrics_record(s->metrics, op, n, bytes, (mc_now_ns() - t0) / 1000);
    }
    return rc;
}

/* GetReplicaList for one key (grants the read lease, as upstream's get_size does). */
static int replica_list(mc_real_client_t *s, const char *key, Mc__KeysResponse **resp)
{
    char *k = (char *)key;
    int rc = keys_call(s, MC_RPC_GET_REPLICA_LIST, &k, NULL, 1, NULL, 0, NULL, resp);
    if (rc == 0 && (*resp)->results[0]->code != 0) {
        rc = (*resp)->results[0]->code;
        mc__keys_response__free_unpacked(*resp, NULL);
    }
    return rc;
}

static int64_t real_get_size(void *impl, const char *key)
{
    Mc__KeysResponse *resp;
    int rc = replica_list(impl, key, &resp);
    if (rc != 0)
        return rc;
    int64_t size = (int64_t)resp->results[0]->size;
    mc__keys_response__free_unpacked(resp, NULL);
    return size;
}

static int real_get_replica_desc(void *impl, const char *key, mc_replica_desc_t *out,
                                 size_t capacity, size_t *count)
{
    Mc__KeysResponse *resp;
    int rc = replica_list(impl, key, &resp);
    if (rc != 0)
        return rc;
    Mc__KeyResult *r = resp->results[0];
    *count = r->n_replicas;
    for (size_t i = 0; i < r->n_replicas && i < capacity; i++) {
        mc_replica_desc_t *d = &out[i];
        memset(d, 0, sizeof(*d));
        d->type = (mc_replica_type_t)r->replicas[i]->type;
        d->status = (mc_replica_status_t)r->replicas[i]->status;
        snprintf(d->segment_name, sizeof(d->segment_name), "%s", r->replicas[i]->segment_name);
        d->address = r->replicas[i]->address;
        d->epoch = r->replicas[i]->epoch;
        d->has_checksum = r->replicas[i]->has_checksum;
        d->checksum = r->replicas[i]->checksum;
        d->fence_token = r->replicas[i]->fence_token;
        d->size = r->replicas[i]->size;
        snprintf(d->file_path, sizeof(d->file_path), "%s", r->replicas[i]->file_path);
    }
    mc__keys_response__free_unpacked(resp, NULL);
    return 0;
}

/* One RPC over keys whose results are per-key codes (exist, remove); results[i] arrives with key
 * i's check (store_backend.h). */
static int per_key_call(mc_real_client_t *s, uint16_t opcode, const char *const *keys, size_t n,
                        int force, int *results)
{
    char **ks = calloc(n ? n : 1, sizeof(char *));
    size_t *idx = calloc(n ? n : 1, sizeof(size_t));
    if (!ks || !idx) {
        free(ks);
        free(idx);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (results[i] == 0) {
            ks[m] = (char *)keys[i];
            idx[m++] = i;
        }
    }
    int rc = 0;
    Mc__KeysResponse *resp = NULL;
    if (m > 0) {
        rc = keys_call(s, opcode, ks, NULL, m, NULL, force, NULL, &resp);
        for (size_t j = 0; j < m; j++) {
            if (rc != 0)
                results[idx[j]] = rc;
            else if (opcode == MC_RPC_EXIST_KEY && resp->results[j]->code == 0)
                results[idx[j]] = resp->results[j]->exists ? 1 : 0;
            else
                results[idx[j]] = resp->results[j]->code;
        }
        if (rc == 0 && opcode == MC_RPC_REMOVE &&
            wait_deletions(s, ks, m, resp->deletions_from, resp->deletions_to) != 0) {
            for (size_t j = 0; j < m; j++) {
                if (results[idx[j]] == 0)
                    results[idx[j]] = MC_ERR_PERSISTENT_FAIL;
            }
        }
        if (resp)
            mc__keys_response__free_unpacked(resp, NULL);
    }
    free(ks);
    free(idx);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (results[i] < 0)
            rc = results[i];
    }
    return rc;
}

static int real_exist(void *impl, const char *const *keys, size_t n, int *results)
{
    return per_key_call(impl, MC_RPC_EXIST_KEY, keys, n, 0, results);
}

static int real_remove(void *impl, const char *const *keys, size_t n, int force, int *results)
{
    return per_key_call(impl, MC_RPC_REMOVE, keys, n, force, results);
}

/* remove_all (regex NULL) and remove_by_regex: the count removed, once their files are gone. */
static int64_t count_call(mc_real_client_t *s, uint16_t opcode, const char *regex, int force)
{
    Mc__KeysResponse *resp;
    int rc = keys_call(s, opcode, NULL, NULL, 0, NULL, force, regex, &resp);
    if (rc != 0)
        return rc;
    int64_t count = resp->count;
    rc = wait_deletions(s, NULL, 0, resp->deletions_from, resp->deletions_to);
    mc__keys_response__free_unpacked(resp, NULL);
    return rc != 0 ? rc : count;
}

static int64_t real_remove_all(void *impl, int force)
{
    return count_call(impl, MC_RPC_REMOVE_ALL, NULL, force);
}

static int64_t real_remove_by_regex(void *impl, const char *regex, int force)
{
    return count_call(impl, MC_RPC_REMOVE_BY_REGEX, regex, force);
}

/* ---- lifecycle -------------------------------------------------------------------------- */

/* Gives the engine the master's epoch for this client's segments, unless it already has it
 * (mc_te_set_epoch waits for older transfers: not for nothing). */
static int store_set_epoch(mc_real_client_t *s, uint64_t epoch)
{
    if (epoch == s->epoch)
        return 0;
    int rc = mc_te_set_epoch(s->te, epoch);
    if (rc == 0) /* else asked again next time: its fence did not complete */
        s->epoch = epoch;
    return rc;
}

/* Fills one wire segment. */
static void fill_pb_segment(mc_real_client_t *s, Mc__Segment *seg, const char *id, void *base,
                            uint64_t size)
{
    seg->id = (char *)id;
    seg->name = (char *)mc_te_local_segment_name(s->te);
    seg->base_address = (uint64_t)(uintptr_t)base;
    seg->size = size;
    seg->protocol = (char *)mc_te_protocol(s->te);
}

/*
 * Mount, re-mount or unmount at the master: the segment of setup, plus, for a re-mount, every
 * run-time segment that is mounted (not draining). Caller holds segs_lock when run-time segments
 * may exist (the ping thread and close do).
 */
static int segment_call(mc_real_client_t *s, uint16_t opcode)
{
    size_t extra = opcode == MC_RPC_REMOUNT_SEGMENT ? s->run_seg_count : 0;
    Mc__Segment *pool = calloc(1 + extra, sizeof(*pool));
    Mc__Segment **segs = calloc(1 + extra, sizeof(*segs));
    if (!pool || !segs) {
        free(pool);
        free(segs);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t n = 0;
    if (s->segment) { /* none: a pure client registers itself for liveness */
        mc__segment__init(&pool[n]);
        fill_pb_segment(s, &pool[n], s->segment_id, s->segment, s->global_segment_size);
        segs[n] = &pool[n];
        n++;
    }
    for (size_t i = 0; i < extra; i++) {
        const mc_run_segment_t *r = &s->run_segs[i];
        if (r->drain_until)
            continue;
        mc__segment__init(&pool[n]);
        fill_pb_segment(s, &pool[n], r->id, r->base, r->size);
        segs[n] = &pool[n];
        n++;
    }
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    req.client_id = s->client_id;
    req.n_segments = n;
    req.segments = segs;
    const char *name = n ? segs[0]->name : mc_te_local_segment_name(s->te);
    Mc__StatusResponse *resp;
    int rc = mc_master_call_segments(s->rpc, opcode, &req, &resp);
    free(pool);
    free(segs);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0 && opcode != MC_RPC_UNMOUNT_SEGMENT && n > 0)
        store_set_epoch(s, resp->epoch); /* transfers naming an older mount are refused */
    if (rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
        MC_INFO("master defers the mount of segment %s until read leases on its previous "
                "mount's memory end; retrying",
                name);
    else if (rc != 0)
        MC_ERROR("master refused segment %s: %s %s", name, mc_error_name(rc),
                 resp->message ? resp->message : "");
    mc__status_response__free_unpacked(resp, NULL);
    return rc;
}

/* ---- segments mounted at run time ------------------------------------------------------------ */

/* Upstream's segment id form, "<u64>-<u64>" in decimal (UuidToString). */
static void make_segment_id(char out[MC_STORE_SEGMENT_ID_MAX])
{
    uint64_t v[2] = {0, 0};
    if (mc_random_bytes(v, sizeof(v)) != 0) {
        v[0] = mc_now_ns() ^ ((uint64_t)getpid() << 32);
        v[1] = atomic_fetch_add(&fallback_seq, 1);
    }
    snprintf(out, MC_STORE_SEGMENT_ID_MAX, "%" PRIu64 "-%" PRIu64, v[0], v[1]);
}

/* Keeps [addr, +length) reserved until now + MC_SEGMENT_HOLE_MS (see mc_segment_hole_t).
 * `replace`: the range is still mapped (a file) and the reservation replaces it atomically. */
static void hole_reserve(mc_real_client_t *s, void *addr, size_t length, int replace)
{
    int flags =
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (replace ? MAP_FIXED : MAP_FIXED_NOREPLACE);
    void *p = mmap(addr, length, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED || p != addr) {
        if (p != MAP_FAILED)
            munmap(p, length);
        if (replace)
            munmap(addr, length);
        MC_WARN("cannot keep the addresses of unmounted segment memory %p (+%zu) reserved: %s",
                addr, length, strerror(errno));
        return;
    }
    if (s->hole_count == s->hole_cap) {
        size_t cap = s->hole_cap ? s->hole_cap * 2 : 4;
        mc_segment_hole_t *v = realloc(s->holes, cap * sizeof(*v));
        if (!v) {
            munmap(addr, length);
            return;
        }
        s->holes = v;
        s->hole_cap = cap;
    }
    s->holes[s->hole_count++] = (mc_segment_hole_t){addr, length, mc_now_ms() + MC_SEGMENT_HOLE_MS};
}

/* Releases the holes whose time is up (all with `all`). Caller holds segs_lock. */
static void holes_release(mc_real_client_t *s, int all)
{
    uint64_t now = mc_now_ms();
    size_t kept = 0;
    for (size_t i = 0; i < s->hole_count; i++) {
        if (all || now >= s->holes[i].until)
            munmap(s->holes[i].addr, s->holes[i].length);
        else
            s->holes[kept++] = s->holes[i];
    }
    s->hole_count = kept;
}

/* Unregisters and frees the memory of run-time segment i (already unmounted at the master) and
 * drops it from the list. Caller holds segs_lock. The engine waits for transfers in flight on
 * the memory before it lets go of it; the addresses then stay reserved as a hole. */
static void run_segment_free(mc_real_client_t *s, size_t i)
{
    mc_run_segment_t r = s->run_segs[i];
    s->run_segs[i] = s->run_segs[--s->run_seg_count];
    size_t length = r.kind == MC_RUN_SEGMENT_FILE
                        ? (size_t)((r.size + (uint64_t)sysconf(_SC_PAGESIZE) - 1) &
                                   ~((uint64_t)sysconf(_SC_PAGESIZE) - 1))
                        : (size_t)r.size;
    if (r.kind == MC_RUN_SEGMENT_ALLOCATED) {
        mc_te_free_segment_memory(s->te, r.base);
        hole_reserve(s, r.base, length, 0);
    } else {
        mc_te_unregister_memory(s->te, r.base);
        hole_reserve(s, r.base, length, 1);
    }
    MC_INFO("segment %s (%" PRIu64 " bytes at %p) unmounted and its memory released", r.id, r.size,
            r.base);
}

/* Unmounts run-time segment i at the master now (upstream's UnmountSegment: its replicas are
 * dropped first). 0 also when the master no longer knows it. Caller holds segs_lock. */
static int run_segment_unmount_now(mc_real_client_t *s, size_t i)
{
    Mc__Segment seg = MC__SEGMENT__INIT;
    Mc__Segment *segs[1] = {&seg};
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    fill_pb_segment(s, &seg, s->run_segs[i].id, s->run_segs[i].base, s->run_segs[i].size);
    req.client_id = s->client_id;
    req.n_segments = 1;
    req.segments = segs;
    Mc__StatusResponse *resp;
    int rc = mc_master_call_segments(s->rpc, MC_RPC_UNMOUNT_SEGMENT, &req, &resp);
    if (rc != 0)
        return rc;
    rc = resp->code == MC_ERR_SEGMENT_NOT_FOUND ? 0 : resp->code;
    mc__status_response__free_unpacked(resp, NULL);
    return rc;
}

/* Ping thread, every tick: draining segments whose grace is over are unmounted and freed. */
static void run_segments_tick(mc_real_client_t *s)
{
    pthread_mutex_lock(&s->segs_lock);
    uint64_t now = mc_now_ms();
    for (size_t i = 0; i < s->run_seg_count;) {
        const mc_run_segment_t *r = &s->run_segs[i];
        if (r->drain_until && now >= r->drain_until && run_segment_unmount_now(s, i) == 0) {
            run_segment_free(s, i); /* slot i now holds another segment */
            continue;
        }
        i++;
    }
    holes_release(s, 0);
    pthread_mutex_unlock(&s->segs_lock);
}

/* Adds memory [base, +size) as a new run-time segment mounted at the master. Caller holds
 * segs_lock; on failure the caller still owns the memory (unregistered by the caller). */
static int run_segment_mount(mc_real_client_t *s, void *base, uint64_t size,
                             mc_run_segment_kind_t kind, char *id_out)
{
    if (s->run_seg_count == s->run_seg_cap) {
        size_t cap = s->run_seg_cap ? s->run_seg_cap * 2 : 4;
        mc_run_segment_t *v = realloc(s->run_segs, cap * sizeof(*v));
        if (!v)
            return MC_ERR_INTERNAL_ERROR;
        s->run_segs = v;
        s->run_seg_cap = cap;
    }
    mc_run_segment_t *r = &s->run_segs[s->run_seg_count];
    memset(r, 0, sizeof(*r));
    make_segment_id(r->id);
    r->base = base;
    r->size = size;
    r->kind = kind;
    Mc__Segment seg = MC__SEGMENT__INIT;
    Mc__Segment *segs[1] = {&seg};
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    fill_pb_segment(s, &seg, r->id, base, size);
    req.client_id = s->client_id;
    req.n_segments = 1;
    req.segments = segs;
    Mc__StatusResponse *resp;
    int rc = mc_master_call_segments(s->rpc, MC_RPC_MOUNT_SEGMENT, &req, &resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0)
        store_set_epoch(s, resp->epoch);
    else
        MC_ERROR("master refused segment %s of %s (%" PRIu64 " bytes): %s %s", r->id, seg.name,
                 size, mc_error_name(rc), resp->message ? resp->message : "");
    mc__status_response__free_unpacked(resp, NULL);
    if (rc != 0)
        return rc;
    s->run_seg_count++;
    snprintf(id_out, MC_STORE_SEGMENT_ID_MAX, "%s", r->id);
    return 0;
}

/* The protocol a caller asked for: "" / NULL, this engine's own, or "tcp" (upstream's default
 * argument; every engine serves tcp). */
static int protocol_ok(mc_real_client_t *s, const char *protocol)
{
    if (!protocol || !*protocol || !strcmp(protocol, "tcp") ||
        !strcmp(protocol, mc_te_protocol(s->te)))
        return 1;
    MC_ERROR("segment protocol \"%s\": this client's Transfer Engine runs \"%s\"", protocol,
             mc_te_protocol(s->te));
    return 0;
}

static int real_allocate_and_mount_segment(void *impl, uint64_t size, const char *protocol,
                                           char id_out[MC_STORE_SEGMENT_ID_MAX],
                                           uint64_t *allocated)
{
    mc_real_client_t *s = impl;
    if (!protocol_ok(s, protocol))
        return MC_ERR_INVALID_PARAMS;
    uint64_t aligned = (size + MC_RUN_SEGMENT_ALIGN - 1) & ~(MC_RUN_SEGMENT_ALIGN - 1);
    void *base = NULL;
    pthread_mutex_lock(&s->segs_lock);
    int rc = mc_te_alloc_segment_memory(s->te, (size_t)aligned, &base);
    if (rc == 0) {
        rc = run_segment_mount(s, base, aligned, MC_RUN_SEGMENT_ALLOCATED, id_out);
        if (rc != 0)
            mc_te_free_segment_memory(s->te, base);
    }
    pthread_mutex_unlock(&s->segs_lock);
    if (rc == 0 && allocated)
        *allocated = aligned;
    if (rc == 0)
        MC_INFO("allocated and mounted segment %s: %" PRIu64 " bytes at %p", id_out, aligned, base);
    return rc;
}

static int real_mount_file_segment(void *impl, const char *path, uint64_t offset, uint64_t size,
                                   const char *protocol, char id_out[MC_STORE_SEGMENT_ID_MAX])
{
    mc_real_client_t *s = impl;
    if (!protocol_ok(s, protocol))
        return MC_ERR_INVALID_PARAMS;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        MC_ERROR("mount_segment: cannot open %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return MC_ERR_INVALID_PARAMS;
    }
    if (offset > (uint64_t)st.st_size || size > (uint64_t)st.st_size - offset) {
        MC_ERROR("mount_segment: [%" PRIu64 ", +%" PRIu64 ") is beyond the end of %s (%lld bytes)",
                 offset, size, path, (long long)st.st_size);
        close(fd);
        return MC_ERR_INVALID_PARAMS;
    }
    void *base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
    int err = errno;
    close(fd); /* the mapping keeps the file */
    if (base == MAP_FAILED) {
        MC_ERROR("mount_segment: cannot map %s: %s", path, strerror(err));
        return MC_ERR_INVALID_PARAMS;
    }
    pthread_mutex_lock(&s->segs_lock);
    int rc = mc_te_register_memory(s->te, base, (size_t)size);
    if (rc == 0) {
        rc = run_segment_mount(s, base, size, MC_RUN_SEGMENT_FILE, id_out);
        if (rc != 0)
            mc_te_unregister_memory(s->te, base);
    }
    pthread_mutex_unlock(&s->segs_lock);
    if (rc != 0) {
        munmap(base, (size_t)size);
        return rc;
    }
    MC_INFO("mounted segment %s: %s [%" PRIu64 ", +%" PRIu64 ") at %p", id_out, path, offset, size,
            base);
    return 0;
}

/* Unmounts the run-time segment `id` of mount_file_segment (allocated 0) or
 * allocate_and_mount_segment (allocated 1), now or after a grace period (see store.h). */
static int real_unmount_segment(void *impl, const char *id, uint64_t grace_ms, int allocated)
{
    mc_real_client_t *s = impl;
    mc_run_segment_kind_t kind = allocated ? MC_RUN_SEGMENT_ALLOCATED : MC_RUN_SEGMENT_FILE;
    int rc = 0;
    pthread_mutex_lock(&s->segs_lock);
    size_t i = 0;
    while (i < s->run_seg_count &&
           (strcmp(s->run_segs[i].id, id) != 0 || s->run_segs[i].kind != kind))
        i++;
    if (i == s->run_seg_count || s->run_segs[i].drain_until) {
        MC_ERROR("%s: no segment \"%.64s\" mounted by this client with %s", "unmount", id,
                 kind == MC_RUN_SEGMENT_FILE ? "mount_segment" : "allocate_and_mount_segment");
        pthread_mutex_unlock(&s->segs_lock);
        return MC_ERR_INVALID_PARAMS;
    }
    if (grace_ms == 0) {
        rc = run_segment_unmount_now(s, i);
        if (rc == 0)
            run_segment_free(s, i);
    } else {
        Mc__Segment seg = MC__SEGMENT__INIT;
        Mc__Segment *segs[1] = {&seg};
        Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
        fill_pb_segment(s, &seg, s->run_segs[i].id, s->run_segs[i].base, s->run_segs[i].size);
        req.client_id = s->client_id;
        req.n_segments = 1;
        req.segments = segs;
        req.grace_period_ms = grace_ms;
        Mc__StatusResponse *resp;
        rc = mc_master_call_segments(s->rpc, MC_RPC_GRACEFUL_UNMOUNT_SEGMENT, &req, &resp);
        if (rc == 0) {
            rc = resp->code;
            mc__status_response__free_unpacked(resp, NULL);
        }
        if (rc == 0) {
            uint64_t now = mc_now_ms();
            s->run_segs[i].drain_until = grace_ms > UINT64_MAX - now ? UINT64_MAX : now + grace_ms;
            MC_INFO("segment %s drains for %" PRIu64 " ms, then is unmounted and freed", id,
                    grace_ms);
        }
    }
    if (rc != 0)
        MC_ERROR("unmount of segment %s: %s", id, mc_error_name(rc));
    pthread_mutex_unlock(&s->segs_lock);
    return rc;
}

static int real_unmount_local_disk(void *impl, uint64_t grace_period_ms)
{
    mc_real_client_t *s = impl;
    pthread_mutex_lock(&s->segs_lock);
    int had = mc_offload_stop_worker(s->offload);
    pthread_mutex_unlock(&s->segs_lock);
    if (!had) {
        MC_WARN("unmount_local_disk: this client does not offload; nothing to drain");
        return 0;
    }
    MC_INFO("unmount_local_disk: offloading stopped, local-disk replicas dropped at the master; "
            "reads of its files are served for %" PRIu64 " ms more",
            grace_period_ms);
    uint64_t until = mc_now_ms() + grace_period_ms;
    while (mc_now_ms() < until && !atomic_load(&s->closing))
        usleep(10 * 1000);
    return 0;
}

/* close: every run-time segment is unmounted (best effort) and unregistered; file mappings are
 * unmapped after the engine lets go of them (run_segments_unmap). */
static void run_segments_unmount_all(mc_real_client_t *s)
{
    pthread_mutex_lock(&s->segs_lock);
    for (size_t i = 0; s->rpc && i < s->run_seg_count; i++) {
        int rc = run_segment_unmount_now(s, i);
        if (rc != 0)
            MC_WARN("unmounting segment %s at close: %s", s->run_segs[i].id, mc_error_name(rc));
    }
    pthread_mutex_unlock(&s->segs_lock);
}

/* close, after the master was told: the memory goes (engine memory with the engine when it is
 * destroyed, else here; file mappings here). */
static void run_segments_release(mc_real_client_t *s, int engine_destroyed)
{
    pthread_mutex_lock(&s->segs_lock);
    for (size_t i = 0; i < s->run_seg_count; i++) {
        mc_run_segment_t *r = &s->run_segs[i];
        if (r->kind == MC_RUN_SEGMENT_FILE) {
            if (!engine_destroyed)
                mc_te_unregister_memory(s->te, r->base);
            munmap(r->base, (size_t)r->size);
        } else if (!engine_destroyed) {
            mc_te_free_segment_memory(s->te, r->base);
        }
    }
    s->run_seg_count = 0;
    holes_release(s, 1);
    pthread_mutex_unlock(&s->segs_lock);
}

/* ---- re-mount verification of restored extents (src/master/journal.h, opcodes 230/231) ------
 * After a re-mount, a master restored from a snapshot that was not clean holds back the replicas
 * it restored on our segments until we confirm that our memory still holds their bytes: for each
 * extent it names (inside one of our segments), the CRC32C of our own memory must equal the
 * checksum its writer recorded. Runs on the ping thread, which alone unmaps run-time segments. */
#define RESTORE_VERIFY_PAGES_MAX 100000 /* bound on fetches per segment and re-mount */

typedef struct verify_range {
    char id[MC_STORE_SEGMENT_ID_MAX];
    uintptr_t base;
    uint64_t size;
} verify_range_t;

static int verify_in_range(const verify_range_t *r, uint64_t address, uint64_t size)
{
    return address >= r->base && size <= r->size && address - r->base <= r->size - size;
}

static void restore_verify_segment(mc_real_client_t *s, const verify_range_t *r)
{
    uint64_t from = 0;
    size_t pages = 0, good = 0, bad = 0;
    do {
        Mc__RestoreVerifyRequest req = MC__RESTORE_VERIFY_REQUEST__INIT;
        req.client_id = s->client_id;
        req.segment_id = (char *)r->id;
        req.from = from;
        Mc__RestoreVerifyResponse *resp = NULL;
        if (mc_rpc_call_pb(s->rpc, MC_RPC_RESTORE_VERIFY_FETCH, &req.base,
                           &mc__restore_verify_response__descriptor,
                           (ProtobufCMessage **)&resp) != 0)
            return; /* an older master, or unreachable: nothing is made visible unconfirmed */
        if (resp->code != 0 || resp->n_extents == 0) {
            from = resp->code == 0 ? resp->next : 0;
            mc__restore_verify_response__free_unpacked(resp, NULL);
            continue;
        }
        size_t n = resp->n_extents;
        uint64_t *ids = calloc(n, sizeof(*ids));
        protobuf_c_boolean *ok = calloc(n, sizeof(*ok));
        for (size_t i = 0; ids && ok && i < n; i++) {
            const Mc__RestoreExtent *x = resp->extents[i];
            ids[i] = x->id;
            ok[i] = verify_in_range(r, x->address, x->size) &&
                    mc_crc32c(0, (const void *)(uintptr_t)x->address, x->size) == x->checksum;
            good += ok[i] != 0;
            bad += ok[i] == 0;
        }
        from = resp->next;
        mc__restore_verify_response__free_unpacked(resp, NULL);
        if (ids && ok) {
            Mc__RestoreVerifyRequest conf = MC__RESTORE_VERIFY_REQUEST__INIT;
            conf.client_id = s->client_id;
            conf.segment_id = (char *)r->id;
            conf.n_ids = n;
            conf.ids = ids;
            conf.n_ok = n;
            conf.ok = ok;
            Mc__RestoreVerifyResponse *cresp = NULL;
            if (mc_rpc_call_pb(s->rpc, MC_RPC_RESTORE_VERIFY_CONFIRM, &conf.base,
                               &mc__restore_verify_response__descriptor,
                               (ProtobufCMessage **)&cresp) == 0)
                mc__restore_verify_response__free_unpacked(cresp, NULL);
        }
        free(ids);
        free(ok);
    } while (from != 0 && ++pages < RESTORE_VERIFY_PAGES_MAX);
    if (good || bad)
        MC_INFO("segment %s: %zu restored extents verified, %zu did not match (dropped)", r->id,
                good, bad);
}

static void restore_verify(mc_real_client_t *s)
{
    pthread_mutex_lock(&s->segs_lock);
    size_t cap = 1 + s->run_seg_count, n = 0;
    verify_range_t *v = calloc(cap, sizeof(*v));
    if (v && s->segment && s->segment_id[0]) {
        snprintf(v[n].id, sizeof(v[n].id), "%s", s->segment_id);
        v[n].base = (uintptr_t)s->segment;
        v[n++].size = s->global_segment_size;
    }
    for (size_t i = 0; v && i < s->run_seg_count; i++) {
        if (s->run_segs[i].drain_until)
            continue;
        snprintf(v[n].id, sizeof(v[n].id), "%s", s->run_segs[i].id);
        v[n].base = (uintptr_t)s->run_segs[i].base;
        v[n++].size = s->run_segs[i].size;
    }
    pthread_mutex_unlock(&s->segs_lock);
    for (size_t i = 0; i < n; i++)
        restore_verify_segment(s, &v[i]);
    free(v);
}
/* ---- end of re-mount verification ---------------------------------------------------------- */

/*
 * Following an elected master: re-reads the view every ping period on its own thread (the ping
 * thread may be blocked on a stalled leader), so a new leader is picked up within a second and
 * the calls still waiting on the old one are cut short and retried there (rpc.h).
 */
static void *view_main(void *arg)
{
    mc_real_client_t *s = arg;
    pthread_mutex_lock(&s->ping_lock);
    while (!s->ping_stop) {
        struct timespec ts;
        mc_deadline_after_ms(&ts, CLOCK_REALTIME, MC_PING_INTERVAL_MS);
        pthread_cond_timedwait(&s->ping_cond, &s->ping_lock, &ts);
        if (s->ping_stop)
            break;
        pthread_mutex_unlock(&s->ping_lock);
        mc_rpc_client_follow(s->rpc);
        pthread_mutex_lock(&s->ping_lock);
    }
    pthread_mutex_unlock(&s->ping_lock);
    return NULL;
}

/*
 * The write fence, owner side (ping thread). A ping reply names tokens of revoked puts on our
 * segments: our engine refuses them from now on and raises a fence (mc_te_refuse_tokens);
 * once the fence completed — every write admitted before it is over, a same-host writer
 * stopped mid-copy included — the next ping confirms the batch and the master frees the
 * extents. Nothing here blocks: a fence that waits for a stopped writer leaves the extents
 * quarantined, not the ping thread stuck (its silence would expire us).
 */
static int fence_progress(mc_real_client_t *s);

static void fence_take(mc_real_client_t *s, const Mc__PingResponse *resp)
{
    if (resp->view_version != s->fence_view) { /* another master instance: its own sequences */
        s->fence_view = resp->view_version;
        s->fence_raised = s->fence_acked = s->fence_gen = 0;
    }
    if (resp->n_fence_tokens == 0 || resp->fence_upto <= s->fence_raised)
        return;
    uint64_t gen = 0;
    int rc = mc_te_refuse_tokens(s->te, resp->fence_tokens, resp->n_fence_tokens, &gen);
    if (rc != 0) { /* too many fences still waiting, or no memory: asked again next ping */
        MC_WARN("cannot refuse %zu revoked allocations yet (%s); retrying", resp->n_fence_tokens,
                mc_error_name(rc));
        return;
    }
    s->fence_raised = resp->fence_upto;
    s->fence_gen = gen;
    fence_progress(s);
}

/* Moves fence_acked up when the last raised fence completed; 1 when a confirmation is due. */
static int fence_progress(mc_real_client_t *s)
{
    if (s->fence_raised > s->fence_acked && mc_te_fence_completed(s->te) >= s->fence_gen) {
        s->fence_acked = s->fence_raised;
        return 1;
    }
    return 0;
}

static void *ping_main(void *arg)
{
    mc_real_client_t *s = arg;
    uint64_t last_ping = 0;
    pthread_mutex_lock(&s->ping_lock);
    while (!s->ping_stop) {
        /* While a write fence is pending, look at it every 10 ms and confirm it at once: its
         * extents stay out of use until then. */
        int fencing = s->fence_raised > s->fence_acked;
        struct timespec ts;
        mc_deadline_after_ms(&ts, CLOCK_REALTIME, fencing ? 10 : MC_PING_INTERVAL_MS);
        pthread_cond_timedwait(&s->ping_cond, &s->ping_lock, &ts);
        if (s->ping_stop)
            break;
        if (fencing && !fence_progress(s) && mc_now_ms() - last_ping < MC_PING_INTERVAL_MS)
            continue;
        pthread_mutex_unlock(&s->ping_lock);
        last_ping = mc_now_ms();

        Mc__PingResponse *resp = NULL;
        fence_progress(s);
        int rc = mc_master_call_ping(s->rpc, s->client_id, mc_offload_fallback_reads(s->offload),
                                     atomic_load(&s->checksum_mismatches), s->fence_acked,
                                     s->fence_view, &resp);
        if (rc != 0) {
            if (atomic_exchange(&s->master_reachable, 0))
                MC_WARN("master %s unreachable (%s); will re-mount when it is back", s->master_addr,
                        mc_error_name(rc));
            mc_rpc_client_reset(s->rpc);
        } else {
            /* A re-mount the master deferred (its range still fenced by read leases) is tried
             * again on every ping until it succeeds. */
            if (resp->client_status == 2 /* NEED_REMOUNT */ || s->remount_pending) {
                /* Until the new mount's epoch is known, no transfer naming any epoch is served,
                 * and those admitted under the old one drain first: a late write of the old
                 * mount can then never land on memory the new mount hands out. */
                pthread_mutex_lock(&s->segs_lock);
                int mrc = 0;
                /* The fence must be complete before the master may hand the memory out again:
                 * a same-host writer stopped mid-copy holds the re-mount back. */
                if (s->segment || s->run_seg_count)
                    mrc = store_set_epoch(s, UINT64_MAX);
                if (mrc != 0)
                    MC_WARN("re-mount of segment %s deferred: a write admitted before it is "
                            "still copying (%s)",
                            mc_te_local_segment_name(s->te), mc_error_name(mrc));
                else
                    mrc = segment_call(s, MC_RPC_REMOUNT_SEGMENT);
                size_t nrun = s->run_seg_count;
                pthread_mutex_unlock(&s->segs_lock);
                s->remount_pending = mrc != 0;
                /* A restarted master also lost its embedded metadata service's entries. */
                mc_te_republish(s->te);
                if (mrc == 0 && (s->segment || nrun))
                    MC_INFO("re-mounted segment %s (%s, and %zu mounted at run time) at master %s",
                            mc_te_local_segment_name(s->te), s->segment_id, nrun, s->master_addr);
                if (mrc == 0 && (s->segment || nrun))
                    restore_verify(s); /* restored extents the master holds back */
            }
            run_segments_tick(s);
            if (!atomic_exchange(&s->master_reachable, 1))
                MC_INFO("master %s reachable", s->master_addr);
            if (resp->offload_pending > 0)
                mc_offload_wake(s->offload);
            fence_take(s, resp);
            mc__ping_response__free_unpacked(resp, NULL);
        }
        pthread_mutex_lock(&s->ping_lock);
    }
    pthread_mutex_unlock(&s->ping_lock);
    return NULL;
}

/* How long setup waits for an unreachable master: the config, else MC_MASTER_WAIT_TIMEOUT
 * (seconds), else 30 s. Negative: not at all. */
static int64_t master_wait_ms(const mc_store_config_t *c)
{
    if (c->master_wait_timeout_ms)
        return c->master_wait_timeout_ms < 0 ? 0 : c->master_wait_timeout_ms;
    const char *e = getenv(MC_MASTER_WAIT_ENV);
    char *end = NULL;
    double sec = e && *e ? strtod(e, &end) : -1;
    if (e && *e && end && !*end && sec >= 0 && sec <= 86400)
        return (int64_t)(sec * 1000);
    if (e && *e)
        MC_WARN("%s=\"%s\" is not a number of seconds in [0, 86400]; using %d s",
                MC_MASTER_WAIT_ENV, e, MC_MASTER_WAIT_DEFAULT_MS / 1000);
    return MC_MASTER_WAIT_DEFAULT_MS;
}

/*
 * ServiceReady, retried while the master is unreachable (RPC_FAIL / RPC_TIMEOUT: not started
 * yet, restarting) for up to wait_ms with a backoff from 100 ms to 2 s, as deployments start
 * processes in any order. One line when the wait starts, one when it ends. Any other answer
 * (refused secret, ...) returns at once.
 */
static int wait_for_master(mc_real_client_t *s, int64_t wait_ms, Mc__ServiceReadyResponse **ready)
{
    uint64_t start = mc_now_ms(), deadline = start + (uint64_t)wait_ms;
    useconds_t backoff_us = 100 * 1000;
    int waited = 0;
    for (;;) {
        int rc = mc_master_call_service_ready(s->rpc, ready);
        if (rc == 0 && waited)
            MC_INFO("mooncake_master at %s reachable after %.1f s", s->master_addr,
                    (double)(mc_now_ms() - start) / 1000.0);
        if (rc != MC_ERR_RPC_FAIL && rc != MC_ERR_RPC_TIMEOUT)
            return rc;
        uint64_t now = mc_now_ms();
        if (now >= deadline)
            return rc;
        if (!waited) {
            MC_WARN("mooncake_master at %s not reachable (%s); retrying for up to %.0f s (%s)",
                    s->master_addr, mc_error_name(rc), (double)wait_ms / 1000.0,
                    MC_MASTER_WAIT_ENV);
            waited = 1;
        }
        uint64_t left_us = (deadline - now) * 1000;
        usleep(left_us < backoff_us ? (useconds_t)left_us : backoff_us);
        if (backoff_us < 2000 * 1000)
            backoff_us *= 2;
    }
}

static int host_is_loopback(const char *h)
{
    return !strncmp(h, "127.", 4) || !strcmp(h, "::1") || !strcmp(h, "localhost");
}

/*
 * A segment published at an address other hosts cannot reach makes every put to it fail with
 * -800 on their side, while this client sees nothing wrong: say so at start-up. Two cases: the
 * published host is loopback but the master is not (peers elsewhere cannot reach loopback), or
 * it differs from the address this host reaches the master from (a multi-homed host publishing
 * another interface's address; harmless when that interface is the data network, hence only a
 * warning).
 */
static void warn_unreachable_publication(mc_real_client_t *s)
{
    char pub[MC_HOST_MAX], master[MC_HOST_MAX], local[MC_HOST_MAX] = "";
    int port;
    if (mc_net_split_endpoint(mc_te_local_segment_name(s->te), 0, pub, &port) != 0 ||
        mc_net_split_endpoint(s->master_addr, 0, master, &port) != 0)
        return;
    if (host_is_loopback(pub) && !host_is_loopback(master)) {
        MC_WARN("this client publishes its segment at %s, a loopback address, while the master "
                "is at %s: clients on other hosts cannot reach it and their puts to it will fail "
                "(-800). Set --host (Python: local_hostname) to an address they reach",
                mc_te_local_segment_name(s->te), s->master_addr);
        return;
    }
    if (mc_rpc_client_local_host(s->rpc, local, sizeof(local)) == 0 && !host_is_loopback(local) &&
        !host_is_loopback(pub) && strcmp(local, pub) != 0)
        MC_WARN("this client publishes its segment at %s but reaches the master %s from %s: if "
                "other hosts cannot reach %s, their puts to this segment fail (-800); set --host "
                "(Python: local_hostname) to the address they reach, e.g. %s",
                mc_te_local_segment_name(s->te), s->master_addr, local, pub, local);
}

/* The RPC client's resolver when following an elected master: the leader published in etcd. */
static int resolve_leader(void *arg, char *out, size_t cap)
{
    mc_real_client_t *s = arg;
    int64_t version = 0;
    int rc = mc_master_view_read(s->view_etcd, s->view_cluster, out, cap, &version);
    if (rc != 0) {
        uint64_t now = mc_now_ms(), last = atomic_load(&s->last_master_error_ms);
        if (now - last >= 1000 &&
            atomic_compare_exchange_strong(&s->last_master_error_ms, &last, now))
            MC_WARN("no elected master found through %s (cluster %s): %s", s->master_addr,
                    s->view_cluster,
                    rc == MC_ERR_ETCD_KEY_NOT_EXIST ? "none leads now" : mc_error_name(rc));
    }
    return rc;
}

static int setup_checked(mc_real_client_t *s, const mc_store_config_t *c)
{
    int rc = mc_auth_resolve(c->cluster_secret, c->cluster_secret_file, &s->auth);
    if (rc != 0)
        return rc;
    const char *addr =
        c->master_server_addr && *c->master_server_addr ? c->master_server_addr : MC_DEFAULT_MASTER;
    char endpoints[4096];
    int ha = mc_master_addr_parse(addr, endpoints, sizeof(endpoints));
    if (ha < 0)
        return MC_ERR_INVALID_PARAMS;
    if (ha) {
        snprintf(s->view_cluster, sizeof(s->view_cluster), "%s", mc_client_cluster_id());
        rc = mc_etcd_create(endpoints, 2000, &s->view_etcd);
        if (rc != 0)
            return rc;
        rc = mc_rpc_client_create_resolved(resolve_leader, s, MC_RPC_DEFAULT_TIMEOUT_MS, &s->rpc);
    } else {
        rc = mc_rpc_client_create(addr, MC_RPC_DEFAULT_TIMEOUT_MS, &s->rpc);
    }
    if (rc != 0)
        return rc;
    mc_rpc_client_set_auth(s->rpc, s->auth, "master");
    rc = mc_lease_releaser_create(s->rpc, s->client_id, &s->releases);
    if (rc != 0)
        return rc;
    Mc__ServiceReadyResponse *ready;
    rc = wait_for_master(s, master_wait_ms(c), &ready);
    if (rc != 0) {
        MC_ERROR("cannot reach mooncake_master at %s: %s", s->master_addr, mc_error_name(rc));
        return rc == MC_ERR_ILLEGAL_CLIENT ? rc : MC_ERR_RPC_FAIL;
    }
    int same = ready->version && !strcmp(ready->version, MC_VERSION_STRING);
    if (!same)
        MC_ERROR("master %s runs version %s, this client %s", s->master_addr,
                 ready->version ? ready->version : "?", MC_VERSION_STRING);
    mc__service_ready_response__free_unpacked(ready, NULL);
    if (!same)
        return MC_ERR_INVALID_VERSION;

    mc_transfer_engine_config_t tc = {.local_server_name = c->local_hostname,
                                      .metadata_server = c->metadata_server,
                                      .protocol = c->protocol,
                                      .device_names = c->device_name,
                                      .cluster_secret = c->cluster_secret,
                                      .cluster_secret_file = c->cluster_secret_file};
    if (c->transfer_engine) { /* shared with the caller (upstream's engine=) */
        s->te = c->transfer_engine;
        s->te_borrowed = 1;
    } else {
        rc = mc_te_create(&tc, &s->te);
        if (rc != 0)
            return rc;
    }
    warn_unreachable_publication(s);
    long page = sysconf(_SC_PAGESIZE);
    if (s->global_segment_size > 0) {
        s->global_segment_size =
            (s->global_segment_size + (uint64_t)page - 1) & ~((uint64_t)page - 1);
        rc = mc_te_alloc_segment_memory(s->te, s->global_segment_size, &s->segment);
        if (rc != 0)
            return rc;
        /* Before the mount: sync mode hands the master committed memory; background mode
         * races the first puts, which it never disturbs (prefault.h). */
        rc = mc_prefault_start(s->segment, s->global_segment_size, &s->prefault_opts, &s->prefault);
        if (rc != 0)
            return rc;
    }
    /* Offload roles: checked and opened before anyone learns of this client. */
    char host[MC_HOST_MAX];
    int port;
    if (mc_net_split_endpoint(c->local_hostname, 0, host, &port) != 0) {
        MC_ERROR("local_hostname \"%s\" is not host or host:port", c->local_hostname);
        return MC_ERR_INVALID_PARAMS; /* never a silent bind to every interface */
    }
    mc_offload_setup_t os = {.client_id = s->client_id,
                             .te = s->te,
                             .host = host,
                             .segment_size = s->global_segment_size,
                             .enable_offload = c->enable_offload,
                             .offload_path = c->offload_path};
    rc = mc_offload_prepare(&os, &s->offload);
    if (rc != 0)
        return rc;
    if (s->global_segment_size > 0) {
        make_uuid(s->segment_id);
        /* A range fenced by an earlier mount's read leases (e.g. this host:port restarted) frees
         * within a lease TTL. */
        uint64_t deadline = mc_now_ms() + MC_MOUNT_FENCE_WAIT_MS;
        while ((rc = segment_call(s, MC_RPC_MOUNT_SEGMENT)) ==
                   MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS &&
               mc_now_ms() < deadline)
            usleep(200 * 1000);
        if (rc != 0)
            return rc;
    } else {
        /* Registers this client, so the master expires it (and revokes its puts) on silence. */
        rc = segment_call(s, MC_RPC_REMOUNT_SEGMENT);
        if (rc != 0)
            return rc;
    }
    if (s->local_buffer_size > 0) {
        void *p = mmap(NULL, s->local_buffer_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            MC_ERROR("cannot map a local buffer of %llu bytes: %s",
                     (unsigned long long)s->local_buffer_size, strerror(errno));
            return MC_ERR_INTERNAL_ERROR;
        }
        s->local_buffer = p;
    }
    atomic_store(&s->master_reachable, 1);
    if (pthread_create(&s->ping_thread, NULL, ping_main, s) != 0)
        return MC_ERR_INTERNAL_ERROR;
    s->ping_started = 1;
    if (s->view_etcd) {
        if (pthread_create(&s->view_thread, NULL, view_main, s) != 0)
            return MC_ERR_INTERNAL_ERROR;
        s->view_started = 1;
    }
    if (s->segment && mc_task_executor_start(s->rpc, s->te, s->client_id, s->segment,
                                             s->global_segment_size, &s->tasks) != 0)
        return MC_ERR_INTERNAL_ERROR;
    return mc_offload_start(s->offload, s->rpc, (uintptr_t)s->segment, s->te);
}

/* The real client's locks (real_free destroys them; the call bracket is store.c's). */
static void init_locks(mc_real_client_t *s)
{
    pthread_mutex_init(&s->segs_lock, NULL);
    pthread_mutex_init(&s->ping_lock, NULL);
    pthread_cond_init(&s->ping_cond, NULL);
    pthread_rwlock_init(&s->buffers_lock, NULL);
}

/* /health of the client HTTP server (upstream's codes): set up and the master answering pings. */
static int store_http_health(void *arg)
{
    mc_real_client_t *s = arg;
    if (atomic_load(&s->closing))
        return MC_CLIENT_NOT_INITIALIZED;
    return atomic_load(&s->master_reachable) ? MC_CLIENT_HEALTHY : MC_CLIENT_MASTER_UNREACHABLE;
}

/* /health's "offload_storage": whether the offload storage answers (NULL without offload). */
static const char *store_http_offload_storage(void *arg)
{
    mc_real_client_t *s = arg;
    mc_fs_health_stats_t h;
    if (mc_offload_storage_health(s->offload, &h) != 0)
        return NULL;
    return h.wedged ? "unavailable" : "ok";
}

/* /metrics: the offload storage's deadlines (the DAOS adapter's counts; 0 on posix). */
static void store_http_more_metrics(void *arg, FILE *f)
{
    mc_real_client_t *s = arg;
    mc_fs_health_stats_t h;
    if (mc_offload_storage_health(s->offload, &h) != 0)
        return;
    fprintf(f,
            "# HELP mooncake_client_offload_storage_timeouts_total Offload storage operations "
            "that passed their deadline with the storage not answering.\n"
            "# TYPE mooncake_client_offload_storage_timeouts_total counter\n"
            "mooncake_client_offload_storage_timeouts_total %" PRIu64 "\n"
            "# HELP mooncake_client_offload_storage_refused_total Offload storage operations "
            "refused at once while the storage was wedged.\n"
            "# TYPE mooncake_client_offload_storage_refused_total counter\n"
            "mooncake_client_offload_storage_refused_total %" PRIu64 "\n"
            "# HELP mooncake_client_offload_storage_stuck_calls Storage calls given up at their "
            "deadline that have not returned yet.\n"
            "# TYPE mooncake_client_offload_storage_stuck_calls gauge\n"
            "mooncake_client_offload_storage_stuck_calls %" PRIu64 "\n"
            "# HELP mooncake_client_offload_storage_wedged 1 while the offload storage is wedged "
            "(a deadline passed and nothing answered since).\n"
            "# TYPE mooncake_client_offload_storage_wedged gauge\n"
            "mooncake_client_offload_storage_wedged %d\n",
            h.timeouts, h.fast_failures, h.stuck_calls, h.wedged);
}

/* Starts the client HTTP server when asked; a bind failure only warns (upstream). */
static void start_http_server(mc_real_client_t *s, const mc_store_config_t *c)
{
    if (!c->enable_http_server)
        return;
    char host[MC_HOST_MAX] = "";
    int port = 0;
    if (c->http_host && *c->http_host)
        snprintf(host, sizeof(host), "%s", c->http_host);
    else if (mc_net_split_endpoint(c->local_hostname, 0, host, &port) != 0)
        snprintf(host, sizeof(host), "%s", c->local_hostname);
    mc_client_http_config_t hc = {host,
                                  c->http_port,
                                  s->metrics,
                                  store_http_health,
                                  s,
                                  store_http_offload_storage,
                                  store_http_more_metrics};
    int rc = mc_client_http_start(&hc, &s->http);
    if (rc != 0) {
        MC_WARN("client HTTP server not started on %s:%d (%s); the store works without it", host,
                c->http_port, mc_error_name(rc));
        return;
    }
    mc_auth_warn_open_listener(s->auth, "the client HTTP server", host, c->http_port);
    MC_INFO("client HTTP server on %s:%d (/health, /metrics, /metrics/summary)%s", host,
            mc_client_http_port(s->http), s->metrics ? "" : "; metrics off");
}

/* ---- lifecycle slots ---------------------------------------------------------------------- */

static void real_begin_close(void *impl)
{
    mc_real_client_t *s = impl;
    atomic_store(&s->closing, 1);
}

/* Also what a failed setup undoes with: every step copes with the ones that never ran. */
static void real_close(void *impl)
{
    mc_real_client_t *s = impl;
    mc_prefault_stop(s->prefault); /* joined before the segment memory is unmapped */
    s->prefault = NULL;
    mc_client_http_stop(s->http); /* before anything it reads goes */
    s->http = NULL;
    mc_lease_releaser_destroy(s->releases); /* sends the releases still queued */
    s->releases = NULL;
    /* The offload worker drains while the segment is still mounted and pings keep this client
     * alive; then its server stops, before the Transfer Engine it stages reads in. */
    mc_offload_stop(s->offload);
    mc_task_executor_stop(s->tasks); /* its task in hand reported, before the unmount */
    s->tasks = NULL;
    if (s->ping_started) {
        pthread_mutex_lock(&s->ping_lock);
        s->ping_stop = 1;
        pthread_cond_broadcast(&s->ping_cond);
        pthread_mutex_unlock(&s->ping_lock);
        pthread_join(s->ping_thread, NULL);
        s->ping_started = 0;
        if (s->view_started)
            pthread_join(s->view_thread, NULL);
        s->view_started = 0;
        if (mc_offload_fallback_reads(s->offload) > 0 ||
            atomic_load(&s->checksum_mismatches) > 0) { /* the master's counts, up to date */
            Mc__PingResponse *resp = NULL;
            if (mc_master_call_ping(s->rpc, s->client_id, mc_offload_fallback_reads(s->offload),
                                    atomic_load(&s->checksum_mismatches), s->fence_acked,
                                    s->fence_view, &resp) == 0)
                mc__ping_response__free_unpacked(resp, NULL);
        }
    }
    run_segments_unmount_all(s);
    if (s->segment && s->rpc && s->segment_id[0]) {
        int rc = segment_call(s, MC_RPC_UNMOUNT_SEGMENT);
        if (rc != 0 && rc != MC_ERR_SEGMENT_NOT_FOUND)
            MC_WARN("unmounting segment %s at close: %s", s->segment_id, mc_error_name(rc));
    }
    if (s->te && s->te_borrowed) { /* the caller's engine: undo only what this store did */
        pthread_rwlock_wrlock(&s->buffers_lock);
        for (size_t i = 0; i < s->buffer_count; i++)
            mc_te_unregister_memory(s->te, (void *)(uintptr_t)s->buffers[i].addr);
        s->buffer_count = 0;
        pthread_rwlock_unlock(&s->buffers_lock);
        if (s->segment)
            mc_te_free_segment_memory(s->te, s->segment);
        run_segments_release(s, 0);
        mc_te_set_epoch(s->te, 0); /* the unmounted segment's epoch no longer applies */
    } else if (s->te) {
        mc_te_destroy(s->te); /* frees the segment memory and unregisters user buffers */
        run_segments_release(s, 1);
    }
    s->te = NULL;
    mc_offload_free(s->offload);
    s->offload = NULL;
    s->segment = NULL;
    if (s->local_buffer)
        munmap(s->local_buffer, s->local_buffer_size);
    s->local_buffer = NULL;
    mc_rpc_client_destroy(s->rpc);
    s->rpc = NULL;
    if (s->view_etcd)
        mc_etcd_destroy(s->view_etcd);
    s->view_etcd = NULL;
    mc_auth_destroy(s->auth);
    s->auth = NULL;
}

static void real_free(void *impl)
{
    mc_real_client_t *s = impl;
    pthread_mutex_destroy(&s->segs_lock);
    pthread_mutex_destroy(&s->ping_lock);
    free(s->run_segs);
    free(s->holes);
    pthread_cond_destroy(&s->ping_cond);
    pthread_rwlock_destroy(&s->buffers_lock);
    free(s->buffers);
    free(s->master_addr);
    mc_client_metrics_free(s->metrics);
    free(s);
}

static int real_health_check(void *impl)
{
    mc_real_client_t *s = impl;
    Mc__ServiceReadyResponse *r;
    if (mc_master_call_service_ready(s->rpc, &r) != 0)
        return 2;
    mc__service_ready_response__free_unpacked(r, NULL);
    return 0;
}

static const char *real_get_hostname(const void *impl)
{
    const mc_real_client_t *s = impl;
    return s->te ? mc_te_local_segment_name(s->te) : "";
}

/* ---- offload slots ------------------------------------------------------------------------ */

static int real_get_offload_stats(void *impl, mc_store_offload_stats_t *out)
{
    mc_real_client_t *s = impl;
    mc_offload_get_stats(s->offload, out);
    return 0;
}

static int real_set_offloading(void *impl, int enabled)
{
    mc_real_client_t *s = impl;
    return mc_offload_set_offloading(s->offload, enabled);
}

/* ---- replica copy/move tasks and replica clear (task_executor.h) --------------------------- */

static int real_create_task(void *impl, int move, const char *key, const char *source,
                            const char *const *targets, size_t n, char *id_out)
{
    mc_real_client_t *s = impl;
    return mc_task_call_create(s->rpc, move, key, source, targets, n, id_out);
}

static int real_query_task(void *impl, const char *task_id, mc_task_info_t *out)
{
    mc_real_client_t *s = impl;
    return mc_task_call_query(s->rpc, task_id, out);
}

static int real_batch_replica_clear(void *impl, const char *const *keys, size_t n,
                                    const char *segment_name, int *cleared)
{
    mc_real_client_t *s = impl;
    return mc_task_call_replica_clear(s->rpc, s->client_id, keys, n, segment_name, cleared);
}

/* ---- the backend -------------------------------------------------------------------------- */

static const mc_store_backend_ops_t real_ops = {
    .name = "real",
    .begin_close = real_begin_close,
    .close = real_close,
    .free = real_free,
    .health_check = real_health_check,
    .get_hostname = real_get_hostname,
    .write = real_write,
    .read = real_read,
    .exist = real_exist,
    .remove = real_remove,
    .remove_all = real_remove_all,
    .remove_by_regex = real_remove_by_regex,
    .get_size = real_get_size,
    .get_replica_desc = real_get_replica_desc,
    .register_buffer = real_register_buffer,
    .unregister_buffer = real_unregister_buffer,
    .get_offload_stats = real_get_offload_stats,
    .set_offloading = real_set_offloading,
    .create_task = real_create_task,
    .query_task = real_query_task,
    .batch_replica_clear = real_batch_replica_clear,
    .allocate_and_mount_segment = real_allocate_and_mount_segment,
    .mount_file_segment = real_mount_file_segment,
    .unmount_segment = real_unmount_segment,
    .unmount_local_disk = real_unmount_local_disk,
};

int mc_store_setup(const mc_store_config_t *c, mc_store_t **out)
{
    if (!c || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (c->enable_http_server && (c->http_port < 1 || c->http_port > 65535)) {
        MC_ERROR("client HTTP port %d is not in 1..65535", c->http_port);
        return MC_ERR_INVALID_PARAMS;
    }
    if (c->global_segment_size > MC_MAX_VALUE_SIZE || c->local_buffer_size > MC_MAX_VALUE_SIZE) {
        MC_ERROR("segment or local buffer larger than 1 TiB");
        return MC_ERR_INVALID_PARAMS;
    }
    if (!c->local_hostname || !*c->local_hostname) {
        MC_ERROR("local_hostname is required (host or host:port)");
        return MC_ERR_INVALID_PARAMS;
    }
    mc_prefault_opts_t prefault_opts;
    if (mc_prefault_opts_from_env(&prefault_opts) != 0)
        return MC_ERR_INVALID_PARAMS;
    char err[1024];
    int erc = mc_offload_check_environment(c->global_segment_size, c->enable_offload,
                                           c->offload_path, err, sizeof(err));
    if (erc != 0) {
        MC_ERROR("offload: %s", err);
        return erc;
    }
    mc_real_client_t *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    make_uuid(s->client_id);
    s->master_addr = strdup(c->master_server_addr && *c->master_server_addr ? c->master_server_addr
                                                                            : MC_DEFAULT_MASTER);
    s->global_segment_size = c->global_segment_size;
    s->prefault_opts = prefault_opts;
    s->local_buffer_size = c->local_buffer_size;
    const char *dw = getenv("MC_STORE_DELETE_WAIT_MS");
    char *end = NULL;
    unsigned long long dwv = dw && *dw ? strtoull(dw, &end, 10) : MC_DELETE_WAIT_DEFAULT_MS;
    s->delete_wait_ms = end && *end ? MC_DELETE_WAIT_DEFAULT_MS : dwv;
    const char *ck = getenv("MC_STORE_CHECKSUM");
    s->checksum = !c->disable_checksum &&
                  !(ck && (!strcmp(ck, "0") || !strcasecmp(ck, "false") || !strcasecmp(ck, "off")));
    init_locks(s);
    int rc = s->master_addr ? setup_checked(s, c) : MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        real_close(s);
        real_free(s);
        return rc;
    }
    s->metrics = mc_client_metrics_create();
    start_http_server(s, c);
    rc = mc_store_create(&real_ops, s, out);
    if (rc != 0)
        return rc;
    MC_INFO("store client %s ready: segment %s (%llu bytes), local buffer %llu bytes, master %s, "
            "checksums %s",
            s->client_id, mc_te_local_segment_name(s->te),
            (unsigned long long)s->global_segment_size, (unsigned long long)s->local_buffer_size,
            s->master_addr, s->checksum ? "on" : "off");
    return 0;
}

void mc_store_allow_zero_copy_io(mc_store_t *store)
{
    mc_real_client_t *s = mc_store_impl_of(store, &real_ops);
    if (s)
        s->zero_copy_io = 1;
}
