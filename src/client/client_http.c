/*
 * client_http.c — a store client's metrics and HTTP server (client_http.h).
 *
 * Metrics are plain atomic counters (relaxed: each is exact, a scrape is not a snapshot across
 * them); histograms keep non-cumulative bucket counts and are summed into Prometheus' cumulative
 * form when rendered. The server is the master's admin server in miniature: libmicrohttpd on a
 * socket opened by mc_net_listen_tcp, the connection cap of http_guard.h, one reply per request
 * rendered into a fresh buffer.
 */
#include "client_http.h"

#include "http_guard.h"
#include "log.h"
#include "mooncake/errors.h"
#include "net.h"

#include <inttypes.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CLIENT_HTTP_BACKLOG 64
#define CLIENT_HTTP_TIMEOUT_S 30u
/* Absolute bound per request (http_guard.h): GETs only, so a live client needs far less. */
#define CLIENT_HTTP_REQUEST_TIMEOUT_MS 10000u
#define CLIENT_HTTP_MEMORY_LIMIT (32u << 10)
#define CONTENT_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TEXT "text/plain; charset=utf-8"
#define CONTENT_JSON "application/json"
#define LABELS_MAX 512

/* upstream's transfer latency buckets, microseconds */
static const uint64_t latency_bounds[] = {
    50,    75,     125,    150,    200,     250,     300,     400,      500,
    750,   1000,   1500,   2000,   3000,    5000,    7000,    15000,    20000,
    50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000, 20000000};
#define NBUCKETS (sizeof(latency_bounds) / sizeof(latency_bounds[0]))

typedef struct histo {
    uint64_t counts[NBUCKETS + 1]; /* non-cumulative; the last is above every bound */
    uint64_t sum;
} histo_t;

typedef struct op_metrics {
    uint64_t count, bytes;
    histo_t latency;
} op_metrics_t;

struct mc_client_metrics {
    uint64_t read_bytes, write_bytes;
    histo_t get, put, batch_get, batch_put;
    op_metrics_t ops[MC_CLIENT_OP_COUNT];
    char labels[LABELS_MAX]; /* client_mode="real"[,cluster_id="..."] */
};

static const char *const op_names[MC_CLIENT_OP_COUNT] = {
    "put",       "upsert",         "put_from",          "upsert_from",
    "put_batch", "batch_put_from", "batch_upsert_from", "get",
    "get_into",  "get_batch",      "batch_get_into"};

static int op_is_write(mc_client_op_t op)
{
    return op <= MC_CLIENT_OP_BATCH_UPSERT_FROM;
}

/* `s` as a Prometheus label value (\, " and newline escaped) appended at out[*len]. */
static void append_label_value(char *out, size_t cap, size_t *len, const char *s)
{
    for (; *s && *len + 3 < cap; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            out[(*len)++] = '\\';
            out[(*len)++] = *s == '\n' ? 'n' : *s;
        } else {
            out[(*len)++] = *s;
        }
    }
    out[*len] = '\0';
}

mc_client_metrics_t *mc_client_metrics_create(void)
{
    const char *e = getenv("MC_STORE_CLIENT_METRIC");
    if (e && (!strcmp(e, "0") || !strcasecmp(e, "false") || !strcasecmp(e, "off")))
        return NULL;
    mc_client_metrics_t *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    size_t len = (size_t)snprintf(m->labels, sizeof(m->labels), "client_mode=\"real\"");
    const char *cluster = getenv("MC_STORE_CLUSTER_ID");
    if (cluster && *cluster) {
        len += (size_t)snprintf(m->labels + len, sizeof(m->labels) - len, ",cluster_id=\"");
        append_label_value(m->labels, sizeof(m->labels) - 1, &len, cluster);
        m->labels[len++] = '"';
        m->labels[len] = '\0';
    }
    return m;
}

void mc_client_metrics_free(mc_client_metrics_t *m)
{
    free(m);
}

