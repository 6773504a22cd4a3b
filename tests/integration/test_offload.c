/*
 * test_offload.c — offload with real processes: mooncake_master --enable_offload, mooncake_client
 * --enable_offload holders configured by the MOONCAKE_OFFLOAD_* / MOONCAKE_DISTRIBUTED_*
 * environment, and this process as a store client (no segment) that puts and reads back.
 * Progress is watched on the master's /metrics and /query_key, which grant no read lease (a
 * lease would keep the objects under test from being evicted).
 *
 * The distributed-backend tests run with MOONCAKE_DISTRIBUTED_FS_TYPE=$MC_TEST_OFFLOAD_FS_TYPE
 * (posix by default). With daos (ctest test_offload_daos, a build against the libdfs test double)
 * each root is made a container of the double with dfs_double_mkcont, DFS_DOUBLE_ROOT is a
 * directory of the test's tmp dir, the master gets --distributed-fs-type daos, and only the
 * distributed tests run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/store.h"
#include "cluster.h"
#include "proc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"
#define CLIENT_BIN MC_BUILD_DIR "/tools/mooncake_client"
#define WAIT_MS 120000
#define MKCONT_BIN MC_BUILD_DIR "/dfs_double/dfs_double_mkcont"
#define DAOS_POOL "pool"

extern char **environ;

static char tmp_dir[] = "/tmp/mc_offload_test_XXXXXX";

/* MOONCAKE_DISTRIBUTED_FS_TYPE of the distributed tests: "posix" or "daos". */
static const char *fs_type = "posix";
static char env_fs_type[64];

/* ---- processes ---------------------------------------------------------------------------- */

/* Children still running; a failed assertion leaves the test early, its teardown kills them. */
static int kill_leftovers(void **state)
{
    mc_cluster_kill_all();
    return 0;
}

typedef mc_master_t master_t;
typedef mc_holder_t holder_t;

/* mooncake_master --enable_offload=true; waits for its RPC and metrics ports. */
static int start_master_on(master_t *m, int rpc_port, const char *const *extra)
{
    return mc_master_start_on(m, rpc_port, 1, extra);
}

static int start_master(master_t *m, const char *const *extra)
{
    return mc_master_start(m, 1, extra);
}

static int stop_master(master_t *m)
{
    return mc_master_stop(m, SIGTERM);
}

/* mooncake_client --enable_offload=true with a segment of `segment` bytes and `env` set. */
static int start_holder(holder_t *h, const master_t *m, const char *segment, const char *const *env)
{
    static const char *const flags[] = {"--enable_offload=true", NULL};
    return mc_holder_start(h, m, segment, flags, env, 30000);
}

static int stop_holder(holder_t *h)
{
    mc_cluster_untrack(h->proc.pid);
    return mc_proc_stop(&h->proc, SIGTERM, 30000);
}

static mc_store_t *new_client(const master_t *m)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .global_segment_size = 0,
                             .local_buffer_size = 16 * MiB,
                             .protocol = "tcp",
                             .master_server_addr = m->addr};
    mc_store_t *s = NULL;
    assert_int_equal(mc_store_setup(&cfg, &s), 0);
    return s;
}

/* Runs argv to exit with env set; returns the exit code and the stderr text (caller frees). */
static int run_to_exit(char *const argv[], const char *const *env, char **err_text)
{
    int errp[2];
    assert_int_equal(pipe(errp), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, errp[1], STDERR_FILENO);
    pid_t pid;
    mc_env_apply(env, 1);
    assert_int_equal(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    mc_env_apply(env, 0);
    posix_spawn_file_actions_destroy(&fa);
    close(errp[1]);
    char *buf = calloc(1, 65536);
    size_t got = 0;
    ssize_t n;
    while ((n = read(errp[0], buf + got, 65535 - got)) > 0)
        got += (size_t)n;
    close(errp[0]);
    int status;
    waitpid(pid, &status, 0);
    *err_text = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- the master's HTTP view --------------------------------------------------------------- */

/* A master_* metric, or -1 when the master cannot be asked. */
static int64_t metric(const master_t *m, const char *name)
{
    return mc_master_metric(m, name);
}

/* Waits until metric `name` >= want; returns its last value. */
static int64_t wait_metric_at_least(const master_t *m, const char *name, int64_t want)
{
    int64_t v = -1;
    for (int waited = 0; waited < WAIT_MS; waited += 100) {
        v = metric(m, name);
        if (v >= want)
            return v;
        usleep(100 * 1000);
    }
    fprintf(stderr, "timed out waiting for %s >= %lld (last %lld)\n", name, (long long)want,
            (long long)v);
    return v;
}

/* The master's /query_key replica types of `key`, e.g. "MEMORY,LOCAL_DISK"; "" when absent. */
static void replica_types(const master_t *m, const char *key, char *out, size_t cap)
{
    char path[512];
    snprintf(path, sizeof(path), "/query_key?key=%s", key);
    char *body = mc_http_get(m->metrics_port, path);
    out[0] = '\0';
    for (char *p = body ? strstr(body, "\"type\":\"") : NULL; p; p = strstr(p, "\"type\":\"")) {
        p += 8;
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%.*s", used ? "," : "", (int)strcspn(p, "\""), p);
    }
    free(body);
}

/* ---- values and files --------------------------------------------------------------------- */

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

static void path_in_tmp(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmp_dir, name);
}

