/*
 * test_te_etcd.c — Transfer Engine `etcd://` metadata (src/transfer/etcd_metadata.c) against a
 * real 3-member etcd cluster (tests/support/etcd_cluster.c): a te_peer process and an engine in
 * this process find each other through etcd and move exact bytes; the descriptor keys are
 * upstream's and carry the engine's lease; a SIGKILLed peer's descriptor disappears within its
 * lease TTL (MC_ETCD_METADATA_LEASE_TTL=3 here) plus slack; a lease lost behind the engine's back
 * is re-granted and the keys published again; an etcd member killed mid-run breaks nothing;
 * mc_te_destroy removes the keys at once; a mooncake_client holder and a store client work on
 * etcd metadata. Every wait polls a state with a deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster.h"
#include "etcd.h"
#include "etcd_cluster.h"
#include "mooncake/errors.h"
#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"
#include "proc.h"

#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PEER_BIN MC_BUILD_DIR "/tests/integration/te_peer"
#define TTL_S 3
#define MiB (1024ull * 1024ull)

typedef struct peer {
    mc_proc_t proc;
    char name[300];
    uint64_t shm_addr, shm_len, plain_addr, plain_len;
} peer_t;

static mc_etcd_cluster_t cl;
static char meta[sizeof(cl.endpoints) + 16]; /* "etcd://" + endpoints */

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
    (void)state;
    setenv("MC_ETCD_METADATA_LEASE_TTL", "3", 1);
    unsetenv("MC_METADATA_CLUSTER_ID");
    if (mc_etcd_cluster_start(&cl, 3) != 0)
        return -1;
    snprintf(meta, sizeof(meta), "etcd://%s", cl.endpoints);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    mc_etcd_cluster_destroy(&cl);
    return 0;
}

static int start_peer(peer_t *p, const char *metadata)
{
    char *argv[] = {PEER_BIN, "127.0.0.1:0", (char *)metadata, "4194304", "4194304", NULL};
    memset(p, 0, sizeof(*p));
    if (mc_proc_start(&p->proc, argv, "READY ", 20000) != 0)
        return -1;
    mc_cluster_track(p->proc.pid);
    unsigned long long a, b, c, d;
    if (sscanf(p->proc.ready_line, "READY %299s %llu %llu %llu %llu", p->name, &a, &b, &c, &d) != 5)
        return -1;
    p->shm_addr = a;
    p->shm_len = b;
    p->plain_addr = c;
    p->plain_len = d;
    return 0;
}

static mc_etcd_t *etcd_client(void)
{
    mc_etcd_t *e = NULL;
    assert_int_equal(mc_etcd_create(cl.endpoints, 1000, &e), 0);
    return e;
}

/* 1 when key is present (*value malloc'd and NUL-terminated, may be NULL; *lease its lease),
 * 0 when absent, -1 when etcd did not answer (e.g. while it elects a new leader). */
static int key_state(mc_etcd_t *e, const char *key, char **value, int64_t *lease)
{
    mc_etcd_kv_t kv;
    int rc = mc_etcd_get(e, key, &kv, NULL);
    if (rc == MC_ERR_ETCD_KEY_NOT_EXIST)
        return 0;
    if (rc != 0)
        return -1;
    if (lease)
        *lease = kv.lease;
    if (value) {
        *value = (char *)kv.value;
        kv.value = NULL;
    }
    mc_etcd_kv_free(&kv, 1, 0);
    return 1;
}

/* The value of key (malloc'd, NUL-terminated) and its lease, or NULL when absent; etcd must
 * answer within 15 s (an error is not taken for an absent key; a poll it misses, as a loaded
 * host's etcd does while it elects a leader, is asked again). */
static char *etcd_value(mc_etcd_t *e, const char *key, int64_t *lease)
{
    char *v = NULL;
    long long deadline = now_ms() + 15000;
    int st;
    while ((st = key_state(e, key, &v, lease)) == -1 && now_ms() < deadline)
        usleep(100 * 1000);
    assert_int_not_equal(st, -1);
    return v;
}

