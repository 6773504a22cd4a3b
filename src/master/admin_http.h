/*
 * admin_http.h — the master's admin and metrics HTTP server (upstream's master_admin_service),
 * on libmicrohttpd, served on --metrics_host:--metrics_port (0.0.0.0:9003). Read-only:
 *
 *   GET /metrics           Prometheus text exposition (# HELP / # TYPE per family): master_*
 *                          gauges and counters from mc_master_get_stats (master_offload_* and
 *                          master_disk_* for offload), and per-RPC
 *                          master_rpc_requests_total{method="PutStart"} / master_rpc_success_total
 *   GET /metrics/summary   the same numbers as human-readable lines, plus the effective settings
 *   GET /health            200 {"status":"ok","version":...,"uptime_seconds":...,...,
 *                          "offload":{"enabled":..,"backend_healthy":..,...}}; status "degraded"
 *                          while an offloading client reports an unhealthy backend
 *   GET /get_all_segments  text/plain, one mounted segment name per line (empty body when none),
 *                          as upstream: SGLang's check_server polls it until non-empty
 *   GET /query_key?key=K   200 JSON {key,size,lease_remaining_ms,replicas:[...]}; 404 JSON when
 *                          absent; 400 when `key` is missing or not a valid key
 *   other paths -> 404, other methods -> 405.
 *
 * Keys are bytes; JSON strings are UTF-8. Every string built from user data (a key, a segment
 * name, a file path) is written as is when it is valid UTF-8; otherwise each byte that does not
 * belong to a valid UTF-8 sequence becomes U+FFFD (the replacement character), and an answer
 * about a key that needed it carries "key_hex": the key's exact bytes as lowercase hex, so the
 * key can always be recovered. Never a dropped connection.
 *
 * Limits: at most MC_ADMIN_MAX_CONNECTIONS open connections (more are accepted and closed,
 * counted in master_admin_http_connections_refused_total), a connection idle for 30 s is
 * closed, and so is one whose request takes over 10 s in all, from the accept (or the previous
 * response) to its response sent (a trickle included; master_admin_http_requests_timed_out_total,
 * http_guard.h), request headers of at most 32 KiB per connection.
 *
 * One libmicrohttpd polling thread serves every connection. Ownership: the server borrows
 * `master`, `rpc` and `metadata` (which must outlive it); `settings` is copied. Thread-safety:
 * start/stop from one thread.
 */
#ifndef MC_MASTER_ADMIN_HTTP_H
#define MC_MASTER_ADMIN_HTTP_H

#include "master_service.h"
#include "rpc_server.h"

typedef struct mc_admin_http mc_admin_http_t; /* handle */

#define MC_ADMIN_MAX_CONNECTIONS 256u

typedef struct mc_admin_http_config {
    const char *host;     /* "0.0.0.0" = every interface */
    int port;             /* 0 = any free port */
    mc_master_t *master;  /* required */
    mc_rpc_server_t *rpc; /* may be NULL: RPC counters read as 0 */
    const char *settings; /* may be NULL: one line of effective settings for /metrics/summary */
    /* may be NULL: the embedded HTTP metadata server, whose counters /metrics shows */
    struct mc_http_metadata_server *metadata;
} mc_admin_http_config_t;

/*
 * HA (--enable_ha, ha.h / oplog.h): /role, /ha_status, /leader, /health and the summary line
 * then report this master's election state and the view it sees, and /metrics the ha_*
 * families from real counters. Either may be NULL. Thread-safe; borrowed (must outlive the
 * server, or be set back to NULL first).
 */
struct mc_ha;
struct mc_oplog;
void mc_admin_http_set_ha(mc_admin_http_t *a, struct mc_ha *ha, struct mc_oplog *oplog);

/*
 * Binds and starts serving. Returns 0, MC_ERR_INVALID_PARAMS (bad host/port, no master) or
 * MC_ERR_INTERNAL_ERROR (cannot bind: one ERROR line names host:port and the reason).
 */
int mc_admin_http_start(const mc_admin_http_config_t *config, mc_admin_http_t **out);
/* The port actually bound. */
int mc_admin_http_port(const mc_admin_http_t *server);
/* Stops the thread and frees the server. NULL is a no-op. */
void mc_admin_http_stop(mc_admin_http_t *server);

#endif /* MC_MASTER_ADMIN_HTTP_H */
