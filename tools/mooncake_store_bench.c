/*
 * mooncake_store_bench — throughput and latency of the Mooncake Store through its C API
 * (include/mooncake/store.h), next to the machine's limits measured in the same run.
 *
 * The bench is one store client (normally a pure client, --global_segment_size=0) that puts and
 * gets objects whose bytes live in a separate mooncake_client's segment — the normal setup. Either
 * point it at a running cluster (--master_server_address), or let it start one on free ports with
 * --spawn_cluster: a mooncake_master and a mooncake_client (--cluster_segment_size bytes) taken
 * from the directory of this binary, stopped with SIGTERM at the end. Their logs go to a temporary
 * directory that is removed after a clean run and kept (and named) after a failed one.
 *
 * Rows: every (value size, operation, threads, batch) of the comma lists, in that nesting. Each row
 * runs --threads threads sharing the one store for 1 s of warm-up plus --duration s; every thread
 * loops "one call of --batch_size keys" (put/get, or put_from/get_into with --zero_copy, the
 * _batch forms when the batch is above 1) and records the call's latency.
 *   put    each thread writes its own key space of --num_keys keys; when the space is used up it
 *          removes that generation with one batch remove (in the measured time, not in any
 *          latency) and writes the next, so every put stores fresh bytes (a put of an existing key
 *          is a no-op) and the live working set stays threads x num_keys x value size.
 *   get    reads keys written by a prepare phase (threads x num_keys per value size, not timed).
 *   mixed  alternates one get call and one put call per thread, as above.
 * Each thread puts from and gets into its own max(batch x value, 64 MiB) buffers, a different
 * window every call, so no call finds its buffer in the CPU cache (as in the memcpy limit).
 * Every put stamps the first and last 64 bytes of its value with a pattern derived from the key;
 * every get checks the returned size and those bytes, and counts mismatches ("bad") apart from
 * calls that returned an error ("errors").
 *
 * Before the first row a first-touch pass puts fresh objects of max(largest value, 4 MiB) over
 * --first_touch_bytes (default: 85% of the spawned segment, else twice the largest working set)
 * and removes them: these VMs are slow on the first touch of fresh memory, so the rows must not
 * time the mooncake_client's page faults. Its throughput is reported as its own row.
 *
 * Existing keys: a put of a key that is already stored answers 0 and keeps the old value (as
 * upstream: src/client/store_client.c write_objects), moving no bytes. Before a put generation's
 * first call (and before each fill call) one mc_store_batch_exist over its keys, outside every
 * call's latency, finds the keys already there; puts that hit them are counted as "existing"
 * (table column "exist", JSON "existing"), not in ops, bytes or GB/s, warned about, and make the
 * JSON's "ok" false and the exit status 3. Keys live under --key_prefix (default
 * mcbench-<pid>-<time>, unique per run); a prefix is at most 63 bytes of [A-Za-z0-9_-] and is
 * refused, never cut, when longer. Every key under <prefix>/ is removed when the run ends.
 * With --json FILE.json a CSV with one line per row is written next to it (FILE.csv).
 *
 * Limits, per value size (bench_limits.c): single-thread memcpy at that size (warm, 256 MiB
 * working set) and a raw loopback TCP stream at that size; rows print vs_memcpy and vs_raw_tcp.
 * With a spawned cluster the master's RSS (VmRSS) is printed after every row, and --rss_objects N
 * puts N 16-byte objects and reports the master's RSS growth per million objects.
 *
 * --protocol: tcp        the engine's tcp, same-host peers through shared memory (one memcpy);
 *             tcp_forced tcp with MC_DISABLE_SHM=1 in this process and the spawned cluster, so
 *                        same-host bytes really cross TCP;
 *             rdma       passed through (when built).
 *
 * Threads: main owns everything; worker threads share the store and read the run description,
 * and write only their own worker_t. Exit status: 0, 1 (setup failure, errors or bad bytes),
 * 2 when a store call made no progress for STALL_SECONDS (the cluster is killed, the rows so far
 * are printed), or 3 when puts found existing keys (nothing else wrong).
 */
#include "mooncake/store.h"

#include "bench_limits.h"
#include "flags.h"
#include "log.h"
#include "net.h"
#include "parse.h"

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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "mooncake_store_bench"

#define NS_PER_S UINT64_C(1000000000)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

#define MAX_LIST 32                /* values in any comma list */
#define KEY_MAX 192                /* bytes of one generated key, NUL included */
#define KEY_PREFIX_MAX 64          /* bytes of --key_prefix, NUL included */
#define SAMPLE_BYTES 64            /* verified at each end of every value */
#define WARMUP_NS NS_PER_S         /* not counted at the start of every row */
#define OVERRUN_NS (60 * NS_PER_S) /* longest a row runs past --duration for one call */
#define STALL_SECONDS 120          /* no call finished for this long: the store hangs */
#define AUTO_WORKING_SET                                                                           \
    GIB                    /* --num_keys=0: threads x keys x value <= this (or half of a           \
                              spawned pool) ... */
#define AUTO_MAX_KEYS 1024 /* ... and at most this many keys per thread */
#define FIRST_TOUCH_MIN_VALUE (4 * MIB)
#define FIRST_TOUCH_SEGMENT_SHARE 0.85 /* of the spawned segment; the master evicts at 90% */
#define FILL_MAX_BATCH 64              /* keys per call when preparing */
#define REGION_MIN (64 * MIB)          /* per-thread buffer floor: twice the L3 of these VMs */
#define RSS_OBJECT_BYTES 16
#define RSS_BATCH 256
#define MASTER_READY_TIMEOUT_MS (30 * 1000)
#define CLIENT_READY_TIMEOUT_MS (120 * 1000)
#define CLIENT_READY_PREFIX "mooncake_client ready: segment "

/* ---- options ----------------------------------------------------------------------------- */

typedef enum bench_op {
    OP_PUT,
    OP_GET,
    OP_MIXED,
} bench_op_t;

static const char *const op_names[] = {"put", "get", "mixed"};

typedef struct bench_opts {
    char *master_addr;
    char *metadata_server;
    char *local_hostname;
    char *protocol;
    char *operation_text;
    char *value_size_text;
    char *batch_size_text;
    char *threads_text;
    char *json_path;
    char *key_prefix;
    char *checksum_text;
    int64_t duration_s;
    int64_t replica_num;
    int64_t num_keys;
    int64_t rss_objects;
    uint64_t global_segment_size;
    uint64_t local_buffer_size;
    uint64_t cluster_segment_size;
    uint64_t first_touch_bytes;
    int zero_copy;
    int spawn_cluster;
    int limits;
    int master_addr_set;

    /* derived */
    bench_op_t ops[MAX_LIST];
    size_t nops;
    uint64_t values[MAX_LIST];
    size_t nvalues;
    uint64_t batches[MAX_LIST];
    size_t nbatches;
    uint64_t threads[MAX_LIST];
    size_t nthreads;
    int checksums[2]; /* --checksum list: 1 on, 0 off, in the order given */
    size_t nchecksums;
    const char *store_protocol; /* what the store and the spawned client are given */
    int disable_shm;
    uint64_t max_value, max_batch, max_threads;
} bench_opts_t;

static int parse_ops(bench_opts_t *o, char *err, size_t errlen)
{
    char *copy = strdup(o->operation_text);
    if (!copy)
        return MC_ERR_INTERNAL_ERROR;
    char *save = NULL;
    int rc = 0;
    o->nops = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < 3 && strcmp(tok, op_names[k]) != 0)
            k++;
        if (k == 3 || o->nops == MAX_LIST) {
            snprintf(err, errlen, "--operation: \"%s\" is not put, get or mixed", tok);
            rc = MC_ERR_INVALID_PARAMS;
        } else {
            o->ops[o->nops++] = (bench_op_t)k;
        }
    }
    free(copy);
    if (rc == 0 && o->nops == 0) {
        snprintf(err, errlen, "--operation: empty list");
        rc = MC_ERR_INVALID_PARAMS;
    }
    return rc;
}

static uint64_t list_max(const uint64_t *v, size_t n)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* --checksum: "on", "off", "on,off" or "off,on". */
static int parse_checksums(bench_opts_t *o, char *err, size_t errlen)
{
    static const char *const forms[] = {"on", "off", "on,off", "off,on"};
    static const int lists[4][2] = {{1, 0}, {0, 0}, {1, 0}, {0, 1}};
    static const size_t counts[4] = {1, 1, 2, 2};
    for (size_t k = 0; k < 4; k++) {
        if (strcmp(o->checksum_text, forms[k]) == 0) {
            o->checksums[0] = lists[k][0];
            o->checksums[1] = lists[k][1];
            o->nchecksums = counts[k];
            return 0;
        }
    }
    snprintf(err, errlen, "--checksum must be on, off, on,off or off,on, not \"%s\"",
             o->checksum_text);
    return MC_ERR_INVALID_PARAMS;
}

