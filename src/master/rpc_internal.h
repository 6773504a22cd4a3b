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

/* Every master method of rpc.h, in the list's order (mc_rpc_method_index gives the index). */
extern const mc_rpc_method_t mc_rpc_methods[MC_RPC_METHOD_COUNT];

/*
 * mc_rpc_server_start_limited (rpc_server.h) with the table of MC_RPC_METHOD_COUNT handlers to
 * dispatch to (borrowed; outlives the server), entry i for the method of index i. The
 * transport's side; rpc_handlers.c's start calls hand it mc_rpc_methods.
 */
int mc_rpc_transport_start(mc_master_t *master, const char *host, int port, int threads,
                           const mc_rpc_limits_t *limits, const mc_auth_t *auth,
                           const mc_rpc_method_t *methods, mc_rpc_server_t **out);

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
