/*
 * test_promotion.c — promotion of disk-only objects back to memory on a hit (promotion.c,
 * --promotion_on_hit), with real processes: mooncake_master --enable_offload --promotion_on_hit,
 * one mooncake_client --enable_offload holder offloading to a local directory, and this process
 * as a store client (no segment) that puts and reads.
 *
 * Every test makes one object ("victim/0", 1 MiB) disk-only: it is put, offloaded, and pushed
 * out of memory by fillers. Progress is watched on the master's /metrics and /query_key (which
 * grant no read lease). The failpoint promotion.before_report (MC_FAILPOINTS=...=stop) stops the
 * holder after it copied the file into the new replica and before it reports, so the tests can
 * act in the middle of a promotion.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/errors.h"
#include "mooncake/store.h"
#include "cluster.h"
#include "net.h"
#include "proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define WAIT_MS 60000
#define VICTIM "victim/0"

static char tmp_dir[] = "/tmp/mc_promotion_test_XXXXXX";

static int kill_leftovers(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    return 0;
}

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

static int64_t metric(const mc_master_t *m, const char *name)
{
    return mc_master_metric(m, name);
}

/* Waits until metric `name` >= want; returns its last value. */
static int64_t wait_metric_at_least(const mc_master_t *m, const char *name, int64_t want)
{
    int64_t v = -1;
    for (int waited = 0; waited < WAIT_MS; waited += 50) {
        v = metric(m, name);
        if (v >= want)
            return v;
        usleep(50 * 1000);
    }
    fprintf(stderr, "timed out waiting for %s >= %lld (last %lld)\n", name, (long long)want,
            (long long)v);
    return v;
}

/* The master's /query_key replica types of `key`, e.g. "MEMORY,LOCAL_DISK". */
static void replica_types(const mc_master_t *m, const char *key, char *out, size_t cap)
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

static void put_value(mc_store_t *s, const char *key, uint64_t seed)
{
    uint8_t *v = malloc(MiB);
    fill(v, MiB, seed);
    int rc = mc_store_put(s, key, v, MiB, NULL);
    if (rc != 0)
        fprintf(stderr, "put %s: %d\n", key, rc);
    assert_int_equal(rc, 0);
    free(v);
}

/* Reads `key` and checks it holds exactly the value of `seed`. */
static void read_exact(mc_store_t *s, const char *key, uint64_t seed)
{
    uint8_t *want = malloc(MiB), *got = malloc(MiB);
    fill(want, MiB, seed);
    memset(got, 0, MiB);
    int64_t n = mc_store_get(s, key, got, MiB);
    if (n != (int64_t)MiB)
        fprintf(stderr, "get %s: %lld\n", key, (long long)n);
    assert_int_equal(n, (int64_t)MiB);
    assert_memory_equal(got, want, MiB);
    free(want);
    free(got);
}

static uint64_t fallback_reads(mc_store_t *s)
{
    mc_store_offload_stats_t st;
    assert_int_equal(mc_store_get_offload_stats(s, &st), 0);
    return st.fallback_reads;
}

typedef struct cluster {
    mc_master_t m;
    mc_holder_t h;
    mc_store_t *s;
    char dir[PATH_MAX];
    char env_path[PATH_MAX + 64];
} cluster_t;

/* Starts a holder of an 8 MiB segment offloading to c->dir, with `failpoints` (may be NULL). */
static void start_holder(cluster_t *c, const char *failpoints)
{
    static const char *const flags[] = {"--enable_offload=true", NULL};
    char fp[128] = "";
    if (failpoints)
        snprintf(fp, sizeof(fp), "MC_FAILPOINTS=%s", failpoints);
    const char *env[] = {c->env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1",
                         failpoints ? fp : NULL, NULL};
    assert_int_equal(mc_holder_start(&c->h, &c->m, "8MB", flags, env, 30000), 0);
}

/*
 * A master with --promotion_on_hit=true and `extra` flags, one holder (8 MiB segment, local
 * offload to a directory named `name`), a store client, and VICTIM (seed 1) disk-only. With
 * free_memory the fillers are removed again (memory is then far below the high watermark).
 */