/* Checks the parsed flags and fills the derived fields. One line in err on failure. */
static int validate_opts(bench_opts_t *o, char *err, size_t errlen)
{
    if (!strcmp(o->protocol, "tcp") || !strcmp(o->protocol, "rdma")) {
        o->store_protocol = o->protocol;
    } else if (!strcmp(o->protocol, "tcp_forced")) {
        o->store_protocol = "tcp";
        o->disable_shm = 1;
    } else {
        snprintf(err, errlen, "--protocol must be tcp, tcp_forced or rdma, not \"%s\"",
                 o->protocol);
        return MC_ERR_INVALID_PARAMS;
    }
    if (parse_ops(o, err, errlen) != 0 || parse_checksums(o, err, errlen) != 0 ||
        bench_parse_list(o->value_size_text, 1, 1, MC_MAX_VALUE_SIZE, o->values, MAX_LIST,
                         &o->nvalues, "value_size", err, errlen) != 0 ||
        bench_parse_list(o->batch_size_text, 0, 1, 4096, o->batches, MAX_LIST, &o->nbatches,
                         "batch_size", err, errlen) != 0 ||
        bench_parse_list(o->threads_text, 0, 1, 256, o->threads, MAX_LIST, &o->nthreads, "threads",
                         err, errlen) != 0)
        return MC_ERR_INVALID_PARAMS;
    o->max_value = list_max(o->values, o->nvalues);
    o->max_batch = list_max(o->batches, o->nbatches);
    o->max_threads = list_max(o->threads, o->nthreads);
    if (o->local_buffer_size == 0) {
        snprintf(err, errlen, "--local_buffer_size must be > 0 (a store without one cannot put)");
        return MC_ERR_INVALID_PARAMS;
    }
    size_t plen = strlen(o->key_prefix);
    if (plen >= KEY_PREFIX_MAX) {
        snprintf(err, errlen,
                 "--key_prefix is %zu bytes: it would be cut to %d; give one of at most %d bytes",
                 plen, KEY_PREFIX_MAX - 1, KEY_PREFIX_MAX - 1);
        return MC_ERR_INVALID_PARAMS;
    }
    if (plen > 0 && strspn(o->key_prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-") != plen) {
        snprintf(err, errlen,
                 "--key_prefix \"%s\": only letters, digits, '_' and '-' (it is also a regex "
                 "the run's cleanup removes by)",
                 o->key_prefix);
        return MC_ERR_INVALID_PARAMS;
    }
    if (o->spawn_cluster && o->cluster_segment_size == 0) {
        snprintf(err, errlen, "--cluster_segment_size must be > 0");
        return MC_ERR_INVALID_PARAMS;
    }
    /* Buffers: every thread owns max(batch x value, REGION_MIN) bytes to put from and as many to
     * get into. */
    double region = (double)o->max_batch * (double)o->max_value;
    double pool = (double)o->max_threads * (region < REGION_MIN ? REGION_MIN : region);
    if (2 * pool > (double)(sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE)) / 2) {
        snprintf(err, errlen,
                 "threads x max(batch x value size, 64 MiB) (%.0f bytes, twice) does not fit in "
                 "half of this machine's memory",
                 pool);
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

/* ---- small helpers ----------------------------------------------------------------------- */

/* VmRSS (or VmHWM, ...) of a process in KiB; -1 when unreadable. */
static long proc_status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kib = -1;
    size_t flen = strlen(field);
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, field, flen) && line[flen] == ':') {
            kib = strtol(line + flen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

/* ---- value pattern ----------------------------------------------------------------------- */

/* FNV-1a: the key's pattern seed. */
static uint64_t key_seed(const char *key)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    return h;
}

/* Byte `pos` of the pattern of the key with `seed`: a splitmix64 word per 8 bytes. */
static uint8_t pattern_byte(uint64_t seed, uint64_t pos)
{
    uint64_t z = seed + (pos >> 3) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return (uint8_t)(z >> ((pos & 7) * 8));
}

/* The sampled positions of a value of `size` bytes: [0, head) and [tail, size). */
static void sample_ranges(uint64_t size, uint64_t *head, uint64_t *tail)
{
    uint64_t n = size < SAMPLE_BYTES ? size : SAMPLE_BYTES;
    *head = n;
    *tail = size - n;
}

static void stamp_value(uint8_t *v, uint64_t size, uint64_t seed)
{
    uint64_t head, tail;
    sample_ranges(size, &head, &tail);
    for (uint64_t p = 0; p < head; p++)
        v[p] = pattern_byte(seed, p);
    for (uint64_t p = tail; p < size; p++)
        v[p] = pattern_byte(seed, p);
}

/* Zeroes the sampled bytes, so a get that writes nothing cannot pass. */
static void clear_sample(uint8_t *v, uint64_t size)
{
    uint64_t head, tail;
    sample_ranges(size, &head, &tail);
    memset(v, 0, head);
    memset(v + tail, 0, size - tail);
}

/* Offset of the first sampled byte that differs from the pattern, or -1 when all match. */
static int64_t verify_value(const uint8_t *v, uint64_t size, uint64_t seed)
{
    uint64_t head, tail;
    sample_ranges(size, &head, &tail);
    for (uint64_t p = 0; p < head; p++)
        if (v[p] != pattern_byte(seed, p))
            return (int64_t)p;
    for (uint64_t p = tail; p < size; p++)
        if (v[p] != pattern_byte(seed, p))
            return (int64_t)p;
    return -1;
}

/* ---- the spawned cluster ----------------------------------------------------------------- */

typedef struct cluster {
    pid_t master_pid, client_pid;
    int rpc_port, metrics_port, client_port;
    char master_addr[64];
    char segment[MC_ENDPOINT_MAX];
    char log_dir[64];
    char master_log[128], client_log[128];
} cluster_t;

/* Three distinct free ports on 127.0.0.1 (held open together so they differ). */
static int free_ports(int *ports, int n)
{
    int fds[3];
    int rc = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = mc_net_listen_tcp("127.0.0.1", 0, 1, &ports[i]);
        if (fds[i] < 0) {
            rc = -1;
            n = i;
            break;
        }
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return rc;
}

/* "<dir of this executable>/<name>" into out. */
static int sibling_program(const char *name, char *out, size_t cap)
{
    char exe[4096];
    if (bench_self_exe(exe, sizeof(exe)) != 0)
        return -1;
    int w = snprintf(out, cap, "%s/%s", dirname(exe), name);
    return w > 0 && (size_t)w < cap ? 0 : -1;
}

/* 1 when the child has exited (it is reaped then). */
static int child_exited(pid_t pid)
{
    int wstatus;
    return waitpid(pid, &wstatus, WNOHANG) == pid;
}

static int wait_master_ready(const cluster_t *c)
{
    uint64_t deadline = mc_now_ms() + MASTER_READY_TIMEOUT_MS;
    while (mc_now_ms() < deadline) {
        if (child_exited(c->master_pid))
            return -1;
        int fd = mc_net_connect_tcp("127.0.0.1", c->rpc_port, 200);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        usleep(50 * 1000);
    }
    return -1;
}

/* Reads the client's stdout until its ready line; copies the segment name. */
static int wait_client_ready(cluster_t *c, int fd)
{
    char buf[4096] = "";
    size_t len = 0;
    uint64_t deadline = mc_now_ms() + CLIENT_READY_TIMEOUT_MS;
    for (;;) {
        char *nl;
        while ((nl = memchr(buf, '\n', len)) != NULL) {
            *nl = '\0';
            if (!strncmp(buf, CLIENT_READY_PREFIX, strlen(CLIENT_READY_PREFIX))) {
                snprintf(c->segment, sizeof(c->segment), "%.*s", (int)sizeof(c->segment) - 1,
                         buf + strlen(CLIENT_READY_PREFIX));
                return 0;
            }
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len);
        }
        uint64_t now = mc_now_ms();
        if (now >= deadline || len == sizeof(buf))
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, (int)(deadline - now));
        if (n < 0 && errno != EINTR)
            return -1;
        if (n <= 0)
            continue;
        ssize_t got = read(fd, buf + len, sizeof(buf) - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1; /* the client exited */
        len += (size_t)got;
    }
}

