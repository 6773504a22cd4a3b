/*
 * store.h — the Mooncake Store client: put and get objects in the cluster-wide memory pool.
 *
 * A store (mc_store_t, a long-lived handle) connects to mooncake_master, optionally contributes a
 * memory segment of global_segment_size bytes that other clients write replicas into, and moves
 * object bytes client-to-client through the Transfer Engine. The operations mirror upstream
 * Mooncake's client (`mooncake.store.MooncakeDistributedStore`), with upstream's error codes
 * (mooncake/errors.h). Thread-safe: any number of threads may share one store.
 *
 * Keys: NUL-terminated strings of 1..MC_MAX_KEY_LEN bytes; any byte but NUL (so '/' is fine).
 * Anything else is MC_ERR_INVALID_KEY (-400). Values: 0..2^40 bytes; an empty value is an object
 * (get returns 0 bytes), distinct from a missing key (MC_ERR_OBJECT_NOT_FOUND, -704).
 *
 * Offload (docs/offload.md): with mooncake_master --enable_offload, objects also get disk replicas
 * (a client's local disk, or a shared distributed filesystem) and stay readable after memory
 * eviction: get falls back to them automatically. Every store reads the MOONCAKE_OFFLOAD_* and
 * MOONCAKE_DISTRIBUTED_* environment variables at setup.
 *
 * Errors every call may return besides those listed: MC_ERR_INVALID_PARAMS (-600: NULL/bad
 * arguments, a store with local_buffer_size 0 asked to put or get, a closed store),
 * MC_ERR_RPC_FAIL (-900: master unreachable), MC_ERR_TRANSFER_FAIL (-800: a peer failed mid-copy).
 */
#ifndef MOONCAKE_STORE_H
#define MOONCAKE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/errors.h"
#include "mooncake/transfer_engine.h" /* mc_transfer_engine_t (config.transfer_engine) */

