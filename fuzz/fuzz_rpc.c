/*
 * fuzz_rpc.c — fuzz target for the master's RPC requests: frames (frame.h) and their store.proto
 * bodies, through the production handlers (src/master/rpc_handlers.c, every entry of
 * mc_rpc_methods) into a real Master Service (master_service.h, offload and promotion on).
 *
 * The input is what one connection sends: frames back to back. Each is decoded with
 * mc_frame_decode(MC_RPC_MAX_BODY) and dispatched by opcode as rpc_server.c does; the input
 * ends where the server would close the connection (a bad header, an unknown opcode, a body that
 * does not decode, a reply that cannot be built). rpc_handlers.c is compiled into this target;
 * the transport side of its seam (rpc_internal.h: mc_rpc_conn_reply and friends) is the stub
 * below, which packs every reply and checks that it decodes again as its message type (a
 * master must never answer bytes its own clients refuse). Each input gets a fresh master, so a
 * crash replays from its input alone.
 */
#include "frame.h"
#include "fuzz_common.h"
#include "master_service.h"
#include "mooncake/errors.h"
#include "pb_decode.h"
#include "rpc.h"
#include "rpc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 64

struct rpc_conn {
    mc_master_t *master;
    char client_id[MC_CLIENT_ID_MAX];
    uint64_t replies;
};

int mc_rpc_conn_reply(rpc_conn_t *c, uint16_t opcode, uint64_t id, const ProtobufCMessage *msg,
                      int ok)
{
    (void)opcode;
    (void)id;
    (void)ok;
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > MC_RPC_MAX_BODY)
        return MC_ERR_BUFFER_OVERFLOW;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    protobuf_c_message_pack(msg, buf);
    ProtobufCMessage *back = NULL;
    if (mc_pb_decode_reply(msg->descriptor, buf, n, &back) != 0) {
        fprintf(stderr, "fuzz_rpc: a %s reply of %zu bytes does not decode\n",
                msg->descriptor->name, n);
        abort();
    }
    protobuf_c_message_free_unpacked(back, NULL);
    free(buf);
    c->replies++;
    return 0;
}

mc_master_t *mc_rpc_conn_master(const rpc_conn_t *c)
{
    return c->master;
}

const char *mc_rpc_conn_peer(const rpc_conn_t *c)
{
    (void)c;
    return "127.0.0.1:40000";
}

void mc_rpc_conn_set_client(rpc_conn_t *c, const char *client_id)
{
    if (strlen(client_id) < sizeof(c->client_id))
        snprintf(c->client_id, sizeof(c->client_id), "%s", client_id);
}

/* rpc_handlers.c's public start calls hand its table to the transport; no input here starts
 * one (the frames are dispatched below), so the transport side answers as a transport that
 * could not bind would. */
int mc_rpc_transport_start(mc_master_t *master, const char *host, int port, int threads,
                           const mc_rpc_limits_t *limits, const mc_auth_t *auth,
                           const mc_rpc_method_t *methods, mc_rpc_server_t **out)
{
    (void)master;
    (void)host;
    (void)port;
    (void)threads;
    (void)limits;
    (void)auth;
    (void)methods;
    *out = NULL;
    return MC_ERR_INTERNAL_ERROR;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    cfg.enable_offload = 1;
    cfg.promotion_on_hit = 1;
    cfg.promotion_admission_threshold = 1;
    cfg.max_segment_size = 1ull << 32;
    rpc_conn_t conn = {0};
    if (mc_master_create(&cfg, &conn.master) != 0)
        abort();
    size_t at = 0;
    for (int frames = 0; frames < MAX_FRAMES && size - at >= MC_FRAME_HEADER_SIZE; frames++) {
        mc_frame_header_t h;
        if (mc_frame_decode(data + at, MC_RPC_MAX_BODY, &h) != 0)
            break;
        at += MC_FRAME_HEADER_SIZE;
        if (h.body_len > size - at)
            break; /* the server waits for the rest, then the connection closes */
        int idx = mc_rpc_method_index(h.opcode);
        if (idx < 0)
            break;
        /* The body in a buffer of its own size, as the server's receive buffer ends there for
         * the last frame: a read past the body is caught. */
        uint8_t *body = malloc(h.body_len ? h.body_len : 1);
        if (!body)
            abort();
        memcpy(body, data + at, h.body_len);
        at += h.body_len;
        int rc = mc_rpc_methods[idx].handler(&conn, h.opcode, h.request_id, body, h.body_len);
        free(body);
        if (rc != 0)
            break;
    }
    mc_master_destroy(conn.master);
    return 0;
}