static void start(cluster_t *c, const char *name, const char *const *extra, const char *failpoints,
                  int free_memory)
{
    const char *flags[16] = {"--promotion_on_hit=true"};
    size_t n = 1;
    for (size_t i = 0; extra && extra[i] && n < 15; i++)
        flags[n++] = extra[i];
    flags[n] = NULL;
    snprintf(c->dir, sizeof(c->dir), "%s/%s", tmp_dir, name);
    snprintf(c->env_path, sizeof(c->env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", c->dir);
    assert_int_equal(mc_master_start(&c->m, 1, flags), 0);
    start_holder(c, failpoints);
    c->s = mc_test_client(&c->m, 1, 0);
    assert_non_null(c->s);
    put_value(c->s, VICTIM, 1);
    assert_int_equal(wait_metric_at_least(&c->m, "master_disk_replicas", 1), 1);
    char types[256] = "";
    for (int round = 0; round < 20 && strcmp(types, "LOCAL_DISK") != 0; round++) {
        for (int i = 0; i < 8; i++) {
            char key[64];
            snprintf(key, sizeof(key), "filler%d/%d", round, i);
            put_value(c->s, key, 1000 + (uint64_t)round * 10 + (uint64_t)i);
        }
        replica_types(&c->m, VICTIM, types, sizeof(types));
    }
    assert_string_equal(types, "LOCAL_DISK");
    if (free_memory)
        assert_true(mc_store_remove_by_regex(c->s, "^filler", 1) > 0);
}

/* Stops everything; the holder and the master must exit cleanly (a sanitizer report fails). */
static void stop(cluster_t *c)
{
    mc_store_free(c->s);
    mc_cluster_untrack(c->h.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&c->h.proc, SIGTERM, 30000)));
    assert_true(mc_clean_exit(mc_master_stop(&c->m, SIGTERM)));
}

static void wait_stopped(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    assert_true(WIFSTOPPED(status));
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Threshold 2: the first read counts a hit only; the second queues the promotion; the holder
 * copies the file into a new memory replica; the next read is served from memory. */
static void test_second_read_promotes_and_the_next_read_is_served_from_memory(void **state)
{
    (void)state;
    cluster_t c;
    start(&c, "promote", NULL, NULL, 1);
    read_exact(c.s, VICTIM, 1);
    assert_int_equal(fallback_reads(c.s), 1);
    /* Admission is decided inside the GetReplicaList: one hit is below the threshold. */
    assert_int_equal(metric(&c.m, "master_promotion_rejected_frequency_total"), 1);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 0);
    assert_int_equal(metric(&c.m, "master_promotion_in_flight"), 0);
    char types[256];
    replica_types(&c.m, VICTIM, types, sizeof(types));
    assert_string_equal(types, "LOCAL_DISK");

    read_exact(c.s, VICTIM, 1); /* served from disk as before */
    assert_int_equal(fallback_reads(c.s), 2);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 1);
    assert_int_equal(wait_metric_at_least(&c.m, "master_promotion_completed_total", 1), 1);
    assert_int_equal(metric(&c.m, "master_promotion_completed_bytes_total"), (int64_t)MiB);
    assert_int_equal(metric(&c.m, "master_promotion_in_flight"), 0);
    assert_int_equal(metric(&c.m, "master_promotion_failed_total"), 0);
    replica_types(&c.m, VICTIM, types, sizeof(types));
    assert_string_equal(types, "MEMORY,LOCAL_DISK");

    /* From memory now (this client verifies the replica's checksum on read). */
    read_exact(c.s, VICTIM, 1);
    assert_int_equal(fallback_reads(c.s), 2);
    assert_int_equal(metric(&c.m, "master_checksum_mismatches_total"), 0);
    stop(&c);
}

/* Batch reads (BatchGetReplicaList, one RPC for several keys) count hits and promote too. */
static void test_batch_reads_promote(void **state)
{
    (void)state;
    cluster_t c;
    start(&c, "batch", NULL, NULL, 1);
    put_value(c.s, "other/0", 7); /* in memory */
    const char *keys[] = {VICTIM, "other/0"};
    uint8_t *bufs[2] = {malloc(MiB), malloc(MiB)};
    uint8_t *want = malloc(MiB);
    size_t caps[2] = {MiB, MiB};
    for (int round = 0; round < 2; round++) {
        int64_t res[2] = {0, 0};
        assert_int_equal(mc_store_get_batch(c.s, keys, (void *const *)bufs, caps, 2, res), 0);
        assert_int_equal(res[0], (int64_t)MiB);
        assert_int_equal(res[1], (int64_t)MiB);
        fill(want, MiB, 1);
        assert_memory_equal(bufs[0], want, MiB);
        fill(want, MiB, 7);
        assert_memory_equal(bufs[1], want, MiB);
        /* only the disk-only key counts: one hit per round */
        assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), round);
        assert_int_equal(metric(&c.m, "master_promotion_rejected_frequency_total"), 1);
    }
    assert_int_equal(wait_metric_at_least(&c.m, "master_promotion_completed_total", 1), 1);
    char types[256];
    replica_types(&c.m, VICTIM, types, sizeof(types));
    assert_string_equal(types, "MEMORY,LOCAL_DISK");
    uint64_t before = fallback_reads(c.s);
    read_exact(c.s, VICTIM, 1);
    assert_int_equal(fallback_reads(c.s), before);
    free(bufs[0]);
    free(bufs[1]);
    free(want);
    stop(&c);
}