static int open_log(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/*
 * Starts mooncake_master and mooncake_client on free ports; their logs go to c->log_dir. The
 * environment (MC_DISABLE_SHM for tcp_forced) is inherited. Returns 0, or -1 with what is
 * running stopped.
 */
static int cluster_start(cluster_t *c, const bench_opts_t *o)
{
    memset(c, 0, sizeof(*c));
    char master_exe[4200], client_exe[4200];
    int ports[3];
    snprintf(c->log_dir, sizeof(c->log_dir), "/tmp/" PROGRAM ".XXXXXX");
    if (sibling_program("mooncake_master", master_exe, sizeof(master_exe)) != 0 ||
        sibling_program("mooncake_client", client_exe, sizeof(client_exe)) != 0 ||
        free_ports(ports, 3) != 0 || !mkdtemp(c->log_dir)) {
        fprintf(stderr, PROGRAM ": cannot prepare the cluster: %s\n", strerror(errno));
        return -1;
    }
    c->rpc_port = ports[0];
    c->metrics_port = ports[1];
    c->client_port = ports[2];
    snprintf(c->master_addr, sizeof(c->master_addr), "127.0.0.1:%d", c->rpc_port);
    snprintf(c->master_log, sizeof(c->master_log), "%s/master.log", c->log_dir);
    snprintf(c->client_log, sizeof(c->client_log), "%s/client.log", c->log_dir);

    char rpc_port[32], metrics_port[32], seg[64], port[32], master[96], meta[512];
    snprintf(rpc_port, sizeof(rpc_port), "--rpc_port=%d", c->rpc_port);
    snprintf(metrics_port, sizeof(metrics_port), "--metrics_port=%d", c->metrics_port);
    snprintf(seg, sizeof(seg), "--global_segment_size=%" PRIu64, o->cluster_segment_size);
    snprintf(port, sizeof(port), "--port=%d", c->client_port);
    snprintf(master, sizeof(master), "--master_server_address=%s", c->master_addr);
    snprintf(meta, sizeof(meta), "--metadata_server=%s", o->metadata_server);
    char proto[64];
    snprintf(proto, sizeof(proto), "--protocol=%s", o->store_protocol);
    char *margv[] = {master_exe, rpc_port, metrics_port, "--rpc_address=127.0.0.1", NULL};
    char *cargv[] = {client_exe, seg, "--host=127.0.0.1", port, meta, master, proto, NULL};

    int mlog = open_log(c->master_log), clog = open_log(c->client_log), pipefd[2] = {-1, -1};
    if (mlog < 0 || clog < 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        fprintf(stderr, PROGRAM ": cannot create the cluster logs in %s: %s\n", c->log_dir,
                strerror(errno));
        goto fail;
    }
    c->master_pid = bench_spawn(PROGRAM, master_exe, margv, mlog, mlog, NULL, NULL);
    if (c->master_pid < 0 || wait_master_ready(c) != 0) {
        fprintf(stderr, PROGRAM ": mooncake_master did not start listening on port %d\n",
                c->rpc_port);
        goto fail;
    }
    c->client_pid = bench_spawn(PROGRAM, client_exe, cargv, pipefd[1], clog, NULL, NULL);
    close(pipefd[1]);
    pipefd[1] = -1;
    if (c->client_pid < 0 || wait_client_ready(c, pipefd[0]) != 0) {
        fprintf(stderr, PROGRAM ": mooncake_client did not report ready\n");
        goto fail;
    }
    /* The client prints nothing more on stdout; it ignores SIGPIPE should it try. */
    close(pipefd[0]);
    close(mlog);
    close(clog);
    char size_text[32];
    const char *size = mc_format_size(o->cluster_segment_size, size_text, sizeof(size_text));
    MC_INFO("cluster: mooncake_master pid %d at %s, mooncake_client pid %d segment %s (%s), "
            "logs in %s",
            (int)c->master_pid, c->master_addr, (int)c->client_pid, c->segment, size, c->log_dir);
    return 0;
fail:
    fprintf(stderr, PROGRAM ": logs: %s, %s\n", c->master_log, c->client_log);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (mlog >= 0)
        close(mlog);
    if (clog >= 0)
        close(clog);
    if (c->client_pid > 0)
        bench_stop_child(PROGRAM, c->client_pid, "mooncake_client");
    if (c->master_pid > 0)
        bench_stop_child(PROGRAM, c->master_pid, "mooncake_master");
    c->client_pid = c->master_pid = 0;
    return -1;
}

/* Stops the client (it unmounts its segment), then the master. Removes the logs when both exited
 * cleanly and keep_logs is 0. Returns 0 on clean exits. */
static int cluster_stop(cluster_t *c, int keep_logs)
{
    int rc = bench_stop_child(PROGRAM, c->client_pid, "mooncake_client");
    rc |= bench_stop_child(PROGRAM, c->master_pid, "mooncake_master");
    c->client_pid = c->master_pid = 0;
    if (rc != 0 || keep_logs) {
        fprintf(stderr, PROGRAM ": cluster logs kept: %s, %s\n", c->master_log, c->client_log);
    } else {
        unlink(c->master_log);
        unlink(c->client_log);
        rmdir(c->log_dir);
    }
    return rc;
}

/* ---- the benchmark state ------------------------------------------------------------------ */

typedef struct bench {
    const bench_opts_t *o;
    mc_store_t *store;     /* the one the current row uses: stores[checksum] */
    mc_store_t *stores[2]; /* [0] checksums off, [1] on; NULL when --checksum does not list it */
    int checksum;          /* of the current row */
    cluster_t *cluster;    /* NULL: an external cluster */
    mc_replicate_config_t rcfg;
    char prefix[KEY_PREFIX_MAX]; /* every key of this run starts with it */
    uint8_t *src_pool, *dst_pool;
    size_t region_len; /* bytes per thread in each pool */
    size_t pool_len;
    bench_memcpy_area_t area;
    uint64_t limit_values[MAX_LIST + 1];
    bench_limits_t limit_cache[MAX_LIST + 1];
    size_t nlimits;
    json_t *rows;
    json_t *first_touch; /* row, or NULL */
    json_t *rss_report;  /* or NULL */
    uint64_t total_errors, total_bad, total_existing;
    int ok; /* the JSON's "ok": exit status 0 */
    long master_rss_start_kib;
} bench_t;

/* Keys per thread for value size v: --num_keys, or the automatic working set. Never below the
 * largest batch, so one batch fits in a generation. */
static uint64_t keys_per_thread(const bench_t *b, uint64_t v)
{
    const bench_opts_t *o = b->o;
    uint64_t n = (uint64_t)o->num_keys;
    if (n == 0) {
        uint64_t per_key = v * o->max_threads * (uint64_t)o->replica_num;
        /* A spawned pool smaller than the default working set: stay at half of it, well under
         * the master's 90 % eviction watermark, or gets would measure misses. */
        uint64_t set = AUTO_WORKING_SET;
        if (o->spawn_cluster && o->cluster_segment_size / 2 < set)
            set = o->cluster_segment_size / 2;
        n = set / (per_key ? per_key : 1);
        n = n < 1 ? 1 : n > AUTO_MAX_KEYS ? AUTO_MAX_KEYS : n;
    }
    return n < o->max_batch ? o->max_batch : n;
}

/* Limits at value size v, measured on first use (all -1 with --limits=false). */
static bench_limits_t limits_for(bench_t *b, uint64_t v)
{
    for (size_t i = 0; i < b->nlimits; i++)
        if (b->limit_values[i] == v)
            return b->limit_cache[i];
    bench_limits_t l = {-1, -1, -1};
    if (b->o->limits && b->area.src) {
        MC_INFO("measuring limits at %" PRIu64 " B: memcpy %.0f s, raw loopback tcp %.0f s", v,
                BENCH_MEMCPY_SECONDS, BENCH_RAW_TCP_SECONDS);
        l = bench_measure_limits(&b->area, v);
    }
    if (b->nlimits < MAX_LIST + 1) {
        b->limit_values[b->nlimits] = v;
        b->limit_cache[b->nlimits++] = l;
    }
    return l;
}

static long master_rss_kib(const bench_t *b)
{
    return b->cluster ? proc_status_kib(b->cluster->master_pid, "VmRSS") : -1;
}

/* Removes every key matching ^<prefix>/<sub> (force: leases do not block). */
static void remove_namespace(bench_t *b, const char *sub)
{
    char regex[160];
    snprintf(regex, sizeof(regex), "^%s/%s", b->prefix, sub);
    int64_t n = mc_store_remove_by_regex(b->store, regex, 1);
    if (n < 0)
        MC_WARN("removing %s: %s (%" PRId64 ")", regex, mc_error_name((int)n), n);
    else
        MC_VLOG(1, "removed %" PRId64 " objects matching %s", n, regex);
}

/* ---- workers ------------------------------------------------------------------------------ */

typedef enum run_kind {
    RUN_TIMED, /* op for warm-up + duration */
    RUN_FILL,  /* put fill_count fresh keys per thread in <fill_ns>/t<i>/k<n>, timing all */
} run_kind_t;

typedef struct run {
    bench_t *b;
    run_kind_t kind;
    bench_op_t op;
    uint64_t value;
    size_t batch;
    int threads;
    uint64_t num_keys; /* per thread: put generation size, get key space */
    unsigned row;      /* put namespace of this row */
    char get_ns[48];   /* where gets read: "g/v<value>" */
    char fill_ns[48];
    uint64_t fill_count;  /* keys per thread */
    int stop_when_full;   /* RUN_FILL: NO_AVAILABLE_HANDLE ends the thread's fill, no error */
    uint64_t warm_end_ns; /* calls starting before this are warm-up */
    uint64_t end_ns;      /* no call starts after this (once one was counted) */
    atomic_uint_fast64_t progress; /* calls finished, all threads; the stall watchdog reads it */
} run_t;

typedef struct worker {
    run_t *run;
    int index;
    pthread_t tid;
    uint8_t *src_region, *dst_region; /* this thread's part of each pool */
    uint64_t window;                  /* calls so far: picks the next window of the regions */
    uint8_t *src, *dst;               /* this call's window: batch x value bytes */

    /* per-call scratch, batch entries */
    char (*keys)[KEY_MAX];
    const char **key_ptrs;
    const void **src_ptrs;
    void **dst_ptrs;
    size_t *sizes;
    int *put_results;
    int64_t *get_results;
    int *exist_results;   /* batch_exist of this call's keys, or of the generation's */
    uint8_t *key_existed; /* per batch slot: the key was stored before this put */

    /* put key generations: num_keys entries */
    char (*gen_keys)[KEY_MAX];
    const char **gen_ptrs;
    int *remove_results;
    uint8_t *gen_existed; /* per slot of the generation: stored before its put */
    uint64_t gen, gen_used;

    uint64_t get_seq, op_seq;

    /* results, read by main after join */
    uint64_t calls, ops, bytes, errors, bad, remove_errors, existing;
    uint64_t first_start_ns, last_end_ns;
    bench_latencies_t lat;
    int first_error;
    int full;
    atomic_int done; /* the thread is about to return; main joins it */
} worker_t;

static void note_error(worker_t *w, const char *what, const char *key, int64_t rc)
{
    if (w->first_error != 0)
        return;
    w->first_error = (int)rc;
    MC_ERROR("thread %d: %s %s: %s (%" PRId64 ")", w->index, what, key, mc_error_name((int)rc), rc);
}

static int worker_alloc(worker_t *w, size_t batch, uint64_t num_keys)
{
    w->keys = calloc(batch, sizeof(*w->keys));
    w->key_ptrs = calloc(batch, sizeof(*w->key_ptrs));
    w->src_ptrs = calloc(batch, sizeof(*w->src_ptrs));
    w->dst_ptrs = calloc(batch, sizeof(*w->dst_ptrs));
    w->sizes = calloc(batch, sizeof(*w->sizes));
    w->put_results = calloc(batch, sizeof(*w->put_results));
    w->get_results = calloc(batch, sizeof(*w->get_results));
    w->gen_keys = calloc(num_keys, sizeof(*w->gen_keys));
    w->gen_ptrs = calloc(num_keys, sizeof(*w->gen_ptrs));
    w->remove_results = calloc(num_keys, sizeof(*w->remove_results));
    size_t nexist = batch > num_keys ? batch : (size_t)num_keys;
    w->exist_results = calloc(nexist ? nexist : 1, sizeof(*w->exist_results));
    w->key_existed = calloc(batch, sizeof(*w->key_existed));
    w->gen_existed = calloc(num_keys ? num_keys : 1, sizeof(*w->gen_existed));
    return w->keys && w->key_ptrs && w->src_ptrs && w->dst_ptrs && w->sizes && w->put_results &&
                   w->get_results && w->gen_keys && w->gen_ptrs && w->remove_results &&
                   w->exist_results && w->key_existed && w->gen_existed
               ? 0
               : -1;
}

static void worker_free(worker_t *w)
{
    free(w->keys);
    free(w->key_ptrs);
    free(w->src_ptrs);
    free(w->dst_ptrs);
    free(w->sizes);
    free(w->put_results);
    free(w->get_results);
    free(w->gen_keys);
    free(w->gen_ptrs);
    free(w->remove_results);
    free(w->exist_results);
    free(w->key_existed);
    free(w->gen_existed);
    bench_latencies_free(&w->lat);
}

/*
 * Moves this thread's window to the next batch x value bytes of its regions, wrapping, so that
 * consecutive calls do not find their buffers in the CPU cache (the memcpy limit's are not
 * either: both sides of a comparison touch memory).
 */
static void next_window(worker_t *w)
{
    const run_t *r = w->run;
    uint64_t span = (uint64_t)r->batch * r->value;
    uint64_t windows = span ? r->b->region_len / span : 1; /* >= 1: regions hold any batch */
    uint64_t off = windows > 1 ? (w->window++ % windows) * span : 0;
    w->src = w->src_region + off;
    w->dst = w->dst_region + off;
}

/*
 * Which of keys[0..n) are stored now: flags[i] = 1 when it is. Called outside every call's
 * latency, before the puts. A key the store cannot answer for counts as an error of the thread.
 */
static void check_existing(worker_t *w, const char *const *keys, size_t n, uint8_t *flags)
{
    mc_store_batch_exist(w->run->b->store, keys, n, w->exist_results);
    for (size_t i = 0; i < n; i++) {
        flags[i] = w->exist_results[i] == 1;
        if (w->exist_results[i] < 0) {
            w->errors++;
            note_error(w, "exist", keys[i], w->exist_results[i]);
        }
    }
}

/* Stamps and puts w->keys[0..n) from the next source window (w->key_existed[0..n) says which
 * were stored before). Returns the number stored that were not. */
static uint64_t put_keys(worker_t *w, size_t n)
{
    const run_t *r = w->run;
    const bench_t *b = r->b;
    next_window(w);
    for (size_t i = 0; i < n; i++) {
        uint8_t *v = w->src + i * r->value;
        stamp_value(v, r->value, key_seed(w->keys[i]));
        w->key_ptrs[i] = w->keys[i];
        w->src_ptrs[i] = v;
        w->sizes[i] = r->value;
    }
    if (n == 1) {
        w->put_results[0] =
            b->o->zero_copy
                ? mc_store_put_from(b->store, w->keys[0], w->src_ptrs[0], r->value, &b->rcfg)
                : mc_store_put(b->store, w->keys[0], w->src_ptrs[0], r->value, &b->rcfg);
    } else if (b->o->zero_copy) {
        mc_store_put_from_batch(b->store, w->key_ptrs, w->src_ptrs, w->sizes, n, &b->rcfg,
                                w->put_results);
    } else {
        mc_store_put_batch(b->store, w->key_ptrs, w->src_ptrs, w->sizes, n, &b->rcfg,
                           w->put_results);
    }
    uint64_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = w->put_results[i];
        if (rc == 0 && w->key_existed[i]) {
            w->existing++; /* answered 0, moved nothing: not in ops or bytes */
        } else if (rc == 0) {
            ok++;
        } else if (rc == MC_ERR_NO_AVAILABLE_HANDLE && r->stop_when_full) {
            w->full = 1;
        } else {
            w->errors++;
            note_error(w, "put", w->keys[i], rc);
        }
    }
    return ok;
}

