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
 * Deadlines: a dead engine makes libdfs's blocking calls never return (measured on DAOS 2.8: 16
 * of 16 threads still inside dfs_sys_write after 16 minutes, CRT_TIMEOUT changing nothing), so
 * no caller makes one itself. Every operation has a deadline (cfg read_timeout_ms for reads,
 * write_timeout_ms for writes, removes, close and each call of open). Data transfers are events
 * polled with the time left; at the deadline they are aborted and reaped before the call returns,
 * so no transfer touches the caller's buffer afterwards. Calls without an event (lookup, open,
 * move, remove, readdir, size, connect, ...) run on runner threads (see "calls" below) and the
 * caller waits for them until its deadline only. Past a deadline with no DAOS answer since, the
 * process is "wedged": operations fail at once (MC_ERR_DFS_SERVICE_UNAVAILABLE) but one probe a
 * second, until DAOS answers again. dfs_init is called directly: DAOS bounds it itself
 * (DER_TIMEDOUT after about 15 s with no server); dfs_release and the event calls are local.
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
#include "net.h"

#include <daos.h>
#include <daos_errno.h>
#include <daos_fs.h>
#include <daos_uns.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
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
#define MAX_RUNNERS 64       /* runner threads of the process (see "calls") */
#define RUNNER_IDLE_MS 30000 /* an idle runner beyond the first ends after this */
#define PROBE_MS 1000        /* wedged: one operation let through per this many ms */
#define ABORT_REAP_MS 1000   /* how long aborted events may take to come back */
#define CLOSE_WAIT_MS 2000   /* close: how long calls still stuck in DAOS are waited for */

/* Results that are not libdfs's: the deadline passed / refused at once while wedged. */
#define ERR_DEADLINE INT_MIN
#define ERR_WEDGED (INT_MIN + 1)

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
    int broken;                 /* aborted events never came back: never handed out again */
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
    int stuck;   /* calls of this adapter given up at their deadline, still inside DAOS; and */
    int closing; /* closed meanwhile: the last of them finishes the close (calls_mu) */
    int released;
    uint32_t close_timeout_ms; /* cfg's write_timeout_ms: a late close runs after cfg is gone */
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
    if (err == ERR_DEADLINE) {
        code = MC_ERR_DFS_NETWORK_TIMEOUT;
    } else if (err == ERR_WEDGED) {
        code = MC_ERR_DFS_SERVICE_UNAVAILABLE;
    } else if (err < 0) {
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
    char why[160];
    if (err == ERR_DEADLINE)
        snprintf(why, sizeof(why), "DAOS did not answer before the deadline (given up)");
    else if (err == ERR_WEDGED)
        snprintf(why, sizeof(why),
                 "refused at once: DAOS is wedged (a call passed its deadline "
                 "and none has answered since)");
    else if (err < 0)
        snprintf(why, sizeof(why), "%s (%d)", d_errstr(err), err);
    else
        snprintf(why, sizeof(why), "%s (errno %d)", strerror(err), err);
    if (err == ERR_WEDGED) { /* every refused operation would say the same: once a second */
        static _Atomic uint64_t last_said;
        uint64_t now = mc_now_ms(), then = atomic_load(&last_said);
        if (now - then < PROBE_MS || !atomic_compare_exchange_strong(&last_said, &then, now))
            return code;
    }
    if (code == MC_ERR_FILE_NOT_FOUND && (op == OP_READ || op == OP_REMOVE))
        MC_VLOG(1, "fs adapter daos: %s %s: %s", call, path, why);
    else
        MC_ERROR("fs adapter daos: %s %s failed: %s -> %s", call, path, why, mc_error_name(code));
    return code;
}

/*
 * Splits path (PATH_MAX bytes, in place) into its longest existing prefix (left in path) and the
 * missing rest (written to rest, PATH_MAX bytes: "" or "a/b").
 */
