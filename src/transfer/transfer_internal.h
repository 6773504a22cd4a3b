/*
 * transfer_internal.h — the Transfer Engine's internal structures, shared by its files:
 *
 *   segment_registry.c   this process's registered memory (the local segment) and range lookups
 *   segment_metadata.c   segment descriptors: build, encode (protobuf / JSON), publish, look up
 *   tcp_transport.c      the peer protocol server (handshake, read, write) and its client side
 *   shm_transport.c      memfd-backed segment memory and the same-host mapping of peers' memory
 *   transfer_engine.c    the engine, opened segments (peers), batches, worker threads
 *
 * Invariants:
 *  - A local region is never unmapped or unregistered while a transfer touches it: transfers hold
 *    the registry's read lock for the duration of the copy; (un)registration takes the write lock.
 *  - A remote range is checked against the peer's descriptor before any byte moves; a failed check
 *    refreshes the descriptor once (the peer may have registered more memory) and then fails.
 *  - A pooled tcp connection is idle and in a known protocol state; a connection that failed in
 *    any way is closed, never returned to the pool.
 */
#ifndef MC_TRANSFER_INTERNAL_H
#define MC_TRANSFER_INTERNAL_H

#include "mooncake/transfer_engine.h"
#include "net.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Opcodes of the peer protocol (frame.h header, protobuf bodies from transfer.proto). */
enum mc_te_opcode {
    MC_TE_OP_HANDSHAKE = 1,      /* body HandshakeRequest -> reply HANDSHAKE_REPLY SegmentDesc */
    MC_TE_OP_HANDSHAKE_REPLY = 2,
    MC_TE_OP_WRITE = 3,          /* body TransferHeader, then `length` raw bytes -> STATUS */
    MC_TE_OP_READ = 4,           /* body TransferHeader -> STATUS, then raw bytes when code == 0 */
    MC_TE_OP_STATUS = 5,         /* body TransferStatus */
};

#define MC_TE_MAX_REGIONS 4096
#define MC_TE_SHM_SOCKET_MAX 108

/* ---- local segment (segment_registry.c) -------------------------------------------------- */

typedef struct mc_local_region {
    uint64_t addr;
    uint64_t length;
    int32_t shm_index; /* >= 0: backed by memfd `memfd`, shareable with same-host peers */
    int memfd;         /* -1 for caller-owned memory */
    int owned;         /* 1: mapped by mc_te_alloc_segment_memory, unmapped on free */
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
} mc_remote_region_t;

typedef struct mc_segment_desc {
    char name[MC_ENDPOINT_MAX];
    char protocol[16];
    char host_id[MC_HOST_MAX];
    char shm_socket[MC_TE_SHM_SOCKET_MAX];
    uint64_t version;
    mc_remote_region_t *regions;
    size_t count;
} mc_segment_desc_t;

void mc_desc_free(mc_segment_desc_t *d);
/* The descriptor of this engine's own segment (takes the registry read lock). */
int mc_desc_build_local(mc_transfer_engine_t *te, mc_segment_desc_t *out);
/* protobuf (handshake). *buf is malloc'd. */
int mc_desc_pack(const mc_segment_desc_t *d, uint8_t **buf, size_t *len);
int mc_desc_unpack(const uint8_t *buf, size_t len, mc_segment_desc_t *out);
/* JSON (HTTP metadata). *json is malloc'd. */
int mc_desc_to_json(const mc_segment_desc_t *d, char **json);
int mc_desc_from_json(const char *json, size_t len, mc_segment_desc_t *out);
/* The region of `d` containing [addr, addr+len), or NULL. */
const mc_remote_region_t *mc_desc_find(const mc_segment_desc_t *d, uint64_t addr, uint64_t len);
/* Publishes the local descriptor to the HTTP metadata service (no-op for P2PHANDSHAKE). */
int mc_metadata_publish(mc_transfer_engine_t *te);
void mc_metadata_unpublish(mc_transfer_engine_t *te);
/* Finds a peer's descriptor: HTTP metadata first (when configured), else a direct handshake. */
int mc_metadata_lookup(mc_transfer_engine_t *te, const char *name, mc_segment_desc_t *out);

/* ---- peers (opened segments) ------------------------------------------------------------- */

