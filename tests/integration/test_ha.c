/*
 * test_ha.c — master high availability on a real 3-member etcd cluster.
 *
 * Every case runs real processes on loopback: etcd (Debian's 3.4), two or three mooncake_master
 * with --enable_ha --enable_oplog, two mooncake_client memory holders and store clients that all
 * follow the elected master through "etcd://...".
 *
 *  - failover_under_verified_load: 8 writer threads put values whose bytes derive from their key;
 *    an etcd member is SIGKILLed mid-run, then the leader master. Every object acknowledged
 *    before the kill reads back exact or is reported missing, never other bytes (read with
 *    checksums on and off), and at least 99.9 % read back exact; every object acknowledged after
 *    the failover reads back exact. The failover time (kill to the first acknowledged put) is
 *    printed.
 *  - stalled_leader_is_deposed: the leader SIGSTOPped; a standby takes over; once the old one
 *    runs again it serves nothing (a client pointed at its address directly gets no answer) and
 *    no object is lost or changed by it.
 *  - planned_restart_of_every_master: every master stopped (SIGTERM) and started again: the new
 *    leader replays the operation log and 100 % of the objects read back exact.
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
#include "proc.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RW_BIN MC_BUILD_DIR "/tests/integration/store_rw"
#define NMASTERS 3
#define NWRITERS 8
#define MAX_PUTS_PER_WRITER 12000
/* A writer keeps POST_KILL_PUTS keys for after the leader's kill (it waits for the kill once only
 * those are left) and makes at most WRITER_PUTS_PER_S puts a second, so that its other keys last
 * past the kill (3 s + 5 s after the start). Unpaced, with async acknowledgement, a 2-CPU machine
 * made all 12000 puts of every writer before the kill and none after it. The reserve outlasts a
 * failed put every 20 ms for the longest the test waits after the kill (30 s + 40 s). */
#define POST_KILL_PUTS 4000
#define WRITER_PUTS_PER_S 800
#define MAX_VALUE 8192

static mc_etcd_cluster_t ec;
static mc_master_t masters[NMASTERS];
static int master_up[NMASTERS];
static mc_holder_t holders[2];
static int nholders;
static char cluster_id[64];
static char ha_addr[256];
static mc_master_t ha_master; /* only .addr = ha_addr, for the holders' --master_server_address */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The value of key (thread t, index i): its length and bytes derive from both. */
static size_t value_of(int t, int i, uint8_t *out)
{
    uint64_t x = (uint64_t)t * 1000003u + (uint64_t)i * 7919u + 17;
    size_t len = 64 + (size_t)(x % (MAX_VALUE - 64));
    for (size_t k = 0; k < len; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        out[k] = (uint8_t)(x >> 56);
    }
    return len;
}

static int sync_ack = 1; /* --oplog_sync_ack of the masters started from now on */
static const char *extra_master_flag = "--client_ttl=10"; /* one more flag for them */

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
                           sync_ack ? "--oplog_sync_ack=true" : "--oplog_sync_ack=false",
                           extra_master_flag,
                           NULL};
    int port = masters[i].rpc_port ? masters[i].rpc_port : mc_test_free_port();
    int rc = mc_master_start_on(&masters[i], port, 0, extra);
    master_up[i] = rc == 0;
    return rc;
}

/* The index of the master the etcd view names, or -1 (none, or unknown). */
static int leader_index(mc_etcd_t *e, int64_t *version)
{
    char leader[128];
    if (mc_master_view_read(e, cluster_id, leader, sizeof(leader), version) != 0)
        return -1;
    for (int i = 0; i < NMASTERS; i++)
        if (master_up[i] && !strcmp(masters[i].addr, leader))
            return i;
    return -1;
}

/* Waits up to ms for a leader other than `not` (-1: any) that serves; returns its index. */
static int wait_leader(mc_etcd_t *e, int not, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (now_ms() < end) {
        int64_t v;
        int i = leader_index(e, &v);
        if (i >= 0 && i != not )
            return i;
        usleep(50 * 1000);
    }
    return -1;
}

static mc_store_t *ha_client(int checksum)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .local_buffer_size = 32u << 20,
                             .master_server_addr = ha_addr,
                             .disable_checksum = !checksum};
    mc_store_t *s = NULL;
    return mc_store_setup(&cfg, &s) == 0 ? s : NULL;
}

/* The case's etcd handle: opened by the case, closed by its teardown, so that a case failing an
 * assertion leaks nothing (a leak report would otherwise end the output, after the failure). */
static mc_etcd_t *case_etcd;

