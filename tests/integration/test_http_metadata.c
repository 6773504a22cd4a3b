/*
 * test_http_metadata.c — integration tests of the HTTP metadata service (http_metadata.h).
 *
 * Part one runs the library server in-process on 127.0.0.1 with port 0 and drives it with the
 * libcurl client calls and with hand-written HTTP over a socket. Part two spawns the real
 * mooncake_http_metadata_server binary with --port 0, learns the bound port from its ready line on
 * stderr (through a pipe), exercises it the same way, and checks signal and flag-error exits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "mooncake/errors.h"
#include "mooncake/http_metadata.h"

#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOOPBACK "127.0.0.1"
#define SERVER_BINARY MC_BUILD_DIR "/tools/mooncake_http_metadata_server"
#define READY_MARKER "HTTP metadata server listening on "
#define IO_TIMEOUT_MS 10000
#define EXIT_WAIT_MS 10000
#define RAW_RESPONSE_MAX 65536

/* ---- helpers: the in-process server ------------------------------------------------------- */

typedef struct fixture {
    mc_http_metadata_server_t *server;
    int port;
    char url[128];
} fixture_t;

static int start_server(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(mc_http_metadata_server_start(LOOPBACK, 0, &f->server), 0);
    f->port = mc_http_metadata_server_port(f->server);
    assert_true(f->port > 0);
    snprintf(f->url, sizeof(f->url), "http://%s:%d/metadata", LOOPBACK, f->port);
    *state = f;
    return 0;
}

static int stop_server(void **state)
{
    fixture_t *f = *state;
    mc_http_metadata_server_stop(f->server);
    free(f);
    return 0;
}

/* ---- helpers: raw HTTP -------------------------------------------------------------------- */

/*
 * Sends `req` (len bytes) on a fresh connection and reads until the server closes or the response
 * buffer fills. Returns the number of bytes read into resp (NUL-terminated); 0 when the server
 * closed without answering.
 */
static size_t raw_exchange(int port, const char *req, size_t len, char *resp, size_t cap)
{
    int fd = mc_net_connect_tcp(LOOPBACK, port, IO_TIMEOUT_MS);
    assert_true(fd >= 0);
    mc_net_set_timeouts(fd, IO_TIMEOUT_MS);
    assert_int_equal(mc_net_send_all(fd, req, len), 0);
    size_t got = 0;
    while (got < cap - 1) {
        ssize_t n = recv(fd, resp + got, cap - 1 - got, 0);
        if (n <= 0)
            break; /* EOF, reset, or timeout: the caller judges what arrived */
        got += (size_t)n;
    }
    resp[got] = '\0';
    close(fd);
    return got;
}

/* The status code of a raw response, or -1 when there was none. */
static int raw_status(const char *resp)
{
    int status = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    return status;
}

static int raw_request_status(int port, const char *req)
{
    char resp[RAW_RESPONSE_MAX];
    raw_exchange(port, req, strlen(req), resp, sizeof(resp));
    return raw_status(resp);
}

static const char *raw_body(const char *resp)
{
    const char *p = strstr(resp, "\r\n\r\n");
    return p ? p + 4 : "";
}

/* ---- helpers: the standalone binary -------------------------------------------------------- */

typedef struct child {
    pid_t pid;
    int err_fd; /* read end of the child's stderr */
    int port;   /* from the ready line; 0 until seen */
    char err[RAW_RESPONSE_MAX];
    size_t err_len;
    pthread_t drainer;
    int draining;
} child_t;

/* Starts the server binary with argv[1..] = args (NULL-terminated), stderr into a pipe. */
static void spawn_server(child_t *c, const char *const *args)
{
    char *argv[16];
    size_t n = 0;
    argv[n++] = (char *)SERVER_BINARY;
    for (size_t i = 0; args[i] && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;

    int pipefd[2];
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    memset(c, 0, sizeof(*c));
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDOUT_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        unsetenv("MC_LOG_LEVEL"); /* the ready line is an INFO line */
        execv(SERVER_BINARY, argv);
        _exit(127);
    }
    close(pipefd[1]);
    c->err_fd = pipefd[0];
}

