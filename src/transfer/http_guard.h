/*
 * http_guard.h — a connection cap for the libmicrohttpd servers (the HTTP metadata server here,
 * the master's admin server): one more connection than `max_connections` is accepted and closed
 * at once, counted, with a WARNING at most once a second naming the server.
 *
 * libmicrohttpd has MHD_OPTION_CONNECTION_LIMIT, but it refuses silently; the guard counts open
 * connections (MHD_OPTION_NOTIFY_CONNECTION) and refuses in the accept policy callback (the apc
 * argument of MHD_start_daemon). Pass both, and MHD_OPTION_CONNECTION_LIMIT
 * MC_HTTP_GUARD_HARD_LIMIT(max) as a backstop, with the guard as their closure.
 *
 * Ownership: the caller owns the guard, which must outlive the daemon. The callbacks run on the
 * daemon's thread; mc_http_guard_refused / _active may be called from any thread.
 *
 * Also the glue every one of those servers needs: mc_http_mhd_log (libmicrohttpd's diagnostics
 * into our log) and mc_http_reply_owned (queue a malloc'd body as the reply).
 */
#ifndef MC_TRANSFER_HTTP_GUARD_H
#define MC_TRANSFER_HTTP_GUARD_H

#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define MC_HTTP_GUARD_HARD_LIMIT(max) ((max) + 16u)

typedef struct mc_http_guard {
    const char *what; /* server name for log lines (static) */
    unsigned max_connections;
    atomic_uint active;
    atomic_uint_fast64_t refused;
    atomic_uint_fast64_t last_log_ms;
} mc_http_guard_t;

void mc_http_guard_init(mc_http_guard_t *g, const char *what, unsigned max_connections);
/* Accept policy callback, MHD_start_daemon's apc (apc_cls = the guard). */
enum MHD_Result mc_http_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* MHD_OPTION_NOTIFY_CONNECTION callback (cls = the guard). */
void mc_http_guard_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe);
uint64_t mc_http_guard_refused(mc_http_guard_t *g);
unsigned mc_http_guard_active(mc_http_guard_t *g);

/* MHD_OPTION_EXTERNAL_LOGGER callback: one WARNING line per libmicrohttpd diagnostic (bind
 * failures, malformed requests), prefixed with cls, the server's name (a static string). */
void mc_http_mhd_log(void *cls, const char *fmt, va_list ap);

/* Queues `body` (malloc'd, `len` bytes; ownership passes to libmicrohttpd, or it is freed here on
 * failure) with `content_type` and `status` as the reply on conn. NULL body (the caller ran out
 * of memory) or a failure: MHD_NO, and libmicrohttpd closes the connection. */
enum MHD_Result mc_http_reply_owned(struct MHD_Connection *conn, unsigned int status,
                                    const char *content_type, char *body, size_t len);

#endif /* MC_TRANSFER_HTTP_GUARD_H */
