/*
 * prefault.h — committing a store client's fresh segment memory before puts need it.
 *
 * Segment memory (mc_te_alloc_segment_memory) is a memfd mapped MAP_SHARED | MAP_NORESERVE: no
 * page exists until first touched, and a put into a fresh page pays the kernel's page fault
 * (on these VMs 0.3-0.9 GB/s, a tenth of memcpy). A pre-fault pass allocates every page ahead
 * of the puts, in the background at idle priority by default, so the process serves at once
 * and puts after start-up copy at memcpy speed. Not in upstream (its segments are anonymous
 * memory faulted by the puts themselves); the knobs are ours:
 *
 *   MC_SEGMENT_PREFAULT        background (default) | sync (before the segment is mounted) |
 *                              off (upstream's behaviour: pages fault on first put)
 *   MC_SEGMENT_PREFAULT_FLOOR  stop when /proc/meminfo's MemAvailable would drop below this
 *                              (a size, "2 GiB"); default 10% of MemTotal, at least 256 MiB.
 *                              Pages are never released: the pass only stops, with a log line.
 *   MC_SEGMENT_PREFAULT_RATE   bytes per second at most (a size, "512 MiB"); default unlimited
 *   MC_SEGMENT_PREFAULT_METHOD touch (default: MADV_POPULATE_WRITE where the kernel has it,
 *                              Linux 5.14+, then an atomic add of 0 to one byte per page from
 *                              user space, which never changes a byte a concurrent put wrote) |
 *                              populate (MADV_POPULATE_WRITE only; touch where the kernel
 *                              lacks it)
 *
 * Why touch by default: populate allocates the pages inside the kernel (faster than user-space
 * faults), but on a shadow-paging hypervisor (PVM: perf shows
 * pvm_* under every fault) the user-space mapping of each page still faults on the first put,
 * so puts after a populate pass ran at 0.03-0.04 of memcpy per CPU second, after a touch pass
 * at 0.59-0.64 (tools/segment_prefault_bench, 2026-12-01). On hosts with hardware nested
 * paging (EPT/NPT) populate is enough and cheaper.
 *
 * Either method is safe while puts (local, or peers' over shm/tcp/rdma) write the same pages:
 * populating a shared mapping allocates missing pages and leaves present ones alone.
 */
#ifndef MC_CLIENT_PREFAULT_H
#define MC_CLIENT_PREFAULT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    MC_PREFAULT_OFF = 0,
    MC_PREFAULT_BACKGROUND = 1,
    MC_PREFAULT_SYNC = 2
} mc_prefault_mode_t;

typedef enum { MC_PREFAULT_POPULATE = 0, MC_PREFAULT_TOUCH = 1 } mc_prefault_method_t;

typedef struct mc_prefault_opts {
    mc_prefault_mode_t mode;
    mc_prefault_method_t method;
    uint64_t floor_bytes; /* MemAvailable kept at least this; 0 = no floor */
    uint64_t rate_bytes;  /* bytes per second at most; 0 = unlimited */
} mc_prefault_opts_t;

typedef struct mc_prefault mc_prefault_t; /* a pass over one range; owned by its starter */

/* Fills *opts from the environment above. MC_ERR_INVALID_PARAMS (-600) with an error log naming
 * the variable when one is set to something unreadable. Thread-safe (reads only). */
int mc_prefault_opts_from_env(mc_prefault_opts_t *opts);

/*
 * Pre-faults [addr, addr + length) (page-aligned, mapped read-write, staying mapped until
 * mc_prefault_stop() returns). MC_PREFAULT_OFF: *out = NULL, nothing done. MC_PREFAULT_SYNC:
 * the pass runs in the calling thread and has ended when this returns. MC_PREFAULT_BACKGROUND:
 * a thread at SCHED_IDLE (nice 19 where refused) runs it in 64 MiB chunks. A pass that stops
 * early (floor, error) is not an error: the rest faults on first use, as without pre-faulting.
 * Returns 0, MC_ERR_INVALID_PARAMS for a NULL/unaligned range, MC_ERR_INTERNAL_ERROR when the
 * thread cannot be started.
 */
int mc_prefault_start(void *addr, size_t length, const mc_prefault_opts_t *opts,
                      mc_prefault_t **out);

/* Bytes pre-faulted so far (pages the pass allocated or found present). Any thread. */
uint64_t mc_prefault_done_bytes(const mc_prefault_t *p);

/* Stops the pass within one 2 MiB step, joins its thread and frees p. NULL is a no-op. Call
 * before unmapping the range; not concurrently with itself. */
void mc_prefault_stop(mc_prefault_t *p);

#endif
