/*
 * offload_config.c — reading and checking the offload environment (offload_config.h).
 *
 * Every check happens here, at setup, so a bad value stops the client with one sentence instead
 * of failing at the first offload. Directories are made usable the way an operator would: a
 * missing directory is created when its parent exists and is writable; anything else (a parent
 * that is a regular file, a read-only mount) is reported with the path and the errno text.
 */
#include "offload_config.h"

#include "errbuf.h"
#include "log.h"
#include "mooncake/errors.h"
#include "mooncake/fs_adapter.h"
#include "parse.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SIZE_LIMIT (2ull << 40)
#define DEFAULT_KEYS_LIMIT 10000000ull
#define DEFAULT_HEARTBEAT_S 10
#define MAX_HEARTBEAT_S 3600
#define DEFAULT_STAGING (1280ull << 20)
#define DEFAULT_STAGING_TTL_MS 5000
#define DEFAULT_IO_THREADS 4
#define MAX_IO_THREADS 64
#define DEFAULT_CLOSE_DRAIN_S 10

/* The first of two names that is set (non-empty), or NULL; *name receives which. */
static const char *env2(const char *a, const char *b, const char **name)
{
    const char *v = getenv(a);
    *name = a;
    if ((!v || !*v) && b) {
        v = getenv(b);
        *name = b;
    }
    if (!v || !*v) {
        *name = a;
        return NULL;
    }
    return v;
}

static int env_size(const char *a, const char *b, uint64_t def, uint64_t *out, char *err,
                    size_t errlen)
{
    const char *name;
    const char *v = env2(a, b, &name);
    *out = def;
    if (!v)
        return 0;
    char msg[256];
    if (mc_parse_size(v, out, msg, sizeof(msg)) != 0)
        return mc_fail(err, errlen, "%s=%s: %s", name, v, msg);
    return 0;
}

static int env_bool(const char *a, const char *b, int def, int *out, char *err, size_t errlen)
{
    const char *name;
    const char *v = env2(a, b, &name);
    *out = def;
    if (!v)
        return 0;
    char msg[256];
    if (mc_parse_bool(v, out, msg, sizeof(msg)) != 0)
        return mc_fail(err, errlen, "%s=%s: %s", name, v, msg);
    return 0;
}

static int env_int(const char *a, int64_t lo, int64_t hi, int64_t def, int64_t *out, char *err,
                   size_t errlen)
{
    const char *name;
    const char *v = env2(a, NULL, &name);
    *out = def;
    if (!v)
        return 0;
    char msg[256];
    if (mc_parse_int64(v, lo, hi, out, msg, sizeof(msg)) != 0)
        return mc_fail(err, errlen, "%s=%s: %s", name, v, msg);
    return 0;
}

static int env_string(const char *a, const char *b, const char *def, char *out, size_t cap,
                      char *err, size_t errlen)
{
    const char *name;
    const char *v = env2(a, b, &name);
    if (!v)
        v = def;
    if (strlen(v) >= cap)
        return mc_fail(err, errlen, "%s: the value is longer than %zu bytes", name, cap - 1);
    snprintf(out, cap, "%s", v);
    return 0;
}

static int parse_descriptor(const char *v, int *backend)
{
    if (!strcmp(v, "local") || !strcmp(v, "bucket_storage_backend") ||
        !strcmp(v, "file_per_key_storage_backend")) {
        *backend = MC_OFFLOAD_LOCAL;
        return 0;
    }
    if (!strcmp(v, "distributed") || !strcmp(v, "distributed_storage_backend")) {
        *backend = MC_OFFLOAD_DISTRIBUTED;
        return 0;
    }
    return -1;
}

static int read_backend(mc_offload_env_t *e, char *err, size_t errlen)
{
    const char *name;
    const char *v = env2("MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR", NULL, &name);
    e->backend = MC_OFFLOAD_LOCAL;
    e->backend_explicit = v != NULL;
    if (v && parse_descriptor(v, &e->backend) != 0)
        return mc_fail(
            err, errlen,
            "MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=%s: expected local or distributed "
            "(or upstream's bucket_storage_backend, file_per_key_storage_backend, "
            "distributed_storage_backend)",
            v);
    return 0;
}

