/*
 * test_offload_crash.c — what an acknowledged put, upsert or remove survives, with
 * real processes: mooncake_master --enable_offload, mooncake_client --enable_offload holders
 * configured by the MOONCAKE_OFFLOAD_* / MOONCAKE_DISTRIBUTED_* environment, and this process as
 * a store client (no segment) that writes and reads back. Processes are killed with SIGKILL in
 * three sets — {master}, {master + the writing holder}, {every process} — and started again on
 * the same port, directories and shared root. Progress is watched on the master's /metrics (no
 * read lease) and on the directories.
 *
 * The distributed tests run with MOONCAKE_DISTRIBUTED_FS_TYPE=$MC_TEST_OFFLOAD_FS_TYPE (posix by
 * default). With daos (ctest test_offload_crash_daos, a build against the libdfs test double)
 * each root is a container of the double (dfs_double_mkcont) and only the distributed tests run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/store.h"
#include "cluster.h"
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define WAIT_MS 120000
#define MKCONT_BIN MC_BUILD_DIR "/dfs_double/dfs_double_mkcont"
#define DAOS_POOL "pool"
#define STRACE_BIN "/usr/bin/strace"

extern char **environ;

static char tmp_dir[] = "/tmp/mc_offload_crash_XXXXXX";
static const char *fs_type = "posix";
static char env_fs_type[64];

static int fs_is_daos(void)
{
    return strcmp(fs_type, "daos") == 0;
}

static void path_in_tmp(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmp_dir, name);
}

static int kill_leftovers(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    return 0;
}

static uint64_t mc_now_ms_for_tests(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- values ------------------------------------------------------------------------------- */

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

static void key_of(char *out, size_t cap, const char *prefix, int i)
{
    snprintf(out, cap, "%s/%d", prefix, i);
}

static void put_all(mc_store_t *s, const char *prefix, int n, size_t size, uint64_t seed)
{
    uint8_t *v = malloc(size);
    char key[64];
    for (int i = 0; i < n; i++) {
        key_of(key, sizeof(key), prefix, i);
        fill(v, size, seed + (uint64_t)i);
        int rc = mc_store_put(s, key, v, size, NULL);
        if (rc != 0)
            fprintf(stderr, "put %s: %d\n", key, rc);
        assert_int_equal(rc, 0);
    }
    free(v);
}

/* ---- the master's view -------------------------------------------------------------------- */

/* Waits until metric `name` >= want; returns its last value. */
static long long wait_metric_at_least(const mc_master_t *m, const char *name, long long want)
{
    long long v = -1;
    for (int waited = 0; waited < WAIT_MS; waited += 50) {
        v = mc_master_metric(m, name);
        if (v >= want)
            return v;
        usleep(50 * 1000);
    }
    fprintf(stderr, "timed out waiting for %s >= %lld (last %lld)\n", name, want, v);
    return v;
}

/* ---- directories -------------------------------------------------------------------------- */

/* Calls cb(dir, name) for every regular file under `dir` (recursively, .probe excluded). */
static void walk_files(const char *dir, void (*cb)(const char *dir, const char *name, void *arg),
                       void *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) && strcmp(e->d_name, ".probe") != 0)
            walk_files(p, cb, arg);
        else if (S_ISREG(st.st_mode))
            cb(dir, e->d_name, arg);
    }
    closedir(d);
}

/* Object files ("<version>/<key>" names contain %2F) whose key starts with `prefix`. */
typedef struct file_count {
    const char *needle; /* "%2F<prefix>%2F" */
    int n;
} file_count_t;

static void count_cb(const char *dir, const char *name, void *arg)
{
    (void)dir;
    file_count_t *c = arg;
    if (name[0] != '.' && strstr(name, c->needle))
        c->n++;
}

static int count_object_files(const char *dir, const char *prefix)
{
    char needle[128];
    snprintf(needle, sizeof(needle), "%%2F%s%%2F", prefix);
    file_count_t c = {needle, 0};
    walk_files(dir, count_cb, &c);
    return c.n;
}

/* Waits until exactly `want` object files of `prefix` are under dir; returns the last count. */
static int wait_object_files(const char *dir, const char *prefix, int want)
{
    int n = -1;
    for (int waited = 0; waited < WAIT_MS; waited += 50) {
        n = count_object_files(dir, prefix);
        if (n == want)
            return n;
        usleep(50 * 1000);
    }
    fprintf(stderr, "timed out waiting for %d files of %s under %s (last %d)\n", want, prefix, dir,
            n);
    return n;
}

/* ---- cluster ------------------------------------------------------------------------------ */

/* mooncake_client --enable_offload=true with a segment of `segment` bytes and `env` set. */
static int start_holder(mc_holder_t *h, const mc_master_t *m, const char *segment,
                        const char *const *env)
{
    static const char *const flags[] = {"--enable_offload=true", NULL};
    return mc_holder_start(h, m, segment, flags, env, 30000);
}

static int stop_holder(mc_holder_t *h)
{
    mc_cluster_untrack(h->proc.pid);
    return mc_proc_stop(&h->proc, SIGTERM, 30000);
}

/* ---- a cluster that can be killed and restarted -------------------------------------------- */

#define MAX_HOLDERS 3

/*
 * A master and up to MAX_HOLDERS offloading holders. Distributed: every holder uses the shared
 * root `root` (its files are in `backing`: the root itself for posix, the container's directory
 * of the libdfs double for daos). Local: holder i keeps its files in `<root>-h<i>`.
 */