/* Checks one get result; logs the first bad one of this thread. Returns 1 when good. */
static int check_get(worker_t *w, size_t i, int64_t got)
{
    const run_t *r = w->run;
    if (got < 0) {
        w->errors++;
        note_error(w, "get", w->keys[i], got);
        return 0;
    }
    int64_t off = -1;
    if ((uint64_t)got == r->value)
        off = verify_value(w->dst_ptrs[i], r->value, key_seed(w->keys[i]));
    if ((uint64_t)got == r->value && off < 0)
        return 1;
    if (w->bad++ == 0) {
        if ((uint64_t)got != r->value)
            MC_ERROR("thread %d: get %s returned %" PRId64 " bytes, expected %" PRIu64, w->index,
                     w->keys[i], got, r->value);
        else
            MC_ERROR("thread %d: get %s: byte %" PRId64 " is 0x%02x, expected 0x%02x", w->index,
                     w->keys[i], off, ((const uint8_t *)w->dst_ptrs[i])[off],
                     pattern_byte(key_seed(w->keys[i]), (uint64_t)off));
    }
    return 0;
}

/* Gets w->keys[0..n) into the next destination window and verifies them. Returns how many
 * came back whole and right. */
static uint64_t get_keys(worker_t *w, size_t n)
{
    const run_t *r = w->run;
    const bench_t *b = r->b;
    next_window(w);
    for (size_t i = 0; i < n; i++) {
        uint8_t *v = w->dst + i * r->value;
        clear_sample(v, r->value);
        w->key_ptrs[i] = w->keys[i];
        w->dst_ptrs[i] = v;
        w->sizes[i] = r->value;
    }
    if (n == 1) {
        w->get_results[0] = b->o->zero_copy
                                ? mc_store_get_into(b->store, w->keys[0], w->dst_ptrs[0], r->value)
                                : mc_store_get(b->store, w->keys[0], w->dst_ptrs[0], r->value);
    } else if (b->o->zero_copy) {
        mc_store_get_into_batch(b->store, w->key_ptrs, w->dst_ptrs, w->sizes, n, w->get_results);
    } else {
        mc_store_get_batch(b->store, w->key_ptrs, w->dst_ptrs, w->sizes, n, w->get_results);
    }
    uint64_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += (uint64_t)check_get(w, i, w->get_results[i]);
    return ok;
}

/* Removes the keys of the current put generation (one batch remove) and starts the next. */
static void retire_generation(worker_t *w)
{
    if (w->gen_used > 0) {
        mc_store_batch_remove(w->run->b->store, w->gen_ptrs, w->gen_used, 1, w->remove_results);
        for (uint64_t i = 0; i < w->gen_used; i++) {
            int rc = w->remove_results[i];
            /* absent: that put failed and was counted already */
            if (rc != 0 && rc != MC_ERR_OBJECT_NOT_FOUND && w->remove_errors++ == 0)
                MC_WARN("thread %d: remove %s: %s (%d)", w->index, w->gen_keys[i],
                        mc_error_name(rc), rc);
        }
    }
    w->gen++;
    w->gen_used = 0;
}

/* Names every key of this thread's current put generation and finds those already stored
 * (one batch exist; in the row's time, not in a call's latency). */
static void start_generation(worker_t *w)
{
    const run_t *r = w->run;
    for (uint64_t slot = 0; slot < r->num_keys; slot++) {
        snprintf(w->gen_keys[slot], KEY_MAX, "%s/p/r%u/t%d/g%" PRIu64 "/k%" PRIu64, r->b->prefix,
                 r->row, w->index, w->gen, slot);
        w->gen_ptrs[slot] = w->gen_keys[slot];
    }
    check_existing(w, w->gen_ptrs, r->num_keys, w->gen_existed);
}

/* Names the next batch of put keys in this thread's current generation. */
static void name_put_keys(worker_t *w)
{
    const run_t *r = w->run;
    for (size_t i = 0; i < r->batch; i++) {
        uint64_t slot = w->gen_used++;
        memcpy(w->keys[i], w->gen_keys[slot], KEY_MAX);
        w->key_existed[i] = w->gen_existed[slot];
    }
}

static void name_get_keys(worker_t *w)
{
    const run_t *r = w->run;
    for (size_t i = 0; i < r->batch; i++) {
        uint64_t slot = w->get_seq++ % r->num_keys;
        snprintf(w->keys[i], KEY_MAX, "%s/%s/t%d/k%" PRIu64, r->b->prefix, r->get_ns, w->index,
                 slot);
    }
}

/* Counts a finished call that stored or fetched `ok` values from t0 to t1; -1 when out of memory
 * (the thread stops). */
static int count_call(worker_t *w, uint64_t t0, uint64_t t1, uint64_t ok)
{
    if (w->calls++ == 0)
        w->first_start_ns = t0;
    w->last_end_ns = t1;
    w->ops += ok;
    w->bytes += ok * w->run->value;
    if (bench_latencies_add(&w->lat, (double)(t1 - t0) / 1e3) != 0) {
        note_error(w, "out of memory", "", MC_ERR_INTERNAL_ERROR);
        return -1;
    }
    return 0;
}

