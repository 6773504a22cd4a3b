/*
 * dfs_double.c — TEST DOUBLE standing in for libdfs/libduns/libdaos (the subset declared by the
 * DAOS-named headers beside this file; what it models and where it is stricter than DAOS:
 * daos_fs.h and README.md). CI cannot run DAOS (no Debian packages, no servers); this lets
 * mooncake-c's DAOS adapter be built unchanged (-DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON) and its own
 * logic tested everywhere. It is not DAOS and proves nothing about DAOS's performance.
 *
 * Storage: a container is the directory $DFS_DOUBLE_ROOT/<pool>/<cont> (DFS_DOUBLE_ROOT defaults
 * to /tmp/dfs_double); the pool directory must exist for dfs_connect, the container directory
 * too unless O_CREAT is given (dfs_double_mkcont creates both and marks a "mount" directory).
 * Objects are files and directories in it; every call works relative to directory fds, so the
 * library is thread-safe with no shared offsets. A DAOS directory entry is a directory entry
 * here, a DAOS object an inode: punching an object truncates its inode to 0 bytes (every handle
 * on it then reads nothing), a conditional insert of an entry is linkat() (EEXIST when the name
 * is taken), a conditional entry punch is unlinkat() (ENOENT when it is gone). Return
 * conventions and the errno choices of libdfs are kept (EINVAL for a '/' in a name or a mode
 * without S_IFMT, ENOTSUP for O_APPEND, ENOENT for a file used as a directory, EPERM for writes
 * on a read-only handle, ...).
 *
 * Event queues: an event passed to dfs_read/dfs_write completes through its queue. By default the
 * operation runs at submission and its event is queued as completed; with DFS_DOUBLE_EQ_ASYNC=1
 * (read at daos_eq_create) each queue has a worker thread that runs operations later, so a
 * caller that reuses a buffer or event before polling is caught.
 *
 * Fault injection: DFS_DOUBLE_FAULT="<kind>[@<op>][:<count>]", re-read whenever the variable
 * changes (so a test may setenv between calls). kind: enospc, edquot, eio, short_read, enoent,
 * etimedout, ehostunreach, eacces, eperm, estale. op: connect, open (open/lookup of an existing
 * name), create (dfs_open with O_CREAT), write, read, move, remove, readdir, mkdir, stat, io
 * (read and write), any; defaults: enospc/edquot -> write, eio -> io, short_read -> read,
 * enoent -> open, others -> any. count: how many operations fail (default 1, "*" = all).
 * short_read returns half the bytes asked for; the others fail with that errno (through the
 * event when there is one).
 *
 * engine_dies: the engine stops answering at that operation (as dfs_double_set_engine(0)); with
 * @write or @read it holds the transfer's own event.
 * no_server (op connect): dfs_connect waits DFS_DOUBLE_NO_SERVER_MS (default 15000, what DAOS
 * waited when no server was reachable) and fails with ETIMEDOUT. agent_gone: accepted, changes
 * nothing (the agent is not on the I/O path).
 *
 * A dead engine: while $DFS_DOUBLE_ROOT/.engine_down exists (dfs_double_set_engine), every call
 * that is a request to the engine blocks until the file is gone (as real DAOS's blocking calls
 * never return then), and events submitted are held: they complete only once the engine is back,
 * or with -DER_CANCELED when daos_event_abort is called on them first (no buffer touched). A
 * destroyed container (its directory removed under an open handle): reads through an event fail
 * with -DER_NO_HDL, every other call with EINVAL, at once.
 *
 * Races: DFS_DOUBLE_MOVE_WINDOW_US=<µs> sleeps between the steps of every dfs_move (read at each
 * call); dfs_double_set_move_hook() (dfs_double.h) stops a test's mover between steps instead.
 */
#include <daos.h>
#include <daos_fs.h>
#include <daos_uns.h>

#include "dfs_double.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_ROOT "/tmp/dfs_double"
#define XATTR_OCLASS "user.dfs_double.oclass"
#define XATTR_CHUNK "user.dfs_double.chunk"
#define MAX_SG 1024

struct dfs {
    int root_fd;
    int rdonly;
    char path[PATH_MAX];
};

struct dfs_obj {
    dfs_t *dfs;
    int fd;
    mode_t mode; /* S_IFREG or S_IFDIR */
    int accmode; /* O_RDONLY, O_WRONLY or O_RDWR */
};

static pthread_mutex_t module_mu = PTHREAD_MUTEX_INITIALIZER;
static int module_refs;
static atomic_int live_connections, total_connects;
static atomic_int move_conflicts, short_reads;

/* ---- fault injection ---------------------------------------------------------------------- */

enum {
    OPF_CONNECT = 1 << 0,
    OPF_OPEN = 1 << 1,
    OPF_CREATE = 1 << 2,
    OPF_WRITE = 1 << 3,
    OPF_READ = 1 << 4,
    OPF_MOVE = 1 << 5,
    OPF_REMOVE = 1 << 6,
    OPF_READDIR = 1 << 7,
    OPF_MKDIR = 1 << 8,
    OPF_STAT = 1 << 9,
    OPF_IO = OPF_READ | OPF_WRITE,
    OPF_ANY = 0x3ff,
};
#define FAULT_SHORT_READ (-1)
#define FAULT_NO_SERVER (-2)   /* connect: waits DFS_DOUBLE_NO_SERVER_MS, then ETIMEDOUT */
#define FAULT_AGENT_GONE (-3)  /* daos_agent killed: no effect on I/O (it is not on the path) */
#define FAULT_ENGINE_DIES (-4) /* the engine stops answering at this operation (and after) */

static const struct {
    const char *name;
    int err;
    int ops;
} fault_kinds[] = {
    {"enospc", ENOSPC, OPF_WRITE},
    {"edquot", EDQUOT, OPF_WRITE},
    {"eio", EIO, OPF_IO},
    {"short_read", FAULT_SHORT_READ, OPF_READ},
    {"enoent", ENOENT, OPF_OPEN},
    {"etimedout", ETIMEDOUT, OPF_ANY},
    {"ehostunreach", EHOSTUNREACH, OPF_ANY},
    {"eacces", EACCES, OPF_ANY},
    {"eperm", EPERM, OPF_ANY},
    {"estale", ESTALE, OPF_ANY},
    {"no_server", FAULT_NO_SERVER, OPF_CONNECT},
    {"agent_gone", FAULT_AGENT_GONE, OPF_ANY},
    {"engine_dies", FAULT_ENGINE_DIES, OPF_ANY},
};

static const struct {
    const char *name;
    int ops;
} fault_ops[] = {
    {"connect", OPF_CONNECT}, {"open", OPF_OPEN}, {"create", OPF_CREATE}, {"write", OPF_WRITE},
    {"read", OPF_READ},       {"move", OPF_MOVE}, {"remove", OPF_REMOVE}, {"readdir", OPF_READDIR},
    {"mkdir", OPF_MKDIR},     {"stat", OPF_STAT}, {"io", OPF_IO},         {"any", OPF_ANY},
};

static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static char fault_spec[128];
static int fault_err, fault_mask, fault_left; /* fault_left < 0: unlimited */
static atomic_int fault_armed;