typedef struct crash_cluster {
    int distributed;
    mc_master_t m;
    int rpc_port;
    int master_up;
    mc_holder_t h[MAX_HOLDERS];
    int up[MAX_HOLDERS];
    int nholders;
    char root[PATH_MAX / 2]; /* a directory under tmp_dir */
    char backing[PATH_MAX];
    char dir[MAX_HOLDERS][PATH_MAX]; /* where holder i's files are */
    char env_dir[MAX_HOLDERS][PATH_MAX + 64];
} crash_cluster_t;

/* Runs argv to exit; returns its exit code. */
static int run_to_exit(char *const argv[])
{
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Master flags of a distributed test: --distributed-fs-type for daos, nothing for posix. */
static const char *const *master_flags(const crash_cluster_t *c)
{
    static const char *const daos_flags[] = {"--distributed-fs-type", "daos", NULL};
    return c->distributed && fs_is_daos() ? daos_flags : NULL;
}

static void cluster_init(crash_cluster_t *c, const char *name, int distributed, int nholders)
{
    memset(c, 0, sizeof(*c));
    c->distributed = distributed;
    c->nholders = nholders;
    path_in_tmp(c->root, sizeof(c->root), name);
    snprintf(c->backing, sizeof(c->backing), "%s", c->root);
    if (distributed && fs_is_daos()) {
        char *argv[] = {MKCONT_BIN, c->root, DAOS_POOL, (char *)name, NULL};
        assert_int_equal(run_to_exit(argv), 0);
        snprintf(c->backing, sizeof(c->backing), "%s/" DAOS_POOL "/%s", getenv("DFS_DOUBLE_ROOT"),
                 name);
    }
    for (int i = 0; i < nholders; i++) {
        if (distributed)
            snprintf(c->dir[i], sizeof(c->dir[i]), "%s", c->backing);
        else
            snprintf(c->dir[i], sizeof(c->dir[i]), "%s-h%d", c->root, i);
        snprintf(c->env_dir[i], sizeof(c->env_dir[i]), "%s=%s",
                 distributed ? "MOONCAKE_DISTRIBUTED_ROOT_DIR"
                             : "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
                 distributed ? c->root : c->dir[i]);
    }
}

static int cluster_start_master(crash_cluster_t *c)
{
    int rc = c->rpc_port ? mc_master_start_on(&c->m, c->rpc_port, 1, master_flags(c))
                         : mc_master_start(&c->m, 1, master_flags(c));
    c->rpc_port = c->m.rpc_port;
    c->master_up = rc == 0;
    return rc;
}

/* Starts holder i; `failpoints` (may be NULL) is its MC_FAILPOINTS. */
static int cluster_start_holder(crash_cluster_t *c, int i, const char *failpoints)
{
    char fp[128];
    snprintf(fp, sizeof(fp), "MC_FAILPOINTS=%s", failpoints ? failpoints : "");
    const char *env[8];
    int n = 0;
    if (c->distributed) {
        env[n++] = "MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed";
        env[n++] = env_fs_type;
    }
    env[n++] = c->env_dir[i];
    env[n++] = "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1";
    if (failpoints)
        env[n++] = fp;
    env[n] = NULL;
    int rc = start_holder(&c->h[i], &c->m, "64MB", env);
    c->up[i] = rc == 0;
    return rc;
}

static int cluster_start(crash_cluster_t *c)
{
    if (cluster_start_master(c) != 0)
        return -1;
    for (int i = 0; i < c->nholders; i++) {
        if (cluster_start_holder(c, i, NULL) != 0)
            return -1;
    }
    return 0;
}

static void kill_pid(pid_t pid)
{
    mc_cluster_untrack(pid);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void cluster_kill_holder(crash_cluster_t *c, int i)
{
    kill_pid(c->h[i].proc.pid);
    close(c->h[i].proc.stdin_fd);
    close(c->h[i].proc.stdout_fd);
    c->up[i] = 0;
}

static void cluster_kill_master(crash_cluster_t *c)
{
    kill_pid(c->m.pid);
}

/* Who is SIGKILLed: the brief's three sets. Holder 0 is the writer. */
typedef enum kill_set {
    KILL_MASTER,
    KILL_MASTER_AND_WRITER,
    KILL_EVERY_PROCESS,
    KILL_WRITER, /* the master lives on: the writer comes back before it is expired */
} kill_set_t;

static const char *kill_set_name(kill_set_t k)
{
    return k == KILL_MASTER              ? "{master}"
           : k == KILL_MASTER_AND_WRITER ? "{master, writer}"
           : k == KILL_WRITER            ? "{writer}"
                                         : "{every process}";
}

static void cluster_kill(crash_cluster_t *c, kill_set_t k)
{
    fprintf(stderr, "SIGKILL %s\n", kill_set_name(k));
    if (k != KILL_WRITER)
        cluster_kill_master(c);
    c->master_up = k == KILL_WRITER;
    for (int i = 0; i < c->nholders; i++) {
        if (c->up[i] && (k == KILL_EVERY_PROCESS || (k != KILL_MASTER && i == 0)))
            cluster_kill_holder(c, i);
    }
}

/*
 * Starts the master again on its port and every holder that is down, then waits until every
 * holder is registered again and has reported its files (and the distributed root is rescanned).
 */
static void cluster_restart(crash_cluster_t *c)
{
    if (!c->master_up)
        assert_int_equal(cluster_start_master(c), 0);
    c->master_up = 1;
    for (int i = 0; i < c->nholders; i++) {
        if (!c->up[i])
            assert_int_equal(cluster_start_holder(c, i, NULL), 0);
    }
    /* (a killed holder's old registration may still be there until it expires) */
    assert_true(wait_metric_at_least(&c->m, "master_offload_clients", c->nholders) >= c->nholders);
    long long left = -1;
    for (int waited = 0; waited < WAIT_MS && left != 0; waited += 50) {
        left = mc_master_metric(&c->m, "master_offload_recovering");
        if (left != 0)
            usleep(50 * 1000);
    }
    assert_int_equal(left, 0);
}

/* Stops every holder that is up and the master, cleanly; 1 when all exited with status 0. */
static int cluster_stop(crash_cluster_t *c)
{
    int clean = 1;
    for (int i = 0; i < c->nholders; i++) {
        if (c->up[i])
            clean &= mc_clean_exit(stop_holder(&c->h[i]));
        c->up[i] = 0;
    }
    clean &= mc_clean_exit(mc_master_stop(&c->m, SIGTERM));
    return clean;
}

/* A store client in this process (no segment); distributed clusters: with the backend, so it
 * reads DFS replicas itself. */
static mc_store_t *cluster_client(const crash_cluster_t *c)
{
    const char *env[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed", env_fs_type,
                         c->env_dir[0], NULL};
    if (c->distributed)
        mc_env_apply(env, 1);
    mc_store_t *s = mc_test_client(&c->m, 1, 0);
    if (c->distributed)
        mc_env_apply(env, 0);
    assert_non_null(s);
    return s;
}

/* Temporary files (".t…") under dir, recursively (.probe excluded). */
static void temp_cb(const char *dir, const char *name, void *arg)
{
    (void)dir;
    if (!strncmp(name, ".t", 2))
        (*(int *)arg)++;
}

static int count_temps(const char *dir)
{
    int n = 0;
    walk_files(dir, temp_cb, &n);
    return n;
}

/* Waits until the stopped-at-a-failpoint process pid is in the stopped state. */
static void wait_stopped(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    assert_true(WIFSTOPPED(status));
}

/* Puts key -> value (seeded) with its memory replica on `segment`. */
static void put_on(mc_store_t *s, const char *key, size_t size, uint64_t seed, const char *segment)
{
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.preferred_segment = segment;
    uint8_t *v = malloc(size);
    fill(v, size, seed);
    assert_int_equal(mc_store_put(s, key, v, size, &cfg), 0);
    free(v);
}

/* 0 when key reads back as exactly the seeded value, else the get's result. */
static int64_t read_exact(mc_store_t *s, const char *key, size_t size, uint64_t seed)
{
    uint8_t *v = malloc(size), *out = malloc(size);
    fill(v, size, seed);
    int64_t got = mc_store_get(s, key, out, size);
    int64_t rc = got == (int64_t)size ? (memcmp(out, v, size) == 0 ? 0 : -1) : got;
    free(v);
    free(out);
    return rc;
}

/* Every key prefix/0..n-1 reads back exactly; returns how many did. */
static int read_all_exact(mc_store_t *s, const char *prefix, int n, size_t size, uint64_t seed)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char key[64];
        key_of(key, sizeof(key), prefix, i);
        int64_t rc = read_exact(s, key, size, seed + (uint64_t)i);
        if (rc != 0)
            fprintf(stderr, "get %s: %lld\n", key, (long long)rc);
        ok += rc == 0;
    }
    return ok;
}

