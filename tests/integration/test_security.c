/*
 * test_security.c — "nothing listens or obeys where it was not told to", with real
 * processes: a mooncake_master and mooncake_client holders sharing a cluster secret, store clients
 * in this process, and raw sockets playing the peer that does not know the secret.
 *
 *  - a raw master RPC (RemoveAll) without the handshake is refused, and the objects stay;
 *  - a raw Transfer Engine WRITE / READ / HANDSHAKE to a holder is refused before a byte moves;
 *  - a client with no secret or a wrong one fails setup with -601, so does a client with a
 *    secret against a master without one (all or nothing);
 *  - clients with the secret put and get over shm and tcp;
 *  - HTTP metadata writes need a fresh proof (no proof, a wrong secret, a replayed proof: 401,
 *    nothing changes); reads stay open;
 *  - a master on all interfaces with no secret prints its one warning line, and not otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "auth.h"
#include "auth.pb-c.h"
#include "cluster.h"
#include "frame.h"
#include "mooncake/http_metadata.h"
#include "mooncake/store.h"
#include "payload.h"
#include "net.h"
#include "proc.h"
#include "rpc.h"
#include "store.pb-c.h"
#include "transfer.pb-c.h"
#include "transfer_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"
#define SECRET "integration-test-cluster-secret"
#define VALUE_LEN (64u << 10)

static char secret_file[256];

typedef struct fixture {
    mc_master_t master;
    mc_holder_t holder;
} fixture_t;

/* ---- raw peers ---------------------------------------------------------------------------- */

static int raw_connect(const char *host, int port)
{
    int fd = mc_test_connect(host, port, 10000);
    assert_true(fd >= 0);
    return fd;
}

/* The server may close early: what it answered is what is checked. */
static void send_all(int fd, const void *p, size_t n)
{
    (void)mc_net_send_all(fd, p, n);
}

static void send_frame(int fd, uint16_t opcode, const uint8_t *body, size_t len)
{
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(opcode, 7, (uint32_t)len, 0, hdr);
    send_all(fd, hdr, sizeof(hdr));
    send_all(fd, body, len);
}

/*
 * Reads what the server answers until it closes. Returns the AUTH_RESULT code when the first
 * frame is one, 1 when the first frame is anything else (the server obeyed), 0 when nothing came.
 */
static int read_answer(int fd, uint16_t *first_opcode)
{
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = recv(fd, raw + got, sizeof(raw) - got, 0);
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
    mc_frame_header_t h;
    assert_int_equal(mc_frame_decode(raw, 1u << 20, &h), 0);
    *first_opcode = h.opcode;
    uint8_t *body = malloc(h.body_len + 1);
    assert_non_null(body);
    got = 0;
    while (got < h.body_len) {
        ssize_t n = recv(fd, body + got, h.body_len - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    int code = 1;
    if (h.opcode == MC_AUTH_OP_RESULT) {
        Mc__AuthResult *r = mc__auth_result__unpack(NULL, got, body);
        assert_non_null(r);
        code = r->code;
        assert_non_null(strstr(r->message, "cluster secret"));
        mc__auth_result__free_unpacked(r, NULL);
        /* ... and then the server closes the connection. */
        char c;
        assert_true(recv(fd, &c, 1, 0) <= 0);
    }
    free(body);
    return code;
}

/* ---- fixture ------------------------------------------------------------------------------ */

static void set_client_secret(const char *secret)
{
    unsetenv(MC_AUTH_ENV_SECRET_FILE);
    if (secret)
        setenv(MC_AUTH_ENV_SECRET, secret, 1);
    else
        unsetenv(MC_AUTH_ENV_SECRET);
}

static mc_store_t *client(const fixture_t *f, const char *secret, int disable_shm, int *rc_out)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .local_buffer_size = 16u << 20,
                             .master_server_addr = f->master.addr,
                             .cluster_secret = secret};
    set_client_secret(NULL);
    if (disable_shm)
        setenv("MC_DISABLE_SHM", "1", 1);
    mc_store_t *s = NULL;
    int rc = mc_store_setup(&cfg, &s);
    unsetenv("MC_DISABLE_SHM");
    if (rc_out)
        *rc_out = rc;
    return rc == 0 ? s : NULL;
}