/* Parses a spec into the fault_* globals; an unparsable spec disables faults (and says so). */
static void fault_parse(const char *spec)
{
    char buf[128];
    snprintf(fault_spec, sizeof(fault_spec), "%s", spec);
    snprintf(buf, sizeof(buf), "%s", spec);
    fault_err = 0;
    fault_left = 1;
    char *count = strchr(buf, ':');
    if (count) {
        *count++ = '\0';
        fault_left = !strcmp(count, "*") ? -1 : atoi(count);
    }
    char *op = strchr(buf, '@');
    if (op)
        *op++ = '\0';
    for (size_t i = 0; i < sizeof(fault_kinds) / sizeof(fault_kinds[0]); i++) {
        if (!strcmp(buf, fault_kinds[i].name)) {
            fault_err = fault_kinds[i].err;
            fault_mask = fault_kinds[i].ops;
        }
    }
    if (op) {
        fault_mask = 0;
        for (size_t i = 0; i < sizeof(fault_ops) / sizeof(fault_ops[0]); i++)
            if (!strcmp(op, fault_ops[i].name))
                fault_mask = fault_ops[i].ops;
    }
    if (fault_err == 0 || fault_mask == 0) {
        fprintf(stderr, "dfs_double: ignoring DFS_DOUBLE_FAULT=\"%s\" (see dfs_double.c)\n", spec);
        fault_err = 0;
    }
}

static int dfs_double_set_engine_impl(int up);

/* The fault to inject into an operation of kind `op` now: 0, an errno, or FAULT_SHORT_READ.
 * only != 0: take it only when it is of that kind. engine_dies stops the engine here. */
static int fault_take_kind(int op, int only)
{
    const char *env = getenv("DFS_DOUBLE_FAULT");
    if (!env || !*env) {
        if (atomic_load(&fault_armed)) {
            pthread_mutex_lock(&fault_mu);
            fault_spec[0] = '\0';
            fault_err = 0;
            atomic_store(&fault_armed, 0);
            pthread_mutex_unlock(&fault_mu);
        }
        return 0;
    }
    int err = 0;
    pthread_mutex_lock(&fault_mu);
    if (strcmp(env, fault_spec) != 0) {
        fault_parse(env);
        atomic_store(&fault_armed, 1);
    }
    if (fault_err && (fault_mask & op) && fault_left != 0 && (!only || fault_err == only)) {
        err = fault_err;
        if (fault_left > 0)
            fault_left--;
    }
    pthread_mutex_unlock(&fault_mu);
    if (err == FAULT_ENGINE_DIES)
        dfs_double_set_engine_impl(0);
    return err == FAULT_AGENT_GONE || err == FAULT_ENGINE_DIES ? 0 : err;
}

static int fault_take(int op)
{
    return fault_take_kind(op, 0);
}

/* ---- the DAOS service: an engine that stops answering, a container destroyed -------------- */

static atomic_int blocked_calls;    /* blocking calls waiting for a stopped engine */
static atomic_int events_in_flight; /* events submitted and not yet reaped */

static const char *double_root(void)
{
    const char *root = getenv("DFS_DOUBLE_ROOT");
    return root && *root ? root : DEFAULT_ROOT;
}

/* 1 while $DFS_DOUBLE_ROOT/.engine_down exists: the engine has stopped answering (killed, hung).
 * A file, so that a test can stop and restart "the engine" of other processes too. */
static int engine_down(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/.engine_down", double_root());
    return access(path, F_OK) == 0;
}

/*
 * A blocking call that needs the engine: as with real DAOS, it does not return while the engine
 * does not answer (measured: dfs_sys_write still inside after 16 minutes; no timeout applies).
 * The wait sleeps (the real client spins its progress loop; sleeping lets a test see that the
 * caller's own threads do not spin).
 */
static void engine_wait(void)
{
    if (!engine_down())
        return;
    atomic_fetch_add(&blocked_calls, 1);
    while (engine_down()) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_sub(&blocked_calls, 1);
}

/* 1 when the container of dfs was destroyed under its open handle (its directory removed). */
static int container_gone(const dfs_t *dfs)
{
    struct stat st;
    return fstat(dfs->root_fd, &st) != 0 || st.st_nlink == 0;
}

/*
 * What every call that is a request to the engine goes through after its argument checks: it
 * waits while the engine does not answer, and fails with EINVAL (DER_NO_HDL through
 * daos_der2errno) once the container was destroyed under the open handle (its directory
 * removed), as real DAOS's calls fail at once then.
 */
static int service_gate(const dfs_t *dfs)
{
    engine_wait();
    return dfs && container_gone(dfs) ? EINVAL : 0;
}

int dfs_double_set_engine(int up)
{
    return dfs_double_set_engine_impl(up);
}

static int dfs_double_set_engine_impl(int up)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/.engine_down", double_root());
    if (up)
        return unlink(path) == 0 || errno == ENOENT ? 0 : errno;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

int dfs_double_blocked_calls(void)
{
    return atomic_load(&blocked_calls);
}

int dfs_double_events_in_flight(void)
{
    return atomic_load(&events_in_flight);
}

/* ---- module, connection ------------------------------------------------------------------- */

int dfs_init(void)
{
    pthread_mutex_lock(&module_mu);
    module_refs++;
    pthread_mutex_unlock(&module_mu);
    return 0;
}

int dfs_fini(void)
{
    int rc = 0;
    pthread_mutex_lock(&module_mu);
    if (module_refs == 0)
        rc = EINVAL;
    else
        module_refs--;
    pthread_mutex_unlock(&module_mu);
    return rc;
}

static int module_ready(void)
{
    pthread_mutex_lock(&module_mu);
    int ready = module_refs > 0;
    pthread_mutex_unlock(&module_mu);
    return ready;
}

static int valid_label(const char *s)
{
    return s && s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..") && strlen(s) < 128;
}

int dfs_connect(const char *pool, const char *sys, const char *cont, int flags, dfs_attr_t *attr,
                dfs_t **dfs)
{
    if (!dfs || !valid_label(pool) || !valid_label(cont))
        return EINVAL;
    if (!module_ready())
        return EACCES;
    int fault = fault_take(OPF_CONNECT);
    if (fault == FAULT_NO_SERVER) { /* no engine reachable: DAOS gives up after its own wait */
        const char *ms = getenv("DFS_DOUBLE_NO_SERVER_MS");
        long wait_ms = ms && *ms ? atol(ms) : 15000;
        struct timespec ts = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return ETIMEDOUT;
    }
    if (fault > 0)
        return fault;
    engine_wait();
    const char *root = double_root();
    dfs_t *d = calloc(1, sizeof(*d));
    if (!d)
        return ENOMEM;
    snprintf(d->path, sizeof(d->path), "%s/%s", root, pool);
    struct stat st;
    if (stat(d->path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        free(d);
        return ENOENT; /* no such pool */
    }
    snprintf(d->path, sizeof(d->path), "%s/%s/%s", root, pool, cont);
    if ((flags & O_CREAT) && mkdir(d->path, 0755) != 0 && errno != EEXIST) {
        int err = errno;
        free(d);
        return err;
    }
    d->root_fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->root_fd < 0) {
        free(d);
        return ENOENT; /* no such container */
    }
    d->rdonly = (flags & O_ACCMODE) == O_RDONLY;
    atomic_fetch_add(&live_connections, 1);
    atomic_fetch_add(&total_connects, 1);
    *dfs = d;
    return 0;
}

