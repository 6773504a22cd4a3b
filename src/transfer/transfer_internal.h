/*
 * transfer_internal.h — the Transfer Engine's internal structures, shared by its files:
 *
 *   segment_registry.c   this process's registered memory (the local segment) and range lookups
 *   write_fence.c        the write fence: refused tokens, epochs, admissions, fence generations
 *   segment_metadata.c   segment descriptors: build, encode (protobuf / JSON), publish, look up
 *   peer.c               what the transports share about an opened segment: descriptor refresh,
 *                        the failure-log rate limit
 *   local_transport.c    the engine's own segment: epoch check, fence admission, memcpy
 *   tcp_transport.c      the peer protocol server (handshake, read, write) and its client side
 *   shm_transport.c      memfd-backed segment memory and the same-host mapping of peers' memory
 *   rdma_transport.c     the rdma transport on UCX (built with USE_RDMA=ON, MC_HAVE_RDMA defined)
 *   transports.c         the table of transports (mc_transport_ops_t), in dispatch and start order
 *   transfer_engine.c    the engine, opened segments (peers), batches, worker threads
 *   etcd_metadata.c      segment descriptors in etcd (etcd:// metadata) under a kept-alive lease
 *
 * Layers (no file calls a file above it by name; scripts/lint.sh fails on a circle):
 *   transfer_engine.c -> transports.c -> {local,shm,rdma,tcp}_transport.c -> peer.c ->
 *   segment_metadata.c -> etcd/http metadata clients; segment_registry.c and write_fence.c are
 *   below every file that uses them. One sideways call: rdma asks an owner for its fence rules
 *   over tcp (mc_tcp_fence_rules).
 * What a lower file needs from a transport (the handshake, the rdma address in a descriptor, a
 * transport's part of a fence) it reaches through te->transports (mc_transport_ops_t below).
 *
 * Invariants:
 *  - A local region is never unmapped or unregistered while a transfer touches it: transfers hold
 *    the registry's read lock for the duration of the copy; (un)registration takes the write lock.
 *  - A remote range is checked against the peer's descriptor before any byte moves; a failed check
 *    refreshes the descriptor once (the peer may have registered more memory) and then fails.
 *  - A pooled tcp connection is idle and in a known protocol state; a connection that failed in
 *    any way is aborted (RST, mc_net_abort), never returned to the pool nor closed gracefully.
 *  - A transfer whose epoch is nonzero and differs from the engine's nonzero epoch moves no byte
 *    on the paths the owner serves (tcp, local), nor as an shm write (the writer checks the
 *    owner's fence page); shm reads and rdma are not checked.
 *  - Every write into this engine's memory by tcp, local or a same-host writer is admitted under
 *    the fence page (write_fence.c) before its first byte and released after its last; a fence
 *    is complete only when no admission older than it remains.
 *  - A tcp request whose connection is no longer established (its initiator gave up and reset
 *    it) is not served, whatever is queued.
 *  - Transport choice per request, in the order of te->transports (the first whose answer is not
 *    MC_TRANSPORT_DECLINED takes it): the engine's own segment -> local memcpy; a same-host
 *    peer's shm region (unless shm is disabled) -> shm; a peer whose descriptor carries an
 *    rdma_address, when this engine runs protocol rdma -> rdma; anything else -> tcp. So tcp and
 *    rdma engines interoperate (an rdma engine keeps its tcp server), and shm wins on one host.
 *  - Every region of an rdma engine is mapped with UCX (memh, packed rkey) before it enters the
 *    registry and unmapped only after it left it.
 */
#ifndef MC_TRANSFER_INTERNAL_H
#define MC_TRANSFER_INTERNAL_H

#include "auth.h"
#include "mooncake/transfer_engine.h"
#include "net.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Opcodes of the peer protocol (frame.h header, protobuf bodies from transfer.proto). */
enum mc_te_opcode {
    MC_TE_OP_HANDSHAKE = 1, /* body HandshakeRequest -> reply HANDSHAKE_REPLY SegmentDesc */
    MC_TE_OP_HANDSHAKE_REPLY = 2,
    MC_TE_OP_WRITE = 3,  /* body TransferHeader, then `length` raw bytes -> STATUS */
    MC_TE_OP_READ = 4,   /* body TransferHeader -> STATUS, then raw bytes when code == 0 */
    MC_TE_OP_STATUS = 5, /* body TransferStatus */
    /* empty body -> reply FENCE_RULES_REPLY FenceRules (the owner's write-fence rules) */
    MC_TE_OP_FENCE_RULES = 6,
    MC_TE_OP_FENCE_RULES_REPLY = 7,
};

