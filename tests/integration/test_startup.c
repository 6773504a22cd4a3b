/*
 * test_startup.c — start-up as deployments do it, with real processes:
 *
 *  - a mooncake_client started before its master waits for it (one log line), and serves once the
 *    master comes up; with --master_wait_timeout=1 and no master it fails after about a second
 *    with the same clear message as before;
 *  - a client whose published segment address other hosts cannot reach says so at start-up:
 *    a loopback --host with a remote master, or a --host that is not the address this host reaches
 *    the master from. The "remote" master runs in a network namespace created here (veth pair
 *    10.203.N.0/24, removed at the end, also after a failed assertion).
 *
 * Every step waits for a state (a log line, a ready line, an exit), never for time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster.h"
#include "netns.h"
#include "mooncake/store.h"
#include "proc.h"

#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"
#define CLIENT_BIN MC_BUILD_DIR "/tools/mooncake_client"

static mc_netns_t net;

static int count_lines(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), fp))
        n += strstr(line, needle) != NULL;
    fclose(fp);
    return n;
}

static void log_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "/tmp/mc_startup_%d_%s.log", (int)getpid(), name);
}

/* A client started before its master waits, then serves once the master is up. */
static void test_client_waits_for_master(void **state)
{
    (void)state;
    int port = mc_test_free_port();
    char master[64], host_port[32], log[128];
    snprintf(master, sizeof(master), "--master_server_address=127.0.0.1:%d", port);
    snprintf(host_port, sizeof(host_port), "--port=%d", mc_test_free_port());
    log_path(log, sizeof(log), "waiting");
    char *argv[] = {CLIENT_BIN,
                    master,
                    "--metadata_server=P2PHANDSHAKE",
                    "--host=127.0.0.1",
                    host_port,
                    "--global_segment_size=16MB",
                    NULL};
    mc_proc_t client;
    /* Ready for this test once it says it is waiting for the master (old code: exits at once). */
    assert_int_equal(mc_proc_start_logged(&client, argv, log, "not reachable", 20000), 0);
    mc_cluster_track(client.pid);

    mc_master_t m;
    assert_int_equal(mc_master_start_on(&m, port, 0, NULL), 0);
    char line[512] = "";
    assert_int_equal(mc_proc_read_line(&client, line, sizeof(line), 30000), 0);
    assert_non_null(strstr(line, "mooncake_client ready: segment "));
    assert_int_equal(count_lines(log, "not reachable"), 1); /* the wait is logged once */

    /* It serves: an object put by another client lands in its segment and reads back. */
    mc_store_t *s = mc_test_client(&m, 1, 0);
    assert_non_null(s);
    char v[4096], got[4096];
    memset(v, 0x3c, sizeof(v));
    mc_replicate_config_t rc = MC_REPLICATE_CONFIG_INIT;
    assert_int_equal(mc_store_put(s, "startup/k", v, sizeof(v), &rc), 0);
    assert_int_equal(mc_store_get(s, "startup/k", got, sizeof(got)), (int64_t)sizeof(got));
    assert_memory_equal(v, got, sizeof(v));
    mc_store_free(s);

    mc_cluster_untrack(client.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&client, SIGTERM, 10000)));
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    unlink(log);
}

