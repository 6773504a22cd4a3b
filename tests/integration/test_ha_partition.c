/*
 * test_ha_partition.c — no split brain (docs/ha.md): a leader cut off from etcd by a network
 * partition stops accepting writes before another master can be elected.
 *
 *        root namespace                                     namespace mchp<pid>
 *   etcd x3 (127.0.0.1 and 10.202.N.1)   <== veth ==>   mooncake_master M1 (10.202.N.2), the leader
 *   mooncake_master M2 (127.0.0.1)                         mooncake_client holder H (10.202.N.2)
 *                                                          store_rw W  -> M1 directly
 *
 * M1 leads first; H mounts its segment on M1 and W writes through M1 (both bypass etcd, so
 * they stay on M1's side of the cut). Then the link goes down: M1 can no longer renew its lease,
 * etcd lets it expire and M2 wins. W keeps putting through M1 all along; no put sent after M2 was
 * elected may succeed (it would be a write only the deposed leader knows). Before the cut, W's
 * puts succeed (the path works, so the failures after it are the gate's doing).
 *
 * The masters run without the operation log: with it (and --oplog_sync_ack) a cut-off leader
 * could not acknowledge anything anyway, since its log cannot reach etcd; without it, only the
 * serving deadline (ha.h) stands between the deposed leader and a split brain, which is what
 * this test checks. Puts inside the lease still succeed after the cut (printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster.h"
#include "etcd.h"
#include "etcd_cluster.h"
#include "master_view.h"
#include "netns.h"
#include "proc.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"
#define CLIENT_BIN MC_BUILD_DIR "/tools/mooncake_client"
#define RW_BIN MC_BUILD_DIR "/tests/integration/store_rw"

static mc_netns_t net;

static mc_etcd_cluster_t ec;
static mc_proc_t m1, h1, w1;
static mc_master_t m2;
static char cluster_id[64], logdir[300];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void net_destroy(void)
{
    mc_netns_destroy(&net);
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    const char *why = mc_netns_create(&net, "mchp", 202);
    if (why) {
        fprintf(stderr, "test_ha_partition: %s\n", why);
        net_destroy();
        return -1;
    }
    if (mc_etcd_cluster_start_at(&ec, 3, net.root_ip) != 0) {
        net_destroy();
        return -1;
    }
    snprintf(cluster_id, sizeof(cluster_id), "test_ha_part_%d", (int)getpid());
    snprintf(logdir, sizeof(logdir), "%s", ec.dir);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    mc_etcd_cluster_destroy(&ec);
    net_destroy();
    return 0;
}

/* The leader's address in the view, into out; 0 or -1. */
static int view(mc_etcd_t *e, char *out, size_t cap)
{
    int64_t v;
    return mc_master_view_read(e, cluster_id, out, cap, &v) == 0 ? 0 : -1;
}

