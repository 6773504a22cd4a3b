/*
 * ha_bench — master high availability on etcd (docs/ha.md): how long a failover takes,
 * and what the operation log costs on 4 KiB puts. Everything runs on loopback in one go: this
 * program starts its own etcd cluster (Debian's /usr/bin/etcd, --etcd_members members on free
 * ports, data dirs in a temporary directory removed at the end; tests/support/etcd_cluster.c),
 * mooncake_master and mooncake_client processes taken from the directory of this binary (their
 * logs in a temporary directory, removed after a clean run and kept and named after a failed
 * one), and store clients in this process.
 *
 * Part "failover": --masters masters with --enable_ha=true --enable_oplog=true
 * --oplog_sync_ack=--failover_sync_ack --ha_lease_ttl_seconds=--ha_lease_ttl_seconds, one
 * mooncake_client holder and one writer thread (a store client following the leader through
 * "etcd://...") putting --value_size values in a loop (each put a fresh key; the key put
 * WRITER_WINDOW puts earlier is removed, so the pool never fills). Then --rounds times: SIGKILL
 * the leader, and --stop_rounds times: SIGSTOP it. Per round:
 *   elected_s    signal sent -> the etcd view names another master (polled every 10 ms);
 *   first_put_s  signal sent -> the first successful put that STARTED after the old leader was
 *                reaped (SIGKILL) or seen stopped (SIGSTOP), so it cannot have been answered by
 *                the old one: it went through the new leader, after the holder re-mounted there;
 *   vs_ttl       first_put_s / the lease TTL (the goal: at most 2);
 *   put_errors   puts that failed meanwhile.
 * After a round the old leader comes back (restarted on its port, or SIGCONT) and the next round
 * starts once its log says it stands by again and puts flow.
 *
 * Part "oplog": 4 KiB put ops/s with --lanes threads (one store client each), every lane for
 * 1 s of warm-up plus --duration s, in four clusters started one after the other:
 *   plain       one master without HA (the peer every other row is compared with);
 *   ha          --enable_ha, no operation log (2 masters: a leader and a standby);
 *   oplog_async --enable_oplog --oplog_sync_ack=false (upstream's: acknowledged at once);
 *   oplog_sync  --enable_oplog --oplog_sync_ack=true (ours, the default: acknowledged once the
 *               change is in etcd).
 * Each lane puts fresh keys from its own space of LANE_KEYS keys; when the space is used up it
 * stops its clock, removes them (one batch remove) and goes on, so only puts are timed. Printed:
 * ops/s (the lanes' sum of puts / their timed seconds), p50 / p99 latency of one put, and ops/s
 * as a ratio to plain. Then a raw etcd row measured in the same run: one lane of mc_etcd_put
 * (ETCD_RAW_VALUE bytes) for --duration s, since a synchronously acknowledged put waits for at
 * least one etcd write.
 *
 * Nothing here asserts a time. Exit status: 0; 1 when setup failed, a round found no new leader
 * or no successful put within FAILOVER_WAIT (6 x TTL + 30 s), or a throughput row had errors;
 * what was measured until then is printed (and written with --json).
 *
 * Threads: main starts and stops every process (the death signals of the children follow it)
 * and owns everything; the writer / lane threads own their own struct and read the shared
 * atomics.
 */
#include "mooncake/errors.h"
#include "mooncake/store.h"

#include "bench_limits.h"
#include "cluster.h"
#include "etcd.h"
#include "etcd_cluster.h"
#include "flags.h"
#include "log.h"
#include "master_view.h"
#include "net.h"
#include "parse.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "ha_bench"

#define NS_PER_S UINT64_C(1000000000)
#define NS_PER_MS UINT64_C(1000000)
#define MAX_MASTERS 3
#define MAX_LIST 8
#define MAX_LANES 64
#define WRITER_WINDOW 8192 /* the failover writer removes the key put this many puts earlier */
#define LANE_KEYS 2048     /* keys per lane and generation in the throughput rows */
#define WARMUP_NS NS_PER_S /* per throughput row, not counted */
#define ETCD_RAW_VALUE 256 /* bytes per raw etcd put (about one small operation-log batch) */
#define ETCD_RAW_KEYS 1024 /* raw etcd puts cycle over this many keys */
#define MASTER_READY_MS (30 * 1000)
#define CLIENT_READY_MS (60 * 1000)
#define LEADER_WAIT_MS (30 * 1000)
#define STANDBY_WAIT_MS (60 * 1000)
#define PUTS_FLOWING 50         /* successful puts that show a cluster is back in steady state */
#define POLL_MS 10              /* period of every state wait of this program */
#define WRITER_FAIL_PAUSE_MS 10 /* after a failed put, before the next one */
#define CLIENT_READY_PREFIX "mooncake_client ready: segment "

/* ---- options -------------------------------------------------------------------------------- */

typedef struct opts {
    int64_t rounds, stop_rounds, ttl_s, masters, etcd_members, duration_s;
    uint64_t value_size, holder_segment;
    char *lanes_text, *parts_text, *json_path;
    int failover_sync_ack, keep_logs;
    /* derived */
    uint64_t lanes[MAX_LIST];
    size_t nlanes;
    int do_failover, do_oplog;
} opts_t;

