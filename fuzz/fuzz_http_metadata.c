/*
 * fuzz_http_metadata.c — fuzz target for the HTTP metadata server (src/transfer/
 * http_metadata_server.c, include/mooncake/http_metadata.h), the embedded server of
 * mooncake_master --enable_http_metadata_server and of mooncake_http_metadata_server: request
 * targets and their `key` query argument, PUT bodies and Content-Length, the X-Mooncake-Auth
 * proof of a write (hex nonce and MAC), and the paths /metadata, /metadata/auth_challenge,
 * /health and /metrics, behind libmicrohttpd's own parsing.
 *
 * Input: byte 0 bit 0 picks a server without or with a cluster secret; then up to four
 * requests, each a u16-length-prefixed spec for mc_fuzz_http (method, target, headers, body; or
 * raw bytes), sent on one connection after another so that a PUT can be read back or deleted.
 * Every input starts with an empty store: a server left holding keys after an input is replaced
 * by a fresh one (small limits, so that they are reached too).
 */
#include "fuzz_common.h"
#include "mooncake/http_metadata.h"

#include <stdlib.h>

#define MAX_REQUESTS 4

static mc_http_metadata_server_t *servers[2]; /* without, with a cluster secret */

static mc_http_metadata_server_t *start(int with_secret)
{
    static const mc_http_metadata_limits_t limits = {
        .max_keys = 4, .max_value_bytes = 1024, .max_total_bytes = 4096};
    mc_http_metadata_server_options_t opts = {0};
    opts.cluster_secret = with_secret ? "fuzz: a cluster secret of 32+ bytes" : NULL;
    opts.limits = &limits;
    mc_http_metadata_server_t *s = NULL;
    if (mc_http_metadata_server_start_opts("127.0.0.1", 0, &opts, &s) != 0)
        abort();
    return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    servers[0] = start(0);
    servers[1] = start(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    int with_secret = mc_fuzz_u8(&in) & 1;
    mc_http_metadata_server_t *s = servers[with_secret];
    int port = mc_http_metadata_server_port(s);
    for (int i = 0; i < MAX_REQUESTS && in.n > 0; i++) {
        size_t len;
        const uint8_t *spec = mc_fuzz_chunk(&in, &len);
        mc_fuzz_http(port, spec, len);
    }
    if (mc_http_metadata_server_size(s) > 0) {
        mc_http_metadata_server_stop(s);
        servers[with_secret] = start(with_secret);
    }
    return 0;
}
