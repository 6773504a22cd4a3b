/*
 * test_master_promotion.c — the Master Service's promotion logic (src/master/promotion.c) on a
 * fake clock: the admission threshold, the PROCESSING extent (invisible to readers, accounted in
 * the allocator: mc_master_tick checks the master's invariants in debug builds), publication as
 * a memory replica with the value's checksum, cancellation by a remove (a late report is refused
 * and only then is the extent freed), expiry after put_start_release_timeout_ms, unmount of the
 * extent's segment, and the in-flight cap. No networking; the client's side is the calls it would
 * make (mc_master_promotion_take / _result).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master_service.h"
#include "mooncake/errors.h"

#define MiB (1ull << 20)
#define SEG1 0x7f0000000000ull
#define SEG2 0x7f1000000000ull
#define CRC 0x12345678u

static _Atomic uint64_t fake_now;

static uint64_t fake_clock(void *arg)
{
    return atomic_load((_Atomic uint64_t *)arg);
}

static void mount(mc_master_t *m, const char *id, const char *name, uint64_t base)
{
    mc_segment_info_t s;
    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "%s", id);
    snprintf(s.name, sizeof(s.name), "%s", name);
    snprintf(s.protocol, sizeof(s.protocol), "tcp");
    s.base = base;
    s.size = 4 * MiB;
    assert_int_equal(mc_master_mount_segment(m, "c1", &s), 0);
}

typedef struct taken {
    size_t n;
    mc_promotion_task_desc_t t[8];
    char keys[8][64];
} taken_t;

static int on_promotion(void *arg, const mc_promotion_task_desc_t *t)
{
    taken_t *g = arg;
    snprintf(g->keys[g->n], 64, "%s", t->key);
    g->t[g->n] = *t;
    g->t[g->n].key = g->keys[g->n];
    g->n++;
    return 0;
}

/*
 * The holder c1 answers its fence pings as its store client does: the first hands out the tokens
 * it must refuse, the second confirms them (its engine refuses them and its fence completed).
 * Returns the tokens handed out; *first receives the first of them.
 */
static size_t fence_confirm(mc_master_t *m, uint64_t *first)
{
    static uint64_t tokens[64];
    uint64_t view = 0, upto = 0;
    size_t n = 0, again = 0;
    mc_client_status_t status;
    assert_int_equal(mc_master_ping(m, "c1", &view, &status), 0);
    assert_int_equal(mc_master_fence_ping(m, "c1", view, 0, tokens, 64, &n, &upto), 0);
    if (n > 0) {
        *first = tokens[0];
        assert_int_equal(mc_master_fence_ping(m, "c1", view, upto, tokens, 64, &again, &upto), 0);
        assert_int_equal(again, 0);
    }
    return n;
}

static int on_task(void *arg, const mc_offload_task_desc_t *t)
{
    mc_offload_task_desc_t *out = arg;
    *out = *t;
    out->key = NULL;
    return 0;
}

static mc_master_stats_t stats(mc_master_t *m)
{
    mc_master_stats_t s;
    mc_master_get_stats(m, &s);
    return s;
}

static int heartbeat(mc_master_t *m, size_t max_tasks, mc_offload_task_desc_t *task,
                     mc_offload_heartbeat_out_t *out)
{
    mc_offloader_info_t i;
    memset(&i, 0, sizeof(i));
    i.backend = MC_OFFLOAD_BACKEND_LOCAL;
    snprintf(i.endpoint, sizeof(i.endpoint), "h:7000");
    i.offloading = 1;
    i.healthy = 1;
    return mc_master_offload_heartbeat(m, "c1", &i, 0, NULL, 0, max_tasks, 0, on_task, NULL, task,
                                       out, NULL, 0);
}

