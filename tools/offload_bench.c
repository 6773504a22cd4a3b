/*
 * offload_bench — offload throughput against the disk's own limits, measured in the same run.
 *
 *   offload_bench [--dir=/var/tmp/mc_offload_bench] [--value_size=16MB] [--count=32]
 *                 [--rounds=4] [--json=out.json]
 *
 * Everything runs in this process over loopback: a Master Service with --enable_offload (its RPC
 * server on a free port), store A contributing a segment and offloading to the distributed posix
 * backend under DIR/dfs, and store B with no segment reading through the same backend.
 *
 *   drain     A pauses offloading, puts COUNT values of VALUE_SIZE into its segment (the master
 *             queues COUNT tasks), resumes, and the clock runs until the master has recorded
 *             every disk replica. Baseline: COUNT files of VALUE_SIZE written with pwrite into
 *             one directory of the same filesystem, each fsynced, one after another.
 *   fallback  A closes (its memory goes; the objects are on disk only), the files are dropped
 *             from the page cache (posix_fadvise DONTNEED), and B gets COUNT keys (a
 *             GetReplicaList, then a direct read of the DFS file, checksums verified). Baseline:
 *             COUNT baseline files, dropped from the page cache the same way, read with pread.
 *
 * Shared virtual disks swing by 2-3x from second to second (and throttle after a burst), so each
 * phase alternates with its baseline for ROUNDS rounds — new keys and new files every round, the
 * baseline first in even rounds and second in odd ones — and the ratio is of the totals.
 * Values are verified on read (first and last 64 bytes against a per-key pattern). Exit 0 when
 * every value verified, 1 otherwise.
 */
#include "flags.h"
#include "log.h"
#include "master_service.h"
#include "mooncake/store.h"
#include "net.h"
#include "parse.h"
#include "rpc_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROGRAM "offload_bench"
#define MARK 64

typedef struct opts {
    char *dir;
    uint64_t value_size;
    int64_t count;
    int64_t rounds;
    char *json;
} opts_t;

typedef struct result {
    double drain_gbs, drain_base_gbs;
    double fallback_gbs, fallback_base_gbs;
    uint64_t bad;
} result_t;

static double now_s(void)
{
    return (double)mc_now_ns() / 1e9;
}

static void pattern(uint8_t *buf, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(seed * 131 + i * 7);
}

static int verify(const uint8_t *buf, size_t len, uint64_t seed)
{
    uint8_t want[MARK];
    size_t m = len < MARK ? len : MARK;
    pattern(want, m, seed);
    if (memcmp(buf, want, m) != 0)
        return 0;
    for (size_t i = len - m; i < len; i++) {
        if (buf[i] != (uint8_t)(seed * 131 + i * 7))
            return 0;
    }
    return 1;
}

/* ---- baselines: plain files ---------------------------------------------------------------- */

/* Seconds to write files first..first+count-1. */
static double baseline_write(const char *dir, const uint8_t *buf, uint64_t size, int64_t first,
                             int64_t count)
{
    char path[PATH_MAX + 32];
    double t0 = now_s();
    for (int64_t i = first; i < first + count; i++) {
        snprintf(path, sizeof(path), "%s/file-%" PRId64, dir, i);
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0 || pwrite(fd, buf, size, 0) != (ssize_t)size || fsync(fd) != 0) {
            fprintf(stderr, PROGRAM ": baseline write %s: %s\n", path, strerror(errno));
            exit(1);
        }
        close(fd);
    }
    return now_s() - t0;
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* Drops every regular file under dir from the page cache. */
static void drop_tree(const char *dir)
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
        if (S_ISDIR(st.st_mode))
            drop_tree(p);
        else if (S_ISREG(st.st_mode))
            drop_cache(p);
    }
    closedir(d);
}

/* Seconds to read files first..first+count-1 after dropping them from the page cache. */
static double baseline_read(const char *dir, uint8_t *buf, uint64_t size, int64_t first,
                            int64_t count)
{
    drop_tree(dir);
    char path[PATH_MAX + 32];
    double t0 = now_s();
    for (int64_t i = first; i < first + count; i++) {
        snprintf(path, sizeof(path), "%s/file-%" PRId64, dir, i);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint64_t got = 0;
        while (fd >= 0 && got < size) {
            ssize_t n = pread(fd, buf + got, size - got, (off_t)got);
            if (n <= 0)
                break;
            got += (uint64_t)n;
        }
        if (fd < 0 || got != size) {
            fprintf(stderr, PROGRAM ": baseline read %s failed\n", path);
            exit(1);
        }
        close(fd);
    }
    return now_s() - t0;
}

/* ---- the store ----------------------------------------------------------------------------- */

static mc_store_t *store(const char *master, uint64_t segment, uint64_t buffer, int offload)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .global_segment_size = segment,
                             .local_buffer_size = buffer,
                             .protocol = "tcp",
                             .master_server_addr = master,
                             .enable_offload = offload};
    mc_store_t *s = NULL;
    int rc = mc_store_setup(&cfg, &s);
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": store setup failed: %s\n", mc_error_name(rc));
        exit(1);
    }
    return s;
}

