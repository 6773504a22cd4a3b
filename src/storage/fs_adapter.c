/*
 * fs_adapter.c — the FS adapter front end (include/mooncake/fs_adapter.h): picks the adapter by
 * fs type, validates the configuration, and does everything that is the same on every
 * filesystem — key checks, names and hash directories, the object header, CRC32C of header and
 * value, exact-size and key checks on read, list decoding and the health check — on top of the
 * byte-moving operations of the selected adapter (fs_adapter_internal.h).
 *
 * The adapter handle is immutable after open, so every call but close is thread-safe as long as
 * the adapter's own operations are.
 */
#include "fs_adapter_internal.h"

#include "mooncake/errors.h"

#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define PROBE_SIZE 4096
/* Longest root_dir accepted: room is left for "/<hh>/<name>" under PATH_MAX. */
#define ROOT_DIR_MAX (PATH_MAX - 2 * MC_OBJ_NAME_MAX)

struct mc_fs_adapter {
    const mc_fs_ops_t *ops;
    void *impl;
    mc_fs_config_t cfg; /* validated copy; strings below are owned */
    char *fs_type;
    char *root_dir;
    char *oclass;
};

/* ---- configuration ------------------------------------------------------------------------ */

void mc_fs_config_init(mc_fs_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->fs_type = "posix";
    cfg->write_xfer_size = MC_FS_DEFAULT_WRITE_XFER;
    cfg->read_xfer_size = MC_FS_DEFAULT_READ_XFER;
    cfg->chunk_size = MC_FS_DEFAULT_CHUNK;
    cfg->iovcnt = 1;
    cfg->io_threads = 8;
}

static const mc_fs_ops_t *ops_for(const char *fs_type)
{
    for (const mc_fs_backend_t *b = mc_fs_backends; b->fs_type; b++) {
        if (!strcmp(fs_type, b->fs_type))
            return b->ops;
    }
    return NULL;
}

int mc_fs_type_supported(const char *fs_type)
{
    return fs_type && ops_for(fs_type) != NULL;
}

/* Returns the ops of cfg->fs_type, or NULL with *rc set and the reason logged. */
static const mc_fs_ops_t *select_ops(const char *fs_type, int *rc)
{
    const mc_fs_ops_t *ops = fs_type ? ops_for(fs_type) : NULL;
    if (ops)
        return ops;
    if (fs_type && !strcmp(fs_type, "daos")) {
        MC_ERROR("fs type daos is not built into this binary (rebuild with -DUSE_DAOS=ON)");
        *rc = MC_ERR_NOT_SUPPORTED;
    } else if (fs_type && !strcmp(fs_type, "hf3fs")) {
        MC_ERROR("fs type hf3fs is not supported by mooncake-c (3FS's native client is not "
                 "built); use fs type posix on a 3FS FUSE mount");
        *rc = MC_ERR_NOT_SUPPORTED;
    } else {
        MC_ERROR("unknown fs type \"%s\" (expected posix or daos)", fs_type ? fs_type : "(null)");
        *rc = MC_ERR_INVALID_PARAMS;
    }
    return NULL;
}