static mc_etcd_t *case_etcd_open(void)
{
    assert_null(case_etcd);
    assert_int_equal(mc_etcd_create(ec.endpoints, 2000, &case_etcd), 0);
    return case_etcd;
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    if (mc_etcd_cluster_start(&ec, 3) != 0)
        return -1;
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_%d", (int)getpid());
    snprintf(ha_addr, sizeof(ha_addr), "etcd://%s", ec.endpoints);
    if (strlen(ha_addr) >= sizeof(ha_master.addr))
        return -1;
    memcpy(ha_master.addr, ha_addr, strlen(ha_addr) + 1);
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    mc_etcd_cluster_destroy(&ec);
    return 0;
}

/* The holders' extra flags and environment (NULL-terminated; NULL: none) for start_cluster. */
static const char *const *holder_flags;
static const char *const *holder_env;

/* Starts the masters and the holders; waits for a leader. Returns the leader's index. */
static int start_cluster(mc_etcd_t *e, int nmasters)
{
    for (int i = 0; i < nmasters; i++)
        assert_int_equal(start_master(i), 0);
    int leader = wait_leader(e, -1, 20000);
    assert_true(leader >= 0);
    const char *none[] = {NULL};
    for (nholders = 0; nholders < 2; nholders++)
        assert_int_equal(mc_holder_start(&holders[nholders], &ha_master, "512MB",
                                         holder_flags ? holder_flags : none, holder_env, 30000),
                         0);
    return leader;
}

/* Per-test teardown: whatever a failed assertion left running (masters, holders), not etcd. */
static int test_teardown(void **state)
{
    (void)state;
    holder_flags = NULL;
    holder_env = NULL;
    mc_etcd_destroy(case_etcd);
    case_etcd = NULL;
    for (int i = 0; i < nholders; i++)
        mc_proc_stop(&holders[i].proc, SIGKILL, 5000);
    nholders = 0;
    for (int i = 0; i < NMASTERS; i++) {
        if (master_up[i]) {
            kill(masters[i].pid, SIGCONT);
            mc_master_stop(&masters[i], SIGKILL);
        }
        master_up[i] = 0;
        masters[i].rpc_port = 0;
    }
    /* The member a case killed comes back on its own ports; the next case kills it again. */
    if (ec.n && !ec.pid[0] && mc_etcd_cluster_restart(&ec, 0) != 0) {
        fprintf(stderr, "test_ha: etcd member m0 could not be restarted\n");
        return -1;
    }
    return 0;
}

static void stop_cluster(void)
{
    for (int i = 0; i < nholders; i++)
        mc_proc_stop(&holders[i].proc, SIGTERM, 10000);
    nholders = 0;
    for (int i = 0; i < NMASTERS; i++) {
        if (master_up[i])
            mc_master_stop(&masters[i], SIGTERM);
        master_up[i] = 0;
        masters[i].rpc_port = 0;
    }
}

/* ---- the verified load ------------------------------------------------------------------------
 */

typedef struct writer {
    int t;
    mc_store_t *s;
    atomic_int *stop;
    /* ack_ms[i]: when put i was acknowledged (0: it was not) */
    uint64_t ack_ms[MAX_PUTS_PER_WRITER];
    int nputs;
    int failures;
} writer_t;

static atomic_uint_fast64_t first_ack_after_kill;
static atomic_uint_fast64_t kill_time;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    uint8_t *buf = malloc(MAX_VALUE);
    char key[64];
    uint64_t start = now_ms();
    for (int i = 0; i < MAX_PUTS_PER_WRITER && !atomic_load(w->stop); i++) {
        if (i == MAX_PUTS_PER_WRITER - POST_KILL_PUTS)
            while (!atomic_load(&kill_time) && !atomic_load(w->stop))
                usleep(10 * 1000);
        uint64_t due = start + (uint64_t)i * 1000u / WRITER_PUTS_PER_S, t0 = now_ms();
        if (t0 < due)
            usleep((useconds_t)(due - t0) * 1000u);
        size_t len = value_of(w->t, i, buf);
        snprintf(key, sizeof(key), "ha-%d-%d", w->t, i);
        int rc = mc_store_put(w->s, key, buf, len, NULL);
        w->nputs = i + 1;
        if (rc == 0) {
            uint64_t t = now_ms();
            w->ack_ms[i] = t;
            uint64_t k = atomic_load(&kill_time), zero = 0;
            if (k && t > k)
                atomic_compare_exchange_strong(&first_ack_after_kill, &zero, t);
        } else {
            w->failures++;
            usleep(20 * 1000);
        }
    }
    free(buf);
    return NULL;
}

typedef struct verdict {
    int exact, missing, wrong, mismatch, other;
} verdict_t;

