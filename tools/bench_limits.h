/*
 * bench_limits.h — what the benchmarks in tools/ (transfer_engine_bench, mooncake_store_bench)
 * share: the machine's limits they measure next to their own numbers, and the pieces of their
 * options, tables, JSON reports and child processes that are the same in both.
 *
 * Limits, measured in the same run as the thing benchmarked, so every number comes with "out of
 * how much":
 *
 *   memcpy   single-thread memcpy in block-sized chunks over a BENCH_MEMCPY_WORKING_SET working
 *            set (warm: every page touched first), for BENCH_MEMCPY_SECONDS;
 *   raw tcp  one plain TCP stream over 127.0.0.1 between two threads, block-sized send()s and
 *            MSG_WAITALL recv()s, with the Transfer Engine's socket options (mc_net_tune_socket),
 *            for BENCH_RAW_TCP_SECONDS;
 *   round trips  (small values) request/response pairs per second over loopback between two
 *            threads, blocking: bench_measure_round_trips;
 *
 * each reported as its best window of at least 100 ms, so that time slices lost to other work
 * on a shared machine do not lower the limit (the whole run when a block takes longer);
 *
 * plus the machine's description for a JSON report, and the anonymous-memory helpers both
 * measurements (and the benchmarks' own buffers) use.
 *
 * Shared by the two programs as well: comma-list flags, size labels, per-thread latency samples
 * and their mean / p50 / p99, the limit cells of a table row and the limit keys of its JSON, the
 * report's frame ({benchmark, version, machine, config, ...}) and writing it, and starting and
 * stopping a child process. Messages to stderr start with the `program` the caller passes.
 *
 * Rates are GB/s with GB = 1e9 bytes. Functions are called from the benchmark's main thread
 * (bench_latencies_add from the thread owning the samples); bench_measure_raw_tcp() starts and
 * joins one thread of its own.
 */
#ifndef MC_TOOLS_BENCH_LIMITS_H
#define MC_TOOLS_BENCH_LIMITS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_MEMCPY_WORKING_SET (UINT64_C(256) << 20) /* bytes, per buffer (source and dest) */
#define BENCH_MEMCPY_SECONDS 1.0
#define BENCH_RAW_TCP_SECONDS 2.0
#define BENCH_CHILD_STOP_TIMEOUT_MS (10 * 1000) /* bench_stop_child: SIGTERM to SIGKILL */

/* The two limits at one block size; a value <= 0 means "not measured" or "failed". */
typedef struct bench_limits {
    double memcpy_gbps;
    double raw_tcp_gbps;
    double round_trips; /* per second (bench_measure_round_trips), small blocks only */
} bench_limits_t;

/* Blocks up to this size also get the round-trip limit (a small put's or get's floor). */
#define BENCH_ROUND_TRIP_MAX_BLOCK (UINT64_C(64) << 10)

/* Source and destination for the memcpy limit; allocated once, reused for every block size. */
typedef struct bench_memcpy_area {
    uint8_t *src, *dst;
    size_t len; /* each */
} bench_memcpy_area_t;

/* Anonymous, page-aligned, private memory; NULL on failure. Free with munmap(p, len). */
void *bench_map_anonymous(size_t len);

/* Touches every page twice (memset 0, then 0xA5): these VMs are slow on the first touch of fresh
 * memory, and a benchmark must not time page faults. */
void bench_warm_memory(void *p, size_t len);

/* Maps and warms both buffers, max(largest_block, BENCH_MEMCPY_WORKING_SET) bytes each.
 * 0, or -1 (out of memory; the area is left empty). */
int bench_memcpy_area_init(bench_memcpy_area_t *area, uint64_t largest_block);
/* Unmaps what init mapped; an empty (zeroed) area is a no-op. */
void bench_memcpy_area_free(bench_memcpy_area_t *area);

/* GB/s of single-thread memcpy at `block` over the area; -1 when block is 0 or larger than it. */
double bench_measure_memcpy(const bench_memcpy_area_t *area, uint64_t block);

/* GB/s of a raw loopback TCP stream at `block`; -1 (errno set) when the measurement failed. */
double bench_measure_raw_tcp(uint64_t block);

/* Round trips per second between two threads of this process over loopback TCP: `request`
 * bytes (1 B to 1 MiB) one way, 64 bytes back, blocking send/recv — what one request/response
 * costs on this machine with a wake-up on each side, the floor under a small put or get (best
 * 100 ms window of BENCH_RAW_TCP_SECONDS). -1 when the measurement failed. */
