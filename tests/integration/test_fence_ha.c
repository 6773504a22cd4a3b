/*
 * test_fence_ha.c — a write reported failed, or a put the old leader gave out, never lands in
 * memory the new leader handed to another object, across a master failover (real processes: a
 * 3-member etcd, two masters with --enable_ha --enable_oplog, one mooncake_client holder, store
 * clients that follow the elected master through "etcd://..."):
 *
 *   - A holder stopped (every thread in state T): put K1 over tcp fails; the leader is SIGKILLed
 *     and a standby takes over; the holder resumes with K1 still queued in its socket and
 *     re-mounts at the new leader (its re-mount is a fence); K2 of the same size is acknowledged
 *     into the same segment. K2 reads back exact for 30 s and none of K1's words are anywhere in
 *     the holder's segment; with checksums on (no -801) and off (no wrong bytes). Nothing can
 *     be placed in a stopped holder's memory at the new leader before the holder runs again
 *     and re-mounts, so this case guards that order: with the tcp drop of abandoned requests
 *     disabled it still passes (K1 then lands before the re-mount and K2 overwrites it).
 *   - A same-host writer stopped after its PutStart at the old leader, before its shared-memory
 *     copy; the leader SIGKILLed; the new leader places 1 MiB objects in the memory that put was
 *     given; the writer resumes: its copy is refused (the holder's fence page carries the new
 *     mount epoch) and no object of the new leader holds its bytes (read with checksums off).
 *     test_ha covers the same stale writer over tcp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster.h"
#include "etcd.h"
#include "etcd_cluster.h"
#include "master_view.h"
#include "mooncake/errors.h"
#include "mooncake/store.h"
#include "payload.h"
#include "proc.h"

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RW_BIN MC_BUILD_DIR "/tests/integration/store_rw"
#define MiB (1024ull * 1024ull)
#define NMASTERS 2
#define TIMEOUT_S 2      /* MC_TRANSFER_TIMEOUT of the holder and the clients */
#define K2_READ_MS 30000 /* how long K2 is read back after the holder resumed */

static mc_etcd_cluster_t ec;
static mc_master_t masters[NMASTERS];
static int master_up[NMASTERS];
static char cluster_id[64];
static mc_master_t ha_master; /* only .addr = "etcd://...", what holders and clients are given */
/* The case's holder and writer, for the teardown after a failed assertion (not etcd's members,
 * which mc_cluster_kill_all would take too). */
static pid_t case_pid[2];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int start_master(int i)
{
    char ep[300], cid[100];
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", ec.endpoints);
    snprintf(cid, sizeof(cid), "--cluster_id=%s", cluster_id);
    const char *extra[] = {"--enable_ha=true",
                           ep,
                           cid,
                           "--enable_oplog=true",
                           "--oplog_poll_interval_ms=200",
                           "--oplog_sync_ack=true",
                           "--client_ttl=10",
                           NULL};
    int rc = mc_master_start(&masters[i], 0, extra);
    master_up[i] = rc == 0;
    return rc;
}

/* The index of the master the etcd view names, other than `not` (-1: any), waited for up to ms;
 * -1 when none. */
static int wait_leader(mc_etcd_t *e, int not, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (now_ms() < end) {
        char leader[128];
        int64_t v;
        if (mc_master_view_read(e, cluster_id, leader, sizeof(leader), &v) == 0)
            for (int i = 0; i < NMASTERS; i++)
                if (i != not &&master_up[i] && !strcmp(masters[i].addr, leader))
                    return i;
        usleep(50 * 1000);
    }
    return -1;
}

/* A fresh cluster id per case (the operation log of one case is not the next one's). */
static int start_masters(mc_etcd_t *e, const char *name)
{
    snprintf(cluster_id, sizeof(cluster_id), "fence_ha_%s_%d", name, (int)getpid());
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    for (int i = 0; i < NMASTERS; i++)
        assert_int_equal(start_master(i), 0);
    int leader = wait_leader(e, -1, 20000);
    assert_true(leader >= 0);
    return leader;
}

static void stop_masters(void)
{
    for (int i = 0; i < NMASTERS; i++) {
        if (master_up[i])
            mc_master_stop(&masters[i], SIGTERM);
        master_up[i] = 0;
    }
}

/* Kills the leader and returns the standby that took over. */
static int fail_over(mc_etcd_t *e, int leader)
{
    mc_master_stop(&masters[leader], SIGKILL);
    master_up[leader] = 0;
    int next = wait_leader(e, leader, 30000);
    assert_true(next >= 0);
    return next;
}

