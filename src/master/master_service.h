/*
 * master_service.h — the Master Service: the store's metadata, with no I/O of its own.
 *
 * It owns the object index (key -> size, replicas, lease, pins, state), the mounted segments and
 * a space allocator for each, the client table (liveness), and the eviction policy. The RPC
 * server (rpc_server.c) and the admin HTTP server (admin_http.c) call into it; it never touches
 * object bytes. Semantics follow upstream Mooncake's MasterService, with its known bugs fixed.
 *
 * Thread-safety: every function may be called from any thread. Background threads (started by
 * mc_master_create): eviction (every 10 ms: high watermark, and after an allocation failure) and
 * the monitor (every 1 s: client TTL, put-start timeouts, deferred frees).
 *
 * Object states: PROCESSING (PutStart done, bytes being written; invisible to readers) ->
 * COMPLETE (PutEnd; readable) -> gone (Remove, eviction, unmount of its last replica's segment).
 * Invariants:
 *  - Only COMPLETE replicas are ever returned to readers (no dirty reads).
 *  - Every memory replica's extent is allocated in a mounted segment; unmounting a segment drops
 *    those replicas first, so no replica points at memory the master no longer owns.
 *  - An extent is freed only when no reader may still hold it: eviction skips objects being read
 *    (read leases granted by get_replica_list, neither released nor run out); the extents of a
 *    value removed, evicted or replaced while being read are fenced (deferred) until its readers
 *    release their leases or the leases end.
 *  - A leased object (lease_timeout > now: upstream's lease, granted by exist and get for the
 *    TTL) is not removed without force. Eviction takes the least recently put or read object
 *    first, soft-pinned ones last; hard-pinned and PROCESSING objects are never evicted.
 *  - Fenced bytes are not live: they do not count towards the high watermark, and a put short of
 *    memory waits for young fences (mc_master_put_wait_ms) rather than evict live objects.
 */
#ifndef MC_MASTER_SERVICE_H
#define MC_MASTER_SERVICE_H

#include "mooncake/store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mc_master mc_master_t;

typedef struct mc_master_config {
    uint64_t default_kv_lease_ttl_ms;      /* 10000; 0 = no lease (reads never block removal) */
    uint64_t default_kv_soft_pin_ttl_ms;   /* 1800000 */
    uint64_t max_kv_soft_pin_ttl_ms;       /* 86400000 */
    int allow_evict_soft_pinned_objects;   /* 1 */
    double eviction_ratio;                 /* 0.05, in [0, 1] */
    double eviction_high_watermark_ratio;  /* 0.90, in [0, 1] */
    uint64_t client_ttl_ms;                /* 10000 */
    uint64_t put_start_discard_timeout_ms; /* 30000: a newer PutStart may replace an older one */
    uint64_t put_start_release_timeout_ms; /* 600000: an unfinished put is revoked */
    int enable_offload;                    /* 0 */
    int offload_on_evict;                  /* 0 */
    /* The cluster's declared offload backend (mooncake_master --offload-backend ...):
     * MC_OFFLOAD_BACKEND_NONE takes what the clients report. */
    int offload_backend;          /* mc_offload_backend_t */
    char distributed_fs_type[16]; /* with DISTRIBUTED: "posix" | "daos" */
    /* --distributed-root-dir: when set, the cluster's storage; a distributed client given
     * another root is refused, the message naming both paths. "" = the first client's. */
    char distributed_root_dir[4096];
    uint64_t offload_task_timeout_ms; /* 60000: a leased task not renewed is re-queued */
    uint32_t offload_max_attempts;    /* 3: leases of one task before it is failed */
    uint64_t offload_put_wait_ms;     /* 10000: a put short of memory while offloads are
                                         pending retries this long before -200 */
    /* 1000: a put short of memory waits (the client retries) this long, from the first put that
     * waited for each, for fenced extents (a removed object's readers still inside their leases,
     * a revoked put's quarantine) rather than evict live objects: readers normally release within
     * a transfer's time. After that (a reader stopped or gone) the fence waits for its lease
     * alone and no longer holds eviction back. */
    uint64_t fence_put_wait_ms;
    uint64_t offloading_queue_limit; /* 50000 tasks per client; beyond, not queued */
    /* Promotion of disk-only objects back to memory on a hit (promotion.c; matches upstream's
     * --promotion_on_hit family). Active only with enable_offload. */
    int promotion_on_hit;                   /* 0 */
    uint32_t promotion_admission_threshold; /* 2: hits (count-min sketch) before one; 1..255 */
    uint64_t promotion_queue_limit;         /* 50000: cap on promotions in flight */
    uint32_t promotion_max_per_heartbeat;   /* 1: tasks handed to one client per heartbeat */
    uint64_t max_segment_size; /* MC_MASTER_DEFAULT_MAX_SEGMENT_SIZE: a mount of a larger
                                  segment is refused (MC_ERR_INVALID_PARAMS) */
    /* replica copy/move tasks (task_manager.h; upstream's flags of the same names) */
    uint64_t task_max_finished;          /* 10000: finished tasks kept for queries */
    uint64_t task_max_pending;           /* 10000: creation beyond is refused (-1401) */
    uint64_t task_max_processing;        /* 10000: fetch hands out no more */
    uint64_t task_pending_timeout_ms;    /* 300000; 0 = never */
    uint64_t task_processing_timeout_ms; /* 300000; 0 = never */
    uint32_t task_max_retry_attempts;    /* 10: fetches that found no room before FAILED */
} mc_master_config_t;

