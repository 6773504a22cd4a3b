/*
 * store_client_internal.h — the real client's state and the calls its files make to each other.
 * The real client is the store backend (store_backend.h) that mc_store_setup builds: its own
 * segment, Transfer Engine and master connection. Its files form layers, lowest first:
 *
 *   store_client_rpc.c       master calls over keys (KeysRequest) and the Transfer Engine batch
 *                            run that every path shares
 *   store_client_buffers.c   user buffers registered for the zero-copy calls; who may do I/O
 *   store_client_segments.c  mount / re-mount / unmount: the segment of setup and those mounted
 *                            at run time, with the holes their memory leaves; client and segment
 * ids store_client_restore.c   re-mount verification of extents a restored master holds back
 *   store_client_write.c     the write slot: put / upsert, plain or zero-copy, single or batch
 *   store_client_read.c      the read slot: get, plain or zero-copy, and the replica lookups
 *   store_client_remove.c    exist, remove, remove_all, remove_by_regex
 *   store_client_ping.c      the ping thread (liveness, re-mount, write fence) and the view thread
 *   store_client.c           setup and close, the HTTP hooks, the backend table
 *
 * A file calls only files above it in this list (scripts/lint.sh checks that no circle forms).
 * Functions named here are mc_real_*; each says which lock its caller holds, if any.
 *
 * Thread-safety: the slots (mc_real_write & co.) run on any thread, bracketed by store.c's call
 * counting; run-time segment state is under segs_lock, user buffers under buffers_lock, the
 * ping thread's state under ping_lock (or the ping thread's alone, where a field says so).
 */
#ifndef MC_CLIENT_STORE_CLIENT_INTERNAL_H
#define MC_CLIENT_STORE_CLIENT_INTERNAL_H

#include "auth.h"
#include "client_http.h"
#include "etcd.h"
#include "lease_release.h"
#include "master_client.h"
#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"
#include "offload.h"
#include "prefault.h"
#include "task_executor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mc_buffer_range {
    uintptr_t addr;
    size_t length;
} mc_buffer_range_t;

/*
 * A segment mounted at run time, beside the one of setup (upstream's mount_segment /
 * allocate_and_mount_segment). Its memory is registered in this client's Transfer Engine, so
 * peers reach it through the same endpoint ("host:port"); the master knows it by its own id.
 * Invariant: while drain_until == 0 it is mounted (or, after a master restart, re-mounted by the
 * ping thread) and its memory registered; once draining, no re-mount names it, and the ping
 * thread unmounts and frees it at drain_until.
 */
typedef enum mc_run_segment_kind {
    MC_RUN_SEGMENT_ALLOCATED = 1, /* engine memory (mc_te_alloc_segment_memory): shm-reachable */
    MC_RUN_SEGMENT_FILE = 2,      /* an mmap(MAP_SHARED) of a file, registered with the engine */
} mc_run_segment_kind_t;

typedef struct mc_run_segment {
    char id[MC_STORE_SEGMENT_ID_MAX];
    void *base;
    uint64_t size;
    mc_run_segment_kind_t kind;
    uint64_t drain_until; /* 0: mounted; else mc_now_ms() at which it is unmounted and freed */
} mc_run_segment_t;

/*
 * Address range of an unmounted run-time segment, kept reserved (PROT_NONE, nothing registered
 * there) until `until` so that no later mapping — above all a new segment — reuses the address
 * while a peer's transfer that named the old segment (a read inside its lease, a write of a put
 * the unmount revoked) may still arrive: such a transfer finds nothing registered and fails, it
 * never reaches another object's bytes.
 */
typedef struct mc_segment_hole {
    void *addr;
    size_t length;
    uint64_t until; /* mc_now_ms() */
} mc_segment_hole_t;

