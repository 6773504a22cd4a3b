/*
 * daos_adapter_bench.c — IOR-like MPI benchmark of the FS adapter (include/mooncake/fs_adapter.h):
 * the guide's "DAOS Adapter" benchmark. Normally started by scripts/daos_adapter_bench.sh, which
 * turns the guide's variables (NPROCS, HOSTS, DFS_PATH, DIR, NR, SIZE, XFER, ...) into flags.
 *
 * Every rank opens one adapter (fs type --fs_type: daos when built with -DUSE_DAOS=ON, else
 * posix) on <dfs_path>/<dir> and runs --threads I/O threads over its --nr objects "r<rank>/o<i>"
 * of --size bytes each (Mooncake-style objects: header + value, see object_layout.h):
 *   write round     (unless --rd_only) every object written once, writes split by --xfer
 *   read rounds     (--read_rounds, unless --wr_only) every object read back, split by
 *                   --read_xfer, and verified (below)
 *   cleanup         (--cleanup, default 1, 0 with --wr_only) every object removed
 * Rounds start together (MPI_Barrier); a rank's wall time runs from the barrier until its last
 * thread finishes. Rank 0 gathers and prints one line per rank and an [AGG] line per round:
 * aggregate MiB/s = total value bytes of successful operations / the slowest rank's wall time;
 * latency percentiles are over every successful object operation of every rank. Rank 0 writes
 * --summary as JSON (docs/daos_adapter_bench.md has the schema) and, next to it, the same table
 * as CSV (the summary's path with ".json" replaced by ".csv"; one row per round and rank plus
 * an "all" row per round, cleanup included).
 *
 * Progress: every --progress_interval seconds (0 = off) of a round, rank 0 prints one
 * "[progress]" line to stdout with the whole job's objects and bytes done so far, the rate over
 * the last interval and the average. Each rank's main thread waits for its I/O threads with a
 * timeout and joins an MPI_Allreduce of its counters at every tick (a rank whose threads are done
 * joins at once, so the round ends when the last rank's threads do). A rank's wall time is taken
 * by its last I/O thread, so the ticks do not change the figures.
 *
 * Storage that stops answering: every adapter call has a deadline (--op_timeout, the adapter's
 * read and write timeouts; daos only). A rank stops its round at the first call the adapter
 * refuses as wedged (-1601: a deadline passed and DAOS has not answered since) or after
 * --stop_after_failures failures in a row; its threads take no more objects, which are counted
 * as skipped. Every round ends with every rank (each call returns by its deadline), so the
 * collectives are always reached. After a round in which some rank stopped because the storage
 * stopped answering, later rounds, the manifest and the cleanup are not run (each would only
 * wait for deadlines), the summary is written with what failed, and the exit status is 3.
 * While a rank's calls are stuck its main thread still joins the progress ticks, and the
 * [progress] line names the ranks with failures, stopped, or with no call returned for a while.
 *
 * Data and verification: each thread's buffer is filled once with random bytes; before a write
 * every 4 KiB block of the buffer gets a 16-byte stamp (object id, block index), so no two blocks
 * of the data set are equal (no dedup, no compression gains). On read the adapter verifies the
 * header, the key and the CRC32C of the whole value; the benchmark then checks every block's
 * stamp, so a read returning another object's or another offset's bytes is caught. Stamp checks
 * run inside the timed round, outside the per-object latency.
 *
 * Write-only / read-only: a write round leaves a manifest object (ranks, nr, size) in the root;
 * --rd_only reads it first and refuses, with the values to use, when the data set does not match.
 *
 * MPI: built with the MPI CMake found (MPICH first). --expect_ranks (the script passes hosts x
 * NPROCS) makes a launcher of the other MPI family fail loudly instead of running every process
 * as rank 0 of 1. --build_info prints the build's MPI and fs types without starting MPI;
 * --mpi_check only starts MPI, checks the rank count and prints the hosts (pre-flight).
 *
 * Threads: MPI is called from the main thread only (MPI_THREAD_FUNNELED); I/O threads share the
 * adapter (thread-safe) and write only their own counters and the latency slots of the objects
 * they took. Memory: threads x size bytes of buffers per rank.
 */
#include "mooncake/errors.h"
#include "mooncake/fs_adapter.h"

#include "flags.h"
#include "log.h"
#include "net.h"
#include "parse.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "daos_adapter_bench"
#define MIB (1024.0 * 1024.0)
#define STAMP_BLOCK 4096
#define STAMP_LEN 16
#define STAMP_MAGIC UINT64_C(0x9E3779B97F4A7C15)
#define MANIFEST_KEY "daos_adapter_bench.manifest"
#define HOST_LEN 64

#ifndef MC_MPI_FAMILY_NAME
#define MC_MPI_FAMILY_NAME "unknown"
#endif
#ifndef MC_MPIEXEC_PATH
#define MC_MPIEXEC_PATH ""
#endif

#if defined(MPICH_VERSION)
#define MPI_FAMILY "mpich"
#elif defined(OPEN_MPI)
#define MPI_FAMILY "openmpi"
#else
#define MPI_FAMILY MC_MPI_FAMILY_NAME
#endif

/* ---- options ------------------------------------------------------------------------------ */

typedef struct opts {
    const char *fs_type;
    const char *dfs_path;
    const char *dir;
    int64_t nr;
    uint64_t size;
    uint64_t xfer;
    uint64_t read_xfer;
    uint64_t chunk;
    int64_t threads;
    int64_t read_rounds;
    int wr_only;
    int rd_only;
    int64_t cleanup; /* -1: default (1, or 0 with wr_only) */
    const char *summary;
    int64_t iovcnt;
    uint64_t align;
    const char *oclass;
    int verify;
    double progress_interval;
    uint64_t op_timeout_ms;      /* deadline of one adapter call; 0 = MC_FS_DEFAULT_TIMEOUT_MS */
    int64_t stop_after_failures; /* failures in a row that stop a rank's round; 0 = never */
    const char *hosts;
    int64_t nprocs_per_host;
    int64_t expect_ranks;
    int build_info;
    int mpi_check;
} opts_t;

static const char *default_fs_type(void)
{
    return mc_fs_type_supported("daos") ? "daos" : "posix";
}

