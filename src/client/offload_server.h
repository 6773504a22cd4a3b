/*
 * offload_server.h — reads of local-disk replicas through their owner.
 *
 * A LOCAL_DISK replica lives on one client's disk; its descriptor names that client's fetch
 * endpoint ("host:port"). A reader sends FETCH(key, version, size) there (frames of frame.h,
 * store.proto bodies, the rpc.h client); the owner reads the file (checksums verified) into a
 * staging area registered in its Transfer Engine segment and answers (segment, address, lease).
 * The reader pulls the bytes with the Transfer Engine straight into its destination (shared
 * memory on the same host, tcp/rdma otherwise) and sends RELEASE. A staged copy is leased from
 * when the owner finished reading the file into it until the reader releases it; one not released
 * within MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS of that moment may be reclaimed when another
 * fetch needs the room. RELEASE of a reclaimed lease answers MC_ERR_LEASE_EXPIRED, and the reader
 * then fails the read: it never returns bytes it cannot prove were the object's.
 *
 * Server threads: one accepting, one per connection (readers pool their connections). Limits:
 * at most 1024 connections (one more is accepted and closed, counted, logged at most once a
 * second); a connection waiting longer than 600 s for its next request is closed (readers check
 * pooled connections before reuse); a request must arrive whole within 30 s of its first byte,
 * else the connection is closed (counted); request bodies are at most 64 KiB and decoded within
 * a memory budget (pb_decode.h). The staging area is MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES of
 * segment memory, reserved, not committed; a fetch waits up to 5 s for room, an object larger than
 * the whole area fails with MC_ERR_BUFFER_OVERFLOW.
 *
 * Thread-safety: every function may be called from any thread; stop once.
 */
#ifndef MC_CLIENT_OFFLOAD_SERVER_H
#define MC_CLIENT_OFFLOAD_SERVER_H

#include "mooncake/transfer_engine.h"
#include "offload_backend.h"

#include <stdint.h>

typedef struct mc_offload_server mc_offload_server_t;

/*
 * Listens on host:0 (any free port) and serves reads of `backend` staged through `te` (both
 * borrowed; they must outlive the server). Returns 0 or a store error (logged).
 */
int mc_offload_server_start(const char *host, mc_transfer_engine_t *te,
                            mc_offload_backend_t *backend, uint64_t staging_bytes,
                            uint64_t staging_ttl_ms, mc_offload_server_t **out);
/* "host:port" readers use (the LOCAL_DISK descriptor's segment_name). */
const char *mc_offload_server_endpoint(const mc_offload_server_t *s);
/* Reads served so far. */
uint64_t mc_offload_server_served(const mc_offload_server_t *s);

typedef struct mc_offload_server_stats {
    uint64_t served;
    uint64_t connections_refused;     /* over the connection limit */
    uint64_t connections_idle_closed; /* no request for the idle timeout */
    uint64_t connections_stalled;     /* a request not received within the frame timeout */
} mc_offload_server_stats_t;
void mc_offload_server_get_stats(mc_offload_server_t *s, mc_offload_server_stats_t *out);
/* Closes every connection, joins the threads, frees the staging area. NULL is a no-op. */
void mc_offload_server_stop(mc_offload_server_t *s);

/* The reader side: a cache of connections to owners. */
typedef struct mc_offload_peers mc_offload_peers_t;
int mc_offload_peers_create(mc_offload_peers_t **out);
void mc_offload_peers_destroy(mc_offload_peers_t *p);

/*
 * Reads the value of (key, version), `size` bytes, from the owner at `endpoint` into buf.
 * Returns 0 (buf holds exactly the object's bytes) or the owner's code (MC_ERR_FILE_NOT_FOUND,
 * MC_ERR_CHECKSUM_MISMATCH, ...), MC_ERR_LEASE_EXPIRED when the owner reclaimed the staged copy
 * before our RELEASE (buf's contents are then undefined), an RPC code when the owner is
 * unreachable (also at RELEASE), or the Transfer Engine's. Failpoint "offload.fetch.before_pull"
 * runs between the FETCH reply and the pull.
 */
int mc_offload_fetch(mc_offload_peers_t *p, mc_transfer_engine_t *te, const char *endpoint,
                     const char *key, uint64_t version, void *buf, uint64_t size);

#endif /* MC_CLIENT_OFFLOAD_SERVER_H */