/* Reads the child's stderr into c->err until EOF (returns 0) or timeout (returns -1). */
static int read_stderr_until_eof(child_t *c, int timeout_ms)
{
    uint64_t deadline = mc_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = mc_now_ms();
        if (now >= deadline)
            return -1;
        struct pollfd p = {.fd = c->err_fd, .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        size_t room = sizeof(c->err) - 1 - c->err_len;
        char scratch[4096];
        ssize_t n = room > 0 ? read(c->err_fd, c->err + c->err_len, room)
                             : read(c->err_fd, scratch, sizeof(scratch));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0; /* EOF, or the pipe failed: nothing more will come */
        if (room > 0) {
            c->err_len += (size_t)n;
            c->err[c->err_len] = '\0';
        }
    }
}

/* Reads stderr until the ready line is complete; sets c->port. */
static void wait_ready(child_t *c)
{
    uint64_t deadline = mc_now_ms() + IO_TIMEOUT_MS;
    while (mc_now_ms() < deadline) {
        const char *m = strstr(c->err, READY_MARKER);
        const char *eol = m ? strchr(m, '\n') : NULL;
        if (eol) {
            const char *colon = eol;
            while (colon > m && *colon != ':')
                colon--;
            c->port = atoi(colon + 1);
            assert_true(c->port > 0);
            return;
        }
        struct pollfd p = {.fd = c->err_fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(c->err_fd, c->err + c->err_len, sizeof(c->err) - 1 - c->err_len);
        assert_true(n > 0); /* the child died before becoming ready */
        c->err_len += (size_t)n;
        c->err[c->err_len] = '\0';
    }
    fail_msg("no ready line from %s; stderr so far:\n%s", SERVER_BINARY, c->err);
}

/* Keeps the child's stderr pipe drained (so its log writes never block) until EOF. */
static void *drain_stderr(void *arg)
{
    child_t *c = arg;
    while (read_stderr_until_eof(c, IO_TIMEOUT_MS) != 0)
        ;
    return NULL;
}

static void start_draining(child_t *c)
{
    assert_int_equal(pthread_create(&c->drainer, NULL, drain_stderr, c), 0);
    c->draining = 1;
}

/* Waits for the child to exit; returns its wait status, or fails the test on timeout. */
static int wait_exit(child_t *c)
{
    uint64_t deadline = mc_now_ms() + EXIT_WAIT_MS;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid)
            break;
        if (mc_now_ms() >= deadline) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            fail_msg("%s did not exit in time", SERVER_BINARY);
        }
        usleep(10000);
    }
    if (c->draining)
        pthread_join(c->drainer, NULL);
    else
        read_stderr_until_eof(c, IO_TIMEOUT_MS);
    close(c->err_fd);
    return status;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- part one: library server and client -------------------------------------------------- */

static void test_put_then_get_returns_the_value(void **state)
{
    fixture_t *f = *state;
    const char *v = "{\"name\":\"seg0\",\"buffers\":[]}";
    assert_int_equal(mc_http_metadata_put(f->url, "mooncake/ram/seg0", v, strlen(v)), 0);

    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(f->url, "mooncake/ram/seg0", &got, &len), 0);
    assert_int_equal(len, strlen(v));
    assert_string_equal(got, v);
    free(got);
    assert_int_equal(mc_http_metadata_server_size(f->server), 1);
}

static void test_put_overwrites_an_ordinary_key(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(mc_http_metadata_put(f->url, "mooncake/ram/a", "1", 1), 0);
    assert_int_equal(mc_http_metadata_put(f->url, "mooncake/ram/a", "22", 2), 0);
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(f->url, "mooncake/ram/a", &got, &len), 0);
    assert_string_equal(got, "22");
    free(got);
    assert_int_equal(mc_http_metadata_server_size(f->server), 1);
}