/* Reads back (thread t, index i) with s: exact, missing, wrong bytes, checksum mismatch, other. */
static void check_one(mc_store_t *s, int t, int i, uint8_t *want, uint8_t *got, verdict_t *v)
{
    char key[64];
    snprintf(key, sizeof(key), "ha-%d-%d", t, i);
    size_t len = value_of(t, i, want);
    int64_t n = mc_store_get(s, key, got, MAX_VALUE);
    if (n == (int64_t)len && !memcmp(got, want, len))
        v->exact++;
    else if (n == MC_ERR_OBJECT_NOT_FOUND)
        v->missing++;
    else if (n >= 0)
        v->wrong++;
    else if (n == MC_ERR_CHECKSUM_MISMATCH)
        v->mismatch++;
    else
        v->other++;
}

/* Verifies every acknowledged put of the writers with reader s: those acknowledged before
 * `split` into *before, the others into *after. Missing ones are retried for up to 15 s (the
 * holders re-mount on the new leader within a few pings). */
static void verify_all(mc_store_t *s, writer_t *w, int nw, uint64_t split, verdict_t *before,
                       verdict_t *after)
{
    uint8_t *want = malloc(MAX_VALUE), *got = malloc(MAX_VALUE);
    uint64_t end = now_ms() + 15000;
    for (;;) {
        verdict_t b = {0}, a = {0};
        for (int k = 0; k < nw; k++)
            for (int i = 0; i < w[k].nputs; i++)
                if (w[k].ack_ms[i])
                    check_one(s, w[k].t, i, want, got, w[k].ack_ms[i] < split ? &b : &a);
        *before = b;
        *after = a;
        if ((b.missing == 0 && a.missing == 0 && b.other == 0 && a.other == 0) || now_ms() > end)
            break;
        usleep(500 * 1000);
    }
    free(want);
    free(got);
}

static void print_verdict(const char *what, const verdict_t *v)
{
    int total = v->exact + v->missing + v->wrong + v->mismatch + v->other;
    printf("  %-34s %6d acknowledged: %6d exact (%.3f %%), %d missing, %d wrong bytes, %d "
           "checksum mismatch, %d other errors\n",
           what, total, v->exact, total ? 100.0 * v->exact / total : 0.0, v->missing, v->wrong,
           v->mismatch, v->other);
    fflush(stdout);
}

static void failover_under_load(int sync)
{
    sync_ack = sync;
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_%s_%d", sync ? "sync" : "async",
             (int)getpid());
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    mc_etcd_t *e = case_etcd_open();
    int leader = start_cluster(e, NMASTERS);
    printf("  leader: master %d at %s\n", leader, masters[leader].addr);

    static writer_t w[NWRITERS];
    pthread_t th[NWRITERS];
    atomic_int stop = 0;
    atomic_store(&kill_time, 0);
    atomic_store(&first_ack_after_kill, 0);
    for (int t = 0; t < NWRITERS; t++) {
        memset(&w[t], 0, sizeof(w[t]));
        w[t].t = t;
        w[t].stop = &stop;
        w[t].s = ha_client(1);
        assert_non_null(w[t].s);
    }
    for (int t = 0; t < NWRITERS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, writer_main, &w[t]), 0);

    sleep(3);
    /* An etcd member dies mid-run: the cluster keeps its quorum, everything goes on. */
    assert_int_equal(mc_etcd_cluster_kill(&ec, 0), 0);
    sleep(5);
    /* Acknowledgements are split at the moment the old leader is reaped: one that arrives while
     * SIGKILL is on its way still came from it. */
    uint64_t kill_sent = now_ms();
    int st = mc_master_stop(&masters[leader], SIGKILL);
    master_up[leader] = 0;
    uint64_t kill = now_ms();
    atomic_store(&kill_time, kill);
    int next = wait_leader(e, leader, 30000);
    assert_true(next >= 0);
    uint64_t elected = now_ms();
    /* Run on until puts succeed through the new leader for a few seconds. */
    uint64_t end = now_ms() + 40000;
    while (!atomic_load(&first_ack_after_kill) && now_ms() < end)
        usleep(20 * 1000);
    uint64_t first = atomic_load(&first_ack_after_kill);
    sleep(2);
    atomic_store(&stop, 1);
    for (int t = 0; t < NWRITERS; t++)
        pthread_join(th[t], NULL);
    assert_true(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(first > 0);
    printf("  failover: leader SIGKILLed; master %d elected after %.2f s, first acknowledged put "
           "after %.2f s (lease TTL 5 s)\n",
           next, (double)(elected - kill_sent) / 1000.0, (double)(first - kill_sent) / 1000.0);

    verdict_t b, a;
    mc_store_t *reader = ha_client(1);
    assert_non_null(reader);
    verify_all(reader, w, NWRITERS, kill, &b, &a);
    print_verdict("before the kill (checksums on):", &b);
    print_verdict("after the kill (checksums on):", &a);
    mc_store_free(reader);
    verdict_t b2, a2;
    reader = ha_client(0);
    assert_non_null(reader);
    verify_all(reader, w, NWRITERS, kill, &b2, &a2);
    print_verdict("before the kill (checksums off):", &b2);
    print_verdict("after the kill (checksums off):", &a2);
    mc_store_free(reader);
    for (int t = 0; t < NWRITERS; t++)
        mc_store_free(w[t].s);

    /* Never another object's bytes, in either mode. */
    assert_int_equal(b.wrong + b.mismatch + b2.wrong + b2.mismatch, 0);
    assert_int_equal(a.wrong + a.mismatch + a2.wrong + a2.mismatch, 0);
    int total = b.exact + b.missing + b.other;
    assert_true(total > 500);
    if (sync) /* acknowledged = in the log: all of it survives (the issue asks >= 99.9 %) */
        assert_true((double)b.exact >= 0.999 * total);
    /* async: what the leader acknowledged in its last commit window is missing (printed) */
    assert_int_equal(a.exact, a.exact + a.missing + a.other); /* after failover: all exact */

    stop_cluster();
}

