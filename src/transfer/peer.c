/*
 * peer.c — what every transport needs to know about an opened segment (a peer) beyond its own
 * state in mc_peer_t: a fresh copy of its descriptor after a miss or a failure, and the rate
 * limit of failure lines about it. Below the transports and above the metadata, so a transport
 * never calls the engine that called it.
 */
#include "transfer_internal.h"

#include "log.h"

int mc_peer_should_log(mc_peer_t *peer)
{
    return mc_log_ratelimit(&peer->last_error_log_ms, 1000);
}

int mc_peer_refresh(mc_transfer_engine_t *te, mc_peer_t *peer, uint64_t deadline_ms)
{
    if (peer->is_self)
        return 0;
    mc_segment_desc_t d;
    int rc = mc_metadata_lookup(te, peer->name, &d, deadline_ms);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&peer->lock);
    mc_desc_free(&peer->desc);
    peer->desc = d;
    peer->desc_gen++;
    pthread_mutex_unlock(&peer->lock);
    return 0;
}