typedef struct mc_real_client {
    char client_id[40];
    char segment_id[40];
    char *master_addr;
    uint64_t global_segment_size;
    uint64_t local_buffer_size;
    mc_transfer_engine_t *te;
    int te_borrowed; /* 1: te is config.transfer_engine, the caller's: never destroyed here */
    mc_rpc_client_t *rpc;
    mc_auth_t *auth; /* the cluster secret, NULL = none (wire/auth.h) */
    mc_offload_t *offload;
    mc_lease_releaser_t *releases; /* read leases this client is done with */
    void *segment;
    mc_prefault_opts_t prefault_opts; /* MC_SEGMENT_PREFAULT* (prefault.h), read at setup */
    mc_prefault_t *prefault;          /* the segment's pre-fault pass; NULL: none or over */
    void *local_buffer;
    atomic_int closing; /* close has begun (begin_close): waits in calls end, /health says so */
    atomic_int master_reachable;
    int checksum;            /* 1: CRC32C on put, verified on get */
    uint64_t delete_wait_ms; /* how long a remove/upsert waits for its old files to go */
    atomic_uint_fast64_t checksum_mismatches; /* replicas whose bytes failed verification */
    /*
     * The write fence (owner side; ping thread only): tokens of revoked puts on our segments
     * come with pings (fence_view: the master instance); fence_raised: the sequence of the last
     * batch our engine refuses, whose fence is generation fence_gen; fence_acked: the highest
     * sequence whose fence completed, confirmed in every ping.
     */
    uint64_t fence_view, fence_raised, fence_gen, fence_acked;
    atomic_uint_fast64_t last_mismatch_log_ms;
    atomic_uint_fast64_t last_master_error_ms; /* rate limit: one failure line per second */

    /* Following an elected master (master address "etcd://..."): the etcd handle the
     * RPC client's resolver reads the leader's address through. NULL: a fixed master. */
    mc_etcd_t *view_etcd;
    char view_cluster[256];

    pthread_t ping_thread;
    int ping_started;
    pthread_t view_thread; /* following an elected master: re-reads the view every second */
    int view_started;
    int remount_pending; /* ping thread only: the last re-mount failed */
    pthread_mutex_t ping_lock;
    pthread_cond_t ping_cond;
    int ping_stop;

    int zero_copy_io;          /* serves dummies: the zero-copy calls run without a local buffer */
    mc_task_executor_t *tasks; /* copy/move tasks of this segment's replicas; NULL: no segment */
    mc_client_metrics_t *metrics; /* NULL: off (MC_STORE_CLIENT_METRIC=0) */
    mc_client_http_t *http;       /* the client HTTP server, NULL when not asked or not bound */

    pthread_rwlock_t buffers_lock; /* user buffers registered for the zero-copy calls */
    mc_buffer_range_t *buffers;
    size_t buffer_count, buffer_capacity;

    /* Segments mounted at run time (mc_store_mount_file_segment & co.), and the holes their
     * memory left (see mc_run_segment_t). segs_lock also serialises every mount, unmount and
     * re-mount call to the master, so a re-mount never names a segment being unmounted. */
    pthread_mutex_t segs_lock;
    mc_run_segment_t *run_segs;
    size_t run_seg_count, run_seg_cap;
    mc_segment_hole_t *holes;
    size_t hole_count, hole_cap;
    uint64_t epoch; /* the epoch last given to the engine (0 none) */
} mc_real_client_t;

/* ---- store_client_rpc.c ---------------------------------------------------------------------- */

/* A KeysRequest (PutStart, GetReplicaList, Remove, ...) over n keys; sizes and config may be
 * NULL, regex NULL for "". 0 with *resp (caller frees) holding one result per key (any count for
 * RemoveAll / RemoveByRegex); else the RPC's or the master's error, *resp NULL. A failed call is
 * logged at most once a second. */
int mc_real_keys_call(mc_real_client_t *s, uint16_t opcode, char **keys, uint64_t *sizes, size_t n,
                      Mc__ReplicateConfig *config, int force, const char *regex,
                      Mc__KeysResponse **resp);
/* PutEnd / UpsertEnd with one CRC32C per key (crcs NULL: the writer does not checksum). */
int mc_real_keys_call_checksums(mc_real_client_t *s, uint16_t opcode, char **keys, size_t n,
                                uint32_t *crcs, Mc__KeysResponse **resp);
/* Waits until the master confirms the deletion of seqs [from, to] (see the definition). 0 or
 * MC_ERR_PERSISTENT_FAIL. */
int mc_real_wait_deletions(mc_real_client_t *s, char **keys, size_t n, uint64_t from, uint64_t to);
/* Runs reqs[0..n) (n > 0) as one Transfer Engine batch and waits until every request ended (each
 * by its deadline); st[q] gets request q's status. Returns 0, or the error that kept the batch
 * from being created or submitted: then every st[q] is MC_TRANSFER_FAILED with that error and
 * nothing was sent. */
int mc_real_transfer(mc_real_client_t *s, const mc_transfer_req_t *reqs, size_t n,
                     mc_transfer_status_t *st);

/* ---- store_client_buffers.c ------------------------------------------------------------------ */