int dfs_disconnect(dfs_t *dfs)
{
    if (!dfs)
        return EINVAL;
    engine_wait(); /* the container close is a request to the engine */
    close(dfs->root_fd);
    free(dfs);
    atomic_fetch_sub(&live_connections, 1);
    return 0;
}

int dfs_double_live_connections(void)
{
    return atomic_load(&live_connections);
}

int dfs_double_total_connects(void)
{
    return atomic_load(&total_connects);
}

int dfs_double_move_conflicts(void)
{
    return atomic_load(&move_conflicts);
}

int dfs_double_short_reads(void)
{
    return atomic_load(&short_reads);
}

int dfs_double_init_refs(void)
{
    pthread_mutex_lock(&module_mu);
    int refs = module_refs;
    pthread_mutex_unlock(&module_mu);
    return refs;
}

int dfs_sync(dfs_t *dfs)
{
    if (!dfs)
        return EINVAL;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    return dfs->rdonly ? EPERM : 0;
}

/* ---- objects ------------------------------------------------------------------------------ */

static int valid_name(const char *name)
{
    return name && name[0] && !strchr(name, '/') && strlen(name) <= DFS_MAX_NAME &&
           strcmp(name, ".") && strcmp(name, "..");
}

/* The directory fd of `parent` (NULL = root), or -1 (ENOTDIR). */
static int parent_fd(dfs_t *dfs, dfs_obj_t *parent)
{
    if (!parent)
        return dfs->root_fd;
    return S_ISDIR(parent->mode) ? parent->fd : -1;
}

static void fill_stat(const struct stat *in, daos_size_t chunk, struct stat *out)
{
    memset(out, 0, sizeof(*out));
    out->st_mode = in->st_mode;
    out->st_uid = in->st_uid;
    out->st_gid = in->st_gid;
    out->st_size = S_ISREG(in->st_mode) ? in->st_size : 0;
    out->st_blocks = (out->st_size + 511) / 512;
    out->st_blksize = (blksize_t)chunk;
    out->st_nlink = 1;
    out->st_mtim = in->st_mtim;
    out->st_ctim = in->st_ctim;
    int newer =
        in->st_mtim.tv_sec > in->st_ctim.tv_sec ||
        (in->st_mtim.tv_sec == in->st_ctim.tv_sec && in->st_mtim.tv_nsec > in->st_ctim.tv_nsec);
    out->st_atim = newer ? in->st_mtim : in->st_ctim;
}

static daos_size_t chunk_of_fd(int fd)
{
    char buf[32];
    ssize_t n = fgetxattr(fd, XATTR_CHUNK, buf, sizeof(buf) - 1);
    if (n <= 0)
        return DFS_DEFAULT_CHUNK_SIZE;
    buf[n] = '\0';
    return strtoull(buf, NULL, 10);
}

static dfs_obj_t *new_obj(dfs_t *dfs, int fd, mode_t type, int accmode)
{
    dfs_obj_t *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->dfs = dfs;
    o->fd = fd;
    o->mode = type;
    o->accmode = accmode;
    return o;
}

/* Opens the existing entry `name` under directory fd `dfd` as an object. */
static int open_existing(dfs_t *dfs, int dfd, const char *name, int flags, dfs_obj_t **obj,
                         mode_t *mode, struct stat *stbuf)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOTDIR ? ENOENT : errno;
    int acc = flags & O_ACCMODE;
    int fd;
    if (S_ISDIR(st.st_mode))
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    else if (S_ISREG(st.st_mode))
        fd = openat(dfd, name, acc | (flags & O_TRUNC) | O_CLOEXEC | O_NOFOLLOW);
    else
        return EINVAL;
    if (fd < 0)
        return errno;
    *obj = new_obj(dfs, fd, st.st_mode & S_IFMT, S_ISDIR(st.st_mode) ? O_RDONLY : acc);
    if (!*obj) {
        close(fd);
        return ENOMEM;
    }
    if (mode)
        *mode = st.st_mode;
    if (stbuf)
        fill_stat(&st, S_ISREG(st.st_mode) ? chunk_of_fd(fd) : 0, stbuf);
    return 0;
}

int dfs_lookup(dfs_t *dfs, const char *path, int flags, dfs_obj_t **obj, mode_t *mode,
               struct stat *stbuf)
{
    if (!dfs || !path || path[0] != '/' || !obj)
        return EINVAL;
    if (flags & O_APPEND)
        return ENOTSUP;
    int fault = fault_take(OPF_OPEN);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    while (*path == '/')
        path++;
    return open_existing(dfs, dfs->root_fd, *path ? path : ".", flags, obj, mode, stbuf);
}

int dfs_lookup_rel(dfs_t *dfs, dfs_obj_t *parent, const char *name, int flags, dfs_obj_t **obj,
                   mode_t *mode, struct stat *stbuf)
{
    if (!dfs || !obj || !valid_name(name))
        return EINVAL;
    if (flags & O_APPEND)
        return ENOTSUP;
    int dfd = parent_fd(dfs, parent);
    if (dfd < 0)
        return ENOTDIR;
    int fault = fault_take(OPF_OPEN);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    return open_existing(dfs, dfd, name, flags, obj, mode, stbuf);
}

static void record_layout(int fd, daos_oclass_id_t cid, daos_size_t chunk)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%u", (unsigned)cid);
    fsetxattr(fd, XATTR_OCLASS, buf, (size_t)n, 0);
    n = snprintf(buf, sizeof(buf), "%llu",
                 (unsigned long long)(chunk ? chunk : DFS_DEFAULT_CHUNK_SIZE));
    fsetxattr(fd, XATTR_CHUNK, buf, (size_t)n, 0);
}

static int create_file(dfs_t *dfs, int dfd, const char *name, mode_t mode, int flags,
                       daos_oclass_id_t cid, daos_size_t chunk, dfs_obj_t **obj)
{
    int acc = flags & O_ACCMODE;
    int fd = openat(dfd, name, acc | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 07777);
    if (fd < 0 && errno == EEXIST && !(flags & O_EXCL))
        return open_existing(dfs, dfd, name, flags, obj, NULL, NULL);
    if (fd < 0)
        return errno == ENOTDIR ? ENOENT : errno;
    record_layout(fd, cid, chunk);
    *obj = new_obj(dfs, fd, S_IFREG, acc);
    if (!*obj) {
        close(fd);
        return ENOMEM;
    }
    return 0;
}

int dfs_open(dfs_t *dfs, dfs_obj_t *parent, const char *name, mode_t mode, int flags,
             daos_oclass_id_t cid, daos_size_t chunk_size, const char *value, dfs_obj_t **obj)
{
    if (!dfs || !obj || !valid_name(name))
        return EINVAL;
    int dfd = parent_fd(dfs, parent);
    if (dfd < 0)
        return ENOTDIR;
    mode_t type = mode & S_IFMT;
    if (type == S_IFLNK)
        return ENOTSUP;
    if (type != S_IFREG && type != S_IFDIR)
        return EINVAL;
    if (flags & O_APPEND)
        return ENOTSUP;
    if ((flags & O_CREAT) && dfs->rdonly)
        return EPERM;
    int fault = fault_take((flags & O_CREAT) ? OPF_CREATE : OPF_OPEN);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    if (type == S_IFDIR) {
        if ((flags & O_CREAT) && mkdirat(dfd, name, mode & 07777) != 0 &&
            (errno != EEXIST || (flags & O_EXCL)))
            return errno;
        return open_existing(dfs, dfd, name, O_RDONLY, obj, NULL, NULL);
    }
    int rc;
    if (flags & O_CREAT) {
        rc = create_file(dfs, dfd, name, mode, flags, cid, chunk_size, obj);
    } else {
        rc = open_existing(dfs, dfd, name, flags, obj, NULL, NULL);
        if (rc == 0 && (*obj)->mode != S_IFREG) {
            dfs_release(*obj);
            rc = EINVAL;
        }
    }
    return rc;
}

