/*
 * task_manager.h — the master's replica copy/move tasks and replica clear (matches upstream
 * `TaskManager` and `MasterService::CreateCopyTask / CreateMoveTask / QueryTask / FetchTasks /
 * MarkTaskToComplete / BatchReplicaClear`; mooncake-interfaces.md §4.4, interfaces-2 §6).
 *
 * A task is created PENDING for the client that owns the segment of its source replica (copy:
 * a memory replica picked at random, as upstream; move: the replica on the named source). That
 * client's executor (src/client/task_executor.c) fetches it: the master then reserves one
 * extent per target segment (not visible to readers) and the task is PROCESSING. The executor
 * copies the value from its own segment into the extents and reports; on SUCCESS the master
 * checks the object still holds the same value (value_id), its source replica and the targets'
 * mounts are the ones the task saw, and only then adds the targets as replicas (a move also
 * drops the source). Any mismatch fails the task and gives the extents back. Upstream's
 * CopyStart/CopyEnd/CopyRevoke and MoveStart/MoveEnd/MoveRevoke are folded into these two steps
 * (fetch = start, complete = end or revoke); their metric counters count them.
 *
 * Bounds (mc_master_config_t.task_*): pending tasks (creation beyond fails with
 * MC_ERR_TASK_PENDING_LIMIT_EXCEEDED), processing tasks (fetch hands out no more), finished tasks
 * kept for queries (oldest pruned). The monitor sweep fails pending tasks older than the pending
 * timeout, processing ones older than the processing timeout, and every task whose executor
 * expired. A fetch that finds no room on a target leaves the task PENDING and counts an attempt;
 * beyond max_retry_attempts it is FAILED.
 *
 * A target extent stays reserved while its executor may still be writing into it: a task FAILED
 * by the processing timeout keeps its extents (it is "draining") until the executor reports, the
 * executor expires, or one more processing timeout (60 s when that is 0) has passed, so a late
 * write never lands in memory handed to another object. An object removed or replaced during a
 * task is noticed at the report (the task fails then). An extent whose segment was unmounted is
 * simply forgotten (its memory went with the mount; the epoch in its descriptor stops writes).
 *
 * Thread-safety: every mc_master_* function takes the master's lock; *_locked ones expect it.
 * Cost: create O(replicas), query O(1), fetch O(pending tasks + batch), complete O(replicas),
 * replica clear O(keys), sweep O(tasks).
 */
#ifndef MC_MASTER_TASK_MANAGER_H
#define MC_MASTER_TASK_MANAGER_H

#include "master_service.h"

#include <stddef.h>
#include <stdint.h>

/* Upstream's defaults (interfaces-2 §6). */
#define MC_TASK_DEFAULT_MAX_FINISHED 10000
#define MC_TASK_DEFAULT_MAX_PENDING 10000
#define MC_TASK_DEFAULT_MAX_PROCESSING 10000
#define MC_TASK_DEFAULT_TIMEOUT_MS 300000 /* pending and processing; 0 = never */
#define MC_TASK_DEFAULT_MAX_RETRY 10
/* A fetch hands out at most this many tasks. */
#define MC_TASK_MAX_BATCH 64

/* Creation: see mc_store_create_copy_task / mc_store_create_move_task (store.h) for the codes.
 * id_out: MC_TASK_ID_LEN + 1 bytes. */
int mc_master_create_copy_task(mc_master_t *m, const char *key, const char *const *targets,
                               size_t n, char *id_out);
int mc_master_create_move_task(mc_master_t *m, const char *key, const char *source,
                               const char *target, char *id_out);
/* 0, MC_ERR_TASK_NOT_FOUND, MC_ERR_INVALID_PARAMS (not a UUID). */
int mc_master_query_task(mc_master_t *m, const char *task_id, mc_task_info_t *out);

/* One task handed to its executor; pointers valid only during the callback. */
typedef struct mc_task_assignment {
    const char *id;
    mc_task_type_t type;
    const char *key;
    uint64_t size;
    uint64_t source_address; /* in the executor's own segment */
    int has_checksum;
    uint32_t checksum;
    const mc_replica_desc_t *targets; /* the reserved extents (status PROCESSING) */
    size_t ntargets;
} mc_task_assignment_t;
typedef int (*mc_task_assignment_cb)(void *arg, const mc_task_assignment_t *a);

/*
 * Hands up to max (<= MC_TASK_MAX_BATCH) of client_id's pending tasks to it: each becomes
 * PROCESSING with its target extents reserved, and on_task runs for it under the master's lock
 * (copy what you need; non-zero stops). Tasks whose object or source went meanwhile are failed
 * here instead. Returns the number handed out, or MC_ERR_INVALID_PARAMS.
 */
int mc_master_fetch_tasks(mc_master_t *m, const char *client_id, size_t max,
                          mc_task_assignment_cb on_task, void *arg);
/*
 * The executor's report. status MC_TASK_SUCCESS commits (see above; the task may still end
 * FAILED when the object changed meanwhile: 0 is returned, the query tells), MC_TASK_FAILED
 * gives the extents back with `error` and `message` recorded. Returns 0, MC_ERR_TASK_NOT_FOUND,
 * MC_ERR_ILLEGAL_CLIENT (another client's task), MC_ERR_INVALID_PARAMS (a status that is not
 * final, a bad id). A report for a task already finished is 0 and changes nothing.
 */
int mc_master_complete_task(mc_master_t *m, const char *client_id, const char *task_id,
                            mc_task_status_t status, int error, const char *message);
/* Upstream's BatchReplicaClear (semantics in store.h). cleared[i] = 1 per cleared key. */
int mc_master_batch_replica_clear(mc_master_t *m, const char *client_id, const char *const *keys,
                                  size_t n, const char *segment_name, int *cleared);

/* Task table counts, for the metrics and tests. */
typedef struct mc_task_stats {
    uint64_t pending, processing, finished; /* now */
    uint64_t succeeded, failed;             /* since start */
} mc_task_stats_t;
void mc_master_task_stats(mc_master_t *m, mc_task_stats_t *out);

/* The extension row (extension.h) is mc_tasks_extension. */
struct mc_task_manager;

#endif /* MC_MASTER_TASK_MANAGER_H */
