/*
 * rpc.h — request/response RPC over the frame protocol (frame.h), used between store clients and
 * mooncake_master. A call sends one frame (opcode, request id, protobuf body from store.proto)
 * and reads one reply frame with the same request id and opcode | MC_RPC_REPLY.
 *
 * The client side is a small pool of blocking connections to one server address, safe to share
 * between threads: a call borrows an idle connection (or opens one, connect timeout 3 s), and a
 * connection that failed is closed, never reused. An idle connection the server closed (idle
 * timeout) is noticed before reuse and dropped. A call fails with MC_ERR_RPC_FAIL when the
 * server is unreachable or closed the connection, MC_ERR_RPC_TIMEOUT when it did not answer in
 * the call timeout (default 10 s), MC_ERR_DESERIALIZE_FAIL for a malformed reply,
 * MC_ERR_ILLEGAL_CLIENT when the server requires a cluster secret this client does not prove.
 */
#ifndef MC_WIRE_RPC_H
#define MC_WIRE_RPC_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Master RPC methods: the one list (an X-macro, as MC_ERROR_LIST) from which the opcode enum,
 * mc_rpc_method_name, MC_RPC_METHOD_COUNT and the master's handler table are derived, so a method
 * is added in one line. X(ID, opcode, "UpstreamName", handler): MC_RPC_<ID> = opcode on the wire
 * (values never change); the name is upstream's RPC name (the `method` label of the metrics);
 * `handler` names the master's handle_<handler> (src/master/rpc_handlers.c) and means nothing
 * here. The list's order is the order of the per-method counters and metrics. Request body /
 * reply body (store.proto) beside each.
 */
