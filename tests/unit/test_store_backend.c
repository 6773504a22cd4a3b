/*
 * test_store_backend.c — the store handle (src/client/store.c) over a fake backend
 * (store_backend.h): a bad argument is answered before the backend sees the call, batches hand
 * the backend each key's verdict in results[], a backend without the segment slots has those
 * calls refused whatever their arguments, a closed store refuses every call and closes and frees
 * its backend once, and close tells the backend first, then waits for the call in flight.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store_backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define FAKE_RC 4242 /* what every slot of the fake answers: the call reached it */

typedef struct fake {
    atomic_int calls, begin_closes, closes, frees;
    atomic_int closing;     /* begin_close ran */
    atomic_int in_wait;     /* unmount_local_disk is waiting for begin_close */
    atomic_int wait_ended;  /* ... and returned */
    atomic_int closed_late; /* close ran while a call was still inside */
    int seen[8];            /* results[] as write/read/exist received them */
    size_t seen_n;
} fake_t;

static fake_t *fake_of(void *impl)
{
    fake_t *f = impl;
    atomic_fetch_add(&f->calls, 1);
    return f;
}

static void fake_begin_close(void *impl)
{
    fake_t *f = impl;
    atomic_fetch_add(&f->begin_closes, 1);
    atomic_store(&f->closing, 1);
}

static void fake_close(void *impl)
{
    fake_t *f = impl;
    if (atomic_load(&f->in_wait) && !atomic_load(&f->wait_ended))
        atomic_store(&f->closed_late, 1);
    atomic_fetch_add(&f->closes, 1);
}

static void fake_free(void *impl)
{
    fake_t *f = impl;
    atomic_fetch_add(&f->frees, 1);
}

static int fake_health(void *impl)
{
    fake_of(impl);
    return 0;
}

static const char *fake_hostname(const void *impl)
{
    return "fake:1";
}

static int fake_write(void *impl, mc_client_op_t op, int upsert, int zero_copy,
                      const char *const *keys, const void *const *values, const size_t *sizes,
                      size_t n, const mc_replicate_config_t *config, int *results)
{
    fake_t *f = fake_of(impl);
    for (size_t i = 0; i < n && i < 8; i++)
        f->seen[i] = results[i];
    f->seen_n = n;
    return FAKE_RC;
}

static int fake_read(void *impl, mc_client_op_t op, int zero_copy, const char *const *keys,
                     void *const *bufs, const size_t *capacities, size_t n, int64_t *results)
{
    fake_t *f = fake_of(impl);
    for (size_t i = 0; i < n && i < 8; i++)
        f->seen[i] = (int)results[i];
    f->seen_n = n;
    return FAKE_RC;
}

static int fake_exist(void *impl, const char *const *keys, size_t n, int *results)
{
    fake_t *f = fake_of(impl);
    for (size_t i = 0; i < n && i < 8; i++)
        f->seen[i] = results[i];
    f->seen_n = n;
    return FAKE_RC;
}

static int fake_remove(void *impl, const char *const *keys, size_t n, int force, int *results)
{
    fake_of(impl);
    return FAKE_RC;
}

static int64_t fake_count(void *impl, int force)
{
    fake_of(impl);
    return FAKE_RC;
}

static int64_t fake_regex(void *impl, const char *regex, int force)
{
    fake_of(impl);
    return FAKE_RC;
}

static int64_t fake_size(void *impl, const char *key)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_desc(void *impl, const char *key, mc_replica_desc_t *out, size_t capacity,
                     size_t *count)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_register(void *impl, void *buf, size_t size)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_unregister(void *impl, void *buf)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_stats(void *impl, mc_store_offload_stats_t *out)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_set_offloading(void *impl, int enabled)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_create_task(void *impl, int move, const char *key, const char *source,
                            const char *const *targets, size_t n, char *id_out)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_query_task(void *impl, const char *task_id, mc_task_info_t *out)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_clear(void *impl, const char *const *keys, size_t n, const char *segment_name,
                      int *cleared)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_alloc_mount(void *impl, uint64_t size, const char *protocol,
                            char id_out[MC_STORE_SEGMENT_ID_MAX], uint64_t *allocated)
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_mount_file(void *impl, const char *path, uint64_t offset, uint64_t size,
                           const char *protocol, char id_out[MC_STORE_SEGMENT_ID_MAX])
{
    fake_of(impl);
    return FAKE_RC;
}

static int fake_unmount(void *impl, const char *id, uint64_t grace_period_ms, int allocated)
{
    fake_of(impl);
    return FAKE_RC;
}