static void *timed_main(void *arg)
{
    worker_t *w = arg;
    run_t *r = w->run;
    for (;;) {
        bench_op_t op = r->op;
        if (op == OP_MIXED)
            op = (w->op_seq++ & 1) ? OP_PUT : OP_GET;
        if (op == OP_PUT && w->gen_used + r->batch > r->num_keys)
            retire_generation(w); /* in the row's time, not in a call's latency */
        if (op == OP_PUT && w->gen_used == 0)
            start_generation(w); /* likewise */
        uint64_t t0 = mc_now_ns();
        if (t0 >= r->end_ns && (w->calls > 0 || t0 >= r->end_ns + OVERRUN_NS))
            break;
        uint64_t ok;
        if (op == OP_PUT) {
            name_put_keys(w);
            ok = put_keys(w, r->batch);
        } else {
            name_get_keys(w);
            ok = get_keys(w, r->batch);
        }
        uint64_t t1 = mc_now_ns();
        atomic_fetch_add(&r->progress, 1);
        if (t0 < r->warm_end_ns)
            continue;
        if (count_call(w, t0, t1, ok) != 0)
            break;
    }
    retire_generation(w); /* untimed: leave nothing of this row behind */
    atomic_store(&w->done, 1);
    return NULL;
}

static void *fill_main(void *arg)
{
    worker_t *w = arg;
    run_t *r = w->run;
    for (uint64_t next = 0; next < r->fill_count && !w->full;) {
        size_t n = r->fill_count - next < r->batch ? (size_t)(r->fill_count - next) : r->batch;
        for (size_t i = 0; i < n; i++)
            snprintf(w->keys[i], KEY_MAX, "%s/%s/t%d/k%" PRIu64, r->b->prefix, r->fill_ns, w->index,
                     next + i);
        for (size_t i = 0; i < n; i++)
            w->key_ptrs[i] = w->keys[i];
        check_existing(w, w->key_ptrs, n, w->key_existed); /* not in the call's latency */
        next += n;
        uint64_t t0 = mc_now_ns();
        uint64_t ok = put_keys(w, n);
        uint64_t t1 = mc_now_ns();
        atomic_fetch_add(&r->progress, 1);
        if (count_call(w, t0, t1, ok) != 0)
            break;
    }
    atomic_store(&w->done, 1);
    return NULL;
}

/* ---- rows --------------------------------------------------------------------------------- */

typedef struct bench_row {
    const char *op;
    uint64_t value;
    uint64_t batch;
    int threads;
    int checksum; /* end-to-end CRC32C on (1) or off (0) */
    uint64_t num_keys;
    uint64_t calls, ops, bytes, errors, bad, existing;
    double seconds, ops_per_s, gbps;
    bench_latency_stats_t lat;
    bench_limits_t limits;
    long master_rss_kib;
    int first_error;
} bench_row_t;

/* Merges the threads' results into *row. */
static void summarize(worker_t *ws, int n, bench_row_t *row)
{
    uint64_t start = UINT64_MAX, end = 0;
    for (int i = 0; i < n; i++) {
        row->calls += ws[i].calls;
        row->ops += ws[i].ops;
        row->bytes += ws[i].bytes;
        row->errors += ws[i].errors;
        row->bad += ws[i].bad;
        row->existing += ws[i].existing;
        if (ws[i].calls > 0) {
            start = ws[i].first_start_ns < start ? ws[i].first_start_ns : start;
            end = ws[i].last_end_ns > end ? ws[i].last_end_ns : end;
        }
        if (!row->first_error)
            row->first_error = ws[i].first_error;
    }
    row->seconds = end > start ? (double)(end - start) / 1e9 : 0;
    row->ops_per_s = row->seconds > 0 ? (double)row->ops / row->seconds : 0;
    row->gbps = row->seconds > 0 ? (double)row->bytes / row->seconds / 1e9 : 0;
    row->lat = bench_latency_stats(&ws[0].lat, sizeof(ws[0]), (size_t)n);
}

/* Kills the cluster and exits 2: a store call has not returned for STALL_SECONDS. */
static void die_stalled(bench_t *b, worker_t *ws, int n)
{
    for (int i = 0; i < n; i++)
        if (!atomic_load(&ws[i].done))
            fprintf(stderr, PROGRAM ": thread %d is stuck in a store call\n", i);
    fprintf(stderr, PROGRAM ": no store call finished for %d s: the store hangs\n", STALL_SECONDS);
    if (b->cluster) {
        fprintf(stderr, PROGRAM ": cluster logs kept: %s, %s\n", b->cluster->master_log,
                b->cluster->client_log);
        kill(b->cluster->client_pid, SIGKILL);
        kill(b->cluster->master_pid, SIGKILL);
    }
    fflush(NULL);
    _exit(2);
}

/*
 * Runs r with r->threads workers and fills *row. Workers use thread regions 0..threads-1 of the
 * pools. Returns 0, or -1 when no thread could start. Never returns when the store hangs.
 */
static int run_workers(run_t *r, bench_row_t *row)
{
    bench_t *b = r->b;
    worker_t *ws = calloc((size_t)r->threads, sizeof(*ws));
    if (!ws)
        return -1;
    int started = 0;
    for (int i = 0; i < r->threads; i++) {
        worker_t *w = &ws[i];
        w->run = r;
        w->index = i;
        w->src_region = b->src_pool + (size_t)i * b->region_len;
        w->dst_region = b->dst_pool + (size_t)i * b->region_len;
        if (worker_alloc(w, r->batch, r->num_keys) != 0 ||
            pthread_create(&w->tid, NULL, r->kind == RUN_TIMED ? timed_main : fill_main, w) != 0) {
            MC_ERROR("cannot start thread %d", i);
            break;
        }
        started++;
    }
    /* The stall watchdog: progress is any call finishing on any thread. */
    uint64_t seen = UINT64_MAX, since = mc_now_ns();
    for (int i = 0; i < started;) {
        if (atomic_load(&ws[i].done)) {
            pthread_join(ws[i].tid, NULL);
            i++;
            continue;
        }
        uint64_t p = atomic_load(&r->progress), now = mc_now_ns();
        if (p != seen) {
            seen = p;
            since = now;
        } else if (now - since > (uint64_t)STALL_SECONDS * NS_PER_S) {
            die_stalled(b, ws, started);
        }
        usleep(10 * 1000);
    }
    row->value = r->value;
    row->batch = r->batch;
    row->threads = started;
    row->num_keys = r->num_keys;
    summarize(ws, started, row);
    int any_full = 0;
    for (int i = 0; i < r->threads; i++) {
        any_full |= ws[i].full;
        worker_free(&ws[i]);
    }
    free(ws);
    if (any_full)
        MC_WARN("the cluster ran out of space during the fill of %s; it stopped there", r->fill_ns);
    return started > 0 ? 0 : -1;
}

/* ---- output ------------------------------------------------------------------------------- */

static void print_header(void)
{
    printf("%-10s %-11s %6s %5s %7s %3s %10s %8s %9s %9s %6s %4s %6s %11s %9s %12s %10s %8s "
           "%10s %6s\n",
           "protocol", "op", "value", "batch", "threads", "crc", "ops/s", "GB/s", "p50_us",
           "p99_us", "errors", "bad", "exist", "memcpy_GB/s", "vs_memcpy", "raw_tcp_GB/s",
           "vs_raw_tcp", "mRSS_MiB", "rtt/s", "vs_rtt");
}

static void print_row(const bench_opts_t *o, const bench_row_t *row)
{
    char value[32];
    printf("%-10s %-11s %6s %5" PRIu64 " %7d %3s %10.0f %8.3f %9.1f %9.1f %6" PRIu64 " %4" PRIu64
           " %6" PRIu64,
           o->protocol, row->op, bench_size_label(row->value, value, sizeof(value)), row->batch,
           row->threads, row->checksum ? "on" : "off", row->ops_per_s, row->gbps, row->lat.p50_us,
           row->lat.p99_us, row->errors, row->bad, row->existing);
    bench_print_limit_cells(&row->limits, row->gbps, 3);
    if (row->master_rss_kib >= 0)
        printf(" %8.1f", (double)row->master_rss_kib / 1024.0);
    else
        printf(" %8s", "-");
    /* Small values: ops/s against one loopback round trip per op (per thread). */
    if (row->limits.round_trips > 0 && row->batch == 1)
        printf(" %10.0f %6.2f\n", row->limits.round_trips,
               row->ops_per_s / row->threads / row->limits.round_trips);
    else
        printf(" %10s %6s\n", "-", "-");
    fflush(stdout);
}

static json_t *row_json(const bench_row_t *row)
{
    json_t *j = json_object();
    json_object_set_new(j, "operation", json_string(row->op));
    json_object_set_new(j, "value_size", json_integer((json_int_t)row->value));
    json_object_set_new(j, "batch_size", json_integer((json_int_t)row->batch));
    json_object_set_new(j, "threads", json_integer(row->threads));
    json_object_set_new(j, "checksum", json_boolean(row->checksum));
    json_object_set_new(j, "keys_per_thread", json_integer((json_int_t)row->num_keys));
    json_object_set_new(j, "calls", json_integer((json_int_t)row->calls));
    json_object_set_new(j, "ops", json_integer((json_int_t)row->ops));
    json_object_set_new(j, "bytes", json_integer((json_int_t)row->bytes));
    json_object_set_new(j, "seconds", json_real(row->seconds));
    json_object_set_new(j, "ops_per_s", json_real(row->ops_per_s));
    json_object_set_new(j, "gbps", json_real(row->gbps));
    json_object_set_new(j, "lat_avg_us", json_real(row->lat.avg_us));
    json_object_set_new(j, "lat_p50_us", json_real(row->lat.p50_us));
    json_object_set_new(j, "lat_p99_us", json_real(row->lat.p99_us));
    json_object_set_new(j, "errors", json_integer((json_int_t)row->errors));
    json_object_set_new(j, "verify_failures", json_integer((json_int_t)row->bad));
    json_object_set_new(j, "existing", json_integer((json_int_t)row->existing));
    json_object_set_new(j, "first_error",
                        row->first_error ? json_string(mc_error_name(row->first_error))
                                         : json_null());
    bench_limits_row_json(j, &row->limits, row->gbps);
    /* ops/s per thread against loopback round trips/s (batch 1, small values; else null) */
    int rtt = row->limits.round_trips > 0 && row->batch == 1;
    json_object_set_new(j, "round_trips_per_s",
                        rtt ? json_real(row->limits.round_trips) : json_null());
    json_object_set_new(j, "vs_round_trips",
                        rtt ? json_real(row->ops_per_s / row->threads / row->limits.round_trips)
                            : json_null());
    json_object_set_new(j, "master_rss_kib",
                        row->master_rss_kib >= 0 ? json_integer(row->master_rss_kib) : json_null());
    return j;
}

