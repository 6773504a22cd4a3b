/*
 * bench_limits.c — the machine's limits (memcpy, raw loopback TCP) and description, shared by the
 * benchmarks in tools/ (see bench_limits.h for what is measured and how).
 */
#include "bench_limits.h"

#include "net.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S UINT64_C(1000000000)
#define MIB (UINT64_C(1) << 20)
#define RAW_TCP_CONNECT_TIMEOUT_MS 5000
/* Both limits report their best window of at least this long: a benchmark box shared with other
 * work loses whole time slices, and a limit is what the machine can do, not what it did while
 * preempted. */
#define WINDOW_NS (100 * UINT64_C(1000000))

void *bench_map_anonymous(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void bench_warm_memory(void *p, size_t len)
{
    memset(p, 0, len);
    memset(p, 0xA5, len);
}

/* ---- memcpy ------------------------------------------------------------------------------ */

int bench_memcpy_area_init(bench_memcpy_area_t *a, uint64_t largest_block)
{
    size_t len =
        largest_block > BENCH_MEMCPY_WORKING_SET ? largest_block : BENCH_MEMCPY_WORKING_SET;
    uint8_t *src = bench_map_anonymous(len), *dst = bench_map_anonymous(len);
    if (!src || !dst) {
        if (src)
            munmap(src, len);
        if (dst)
            munmap(dst, len);
        *a = (bench_memcpy_area_t){0};
        return -1;
    }
    bench_warm_memory(src, len);
    bench_warm_memory(dst, len);
    *a = (bench_memcpy_area_t){.src = src, .dst = dst, .len = len};
    return 0;
}

void bench_memcpy_area_free(bench_memcpy_area_t *a)
{
    if (a->src)
        munmap(a->src, a->len);
    if (a->dst)
        munmap(a->dst, a->len);
    *a = (bench_memcpy_area_t){0};
}

/* Best rate of a measurement: feed it (now, bytes so far); it keeps the best window. */
typedef struct best_window {
    uint64_t start_ns, start_bytes;
    double best_gbps;
} best_window_t;

static void best_window_feed(best_window_t *w, uint64_t now, uint64_t bytes)
{
    if (now - w->start_ns < WINDOW_NS)
        return;
    double gbps = (double)(bytes - w->start_bytes) / (double)(now - w->start_ns);
    w->best_gbps = gbps > w->best_gbps ? gbps : w->best_gbps;
    w->start_ns = now;
    w->start_bytes = bytes;
}

double bench_measure_memcpy(const bench_memcpy_area_t *a, uint64_t block)
{
    if (block == 0 || block > a->len)
        return -1;
    uint64_t ws = (a->len / block) * block;
    /* Read the clock about once per MiB copied, so small blocks do not time the clock. */
    uint64_t chunks_per_check = block >= MIB ? 1 : MIB / block;
    uint64_t off = 0, bytes = 0;
    uint64_t t0 = mc_now_ns();
    uint64_t deadline = t0 + (uint64_t)(BENCH_MEMCPY_SECONDS * NS_PER_S), now;
    best_window_t best = {.start_ns = t0};
    do {
        for (uint64_t i = 0; i < chunks_per_check; i++) {
            memcpy(a->dst + off, a->src + off, block);
            __asm__ volatile("" ::: "memory"); /* keep every copy */
            off += block;
            if (off >= ws)
                off = 0;
        }
        bytes += chunks_per_check * block;
        now = mc_now_ns();
        best_window_feed(&best, now, bytes);
    } while (now < deadline);
    /* A block slower than one window: the whole run is the only window. */
    return best.best_gbps > 0 ? best.best_gbps : (double)bytes / (double)(now - t0);
}

/* ---- raw loopback tcp -------------------------------------------------------------------- */

typedef struct raw_sender {
    int fd;
    uint64_t block;
    uint64_t deadline_ns;
    int failed;
} raw_sender_t;

static void *raw_sender_main(void *arg)
{
    raw_sender_t *s = arg;
    void *buf = bench_map_anonymous(s->block);
    if (!buf) {
        s->failed = 1;
        shutdown(s->fd, SHUT_WR);
        return NULL;
    }
    bench_warm_memory(buf, s->block);
    while (mc_now_ns() < s->deadline_ns) {
        if (mc_net_send_all(s->fd, buf, s->block) != 0) {
            s->failed = 1;
            break;
        }
    }
    shutdown(s->fd, SHUT_WR); /* the receiver sees EOF and stops */
    munmap(buf, s->block);
    return NULL;
}

/* Receives until EOF into buf; returns the best window's rate (whole run when none closed). */
static double raw_receive_all(int fd, void *buf, uint64_t block, uint64_t t0)
{
    uint64_t bytes = 0;
    best_window_t best = {.start_ns = t0};
    for (;;) {
        ssize_t n = recv(fd, buf, block, MSG_WAITALL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        bytes += (uint64_t)n;
        best_window_feed(&best, mc_now_ns(), bytes);
    }
    uint64_t t1 = mc_now_ns();
    if (best.best_gbps > 0)
        return best.best_gbps;
    return t1 > t0 ? (double)bytes / (double)(t1 - t0) : -1;
}

double bench_measure_raw_tcp(uint64_t block)
{
    int port = 0;
    int lfd = mc_net_listen_tcp("127.0.0.1", 0, 1, &port);
    if (lfd < 0)
        return -1;
    int cfd = mc_net_connect_tcp("127.0.0.1", port, RAW_TCP_CONNECT_TIMEOUT_MS);
    if (cfd < 0) {
        close(lfd);
        return -1;
    }
    int sfd = accept(lfd, NULL, NULL);
    close(lfd);
    if (sfd < 0) {
        close(cfd);
        return -1;
    }
    mc_net_tune_socket(sfd);

    double gbps = -1;
    void *buf = bench_map_anonymous(block);
    if (buf) {
        bench_warm_memory(buf, block);
        uint64_t t0 = mc_now_ns();
        raw_sender_t s = {.fd = cfd,
                          .block = block,
                          .deadline_ns = t0 + (uint64_t)(BENCH_RAW_TCP_SECONDS * NS_PER_S)};
        pthread_t tid;
        if (pthread_create(&tid, NULL, raw_sender_main, &s) == 0) {
            double rate = raw_receive_all(sfd, buf, block, t0);
            pthread_join(tid, NULL);
            if (!s.failed)
                gbps = rate;
        }
        munmap(buf, block);
    }
    close(sfd);
    close(cfd);
    return gbps;
}

/* ---- machine description ----------------------------------------------------------------- */

/* The first "model name" of /proc/cpuinfo into out; "" when unknown. */
static void cpu_model(char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        colon += 1 + strspn(colon + 1, " \t");
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, cap, "%s", colon);
        break;
    }
    fclose(f);
}

json_t *bench_machine_json(void)
{
    json_t *m = json_object();
    char date[64], cpu[256];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    json_object_set_new(m, "date", json_string(date));
    json_object_set_new(m, "nproc", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(m, "memory_bytes",
                        json_integer((json_int_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE)));
    struct utsname u;
    if (uname(&u) == 0) {
        json_object_set_new(m, "hostname", json_string(u.nodename));
        json_object_set_new(m, "kernel", json_string(u.release));
        json_object_set_new(m, "kernel_version", json_string(u.version));
        json_object_set_new(m, "arch", json_string(u.machine));
    }
    cpu_model(cpu, sizeof(cpu));
    if (cpu[0])
        json_object_set_new(m, "cpu", json_string(cpu));
    return m;
}