/* --oplog_sync_ack=true (the default): every acknowledged put survives. */
static void failover_under_verified_load(void **state)
{
    (void)state;
    failover_under_load(1);
}

/* --oplog_sync_ack=false (upstream's behaviour): exact or missing, never wrong bytes. */
static void failover_async_ack_never_wrong(void **state)
{
    (void)state;
    failover_under_load(0);
    sync_ack = 1;
}

static void stalled_leader_is_deposed(void **state)
{
    (void)state;
    mc_etcd_t *e = case_etcd_open();
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_stall_%d", (int)getpid());
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    /* A short client TTL: the standby below idles longer than the 3 TTLs within which a leader
     * waits for owners to re-mount restored objects; a standby must not count that wait (it
     * did: the standby dropped every restored record before it ever took over). */
    extra_master_flag = "--client_ttl=2";
    int leader = start_cluster(e, 2);
    extra_master_flag = "--client_ttl=10";
    mc_store_t *s = ha_client(1);
    assert_non_null(s);
    uint8_t *buf = malloc(MAX_VALUE), *got = malloc(MAX_VALUE);
    char key[64];
    for (int i = 0; i < 200; i++) {
        size_t len = value_of(100, i, buf);
        snprintf(key, sizeof(key), "ha-100-%d", i);
        assert_int_equal(mc_store_put(s, key, buf, len, NULL), 0);
    }
    sleep(7); /* the standby idles > 3 x client TTL with the records applied */
    /* A client bound to the old leader's address directly (no etcd). */
    mc_store_t *direct = mc_test_client(&masters[leader], 1, 0);
    assert_non_null(direct);
    assert_int_equal(mc_store_exist(direct, "ha-100-0"), 1);

    assert_int_equal(mc_proc_freeze(masters[leader].pid, 5000), 0);
    uint64_t stopped = now_ms();
    int next = wait_leader(e, leader, 30000);
    assert_true(next >= 0);
    printf("  stalled leader: master %d elected %.2f s after SIGSTOP\n", next,
           (double)(now_ms() - stopped) / 1000.0);
    /* Puts through the new leader (the follower client switches within a ping period). */
    uint64_t end = now_ms() + 20000;
    int ok = -1;
    size_t len = value_of(101, 0, buf);
    while (now_ms() < end && (ok = mc_store_put(s, "ha-101-0", buf, len, NULL)) != 0)
        usleep(100 * 1000);
    assert_int_equal(ok, 0);
    printf("  stalled leader: first put through the new leader %.2f s after SIGSTOP\n",
           (double)(now_ms() - stopped) / 1000.0);

    /* Stopped the whole time: the new leader was elected without it, not after it gave up. */
    assert_int_equal(mc_proc_is_frozen(masters[leader].pid), 1);
    assert_int_equal(mc_proc_thaw(masters[leader].pid), 0);
    /* Its very first answer after the stall: not "serving" (its gate already refuses). Its
     * metrics port may answer nothing for a moment first: a deposed master restarts its
     * services as a standby, and a request can meet that (seen under ASan on a loaded host). */
    char *ha_state = NULL;
    for (uint64_t until = now_ms() + 15000; !ha_state && now_ms() < until;) {
        ha_state = mc_http_get(masters[leader].metrics_port, "/ha_status");
        if (!ha_state)
            usleep(50 * 1000);
    }
    printf("  stalled leader resumed: /ha_status \"%s\"\n", ha_state ? ha_state : "(none)");
    assert_non_null(ha_state);
    assert_null(strstr(ha_state, "serving"));
    free(ha_state);
    /* The old leader runs again: whatever it still had queued, it answers nothing now. */
    len = value_of(102, 0, buf);
    int rc = mc_store_put(direct, "ha-102-0", buf, len, NULL);
    printf("  put straight to the deposed leader: %d (%s)\n", rc, mc_error_name(rc));
    assert_int_not_equal(rc, 0);
    assert_int_equal(mc_store_exist(s, "ha-102-0"), 0);
    mc_store_free(direct);

    /* Nothing written before the stall is lost or changed. */
    for (int i = 0; i < 200; i++) {
        size_t l = value_of(100, i, buf);
        snprintf(key, sizeof(key), "ha-100-%d", i);
        int64_t n = -1;
        uint64_t until = now_ms() + 15000;
        while ((n = mc_store_get(s, key, got, MAX_VALUE)) == MC_ERR_OBJECT_NOT_FOUND &&
               now_ms() < until)
            usleep(200 * 1000);
        assert_int_equal(n, (int64_t)l);
        assert_memory_equal(got, buf, l);
    }
    /* The old leader came back as a standby: the view still names the new one. */
    int64_t v;
    sleep(2);
    assert_int_equal(leader_index(e, &v), next);
    free(buf);
    free(got);
    mc_store_free(s);
    stop_cluster();
}

