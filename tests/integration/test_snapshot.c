/*
 * test_snapshot.c — master snapshots and restore with real processes on loopback: a real
 * mooncake_master with --enable_snapshot/--enable_snapshot_restore (root from
 * $MOONCAKE_SNAPSHOT_LOCAL_PATH), mooncake_client holders that re-mount by themselves after the
 * restart, and store clients in this process that verify every byte against a model.
 *  - planned full restart (SIGTERM: a clean snapshot): every object reads back exact;
 *  - crash (SIGKILL) after a periodic snapshot, with removes and new puts reusing its extents:
 *    the owners verify the restored extents (CRC32C of their memory); every read, with
 *    checksums on and off, is exact or missing, never wrong bytes;
 *  - a holder restarted while the master was down (new segment id): its objects read as missing;
 *  - a corrupt newest snapshot: the older one is restored;
 *  - the flags: s3 refused (exit 2), the root unset (exit 1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/store.h"
#include "cluster.h"
#include "proc.h"

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"

extern char **environ;

static char root[64];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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

/* A fresh snapshot root, exported for the masters this test starts. */
static void new_root(void)
{
    snprintf(root, sizeof(root), "/tmp/mc-snapshot-XXXXXX");
    assert_non_null(mkdtemp(root));
    setenv("MOONCAKE_SNAPSHOT_LOCAL_PATH", root, 1);
}

static void drop_root(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

/* The name in latest.txt, or "" */
static void latest(char *out, size_t cap)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/latest.txt", root);
    out[0] = '\0';
    FILE *f = fopen(p, "r");
    if (f) {
        if (!fgets(out, (int)cap, f))
            out[0] = '\0';
        fclose(f);
    }
    out[strcspn(out, "\n")] = '\0';
}

/* Waits until latest.txt names a snapshot other than `before`; 0, or -1 after timeout_ms. */
static int wait_new_snapshot(const char *before, int timeout_ms)
{
    char cur[64];
    for (uint64_t until = now_ms() + (uint64_t)timeout_ms; now_ms() < until; usleep(50000)) {
        latest(cur, sizeof(cur));
        if (cur[0] && strcmp(cur, before) != 0)
            return 0;
    }
    return -1;
}

/* Waits until the master's metric `name` equals `want`. */
static int wait_metric(const mc_master_t *m, const char *name, long long want, int timeout_ms)
{
    for (uint64_t until = now_ms() + (uint64_t)timeout_ms; now_ms() < until; usleep(50000)) {
        if (mc_master_metric(m, name) == want)
            return 0;
    }
    return -1;
}

/* Waits until the master's metric `name` is at least `least`: a snapshot is counted just after
 * latest.txt names it, so a reader that saw the name may still see the old count. */
static int wait_metric_at_least(const mc_master_t *m, const char *name, long long least,
                                int timeout_ms)
{
    for (uint64_t until = now_ms() + (uint64_t)timeout_ms; now_ms() < until; usleep(50000)) {
        if (mc_master_metric(m, name) >= least)
            return 0;
    }
    return -1;
}

/* ---- the model: key i has size sizes[i] and the bytes of seed seeds[i] ---------------------- */

typedef struct model {
    size_t n;
    size_t *size;
    uint64_t *seed;
    char prefix[16];
} model_t;

static void model_init(model_t *md, const char *prefix, size_t n, size_t max, uint64_t seed)
{
    md->n = n;
    md->size = calloc(n, sizeof(*md->size));
    md->seed = calloc(n, sizeof(*md->seed));
    snprintf(md->prefix, sizeof(md->prefix), "%s", prefix);
    uint64_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        md->size[i] = max ? (size_t)(x % max) + 1 : 0;
        if (i % 97 == 0)
            md->size[i] = 0; /* some empty values */
        md->seed[i] = seed * 1000003u + i;
    }
}

static void model_free(model_t *md)
{
    free(md->size);
    free(md->seed);
}

static void key_of(const model_t *md, size_t i, char *key, size_t cap)
{
    snprintf(key, cap, "%s/%zu", md->prefix, i);
}

static void put_all(mc_store_t *s, const model_t *md, size_t from, size_t to)
{
    uint8_t *buf = malloc(1u << 20);
    char key[64];
    for (size_t i = from; i < to; i++) {
        key_of(md, i, key, sizeof(key));
        fill(buf, md->size[i], md->seed[i]);
        assert_int_equal(mc_store_put(s, key, buf, md->size[i], NULL), 0);
    }
    free(buf);
}

