/*
 * rpc_handlers.c — what each master RPC does: decodes the store.proto request of an opcode
 * (rpc.h), calls the Master Service (master_service.h) and replies through the transport
 * (rpc_internal.h). Per-key RPCs are batches: the handler loops over the keys and gives each its
 * own KeyResult; a malformed batch (too many keys, sizes missing, a bad replicate config) gets a
 * whole-request MC_ERR_INVALID_PARAMS.
 *
 * The offload RPCs (heartbeat, results, disk-replica eviction) are batches too; the tasks and
 * deletions a heartbeat hands out are copied into the reply while the master's lock is held.
 *
 * Every handled request is also counted for upstream's metric families (mc_master_count_op and
 * friends, master_service.h): per operation, single or batch form, and per key for PutStart
 * (value sizes, allocation failures) and GetReplicaList (cache hits).
 *
 * RemoveAll and RemoveByRegex are served only to a live client (MC_ERR_ILLEGAL_CLIENT otherwise)
 * and leave one audit line each (peer, client id, objects removed or why refused).
 *
 * Everything a reply points to (results, replicas, strings) comes from a per-request arena freed
 * once the reply is packed. A PutStart/UpsertStart whose reply would not fit MC_RPC_MAX_BODY is
 * undone (every started put revoked) before MC_ERR_BUFFER_OVERFLOW is returned, so no allocation
 * outlives a reply the client never saw.
 */
#include "rpc_internal.h"
#include "snapshot.pb-c.h"
#include "journal.h"

#include "log.h"
#include "mooncake/errors.h"
#include "pb_decode.h"
#include "rpc.h"
#include "store.pb-c.h"
#include "task_manager.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RPC_REPLICAS_PER_KEY ((size_t)2 * MC_MAX_REPLICAS) /* memory plus disk/DFS replicas */
#define RPC_ARENA_CHUNK (64u << 10)
#define RPC_MAX_HEARTBEAT_TASKS 4096     /* tasks leased by one heartbeat */
#define RPC_MAX_HEARTBEAT_DELETIONS 4096 /* deletions handed out by one heartbeat */
#define RPC_MAX_INFLIGHT 65536           /* task ids renewed by one heartbeat */

/* ---- per-request arena ------------------------------------------------------------------- */

typedef struct rpc_arena_chunk {
    struct rpc_arena_chunk *next;
    size_t used;
    size_t cap;
    max_align_t data[];
} rpc_arena_chunk_t;

typedef struct rpc_arena {
    rpc_arena_chunk_t *head;
} rpc_arena_t;