static int parse_parts(opts_t *o, char *err, size_t errlen)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", o->parts_text);
    o->do_failover = o->do_oplog = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "failover"))
            o->do_failover = 1;
        else if (!strcmp(t, "oplog"))
            o->do_oplog = 1;
        else {
            snprintf(err, errlen, "--parts: unknown part \"%s\" (failover, oplog)", t);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    if (!o->do_failover && !o->do_oplog) {
        snprintf(err, errlen, "--parts: name at least one of failover, oplog");
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

static int validate_opts(opts_t *o, char *err, size_t errlen)
{
    int rc = bench_parse_list(o->lanes_text, 0, 1, MAX_LANES, o->lanes, MAX_LIST, &o->nlanes,
                              "lanes", err, errlen);
    if (rc == 0)
        rc = parse_parts(o, err, errlen);
    if (rc == 0 && (o->value_size < 1 || o->value_size > (64u << 20))) {
        snprintf(err, errlen, "--value_size must be 1 B..64 MiB");
        rc = MC_ERR_INVALID_PARAMS;
    }
    uint64_t max_lanes = 0;
    for (size_t i = 0; rc == 0 && i < o->nlanes; i++)
        max_lanes = o->lanes[i] > max_lanes ? o->lanes[i] : max_lanes;
    /* live objects at most: every lane's generation, or the failover writer's window; twice
     * that leaves room for what is being removed and for the allocator's slack */
    uint64_t live = max_lanes * LANE_KEYS > WRITER_WINDOW ? max_lanes * LANE_KEYS : WRITER_WINDOW;
    if (rc == 0 && o->holder_segment / 2 / live < o->value_size) {
        snprintf(err, errlen,
                 "--holder_segment_size must hold at least 2 x %" PRIu64 " values of --value_size",
                 live);
        rc = MC_ERR_INVALID_PARAMS;
    }
    return rc;
}

/* ---- child processes ------------------------------------------------------------------------- */

/* etcd_cluster.c records its members here; they are killed by mc_etcd_cluster_destroy, and die
 * with this process (PR_SET_PDEATHSIG), so the registry only has to exist. */
#define MAX_TRACKED 16
static pid_t tracked[MAX_TRACKED];

void mc_cluster_track(pid_t pid)
{
    for (int i = 0; i < MAX_TRACKED; i++)
        if (!tracked[i]) {
            tracked[i] = pid;
            return;
        }
}

void mc_cluster_untrack(pid_t pid)
{
    for (int i = 0; i < MAX_TRACKED; i++)
        if (tracked[i] == pid)
            tracked[i] = 0;
}

void mc_cluster_kill_all(void)
{
    for (int i = 0; i < MAX_TRACKED; i++)
        if (tracked[i] > 0) {
            kill(tracked[i], SIGKILL);
            waitpid(tracked[i], NULL, 0);
            tracked[i] = 0;
        }
}

typedef struct master {
    pid_t pid; /* 0: not running */
    int rpc_port, metrics_port;
    char addr[64];
    char log[300];
    int stopped; /* SIGSTOPped */
} master_t;

/* One cluster: etcd (shared by every cluster of the run), masters, one holder. */
typedef struct hcluster {
    const char *name; /* row name: plain, ha, oplog_async, oplog_sync, failover */
    int ha, oplog, sync_ack, nmasters;
    char cluster_id[96];
    char master_addr[512]; /* what clients and the holder are given */
    master_t m[MAX_MASTERS];
    pid_t holder_pid;
    char holder_log[300];
} hcluster_t;

typedef struct bench {
    const opts_t *o;
    mc_etcd_cluster_t etcd;
    mc_etcd_t *e; /* a handle on every member, for the view and the raw etcd row */
    char log_dir[64];
    char master_exe[4200], client_exe[4200];
    json_t *failover_rows, *oplog_rows, *etcd_row;
    double load_start[3], load_end[3];
    int failed;
} bench_t;

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000u);
}

static void read_loadavg(double out[3])
{
    out[0] = out[1] = out[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3)
            out[0] = out[1] = out[2] = -1;
        fclose(f);
    }
}

/* "<dir of this executable>/<name>" into out. */
static int sibling_program(const char *name, char *out, size_t cap)
{
    char exe[4096];
    if (bench_self_exe(exe, sizeof(exe)) != 0)
        return -1;
    int w = snprintf(out, cap, "%s/%s", dirname(exe), name);
    return w > 0 && (size_t)w < cap && access(out, X_OK) == 0 ? 0 : -1;
}

static int child_exited(pid_t pid)
{
    int st;
    return waitpid(pid, &st, WNOHANG) == pid;
}

/* Bytes in the file now (0 when absent). */
static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : 0;
}

/* 1 when `needle` occurs in the file after byte `from` (the last MiB read). */
static int log_has_after(const char *path, off_t from, const char *needle)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    off_t size = lseek(fd, 0, SEEK_END);
    if (size - from > (1 << 20))
        from = size - (1 << 20);
    char *buf = malloc((size_t)(size - from) + 1);
    ssize_t n = buf ? pread(fd, buf, (size_t)(size - from), from) : -1;
    close(fd);
    int found = 0;
    if (n >= 0) {
        buf[n] = '\0';
        found = strstr(buf, needle) != NULL;
    }
    free(buf);
    return found;
}

/* Starts (or restarts, on its ports) master i of c; its log is appended to. Waits for its RPC
 * port. 0, or -1. */
