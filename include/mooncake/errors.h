/*
 * errors.h — the store's error codes.
 *
 * Every mooncake-c function that can fail returns 0 or one of these negative codes. The names and
 * numbers are upstream Mooncake's `ErrorCode` (mooncake-store/include/types.h), so Python callers
 * and serving-framework connectors that key on them (-200 back-pressure, -704 miss, -706 leased,
 * -600 bad arguments) behave as they do against upstream.
 *
 * Integrity codes (a read returns an object's exact bytes or one of these, never other bytes):
 *   MC_ERR_CHECKSUM_MISMATCH (-801)  no replica of the object (memory or disk) matched the
 *       CRC32C its writer computed, even after one fresh lookup. Upstream's name for a checksum
 *       failure, so callers that already treat it as "data unusable, recompute" keep working; a
 *       vLLM/SGLang connector recomputes the KV blocks, exactly as on a miss.
 *   MC_ERR_LEASE_EXPIRED (-707)      a memory read finished after the read lease ran out: the
 *       memory may have been handed to another object meanwhile, so the bytes are not returned.
 *   MC_ERR_REPLICA_IS_NOT_READY (-703)  (put) another client's put of the key was still in
 *       progress after the bounded wait: its outcome is unknown, so this put is not acknowledged.
 *
 * Thread-safety: everything here is pure and may be called from any thread.
 */
#ifndef MOONCAKE_ERRORS_H
#define MOONCAKE_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X-macro: (NAME, value). One list feeds the enum and mc_error_name(). */
#define MC_ERROR_LIST(X)                                                                           \
    X(OK, 0)                                                                                       \
    X(INTERNAL_ERROR, -1)                                                                          \
    X(BUFFER_OVERFLOW, -10)                                                                        \
    X(SHARD_INDEX_OUT_OF_RANGE, -100)                                                              \
    X(SEGMENT_NOT_FOUND, -101)                                                                     \
    X(SEGMENT_ALREADY_EXISTS, -102)                                                                \
    X(CLIENT_NOT_FOUND, -103)                                                                      \
    X(NO_AVAILABLE_HANDLE, -200)                                                                   \
    X(INVALID_VERSION, -300)                                                                       \
    X(INVALID_KEY, -400)                                                                           \
    X(WRITE_FAIL, -500)                                                                            \
    X(INVALID_PARAMS, -600)                                                                        \
    X(ILLEGAL_CLIENT, -601)                                                                        \
    X(INVALID_WRITE, -700)                                                                         \
    X(INVALID_READ, -701)                                                                          \
    X(INVALID_REPLICA, -702)                                                                       \
    X(REPLICA_IS_NOT_READY, -703)                                                                  \
    X(OBJECT_NOT_FOUND, -704)                                                                      \
    X(OBJECT_ALREADY_EXISTS, -705)                                                                 \
    X(OBJECT_HAS_LEASE, -706)                                                                      \
    X(LEASE_EXPIRED, -707)                                                                         \
    X(OBJECT_HAS_REPLICATION_TASK, -708)                                                           \
    X(OBJECT_NO_REPLICATION_TASK, -709)                                                            \
    X(REPLICA_NOT_FOUND, -710)                                                                     \
    X(REPLICA_ALREADY_EXISTS, -711)                                                                \
    X(REPLICA_IS_GONE, -712)                                                                       \
    X(REPLICA_NOT_IN_LOCAL_MEMORY, -713)                                                           \
    X(OBJECT_REPLICA_BUSY, -714)                                                                   \
    X(TRANSFER_FAIL, -800)                                                                         \
    X(CHECKSUM_MISMATCH, -801)                                                                     \
    X(RPC_FAIL, -900)                                                                              \
    X(RPC_TIMEOUT, -901)                                                                           \
    X(ETCD_OPERATION_ERROR, -1000)                                                                 \
    X(ETCD_KEY_NOT_EXIST, -1001)                                                                   \
    X(ETCD_TRANSACTION_FAIL, -1002)                                                                \
    X(ETCD_CTX_CANCELLED, -1003)                                                                   \
    X(OPLOG_ENTRY_NOT_FOUND, -1004)                                                                \
    X(K8S_LEASE_OPERATION_ERROR, -1005)                                                            \
    X(K8S_LEASE_NOT_FOUND, -1006)                                                                  \
    X(INCOMPLETE_OPLOG_CATCH_UP, -1007)                                                            \
    X(UNAVAILABLE_IN_CURRENT_STATUS, -1010)                                                        \
    X(UNAVAILABLE_IN_CURRENT_MODE, -1011)                                                          \
    X(NOT_SUPPORTED, -1012)                                                                        \
    X(FILE_NOT_FOUND, -1100)                                                                       \
    X(FILE_OPEN_FAIL, -1101)                                                                       \
    X(FILE_READ_FAIL, -1102)                                                                       \
    X(FILE_WRITE_FAIL, -1103)                                                                      \
    X(FILE_INVALID_BUFFER, -1104)                                                                  \
    X(FILE_LOCK_FAIL, -1105)                                                                       \
    X(FILE_INVALID_HANDLE, -1106)                                                                  \
    X(BUCKET_NOT_FOUND, -1200)                                                                     \
    X(BUCKET_ALREADY_EXISTS, -1201)                                                                \
    X(KEYS_EXCEED_BUCKET_LIMIT, -1202)                                                             \
    X(KEYS_ULTRA_LIMIT, -1203)                                                                     \
    X(UNABLE_OFFLOAD, -1300)                                                                       \
    X(UNABLE_OFFLOADING, -1301)                                                                    \
    X(TASK_NOT_FOUND, -1400)                                                                       \
    X(TASK_PENDING_LIMIT_EXCEEDED, -1401)                                                          \
    X(JOB_NOT_FOUND, -1402)                                                                        \
    X(SERIALIZE_UNSUPPORTED, -1500)                                                                \
    X(SERIALIZE_FAIL, -1501)                                                                       \
    X(DESERIALIZE_FAIL, -1502)                                                                     \
    X(PERSISTENT_FAIL, -1503)                                                                      \
    X(DFS_NETWORK_TIMEOUT, -1600)                                                                  \
    X(DFS_SERVICE_UNAVAILABLE, -1601)                                                              \
    X(DFS_QUOTA_EXCEEDED, -1602)                                                                   \
    X(DFS_PERMISSION_DENIED, -1603)                                                                \
    X(DFS_STALE_HANDLE, -1604)                                                                     \
    X(DFS_PARTIAL_WRITE, -1605)                                                                    \
    X(TENANT_QUOTA_EXCEEDED, -1700)                                                                \
    X(TENANT_NOT_REGISTERED, -1701)                                                                \
    X(TENANT_NOT_EMPTY, -1702)

#define MC_ERROR_ENUM_ENTRY(name, value) MC_ERR_##name = (value),
typedef enum mc_error { MC_ERROR_LIST(MC_ERROR_ENUM_ENTRY) } mc_error_t;
#undef MC_ERROR_ENUM_ENTRY

/* MC_OK is the conventional spelling of success. */
#define MC_OK MC_ERR_OK

/*
 * The upstream name of `code` ("OBJECT_NOT_FOUND" for -704), or "UNKNOWN_ERROR" for a number that
 * is not a store code. The returned string is static; never free it.
 */
const char *mc_error_name(int code);

/* 1 when `code` is one of the codes above, else 0. */
int mc_error_is_known(int code);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_ERRORS_H */
