/*
 * http_guard.c — connection cap, per-request time bound and their counters for libmicrohttpd
 * servers, and the glue they share (http_guard.h).
 */
#include "http_guard.h"

#include "log.h"
#include "mooncake/errors.h"
#include "net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARD_LOG_INTERVAL_MS 1000

/* One open connection: its socket and when its current request started (mc_now_ms clock). */
struct mc_http_guard_conn {
    struct mc_http_guard_conn *prev, *next;
    int fd;
    uint64_t start_ms;
    int aborted;                  /* shut down by the sweeper; libmicrohttpd has yet to close it */
    struct sockaddr_storage peer; /* the client's address (family 0: unknown) */
};

/* Text of a peer's address for a log line. */
static void host_text(const struct sockaddr *a, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    if (a->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, out, (socklen_t)cap);
    else if (a->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, out, (socklen_t)cap);
}

static void *guard_sweeper(void *arg);

int mc_http_guard_init(mc_http_guard_t *g, const char *what, unsigned max_connections,
                       uint64_t request_timeout_ms)
{
    g->what = what;
    g->max_connections = max_connections;
    /* A small cap is a test's or a single user's: no share then. */
    g->max_per_peer =
        max_connections >= MC_HTTP_GUARD_PER_PEER_MIN_CAP ? max_connections / 4 : max_connections;
    g->request_timeout_ms = request_timeout_ms;
    atomic_init(&g->active, 0);
    atomic_init(&g->refused, 0);
    atomic_init(&g->refused_per_peer, 0);
    atomic_init(&g->timed_out, 0);
    atomic_init(&g->last_log_ms, 0);
    atomic_init(&g->last_timeout_log_ms, 0);
    g->conns = NULL;
    g->stopping = 0;
    g->sweeping = 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->lock, NULL);
    if (request_timeout_ms == 0)
        return 0;
    if (pthread_create(&g->sweeper, NULL, guard_sweeper, g) != 0) {
        MC_ERROR("%s: cannot start the request-timeout thread", what);
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        return MC_ERR_INTERNAL_ERROR;
    }
    g->sweeping = 1;
    return 0;
}

