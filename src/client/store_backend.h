/*
 * store_backend.h — what a store backend implements behind include/mooncake/store.h.
 *
 * store.c owns everything that is the same for every kind of store: the handle, its lifecycle,
 * the argument checks and the dispatch through this table. Two backends plug in: the real
 * client (store_client.c, built by mc_store_setup: its own segment, Transfer Engine and master
 * connection) and the dummy client (dummy_client.c, built by mc_store_setup_dummy: every call
 * forwarded to a real client on this host). Each backend's setup builds its state and hands it,
 * with its table, to mc_store_create; store.c never names a backend.
 *
 * Lifecycle: every public call holds the handle's op lock for reading while it runs in the
 * backend; close takes it for writing. So a slot (but get_hostname, below) never runs
 * concurrently with close or free, and never after them. Slots run concurrently with each other,
 * from any threads. Ownership: the handle owns `impl` (mc_store_create); the caller keeps every
 * argument (register_buffer's memory included: a backend only records where it is).
 *
 * Arguments: store.c has checked them, as written above each slot (NULL arrays, key lengths,
 * ranges); a slot checks only what needs its own state (a buffer registered with it, its engine's
 * protocol). In batches, results[i] arrives holding the verdict of key i's own check: 0 for a key
 * to run, else the code the key is refused with (MC_ERR_INVALID_KEY), which the slot keeps and
 * skips the key.
 *
 * Returns: what the public call of the same name returns (store.h), unless written otherwise.
 */
#ifndef MC_CLIENT_STORE_BACKEND_H
#define MC_CLIENT_STORE_BACKEND_H

#include "client_http.h" /* mc_client_op_t */
#include "mooncake/store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mc_store_backend_ops {
    const char *name; /* "real", "dummy": in log lines */

    /* ---- lifecycle ---- */
    /* Close has begun: no new call starts. Called before close waits for the calls in flight,
     * so that a call that waits (unmount_local_disk's grace period) ends early. Must not block.
     * NULL: nothing to do. */
    void (*begin_close)(void *impl);
    /* Stops the backend's threads and lets go of everything it holds outside `impl` itself
     * (connections, segments, memory); once, after the calls in flight ended. Cannot fail. */
    void (*close)(void *impl);
    /* Frees `impl`, after close. */
    void (*free)(void *impl);
    /* 0 healthy, 2 the other end (master, real client) unreachable. */
    int (*health_check)(void *impl);
    /* The hostname of mc_store_get_hostname; never NULL. Called without the op lock (store.h:
     * static for the store's life), also after close. */
    const char *(*get_hostname)(const void *impl);

    /* ---- objects ---- */
    /* put / upsert (upsert 1), copying or zero-copy (zero_copy 1: values in registered memory),
     * of keys[0..n); `op` names the public call (the real client counts metrics per call). n > 0:
     * keys, values, sizes and results are non-NULL; results[] as the batch rule above. Sets every
     * results[i]; returns 0 or the first failing key's code, or a whole-call error. */
    int (*write)(void *impl, mc_client_op_t op, int upsert, int zero_copy, const char *const *keys,
                 const void *const *values, const size_t *sizes, size_t n,
                 const mc_replicate_config_t *config, int *results);
    /* get, copying or zero-copy, of keys[0..n) into bufs[i][0..capacities[i]); as write. */
    int (*read)(void *impl, mc_client_op_t op, int zero_copy, const char *const *keys,
                void *const *bufs, const size_t *capacities, size_t n, int64_t *results);
    /* Per-key exist (results[i]: 1, 0 or an error) and remove; as write. */
    int (*exist)(void *impl, const char *const *keys, size_t n, int *results);
    int (*remove)(void *impl, const char *const *keys, size_t n, int force, int *results);
    int64_t (*remove_all)(void *impl, int force);
    /* regex non-NULL */
    int64_t (*remove_by_regex)(void *impl, const char *regex, int force);
    /* key checked */
    int64_t (*get_size)(void *impl, const char *key);
    /* key checked; count non-NULL and set to 0, out non-NULL when capacity > 0 */
    int (*get_replica_desc)(void *impl, const char *key, mc_replica_desc_t *out, size_t capacity,
                            size_t *count);

    /* ---- memory for the zero-copy calls ---- */
    /* buf non-NULL, size > 0 */
    int (*register_buffer)(void *impl, void *buf, size_t size);
    /* buf non-NULL */
    int (*unregister_buffer)(void *impl, void *buf);

    /* ---- offload ---- */
    /* out non-NULL */
    int (*get_offload_stats)(void *impl, mc_store_offload_stats_t *out);
    int (*set_offloading)(void *impl, int enabled);

    /* ---- copy/move tasks, replica clear ---- */
    /* A copy (move 0: onto targets[0..n)) or move (move 1: source -> targets[0], n == 1) of
     * `key`. key checked, id_out non-NULL, targets[0..n) non-NULL (targets NULL only when n is
     * 0), source non-NULL for a move (NULL for a copy). */
    int (*create_task)(void *impl, int move, const char *key, const char *source,
                       const char *const *targets, size_t n, char *id_out);
    /* task_id, out non-NULL */
    int (*query_task)(void *impl, const char *task_id, mc_task_info_t *out);
    /* n > 0: keys[0..n) and cleared non-NULL */
    int (*batch_replica_clear)(void *impl, const char *const *keys, size_t n,
                               const char *segment_name, int *cleared);

    /* ---- segments mounted at run time ----
     * NULL in a backend that owns no segment (the dummy: upstream refuses these on a dummy too):
     * the call then returns MC_ERR_UNAVAILABLE_IN_CURRENT_MODE, logged, whatever its arguments
     * and even after close. */
    /* id_out non-NULL, size in 1..MC_MAX_VALUE_SIZE; protocol as the caller gave it */
    int (*allocate_and_mount_segment)(void *impl, uint64_t size, const char *protocol,
                                      char id_out[MC_STORE_SEGMENT_ID_MAX], uint64_t *allocated);
    /* path non-empty, id_out non-NULL, size in 1..MC_MAX_VALUE_SIZE, offset page-aligned */
    int (*mount_file_segment)(void *impl, const char *path, uint64_t offset, uint64_t size,
                              const char *protocol, char id_out[MC_STORE_SEGMENT_ID_MAX]);
    /* A segment of mount_file_segment (allocated 0) or of allocate_and_mount_segment
     * (allocated 1); id non-NULL. */
    int (*unmount_segment)(void *impl, const char *id, uint64_t grace_period_ms, int allocated);
    /* grace_period_ms at most MC_STORE_LOCAL_DISK_GRACE_MAX_MS */
    int (*unmount_local_disk)(void *impl, uint64_t grace_period_ms);
} mc_store_backend_ops_t;

/* upper bound of unmount_local_disk's wait (upstream's REST service limit: 3600 s) */
#define MC_STORE_LOCAL_DISK_GRACE_MAX_MS 3600000

/*
 * A store handle for `impl` of the backend `ops` (static: it must outlive the handle): 0 and
 * *out, or MC_ERR_INTERNAL_ERROR (out of memory), after which impl is already closed and freed
 * through ops. The handle owns impl from then on: mc_store_close / mc_store_free reach it
 * through ops->close and ops->free.
 */
int mc_store_create(const mc_store_backend_ops_t *ops, void *impl, mc_store_t **out);

/* The impl of `store` when it is a store of backend `ops`, else NULL (also for NULL). */
void *mc_store_impl_of(mc_store_t *store, const mc_store_backend_ops_t *ops);

#endif /* MC_CLIENT_STORE_BACKEND_H */
