/*
 * test_daos_faults.c — the DAOS adapter never holds its caller past a deadline, on a libdfs
 * double that fails the way real DAOS was measured to fail (tests/support/dfs_double):
 *   - the engine dies mid-write and mid-read: the transfer's event never completes; the call
 *     returns MC_ERR_DFS_NETWORK_TIMEOUT within its deadline + 1 s, no event is left in flight,
 *     the process does not spin while it waits, nothing lands in the caller's buffer afterwards,
 *     and once the engine answers again the next call works;
 *   - wedged: after a deadline with no answer since, operations fail at once (-1601) except one
 *     probe a second, and an answer ends the state;
 *   - blocking calls (remove, open) stuck in DAOS are given up at the deadline and finished when
 *     DAOS answers; closing an adapter with such a call does not hang;
 *   - the engine down when an adapter opens; no server reachable at connect (the double's
 *     delay, then ETIMEDOUT); a container destroyed under an open handle; a full pool (writes
 *     fail at once, reads keep working); daos_agent gone (no effect).
 * The wedged state is the process's (one DAOS client per process), so every case ends with the
 * engine answering and the state cleared (recover()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "dfs_double.h"
#include "mooncake/errors.h"
#include "mooncake/fs_adapter.h"

#define POOL "faultpool"
#define CONT "faultcont"
/* Long enough that a runner thread started on a loaded host (two compilers beside it) reaches
 * DAOS before the deadline, so the cases see a call stuck inside DAOS, not one dropped unrun. */
#define DEADLINE_MS 1000
#define AT_ONCE_MS 300 /* "at once": well under a deadline, with room for a loaded host */
#define KiB 1024u

static struct {
    char tmp[64];
    char store[128];
    char mount[128];
    int seq;
} S;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* CPU time (user + system) of the whole process, ms. */
static uint64_t cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000u;
}

static void pause_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static mc_fs_config_t config(char *root)
{
    snprintf(root, 256, "%s/r%d", S.mount, S.seq++);
    mc_fs_config_t cfg;
    mc_fs_config_init(&cfg);
    cfg.fs_type = "daos";
    cfg.root_dir = root;
    cfg.io_threads = 2;
    cfg.write_xfer_size = 64 * KiB; /* several transfers per object */
    cfg.read_xfer_size = 64 * KiB;
    cfg.read_timeout_ms = DEADLINE_MS;
    cfg.write_timeout_ms = DEADLINE_MS;
    return cfg;
}

static mc_fs_adapter_t *open_ok(const mc_fs_config_t *cfg)
{
    mc_fs_adapter_t *a = NULL;
    int rc = mc_fs_adapter_open(cfg, &a);
    if (rc != 0)
        fail_msg("open %s: %s", cfg->root_dir, mc_error_name(rc));
    return a;
}

static mc_fs_health_stats_t health(const mc_fs_adapter_t *a)
{
    mc_fs_health_stats_t h;
    mc_fs_adapter_health(a, &h);
    return h;
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(seed * 37u + i * 11u + (i >> 10));
}

/*
 * Brings the engine back and waits (≤ 10 s) until the adapter's process is healthy again: no
 * call stuck inside DAOS and not wedged (a probe goes through within a second).
 */
static void recover(mc_fs_adapter_t *a)
{
    unsetenv("DFS_DOUBLE_FAULT");
    assert_int_equal(dfs_double_set_engine(1), 0);
    uint64_t until = now_ms() + 10000;
    mc_fs_adapter_t *own = NULL;
    if (!a) { /* the counts are the process's: any adapter reads them (open is a probe too) */
        char root[256];
        mc_fs_config_t cfg = config(root);
        while (mc_fs_adapter_open(&cfg, &own) != 0) {
            if (now_ms() > until)
                fail_msg("no adapter opens 10 s after the engine came back");
            pause_ms(50);
        }
        a = own;
    }
    for (;;) {
        mc_fs_health_stats_t h = health(a);
        if (!h.wedged && h.stuck_calls == 0)
            break;
        if (now_ms() > until)
            fail_msg("not healthy 10 s after the engine came back: wedged %d, %llu stuck", h.wedged,
                     (unsigned long long)h.stuck_calls);
        mc_fs_health_check(a); /* refused at once, or the probe that ends the state */
        pause_ms(50);
    }
    mc_fs_adapter_close(own);
}