/* Polls until key is absent (want_present 0) or present, as etcd answers (a poll it does not
 * answer counts for neither); ms taken, or -1 at the deadline. */
static long long wait_key(mc_etcd_t *e, const char *key, int want_present, long long deadline_ms)
{
    long long t0 = now_ms();
    while (now_ms() - t0 < deadline_ms) {
        if (key_state(e, key, NULL, NULL) == want_present)
            return now_ms() - t0;
        usleep(100 * 1000);
    }
    return -1;
}

static mc_transfer_engine_t *new_engine(int disable_shm)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .metadata_server = meta,
                                       .protocol = "tcp",
                                       .disable_shm = disable_shm};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    return te;
}

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

/* Writes len random bytes at addr of seg, reads them back, compares; and checks the peer's
 * initial pattern at `pattern_addr` (the bytes te_peer wrote, (i * 7 + 3) & 0xff). */
static void round_trip(mc_transfer_engine_t *te, mc_segment_id_t seg, uint64_t addr, size_t len,
                       uint64_t seed)
{
    uint8_t *src = malloc(len), *dst = calloc(1, len);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, len, seed);
    mc_transfer_req_t w = {MC_TRANSFER_WRITE, src, seg, addr, len};
    assert_int_equal(mc_te_transfer_sync(te, &w, 1), 0);
    mc_transfer_req_t r = {MC_TRANSFER_READ, dst, seg, addr, len};
    assert_int_equal(mc_te_transfer_sync(te, &r, 1), 0);
    assert_memory_equal(src, dst, len);
    free(src);
    free(dst);
}

static void check_initial_pattern(mc_transfer_engine_t *te, mc_segment_id_t seg, uint64_t base,
                                  size_t len)
{
    uint8_t *dst = calloc(1, len);
    assert_non_null(dst);
    mc_transfer_req_t r = {MC_TRANSFER_READ, dst, seg, base, len};
    assert_int_equal(mc_te_transfer_sync(te, &r, 1), 0);
    for (size_t i = 0; i < len; i++)
        assert_int_equal(dst[i], (uint8_t)(i * 7 + 3));
    free(dst);
}

static void test_peers_find_each_other_and_move_exact_bytes(void **state)
{
    (void)state;
    peer_t p;
    assert_int_equal(start_peer(&p, meta), 0);
    mc_etcd_t *e = etcd_client();

    /* upstream's keys, under a lease */
    char key[512];
    int64_t lease = 0;
    snprintf(key, sizeof(key), "mooncake/ram/%s", p.name);
    char *desc = etcd_value(e, key, &lease);
    assert_non_null(desc);
    assert_true(lease != 0);
    json_error_t jerr;
    json_t *j = json_loads(desc, 0, &jerr);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "name")), p.name);
    assert_int_equal(json_array_size(json_object_get(j, "buffers")), 2);
    json_decref(j);
    free(desc);
    snprintf(key, sizeof(key), "mooncake/rpc_meta/%s", p.name);
    int64_t rpc_lease = 0;
    char *rpc = etcd_value(e, key, &rpc_lease);
    assert_non_null(rpc);
    assert_int_equal(rpc_lease, lease);
    j = json_loads(rpc, 0, &jerr);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "ip_or_host_name")), "127.0.0.1");
    char want_name[320];
    snprintf(want_name, sizeof(want_name), "127.0.0.1:%lld",
             (long long)json_integer_value(json_object_get(j, "rpc_port")));
    assert_string_equal(want_name, p.name);
    json_decref(j);
    free(rpc);

    /* tcp (shm off) and shm, both ways, exact bytes */
    for (int disable_shm = 1; disable_shm >= 0; disable_shm--) {
        mc_transfer_engine_t *te = new_engine(disable_shm);
        mc_segment_id_t seg = -1;
        assert_int_equal(mc_te_open_segment(te, p.name, &seg), 0);
        check_initial_pattern(te, seg, p.plain_addr + (disable_shm ? 0 : 2 * MiB), 64 * 1024);
        round_trip(te, seg, p.shm_addr + 12345, 3 * MiB + 7, 1 + (uint64_t)disable_shm);
        round_trip(te, seg, p.plain_addr + 1 * MiB + 1, 1, 3);
        /* our own descriptor is in etcd too */
        snprintf(key, sizeof(key), "mooncake/ram/%s", mc_te_local_segment_name(te));
        desc = etcd_value(e, key, NULL);
        assert_non_null(desc);
        free(desc);
        mc_te_destroy(te);
        /* destroy removes the keys at once (explicit delete, then the lease's revoke) */
        desc = etcd_value(e, key, NULL);
        assert_null(desc);
    }

    /* a segment nobody published and nobody serves */
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg;
    assert_int_equal(mc_te_open_segment(te, "127.0.0.1:1", &seg), MC_ERR_SEGMENT_NOT_FOUND);
    mc_te_destroy(te);

    mc_cluster_untrack(p.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&p.proc, SIGTERM, 10000)));
    /* a peer that stopped cleanly took its keys along */
    snprintf(key, sizeof(key), "mooncake/ram/%s", p.name);
    assert_null(etcd_value(e, key, NULL));
    mc_etcd_destroy(e);
}

