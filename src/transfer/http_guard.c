/*
 * http_guard.c — connection cap and refusal counter for libmicrohttpd servers (http_guard.h).
 */
#include "http_guard.h"

#include "log.h"

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