static void test_get_of_an_absent_key_is_not_found(void **state)
{
    fixture_t *f = *state;
    char *got = (char *)"untouched";
    size_t len = 7;
    assert_int_equal(mc_http_metadata_get(f->url, "mooncake/ram/nobody", &got, &len),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_null(got);
    assert_int_equal(len, 0);
}

static void test_delete_then_delete_again_is_not_found(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(mc_http_metadata_put(f->url, "k", "{}", 2), 0);
    assert_int_equal(mc_http_metadata_del(f->url, "k"), 0);
    assert_int_equal(mc_http_metadata_server_size(f->server), 0);
    assert_int_equal(mc_http_metadata_del(f->url, "k"), MC_ERR_OBJECT_NOT_FOUND);
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(f->url, "k", &got, &len), MC_ERR_OBJECT_NOT_FOUND);
}

static void test_keys_with_reserved_characters_are_escaped(void **state)
{
    fixture_t *f = *state;
    /* Each key differs from the others only in characters a naive URL would mangle. */
    const char *keys[] = {
        "mooncake/ram/host a/b?c&d=e", "mooncake/ram/host a/b",    "a+b", "a b", "100%", "x#frag",
        "key=value&key=other",         "caf\xc3\xa9/\xe2\x9c\x93",
    };
    size_t nkeys = sizeof(keys) / sizeof(keys[0]);
    for (size_t i = 0; i < nkeys; i++) {
        char v[32];
        int n = snprintf(v, sizeof(v), "{\"i\":%zu}", i);
        assert_int_equal(mc_http_metadata_put(f->url, keys[i], v, (size_t)n), 0);
    }
    assert_int_equal(mc_http_metadata_server_size(f->server), nkeys);
    for (size_t i = 0; i < nkeys; i++) {
        char want[32];
        snprintf(want, sizeof(want), "{\"i\":%zu}", i);
        char *got = NULL;
        size_t len = 0;
        assert_int_equal(mc_http_metadata_get(f->url, keys[i], &got, &len), 0);
        assert_string_equal(got, want);
        free(got);
    }
}

static void test_rpc_meta_rewrite_with_a_different_body_is_rejected(void **state)
{
    fixture_t *f = *state;
    const char *key = "mooncake/rpc_meta/node1";
    const char *a = "{\"ip\":\"10.0.0.1\",\"port\":12300}";
    const char *b = "{\"ip\":\"10.0.0.2\",\"port\":12300}";
    assert_int_equal(mc_http_metadata_put(f->url, key, a, strlen(a)), 0);
    assert_int_equal(mc_http_metadata_put(f->url, key, b, strlen(b)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_http_metadata_put(f->url, key, a, strlen(a)), 0);

    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(f->url, key, &got, &len), 0);
    assert_string_equal(got, a);
    free(got);

    /* Deleting releases the name: the next owner may publish its own endpoint. */
    assert_int_equal(mc_http_metadata_del(f->url, key), 0);
    assert_int_equal(mc_http_metadata_put(f->url, key, b, strlen(b)), 0);
}

static void test_rpc_meta_duplicate_answers_400_with_upstream_message(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(mc_http_metadata_put(f->url, "x/rpc_meta/y", "1", 1), 0);
    const char req[] = "PUT /metadata?key=x%2Frpc_meta%2Fy HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 1\r\nConnection: close\r\n\r\n2";
    char resp[RAW_RESPONSE_MAX];
    raw_exchange(f->port, req, sizeof(req) - 1, resp, sizeof(resp));
    assert_int_equal(raw_status(resp), 400);
    assert_string_equal(raw_body(resp), "Duplicate rpc_meta key not allowed");
}

static void test_value_at_the_limit_is_kept_and_one_byte_more_is_rejected(void **state)
{
    fixture_t *f = *state;
    size_t max = MC_HTTP_METADATA_MAX_VALUE;
    char *big = malloc(max + 1);
    assert_non_null(big);
    for (size_t i = 0; i <= max; i++)
        big[i] = (char)('a' + i % 26);

    assert_int_equal(mc_http_metadata_put(f->url, "big", big, max + 1), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_http_metadata_server_size(f->server), 0);

    assert_int_equal(mc_http_metadata_put(f->url, "big", big, max), 0);
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(f->url, "big", &got, &len), 0);
    assert_int_equal(len, max);
    assert_memory_equal(got, big, max);
    free(got);
    free(big);
}