/* ---- tracing system calls ------------------------------------------------------------------ */

typedef struct tracer {
    pid_t pid;
    char log[PATH_MAX]; /* strace -ff writes <log>.<tid> */
} tracer_t;

/* 1 when every thread of `pid` is traced. */
static int all_threads_traced(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int all = 1, any = 0;
    struct dirent *e;
    while (all && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX], line[256];
        snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int traced = 0;
        while (fgets(line, sizeof(line), f)) {
            if (!strncmp(line, "TracerPid:", 10))
                traced = atoi(line + 10) != 0;
        }
        fclose(f);
        all = traced;
        any = 1;
    }
    closedir(d);
    return all && any;
}

/*
 * Attaches strace to every thread of `pid`, recording renames, unlinks and fsyncs with the paths
 * of their descriptors. Returns 0 when attached, -1 when strace may not trace (ptrace not
 * permitted here: the caller skips the test). A missing strace fails the test: dependencies.sh
 * installs it, so its absence is a broken set-up, not a reason to pass without looking.
 */
static int tracer_attach(tracer_t *t, pid_t pid, const char *log)
{
    if (access(STRACE_BIN, X_OK) != 0)
        fail_msg("%s is not installed (dependencies.sh installs strace)", STRACE_BIN);
    snprintf(t->log, sizeof(t->log), "%s", log);
    char pidarg[32];
    snprintf(pidarg, sizeof(pidarg), "%d", (int)pid);
    char *argv[] = {
        STRACE_BIN, "-qq",  "-ff", "-y",   "-e", "trace=renameat,renameat2,unlinkat,fsync",
        "-o",       t->log, "-p",  pidarg, NULL};
    if (posix_spawn(&t->pid, STRACE_BIN, NULL, NULL, argv, environ) != 0)
        return -1;
    mc_cluster_track(t->pid);
    for (int waited = 0; waited < 10000; waited += 20) {
        if (all_threads_traced(pid))
            return 0;
        if (waitpid(t->pid, NULL, WNOHANG) == t->pid) {
            mc_cluster_untrack(t->pid);
            fprintf(stderr, "strace could not attach (ptrace not permitted?): skipping\n");
            return -1;
        }
        usleep(20 * 1000);
    }
    return -1;
}