/* Puts `key` (1 MiB, checksum CRC) and lets c1 offload it: it gets a LOCAL_DISK replica. */
static void put_offloaded(mc_master_t *m, const char *key)
{
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    uint32_t crc = CRC;
    assert_int_equal(mc_master_put_start(m, "c1", key, MiB, NULL, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(mc_master_put_end_checksum(m, "c1", key, &crc), 0);
    mc_offload_task_desc_t t;
    mc_offload_heartbeat_out_t hb;
    assert_int_equal(heartbeat(m, 1, &t, &hb), 0);
    mc_offload_result_t r = {t.task_id, key, t.version, t.size, 0, 1, CRC};
    int code = -1;
    assert_int_equal(mc_master_offload_notify(m, "c1", &r, 1, &code), 0);
    assert_int_equal(code, 0);
}

/* Replica types of key in order, e.g. "ML" (memory, local disk). */
static void types(mc_master_t *m, const char *key, char *out, mc_replica_desc_t *d)
{
    size_t n;
    uint64_t size, ttl;
    assert_int_equal(mc_master_get_replica_list(m, key, d, 8, &n, &size, &ttl), 0);
    for (size_t i = 0; i < n; i++)
        out[i] = d[i].type == MC_REPLICA_MEMORY       ? 'M'
                 : d[i].type == MC_REPLICA_LOCAL_DISK ? 'L'
                                                      : '?';
    out[n] = '\0';
}

/*
 * A master (promotion on, threshold 2, release timeout 60 s) with client c1 offloading; keys
 * put and offloaded on segment s1, which is then unmounted (they stay readable from disk); c1
 * mounts s2, where promotions land.
 */
static mc_master_t *setup_disk_only(const char *const *keys, size_t nkeys, uint64_t queue_limit)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    cfg.client_ttl_ms = 86400000;
    cfg.enable_offload = 1;
    cfg.promotion_on_hit = 1;
    cfg.promotion_queue_limit = queue_limit;
    cfg.promotion_max_per_heartbeat = 4;
    cfg.put_start_release_timeout_ms = 60000;
    mc_master_t *m = NULL;
    atomic_store(&fake_now, 1000000);
    assert_int_equal(mc_master_create(&cfg, &m), 0);
    mc_master_set_clock(m, fake_clock, (void *)&fake_now);
    mount(m, "s1", "h:1", SEG1);
    mc_offload_task_desc_t t;
    mc_offload_heartbeat_out_t hb;
    assert_int_equal(heartbeat(m, 0, &t, &hb), 0); /* registers c1 */
    for (size_t i = 0; i < nkeys; i++)
        put_offloaded(m, keys[i]);
    assert_int_equal(mc_master_unmount_segment(m, "c1", "s1"), 0);
    mount(m, "s2", "h:2", SEG2);
    mc_master_tick(m);
    return m;
}

static void test_second_hit_promotes_into_an_invisible_extent_then_a_memory_replica(void **state)
{
    (void)state;
    const char *keys[] = {"k"};
    mc_master_t *m = setup_disk_only(keys, 1, 50000);
    char ty[16];
    mc_replica_desc_t d[8];
    types(m, "k", ty, d);
    assert_string_equal(ty, "L");
    assert_int_equal(stats(m).promotion_rejected_frequency, 1);
    assert_int_equal(stats(m).promotion_admitted, 0);
    taken_t g = {0};
    assert_int_equal(mc_master_promotion_take(m, "c1", 8, on_promotion, &g), 0);

    types(m, "k", ty, d); /* second hit */
    assert_int_equal(stats(m).promotion_admitted, 1);
    assert_int_equal(stats(m).promotion_in_flight, 1);
    mc_offload_task_desc_t t;
    mc_offload_heartbeat_out_t hb;
    assert_int_equal(heartbeat(m, 0, &t, &hb), 0);
    assert_int_equal(hb.promotions, 1);
    assert_true(mc_master_offload_ping(m, "c1", 0) >= 1);
    uint64_t disk_version = d[0].address;

    assert_int_equal(mc_master_promotion_take(m, "c1", 8, on_promotion, &g), 1);
    assert_string_equal(g.t[0].key, "k");
    assert_int_equal(g.t[0].size, MiB);
    assert_int_equal(g.t[0].version, disk_version);
    assert_int_equal(g.t[0].has_checksum, 1);
    assert_int_equal(g.t[0].checksum, CRC);
    assert_true(g.t[0].address >= SEG2 && g.t[0].address + MiB <= SEG2 + 4 * MiB);
    assert_int_equal(stats(m).used_bytes, MiB); /* the PROCESSING extent */
    mc_master_tick(m);                          /* invariants hold with it */
    types(m, "k", ty, d);
    assert_string_equal(ty, "L"); /* not visible to readers */
    /* another client may not report it */
    assert_int_equal(mc_master_promotion_result(m, "c2", g.t[0].task_id, "k", 0),
                     MC_ERR_TASK_NOT_FOUND);

    assert_int_equal(mc_master_promotion_result(m, "c1", g.t[0].task_id, "k", 0), 0);
    types(m, "k", ty, d);
    assert_string_equal(ty, "ML");
    assert_int_equal(d[0].address, g.t[0].address);
    assert_int_equal(d[0].has_checksum, 1);
    assert_int_equal(d[0].checksum, CRC);
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.promotion_completed, 1);
    assert_int_equal(st.promotion_completed_bytes, MiB);
    assert_int_equal(st.promotion_in_flight, 0);
    mc_master_tick(m);
    /* a second report of the same task is refused */
    assert_int_equal(mc_master_promotion_result(m, "c1", g.t[0].task_id, "k", 0),
                     MC_ERR_TASK_NOT_FOUND);
    /* a memory replica exists: further hits count nothing */
    types(m, "k", ty, d);
    assert_int_equal(stats(m).promotion_admitted, 1);
    mc_master_destroy(m);
}

