/*
 * store_client_write.c — the real client's write slot: put and upsert, plain or zero-copy,
 * single or batch, one path.
 *
 * A put asks the master for space (PutStart: one extent per replica, on distinct segments),
 * writes the value straight into every extent through the Transfer Engine, then publishes it
 * (PutEnd, with the value's CRC32C) — or gives the space back (PutRevoke) if any write failed.
 * A batch makes one master call per phase and one Transfer Engine batch for all its bytes.
 * With offload (offload.h), a put that finds no memory while offloads are pending retries for as
 * long as the master says freeing memory may take (KeysResponse.offload_wait_ms) before returning
 * -200; a put that meets another put of its key waits for that one's outcome.
 */
#include "store_client_internal.h"

#include "clock.h"
#include "checksum.h"
#include "failpoint.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MC_PUT_RETRY_MIN_MS 5
#define MC_PUT_RETRY_MAX_MS 100
#define MC_PUT_BUSY_WAIT_MS 5000 /* a put waits this long for another put of its key */

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

/* One key of a put that goes to the master (its check passed). */
typedef struct put_key {
    size_t at;     /* its index in the caller's arrays */
    int started;   /* PutStart gave it extents: PutEnd or PutRevoke follows */
    int crc_fused; /* crc came with its first replica's copy (local, shm) */
    uint32_t crc;
} put_key_t;

/* A put of m keys, phase by phase (select, start, write, finish). The caller's arrays stay the
 * caller's; names and lens are the flat arrays a KeysRequest takes. */
typedef struct put_batch {
    mc_real_client_t *s;
    int upsert;
    const char *const *keys;
    const void *const *values;
    const size_t *sizes;
    int *results;
    put_key_t *k; /* k[j]: the j-th key asked for */
    size_t m;
    char **names;           /* names[j]: k[j]'s key (PutStart), then the keys PutEnd publishes */
    uint64_t *lens;         /* lens[j]: k[j]'s size */
    char **revoked;         /* the keys PutRevoke gives back */
    uint32_t *crcs;         /* PutEnd's checksums, one per published key */
    Mc__KeysResponse *resp; /* PutStart's answer: resp->results[j] is k[j]'s */
} put_batch_t;

/* The keys whose check passed go to the master; a missing value or one over the size limit is
 * refused here. */
static void put_select(put_batch_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b->results[i] == 0 && b->sizes[i] > 0 && !b->values[i])
            b->results[i] = MC_ERR_INVALID_PARAMS;
        if (b->results[i] == 0 && b->sizes[i] > MC_MAX_VALUE_SIZE)
            b->results[i] = MC_ERR_INVALID_PARAMS;
        if (b->results[i] == 0) {
            b->k[b->m] = (put_key_t){.at = i};
            b->names[b->m] = (char *)b->keys[i];
            b->lens[b->m++] = b->sizes[i];
        }
    }
}

/* PutStart (UpsertStart) for every selected key; on failure every one of them gets its error. */
static int put_start(put_batch_t *b, Mc__ReplicateConfig *config, uint64_t *wait_ms)
{
    uint16_t op = b->upsert ? MC_RPC_UPSERT_START : MC_RPC_PUT_START;
    int rc = mc_real_keys_call(b->s, op, b->names, b->lens, b->m, config, 0, NULL, &b->resp);
    if (rc != 0) {
        for (size_t j = 0; j < b->m; j++)
            b->results[b->k[j].at] = rc;
        return rc;
    }
    *wait_ms = b->resp->offload_wait_ms;
    mc_failpoint("put.after_start");
    return 0;
}

/* Fills one write per extent PutStart handed out (in reqs, owner[q] naming its key) and marks the
 * keys started. A key that already exists is done (a put keeps the value: upstream answers 0); a
 * key whose extents' segment cannot be opened fails, with the writes to its earlier extents
 * still sent (the key is then revoked, so they are fenced). Returns the count of writes. */
