/*
 * test_server_limits.c — the server limits (docs/limits.md) on the Transfer Engine's tcp server
 * (a real te_peer process) and on the standalone HTTP metadata server (the real
 * mooncake_http_metadata_server binary).
 *
 *   Transfer Engine: 1500 idle connections do not hold 1500 threads (/proc/PID/task), and a
 *   parked connection is served again when a request arrives; connections beyond
 *   MC_TE_MAX_CONNECTIONS are refused while the others keep working; an idle connection is
 *   closed after MC_TE_IDLE_TIMEOUT and an initiator whose pooled connections were closed
 *   carries on.
 *   HTTP metadata server: a value above --max_value_size is refused with 413 (declared or
 *   chunked), a new key beyond --max_keys and bytes beyond --max_total_size with 507, each
 *   counted on GET /metrics; 64 PUTs of 4 MiB with the defaults leave its RSS well below the
 *   256 MiB they would take; connections beyond --max_connections are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "frame.h"
#include "mooncake/errors.h"
#include "mooncake/transfer_engine.h"
#include "net.h"
#include "proc.h"
#include "transfer.pb-c.h"
#include "transfer_internal.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define PEER_BIN MC_BUILD_DIR "/tests/integration/te_peer"
#define MD_BIN MC_BUILD_DIR "/tools/mooncake_http_metadata_server"
#define MD_READY "HTTP metadata server listening on "
#define LOOPBACK "127.0.0.1"
#define IO_TIMEOUT_MS 10000
#define STATE_WAIT_MS 60000 /* failure bound of the waits for a state */
#define START_TIMEOUT_MS 20000
#define PEER_BYTES (16u << 20)
#define IDLE_CONNS 1500
#define CONNECT_BATCH 100 /* well below the tcp server's listen backlog (512) */
#define MIB (1u << 20)

static char tmp_dir[] = "/tmp/mc_test_server_limits.XXXXXX";

/* ---- helpers: processes ------------------------------------------------------------------ */

static size_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static size_t threads_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    return count_dir(path);
}

/* Sockets the process holds (its other descriptors, e.g. files a sanitizer opens for a moment,
 * are not counted). */
static size_t fds_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char link[384], target[64] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
        ssize_t len = readlink(link, target, sizeof(target) - 1);
        n += len > 0 && strncmp(target, "socket:", 7) == 0;
    }
    closedir(d);
    return n;
}

static long long rss_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtoll(line + n + 1, NULL, 10);
    }
    fclose(f);
    assert_true(v >= 0);
    return v;
}

typedef struct peer {
    mc_proc_t proc;
    char segment[128];
    unsigned long long shm_addr;
    int port;
} peer_t;

/* te_peer on loopback with `env` ("NAME=value", NULL-terminated, may be NULL) while it starts. */
static void start_peer(peer_t *p, const char *const *env)
{
    for (int i = 0; env && env[i]; i++)
        putenv((char *)env[i]);
    char bytes[32];
    snprintf(bytes, sizeof(bytes), "%u", PEER_BYTES);
    char *argv[] = {PEER_BIN, LOOPBACK ":0", "P2PHANDSHAKE", bytes, "4096", NULL};
    int rc = mc_proc_start(&p->proc, argv, "READY ", START_TIMEOUT_MS);
    for (int i = 0; env && env[i]; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(strchr(env[i], '=') - env[i]), env[i]);
        unsetenv(name);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(sscanf(p->proc.ready_line, "READY %127s %llu", p->segment, &p->shm_addr), 2);
    p->port = atoi(strrchr(p->segment, ':') + 1);
}

static void stop_peer(peer_t *p)
{
    assert_true(mc_clean_exit(mc_proc_stop(&p->proc, SIGTERM, 20000)));
}

/* Waits until cond(pid, arg) holds; fails after STATE_WAIT_MS with `what`. */
static void wait_until(int (*cond)(pid_t, size_t), pid_t pid, size_t arg, const char *what)
{
    for (uint64_t end = mc_now_ms() + STATE_WAIT_MS; mc_now_ms() < end; usleep(20000)) {
        if (cond(pid, arg))
            return;
    }
    fail_msg("%s (threads %zu, fds %zu)", what, threads_of(pid), fds_of(pid));
}

