/*
 * test_task_manager.c — the master's replica copy/move tasks (src/master/task_manager.h) on a
 * fake clock, with the master's invariants checked by every mc_master_tick in debug builds (the
 * reserved target extents are part of each segment's used bytes): commit, the object replaced
 * or a target unmounted mid-task, the processing timeout keeping extents until the late report,
 * retries when a target has no room, replica clear.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "master_service.h"
#include "mooncake/errors.h"
#include "task_manager.h"

#define MiB (1ull << 20)
#define SEG_BASE 0x7f0000000000ull

static _Atomic uint64_t fake_now;

static uint64_t fake_clock(void *arg)
{
    return atomic_load((_Atomic uint64_t *)arg);
}

static mc_master_t *new_master(uint64_t target_size)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    cfg.eviction_high_watermark_ratio = 1.0;
    cfg.client_ttl_ms = 86400000;
    cfg.task_processing_timeout_ms = 5000;
    cfg.task_max_retry_attempts = 2;
    mc_master_t *m = NULL;
    atomic_store(&fake_now, 1000000);
    assert_int_equal(mc_master_create(&cfg, &m), 0);
    mc_master_set_clock(m, fake_clock, (void *)&fake_now);
    const char *names[3] = {"a:1", "b:1", "c:1"};
    const char *clients[3] = {"ca", "cb", "cc"};
    for (int i = 0; i < 3; i++) {
        mc_segment_info_t s;
        memset(&s, 0, sizeof(s));
        snprintf(s.id, sizeof(s.id), "seg-%d", i);
        snprintf(s.name, sizeof(s.name), "%s", names[i]);
        snprintf(s.protocol, sizeof(s.protocol), "tcp");
        s.base = SEG_BASE;
        s.size = i == 0 ? 64 * MiB : target_size;
        assert_int_equal(mc_master_mount_segment(m, clients[i], &s), 0);
    }
    return m;
}

static void put_on_a(mc_master_t *m, const char *client, const char *key, uint64_t size)
{
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.preferred_segment = "a:1";
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(mc_master_put_start(m, client, key, size, &cfg, out, MC_MAX_REPLICAS, &n), 0);
    assert_string_equal(out[0].segment_name, "a:1");
    uint32_t crc = 1234;
    assert_int_equal(mc_master_put_end_checksum(m, client, key, &crc), 0);
}

static size_t replicas(mc_master_t *m, const char *key, char names[][272])
{
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n = 0;
    uint64_t size, lease;
    if (mc_master_query_key(m, key, out, MC_MAX_REPLICAS, &n, &size, &lease) != 0)
        return 0;
    for (size_t i = 0; names && i < n; i++)
        memcpy(names[i], out[i].segment_name, 272);
    return n;
}

static uint64_t used(mc_master_t *m)
{
    mc_master_stats_t st;
    mc_master_get_stats(m, &st);
    return st.used_bytes;
}

typedef struct fetched {
    int n;
    mc_task_assignment_t a;
    mc_replica_desc_t target;
    uint64_t size;
} fetched_t;

static int on_task(void *arg, const mc_task_assignment_t *a)
{
    fetched_t *f = arg;
    f->n++;
    f->a = *a;
    f->size = a->size;
    if (a->ntargets)
        f->target = a->targets[0];
    f->a.id = NULL; /* only valid in the callback */
    f->a.key = NULL;
    return 0;
}

static mc_task_status_t status(mc_master_t *m, const char *id)
{
    mc_task_info_t info;
    assert_int_equal(mc_master_query_task(m, id, &info), 0);
    return info.status;
}

