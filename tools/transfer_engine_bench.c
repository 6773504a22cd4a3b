/*
 * transfer_engine_bench.c — upstream Mooncake's Transfer Engine benchmark, with our additions.
 *
 * Roles (--mode):
 *   target     allocates --buffer_size bytes of segment memory (mc_te_alloc_segment_memory),
 *              warms it, prints its segment name and the exact initiator command line, then
 *              serves until SIGINT/SIGTERM.
 *   initiator  opens --segment_id and, for every (block size, batch size) configuration, runs
 *              --threads threads for 1 s of warm-up plus --duration s; each thread loops
 *              create batch -> submit --batch_size requests -> wait -> free, recording the
 *              latency of every batch. One table row per configuration.
 *   loopback   our convenience: re-executes itself as a target child with the same flags, reads
 *              the child's segment name from a pipe, runs the initiator side, then stops the child
 *              with SIGTERM and waits for it.
 *
 * --protocol: tcp  = engine protocol "tcp" with shared memory disabled, so the bytes really cross
 *                    TCP even on one host;
 *             shm  = engine protocol "tcp" with same-host shared memory allowed (one memcpy);
 *             rdma = engine protocol "rdma" with shared memory disabled, so the bytes cross
 *                    UCX (on a host without an RDMA device: UCX's tcp transport).
 *
 * Our additions to upstream: comma lists for --block_size and --batch_size (one row per value);
 * the machine's limits measured in the same run at every block size — single-thread memcpy over a
 * 256 MiB working set and a raw loopback TCP stream (two threads, same socket options as the
 * engine; both in bench_limits.c, shared with mooncake_store_bench) — printed next to each row as
 * vs_memcpy / vs_raw_tcp; --json FILE with machine info, the configuration, every row and the
 * limits.
 *
 * Requests of a batch use distinct block-sized slots of the target buffer; each thread walks the
 * whole buffer (wrapping around), so the target side is not an artificially cache-hot range. The
 * initiator's local buffer is threads x batch x block bytes (the largest configuration), registered
 * and warmed before timing. Nothing is verified; failed requests are counted and printed, and make
 * the program exit 1.
 *
 * The public API has no call that lists a remote segment's buffers (upstream's initiator reads
 * them from the segment descriptor), so the target prints its buffer address and the initiator
 * takes it as --target_addr; in loopback mode the child hands it over through the pipe, whose fd
 * it finds in the environment variable MC_TE_BENCH_READY_FD.
 *
 * One engine per process; the main thread owns everything, the submitting threads only read the
 * run description and write their own result slot.
 */
#include "mooncake/transfer_engine.h"

#include "bench_limits.h"
#include "flags.h"
#include "log.h"
#include "net.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PROGRAM "transfer_engine_bench"
#define READY_FD_ENV "MC_TE_BENCH_READY_FD"

#define NS_PER_S UINT64_C(1000000000)
#define GIB (UINT64_C(1) << 30)

#define MAX_LIST 32                         /* values in --block_size / --batch_size lists */
#define WARMUP_NS NS_PER_S                  /* not counted at the start of every row */
#define WAIT_TIMEOUT_MS 120000              /* a batch not done by then: the engine is stuck */
#define OVERRUN_NS (60 * NS_PER_S)          /* longest a row runs past --duration for 1 batch */
#define CHILD_READY_TIMEOUT_MS (300 * 1000) /* the target warms --buffer_size first */

/* ---- options ----------------------------------------------------------------------------- */

typedef struct bench_opts {
    char *mode;
    char *operation;
    char *protocol;
    char *metadata_server;
    char *segment_id;
    char *local_server_name;
    char *device_name;
    char *target_addr_text;
    char *json_path;
    char *block_size_text;
    char *batch_size_text;
    int64_t threads;
    int64_t duration_s;
    uint64_t buffer_size;
    int limits;

    /* derived */
    uint64_t target_addr;
    uint64_t blocks[MAX_LIST];
    size_t nblocks;
    uint64_t batches[MAX_LIST];
    size_t nbatches;
    const char *engine_protocol; /* "tcp" or "rdma" */
    int disable_shm;
    mc_transfer_opcode_t opcode;
} bench_opts_t;

/* Upstream flags we accept and ignore (GPU memory, report formatting, NIC topology). */
static const char *const ignored_flags[] = {
    "use_vram",    "gpu_id",           "auto_discovery",
    "report_unit", "report_precision", "nic_priority_matrix",
    NULL,
};

