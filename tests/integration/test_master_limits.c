/*
 * test_master_limits.c — the server limits (docs/limits.md) on a real mooncake_master: what a
 * client or a raw socket can no longer make the master do.
 *
 *   - a RemoveByRegex pattern with catastrophic backtracking neither stalls the master (its
 *     /health answers within 2 s, another client's put/get work) nor hangs the caller: -600;
 *   - a 64 MiB frame of empty keys, and a 32 MiB frame of empty segments, do not make the
 *     master allocate gigabytes (its RSS grows by less than 256 MiB) and it keeps serving;
 *   - connections beyond --max_connections are refused while existing clients keep working;
 *     a connection stalled mid-frame is closed after --rpc_frame_timeout_seconds; an idle one
 *     after --rpc_conn_timeout_seconds, and store clients carry on; the partial frames of many
 *     connections are bounded in total (--rpc_max_buffered_size, master RSS);
 *   - /query_key answers valid JSON for a key that is not UTF-8;
 *   - the embedded HTTP metadata server takes its value and key limits from the master's flags
 *     (413, 507, counted on the master's /metrics);
 *   - only the owner unmounts a segment, only a live client removes everything, a mount
 *     without a client id or above --max_segment_size is refused;
 *   - the RPC threads' spin (--rpc_spin_us) ends when requests stop: an idle master burns no
 *     CPU after a burst; --rpc_spin_us above 1000 is refused.
 *
 * Every process is real (mooncake_master, mooncake_client through cluster.h); raw frames are
 * written with frame.h and store.proto. The master runs with its log in a file (--log_dir) where
 * a test reads it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cluster.h"
#include "frame.h"
#include "mooncake/errors.h"
#include "mooncake/store.h"
#include "net.h"
#include "rpc.h"
#include "store.pb-c.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOOPBACK "127.0.0.1"
#define IO_TIMEOUT_MS 10000
#define HEALTH_BOUND_MS 2000 /* the one time bound: /health must answer within it */
#define STATE_WAIT_MS 60000  /* failure bound of the waits for a state */
#define RSS_GROWTH_MAX_KB (256 * 1024)
#define MIB (1u << 20)

static char tmp_dir[] = "/tmp/mc_test_master_limits.XXXXXX";

/* ---- helpers: processes ------------------------------------------------------------------ */

/* A master with extra flags, its log in tmp_dir/<name>/, both ports up. */
static void start_master(mc_master_t *m, const char *name, const char *const *extra)
{
    char dir[256], log_flag[300];
    snprintf(dir, sizeof(dir), "%s/%s", tmp_dir, name);
    mkdir(dir, 0755);
    snprintf(log_flag, sizeof(log_flag), "--log_dir=%s", dir);
    const char *flags[16] = {log_flag};
    int n = 1;
    for (int i = 0; extra && extra[i] && n < 15; i++)
        flags[n++] = extra[i];
    flags[n] = NULL;
    assert_int_equal(mc_master_start(m, 0, flags), 0);
    for (int i = 0; i < 200 && !mc_port_open(m->metrics_port); i++)
        usleep(50000);
    assert_true(mc_port_open(m->metrics_port));
}

static void stop_master(mc_master_t *m)
{
    assert_true(mc_clean_exit(mc_master_stop(m, SIGTERM)));
}

static char *master_log(const char *name)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/%s/mooncake_master.INFO", tmp_dir, name);
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 4 * MIB + 1);
    assert_non_null(buf);
    if (f) {
        size_t n = fread(buf, 1, 4 * MIB, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* A field ("VmRSS", "VmHWM") of /proc/pid/status, in kB. */
static long long proc_status_kb(pid_t pid, const char *field)
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

/* Waits until the master's metric `name` is at least `want`; fails after STATE_WAIT_MS. */
static long long wait_metric_at_least(const mc_master_t *m, const char *name, long long want)
{
    long long v = -1;
    for (uint64_t end = mc_now_ms() + STATE_WAIT_MS; mc_now_ms() < end; usleep(20000)) {
        v = mc_master_metric(m, name);
        if (v >= want)
            return v;
    }
    fail_msg("metric %s stayed at %lld, below %lld", name, v, want);
    return v;
}

static void stop_holder(mc_holder_t *h)
{
    mc_cluster_untrack(h->proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&h->proc, SIGTERM, 20000)));
}

/* ---- helpers: raw RPC -------------------------------------------------------------------- */

static int connect_master(const mc_master_t *m)
{
    int fd = mc_test_connect(LOOPBACK, m->rpc_port, IO_TIMEOUT_MS);
    assert_true(fd >= 0);
    return fd;
}

/* Sends one request frame of `opcode` with msg (NULL: empty body) on fd. */
static void send_request(int fd, uint16_t opcode, uint64_t id, const ProtobufCMessage *msg)
{
    size_t len = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    uint8_t *buf = malloc(MC_FRAME_HEADER_SIZE + len);
    assert_non_null(buf);
    mc_frame_encode(opcode, id, (uint32_t)len, 0, buf);
    if (msg)
        protobuf_c_message_pack(msg, buf + MC_FRAME_HEADER_SIZE);
    assert_int_equal(mc_net_send_all(fd, buf, MC_FRAME_HEADER_SIZE + len), 0);
    free(buf);
}