static json_t *config_json(const bench_t *b)
{
    const bench_opts_t *o = b->o;
    json_t *c = json_object();
    json_t *ops = json_array();
    for (size_t i = 0; i < o->nops; i++)
        json_array_append_new(ops, json_string(op_names[o->ops[i]]));
    json_object_set_new(c, "operations", ops);
    json_object_set_new(c, "value_sizes", bench_u64_list_json(o->values, o->nvalues));
    json_object_set_new(c, "batch_sizes", bench_u64_list_json(o->batches, o->nbatches));
    json_object_set_new(c, "threads", bench_u64_list_json(o->threads, o->nthreads));
    json_object_set_new(c, "protocol", json_string(o->protocol));
    json_object_set_new(c, "disable_shm", json_boolean(o->disable_shm));
    json_object_set_new(c, "checksum", json_string(o->checksum_text));
    json_object_set_new(c, "master_server_address",
                        json_string(b->cluster ? b->cluster->master_addr : o->master_addr));
    json_object_set_new(c, "metadata_server", json_string(o->metadata_server));
    json_object_set_new(c, "local_hostname", json_string(o->local_hostname));
    json_object_set_new(c, "duration_s", json_integer(o->duration_s));
    json_object_set_new(c, "warmup_s", json_real((double)WARMUP_NS / 1e9));
    json_object_set_new(c, "replica_num", json_integer(o->replica_num));
    json_object_set_new(c, "num_keys", json_integer(o->num_keys));
    json_object_set_new(c, "global_segment_size", json_integer((json_int_t)o->global_segment_size));
    json_object_set_new(c, "local_buffer_size", json_integer((json_int_t)o->local_buffer_size));
    json_object_set_new(c, "zero_copy", json_boolean(o->zero_copy));
    json_object_set_new(c, "verified_bytes_per_value", json_integer(2 * SAMPLE_BYTES));
    bench_limits_config_json(c, o->limits);
    json_object_set_new(c, "key_prefix", json_string(b->prefix));
    return c;
}

static json_t *cluster_json(const bench_t *b)
{
    if (!b->cluster)
        return json_pack("{s:b}", "spawned", 0);
    const cluster_t *c = b->cluster;
    long rss = proc_status_kib(c->master_pid, "VmRSS");
    long hwm = proc_status_kib(c->master_pid, "VmHWM");
    json_t *j = json_object();
    json_object_set_new(j, "spawned", json_true());
    json_object_set_new(j, "master_address", json_string(c->master_addr));
    json_object_set_new(j, "metrics_port", json_integer(c->metrics_port));
    json_object_set_new(j, "client_segment", json_string(c->segment));
    json_object_set_new(j, "cluster_segment_size",
                        json_integer((json_int_t)b->o->cluster_segment_size));
    json_object_set_new(j, "master_rss_start_kib", json_integer(b->master_rss_start_kib));
    json_object_set_new(j, "master_rss_end_kib", rss >= 0 ? json_integer(rss) : json_null());
    json_object_set_new(j, "master_rss_peak_kib", hwm >= 0 ? json_integer(hwm) : json_null());
    return j;
}

/* FILE.csv next to --json FILE.json (or FILE.csv appended): one line per row, the JSON's
 * figures. Returns 0 or -1 (logged). */
static int write_csv(const bench_t *b)
{
    static const char *const cols[] = {"operation",
                                       "value_size",
                                       "batch_size",
                                       "threads",
                                       "checksum",
                                       "calls",
                                       "ops",
                                       "bytes",
                                       "existing",
                                       "seconds",
                                       "ops_per_s",
                                       "gbps",
                                       "lat_avg_us",
                                       "lat_p50_us",
                                       "lat_p99_us",
                                       "errors",
                                       "verify_failures",
                                       "memcpy_gbps",
                                       "vs_memcpy",
                                       "raw_tcp_gbps",
                                       "vs_raw_tcp",
                                       "round_trips_per_s",
                                       "vs_round_trips"};
    const char *jp = b->o->json_path;
    size_t len = strlen(jp);
    if (len > 5 && strcmp(jp + len - 5, ".json") == 0)
        len -= 5;
    char *path = malloc(len + 5);
    if (!path)
        return -1;
    memcpy(path, jp, len);
    memcpy(path + len, ".csv", 5);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, PROGRAM ": cannot write %s: %s\n", path, strerror(errno));
        free(path);
        return -1;
    }
    size_t ncols = sizeof(cols) / sizeof(cols[0]);
    for (size_t c = 0; c < ncols; c++)
        fprintf(f, "%s%s", c ? "," : "", cols[c]);
    fputc('\n', f);
    size_t i;
    json_t *row;
    json_array_foreach(b->rows, i, row)
    {
        for (size_t c = 0; c < ncols; c++) {
            json_t *v = json_object_get(row, cols[c]);
            fputs(c ? "," : "", f);
            if (json_is_string(v))
                fputs(json_string_value(v), f);
            else if (json_is_integer(v))
                fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            else if (json_is_real(v))
                fprintf(f, "%.17g", json_real_value(v));
            else if (json_is_boolean(v))
                fputs(json_is_true(v) ? "true" : "false", f);
        }
        fputc('\n', f);
    }
    int rc = fclose(f) == 0 ? 0 : -1;
    if (rc != 0)
        fprintf(stderr, PROGRAM ": cannot write %s\n", path);
    free(path);
    return rc;
}

static int write_json(const bench_t *b)
{
    json_t *root = bench_report_json(PROGRAM, config_json(b));
    json_object_set_new(root, "cluster", cluster_json(b));
    json_object_set_new(root, "first_touch",
                        b->first_touch ? json_incref(b->first_touch) : json_null());
    json_object_set_new(root, "rows", json_incref(b->rows));
    json_object_set_new(root, "rss_objects",
                        b->rss_report ? json_incref(b->rss_report) : json_null());
    json_object_set_new(root, "ok", json_boolean(b->ok));
    json_object_set_new(root, "existing", json_integer((json_int_t)b->total_existing));
    if (write_csv(b) != 0) {
        json_decref(root);
        return -1;
    }
    return bench_report_write(root, b->o->json_path, PROGRAM);
}

/* ---- phases ------------------------------------------------------------------------------- */

/* Emits a finished row: table, JSON, totals. */
static void finish_row(bench_t *b, bench_row_t *row, json_t **slot)
{
    row->master_rss_kib = master_rss_kib(b);
    print_row(b->o, row);
    json_t *j = row_json(row);
    if (slot)
        *slot = j;
    else
        json_array_append_new(b->rows, j);
    b->total_errors += row->errors;
    b->total_bad += row->bad;
    b->total_existing += row->existing;
    if (row->existing)
        fprintf(stderr,
                PROGRAM ": WARNING: %s row (%" PRIu64 " B, %d threads): %" PRIu64
                        " puts found their key already stored under %s/ and moved NO bytes (not "
                        "counted in ops or GB/s); the run is not ok (exit 3). Use a fresh "
                        "--key_prefix (the default is unique per run) or remove those keys first\n",
                row->op, row->value, row->threads, row->existing, b->prefix);
}

/* Default --first_touch_bytes: most of a spawned segment, else twice the largest working set. */
static uint64_t first_touch_total(const bench_t *b)
{
    const bench_opts_t *o = b->o;
    if (o->first_touch_bytes)
        return o->first_touch_bytes;
    if (b->cluster)
        return (uint64_t)((double)o->cluster_segment_size * FIRST_TOUCH_SEGMENT_SHARE);
    uint64_t ws = 0;
    for (size_t i = 0; i < o->nvalues; i++) {
        uint64_t w = keys_per_thread(b, o->values[i]) * o->values[i] * o->max_threads;
        ws = w > ws ? w : ws;
    }
    return 2 * ws;
}

/* Puts fresh objects over the first-touch total, reports the row, removes them. */
static int first_touch(bench_t *b)
{
    const bench_opts_t *o = b->o;
    uint64_t total = first_touch_total(b);
    uint64_t value = o->max_value > FIRST_TOUCH_MIN_VALUE ? o->max_value : FIRST_TOUCH_MIN_VALUE;
    if (value > total)
        value = total;
    if (value > b->region_len)
        value = b->region_len;
    if (value == 0) /* a first-touch total of 0 bytes: one byte */
        value = total = 1;
    int threads = (int)o->max_threads;
    uint64_t objects = (total / value) ? (total / value) : 1; /* stay under the total */
    run_t r = {0};
    r.b = b;
    r.kind = RUN_FILL;
    r.value = value;
    r.batch = 1;
    r.threads = threads;
    r.num_keys = 1;
    snprintf(r.fill_ns, sizeof(r.fill_ns), "ft");
    r.fill_count = (objects / (uint64_t)threads) ? (objects / (uint64_t)threads) : 1;
    r.stop_when_full = 1;
    char total_text[32];
    const char *total_size = mc_format_size(total, total_text, sizeof(total_text));
    MC_INFO("first-touch pass: %" PRIu64 " objects of %" PRIu64 " B (%s) with %d thread(s)",
            r.fill_count * (uint64_t)threads, value, total_size, threads);
    bench_row_t row = {
        .op = "first_touch", .checksum = b->checksum, .limits = limits_for(b, value)};
    if (run_workers(&r, &row) != 0)
        return -1;
    finish_row(b, &row, &b->first_touch);
    remove_namespace(b, "ft/");
    return 0;
}