/* Zeroed memory that lives until rpc_arena_free; NULL when out of memory. */
static void *rpc_arena_alloc(rpc_arena_t *a, size_t n)
{
    const size_t align = sizeof(max_align_t);
    n = (n + align - 1) / align * align;
    if (n == 0)
        n = align;
    rpc_arena_chunk_t *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > RPC_ARENA_CHUNK ? n : RPC_ARENA_CHUNK;
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

static char *rpc_arena_strdup(rpc_arena_t *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = rpc_arena_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static void rpc_arena_free(rpc_arena_t *a)
{
    while (a->head) {
        rpc_arena_chunk_t *next = a->head->next;
        free(a->head);
        a->head = next;
    }
}

/* ---- decoding ----------------------------------------------------------------------------- */

/*
 * A request body decoded within its memory budget (pb_decode.h), or NULL when it is malformed or
 * would need more memory than the budget; the handler then returns MC_ERR_DESERIALIZE_FAIL and
 * the transport closes the connection (a protocol error; budget refusals are also counted in
 * mc_pb_decode_refused). Free with the type's __free_unpacked(msg, NULL).
 */
static void *rpc_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *body, size_t len)
{
    ProtobufCMessage *msg = NULL;
    return mc_pb_decode(desc, body, len, &msg) == 0 ? msg : NULL;
}

/* ---- handlers: service, ping, segments --------------------------------------------------- */

static int handle_service_ready(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                size_t len)
{
    Mc__ServiceReadyResponse resp = MC__SERVICE_READY_RESPONSE__INIT;
    resp.version = (char *)MC_VERSION_STRING;
    return mc_rpc_conn_reply(c, opcode, id, &resp.base, 1);
}

/* Tokens of revoked puts a ping reply carries at most (8 bytes each); more go in later pings. */
#define MC_RPC_FENCE_TOKENS_MAX 8192

static int handle_ping(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body, size_t len)
{
    Mc__PingRequest *req = rpc_decode(&mc__ping_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    Mc__PingResponse resp = MC__PING_RESPONSE__INIT;
    static _Thread_local uint64_t fence_tokens[MC_RPC_FENCE_TOKENS_MAX];
    uint64_t view = 0;
    mc_client_status_t status = MC_CLIENT_UNDEFINED;
    resp.code = mc_master_ping(mc_rpc_conn_master(c), req->client_id, &view, &status);
    if (resp.code == 0 && status == MC_CLIENT_OK)
        mc_rpc_conn_set_client(c, req->client_id);
    resp.view_version = view;
    resp.client_status = (int32_t)status;
    if (resp.code == 0) {
        resp.offload_pending =
            mc_master_offload_ping(mc_rpc_conn_master(c), req->client_id, req->fallback_reads);
        mc_master_report_checksum_mismatches(mc_rpc_conn_master(c), req->client_id,
                                             req->checksum_mismatches);
        /* The write fence: the client's confirmation in, the tokens it must refuse out. */
        size_t n = 0;
        uint64_t upto = 0;
        if (mc_master_fence_ping(mc_rpc_conn_master(c), req->client_id, req->fence_view,
                                 req->fence_acked, fence_tokens, MC_RPC_FENCE_TOKENS_MAX, &n,
                                 &upto) == 0 &&
            n > 0) {
            resp.fence_tokens = fence_tokens;
            resp.n_fence_tokens = n;
            resp.fence_upto = upto;
        }
    }
    mc_master_count_op(mc_rpc_conn_master(c), MC_OP_PING, resp.code != 0);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    mc__ping_request__free_unpacked(req, NULL);
    return rc;
}

/* Copies a wire segment into the master's form; MC_ERR_INVALID_PARAMS when a field is too long. */
static int rpc_segment_from_proto(const Mc__Segment *p, mc_segment_info_t *out)
{
    memset(out, 0, sizeof(*out));
    if (strlen(p->id) >= sizeof(out->id) || strlen(p->name) >= sizeof(out->name) ||
        strlen(p->protocol) >= sizeof(out->protocol))
        return MC_ERR_INVALID_PARAMS;
    strcpy(out->id, p->id);
    strcpy(out->name, p->name);
    strcpy(out->protocol, p->protocol);
    out->base = p->base_address;
    out->size = p->size;
    return 0;
}

/* Runs a Mount/ReMount/Unmount request; returns its code and fills msg on failure. */
static int rpc_run_segments(mc_master_t *m, uint16_t opcode, const Mc__SegmentRequest *req,
                            char *msg, size_t msglen)
{
    if (req->n_segments > MC_RPC_MAX_SEGMENTS) {
        snprintf(msg, msglen, "%zu segments in one request; the limit is %d", req->n_segments,
                 MC_RPC_MAX_SEGMENTS);
        return MC_ERR_INVALID_PARAMS;
    }
    if (opcode == MC_RPC_UNMOUNT_SEGMENT || opcode == MC_RPC_GRACEFUL_UNMOUNT_SEGMENT) {
        uint64_t grace = opcode == MC_RPC_GRACEFUL_UNMOUNT_SEGMENT ? req->grace_period_ms : 0;
        for (size_t i = 0; i < req->n_segments; i++) {
            int rc =
                mc_master_graceful_unmount_segment(m, req->client_id, req->segments[i]->id, grace);
            if (rc != 0) {
                snprintf(msg, msglen, "unmount of segment \"%s\": %s", req->segments[i]->id,
                         mc_error_name(rc));
                return rc;
            }
        }
        return 0;
    }
    mc_segment_info_t *segs = calloc(req->n_segments ? req->n_segments : 1, sizeof(*segs));
    if (!segs)
        return MC_ERR_INTERNAL_ERROR;
    int rc = 0;
    for (size_t i = 0; i < req->n_segments && rc == 0; i++) {
        rc = rpc_segment_from_proto(req->segments[i], &segs[i]);
        if (rc != 0)
            snprintf(msg, msglen, "segment %zu: id, name or protocol too long", i);
    }
    if (rc == 0 && opcode == MC_RPC_REMOUNT_SEGMENT) {
        rc = mc_master_remount_segments(m, req->client_id, segs, req->n_segments);
        if (rc != 0)
            snprintf(msg, msglen, "remount: %s", mc_error_name(rc));
    }
    for (size_t i = 0; rc == 0 && opcode == MC_RPC_MOUNT_SEGMENT && i < req->n_segments; i++) {
        rc = mc_master_mount_segment(m, req->client_id, &segs[i]);
        if (rc != 0)
            snprintf(msg, msglen, "mount of segment \"%s\" (%s): %s", segs[i].id, segs[i].name,
                     mc_error_name(rc));
    }
    free(segs);
    return rc;
}

static int handle_segments(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                           size_t len)
{
    Mc__SegmentRequest *req = rpc_decode(&mc__segment_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    char msg[512] = "";
    Mc__StatusResponse resp = MC__STATUS_RESPONSE__INIT;
    resp.code = rpc_run_segments(mc_rpc_conn_master(c), opcode, req, msg, sizeof(msg));
    int unmount = opcode == MC_RPC_UNMOUNT_SEGMENT || opcode == MC_RPC_GRACEFUL_UNMOUNT_SEGMENT;
    if (resp.code == 0 && !unmount)
        mc_rpc_conn_set_client(c, req->client_id);
    if (resp.code == 0 && !unmount && req->n_segments > 0)
        resp.epoch = mc_master_segment_epoch(mc_rpc_conn_master(c), req->segments[0]->id);
    resp.message = msg;
    mc_master_count_op(mc_rpc_conn_master(c),
                       opcode == MC_RPC_MOUNT_SEGMENT ? MC_OP_MOUNT_SEGMENT
                       : unmount                      ? MC_OP_UNMOUNT_SEGMENT
                                                      : MC_OP_REMOUNT_SEGMENT,
                       resp.code != 0);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    mc__segment_request__free_unpacked(req, NULL);
    return rc;
}

/* ---- handlers: keys ---------------------------------------------------------------------- */

/* A decoded KeysRequest, the reply being built, and the arena the reply points into. */
typedef struct rpc_keys_call {
    mc_master_t *master;
    uint16_t opcode;
    const Mc__KeysRequest *req;
    Mc__KeysResponse resp;
    rpc_arena_t arena;
} rpc_keys_call_t;

static int rpc_config_from_proto(const Mc__ReplicateConfig *p, mc_replicate_config_t *out)
{
    mc_replicate_config_t def = MC_REPLICATE_CONFIG_INIT;
    *out = def;
    if (!p)
        return 0;
    if (p->soft_pin_action < MC_SOFT_PIN_PRESERVE || p->soft_pin_action > MC_SOFT_PIN_DISABLE ||
        p->n_preferred_segments > MC_RPC_MAX_SEGMENTS)
        return MC_ERR_INVALID_PARAMS;
    out->replica_num = p->replica_num;
    out->preferred_segments = (const char *const *)p->preferred_segments;
    out->preferred_segment_count = p->n_preferred_segments;
    out->soft_pin_action = (mc_soft_pin_action_t)p->soft_pin_action;
    out->has_soft_pin_ttl = p->has_soft_pin_ttl;
    out->soft_pin_ttl_ms = p->soft_pin_ttl_ms;
    out->with_hard_pin = p->with_hard_pin;
    return 0;
}

/* Copies descs into r->replicas (arena memory). */
static int rpc_fill_replicas(rpc_arena_t *a, Mc__KeyResult *r, const mc_replica_desc_t *descs,
                             size_t n)
{
    if (n == 0)
        return 0;
    Mc__Replica **ptrs = rpc_arena_alloc(a, n * sizeof(*ptrs));
    Mc__Replica *reps = rpc_arena_alloc(a, n * sizeof(*reps));
    if (!ptrs || !reps)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++) {
        Mc__Replica init = MC__REPLICA__INIT;
        reps[i] = init;
        reps[i].type = (int32_t)descs[i].type;
        reps[i].status = (int32_t)descs[i].status;
        reps[i].address = descs[i].address;
        reps[i].size = descs[i].size;
        reps[i].segment_name = rpc_arena_strdup(a, descs[i].segment_name);
        reps[i].file_path = rpc_arena_strdup(a, descs[i].file_path);
        reps[i].epoch = descs[i].epoch;
        reps[i].has_checksum = descs[i].has_checksum ? 1 : 0;
        reps[i].checksum = descs[i].checksum;
        reps[i].fence_token = descs[i].fence_token;
        if (!reps[i].segment_name || !reps[i].file_path)
            return MC_ERR_INTERNAL_ERROR;
        ptrs[i] = &reps[i];
    }
    r->replicas = ptrs;
    r->n_replicas = n;
    return 0;
}

/* One key of a per-key RPC: fills r (code, replicas, size, exists). */
static int rpc_run_key(rpc_keys_call_t *k, size_t i, const mc_replicate_config_t *cfg,
                       Mc__KeyResult *r)
{
    mc_master_t *m = k->master;
    const char *cid = k->req->client_id;
    const char *key = k->req->keys[i];
    mc_replica_desc_t descs[RPC_REPLICAS_PER_KEY];
    size_t n = 0;
    uint64_t size = 0, ttl = 0;
    int rc;

    switch (k->opcode) {
    case MC_RPC_PUT_START:
        rc = mc_master_put_start(m, cid, key, k->req->sizes[i], cfg, descs, RPC_REPLICAS_PER_KEY,
                                 &n);
        mc_master_count_put_start(m, rc, k->req->sizes[i], n,
                                  cfg->replica_num ? cfg->replica_num : 1);
        break;
    case MC_RPC_UPSERT_START:
        rc = mc_master_upsert_start(m, cid, key, k->req->sizes[i], cfg, descs, RPC_REPLICAS_PER_KEY,
                                    &n);
        break;
    case MC_RPC_PUT_END:
    case MC_RPC_UPSERT_END:
        /* Checksums come one per key or not at all (a writer that does not checksum). */
        rc = mc_master_put_end_checksum(
            m, cid, key, k->req->n_checksums == k->req->n_keys ? &k->req->checksums[i] : NULL);
        break;
    case MC_RPC_PUT_REVOKE:
        rc = mc_master_put_revoke(m, cid, key);
        break;
    case MC_RPC_UPSERT_REVOKE:
        rc = mc_master_upsert_revoke(m, cid, key);
        break;
    case MC_RPC_GET_REPLICA_LIST:
        rc = mc_master_get_replica_list_leased(m, key, descs, RPC_REPLICAS_PER_KEY, &n, &size, &ttl,
                                               &r->lease_id);
        if (rc == 0) {
            r->size = size;
            k->resp.lease_ttl_ms = ttl;
        }
        mc_master_count_get(m, rc, n > 0 ? descs[0].type : MC_REPLICA_MEMORY, size);
        break;
    case MC_RPC_EXIST_KEY:
        rc = mc_master_exist_key(m, key);
        r->exists = rc == 1;
        if (rc > 0)
            rc = 0;
        break;
    case MC_RPC_REMOVE:
        rc = mc_master_remove(m, key, k->req->force);
        break;
    default:
        rc = MC_ERR_INVALID_PARAMS;
        break;
    }
    r->code = rc;
    if (rc != 0)
        return 0;
    if (n > RPC_REPLICAS_PER_KEY)
        n = RPC_REPLICAS_PER_KEY;
    return rpc_fill_replicas(&k->arena, r, descs, n);
}

/* Fills k->resp for a per-key opcode; returns the whole-request code. */
static int rpc_run_keys(rpc_keys_call_t *k)
{
    const Mc__KeysRequest *req = k->req;
    int starts = k->opcode == MC_RPC_PUT_START || k->opcode == MC_RPC_UPSERT_START;
    mc_replicate_config_t cfg;

    if (starts && req->n_sizes != req->n_keys)
        return MC_ERR_INVALID_PARAMS;
    if (rpc_config_from_proto(req->config, &cfg) != 0)
        return MC_ERR_INVALID_PARAMS;
    size_t n = req->n_keys;
    if (n == 0)
        return 0;
    Mc__KeyResult **ptrs = rpc_arena_alloc(&k->arena, n * sizeof(*ptrs));
    Mc__KeyResult *res = rpc_arena_alloc(&k->arena, n * sizeof(*res));
    if (!ptrs || !res)
        return MC_ERR_INTERNAL_ERROR;
    k->resp.results = ptrs;
    for (size_t i = 0; i < n; i++) {
        Mc__KeyResult init = MC__KEY_RESULT__INIT;
        res[i] = init;
        ptrs[i] = &res[i];
        k->resp.n_results = i + 1;
        if (rpc_run_key(k, i, &cfg, &res[i]) != 0)
            return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

/* Undoes the successful starts of a PutStart/UpsertStart whose reply cannot be sent. */
static void rpc_undo_starts(rpc_keys_call_t *k)
{
    for (size_t i = 0; i < k->resp.n_results; i++) {
        if (k->resp.results[i]->code != 0)
            continue;
        if (k->opcode == MC_RPC_PUT_START)
            mc_master_put_revoke(k->master, k->req->client_id, k->req->keys[i]);
        else if (k->opcode == MC_RPC_UPSERT_START)
            mc_master_upsert_revoke(k->master, k->req->client_id, k->req->keys[i]);
    }
}

static int rpc_keys_code(const Mc__KeysResponse *r)
{
    if (r->code != 0)
        return r->code;
    for (size_t i = 0; i < r->n_results; i++) {
        if (r->results[i]->code != 0)
            return r->results[i]->code;
    }
    return 0;
}

/* `in` with every byte outside printable ASCII written as \xNN, cut to fit `out`. */
static const char *rpc_printable(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (; *in && n + 5 < cap; in++) {
        unsigned char ch = (unsigned char)*in;
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            out[n++] = (char)ch;
        else
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", ch);
    }
    out[n] = '\0';
    return out;
}

/*
 * RemoveAll / RemoveByRegex: destructive for every client's objects, so only a live client
 * (one the master knows through a mount, remount or ping) may call them: anything else gets
 * MC_ERR_ILLEGAL_CLIENT. Every call leaves one audit line: peer, client id, outcome.
 */
static int64_t rpc_remove_many(rpc_conn_t *c, uint16_t opcode, const Mc__KeysRequest *req)
{
    mc_master_t *m = mc_rpc_conn_master(c);
    const char *what = opcode == MC_RPC_REMOVE_ALL ? "RemoveAll" : "RemoveByRegex";
    char cid[4 * MC_CLIENT_ID_MAX + 8];
    rpc_printable(req->client_id, cid, sizeof(cid));
    if (!mc_master_client_is_live(m, req->client_id)) {
        MC_WARN("audit: %s%s from %s refused: client id \"%s\" is not a live client", what,
                req->force ? " (force)" : "", mc_rpc_conn_peer(c), cid);
        return MC_ERR_ILLEGAL_CLIENT;
    }
    int64_t n = opcode == MC_RPC_REMOVE_ALL ? mc_master_remove_all(m, req->force)
                                            : mc_master_remove_by_regex(m, req->regex, req->force);
    if (n >= 0)
        MC_INFO("audit: %s%s from %s by client %s removed %" PRId64 " objects", what,
                req->force ? " (force)" : "", mc_rpc_conn_peer(c), cid, n);
    else
        MC_WARN("audit: %s%s from %s by client %s failed: %s", what, req->force ? " (force)" : "",
                mc_rpc_conn_peer(c), cid, mc_error_name((int)n));
    return n;
}

/*
 * Upstream's request counters for a per-key call (mc_master_count_op): one key counts as the
 * single form, several as the batch form where upstream has one, else as that many single calls.
 */
static void rpc_count_keys(mc_master_t *m, uint16_t opcode, const Mc__KeysResponse *r,
                           size_t n_keys)
{
    static const struct {
        uint16_t opcode;
        int op, batch; /* batch -1: no batch form */
    } map[] = {
        {MC_RPC_PUT_START, MC_OP_PUT_START, MC_BATCH_PUT_START},
        {MC_RPC_PUT_END, MC_OP_PUT_END, MC_BATCH_PUT_END},
        {MC_RPC_PUT_REVOKE, MC_OP_PUT_REVOKE, MC_BATCH_PUT_REVOKE},
        {MC_RPC_GET_REPLICA_LIST, MC_OP_GET_REPLICA_LIST, MC_BATCH_GET_REPLICA_LIST},
        {MC_RPC_EXIST_KEY, MC_OP_EXIST_KEY, MC_BATCH_EXIST_KEY},
        {MC_RPC_REMOVE, MC_OP_REMOVE, -1},
        {MC_RPC_REMOVE_ALL, MC_OP_REMOVE_ALL, -1},
        {MC_RPC_REMOVE_BY_REGEX, MC_OP_REMOVE_BY_REGEX, -1},
    };
    size_t i = 0, n = sizeof(map) / sizeof(map[0]);
    while (i < n && map[i].opcode != opcode)
        i++;
    if (i == n)
        return; /* upserts, lease releases: no upstream counter */
    if (opcode == MC_RPC_REMOVE_ALL || opcode == MC_RPC_REMOVE_BY_REGEX || n_keys == 0) {
        mc_master_count_op(m, (mc_master_op_t)map[i].op, r->code != 0);
        return;
    }
    size_t failed = 0;
    for (size_t j = 0; j < n_keys; j++)
        failed += r->code != 0 || j >= r->n_results || r->results[j]->code != 0;
    if (n_keys > 1 && map[i].batch >= 0) {
        mc_master_count_batch(m, (mc_master_batch_op_t)map[i].batch, n_keys, failed);
        return;
    }
    for (size_t j = 0; j < n_keys; j++)
        mc_master_count_op(m, (mc_master_op_t)map[i].op,
                           r->code != 0 || j >= r->n_results || r->results[j]->code != 0);
}

/* A KeysRequest with more keys than MC_RPC_MAX_BATCH is answered before it is decoded. */
static int rpc_too_many_keys(const uint8_t *body, size_t len)
{
    const ProtobufCFieldDescriptor *keys =
        protobuf_c_message_descriptor_get_field_by_name(&mc__keys_request__descriptor, "keys");
    return mc_pb_count_field(body, len, keys->id, MC_RPC_MAX_BATCH) > MC_RPC_MAX_BATCH;
}

static int handle_keys(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body, size_t len)
{
    if (rpc_too_many_keys(body, len)) {
        Mc__KeysResponse refused = MC__KEYS_RESPONSE__INIT;
        refused.code = MC_ERR_INVALID_PARAMS;
        return mc_rpc_conn_reply(c, opcode, id, &refused.base, 0);
    }
    Mc__KeysRequest *req = rpc_decode(&mc__keys_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    rpc_keys_call_t k = {.master = mc_rpc_conn_master(c), .opcode = opcode, .req = req};
    Mc__KeysResponse init = MC__KEYS_RESPONSE__INIT;
    k.resp = init;
    /* Calls that discard values: the caller waits for the deletion of their files. */
    int discards = opcode == MC_RPC_REMOVE || opcode == MC_RPC_REMOVE_ALL ||
                   opcode == MC_RPC_REMOVE_BY_REGEX || opcode == MC_RPC_UPSERT_END;
    uint64_t del_seq = discards ? mc_master_offload_deletion_seq(k.master) : 0;

    if (req->n_keys > MC_RPC_MAX_BATCH) {
        k.resp.code = MC_ERR_INVALID_PARAMS;
    } else if (opcode == MC_RPC_REMOVE_ALL || opcode == MC_RPC_REMOVE_BY_REGEX) {
        int64_t n = rpc_remove_many(c, opcode, req);
        k.resp.code = n < 0 ? (int32_t)n : 0;
        k.resp.count = n < 0 ? 0 : n;
    } else if (opcode == MC_RPC_RELEASE_LEASE) {
        k.resp.code = req->n_lease_ids == req->n_keys ? 0 : MC_ERR_INVALID_PARAMS;
        if (k.resp.code == 0)
            k.resp.count = (int64_t)mc_master_release_read_leases(
                k.master, (const char *const *)req->keys, req->lease_ids, req->n_keys);
    } else {
        k.resp.code = rpc_run_keys(&k);
        if ((opcode == MC_RPC_PUT_START || opcode == MC_RPC_UPSERT_START) && k.resp.code == 0) {
            for (size_t i = 0; i < k.resp.n_results && !k.resp.offload_wait_ms; i++) {
                if (k.resp.results[i]->code == MC_ERR_NO_AVAILABLE_HANDLE)
                    k.resp.offload_wait_ms = mc_master_put_wait_ms(k.master, req->sizes[i]);
            }
        }
    }

    rpc_count_keys(k.master, opcode, &k.resp, req->n_keys);
    if (discards) {
        uint64_t last = mc_master_offload_deletion_seq(k.master);
        k.resp.deletions_from = last > del_seq ? del_seq + 1 : 0;
        k.resp.deletions_to = last > del_seq ? last : 0;
    }
    int rc = mc_rpc_conn_reply(c, opcode, id, &k.resp.base, rpc_keys_code(&k.resp) == 0);
    if (rc == MC_ERR_BUFFER_OVERFLOW) {
        MC_WARN("RPC: the reply to %s from %s would exceed %u bytes; refusing the batch of %zu",
                mc_rpc_methods[mc_rpc_method_index(opcode)].name, mc_rpc_conn_peer(c),
                MC_RPC_MAX_BODY, req->n_keys);
        rpc_undo_starts(&k);
        Mc__KeysResponse small = MC__KEYS_RESPONSE__INIT;
        small.code = MC_ERR_BUFFER_OVERFLOW;
        rc = mc_rpc_conn_reply(c, opcode, id, &small.base, 0);
    }
    rpc_arena_free(&k.arena);
    mc__keys_request__free_unpacked(req, NULL);
    return rc;
}

/* ---- handlers: offload ------------------------------------------------------------------- */

/* A heartbeat reply being filled by the master's callbacks (arena memory). */
typedef struct rpc_heartbeat_fill {
    rpc_arena_t *arena;
    Mc__OffloadHeartbeatResponse *resp;
    size_t task_cap, del_cap;
} rpc_heartbeat_fill_t;

static int rpc_heartbeat_task(void *arg, const mc_offload_task_desc_t *t)
{
    rpc_heartbeat_fill_t *f = arg;
    Mc__OffloadTask *p = rpc_arena_alloc(f->arena, sizeof(*p));
    char *key = rpc_arena_strdup(f->arena, t->key);
    if (!p || !key || f->resp->n_tasks >= f->task_cap)
        return -1;
    Mc__OffloadTask init = MC__OFFLOAD_TASK__INIT;
    *p = init;
    p->task_id = t->task_id;
    p->key = key;
    p->size = t->size;
    p->address = t->address;
    p->version = t->version;
    p->has_checksum = t->has_checksum ? 1 : 0;
    p->checksum = t->checksum;
    f->resp->tasks[f->resp->n_tasks++] = p;
    return 0;
}

static int rpc_heartbeat_delete(void *arg, const mc_disk_file_desc_t *d)
{
    rpc_heartbeat_fill_t *f = arg;
    Mc__DiskFile *p = rpc_arena_alloc(f->arena, sizeof(*p));
    char *key = rpc_arena_strdup(f->arena, d->key);
    if (!p || !key || f->resp->n_deletions >= f->del_cap)
        return -1;
    Mc__DiskFile init = MC__DISK_FILE__INIT;
    *p = init;
    p->key = key;
    p->version = d->version;
    p->size = d->size;
    f->resp->deletions[f->resp->n_deletions++] = p;
    return 0;
}

static int rpc_offloader_info(const Mc__OffloadHeartbeatRequest *req, mc_offloader_info_t *info)
{
    memset(info, 0, sizeof(*info));
    if (strlen(req->fs_type) >= sizeof(info->fs_type) ||
        strlen(req->storage_id) >= sizeof(info->storage_id) ||
        strlen(req->root_dir) >= sizeof(info->root_dir) ||
        strlen(req->endpoint) >= sizeof(info->endpoint))
        return MC_ERR_INVALID_PARAMS;
    info->backend = req->backend;
    strcpy(info->fs_type, req->fs_type);
    strcpy(info->storage_id, req->storage_id);
    strcpy(info->root_dir, req->root_dir);
    strcpy(info->endpoint, req->endpoint);
    info->offloading = req->offloading;
    info->healthy = req->healthy;
    info->capacity_bytes = req->capacity_bytes;
    info->used_bytes = req->used_bytes;
    info->resync_done = req->resync_done;
    return 0;
}

static int handle_offload_heartbeat(rpc_conn_t *c, uint16_t opcode, uint64_t id,
                                    const uint8_t *body, size_t len)
{
    Mc__OffloadHeartbeatRequest *req =
        rpc_decode(&mc__offload_heartbeat_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    Mc__OffloadHeartbeatResponse resp = MC__OFFLOAD_HEARTBEAT_RESPONSE__INIT;
    rpc_arena_t arena = {0};
    char msg[512] = "";
    mc_offloader_info_t info;
    rpc_heartbeat_fill_t fill = {&arena, &resp, req->max_tasks, req->max_deletions};
    if (fill.task_cap > RPC_MAX_HEARTBEAT_TASKS)
        fill.task_cap = RPC_MAX_HEARTBEAT_TASKS;
    if (fill.del_cap > RPC_MAX_HEARTBEAT_DELETIONS)
        fill.del_cap = RPC_MAX_HEARTBEAT_DELETIONS;
    resp.tasks = rpc_arena_alloc(&arena, (fill.task_cap + 1) * sizeof(*resp.tasks));
    resp.deletions = rpc_arena_alloc(&arena, (fill.del_cap + 1) * sizeof(*resp.deletions));
    if (!resp.tasks || !resp.deletions) {
        resp.code = MC_ERR_INTERNAL_ERROR;
    } else if (req->n_inflight > RPC_MAX_INFLIGHT || rpc_offloader_info(req, &info) != 0) {
        resp.code = MC_ERR_INVALID_PARAMS;
        snprintf(msg, sizeof(msg), "malformed offload heartbeat");
    } else {
        mc_offload_heartbeat_out_t out;
        resp.code = mc_master_offload_heartbeat(
            mc_rpc_conn_master(c), req->client_id, &info, req->leaving, req->inflight,
            req->n_inflight, fill.task_cap, fill.del_cap, rpc_heartbeat_task, rpc_heartbeat_delete,
            &fill, &out, msg, sizeof(msg));
        resp.resync = out.resync;
        resp.rescan = out.rescan;
        resp.remaining = out.remaining;
        resp.lease_ms = out.lease_ms;
        resp.promotions = out.promotions;
    }
    resp.message = msg;
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    rpc_arena_free(&arena);
    mc__offload_heartbeat_request__free_unpacked(req, NULL);
    return rc;
}

/* Replies with per-item codes; `codes` of n items (may be NULL when code != 0). */
static int rpc_reply_codes(rpc_conn_t *c, uint16_t opcode, uint64_t id, int code, const int *codes,
                           size_t n)
{
    Mc__CodesResponse resp = MC__CODES_RESPONSE__INIT;
    int32_t *v = NULL;
    resp.code = code;
    if (code == 0 && n > 0) {
        v = malloc(n * sizeof(*v));
        if (!v)
            return MC_ERR_INTERNAL_ERROR;
        for (size_t i = 0; i < n; i++)
            v[i] = codes[i];
        resp.codes = v;
        resp.n_codes = n;
    }
    int ok = code == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = codes[i] == 0;
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, ok);
    free(v);
    return rc;
}

static int handle_notify_offload(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                 size_t len)
{
    Mc__NotifyOffloadRequest *req = rpc_decode(&mc__notify_offload_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    size_t n = req->n_results;
    mc_offload_result_t *r = calloc(n ? n : 1, sizeof(*r));
    int *codes = calloc(n ? n : 1, sizeof(*codes));
    int code = !r || !codes           ? MC_ERR_INTERNAL_ERROR
               : n > MC_RPC_MAX_BATCH ? MC_ERR_INVALID_PARAMS
                                      : 0;
    for (size_t i = 0; code == 0 && i < n; i++) {
        const Mc__OffloadResult *p = req->results[i];
        r[i] = (mc_offload_result_t){p->task_id, p->key,          p->version, p->size,
                                     p->code,    p->has_checksum, p->checksum};
    }
    if (code == 0)
        code = mc_master_offload_notify(mc_rpc_conn_master(c), req->client_id, r, n, codes);
    int rc = rpc_reply_codes(c, opcode, id, code, codes, n);
    free(r);
    free(codes);
    mc__notify_offload_request__free_unpacked(req, NULL);
    return rc;
}

static int handle_evict_disk(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                             size_t len)
{
    Mc__EvictDiskRequest *req = rpc_decode(&mc__evict_disk_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    size_t n = req->n_files;
    mc_disk_file_desc_t *f = calloc(n ? n : 1, sizeof(*f));
    int *codes = calloc(n ? n : 1, sizeof(*codes));
    int code = !f || !codes           ? MC_ERR_INTERNAL_ERROR
               : n > MC_RPC_MAX_BATCH ? MC_ERR_INVALID_PARAMS
                                      : 0;
    for (size_t i = 0; code == 0 && i < n; i++)
        f[i] =
            (mc_disk_file_desc_t){req->files[i]->key, req->files[i]->version, req->files[i]->size};
    if (code == 0)
        code = mc_master_evict_disk_replicas(mc_rpc_conn_master(c), req->client_id, f, n, codes);
    mc_master_count_op(mc_rpc_conn_master(c), MC_OP_EVICT_DISK_REPLICA, code != 0);
    int rc = rpc_reply_codes(c, opcode, id, code, codes, n);
    free(f);
    free(codes);
    mc__evict_disk_request__free_unpacked(req, NULL);
    return rc;
}

static int handle_deletions_pending(rpc_conn_t *c, uint16_t opcode, uint64_t id,
                                    const uint8_t *body, size_t len)
{
    Mc__DeletionsPendingRequest *req = mc__deletions_pending_request__unpack(NULL, len, body);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    Mc__DeletionsPendingResponse resp = MC__DELETIONS_PENDING_RESPONSE__INIT;
    resp.code = req->n_keys > MC_RPC_MAX_BATCH
                    ? MC_ERR_INVALID_PARAMS
                    : mc_master_offload_deletions_pending(
                          mc_rpc_conn_master(c), (const char *const *)req->keys, req->n_keys,
                          req->from_seq, req->to_seq, &resp.pending);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    mc__deletions_pending_request__free_unpacked(req, NULL);
    return rc;
}

/* ---- promotion (promotion.c) ------------------------------------------------------------ */

typedef struct rpc_promotion_fill {
    rpc_arena_t *arena;
    Mc__PromotionTakeResponse *resp;
    size_t cap;
} rpc_promotion_fill_t;

static int rpc_promotion_task(void *arg, const mc_promotion_task_desc_t *t)
{
    rpc_promotion_fill_t *f = arg;
    Mc__PromotionTask *p = rpc_arena_alloc(f->arena, sizeof(*p));
    char *key = rpc_arena_strdup(f->arena, t->key);
    if (!p || !key || f->resp->n_tasks >= f->cap)
        return -1;
    Mc__PromotionTask init = MC__PROMOTION_TASK__INIT;
    *p = init;
    p->task_id = t->task_id;
    p->key = key;
    p->size = t->size;
    p->version = t->version;
    p->address = t->address;
    p->has_checksum = t->has_checksum ? 1 : 0;
    p->checksum = t->checksum;
    p->fence_token = t->fence_token;
    p->epoch = t->epoch;
    f->resp->tasks[f->resp->n_tasks++] = p;
    return 0;
}

static int handle_promotion_take(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                 size_t len)
{
    Mc__PromotionTakeRequest *req = rpc_decode(&mc__promotion_take_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    Mc__PromotionTakeResponse resp = MC__PROMOTION_TAKE_RESPONSE__INIT;
    rpc_arena_t arena = {0};
    rpc_promotion_fill_t fill = {&arena, &resp, req->max_tasks};
    if (fill.cap > RPC_MAX_HEARTBEAT_TASKS)
        fill.cap = RPC_MAX_HEARTBEAT_TASKS;
    resp.tasks = rpc_arena_alloc(&arena, (fill.cap + 1) * sizeof(*resp.tasks));
    int n = resp.tasks ? mc_master_promotion_take(mc_rpc_conn_master(c), req->client_id, fill.cap,
                                                  rpc_promotion_task, &fill)
                       : MC_ERR_INTERNAL_ERROR;
    resp.code = n < 0 ? n : 0;
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    rpc_arena_free(&arena);
    mc__promotion_take_request__free_unpacked(req, NULL);
    return rc;
}

static int handle_promotion_result(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                   size_t len)
{
    Mc__PromotionResultRequest *req =
        rpc_decode(&mc__promotion_result_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    int code = mc_master_promotion_result(mc_rpc_conn_master(c), req->client_id, req->task_id,
                                          req->key, req->code);
    int rc = rpc_reply_codes(c, opcode, id, code, NULL, 0);
    mc__promotion_result_request__free_unpacked(req, NULL);
    return rc;
}

/* ---- replica copy/move tasks and replica clear (task_manager.h) -------------------------- */

static int handle_create_task(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                              size_t len)
{
    Mc__TaskCreateRequest *req = rpc_decode(&mc__task_create_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    mc_master_t *m = mc_rpc_conn_master(c);
    Mc__TaskCreateResponse resp = MC__TASK_CREATE_RESPONSE__INIT;
    char task_id[MC_TASK_ID_LEN + 1] = "";
    int copy = opcode == MC_RPC_CREATE_COPY_TASK;
    if (copy)
        resp.code = mc_master_create_copy_task(m, req->key, (const char *const *)req->targets,
                                               req->n_targets, task_id);
    else
        resp.code = req->n_targets != 1 ? MC_ERR_INVALID_PARAMS
                                        : mc_master_create_move_task(m, req->key, req->source,
                                                                     req->targets[0], task_id);
    resp.task_id = task_id;
    mc_master_count_op(m, copy ? MC_OP_CREATE_COPY_TASK : MC_OP_CREATE_MOVE_TASK, resp.code != 0);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    mc__task_create_request__free_unpacked(req, NULL);
    return rc;
}

static int handle_query_task(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                             size_t len)
{
    Mc__TaskQueryRequest *req = rpc_decode(&mc__task_query_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    mc_master_t *m = mc_rpc_conn_master(c);
    Mc__TaskQueryResponse resp = MC__TASK_QUERY_RESPONSE__INIT;
    mc_task_info_t info;
    memset(&info, 0, sizeof(info));
    resp.code = mc_master_query_task(m, req->task_id, &info);
    resp.id = info.id;
    resp.type = (int32_t)info.type;
    resp.status = (int32_t)info.status;
    resp.created_at_ms_epoch = info.created_at_ms_epoch;
    resp.last_updated_at_ms_epoch = info.last_updated_at_ms_epoch;
    resp.assigned_client = info.assigned_client;
    resp.message = info.message;
    mc_master_count_op(m, MC_OP_QUERY_TASK, resp.code != 0);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    mc__task_query_request__free_unpacked(req, NULL);
    return rc;
}

typedef struct rpc_fetch {
    rpc_arena_t arena;
    Mc__TaskAssignment *items;
    Mc__TaskAssignment **ptrs;
    size_t n;
    int failed;
} rpc_fetch_t;

static int rpc_fetch_task(void *arg, const mc_task_assignment_t *a)
{
    rpc_fetch_t *f = arg;
    Mc__TaskAssignment *t = &f->items[f->n];
    Mc__TaskAssignment init = MC__TASK_ASSIGNMENT__INIT;
    *t = init;
    Mc__KeyResult holder = MC__KEY_RESULT__INIT;
    t->id = rpc_arena_strdup(&f->arena, a->id);
    t->key = rpc_arena_strdup(&f->arena, a->key);
    t->type = (int32_t)a->type;
    t->size = a->size;
    t->source_address = a->source_address;
    t->has_checksum = a->has_checksum ? 1 : 0;
    t->checksum = a->checksum;
    if (!t->id || !t->key || rpc_fill_replicas(&f->arena, &holder, a->targets, a->ntargets) != 0) {
        /* The task stays PROCESSING and times out: the executor never heard of it. */
        f->failed = 1;
        return 1;
    }
    t->targets = holder.replicas;
    t->n_targets = holder.n_replicas;
    f->ptrs[f->n++] = t;
    return 0;
}

static int handle_fetch_tasks(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                              size_t len)
{
    Mc__FetchTasksRequest *req = rpc_decode(&mc__fetch_tasks_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    mc_master_t *m = mc_rpc_conn_master(c);
    Mc__FetchTasksResponse resp = MC__FETCH_TASKS_RESPONSE__INIT;
    rpc_fetch_t f = {{NULL}, NULL, NULL, 0, 0};
    size_t max = req->batch_size < MC_TASK_MAX_BATCH ? req->batch_size : MC_TASK_MAX_BATCH;
    f.items = rpc_arena_alloc(&f.arena, (max ? max : 1) * sizeof(*f.items));
    f.ptrs = rpc_arena_alloc(&f.arena, (max ? max : 1) * sizeof(*f.ptrs));
    int n = !f.items || !f.ptrs ? MC_ERR_INTERNAL_ERROR
                                : mc_master_fetch_tasks(m, req->client_id, max, rpc_fetch_task, &f);
    resp.code = n < 0 ? n : f.failed ? MC_ERR_INTERNAL_ERROR : 0;
    resp.tasks = f.ptrs;
    resp.n_tasks = f.n;
    mc_master_count_op(m, MC_OP_FETCH_TASKS, resp.code != 0);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    rpc_arena_free(&f.arena);
    mc__fetch_tasks_request__free_unpacked(req, NULL);
    return rc;
}

static int handle_complete_task(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                size_t len)
{
    Mc__TaskCompleteRequest *req = rpc_decode(&mc__task_complete_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    mc_master_t *m = mc_rpc_conn_master(c);
    Mc__StatusResponse resp = MC__STATUS_RESPONSE__INIT;
    resp.code = mc_master_complete_task(m, req->client_id, req->task_id,
                                        (mc_task_status_t)req->status, req->error, req->message);
    mc_master_count_op(m, MC_OP_UPDATE_TASK, resp.code != 0);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    mc__task_complete_request__free_unpacked(req, NULL);
    return rc;
}

static int handle_replica_clear(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                size_t len)
{
    if (mc_pb_count_field(body, len, 2, MC_RPC_MAX_BATCH + 1) > MC_RPC_MAX_BATCH) {
        Mc__ReplicaClearResponse big = MC__REPLICA_CLEAR_RESPONSE__INIT;
        big.code = MC_ERR_INVALID_PARAMS;
        mc_master_count_batch(mc_rpc_conn_master(c), MC_BATCH_REPLICA_CLEAR, 0, 0);
        return mc_rpc_conn_reply(c, opcode, id, &big.base, 0);
    }
    Mc__ReplicaClearRequest *req = rpc_decode(&mc__replica_clear_request__descriptor, body, len);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    mc_master_t *m = mc_rpc_conn_master(c);
    Mc__ReplicaClearResponse resp = MC__REPLICA_CLEAR_RESPONSE__INIT;
    size_t n = req->n_keys;
    int *cleared = calloc(n ? n : 1, sizeof(*cleared));
    char **out = calloc(n ? n : 1, sizeof(*out));
    resp.code = !cleared || !out ? MC_ERR_INTERNAL_ERROR
                                 : mc_master_batch_replica_clear(m, req->client_id,
                                                                 (const char *const *)req->keys, n,
                                                                 req->segment_name, cleared);
    size_t nc = 0;
    for (size_t i = 0; resp.code == 0 && i < n; i++) {
        if (cleared[i])
            out[nc++] = req->keys[i];
    }
    resp.cleared = out;
    resp.n_cleared = nc;
    mc_master_count_batch(m, MC_BATCH_REPLICA_CLEAR, n, resp.code == 0 ? n - nc : n);
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    free(cleared);
    free(out);
    mc__replica_clear_request__free_unpacked(req, NULL);
    return rc;
}

/* ---- method table ------------------------------------------------------------------------ */

/* ---- re-mount verification of restored extents (journal.h) ----------------------------- */

#define VERIFY_PAGE_MAX 1024

static int handle_restore_verify(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                 size_t len)
{
    Mc__RestoreVerifyRequest *req = mc__restore_verify_request__unpack(NULL, len, body);
    if (!req)
        return MC_ERR_DESERIALIZE_FAIL;
    Mc__RestoreVerifyResponse resp = MC__RESTORE_VERIFY_RESPONSE__INIT;
    mc_master_t *m = mc_rpc_conn_master(c);
    mc_restore_extent_t *ext = NULL;
    Mc__RestoreExtent *pb = NULL, **pbp = NULL;
    uint8_t *ok = NULL;
    if (!req->client_id || !req->segment_id) {
        resp.code = MC_ERR_INVALID_PARAMS;
    } else if (opcode == MC_RPC_RESTORE_VERIFY_FETCH) {
        ext = calloc(VERIFY_PAGE_MAX, sizeof(*ext));
        pb = calloc(VERIFY_PAGE_MAX, sizeof(*pb));
        pbp = calloc(VERIFY_PAGE_MAX, sizeof(*pbp));
        size_t n = 0;
        resp.code =
            !ext || !pb || !pbp
                ? MC_ERR_INTERNAL_ERROR
                : mc_master_restore_verify_fetch(m, req->client_id, req->segment_id, req->from, ext,
                                                 VERIFY_PAGE_MAX, &n, &resp.next);
        for (size_t i = 0; resp.code == 0 && i < n; i++) {
            mc__restore_extent__init(&pb[i]);
            pb[i].id = ext[i].id;
            pb[i].address = ext[i].address;
            pb[i].size = ext[i].size;
            pb[i].checksum = ext[i].checksum;
            pbp[i] = &pb[i];
        }
        resp.n_extents = resp.code == 0 ? n : 0;
        resp.extents = pbp;
    } else if (req->n_ids != req->n_ok || req->n_ids > VERIFY_PAGE_MAX) {
        resp.code = MC_ERR_INVALID_PARAMS;
    } else {
        ok = calloc(req->n_ids + 1, 1);
        for (size_t i = 0; ok && i < req->n_ids; i++)
            ok[i] = req->ok[i] ? 1 : 0;
        resp.code = !ok ? MC_ERR_INTERNAL_ERROR
                        : mc_master_restore_verify_confirm(m, req->client_id, req->segment_id,
                                                           req->ids, ok, req->n_ids, NULL);
    }
    int rc = mc_rpc_conn_reply(c, opcode, id, &resp.base, resp.code == 0);
    free(ext);
    free(pb);
    free(pbp);
    free(ok);
    mc__restore_verify_request__free_unpacked(req, NULL);
    return rc;
}

#define X(id, op, name, handler) {MC_RPC_##id, name, handle_##handler},
const mc_rpc_method_t mc_rpc_methods[MC_RPC_METHOD_COUNT] = {MC_RPC_METHOD_LIST(X)};
#undef X

/* The public start calls live here, beside the table they hand to the transport: the
 * transport dispatches through it and never names a handler. */
int mc_rpc_server_start_limited(mc_master_t *master, const char *host, int port, int threads,
                                const mc_rpc_limits_t *limits, const mc_auth_t *auth,
                                mc_rpc_server_t **out)
{
    return mc_rpc_transport_start(master, host, port, threads, limits, auth, mc_rpc_methods, out);
}

int mc_rpc_server_start(mc_master_t *master, const char *host, int port, int threads,
                        const mc_auth_t *auth, mc_rpc_server_t **out)
{
    return mc_rpc_server_start_limited(master, host, port, threads, NULL, auth, out);
}