static int validate_config(const mc_fs_config_t *cfg)
{
    const char *root = cfg->root_dir;
    if (!root || root[0] != '/') {
        MC_ERROR("fs adapter root dir \"%s\" must be an absolute path", root ? root : "(null)");
        return MC_ERR_INVALID_PARAMS;
    }
    if (strlen(root) > ROOT_DIR_MAX) {
        MC_ERROR("fs adapter root dir is longer than %d bytes", ROOT_DIR_MAX);
        return MC_ERR_INVALID_PARAMS;
    }
    if (cfg->write_xfer_size > MC_FS_XFER_MAX || cfg->read_xfer_size > MC_FS_XFER_MAX ||
        cfg->chunk_size > MC_FS_XFER_MAX) {
        MC_ERROR("fs adapter transfer and chunk sizes must be at most %" PRIu64 " bytes",
                 MC_FS_XFER_MAX);
        return MC_ERR_INVALID_PARAMS;
    }
    if (cfg->iovcnt > MC_FS_IOVCNT_MAX) {
        MC_ERROR("fs adapter iovcnt %u is above the limit %d", cfg->iovcnt, MC_FS_IOVCNT_MAX);
        return MC_ERR_INVALID_PARAMS;
    }
    if (cfg->alignment & (cfg->alignment - 1)) {
        MC_ERROR("fs adapter alignment %zu is not a power of two", cfg->alignment);
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

int mc_fs_adapter_open(const mc_fs_config_t *cfg, mc_fs_adapter_t **out)
{
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (!cfg)
        return MC_ERR_INVALID_PARAMS;
    int rc = 0;
    const mc_fs_ops_t *ops = select_ops(cfg->fs_type, &rc);
    if (!ops)
        return rc;
    rc = validate_config(cfg);
    if (rc != 0)
        return rc;

    mc_fs_adapter_t *a = calloc(1, sizeof(*a));
    if (!a)
        return MC_ERR_INTERNAL_ERROR;
    a->ops = ops;
    a->cfg = *cfg;
    a->fs_type = strdup(cfg->fs_type);
    a->root_dir = strdup(cfg->root_dir);
    a->oclass = strdup(cfg->oclass ? cfg->oclass : "");
    if (!a->fs_type || !a->root_dir || !a->oclass) {
        mc_fs_adapter_close(a);
        return MC_ERR_INTERNAL_ERROR;
    }
    /* Trailing slashes would double up in paths. */
    for (size_t n = strlen(a->root_dir); n > 1 && a->root_dir[n - 1] == '/'; n--)
        a->root_dir[n - 1] = '\0';
    a->cfg.fs_type = a->fs_type;
    a->cfg.root_dir = a->root_dir;
    a->cfg.oclass = a->oclass;
    if (a->cfg.iovcnt == 0)
        a->cfg.iovcnt = 1;
    if (a->cfg.alignment == 0)
        a->cfg.alignment = (size_t)sysconf(_SC_PAGESIZE);
    if (a->cfg.io_threads == 0)
        a->cfg.io_threads = 8;
    if (a->cfg.read_timeout_ms == 0)
        a->cfg.read_timeout_ms = MC_FS_DEFAULT_TIMEOUT_MS;
    if (a->cfg.write_timeout_ms == 0)
        a->cfg.write_timeout_ms = MC_FS_DEFAULT_TIMEOUT_MS;

    rc = ops->open(&a->cfg, &a->impl);
    if (rc != 0) {
        a->impl = NULL;
        mc_fs_adapter_close(a);
        return rc;
    }
    *out = a;
    return 0;
}

void mc_fs_adapter_close(mc_fs_adapter_t *a)
{
    if (!a)
        return;
    if (a->impl)
        a->ops->close(a->impl);
    free(a->fs_type);
    free(a->root_dir);
    free(a->oclass);
    free(a);
}

const char *mc_fs_adapter_type(const mc_fs_adapter_t *a)
{
    return a ? a->ops->name : "";
}

void mc_fs_adapter_health(const mc_fs_adapter_t *a, mc_fs_health_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (a && a->ops->health)
        a->ops->health(a->impl, out);
}

/* ---- objects ------------------------------------------------------------------------------ */

/* A key's location: its hash directory and file name. */
typedef struct obj_loc {
    size_t key_len;
    unsigned dir;
    char name[MC_OBJ_NAME_MAX];
} obj_loc_t;

static int locate(const char *key, obj_loc_t *loc)
{
    if (!key)
        return MC_ERR_INVALID_PARAMS;
    loc->key_len = strlen(key);
    int rc = mc_obj_escape_key(key, loc->key_len, loc->name, sizeof(loc->name));
    if (rc < 0) {
        MC_ERROR("fs adapter: invalid key (empty or longer than %d bytes)", MC_FS_KEY_MAX);
        return rc;
    }
    loc->dir = mc_obj_dir_index(key, loc->key_len);
    return 0;
}

static void *alloc_header(const mc_fs_adapter_t *a, size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, a->cfg.alignment, len) != 0)
        return NULL;
    return p;
}