/* Slots register_buffer / unregister_buffer (store_backend.h). */
int mc_real_register_buffer(void *impl, void *buf, size_t size);
int mc_real_unregister_buffer(void *impl, void *buf);
/* 0 when every non-empty bufs[i] lies inside one registered buffer, else MC_ERR_INVALID_PARAMS
 * (the first one outside is logged). Takes buffers_lock for reading. */
int mc_real_check_registered_all(mc_real_client_t *s, const void *const *bufs, const size_t *sizes,
                                 size_t n);
/* 1 (and logged) when this store may not put or get: local_buffer_size 0 and no dummies served. */
int mc_real_refuses_io(const mc_real_client_t *s);

/* ---- store_client_segments.c ----------------------------------------------------------------- */

/* A client or segment id: a random UUID, or (no randomness) pid, sequence and clock. */
void mc_real_make_uuid(char out[40]);
/* Gives the engine the master's epoch for this client's segments, unless it already has it.
 * 0, or the engine's error (its fence did not complete: asked again next time). */
int mc_real_set_epoch(mc_real_client_t *s, uint64_t epoch);
/* Mount, re-mount or unmount at the master (opcode MC_RPC_MOUNT_SEGMENT, _REMOUNT_, _UNMOUNT_):
 * the segment of setup plus, for a re-mount, every mounted run-time segment. Caller holds
 * segs_lock when run-time segments may exist. 0 or the RPC's or master's error
 * (MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS: deferred, the range is still fenced by read leases). */
int mc_real_segment_call(mc_real_client_t *s, uint16_t opcode);
/* Slots allocate_and_mount_segment, mount_file_segment, unmount_segment, unmount_local_disk. */
int mc_real_allocate_and_mount_segment(void *impl, uint64_t size, const char *protocol,
                                       char id_out[MC_STORE_SEGMENT_ID_MAX], uint64_t *allocated);
int mc_real_mount_file_segment(void *impl, const char *path, uint64_t offset, uint64_t size,
                               const char *protocol, char id_out[MC_STORE_SEGMENT_ID_MAX]);
int mc_real_unmount_segment(void *impl, const char *id, uint64_t grace_ms, int allocated);
int mc_real_unmount_local_disk(void *impl, uint64_t grace_period_ms);
/* Ping thread, every tick: unmounts and frees draining segments whose grace is over, releases
 * holes whose time is up. Takes segs_lock. */
void mc_real_run_segments_tick(mc_real_client_t *s);
/* close: unmounts every run-time segment at the master (best effort). Takes segs_lock. */
void mc_real_run_segments_unmount_all(mc_real_client_t *s);
/* close, after the master was told: their memory goes (engine memory with the engine when
 * engine_destroyed, else here; file mappings here), and every hole. Takes segs_lock. */
void mc_real_run_segments_release(mc_real_client_t *s, int engine_destroyed);

/* ---- store_client_restore.c ------------------------------------------------------------------ */

/* After a re-mount: confirms or refutes, from our own memory, each restored extent the master
 * holds back on our segments. Ping thread only (it alone unmaps run-time segments); takes
 * segs_lock only to copy the segment list. */
void mc_real_restore_verify(mc_real_client_t *s);

/* ---- store_client_write.c, store_client_read.c, store_client_remove.c: the slots --------------
 */

int mc_real_write(void *impl, mc_client_op_t op, int upsert, int zero_copy, const char *const *keys,
                  const void *const *values, const size_t *sizes, size_t n,
                  const mc_replicate_config_t *config, int *results);
int mc_real_read(void *impl, mc_client_op_t op, int zero_copy, const char *const *keys,
                 void *const *bufs, const size_t *capacities, size_t n, int64_t *results);
int64_t mc_real_get_size(void *impl, const char *key);
int mc_real_get_replica_desc(void *impl, const char *key, mc_replica_desc_t *out, size_t capacity,
                             size_t *count);
int mc_real_exist(void *impl, const char *const *keys, size_t n, int *results);
int mc_real_remove(void *impl, const char *const *keys, size_t n, int force, int *results);
int64_t mc_real_remove_all(void *impl, int force);
int64_t mc_real_remove_by_regex(void *impl, const char *regex, int force);

/* ---- store_client_ping.c --------------------------------------------------------------------- */

/* Thread bodies (arg: the mc_real_client_t); both run until ping_stop is set under ping_lock
 * and ping_cond is signalled. The view thread runs only when following an elected master. */
void *mc_real_ping_main(void *arg);
void *mc_real_view_main(void *arg);

#endif /* MC_CLIENT_STORE_CLIENT_INTERNAL_H */