/* 8-byte words of [start, +len) in pid equal to one of value seed's first `words` words. */
static size_t words_of_value(pid_t pid, uint64_t start, uint64_t len, uint64_t seed, size_t words)
{
    uint64_t *probe = malloc(words * 8);
    assert_non_null(probe);
    mc_payload_fill(probe, words * 8, seed);
    long long hits = mc_proc_count_words(pid, start, len, probe, words);
    free(probe);
    assert_true(hits >= 0);
    return (size_t)hits;
}

/* ---- a failed put to a stopped holder, across a failover ------------------------------------ */

static void stopped_holder_case(int checksum)
{
    mc_etcd_t *e;
    assert_int_equal(mc_etcd_create(ec.endpoints, 2000, &e), 0);
    int leader = start_masters(e, checksum ? "holder_ck" : "holder_nock");
    char timeout[32];
    snprintf(timeout, sizeof(timeout), "MC_TRANSFER_TIMEOUT=%d", TIMEOUT_S);
    const char *const env[] = {timeout, NULL};
    mc_holder_t h;
    assert_int_equal(mc_holder_start(&h, &ha_master, "64MB", NULL, env, 30000), 0);
    case_pid[0] = h.proc.pid;
    mc_env_apply(env, 1);
    mc_store_t *w = mc_test_client(&ha_master, checksum, 1); /* tcp: the holder applies it */
    mc_store_t *r = mc_test_client(&ha_master, checksum, 1);
    mc_env_apply(env, 0);
    assert_non_null(w);
    assert_non_null(r);
    size_t size = 4 * MiB;
    char *k1 = malloc(size), *k2 = malloc(size), *got = malloc(size);
    mc_payload_fill(k1, size, 11);
    mc_payload_fill(k2, size, 22);
    assert_int_equal(mc_test_put_retry(w, "fence/warm", k2, 4096, NULL, 30000), 0);

    assert_int_equal(mc_proc_freeze(h.proc.pid, 5000), 0);
    int rc = mc_store_put(w, "fence/k1", k1, size, NULL);
    print_message("  put K1 with the holder stopped: %d (%s)\n", rc, mc_error_name(rc));
    assert_true(rc < 0);
    int next = fail_over(e, leader);
    print_message("  leader %d killed; master %d leads\n", leader, next);
    assert_int_equal(mc_proc_is_frozen(h.proc.pid), 1);
    assert_int_equal(mc_proc_thaw(h.proc.pid), 0);

    /* K2, acknowledged by the new leader once the holder re-mounted there. */
    uint64_t deadline = now_ms() + 30000;
    while ((rc = mc_store_put(w, "fence/k2", k2, size, NULL)) != 0) {
        assert_true(now_ms() < deadline);
        usleep(100 * 1000);
    }
    mc_replica_desc_t d[4];
    size_t nd = 0;
    assert_int_equal(mc_store_get_replica_desc(r, "fence/k2", d, 4, &nd), 0);
    assert_true(nd >= 1);
    print_message("  K2 acknowledged at %#llx by the new leader\n",
                  (unsigned long long)d[0].address);
    uint64_t seg_start = 0, seg_len = 0;
    assert_int_equal(mc_proc_mapping_of(h.proc.pid, d[0].address, &seg_start, &seg_len), 0);
    uint64_t until = now_ms() + K2_READ_MS;
    int reads = 0;
    while (now_ms() < until) {
        int64_t n = mc_store_get(r, "fence/k2", got, size);
        assert_int_equal(n, (int64_t)size);
        assert_true(mc_payload_diff(got, size, 22) == size);
        reads++;
        usleep(200 * 1000);
    }
    size_t hits = words_of_value(h.proc.pid, seg_start, seg_len, 11, 512);
    print_message("  checksums %s: K2 exact in %d reads over %d s; words of K1 in the holder's "
                  "%" PRIu64 "-byte segment: %zu\n",
                  checksum ? "on" : "off", reads, K2_READ_MS / 1000, seg_len, hits);
    assert_int_equal(hits, 0);
    assert_int_equal(mc_store_get(r, "fence/k1", got, size), MC_ERR_OBJECT_NOT_FOUND);
    mc_store_free(w);
    mc_store_free(r);
    free(k1);
    free(k2);
    free(got);
    mc_cluster_untrack(h.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&h.proc, SIGTERM, 10000)));
    stop_masters();
    mc_etcd_destroy(e);
}

static void test_failed_put_to_a_stopped_holder_never_lands_across_a_failover(void **state)
{
    (void)state;
    stopped_holder_case(1);
    stopped_holder_case(0);
}

