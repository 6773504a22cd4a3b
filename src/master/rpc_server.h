/*
 * rpc_server.h — the master's RPC server: frames (frame.h) with store.proto bodies over TCP,
 * dispatched to the Master Service (master_service.h). The client side is src/wire/rpc.h.
 *
 * Threads: `threads` libuv event loops, each on its own thread. The first loop also accepts on
 * the listening socket and hands each new connection to the loops in turn, so one connection is
 * always served by one thread and its replies leave in request order. Handlers call the master
 * directly on the loop thread (the master does no I/O on its request path).
 *
 * Protocol errors are a connection's own business: a bad magic or version, a body longer than
 * MC_RPC_MAX_BODY, a body that does not decode as the opcode's message, or an unknown opcode
 * logs one WARNING naming the peer and closes that connection only. Batches larger than
 * MC_RPC_MAX_BATCH keys (or MC_RPC_MAX_SEGMENTS segments) get a whole-request
 * MC_ERR_INVALID_PARAMS reply and the connection stays open.
 *
 * The process must ignore SIGPIPE (a peer that vanishes mid-reply would otherwise kill it);
 * mooncake_master does.
 *
 * Ownership: the server borrows `master`, which must outlive it. Thread-safety: start/stop from
 * one thread; mc_rpc_server_port and mc_rpc_server_get_stats from any thread.
 */
#ifndef MC_MASTER_RPC_SERVER_H
#define MC_MASTER_RPC_SERVER_H

#include "master_service.h"

#include <stddef.h>
#include <stdint.h>

/* Keys in one KeysRequest, segments in one SegmentRequest. */
#define MC_RPC_MAX_BATCH 65536
#define MC_RPC_MAX_SEGMENTS 1024
/* Open connections beyond this are accepted and closed at once (with a rate-limited WARNING). */
#define MC_RPC_MAX_CONNECTIONS 16384
/* Unsent reply bytes per connection above which the server stops reading that connection. */
#define MC_RPC_MAX_PENDING_REPLY_BYTES (64u << 20)
#define MC_RPC_MAX_THREADS 256

typedef struct mc_rpc_server mc_rpc_server_t; /* handle */

/*
 * Binds host:port (host "0.0.0.0" = every interface; port 0 = any free port), starts `threads`
 * (1..MC_RPC_MAX_THREADS) loop threads and serves until mc_rpc_server_stop.
 * Returns 0, MC_ERR_INVALID_PARAMS (bad host, port or thread count) or MC_ERR_INTERNAL_ERROR
 * (cannot bind: one ERROR line names host:port and the reason).
 */
int mc_rpc_server_start(mc_master_t *master, const char *host, int port, int threads,
                        mc_rpc_server_t **out);
/* The port actually bound. */
int mc_rpc_server_port(const mc_rpc_server_t *server);
/* Closes every connection, stops and joins the threads, frees the server. NULL is a no-op. */
void mc_rpc_server_stop(mc_rpc_server_t *server);

/* Per-method counters. A call succeeds when its reply carries code 0 for the request and for
 * every key (ExistKey of an absent key is a success; a miss in GetReplicaList is not). */
typedef struct mc_rpc_method_stats {
    const char *method; /* upstream's RPC name: "PutStart", "GetReplicaList", ... (static) */
    uint64_t total;
    uint64_t success;
} mc_rpc_method_stats_t;

typedef struct mc_rpc_server_stats {
    uint64_t connections_accepted; /* since start */
    uint64_t connections_active;
    uint64_t connections_rejected; /* over MC_RPC_MAX_CONNECTIONS */
    uint64_t protocol_errors;      /* connections closed for a malformed frame or body */
} mc_rpc_server_stats_t;

/* Number of methods; mc_rpc_server_get_methods fills up to that many entries. */
#define MC_RPC_METHOD_COUNT 20

/* Fills out (may be NULL) and up to `capacity` method entries (methods may be NULL); returns the
 * number of methods written. A NULL server gives zero counters for every method. */
size_t mc_rpc_server_get_stats(const mc_rpc_server_t *server, mc_rpc_server_stats_t *out,
                               mc_rpc_method_stats_t *methods, size_t capacity);

#endif /* MC_MASTER_RPC_SERVER_H */