static int fds_at_least(pid_t pid, size_t n)
{
    return fds_of(pid) >= n;
}

static int fds_at_most(pid_t pid, size_t n)
{
    return fds_of(pid) <= n;
}

static int threads_at_most(pid_t pid, size_t n)
{
    return threads_of(pid) <= n;
}

/* ---- helpers: the peer protocol over raw sockets ---------------------------------------- */

static int connect_port(int port)
{
    int fd = mc_test_connect(LOOPBACK, port, IO_TIMEOUT_MS);
    assert_true(fd >= 0);
    return fd;
}

/* A HANDSHAKE on fd is answered with the peer's descriptor. */
static void handshake_on(int fd, const char *segment)
{
    Mc__HandshakeRequest req = MC__HANDSHAKE_REQUEST__INIT;
    req.initiator = (char *)"test_server_limits";
    uint8_t buf[MC_FRAME_HEADER_SIZE + 64];
    size_t n = mc__handshake_request__pack(&req, buf + MC_FRAME_HEADER_SIZE);
    mc_frame_encode(MC_TE_OP_HANDSHAKE, 5, (uint32_t)n, 0, buf);
    assert_int_equal(mc_net_send_all(fd, buf, MC_FRAME_HEADER_SIZE + n), 0);
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    assert_int_equal(mc_net_recv_all(fd, raw, sizeof(raw)), 0);
    mc_frame_header_t h;
    assert_int_equal(mc_frame_decode(raw, MC_FRAME_DEFAULT_MAX_BODY, &h), 0);
    assert_int_equal(h.opcode, MC_TE_OP_HANDSHAKE_REPLY);
    uint8_t *body = malloc(h.body_len ? h.body_len : 1);
    assert_non_null(body);
    assert_int_equal(mc_net_recv_all(fd, body, h.body_len), 0);
    Mc__SegmentDesc *d = mc__segment_desc__unpack(NULL, h.body_len, body);
    free(body);
    assert_non_null(d);
    assert_string_equal(d->name, segment);
    mc__segment_desc__free_unpacked(d, NULL);
}

static int closed_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* An initiator engine in this process reads the whole peer segment (4 MiB slices, in parallel)
 * and checks its pattern. */
static void read_peer(mc_transfer_engine_t *te, const peer_t *p)
{
    mc_segment_id_t seg;
    assert_int_equal(mc_te_open_segment(te, p->segment, &seg), 0);
    uint8_t *buf = malloc(PEER_BYTES);
    assert_non_null(buf);
    mc_transfer_req_t r = {MC_TRANSFER_READ, buf, seg, p->shm_addr, PEER_BYTES};
    assert_int_equal(mc_te_transfer_sync(te, &r, 1), 0);
    for (size_t i = 0; i < PEER_BYTES; i += 4099)
        assert_int_equal(buf[i], (uint8_t)(i * 7 + 3));
    free(buf);
}

static mc_transfer_engine_t *new_initiator(void)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = LOOPBACK ":0",
                                       .metadata_server = "P2PHANDSHAKE",
                                       .disable_shm = 1}; /* tcp: the server under test */
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    return te;
}

/* ---- Transfer Engine tcp server ---------------------------------------------------------- */

