/*
 * prefault.c — the segment memory pre-fault pass (prefault.h).
 *
 * One pass walks the range front to back in 64 MiB chunks. Before each chunk it reads
 * MemAvailable (or what this process's memory cgroup still allows, when that is less) and stops
 * (with a log line) when the chunk would take it below the floor, so a segment larger than free
 * memory never drives the host, or the container, into the OOM killer. Each chunk is
 * faulted in 2 MiB steps: MADV_POPULATE_WRITE holds the process's mmap lock for reading while
 * it works, and an idle-priority thread preempted inside a long call would hold up every mmap
 * and munmap of the process (priority inversion); a step bounds that to a few milliseconds, and
 * bounds how long a stop waits.
 * Progress goes to the log at every quarter and at the end; mc_prefault_done_bytes() reads it.
 *
 * Threads: the starter owns the handle; the pass thread reads the range and its options and
 * writes only done/stopped-state fields (atomics); stop sets the flag under the lock, signals
 * the rate-limit wait, and joins.
 */
#include "prefault.h"

#include "log.h"
#include "mooncake/store.h"
#include "net.h"
#include "parse.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 uapi; older headers lack it */
#endif

#define MC_PREFAULT_CHUNK (64ull << 20)      /* bytes between floor checks */
#define MC_PREFAULT_STEP (2ull << 20)        /* bytes per madvise call */
#define MC_PREFAULT_MIN_FLOOR (256ull << 20) /* default floor, at least */
#define MC_PREFAULT_FLOOR_PERCENT 10         /* default floor: share of MemTotal */

struct mc_prefault {
    char *addr;
    size_t length;
    mc_prefault_opts_t opts;
    pthread_t thread;
    int threaded;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled by stop: ends a rate-limit wait */
    atomic_int stop;
    atomic_uint_fast64_t done;
};

/* A MemInfo field in bytes, or -1 when unreadable. */
static int64_t meminfo_bytes(const char *field)
{
    int64_t kib = mc_meminfo(field);
    return kib < 0 ? -1 : kib * 1024;
}

/* A whole number from a one-line file (cgroup controls); -1 when absent or "max". */
static int64_t file_number(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    unsigned long long v = 0;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    return ok && v < (1ull << 62) ? (int64_t)v : -1;
}

/* Bytes this process's memory cgroup still allows (limit - usage), or -1 when it has no limit:
 * a container's limit binds before the host's MemAvailable does. cgroup v2 (memory.max,
 * memory.current) or v1 (memory.limit_in_bytes, memory.usage_in_bytes). */
static int64_t cgroup_available(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return -1;
    char line[512], v2[512] = "", v1[512] = "";
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "0::", 3))
            snprintf(v2, sizeof(v2), "%s", line + 3);
        const char *m = strstr(line, ":memory:");
        if (m)
            snprintf(v1, sizeof(v1), "%s", m + 8);
    }
    fclose(f);
    char a[600], b[600];
    int64_t limit = -1, usage = -1;
    if (v1[0]) {
        snprintf(a, sizeof(a), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1);
        snprintf(b, sizeof(b), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", v1);
        limit = file_number(a);
        usage = file_number(b);
    }
    if ((limit < 0 || usage < 0) && v2[0]) {
        snprintf(a, sizeof(a), "/sys/fs/cgroup%s/memory.max", v2);
        snprintf(b, sizeof(b), "/sys/fs/cgroup%s/memory.current", v2);
        limit = file_number(a);
        usage = file_number(b);
    }
    if (limit < 0 || usage < 0)
        return -1;
    return limit > usage ? limit - usage : 0;
}

/* Memory the pass may still take: the host's MemAvailable, or less under a cgroup limit. */
static int64_t available_bytes(void)
{
    int64_t host = meminfo_bytes("MemAvailable");
    int64_t cg = cgroup_available();
    if (cg >= 0 && (host < 0 || cg < host))
        return cg;
    return host;
}

