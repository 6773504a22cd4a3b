/*
 * cluster.c — real mooncake_master / mooncake_client processes for the integration tests
 * (cluster.h).
 */
#include "cluster.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"
#define CLIENT_BIN MC_BUILD_DIR "/tools/mooncake_client"

extern char **environ;

#define MAX_CHILDREN 64
static pid_t children[MAX_CHILDREN];

void mc_cluster_track(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] == 0) {
            children[i] = pid;
            return;
        }
    }
}

void mc_cluster_untrack(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] == pid)
            children[i] = 0;
    }
}

void mc_cluster_kill_all(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] > 0 && kill(children[i], 0) == 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
        }
        children[i] = 0;
    }
}

int mc_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
    close(fd);
    return ok;
}

/* 1 when process pid holds a TCP socket listening on `port` (IPv4 or IPv6): the listening
 * sockets' inodes from /proc/net/tcp{,6}, matched against the links in /proc/pid/fd. */
static int pid_listens_on(pid_t pid, int port)
{
    unsigned long inodes[64];
    int n = 0;
    const char *tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (int t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f) && n < 64) {
            unsigned local_port, state;
            unsigned long inode;
            /* "sl local_address:port rem_address:port st tx:rx tr:when retrnsmt uid timeout inode"
             */
            if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x %*s %*s %*s %*u %*u %lu",
                       &local_port, &state, &inode) == 3 &&
                (int)local_port == port && state == 0x0A /* LISTEN */)
                inodes[n++] = inode;
        }
        if (f)
            fclose(f);
    }
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d)) != NULL;) {
        char path[320], target[64];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        unsigned long inode;
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) != 1)
            continue;
        for (int i = 0; i < n && !found; i++)
            found = inodes[i] == inode;
    }
    if (d)
        closedir(d);
    return found;
}

/* mooncake_master with its RPC on host:rpc_port (metrics on 127.0.0.1 and a free port), waiting
 * until the child itself listens on both ports and answers there: another process listening on
 * the port is not the master (which then could not bind it and exits). */
static int master_spawn(mc_master_t *m, const char *host, int rpc_port, int offload,
                        const char *const *extra)
{
    char rpc[32], metrics[32], address[96];
    m->rpc_port = rpc_port;
    m->metrics_port = mc_test_free_port();
    snprintf(rpc, sizeof(rpc), "--rpc_port=%d", m->rpc_port);
    snprintf(metrics, sizeof(metrics), "--metrics_port=%d", m->metrics_port);
    snprintf(address, sizeof(address), "--rpc_address=%s", host);
    snprintf(m->addr, sizeof(m->addr), "%s:%d", host, m->rpc_port);
    char *argv[32] = {MASTER_BIN, rpc, metrics, address, "--metrics_host=127.0.0.1"};
    int argc = 5;
    if (offload)
        argv[argc++] = "--enable_offload=true";
    for (int i = 0; extra && extra[i] && argc < 31; i++)
        argv[argc++] = (char *)extra[i];
    argv[argc] = NULL;
    if (posix_spawn(&m->pid, MASTER_BIN, NULL, NULL, argv, environ) != 0)
        return -1;
    mc_cluster_track(m->pid);
    /* Up to 30 s: an ASan master on a host that runs two other suites can take seconds. */
    for (int i = 0; i < 600; i++) {
        /* Both ports: tests read /metrics right after a start (its server starts after the RPC
         * port on a loaded host). */
        int up = mc_port_open_at(host, m->rpc_port) && mc_port_open(m->metrics_port);
        int ours =
            up && pid_listens_on(m->pid, m->rpc_port) && pid_listens_on(m->pid, m->metrics_port);
        int status;
        if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
            fprintf(stderr, "mooncake_master exited during start-up (status %d)%s\n", status,
                    up ? ", yet something else listens on its port" : "");
            mc_cluster_untrack(m->pid);
            m->pid = -1;
            return -1;
        }
        if (ours)
            return 0;
        usleep(50000);
    }
    fprintf(stderr, "mooncake_master (pid %d) not serving on %s:%d after 30 s\n", (int)m->pid, host,
            m->rpc_port);
    return -1;
}

int mc_master_start_on(mc_master_t *m, int rpc_port, int offload, const char *const *extra)
{
    return master_spawn(m, "127.0.0.1", rpc_port, offload, extra);
}

int mc_master_start(mc_master_t *m, int offload, const char *const *extra)
{
    return mc_master_start_on(m, mc_test_free_port(), offload, extra);
}

