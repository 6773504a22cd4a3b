/*
 * offload_backend.c — the local and distributed offload backends on the FS adapter
 * (offload_backend.h): file naming by (key, version), the cluster marker, and the restart scan.
 *
 * Both backends are the same code over an mc_fs_adapter_t; they differ in the adapter's fs type
 * and root, and in that only the distributed one has a marker.
 */
#include "offload_backend.h"

#include "errbuf.h"
#include "ids.h"
#include "log.h"
#include "mooncake/errors.h"
#include "mooncake/fs_adapter.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MARKER_KEY "mooncake.cluster"
#define MARKER_MAGIC "mooncake-c cluster marker v1"
#define MARKER_MAX 1024

struct mc_offload_backend {
    int kind;
    mc_fs_adapter_t *fs;
    char fs_type[16];
    char root[PATH_MAX];
    char storage_id[64];
};

int mc_offload_file_key(const char *key, uint64_t version, char *out, size_t cap)
{
    size_t n = key ? strnlen(key, MC_OFFLOAD_KEY_MAX + 1) : 0;
    if (n == 0 || n > MC_OFFLOAD_KEY_MAX || cap < n + 18)
        return MC_ERR_INVALID_KEY;
    snprintf(out, cap, "%016" PRIx64 "/%s", version, key);
    return 0;
}

/* Splits a stored name into (key, version); -1 for names that are not disk replicas. */
static int parse_file_key(const char *name, uint64_t *version, const char **key)
{
    for (int i = 0; i < 16; i++) {
        if (!isxdigit((unsigned char)name[i]) || isupper((unsigned char)name[i]))
            return -1;
    }
    if (name[16] != '/' || name[17] == '\0')
        return -1;
    *version = strtoull(name, NULL, 16);
    *key = name + 17;
    return 0;
}

/* ---- the cluster marker ------------------------------------------------------------------- */