static void test_declared_oversize_body_gets_413_without_being_sent(void **state)
{
    fixture_t *f = *state;
    char req[256];
    snprintf(req, sizeof(req),
             "PUT /metadata?key=big HTTP/1.1\r\nHost: t\r\nContent-Length: %u\r\n"
             "Connection: close\r\n\r\n",
             MC_HTTP_METADATA_MAX_VALUE + 1);
    assert_int_equal(raw_request_status(f->port, req), 413);
    assert_int_equal(mc_http_metadata_server_size(f->server), 0);
}

/* A chunked body declares no length: the server must stop storing it at the limit. */
static void test_chunked_oversize_body_is_drained_and_refused(void **state)
{
    fixture_t *f = *state;
    enum { CHUNK = 64 * 1024 };
    int fd = mc_net_connect_tcp(LOOPBACK, f->port, IO_TIMEOUT_MS);
    assert_true(fd >= 0);
    mc_net_set_timeouts(fd, IO_TIMEOUT_MS);
    const char head[] = "PUT /metadata?key=chunky HTTP/1.1\r\nHost: t\r\n"
                        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    assert_int_equal(mc_net_send_all(fd, head, sizeof(head) - 1), 0);
    char *chunk = malloc(CHUNK);
    assert_non_null(chunk);
    memset(chunk, 'z', CHUNK);
    char size_line[32];
    int sl = snprintf(size_line, sizeof(size_line), "%x\r\n", CHUNK);
    for (size_t sent = 0; sent <= MC_HTTP_METADATA_MAX_VALUE; sent += CHUNK) {
        assert_int_equal(mc_net_send_all(fd, size_line, (size_t)sl), 0);
        assert_int_equal(mc_net_send_all(fd, chunk, CHUNK), 0);
        assert_int_equal(mc_net_send_all(fd, "\r\n", 2), 0);
    }
    assert_int_equal(mc_net_send_all(fd, "0\r\n\r\n", 5), 0);
    free(chunk);

    char resp[RAW_RESPONSE_MAX];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(resp) - 1 && (n = recv(fd, resp + got, sizeof(resp) - 1 - got, 0)) > 0)
        got += (size_t)n;
    resp[got] = '\0';
    close(fd);
    assert_int_equal(raw_status(resp), 413);
    assert_int_equal(mc_http_metadata_server_size(f->server), 0);
    assert_int_equal(raw_request_status(f->port, "GET /health HTTP/1.1\r\nHost: t\r\n"
                                                 "Connection: close\r\n\r\n"),
                     200);
}

static void test_binary_json_body_is_preserved_byte_exact(void **state)
{
    fixture_t *f = *state;
    /* JSON-looking text carrying every byte value, NUL and invalid UTF-8 included. */
    char body[300];
    size_t len = 0;
    memcpy(body, "{\"raw\":\"", 8);
    len = 8;
    for (int b = 0; b < 256; b++)
        body[len++] = (char)b;
    memcpy(body + len, "\"}\r\n", 4);
    len += 4;

    assert_int_equal(mc_http_metadata_put(f->url, "mooncake/ram/bin", body, len), 0);
    char *got = NULL;
    size_t got_len = 0;
    assert_int_equal(mc_http_metadata_get(f->url, "mooncake/ram/bin", &got, &got_len), 0);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, body, len);
    assert_int_equal(got[got_len], '\0');
    free(got);
}

static void test_empty_value_round_trips(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(mc_http_metadata_put(f->url, "empty", "", 0), 0);
    char *got = NULL;
    size_t len = 99;
    assert_int_equal(mc_http_metadata_get(f->url, "empty", &got, &len), 0);
    assert_non_null(got);
    assert_int_equal(len, 0);
    assert_string_equal(got, "");
    free(got);
}

static void test_get_answers_with_json_content_type(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(mc_http_metadata_put(f->url, "ct", "{\"a\":1}", 7), 0);
    char resp[RAW_RESPONSE_MAX];
    const char req[] = "GET /metadata?key=ct HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    raw_exchange(f->port, req, sizeof(req) - 1, resp, sizeof(resp));
    assert_int_equal(raw_status(resp), 200);
    assert_non_null(strcasestr(resp, "\r\nContent-Type: application/json\r\n"));
    assert_string_equal(raw_body(resp), "{\"a\":1}");
}

