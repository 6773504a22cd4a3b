/*
 * test_master.c — integration tests of the real mooncake_master binary.
 *
 * Each test starts the program (MC_BUILD_DIR/tools/mooncake_master) on loopback with its stderr
 * in a log file (mc_proc_start_logged), learns the bound ports from its start-up line, and talks
 * to it the way clients do: RPC frames with store.proto bodies through mc_rpc_call, hand-made bad
 * frames over raw sockets, and HTTP/1.1 over raw sockets to the admin and metadata servers. Every
 * master is stopped with SIGTERM (or SIGINT) and must exit 0. Command-line and config-file
 * behaviour is checked from exit status, stderr and the start-up line.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "mooncake/errors.h"
#include "proc.h"
#include "frame.h"
#include "net.h"
#include "rpc.h"
#include "store.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"
#define START_MARKER "Master service started on port "
#define START_TIMEOUT_MS 20000
#define EXIT_TIMEOUT_MS 10000
#define IO_TIMEOUT_MS 10000
#define HTTP_MAX (1 << 20)
#define LOG_MAX (1 << 20)
#define LOOPBACK "127.0.0.1"
#define CLIENT_ID "client-under-test"
#define SEGMENT_ID "segment-under-test"
#define SEGMENT_SIZE (64ull << 20)
#define SEGMENT_BASE 0x10000000ull
#define MAX_ARGS 48

extern char **environ;

static char tmp_dir[] = "/tmp/mc_test_master.XXXXXX";
static int log_seq;

/* ---- helpers: files and processes -------------------------------------------------------- */

static void tmp_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmp_dir, name);
}

/* The whole file as a malloc'd string ("" when absent). */
static char *read_file(const char *path)
{
    char *buf = calloc(1, LOG_MAX + 1);
    assert_non_null(buf);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, LOG_MAX, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

typedef struct run_result {
    int status;
    char *out; /* stdout */
    char *err; /* stderr */
} run_result_t;

/* Runs mooncake_master with args (NULL-terminated) to completion; fails the test on a hang. */
static void run_to_exit(const char *const *args, run_result_t *r)
{
    char out_path[256], err_path[256];
    char *argv[MAX_ARGS];
    int argc = 0;
    tmp_path(out_path, sizeof(out_path), "run.out");
    tmp_path(err_path, sizeof(err_path), "run.err");
    argv[argc++] = (char *)MASTER_BIN;
    for (size_t i = 0; args[i] && argc < MAX_ARGS - 1; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path, O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, MASTER_BIN, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    uint64_t deadline = mc_now_ms() + EXIT_TIMEOUT_MS;
    while (waitpid(pid, &r->status, WNOHANG) != pid) {
        if (mc_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &r->status, 0);
            fail_msg("mooncake_master did not exit");
        }
        usleep(10000);
    }
    r->out = read_file(out_path);
    r->err = read_file(err_path);
}

static void run_result_free(run_result_t *r)
{
    free(r->out);
    free(r->err);
}

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- helpers: a running master ----------------------------------------------------------- */

typedef struct master {
    mc_proc_t proc;
    char log_path[256];
    int rpc_port;
    int metrics_port;
    int http_port; /* -1 when the metadata server is off */
    mc_rpc_client_t *rpc;
} master_t;

/*
 * Masters the running test started and has not stopped. A failed assertion leaves the test
 * without reaching stop_master (and its master_t was on the abandoned stack), so copies are kept
 * here and the per-test teardown kills whatever is left.
 */
typedef struct live_master {
    int used;
    mc_proc_t proc;
    mc_rpc_client_t *rpc;
} live_master_t;

static live_master_t live[4];

static void track(const master_t *m)
{
    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
        if (!live[i].used) {
            live[i] = (live_master_t){1, m->proc, m->rpc};
            return;
        }
    }
    fail_msg("more masters at once than the test registry holds");
}

static void untrack(const master_t *m)
{
    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
        if (live[i].used && live[i].proc.pid == m->proc.pid)
            live[i].used = 0;
    }
}

static int kill_leftover_masters(void **state)
{
    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
        if (!live[i].used)
            continue;
        mc_rpc_client_destroy(live[i].rpc);
        mc_proc_stop(&live[i].proc, SIGKILL, EXIT_TIMEOUT_MS);
        live[i].used = 0;
    }
    return 0;
}

/* The integer after `key` in the start-up line, or fails. */
static int start_line_int(const master_t *m, const char *key)
{
    const char *p = strstr(m->proc.ready_line, key);
    if (!p) {
        fail_msg("no %s in the start-up line: %s", key, m->proc.ready_line);
        return -1;
    }
    return atoi(p + strlen(key));
}

/*
 * Starts the master with the RPC server on a free loopback port and the admin server on an
 * ephemeral loopback port (both overridable: later flags win), plus `extra` (NULL-terminated).
 */
static void start_master(master_t *m, const char *const *extra)
{
    char rpc_flag[32];
    char *argv[MAX_ARGS];
    int argc = 0;
    memset(m, 0, sizeof(*m));
    snprintf(rpc_flag, sizeof(rpc_flag), "--rpc_port=%d", mc_test_free_port());
    argv[argc++] = (char *)MASTER_BIN;
    argv[argc++] = rpc_flag;
    argv[argc++] = (char *)"--rpc_address=" LOOPBACK;
    argv[argc++] = (char *)"--metrics_host=" LOOPBACK;
    argv[argc++] = (char *)"--metrics_port=0";
    argv[argc++] = (char *)"--rpc_thread_num=2";
    for (size_t i = 0; extra && extra[i] && argc < MAX_ARGS - 1; i++)
        argv[argc++] = (char *)extra[i];
    argv[argc] = NULL;

    char name[64];
    snprintf(name, sizeof(name), "master-%d.log", ++log_seq);
    tmp_path(m->log_path, sizeof(m->log_path), name);
    assert_int_equal(
        mc_proc_start_logged(&m->proc, argv, m->log_path, START_MARKER, START_TIMEOUT_MS), 0);
    track(m);
    m->rpc_port = start_line_int(m, START_MARKER);
    m->metrics_port = start_line_int(m, "metrics_port=");
    m->http_port = start_line_int(m, "http_metadata_server_port=");
    char addr[64];
    snprintf(addr, sizeof(addr), LOOPBACK ":%d", m->rpc_port);
    assert_int_equal(mc_rpc_client_create(addr, IO_TIMEOUT_MS, &m->rpc), 0);
    untrack(m);
    track(m); /* again, now with its RPC client */
}

