/*
 * master_client.h — typed calls from a store client to mooncake_master: packs store.proto
 * requests, runs them over the RPC client (rpc.h) and unpacks the replies. Thread-safe.
 *
 * Each call returns 0 with *resp set (free it with the matching mc__*__free_unpacked(resp, NULL)),
 * or a negative code: MC_ERR_RPC_FAIL / MC_ERR_RPC_TIMEOUT (transport),
 * MC_ERR_DESERIALIZE_FAIL (a reply that does not decode), MC_ERR_INTERNAL_ERROR (memory).
 *
 * Outcomes are never guessed: when a PutEnd, UpsertEnd, Remove, RemoveAll or RemoveByRegex was
 * answered by another master than the one that may have executed it first (mc_rpc_call_ex), each
 * error in the answer (the whole-request code and every key's) becomes MC_ERR_RPC_FAIL,
 * upstream's code for "the call failed, its outcome unknown"; successes stay.
 */
#ifndef MC_CLIENT_MASTER_CLIENT_H
#define MC_CLIENT_MASTER_CLIENT_H

#include "rpc.h"
#include "store.pb-c.h"

int mc_master_call_keys(mc_rpc_client_t *rpc, uint16_t opcode, const Mc__KeysRequest *req,
                        Mc__KeysResponse **resp);
int mc_master_call_segments(mc_rpc_client_t *rpc, uint16_t opcode, const Mc__SegmentRequest *req,
                            Mc__StatusResponse **resp);
/* fallback_reads / checksum_mismatches: this client's running totals of reads served from disk
 * replicas and of replica reads that failed checksum verification. fence_acked / fence_view:
 * the write fence's confirmation (store.proto PingRequest; 0 / 0 when none). */
int mc_master_call_ping(mc_rpc_client_t *rpc, const char *client_id, uint64_t fallback_reads,
                        uint64_t checksum_mismatches, uint64_t fence_acked, uint64_t fence_view,
                        Mc__PingResponse **resp);
int mc_master_call_service_ready(mc_rpc_client_t *rpc, Mc__ServiceReadyResponse **resp);
/* Offload: a heartbeat, task results, disk replicas about to be deleted (codes per item). */
int mc_master_call_offload_heartbeat(mc_rpc_client_t *rpc, const Mc__OffloadHeartbeatRequest *req,
                                     Mc__OffloadHeartbeatResponse **resp);
int mc_master_call_notify_offload(mc_rpc_client_t *rpc, const Mc__NotifyOffloadRequest *req,
                                  Mc__CodesResponse **resp);
int mc_master_call_evict_disk(mc_rpc_client_t *rpc, const Mc__EvictDiskRequest *req,
                              Mc__CodesResponse **resp);
/* Deletions of discarded values' files not yet confirmed (a remove or upsert waits for 0). */
int mc_master_call_deletions_pending(mc_rpc_client_t *rpc, const Mc__DeletionsPendingRequest *req,
                                     Mc__DeletionsPendingResponse **resp);

#endif /* MC_CLIENT_MASTER_CLIENT_H */
