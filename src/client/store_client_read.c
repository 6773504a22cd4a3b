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
    rc = mc_real_keys_call(s, MC_RPC_GET_REPLICA_LIST, ks, NULL, m, NULL, 0, NULL, &resp);
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