/* Stops with sig; the master must exit 0. */
static void stop_master(master_t *m, int sig)
{
    untrack(m);
    mc_rpc_client_destroy(m->rpc);
    m->rpc = NULL;
    int status = mc_proc_stop(&m->proc, sig, EXIT_TIMEOUT_MS);
    if (exit_code(status) != 0) {
        char *log = read_file(m->log_path);
        fail_msg("mooncake_master exited with status 0x%x; log:\n%s", status, log);
    }
}

static char *master_log(const master_t *m)
{
    return read_file(m->log_path);
}

/* ---- helpers: RPC ------------------------------------------------------------------------ */

/* Packs msg, calls `opcode`, returns the malloc'd reply body. */
static uint8_t *call_raw(master_t *m, uint16_t opcode, const ProtobufCMessage *msg,
                         size_t *reply_len)
{
    size_t len = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    uint8_t *body = malloc(len ? len : 1);
    assert_non_null(body);
    if (msg)
        protobuf_c_message_pack(msg, body);
    uint8_t *reply = NULL;
    int rc = mc_rpc_call(m->rpc, opcode, body, len, &reply, reply_len);
    free(body);
    assert_int_equal(rc, 0);
    return reply;
}

static Mc__KeysResponse *call_keys(master_t *m, uint16_t opcode, const Mc__KeysRequest *req)
{
    size_t len;
    uint8_t *reply = call_raw(m, opcode, &req->base, &len);
    Mc__KeysResponse *resp = mc__keys_response__unpack(NULL, len, reply);
    free(reply);
    assert_non_null(resp);
    return resp;
}

/* A KeysRequest for `n` keys (sizes may be NULL). */
static void keys_request(Mc__KeysRequest *req, const char **keys, size_t n, uint64_t *sizes)
{
    Mc__KeysRequest init = MC__KEYS_REQUEST__INIT;
    *req = init;
    req->client_id = (char *)CLIENT_ID;
    req->keys = (char **)keys;
    req->n_keys = n;
    req->sizes = sizes;
    req->n_sizes = sizes ? n : 0;
}

/* One-key call; returns the response (caller frees) after checking it has one result. */
static Mc__KeysResponse *call_one(master_t *m, uint16_t opcode, const char *key, int force)
{
    const char *keys[] = {key};
    Mc__KeysRequest req;
    keys_request(&req, keys, 1, NULL);
    req.force = force;
    Mc__KeysResponse *resp = call_keys(m, opcode, &req);
    assert_int_equal(resp->code, 0);
    assert_int_equal(resp->n_results, 1);
    return resp;
}

static int call_one_code(master_t *m, uint16_t opcode, const char *key, int force)
{
    Mc__KeysResponse *resp = call_one(m, opcode, key, force);
    int code = resp->results[0]->code;
    mc__keys_response__free_unpacked(resp, NULL);
    return code;
}

static Mc__StatusResponse *call_segments(master_t *m, uint16_t opcode, Mc__Segment *seg)
{
    Mc__SegmentRequest req = MC__SEGMENT_REQUEST__INIT;
    Mc__Segment *segs[] = {seg};
    req.client_id = (char *)CLIENT_ID;
    req.segments = segs;
    req.n_segments = 1;
    size_t len;
    uint8_t *reply = call_raw(m, opcode, &req.base, &len);
    Mc__StatusResponse *resp = mc__status_response__unpack(NULL, len, reply);
    free(reply);
    assert_non_null(resp);
    return resp;
}

static void mount_segment(master_t *m, const char *name)
{
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = (char *)SEGMENT_ID;
    seg.name = (char *)name;
    seg.base_address = SEGMENT_BASE;
    seg.size = SEGMENT_SIZE;
    seg.protocol = (char *)"tcp";
    Mc__StatusResponse *resp = call_segments(m, MC_RPC_MOUNT_SEGMENT, &seg);
    assert_int_equal(resp->code, 0);
    mc__status_response__free_unpacked(resp, NULL);
}

/* Puts key with `size` bytes: PutStart then PutEnd; checks the one replica is in our segment. */
static void put_object(master_t *m, const char *key, uint64_t size, const char *segment_name)
{
    const char *keys[] = {key};
    uint64_t sizes[] = {size};
    Mc__KeysRequest req;
    keys_request(&req, keys, 1, sizes);
    Mc__KeysResponse *resp = call_keys(m, MC_RPC_PUT_START, &req);
    assert_int_equal(resp->code, 0);
    assert_int_equal(resp->n_results, 1);
    assert_int_equal(resp->results[0]->code, 0);
    assert_int_equal(resp->results[0]->n_replicas, 1);
    const Mc__Replica *r = resp->results[0]->replicas[0];
    assert_string_equal(r->segment_name, segment_name);
    assert_int_equal(r->type, 0);
    assert_int_equal(r->size, size);
    assert_true(r->address >= SEGMENT_BASE && r->address + size <= SEGMENT_BASE + SEGMENT_SIZE);
    mc__keys_response__free_unpacked(resp, NULL);
    assert_int_equal(call_one_code(m, MC_RPC_PUT_END, key, 0), 0);
}

/* ---- helpers: raw sockets, frames and HTTP ----------------------------------------------- */

