/*
 * test_deadline.c — one deadline per transfer call, not per slice: a batch to a stalled
 * (SIGSTOPped) peer fails within the transfer timeout plus a margin, however many requests and
 * slices it has, and the requests of the batch to a healthy peer still complete with the exact
 * bytes. A healthy big batch still completes (the 1 ns per byte allowance).
 *
 * Real processes on loopback: te_peer targets (tcp, and rdma = UCX over tcp on this host), and
 * for the store case mooncake_master and a mooncake_client holder. MC_TRANSFER_TIMEOUT=5 and no
 * shared memory (MC_DISABLE_SHM=1 / disable_shm) so that bytes go over tcp or UCX.
 *
 * Before the fix every slice waited a fresh full timeout behind the engine's 4 worker threads:
 * 32 × 4 KiB to a stopped peer took 41 s, 8 × 16 MiB (32 slices) the same; a get_batch of 32
 * keys on a stopped holder 41 s. The bound asserted here is the timeout + 5 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster.h"
#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"
#include "proc.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PEER_BIN MC_BUILD_DIR "/tests/integration/te_peer"
#define TIMEOUT_S 5
#define BOUND_MS (TIMEOUT_S * 1000 + 5000) /* timeout + a margin for a loaded 2-core machine */
#define MIB (1024u * 1024u)
#define PEER_PLAIN (128u * MIB)

typedef struct peer {
    mc_proc_t proc;
    char name[300];
    uint64_t plain_addr;
} peer_t;

static peer_t healthy, stalled;
static int stalled_stopped;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* te_peer fills its memory with (offset * 7 + 3) & 0xff. */
static size_t pattern_diff(const uint8_t *p, size_t len, uint64_t remote_off)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != (uint8_t)((remote_off + i) * 7 + 3))
            return i;
    return len;
}

static int start_peer(peer_t *p, const char *protocol)
{
    char plain[32];
    snprintf(plain, sizeof(plain), "%u", PEER_PLAIN);
    char *argv[] = {PEER_BIN, "127.0.0.1:0", "P2PHANDSHAKE", "4096", plain, (char *)protocol, NULL};
    if (mc_proc_start(&p->proc, argv, "READY ", 30000) != 0)
        return -1;
    mc_cluster_track(p->proc.pid);
    unsigned long long a, b, c, d;
    if (sscanf(p->proc.ready_line, "READY %299s %llu %llu %llu %llu", p->name, &a, &b, &c, &d) != 5)
        return -1;
    p->plain_addr = c;
    return 0;
}

static mc_transfer_engine_t *engine(const char *protocol)
{
    setenv("MC_TRANSFER_TIMEOUT", "5", 1);
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .metadata_server = "P2PHANDSHAKE",
                                       .protocol = protocol,
                                       .disable_shm = 1};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    return te;
}

/*
 * One batch: `nh` requests of `len` bytes to the healthy peer first, then `ns` to the stalled
 * one. Asserts the call ends within BOUND_MS, the healthy requests completed with the exact bytes
 * (reads: the peer's pattern; writes: read back afterwards) and the stalled ones failed.
 */
static void mixed_batch(mc_transfer_engine_t *te, int opcode, size_t nh, size_t ns, size_t len)
{
    mc_segment_id_t hs, ss;
    assert_int_equal(mc_te_open_segment(te, healthy.name, &hs), 0);
    assert_int_equal(mc_te_open_segment(te, stalled.name, &ss), 0);
    size_t n = nh + ns;
    uint8_t *buf = malloc(n * len);
    assert_non_null(buf);
    for (size_t i = 0; i < n * len; i++)
        buf[i] = (uint8_t)(i * 13 + 5);
    mc_transfer_req_t *reqs = calloc(n, sizeof(*reqs));
    for (size_t i = 0; i < n; i++) {
        int h = i < nh;
        size_t slot = (h ? i : i - nh) % (PEER_PLAIN / len);
        reqs[i] =
            (mc_transfer_req_t){opcode, buf + i * len, h ? hs : ss,
                                (h ? healthy.plain_addr : stalled.plain_addr) + slot * len, len};
    }
    mc_batch_t *b = NULL;
    assert_int_equal(mc_te_batch_create(te, n, &b), 0);
    uint64_t t0 = now_ms();
    assert_int_equal(mc_te_submit(b, reqs, n), 0);
    int rc = mc_te_wait(b, -1);
    uint64_t took = now_ms() - t0;
    print_message("%s %zu x %zu bytes (%zu to the stopped peer): %s in %llu ms\n",
                  opcode == MC_TRANSFER_READ ? "read" : "write", n, len, ns, mc_error_name(rc),
                  (unsigned long long)took);
    assert_int_equal(rc, MC_ERR_TRANSFER_FAIL);
    assert_true(took <= BOUND_MS);
    for (size_t i = 0; i < n; i++) {
        mc_transfer_status_t st;
        assert_int_equal(mc_te_get_status(b, i, &st), 0);
        if (i < nh) {
            assert_int_equal(st.state, MC_TRANSFER_COMPLETED);
            assert_int_equal(st.transferred_bytes, len);
            if (opcode == MC_TRANSFER_READ)
                assert_int_equal(pattern_diff(buf + i * len, len, (i % (PEER_PLAIN / len)) * len),
                                 len);
        } else {
            assert_int_equal(st.state, MC_TRANSFER_FAILED);
            assert_int_equal(st.error, MC_ERR_TRANSFER_FAIL);
        }
    }
    mc_te_batch_free(b);
    if (opcode == MC_TRANSFER_WRITE) { /* the healthy peer holds exactly what was written */
        uint8_t *back = malloc(nh * len);
        for (size_t i = 0; i < nh; i++) {
            reqs[i].opcode = MC_TRANSFER_READ;
            reqs[i].source = back + i * len;
        }
        assert_int_equal(mc_te_transfer_sync(te, reqs, nh), 0);
        assert_memory_equal(back, buf, nh * len);
        free(back);
    }
    free(reqs);
    free(buf);
}

