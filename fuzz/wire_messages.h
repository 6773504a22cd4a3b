/*
 * wire_messages.h — every message type of src/wire/proto, in a fixed order: fuzz_wire.c picks
 * the type of a body by its index here, and make_corpus.c writes its seeds with the same index.
 * A message added to a .proto file belongs here too.
 */
#ifndef MC_FUZZ_WIRE_MESSAGES_H
#define MC_FUZZ_WIRE_MESSAGES_H

#include "auth.pb-c.h"
#include "dummy.pb-c.h"
#include "oplog.pb-c.h"
#include "snapshot.pb-c.h"
#include "store.pb-c.h"
#include "transfer.pb-c.h"

static const ProtobufCMessageDescriptor *const mc_fuzz_messages[] = {
    &mc__auth_challenge__descriptor,
    &mc__auth_hello__descriptor,
    &mc__auth_proof__descriptor,
    &mc__auth_result__descriptor,
    &mc__codes_response__descriptor,
    &mc__deletions_pending_request__descriptor,
    &mc__deletions_pending_response__descriptor,
    &mc__disk_file__descriptor,
    &mc__disk_replica_record__descriptor,
    &mc__dummy_config__descriptor,
    &mc__dummy_range__descriptor,
    &mc__dummy_replica__descriptor,
    &mc__dummy_reply__descriptor,
    &mc__dummy_request__descriptor,
    &mc__dummy_task__descriptor,
    &mc__evict_disk_request__descriptor,
    &mc__fetch_request__descriptor,
    &mc__fetch_response__descriptor,
    &mc__fetch_tasks_request__descriptor,
    &mc__fetch_tasks_response__descriptor,
    &mc__handshake_request__descriptor,
    &mc__key_result__descriptor,
    &mc__keys_request__descriptor,
    &mc__keys_response__descriptor,
    &mc__memory_region__descriptor,
    &mc__memory_replica_record__descriptor,
    &mc__notify_offload_request__descriptor,
    &mc__object_record__descriptor,
    &mc__offload_heartbeat_request__descriptor,
    &mc__offload_heartbeat_response__descriptor,
    &mc__offload_result__descriptor,
    &mc__offload_task__descriptor,
    &mc__oplog_batch__descriptor,
    &mc__oplog_entry__descriptor,
    &mc__ping_request__descriptor,
    &mc__ping_response__descriptor,
    &mc__promotion_result_request__descriptor,
    &mc__promotion_take_request__descriptor,
    &mc__promotion_take_response__descriptor,
    &mc__promotion_task__descriptor,
    &mc__release_request__descriptor,
    &mc__replica__descriptor,
    &mc__replica_clear_request__descriptor,
    &mc__replica_clear_response__descriptor,
    &mc__replicate_config__descriptor,
    &mc__restore_extent__descriptor,
    &mc__restore_verify_request__descriptor,
    &mc__restore_verify_response__descriptor,
    &mc__segment__descriptor,
    &mc__segment_desc__descriptor,
    &mc__segment_request__descriptor,
    &mc__service_ready_response__descriptor,
    &mc__status_response__descriptor,
    &mc__task_assignment__descriptor,
    &mc__task_complete_request__descriptor,
    &mc__task_create_request__descriptor,
    &mc__task_create_response__descriptor,
    &mc__task_query_request__descriptor,
    &mc__task_query_response__descriptor,
    &mc__transfer_header__descriptor,
    &mc__transfer_status__descriptor,
    &mc__fence_rules__descriptor, /* after the others: appended when it was added */
};
#define MC_FUZZ_NMESSAGES (sizeof(mc_fuzz_messages) / sizeof(mc_fuzz_messages[0]))

#endif /* MC_FUZZ_WIRE_MESSAGES_H */