static int master_start(bench_t *b, hcluster_t *c, int i)
{
    master_t *m = &c->m[i];
    if (!m->rpc_port) {
        m->rpc_port = mc_test_free_port();
        m->metrics_port = mc_test_free_port();
        snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%d", m->rpc_port);
        snprintf(m->log, sizeof(m->log), "%s/%s-master%d.log", b->log_dir, c->name, i);
    }
    char rpc[40], metrics[40], ep[400], cid[140], ttl[64], sync[40];
    snprintf(rpc, sizeof(rpc), "--rpc_port=%d", m->rpc_port);
    snprintf(metrics, sizeof(metrics), "--metrics_port=%d", m->metrics_port);
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", b->etcd.endpoints);
    snprintf(cid, sizeof(cid), "--cluster_id=%s", c->cluster_id);
    snprintf(ttl, sizeof(ttl), "--ha_lease_ttl_seconds=%" PRId64, b->o->ttl_s);
    snprintf(sync, sizeof(sync), "--oplog_sync_ack=%s", c->sync_ack ? "true" : "false");
    char *argv[16] = {b->master_exe, rpc, metrics, "--rpc_address=127.0.0.1",
                      "--metrics_host=127.0.0.1"};
    int argc = 5;
    if (c->ha) {
        argv[argc++] = "--enable_ha=true";
        argv[argc++] = ep;
        argv[argc++] = cid;
        argv[argc++] = ttl;
        if (c->oplog) {
            argv[argc++] = "--enable_oplog=true";
            argv[argc++] = sync;
        }
    }
    argv[argc] = NULL;
    int fd = open(m->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, PROGRAM ": cannot open %s: %s\n", m->log, strerror(errno));
        return -1;
    }
    m->pid = bench_spawn(PROGRAM, b->master_exe, argv, fd, fd, NULL, NULL);
    close(fd);
    m->stopped = 0;
    if (m->pid < 0) {
        m->pid = 0;
        return -1;
    }
    uint64_t end = mc_now_ms() + MASTER_READY_MS;
    while (mc_now_ms() < end) {
        if (child_exited(m->pid)) {
            fprintf(stderr, PROGRAM ": mooncake_master exited at start; log %s\n", m->log);
            m->pid = 0;
            return -1;
        }
        int s = mc_net_connect_tcp("127.0.0.1", m->rpc_port, 200);
        if (s >= 0) {
            close(s);
            return 0;
        }
        sleep_ms(POLL_MS * 5);
    }
    fprintf(stderr, PROGRAM ": mooncake_master did not listen on %d; log %s\n", m->rpc_port,
            m->log);
    return -1;
}

/* SIGKILL and reap. */
static void master_kill(master_t *m)
{
    if (m->pid <= 0)
        return;
    kill(m->pid, SIGKILL);
    waitpid(m->pid, NULL, 0);
    m->pid = 0;
    m->stopped = 0;
}

/* The index of the master the etcd view names (-1: none or unknown); *addr gets the address. */
static int leader_of(bench_t *b, hcluster_t *c, char *addr, size_t cap)
{
    addr[0] = '\0';
    if (mc_master_view_read(b->e, c->cluster_id, addr, cap, NULL) != 0) {
        addr[0] = '\0';
        return -1;
    }
    for (int i = 0; i < c->nmasters; i++)
        if (c->m[i].pid > 0 && !strcmp(c->m[i].addr, addr))
            return i;
    return -1;
}

/* Waits until the view names a running master other than `not` (-1: any). Its index, or -1. */
static int wait_leader(bench_t *b, hcluster_t *c, int not, uint64_t timeout_ms)
{
    char addr[128];
    uint64_t end = mc_now_ms() + timeout_ms;
    do {
        int i = leader_of(b, c, addr, sizeof(addr));
        if (i >= 0 && i != not )
            return i;
        sleep_ms(POLL_MS);
    } while (mc_now_ms() < end);
    return -1;
}

/* Reads the holder's stdout until its ready line. */
static int wait_holder_ready(pid_t pid, int fd)
{
    char buf[4096] = "";
    size_t len = 0;
    uint64_t end = mc_now_ms() + CLIENT_READY_MS;
    for (;;) {
        char *nl;
        while ((nl = memchr(buf, '\n', len)) != NULL) {
            if (!strncmp(buf, CLIENT_READY_PREFIX, strlen(CLIENT_READY_PREFIX)))
                return 0;
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len);
        }
        uint64_t now = mc_now_ms();
        if (now >= end || len == sizeof(buf) || child_exited(pid))
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, 100);
        if (n <= 0)
            continue;
        ssize_t got = read(fd, buf + len, sizeof(buf) - len);
        if (got <= 0 && !(got < 0 && errno == EINTR))
            return -1;
        if (got > 0)
            len += (size_t)got;
    }
}

static int holder_start(bench_t *b, hcluster_t *c)
{
    char seg[64], port[32], master[600];
    snprintf(seg, sizeof(seg), "--global_segment_size=%" PRIu64, b->o->holder_segment);
    snprintf(port, sizeof(port), "--port=%d", mc_test_free_port());
    snprintf(master, sizeof(master), "--master_server_address=%s", c->master_addr);
    snprintf(c->holder_log, sizeof(c->holder_log), "%s/%s-holder.log", b->log_dir, c->name);
    char *argv[] = {b->client_exe, seg, "--host=127.0.0.1", port, "--metadata_server=P2PHANDSHAKE",
                    master,        NULL};
    int fd = open(c->holder_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), p[2];
    if (fd < 0 || pipe2(p, O_CLOEXEC) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    c->holder_pid = bench_spawn(PROGRAM, b->client_exe, argv, p[1], fd, NULL, NULL);
    close(p[1]);
    close(fd);
    int rc = c->holder_pid > 0 ? wait_holder_ready(c->holder_pid, p[0]) : -1;
    close(p[0]); /* it prints nothing more on stdout (and ignores SIGPIPE) */
    if (rc != 0)
        fprintf(stderr, PROGRAM ": mooncake_client did not report ready; log %s\n", c->holder_log);
    return rc;
}

/* SIGTERM (SIGKILL after 10 s) to master i; 0 on a clean exit. */
static int master_stop(master_t *m)
{
    int rc = 0;
    if (m->pid > 0) {
        if (m->stopped)
            kill(m->pid, SIGCONT);
        rc = bench_stop_child(PROGRAM, m->pid, "mooncake_master");
    }
    m->pid = 0;
    m->stopped = 0;
    return rc;
}

/*
 * Stops the holder, then the standbys, then the leader (SIGTERM; SIGKILL after 10 s). Standbys
 * first: a leader that stops hands its lease over, and a standby elected while it is itself
 * being stopped is a failover nobody asked for. 0 on clean exits.
 */
static int cluster_stop(bench_t *b, hcluster_t *c)
{
    int rc = 0;
    if (c->holder_pid > 0)
        rc |= bench_stop_child(PROGRAM, c->holder_pid, "mooncake_client");
    c->holder_pid = 0;
    char addr[128];
    int leader = c->ha ? leader_of(b, c, addr, sizeof(addr)) : -1;
    for (int i = 0; i < c->nmasters; i++)
        if (i != leader)
            rc |= master_stop(&c->m[i]);
    if (leader >= 0)
        rc |= master_stop(&c->m[leader]);
    return rc;
}

/* Starts the masters, waits for a leader (HA), starts the holder. 0, or -1 (all stopped). */
static int cluster_start(bench_t *b, hcluster_t *c)
{
    snprintf(c->cluster_id, sizeof(c->cluster_id), "ha_bench_%s_%d", c->name, (int)getpid());
    for (int i = 0; i < c->nmasters; i++)
        if (master_start(b, c, i) != 0)
            goto fail;
    if (c->ha) {
        snprintf(c->master_addr, sizeof(c->master_addr), "etcd://%s", b->etcd.endpoints);
        if (wait_leader(b, c, -1, LEADER_WAIT_MS) < 0) {
            fprintf(stderr, PROGRAM ": %s: no master was elected\n", c->name);
            goto fail;
        }
    } else {
        snprintf(c->master_addr, sizeof(c->master_addr), "%s", c->m[0].addr);
    }
    /* The holder and this process's clients find the cluster's view under this id. */
    setenv(MC_CLUSTER_ID_ENV, c->cluster_id, 1);
    if (holder_start(b, c) != 0)
        goto fail;
    return 0;
fail:
    cluster_stop(b, c);
    b->failed = 1;
    return -1;
}

static mc_store_t *store_open(const hcluster_t *c)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .protocol = "tcp",
                             .local_buffer_size = 16u << 20,
                             .master_server_addr = c->master_addr};
    mc_store_t *s = NULL;
    int rc = mc_store_setup(&cfg, &s);
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": store setup against %s failed: %s\n", c->master_addr,
                mc_error_name(rc));
        return NULL;
    }
    return s;
}