/* Writes the get key set of value size v: max_threads x keys_per_thread, not timed. */
static int prepare_gets(bench_t *b, uint64_t v)
{
    run_t r = {0};
    r.b = b;
    r.kind = RUN_FILL;
    r.value = v;
    uint64_t fit = b->region_len / v;
    r.batch = (size_t)(fit > FILL_MAX_BATCH ? FILL_MAX_BATCH : fit);
    r.threads = (int)b->o->max_threads;
    r.num_keys = 1;
    snprintf(r.fill_ns, sizeof(r.fill_ns), "g/v%" PRIu64, v);
    r.fill_count = keys_per_thread(b, v);
    uint64_t t0 = mc_now_ns();
    bench_row_t row = {.op = "prepare"};
    if (run_workers(&r, &row) != 0)
        return -1;
    MC_INFO("prepared %" PRIu64 " objects of %" PRIu64 " B for gets in %.2f s (%" PRIu64 " errors)",
            row.ops, v, (double)(mc_now_ns() - t0) / 1e9, row.errors);
    b->total_errors += row.errors;
    return row.ops == r.fill_count * (uint64_t)r.threads ? 0 : -1;
}

static int run_row(bench_t *b, bench_op_t op, uint64_t v, uint64_t threads, uint64_t batch,
                   unsigned row_id)
{
    run_t r = {0};
    r.b = b;
    r.kind = RUN_TIMED;
    r.op = op;
    r.value = v;
    r.batch = (size_t)batch;
    r.threads = (int)threads;
    r.num_keys = keys_per_thread(b, v);
    r.row = row_id;
    snprintf(r.get_ns, sizeof(r.get_ns), "g/v%" PRIu64, v);
    bench_row_t row = {.op = op_names[op],
                       .checksum = b->checksum,
                       .limits = limits_for(b, v)}; /* before the clock */
    r.warm_end_ns = mc_now_ns() + WARMUP_NS;
    r.end_ns = r.warm_end_ns + (uint64_t)b->o->duration_s * NS_PER_S;
    if (run_workers(&r, &row) != 0)
        return -1;
    finish_row(b, &row, NULL);
    return 0;
}

/* Puts N tiny objects and reports the master's RSS growth per million objects. */
static int rss_objects(bench_t *b)
{
    uint64_t n = (uint64_t)b->o->rss_objects;
    static const uint8_t value[RSS_OBJECT_BYTES] = {1};
    char(*keys)[KEY_MAX] = calloc(RSS_BATCH, sizeof(*keys));
    const char *kp[RSS_BATCH];
    const void *vp[RSS_BATCH];
    size_t sz[RSS_BATCH];
    int res[RSS_BATCH];
    if (!keys)
        return -1;
    for (size_t i = 0; i < RSS_BATCH; i++) {
        kp[i] = keys[i];
        vp[i] = value;
        sz[i] = RSS_OBJECT_BYTES;
    }
    long before = master_rss_kib(b);
    uint64_t stored = 0, errors = 0, t0 = mc_now_ns();
    int first_error = 0;
    for (uint64_t next = 0; next < n;) {
        size_t k = n - next < RSS_BATCH ? (size_t)(n - next) : RSS_BATCH;
        for (size_t i = 0; i < k; i++)
            snprintf(keys[i], KEY_MAX, "%s/rss/%" PRIu64, b->prefix, next + i);
        next += k;
        mc_store_put_batch(b->store, kp, vp, sz, k, &b->rcfg, res);
        for (size_t i = 0; i < k; i++) {
            if (res[i] == 0) {
                stored++;
            } else {
                errors++;
                first_error = first_error ? first_error : res[i];
            }
        }
    }
    double secs = (double)(mc_now_ns() - t0) / 1e9;
    long after = master_rss_kib(b);
    free(keys);
    b->total_errors += errors;
    if (first_error)
        MC_ERROR("rss objects: %" PRIu64 " puts failed, first: %s", errors,
                 mc_error_name(first_error));
    double per_million = before >= 0 && after >= 0 && stored > 0
                             ? (double)(after - before) * 1024.0 / (double)stored * 1e6
                             : -1;
    printf("rss_objects: %" PRIu64 " objects of %d B in %.2f s (%.0f puts/s, batches of %d), "
           "%" PRIu64 " errors; master RSS ",
           stored, RSS_OBJECT_BYTES, secs, secs > 0 ? (double)stored / secs : 0, RSS_BATCH, errors);
    if (per_million >= 0)
        printf("%.1f -> %.1f MiB: %.1f MiB per million objects (%.0f B/object)\n",
               (double)before / 1024.0, (double)after / 1024.0, per_million / (double)MIB,
               per_million / 1e6);
    else
        printf("not known (no spawned master)\n");
    fflush(stdout);
    b->rss_report = json_object();
    json_object_set_new(b->rss_report, "objects", json_integer((json_int_t)stored));
    json_object_set_new(b->rss_report, "object_bytes", json_integer(RSS_OBJECT_BYTES));
    json_object_set_new(b->rss_report, "errors", json_integer((json_int_t)errors));
    json_object_set_new(b->rss_report, "seconds", json_real(secs));
    json_object_set_new(b->rss_report, "master_rss_before_kib",
                        before >= 0 ? json_integer(before) : json_null());
    json_object_set_new(b->rss_report, "master_rss_after_kib",
                        after >= 0 ? json_integer(after) : json_null());
    json_object_set_new(b->rss_report, "bytes_per_million_objects",
                        per_million >= 0 ? json_real(per_million) : json_null());
    remove_namespace(b, "rss/");
    return 0;
}

/* Every row of the cross product, value size outermost. Returns -1 when a phase failed. */
/* Rows from here on use the store with checksums on (1) or off (0). */
static void use_store(bench_t *b, int checksum)
{
    b->checksum = checksum;
    b->store = b->stores[checksum];
}

static int run_rows(bench_t *b)
{
    const bench_opts_t *o = b->o;
    unsigned row_id = 0;
    int rc = 0;
    for (size_t vi = 0; vi < o->nvalues && rc == 0; vi++) {
        uint64_t v = o->values[vi];
        int prepared = 0;
        for (size_t oi = 0; oi < o->nops && rc == 0; oi++) {
            if (o->ops[oi] != OP_PUT && !prepared) {
                /* Written with checksums whenever a row verifies them (else nothing to check). */
                use_store(b, o->checksums[0] || o->checksums[o->nchecksums - 1]);
                rc = prepare_gets(b, v);
                prepared = 1;
                if (rc != 0) {
                    fprintf(stderr,
                            PROGRAM ": could not write the get key set of %" PRIu64 " B values\n",
                            v);
                    break;
                }
            }
            for (size_t ti = 0; ti < o->nthreads && rc == 0; ti++) {
                for (size_t bi = 0; bi < o->nbatches && rc == 0; bi++) {
                    for (size_t ci = 0; ci < o->nchecksums && rc == 0; ci++) {
                        use_store(b, o->checksums[ci]);
                        rc = run_row(b, o->ops[oi], v, o->threads[ti], o->batches[bi], row_id++);
                    }
                }
            }
        }
        if (prepared) {
            char ns[48];
            snprintf(ns, sizeof(ns), "g/v%" PRIu64 "/", v);
            remove_namespace(b, ns);
        }
    }
    return rc;
}

/* ---- setup and main ---------------------------------------------------------------------- */

/* Maps and warms the two buffer pools; registers them with --zero_copy. */
static int alloc_pools(bench_t *b)
{
    const bench_opts_t *o = b->o;
    size_t region = (size_t)(o->max_batch * o->max_value);
    b->region_len = region < REGION_MIN ? REGION_MIN : region;
    b->pool_len = b->region_len * (size_t)o->max_threads;
    b->src_pool = bench_map_anonymous(b->pool_len);
    b->dst_pool = bench_map_anonymous(b->pool_len);
    if (!b->src_pool || !b->dst_pool) {
        fprintf(stderr, PROGRAM ": cannot allocate 2 x %zu bytes of buffers\n", b->pool_len);
        return -1;
    }
    bench_warm_memory(b->src_pool, b->pool_len);
    bench_warm_memory(b->dst_pool, b->pool_len);
    if (!o->zero_copy)
        return 0;
    int rc = 0;
    for (int c = 0; c < 2 && rc == 0; c++) {
        if (!b->stores[c])
            continue;
        rc = mc_store_register_buffer(b->stores[c], b->src_pool, b->pool_len);
        if (rc == 0)
            rc = mc_store_register_buffer(b->stores[c], b->dst_pool, b->pool_len);
    }
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": cannot register the buffers: %s (%d)\n", mc_error_name(rc), rc);
        return -1;
    }
    return 0;
}

static void free_pools(bench_t *b)
{
    for (int c = 0; c < 2 && b->o->zero_copy; c++) {
        if (!b->stores[c])
            continue;
        if (b->src_pool)
            mc_store_unregister_buffer(b->stores[c], b->src_pool);
        if (b->dst_pool)
            mc_store_unregister_buffer(b->stores[c], b->dst_pool);
    }
    if (b->src_pool)
        munmap(b->src_pool, b->pool_len);
    if (b->dst_pool)
        munmap(b->dst_pool, b->pool_len);
    b->src_pool = b->dst_pool = NULL;
}

