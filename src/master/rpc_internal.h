/*
 * rpc_internal.h — the seam between the RPC transport (rpc_server.c: loops, connections, frames)
 * and the RPC handlers (rpc_handlers.c: store.proto bodies -> Master Service calls). Private to
 * src/master; both sides run on a connection's loop thread.
 */
#ifndef MC_MASTER_RPC_INTERNAL_H
#define MC_MASTER_RPC_INTERNAL_H

#include "master_service.h"
#include "rpc_server.h"

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rpc_conn rpc_conn_t;

/*
 * A handler decodes `body`, calls the master and queues the reply with mc_rpc_conn_reply. It
 * returns 0 when a reply was queued or the connection is already gone, MC_ERR_DESERIALIZE_FAIL
 * when the body does not decode (the transport closes the connection), or another negative code
 * when the reply could not be built.
 */
typedef int (*mc_rpc_handler_t)(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                                size_t len);

typedef struct mc_rpc_method {
    uint16_t opcode;
    const char *name; /* upstream's RPC name, the `method` label of the metrics */
    mc_rpc_handler_t handler;
} mc_rpc_method_t;

/* Every opcode of rpc.h, in a fixed order (the index of the per-method counters). */
extern const mc_rpc_method_t mc_rpc_methods[MC_RPC_METHOD_COUNT];
/* Index of opcode in mc_rpc_methods, or -1. */
int mc_rpc_method_index(uint16_t opcode);

/*
 * Packs msg as the reply to request `id` (opcode | MC_RPC_REPLY) and queues it on c, counting the
 * call for its method (`ok`: it succeeded) before the reply can reach the client. Returns 0 (also
 * when the connection failed and is being closed), MC_ERR_BUFFER_OVERFLOW when the body would
 * exceed MC_RPC_MAX_BODY, MC_ERR_INTERNAL_ERROR when out of memory (then nothing is sent or
 * counted).
 */
int mc_rpc_conn_reply(rpc_conn_t *c, uint16_t opcode, uint64_t id, const ProtobufCMessage *msg,
                      int ok);
mc_master_t *mc_rpc_conn_master(const rpc_conn_t *c);
/* "host:port" of the peer, for log lines. */
const char *mc_rpc_conn_peer(const rpc_conn_t *c);
/* Records that c speaks for client_id (a ping, mount or remount named it): when the peer closes
 * c, the server's peer-closed hook hears of that client (rpc_server.h). An id too long is
 * ignored. */
void mc_rpc_conn_set_client(rpc_conn_t *c, const char *client_id);

#endif /* MC_MASTER_RPC_INTERNAL_H */