static int connect_loopback(int port)
{
    int fd = mc_test_connect(LOOPBACK, port, IO_TIMEOUT_MS);
    assert_true(fd >= 0);
    return fd;
}

static int local_port(int fd)
{
    struct sockaddr_in sin = {0};
    socklen_t len = sizeof(sin);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

/* Sends a SERVICE_READY frame on fd and checks the reply carries the same id. */
static void raw_service_ready(int fd, uint64_t id)
{
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(MC_RPC_SERVICE_READY, id, 0, 0, hdr);
    assert_int_equal(mc_net_send_all(fd, hdr, sizeof(hdr)), 0);
    uint8_t rh[MC_FRAME_HEADER_SIZE];
    assert_int_equal(mc_net_recv_all(fd, rh, sizeof(rh)), 0);
    mc_frame_header_t h;
    assert_int_equal(mc_frame_decode(rh, MC_RPC_MAX_BODY, &h), 0);
    assert_int_equal(h.request_id, id);
    assert_int_equal(h.opcode, MC_RPC_SERVICE_READY | MC_RPC_REPLY);
    uint8_t body[256];
    assert_true(h.body_len <= sizeof(body));
    assert_int_equal(mc_net_recv_all(fd, body, h.body_len), 0);
    Mc__ServiceReadyResponse *r = mc__service_ready_response__unpack(NULL, h.body_len, body);
    assert_non_null(r);
    assert_string_equal(r->version, MC_VERSION_STRING);
    mc__service_ready_response__free_unpacked(r, NULL);
}

/* 1 when the server closes fd (EOF or reset) within the I/O timeout without sending anything. */
static int closed_by_peer(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* GET path on 127.0.0.1:port; returns the status and a malloc'd body. */
static int http_get(int port, const char *path, char **body)
{
    int fd = connect_loopback(port);
    char req[1024];
    int len = snprintf(req, sizeof(req),
                       "GET %s HTTP/1.1\r\nHost: " LOOPBACK "\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(mc_net_send_all(fd, req, (size_t)len), 0);
    char *resp = calloc(1, HTTP_MAX + 1);
    assert_non_null(resp);
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, resp + got, HTTP_MAX - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        assert_true(got < HTTP_MAX);
    }
    close(fd);
    int status = 0;
    assert_int_equal(sscanf(resp, "HTTP/1.%*d %d", &status), 1);
    const char *b = strstr(resp, "\r\n\r\n");
    assert_non_null(b);
    *body = strdup(b + 4);
    free(resp);
    return status;
}

/*
 * The IPv4 address (host order) of the socket listening on `port`, from /proc/net/tcp; -1 when
 * none. The kernel lists addresses as the in-memory u32 in hex.
 */
static int64_t listener_address(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    assert_non_null(f);
    char line[512];
    int64_t found = -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned int addr, lport, state;
        if (sscanf(line, " %*d: %8X:%4X %*8X:%*4X %2X", &addr, &lport, &state) != 3)
            continue;
        if ((int)lport == port && state == 0x0A) {
            found = ntohl(addr);
            break;
        }
    }
    fclose(f);
    return found;
}

/* ---- command line ------------------------------------------------------------------------ */

static void test_unknown_flag_exits_1_with_one_line(void **state)
{
    const char *args[] = {"--no_such_flag=1", NULL};
    run_result_t r;
    run_to_exit(args, &r);
    assert_int_equal(exit_code(r.status), 1);
    assert_int_equal(count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "no_such_flag"));
    run_result_free(&r);
}

static void test_help_exits_0_and_lists_the_flags(void **state)
{
    const char *args[] = {"--help", NULL};
    run_result_t r;
    run_to_exit(args, &r);
    assert_int_equal(exit_code(r.status), 0);
    assert_non_null(strstr(r.out, "--rpc_port"));
    assert_non_null(strstr(r.out, "--eviction_high_watermark_ratio"));
    assert_non_null(strstr(r.out, "--distributed_root_dir"));
    run_result_free(&r);
}

static void test_version_prints_the_version(void **state)
{
    const char *args[] = {"--version", NULL};
    run_result_t r;
    run_to_exit(args, &r);
    assert_int_equal(exit_code(r.status), 0);
    assert_non_null(strstr(r.out, "mooncake_master " MC_VERSION_STRING));
    run_result_free(&r);
}

