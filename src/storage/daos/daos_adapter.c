/*
 * daos_adapter.c — the "daos" FS adapter: Mooncake-style objects in a DAOS (MASS) POSIX
 * container through libdfs. Built only with -DUSE_DAOS=ON, against the real libdfs or, with
 * -DDAOS_TEST_DOUBLE=ON, the test double in tests/support/dfs_double.
 *
 * Open: root_dir is a dfuse/UNS path (/mnt/mass/mooncake/...). Its longest existing prefix is
 * resolved with duns_resolve_path() to pool, container and the directory inside the container;
 * the missing rest is created inside the container with dfs_mkdir. The mount is used for that
 * resolution only: object bytes go through dfs_write/dfs_read. The process connects once per
 * container: dfs_init and dfs_connect are refcounted in a process-wide registry (mutex), shared
 * by every adapter of the process, and undone (dfs_disconnect, dfs_fini) when the last closes.
 * The root, its 256 hash directories and .probe stay open (dfs_obj_t) for the adapter's life.
 *
 * I/O: io_threads event queues (one DAOS network context each, at most MAX_EQ) are kept in a
 * pool; an operation borrows one (waiting when all are busy), submits the object's transfers as
 * events (up to MAX_INFLIGHT at once, each transfer write_xfer_size / read_xfer_size bytes cut
 * into iovcnt scatter-gather pieces), polls them to completion and returns the queue. Writes go
 * to a temporary name created with O_CREAT|O_EXCL and the configured object class and chunk size,
 * then dfs_move publishes it over the object's name. Reads ask for exactly header + value bytes
 * (no read past the end, which would cost a size query on wide classes).
 *
 * Concurrent writers and readers of one key, with DFS's default relaxed consistency: dfs_move is
 * not atomic there (src/client/dfs/rename.c: the existing destination is punched and its entry
 * removed, then the new entry inserted only if the name is free, then the source entry
 * removed). The adapter keeps two promises on top of it:
 *  - last rename wins: a move that a concurrent writer of the key defeats (EEXIST, or ENOENT on
 *    the destination) is retried, so every write succeeds and the key holds the object of the
 *    insert that came last (publish());
 *  - a reader never sees a partial object: it gets the old object whole, the new one whole, or a
 *    miss (the name absent between removal and insert). An object punched while it is read
 *    reads short with size 0: the name is read again, never reported as bytes (daos_read()).
 * Object classes are DAOS's names exactly (daos_oclass_name2id: "S1", "SX", "RP_2G1",
 * "EC_4P1GX", ...); an unknown name fails the open.
 *
 * Thread-safety: libdfs handles are shared by all threads (libdfs is thread-safe); an event
 * queue and its events are used by one thread at a time (the pool hands them out); the registry
 * and the pool have their own mutexes.
 *
 * Errors: daos_fail() is the one place where an errno (dfs_*, duns_*) or a DER code (daos_*)
 * becomes a store code, logged with the call, the container path and the errno/DER name.
 */
#include "fs_adapter_internal.h"

#include "mooncake/errors.h"

#include "failpoint.h"
#include "log.h"

#include <daos.h>
#include <daos_errno.h>
#include <daos_fs.h>
#include <daos_uns.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>

#define DIR_MODE 0755
#define FILE_MODE 0644
#define MAX_INFLIGHT 16  /* transfers of one object in flight on one event queue */
#define MAX_EQ 64        /* event queues per adapter: each is a DAOS network context */
#define READDIR_BATCH 64 /* dirents per dfs_readdir call */
#define MOVE_ATTEMPTS 64 /* dfs_move of one publish, against concurrent writers of the key */
#define READ_ATTEMPTS 8  /* reads of one name whose object was punched while read */
#define MAX_IOV (MC_FS_IOVCNT_MAX + 2)

/* ---- process-wide connections ------------------------------------------------------------- */

