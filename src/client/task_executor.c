/*
 * task_executor.c — executes the replica copy/move tasks the master assigns to this client, and
 * the client-side calls of the task RPCs (task_executor.h).
 */
#include "task_executor.h"

#include "checksum.h"
#include "log.h"
#include "net.h"
#include "pb_decode.h"
#include "store.pb-c.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mc_task_executor {
    mc_rpc_client_t *rpc;
    mc_transfer_engine_t *te;
    char client_id[64];
    uintptr_t base;
    uint64_t size;
    unsigned delay_ms; /* MC_TASK_EXECUTOR_DELAY_MS */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
};

int mc_task_call_create(mc_rpc_client_t *rpc, int move, const char *key, const char *source,
                        const char *const *targets, size_t n, char *id_out)
{
    Mc__TaskCreateRequest req = MC__TASK_CREATE_REQUEST__INIT;
    req.key = (char *)key;
    req.source = (char *)(source ? source : "");
    req.targets = (char **)targets;
    req.n_targets = n;
    Mc__TaskCreateResponse *resp = NULL;
    int rc =
        mc_rpc_call_pb(rpc, move ? MC_RPC_CREATE_MOVE_TASK : MC_RPC_CREATE_COPY_TASK, &req.base,
                       &mc__task_create_response__descriptor, (ProtobufCMessage **)&resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0 && strlen(resp->task_id) != MC_TASK_ID_LEN)
        rc = MC_ERR_DESERIALIZE_FAIL;
    if (rc == 0)
        memcpy(id_out, resp->task_id, MC_TASK_ID_LEN + 1);
    mc__task_create_response__free_unpacked(resp, NULL);
    return rc;
}

int mc_task_call_query(mc_rpc_client_t *rpc, const char *task_id, mc_task_info_t *out)
{
    Mc__TaskQueryRequest req = MC__TASK_QUERY_REQUEST__INIT;
    req.task_id = (char *)task_id;
    Mc__TaskQueryResponse *resp = NULL;
    int rc = mc_rpc_call_pb(rpc, MC_RPC_QUERY_TASK, &req.base, &mc__task_query_response__descriptor,
                            (ProtobufCMessage **)&resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0) {
        memset(out, 0, sizeof(*out));
        snprintf(out->id, sizeof(out->id), "%s", resp->id);
        out->type = (mc_task_type_t)resp->type;
        out->status = (mc_task_status_t)resp->status;
        out->created_at_ms_epoch = resp->created_at_ms_epoch;
        out->last_updated_at_ms_epoch = resp->last_updated_at_ms_epoch;
        snprintf(out->assigned_client, sizeof(out->assigned_client), "%s", resp->assigned_client);
        snprintf(out->message, sizeof(out->message), "%s", resp->message);
    }
    mc__task_query_response__free_unpacked(resp, NULL);
    return rc;
}

int mc_task_call_replica_clear(mc_rpc_client_t *rpc, const char *client_id, const char *const *keys,
                               size_t n, const char *segment_name, int *cleared)
{
    Mc__ReplicaClearRequest req = MC__REPLICA_CLEAR_REQUEST__INIT;
    req.client_id = (char *)client_id;
    req.keys = (char **)keys;
    req.n_keys = n;
    req.segment_name = (char *)(segment_name ? segment_name : "");
    Mc__ReplicaClearResponse *resp = NULL;
    int rc = mc_rpc_call_pb(rpc, MC_RPC_BATCH_REPLICA_CLEAR, &req.base,
                            &mc__replica_clear_response__descriptor, (ProtobufCMessage **)&resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    /* The answer lists the cleared keys in request order (a subsequence of keys). */
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        cleared[i] = rc == 0 && j < resp->n_cleared && strcmp(resp->cleared[j], keys[i]) == 0;
        j += cleared[i] ? 1 : 0;
    }
    if (rc == 0 && j != resp->n_cleared)
        rc = MC_ERR_DESERIALIZE_FAIL;
    mc__replica_clear_response__free_unpacked(resp, NULL);
    return rc;
}

/* ---- the executor ------------------------------------------------------------------------ */

static void report(mc_task_executor_t *e, const char *id, int code, const char *what)
{
    Mc__TaskCompleteRequest req = MC__TASK_COMPLETE_REQUEST__INIT;
    char message[256];
    req.client_id = e->client_id;
    req.task_id = (char *)id;
    req.status = code == 0 ? MC_TASK_SUCCESS : MC_TASK_FAILED;
    req.error = code;
    snprintf(message, sizeof(message), "%s: %s", mc_error_name(code), what);
    req.message = code == 0 ? "" : message;
    Mc__StatusResponse *resp = NULL;
    int rc = mc_rpc_call_pb(e->rpc, MC_RPC_MARK_TASK_TO_COMPLETE, &req.base,
                            &mc__status_response__descriptor, (ProtobufCMessage **)&resp);
    if (rc == 0) {
        rc = resp->code;
        mc__status_response__free_unpacked(resp, NULL);
    }
    if (rc != 0) /* the task then times out on the master */
        MC_WARN("task %s: reporting to the master failed: %s", id, mc_error_name(rc));
}