static void key_of(char *out, size_t cap, int64_t i)
{
    snprintf(out, cap, "offload-bench/%" PRId64, i);
}

/* Seconds to drain a full queue of keys first..first+count-1 written by store a. */
static double drain(mc_master_t *m, mc_store_t *a, const opts_t *o, uint8_t *buf, int64_t first)
{
    mc_store_set_offloading(a, 0);
    char key[64];
    for (int64_t i = first; i < first + o->count; i++) {
        key_of(key, sizeof(key), i);
        pattern(buf, o->value_size, (uint64_t)i);
        int rc = mc_store_put(a, key, buf, o->value_size, NULL);
        if (rc != 0) {
            fprintf(stderr, PROGRAM ": put %s: %s\n", key, mc_error_name(rc));
            exit(1);
        }
    }
    mc_master_stats_t st;
    mc_master_get_stats(m, &st);
    if (st.offload_queued != (uint64_t)o->count) {
        fprintf(stderr, PROGRAM ": %" PRIu64 " tasks queued, expected %" PRId64 "\n",
                st.offload_queued, o->count);
        exit(1);
    }
    uint64_t before = st.offload_done;
    double t0 = now_s();
    mc_store_set_offloading(a, 1);
    for (;;) {
        mc_master_get_stats(m, &st);
        if (st.offload_done - before >= (uint64_t)o->count)
            break;
        if (st.offload_failed > 0) {
            fprintf(stderr, PROGRAM ": %" PRIu64 " offload tasks failed\n", st.offload_failed);
            exit(1);
        }
        usleep(200);
    }
    return now_s() - t0;
}

/* Seconds for store b to get keys first..first+count-1 from their DFS files. */
static double fallback(mc_store_t *b, const opts_t *o, const char *dfs, uint8_t *buf, int64_t first,
                       uint64_t *bad)
{
    mc_store_offload_stats_t st;
    mc_store_get_offload_stats(b, &st);
    uint64_t before = st.fallback_reads;
    drop_tree(dfs);
    char key[64];
    double t0 = now_s();
    for (int64_t i = first; i < first + o->count; i++) {
        key_of(key, sizeof(key), i);
        int64_t got = mc_store_get(b, key, buf, o->value_size);
        if (got != (int64_t)o->value_size || !verify(buf, o->value_size, (uint64_t)i))
            (*bad)++;
    }
    double secs = now_s() - t0;
    mc_store_get_offload_stats(b, &st);
    if (st.fallback_reads - before != (uint64_t)o->count) {
        fprintf(stderr, PROGRAM ": only %" PRIu64 " of %" PRId64 " gets read the DFS replica\n",
                st.fallback_reads - before, o->count);
        (*bad)++;
    }
    return secs;
}

static void report(const opts_t *o, const result_t *r)
{
    char size[32];
    mc_format_size(o->value_size, size, sizeof(size));
    printf("offload_bench: %" PRId64 " rounds of %" PRId64
           " values of %s under %s (posix), %" PRIu64 " bad\n",
           o->rounds, o->count, size, o->dir, r->bad);
    printf("| phase | GB/s | baseline | baseline GB/s | ratio |\n|---|---|---|---|---|\n");
    printf("| drain (full queue) | %.2f | pwrite+fsync per file | %.2f | %.2f |\n", r->drain_gbs,
           r->drain_base_gbs, r->drain_gbs / r->drain_base_gbs);
    printf("| fallback get (DFS) | %.2f | pread after DONTNEED | %.2f | %.2f |\n", r->fallback_gbs,
           r->fallback_base_gbs, r->fallback_gbs / r->fallback_base_gbs);
    if (!o->json[0])
        return;
    FILE *f = fopen(o->json, "w");
    if (!f) {
        fprintf(stderr, PROGRAM ": cannot write %s: %s\n", o->json, strerror(errno));
        return;
    }
    fprintf(f,
            "{\"value_size\":%" PRIu64 ",\"count\":%" PRId64 ",\"bad\":%" PRIu64
            ",\"drain_gbs\":%.4f,\"drain_baseline_gbs\":%.4f,\"drain_ratio\":%.4f"
            ",\"fallback_gbs\":%.4f,\"fallback_baseline_gbs\":%.4f,\"fallback_ratio\":%.4f}\n",
            o->value_size, o->count, r->bad, r->drain_gbs, r->drain_base_gbs,
            r->drain_gbs / r->drain_base_gbs, r->fallback_gbs, r->fallback_base_gbs,
            r->fallback_gbs / r->fallback_base_gbs);
    fclose(f);
}

