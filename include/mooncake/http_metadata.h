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
 * Values are bounded (MC_HTTP_METADATA_MAX_VALUE bytes, larger -> 413). Thread-safe.
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

#ifdef __cplusplus
extern "C" {
#endif

#define MC_HTTP_METADATA_MAX_VALUE (4u << 20)

typedef struct mc_http_metadata_server mc_http_metadata_server_t; /* handle */

/*
 * Starts serving on host:port (host "0.0.0.0" = every interface; port 0 = any free port).
 * Returns 0 and the handle, or MC_ERR_INVALID_PARAMS (bad host) / MC_ERR_INTERNAL_ERROR (cannot
 * bind: the port is logged).
 */
int mc_http_metadata_server_start(const char *host, int port, mc_http_metadata_server_t **out);

/* Options of mc_http_metadata_server_start_opts; zero-initialise. */
typedef struct mc_http_metadata_server_options {
    /* The cluster secret, from the first set: cluster_secret, cluster_secret_file, then the
     * environment (MOONCAKE_CLUSTER_SECRET, MOONCAKE_CLUSTER_SECRET_FILE); none = writes open,
     * as upstream. mc_http_metadata_server_start() takes it from the environment. */
    const char *cluster_secret;
    const char *cluster_secret_file;
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