/* 1 TiB: more memory than one host contributes to a cluster today; a larger mount is refused
 * (it could only be a mistake or a forged request). mooncake_master --max_segment_size. */
#define MC_MASTER_DEFAULT_MAX_SEGMENT_SIZE (1ull << 40)

typedef enum mc_offload_backend {
    MC_OFFLOAD_BACKEND_NONE = 0,
    MC_OFFLOAD_BACKEND_LOCAL = 1,
    MC_OFFLOAD_BACKEND_DISTRIBUTED = 2,
} mc_offload_backend_t;

void mc_master_config_default(mc_master_config_t *config);

/* Returns 0, MC_ERR_INVALID_PARAMS (a ratio outside [0,1], ...), MC_ERR_INTERNAL_ERROR. */
int mc_master_create(const mc_master_config_t *config, mc_master_t **out);
/* Stops the background threads and frees everything. NULL is a no-op. */
void mc_master_destroy(mc_master_t *master);

/* ---- clients and segments ----------------------------------------------------------------- */

#define MC_SEGMENT_ID_MAX 64
#define MC_CLIENT_ID_MAX 64

typedef enum mc_client_status {
    MC_CLIENT_UNDEFINED = 0,
    MC_CLIENT_OK = 1,
    MC_CLIENT_NEED_REMOUNT = 2,
} mc_client_status_t;

typedef struct mc_segment_info {
    char id[MC_SEGMENT_ID_MAX]; /* UUID text chosen by the client */
    char name[272];             /* the owner's endpoint "host:port" (MC_SEGMENT_NAME_MAX) */
    uint64_t base;              /* first address, in the owner's address space */
    uint64_t size;              /* bytes */
    char protocol[16];          /* "tcp" | "rdma" */
    /* filled by mc_master_list_segments */
    char client_id[MC_CLIENT_ID_MAX];
    uint64_t used; /* bytes allocated */
} mc_segment_info_t;

/*
 * Mounts a segment for a client (registering the client, as a ping would). Mounting the same id
 * again for the same client is a no-op (0). MC_ERR_SEGMENT_ALREADY_EXISTS when the id belongs to
 * another client or [base, base+size) of that name overlaps a mounted segment;
 * MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS when the range overlaps memory of an earlier mount of that
 * name that was unmounted (or expired) while read leases covered it: retry once they ran out;
 * MC_ERR_INVALID_PARAMS for size 0 or above config.max_segment_size (counted in
 * mc_master_stats_t.mounts_refused), an empty client id, segment id or name.
 */
int mc_master_mount_segment(mc_master_t *m, const char *client_id, const mc_segment_info_t *seg);
/* After NEED_REMOUNT: mounts each segment (already-mounted ones are kept). */
int mc_master_remount_segments(mc_master_t *m, const char *client_id, const mc_segment_info_t *segs,
                               size_t n);
/*
 * Unmounts: every replica in the segment is dropped (objects left without replicas are removed;
 * PROCESSING objects with an extent there are revoked). Where read leases still cover extents of
 * the segment, its range is fenced until they end (see mount). Only the client that mounted it
 * may: MC_ERR_ILLEGAL_CLIENT for a NULL or empty client_id, MC_ERR_SEGMENT_NOT_FOUND when absent
 * or mounted by another client (which is not told apart from absent).
 */
int mc_master_unmount_segment(mc_master_t *m, const char *client_id, const char *segment_id);
/*
 * Graceful unmount (matches upstream MasterService::GracefulUnmountSegment): from now on no put is
 * placed on the segment; its objects stay readable until grace_period_ms has passed, then the
 * monitor unmounts it as mc_master_unmount_segment does (within its 1 s period). Asking again
 * for a draining segment keeps its first deadline (upstream: idempotent). grace_period_ms 0 is
 * an immediate unmount. Errors as mc_master_unmount_segment.
 */
int mc_master_graceful_unmount_segment(mc_master_t *m, const char *client_id,
                                       const char *segment_id, uint64_t grace_period_ms);
/*
 * The epoch of a mounted segment (0 when not mounted): unique per mount, also across master
 * restarts. Replica descriptors carry it; the owner's Transfer Engine refuses tcp transfers that
 * carry another one (mc_te_set_epoch), so a descriptor of a previous mount never reaches memory
 * that was handed out again.
 */