/* Total bytes of regular files under dir (recursively) and their count. */
static void du(const char *dir, uint64_t *bytes, uint64_t *files)
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
        if (S_ISDIR(st.st_mode)) {
            if (strcmp(e->d_name, ".probe") != 0)
                du(p, bytes, files);
        } else if (S_ISREG(st.st_mode) && strstr(e->d_name, "%2F")) { /* "<version>/<key>" */
            *bytes += (uint64_t)st.st_size;
            (*files)++;
        }
    }
    closedir(d);
}

/* Finds the object file whose name ends with `suffix` under dir. */
static int find_file(const char *dir, const char *suffix, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    int found = -1;
    while (found != 0 && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        size_t n = strlen(e->d_name), k = strlen(suffix);
        if (S_ISDIR(st.st_mode))
            found = find_file(p, suffix, out, cap);
        else if (n >= k && !strcmp(e->d_name + n - k, suffix)) {
            snprintf(out, cap, "%s", p);
            found = 0;
        }
    }
    closedir(d);
    return found;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int fs_is_daos(void)
{
    return strcmp(fs_type, "daos") == 0;
}

/* Master flags of a distributed test: --distributed-fs-type for daos, nothing for posix. */
static const char *const *dfs_master_flags(void)
{
    static const char *const daos_flags[] = {"--distributed-fs-type", "daos", NULL};
    return fs_is_daos() ? daos_flags : NULL;
}

/*
 * For daos: makes `mount` the mount point of container `cont` of the test double (created), and
 * returns in `backing` the directory that holds the container's objects. For posix `backing` is
 * `mount` itself and nothing is created.
 */
static void dfs_prepare_root(const char *mount, const char *cont, char *backing, size_t cap)
{
    if (!fs_is_daos()) {
        snprintf(backing, cap, "%s", mount);
        return;
    }
    char *argv[] = {MKCONT_BIN, (char *)mount, DAOS_POOL, (char *)cont, NULL};
    char *err = NULL;
    int code = run_to_exit(argv, NULL, &err);
    if (code != 0)
        fprintf(stderr, "dfs_double_mkcont %s: %d: %s", mount, code, err);
    free(err);
    assert_int_equal(code, 0);
    snprintf(backing, cap, "%s/" DAOS_POOL "/%s", getenv("DFS_DOUBLE_ROOT"), cont);
}

/* ---- tests -------------------------------------------------------------------------------- */

#define BIG_N 256

static void put_all(mc_store_t *s, const char *prefix, int n, size_t size, uint64_t seed)
{
    uint8_t *v = malloc(size);
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s/%d", prefix, i);
        fill(v, size, seed + (uint64_t)i);
        int rc = mc_store_put(s, key, v, size, NULL);
        if (rc != 0)
            fprintf(stderr, "put %s: %d\n", key, rc);
        assert_int_equal(rc, 0);
    }
    free(v);
}

/* Every key reads back byte-exact; returns how many did. */
static int read_all_exact(mc_store_t *s, const char *prefix, int n, size_t size, uint64_t seed)
{
    uint8_t *v = malloc(size), *out = malloc(size);
    char key[64];
    int ok = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s/%d", prefix, i);
        fill(v, size, seed + (uint64_t)i);
        memset(out, 0, size);
        int64_t got = mc_store_get(s, key, out, size);
        if (got != (int64_t)size)
            fprintf(stderr, "get %s: %lld\n", key, (long long)got);
        assert_int_equal(got, (int64_t)size);
        assert_memory_equal(out, v, size);
        ok++;
    }
    free(v);
    free(out);
    return ok;
}