/* Reads the reply to request `id` of `opcode` on fd; a malloc'd body. */
static uint8_t *recv_reply(int fd, uint16_t opcode, uint64_t id, size_t *len)
{
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    assert_int_equal(mc_net_recv_all(fd, raw, sizeof(raw)), 0);
    mc_frame_header_t h;
    assert_int_equal(mc_frame_decode(raw, MC_RPC_MAX_BODY, &h), 0);
    assert_int_equal(h.request_id, id);
    assert_int_equal(h.opcode, opcode | MC_RPC_REPLY);
    uint8_t *body = malloc(h.body_len ? h.body_len : 1);
    assert_non_null(body);
    assert_int_equal(mc_net_recv_all(fd, body, h.body_len), 0);
    *len = h.body_len;
    return body;
}

/* ServiceReady on fd answers. */
static void service_ready_on(int fd, uint64_t id)
{
    send_request(fd, MC_RPC_SERVICE_READY, id, NULL);
    size_t len;
    uint8_t *body = recv_reply(fd, MC_RPC_SERVICE_READY, id, &len);
    Mc__ServiceReadyResponse *r = mc__service_ready_response__unpack(NULL, len, body);
    free(body);
    assert_non_null(r);
    assert_string_equal(r->version, MC_VERSION_STRING);
    mc__service_ready_response__free_unpacked(r, NULL);
}

/* ServiceReady on a fresh connection answers. */
static void master_answers(const mc_master_t *m)
{
    int fd = connect_master(m);
    service_ready_on(fd, 7);
    close(fd);
}

/* 1 when the peer closes fd (EOF or reset) within `ms`, 0 when fd is still open then. */
static int closed_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* A one-segment request of `opcode` for client_id; returns the reply code. */
static int segment_call(const mc_master_t *m, uint16_t opcode, const char *client_id,
                        const char *segment_id, uint64_t size)
{
    Mc__Segment seg = MC__SEGMENT__INIT;
    Mc__Segment *segs[] = {&seg};
    seg.id = (char *)segment_id;
    seg.name = (char *)LOOPBACK ":17100";
    seg.base_address = 0x10000000ull;
    seg.size = size;
    seg.protocol = (char *)"tcp";
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    req.client_id = (char *)client_id;
    req.segments = segs;
    req.n_segments = 1;
    int fd = connect_master(m);
    send_request(fd, opcode, 1, &req.base);
    size_t len;
    uint8_t *body = recv_reply(fd, opcode, 1, &len);
    close(fd);
    Mc__StatusResponse *r = mc__status_response__unpack(NULL, len, body);
    free(body);
    assert_non_null(r);
    int code = r->code;
    mc__status_response__free_unpacked(r, NULL);
    return code;
}

/* RemoveAll (regex NULL) or RemoveByRegex with force, as client_id; the code (count in *n). */
static int remove_call(const mc_master_t *m, const char *client_id, const char *regex, int64_t *n)
{
    Mc__KeysRequest req = MC__KEYS_REQUEST__INIT;
    req.client_id = (char *)client_id;
    req.force = 1;
    req.regex = (char *)(regex ? regex : "");
    uint16_t op = regex ? MC_RPC_REMOVE_BY_REGEX : MC_RPC_REMOVE_ALL;
    int fd = connect_master(m);
    send_request(fd, op, 2, &req.base);
    size_t len;
    uint8_t *body = recv_reply(fd, op, 2, &len);
    close(fd);
    Mc__KeysResponse *r = mc__keys_response__unpack(NULL, len, body);
    free(body);
    assert_non_null(r);
    int code = r->code;
    if (n)
        *n = r->count;
    mc__keys_response__free_unpacked(r, NULL);
    return code;
}

/* ---- helpers: HTTP ------------------------------------------------------------------------ */

/*
 * GET path on 127.0.0.1:port with every step bounded by timeout_ms; the status (-1 when no
 * answer came in time) and a malloc'd body (may be NULL). *elapsed_ms: how long it took.
 */
static int http_get_bounded(int port, const char *path, int timeout_ms, char **body,
                            uint64_t *elapsed_ms)
{
    uint64_t start = mc_now_ms();
    *body = NULL;
    int fd = mc_net_connect_tcp(LOOPBACK, port, timeout_ms);
    int status = -1;
    if (fd >= 0) {
        mc_net_set_timeouts(fd, timeout_ms);
        char req[1024];
        int len =
            snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: " LOOPBACK "\r\nConnection: close\r\n\r\n", path);
        char *resp = calloc(1, MIB + 1);
        assert_non_null(resp);
        size_t got = 0;
        if (mc_net_send_all(fd, req, (size_t)len) == 0) {
            ssize_t n;
            while (got < MIB && (n = recv(fd, resp + got, MIB - got, 0)) > 0)
                got += (size_t)n;
        }
        close(fd);
        const char *b = strstr(resp, "\r\n\r\n");
        if (got > 0 && sscanf(resp, "HTTP/1.%*d %d", &status) == 1 && b)
            *body = strdup(b + 4);
        else
            status = -1;
        free(resp);
    }
    *elapsed_ms = mc_now_ms() - start;
    return status;
}