/* Detaches strace (SIGINT) and waits for it. */
static void tracer_detach(tracer_t *t)
{
    kill(t->pid, SIGINT);
    waitpid(t->pid, NULL, 0);
    mc_cluster_untrack(t->pid);
}

/* The path strace printed for the descriptor argument starting at s ("7</a/b>"); "" if none. */
static void fd_path(const char *s, char *out, size_t cap)
{
    const char *lt = strchr(s, '<'), *gt = lt ? strchr(lt, '>') : NULL;
    out[0] = '\0';
    if (lt && gt)
        snprintf(out, cap, "%.*s", (int)(gt - lt - 1), lt + 1);
}

typedef struct dir_sync_check {
    int changes;  /* successful renames onto / unlinks of object names */
    int unsynced; /* of which no later fsync of their directory followed in that thread */
} dir_sync_check_t;

/*
 * Checks one thread's trace: every successful rename publishing an object (a name not starting
 * with '.') and every successful unlink of one is followed by an fsync of that directory.
 */
static void check_thread_trace(const char *file, dir_sync_check_t *c)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return;
    char line[4096], pending[PATH_MAX] = "";
    while (fgets(line, sizeof(line), f)) {
        int ok = strstr(line, ") = 0") != NULL;
        if (!strncmp(line, "fsync(", 6)) {
            char dir[PATH_MAX];
            fd_path(line + 6, dir, sizeof(dir));
            if (ok && pending[0] && !strcmp(dir, pending))
                pending[0] = '\0';
            continue;
        }
        const char *call = !strncmp(line, "renameat", 8)   ? line
                           : !strncmp(line, "unlinkat", 8) ? line
                                                           : NULL;
        if (!call || !ok)
            continue;
        /* The object name is the last quoted argument of a rename, the only one of an unlink. */
        const char *q = strrchr(line, '"');
        const char *open = q ? q - 1 : NULL;
        while (open && open > line && *open != '"')
            open--;
        if (!open || open[1] == '.')
            continue; /* a temporary or probe name */
        const char *dirarg = call[0] == 'r' ? strchr(strchr(line, ',') + 1, ',') + 1 : line + 9;
        if (pending[0])
            c->unsynced++; /* the previous change was never synced */
        fd_path(dirarg, pending, sizeof(pending));
        c->changes++;
    }
    if (pending[0])
        c->unsynced++;
    fclose(f);
}

static dir_sync_check_t check_trace(const tracer_t *t)
{
    dir_sync_check_t c = {0, 0};
    char dir[PATH_MAX], *slash;
    snprintf(dir, sizeof(dir), "%s", t->log);
    slash = strrchr(dir, '/');
    *slash = '\0';
    const char *base = slash + 1;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, strlen(base)) != 0 || e->d_name[strlen(base)] != '.')
            continue;
        char file[PATH_MAX * 2];
        snprintf(file, sizeof(file), "%s/%s", dir, e->d_name);
        check_thread_trace(file, &c);
    }
    if (d)
        closedir(d);
    return c;
}

/* ---- tests -------------------------------------------------------------------------------- */

/*
 * A published offload file and a deleted one are durable — the rename and the
 * unlink are followed by an fsync of their directory (observed with strace in the holder, local
 * backend and posix distributed backend alike).
 */