static void test_killed_peer_descriptor_disappears_within_ttl(void **state)
{
    (void)state;
    peer_t p;
    assert_int_equal(start_peer(&p, meta), 0);
    mc_etcd_t *e = etcd_client();
    char ram[512], rpc[512];
    snprintf(ram, sizeof(ram), "mooncake/ram/%s", p.name);
    snprintf(rpc, sizeof(rpc), "mooncake/rpc_meta/%s", p.name);

    /* kept alive: still there after twice the TTL */
    long long t0 = now_ms();
    while (now_ms() - t0 < 2 * TTL_S * 1000) {
        char *v = etcd_value(e, ram, NULL);
        assert_non_null(v);
        free(v);
        usleep(250 * 1000);
    }

    mc_cluster_untrack(p.proc.pid);
    assert_int_equal(mc_proc_stop(&p.proc, SIGKILL, 10000) != -1, 1);
    t0 = now_ms();
    long long took = wait_key(e, ram, 0, TTL_S * 1000 + 3000);
    fprintf(stderr, "descriptor of a SIGKILLed peer gone after %lld ms (TTL %d s)\n",
            took < 0 ? -1 : now_ms() - t0, TTL_S);
    assert_true(took >= 0);
    assert_int_equal(wait_key(e, rpc, 0, 1000) >= 0, 1);

    /* and the dead segment is not found any more */
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg;
    assert_int_equal(mc_te_open_segment(te, p.name, &seg), MC_ERR_SEGMENT_NOT_FOUND);
    mc_te_destroy(te);
    mc_etcd_destroy(e);
}