#define MC_TE_MAX_REGIONS 4096
/* How many of the oldest queued slices a worker looks through for a peer under its share. */
#define MC_TE_SCHED_WINDOW 256
/* Bound on a UCX worker address or packed rkey in a descriptor (bytes, before base64). */
#define MC_TE_MAX_RDMA_BLOB 65536
#define MC_TE_SHM_SOCKET_MAX 108

/* ---- local segment (segment_registry.c) -------------------------------------------------- */

typedef struct mc_local_region {
    uint64_t addr;
    uint64_t length;
    int32_t shm_index; /* >= 0: backed by memfd `memfd`, shareable with same-host peers */
    int memfd;         /* -1 for caller-owned memory */
    int owned;         /* 1: mapped by mc_te_alloc_segment_memory, unmapped on free */
    void *rdma_memh;   /* rdma engines: the ucp_mem_h of the region, else NULL */
    void *rdma_rkey;   /* rdma engines: packed rkey (ucp_rkey_pack), else NULL */
    size_t rdma_rkey_len;
} mc_local_region_t;

typedef struct mc_segment_registry {
    pthread_rwlock_t lock;
    mc_local_region_t *regions; /* sorted by addr, non-overlapping */
    size_t count, capacity;
    uint64_t version;
    int32_t next_shm_index;
} mc_segment_registry_t;

void mc_registry_init(mc_segment_registry_t *r);
void mc_registry_destroy(mc_segment_registry_t *r); /* unmaps owned regions, closes memfds */
int mc_registry_add(mc_segment_registry_t *r, const mc_local_region_t *region);
/* Removes the region starting at addr; *removed receives it. MC_ERR_INVALID_PARAMS if absent. */
int mc_registry_remove(mc_segment_registry_t *r, uint64_t addr, mc_local_region_t *removed);
/*
 * With the read lock held by the caller: the region containing [addr, addr+len), or NULL.
 */
const mc_local_region_t *mc_registry_find_locked(const mc_segment_registry_t *r, uint64_t addr,
                                                 uint64_t len);
/* With the read lock held: the region with this shm index, or NULL. */
const mc_local_region_t *mc_registry_find_shm_locked(const mc_segment_registry_t *r,
                                                     int32_t shm_index);

/* ---- descriptors (segment_metadata.c) ---------------------------------------------------- */

typedef struct mc_remote_region {
    uint64_t addr;
    uint64_t length;
    int32_t shm_index;
    uint32_t rkey_len; /* 0: no rkey (tcp peer, or a region the peer could not map) */
    uint8_t *rkey;     /* packed UCX rkey, malloc'd, owned by the descriptor */
} mc_remote_region_t;

typedef struct mc_segment_desc {
    char name[MC_ENDPOINT_MAX];
    char protocol[16];
    char host_id[MC_HOST_MAX];
    char shm_socket[MC_TE_SHM_SOCKET_MAX];
    uint64_t version;
    mc_remote_region_t *regions;
    size_t count;
    uint8_t *rdma_address; /* UCX worker address, malloc'd; NULL/0 for a tcp peer */
    size_t rdma_address_len;
} mc_segment_desc_t;

/* Frees what the descriptor owns (regions, rkeys, address); the struct itself is the caller's. */
void mc_desc_free(mc_segment_desc_t *d);
/* Sets d's rdma_address to a copy of [addr, +len) (len 0: left empty). 0,
 * MC_ERR_DESERIALIZE_FAIL over MC_TE_MAX_RDMA_BLOB bytes, or MC_ERR_INTERNAL_ERROR. */
int mc_desc_set_address(mc_segment_desc_t *d, const void *addr, size_t len);
/* The descriptor of this engine's own segment (takes the registry read lock): its name, host,
 * regions and their rkeys, and what each transport's describe slot adds. */
int mc_desc_build_local(mc_transfer_engine_t *te, mc_segment_desc_t *out);
/* protobuf (handshake). *buf is malloc'd. */
int mc_desc_pack(const mc_segment_desc_t *d, uint8_t **buf, size_t *len);
int mc_desc_unpack(const uint8_t *buf, size_t len, mc_segment_desc_t *out);
/* JSON (HTTP metadata). *json is malloc'd. */
int mc_desc_to_json(const mc_segment_desc_t *d, char **json);
int mc_desc_from_json(const char *json, size_t len, mc_segment_desc_t *out);
/* The region of `d` containing [addr, addr+len), or NULL. */
const mc_remote_region_t *mc_desc_find(const mc_segment_desc_t *d, uint64_t addr, uint64_t len);
/* HTTP metadata writes signed with the cluster secret when a != NULL (http_metadata_client.c). */
int mc_http_metadata_put_auth(const mc_auth_t *a, const char *url, const char *key,
                              const char *value, size_t len);