static size_t put_plan(put_batch_t *b, mc_transfer_req_t *reqs, size_t *owner)
{
    size_t nreq = 0;
    for (size_t j = 0; j < b->m; j++) {
        const Mc__KeyResult *r = b->resp->results[j];
        size_t i = b->k[j].at;
        if (r->code == MC_ERR_OBJECT_ALREADY_EXISTS && !b->upsert) {
            b->results[i] = 0; /* upstream put: an existing key is success; the value is kept */
            continue;
        }
        if (r->code != 0) {
            b->results[i] = r->code;
            continue;
        }
        b->k[j].started = 1;
        for (size_t x = 0; x < r->n_replicas && b->sizes[i] > 0; x++) {
            const Mc__Replica *rep = r->replicas[x];
            mc_segment_id_t seg;
            if (mc_te_open_segment(b->s->te, rep->segment_name, &seg) != 0) {
                b->results[i] = MC_ERR_TRANSFER_FAIL;
                break;
            }
            reqs[nreq] = (mc_transfer_req_t){MC_TRANSFER_WRITE, (void *)b->values[i], seg,
                                             rep->address, b->sizes[i]};
            /* The owner refuses it once its segment was mounted again (tcp, local): a put
             * allocated by a master that since died or was deposed must not land in memory
             * the next one handed out. */
            reqs[nreq].epoch = rep->epoch;
            /* Once the master revoked this put (we failed, or it timed us out) the owner
             * refuses these writes, however late they arrive. */
            reqs[nreq].fence_token = rep->fence_token;
            /* The first replica's copy computes the value's checksum when it is a memcpy. */
            reqs[nreq].want_crc32c = b->s->checksum && x == 0;
            owner[nreq++] = j;
        }
    }
    return nreq;
}

/* Writes every value into every extent PutStart handed out, in one Transfer Engine batch. A key
 * any of whose writes failed gets the error. 0, or MC_ERR_INTERNAL_ERROR (out of memory: no key
 * was written, none is marked failed by it). */
static int put_write(put_batch_t *b)
{
    size_t nreq = 0;
    for (size_t j = 0; j < b->m; j++)
        nreq += b->resp->results[j]->code == 0 ? b->resp->results[j]->n_replicas : 0;
    mc_transfer_req_t *reqs = calloc(nreq ? nreq : 1, sizeof(*reqs));
    size_t *owner = calloc(nreq ? nreq : 1, sizeof(*owner));
    mc_transfer_status_t *st = calloc(nreq ? nreq : 1, sizeof(*st));
    if (!reqs || !owner || !st) {
        free(reqs);
        free(owner);
        free(st);
        return MC_ERR_INTERNAL_ERROR;
    }
    nreq = put_plan(b, reqs, owner);
    if (nreq > 0)
        mc_real_transfer(b->s, reqs, nreq, st);
    for (size_t q = 0; q < nreq; q++) {
        put_key_t *k = &b->k[owner[q]];
        if (st[q].state != MC_TRANSFER_COMPLETED) {
            b->results[k->at] = st[q].error ? st[q].error : MC_ERR_TRANSFER_FAIL;
        } else if (st[q].has_crc32c) {
            k->crc_fused = 1;
            k->crc = st[q].crc32c;
        }
    }
    free(reqs);
    free(owner);
    free(st);
    return 0;
}

/*
 * Publishes what was written (PutEnd, with each value's CRC32C) and gives back what was not
 * (PutRevoke). An upsert is acknowledged only once the replaced values' files are gone
 * (mc_real_wait_deletions), else its keys get MC_ERR_PERSISTENT_FAIL. *stored grows by the
 * sizes of the values published.
 */