/* Waits (up to 10 s) until close has begun, as the real client's grace period does. */
static int fake_unmount_local_disk(void *impl, uint64_t grace_period_ms)
{
    fake_t *f = fake_of(impl);
    atomic_store(&f->in_wait, 1);
    for (int i = 0; i < 10000 && !atomic_load(&f->closing); i++)
        usleep(1000);
    usleep(20 * 1000); /* a close that did not wait for us would run now */
    atomic_store(&f->wait_ended, 1);
    return FAKE_RC;
}

static const mc_store_backend_ops_t fake_ops = {
    .name = "fake",
    .begin_close = fake_begin_close,
    .close = fake_close,
    .free = fake_free,
    .health_check = fake_health,
    .get_hostname = fake_hostname,
    .write = fake_write,
    .read = fake_read,
    .exist = fake_exist,
    .remove = fake_remove,
    .remove_all = fake_count,
    .remove_by_regex = fake_regex,
    .get_size = fake_size,
    .get_replica_desc = fake_desc,
    .register_buffer = fake_register,
    .unregister_buffer = fake_unregister,
    .get_offload_stats = fake_stats,
    .set_offloading = fake_set_offloading,
    .create_task = fake_create_task,
    .query_task = fake_query_task,
    .batch_replica_clear = fake_clear,
    .allocate_and_mount_segment = fake_alloc_mount,
    .mount_file_segment = fake_mount_file,
    .unmount_segment = fake_unmount,
    .unmount_local_disk = fake_unmount_local_disk,
};

/* The same backend without a segment of its own, as the dummy. */
static mc_store_backend_ops_t segmentless_ops;

static mc_store_t *open_fake(const mc_store_backend_ops_t *ops, fake_t *f)
{
    memset(f, 0, sizeof(*f));
    mc_store_t *s = NULL;
    assert_int_equal(mc_store_create(ops, f, &s), 0);
    assert_non_null(s);
    return s;
}