static void test_out_of_range_values_are_refused_with_one_line(void **state)
{
    const char *cases[][2] = {
        {"--eviction_ratio=1.5", "eviction_ratio"},
        {"--eviction_high_watermark_ratio=-0.1", "eviction_high_watermark_ratio"},
        {"--offload-backend=s3", "offload"},
        {"--distributed-fs-type=nfs", "distributed"},
        {"--rpc_port=70000", "rpc_port"},
        {"--default_kv_lease_ttl=soon", "default_kv_lease_ttl"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *args[] = {cases[i][0], NULL};
        run_result_t r;
        run_to_exit(args, &r);
        assert_int_equal(exit_code(r.status), 1);
        assert_int_equal(count_lines(r.err), 1);
        assert_non_null(strstr(r.err, cases[i][1]));
        run_result_free(&r);
    }
}

/* docs/master-flags.md: refused flags at their defaults start silently, no-op flags warn once. */
static void test_ignored_upstream_flags_are_accepted_with_a_warning(void **state)
{
    const char *extra[] = {"--memory_allocator=offset", "--enable_ha=false", "--pod_name=x", NULL};
    master_t m;
    start_master(&m, extra);
    char *log = master_log(&m);
    assert_non_null(strstr(log, "--pod_name is accepted for compatibility and has no effect"));
    assert_null(strstr(log, "--enable_ha"));
    assert_null(strstr(log, "--memory_allocator"));
    free(log);
    stop_master(&m, SIGTERM);
}

static void test_the_guides_command_line_starts(void **state)
{
    char http_port[48];
    snprintf(http_port, sizeof(http_port), "--http_metadata_server_port=%d", mc_test_free_port());
    const char *extra[] = {"--enable_offload=true",
                           "--offload-backend",
                           "distributed",
                           "--distributed-fs-type",
                           "daos",
                           "--distributed-root-dir",
                           "/mnt/mass/mooncake",
                           "--enable_http_metadata_server=true",
                           "--http_metadata_server_host=0.0.0.0",
                           http_port,
                           NULL};
    master_t m;
    start_master(&m, extra);
    const char *line = m.proc.ready_line;
    assert_non_null(strstr(line, "enable_offload=true"));
    assert_non_null(strstr(line, "offload_backend=distributed"));
    assert_non_null(strstr(line, "distributed_fs_type=daos"));
    assert_non_null(strstr(line, "distributed_root_dir=/mnt/mass/mooncake"));
    assert_non_null(strstr(line, "enable_http_metadata_server=true"));
    assert_int_equal(m.http_port, atoi(http_port + strlen("--http_metadata_server_port=")));
    char *body = NULL;
    assert_int_equal(http_get(m.http_port, "/health", &body), 200);
    assert_non_null(strstr(body, "OK"));
    free(body);
    assert_int_equal(listener_address(m.http_port), INADDR_ANY);
    stop_master(&m, SIGTERM);
}

static void test_deprecated_port_flag_sets_the_rpc_port(void **state)
{
    char port_flag[32];
    int port = mc_test_free_port();
    snprintf(port_flag, sizeof(port_flag), "--port=%d", port);
    const char *extra[] = {"--rpc_port=0", port_flag, NULL};
    master_t m;
    start_master(&m, extra);
    assert_int_equal(m.rpc_port, port);
    stop_master(&m, SIGTERM);
}

static void test_rpc_port_in_use_exits_1_naming_the_address(void **state)
{
    int bound = 0;
    int fd = mc_net_listen_tcp(LOOPBACK, 0, 4, &bound);
    assert_true(fd >= 0);
    char port_flag[32], expect[64];
    snprintf(port_flag, sizeof(port_flag), "--rpc_port=%d", bound);
    snprintf(expect, sizeof(expect), LOOPBACK ":%d", bound);
    const char *args[] = {port_flag, "--rpc_address=" LOOPBACK, "--metrics_port=0", NULL};
    run_result_t r;
    run_to_exit(args, &r);
    close(fd);
    assert_int_equal(exit_code(r.status), 1);
    assert_non_null(strstr(r.err, expect));
    assert_null(strstr(r.err, START_MARKER));
    run_result_free(&r);
}

static void test_metrics_port_in_use_exits_1_naming_the_address(void **state)
{
    int bound = 0;
    int fd = mc_net_listen_tcp(LOOPBACK, 0, 4, &bound);
    assert_true(fd >= 0);
    char rpc_flag[32], metrics_flag[32], expect[64];
    snprintf(rpc_flag, sizeof(rpc_flag), "--rpc_port=%d", mc_test_free_port());
    snprintf(metrics_flag, sizeof(metrics_flag), "--metrics_port=%d", bound);
    snprintf(expect, sizeof(expect), LOOPBACK ":%d", bound);
    const char *args[] = {rpc_flag, metrics_flag, "--metrics_host=" LOOPBACK, NULL};
    run_result_t r;
    run_to_exit(args, &r);
    close(fd);
    assert_int_equal(exit_code(r.status), 1);
    assert_non_null(strstr(r.err, expect));
    run_result_free(&r);
}

static void test_metadata_port_in_use_exits_1_naming_the_address(void **state)
{
    int bound = 0;
    int fd = mc_net_listen_tcp(LOOPBACK, 0, 4, &bound);
    assert_true(fd >= 0);
    char rpc_flag[32], http_flag[48], expect[64];
    snprintf(rpc_flag, sizeof(rpc_flag), "--rpc_port=%d", mc_test_free_port());
    snprintf(http_flag, sizeof(http_flag), "--http_metadata_server_port=%d", bound);
    snprintf(expect, sizeof(expect), LOOPBACK ":%d", bound);
    const char *args[] = {rpc_flag,
                          "--rpc_address=" LOOPBACK,
                          "--metrics_port=0",
                          "--enable_http_metadata_server=true",
                          "--http_metadata_server_host=" LOOPBACK,
                          http_flag,
                          NULL};
    run_result_t r;
    run_to_exit(args, &r);
    close(fd);
    assert_int_equal(exit_code(r.status), 1);
    assert_non_null(strstr(r.err, expect));
    assert_null(strstr(r.err, START_MARKER));
    run_result_free(&r);
}

static void test_sigint_exits_0(void **state)
{
    master_t m;
    start_master(&m, NULL);
    stop_master(&m, SIGINT);
}

static void test_log_dir_receives_the_log(void **state)
{
    char dir[256], flag[300], file[320];
    tmp_path(dir, sizeof(dir), "logs");
    snprintf(flag, sizeof(flag), "--log_dir=%s", dir);
    snprintf(file, sizeof(file), "%s/mooncake_master.INFO", dir);
    const char *extra[] = {flag, NULL};
    master_t m;
    start_master(&m, extra);
    stop_master(&m, SIGTERM);
    char *log = read_file(file);
    assert_non_null(strstr(log, START_MARKER));
    assert_non_null(strstr(log, "Master service stopped"));
    free(log);
}

/* ---- addresses --------------------------------------------------------------------------- */

static void test_loopback_addresses_are_honoured(void **state)
{
    const char *extra[] = {"--enable_http_metadata_server", "--http_metadata_server_host=127.0.0.1",
                           "--http_metadata_server_port=0", NULL};
    master_t m;
    start_master(&m, extra);
    assert_true(m.http_port > 0);
    assert_int_equal(listener_address(m.rpc_port), INADDR_LOOPBACK);
    assert_int_equal(listener_address(m.metrics_port), INADDR_LOOPBACK);
    assert_int_equal(listener_address(m.http_port), INADDR_LOOPBACK);
    stop_master(&m, SIGTERM);
}

static void test_default_rpc_address_binds_every_interface(void **state)
{
    const char *extra[] = {"--rpc_address=0.0.0.0", NULL};
    master_t m;
    start_master(&m, extra);
    assert_int_equal(listener_address(m.rpc_port), INADDR_ANY);
    assert_non_null(strstr(m.proc.ready_line, "rpc_address=0.0.0.0"));
    assert_non_null(strstr(m.proc.ready_line, "enable_http_metadata_server=false"));
    stop_master(&m, SIGTERM);
}

/* ---- config files ------------------------------------------------------------------------ */

static void test_json_config_applies_and_the_command_line_wins(void **state)
{
    char path[256], flag[300];
    tmp_path(path, sizeof(path), "master.json");
    write_file(path, "{\"eviction_ratio\": 0.2, \"default_kv_lease_ttl\": 5000,\n"
                     " \"client_live_ttl_sec\": 33, \"allow_evict_soft_pinned_objects\": false,\n"
                     " \"max_threads\": 3, \"memory_allocator\": \"offset\"}\n");
    snprintf(flag, sizeof(flag), "--config_path=%s", path);
    const char *extra[] = {flag, "--eviction_ratio=0.1", NULL};
    master_t m;
    start_master(&m, extra);
    const char *line = m.proc.ready_line;
    assert_non_null(strstr(line, "eviction_ratio=0.1,"));
    assert_non_null(strstr(line, "default_kv_lease_ttl=5000,"));
    assert_non_null(strstr(line, "client_ttl=33,"));
    assert_non_null(strstr(line, "allow_evict_soft_pinned_objects=false"));
    assert_non_null(strstr(line, "max_threads=3,"));
    char *body = NULL;
    assert_int_equal(http_get(m.metrics_port, "/metrics/summary", &body), 200);
    assert_non_null(strstr(body, "eviction_ratio=0.1,"));
    assert_non_null(strstr(body, "client_ttl=33,"));
    free(body);
    stop_master(&m, SIGTERM);
}

static void test_yaml_config_applies(void **state)
{
    char path[256], flag[300];
    tmp_path(path, sizeof(path), "master.yaml");
    write_file(path, "# master settings\n"
                     "eviction_high_watermark_ratio: 0.75\n"
                     "default_kv_lease_ttl: 2s\n"
                     "client_live_ttl_sec: 21\n"
                     "enable_offload: true\n");
    snprintf(flag, sizeof(flag), "--config_path=%s", path);
    const char *extra[] = {flag, "--default_kv_lease_ttl=7000", NULL};
    master_t m;
    start_master(&m, extra);
    const char *line = m.proc.ready_line;
    assert_non_null(strstr(line, "eviction_high_watermark_ratio=0.75,"));
    assert_non_null(strstr(line, "default_kv_lease_ttl=7000,"));
    assert_non_null(strstr(line, "client_ttl=21,"));
    assert_non_null(strstr(line, "enable_offload=true"));
    stop_master(&m, SIGTERM);
}

static void test_config_with_unknown_keys_is_refused_naming_them(void **state)
{
    char path[256], flag[300];
    tmp_path(path, sizeof(path), "bad.json");
    write_file(path, "{\"eviction_ratio\": 0.2, \"no_such_key\": 1, \"other_key\": \"x\"}");
    snprintf(flag, sizeof(flag), "--config_path=%s", path);
    const char *args[] = {flag, NULL};
    run_result_t r;
    run_to_exit(args, &r);
    assert_int_equal(exit_code(r.status), 1);
    assert_int_equal(count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "no_such_key"));
    assert_non_null(strstr(r.err, "other_key"));
    run_result_free(&r);
}