static void split_existing(char *path, char *rest)
{
    rest[0] = '\0';
    struct stat st;
    while (stat(path, &st) != 0 && errno == ENOENT && strcmp(path, "/") != 0) {
        char *slash = strrchr(path, '/');
        char tail[PATH_MAX];
        snprintf(tail, sizeof(tail), "%s%s%s", slash + 1, rest[0] ? "/" : "", rest);
        snprintf(rest, PATH_MAX, "%s", tail);
        if (slash == path)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
}

/* ---- calls: libdfs calls without an event, run where they cannot hold their caller ---------- */

/*
 * A call is queued for a runner thread with copies of its arguments (names, flags; handles are
 * libdfs's, shared), and its caller waits on the call's condition variable until the call is done
 * or the caller's deadline passes. A call still queued at the deadline is dropped unrun; one
 * already inside libdfs is abandoned: its runner finishes it whenever libdfs returns, undoes what
 * it made that nobody will use (an opened object is released, a connection disconnected, resolved
 * attributes freed) and frees it. Runners are started on demand (none idle) up to MAX_RUNNERS and
 * end after RUNNER_IDLE_MS idle. Calls never touch a buffer of their caller's.
 *
 * Every answer from DAOS (a call or a transfer that returned, whatever its result) ends the
 * wedged state; a deadline that passes starts it (see the top of the file).
 */
typedef enum call_kind {
    CALL_LOOKUP,     /* dfs_lookup(path) -> obj, mode */
    CALL_LOOKUP_REL, /* dfs_lookup_rel(parent, name) -> obj, mode */
    CALL_MKDIR,      /* dfs_mkdir(parent, name, mode) */
    CALL_OPEN,       /* dfs_open(parent, name, mode, flags, oclass, chunk) -> obj */
    CALL_GET_SIZE,   /* dfs_get_size(obj) -> size */
    CALL_STAT,       /* dfs_stat(parent, name) */
    CALL_MOVE,       /* dfs_move(parent, name, parent, name2) */
    CALL_REMOVE,     /* dfs_remove(parent, name) */
    CALL_READDIR,    /* dfs_readdir(parent, anchor, nr) -> ents */
    CALL_CONNECT,    /* dfs_connect(pool = name, cont = name2) -> dfs */
    CALL_DISCONNECT, /* dfs_disconnect(dfs) */
    CALL_RESOLVE,    /* duns_resolve_path(path) -> attr */
} call_kind_t;

enum { CALL_QUEUED, CALL_RUNNING, CALL_DONE };

typedef struct daos_call {
    call_kind_t kind;
    dfs_t *dfs;
    dfs_obj_t *parent;
    char name[NAME_MAX + 1], name2[NAME_MAX + 1];
    char *path; /* CALL_LOOKUP: owned; CALL_RESOLVE: root_dir in, its existing prefix out */
    char *rest; /* CALL_RESOLVE: the missing rest of root_dir ("" or "a/b"), owned */
    mode_t mode;
    int flags;
    daos_oclass_id_t oclass;
    daos_size_t chunk;
    dfs_obj_t *obj; /* CALL_GET_SIZE: in; CALL_LOOKUP*, CALL_OPEN: out */
    daos_size_t size;
    daos_anchor_t anchor;
    uint32_t nr;
    struct dirent ents[READDIR_BATCH];
    struct duns_attr_t attr;
    int rc;
    int state, abandoned;
    daos_adapter_t *owner; /* counts the call while it is abandoned; NULL: none */
    pthread_cond_t cv;
    struct daos_call *next;
} daos_call_t;

static pthread_once_t calls_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t calls_cv; /* work queued (monotonic clock) */
static pthread_condattr_t mono_attr;
static daos_call_t *queue_head, *queue_tail;
static unsigned runners, idle_runners;
static int probe_out;                  /* wedged: a probe operation is in flight */
static _Atomic uint64_t last_probe_ms; /* the last probe, or the deadline that wedged */
static atomic_int wedged;              /* a deadline passed and nothing answered since */
static atomic_uint_fast64_t n_timeouts, n_fast_failures, n_stuck;

static void calls_init(void)
{
    pthread_condattr_init(&mono_attr);
    pthread_condattr_setclock(&mono_attr, CLOCK_MONOTONIC);
    pthread_cond_init(&calls_cv, &mono_attr);
}

static void close_finish(daos_adapter_t *a);

static void note_answer(void)
{
    if (atomic_load_explicit(&wedged, memory_order_relaxed))
        atomic_store(&wedged, 0);
}

static void note_deadline(void)
{
    atomic_fetch_add(&n_timeouts, 1);
    atomic_store(&last_probe_ms, mc_now_ms()); /* the first probe a PROBE_MS from now */
    atomic_store(&wedged, 1);
}

/* Waits on cv (monotonic) until deadline_ms (mc_now_ms clock); 0 once it has passed. */
static int wait_until_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ms)
{
    uint64_t now = mc_now_ms();
    if (now >= deadline_ms)
        return 0;
    struct timespec ts;
    mc_deadline_after_ms(&ts, CLOCK_MONOTONIC, deadline_ms - now);
    pthread_cond_timedwait(cv, mu, &ts);
    return 1;
}

/* What an abandoned call made that nobody will use. Runs on the runner, without calls_mu. */
static void call_undo(daos_call_t *c)
{
    if (c->rc != 0)
        return;
    if ((c->kind == CALL_LOOKUP || c->kind == CALL_LOOKUP_REL || c->kind == CALL_OPEN) && c->obj)
        dfs_release(c->obj);
    else if (c->kind == CALL_CONNECT && c->dfs)
        dfs_disconnect(c->dfs);
    else if (c->kind == CALL_RESOLVE)
        duns_destroy_attr(&c->attr);
}

static void call_free(daos_call_t *c)
{
    free(c->path);
    free(c->rest);
    pthread_cond_destroy(&c->cv);
    free(c);
}