static void test_64_mib_segment_holds_256_mib_of_puts_through_local_offload(void **state)
{
    master_t m;
    holder_t h;
    char dir[PATH_MAX], env_path[PATH_MAX + 64];
    path_in_tmp(dir, sizeof(dir), "local-big");
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    const char *env[] = {env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    assert_int_equal(start_master(&m, NULL), 0);
    assert_int_equal(start_holder(&h, &m, "64MB", env), 0);
    mc_store_t *s = new_client(&m);
    put_all(s, "big", BIG_N, MiB, 1);
    assert_int_equal(read_all_exact(s, "big", BIG_N, MiB, 1), BIG_N);
    assert_true(metric(&m, "master_disk_only_keys") > 0);
    assert_true(metric(&m, "master_offload_tasks_done_total") >= BIG_N - 64);
    assert_int_equal(metric(&m, "master_offload_tasks_failed_total"), 0);
    mc_store_offload_stats_t st;
    assert_int_equal(mc_store_get_offload_stats(s, &st), 0);
    assert_true(st.fallback_reads > 0); /* read from the holder's disk */
    assert_int_equal(st.enabled, 0);    /* this client holds no segment */
    assert_true(wait_metric_at_least(&m, "master_fallback_reads_total", 1) > 0);
    mc_store_free(s);
    assert_true(mc_clean_exit(stop_holder(&h)));
    assert_true(mc_clean_exit(stop_master(&m)));
}

static void test_offload_on_evict_keeps_every_key_readable(void **state)
{
    master_t m;
    holder_t h;
    char dir[PATH_MAX], env_path[PATH_MAX + 64];
    path_in_tmp(dir, sizeof(dir), "local-on-evict");
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    const char *env[] = {env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    const char *extra[] = {"--offload_on_evict", NULL};
    assert_int_equal(start_master(&m, extra), 0);
    assert_int_equal(start_holder(&h, &m, "32MB", env), 0);
    mc_store_t *s = new_client(&m);
    put_all(s, "oe", 96, MiB, 7);
    assert_int_equal(read_all_exact(s, "oe", 96, MiB, 7), 96);
    assert_true(metric(&m, "master_offload_tasks_done_total") > 0);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

static void test_distributed_posix_objects_outlive_their_writer(void **state)
{
    master_t m;
    holder_t a;
    char root[PATH_MAX], link[PATH_MAX], stub[PATH_MAX];
    char env_root[PATH_MAX + 64], env_stub[PATH_MAX + 64], env_link[PATH_MAX + 64];
    path_in_tmp(root, sizeof(root), "dfs");
    path_in_tmp(link, sizeof(link), "dfs-mounted-elsewhere");
    path_in_tmp(stub, sizeof(stub), "stub-not-yet-there");
    char backing[PATH_MAX];
    if (fs_is_daos())
        dfs_prepare_root(root, "outlive", backing, sizeof(backing));
    else
        assert_int_equal(mkdir(root, 0755), 0);
    assert_int_equal(symlink(root, link), 0); /* the same storage under another path */
    snprintf(env_root, sizeof(env_root), "MOONCAKE_DISTRIBUTED_ROOT_DIR=%s", root);
    snprintf(env_link, sizeof(env_link), "MOONCAKE_DISTRIBUTED_ROOT_DIR=%s", link);
    snprintf(env_stub, sizeof(env_stub), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", stub);
    /* The guide's client command, with the fs type under test. */
    const char *env_a[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed",
                           env_fs_type,
                           env_root,
                           "MOONCAKE_DISTRIBUTED_HEALTH_CHECK=true",
                           env_stub,
                           "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=2",
                           NULL};
    /* --enable_offload alone (with posix), plus --distributed-fs-type daos with daos. */
    assert_int_equal(start_master(&m, dfs_master_flags()), 0);
    assert_int_equal(start_holder(&a, &m, "64MB", env_a), 0);
    struct stat st;
    assert_int_equal(stat(stub, &st), 0); /* the stub directory was created */
    mc_store_t *w = new_client(&m);
    put_all(w, "dfs", 32, MiB, 100);
    assert_int_equal(wait_metric_at_least(&m, "master_dfs_replicas", 32), 32);
    char types[256];
    replica_types(&m, "dfs/0", types, sizeof(types));
    assert_string_equal(types, "MEMORY,DFS");
    if (fs_is_daos()) { /* the bytes went through libdfs into the container, not the mount */
        char file[PATH_MAX];
        assert_int_equal(find_file(backing, "%2Fdfs%2F0", file, sizeof(file)), 0);
        assert_int_not_equal(find_file(root, "%2Fdfs%2F0", file, sizeof(file)), 0);
    }
    /* A goes away: its memory with it. */
    assert_true(mc_clean_exit(stop_holder(&a)));
    for (int i = 0; i < 100; i++) {
        replica_types(&m, "dfs/0", types, sizeof(types));
        if (!strcmp(types, "DFS"))
            break;
        usleep(100 * 1000);
    }
    assert_string_equal(types, "DFS");
    /* A client without the distributed backend cannot read it, and says why. */
    uint8_t *buf = malloc(MiB);
    assert_int_equal(mc_store_get(w, "dfs/0", buf, MiB), MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    mc_store_free(w);
    free(buf);
    /* B (this process, another store) mounts the storage at another path and reads all. */
    const char *env_b[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed", env_fs_type,
                           env_link, NULL};
    mc_env_apply(env_b, 1);
    mc_store_t *b = new_client(&m);
    mc_env_apply(env_b, 0);
    assert_int_equal(read_all_exact(b, "dfs", 32, MiB, 100), 32);
    mc_replica_desc_t d[4];
    size_t n = 0;
    assert_int_equal(mc_store_get_replica_desc(b, "dfs/3", d, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].type, MC_REPLICA_DFS);
    mc_store_offload_stats_t ost;
    assert_int_equal(mc_store_get_offload_stats(b, &ost), 0);
    assert_int_equal(ost.fallback_reads, 32);
    assert_int_equal(ost.backend, 2);
    /* Removal deletes the files once a distributed client takes the deletions. */
    mc_store_free(b);
    stop_master(&m);
}

static void test_master_restart_re_registers_local_disk_replicas(void **state)
{
    master_t m;
    holder_t h;
    char dir[PATH_MAX], env_path[PATH_MAX + 64];
    path_in_tmp(dir, sizeof(dir), "local-restart");
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    const char *env[] = {env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    assert_int_equal(start_master(&m, NULL), 0);
    assert_int_equal(start_holder(&h, &m, "64MB", env), 0);
    mc_store_t *s = new_client(&m);
    put_all(s, "rs", 16, 256 * 1024, 50);
    assert_int_equal(wait_metric_at_least(&m, "master_disk_replicas", 16), 16);
    int port = m.rpc_port;
    assert_true(mc_clean_exit(stop_master(&m)));
    assert_int_equal(start_master_on(&m, port, NULL), 0);
    /* The holder remounts, registers again and reports the files it holds. */
    assert_int_equal(wait_metric_at_least(&m, "master_disk_replicas", 16), 16);
    char types[256];
    replica_types(&m, "rs/5", types, sizeof(types));
    assert_string_equal(types, "LOCAL_DISK");
    assert_int_equal(read_all_exact(s, "rs", 16, 256 * 1024, 50), 16);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

static void test_unusable_directories_and_bad_values_are_one_line_start_up_errors(void **state)
{
    char file[PATH_MAX], under_file[PATH_MAX + 8];
    path_in_tmp(file, sizeof(file), "regular-file");
    int fd = open(file, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    snprintf(under_file, sizeof(under_file), "%s/sub", file);
    char e_root[PATH_MAX + 80], e_path[PATH_MAX + 80];
    snprintf(e_root, sizeof(e_root), "MOONCAKE_DISTRIBUTED_ROOT_DIR=%s", under_file);
    snprintf(e_path, sizeof(e_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", under_file);
    struct {
        const char *env[4];
        const char *expect;
    } cases[] = {
        {{"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed", e_root, NULL},
         "MOONCAKE_DISTRIBUTED_ROOT_DIR"},
        {{e_path, NULL}, "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"},
        {{"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed",
          "MOONCAKE_DISTRIBUTED_FS_TYPE=hf3fs", e_root, NULL},
         "hf3fs"},
        {{"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=s3", NULL},
         "MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR"},
        {{"MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=soon", e_path, NULL},
         "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS"},
        {{"MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES=lots", NULL},
         "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *argv[] = {CLIENT_BIN, "--master_server_address=127.0.0.1:1",
                        "--global_segment_size=16MB", "--enable_offload=true", NULL};
        char *err = NULL;
        int code = run_to_exit(argv, cases[i].env, &err);
        fprintf(stderr, "case %zu: %s", i, err);
        assert_int_equal(code, 1);
        assert_int_equal(count_lines(err), 1);
        assert_non_null(strstr(err, cases[i].expect));
        free(err);
    }
    /* The library refuses too, before it contacts anyone. */
    const char *env[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed", e_root, NULL};
    mc_env_apply(env, 1);
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .local_buffer_size = MiB,
                             .master_server_addr = "127.0.0.1:1"};
    mc_store_t *s = NULL;
    int rc = mc_store_setup(&cfg, &s);
    mc_env_apply(env, 0);
    assert_int_equal(rc, MC_ERR_INVALID_PARAMS);
    assert_null(s);
}

static void test_small_disk_limit_evicts_fifo_and_never_returns_wrong_bytes(void **state)
{
    master_t m;
    holder_t h;
    char dir[PATH_MAX], env_path[PATH_MAX + 64];
    path_in_tmp(dir, sizeof(dir), "local-small");
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    const char *env[] = {env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1",
                         "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES=8MB", NULL};
    assert_int_equal(start_master(&m, NULL), 0);
    assert_int_equal(start_holder(&h, &m, "16MB", env), 0);
    mc_store_t *s = new_client(&m);
    const int n = 48;
    put_all(s, "cap", n, MiB, 900);
    assert_true(wait_metric_at_least(&m, "master_offload_tasks_done_total", n - 16) >= n - 16);
    assert_true(metric(&m, "master_disk_evicted_replicas_total") > 0);
    assert_true(metric(&m, "master_disk_replicas") <= 8);
    uint64_t bytes = 0, files = 0;
    du(dir, &bytes, &files);
    assert_true(files <= 8);
    assert_true(bytes <= 8 * MiB + 8 * 4096);
    /* Every get is exact or a miss; the newest objects are still there. */
    uint8_t *v = malloc(MiB), *out = malloc(MiB);
    int hits = 0;
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof(key), "cap/%d", i);
        int64_t got = mc_store_get(s, key, out, MiB);
        if (got == MC_ERR_OBJECT_NOT_FOUND)
            continue;
        assert_int_equal(got, (int64_t)MiB);
        fill(v, MiB, 900 + (uint64_t)i);
        assert_memory_equal(out, v, MiB);
        hits++;
    }
    assert_true(hits >= 8);
    fill(v, MiB, 900 + (uint64_t)(n - 1));
    assert_int_equal(mc_store_get(s, "cap/47", out, MiB), (int64_t)MiB);
    assert_memory_equal(out, v, MiB);
    free(v);
    free(out);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

static void test_corrupted_object_file_is_a_checksum_error_not_wrong_data(void **state)
{
    master_t m;
    holder_t h;
    char dir[PATH_MAX], env_path[PATH_MAX + 64];
    path_in_tmp(dir, sizeof(dir), "local-corrupt");
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    const char *env[] = {env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    assert_int_equal(start_master(&m, NULL), 0);
    assert_int_equal(start_holder(&h, &m, "8MB", env), 0);
    mc_store_t *s = new_client(&m);
    put_all(s, "victim", 1, MiB, 31);
    assert_int_equal(wait_metric_at_least(&m, "master_disk_replicas", 1), 1);
    /* Fillers push the victim's memory replica out (the oldest disk-backed object goes first). */
    char types[256] = "";
    for (int round = 0; round < 20 && strcmp(types, "LOCAL_DISK") != 0; round++) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "filler%d", round);
        put_all(s, prefix, 8, MiB, 1000 + (uint64_t)round * 10);
        replica_types(&m, "victim/0", types, sizeof(types));
    }
    assert_string_equal(types, "LOCAL_DISK");
    char file[PATH_MAX];
    assert_int_equal(find_file(dir, "%2Fvictim%2F0", file, sizeof(file)), 0);
    int fd = open(file, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t byte;
    assert_int_equal(pread(fd, &byte, 1, st.st_size - 100), 1);
    byte ^= 0x40;
    assert_int_equal(pwrite(fd, &byte, 1, st.st_size - 100), 1);
    close(fd);
    uint8_t *out = malloc(MiB);
    assert_int_equal(mc_store_get(s, "victim/0", out, MiB), MC_ERR_CHECKSUM_MISMATCH);
    free(out);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

/* ---- reads through the owner: staging leases ----------------------------------------------- */

#define FETCHER_BIN MC_BUILD_DIR "/tests/integration/offload_fetcher"
#define STAGED_N 8
#define STAGED_SIZE MiB
#define STAGED_SEED 5000

/* Where the owner serves "staged/i" (its read endpoint) and the file version of each. */
typedef struct staged_objects {
    char endpoint[272];
    uint64_t version[STAGED_N];
} staged_objects_t;

/*
 * A master and an offloading holder whose staging area is `staging_bytes` with a lease TTL of
 * `ttl_ms`, and STAGED_N objects of STAGED_SIZE bytes (unique values) with a LOCAL_DISK replica
 * each. The fetchers read the files through the owner whether or not a memory replica is left.
 */
static void start_staged_cluster(master_t *m, holder_t *h, const char *name, const char *ttl_ms,
                                 const char *staging_bytes, staged_objects_t *out)
{
    char dir[PATH_MAX], env_path[PATH_MAX + 64], env_ttl[96], env_staging[96];
    path_in_tmp(dir, sizeof(dir), name);
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    snprintf(env_ttl, sizeof(env_ttl), "MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS=%s", ttl_ms);
    snprintf(env_staging, sizeof(env_staging), "MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES=%s",
             staging_bytes);
    const char *env[] = {env_path, env_ttl, env_staging,
                         "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    assert_int_equal(start_master(m, NULL), 0);
    assert_int_equal(start_holder(h, m, "64MB", env), 0);
    mc_store_t *s = new_client(m);
    put_all(s, "staged", STAGED_N, STAGED_SIZE, STAGED_SEED);
    assert_int_equal(wait_metric_at_least(m, "master_disk_replicas", STAGED_N), STAGED_N);
    for (int i = 0; i < STAGED_N; i++) {
        char key[64];
        snprintf(key, sizeof(key), "staged/%d", i);
        mc_replica_desc_t d[4];
        size_t count = 0;
        assert_int_equal(mc_store_get_replica_desc(s, key, d, 4, &count), 0);
        size_t k = 0;
        while (k < count && k < 4 && d[k].type != MC_REPLICA_LOCAL_DISK)
            k++;
        assert_true(k < count && k < 4);
        snprintf(out->endpoint, sizeof(out->endpoint), "%s", d[k].segment_name);
        out->version[i] = d[k].address;
    }
    mc_store_free(s);
}

typedef struct fetch_result {
    long exact, expired, failed, wrong;
    int status; /* wait status */
} fetch_result_t;

/*
 * offload_fetcher reading staged/first .. staged/first+n-1 for `millis` ms, with MC_FAILPOINTS =
 * failpoints (NULL: none); returns when it printed READY.
 */
static void start_fetcher(mc_proc_t *p, const staged_objects_t *o, int first, int n, int millis,
                          const char *failpoints)
{
    char ms[32], size[32], objs[STAGED_N][96];
    snprintf(ms, sizeof(ms), "%d", millis);
    snprintf(size, sizeof(size), "%llu", (unsigned long long)STAGED_SIZE);
    char *argv[8 + STAGED_N] = {FETCHER_BIN, (char *)o->endpoint, ms, size};
    int argc = 4;
    for (int i = first; i < first + n; i++) {
        snprintf(objs[i], sizeof(objs[i]), "%llu:%llu:staged/%d", (unsigned long long)o->version[i],
                 (unsigned long long)(STAGED_SEED + i), i);
        argv[argc++] = objs[i];
    }
    argv[argc] = NULL;
    char fp[128];
    snprintf(fp, sizeof(fp), "MC_FAILPOINTS=%s", failpoints ? failpoints : "");
    const char *env[] = {fp, NULL};
    if (failpoints)
        mc_env_apply(env, 1);
    assert_int_equal(mc_proc_start(p, argv, "READY", 30000), 0);
    if (failpoints)
        mc_env_apply(env, 0);
    mc_cluster_track(p->pid);
}

/* Reads the fetcher's RESULT line and reaps it. */
static fetch_result_t finish_fetcher(mc_proc_t *p)
{
    char out[4096];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(out) - 1 && (n = read(p->stdout_fd, out + got, sizeof(out) - 1 - got)) > 0)
        got += (size_t)n;
    out[got] = '\0';
    fetch_result_t r = {-1, -1, -1, -1, -1};
    char *line = strstr(out, "RESULT ");
    if (line)
        sscanf(line, "RESULT exact=%ld expired=%ld failed=%ld wrong=%ld", &r.exact, &r.expired,
               &r.failed, &r.wrong);
    waitpid(p->pid, &r.status, 0);
    mc_cluster_untrack(p->pid);
    close(p->stdout_fd);
    close(p->stdin_fd);
    fprintf(stderr, "fetcher %d: exact=%ld expired=%ld failed=%ld wrong=%ld status=%d\n",
            (int)p->pid, r.exact, r.expired, r.failed, r.wrong, r.status);
    return r;
}

/* Waits until the fetcher stopped itself at its failpoint (SIGSTOP). */
static void wait_stopped(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    assert_true(WIFSTOPPED(status));
}

/*
 * A reader stops between the owner's FETCH reply and its pull, past the staging
 * TTL; another reader needs the room (the staging area holds one object), so the owner reclaims
 * the stalled reader's slot and stages another key there. The stalled reader then pulls that other
 * key's bytes: it must fail (its RELEASE finds the lease reclaimed), never return them as success.
 */
static void
test_reader_stalled_past_the_staging_ttl_fails_instead_of_reading_another_key(void **state)
{
    master_t m;
    holder_t h;
    staged_objects_t o;
    start_staged_cluster(&m, &h, "staged-stall", "200", "1048576", &o);
    mc_proc_t stalled, other;
    start_fetcher(&stalled, &o, 0, 1, 0, "offload.fetch.before_pull=stop");
    wait_stopped(stalled.pid);
    usleep(400 * 1000); /* past the TTL, counted from when staged/0 was in the slot */
    start_fetcher(&other, &o, 1, 1, 0, NULL);
    fetch_result_t b = finish_fetcher(&other);
    assert_int_equal(b.exact, 1); /* it took the stalled reader's slot */
    kill(stalled.pid, SIGCONT);
    fetch_result_t a = finish_fetcher(&stalled);
    assert_int_equal(a.wrong, 0);
    assert_int_equal(a.exact, 0);
    assert_int_equal(a.expired, 1);
    assert_true(WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0);
    assert_true(mc_clean_exit(stop_holder(&h))); /* the owner exits cleanly */
    stop_master(&m);
}

/*
 * A slot lives until its reader releases it: a reader stalled past the TTL still reads the exact
 * bytes when no other fetch needed the room meanwhile.
 */
static void
test_reader_stalled_past_the_staging_ttl_reads_exact_bytes_without_contention(void **state)
{
    master_t m;
    holder_t h;
    staged_objects_t o;
    start_staged_cluster(&m, &h, "staged-stall-alone", "200", "1048576", &o);
    mc_proc_t stalled;
    start_fetcher(&stalled, &o, 3, 1, 0, "offload.fetch.before_pull=stop");
    wait_stopped(stalled.pid);
    usleep(400 * 1000);
    kill(stalled.pid, SIGCONT);
    fetch_result_t a = finish_fetcher(&stalled);
    assert_int_equal(a.exact, 1);
    assert_int_equal(a.wrong, 0);
    assert_true(mc_clean_exit(stop_holder(&h))); /* the owner exits cleanly */
    stop_master(&m);
}

/*
 * A stalled reader's slot reclaimed, under load: four readers of different keys through one
 * owner whose staging TTL is 1 ms and whose staging area holds two objects. Every read is the
 * key's exact bytes or an error; none is another key's bytes.
 */
static void
test_concurrent_readers_with_a_1_ms_staging_ttl_get_exact_bytes_or_an_error(void **state)
{
    master_t m;
    holder_t h;
    staged_objects_t o;
    start_staged_cluster(&m, &h, "staged-ttl1", "1", "2097152", &o);
    enum { READERS = 4 };
    mc_proc_t r[READERS];
    for (int i = 0; i < READERS; i++)
        start_fetcher(&r[i], &o, i * (STAGED_N / READERS), STAGED_N / READERS, 3000, NULL);
    long exact = 0, wrong = 0;
    int clean_exits = 0;
    for (int i = 0; i < READERS; i++) {
        fetch_result_t f = finish_fetcher(&r[i]);
        assert_true(f.exact >= 0);
        exact += f.exact;
        wrong += f.wrong;
        clean_exits += WIFEXITED(f.status) && WEXITSTATUS(f.status) == 0;
    }
    assert_int_equal(wrong, 0);
    assert_int_equal(clean_exits, READERS);
    assert_true(exact > 0);
    assert_true(mc_clean_exit(stop_holder(&h))); /* the owner exits cleanly */
    stop_master(&m);
}

static void test_failed_health_check_stops_taking_tasks_and_shows_in_health(void **state)
{
    master_t m;
    holder_t h;
    char root[PATH_MAX], backing[PATH_MAX], env_root[PATH_MAX + 64], probe[PATH_MAX + 32];
    path_in_tmp(root, sizeof(root), "dfs-health");
    dfs_prepare_root(root, "health", backing, sizeof(backing));
    snprintf(env_root, sizeof(env_root), "MOONCAKE_DISTRIBUTED_ROOT_DIR=%s", root);
    const char *env[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed",
                         env_fs_type,
                         env_root,
                         "MOONCAKE_DISTRIBUTED_HEALTH_CHECK=true",
                         "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1",
                         NULL};
    assert_int_equal(start_master(&m, dfs_master_flags()), 0);
    assert_int_equal(start_holder(&h, &m, "64MB", env), 0);
    mc_store_t *s = new_client(&m);
    put_all(s, "hc", 4, MiB, 300);
    assert_int_equal(wait_metric_at_least(&m, "master_dfs_replicas", 4), 4);
    assert_int_equal(metric(&m, "master_offload_backend_healthy"), 1);
    /* The probe directory vanishes (from the container, with daos): the next check fails. */
    snprintf(probe, sizeof(probe), "rm -rf '%s/.probe'", backing);
    assert_int_equal(system(probe), 0);
    assert_int_equal(wait_metric_at_least(&m, "master_offload_unhealthy_clients", 1), 1);
    assert_int_equal(metric(&m, "master_offload_backend_healthy"), 0);
    char *health = mc_http_get(m.metrics_port, "/health");
    assert_non_null(health);
    assert_non_null(strstr(health, "\"status\":\"degraded\""));
    assert_non_null(strstr(health, "\"backend_healthy\":false"));
    free(health);
    /* No more tasks for it: new objects stay in memory, still readable. */
    put_all(s, "hc2", 4, MiB, 400);
    usleep(2500 * 1000);
    assert_int_equal(metric(&m, "master_dfs_replicas"), 4);
    assert_int_equal(read_all_exact(s, "hc2", 4, MiB, 400), 4);
    assert_int_equal(read_all_exact(s, "hc", 4, MiB, 300), 4);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

/* ---- a DAOS engine that dies (the double's .engine_down file stops it for every process) ---- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void set_engine(int up)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/.engine_down", getenv("DFS_DOUBLE_ROOT"));
    if (up) {
        unlink(path);
    } else {
        int fd = open(path, O_WRONLY | O_CREAT, 0644);
        assert_true(fd >= 0);
        close(fd);
    }
}

/* Engine up again whatever a failed assertion left. */
static int engine_up_and_kill_leftovers(void **state)
{
    if (fs_is_daos())
        set_engine(1);
    return kill_leftovers(state);
}

/*
 * With the engine dead: a get of a DFS-only object fails within its deadline (1 s here) and the
 * next ones at once; a put lands in memory and reads back; its offload fails, the holder takes
 * no tasks and the memory replica stays (the master does not count the attempt); a remove of a
 * DFS object answers PERSISTENT_FAIL (-1503) after MC_STORE_DELETE_WAIT_MS. Once the engine
 * answers: the held offload is written, the DFS objects read back exact, the removed one goes.
 */
static void test_dead_engine_bounds_gets_and_keeps_offloads_for_later(void **state)
{
    master_t m;
    holder_t w, a;
    char root[PATH_MAX], backing[PATH_MAX], env_root[PATH_MAX + 64];
    path_in_tmp(root, sizeof(root), "dfs-engine");
    dfs_prepare_root(root, "engine", backing, sizeof(backing));
    snprintf(env_root, sizeof(env_root), "MOONCAKE_DISTRIBUTED_ROOT_DIR=%s", root);
    const char *env[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed",
                         env_fs_type,
                         env_root,
                         "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1",
                         "MOONCAKE_DISTRIBUTED_WRITE_TIMEOUT_SECONDS=1",
                         "MC_TRANSFER_TIMEOUT=2",
                         NULL};
    assert_int_equal(start_master(&m, dfs_master_flags()), 0);
    /* W writes four objects to DFS and goes: they are DFS-only. */
    assert_int_equal(start_holder(&w, &m, "64MB", env), 0);
    const char *env_reader[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed",
                                env_fs_type,
                                env_root,
                                "MC_TRANSFER_TIMEOUT=1",
                                "MC_STORE_DELETE_WAIT_MS=2000",
                                NULL};
    mc_env_apply(env_reader, 1);
    mc_store_t *b = new_client(&m);
    mc_env_apply(env_reader, 0);
    put_all(b, "old", 4, MiB, 500);
    assert_int_equal(wait_metric_at_least(&m, "master_dfs_replicas", 4), 4);
    assert_true(mc_clean_exit(stop_holder(&w)));
    char types[256];
    for (int i = 0; i < 100; i++) {
        replica_types(&m, "old/0", types, sizeof(types));
        if (!strcmp(types, "DFS"))
            break;
        usleep(100 * 1000);
    }
    assert_string_equal(types, "DFS");
    /* A holds memory now; its HTTP server shows the storage's state. */
    int http = mc_test_free_port();
    static char flag_http[64];
    snprintf(flag_http, sizeof(flag_http), "--http_port=%d", http);
    const char *flags[] = {"--enable_offload=true", "--enable_http_server=true", flag_http, NULL};
    assert_int_equal(mc_holder_start(&a, &m, "64MB", flags, env, 30000), 0);
    char *health = mc_http_get(http, "/health");
    assert_non_null(health);
    assert_non_null(strstr(health, "\"offload_storage\":\"ok\""));
    free(health);

    set_engine(0);
    uint8_t *buf = malloc(MiB), *want = malloc(MiB);
    uint64_t t0 = now_ms();
    int64_t got = mc_store_get(b, "old/0", buf, MiB);
    uint64_t wall = now_ms() - t0;
    assert_int_equal(got, MC_ERR_DFS_NETWORK_TIMEOUT);
    assert_true(wall >= 900 && wall <= 1000 + 1500); /* MC_TRANSFER_TIMEOUT=1 s, + 1.5 s */
    t0 = now_ms();
    assert_int_equal(mc_store_get(b, "old/1", buf, MiB), MC_ERR_DFS_SERVICE_UNAVAILABLE);
    assert_true(now_ms() - t0 < 500); /* wedged: at once */

    /* A put is memory's business: it lands and reads back. Its offload meets the dead engine. */
    put_all(b, "new", 2, MiB, 600);
    assert_int_equal(read_all_exact(b, "new", 2, MiB, 600), 2);
    assert_int_equal(wait_metric_at_least(&m, "master_offload_unhealthy_clients", 1), 1);
    replica_types(&m, "new/0", types, sizeof(types));
    assert_string_equal(types, "MEMORY"); /* kept; no file claimed */
    for (int i = 0; i < 100; i++) {       /* A's storage state, as its /health says */
        health = mc_http_get(http, "/health");
        if (health && strstr(health, "\"offload_storage\":\"unavailable\""))
            break;
        free(health);
        health = NULL;
        usleep(50 * 1000);
    }
    assert_non_null(health);
    assert_non_null(strstr(health, "\"status\":\"healthy\"")); /* it still serves its memory */
    free(health);
    char *metrics = mc_http_get(http, "/metrics");
    assert_non_null(metrics);
    assert_non_null(strstr(metrics, "mooncake_client_offload_storage_wedged 1"));
    free(metrics);

    /* A remove of a DFS object cannot have its file deleted: the documented -1503. */
    t0 = now_ms();
    assert_int_equal(mc_store_remove(b, "old/2", 0), MC_ERR_PERSISTENT_FAIL);
    assert_true(now_ms() - t0 < 2000 + 3000);

    /* The engine answers again: A's probe passes, the held offloads are written. */
    set_engine(1);
    for (int i = 0; i < 300; i++) {
        replica_types(&m, "new/1", types, sizeof(types));
        if (strstr(types, "DFS"))
            break;
        usleep(100 * 1000);
    }
    assert_string_equal(types, "MEMORY,DFS");
    replica_types(&m, "new/0", types, sizeof(types));
    assert_string_equal(types, "MEMORY,DFS");
    /* The reader's own adapter answers after its probe; then every DFS object reads back. */
    for (int i = 0; i < 100; i++) {
        got = mc_store_get(b, "old/0", buf, MiB);
        if (got != MC_ERR_DFS_SERVICE_UNAVAILABLE)
            break;
        usleep(100 * 1000);
    }
    assert_int_equal(got, (int64_t)MiB);
    for (int i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof(key), "old/%d", i);
        if (i == 2)
            continue;
        fill(want, MiB, 500 + (uint64_t)i);
        assert_int_equal(mc_store_get(b, key, buf, MiB), (int64_t)MiB);
        assert_memory_equal(buf, want, MiB);
    }
    health = mc_http_get(http, "/health");
    assert_non_null(health);
    assert_non_null(strstr(health, "\"offload_storage\":\"ok\""));
    free(health);
    free(buf);
    free(want);
    mc_store_free(b);
    assert_true(mc_clean_exit(stop_holder(&a)));
    stop_master(&m);
}

static int setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    static const char *const clean[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR",
                                        "MOONCAKE_DISTRIBUTED_FS_TYPE",
                                        "MOONCAKE_DISTRIBUTED_ROOT_DIR",
                                        "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
                                        "MOONCAKE_DISTRIBUTED_HEALTH_CHECK",
                                        "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES",
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
        /* The double's pools and containers, for this process and the ones it starts. */
        char store[PATH_MAX];
        path_in_tmp(store, sizeof(store), "dfs-double-store");
        if (mkdir(store, 0755) != 0 || setenv("DFS_DOUBLE_ROOT", store, 1) != 0)
            return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Every test kills the processes it left running when it failed. */
#define OFFLOAD_TEST(f) cmocka_unit_test_teardown(f, kill_leftovers)

int main(void)
{
    /* MC_TEST_FILTER=pattern runs only the tests whose names match (cmocka's * and ? wildcards). */
    const char *filter = getenv("MC_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const char *t = getenv("MC_TEST_OFFLOAD_FS_TYPE");
    if (t && !strcmp(t, "daos")) {
        const struct CMUnitTest dfs_tests[] = {
            OFFLOAD_TEST(test_distributed_posix_objects_outlive_their_writer),
            OFFLOAD_TEST(test_failed_health_check_stops_taking_tasks_and_shows_in_health),
            cmocka_unit_test_teardown(test_dead_engine_bounds_gets_and_keeps_offloads_for_later,
                                      engine_up_and_kill_leftovers),
        };
        return cmocka_run_group_tests_name("offload (distributed fs type daos)", dfs_tests, setup,
                                           teardown);
    }
    const struct CMUnitTest tests[] = {
        OFFLOAD_TEST(test_unusable_directories_and_bad_values_are_one_line_start_up_errors),
        OFFLOAD_TEST(test_64_mib_segment_holds_256_mib_of_puts_through_local_offload),
        OFFLOAD_TEST(test_offload_on_evict_keeps_every_key_readable),
        OFFLOAD_TEST(test_distributed_posix_objects_outlive_their_writer),
        OFFLOAD_TEST(test_master_restart_re_registers_local_disk_replicas),
        OFFLOAD_TEST(test_small_disk_limit_evicts_fifo_and_never_returns_wrong_bytes),
        OFFLOAD_TEST(test_corrupted_object_file_is_a_checksum_error_not_wrong_data),
        OFFLOAD_TEST(test_reader_stalled_past_the_staging_ttl_fails_instead_of_reading_another_key),
        OFFLOAD_TEST(test_reader_stalled_past_the_staging_ttl_reads_exact_bytes_without_contention),
        OFFLOAD_TEST(test_concurrent_readers_with_a_1_ms_staging_ttl_get_exact_bytes_or_an_error),
        OFFLOAD_TEST(test_failed_health_check_stops_taking_tasks_and_shows_in_health),
    };
    return cmocka_run_group_tests_name("offload", tests, setup, teardown);
}