static void test_lost_lease_is_granted_again_and_republished(void **state)
{
    (void)state;
    peer_t p;
    assert_int_equal(start_peer(&p, meta), 0);
    mc_etcd_t *e = etcd_client();
    char ram[512];
    snprintf(ram, sizeof(ram), "mooncake/ram/%s", p.name);
    int64_t lease = 0;
    char *v = etcd_value(e, ram, &lease);
    assert_non_null(v);
    free(v);
    /* someone revokes the peer's lease: its keys go at once */
    assert_int_equal(mc_etcd_lease_revoke(e, lease), 0);
    assert_null(etcd_value(e, ram, NULL));
    /* the keeper notices at its next keep-alive (TTL/3) and publishes under a new lease */
    long long took = wait_key(e, ram, 1, TTL_S * 1000 + 2000);
    fprintf(stderr, "descriptor back after a revoked lease in %lld ms\n", took);
    assert_true(took >= 0);
    int64_t lease2 = 0;
    v = etcd_value(e, ram, &lease2);
    assert_non_null(v);
    free(v);
    assert_true(lease2 != 0 && lease2 != lease);
    /* the new lease is kept alive */
    long long t0 = now_ms();
    while (now_ms() - t0 < 2 * TTL_S * 1000) {
        v = etcd_value(e, ram, NULL);
        assert_non_null(v);
        free(v);
        usleep(250 * 1000);
    }
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg;
    assert_int_equal(mc_te_open_segment(te, p.name, &seg), 0);
    round_trip(te, seg, p.plain_addr, 100000, 9);
    mc_te_destroy(te);
    mc_cluster_untrack(p.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&p.proc, SIGTERM, 10000)));
    mc_etcd_destroy(e);
}

static void test_etcd_member_killed_mid_run(void **state)
{
    (void)state;
    peer_t p;
    assert_int_equal(start_peer(&p, meta), 0);
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg;
    assert_int_equal(mc_te_open_segment(te, p.name, &seg), 0);
    round_trip(te, seg, p.shm_addr, 1 * MiB, 21);

    /* the first endpoint's member dies (every engine talks to it first) */
    assert_int_equal(mc_etcd_cluster_kill(&cl, 0), 0);
    mc_etcd_t *e = NULL;
    char rest[sizeof(cl.endpoints)];
    snprintf(rest, sizeof(rest), "%s;%s", cl.endpoint[1], cl.endpoint[2]);
    assert_int_equal(mc_etcd_create(rest, 1000, &e), 0);
    char ram[512];
    snprintf(ram, sizeof(ram), "mooncake/ram/%s", p.name);
    /* transfers go on, and both engines keep their leases for longer than the TTL */
    /* (a read may fail while the remaining members elect a leader; it must never say absent) */
    long long t0 = now_ms();
    uint64_t seed = 100;
    int seen = 0;
    while (now_ms() - t0 < 2 * TTL_S * 1000 + 500) {
        round_trip(te, seg, p.shm_addr + 4096, 256 * 1024, seed++);
        int st = key_state(e, ram, NULL, NULL);
        assert_int_not_equal(st, 0);
        seen += st == 1;
        usleep(200 * 1000);
    }
    assert_true(seen > 0);
    assert_int_equal(key_state(e, ram, NULL, NULL), 1);
    /* a new engine finds the peer through the remaining members */
    mc_transfer_engine_t *te2 = new_engine(1);
    mc_segment_id_t seg2;
    assert_int_equal(mc_te_open_segment(te2, p.name, &seg2), 0);
    round_trip(te2, seg2, p.plain_addr + 77, 2 * MiB, 77);
    char key[512];
    snprintf(key, sizeof(key), "mooncake/ram/%s", mc_te_local_segment_name(te2));
    char *v = etcd_value(e, key, NULL);
    assert_non_null(v);
    free(v);
    mc_te_destroy(te2);
    mc_te_destroy(te);
    mc_cluster_untrack(p.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&p.proc, SIGTERM, 10000)));
    mc_etcd_destroy(e);
}

static void test_cluster_id_and_scheme_less_metadata(void **state)
{
    (void)state;
    /* a string without a scheme is etcd (upstream), and MC_METADATA_CLUSTER_ID goes in the key */
    setenv("MC_METADATA_CLUSTER_ID", "c7", 1);
    peer_t p;
    int rc = start_peer(&p, cl.endpoints);
    unsetenv("MC_METADATA_CLUSTER_ID");
    assert_int_equal(rc, 0);
    mc_etcd_t *e = etcd_client();
    char key[512];
    snprintf(key, sizeof(key), "mooncake/c7/ram/%s", p.name);
    char *v = etcd_value(e, key, NULL);
    assert_non_null(v);
    free(v);
    snprintf(key, sizeof(key), "mooncake/c7/rpc_meta/%s", p.name);
    v = etcd_value(e, key, NULL);
    assert_non_null(v);
    free(v);
    snprintf(key, sizeof(key), "mooncake/ram/%s", p.name);
    assert_null(etcd_value(e, key, NULL));
    mc_cluster_untrack(p.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&p.proc, SIGTERM, 10000)));
    mc_etcd_destroy(e);
}