int mc_http_metadata_del_auth(const mc_auth_t *a, const char *url, const char *key);
/*
 * etcd metadata (etcd_metadata.c). mc_etcd_md_is_etcd: 1 when a metadata string means etcd
 * ("etcd://h:p[;h:p]" or no scheme, as upstream). open: connects, grants the engine's lease and
 * starts its keep-alive thread (MC_ERR_INVALID_PARAMS on a bad endpoint list or cluster id,
 * MC_ERR_ETCD_OPERATION_ERROR when etcd does not answer for 2 s). put/del: the key
 * (segment_metadata.c's "mooncake/..." form; MC_METADATA_CLUSTER_ID is inserted here) under the
 * lease, remembered to be re-published after the lease is lost (a failing put is retried for 2 s).
 * get: *value malloc'd (NUL-terminated), len bytes; MC_ERR_ETCD_KEY_NOT_EXIST when absent. close:
 * stops the thread and revokes the lease (its keys go). Thread-safe.
 */
typedef struct mc_etcd_md mc_etcd_md_t;
int mc_etcd_md_is_etcd(const char *metadata);
int mc_etcd_md_open(const char *metadata, mc_etcd_md_t **out);
int mc_etcd_md_put(mc_etcd_md_t *m, const char *key, const char *value, size_t len);
int mc_etcd_md_get(mc_etcd_md_t *m, const char *key, char **value, size_t *len);
int mc_etcd_md_del(mc_etcd_md_t *m, const char *key);
void mc_etcd_md_close(mc_etcd_md_t *m);
/* Publishes the local descriptor to the metadata service: HTTP or etcd (no-op for
 * P2PHANDSHAKE). */
int mc_metadata_publish(mc_transfer_engine_t *te);
void mc_metadata_unpublish(mc_transfer_engine_t *te);
/* Finds a peer's descriptor: HTTP metadata first (when configured), else a direct handshake
 * (the first transport with a handshake slot). */
int mc_metadata_lookup(mc_transfer_engine_t *te, const char *name, mc_segment_desc_t *out,
                       uint64_t deadline_ms);

/* ---- the write fence (write_fence.c) ---------------------------------------------------- */

#define MC_FENCE_SLOTS 256 /* same-host writer processes per owner */
/* Admission counters per writer (this process, or one same-host peer), indexed by generation
 * modulo this: at most this many fences minus one can wait at once. */
#define MC_FENCE_RING 16

/*
 * The owner's rules for writes into its memory, shared with same-host writers (a memfd mapped
 * MAP_SHARED by the owner and by every shm peer). The owner writes everything but the slots; a
 * peer writes only its own slot. tokens[0..count) is sorted ascending and read under the
 * seqlock `seq` (odd while the owner rewrites it).
 */
typedef struct mc_fence_page {
    uint64_t magic;
    _Atomic uint64_t gen;   /* bumped by every change of rules; starts at 1 */
    _Atomic uint64_t epoch; /* the owner's mount epoch (0 = none), as te->epoch */
    _Atomic uint64_t floor; /* every token <= floor is refused (set after an overflow) */
    _Atomic uint64_t seq;
    _Atomic uint32_t count;
    uint32_t pad;
    struct { /* a same-host peer's writes in flight, by the generation they were admitted in */
        _Atomic uint64_t count[MC_FENCE_RING];
    } slots[MC_FENCE_SLOTS];
    _Atomic uint64_t tokens[MC_TE_MAX_REFUSED_TOKENS];
} mc_fence_page_t;

size_t mc_fence_page_size(void);
int mc_fence_init(mc_transfer_engine_t *te);
void mc_fence_fini(mc_transfer_engine_t *te);
/* 0 when a write carrying (epoch, token) may move under page f's rules, else
 * MC_ERR_INVALID_WRITE with the reason in why. */
int mc_fence_check(const mc_fence_page_t *f, uint64_t epoch, uint64_t token, char *why,
                   size_t why_len);
int mc_fence_token_refused(const mc_fence_page_t *f, uint64_t token);
/* A copy of page f's rules (seqlock read): its epoch, floor and refused tokens (sorted; *tokens
 * malloc'd, NULL when *n is 0; the caller frees). 0 or MC_ERR_INTERNAL_ERROR. */
typedef struct mc_fence_rules {
    uint64_t epoch, floor;
    uint64_t *tokens; /* sorted */
    size_t n;
} mc_fence_rules_t;
int mc_fence_rules_copy(const mc_fence_page_t *f, mc_fence_rules_t *out);
void mc_fence_rules_free(mc_fence_rules_t *r);
/* As mc_fence_check, against a copy of the rules. */
int mc_fence_rules_check(const mc_fence_rules_t *r, uint64_t epoch, uint64_t token, char *why,
                         size_t why_len);