static void test_config_with_a_bad_value_is_refused(void **state)
{
    char path[256], flag[300];
    tmp_path(path, sizeof(path), "bad.yaml");
    write_file(path, "eviction_ratio: lots\n");
    snprintf(flag, sizeof(flag), "--config_path=%s", path);
    const char *args[] = {flag, NULL};
    run_result_t r;
    run_to_exit(args, &r);
    assert_int_equal(exit_code(r.status), 1);
    assert_int_equal(count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "eviction_ratio"));
    run_result_free(&r);
}

/* ---- RPC --------------------------------------------------------------------------------- */

static void test_service_ready_returns_the_version(void **state)
{
    master_t m;
    start_master(&m, NULL);
    size_t len;
    uint8_t *reply = call_raw(&m, MC_RPC_SERVICE_READY, NULL, &len);
    Mc__ServiceReadyResponse *r = mc__service_ready_response__unpack(NULL, len, reply);
    free(reply);
    assert_non_null(r);
    assert_int_equal(r->code, 0);
    assert_string_equal(r->version, MC_VERSION_STRING);
    mc__service_ready_response__free_unpacked(r, NULL);
    stop_master(&m, SIGTERM);
}

static int ping_status(master_t *m)
{
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = (char *)CLIENT_ID;
    size_t len;
    uint8_t *reply = call_raw(m, MC_RPC_PING, &req.base, &len);
    Mc__PingResponse *r = mc__ping_response__unpack(NULL, len, reply);
    free(reply);
    assert_non_null(r);
    assert_int_equal(r->code, 0);
    int status = r->client_status;
    mc__ping_response__free_unpacked(r, NULL);
    return status;
}

static void test_ping_reports_remount_until_the_client_mounts(void **state)
{
    master_t m;
    start_master(&m, NULL);
    assert_int_equal(ping_status(&m), 2); /* NEED_REMOUNT: unknown client */
    mount_segment(&m, LOOPBACK ":17001");
    assert_int_equal(ping_status(&m), 1); /* OK */
    stop_master(&m, SIGTERM);
}