static void call_execute(daos_call_t *c)
{
    switch (c->kind) {
    case CALL_LOOKUP:
        c->rc = dfs_lookup(c->dfs, c->path, c->flags, &c->obj, &c->mode, NULL);
        break;
    case CALL_LOOKUP_REL:
        c->rc = dfs_lookup_rel(c->dfs, c->parent, c->name, c->flags, &c->obj, &c->mode, NULL);
        break;
    case CALL_MKDIR:
        c->rc = dfs_mkdir(c->dfs, c->parent, c->name, c->mode, 0);
        break;
    case CALL_OPEN:
        c->rc = dfs_open(c->dfs, c->parent, c->name, c->mode, c->flags, c->oclass, c->chunk, NULL,
                         &c->obj);
        break;
    case CALL_GET_SIZE:
        c->rc = dfs_get_size(c->dfs, c->obj, &c->size);
        break;
    case CALL_STAT: {
        struct stat st;
        c->rc = dfs_stat(c->dfs, c->parent, c->name, &st);
        break;
    }
    case CALL_MOVE:
        c->rc = dfs_move(c->dfs, c->parent, c->name, c->parent, c->name2, NULL);
        break;
    case CALL_REMOVE:
        c->rc = dfs_remove(c->dfs, c->parent, c->name, false, NULL);
        break;
    case CALL_READDIR:
        c->rc = dfs_readdir(c->dfs, c->parent, &c->anchor, &c->nr, c->ents);
        break;
    case CALL_CONNECT:
        c->rc = dfs_connect(c->name, NULL, c->name2, O_RDWR, NULL, &c->dfs);
        break;
    case CALL_DISCONNECT:
        c->rc = dfs_disconnect(c->dfs);
        break;
    case CALL_RESOLVE: /* both stat the dfuse mount, which a dead engine stalls too */
        split_existing(c->path, c->rest);
        c->rc = duns_resolve_path(c->path, &c->attr);
        break;
    }
}

static void *runner_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&calls_mu);
    for (;;) {
        if (!queue_head) {
            idle_runners++;
            uint64_t until = mc_now_ms() + RUNNER_IDLE_MS;
            while (!queue_head && wait_until_ms(&calls_cv, &calls_mu, until))
                ;
            idle_runners--;
            if (!queue_head && runners > 1)
                break; /* idle too long; one stays */
            continue;
        }
        daos_call_t *c = queue_head;
        queue_head = c->next;
        if (!queue_head)
            queue_tail = NULL;
        c->state = CALL_RUNNING;
        pthread_mutex_unlock(&calls_mu);
        call_execute(c);
        note_answer();
        pthread_mutex_lock(&calls_mu);
        c->state = CALL_DONE;
        if (c->abandoned) {
            atomic_fetch_sub(&n_stuck, 1);
            daos_adapter_t *finish = NULL;
            if (c->owner && --c->owner->stuck == 0 && c->owner->closing) {
                c->owner->closing = 0;
                finish = c->owner; /* it was closed meanwhile: the close is ours to end */
            }
            pthread_mutex_unlock(&calls_mu);
            call_undo(c);
            call_free(c);
            if (finish)
                close_finish(finish);
            pthread_mutex_lock(&calls_mu);
        } else {
            pthread_cond_signal(&c->cv);
        }
    }
    runners--;
    pthread_mutex_unlock(&calls_mu);
    return NULL;
}

static daos_call_t *call_new(daos_adapter_t *a, call_kind_t kind)
{
    pthread_once(&calls_once, calls_init);
    daos_call_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->kind = kind;
    c->dfs = a ? a->dfs : NULL;
    c->owner = a;
    pthread_cond_init(&c->cv, &mono_attr);
    return c;
}

/*
 * Runs c on a runner and waits for it until deadline_ms (mc_now_ms clock). Returns libdfs's
 * result (errno or negative DER) with c's outputs filled, and the caller frees c (call_free);
 * or ERR_DEADLINE, and c belongs to its runner (or is already freed); or MC_ERR_INTERNAL_ERROR
 * (freed) when no runner could be started.
 */
static int call_run(daos_call_t *c, uint64_t deadline_ms)
{
    pthread_mutex_lock(&calls_mu);
    if (idle_runners == 0 && runners < MAX_RUNNERS) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, runner_main, NULL) == 0)
            runners++;
        pthread_attr_destroy(&attr);
        if (runners == 0) {
            pthread_mutex_unlock(&calls_mu);
            call_free(c);
            return MC_ERR_INTERNAL_ERROR;
        }
    }
    c->state = CALL_QUEUED;
    c->next = NULL;
    if (queue_tail)
        queue_tail->next = c;
    else
        queue_head = c;
    queue_tail = c;
    pthread_cond_signal(&calls_cv);
    while (c->state != CALL_DONE && wait_until_ms(&c->cv, &calls_mu, deadline_ms))
        ;
    if (c->state == CALL_DONE) {
        pthread_mutex_unlock(&calls_mu);
        return c->rc;
    }
    if (c->state == CALL_QUEUED) { /* never started: drop it */
        daos_call_t **pp = &queue_head, *prev = NULL;
        while (*pp != c) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        *pp = c->next;
        if (queue_tail == c)
            queue_tail = prev;
        pthread_mutex_unlock(&calls_mu);
        call_free(c);
    } else { /* inside libdfs: its runner finishes and frees it */
        c->abandoned = 1;
        atomic_fetch_add(&n_stuck, 1);
        if (c->owner)
            c->owner->stuck++;
        pthread_mutex_unlock(&calls_mu);
    }
    note_deadline();
    return ERR_DEADLINE;
}

/*
 * Every operation starts here: 0 to go on (*probe = 1 when it goes as the wedged state's probe),
 * or ERR_WEDGED to fail at once.
 */
