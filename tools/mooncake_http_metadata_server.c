/*
 * mooncake_http_metadata_server.c — the standalone HTTP metadata server, the C counterpart of
 * upstream's `mooncake_http_metadata_server --host 0.0.0.0 --port 8080` (Python/aiohttp). Serves
 * GET|PUT|DELETE /metadata?key=K and GET /health (http_metadata.h) until SIGINT or SIGTERM, then
 * exits 0.
 *
 * Once listening it logs (at INFO) one line ending in `HTTP metadata server listening on HOST:PORT`
 * with the port actually bound, so `--port 0` is usable by scripts and tests that read stderr.
 * Exit status: 0 after a signal or --help/--version, 1 on bad flags (one line on stderr) or when
 * the port cannot be bound.
 *
 * Limits (http_metadata.h; refusals answer 413 / 507 and are counted on GET /metrics):
 * --max_value_size, --max_keys, --max_total_size, --max_connections, --connection_timeout_seconds.
 */
#include "mooncake/http_metadata.h"

#include "flags.h"
#include "log.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MD_DEFAULT_PORT 8080

int main(int argc, char **argv)
{
    int64_t port = MD_DEFAULT_PORT;
    char default_host[] = "0.0.0.0";
    char *host = default_host;
    char *secret = "", *secret_file = "";
    uint64_t max_value = MC_HTTP_METADATA_MAX_VALUE, max_total = MC_HTTP_METADATA_DEFAULT_MAX_TOTAL;
    int64_t max_keys = MC_HTTP_METADATA_DEFAULT_MAX_KEYS;
    int64_t max_connections = MC_HTTP_METADATA_DEFAULT_MAX_CONNECTIONS;
    int64_t timeout_s = MC_HTTP_METADATA_DEFAULT_TIMEOUT_S;
    mc_flag_t flags[] = {
        {"host", MC_FLAG_STRING, &host, "address to listen on (0.0.0.0 = every interface)"},
        {"port", MC_FLAG_INT, &port, "port to listen on (0 = any free port)", 0, 65535},
        {"max_value_size", MC_FLAG_SIZE, &max_value,
         "largest value one PUT may store (larger: 413)"},
        {"max_keys", MC_FLAG_INT, &max_keys, "keys held at most (a new key beyond: 507)", 1,
         INT32_MAX},
        {"max_total_size", MC_FLAG_SIZE, &max_total,
         "bytes held at most, keys and values and bodies being received (beyond: 507)"},
        {"max_connections", MC_FLAG_INT, &max_connections,
         "open connections at most (more are closed at once)", 1, 1000000},
        {"connection_timeout_seconds", MC_FLAG_INT, &timeout_s,
         "a connection idle or stalled this long is closed", 1, 86400},
        {"cluster_secret_file", MC_FLAG_STRING, &secret_file,
         "file holding the cluster secret writes must prove (reads stay open; "
         "docs/security.md); default $MOONCAKE_CLUSTER_SECRET_FILE"},
        {"cluster_secret", MC_FLAG_STRING, &secret,
         "the cluster secret itself (visible in ps: prefer the file); default "
         "$MOONCAKE_CLUSTER_SECRET"},
    };
    size_t nflags = sizeof(flags) / sizeof(flags[0]);
    char err[512];

    int rc = mc_flags_parse(flags, nflags, NULL, argc, argv, "mooncake_http_metadata_server",
                            "Usage: mooncake_http_metadata_server [--host 0.0.0.0] [--port 8080]",
                            err, sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 0;
    if (rc != 0) {
        fprintf(stderr, "mooncake_http_metadata_server: %s\n", err);
        return 1;
    }
    if (max_value == 0 || max_total == 0 || max_value > max_total) {
        fprintf(stderr, "mooncake_http_metadata_server: --max_value_size and --max_total_size "
                        "must be positive, the value no larger than the total\n");
        return 1;
    }
    mc_http_metadata_limits_t limits = {(size_t)max_value, (size_t)max_keys, (size_t)max_total,
                                        (unsigned)max_connections, (unsigned)timeout_s};

    /*
     * Block the stop signals before the server thread exists, so it inherits the mask and the
     * signals are taken only by sigwait() below: shutdown runs in plain code, not a handler.
     */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    mc_http_metadata_server_t *server = NULL;
    /* On failure the reason is already logged. */
    mc_http_metadata_server_options_t mo = {
        .cluster_secret = secret, .cluster_secret_file = secret_file, .limits = &limits};
    if (mc_http_metadata_server_start_opts(host, (int)port, &mo, &server) != 0)
        return 1;
    int v6 = strchr(host, ':') != NULL; /* "[::]:8080", as URLs write IPv6 */
    MC_INFO("HTTP metadata server listening on %s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "",
            mc_http_metadata_server_port(server));

    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    MC_INFO("received signal %d, stopping (%zu keys held)", sig,
            mc_http_metadata_server_size(server));
    mc_http_metadata_server_stop(server);
    return 0;
}
