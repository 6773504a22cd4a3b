/*
 * fuzz_client_http.c — fuzz target for a store client's HTTP server (src/client/client_http.c,
 * mooncake_client --enable_http_server): request paths, methods and headers (/health, /metrics,
 * /metrics/summary; everything else 404/405), behind libmicrohttpd's own parsing, with metrics
 * that have counted a few calls. The server is read-only, so one serves every input.
 *
 * Input: up to four u16-length-prefixed specs for mc_fuzz_http (method, target, headers, body;
 * or raw bytes), each sent on its own connection.
 */
#include "client_http.h"
#include "fuzz_common.h"

#include <stdlib.h>

#define MAX_REQUESTS 4

static mc_client_http_t *server;

static int health(void *arg)
{
    (void)arg;
    return MC_CLIENT_HEALTHY;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    mc_client_metrics_t *metrics = mc_client_metrics_create();
    mc_client_metrics_record(metrics, MC_CLIENT_OP_PUT, 1, 4096, 120);
    mc_client_metrics_record(metrics, MC_CLIENT_OP_BATCH_GET_INTO, 16, 1 << 20, 900);
    mc_client_http_config_t cfg = {0};
    cfg.host = "127.0.0.1";
    cfg.metrics = metrics;
    cfg.health = health;
    if (mc_client_http_start(&cfg, &server) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    int port = mc_client_http_port(server);
    for (int i = 0; i < MAX_REQUESTS && in.n > 0; i++) {
        size_t len;
        const uint8_t *spec = mc_fuzz_chunk(&in, &len);
        mc_fuzz_http(port, spec, len);
    }
    return 0;
}