typedef struct mc_peer {
    char name[MC_ENDPOINT_MAX];
    char host[MC_HOST_MAX];
    int port;
    int is_self;
    atomic_uint_fast64_t last_error_log_ms; /* rate limit: one failure line per second per peer */

    pthread_mutex_t lock;  /* guards everything below */
    mc_segment_desc_t desc;
    int *idle_fds;         /* pooled tcp connections */
    size_t idle_count, idle_capacity;
    /*
     * shm: connection to the owner's unix socket (liveness + fd handover) and the mappings of its
     * memfds. Guarded by shm_rw, not by lock: copies hold it for reading, so a mapping is never
     * unmapped under a copy; connecting, mapping and resetting take it for writing.
     */
    pthread_rwlock_t shm_rw;
    int shm_state;         /* 0 untried, 1 usable, -1 unusable (fall back to tcp) */
    int shm_sock;
    void **shm_maps;       /* indexed by shm_index */
    uint64_t *shm_lens;
    size_t shm_map_count;
} mc_peer_t;

/* ---- the engine (transfer_engine.c) ------------------------------------------------------ */

typedef struct mc_slice {
    mc_batch_t *batch;
    uint32_t index;  /* request index in the batch */
    uint64_t offset; /* within the request */
    uint64_t length;
} mc_slice_t;

struct mc_transfer_engine {
    char name[MC_ENDPOINT_MAX];   /* advertised "host:port" */
    char host_id[MC_HOST_MAX];
    char protocol[16];
    char metadata_url[1024];      /* empty for P2PHANDSHAKE */
    int disable_shm;
    int timeout_ms;
    uint64_t slice_bytes;

    mc_segment_registry_t registry;

    /* tcp server */
    int listen_fd;
    int listen_port;
    pthread_t accept_thread;
    pthread_mutex_t conn_lock;    /* guards conn_fds, conn_count, stopping */
    int *conn_fds;
    size_t conn_count, conn_capacity;
    size_t conn_threads;          /* live connection threads */
    pthread_cond_t conn_cond;
    atomic_int stopping;

    /* shm server */
    int shm_listen_fd;
    char shm_socket[MC_TE_SHM_SOCKET_MAX];
    pthread_t shm_thread;
    int shm_wake[2];              /* pipe: wakes the shm server thread to stop */
    pthread_mutex_t shm_lock;     /* guards shm_conns */
    int *shm_conns;               /* connected same-host peers */
    size_t shm_conn_count, shm_conn_capacity;

    /* peers */
    pthread_mutex_t peers_lock;
    mc_peer_t **peers;
    size_t peer_count, peer_capacity;

    /* initiator workers */
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
/* 1 when a failure about this peer may be logged now (at most one line per second). */
int mc_peer_should_log(mc_peer_t *peer);
/* Re-fetches a peer's descriptor (after a failed range check). */
int mc_peer_refresh(mc_transfer_engine_t *te, mc_peer_t *peer);

/* ---- tcp (tcp_transport.c) --------------------------------------------------------------- */

int mc_tcp_server_start(mc_transfer_engine_t *te, const char *bind_host, int port);
void mc_tcp_server_stop(mc_transfer_engine_t *te);
/* One read or write of [remote, remote+len) of the peer, through a pooled connection. */
int mc_tcp_transfer(mc_transfer_engine_t *te, mc_peer_t *peer, int opcode, void *local,
                    uint64_t remote, uint64_t len);
/* Direct handshake with host:port (fresh connection, pooled afterwards when peer != NULL). */
int mc_tcp_handshake(mc_transfer_engine_t *te, const char *host, int port, mc_segment_desc_t *out);
void mc_tcp_pool_close(mc_peer_t *peer);

/* ---- shm (shm_transport.c) --------------------------------------------------------------- */

int mc_shm_alloc(mc_transfer_engine_t *te, size_t length, void **addr);
int mc_shm_server_start(mc_transfer_engine_t *te);
void mc_shm_server_stop(mc_transfer_engine_t *te);
/*
 * Copies between local memory and a same-host peer's shm region; returns 1 when the range is not
 * reachable by shm (caller falls back to tcp), 0 when done, or a negative error.
 * Called with peer->lock NOT held.
 */
int mc_shm_transfer(mc_transfer_engine_t *te, mc_peer_t *peer, int opcode, void *local,
                    uint64_t remote, uint64_t len);
void mc_shm_peer_close(mc_peer_t *peer);
/* Tells connected same-host peers that a shm region went away (they drop their mappings). */
void mc_shm_notify_revoke(mc_transfer_engine_t *te);

#endif /* MC_TRANSFER_INTERNAL_H */