static int op_begin(int *probe)
{
    *probe = 0;
    if (!atomic_load(&wedged))
        return 0;
    pthread_mutex_lock(&calls_mu);
    uint64_t now = mc_now_ms();
    int go = !probe_out && now - atomic_load(&last_probe_ms) >= PROBE_MS;
    if (go) {
        probe_out = 1;
        atomic_store(&last_probe_ms, now);
        *probe = 1;
    }
    pthread_mutex_unlock(&calls_mu);
    if (!go)
        atomic_fetch_add(&n_fast_failures, 1);
    return go ? 0 : ERR_WEDGED;
}

static void op_end(int probe)
{
    if (!probe)
        return;
    pthread_mutex_lock(&calls_mu);
    probe_out = 0;
    pthread_mutex_unlock(&calls_mu);
}

/* The typed calls (the caller's deadline; results as call_run). */

static int c_lookup_rel(daos_adapter_t *a, dfs_obj_t *parent, const char *name, dfs_obj_t **obj,
                        mode_t *mode, uint64_t deadline)
{
    daos_call_t *c = call_new(a, CALL_LOOKUP_REL);
    if (!c)
        return ENOMEM;
    c->parent = parent;
    c->flags = O_RDWR;
    snprintf(c->name, sizeof(c->name), "%s", name);
    int rc = call_run(c, deadline);
    if (rc == ERR_DEADLINE || rc == MC_ERR_INTERNAL_ERROR)
        return rc == ERR_DEADLINE ? rc : ENOMEM;
    *obj = c->obj;
    *mode = c->mode;
    call_free(c);
    return rc;
}

static int c_lookup(daos_adapter_t *a, const char *path, dfs_obj_t **obj, mode_t *mode,
                    uint64_t deadline)
{
    daos_call_t *c = call_new(a, CALL_LOOKUP);
    if (!c || !(c->path = strdup(path))) {
        if (c)
            call_free(c);
        return ENOMEM;
    }
    c->flags = O_RDWR;
    int rc = call_run(c, deadline);
    if (rc == ERR_DEADLINE || rc == MC_ERR_INTERNAL_ERROR)
        return rc == ERR_DEADLINE ? rc : ENOMEM;
    *obj = c->obj;
    *mode = c->mode;
    call_free(c);
    return rc;
}

/* Calls with a name and no output: mkdir, stat, move (name -> name2), remove. */
static int c_named(daos_adapter_t *a, call_kind_t kind, dfs_obj_t *parent, const char *name,
                   const char *name2, uint64_t deadline)
{
    daos_call_t *c = call_new(a, kind);
    if (!c)
        return ENOMEM;
    c->parent = parent;
    c->mode = DIR_MODE;
    snprintf(c->name, sizeof(c->name), "%s", name);
    if (name2)
        snprintf(c->name2, sizeof(c->name2), "%s", name2);
    int rc = call_run(c, deadline);
    if (rc == ERR_DEADLINE || rc == MC_ERR_INTERNAL_ERROR)
        return rc == ERR_DEADLINE ? rc : ENOMEM;
    call_free(c);
    return rc;
}

static int c_open(daos_adapter_t *a, dfs_obj_t *parent, const char *name, mode_t mode, int flags,
                  dfs_obj_t **obj, uint64_t deadline)
{
    daos_call_t *c = call_new(a, CALL_OPEN);
    if (!c)
        return ENOMEM;
    c->parent = parent;
    c->mode = mode;
    c->flags = flags;
    if (flags & O_CREAT) {
        c->oclass = a->oclass;
        c->chunk = a->cfg->chunk_size;
    }
    snprintf(c->name, sizeof(c->name), "%s", name);
    int rc = call_run(c, deadline);
    if (rc == ERR_DEADLINE || rc == MC_ERR_INTERNAL_ERROR)
        return rc == ERR_DEADLINE ? rc : ENOMEM;
    *obj = c->obj;
    call_free(c);
    return rc;
}

static int c_get_size(daos_adapter_t *a, dfs_obj_t *obj, daos_size_t *size, uint64_t deadline)
{
    daos_call_t *c = call_new(a, CALL_GET_SIZE);
    if (!c)
        return ENOMEM;
    c->obj = obj;
    int rc = call_run(c, deadline);
    if (rc == ERR_DEADLINE || rc == MC_ERR_INTERNAL_ERROR)
        return rc == ERR_DEADLINE ? rc : ENOMEM;
    *size = c->size;
    call_free(c);
    return rc;
}

static void daos_health(void *impl, mc_fs_health_stats_t *out)
{
    (void)impl;
    out->timeouts = atomic_load(&n_timeouts);
    out->fast_failures = atomic_load(&n_fast_failures);
    out->stuck_calls = atomic_load(&n_stuck);
    out->wedged = atomic_load(&wedged);
}

/* ---- registry ----------------------------------------------------------------------------- */

