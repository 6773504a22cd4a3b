/*
 * store.c — the store handle of include/mooncake/store.h, the same for every backend
 * (store_backend.h): its lifecycle, the argument checks of every public call, and the dispatch to
 * the backend's table. The backends are the real client (store_client.c) and the dummy client
 * (dummy_client.c); their setups create the handle (mc_store_create), and this file never names
 * them.
 *
 * Each public call: enter (refused once close has begun), check the arguments, call the slot,
 * leave. The checks are the store's contract (store.h), so they are written once here and every
 * backend answers a bad argument with the same code.
 */
#include "store_backend.h"

#include "log.h"
#include "shared_memory.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mc_store {
    const mc_store_backend_ops_t *ops;
    void *impl; /* the backend's state: ops->free frees it */
    /* Every public call holds op_lock for reading; close takes it for writing, so it waits for
     * calls in flight and no call runs on a half-torn-down backend. */
    pthread_rwlock_t op_lock;
    pthread_mutex_t close_lock; /* serialises close calls */
    atomic_int closing; /* close has begun: new calls are refused before they take op_lock */
    atomic_int closed;  /* ops->close ran (or runs now) */
};

int mc_store_create(const mc_store_backend_ops_t *ops, void *impl, mc_store_t **out)
{
    mc_store_t *s = calloc(1, sizeof(*s));
    if (!s) {
        ops->close(impl);
        ops->free(impl);
        return MC_ERR_INTERNAL_ERROR;
    }
    s->ops = ops;
    s->impl = impl;
    pthread_mutex_init(&s->close_lock, NULL);
    /* Writer-preferring: a close waits only for the calls in flight, never for a stream of new
     * ones (glibc's default lets readers starve a waiting writer forever). */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->op_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    *out = s;
    return 0;
}

void *mc_store_impl_of(mc_store_t *s, const mc_store_backend_ops_t *ops)
{
    return s && s->ops == ops ? s->impl : NULL;
}

/* ---- lifecycle -------------------------------------------------------------------------- */

