/*
 * test_netfault.c — "late TCP write after a failed put", with a real link cut in
 * a network namespace.
 *
 * Topology (all created here, pid-suffixed, removed at the end — also after a failed assertion,
 * by the teardown and by atexit):
 *
 *   root namespace                                   namespace mcnf<pid>
 *   mooncake_master, mooncake_client (holder),       store_rw W1 (tcp only, 3 s transfer
 *   this process (writer/reader W2)                  timeout), reaches the master and the holder
 *        10.201.N.1 on veth mcnfr<pid>  <=========>  10.201.N.2 on veth mcnfn<pid>
 *                                                    egress rate-limited (tc tbf), so an 8 MiB
 *                                                    payload takes about two seconds
 *
 * The master and the holder listen on 10.201.N.1, which stays locally reachable from the root
 * namespace while the link is down (the cut is `ip link set mcnfn<pid> down` in W1's namespace).
 * The holder keeps the default transfer timeout (30 s): that is the setting under which the
 * holder's receive thread outlives the outage on the old code.
 *
 * The holder's segment (12 MB) holds one 8 MiB value, so a second put can only succeed once the
 * first one's extent has been given back, and then it reuses (overlaps) that extent.
 *
 * Scenario:
 *  1. W1 puts key A (8 MiB); once the holder's sockets from W1 have received >= 1 MiB (ss), the
 *     link is cut in the middle of the payload.
 *  2. W1's put fails on its transfer timeout (or, in the second test, W1 is SIGKILLed while cut:
 *     the kernel then closes its sockets gracefully and keeps the queued bytes for
 *     retransmission). W1 cannot reach the master; the master expires W1 (--client_ttl=2) and
 *     revokes its put, freeing A's extent.
 *  3. W2 (root namespace) puts key B of the same size (retried until the extent is free: the
 *     state that proves the revocation), and B reads back exact.
 *  4. The link stays down until the holder has closed W1's connections, or 8 s after the cut
 *     (the old holder never closes them: its own receive timeout is 30 s). The link comes back;
 *     the test waits until no connection from W1's address to the holder is left on either side
 *     (the kernel's retransmissions delivered or were refused), then B must
 *     still read back exact — read with checksums off (so wrong bytes show as WRONG@offset: the
 *     root fix is what is tested) and with checksums on (a corrupted B is -801, not success).
 *
 * On the old code the holder's receive thread, which range-checked W1's frame before the cut,
 * receives the late bytes into B's memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/store.h"
#include "cluster.h"
#include "netns.h"
#include "payload.h"
#include "proc.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define RW_BIN MC_BUILD_DIR "/tests/integration/store_rw"
#define VALUE_SIZE (8 * MiB)
#define SEGMENT "12MB" /* one VALUE_SIZE value fits, two do not (MB or MiB alike) */
#define HOLD_MS 8000   /* longest the link stays down after the cut */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the namespace and the veth pair ---------------------------------------------------------
 */

static mc_netns_t net;

static void net_destroy(void)
{
    mc_netns_destroy(&net);
}

/* The namespace and the link (netns.h), W1's direction slowed; NULL when done, else why not. */
static const char *net_create(void)
{
    if (mc_sh("command -v tc") != 0 || mc_sh("command -v ss") != 0)
        return "tc or ss (iproute2) is not installed";
    const char *why = mc_netns_create(&net, "mcnf", 201);
    if (why)
        return why;
    /* W1's direction is slow: an 8 MiB payload takes ~2 s, so the cut lands inside it. */
    if (mc_sh("tc -n %s qdisc add dev %s root tbf rate 32mbit burst 64kb latency 100ms", net.ns,
              net.veth_ns) != 0 &&
        mc_sh("tc -n %s qdisc add dev %s root netem rate 32mbit", net.ns, net.veth_ns) != 0) {
        net_destroy();
        return "cannot rate-limit the veth (tc tbf and netem both failed)";
    }
    return NULL;
}

static void link_set(int up)
{
    assert_int_equal(mc_netns_link_set(&net, up), 0);
}

/*
 * TCP sockets matching the ss filter, in the namespace ns (NULL: root namespace): how many, and
 * the sum of their bytes_received.
 */