static void test_idle_te_connections_cost_no_thread(void **state)
{
    peer_t p;
    start_peer(&p, NULL);
    size_t threads0 = threads_of(p.proc.pid), fds0 = fds_of(p.proc.pid);
    int *fds = malloc(IDLE_CONNS * sizeof(*fds));
    assert_non_null(fds);
    /* In batches the listen backlog holds, each accepted before the next: a connection that
     * overflowed the backlog would only be accepted after SYN-ACK retransmissions. */
    for (int i = 0; i < IDLE_CONNS;) {
        for (int end = i + CONNECT_BATCH; i < end && i < IDLE_CONNS; i++)
            fds[i] = connect_port(p.port);
        wait_until(fds_at_least, p.proc.pid, fds0 + (size_t)i, "te_peer did not accept them");
    }
    /* Idle: each gives its thread up. */
    wait_until(threads_at_most, p.proc.pid, threads0 + 8,
               "1500 idle connections still hold their threads");
    printf("te_peer: %zu threads before, %zu with %d idle connections (fds %zu -> %zu)\n", threads0,
           threads_of(p.proc.pid), IDLE_CONNS, fds0, fds_of(p.proc.pid));
    /* A parked connection is served when a request arrives, and parks again. */
    handshake_on(fds[0], p.segment);
    handshake_on(fds[IDLE_CONNS - 1], p.segment);
    mc_transfer_engine_t *te = new_initiator();
    read_peer(te, &p);
    mc_te_destroy(te);
    for (int i = 0; i < IDLE_CONNS; i++)
        close(fds[i]);
    free(fds);
    stop_peer(&p);
}

static void test_te_connections_beyond_the_cap_are_refused(void **state)
{
    static const char *const env[] = {"MC_TE_MAX_CONNECTIONS=8", NULL};
    peer_t p;
    start_peer(&p, env);
    size_t fds0 = fds_of(p.proc.pid);
    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = connect_port(p.port);
        handshake_on(fds[i], p.segment);
    }
    int extra = connect_port(p.port);
    assert_true(closed_within(extra, IO_TIMEOUT_MS));
    close(extra);
    for (int i = 0; i < 8; i++)
        handshake_on(fds[i], p.segment);
    close(fds[0]);
    wait_until(fds_at_most, p.proc.pid, fds0 + 7, "the closed connection was not forgotten");
    fds[0] = connect_port(p.port);
    handshake_on(fds[0], p.segment);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    stop_peer(&p);
}

static void test_idle_te_connections_are_closed_and_initiators_carry_on(void **state)
{
    static const char *const env[] = {"MC_TE_IDLE_TIMEOUT=1", NULL};
    peer_t p;
    start_peer(&p, env);
    size_t fds0 = fds_of(p.proc.pid);
    int raw = connect_port(p.port);
    handshake_on(raw, p.segment);
    assert_true(closed_within(raw, STATE_WAIT_MS));
    close(raw);

    mc_transfer_engine_t *te = new_initiator();
    read_peer(te, &p); /* pools a few connections (one per parallel slice) */
    wait_until(fds_at_most, p.proc.pid, fds0, "the pooled connections were not closed");
    for (int i = 0; i < 5; i++) /* every read finds a usable connection */
        read_peer(te, &p);
    mc_te_destroy(te);
    stop_peer(&p);
}

/* ---- HTTP metadata server ---------------------------------------------------------------- */

typedef struct md_server {
    mc_proc_t proc;
    int port;
} md_server_t;

static void start_md(md_server_t *s, const char *name, const char *const *flags)
{
    char log[256];
    snprintf(log, sizeof(log), "%s/%s.log", tmp_dir, name);
    char *argv[16] = {MD_BIN, "--host=127.0.0.1", "--port=0"};
    int argc = 3;
    for (int i = 0; flags && flags[i] && argc < 15; i++)
        argv[argc++] = (char *)flags[i];
    argv[argc] = NULL;
    assert_int_equal(mc_proc_start_logged(&s->proc, argv, log, MD_READY, START_TIMEOUT_MS), 0);
    s->port = atoi(strrchr(s->proc.ready_line, ':') + 1);
    assert_true(s->port > 0);
}

static void stop_md(md_server_t *s)
{
    assert_true(mc_clean_exit(mc_proc_stop(&s->proc, SIGTERM, 20000)));
}

/*
 * One HTTP/1.1 request on a fresh connection (Connection: close): `body` of `len` bytes sent
 * with a Content-Length, or chunked (64 KiB chunks) when `chunked`. The status; *reply (may be
 * NULL) receives the malloc'd body.
 */
