/*
 * transfer_engine.h — the Transfer Engine: move bytes between registered memory of processes.
 *
 * A process creates one engine (a long-lived handle). Memory it registers forms its *segment*,
 * named by the engine's endpoint "host:port" (a wildcard host is advertised as the machine's
 * primary address, or 127.0.0.1 where there is none). Any process can then read or write
 * (segment, address, length) ranges of that segment in batches: create a batch, submit requests,
 * then wait or poll each request's status.
 *
 * Transports, chosen per peer:
 *   local — the target is this engine's own segment: memcpy.
 *   shm   — the target is on the same host and the range lies in memory allocated with
 *           mc_te_alloc_segment_memory(): the peer maps the owner's memfd (handed over an abstract
 *           unix socket, same uid only) and copies once. Disable with config.disable_shm or
 *           MC_DISABLE_SHM=1.
 *   tcp   — anything else: length-prefixed frames, bytes received straight into the destination,
 *           a write completes only once the receiver confirms the bytes are in place.
 *   rdma  — config.protocol "rdma" (builds with USE_RDMA=ON, on UCX): one-sided put/get with
 *           UCX to peers whose descriptor carries a UCX worker address (rdma peers); tcp peers
 *           are still reached over tcp, and an rdma engine serves tcp peers too. shm keeps
 *           priority for same-host peers (disable it, e.g. MC_DISABLE_SHM=1, to use UCX on one
 *           host). Devices: UCX's automatic choice, or config.device_names ("mlx5_0,mlx5_1";
 *           "mlx5_0" means port 1); a name that is not a device of this host fails
 *           mc_te_create() with MC_ERR_INVALID_PARAMS. With no RDMA device (or none among
 *           device_names) the engine logs one warning and runs over UCX's tcp/shared-memory
 *           transports — unless env MC_RDMA_REQUIRE_DEVICE=1, then mc_te_create() fails with
 *           MC_ERR_NOT_SUPPORTED. In builds without it, "rdma" fails with MC_ERR_NOT_SUPPORTED
 *           ("rdma transport not built").
 *
 * Time bounds: mc_te_submit() gives the requests it submits one deadline, from the call: the
 * transfer timeout (config.transfer_timeout_ms) plus 1 ns per byte of all those requests
 * (matches upstream's sync calls). Every slice of them (MC_SLICE_SIZE bytes, 4 MiB by default;
 * tcp and rdma) must end — connect, send, reply, one retry on a dead pooled connection — by that
 * deadline as a whole, not per socket call nor per slice; a slice still queued at the deadline
 * fails at once without touching the peer. Past it the request fails with MC_ERR_TRANSFER_FAIL.
 * So a call to a stalled peer fails about the deadline after it was made, however many requests
 * and slices it has; a healthy call too slow to finish by then (slower than about 1 GiB/s after
 * the timeout) fails as well. Slices queued for several peers share the engine's worker threads:
 * a peer keeps at most half of them busy while another peer's slices are among the 256 oldest
 * queued, so a stalled peer does not make the requests to a healthy one miss the deadline. On
 * the serving side a request must arrive and be answered within the transfer timeout of the
 * serving engine from when its header started to arrive; a write whose payload is not fully
 * received by then is never acknowledged. Either side then aborts the connection (RST, no
 * graceful close): bytes still queued are discarded by the kernel, never delivered later (e.g.
 * once a cut link comes back).
 *
 * Serving limits (tcp): at most config.max_connections (MC_TE_MAX_CONNECTIONS, default 4096)
 * connections are served; one more is accepted and closed at once, counted, with a WARNING at
 * most once a second. A connection idle for a second gives up its thread (it is watched by one
 * poller thread until bytes arrive), so idle pooled connections cost no thread; one idle for
 * config.idle_timeout_ms (MC_TE_IDLE_TIMEOUT seconds, default 600) is closed, and initiators
 * check a pooled connection before reusing it. mc_te_get_server_stats counts all of it.
 *
 * Epochs: a segment's owner may hold an epoch (mc_te_set_epoch(), from the store's master at
 * each mount) and a request may carry one (mc_transfer_req_t.epoch). A request whose epoch is
 * nonzero and differs from the owner's nonzero epoch is refused before any byte moves
 * (MC_ERR_INVALID_WRITE / MC_ERR_INVALID_READ; "stale epoch" in the log); a refused write's
 * bytes are discarded. tcp and the local path: checked by the owner; shm writes: checked by the
 * writer against the owner's epoch in the owner's fence page (below); shm reads and rdma: not
 * checked (an epoch change replaces the owner's rdma serving endpoints instead).
 *
 * Fences (a write reported failed never lands later): a write may carry the fencing token of
 * the allocation it fills (mc_transfer_req_t.fence_token; the store's master hands one out per
 * put). The owner can refuse tokens (mc_te_refuse_tokens) and learn when every write admitted
 * before is over (mc_te_fence_completed). Writes are admitted immediately before their bytes
 * move: by the owner (tcp, local), by a same-host writer in its slot of the owner's shared fence
 * page (shm: a writer stopped mid-copy keeps the fence incomplete until it finishes or dies).
 * rdma writes are applied by UCX, so a fence replaces the owner's serving UCX worker (what
 * peers had queued to it is dropped; they reconnect), and a serving progress thread that finds
 * its process was stalled for over a second replaces its worker before applying anything queued
 * meanwhile. A tcp request whose initiator already reset the connection (it gave up) is dropped
 * unread, whatever was queued. The store uses this to keep a revoked put's extent out of use
 * until its owner's fence completed (docs/ARCHITECTURE.md, "Integrity").
 *
 * Metadata (how peers find a segment's descriptor): "P2PHANDSHAKE" (ask the endpoint itself),
 * "http://host:port/metadata" (descriptors published with PUT, looked up with GET), or etcd:
 * "etcd://h1:2379[;h2:2379...]" (',' also separates endpoints) or a string without a scheme
 * ("h1:2379"), which upstream also reads as etcd. In etcd, the keys are upstream's
 * (mooncake/[<MC_METADATA_CLUSTER_ID>/]ram/<segment> and .../rpc_meta/<segment>), put under an
 * etcd lease of the engine (TTL: env MC_ETCD_METADATA_LEASE_TTL seconds, default 10) that a
 * thread keeps alive every TTL/3, re-granting it and publishing again if it was lost; the
 * descriptor of a process that died disappears after the TTL (differs: upstream puts them with
 * no lease). mc_te_destroy revokes the lease. A segment not found in the metadata service is
 * still asked directly, so HTTP, etcd and P2PHANDSHAKE peers interoperate.
 *
 * Errors: every function returns 0 or a negative store code (mooncake/errors.h):
 *   MC_ERR_INVALID_PARAMS    bad argument (NULL, zero length, unknown protocol or rdma device,
 *                            bad endpoint)
 *   MC_ERR_NOT_SUPPORTED     protocol "rdma" in a build without the rdma transport, or with
 *                            MC_RDMA_REQUIRE_DEVICE=1 on a host without an RDMA device
 *   MC_ERR_SEGMENT_NOT_FOUND the segment's descriptor cannot be found or its owner is unreachable
 *   MC_ERR_INVALID_WRITE / MC_ERR_INVALID_READ  the range is not inside the target's registered
 *                            memory, or (tcp, local) the request's epoch is stale (both checked
 *                            before any byte moves)
 *   MC_ERR_TRANSFER_FAIL     the peer failed, closed or stalled longer than the transfer timeout
 *   MC_ERR_RPC_TIMEOUT       mc_te_wait() timed out (requests keep running)
 *   MC_ERR_INTERNAL_ERROR    out of memory, cannot listen, ...
 *
 * Thread-safety: an engine may be used from many threads at once. A batch belongs to one thread
 * at a time.
 */