static void test_copy_commits_after_the_report(void **state)
{
    (void)state;
    mc_master_t *m = new_master(64 * MiB);
    put_on_a(m, "writer", "k", MiB);
    const char *targets[] = {"b:1"};
    char id[MC_TASK_ID_LEN + 1];
    assert_int_equal(mc_master_create_copy_task(m, "k", targets, 1, id), 0);
    assert_int_equal(status(m, id), MC_TASK_PENDING);
    fetched_t f = {0};
    assert_int_equal(mc_master_fetch_tasks(m, "cb", 8, on_task, &f), 0); /* not its task */
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 1);
    assert_int_equal(f.size, MiB);
    assert_true(f.a.has_checksum && f.a.checksum == 1234);
    assert_string_equal(f.target.segment_name, "b:1");
    assert_int_equal(status(m, id), MC_TASK_PROCESSING);
    assert_int_equal(replicas(m, "k", NULL), 1); /* invisible until committed */
    assert_int_equal(used(m), 2 * MiB);
    mc_master_tick(m); /* invariants, with the reserved extent */
    assert_int_equal(mc_master_complete_task(m, "cb", id, MC_TASK_SUCCESS, 0, ""),
                     MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_complete_task(m, "ca", id, MC_TASK_SUCCESS, 0, ""), 0);
    assert_int_equal(status(m, id), MC_TASK_SUCCESS);
    char names[MC_MAX_REPLICAS][272];
    assert_int_equal(replicas(m, "k", names), 2);
    assert_string_equal(names[1], "b:1");
    mc_master_tick(m);
    /* move from b to c: the source goes */
    assert_int_equal(mc_master_create_move_task(m, "k", "b:1", "c:1", id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "cb", 8, on_task, &f), 1);
    assert_int_equal(mc_master_complete_task(m, "cb", id, MC_TASK_SUCCESS, 0, ""), 0);
    assert_int_equal(replicas(m, "k", names), 2);
    assert_string_equal(names[0], "a:1");
    assert_string_equal(names[1], "c:1");
    assert_int_equal(used(m), 2 * MiB);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_replaced_object_or_unmounted_target_fails_and_frees(void **state)
{
    (void)state;
    mc_master_t *m = new_master(64 * MiB);
    put_on_a(m, "writer", "k", MiB);
    const char *targets[] = {"b:1"};
    char id[MC_TASK_ID_LEN + 1];
    fetched_t f = {0};
    assert_int_equal(mc_master_create_copy_task(m, "k", targets, 1, id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 1);
    put_on_a(m, "writer", "k2", MiB);
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(mc_master_upsert_start(m, "writer", "k", MiB, &cfg, out, MC_MAX_REPLICAS, &n),
                     0);
    assert_int_equal(mc_master_upsert_end(m, "writer", "k"), 0);
    assert_int_equal(mc_master_complete_task(m, "ca", id, MC_TASK_SUCCESS, 0, ""), 0);
    assert_int_equal(status(m, id), MC_TASK_FAILED);
    assert_int_equal(replicas(m, "k", NULL), 1);
    mc_master_tick(m);
    assert_int_equal(used(m), 2 * MiB); /* k's new value and k2 */

    /* the target's segment unmounted mid-task */
    const char *to_c[] = {"c:1"};
    assert_int_equal(mc_master_create_copy_task(m, "k2", to_c, 1, id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 1);
    assert_int_equal(mc_master_unmount_segment(m, "cc", "seg-2"), 0);
    mc_master_tick(m);
    assert_int_equal(mc_master_complete_task(m, "ca", id, MC_TASK_SUCCESS, 0, ""), 0);
    assert_int_equal(status(m, id), MC_TASK_FAILED);
    assert_int_equal(replicas(m, "k2", NULL), 1);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_processing_timeout_keeps_extents_until_the_late_report(void **state)
{
    (void)state;
    mc_master_t *m = new_master(64 * MiB);
    put_on_a(m, "writer", "k", MiB);
    const char *targets[] = {"b:1"};
    char id[MC_TASK_ID_LEN + 1];
    fetched_t f = {0};
    assert_int_equal(mc_master_create_copy_task(m, "k", targets, 1, id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 1);
    atomic_fetch_add(&fake_now, 6000);
    mc_master_tick(m);
    assert_int_equal(status(m, id), MC_TASK_FAILED);
    assert_int_equal(used(m), 2 * MiB); /* the executor may still write into it */
    assert_int_equal(mc_master_complete_task(m, "ca", id, MC_TASK_SUCCESS, 0, ""), 0);
    assert_int_equal(status(m, id), MC_TASK_FAILED);
    assert_int_equal(used(m), MiB);
    assert_int_equal(replicas(m, "k", NULL), 1);
    mc_master_tick(m);
    mc_master_destroy(m);
}

/* A task its executor reports failed: its write may still land at the target (a stalled
 * receiver), so the target extent is quarantined until the target's owner confirms a fence
 * refusing the task's token — which the executor's writes carried. */
static void test_failed_task_quarantines_its_target_until_the_owners_fence(void **state)
{
    (void)state;
    mc_master_t *m = new_master(64 * MiB);
    put_on_a(m, "writer", "k", MiB);
    const char *targets[] = {"b:1"};
    char id[MC_TASK_ID_LEN + 1];
    fetched_t f = {0};
    assert_int_equal(mc_master_create_copy_task(m, "k", targets, 1, id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 1);
    assert_int_equal(used(m), 2 * MiB);
    assert_int_equal(mc_master_complete_task(m, "ca", id, MC_TASK_FAILED, MC_ERR_TRANSFER_FAIL,
                                             "writing a target failed"),
                     0);
    assert_int_equal(status(m, id), MC_TASK_FAILED);
    mc_master_tick(m);
    assert_int_equal(used(m), 2 * MiB); /* quarantined */
    uint64_t view = 0, tokens[8], upto = 0;
    size_t n = 0;
    mc_client_status_t st;
    assert_int_equal(mc_master_ping(m, "cb", &view, &st), 0);
    assert_int_equal(mc_master_fence_ping(m, "cb", view, 0, tokens, 8, &n, &upto), 0);
    assert_int_equal(n, 1); /* the target's owner is asked to refuse the task's token */
    assert_true(tokens[0] != 0);
    assert_int_equal(mc_master_fence_ping(m, "cb", view, upto, tokens, 8, &n, &upto), 0);
    assert_int_equal(n, 0);
    assert_int_equal(used(m), MiB);
    assert_int_equal(replicas(m, "k", NULL), 1);
    mc_master_destroy(m);
}

static void test_move_keeps_the_source_when_the_target_replica_went(void **state)
{
    (void)state;
    mc_master_t *m = new_master(64 * MiB);
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    const char *both[] = {"a:1", "b:1"};
    cfg.replica_num = 2;
    cfg.preferred_segments = both;
    cfg.preferred_segment_count = 2;
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(mc_master_put_start(m, "writer", "k", MiB, &cfg, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(mc_master_put_end(m, "writer", "k"), 0);
    char id[MC_TASK_ID_LEN + 1];
    fetched_t f = {0};
    assert_int_equal(mc_master_create_move_task(m, "k", "a:1", "b:1", id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 1);
    assert_int_equal(f.a.ntargets, 0); /* b already holds one: nothing to write */
    const char *keys[] = {"k"};
    int cleared;
    assert_int_equal(mc_master_batch_replica_clear(m, "writer", keys, 1, "b:1", &cleared), 0);
    assert_int_equal(cleared, 1);
    assert_int_equal(mc_master_complete_task(m, "ca", id, MC_TASK_SUCCESS, 0, ""), 0);
    assert_int_equal(status(m, id), MC_TASK_FAILED);
    char names[MC_MAX_REPLICAS][272];
    assert_int_equal(replicas(m, "k", names), 1);
    assert_string_equal(names[0], "a:1");
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_no_room_on_the_target_is_retried_then_failed(void **state)
{
    (void)state;
    mc_master_t *m = new_master(MiB); /* b and c hold 1 MiB */
    put_on_a(m, "writer", "k", 2 * MiB);
    const char *targets[] = {"b:1"};
    char id[MC_TASK_ID_LEN + 1];
    fetched_t f = {0};
    assert_int_equal(mc_master_create_copy_task(m, "k", targets, 1, id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 0); /* attempt 1 */
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 0); /* attempt 2 */
    assert_int_equal(status(m, id), MC_TASK_PENDING);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 0);
    mc_task_info_t info;
    assert_int_equal(mc_master_query_task(m, id, &info), 0);
    assert_int_equal(info.status, MC_TASK_FAILED);
    assert_non_null(strstr(info.message, "NO_AVAILABLE_HANDLE"));
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_replica_clear_takes_own_unleased_objects_only(void **state)
{
    (void)state;
    mc_master_t *m = new_master(64 * MiB);
    put_on_a(m, "writer", "mine", MiB);
    put_on_a(m, "other", "theirs", MiB);
    const char *targets[] = {"b:1"};
    char id[MC_TASK_ID_LEN + 1];
    fetched_t f = {0};
    assert_int_equal(mc_master_create_copy_task(m, "mine", targets, 1, id), 0);
    assert_int_equal(mc_master_fetch_tasks(m, "ca", 8, on_task, &f), 1);
    assert_int_equal(mc_master_complete_task(m, "ca", id, MC_TASK_SUCCESS, 0, ""), 0);
    const char *keys[] = {"mine", "theirs", "absent"};
    int cleared[3];
    assert_int_equal(mc_master_batch_replica_clear(m, "writer", keys, 3, "b:1", cleared), 0);
    assert_true(cleared[0] == 1 && cleared[1] == 0 && cleared[2] == 0);
    assert_int_equal(replicas(m, "mine", NULL), 1);
    assert_int_equal(mc_master_exist_key(m, "mine"), 1); /* leases it */
    assert_int_equal(mc_master_batch_replica_clear(m, "writer", keys, 1, "", cleared), 0);
    assert_int_equal(cleared[0], 0);
    atomic_fetch_add(&fake_now, 20000);
    assert_int_equal(mc_master_batch_replica_clear(m, "writer", keys, 2, NULL, cleared), 0);
    assert_true(cleared[0] == 1 && cleared[1] == 0);
    assert_int_equal(mc_master_exist_key(m, "mine"), 0);
    assert_int_equal(mc_master_exist_key(m, "theirs"), 1);
    mc_master_tick(m);
    mc_master_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_commits_after_the_report),
        cmocka_unit_test(test_replaced_object_or_unmounted_target_fails_and_frees),
        cmocka_unit_test(test_processing_timeout_keeps_extents_until_the_late_report),
        cmocka_unit_test(test_failed_task_quarantines_its_target_until_the_owners_fence),
        cmocka_unit_test(test_move_keeps_the_source_when_the_target_replica_went),
        cmocka_unit_test(test_no_room_on_the_target_is_retried_then_failed),
        cmocka_unit_test(test_replica_clear_takes_own_unleased_objects_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