static int http(int port, const char *method, const char *path, const char *body, size_t len,
                int chunked, char **reply)
{
    int fd = connect_port(port);
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: " LOOPBACK "\r\nConnection: close\r\n", method, path);
    if (body && chunked)
        n += snprintf(head + n, sizeof(head) - (size_t)n, "Transfer-Encoding: chunked\r\n\r\n");
    else if (body)
        n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Length: %zu\r\n\r\n", len);
    else
        n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
    int sent = mc_net_send_all(fd, head, (size_t)n) == 0;
    for (size_t off = 0; sent && body && off < len;) {
        size_t k = len - off < 65536 ? len - off : 65536;
        if (chunked) {
            char line[32];
            int m = snprintf(line, sizeof(line), "%zx\r\n", k);
            sent = mc_net_send_all(fd, line, (size_t)m) == 0;
        }
        sent = sent && mc_net_send_all(fd, body + off, k) == 0;
        if (chunked)
            sent = sent && mc_net_send_all(fd, "\r\n", 2) == 0;
        off += k;
    }
    if (sent && body && chunked)
        sent = mc_net_send_all(fd, "0\r\n\r\n", 5) == 0;
    /* A refusal may come (and the server close) before the whole body went: read anyway. */
    char *resp = calloc(1, MIB + 1);
    assert_non_null(resp);
    size_t got = 0;
    ssize_t r;
    while (got < MIB && (r = recv(fd, resp + got, MIB - got, 0)) > 0)
        got += (size_t)r;
    close(fd);
    int status = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        status = -1;
    const char *b = strstr(resp, "\r\n\r\n");
    if (reply)
        *reply = b ? strdup(b + 4) : NULL;
    free(resp);
    return status;
}

/* The value of metric `name` on GET /metrics, or -1. */
static long long md_metric(int port, const char *name)
{
    char *body = NULL;
    if (http(port, "GET", "/metrics", NULL, 0, 0, &body) != 200 || !body) {
        free(body);
        return -1;
    }
    char pat[128];
    snprintf(pat, sizeof(pat), "\n%s ", name);
    char *at = strstr(body, pat);
    long long v = at ? strtoll(at + strlen(pat), NULL, 10) : -1;
    free(body);
    return v;
}

static void test_metadata_value_above_the_limit_is_refused_with_413(void **state)
{
    const char *flags[] = {"--max_value_size=64KB", NULL};
    md_server_t s;
    start_md(&s, "value", flags);
    char *big = malloc(100 * 1024);
    assert_non_null(big);
    memset(big, 'x', 100 * 1024);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=big", big, 100 * 1024, 0, NULL), 413);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=big", big, 100 * 1024, 1, NULL), 413);
    assert_int_equal(http(s.port, "GET", "/metadata?key=big", NULL, 0, 0, NULL), 404);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=ok", big, 64 * 1024, 1, NULL), 200);
    assert_int_equal(md_metric(s.port, "mooncake_http_metadata_refused_too_large_total"), 2);
    assert_int_equal(md_metric(s.port, "mooncake_http_metadata_keys"), 1);
    free(big);
    stop_md(&s);
}

static void test_metadata_keys_and_bytes_beyond_the_limits_are_refused_with_507(void **state)
{
    const char *flags[] = {"--max_keys=4", "--max_total_size=1MB", "--max_value_size=512KB", NULL};
    md_server_t s;
    start_md(&s, "store_full", flags);
    for (int i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/metadata?key=k%d", i);
        assert_int_equal(http(s.port, "PUT", path, "desc", 4, 0, NULL), 200);
    }
    assert_int_equal(http(s.port, "PUT", "/metadata?key=k4", "desc", 4, 0, NULL), 507);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=k0", "other", 5, 0, NULL), 200);
    assert_int_equal(http(s.port, "DELETE", "/metadata?key=k1", NULL, 0, 0, NULL), 200);
    assert_int_equal(http(s.port, "DELETE", "/metadata?key=k2", NULL, 0, 0, NULL), 200);
    assert_int_equal(http(s.port, "DELETE", "/metadata?key=k3", NULL, 0, 0, NULL), 200);

    char *v = malloc(400 * 1024);
    assert_non_null(v);
    memset(v, 'v', 400 * 1024);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=a", v, 400 * 1024, 0, NULL), 200);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=b", v, 400 * 1024, 1, NULL), 200);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=c", v, 400 * 1024, 0, NULL), 507);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=c", v, 400 * 1024, 1, NULL), 507);
    assert_int_equal(http(s.port, "DELETE", "/metadata?key=a", NULL, 0, 0, NULL), 200);
    assert_int_equal(http(s.port, "PUT", "/metadata?key=c", v, 400 * 1024, 0, NULL), 200);
    assert_int_equal(md_metric(s.port, "mooncake_http_metadata_refused_full_total"), 3);
    assert_true(md_metric(s.port, "mooncake_http_metadata_bytes") <= 1024 * 1024);
    free(v);
    stop_md(&s);
}

