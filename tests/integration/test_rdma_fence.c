/*
 * test_rdma_fence.c — the rdma transport's two promises about bytes that must not land:
 *
 *  - a transfer reported failed lets go of the caller's buffer: once a read from a stopped peer
 *    has failed, nothing the peer sends when it resumes reaches that buffer;
 *  - the receiver-side fence (mc_rdma_fence): once it returned, no rdma write sent to the engine
 *    before it can modify the engine's memory, and peers' next transfers reconnect and succeed.
 *
 * This program is both sides. Run with "owner [METADATA]" it is the owner of a segment: an rdma
 * engine (P2PHANDSHAKE unless METADATA is given; UCX over its tcp transport here) with SEG_BYTES
 * of segment memory holding the pattern (i * 7 + 3) & 0xff, printing
 *   READY <segment name> <addr> <bytes>
 * and answering commands on stdin, one per line:
 *   FENCE            a pure fence, mc_te_refuse_tokens(te, NULL, 0, &gen) (its rdma part is
 *                    mc_rdma_fence), then "FENCED <rc> <ms>"
 *   HASH <off> <len> "HASH <fnv-1a 64 of the bytes>" (read directly, not through a transport)
 *   QUIT             destroys the engine and exits 0
 * Without arguments it is the cmocka test: the initiator, in this process, against owner
 * children (it includes transfer_internal.h for the hook itself, a no-op on a tcp engine). The
 * fence's hold point is the failpoint rdma.fence.hold (MC_FAILPOINTS in the owner's environment):
 * the old serving worker is no longer progressed but not yet destroyed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/http_metadata.h"
#include "mooncake/transfer_engine.h"
#include "proc.h"
#include "transfer_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define SELF_BIN MC_BUILD_DIR "/tests/integration/test_rdma_fence"
#define SEG_BYTES (16 * MiB)
#define XFER_BYTES (4 * MiB)
/* The initiator's transfer timeout (ms): a stopped owner fails a transfer this fast. */
#define TIMEOUT_MS 2000
/* How long the fence holds the old worker unprogressed (ms): longer than TIMEOUT_MS. */
#define HOLD_MS 4000

/* ---- shared ----------------------------------------------------------------------------- */

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- owner role ------------------------------------------------------------------------- */

static int owner_main(const char *metadata)
{
    mc_transfer_engine_config_t cfg = {
        .local_server_name = "127.0.0.1:0", .metadata_server = metadata, .protocol = "rdma"};
    mc_transfer_engine_t *te;
    int rc = mc_te_create(&cfg, &te);
    if (rc != 0) {
        fprintf(stderr, "owner: mc_te_create: %s\n", mc_error_name(rc));
        return 1;
    }
    uint8_t *seg = NULL;
    if (mc_te_alloc_segment_memory(te, SEG_BYTES, (void **)&seg) != 0) {
        fprintf(stderr, "owner: cannot allocate segment memory\n");
        return 1;
    }
    for (size_t i = 0; i < SEG_BYTES; i++)
        seg[i] = (uint8_t)(i * 7 + 3);
    printf("READY %s %llu %llu\n", mc_te_local_segment_name(te), (unsigned long long)(uintptr_t)seg,
           (unsigned long long)SEG_BYTES);
    fflush(stdout);
    char line[128];
    while (fgets(line, sizeof(line), stdin)) {
        unsigned long long off, len;
        if (!strncmp(line, "QUIT", 4))
            break;
        if (!strncmp(line, "FENCE", 5)) {
            double t0 = now_s();
            uint64_t gen = 0;
            rc = mc_te_refuse_tokens(te, NULL, 0, &gen);
            printf("FENCED %d %.0f\n", rc, (now_s() - t0) * 1000.0);
        } else if (sscanf(line, "HASH %llu %llu", &off, &len) == 2 && off + len <= SEG_BYTES) {
            printf("HASH %llu\n", (unsigned long long)fnv1a(seg + off, len));
        } else {
            printf("ERR\n");
        }
        fflush(stdout);
    }
    mc_te_destroy(te);
    return 0;
}

/* ---- initiator (the tests) -------------------------------------------------------------- */

typedef struct owner {
    mc_proc_t proc;
    char name[300];
    uint64_t addr, len;
} owner_t;