/* Finds the object file whose name ends with `suffix` under dir (recursively). */
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

/* A corrupted file is never promoted: the holder checks the bytes it copied against the value's
 * CRC32C and reports a failure; the extent is dropped and reads keep failing with -801. */
static void test_corrupted_file_is_not_promoted(void **state)
{
    (void)state;
    cluster_t c;
    start(&c, "corrupt", NULL, NULL, 1);
    char file[PATH_MAX];
    assert_int_equal(find_file(c.dir, "%2Fvictim%2F0", file, sizeof(file)), 0);
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
    assert_int_equal(mc_store_get(c.s, VICTIM, out, MiB), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(mc_store_get(c.s, VICTIM, out, MiB), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 1);
    assert_int_equal(wait_metric_at_least(&c.m, "master_promotion_failed_total", 1), 1);
    assert_int_equal(metric(&c.m, "master_promotion_completed_total"), 0);
    assert_int_equal(metric(&c.m, "master_promotion_in_flight"), 0);
    char types[256];
    replica_types(&c.m, VICTIM, types, sizeof(types));
    assert_string_equal(types, "LOCAL_DISK");
    assert_int_equal(mc_store_get(c.s, VICTIM, out, MiB), MC_ERR_CHECKSUM_MISMATCH);
    free(out);
    stop(&c);
}

/* Memory above the high watermark: the hit is rejected and counted, nothing is allocated. */
static void test_watermark_gate_rejects_and_counts(void **state)
{
    (void)state;
    cluster_t c;
    start(&c, "watermark", NULL, NULL, 0);
    read_exact(c.s, VICTIM, 1);
    read_exact(c.s, VICTIM, 1);
    assert_true(metric(&c.m, "master_promotion_rejected_watermark_total") >= 1);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 0);
    assert_int_equal(metric(&c.m, "master_promotion_in_flight"), 0);
    char types[256];
    replica_types(&c.m, VICTIM, types, sizeof(types));
    assert_string_equal(types, "LOCAL_DISK");
    stop(&c);
}

typedef struct upsert_arg {
    mc_store_t *s;
    int rc;
} upsert_arg_t;

static void *upsert_main(void *p)
{
    upsert_arg_t *a = p;
    uint8_t *v = malloc(MiB);
    fill(v, MiB, 2);
    a->rc = mc_store_upsert(a->s, VICTIM, v, MiB, NULL);
    free(v);
    return NULL;
}

/* An upsert while the holder has copied the old value and not yet reported: the promotion is
 * cancelled, its late report refused, and the object only ever reads as the new value. */
static void test_upsert_during_promotion_never_serves_the_old_value(void **state)
{
    (void)state;
    cluster_t c;
    start(&c, "upsert", NULL, "promotion.before_report=stop:1", 1);
    read_exact(c.s, VICTIM, 1);
    read_exact(c.s, VICTIM, 1);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 1);
    wait_stopped(c.h.proc.pid); /* the old bytes are in the PROCESSING replica */

    /* The upsert commits at the master, then waits for the holder to delete the old file. */
    upsert_arg_t a = {c.s, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, upsert_main, &a), 0);
    assert_int_equal(wait_metric_at_least(&c.m, "master_promotion_cancelled_total", 1), 1);
    kill(c.h.proc.pid, SIGCONT);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, 0);
    read_exact(c.s, VICTIM, 2);
    assert_int_equal(metric(&c.m, "master_promotion_completed_total"), 0);
    char types[256];
    replica_types(&c.m, VICTIM, types, sizeof(types));
    /* One memory replica: the upsert's (its LOCAL_DISK replica may follow, offloaded). */
    assert_true(strncmp(types, "MEMORY", 6) == 0 && strstr(types + 1, "MEMORY") == NULL);
    for (int i = 0; i < 5; i++)
        read_exact(c.s, VICTIM, 2);
    stop(&c);
}