typedef struct write_arg {
    mc_store_t *s;
    const char *key;
    int remove; /* else upsert */
    const uint8_t *value;
    size_t len;
    int rc;
} write_arg_t;

static void *write_main(void *arg)
{
    write_arg_t *a = arg;
    a->rc = a->remove ? mc_store_remove(a->s, a->key, 1)
                      : mc_store_upsert(a->s, a->key, a->value, a->len, NULL);
    return NULL;
}

/* The index of the leader once it is stopped (a failpoint stopped it), or -1 after ms. */
static int wait_leader_stopped(int ms)
{
    for (uint64_t end = now_ms() + (uint64_t)ms; now_ms() < end; usleep(20 * 1000)) {
        for (int i = 0; i < NMASTERS; i++)
            if (master_up[i] && mc_proc_is_frozen(masters[i].pid) == 1)
                return i;
    }
    return -1;
}

/* Runs an upsert or remove of key with s while the leader stops itself (a failpoint) after
 * committing it and before answering; the call is retried at the next leader. Returns its code
 * and leaves the stopped master killed. */
static int write_across_a_stopped_answer(mc_etcd_t *e, write_arg_t *a)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_main, a), 0);
    int stopped = wait_leader_stopped(20000);
    assert_true(stopped >= 0);
    assert_true(wait_leader(e, stopped, 30000) >= 0); /* elected while the call waits */
    pthread_join(t, NULL);
    mc_master_stop(&masters[stopped], SIGKILL);
    master_up[stopped] = 0;
    return a->rc;
}

/* A leader commits an upsert (then a remove) and stops before its answer leaves; the client's
 * retry reaches the new leader, which finds the work already done. The answer is the true
 * outcome (0) or "unknown" (RPC_FAIL), never a definite error for a write that took effect:
 * before, the upsert answered OBJECT_NOT_FOUND and the remove too. */
static void retried_write_answers_its_true_outcome(void **state)
{
    (void)state;
    mc_etcd_t *e = case_etcd_open();
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_retry_%d", (int)getpid());
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    /* Master 0 leads first and stops at its first UpsertEnd answer; the others at a Remove's. */
    setenv("MC_FAILPOINTS", "rpc.held_reply.UpsertEnd=stop:1", 1);
    assert_int_equal(start_master(0), 0);
    unsetenv("MC_FAILPOINTS");
    assert_int_equal(wait_leader(e, -1, 20000), 0);
    setenv("MC_FAILPOINTS", "rpc.held_reply.Remove=stop:1", 1);
    for (int i = 1; i < NMASTERS; i++)
        assert_int_equal(start_master(i), 0);
    unsetenv("MC_FAILPOINTS");
    const char *flags[] = {NULL};
    for (nholders = 0; nholders < 2; nholders++)
        assert_int_equal(
            mc_holder_start(&holders[nholders], &ha_master, "512MB", flags, NULL, 30000), 0);
    mc_store_t *s = ha_client(1);
    assert_non_null(s);
    uint8_t *v1 = malloc(MAX_VALUE), *v2 = malloc(MAX_VALUE), *got = malloc(MAX_VALUE);
    size_t l1 = value_of(300, 1, v1), l2 = value_of(300, 2, v2);
    assert_int_equal(mc_test_put_retry(s, "ha-retry", v1, l1, NULL, 15000), 0);

    write_arg_t up = {.s = s, .key = "ha-retry", .value = v2, .len = l2};
    int rc = write_across_a_stopped_answer(e, &up);
    int64_t n = -1;
    for (uint64_t end = now_ms() + 15000; now_ms() < end; usleep(200 * 1000))
        if ((n = mc_store_get(s, "ha-retry", got, MAX_VALUE)) >= 0)
            break;
    printf("  upsert committed, its leader stopped before answering: %d (%s); the key reads "
           "%s\n",
           rc, mc_error_name(rc),
           n == (int64_t)l2 && !memcmp(got, v2, l2)   ? "the new value"
           : n == (int64_t)l1 && !memcmp(got, v1, l1) ? "the old value"
                                                      : "neither");
    assert_true(rc == 0 || rc == MC_ERR_RPC_FAIL);
    assert_int_equal(n, (int64_t)l2); /* committed: the new value */
    assert_memory_equal(got, v2, l2);

    write_arg_t rm = {.s = s, .key = "ha-retry", .remove = 1};
    rc = write_across_a_stopped_answer(e, &rm);
    n = mc_store_get(s, "ha-retry", got, MAX_VALUE);
    printf("  remove committed, its leader stopped before answering: %d (%s); the key then "
           "answers %lld\n",
           rc, mc_error_name(rc), (long long)n);
    assert_true(rc == 0 || rc == MC_ERR_RPC_FAIL);
    assert_int_equal(n, MC_ERR_OBJECT_NOT_FOUND);
    free(v1);
    free(v2);
    free(got);
    mc_store_free(s);
    stop_cluster();
}