#define MC_RPC_METHOD_LIST(X)                                                                      \
    X(SERVICE_READY, 100, "ServiceReady", service_ready) /* (empty) / ServiceReadyResponse */      \
    X(PING, 101, "Ping", ping)                           /* PingRequest / PingResponse */          \
    X(MOUNT_SEGMENT, 102, "MountSegment", segments)      /* SegmentRequest / StatusResponse */     \
    X(REMOUNT_SEGMENT, 103, "ReMountSegment", segments)  /* SegmentRequest / StatusResponse */     \
    X(UNMOUNT_SEGMENT, 104, "UnmountSegment", segments)  /* SegmentRequest (ids) / Status */       \
    /* SegmentRequest (ids, grace_period_ms) / StatusResponse */                                   \
    X(GRACEFUL_UNMOUNT_SEGMENT, 170, "GracefulUnmountSegment", segments)                           \
    /* KeysRequest (keys, sizes, config) / KeysResponse (replicas); End and Revoke alike */        \
    X(PUT_START, 110, "PutStart", keys)                                                            \
    X(PUT_END, 111, "PutEnd", keys)                                                                \
    X(PUT_REVOKE, 112, "PutRevoke", keys)                                                          \
    X(UPSERT_START, 113, "UpsertStart", keys)                                                      \
    X(UPSERT_END, 114, "UpsertEnd", keys)                                                          \
    X(UPSERT_REVOKE, 115, "UpsertRevoke", keys)                                                    \
    /* KeysRequest / KeysResponse (replicas, size, lease_ttl_ms) */                                \
    X(GET_REPLICA_LIST, 120, "GetReplicaList", keys)                                               \
    X(EXIST_KEY, 121, "ExistKey", keys) /* KeysRequest / KeysResponse (exists) */                  \
    /* KeysRequest (keys, lease_ids) / KeysResponse (count) */                                     \
    X(RELEASE_LEASE, 122, "ReleaseReadLease", keys)                                                \
    X(REMOVE, 130, "Remove", keys)                 /* KeysRequest (keys, force) / KeysResponse */  \
    X(REMOVE_ALL, 131, "RemoveAll", keys)          /* KeysRequest (force) / (count) */             \
    X(REMOVE_BY_REGEX, 132, "RemoveByRegex", keys) /* KeysRequest (regex, force) / (count) */      \
    /* offload: client -> master. OffloadHeartbeatRequest / OffloadHeartbeatResponse */            \
    X(OFFLOAD_HEARTBEAT, 140, "OffloadObjectHeartbeat", offload_heartbeat)                         \
    /* NotifyOffloadRequest / CodesResponse */                                                     \
    X(NOTIFY_OFFLOAD_RESULT, 141, "NotifyOffloadSuccess", notify_offload)                          \
    /* EvictDiskRequest / CodesResponse */                                                         \
    X(EVICT_DISK_REPLICA, 142, "BatchEvictDiskReplica", evict_disk)                                \
    /* mooncake-c: DeletionsPendingRequest / DeletionsPendingResponse (a remove or upsert          \
     * waits until the old value's files are confirmed gone before it is acknowledged) */          \
    X(OFFLOAD_DELETIONS_PENDING, 143, "OffloadDeletionsPending", deletions_pending)                \
    /* promotion of disk-only objects back to memory: client -> master (mooncake-c; upstream's     \
     * PromotionAllocStart and NotifyPromotionSuccess/Failure). PromotionTakeRequest /             \
     * PromotionTakeResponse; PromotionResultRequest / CodesResponse */                            \
    X(PROMOTION_TAKE, 180, "PromotionAllocStart", promotion_take)                                  \
    X(PROMOTION_RESULT, 181, "NotifyPromotionResult", promotion_result)                            \
    /* replica copy/move tasks and replica clear (task_manager.h): TaskCreateRequest /             \
     * TaskCreateResponse, TaskQueryRequest / TaskQueryResponse, FetchTasksRequest /               \
     * FetchTasksResponse, TaskCompleteRequest / StatusResponse, ReplicaClearRequest /             \
     * ReplicaClearResponse */                                                                     \
    X(CREATE_COPY_TASK, 160, "CreateCopyTask", create_task)                                        \
    X(CREATE_MOVE_TASK, 161, "CreateMoveTask", create_task)                                        \
    X(QUERY_TASK, 162, "QueryTask", query_task)                                                    \
    X(FETCH_TASKS, 163, "FetchTasks", fetch_tasks)                                                 \
    X(MARK_TASK_TO_COMPLETE, 164, "MarkTaskToComplete", complete_task)                             \
    X(BATCH_REPLICA_CLEAR, 165, "BatchReplicaClear", replica_clear)                                \
    /* re-mount verification of restored extents (src/master/journal.h; mooncake-c): the           \
     * owner fetches them and confirms those whose bytes match (RestoreVerifyRequest /             \
     * Response) */                                                                                \
    X(RESTORE_VERIFY_FETCH, 230, "RestoreVerifyFetch", restore_verify)                             \
    X(RESTORE_VERIFY_CONFIRM, 231, "RestoreVerifyConfirm", restore_verify)

/* Offload reads, client -> the client owning a local-disk replica (never the master, so not in
 * the master's list): FetchRequest / FetchResponse, ReleaseRequest / CodesResponse. */
#define MC_RPC_PEER_METHOD_LIST(X)                                                                 \
    X(OFFLOAD_FETCH, 150, "OffloadFetch", offload_fetch)                                           \
    X(OFFLOAD_RELEASE, 151, "OffloadRelease", offload_release)

#define MC_RPC_X_ENUM(id, op, name, handler) MC_RPC_##id = op,
enum mc_rpc_opcode { MC_RPC_METHOD_LIST(MC_RPC_X_ENUM) MC_RPC_PEER_METHOD_LIST(MC_RPC_X_ENUM) };
#undef MC_RPC_X_ENUM

/* Number of master methods (entries of MC_RPC_METHOD_LIST). */
#define MC_RPC_X_ONE(id, op, name, handler) +1
enum { MC_RPC_METHOD_COUNT = 0 MC_RPC_METHOD_LIST(MC_RPC_X_ONE) };
#undef MC_RPC_X_ONE

#define MC_RPC_REPLY 0x8000u
#define MC_RPC_MAX_BODY (64u << 20)
#define MC_RPC_DEFAULT_TIMEOUT_MS 10000

/* Upstream's name of a method ("PutStart", "GetReplicaList", ...), or "Unknown". Static string. */
const char *mc_rpc_method_name(uint16_t opcode);
/* Index of a master method in MC_RPC_METHOD_LIST (the order of its counters), or -1 for any
 * other opcode. */