/* ---- a same-host writer stalled across a failover -------------------------------------------- */

static void test_stale_shm_writer_cannot_overwrite_across_a_failover(void **state)
{
    (void)state;
    mc_etcd_t *e;
    assert_int_equal(mc_etcd_create(ec.endpoints, 2000, &e), 0);
    int leader = start_masters(e, "shm");
    mc_holder_t h;
    assert_int_equal(mc_holder_start(&h, &ha_master, "64MB", NULL, NULL, 30000), 0);
    case_pid[0] = h.proc.pid;
    /* The stale writer: a store_rw on this host (shm) that stops itself right after PutStart. */
    mc_proc_t wr;
    char *argv[] = {RW_BIN, ha_master.addr, NULL};
    const char *const fp[] = {"MC_FAILPOINTS=put.after_start=stop:1", NULL};
    mc_env_apply(fp, 1);
    int rc = mc_proc_start(&wr, argv, "READY", 20000);
    mc_env_apply(fp, 0);
    assert_int_equal(rc, 0);
    mc_cluster_track(wr.pid);
    case_pid[1] = wr.pid;
    const size_t vsize = 1 * MiB;
    char line[256];
    snprintf(line, sizeof(line), "put stale-0 %zu 7\n", vsize);
    assert_int_equal(mc_proc_send(&wr, line), 0);
    uint64_t deadline = now_ms() + 30000;
    while (mc_proc_is_frozen(wr.pid) != 1) {
        assert_true(now_ms() < deadline);
        usleep(5000);
    }

    int next = fail_over(e, leader);
    print_message("  leader %d killed; master %d leads\n", leader, next);
    /* New objects at the new leader, in the memory the stale put was given (the segment holds
     * nothing else: the first of them starts where the stale put's extent did). */
    mc_store_t *s = mc_test_client(&ha_master, 0, 0);
    assert_non_null(s);
    uint8_t *buf = malloc(vsize), *got = malloc(vsize);
    const int n = 32;
    char key[64];
    deadline = now_ms() + 30000;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "new-%d", i);
        mc_payload_fill(buf, vsize, 100 + (uint64_t)i);
        while ((rc = mc_store_put(s, key, buf, vsize, NULL)) != 0 && now_ms() < deadline)
            usleep(100 * 1000);
        assert_int_equal(rc, 0);
    }
    /* The stale writer resumes and tries its copy. */
    assert_int_equal(mc_proc_thaw(wr.pid), 0);
    char out[256];
    assert_int_equal(mc_proc_read_line(&wr, out, sizeof(out), 60000), 0);
    print_message("  stale writer resumed: \"%s\"\n", out);
    int wrc = 0;
    assert_int_equal(sscanf(out, "PUT %d", &wrc), 1);
    assert_true(wrc < 0);
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "new-%d", i);
        int64_t got_n = mc_store_get(s, key, got, vsize);
        assert_int_equal(got_n, (int64_t)vsize);
        wrong += mc_payload_diff(got, vsize, 100 + (uint64_t)i) != vsize;
    }
    print_message("  stale shm writer: %d of %d objects of the new leader hold other bytes\n",
                  wrong, n);
    assert_int_equal(wrong, 0);
    close(wr.stdin_fd);
    wr.stdin_fd = -1;
    mc_cluster_untrack(wr.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&wr, 0, 20000)));
    free(buf);
    free(got);
    mc_store_free(s);
    mc_cluster_untrack(h.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&h.proc, SIGTERM, 10000)));
    stop_masters();
    mc_etcd_destroy(e);
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    if (mc_etcd_cluster_start(&ec, 3) != 0)
        return -1;
    int len = snprintf(ha_master.addr, sizeof(ha_master.addr), "etcd://%s", ec.endpoints);
    return len > 0 && (size_t)len < sizeof(ha_master.addr) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    mc_etcd_cluster_destroy(&ec);
    return 0;
}

/* Whatever a failed assertion left running (masters, holders, writers), not etcd. */
static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        if (case_pid[i] > 0) {
            kill(case_pid[i], SIGKILL);
            waitpid(case_pid[i], NULL, 0);
            mc_cluster_untrack(case_pid[i]);
        }
        case_pid[i] = 0;
    }
    for (int i = 0; i < NMASTERS; i++) {
        if (master_up[i])
            mc_master_stop(&masters[i], SIGKILL);
        master_up[i] = 0;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_failed_put_to_a_stopped_holder_never_lands_across_a_failover,
                                  teardown),
        cmocka_unit_test_teardown(test_stale_shm_writer_cannot_overwrite_across_a_failover,
                                  teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