/* ---- part 1: failover ------------------------------------------------------------------------ */

typedef struct writer {
    mc_store_t *s;
    uint64_t value_size;
    atomic_int stop;
    atomic_uint_fast64_t ok, errors;
    atomic_uint_fast64_t mark_ns;  /* puts started at or after this count for first_ns */
    atomic_uint_fast64_t first_ns; /* completion of the first such successful put (0: none) */
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    uint8_t *v = malloc(w->value_size);
    if (!v)
        return NULL;
    char key[96], old[96];
    int pid = (int)getpid();
    for (uint64_t n = 0; !atomic_load(&w->stop); n++) {
        for (uint64_t k = 0; k < w->value_size; k++)
            v[k] = (uint8_t)(n * 131 + k);
        snprintf(key, sizeof(key), "hab-%d-%" PRIu64, pid, n);
        uint64_t t0 = mc_now_ns();
        int rc = mc_store_put(w->s, key, v, w->value_size, NULL);
        uint64_t t1 = mc_now_ns();
        if (rc == 0) {
            atomic_fetch_add(&w->ok, 1);
            uint64_t mark = atomic_load(&w->mark_ns), zero = 0;
            if (mark && t0 >= mark)
                atomic_compare_exchange_strong(&w->first_ns, &zero, t1);
        } else {
            atomic_fetch_add(&w->errors, 1);
            sleep_ms(WRITER_FAIL_PAUSE_MS);
        }
        if (n >= WRITER_WINDOW) {
            snprintf(old, sizeof(old), "hab-%d-%" PRIu64, pid, n - WRITER_WINDOW);
            mc_store_remove(w->s, old, 1); /* absent (its put failed) is fine */
        }
    }
    free(v);
    return NULL;
}

/* Waits until the writer counted `more` further successful puts. 0, or -1 after timeout_ms. */
static int wait_puts(writer_t *w, uint64_t more, uint64_t timeout_ms)
{
    uint64_t target = atomic_load(&w->ok) + more, end = mc_now_ms() + timeout_ms;
    while (atomic_load(&w->ok) < target) {
        if (mc_now_ms() >= end)
            return -1;
        sleep_ms(POLL_MS);
    }
    return 0;
}

/* 1 when /proc says the process is stopped (state T). */
static int proc_is_stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

typedef struct round_result {
    int round;
    const char *signal;
    double elected_s, first_put_s; /* -1: not reached */
    uint64_t put_errors;
    int ok;
} round_result_t;

