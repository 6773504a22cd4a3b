/*
 * client_http.h — a store client's metrics and its HTTP server (matches upstream's real client:
 * `mooncake_client --enable_http_server --http_port=9300`, Python `setup(...,
 * enable_client_http_server=True, client_http_port=9300)`; mooncake-interfaces-2.md §7.2).
 *
 * Metrics (mc_client_metrics_t): counters and histograms of what this client's put/get calls did,
 * counted by store_client.c when each call returns. Off (mc_client_metrics_create returns NULL)
 * when the environment variable MC_STORE_CLIENT_METRIC is 0, false or off, as upstream. Every
 * series carries client_mode="real" and, when MC_STORE_CLUSTER_ID is set, cluster_id="<it>":
 *
 *   mooncake_transfer_read_bytes, mooncake_transfer_write_bytes      counter: value bytes that
 *       gets returned / puts stored (successful keys only)
 *   mooncake_transfer_get_latency, _put_latency, _batch_get_latency, _batch_put_latency
 *       histogram, microseconds, upstream's buckets (50 us .. 2e7 us): end-to-end call time of
 *       calls of one key / of several keys (the Python binding's get runs the C batch call
 *       with one key: it counts as a get, as the user called it)
 *   mooncake_transfer_{read,write}_operation_{count,bytes} counter, _latency histogram, with
 *       op_name="<the C call>" (put, upsert, put_from, upsert_from, put_batch, batch_put_from,
 *       batch_upsert_from; get, get_into, get_batch, batch_get_into): calls, bytes, time.
 *       Write bytes are those PutEnd published (a put of an existing key answers 0 and writes
 *       nothing); read bytes are those returned.
 *
 * Upstream's mooncake_client_rpc_* and mooncake_ssd_* families are not exported (not counted
 * here; see python/README.md).
 *
 * HTTP server (mc_client_http_t): libmicrohttpd, one polling thread, GET (and HEAD) only:
 *   /health           JSON {"status":"healthy|not_initialized|master_unreachable","code":0|1|2},
 *                     200 when code is 0, else 503
 *   /metrics          Prometheus text (text/plain; version=0.0.4); 503 "metrics not available"
 *                     when metrics are off
 *   /metrics/summary  the same numbers as a few human-readable lines; 503 likewise
 *   other paths 404, other methods 405.
 * At most MC_CLIENT_HTTP_MAX_CONNECTIONS connections (more are accepted and closed), 30 s
 * connection timeout, 32 KiB of request headers, 10 s per request from the accept (or the
 * previous response) to its response sent, however slowly it trickles (then the connection is
 * closed, counted in /metrics' mooncake_client_http_requests_timed_out_total; http_guard.h).
 *
 * Thread-safety: mc_client_metrics_record from any thread; start/stop from one thread.
 * Ownership: the server borrows `metrics` and `health_arg`, which must outlive it.
 */
#ifndef MC_CLIENT_CLIENT_HTTP_H
#define MC_CLIENT_CLIENT_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The calls metrics are kept for (op_name label values), writes first. */
typedef enum mc_client_op {
    MC_CLIENT_OP_PUT,
    MC_CLIENT_OP_UPSERT,
    MC_CLIENT_OP_PUT_FROM,
    MC_CLIENT_OP_UPSERT_FROM,
    MC_CLIENT_OP_PUT_BATCH,
    MC_CLIENT_OP_BATCH_PUT_FROM,
    MC_CLIENT_OP_BATCH_UPSERT_FROM,
    MC_CLIENT_OP_GET,
    MC_CLIENT_OP_GET_INTO,
    MC_CLIENT_OP_GET_BATCH,
    MC_CLIENT_OP_BATCH_GET_INTO,
    MC_CLIENT_OP_COUNT
} mc_client_op_t;

typedef struct mc_client_metrics mc_client_metrics_t;

/* NULL when metrics are off (MC_STORE_CLIENT_METRIC=0/false/off) or out of memory. */
mc_client_metrics_t *mc_client_metrics_create(void);
void mc_client_metrics_free(mc_client_metrics_t *m); /* NULL is a no-op */
/* One call of `op` on `keys` keys that moved `bytes` value bytes in `latency_us`. NULL m is a
 * no-op. */
void mc_client_metrics_record(mc_client_metrics_t *m, mc_client_op_t op, size_t keys,
                              uint64_t bytes, uint64_t latency_us);
/* The Prometheus exposition / the summary lines, written to f. */
void mc_client_metrics_render(mc_client_metrics_t *m, FILE *f);
void mc_client_metrics_summary(mc_client_metrics_t *m, FILE *f);

/* /health codes (upstream's) */
#define MC_CLIENT_HEALTHY 0
#define MC_CLIENT_NOT_INITIALIZED 1
#define MC_CLIENT_MASTER_UNREACHABLE 2

#define MC_CLIENT_HTTP_MAX_CONNECTIONS 64u

typedef struct mc_client_http mc_client_http_t;

typedef struct mc_client_http_config {
    const char *host;             /* bind address; "0.0.0.0" = every interface */
    int port;                     /* 1..65535 (0 = any free port, for tests) */
    mc_client_metrics_t *metrics; /* NULL: /metrics answers 503 */
    int (*health)(void *arg);     /* MC_CLIENT_HEALTHY / ..., called on the server thread */
    void *health_arg;
    /* Optional (NULL: none), called with health_arg on the server thread: "ok" or "unavailable"
     * for the offload storage, shown as /health's "offload_storage" (NULL: not shown); it never
     * changes /health's status or HTTP code — a client whose offload storage is silent still
     * serves its memory, and a liveness probe must not restart it for that. */
    const char *(*offload_storage)(void *arg);
    /* Optional: appends metric families to /metrics. */
    void (*more_metrics)(void *arg, FILE *f);
} mc_client_http_config_t;

/* Binds and serves. 0, MC_ERR_INVALID_PARAMS (bad port, no health callback) or the bind error
 * (mc_net_listen_tcp logged host:port and the reason). */
int mc_client_http_start(const mc_client_http_config_t *config, mc_client_http_t **out);
int mc_client_http_port(const mc_client_http_t *server); /* the port bound; -1 for NULL */
void mc_client_http_stop(mc_client_http_t *server);      /* NULL is a no-op */

#endif /* MC_CLIENT_CLIENT_HTTP_H */
