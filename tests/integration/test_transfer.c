/*
 * test_transfer.c — Transfer Engine integration tests: this process is the initiator, te_peer
 * processes are the targets, all on loopback. Covers tcp, shm and local transports, batches,
 * range checks, malformed frames, dead peers and both metadata modes; in builds with the rdma
 * transport (MC_HAVE_RDMA) the same scenarios again over UCX (here without an RDMA device, so
 * over UCX's tcp transport), plus device selection, stopped peers and mixed tcp/rdma pairs.
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

static peer_t peer_a; /* P2PHANDSHAKE target, protocol tcp */
#ifdef MC_HAVE_RDMA
static peer_t peer_r; /* P2PHANDSHAKE target, protocol rdma */
#endif
static mc_http_metadata_server_t *http_meta; /* for the HTTP metadata tests */
static char http_url[128];

static int start_peer_with(peer_t *p, const char *metadata, uint64_t shm_len, uint64_t plain_len,
                           const char *protocol)
{
    char shm[32], plain[32];
    snprintf(shm, sizeof(shm), "%llu", (unsigned long long)shm_len);
    snprintf(plain, sizeof(plain), "%llu", (unsigned long long)plain_len);
    char *argv[] = {PEER_BIN, "127.0.0.1:0", (char *)metadata, shm, plain, (char *)protocol, NULL};
    if (mc_proc_start(&p->proc, argv, "READY ", 20000) != 0)
        return -1;
    unsigned long long a, b, c, d;
    if (sscanf(p->proc.ready_line, "READY %299s %llu %llu %llu %llu", p->name, &a, &b, &c, &d) != 5)
        return -1;
    p->shm_addr = a;
    p->shm_len = b;
    p->plain_addr = c;
    p->plain_len = d;
    return 0;
}

/* A peer stopped with SIGTERM exited 0 (not killed by a signal, e.g. an abort). */
static int exited_cleanly(int status)
{
    return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int start_peer(peer_t *p, const char *metadata, uint64_t shm_len, uint64_t plain_len)
{
    return start_peer_with(p, metadata, shm_len, plain_len, "tcp");
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

static mc_transfer_engine_t *new_engine_with(const char *protocol, int disable_shm,
                                             const char *metadata)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .metadata_server = metadata,
                                       .protocol = protocol,
                                       .disable_shm = disable_shm};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    assert_string_equal(mc_te_protocol(te), protocol);
    return te;
}

static mc_transfer_engine_t *new_engine(int disable_shm, const char *metadata)
{
    return new_engine_with("tcp", disable_shm, metadata);
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

/* Proof that same-host transfers really go through shared memory: with the owner stopped
 * (SIGSTOP) nothing can answer on tcp (nor UCX's tcp), yet shm copies still complete. */
static void shm_copies_without_the_owner_running(mc_transfer_engine_t *te, const peer_t *p)
{
    mc_segment_id_t seg = open_seg(te, p->name);
    uint8_t src[4096], dst[4096];
    fill_random(src, sizeof(src), 99);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, src, p->shm_addr, sizeof(src)), 0);
    assert_int_equal(mc_proc_freeze(p->proc.pid, 5000), 0);
    fill_random(src, sizeof(src), 100);
    int w = one(te, seg, MC_TRANSFER_WRITE, src, p->shm_addr + 8192, sizeof(src));
    int r = one(te, seg, MC_TRANSFER_READ, dst, p->shm_addr + 8192, sizeof(dst));
    /* Every thread of the owner was stopped before the first copy and still is after the last:
     * it served neither, so they went through shared memory. */
    int frozen = mc_proc_is_frozen(p->proc.pid);
    mc_proc_thaw(p->proc.pid);
    assert_int_equal(frozen, 1);
    assert_int_equal(w, 0);
    assert_int_equal(r, 0);
    assert_memory_equal(src, dst, sizeof(src));
    mc_te_destroy(te);
}

static void test_shm_copies_without_the_owner_running(void **state)
{
    shm_copies_without_the_owner_running(new_engine(0, NULL), &peer_a);
}

static void test_plain_memory_uses_tcp_even_with_shm_enabled(void **state)
{
    mc_transfer_engine_t *te = new_engine(0, NULL);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    round_trip_sizes(te, seg, peer_a.plain_addr, peer_a.plain_len);
    mc_te_destroy(te);
}