typedef struct tally {
    size_t exact, missing, wrong, failed;
} tally_t;

/* Reads keys [from, to) of md: exact, missing, wrong bytes (a readable value that differs), or
 * failed (another error, e.g. a checksum mismatch caught by the reader). */
static tally_t read_all(mc_store_t *s, const model_t *md, size_t from, size_t to)
{
    tally_t t = {0};
    uint8_t *want = malloc(1u << 20), *got = malloc(1u << 20);
    char key[64];
    for (size_t i = from; i < to; i++) {
        key_of(md, i, key, sizeof(key));
        int64_t n = mc_store_get(s, key, got, 1u << 20);
        if (n == MC_ERR_OBJECT_NOT_FOUND) {
            t.missing++;
            continue;
        }
        if (n < 0) {
            t.failed++;
            continue;
        }
        fill(want, md->size[i], md->seed[i]);
        if ((size_t)n == md->size[i] && memcmp(want, got, md->size[i]) == 0)
            t.exact++;
        else
            t.wrong++;
    }
    free(want);
    free(got);
    return t;
}

static const char *const snap_flags[] = {"--enable_snapshot=true", "--enable_snapshot_restore=true",
                                         "--snapshot_interval_seconds=3600", NULL};

/* ---- tests ------------------------------------------------------------------------------ */

static void test_planned_restart_brings_back_every_object(void **state)
{
    (void)state;
    new_root();
    char backup_flag[128], backup[96];
    snprintf(backup, sizeof(backup), "%s-backup", root);
    snprintf(backup_flag, sizeof(backup_flag), "--snapshot_backup_dir=%s", backup);
    const char *const flags[] = {"--enable_snapshot=true", "--enable_snapshot_restore=true",
                                 "--snapshot_interval_seconds=3600", backup_flag, NULL};
    mc_master_t m;
    mc_holder_t h1, h2;
    assert_int_equal(mc_master_start(&m, 0, flags), 0);
    assert_int_equal(mc_holder_start(&h1, &m, "64MB", NULL, NULL, 20000), 0);
    assert_int_equal(mc_holder_start(&h2, &m, "64MB", NULL, NULL, 20000), 0);
    mc_store_t *s = mc_test_client(&m, 1, 0);
    assert_non_null(s);
    model_t md;
    model_init(&md, "plan", 3000, 48 * 1024, 7);
    put_all(s, &md, 0, md.n);
    tally_t t = read_all(s, &md, 0, md.n);
    assert_int_equal(t.exact, md.n);

    int port = m.rpc_port;
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM))); /* writes the clean snapshot */
    char name[64], p[256];
    latest(name, sizeof(name));
    assert_true(name[0] != '\0');
    /* the backup dir holds the same snapshot, byte for byte */
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cmp -s %s/%s/records.bin %s/%s/records.bin", root, name, backup,
             name);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof(p), "%s/latest.txt", backup);
    assert_int_equal(access(p, R_OK), 0);
    assert_int_equal(mc_master_start_on(&m, port, 0, flags), 0);
    assert_int_equal(mc_master_metric(&m, "master_snapshot_success"), 0); /* a new master */
    /* the holders re-mount by themselves: every record becomes visible */
    assert_int_equal(wait_metric(&m, "master_restore_pending_records", 0, 30000), 0);
    assert_int_equal(mc_master_metric(&m, "master_restore_untrusted_replicas_total"), 0);
    t = read_all(s, &md, 0, md.n);
    print_message("planned restart: %zu objects, %zu exact, %zu missing, %zu wrong, %zu failed\n",
                  md.n, t.exact, t.missing, t.wrong, t.failed);
    assert_int_equal(t.exact, md.n);           /* 100 % */
    mc_store_t *c2 = mc_test_client(&m, 0, 0); /* a fresh client, checksums off */
    t = read_all(c2, &md, 0, md.n);
    assert_int_equal(t.exact, md.n);
    mc_store_free(c2);
    mc_store_free(s);
    model_free(&md);
    mc_proc_stop(&h1.proc, SIGTERM, 10000);
    mc_proc_stop(&h2.proc, SIGTERM, 10000);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    drop_root();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", backup);
    assert_int_equal(system(cmd), 0);
}