/* Parses argv; returns 0 (run), 1 (exit 0: --help/--version/--build_info handled) or 2 (error). */
static int parse_opts(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){
        .fs_type = default_fs_type(),
        .dfs_path = "/mnt/mooncake-vol",
        .dir = "adapterbench",
        .nr = 512,
        .size = UINT64_C(16) << 20,
        .xfer = 0,
        .read_xfer = UINT64_C(8) << 20,
        .chunk = UINT64_C(8) << 20,
        .threads = 8,
        .read_rounds = 1,
        .cleanup = -1,
        .summary = "",
        .iovcnt = 1,
        .align = 0,
        .oclass = "",
        .verify = 1,
        .progress_interval = 10.0,
        .op_timeout_ms = 0,
        .stop_after_failures = 100,
        .hosts = "",
    };
    mc_flag_t flags[] = {
        {"fs_type", MC_FLAG_STRING, &o->fs_type,
         "FS adapter: daos (libdfs; default when built with -DUSE_DAOS=ON) or posix (any mount)"},
        {"dfs_path", MC_FLAG_STRING, &o->dfs_path,
         "DFS_PATH: MASS dfuse/UNS path resolving pool and container (posix: the directory)"},
        {"dir", MC_FLAG_STRING, &o->dir, "DIR: benchmark subdirectory under --dfs_path"},
        {"nr", MC_FLAG_INT, &o->nr, "NR: objects created by each rank", 1, 1000000000},
        {"size", MC_FLAG_SIZE, &o->size, "SIZE: bytes per object (k/m/g suffixes)"},
        {"xfer", MC_FLAG_SIZE, &o->xfer, "XFER: maximum bytes per write call; 0 = unsplit"},
        {"read_xfer", MC_FLAG_SIZE, &o->read_xfer,
         "READ_XFER: maximum bytes per read call; 0 = unsplit"},
        {"chunk", MC_FLAG_SIZE, &o->chunk, "CHUNK: DFS chunk size of created files (daos)"},
        {"threads", MC_FLAG_INT, &o->threads, "THREADS: concurrent I/O threads per rank", 1, 1024},
        {"read_rounds", MC_FLAG_INT, &o->read_rounds,
         "READ_ROUNDS: complete read passes over the data set", 0, 100000},
        {"wr_only", MC_FLAG_BOOL, &o->wr_only,
         "WR_ONLY: write only and keep the files for a later --rd_only run"},
        {"rd_only", MC_FLAG_BOOL, &o->rd_only,
         "RD_ONLY: read the files of a matching --wr_only run"},
        {"cleanup", MC_FLAG_INT, &o->cleanup,
         "CLEANUP: 1 = delete the objects after the run, 0 = keep; -1 = 1, or 0 with --wr_only", -1,
         1},
        {"summary", MC_FLAG_STRING, &o->summary, "SUMMARY: JSON result written by rank 0"},
        {"iovcnt", MC_FLAG_INT, &o->iovcnt,
         "scatter-gather pieces per transfer (each dfs_write/dfs_read or pwritev/preadv)", 1,
         MC_FS_IOVCNT_MAX},
        {"align", MC_FLAG_SIZE, &o->align,
         "alignment of the data buffers in bytes (a power of two); 0 = page-aligned"},
        {"oclass", MC_FLAG_STRING, &o->oclass,
         "DAOS object class of created files (S1, SX, EC_4P1GX, ...); \"\" = container default"},
        {"verify", MC_FLAG_BOOL, &o->verify,
         "check every 4 KiB block's stamp of the data read back (the adapter checks CRC32C)"},
        {"progress_interval", MC_FLAG_DOUBLE, &o->progress_interval,
         "PROGRESS: seconds between [progress] lines inside a round (rank 0, stdout); 0 = off"},
        {"op_timeout", MC_FLAG_DURATION_MS, &o->op_timeout_ms,
         "OP_TIMEOUT: deadline of one object write, read or remove (daos; a duration: 500ms, 10s; "
         "a bare number is ms); a call past it fails with DFS_NETWORK_TIMEOUT (-1600); 0 = the "
         "adapter's default (30 s)"},
        {"stop_after_failures", MC_FLAG_INT, &o->stop_after_failures,
         "failed operations in a row after which a rank stops its round (the rest are counted "
         "as skipped); 0 = never",
         0, 1000000000},
        {"hosts", MC_FLAG_STRING, &o->hosts, "HOSTS as given to the script (recorded in JSON)"},
        {"nprocs_per_host", MC_FLAG_INT, &o->nprocs_per_host,
         "NPROCS as given to the script (recorded in JSON)", 0, 1000000},
        {"expect_ranks", MC_FLAG_INT, &o->expect_ranks,
         "fail unless MPI reports this many ranks (catches a launcher of another MPI); 0 = any", 0,
         100000000},
        {"build_info", MC_FLAG_BOOL, &o->build_info,
         "print the MPI family, launcher and fs types of this build, then exit (no MPI)"},
        {"mpi_check", MC_FLAG_BOOL, &o->mpi_check,
         "start MPI, check the rank count, print the hosts, exit (pre-flight check)"},
    };
    size_t nflags = sizeof(flags) / sizeof(flags[0]);
    char err[256] = "";
    int rc = mc_flags_parse(flags, nflags, NULL, argc, argv, PROGRAM,
                            "Usage: mpirun -np N " PROGRAM " [flags]   (normally started by "
                            "scripts/daos_adapter_bench.sh)\n"
                            "Exit status: 0  every operation and verification succeeded\n"
                            "             1  some failed (each rank's first failure printed)\n"
                            "             2  configuration error\n"
                            "             3  the storage stopped answering (calls past "
                            "--op_timeout, then refused as\n"
                            "                wedged): the rank stopped that round, later rounds "
                            "and the cleanup were\n"
                            "                not run; the summary counts failed and skipped "
                            "operations",
                            err, sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 1;
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": %s (see --help)\n", err);
        return 2;
    }
    if (o->cleanup < 0)
        o->cleanup = o->wr_only ? 0 : 1;
    return 0;
}

/* Returns NULL when valid, else one sentence. */
static const char *validate_opts(const opts_t *o, char *buf, size_t len)
{
    if (o->wr_only && o->rd_only)
        return "--wr_only and --rd_only exclude each other (WR_ONLY=1 and RD_ONLY=1)";
    if (o->rd_only && o->read_rounds == 0)
        return "--rd_only needs --read_rounds >= 1";
    if (!mc_fs_type_supported(o->fs_type)) {
        snprintf(buf, len, "fs type %s is %s", o->fs_type,
                 !strcmp(o->fs_type, "daos")
                     ? "not built into this binary (rebuild with -DUSE_DAOS=ON)"
                     : "unknown (expected daos or posix)");
        return buf;
    }
    if (o->dfs_path[0] != '/')
        return "--dfs_path (DFS_PATH) must be an absolute path";
    if (!o->dir[0] || strstr(o->dir, ".."))
        return "--dir (DIR) must be a non-empty relative path without \"..\"";
    if (!(o->progress_interval >= 0 && o->progress_interval <= 86400))
        return "--progress_interval (PROGRESS) must be between 0 (off) and 86400 seconds";
    if (o->op_timeout_ms > UINT32_MAX)
        return "--op_timeout (OP_TIMEOUT) must be at most 4294967295 ms (about 49 days)";
    if (o->align & (o->align - 1))
        return "--align must be 0 or a power of two";
    if (o->xfer > MC_FS_XFER_MAX || o->read_xfer > MC_FS_XFER_MAX || o->chunk > MC_FS_XFER_MAX)
        return "--xfer, --read_xfer and --chunk must be at most 4 GiB";
    return NULL;
}

static void print_build_info(void)
{
    printf("program=" PROGRAM "\n");
    printf("version=%s\n", MC_VERSION_STRING);
    printf("mpi_family=%s\n", MPI_FAMILY);
    printf("mpi_launcher=%s\n", MC_MPIEXEC_PATH);
    printf("fs_types=posix%s\n", mc_fs_type_supported("daos") ? ",daos" : "");
    printf("default_fs_type=%s\n", default_fs_type());
#ifdef MC_DAOS_TEST_DOUBLE
    printf("daos_library=test-double\n");
#elif defined(MC_BENCH_HAVE_DAOS)
    printf("daos_library=libdfs\n");
#else
    printf("daos_library=none\n");
#endif
}

/* ---- run state ---------------------------------------------------------------------------- */

typedef enum phase_op { OP_WRITE, OP_READ, OP_REMOVE } phase_op_t;

static const char *op_name(phase_op_t op)
{
    return op == OP_WRITE ? "write" : op == OP_READ ? "read" : "cleanup";
}

typedef struct bench {
    opts_t o;
    int rank, nranks;
    char host[HOST_LEN];
    char root[PATH_MAX];
    mc_fs_adapter_t *fs;
    unsigned char **bufs;  /* one per thread, size o.size (+1 so size 0 has an address) */
    json_t *rounds;        /* rank 0 */
    json_t *cleanup_round; /* rank 0: the cleanup round's full record (CSV), or NULL */
    int any_failure;
    /* Set on every rank (collectively) after a round in which some rank stopped because the
     * storage stopped answering: later rounds would only wait for deadlines, so they are not
     * run. stopped_json (rank 0) says where and why. */
    int storage_stopped;
    json_t *stopped_json;
} bench_t;