/* 64 requests of mixed sizes in one batch: write all, check every status, read all back. */
static void batch_of_64_mixed_sizes(mc_transfer_engine_t *te, const peer_t *p, uint64_t seed)
{
    enum { N = 64 };
    mc_segment_id_t seg = open_seg(te, p->name);
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
        fill_random(src[i], lens[i], 1000 + (uint64_t)i + seed * 100);
        w[i] = (mc_transfer_req_t){MC_TRANSFER_WRITE, src[i], seg, p->shm_addr + offs[i], lens[i]};
        r[i] = (mc_transfer_req_t){MC_TRANSFER_READ, dst[i], seg, p->shm_addr + offs[i], lens[i]};
    }
    assert_true(off <= p->shm_len);
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
    batch_of_64_mixed_sizes(new_engine(1, NULL), &peer_a, 1);
}

static void test_batch_of_64_mixed_sizes_over_shm(void **state)
{
    batch_of_64_mixed_sizes(new_engine(0, NULL), &peer_a, 0);
}

static void out_of_range_is_refused(mc_transfer_engine_t *te, const peer_t *p)
{
    mc_segment_id_t seg = open_seg(te, p->name);
    uint64_t end = p->plain_addr + p->plain_len;
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
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, junk, p->shm_addr + p->shm_len - 1, 2),
                     MC_ERR_INVALID_WRITE);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, after, end - 16, 16), 0);
    assert_memory_equal(before, after, 16);
    mc_te_destroy(te);
}

static void test_write_outside_registered_range_fails_over_tcp(void **state)
{
    out_of_range_is_refused(new_engine(1, NULL), &peer_a);
}

static void test_write_outside_registered_range_fails_with_shm(void **state)
{
    out_of_range_is_refused(new_engine(0, NULL), &peer_a);
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
    int fd = mc_test_connect("127.0.0.1", port, 5000);
    assert_true(fd >= 0);
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

#ifndef MC_HAVE_RDMA
static void test_rdma_protocol_fails_clearly_when_not_built(void **state)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0", .protocol = "rdma"};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), MC_ERR_NOT_SUPPORTED);
    assert_null(te);
}
#endif

static void test_unknown_protocol_is_rejected(void **state)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .protocol = "carrier-pigeon"};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), MC_ERR_INVALID_PARAMS);
    assert_null(te);
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

    assert_true(exited_cleanly(mc_proc_stop(&b.proc, SIGTERM, 10000)));
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
        reqs[i] =
            (mc_transfer_req_t){MC_TRANSFER_WRITE, src, a->seg,
                                a->addr + (uint64_t)(i % (int)(a->len / chunk)) * chunk, chunk};
    double t0 = now_s();
    a->rc = 0;
    for (int round = 0; round < 50 && a->rc == 0; round++)
        a->rc = mc_te_transfer_sync(a->te, reqs, N);
    a->seconds = now_s() - t0;
    free(src);
    return NULL;
}

static void peer_killed_mid_transfer_fails(const char *protocol)
{
    peer_t c;
    assert_int_equal(start_peer_with(&c, "P2PHANDSHAKE", 256 * MiB, 4096, protocol), 0);
    mc_transfer_engine_t *te = new_engine_with(protocol, 1, NULL);
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

static void test_peer_killed_mid_transfer_fails_over_tcp(void **state)
{
    peer_killed_mid_transfer_fails("tcp");
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

#ifdef MC_HAVE_RDMA
/* ---- rdma (UCX) ----------------------------------------------------------------------------
 * Initiators disable shm so that the bytes cross UCX even though every peer is on this host. */

static mc_transfer_engine_t *new_rdma_engine(void)
{
    return new_engine_with("rdma", 1, NULL);
}

static void test_rdma_round_trip_of_every_size(void **state)
{
    mc_transfer_engine_t *te = new_rdma_engine();
    mc_segment_id_t seg = open_seg(te, peer_r.name);
    round_trip_sizes(te, seg, peer_r.shm_addr, peer_r.shm_len);
    round_trip_sizes(te, seg, peer_r.plain_addr, peer_r.plain_len);
    mc_te_destroy(te);
}

static void test_rdma_peer_initial_bytes_read_back(void **state)
{
    mc_transfer_engine_t *te = new_rdma_engine();
    mc_segment_id_t seg = open_seg(te, peer_r.name);
    uint8_t buf[1000];
    uint64_t off = peer_r.plain_len - sizeof(buf);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, buf, peer_r.plain_addr + off, sizeof(buf)), 0);
    for (size_t i = 0; i < sizeof(buf); i++)
        assert_int_equal(buf[i], expected_initial(off + i));
    mc_te_destroy(te);
}

