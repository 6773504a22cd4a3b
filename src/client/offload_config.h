/*
 * offload_config.h — the offload settings every store client reads from its environment at setup
 * (docs/offload.md has the table). Upstream Mooncake's variable names and defaults, with their
 * upstream spellings accepted:
 *
 *   MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR  local (default; also bucket_storage_backend,
 *                                                file_per_key_storage_backend) | distributed
 *                                                (also distributed_storage_backend)
 *   MOONCAKE_DISTRIBUTED_FS_TYPE                 posix (default) | daos (when built); hf3fs is
 *                                                refused (alias MOONCAKE_DFS_FS_ADAPTER)
 *   MOONCAKE_DISTRIBUTED_ROOT_DIR                shared root, absolute (alias
 * MOONCAKE_DFS_ROOT_DIR) MOONCAKE_DISTRIBUTED_HEALTH_CHECK            false; true: probe at start
 * and periodically MOONCAKE_DISTRIBUTED_XFER_SIZE               0 (unsplit writes)
 *   MOONCAKE_DISTRIBUTED_READ_XFER_SIZE          8m
 *   MOONCAKE_DISTRIBUTED_CHUNK_SIZE              8m
 *   MOONCAKE_DISTRIBUTED_OCLASS                  "" (DAOS object class; ignored by posix)
 *   MOONCAKE_OFFLOAD_FILE_STORAGE_PATH           /data/file_storage (local backend's files;
 *                                                with distributed: local bookkeeping only)
 *   MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES      2 TiB of values on this client's disk
 *   MOONCAKE_OFFLOAD_TOTAL_KEYS_LIMIT            10000000 files
 *   MOONCAKE_OFFLOAD_ENABLE_EVICTION             true: FIFO eviction at the limits (alias
 *                                                ENABLE_EVICTION)
 *   MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS  10
 *   MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES     1280 MiB staging for reads served to others
 *   MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS     5000
 *   MOONCAKE_OFFLOAD_IO_THREADS                  4 (mooncake-c: offload writer threads)
 *   MOONCAKE_OFFLOAD_CLOSE_DRAIN_SECONDS         10 (mooncake-c: close waits this long for the
 *                                                client's queued offloads)
 *
 * Pure functions over getenv and the filesystem; thread-safe.
 */
#ifndef MC_CLIENT_OFFLOAD_CONFIG_H
#define MC_CLIENT_OFFLOAD_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define MC_OFFLOAD_LOCAL 1 /* = OffloadHeartbeatRequest.backend */
#define MC_OFFLOAD_DISTRIBUTED 2
#define MC_OFFLOAD_DEFAULT_STORAGE_PATH "/data/file_storage"

typedef struct mc_offload_env {
    int backend;          /* MC_OFFLOAD_LOCAL or MC_OFFLOAD_DISTRIBUTED */
    int backend_explicit; /* the descriptor variable is set */
    char fs_type[16];
    char root_dir[PATH_MAX];
    int health_check;
    uint64_t write_xfer_size, read_xfer_size, chunk_size;
    char oclass[64];
    uint32_t read_timeout_ms;  /* daos: one read's deadline (MC_TRANSFER_TIMEOUT, seconds) */
    uint32_t write_timeout_ms; /* daos: one write's or remove's deadline
                                  (MOONCAKE_DISTRIBUTED_WRITE_TIMEOUT_SECONDS) */
    char storage_path[PATH_MAX];
    int storage_path_explicit; /* set in the environment */
    uint64_t total_size_limit;
    uint64_t total_keys_limit;
    int enable_eviction;
    unsigned heartbeat_interval_s;
    uint64_t staging_bytes;
    uint64_t staging_ttl_ms;
    unsigned io_threads;
    uint64_t close_drain_ms;
} mc_offload_env_t;

/*
 * Reads and validates every variable above. Returns 0, or MC_ERR_INVALID_PARAMS /
 * MC_ERR_NOT_SUPPORTED (a distributed fs type this binary does not have, or hf3fs) with one
 * sentence in err naming the variable, its value and what is wrong. Logs one WARNING (once per
 * process) when MOONCAKE_DISTRIBUTED_* variables are set without the distributed descriptor.
 */
int mc_offload_env_read(mc_offload_env_t *env, char *err, size_t errlen);

/*
 * Makes `path` a usable directory: absolute, no ".." component, created when missing and its
 * parent is a writable directory, then checked to be a writable directory. `what` names it in
 * the error ("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"). 0 or MC_ERR_INVALID_PARAMS with err.
 */
int mc_offload_prepare_dir(const char *what, const char *path, char *err, size_t errlen);

/*
 * Checks that `path` is a writable directory, or can be created with its parents (the nearest
 * existing ancestor is a writable directory). Creates nothing. 0 or MC_ERR_INVALID_PARAMS.
 */
int mc_offload_check_tree(const char *what, const char *path, char *err, size_t errlen);

#endif /* MC_CLIENT_OFFLOAD_CONFIG_H */