typedef struct daos_conn {
    char pool[sizeof(((struct duns_attr_t *)0)->da_pool)];
    char cont[sizeof(((struct duns_attr_t *)0)->da_cont)];
    dfs_t *dfs;
    int refs;
    struct daos_conn *next;
} daos_conn_t;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static daos_conn_t *registry;
static int registry_users; /* open adapters; dfs_init while > 0 */

/* ---- the adapter -------------------------------------------------------------------------- */

/* An event queue with its events and their scatter-gather lists. */
typedef struct eq_slot {
    daos_handle_t eq;
    daos_event_t ev[MAX_INFLIGHT];
    d_sg_list_t sgl[MAX_INFLIGHT];
    d_iov_t *iov; /* MAX_INFLIGHT x iov_stride */
    daos_size_t read_size[MAX_INFLIGHT];
    uint64_t off[MAX_INFLIGHT]; /* file offset of each event's transfer */
    uint64_t len[MAX_INFLIGHT];
    int ev_ready[MAX_INFLIGHT]; /* daos_event_init done */
    struct eq_slot *next_free;
} eq_slot_t;

typedef struct daos_adapter {
    const mc_fs_config_t *cfg;
    daos_conn_t *conn;
    dfs_t *dfs;
    daos_oclass_id_t oclass;
    char where[PATH_MAX + 300]; /* "pool/cont:/path" for log lines */
    dfs_obj_t *root;
    dfs_obj_t *dir[MC_OBJ_DIR_COUNT + 1];
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    eq_slot_t *slots;
    unsigned nslots;
    size_t iov_stride;
    eq_slot_t *free_slots;
} daos_adapter_t;

typedef enum daos_op { OP_OPEN, OP_READ, OP_WRITE, OP_REMOVE, OP_LIST } daos_op_t;

#define ROOT_ONLY (MC_OBJ_PROBE_DIR + 1)

/*
 * The error mapping of this adapter. `err` is a positive errno (dfs_*, duns_*) or a negative DER
 * code (daos_*). dir/name locate the object (dir == ROOT_ONLY: name is a path).
 */
static int daos_fail(const daos_adapter_t *a, int err, daos_op_t op, const char *call, unsigned dir,
                     const char *name)
{
    int other = op == OP_READ    ? MC_ERR_FILE_READ_FAIL
                : op == OP_WRITE ? MC_ERR_FILE_WRITE_FAIL
                                 : MC_ERR_FILE_OPEN_FAIL;
    int code;
    if (err < 0) {
        switch (-err) {
        case DER_TIMEDOUT:
            code = MC_ERR_DFS_NETWORK_TIMEOUT;
            break;
        case DER_UNREACH:
            code = MC_ERR_DFS_SERVICE_UNAVAILABLE;
            break;
        case DER_NOSPACE:
            code = MC_ERR_DFS_QUOTA_EXCEEDED;
            break;
        case DER_NO_PERM:
            code = MC_ERR_DFS_PERMISSION_DENIED;
            break;
        case DER_STALE:
        case DER_NO_HDL:
            code = MC_ERR_DFS_STALE_HANDLE;
            break;
        case DER_NONEXIST:
        case DER_ENOENT:
            code = MC_ERR_FILE_NOT_FOUND;
            break;
        case DER_NOMEM:
            code = MC_ERR_INTERNAL_ERROR;
            break;
        default:
            code = other;
        }
    } else if (err == ENODATA) {
        code = MC_ERR_FILE_NOT_FOUND;
    } else if (err == EAGAIN) {
        code = MC_ERR_DFS_SERVICE_UNAVAILABLE;
    } else if (err == ENOMEM) {
        code = MC_ERR_INTERNAL_ERROR;
    } else {
        code = mc_fs_errno_code(err, other);
    }
    char path[PATH_MAX + 400];
    if (dir <= MC_OBJ_PROBE_DIR) {
        char dname[8];
        mc_obj_dir_name(dir, dname);
        snprintf(path, sizeof(path), "%s/%s/%s", a->where, dname, name);
    } else {
        snprintf(path, sizeof(path), "%s", name);
    }
    char why[128];
    if (err < 0)
        snprintf(why, sizeof(why), "%s (%d)", d_errstr(err), err);
    else
        snprintf(why, sizeof(why), "%s (errno %d)", strerror(err), err);
    if (code == MC_ERR_FILE_NOT_FOUND && (op == OP_READ || op == OP_REMOVE))
        MC_VLOG(1, "fs adapter daos: %s %s: %s", call, path, why);
    else
        MC_ERROR("fs adapter daos: %s %s failed: %s -> %s", call, path, why, mc_error_name(code));
    return code;
}

