/*
 * lease_release.h — a store client gives its read leases back when its reads are done.
 *
 * GetReplicaList grants a read lease per key (KeyResult.lease_id). While it is held, the master
 * keeps the object's memory: it does not evict the object, and if the object is removed or
 * replaced meanwhile its extents stay fenced (never reused) until the lease ends. A reader that is
 * done says so (ReleaseReadLease), so that memory is free again at once rather than a whole TTL
 * later. Readers queue their releases here and return; one background thread, started by the
 * first release, sends what has queued up in one call at a time (fire-and-forget: a release that
 * is lost, or dropped because the queue is full, only means the lease runs out on its own).
 *
 * Thread-safe. Owned by the store client, which destroys it before its RPC client.
 */
#ifndef MC_CLIENT_LEASE_RELEASE_H
#define MC_CLIENT_LEASE_RELEASE_H

#include "rpc.h"

#include <stdint.h>

typedef struct mc_lease_releaser mc_lease_releaser_t;

/* rpc and client_id are borrowed and must outlive the releaser. 0 or MC_ERR_INTERNAL_ERROR. */
int mc_lease_releaser_create(mc_rpc_client_t *rpc, const char *client_id,
                             mc_lease_releaser_t **out);
/* Queues the release of `key`'s lease `lease_id` (0: nothing to release). Never waits for the
 * network. */
void mc_lease_releaser_add(mc_lease_releaser_t *r, const char *key, uint64_t lease_id);
/* Sends whatever is still queued (one call), stops the thread and frees. NULL is a no-op. */
void mc_lease_releaser_destroy(mc_lease_releaser_t *r);

#endif /* MC_CLIENT_LEASE_RELEASE_H */
