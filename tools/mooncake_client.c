/*
 * mooncake_client — the standalone store client ("real client"): contributes a memory segment
 * to the cluster and serves it until stopped.
 *
 *   mooncake_client --master_server_address=127.0.0.1:50051 --metadata_server=P2PHANDSHAKE \
 *       --host=10.0.0.5 --port=50052 --protocol=tcp --global_segment_size="32 GB"
 *
 * The segment's endpoint is host:port (a wildcard host is advertised as this machine's primary
 * address); peers write and read replicas there. The segment memory is reserved, not committed:
 * pages are backed only when objects land in them, so "32 GB" starts on a smaller machine. The
 * client pings the master every second and re-mounts its segment when the master restarts.
 *
 * --enable_offload=true (with mooncake_master --enable_offload) offloads the objects of the
 * segment to the backend the MOONCAKE_OFFLOAD_* / MOONCAKE_DISTRIBUTED_* environment selects
 * (docs/offload.md), and serves reads of its local-disk files to other clients. An invalid
 * variable or an unusable directory stops it at start with one line on stderr.
 *
 * Dummy clients (upstream's setup_dummy) on this host are served on the abstract unix socket
 * "@mooncake_client_<port>.sock" (src/client/real_client_service.h): this user or root, and the
 * cluster secret when one is set.
 * --enable_http_server (--http_port=9300) serves GET /health, /metrics and /metrics/summary on
 * the --host address (src/client/client_http.h); a port that cannot be bound only warns.
 *
 * SIGINT/SIGTERM drain the offload queue (MOONCAKE_OFFLOAD_CLOSE_DRAIN_SECONDS), unmount the
 * segment and exit 0.
 */
#include "flags.h"
#include "log.h"
#include "mooncake/store.h"
#include "net.h"
#include "offload.h"
#include "parse.h"
#include "real_client_service.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Upstream flags this program accepts for compatibility but does not implement. */
static const char *const ignored_flags[] = {"tenant_id", "start_offload_rpc_server",
                                            "use_mmap_arena_allocator", "mmap_arena_pool_size",
                                            NULL};

/* The process's one taker of SIGINT/SIGTERM (see main). */
typedef struct signal_watch {
    const sigset_t *set;
    atomic_int ready; /* setup finished: the main thread handles the signal */
    atomic_int sig;
    sem_t got;
} signal_watch_t;

static void *signal_watch_main(void *arg)
{
    signal_watch_t *w = arg;
    int sig = 0;
    while (sigwait(w->set, &sig) != 0)
        ;
    atomic_store(&w->sig, sig);
    if (!atomic_load(&w->ready)) {
        MC_WARN("mooncake_client: signal %d during setup: exiting before serving", sig);
        _exit(1);
    }
    sem_post(&w->got);
    return NULL;
}