/* Starts a public call: 0 with op_lock held for reading, or an error with nothing held. */
static int enter(mc_store_t *s)
{
    if (!s)
        return MC_ERR_INVALID_PARAMS;
    if (atomic_load(&s->closing))
        return MC_ERR_INVALID_PARAMS; /* no new call once close has begun */
    pthread_rwlock_rdlock(&s->op_lock);
    if (atomic_load(&s->closed)) {
        pthread_rwlock_unlock(&s->op_lock);
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

/* Ends a public call, passing its result through: `value` is evaluated before the lock goes. */
static int64_t leave_with(mc_store_t *s, int64_t value)
{
    pthread_rwlock_unlock(&s->op_lock);
    return value;
}
#define LEAVE(s, value) leave_with((s), (value))

int mc_store_close(mc_store_t *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->close_lock);
    if (!atomic_exchange(&s->closing, 1) && s->ops->begin_close)
        s->ops->begin_close(s->impl);
    pthread_rwlock_wrlock(&s->op_lock); /* waits for calls in flight */
    int was_closed = atomic_exchange(&s->closed, 1);
    pthread_rwlock_unlock(&s->op_lock);
    if (!was_closed)
        s->ops->close(s->impl);
    pthread_mutex_unlock(&s->close_lock);
    return 0;
}

void mc_store_free(mc_store_t *s)
{
    if (!s)
        return;
    mc_store_close(s);
    s->ops->free(s->impl);
    mc_shared_free_owned(s);
    pthread_mutex_destroy(&s->close_lock);
    pthread_rwlock_destroy(&s->op_lock);
    free(s);
}

int mc_store_health_check(mc_store_t *s)
{
    if (enter(s) != 0)
        return 1;
    return (int)LEAVE(s, s->ops->health_check(s->impl));
}

const char *mc_store_get_hostname(const mc_store_t *s)
{
    return s ? s->ops->get_hostname(s->impl) : "";
}

/* ---- argument checks -------------------------------------------------------------------- */

static int check_key(const char *key)
{
    if (!key)
        return MC_ERR_INVALID_KEY;
    size_t n = strnlen(key, MC_MAX_KEY_LEN + 1);
    return (n == 0 || n > MC_MAX_KEY_LEN) ? MC_ERR_INVALID_KEY : 0;
}

/* ---- objects ---------------------------------------------------------------------------- */

/* put / upsert, plain or zero-copy, single or batch: one path. */
static int write_call(mc_store_t *s, mc_client_op_t op, int upsert, int zero_copy,
                      const char *const *keys, const void *const *values, const size_t *sizes,
                      size_t n, const mc_replicate_config_t *config, int *results)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if ((!keys || !values || !sizes || !results) && n)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    /* A preferred segment that is NULL: the whole call is refused, before anything moves (a
     * config the backend cannot encode must never come back as a stored key). */
    if (config && config->preferred_segments) {
        for (size_t k = 0; k < config->preferred_segment_count; k++) {
            if (!config->preferred_segments[k]) {
                for (size_t i = 0; i < n; i++)
                    results[i] = MC_ERR_INVALID_PARAMS;
                return LEAVE(s, MC_ERR_INVALID_PARAMS);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        results[i] = check_key(keys[i]);
        if (results[i] == 0 && ((sizes[i] > 0 && !values[i]) || sizes[i] > MC_MAX_VALUE_SIZE))
            results[i] = MC_ERR_INVALID_PARAMS; /* no bytes behind a length, or too long */
    }
    return LEAVE(
        s, s->ops->write(s->impl, op, upsert, zero_copy, keys, values, sizes, n, config, results));
}

int mc_store_put(mc_store_t *s, const char *key, const void *value, size_t size,
                 const mc_replicate_config_t *config)
{
    int result = 0;
    return write_call(s, MC_CLIENT_OP_PUT, 0, 0, &key, &value, &size, 1, config, &result);
}

int mc_store_upsert(mc_store_t *s, const char *key, const void *value, size_t size,
                    const mc_replicate_config_t *config)
{
    int result = 0;
    return write_call(s, MC_CLIENT_OP_UPSERT, 1, 0, &key, &value, &size, 1, config, &result);
}

int mc_store_put_from(mc_store_t *s, const char *key, const void *buf, size_t size,
                      const mc_replicate_config_t *config)
{
    int result = 0;
    return write_call(s, MC_CLIENT_OP_PUT_FROM, 0, 1, &key, &buf, &size, 1, config, &result);
}

int mc_store_upsert_from(mc_store_t *s, const char *key, const void *buf, size_t size,
                         const mc_replicate_config_t *config)
{
    int result = 0;
    return write_call(s, MC_CLIENT_OP_UPSERT_FROM, 1, 1, &key, &buf, &size, 1, config, &result);
}

int mc_store_put_batch(mc_store_t *s, const char *const *keys, const void *const *values,
                       const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                       int *results)
{
    return write_call(s, MC_CLIENT_OP_PUT_BATCH, 0, 0, keys, values, sizes, n, config, results);
}

int mc_store_put_from_batch(mc_store_t *s, const char *const *keys, const void *const *bufs,
                            const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                            int *results)
{
    return write_call(s, MC_CLIENT_OP_BATCH_PUT_FROM, 0, 1, keys, bufs, sizes, n, config, results);
}

int mc_store_upsert_from_batch(mc_store_t *s, const char *const *keys, const void *const *bufs,
                               const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                               int *results)
{
    return write_call(s, MC_CLIENT_OP_BATCH_UPSERT_FROM, 1, 1, keys, bufs, sizes, n, config,
                      results);
}

/* get, plain or zero-copy, single or batch: one path. */
static int read_call(mc_store_t *s, mc_client_op_t op, int zero_copy, const char *const *keys,
                     void *const *bufs, const size_t *capacities, size_t n, int64_t *results)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if ((!keys || !bufs || !capacities || !results) && n)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    for (size_t i = 0; i < n; i++) {
        results[i] = check_key(keys[i]);
        if (results[i] == 0 && !bufs[i] && capacities[i] > 0)
            results[i] = MC_ERR_INVALID_PARAMS; /* a capacity with no memory behind it */
    }
    return LEAVE(s, s->ops->read(s->impl, op, zero_copy, keys, bufs, capacities, n, results));
}

int64_t mc_store_get(mc_store_t *s, const char *key, void *buf, size_t capacity)
{
    int64_t result = 0;
    int rc = read_call(s, MC_CLIENT_OP_GET, 0, &key, &buf, &capacity, 1, &result);
    return rc < 0 && result >= 0 ? rc : result;
}

int64_t mc_store_get_into(mc_store_t *s, const char *key, void *buf, size_t capacity)
{
    int64_t result = 0;
    int rc = read_call(s, MC_CLIENT_OP_GET_INTO, 1, &key, &buf, &capacity, 1, &result);
    return rc < 0 && result >= 0 ? rc : result;
}

int mc_store_get_batch(mc_store_t *s, const char *const *keys, void *const *bufs,
                       const size_t *capacities, size_t n, int64_t *results)
{
    return read_call(s, MC_CLIENT_OP_GET_BATCH, 0, keys, bufs, capacities, n, results);
}

int mc_store_get_into_batch(mc_store_t *s, const char *const *keys, void *const *bufs,
                            const size_t *capacities, size_t n, int64_t *results)
{
    return read_call(s, MC_CLIENT_OP_BATCH_GET_INTO, 1, keys, bufs, capacities, n, results);
}

int64_t mc_store_get_size(mc_store_t *s, const char *key)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if ((rc = check_key(key)) != 0)
        return LEAVE(s, rc);
    return LEAVE(s, s->ops->get_size(s->impl, key));
}