static void test_routes_and_missing_key_answer_as_documented(void **state)
{
    fixture_t *f = *state;
    char resp[RAW_RESPONSE_MAX];
    const char health[] = "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    raw_exchange(f->port, health, sizeof(health) - 1, resp, sizeof(resp));
    assert_int_equal(raw_status(resp), 200);
    assert_string_equal(raw_body(resp), "OK");

    assert_int_equal(raw_request_status(f->port, "GET /metadata HTTP/1.1\r\nHost: t\r\n"
                                                 "Connection: close\r\n\r\n"),
                     400);
    assert_int_equal(raw_request_status(f->port, "GET /metadata?key= HTTP/1.1\r\nHost: t\r\n"
                                                 "Connection: close\r\n\r\n"),
                     400);
    assert_int_equal(raw_request_status(f->port, "DELETE /metadata?other=1 HTTP/1.1\r\n"
                                                 "Host: t\r\nConnection: close\r\n\r\n"),
                     400);
    assert_int_equal(raw_request_status(f->port, "GET /elsewhere?key=a HTTP/1.1\r\nHost: t\r\n"
                                                 "Connection: close\r\n\r\n"),
                     404);
    assert_int_equal(raw_request_status(f->port, "POST /metadata?key=a HTTP/1.1\r\nHost: t\r\n"
                                                 "Content-Length: 0\r\nConnection: close\r\n\r\n"),
                     405);
}

static void test_one_connection_carries_several_requests(void **state)
{
    fixture_t *f = *state;
    const char reqs[] = "PUT /metadata?key=ka HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}"
                        "GET /metadata?key=ka HTTP/1.1\r\nHost: t\r\n\r\n"
                        "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    char resp[RAW_RESPONSE_MAX];
    raw_exchange(f->port, reqs, sizeof(reqs) - 1, resp, sizeof(resp));
    size_t answers = 0;
    for (const char *p = resp; (p = strstr(p, "HTTP/1.1 200 ")) != NULL; p++)
        answers++;
    assert_int_equal(answers, 3);
}

static void test_key_longer_than_4096_bytes_is_refused(void **state)
{
    fixture_t *f = *state;
    char key[4098];
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    assert_int_equal(mc_http_metadata_put(f->url, key, "1", 1), MC_ERR_INVALID_PARAMS);
    key[4096] = '\0';
    assert_int_equal(mc_http_metadata_put(f->url, key, "1", 1), 0);
}

static void test_loopback_server_is_not_reachable_on_other_addresses(void **state)
{
    fixture_t *f = *state;
    char primary[MC_HOST_MAX];
    mc_net_primary_address(primary);
    if (strcmp(primary, LOOPBACK) == 0)
        skip(); /* no non-loopback interface to try */
    int fd = mc_net_connect_tcp(primary, f->port, 2000);
    if (fd >= 0)
        close(fd);
    assert_true(fd < 0);
}

static void test_port_in_use_is_an_internal_error(void **state)
{
    fixture_t *f = *state;
    mc_http_metadata_server_t *second = NULL;
    assert_int_equal(mc_http_metadata_server_start(LOOPBACK, f->port, &second),
                     MC_ERR_INTERNAL_ERROR);
    assert_null(second);
}

static void test_bad_host_and_port_are_invalid_params(void **state)
{
    mc_http_metadata_server_t *s = NULL;
    assert_int_equal(mc_http_metadata_server_start("256.256.256.256", 0, &s),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_http_metadata_server_start(LOOPBACK, 65536, &s), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_http_metadata_server_start(LOOPBACK, -1, &s), MC_ERR_INVALID_PARAMS);
    assert_null(s);
    mc_http_metadata_server_stop(NULL);
}

static void test_unreachable_server_is_rpc_fail(void **state)
{
    mc_http_metadata_server_t *s = NULL;
    assert_int_equal(mc_http_metadata_server_start(LOOPBACK, 0, &s), 0);
    char url[128];
    snprintf(url, sizeof(url), "http://%s:%d/metadata", LOOPBACK, mc_http_metadata_server_port(s));
    mc_http_metadata_server_stop(s);

    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(url, "k", &got, &len), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_http_metadata_put(url, "k", "1", 1), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_http_metadata_del(url, "k"), MC_ERR_RPC_FAIL);
}