static int write_object(mc_fs_adapter_t *a, unsigned dir, const obj_loc_t *loc, const char *key,
                        const void *value, uint64_t size)
{
    size_t hlen = mc_obj_header_len(loc->key_len, size);
    void *hdr = alloc_header(a, hlen);
    if (!hdr)
        return MC_ERR_INTERNAL_ERROR;
    mc_obj_header_encode(hdr, key, loc->key_len, size, mc_crc32c(0, value, (size_t)size));
    mc_obj_seg_t segs[2] = {{hdr, hlen}, {(void *)value, size}};
    int rc = a->ops->write(a->impl, dir, loc->name, segs, size ? 2 : 1, hlen + size);
    free(hdr);
    return rc;
}

int mc_fs_write(mc_fs_adapter_t *a, const char *key, const void *value, uint64_t size)
{
    obj_loc_t loc;
    if (!a || (!value && size > 0))
        return MC_ERR_INVALID_PARAMS;
    int rc = locate(key, &loc);
    if (rc != 0)
        return rc;
    return write_object(a, loc.dir, &loc, key, value, size);
}

/* Checks a header read for `key`: decodes it and compares the key. */
static int check_header(const mc_fs_adapter_t *a, const obj_loc_t *loc, const char *key,
                        const void *hdr, uint64_t got, mc_obj_header_t *h)
{
    size_t hlen = mc_obj_header_min_len(loc->key_len);
    int rc = mc_obj_header_decode(hdr, got < hlen ? (size_t)got : hlen, h);
    if (rc == MC_ERR_FILE_READ_FAIL) {
        MC_ERROR("fs adapter %s: object %s/%02x/%s is shorter than its header (%" PRIu64 " bytes)",
                 a->ops->name, a->root_dir, loc->dir, loc->name, got);
        return rc;
    }
    if (rc == 0 && (h->key_len != loc->key_len || memcmp(h->key, key, loc->key_len) != 0))
        rc = MC_ERR_CHECKSUM_MISMATCH;
    if (rc != 0)
        MC_ERROR("fs adapter %s: object %s/%02x/%s has a corrupt header (bad magic, version, "
                 "checksum or key)",
                 a->ops->name, a->root_dir, loc->dir, loc->name);
    return rc;
}

static int read_object(mc_fs_adapter_t *a, unsigned dir, const obj_loc_t *loc, const char *key,
                       void *buf, uint64_t size)
{
    size_t hlen = mc_obj_header_len(loc->key_len, size);
    void *hdr = alloc_header(a, hlen);
    if (!hdr)
        return MC_ERR_INTERNAL_ERROR;
    mc_obj_seg_t segs[2] = {{hdr, hlen}, {buf, size}};
    uint64_t got = 0;
    mc_obj_header_t h = {0};
    int rc = a->ops->read(a->impl, dir, loc->name, segs, size ? 2 : 1, hlen + size, &got);
    if (rc == 0)
        rc = check_header(a, loc, key, hdr, got, &h);
    if (rc == 0 && h.value_size != size) {
        MC_ERROR("fs adapter %s: object %s/%02x/%s holds %" PRIu64 " bytes, the reader expected "
                 "%" PRIu64,
                 a->ops->name, a->root_dir, loc->dir, loc->name, h.value_size, size);
        rc = MC_ERR_FILE_INVALID_BUFFER;
    }
    if (rc == 0 && got < hlen + size) {
        MC_ERROR("fs adapter %s: short read of %s/%02x/%s: %" PRIu64 " of %" PRIu64 " bytes",
                 a->ops->name, a->root_dir, loc->dir, loc->name, got, (uint64_t)(hlen + size));
        rc = MC_ERR_FILE_READ_FAIL;
    }
    if (rc == 0 && mc_crc32c(0, buf, (size_t)size) != h.value_crc) {
        MC_ERROR("fs adapter %s: checksum mismatch in the value of %s/%02x/%s", a->ops->name,
                 a->root_dir, loc->dir, loc->name);
        rc = MC_ERR_CHECKSUM_MISMATCH;
    }
    free(hdr);
    return rc;
}

