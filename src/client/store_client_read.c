/*
 * store_client_read.c — the real client's read slot (get, plain or zero-copy, single or batch,
 * one path) and the replica lookups (get_size, get_replica_desc).
 *
 * A get asks for the complete replicas (GetReplicaList, which grants a read lease), reads from the
 * best one straight into the caller's buffer, falls back to the other replicas if that read fails
 * or does not verify, and refuses the result if the lease ran out before the bytes were in (the
 * extent may have been reused); then it gives the leases back (lease_release.h), so the memory of
 * an object removed meanwhile is free at once. A batch makes one master call and one Transfer
 * Engine batch per round. With offload (offload.h), a key with no readable memory replica left
 * reads a disk replica instead (a DFS file directly, a LOCAL_DISK file through its owner).
 */
#include "store_client_internal.h"

#include "clock.h"
#include "checksum.h"
#include "failpoint.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One key of a get that goes to the master (its check passed). */
typedef struct get_key {
    size_t at;          /* its index in the caller's arrays */
    size_t first;       /* the replica read first */
    size_t alt;         /* the replica read in this failover round */
    uint64_t finish_ms; /* when its last memory read ended (mc_now_ms); 0: none was sent */
    int from_disk;      /* its bytes came from a disk replica */
} get_key_t;

/* A get of m keys, phase by phase (lookup, first read, failover rounds, disk, lease check). The
 * caller's arrays stay the caller's; reqs, owner and st hold one round's reads (at most one per
 * key: owner[q] names the key of read q). */
typedef struct get_batch {
    mc_real_client_t *s;
    const char *const *keys;
    void *const *bufs;
    const size_t *caps;
    int64_t *results;
    get_key_t *k; /* k[j]: the j-th key asked for */
    size_t m;
    char **names;           /* names[j]: k[j]'s key, the flat array a KeysRequest takes */
    Mc__KeysResponse *resp; /* GetReplicaList's answer: resp->results[j] is k[j]'s */
    uint64_t t0;            /* when the lookup was sent: the read leases run from here */
    mc_transfer_req_t *reqs;
    size_t *owner;
    mc_transfer_status_t *st;
} get_batch_t;

/* GetReplicaList for the keys whose check passed (it grants their read leases); on failure every
 * one of them gets the error. */
static int get_lookup(get_batch_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b->results[i] == 0) {
            b->k[b->m] = (get_key_t){.at = i};
            b->names[b->m++] = (char *)b->keys[i];
        }
    }
    if (b->m == 0)
        return 0;
    b->t0 = mc_now_ms();
    int rc = mc_real_keys_call(b->s, MC_RPC_GET_REPLICA_LIST, b->names, NULL, b->m, NULL, 0, NULL,
                               &b->resp);
    if (rc != 0) {
        for (size_t j = 0; j < b->m; j++)
            b->results[b->k[j].at] = rc;
        return rc;
    }
    mc_failpoint("get.after_lookup");
    return 0;
}

/* Runs this round's nreq reads; each read's key learns when it ended. */
static void get_run_round(get_batch_t *b, size_t nreq)
{
    mc_real_transfer(b->s, b->reqs, nreq, b->st);
    uint64_t now = mc_now_ms();
    for (size_t q = 0; q < nreq; q++)
        b->k[b->owner[q]].finish_ms = b->st[q].finish_ms ? b->st[q].finish_ms : now;
}

/* The first round: every key with bytes to read reads its best replica (pick_order). A key the
 * master could not serve, too large for its buffer, with no ready memory replica or whose read
 * failed or did not verify gets its error (the last two are retried on the other replicas). */
