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
    mc_flag_t flags[] = {
        {"host", MC_FLAG_STRING, &host, "address to listen on (0.0.0.0 = every interface)"},
        {"port", MC_FLAG_INT, &port, "port to listen on (0 = any free port)", 0, 65535},
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
    mc_http_metadata_server_options_t mo = {.cluster_secret = secret,
                                            .cluster_secret_file = secret_file};
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
