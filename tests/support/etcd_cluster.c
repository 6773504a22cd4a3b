/*
 * etcd_cluster.c — real etcd members on loopback for the integration tests (etcd_cluster.h).
 * Readiness is a real put/get through mc_etcd (src/common/etcd.h), never a sleep.
 */
#include "etcd_cluster.h"

#include "cluster.h"
#include "etcd.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ETCD_BIN "/usr/bin/etcd"
#define ETCD_READY_TIMEOUT_MS 30000

static long long ec_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ec_spawn(mc_etcd_cluster_t *c, int i)
{
    char name[16], data[300], client[64], listen[128], peer[64],
        initial[MC_ETCD_CLUSTER_MAX * 64] = "", token[64], log[300];
    snprintf(name, sizeof(name), "m%d", i);
    snprintf(data, sizeof(data), "%s/m%d", c->dir, i);
    snprintf(log, sizeof(log), "%s/m%d.log", c->dir, i);
    snprintf(client, sizeof(client), "http://127.0.0.1:%d", c->client_port[i]);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", c->peer_port[i]);
    if (c->extra_host[0])
        snprintf(listen, sizeof(listen), "%s,http://%s:%d", client, c->extra_host,
                 c->client_port[i]);
    else
        snprintf(listen, sizeof(listen), "%s", client);
    snprintf(token, sizeof(token), "mc-test-%d-%d", (int)getpid(), c->client_port[0]);
    for (int k = 0; k < c->n; k++) {
        size_t len = strlen(initial);
        snprintf(initial + len, sizeof(initial) - len, "%sm%d=http://127.0.0.1:%d", k ? "," : "", k,
                 c->peer_port[k]);
    }
    /* Short heartbeat/election so that a killed leader is replaced within about a second. */
    char *argv[] = {ETCD_BIN, "--name",
                    name,     "--data-dir",
                    data,     "--listen-client-urls",
                    listen,   "--advertise-client-urls",
                    client,   "--listen-peer-urls",
                    peer,     "--initial-advertise-peer-urls",
                    peer,     "--initial-cluster",
                    initial,  "--initial-cluster-state",
                    "new",    "--initial-cluster-token",
                    token,    "--heartbeat-interval",
                    "50",     "--election-timeout",
                    "500",    "--logger",
                    "zap",    "--log-outputs",
                    "stderr", NULL};
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || devnull < 0) {
        fprintf(stderr, "etcd_cluster: cannot open %s: %s\n", log, strerror(errno));
        if (fd >= 0)
            close(fd);
        if (devnull >= 0)
            close(devnull);
        return -1;
    }
    /* fork + exec rather than posix_spawn: the member gets SIGKILL when the test process dies
     * (PR_SET_PDEATHSIG), so even a test killed by ctest's timeout leaves no etcd running. */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        if (dup2(devnull, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0 ||
            dup2(fd, STDERR_FILENO) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd);
    close(devnull);
    if (pid < 0) {
        fprintf(stderr, "etcd_cluster: cannot start %s: %s\n", ETCD_BIN, strerror(errno));
        return -1;
    }
    c->pid[i] = pid;
    mc_cluster_track(pid);
    return 0;
}

/* Waits until member i answers a put + get of a key of its own through its endpoint alone. */
static int ec_wait_member(mc_etcd_cluster_t *c, int i)
{
    mc_etcd_t *e = NULL;
    if (mc_etcd_create(c->endpoint[i], 1000, &e) != 0)
        return -1;
    char key[64];
    snprintf(key, sizeof(key), "mc-test/ready/m%d", i);
    long long deadline = ec_now_ms() + ETCD_READY_TIMEOUT_MS;
    int ok = 0;
    while (!ok && ec_now_ms() < deadline) {
        int status;
        if (c->pid[i] > 0 && waitpid(c->pid[i], &status, WNOHANG) == c->pid[i]) {
            fprintf(stderr, "etcd_cluster: member m%d exited (status %d)\n", i, status);
            mc_cluster_untrack(c->pid[i]);
            c->pid[i] = 0;
            break;
        }
        mc_etcd_kv_t kv;
        if (mc_etcd_put(e, key, "up", 2, 0, NULL) == 0 && mc_etcd_get(e, key, &kv, NULL) == 0) {
            ok = kv.value_len == 2 && memcmp(kv.value, "up", 2) == 0;
            mc_etcd_kv_free(&kv, 1, 0);
        }
        if (!ok)
            usleep(50 * 1000); /* poll interval of a state wait */
    }
    mc_etcd_destroy(e);
    return ok ? 0 : -1;
}