#ifndef MOONCAKE_TRANSFER_ENGINE_H
#define MOONCAKE_TRANSFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_transfer_engine mc_transfer_engine_t; /* handle */
typedef struct mc_batch mc_batch_t;                     /* a batch of requests */
typedef int64_t mc_segment_id_t;                        /* an opened segment */

#define MC_TE_DEFAULT_TIMEOUT_MS 30000
#define MC_TE_DEFAULT_MAX_CONNECTIONS 4096
#define MC_TE_DEFAULT_IDLE_TIMEOUT_MS (600 * 1000)

typedef struct mc_transfer_engine_config {
    /* "host:port" this engine serves on; host may be 0.0.0.0; port 0 = any free port. */
    const char *local_server_name;
    /* "P2PHANDSHAKE" (default when NULL), "http://host:port/metadata", or etcd:
     * "etcd://host:port[;host:port...]" or "host:port[;...]" (no scheme). With etcd, mc_te_create
     * fails with MC_ERR_ETCD_OPERATION_ERROR when no endpoint grants the engine's lease within 2 s
     * (retried: etcd may be electing a leader), and with MC_ERR_INVALID_PARAMS on a malformed
     * endpoint list. */
    const char *metadata_server;
    /* "tcp" (default when NULL) or "rdma". */
    const char *protocol;
    /* rdma devices, comma list (e.g. "mlx5_0,mlx5_1"; "mlx5_0" = port 1); NULL or "" =
     * automatic. Restricts UCX_NET_DEVICES; an unknown name is MC_ERR_INVALID_PARAMS. */
    const char *device_names;
    /* 1: never use shared memory to same-host peers (also MC_DISABLE_SHM=1). */
    int disable_shm;
    /* Bound on one slice of a request (initiator) and on serving one request (owner), ms, as a
     * whole (see "Time bounds"); 0 = MC_TRANSFER_TIMEOUT env (seconds) or 30000. */
    int transfer_timeout_ms;
    /* Initiator threads moving tcp/rdma slices (each owns one UCX worker under rdma); 0 = 4. */
    int worker_threads;
    /* The cluster secret (docs/security.md), from the first set: cluster_secret,
     * cluster_secret_file, env MOONCAKE_CLUSTER_SECRET_FILE, env MOONCAKE_CLUSTER_SECRET. With
     * one, every tcp connection and shm hand-over to this engine must prove it before any
     * request, this engine proves it to its peers and refuses peers that cannot, its writes to
     * the HTTP metadata service are signed, and its descriptor there carries no rdma address or
     * rkeys (peers fetch those over the authenticated handshake). None: upstream's behaviour.
     * An unreadable secret file fails mc_te_create with MC_ERR_INVALID_PARAMS. */
    const char *cluster_secret;
    const char *cluster_secret_file;
    /* tcp connections served at once; 0 = MC_TE_MAX_CONNECTIONS env, else 4096. */
    int max_connections;
    /* A served tcp connection idle this long is closed; 0 = MC_TE_IDLE_TIMEOUT env (seconds),
     * else 600 s; < 0 = never. */
    int idle_timeout_ms;
} mc_transfer_engine_config_t;