static int start_owner_with(owner_t *o, const char *failpoints, const char *metadata)
{
    if (failpoints)
        setenv("MC_FAILPOINTS", failpoints, 1);
    char *argv[] = {SELF_BIN, "owner", (char *)metadata, NULL};
    int rc = mc_proc_start(&o->proc, argv, "READY ", 20000);
    unsetenv("MC_FAILPOINTS");
    if (rc != 0)
        return -1;
    unsigned long long a, b;
    if (sscanf(o->proc.ready_line, "READY %299s %llu %llu", o->name, &a, &b) != 3)
        return -1;
    o->addr = a;
    o->len = b;
    return 0;
}

static int start_owner(owner_t *o, const char *failpoints)
{
    return start_owner_with(o, failpoints, "P2PHANDSHAKE");
}

/* QUIT: the owner destroys its engine and exits 0. */
static void stop_owner(owner_t *o)
{
    assert_int_equal(mc_proc_send(&o->proc, "QUIT\n"), 0);
    assert_true(mc_clean_exit(mc_proc_stop(&o->proc, 0, 20000)));
}

/* The owner of the running test, killed by the teardown when the test failed half-way. */
static owner_t owner;

static int kill_owner(void **state)
{
    (void)state;
    if (owner.proc.pid > 0) {
        mc_proc_thaw(owner.proc.pid);
        mc_proc_stop(&owner.proc, SIGKILL, 10000);
    }
    return 0;
}

/* Sends a command and reads its one-line answer. */
static void owner_ask(owner_t *o, const char *cmd, char *answer, size_t cap, int timeout_ms)
{
    assert_int_equal(mc_proc_send(&o->proc, cmd), 0);
    assert_int_equal(mc_proc_read_line(&o->proc, answer, cap, timeout_ms), 0);
}

static uint64_t owner_hash(owner_t *o, uint64_t off, uint64_t len)
{
    char cmd[96], answer[128];
    unsigned long long h = 0;
    snprintf(cmd, sizeof(cmd), "HASH %llu %llu\n", (unsigned long long)off,
             (unsigned long long)len);
    owner_ask(o, cmd, answer, sizeof(answer), 10000);
    assert_int_equal(sscanf(answer, "HASH %llu", &h), 1);
    return h;
}

/* Waits for the owner's answer to a FENCE already sent; returns the fence's duration (ms). */
static double owner_fenced(owner_t *o, int timeout_ms)
{
    char answer[128];
    int rc = -1;
    double ms = -1;
    assert_int_equal(mc_proc_read_line(&o->proc, answer, sizeof(answer), timeout_ms), 0);
    assert_int_equal(sscanf(answer, "FENCED %d %lf", &rc, &ms), 2);
    assert_int_equal(rc, 0);
    return ms;
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

/* One initiator worker thread, so every slice runs on the same UCX worker (the one a leaked
 * request would be progressed by) and in order. */
static mc_transfer_engine_t *new_initiator_with(const char *metadata)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .metadata_server = metadata,
                                       .protocol = "rdma",
                                       .disable_shm = 1,
                                       .transfer_timeout_ms = TIMEOUT_MS,
                                       .worker_threads = 1};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    return te;
}

static mc_transfer_engine_t *new_initiator(void)
{
    return new_initiator_with("P2PHANDSHAKE");
}

static int one(mc_transfer_engine_t *te, mc_segment_id_t seg, mc_transfer_opcode_t op, void *buf,
               uint64_t addr, size_t len)
{
    mc_transfer_req_t req = {op, buf, seg, addr, len};
    return mc_te_transfer_sync(te, &req, 1);
}

/* Writes `seed`'s bytes at the owner's base + off, reads them back, compares. */
static void round_trip(mc_transfer_engine_t *te, mc_segment_id_t seg, const owner_t *o,
                       uint64_t off, uint64_t seed)
{
    uint8_t *src = malloc(XFER_BYTES), *dst = malloc(XFER_BYTES);
    assert_non_null(src);
    assert_non_null(dst);
    fill_random(src, XFER_BYTES, seed);
    memset(dst, 0, XFER_BYTES);
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, src, o->addr + off, XFER_BYTES), 0);
    assert_int_equal(one(te, seg, MC_TRANSFER_READ, dst, o->addr + off, XFER_BYTES), 0);
    assert_memory_equal(src, dst, XFER_BYTES);
    free(src);
    free(dst);
}