/*
 * Admits a write under page f's rules, counted in `ring` (MC_FENCE_RING counters: this process's
 * te->fence_inflight for writes into its own memory — tcp server, local path — or a same-host
 * peer's slot in the owner's page): call before the first byte moves, and mc_fence_release
 * after the last. 0 with *pass set, or MC_ERR_INVALID_WRITE (not counted) with why.
 */
int mc_fence_admit(mc_fence_page_t *f, _Atomic uint64_t *ring, uint64_t epoch, uint64_t token,
                   uint64_t *pass, char *why, size_t why_len);
void mc_fence_release(_Atomic uint64_t *ring, uint64_t pass);
/* Owner: new rules (tokens; the epoch too when set_epoch) and a fence (every transport's fence
 * slot; the rdma serving endpoints replaced too with fence_rdma); *gen its generation.
 * MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS when MC_FENCE_RING fences still wait (nothing changed),
 * MC_ERR_INTERNAL_ERROR out of memory. */
int mc_fence_raise(mc_transfer_engine_t *te, const uint64_t *tokens, size_t n, int set_epoch,
                   uint64_t epoch, int fence_rdma, uint64_t *gen);
/* Waits until the fence `gen` completed: 0, or MC_ERR_TRANSFER_FAIL after timeout_ms. */
int mc_fence_wait(mc_transfer_engine_t *te, uint64_t gen, int timeout_ms);
/* A slot for a same-host peer (-1: none left, or no shareable page); freed on its hang-up. */
int32_t mc_fence_slot_claim(mc_transfer_engine_t *te);
void mc_fence_slot_free(mc_transfer_engine_t *te, int32_t slot);

/* ---- peers (opened segments) ------------------------------------------------------------- */

typedef struct mc_rdma mc_rdma_t;           /* engine-wide UCX state (rdma_transport.c) */
typedef struct mc_rdma_conn mc_rdma_conn_t; /* a worker thread's endpoint to one peer */

typedef struct mc_peer {
    char name[MC_ENDPOINT_MAX];
    char host[MC_HOST_MAX];
    int port;
    int is_self;
    atomic_uint_fast64_t last_error_log_ms; /* rate limit: one failure line per second per peer */
    unsigned busy_workers; /* engine workers moving a slice of this peer now; under queue_lock */

    pthread_mutex_t lock; /* guards everything below up to shm_rw */
    mc_segment_desc_t desc;
    uint64_t desc_gen; /* bumps whenever desc is replaced (cached rkeys follow it) */
    int *idle_fds;     /* pooled tcp connections */
    size_t idle_count, idle_capacity;
    /*
     * shm: connection to the owner's unix socket (liveness + fd handover) and the mappings of its
     * memfds. Guarded by shm_rw, not by lock: copies hold it for reading, so a mapping is never
     * unmapped under a copy; connecting, mapping and resetting take it for writing.
     */
    pthread_rwlock_t shm_rw;
    int shm_state; /* 0 untried, 1 usable, -1 unusable (fall back to tcp) */
    int shm_sock;
    mc_fence_page_t *shm_fence; /* the owner's fence page, mapped; NULL until connected */
    int32_t shm_fence_slot;     /* this process's slot in it */
    void **shm_maps;            /* indexed by shm_index */
    uint64_t *shm_lens;
    size_t shm_map_count;
    /*
     * rdma: one connection (UCX endpoint + unpacked rkeys) per engine worker thread; slot i is
     * touched only by worker thread i, then by mc_te_destroy after the workers were joined.
     */
    mc_rdma_conn_t *rdma_conns;
} mc_peer_t;

/* ---- what transports share about a peer (peer.c) ----------------------------------------- */

/* 1 when a failure about this peer may be logged now (at most one line per second). Any
 * thread. */
int mc_peer_should_log(mc_peer_t *peer);
/* Re-reads a peer's descriptor (mc_metadata_lookup) and replaces peer->desc under peer->lock,
 * bumping desc_gen; deadline_ms (0 = none) bounds a handshake it needs. 0 for the engine's own
 * segment. Any thread, peer->lock not held. */
int mc_peer_refresh(mc_transfer_engine_t *te, mc_peer_t *peer, uint64_t deadline_ms);

/* ---- transports (mc_transport_ops_t) ------------------------------------------------------ */

/*
 * A transport's answer to a request it does not take (not its peer, not its kind of range, not
 * running in this engine): the engine asks the next transport in te->transports. Every other
 * answer is the transport's own: 0 (done) or a negative error code (failed: no other transport
 * is tried).
 */
#define MC_TRANSPORT_DECLINED 1

/* What start gets besides the configured engine (protocol, worker_count, timeouts are set). */
typedef struct mc_transport_start_args {
    const mc_transfer_engine_config_t *config;
    const char *bind_host; /* local_server_name's host ("0.0.0.0" when none): where to serve */
    int port;              /* local_server_name's port; 0 = any */
} mc_transport_start_args_t;

