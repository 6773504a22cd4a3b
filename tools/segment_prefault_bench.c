/*
 * segment_prefault_bench — what pre-faulting segment memory (src/client/prefault.h) buys and
 * costs: puts into a store client's own fresh segment, in this process, with the pass off,
 * in the background and synchronous, next to the limits measured in the same run.
 *
 *   segment_prefault_bench --master_server_address=127.0.0.1:50051 [--segment_size=1GiB]
 *       [--value_size=16MiB] [--rounds=3] [--json=FILE]
 *
 * Needs a running mooncake_master with no other segment (every put must land in this
 * process's segment). Every round runs, in this order (A/B interleaved across rounds):
 *   memcpy        single-thread memcpy at value_size over warm memory (bench_limits.c)
 *   anon_first    memcpy of value_size blocks into a fresh anonymous private mapping (the
 *                 memory upstream's segments are: its put speed into fresh memory, as a proxy,
 *                 since no upstream build is here)
 *   memfd_first   the same into a fresh memfd mapped MAP_SHARED | MAP_NORESERVE (ours, raw)
 *   put_off       store puts into the fresh segment, MC_SEGMENT_PREFAULT=off
 *   put_bg        MC_SEGMENT_PREFAULT=background: puts once the pass is over (its duration is
 *                 reported as prefault_s), after one put timed right after setup
 *   put_sync      MC_SEGMENT_PREFAULT=sync: the pass runs inside setup
 * Each put row fills 85% of the segment with fresh keys (value_size each, checksums as the
 * store's default: on) and reports GB/s (wall clock, and per CPU second of the putting thread:
 * the copy and the page faults run in it, and on a machine shared with other work the CPU
 * share a row gets varies, so cpuGB/s compares rows more steadily), setup time, the first put's
 * latency, the time from the start of setup to the end of the first put, VmRSS and RssShmem after
 * the fill. Exit status: 0, or 1 on a failed setup/put.
 */
#include "mooncake/store.h"

#include "bench_limits.h"
#include "flags.h"
#include "log.h"
#include "net.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "segment_prefault_bench"
#define FILL_SHARE 0.85
#define PASS_WAIT_MS (300 * 1000) /* a background pass slower than this is reported as such */

typedef struct {
    const char *master;
    uint64_t segment;
    uint64_t value;
    int64_t rounds;
    const char *json;
} opts_t;

static double seconds_since(uint64_t t0_ns)
{
    return (double)(mc_now_ns() - t0_ns) / 1e9;
}

/* CPU seconds this thread has run: on a machine shared with other work, bytes per CPU second
 * of the copying thread compare rows whatever share of the CPUs each row got. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* memcpy at value size over the warm area, per CPU second, for about half a CPU second. */
static double memcpy_cpu_gbps(const bench_memcpy_area_t *a, uint64_t value)
{
    size_t blocks = a->len / value, i = 0;
    uint64_t bytes = 0;
    double c0 = thread_cpu_s(), c;
    while ((c = thread_cpu_s() - c0) < 0.5) {
        memcpy(a->dst + (i % blocks) * value, a->src + ((i + 1) % blocks) * value, value);
        bytes += value;
        i++;
    }
    return (double)bytes / c / 1e9;
}

/* A /proc/self/status field in bytes (kB there); 0 when absent. */
static uint64_t self_status(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    size_t n = strlen(field);
    unsigned long long kib = 0;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n) && line[n] == ':' && sscanf(line + n + 1, "%llu", &kib) == 1)
            break;
    fclose(f);
    return (uint64_t)kib * 1024;
}

/* GB/s of value-sized memcpys into fresh memory of `len` bytes (anonymous, or a memfd). */
static double first_touch(const opts_t *o, const uint8_t *src, int memfd, double *cpu_gbps)
{
    size_t len = (size_t)o->segment;
    void *p;
    int fd = -1;
    if (memfd) {
        fd = memfd_create("prefault_bench", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
            return -1;
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    } else {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                 0);
    }
    if (p == MAP_FAILED) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t n = (size_t)((double)len * FILL_SHARE / (double)o->value);
    uint64_t t0 = mc_now_ns();
    double c0 = thread_cpu_s();
    for (size_t i = 0; i < n; i++)
        memcpy((uint8_t *)p + i * o->value, src, o->value);
    double s = seconds_since(t0);
    *cpu_gbps = (double)n * (double)o->value / (thread_cpu_s() - c0) / 1e9;
    munmap(p, len);
    if (fd >= 0)
        close(fd);
    return (double)n * (double)o->value / s / 1e9;
}