int main(int argc, char **argv)
{
    opts_t o = {.dir = "/var/tmp/mc_offload_bench",
                .value_size = 16u << 20,
                .count = 32,
                .rounds = 4,
                .json = ""};
    mc_flag_t flags[] = {
        {"dir", MC_FLAG_STRING, &o.dir, "scratch directory (emptied first); the disk under test"},
        {"value_size", MC_FLAG_SIZE, &o.value_size, "bytes per value (\"16MB\")"},
        {"count", MC_FLAG_INT, &o.count, "values per round", 1, 1000000},
        {"rounds", MC_FLAG_INT, &o.rounds, "rounds, each phase alternating with its baseline", 1,
         1000},
        {"json", MC_FLAG_STRING, &o.json, "also write the results as JSON here"},
    };
    char err[512];
    int rc = mc_flags_parse(flags, sizeof(flags) / sizeof(flags[0]), NULL, argc, argv, PROGRAM,
                            "Usage: " PROGRAM " [--dir=DIR] [--value_size=16MB] [--count=64]", err,
                            sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 0;
    if (rc == 0 && (o.value_size < MARK || o.dir[0] != '/'))
        rc = snprintf(err, sizeof(err), "--value_size must be >= %d and --dir absolute", MARK);
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": %s\n", err);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    char dfs[PATH_MAX], base[PATH_MAX], cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", o.dir);
    if (system(cmd) != 0 || mkdir(o.dir, 0755) != 0) {
        fprintf(stderr, PROGRAM ": cannot prepare %s\n", o.dir);
        return 1;
    }
    snprintf(dfs, sizeof(dfs), "%s/dfs", o.dir);
    snprintf(base, sizeof(base), "%s/baseline", o.dir);
    mkdir(base, 0755);
    setenv("MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR", "distributed", 1);
    setenv("MOONCAKE_DISTRIBUTED_FS_TYPE", "posix", 1);
    setenv("MOONCAKE_DISTRIBUTED_ROOT_DIR", dfs, 1);
    setenv("MOONCAKE_OFFLOAD_CLOSE_DRAIN_SECONDS", "0", 1);

    mc_master_config_t mcfg;
    mc_master_config_default(&mcfg);
    mcfg.enable_offload = 1;
    mc_master_t *m = NULL;
    mc_rpc_server_t *rpc = NULL;
    if (mc_master_create(&mcfg, &m) != 0 ||
        mc_rpc_server_start(m, "127.0.0.1", 0, 2, NULL, &rpc) != 0) {
        fprintf(stderr, PROGRAM ": cannot start the master\n");
        return 1;
    }
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", mc_rpc_server_port(rpc));
    uint8_t *buf = malloc(o.value_size);
    if (!buf)
        return 1;
    result_t r = {0};
    uint64_t seg = o.value_size * (uint64_t)o.count * (uint64_t)o.rounds;
    seg += seg / 4 + (64u << 20);
    mc_store_t *a = store(addr, seg, o.value_size, 1);
    if (mc_store_set_offloading(a, 1) != 0) {
        fprintf(stderr, PROGRAM ": store A does not offload\n");
        free(buf);
        return 1;
    }
    double t_base = 0, t_ours = 0,
           bytes = (double)o.value_size * (double)o.count * (double)o.rounds;
    for (int64_t round = 0; round < o.rounds; round++) {
        pattern(buf, o.value_size, 1);
        double tb = 0, to = 0;
        if (round % 2 == 0)
            tb = baseline_write(base, buf, o.value_size, round * o.count, o.count);
        to = drain(m, a, &o, buf, round * o.count);
        if (round % 2 == 1)
            tb = baseline_write(base, buf, o.value_size, round * o.count, o.count);
        fprintf(stderr, "round %" PRId64 ": write baseline %.2f GB/s, drain %.2f GB/s\n", round,
                bytes / (double)o.rounds / tb / 1e9, bytes / (double)o.rounds / to / 1e9);
        t_base += tb;
        t_ours += to;
    }
    r.drain_gbs = bytes / t_ours / 1e9;
    r.drain_base_gbs = bytes / t_base / 1e9;
    mc_store_free(a); /* its memory goes: the objects are on disk only */

    mc_store_t *b = store(addr, 0, o.value_size, 0);
    t_base = t_ours = 0;
    for (int64_t round = 0; round < o.rounds; round++) {
        double tb = 0, to = 0;
        if (round % 2 == 0)
            tb = baseline_read(base, buf, o.value_size, round * o.count, o.count);
        to = fallback(b, &o, dfs, buf, round * o.count, &r.bad);
        if (round % 2 == 1)
            tb = baseline_read(base, buf, o.value_size, round * o.count, o.count);
        fprintf(stderr, "round %" PRId64 ": read baseline %.2f GB/s, fallback get %.2f GB/s\n",
                round, bytes / (double)o.rounds / tb / 1e9, bytes / (double)o.rounds / to / 1e9);
        t_base += tb;
        t_ours += to;
    }
    mc_store_free(b);
    r.fallback_gbs = bytes / t_ours / 1e9;
    r.fallback_base_gbs = bytes / t_base / 1e9;

    report(&o, &r);
    free(buf);
    mc_rpc_server_stop(rpc);
    mc_master_destroy(m);
    if (system(cmd) != 0)
        fprintf(stderr, PROGRAM ": could not remove %s\n", o.dir);
    return r.bad ? 1 : 0;
}
