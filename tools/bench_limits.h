/*
 * bench_limits.h — what the benchmarks in tools/ measure about the machine itself, in the same
 * run as the thing they benchmark, so every number comes with "out of how much":
 *
 *   memcpy   single-thread memcpy in block-sized chunks over a BENCH_MEMCPY_WORKING_SET working
 *            set (warm: every page touched first), for BENCH_MEMCPY_SECONDS;
 *   raw tcp  one plain TCP stream over 127.0.0.1 between two threads, block-sized send()s and
 *            MSG_WAITALL recv()s, with the Transfer Engine's socket options (mc_net_tune_socket),
 *            for BENCH_RAW_TCP_SECONDS;
 *
 * each reported as its best window of at least 100 ms, so that time slices lost to other work
 * on a shared machine do not lower the limit (the whole run when a block takes longer);
 *
 * plus the machine's description for a JSON report, and the anonymous-memory helpers both
 * measurements (and the benchmarks' own buffers) use. Used by transfer_engine_bench and
 * mooncake_store_bench.
 *
 * Rates are GB/s with GB = 1e9 bytes. Functions are called from the benchmark's main thread;
 * bench_measure_raw_tcp() starts and joins one thread of its own.
 */
#ifndef MC_TOOLS_BENCH_LIMITS_H
#define MC_TOOLS_BENCH_LIMITS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_MEMCPY_WORKING_SET (UINT64_C(256) << 20) /* bytes, per buffer (source and dest) */
#define BENCH_MEMCPY_SECONDS 1.0
#define BENCH_RAW_TCP_SECONDS 2.0

/* The two limits at one block size; a value <= 0 means "not measured" or "failed". */
typedef struct bench_limits {
    double memcpy_gbps;
    double raw_tcp_gbps;
} bench_limits_t;

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

/* {date (UTC, ISO 8601), nproc, memory_bytes, hostname, kernel, kernel_version, arch, cpu}.
 * The caller owns the returned reference. */
json_t *bench_machine_json(void);

#endif /* MC_TOOLS_BENCH_LIMITS_H */
