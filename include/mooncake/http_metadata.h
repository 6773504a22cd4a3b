/*
 * http_metadata.h — the HTTP metadata protocol: a key/value service peers use to publish and
 * find Transfer Engine segment descriptors, compatible with upstream Mooncake's
 * `http://host:port/metadata` (GET|PUT|DELETE /metadata?key=K).
 *
 * Server (libmicrohttpd, its own thread; embedded by mooncake_master with
 * --enable_http_metadata_server, and run standalone by mooncake_http_metadata_server):
 *   GET    /metadata?key=K -> 200 + value (application/json), 404 when absent
 *   PUT    /metadata?key=K -> 200 (body = value); a key containing "rpc_meta" that exists with a
 *                             different body -> 400 "Duplicate rpc_meta key not allowed"
 *   DELETE /metadata?key=K -> 200, 404 when absent
 *   missing key parameter  -> 400;  GET /health -> 200 "OK";  other paths -> 404
 *   GET    /metrics        -> 200, Prometheus text: keys, bytes, refusals (our addition)
 * Limits (mc_http_metadata_limits_t), each refusal counted (mc_http_metadata_stats_t, /metrics)
 * and logged at most once a second:
 *   a value above max_value_bytes        -> 413 "value too large" (a declared Content-Length
 *                                           before the body is read, a chunked body once it
 *                                           overflows: drained, not stored);
 *   a new key beyond max_keys            -> 507 "metadata store full: too many keys";
 *   stored keys and values, plus bodies being received, above max_total_bytes
 *                                        -> 507 "metadata store full: too many bytes"
 *                                           (507 Insufficient Storage: the request is fine, the
 *                                           store has no room; retrying after deletions works);
 *   more than max_connections open       -> the new connection is accepted and closed;
 *   a connection idle, or one request (from the accept or the previous response's completion
 *   to its own response's completion, however the bytes trickle), past connection_timeout_s
 *                                        -> closed (counted: requests_timed_out);
 *   request headers (URL included) above 64 KiB per connection -> refused by libmicrohttpd.
 * Thread-safe.
 *
 * Cluster secret (docs/security.md): a server started with one accepts a PUT or DELETE only with
 * a header "X-Mooncake-Auth: <nonce>.<mac>" proving the secret over a nonce it issued
 *   GET    /metadata/auth_challenge -> 200 {"nonce":"<64 hex>"} (single use, valid 30 s);
 *                                      404 when the server has no secret
 * and the write (HMAC-SHA-256 over method, key, nonce and the body's SHA-256; wire/auth.h);
 * a write without a valid proof -> 401 and nothing changes. Reads stay open. The client calls
 * below sign their writes when the process has a secret (MOONCAKE_CLUSTER_SECRET_FILE or
 * MOONCAKE_CLUSTER_SECRET), and then refuse a server that has none.
 *
 * Client (libcurl): url is the full metadata URL, e.g. "http://127.0.0.1:8080/metadata".
 */
#ifndef MOONCAKE_HTTP_METADATA_H
#define MOONCAKE_HTTP_METADATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults of mc_http_metadata_limits_t. Descriptors are a few KiB (more with many rdma
 * regions), so these hold thousands of segments. */
#define MC_HTTP_METADATA_MAX_VALUE (4u << 20)
#define MC_HTTP_METADATA_DEFAULT_MAX_KEYS 65536u
#define MC_HTTP_METADATA_DEFAULT_MAX_TOTAL (64u << 20)
#define MC_HTTP_METADATA_DEFAULT_MAX_CONNECTIONS 1024u
#define MC_HTTP_METADATA_DEFAULT_TIMEOUT_S 30u

typedef struct mc_http_metadata_server mc_http_metadata_server_t; /* handle */

/* A server's limits; a 0 field takes its default (above). */
typedef struct mc_http_metadata_limits {
    size_t max_value_bytes;        /* one value */
    size_t max_keys;               /* keys held */
    size_t max_total_bytes;        /* keys + values held + bodies being received */
    unsigned max_connections;      /* open connections */
    unsigned connection_timeout_s; /* idle connection, and one request's whole time */
} mc_http_metadata_limits_t;

