/*
 * test_transfer.c — Transfer Engine integration tests: this process is the initiator, te_peer
 * processes are the targets, all on loopback. Covers tcp, shm and local transports, batches,
 * range checks, malformed frames, dead peers and both metadata modes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/http_metadata.h"
#include "mooncake/transfer_engine.h"
#include "proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define PEER_BIN MC_BUILD_DIR "/tests/integration/te_peer"

typedef struct peer {
    mc_proc_t proc;
    char name[300];
    uint64_t shm_addr, shm_len, plain_addr, plain_len;
} peer_t;

static peer_t peer_a;                        /* P2PHANDSHAKE target */
static mc_http_metadata_server_t *http_meta; /* for the HTTP metadata tests */
static char http_url[128];

static int start_peer(peer_t *p, const char *metadata, uint64_t shm_len, uint64_t plain_len)
{
    char shm[32], plain[32];
    snprintf(shm, sizeof(shm), "%llu", (unsigned long long)shm_len);
    snprintf(plain, sizeof(plain), "%llu", (unsigned long long)plain_len);
    char *argv[] = {PEER_BIN, "127.0.0.1:0", (char *)metadata, shm, plain, NULL};
    if (mc_proc_start(&p->proc, argv, "READY ", 20000) != 0)
        return -1;
    unsigned long long a, b, c, d;
    if (sscanf(p->proc.ready_line, "READY %299s %llu %llu %llu %llu", p->name, &a, &b, &c, &d) !=
        5)
        return -1;
    p->shm_addr = a;
    p->shm_len = b;
    p->plain_addr = c;
    p->plain_len = d;
    return 0;
}

static uint8_t expected_initial(uint64_t offset)
{
    return (uint8_t)(offset * 7 + 3);
}

static void fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

static mc_transfer_engine_t *new_engine(int disable_shm, const char *metadata)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .metadata_server = metadata,
                                       .disable_shm = disable_shm};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    return te;
}

static int one(mc_transfer_engine_t *te, mc_segment_id_t seg, mc_transfer_opcode_t op, void *buf,
               uint64_t addr, size_t len)
{
    mc_transfer_req_t req = {op, buf, seg, addr, len};
    return mc_te_transfer_sync(te, &req, 1);
}

/* Writes random bytes of each size at spread offsets of a region, reads them back, compares. */
static void round_trip_sizes(mc_transfer_engine_t *te, mc_segment_id_t seg, uint64_t base,
                             uint64_t region_len)
{
    const size_t sizes[] = {1, 511, 512, 64 * 1024 + 1, 16 * MiB};
    uint64_t offset = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = sizes[i];
        if (offset + len > region_len)
            offset = 0;
        assert_true(len <= region_len);
        uint8_t *src = malloc(len), *dst = malloc(len);
        fill_random(src, len, i + 1);
        memset(dst, 0, len);
        assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, src, base + offset, len), 0);
        assert_int_equal(one(te, seg, MC_TRANSFER_READ, dst, base + offset, len), 0);
        assert_memory_equal(src, dst, len);
        free(src);
        free(dst);
        offset += len + 4093; /* odd gaps: unaligned offsets */
    }
}

static mc_segment_id_t open_seg(mc_transfer_engine_t *te, const char *name)
{
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_te_open_segment(te, name, &seg), 0);
    return seg;
}