/* ---- a pattern with catastrophic backtracking -------------------------------------------- */

typedef struct regex_call {
    mc_store_t *store;
    const char *pattern;
    int64_t result;
    atomic_int done;
} regex_call_t;

static void *regex_main(void *arg)
{
    regex_call_t *c = arg;
    c->result = mc_store_remove_by_regex(c->store, c->pattern, 1);
    atomic_store(&c->done, 1);
    return NULL;
}

/* The health endpoint answers within HEALTH_BOUND_MS; another client's put and get work. */
static void master_still_serves(const mc_master_t *m, mc_store_t *other, int round)
{
    char *body;
    uint64_t ms;
    int status = http_get_bounded(m->metrics_port, "/health", HEALTH_BOUND_MS, &body, &ms);
    if (status != 200 || ms >= HEALTH_BOUND_MS)
        fail_msg("/health answered %d after %llu ms while the evil pattern ran", status,
                 (unsigned long long)ms);
    free(body);
    char key[64], value[4096], back[4096];
    snprintf(key, sizeof(key), "bystander/%d", round);
    memset(value, 'v' + round % 3, sizeof(value));
    assert_int_equal(mc_store_put(other, key, value, sizeof(value), NULL), 0);
    assert_int_equal(mc_store_get(other, key, back, sizeof(back)), (int64_t)sizeof(back));
    assert_memory_equal(back, value, sizeof(value));
}

static void test_evil_regex_fails_fast_and_the_master_keeps_serving(void **state)
{
    mc_master_t m;
    mc_holder_t h;
    start_master(&m, "regex", NULL);
    assert_int_equal(mc_holder_start(&h, &m, "64MB", NULL, NULL, 20000), 0);
    mc_store_t *evil = mc_test_client(&m, 1, 0), *other = mc_test_client(&m, 1, 0);
    assert_non_null(evil);
    assert_non_null(other);
    /* 224 bytes on which "(a*)*\1b" backtracks exponentially (glibc: 15 s and more). */
    char key[225];
    memset(key, 'a', 222);
    strcpy(key + 222, "!b");
    char value[1024] = {0};
    assert_int_equal(mc_store_put(evil, key, value, sizeof(value), NULL), 0);

    regex_call_t call = {.store = evil, .pattern = "(a*)*\\1b"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, regex_main, &call), 0);
    int round = 0;
    do
        master_still_serves(&m, other, round++);
    while (!atomic_load(&call.done));
    pthread_join(t, NULL);

    assert_int_equal(call.result, MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_size(evil, key), (int64_t)sizeof(value)); /* nothing removed */
    assert_int_equal(mc_master_metric(&m, "master_remove_by_regex_refused_total"), 1);
    /* An ordinary pattern still works through the same path. */
    assert_int_equal(mc_store_remove_by_regex(other, "^bystander/", 1), round);
    char *log = master_log("regex");
    assert_non_null(strstr(log, "exceeds the match limit"));
    free(log);
    mc_store_close(evil);
    mc_store_free(evil);
    mc_store_close(other);
    mc_store_free(other);
    stop_holder(&h);
    stop_master(&m);
}

/* ---- frames that would make protobuf-c allocate gigabytes -------------------------------- */

/* A frame of `opcode` whose body is `body_len` bytes of "\x12\x00": field 2, empty, repeated. */
static void send_empty_field_frame(int fd, uint16_t opcode, uint64_t id, uint32_t body_len)
{
    uint8_t *buf = malloc(MC_FRAME_HEADER_SIZE + (size_t)body_len);
    assert_non_null(buf);
    mc_frame_encode(opcode, id, body_len, 0, buf);
    for (uint32_t i = 0; i < body_len; i += 2) {
        buf[MC_FRAME_HEADER_SIZE + i] = 0x12;
        buf[MC_FRAME_HEADER_SIZE + i + 1] = 0x00;
    }
    assert_int_equal(mc_net_send_all(fd, buf, MC_FRAME_HEADER_SIZE + (size_t)body_len), 0);
    free(buf);
}

static void test_a_frame_of_empty_keys_is_refused_without_allocating(void **state)
{
    mc_master_t m;
    start_master(&m, "empty_keys", NULL);
    master_answers(&m);
    long long before = proc_status_kb(m.pid, "VmRSS");

    /* 64 MiB of empty keys: 32 million of them, refused before decoding, with a reply. */
    int fd = connect_master(&m);
    send_empty_field_frame(fd, MC_RPC_EXIST_KEY, 11, MC_RPC_MAX_BODY);
    size_t len;
    uint8_t *body = recv_reply(fd, MC_RPC_EXIST_KEY, 11, &len);
    Mc__KeysResponse *r = mc__keys_response__unpack(NULL, len, body);
    free(body);
    assert_non_null(r);
    assert_int_equal(r->code, MC_ERR_INVALID_PARAMS);
    assert_int_equal(r->n_results, 0);
    mc__keys_response__free_unpacked(r, NULL);
    service_ready_on(fd, 12); /* the same connection still works */
    close(fd);

    /* 32 MiB of empty segments: decoded within the budget, refused, the connection closed. */
    fd = connect_master(&m);
    send_empty_field_frame(fd, MC_RPC_MOUNT_SEGMENT, 13, 32 * MIB);
    assert_true(closed_within(fd, IO_TIMEOUT_MS));
    close(fd);
    assert_int_equal(mc_master_metric(&m, "master_rpc_decode_refused_total"), 1);

    long long peak = proc_status_kb(m.pid, "VmHWM");
    printf("master RSS %lld kB before, peak %lld kB after the frames (+%lld kB)\n", before, peak,
           peak - before);
    assert_true(peak - before < RSS_GROWTH_MAX_KB);
    master_answers(&m);
    stop_master(&m);
}