/* The tcp server's connection counters (mc_te_get_server_stats). */
typedef struct mc_te_server_stats {
    uint64_t connections;             /* open, served */
    uint64_t threads;                 /* connection threads (the others are parked) */
    uint64_t connections_refused;     /* over max_connections, since start */
    uint64_t connections_idle_closed; /* closed after the idle timeout, since start */
    uint64_t parks;                   /* times an idle connection gave up its thread */
    uint64_t decode_refused;          /* bodies over their decoding memory budget (process) */
    uint64_t max_connections;
    uint64_t idle_timeout_ms; /* 0 = never */
} mc_te_server_stats_t;

typedef enum mc_transfer_opcode {
    MC_TRANSFER_READ = 0,  /* target -> source */
    MC_TRANSFER_WRITE = 1, /* source -> target */
} mc_transfer_opcode_t;

typedef struct mc_transfer_req {
    mc_transfer_opcode_t opcode;
    void *source;              /* local memory: data for WRITE, destination for READ */
    mc_segment_id_t target_id; /* from mc_te_open_segment() */
    uint64_t target_offset;    /* address in the target's registered memory, as its owner sees it */
    size_t length;             /* bytes, > 0 */
    /* The target segment's mount epoch as the caller knows it; 0 = not checked. Last field, so
     * positional initializers of the fields above leave it 0. See "Epochs". */
    uint64_t epoch;
    /* 1: compute the CRC32C (Castagnoli) of the bytes moved where that is free, i.e. fused with
     * the copy in this process (local and shm transports: each chunk checksummed while still in
     * cache); the status then says has_crc32c = 1. Requests that cross tcp or rdma are not
     * checksummed here (has_crc32c = 0): the caller checksums the buffer itself. */
    int want_crc32c;
    /* WRITE: the fencing token of the allocation being written (the store's master hands one out
     * with every replica of a put: mc_replica_desc_t.fence_token); 0 = none. A write whose token
     * was refused (mc_te_refuse_tokens) by its target's owner, or by this engine, moves no byte
     * and fails with MC_ERR_INVALID_WRITE. See "Fences". */
    uint64_t fence_token;
} mc_transfer_req_t;