static void put_finish(put_batch_t *b, uint64_t *stored)
{
    mc_real_client_t *s = b->s;
    size_t nend = 0, nrevoke = 0;
    for (size_t j = 0; j < b->m; j++) {
        const put_key_t *k = &b->k[j];
        if (!k->started)
            continue;
        if (b->results[k->at] != 0) {
            b->revoked[nrevoke++] = (char *)b->keys[k->at];
            continue;
        }
        b->names[nend] = (char *)b->keys[k->at];
        /* Fused with the copy (local, shm), else after the transfer: the source was just read,
         * so it is likely still in cache. */
        if (s->checksum)
            b->crcs[nend] = k->crc_fused ? k->crc : mc_crc32c(0, b->values[k->at], b->sizes[k->at]);
        nend++;
    }
    if (nend) {
        uint16_t op = b->upsert ? MC_RPC_UPSERT_END : MC_RPC_PUT_END;
        Mc__KeysResponse *er = NULL;
        int erc =
            mc_real_keys_call_checksums(s, op, b->names, nend, s->checksum ? b->crcs : NULL, &er);
        /* The published keys, in the order of names[]: the started keys that were written. */
        size_t e = 0, published = 0;
        for (size_t j = 0; j < b->m; j++) {
            const put_key_t *k = &b->k[j];
            if (!k->started || b->results[k->at] != 0)
                continue;
            int code = erc ? erc : er->results[e]->code;
            b->results[k->at] = code;
            *stored += code == 0 ? b->sizes[k->at] : 0;
            b->names[published] = b->names[e]; /* keeps the ones published, for the wait */
            published += code == 0;
            e++;
        }
        if (erc == 0 && b->upsert && er->deletions_to &&
            mc_real_wait_deletions(s, b->names, published, er->deletions_from, er->deletions_to) !=
                0) {
            /* The replaced values' files were not confirmed gone: not acknowledged as kept. */
            for (size_t j = 0; j < b->m; j++) {
                const put_key_t *k = &b->k[j];
                if (k->started && b->results[k->at] == 0)
                    b->results[k->at] = MC_ERR_PERSISTENT_FAIL;
            }
        }
        if (er)
            mc__keys_response__free_unpacked(er, NULL);
    }
    if (nrevoke) {
        uint16_t op = b->upsert ? MC_RPC_UPSERT_REVOKE : MC_RPC_PUT_REVOKE;
        Mc__KeysResponse *rr = NULL;
        if (mc_real_keys_call(s, op, b->revoked, NULL, nrevoke, NULL, 0, NULL, &rr) == 0)
            mc__keys_response__free_unpacked(rr, NULL);
    }
}

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
    size_t cap = n ? n : 1;
    put_batch_t b = {.s = s,
                     .upsert = upsert,
                     .keys = keys,
                     .values = values,
                     .sizes = sizes,
                     .results = results,
                     .k = calloc(cap, sizeof(put_key_t)),
                     .names = calloc(cap, sizeof(char *)),
                     .lens = calloc(cap, sizeof(uint64_t)),
                     .revoked = calloc(cap, sizeof(char *)),
                     .crcs = calloc(cap, sizeof(uint32_t))};
    pb_config_t pbc = {0};
    int rc = 0;
    if (!b.k || !b.names || !b.lens || !b.revoked || !b.crcs || config_to_pb(config, &pbc) != 0) {
        rc = MC_ERR_INTERNAL_ERROR; /* before any key ran: results untouched */
        goto done;
    }
    put_select(&b, n);
    if (b.m > 0)
        rc = put_start(&b, &pbc.msg, wait_ms);
    if (b.m > 0 && rc == 0)
        rc = put_write(&b);
    if (b.m > 0 && rc == 0)
        put_finish(&b, stored);
done:
    if (b.resp)
        mc__keys_response__free_unpacked(b.resp, NULL);
    free(pbc.preferred);
    free(b.k);
    free(b.names);
    free(b.lens);
    free(b.revoked);
    free(b.crcs);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = results[i];
    return rc;
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

/* put / upsert, plain or zero-copy, single or batch: one path (the write slot). */
int mc_real_write(void *impl, mc_client_op_t op, int upsert, int zero_copy, const char *const *keys,
                  const void *const *values, const size_t *sizes, size_t n,
                  const mc_replicate_config_t *config, int *results)
{
    mc_real_client_t *s = impl;
    uint64_t t0 = mc_now_ns();
    if (mc_real_refuses_io(s) ||
        (zero_copy && mc_real_check_registered_all(s, values, sizes, n) != 0)) {
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