static int tcp_sockets(const char *ns, const char *filter, uint64_t *bytes_received)
{
    char cmd[512];
    if (ns)
        snprintf(cmd, sizeof(cmd), "%s netns exec %s ss -tinH %s 2>/dev/null", net.ip_bin, ns,
                 filter);
    else
        snprintf(cmd, sizeof(cmd), "ss -tinH %s 2>/dev/null", filter);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[4096];
    int count = 0;
    uint64_t sum = 0;
    while (fgets(line, sizeof(line), f)) {
        /* A socket is a line of its own (state or queues first); its -i details follow on the
         * next line, starting with whitespace. */
        if (line[0] != '\0' && line[0] != ' ' && line[0] != '\t' && line[0] != '\n')
            count++;
        const char *p = strstr(line, "bytes_received:");
        if (p)
            sum += strtoull(p + strlen("bytes_received:"), NULL, 10);
    }
    pclose(f);
    if (bytes_received)
        *bytes_received = sum;
    return count;
}

/* With NETFAULT_DEBUG set: both ends' sockets of W1's connections to the holder, on stderr. */
static void debug_sockets(const char *when, int hport)
{
    if (!getenv("NETFAULT_DEBUG"))
        return;
    char cmd[512];
    fprintf(stderr, "---- %s: holder side\n", when);
    snprintf(cmd, sizeof(cmd), "ss -tino '( sport = :%d and dst %s )' >&2", hport, net.ns_ip);
    if (system(cmd) != 0)
        fprintf(stderr, "(ss failed)\n");
    fprintf(stderr, "---- %s: W1 side\n", when);
    snprintf(cmd, sizeof(cmd), "%s netns exec %s ss -tino state all '( dport = :%d )' >&2",
             net.ip_bin, net.ns, hport);
    if (system(cmd) != 0)
        fprintf(stderr, "(ss failed)\n");
}

/* ---- store_rw children ---------------------------------------------------------------------- */

static void rw_start_in_ns(mc_proc_t *p, const mc_master_t *m, const char *const *env)
{
    char *argv[] = {net.ip_bin, "netns", "exec", net.ns, RW_BIN, (char *)m->addr, NULL};
    mc_env_apply(env, 1);
    int rc = mc_proc_start(p, argv, "READY", 20000);
    mc_env_apply(env, 0);
    assert_int_equal(rc, 0);
    mc_cluster_track(p->pid);
    /* `ip netns exec` execs the program: the pid is store_rw's own (the SIGKILL test needs it). */
    char link[64], exe[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)p->pid);
    ssize_t n = readlink(link, exe, sizeof(exe) - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    assert_non_null(strstr(exe, "store_rw"));
}

static void rw_send(mc_proc_t *p, const char *line)
{
    assert_int_equal(mc_proc_send(p, line), 0);
}