static void get_first_round(get_batch_t *b)
{
    mc_real_client_t *s = b->s;
    size_t nreq = 0;
    for (size_t j = 0; j < b->m; j++) {
        const Mc__KeyResult *r = b->resp->results[j];
        size_t i = b->k[j].at;
        if (r->code != 0) {
            b->results[i] = r->code;
            continue;
        }
        if (r->size > b->caps[i]) {
            b->results[i] = MC_ERR_BUFFER_OVERFLOW;
            continue;
        }
        b->results[i] = (int64_t)r->size;
        if (r->size == 0)
            continue;
        if (!b->bufs[i]) {
            b->results[i] = MC_ERR_INVALID_PARAMS;
            continue;
        }
        size_t order[MC_MAX_REPLICAS * 2];
        if (r->n_replicas > MC_MAX_REPLICAS * 2 || pick_order(s, r, order) == 0) {
            b->results[i] = MC_ERR_REPLICA_IS_NOT_READY;
            continue;
        }
        b->k[j].first = order[0];
        mc_segment_id_t seg;
        if (mc_te_open_segment(s->te, r->replicas[order[0]]->segment_name, &seg) != 0) {
            b->results[i] = MC_ERR_TRANSFER_FAIL; /* retried on the other replicas */
            continue;
        }
        replica_request(s, r->replicas[order[0]], b->bufs[i], r->size, seg, &b->reqs[nreq]);
        b->owner[nreq++] = j;
    }
    if (nreq == 0)
        return;
    get_run_round(b, nreq);
    for (size_t q = 0; q < nreq; q++) {
        const get_key_t *k = &b->k[b->owner[q]];
        const Mc__KeyResult *r = b->resp->results[b->owner[q]];
        if (b->st[q].state != MC_TRANSFER_COMPLETED)
            b->results[k->at] = MC_ERR_TRANSFER_FAIL;
        else if (verify_replica(s, b->keys[k->at], r->replicas[k->first], b->bufs[k->at], r->size,
                                &b->st[q]) != 0)
            b->results[k->at] = MC_ERR_CHECKSUM_MISMATCH;
    }
}

/*
 * A failed or unverified read tries the object's other replicas: round t reads, in one Transfer
 * Engine call (one deadline), the t-th other replica of every key still failing. So a batch
 * fails over within one deadline per replica, not one per key and replica.
 */
static void get_failover_rounds(get_batch_t *b)
{
    mc_real_client_t *s = b->s;
    for (size_t t = 0;; t++) {
        size_t nreq = 0, any = 0;
        for (size_t j = 0; j < b->m; j++) {
            get_key_t *k = &b->k[j];
            const Mc__KeyResult *r = b->resp->results[j];
            if (r->code != 0 || !retryable(b->results[k->at]))
                continue;
            size_t order[MC_MAX_REPLICAS * 2];
            size_t n = pick_order(s, r, order), u = 0, pick = SIZE_MAX;
            for (size_t o = 0; o < n && pick == SIZE_MAX; o++)
                if (order[o] != k->first && u++ == t)
                    pick = order[o];
            if (pick == SIZE_MAX)
                continue;
            any = 1;
            mc_segment_id_t seg;
            if (mc_te_open_segment(s->te, r->replicas[pick]->segment_name, &seg) != 0) {
                k->finish_ms = mc_now_ms();
                continue;
            }
            replica_request(s, r->replicas[pick], b->bufs[k->at], r->size, seg, &b->reqs[nreq]);
            k->alt = pick;
            b->owner[nreq++] = j;
        }
        if (!any)
            return;
        if (nreq == 0)
            continue;
        get_run_round(b, nreq);
        for (size_t q = 0; q < nreq; q++) {
            const get_key_t *k = &b->k[b->owner[q]];
            const Mc__KeyResult *r = b->resp->results[b->owner[q]];
            if (b->st[q].state != MC_TRANSFER_COMPLETED)
                continue; /* the key keeps its error and tries its next replica */
            b->results[k->at] = verify_replica(s, b->keys[k->at], r->replicas[k->alt],
                                               b->bufs[k->at], r->size, &b->st[q])
                                    ? MC_ERR_CHECKSUM_MISMATCH
                                    : (int64_t)r->size;
        }
    }
}

/* No memory replica left, or none readable: the disk replicas (offload). */
static void get_from_disk(get_batch_t *b)
{
    for (size_t j = 0; j < b->m; j++) {
        get_key_t *k = &b->k[j];
        const Mc__KeyResult *r = b->resp->results[j];
        int64_t *result = &b->results[k->at];
        if (r->code != 0 || r->size == 0 || !b->bufs[k->at] ||
            (!retryable(*result) && *result != MC_ERR_REPLICA_IS_NOT_READY))
            continue;
        *result = read_from_disk(b->s, b->keys[k->at], r, b->bufs[k->at], *result);
        k->from_disk = *result >= 0;
    }
}