uint64_t mc_master_segment_epoch(mc_master_t *m, const char *segment_id);
/*
 * Records liveness. *status: OK for a known client, NEED_REMOUNT for one the master does not
 * know (it expired, or the master restarted) — the client then remounts.
 */
int mc_master_ping(mc_master_t *m, const char *client_id, uint64_t *view_version,
                   mc_client_status_t *status);
/*
 * The write fence, from the owner's side of a ping (see mc_te_refuse_tokens): the client
 * confirms `acked` (the highest fence sequence whose tokens its engine refuses and whose fence
 * completed; meaningful only for master instance `view`, the view_version its tokens came
 * with; another view's confirmation counts as 0). Extents of revoked puts on its segments
 * waiting for that confirmation are freed. Then tokens[0..*n) (n <= capacity) receives the
 * tokens its segments must still refuse, oldest first, and *upto the sequence of the last of
 * them (0 when none): the client confirms *upto once it refuses them all. Lock held briefly;
 * O(segments + pending tokens). MC_ERR_INVALID_PARAMS on a bad argument, MC_ERR_INTERNAL_ERROR
 * out of memory (no tokens returned; the confirmation still counted).
 */
int mc_master_fence_ping(mc_master_t *m, const char *client_id, uint64_t view, uint64_t acked,
                         uint64_t *tokens, size_t capacity, size_t *n, uint64_t *upto);
/* 1 when client_id names a live client (one that mounted, remounted or registered and has not
 * expired), else 0. */
int mc_master_client_is_live(mc_master_t *m, const char *client_id);

/*
 * Failure detection (liveness.h). The distinct endpoints ("host:port", the segment names) of
 * client_id's mounted segments: up to cap are written to names, the count is returned (0: none,
 * an unknown client, or one already found gone); *last_seen_ms (may be NULL) gets its last ping
 * in the master clock, to be handed back to mc_master_client_gone. Lock held briefly.
 */
#define MC_SEGMENT_NAME_MAX 272
size_t mc_master_client_endpoints(mc_master_t *m, const char *client_id,
                                  char (*names)[MC_SEGMENT_NAME_MAX], size_t cap,
                                  uint64_t *last_seen_ms);
/*
 * client_id's process is gone (its connection closed and every endpoint refused connections):
 * unmounts its segments (objects left with no replica are dropped, so a put of their key stores
 * the new value), revokes its unfinished puts, and tells its next ping to re-mount. Its record,
 * and the local-disk replicas of its offloaded objects, stay until its --client_ttl runs out (a
 * holder restarted on the same directory takes those files over). Nothing happens when it pinged
 * since last_seen_ms (from mc_master_client_endpoints): it is alive. Returns 0 (dropped), 1 (it
 * pinged since: nothing done), MC_ERR_CLIENT_NOT_FOUND (unknown or already gone),
 * MC_ERR_INVALID_PARAMS, MC_ERR_INTERNAL_ERROR (out of memory; nothing dropped it could not
 * finish: the TTL still applies). Counted in gone_clients.
 */
int mc_master_client_gone(mc_master_t *m, const char *client_id, uint64_t last_seen_ms);
/* A live client's running total of replica reads that failed checksum verification (from its
 * pings); the master sums the increments into mc_master_stats_t.checksum_mismatches. */
void mc_master_report_checksum_mismatches(mc_master_t *m, const char *client_id, uint64_t total);

/* ---- objects ------------------------------------------------------------------------------ */

/*
 * Starts a put: allocates `size` bytes in up to replica_num distinct segments (preferred segments
 * first, then the others, best effort: at least one), records the object PROCESSING for
 * client_id, and returns the replicas (status PROCESSING) in out[0..*count).
 * Errors: MC_ERR_INVALID_KEY (empty or longer than MC_MAX_KEY_LEN), MC_ERR_INVALID_PARAMS
 * (size > MC_MAX_VALUE_SIZE, replica_num > MC_MAX_REPLICAS, soft-pin TTL with PRESERVE/DISABLE
 * or above the max), MC_ERR_OBJECT_ALREADY_EXISTS (complete), MC_ERR_REPLICA_IS_NOT_READY
 * (another put of the key is in progress, younger than put_start_discard_timeout: its outcome
 * is not known yet, so this is not "exists"), MC_ERR_NO_AVAILABLE_HANDLE (no segment can hold it
 * even after eviction; at once, without evicting, when size exceeds every segment's capacity). A
 * 0-byte value allocates nothing and has one replica of size 0 on some segment (or none when no
 * segment is mounted: then it is still a valid, empty object).
 */
int mc_master_put_start(mc_master_t *m, const char *client_id, const char *key, uint64_t size,
                        const mc_replicate_config_t *config, mc_replica_desc_t *out,
                        size_t capacity, size_t *count);
/* PROCESSING -> COMPLETE. MC_ERR_OBJECT_NOT_FOUND when there is no put in progress for it;
 * MC_ERR_ILLEGAL_CLIENT when another client started it. */