int dfs_release(dfs_obj_t *obj)
{
    if (!obj)
        return EINVAL;
    close(obj->fd);
    free(obj);
    return 0;
}

int dfs_get_size(dfs_t *dfs, dfs_obj_t *obj, daos_size_t *size)
{
    struct stat st;
    if (!dfs || !obj || !size || obj->mode != S_IFREG)
        return EINVAL;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    if (fstat(obj->fd, &st) != 0)
        return errno;
    *size = (daos_size_t)st.st_size;
    return 0;
}

int dfs_get_chunk_size(dfs_obj_t *obj, daos_size_t *chunk_size)
{
    if (!obj || !chunk_size || obj->mode != S_IFREG)
        return EINVAL;
    *chunk_size = chunk_of_fd(obj->fd);
    return 0;
}

int dfs_stat(dfs_t *dfs, dfs_obj_t *parent, const char *name, struct stat *stbuf)
{
    if (!dfs || !stbuf)
        return EINVAL;
    int dfd = parent_fd(dfs, parent);
    if (dfd < 0)
        return ENOTDIR;
    if (!name) {
        if (parent)
            return EINVAL;
        name = ".";
    } else if (!valid_name(name)) {
        return EINVAL;
    }
    int fault = fault_take(OPF_STAT);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    dfs_obj_t *o = NULL;
    int rc = open_existing(dfs, dfd, name, O_RDONLY, &o, NULL, stbuf);
    if (rc == 0)
        dfs_release(o);
    return rc;
}

int dfs_ostat(dfs_t *dfs, dfs_obj_t *obj, struct stat *stbuf)
{
    struct stat st;
    if (!dfs || !obj || !stbuf)
        return EINVAL;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    if (fstat(obj->fd, &st) != 0)
        return errno;
    fill_stat(&st, obj->mode == S_IFREG ? chunk_of_fd(obj->fd) : 0, stbuf);
    return 0;
}

int dfs_mkdir(dfs_t *dfs, dfs_obj_t *parent, const char *name, mode_t mode, daos_oclass_id_t cid)
{
    if (!dfs || !valid_name(name))
        return EINVAL;
    int dfd = parent_fd(dfs, parent);
    if (dfd < 0)
        return ENOTDIR;
    if (dfs->rdonly)
        return EPERM;
    int fault = fault_take(OPF_MKDIR);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    if (mkdirat(dfd, name, mode & 07777) != 0)
        return errno == ENOTDIR ? ENOENT : errno;
    return 0;
}

/* rm -r of directory `name` under dfd. */
static int remove_tree(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return errno;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (e->d_type == DT_DIR)
            rc = remove_tree(dirfd(d), e->d_name);
        else if (unlinkat(dirfd(d), e->d_name, 0) != 0)
            rc = errno;
    }
    closedir(d);
    if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) != 0)
        rc = errno;
    return rc;
}

/*
 * Punches the object of regular file `name` under dfd, if it is still the inode `ino` (DAOS
 * punches the object the entry named when it was fetched): its data is gone, so every open
 * handle on it reads 0 bytes from now on. The entry itself stays.
 */
