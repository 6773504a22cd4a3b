/*
 * server.h — a whole master as one object: the Master Service (master_service.h) behind its RPC
 * server (rpc_server.h), failure detector (liveness.h), admin/metrics HTTP server (admin_http.h),
 * optionally the embedded HTTP metadata server (mooncake/http_metadata.h), the operation log on
 * etcd (oplog.h), the leader election (ha.h) and periodic snapshots (snapshot.c). mooncake_master
 * turns its flags into an mc_master_server_config_t and runs one of these; tests and tools may
 * run one in-process the same way.
 *
 * Order of start (each step only once the one before succeeded; a failure logs why, undoes the
 * steps done and returns their error): cluster secret, master, snapshot restore (before anything
 * serves: clients re-mount into the restored index), RPC server (gated shut with HA until this
 * master leads), failure detector, metadata server, admin server, operation log as a standby,
 * election, snapshot thread. Then one line, `Master service started on port N, <settings>`,
 * with the ports as bound.
 *
 * HA: while standing by, the RPC server answers nothing. Once elected, the operation log is
 * promoted (replayed to its head), the master journals every change into it, and with sync ack
 * a change is acknowledged only once it is in etcd. When leadership is lost, the gate refuses
 * every request and deposed_fd becomes readable: this master's index is stale, and the caller
 * stops it and starts a fresh one, which stands by again (upstream's supervisor does the same).
 *
 * Ownership: the config's strings are borrowed until mc_master_server_stop. Thread-safety: start
 * and stop from one thread; the getters from any thread while it runs.
 */
#ifndef MC_MASTER_SERVER_H
#define MC_MASTER_SERVER_H

#include "master_service.h"
#include "mooncake/http_metadata.h"
#include "rpc_server.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mc_master_server mc_master_server_t; /* handle */

typedef struct mc_master_server_config {
    mc_master_config_t master;       /* the Master Service's settings */
    const char *cluster_secret;      /* "" / NULL: none here (the environment may still set one) */
    const char *cluster_secret_file; /* the same, from a file (auth.h) */

    const char *rpc_address; /* the RPC listener: address (also what HA advertises) and port */
    int rpc_port;            /* 0: any free port */
    int rpc_threads;         /* event loops, 1..MC_RPC_MAX_THREADS */
    mc_rpc_limits_t rpc_limits;

    const char *metrics_host; /* the admin/metrics HTTP server */
    int metrics_port;

    int enable_http_metadata_server; /* 1: the embedded metadata server runs too */
    const char *http_metadata_host;
    int http_metadata_port;
    mc_http_metadata_limits_t http_metadata_limits;

    /* Every effective setting on one line, for /metrics/summary and the start-up line: called
     * with the admin port (asked for, then as bound) and the metadata server's port (-1: off). */
    void (*describe)(void *arg, int metrics_port, int http_metadata_port, char *out, size_t cap);
    void *describe_arg;

    const char *etcd_endpoints; /* "host:port[,...]": the election's and the log's etcd */
    const char *cluster_id;     /* their key prefix */
    int enable_ha;              /* the leader election */
    int ha_lease_ttl_s;
    int enable_oplog; /* the operation log (standbys replay it; the leader journals into it) */
    uint32_t oplog_batch_max_entries;
    int oplog_poll_interval_ms;
    int oplog_sync_ack; /* 1: a change is acknowledged once it is in etcd */

    int enable_snapshot;  /* a snapshot every snapshot_interval_ms, and a clean one at the end */
    int snapshot_restore; /* the latest snapshot restored at start */
    const char *snapshot_root;
    const char *snapshot_backup_dir; /* "" / NULL: none */
    unsigned snapshot_retention;
    uint64_t snapshot_timeout_ms;
    uint64_t snapshot_interval_ms;
} mc_master_server_config_t;

/*
 * Starts everything in the order above and logs the start-up line. 0 with *out, or the error of
 * the step that failed (logged: a port that cannot be bound, an etcd that does not answer, ...),
 * with nothing left running; MC_ERR_INTERNAL_ERROR when out of memory or threads.
 */
int mc_master_server_start(const mc_master_server_config_t *config, mc_master_server_t **out);

/* With HA: a descriptor that becomes readable (poll POLLIN) once this master lost leadership;
 * -1 without HA. Owned by the server. */
int mc_master_server_deposed_fd(const mc_master_server_t *s);

/* The ports as bound. */
int mc_master_server_rpc_port(const mc_master_server_t *s);
int mc_master_server_metrics_port(const mc_master_server_t *s);

/*
 * Stops everything and frees it (NULL is a no-op). `final`: the process ends; with snapshots on,
 * the listeners stop first and a clean snapshot is written (nothing can change after it). A
 * deposed master stops with final 0: its index is stale, no snapshot is taken.
 */
void mc_master_server_stop(mc_master_server_t *s, int final);

#endif /* MC_MASTER_SERVER_H */