/*
 * One transport: what the engine, the metadata and the fence need of it, as function pointers
 * (Redis's ConnectionType, SQLite's sqlite3_io_methods). Callers walk the table and skip a NULL
 * slot; no file calls a transport by name. The tables are constant and live as long as the
 * program. `te` is always the engine the call is about; a transport keeps its state in it.
 */
typedef struct mc_transport_ops {
    const char *name; /* "local", "shm", "rdma", "tcp": log lines */
    /*
     * Create: brings the transport up for this engine (a transport the engine's configuration
     * does not use returns 0 and stays down). Walked in mc_transport_start_order; the engine's
     * name is not set yet. 0 or a negative error: the engine is then destroyed (every stop slot
     * is called, so stop must accept a transport that never started).
     */
    int (*start)(mc_transfer_engine_t *te, const mc_transport_start_args_t *args);
    /* Destroy: stops and frees what start made; after the worker threads were joined and every
     * peer was closed (peer_close). Walked in the reverse of mc_transport_start_order. */
    void (*stop)(mc_transfer_engine_t *te);
    /*
     * Segment memory (mc_te_alloc_segment_memory): maps `length` bytes a same-host peer can map
     * too and fills *out (addr, length, shm_index, memfd, owned = 1) without registering it. The
     * first transport with the slot allocates. 0 or a negative error (nothing left mapped).
     */
    int (*alloc)(mc_transfer_engine_t *te, size_t length, mc_local_region_t *out);
    /* A region about to enter the registry (registration, segment memory), in table order:
     * makes it reachable by this transport (fills rdma_memh / rdma_rkey). 0 or a negative
     * error: the registration fails and the transports that mapped it unmap it. Application
     * threads; not with the registry lock held. */
    int (*map)(mc_transfer_engine_t *te, mc_local_region_t *g);
    /* A region that left the registry (its memory still mapped), in table order: the transport
     * stops reaching it (shm: same-host peers are told to drop their mappings; rdma: unmaps).
     * Also undoes this transport's map when a registration fails. */
    void (*unmap)(mc_transfer_engine_t *te, mc_local_region_t *g);
    /* What this transport adds to this engine's descriptor (mc_desc_build_local; the rdma
     * worker address). Any thread. 0 or a negative error; d is freed by the caller either way. */
    int (*describe)(mc_transfer_engine_t *te, mc_segment_desc_t *d);
    /* Asks the engine at host:port for its descriptor directly, by deadline_ms (mc_now_ms; 0 =
     * none). The metadata lookup uses the first transport with the slot. 0 (*out filled, the
     * caller frees it) or a negative error. Any thread. */
    int (*handshake)(mc_transfer_engine_t *te, const char *host, int port, mc_segment_desc_t *out,
                     uint64_t deadline_ms);
    /* A remote segment was opened (before any transfer to it): per-peer state. 0 or a negative
     * error (the open fails; peer_close is called for the transports opened before). */
    int (*peer_open)(mc_transfer_engine_t *te, mc_peer_t *peer);
    /* Frees the per-peer state: at destroy after the worker threads were joined, or for a peer
     * that lost an open race and was never used. */
    void (*peer_close)(mc_transfer_engine_t *te, mc_peer_t *peer);
    /*
     * In the caller's thread of mc_te_submit, one whole request (req->target_id is peer): moves
     * it now, or declines. With crc not NULL, *crc receives the CRC32C of the bytes moved when 0
     * is returned. A remote request reaches it only after its range was found in the peer's
     * descriptor and its token is not refused. 0, a negative error or MC_TRANSPORT_DECLINED.
     * Called with peer->lock not held. A request every submit slot declines is cut into slices
     * for the workers (transfer).
     */
    int (*submit)(mc_transfer_engine_t *te, mc_peer_t *peer, const mc_transfer_req_t *req,
                  uint32_t *crc);
    /*
     * In engine worker thread `worker` (0 .. worker_count-1: state a transport keeps per worker
     * is touched by that thread alone), one slice: a read or write of [remote, remote+len) of
     * the peer, carrying the request's mount epoch (0 = unchecked) and fencing token (0 = none),
     * all of it done by deadline_ms (mc_now_ms clock, the request's). 0, a negative error or
     * MC_TRANSPORT_DECLINED (the next transport's slot is asked; tcp, the last, takes all).
     */
    int (*transfer)(mc_transfer_engine_t *te, size_t worker, mc_peer_t *peer, int opcode,
                    void *local, uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token,
                    uint64_t deadline_ms);
    /*
     * The transport's part of a receiver-side fence (mc_fence_raise, after the new rules are
     * published): tokens_refused when the fence refused tokens (writes of them being received
     * now are cut short), replace_endpoints when serving endpoints that apply writes without
     * the fence page must be replaced (rdma). Walked from the last transport to the first (tcp's
     * cut is immediate; it does not wait for rdma's replacement and republish). 0 or a negative
     * error (logged by the caller; the other transports still fence).
     */
    int (*fence)(mc_transfer_engine_t *te, int tokens_refused, int replace_endpoints);
    /* Adds the transport's serving counters to *out (zeroed by the caller). Any thread. */
    void (*get_stats)(mc_transfer_engine_t *te, mc_te_server_stats_t *out);
} mc_transport_ops_t;