int mc_fs_read(mc_fs_adapter_t *a, const char *key, void *buf, uint64_t size)
{
    obj_loc_t loc;
    if (!a || (!buf && size > 0))
        return MC_ERR_INVALID_PARAMS;
    int rc = locate(key, &loc);
    if (rc != 0)
        return rc;
    return read_object(a, loc.dir, &loc, key, buf, size);
}

int mc_fs_stat(mc_fs_adapter_t *a, const char *key, uint64_t *size)
{
    obj_loc_t loc;
    if (!a || !size)
        return MC_ERR_INVALID_PARAMS;
    int rc = locate(key, &loc);
    if (rc != 0)
        return rc;
    size_t hlen = mc_obj_header_min_len(loc.key_len);
    void *hdr = alloc_header(a, hlen);
    if (!hdr)
        return MC_ERR_INTERNAL_ERROR;
    mc_obj_seg_t seg = {hdr, hlen};
    uint64_t got = 0;
    mc_obj_header_t h;
    rc = a->ops->read(a->impl, loc.dir, loc.name, &seg, 1, hlen, &got);
    if (rc == 0)
        rc = check_header(a, &loc, key, hdr, got, &h);
    if (rc == 0)
        *size = h.value_size;
    free(hdr);
    return rc;
}

int mc_fs_remove(mc_fs_adapter_t *a, const char *key)
{
    obj_loc_t loc;
    if (!a)
        return MC_ERR_INVALID_PARAMS;
    int rc = locate(key, &loc);
    if (rc != 0)
        return rc;
    return a->ops->remove(a->impl, loc.dir, loc.name);
}

/* ---- list --------------------------------------------------------------------------------- */

typedef struct list_ctx {
    mc_fs_adapter_t *a;
    unsigned dir;
    mc_fs_scan_cb cb;
    void *arg;
    unsigned char *hdr; /* MC_OBJ_HEADER_MAX bytes */
    char key[MC_FS_KEY_MAX + 1];
} list_ctx_t;

/* One directory entry: read its header, check it belongs there, report the key. */
static int list_entry(const char *name, void *arg)
{
    list_ctx_t *c = arg;
    if (!mc_obj_is_object_name(name))
        return 0; /* a temporary */
    size_t key_len = 0;
    int named = mc_obj_unescape_name(name, c->key, sizeof(c->key), &key_len);
    if (named < 0) {
        MC_WARN("fs adapter list: skipping %s/%02x/%s (not an object name)", c->a->root_dir, c->dir,
                name);
        return 0;
    }
    uint64_t want = named == 0 ? mc_obj_header_min_len(key_len) : MC_OBJ_HEADER_MAX;
    mc_obj_seg_t seg = {c->hdr, want};
    uint64_t got = 0;
    mc_obj_header_t h;
    int rc = c->a->ops->read(c->a->impl, c->dir, name, &seg, 1, want, &got);
    if (rc == MC_ERR_FILE_NOT_FOUND)
        return 0; /* removed while we listed */
    if (rc == MC_ERR_FILE_OPEN_FAIL) {
        MC_WARN("fs adapter list: skipping %s/%02x/%s (not a readable file)", c->a->root_dir,
                c->dir, name);
        return 0;
    }
    if (rc != 0)
        return rc;
    rc = mc_obj_header_decode(c->hdr, (size_t)got, &h);
    if (rc == 0 && named == 0 && (h.key_len != key_len || memcmp(h.key, c->key, key_len) != 0))
        rc = MC_ERR_CHECKSUM_MISMATCH;
    if (rc == 0 && mc_obj_dir_index(h.key, h.key_len) != c->dir)
        rc = MC_ERR_CHECKSUM_MISMATCH;
    char check[MC_OBJ_NAME_MAX];
    if (rc == 0 &&
        (mc_obj_escape_key(h.key, h.key_len, check, sizeof(check)) < 0 || strcmp(check, name) != 0))
        rc = MC_ERR_CHECKSUM_MISMATCH;
    if (rc != 0) {
        MC_WARN("fs adapter list: skipping %s/%02x/%s (%s)", c->a->root_dir, c->dir, name,
                rc == MC_ERR_FILE_READ_FAIL ? "shorter than a header" : "invalid header");
        return 0;
    }
    memcpy(c->key, h.key, h.key_len);
    c->key[h.key_len] = '\0';
    mc_fs_object_info_t info = {c->key, h.value_size, h.value_crc};
    return c->cb(&info, c->arg);
}