/* The holder stopped between its copy and its report: the promotion expires after the bound
 * (--put_start_release_timeout_sec) and its replica is dropped — its extent quarantined, not
 * freed: the stopped holder cannot confirm a fence. Then it is SIGKILLed (found gone at once: its
 * memory segment is unmounted with the extent, its offloaded file kept); the file is still there
 * and the holder, restarted on the same directory, serves the object from it. */
static void test_executor_killed_mid_promotion_expires_and_the_object_stays_readable(void **state)
{
    (void)state;
    cluster_t c;
    const char *extra[] = {"--put_start_release_timeout_sec=2", "--put_start_discard_timeout_sec=1",
                           "--client_ttl=60", NULL};
    start(&c, "killed", extra, "promotion.before_report=stop:1", 1);
    read_exact(c.s, VICTIM, 1);
    read_exact(c.s, VICTIM, 1);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 1);
    wait_stopped(c.h.proc.pid);
    int64_t used = metric(&c.m, "master_allocated_bytes");
    assert_true(used >= (int64_t)MiB); /* the PROCESSING replica */
    /* Still stopped: the bound, not the holder's death, ends the promotion. */
    assert_int_equal(wait_metric_at_least(&c.m, "master_promotion_expired_total", 1), 1);
    assert_int_equal(metric(&c.m, "master_promotion_in_flight"), 0);
    assert_int_equal(metric(&c.m, "master_quarantined_extents_total"), 1);
    assert_int_equal(metric(&c.m, "master_quarantine_freed_total"), 0);
    assert_int_equal(metric(&c.m, "master_allocated_bytes"), used);
    mc_cluster_untrack(c.h.proc.pid);
    kill(c.h.proc.pid, SIGKILL);
    mc_proc_stop(&c.h.proc, SIGKILL, 10000);
    assert_int_equal(wait_metric_at_least(&c.m, "master_gone_clients_total", 1), 1);
    char types[256];
    replica_types(&c.m, VICTIM, types, sizeof(types));
    assert_string_equal(types, "LOCAL_DISK");
    start_holder(&c, NULL); /* takes the killed incarnation's files over */
    /* Until the new holder has reported the files it took over (just after its "ready"), the
     * disk replica still names the killed holder's reads endpoint and a read fails -900 (seen
     * in CI): wait for that state by reading until the read gets through, never wrong bytes. */
    uint8_t *probe = malloc(MiB);
    int64_t n = -1;
    for (uint64_t end = mc_now_ms() + WAIT_MS; mc_now_ms() < end; usleep(50000)) {
        n = mc_store_get(c.s, VICTIM, probe, MiB);
        if (n != MC_ERR_RPC_FAIL)
            break;
    }
    free(probe);
    assert_int_equal(n, (int64_t)MiB);
    read_exact(c.s, VICTIM, 1);
    /* The expired promotion never completes; this read may admit a new one (the sketch has
     * counted three hits by now), which may complete by the time the counters are read (seen
     * under a loaded parallel run): each admitted promotion either expired or completed. */
    int64_t completed = metric(&c.m, "master_promotion_completed_total");
    int64_t admitted = metric(&c.m, "master_promotion_admitted_total");
    int64_t expired = metric(&c.m, "master_promotion_expired_total");
    assert_int_equal(expired, 1);
    assert_true(completed <= admitted - expired);
    stop(&c);
}

/*
 * A promotion's copy that outlasts its bound — the holder's file read hangs (failpoint
 * promotion.before_copy sleeps 8 s on its control thread; its other threads, the ping among them,
 * run on) — must not land in memory given to another object meanwhile. The promotion expires
 * after 2 s; its extent is quarantined until the holder refuses the task's token, then new
 * objects fill the segment; when the read finally comes, it is refused. The holder then stops
 * before its report (promotion.before_report), so the test knows the copy attempt is over.
 * Before, the expiry freed the extent at once, the new objects were placed in it, and the late
 * copy wrote the disk value's bytes over one of them (read back -801 with checksums on).
 */