static void add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static uint64_t load(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static void observe(histo_t *h, uint64_t v)
{
    size_t b = 0;
    while (b < NBUCKETS && v > latency_bounds[b])
        b++;
    add(&h->counts[b], 1);
    add(&h->sum, v);
}

void mc_client_metrics_record(mc_client_metrics_t *m, mc_client_op_t op, size_t keys,
                              uint64_t bytes, uint64_t latency_us)
{
    if (!m || (unsigned)op >= MC_CLIENT_OP_COUNT)
        return;
    int write = op_is_write(op), batch = keys > 1;
    add(write ? &m->write_bytes : &m->read_bytes, bytes);
    observe(write ? (batch ? &m->batch_put : &m->put) : (batch ? &m->batch_get : &m->get),
            latency_us);
    add(&m->ops[op].count, 1);
    add(&m->ops[op].bytes, bytes);
    observe(&m->ops[op].latency, latency_us);
}

/* ---- rendering --------------------------------------------------------------------------- */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The series of one histogram; `extra` is more labels ("" or `op_name="put"`). */
static void histo_series(FILE *f, const char *name, const char *labels, const char *extra,
                         const histo_t *h)
{
    uint64_t cum = 0;
    const char *sep = extra[0] ? "," : "";
    for (size_t i = 0; i <= NBUCKETS; i++) {
        cum += load(&h->counts[i]);
        if (i < NBUCKETS)
            fprintf(f, "%s_bucket{%s%s%s,le=\"%" PRIu64 "\"} %" PRIu64 "\n", name, labels, sep,
                    extra, latency_bounds[i], cum);
        else
            fprintf(f, "%s_bucket{%s%s%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, extra,
                    cum);
    }
    fprintf(f, "%s_sum{%s%s%s} %" PRIu64 "\n%s_count{%s%s%s} %" PRIu64 "\n", name, labels, sep,
            extra, load(&h->sum), name, labels, sep, extra, cum);
}

void mc_client_metrics_render(mc_client_metrics_t *m, FILE *f)
{
    const char *l = m->labels;
    family(f, "mooncake_transfer_read_bytes", "counter", "Value bytes returned by gets.");
    fprintf(f, "mooncake_transfer_read_bytes{%s} %" PRIu64 "\n", l, load(&m->read_bytes));
    family(f, "mooncake_transfer_write_bytes", "counter", "Value bytes stored by puts.");
    fprintf(f, "mooncake_transfer_write_bytes{%s} %" PRIu64 "\n", l, load(&m->write_bytes));
    static const struct {
        const char *name, *help;
        size_t offset;
    } lat[] = {
        {"mooncake_transfer_get_latency", "Get calls of one key, microseconds.",
         offsetof(mc_client_metrics_t, get)},
        {"mooncake_transfer_put_latency", "Put calls of one key, microseconds.",
         offsetof(mc_client_metrics_t, put)},
        {"mooncake_transfer_batch_get_latency", "Get calls of several keys, microseconds.",
         offsetof(mc_client_metrics_t, batch_get)},
        {"mooncake_transfer_batch_put_latency", "Put calls of several keys, microseconds.",
         offsetof(mc_client_metrics_t, batch_put)},
    };
    for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
        family(f, lat[i].name, "histogram", lat[i].help);
        histo_series(f, lat[i].name, l, "", (const histo_t *)((const char *)m + lat[i].offset));
    }
    for (int write = 0; write < 2; write++) {
        const char *dir = write ? "write" : "read";
        char name[96], extra[64];
        snprintf(name, sizeof(name), "mooncake_transfer_%s_operation_count", dir);
        family(f, name, "counter", "Calls, by API.");
        for (int op = 0; op < MC_CLIENT_OP_COUNT; op++) {
            if (op_is_write((mc_client_op_t)op) == write)
                fprintf(f, "%s{%s,op_name=\"%s\"} %" PRIu64 "\n", name, l, op_names[op],
                        load(&m->ops[op].count));
        }
        snprintf(name, sizeof(name), "mooncake_transfer_%s_operation_bytes", dir);
        family(f, name, "counter", "Value bytes moved, by API.");
        for (int op = 0; op < MC_CLIENT_OP_COUNT; op++) {
            if (op_is_write((mc_client_op_t)op) == write)
                fprintf(f, "%s{%s,op_name=\"%s\"} %" PRIu64 "\n", name, l, op_names[op],
                        load(&m->ops[op].bytes));
        }
        snprintf(name, sizeof(name), "mooncake_transfer_%s_operation_latency", dir);
        family(f, name, "histogram", "Call time by API, microseconds.");
        for (int op = 0; op < MC_CLIENT_OP_COUNT; op++) {
            if (op_is_write((mc_client_op_t)op) != write)
                continue;
            snprintf(extra, sizeof(extra), "op_name=\"%s\"", op_names[op]);
            histo_series(f, name, l, extra, &m->ops[op].latency);
        }
    }
}