static void test_rdma_batch_of_64_mixed_sizes(void **state)
{
    batch_of_64_mixed_sizes(new_rdma_engine(), &peer_r, 2);
}

static void test_rdma_write_outside_registered_range_fails(void **state)
{
    out_of_range_is_refused(new_rdma_engine(), &peer_r);
}

static void test_rdma_into_registered_local_buffers(void **state)
{
    /* Source and destination inside the initiator's own registered memory: UCX gets their
     * memory handles. Both registration kinds (engine-allocated and caller-owned). */
    mc_transfer_engine_t *te = new_rdma_engine();
    mc_segment_id_t seg = open_seg(te, peer_r.name);
    size_t len = 3 * MiB + 7;
    void *shm;
    assert_int_equal(mc_te_alloc_segment_memory(te, 2 * len, &shm), 0);
    uint8_t *plain = malloc(len);
    assert_int_equal(mc_te_register_memory(te, plain, len), 0);
    uint8_t *src = shm, *dst = (uint8_t *)shm + len;
    fill_random(src, len, 31);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, src, peer_r.shm_addr + 11, len), 0);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, plain, peer_r.shm_addr + 11, len), 0);
    assert_memory_equal(src, plain, len);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, dst, peer_r.shm_addr + 11, len), 0);
    assert_memory_equal(src, dst, len);
    assert_int_equal(mc_te_unregister_memory(te, plain), 0);
    assert_int_equal(mc_te_free_segment_memory(te, shm), 0);
    free(plain);
    mc_te_destroy(te);
}

static void test_rdma_same_host_shm_keeps_priority(void **state)
{
    shm_copies_without_the_owner_running(new_engine_with("rdma", 0, NULL), &peer_r);
}

static void test_rdma_engine_reaches_a_tcp_peer_over_tcp(void **state)
{
    mc_transfer_engine_t *te = new_rdma_engine();
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    round_trip_sizes(te, seg, peer_a.plain_addr, peer_a.plain_len);
    mc_te_destroy(te);
}

static void test_tcp_engine_reaches_an_rdma_peer_over_tcp(void **state)
{
    mc_transfer_engine_t *te = new_engine(1, NULL);
    mc_segment_id_t seg = open_seg(te, peer_r.name);
    round_trip_sizes(te, seg, peer_r.plain_addr, peer_r.plain_len);
    mc_te_destroy(te);
}

static void test_rdma_http_metadata_carries_worker_address_and_rkeys(void **state)
{
    peer_t b;
    assert_int_equal(start_peer_with(&b, http_url, 20 * MiB, 4096, "rdma"), 0);
    char key[400], *value = NULL;
    size_t len = 0;
    snprintf(key, sizeof(key), "mooncake/ram/%s", b.name);
    assert_int_equal(mc_http_metadata_get(http_url, key, &value, &len), 0);
    assert_non_null(strstr(value, "\"rdma_address\""));
    assert_non_null(strstr(value, "\"rkey\""));
    free(value);

    mc_transfer_engine_t *te = new_engine_with("rdma", 1, http_url);
    round_trip_sizes(te, open_seg(te, b.name), b.shm_addr, b.shm_len);
    mc_te_destroy(te);
    assert_true(exited_cleanly(mc_proc_stop(&b.proc, SIGTERM, 10000)));
}

static int create_with_devices(const char *devices)
{
    mc_transfer_engine_config_t cfg = {
        .local_server_name = "127.0.0.1:0", .protocol = "rdma", .device_names = devices};
    mc_transfer_engine_t *te = NULL;
    int rc = mc_te_create(&cfg, &te);
    if (rc == 0) {
        round_trip_sizes(te, open_seg(te, peer_r.name), peer_r.plain_addr, peer_r.plain_len);
        mc_te_destroy(te);
    } else {
        assert_null(te);
    }
    return rc;
}