typedef struct list_adapt {
    mc_fs_list_cb cb;
    void *arg;
} list_adapt_t;

static int list_adapt(const mc_fs_object_info_t *obj, void *arg)
{
    list_adapt_t *l = arg;
    return l->cb(obj->key, obj->value_size, l->arg);
}

int mc_fs_list(mc_fs_adapter_t *a, mc_fs_list_cb cb, void *arg)
{
    if (!cb)
        return MC_ERR_INVALID_PARAMS;
    list_adapt_t l = {cb, arg};
    return mc_fs_scan(a, list_adapt, &l);
}

int mc_fs_scan(mc_fs_adapter_t *a, mc_fs_scan_cb cb, void *arg)
{
    if (!a || !cb)
        return MC_ERR_INVALID_PARAMS;
    list_ctx_t *c = calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_INTERNAL_ERROR;
    c->hdr = alloc_header(a, MC_OBJ_HEADER_MAX);
    if (!c->hdr) {
        free(c);
        return MC_ERR_INTERNAL_ERROR;
    }
    c->a = a;
    c->cb = cb;
    c->arg = arg;
    int rc = 0;
    for (unsigned dir = 0; dir < MC_OBJ_DIR_COUNT && rc == 0; dir++) {
        c->dir = dir;
        rc = a->ops->list_dir(a->impl, dir, list_entry, c);
    }
    free(c->hdr);
    free(c);
    return rc;
}

/* ---- leftovers of dead writers -------------------------------------------------------------- */

/* Seconds since the epoch when process `pid` (of this pid namespace) started; 0 when it is gone. */
static uint64_t process_start_time(uint32_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%u/stat", (unsigned)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Field 22 (starttime, clock ticks since boot) counts from after the ")" closing field 2. */
    const char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    unsigned long long ticks = p ? strtoull(p + 1, NULL, 10) : 0;
    unsigned long long btime = 0;
    f = fopen("/proc/stat", "r");
    while (f && fgets(buf, sizeof(buf), f)) {
        if (sscanf(buf, "btime %llu", &btime) == 1)
            break;
    }
    if (f)
        fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    return btime + ticks / (unsigned long long)(hz > 0 ? hz : 100);
}

/*
 * 1 when the writer of a temporary (or probe object) is certainly gone. On this host (same
 * machine, boot and pid namespace): its pid is not running, or runs a process that started after
 * the temporary was made (the pid was reused). Elsewhere: the temporary is older than
 * MC_FS_TEMP_FOREIGN_AGE_S by this host's clock (no write takes that long).
 */
static int temp_writer_gone(const mc_obj_temp_id_t *id, uint64_t now)
{
    if (id->host != mc_fs_host_id())
        return now >= id->ctime && now - id->ctime > MC_FS_TEMP_FOREIGN_AGE_S;
    if (id->pid == (uint32_t)getpid())
        return 0; /* another thread of this process is writing it */
    uint64_t started = process_start_time(id->pid);
    return started == 0 || started > id->ctime;
}