/* One round: signal the leader, time the hand-over, bring the old leader back as a standby. */
static int failover_round(bench_t *b, hcluster_t *c, writer_t *w, int sig, round_result_t *r)
{
    const uint64_t wait_ms = (uint64_t)(6 * b->o->ttl_s + 30) * 1000u;
    char addr[128];
    int old = leader_of(b, c, addr, sizeof(addr));
    if (old < 0)
        old = wait_leader(b, c, -1, LEADER_WAIT_MS);
    if (old < 0)
        return -1;
    master_t *m = &c->m[old];
    uint64_t errors0 = atomic_load(&w->errors);
    atomic_store(&w->first_ns, 0);
    atomic_store(&w->mark_ns, 0);
    off_t log_mark = file_size(m->log);

    uint64_t sent = mc_now_ns();
    if (sig == SIGKILL) {
        master_kill(m); /* reaped: it can answer nothing from here on */
    } else {
        kill(m->pid, SIGSTOP);
        m->stopped = 1;
        while (!proc_is_stopped(m->pid))
            sleep_ms(1);
    }
    atomic_store(&w->mark_ns, mc_now_ns());

    r->elected_s = r->first_put_s = -1;
    uint64_t end = mc_now_ms() + wait_ms;
    for (;;) {
        char now_addr[128];
        leader_of(b, c, now_addr, sizeof(now_addr));
        if (now_addr[0] && strcmp(now_addr, m->addr) != 0) {
            r->elected_s = (double)(mc_now_ns() - sent) / (double)NS_PER_S;
            break;
        }
        if (mc_now_ms() >= end)
            break;
        sleep_ms(POLL_MS);
    }
    while (r->elected_s >= 0 && !atomic_load(&w->first_ns) && mc_now_ms() < end)
        sleep_ms(POLL_MS);
    uint64_t first = atomic_load(&w->first_ns);
    if (first)
        r->first_put_s = (double)(first - sent) / (double)NS_PER_S;
    r->put_errors = atomic_load(&w->errors) - errors0;
    r->ok = r->elected_s >= 0 && first;

    /* The old leader comes back and stands by again. */
    if (sig == SIGKILL) {
        if (master_start(b, c, old) != 0)
            return -1;
    } else {
        kill(m->pid, SIGCONT);
        m->stopped = 0;
    }
    uint64_t sb_end = mc_now_ms() + STANDBY_WAIT_MS;
    while (!log_has_after(m->log, log_mark, "-> standby")) {
        if (mc_now_ms() >= sb_end) {
            fprintf(stderr, PROGRAM ": master %s did not stand by again; log %s\n", m->addr,
                    m->log);
            return -1;
        }
        sleep_ms(POLL_MS);
    }
    if (wait_puts(w, PUTS_FLOWING, wait_ms) != 0) {
        fprintf(stderr, PROGRAM ": puts did not resume after round %d\n", r->round);
        return -1;
    }
    return r->ok ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_failover_summary(const round_result_t *rs, int n, const char *sig, double ttl)
{
    double e[64], f[64];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rs[i].signal, sig) && rs[i].ok && k < 64) {
            e[k] = rs[i].elected_s;
            f[k] = rs[i].first_put_s;
            k++;
        }
    if (!k)
        return;
    qsort(e, (size_t)k, sizeof(double), cmp_double);
    qsort(f, (size_t)k, sizeof(double), cmp_double);
    printf("%-7s %2d rounds: elected median %.2f s (min %.2f, max %.2f); first put median %.2f s "
           "(min %.2f, max %.2f) = %.2f x TTL (max %.2f x TTL)\n",
           sig, k, e[k / 2], e[0], e[k - 1], f[k / 2], f[0], f[k - 1], f[k / 2] / ttl,
           f[k - 1] / ttl);
}

static int run_failover(bench_t *b)
{
    const opts_t *o = b->o;
    hcluster_t c = {.name = "failover",
                    .ha = 1,
                    .oplog = 1,
                    .sync_ack = o->failover_sync_ack,
                    .nmasters = (int)o->masters};
    if (cluster_start(b, &c) != 0)
        return -1;
    int status = -1;
    writer_t w = {.value_size = o->value_size};
    pthread_t th;
    int started = 0;
    w.s = store_open(&c);
    if (!w.s || pthread_create(&th, NULL, writer_main, &w) != 0)
        goto out;
    started = 1;
    if (wait_puts(&w, PUTS_FLOWING, LEADER_WAIT_MS) != 0) {
        fprintf(stderr, PROGRAM ": failover: puts do not succeed\n");
        goto out;
    }
    printf("\nfailover: %d masters (--enable_oplog, --oplog_sync_ack=%s), %d etcd members, "
           "lease TTL %" PRId64 " s, 1 writer putting %" PRIu64 " B values\n",
           c.nmasters, c.sync_ack ? "true" : "false", b->etcd.n, o->ttl_s, o->value_size);
    printf("%-5s %-7s %10s %12s %8s %10s\n", "round", "signal", "elected_s", "first_put_s",
           "vs_ttl", "put_errors");
    int total = (int)(o->rounds + o->stop_rounds);
    round_result_t *rs = calloc((size_t)total, sizeof(*rs));
    int done = 0;
    status = 0;
    for (int i = 0; rs && i < total; i++) {
        round_result_t *r = &rs[i];
        r->round = i + 1;
        int sig = i < o->rounds ? SIGKILL : SIGSTOP;
        r->signal = sig == SIGKILL ? "SIGKILL" : "SIGSTOP";
        int rc = failover_round(b, &c, &w, sig, r);
        done = i + 1;
        double ttl = (double)o->ttl_s;
        printf("%-5d %-7s %10.2f %12.2f %8.2f %10" PRIu64 "%s\n", r->round, r->signal, r->elected_s,
               r->first_put_s, r->first_put_s >= 0 ? r->first_put_s / ttl : -1.0, r->put_errors,
               r->ok ? "" : "  (no failover within the wait)");
        fflush(stdout);
        json_t *row = json_object();
        json_object_set_new(row, "round", json_integer(r->round));
        json_object_set_new(row, "signal", json_string(r->signal));
        json_object_set_new(row, "elected_s",
                            r->elected_s >= 0 ? json_real(r->elected_s) : json_null());
        json_object_set_new(row, "first_put_s",
                            r->first_put_s >= 0 ? json_real(r->first_put_s) : json_null());
        json_object_set_new(row, "first_put_vs_ttl",
                            r->first_put_s >= 0 ? json_real(r->first_put_s / ttl) : json_null());
        json_object_set_new(row, "put_errors", json_integer((json_int_t)r->put_errors));
        json_array_append_new(b->failover_rows, row);
        if (rc != 0) {
            status = -1;
            break;
        }
    }
    print_failover_summary(rs, done, "SIGKILL", (double)o->ttl_s);
    print_failover_summary(rs, done, "SIGSTOP", (double)o->ttl_s);
    free(rs);
out:
    if (started) {
        atomic_store(&w.stop, 1);
        pthread_join(th, NULL);
    }
    mc_store_free(w.s);
    if (cluster_stop(b, &c) != 0)
        status = -1;
    if (status != 0)
        b->failed = 1;
    return status;
}

/* ---- part 2: the operation log's cost -------------------------------------------------------- */