static void test_remove_cancels_and_the_late_report_frees_the_extent(void **state)
{
    (void)state;
    const char *keys[] = {"k"};
    mc_master_t *m = setup_disk_only(keys, 1, 50000);
    char ty[16];
    mc_replica_desc_t d[8];
    types(m, "k", ty, d);
    types(m, "k", ty, d);
    taken_t g = {0};
    assert_int_equal(mc_master_promotion_take(m, "c1", 8, on_promotion, &g), 1);
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.promotion_cancelled, 1);
    assert_int_equal(st.used_bytes, MiB); /* kept: the client may still be writing into it */
    mc_master_tick(m);
    assert_int_equal(mc_master_promotion_result(m, "c1", g.t[0].task_id, "k", 0),
                     MC_ERR_TASK_NOT_FOUND);
    st = stats(m);
    assert_int_equal(st.used_bytes, 0);
    assert_int_equal(st.promotion_in_flight, 0);
    assert_int_equal(st.promotion_completed, 0);
    size_t n;
    uint64_t size, ttl;
    assert_int_equal(mc_master_get_replica_list(m, "k", d, 8, &n, &size, &ttl),
                     MC_ERR_OBJECT_NOT_FOUND);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_unreported_promotion_expires_after_the_release_timeout(void **state)
{
    (void)state;
    const char *keys[] = {"k"};
    mc_master_t *m = setup_disk_only(keys, 1, 50000);
    char ty[16];
    mc_replica_desc_t d[8];
    types(m, "k", ty, d);
    types(m, "k", ty, d);
    taken_t g = {0};
    assert_int_equal(mc_master_promotion_take(m, "c1", 8, on_promotion, &g), 1);
    atomic_fetch_add(&fake_now, 59000);
    mc_master_tick(m);
    assert_int_equal(stats(m).promotion_expired, 0);
    atomic_fetch_add(&fake_now, 2000);
    mc_master_tick(m);
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.promotion_expired, 1);
    assert_int_equal(st.promotion_in_flight, 0);
    /* Its copy was handed out and never reported: it may still be writing (a hung file read),
     * so the extent is quarantined, not freed, until the holder refused the task's token and
     * its fence completed. */
    assert_true(g.t[0].fence_token > 0);
    assert_int_equal(st.used_bytes, MiB);
    assert_int_equal(st.quarantined_extents, 1);
    assert_int_equal(mc_master_promotion_result(m, "c1", g.t[0].task_id, "k", 0),
                     MC_ERR_TASK_NOT_FOUND);
    assert_int_equal(stats(m).used_bytes, MiB); /* a late report changes nothing */
    uint64_t refused = 0;
    assert_int_equal(fence_confirm(m, &refused), 1);
    assert_int_equal(refused, g.t[0].fence_token);
    mc_master_tick(m);
    st = stats(m);
    assert_int_equal(st.used_bytes, 0);
    assert_int_equal(st.quarantine_freed, 1);
    types(m, "k", ty, d);
    assert_string_equal(ty, "L"); /* still readable from disk */
    mc_master_destroy(m);
}