typedef struct clean_ctx {
    mc_fs_adapter_t *a;
    unsigned dir;
    uint64_t now;
    uint64_t removed, kept;
} clean_ctx_t;

static int clean_entry(const char *name, void *arg)
{
    clean_ctx_t *c = arg;
    mc_obj_temp_id_t id;
    if (!mc_obj_parse_temp_name(name, c->dir == MC_OBJ_PROBE_DIR, &id))
        return 0;
    /* now is read after the listing started: a temporary made since is never judged "old". */
    if (!temp_writer_gone(&id, c->now)) {
        c->kept++;
        return 0;
    }
    int rc = c->a->ops->remove(c->a->impl, c->dir, name);
    if (rc == 0) {
        c->removed++;
        MC_VLOG(1, "fs adapter %s: removed %s/%02x/%s, left by a writer that is gone",
                c->a->ops->name, c->a->root_dir, c->dir, name);
    }
    return 0; /* removed meanwhile, or not removable: the listing goes on */
}

int mc_fs_clean_temps(mc_fs_adapter_t *a, uint64_t *removed, uint64_t *kept)
{
    if (!a)
        return MC_ERR_INVALID_PARAMS;
    clean_ctx_t c = {a, 0, (uint64_t)time(NULL), 0, 0};
    int rc = 0;
    for (unsigned dir = 0; dir <= MC_OBJ_PROBE_DIR && rc == 0; dir++) {
        c.dir = dir;
        rc = a->ops->list_dir(a->impl, dir, clean_entry, &c);
    }
    if (c.removed)
        MC_INFO("fs adapter %s: removed %" PRIu64 " temporary files under %s left by writers "
                "that are gone (%" PRIu64 " of live writers kept)",
                a->ops->name, c.removed, a->root_dir, c.kept);
    if (removed)
        *removed = c.removed;
    if (kept)
        *kept = c.kept;
    return rc;
}

/* ---- health check ------------------------------------------------------------------------- */

int mc_fs_health_check(mc_fs_adapter_t *a)
{
    if (!a)
        return MC_ERR_INVALID_PARAMS;
    static atomic_uint probe_counter;
    char key[96];
    char tmp[32];
    mc_fs_temp_name(tmp); /* unique across processes and hosts */
    snprintf(key, sizeof(key), "probe-%s-%u", tmp + 2, atomic_fetch_add(&probe_counter, 1));
    obj_loc_t loc;
    int rc = locate(key, &loc);
    if (rc != 0)
        return rc;

    unsigned char *out = malloc(PROBE_SIZE), *in = malloc(PROBE_SIZE);
    if (!out || !in) {
        free(out);
        free(in);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (size_t i = 0; i < PROBE_SIZE; i++)
        out[i] = (unsigned char)(i * 131 + loc.key_len);
    const char *step = "write";
    rc = write_object(a, MC_OBJ_PROBE_DIR, &loc, key, out, PROBE_SIZE);
    if (rc == 0) {
        step = "read back";
        rc = read_object(a, MC_OBJ_PROBE_DIR, &loc, key, in, PROBE_SIZE);
        if (rc == 0 && memcmp(in, out, PROBE_SIZE) != 0)
            rc = MC_ERR_CHECKSUM_MISMATCH;
        int rm = a->ops->remove(a->impl, MC_OBJ_PROBE_DIR, loc.name);
        if (rc == 0 && rm != 0) {
            step = "delete";
            rc = rm;
        }
    }
    if (rc != 0)
        MC_ERROR("fs adapter %s health check on %s failed at %s: %s (%d)", a->ops->name,
                 a->root_dir, step, mc_error_name(rc), rc);
    free(out);
    free(in);
    return rc;
}