void mc_client_metrics_summary(mc_client_metrics_t *m, FILE *f)
{
    fprintf(f, "Mooncake client metrics (%s)\n", m->labels);
    fprintf(f, "Transfer: read %" PRIu64 " bytes, written %" PRIu64 " bytes\n",
            load(&m->read_bytes), load(&m->write_bytes));
    for (int op = 0; op < MC_CLIENT_OP_COUNT; op++) {
        uint64_t n = load(&m->ops[op].count);
        if (n)
            fprintf(f, "%s: %" PRIu64 " calls, %" PRIu64 " bytes, mean %.1f us\n", op_names[op], n,
                    load(&m->ops[op].bytes), (double)load(&m->ops[op].latency.sum) / (double)n);
    }
}

/* ---- server ------------------------------------------------------------------------------ */

struct mc_client_http {
    struct MHD_Daemon *daemon;
    mc_http_guard_t guard;
    mc_client_metrics_t *metrics;
    int (*health)(void *arg);
    void *health_arg;
    const char *(*offload_storage)(void *arg);
    void (*more_metrics)(void *arg, FILE *f);
    int port;
};

typedef struct reply {
    unsigned int status;
    const char *type;
    char *body;
    size_t len;
} reply_t;

static void reply_fixed(reply_t *r, unsigned int status, const char *type, const char *body)
{
    r->status = status;
    r->type = type;
    r->body = strdup(body);
    r->len = r->body ? strlen(body) : 0;
}

/* /metrics: the client's families, then this server's own counter. */
static void render_metrics(mc_client_http_t *h, FILE *f)
{
    mc_client_metrics_render(h->metrics, f);
    fprintf(f,
            "# HELP mooncake_client_http_requests_timed_out_total Client HTTP connections closed "
            "for a request over the time bound.\n"
            "# TYPE mooncake_client_http_requests_timed_out_total counter\n"
            "mooncake_client_http_requests_timed_out_total %" PRIu64 "\n",
            mc_http_guard_timed_out(&h->guard));
    if (h->more_metrics)
        h->more_metrics(h->health_arg, f);
}

static void render_summary(mc_client_http_t *h, FILE *f)
{
    mc_client_metrics_summary(h->metrics, f);
}

static void reply_render(reply_t *r, mc_client_http_t *m, const char *type,
                         void (*render)(mc_client_http_t *, FILE *))
{
    FILE *f = open_memstream(&r->body, &r->len);
    if (!f) {
        r->body = NULL;
        return;
    }
    render(m, f);
    fclose(f);
    r->status = MHD_HTTP_OK;
    r->type = type;
}