/* transports.c: NULL-terminated. Dispatch order (what te->transports points at): local, shm,
 * rdma (built with USE_RDMA), tcp. Start order: rdma, tcp, shm — tcp serves handshakes that
 * describe rdma's worker address, and shm names its socket after tcp's port. */
extern const mc_transport_ops_t *const mc_transports[];
extern const mc_transport_ops_t *const mc_transport_start_order[];
extern const mc_transport_ops_t mc_local_transport, mc_shm_transport, mc_tcp_transport;
#ifdef MC_HAVE_RDMA
extern const mc_transport_ops_t mc_rdma_transport;
#endif

/* ---- the engine (transfer_engine.c) ------------------------------------------------------ */

typedef struct mc_slice {
    mc_batch_t *batch;
    mc_peer_t *peer; /* the request's target (peers live as long as the engine) */
    uint32_t index;  /* request index in the batch */
    uint64_t offset; /* within the request */
    uint64_t length;
} mc_slice_t;

struct mc_transfer_engine {
    const mc_transport_ops_t *const *transports; /* mc_transports: dispatch order, NULL-ended */
    char name[MC_ENDPOINT_MAX];                  /* advertised "host:port" */
    char host_id[MC_HOST_MAX];
    char protocol[16];
    char metadata_url[1024]; /* empty for P2PHANDSHAKE; the etcd endpoint list for etcd */
    mc_etcd_md_t *etcd_md;   /* non-NULL for etcd metadata */
    int disable_shm;
    int timeout_ms;
    /*
     * The epoch the store's master gave this segment at its latest mount (0 = none). Read under
     * the registry read lock by whoever serves a transfer (tcp server, local path); changed by
     * mc_te_set_epoch, which then waits for the write lock, so that no transfer admitted under
     * the previous epoch still moves bytes when it returns.
     */
    _Atomic uint64_t epoch;
    /* The write fence (write_fence.c): the page of rules, in-process admissions by generation,
     * the highest completed generation and the slots handed to same-host peers. */
    mc_fence_page_t *fence;
    int fence_memfd;
    pthread_mutex_t fence_lock; /* raising fences, fence_done, fence_slot_used */
    _Atomic uint64_t fence_inflight[MC_FENCE_RING];
    uint64_t fence_done;
    unsigned char fence_slot_used[MC_FENCE_SLOTS];
    uint64_t slice_bytes;
    mc_auth_t *auth; /* the cluster secret (wire/auth.h); NULL = none */
    mc_rdma_t *rdma; /* NULL unless protocol "rdma" */

    mc_segment_registry_t registry;

    /* tcp server (tcp_transport.c). A served connection has a thread while a request may come
     * soon; idle longer than MC_TCP_PARK_AFTER_MS it is parked in park_epfd without a thread,
     * and the park thread gives it one again when bytes arrive (or closes it after
     * idle_timeout_ms). */
    int listen_fd;
    int listen_port;
    pthread_t accept_thread;
    pthread_mutex_t conn_lock; /* guards conns, conn_count, conn_threads */
    struct mc_tcp_conn *conns; /* every served connection, threaded or parked */
    size_t conn_count, conn_capacity;
    size_t conn_threads;               /* live connection threads */
    atomic_uint_fast64_t auth_refused; /* tcp and shm connections refused by the secret check */
    pthread_cond_t conn_cond;
    atomic_int stopping;
    unsigned max_connections; /* more are accepted and closed */
    int idle_timeout_ms;      /* a parked connection idle this long is closed; <= 0 never */
    int park_epfd;            /* epoll of the parked connections (-1 before start) */
    int park_wake;            /* eventfd: stops the park thread */
    pthread_t park_thread;
    int park_started;
    atomic_uint_fast64_t conns_refused, conns_idle_closed, conns_parked_total;
    /* Writes being received now (fd, fencing token), so that a fence refusing a token cuts a
     * receive of it short instead of waiting for its deadline. Under writing_lock. */
    pthread_mutex_t writing_lock;
    struct mc_tcp_writing {
        int fd;
        uint64_t token;
    } * writing;
    size_t writing_count, writing_cap;
    atomic_uint_fast64_t last_refuse_log_ms;

