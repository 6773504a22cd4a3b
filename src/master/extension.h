/*
 * extension.h — how the master's subsystems plug into its core: one table of hooks per
 * extension (restore, copy/move tasks, promotion, offload), in one fixed order, that the core
 * calls at each event of an object's, a segment's or a client's life. The shape is nginx's phase
 * handlers, and the same as journal.h's callbacks for HA and the operation log: the core never
 * names an extension, so adding one is a file with its table plus a row in extensions.c.
 *
 * Direction of calls: an extension may call the core's *_locked API (master_internal.h) from
 * any hook; the core reaches an extension only through these hooks; an extension reaches another
 * only through a core event that the other hooks (executor_gone, executor_backlog, replica_lost
 * below). Each extension owns its state (a pointer or a few fields of struct mc_master that
 * only it touches).
 *
 * Every hook but init and fini runs with the master's one lock held, in the thread of the
 * operation that caused the event; it must not sleep and must not take the lock. A NULL hook is
 * skipped. The order of the table (extensions.c) is the order in which the core calls each
 * event's hooks; that order is part of the behaviour and is written there with its reasons.
 */
#ifndef MC_MASTER_EXTENSION_H
#define MC_MASTER_EXTENSION_H

#include "master_internal.h"

struct mc_offloader;

typedef struct mc_master_ext {
    const char *name; /* for logs and the debug check */
    /* At mc_master_create, before any thread runs (no lock): 0, or an MC_ERR_* that fails the
     * create (the extensions initialised before it are finalised). */
    int (*init)(mc_master_t *m);
    /* At mc_master_destroy, threads stopped (no lock), in table order: frees all its state. */
    void (*fini)(mc_master_t *m);

    /* A new value of `o` is being committed (PutEnd, UpsertEnd), before its journal entry: state
     * that names the key's previous value must go now so the entry does not carry it. */
    void (*value_committing)(mc_master_t *m, mc_object_t *o);
    /* The new value of `o` is COMPLETE and journaled. */
    void (*value_committed)(mc_master_t *m, mc_object_t *o, uint64_t now);
    /* o's value is being discarded (removed, replaced, evicted, lost): what refers to it goes. */
    void (*value_discarding)(mc_master_t *m, mc_object_t *o);
    /* `o` was moved to the record `n` (more replica slots): back pointers follow it. */
    void (*object_moved)(mc_object_t *n);
    /* Memory replica on segment `slot` of `o` is going (unmount, a task's failure). */
    void (*replica_lost)(mc_master_t *m, mc_object_t *o, uint32_t slot);
    /* Segment `slot` was just mounted, nothing allocated in it yet. */
    void (*segment_mounted)(mc_master_t *m, uint32_t slot);
    /* Segment `slot` is being unmounted; its allocator still exists. */
    void (*segment_gone)(mc_master_t *m, uint32_t slot);
    /* The client `client_id` expired or left. */
    void (*client_gone)(mc_master_t *m, const char *client_id);
    /* The offloader `off` (a client that runs offload and promotion tasks) is going away. */
    void (*executor_gone)(mc_master_t *m, const struct mc_offloader *off);
    /* Work this extension keeps waiting for `off` to take (added over extensions). */
    uint64_t (*executor_backlog)(const mc_master_t *m, const struct mc_offloader *off);
    /* A GetReplicaList found COMPLETE `o`. */
    void (*read_hit)(mc_master_t *m, mc_object_t *o, uint64_t now);
    /* Monitor sweep (every MC_MONITOR_PERIOD_MS, and mc_master_tick). */
    void (*sweep)(mc_master_t *m, uint64_t now);

    /* 1 when `key` must read as missing and must be neither removed nor replaced yet. */
    int (*hides_key)(mc_master_t *m, const char *key, size_t len);
    /* Eviction picked `o` (no disk replica, not pinned): 1 when the extension keeps it readable
     * another way instead (the eviction then leaves it), 0 to let it be dropped. */
    int (*evict_instead)(mc_master_t *m, mc_object_t *o, uint64_t now);
    /* 1 while a watermark-driven eviction pass must wait (one forced by a failed allocation
     * still runs). */
    int (*holds_eviction)(const mc_master_t *m);
    /* Writes descriptors of o's replicas that this extension keeps after the `n` already in
     * out[] (at most `capacity` in all; counts past it are returned but not written). */
    size_t (*fill_descs)(const mc_master_t *m, const mc_object_t *o, mc_replica_desc_t *out,
                         size_t capacity, size_t n);
    /* How long (ms) a put that found no room for `size` bytes may usefully retry, because this
     * extension is about to free memory (0: not). The longest over extensions is used. */
    uint64_t (*put_wait_ms)(const mc_master_t *m, uint64_t size);
    /* Fills its fields of *out. */
    void (*stats)(mc_master_t *m, mc_master_stats_t *out);
    /* Debug builds' whole-state check: adds the bytes of extents it holds per segment slot to
     * seg_used[], and says whether its state of `o` is consistent. */
    void (*account)(const mc_master_t *m, uint64_t *seg_used);
    int (*object_ok)(const mc_master_t *m, const mc_object_t *o);
} mc_master_ext_t;

/* The table, in calling order, NULL-terminated (extensions.c). */
extern const mc_master_ext_t *const mc_master_extensions[];

/* The rows (one per extension file). */
extern const mc_master_ext_t mc_restore_extension;   /* restore.c */
extern const mc_master_ext_t mc_tasks_extension;     /* task_manager.c */
extern const mc_master_ext_t mc_promotion_extension; /* promotion.c */
extern const mc_master_ext_t mc_offload_extension;   /* offload.c */

/*
 * Core events an extension raises for the others (master_service.c; lock held): the hooks of
 * every extension are called in table order.
 */
void mc_master_replica_lost_locked(mc_master_t *m, mc_object_t *o, uint32_t slot);
void mc_master_executor_gone_locked(mc_master_t *m, const struct mc_offloader *off);
uint64_t mc_master_executor_backlog_locked(const mc_master_t *m, const struct mc_offloader *off);

#endif /* MC_MASTER_EXTENSION_H */