/* Why a rank stopped a round before its last object (gathered as a double, printed by name). */
typedef enum stop_reason { STOP_NONE, STOP_STORAGE, STOP_FAILURES } stop_reason_t;

static const char *stop_name(int why)
{
    return why == STOP_STORAGE    ? "storage not answering"
           : why == STOP_FAILURES ? "failures in a row"
                                  : "";
}

typedef struct phase {
    bench_t *b;
    phase_op_t op;
    atomic_llong next;
    double *lat_ms; /* per object; < 0 = failed */
    atomic_llong failed, verify_failed;
    atomic_llong done_ok, done_bytes; /* successful operations so far (progress lines) */
    atomic_llong timeouts;            /* calls that passed their deadline (-1600) */
    atomic_llong in_a_row;            /* failures since the last success */
    atomic_ullong last_done_ns;       /* when an operation of this rank last returned */
    atomic_int stop;                  /* stop_reason_t: the threads take no more objects */
    atomic_int first_error;           /* the first failure's store code, 0 = none yet */
    uint64_t t0;                      /* the round's start */
    atomic_ullong first_error_ns;     /* when it happened */
    atomic_flag error_reported;
    pthread_mutex_t lock; /* guards threads_left and end_ns; done signals the main thread */
    pthread_cond_t done;
    int threads_left;
    uint64_t end_ns; /* when the last I/O thread finished */
} phase_t;

typedef struct worker_arg {
    phase_t *ph;
    int thread;
} worker_arg_t;

static uint64_t object_id(int rank, int64_t i)
{
    return ((uint64_t)(uint32_t)rank << 32) | (uint64_t)i;
}

static void stamp_of(uint64_t id, uint64_t block, unsigned char out[STAMP_LEN])
{
    uint64_t a = id ^ STAMP_MAGIC, b = block * STAMP_MAGIC + id;
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
}

static void stamp(unsigned char *buf, uint64_t size, uint64_t id)
{
    unsigned char s[STAMP_LEN];
    for (uint64_t off = 0, blk = 0; off < size; off += STAMP_BLOCK, blk++) {
        stamp_of(id, blk, s);
        memcpy(buf + off, s, size - off < STAMP_LEN ? size - off : STAMP_LEN);
    }
}

static int stamps_ok(const unsigned char *buf, uint64_t size, uint64_t id)
{
    unsigned char s[STAMP_LEN];
    for (uint64_t off = 0, blk = 0; off < size; off += STAMP_BLOCK, blk++) {
        stamp_of(id, blk, s);
        if (memcmp(buf + off, s, size - off < STAMP_LEN ? size - off : STAMP_LEN) != 0)
            return 0;
    }
    return 1;
}

static void report_first_error(phase_t *ph, const char *key, int rc, const char *what)
{
    if (atomic_flag_test_and_set(&ph->error_reported))
        return;
    atomic_store(&ph->first_error_ns, mc_now_ns());
    atomic_store(&ph->first_error, rc);
    fprintf(stderr, "[rank %d on %s] %s of %s/%s failed: %s (%d)%s\n", ph->b->rank, ph->b->host,
            op_name(ph->op), ph->b->root, key, what ? what : mc_error_name(rc), rc,
            " (further failures of this round are counted, not printed)");
}

/* After a failure: stops this rank's round when the storage is not answering (the adapter
 * refuses operations at once while wedged, so going on would only count thousands of instant
 * failures, or wait one deadline per probe) or after --stop_after_failures failures in a row. The
 * first thread to stop the round says so, once. */
static void maybe_stop(phase_t *ph, int rc, long long in_a_row)
{
    const opts_t *o = &ph->b->o;
    int why = rc == MC_ERR_DFS_SERVICE_UNAVAILABLE                               ? STOP_STORAGE
              : o->stop_after_failures > 0 && in_a_row >= o->stop_after_failures ? STOP_FAILURES
                                                                                 : STOP_NONE;
    int none = STOP_NONE;
    if (why == STOP_NONE || !atomic_compare_exchange_strong(&ph->stop, &none, why))
        return;
    fprintf(stderr,
            "[rank %d on %s] %s: stopping this round (%s: %s (%d) after %lld failure(s) in a "
            "row); the objects not attempted are counted as skipped\n",
            ph->b->rank, ph->b->host, op_name(ph->op), stop_name(why), mc_error_name(rc), rc,
            in_a_row);
}

static void *worker(void *arg)
{
    worker_arg_t *w = arg;
    phase_t *ph = w->ph;
    bench_t *b = ph->b;
    unsigned char *buf = b->bufs[w->thread];
    char key[64];
    for (;;) {
        if (atomic_load(&ph->stop) != STOP_NONE)
            break;
        int64_t i = atomic_fetch_add(&ph->next, 1);
        if (i >= b->o.nr)
            break;
        snprintf(key, sizeof(key), "r%d/o%" PRId64, b->rank, i);
        uint64_t id = object_id(b->rank, i);
        if (ph->op == OP_WRITE)
            stamp(buf, b->o.size, id);
        uint64_t t0 = mc_now_ns();
        int rc = ph->op == OP_WRITE  ? mc_fs_write(b->fs, key, buf, b->o.size)
                 : ph->op == OP_READ ? mc_fs_read(b->fs, key, buf, b->o.size)
                                     : mc_fs_remove(b->fs, key);
        uint64_t t1 = mc_now_ns();
        atomic_store(&ph->last_done_ns, t1);
        ph->lat_ms[i] = rc == 0 ? (double)(t1 - t0) / 1e6 : -1.0;
        if (rc != 0) {
            atomic_fetch_add(&ph->failed, 1);
            if (rc == MC_ERR_DFS_NETWORK_TIMEOUT)
                atomic_fetch_add(&ph->timeouts, 1);
            report_first_error(ph, key, rc, NULL);
            maybe_stop(ph, rc, atomic_fetch_add(&ph->in_a_row, 1) + 1);
        } else if (ph->op == OP_READ && b->o.verify && !stamps_ok(buf, b->o.size, id)) {
            ph->lat_ms[i] = -1.0;
            atomic_fetch_add(&ph->verify_failed, 1);
            report_first_error(ph, key, MC_ERR_CHECKSUM_MISMATCH,
                               "verification (wrong object or offset read back)");
            maybe_stop(ph, MC_ERR_CHECKSUM_MISMATCH, atomic_fetch_add(&ph->in_a_row, 1) + 1);
        } else {
            atomic_store(&ph->in_a_row, 0);
            atomic_fetch_add(&ph->done_ok, 1);
            if (ph->op != OP_REMOVE)
                atomic_fetch_add(&ph->done_bytes, (long long)b->o.size);
        }
    }
    pthread_mutex_lock(&ph->lock);
    if (--ph->threads_left == 0) {
        ph->end_ns = mc_now_ns();
        pthread_cond_signal(&ph->done);
    }
    pthread_mutex_unlock(&ph->lock);
    return NULL;
}

/* Per-rank numbers of one round, gathered to rank 0 as doubles. */
enum {
    RS_OBJECTS,
    RS_OK,
    RS_FAILED,
    RS_VERIFY,
    RS_BYTES,
    RS_WALL,
    RS_SKIPPED,  /* objects not attempted: the rank stopped the round early */
    RS_TIMEOUTS, /* calls that passed their deadline */
    RS_STOP,     /* stop_reason_t */
    RS_ERR,      /* the first failure's store code, 0 = none */
    RS_ERR_AT,   /* its time since the round's start, s; -1 = none */
    RS_COUNT
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static double percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k == 0 ? 0 : k - 1];
}