typedef struct lane {
    mc_store_t *s;
    int id;
    uint64_t value_size;
    atomic_int *phase; /* 0 warm-up, 1 measured, 2 stop */
    char prefix[64];
    uint64_t puts, errors, timed_ns; /* measured phase only */
    uint64_t next;                   /* keys used in this generation */
    bench_latencies_t lat;
} lane_t;

/* Removes this lane's generation (keys prefix-0 .. prefix-(next-1)). */
static void lane_retire(lane_t *l)
{
    char(*keys)[96] = malloc(sizeof(*keys) * LANE_KEYS);
    const char **ptrs = malloc(sizeof(*ptrs) * LANE_KEYS);
    int *res = malloc(sizeof(int) * LANE_KEYS);
    if (keys && ptrs && res) {
        for (uint64_t i = 0; i < l->next; i++) {
            snprintf(keys[i], sizeof(keys[i]), "%s-%" PRIu64, l->prefix, i);
            ptrs[i] = keys[i];
        }
        mc_store_batch_remove(l->s, ptrs, l->next, 1, res);
    }
    free(keys);
    free(ptrs);
    free(res);
    l->next = 0;
}

static void *lane_main(void *arg)
{
    lane_t *l = arg;
    uint8_t *v = malloc(l->value_size);
    if (!v)
        return NULL;
    memset(v, 0x5a + l->id, l->value_size);
    char key[96];
    uint64_t gen = 0;
    snprintf(l->prefix, sizeof(l->prefix), "habt-%d-%d-%" PRIu64, (int)getpid(), l->id, gen);
    int phase;
    while ((phase = atomic_load(l->phase)) != 2) {
        if (l->next == LANE_KEYS) { /* not timed */
            lane_retire(l);
            snprintf(l->prefix, sizeof(l->prefix), "habt-%d-%d-%" PRIu64, (int)getpid(), l->id,
                     ++gen);
        }
        snprintf(key, sizeof(key), "%s-%" PRIu64, l->prefix, l->next++);
        v[0] = (uint8_t)l->next;
        uint64_t t0 = mc_now_ns();
        int rc = mc_store_put(l->s, key, v, l->value_size, NULL);
        uint64_t t1 = mc_now_ns();
        if (phase == 1 && atomic_load(l->phase) == 1) { /* wholly inside the measured phase */
            l->timed_ns += t1 - t0;
            if (rc == 0) {
                l->puts++;
                bench_latencies_add(&l->lat, (double)(t1 - t0) / 1e3);
            } else {
                l->errors++;
            }
        }
    }
    lane_retire(l);
    free(v);
    return NULL;
}

typedef struct tp_row {
    const char *config;
    uint64_t lanes, puts, errors;
    double ops, vs_plain;
    bench_latency_stats_t lat;
} tp_row_t;

/*
 * Runs `n` lanes for warm-up + duration. A lane's clock runs only inside its put calls wholly in
 * the measured phase (a retirement's remove is left out): ops/s is the sum over lanes of
 * successful puts / seconds spent in those calls.
 */
static int run_lanes(bench_t *b, mc_store_t **stores, uint64_t n, tp_row_t *row)
{
    lane_t *lanes = calloc(n, sizeof(*lanes));
    pthread_t *th = calloc(n, sizeof(*th));
    atomic_int phase = 0;
    uint64_t started = 0;
    int rc = -1;
    if (!lanes || !th)
        goto out;
    for (uint64_t i = 0; i < n; i++) {
        lanes[i] =
            (lane_t){.s = stores[i], .id = (int)i, .value_size = b->o->value_size, .phase = &phase};
        if (pthread_create(&th[i], NULL, lane_main, &lanes[i]) != 0)
            break;
        started++;
    }
    if (started == n) {
        usleep((useconds_t)(WARMUP_NS / 1000));
        atomic_store(&phase, 1);
        usleep((useconds_t)b->o->duration_s * 1000000u);
        atomic_store(&phase, 2);
        rc = 0;
    }
    atomic_store(&phase, 2);
    for (uint64_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (rc == 0) {
        row->lanes = n;
        row->puts = row->errors = 0;
        row->ops = 0;
        for (uint64_t i = 0; i < n; i++) {
            row->puts += lanes[i].puts;
            row->errors += lanes[i].errors;
            if (lanes[i].timed_ns)
                row->ops += (double)lanes[i].puts * (double)NS_PER_S / (double)lanes[i].timed_ns;
        }
        row->lat = bench_latency_stats(&lanes[0].lat, sizeof(lane_t), n);
    }
out:
    for (uint64_t i = 0; lanes && i < n; i++)
        bench_latencies_free(&lanes[i].lat);
    free(lanes);
    free(th);
    return rc;
}

static void print_tp_header(void)
{
    printf("%-12s %5s %10s %10s %10s %9s %8s\n", "config", "lanes", "ops/s", "p50_us", "p99_us",
           "vs_plain", "errors");
}

static void print_tp_row(const tp_row_t *r)
{
    char vs[32] = "-";
    if (r->vs_plain > 0)
        snprintf(vs, sizeof(vs), "%.3f", r->vs_plain);
    printf("%-12s %5" PRIu64 " %10.0f %10.1f %10.1f %9s %8" PRIu64 "\n", r->config, r->lanes,
           r->ops, r->lat.p50_us, r->lat.p99_us, vs, r->errors);
    fflush(stdout);
}

static json_t *tp_row_json(const tp_row_t *r)
{
    json_t *row = json_object();
    json_object_set_new(row, "config", json_string(r->config));
    json_object_set_new(row, "lanes", json_integer((json_int_t)r->lanes));
    json_object_set_new(row, "puts", json_integer((json_int_t)r->puts));
    json_object_set_new(row, "errors", json_integer((json_int_t)r->errors));
    json_object_set_new(row, "ops_per_s", json_real(r->ops));
    json_object_set_new(row, "p50_us", json_real(r->lat.p50_us));
    json_object_set_new(row, "p99_us", json_real(r->lat.p99_us));
    json_object_set_new(row, "avg_us", json_real(r->lat.avg_us));
    json_object_set_new(row, "vs_plain", r->vs_plain > 0 ? json_real(r->vs_plain) : json_null());
    return row;
}

/* One lane of raw etcd puts for the row duration. */
static int run_etcd_raw(bench_t *b)
{
    uint8_t value[ETCD_RAW_VALUE];
    memset(value, 0xab, sizeof(value));
    bench_latencies_t lat = {0};
    char key[96];
    uint64_t puts = 0, errors = 0, timed = 0;
    uint64_t warm_end = mc_now_ns() + WARMUP_NS,
             end = warm_end + (uint64_t)b->o->duration_s * NS_PER_S;
    for (uint64_t i = 0;; i++) {
        uint64_t t0 = mc_now_ns();
        if (t0 >= end)
            break;
        snprintf(key, sizeof(key), "ha_bench/%d/raw/%04" PRIu64, (int)getpid(), i % ETCD_RAW_KEYS);
        int rc = mc_etcd_put(b->e, key, value, sizeof(value), 0, NULL);
        uint64_t t1 = mc_now_ns();
        if (t0 < warm_end)
            continue;
        timed += t1 - t0;
        if (rc == 0) {
            puts++;
            bench_latencies_add(&lat, (double)(t1 - t0) / 1e3);
        } else {
            errors++;
        }
    }
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "ha_bench/%d/raw/", (int)getpid());
    mc_etcd_delete_prefix(b->e, prefix, NULL);
    tp_row_t r = {.config = "etcd_put", .lanes = 1, .puts = puts, .errors = errors};
    r.ops = timed ? (double)puts * (double)NS_PER_S / (double)timed : 0;
    r.lat = bench_latency_stats(&lat, sizeof(lat), 1);
    bench_latencies_free(&lat);
    printf("raw etcd: mc_etcd_put of %d B values, 1 lane, through the v3 JSON gateway\n",
           ETCD_RAW_VALUE);
    print_tp_row(&r);
    b->etcd_row = tp_row_json(&r);
    json_object_set_new(b->etcd_row, "value_bytes", json_integer(ETCD_RAW_VALUE));
    return errors ? -1 : 0;
}