static void run_dir_sync(int distributed)
{
    mc_master_t m;
    mc_holder_t h;
    char dir[PATH_MAX], env_dir[PATH_MAX + 64], log[PATH_MAX];
    path_in_tmp(dir, sizeof(dir), distributed ? "sync-dfs" : "sync-local");
    path_in_tmp(log, sizeof(log), distributed ? "strace-dfs" : "strace-local");
    snprintf(env_dir, sizeof(env_dir), "%s=%s",
             distributed ? "MOONCAKE_DISTRIBUTED_ROOT_DIR" : "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
             dir);
    const char *env_local[] = {env_dir, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    const char *env_dfs[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed",
                             "MOONCAKE_DISTRIBUTED_FS_TYPE=posix", env_dir,
                             "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    assert_int_equal(mc_master_start(&m, 1, NULL), 0);
    assert_int_equal(start_holder(&h, &m, "64MB", distributed ? env_dfs : env_local), 0);
    tracer_t t;
    if (tracer_attach(&t, h.proc.pid, log) != 0) {
        stop_holder(&h);
        mc_master_stop(&m, SIGTERM);
        skip();
    }
    mc_store_t *s = mc_test_client(&m, 1, 0);
    assert_non_null(s);
    put_all(s, "sync", 4, 256 * 1024, 7);
    assert_int_equal(wait_metric_at_least(&m, "master_disk_replicas", 4), 4);
    assert_int_equal(wait_object_files(dir, "sync", 4), 4);
    for (int i = 0; i < 2; i++) {
        char key[64];
        key_of(key, sizeof(key), "sync", i);
        assert_int_equal(mc_store_remove(s, key, 1), 0);
    }
    /* A remove is acknowledged once its file's deletion (unlink, directory fsync) is done. */
    assert_int_equal(count_object_files(dir, "sync"), 2);
    tracer_detach(&t);
    dir_sync_check_t c = check_trace(&t);
    fprintf(stderr, "traced %d publishing renames and unlinks, %d without a directory fsync\n",
            c.changes, c.unsynced);
    assert_true(c.changes >= 6); /* 4 files published, 2 deleted */
    assert_int_equal(c.unsynced, 0);
    mc_store_free(s);
    assert_true(mc_clean_exit(stop_holder(&h)));
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
}

static void test_local_offload_files_are_published_and_deleted_with_a_directory_fsync(void **state)
{
    (void)state;
    run_dir_sync(0);
}

static void test_posix_dfs_files_are_published_and_deleted_with_a_directory_fsync(void **state)
{
    (void)state;
    run_dir_sync(1);
}

/*
 * Objects whose files are on disk survive the restart of any set of processes.
 * 16 objects written through holder 0 (the writer) and offloaded; then the kill set is SIGKILLed
 * and started again: every object reads back exactly. Distributed: nothing of the writer's
 * lifetime is left but the files under the shared root, which a client rescans for the master.
 */
static void run_offloaded_objects_survive(int distributed, kill_set_t k)
{
    crash_cluster_t c;
    char name[64];
    snprintf(name, sizeof(name), "survive-%s-%d", distributed ? "dfs" : "local", (int)k);
    cluster_init(&c, name, distributed, 2);
    assert_int_equal(cluster_start(&c), 0);
    mc_store_t *s = cluster_client(&c);
    for (int i = 0; i < 16; i++) {
        char key[64];
        key_of(key, sizeof(key), "sv", i);
        put_on(s, key, 256 * 1024, 500 + (uint64_t)i, c.h[0].segment);
    }
    assert_int_equal(wait_metric_at_least(&c.m, "master_disk_replicas", 16), 16);
    /* The reader goes too (a client that lived through a master restart may see its first call
     * fail on a connection to the old master: not what is tested here). */
    mc_store_free(s);
    cluster_kill(&c, k);
    cluster_restart(&c);
    s = cluster_client(&c);
    assert_int_equal(read_all_exact(s, "sv", 16, 256 * 1024, 500), 16);
    mc_store_free(s);
    assert_true(cluster_stop(&c));
}

#define SURVIVE_TEST(backend, dist, kset, ksname)                                                  \
    static void test_##backend##_offloaded_objects_survive_sigkill_of_##ksname(void **state)       \
    {                                                                                              \
        (void)state;                                                                               \
        run_offloaded_objects_survive(dist, kset);                                                 \
    }
SURVIVE_TEST(local, 0, KILL_WRITER, writer)
SURVIVE_TEST(local, 0, KILL_MASTER, master)
SURVIVE_TEST(local, 0, KILL_MASTER_AND_WRITER, master_and_writer)
SURVIVE_TEST(local, 0, KILL_EVERY_PROCESS, every_process)
SURVIVE_TEST(dfs, 1, KILL_MASTER, master)
SURVIVE_TEST(dfs, 1, KILL_MASTER_AND_WRITER, master_and_writer)
SURVIVE_TEST(dfs, 1, KILL_EVERY_PROCESS, every_process)

/*
 * An acknowledged upsert or remove is never undone by a crash. ACK_N objects
 * (value 1) written through holder 0 and offloaded; then each is upserted to value 2, or
 * removed, and every call returns 0. Removed: right after the last acknowledgment the kill set
 * is SIGKILLed and started again; every key is missing. Upserted: once the new values have
 * their disk replicas (before that "value 2 or nothing" is all a crash promises, and a test
 * that accepts nothing passes with every key lost) the kill set is SIGKILLed and started
 * again; every key reads value 2, never value 1 or nothing. The only files left are those of
 * the new values.
 */
#define ACK_N 8
#define ACK_SIZE (256 * 1024)

typedef enum ack_op { ACK_UPSERT, ACK_REMOVE } ack_op_t;

/* The "ack" objects' files: under every holder's directory, or the one shared root. */
static int ack_files(const crash_cluster_t *c, int distributed)
{
    int files = 0;
    for (int i = 0; i < c->nholders && (i == 0 || !distributed); i++)
        files += count_object_files(c->dir[i], "ack");
    return files;
}

static void run_acknowledged_op_survives(int distributed, kill_set_t k, ack_op_t op)
{
    crash_cluster_t c;
    char name[64];
    snprintf(name, sizeof(name), "ack-%s-%d-%d", distributed ? "dfs" : "local", (int)k, (int)op);
    cluster_init(&c, name, distributed, 2);
    assert_int_equal(cluster_start(&c), 0);
    mc_store_t *s = cluster_client(&c);
    char keys[ACK_N][64];
    const char *kp[ACK_N];
    for (int i = 0; i < ACK_N; i++) {
        key_of(keys[i], sizeof(keys[i]), "ack", i);
        kp[i] = keys[i];
        put_on(s, keys[i], ACK_SIZE, 1000 + (uint64_t)i, c.h[0].segment);
    }
    assert_int_equal(wait_metric_at_least(&c.m, "master_disk_replicas", ACK_N), ACK_N);
    uint64_t t0 = mc_now_ms_for_tests();
    if (op == ACK_UPSERT) {
        uint8_t *v = malloc(ACK_SIZE);
        for (int i = 0; i < ACK_N; i++) {
            fill(v, ACK_SIZE, 2000 + (uint64_t)i);
            assert_int_equal(mc_store_upsert(s, keys[i], v, ACK_SIZE, NULL), 0);
        }
        free(v);
    } else {
        int results[ACK_N];
        assert_int_equal(mc_store_batch_remove(s, kp, ACK_N / 2, 1, results), 0);
        for (int i = ACK_N / 2; i < ACK_N; i++)
            assert_int_equal(mc_store_remove(s, keys[i], 1), 0);
    }
    fprintf(stderr, "%d %s acknowledged in %llu ms\n", ACK_N,
            op == ACK_UPSERT ? "upserts" : "removes",
            (unsigned long long)(mc_now_ms_for_tests() - t0));
    if (op == ACK_UPSERT) { /* the old values' files are gone (acknowledged): these are new */
        assert_int_equal(wait_metric_at_least(&c.m, "master_disk_replicas", ACK_N), ACK_N);
        uint64_t end = mc_now_ms_for_tests() + WAIT_MS;
        while (ack_files(&c, distributed) < ACK_N) {
            assert_true(mc_now_ms_for_tests() < end);
            usleep(50 * 1000);
        }
    }
    mc_store_free(s);
    cluster_kill(&c, k);
    cluster_restart(&c);
    s = cluster_client(&c);
    int new_values = 0;
    for (int i = 0; i < ACK_N; i++) {
        int64_t rc = read_exact(s, keys[i], ACK_SIZE, 2000 + (uint64_t)i);
        if (rc != MC_ERR_OBJECT_NOT_FOUND && !(op == ACK_UPSERT && rc == 0))
            fprintf(stderr, "%s after the restart: %lld (%s)\n", keys[i], (long long)rc,
                    read_exact(s, keys[i], ACK_SIZE, 1000 + (uint64_t)i) == 0 ? "the OLD value"
                                                                              : "not the new one");
        assert_true(rc == MC_ERR_OBJECT_NOT_FOUND || (op == ACK_UPSERT && rc == 0));
        new_values += rc == 0;
    }
    fprintf(stderr, "%d of %d keys read the new value, the others are missing\n", new_values,
            ACK_N);
    assert_int_equal(new_values, op == ACK_UPSERT ? ACK_N : 0);
    /* The files left are exactly those of the new values that read back: no old one. */
    assert_int_equal(ack_files(&c, distributed), new_values);
    mc_store_free(s);
    assert_true(cluster_stop(&c));
}

#define ACK_TEST(backend, dist, kset, ksname, op, opname)                                          \
    static void test_##backend##_acknowledged_##opname##_survives_sigkill_of_##ksname(             \
        void **state)                                                                              \
    {                                                                                              \
        (void)state;                                                                               \
        run_acknowledged_op_survives(dist, kset, op);                                              \
    }
ACK_TEST(local, 0, KILL_MASTER, master, ACK_UPSERT, upsert)
ACK_TEST(local, 0, KILL_MASTER_AND_WRITER, master_and_writer, ACK_UPSERT, upsert)
ACK_TEST(local, 0, KILL_EVERY_PROCESS, every_process, ACK_UPSERT, upsert)
ACK_TEST(local, 0, KILL_MASTER, master, ACK_REMOVE, remove)
ACK_TEST(local, 0, KILL_MASTER_AND_WRITER, master_and_writer, ACK_REMOVE, remove)
ACK_TEST(local, 0, KILL_EVERY_PROCESS, every_process, ACK_REMOVE, remove)
ACK_TEST(dfs, 1, KILL_MASTER, master, ACK_UPSERT, upsert)
ACK_TEST(dfs, 1, KILL_MASTER_AND_WRITER, master_and_writer, ACK_UPSERT, upsert)
ACK_TEST(dfs, 1, KILL_EVERY_PROCESS, every_process, ACK_UPSERT, upsert)
ACK_TEST(dfs, 1, KILL_MASTER, master, ACK_REMOVE, remove)
ACK_TEST(dfs, 1, KILL_MASTER_AND_WRITER, master_and_writer, ACK_REMOVE, remove)
ACK_TEST(dfs, 1, KILL_EVERY_PROCESS, every_process, ACK_REMOVE, remove)

/* Waits until dir holds `want` temporaries or more (want > 0), or none (want == 0). */
static void wait_temps(const char *dir, int want)
{
    int n = -1;
    for (int waited = 0; waited < WAIT_MS; waited += 5) {
        n = count_temps(dir);
        if (want ? n >= want : n == 0)
            return;
        usleep(5 * 1000);
    }
    fail_msg("timed out waiting for %s%d temporaries under %s (last %d)", want ? ">= " : "", want,
             dir, n);
}

/*
 * An acknowledged upsert with an offload in flight: the old value's file is being written (its
 * writer sleeps between writing and publishing it, failpoint fs.write.before_publish=sleep) when
 * the key is upserted. The writer publishes the file after the upsert was decided; the upsert is
 * acknowledged only once that file is gone too. The master is SIGKILLed once the new value has
 * its disk replica; once the writer is past its publish, the master comes back: the key reads
 * the new value, never the old one nor nothing.
 */
static void run_upsert_during_the_old_values_write(int distributed)
{
    crash_cluster_t c;
    cluster_init(&c, distributed ? "inflight-dfs" : "inflight-local", distributed, 2);
    assert_int_equal(cluster_start_master(&c), 0);
    assert_int_equal(cluster_start_holder(&c, 0, "fs.write.before_publish=sleep:1000"), 0);
    assert_int_equal(cluster_start_holder(&c, 1, NULL), 0);
    mc_store_t *s = cluster_client(&c);
    put_on(s, "inflight/0", ACK_SIZE, 1000, c.h[0].segment);
    wait_temps(c.dir[0], 1); /* holder 0 wrote the old value's file, not yet published */
    uint8_t *v = malloc(ACK_SIZE);
    fill(v, ACK_SIZE, 2000);
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.preferred_segment = c.h[1].segment; /* the new value is not held up by the failpoint */
    assert_int_equal(mc_store_upsert(s, "inflight/0", v, ACK_SIZE, &cfg), 0);
    free(v);
    /* The new value's disk replica (the old one's was dropped before the acknowledgment):
     * without it nothing is all a crash promises, and the check below would pass with the key
     * lost. */
    assert_int_equal(wait_metric_at_least(&c.m, "master_disk_replicas", 1), 1);
    assert_int_equal(wait_object_files(c.dir[distributed ? 0 : 1], "inflight", 1), 1);
    mc_store_free(s);
    cluster_kill(&c, KILL_MASTER);
    wait_temps(c.dir[0], 0); /* holder 0 is past its publish (the master is down meanwhile) */
    cluster_restart(&c);
    s = cluster_client(&c);
    int64_t rc = read_exact(s, "inflight/0", ACK_SIZE, 2000);
    if (rc != 0 && rc != MC_ERR_OBJECT_NOT_FOUND)
        fprintf(stderr, "inflight/0 after the restart: %lld (%s)\n", (long long)rc,
                read_exact(s, "inflight/0", ACK_SIZE, 1000) == 0 ? "the OLD value" : "?");
    assert_int_equal(rc, 0); /* the new value, exactly */
    mc_store_free(s);
    assert_true(cluster_stop(&c));
}

static void test_local_upsert_during_the_old_values_offload_survives_sigkill_of_master(void **state)
{
    (void)state;
    run_upsert_during_the_old_values_write(0);
}

static void test_dfs_upsert_during_the_old_values_offload_survives_sigkill_of_master(void **state)
{
    (void)state;
    run_upsert_during_the_old_values_write(1);
}

/*
 * A writer killed mid-offload leaves its temporary file (written, not yet
 * renamed: stopped at the failpoint fs.write.before_publish, then SIGKILLed with the master);
 * the next start of a client on that storage deletes it, and the objects offloaded before stay
 * readable.
 */
static void run_killed_writer_temp_is_cleaned(int distributed)
{
    crash_cluster_t c;
    cluster_init(&c, distributed ? "temp-dfs" : "temp-local", distributed, 1);
    assert_int_equal(cluster_start(&c), 0);
    mc_store_t *s = cluster_client(&c);
    put_all(s, "ta", 4, MiB, 100);
    assert_int_equal(wait_metric_at_least(&c.m, "master_disk_replicas", 4), 4);
    assert_int_equal(count_temps(c.dir[0]), 0);
    /* The holder again, now stopping right before it publishes a file. */
    assert_true(mc_clean_exit(stop_holder(&c.h[0])));
    assert_int_equal(cluster_start_holder(&c, 0, "fs.write.before_publish=stop"), 0);
    put_on(s, "tb/0", 8 * MiB, 200, c.h[0].segment);
    wait_stopped(c.h[0].proc.pid);
    assert_int_equal(count_temps(c.dir[0]), 1);
    mc_store_free(s);
    cluster_kill(&c, KILL_MASTER_AND_WRITER);
    assert_int_equal(count_temps(c.dir[0]), 1); /* left behind */
    cluster_restart(&c);
    s = cluster_client(&c);
    assert_int_equal(count_temps(c.dir[0]), 0); /* gone once the holder is up */
    assert_int_equal(read_all_exact(s, "ta", 4, MiB, 100), 4);
    mc_store_free(s);
    assert_true(cluster_stop(&c));
}

static void test_local_temp_of_a_writer_killed_mid_offload_is_removed_at_restart(void **state)
{
    (void)state;
    run_killed_writer_temp_is_cleaned(0);
}

static void test_dfs_temp_of_a_writer_killed_mid_offload_is_removed_at_restart(void **state)
{
    (void)state;
    run_killed_writer_temp_is_cleaned(1);
}

/*
 * Shared root, several writers: a client starting while another writer is in the middle of a
 * write (stopped before its rename, alive) keeps that writer's temporary; once that writer is
 * dead, the next start removes it.
 */
static void test_dfs_temp_of_a_live_writer_survives_another_clients_start(void **state)
{
    (void)state;
    crash_cluster_t c;
    cluster_init(&c, "temp-live", 1, 3);
    assert_int_equal(cluster_start_master(&c), 0);
    assert_int_equal(cluster_start_holder(&c, 0, NULL), 0); /* sets the root up */
    assert_int_equal(cluster_start_holder(&c, 1, "fs.write.before_publish=stop"), 0);
    mc_store_t *s = cluster_client(&c);
    put_on(s, "live/0", 4 * MiB, 300, c.h[1].segment);
    wait_stopped(c.h[1].proc.pid);
    assert_int_equal(count_temps(c.backing), 1);
    assert_int_equal(cluster_start_holder(&c, 2, NULL), 0); /* cleans the root at start */
    assert_int_equal(count_temps(c.backing), 1);            /* holder 1 is alive: kept */
    cluster_kill_holder(&c, 1);
    assert_true(mc_clean_exit(stop_holder(&c.h[2])));
    c.up[2] = 0;
    assert_int_equal(cluster_start_holder(&c, 2, NULL), 0);
    assert_int_equal(count_temps(c.backing), 0); /* its writer is gone: removed */
    mc_store_free(s);
    assert_true(cluster_stop(&c));
}

/* ---- main --------------------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    static const char *const clean[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR",
                                        "MOONCAKE_DISTRIBUTED_FS_TYPE",
                                        "MOONCAKE_DISTRIBUTED_ROOT_DIR",
                                        "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
                                        "MOONCAKE_DISTRIBUTED_HEALTH_CHECK",
                                        "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES",
                                        "MC_FAILPOINTS",
                                        NULL};
    for (int i = 0; clean[i]; i++)
        unsetenv(clean[i]);
    const char *t = getenv("MC_TEST_OFFLOAD_FS_TYPE");
    fs_type = t && *t ? t : "posix";
    if (strcmp(fs_type, "posix") != 0 && strcmp(fs_type, "daos") != 0) {
        fprintf(stderr, "MC_TEST_OFFLOAD_FS_TYPE=%s: expected posix or daos\n", fs_type);
        return -1;
    }
    snprintf(env_fs_type, sizeof(env_fs_type), "MOONCAKE_DISTRIBUTED_FS_TYPE=%s", fs_type);
    if (!mkdtemp(tmp_dir))
        return -1;
    if (fs_is_daos()) {
        char store[PATH_MAX];
        path_in_tmp(store, sizeof(store), "dfs-double-store");
        if (mkdir(store, 0755) != 0 || setenv("DFS_DOUBLE_ROOT", store, 1) != 0)
            return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

#define CRASH_TEST(f) cmocka_unit_test_teardown(f, kill_leftovers)

int main(void)
{
    /* MC_TEST_FILTER=pattern runs only the tests whose names match (cmocka's * and ? wildcards). */
    const char *filter = getenv("MC_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const char *t = getenv("MC_TEST_OFFLOAD_FS_TYPE");
    if (t && !strcmp(t, "daos")) {
        const struct CMUnitTest dfs_tests[] = {
            CRASH_TEST(test_dfs_acknowledged_upsert_survives_sigkill_of_master),
            CRASH_TEST(test_dfs_acknowledged_upsert_survives_sigkill_of_master_and_writer),
            CRASH_TEST(test_dfs_acknowledged_upsert_survives_sigkill_of_every_process),
            CRASH_TEST(test_dfs_acknowledged_remove_survives_sigkill_of_master),
            CRASH_TEST(test_dfs_acknowledged_remove_survives_sigkill_of_master_and_writer),
            CRASH_TEST(test_dfs_acknowledged_remove_survives_sigkill_of_every_process),
            CRASH_TEST(test_dfs_upsert_during_the_old_values_offload_survives_sigkill_of_master),
            CRASH_TEST(test_dfs_offloaded_objects_survive_sigkill_of_master),
            CRASH_TEST(test_dfs_offloaded_objects_survive_sigkill_of_master_and_writer),
            CRASH_TEST(test_dfs_offloaded_objects_survive_sigkill_of_every_process),
            CRASH_TEST(test_dfs_temp_of_a_writer_killed_mid_offload_is_removed_at_restart),
            CRASH_TEST(test_dfs_temp_of_a_live_writer_survives_another_clients_start),
        };
        return cmocka_run_group_tests_name("offload crashes (distributed fs type daos)", dfs_tests,
                                           setup, teardown);
    }
    const struct CMUnitTest tests[] = {
        CRASH_TEST(test_local_offload_files_are_published_and_deleted_with_a_directory_fsync),
        CRASH_TEST(test_posix_dfs_files_are_published_and_deleted_with_a_directory_fsync),
        CRASH_TEST(test_local_offloaded_objects_survive_sigkill_of_writer),
        CRASH_TEST(test_local_offloaded_objects_survive_sigkill_of_master),
        CRASH_TEST(test_local_offloaded_objects_survive_sigkill_of_master_and_writer),
        CRASH_TEST(test_local_offloaded_objects_survive_sigkill_of_every_process),
        CRASH_TEST(test_dfs_offloaded_objects_survive_sigkill_of_master),
        CRASH_TEST(test_dfs_offloaded_objects_survive_sigkill_of_master_and_writer),
        CRASH_TEST(test_dfs_offloaded_objects_survive_sigkill_of_every_process),
        CRASH_TEST(test_local_acknowledged_upsert_survives_sigkill_of_master),
        CRASH_TEST(test_local_acknowledged_upsert_survives_sigkill_of_master_and_writer),
        CRASH_TEST(test_local_acknowledged_upsert_survives_sigkill_of_every_process),
        CRASH_TEST(test_local_acknowledged_remove_survives_sigkill_of_master),
        CRASH_TEST(test_local_acknowledged_remove_survives_sigkill_of_master_and_writer),
        CRASH_TEST(test_local_acknowledged_remove_survives_sigkill_of_every_process),
        CRASH_TEST(test_dfs_acknowledged_upsert_survives_sigkill_of_master),
        CRASH_TEST(test_dfs_acknowledged_upsert_survives_sigkill_of_master_and_writer),
        CRASH_TEST(test_dfs_acknowledged_upsert_survives_sigkill_of_every_process),
        CRASH_TEST(test_dfs_acknowledged_remove_survives_sigkill_of_master),
        CRASH_TEST(test_dfs_acknowledged_remove_survives_sigkill_of_master_and_writer),
        CRASH_TEST(test_dfs_acknowledged_remove_survives_sigkill_of_every_process),
        CRASH_TEST(test_local_upsert_during_the_old_values_offload_survives_sigkill_of_master),
        CRASH_TEST(test_dfs_upsert_during_the_old_values_offload_survives_sigkill_of_master),
        CRASH_TEST(test_local_temp_of_a_writer_killed_mid_offload_is_removed_at_restart),
        CRASH_TEST(test_dfs_temp_of_a_writer_killed_mid_offload_is_removed_at_restart),
        CRASH_TEST(test_dfs_temp_of_a_live_writer_survives_another_clients_start),
    };
    return cmocka_run_group_tests_name("offload crashes", tests, setup, teardown);
}