static void route(mc_client_http_t *h, const char *url, reply_t *r)
{
    if (!strcmp(url, "/health")) {
        int code = h->health(h->health_arg);
        const char *status = code == MC_CLIENT_HEALTHY              ? "healthy"
                             : code == MC_CLIENT_NOT_INITIALIZED    ? "not_initialized"
                             : code == MC_CLIENT_MASTER_UNREACHABLE ? "master_unreachable"
                                                                    : "unknown";
        const char *storage = h->offload_storage ? h->offload_storage(h->health_arg) : NULL;
        char body[160];
        if (storage)
            snprintf(body, sizeof(body),
                     "{\"status\":\"%s\",\"code\":%d,\"offload_storage\":\"%s\"}", status, code,
                     storage);
        else
            snprintf(body, sizeof(body), "{\"status\":\"%s\",\"code\":%d}", status, code);
        reply_fixed(r, code == MC_CLIENT_HEALTHY ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                    CONTENT_JSON, body);
    } else if (!strcmp(url, "/metrics") || !strcmp(url, "/metrics/summary")) {
        if (!h->metrics)
            reply_fixed(r, MHD_HTTP_SERVICE_UNAVAILABLE, CONTENT_TEXT, "metrics not available");
        else if (!strcmp(url, "/metrics"))
            reply_render(r, h, CONTENT_PROMETHEUS, render_metrics);
        else
            reply_render(r, h, CONTENT_TEXT, render_summary);
    } else {
        reply_fixed(r, MHD_HTTP_NOT_FOUND, CONTENT_TEXT, "no such path");
    }
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    mc_client_http_t *h = cls;
    reply_t r = {0};
    if (!mc_http_request_whole(req_cls, upload_data_size))
        return MHD_YES;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        reply_fixed(&r, MHD_HTTP_METHOD_NOT_ALLOWED, CONTENT_TEXT, "only GET is served");
    else
        route(h, url, &r);
    return mc_http_reply_owned(conn, r.status, r.type, r.body, r.len);
}

int mc_client_http_start(const mc_client_http_config_t *c, mc_client_http_t **out)
{
    if (!c || !out || !c->health || c->port < 0 || c->port > 65535)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_client_http_t *h = calloc(1, sizeof(*h));
    if (!h)
        return MC_ERR_INTERNAL_ERROR;
    h->metrics = c->metrics;
    h->health = c->health;
    h->health_arg = c->health_arg;
    h->offload_storage = c->offload_storage;
    h->more_metrics = c->more_metrics;
    if (mc_http_guard_init(&h->guard, "client HTTP", MC_CLIENT_HTTP_MAX_CONNECTIONS,
                           CLIENT_HTTP_REQUEST_TIMEOUT_MS) != 0) {
        free(h);
        return MC_ERR_INTERNAL_ERROR;
    }
    int fd = mc_net_listen_tcp(c->host, c->port, CLIENT_HTTP_BACKLOG, &h->port);
    if (fd < 0) {
        mc_http_guard_destroy(&h->guard);
        free(h);
        return fd;
    }
    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    h->daemon = MHD_start_daemon(
        flags, 0, mc_http_guard_accept, &h->guard, handle, h, MHD_OPTION_EXTERNAL_LOGGER,
        mc_http_mhd_log, (void *)"client HTTP", MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_CONNECTION_TIMEOUT, CLIENT_HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CLIENT_HTTP_MEMORY_LIMIT, MHD_OPTION_CONNECTION_LIMIT,
        MC_HTTP_GUARD_HARD_LIMIT(MC_CLIENT_HTTP_MAX_CONNECTIONS), MHD_OPTION_NOTIFY_CONNECTION,
        mc_http_guard_notify, &h->guard, MHD_OPTION_NOTIFY_COMPLETED, mc_http_guard_completed,
        &h->guard, MHD_OPTION_END);
    if (!h->daemon) {
        MC_ERROR("client HTTP: cannot start serving on %s:%d", c->host ? c->host : "", h->port);
        close(fd);
        mc_http_guard_destroy(&h->guard);
        free(h);
        return MC_ERR_INTERNAL_ERROR;
    }
    *out = h;
    return 0;
}

int mc_client_http_port(const mc_client_http_t *h)
{
    return h ? h->port : -1;
}

void mc_client_http_stop(mc_client_http_t *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->daemon);
    mc_http_guard_destroy(&h->guard);
    free(h);
}