/* The distributed variables: checked only for the distributed backend, warned about otherwise. */
static int read_distributed(mc_offload_env_t *e, char *err, size_t errlen)
{
    static atomic_int warned;
    static const char *const names[] = {"MOONCAKE_DISTRIBUTED_FS_TYPE",
                                        "MOONCAKE_DISTRIBUTED_ROOT_DIR",
                                        "MOONCAKE_DISTRIBUTED_HEALTH_CHECK",
                                        "MOONCAKE_DISTRIBUTED_XFER_SIZE",
                                        "MOONCAKE_DISTRIBUTED_READ_XFER_SIZE",
                                        "MOONCAKE_DISTRIBUTED_CHUNK_SIZE",
                                        "MOONCAKE_DISTRIBUTED_OCLASS",
                                        "MOONCAKE_DISTRIBUTED_WRITE_TIMEOUT_SECONDS",
                                        NULL};
    int rc = env_string("MOONCAKE_DISTRIBUTED_FS_TYPE", "MOONCAKE_DFS_FS_ADAPTER", "posix",
                        e->fs_type, sizeof(e->fs_type), err, errlen);
    if (rc == 0)
        rc = env_string("MOONCAKE_DISTRIBUTED_ROOT_DIR", "MOONCAKE_DFS_ROOT_DIR", "", e->root_dir,
                        sizeof(e->root_dir), err, errlen);
    if (rc == 0)
        rc = env_bool("MOONCAKE_DISTRIBUTED_HEALTH_CHECK", NULL, 0, &e->health_check, err, errlen);
    if (rc == 0)
        rc = env_size("MOONCAKE_DISTRIBUTED_XFER_SIZE", NULL, MC_FS_DEFAULT_WRITE_XFER,
                      &e->write_xfer_size, err, errlen);
    if (rc == 0)
        rc = env_size("MOONCAKE_DISTRIBUTED_READ_XFER_SIZE", NULL, MC_FS_DEFAULT_READ_XFER,
                      &e->read_xfer_size, err, errlen);
    if (rc == 0)
        rc = env_size("MOONCAKE_DISTRIBUTED_CHUNK_SIZE", NULL, MC_FS_DEFAULT_CHUNK, &e->chunk_size,
                      err, errlen);
    if (rc == 0)
        rc = env_string("MOONCAKE_DISTRIBUTED_OCLASS", NULL, "", e->oclass, sizeof(e->oclass), err,
                        errlen);
    /* A read is a transfer to its caller: the Transfer Engine's deadline (upstream's variable,
     * seconds). A write is an offload task's: a minute by default. */
    int64_t read_s = MC_FS_DEFAULT_TIMEOUT_MS / 1000, write_s = 0, v;
    const char *tv = getenv("MC_TRANSFER_TIMEOUT");
    char msg[64];
    if (tv && *tv && mc_parse_int64(tv, 1, 86400, &v, msg, sizeof(msg)) == 0)
        read_s = v; /* read as the Transfer Engine reads it: anything else is its default */
    if (rc == 0)
        rc = env_int("MOONCAKE_DISTRIBUTED_WRITE_TIMEOUT_SECONDS", 1, 3600, 60, &write_s, err,
                     errlen);
    e->read_timeout_ms = (uint32_t)(read_s * 1000);
    e->write_timeout_ms = (uint32_t)(write_s * 1000);
    if (rc != 0)
        return rc;
    if (e->backend != MC_OFFLOAD_DISTRIBUTED) {
        for (size_t i = 0; names[i]; i++) {
            const char *v = getenv(names[i]);
            if (v && *v && !atomic_exchange(&warned, 1)) {
                MC_WARN("%s is set but MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR is not "
                        "distributed: this client keeps the local offload backend",
                        names[i]);
                break;
            }
        }
        return 0;
    }
    if (!strcmp(e->fs_type, "hf3fs")) {
        mc_fail(err, errlen,
                "MOONCAKE_DISTRIBUTED_FS_TYPE=hf3fs is not supported by mooncake-c "
                "(use posix on the 3FS FUSE mount, or daos)");
        return MC_ERR_NOT_SUPPORTED;
    }
    if (strcmp(e->fs_type, "posix") != 0 && strcmp(e->fs_type, "daos") != 0)
        return mc_fail(err, errlen, "MOONCAKE_DISTRIBUTED_FS_TYPE=%s: expected posix or daos",
                       e->fs_type);
    if (!mc_fs_type_supported(e->fs_type)) {
        mc_fail(err, errlen,
                "MOONCAKE_DISTRIBUTED_FS_TYPE=%s: this build has no %s adapter (rebuild with "
                "-DUSE_DAOS=ON)",
                e->fs_type, e->fs_type);
        return MC_ERR_NOT_SUPPORTED;
    }
    if (!e->root_dir[0])
        return mc_fail(err, errlen,
                       "MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed needs "
                       "MOONCAKE_DISTRIBUTED_ROOT_DIR (the shared directory every client mounts)");
    if (e->root_dir[0] != '/')
        return mc_fail(err, errlen, "MOONCAKE_DISTRIBUTED_ROOT_DIR=%s: not an absolute path",
                       e->root_dir);
    if (e->write_xfer_size > MC_FS_XFER_MAX || e->read_xfer_size > MC_FS_XFER_MAX ||
        e->chunk_size > MC_FS_XFER_MAX)
        return mc_fail(err, errlen,
                       "MOONCAKE_DISTRIBUTED_XFER_SIZE, _READ_XFER_SIZE and _CHUNK_SIZE must not "
                       "exceed 4 GiB");
    return 0;
}