static void test_client_rejects_missing_arguments(void **state)
{
    fixture_t *f = *state;
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(f->url, "", &got, &len), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_http_metadata_get(NULL, "k", &got, &len), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_http_metadata_put(f->url, "k", NULL, 3), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_http_metadata_del(f->url, NULL), MC_ERR_INVALID_PARAMS);
}

enum { WORKERS = 4, ROUNDS = 50 };

typedef struct worker {
    const char *url;
    int id;
    int failures;
} worker_t;

static void *worker_run(void *arg)
{
    worker_t *w = arg;
    for (int i = 0; i < ROUNDS; i++) {
        char key[64], value[64];
        snprintf(key, sizeof(key), "mooncake/ram/w%d-%d", w->id, i);
        int n = snprintf(value, sizeof(value), "{\"w\":%d,\"i\":%d}", w->id, i);
        char *got = NULL;
        size_t len = 0;
        w->failures += mc_http_metadata_put(w->url, key, value, (size_t)n) != 0;
        w->failures += mc_http_metadata_get(w->url, key, &got, &len) != 0;
        w->failures += !got || strcmp(got, value) != 0;
        free(got);
        if (i % 2 == 0)
            w->failures += mc_http_metadata_del(w->url, key) != 0;
    }
    return NULL;
}