    /* shm server */
    int shm_listen_fd;
    char shm_socket[MC_TE_SHM_SOCKET_MAX];
    pthread_t shm_thread;
    int shm_wake[2];          /* pipe: wakes the shm server thread to stop */
    pthread_mutex_t shm_lock; /* guards shm_conns */
    int *shm_conns;           /* connected same-host peers */
    int32_t *shm_slots;       /* their fence slots (-1: none yet), parallel to shm_conns */
    size_t shm_conn_count, shm_conn_capacity;

    /* peers */
    pthread_mutex_t peers_lock;
    mc_peer_t **peers;
    size_t peer_count, peer_capacity;

    /*
     * Initiator workers. A worker takes the first of the MC_TE_SCHED_WINDOW oldest queued slices
     * whose peer keeps fewer than half the workers busy, else the oldest: a stalled peer holds at
     * most half the workers while other peers' slices wait (so they finish by their deadline),
     * and a lone peer gets them all.
     */
    pthread_mutex_t queue_lock;
    pthread_cond_t queue_cond;
    mc_slice_t *queue;
    size_t queue_head, queue_count, queue_capacity;
    pthread_t *workers;
    size_t worker_count;
};

typedef struct mc_req_state {
    mc_transfer_req_t req;
    atomic_int state;
    atomic_int error;
    atomic_size_t done_bytes;
    atomic_uint slices_left;
    _Atomic uint64_t finish_ms; /* mc_now_ms() when it reached COMPLETED or FAILED, else 0 */
    /* mc_now_ms() by which every slice must be done (set at submit, see mc_te_deadline_ms):
     * a slice not started by then fails at once, one in flight gets only what is left. */
    uint64_t deadline_ms;
    int has_crc32c; /* set before the state is published (local / shm copies) */
    uint32_t crc32c;
} mc_req_state_t;

struct mc_batch {
    mc_transfer_engine_t *te;
    mc_req_state_t *reqs;
    size_t capacity, count;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t outstanding; /* requests not finished, under lock */
};

mc_peer_t *mc_te_peer(mc_transfer_engine_t *te, mc_segment_id_t id);
/*
 * The deadline (mc_now_ms clock) of requests submitted at `now` in one call moving `bytes` in
 * all: now + the transfer timeout + 1 ns per byte (rounded up to a millisecond). Matches
 * upstream's sync calls (transfer_engine_py.cpp: timeout + total length in ns).
 */
uint64_t mc_te_deadline_ms(const mc_transfer_engine_t *te, uint64_t now, uint64_t bytes);

/* ---- tcp (tcp_transport.c; reached through mc_tcp_transport) --------------------------------- */

int mc_tcp_server_start(mc_transfer_engine_t *te, const char *bind_host, int port);
void mc_tcp_server_stop(mc_transfer_engine_t *te);
void mc_tcp_server_get_stats(mc_transfer_engine_t *te, mc_te_server_stats_t *out);
/*
 * One read or write of [remote, remote+len) of the peer, through a pooled connection, carrying
 * `epoch` (0 = unchecked) for the owner to check. The whole of it — connect, exchange, the one
 * retry — ends by deadline_ms (mc_now_ms clock: the request's deadline); MC_ERR_TRANSFER_FAIL
 * at once, without connecting, when that has passed.
 */
int mc_tcp_transfer(mc_transfer_engine_t *te, mc_peer_t *peer, int opcode, void *local,
                    uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token,
                    uint64_t deadline_ms);
/* Direct handshake with host:port (fresh connection, pooled afterwards when peer != NULL). */
/* deadline_ms (mc_now_ms clock; 0 = none): the handshake, connect included, ends by then. */
int mc_tcp_handshake(mc_transfer_engine_t *te, const char *host, int port, mc_segment_desc_t *out,
                     uint64_t deadline_ms);
/* The owner's write-fence rules as they stand, asked of host:port directly (FENCE_RULES, a
 * fresh connection), by deadline_ms as mc_tcp_handshake. 0 (*out filled; free with
 * mc_fence_rules_free) or an error. */
int mc_tcp_fence_rules(mc_transfer_engine_t *te, const char *host, int port, mc_fence_rules_t *out,
                       uint64_t deadline_ms);
void mc_tcp_pool_close(mc_peer_t *peer);
/* The tcp part of a fence: receives of writes whose token is refused now are cut short (their
 * connections shut down; the write fails, nothing more of it lands) rather than waited for. */
void mc_tcp_fence(mc_transfer_engine_t *te);

/* ---- shm (shm_transport.c; reached through mc_shm_transport) --------------------------------- */