static void test_rdma_unknown_device_is_a_clear_error(void **state)
{
    assert_int_equal(create_with_devices("mc_no_such_hca0"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(create_with_devices("lo,mc_no_such_hca0:1"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(create_with_devices(" , "), MC_ERR_INVALID_PARAMS);
    /* A device that exists restricts UCX to it and works: loopback is on every host. */
    assert_int_equal(create_with_devices("lo"), 0);
}

static int host_has_rdma_device(void)
{
    FILE *f = popen("ls /sys/class/infiniband 2>/dev/null", "r");
    char line[64];
    int found = f && fgets(line, sizeof(line), f) != NULL;
    if (f)
        pclose(f);
    return found;
}

static void test_rdma_required_device_missing_is_an_error(void **state)
{
    if (host_has_rdma_device())
        skip(); /* the scenario needs a host without an RDMA device */
    setenv("MC_RDMA_REQUIRE_DEVICE", "1", 1);
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0", .protocol = "rdma"};
    mc_transfer_engine_t *te = NULL;
    int rc = mc_te_create(&cfg, &te);
    unsetenv("MC_RDMA_REQUIRE_DEVICE");
    assert_int_equal(rc, MC_ERR_NOT_SUPPORTED);
    assert_null(te);
}

static void test_rdma_peer_killed_mid_transfer_fails(void **state)
{
    peer_killed_mid_transfer_fails("rdma");
}

static void test_rdma_dead_peer_with_a_stale_http_descriptor_fails(void **state)
{
    /* Killed, the peer cannot unpublish: its descriptor (worker address, rkeys) stays in the
     * HTTP metadata, and a new engine connects to a worker that no longer exists. */
    peer_t e;
    assert_int_equal(start_peer_with(&e, http_url, 8 * MiB, 4096, "rdma"), 0);
    mc_transfer_engine_t *te = new_engine_with("rdma", 1, http_url);
    mc_segment_id_t seg = open_seg(te, e.name);
    uint8_t buf[4096];
    memset(buf, 7, sizeof(buf));
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, buf, e.shm_addr, sizeof(buf)), 0);
    mc_proc_stop(&e.proc, SIGKILL, 5000);
    double t0 = now_s();
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, buf, e.shm_addr, sizeof(buf)),
                     MC_ERR_TRANSFER_FAIL);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, buf, e.shm_addr, sizeof(buf)),
                     MC_ERR_TRANSFER_FAIL);
    mc_transfer_engine_t *fresh = new_engine_with("rdma", 1, http_url);
    seg = open_seg(fresh, e.name);
    assert_int_equal(one(fresh, seg, MC_TRANSFER_WRITE, buf, e.shm_addr, sizeof(buf)),
                     MC_ERR_TRANSFER_FAIL);
    assert_true(now_s() - t0 < 10.0);
    mc_te_destroy(fresh);
    mc_te_destroy(te);
}

static void test_rdma_stopped_peer_fails_within_the_timeout_then_recovers(void **state)
{
    peer_t d;
    assert_int_equal(start_peer_with(&d, "P2PHANDSHAKE", 8 * MiB, 4096, "rdma"), 0);
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .protocol = "rdma",
                                       .disable_shm = 1,
                                       .transfer_timeout_ms = 2000};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    mc_segment_id_t seg = open_seg(te, d.name);
    size_t len = 4 * MiB;
    uint8_t *src = malloc(len), *dst = malloc(len);
    fill_random(src, len, 55);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, src, d.shm_addr, len), 0);

    assert_int_equal(mc_proc_freeze(d.proc.pid, 5000), 0);
    uint8_t *src2 = malloc(len);
    fill_random(src2, len, 56);
    memset(dst, 0, len);
    double t0 = now_s();
    int w = one(te, seg, MC_TRANSFER_WRITE, src2, d.shm_addr, len);
    int r = one(te, seg, MC_TRANSFER_READ, dst, d.shm_addr, len);
    double took = now_s() - t0;
    int frozen = mc_proc_is_frozen(d.proc.pid);
    mc_proc_thaw(d.proc.pid);
    /* A write to a peer that is stopped for the whole call cannot be acknowledged by it: the
     * engine must report it failed within the timeout, never success (the caller would then
     * trust bytes nobody confirmed). The read likewise. */
    assert_int_equal(frozen, 1);
    assert_int_equal(w, MC_ERR_TRANSFER_FAIL);
    assert_int_equal(r, MC_ERR_TRANSFER_FAIL);
    assert_true(took < 20.0); /* each bounded by the 2 s timeout, plus reconnect attempts */
    free(src2);

    /* Running again: the engine reconnects and moves bytes. The resumed peer found it had been
     * stalled and replaced its serving worker (nothing queued meanwhile is applied), so a
     * transfer caught on the old worker may fail once more: retried until the peer serves. */
    memset(dst, 0, len);
    double until = now_s() + 15.0;
    while (one(te, seg, MC_TRANSFER_WRITE, src, d.shm_addr, len) != 0)
        assert_true(now_s() < until);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, dst, d.shm_addr, len), 0);
    assert_memory_equal(src, dst, len);
    free(src);
    free(dst);
    mc_te_destroy(te);
    assert_true(exited_cleanly(mc_proc_stop(&d.proc, SIGTERM, 10000)));
}
#endif