/* Checks the parsed flags and fills the derived fields. One line in err on failure. */
static int validate_opts(bench_opts_t *o, char *err, size_t errlen)
{
    if (strcmp(o->mode, "target") && strcmp(o->mode, "initiator") && strcmp(o->mode, "loopback")) {
        snprintf(err, errlen, "--mode must be target, initiator or loopback, not \"%s\"", o->mode);
        return MC_ERR_INVALID_PARAMS;
    }
    if (!strcmp(o->operation, "read")) {
        o->opcode = MC_TRANSFER_READ;
    } else if (!strcmp(o->operation, "write")) {
        o->opcode = MC_TRANSFER_WRITE;
    } else {
        snprintf(err, errlen, "--operation must be read or write, not \"%s\"", o->operation);
        return MC_ERR_INVALID_PARAMS;
    }
    if (!strcmp(o->protocol, "tcp")) {
        o->engine_protocol = "tcp";
        o->disable_shm = 1;
    } else if (!strcmp(o->protocol, "shm")) {
        o->engine_protocol = "tcp";
        o->disable_shm = 0;
    } else if (!strcmp(o->protocol, "rdma")) {
        o->engine_protocol = "rdma";
        o->disable_shm = 1;
    } else {
        snprintf(err, errlen, "--protocol must be tcp, shm or rdma, not \"%s\"", o->protocol);
        return MC_ERR_INVALID_PARAMS;
    }
    if (bench_parse_list(o->block_size_text, 1, 1, UINT64_MAX, o->blocks, MAX_LIST, &o->nblocks,
                         "block_size", err, errlen) ||
        bench_parse_list(o->batch_size_text, 1, 1, UINT64_MAX, o->batches, MAX_LIST, &o->nbatches,
                         "batch_size", err, errlen))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < o->nbatches; i++) {
        if (o->batches[i] > 65536) {
            snprintf(err, errlen, "--batch_size: %" PRIu64 " is above 65536", o->batches[i]);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    if (o->buffer_size == 0) {
        snprintf(err, errlen, "--buffer_size must be > 0");
        return MC_ERR_INVALID_PARAMS;
    }
    /* The target touches every byte of its buffer (warm-up): more than the machine has would
     * bring the kernel's OOM killer down on this or another process. */
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t avail = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    if (strcmp(o->mode, "initiator") != 0 && avail && o->buffer_size > avail / 10 * 9) {
        snprintf(err, errlen,
                 "--buffer_size %" PRIu64 " is more than 90%% of the %" PRIu64
                 " bytes of memory available; the target touches all of it",
                 o->buffer_size, avail);
        return MC_ERR_INVALID_PARAMS;
    }
    for (size_t i = 0; i < o->nblocks; i++) {
        if (o->blocks[i] > o->buffer_size) {
            snprintf(err, errlen, "--block_size %" PRIu64 " is larger than --buffer_size %" PRIu64,
                     o->blocks[i], o->buffer_size);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    if (!strcmp(o->mode, "initiator")) {
        if (!o->segment_id || !*o->segment_id) {
            snprintf(err, errlen, "--segment_id is required in initiator mode");
            return MC_ERR_INVALID_PARAMS;
        }
        if (!o->target_addr_text || !*o->target_addr_text) {
            snprintf(err, errlen,
                     "--target_addr is required in initiator mode (the target prints it)");
            return MC_ERR_INVALID_PARAMS;
        }
        char *end = NULL;
        errno = 0;
        o->target_addr = strtoull(o->target_addr_text, &end, 0);
        if (errno || end == o->target_addr_text || *end || o->target_addr == 0) {
            snprintf(err, errlen, "--target_addr: bad address \"%s\"", o->target_addr_text);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    return 0;
}

/* ---- small helpers ----------------------------------------------------------------------- */

static void print_engine_error(const char *what, int rc)
{
    fprintf(stderr, PROGRAM ": %s: %s (%d)\n", what, mc_error_name(rc), rc);
}

static mc_transfer_engine_t *create_engine(const bench_opts_t *o, const char *local_server_name)
{
    mc_transfer_engine_config_t cfg = {
        .local_server_name = local_server_name,
        .metadata_server = o->metadata_server,
        .protocol = o->engine_protocol,
        .device_names = o->device_name,
        .disable_shm = o->disable_shm,
    };
    mc_transfer_engine_t *te = NULL;
    int rc = mc_te_create(&cfg, &te);
    if (rc != 0) {
        print_engine_error("cannot create the transfer engine", rc);
        return NULL;
    }
    return te;
}

/* ---- target ------------------------------------------------------------------------------ */

/* Tells the loopback parent (if any) "segment_name target_addr". */
static void report_ready(const char *segment, uint64_t addr)
{
    const char *fdtext = getenv(READY_FD_ENV);
    if (!fdtext)
        return;
    int fd = atoi(fdtext);
    char line[MC_ENDPOINT_MAX + 64];
    int n = snprintf(line, sizeof(line), "%s 0x%" PRIx64 "\n", segment, addr);
    if (write(fd, line, (size_t)n) != n)
        MC_WARN("cannot report readiness on fd %d: %s", fd, strerror(errno));
    close(fd);
}

static int run_target(const bench_opts_t *o)
{
    /* Block the stop signals before the engine starts threads, so they all inherit the mask
     * and only sigwait() below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    mc_transfer_engine_t *te = create_engine(o, o->local_server_name);
    if (!te)
        return 1;
    void *buf = NULL;
    int rc = mc_te_alloc_segment_memory(te, o->buffer_size, &buf);
    if (rc != 0) {
        print_engine_error("cannot allocate the segment buffer", rc);
        mc_te_destroy(te);
        return 1;
    }
    bench_warm_memory(buf, o->buffer_size);

    const char *name = mc_te_local_segment_name(te);
    char size_text[32];
    printf("target: segment %s, %s buffer at %p, protocol %s\n", name,
           mc_format_size(o->buffer_size, size_text, sizeof(size_text)), buf, o->protocol);
    printf("initiator command: " PROGRAM " --mode=initiator --segment_id=%s --target_addr=%p"
           " --buffer_size=%" PRIu64 " --protocol=%s --metadata_server=%s --operation=%s"
           " --block_size=%s --batch_size=%s --threads=%" PRId64 " --duration=%" PRId64 "\n",
           name, buf, o->buffer_size, o->protocol, o->metadata_server, o->operation,
           o->block_size_text, o->batch_size_text, o->threads, o->duration_s);
    fflush(stdout);
    report_ready(name, (uint64_t)(uintptr_t)buf);

    int sig = 0;
    sigwait(&stop, &sig);
    MC_INFO("target: %s received, stopping", strsignal(sig));
    mc_te_free_segment_memory(te, buf);
    mc_te_destroy(te);
    return 0;
}

/* ---- initiator: one configuration (block, batch, threads) --------------------------------- */

typedef struct bench_run {
    mc_transfer_engine_t *te;
    mc_segment_id_t segment;
    mc_transfer_opcode_t opcode;
    uint8_t *local; /* threads x batch x block bytes, registered */
    uint64_t target_addr;
    uint64_t target_len;
    uint64_t block;
    size_t batch;
    int threads;
    uint64_t warm_end_ns; /* batches starting before this are warm-up */
    uint64_t end_ns;      /* no batch starts after this (once one was counted) */
} bench_run_t;

typedef struct bench_thread {
    const bench_run_t *run;
    int index;
    pthread_t tid;
    /* results, written by the thread, read by main after join */
    uint64_t batches;        /* counted (after warm-up) */
    uint64_t ok_bytes;       /* counted */
    uint64_t failed;         /* failed requests, warm-up included */
    uint64_t first_start_ns; /* first counted batch */
    uint64_t last_end_ns;    /* last counted batch */
    bench_latencies_t lat;
    int first_error;
    int stuck; /* a wait timed out: the engine is stuck */
} bench_thread_t;

static void note_error(bench_thread_t *t, const char *what, int rc)
{
    if (t->first_error != 0)
        return;
    t->first_error = rc;
    MC_ERROR("thread %d: %s: %s (%d)", t->index, what, mc_error_name(rc), rc);
}

/* Counts the requests of a finished batch that did not complete. */
static uint64_t count_failed(bench_thread_t *t, mc_batch_t *b, size_t n)
{
    uint64_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        mc_transfer_status_t st;
        int rc = mc_te_get_status(b, i, &st);
        if (rc != 0 || st.state != MC_TRANSFER_COMPLETED) {
            failed++;
            note_error(t, "request failed", rc != 0 ? rc : st.error);
        }
    }
    return failed;
}

/*
 * One submitting thread. Slot k of the target buffer is [target_addr + k*block, +block); this
 * thread's n-th request uses slot (n*threads + index) mod slots, so the requests of a batch and
 * of concurrent threads are distinct while the buffer has room, and wrap around otherwise.
 */
static void *bench_thread_main(void *arg)
{
    bench_thread_t *t = arg;
    const bench_run_t *r = t->run;
    uint64_t slots = r->target_len / r->block;
    uint8_t *src = r->local + (uint64_t)t->index * r->batch * r->block;
    mc_transfer_req_t *reqs = calloc(r->batch, sizeof(*reqs));
    if (!reqs) {
        note_error(t, "out of memory", MC_ERR_INTERNAL_ERROR);
        return NULL;
    }
    uint64_t seq = 0;
    for (;;) {
        uint64_t t0 = mc_now_ns();
        if (t0 >= r->end_ns && (t->batches > 0 || t0 >= r->end_ns + OVERRUN_NS))
            break;
        for (size_t i = 0; i < r->batch; i++, seq++) {
            uint64_t slot = (seq * (uint64_t)r->threads + (uint64_t)t->index) % slots;
            reqs[i] = (mc_transfer_req_t){
                .opcode = r->opcode,
                .source = src + i * r->block,
                .target_id = r->segment,
                .target_offset = r->target_addr + slot * r->block,
                .length = r->block,
            };
        }
        mc_batch_t *b = NULL;
        int rc = mc_te_batch_create(r->te, r->batch, &b);
        if (rc != 0) {
            t->failed += r->batch;
            note_error(t, "mc_te_batch_create", rc);
            break;
        }
        rc = mc_te_submit(b, reqs, r->batch);
        if (rc != 0) {
            t->failed += r->batch;
            note_error(t, "mc_te_submit", rc);
            mc_te_batch_free(b);
            break;
        }
        rc = mc_te_wait(b, WAIT_TIMEOUT_MS);
        uint64_t t1 = mc_now_ns();
        if (rc == MC_ERR_RPC_TIMEOUT) {
            /* Freeing would wait for the stuck requests; the process exits instead. */
            note_error(t, "mc_te_wait", rc);
            t->stuck = 1;
            break;
        }
        uint64_t failed = rc == 0 ? 0 : count_failed(t, b, r->batch);
        mc_te_batch_free(b);
        t->failed += failed;
        if (t0 < r->warm_end_ns)
            continue;
        if (t->batches == 0)
            t->first_start_ns = t0;
        t->last_end_ns = t1;
        t->batches++;
        t->ok_bytes += (r->batch - failed) * r->block;
        if (bench_latencies_add(&t->lat, (double)(t1 - t0) / 1e3) != 0) {
            note_error(t, "out of memory", MC_ERR_INTERNAL_ERROR);
            break;
        }
    }
    free(reqs);
    return NULL;
}

typedef struct bench_row {
    uint64_t block;
    uint64_t batch;
    int threads;
    uint64_t batches;
    uint64_t requests;
    uint64_t failed;
    uint64_t bytes;
    double seconds;
    double gbps;
    bench_latency_stats_t lat;
    bench_limits_t limits;
    int first_error;
} bench_row_t;

/* Merges the threads' results into *row. Returns 1 when the engine got stuck. */
static int summarize(bench_thread_t *ts, int nthreads, const bench_run_t *r, bench_row_t *row)
{
    uint64_t start = UINT64_MAX, end = 0;
    int stuck = 0;
    for (int i = 0; i < nthreads; i++) {
        row->batches += ts[i].batches;
        row->failed += ts[i].failed;
        row->bytes += ts[i].ok_bytes;
        if (ts[i].batches > 0) {
            start = ts[i].first_start_ns < start ? ts[i].first_start_ns : start;
            end = ts[i].last_end_ns > end ? ts[i].last_end_ns : end;
        }
        if (!row->first_error)
            row->first_error = ts[i].first_error;
        stuck |= ts[i].stuck;
    }
    row->requests = row->batches * r->batch;
    row->seconds = end > start ? (double)(end - start) / 1e9 : 0;
    row->gbps = row->seconds > 0 ? (double)row->bytes / row->seconds / 1e9 : 0;
    row->lat = bench_latency_stats(&ts[0].lat, sizeof(ts[0]), (size_t)nthreads);
    return stuck;
}

/*
 * Runs one configuration with r->threads threads (row->threads says how many started). Returns 0,
 * or 1 when the engine got stuck.
 */
static int run_config(bench_run_t *r, uint64_t duration_s, bench_row_t *row)
{
    bench_thread_t *ts = calloc((size_t)r->threads, sizeof(*ts));
    if (!ts)
        return 1;
    uint64_t start = mc_now_ns();
    r->warm_end_ns = start + WARMUP_NS;
    r->end_ns = r->warm_end_ns + duration_s * NS_PER_S;
    int started = 0;
    for (int i = 0; i < r->threads; i++) {
        ts[i].run = r;
        ts[i].index = i;
        if (pthread_create(&ts[i].tid, NULL, bench_thread_main, &ts[i]) != 0) {
            MC_ERROR("cannot start thread %d: %s", i, strerror(errno));
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(ts[i].tid, NULL);
    row->block = r->block;
    row->batch = r->batch;
    row->threads = started;
    int stuck = summarize(ts, started, r, row);
    for (int i = 0; i < r->threads; i++)
        bench_latencies_free(&ts[i].lat);
    free(ts);
    return stuck;
}

/* ---- output ------------------------------------------------------------------------------ */

static void print_header(void)
{
    printf("%-8s %-5s %7s %6s %7s %9s %10s %10s %10s %7s %11s %9s %12s %10s\n", "protocol", "op",
           "block", "batch", "threads", "GB/s", "avg_us", "p50_us", "p99_us", "failed",
           "memcpy_GB/s", "vs_memcpy", "raw_tcp_GB/s", "vs_raw_tcp");
}

static void print_row(const bench_opts_t *o, const bench_row_t *row)
{
    char block[32];
    printf("%-8s %-5s %7s %6" PRIu64 " %7d %9.3f %10.1f %10.1f %10.1f %7" PRIu64, o->protocol,
           o->operation, bench_size_label(row->block, block, sizeof(block)), row->batch,
           row->threads, row->gbps, row->lat.avg_us, row->lat.p50_us, row->lat.p99_us, row->failed);
    bench_print_limit_cells(&row->limits, row->gbps, 2);
    printf("\n");
    fflush(stdout);
}

static json_t *config_json(const bench_opts_t *o, const char *segment, uint64_t target_addr)
{
    json_t *c = json_object();
    char addr[32];
    snprintf(addr, sizeof(addr), "0x%" PRIx64, target_addr);
    json_object_set_new(c, "mode", json_string(o->mode));
    json_object_set_new(c, "protocol", json_string(o->protocol));
    json_object_set_new(c, "engine_protocol", json_string(o->engine_protocol));
    json_object_set_new(c, "disable_shm", json_boolean(o->disable_shm));
    json_object_set_new(c, "operation", json_string(o->operation));
    json_object_set_new(c, "segment_id", json_string(segment));
    json_object_set_new(c, "target_addr", json_string(addr));
    json_object_set_new(c, "buffer_size", json_integer((json_int_t)o->buffer_size));
    json_object_set_new(c, "metadata_server", json_string(o->metadata_server));
    json_object_set_new(c, "local_server_name", json_string(o->local_server_name));
    json_object_set_new(c, "threads", json_integer(o->threads));
    json_object_set_new(c, "duration_s", json_integer(o->duration_s));
    json_object_set_new(c, "warmup_s", json_real((double)WARMUP_NS / 1e9));
    json_object_set_new(c, "block_sizes", bench_u64_list_json(o->blocks, o->nblocks));
    json_object_set_new(c, "batch_sizes", bench_u64_list_json(o->batches, o->nbatches));
    bench_limits_config_json(c, o->limits);
    return c;
}

static json_t *row_json(const bench_opts_t *o, const bench_row_t *row)
{
    json_t *j = json_object();
    json_object_set_new(j, "protocol", json_string(o->protocol));
    json_object_set_new(j, "operation", json_string(o->operation));
    json_object_set_new(j, "block_size", json_integer((json_int_t)row->block));
    json_object_set_new(j, "batch_size", json_integer((json_int_t)row->batch));
    json_object_set_new(j, "threads", json_integer(row->threads));
    json_object_set_new(j, "batches", json_integer((json_int_t)row->batches));
    json_object_set_new(j, "requests", json_integer((json_int_t)row->requests));
    json_object_set_new(j, "failed_requests", json_integer((json_int_t)row->failed));
    json_object_set_new(j, "first_error",
                        row->first_error ? json_string(mc_error_name(row->first_error))
                                         : json_null());
    json_object_set_new(j, "bytes", json_integer((json_int_t)row->bytes));
    json_object_set_new(j, "seconds", json_real(row->seconds));
    json_object_set_new(j, "gbps", json_real(row->gbps));
    json_object_set_new(j, "lat_avg_us", json_real(row->lat.avg_us));
    json_object_set_new(j, "lat_p50_us", json_real(row->lat.p50_us));
    json_object_set_new(j, "lat_p99_us", json_real(row->lat.p99_us));
    bench_limits_row_json(j, &row->limits, row->gbps);
    return j;
}

/* ---- initiator ------------------------------------------------------------------------------ */

static uint64_t largest_local_buffer(const bench_opts_t *o)
{
    uint64_t max = 0;
    for (size_t i = 0; i < o->nblocks; i++)
        for (size_t j = 0; j < o->nbatches; j++)
            if (o->blocks[i] * o->batches[j] > max)
                max = o->blocks[i] * o->batches[j];
    return max * (uint64_t)o->threads;
}

/* Measures the limits at `block` (memcpy area allocated and warmed on first use). */
static int measure_limits(const bench_opts_t *o, bench_memcpy_area_t *area, uint64_t block,
                          bench_limits_t *out)
{
    out->memcpy_gbps = -1;
    out->raw_tcp_gbps = -1;
    if (!o->limits)
        return 0;
    if (!area->src) {
        uint64_t max_block = 0;
        for (size_t i = 0; i < o->nblocks; i++)
            max_block = o->blocks[i] > max_block ? o->blocks[i] : max_block;
        if (bench_memcpy_area_init(area, max_block) != 0) {
            fprintf(stderr, PROGRAM ": cannot allocate the memcpy limit's working set\n");
            return 1;
        }
    }
    MC_INFO("measuring limits at %" PRIu64 " B blocks: memcpy %.0f s, raw loopback tcp %.0f s",
            block, BENCH_MEMCPY_SECONDS, BENCH_RAW_TCP_SECONDS);
    *out = bench_measure_limits(area, block);
    return 0;
}

static int write_json(const bench_opts_t *o, json_t *rows, const char *segment,
                      uint64_t target_addr)
{
    json_t *root = bench_report_json(PROGRAM, config_json(o, segment, target_addr));
    json_object_set_new(root, "rows", json_incref(rows));
    return bench_report_write(root, o->json_path, PROGRAM);
}

/*
 * The initiator side: every (block, batch) configuration against segment `segment` whose
 * buffer starts at target_addr. Returns the exit status.
 */
static int run_initiator(const bench_opts_t *o, const char *local_server_name, const char *segment,
                         uint64_t target_addr)
{
    mc_transfer_engine_t *te = create_engine(o, local_server_name);
    if (!te)
        return 1;
    const char *no_shm = getenv("MC_DISABLE_SHM");
    if (!o->disable_shm && no_shm && !strcmp(no_shm, "1"))
        MC_WARN("MC_DISABLE_SHM=1 is set: --protocol=shm will measure tcp");

    int status = 1;
    uint64_t local_len = largest_local_buffer(o);
    uint8_t *local = NULL;
    bench_memcpy_area_t area = {0};
    json_t *rows = json_array();
    mc_segment_id_t seg;
    int rc = mc_te_open_segment(te, segment, &seg);
    if (rc != 0) {
        print_engine_error("cannot open the target segment", rc);
        goto out;
    }
    local = bench_map_anonymous(local_len);
    if (!local) {
        fprintf(stderr, PROGRAM ": cannot allocate %" PRIu64 " bytes of local buffer\n", local_len);
        goto out;
    }
    bench_warm_memory(local, local_len);
    rc = mc_te_register_memory(te, local, local_len);
    if (rc != 0) {
        print_engine_error("cannot register the local buffer", rc);
        goto out;
    }
    MC_INFO("initiator: segment %s (buffer 0x%" PRIx64 ", %" PRIu64 " bytes), protocol %s,"
            " %s, %" PRId64 " thread(s), %" PRId64 " s per row after 1 s warm-up",
            segment, target_addr, o->buffer_size, o->protocol, o->operation, o->threads,
            o->duration_s);

    uint64_t total_failed = 0;
    int stuck = 0;
    print_header();
    for (size_t i = 0; i < o->nblocks && !stuck; i++) {
        bench_limits_t lim;
        if (measure_limits(o, &area, o->blocks[i], &lim) != 0)
            goto unregister;
        for (size_t j = 0; j < o->nbatches && !stuck; j++) {
            bench_run_t r = {
                .te = te,
                .segment = seg,
                .opcode = o->opcode,
                .local = local,
                .target_addr = target_addr,
                .target_len = o->buffer_size,
                .block = o->blocks[i],
                .batch = (size_t)o->batches[j],
                .threads = (int)o->threads,
            };
            bench_row_t row = {.limits = lim};
            stuck = run_config(&r, (uint64_t)o->duration_s, &row);
            print_row(o, &row);
            json_array_append_new(rows, row_json(o, &row));
            total_failed += row.failed;
        }
    }
    if (stuck) {
        fprintf(stderr, PROGRAM ": a batch did not finish within %d s; giving up\n",
                WAIT_TIMEOUT_MS / 1000);
        if (*o->json_path)
            write_json(o, rows, segment, target_addr);
        /* Requests are still in flight on the engine's workers: do not free what they touch. */
        fflush(NULL);
        _exit(1);
    }
    status = 0;
    if (total_failed) {
        fprintf(stderr, PROGRAM ": %" PRIu64 " request(s) failed\n", total_failed);
        status = 1;
    }
    if (*o->json_path && write_json(o, rows, segment, target_addr) != 0)
        status = 1;
unregister:
    mc_te_unregister_memory(te, local);
out:
    json_decref(rows);
    bench_memcpy_area_free(&area);
    if (local)
        munmap(local, local_len);
    mc_te_destroy(te);
    return status;
}

/* ---- loopback ---------------------------------------------------------------------------- */

/* argv for the target child, built from the parsed options. Freed by the caller (free_argv). */
static char **child_argv(const bench_opts_t *o, const char *argv0)
{
    char **v = calloc(16, sizeof(*v));
    if (!v)
        return NULL;
    int n = 0, bad = 0;
    bad |= (v[n++] = strdup(argv0)) == NULL;
    bad |= (v[n++] = strdup("--mode=target")) == NULL;
    bad |= asprintf(&v[n++], "--protocol=%s", o->protocol) < 0;
    bad |= asprintf(&v[n++], "--local_server_name=%s", o->local_server_name) < 0;
    bad |= asprintf(&v[n++], "--metadata_server=%s", o->metadata_server) < 0;
    bad |= asprintf(&v[n++], "--buffer_size=%" PRIu64, o->buffer_size) < 0;
    bad |= asprintf(&v[n++], "--operation=%s", o->operation) < 0;
    bad |= asprintf(&v[n++], "--block_size=%s", o->block_size_text) < 0;
    bad |= asprintf(&v[n++], "--batch_size=%s", o->batch_size_text) < 0;
    bad |= asprintf(&v[n++], "--threads=%" PRId64, o->threads) < 0;
    bad |= asprintf(&v[n++], "--duration=%" PRId64, o->duration_s) < 0;
    if (o->device_name && *o->device_name)
        bad |= asprintf(&v[n++], "--device_name=%s", o->device_name) < 0;
    if (bad) {
        for (int i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return NULL;
    }
    return v;
}

static void free_argv(char **v)
{
    for (int i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Reads one line (the child's readiness report) from fd within timeout_ms. */
static int read_ready_line(int fd, char *line, size_t cap, int timeout_ms)
{
    size_t len = 0;
    uint64_t deadline = mc_now_ms() + (uint64_t)timeout_ms;
    while (len + 1 < cap) {
        uint64_t now = mc_now_ms();
        if (now >= deadline)
            return MC_ERR_RPC_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, (int)(deadline - now));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        ssize_t got = read(fd, line + len, cap - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return MC_ERR_TRANSFER_FAIL; /* the child exited before reporting */
        len += (size_t)got;
        line[len] = '\0';
        if (memchr(line, '\n', len))
            return 0;
    }
    return MC_ERR_INVALID_PARAMS;
}

/* In the target child before exec: hands it the write end of the readiness pipe. */
static void pass_ready_fd(void *arg)
{
    char fdtext[16];
    int wfd = dup(*(const int *)arg); /* without O_CLOEXEC: survives the exec */
    snprintf(fdtext, sizeof(fdtext), "%d", wfd);
    setenv(READY_FD_ENV, fdtext, 1);
}

/* Starts the target child; *ready_fd receives the read end of its readiness pipe. Its stdout goes
 * to stderr: the parent's stdout is for the table only. */
static pid_t start_child(const bench_opts_t *o, const char *argv0, int *ready_fd)
{
    char exe[4096];
    if (bench_self_exe(exe, sizeof(exe)) != 0) {
        fprintf(stderr, PROGRAM ": cannot find my own executable: %s\n", strerror(errno));
        return -1;
    }
    char **args = child_argv(o, argv0);
    int fds[2];
    if (!args || pipe2(fds, O_CLOEXEC) != 0) {
        fprintf(stderr, PROGRAM ": cannot prepare the target child\n");
        free_argv(args);
        return -1;
    }
    pid_t pid =
        bench_spawn(PROGRAM, exe, args, STDERR_FILENO, STDERR_FILENO, pass_ready_fd, &fds[1]);
    free_argv(args);
    close(fds[1]);
    if (pid < 0) {
        fprintf(stderr, PROGRAM ": fork: %s\n", strerror(errno));
        close(fds[0]);
        return -1;
    }
    *ready_fd = fds[0];
    return pid;
}

/* The initiator's own endpoint in loopback: the given host, any port (the child has the port). */
static void loopback_initiator_name(const char *given, char *out, size_t cap)
{
    char host[MC_HOST_MAX];
    int port = 0;
    if (mc_net_split_endpoint(given, 0, host, &port) != 0) {
        snprintf(out, cap, "%s", given);
        return;
    }
    if (strchr(host, ':'))
        snprintf(out, cap, "[%s]:0", host);
    else
        snprintf(out, cap, "%s:0", host);
}

static int run_loopback(const bench_opts_t *o, const char *argv0)
{
    int ready_fd = -1;
    pid_t pid = start_child(o, argv0, &ready_fd);
    if (pid < 0)
        return 1;
    char line[MC_ENDPOINT_MAX + 64];
    int rc = read_ready_line(ready_fd, line, sizeof(line), CHILD_READY_TIMEOUT_MS);
    close(ready_fd);
    char segment[MC_ENDPOINT_MAX];
    uint64_t addr = 0;
    if (rc != 0 || sscanf(line, "%263s %" SCNx64, segment, &addr) != 2 || addr == 0) {
        fprintf(stderr, PROGRAM ": the target child did not report ready (%s)\n",
                rc == MC_ERR_RPC_TIMEOUT ? "timed out" : "it exited or wrote garbage");
        bench_stop_child(PROGRAM, pid, "target child");
        return 1;
    }
    char local_name[MC_ENDPOINT_MAX + 8];
    loopback_initiator_name(o->local_server_name, local_name, sizeof(local_name));
    int status = run_initiator(o, local_name, segment, addr);
    if (bench_stop_child(PROGRAM, pid, "target child") != 0 && status == 0)
        status = 1;
    return status;
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    bench_opts_t o = {
        .mode = "initiator",
        .operation = "read",
        .protocol = "tcp",
        .metadata_server = "P2PHANDSHAKE",
        .segment_id = "",
        .local_server_name = "0.0.0.0:0",
        .device_name = "",
        .target_addr_text = "",
        .json_path = "",
        .block_size_text = "4096",
        .batch_size_text = "128",
        .threads = 1,
        .duration_s = 10,
        .buffer_size = GIB,
        .limits = 1,
    };
    char *secret = "", *secret_file = "";
    mc_flag_t flags[] = {
        {"mode", MC_FLAG_STRING, &o.mode,
         "target (serve a buffer), initiator (drive transfers) or loopback (both, on this host)"},
        {"operation", MC_FLAG_STRING, &o.operation, "read or write"},
        {"protocol", MC_FLAG_STRING, &o.protocol,
         "tcp (shared memory disabled), shm (same-host shared memory) or rdma (UCX, shared "
         "memory disabled; with no RDMA device it warns once and runs over UCX's tcp/shm "
         "transports, unless env MC_RDMA_REQUIRE_DEVICE=1 makes that an error)"},
        {"block_size", MC_FLAG_STRING, &o.block_size_text,
         "bytes per request; size text, or a comma list (one row per value)"},
        {"batch_size", MC_FLAG_STRING, &o.batch_size_text,
         "requests per batch; or a comma list (one row per value)"},
        {"threads", MC_FLAG_INT, &o.threads, "submitting threads", 1, 256},
        {"duration", MC_FLAG_INT, &o.duration_s, "seconds measured per row, after 1 s of warm-up",
         1, 86400},
        {"buffer_size", MC_FLAG_SIZE, &o.buffer_size,
         "target buffer bytes (the target allocates it; the initiator wraps offsets in it)"},
        {"segment_id", MC_FLAG_STRING, &o.segment_id, "initiator: the target's segment name"},
        {"target_addr", MC_FLAG_STRING, &o.target_addr_text,
         "initiator: the target buffer's address, as the target prints it"},
        {"metadata_server", MC_FLAG_STRING, &o.metadata_server,
         "P2PHANDSHAKE or http://host:port/metadata"},
        {"local_server_name", MC_FLAG_STRING, &o.local_server_name,
         "this engine's host:port (port 0 = any)"},
        {"device_name", MC_FLAG_STRING, &o.device_name,
         "rdma devices, comma list (\"mlx5_0,mlx5_1\"; \"\" = auto); unknown ones fail start-up"},
        {"cluster_secret_file", MC_FLAG_STRING, &secret_file,
         "file holding the cluster secret (docs/security.md); exported as "
         "MOONCAKE_CLUSTER_SECRET_FILE to this process and what it spawns"},
        {"cluster_secret", MC_FLAG_STRING, &secret,
         "the cluster secret itself; exported as MOONCAKE_CLUSTER_SECRET"},
        {"json", MC_FLAG_STRING, &o.json_path, "also write machine info, config and rows here"},
        {"limits", MC_FLAG_BOOL, &o.limits,
         "measure memcpy and raw loopback tcp limits at every block size"},
    };
    size_t nflags = sizeof(flags) / sizeof(flags[0]);
    char err[256] = "";
    int rc = mc_flags_parse(flags, nflags, ignored_flags, argc, argv, PROGRAM,
                            "Usage: " PROGRAM " --mode=target|initiator|loopback [flags]", err,
                            sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 0;
    if (rc == 0)
        rc = validate_opts(&o, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": %s\n", err);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    /* The library and every spawned process take the secret from the environment. */
    if (*secret_file)
        setenv("MOONCAKE_CLUSTER_SECRET_FILE", secret_file, 1);
    if (*secret)
        setenv("MOONCAKE_CLUSTER_SECRET", secret, 1);
    if (!strcmp(o.mode, "target"))
        return run_target(&o);
    if (!strcmp(o.mode, "loopback"))
        return run_loopback(&o, argv[0]);
    return run_initiator(&o, o.local_server_name, o.segment_id, o.target_addr);
}