static void test_a_failed_read_lets_go_of_the_buffer(void **state)
{
    (void)state;
    owner_t *o = &owner;
    assert_int_equal(start_owner(o, NULL), 0);
    mc_transfer_engine_t *te = new_initiator();
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_te_open_segment(te, o->name, &seg), 0);
    round_trip(te, seg, o, 0, 1); /* connected and proven */

    uint8_t *dst = malloc(XFER_BYTES), *after = malloc(XFER_BYTES), *other = malloc(4096);
    assert_non_null(dst);
    assert_non_null(after);
    assert_non_null(other);
    memset(dst, 0x5a, XFER_BYTES);
    assert_int_equal(mc_proc_freeze(o->proc.pid, 5000), 0);
    int rc = one(te, seg, MC_TRANSFER_READ, dst, o->addr, XFER_BYTES);
    /* Over UCX's tcp transport a get needs the owner's progress thread: it cannot succeed. */
    assert_int_equal(rc, MC_ERR_TRANSFER_FAIL);
    memcpy(after, dst, XFER_BYTES); /* what the failed call left */
    assert_int_equal(mc_proc_thaw(o->proc.pid), 0);

    /* The owner now answers the get it had queued. The initiator's worker is progressed only
     * by its slices: run some (they reconnect), for longer than the old 2 s cancel grace. */
    double t0 = now_s();
    int ok = 0;
    while (now_s() - t0 < 3.0) {
        ok += one(te, seg, MC_TRANSFER_READ, other, o->addr + XFER_BYTES, 4096) == 0;
        usleep(50 * 1000);
    }
    assert_true(ok > 0);
    size_t changed = 0;
    for (size_t i = 0; i < XFER_BYTES; i++)
        changed += dst[i] != after[i];
    if (changed)
        fprintf(stderr, "%zu bytes of the failed read's buffer changed after it returned\n",
                changed);
    assert_int_equal(changed, 0);
    round_trip(te, seg, o, 0, 2);
    free(dst);
    free(after);
    free(other);
    mc_te_destroy(te);
    stop_owner(o);
}

static void test_a_write_queued_to_the_old_worker_never_lands_after_the_fence(void **state)
{
    (void)state;
    owner_t *o = &owner;
    char fp[64];
    snprintf(fp, sizeof(fp), "rdma.fence.hold=sleep:%d", HOLD_MS);
    assert_int_equal(start_owner(o, fp), 0);
    mc_transfer_engine_t *te = new_initiator();
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_te_open_segment(te, o->name, &seg), 0);
    round_trip(te, seg, o, 0, 3);
    uint8_t *before = malloc(XFER_BYTES), *src = malloc(XFER_BYTES);
    assert_non_null(before);
    assert_non_null(src);
    fill_random(before, XFER_BYTES, 3);
    assert_true(owner_hash(o, 0, XFER_BYTES) == fnv1a(before, XFER_BYTES));

    /* The fence stops the old worker's progress thread, then holds HOLD_MS before destroying
     * it: the write below reaches the old worker's socket and waits there, unprogressed. */
    assert_int_equal(mc_proc_send(&o->proc, "FENCE\n"), 0);
    usleep(300 * 1000);
    fill_random(src, XFER_BYTES, 4);
    double t0 = now_s();
    assert_int_equal(one(te, seg, MC_TRANSFER_WRITE, src, o->addr, XFER_BYTES),
                     MC_ERR_TRANSFER_FAIL);
    assert_true(now_s() - t0 < HOLD_MS / 1000.0); /* it failed while the old worker was held */
    double ms = owner_fenced(o, 20000);
    assert_true(ms >= HOLD_MS);

    /* Not one byte of it: the owner's memory is what it was before the fence. */
    usleep(500 * 1000);
    assert_true(owner_hash(o, 0, XFER_BYTES) == fnv1a(before, XFER_BYTES));
    for (int i = 0; i < 3; i++)
        round_trip(te, seg, o, (uint64_t)i * XFER_BYTES, 10 + (uint64_t)i);
    free(before);
    free(src);
    mc_te_destroy(te);
    stop_owner(o);
}

static void test_transfers_reconnect_after_each_of_several_fences(void **state)
{
    (void)state;
    owner_t *o = &owner;
    assert_int_equal(start_owner(o, NULL), 0);
    mc_transfer_engine_t *te = new_initiator();
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_te_open_segment(te, o->name, &seg), 0);
    round_trip(te, seg, o, 0, 20);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(mc_proc_send(&o->proc, "FENCE\n"), 0);
        double ms = owner_fenced(o, 20000);
        fprintf(stderr, "fence %d took %.0f ms\n", i, ms);
        /* The first transfer after the fence finds its endpoint dead, re-reads the descriptor
         * and reconnects to the new worker within its one retry. */
        double t0 = now_s();
        round_trip(te, seg, o, (uint64_t)(i % 3) * XFER_BYTES, 21 + (uint64_t)i);
        fprintf(stderr, "round trip after fence %d: %.0f ms\n", i, (now_s() - t0) * 1000.0);
    }
    mc_te_destroy(te);
    stop_owner(o);
}