static int wait_view(mc_etcd_t *e, const char *want, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    char cur[128];
    while (now_ms() < end) {
        if (view(e, cur, sizeof(cur)) == 0 && !strcmp(cur, want))
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

/* One put through store_rw: its rc (0, or a store error). */
static int rw_put(int i)
{
    char line[128];
    snprintf(line, sizeof(line), "put part-%d 4096 %d\n", i, i + 1);
    if (mc_proc_send(&w1, line) != 0)
        return -99999;
    char out[256];
    if (mc_proc_read_line(&w1, out, sizeof(out), 30000) != 0)
        return -99998;
    int rc = -99997;
    sscanf(out, "PUT %d", &rc);
    return rc;
}

static void partitioned_leader_accepts_no_put(void **state)
{
    (void)state;
    mc_etcd_t *e;
    assert_int_equal(mc_etcd_create(ec.endpoints, 2000, &e), 0);

    /* M1 in the namespace, reaching etcd over the veth. */
    char ns_eps[256] = "";
    for (int i = 0; i < ec.n; i++) {
        size_t len = strlen(ns_eps);
        snprintf(ns_eps + len, sizeof(ns_eps) - len, "%s%s:%d", i ? ";" : "", net.root_ip,
                 ec.client_port[i]);
    }
    int p1 = mc_test_free_port();
    char m1_addr[64], ep[300], cid[100], rpc[32], addr[64], metrics[32], log1[300];
    snprintf(m1_addr, sizeof(m1_addr), "%s:%d", net.ns_ip, p1);
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", ns_eps);
    snprintf(cid, sizeof(cid), "--cluster_id=%s", cluster_id);
    snprintf(rpc, sizeof(rpc), "--rpc_port=%d", p1);
    snprintf(addr, sizeof(addr), "--rpc_address=%s", net.ns_ip);
    snprintf(metrics, sizeof(metrics), "--metrics_port=%d", mc_test_free_port());
    snprintf(log1, sizeof(log1), "/tmp/mc_ha_partition_master1_%d.log", (int)getpid());
    char *m1_argv[] = {net.ip_bin, "netns", "exec", net.ns, MASTER_BIN, "--enable_ha=true",
                       ep,         cid,     rpc,    addr,   metrics,    "--metrics_host=127.0.0.1",
                       NULL};
    assert_int_equal(mc_proc_start_logged(&m1, m1_argv, log1, "Master service started", 20000), 0);
    mc_cluster_track(m1.pid);
    assert_int_equal(wait_view(e, m1_addr, 20000), 0);

    /* The holder and the writer, in the namespace, bound to M1 directly. */
    char master_flag[96], host_flag[64], port_flag[32];
    snprintf(master_flag, sizeof(master_flag), "--master_server_address=%s", m1_addr);
    snprintf(host_flag, sizeof(host_flag), "--host=%s", net.ns_ip);
    snprintf(port_flag, sizeof(port_flag), "--port=%d", mc_test_free_port());
    char *h_argv[] = {net.ip_bin,
                      "netns",
                      "exec",
                      net.ns,
                      CLIENT_BIN,
                      master_flag,
                      "--metadata_server=P2PHANDSHAKE",
                      host_flag,
                      port_flag,
                      "--global_segment_size=64MB",
                      NULL};
    assert_int_equal(mc_proc_start(&h1, h_argv, "mooncake_client ready: segment ", 30000), 0);
    mc_cluster_track(h1.pid);
    char *w_argv[] = {net.ip_bin, "netns", "exec", net.ns, RW_BIN, m1_addr, NULL};
    assert_int_equal(mc_proc_start(&w1, w_argv, "READY", 20000), 0);
    mc_cluster_track(w1.pid);
    for (int i = 0; i < 5; i++)
        assert_int_equal(rw_put(i), 0); /* the path works before the cut */

    /* M2 in the root namespace: a standby. */
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", ec.endpoints);
    const char *extra[] = {"--enable_ha=true", ep, cid, NULL};
    assert_int_equal(mc_master_start(&m2, 0, extra), 0);

    /* The cut. */
    uint64_t cut = now_ms();
    assert_int_equal(mc_netns_link_set(&net, 0), 0);
    uint64_t elected = 0, last_ok = 0, end = cut + 30000;
    int after_election = 0, ok_after_election = 0, i = 100;
    while (now_ms() < end) {
        if (!elected && wait_view(e, m2.addr, 1) == 0)
            elected = now_ms();
        uint64_t sent = now_ms();
        int rc = rw_put(i++);
        if (rc == 0)
            last_ok = sent;
        if (elected && sent > elected) {
            after_election++;
            ok_after_election += rc == 0;
        }
        if (elected && now_ms() > elected + 3000 && after_election >= 10)
            break;
        usleep(50 * 1000);
    }
    printf("  partition: M2 elected %.2f s after the cut; M1's last accepted put was sent %.2f s "
           "after it; %d puts sent to M1 after the election, %d accepted\n",
           elected ? (double)(elected - cut) / 1000.0 : -1.0,
           last_ok > cut ? (double)(last_ok - cut) / 1000.0 : 0.0, after_election,
           ok_after_election);
    assert_true(elected > 0);
    assert_true(after_election >= 10);
    assert_int_equal(ok_after_election, 0);
    assert_true(last_ok < elected);

    /* The link back: M1 comes back as a standby; the view still names M2. */
    assert_int_equal(mc_netns_link_set(&net, 1), 0);
    sleep(2);
    char cur[128];
    assert_int_equal(view(e, cur, sizeof(cur)), 0);
    assert_string_equal(cur, m2.addr);
    assert_int_not_equal(rw_put(i++), 0);

    mc_proc_stop(&w1, SIGKILL, 5000);
    mc_proc_stop(&h1, SIGTERM, 10000);
    mc_proc_stop(&m1, SIGTERM, 10000);
    mc_master_stop(&m2, SIGTERM);
    mc_etcd_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(partitioned_leader_accepts_no_put),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