static int run_oplog(bench_t *b)
{
    const opts_t *o = b->o;
    struct {
        const char *name;
        int ha, oplog, sync, nmasters;
    } configs[] = {
        {"plain", 0, 0, 0, 1},
        {"ha", 1, 0, 0, 2},
        {"oplog_async", 1, 1, 0, 2},
        {"oplog_sync", 1, 1, 1, 2},
    };
    uint64_t max_lanes = 0;
    for (size_t i = 0; i < o->nlanes; i++)
        if (o->lanes[i] > max_lanes)
            max_lanes = o->lanes[i];
    double plain_ops[MAX_LIST] = {0};
    int status = 0;
    printf("\noperation log cost: %" PRIu64 " B puts, %" PRId64 " s per row after 1 s warm-up, "
           "one store client per lane, 1 mooncake_client holder, %d etcd members\n",
           o->value_size, o->duration_s, b->etcd.n);
    print_tp_header();
    for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
        hcluster_t c = {.name = configs[k].name,
                        .ha = configs[k].ha,
                        .oplog = configs[k].oplog,
                        .sync_ack = configs[k].sync,
                        .nmasters = configs[k].nmasters};
        if (cluster_start(b, &c) != 0)
            return -1;
        mc_store_t **stores = calloc(max_lanes, sizeof(*stores));
        int ok = stores != NULL;
        for (uint64_t i = 0; ok && i < max_lanes; i++)
            ok = (stores[i] = store_open(&c)) != NULL;
        for (size_t li = 0; ok && li < o->nlanes; li++) {
            tp_row_t r = {.config = configs[k].name};
            if (run_lanes(b, stores, o->lanes[li], &r) != 0) {
                ok = 0;
                break;
            }
            if (k == 0)
                plain_ops[li] = r.ops;
            r.vs_plain = plain_ops[li] > 0 ? r.ops / plain_ops[li] : 0;
            print_tp_row(&r);
            json_array_append_new(b->oplog_rows, tp_row_json(&r));
            if (r.errors)
                status = -1;
        }
        for (uint64_t i = 0; stores && i < max_lanes; i++)
            mc_store_free(stores[i]);
        free(stores);
        if (cluster_stop(b, &c) != 0 || !ok)
            status = -1;
        if (!ok)
            break;
    }
    if (run_etcd_raw(b) != 0)
        status = -1;
    if (status != 0)
        b->failed = 1;
    return status;
}

/* ---- main ------------------------------------------------------------------------------------ */

static json_t *config_json(const bench_t *b)
{
    const opts_t *o = b->o;
    json_t *c = json_object();
    json_object_set_new(c, "parts", json_string(o->parts_text));
    json_object_set_new(c, "rounds", json_integer(o->rounds));
    json_object_set_new(c, "stop_rounds", json_integer(o->stop_rounds));
    json_object_set_new(c, "ha_lease_ttl_seconds", json_integer(o->ttl_s));
    json_object_set_new(c, "masters", json_integer(o->masters));
    json_object_set_new(c, "etcd_members", json_integer(o->etcd_members));
    json_object_set_new(c, "failover_sync_ack", json_boolean(o->failover_sync_ack));
    json_object_set_new(c, "duration_s", json_integer(o->duration_s));
    json_object_set_new(c, "value_size", json_integer((json_int_t)o->value_size));
    json_object_set_new(c, "holder_segment_size", json_integer((json_int_t)o->holder_segment));
    json_object_set_new(c, "lanes", bench_u64_list_json(o->lanes, o->nlanes));
    return c;
}