int mc_rpc_method_index(uint16_t opcode);

typedef struct mc_rpc_client mc_rpc_client_t;

/* address: "host:port". Does not connect yet. */
int mc_rpc_client_create(const char *address, int timeout_ms, mc_rpc_client_t **out);
/*
 * A client that follows an elected master (HA on etcd): resolve(arg, out, cap) writes the
 * current leader's "host:port" into out and returns 0, or returns a negative code when no leader
 * is known. It is asked before the first connection and after a call fails in transport
 * (RPC_FAIL / RPC_TIMEOUT); when the address changed, the call is retried once at the new one
 * (the store's masters never execute a request they do not answer while not leading, so a retry
 * never runs a request twice). resolve may be called from any calling thread at once; arg is
 * borrowed and must outlive the client.
 */
typedef int (*mc_rpc_resolve_fn)(void *arg, char *out, size_t cap);
int mc_rpc_client_create_resolved(mc_rpc_resolve_fn resolve, void *arg, int timeout_ms,
                                  mc_rpc_client_t **out);
/* Re-resolves now (a periodic check for a new leader): 1 when the address changed, 0 when not
 * (or the client has no resolver), a negative code when resolving failed. */
int mc_rpc_client_follow(mc_rpc_client_t *c);
/* The address in use, "host:port"; MC_ERR_RPC_FAIL while none is resolved. */
int mc_rpc_client_address(mc_rpc_client_t *c, char *out, size_t cap);
void mc_rpc_client_destroy(mc_rpc_client_t *c);
/*
 * Connections made from now on run the cluster-secret handshake (auth.h) as `service` ("master",
 * "offload") before their first call; `auth` is borrowed and must outlive the client. A call on a
 * server that refuses this client returns MC_ERR_ILLEGAL_CLIENT. Call before the first call.
 */
typedef struct mc_auth mc_auth_t;
void mc_rpc_client_set_auth(mc_rpc_client_t *c, const mc_auth_t *auth, const char *service);
/* The local address (text) of a connection to the server: the address this host reaches it
 * from. 0, or the connect error. */
int mc_rpc_client_local_host(mc_rpc_client_t *c, char *out, size_t cap);
/* Closes every pooled connection (after a server restart the next call reconnects). */
void mc_rpc_client_reset(mc_rpc_client_t *c);

/*
 * One call: sends `body` (len bytes) with `opcode`; on success *reply is a malloc'd buffer
 * (caller frees) of *reply_len bytes holding the reply's protobuf body. Thread-safe.
 */
int mc_rpc_call(mc_rpc_client_t *c, uint16_t opcode, const uint8_t *body, size_t len,
                uint8_t **reply, size_t *reply_len);
/*
 * One call with protobuf bodies: packs req (NULL: an empty body), calls, and decodes the reply as
 * reply_desc within the decoding budget (pb_decode.h). *resp is the caller's to free with
 * protobuf_c_message_free_unpacked. 0, a transport code of mc_rpc_call, MC_ERR_DESERIALIZE_FAIL,
 * MC_ERR_INTERNAL_ERROR (out of memory). Thread-safe.
 */
int mc_rpc_call_pb(mc_rpc_client_t *c, uint16_t opcode, const ProtobufCMessage *req,
                   const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **resp);
/*
 * The same, telling whether the answer may not be the first execution's: *elsewhere (not NULL)
 * is set to 1 when the reply came from another master than an earlier attempt of this call that
 * had sent the whole request and then lost its connection (the leader changed meanwhile). That
 * earlier master may have executed the request, committed it and died before answering: the
 * new leader's answer then says what a second execution finds, not what the first did (a remove
 * retried finds nothing to remove). Else 0.
 */
int mc_rpc_call_ex(mc_rpc_client_t *c, uint16_t opcode, const uint8_t *body, size_t len,
                   uint8_t **reply, size_t *reply_len, int *elsewhere);
int mc_rpc_call_pb_ex(mc_rpc_client_t *c, uint16_t opcode, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **resp,
                      int *elsewhere);

#endif /* MC_WIRE_RPC_H */