/* 1 when the child has written something to stdout that is not read yet. */
static int rw_has_output(mc_proc_t *p)
{
    struct pollfd pfd = {.fd = p->stdout_fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 1;
}

static void rw_read_line(mc_proc_t *p, char *out, size_t cap, int timeout_ms)
{
    assert_int_equal(mc_proc_read_line(p, out, cap, timeout_ms), 0);
}

/* ---- reads ---------------------------------------------------------------------------------- */

/* A store client in this process (root namespace) over tcp; MC_STORE_CHECKSUM=0 when !checksum. */
static mc_store_t *new_client(const mc_master_t *m, int checksum)
{
    mc_store_t *s = mc_test_client(m, checksum, 1);
    assert_non_null(s);
    return s;
}

/* Reads key (value seed) and describes the outcome in out: "exact", "WRONG@off", or "error N". */
static int read_verdict(mc_store_t *s, const char *key, uint64_t seed, char *out, size_t cap)
{
    char *buf = malloc(VALUE_SIZE);
    assert_non_null(buf);
    int64_t got = mc_store_get(s, key, buf, VALUE_SIZE);
    int exact = 0;
    if (got < 0) {
        snprintf(out, cap, "error %lld", (long long)got);
    } else {
        size_t off = mc_payload_diff(buf, (size_t)got, seed);
        exact = (uint64_t)got == VALUE_SIZE && off == (size_t)got;
        if (exact)
            snprintf(out, cap, "exact");
        else
            snprintf(out, cap, "WRONG@%zu (of %lld bytes)", off, (long long)got);
    }
    free(buf);
    return exact;
}

/* ---- the scenario --------------------------------------------------------------------------- */

static void late_write_case(int kill_writer)
{
    const char *why = net_create();
    if (why) {
        print_message("skipped: %s\n", why);
        skip();
    }
    uint64_t t0 = now_ms();
    mc_master_t m;
    mc_holder_t h;
    const char *const master_flags[] = {"--client_ttl=2", NULL};
    assert_int_equal(mc_master_start_at(&m, net.root_ip, master_flags), 0);
    /* The holder: the default transfer timeout (30 s, set explicitly so that an inherited
     * MC_TRANSFER_TIMEOUT cannot hide the bug), tcp only. */
    const char *const holder_env[] = {"MC_DISABLE_SHM=1", "MC_TRANSFER_TIMEOUT=30", NULL};
    assert_int_equal(mc_holder_start_at(&h, &m, net.root_ip, SEGMENT, NULL, holder_env, 20000), 0);
    const char *colon = strrchr(h.segment, ':');
    assert_non_null(colon);
    int hport = atoi(colon + 1);
    /* The holder's end of W1's connections: any state but time-wait (from_w1), or still open
     * (established or close-wait: the holder's receive thread has not closed it, w1_open). */
    char from_w1[160], w1_open[200], to_holder[96];
    snprintf(from_w1, sizeof(from_w1), "state big '( sport = :%d and dst %s )'", hport, net.ns_ip);
    snprintf(w1_open, sizeof(w1_open),
             "state established state close-wait '( sport = :%d and dst %s )'", hport, net.ns_ip);
    snprintf(to_holder, sizeof(to_holder), "state big '( dport = :%d )'", hport);

    /* 1. W1 in the namespace puts A; the link is cut while its payload is flowing. */
    mc_proc_t w1;
    const char *const w1_env[] = {"MC_DISABLE_SHM=1", "MC_TRANSFER_TIMEOUT=3", NULL};
    rw_start_in_ns(&w1, &m, w1_env);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "put netfault/a %llu 1\n", VALUE_SIZE);
    rw_send(&w1, cmd);
    uint64_t received = 0, deadline = now_ms() + 20000;
    for (;;) {
        tcp_sockets(NULL, from_w1, &received);
        if (received >= MiB)
            break;
        assert_false(rw_has_output(&w1)); /* the put must still be in flight */
        assert_true(now_ms() < deadline);
        usleep(2000);
    }
    link_set(0);
    uint64_t t_cut = now_ms();
    tcp_sockets(NULL, from_w1, &received);
    print_message("link cut with %llu of %llu bytes of A received by the holder\n",
                  (unsigned long long)received, VALUE_SIZE);
    assert_true(received < VALUE_SIZE); /* the cut is inside the payload */

    /* 2. W1's put fails (or W1 dies); the master revokes it when W1's client TTL expires. */
    char line[256];
    if (kill_writer) {
        assert_int_equal(kill(w1.pid, SIGKILL), 0);
        int st;
        assert_int_equal(waitpid(w1.pid, &st, 0), w1.pid);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        mc_cluster_untrack(w1.pid);
        close(w1.stdin_fd);
        close(w1.stdout_fd);
        w1.pid = -1;
        print_message("W1 SIGKILLed %llu ms after the cut\n",
                      (unsigned long long)(now_ms() - t_cut));
    } else {
        rw_read_line(&w1, line, sizeof(line), 60000);
        print_message("W1 while cut: %s (%llu ms after the cut)\n", line,
                      (unsigned long long)(now_ms() - t_cut));
        int rc = 0;
        assert_int_equal(sscanf(line, "PUT %d", &rc), 1);
        assert_true(rc != 0);
    }

    /* 3. W2 puts B of the same size: it succeeds once A's extent is free, and reuses it. */
    mc_store_t *w2 = new_client(&m, 1);
    mc_store_t *plain = new_client(&m, 0); /* checksums off: wrong bytes show as WRONG */
    char *v = malloc(VALUE_SIZE);
    assert_non_null(v);
    mc_payload_fill(v, VALUE_SIZE, 2);
    int attempts = 0, rc;
    deadline = now_ms() + 30000;
    while ((rc = mc_store_put(w2, "netfault/b", v, VALUE_SIZE, NULL)) != 0) {
        attempts++;
        assert_true(now_ms() < deadline);
        usleep(100000);
    }
    free(v);
    mc_replica_desc_t d[2];
    size_t nd = 0;
    assert_int_equal(mc_store_get_replica_desc(w2, "netfault/b", d, 2, &nd), 0);
    assert_int_equal(nd, 1);
    print_message("B put %llu ms after the cut (%d refused attempts before), at %s %#llx\n",
                  (unsigned long long)(now_ms() - t_cut), attempts, d[0].segment_name,
                  (unsigned long long)d[0].address);
    char v_plain[96], v_sum[96];
    int ok_plain = read_verdict(plain, "netfault/b", 2, v_plain, sizeof(v_plain));
    int ok_sum = read_verdict(w2, "netfault/b", 2, v_sum, sizeof(v_sum));
    print_message("B before the link returns: %s (checksums off), %s (on)\n", v_plain, v_sum);
    assert_true(ok_plain && ok_sum);

    /* 4. The link stays down until the holder has closed W1's connections (a holder that bounds
     * a write frame's payload by the writer's transfer timeout, 3 s here, does so within a few
     * seconds), but at most HOLD_MS after the cut: the old holder keeps them (its own 30 s
     * receive timeout never expires while bytes trickle in) and the late bytes follow. Then the
     * link returns; wait until no connection from W1 to the holder is left on either side. */
    int n_holder = 0, n_w1;
    while ((n_holder = tcp_sockets(NULL, w1_open, NULL)) > 0 && now_ms() < t_cut + HOLD_MS)
        usleep(50000);
    print_message("link down %llu ms; the holder %s W1's connections\n",
                  (unsigned long long)(now_ms() - t_cut),
                  n_holder ? "still has open" : "has closed");
    debug_sockets("before the link returns", hport);
    link_set(1);
    uint64_t t_up = now_ms();
    deadline = t_up + 120000;
    for (;;) {
        n_holder = tcp_sockets(NULL, from_w1, NULL);
        n_w1 = tcp_sockets(net.ns, to_holder, NULL);
        if (n_holder == 0 && n_w1 == 0)
            break;
        assert_true(now_ms() < deadline);
        usleep(50000);
    }
    print_message("W1's connections to the holder gone %llu ms after the link returned\n",
                  (unsigned long long)(now_ms() - t_up));
    debug_sockets("after", hport);
    ok_plain = read_verdict(plain, "netfault/b", 2, v_plain, sizeof(v_plain));
    ok_sum = read_verdict(w2, "netfault/b", 2, v_sum, sizeof(v_sum));
    print_message("B after the link returned: %s (checksums off), %s (on)\n", v_plain, v_sum);
    assert_int_equal(kill(h.proc.pid, 0), 0); /* the holder is still there */

    if (!kill_writer) {
        close(w1.stdin_fd);
        w1.stdin_fd = -1;
        pid_t pid = w1.pid;
        int st = mc_proc_stop(&w1, 0, 20000); /* signal 0: wait for its exit at end of input */
        mc_cluster_untrack(pid);
        assert_true(st != -1 && WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    mc_store_free(plain);
    mc_store_free(w2);
    print_message("case took %.1f s\n", (double)(now_ms() - t0) / 1000.0);
    assert_true(ok_plain);
    assert_true(ok_sum);
    mc_cluster_kill_all();
    net_destroy();
}

static void test_late_write_after_a_failed_put_never_lands(void **state)
{
    (void)state;
    late_write_case(0);
}

static void test_late_write_after_the_writer_was_killed_never_lands(void **state)
{
    (void)state;
    late_write_case(1);
}

static int teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    net_destroy();
    return 0;
}

static void at_exit(void)
{
    mc_cluster_kill_all();
    net_destroy();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_late_write_after_a_failed_put_never_lands, teardown),
        cmocka_unit_test_teardown(test_late_write_after_the_writer_was_killed_never_lands,
                                  teardown),
    };
    atexit(at_exit);
    return cmocka_run_group_tests_name("netfault", tests, NULL, NULL);
}
