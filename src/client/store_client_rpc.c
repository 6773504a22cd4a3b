/*
 * store_client_rpc.c — the calls every path of the real client shares: master calls over keys
 * (a KeysRequest with its answer checked: one result per key; PutEnd/UpsertEnd with checksums;
 * the wait for the files of removed or replaced values to be confirmed deleted), and one
 * Transfer Engine batch run to its end.
 * The lowest layer of the real client (store_client_internal.h): it calls no sibling.
 */
#include "store_client_internal.h"

#include "clock.h"
#include "log.h"

#include <inttypes.h>
#include <unistd.h>

/* The deletion wait polls the master with a backoff between these bounds. */
#define MC_DELETE_POLL_MIN_MS 2
#define MC_DELETE_POLL_MAX_MS 50

static int keys_call_req(mc_real_client_t *s, uint16_t opcode, Mc__KeysRequest *req, size_t n,
                         Mc__KeysResponse **resp);

int mc_real_keys_call(mc_real_client_t *s, uint16_t opcode, char **keys, uint64_t *sizes, size_t n,
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
int mc_real_wait_deletions(mc_real_client_t *s, char **keys, size_t n, uint64_t from, uint64_t to)
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
int mc_real_keys_call_checksums(mc_real_client_t *s, uint16_t opcode, char **keys, size_t n,
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

int mc_real_transfer(mc_real_client_t *s, const mc_transfer_req_t *reqs, size_t n,
                     mc_transfer_status_t *st)
{
    mc_batch_t *b = NULL;
    int rc = mc_te_batch_create(s->te, n, &b);
    if (rc == 0)
        rc = mc_te_submit(b, reqs, n);
    if (rc == 0)
        mc_te_wait(b, -1); /* every request ends by its deadline (transfer_engine.h) */
    for (size_t q = 0; q < n; q++) {
        st[q] = (mc_transfer_status_t){MC_TRANSFER_FAILED, rc, 0, 0, 0, 0};
        if (rc == 0)
            mc_te_get_status(b, q, &st[q]);
    }
    mc_te_batch_free(b);
    return rc;
}