static void test_crash_restore_never_returns_wrong_bytes(void **state)
{
    (void)state;
    new_root();
    static const char *const flags[] = {"--enable_snapshot=true", "--enable_snapshot_restore=true",
                                        "--snapshot_interval_seconds=1", NULL};
    mc_master_t m;
    mc_holder_t h1, h2;
    assert_int_equal(mc_master_start(&m, 0, flags), 0);
    /* small segments: a fills 60 % of them; after half of it is removed, b needs more room
     * than was never used, so the puts after the snapshot reuse a's freed extents */
    assert_int_equal(mc_holder_start(&h1, &m, "2MB", NULL, NULL, 20000), 0);
    assert_int_equal(mc_holder_start(&h2, &m, "2MB", NULL, NULL, 20000), 0);
    mc_store_t *s = mc_test_client(&m, 1, 0);
    assert_non_null(s);
    model_t a, b;
    model_init(&a, "a", 300, 16 * 1024, 11);
    model_init(&b, "b", 250, 16 * 1024, 12);
    put_all(s, &a, 0, a.n);
    char before[64];
    latest(before, sizeof(before));
    assert_int_equal(wait_new_snapshot(before, 10000), 0); /* a periodic one holds all of a */
    assert_int_equal(wait_metric_at_least(&m, "master_snapshot_success", 1, 10000), 0);
    assert_int_equal(mc_master_metric(&m, "master_snapshot_fail"), 0);
    char key[64];
    for (size_t i = 0; i < a.n; i += 2) { /* half of a goes; b takes its room */
        key_of(&a, i, key, sizeof(key));
        assert_int_equal(mc_store_remove(s, key, 1), 0);
    }
    put_all(s, &b, 0, b.n);
    int port = m.rpc_port;
    mc_master_stop(&m, SIGKILL);
    assert_int_equal(mc_master_start_on(&m, port, 0, flags), 0);
    assert_int_equal(wait_metric(&m, "master_restore_pending_records", 0, 30000), 0);
    for (int checksum = 0; checksum <= 1; checksum++) {
        mc_store_t *r = mc_test_client(&m, checksum, 0);
        assert_non_null(r);
        tally_t ta = read_all(r, &a, 0, a.n), tb = read_all(r, &b, 0, b.n);
        print_message("crash restore (checksums %s): a: %zu exact %zu missing %zu wrong %zu "
                      "failed; b: %zu exact %zu missing %zu wrong %zu failed\n",
                      checksum ? "on" : "off", ta.exact, ta.missing, ta.wrong, ta.failed, tb.exact,
                      tb.missing, tb.wrong, tb.failed);
        assert_int_equal(ta.wrong + tb.wrong, 0);
        assert_int_equal(ta.failed + tb.failed, 0);
        mc_store_free(r);
    }
    /* the periodic snapshot was not trusted: each replica was verified by its owner; those
     * whose extents b reused failed, the others are back (values removed after the snapshot
     * whose extents were not reused may come back too: stale, but their exact bytes) */
    long long verified = mc_master_metric(&m, "master_restore_verified_replicas_total");
    long long failed = mc_master_metric(&m, "master_restore_verify_failed_total");
    print_message("crash restore: %lld verified, %lld failed verification\n", verified, failed);
    assert_true(verified > 0);
    assert_true(failed > 0);
    mc_store_free(s);
    model_free(&a);
    model_free(&b);
    mc_proc_stop(&h1.proc, SIGTERM, 10000);
    mc_proc_stop(&h2.proc, SIGTERM, 10000);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    drop_root();
}