int mc_store_get_replica_desc(mc_store_t *s, const char *key, mc_replica_desc_t *out,
                              size_t capacity, size_t *count)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!count || (capacity && !out))
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    *count = 0;
    if ((rc = check_key(key)) != 0)
        return LEAVE(s, rc);
    return LEAVE(s, s->ops->get_replica_desc(s->impl, key, out, capacity, count));
}

/* exist (remove 0) or remove (remove 1) of keys whose results are per-key codes. */
static int per_key_call(mc_store_t *s, int remove, const char *const *keys, size_t n, int force,
                        int *results)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if ((!keys || !results) && n)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    for (size_t i = 0; i < n; i++)
        results[i] = check_key(keys[i]);
    return LEAVE(s, remove ? s->ops->remove(s->impl, keys, n, force, results)
                           : s->ops->exist(s->impl, keys, n, results));
}

int mc_store_exist(mc_store_t *s, const char *key)
{
    int result = 0;
    int rc = per_key_call(s, 0, &key, 1, 0, &result);
    return rc < 0 ? rc : result;
}

int mc_store_batch_exist(mc_store_t *s, const char *const *keys, size_t n, int *results)
{
    return per_key_call(s, 0, keys, n, 0, results);
}

int mc_store_remove(mc_store_t *s, const char *key, int force)
{
    int result = 0;
    int rc = per_key_call(s, 1, &key, 1, force, &result);
    return rc < 0 ? rc : result;
}

int mc_store_batch_remove(mc_store_t *s, const char *const *keys, size_t n, int force, int *results)
{
    return per_key_call(s, 1, keys, n, force, results);
}

int64_t mc_store_remove_all(mc_store_t *s, int force)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    return LEAVE(s, s->ops->remove_all(s->impl, force));
}

int64_t mc_store_remove_by_regex(mc_store_t *s, const char *regex, int force)
{
    if (!regex)
        return MC_ERR_INVALID_PARAMS;
    int rc = enter(s);
    if (rc != 0)
        return rc;
    return LEAVE(s, s->ops->remove_by_regex(s->impl, regex, force));
}

/* ---- memory for the zero-copy calls ----------------------------------------------------- */

int mc_store_register_buffer(mc_store_t *s, void *buf, size_t size)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!buf || size == 0)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    return LEAVE(s, s->ops->register_buffer(s->impl, buf, size));
}

int mc_store_unregister_buffer(mc_store_t *s, void *buf)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!buf)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    return LEAVE(s, s->ops->unregister_buffer(s->impl, buf));
}

/* ---- offload ---------------------------------------------------------------------------- */

int mc_store_get_offload_stats(mc_store_t *s, mc_store_offload_stats_t *out)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!out)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    return LEAVE(s, s->ops->get_offload_stats(s->impl, out));
}

int mc_store_set_offloading(mc_store_t *s, int enabled)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    return LEAVE(s, s->ops->set_offloading(s->impl, enabled));
}

/* ---- replica copy/move tasks and replica clear ------------------------------------------ */

int mc_store_create_copy_task(mc_store_t *s, const char *key, const char *const *targets, size_t n,
                              char *id_out)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!id_out || (!targets && n))
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    if ((rc = check_key(key)) != 0)
        return LEAVE(s, rc);
    for (size_t i = 0; i < n; i++) {
        if (!targets[i])
            return LEAVE(s, MC_ERR_INVALID_PARAMS);
    }
    return LEAVE(s, s->ops->create_task(s->impl, 0, key, NULL, targets, n, id_out));
}

int mc_store_create_move_task(mc_store_t *s, const char *key, const char *source,
                              const char *target, char *id_out)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!id_out || !source || !target)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    if ((rc = check_key(key)) != 0)
        return LEAVE(s, rc);
    return LEAVE(s, s->ops->create_task(s->impl, 1, key, source, &target, 1, id_out));
}

