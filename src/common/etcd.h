/*
 * etcd.h — a small etcd v3 client over etcd's JSON gateway (POST /v3/kv/range, /v3/kv/put,
 * /v3/kv/deleterange, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke), with
 * libcurl for HTTP and jansson for JSON. Debian ships no C etcd client, and the gateway is part of
 * every etcd v3 server (3.4: paths under /v3/). Keys and values are bytes (base64 on the wire).
 *
 * Users: master high availability (leader election, the operation log), clients that follow the
 * elected master, and the Transfer Engine's `etcd://` metadata (segment descriptors under a lease).
 *
 * Endpoints: "h1:2379;h2:2379" or "h1:2379,h2:2379", each optionally "http://h:p"; an "etcd://"
 * prefix on the whole list is accepted. A call tries the endpoint that answered last, then each
 * other one in turn, within the handle's timeout per attempt; an endpoint that refuses, times out
 * or answers 5xx is skipped. (A request that timed out may still have been applied by etcd: the
 * callers' writes are idempotent or guarded by a transaction compare.)
 *
 * Errors (mooncake/errors.h): MC_ERR_INVALID_PARAMS (bad endpoint list, NULL argument, key
 * longer than MC_ETCD_MAX_KEY, value longer than MC_ETCD_MAX_VALUE), MC_ERR_ETCD_KEY_NOT_EXIST
 * (get of an absent key), MC_ERR_ETCD_TRANSACTION_FAIL (a compare failed: nothing was written),
 * MC_ERR_ETCD_OPERATION_ERROR (no endpoint answered, or etcd answered an error: the log line
 * names the endpoint and etcd's message), MC_ERR_INTERNAL_ERROR (memory).
 *
 * Thread-safety: a handle may be used from any number of threads at once.
 */
#ifndef MC_COMMON_ETCD_H
#define MC_COMMON_ETCD_H

#include <stddef.h>
#include <stdint.h>

#define MC_ETCD_MAX_KEY 4096
#define MC_ETCD_MAX_VALUE (1u << 20) /* etcd's default request limit is 1.5 MiB */

typedef struct mc_etcd mc_etcd_t;

/* timeout_ms per attempt (connect + answer); <= 0 means 2000. */
int mc_etcd_create(const char *endpoints, int timeout_ms, mc_etcd_t **out);
void mc_etcd_destroy(mc_etcd_t *e);
/* The endpoint that answered last, "host:port" (for log lines); never NULL. */
const char *mc_etcd_current_endpoint(mc_etcd_t *e);

typedef struct mc_etcd_kv {
    char *key;      /* NUL-terminated copy of the key bytes */
    uint8_t *value; /* value_len bytes, followed by a NUL (not counted) */
    size_t value_len;
    int64_t create_revision, mod_revision, version;
    int64_t lease; /* 0: none */
} mc_etcd_kv_t;

/* Frees the strings of kvs[0..n) and, with free_array, the array itself. */
void mc_etcd_kv_free(mc_etcd_kv_t *kvs, size_t n, int free_array);

/* One key. *out filled (free with mc_etcd_kv_free(out, 1, 0)); *revision (may be NULL) = the
 * store's revision at the read. MC_ERR_ETCD_KEY_NOT_EXIST when absent. */
int mc_etcd_get(mc_etcd_t *e, const char *key, mc_etcd_kv_t *out, int64_t *revision);
/*
 * Keys in [from, to) in key order (to NULL: every key with prefix `from`), at most `limit`
 * (0 = no limit). *kvs malloc'd array of *n (free with mc_etcd_kv_free(kvs, n, 1)); *more = 1
 * when the limit cut the answer (may be NULL).
 */
int mc_etcd_range(mc_etcd_t *e, const char *from, const char *to, size_t limit, mc_etcd_kv_t **kvs,
                  size_t *n, int *more, int64_t *revision);
/* Put key = value[0..len), attached to lease (0 = none). *revision (may be NULL) = new revision. */
int mc_etcd_put(mc_etcd_t *e, const char *key, const void *value, size_t len, int64_t lease,
                int64_t *revision);