static int setup_group(void **state)
{
    (void)state;
    snprintf(S.tmp, sizeof(S.tmp), "/tmp/mc_daos_faults.XXXXXX");
    if (!mkdtemp(S.tmp))
        return -1;
    snprintf(S.store, sizeof(S.store), "%s/store", S.tmp);
    setenv("DFS_DOUBLE_ROOT", S.store, 1);
    char cont[256];
    snprintf(cont, sizeof(cont), "%s/" POOL, S.store);
    mkdir(S.store, 0755);
    mkdir(cont, 0755);
    snprintf(cont, sizeof(cont), "%s/" POOL "/" CONT, S.store);
    mkdir(cont, 0755);
    snprintf(S.mount, sizeof(S.mount), "%s/mnt", S.tmp);
    mkdir(S.mount, 0755);
    const char *v = "DAOS.POSIX://" POOL "/" CONT;
    if (setxattr(S.mount, "user.daos", v, strlen(v), 0) != 0) {
        fprintf(stderr, "setxattr(%s, user.daos): %s: needs user xattrs\n", S.mount,
                strerror(errno));
        return -1;
    }
    setenv("DFS_DOUBLE_EQ_ASYNC", "1", 1); /* transfers complete later, as on DAOS */
    return 0;
}

static int teardown_group(void **state)
{
    (void)state;
    dfs_double_set_engine(1);
    nftw(S.tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- the engine dies under I/O ------------------------------------------------------------- */

static void test_engine_dies_mid_write(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    mc_fs_adapter_t *a = open_ok(&cfg);
    size_t n = 512 * KiB;
    unsigned char *v = malloc(n);
    fill(v, n, 1);
    assert_int_equal(mc_fs_write(a, "before", v, n), 0);

    setenv("DFS_DOUBLE_FAULT", "engine_dies@write", 1); /* at the first transfer of the write */
    uint64_t t0 = now_ms(), c0 = cpu_ms();
    int rc = mc_fs_write(a, "during", v, n);
    uint64_t wall = now_ms() - t0, cpu = cpu_ms() - c0;
    assert_int_equal(rc, MC_ERR_DFS_NETWORK_TIMEOUT);
    assert_true(wall >= DEADLINE_MS - 10);
    assert_true(wall <= DEADLINE_MS + 1000);
    assert_int_equal(dfs_double_events_in_flight(), 0);
    if (cpu * 4 > wall) /* waiting is sleeping: well under a quarter of one CPU */
        fail_msg("%llu ms of CPU in %llu ms of waiting", (unsigned long long)cpu,
                 (unsigned long long)wall);
    print_message("engine died mid-write: -1600 after %llu ms (deadline %d ms), %llu ms of CPU\n",
                  (unsigned long long)wall, DEADLINE_MS, (unsigned long long)cpu);
    mc_fs_health_stats_t h = health(a);
    assert_int_equal(h.wedged, 1);
    assert_true(h.timeouts >= 1);

    /* Wedged: the next operation fails at once instead of waiting its own deadline. */
    uint64_t fast_before = h.fast_failures;
    t0 = now_ms();
    assert_int_equal(mc_fs_write(a, "wedged", v, n), MC_ERR_DFS_SERVICE_UNAVAILABLE);
    print_message("wedged: the next write refused after %llu ms\n",
                  (unsigned long long)(now_ms() - t0));
    assert_true(now_ms() - t0 < AT_ONCE_MS);
    unsigned char *out = malloc(n);
    assert_int_equal(mc_fs_read(a, "before", out, n), MC_ERR_DFS_SERVICE_UNAVAILABLE);
    assert_true(health(a).fast_failures >= fast_before + 2);

    /* The engine back: the state ends, and nothing of the failed write is readable. */
    recover(a);
    memset(out, 0, n);
    assert_int_equal(mc_fs_read(a, "before", out, n), 0);
    assert_memory_equal(out, v, n);
    assert_int_equal(mc_fs_read(a, "during", out, n), MC_ERR_FILE_NOT_FOUND);
    fill(v, n, 2);
    assert_int_equal(mc_fs_write(a, "after", v, n), 0);
    assert_int_equal(mc_fs_read(a, "after", out, n), 0);
    assert_memory_equal(out, v, n);
    free(v);
    free(out);
    mc_fs_adapter_close(a);
}

static void test_engine_dies_mid_read_and_the_buffer_stays_untouched(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    cfg.io_threads = 1; /* one event queue: the next read polls the same queue */
    mc_fs_adapter_t *a = open_ok(&cfg);
    size_t n = 512 * KiB;
    unsigned char *v = malloc(n), *out = malloc(n), *out2 = malloc(n);
    fill(v, n, 3);
    assert_int_equal(mc_fs_write(a, "k1", v, n), 0);
    assert_int_equal(mc_fs_write(a, "k2", v, n), 0);

    setenv("DFS_DOUBLE_FAULT", "engine_dies@read", 1);
    uint64_t t0 = now_ms();
    int rc = mc_fs_read(a, "k1", out, n);
    uint64_t wall = now_ms() - t0;
    assert_int_equal(rc, MC_ERR_DFS_NETWORK_TIMEOUT);
    assert_true(wall <= DEADLINE_MS + 1000);
    assert_int_equal(dfs_double_events_in_flight(), 0);

    /* The caller reuses its buffer. A transfer left in flight would run once the engine is
     * back (the next poll of that queue) and write into it. */
    memset(out, 0xAB, n);
    recover(a);
    assert_int_equal(mc_fs_read(a, "k2", out2, n), 0);
    assert_memory_equal(out2, v, n);
    for (size_t i = 0; i < n; i++)
        if (out[i] != 0xAB)
            fail_msg("byte %zu of the given-up read's buffer changed after the call returned", i);
    assert_int_equal(mc_fs_read(a, "k1", out, n), 0);
    assert_memory_equal(out, v, n);
    free(v);
    free(out);
    free(out2);
    mc_fs_adapter_close(a);
}

/* ---- blocking calls -------------------------------------------------------------------------- */

static void test_stuck_remove_is_given_up_and_finished_later(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    mc_fs_adapter_t *a = open_ok(&cfg);
    unsigned char v[4096];
    fill(v, sizeof(v), 4);
    assert_int_equal(mc_fs_write(a, "gone", v, sizeof(v)), 0);

    setenv("DFS_DOUBLE_FAULT", "engine_dies@remove", 1);
    uint64_t t0 = now_ms();
    assert_int_equal(mc_fs_remove(a, "gone"), MC_ERR_DFS_NETWORK_TIMEOUT);
    assert_true(now_ms() - t0 <= DEADLINE_MS + 1000);
    assert_int_equal(health(a).stuck_calls, 1);
    assert_int_equal(dfs_double_blocked_calls(), 1);

    /* DAOS answers again: the given-up call finishes (the object is removed) and its answer
     * ends the wedged state by itself. */
    unsetenv("DFS_DOUBLE_FAULT");
    assert_int_equal(dfs_double_set_engine(1), 0);
    uint64_t until = now_ms() + 5000;
    while ((health(a).stuck_calls != 0 || health(a).wedged) && now_ms() < until)
        pause_ms(10);
    assert_int_equal(health(a).stuck_calls, 0);
    assert_int_equal(health(a).wedged, 0);
    unsigned char out[4096];
    assert_int_equal(mc_fs_read(a, "gone", out, sizeof(out)), MC_ERR_FILE_NOT_FOUND);
    mc_fs_adapter_close(a);
}

static void test_close_with_a_stuck_call_does_not_hang(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    mc_fs_adapter_t *a = open_ok(&cfg);
    unsigned char v[4096];
    fill(v, sizeof(v), 5);
    assert_int_equal(mc_fs_write(a, "k", v, sizeof(v)), 0);
    setenv("DFS_DOUBLE_FAULT", "engine_dies@open", 1);
    assert_int_equal(mc_fs_read(a, "k", v, sizeof(v)), MC_ERR_DFS_NETWORK_TIMEOUT);
    assert_int_equal(health(a).stuck_calls, 1);
    uint64_t t0 = now_ms();
    mc_fs_adapter_close(a); /* its handles stay for the stuck call; it returns */
    assert_true(now_ms() - t0 < 2000 + 1000);
    recover(NULL); /* the stuck call finishes on handles left open, not freed (ASan says) */
    assert_int_equal(dfs_double_blocked_calls(), 0);
}

static void test_engine_down_at_open(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    assert_int_equal(dfs_double_set_engine(0), 0);
    mc_fs_adapter_t *a = NULL;
    uint64_t t0 = now_ms();
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_DFS_NETWORK_TIMEOUT);
    assert_null(a);
    assert_true(now_ms() - t0 <= DEADLINE_MS + 1000 + 2000); /* + close's bounded wait */
    recover(NULL);
    a = open_ok(&cfg);
    mc_fs_adapter_close(a);
}

/* ---- the other faults of the table --------------------------------------------------------- */

static void test_no_server_at_connect(void **state)
{
    (void)state;
    char root[256], cont[256], mount[256];
    mc_fs_config_t cfg = config(root);
    cfg.write_timeout_ms = 5000; /* DAOS's own wait (here 300 ms) ends first */
    /* A container no adapter of the process is connected to: its open connects. */
    snprintf(cont, sizeof(cont), "%s/" POOL "/unreached", S.store);
    mkdir(cont, 0755);
    snprintf(mount, sizeof(mount), "%s/unreached_mnt", S.tmp);
    mkdir(mount, 0755);
    const char *v = "DAOS.POSIX://" POOL "/unreached";
    assert_int_equal(setxattr(mount, "user.daos", v, strlen(v), 0), 0);
    snprintf(root, 256, "%.200s/r", mount);
    setenv("DFS_DOUBLE_FAULT", "no_server", 1);
    setenv("DFS_DOUBLE_NO_SERVER_MS", "300", 1);
    mc_fs_adapter_t *a = NULL;
    uint64_t t0 = now_ms();
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_DFS_NETWORK_TIMEOUT);
    uint64_t wall = now_ms() - t0;
    unsetenv("DFS_DOUBLE_FAULT");
    assert_true(wall >= 290 && wall < 2000);
    assert_null(a);
    assert_int_equal(health(NULL).wedged, 0); /* an answer (an error), not a silence */
    a = open_ok(&cfg);
    mc_fs_adapter_close(a);
}