double bench_measure_round_trips(uint64_t request);

/* The limits at `block` (memcpy over the area, raw loopback tcp, and round trips when block <=
 * BENCH_ROUND_TRIP_MAX_BLOCK); warns when raw tcp failed. */
bench_limits_t bench_measure_limits(const bench_memcpy_area_t *area, uint64_t block);

/* ---- options ------------------------------------------------------------------------------ */

/* Splits the comma list `text` of flag --`flag` into out[0..cap): sizes (mc_parse_size) when
 * is_size, else whole numbers; each value within [min, max]. 0, or an MC_ERR_* code with one line
 * in err; a bad value's message names the allowed range unless max is UINT64_MAX. */
int bench_parse_list(const char *text, int is_size, uint64_t min, uint64_t max, uint64_t *out,
                     size_t cap, size_t *n, const char *flag, char *err, size_t errlen);

/* ---- latency ------------------------------------------------------------------------------ */

/* One thread's latency samples, microseconds. Zeroed = empty. */
typedef struct bench_latencies {
    double *us;
    size_t n, cap;
} bench_latencies_t;

/* Appends a sample; 0, or -1 when out of memory. */
int bench_latencies_add(bench_latencies_t *l, double us);
void bench_latencies_free(bench_latencies_t *l);

typedef struct bench_latency_stats {
    double avg_us, p50_us, p99_us; /* mean; nearest-rank percentiles */
} bench_latency_stats_t;

/* Over every sample of n sets: the first at `first`, the next `stride` bytes further each (the
 * bench_latencies_t of an array of per-thread structs). All 0 with no samples or no memory. */
bench_latency_stats_t bench_latency_stats(const bench_latencies_t *first, size_t stride, size_t n);

/* ---- output -------------------------------------------------------------------------------- */

/* "3GiB", "1MiB", "4KiB" or "1000B": the largest binary unit that divides b. Returns buf. */
const char *bench_size_label(uint64_t b, char *buf, size_t n);

/* A table row's limit cells: " memcpy_GB/s vs_memcpy raw_tcp_GB/s vs_raw_tcp", widths 11, 9, 12
 * and 10, limits with 3 decimals, ratios with ratio_decimals; "-" for a limit not measured. */
void bench_print_limit_cells(const bench_limits_t *l, double gbps, int ratio_decimals);

/* Sets memcpy_gbps, raw_tcp_gbps, vs_memcpy, vs_raw_tcp of a JSON row (null: not measured). */
void bench_limits_row_json(json_t *row, const bench_limits_t *l, double gbps);

/* Sets limits_measured, memcpy_working_set, memcpy_seconds, raw_tcp_seconds of a JSON config. */
void bench_limits_config_json(json_t *config, int measured);

/* A JSON array of the n integers. */
json_t *bench_u64_list_json(const uint64_t *v, size_t n);

/* A report's first keys: {benchmark: program, version, machine, config}; the caller appends the
 * rest. Takes the reference to config; the caller owns the result. */
json_t *bench_report_json(const char *program, json_t *config);

/* Writes the report to path (indented, reals to 6 digits) and releases it. 0, or 1 with a
 * message on stderr. */
int bench_report_write(json_t *report, const char *path, const char *program);

/* ---- child processes ---------------------------------------------------------------------- */

/* The path of this program's executable into out; 0, or -1. */
int bench_self_exe(char *out, size_t cap);

/* Forks and executes path with argv; the child's stdout becomes out_fd and its stderr err_fd,
 * in_child(arg) (when not NULL) runs in it before that, and it gets SIGTERM when this process
 * dies. Returns the pid, or -1 (errno set) when fork failed. */
pid_t bench_spawn(const char *program, const char *path, char *const argv[], int out_fd, int err_fd,
                  void (*in_child)(void *), void *arg);

/* SIGTERM, then wait up to BENCH_CHILD_STOP_TIMEOUT_MS, then SIGKILL; `what` names the child in
 * messages. 0 on a clean exit (or pid <= 0: nothing to stop), else 1. */
int bench_stop_child(const char *program, pid_t pid, const char *what);

/* {date (UTC, ISO 8601), nproc, memory_bytes, hostname, kernel, kernel_version, arch, cpu}.
 * The caller owns the returned reference. */
json_t *bench_machine_json(void);

#endif /* MC_TOOLS_BENCH_LIMITS_H */