static void planned_restart_of_every_master(void **state)
{
    (void)state;
    mc_etcd_t *e = case_etcd_open();
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_restart_%d", (int)getpid());
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    start_cluster(e, 2);
    mc_store_t *s = ha_client(1);
    assert_non_null(s);
    uint8_t *buf = malloc(MAX_VALUE), *got = malloc(MAX_VALUE);
    char key[64];
    const int n = 2000;
    for (int i = 0; i < n; i++) {
        size_t len = value_of(200, i, buf);
        snprintf(key, sizeof(key), "ha-200-%d", i);
        assert_int_equal(mc_store_put(s, key, buf, len, NULL), 0);
    }
    for (int i = 0; i < n; i += 10) { /* some removed: they must stay removed */
        snprintf(key, sizeof(key), "ha-200-%d", i);
        assert_int_equal(mc_store_remove(s, key, 1), 0);
    }
    /* Stop every master (a planned maintenance), then start them all again. */
    for (int i = 0; i < 2; i++) {
        int st = mc_master_stop(&masters[i], SIGTERM);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        master_up[i] = 0;
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(start_master(i), 0);
    assert_true(wait_leader(e, -1, 20000) >= 0);
    int exact = 0, removed = 0;
    for (int i = 0; i < n; i++) {
        size_t len = value_of(200, i, buf);
        snprintf(key, sizeof(key), "ha-200-%d", i);
        int64_t r;
        uint64_t until = now_ms() + 15000;
        /* Retried while the answer is an error of the transition (a leader handing over), or
         * a miss of a kept key (its holder re-mounts within a ping or two). */
        while (((r = mc_store_get(s, key, got, MAX_VALUE)) < 0 && r != MC_ERR_OBJECT_NOT_FOUND) ||
               (r == MC_ERR_OBJECT_NOT_FOUND && i % 10 != 0)) {
            if (now_ms() >= until)
                break;
            usleep(200 * 1000);
        }
        if (i % 10 == 0) {
            removed += r == MC_ERR_OBJECT_NOT_FOUND;
        } else {
            assert_int_equal(r, (int64_t)len);
            exact += !memcmp(got, buf, len);
        }
    }
    printf("  planned restart of every master: %d/%d exact, %d/%d removed stay removed\n", exact,
           n - n / 10, removed, n / 10);
    assert_int_equal(exact, n - n / 10);
    assert_int_equal(removed, n / 10);
    free(buf);
    free(got);
    mc_store_free(s);
    stop_cluster();
}

/*
 * A remove that reaches a new leader before the holders re-mounted used to
 * be answered -704 and forget the hidden restored record without logging a DEL; the log kept
 * naming the key at memory the leader then handed to new puts, and the next failover brought
 * the removed keys back over those puts' bytes (105 of 200 read another object's bytes, 105 of
 * 600 acknowledged puts lost). Now such a remove answers -1010 (retry) and touches nothing.
 */
static void remove_before_remount_loses_nothing(void **state)
{
    (void)state;
    mc_etcd_t *e = case_etcd_open();
    sync_ack = 1;
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_rm_%d", (int)getpid());
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    int leader = start_cluster(e, NMASTERS);
    mc_store_t *s = ha_client(0); /* checksums off: a wrong byte would show */
    assert_non_null(s);
    uint8_t *buf = malloc(MAX_VALUE), *got = malloc(MAX_VALUE);
    char key[64];
    const int nk = 200, nf = 600;
    for (int i = 0; i < nk; i++) {
        size_t len = value_of(300, i, buf);
        snprintf(key, sizeof(key), "ha-300-%d", i);
        assert_int_equal(mc_store_put(s, key, buf, len, NULL), 0);
    }
    /* The holders cannot re-mount at the next leader for a while. */
    for (int h = 0; h < nholders; h++)
        assert_int_equal(mc_proc_freeze(holders[h].proc.pid, 5000), 0);
    mc_master_stop(&masters[leader], SIGKILL);
    master_up[leader] = 0;
    int next = wait_leader(e, leader, 30000);
    assert_true(next >= 0);
    int removed = 0, retry = 0;
    uint64_t end = now_ms() + 15000;
    for (int i = 0; i < nk; i++) {
        snprintf(key, sizeof(key), "ha-300-%d", i);
        int rc;
        while ((rc = mc_store_remove(s, key, 1)) == MC_ERR_RPC_FAIL && now_ms() < end)
            usleep(100 * 1000);
        removed += rc == 0;
        retry += rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    for (int h = 0; h < nholders; h++) {
        assert_int_equal(mc_proc_is_frozen(holders[h].proc.pid), 1);
        assert_int_equal(mc_proc_thaw(holders[h].proc.pid), 0);
    }
    /* No holder could re-mount at the new leader during the removes (all were stopped
     * throughout): each remove must have been answered "retry", none done nor -704. */
    printf("  remove before re-mount: %d of %d answered retry (-1010), %d removed\n", retry, nk,
           removed);
    assert_int_equal(removed, 0);
    assert_int_equal(retry, nk);
    /* New puts at the new leader, once the holders re-mounted there. */
    int acked[600] = {0};
    end = now_ms() + 20000;
    for (int i = 0; i < nf; i++) {
        size_t len = value_of(301, i, buf);
        snprintf(key, sizeof(key), "ha-301-%d", i);
        int rc;
        while ((rc = mc_store_put(s, key, buf, len, NULL)) != 0 && now_ms() < end)
            usleep(100 * 1000);
        acked[i] = rc == 0;
    }
    /* Another failover: the log must name no memory that holds another object. */
    mc_master_stop(&masters[next], SIGKILL);
    master_up[next] = 0;
    assert_true(wait_leader(e, next, 30000) >= 0);
    verdict_t k = {0}, f = {0};
    end = now_ms() + 20000;
    for (;;) {
        memset(&k, 0, sizeof(k));
        memset(&f, 0, sizeof(f));
        for (int i = 0; i < nk; i++)
            check_one(s, 300, i, buf, got, &k);
        for (int i = 0; i < nf; i++)
            if (acked[i])
                check_one(s, 301, i, buf, got, &f);
        if ((f.missing == 0 && f.other == 0 && k.other == 0) || now_ms() > end)
            break;
        usleep(500 * 1000);
    }
    printf("  remove before re-mount: %d removed, %d answered retry (-1010); after the next "
           "failover the keys read %d exact, %d missing, %d wrong; the %d acknowledged puts "
           "%d exact, %d missing, %d wrong\n",
           removed, retry, k.exact, k.missing, k.wrong + k.mismatch, f.exact + f.missing + f.wrong,
           f.exact, f.missing, f.wrong + f.mismatch);
    assert_int_equal(k.wrong + k.mismatch + f.wrong + f.mismatch, 0);
    assert_int_equal(f.missing + f.other, 0);
    assert_true(f.exact > 0);
    free(buf);
    free(got);
    mc_store_free(s);
    stop_cluster();
}

/*
 * The stale writer: a put allocated by a leader that then died, its writer stalled between
 * PutStart and the transfer, must not write over objects the new leader placed in the same
 * memory (it did: 8 of 400 acknowledged objects once held the stale writer's bytes). A put's
 * transfer carries the segment's mount epoch, and the holder, re-mounted at the new leader,
 * refuses it — over tcp at the holder; over rdma at the writer, which reads the holder's fence
 * rules once it reconnected to the worker the re-mount put in place (before, the rdma writer's
 * bytes landed). test_fence_ha has the same writer over shm.
 */
static void stale_writer_case(const char *protocol)
{
    mc_etcd_t *e = case_etcd_open();
    sync_ack = 1;
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_stale_%d", (int)getpid());
    setenv("MC_STORE_CLUSTER_ID", cluster_id, 1);
    const char *const rdma_flags[] = {"--protocol=rdma", NULL};
    const char *const no_shm[] = {"MC_DISABLE_SHM=1", NULL};
    if (!strcmp(protocol, "rdma")) {
        holder_flags = rdma_flags;
        holder_env = no_shm;
    }
    int leader = start_cluster(e, 2);
    /* The stale writer: a store_rw that stops itself right after its PutStart. */
    mc_proc_t w;
    char *argv[] = {RW_BIN, ha_addr, (char *)protocol, NULL};
    setenv("MC_FAILPOINTS", "put.after_start=stop:1", 1);
    setenv("MC_DISABLE_SHM", "1", 1);
    int rc = mc_proc_start(&w, argv, "READY", 20000);
    unsetenv("MC_FAILPOINTS");
    unsetenv("MC_DISABLE_SHM");
    assert_int_equal(rc, 0);
    mc_cluster_track(w.pid);
    const size_t vsize = 1u << 20;
    char line[128];
    snprintf(line, sizeof(line), "put stale-0 %zu 7\n", vsize);
    assert_int_equal(mc_proc_send(&w, line), 0);
    uint64_t deadline = now_ms() + 30000;
    int st = 0;
    pid_t waited;
    while ((waited = waitpid(w.pid, &st, WNOHANG | WUNTRACED)) == 0 && now_ms() < deadline)
        usleep(10000);
    assert_int_equal(waited, w.pid); /* else st was never written */
    assert_true(WIFSTOPPED(st));

    mc_master_stop(&masters[leader], SIGKILL);
    master_up[leader] = 0;
    int next = wait_leader(e, leader, 30000);
    assert_true(next >= 0);
    /* Both holders re-mounted at the new leader (a fence each): only then is the stale put's
     * memory handed out again, and its holder at a new epoch — else the case proves nothing. */
    deadline = now_ms() + 30000;
    while (mc_master_metric(&masters[next], "master_segment_count") < nholders) {
        assert_true(now_ms() < deadline);
        usleep(50 * 1000);
    }
    /* New objects at the new leader, in the memory the stale put was given. */
    mc_store_t *s = ha_client(0);
    assert_non_null(s);
    uint8_t *buf = malloc(vsize), *got = malloc(vsize);
    const int n = 64;
    char key[64];
    deadline = now_ms() + 20000;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "ha-400-%d", i);
        memset(buf, 0x40 + i, vsize);
        while ((rc = mc_store_put(s, key, buf, vsize, NULL)) != 0 && now_ms() < deadline)
            usleep(100 * 1000);
        assert_int_equal(rc, 0);
    }
    /* The stale writer resumes and sends its bytes. */
    kill(w.pid, SIGCONT);
    char out[256];
    assert_int_equal(mc_proc_read_line(&w, out, sizeof(out), 60000), 0);
    printf("  stale writer resumed: \"%s\"\n", out);
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "ha-400-%d", i);
        memset(buf, 0x40 + i, vsize);
        int64_t r = mc_store_get(s, key, got, vsize);
        assert_int_equal(r, (int64_t)vsize);
        wrong += memcmp(got, buf, vsize) != 0;
    }
    printf("  stale %s writer: %d of %d objects of the new leader hold other bytes\n", protocol,
           wrong, n);
    assert_int_equal(wrong, 0);
    mc_proc_stop(&w, SIGKILL, 5000);
    free(buf);
    free(got);
    mc_store_free(s);
    stop_cluster();
}