static void test_put_get_exist_remove_round_trip(void **state)
{
    const char *extra[] = {"--default_kv_lease_ttl=3s", NULL};
    const char *seg = LOOPBACK ":17002";
    master_t m;
    start_master(&m, extra);
    mount_segment(&m, seg);
    put_object(&m, "alpha", 4096, seg);
    put_object(&m, "beta", 100, seg);

    /* A second put of a complete key is refused by the master. */
    const char *keys[] = {"alpha"};
    uint64_t sizes[] = {4096};
    Mc__KeysRequest req;
    keys_request(&req, keys, 1, sizes);
    Mc__KeysResponse *resp = call_keys(&m, MC_RPC_PUT_START, &req);
    assert_int_equal(resp->results[0]->code, MC_ERR_OBJECT_ALREADY_EXISTS);
    mc__keys_response__free_unpacked(resp, NULL);

    resp = call_one(&m, MC_RPC_GET_REPLICA_LIST, "alpha", 0);
    assert_int_equal(resp->results[0]->code, 0);
    assert_int_equal(resp->results[0]->size, 4096);
    assert_int_equal(resp->lease_ttl_ms, 3000);
    assert_int_equal(resp->results[0]->n_replicas, 1);
    assert_string_equal(resp->results[0]->replicas[0]->segment_name, seg);
    assert_int_equal(resp->results[0]->replicas[0]->status, 3); /* COMPLETE */
    mc__keys_response__free_unpacked(resp, NULL);
    assert_int_equal(call_one_code(&m, MC_RPC_GET_REPLICA_LIST, "missing", 0),
                     MC_ERR_OBJECT_NOT_FOUND);

    const char *exist_keys[] = {"alpha", "missing", "beta"};
    keys_request(&req, exist_keys, 3, NULL);
    resp = call_keys(&m, MC_RPC_EXIST_KEY, &req);
    assert_int_equal(resp->n_results, 3);
    assert_true(resp->results[0]->exists);
    assert_false(resp->results[1]->exists);
    assert_true(resp->results[2]->exists);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(resp->results[i]->code, 0);
    mc__keys_response__free_unpacked(resp, NULL);

    /* Leased by the reads above: a plain remove waits for the lease, a forced one does not. */
    assert_int_equal(call_one_code(&m, MC_RPC_REMOVE, "alpha", 0), MC_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(call_one_code(&m, MC_RPC_REMOVE, "alpha", 1), 0);
    assert_int_equal(call_one_code(&m, MC_RPC_REMOVE, "alpha", 1), MC_ERR_OBJECT_NOT_FOUND);
    resp = call_one(&m, MC_RPC_EXIST_KEY, "alpha", 0);
    assert_false(resp->results[0]->exists);
    mc__keys_response__free_unpacked(resp, NULL);

    /* PutRevoke drops an unfinished put. */
    const char *g[] = {"gamma"};
    uint64_t gs[] = {10};
    keys_request(&req, g, 1, gs);
    resp = call_keys(&m, MC_RPC_PUT_START, &req);
    assert_int_equal(resp->results[0]->code, 0);
    mc__keys_response__free_unpacked(resp, NULL);
    assert_int_equal(call_one_code(&m, MC_RPC_PUT_REVOKE, "gamma", 0), 0);
    assert_int_equal(call_one_code(&m, MC_RPC_PUT_END, "gamma", 0), MC_ERR_OBJECT_NOT_FOUND);
    stop_master(&m, SIGTERM);
}

static int64_t remove_count(master_t *m, uint16_t opcode, const char *regex)
{
    Mc__KeysRequest req;
    keys_request(&req, NULL, 0, NULL);
    req.force = 1;
    req.regex = (char *)(regex ? regex : "");
    Mc__KeysResponse *resp = call_keys(m, opcode, &req);
    assert_int_equal(resp->code, 0);
    int64_t n = resp->count;
    mc__keys_response__free_unpacked(resp, NULL);
    return n;
}

static void test_remove_by_regex_and_remove_all_return_counts(void **state)
{
    const char *seg = LOOPBACK ":17003";
    master_t m;
    start_master(&m, NULL);
    mount_segment(&m, seg);
    put_object(&m, "layer/0", 64, seg);
    put_object(&m, "layer/1", 64, seg);
    put_object(&m, "other", 64, seg);
    assert_int_equal(remove_count(&m, MC_RPC_REMOVE_BY_REGEX, "^layer/"), 2);
    assert_int_equal(remove_count(&m, MC_RPC_REMOVE_ALL, NULL), 1);
    assert_int_equal(remove_count(&m, MC_RPC_REMOVE_ALL, NULL), 0);

    Mc__KeysRequest req;
    keys_request(&req, NULL, 0, NULL);
    req.regex = (char *)"([unclosed";
    Mc__KeysResponse *resp = call_keys(&m, MC_RPC_REMOVE_BY_REGEX, &req);
    assert_int_equal(resp->code, MC_ERR_INVALID_PARAMS);
    mc__keys_response__free_unpacked(resp, NULL);
    stop_master(&m, SIGTERM);
}

static void test_batch_limit_is_enforced(void **state)
{
    master_t m;
    start_master(&m, NULL);
    size_t n = 65537;
    const char **keys = malloc(n * sizeof(*keys));
    assert_non_null(keys);
    for (size_t i = 0; i < n; i++)
        keys[i] = "k";
    Mc__KeysRequest req;
    keys_request(&req, keys, n, NULL);
    Mc__KeysResponse *resp = call_keys(&m, MC_RPC_EXIST_KEY, &req);
    assert_int_equal(resp->code, MC_ERR_INVALID_PARAMS);
    assert_int_equal(resp->n_results, 0);
    mc__keys_response__free_unpacked(resp, NULL);

    keys_request(&req, keys, n - 1, NULL);
    resp = call_keys(&m, MC_RPC_EXIST_KEY, &req);
    assert_int_equal(resp->code, 0);
    assert_int_equal(resp->n_results, n - 1);
    assert_false(resp->results[n - 2]->exists);
    mc__keys_response__free_unpacked(resp, NULL);
    free(keys);

    /* PutStart with a size missing for a key is a bad request as a whole. */
    const char *two[] = {"a", "b"};
    uint64_t one_size[] = {1};
    keys_request(&req, two, 2, one_size);
    req.n_sizes = 1;
    resp = call_keys(&m, MC_RPC_PUT_START, &req);
    assert_int_equal(resp->code, MC_ERR_INVALID_PARAMS);
    mc__keys_response__free_unpacked(resp, NULL);
    stop_master(&m, SIGTERM);
}

static void test_a_request_of_megabytes_is_read_whole(void **state)
{
    enum { N = 2000, KEY_LEN = 4000 };
    master_t m;
    start_master(&m, NULL);
    char *text = malloc((size_t)N * (KEY_LEN + 1));
    const char **keys = malloc(N * sizeof(*keys));
    assert_non_null(text);
    assert_non_null(keys);
    for (size_t i = 0; i < N; i++) {
        char *k = text + i * (KEY_LEN + 1);
        memset(k, 'a' + (int)(i % 26), KEY_LEN);
        snprintf(k, KEY_LEN + 1, "%zu", i); /* distinct keys ... */
        k[strlen(k)] = 'x';                 /* ... of exactly KEY_LEN bytes */
        k[KEY_LEN] = '\0';
        keys[i] = k;
    }
    Mc__KeysRequest req;
    keys_request(&req, keys, N, NULL);
    Mc__KeysResponse *resp = call_keys(&m, MC_RPC_EXIST_KEY, &req);
    assert_int_equal(resp->code, 0);
    assert_int_equal(resp->n_results, N);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(resp->results[i]->code, 0);
        assert_false(resp->results[i]->exists);
    }
    mc__keys_response__free_unpacked(resp, NULL);
    free(keys);
    free(text);
    stop_master(&m, SIGTERM);
}