int main(int argc, char **argv)
{
    char *master = "127.0.0.1:50051", *metadata = "http://127.0.0.1:8080/metadata";
    char *host = "0.0.0.0", *protocol = "tcp", *devices = "";
    int64_t port = 50052;
    uint64_t segment_size = 4ull << 30, buffer_size = 0;
    int enable_offload = 0, logtostderr = 1;
    char *secret = "", *secret_file = "";
    int64_t master_wait = -1; /* -1: MC_MASTER_WAIT_TIMEOUT or 30 s */
    int64_t verbosity = 0;
    int64_t threads = 1;
    int enable_http_server = 0; /* upstream's client HTTP server (src/client/client_http.h) */
    int64_t http_port = 9300;
    const char *prefault = NULL; /* NULL: $MC_SEGMENT_PREFAULT or background */
    const char *prefault_floor = NULL;
    mc_flag_t flags[] = {
        {"master_server_address", MC_FLAG_STRING, &master,
         "mooncake_master address host:port, or etcd://h:p;h:p to follow the elected master "
         "(HA; cluster id from $MC_STORE_CLUSTER_ID)"},
        {"metadata_server", MC_FLAG_STRING, &metadata,
         "P2PHANDSHAKE, http://host:port/metadata or etcd://host:port[;host:port]"},
        {"host", MC_FLAG_STRING, &host,
         "address peers reach this client at (0.0.0.0 = this machine's primary address); "
         "host:port fixes the port too"},
        {"port", MC_FLAG_INT, &port, "service port: the segment endpoint is host:port", 1, 65535},
        {"protocol", MC_FLAG_STRING, &protocol,
         "transfer protocol: tcp or rdma (UCX; with no RDMA device it warns once and runs over "
         "UCX's tcp/shm transports, unless env MC_RDMA_REQUIRE_DEVICE=1 makes that an error)"},
        {"device_names", MC_FLAG_STRING, &devices,
         "rdma devices, comma list (\"mlx5_0,mlx5_1\", port 1 unless \"mlx5_0:2\"; \"\" = "
         "automatic); an unknown device fails start-up"},
        {"global_segment_size", MC_FLAG_SIZE, &segment_size,
         "bytes contributed to the store (\"32 GB\"); committed after start-up by the "
         "pre-fault pass (--segment_prefault), else as objects arrive"},
        {"segment_prefault", MC_FLAG_STRING, &prefault,
         "commit the segment's pages ahead of puts: background (default: an idle-priority "
         "thread after start-up), sync (before the segment is mounted) or off (pages fault on "
         "first put, as upstream); default $MC_SEGMENT_PREFAULT"},
        {"segment_prefault_floor", MC_FLAG_STRING, &prefault_floor,
         "the pre-fault pass stops when MemAvailable would drop below this size (\"2 GiB\"); "
         "default $MC_SEGMENT_PREFAULT_FLOOR or 10% of MemTotal (at least 256 MiB)"},
        {"local_buffer_size", MC_FLAG_SIZE, &buffer_size,
         "bytes of local staging buffer (0: this client only serves its segment)"},
        {"enable_offload", MC_FLAG_BOOL, &enable_offload,
         "offload the segment's objects to the storage backend of the MOONCAKE_OFFLOAD_* "
         "environment (needs mooncake_master --enable_offload)"},
        {"master_wait_timeout", MC_FLAG_INT, &master_wait,
         "seconds to keep retrying a mooncake_master that does not answer yet (started in any "
         "order), backoff 0.1..2 s; default $MC_MASTER_WAIT_TIMEOUT or 30; 0 = fail at once",
         -1, 86400},
        {"cluster_secret_file", MC_FLAG_STRING, &secret_file,
         "file holding the cluster secret every connection must prove (docs/security.md); "
         "default $MOONCAKE_CLUSTER_SECRET_FILE"},
        {"cluster_secret", MC_FLAG_STRING, &secret,
         "the cluster secret itself (visible in ps: prefer --cluster_secret_file); default "
         "$MOONCAKE_CLUSTER_SECRET"},
        {"threads", MC_FLAG_INT, &threads,
         "threads serving each dummy client (setup_dummy) on this host: that many of its calls "
         "run at once",
         1, MC_DUMMY_MAX_LANES},
        {"enable_http_server", MC_FLAG_BOOL, &enable_http_server,
         "serve GET /health, /metrics, /metrics/summary on --host:--http_port (as upstream)"},
        {"http_port", MC_FLAG_INT, &http_port,
         "port of the client HTTP server, 1..65535 (others fail start-up with -600)", INT32_MIN,
         INT32_MAX},
        {"logtostderr", MC_FLAG_BOOL, &logtostderr, "log to stderr (always on)"},
        {"v", MC_FLAG_INT, &verbosity, "verbose log level", 0, 10},
    };
    char err[1024];
    int rc = mc_flags_parse(flags, sizeof(flags) / sizeof(flags[0]), ignored_flags, argc, argv,
                            "mooncake_client", "Usage: mooncake_client [flags]", err, sizeof(err));
    if (rc == MC_FLAGS_EXIT_OK)
        return 0;
    if (rc != 0) {
        fprintf(stderr, "mooncake_client: %s\n", err);
        return 1;
    }
    mc_log_set_verbosity((int)verbosity);
    /* The store reads these from the environment (src/client/prefault.h), checking them. */
    if ((prefault && setenv("MC_SEGMENT_PREFAULT", prefault, 1) != 0) ||
        (prefault_floor && setenv("MC_SEGMENT_PREFAULT_FLOOR", prefault_floor, 1) != 0)) {
        fprintf(stderr, "mooncake_client: setenv: %s\n", strerror(errno));
        return 1;
    }

    char local[MC_ENDPOINT_MAX], h[MC_HOST_MAX];
    int hport;
    if (mc_net_split_endpoint(host, (int)port, h, &hport) != 0) {
        fprintf(stderr, "mooncake_client: --host \"%s\" is not host or host:port\n", host);
        return 1;
    }
    snprintf(local, sizeof(local), strchr(h, ':') ? "[%s]:%d" : "%s:%d", h, hport);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    if (ram && segment_size > ram) {
        char seg_text[32], ram_text[32];
        MC_WARN("--global_segment_size %s is larger than this machine's %s of memory: it is "
                "committed only down to the pre-fault floor (--segment_prefault_floor), then as "
                "objects arrive, and the master evicts only at "
                "--eviction_high_watermark_ratio of it, so the host can run out of memory first",
                mc_format_size(segment_size, seg_text, sizeof(seg_text)),
                mc_format_size(ram, ram_text, sizeof(ram_text)));
    }
    rc = mc_offload_check_environment(segment_size, enable_offload, NULL, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "mooncake_client: offload: %s\n", err);
        return 1;
    }

    /* Signals are taken synchronously by one watcher thread; every other thread inherits the
     * mask. Setup may take long (waiting for the master, a sync segment pre-fault): a signal
     * during it ends the process at once (nothing is mounted or served yet); after it, the main
     * thread unmounts and exits cleanly. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal_watch_t watch = {.set = &set};
    sem_init(&watch.got, 0, 0);
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, signal_watch_main, &watch) != 0) {
        fprintf(stderr, "mooncake_client: cannot start the signal thread\n");
        return 1;
    }

    mc_store_config_t cfg = {.local_hostname = local,
                             .metadata_server = metadata,
                             .global_segment_size = segment_size,
                             .local_buffer_size = buffer_size,
                             .protocol = protocol,
                             .device_name = devices,
                             .master_server_addr = master,
                             .enable_offload = enable_offload,
                             .cluster_secret = secret,
                             .cluster_secret_file = secret_file,
                             .enable_http_server = enable_http_server,
                             .http_port = (int)http_port,
                             .http_host = h,
                             .master_wait_timeout_ms = master_wait < 0    ? 0
                                                       : master_wait == 0 ? -1
                                                                          : master_wait * 1000};
    mc_store_t *store;
    rc = mc_store_setup(&cfg, &store);
    if (rc != 0) {
        fprintf(stderr, "mooncake_client: setup failed: %s (%d); see the log above\n",
                mc_error_name(rc), rc);
        return 1;
    }
    mc_real_client_service_t *dummies = NULL;
    rc =
        mc_real_client_service_start(store, (int)port, (int)threads, secret, secret_file, &dummies);
    if (rc != 0) {
        fprintf(stderr,
                "mooncake_client: cannot serve dummy clients on @" MC_DUMMY_SOCKET_FMT
                ": %s (%d); see the log above\n",
                (int)port, mc_error_name(rc), rc);
        mc_store_free(store);
        return 1;
    }
    char seg[64];
    mc_format_size(segment_size, seg, sizeof(seg));
    MC_INFO("mooncake_client ready: segment %s (%s), master %s, protocol %s",
            mc_store_get_hostname(store), seg, master, protocol);
    printf("mooncake_client ready: segment %s\n", mc_store_get_hostname(store));
    fflush(stdout);

    atomic_store(&watch.ready, 1);
    while (sem_wait(&watch.got) != 0 && errno == EINTR)
        ;
    pthread_join(watcher, NULL);
    MC_INFO("mooncake_client: signal %d, unmounting and exiting", atomic_load(&watch.sig));
    mc_real_client_service_stop(dummies);
    mc_store_free(store);
    return 0;
}
