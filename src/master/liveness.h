/*
 * liveness.h — fast failure detection of holder processes, beside the --client_ttl sweep.
 *
 * A process that dies (SIGKILL, a crash, the OOM killer) closes its sockets at once: the
 * master's RPC connection from it reads end-of-file and its Transfer Engine port starts refusing
 * connections. The RPC server tells the detector when a connection that spoke for a client closes
 * (mc_rpc_server_set_peer_closed, with mc_liveness_peer_closed as the hook); the detector thread
 * then probes every endpoint of that client's segments (a TCP connect): it declares the client
 * gone (mc_master_client_gone: segments unmounted, puts revoked) only when every endpoint refused
 * the connection (ECONNREFUSED: nothing listens there) in each of MC_LIVENESS_ROUNDS rounds,
 * MC_LIVENESS_ROUND_MS apart, and the client did not ping meanwhile. Anything else — a connect
 * that succeeds (the process runs, or is only stopped: its listening socket still completes
 * handshakes), times out or finds no route (a partition) — leaves the client to its TTL, so a
 * stalled or cut-off holder is never declared dead early. A holder restarted on the same
 * endpoint is a new client (a new id, a new mount), never the old one revived.
 *
 * Cost: a suspect costs at most MC_LIVENESS_ROUNDS x (endpoints x MC_LIVENESS_CONNECT_MS) of the
 * detector thread; the queue holds at most MC_LIVENESS_QUEUE suspects (more are dropped, counted,
 * and left to the TTL). One probe at a time, so a flood of closing connections cannot make the
 * master connect out more than one endpoint per MC_LIVENESS_CONNECT_MS.
 *
 * Thread-safety: mc_liveness_peer_closed may be called from any thread and never blocks on a
 * probe; start/stop from one thread. Ownership: borrows the master, which must outlive it.
 */
#ifndef MC_MASTER_LIVENESS_H
#define MC_MASTER_LIVENESS_H

#include "master_service.h"

#include <stdint.h>

#define MC_LIVENESS_ROUNDS 3
#define MC_LIVENESS_ROUND_MS 100
#define MC_LIVENESS_CONNECT_MS 100
#define MC_LIVENESS_QUEUE 1024
/* Endpoints probed per client at most (a client mounts one engine, so one endpoint, normally). */
#define MC_LIVENESS_MAX_ENDPOINTS 16

typedef struct mc_liveness mc_liveness_t;

typedef struct mc_liveness_stats {
    uint64_t suspects; /* clients whose connection closed, queued for a probe */
    uint64_t gone;     /* of those, declared gone */
    uint64_t dropped;  /* suspects not queued: the queue was full */
} mc_liveness_stats_t;

/* Starts the detector thread. 0, MC_ERR_INVALID_PARAMS (NULL), MC_ERR_INTERNAL_ERROR. */
int mc_liveness_start(mc_master_t *master, mc_liveness_t **out);
/* The RPC server's peer-closed hook (rpc_server.h): arg is the mc_liveness_t. */
void mc_liveness_peer_closed(void *arg, const char *client_id);
void mc_liveness_get_stats(mc_liveness_t *l, mc_liveness_stats_t *out);
/* Stops and joins the thread (a probe under way finishes first), frees it. NULL is a no-op. */
void mc_liveness_stop(mc_liveness_t *l);

#endif /* MC_MASTER_LIVENESS_H */