/* Writes `bytes` on a fresh connection; the master must close it and log a warning naming it. */
static void check_rejected(master_t *m, const uint8_t *bytes, size_t len, const char *why)
{
    int fd = connect_loopback(m->rpc_port);
    char peer[64];
    snprintf(peer, sizeof(peer), "from " LOOPBACK ":%d", local_port(fd));
    assert_int_equal(mc_net_send_all(fd, bytes, len), 0);
    assert_true(closed_by_peer(fd));
    close(fd);
    char *log = NULL;
    for (int i = 0; i < 100; i++) { /* the line may land just after the close */
        free(log);
        log = master_log(m);
        if (strstr(log, peer))
            break;
        usleep(20000);
    }
    const char *w = strstr(log, peer);
    if (!w)
        fail_msg("no warning naming %s for %s; log:\n%s", peer, why, log);
    const char *bol = w;
    while (bol > log && bol[-1] != '\n')
        bol--;
    assert_int_equal(bol[0], 'W');
    assert_null(strstr(w + 1, peer)); /* one line per connection */
    free(log);
}

static void test_bad_frames_close_only_their_connection(void **state)
{
    master_t m;
    start_master(&m, NULL);
    int good = connect_loopback(m.rpc_port);
    raw_service_ready(good, 1);

    uint8_t frame[MC_FRAME_HEADER_SIZE + 8];
    /* bad magic */
    mc_frame_encode(MC_RPC_SERVICE_READY, 7, 0, 0, frame);
    frame[0] ^= 0xff;
    check_rejected(&m, frame, MC_FRAME_HEADER_SIZE, "bad magic");
    /* bad version */
    mc_frame_encode(MC_RPC_SERVICE_READY, 7, 0, 0, frame);
    frame[4] = 99;
    check_rejected(&m, frame, MC_FRAME_HEADER_SIZE, "bad version");
    /* body over the limit: refused from the header alone */
    mc_frame_encode(MC_RPC_PUT_START, 7, MC_RPC_MAX_BODY + 1, 0, frame);
    check_rejected(&m, frame, MC_FRAME_HEADER_SIZE, "oversize body");
    /* a body that is not a KeysRequest: field 2 claims 5 bytes, 1 follows */
    static const uint8_t junk[] = {0x12, 0x05, 'a'};
    mc_frame_encode(MC_RPC_EXIST_KEY, 7, sizeof(junk), 0, frame);
    memcpy(frame + MC_FRAME_HEADER_SIZE, junk, sizeof(junk));
    check_rejected(&m, frame, MC_FRAME_HEADER_SIZE + sizeof(junk), "undecodable body");
    /* an opcode nobody serves */
    mc_frame_encode(999, 7, 0, 0, frame);
    check_rejected(&m, frame, MC_FRAME_HEADER_SIZE, "unknown opcode");

    /* The other connection and new calls are unaffected. */
    raw_service_ready(good, 2);
    close(good);
    size_t len;
    free(call_raw(&m, MC_RPC_SERVICE_READY, NULL, &len));

    char *body = NULL;
    assert_int_equal(http_get(m.metrics_port, "/metrics", &body), 200);
    assert_non_null(strstr(body, "master_rpc_protocol_errors_total 5\n"));
    free(body);
    stop_master(&m, SIGTERM);
}

static void test_pipelined_requests_are_answered_in_order(void **state)
{
    master_t m;
    start_master(&m, NULL);
    int fd = connect_loopback(m.rpc_port);
    enum { N = 64 };
    uint8_t frames[N][MC_FRAME_HEADER_SIZE];
    for (int i = 0; i < N; i++)
        mc_frame_encode(MC_RPC_SERVICE_READY, 1000 + (uint64_t)i, 0, 0, frames[i]);
    assert_int_equal(mc_net_send_all(fd, frames, sizeof(frames)), 0);
    for (int i = 0; i < N; i++) {
        uint8_t rh[MC_FRAME_HEADER_SIZE];
        mc_frame_header_t h;
        assert_int_equal(mc_net_recv_all(fd, rh, sizeof(rh)), 0);
        assert_int_equal(mc_frame_decode(rh, MC_RPC_MAX_BODY, &h), 0);
        assert_int_equal(h.request_id, 1000 + (uint64_t)i);
        uint8_t body[256];
        assert_true(h.body_len <= sizeof(body));
        assert_int_equal(mc_net_recv_all(fd, body, h.body_len), 0);
    }
    close(fd);
    stop_master(&m, SIGTERM);
}

