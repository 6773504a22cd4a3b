/*
 * offload.c — a store client's offload roles (offload.h): which backend to open, whether to run
 * the worker and the fetch server, and reading disk replicas for gets.
 */
#include "offload.h"

#include "log.h"
#include "mooncake/errors.h"
#include "offload_backend.h"
#include "offload_config.h"
#include "offload_server.h"
#include "offload_worker.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_MAX 1024

struct mc_offload {
    mc_offload_env_t env;
    char client_id[64];
    mc_transfer_engine_t *te;
    uint64_t segment_size;
    int offloader;                 /* runs the worker */
    mc_offload_backend_t *backend; /* the worker's, or the distributed reader's */
    mc_offload_server_t *server;   /* local backend: reads of our files by others */
    mc_offload_worker_t *worker;
    mc_offload_peers_t *peers; /* connections to owners of local-disk replicas */
    atomic_uint_fast64_t fallback_reads;
    atomic_int warned_no_dfs;
};

/* Reads the environment and makes the directories the roles need usable; 0 or a code with err. */
static int check_environment(mc_offload_env_t *env, uint64_t segment_size, int enable_offload,
                             const char *offload_path, int *offloader, char *err, size_t errlen)
{
    int rc = mc_offload_env_read(env, err, errlen);
    if (rc != 0)
        return rc;
    int distributed = env->backend == MC_OFFLOAD_DISTRIBUTED;
    *offloader = segment_size > 0 && (enable_offload || distributed);
    if (offload_path && offload_path[0]) {
        if (strlen(offload_path) >= sizeof(env->storage_path)) {
            snprintf(err, errlen, "offload path %.64s...: too long", offload_path);
            return MC_ERR_INVALID_PARAMS;
        }
        snprintf(env->storage_path, sizeof(env->storage_path), "%s", offload_path);
        env->storage_path_explicit = 1;
    }
    /* The local storage path: the local backend's files, or (distributed) bookkeeping only —
     * made usable when the user named it. */
    if (*offloader && (!distributed || env->storage_path_explicit)) {
        rc = mc_offload_prepare_dir("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", env->storage_path, err,
                                    errlen);
        if (rc != 0)
            return rc;
    }
    if (distributed && !strcmp(env->fs_type, "posix"))
        rc = mc_offload_check_tree("MOONCAKE_DISTRIBUTED_ROOT_DIR", env->root_dir, err, errlen);
    return rc;
}

int mc_offload_check_environment(uint64_t segment_size, int enable_offload,
                                 const char *offload_path, char *err, size_t errlen)
{
    mc_offload_env_t env;
    int offloader;
    return check_environment(&env, segment_size, enable_offload, offload_path, &offloader, err,
                             errlen);
}