static void test_metadata_store_bounds_its_memory_with_the_defaults(void **state)
{
    enum { PUTS = 64 };
    const size_t each = 4 * MIB;
    md_server_t s;
    start_md(&s, "rss", NULL);
    long long before = rss_kb(s.proc.pid, "VmRSS");
    char *v = malloc(each);
    assert_non_null(v);
    memset(v, 'd', each);
    int stored = 0, refused = 0;
    for (int i = 0; i < PUTS; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/metadata?key=bulk%d", i);
        int st = http(s.port, "PUT", path, v, each, 0, NULL);
        stored += st == 200;
        refused += st == 507;
    }
    long long peak = rss_kb(s.proc.pid, "VmHWM");
    printf("HTTP metadata server: %d PUTs of 4 MiB, %d stored, %d refused (507); RSS %lld kB "
           "before, peak %lld kB (+%lld kB)\n",
           PUTS, stored, refused, before, peak, peak - before);
    assert_int_equal(stored + refused, PUTS);
    assert_true(stored > 0 && refused > 0);
    assert_int_equal(md_metric(s.port, "mooncake_http_metadata_keys"), stored);
    assert_int_equal(md_metric(s.port, "mooncake_http_metadata_refused_full_total"), refused);
    assert_true(peak - before < 128 * 1024);
    free(v);
    stop_md(&s);
}

static void test_metadata_connections_beyond_the_cap_are_refused(void **state)
{
    const char *flags[] = {"--max_connections=4", NULL};
    md_server_t s;
    start_md(&s, "cap", flags);
    int fds[3];
    for (int i = 0; i < 3; i++) /* 3 idle + each request's own = the cap of 4 */
        fds[i] = connect_port(s.port);
    assert_int_equal(http(s.port, "GET", "/health", NULL, 0, 0, NULL), 200);
    int extra = connect_port(s.port);
    int fifth = connect_port(s.port); /* 3 idle + extra open: this one is over */
    assert_true(closed_within(fifth, IO_TIMEOUT_MS));
    close(fifth);
    close(extra);
    /* The idle ones still work. */
    const char req[] = "GET /health HTTP/1.1\r\nHost: " LOOPBACK "\r\n\r\n";
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mc_net_send_all(fds[i], req, sizeof(req) - 1), 0);
        char buf[256] = "";
        assert_true(recv(fds[i], buf, sizeof(buf) - 1, 0) > 0);
        assert_non_null(strstr(buf, "200"));
        close(fds[i]);
    }
    assert_true(md_metric(s.port, "mooncake_http_metadata_connections_refused_total") >= 1);
    stop_md(&s);
}

/* ---- main --------------------------------------------------------------------------------- */

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_max >= 4096) {
        rl.rlim_cur = 4096; /* 1500 connections, and te_peer inherits it */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_te_connections_cost_no_thread),
        cmocka_unit_test(test_te_connections_beyond_the_cap_are_refused),
        cmocka_unit_test(test_idle_te_connections_are_closed_and_initiators_carry_on),
        cmocka_unit_test(test_metadata_value_above_the_limit_is_refused_with_413),
        cmocka_unit_test(test_metadata_keys_and_bytes_beyond_the_limits_are_refused_with_507),
        cmocka_unit_test(test_metadata_store_bounds_its_memory_with_the_defaults),
        cmocka_unit_test(test_metadata_connections_beyond_the_cap_are_refused),
    };
    int failed = cmocka_run_group_tests_name("server_limits", tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_dir);
    return failed;
}
