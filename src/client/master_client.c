/*
 * master_client.c — typed store.proto calls to the master (master_client.h).
 *
 * The generic pack/call/unpack routine (mc_rpc_call_pb, rpc.h) serves every message pair; the
 * typed functions only name their descriptors.
 */
#include "master_client.h"

#include "log.h"
#include "mooncake/errors.h"

#include <stdlib.h>

/* Writes whose effect the operation log keeps: run twice, the second run can only find the
 * first one's work done (no pending put to end, nothing to remove) and answer an error. */
static int durable_write(uint16_t opcode)
{
    return opcode == MC_RPC_PUT_END || opcode == MC_RPC_UPSERT_END || opcode == MC_RPC_REMOVE ||
           opcode == MC_RPC_REMOVE_ALL || opcode == MC_RPC_REMOVE_BY_REGEX;
}

int mc_master_call_keys(mc_rpc_client_t *rpc, uint16_t opcode, const Mc__KeysRequest *req,
                        Mc__KeysResponse **resp)
{
    int elsewhere = 0;
    int rc = mc_rpc_call_pb_ex(rpc, opcode, &req->base, &mc__keys_response__descriptor,
                               (ProtobufCMessage **)resp, &elsewhere);
    if (rc != 0 || !elsewhere || !durable_write(opcode))
        return rc;
    /* The leader that got the first attempt may have executed and committed it before it died:
     * an error from the new leader's run is not the outcome, which is unknown. A success is. */
    Mc__KeysResponse *r = *resp;
    size_t unknown = r->code != 0;
    if (r->code != 0)
        r->code = MC_ERR_RPC_FAIL;
    for (size_t i = 0; i < r->n_results; i++) {
        if (r->results[i]->code != 0) {
            r->results[i]->code = MC_ERR_RPC_FAIL;
            unknown++;
        }
    }
    if (unknown)
        MC_WARN("%s reached a new master after the old one may have executed it: %zu outcomes "
                "unknown (RPC_FAIL)",
                mc_rpc_method_name(opcode), unknown);
    return rc;
}

int mc_master_call_segments(mc_rpc_client_t *rpc, uint16_t opcode, const Mc__SegmentRequest *req,
                            Mc__StatusResponse **resp)
{
    return mc_rpc_call_pb(rpc, opcode, &req->base, &mc__status_response__descriptor,
                          (ProtobufCMessage **)resp);
}

int mc_master_call_ping(mc_rpc_client_t *rpc, const char *client_id, uint64_t fallback_reads,
                        uint64_t checksum_mismatches, uint64_t fence_acked, uint64_t fence_view,
                        Mc__PingResponse **resp)
{
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = (char *)client_id;
    req.fallback_reads = fallback_reads;
    req.checksum_mismatches = checksum_mismatches;
    req.fence_acked = fence_acked;
    req.fence_view = fence_view;
    return mc_rpc_call_pb(rpc, MC_RPC_PING, &req.base, &mc__ping_response__descriptor,
                          (ProtobufCMessage **)resp);
}

int mc_master_call_service_ready(mc_rpc_client_t *rpc, Mc__ServiceReadyResponse **resp)
{
    return mc_rpc_call_pb(rpc, MC_RPC_SERVICE_READY, NULL, &mc__service_ready_response__descriptor,
                          (ProtobufCMessage **)resp);
}

int mc_master_call_offload_heartbeat(mc_rpc_client_t *rpc, const Mc__OffloadHeartbeatRequest *req,
                                     Mc__OffloadHeartbeatResponse **resp)
{
    return mc_rpc_call_pb(rpc, MC_RPC_OFFLOAD_HEARTBEAT, &req->base,
                          &mc__offload_heartbeat_response__descriptor, (ProtobufCMessage **)resp);
}

int mc_master_call_notify_offload(mc_rpc_client_t *rpc, const Mc__NotifyOffloadRequest *req,
                                  Mc__CodesResponse **resp)
{
    return mc_rpc_call_pb(rpc, MC_RPC_NOTIFY_OFFLOAD_RESULT, &req->base,
                          &mc__codes_response__descriptor, (ProtobufCMessage **)resp);
}

int mc_master_call_evict_disk(mc_rpc_client_t *rpc, const Mc__EvictDiskRequest *req,
                              Mc__CodesResponse **resp)
{
    return mc_rpc_call_pb(rpc, MC_RPC_EVICT_DISK_REPLICA, &req->base,
                          &mc__codes_response__descriptor, (ProtobufCMessage **)resp);
}

int mc_master_call_deletions_pending(mc_rpc_client_t *rpc, const Mc__DeletionsPendingRequest *req,
                                     Mc__DeletionsPendingResponse **resp)
{
    return mc_rpc_call_pb(rpc, MC_RPC_OFFLOAD_DELETIONS_PENDING, &req->base,
                          &mc__deletions_pending_response__descriptor, (ProtobufCMessage **)resp);
}