static void test_store_client_and_mooncake_client_on_etcd(void **state)
{
    (void)state;
    /* a mooncake_client holder and an in-process store client both with etcd metadata */
    mc_master_t m;
    assert_int_equal(mc_master_start(&m, 0, NULL), 0);
    char flag[sizeof(meta) + 32];
    snprintf(flag, sizeof(flag), "--metadata_server=%s", meta);
    const char *flags[] = {flag, NULL};
    mc_holder_t h;
    assert_int_equal(mc_holder_start(&h, &m, "67108864", flags, NULL, 20000), 0);
    mc_etcd_t *e = etcd_client();
    char ram[512];
    snprintf(ram, sizeof(ram), "mooncake/ram/%s", h.segment);
    char *v = etcd_value(e, ram, NULL);
    assert_non_null(v);
    free(v);

    setenv("MC_DISABLE_SHM", "1", 1);
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = meta,
                             .local_buffer_size = 16u << 20,
                             .master_server_addr = m.addr};
    mc_store_t *s = NULL;
    int rc = mc_store_setup(&cfg, &s);
    unsetenv("MC_DISABLE_SHM");
    assert_int_equal(rc, 0);
    uint8_t *src = malloc(MiB), *dst = calloc(1, MiB);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, MiB, 5);
    assert_int_equal(mc_store_put(s, "etcd-obj", src, MiB, NULL), 0);
    assert_int_equal(mc_store_get(s, "etcd-obj", dst, MiB), (int64_t)MiB);
    assert_memory_equal(src, dst, MiB);
    free(src);
    free(dst);
    mc_store_free(s);

    /* the holder dies: its descriptor goes with its lease */
    mc_cluster_untrack(h.proc.pid);
    mc_proc_stop(&h.proc, SIGKILL, 10000);
    assert_true(wait_key(e, ram, 0, TTL_S * 1000 + 3000) >= 0);
    mc_master_stop(&m, SIGTERM);
    mc_etcd_destroy(e);
}

static void test_bad_or_unreachable_etcd_fails_create(void **state)
{
    (void)state;
    const char *bad[] = {"etcd://", "etcd://host", "etcd://h:1;;h:2", "a b:1", "redis://h:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                           .metadata_server = bad[i]};
        mc_transfer_engine_t *te = NULL;
        assert_int_equal(mc_te_create(&cfg, &te), MC_ERR_INVALID_PARAMS);
        assert_null(te);
    }
    /* every member dead: no lease, no engine, after the 2 s of retries (etcd_metadata.c) */
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_etcd_cluster_kill(&cl, i), 0);
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0", .metadata_server = meta};
    mc_transfer_engine_t *te = NULL;
    long long t0 = now_ms();
    assert_int_equal(mc_te_create(&cfg, &te), MC_ERR_ETCD_OPERATION_ERROR);
    assert_null(te);
    long long took = now_ms() - t0;
    assert_true(took >= 1900 && took < 4000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_peers_find_each_other_and_move_exact_bytes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_killed_peer_descriptor_disappears_within_ttl, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lost_lease_is_granted_again_and_republished, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_etcd_member_killed_mid_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_id_and_scheme_less_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_client_and_mooncake_client_on_etcd, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bad_or_unreachable_etcd_fails_create, setup, teardown),
    };
    int failed = cmocka_run_group_tests_name("te_etcd", tests, NULL, NULL);
    if (failed)
        mc_etcd_cluster_print_logs(&cl, 20);
    return failed;
}