/* The counters of a server (mc_http_metadata_server_get_stats, GET /metrics). */
typedef struct mc_http_metadata_stats {
    uint64_t keys;
    uint64_t bytes;             /* held: keys, values and per-entry overhead */
    uint64_t receiving_bytes;   /* PUT bodies being received */
    uint64_t refused_too_large; /* 413 */
    uint64_t refused_full;      /* 507: max_keys or max_total_bytes */
    uint64_t connections_active;
    uint64_t connections_refused;     /* over max_connections */
    uint64_t requests_timed_out;      /* connections closed past connection_timeout_s */
    mc_http_metadata_limits_t limits; /* in force (defaults filled in) */
} mc_http_metadata_stats_t;

/*
 * Starts serving on host:port (host "0.0.0.0" = every interface; port 0 = any free port).
 * Returns 0 and the handle, or MC_ERR_INVALID_PARAMS (bad host) / MC_ERR_INTERNAL_ERROR (cannot
 * bind: the port is logged).
 */
int mc_http_metadata_server_start(const char *host, int port, mc_http_metadata_server_t **out);

/* The same with limits (NULL or 0 fields: defaults). */
int mc_http_metadata_server_start_limited(const char *host, int port,
                                          const mc_http_metadata_limits_t *limits,
                                          mc_http_metadata_server_t **out);
void mc_http_metadata_server_get_stats(mc_http_metadata_server_t *server,
                                       mc_http_metadata_stats_t *out);

/* Options of mc_http_metadata_server_start_opts; zero-initialise. */
typedef struct mc_http_metadata_server_options {
    /* The cluster secret, from the first set: cluster_secret, cluster_secret_file, then the
     * environment (MOONCAKE_CLUSTER_SECRET_FILE, MOONCAKE_CLUSTER_SECRET); none = writes open,
     * as upstream. mc_http_metadata_server_start() takes it from the environment. */
    const char *cluster_secret;
    const char *cluster_secret_file;
    /* Limits; NULL = defaults (see mc_http_metadata_limits_t). */
    const mc_http_metadata_limits_t *limits;
} mc_http_metadata_server_options_t;

/* As mc_http_metadata_server_start, with options (NULL = defaults). MC_ERR_INVALID_PARAMS also
 * for an unreadable secret file. */
int mc_http_metadata_server_start_opts(const char *host, int port,
                                       const mc_http_metadata_server_options_t *opts,
                                       mc_http_metadata_server_t **out);
/* The port actually bound. */
int mc_http_metadata_server_port(const mc_http_metadata_server_t *server);
/* Number of keys held. */
size_t mc_http_metadata_server_size(mc_http_metadata_server_t *server);
/* Stops the server thread and frees every value. NULL is a no-op. */
void mc_http_metadata_server_stop(mc_http_metadata_server_t *server);

/*
 * Client calls. Each takes the metadata URL and a key (URL-escaped by the call).
 * get: *value receives a malloc'd NUL-terminated copy (caller frees) and *len its length;
 *      MC_ERR_OBJECT_NOT_FOUND on 404.
 * put/del: 0 on 200; MC_ERR_OBJECT_NOT_FOUND when del finds nothing; MC_ERR_INVALID_PARAMS on 400;
 *      MC_ERR_ILLEGAL_CLIENT when the server refuses the proof (401) or, this process having a
 *      cluster secret, the server has none.
 * All: MC_ERR_RPC_FAIL when the server is unreachable or answers something else (logged),
 *      timeout 5 s.
 */
int mc_http_metadata_get(const char *url, const char *key, char **value, size_t *len);
int mc_http_metadata_put(const char *url, const char *key, const char *value, size_t len);
int mc_http_metadata_del(const char *url, const char *key);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_HTTP_METADATA_H */