static int write_json(bench_t *b)
{
    json_t *report = bench_report_json(PROGRAM, config_json(b));
    json_t *load = json_object();
    json_object_set_new(load, "loadavg_start",
                        json_pack("[fff]", b->load_start[0], b->load_start[1], b->load_start[2]));
    json_object_set_new(load, "loadavg_end",
                        json_pack("[fff]", b->load_end[0], b->load_end[1], b->load_end[2]));
    json_object_set_new(report, "load", load);
    json_object_set_new(report, "failover", json_incref(b->failover_rows));
    json_object_set_new(report, "oplog", json_incref(b->oplog_rows));
    json_object_set_new(report, "etcd_put", b->etcd_row ? json_incref(b->etcd_row) : json_null());
    return bench_report_write(report, b->o->json_path, PROGRAM);
}

int main(int argc, char **argv)
{
    opts_t o = {.rounds = 5,
                .stop_rounds = 1,
                .ttl_s = MC_MASTER_VIEW_LEASE_TTL_S,
                .masters = 3,
                .etcd_members = 3,
                .duration_s = 5,
                .value_size = 4096,
                .holder_segment = UINT64_C(1) << 30,
                .lanes_text = "1,8",
                .parts_text = "failover,oplog",
                .json_path = "",
                .failover_sync_ack = 1};
    mc_flag_t flags[] = {
        {"parts", MC_FLAG_STRING, &o.parts_text,
         "what to measure: failover, oplog, or failover,oplog"},
        {"rounds", MC_FLAG_INT, &o.rounds, "failover rounds that SIGKILL the leader", 0, 100},
        {"stop_rounds", MC_FLAG_INT, &o.stop_rounds,
         "failover rounds that SIGSTOP the leader (after the SIGKILL ones)", 0, 100},
        {"ha_lease_ttl_seconds", MC_FLAG_INT, &o.ttl_s,
         "the masters' election lease TTL (mooncake_master --ha_lease_ttl_seconds)", 1, 60},
        {"masters", MC_FLAG_INT, &o.masters, "masters of the failover cluster", 2, MAX_MASTERS},
        {"etcd_members", MC_FLAG_INT, &o.etcd_members, "etcd members (1 or 3)", 1,
         MC_ETCD_CLUSTER_MAX},
        {"failover_sync_ack", MC_FLAG_BOOL, &o.failover_sync_ack,
         "--oplog_sync_ack of the failover cluster's masters"},
        {"duration", MC_FLAG_INT, &o.duration_s,
         "seconds measured per throughput row, after 1 s of warm-up", 1, 3600},
        {"lanes", MC_FLAG_STRING, &o.lanes_text,
         "throughput rows: comma list of lane counts (threads, one store client each)"},
        {"value_size", MC_FLAG_SIZE, &o.value_size, "bytes per put"},
        {"holder_segment_size", MC_FLAG_SIZE, &o.holder_segment,
         "the mooncake_client holder's global_segment_size"},
        {"keep_logs", MC_FLAG_BOOL, &o.keep_logs, "keep the process logs even after a clean run"},
        {"json", MC_FLAG_STRING, &o.json_path, "also write machine, config and every row here"},
    };
    size_t nflags = sizeof(flags) / sizeof(flags[0]);
    char err[256] = "";
    int rc = mc_flags_parse(flags, nflags, NULL, argc, argv, PROGRAM,
                            "Usage: " PROGRAM " [flags]  (starts its own etcd, masters and "
                            "clients on loopback; see the comment atop tools/ha_bench.c)",
                            err, sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 0;
    if (rc == 0)
        rc = validate_opts(&o, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": %s\n", err);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    bench_t b = {.o = &o};
    if (sibling_program("mooncake_master", b.master_exe, sizeof(b.master_exe)) != 0 ||
        sibling_program("mooncake_client", b.client_exe, sizeof(b.client_exe)) != 0) {
        fprintf(stderr, PROGRAM ": mooncake_master / mooncake_client not found next to this "
                                "program\n");
        return 1;
    }
    if (access("/usr/bin/etcd", X_OK) != 0) {
        fprintf(stderr, PROGRAM ": /usr/bin/etcd not found (Debian's etcd-server)\n");
        return 1;
    }
    snprintf(b.log_dir, sizeof(b.log_dir), "/tmp/" PROGRAM ".XXXXXX");
    if (!mkdtemp(b.log_dir)) {
        fprintf(stderr, PROGRAM ": mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    b.failover_rows = json_array();
    b.oplog_rows = json_array();
    read_loadavg(b.load_start);
    printf("load average at start: %.2f %.2f %.2f (%ld CPUs online)\n", b.load_start[0],
           b.load_start[1], b.load_start[2], sysconf(_SC_NPROCESSORS_ONLN));
    if (mc_etcd_cluster_start(&b.etcd, (int)o.etcd_members) != 0) {
        fprintf(stderr, PROGRAM ": etcd did not start\n");
        b.failed = 1;
        goto out;
    }
    if (mc_etcd_create(b.etcd.endpoints, 2000, &b.e) != 0) {
        b.failed = 1;
        goto out;
    }
    if (o.do_failover)
        run_failover(&b);
    if (o.do_oplog)
        run_oplog(&b);
out:
    read_loadavg(b.load_end);
    printf("load average at end: %.2f %.2f %.2f\n", b.load_end[0], b.load_end[1], b.load_end[2]);
    int status = b.failed ? 1 : 0;
    if (*o.json_path && write_json(&b) != 0)
        status = 1;
    mc_etcd_destroy(b.e);
    mc_etcd_cluster_destroy(&b.etcd);
    if (status == 0 && !o.keep_logs) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b.log_dir);
        if (system(cmd) != 0)
            fprintf(stderr, PROGRAM ": could not remove %s\n", b.log_dir);
    } else {
        fprintf(stderr, PROGRAM ": process logs kept in %s\n", b.log_dir);
    }
    json_decref(b.failover_rows);
    json_decref(b.oplog_rows);
    json_decref(b.etcd_row);
    return status;
}