/* With HTTP metadata a peer re-reads the descriptor from the metadata service, not from the
 * owner: the fence must have republished the new worker address there. */
static void test_an_http_metadata_peer_reconnects_after_a_fence(void **state)
{
    (void)state;
    mc_http_metadata_server_t *meta = NULL;
    assert_int_equal(mc_http_metadata_server_start("127.0.0.1", 0, &meta), 0);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metadata", mc_http_metadata_server_port(meta));
    owner_t *o = &owner;
    assert_int_equal(start_owner_with(o, NULL, url), 0);
    mc_transfer_engine_t *te = new_initiator_with(url);
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_te_open_segment(te, o->name, &seg), 0);
    round_trip(te, seg, o, 0, 30);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mc_proc_send(&o->proc, "FENCE\n"), 0);
        owner_fenced(o, 20000);
        round_trip(te, seg, o, 0, 31 + (uint64_t)i);
    }
    mc_te_destroy(te);
    stop_owner(o);
    mc_http_metadata_server_stop(meta);
}

/* Transfers running on another thread while the owner fences: each either fails or is exact,
 * and once the fences are done every one succeeds. */
typedef struct mover {
    mc_transfer_engine_t *te;
    mc_segment_id_t seg;
    const owner_t *o;
    atomic_int stop;
    int ok, failed, wrong;
} mover_t;

static void *mover_main(void *arg)
{
    mover_t *m = arg;
    const size_t len = 256 * 1024;
    uint8_t *src = malloc(len), *dst = malloc(len);
    for (uint64_t n = 0; src && dst && !atomic_load(&m->stop); n++) {
        uint64_t off = SEG_BYTES - 4 * len + (n % 4) * len;
        fill_random(src, len, 1000 + n);
        memset(dst, 0, len);
        if (one(m->te, m->seg, MC_TRANSFER_WRITE, src, m->o->addr + off, len) != 0 ||
            one(m->te, m->seg, MC_TRANSFER_READ, dst, m->o->addr + off, len) != 0) {
            m->failed++;
            continue;
        }
        if (memcmp(src, dst, len))
            m->wrong++;
        else
            m->ok++;
    }
    free(src);
    free(dst);
    return NULL;
}

static void test_fences_while_transfers_run(void **state)
{
    (void)state;
    owner_t *o = &owner;
    assert_int_equal(start_owner(o, NULL), 0);
    mc_transfer_engine_t *te = new_initiator();
    mover_t m = {.te = te, .o = o};
    assert_int_equal(mc_te_open_segment(te, o->name, &m.seg), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, mover_main, &m), 0);
    for (int i = 0; i < 5; i++) {
        usleep(200 * 1000);
        assert_int_equal(mc_proc_send(&o->proc, "FENCE\n"), 0);
        owner_fenced(o, 20000);
    }
    usleep(500 * 1000);
    atomic_store(&m.stop, 1);
    pthread_join(t, NULL);
    fprintf(stderr, "during fences: %d exact, %d failed, %d wrong\n", m.ok, m.failed, m.wrong);
    assert_int_equal(m.wrong, 0);
    assert_true(m.ok > 0);
    for (int i = 0; i < 3; i++)
        round_trip(te, m.seg, o, 0, 40 + (uint64_t)i);
    mc_te_destroy(te);
    stop_owner(o);
}

static void test_fence_is_a_no_op_for_a_tcp_engine(void **state)
{
    (void)state;
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0", .protocol = "tcp"};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    assert_int_equal(mc_rdma_fence(te), 0);
    mc_te_destroy(te);
}

int main(int argc, char **argv)
{
    if ((argc == 2 || argc == 3) && !strcmp(argv[1], "owner"))
        return owner_main(argc == 3 ? argv[2] : "P2PHANDSHAKE");
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fence_is_a_no_op_for_a_tcp_engine),
        cmocka_unit_test_teardown(test_a_failed_read_lets_go_of_the_buffer, kill_owner),
        cmocka_unit_test_teardown(test_a_write_queued_to_the_old_worker_never_lands_after_the_fence,
                                  kill_owner),
        cmocka_unit_test_teardown(test_transfers_reconnect_after_each_of_several_fences,
                                  kill_owner),
        cmocka_unit_test_teardown(test_an_http_metadata_peer_reconnects_after_a_fence, kill_owner),
        cmocka_unit_test_teardown(test_fences_while_transfers_run, kill_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