static void test_bad_arguments_never_reach_the_backend(void **state)
{
    fake_t f;
    mc_store_t *s = open_fake(&fake_ops, &f);
    char buf[16], id[MC_STORE_SEGMENT_ID_MAX], longkey[MC_MAX_KEY_LEN + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    const char *keys[1] = {"k"};
    const void *vals[1] = {"v"};
    size_t sizes[1] = {1}, count = 7;
    int res[1];
    int64_t rres[1];
    mc_replica_desc_t desc[1];
    mc_task_info_t task;

    assert_int_equal(mc_store_put_batch(s, NULL, vals, sizes, 1, NULL, res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put_batch(s, keys, vals, sizes, 1, NULL, NULL),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_batch(s, keys, NULL, sizes, 1, rres), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_batch_exist(s, NULL, 1, res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_batch_remove(s, keys, 1, 0, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_size(s, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_get_size(s, ""), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_get_size(s, longkey), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_get_replica_desc(s, "k", desc, 1, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_replica_desc(s, "k", NULL, 1, &count), MC_ERR_INVALID_PARAMS);
    assert_int_equal(count, 7); /* untouched: the arguments were refused first */
    assert_int_equal(mc_store_get_replica_desc(s, "", desc, 1, &count), MC_ERR_INVALID_KEY);
    assert_int_equal(count, 0);
    assert_int_equal(mc_store_remove_by_regex(s, NULL, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_register_buffer(s, NULL, 16), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_register_buffer(s, buf, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_unregister_buffer(s, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_offload_stats(s, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_create_copy_task(s, "k", keys, 1, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_create_copy_task(s, "k", NULL, 1, id), MC_ERR_INVALID_PARAMS);
    const char *no_target[1] = {NULL};
    assert_int_equal(mc_store_create_copy_task(s, "k", no_target, 1, id), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_create_copy_task(s, "", keys, 1, id), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_create_move_task(s, "k", NULL, "b", id), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_create_move_task(s, "k", "a", NULL, id), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_create_move_task(s, NULL, "a", "b", id), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_query_task(s, NULL, &task), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_query_task(s, "t", NULL), MC_ERR_INVALID_PARAMS);
    const char *no_key[1] = {NULL};
    assert_int_equal(mc_store_batch_replica_clear(s, no_key, 1, NULL, res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_batch_replica_clear(s, keys, 1, NULL, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_allocate_and_mount_segment(s, 0, NULL, id, NULL),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_allocate_and_mount_segment(s, MC_MAX_VALUE_SIZE + 1, NULL, id, NULL),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_mount_file_segment(s, "", 0, 4096, NULL, id), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_mount_file_segment(s, "/f", 1, 4096, NULL, id),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_unmount_segment(s, NULL, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_unmount_and_free_segment(s, NULL, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_unmount_local_disk(s, MC_STORE_LOCAL_DISK_GRACE_MAX_MS + 1),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(atomic_load(&f.calls), 0);

    /* and good ones do, with the backend's answer passed through */
    assert_int_equal(mc_store_get_size(s, "k"), FAKE_RC);
    assert_int_equal(mc_store_get_replica_desc(s, "k", NULL, 0, &count), FAKE_RC);
    assert_int_equal(mc_store_remove_all(s, 1), FAKE_RC);
    assert_int_equal(mc_store_create_move_task(s, "k", "a", "b", id), FAKE_RC);
    assert_int_equal(mc_store_set_offloading(s, 1), FAKE_RC);
    assert_int_equal(mc_store_health_check(s), 0);
    assert_string_equal(mc_store_get_hostname(s), "fake:1");
    assert_int_equal(atomic_load(&f.calls), 6);
    mc_store_free(s);
}

static void test_batch_keys_arrive_with_their_verdicts(void **state)
{
    fake_t f;
    mc_store_t *s = open_fake(&fake_ops, &f);
    char longkey[MC_MAX_KEY_LEN + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    const char *keys[4] = {"good", "", NULL, longkey};
    const void *vals[4] = {"a", "b", "c", "d"};
    size_t sizes[4] = {1, 1, 1, 1};
    int res[4] = {9, 9, 9, 9};
    assert_int_equal(mc_store_put_batch(s, keys, vals, sizes, 4, NULL, res), FAKE_RC);
    assert_int_equal(f.seen_n, 4);
    assert_int_equal(f.seen[0], 0);
    for (int i = 1; i < 4; i++)
        assert_int_equal(f.seen[i], MC_ERR_INVALID_KEY);

    void *bufs[4] = {res, res, res, res};
    int64_t rres[4] = {9, 9, 9, 9};
    assert_int_equal(mc_store_get_into_batch(s, keys, bufs, sizes, 4, rres), FAKE_RC);
    assert_int_equal(f.seen[0], 0);
    assert_int_equal(f.seen[2], MC_ERR_INVALID_KEY);

    assert_int_equal(mc_store_batch_exist(s, keys, 4, res), FAKE_RC);
    assert_int_equal(f.seen[0], 0);
    assert_int_equal(f.seen[3], MC_ERR_INVALID_KEY);
    mc_store_free(s);
}

/* Values and buffers that are not there, and a config that cannot be encoded: refused per key
 * (or, for the config, the whole call) before the backend could copy from or into NULL. */
static void test_missing_memory_and_bad_configs_are_refused_first(void **state)
{
    fake_t f;
    mc_store_t *s = open_fake(&fake_ops, &f);
    const char *keys[3] = {"a", "b", "c"};
    const void *vals[3] = {"x", NULL, NULL};
    size_t sizes[3] = {1, 5, 0}; /* "c": no bytes and no length, a valid empty value */
    int res[3] = {9, 9, 9};
    assert_int_equal(mc_store_put_batch(s, keys, vals, sizes, 3, NULL, res), FAKE_RC);
    assert_int_equal(f.seen[0], 0);
    assert_int_equal(f.seen[1], MC_ERR_INVALID_PARAMS);
    assert_int_equal(f.seen[2], 0);

    size_t caps[3] = {4, 4, 0};
    void *bufs[3] = {res, NULL, NULL};
    int64_t rres[3] = {9, 9, 9};
    assert_int_equal(mc_store_get_batch(s, keys, bufs, caps, 3, rres), FAKE_RC);
    assert_int_equal(f.seen[0], 0);
    assert_int_equal(f.seen[1], MC_ERR_INVALID_PARAMS);
    assert_int_equal(f.seen[2], 0);

    const char *prefs[2] = {"host:1", NULL};
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.preferred_segments = prefs;
    cfg.preferred_segment_count = 2;
    int calls = atomic_load(&f.calls);
    assert_int_equal(mc_store_put(s, "a", "x", 1, &cfg), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put_batch(s, keys, vals, sizes, 1, &cfg, res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(res[0], MC_ERR_INVALID_PARAMS);
    assert_int_equal(atomic_load(&f.calls), calls);
    cfg.preferred_segment_count = 1; /* only the good one */
    assert_int_equal(mc_store_put(s, "a", "x", 1, &cfg), FAKE_RC);
    mc_store_free(s);
}

static void test_missing_segment_slots_are_refused_whatever_the_arguments(void **state)
{
    fake_t f;
    mc_store_t *s = open_fake(&segmentless_ops, &f);
    char id[MC_STORE_SEGMENT_ID_MAX];
    assert_int_equal(mc_store_allocate_and_mount_segment(s, 0, NULL, NULL, NULL),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    assert_int_equal(mc_store_mount_file_segment(s, NULL, 1, 0, NULL, id),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    assert_int_equal(mc_store_unmount_segment(s, NULL, 0), MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    assert_int_equal(mc_store_unmount_and_free_segment(s, "x", 0),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    assert_int_equal(mc_store_unmount_local_disk(s, UINT64_MAX),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    assert_int_equal(mc_store_close(s), 0);
    assert_int_equal(mc_store_unmount_local_disk(s, 0), MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    assert_int_equal(atomic_load(&f.calls), 0);
    mc_store_free(s);
    /* a NULL store is refused as every call on it */
    assert_int_equal(mc_store_unmount_local_disk(NULL, 0), MC_ERR_INVALID_PARAMS);
}

static void test_closed_store_refuses_every_call_and_frees_its_backend_once(void **state)
{
    fake_t f;
    mc_store_t *s = open_fake(&fake_ops, &f);
    int res[1];
    const char *keys[1] = {"k"};
    assert_int_equal(mc_store_close(s), 0);
    assert_int_equal(mc_store_close(s), 0);
    assert_int_equal(atomic_load(&f.begin_closes), 1);
    assert_int_equal(atomic_load(&f.closes), 1);
    assert_int_equal(mc_store_put(s, "k", "v", 1, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get(s, "", res, sizeof(res)), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_exist(s, "k"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_size(s, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_remove_all(s, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_batch_replica_clear(s, keys, 1, NULL, res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_health_check(s), 1);
    assert_string_equal(mc_store_get_hostname(s), "fake:1");
    assert_int_equal(atomic_load(&f.calls), 0);
    mc_store_free(s);
    assert_int_equal(atomic_load(&f.closes), 1);
    assert_int_equal(atomic_load(&f.frees), 1);
    /* free without close: closed, then freed */
    s = open_fake(&fake_ops, &f);
    mc_store_free(s);
    assert_int_equal(atomic_load(&f.closes), 1);
    assert_int_equal(atomic_load(&f.frees), 1);
}

static void *wait_in_unmount(void *arg)
{
    return (void *)(intptr_t)mc_store_unmount_local_disk(arg, 1000);
}

static void test_close_warns_the_backend_then_waits_for_the_call_in_flight(void **state)
{
    fake_t f;
    mc_store_t *s = open_fake(&fake_ops, &f);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_in_unmount, s), 0);
    for (int i = 0; i < 10000 && !atomic_load(&f.in_wait); i++)
        usleep(1000);
    assert_true(atomic_load(&f.in_wait));
    assert_int_equal(mc_store_close(s), 0); /* ends the wait through begin_close */
    void *rc;
    pthread_join(t, &rc);
    assert_int_equal((intptr_t)rc, FAKE_RC);
    assert_int_equal(atomic_load(&f.closed_late), 0);
    assert_int_equal(atomic_load(&f.closes), 1);
    assert_int_equal(mc_store_unmount_local_disk(s, 0), MC_ERR_INVALID_PARAMS);
    mc_store_free(s);
}

static void test_impl_of_names_only_its_own_backend(void **state)
{
    fake_t f;
    mc_store_t *s = open_fake(&fake_ops, &f);
    assert_ptr_equal(mc_store_impl_of(s, &fake_ops), &f);
    assert_null(mc_store_impl_of(s, &segmentless_ops));
    assert_null(mc_store_impl_of(NULL, &fake_ops));
    mc_store_free(s);
}

int main(void)
{
    segmentless_ops = fake_ops;
    segmentless_ops.name = "dummy";
    segmentless_ops.allocate_and_mount_segment = NULL;
    segmentless_ops.mount_file_segment = NULL;
    segmentless_ops.unmount_segment = NULL;
    segmentless_ops.unmount_local_disk = NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments_never_reach_the_backend),
        cmocka_unit_test(test_batch_keys_arrive_with_their_verdicts),
        cmocka_unit_test(test_missing_memory_and_bad_configs_are_refused_first),
        cmocka_unit_test(test_missing_segment_slots_are_refused_whatever_the_arguments),
        cmocka_unit_test(test_closed_store_refuses_every_call_and_frees_its_backend_once),
        cmocka_unit_test(test_close_warns_the_backend_then_waits_for_the_call_in_flight),
        cmocka_unit_test(test_impl_of_names_only_its_own_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