/* With a bound and no master: fails after the bound with the clear message. */
static void test_client_wait_is_bounded(void **state)
{
    (void)state;
    char master[64], host_port[32];
    snprintf(master, sizeof(master), "--master_server_address=127.0.0.1:%d", mc_test_free_port());
    snprintf(host_port, sizeof(host_port), "--port=%d", mc_test_free_port());
    char *argv[] = {CLIENT_BIN,
                    master,
                    "--metadata_server=P2PHANDSHAKE",
                    "--host=127.0.0.1",
                    host_port,
                    "--global_segment_size=16MB",
                    "--master_wait_timeout=1",
                    NULL};
    char log[128];
    log_path(log, sizeof(log), "bounded");
    mc_proc_t client;
    /* The child exits before any ready marker: start_logged reports that as -1 (reaped). */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(mc_proc_start_logged(&client, argv, log, "mooncake_client ready", 30000), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(secs >= 0.9); /* it did wait ... */
    assert_int_equal(count_lines(log, "not reachable"), 1);
    assert_int_equal(count_lines(log, "cannot reach mooncake_master"), 1); /* ... then said so */
    unlink(log);
}

/*
 * Starts mooncake_client (stderr to `log`) and returns 0 once it serves: a SIGTERM before then
 * makes it exit 1 on purpose (it has not finished setting up), so a test that stops it as soon
 * as some earlier log line appears can fail for nothing. Serving is its "mooncake_client ready"
 * line and then its main thread asleep in the futex of the semaphore it waits on for a signal
 * (/proc/PID/syscall): it marks itself ready just before that wait. -1 when either is missing.
 */
static int start_serving_client(mc_proc_t *p, char *const argv[], const char *log)
{
    if (mc_proc_start_logged(p, argv, log, "mooncake_client ready", 30000) != 0)
        return -1;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/syscall", (int)p->pid);
    for (int waited = 0; waited < 10000; waited += 5) {
        FILE *f = fopen(path, "r");
        long nr = -1;
        if (f && fscanf(f, "%ld", &nr) != 1)
            nr = -1;
        if (f)
            fclose(f);
        if (nr == SYS_futex)
            return 0;
        usleep(5000);
    }
    fprintf(stderr, "mooncake_client %d printed its ready line but never waited for a signal\n",
            (int)p->pid);
    mc_proc_stop(p, SIGKILL, 5000);
    return -1;
}

/* ---- the cluster's distributed root ------------------------------------------------------- */

/* Starts a distributed-offload holder with MOONCAKE_DISTRIBUTED_ROOT_DIR=root; 0 when ready. */
static int start_dfs_holder(mc_proc_t *p, const mc_master_t *m, const char *root, const char *log)
{
    char master[96], port_flag[32], root_env[600];
    snprintf(master, sizeof(master), "--master_server_address=%s", m->addr);
    snprintf(port_flag, sizeof(port_flag), "--port=%d", mc_test_free_port());
    snprintf(root_env, sizeof(root_env), "MOONCAKE_DISTRIBUTED_ROOT_DIR=%s", root);
    const char *env[] = {"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed",
                         "MOONCAKE_DISTRIBUTED_FS_TYPE=posix", root_env, NULL};
    char *argv[] = {CLIENT_BIN,
                    master,
                    "--metadata_server=P2PHANDSHAKE",
                    "--host=127.0.0.1",
                    port_flag,
                    "--global_segment_size=16MB",
                    NULL};
    mc_env_apply(env, 1);
    int rc = start_serving_client(p, argv, log);
    mc_env_apply(env, 0);
    return rc;
}

/*
 * The guide's multi-host example: the master is given --distributed-root-dir A, a client another
 * root B. A's clients must not be locked out by B registering first: B is refused, its log naming
 * both paths; a client on A (written with a trailing slash) is served.
 */
static void test_client_root_must_match_the_masters(void **state)
{
    (void)state;
    char a[128], b[128], cmd[320], flag[160], log[128];
    snprintf(a, sizeof(a), "/tmp/mc_startup_%d_rootA", (int)getpid());
    snprintf(b, sizeof(b), "/tmp/mc_startup_%d_rootB", (int)getpid());
    snprintf(cmd, sizeof(cmd), "mkdir -p %s %s", a, b);
    assert_int_equal(mc_sh("%s", cmd), 0);
    snprintf(flag, sizeof(flag), "--distributed-root-dir=%s", a);
    const char *extra[] = {"--offload-backend=distributed", "--distributed-fs-type=posix", flag,
                           NULL};
    mc_master_t m;
    assert_int_equal(mc_master_start(&m, 1, extra), 0);

    mc_proc_t wrong;
    log_path(log, sizeof(log), "rootB");
    assert_int_equal(start_dfs_holder(&wrong, &m, b, log), -1); /* exits: refused */
    char both[512];
    snprintf(both, sizeof(both),
             "MOONCAKE_DISTRIBUTED_ROOT_DIR is %s but the master's "
             "--distributed-root-dir is %s",
             b, a);
    assert_int_equal(count_lines(log, both), 1);
    unlink(log);

    mc_proc_t right;
    char a_slash[160];
    snprintf(a_slash, sizeof(a_slash), "%s/", a);
    log_path(log, sizeof(log), "rootA");
    assert_int_equal(start_dfs_holder(&right, &m, a_slash, log), 0);
    assert_true(mc_clean_exit(mc_proc_stop(&right, SIGTERM, 10000)));
    unlink(log);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    assert_int_equal(mc_sh("rm -rf %s %s", a, b), 0);
}

/* ---- published addresses ------------------------------------------------------------------ */

static void net_destroy(void)
{
    mc_netns_destroy(&net);
}

/* The namespace (netns.h; the master runs there) and a secondary address, 10.203.S.5, on the
 * root end of the pair: an address of this host that is not the one it reaches the master from. */
static int net_create(void)
{
    const char *why = mc_netns_create(&net, "mcsu", 203);
    if (why) {
        fprintf(stderr, "test_startup: %s\n", why);
        return -1;
    }
    return mc_sh("%s addr add 10.203.%d.5/24 dev %s", net.ip_bin, net.subnet, net.veth_root);
}

/* Starts a client publishing at `host` against master_addr; returns its warning line count. */
static int client_warnings(const char *master_addr, const char *host, const char *needle)
{
    char master[96], host_flag[64], port_flag[32], log[128];
    snprintf(master, sizeof(master), "--master_server_address=%s", master_addr);
    snprintf(host_flag, sizeof(host_flag), "--host=%s", host);
    snprintf(port_flag, sizeof(port_flag), "--port=%d", mc_test_free_port());
    log_path(log, sizeof(log), "publish");
    char *argv[] = {CLIENT_BIN, master,    "--metadata_server=P2PHANDSHAKE",
                    host_flag,  port_flag, "--global_segment_size=16MB",
                    NULL};
    mc_proc_t client;
    assert_int_equal(start_serving_client(&client, argv, log), 0);
    int n = count_lines(log, needle);
    assert_true(mc_clean_exit(mc_proc_stop(&client, SIGTERM, 10000)));
    unlink(log);
    return n;
}

static void test_unreachable_publication_warns(void **state)
{
    (void)state;
    assert_int_equal(net_create(), 0);
    char rpc[64], addr[64], log[128], metrics[32];
    int port = mc_test_free_port();
    snprintf(rpc, sizeof(rpc), "--rpc_port=%d", port);
    snprintf(addr, sizeof(addr), "--rpc_address=%s", net.ns_ip);
    snprintf(metrics, sizeof(metrics), "--metrics_port=%d", mc_test_free_port());
    log_path(log, sizeof(log), "nsmaster");
    char *argv[] = {net.ip_bin, "netns", "exec", net.ns, MASTER_BIN, rpc, addr, metrics, NULL};
    mc_proc_t master;
    assert_int_equal(mc_proc_start_logged(&master, argv, log, "Master service started", 20000), 0);
    mc_cluster_track(master.pid);
    char master_addr[64], pub[32];
    snprintf(master_addr, sizeof(master_addr), "%s:%d", net.ns_ip, port);

    /* Loopback published, master elsewhere. */
    assert_int_equal(client_warnings(master_addr, "127.0.0.1", "a loopback address"), 1);
    /* A secondary address: this host reaches the master from the primary one. */
    snprintf(pub, sizeof(pub), "10.203.%d.5", net.subnet);
    assert_int_equal(client_warnings(master_addr, pub, "reaches the master"), 1);
    /* The address the master is reached from: no warning of either kind. */
    snprintf(pub, sizeof(pub), "%s", net.root_ip);
    assert_int_equal(client_warnings(master_addr, pub, "reaches the master"), 0);
    assert_int_equal(client_warnings(master_addr, pub, "a loopback address"), 0);

    mc_cluster_untrack(master.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&master, SIGTERM, 10000)));
    unlink(log);
    net_destroy();
}

static int teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    net_destroy();
    return 0;
}

int main(void)
{
    atexit(net_destroy);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_client_waits_for_master, teardown),
        cmocka_unit_test_teardown(test_client_wait_is_bounded, teardown),
        cmocka_unit_test_teardown(test_unreachable_publication_warns, teardown),
        cmocka_unit_test_teardown(test_client_root_must_match_the_masters, teardown),
    };
    int failed = cmocka_run_group_tests_name("start-up", tests, NULL, NULL);
    mc_cluster_kill_all();
    net_destroy();
    return failed;
}