static double safe_div(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

/* {"code": c, "name": "..."} of a store code, or JSON null when there was none. */
static json_t *error_json(int code)
{
    return code ? json_pack("{s:i, s:s}", "code", code, "name", mc_error_name(code)) : json_null();
}

/* ", skipped N, stopped (why), first error NAME (code)" for the text lines, "" when clean. */
static void trouble_text(const double *v, char *out, size_t len)
{
    int n = 0;
    out[0] = '\0';
    if (v[RS_SKIPPED] > 0)
        n += snprintf(out + n, len - (size_t)n, ", skipped %.0f", v[RS_SKIPPED]);
    if (v[RS_STOP] != STOP_NONE && (size_t)n < len)
        n += snprintf(out + n, len - (size_t)n, ", stopped (%s)", stop_name((int)v[RS_STOP]));
    if (v[RS_ERR] != 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, ", first error %s (%d)", mc_error_name((int)v[RS_ERR]),
                 (int)v[RS_ERR]);
}

/*
 * Gathers a round to rank 0, prints the per-rank and [AGG] lines, appends the JSON round.
 * Collective. Returns, on every rank, 1 when some rank stopped the round because the storage
 * stopped answering.
 */
static int report_round(bench_t *b, phase_t *ph, int round, const double *mine)
{
    double *all = calloc((size_t)b->nranks * RS_COUNT, sizeof(double));
    char *hosts = b->rank == 0 ? calloc((size_t)b->nranks, HOST_LEN) : NULL;
    /* Every rank gets every rank's numbers, so all agree on whether the run goes on. */
    MPI_Allgather(mine, RS_COUNT, MPI_DOUBLE, all, RS_COUNT, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Gather(b->host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
    int64_t nr = b->o.nr;
    double *lat = b->rank == 0 ? malloc(sizeof(double) * (size_t)(nr * b->nranks)) : NULL;
    MPI_Gather(ph->lat_ms, (int)nr, MPI_DOUBLE, lat, (int)nr, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int storage_stopped = 0, first_rank = -1;
    for (int r = 0; r < b->nranks; r++) {
        const double *v = all + (size_t)r * RS_COUNT;
        storage_stopped |= v[RS_STOP] == STOP_STORAGE;
        if (v[RS_ERR] != 0 &&
            (first_rank < 0 || v[RS_ERR_AT] < all[first_rank * RS_COUNT + RS_ERR_AT]))
            first_rank = r;
    }
    if (b->rank != 0) {
        free(all);
        return storage_stopped;
    }

    const char *op = op_name(ph->op);
    double objects = 0, ok = 0, failed = 0, verify = 0, bytes = 0, wall = 0, skipped = 0,
           timeouts = 0;
    char trouble[160];
    json_t *per_rank = json_array();
    json_t *stopped_ranks = json_array();
    for (int r = 0; r < b->nranks; r++) {
        const double *v = all + (size_t)r * RS_COUNT;
        objects += v[RS_OBJECTS];
        ok += v[RS_OK];
        failed += v[RS_FAILED];
        verify += v[RS_VERIFY];
        bytes += v[RS_BYTES];
        skipped += v[RS_SKIPPED];
        timeouts += v[RS_TIMEOUTS];
        wall = v[RS_WALL] > wall ? v[RS_WALL] : wall;
        if (v[RS_STOP] != STOP_NONE)
            json_array_append_new(stopped_ranks, json_integer(r));
        double mibs = safe_div(v[RS_BYTES] / MIB, v[RS_WALL]);
        double objs = safe_div(v[RS_OK], v[RS_WALL]);
        trouble_text(v, trouble, sizeof(trouble));
        if (ph->op == OP_REMOVE)
            printf("[%s] rank %d (%s): %.0f objects removed in %.3f s: %.1f objects/s, failed "
                   "%.0f%s\n",
                   op, r, hosts + (size_t)r * HOST_LEN, v[RS_OK], v[RS_WALL], objs, v[RS_FAILED],
                   trouble);
        else
            printf("[%s %d] rank %d (%s): %.0f objects, %.1f MiB in %.3f s: %.1f MiB/s, %.1f "
                   "objects/s, failed %.0f%s\n",
                   op, round, r, hosts + (size_t)r * HOST_LEN, v[RS_OK], v[RS_BYTES] / MIB,
                   v[RS_WALL], mibs, objs, v[RS_FAILED] + v[RS_VERIFY], trouble);
        json_array_append_new(
            per_rank,
            json_pack(
                "{s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:o, s:o}", "rank", r, "host",
                hosts + (size_t)r * HOST_LEN, "objects", (json_int_t)v[RS_OK], "failed_ops",
                (json_int_t)(v[RS_FAILED] + v[RS_VERIFY]), "skipped_ops", (json_int_t)v[RS_SKIPPED],
                "timeouts", (json_int_t)v[RS_TIMEOUTS], "bytes", (json_int_t)v[RS_BYTES], "wall_s",
                v[RS_WALL], "mib_s", mibs, "objects_s", objs, "stopped",
                v[RS_STOP] != STOP_NONE ? json_string(stop_name((int)v[RS_STOP])) : json_null(),
                "first_error", error_json((int)v[RS_ERR])));
    }
    size_t n = 0;
    for (int64_t k = 0; k < nr * b->nranks; k++)
        if (lat[k] >= 0)
            lat[n++] = lat[k];
    qsort(lat, n, sizeof(double), cmp_double);
    double sum = 0;
    for (size_t k = 0; k < n; k++)
        sum += lat[k];
    double p50 = percentile(lat, n, 50), p95 = percentile(lat, n, 95), p99 = percentile(lat, n, 99),
           max = n ? lat[n - 1] : 0, mean = safe_div(sum, (double)n);
    /* The slowest rank's wall time, also when a rank stopped early: a rank that gave up cannot
     * make the others look faster. */
    double mibs = safe_div(bytes / MIB, wall), objs = safe_div(ok, wall);
    char agg_trouble[200] = "";
    if (skipped > 0 || json_array_size(stopped_ranks) > 0) {
        char *list = json_dumps(stopped_ranks, JSON_COMPACT);
        snprintf(agg_trouble, sizeof(agg_trouble), ", skipped %.0f, ranks stopped early %s",
                 skipped, list ? list : "?");
        free(list);
    }
    if (ph->op == OP_REMOVE)
        printf("[AGG] %s: %d ranks, %.0f objects removed, slowest rank %.3f s: %.1f objects/s, "
               "latency ms p50 %.3f p99 %.3f max %.3f, failed %.0f%s\n",
               op, b->nranks, ok, wall, objs, p50, p99, max, failed, agg_trouble);
    else
        printf("[AGG] %s %d: %d ranks, %.0f objects, %.1f MiB, slowest rank %.3f s: %.1f "
               "MiB/s, %.1f objects/s, latency ms p50 %.3f p95 %.3f p99 %.3f max %.3f, failed "
               "%.0f%s\n",
               op, round, b->nranks, ok, bytes / MIB, wall, mibs, objs, p50, p95, p99, max,
               failed + verify, agg_trouble);
    fflush(stdout);
    json_t *lat_json = json_pack("{s:f, s:f, s:f, s:f, s:f}", "p50", p50, "p95", p95, "p99", p99,
                                 "max", max, "mean", mean);
    json_t *first = json_null();
    if (first_rank >= 0) {
        first = error_json((int)all[first_rank * RS_COUNT + RS_ERR]);
        json_object_set_new(first, "rank", json_integer(first_rank));
    }
    json_array_append_new(
        b->rounds,
        json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:o, s:o, s:o, "
                  "s:o}",
                  "op", op, "round", round, "objects", (json_int_t)objects, "ok_objects",
                  (json_int_t)ok, "failed_ops", (json_int_t)(failed + verify), "skipped_ops",
                  (json_int_t)skipped, "timeouts", (json_int_t)timeouts, "verify_failures",
                  (json_int_t)verify, "bytes", (json_int_t)bytes, "wall_s", wall, "mib_s", mibs,
                  "objects_s", objs, "latency_ms", lat_json, "first_error", first, "stopped_ranks",
                  stopped_ranks, "per_rank", per_rank));
    if (failed + verify + skipped > 0)
        b->any_failure = 1;
    free(all);
    free(hosts);
    free(lat);
    return storage_stopped;
}

/* Waits until this rank's I/O threads are done or the monotonic clock reaches deadline_ns;
 * returns 1 when they are done. */
static int wait_threads(phase_t *ph, uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    pthread_mutex_lock(&ph->lock);
    while (ph->threads_left > 0 && mc_now_ns() < deadline_ns)
        pthread_cond_timedwait(&ph->done, &ph->lock, &ts);
    int done = ph->threads_left == 0;
    pthread_mutex_unlock(&ph->lock);
    return done;
}

/* Per-rank numbers of one progress tick, gathered to every rank. */
enum { PG_OK, PG_BYTES, PG_RUNNING, PG_FAILED, PG_STOP, PG_IDLE, PG_COUNT };

/* Rank 0: appends to a [progress] line what is wrong, naming the ranks: "; failed N; rank R
 * (host): failed F, stopped (why), no operation returned for S s; ...". A rank is listed when it
 * has failures, stopped early, or is running with no operation returned for `stall_s`. */
static void progress_trouble(const bench_t *b, const double *all, const char *hosts, double stall_s,
                             char *out, size_t len)
{
    enum { MAX_LISTED = 8 };
    double failed = 0;
    int listed = 0, more = 0;
    size_t n = 0;
    out[0] = '\0';
    for (int r = 0; r < b->nranks; r++)
        failed += all[(size_t)r * PG_COUNT + PG_FAILED];
    if (failed > 0)
        n += (size_t)snprintf(out, len, "; failed %.0f", failed); /* the total, then the ranks */
    char part[HOST_LEN + 160];
    for (int r = 0; r < b->nranks; r++) {
        const double *v = all + (size_t)r * PG_COUNT;
        int stalled = v[PG_RUNNING] > 0 && v[PG_IDLE] >= stall_s;
        if (v[PG_FAILED] == 0 && v[PG_STOP] == STOP_NONE && !stalled)
            continue;
        if (listed == MAX_LISTED) {
            more++;
            continue;
        }
        listed++;
        int k = snprintf(part, sizeof(part), "; rank %d (%s):", r, hosts + (size_t)r * HOST_LEN);
        if (v[PG_FAILED] > 0)
            k += snprintf(part + k, sizeof(part) - (size_t)k, " failed %.0f,", v[PG_FAILED]);
        if (v[PG_STOP] != STOP_NONE)
            k += snprintf(part + k, sizeof(part) - (size_t)k, " stopped (%s),",
                          stop_name((int)v[PG_STOP]));
        if (stalled)
            k += snprintf(part + k, sizeof(part) - (size_t)k, " no operation returned for %.1f s,",
                          v[PG_IDLE]);
        part[k - 1] = '\0'; /* the last comma */
        if (n < len)
            n += (size_t)snprintf(out + n, len - n, "%s", part);
    }
    if (more && n < len)
        snprintf(out + n, len - n, "; %d more rank(s)", more);
}

/* The [progress] lines of a round (see the comment atop); returns when every rank's I/O threads
 * are done. Collective: every rank calls it. A rank's main thread never does I/O, so the ticks go
 * on while its I/O threads are stuck in calls or failing, and the line names such ranks. */
static void progress_loop(bench_t *b, phase_t *ph, int round, uint64_t t0)
{
    uint64_t interval = (uint64_t)(b->o.progress_interval * 1e9);
    if (interval < 1000000u)
        interval = 1000000u; /* 1 ms: the flag's smallest useful value */
    /* A rank is called stalled when no operation of it returned for this long: one interval,
     * but at least 1 s, so a healthy rank in the middle of a large object is not. */
    double stall_s = b->o.progress_interval > 1.0 ? b->o.progress_interval : 1.0;
    uint64_t next = t0 + interval, last_t = t0;
    double last_bytes = 0, last_ok = 0, total = (double)b->o.nr * b->nranks;
    double *all = calloc((size_t)b->nranks * PG_COUNT, sizeof(double));
    char *hosts = b->rank == 0 ? calloc((size_t)b->nranks, HOST_LEN) : NULL;
    MPI_Gather(b->host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
    char trouble[1024];
    for (;;) {
        int done = wait_threads(ph, next);
        uint64_t now = mc_now_ns(), last = atomic_load(&ph->last_done_ns);
        double mine[PG_COUNT] = {
            [PG_OK] = (double)atomic_load(&ph->done_ok),
            [PG_BYTES] = (double)atomic_load(&ph->done_bytes),
            [PG_RUNNING] = done ? 0.0 : 1.0,
            [PG_FAILED] = (double)(atomic_load(&ph->failed) + atomic_load(&ph->verify_failed)),
            [PG_STOP] = (double)atomic_load(&ph->stop),
            [PG_IDLE] = (double)(now - (last > t0 ? last : t0)) / 1e9,
        };
        MPI_Allgather(mine, PG_COUNT, MPI_DOUBLE, all, PG_COUNT, MPI_DOUBLE, MPI_COMM_WORLD);
        double sum[PG_COUNT] = {0};
        for (int r = 0; r < b->nranks; r++)
            for (int k = 0; k < PG_COUNT; k++)
                sum[k] += all[(size_t)r * PG_COUNT + k];
        if (sum[PG_RUNNING] == 0)
            break; /* every rank is done */
        now = mc_now_ns();
        if (b->rank == 0) {
            double dt = (double)(now - last_t) / 1e9, el = (double)(now - t0) / 1e9;
            progress_trouble(b, all, hosts, stall_s, trouble, sizeof(trouble));
            if (ph->op == OP_REMOVE)
                printf("[progress] %s: %.0f/%.0f objects, ranks running %.0f/%d, %.1f objects/s "
                       "now, %.1f objects/s avg, elapsed %.1f s%s\n",
                       op_name(ph->op), sum[PG_OK], total, sum[PG_RUNNING], b->nranks,
                       safe_div(sum[PG_OK] - last_ok, dt), safe_div(sum[PG_OK], el), el, trouble);
            else
                printf("[progress] %s %d: %.0f/%.0f objects, %.1f MiB, ranks running %.0f/%d, "
                       "%.1f MiB/s now, %.1f MiB/s avg, elapsed %.1f s%s\n",
                       op_name(ph->op), round, sum[PG_OK], total, sum[PG_BYTES] / MIB,
                       sum[PG_RUNNING], b->nranks, safe_div((sum[PG_BYTES] - last_bytes) / MIB, dt),
                       safe_div(sum[PG_BYTES] / MIB, el), el, trouble);
            fflush(stdout);
        }
        last_t = now;
        last_bytes = sum[PG_BYTES];
        last_ok = sum[PG_OK];
        while (next <= now)
            next += interval; /* ticks missed while waiting for slower ranks are skipped */
    }
    free(all);
    free(hosts);
}

/* Runs one round of `op` on every rank with o.threads threads; rank 0 reports it. Collective;
 * returns on every rank 1 when some rank stopped the round because the storage stopped
 * answering. */
static int run_round(bench_t *b, phase_op_t op, int round)
{
    phase_t ph = {.b = b, .op = op, .error_reported = ATOMIC_FLAG_INIT};
    atomic_init(&ph.next, 0);
    atomic_init(&ph.failed, 0);
    atomic_init(&ph.verify_failed, 0);
    atomic_init(&ph.done_ok, 0);
    atomic_init(&ph.done_bytes, 0);
    atomic_init(&ph.timeouts, 0);
    atomic_init(&ph.in_a_row, 0);
    atomic_init(&ph.last_done_ns, 0);
    atomic_init(&ph.stop, STOP_NONE);
    atomic_init(&ph.first_error, 0);
    atomic_init(&ph.first_error_ns, 0);
    pthread_mutex_init(&ph.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ph.done, &ca);
    pthread_condattr_destroy(&ca);
    ph.lat_ms = calloc((size_t)b->o.nr, sizeof(double));
    for (int64_t i = 0; i < b->o.nr; i++)
        ph.lat_ms[i] = -1.0; /* objects never attempted count in no percentile */
    int nthreads = (int)b->o.threads;
    ph.threads_left = nthreads;
    pthread_t *tids = calloc((size_t)nthreads, sizeof(pthread_t));
    worker_arg_t *args = calloc((size_t)nthreads, sizeof(worker_arg_t));

    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = mc_now_ns();
    ph.t0 = t0;
    int *started = calloc((size_t)nthreads, sizeof(int));
    for (int t = 0; t < nthreads; t++) {
        args[t] = (worker_arg_t){.ph = &ph, .thread = t};
        started[t] = pthread_create(&tids[t], NULL, worker, &args[t]) == 0;
        if (!started[t])
            worker(&args[t]); /* no thread: this one's share runs here (and counts it done) */
    }
    if (b->o.progress_interval > 0)
        progress_loop(b, &ph, round, t0);
    for (int t = 0; t < nthreads; t++)
        if (started[t])
            pthread_join(tids[t], NULL);
    free(started);
    double wall = (double)(ph.end_ns - t0) / 1e9;
    pthread_cond_destroy(&ph.done);
    pthread_mutex_destroy(&ph.lock);

    double failed = (double)atomic_load(&ph.failed);
    double verify = (double)atomic_load(&ph.verify_failed);
    double ok = (double)atomic_load(&ph.done_ok);
    int err = atomic_load(&ph.first_error);
    double mine[RS_COUNT] = {
        [RS_OBJECTS] = (double)b->o.nr,
        [RS_OK] = ok,
        [RS_FAILED] = failed,
        [RS_VERIFY] = verify,
        [RS_BYTES] = op == OP_REMOVE ? 0 : ok * (double)b->o.size,
        [RS_WALL] = wall,
        [RS_SKIPPED] = (double)b->o.nr - ok - failed - verify,
        [RS_TIMEOUTS] = (double)atomic_load(&ph.timeouts),
        [RS_STOP] = (double)atomic_load(&ph.stop),
        [RS_ERR] = (double)err,
        [RS_ERR_AT] = err ? (double)(atomic_load(&ph.first_error_ns) - t0) / 1e9 : -1.0,
    };
    int stopped = report_round(b, &ph, round, mine);
    free(tids);
    free(args);
    free(ph.lat_ms);
    return stopped;
}

/* ---- manifest (write-only / read-only pairs) ---------------------------------------------- */

static int write_manifest(bench_t *b)
{
    char *text = NULL;
    json_t *m = json_pack("{s:s, s:i, s:I, s:I, s:s}", "benchmark", PROGRAM, "ranks", b->nranks,
                          "nr", (json_int_t)b->o.nr, "size_bytes", (json_int_t)b->o.size, "fs_type",
                          b->o.fs_type);
    text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    int rc = mc_fs_write(b->fs, MANIFEST_KEY, text, strlen(text));
    if (rc != 0)
        fprintf(stderr, PROGRAM ": cannot write the data set manifest: %s (%d)\n",
                mc_error_name(rc), rc);
    free(text);
    return rc;
}

/* Rank 0: 0 when the data set under the root matches this run, else prints why and returns 1. */
static int check_manifest(bench_t *b)
{
    uint64_t len = 0;
    int rc = mc_fs_stat(b->fs, MANIFEST_KEY, &len);
    if (rc == MC_ERR_FILE_NOT_FOUND) {
        fprintf(stderr,
                PROGRAM ": RD_ONLY: no data set under %s: run the same command with "
                        "WR_ONLY=1 first (same DFS_PATH, DIR, HOSTS, NPROCS, NR and SIZE)\n",
                b->root);
        return 1;
    }
    char *text = rc == 0 && len < 65536 ? calloc(1, len + 1) : NULL;
    if (text)
        rc = mc_fs_read(b->fs, MANIFEST_KEY, text, len);
    json_t *m = text && rc == 0 ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!m) {
        fprintf(stderr, PROGRAM ": RD_ONLY: the data set manifest under %s is unreadable (%s)\n",
                b->root, rc ? mc_error_name(rc) : "not JSON");
        return 1;
    }
    json_int_t ranks = 0, nr = 0, size = 0;
    const char *fs_type = "";
    json_unpack(m, "{s?I, s?I, s?I, s?s}", "ranks", &ranks, "nr", &nr, "size_bytes", &size,
                "fs_type", &fs_type);
    int match = ranks == b->nranks && nr == b->o.nr && size == (json_int_t)b->o.size;
    if (!match)
        fprintf(stderr,
                PROGRAM ": RD_ONLY: the data set under %s does not match this run: it was "
                        "written by %lld ranks (hosts x NPROCS) with NR=%lld SIZE=%lld bytes, "
                        "this run has %d ranks, NR=%lld, SIZE=%llu bytes; rerun with the "
                        "write-only run's HOSTS, NPROCS, NR and SIZE\n",
                b->root, (long long)ranks, (long long)nr, (long long)size, b->nranks,
                (long long)b->o.nr, (unsigned long long)b->o.size);
    json_decref(m);
    return match ? 0 : 1;
}

/* ---- summary ------------------------------------------------------------------------------ */

/* The CSV path next to the summary: ".json" replaced by ".csv", or ".csv" appended. */
static void csv_path_of(const char *summary, char *out, size_t len)
{
    size_t n = strlen(summary);
    if (n > 5 && !strcmp(summary + n - 5, ".json"))
        n -= 5;
    snprintf(out, len, "%.*s.csv", (int)n, summary);
}

static double jnum(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* One CSV row per rank of the round `r` and one "all" row (latency only there). Hosts are names
 * (no commas or quotes: gethostname) and are written as they are. */
static void csv_round(FILE *f, const json_t *r)
{
    const char *op = json_string_value(json_object_get(r, "op"));
    json_int_t round = json_integer_value(json_object_get(r, "round"));
    const json_t *ranks = json_object_get(r, "per_rank");
    for (size_t k = 0; k < json_array_size(ranks); k++) {
        const json_t *pr = json_array_get(ranks, k);
        fprintf(f, "%s,%lld,%lld,%s,%.0f,%.0f,%.0f,%.9g,%.9g,%.9g,,,,,,%.0f\n", op,
                (long long)round, (long long)json_integer_value(json_object_get(pr, "rank")),
                json_string_value(json_object_get(pr, "host")), jnum(pr, "objects"),
                jnum(pr, "failed_ops"), jnum(pr, "bytes"), jnum(pr, "wall_s"), jnum(pr, "mib_s"),
                jnum(pr, "objects_s"), jnum(pr, "skipped_ops"));
    }
    const json_t *lat = json_object_get(r, "latency_ms");
    fprintf(f, "%s,%lld,all,,%.0f,%.0f,%.0f,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.0f\n", op,
            (long long)round, jnum(r, "ok_objects"), jnum(r, "failed_ops"), jnum(r, "bytes"),
            jnum(r, "wall_s"), jnum(r, "mib_s"), jnum(r, "objects_s"), jnum(lat, "p50"),
            jnum(lat, "p95"), jnum(lat, "p99"), jnum(lat, "max"), jnum(lat, "mean"),
            jnum(r, "skipped_ops"));
}

/* Rank 0: writes the rounds (and the cleanup round) as CSV next to the summary, atomically. */
static int write_csv(bench_t *b)
{
    char path[PATH_MAX], tmp[PATH_MAX + 16];
    csv_path_of(b->o.summary, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, PROGRAM ": cannot write the CSV %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "op,round,rank,host,objects,failed_ops,bytes,wall_s,mib_s,objects_s,lat_p50_ms,"
               "lat_p95_ms,lat_p99_ms,lat_max_ms,lat_mean_ms,skipped_ops\n");
    for (size_t k = 0; k < json_array_size(b->rounds); k++)
        csv_round(f, json_array_get(b->rounds, k));
    if (b->cleanup_round)
        csv_round(f, b->cleanup_round);
    int rc = ferror(f) ? -1 : 0;
    if (fclose(f) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": cannot write the CSV %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

static void utc_now(char *out, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int write_summary(bench_t *b, const char *started, json_t *cleanup, const char *hosts_json)
{
    char finished[32], lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    utc_now(finished, sizeof(finished));
    MPI_Get_library_version(lib, &liblen);
    lib[strcspn(lib, "\n")] = '\0';
    const opts_t *o = &b->o;
    json_t *hosts = json_loads(hosts_json, 0, NULL);
    json_t *config = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b, s:b, "
        "s:I, s:I, s:s, s:b, s:I}",
        "fs_type", o->fs_type, "dfs_path", o->dfs_path, "dir", o->dir, "root_dir", b->root,
        "hosts_arg", o->hosts, "nprocs_per_host", (json_int_t)o->nprocs_per_host, "ranks",
        b->nranks, "nr", (json_int_t)o->nr, "size_bytes", (json_int_t)o->size, "xfer_bytes",
        (json_int_t)o->xfer, "read_xfer_bytes", (json_int_t)o->read_xfer, "chunk_bytes",
        (json_int_t)o->chunk, "threads", (json_int_t)o->threads, "read_rounds",
        (json_int_t)o->read_rounds, "wr_only", o->wr_only, "rd_only", o->rd_only, "cleanup",
        (int)o->cleanup, "iovcnt", (json_int_t)o->iovcnt, "align_bytes",
        (json_int_t)(o->align ? o->align : (uint64_t)sysconf(_SC_PAGESIZE)), "oclass", o->oclass,
        "verify", o->verify, "dataset_bytes",
        (json_int_t)((uint64_t)b->nranks * (uint64_t)o->nr * o->size));
    json_object_set_new(
        config, "op_timeout_ms",
        json_integer(o->op_timeout_ms ? (json_int_t)o->op_timeout_ms : MC_FS_DEFAULT_TIMEOUT_MS));
    json_object_set_new(config, "stop_after_failures", json_integer(o->stop_after_failures));
    json_t *root =
        json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:i}, s:o, s:o, s:O, s:o, s:s, s:O}",
                  "benchmark", PROGRAM, "version", MC_VERSION_STRING, "started_at", started,
                  "finished_at", finished, "mpi", "family", MPI_FAMILY, "library", lib, "ranks",
                  b->nranks, "hosts", hosts ? hosts : json_array(), "config", config, "rounds",
                  b->rounds, "cleanup", cleanup, "result", b->any_failure ? "failed" : "ok",
                  "stopped", b->stopped_json ? b->stopped_json : json_null());
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", o->summary, (int)getpid());
    int rc = json_dump_file(root, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    if (rc == 0 && rename(tmp, o->summary) != 0)
        rc = -1;
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": cannot write SUMMARY %s: %s\n", o->summary, strerror(errno));
        unlink(tmp);
    }
    json_decref(root);
    return rc;
}

/* JSON array text of the distinct hosts in rank order (rank 0), "" elsewhere. */
static char *gather_hosts(bench_t *b)
{
    char *all = b->rank == 0 ? calloc((size_t)b->nranks, HOST_LEN) : NULL;
    MPI_Gather(b->host, HOST_LEN, MPI_CHAR, all, HOST_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (b->rank != 0)
        return NULL;
    json_t *arr = json_array();
    for (int r = 0; r < b->nranks; r++) {
        const char *h = all + (size_t)r * HOST_LEN;
        int seen = 0;
        for (size_t k = 0; k < json_array_size(arr); k++)
            seen |= !strcmp(json_string_value(json_array_get(arr, k)), h);
        if (!seen)
            json_array_append_new(arr, json_string(h));
    }
    char *text = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    free(all);
    return text;
}

/* ---- main --------------------------------------------------------------------------------- */

/* Every rank: 1 if any rank's `bad` is set. */
static int any_rank(int bad)
{
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

static int check_rank_count(const bench_t *b)
{
    if (b->o.expect_ranks == 0 || b->o.expect_ranks == b->nranks)
        return 0;
    fprintf(stderr,
            PROGRAM " on %s: MPI reports %d rank(s), the launcher was asked for %" PRId64
                    ": this binary was built with %s and is being started by a launcher of "
                    "another MPI (each process then runs alone as rank 0). Use %s, or unset "
                    "MPIRUN\n",
            b->host, b->nranks, b->o.expect_ranks,
            !strcmp(MPI_FAMILY, "mpich")     ? "MPICH"
            : !strcmp(MPI_FAMILY, "openmpi") ? "Open MPI"
                                             : "MPI",
            MC_MPIEXEC_PATH[0] ? MC_MPIEXEC_PATH : "the launcher of the same MPI");
    return 1;
}

static int open_adapter(bench_t *b)
{
    mc_fs_config_t cfg;
    mc_fs_config_init(&cfg);
    cfg.fs_type = b->o.fs_type;
    cfg.root_dir = b->root;
    cfg.write_xfer_size = b->o.xfer;
    cfg.read_xfer_size = b->o.read_xfer;
    cfg.chunk_size = b->o.chunk;
    cfg.oclass = b->o.oclass;
    cfg.iovcnt = (unsigned)b->o.iovcnt;
    cfg.alignment = (size_t)b->o.align;
    cfg.io_threads = (unsigned)b->o.threads;
    cfg.read_timeout_ms = (uint32_t)b->o.op_timeout_ms; /* 0: the adapter's default */
    cfg.write_timeout_ms = (uint32_t)b->o.op_timeout_ms;
    /* Rank 0 creates the root and hash directories; then the others open them. */
    int rc = 0;
    if (b->rank == 0)
        rc = mc_fs_adapter_open(&cfg, &b->fs);
    int bad = any_rank(rc != 0);
    if (!bad && b->rank != 0)
        rc = mc_fs_adapter_open(&cfg, &b->fs);
    if (rc != 0)
        fprintf(stderr, "[rank %d on %s] cannot open the %s adapter on %s: %s (%d)\n", b->rank,
                b->host, b->o.fs_type, b->root, mc_error_name(rc), rc);
    return bad || any_rank(rc != 0);
}

static int alloc_buffers(bench_t *b)
{
    size_t align = b->o.align ? (size_t)b->o.align : (size_t)sysconf(_SC_PAGESIZE);
    if (align < sizeof(void *))
        align = sizeof(void *);
    b->bufs = calloc((size_t)b->o.threads, sizeof(*b->bufs));
    if (!b->bufs)
        return -1;
    uint64_t seed = 0x243F6A8885A308D3ull ^ ((uint64_t)b->rank << 20);
    for (int64_t t = 0; t < b->o.threads; t++) {
        void *p = NULL;
        if (posix_memalign(&p, align, (size_t)b->o.size + 1) != 0)
            return -1;
        b->bufs[t] = p;
        uint64_t x = seed + (uint64_t)t * 0x9E3779B97F4A7C15ull;
        for (uint64_t off = 0; off + 8 <= b->o.size; off += 8) { /* xorshift64 */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            memcpy(b->bufs[t] + off, &x, 8);
        }
        memset(b->bufs[t] + (b->o.size & ~(uint64_t)7), 0x5a, (size_t)(b->o.size & 7) + 1);
    }
    return 0;
}

static void free_buffers(bench_t *b)
{
    for (int64_t t = 0; b->bufs && t < b->o.threads; t++)
        free(b->bufs[t]);
    free(b->bufs);
}

static int run_mpi_check(bench_t *b)
{
    int bad = any_rank(check_rank_count(b));
    char *hosts = gather_hosts(b);
    if (b->rank == 0 && !bad)
        printf("mpi_check ok: %d ranks (%s) on hosts %s\n", b->nranks, MPI_FAMILY, hosts);
    free(hosts);
    return bad;
}

/* After a round (every rank, with the round's collective verdict): the first round some rank
 * stopped because the storage stopped answering ends the run; rank 0 records where. */
static void note_stop(bench_t *b, int storage_stopped, phase_op_t op, int round)
{
    if (!storage_stopped || b->storage_stopped)
        return;
    b->storage_stopped = 1;
    b->any_failure = 1;
    if (b->rank != 0)
        return;
    const json_t *r = json_array_get(b->rounds, json_array_size(b->rounds) - 1);
    b->stopped_json =
        json_pack("{s:s, s:i, s:s, s:O}", "op", op_name(op), "round", round, "reason",
                  stop_name(STOP_STORAGE), "ranks", json_object_get(r, "stopped_ranks"));
}

static int run(bench_t *b)
{
    const opts_t *o = &b->o;
    char started[32];
    utc_now(started, sizeof(started));
    if (b->rank == 0 && o->summary[0]) {
        FILE *f = fopen(o->summary, "a");
        if (!f)
            fprintf(stderr, PROGRAM ": cannot write SUMMARY %s: %s\n", o->summary, strerror(errno));
        else
            fclose(f);
        if (!f)
            return any_rank(1);
    }
    if (any_rank(0))
        return 1;
    if (open_adapter(b))
        return 1;
    if (o->rd_only && any_rank(b->rank == 0 ? check_manifest(b) : 0))
        return 1;
    if (alloc_buffers(b) != 0) {
        fprintf(stderr, "[rank %d] cannot allocate %" PRId64 " buffers of %" PRIu64 " bytes\n",
                b->rank, o->threads, o->size);
        return any_rank(1);
    }
    if (any_rank(0))
        return 1;
    if (b->rank == 0) {
        char sz[32];
        printf(PROGRAM ": fs %s, root %s, %d ranks x %" PRId64 " objects x %s, %" PRId64
                       " threads/rank, xfer %" PRIu64 ", read_xfer %" PRIu64 ", chunk %" PRIu64
                       ", iovcnt %" PRId64 ", MPI %s\n",
               o->fs_type, b->root, b->nranks, o->nr, mc_format_size(o->size, sz, sizeof(sz)),
               o->threads, o->xfer, o->read_xfer, o->chunk, o->iovcnt, MPI_FAMILY);
        fflush(stdout);
    }
    b->rounds = b->rank == 0 ? json_array() : NULL;
    json_t *not_run = b->rank == 0 ? json_array() : NULL;
    if (!o->rd_only) {
        note_stop(b, run_round(b, OP_WRITE, 1), OP_WRITE, 1);
        /* No manifest for a data set the storage stopped taking: a read-only run is refused. */
        if (b->rank == 0 && !b->storage_stopped && write_manifest(b) != 0)
            b->any_failure = 1;
    }
    for (int r = 1; !o->wr_only && r <= o->read_rounds; r++) {
        if (b->storage_stopped) {
            if (not_run)
                json_array_append_new(not_run, json_sprintf("read %d", r));
            continue;
        }
        note_stop(b, run_round(b, OP_READ, r), OP_READ, r);
    }

    json_t *cleanup = NULL;
    if (o->cleanup && b->storage_stopped) {
        /* The objects stay where they are (as after WR_ONLY=1): removing them would only wait
         * for deadlines too. */
        if (not_run)
            json_array_append_new(not_run, json_string("cleanup"));
        if (b->rank == 0)
            cleanup = json_pack("{s:b, s:b}", "performed", 0, "skipped", 1);
    } else if (o->cleanup) {
        size_t before = b->rank == 0 ? json_array_size(b->rounds) : 0;
        note_stop(b, run_round(b, OP_REMOVE, 1), OP_REMOVE, 1);
        if (b->rank == 0) {
            /* The cleanup "round" goes to its own key, not to the write/read rounds. */
            json_t *c = json_array_get(b->rounds, before);
            b->cleanup_round = json_incref(c);
            cleanup = json_pack(
                "{s:b, s:O, s:O, s:O, s:O, s:O}", "performed", 1, "removed",
                json_object_get(c, "ok_objects"), "failed_ops", json_object_get(c, "failed_ops"),
                "skipped_ops", json_object_get(c, "skipped_ops"), "first_error",
                json_object_get(c, "first_error"), "wall_s", json_object_get(c, "wall_s"));
            json_array_remove(b->rounds, before);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (b->rank == 0 && !b->storage_stopped) {
            int rc = mc_fs_remove(b->fs, MANIFEST_KEY);
            if (rc != 0 && rc != MC_ERR_FILE_NOT_FOUND)
                b->any_failure = 1;
        }
    } else if (b->rank == 0) {
        cleanup = json_pack("{s:b}", "performed", 0);
    }
    if (b->stopped_json)
        json_object_set_new(b->stopped_json, "rounds_not_run", not_run);
    else
        json_decref(not_run);
    char *hosts = gather_hosts(b);
    int rc = 0;
    if (b->rank == 0) {
        if (o->summary[0] && write_summary(b, started, cleanup, hosts) != 0) {
            rc = 1;
        } else if (o->summary[0]) {
            char csv[PATH_MAX];
            csv_path_of(o->summary, csv, sizeof(csv));
            if (write_csv(b) != 0)
                rc = 1;
            else
                printf(PROGRAM ": summary written to %s\n" PROGRAM ": CSV written to %s\n",
                       o->summary, csv);
        }
        if (!o->summary[0])
            json_decref(cleanup);
        if (b->storage_stopped)
            printf(PROGRAM ": FAILED: the storage stopped answering; later rounds%s were not run "
                           "(exit status 3)\n",
                   o->cleanup ? " and the cleanup" : "");
        else if (b->any_failure)
            printf(PROGRAM ": FAILED: some operations failed (see above)\n");
        fflush(stdout);
        json_decref(b->rounds);
        json_decref(b->cleanup_round);
        json_decref(b->stopped_json);
    }
    free(hosts);
    free_buffers(b);
    MPI_Bcast(&b->any_failure, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (any_rank(rc) || b->any_failure)
        return b->storage_stopped ? 3 : 1;
    return 0;
}

int main(int argc, char **argv)
{
    bench_t b = {0};
    int prc = parse_opts(argc, argv, &b.o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    if (b.o.build_info) {
        print_build_info();
        return 0;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
    gethostname(b.host, sizeof(b.host) - 1);
    if (b.rank != 0)
        mc_log_set_level(MC_LOG_WARNING); /* one rank's INFO lines are enough */

    int rc;
    char buf[256];
    const char *invalid = validate_opts(&b.o, buf, sizeof(buf));
    if (invalid) {
        if (b.rank == 0)
            fprintf(stderr, PROGRAM ": %s\n", invalid);
        rc = 2;
    } else if (any_rank(check_rank_count(&b))) {
        rc = 2;
    } else if (b.o.mpi_check) {
        rc = run_mpi_check(&b);
    } else {
        snprintf(b.root, sizeof(b.root), "%s/%s", b.o.dfs_path, b.o.dir);
        rc = run(&b);
    }
    mc_fs_adapter_close(b.fs);
    MPI_Finalize();
    return rc;
}