int mc_offload_prepare(const mc_offload_setup_t *setup, mc_offload_t **out)
{
    *out = NULL;
    mc_offload_t *o = calloc(1, sizeof(*o));
    if (!o)
        return MC_ERR_INTERNAL_ERROR;
    char err[ERR_MAX] = "";
    snprintf(o->client_id, sizeof(o->client_id), "%s", setup->client_id);
    o->te = setup->te;
    o->segment_size = setup->segment_size;
    if (setup->enable_offload && setup->segment_size == 0)
        MC_WARN("enable_offload: this client contributes no segment, so it has nothing to "
                "offload");
    int rc = check_environment(&o->env, setup->segment_size, setup->enable_offload,
                               setup->offload_path, &o->offloader, err, sizeof(err));
    int distributed = o->env.backend == MC_OFFLOAD_DISTRIBUTED;
    if (rc == 0)
        rc = mc_offload_peers_create(&o->peers);
    if (rc == 0 && (o->offloader || distributed))
        rc = mc_offload_backend_open(&o->env,
                                     distributed ? MC_OFFLOAD_DISTRIBUTED : MC_OFFLOAD_LOCAL,
                                     o->env.storage_path, &o->backend, err, sizeof(err));
    if (rc == 0 && o->offloader)
        mc_offload_backend_clean_temps(o->backend);
    if (rc == 0 && o->offloader && !distributed) {
        rc = mc_offload_server_start(setup->host, setup->te, o->backend, o->env.staging_bytes,
                                     o->env.staging_ttl_ms, &o->server);
        if (rc != 0)
            snprintf(err, sizeof(err), "cannot start the server for reads of local files: %s",
                     mc_error_name(rc));
    }
    if (rc != 0) {
        MC_ERROR("offload: %s", err);
        mc_offload_stop(o);
        mc_offload_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

int mc_offload_start(mc_offload_t *o, mc_rpc_client_t *rpc, uintptr_t segment_base,
                     mc_transfer_engine_t *te)
{
    if (!o->backend)
        return 0;
    if (!o->offloader) {
        int rc = mc_offload_check_registration(rpc, o->client_id, o->backend);
        return rc == MC_ERR_UNABLE_OFFLOAD ? 0 : rc;
    }
    mc_offload_worker_config_t wc = {
        .client_id = o->client_id,
        .rpc = rpc,
        .backend = o->backend,
        .endpoint = o->server ? mc_offload_server_endpoint(o->server) : "",
        .segment_base = segment_base,
        .segment_size = o->segment_size,
        .te = te,
        .env = &o->env,
    };
    int rc = mc_offload_worker_start(&wc, &o->worker);
    if (rc == MC_ERR_UNABLE_OFFLOAD) {
        MC_WARN("offload: the master runs without --enable_offload; objects of this client stay "
                "in memory only");
        return 0;
    }
    return rc;
}

int mc_offload_read(mc_offload_t *o, mc_transfer_engine_t *te, const char *key,
                    const Mc__Replica *rep, void *buf, uint64_t size)
{
    uint64_t version = rep->address;
    int rc;
    if (rep->type == MC_REPLICA_DFS) {
        if (!o->backend || mc_offload_backend_kind(o->backend) != MC_OFFLOAD_DISTRIBUTED) {
            if (!atomic_exchange(&o->warned_no_dfs, 1))
                MC_WARN("object %.64s is on the distributed backend only, which this client does "
                        "not use (set MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed and "
                        "MOONCAKE_DISTRIBUTED_ROOT_DIR to read it)",
                        key);
            return MC_ERR_UNAVAILABLE_IN_CURRENT_MODE;
        }
        rc = mc_offload_backend_read(o->backend, key, version, buf, size);
    } else if (rep->type == MC_REPLICA_LOCAL_DISK) {
        if (o->server && !strcmp(rep->segment_name, mc_offload_server_endpoint(o->server)))
            rc = mc_offload_backend_read(o->backend, key, version, buf, size); /* our own file */
        else
            rc = mc_offload_fetch(o->peers, te, rep->segment_name, key, version, buf, size);
    } else {
        return MC_ERR_INVALID_REPLICA;
    }
    if (rc == 0)
        atomic_fetch_add(&o->fallback_reads, 1);
    else
        MC_WARN("read of %.64s from its %s replica failed: %s", key,
                rep->type == MC_REPLICA_DFS ? "DFS" : "LOCAL_DISK", mc_error_name(rc));
    return rc;
}

void mc_offload_wake(mc_offload_t *o)
{
    if (o)
        mc_offload_worker_wake(o->worker);
}

int mc_offload_set_offloading(mc_offload_t *o, int enabled)
{
    if (!o || !o->worker)
        return MC_ERR_UNAVAILABLE_IN_CURRENT_MODE;
    mc_offload_worker_set_offloading(o->worker, enabled);
    return 0;
}

uint64_t mc_offload_fallback_reads(const mc_offload_t *o)
{
    return o ? atomic_load(&((mc_offload_t *)o)->fallback_reads) : 0;
}

int mc_offload_storage_health(const mc_offload_t *o, mc_fs_health_stats_t *out)
{
    if (!o || !o->backend)
        return -1;
    mc_offload_backend_health_stats(o->backend, out);
    return 0;
}

void mc_offload_get_stats(mc_offload_t *o, mc_store_offload_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!o)
        return;
    mc_offload_worker_stats_t ws;
    mc_offload_worker_get_stats(o->worker, &ws);
    out->enabled = o->worker != NULL;
    out->backend = o->backend ? mc_offload_backend_kind(o->backend) : 0;
    out->healthy = o->worker ? ws.healthy : 1;
    out->offloading = ws.offloading;
    out->tasks_done = ws.done;
    out->tasks_failed = ws.failed;
    out->tasks_stale = ws.stale;
    out->bytes_offloaded = ws.bytes;
    out->files = ws.files;
    out->disk_bytes = ws.disk_bytes;
    out->evicted_files = ws.evicted;
    out->queued = ws.queued;
    out->fallback_reads = atomic_load(&o->fallback_reads);
    if (o->server) {
        mc_offload_server_stats_t ss;
        mc_offload_server_get_stats(o->server, &ss);
        out->served_reads = ss.served;
        out->fetch_connections_refused = ss.connections_refused;
        out->fetch_connections_idle_closed = ss.connections_idle_closed;
        out->fetch_connections_stalled = ss.connections_stalled;
    }
}

int mc_offload_stop_worker(mc_offload_t *o)
{
    if (!o || !o->worker)
        return 0;
    mc_offload_worker_stop(o->worker, 0);
    o->worker = NULL;
    return 1;
}

void mc_offload_stop(mc_offload_t *o)
{
    if (!o)
        return;
    mc_offload_worker_stop(o->worker, o->env.close_drain_ms);
    o->worker = NULL;
    mc_offload_server_stop(o->server);
    o->server = NULL;
}

void mc_offload_free(mc_offload_t *o)
{
    if (!o)
        return;
    mc_offload_stop(o);
    mc_offload_backend_close(o->backend);
    mc_offload_peers_destroy(o->peers);
    free(o);
}