static void test_unmount_of_the_extents_segment_cancels(void **state)
{
    (void)state;
    const char *keys[] = {"k"};
    mc_master_t *m = setup_disk_only(keys, 1, 50000);
    char ty[16];
    mc_replica_desc_t d[8];
    types(m, "k", ty, d);
    types(m, "k", ty, d);
    taken_t g = {0};
    assert_int_equal(mc_master_promotion_take(m, "c1", 8, on_promotion, &g), 1);
    assert_int_equal(mc_master_unmount_segment(m, "c1", "s2"), 0);
    assert_int_equal(stats(m).promotion_cancelled, 1);
    assert_int_equal(stats(m).promotion_in_flight, 0);
    mc_master_tick(m);
    assert_int_equal(mc_master_promotion_result(m, "c1", g.t[0].task_id, "k", 0),
                     MC_ERR_TASK_NOT_FOUND);
    types(m, "k", ty, d);
    assert_string_equal(ty, "L");
    mc_master_destroy(m);
}

/* The client leaves (offload stop) after taking a promotion: cancelled, but its extent stays
 * unpublished until the bound (a copy may still be under way), then it is quarantined until the
 * holder's fence for its token. */
static void test_executor_leaving_keeps_the_extent_until_the_bound(void **state)
{
    (void)state;
    const char *keys[] = {"k"};
    mc_master_t *m = setup_disk_only(keys, 1, 50000);
    char ty[16];
    mc_replica_desc_t d[8];
    types(m, "k", ty, d);
    types(m, "k", ty, d);
    taken_t g = {0};
    assert_int_equal(mc_master_promotion_take(m, "c1", 8, on_promotion, &g), 1);
    mc_offloader_info_t i;
    memset(&i, 0, sizeof(i));
    i.backend = MC_OFFLOAD_BACKEND_LOCAL;
    mc_offload_heartbeat_out_t hb;
    assert_int_equal(
        mc_master_offload_heartbeat(m, "c1", &i, 1, NULL, 0, 0, 0, NULL, NULL, NULL, &hb, NULL, 0),
        0);
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.promotion_cancelled, 1);
    assert_int_equal(st.used_bytes, MiB);
    mc_master_tick(m);
    assert_int_equal(mc_master_promotion_result(m, "c1", g.t[0].task_id, "k", 0),
                     MC_ERR_TASK_NOT_FOUND);
    assert_int_equal(stats(m).used_bytes, MiB);
    atomic_fetch_add(&fake_now, 61000);
    mc_master_tick(m);
    st = stats(m);
    assert_int_equal(st.used_bytes, MiB);
    assert_int_equal(st.quarantined_extents, 1);
    assert_int_equal(st.promotion_in_flight, 0);
    assert_int_equal(st.promotion_completed, 0);
    uint64_t refused = 0;
    assert_int_equal(fence_confirm(m, &refused), 1);
    assert_int_equal(refused, g.t[0].fence_token);
    mc_master_tick(m);
    assert_int_equal(stats(m).used_bytes, 0);
    mc_master_destroy(m);
}

static void test_in_flight_cap_rejects_and_counts(void **state)
{
    (void)state;
    const char *keys[] = {"a", "b"};
    mc_master_t *m = setup_disk_only(keys, 2, 1);
    char ty[16];
    mc_replica_desc_t d[8];
    types(m, "a", ty, d);
    types(m, "a", ty, d);
    types(m, "b", ty, d);
    types(m, "b", ty, d);
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.promotion_admitted, 1);
    assert_int_equal(st.promotion_rejected_cap, 1);
    assert_int_equal(st.promotion_in_flight, 1);
    mc_master_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_hit_promotes_into_an_invisible_extent_then_a_memory_replica),
        cmocka_unit_test(test_remove_cancels_and_the_late_report_frees_the_extent),
        cmocka_unit_test(test_unreported_promotion_expires_after_the_release_timeout),
        cmocka_unit_test(test_unmount_of_the_extents_segment_cancels),
        cmocka_unit_test(test_executor_leaving_keeps_the_extent_until_the_bound),
        cmocka_unit_test(test_in_flight_cap_rejects_and_counts),
    };
    return cmocka_run_group_tests_name("master promotion", tests, NULL, NULL);
}