typedef struct {
    double setup_s, first_put_s, to_first_put_s, prefault_s, gbps, cpu_gbps, close_s;
    uint64_t rss, rss_shmem;
} put_row_t;

/* Waits until the pass has mapped the whole segment or stopped growing it for 2 s. */
static double wait_pass(const opts_t *o)
{
    uint64_t t0 = mc_now_ns(), last = 0, last_change = mc_now_ms();
    for (;;) {
        uint64_t now = self_status("RssShmem");
        if (now >= o->segment)
            break;
        if (now != last) {
            last = now;
            last_change = mc_now_ms();
        } else if (mc_now_ms() - last_change > 2000 || mc_now_ms() - t0 / 1000000 > PASS_WAIT_MS) {
            MC_WARN("the pre-fault pass stopped at %" PRIu64 " of %" PRIu64 " bytes", now,
                    o->segment);
            break;
        }
        usleep(2000);
    }
    return seconds_since(t0);
}

static int put_run(const opts_t *o, const char *mode, const uint8_t *src, int round, put_row_t *r)
{
    setenv("MC_SEGMENT_PREFAULT", mode, 1);
    mc_store_config_t c = {.local_hostname = "127.0.0.1",
                           .metadata_server = "P2PHANDSHAKE",
                           .global_segment_size = o->segment,
                           .local_buffer_size = 2 * o->value,
                           .protocol = "tcp",
                           .master_server_addr = o->master};
    mc_store_t *s = NULL;
    uint64_t t0 = mc_now_ns();
    int rc = mc_store_setup(&c, &s);
    r->setup_s = seconds_since(t0);
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": setup (%s): %s\n", mode, mc_error_name(rc));
        return -1;
    }
    mc_replicate_config_t rcfg = MC_REPLICATE_CONFIG_INIT;
    char key[128];
    size_t n = (size_t)((double)o->segment * FILL_SHARE / (double)o->value);
    uint64_t t1 = mc_now_ns();
    snprintf(key, sizeof(key), "pfb/%d/%d/%s/first", (int)getpid(), round, mode);
    rc = mc_store_put(s, key, src, o->value, &rcfg);
    r->first_put_s = seconds_since(t1);
    r->to_first_put_s = seconds_since(t0);
    r->prefault_s = strcmp(mode, "background") ? 0 : wait_pass(o);
    uint64_t t2 = mc_now_ns();
    double c2 = thread_cpu_s();
    for (size_t i = 1; i < n && rc == 0; i++) {
        snprintf(key, sizeof(key), "pfb/%d/%d/%s/%zu", (int)getpid(), round, mode, i);
        rc = mc_store_put(s, key, src + (i % 8) * o->value, o->value, &rcfg);
    }
    r->gbps = (double)(n - 1) * (double)o->value / seconds_since(t2) / 1e9;
    r->cpu_gbps = (double)(n - 1) * (double)o->value / (thread_cpu_s() - c2) / 1e9;
    r->rss = self_status("VmRSS");
    r->rss_shmem = self_status("RssShmem");
    if (rc != 0)
        fprintf(stderr, PROGRAM ": put (%s): %s\n", mode, mc_error_name(rc));
    uint64_t t3 = mc_now_ns();
    mc_store_free(s); /* unmounts: the master drops the segment's objects */
    r->close_s = seconds_since(t3);
    return rc == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    opts_t o = {.master = "127.0.0.1:50051",
                .segment = 1ull << 30,
                .value = 16ull << 20,
                .rounds = 3,
                .json = ""};
    mc_flag_t flags[] = {
        {"master_server_address", MC_FLAG_STRING, &o.master,
         "mooncake_master host:port (no other segment mounted)"},
        {"segment_size", MC_FLAG_SIZE, &o.segment, "this process's segment, bytes"},
        {"value_size", MC_FLAG_SIZE, &o.value, "bytes per put"},
        {"rounds", MC_FLAG_INT, &o.rounds, "rounds of every row, interleaved", 1, 100},
        {"json", MC_FLAG_STRING, &o.json, "write the rows to this JSON file"},
    };
    char err[1024];
    int rc = mc_flags_parse(flags, sizeof(flags) / sizeof(flags[0]), NULL, argc, argv, PROGRAM,
                            "Usage: " PROGRAM " [flags]", err, sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 0;
    if (rc != 0 || o.value == 0 || o.segment < 2 * o.value) {
        fprintf(stderr, PROGRAM ": %s\n", rc ? err : "--segment_size must hold 2 values");
        return 1;
    }
    bench_memcpy_area_t area = {0};
    if (bench_memcpy_area_init(&area, 8 * o.value) != 0) {
        fprintf(stderr, PROGRAM ": cannot allocate the memcpy working set\n");
        return 1;
    }
    const uint8_t *src = area.src;
    json_t *rows = json_array();
    printf("%-5s %-12s %7s %6s %7s %6s %8s %9s %10s %10s %8s %8s %8s\n", "round", "row", "GB/s",
           "vs_mc", "cpuGB/s", "vs_mc", "setup_s", "1stput_s", "to_1stput", "prefault_s", "close_s",
           "RSS_MiB", "shm_MiB");
    int status = 0;
    for (int round = 1; round <= (int)o.rounds; round++) {
        double mc = bench_measure_memcpy(&area, o.value), mc_cpu = memcpy_cpu_gbps(&area, o.value);
        double ft[2], ft_cpu[2];
        ft[0] = first_touch(&o, src, 0, &ft_cpu[0]);
        ft[1] = first_touch(&o, src, 1, &ft_cpu[1]);
        static const char *const ft_names[] = {"anon_first", "memfd_first"};
        printf("%-5d %-12s %7.2f %6.2f %7.2f %6.2f\n", round, "memcpy", mc, 1.0, mc_cpu, 1.0);
        json_array_append_new(rows, json_pack("{si,ss,sf,sf}", "round", round, "row", "memcpy",
                                              "gbps", mc, "cpu_gbps", mc_cpu));
        for (int k = 0; k < 2; k++) {
            printf("%-5d %-12s %7.2f %6.2f %7.2f %6.2f\n", round, ft_names[k], ft[k], ft[k] / mc,
                   ft_cpu[k], ft_cpu[k] / mc_cpu);
            json_array_append_new(rows, json_pack("{si,ss,sf,sf,sf,sf}", "round", round, "row",
                                                  ft_names[k], "gbps", ft[k], "vs_memcpy",
                                                  ft[k] / mc, "cpu_gbps", ft_cpu[k],
                                                  "cpu_vs_memcpy", ft_cpu[k] / mc_cpu));
        }
        static const char *const modes[] = {"off", "background", "sync"};
        for (size_t m = 0; m < 3; m++) {
            put_row_t r = {0};
            if (put_run(&o, modes[m], src, round, &r) != 0)
                status = 1;
            char name[32];
            snprintf(name, sizeof(name), "put_%s", modes[m]);
            printf("%-5d %-12s %7.2f %6.2f %7.2f %6.2f %8.3f %9.4f %10.3f %10.3f %8.3f %8.1f "
                   "%8.1f\n",
                   round, name, r.gbps, r.gbps / mc, r.cpu_gbps, r.cpu_gbps / mc_cpu, r.setup_s,
                   r.first_put_s, r.to_first_put_s, r.prefault_s, r.close_s,
                   (double)r.rss / 1048576.0, (double)r.rss_shmem / 1048576.0);
            json_t *row =
                json_pack("{si,ss,sf,sf,sf,sf,sf,sf,sf}", "round", round, "row", name, "gbps",
                          r.gbps, "vs_memcpy", r.gbps / mc, "vs_anon_first", r.gbps / ft[0],
                          "cpu_gbps", r.cpu_gbps, "cpu_vs_memcpy", r.cpu_gbps / mc_cpu,
                          "cpu_vs_anon_first", r.cpu_gbps / ft_cpu[0], "setup_s", r.setup_s);
            json_object_set_new(row, "first_put_s", json_real(r.first_put_s));
            json_object_set_new(row, "to_first_put_s", json_real(r.to_first_put_s));
            json_object_set_new(row, "prefault_s", json_real(r.prefault_s));
            json_object_set_new(row, "close_s", json_real(r.close_s));
            json_object_set_new(row, "rss_bytes", json_integer((json_int_t)r.rss));
            json_object_set_new(row, "rss_shmem_bytes", json_integer((json_int_t)r.rss_shmem));
            json_array_append_new(rows, row);
        }
        fflush(stdout);
    }
    if (*o.json) {
        json_t *root =
            json_pack("{ss,sI,sI,so}", "benchmark", PROGRAM, "segment_size", (json_int_t)o.segment,
                      "value_size", (json_int_t)o.value, "rows", rows);
        if (json_dump_file(root, o.json, JSON_INDENT(2)) != 0) {
            fprintf(stderr, PROGRAM ": cannot write %s\n", o.json);
            status = 1;
        }
        json_decref(root);
    } else {
        json_decref(rows);
    }
    bench_memcpy_area_free(&area);
    return status;
}