int mc_master_put_end(mc_master_t *m, const char *client_id, const char *key);
/*
 * put_end / upsert_end recording the writer's CRC32C of the value (`checksum` NULL: none, as
 * put_end). Readers get it in every replica descriptor and verify what they read against it.
 */
int mc_master_put_end_checksum(mc_master_t *m, const char *client_id, const char *key,
                               const uint32_t *checksum);
/* Drops a PROCESSING put and frees its extents. Same errors as put_end. */
int mc_master_put_revoke(mc_master_t *m, const char *client_id, const char *key);

/*
 * Upsert: like put_start, but an existing COMPLETE object is not an error: the new extents are
 * allocated beside it (readers keep seeing the old value) and upsert_end swaps them in atomically;
 * the old extents are freed once no read lease can still cover them. upsert_revoke keeps the old.
 */
int mc_master_upsert_start(mc_master_t *m, const char *client_id, const char *key, uint64_t size,
                           const mc_replicate_config_t *config, mc_replica_desc_t *out,
                           size_t capacity, size_t *count);
int mc_master_upsert_end(mc_master_t *m, const char *client_id, const char *key);
int mc_master_upsert_revoke(mc_master_t *m, const char *client_id, const char *key);

/*
 * COMPLETE replicas of a key, *size its size, and a read lease: lease_timeout = max(old,
 * now + default_kv_lease_ttl); *lease_ttl_ms receives the TTL granted (0 = none).
 * MC_ERR_OBJECT_NOT_FOUND when absent or still PROCESSING.
 * The read lease keeps the value's extents (from eviction, and from reuse if the object goes)
 * until it runs out: get_replica_list_leased also returns *lease_id (0: nothing to release) for
 * a reader to end it early with release_read_leases once its transfer is done. Releasing does
 * not shorten upstream's lease: a Remove without force is still refused until the TTL ends.
 */
int mc_master_get_replica_list(mc_master_t *m, const char *key, mc_replica_desc_t *out,
                               size_t capacity, size_t *count, uint64_t *size,
                               uint64_t *lease_ttl_ms);
int mc_master_get_replica_list_leased(mc_master_t *m, const char *key, mc_replica_desc_t *out,
                                      size_t capacity, size_t *count, uint64_t *size,
                                      uint64_t *lease_ttl_ms, uint64_t *lease_id);
/*
 * A reader is done with the read lease lease_ids[i] it was granted on keys[i] (each grant is
 * released once). A lease that ran out, or was never granted, is ignored. Returns how many
 * releases ended a lease that was still held.
 */
size_t mc_master_release_read_leases(mc_master_t *m, const char *const *keys,
                                     const uint64_t *lease_ids, size_t n);
/* 1 when a COMPLETE object exists (and grants the lease), 0 when not, negative on bad key. */
int mc_master_exist_key(mc_master_t *m, const char *key);
/* As get_replica_list without granting a lease (admin /query_key). */
int mc_master_query_key(mc_master_t *m, const char *key, mc_replica_desc_t *out, size_t capacity,
                        size_t *count, uint64_t *size, uint64_t *lease_remaining_ms);

/* MC_ERR_OBJECT_HAS_LEASE while leased unless force; MC_ERR_OBJECT_NOT_FOUND when absent. */
int mc_master_remove(mc_master_t *m, const char *key, int force);
/*
 * Removes every COMPLETE object (leased ones only with force); returns the count. The index is
 * walked a slice (1024 records) per lock hold, so the call never blocks other requests for
 * longer than one slice. Objects put, removed or leased during the call may or may not be
 * removed; one present and removable throughout is.
 */
int64_t mc_master_remove_all(mc_master_t *m, int force);
/*
 * Removes the COMPLETE objects whose key the pattern matches somewhere (key_regex.h: PCRE2 with
 * ECMAScript-compatible options and per-key work limits); leased ones only with force. Two
 * phases: every key is matched first (copied out of the index a slice per lock hold, matched
 * with the lock released), then the matched keys still COMPLETE and removable are removed, a
 * slice per lock hold. Returns the count, MC_ERR_INVALID_PARAMS for a bad or too long pattern
 * or one that exceeds a match limit on some key — then nothing at all is removed (the failure
 * comes in phase 1, before any removal; counted in mc_master_stats_t.regex_refused) — or
 * MC_ERR_INTERNAL_ERROR when out of memory (nothing removed either).
 */
int64_t mc_master_remove_by_regex(mc_master_t *m, const char *regex, int force);