int mc_store_query_task(mc_store_t *s, const char *task_id, mc_task_info_t *out)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!task_id || !out)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    return LEAVE(s, s->ops->query_task(s->impl, task_id, out));
}

int mc_store_batch_replica_clear(mc_store_t *s, const char *const *keys, size_t n,
                                 const char *segment_name, int *cleared)
{
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if ((!keys || !cleared) && n)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    for (size_t i = 0; i < n; i++) {
        if (!keys[i])
            return LEAVE(s, MC_ERR_INVALID_PARAMS);
    }
    return LEAVE(s, s->ops->batch_replica_clear(s->impl, keys, n, segment_name, cleared));
}

/* ---- segments mounted at run time ------------------------------------------------------- */

/* A segment call on a backend without the slot (it owns no segment): refused before anything
 * else, as upstream refuses these on a dummy ("requires RealClient"). */
static int refuse_segment_call(const mc_store_t *s, const char *what)
{
    MC_ERROR("%s: not on a %s client (it owns no segment); call it on the real client", what,
             s->ops->name);
    return MC_ERR_UNAVAILABLE_IN_CURRENT_MODE;
}

int mc_store_allocate_and_mount_segment(mc_store_t *s, uint64_t size, const char *protocol,
                                        char id_out[MC_STORE_SEGMENT_ID_MAX], uint64_t *allocated)
{
    if (s && !s->ops->allocate_and_mount_segment)
        return refuse_segment_call(s, "allocate_and_mount_segment");
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!id_out || size == 0 || size > MC_MAX_VALUE_SIZE) {
        MC_ERROR("allocate_and_mount_segment: size %" PRIu64 " is not in 1..2^40 bytes, or bad "
                 "arguments",
                 size);
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    }
    return LEAVE(s, s->ops->allocate_and_mount_segment(s->impl, size, protocol, id_out, allocated));
}

int mc_store_mount_file_segment(mc_store_t *s, const char *path, uint64_t offset, uint64_t size,
                                const char *protocol, char id_out[MC_STORE_SEGMENT_ID_MAX])
{
    if (s && !s->ops->mount_file_segment)
        return refuse_segment_call(s, "mount_segment");
    int rc = enter(s);
    if (rc != 0)
        return rc;
    long page = sysconf(_SC_PAGESIZE);
    if (!path || !*path || !id_out || size == 0 || size > MC_MAX_VALUE_SIZE ||
        offset % (uint64_t)page != 0) {
        MC_ERROR("mount_segment: needs a path, a size in 1..2^40 bytes and an offset that is a "
                 "multiple of the page size (%ld); got size %" PRIu64 ", offset %" PRIu64,
                 page, size, offset);
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    }
    return LEAVE(s, s->ops->mount_file_segment(s->impl, path, offset, size, protocol, id_out));
}

/* Unmounts a segment of mount_file_segment (allocated 0) or allocate_and_mount_segment (1). */
static int unmount_call(mc_store_t *s, const char *id, uint64_t grace_ms, int allocated)
{
    if (s && !s->ops->unmount_segment)
        return refuse_segment_call(s, "unmount_segment");
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (!id)
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    return LEAVE(s, s->ops->unmount_segment(s->impl, id, grace_ms, allocated));
}

int mc_store_unmount_segment(mc_store_t *s, const char *id, uint64_t grace_period_ms)
{
    return unmount_call(s, id, grace_period_ms, 0);
}

int mc_store_unmount_and_free_segment(mc_store_t *s, const char *id, uint64_t grace_period_ms)
{
    return unmount_call(s, id, grace_period_ms, 1);
}

int mc_store_unmount_local_disk(mc_store_t *s, uint64_t grace_period_ms)
{
    if (s && !s->ops->unmount_local_disk)
        return refuse_segment_call(s, "unmount_local_disk_segment");
    int rc = enter(s);
    if (rc != 0)
        return rc;
    if (grace_period_ms > MC_STORE_LOCAL_DISK_GRACE_MAX_MS) {
        MC_ERROR("unmount_local_disk: grace period %" PRIu64 " ms is above %d ms", grace_period_ms,
                 MC_STORE_LOCAL_DISK_GRACE_MAX_MS);
        return LEAVE(s, MC_ERR_INVALID_PARAMS);
    }
    return LEAVE(s, s->ops->unmount_local_disk(s->impl, grace_period_ms));
}