static int env_size(const char *name, uint64_t *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char err[128];
    if (mc_parse_size(v, out, err, sizeof(err)) != 0) {
        MC_ERROR("%s=\"%s\": %s", name, v, err);
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

int mc_prefault_opts_from_env(mc_prefault_opts_t *opts)
{
    *opts = (mc_prefault_opts_t){.mode = MC_PREFAULT_BACKGROUND, .method = MC_PREFAULT_TOUCH};
    const char *mode = getenv("MC_SEGMENT_PREFAULT");
    if (mode && *mode) {
        if (!strcmp(mode, "background") || !strcmp(mode, "1") || !strcmp(mode, "on"))
            opts->mode = MC_PREFAULT_BACKGROUND;
        else if (!strcmp(mode, "sync"))
            opts->mode = MC_PREFAULT_SYNC;
        else if (!strcmp(mode, "off") || !strcmp(mode, "0"))
            opts->mode = MC_PREFAULT_OFF;
        else {
            MC_ERROR("MC_SEGMENT_PREFAULT=\"%s\": expected background, sync or off", mode);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    const char *method = getenv("MC_SEGMENT_PREFAULT_METHOD");
    if (method && *method) {
        if (!strcmp(method, "populate"))
            opts->method = MC_PREFAULT_POPULATE;
        else if (!strcmp(method, "touch"))
            opts->method = MC_PREFAULT_TOUCH;
        else {
            MC_ERROR("MC_SEGMENT_PREFAULT_METHOD=\"%s\": expected populate or touch", method);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    int64_t total = meminfo_bytes("MemTotal");
    uint64_t floor = total > 0 ? (uint64_t)total / 100 * MC_PREFAULT_FLOOR_PERCENT : 0;
    opts->floor_bytes = floor > MC_PREFAULT_MIN_FLOOR ? floor : MC_PREFAULT_MIN_FLOOR;
    int rc = env_size("MC_SEGMENT_PREFAULT_FLOOR", &opts->floor_bytes);
    if (rc == 0)
        rc = env_size("MC_SEGMENT_PREFAULT_RATE", &opts->rate_bytes);
    return rc;
}

/* One page per iteration: an atomic add of 0 writes the byte it read in one locked step, so a
 * concurrent put's byte (this process, or a peer through its own mapping) is never lost. */
static void touch_range(char *p, size_t n, size_t page)
{
    for (size_t off = 0; off < n; off += page)
        __atomic_fetch_add(p + off, 0, __ATOMIC_RELAXED);
}

/* MADV_POPULATE_WRITE over [p, p+n): 0; 1 when the kernel lacks it (*have cleared, logged
 * once); -1 when the pass must stop (logged: e.g. no memory left for the pages). */
static int populate(char *p, size_t n, int *have)
{
    if (!*have)
        return 1;
    for (;;) {
        if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
            return 0;
        if (errno == EINTR || errno == EAGAIN)
            continue;
        if (errno == EINVAL) {
            MC_INFO("segment pre-fault: the kernel has no MADV_POPULATE_WRITE; touching a byte "
                    "per page only");
            *have = 0;
            return 1;
        }
        MC_WARN("segment pre-fault stopped: madvise(MADV_POPULATE_WRITE): %s; the rest faults "
                "on first use",
                strerror(errno));
        return -1;
    }
}

/* Faults [p, p+n) in; 0, or -1 when the pass must stop (logged). Touch populates first where
 * it can (the kernel allocates the pages faster than user-space faults do: 0.7 against 1.3 CPU
 * seconds per 256 MiB here), then touches every page so its user-space mapping is warm too. */
static int fault_step(char *p, size_t n, mc_prefault_method_t method, int *have_populate,
                      size_t page)
{
    int rc = populate(p, n, have_populate);
    if (rc < 0)
        return -1;
    if (method == MC_PREFAULT_TOUCH || rc == 1)
        touch_range(p, n, page);
    return 0;
}

/* Waits until the rate allows `done` bytes since t0; 1 when stopped meanwhile. */
static int rate_wait(mc_prefault_t *p, uint64_t t0_ns, uint64_t done)
{
    if (p->opts.rate_bytes == 0)
        return atomic_load(&p->stop);
    uint64_t due_ns = t0_ns + (uint64_t)((double)done * 1e9 / (double)p->opts.rate_bytes);
    pthread_mutex_lock(&p->lock);
    while (!atomic_load(&p->stop) && mc_now_ns() < due_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t wait_ns = due_ns - mc_now_ns();
        if (wait_ns > 100000000ull)
            wait_ns = 100000000ull; /* re-read the monotonic clock at least every 100 ms */
        uint64_t ns = (uint64_t)ts.tv_nsec + wait_ns;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    pthread_mutex_unlock(&p->lock);
    return atomic_load(&p->stop);
}

static void log_progress(const mc_prefault_t *p, uint64_t done, uint64_t t0_ns, const char *what)
{
    char a[32], b[32];
    double s = (double)(mc_now_ns() - t0_ns) / 1e9;
    MC_INFO("segment pre-fault %s: %s of %s (%.0f%%) in %.2f s, %.2f GB/s", what,
            mc_format_size(done, a, sizeof(a)), mc_format_size(p->length, b, sizeof(b)),
            100.0 * (double)done / (double)p->length, s, s > 0 ? (double)done / s / 1e9 : 0.0);
}

/* The pass; runs in the pass thread (background) or the starter's (sync). */
static void run_pass(mc_prefault_t *p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int have_populate = 1;
    uint64_t t0 = mc_now_ns();
    uint64_t quarter = p->length / 4 ? p->length / 4 : 1;
    uint64_t next_log = quarter;
    size_t off = 0;
    const char *end = "done";
    while (off < p->length) {
        size_t chunk = p->length - off < MC_PREFAULT_CHUNK ? p->length - off : MC_PREFAULT_CHUNK;
        int64_t avail = available_bytes();
        if (p->opts.floor_bytes && avail >= 0 &&
            ((uint64_t)avail < chunk || (uint64_t)avail - chunk < p->opts.floor_bytes)) {
            char a[32], f[32];
            MC_WARN("segment pre-fault stopped at the free-memory floor: MemAvailable %s, floor "
                    "%s (MC_SEGMENT_PREFAULT_FLOOR); the rest faults on first use",
                    mc_format_size((uint64_t)avail, a, sizeof(a)),
                    mc_format_size(p->opts.floor_bytes, f, sizeof(f)));
            end = "stopped at the floor";
            break;
        }
        size_t chunk_end = off + chunk;
        int failed = 0;
        while (off < chunk_end && !atomic_load(&p->stop)) {
            size_t n = chunk_end - off < MC_PREFAULT_STEP ? chunk_end - off : MC_PREFAULT_STEP;
            if (fault_step(p->addr + off, n, p->opts.method, &have_populate, page) != 0) {
                failed = 1;
                break;
            }
            off += n;
            atomic_store(&p->done, off);
            if (rate_wait(p, t0, off))
                break;
        }
        if (failed) {
            end = "stopped by an error";
            break;
        }
        if (atomic_load(&p->stop)) {
            end = "stopped at close";
            break;
        }
        if (off >= next_log && off < p->length) {
            log_progress(p, off, t0, "progress");
            while (next_log <= off)
                next_log += quarter;
        }
    }
    log_progress(p, off, t0, end);
}

static void *pass_main(void *arg)
{
    mc_prefault_t *p = arg;
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0 &&
        setpriority(PRIO_PROCESS, (id_t)gettid(), 19) != 0)
        MC_WARN("segment pre-fault runs at normal priority: %s", strerror(errno));
    run_pass(p);
    return NULL;
}

int mc_prefault_start(void *addr, size_t length, const mc_prefault_opts_t *opts,
                      mc_prefault_t **out)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!out || !opts || !addr || ((uintptr_t)addr % page) != 0)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (opts->mode == MC_PREFAULT_OFF || length == 0)
        return 0;
    mc_prefault_t *p = calloc(1, sizeof(*p));
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    p->addr = addr;
    p->length = length;
    p->opts = *opts;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    char a[32], f[32];
    MC_INFO("segment pre-fault: %s %s, %s, floor MemAvailable %s%s",
            opts->mode == MC_PREFAULT_SYNC ? "synchronously at mount" : "in the background",
            mc_format_size(length, a, sizeof(a)),
            opts->method == MC_PREFAULT_TOUCH ? "MADV_POPULATE_WRITE and a touch per page"
                                              : "MADV_POPULATE_WRITE",
            mc_format_size(opts->floor_bytes, f, sizeof(f)),
            opts->rate_bytes ? ", rate-limited" : "");
    if (opts->mode == MC_PREFAULT_SYNC) {
        run_pass(p);
    } else if (pthread_create(&p->thread, NULL, pass_main, p) != 0) {
        MC_ERROR("cannot start the segment pre-fault thread");
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return MC_ERR_INTERNAL_ERROR;
    } else {
        p->threaded = 1;
    }
    *out = p;
    return 0;
}

uint64_t mc_prefault_done_bytes(const mc_prefault_t *p)
{
    return p ? atomic_load(&((mc_prefault_t *)p)->done) : 0;
}

void mc_prefault_stop(mc_prefault_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (p->threaded)
        pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