/* Copies the value to every target; 0 or the failing code, *what saying where. */
static int execute(mc_task_executor_t *e, const Mc__TaskAssignment *t, const char **what)
{
    uintptr_t src = (uintptr_t)t->source_address;
    if (t->size > e->size || src < e->base || src - e->base > e->size - t->size) {
        *what = "the source is not in this client's segment";
        return MC_ERR_INVALID_PARAMS;
    }
    if (t->size == 0 || t->n_targets == 0)
        return 0;
    void *buf = malloc(t->size);
    if (!buf) {
        *what = "out of memory for the copy";
        return MC_ERR_INTERNAL_ERROR;
    }
    /* A private copy, verified: a value removed or replaced under it (its extent reused) is
     * caught here, and the bytes written below cannot change any more. */
    uint32_t crc = mc_copy_crc32c(buf, (const void *)src, t->size, 0, 1);
    if (t->has_checksum && crc != t->checksum) {
        free(buf);
        *what = "the source bytes do not match the object's checksum";
        return MC_ERR_CHECKSUM_MISMATCH;
    }
    mc_transfer_req_t reqs[MC_MAX_REPLICAS];
    size_t n = t->n_targets < MC_MAX_REPLICAS ? t->n_targets : MC_MAX_REPLICAS;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        mc_segment_id_t seg;
        rc = mc_te_open_segment(e->te, t->targets[i]->segment_name, &seg);
        reqs[i] = (mc_transfer_req_t){
            MC_TRANSFER_WRITE, buf, seg, t->targets[i]->address, t->size, t->targets[i]->epoch, 0};
        /* Once the master failed the task (a timeout), its targets' owners refuse these. */
        reqs[i].fence_token = t->targets[i]->fence_token;
    }
    if (rc == 0)
        rc = mc_te_transfer_sync(e->te, reqs, n);
    free(buf);
    if (rc != 0) {
        *what = "writing a target failed";
        return MC_ERR_TRANSFER_FAIL;
    }
    return 0;
}

static int wait_stop(mc_task_executor_t *e, unsigned ms)
{
    struct timespec ts;
    mc_deadline_after_ms(&ts, CLOCK_REALTIME, (uint64_t)ms);
    pthread_mutex_lock(&e->lock);
    while (!e->stop && pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT)
        ;
    int stop = e->stop;
    pthread_mutex_unlock(&e->lock);
    return stop;
}

static void *executor_main(void *arg)
{
    mc_task_executor_t *e = arg;
    while (!wait_stop(e, MC_TASK_POLL_MS)) {
        Mc__FetchTasksRequest req = MC__FETCH_TASKS_REQUEST__INIT;
        req.client_id = e->client_id;
        req.batch_size = MC_TASK_FETCH_BATCH;
        Mc__FetchTasksResponse *resp = NULL;
        if (mc_rpc_call_pb(e->rpc, MC_RPC_FETCH_TASKS, &req.base,
                           &mc__fetch_tasks_response__descriptor, (ProtobufCMessage **)&resp) != 0)
            continue; /* the master is away: the ping thread says so */
        for (size_t i = 0; i < resp->n_tasks; i++) {
            const Mc__TaskAssignment *t = resp->tasks[i];
            if (e->delay_ms && wait_stop(e, e->delay_ms)) {
                report(e, t->id, MC_ERR_INTERNAL_ERROR, "the client is closing");
                continue;
            }
            const char *what = "";
            int rc = execute(e, t, &what);
            report(e, t->id, rc, what);
        }
        mc__fetch_tasks_response__free_unpacked(resp, NULL);
    }
    return NULL;
}

int mc_task_executor_start(mc_rpc_client_t *rpc, mc_transfer_engine_t *te, const char *client_id,
                           const void *segment, uint64_t segment_size, mc_task_executor_t **out)
{
    mc_task_executor_t *e = calloc(1, sizeof(*e));
    if (!e)
        return MC_ERR_INTERNAL_ERROR;
    e->rpc = rpc;
    e->te = te;
    snprintf(e->client_id, sizeof(e->client_id), "%s", client_id);
    e->base = (uintptr_t)segment;
    e->size = segment_size;
    const char *d = getenv("MC_TASK_EXECUTOR_DELAY_MS");
    e->delay_ms = d ? (unsigned)strtoul(d, NULL, 10) : 0;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    if (pthread_create(&e->thread, NULL, executor_main, e) != 0) {
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        free(e);
        return MC_ERR_INTERNAL_ERROR;
    }
    *out = e;
    return 0;
}

void mc_task_executor_stop(mc_task_executor_t *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->stop = 1;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    free(e);
}