static void new_cluster_id(char out[64])
{
    unsigned char r[16];
    if (mc_random_bytes(r, sizeof(r)) != 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x =
            ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid();
        memcpy(r, &x, sizeof(x));
        memcpy(r + 8, &ts, sizeof(uint64_t));
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
}

/* Parses "key=value" lines; 0 when both fields were found. */
static int marker_parse(const char *text, char id[64], char fs[16])
{
    id[0] = fs[0] = '\0';
    if (strncmp(text, MARKER_MAGIC "\n", strlen(MARKER_MAGIC) + 1) != 0)
        return -1;
    const char *p = text;
    while ((p = strchr(p, '\n')) != NULL) {
        p++;
        if (!strncmp(p, "cluster_id=", 11))
            sscanf(p + 11, "%63[^\n]", id);
        else if (!strncmp(p, "fs_type=", 8))
            sscanf(p + 8, "%15[^\n]", fs);
    }
    return id[0] && fs[0] ? 0 : -1;
}

/* The variable that names b's directory, for messages. */
static const char *root_var(const mc_offload_backend_t *b)
{
    return b->kind == MC_OFFLOAD_DISTRIBUTED ? "MOONCAKE_DISTRIBUTED_ROOT_DIR"
                                             : "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH";
}

static int marker_read(mc_offload_backend_t *b, char id[64], char fs[16], char *err, size_t errlen)
{
    uint64_t size = 0;
    int rc = mc_fs_stat(b->fs, MARKER_KEY, &size);
    if (rc == MC_ERR_FILE_NOT_FOUND)
        return rc;
    if (rc == 0 && size >= MARKER_MAX)
        rc = MC_ERR_FILE_INVALID_BUFFER;
    char text[MARKER_MAX] = "";
    if (rc == 0)
        rc = mc_fs_read(b->fs, MARKER_KEY, text, size);
    if (rc == 0 && marker_parse(text, id, fs) != 0)
        rc = MC_ERR_CHECKSUM_MISMATCH;
    if (rc != 0)
        mc_fail(err, errlen, "%s=%s: the cluster marker %s cannot be read: %s", root_var(b),
                b->root, MARKER_KEY, mc_error_name(rc));
    return rc;
}

/*
 * Reads the marker, creating it when this is the first client on the root. Two first clients
 * racing both write; the last rename wins and both adopt what is there after writing.
 */
static int marker_setup(mc_offload_backend_t *b, char *err, size_t errlen)
{
    char id[64], fs[16];
    int rc = marker_read(b, id, fs, err, errlen);
    if (rc == MC_ERR_FILE_NOT_FOUND) {
        char mine[64], text[MARKER_MAX];
        new_cluster_id(mine);
        int n = snprintf(text, sizeof(text), MARKER_MAGIC "\ncluster_id=%s\nfs_type=%s\n", mine,
                         b->fs_type);
        rc = mc_fs_write(b->fs, MARKER_KEY, text, (uint64_t)n);
        if (rc != 0) {
            mc_fail(err, errlen, "%s=%s: cannot write the cluster marker: %s", root_var(b), b->root,
                    mc_error_name(rc));
            return rc;
        }
        rc = marker_read(b, id, fs, err, errlen);
        if (rc == 0 && !strcmp(id, mine))
            MC_INFO("offload: %s is new storage: cluster id %s written to its marker", b->root, id);
    }
    if (rc != 0)
        return rc;
    if (strcmp(fs, b->fs_type) != 0)
        return mc_fail(err, errlen,
                       "%s=%s was set up by a client with fs type %s; this client has "
                       "MOONCAKE_DISTRIBUTED_FS_TYPE=%s",
                       root_var(b), b->root, fs, b->fs_type);
    snprintf(b->storage_id, sizeof(b->storage_id), "%s", id);
    return 0;
}

/* ---- open / close ------------------------------------------------------------------------- */

int mc_offload_backend_open(const mc_offload_env_t *env, int kind, const char *local_dir,
                            mc_offload_backend_t **out, char *err, size_t errlen)
{
    *out = NULL;
    mc_offload_backend_t *b = calloc(1, sizeof(*b));
    if (!b)
        return MC_ERR_INTERNAL_ERROR;
    b->kind = kind;
    mc_fs_config_t cfg;
    mc_fs_config_init(&cfg);
    if (kind == MC_OFFLOAD_DISTRIBUTED) {
        snprintf(b->fs_type, sizeof(b->fs_type), "%s", env->fs_type);
        snprintf(b->root, sizeof(b->root), "%s", env->root_dir);
        cfg.write_xfer_size = env->write_xfer_size;
        cfg.read_xfer_size = env->read_xfer_size;
        cfg.chunk_size = env->chunk_size;
        cfg.oclass = env->oclass;
        cfg.read_timeout_ms = env->read_timeout_ms;
        cfg.write_timeout_ms = env->write_timeout_ms;
    } else {
        snprintf(b->fs_type, sizeof(b->fs_type), "posix");
        snprintf(b->root, sizeof(b->root), "%s", local_dir);
    }
    cfg.fs_type = b->fs_type;
    cfg.root_dir = b->root;
    cfg.io_threads = env->io_threads;
    const char *what = kind == MC_OFFLOAD_DISTRIBUTED ? "MOONCAKE_DISTRIBUTED_ROOT_DIR"
                                                      : "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH";
    int rc = 0;
    if (!strcmp(b->fs_type, "posix"))
        rc = mc_offload_check_tree(what, b->root, err, errlen);
    if (rc == 0) {
        rc = mc_fs_adapter_open(&cfg, &b->fs);
        if (rc != 0)
            mc_fail(err, errlen, "%s=%s: the %s adapter cannot open it: %s", what, b->root,
                    b->fs_type, mc_error_name(rc));
    }
    /* Local directories carry the marker too: its id names the storage to the master, which
     * keeps the deletions of files in it while its client is away. */
    if (rc == 0)
        rc = marker_setup(b, err, errlen);
    if (rc == 0 && env->health_check) {
        rc = mc_fs_health_check(b->fs);
        if (rc != 0)
            mc_fail(err, errlen, "%s=%s: the health check failed: %s", what, b->root,
                    mc_error_name(rc));
    }
    if (rc != 0) {
        mc_offload_backend_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

void mc_offload_backend_close(mc_offload_backend_t *b)
{
    if (!b)
        return;
    mc_fs_adapter_close(b->fs);
    free(b);
}

int mc_offload_backend_kind(const mc_offload_backend_t *b)
{
    return b->kind;
}

const char *mc_offload_backend_fs_type(const mc_offload_backend_t *b)
{
    return b->fs_type;
}

const char *mc_offload_backend_storage_id(const mc_offload_backend_t *b)
{
    return b->storage_id;
}

const char *mc_offload_backend_root(const mc_offload_backend_t *b)
{
    return b->root;
}

/* ---- objects ------------------------------------------------------------------------------ */

int mc_offload_backend_write(mc_offload_backend_t *b, const char *key, uint64_t version,
                             const void *value, uint64_t size)
{
    char name[MC_OFFLOAD_FILE_KEY_MAX + 1];
    int rc = mc_offload_file_key(key, version, name, sizeof(name));
    return rc ? rc : mc_fs_write(b->fs, name, value, size);
}

int mc_offload_backend_read(mc_offload_backend_t *b, const char *key, uint64_t version, void *buf,
                            uint64_t size)
{
    char name[MC_OFFLOAD_FILE_KEY_MAX + 1];
    int rc = mc_offload_file_key(key, version, name, sizeof(name));
    return rc ? rc : mc_fs_read(b->fs, name, buf, size);
}

int mc_offload_backend_remove(mc_offload_backend_t *b, const char *key, uint64_t version)
{
    char name[MC_OFFLOAD_FILE_KEY_MAX + 1];
    int rc = mc_offload_file_key(key, version, name, sizeof(name));
    return rc ? rc : mc_fs_remove(b->fs, name);
}

typedef struct scan_ctx {
    mc_offload_scan_cb cb;
    void *arg;
} scan_ctx_t;

static int scan_one(const mc_fs_object_info_t *obj, void *arg)
{
    scan_ctx_t *c = arg;
    uint64_t version;
    const char *key;
    if (parse_file_key(obj->key, &version, &key) != 0)
        return 0;
    return c->cb(key, version, obj->value_size, obj->value_crc, c->arg);
}

int mc_offload_backend_scan(mc_offload_backend_t *b, mc_offload_scan_cb cb, void *arg)
{
    scan_ctx_t c = {cb, arg};
    return mc_fs_scan(b->fs, scan_one, &c);
}

void mc_offload_backend_clean_temps(mc_offload_backend_t *b)
{
    int rc = mc_fs_clean_temps(b->fs, NULL, NULL);
    if (rc != 0)
        MC_WARN("offload: cannot list %s for leftover temporary files: %s", b->root,
                mc_error_name(rc));
}

int mc_offload_backend_health(mc_offload_backend_t *b)
{
    return mc_fs_health_check(b->fs);
}

void mc_offload_backend_health_stats(const mc_offload_backend_t *b, mc_fs_health_stats_t *out)
{
    mc_fs_adapter_health(b ? b->fs : NULL, out);
}

int mc_offload_storage_unavailable(int code)
{
    return code == MC_ERR_DFS_NETWORK_TIMEOUT || code == MC_ERR_DFS_SERVICE_UNAVAILABLE;
}