/* Bytes read after the lease ran out may come from an extent already reused (a disk replica's
 * file is never reused: it is named by its version). Judged per key: when its last memory read
 * ended. */
static void get_check_leases(get_batch_t *b)
{
    uint64_t ttl = b->resp->lease_ttl_ms;
    for (size_t j = 0; j < b->m && ttl > 0; j++) {
        const get_key_t *k = &b->k[j];
        if (b->results[k->at] > 0 && !k->from_disk && k->finish_ms > b->t0 &&
            k->finish_ms - b->t0 > ttl) {
            MC_WARN("get of %.64s took %llu ms, longer than its %llu ms read lease; result dropped",
                    b->keys[k->at], (unsigned long long)(k->finish_ms - b->t0),
                    (unsigned long long)ttl);
            b->results[k->at] = MC_ERR_LEASE_EXPIRED;
        }
    }
}

/* Gets n objects; results[i] arrives with key i's check (0: to read; store_backend.h) and gets
 * its size or error. Returns 0 or the first error. */
static int read_objects(mc_real_client_t *s, const char *const *keys, void *const *bufs,
                        const size_t *caps, size_t n, int64_t *results)
{
    size_t cap = n ? n : 1;
    get_batch_t b = {.s = s,
                     .keys = keys,
                     .bufs = bufs,
                     .caps = caps,
                     .results = results,
                     .k = calloc(cap, sizeof(get_key_t)),
                     .names = calloc(cap, sizeof(char *)),
                     .reqs = calloc(cap, sizeof(mc_transfer_req_t)),
                     .owner = calloc(cap, sizeof(size_t)),
                     .st = calloc(cap, sizeof(mc_transfer_status_t))};
    int rc = 0;
    if (!b.k || !b.names || !b.reqs || !b.owner || !b.st)
        rc = MC_ERR_INTERNAL_ERROR; /* before any key ran: results untouched */
    if (rc == 0)
        rc = get_lookup(&b, n);
    if (rc == 0 && b.m > 0) {
        get_first_round(&b);
        get_failover_rounds(&b);
        get_from_disk(&b);
        get_check_leases(&b);
    }
    /* Done with the bytes, whatever the outcome: the leases go back. */
    for (size_t j = 0; b.resp && j < b.resp->n_results; j++)
        mc_lease_releaser_add(s->releases, b.names[j], b.resp->results[j]->lease_id);
    if (b.resp)
        mc__keys_response__free_unpacked(b.resp, NULL);
    free(b.k);
    free(b.names);
    free(b.reqs);
    free(b.owner);
    free(b.st);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = results[i] < 0 ? (int)results[i] : 0;
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

/* get, plain or zero-copy, single or batch: one path (the read slot). */
int mc_real_read(void *impl, mc_client_op_t op, int zero_copy, const char *const *keys,
                 void *const *bufs, const size_t *capacities, size_t n, int64_t *results)
{
    mc_real_client_t *s = impl;
    uint64_t t0 = mc_now_ns();
    if (mc_real_refuses_io(s) ||
        (zero_copy &&
         mc_real_check_registered_all(s, (const void *const *)bufs, capacities, n) != 0)) {
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
    int rc = mc_real_keys_call(s, MC_RPC_GET_REPLICA_LIST, &k, NULL, 1, NULL, 0, NULL, resp);
    if (rc == 0 && (*resp)->results[0]->code != 0) {
        rc = (*resp)->results[0]->code;
        mc__keys_response__free_unpacked(*resp, NULL);
    }
    return rc;
}

int64_t mc_real_get_size(void *impl, const char *key)
{
    Mc__KeysResponse *resp;
    int rc = replica_list(impl, key, &resp);
    if (rc != 0)
        return rc;
    int64_t size = (int64_t)resp->results[0]->size;
    mc__keys_response__free_unpacked(resp, NULL);
    return size;
}

int mc_real_get_replica_desc(void *impl, const char *key, mc_replica_desc_t *out, size_t capacity,
                             size_t *count)
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