/* ---- connections -------------------------------------------------------------------------- */

static void test_connections_beyond_the_cap_are_refused_and_the_others_keep_working(void **state)
{
    const char *flags[] = {"--max_connections=4", NULL};
    mc_master_t m;
    start_master(&m, "cap", flags);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_master(&m);
        service_ready_on(fds[i], 100 + (uint64_t)i); /* accepted and served */
    }
    int extra = connect_master(&m); /* the kernel completes it; the master closes it */
    assert_true(closed_within(extra, IO_TIMEOUT_MS));
    close(extra);
    wait_metric_at_least(&m, "master_rpc_connections_rejected_total", 1);
    for (int i = 0; i < 4; i++)
        service_ready_on(fds[i], 200 + (uint64_t)i);
    close(fds[0]);
    /* Room again once one closed. */
    for (uint64_t end = mc_now_ms() + STATE_WAIT_MS;
         mc_master_metric(&m, "master_rpc_connections_active") >= 4 && mc_now_ms() < end;)
        usleep(20000);
    fds[0] = connect_master(&m);
    service_ready_on(fds[0], 300);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    char *log = master_log("cap");
    assert_non_null(strstr(log, "the limit (--max_connections)"));
    free(log);
    stop_master(&m);
}

/* A TCP connection to 127.0.0.1:port from source address `from` (another loopback address):
 * the fd, or -1. */
static int connect_from(const char *from, int port)
{
    return mc_test_connect_from(from, LOOPBACK, port);
}

/* One peer floods the RPC port with idle connections: it holds a quarter of the cap, and
 * another peer is served at once (without the per-peer share the flood held all 64 slots). */
static void test_one_peer_holds_a_quarter_of_the_connections_at_most(void **state)
{
    const char *flags[] = {"--max_connections=64", NULL};
    mc_master_t m;
    start_master(&m, "peer", flags);
    enum { FLOOD = 300 };
    int flood[FLOOD], opened = 0;
    for (int i = 0; i < FLOOD; i++)
        opened += (flood[i] = connect_from("127.0.0.2", m.rpc_port)) >= 0;
    assert_int_equal(opened, FLOOD); /* the kernel completes them; the master closes most */
    wait_metric_at_least(&m, "master_rpc_connections_rejected_per_peer_total", FLOOD - 16);
    uint64_t t0 = mc_now_ms();
    int fd = connect_master(&m);
    service_ready_on(fd, 1); /* accepted and served */
    uint64_t took = mc_now_ms() - t0;
    print_message("  300 idle connections from 127.0.0.2: another peer served in %llu ms, %lld "
                  "of the flood held\n",
                  (unsigned long long)took,
                  (long long)mc_master_metric(&m, "master_rpc_connections_active") - 1);
    assert_true(took < 1000);
    assert_int_equal(mc_master_metric(&m, "master_rpc_connections_active"), 16 + 1);
    /* A store client (its own pool of connections) puts and gets. */
    mc_store_t *s = mc_test_client(&m, 1, 1);
    assert_non_null(s);
    /* No holder here: the master's own answers, not a transport error. */
    assert_int_equal(mc_store_put(s, "flooded", "x", 1, NULL), MC_ERR_NO_AVAILABLE_HANDLE);
    char got[8];
    assert_int_equal(mc_store_get(s, "flooded", got, sizeof(got)), MC_ERR_OBJECT_NOT_FOUND);
    close(fd);
    for (int i = 0; i < FLOOD; i++)
        if (flood[i] >= 0)
            close(flood[i]);
    mc_store_free(s);
    char *log = master_log("peer");
    assert_non_null(strstr(log, "127.0.0.2 holds 16 connections, the limit for one peer"));
    free(log);
    stop_master(&m);
}

static void test_a_stalled_partial_frame_is_closed_and_an_idle_connection_is_not(void **state)
{
    const char *flags[] = {"--rpc_frame_timeout_seconds=1", NULL};
    mc_master_t m;
    start_master(&m, "stall", flags);
    int idle = connect_master(&m);
    service_ready_on(idle, 1);
    int stalled = connect_master(&m);
    uint8_t partial[MC_FRAME_HEADER_SIZE + 100] = {0};
    mc_frame_encode(MC_RPC_EXIST_KEY, 2, MIB, 0, partial); /* 1 MiB declared, 100 bytes sent */
    assert_int_equal(mc_net_send_all(stalled, partial, sizeof(partial)), 0);
    assert_true(closed_within(stalled, STATE_WAIT_MS));
    close(stalled);
    assert_int_equal(mc_master_metric(&m, "master_rpc_connections_stalled_total"), 1);
    service_ready_on(idle, 3); /* idle without a partial frame: kept open */
    close(idle);
    stop_master(&m);
}

