/*
 * task_executor.h — the store client's side of replica copy/move tasks and replica clear
 * (task_manager.h on the master; matches upstream `Client::TaskPollThreadMain` / `ExecuteTask`).
 *
 * The executor is a thread of a store with a segment: every MC_TASK_POLL_MS it asks the master
 * for the tasks whose source replica lives in this client's segment (FetchTasks), and for each
 * copies the value out of its own segment into a private buffer, verifies it against the
 * object's CRC32C (a value that changed under the copy is never written anywhere), writes it
 * into the target extents the master reserved with the Transfer Engine, and reports
 * (MarkTaskToComplete). The master adds the new replicas only on that report.
 *
 * The environment variable MC_TASK_EXECUTOR_DELAY_MS (test hook, default 0) makes the executor
 * wait that long after taking a task before copying, so tests can observe PROCESSING and kill a
 * target mid-task.
 *
 * Thread-safety: the call wrappers are thread-safe; start/stop are called by the store's
 * setup/close only.
 */
#ifndef MC_CLIENT_TASK_EXECUTOR_H
#define MC_CLIENT_TASK_EXECUTOR_H

#include "mooncake/store.h"
#include "rpc.h"

#include <stddef.h>
#include <stdint.h>

#define MC_TASK_POLL_MS 1000 /* upstream's poll interval */
#define MC_TASK_FETCH_BATCH 8

typedef struct mc_task_executor mc_task_executor_t;

/* Starts the thread over the segment [segment, segment + segment_size) (borrowed: rpc, te).
 * 0, MC_ERR_INTERNAL_ERROR. */
int mc_task_executor_start(mc_rpc_client_t *rpc, mc_transfer_engine_t *te, const char *client_id,
                           const void *segment, uint64_t segment_size, mc_task_executor_t **out);
/* Finishes the task in hand (reported), stops and frees. NULL is a no-op. */
void mc_task_executor_stop(mc_task_executor_t *e);

/* RPC wrappers for store_client.c (codes as in store.h). */
int mc_task_call_create(mc_rpc_client_t *rpc, int move, const char *key, const char *source,
                        const char *const *targets, size_t n, char *id_out);
int mc_task_call_query(mc_rpc_client_t *rpc, const char *task_id, mc_task_info_t *out);
int mc_task_call_replica_clear(mc_rpc_client_t *rpc, const char *client_id, const char *const *keys,
                               size_t n, const char *segment_name, int *cleared);

#endif /* MC_CLIENT_TASK_EXECUTOR_H */