typedef enum mc_transfer_state {
    MC_TRANSFER_WAITING = 0,   /* submitted, not finished */
    MC_TRANSFER_COMPLETED = 1, /* every byte in place */
    MC_TRANSFER_FAILED = 2,    /* see error */
} mc_transfer_state_t;

typedef struct mc_transfer_status {
    mc_transfer_state_t state;
    int error;                /* 0, or the store code that failed the request */
    size_t transferred_bytes; /* bytes confirmed so far */
    /* When the request reached COMPLETED or FAILED: CLOCK_MONOTONIC in milliseconds (tv_sec *
     * 1000 + tv_nsec / 1000000, as clock_gettime gives it in this process); 0 while WAITING.
     * For judging each request of a batch against its own lease. */
    uint64_t finish_ms;
    /* With want_crc32c: 1 when crc32c holds the CRC32C of the request's bytes (COMPLETED,
     * local or shm), else 0. */
    int has_crc32c;
    uint32_t crc32c;
} mc_transfer_status_t;

/*
 * Creates an engine: starts listening on local_server_name, and publishes the (still empty)
 * segment to the metadata service. *out receives the engine; free it with mc_te_destroy().
 */
int mc_te_create(const mc_transfer_engine_config_t *config, mc_transfer_engine_t **out);

/* Stops serving, unpublishes the segment, closes connections, frees the engine. NULL is a no-op. */
void mc_te_destroy(mc_transfer_engine_t *te);

/* The segment name ("host:port") peers use to open this engine's segment. Owned by the engine. */
const char *mc_te_local_segment_name(const mc_transfer_engine_t *te);

/* The protocol in use: "tcp" or "rdma". */
const char *mc_te_protocol(const mc_transfer_engine_t *te);

/* Fills *out with the tcp server's counters. 0, or MC_ERR_INVALID_PARAMS for NULL. */
int mc_te_get_server_stats(mc_transfer_engine_t *te, mc_te_server_stats_t *out);

/*
 * Publishes this engine's segment descriptor to the HTTP metadata service (or etcd) again (a
 * no-op for P2PHANDSHAKE): for when the service lost it, e.g. the master embedding it restarted.
 * Returns 0 or MC_ERR_RPC_FAIL (HTTP service unreachable) / MC_ERR_ETCD_OPERATION_ERROR (no etcd
 * endpoint answered).
 */
int mc_te_republish(mc_transfer_engine_t *te);

/*
 * Sets this engine's segment epoch: the epoch the store's master gave the segment at its latest
 * mount; 0 = none (the default: every request accepted). From the moment it is stored, requests
 * the owner serves (tcp, local) with a nonzero epoch different from a nonzero `epoch` are refused
 * (see "Epochs"); the change raises a fence ("Fences"). Before returning it waits for transfers
 * admitted under the previous epoch that still move bytes to finish — at most the transfer
 * timeout plus one second. Safe to call from any thread while transfers run. Returns 0,
 * MC_ERR_INVALID_PARAMS when te is NULL, MC_ERR_TRANSFER_FAIL when a write admitted before is
 * still copying after that wait (a same-host writer stopped mid-copy: the epoch is set, but
 * memory must not be handed out anew yet; call again), MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS as
 * mc_te_refuse_tokens (nothing changed).
 */
int mc_te_set_epoch(mc_transfer_engine_t *te, uint64_t epoch);

/*
 * Fences (receiver side): from the moment it returns, every write carrying one of
 * tokens[0..n) is refused before any byte moves — by this engine when it owns the target
 * memory (tcp, local), by same-host writers that copy into its memory themselves (shm: they
 * check the owner's refused tokens in shared memory), and by this engine as an initiator (any
 * transport) — and a fence is raised: *gen (may be NULL) receives its generation. Once
 * mc_te_fence_completed(te) >= *gen, no write to this engine's memory that was admitted before
 * the call can still modify it (tcp and local writes admitted before it have finished; same-host
 * writers stopped mid-copy are waited for, however long; the rdma serving endpoints open
 * before the call were replaced, so nothing queued to them lands). n == 0 raises a fence alone.
 * Refused tokens are kept (at most MC_TE_MAX_REFUSED_TOKENS; beyond that every token at or
 * below the oldest dropped one is refused: tokens grow with time). Does not wait for the fence;
 * an rdma engine replaces its serving worker before returning (milliseconds, plus republishing
 * its descriptor to HTTP or etcd metadata). Thread-safe.
 * Returns 0, MC_ERR_INVALID_PARAMS (te NULL, tokens NULL with n > 0), MC_ERR_INTERNAL_ERROR
 * (out of memory: nothing refused; or the rdma worker could not be replaced or republished: the
 * tokens are refused and the old worker is gone all the same),
 * MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS (15 fences are still waiting for a writer admitted before
 * them — stopped mid-copy — nothing refused: call again later).
 */