/* ---- HTTP -------------------------------------------------------------------------------- */

static void test_admin_http_serves_metrics_health_segments_and_keys(void **state)
{
    const char *seg = LOOPBACK ":17004";
    master_t m;
    start_master(&m, NULL);
    char *body = NULL;

    assert_int_equal(http_get(m.metrics_port, "/get_all_segments", &body), 200);
    assert_string_equal(body, "");
    free(body);
    mount_segment(&m, seg);
    put_object(&m, "k1", 1000, seg);

    assert_int_equal(http_get(m.metrics_port, "/metrics", &body), 200);
    assert_non_null(strstr(body, "# HELP master_key_count "));
    assert_non_null(strstr(body, "# TYPE master_key_count gauge\nmaster_key_count 1\n"));
    assert_non_null(strstr(body, "master_segment_count 1\n"));
    assert_non_null(strstr(body, "master_total_capacity_bytes 67108864\n"));
    assert_non_null(strstr(body, "# TYPE master_rpc_requests_total counter\n"));
    assert_non_null(strstr(body, "master_rpc_requests_total{method=\"PutStart\"} 1\n"));
    assert_non_null(strstr(body, "master_rpc_success_total{method=\"PutEnd\"} 1\n"));
    const char *names[] = {
        "master_allocated_bytes",     "master_active_clients",        "master_evicted_key_count",
        "master_eviction_runs_total", "master_leased_keys",           "master_soft_pinned_keys",
        "master_hard_pinned_keys",    "master_expired_clients_total", "master_revoked_puts_total"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char type[128];
        snprintf(type, sizeof(type), "# TYPE %s ", names[i]);
        assert_non_null(strstr(body, type));
    }
    free(body);

    assert_int_equal(http_get(m.metrics_port, "/metrics/summary", &body), 200);
    assert_non_null(strstr(body, "Keys: 1 "));
    assert_non_null(strstr(body, "PutStart=1/1"));
    free(body);

    assert_int_equal(http_get(m.metrics_port, "/health", &body), 200);
    assert_non_null(strstr(body, "\"status\":\"ok\""));
    free(body);

    assert_int_equal(http_get(m.metrics_port, "/get_all_segments", &body), 200);
    assert_string_equal(body, LOOPBACK ":17004\n");
    free(body);

    assert_int_equal(http_get(m.metrics_port, "/query_key?key=k1", &body), 200);
    assert_non_null(strstr(body, "\"size\":1000"));
    assert_non_null(strstr(body, "\"segment_name\":\"127.0.0.1:17004\""));
    free(body);
    assert_int_equal(http_get(m.metrics_port, "/query_key?key=nope", &body), 404);
    free(body);
    assert_int_equal(http_get(m.metrics_port, "/query_key", &body), 400);
    free(body);
    assert_int_equal(http_get(m.metrics_port, "/no/such/path", &body), 404);
    free(body);
    stop_master(&m, SIGTERM);
}

/* ---- main -------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    /* The start-up line is an INFO line; the offload defaults read the MOONCAKE_* variables. */
    unsetenv("MC_LOG_LEVEL");
    unsetenv("MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR");
    unsetenv("MOONCAKE_DISTRIBUTED_FS_TYPE");
    unsetenv("MOONCAKE_DISTRIBUTED_ROOT_DIR");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Every test runs with the leftover-master teardown. */
#define MASTER_TEST(f) cmocka_unit_test_teardown(f, kill_leftover_masters)

int main(void)
{
    const struct CMUnitTest tests[] = {
        MASTER_TEST(test_unknown_flag_exits_1_with_one_line),
        MASTER_TEST(test_help_exits_0_and_lists_the_flags),
        MASTER_TEST(test_version_prints_the_version),
        MASTER_TEST(test_out_of_range_values_are_refused_with_one_line),
        MASTER_TEST(test_ignored_upstream_flags_are_accepted_with_a_warning),
        MASTER_TEST(test_the_guides_command_line_starts),
        MASTER_TEST(test_deprecated_port_flag_sets_the_rpc_port),
        MASTER_TEST(test_rpc_port_in_use_exits_1_naming_the_address),
        MASTER_TEST(test_metrics_port_in_use_exits_1_naming_the_address),
        MASTER_TEST(test_metadata_port_in_use_exits_1_naming_the_address),
        MASTER_TEST(test_sigint_exits_0),
        MASTER_TEST(test_log_dir_receives_the_log),
        MASTER_TEST(test_loopback_addresses_are_honoured),
        MASTER_TEST(test_default_rpc_address_binds_every_interface),
        MASTER_TEST(test_json_config_applies_and_the_command_line_wins),
        MASTER_TEST(test_yaml_config_applies),
        MASTER_TEST(test_config_with_unknown_keys_is_refused_naming_them),
        MASTER_TEST(test_config_with_a_bad_value_is_refused),
        MASTER_TEST(test_service_ready_returns_the_version),
        MASTER_TEST(test_ping_reports_remount_until_the_client_mounts),
        MASTER_TEST(test_put_get_exist_remove_round_trip),
        MASTER_TEST(test_remove_by_regex_and_remove_all_return_counts),
        MASTER_TEST(test_batch_limit_is_enforced),
        MASTER_TEST(test_a_request_of_megabytes_is_read_whole),
        MASTER_TEST(test_bad_frames_close_only_their_connection),
        MASTER_TEST(test_pipelined_requests_are_answered_in_order),
        MASTER_TEST(test_admin_http_serves_metrics_health_segments_and_keys),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