static void test_tcp_round_trip_of_every_size(void **state)
{
    mc_transfer_engine_t *te = new_engine(1, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    round_trip_sizes(te, seg, peer_a.shm_addr, peer_a.shm_len);
    round_trip_sizes(te, seg, peer_a.plain_addr, peer_a.plain_len);
    mc_te_destroy(te);
}

static void test_shm_round_trip_of_every_size(void **state)
{
    mc_transfer_engine_t *te = new_engine(0, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    round_trip_sizes(te, seg, peer_a.shm_addr, peer_a.shm_len);
    mc_te_destroy(te);
}

static void test_shm_copies_without_the_owner_running(void **state)
{
    /* Proof that same-host transfers really go through shared memory: with the owner stopped
     * (SIGSTOP) nothing can answer on tcp, yet shm copies still complete. */
    mc_transfer_engine_t *te = new_engine(0, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    uint8_t src[4096], dst[4096];
    fill_random(src, sizeof(src), 99);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, src, peer_a.shm_addr, sizeof(src)), 0);
    kill(peer_a.proc.pid, SIGSTOP);
    fill_random(src, sizeof(src), 100);
    int w = one(te, seg, MC_TRANSFER_WRITE, src, peer_a.shm_addr + 8192, sizeof(src));
    int r = one(te, seg, MC_TRANSFER_READ, dst, peer_a.shm_addr + 8192, sizeof(dst));
    kill(peer_a.proc.pid, SIGCONT);
    assert_int_equal(w, 0);
    assert_int_equal(r, 0);
    assert_memory_equal(src, dst, sizeof(src));
    mc_te_destroy(te);
}

static void test_plain_memory_uses_tcp_even_with_shm_enabled(void **state)
{
    mc_transfer_engine_t *te = new_engine(0, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    round_trip_sizes(te, seg, peer_a.plain_addr, peer_a.plain_len);
    mc_te_destroy(te);
}

static void batch_of_64_mixed_sizes(int disable_shm)
{
    enum { N = 64 };
    mc_transfer_engine_t *te = new_engine(disable_shm, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    size_t lens[N];
    uint64_t offs[N];
    uint8_t *src[N], *dst[N];
    mc_transfer_req_t w[N], r[N];
    uint64_t off = 0;
    for (int i = 0; i < N; i++) {
        lens[i] = (i % 4 == 0) ? (size_t)(i + 1) * 65536 + 17 : (size_t)(i * 977 + 1);
        offs[i] = off;
        off += lens[i] + 64;
        src[i] = malloc(lens[i]);
        dst[i] = calloc(1, lens[i]);
        fill_random(src[i], lens[i], 1000 + (uint64_t)i + (uint64_t)disable_shm * 100);
        w[i] = (mc_transfer_req_t){MC_TRANSFER_WRITE, src[i], seg, peer_a.shm_addr + offs[i],
                                   lens[i]};
        r[i] = (mc_transfer_req_t){MC_TRANSFER_READ, dst[i], seg, peer_a.shm_addr + offs[i],
                                   lens[i]};
    }
    assert_true(off <= peer_a.shm_len);
    mc_batch_t *b;
    assert_int_equal(mc_te_batch_create(te, N, &b), 0);
    assert_int_equal(mc_te_submit(b, w, N), 0);
    assert_int_equal(mc_te_wait(b, 60000), 0);
    for (int i = 0; i < N; i++) {
        mc_transfer_status_t st;
        assert_int_equal(mc_te_get_status(b, (size_t)i, &st), 0);
        assert_int_equal(st.state, MC_TRANSFER_COMPLETED);
        assert_int_equal(st.transferred_bytes, lens[i]);
    }
    mc_te_batch_free(b);
    assert_int_equal(mc_te_transfer_sync(te, r, N), 0);
    for (int i = 0; i < N; i++) {
        assert_memory_equal(src[i], dst[i], lens[i]);
        free(src[i]);
        free(dst[i]);
    }
    mc_te_destroy(te);
}

static void test_batch_of_64_mixed_sizes_over_tcp(void **state)
{
    batch_of_64_mixed_sizes(1);
}

static void test_batch_of_64_mixed_sizes_over_shm(void **state)
{
    batch_of_64_mixed_sizes(0);
}

static void out_of_range_is_refused(int disable_shm)
{
    mc_transfer_engine_t *te = new_engine(disable_shm, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    uint64_t end = peer_a.plain_addr + peer_a.plain_len;
    uint8_t before[16], after[16], junk[32];
    memset(junk, 0xEE, sizeof(junk));
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, before, end - 16, 16), 0);

    /* Straddles the end of the registered range: nothing may move. */
    mc_batch_t *b;
    mc_transfer_req_t req = {MC_TRANSFER_WRITE, junk, seg, end - 16, sizeof(junk)};
    assert_int_equal(mc_te_batch_create(te, 1, &b), 0);
    assert_int_equal(mc_te_submit(b, &req, 1), 0);
    assert_int_equal(mc_te_wait(b, 10000), MC_ERR_INVALID_WRITE);
    mc_transfer_status_t st;
    assert_int_equal(mc_te_get_status(b, 0, &st), 0);
    assert_int_equal(st.state, MC_TRANSFER_FAILED);
    assert_int_equal(st.error, MC_ERR_INVALID_WRITE);
    mc_te_batch_free(b);

    assert_int_equal(one(te, seg, MC_TRANSFER_READ, junk, end - 16, sizeof(junk)),
                     MC_ERR_INVALID_READ);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, junk, 4096, 16), MC_ERR_INVALID_WRITE);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, junk, peer_a.shm_addr + peer_a.shm_len - 1, 2),
                     MC_ERR_INVALID_WRITE);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, after, end - 16, 16), 0);
    assert_memory_equal(before, after, 16);
    mc_te_destroy(te);
}