/* ---- registry ----------------------------------------------------------------------------- */

static int conn_acquire(daos_adapter_t *a, const char *pool, const char *cont)
{
    pthread_mutex_lock(&registry_mu);
    int rc = 0;
    if (registry_users == 0) {
        rc = dfs_init();
        if (rc != 0) {
            pthread_mutex_unlock(&registry_mu);
            return daos_fail(a, rc, OP_OPEN, "dfs_init", ROOT_ONLY, a->cfg->root_dir);
        }
    }
    registry_users++;
    daos_conn_t *c = registry;
    while (c && (strcmp(c->pool, pool) || strcmp(c->cont, cont)))
        c = c->next;
    if (!c) {
        c = calloc(1, sizeof(*c));
        rc = c ? dfs_connect(pool, NULL, cont, O_RDWR, NULL, &c->dfs) : ENOMEM;
        if (rc != 0) {
            free(c);
            c = NULL;
        } else {
            snprintf(c->pool, sizeof(c->pool), "%s", pool);
            snprintf(c->cont, sizeof(c->cont), "%s", cont);
            c->next = registry;
            registry = c;
        }
    }
    if (c) {
        c->refs++;
        a->conn = c;
        a->dfs = c->dfs;
    } else if (--registry_users == 0) {
        dfs_fini();
    }
    pthread_mutex_unlock(&registry_mu);
    if (rc != 0) {
        char what[300];
        snprintf(what, sizeof(what), "pool %s container %s (from %s)", pool, cont,
                 a->cfg->root_dir);
        return daos_fail(a, rc, OP_OPEN, "dfs_connect", ROOT_ONLY, what);
    }
    return 0;
}

static void conn_release(daos_conn_t *c)
{
    pthread_mutex_lock(&registry_mu);
    if (--c->refs == 0) {
        daos_conn_t **pp = &registry;
        while (*pp != c)
            pp = &(*pp)->next;
        *pp = c->next;
        int rc = dfs_disconnect(c->dfs);
        if (rc != 0)
            MC_WARN("fs adapter daos: dfs_disconnect %s/%s: %s (errno %d)", c->pool, c->cont,
                    strerror(rc), rc);
        free(c);
    }
    if (--registry_users == 0)
        dfs_fini();
    pthread_mutex_unlock(&registry_mu);
}

/* ---- open / close ------------------------------------------------------------------------- */

/*
 * Splits root_dir into its longest existing prefix (written to `existing`) and the missing rest
 * (written to `rest`, "" or "a/b").
 */
