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

/* Master RPC opcodes. Request body / reply body (store.proto). */
enum mc_rpc_opcode {
    MC_RPC_SERVICE_READY = 100,   /* (empty) / ServiceReadyResponse */
    MC_RPC_PING = 101,            /* PingRequest / PingResponse */
    MC_RPC_MOUNT_SEGMENT = 102,   /* SegmentRequest / StatusResponse */
    MC_RPC_REMOUNT_SEGMENT = 103, /* SegmentRequest / StatusResponse */
    MC_RPC_UNMOUNT_SEGMENT = 104, /* SegmentRequest (ids) / StatusResponse */
    MC_RPC_PUT_START = 110,       /* KeysRequest (keys, sizes, config) / KeysResponse (replicas) */
    MC_RPC_PUT_END = 111,         /* KeysRequest / KeysResponse */
    MC_RPC_PUT_REVOKE = 112,      /* KeysRequest / KeysResponse */
    MC_RPC_UPSERT_START = 113,
    MC_RPC_UPSERT_END = 114,
    MC_RPC_UPSERT_REVOKE = 115,
    MC_RPC_GET_REPLICA_LIST = 120, /* KeysRequest / KeysResponse (replicas, size, lease_ttl_ms) */
    MC_RPC_EXIST_KEY = 121,        /* KeysRequest / KeysResponse (exists) */
    MC_RPC_RELEASE_LEASE = 122,    /* KeysRequest (keys, lease_ids) / KeysResponse (count) */
    MC_RPC_REMOVE = 130,           /* KeysRequest (keys, force) / KeysResponse */
    MC_RPC_REMOVE_ALL = 131,       /* KeysRequest (force) / KeysResponse (count) */
    MC_RPC_REMOVE_BY_REGEX = 132,  /* KeysRequest (regex, force) / KeysResponse (count) */
    /* offload: client -> master */
    MC_RPC_OFFLOAD_HEARTBEAT = 140,     /* OffloadHeartbeatRequest / OffloadHeartbeatResponse */
    MC_RPC_NOTIFY_OFFLOAD_RESULT = 141, /* NotifyOffloadRequest / CodesResponse */
    MC_RPC_EVICT_DISK_REPLICA = 142,    /* EvictDiskRequest / CodesResponse */
    /* mooncake-c: DeletionsPendingRequest / DeletionsPendingResponse (a remove or upsert waits
     * until the old value's files are confirmed gone before it is acknowledged) */
    MC_RPC_OFFLOAD_DELETIONS_PENDING = 143,
    /* promotion of disk-only objects back to memory: client -> master (mooncake-c; upstream's
     * PromotionAllocStart and NotifyPromotionSuccess/Failure) */
    MC_RPC_PROMOTION_TAKE = 180,   /* PromotionTakeRequest / PromotionTakeResponse */
    MC_RPC_PROMOTION_RESULT = 181, /* PromotionResultRequest / CodesResponse */
    /* offload reads: client -> the client owning a local-disk replica (not the master) */
    MC_RPC_OFFLOAD_FETCH = 150,   /* FetchRequest / FetchResponse */
    MC_RPC_OFFLOAD_RELEASE = 151, /* ReleaseRequest / CodesResponse */
    /* replica copy/move tasks and replica clear (task_manager.h) */
    MC_RPC_CREATE_COPY_TASK = 160,      /* TaskCreateRequest / TaskCreateResponse */
    MC_RPC_CREATE_MOVE_TASK = 161,      /* TaskCreateRequest / TaskCreateResponse */
    MC_RPC_QUERY_TASK = 162,            /* TaskQueryRequest / TaskQueryResponse */
    MC_RPC_FETCH_TASKS = 163,           /* FetchTasksRequest / FetchTasksResponse */
    MC_RPC_MARK_TASK_TO_COMPLETE = 164, /* TaskCompleteRequest / StatusResponse */
    MC_RPC_BATCH_REPLICA_CLEAR = 165,   /* ReplicaClearRequest / ReplicaClearResponse */
    /* SegmentRequest (ids, grace_period_ms) / StatusResponse: upstream's GracefulUnmountSegment */
    MC_RPC_GRACEFUL_UNMOUNT_SEGMENT = 170,
    /* re-mount verification of restored extents (src/master/journal.h; mooncake-c): the owner
     * fetches them and confirms those whose bytes match (RestoreVerifyRequest / Response) */
    MC_RPC_RESTORE_VERIFY_FETCH = 230,
    MC_RPC_RESTORE_VERIFY_CONFIRM = 231,
};

#define MC_RPC_REPLY 0x8000u
#define MC_RPC_MAX_BODY (64u << 20)
#define MC_RPC_DEFAULT_TIMEOUT_MS 10000

/* Upstream's name of a method ("PutStart", "GetReplicaList", ...), or "Unknown". Static string. */
const char *mc_rpc_method_name(uint16_t opcode);

typedef struct mc_rpc_client mc_rpc_client_t;

/* address: "host:port". Does not connect yet. */
int mc_rpc_client_create(const char *address, int timeout_ms, mc_rpc_client_t **out);
/*
 * A client that follows an elected master (HA, issue 15): resolve(arg, out, cap) writes the
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