/* ---- offload -------------------------------------------------------------------------------- */
/*
 * With enable_offload, objects get disk replicas: LOCAL_DISK (a file on the disk of the client
 * that held the memory replica; other clients read it through that client) or DFS (a file on a
 * shared filesystem every client with the distributed backend reads directly). The master only
 * records where files are; clients move the bytes.
 *
 * Tasks: after PutEnd (or, with offload_on_evict, when eviction picks an object without a disk
 * replica) the object is queued as a task for the client owning the segment of its memory
 * replica, if that client offloads. A heartbeat leases tasks to the client for
 * offload_task_timeout_ms (renewed while the client reports them in flight); an expired lease or
 * a failed result re-queues the task, up to offload_max_attempts leases, after which it is failed
 * (counted, logged). While a task exists its object is pinned: eviction never drops it.
 * Eviction drops memory replicas of objects that have a disk replica first; such objects stay
 * readable from disk. Removing or replacing a value queues deletions of its files: LOCAL_DISK to
 * the owner, DFS to any client with the distributed backend, a file an offload in flight may
 * still publish to its writer (delivered in heartbeats, confirmed by the client afterwards:
 * NotifyOffload, task id 0, code MC_ERR_FILE_NOT_FOUND).
 *
 * Files are named by (key, version); versions are unique per key, so a late write of an old
 * task can never overwrite or be mistaken for a newer value (its result is refused as stale).
 */

#define MC_OFFLOAD_ID_MAX 64
#define MC_OFFLOAD_ROOT_MAX 4096

/* What a client's heartbeat says about its backend. */
typedef struct mc_offloader_info {
    int backend;                        /* LOCAL or DISTRIBUTED */
    char fs_type[16];                   /* distributed: "posix" | "daos" */
    char storage_id[MC_OFFLOAD_ID_MAX]; /* distributed: cluster id of the marker at the root */
    char root_dir[MC_OFFLOAD_ROOT_MAX]; /* distributed: the root the client was given */
    char endpoint[272];                 /* local: "host:port" serving reads of its files */
    int offloading;                     /* 1: takes tasks; 0: a reader, only checked */
    int healthy;
    uint64_t capacity_bytes;
    uint64_t used_bytes;
    int resync_done; /* the files the master asked for (resync, rescan) are all reported */
} mc_offloader_info_t;

/* A task handed to a client; `key` is valid only during the callback. */
typedef struct mc_offload_task_desc {
    uint64_t task_id;
    const char *key;
    uint64_t size;
    uint64_t address;  /* the memory replica, in the client's own segment */
    uint64_t version;  /* of the file to write */
    int has_checksum;  /* the writer's CRC32C of the value: the bytes are verified before */
    uint32_t checksum; /* they are written to the file */
} mc_offload_task_desc_t;

/* A disk file (key, version); `key` is valid only during the call or callback. */
typedef struct mc_disk_file_desc {
    const char *key;
    uint64_t version;
    uint64_t size;
} mc_disk_file_desc_t;

typedef struct mc_offload_heartbeat_out {
    int resync;         /* 1: the master did not know this offloader; it must report its files */
    int rescan;         /* 1: list the whole distributed root and report every file in it */
    uint64_t remaining; /* tasks queued or leased for this client after the call */
    uint64_t lease_ms;
    uint64_t promotions; /* promotion tasks waiting for this client (mc_master_promotion_take) */
} mc_offload_heartbeat_out_t;

/* Callbacks run under the master's lock: copy what you need, nothing slow. Non-zero = stop. */
typedef int (*mc_offload_task_cb)(void *arg, const mc_offload_task_desc_t *task);
typedef int (*mc_disk_file_cb)(void *arg, const mc_disk_file_desc_t *file);

/*
 * A client's offload heartbeat: registers (or updates) it as an offloader, renews the leases of
 * the tasks in `inflight`, and, when it is offloading and healthy, leases up to max_tasks queued
 * tasks (on_task per task) and hands out up to max_deletions file deletions (on_delete).
 * `leaving`: the client stops offloading; its local-disk replicas are dropped.
 * Errors: MC_ERR_UNABLE_OFFLOAD (the master runs without enable_offload), MC_ERR_CLIENT_NOT_FOUND
 * (unknown client: it must mount or remount first), MC_ERR_INVALID_PARAMS with `msg` when the
 * client's backend contradicts the cluster's (declared backend or fs type, or another storage
 * than the one the first distributed client reported).
 */
int mc_master_offload_heartbeat(mc_master_t *m, const char *client_id,
                                const mc_offloader_info_t *info, int leaving,
                                const uint64_t *inflight, size_t n_inflight, size_t max_tasks,
                                size_t max_deletions, mc_offload_task_cb on_task,
                                mc_disk_file_cb on_delete, void *arg,
                                mc_offload_heartbeat_out_t *out, char *msg, size_t msglen);

/* One written (or failed) task, or (task_id 0) a file found by the client's restart rescan. */
typedef struct mc_offload_result {
    uint64_t task_id;
    const char *key;
    uint64_t version;
    uint64_t size;
    int code;          /* 0: the file is written and published */
    int has_checksum;  /* task_id 0: the CRC32C of the value, from the file's header */
    uint32_t checksum; /* (the end-to-end checksum of a recovered object) */
} mc_offload_result_t;