void mc_http_guard_destroy(mc_http_guard_t *g)
{
    pthread_mutex_lock(&g->lock);
    g->stopping = 1;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    if (g->sweeping)
        pthread_join(g->sweeper, NULL);
    g->sweeping = 0;
    while (g->conns) { /* none after MHD_stop_daemon; kept safe anyway */
        struct mc_http_guard_conn *c = g->conns;
        g->conns = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
}

/* Shuts down the socket of every connection whose request is older than the bound. Called with
 * g->lock held. A connection's record leaves the list (MHD_CONNECTION_NOTIFY_CLOSED, under the
 * lock) before libmicrohttpd closes its socket, so c->fd is never another connection's. */
static void guard_sweep(mc_http_guard_t *g, uint64_t now)
{
    for (struct mc_http_guard_conn *c = g->conns; c; c = c->next) {
        if (c->aborted || now - c->start_ms < g->request_timeout_ms)
            continue;
        c->aborted = 1;
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
        uint64_t n = atomic_fetch_add(&g->timed_out, 1) + 1;
        if (mc_log_ratelimit(&g->last_timeout_log_ms, GUARD_LOG_INTERVAL_MS))
            MC_WARN("%s: closing a connection whose request took over %llu ms (%llu closed so "
                    "far)",
                    g->what, (unsigned long long)g->request_timeout_ms, (unsigned long long)n);
    }
}

static void *guard_sweeper(void *arg)
{
    mc_http_guard_t *g = arg;
    uint64_t period_ms = g->request_timeout_ms / 20;
    if (period_ms < 50)
        period_ms = 50;
    if (period_ms > 500)
        period_ms = 500;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        guard_sweep(g, mc_now_ms());
        struct timespec ts;
        mc_deadline_after_ms(&ts, CLOCK_MONOTONIC, period_ms);
        if (!g->stopping)
            pthread_cond_timedwait(&g->wake, &g->lock, &ts);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

enum MHD_Result mc_http_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    mc_http_guard_t *g = cls;
    if (atomic_load(&g->active) < g->max_connections) {
        if (!addr || addrlen < sizeof(addr->sa_family))
            return MHD_YES;
        /* One peer holds at most max_per_peer: the rest stays for everybody else. */
        unsigned from_peer = 0;
        pthread_mutex_lock(&g->lock);
        for (const struct mc_http_guard_conn *c = g->conns; c; c = c->next)
            from_peer += !c->aborted && mc_net_same_host(addr, (const struct sockaddr *)&c->peer);
        pthread_mutex_unlock(&g->lock);
        if (from_peer < g->max_per_peer)
            return MHD_YES;
        atomic_fetch_add(&g->refused, 1);
        uint64_t n = atomic_fetch_add(&g->refused_per_peer, 1) + 1;
        if (mc_log_ratelimit(&g->last_log_ms, GUARD_LOG_INTERVAL_MS)) {
            char host[INET6_ADDRSTRLEN];
            host_text(addr, host, sizeof(host));
            MC_WARN("%s: %s holds %u connections, the limit for one peer; refusing its new ones "
                    "(%llu refused so far)",
                    g->what, host, g->max_per_peer, (unsigned long long)n);
        }
        return MHD_NO;
    }
    uint64_t n = atomic_fetch_add(&g->refused, 1) + 1;
    if (mc_log_ratelimit(&g->last_log_ms, GUARD_LOG_INTERVAL_MS))
        MC_WARN("%s: %u connections are open, the limit; refusing new ones (%llu refused so far)",
                g->what, g->max_connections, (unsigned long long)n);
    return MHD_NO;
}

void mc_http_guard_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    mc_http_guard_t *g = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&g->active, 1);
        *socket_context = NULL;
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = info ? (int)info->connect_fd : -1;
        struct mc_http_guard_conn *c = calloc(1, sizeof(*c));
        if (!c) { /* cannot bound or count it: do not serve it */
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
            return;
        }
        c->fd = fd;
        c->start_ms = mc_now_ms();
        const union MHD_ConnectionInfo *addr =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (addr && addr->client_addr) {
            socklen_t len = addr->client_addr->sa_family == AF_INET6
                                ? (socklen_t)sizeof(struct sockaddr_in6)
                                : (socklen_t)sizeof(struct sockaddr_in);
            if (addr->client_addr->sa_family == AF_INET || addr->client_addr->sa_family == AF_INET6)
                memcpy(&c->peer, addr->client_addr, len);
            else
                c->peer.ss_family = addr->client_addr->sa_family;
        }
        pthread_mutex_lock(&g->lock);
        c->next = g->conns;
        if (g->conns)
            g->conns->prev = c;
        g->conns = c;
        pthread_mutex_unlock(&g->lock);
        *socket_context = c;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        atomic_fetch_sub(&g->active, 1);
        struct mc_http_guard_conn *c = *socket_context;
        if (!c)
            return;
        pthread_mutex_lock(&g->lock);
        if (c->prev)
            c->prev->next = c->next;
        else
            g->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&g->lock);
        free(c);
        *socket_context = NULL;
    }
}

void mc_http_guard_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                             enum MHD_RequestTerminationCode toe)
{
    mc_http_guard_t *g = cls;
    (void)req_cls;
    (void)toe;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct mc_http_guard_conn *c = info ? info->socket_context : NULL;
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    c->start_ms = mc_now_ms();
    pthread_mutex_unlock(&g->lock);
}

uint64_t mc_http_guard_refused(mc_http_guard_t *g)
{
    return atomic_load(&g->refused);
}

uint64_t mc_http_guard_refused_per_peer(mc_http_guard_t *g)
{
    return atomic_load(&g->refused_per_peer);
}

unsigned mc_http_guard_active(mc_http_guard_t *g)
{
    return atomic_load(&g->active);
}

uint64_t mc_http_guard_timed_out(mc_http_guard_t *g)
{
    return atomic_load(&g->timed_out);
}

void mc_http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    MC_WARN("%s: libmicrohttpd: %s", cls ? (const char *)cls : "HTTP", buf);
}

int mc_http_request_whole(void **req_cls, size_t *upload_data_size)
{
    static int seen;
    if (!*req_cls) {
        *req_cls = &seen;
        return 0;
    }
    if (*upload_data_size) {
        *upload_data_size = 0;
        return 0;
    }
    return 1;
}

enum MHD_Result mc_http_reply_owned(struct MHD_Connection *conn, unsigned int status,
                                    const char *content_type, char *body, size_t len)
{
    if (!body)
        return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    enum MHD_Result ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}