static void test_container_destroyed_under_the_handle(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    /* A container of its own, so that destroying it leaves the other cases theirs. */
    char cont[256], mount[256];
    snprintf(cont, sizeof(cont), "%s/" POOL "/doomed", S.store);
    mkdir(cont, 0755);
    snprintf(mount, sizeof(mount), "%s/doomed_mnt", S.tmp);
    mkdir(mount, 0755);
    const char *v = "DAOS.POSIX://" POOL "/doomed";
    assert_int_equal(setxattr(mount, "user.daos", v, strlen(v), 0), 0);
    snprintf(root, 256, "%.200s/r", mount);
    mc_fs_adapter_t *a = open_ok(&cfg);
    unsigned char buf[8192];
    fill(buf, sizeof(buf), 6);
    assert_int_equal(mc_fs_write(a, "k", buf, sizeof(buf)), 0);
    nftw(cont, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* daos cont destroy --force */
    uint64_t t0 = now_ms();
    int rc = mc_fs_read(a, "k", buf, sizeof(buf));
    assert_true(rc == MC_ERR_FILE_READ_FAIL || rc == MC_ERR_DFS_STALE_HANDLE);
    rc = mc_fs_write(a, "k2", buf, sizeof(buf));
    assert_true(rc == MC_ERR_FILE_WRITE_FAIL || rc == MC_ERR_DFS_STALE_HANDLE);
    assert_true(now_ms() - t0 < 2 * AT_ONCE_MS); /* two calls, neither waited a deadline */
    assert_int_equal(health(a).wedged, 0);
    mc_fs_adapter_close(a);
}

static void test_pool_full_fails_writes_at_once_and_reads_keep_working(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    mc_fs_adapter_t *a = open_ok(&cfg);
    size_t n = 256 * KiB;
    unsigned char *v = malloc(n), *out = malloc(n);
    fill(v, n, 7);
    assert_int_equal(mc_fs_write(a, "old", v, n), 0);
    setenv("DFS_DOUBLE_FAULT", "enospc@write:*", 1);
    uint64_t t0 = now_ms();
    assert_int_equal(mc_fs_write(a, "new", v, n), MC_ERR_DFS_QUOTA_EXCEEDED);
    assert_true(now_ms() - t0 < AT_ONCE_MS);
    assert_int_equal(mc_fs_read(a, "old", out, n), 0);
    assert_memory_equal(out, v, n);
    unsetenv("DFS_DOUBLE_FAULT");
    assert_int_equal(mc_fs_read(a, "new", out, n), MC_ERR_FILE_NOT_FOUND);
    free(v);
    free(out);
    mc_fs_adapter_close(a);
}

static void test_agent_gone_changes_nothing(void **state)
{
    (void)state;
    char root[256];
    mc_fs_config_t cfg = config(root);
    mc_fs_adapter_t *a = open_ok(&cfg);
    setenv("DFS_DOUBLE_FAULT", "agent_gone:*", 1);
    unsigned char v[4096], out[4096];
    fill(v, sizeof(v), 8);
    assert_int_equal(mc_fs_write(a, "k", v, sizeof(v)), 0);
    assert_int_equal(mc_fs_read(a, "k", out, sizeof(out)), 0);
    assert_memory_equal(out, v, sizeof(v));
    unsetenv("DFS_DOUBLE_FAULT");
    mc_fs_adapter_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_dies_mid_write),
        cmocka_unit_test(test_engine_dies_mid_read_and_the_buffer_stays_untouched),
        cmocka_unit_test(test_stuck_remove_is_given_up_and_finished_later),
        cmocka_unit_test(test_close_with_a_stuck_call_does_not_hang),
        cmocka_unit_test(test_engine_down_at_open),
        cmocka_unit_test(test_no_server_at_connect),
        cmocka_unit_test(test_container_destroyed_under_the_handle),
        cmocka_unit_test(test_pool_full_fails_writes_at_once_and_reads_keep_working),
        cmocka_unit_test(test_agent_gone_changes_nothing),
    };
    return cmocka_run_group_tests_name("daos_faults", tests, setup_group, teardown_group);
}
