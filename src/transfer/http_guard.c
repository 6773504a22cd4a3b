/*
 * http_guard.c — connection cap and refusal counter for libmicrohttpd servers, and the glue they
 * share (http_guard.h).
 */
#include "http_guard.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_LOG_INTERVAL_MS 1000

void mc_http_guard_init(mc_http_guard_t *g, const char *what, unsigned max_connections)
{
    g->what = what;
    g->max_connections = max_connections;
    atomic_init(&g->active, 0);
    atomic_init(&g->refused, 0);
    atomic_init(&g->last_log_ms, 0);
}

enum MHD_Result mc_http_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    mc_http_guard_t *g = cls;
    if (atomic_load(&g->active) < g->max_connections)
        return MHD_YES;
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
    if (toe == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&g->active, 1);
    else if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
        atomic_fetch_sub(&g->active, 1);
}

uint64_t mc_http_guard_refused(mc_http_guard_t *g)
{
    return atomic_load(&g->refused);
}

unsigned mc_http_guard_active(mc_http_guard_t *g)
{
    return atomic_load(&g->active);
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