static void test_concurrent_clients_see_their_own_writes(void **state)
{
    fixture_t *f = *state;
    pthread_t threads[WORKERS];
    worker_t workers[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i] = (worker_t){.url = f->url, .id = i};
        assert_int_equal(pthread_create(&threads[i], NULL, worker_run, &workers[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(workers[i].failures, 0);
    }
    assert_int_equal(mc_http_metadata_server_size(f->server), WORKERS * ROUNDS / 2);
}

/* ---- part two: the standalone binary ------------------------------------------------------ */

static void test_binary_serves_the_protocol_and_exits_0_on_sigterm(void **state)
{
    child_t *c = malloc(sizeof(*c));
    assert_non_null(c);
    const char *args[] = {"--port", "0", "--host", LOOPBACK, NULL};
    spawn_server(c, args);
    wait_ready(c);
    assert_non_null(strstr(c->err, READY_MARKER LOOPBACK ":"));
    start_draining(c);

    char url[128];
    snprintf(url, sizeof(url), "http://%s:%d/metadata", LOOPBACK, c->port);
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_put(url, "mooncake/ram/n 1", "{\"x\":1}", 7), 0);
    assert_int_equal(mc_http_metadata_get(url, "mooncake/ram/n 1", &got, &len), 0);
    assert_string_equal(got, "{\"x\":1}");
    free(got);
    assert_int_equal(mc_http_metadata_del(url, "mooncake/ram/n 1"), 0);
    assert_int_equal(mc_http_metadata_del(url, "mooncake/ram/n 1"), MC_ERR_OBJECT_NOT_FOUND);

    char resp[RAW_RESPONSE_MAX];
    assert_int_equal(raw_request_status(c->port, "GET /metadata HTTP/1.1\r\nHost: t\r\n"
                                                 "Connection: close\r\n\r\n"),
                     400);
    const char health[] = "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    raw_exchange(c->port, health, sizeof(health) - 1, resp, sizeof(resp));
    assert_int_equal(raw_status(resp), 200);
    assert_string_equal(raw_body(resp), "OK");
    assert_int_equal(raw_request_status(c->port, "GET /nowhere HTTP/1.1\r\nHost: t\r\n"
                                                 "Connection: close\r\n\r\n"),
                     404);

    const char garbage[] = "\x01\x02 garbage \xff\r\n\r\n";
    size_t n = raw_exchange(c->port, garbage, sizeof(garbage) - 1, resp, sizeof(resp));
    assert_true(n == 0 || raw_status(resp) == 400);
    raw_exchange(c->port, health, sizeof(health) - 1, resp, sizeof(resp));
    assert_int_equal(raw_status(resp), 200);

    assert_int_equal(kill(c->pid, SIGTERM), 0);
    int status = wait_exit(c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(c);
}

static void test_binary_exits_0_on_sigint(void **state)
{
    child_t *c = malloc(sizeof(*c));
    assert_non_null(c);
    const char *args[] = {"--port=0", "--host=127.0.0.1", NULL};
    spawn_server(c, args);
    wait_ready(c);
    start_draining(c);
    assert_int_equal(kill(c->pid, SIGINT), 0);
    int status = wait_exit(c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(c);
}

static void test_binary_rejects_an_unknown_flag_with_one_line(void **state)
{
    child_t *c = malloc(sizeof(*c));
    assert_non_null(c);
    const char *args[] = {"--port", "0", "--no_such_flag=1", NULL};
    spawn_server(c, args);
    int status = wait_exit(c);
    assert_true(WIFEXITED(status));
    assert_int_not_equal(WEXITSTATUS(status), 0);
    assert_int_equal(count_lines(c->err), 1);
    assert_non_null(strstr(c->err, "no_such_flag"));
    free(c);
}

static void test_binary_rejects_an_out_of_range_port(void **state)
{
    child_t *c = malloc(sizeof(*c));
    assert_non_null(c);
    const char *args[] = {"--port", "70000", NULL};
    spawn_server(c, args);
    int status = wait_exit(c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_int_equal(count_lines(c->err), 1);
    free(c);
}

static void test_binary_help_exits_0(void **state)
{
    child_t *c = malloc(sizeof(*c));
    assert_non_null(c);
    const char *args[] = {"--help", NULL};
    spawn_server(c, args);
    int status = wait_exit(c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
#define WITH_SERVER(t) cmocka_unit_test_setup_teardown(t, start_server, stop_server)
    const struct CMUnitTest tests[] = {
        WITH_SERVER(test_put_then_get_returns_the_value),
        WITH_SERVER(test_put_overwrites_an_ordinary_key),
        WITH_SERVER(test_get_of_an_absent_key_is_not_found),
        WITH_SERVER(test_delete_then_delete_again_is_not_found),
        WITH_SERVER(test_keys_with_reserved_characters_are_escaped),
        WITH_SERVER(test_rpc_meta_rewrite_with_a_different_body_is_rejected),
        WITH_SERVER(test_rpc_meta_duplicate_answers_400_with_upstream_message),
        WITH_SERVER(test_value_at_the_limit_is_kept_and_one_byte_more_is_rejected),
        WITH_SERVER(test_declared_oversize_body_gets_413_without_being_sent),
        WITH_SERVER(test_chunked_oversize_body_is_drained_and_refused),
        WITH_SERVER(test_binary_json_body_is_preserved_byte_exact),
        WITH_SERVER(test_empty_value_round_trips),
        WITH_SERVER(test_get_answers_with_json_content_type),
        WITH_SERVER(test_routes_and_missing_key_answer_as_documented),
        WITH_SERVER(test_one_connection_carries_several_requests),
        WITH_SERVER(test_key_longer_than_4096_bytes_is_refused),
        WITH_SERVER(test_loopback_server_is_not_reachable_on_other_addresses),
        WITH_SERVER(test_port_in_use_is_an_internal_error),
        cmocka_unit_test(test_bad_host_and_port_are_invalid_params),
        cmocka_unit_test(test_unreachable_server_is_rpc_fail),
        WITH_SERVER(test_client_rejects_missing_arguments),
        WITH_SERVER(test_concurrent_clients_see_their_own_writes),
        cmocka_unit_test(test_binary_serves_the_protocol_and_exits_0_on_sigterm),
        cmocka_unit_test(test_binary_exits_0_on_sigint),
        cmocka_unit_test(test_binary_rejects_an_unknown_flag_with_one_line),
        cmocka_unit_test(test_binary_rejects_an_out_of_range_port),
        cmocka_unit_test(test_binary_help_exits_0),
    };
#undef WITH_SERVER
    return cmocka_run_group_tests(tests, NULL, NULL);
}