static void test_copy_outlasting_its_bound_never_lands_in_reused_memory(void **state)
{
    (void)state;
    cluster_t c;
    const char *extra[] = {"--put_start_release_timeout_sec=2", "--put_start_discard_timeout_sec=1",
                           "--client_ttl=60", NULL};
    start(&c, "outlasting", extra,
          "promotion.before_copy=sleep:8000,promotion.before_report=stop:1", 1);
    read_exact(c.s, VICTIM, 1);
    read_exact(c.s, VICTIM, 1);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 1);
    assert_int_equal(wait_metric_at_least(&c.m, "master_promotion_expired_total", 1), 1);
    /* The holder's next ping refuses the token; its fence has nothing to wait for (the copy has
     * not begun), so the extent is back within a ping or two. Not asserted here: before, there
     * was no quarantine, and the test shows what the late copy does instead. */
    for (uint64_t end = mc_now_ms() + 5000;
         mc_now_ms() < end && metric(&c.m, "master_quarantine_freed_total") < 1;)
        usleep(50 * 1000);
    /* New objects over most of the 8 MiB segment, the freed extent among them. */
    char key[64];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "new/%d", i);
        put_value(c.s, key, 500 + (uint64_t)i);
    }
    /* The copy attempt ends (refused, or written), then the holder stops before its report. */
    wait_stopped(c.h.proc.pid);
    kill(c.h.proc.pid, SIGCONT);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "new/%d", i);
        read_exact(c.s, key, 500 + (uint64_t)i);
    }
    assert_int_equal(metric(&c.m, "master_checksum_mismatches_total"), 0);
    assert_int_equal(metric(&c.m, "master_quarantined_extents_total"), 1);
    assert_int_equal(metric(&c.m, "master_quarantine_freed_total"), 1);
    assert_int_equal(metric(&c.m, "master_promotion_completed_total"), 0);
    read_exact(c.s, VICTIM, 1); /* still readable from disk */
    stop(&c);
}

/*
 * A promotion's copy that comes after its holder re-mounted (here: the master restarted; an
 * expiry or a failover alike) is refused by the holder's fence: the task carries the mount epoch
 * of its extent's segment, and the re-mount changed it. The holder's control thread sleeps
 * between its file read and its copy (promotion.before_copy) while the master is restarted, the
 * holder re-mounts and new objects fill its segment; the late copy must not land on them.
 * Without the epoch (admitted with 0, unchecked), nothing at the holder knew the task was over:
 * the new master never handed it out and never queued its token.
 */
static void test_copy_after_a_remount_is_refused(void **state)
{
    (void)state;
    cluster_t c;
    start(&c, "remount", NULL, "promotion.before_copy=sleep:8000,promotion.before_report=stop:1",
          1);
    read_exact(c.s, VICTIM, 1);
    read_exact(c.s, VICTIM, 1);
    assert_int_equal(metric(&c.m, "master_promotion_admitted_total"), 1);
    /* Taken (its extent allocated): the holder now sleeps before its copy. */
    assert_int_equal(wait_metric_at_least(&c.m, "master_allocated_bytes", (int64_t)MiB),
                     (int64_t)MiB);
    /* The master restarts on its ports; the holder re-mounts at the new instance. */
    int port = c.m.rpc_port;
    mc_store_free(c.s);
    mc_master_stop(&c.m, SIGKILL);
    const char *flags[] = {"--promotion_on_hit=true", NULL};
    assert_int_equal(mc_master_start_on(&c.m, port, 1, flags), 0);
    assert_int_equal(wait_metric_at_least(&c.m, "master_segment_count", 1), 1);
    c.s = mc_test_client(&c.m, 1, 0);
    assert_non_null(c.s);
    char key[64];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "new/%d", i);
        uint8_t *v = malloc(MiB);
        fill(v, MiB, 700 + (uint64_t)i);
        assert_int_equal(mc_test_put_retry(c.s, key, v, MiB, NULL, 30000), 0);
        free(v);
    }
    /* The copy attempt ends (refused, or written), then the holder stops before its report. */
    wait_stopped(c.h.proc.pid);
    kill(c.h.proc.pid, SIGCONT);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "new/%d", i);
        read_exact(c.s, key, 700 + (uint64_t)i);
    }
    stop(&c);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

#define PROMOTION_TEST(f) cmocka_unit_test_teardown(f, kill_leftovers)

int main(void)
{
    const char *filter = getenv("MC_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        PROMOTION_TEST(test_second_read_promotes_and_the_next_read_is_served_from_memory),
        PROMOTION_TEST(test_batch_reads_promote),
        PROMOTION_TEST(test_corrupted_file_is_not_promoted),
        PROMOTION_TEST(test_watermark_gate_rejects_and_counts),
        PROMOTION_TEST(test_upsert_during_promotion_never_serves_the_old_value),
        PROMOTION_TEST(test_executor_killed_mid_promotion_expires_and_the_object_stays_readable),
        PROMOTION_TEST(test_copy_outlasting_its_bound_never_lands_in_reused_memory),
        PROMOTION_TEST(test_copy_after_a_remount_is_refused),
    };
    return cmocka_run_group_tests_name("promotion", tests, setup, teardown);
}