int mc_etcd_cluster_start(mc_etcd_cluster_t *c, int n)
{
    return mc_etcd_cluster_start_at(c, n, NULL);
}

int mc_etcd_cluster_start_at(mc_etcd_cluster_t *c, int n, const char *extra_host)
{
    memset(c, 0, sizeof(*c));
    if (extra_host)
        snprintf(c->extra_host, sizeof(c->extra_host), "%s", extra_host);
    if (n < 1 || n > MC_ETCD_CLUSTER_MAX)
        return -1;
    c->n = n;
    snprintf(c->dir, sizeof(c->dir), "/tmp/mc-etcd-XXXXXX");
    if (!mkdtemp(c->dir)) {
        fprintf(stderr, "etcd_cluster: mkdtemp: %s\n", strerror(errno));
        c->dir[0] = '\0';
        return -1;
    }
    for (int i = 0; i < n; i++) {
        /* distinct ports: a free port may be handed out twice when released in between */
        for (int tries = 0; tries < 100; tries++) {
            int cp = mc_test_free_port(), pp = mc_test_free_port();
            int clash = cp == pp;
            for (int k = 0; k < i; k++)
                clash |= cp == c->client_port[k] || cp == c->peer_port[k] ||
                         pp == c->client_port[k] || pp == c->peer_port[k];
            if (!clash && cp > 0 && pp > 0) {
                c->client_port[i] = cp;
                c->peer_port[i] = pp;
                break;
            }
        }
        snprintf(c->endpoint[i], sizeof(c->endpoint[i]), "127.0.0.1:%d", c->client_port[i]);
        size_t len = strlen(c->endpoints);
        snprintf(c->endpoints + len, sizeof(c->endpoints) - len, "%s%s", i ? ";" : "",
                 c->endpoint[i]);
    }
    for (int i = 0; i < n; i++) {
        if (ec_spawn(c, i) != 0) {
            mc_etcd_cluster_destroy(c);
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (ec_wait_member(c, i) != 0) {
            fprintf(stderr, "etcd_cluster: member m%d did not answer\n", i);
            mc_etcd_cluster_print_logs(c, 30);
            mc_etcd_cluster_destroy(c);
            return -1;
        }
    }
    return 0;
}

int mc_etcd_cluster_kill(mc_etcd_cluster_t *c, int i)
{
    if (i < 0 || i >= c->n || c->pid[i] <= 0)
        return -1;
    kill(c->pid[i], SIGKILL);
    waitpid(c->pid[i], NULL, 0);
    mc_cluster_untrack(c->pid[i]);
    c->pid[i] = 0;
    return 0;
}

int mc_etcd_cluster_pause(mc_etcd_cluster_t *c, int i)
{
    if (i < 0 || i >= c->n || c->pid[i] <= 0)
        return -1;
    return mc_proc_freeze(c->pid[i], 5000);
}

int mc_etcd_cluster_resume(mc_etcd_cluster_t *c, int i)
{
    if (i < 0 || i >= c->n || c->pid[i] <= 0)
        return -1;
    return mc_proc_thaw(c->pid[i]);
}

int mc_etcd_cluster_restart(mc_etcd_cluster_t *c, int i)
{
    if (i < 0 || i >= c->n || c->pid[i] > 0)
        return -1;
    if (ec_spawn(c, i) != 0)
        return -1;
    if (ec_wait_member(c, i) != 0) {
        fprintf(stderr, "etcd_cluster: restarted member m%d did not answer\n", i);
        mc_etcd_cluster_print_logs(c, 30);
        return -1;
    }
    return 0;
}

void mc_etcd_cluster_print_logs(const mc_etcd_cluster_t *c, int lines)
{
    for (int i = 0; i < c->n && c->dir[0]; i++) {
        char cmd[400];
        fprintf(stderr, "---- etcd m%d (%s) log tail ----\n", i, c->endpoint[i]);
        snprintf(cmd, sizeof(cmd), "tail -n %d '%s/m%d.log' >&2", lines, c->dir, i);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log)\n");
    }
}

void mc_etcd_cluster_destroy(mc_etcd_cluster_t *c)
{
    for (int i = 0; i < c->n; i++) {
        if (c->pid[i] > 0) {
            kill(c->pid[i], SIGKILL);
            waitpid(c->pid[i], NULL, 0);
            mc_cluster_untrack(c->pid[i]);
            c->pid[i] = 0;
        }
    }
    if (c->dir[0] && strncmp(c->dir, "/tmp/mc-etcd-", 13) == 0) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "etcd_cluster: could not remove %s\n", c->dir);
    }
    c->dir[0] = '\0';
}