#ifdef __cplusplus
extern "C" {
#endif

#define MC_MAX_KEY_LEN 4096
#define MC_MAX_REPLICAS 8
#define MC_MAX_VALUE_SIZE (1ull << 40)

typedef struct mc_store mc_store_t; /* handle */

typedef struct mc_store_config {
    const char *local_hostname;   /* "host" or "host:port" this client serves its segment on */
    const char *metadata_server;  /* P2PHANDSHAKE, http://h:p/metadata, etcd://h:p[;h:p], h:p */
    uint64_t global_segment_size; /* bytes contributed to the pool; 0 = pure client */
    uint64_t local_buffer_size;   /* bytes of local staging; 0 = pure server (no put/get) */
    const char *protocol;         /* "tcp" (default) or "rdma" */
    const char *device_name;      /* rdma devices, comma list; "" = automatic */
    /* "host:port" of mooncake_master (default 127.0.0.1:50051), or upstream's HA spec
     * "etcd://h1:p1;h2:p2": follow the master elected in that etcd cluster (docs/ha.md; the
     * cluster id comes from $MC_STORE_CLUSTER_ID, default "mooncake_cluster"). Any other
     * scheme: setup fails with MC_ERR_INVALID_PARAMS. */
    const char *master_server_addr;
    /* Offload the objects of this client's segment to its storage backend (upstream's
     * enable_ssd_offload / mooncake_client --enable_offload). A client with
     * MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed and a segment offloads without it. */
    int enable_offload;
    /* Directory of the local backend's files (upstream's ssd_offload_path); NULL or "" =
     * $MOONCAKE_OFFLOAD_FILE_STORAGE_PATH, else /data/file_storage. */
    const char *offload_path;
    /* End-to-end checksums (on by default): a put computes the CRC32C of each value and the
     * master keeps it with the object; a get verifies the bytes of whichever replica it read
     * (memory over local/shm/tcp/rdma, local disk through its owner, DFS) before returning
     * success, tries the next replica on a mismatch, and returns MC_ERR_CHECKSUM_MISMATCH (-801)
     * when no replica verifies. 1 turns both off (upstream's behaviour, for like-for-like
     * comparisons); so does the environment variable MC_STORE_CHECKSUM=0. Objects written
     * without a checksum are read unverified. */
    int disable_checksum;
    /* The cluster secret (docs/security.md), from the first set: cluster_secret,
     * cluster_secret_file, env MOONCAKE_CLUSTER_SECRET_FILE, env MOONCAKE_CLUSTER_SECRET. With
     * one, this client proves it to the master, to peers' Transfer Engines and offload servers,
     * and its own servers accept only peers that prove it; a master or peer that refuses this
     * client, or has no secret, fails the call with MC_ERR_ILLEGAL_CLIENT (-601). None:
     * upstream's behaviour. An unreadable file fails setup with MC_ERR_INVALID_PARAMS. */
    const char *cluster_secret;
    const char *cluster_secret_file;
    /* How long setup keeps retrying a master that does not answer (not started yet, restarting),
     * ms, with a backoff of 0.1..2 s: deployments start processes in any order, as upstream's
     * client retries. 0 = env MC_MASTER_WAIT_TIMEOUT (seconds) or 30 s; negative = fail at once
     * with MC_ERR_RPC_FAIL. */
    int64_t master_wait_timeout_ms;
    /* An engine to move this store's bytes through instead of creating one (upstream's
     * setup(..., engine=...), e.g. SGLang sharing its KV-transfer engine with HiCache); NULL =
     * create one from local_hostname, metadata_server, protocol, device_name and the secret
     * (those are then ignored for the engine). Borrowed: the caller keeps it alive until
     * mc_store_close()/mc_store_free() returns; the store registers its segment memory in it
     * and frees/unregisters what it registered at close, but never destroys it. Its cluster
     * secret is the engine's own. */
    mc_transfer_engine_t *transfer_engine;
    /* The client HTTP server (matches upstream's real client: mooncake_client
     * --enable_http_server --http_port, Python enable_client_http_server / client_http_port):
     * GET /health, /metrics, /metrics/summary (src/client/client_http.h) on
     * http_host:http_port. http_port must be 1..65535 when enabled (else setup fails with
     * MC_ERR_INVALID_PARAMS, as upstream); a port that cannot be bound only logs a warning and
     * setup goes on (upstream). http_host NULL or "" = the host of local_hostname (a wildcard
     * there prints the open-listener warning of docs/security.md). */
    int enable_http_server;
    int http_port;
    const char *http_host;
} mc_store_config_t;

typedef enum mc_soft_pin_action {
    MC_SOFT_PIN_PRESERVE = 0,
    MC_SOFT_PIN_ENABLE = 1,
    MC_SOFT_PIN_DISABLE = 2,
} mc_soft_pin_action_t;

/* Placement and pinning of a put (upstream's ReplicateConfig). Zero-initialise, or use _INIT. */
typedef struct mc_replicate_config {
    uint32_t replica_num;                  /* replicas on distinct segments, best effort; 0 = 1 */
    const char *preferred_segment;         /* "host:port" tried first; NULL/"" = none */
    const char *const *preferred_segments; /* more preferences, in order */
    size_t preferred_segment_count;
    mc_soft_pin_action_t soft_pin_action; /* ENABLE: evicted last, until the soft-pin TTL */
    int has_soft_pin_ttl;                 /* 1: soft_pin_ttl_ms overrides the master default */
    uint64_t soft_pin_ttl_ms;
    int with_hard_pin; /* 1: never evicted; removable explicitly */
} mc_replicate_config_t;

#define MC_REPLICATE_CONFIG_INIT                                                                   \
    {                                                                                              \
        1, NULL, NULL, 0, MC_SOFT_PIN_PRESERVE, 0, 0, 0                                            \
    }

typedef enum mc_replica_type {
    MC_REPLICA_MEMORY = 0,
    MC_REPLICA_DISK = 1,
    MC_REPLICA_LOCAL_DISK = 2,
    MC_REPLICA_DFS = 100,
} mc_replica_type_t;

typedef enum mc_replica_status {
    MC_REPLICA_UNDEFINED = 0,
    MC_REPLICA_INITIALIZED = 1,
    MC_REPLICA_PROCESSING = 2,
    MC_REPLICA_COMPLETE = 3,
    MC_REPLICA_REMOVED = 4,
    MC_REPLICA_FAILED = 5,
} mc_replica_status_t;

/* Where one replica of an object lives. */
typedef struct mc_replica_desc {
    mc_replica_type_t type;
    mc_replica_status_t status;
    char segment_name[272]; /* memory: the segment's endpoint "host:port" */
    uint64_t address;       /* memory: address in the owner's registered memory */
    uint64_t size;          /* bytes */
    char file_path[512];    /* disk replicas */
    uint64_t epoch;         /* memory: the mount epoch of its segment (0 for disk replicas) */
    int has_checksum;       /* 1: checksum holds the writer's CRC32C of the value */
    uint32_t checksum;      /* CRC32C (Castagnoli, as iSCSI/ext4) of the whole value */
    /* memory, PROCESSING (a put's or upsert's target): the fencing token of the allocation, for
     * the writes into it (mc_transfer_req_t.fence_token); 0 otherwise */
    uint64_t fence_token;
} mc_replica_desc_t;

/*
 * Connects to the master, starts the Transfer Engine on local_hostname, allocates and mounts the
 * segment, allocates the local buffer, starts the liveness ping and, as configured, the offload
 * worker. *out receives the store.
 * Returns 0, MC_ERR_INVALID_PARAMS (bad config or offload environment: the log says which field
 * or variable), MC_ERR_RPC_FAIL (master unreachable for master_wait_timeout_ms),
 * MC_ERR_ILLEGAL_CLIENT (-601: the cluster secret was refused), MC_ERR_INVALID_VERSION (-300:
 * master of another version), MC_ERR_NOT_SUPPORTED (protocol rdma, or MOONCAKE_DISTRIBUTED_FS_TYPE,
 * not built).
 */
int mc_store_setup(const mc_store_config_t *config, mc_store_t **out);
/* Unmounts the segment, stops threads, frees everything. Idempotent; NULL is a no-op. After it
 * every call on the store returns MC_ERR_INVALID_PARAMS, until mc_store_free(). */
int mc_store_close(mc_store_t *store);
/* close + free the handle. */
void mc_store_free(mc_store_t *store);

/* 0 healthy, 1 not set up or closed, 2 master unreachable (upstream's health_check). */
int mc_store_health_check(mc_store_t *store);
/* This client's segment name "host:port" (static for the store's life). */
const char *mc_store_get_hostname(const mc_store_t *store);

/*
 * Stores a copy of value[0..size). Matches upstream put: 0 also when the key already exists
 * (objects are immutable; the existing value is kept). MC_ERR_NO_AVAILABLE_HANDLE (-200) when no
 * segment has room even after eviction (vLLM treats it as back-pressure).
 * When another client's put of the key is still in progress, waits (up to MC_PUT_BUSY_WAIT_MS,
 * 5 s) for its outcome: 0 once it completed, or this put's own result if it failed; still in
 * progress after the wait: MC_ERR_REPLICA_IS_NOT_READY (-703). (Upstream returns success at once,
 * even if that other put then fails and the key ends absent; here a 0 always means the key is
 * readable until removed or evicted.)
 */
int mc_store_put(mc_store_t *store, const char *key, const void *value, size_t size,
                 const mc_replicate_config_t *config);
/* Insert-or-replace: like put, but an existing value is replaced atomically for readers. */
int mc_store_upsert(mc_store_t *store, const char *key, const void *value, size_t size,
                    const mc_replicate_config_t *config);

/*
 * Reads the object into buf[0..capacity). Returns its size in bytes (>= 0), MC_ERR_OBJECT_NOT_FOUND
 * (-704) when absent, MC_ERR_BUFFER_OVERFLOW (-10) when capacity is smaller than the object.
 * Offload: with no memory replica left, a disk replica is read instead; an object only on the
 * distributed backend read by a client without it is MC_ERR_UNAVAILABLE_IN_CURRENT_MODE (-1011).
 * Integrity: the bytes returned are the object's exact value or the call fails. Each replica
 * read is verified against the writer's CRC32C (see disable_checksum); a replica that fails is
 * skipped for the next one (memory, then disk); when none verifies, the lookup is repeated once
 * (the object may have been replaced meanwhile), then MC_ERR_CHECKSUM_MISMATCH (-801). A memory
 * read that finished after its read lease (--default_kv_lease_ttl) ran out is
 * MC_ERR_LEASE_EXPIRED (-707): its memory may have been reused; judged per key in batches.
 */
int64_t mc_store_get(mc_store_t *store, const char *key, void *buf, size_t capacity);
/* Size of the object in bytes, or MC_ERR_OBJECT_NOT_FOUND. Grants a read lease as upstream. */
int64_t mc_store_get_size(mc_store_t *store, const char *key);

/*
 * Zero-copy forms on memory registered with mc_store_register_buffer(): same results as put/get.
 * MC_ERR_INVALID_PARAMS when the range is not inside a registered buffer.
 */
int mc_store_put_from(mc_store_t *store, const char *key, const void *buf, size_t size,
                      const mc_replicate_config_t *config);
int mc_store_upsert_from(mc_store_t *store, const char *key, const void *buf, size_t size,
                         const mc_replicate_config_t *config);
int64_t mc_store_get_into(mc_store_t *store, const char *key, void *buf, size_t capacity);

/*
 * Batches: results[i] receives what the single call would return for keys[i]. The function
 * returns 0 when every key succeeded, else the first failing key's code. A key repeated within
 * one batch is handled as the single calls would be in order: each get destination is filled,
 * each put after the first finds the key existing (0).
 */
int mc_store_put_batch(mc_store_t *store, const char *const *keys, const void *const *values,
                       const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                       int *results);
int mc_store_get_batch(mc_store_t *store, const char *const *keys, void *const *bufs,
                       const size_t *capacities, size_t n, int64_t *results);
int mc_store_put_from_batch(mc_store_t *store, const char *const *keys, const void *const *bufs,
                            const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                            int *results);
int mc_store_upsert_from_batch(mc_store_t *store, const char *const *keys, const void *const *bufs,
                               const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                               int *results);
int mc_store_get_into_batch(mc_store_t *store, const char *const *keys, void *const *bufs,
                            const size_t *capacities, size_t n, int64_t *results);

/* 1 exists, 0 absent, negative error. Grants a read lease when it exists (upstream ExistKey). */
int mc_store_exist(mc_store_t *store, const char *key);
int mc_store_batch_exist(mc_store_t *store, const char *const *keys, size_t n, int *results);

/*
 * Removes the object. MC_ERR_OBJECT_HAS_LEASE (-706) while a read lease is active unless force;
 * MC_ERR_OBJECT_NOT_FOUND (-704) when absent.
 */
int mc_store_remove(mc_store_t *store, const char *key, int force);
int mc_store_batch_remove(mc_store_t *store, const char *const *keys, size_t n, int force,
                          int *results);
/*
 * Number of objects removed (leased ones are skipped unless force), or a negative error;
 * MC_ERR_ILLEGAL_CLIENT (-601) when the master does not know this client as live (right after a
 * master restart, until the client's next ping re-registers it, within a second).
 */
int64_t mc_store_remove_all(mc_store_t *store, int force);
/*
 * Removes the objects whose keys the pattern matches anywhere (a search: anchor with ^ and $).
 * Patterns are upstream's (ECMAScript std::regex), run by PCRE2 on the master with
 * ECMAScript-compatible options (src/master/key_regex.h lists the differences). Count removed,
 * or negative: MC_ERR_INVALID_PARAMS (-600) for a bad pattern, one longer than 4096 bytes, or
 * one that exceeds the master's per-key match limits on some key (then nothing is removed);
 * MC_ERR_ILLEGAL_CLIENT as remove_all.
 */
int64_t mc_store_remove_by_regex(mc_store_t *store, const char *regex, int force);

/* Registers caller memory for the zero-copy calls; the caller keeps ownership. A range with
 * pages not mapped in this process is refused with MC_ERR_INVALID_PARAMS (mc_te_register_memory).
 */
int mc_store_register_buffer(mc_store_t *store, void *buf, size_t size);
int mc_store_unregister_buffer(mc_store_t *store, void *buf);

/* Offload activity of this client, since setup. */
typedef struct mc_store_offload_stats {
    int enabled;         /* this client runs the offload worker */
    int backend;         /* 0 none, 1 local, 2 distributed */
    int healthy;         /* the backend passed its last health check */
    int offloading;      /* taking tasks (see mc_store_set_offloading) */
    uint64_t tasks_done; /* objects written to disk */
    uint64_t tasks_failed;
    uint64_t tasks_stale; /* written, but removed or replaced meanwhile (file deleted) */
    uint64_t bytes_offloaded;
    uint64_t files;          /* files this client holds now */
    uint64_t disk_bytes;     /* their value bytes */
    uint64_t evicted_files;  /* deleted for MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES/_KEYS_LIMIT */
    uint64_t queued;         /* tasks taken, not yet written */
    uint64_t fallback_reads; /* gets served from a disk replica */
    uint64_t served_reads;   /* reads of this client's local files served to others */
    /* its fetch server's connection limits (offload_server.h), since setup */
    uint64_t fetch_connections_refused;     /* over the connection limit */
    uint64_t fetch_connections_idle_closed; /* no request within the idle timeout */
    uint64_t fetch_connections_stalled;     /* a request not received within 30 s */
} mc_store_offload_stats_t;

int mc_store_get_offload_stats(mc_store_t *store, mc_store_offload_stats_t *out);
/*
 * 0 pauses taking offload tasks, 1 resumes (upstream's enable_offloading). While paused the
 * master keeps the tasks queued and their objects pinned in memory. MC_ERR_UNAVAILABLE_IN_CURRENT_
 * MODE when this client does not offload.
 */
int mc_store_set_offloading(mc_store_t *store, int enabled);

/* Replicas of a complete object, memory replicas first: up to `capacity` written to out, *count
 * receives how many exist. Disk replicas: LOCAL_DISK (segment_name = the owner's read endpoint)
 * and DFS; for both, address is the file version and file_path "<version>/<key>". */
int mc_store_get_replica_desc(mc_store_t *store, const char *key, mc_replica_desc_t *out,
                              size_t capacity, size_t *count);

/* ---- dummy clients (upstream's setup_dummy / DummyClient) ------------------------------------
 *
 * A dummy store owns no segment, no Transfer Engine and no master connection: every call is
 * forwarded to a real client (mooncake_client) on the same host, through the abstract unix
 * socket "@mooncake_client_<port>.sock" (<port>: the port of real_client_addr, mooncake_client's
 * --port). Object bytes never cross the socket: the dummy's memory is shared memory (memfd) the
 * real client maps, so the zero-copy calls stay zero-copy. Matches upstream `DummyClient`
 * (mooncake-store/src/dummy_client.cpp) and `RealClient`'s service; docs/limits.md lists the
 * service's limits.
 *
 * On a dummy store: put/upsert/get (plain) copy through a slice of the dummy's local buffer
 * (local_buffer_size bytes; MC_ERR_NO_AVAILABLE_HANDLE (-200) when no slice of the size is free,
 * as upstream; a get needs room for min(capacity, local_buffer_size) bytes, so an object larger
 * than the local buffer is read with get_into). The zero-copy calls need memory from
 * mc_store_alloc_shared registered with mc_store_register_buffer, which must name exactly an
 * allocation's base and size (else MC_ERR_INVALID_PARAMS; upstream returns -1). Every other call
 * runs on the real client and returns what it returns there. mc_store_get_hostname is "".
 *
 * Liveness (upstream's): the dummy pings every second; while the real client is unreachable (or
 * did not answer a call within MC_DUMMY_CALL_TIMEOUT_MS, env, default 60 s) every call returns
 * MC_ERR_RPC_FAIL (-900) at once; every 2 s the dummy reconnects, hands its memory over again,
 * and calls work again. The real client drops a dummy 10 s after its last message, or at once
 * when its connection closes. mc_store_health_check: 0 healthy, 1 not set up or closed, 2 real
 * client unreachable.
 */
typedef struct mc_store_dummy_config {
    const char *real_client_addr; /* "host:port" of mooncake_client (default 127.0.0.1:50052);
                                     only the port is used: it names the socket */
    uint64_t local_buffer_size;   /* bytes of shared staging for the copying calls; 0 = none */
    uint64_t mem_pool_size;       /* accepted and unused, as upstream */
    /* The cluster secret, resolved as mc_store_config_t's; the dummy proves it to the real
     * client (which then must have it too). */
    const char *cluster_secret;
    const char *cluster_secret_file;
} mc_store_dummy_config_t;

/*
 * Connects to the real client, hands over the local buffer and starts the ping. Returns 0,
 * MC_ERR_INVALID_PARAMS (bad address, local buffer over 1 TiB, unreadable secret file),
 * MC_ERR_RPC_FAIL (no real client serves that port here), MC_ERR_ILLEGAL_CLIENT (the cluster
 * secret was refused), MC_ERR_INTERNAL_ERROR (shared memory could not be allocated).
 */
int mc_store_setup_dummy(const mc_store_dummy_config_t *config, mc_store_t **out);

/*
 * Shared memory (a sealed memfd named "mooncake_shm", mapped read-write, zeroed) for the
 * zero-copy calls of a dummy: what upstream's alloc_from_mem_pool and MooncakeHostMemAllocator
 * return. `store` owns the allocation (freed with mc_store_free), or NULL: the process owns it.
 * Works on any store. 0 and *addr, MC_ERR_INVALID_PARAMS (size 0 or over 1 TiB),
 * MC_ERR_INTERNAL_ERROR (the kernel refused). Thread-safe.
 */
int mc_store_alloc_shared(mc_store_t *store, size_t size, void **addr);
/* Frees an allocation (unregister it first). 0, or MC_ERR_INVALID_PARAMS when addr is not the
 * base of a live allocation. */
int mc_store_free_shared(mc_store_t *store, void *addr);

/* ---- replica copy/move tasks and replica clear (matches upstream `Client::CreateCopyTask`,
 * `CreateMoveTask`, `QueryTask`, `BatchReplicaClear`) ---------------------------------------- */
/*
 * A task asks the cluster to copy an object's value onto other segments (copy) or to move one
 * replica from a segment to another (move). The master queues it for the client that holds the
 * source replica in its own segment (as upstream: that client executes it); that client's task
 * executor allocates nothing itself: it fetches the task with extents the master reserved on the
 * targets, copies the value out of its segment, verifies it against the object's CRC32C, writes
 * it into the targets with the Transfer Engine and reports. Only then does the master add the
 * new replicas (a move also drops the source): a reader never sees a replica before its bytes
 * are complete, and a task whose object was removed or replaced meanwhile, whose target or
 * executor went away, or whose bytes failed verification ends FAILED with nothing added.
 * Bounds and timeouts: mooncake_master --max_total_{pending,processing,finished}_tasks,
 * --{pending,processing}_task_timeout_sec, --max_retry_attempts (docs/master-flags.md).
 */
typedef enum mc_task_type {
    MC_TASK_REPLICA_COPY = 0, /* upstream TaskType.REPLICA_COPY */
    MC_TASK_REPLICA_MOVE = 1,
} mc_task_type_t;

typedef enum mc_task_status {
    MC_TASK_PENDING = 0, /* queued for its executor (upstream TaskStatus values) */
    MC_TASK_PROCESSING = 1,
    MC_TASK_FAILED = 2,
    MC_TASK_SUCCESS = 3,
} mc_task_status_t;

#define MC_TASK_ID_LEN 36 /* text UUID, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */

/* What QueryTask answers (upstream `QueryTaskResponse`). */
typedef struct mc_task_info {
    char id[MC_TASK_ID_LEN + 1];
    mc_task_type_t type;
    mc_task_status_t status;
    uint64_t created_at_ms_epoch;      /* wall clock, ms since 1970 */
    uint64_t last_updated_at_ms_epoch; /* last status change */
    char assigned_client[64];          /* the executor's client id */
    char message[256];                 /* FAILED: why ("OBJECT_NOT_FOUND: ...") */
} mc_task_info_t;

/*
 * Queues a copy of `key`'s value onto each of targets[0..n) (segment names, "host:port" as in
 * mc_replica_desc_t.segment_name; 1 <= n <= MC_MAX_REPLICAS). Targets already holding a replica
 * are skipped. id_out receives the task id (MC_TASK_ID_LEN + 1 bytes). Returns 0,
 * MC_ERR_OBJECT_NOT_FOUND (no complete object), MC_ERR_INVALID_PARAMS (no target, a target not
 * mounted, too many), MC_ERR_REPLICA_NOT_FOUND (the object has no memory replica to copy from),
 * MC_ERR_TASK_PENDING_LIMIT_EXCEEDED (-1401: --max_total_pending_tasks tasks are pending).
 */
int mc_store_create_copy_task(mc_store_t *store, const char *key, const char *const *targets,
                              size_t n, char *id_out);
/* Queues a move of `key`'s replica on segment `source` to segment `target`. Errors as copy, and
 * MC_ERR_INVALID_PARAMS when source == target or the object has no replica on source. */
int mc_store_create_move_task(mc_store_t *store, const char *key, const char *source,
                              const char *target, char *id_out);
/* The task's state into *out: 0, MC_ERR_TASK_NOT_FOUND (-1400: unknown, or pruned beyond
 * --max_total_finished_tasks), MC_ERR_INVALID_PARAMS (not a UUID). */
int mc_store_query_task(mc_store_t *store, const char *task_id, mc_task_info_t *out);
/*
 * Upstream's BatchReplicaClear: for each of keys[0..n) that this client wrote (its put or
 * upsert), whose lease has run out: with segment_name NULL or "", the whole object is removed
 * (only when no put or upsert of it is in progress); otherwise its memory replica on that
 * segment is dropped (the object is removed when it was the last). cleared[i] = 1 for the keys
 * cleared, else 0 (absent, another client's, leased, nothing on that segment). Returns 0 or a
 * whole-call error (MC_ERR_INVALID_PARAMS for n > 65536).
 */
int mc_store_batch_replica_clear(mc_store_t *store, const char *const *keys, size_t n,
                                 const char *segment_name, int *cleared);

/*
 * ---- Segments mounted at run time (upstream's RealClient::mountSegment & co.) ----------------
 *
 * Besides the segment of setup, a client may contribute more memory while it runs. Each such
 * segment is registered with this client's Transfer Engine (peers reach it through the same
 * endpoint, mc_store_get_hostname()) and mounted at the master under its own id, a string in
 * upstream's form "<u64>-<u64>" (decimal), at most MC_STORE_SEGMENT_ID_MAX bytes with its NUL. The
 * master places replicas on it like on any segment. After a master restart (NEED_REMOUNT) every
 * segment still mounted is mounted again, with the one of setup. mc_store_close() unmounts and
 * frees them all.
 *
 * Unmounting (matches upstream's UnmountSegment / GracefulUnmountSegment): with grace 0 the
 * master drops every replica on the segment (objects left without one are gone: a get then
 * returns MC_ERR_OBJECT_NOT_FOUND; those with replicas elsewhere stay readable from them), then
 * the memory is unregistered — after the transfers in flight on it end — and freed. With a grace
 * period the call returns at once; the master stops placing puts on the segment, its objects stay
 * readable for grace_period_ms, then the segment is unmounted and freed as above (within about
 * a second after the grace ends). Integrity: a reader that got a replica before the unmount
 * either reads the object's bytes or fails; the freed addresses stay reserved for
 * MC_SEGMENT_HOLE_MS (35 s: the transfer timeout plus a margin, beyond the read lease) so no new
 * memory, a new segment above all, appears there while a late transfer may still name them.
 *
 * Thread-safety: any thread; mounts and unmounts of one store are serialised.
 * Errors besides those of every call: MC_ERR_INVALID_PARAMS (bad size/offset/path/protocol, an id
 * this client did not mount with the matching function or already unmounting),
 * MC_ERR_SEGMENT_ALREADY_EXISTS / MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS (the master refused the
 * range), MC_ERR_INTERNAL_ERROR (no memory), MC_ERR_UNAVAILABLE_IN_CURRENT_MODE (a dummy store:
 * upstream refuses these on a dummy too). Differences from upstream: one segment per call
 * (upstream splits by the transport's registration limit, which tcp does not have); `protocol`
 * must be "", "tcp" or the engine's own; `location` (a NUMA/device hint) does not exist here.
 */
#define MC_STORE_SEGMENT_ID_MAX 48

/* Allocates ceil(size / 4 MiB) * 4 MiB bytes (upstream's slab rounding; *allocated receives it)
 * of engine memory — shared memory, reached by same-host peers with shm — and mounts it. size
 * must be 1..2^40. id_out receives the new segment's id. */
int mc_store_allocate_and_mount_segment(mc_store_t *store, uint64_t size, const char *protocol,
                                        char id_out[MC_STORE_SEGMENT_ID_MAX], uint64_t *allocated);
/* Maps [offset, offset+size) of the file at `path` (opened read-write, MAP_SHARED; e.g.
 * /dev/shm/<name>) and mounts it. offset must be a multiple of the page size and the range inside
 * the file; size 1..2^40. The file's contents are the segment's bytes: objects are written into
 * it (upstream's mount_segment). */
int mc_store_mount_file_segment(mc_store_t *store, const char *path, uint64_t offset, uint64_t size,
                                const char *protocol, char id_out[MC_STORE_SEGMENT_ID_MAX]);
/* Unmounts a segment of mc_store_mount_file_segment (unmapping the file), now or after
 * grace_period_ms. */
int mc_store_unmount_segment(mc_store_t *store, const char *segment_id, uint64_t grace_period_ms);
/* Unmounts and frees a segment of mc_store_allocate_and_mount_segment, now or after
 * grace_period_ms. */
int mc_store_unmount_and_free_segment(mc_store_t *store, const char *segment_id,
                                      uint64_t grace_period_ms);

/*
 * Stops this client's disk tier (upstream's unmount_local_disk_segment → DrainLocalDiskSegment):
 * the offload worker stops at once, without draining its queue; the master drops the client's
 * local-disk replicas (objects left without a replica are gone) and hands it no more offload
 * tasks; then the call waits grace_period_ms (at most 3600000) before returning. Reads of its
 * files by peers that got a replica before keep being served until mc_store_close(). Returns 0
 * also when this client does not offload (upstream: a warning and 0), MC_ERR_INVALID_PARAMS for
 * a grace above the limit, MC_ERR_UNAVAILABLE_IN_CURRENT_MODE on a dummy store. The tier does
 * not come back before a new setup (as upstream).
 */
int mc_store_unmount_local_disk(mc_store_t *store, uint64_t grace_period_ms);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_STORE_H */