int mc_master_stop(mc_master_t *m, int sig)
{
    int status = -1;
    mc_cluster_untrack(m->pid);
    kill(m->pid, sig);
    for (int i = 0; i < 500; i++) {
        if (waitpid(m->pid, &status, WNOHANG) == m->pid)
            return status;
        usleep(20000);
    }
    kill(m->pid, SIGKILL);
    waitpid(m->pid, &status, 0);
    return -1;
}

void mc_env_apply(const char *const *env, int set)
{
    for (int i = 0; env && env[i]; i++) {
        char name[128];
        const char *eq = strchr(env[i], '=');
        snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
        if (set)
            setenv(name, eq + 1, 1);
        else
            unsetenv(name);
    }
}

int mc_holder_start(mc_holder_t *h, const mc_master_t *m, const char *segment,
                    const char *const *flags, const char *const *env, int timeout_ms)
{
    return mc_holder_start_at(h, m, "127.0.0.1", segment, flags, env, timeout_ms);
}

int mc_port_open_at(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0)
        return 0;
    int ok = inet_pton(AF_INET, host, &sin.sin_addr) == 1 &&
             connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
    close(fd);
    return ok;
}

int mc_master_start_at(mc_master_t *m, const char *host, const char *const *extra)
{
    return master_spawn(m, host, mc_test_free_port(), 0, extra);
}

int mc_holder_start_at(mc_holder_t *h, const mc_master_t *m, const char *host, const char *segment,
                       const char *const *flags, const char *const *env, int timeout_ms)
{
    char master_flag[96], host_flag[96], port_flag[32], seg_flag[64];
    snprintf(master_flag, sizeof(master_flag), "--master_server_address=%s", m->addr);
    snprintf(host_flag, sizeof(host_flag), "--host=%s", host);
    snprintf(port_flag, sizeof(port_flag), "--port=%d", mc_test_free_port());
    snprintf(seg_flag, sizeof(seg_flag), "--global_segment_size=%s", segment);
    char *argv[16] = {CLIENT_BIN, master_flag, "--metadata_server=P2PHANDSHAKE",
                      host_flag,  port_flag,   seg_flag};
    int argc = 6;
    for (int i = 0; flags && flags[i] && argc < 15; i++)
        argv[argc++] = (char *)flags[i];
    argv[argc] = NULL;
    mc_env_apply(env, 1);
    int rc = mc_proc_start(&h->proc, argv, "mooncake_client ready: segment ", timeout_ms);
    mc_env_apply(env, 0);
    if (rc != 0)
        return -1;
    mc_cluster_track(h->proc.pid);
    sscanf(h->proc.ready_line, "mooncake_client ready: segment %299s", h->segment);
    return 0;
}

#define HTTP_MAX (1u << 20)

char *mc_http_get(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char req[1024];
    int len = snprintf(req, sizeof(req),
                       "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)len) != len) {
        close(fd);
        return NULL;
    }
    char *resp = calloc(1, HTTP_MAX + 1);
    size_t got = 0;
    ssize_t n;
    while (resp && got < HTTP_MAX && (n = recv(fd, resp + got, HTTP_MAX - got, 0)) > 0)
        got += (size_t)n;
    close(fd);
    char *body = resp ? strstr(resp, "\r\n\r\n") : NULL;
    char *out = body ? strdup(body + 4) : NULL;
    free(resp);
    return out;
}

long long mc_master_metric(const mc_master_t *m, const char *name)
{
    char *body = mc_http_get(m->metrics_port, "/metrics");
    if (!body)
        return -1;
    char pat[128];
    snprintf(pat, sizeof(pat), "\n%s ", name);
    char *at = strstr(body, pat);
    long long v = at ? strtoll(at + strlen(pat), NULL, 10) : -1;
    free(body);
    return v;
}

mc_store_t *mc_test_client(const mc_master_t *m, int checksum, int disable_shm)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .local_buffer_size = 16u << 20,
                             .master_server_addr = m->addr,
                             .disable_checksum = !checksum};
    if (disable_shm)
        setenv("MC_DISABLE_SHM", "1", 1);
    mc_store_t *s = NULL;
    int rc = mc_store_setup(&cfg, &s);
    if (disable_shm)
        unsetenv("MC_DISABLE_SHM");
    return rc == 0 ? s : NULL;
}

int mc_test_put_retry(mc_store_t *s, const char *key, const void *value, size_t size,
                      const mc_replicate_config_t *cfg, int timeout_ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = mc_store_put(s, key, value, size, cfg);
        clock_gettime(CLOCK_MONOTONIC, &t);
        long long ms = (t.tv_sec - t0.tv_sec) * 1000LL + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (rc == 0 || ms >= timeout_ms)
            return rc;
        usleep(100 * 1000);
    }
}
