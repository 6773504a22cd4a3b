/*
 * fuzz_offload_fetch.c — fuzz target for reads of local-disk replicas through their owner
 * (src/client/offload_server.c, offload_server.h): the FETCH and RELEASE requests another client
 * sends to a client holding offloaded files (frames of frame.h, FetchRequest / ReleaseRequest
 * bodies), served by a real offload server over a local backend holding one object
 * ("key-1", version 5, 4 KiB) and staging through a real Transfer Engine.
 *
 * Input: what a reader sends on one connection, frames back to back. A RELEASE follows them; the
 * target waits for its answer (the server closes a finished connection only when it accepts the
 * next one), or for the server to go quiet.
 */
#include "frame.h"
#include "fuzz_common.h"
#include "rpc.h"
#include "store.pb-c.h"
#include "mooncake/transfer_engine.h"
#include "offload_backend.h"
#include "offload_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL_ID 0x5e171e15e171e1ull
#define QUIET_MS 5

static int port;
static const char *root;
static uint8_t sentinel[MC_FRAME_HEADER_SIZE + 16], sentinel_reply[16];
static size_t sentinel_len;

static void make_sentinel(void)
{
    Mc__ReleaseRequest req = MC__RELEASE_REQUEST__INIT;
    req.lease_id = 1;
    size_t n = mc__release_request__pack(&req, sentinel + MC_FRAME_HEADER_SIZE);
    mc_frame_encode(MC_RPC_OFFLOAD_RELEASE, SENTINEL_ID, (uint32_t)n, 0, sentinel);
    sentinel_len = MC_FRAME_HEADER_SIZE + n;
    uint8_t h[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(MC_RPC_OFFLOAD_RELEASE | MC_RPC_REPLY, SENTINEL_ID, 0, 0, h);
    memcpy(sentinel_reply, h, sizeof(sentinel_reply));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    mc_transfer_engine_config_t tcfg = {0};
    tcfg.local_server_name = "127.0.0.1:0";
    tcfg.metadata_server = "P2PHANDSHAKE";
    tcfg.worker_threads = 1;
    mc_transfer_engine_t *te = NULL;
    if (mc_te_create(&tcfg, &te) != 0)
        abort();
    mc_offload_env_t env = {0};
    env.backend = MC_OFFLOAD_LOCAL;
    env.io_threads = 1;
    mc_offload_backend_t *backend = NULL;
    char err[512];
    root = mc_fuzz_tempdir("fetch");
    if (mc_offload_backend_open(&env, MC_OFFLOAD_LOCAL, root, &backend, err, sizeof(err)) != 0)
        abort();
    static uint8_t value[4096];
    memset(value, 0x5a, sizeof(value));
    if (mc_offload_backend_write(backend, "key-1", 5, value, sizeof(value)) != 0)
        abort();
    mc_offload_server_t *s = NULL;
    if (mc_offload_server_start("127.0.0.1", te, backend, 1u << 20, 1000, &s) != 0)
        abort();
    port = atoi(strrchr(mc_offload_server_endpoint(s), ':') + 1);
    make_sentinel();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size + sentinel_len);
    if (!buf)
        abort();
    memcpy(buf, data, size);
    memcpy(buf + size, sentinel, sentinel_len);
    int fd = mc_fuzz_connect_tcp(port);
    if (fd < 0)
        abort();
    mc_fuzz_exchange_opts_t o = {.half_close = 1,
                                 .marker = sentinel_reply,
                                 .marker_len = sizeof(sentinel_reply),
                                 .quiet_ms = QUIET_MS};
    mc_fuzz_exchange(fd, buf, size + sentinel_len, &o);
    free(buf);
    return 0;
}
