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
    rc = mc_real_keys_call(s, op_start, ks, sz, m, &pbc.msg, 0, NULL, &resp);
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
        int erc = mc_real_keys_call_checksums(s, op_end, end_keys, nend,
                                              s->checksum ? end_crcs : NULL, &er);
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
            int wrc = mc_real_wait_deletions(s, wk, nw, er->deletions_from, er->deletions_to);
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
        if (mc_real_keys_call(s, op_revoke, revoke_keys, NULL, nrevoke, NULL, 0, NULL, &rr) == 0)
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