static void split_existing(const char *root_dir, char *existing, size_t cap, char *rest,
                           size_t rest_cap)
{
    snprintf(existing, cap, "%s", root_dir);
    rest[0] = '\0';
    struct stat st;
    while (stat(existing, &st) != 0 && errno == ENOENT && strcmp(existing, "/") != 0) {
        char *slash = strrchr(existing, '/');
        char tail[PATH_MAX];
        snprintf(tail, sizeof(tail), "%s%s%s", slash + 1, rest[0] ? "/" : "", rest);
        snprintf(rest, rest_cap, "%s", tail);
        if (slash == existing)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
}

/* Opens (creating when missing) directory `name` under `parent` (NULL = container root). */
static int open_dir(daos_adapter_t *a, dfs_obj_t *parent, const char *name, dfs_obj_t **out,
                    const char *path_for_log)
{
    mode_t mode = 0;
    int rc = dfs_lookup_rel(a->dfs, parent, name, O_RDWR, out, &mode, NULL);
    if (rc == ENOENT) {
        rc = dfs_mkdir(a->dfs, parent, name, DIR_MODE, 0);
        if (rc != 0 && rc != EEXIST)
            return daos_fail(a, rc, OP_OPEN, "dfs_mkdir", ROOT_ONLY, path_for_log);
        rc = dfs_lookup_rel(a->dfs, parent, name, O_RDWR, out, &mode, NULL);
    }
    if (rc == 0 && !S_ISDIR(mode)) {
        dfs_release(*out);
        *out = NULL;
        rc = ENOTDIR;
    }
    return rc ? daos_fail(a, rc, OP_OPEN, "dfs_lookup_rel", ROOT_ONLY, path_for_log) : 0;
}

/* Walks (creating) the container path `cpath` ("/a/b" or "") to a->root. */
static int open_root(daos_adapter_t *a, const char *cpath)
{
    char buf[PATH_MAX], shown[sizeof(a->where) + NAME_MAX + 2];
    snprintf(buf, sizeof(buf), "%s", cpath);
    dfs_obj_t *cur = NULL; /* NULL = the container root */
    char *save = NULL;
    for (char *comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
        dfs_obj_t *next = NULL;
        snprintf(shown, sizeof(shown), "%s/%s", a->where, comp);
        int rc = open_dir(a, cur, comp, &next, shown);
        if (cur)
            dfs_release(cur);
        if (rc != 0)
            return rc;
        cur = next;
    }
    if (!cur) {
        mode_t mode;
        int rc = dfs_lookup(a->dfs, "/", O_RDWR, &cur, &mode, NULL);
        if (rc != 0)
            return daos_fail(a, rc, OP_OPEN, "dfs_lookup", ROOT_ONLY, a->where);
    }
    a->root = cur;
    return 0;
}

static int create_slots(daos_adapter_t *a)
{
    a->nslots = a->cfg->io_threads < MAX_EQ ? a->cfg->io_threads : MAX_EQ;
    a->iov_stride = a->cfg->iovcnt + 2;
    a->slots = calloc(a->nslots, sizeof(*a->slots));
    if (!a->slots)
        return MC_ERR_INTERNAL_ERROR;
    for (unsigned i = 0; i < a->nslots; i++) {
        eq_slot_t *s = &a->slots[i];
        s->iov = calloc(MAX_INFLIGHT * a->iov_stride, sizeof(d_iov_t));
        if (!s->iov)
            return MC_ERR_INTERNAL_ERROR;
        int rc = daos_eq_create(&s->eq);
        if (rc != 0) {
            s->eq = DAOS_HDL_INVAL;
            return daos_fail(a, rc, OP_OPEN, "daos_eq_create", ROOT_ONLY, a->where);
        }
        for (int e = 0; e < MAX_INFLIGHT; e++) {
            rc = daos_event_init(&s->ev[e], s->eq, NULL);
            if (rc != 0)
                return daos_fail(a, rc, OP_OPEN, "daos_event_init", ROOT_ONLY, a->where);
            s->ev_ready[e] = 1;
        }
        s->next_free = a->free_slots;
        a->free_slots = s;
    }
    return 0;
}

static void daos_close(void *impl)
{
    daos_adapter_t *a = impl;
    if (!a)
        return;
    for (unsigned i = 0; a->slots && i < a->nslots; i++) {
        eq_slot_t *s = &a->slots[i];
        for (int e = 0; e < MAX_INFLIGHT; e++)
            if (s->ev_ready[e])
                daos_event_fini(&s->ev[e]);
        if (daos_handle_is_valid(s->eq)) {
            int rc = daos_eq_destroy(s->eq, 0);
            if (rc != 0)
                MC_WARN("fs adapter daos: daos_eq_destroy: %s (%d)", d_errstr(rc), rc);
        }
        free(s->iov);
    }
    free(a->slots);
    for (unsigned i = 0; i <= MC_OBJ_PROBE_DIR; i++)
        if (a->dir[i])
            dfs_release(a->dir[i]);
    if (a->root)
        dfs_release(a->root);
    if (a->conn)
        conn_release(a->conn);
    pthread_cond_destroy(&a->pool_cv);
    pthread_mutex_destroy(&a->pool_mu);
    free(a);
}

static int daos_open(const mc_fs_config_t *cfg, void **impl)
{
    daos_adapter_t *a = calloc(1, sizeof(*a));
    if (!a)
        return MC_ERR_INTERNAL_ERROR;
    a->cfg = cfg;
    pthread_mutex_init(&a->pool_mu, NULL);
    pthread_cond_init(&a->pool_cv, NULL);
    snprintf(a->where, sizeof(a->where), "%s", cfg->root_dir);
    if (cfg->oclass && cfg->oclass[0]) {
        int id = daos_oclass_name2id(cfg->oclass);
        if (id == OC_UNKNOWN) {
            MC_ERROR("fs adapter daos: unknown DAOS object class \"%s\" (e.g. S1, SX, RP_2GX, "
                     "EC_4P1GX)",
                     cfg->oclass);
            daos_close(a);
            return MC_ERR_INVALID_PARAMS;
        }
        a->oclass = (daos_oclass_id_t)id;
    }

    char existing[PATH_MAX], rest[PATH_MAX];
    split_existing(cfg->root_dir, existing, sizeof(existing), rest, sizeof(rest));
    struct duns_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    int rc = duns_resolve_path(existing, &attr);
    if (rc != 0) {
        if (rc == ENODATA || rc == ENOTSUP)
            MC_ERROR("fs adapter daos: %s is not on a DAOS container: no %s attribute on it or "
                     "any parent (is the MASS/dfuse volume mounted there?)",
                     existing, DUNS_XATTR_NAME);
        rc = daos_fail(a, rc, OP_OPEN, "duns_resolve_path", ROOT_ONLY, existing);
        duns_destroy_attr(&attr);
        daos_close(a);
        return rc;
    }
    char cpath[PATH_MAX];
    snprintf(cpath, sizeof(cpath), "%s%s%s", attr.da_rel_path ? attr.da_rel_path : "",
             rest[0] ? "/" : "", rest);
    snprintf(a->where, sizeof(a->where), "%s/%s:%s", attr.da_pool, attr.da_cont,
             cpath[0] ? cpath : "/");
    MC_INFO("fs adapter daos: %s -> pool %s container %s path %s", cfg->root_dir, attr.da_pool,
            attr.da_cont, cpath[0] ? cpath : "/");
    rc = conn_acquire(a, attr.da_pool, attr.da_cont);
    duns_destroy_attr(&attr);
    if (rc == 0)
        rc = open_root(a, cpath);
    for (unsigned i = 0; rc == 0 && i <= MC_OBJ_PROBE_DIR; i++) {
        char name[8], shown[sizeof(a->where) + 8];
        mc_obj_dir_name(i, name);
        snprintf(shown, sizeof(shown), "%s/%s", a->where, name);
        rc = open_dir(a, a->root, name, &a->dir[i], shown);
    }
    if (rc == 0)
        rc = create_slots(a);
    if (rc != 0) {
        daos_close(a);
        return rc;
    }
    *impl = a;
    return 0;
}

/* ---- event queue pool and transfers ------------------------------------------------------- */

static eq_slot_t *slot_take(daos_adapter_t *a)
{
    pthread_mutex_lock(&a->pool_mu);
    while (!a->free_slots)
        pthread_cond_wait(&a->pool_cv, &a->pool_mu);
    eq_slot_t *s = a->free_slots;
    a->free_slots = s->next_free;
    pthread_mutex_unlock(&a->pool_mu);
    return s;
}

static void slot_give(daos_adapter_t *a, eq_slot_t *s)
{
    pthread_mutex_lock(&a->pool_mu);
    s->next_free = a->free_slots;
    a->free_slots = s;
    pthread_cond_signal(&a->pool_cv);
    pthread_mutex_unlock(&a->pool_mu);
}

/* Result of a batch of transfers: the first error and where a read ended early. */
typedef struct xfer_result {
    int err; /* first errno / DER, 0 if none */
    const char *call;
    uint64_t got; /* reads: bytes before the first short transfer */
} xfer_result_t;

static void reap(eq_slot_t *s, daos_event_t *ev, int is_read, xfer_result_t *r)
{
    int idx = (int)(ev - s->ev);
    if (ev->ev_error && !r->err) {
        r->err = ev->ev_error;
        r->call = is_read ? "dfs_read" : "dfs_write";
    }
    if (is_read && !ev->ev_error && s->read_size[idx] < s->len[idx] &&
        s->off[idx] + s->read_size[idx] < r->got)
        r->got = s->off[idx] + s->read_size[idx];
}

/*
 * Runs all transfers of [0, total) of obj on slot s: up to MAX_INFLIGHT events in flight,
 * each xfer bytes cut into iovcnt pieces. Never returns with an event in flight.
 */
static void run_xfers(daos_adapter_t *a, eq_slot_t *s, dfs_obj_t *obj, int is_read,
                      const mc_obj_seg_t *segs, size_t nsegs, uint64_t total, uint64_t xfer,
                      xfer_result_t *r)
{
    if (xfer == 0)
        xfer = total;
    uint64_t nx = mc_obj_xfer_count(total, xfer);
    int free_idx[MAX_INFLIGHT], nfree = MAX_INFLIGHT, inflight = 0;
    for (int i = 0; i < MAX_INFLIGHT; i++)
        free_idx[i] = MAX_INFLIGHT - 1 - i;
    struct iovec iov[MAX_IOV];
    r->err = 0;
    r->call = "";
    r->got = total;
    for (uint64_t next = 0; next < nx || inflight > 0;) {
        while (next < nx && nfree > 0 && !r->err) {
            int idx = free_idx[--nfree];
            uint64_t off = next * xfer, len = total - off < xfer ? total - off : xfer;
            size_t n = mc_obj_build_iovs(segs, nsegs, off, len, a->cfg->iovcnt, iov, MAX_IOV);
            d_iov_t *d = &s->iov[(size_t)idx * a->iov_stride];
            for (size_t k = 0; k < n; k++)
                d_iov_set(&d[k], iov[k].iov_base, iov[k].iov_len);
            s->sgl[idx] = (d_sg_list_t){.sg_nr = (uint32_t)n, .sg_nr_out = 0, .sg_iovs = d};
            s->off[idx] = off;
            s->len[idx] = len;
            s->read_size[idx] = 0;
            int rc = is_read
                         ? dfs_read(a->dfs, obj, &s->sgl[idx], off, &s->read_size[idx], &s->ev[idx])
                         : dfs_write(a->dfs, obj, &s->sgl[idx], off, &s->ev[idx]);
            if (rc != 0) {
                free_idx[nfree++] = idx;
                r->err = rc;
                r->call = is_read ? "dfs_read" : "dfs_write";
                break;
            }
            inflight++;
            next++;
        }
        if (r->err)
            next = nx; /* submit nothing more; drain what is in flight */
        if (inflight == 0)
            break;
        daos_event_t *done[MAX_INFLIGHT];
        int n = daos_eq_poll(s->eq, 1, DAOS_EQ_WAIT, MAX_INFLIGHT, done);
        if (n < 0) {
            /* The queue itself failed: events cannot be reaped; replace the queue. */
            if (!r->err) {
                r->err = n;
                r->call = "daos_eq_poll";
            }
            daos_eq_destroy(s->eq, DAOS_EQ_DESTROY_FORCE);
            for (int e = 0; e < MAX_INFLIGHT; e++)
                s->ev_ready[e] = 0;
            if (daos_eq_create(&s->eq) != 0)
                s->eq = DAOS_HDL_INVAL;
            for (int e = 0; daos_handle_is_valid(s->eq) && e < MAX_INFLIGHT; e++)
                s->ev_ready[e] = daos_event_init(&s->ev[e], s->eq, NULL) == 0;
            return;
        }
        for (int k = 0; k < n; k++) {
            reap(s, done[k], is_read, r);
            free_idx[nfree++] = (int)(done[k] - s->ev);
            inflight--;
        }
    }
}

/* ---- operations --------------------------------------------------------------------------- */

/* A pause of about `us` microseconds, longer at each attempt (attempt 0: none). */
static void backoff(unsigned attempt)
{
    if (attempt == 0)
        return;
    long us = 50L << (attempt < 8 ? attempt : 8);
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/*
 * Moves the complete temporary `tmp` over `name`. In DAOS's relaxed mode (the default) dfs_move
 * is not atomic: it punches and removes the existing `name`, then inserts the new entry only if
 * the name is still free, then removes `tmp`. A concurrent writer of the same key can therefore
 * make it fail with EEXIST (it inserted its object in between) or ENOENT (it removed the old
 * entry first); `tmp` is intact then, so the move is simply tried again: every writer's publish
 * succeeds, and the one whose insert comes last is what the key holds ("last rename wins").
 */
static int publish(daos_adapter_t *a, unsigned dir, const char *tmp, const char *name)
{
    int rc = ENOENT;
    for (unsigned attempt = 0; attempt < MOVE_ATTEMPTS; attempt++) {
        backoff(attempt);
        rc = dfs_move(a->dfs, a->dir[dir], tmp, a->dir[dir], name, NULL);
        if (rc != EEXIST && rc != ENOENT)
            return rc;
        if (rc == ENOENT) { /* the destination vanished, or our temporary did (then fail) */
            struct stat st;
            int src = dfs_stat(a->dfs, a->dir[dir], tmp, &st);
            if (src != 0)
                return src == ENOENT ? rc : src;
        }
    }
    return rc;
}

static int daos_write(void *impl, unsigned dir, const char *name, const mc_obj_seg_t *segs,
                      size_t nsegs, uint64_t total)
{
    daos_adapter_t *a = impl;
    char tmp[32];
    mc_fs_temp_name(tmp);
    dfs_obj_t *obj = NULL;
    int rc = dfs_open(a->dfs, a->dir[dir], tmp, S_IFREG | FILE_MODE, O_RDWR | O_CREAT | O_EXCL,
                      a->oclass, a->cfg->chunk_size, NULL, &obj);
    if (rc != 0)
        return daos_fail(a, rc, OP_WRITE, "dfs_open(O_CREAT)", dir, tmp);

    eq_slot_t *s = slot_take(a);
    xfer_result_t r;
    if (daos_handle_is_valid(s->eq))
        run_xfers(a, s, obj, 0, segs, nsegs, total, a->cfg->write_xfer_size, &r);
    else
        r = (xfer_result_t){.err = -DER_NO_HDL, .call = "daos_eq_create"};
    slot_give(a, s);
    dfs_release(obj);

    const char *call = r.call, *shown = tmp;
    rc = r.err;
    if (rc == 0) {
        mc_failpoint("fs.write.before_publish"); /* the file is written, not yet named */
        rc = publish(a, dir, tmp, name);
        call = "dfs_move";
        shown = name;
    }
    if (rc == 0)
        return 0;
    int code = daos_fail(a, rc, OP_WRITE, call, dir, shown);
    dfs_remove(a->dfs, a->dir[dir], tmp, false, NULL);
    return code;
}

/*
 * Reads bytes [0, total) of one object named `name`. A writer publishing the same key may punch
 * that object while it is read (relaxed dfs_move, see publish()): every transfer after the punch
 * ends at 0 bytes. So a short read of an object whose size is now 0 is not a short object but a
 * replaced (or removed) one, and the name is read again: a reader gets the old object whole, the
 * new one whole, or a miss (MC_ERR_FILE_NOT_FOUND, also when the name stays punched for
 * READ_ATTEMPTS reads), never a mix. A genuinely short file keeps its size and is reported as
 * read (*got < total).
 */
static int daos_read(void *impl, unsigned dir, const char *name, const mc_obj_seg_t *segs,
                     size_t nsegs, uint64_t total, uint64_t *got)
{
    daos_adapter_t *a = impl;
    *got = 0;
    for (unsigned attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        backoff(attempt);
        dfs_obj_t *obj = NULL;
        int rc = dfs_open(a->dfs, a->dir[dir], name, S_IFREG, O_RDONLY, 0, 0, NULL, &obj);
        if (rc != 0)
            return daos_fail(a, rc, OP_READ, "dfs_open", dir, name);
        eq_slot_t *s = slot_take(a);
        xfer_result_t r;
        if (daos_handle_is_valid(s->eq))
            run_xfers(a, s, obj, 1, segs, nsegs, total, a->cfg->read_xfer_size, &r);
        else
            r = (xfer_result_t){.err = -DER_NO_HDL, .call = "daos_eq_create"};
        slot_give(a, s);
        daos_size_t size = 1;
        if (!r.err && r.got < total && (rc = dfs_get_size(a->dfs, obj, &size)) != 0)
            r = (xfer_result_t){.err = rc, .call = "dfs_get_size"};
        dfs_release(obj);
        if (r.err)
            return daos_fail(a, r.err, OP_READ, r.call, dir, name);
        if (r.got == total || size > 0) {
            *got = r.got;
            return 0;
        }
    }
    return daos_fail(a, ENOENT, OP_READ, "dfs_read (object punched by a writer)", dir, name);
}

static int daos_remove(void *impl, unsigned dir, const char *name)
{
    daos_adapter_t *a = impl;
    int rc = dfs_remove(a->dfs, a->dir[dir], name, false, NULL);
    return rc ? daos_fail(a, rc, OP_REMOVE, "dfs_remove", dir, name) : 0;
}

static int daos_list_dir(void *impl, unsigned dir, mc_fs_name_cb cb, void *arg)
{
    daos_adapter_t *a = impl;
    struct dirent *ents = calloc(READDIR_BATCH, sizeof(*ents));
    if (!ents)
        return MC_ERR_INTERNAL_ERROR;
    daos_anchor_t anchor;
    memset(&anchor, 0, sizeof(anchor));
    int rc = 0;
    while (rc == 0 && !daos_anchor_is_eof(&anchor)) {
        uint32_t nr = READDIR_BATCH;
        int err = dfs_readdir(a->dfs, a->dir[dir], &anchor, &nr, ents);
        if (err != 0) {
            rc = daos_fail(a, err, OP_LIST, "dfs_readdir", dir, ".");
            break;
        }
        for (uint32_t i = 0; i < nr && rc == 0; i++)
            if (strcmp(ents[i].d_name, ".") != 0 && strcmp(ents[i].d_name, "..") != 0)
                rc = cb(ents[i].d_name, arg);
    }
    free(ents);
    return rc;
}

const mc_fs_ops_t mc_fs_daos_ops = {
    .name = "daos",
    .open = daos_open,
    .close = daos_close,
    .write = daos_write,
    .read = daos_read,
    .remove = daos_remove,
    .list_dir = daos_list_dir,
};