/*
 * Results of a registered offloader. codes[i]: 0 (recorded), MC_ERR_TASK_NOT_FOUND (the task is
 * stale — the object was removed or replaced: delete the file), MC_ERR_OBJECT_ALREADY_EXISTS (a
 * rescanned file of an older value than the one the master knows: delete the file),
 * MC_ERR_REPLICA_IS_NOT_READY (a rescanned file an offload in flight is writing: leave it),
 * MC_ERR_INVALID_KEY. Returns MC_ERR_CLIENT_NOT_FOUND when the client is not a registered
 * offloader.
 *
 * Recovery (task_id 0): a file of an unknown key becomes a readable object again; of several
 * files of one key, the highest version wins whatever order they are reported in (versions grow
 * with every value); a file of a key whose value the master holds otherwise is obsolete; the
 * same file reported twice (several clients rescanning one root) is recorded once.
 */
int mc_master_offload_notify(mc_master_t *m, const char *client_id,
                             const mc_offload_result_t *results, size_t n, int *codes);

/*
 * The client is about to delete these files (disk capacity): their replicas are dropped first,
 * and objects left with no replica are removed. codes[i]: 0 or MC_ERR_REPLICA_NOT_FOUND.
 */
int mc_master_evict_disk_replicas(mc_master_t *m, const char *client_id,
                                  const mc_disk_file_desc_t *files, size_t n, int *codes);

/*
 * Promotion (promotion.c; upstream's PromotionAllocStart / NotifyPromotionSuccess /
 * NotifyPromotionFailure, folded into two calls). With enable_offload and promotion_on_hit, a
 * GetReplicaList of a complete object with no memory replica and a LOCAL_DISK replica counts a
 * hit; past the admission threshold, below the high watermark and under the in-flight cap it
 * queues a promotion for the client holding the file (the heartbeat reply says how many wait).
 *
 * mc_master_promotion_take: that client takes up to max (at most promotion_max_per_heartbeat)
 * of its queued promotions; for each the master allocates a PROCESSING extent of the object's
 * size in one of the client's own segments (never listed, never evicted) and hands cb the task
 * (`key` valid during the call). A task whose allocation fails is failed (counted). Returns the
 * number handed out (>= 0), or MC_ERR_CLIENT_NOT_FOUND (not an offloader here),
 * MC_ERR_INVALID_PARAMS.
 *
 * mc_master_promotion_result: the client reports the copy: code 0 = the extent holds the value's
 * bytes (the client verified them against the value's CRC32C) — it becomes a memory replica;
 * else the extent is freed. Returns 0; MC_ERR_TASK_NOT_FOUND when the task is unknown, not this
 * client's, or was cancelled or expired meanwhile (its extent is freed now; nothing is
 * published); MC_ERR_INVALID_PARAMS.
 */
typedef struct mc_promotion_task_desc {
    uint64_t task_id;
    const char *key;
    uint64_t size;    /* bytes */
    uint64_t version; /* of the disk replica's file to read */
    uint64_t address; /* where to write them, in the client's own segment */
    int has_checksum;
    uint32_t checksum;    /* the value's CRC32C */
    uint64_t fence_token; /* the extent's fencing token: the copy is admitted with it */
    uint64_t epoch;       /* the extent's segment's mount epoch: the copy is admitted with it */
} mc_promotion_task_desc_t;

typedef int (*mc_promotion_task_cb)(void *arg, const mc_promotion_task_desc_t *t);
int mc_master_promotion_take(mc_master_t *m, const char *client_id, size_t max,
                             mc_promotion_task_cb cb, void *arg);
int mc_master_promotion_result(mc_master_t *m, const char *client_id, uint64_t task_id,
                               const char *key, int code);

/*
 * Waiting for file deletions (an acknowledged remove or upsert must not be undone by a crash: the
 * files of the old value are gone before it is acknowledged). Every file deletion the master
 * records gets a sequence number; mc_master_offload_deletion_seq() is the last one handed out.
 * A caller reads it before and after a remove / upsert end and waits until
 * mc_master_offload_deletions_pending() over that range (and its keys; n == 0: any key) is 0:
 * a client has confirmed every such file gone. MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS: the range
 * is not this master's (it restarted): whether those files are gone is unknown.
 */
uint64_t mc_master_offload_deletion_seq(mc_master_t *m);
int mc_master_offload_deletions_pending(mc_master_t *m, const char *const *keys, size_t n,
                                        uint64_t from, uint64_t to, uint64_t *pending);

/*
 * How long a put of `size` bytes that just failed with -200 may retry: while offloads are pending
 * that will free memory (cfg.offload_put_wait_ms), or, when memory fenced by readers that are about
 * to release it would make room, long enough for them (or for the fences to age into eviction). 0:
 * retrying cannot help.
 */
uint64_t mc_master_put_wait_ms(mc_master_t *m, uint64_t size);

/*
 * A ping's offload part: records the client's fallback-read counter (a running total) and
 * returns the number of tasks queued for it, not yet leased.
 */