static void stalled_batches(const char *protocol)
{
    assert_int_equal(start_peer(&healthy, protocol), 0);
    assert_int_equal(start_peer(&stalled, protocol), 0);
    mc_transfer_engine_t *te = engine(protocol);
    /* Both peers answer first (connections pooled, rdma endpoints proven). */
    uint8_t one[8];
    mc_segment_id_t ss;
    assert_int_equal(mc_te_open_segment(te, stalled.name, &ss), 0);
    mc_transfer_req_t warm = {MC_TRANSFER_READ, one, ss, stalled.plain_addr, sizeof(one)};
    assert_int_equal(mc_te_transfer_sync(te, &warm, 1), 0);

    stalled_stopped = 1; /* set first: a failed freeze still leaves a SIGSTOP to undo */
    assert_int_equal(mc_proc_freeze(stalled.proc.pid, 5000), 0);
    /* Reads first: they check the healthy peer's initial pattern, which the writes replace. */
    mixed_batch(te, MC_TRANSFER_READ, 4, 32, 4096);
    mixed_batch(te, MC_TRANSFER_READ, 2, 8, 16 * MIB);
    mixed_batch(te, MC_TRANSFER_WRITE, 4, 32, 4096);
    mixed_batch(te, MC_TRANSFER_WRITE, 2, 8, 16 * MIB);
    mc_proc_thaw(stalled.proc.pid);
    stalled_stopped = 0;
    mc_te_destroy(te);
    mc_cluster_kill_all();
}

static void test_tcp_batches_to_a_stopped_peer_end_by_the_deadline(void **state)
{
    (void)state;
    stalled_batches("tcp");
}

#ifdef MC_HAVE_RDMA
static void test_rdma_batches_to_a_stopped_peer_end_by_the_deadline(void **state)
{
    (void)state;
    stalled_batches("rdma");
}
#endif

/*
 * 64 × 16 MiB (1 GiB) from and to a healthy peer over tcp with a 5 s timeout: completes (the
 * deadline is 5 s + 1.07 s), exact bytes. Reads land in 8 local slots, each request i in slot
 * i % 8 with the same remote bytes: reading into 1 GiB of distinct memory took 3.2-6.1 s on the
 * loaded 2-core test machine (vs 1.8 s into 128 MiB), too close to the deadline to assert.
 */