static void test_write_outside_registered_range_fails_over_tcp(void **state)
{
    out_of_range_is_refused(1);
}

static void test_write_outside_registered_range_fails_with_shm(void **state)
{
    out_of_range_is_refused(0);
}

static int port_of(const char *name)
{
    const char *c = strrchr(name, ':');
    return c ? atoi(c + 1) : -1;
}

/* The server closed the connection (EOF or reset), rather than leaving it open until timeout. */
static void assert_closed_by_server(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, 0);
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void test_garbage_frames_are_rejected_and_server_keeps_serving(void **state)
{
    int port = port_of(peer_a.name);
    /* 1. random bytes: bad magic */
    int fd = raw_connect(port);
    char garbage[64];
    fill_random((uint8_t *)garbage, sizeof(garbage), 7);
    assert_int_equal(send(fd, garbage, sizeof(garbage), 0), (ssize_t)sizeof(garbage));
    assert_closed_by_server(fd);
    close(fd);
    /* 2. valid magic and version, absurd body length */
    fd = raw_connect(port);
    uint8_t hdr[24] = {'M', 'C', 'K', '1', 1, 0, 3, 0};
    hdr[16] = hdr[17] = hdr[18] = hdr[19] = 0xff;
    assert_int_equal(send(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
    assert_closed_by_server(fd);
    close(fd);
    /* 3. valid header, undecodable body */
    fd = raw_connect(port);
    uint8_t frame[24 + 8] = {'M', 'C', 'K', '1', 1, 0, 3, 0};
    frame[16] = 8;
    memset(frame + 24, 0xff, 8);
    assert_int_equal(send(fd, frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
    assert_closed_by_server(fd);
    close(fd);
    /* 4. a connection that says nothing and hangs up */
    fd = raw_connect(port);
    close(fd);

    mc_transfer_engine_t *te = new_engine(1, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    round_trip_sizes(te, seg, peer_a.plain_addr, peer_a.plain_len);
    mc_te_destroy(te);
}

static void test_local_segment_is_memcpy(void **state)
{
    mc_transfer_engine_t *te = new_engine(0, NULL);
    void *mem;
    assert_int_equal(mc_te_alloc_segment_memory(te, 32 * MiB, &mem), 0);
    mc_segment_id_t seg = open_seg(te, mc_te_local_segment_name(te));
    round_trip_sizes(te, seg, (uint64_t)(uintptr_t)mem, 32 * MiB);
    uint8_t x[8];
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, x, (uint64_t)(uintptr_t)mem + 32 * MiB - 4, 8),
                     MC_ERR_INVALID_READ);
    assert_int_equal(mc_te_free_segment_memory(te, mem), 0);
    assert_int_equal(mc_te_free_segment_memory(te, mem), MC_ERR_INVALID_PARAMS);
    mc_te_destroy(te);
}

static void test_rdma_protocol_fails_clearly_when_not_built(void **state)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0", .protocol = "rdma"};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), MC_ERR_NOT_SUPPORTED);
    assert_null(te);
    cfg.protocol = "carrier-pigeon";
    assert_int_equal(mc_te_create(&cfg, &te), MC_ERR_INVALID_PARAMS);
}

static void test_bad_arguments_are_rejected(void **state)
{
    mc_transfer_engine_t *te = new_engine(1, NULL);
    mc_segment_id_t seg;
    assert_int_equal(mc_te_open_segment(te, "no-port", &seg), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_te_open_segment(te, "127.0.0.1:99999", &seg), MC_ERR_INVALID_PARAMS);
    seg = open_seg(te, peer_a.name);
    uint8_t buf[8];
    mc_batch_t *b;
    assert_int_equal(mc_te_batch_create(te, 1, &b), 0);
    mc_transfer_req_t bad_len = {MC_TRANSFER_WRITE, buf, seg, peer_a.shm_addr, 0};
    mc_transfer_req_t bad_seg = {MC_TRANSFER_WRITE, buf, 12345, peer_a.shm_addr, 8};
    mc_transfer_req_t bad_op = {(mc_transfer_opcode_t)7, buf, seg, peer_a.shm_addr, 8};
    mc_transfer_req_t good = {MC_TRANSFER_WRITE, buf, seg, peer_a.plain_addr, 8};
    assert_int_equal(mc_te_submit(b, &bad_len, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_te_submit(b, &bad_seg, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_te_submit(b, &bad_op, 1), MC_ERR_INVALID_PARAMS);
    mc_transfer_req_t two[2] = {good, good};
    assert_int_equal(mc_te_submit(b, two, 2), MC_ERR_INVALID_PARAMS); /* over capacity */
    assert_int_equal(mc_te_submit(b, &good, 1), 0);
    assert_int_equal(mc_te_wait(b, 10000), 0);
    mc_te_batch_free(b);
    assert_int_equal(mc_te_register_memory(te, NULL, 8), MC_ERR_INVALID_PARAMS);
    char *mem = malloc(4096);
    assert_int_equal(mc_te_register_memory(te, mem, 4096), 0);
    assert_int_equal(mc_te_register_memory(te, mem + 100, 10), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_te_unregister_memory(te, mem), 0);
    assert_int_equal(mc_te_unregister_memory(te, mem), MC_ERR_INVALID_PARAMS);
    free(mem);
    mc_te_destroy(te);
}

static void test_unreachable_segment_is_not_found(void **state)
{
    mc_transfer_engine_t *te = new_engine(1, NULL);
    mc_segment_id_t seg;
    int port = mc_test_free_port();
    char name[64];
    snprintf(name, sizeof(name), "127.0.0.1:%d", port);
    assert_int_equal(mc_te_open_segment(te, name, &seg), MC_ERR_SEGMENT_NOT_FOUND);
    mc_te_destroy(te);
}

static void test_http_metadata_publishes_and_finds_segments(void **state)
{
    peer_t b;
    assert_int_equal(start_peer(&b, http_url, 20 * MiB, 4096), 0);
    char key[400], *value = NULL;
    size_t len = 0;
    snprintf(key, sizeof(key), "mooncake/ram/%s", b.name);
    assert_int_equal(mc_http_metadata_get(http_url, key, &value, &len), 0);
    assert_non_null(strstr(value, "\"buffers\""));
    free(value);

    mc_transfer_engine_t *te = new_engine(1, http_url);
    round_trip_sizes(te, open_seg(te, b.name), b.shm_addr, b.shm_len);
    /* A peer that registered with P2PHANDSHAKE is still reachable from an HTTP-configured one. */
    round_trip_sizes(te, open_seg(te, peer_a.name), peer_a.plain_addr, peer_a.plain_len);
    mc_te_destroy(te);

    assert_int_equal(WEXITSTATUS(mc_proc_stop(&b.proc, SIGTERM, 10000)), 0);
    /* A clean exit unpublishes the segment. */
    assert_int_equal(mc_http_metadata_get(http_url, key, &value, &len), MC_ERR_OBJECT_NOT_FOUND);
}

typedef struct bulk_arg {
    mc_transfer_engine_t *te;
    mc_segment_id_t seg;
    uint64_t addr, len;
    int rc;
    double seconds;
} bulk_arg_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *bulk_writer(void *p)
{
    bulk_arg_t *a = p;
    enum { N = 64 };
    size_t chunk = 16 * MiB;
    uint8_t *src = malloc(chunk);
    memset(src, 0x5a, chunk);
    mc_transfer_req_t reqs[N];
    for (int i = 0; i < N; i++)
        reqs[i] = (mc_transfer_req_t){MC_TRANSFER_WRITE, src, a->seg,
                                      a->addr + (uint64_t)(i % (int)(a->len / chunk)) * chunk,
                                      chunk};
    double t0 = now_s();
    a->rc = 0;
    for (int round = 0; round < 50 && a->rc == 0; round++)
        a->rc = mc_te_transfer_sync(a->te, reqs, N);
    a->seconds = now_s() - t0;
    free(src);
    return NULL;
}

static void test_peer_killed_mid_transfer_fails_over_tcp(void **state)
{
    peer_t c;
    assert_int_equal(start_peer(&c, "P2PHANDSHAKE", 256 * MiB, 4096), 0);
    mc_transfer_engine_t *te = new_engine(1, NULL);
    bulk_arg_t a = {te, open_seg(te, c.name), c.shm_addr, c.shm_len, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, bulk_writer, &a);
    usleep(300 * 1000);
    mc_proc_stop(&c.proc, SIGKILL, 5000);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, MC_ERR_TRANSFER_FAIL);
    assert_true(a.seconds < 60.0); /* failed, did not hang until the end of the workload */
    mc_te_destroy(te);
}

static void test_peer_killed_fails_shm_transfers(void **state)
{
    peer_t d;
    assert_int_equal(start_peer(&d, "P2PHANDSHAKE", 8 * MiB, 4096), 0);
    mc_transfer_engine_t *te = new_engine(0, NULL);
    mc_segment_id_t seg = open_seg(te, d.name);
    uint8_t buf[4096];
    memset(buf, 1, sizeof(buf));
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, buf, d.shm_addr, sizeof(buf)), 0);
    mc_proc_stop(&d.proc, SIGKILL, 5000);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, buf, d.shm_addr, sizeof(buf)),
                     MC_ERR_TRANSFER_FAIL);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, buf, d.shm_addr, sizeof(buf)),
                     MC_ERR_TRANSFER_FAIL);
    mc_te_destroy(te);
}

