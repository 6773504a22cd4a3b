/*
 * http_guard.h — a connection cap and a per-request time bound for the libmicrohttpd servers (the
 * HTTP metadata server here, the master's admin server, a store client's HTTP server).
 *
 * Cap: one more connection than `max_connections` is accepted and closed at once, counted, with a
 * WARNING at most once a second naming the server. One peer (one address, whatever its ports)
 * may hold at most max_connections / 4 of them (all of a cap below
 * MC_HTTP_GUARD_PER_PEER_MIN_CAP): a peer that floods a server with
 * idle connections cannot take the slots of everybody else, so /health keeps answering a
 * liveness probe (counted in refused and, apart, in refused_per_peer; the WARNING names the
 * peer). libmicrohttpd has MHD_OPTION_CONNECTION_LIMIT,
 * but it refuses silently; the guard counts open connections (MHD_OPTION_NOTIFY_CONNECTION) and
 * refuses in the accept policy callback (the apc argument of MHD_start_daemon).
 *
 * Time bound: libmicrohttpd's MHD_OPTION_CONNECTION_TIMEOUT restarts on every byte, so a client
 * trickling a header a byte every few seconds holds its slot forever (slowloris). The guard gives
 * every request an absolute bound of `request_timeout_ms`, counted from the connection's accept
 * or, on a keep-alive connection, from the completion of its previous response, until its
 * response has been sent (libmicrohttpd's request-completed notification). A connection past it
 * is aborted: a sweeper thread shuts its socket down (shutdown(SHUT_RDWR)), and libmicrohttpd
 * then closes it. Aborts are counted (mc_http_guard_timed_out), with a WARNING at most once a
 * second. A keep-alive connection idle for the bound is closed the same way.
 *
 * Use: mc_http_guard_init, then MHD_start_daemon with apc = mc_http_guard_accept, apc_cls = the
 * guard, MHD_OPTION_NOTIFY_CONNECTION mc_http_guard_notify, MHD_OPTION_NOTIFY_COMPLETED
 * mc_http_guard_completed (or a server's own completion callback that calls it), each with the
 * guard as closure, and MHD_OPTION_CONNECTION_LIMIT MC_HTTP_GUARD_HARD_LIMIT(max) as a backstop;
 * after MHD_stop_daemon, mc_http_guard_destroy.
 *
 * Ownership: the caller owns the guard, which must outlive the daemon. The callbacks run on the
 * daemon's thread; mc_http_guard_refused / _active / _timed_out may be called from any thread.
 *
 * Also the glue every one of those servers needs: mc_http_mhd_log (libmicrohttpd's diagnostics
 * into our log) and mc_http_reply_owned (queue a malloc'd body as the reply).
 */
#ifndef MC_TRANSFER_HTTP_GUARD_H
#define MC_TRANSFER_HTTP_GUARD_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define MC_HTTP_GUARD_HARD_LIMIT(max) ((max) + 16u)
#define MC_HTTP_GUARD_PER_PEER_MIN_CAP 16u

struct mc_http_guard_conn; /* one per open connection, private to http_guard.c */

typedef struct mc_http_guard {
    const char *what; /* server name for log lines (static) */
    unsigned max_connections;
    unsigned max_per_peer;       /* max_connections / 4, or all of a small cap */
    uint64_t request_timeout_ms; /* absolute bound per request; 0 = none */
    atomic_uint active;
    atomic_uint_fast64_t refused;          /* over either cap */
    atomic_uint_fast64_t refused_per_peer; /* of those, over the per-peer cap */
    atomic_uint_fast64_t timed_out;
    atomic_uint_fast64_t last_log_ms;
    atomic_uint_fast64_t last_timeout_log_ms;
    pthread_mutex_t lock; /* guards conns, stopping */
    pthread_cond_t wake;  /* the sweeper's sleep; signalled by destroy */
    struct mc_http_guard_conn *conns;
    int stopping;
    int sweeping; /* the sweeper thread runs */
    pthread_t sweeper;
} mc_http_guard_t;

/* Sets up g and, when request_timeout_ms > 0, starts its sweeper thread (which wakes every
 * request_timeout_ms / 20, at least 50 ms and at most 500 ms). 0, or MC_ERR_INTERNAL_ERROR when
 * the thread cannot be started (g is then left destroyed; do not call mc_http_guard_destroy). */
int mc_http_guard_init(mc_http_guard_t *g, const char *what, unsigned max_connections,
                       uint64_t request_timeout_ms);
/* Stops the sweeper and frees what is left; call after MHD_stop_daemon. */
void mc_http_guard_destroy(mc_http_guard_t *g);
/* Accept policy callback, MHD_start_daemon's apc (apc_cls = the guard). */
enum MHD_Result mc_http_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* MHD_OPTION_NOTIFY_CONNECTION callback (cls = the guard): tracks the connection's socket and its
 * request's start. Without memory to track it the connection is shut down at once. */
void mc_http_guard_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe);
/* MHD_OPTION_NOTIFY_COMPLETED callback (cls = the guard): the next request on this connection
 * starts its bound now. A server with its own completion callback calls this from it. */
void mc_http_guard_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                             enum MHD_RequestTerminationCode toe);
uint64_t mc_http_guard_refused(mc_http_guard_t *g);
/* Of those, refused because their peer already held max_per_peer connections. */
uint64_t mc_http_guard_refused_per_peer(mc_http_guard_t *g);
unsigned mc_http_guard_active(mc_http_guard_t *g);
/* Connections aborted for a request over request_timeout_ms, since init. */
uint64_t mc_http_guard_timed_out(mc_http_guard_t *g);

/* MHD_OPTION_EXTERNAL_LOGGER callback: one WARNING line per libmicrohttpd diagnostic (bind
 * failures, malformed requests), prefixed with cls, the server's name (a static string). */
void mc_http_mhd_log(void *cls, const char *fmt, va_list ap);

/* For an access handler that ignores request bodies: 1 when the request is whole (headers and
 * any body, which is discarded) and the handler should queue its reply; 0 when it should return
 * MHD_YES and wait for the next call. A reply queued on the first call (headers only) makes
 * libmicrohttpd close the connection after it; waiting for the last call keeps keep-alive. The
 * marker stored in *req_cls is static: nothing to free. */
int mc_http_request_whole(void **req_cls, size_t *upload_data_size);

/* Queues `body` (malloc'd, `len` bytes; ownership passes to libmicrohttpd, or it is freed here on
 * failure) with `content_type` and `status` as the reply on conn. NULL body (the caller ran out
 * of memory) or a failure: MHD_NO, and libmicrohttpd closes the connection. */
enum MHD_Result mc_http_reply_owned(struct MHD_Connection *conn, unsigned int status,
                                    const char *content_type, char *body, size_t len);

#endif /* MC_TRANSFER_HTTP_GUARD_H */