static void stale_writer_cannot_overwrite(void **state)
{
    (void)state;
    stale_writer_case("tcp");
}

/* The same over rdma (UCX; its tcp transport on a host without an RDMA device). */
static void stale_rdma_writer_cannot_overwrite(void **state)
{
    (void)state;
#ifdef MC_HAVE_RDMA
    stale_writer_case("rdma");
#else
    skip(); /* built without UCX: there is no rdma transport to test */
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(failover_under_verified_load, test_teardown),
        cmocka_unit_test_teardown(failover_async_ack_never_wrong, test_teardown),
        cmocka_unit_test_teardown(stalled_leader_is_deposed, test_teardown),
        cmocka_unit_test_teardown(planned_restart_of_every_master, test_teardown),
        cmocka_unit_test_teardown(remove_before_remount_loses_nothing, test_teardown),
        cmocka_unit_test_teardown(stale_writer_cannot_overwrite, test_teardown),
        cmocka_unit_test_teardown(stale_rdma_writer_cannot_overwrite, test_teardown),
        cmocka_unit_test_teardown(retried_write_answers_its_true_outcome, test_teardown),
    };
    if (getenv("MC_TEST_FILTER")) /* e.g. MC_TEST_FILTER=stalled* */
        cmocka_set_test_filter(getenv("MC_TEST_FILTER"));
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