static int setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    if (mc_http_metadata_server_start("127.0.0.1", 0, &http_meta) != 0)
        return -1;
    snprintf(http_url, sizeof(http_url), "http://127.0.0.1:%d/metadata",
             mc_http_metadata_server_port(http_meta));
#ifdef MC_HAVE_RDMA
    if (start_peer_with(&peer_r, "P2PHANDSHAKE", 64 * MiB, 20 * MiB, "rdma") != 0)
        return -1;
#endif
    return start_peer(&peer_a, "P2PHANDSHAKE", 64 * MiB, 20 * MiB);
}

/* The last test: the peers stop cleanly on SIGTERM (a test, so a failure counts: Debian's cmocka
 * prints a failing group teardown but does not count it). */
static void test_peers_stop_cleanly(void **state)
{
    assert_true(exited_cleanly(mc_proc_stop(&peer_a.proc, SIGTERM, 10000)));
    peer_a.proc.pid = -1;
#ifdef MC_HAVE_RDMA
    assert_true(exited_cleanly(mc_proc_stop(&peer_r.proc, SIGTERM, 10000)));
    peer_r.proc.pid = -1;
#endif
}

static int teardown(void **state)
{
    if (peer_a.proc.pid > 0) /* a failed test before the last one */
        mc_proc_stop(&peer_a.proc, SIGKILL, 10000);
#ifdef MC_HAVE_RDMA
    if (peer_r.proc.pid > 0)
        mc_proc_stop(&peer_r.proc, SIGKILL, 10000);
#endif
    mc_http_metadata_server_stop(http_meta);
    return 0;
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
#ifndef MC_HAVE_RDMA
        cmocka_unit_test(test_rdma_protocol_fails_clearly_when_not_built),
#endif
        cmocka_unit_test(test_unknown_protocol_is_rejected),
        cmocka_unit_test(test_bad_arguments_are_rejected),
        cmocka_unit_test(test_unreachable_segment_is_not_found),
        cmocka_unit_test(test_http_metadata_publishes_and_finds_segments),
        cmocka_unit_test(test_peer_killed_mid_transfer_fails_over_tcp),
        cmocka_unit_test(test_peer_killed_fails_shm_transfers),
#ifdef MC_HAVE_RDMA
        cmocka_unit_test(test_rdma_round_trip_of_every_size),
        cmocka_unit_test(test_rdma_peer_initial_bytes_read_back),
        cmocka_unit_test(test_rdma_batch_of_64_mixed_sizes),
        cmocka_unit_test(test_rdma_write_outside_registered_range_fails),
        cmocka_unit_test(test_rdma_into_registered_local_buffers),
        cmocka_unit_test(test_rdma_same_host_shm_keeps_priority),
        cmocka_unit_test(test_rdma_engine_reaches_a_tcp_peer_over_tcp),
        cmocka_unit_test(test_tcp_engine_reaches_an_rdma_peer_over_tcp),
        cmocka_unit_test(test_rdma_http_metadata_carries_worker_address_and_rkeys),
        cmocka_unit_test(test_rdma_unknown_device_is_a_clear_error),
        cmocka_unit_test(test_rdma_required_device_missing_is_an_error),
        cmocka_unit_test(test_rdma_peer_killed_mid_transfer_fails),
        cmocka_unit_test(test_rdma_dead_peer_with_a_stale_http_descriptor_fails),
        cmocka_unit_test(test_rdma_stopped_peer_fails_within_the_timeout_then_recovers),
#endif
        cmocka_unit_test(test_peers_stop_cleanly),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