int mc_offload_env_read(mc_offload_env_t *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof(*e));
    int64_t hb, threads, drain, ttl;
    int rc = read_backend(e, err, errlen);
    if (rc == 0)
        rc = read_distributed(e, err, errlen);
    if (rc == 0)
        rc = env_string("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", NULL, MC_OFFLOAD_DEFAULT_STORAGE_PATH,
                        e->storage_path, sizeof(e->storage_path), err, errlen);
    if (rc == 0)
        rc = env_size("MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES", NULL, DEFAULT_SIZE_LIMIT,
                      &e->total_size_limit, err, errlen);
    if (rc == 0)
        rc = env_size("MOONCAKE_OFFLOAD_TOTAL_KEYS_LIMIT", NULL, DEFAULT_KEYS_LIMIT,
                      &e->total_keys_limit, err, errlen);
    if (rc == 0)
        rc = env_bool("MOONCAKE_OFFLOAD_ENABLE_EVICTION", "ENABLE_EVICTION", 1, &e->enable_eviction,
                      err, errlen);
    if (rc == 0)
        rc = env_int("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS", 1, MAX_HEARTBEAT_S,
                     DEFAULT_HEARTBEAT_S, &hb, err, errlen);
    if (rc == 0)
        rc = env_size("MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES", NULL, DEFAULT_STAGING,
                      &e->staging_bytes, err, errlen);
    if (rc == 0)
        rc = env_int("MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS", 1, INT32_MAX,
                     DEFAULT_STAGING_TTL_MS, &ttl, err, errlen);
    if (rc == 0)
        rc = env_int("MOONCAKE_OFFLOAD_IO_THREADS", 1, MAX_IO_THREADS, DEFAULT_IO_THREADS, &threads,
                     err, errlen);
    if (rc == 0)
        rc = env_int("MOONCAKE_OFFLOAD_CLOSE_DRAIN_SECONDS", 0, MAX_HEARTBEAT_S,
                     DEFAULT_CLOSE_DRAIN_S, &drain, err, errlen);
    if (rc != 0)
        return rc;
    e->storage_path_explicit = getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH") &&
                               *getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH");
    e->heartbeat_interval_s = (unsigned)hb;
    e->staging_ttl_ms = (uint64_t)ttl;
    e->io_threads = (unsigned)threads;
    e->close_drain_ms = (uint64_t)drain * 1000;
    if (e->total_size_limit == 0)
        return mc_fail(err, errlen, "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES must be above 0");
    if (e->total_keys_limit == 0)
        return mc_fail(err, errlen, "MOONCAKE_OFFLOAD_TOTAL_KEYS_LIMIT must be above 0");
    if (e->staging_bytes < 4096)
        return mc_fail(err, errlen,
                       "MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES must be at least 4096");
    return 0;
}

/* Directory checks ----------------------------------------------------------------------------- */

static int is_writable_dir(const char *path, char *why, size_t whylen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "not a directory");
        return 0;
    }
    if (access(path, W_OK | X_OK) != 0) {
        snprintf(why, whylen, "not writable: %s", strerror(errno));
        return 0;
    }
    return 1;
}

int mc_offload_prepare_dir(const char *what, const char *path, char *err, size_t errlen)
{
    if (path[0] != '/')
        return mc_fail(err, errlen, "%s=%s: not an absolute path", what, path);
    if (strstr(path, "/../") || (strlen(path) >= 3 && !strcmp(path + strlen(path) - 3, "/..")))
        return mc_fail(err, errlen, "%s=%s: \"..\" is not allowed", what, path);
    char why[256];
    if (is_writable_dir(path, why, sizeof(why)))
        return 0;
    struct stat st;
    if (stat(path, &st) == 0 || errno != ENOENT)
        return mc_fail(err, errlen, "%s=%s: unusable: %s", what, path, why);
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", path);
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == '\0') { /* trailing slashes */
        *slash = '\0';
        slash = strrchr(parent, '/');
    }
    if (slash == parent)
        parent[1] = '\0';
    else if (slash)
        *slash = '\0';
    if (!is_writable_dir(parent, why, sizeof(why)))
        return mc_fail(err, errlen, "%s=%s: cannot create it: its parent %s is unusable: %s", what,
                       path, parent, why);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return mc_fail(err, errlen, "%s=%s: cannot create it: %s", what, path, strerror(errno));
    if (!is_writable_dir(path, why, sizeof(why)))
        return mc_fail(err, errlen, "%s=%s: unusable: %s", what, path, why);
    MC_INFO("created %s %s", what, path);
    return 0;
}

int mc_offload_check_tree(const char *what, const char *path, char *err, size_t errlen)
{
    char why[256];
    if (is_writable_dir(path, why, sizeof(why)))
        return 0;
    struct stat st;
    if (stat(path, &st) == 0 || errno != ENOENT)
        return mc_fail(err, errlen, "%s=%s: unusable: %s", what, path, why);
    /* Missing: the nearest existing ancestor must be a writable directory. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash)
            return 0;
        if (slash == dir) {
            dir[1] = '\0';
        } else {
            *slash = '\0';
        }
        if (stat(dir, &st) == 0 || errno != ENOENT)
            break;
        if (slash == dir)
            return 0;
    }
    if (!is_writable_dir(dir, why, sizeof(why)))
        return mc_fail(err, errlen, "%s=%s: cannot be created: %s is unusable: %s", what, path, dir,
                       why);
    return 0;
}