/* Deletes key (to NULL) or [key, to) (to "" is not allowed; for a prefix use
 * mc_etcd_delete_prefix). *deleted (may be NULL) = how many. Absent keys are not an error. */
int mc_etcd_delete(mc_etcd_t *e, const char *key, const char *to, int64_t *deleted);
int mc_etcd_delete_prefix(mc_etcd_t *e, const char *prefix, int64_t *deleted);

/* Leases. ttl in seconds. keepalive: *ttl_left = seconds etcd granted from now, 0 when the lease
 * no longer exists (expired or revoked: the caller lost whatever it held under it). */
int mc_etcd_lease_grant(mc_etcd_t *e, int64_t ttl_s, int64_t *lease_id, int64_t *granted_ttl_s);
int mc_etcd_lease_keepalive(mc_etcd_t *e, int64_t lease_id, int64_t *ttl_left_s);
int mc_etcd_lease_revoke(mc_etcd_t *e, int64_t lease_id);

/* Transactions: if every compare holds, every op in then[] runs, else every op in els[]. */
typedef enum mc_etcd_cmp_target {
    MC_ETCD_CMP_CREATE = 0, /* create_revision (0 when the key is absent) */
    MC_ETCD_CMP_MOD = 1,    /* mod_revision */
    MC_ETCD_CMP_VERSION = 2,
    MC_ETCD_CMP_VALUE = 3,
} mc_etcd_cmp_target_t;

typedef enum mc_etcd_cmp_result {
    MC_ETCD_EQUAL = 0,
    MC_ETCD_GREATER = 1,
    MC_ETCD_LESS = 2,
    MC_ETCD_NOT_EQUAL = 3,
} mc_etcd_cmp_result_t;

typedef struct mc_etcd_cmp {
    const char *key;
    mc_etcd_cmp_target_t target;
    mc_etcd_cmp_result_t result;
    int64_t number;    /* CREATE / MOD / VERSION */
    const void *value; /* VALUE */
    size_t value_len;  /* VALUE */
} mc_etcd_cmp_t;

typedef enum mc_etcd_op_kind {
    MC_ETCD_OP_PUT = 0,
    MC_ETCD_OP_DELETE = 1, /* key, or [key, to) when to != NULL */
    MC_ETCD_OP_GET = 2,    /* one key; its value is returned in kvs (see mc_etcd_txn) */
} mc_etcd_op_kind_t;

typedef struct mc_etcd_op {
    mc_etcd_op_kind_t kind;
    const char *key;
    const char *to;    /* DELETE range end, or NULL */
    const void *value; /* PUT */
    size_t value_len;  /* PUT */
    int64_t lease;     /* PUT; 0 = none */
} mc_etcd_op_t;

/*
 * Runs the transaction. *succeeded = 1 when the compares held (then[] ran), 0 when they did not
 * (els[] ran). kvs/nkvs (may be NULL): the results of the GET ops of the branch that ran, in order
 * (absent keys are left out), freed with mc_etcd_kv_free(*kvs, *nkvs, 1). *revision (may be NULL)
 * = the store's revision after it. Returns 0 whether or not the compares held.
 */
int mc_etcd_txn(mc_etcd_t *e, const mc_etcd_cmp_t *cmps, size_t ncmp, const mc_etcd_op_t *then,
                size_t nthen, const mc_etcd_op_t *els, size_t nels, int *succeeded,
                mc_etcd_kv_t **kvs, size_t *nkvs, int64_t *revision);

/*
 * Creates key = value under lease only if the key is absent (compare create_revision == 0), as
 * upstream's leader election does. *created = 1 when this call created it; either way *current
 * (may be NULL) holds the key as it is now (ours, or the holder's), freed with
 * mc_etcd_kv_free(current, 1, 0).
 */
int mc_etcd_create_if_absent(mc_etcd_t *e, const char *key, const void *value, size_t len,
                             int64_t lease, int *created, mc_etcd_kv_t *current);

#endif /* MC_COMMON_ETCD_H */