uint64_t mc_master_offload_ping(mc_master_t *m, const char *client_id, uint64_t fallback_reads);

/* ---- observation --------------------------------------------------------------------------- */

typedef struct mc_master_stats {
    uint64_t capacity_bytes; /* sum of mounted segment sizes */
    uint64_t used_bytes;     /* allocated */
    uint64_t key_count;      /* COMPLETE + PROCESSING objects */
    uint64_t complete_count;
    uint64_t processing_count;
    uint64_t client_count; /* live clients */
    uint64_t segment_count;
    uint64_t leased_count; /* objects whose lease is active now */
    uint64_t soft_pinned_count;
    uint64_t hard_pinned_count;
    uint64_t evicted_keys; /* total since start */
    uint64_t eviction_runs;
    uint64_t expired_clients; /* clients dropped by TTL since start */
    uint64_t gone_clients;    /* clients whose process was found gone since start (liveness.h) */
    uint64_t revoked_puts;    /* puts revoked by timeout or client expiry since start */
    /* Extents of revoked puts quarantined until their owner confirmed a write fence, and of
     * those the ones freed since, both since start (quarantined - freed - dropped with an
     * unmounted segment are still held). */
    uint64_t quarantined_extents, quarantine_freed;
    uint64_t reading_count;   /* objects readers hold read leases on now (not released) */
    uint64_t fenced_bytes;    /* of dropped values, kept until their readers are done */
    uint64_t lease_releases;  /* read leases released by their readers since start */
    uint64_t put_fence_waits; /* puts told to wait for fenced memory rather than evict */
    /* offload */
    uint64_t offload_enabled;
    uint64_t offloaders;           /* registered offloading clients */
    uint64_t offloaders_unhealthy; /* of which report an unhealthy backend */
    uint64_t offload_queued;       /* tasks waiting for a lease */
    uint64_t offload_leased;       /* tasks being written by a client */
    uint64_t offload_done;         /* since start */
    uint64_t offload_failed;       /* failed after offload_max_attempts, since start */
    uint64_t offload_retried;      /* re-queued after an expired lease or a failure */
    uint64_t offload_skipped;      /* not queued: the client's queue was full */
    uint64_t offload_bytes;        /* bytes offloaded since start */
    uint64_t disk_replicas;        /* LOCAL_DISK + DFS replicas now */
    uint64_t dfs_replicas;         /* of which DFS */
    uint64_t disk_replica_bytes;   /* bytes of objects with a disk replica (once each) */
    uint64_t disk_only_objects;    /* objects readable from disk only */
    uint64_t disk_used_bytes;      /* reported by the clients */
    uint64_t disk_capacity_bytes;  /* reported by the clients */
    uint64_t disk_evicted;         /* disk replicas dropped for disk capacity since start */
    uint64_t pending_deletions;    /* file deletions not yet confirmed by a client */
    uint64_t offload_recovering;   /* offloaders asked to report their files, not done yet,
                                      plus 1 while the distributed root awaits its rescan */
    uint64_t recovered_files;      /* files registered again by rescans since start */
    uint64_t fallback_reads;       /* reads served from disk, reported by clients */
    uint64_t checksum_mismatches;  /* replica reads that failed verification, as clients report */
    uint64_t regex_refused;        /* remove_by_regex calls refused: a pattern limit was hit */
    uint64_t mounts_refused;       /* mounts refused for a size above max_segment_size */
    uint64_t memory_objects;       /* complete objects with a memory replica now */
    uint64_t disk_objects;         /* complete objects with a disk replica now */
    int offload_backend;           /* declared, or the first one a client reported */
    char offload_fs_type[16];
    /* promotion (upstream's master_promotion_* family); counters since start */
    uint64_t promotion_in_flight; /* queued or being copied */
    uint64_t promotion_admitted, promotion_completed, promotion_completed_bytes;
    uint64_t promotion_expired, promotion_failed, promotion_cancelled;
    uint64_t promotion_rejected_frequency, promotion_rejected_watermark, promotion_rejected_cap;
} mc_master_stats_t;

void mc_master_get_stats(mc_master_t *m, mc_master_stats_t *out);

/*
 * Upstream's per-operation metric families (mooncake-interfaces-2.md §7.1, matches upstream
 * `MasterMetricManager`), counted by the RPC handlers (rpc_handlers.c). Our wire has one RPC per
 * operation carrying N keys: a call with one key counts as upstream's single form
 * (master_<op>_requests_total), a call with several as its batch form
 * (master_batch_<op>_requests_total and _items_total). The copy/move task operations are counted
 * by task_manager.c and its handlers (task_manager.h says how upstream's Copy/Move Start/End/
 * Revoke map onto them). Operations this master does not serve (NoF segments, query_ip) stay 0:
 * no such request ever succeeds or arrives as that operation.
 */