static int setup_secured(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    snprintf(secret_file, sizeof(secret_file), "/tmp/mc_security_secret_%d", (int)getpid());
    FILE *fp = fopen(secret_file, "w");
    assert_non_null(fp);
    fputs(SECRET "\n", fp); /* one trailing newline is not part of the secret */
    fclose(fp);
    char flag[300];
    snprintf(flag, sizeof(flag), "--cluster_secret_file=%s", secret_file);
    const char *extra[] = {flag, NULL};
    if (mc_master_start(&f->master, 0, extra) != 0)
        return -1;
    const char *hflags[] = {flag, NULL};
    if (mc_holder_start(&f->holder, &f->master, "64MB", hflags, NULL, 20000) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown_secured(void **state)
{
    fixture_t *f = *state;
    mc_cluster_kill_all();
    unlink(secret_file);
    set_client_secret(NULL);
    free(f);
    return 0;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void put_value(mc_store_t *s, const char *key, uint64_t seed)
{
    uint8_t *v = malloc(VALUE_LEN);
    mc_payload_fill(v, VALUE_LEN, seed);
    mc_replicate_config_t rc = MC_REPLICATE_CONFIG_INIT;
    assert_int_equal(mc_store_put(s, key, v, VALUE_LEN, &rc), 0);
    free(v);
}

static void check_value(mc_store_t *s, const char *key, uint64_t seed)
{
    uint8_t *v = malloc(VALUE_LEN);
    assert_int_equal(mc_store_get(s, key, v, VALUE_LEN), (int64_t)VALUE_LEN);
    assert_int_equal(mc_payload_diff(v, VALUE_LEN, seed), VALUE_LEN); /* no byte differs */
    free(v);
}

/* A client with the secret works over shm and over tcp. */
static void test_secret_holders_put_and_get(void **state)
{
    fixture_t *f = *state;
    mc_store_t *shm = client(f, SECRET, 0, NULL);
    mc_store_t *tcp = client(f, SECRET, 1, NULL);
    assert_non_null(shm);
    assert_non_null(tcp);
    put_value(shm, "sec/a", 1);
    put_value(tcp, "sec/b", 2);
    check_value(tcp, "sec/a", 1);
    check_value(shm, "sec/b", 2);
    /* Idle pooled connections are parked by the holder's Transfer Engine after 1 s and served
     * again by a new thread when a request comes: that must not ask for the handshake again. */
    usleep(1500 * 1000);
    check_value(tcp, "sec/a", 1);
    check_value(tcp, "sec/b", 2);
    mc_store_free(shm);
    mc_store_free(tcp);
}

/* No secret, a wrong one: setup fails with -601 and says why. */
static void test_wrong_or_missing_secret_refused(void **state)
{
    fixture_t *f = *state;
    int rc = 0;
    assert_null(client(f, NULL, 0, &rc));
    assert_int_equal(rc, MC_ERR_ILLEGAL_CLIENT);
    assert_null(client(f, "not-the-secret", 0, &rc));
    assert_int_equal(rc, MC_ERR_ILLEGAL_CLIENT);
    /* The wrong secret is caught by the client itself (the master's proof does not verify), so
     * only the first attempt reaches a refusal on the master's side. */
    assert_true(mc_master_metric(&f->master, "master_rpc_auth_refused_total") >= 1);
}

/* A raw RemoveAll (force) without the handshake: refused, connection closed, objects intact. */
static void test_raw_master_rpc_refused(void **state)
{
    fixture_t *f = *state;
    mc_store_t *s = client(f, SECRET, 0, NULL);
    assert_non_null(s);
    put_value(s, "sec/keep", 3);

    Mc__KeysRequest req = MC__KEYS_REQUEST__INIT;
    req.force = 1;
    uint8_t body[MC_AUTH_MAX_BODY];
    size_t n = mc__keys_request__pack(&req, body);
    int fd = raw_connect("127.0.0.1", f->master.rpc_port);
    send_frame(fd, MC_RPC_REMOVE_ALL, body, n);
    uint16_t op = 0;
    assert_int_equal(read_answer(fd, &op), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(op, MC_AUTH_OP_RESULT);
    close(fd);

    /* A handshake with the wrong secret does not get further either. */
    mc_auth_t *wrong = NULL;
    assert_int_equal(mc_auth_create("guess", 5, &wrong), 0);
    fd = raw_connect("127.0.0.1", f->master.rpc_port);
    assert_int_equal(mc_auth_client(wrong, fd, "master", "master", mc_now_ms() + 5000),
                     MC_ERR_ILLEGAL_CLIENT);
    close(fd);
    mc_auth_destroy(wrong);

    /* A peer that skips checking the master's proof and answers with a forged one: refused. */
    fd = raw_connect("127.0.0.1", f->master.rpc_port);
    Mc__AuthHello hello = MC__AUTH_HELLO__INIT;
    uint8_t cn[MC_AUTH_NONCE_LEN] = {1}, forged[MC_AUTH_MAC_LEN] = {2};
    hello.client_nonce = (ProtobufCBinaryData){sizeof(cn), cn};
    hello.service = (char *)"master";
    n = mc__auth_hello__pack(&hello, body);
    send_frame(fd, MC_AUTH_OP_HELLO, body, n);
    uint8_t raw[MC_FRAME_HEADER_SIZE], chal[MC_AUTH_MAX_BODY];
    assert_int_equal(recv(fd, raw, sizeof(raw), MSG_WAITALL), (ssize_t)sizeof(raw));
    mc_frame_header_t h;
    assert_int_equal(mc_frame_decode(raw, MC_AUTH_MAX_BODY, &h), 0);
    assert_int_equal(h.opcode, MC_AUTH_OP_CHALLENGE);
    assert_int_equal(recv(fd, chal, h.body_len, MSG_WAITALL), (ssize_t)h.body_len);
    Mc__AuthProof proof = MC__AUTH_PROOF__INIT;
    proof.client_proof = (ProtobufCBinaryData){sizeof(forged), forged};
    n = mc__auth_proof__pack(&proof, body);
    send_frame(fd, MC_AUTH_OP_PROOF, body, n);
    assert_int_equal(read_answer(fd, &op), MC_ERR_ILLEGAL_CLIENT);
    close(fd);

    check_value(s, "sec/keep", 3);
    mc_store_free(s);
}

/* Raw WRITE, READ and HANDSHAKE to a holder's Transfer Engine: refused before a byte moves. */
static void test_raw_transfer_refused(void **state)
{
    fixture_t *f = *state;
    mc_store_t *s = client(f, SECRET, 0, NULL);
    assert_non_null(s);
    put_value(s, "sec/target", 4);
    mc_replica_desc_t d[4];
    size_t nrep = 0;
    assert_int_equal(mc_store_get_replica_desc(s, "sec/target", d, 4, &nrep), 0);
    assert_true(nrep >= 1);
    char host[64];
    int port = 0;
    assert_int_equal(sscanf(d[0].segment_name, "%63[^:]:%d", host, &port), 2);

    /* WRITE 4 KiB of 0xEE over the object. */
    Mc__TransferHeader th = MC__TRANSFER_HEADER__INIT;
    th.addr = d[0].address;
    th.length = 4096;
    uint8_t body[64], junk[4096];
    size_t n = mc__transfer_header__pack(&th, body);
    memset(junk, 0xee, sizeof(junk));
    int fd = raw_connect(host, port);
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(MC_TE_OP_WRITE, 9, (uint32_t)n, 0, hdr);
    send_all(fd, hdr, sizeof(hdr));
    send_all(fd, body, n);
    send_all(fd, junk, sizeof(junk));
    uint16_t op = 0;
    int code = read_answer(fd, &op);
    assert_int_equal(code, MC_ERR_ILLEGAL_CLIENT);
    close(fd);

    /* READ the object: the first answer is the refusal, not a STATUS followed by its bytes. */
    fd = raw_connect(host, port);
    send_frame(fd, MC_TE_OP_READ, body, n);
    assert_int_equal(read_answer(fd, &op), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(op, MC_AUTH_OP_RESULT);
    close(fd);

    /* HANDSHAKE (the descriptor: addresses, rkeys): refused too. */
    Mc__HandshakeRequest hs = MC__HANDSHAKE_REQUEST__INIT;
    hs.initiator = (char *)"127.0.0.1:1";
    n = mc__handshake_request__pack(&hs, body);
    fd = raw_connect(host, port);
    send_frame(fd, MC_TE_OP_HANDSHAKE, body, n);
    assert_int_equal(read_answer(fd, &op), MC_ERR_ILLEGAL_CLIENT);
    close(fd);

    check_value(s, "sec/target", 4); /* exact bytes: the raw write never landed */
    mc_store_free(s);
}

/* A connection that never runs the handshake is closed after MC_AUTH_TIMEOUT_MS (5 s), not left
 * to hold the connection cap until the idle timeout (600 s). */
static void test_silent_connection_closed(void **state)
{
    fixture_t *f = *state;
    int fd = raw_connect("127.0.0.1", f->master.rpc_port);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char c;
    errno = 0;
    ssize_t n = recv(fd, &c, 1, 0);
    /* closed by the master (EOF or reset), not our 20 s receive timeout */
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    close(fd);
}

/* Both environment variables set: the file wins, as documented. */
static void test_secret_file_env_wins_over_text_env(void **state)
{
    fixture_t *f = *state;
    setenv(MC_AUTH_ENV_SECRET_FILE, secret_file, 1);
    setenv(MC_AUTH_ENV_SECRET, "not-the-secret", 1);
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .local_buffer_size = 16u << 20,
                             .master_server_addr = f->master.addr};
    mc_store_t *s = NULL;
    int rc = mc_store_setup(&cfg, &s);
    unsetenv(MC_AUTH_ENV_SECRET_FILE);
    unsetenv(MC_AUTH_ENV_SECRET);
    assert_int_equal(rc, 0);
    mc_store_free(s);
}

/* A client with a secret refuses a master that has none (all or nothing). */
static void test_secret_client_refuses_open_master(void **state)
{
    (void)state;
    fixture_t f = {0};
    const char *extra[] = {"--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1", NULL};
    assert_int_equal(mc_master_start(&f.master, 0, extra), 0);
    int rc = 0;
    assert_null(client(&f, SECRET, 0, &rc));
    assert_int_equal(rc, MC_ERR_ILLEGAL_CLIENT);
    mc_store_t *open = client(&f, NULL, 0, &rc); /* without a secret: upstream's behaviour */
    assert_non_null(open);
    mc_store_free(open);
    int st = mc_master_stop(&f.master, SIGTERM);
    assert_true(mc_clean_exit(st));
}

/* One raw HTTP request; returns the status code, 0 when no answer. */
static int raw_http(int port, const char *method, const char *path, const char *header,
                    const char *body)
{
    int fd = raw_connect("127.0.0.1", port);
    char req[2048];
    size_t blen = body ? strlen(body) : 0;
    int len =
        snprintf(req, sizeof(req),
                 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s"
                 "Content-Length: %zu\r\n\r\n%s",
                 method, path, header ? header : "", header ? "\r\n" : "", blen, body ? body : "");
    send_all(fd, req, (size_t)len);
    char resp[4096] = "";
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(resp) - 1 && (r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0)) > 0)
        got += (size_t)r;
    close(fd);
    int status = 0;
    sscanf(resp, "HTTP/1.%*d %d", &status);
    return status;
}

/* Metadata writes need a fresh proof; reads stay open. */
static void test_metadata_writes_need_proof(void **state)
{
    (void)state;
    mc_http_metadata_server_options_t o = {.cluster_secret = SECRET};
    mc_http_metadata_server_t *srv = NULL;
    assert_int_equal(mc_http_metadata_server_start_opts("127.0.0.1", 0, &o, &srv), 0);
    int port = mc_http_metadata_server_port(srv);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metadata", port);
    mc_auth_t *good = NULL, *bad = NULL;
    assert_int_equal(mc_auth_create(SECRET, strlen(SECRET), &good), 0);
    assert_int_equal(mc_auth_create("other", 5, &bad), 0);

    /* No proof, a wrong secret: 401, nothing stored. */
    assert_int_equal(raw_http(port, "PUT", "/metadata?key=k1", NULL, "{\"evil\":1}"), 401);
    assert_int_equal(mc_http_metadata_put_auth(bad, url, "k1", "{}", 2), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_http_metadata_server_size(srv), 0);

    /* With the secret: stored; readable without one. */
    assert_int_equal(mc_http_metadata_put_auth(good, url, "k1", "{\"v\":1}", 7), 0);
    char *v = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(url, "k1", &v, &len), 0);
    assert_memory_equal(v, "{\"v\":1}", 7);
    free(v);

    /* A proof is single use: replaying a captured header is refused. */
    char *ch = mc_http_get(port, "/metadata/auth_challenge");
    assert_non_null(ch);
    char *hex = strstr(ch, "\"nonce\":\"");
    assert_non_null(hex);
    uint8_t nonce[MC_AUTH_NONCE_LEN], mac[MC_AUTH_MAC_LEN];
    assert_int_equal(mc_auth_unhex(hex + 9, MC_AUTH_NONCE_LEN, nonce), 0);
    free(ch);
    const char *val = "{\"v\":2}";
    assert_int_equal(mc_auth_metadata_mac(good, "PUT", "k1", 2, nonce, val, strlen(val), mac), 0);
    char nh[2 * MC_AUTH_NONCE_LEN + 1], mh[2 * MC_AUTH_MAC_LEN + 1], header[256];
    mc_auth_hex(nonce, sizeof(nonce), nh);
    mc_auth_hex(mac, sizeof(mac), mh);
    snprintf(header, sizeof(header), "%s: %s.%s", MC_AUTH_HTTP_HEADER, nh, mh);
    assert_int_equal(raw_http(port, "PUT", "/metadata?key=k1", header, val), 200);
    assert_int_equal(raw_http(port, "PUT", "/metadata?key=k1", header, val), 401);
    /* The same proof for another body or another key is refused as well. */
    assert_int_equal(raw_http(port, "PUT", "/metadata?key=k2", header, val), 401);

    /* DELETE: no proof refused, with proof done. */
    assert_int_equal(raw_http(port, "DELETE", "/metadata?key=k1", NULL, NULL), 401);
    assert_int_equal(mc_http_metadata_server_size(srv), 1);
    assert_int_equal(mc_http_metadata_del_auth(good, url, "k1"), 0);
    assert_int_equal(mc_http_metadata_server_size(srv), 0);

    mc_auth_destroy(good);
    mc_auth_destroy(bad);
    mc_http_metadata_server_stop(srv);
}

/*
 * The offload fetch server (local-disk replicas read through their owner): a raw FETCH without
 * the handshake is refused before any file is read or staged.
 */
static void test_raw_offload_fetch_refused(void **state)
{
    (void)state;
    fixture_t f = {0};
    char flag[300], dir[128], env_path[200];
    snprintf(flag, sizeof(flag), "--cluster_secret=%s", SECRET);
    snprintf(dir, sizeof(dir), "/tmp/mc_security_offload_%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    const char *mflags[] = {flag, NULL};
    assert_int_equal(mc_master_start(&f.master, 1, mflags), 0);
    const char *hflags[] = {flag, "--enable_offload=true", NULL};
    const char *env[] = {env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    assert_int_equal(mc_holder_start(&f.holder, &f.master, "64MB", hflags, env, 20000), 0);
    mc_store_t *s = client(&f, SECRET, 0, NULL);
    assert_non_null(s);
    put_value(s, "sec/disk", 5);

    /* Wait for the disk replica: its descriptor names the owner's fetch endpoint. */
    mc_replica_desc_t d[4];
    size_t count = 0, k = 4;
    for (int i = 0; i < 600 && k == 4; i++) {
        assert_int_equal(mc_store_get_replica_desc(s, "sec/disk", d, 4, &count), 0);
        for (size_t j = 0; j < count && j < 4; j++)
            if (d[j].type == MC_REPLICA_LOCAL_DISK)
                k = j;
        if (k == 4)
            usleep(50 * 1000);
    }
    assert_true(k < 4);
    char host[64];
    int port = 0;
    assert_int_equal(sscanf(d[k].segment_name, "%63[^:]:%d", host, &port), 2);

    Mc__FetchRequest req = MC__FETCH_REQUEST__INIT;
    req.key = (char *)"sec/disk";
    req.version = d[k].address;
    req.size = VALUE_LEN;
    uint8_t body[256];
    size_t n = mc__fetch_request__pack(&req, body);
    int fd = raw_connect(host, port);
    send_frame(fd, MC_RPC_OFFLOAD_FETCH, body, n);
    uint16_t op = 0;
    assert_int_equal(read_answer(fd, &op), MC_ERR_ILLEGAL_CLIENT);
    close(fd);

    check_value(s, "sec/disk", 5);
    mc_store_free(s);
    mc_cluster_kill_all();
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Counts lines of a file containing `needle`. */
static int count_lines(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), fp))
        n += strstr(line, needle) != NULL;
    fclose(fp);
    return n;
}

static int master_log_warnings(const char *const *flags)
{
    char log[128], port[64];
    snprintf(log, sizeof(log), "/tmp/mc_security_master_%d.log", (int)getpid());
    snprintf(port, sizeof(port), "--rpc_port=%d", mc_test_free_port());
    char *argv[12] = {MASTER_BIN, port, "--metrics_port=0"};
    int argc = 3;
    for (int i = 0; flags[i]; i++)
        argv[argc++] = (char *)flags[i];
    argv[argc] = NULL;
    mc_proc_t p;
    assert_int_equal(mc_proc_start_logged(&p, argv, log, "Master service started", 20000), 0);
    int st = mc_proc_stop(&p, SIGTERM, 10000);
    assert_true(mc_clean_exit(st));
    int n = count_lines(log, "listens on all interfaces");
    unlink(log);
    return n;
}

/* One warning line on all interfaces without a secret; none on loopback or with a secret. */
static void test_open_listener_warning(void **state)
{
    (void)state;
    set_client_secret(NULL);
    const char *open_flags[] = {NULL};
    assert_int_equal(master_log_warnings(open_flags), 1);
    const char *loopback[] = {"--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1", NULL};
    assert_int_equal(master_log_warnings(loopback), 0);
    const char *secret[] = {"--cluster_secret=" SECRET, NULL};
    assert_int_equal(master_log_warnings(secret), 0);
}

int main(void)
{
    const struct CMUnitTest secured[] = {
        cmocka_unit_test(test_secret_holders_put_and_get),
        cmocka_unit_test(test_wrong_or_missing_secret_refused),
        cmocka_unit_test(test_raw_master_rpc_refused),
        cmocka_unit_test(test_raw_transfer_refused),
        cmocka_unit_test(test_silent_connection_closed),
        cmocka_unit_test(test_secret_file_env_wins_over_text_env),
    };
    const struct CMUnitTest others[] = {
        cmocka_unit_test(test_secret_client_refuses_open_master),
        cmocka_unit_test(test_metadata_writes_need_proof),
        cmocka_unit_test(test_raw_offload_fetch_refused),
        cmocka_unit_test(test_open_listener_warning),
    };
    int failed =
        cmocka_run_group_tests_name("secured cluster", secured, setup_secured, teardown_secured);
    failed += cmocka_run_group_tests_name("secret edges", others, NULL, NULL);
    mc_cluster_kill_all();
    return failed;
}
