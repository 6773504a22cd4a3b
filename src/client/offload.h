/*
 * offload.h — what a store client (store_client.c) does for offload, in one place: reads the
 * offload environment at setup, opens the backend it needs, serves reads of its local files,
 * runs the offload worker, and reads disk replicas for gets that find no memory replica.
 *
 * Roles, decided at setup:
 *   distributed reader   MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed: opens the
 *                        shared root (marker checked) and reads DFS replicas directly.
 *   offloader            contributes a segment and either enable_offload is set or the
 *                        distributed descriptor is: runs the worker (when the master has
 *                        --enable_offload; otherwise one WARNING and objects stay in memory).
 *                        With the local backend it also serves reads of its files.
 *   anyone               reads LOCAL_DISK replicas through their owner.
 *
 * Setup is in two steps because the worker registers with the master, which needs the segment
 * mounted first: mc_offload_prepare() before the mount (validation, backend, fetch server — its
 * staging memory must be in the segment before peers learn of it), mc_offload_start() after.
 *
 * Thread-safety: read, wake and stats from any thread; prepare/start/stop from one.
 */
#ifndef MC_CLIENT_OFFLOAD_H
#define MC_CLIENT_OFFLOAD_H

#include "mooncake/fs_adapter.h"
#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"
#include "rpc.h"
#include "store.pb-c.h"

#include <stdint.h>

typedef struct mc_offload mc_offload_t;

typedef struct mc_offload_setup {
    const char *client_id;
    mc_transfer_engine_t *te; /* borrowed */
    const char *host;         /* this client's host (the fetch server listens there) */
    uint64_t segment_size;    /* 0: pure client */
    int enable_offload;       /* mc_store_config_t.enable_offload */
    const char *offload_path; /* mc_store_config_t.offload_path, or NULL */
} mc_offload_setup_t;

/*
 * Validates the environment and opens what the roles need. Returns 0 with *out set (also for a
 * client with no role: it still reads LOCAL_DISK replicas through their owners), or an error with
 * one ERROR line (bad variable, unusable directory, fs type not built, marker of another fs type,
 * failed health check).
 */
int mc_offload_prepare(const mc_offload_setup_t *setup, mc_offload_t **out);

/*
 * The checks of prepare that need no master or Transfer Engine: the variables, and the
 * directories (created when missing and their parent is writable). For programs that want to
 * refuse to start with one line before setting anything up (mooncake_client).
 */
int mc_offload_check_environment(uint64_t segment_size, int enable_offload,
                                 const char *offload_path, char *err, size_t errlen);

/*
 * After the segment is mounted: registers with the master and starts the worker (offloaders),
 * or checks the distributed backend with the master (readers). `segment_base` is where the
 * segment lives; `te` is the engine owning it (borrowed), under whose write fence promotions copy
 * into it. Returns 0, or the master's refusal (logged).
 */
int mc_offload_start(mc_offload_t *o, mc_rpc_client_t *rpc, uintptr_t segment_base,
                     mc_transfer_engine_t *te);

/*
 * Reads a disk replica (LOCAL_DISK or DFS) of `key` into buf[0..size). Returns 0 or a code:
 * MC_ERR_CHECKSUM_MISMATCH (never wrong bytes), MC_ERR_FILE_NOT_FOUND, MC_ERR_UNAVAILABLE_IN_
 * CURRENT_MODE (a DFS replica and no distributed backend here), transfer/RPC codes.
 */
int mc_offload_read(mc_offload_t *o, mc_transfer_engine_t *te, const char *key,
                    const Mc__Replica *rep, void *buf, uint64_t size);

/* The store's ping learnt the master has tasks for this client. */
void mc_offload_wake(mc_offload_t *o);
int mc_offload_set_offloading(mc_offload_t *o, int enabled);
/* Reads served from disk replicas by this client so far. */
uint64_t mc_offload_fallback_reads(const mc_offload_t *o);
/* The offload storage's counts of not answering (fs_adapter.h); -1 when this client has no
 * offload backend (nothing filled), else 0. */
int mc_offload_storage_health(const mc_offload_t *o, mc_fs_health_stats_t *out);
void mc_offload_get_stats(mc_offload_t *o, mc_store_offload_stats_t *out);

/*
 * Stops the worker alone, without draining (for mc_store_unmount_local_disk, upstream's
 * DrainLocalDiskSegment): its last heartbeat tells the master, which drops this client's
 * local-disk replicas and hands it no more tasks; the fetch server keeps serving reads of its
 * files until mc_offload_stop. Returns 1 when a worker was running, else 0.
 */
int mc_offload_stop_worker(mc_offload_t *o);

/* Stops the worker (draining as configured) and the fetch server. Call before the Transfer
 * Engine is destroyed. */
void mc_offload_stop(mc_offload_t *o);
void mc_offload_free(mc_offload_t *o);

#endif /* MC_CLIENT_OFFLOAD_H */