#define MC_TE_MAX_REFUSED_TOKENS 65536
int mc_te_refuse_tokens(mc_transfer_engine_t *te, const uint64_t *tokens, size_t n, uint64_t *gen);
/* The highest fence generation that has completed (see mc_te_refuse_tokens); 0 for NULL. */
uint64_t mc_te_fence_completed(mc_transfer_engine_t *te);
/*
 * A write into this engine's own memory by code outside the engine (the store's promotion of a
 * value read from a file into its segment), under the same fence as the engine's own writes:
 * mc_te_admit_write before its first byte moves, mc_te_end_write(te, *pass) after its last.
 * While admitted, a fence raised meanwhile does not complete (however long the write takes), so
 * the memory is not handed to anything else under it. epoch 0 leaves the epoch unchecked; token
 * is the write's fencing token (0: none). Returns 0 with *pass set, MC_ERR_INVALID_PARAMS (te or
 * pass NULL), MC_ERR_INVALID_WRITE (the token is refused or the epoch is not this engine's: no
 * byte may move). Thread-safe.
 */
int mc_te_admit_write(mc_transfer_engine_t *te, uint64_t epoch, uint64_t token, uint64_t *pass);
void mc_te_end_write(mc_transfer_engine_t *te, uint64_t pass);

/*
 * Allocates `length` bytes of shared memory (a memfd mapped MAP_SHARED|MAP_NORESERVE: pages are
 * committed only when touched) and registers it in the segment. Same-host peers reach it with shm.
 * Free with mc_te_free_segment_memory().
 */
int mc_te_alloc_segment_memory(mc_transfer_engine_t *te, size_t length, void **addr);
int mc_te_free_segment_memory(mc_transfer_engine_t *te, void *addr);

/*
 * Registers caller-owned memory [addr, addr+length) in the segment (peers reach it over tcp/rdma).
 * The caller keeps ownership and must unregister before freeing. Overlapping ranges, and ranges
 * with pages not mapped in this process, are refused with MC_ERR_INVALID_PARAMS.
 */
int mc_te_register_memory(mc_transfer_engine_t *te, void *addr, size_t length);
int mc_te_unregister_memory(mc_transfer_engine_t *te, void *addr);

/*
 * Resolves a segment by name ("host:port", or this engine's own name) to an id usable in
 * requests. Idempotent: the same name gives the same id. MC_ERR_SEGMENT_NOT_FOUND when the
 * descriptor cannot be found.
 */
int mc_te_open_segment(mc_transfer_engine_t *te, const char *segment_name, mc_segment_id_t *out);

/* A batch able to hold `capacity` requests. Free with mc_te_batch_free(). */
int mc_te_batch_create(mc_transfer_engine_t *te, size_t capacity, mc_batch_t **out);

/*
 * Appends and starts `n` requests. A request whose range is not registered on the target is
 * marked FAILED (MC_ERR_INVALID_WRITE / MC_ERR_INVALID_READ) before any byte moves; the others
 * run. Returns 0, or MC_ERR_INVALID_PARAMS when the batch would exceed its capacity or a request
 * is malformed (then nothing was submitted).
 */
int mc_te_submit(mc_batch_t *batch, const mc_transfer_req_t *reqs, size_t n);

/* Status of request `index` (submission order) of the batch; non-blocking. */
int mc_te_get_status(mc_batch_t *batch, size_t index, mc_transfer_status_t *status);

/*
 * Waits until every submitted request finished or timeout_ms passed (< 0 = no limit).
 * Returns 0 when all completed, the first failed request's error, or MC_ERR_RPC_TIMEOUT.
 */
int mc_te_wait(mc_batch_t *batch, int timeout_ms);

/* Waits for outstanding requests, then frees the batch. NULL is a no-op. */
void mc_te_batch_free(mc_batch_t *batch);

/* Convenience: one batch, submit, wait, free. Returns as mc_te_wait(). */
int mc_te_transfer_sync(mc_transfer_engine_t *te, const mc_transfer_req_t *reqs, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_TRANSFER_ENGINE_H */