static void test_holder_restarted_while_master_down_loses_its_objects(void **state)
{
    (void)state;
    new_root();
    mc_master_t m;
    mc_holder_t h1, h2;
    assert_int_equal(mc_master_start(&m, 0, snap_flags), 0);
    assert_int_equal(mc_holder_start(&h1, &m, "16MB", NULL, NULL, 20000), 0);
    mc_store_t *s = mc_test_client(&m, 1, 0);
    model_t md;
    model_init(&md, "h", 100, 8 * 1024, 21);
    put_all(s, &md, 0, md.n);
    int port = m.rpc_port;
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    /* the holder restarts meanwhile: a new process, a new segment id */
    assert_true(mc_clean_exit(mc_proc_stop(&h1.proc, SIGTERM, 10000)));
    mc_cluster_untrack(h1.proc.pid);
    assert_int_equal(mc_master_start_on(&m, port, 0, snap_flags), 0);
    assert_int_equal(mc_holder_start(&h2, &m, "16MB", NULL, NULL, 20000), 0);
    /* the new holder mounted (its start waits for that): the records stay hidden */
    assert_true(mc_master_metric(&m, "master_restore_pending_records") > 0);
    tally_t t = read_all(s, &md, 0, md.n);
    assert_int_equal(t.missing, md.n);
    assert_int_equal(mc_master_metric(&m, "master_restore_revived_replicas_total"), 0);
    mc_store_free(s);
    model_free(&md);
    mc_proc_stop(&h2.proc, SIGTERM, 10000);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    drop_root();
}

static void test_corrupt_newest_snapshot_falls_back_to_the_older(void **state)
{
    (void)state;
    new_root();
    mc_master_t m;
    mc_holder_t h;
    assert_int_equal(mc_master_start(&m, 0, snap_flags), 0);
    assert_int_equal(mc_holder_start(&h, &m, "16MB", NULL, NULL, 20000), 0);
    mc_store_t *s = mc_test_client(&m, 1, 0);
    model_t one, two;
    model_init(&one, "one", 50, 4096, 31);
    model_init(&two, "two", 50, 4096, 32);
    put_all(s, &one, 0, one.n);
    int port = m.rpc_port;
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM))); /* snapshot 1: one */
    char first[64];
    latest(first, sizeof(first));
    usleep(5000);
    assert_int_equal(mc_master_start_on(&m, port, 0, snap_flags), 0);
    assert_int_equal(wait_metric(&m, "master_restore_pending_records", 0, 30000), 0);
    put_all(s, &two, 0, two.n);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM))); /* snapshot 2: one + two */
    char second[64], p[160];
    latest(second, sizeof(second));
    assert_string_not_equal(first, second);
    snprintf(p, sizeof(p), "%s/%s/records.bin", root, second);
    assert_int_equal(truncate(p, 100), 0);

    assert_int_equal(mc_master_start_on(&m, port, 0, snap_flags), 0);
    assert_int_equal(wait_metric(&m, "master_restore_pending_records", 0, 30000), 0);
    tally_t t1 = read_all(s, &one, 0, one.n), t2 = read_all(s, &two, 0, two.n);
    assert_int_equal(t1.exact, one.n);
    assert_int_equal(t2.missing, two.n);
    mc_store_free(s);
    model_free(&one);
    model_free(&two);
    mc_proc_stop(&h.proc, SIGTERM, 10000);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    drop_root();
}

/* Runs mooncake_master with argv (NULL-terminated) and returns its exit code (it must exit). */
static int master_exit_code(char *const *argv)
{
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, MASTER_BIN, NULL, NULL, argv, environ), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_flags(void **state)
{
    (void)state;
    setenv("MOONCAKE_SNAPSHOT_LOCAL_PATH", "/tmp", 1);
    char *s3[] = {MASTER_BIN, "--enable_snapshot=true", "--snapshot_object_store_type=s3", NULL};
    assert_int_equal(master_exit_code(s3), 2);
    char *bad[] = {MASTER_BIN, "--snapshot_retention_count=0", NULL};
    assert_int_equal(master_exit_code(bad), 1);
    unsetenv("MOONCAKE_SNAPSHOT_LOCAL_PATH");
    char *unset[] = {MASTER_BIN, "--enable_snapshot=true", NULL};
    assert_int_equal(master_exit_code(unset), 1);
    char *unset2[] = {MASTER_BIN, "--enable_snapshot_restore=true", NULL};
    assert_int_equal(master_exit_code(unset2), 1);
}

static int teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_flags, teardown),
        cmocka_unit_test_teardown(test_planned_restart_brings_back_every_object, teardown),
        cmocka_unit_test_teardown(test_crash_restore_never_returns_wrong_bytes, teardown),
        cmocka_unit_test_teardown(test_holder_restarted_while_master_down_loses_its_objects,
                                  teardown),
        cmocka_unit_test_teardown(test_corrupt_newest_snapshot_falls_back_to_the_older, teardown),
    };
    atexit(mc_cluster_kill_all);
    return cmocka_run_group_tests_name("snapshot", tests, NULL, NULL);
}