typedef struct put_burst {
    mc_store_t *store;
    int thread;
    int failures;
} put_burst_t;

static void *put_burst_main(void *arg)
{
    put_burst_t *b = arg;
    char key[32], value[512];
    memset(value, 'b', sizeof(value));
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "burst/%d/%d", b->thread, i);
        b->failures += mc_store_put(b->store, key, value, sizeof(value), NULL) != 0;
    }
    return NULL;
}

static void test_idle_connections_are_closed_and_store_clients_carry_on(void **state)
{
    enum { THREADS = 8 };
    const char *flags[] = {"--rpc_conn_timeout_seconds=1", NULL};
    mc_master_t m;
    mc_holder_t h;
    start_master(&m, "idle", flags);
    assert_int_equal(mc_holder_start(&h, &m, "64MB", NULL, NULL, 20000), 0);

    /* A raw connection that went quiet is closed. */
    int fd = connect_master(&m);
    service_ready_on(fd, 1);
    assert_true(closed_within(fd, STATE_WAIT_MS));
    close(fd);
    long long closed = mc_master_metric(&m, "master_rpc_connections_idle_closed_total");
    assert_true(closed >= 1);

    /* Concurrent calls give the client several pooled connections; its pings keep one busy,
     * the master closes the others once they idle. */
    mc_store_t *s = mc_test_client(&m, 1, 0);
    assert_non_null(s);
    put_burst_t bursts[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        bursts[i] = (put_burst_t){s, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, put_burst_main, &bursts[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(bursts[i].failures, 0);
    }
    closed = wait_metric_at_least(&m, "master_rpc_connections_idle_closed_total", closed + 2);
    /* Every call finds a usable connection, concurrent ones too (they reach deep into the
     * pool): none starts on one the master closed. */
    for (int i = 0; i < THREADS; i++) {
        bursts[i] = (put_burst_t){s, THREADS + i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, put_burst_main, &bursts[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(bursts[i].failures, 0);
    }
    char value[512], back[512];
    memset(value, 'i', sizeof(value));
    for (int i = 0; i < 20; i++) {
        char key[32];
        snprintf(key, sizeof(key), "idle/%d", i);
        assert_int_equal(mc_store_put(s, key, value, sizeof(value), NULL), 0);
        assert_int_equal(mc_store_get(s, key, back, sizeof(back)), (int64_t)sizeof(back));
    }
    mc_store_close(s);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

/* Eight connections each send 60 MiB of a 64 MiB frame as fast as the master reads them. */
static void test_partial_frames_are_bounded_in_total(void **state)
{
    enum { CONNS = 8 };
    const size_t each = 60 * MIB;
    const char *flags[] = {"--rpc_max_buffered_size=96MB", NULL};
    mc_master_t m;
    start_master(&m, "buffered", flags);
    master_answers(&m);
    long long before = proc_status_kb(m.pid, "VmRSS");
    uint8_t *chunk = calloc(1, MIB);
    assert_non_null(chunk);
    int fds[CONNS];
    size_t sent[CONNS];
    for (int i = 0; i < CONNS; i++) {
        fds[i] = connect_master(&m);
        uint8_t hdr[MC_FRAME_HEADER_SIZE];
        mc_frame_encode(MC_RPC_EXIST_KEY, 1, 64 * MIB, 0, hdr);
        assert_int_equal(mc_net_send_all(fds[i], hdr, sizeof(hdr)), 0);
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        sent[i] = 0;
    }
    /* Until every connection sent its bytes, or the master stopped reading all that did not
     * (they wait for buffer room) and says so. */
    for (uint64_t end = mc_now_ms() + STATE_WAIT_MS;;) {
        assert_true(mc_now_ms() < end);
        int progress = 0, unfinished = 0;
        for (int i = 0; i < CONNS; i++) {
            while (sent[i] < each) {
                size_t n = each - sent[i] < MIB ? each - sent[i] : MIB;
                ssize_t w = send(fds[i], chunk, n, MSG_NOSIGNAL);
                if (w <= 0)
                    break;
                sent[i] += (size_t)w;
                progress = 1;
            }
            unfinished += sent[i] < each;
        }
        if (unfinished == 0)
            break;
        if (!progress && mc_master_metric(&m, "master_rpc_buffer_waits_total") >= unfinished - 1)
            break;
        if (!progress)
            usleep(50000);
    }
    long long peak = proc_status_kb(m.pid, "VmHWM");
    size_t total = 0;
    for (int i = 0; i < CONNS; i++)
        total += sent[i];
    printf("8 connections sent %zu MiB of partial frames; master RSS %lld kB before, peak %lld "
           "kB (+%lld kB)\n",
           total / MIB, before, peak, peak - before);
    assert_true(peak - before < RSS_GROWTH_MAX_KB);
    assert_true(mc_master_metric(&m, "master_rpc_buffered_bytes") <= 96ll * MIB);
    master_answers(&m); /* small requests still fit */
    for (int i = 0; i < CONNS; i++)
        close(fds[i]);
    free(chunk);
    stop_master(&m);
}

/* ---- JSON answers about keys that are not UTF-8 ------------------------------------------ */

static void test_query_key_answers_json_for_a_key_that_is_not_utf8(void **state)
{
    mc_master_t m;
    mc_holder_t h;
    start_master(&m, "utf8", NULL);
    assert_int_equal(mc_holder_start(&h, &m, "64MB", NULL, NULL, 20000), 0);
    mc_store_t *s = mc_test_client(&m, 1, 0);
    assert_non_null(s);
    assert_int_equal(mc_store_put(s, "\xff\xfe", "xyz", 3, NULL), 0);

    char *body;
    uint64_t ms;
    assert_int_equal(
        http_get_bounded(m.metrics_port, "/query_key?key=%FF%FE", IO_TIMEOUT_MS, &body, &ms), 200);
    json_error_t err;
    json_t *j = json_loads(body, 0, &err);
    if (!j)
        fail_msg("/query_key answered invalid JSON (%s): %s", err.text, body);
    assert_string_equal(json_string_value(json_object_get(j, "key")), "\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_object_get(j, "key_hex")), "fffe");
    assert_int_equal(json_integer_value(json_object_get(j, "size")), 3);
    json_decref(j);
    free(body);

    /* Absent: 404 with valid JSON too. */
    assert_int_equal(
        http_get_bounded(m.metrics_port, "/query_key?key=a%C3%28", IO_TIMEOUT_MS, &body, &ms), 404);
    j = json_loads(body, 0, &err);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "key_hex")), "61c328");
    json_decref(j);
    free(body);
    mc_store_close(s);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

/* ---- the embedded HTTP metadata server --------------------------------------------------- */

/* PUT of `len` bytes to the metadata server at port; the status (-1: no answer). */
static int metadata_put(int port, const char *key, size_t len)
{
    int fd = mc_net_connect_tcp(LOOPBACK, port, IO_TIMEOUT_MS);
    assert_true(fd >= 0);
    mc_net_set_timeouts(fd, IO_TIMEOUT_MS);
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "PUT /metadata?key=%s HTTP/1.1\r\nHost: " LOOPBACK
                     "\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                     key, len);
    char *body = calloc(1, len + 1);
    assert_non_null(body);
    memset(body, 'm', len);
    int status = -1;
    char resp[512] = "";
    if (mc_net_send_all(fd, head, (size_t)n) == 0) {
        (void)mc_net_send_all(fd, body, len); /* a refusal may come before the body went */
        if (recv(fd, resp, sizeof(resp) - 1, 0) > 0 && sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
            status = -1;
    }
    close(fd);
    free(body);
    return status;
}

static void test_embedded_metadata_server_takes_its_limits_from_the_master_flags(void **state)
{
    char port_flag[64];
    int port = mc_test_free_port();
    snprintf(port_flag, sizeof(port_flag), "--http_metadata_server_port=%d", port);
    const char *flags[] = {"--enable_http_metadata_server=true",
                           "--http_metadata_server_host=127.0.0.1",
                           port_flag,
                           "--http_metadata_max_value_size=1KB",
                           "--http_metadata_max_keys=2",
                           NULL};
    mc_master_t m;
    start_master(&m, "metadata", flags);
    assert_int_equal(metadata_put(port, "big", 2048), 413);
    assert_int_equal(metadata_put(port, "a", 100), 200);
    assert_int_equal(metadata_put(port, "b", 100), 200);
    assert_int_equal(metadata_put(port, "c", 100), 507);
    assert_int_equal(mc_master_metric(&m, "master_http_metadata_refused_too_large_total"), 1);
    assert_int_equal(mc_master_metric(&m, "master_http_metadata_refused_full_total"), 1);
    assert_int_equal(mc_master_metric(&m, "master_http_metadata_keys"), 2);
    stop_master(&m);
}

/* ---- destructive calls check who asks ---------------------------------------------------- */

static void test_only_the_owner_unmounts_a_segment(void **state)
{
    mc_master_t m;
    start_master(&m, "unmount", NULL);
    assert_int_equal(segment_call(&m, MC_RPC_MOUNT_SEGMENT, "owner", "seg-1", 64 * MIB), 0);
    assert_int_equal(segment_call(&m, MC_RPC_UNMOUNT_SEGMENT, "", "seg-1", 0),
                     MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(segment_call(&m, MC_RPC_UNMOUNT_SEGMENT, "intruder", "seg-1", 0),
                     MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc_master_metric(&m, "master_segment_count"), 1);
    assert_int_equal(segment_call(&m, MC_RPC_UNMOUNT_SEGMENT, "owner", "seg-1", 0), 0);
    assert_int_equal(mc_master_metric(&m, "master_segment_count"), 0);
    stop_master(&m);
}

static void test_remove_all_and_by_regex_need_a_live_client_and_are_audited(void **state)
{
    mc_master_t m;
    mc_holder_t h;
    start_master(&m, "audit", NULL);
    assert_int_equal(mc_holder_start(&h, &m, "64MB", NULL, NULL, 20000), 0);
    mc_store_t *s = mc_test_client(&m, 1, 0);
    assert_non_null(s);
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof(key), "audit/%d", i);
        assert_int_equal(mc_store_put(s, key, "v", 1, NULL), 0);
    }
    int64_t n = -1;
    assert_int_equal(remove_call(&m, "", NULL, &n), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(remove_call(&m, "stranger", NULL, &n), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(remove_call(&m, "stranger", "^audit/", &n), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_metric(&m, "master_key_count"), 3);
    /* Our own client presents its id: served. */
    assert_int_equal(mc_store_remove_by_regex(s, "^audit/0$", 1), 1);
    assert_int_equal(mc_store_remove_all(s, 1), 2);
    char *log = master_log("audit");
    assert_non_null(strstr(log, "audit: RemoveAll (force) from 127.0.0.1:"));
    assert_non_null(strstr(log, "refused: client id \"stranger\" is not a live client"));
    assert_non_null(strstr(log, "removed 2 objects"));
    assert_non_null(strstr(log, "removed 1 objects"));
    free(log);
    mc_store_close(s);
    mc_store_free(s);
    stop_holder(&h);
    stop_master(&m);
}

static void test_mounts_without_a_client_or_above_the_size_limit_are_refused(void **state)
{
    const char *flags[] = {"--max_segment_size=1GB", NULL};
    mc_master_t m;
    start_master(&m, "mount", flags);
    assert_int_equal(segment_call(&m, MC_RPC_MOUNT_SEGMENT, "", "seg-anon", 64 * MIB),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(segment_call(&m, MC_RPC_MOUNT_SEGMENT, "c", "seg-huge", 1ull << 40),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_metric(&m, "master_mount_refused_total"), 1);
    assert_int_equal(segment_call(&m, MC_RPC_MOUNT_SEGMENT, "c", "seg-ok", 1ull << 30), 0);
    assert_int_equal(mc_master_metric(&m, "master_segment_count"), 1);
    stop_master(&m);
}

/* ---- main --------------------------------------------------------------------------------- */

/* utime + stime of a process, in clock ticks (/proc/pid/stat fields 14 and 15). */
static long long proc_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* after the command name, which may hold spaces */
    assert_non_null(p);
    long long utime = -1, stime = -1;
    assert_int_equal(
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &utime, &stime), 2);
    return utime + stime;
}

/* Voluntary context switches of every thread of a process (/proc/pid/task/tid/status): a thread
 * that blocks (epoll_wait with a timeout) makes one each time; a spinning one, polling with a
 * zero timeout and sched_yield (an involuntary switch), makes none. */
static long long proc_voluntary_switches(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    long long sum = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char status[300], line[256];
        snprintf(status, sizeof(status), "/proc/%d/task/%s/status", (int)pid, e->d_name);
        FILE *f = fopen(status, "r");
        long long v;
        while (f && fgets(line, sizeof(line), f))
            if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1)
                sum += v;
        if (f)
            fclose(f);
    }
    closedir(d);
    return sum;
}

/* Threads of pid in state R now. */
static int proc_running_threads(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char stat[300], buf[512];
        snprintf(stat, sizeof(stat), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
        FILE *f = e->d_name[0] == '.' ? NULL : fopen(stat, "r");
        size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')');
        n += rp && rp[1] == ' ' && rp[2] == 'R';
    }
    if (d)
        closedir(d);
    return n;
}

/*
 * The master's own contention test (mc_cpus_contended: more runnable threads than CPUs, its
 * checking thread included), as the master sees it: this thread and the master's own runnable
 * threads (a spinning worker is always runnable) are taken off what /proc/loadavg counts, and
 * one master thread (the one checking) put back.
 */
static int cpus_contended_for(pid_t master)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l1, l5, l15;
    long running = 0, total = 0;
    int ok = f && fscanf(f, "%lf %lf %lf %ld/%ld", &l1, &l5, &l15, &running, &total) == 5;
    if (f)
        fclose(f);
    long others = running - 1 - proc_running_threads(master);
    return ok && others + 1 > sysconf(_SC_NPROCESSORS_ONLN);
}

enum {
    SPIN_REQUESTS = 3000,
    /* A burst that did not spin must have seen contention at this share of samples at least,
     * besides the master's own count of requests it did not spin after: the master re-checks
     * every 100 ms and spins again once a check finds the CPUs free, so a whole burst without
     * spinning means contention much of the time, not at one sample. */
    CONTENDED_PCT = 10,
};

/* SPIN_REQUESTS ServiceReady calls, one at a time; the master's voluntary switches meanwhile.
 * *contended_pct: the share of samples (every 8th request), in percent, at which the host had
 * more runnable threads than CPUs as the master would count them. */
static long long switches_for_a_burst(const mc_master_t *m, int fd, int *contended_pct)
{
    long long before = proc_voluntary_switches(m->pid);
    int samples = 0, contended = 0;
    for (uint64_t id = 1; id <= SPIN_REQUESTS; id++) {
        service_ready_on(fd, id);
        if (id % 8 == 0) {
            samples++;
            contended += cpus_contended_for(m->pid);
        }
    }
    *contended_pct = 100 * contended / samples;
    return proc_voluntary_switches(m->pid) - before;
}

/*
 * With --rpc_spin_us the worker keeps polling for the next frame instead of blocking, so a burst
 * of back-to-back requests costs the master about no voluntary switches, against about one per
 * request without it (measured on a master with --rpc_spin_us=0 alongside). The master turns the
 * spin off while the host has more runnable threads than CPUs (under ctest -j, usually): a burst
 * that did not spin must have been skipped by the master for that reason after most of its
 * requests (master_rpc_spin_skipped_total) and seen contended here too, else it is retried
 * (contention comes and goes) and, three times without either, fails.
 */
static void test_the_rpc_spin_polls_between_requests_and_ends_when_they_stop(void **state)
{
    (void)state;
    const char *off_flags[] = {"--rpc_spin_us=0", NULL};
    mc_master_t off;
    start_master(&off, "spin-off", off_flags);
    int fd = connect_master(&off);
    int off_pct = 0;
    long long blocking = switches_for_a_burst(&off, fd, &off_pct);
    close(fd);
    stop_master(&off);
    printf("no spin: %lld voluntary switches for %d requests (CPUs contended at %d%% of samples)\n",
           blocking, SPIN_REQUESTS, off_pct);
    /* The measure can tell the two apart (about one switch per request; fewer when the next
     * request is already there as the worker would sleep). */
    assert_true(blocking >= SPIN_REQUESTS / 8);

    const char *on_flags[] = {"--rpc_spin_us=1000", NULL};
    mc_master_t on;
    start_master(&on, "spin-on", on_flags);
    fd = connect_master(&on);
    int spun = 0, contended = 0;
    for (int attempt = 0; attempt < 3 && !spun && !contended; attempt++) {
        int pct = 0;
        int64_t skipped = mc_master_metric(&on, "master_rpc_spin_skipped_total");
        long long n = switches_for_a_burst(&on, fd, &pct);
        skipped = mc_master_metric(&on, "master_rpc_spin_skipped_total") - skipped;
        spun = n < blocking / 4;
        /* Not spun for contention: the master's own check said so after most requests (it
         * counts them), and the host was seen contended too (its samples and the master's
         * checks fall at different moments, so the share seen here is lower). */
        contended = skipped >= SPIN_REQUESTS / 2 && pct >= CONTENDED_PCT;
        printf("spin 1000 us: %lld voluntary switches for %d requests, CPUs contended at %d%% of "
               "samples, the master skipped the spin after %lld (%s)\n",
               n, SPIN_REQUESTS, pct, (long long)skipped,
               spun        ? "spun"
               : contended ? "not spun: CPUs contended"
                           : "not spun");
    }
    assert_true(spun || contended);
    /* ... and it ends when the requests stop: the widest window, so a spin that never stopped
     * would burn the whole idle 2 s (~2 * hz ticks). */
    long long idle_start = proc_cpu_ticks(on.pid);
    usleep(2 * 1000 * 1000);
    long long idle = proc_cpu_ticks(on.pid) - idle_start;
    long hz = sysconf(_SC_CLK_TCK);
    printf("master CPU: %lld ticks in 2 s idle after the bursts (%ld ticks/s)\n", idle, hz);
    assert_true(idle < hz / 2);
    service_ready_on(fd, 5000); /* and it still answers after sleeping */
    close(fd);
    stop_master(&on);

    mc_master_t bad;
    const char *too_wide[] = {"--rpc_spin_us=1001", NULL};
    assert_int_not_equal(mc_master_start(&bad, 0, too_wide), 0);
}

static int teardown(void **state)
{
    mc_cluster_kill_all(); /* whatever a failed test left running */
    return 0;
}

#define LIMIT_TEST(f) cmocka_unit_test_teardown(f, teardown)

/* Under AddressSanitizer freed memory sits in a quarantine (256 MiB by default) instead of being
 * reused, which the RSS checks would count; the masters this test starts run without it. */
static void asan_without_quarantine(void)
{
#ifdef __SANITIZE_ADDRESS__
    const char *old = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=0", old ? old : "",
             old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    asan_without_quarantine();
    atexit(mc_cluster_kill_all);
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        LIMIT_TEST(test_evil_regex_fails_fast_and_the_master_keeps_serving),
        LIMIT_TEST(test_a_frame_of_empty_keys_is_refused_without_allocating),
        LIMIT_TEST(test_connections_beyond_the_cap_are_refused_and_the_others_keep_working),
        LIMIT_TEST(test_one_peer_holds_a_quarter_of_the_connections_at_most),
        LIMIT_TEST(test_a_stalled_partial_frame_is_closed_and_an_idle_connection_is_not),
        LIMIT_TEST(test_idle_connections_are_closed_and_store_clients_carry_on),
        LIMIT_TEST(test_partial_frames_are_bounded_in_total),
        LIMIT_TEST(test_query_key_answers_json_for_a_key_that_is_not_utf8),
        LIMIT_TEST(test_embedded_metadata_server_takes_its_limits_from_the_master_flags),
        LIMIT_TEST(test_only_the_owner_unmounts_a_segment),
        LIMIT_TEST(test_remove_all_and_by_regex_need_a_live_client_and_are_audited),
        LIMIT_TEST(test_mounts_without_a_client_or_above_the_size_limit_are_refused),
        LIMIT_TEST(test_the_rpc_spin_polls_between_requests_and_ends_when_they_stop),
    };
    int failed = cmocka_run_group_tests_name("master_limits", tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_dir);
    return failed;
}