static void test_tcp_healthy_big_batch_completes(void **state)
{
    (void)state;
    assert_int_equal(start_peer(&healthy, "tcp"), 0);
    mc_transfer_engine_t *te = engine("tcp");
    mc_segment_id_t hs;
    assert_int_equal(mc_te_open_segment(te, healthy.name, &hs), 0);
    const size_t n = 64, len = 16 * MIB, slots = PEER_PLAIN / len;
    uint8_t *buf = malloc((slots + 1) * len);
    assert_non_null(buf);
    memset(buf, 0x11, (slots + 1) * len); /* touched: no page faults in the timing */
    mc_transfer_req_t *reqs = calloc(n, sizeof(*reqs));
    for (size_t i = 0; i < n; i++)
        reqs[i] = (mc_transfer_req_t){MC_TRANSFER_READ, buf + (i % slots) * len, hs,
                                      healthy.plain_addr + (i % slots) * len, len};
    uint64_t t0 = now_ms();
    int rc = mc_te_transfer_sync(te, reqs, n);
    uint64_t took = now_ms() - t0;
    print_message("tcp read 64 x 16 MiB from a healthy peer: %s in %llu ms\n", mc_error_name(rc),
                  (unsigned long long)took);
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < slots; i++)
        assert_int_equal(pattern_diff(buf + i * len, len, i * len), len);
    /* Writes: every request writes the same 16 MiB source, so overlapping targets agree. */
    for (size_t i = 0; i < n; i++) {
        reqs[i].opcode = MC_TRANSFER_WRITE;
        reqs[i].source = buf;
    }
    t0 = now_ms();
    rc = mc_te_transfer_sync(te, reqs, n);
    took = now_ms() - t0;
    print_message("tcp write 64 x 16 MiB to a healthy peer: %s in %llu ms\n", mc_error_name(rc),
                  (unsigned long long)took);
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < slots; i++) { /* each remote slot, read back into slot 1 */
        reqs[i].opcode = MC_TRANSFER_READ;
        reqs[i].source = buf + len;
        memset(buf + len, 0, len);
        assert_int_equal(mc_te_transfer_sync(te, &reqs[i], 1), 0);
        assert_memory_equal(buf + len, buf, len);
    }
    free(reqs);
    free(buf);
    mc_te_destroy(te);
    mc_cluster_kill_all();
}

/* Store: 32 keys of 4 KiB on one holder, the holder stopped: get_batch and put_batch end within
 * the bound, every key failing (no other replica to fall over to). */
static void test_store_batches_on_a_stopped_holder_end_by_the_deadline(void **state)
{
    (void)state;
    mc_master_t m;
    assert_int_equal(mc_master_start(&m, 0, NULL), 0);
    mc_holder_t h;
    assert_int_equal(mc_holder_start(&h, &m, "64MB", NULL, NULL, 30000), 0);
    setenv("MC_TRANSFER_TIMEOUT", "5", 1);
    mc_store_t *s = mc_test_client(&m, 1, 1);
    assert_non_null(s);
    enum { N = 32, LEN = 4096 };
    char names[N][32];
    const char *keys[N], *keys2[N];
    const void *vals[N];
    void *bufs[N];
    size_t sizes[N];
    uint8_t *data = malloc(N * LEN), *got = malloc(N * LEN);
    for (size_t i = 0; i < N * LEN; i++)
        data[i] = (uint8_t)(i * 31 + 1);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "dl/%d", i);
        keys[i] = names[i];
        vals[i] = data + i * LEN;
        bufs[i] = got + i * LEN;
        sizes[i] = LEN;
    }
    int prc[N];
    int64_t grc[N];
    mc_replicate_config_t rc = MC_REPLICATE_CONFIG_INIT;
    assert_int_equal(mc_store_put_batch(s, keys, vals, sizes, N, &rc, prc), 0);
    assert_int_equal(mc_store_get_batch(s, keys, bufs, sizes, N, grc), 0);
    assert_memory_equal(got, data, N * LEN);

    assert_int_equal(mc_proc_freeze(h.proc.pid, 5000), 0);
    memset(got, 0, N * LEN);
    uint64_t t0 = now_ms();
    int r = mc_store_get_batch(s, keys, bufs, sizes, N, grc);
    uint64_t took = now_ms() - t0;
    print_message("get_batch of %d keys on a stopped holder: %s in %llu ms\n", N, mc_error_name(r),
                  (unsigned long long)took);
    assert_true(r != 0);
    for (int i = 0; i < N; i++)
        assert_true(grc[i] < 0);
    assert_true(took <= BOUND_MS);

    char names2[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(names2[i], sizeof(names2[i]), "dl2/%d", i);
        keys2[i] = names2[i];
    }
    t0 = now_ms();
    r = mc_store_put_batch(s, keys2, vals, sizes, N, &rc, prc);
    took = now_ms() - t0;
    print_message("put_batch of %d keys on a stopped holder: %s in %llu ms\n", N, mc_error_name(r),
                  (unsigned long long)took);
    assert_true(r != 0);
    assert_true(took <= BOUND_MS);

    mc_proc_thaw(h.proc.pid);
    mc_store_free(s);
    free(data);
    free(got);
    mc_cluster_kill_all();
}

/*
 * Store fail-over: 32 keys of 4 KiB with two replicas, one on each of two holders. With holder A
 * stopped a get_batch still returns every key's exact bytes (from B) within the timeout + 5 s;
 * with both stopped it fails within two deadlines (one per replica) + 5 s: the other replicas of
 * all keys are read in one call, not one call per key (32 × 5 s on the old code).
 */
