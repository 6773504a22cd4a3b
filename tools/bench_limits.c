/*
 * bench_limits.c — what the benchmarks in tools/ share: the machine's limits (memcpy, raw loopback
 * TCP) and description, and their common option, table, JSON and child-process helpers (see
 * bench_limits.h).
 */
#include "bench_limits.h"

#include "mooncake/errors.h"

#include "log.h"
#include "net.h"
#include "parse.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S UINT64_C(1000000000)
#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
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

/* ---- loopback round trips ---------------------------------------------------------------- */

#define RTT_REPLY_BYTES 64

typedef struct rtt_echo {
    int fd;
    uint64_t request;
} rtt_echo_t;

/* Answers each request of s->request bytes with RTT_REPLY_BYTES until EOF. */
static void *rtt_echo_main(void *arg)
{
    rtt_echo_t *e = arg;
    uint8_t *buf = malloc(e->request ? e->request : 1);
    uint8_t reply[RTT_REPLY_BYTES] = {0};
    while (buf && mc_net_recv_all(e->fd, buf, e->request) == 0)
        if (mc_net_send_all(e->fd, reply, sizeof(reply)) != 0)
            break;
    free(buf);
    return NULL;
}

double bench_measure_round_trips(uint64_t request)
{
    if (request == 0 || request > (UINT64_C(1) << 20))
        return -1;
    int port = 0;
    int lfd = mc_net_listen_tcp("127.0.0.1", 0, 1, &port);
    if (lfd < 0)
        return -1;
    int cfd = mc_net_connect_tcp("127.0.0.1", port, RAW_TCP_CONNECT_TIMEOUT_MS);
    int sfd = cfd >= 0 ? accept(lfd, NULL, NULL) : -1;
    close(lfd);
    if (sfd < 0) {
        if (cfd >= 0)
            close(cfd);
        return -1;
    }
    mc_net_tune_socket(sfd);
    mc_net_tune_socket(cfd);
    double rate = -1;
    uint8_t *req = calloc(1, request);
    rtt_echo_t e = {.fd = sfd, .request = request};
    pthread_t tid;
    if (req && pthread_create(&tid, NULL, rtt_echo_main, &e) == 0) {
        uint8_t reply[RTT_REPLY_BYTES];
        uint64_t t0 = mc_now_ns(), now = t0, trips = 0;
        uint64_t deadline = t0 + (uint64_t)(BENCH_RAW_TCP_SECONDS * NS_PER_S);
        best_window_t best = {.start_ns = t0};
        int failed = 0;
        while (now < deadline) {
            if (mc_net_send_all(cfd, req, request) != 0 ||
                mc_net_recv_all(cfd, reply, sizeof(reply)) != 0) {
                failed = 1;
                break;
            }
            trips++;
            now = mc_now_ns();
            best_window_feed(&best, now, trips); /* "bytes" here count round trips */
        }
        shutdown(cfd, SHUT_WR);
        pthread_join(tid, NULL);
        if (!failed)
            rate = (best.best_gbps > 0 ? best.best_gbps : (double)trips / (double)(now - t0)) *
                   (double)NS_PER_S;
    }
    free(req);
    close(sfd);
    close(cfd);
    return rate;
}

bench_limits_t bench_measure_limits(const bench_memcpy_area_t *area, uint64_t block)
{
    bench_limits_t l;
    l.memcpy_gbps = bench_measure_memcpy(area, block);
    l.raw_tcp_gbps = bench_measure_raw_tcp(block);
    if (l.raw_tcp_gbps < 0)
        MC_WARN("raw loopback tcp measurement failed: %s", strerror(errno));
    l.round_trips = block <= BENCH_ROUND_TRIP_MAX_BLOCK ? bench_measure_round_trips(block) : -1;
    return l;
}

/* ---- options ------------------------------------------------------------------------------ */

int bench_parse_list(const char *text, int is_size, uint64_t min, uint64_t max, uint64_t *out,
                     size_t cap, size_t *n, const char *flag, char *err, size_t errlen)
{
    char *copy = strdup(text);
    if (!copy)
        return MC_ERR_INTERNAL_ERROR;
    char *save = NULL;
    int rc = 0;
    *n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        int64_t v = 0;
        uint64_t u = 0;
        int prc = is_size ? mc_parse_size(tok, &u, NULL, 0)
                          : mc_parse_int64(tok, 0, INT64_MAX, &v, NULL, 0);
        if (!is_size)
            u = (uint64_t)v;
        if (*n == cap) {
            snprintf(err, errlen, "--%s: more than %zu values", flag, cap);
            rc = MC_ERR_INVALID_PARAMS;
        } else if (prc != 0 || u < min || u > max) {
            if (max == UINT64_MAX)
                snprintf(err, errlen, "--%s: bad value \"%s\"", flag, tok);
            else
                snprintf(err, errlen, "--%s: bad value \"%s\" (allowed %" PRIu64 "..%" PRIu64 ")",
                         flag, tok, min, max);
            rc = MC_ERR_INVALID_PARAMS;
        } else {
            out[(*n)++] = u;
        }
    }
    free(copy);
    if (rc == 0 && *n == 0) {
        snprintf(err, errlen, "--%s: empty list", flag);
        rc = MC_ERR_INVALID_PARAMS;
    }
    return rc;
}

/* ---- latency ------------------------------------------------------------------------------ */

int bench_latencies_add(bench_latencies_t *l, double us)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        double *p = realloc(l->us, cap * sizeof(*p));
        if (!p)
            return -1;
        l->us = p;
        l->cap = cap;
    }
    l->us[l->n++] = us;
    return 0;
}