typedef enum mc_master_op {
    MC_OP_PUT_START,
    MC_OP_PUT_END,
    MC_OP_PUT_REVOKE,
    MC_OP_GET_REPLICA_LIST,
    MC_OP_GET_REPLICA_LIST_BY_REGEX,
    MC_OP_EXIST_KEY,
    MC_OP_REMOVE,
    MC_OP_REMOVE_BY_REGEX,
    MC_OP_REMOVE_ALL,
    MC_OP_MOUNT_SEGMENT,
    MC_OP_UNMOUNT_SEGMENT,
    MC_OP_REMOUNT_SEGMENT,
    MC_OP_MOUNT_NOF_SEGMENT,
    MC_OP_UNMOUNT_NOF_SEGMENT,
    MC_OP_REMOUNT_NOF_SEGMENT,
    MC_OP_PING,
    MC_OP_COPY_START,
    MC_OP_COPY_END,
    MC_OP_COPY_REVOKE,
    MC_OP_MOVE_START,
    MC_OP_MOVE_END,
    MC_OP_MOVE_REVOKE,
    MC_OP_EVICT_DISK_REPLICA,
    MC_OP_CREATE_COPY_TASK,
    MC_OP_CREATE_MOVE_TASK,
    MC_OP_QUERY_TASK,
    MC_OP_FETCH_TASKS,
    MC_OP_UPDATE_TASK,
    MC_OP_COUNT
} mc_master_op_t;

typedef enum mc_master_batch_op {
    MC_BATCH_EXIST_KEY,
    MC_BATCH_QUERY_IP,
    MC_BATCH_REPLICA_CLEAR,
    MC_BATCH_GET_REPLICA_LIST,
    MC_BATCH_PUT_START,
    MC_BATCH_PUT_END,
    MC_BATCH_PUT_REVOKE,
    MC_BATCH_COUNT
} mc_master_batch_op_t;

/* upstream's master_value_size_bytes buckets (bytes); one more count for +Inf */
#define MC_VALUE_SIZE_BUCKETS 7
extern const uint64_t mc_value_size_bounds[MC_VALUE_SIZE_BUCKETS];

typedef struct mc_master_op_stats {
    uint64_t requests[MC_OP_COUNT], failures[MC_OP_COUNT];
    uint64_t batch_requests[MC_BATCH_COUNT], batch_failures[MC_BATCH_COUNT];
    uint64_t batch_partial[MC_BATCH_COUNT], batch_items[MC_BATCH_COUNT];
    uint64_t batch_failed_items[MC_BATCH_COUNT];
    uint64_t put_start_alloc_failures;      /* keys refused for lack of space */
    uint64_t put_start_partial_allocations; /* keys given fewer replicas than asked */
    uint64_t total_gets, valid_gets;        /* GetReplicaList keys asked / found complete */
    uint64_t mem_hits, mem_hit_bytes;       /* ... whose first replica is memory */
    uint64_t file_hits, file_hit_bytes;     /* ... whose first replica is on disk */
    /* sizes of the objects created by PutStart/UpsertStart: non-cumulative bucket counts
     * (the last is above the largest bound), their sum and count */
    uint64_t value_size_counts[MC_VALUE_SIZE_BUCKETS + 1], value_size_sum, value_size_count;
    /* eviction (memory tier; eviction.c) and superseded puts (puts.c, monitor.c) */
    uint64_t evictions_successful, evictions_attempted, evicted_bytes;
    uint64_t put_start_discards, put_start_releases;
} mc_master_op_stats_t;

/* Counts one request of `op` (single form: one key) and whether it failed. Thread-safe. */
void mc_master_count_op(mc_master_t *m, mc_master_op_t op, int failed);
/* Counts one batch request of `items` keys of which `failed` failed. Thread-safe. */
void mc_master_count_batch(mc_master_t *m, mc_master_batch_op_t op, uint64_t items,
                           uint64_t failed);
/* One key's PutStart outcome: rc, and replicas given vs asked (rc 0). Observes `size`. */
void mc_master_count_put_start(mc_master_t *m, int rc, uint64_t size, size_t given, size_t asked);
/* One key's GetReplicaList: rc, the first replica's type (rc 0) and the object size. */
void mc_master_count_get(mc_master_t *m, int rc, mc_replica_type_t first, uint64_t size);
/* A consistent-enough copy of every counter (each read atomically). Thread-safe. */
void mc_master_get_op_stats(mc_master_t *m, mc_master_op_stats_t *out);
/* Up to capacity segments into out; returns how many are mounted. */
size_t mc_master_list_segments(mc_master_t *m, mc_segment_info_t *out, size_t capacity);

/* ---- for tests ---------------------------------------------------------------------------- */

/* Replaces the millisecond clock (monotonic by default); NULL restores it. */
void mc_master_set_clock(mc_master_t *m, uint64_t (*now_ms)(void *arg), void *arg);
/* Runs one monitor sweep (client TTL, put timeouts, deferred frees) and one eviction check now. */
void mc_master_tick(mc_master_t *m);

#endif /* MC_MASTER_SERVICE_H */