static void test_store_get_batch_fails_over_in_one_call_per_replica(void **state)
{
    (void)state;
    mc_master_t m;
    assert_int_equal(mc_master_start(&m, 0, NULL), 0);
    mc_holder_t ha, hb;
    assert_int_equal(mc_holder_start(&ha, &m, "64MB", NULL, NULL, 30000), 0);
    assert_int_equal(mc_holder_start(&hb, &m, "64MB", NULL, NULL, 30000), 0);
    setenv("MC_TRANSFER_TIMEOUT", "5", 1);
    mc_store_t *s = mc_test_client(&m, 1, 1);
    assert_non_null(s);
    enum { N = 32, LEN = 4096 };
    char names[N][32];
    const char *keys[N];
    const void *vals[N];
    void *bufs[N];
    size_t sizes[N];
    uint8_t *data = malloc(N * LEN), *got = malloc(N * LEN);
    for (size_t i = 0; i < N * LEN; i++)
        data[i] = (uint8_t)(i * 29 + 7);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "fo/%d", i);
        keys[i] = names[i];
        vals[i] = data + i * LEN;
        bufs[i] = got + i * LEN;
        sizes[i] = LEN;
    }
    int prc[N];
    int64_t grc[N];
    mc_replicate_config_t rc = MC_REPLICATE_CONFIG_INIT;
    rc.replica_num = 2;
    rc.preferred_segment = ha.segment; /* every key's first replica, the one a get tries first */
    assert_int_equal(mc_store_put_batch(s, keys, vals, sizes, N, &rc, prc), 0);
    /* A get tries the replicas in the master's order (none is local here): the stopped holder
     * must hold the first of every key, or the batch would not fail over at all. */
    for (int i = 0; i < N; i++) {
        mc_replica_desc_t d[4];
        size_t count = 0;
        assert_int_equal(mc_store_get_replica_desc(s, keys[i], d, 4, &count), 0);
        assert_int_equal(count, 2);
        assert_string_equal(d[0].segment_name, ha.segment);
        assert_string_equal(d[1].segment_name, hb.segment);
    }

    assert_int_equal(mc_proc_freeze(ha.proc.pid, 5000), 0);
    uint64_t t0 = now_ms();
    int r = mc_store_get_batch(s, keys, bufs, sizes, N, grc);
    uint64_t took = now_ms() - t0;
    print_message("get_batch of %d keys, one of two holders stopped: %s in %llu ms\n", N,
                  mc_error_name(r), (unsigned long long)took);
    assert_int_equal(mc_proc_is_frozen(ha.proc.pid), 1); /* so none of the bytes came from A */
    assert_int_equal(r, 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(grc[i], LEN);
    assert_memory_equal(got, data, N * LEN);
    /* The first round waited out its deadline on A: the keys were failed over, not read first
     * time. A margin below the timeout for the deadline's start before the first byte is sent. */
    assert_true(took >= TIMEOUT_S * 1000 - 500);
    assert_true(took <= BOUND_MS);

    assert_int_equal(mc_proc_freeze(hb.proc.pid, 5000), 0);
    t0 = now_ms();
    r = mc_store_get_batch(s, keys, bufs, sizes, N, grc);
    took = now_ms() - t0;
    print_message("get_batch of %d keys, both holders stopped: %s in %llu ms\n", N,
                  mc_error_name(r), (unsigned long long)took);
    assert_true(r != 0);
    for (int i = 0; i < N; i++)
        assert_true(grc[i] < 0);
    assert_true(took <= TIMEOUT_S * 1000 + BOUND_MS);

    mc_proc_thaw(ha.proc.pid);
    mc_proc_thaw(hb.proc.pid);
    mc_store_free(s);
    free(data);
    free(got);
    mc_cluster_kill_all();
}

static int teardown(void **state)
{
    (void)state;
    if (stalled_stopped && stalled.proc.pid > 0)
        mc_proc_thaw(stalled.proc.pid);
    stalled_stopped = 0;
    mc_cluster_kill_all();
    unsetenv("MC_TRANSFER_TIMEOUT");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_tcp_batches_to_a_stopped_peer_end_by_the_deadline, teardown),
#ifdef MC_HAVE_RDMA
        cmocka_unit_test_teardown(test_rdma_batches_to_a_stopped_peer_end_by_the_deadline,
                                  teardown),
#endif
        cmocka_unit_test_teardown(test_tcp_healthy_big_batch_completes, teardown),
        cmocka_unit_test_teardown(test_store_batches_on_a_stopped_holder_end_by_the_deadline,
                                  teardown),
        cmocka_unit_test_teardown(test_store_get_batch_fails_over_in_one_call_per_replica,
                                  teardown),
    };
    int failed = cmocka_run_group_tests_name("transfer deadlines", tests, NULL, NULL);
    mc_cluster_kill_all();
    return failed;
}