static int punch_file(int dfd, const char *name, ino_t ino)
{
    int fd = openat(dfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOTDIR ? ENOENT : errno;
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? errno : 0;
    if (rc == 0 && st.st_ino == ino && ftruncate(fd, 0) != 0)
        rc = errno;
    close(fd);
    return rc;
}

static dfs_double_move_hook_t move_hook;
static void *move_hook_arg;

void dfs_double_set_move_hook(dfs_double_move_hook_t hook, void *arg)
{
    move_hook = hook;
    move_hook_arg = arg;
}

/* Between two steps of dfs_move: the test's hook, then DFS_DOUBLE_MOVE_WINDOW_US. */
static void move_step(int step, const char *new_name)
{
    if (move_hook)
        move_hook(step, new_name, move_hook_arg);
    const char *env = getenv("DFS_DOUBLE_MOVE_WINDOW_US");
    long us = env ? strtol(env, NULL, 10) : 0;
    if (us > 0) {
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
}

int dfs_remove(dfs_t *dfs, dfs_obj_t *parent, const char *name, bool force, daos_obj_id_t *oid)
{
    if (!dfs || !valid_name(name))
        return EINVAL;
    int dfd = parent_fd(dfs, parent);
    if (dfd < 0)
        return ENOTDIR;
    if (dfs->rdonly)
        return EPERM;
    int fault = fault_take(OPF_REMOVE);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOTDIR ? ENOENT : errno;
    if (oid)
        *oid = (daos_obj_id_t){.lo = (uint64_t)st.st_ino, .hi = (uint64_t)st.st_dev};
    if (!S_ISDIR(st.st_mode)) {
        int rc = S_ISREG(st.st_mode) ? punch_file(dfd, name, st.st_ino) : 0;
        if (rc == 0 && unlinkat(dfd, name, 0) != 0)
            rc = errno;
        return rc;
    }
    if (unlinkat(dfd, name, AT_REMOVEDIR) == 0)
        return 0;
    if (errno != ENOTEMPTY && errno != EEXIST)
        return errno;
    return force ? remove_tree(dfd, name) : ENOTEMPTY;
}

/* The conflicts a relaxed move reports to a concurrent mover, counted for tests. */
static int move_conflict(int err)
{
    if (err == EEXIST || err == ENOENT)
        atomic_fetch_add(&move_conflicts, 1);
    return err;
}

/* Relaxed-mode dfs_move: the steps and their errors are described in daos_fs.h. */
int dfs_move(dfs_t *dfs, dfs_obj_t *parent, const char *name, dfs_obj_t *new_parent,
             const char *new_name, daos_obj_id_t *oid)
{
    if (!dfs || !valid_name(name) || !valid_name(new_name))
        return EINVAL;
    int from = parent_fd(dfs, parent), to = parent_fd(dfs, new_parent);
    if (from < 0 || to < 0)
        return ENOTDIR;
    if (dfs->rdonly)
        return EPERM;
    int fault = fault_take(OPF_MOVE);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    /* 1. the source entry */
    struct stat src, dst;
    if (fstatat(from, name, &src, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOTDIR ? ENOENT : errno;
    /* 2. an existing destination: object punched, then its entry (if still there) removed */
    if (fstatat(to, new_name, &dst, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(dst.st_mode)) {
            if (!S_ISDIR(src.st_mode))
                return EINVAL;
            if (unlinkat(to, new_name, AT_REMOVEDIR) != 0)
                return move_conflict(errno == EEXIST ? ENOTEMPTY : errno);
        } else {
            int rc = S_ISREG(dst.st_mode) ? punch_file(to, new_name, dst.st_ino) : 0;
            if (rc != 0 && rc != ENOENT)
                return rc;
            move_step(DFS_DOUBLE_MOVE_PUNCHED, new_name);
            if (unlinkat(to, new_name, 0) != 0)
                return move_conflict(errno);
        }
        if (oid)
            *oid = (daos_obj_id_t){.lo = (uint64_t)dst.st_ino, .hi = (uint64_t)dst.st_dev};
    } else if (errno != ENOENT) {
        return errno == ENOTDIR ? ENOENT : errno;
    }
    move_step(DFS_DOUBLE_MOVE_REMOVED, new_name);
    /* 3. conditional insert under the new name; 4. the source entry removed. A directory cannot
     * have two names here: for one, steps 3 and 4 are a single no-replace rename. */
    if (S_ISDIR(src.st_mode))
        return renameat2(from, name, to, new_name, RENAME_NOREPLACE) != 0 ? move_conflict(errno)
                                                                          : 0;
    if (linkat(from, name, to, new_name, 0) != 0)
        return move_conflict(errno);
    move_step(DFS_DOUBLE_MOVE_INSERTED, new_name);
    return unlinkat(from, name, 0) != 0 ? errno : 0;
}

int dfs_readdir(dfs_t *dfs, dfs_obj_t *obj, daos_anchor_t *anchor, uint32_t *nr,
                struct dirent *dirs)
{
    if (!dfs || !obj || !anchor || !nr || !dirs || *nr == 0)
        return EINVAL;
    if (obj->mode != S_IFDIR)
        return ENOTDIR;
    if (daos_anchor_is_eof(anchor)) {
        *nr = 0;
        return 0;
    }
    int fault = fault_take(OPF_READDIR);
    if (fault > 0)
        return fault;
    int gate = service_gate(dfs);
    if (gate != 0)
        return gate;
    int fd = openat(obj->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return errno;
    }
    long cookie;
    memcpy(&cookie, anchor->da_buf, sizeof(cookie));
    if (anchor->da_type != DAOS_ANCHOR_TYPE_ZERO || cookie != 0)
        seekdir(d, cookie);
    uint32_t n = 0;
    int eof = 0;
    while (n < *nr) {
        struct dirent *e = readdir(d);
        if (!e) {
            eof = 1;
            break;
        }
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        memset(&dirs[n], 0, sizeof(dirs[n]));
        snprintf(dirs[n].d_name, sizeof(dirs[n].d_name), "%s", e->d_name);
        n++;
    }
    /* A full batch may have been the last: peek so EOF is reported with it, as DAOS does. */
    if (!eof) {
        cookie = telldir(d);
        if (readdir(d) == NULL)
            eof = 1;
    }
    closedir(d);
    anchor->da_type = eof ? DAOS_ANCHOR_TYPE_EOF : 1;
    memcpy(anchor->da_buf, &cookie, sizeof(cookie));
    *nr = n;
    return 0;
}

/* ---- data path ---------------------------------------------------------------------------- */

static int sgl_to_iov(const d_sg_list_t *sgl, struct iovec *iov, uint64_t *total)
{
    if (!sgl || sgl->sg_nr > MAX_SG || (sgl->sg_nr > 0 && !sgl->sg_iovs))
        return EINVAL;
    *total = 0;
    for (uint32_t i = 0; i < sgl->sg_nr; i++) {
        iov[i].iov_base = sgl->sg_iovs[i].iov_buf;
        iov[i].iov_len = sgl->sg_iovs[i].iov_len;
        *total += iov[i].iov_len;
    }
    return 0;
}

static int do_write(dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off)
{
    struct iovec iov[MAX_SG];
    uint64_t total;
    int rc = sgl_to_iov(sgl, iov, &total);
    if (rc != 0 || total == 0)
        return rc;
    int fault = fault_take(OPF_WRITE);
    if (fault > 0)
        return fault;
    struct iovec *v = iov;
    int n = (int)sgl->sg_nr;
    while (n > 0) {
        ssize_t w = pwritev(obj->fd, v, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        off += (daos_off_t)w;
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int do_read(dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off, daos_size_t *read_size)
{
    struct iovec iov[MAX_SG];
    uint64_t total;
    *read_size = 0;
    int rc = sgl_to_iov(sgl, iov, &total);
    if (rc != 0 || total == 0)
        return rc;
    int fault = fault_take(OPF_READ);
    if (fault > 0)
        return fault;
    struct iovec *v = iov;
    int n = (int)sgl->sg_nr;
    if (fault == FAULT_SHORT_READ) { /* deliver only the first half */
        uint64_t keep = total / 2, sum = 0;
        int k = 0;
        while (k < n && sum + v[k].iov_len <= keep)
            sum += v[k++].iov_len;
        if (k < n && sum < keep)
            v[k++].iov_len = (size_t)(keep - sum);
        n = k;
    }
    while (n > 0) {
        ssize_t r = preadv(obj->fd, v, n, (off_t)(off + *read_size));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0) { /* the end of the file: a short read */
            atomic_fetch_add(&short_reads, 1);
            break;
        }
        *read_size += (daos_size_t)r;
        while (n > 0 && (size_t)r >= v->iov_len) {
            r -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + r;
            v->iov_len -= (size_t)r;
        }
    }
    return 0;
}

/* ---- events and event queues -------------------------------------------------------------- */

enum ev_state { EV_NONE = 0, EV_READY, EV_RUNNING, EV_COMPLETED };
enum ev_op { EVOP_WRITE = 1, EVOP_READ, EVOP_FAIL };
/* Where a running event is: held (its engine does not answer), queued for the worker, or being
 * executed (its buffers in use). */
enum ev_where { EVQ_NONE = 0, EVQ_HELD, EVQ_WORK, EVQ_EXEC };
#define EV_MAGIC 0x44465344u /* "DFSD" */
#define HELD_RECHECK_US 5000 /* how often a poller with held events looks at the engine again */

typedef struct eq {
    pthread_mutex_t mu;
    pthread_cond_t done_cv; /* completions */
    pthread_cond_t work_cv; /* async worker: pending work or stop */
    daos_event_t *done_head, *done_tail;
    daos_event_t *work_head, *work_tail;
    daos_event_t *held_head, *held_tail; /* submitted while the engine did not answer */
    unsigned inflight;                   /* submitted, not yet polled */
    int async, stop;
    pthread_t worker;
} eq_t;

/* What the double keeps in daos_event_t's private area. */
typedef struct ev_priv {
    uint32_t magic;
    uint32_t state;
    eq_t *eq;
    daos_event_t *next;
    int op, where, err;
    dfs_obj_t *obj;
    d_sg_list_t *sgl;
    daos_off_t off;
    daos_size_t *read_size;
} ev_priv_t;

static_assert(sizeof(ev_priv_t) <= sizeof(((daos_event_t *)0)->ev_private),
              "event private area too small");

static ev_priv_t *priv(daos_event_t *ev)
{
    return (ev_priv_t *)(void *)ev->ev_private.space;
}

static void list_push(daos_event_t **head, daos_event_t **tail, daos_event_t *ev)
{
    priv(ev)->next = NULL;
    if (*tail)
        priv(*tail)->next = ev;
    else
        *head = ev;
    *tail = ev;
}

static daos_event_t *list_pop(daos_event_t **head, daos_event_t **tail)
{
    daos_event_t *ev = *head;
    if (ev) {
        *head = priv(ev)->next;
        if (!*head)
            *tail = NULL;
    }
    return ev;
}

/* Unlinks ev from the list; 1 when it was there. */
static int list_unlink(daos_event_t **head, daos_event_t **tail, daos_event_t *ev)
{
    daos_event_t **pp = head, *prev = NULL;
    while (*pp && *pp != ev) {
        prev = *pp;
        pp = &priv(*pp)->next;
    }
    if (!*pp)
        return 0;
    *pp = priv(ev)->next;
    if (*tail == ev)
        *tail = prev;
    return 1;
}

static void run_op(daos_event_t *ev)
{
    ev_priv_t *p = priv(ev);
    ev->ev_error = p->op == EVOP_FAIL    ? p->err
                   : p->op == EVOP_WRITE ? do_write(p->obj, p->sgl, p->off)
                                         : do_read(p->obj, p->sgl, p->off, p->read_size);
}

/* Caller holds eq->mu. */
static void complete_locked(eq_t *eq, daos_event_t *ev)
{
    priv(ev)->state = EV_COMPLETED;
    priv(ev)->where = EVQ_NONE;
    list_push(&eq->done_head, &eq->done_tail, ev);
    pthread_cond_broadcast(&eq->done_cv);
}

/* Caller holds eq->mu: runs ev now in this thread (its buffers are in use until it returns). */
static void execute_locked(eq_t *eq, daos_event_t *ev)
{
    priv(ev)->where = EVQ_EXEC;
    pthread_mutex_unlock(&eq->mu);
    run_op(ev);
    pthread_mutex_lock(&eq->mu);
    complete_locked(eq, ev);
}

/* Caller holds eq->mu: once the engine answers again, held events go on (to the worker, or run
 * here by the poller when the queue has none). */
static void release_held_locked(eq_t *eq)
{
    if (!eq->held_head || engine_down())
        return;
    daos_event_t *ev;
    while ((ev = list_pop(&eq->held_head, &eq->held_tail)) != NULL) {
        if (eq->async) {
            priv(ev)->where = EVQ_WORK;
            list_push(&eq->work_head, &eq->work_tail, ev);
            pthread_cond_signal(&eq->work_cv);
        } else {
            execute_locked(eq, ev);
        }
    }
}

static void *eq_worker(void *arg)
{
    eq_t *eq = arg;
    pthread_mutex_lock(&eq->mu);
    for (;;) {
        while (!eq->work_head && !eq->stop)
            pthread_cond_wait(&eq->work_cv, &eq->mu);
        daos_event_t *ev = list_pop(&eq->work_head, &eq->work_tail);
        if (!ev)
            break;
        if (engine_down()) { /* the engine stopped before this one was sent */
            priv(ev)->where = EVQ_HELD;
            list_push(&eq->held_head, &eq->held_tail, ev);
            continue;
        }
        execute_locked(eq, ev);
    }
    pthread_mutex_unlock(&eq->mu);
    return NULL;
}

/* Submits an I/O with an event: 0 when scheduled, else an errno (event untouched). op
 * EVOP_FAIL completes the event with `err` without touching any buffer. */
static int submit(daos_event_t *ev, int op, int err, dfs_obj_t *obj, d_sg_list_t *sgl,
                  daos_off_t off, daos_size_t *read_size)
{
    ev_priv_t *p = priv(ev);
    if (p->magic != EV_MAGIC || p->state != EV_READY || !p->eq)
        return EINVAL;
    eq_t *eq = p->eq;
    p->op = op;
    p->err = err;
    p->obj = obj;
    p->sgl = sgl;
    p->off = off;
    p->read_size = read_size;
    ev->ev_error = 0;
    if (op != EVOP_FAIL) /* an engine dying now holds this very event */
        fault_take_kind(op == EVOP_WRITE ? OPF_WRITE : OPF_READ, FAULT_ENGINE_DIES);
    pthread_mutex_lock(&eq->mu);
    p->state = EV_RUNNING;
    eq->inflight++;
    atomic_fetch_add(&events_in_flight, 1);
    if (op != EVOP_FAIL && engine_down()) { /* sent, never answered until the engine is back */
        p->where = EVQ_HELD;
        list_push(&eq->held_head, &eq->held_tail, ev);
    } else if (eq->async) {
        p->where = EVQ_WORK;
        list_push(&eq->work_head, &eq->work_tail, ev);
        pthread_cond_signal(&eq->work_cv);
    } else {
        execute_locked(eq, ev);
    }
    pthread_mutex_unlock(&eq->mu);
    return 0;
}

int dfs_write(dfs_t *dfs, dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off, daos_event_t *ev)
{
    if (!dfs || !obj || !sgl || obj->mode != S_IFREG)
        return EINVAL;
    if (dfs->rdonly || obj->accmode == O_RDONLY)
        return EPERM;
    if (sgl->sg_nr > MAX_SG)
        return EINVAL;
    if (container_gone(dfs))
        return EINVAL; /* measured on DAOS 2.8: a write fails at once with 22 */
    if (ev)
        return submit(ev, EVOP_WRITE, 0, obj, sgl, off, NULL);
    engine_wait();
    return do_write(obj, sgl, off);
}

int dfs_read(dfs_t *dfs, dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off, daos_size_t *read_size,
             daos_event_t *ev)
{
    if (!dfs || !obj || !sgl || !read_size || obj->mode != S_IFREG)
        return EINVAL;
    if (obj->accmode == O_WRONLY)
        return EPERM;
    if (sgl->sg_nr > MAX_SG)
        return EINVAL;
    int gone = container_gone(dfs);
    if (ev) /* measured on DAOS 2.8: the read's event fails at once with DER_NO_HDL */
        return submit(ev, gone ? EVOP_FAIL : EVOP_READ, -DER_NO_HDL, obj, sgl, off, read_size);
    if (gone)
        return EINVAL;
    engine_wait();
    return do_read(obj, sgl, off, read_size);
}

int daos_eq_create(daos_handle_t *eqh)
{
    if (!eqh)
        return -DER_INVAL;
    eq_t *eq = calloc(1, sizeof(*eq));
    if (!eq)
        return -DER_NOMEM;
    pthread_mutex_init(&eq->mu, NULL);
    pthread_cond_init(&eq->done_cv, NULL);
    pthread_cond_init(&eq->work_cv, NULL);
    const char *async = getenv("DFS_DOUBLE_EQ_ASYNC");
    eq->async = async && !strcmp(async, "1");
    if (eq->async && pthread_create(&eq->worker, NULL, eq_worker, eq) != 0) {
        free(eq);
        return -DER_NOMEM;
    }
    eqh->cookie = (uint64_t)(uintptr_t)eq;
    return 0;
}

int daos_eq_destroy(daos_handle_t eqh, int flags)
{
    eq_t *eq = (eq_t *)(uintptr_t)eqh.cookie;
    if (!eq)
        return -DER_NO_HDL;
    pthread_mutex_lock(&eq->mu);
    if (eq->inflight > 0 && !(flags & DAOS_EQ_DESTROY_FORCE)) {
        pthread_mutex_unlock(&eq->mu);
        return -DER_BUSY;
    }
    /* Forced: what was not sent yet is dropped unrun; what runs finishes before this returns. */
    eq->held_head = eq->held_tail = NULL;
    eq->work_head = eq->work_tail = NULL;
    eq->stop = 1;
    pthread_cond_broadcast(&eq->work_cv);
    pthread_mutex_unlock(&eq->mu);
    if (eq->async)
        pthread_join(eq->worker, NULL);
    atomic_fetch_sub(&events_in_flight, (int)eq->inflight);
    pthread_cond_destroy(&eq->done_cv);
    pthread_cond_destroy(&eq->work_cv);
    pthread_mutex_destroy(&eq->mu);
    free(eq);
    return 0;
}

/* Waits on cv until signalled or the deadline (NULL: forever). Returns 0 on timeout. */
static int wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline)
{
    if (!deadline)
        return pthread_cond_wait(cv, mu) == 0;
    return pthread_cond_timedwait(cv, mu, deadline) == 0;
}

static struct timespec *deadline_of(int64_t timeout_us, struct timespec *ts)
{
    if (timeout_us < 0)
        return NULL;
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += timeout_us / 1000000;
    ts->tv_nsec += (timeout_us % 1000000) * 1000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
    return ts;
}

static int before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Caller holds eq->mu: waits for a completion until `deadline` (NULL: forever), looking at the
 * engine again every HELD_RECHECK_US while events are held. 0 once the deadline passed. */
static int wait_completion(eq_t *eq, const struct timespec *deadline)
{
    if (!eq->held_head)
        return wait_until(&eq->done_cv, &eq->mu, deadline);
    struct timespec recheck;
    deadline_of(HELD_RECHECK_US, &recheck);
    if (deadline && before(deadline, &recheck))
        return wait_until(&eq->done_cv, &eq->mu, deadline);
    wait_until(&eq->done_cv, &eq->mu, &recheck);
    return 1;
}

int daos_eq_poll(daos_handle_t eqh, int wait_running, int64_t timeout, unsigned int nevents,
                 daos_event_t **events)
{
    eq_t *eq = (eq_t *)(uintptr_t)eqh.cookie;
    if (!eq)
        return -DER_NO_HDL;
    if (nevents == 0 || !events)
        return -DER_INVAL;
    struct timespec ts;
    struct timespec *deadline = deadline_of(timeout, &ts);
    pthread_mutex_lock(&eq->mu);
    release_held_locked(eq);
    while (!eq->done_head) {
        if ((wait_running && eq->inflight == 0) || timeout == 0 || !wait_completion(eq, deadline)) {
            pthread_mutex_unlock(&eq->mu);
            return 0;
        }
        release_held_locked(eq);
    }
    unsigned n = 0;
    while (n < nevents && eq->done_head) {
        daos_event_t *ev = list_pop(&eq->done_head, &eq->done_tail);
        priv(ev)->state = EV_READY;
        eq->inflight--;
        atomic_fetch_sub(&events_in_flight, 1);
        events[n++] = ev;
    }
    pthread_mutex_unlock(&eq->mu);
    return (int)n;
}

int daos_event_init(daos_event_t *ev, daos_handle_t eqh, daos_event_t *parent)
{
    if (!ev || parent)
        return -DER_INVAL; /* parent events are not part of the double */
    memset(ev, 0, sizeof(*ev));
    priv(ev)->magic = EV_MAGIC;
    priv(ev)->state = EV_READY;
    priv(ev)->eq = (eq_t *)(uintptr_t)eqh.cookie;
    return 0;
}

int daos_event_fini(daos_event_t *ev)
{
    if (!ev || priv(ev)->magic != EV_MAGIC)
        return -DER_INVAL;
    if (priv(ev)->state == EV_RUNNING || priv(ev)->state == EV_COMPLETED)
        return -DER_BUSY; /* stricter than DAOS: a completed event must be polled first */
    priv(ev)->magic = 0;
    priv(ev)->state = EV_NONE;
    return 0;
}

int daos_event_abort(daos_event_t *ev)
{
    if (!ev || priv(ev)->magic != EV_MAGIC || !priv(ev)->eq)
        return -DER_INVAL;
    ev_priv_t *p = priv(ev);
    eq_t *eq = p->eq;
    pthread_mutex_lock(&eq->mu);
    if (p->state == EV_RUNNING && p->where == EVQ_EXEC) {
        /* Its transfer is under way: it finishes (its buffers in use until then) and completes
         * as it would have; the abort returns only after that. */
        while (p->state == EV_RUNNING)
            pthread_cond_wait(&eq->done_cv, &eq->mu);
    } else if (p->state == EV_RUNNING && (list_unlink(&eq->held_head, &eq->held_tail, ev) ||
                                          list_unlink(&eq->work_head, &eq->work_tail, ev))) {
        ev->ev_error = -DER_CANCELED; /* never sent: no buffer of it is touched */
        complete_locked(eq, ev);
    }
    pthread_mutex_unlock(&eq->mu);
    return 0;
}

int daos_event_test(daos_event_t *ev, int64_t timeout, bool *flag)
{
    if (!ev || !flag || priv(ev)->magic != EV_MAGIC || !priv(ev)->eq)
        return -DER_INVAL;
    eq_t *eq = priv(ev)->eq;
    struct timespec ts;
    struct timespec *deadline = deadline_of(timeout, &ts);
    pthread_mutex_lock(&eq->mu);
    release_held_locked(eq);
    while (priv(ev)->state == EV_RUNNING && timeout != 0 && wait_completion(eq, deadline))
        release_held_locked(eq);
    *flag = priv(ev)->state != EV_RUNNING;
    if (priv(ev)->state == EV_COMPLETED) {
        list_unlink(&eq->done_head, &eq->done_tail, ev);
        priv(ev)->state = EV_READY;
        eq->inflight--;
        atomic_fetch_sub(&events_in_flight, 1);
    }
    pthread_mutex_unlock(&eq->mu);
    return 0;
}

/* ---- object classes, error strings -------------------------------------------------------- */

/*
 * DAOS's public object classes (its class table, src/object/obj_class_def.c): id = (redundancy
 * << OC_REDUN_SHIFT) | groups, "X" = MAX_NUM_GROUPS. Names are matched exactly, as DAOS does.
 */
#define OR_RP_2 8 /* RP_2 .. RP_6: 8 .. 12 */
#define OC_RP_XSF 80

static const unsigned oc_groups[] = {1, 2, 4, 6, 8, 12, 16, 32}; /* S, RP; EC: no 6 */
static const struct {
    unsigned k, p, redun;
} oc_ec[] = {{2, 1, 32},  {2, 2, 33},  {4, 1, 34}, {4, 2, 35}, {8, 1, 36}, {8, 2, 37},
             {16, 1, 38}, {16, 2, 39}, {4, 3, 40}, {8, 3, 41}, {16, 3, 42}};

/* Is `name` "<prefix>G<g>" / "<prefix>GX" ("S<g>" / "SX" when prefix is "S")? Sets *id. */
static int oc_match(const char *name, const char *prefix, unsigned redun, int ec, int *id)
{
    char want[MAX_OBJ_CLASS_NAME_LEN + 1];
    const char *g = !strcmp(prefix, "S") ? "" : "G";
    for (size_t i = 0; i <= sizeof(oc_groups) / sizeof(oc_groups[0]); i++) {
        unsigned groups = i < sizeof(oc_groups) / sizeof(oc_groups[0]) ? oc_groups[i] : 0;
        if (ec && groups == 6)
            continue;
        if (groups)
            snprintf(want, sizeof(want), "%s%s%u", prefix, g, groups);
        else
            snprintf(want, sizeof(want), "%s%sX", prefix, g);
        if (!strcmp(name, want)) {
            unsigned grp_nr = groups ? groups : (unsigned)MAX_NUM_GROUPS;
            *id = (int)OBJ_CLASS_DEF(redun, grp_nr);
            return 1;
        }
    }
    return 0;
}

int daos_oclass_name2id(const char *name)
{
    assert(name != NULL); /* DAOS reads it unchecked */
    if (strnlen(name, MAX_OBJ_CLASS_NAME_LEN + 1) > MAX_OBJ_CLASS_NAME_LEN)
        return OC_UNKNOWN;
    int id = OC_UNKNOWN;
    char prefix[16];
    if (oc_match(name, "S", OR_RP_1, 0, &id))
        return id;
    if (!strcmp(name, "RP_XSF"))
        return OC_RP_XSF;
    for (unsigned r = 2; r <= 6; r++) {
        snprintf(prefix, sizeof(prefix), "RP_%u", r);
        if (oc_match(name, prefix, OR_RP_2 + (r - 2), 0, &id))
            return id;
    }
    for (size_t i = 0; i < sizeof(oc_ec) / sizeof(oc_ec[0]); i++) {
        snprintf(prefix, sizeof(prefix), "EC_%uP%u", oc_ec[i].k, oc_ec[i].p);
        if (oc_match(name, prefix, oc_ec[i].redun, 1, &id))
            return id;
    }
    return OC_UNKNOWN;
}

const char *d_errstr(int rc)
{
    switch (rc < 0 ? -rc : rc) {
    case DER_SUCCESS:
        return "DER_SUCCESS";
    case DER_NO_PERM:
        return "DER_NO_PERM";
    case DER_NO_HDL:
        return "DER_NO_HDL";
    case DER_INVAL:
        return "DER_INVAL";
    case DER_EXIST:
        return "DER_EXIST";
    case DER_NONEXIST:
        return "DER_NONEXIST";
    case DER_UNREACH:
        return "DER_UNREACH";
    case DER_NOSPACE:
        return "DER_NOSPACE";
    case DER_ALREADY:
        return "DER_ALREADY";
    case DER_NOMEM:
        return "DER_NOMEM";
    case DER_NOSYS:
        return "DER_NOSYS";
    case DER_TIMEDOUT:
        return "DER_TIMEDOUT";
    case DER_BUSY:
        return "DER_BUSY";
    case DER_AGAIN:
        return "DER_AGAIN";
    case DER_PROTO:
        return "DER_PROTO";
    case DER_UNINIT:
        return "DER_UNINIT";
    case DER_TRUNC:
        return "DER_TRUNC";
    case DER_OVERFLOW:
        return "DER_OVERFLOW";
    case DER_CANCELED:
        return "DER_CANCELED";
    case DER_IO:
        return "DER_IO";
    case DER_ENOENT:
        return "DER_ENOENT";
    case DER_STALE:
        return "DER_STALE";
    case DER_TX_RESTART:
        return "DER_TX_RESTART";
    case DER_NOTSUPPORTED:
        return "DER_NOTSUPPORTED";
    default:
        return "DER_UNKNOWN";
    }
}

/* ---- unified namespace -------------------------------------------------------------------- */

/* Parses "DAOS.POSIX://pool/cont" (an xattr value). 0 or EINVAL. */
static int parse_uns_value(const char *value, struct duns_attr_t *attr)
{
    const char *p = strstr(value, "://");
    if (strncmp(value, "DAOS.", 5) != 0 || !p)
        return EINVAL;
    size_t type_len = (size_t)(p - (value + 5));
    attr->da_type = (type_len == 5 && !strncmp(value + 5, "POSIX", 5))
                        ? DAOS_PROP_CO_LAYOUT_POSIX
                        : DAOS_PROP_CO_LAYOUT_UNKNOWN;
    char pool[128], cont[128];
    if (sscanf(p + 3, "%127[^/]/%127[^/\n]", pool, cont) != 2)
        return EINVAL;
    snprintf(attr->da_pool, sizeof(attr->da_pool), "%s", pool);
    snprintf(attr->da_cont, sizeof(attr->da_cont), "%s", cont);
    return 0;
}

/* "pool/cont[/rel]" → attr. */
static int parse_direct(const char *s, struct duns_attr_t *attr)
{
    while (*s == '/')
        s++;
    char pool[128], cont[128];
    int used = 0;
    if (sscanf(s, "%127[^/]/%127[^/]%n", pool, cont, &used) != 2)
        return EINVAL;
    snprintf(attr->da_pool, sizeof(attr->da_pool), "%s", pool);
    snprintf(attr->da_cont, sizeof(attr->da_cont), "%s", cont);
    attr->da_type = DAOS_PROP_CO_LAYOUT_POSIX;
    const char *rel = s + used;
    if (*rel == '/' && rel[1] != '\0') {
        attr->da_rel_path = strdup(rel);
        if (!attr->da_rel_path)
            return ENOMEM;
    }
    return 0;
}

/* Reads the UNS xattr of `dir` (not following a symlink): 0, ENODATA, ENOTSUP or an errno. */
static int read_uns_value(const char *dir, char *value, size_t cap)
{
    ssize_t n = lgetxattr(dir, DUNS_XATTR_NAME, value, cap - 1);
    if (n < 0)
        return errno;
    if (n > DUNS_MAX_XATTR_LEN)
        return EIO;
    value[n] = '\0';
    return 0;
}

int duns_resolve_path(const char *path, struct duns_attr_t *attr)
{
    if (!path || !path[0] || !attr)
        return EINVAL;
    attr->da_rel_path = NULL;
    attr->da_sys = NULL;
    /* Parsed without the filesystem: "daos://..." (any case), or anything with
     * DUNS_NO_CHECK_PATH. DAOS also parses "/<pool-uuid>/<cont-uuid>" with DUNS_NO_PREFIX; the
     * double treats that as a filesystem path (stricter). */
    if (attr->da_flags & DUNS_NO_CHECK_PATH)
        return parse_direct(strncasecmp(path, "daos://", 7) ? path : path + 7, attr);
    if (!strncasecmp(path, "daos://", 7))
        return parse_direct(path + 7, attr);

    engine_wait(); /* dfuse asks the engine for the attributes of a path */
    struct statfs sfs;
    if (statfs(path, &sfs) != 0)
        return errno;
    char real[PATH_MAX];
    if (!realpath(path, real))
        return errno;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", real);
    char value[DUNS_MAX_XATTR_LEN + 1];
    for (;;) {
        int rc = read_uns_value(dir, value, sizeof(value));
        if (rc == 0)
            break;
        if (rc != ENODATA) /* ENOTSUP: a filesystem without xattrs; no fallback, as in DAOS */
            return rc;
        if (!strcmp(dir, "/") || (attr->da_flags & DUNS_NO_REVERSE_LOOKUP))
            return ENODATA;
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    int rc = parse_uns_value(value, attr);
    if (rc != 0)
        return rc;
    size_t base = !strcmp(dir, "/") ? 0 : strlen(dir);
    if (real[base] != '\0') {
        attr->da_rel_path = strdup(real + base);
        if (!attr->da_rel_path)
            return ENOMEM;
    }
    return 0;
}

void duns_destroy_attr(struct duns_attr_t *attrp)
{
    if (!attrp)
        return;
    free(attrp->da_rel_path);
    attrp->da_rel_path = NULL;
}
