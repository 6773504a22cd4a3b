/*
 * offload_worker.h — a client's offload worker: takes the master's offload tasks for objects in
 * this client's segment and writes them through its backend (offload_backend.h).
 *
 * Threads: one control thread and MOONCAKE_OFFLOAD_IO_THREADS writers. The control thread sends
 * the heartbeat (OFFLOAD_HEARTBEAT): it carries control — registration, health, lease renewals,
 * file deletions owed to this client, task hand-out — not the pace: whenever the local queue has
 * room it asks again at once, and the store's ping wakes it when the master says tasks are
 * waiting; otherwise it beats every MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS. A writer reads
 * the value straight from this client's own segment (local memory), writes it with the adapter
 * and reports the result (NOTIFY_OFFLOAD_RESULT).
 *
 * The worker keeps a ledger of the files it holds (FIFO by write order; for the local backend it
 * is rebuilt by a rescan at start, ordered by version): it enforces
 * MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES / _TOTAL_KEYS_LIMIT by evicting the oldest files — the
 * master is told (EVICT_DISK_REPLICA) before they are deleted — and it is what the client reports
 * when the master asks for a resync (after a master restart, or after this client expired).
 *
 * With MOONCAKE_DISTRIBUTED_HEALTH_CHECK the backend is probed every heartbeat interval (at least
 * 5 s); while a probe fails the worker takes no tasks and the master shows it unhealthy.
 *
 * Thread-safety: every function may be called from any thread; stop exactly once.
 */
#ifndef MC_CLIENT_OFFLOAD_WORKER_H
#define MC_CLIENT_OFFLOAD_WORKER_H

#include "mooncake/transfer_engine.h"
#include "offload_backend.h"
#include "rpc.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mc_offload_worker mc_offload_worker_t;

typedef struct mc_offload_worker_config {
    const char *client_id;
    mc_rpc_client_t *rpc;          /* to the master; borrowed */
    mc_offload_backend_t *backend; /* borrowed */
    const char *endpoint;          /* local backend: where others read this client's files */
    uintptr_t segment_base;        /* this client's segment */
    uint64_t segment_size;
    /* The engine owning that segment (borrowed; may be NULL): a promotion's copy into the
     * segment is admitted under its write fence with the extent's token. */
    mc_transfer_engine_t *te;
    const mc_offload_env_t *env; /* copied */
} mc_offload_worker_config_t;

typedef struct mc_offload_worker_stats {
    uint64_t done, failed, stale, bytes; /* tasks written / failed / refused as stale */
    uint64_t files, disk_bytes;          /* in the ledger now */
    uint64_t evicted;                    /* files evicted for capacity */
    uint64_t queued;                     /* tasks taken, not yet written */
    int healthy;
    int offloading;
} mc_offload_worker_stats_t;

/*
 * Rebuilds the ledger (local backend: rescan), registers with the master (first heartbeat) and
 * starts the threads. Errors: the master's code, with one ERROR line saying why —
 * MC_ERR_UNABLE_OFFLOAD (the master runs without --enable_offload), MC_ERR_INVALID_PARAMS (the
 * master refused this backend), an RPC code.
 */
int mc_offload_worker_start(const mc_offload_worker_config_t *cfg, mc_offload_worker_t **out);

/*
 * A registration check only (a client that reads distributed replicas but does not offload):
 * one heartbeat with offloading = 0. Same errors as start.
 */
int mc_offload_check_registration(mc_rpc_client_t *rpc, const char *client_id,
                                  mc_offload_backend_t *backend);

/* Wakes the control thread (the master has tasks for this client). */
void mc_offload_worker_wake(mc_offload_worker_t *w);
/* 0 pauses taking tasks (queued ones keep their objects pinned at the master), 1 resumes. */
void mc_offload_worker_set_offloading(mc_offload_worker_t *w, int enabled);
void mc_offload_worker_get_stats(mc_offload_worker_t *w, mc_offload_worker_stats_t *out);
/*
 * Stops: keeps taking and writing this client's tasks until the master has none left for it or
 * drain_ms passed, then tells the master it leaves (its local-disk replicas are dropped), joins
 * the threads and frees the worker. NULL is a no-op.
 */
void mc_offload_worker_stop(mc_offload_worker_t *w, uint64_t drain_ms);

#endif /* MC_CLIENT_OFFLOAD_WORKER_H */