/* The alloc slot: a memfd mapping of `length` bytes (hugetlbfs pages when asked for) with the
 * next shm index, not registered: the engine maps it with the other transports and adds it. */
int mc_shm_alloc(mc_transfer_engine_t *te, size_t length, mc_local_region_t *out);
int mc_shm_server_start(mc_transfer_engine_t *te);
void mc_shm_server_stop(mc_transfer_engine_t *te);
/*
 * Copies between local memory and a same-host peer's shm region; returns MC_TRANSPORT_DECLINED
 * when the range is not reachable by shm (caller falls back to tcp), 0 when done, or a negative
 * error. With `crc`
 * not NULL, *crc receives the CRC32C of the bytes copied (computed during the copy) when 0 is
 * returned. Called with peer->lock NOT held.
 */
int mc_shm_transfer(mc_transfer_engine_t *te, mc_peer_t *peer, int opcode, void *local,
                    uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token, uint32_t *crc);
void mc_shm_peer_close(mc_peer_t *peer);
/* Tells connected same-host peers that a shm region went away (they drop their mappings). */
void mc_shm_notify_revoke(mc_transfer_engine_t *te);

/* ---- rdma (rdma_transport.c; reached through mc_rdma_transport) ------------------------------ */

/* Built without UCX, protocol rdma is refused at create and the table has no rdma entry. */
#ifdef MC_HAVE_RDMA
/*
 * Starts UCX for protocol rdma: context, the serving worker (its address goes into the
 * descriptor) and its progress thread, one initiator worker per engine worker thread.
 * `device_names` restricts the devices (NULL/"" = the RDMA devices plus the interface holding
 * bind_host, or every device for a wildcard bind_host). Call after te->worker_count is set.
 * MC_ERR_INVALID_PARAMS for a device that does not exist, MC_ERR_NOT_SUPPORTED when no RDMA
 * device is usable and MC_RDMA_REQUIRE_DEVICE=1, MC_ERR_INTERNAL_ERROR when UCX fails.
 */
int mc_rdma_start(mc_transfer_engine_t *te, const char *device_names, const char *bind_host);
/* Stops and frees everything mc_rdma_start made. The worker threads must have been joined and
 * every peer's connections closed (mc_rdma_peer_close). NULL te->rdma is a no-op. */
void mc_rdma_stop(mc_transfer_engine_t *te);
/* The serving worker's address (owned by the engine); *len 0 for non-rdma engines. */
void mc_rdma_local_address(const mc_transfer_engine_t *te, const uint8_t **addr, size_t *len);
/* Maps a region for remote access (fills rdma_memh/rdma_rkey); no-op for non-rdma engines. */
int mc_rdma_map(mc_transfer_engine_t *te, mc_local_region_t *g);
/* Undoes mc_rdma_map; no-op when the region was not mapped. */
void mc_rdma_unmap(mc_transfer_engine_t *te, mc_local_region_t *g);
/* Allocates the per-worker connection slots of a new peer (rdma engines only). */
int mc_rdma_peer_init(mc_transfer_engine_t *te, mc_peer_t *peer);
/* Closes the peer's endpoints and frees its slots. Only once the worker threads were joined,
 * or for a peer no worker ever used. */
void mc_rdma_peer_close(mc_transfer_engine_t *te, mc_peer_t *peer);
/*
 * One read or write of [remote, remote+len) of the peer by engine worker thread `worker`, with
 * UCX put/get (+ endpoint flush for writes: done means remotely complete), done — descriptor
 * refresh, endpoint, probe, the one retry — by deadline_ms (the request's). A write carries its
 * mount epoch (0 = unchecked) and fencing token (0 = none), checked against the owner's fence
 * rules read after the endpoint connected (MC_ERR_INVALID_WRITE when refused: nothing sent).
 * Returns 0, a negative error, or MC_TRANSPORT_DECLINED when the peer or this range is not
 * reachable by rdma (no rdma_address or no rkey in its descriptor: the caller uses tcp).
 */
int mc_rdma_transfer(mc_transfer_engine_t *te, size_t worker, mc_peer_t *peer, int opcode,
                     void *local, uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token,
                     uint64_t deadline_ms);
/*
 * The rdma part of a receiver-side fence (mc_te_refuse_tokens): replaces the serving worker and
 * its progress thread (the endpoints peers opened to it, and whatever they had queued to it,
 * go with the old worker) and republishes the descriptor with the new worker address; peers
 * reconnect on their next transfer. When it returns, no rdma write sent to this engine before
 * the call can modify its memory. No-op (0) for non-rdma engines. 0 or MC_ERR_INTERNAL_ERROR.
 */
int mc_rdma_fence(mc_transfer_engine_t *te);
#endif

#endif /* MC_TRANSFER_INTERNAL_H */