static int conn_acquire(daos_adapter_t *a, const char *pool, const char *cont, uint64_t deadline)
{
    pthread_mutex_lock(&registry_mu);
    int rc = 0;
    if (registry_users == 0) {
        rc = dfs_init(); /* bounded by DAOS itself (DER_TIMEDOUT with no server) */
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
        daos_call_t *call = c ? call_new(NULL, CALL_CONNECT) : NULL;
        if (call) {
            snprintf(call->name, sizeof(call->name), "%s", pool);
            snprintf(call->name2, sizeof(call->name2), "%s", cont);
            rc = call_run(call, deadline);
            if (rc != ERR_DEADLINE && rc != MC_ERR_INTERNAL_ERROR) {
                c->dfs = call->dfs;
                call_free(call);
            } else if (rc == MC_ERR_INTERNAL_ERROR) {
                rc = ENOMEM;
            }
        } else {
            rc = ENOMEM;
        }
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

/* The last adapter of a container disconnects it, within the deadline (else the connection is
 * left to its runner, and dfs_fini is not called: libdfs still has it). */
static void conn_release(daos_adapter_t *a, daos_conn_t *c, uint64_t deadline)
{
    pthread_mutex_lock(&registry_mu);
    int stuck = 0;
    if (--c->refs == 0) {
        daos_conn_t **pp = &registry;
        while (*pp != c)
            pp = &(*pp)->next;
        *pp = c->next;
        daos_call_t *call = call_new(a, CALL_DISCONNECT);
        int rc = ENOMEM;
        if (call) {
            call->dfs = c->dfs;
            rc = call_run(call, deadline);
            if (rc != ERR_DEADLINE && rc != MC_ERR_INTERNAL_ERROR)
                call_free(call);
        }
        stuck = rc == ERR_DEADLINE;
        if (rc != 0)
            MC_WARN("fs adapter daos: dfs_disconnect %s/%s: %s", c->pool, c->cont,
                    rc == ERR_DEADLINE ? "no answer before the deadline (left to finish)"
                    : rc > 0           ? strerror(rc)
                                       : d_errstr(rc));
        free(c);
    }
    if (--registry_users == 0 && !stuck)
        dfs_fini();
    pthread_mutex_unlock(&registry_mu);
}

/* ---- open / close ------------------------------------------------------------------------- */

/* Opens (creating when missing) directory `name` under `parent` (NULL = container root). */
static int open_dir(daos_adapter_t *a, dfs_obj_t *parent, const char *name, dfs_obj_t **out,
                    const char *path_for_log, uint32_t timeout_ms)
{
    mode_t mode = 0;
    int rc = c_lookup_rel(a, parent, name, out, &mode, mc_now_ms() + timeout_ms);
    if (rc == ENOENT) {
        rc = c_named(a, CALL_MKDIR, parent, name, NULL, mc_now_ms() + timeout_ms);
        if (rc != 0 && rc != EEXIST)
            return daos_fail(a, rc, OP_OPEN, "dfs_mkdir", ROOT_ONLY, path_for_log);
        rc = c_lookup_rel(a, parent, name, out, &mode, mc_now_ms() + timeout_ms);
    }
    if (rc == 0 && !S_ISDIR(mode)) {
        dfs_release(*out);
        *out = NULL;
        rc = ENOTDIR;
    }
    return rc ? daos_fail(a, rc, OP_OPEN, "dfs_lookup_rel", ROOT_ONLY, path_for_log) : 0;
}

/* Walks (creating) the container path `cpath` ("/a/b" or "") to a->root. */
static int open_root(daos_adapter_t *a, const char *cpath, uint32_t timeout_ms)
{
    char buf[PATH_MAX], shown[sizeof(a->where) + NAME_MAX + 2];
    snprintf(buf, sizeof(buf), "%s", cpath);
    dfs_obj_t *cur = NULL; /* NULL = the container root */
    char *save = NULL;
    for (char *comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
        dfs_obj_t *next = NULL;
        snprintf(shown, sizeof(shown), "%s/%s", a->where, comp);
        int rc = open_dir(a, cur, comp, &next, shown, timeout_ms);
        if (cur)
            dfs_release(cur);
        if (rc != 0)
            return rc;
        cur = next;
    }
    if (!cur) {
        mode_t mode;
        int rc = c_lookup(a, "/", &cur, &mode, mc_now_ms() + timeout_ms);
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

/*
 * Frees what the adapter holds once no call of it is inside DAOS any more; otherwise marks it
 * closing and returns, and the last such call, when DAOS answers it, calls this again (from its
 * runner). The disconnect of the last adapter of a container can itself be such a call.
 */
static void close_finish(daos_adapter_t *a)
{
    if (!a->released) {
        a->released = 1;
        for (unsigned i = 0; a->slots && i < a->nslots; i++) {
            eq_slot_t *s = &a->slots[i];
            if (s->broken)
                continue; /* its events may still be DAOS's */
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
        for (unsigned i = 0; i <= MC_OBJ_PROBE_DIR; i++)
            if (a->dir[i])
                dfs_release(a->dir[i]);
        if (a->root)
            dfs_release(a->root);
    }
    if (a->conn) {
        daos_conn_t *c = a->conn;
        a->conn = NULL;
        conn_release(a, c, mc_now_ms() + a->close_timeout_ms);
    }
    pthread_mutex_lock(&calls_mu);
    int later = a->stuck > 0;
    a->closing = later;
    pthread_mutex_unlock(&calls_mu);
    if (later)
        return;
    free(a->slots);
    pthread_cond_destroy(&a->pool_cv);
    pthread_mutex_destroy(&a->pool_mu);
    free(a);
}

/*
 * Closes the adapter. Calls of it that DAOS has not answered still use its directory handles:
 * they are waited for up to CLOSE_WAIT_MS; if some remain, the close returns and is finished by
 * the last of them when DAOS answers it (close_finish), never by freeing handles under them.
 */
static void daos_close(void *impl)
{
    daos_adapter_t *a = impl;
    if (!a)
        return;
    uint64_t until = mc_now_ms() + CLOSE_WAIT_MS;
    pthread_mutex_lock(&calls_mu);
    while (a->stuck > 0 && mc_now_ms() < until) {
        pthread_mutex_unlock(&calls_mu);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&calls_mu);
    }
    int stuck = a->stuck;
    a->closing = stuck > 0;
    pthread_mutex_unlock(&calls_mu);
    if (stuck > 0) {
        MC_WARN("fs adapter daos: closing %s with %d call(s) still inside DAOS past their "
                "deadline: the close ends when DAOS answers them",
                a->where, stuck);
        return;
    }
    close_finish(a);
}

static int daos_open(const mc_fs_config_t *cfg, void **impl)
{
    daos_adapter_t *a = calloc(1, sizeof(*a));
    if (!a)
        return MC_ERR_INTERNAL_ERROR;
    a->cfg = cfg;
    a->close_timeout_ms = cfg->write_timeout_ms;
    pthread_mutex_init(&a->pool_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->pool_cv, &ca);
    pthread_condattr_destroy(&ca);
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
    int probe;
    int rc = op_begin(&probe);
    if (rc != 0) {
        rc = daos_fail(a, rc, OP_OPEN, "open", ROOT_ONLY, cfg->root_dir);
        daos_close(a);
        return rc;
    }

    daos_call_t *res = call_new(a, CALL_RESOLVE);
    if (res) {
        res->path = malloc(PATH_MAX);
        res->rest = malloc(PATH_MAX);
    }
    if (!res || !res->path || !res->rest) {
        if (res)
            call_free(res);
        op_end(probe);
        daos_close(a);
        return MC_ERR_INTERNAL_ERROR;
    }
    snprintf(res->path, PATH_MAX, "%s", cfg->root_dir);
    rc = call_run(res, mc_now_ms() + cfg->write_timeout_ms);
    if (rc == ERR_DEADLINE || rc == MC_ERR_INTERNAL_ERROR) {
        rc = daos_fail(a, rc == ERR_DEADLINE ? rc : ENOMEM, OP_OPEN, "duns_resolve_path", ROOT_ONLY,
                       cfg->root_dir);
        op_end(probe);
        daos_close(a);
        return rc;
    }
    if (rc != 0) {
        if (rc == ENODATA || rc == ENOTSUP)
            MC_ERROR("fs adapter daos: %s is not on a DAOS container: no %s attribute on it or "
                     "any parent (is the MASS/dfuse volume mounted there?)",
                     res->path, DUNS_XATTR_NAME);
        rc = daos_fail(a, rc, OP_OPEN, "duns_resolve_path", ROOT_ONLY, res->path);
        duns_destroy_attr(&res->attr);
        call_free(res);
        op_end(probe);
        daos_close(a);
        return rc;
    }
    struct duns_attr_t *attr = &res->attr;
    char cpath[PATH_MAX];
    snprintf(cpath, sizeof(cpath), "%s%s%s", attr->da_rel_path ? attr->da_rel_path : "",
             res->rest[0] ? "/" : "", res->rest);
    snprintf(a->where, sizeof(a->where), "%s/%s:%s", attr->da_pool, attr->da_cont,
             cpath[0] ? cpath : "/");
    MC_INFO("fs adapter daos: %s -> pool %s container %s path %s", cfg->root_dir, attr->da_pool,
            attr->da_cont, cpath[0] ? cpath : "/");
    rc = conn_acquire(a, attr->da_pool, attr->da_cont, mc_now_ms() + cfg->write_timeout_ms);
    duns_destroy_attr(attr);
    call_free(res);
    if (rc == 0)
        rc = open_root(a, cpath, cfg->write_timeout_ms);
    for (unsigned i = 0; rc == 0 && i <= MC_OBJ_PROBE_DIR; i++) {
        char name[8], shown[sizeof(a->where) + 8];
        mc_obj_dir_name(i, name);
        snprintf(shown, sizeof(shown), "%s/%s", a->where, name);
        rc = open_dir(a, a->root, name, &a->dir[i], shown, cfg->write_timeout_ms);
    }
    if (rc == 0)
        rc = create_slots(a);
    op_end(probe);
    if (rc != 0) {
        daos_close(a);
        return rc;
    }
    *impl = a;
    return 0;
}

/* ---- event queue pool and transfers ------------------------------------------------------- */

/* A free event queue, waiting for one until the deadline (NULL then). */
static eq_slot_t *slot_take(daos_adapter_t *a, uint64_t deadline)
{
    pthread_mutex_lock(&a->pool_mu);
    while (!a->free_slots && wait_until_ms(&a->pool_cv, &a->pool_mu, deadline))
        ;
    eq_slot_t *s = a->free_slots;
    if (s)
        a->free_slots = s->next_free;
    pthread_mutex_unlock(&a->pool_mu);
    return s;
}

static void slot_give(daos_adapter_t *a, eq_slot_t *s)
{
    if (s->broken)
        return; /* its events may still be DAOS's: never handed out again */
    pthread_mutex_lock(&a->pool_mu);
    s->next_free = a->free_slots;
    a->free_slots = s;
    pthread_cond_signal(&a->pool_cv);
    pthread_mutex_unlock(&a->pool_mu);
}

/* Result of a batch of transfers: the first error and where a read ended early. */
typedef struct xfer_result {
    int err; /* first errno / DER, ERR_DEADLINE, 0 if none */
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
 * The deadline passed with `inflight` events of s out (busy[i] set): each is aborted and reaped
 * (an aborted event still completes, with -DER_CANCELED), so that none of them touches the
 * caller's buffers after this returns. Events that do not come back within ABORT_REAP_MS leave
 * the slot broken (never reused; its buffers' owner is told by the ERROR line).
 */
static void abort_xfers(daos_adapter_t *a, eq_slot_t *s, const int *busy, int inflight)
{
    for (int i = 0; i < MAX_INFLIGHT; i++)
        if (busy[i])
            daos_event_abort(&s->ev[i]);
    uint64_t until = mc_now_ms() + ABORT_REAP_MS;
    while (inflight > 0) {
        uint64_t now = mc_now_ms();
        if (now >= until)
            break;
        daos_event_t *done[MAX_INFLIGHT];
        int n = daos_eq_poll(s->eq, 1, (int64_t)(until - now) * 1000, MAX_INFLIGHT, done);
        if (n < 0)
            break;
        inflight -= n;
    }
    if (inflight > 0) {
        s->broken = 1;
        MC_ERROR("fs adapter daos: %s: %d aborted transfer(s) did not come back within %d ms; "
                 "their event queue is retired",
                 a->where, inflight, ABORT_REAP_MS);
    }
}

/*
 * Runs all transfers of [0, total) of obj on slot s: up to MAX_INFLIGHT events in flight,
 * each xfer bytes cut into iovcnt pieces, until `deadline` (then ERR_DEADLINE, the transfers
 * aborted). Never returns with an event in flight that could still touch segs.
 */
static void run_xfers(daos_adapter_t *a, eq_slot_t *s, dfs_obj_t *obj, int is_read,
                      const mc_obj_seg_t *segs, size_t nsegs, uint64_t total, uint64_t xfer,
                      uint64_t deadline, xfer_result_t *r)
{
    if (xfer == 0)
        xfer = total;
    uint64_t nx = mc_obj_xfer_count(total, xfer);
    int free_idx[MAX_INFLIGHT], busy[MAX_INFLIGHT], nfree = MAX_INFLIGHT, inflight = 0;
    for (int i = 0; i < MAX_INFLIGHT; i++) {
        free_idx[i] = MAX_INFLIGHT - 1 - i;
        busy[i] = 0;
    }
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
            busy[idx] = 1;
            inflight++;
            next++;
        }
        if (r->err)
            next = nx; /* submit nothing more; drain what is in flight */
        if (inflight == 0)
            break;
        uint64_t now = mc_now_ms();
        if (now >= deadline) {
            abort_xfers(a, s, busy, inflight);
            note_deadline();
            r->err = ERR_DEADLINE;
            r->call = is_read ? "dfs_read" : "dfs_write";
            return;
        }
        daos_event_t *done[MAX_INFLIGHT];
        int n = daos_eq_poll(s->eq, 1, (int64_t)(deadline - now) * 1000, MAX_INFLIGHT, done);
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
        if (n > 0)
            note_answer();
        for (int k = 0; k < n; k++) {
            reap(s, done[k], is_read, r);
            int idx = (int)(done[k] - s->ev);
            busy[idx] = 0;
            free_idx[nfree++] = idx;
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
static int publish(daos_adapter_t *a, unsigned dir, const char *tmp, const char *name,
                   uint64_t deadline)
{
    int rc = ENOENT;
    for (unsigned attempt = 0; attempt < MOVE_ATTEMPTS; attempt++) {
        backoff(attempt);
        rc = c_named(a, CALL_MOVE, a->dir[dir], tmp, name, deadline);
        if (rc != EEXIST && rc != ENOENT)
            return rc;
        if (rc == ENOENT) { /* the destination vanished, or our temporary did (then fail) */
            int src = c_named(a, CALL_STAT, a->dir[dir], tmp, NULL, deadline);
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
    int probe;
    int rc = op_begin(&probe);
    if (rc != 0)
        return daos_fail(a, rc, OP_WRITE, "dfs_open(O_CREAT)", dir, tmp);
    uint64_t deadline = mc_now_ms() + a->cfg->write_timeout_ms;
    dfs_obj_t *obj = NULL;
    rc =
        c_open(a, a->dir[dir], tmp, S_IFREG | FILE_MODE, O_RDWR | O_CREAT | O_EXCL, &obj, deadline);
    if (rc != 0) {
        op_end(probe);
        return daos_fail(a, rc, OP_WRITE, "dfs_open(O_CREAT)", dir, tmp);
    }

    eq_slot_t *s = slot_take(a, deadline);
    xfer_result_t r;
    if (!s)
        r = (xfer_result_t){.err = ERR_DEADLINE, .call = "dfs_write (no free event queue)"};
    else if (daos_handle_is_valid(s->eq))
        run_xfers(a, s, obj, 0, segs, nsegs, total, a->cfg->write_xfer_size, deadline, &r);
    else
        r = (xfer_result_t){.err = -DER_NO_HDL, .call = "daos_eq_create"};
    if (s)
        slot_give(a, s);
    dfs_release(obj);

    const char *call = r.call, *shown = tmp;
    rc = r.err;
    if (rc == 0) {
        mc_failpoint("fs.write.before_publish"); /* the file is written, not yet named */
        rc = publish(a, dir, tmp, name, deadline);
        call = "dfs_move";
        shown = name;
    }
    if (rc == 0) {
        op_end(probe);
        return 0;
    }
    int code = daos_fail(a, rc, OP_WRITE, call, dir, shown);
    /* Nothing is left behind: the temporary goes, with a little time of its own past a passed
     * deadline (a remove DAOS does not answer stays queued and runs when it answers again). */
    uint64_t now = mc_now_ms();
    c_named(a, CALL_REMOVE, a->dir[dir], tmp, NULL, (deadline > now ? deadline : now) + 100);
    op_end(probe);
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
    int probe;
    int rc = op_begin(&probe);
    if (rc != 0)
        return daos_fail(a, rc, OP_READ, "dfs_open", dir, name);
    uint64_t deadline = mc_now_ms() + a->cfg->read_timeout_ms;
    for (unsigned attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        backoff(attempt);
        dfs_obj_t *obj = NULL;
        rc = c_open(a, a->dir[dir], name, S_IFREG, O_RDONLY, &obj, deadline);
        if (rc != 0) {
            op_end(probe);
            return daos_fail(a, rc, OP_READ, "dfs_open", dir, name);
        }
        eq_slot_t *s = slot_take(a, deadline);
        xfer_result_t r;
        if (!s)
            r = (xfer_result_t){.err = ERR_DEADLINE, .call = "dfs_read (no free event queue)"};
        else if (daos_handle_is_valid(s->eq))
            run_xfers(a, s, obj, 1, segs, nsegs, total, a->cfg->read_xfer_size, deadline, &r);
        else
            r = (xfer_result_t){.err = -DER_NO_HDL, .call = "daos_eq_create"};
        if (s)
            slot_give(a, s);
        daos_size_t size = 1;
        if (!r.err && r.got < total && (rc = c_get_size(a, obj, &size, deadline)) != 0)
            r = (xfer_result_t){.err = rc, .call = "dfs_get_size"};
        dfs_release(obj);
        if (r.err) {
            op_end(probe);
            return daos_fail(a, r.err, OP_READ, r.call, dir, name);
        }
        if (r.got == total || size > 0) {
            *got = r.got;
            op_end(probe);
            return 0;
        }
    }
    op_end(probe);
    return daos_fail(a, ENOENT, OP_READ, "dfs_read (object punched by a writer)", dir, name);
}

static int daos_remove(void *impl, unsigned dir, const char *name)
{
    daos_adapter_t *a = impl;
    int probe;
    int rc = op_begin(&probe);
    if (rc == 0)
        rc = c_named(a, CALL_REMOVE, a->dir[dir], name, NULL,
                     mc_now_ms() + a->cfg->write_timeout_ms);
    op_end(probe);
    return rc ? daos_fail(a, rc, OP_REMOVE, "dfs_remove", dir, name) : 0;
}

static int daos_list_dir(void *impl, unsigned dir, mc_fs_name_cb cb, void *arg)
{
    daos_adapter_t *a = impl;
    int probe;
    int rc = op_begin(&probe);
    if (rc != 0)
        return daos_fail(a, rc, OP_LIST, "dfs_readdir", dir, ".");
    daos_anchor_t anchor;
    memset(&anchor, 0, sizeof(anchor));
    while (rc == 0 && !daos_anchor_is_eof(&anchor)) {
        daos_call_t *c = call_new(a, CALL_READDIR);
        if (!c) {
            rc = MC_ERR_INTERNAL_ERROR;
            break;
        }
        c->parent = a->dir[dir];
        c->anchor = anchor;
        c->nr = READDIR_BATCH;
        int err = call_run(c, mc_now_ms() + a->cfg->read_timeout_ms);
        if (err == MC_ERR_INTERNAL_ERROR) {
            rc = err;
            break;
        }
        if (err != 0) {
            if (err != ERR_DEADLINE)
                call_free(c);
            rc = daos_fail(a, err, OP_LIST, "dfs_readdir", dir, ".");
            break;
        }
        anchor = c->anchor;
        for (uint32_t i = 0; i < c->nr && rc == 0; i++)
            if (strcmp(c->ents[i].d_name, ".") != 0 && strcmp(c->ents[i].d_name, "..") != 0)
                rc = cb(c->ents[i].d_name, arg);
        call_free(c);
    }
    op_end(probe);
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
    .health = daos_health,
};