void bench_latencies_free(bench_latencies_t *l)
{
    free(l->us);
    *l = (bench_latencies_t){0};
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n-1]. */
static double percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    rank = rank < 1 ? 1 : rank > n ? n : rank;
    return v[rank - 1];
}

static const bench_latencies_t *latencies_at(const bench_latencies_t *first, size_t stride,
                                             size_t i)
{
    return (const bench_latencies_t *)(const void *)((const char *)first + i * stride);
}

bench_latency_stats_t bench_latency_stats(const bench_latencies_t *first, size_t stride, size_t n)
{
    bench_latency_stats_t s = {0};
    size_t nlat = 0;
    for (size_t i = 0; i < n; i++)
        nlat += latencies_at(first, stride, i)->n;
    double *all = malloc((nlat ? nlat : 1) * sizeof(*all));
    if (!all)
        return s;
    size_t k = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        const bench_latencies_t *l = latencies_at(first, stride, i);
        for (size_t j = 0; j < l->n; j++) {
            all[k++] = l->us[j];
            sum += l->us[j];
        }
    }
    qsort(all, nlat, sizeof(*all), compare_double);
    s.avg_us = nlat ? sum / (double)nlat : 0;
    s.p50_us = percentile(all, nlat, 50);
    s.p99_us = percentile(all, nlat, 99);
    free(all);
    return s;
}

/* ---- output -------------------------------------------------------------------------------- */

const char *bench_size_label(uint64_t b, char *buf, size_t n)
{
    if (b % GIB == 0)
        snprintf(buf, n, "%" PRIu64 "GiB", b / GIB);
    else if (b % MIB == 0)
        snprintf(buf, n, "%" PRIu64 "MiB", b / MIB);
    else if (b % KIB == 0)
        snprintf(buf, n, "%" PRIu64 "KiB", b / KIB);
    else
        snprintf(buf, n, "%" PRIu64 "B", b);
    return buf;
}

static void print_limit_pair(double limit, double gbps, int limit_width, int ratio_width,
                             int ratio_decimals)
{
    if (limit > 0)
        printf(" %*.3f %*.*f", limit_width, limit, ratio_width, ratio_decimals, gbps / limit);
    else
        printf(" %*s %*s", limit_width, "-", ratio_width, "-");
}

void bench_print_limit_cells(const bench_limits_t *l, double gbps, int ratio_decimals)
{
    print_limit_pair(l->memcpy_gbps, gbps, 11, 9, ratio_decimals);
    print_limit_pair(l->raw_tcp_gbps, gbps, 12, 10, ratio_decimals);
}

void bench_limits_row_json(json_t *row, const bench_limits_t *l, double gbps)
{
    json_object_set_new(row, "memcpy_gbps",
                        l->memcpy_gbps > 0 ? json_real(l->memcpy_gbps) : json_null());
    json_object_set_new(row, "raw_tcp_gbps",
                        l->raw_tcp_gbps > 0 ? json_real(l->raw_tcp_gbps) : json_null());
    json_object_set_new(row, "vs_memcpy",
                        l->memcpy_gbps > 0 ? json_real(gbps / l->memcpy_gbps) : json_null());
    json_object_set_new(row, "vs_raw_tcp",
                        l->raw_tcp_gbps > 0 ? json_real(gbps / l->raw_tcp_gbps) : json_null());
}

void bench_limits_config_json(json_t *c, int measured)
{
    json_object_set_new(c, "limits_measured", json_boolean(measured));
    json_object_set_new(c, "memcpy_working_set",
                        json_integer((json_int_t)BENCH_MEMCPY_WORKING_SET));
    json_object_set_new(c, "memcpy_seconds", json_real(BENCH_MEMCPY_SECONDS));
    json_object_set_new(c, "raw_tcp_seconds", json_real(BENCH_RAW_TCP_SECONDS));
}

json_t *bench_u64_list_json(const uint64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

json_t *bench_report_json(const char *program, json_t *config)
{
    json_t *root = json_object();
    json_object_set_new(root, "benchmark", json_string(program));
    json_object_set_new(root, "version", json_string(MC_VERSION_STRING));
    json_object_set_new(root, "machine", bench_machine_json());
    json_object_set_new(root, "config", config);
    return root;
}

int bench_report_write(json_t *report, const char *path, const char *program)
{
    int rc = json_dump_file(report, path, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    json_decref(report);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", program, path, strerror(errno));
        return 1;
    }
    return 0;
}

/* ---- child processes ---------------------------------------------------------------------- */

int bench_self_exe(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0)
        return -1;
    out[n] = '\0';
    return 0;
}

pid_t bench_spawn(const char *program, const char *path, char *const argv[], int out_fd, int err_fd,
                  void (*in_child)(void *), void *arg)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1);
    if (in_child)
        in_child(arg);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execv(path, argv);
    fprintf(stderr, "%s: cannot execute %s: %s\n", program, path, strerror(errno));
    _exit(127);
}

int bench_stop_child(const char *program, pid_t pid, const char *what)
{
    if (pid <= 0)
        return 0;
    kill(pid, SIGTERM);
    uint64_t deadline = mc_now_ms() + BENCH_CHILD_STOP_TIMEOUT_MS;
    int wstatus = 0;
    for (;;) {
        pid_t w = waitpid(pid, &wstatus, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return 1;
        if (mc_now_ms() >= deadline) {
            fprintf(stderr, "%s: %s (pid %d) did not stop within %d s; killing it\n", program, what,
                    (int)pid, BENCH_CHILD_STOP_TIMEOUT_MS / 1000);
            kill(pid, SIGKILL);
            waitpid(pid, &wstatus, 0);
            return 1;
        }
        usleep(20 * 1000);
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
        return 0;
    fprintf(stderr, "%s: %s exited abnormally (status 0x%x)\n", program, what, wstatus);
    return 1;
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