static int open_store(bench_t *b)
{
    const bench_opts_t *o = b->o;
    mc_store_config_t cfg = {
        .local_hostname = o->local_hostname,
        .metadata_server = o->metadata_server,
        .global_segment_size = o->global_segment_size,
        .local_buffer_size = o->local_buffer_size,
        .protocol = o->store_protocol,
        .device_name = "",
        .master_server_addr = b->cluster ? b->cluster->master_addr : o->master_addr,
    };
    /* One store per --checksum setting; the first listed serves the first-touch pass. */
    for (size_t i = 0; i < o->nchecksums; i++) {
        int c = o->checksums[i];
        if (b->stores[c])
            continue;
        cfg.disable_checksum = !c;
        int rc = mc_store_setup(&cfg, &b->stores[c]);
        if (rc != 0) {
            fprintf(stderr, PROGRAM ": store setup failed: %s (%d)\n", mc_error_name(rc), rc);
            return -1;
        }
    }
    use_store(b, o->checksums[0]);
    return 0;
}

/* Everything after the cluster is up. Returns the exit status. */
static int run_bench(bench_t *b)
{
    const bench_opts_t *o = b->o;
    int status = 1;
    if (*o->key_prefix)
        snprintf(b->prefix, sizeof(b->prefix), "%s", o->key_prefix); /* fits: validate_opts */
    else
        snprintf(b->prefix, sizeof(b->prefix), "mcbench-%d-%lld", (int)getpid(),
                 (long long)time(NULL));
    b->rcfg = (mc_replicate_config_t)MC_REPLICATE_CONFIG_INIT;
    b->rcfg.replica_num = (uint32_t)o->replica_num;
    b->rows = json_array();
    b->master_rss_start_kib = master_rss_kib(b);
    if (open_store(b) != 0)
        goto out;
    if (alloc_pools(b) != 0)
        goto out;
    if (o->limits) {
        uint64_t largest =
            o->max_value > FIRST_TOUCH_MIN_VALUE ? o->max_value : FIRST_TOUCH_MIN_VALUE;
        if (bench_memcpy_area_init(&b->area, largest) != 0)
            MC_WARN("cannot allocate the memcpy limit's working set; limits not measured");
    }
    MC_INFO("store bench: %s, protocol %s, %" PRId64 " s per row after 1 s warm-up, keys under "
            "%s/",
            b->cluster ? "spawned cluster" : o->master_addr, o->protocol, o->duration_s, b->prefix);
    print_header();
    int rc = first_touch(b);
    if (rc == 0)
        rc = run_rows(b);
    if (rc == 0 && o->rss_objects > 0)
        rc = rss_objects(b);
    remove_namespace(b, ""); /* anything a failed phase left behind */
    if (b->cluster)
        printf("master RSS: %.1f MiB at start, %.1f MiB now, %.1f MiB peak\n",
               (double)b->master_rss_start_kib / 1024.0, (double)master_rss_kib(b) / 1024.0,
               (double)proc_status_kib(b->cluster->master_pid, "VmHWM") / 1024.0);
    status = rc == 0 ? 0 : 1;
    if (b->total_errors || b->total_bad) {
        fprintf(stderr, PROGRAM ": %" PRIu64 " call error(s), %" PRIu64 " wrong value(s)\n",
                b->total_errors, b->total_bad);
        status = 1;
    }
    if (status == 0 && b->total_existing)
        status = 3;
    b->ok = status == 0;
    if (*o->json_path && write_json(b) != 0)
        status = 1;
out:
    free_pools(b);
    bench_memcpy_area_free(&b->area);
    mc_store_free(b->stores[0]);
    mc_store_free(b->stores[1]);
    b->stores[0] = b->stores[1] = b->store = NULL;
    json_decref(b->rows);
    json_decref(b->first_touch);
    json_decref(b->rss_report);
    return status;
}

int main(int argc, char **argv)
{
    bench_opts_t o = {
        .master_addr = "127.0.0.1:50051",
        .metadata_server = "P2PHANDSHAKE",
        .local_hostname = "127.0.0.1",
        .protocol = "tcp",
        .operation_text = "put,get",
        .value_size_text = "4096",
        .batch_size_text = "1",
        .threads_text = "1",
        .json_path = "",
        .key_prefix = "",
        .checksum_text = "on",
        .duration_s = 10,
        .replica_num = 1,
        .num_keys = 0,
        .rss_objects = 0,
        .global_segment_size = 0,
        .local_buffer_size = 64 * MIB,
        .cluster_segment_size = 4 * GIB,
        .first_touch_bytes = 0,
        .limits = 1,
    };
    char *secret = "", *secret_file = "";
    mc_flag_t flags[] = {
        {"master_server_address", MC_FLAG_STRING, &o.master_addr,
         "mooncake_master host:port (ignored with --spawn_cluster)"},
        {"metadata_server", MC_FLAG_STRING, &o.metadata_server,
         "P2PHANDSHAKE or http://host:port/metadata"},
        {"local_hostname", MC_FLAG_STRING, &o.local_hostname,
         "this client's host or host:port (port 0/none = any)"},
        {"protocol", MC_FLAG_STRING, &o.protocol,
         "tcp (same-host peers through shared memory), tcp_forced (MC_DISABLE_SHM=1 here and in "
         "the spawned cluster: bytes cross TCP) or rdma"},
        {"operation", MC_FLAG_STRING, &o.operation_text,
         "put, get or mixed; or a comma list (one row each)"},
        {"value_size", MC_FLAG_STRING, &o.value_size_text,
         "bytes per object; size text, or a comma list (one row each)"},
        {"batch_size", MC_FLAG_STRING, &o.batch_size_text,
         "keys per call (above 1: the _batch calls); or a comma list"},
        {"threads", MC_FLAG_STRING, &o.threads_text,
         "threads sharing the store; or a comma list (one row each)"},
        {"duration", MC_FLAG_INT, &o.duration_s, "seconds measured per row, after 1 s of warm-up",
         1, 86400},
        {"replica_num", MC_FLAG_INT, &o.replica_num, "replicas per put", 1, MC_MAX_REPLICAS},
        {"num_keys", MC_FLAG_INT, &o.num_keys,
         "key space per thread (0: threads x keys x value <= 1 GiB, or half a spawned pool; at "
         "most 1024 keys; against a running cluster keep it well under the pool size)",
         0, 100000000},
        {"global_segment_size", MC_FLAG_SIZE, &o.global_segment_size,
         "bytes this bench contributes to the pool (0: the data lives in the mooncake_client)"},
        {"local_buffer_size", MC_FLAG_SIZE, &o.local_buffer_size, "this client's local buffer"},
        {"zero_copy", MC_FLAG_BOOL, &o.zero_copy,
         "register the buffers and use put_from / get_into"},
        {"spawn_cluster", MC_FLAG_BOOL, &o.spawn_cluster,
         "start a mooncake_master and a mooncake_client (from this binary's directory) on free "
         "ports, stop them at the end"},
        {"cluster_segment_size", MC_FLAG_SIZE, &o.cluster_segment_size,
         "--spawn_cluster: the mooncake_client's global_segment_size"},
        {"first_touch_bytes", MC_FLAG_SIZE, &o.first_touch_bytes,
         "bytes put by the first-touch pass (0: 85% of the spawned segment, else twice the "
         "largest working set)"},
        {"rss_objects", MC_FLAG_INT, &o.rss_objects,
         "put this many 16-byte objects at the end and report the master's RSS growth per "
         "million (needs --spawn_cluster for the RSS)",
         0, 1000000000},
        {"limits", MC_FLAG_BOOL, &o.limits,
         "measure memcpy and raw loopback tcp at every value size"},
        {"checksum", MC_FLAG_STRING, &o.checksum_text,
         "end-to-end CRC32C of every value (computed on put, verified on get): on, off, or "
         "on,off for both side by side (one row each, column crc)"},
        {"cluster_secret_file", MC_FLAG_STRING, &secret_file,
         "file holding the cluster secret (docs/security.md); exported as "
         "MOONCAKE_CLUSTER_SECRET_FILE to this process and what it spawns"},
        {"cluster_secret", MC_FLAG_STRING, &secret,
         "the cluster secret itself; exported as MOONCAKE_CLUSTER_SECRET"},
        {"json", MC_FLAG_STRING, &o.json_path,
         "also write machine info, config and rows here (and one CSV line per row beside it, "
         ".csv)"},
        {"key_prefix", MC_FLAG_STRING, &o.key_prefix,
         "keys live under <prefix>/ (default mcbench-<pid>-<time>); at most 63 bytes of "
         "[A-Za-z0-9_-], never cut; every key under it is removed at the end"},
    };
    size_t nflags = sizeof(flags) / sizeof(flags[0]);
    char err[256] = "";
    int rc = mc_flags_parse(flags, nflags, NULL, argc, argv, PROGRAM,
                            "Usage: " PROGRAM " [--spawn_cluster] [flags]", err, sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 0;
    if (rc == 0)
        rc = validate_opts(&o, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": %s\n", err);
        return 1;
    }
    o.master_addr_set = mc_flags_find(flags, nflags, "master_server_address")->is_set;
    if (o.spawn_cluster && o.master_addr_set)
        MC_WARN("--master_server_address is ignored with --spawn_cluster");
    signal(SIGPIPE, SIG_IGN);
    /* The library and every spawned process take the secret from the environment. */
    if (*secret_file)
        setenv("MOONCAKE_CLUSTER_SECRET_FILE", secret_file, 1);
    if (*secret)
        setenv("MOONCAKE_CLUSTER_SECRET", secret, 1);
    if (o.disable_shm)
        setenv("MC_DISABLE_SHM", "1", 1); /* this process and the spawned cluster */

    cluster_t cluster;
    bench_t b = {.o = &o};
    if (o.spawn_cluster) {
        if (cluster_start(&cluster, &o) != 0)
            return 1;
        b.cluster = &cluster;
    }
    int status = run_bench(&b);
    if (b.cluster && cluster_stop(b.cluster, status != 0) != 0 && status == 0)
        status = 1;
    return status;
}