static void test_peer_initial_bytes_read_back(void **state)
{
    /* The target's own writes are visible to peers: check its fill pattern over both paths. */
    for (int disable = 0; disable <= 1; disable++) {
        mc_transfer_engine_t *te = new_engine(disable, NULL);
        mc_segment_id_t seg = open_seg(te, peer_a.name);
        uint8_t buf[1000];
        uint64_t off = peer_a.shm_len - sizeof(buf);
        assert_int_equal(one(te, seg, MC_TRANSFER_READ, buf, peer_a.shm_addr + off, sizeof(buf)),
                         0);
        for (size_t i = 0; i < sizeof(buf); i++)
            assert_int_equal(buf[i], expected_initial(off + i));
        mc_te_destroy(te);
    }
}

static int setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    if (mc_http_metadata_server_start("127.0.0.1", 0, &http_meta) != 0)
        return -1;
    snprintf(http_url, sizeof(http_url), "http://127.0.0.1:%d/metadata",
             mc_http_metadata_server_port(http_meta));
    return start_peer(&peer_a, "P2PHANDSHAKE", 64 * MiB, 20 * MiB);
}

static int teardown(void **state)
{
    int st = mc_proc_stop(&peer_a.proc, SIGTERM, 10000);
    mc_http_metadata_server_stop(http_meta);
    return (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_initial_bytes_read_back),
        cmocka_unit_test(test_tcp_round_trip_of_every_size),
        cmocka_unit_test(test_shm_round_trip_of_every_size),
        cmocka_unit_test(test_shm_copies_without_the_owner_running),
        cmocka_unit_test(test_plain_memory_uses_tcp_even_with_shm_enabled),
        cmocka_unit_test(test_batch_of_64_mixed_sizes_over_tcp),
        cmocka_unit_test(test_batch_of_64_mixed_sizes_over_shm),
        cmocka_unit_test(test_write_outside_registered_range_fails_over_tcp),
        cmocka_unit_test(test_write_outside_registered_range_fails_with_shm),
        cmocka_unit_test(test_garbage_frames_are_rejected_and_server_keeps_serving),
        cmocka_unit_test(test_local_segment_is_memcpy),
        cmocka_unit_test(test_rdma_protocol_fails_clearly_when_not_built),
        cmocka_unit_test(test_bad_arguments_are_rejected),
        cmocka_unit_test(test_unreachable_segment_is_not_found),
        cmocka_unit_test(test_http_metadata_publishes_and_finds_segments),
        cmocka_unit_test(test_peer_killed_mid_transfer_fails_over_tcp),
        cmocka_unit_test(test_peer_killed_fails_shm_transfers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
