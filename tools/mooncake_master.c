/*
 * mooncake_master.c — the Mooncake Store master's command: flags, config file and validation,
 * then one master server (src/master/server.h: the Master Service behind its RPC server, the
 * admin/metrics HTTP server, optionally the embedded HTTP metadata server, the operation log,
 * the election and snapshots) until a stop signal. Command line and config file are upstream
 * Mooncake's `mooncake_master`:
 *
 *   mooncake_master [--rpc_port=50051] [--rpc_address=0.0.0.0] [--config_path=master.yaml] ...
 *
 * Settings come from, in order of precedence: a flag given on the command line, the key of the
 * same name in --config_path (JSON, or YAML by the .yaml/.yml extension; `client_live_ttl_sec` is
 * the file's name for --client_ttl), the offload environment variables (for the three offload
 * backend flags only), the built-in default. Without --offload-backend (and without
 * $MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR) the master declares no backend: it takes what the
 * offloading clients report (docs/offload.md). Every other flag of upstream's master is either
 * refused (exit 2 with one line saying why and what to do) unless given at its default, because
 * ignoring it would change what the user gets (--enable_ha, --root_fs_dir, ...), or accepted with
 * one WARNING saying why it has no effect here; docs/master-flags.md lists every flag.
 *
 * Limits on what clients and peers may make the master hold (docs/limits.md): --max_connections,
 * --rpc_conn_timeout_seconds (idle), --rpc_frame_timeout_seconds (stalled mid-frame),
 * --rpc_max_buffered_size, --max_segment_size, and for the embedded metadata server
 * --http_metadata_max_value_size, --http_metadata_max_keys, --http_metadata_max_total_size.
 *
 * Once every server is listening it logs one line, `Master service started on port N, ...`,
 * listing every effective setting with the ports actually bound (so port 0 is usable by tests).
 * SIGINT/SIGTERM (taken through a signalfd, no handler) stop the servers and exit 0.
 * Exit 1 with one line on stderr for a bad flag, value or config file, exit 2 for a refused
 * flag (same on the command line and in the file); exit 1 when a port cannot be bound (the log line
 * names the address and port).
 */
#include "auth.h"
#include "errbuf.h"
#include "flags.h"
#include "oplog.h"
#include "log.h"
#include "master_view.h"
#include "net.h"
#include "master_service.h"
#include "mooncake/errors.h"
#include "mooncake/http_metadata.h"
#include "parse.h"
#include "rpc_server.h"
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#define PROGRAM "mooncake_master"
#define USAGE "Usage: mooncake_master [flags]   (e.g. --rpc_port=50051 --config_path=master.yaml)"
#define ERR_MAX 1024
#define PORT_MAX 65535
#define THREADS_MAX 4096
#define FILE_KEY_CLIENT_TTL "client_live_ttl_sec"
#define LOG_FILE_NAME "mooncake_master.INFO"
#define ENV_OFFLOAD_BACKEND "MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR"
#define ENV_DFS_TYPE "MOONCAKE_DISTRIBUTED_FS_TYPE"
#define ENV_DFS_ROOT "MOONCAKE_DISTRIBUTED_ROOT_DIR"

/* ---- upstream flags we do not implement ---------------------------------------------------- */

/*
 * Every other flag of upstream's mooncake_master, typed as upstream types it so `--enable_ha`
 * alone parses as a boolean. A REFUSED flag given at any value but its default stops the start-up
 * with exit 2 and one line naming the flag, why and what to do: ignoring it would change what the
 * user gets. A NO-OP flag is accepted with one WARNING saying why it changes nothing here.
 * docs/master-flags.md lists both.
 */
/* COMPAT_SNAPSHOT: upstream's snapshot flags, implemented here (snapshot_check; the server runs
 * them). */
typedef enum compat_kind { COMPAT_NOOP, COMPAT_REFUSED, COMPAT_SNAPSHOT } compat_kind_t;

typedef struct compat_flag {
    const char *name;
    mc_flag_type_t type; /* MC_FLAG_BOOL, MC_FLAG_INT, MC_FLAG_DOUBLE or MC_FLAG_STRING */
    const char *def;     /* upstream's default, as text */
    compat_kind_t kind;
    const char *why; /* refused: why and what to do; no-op: why nothing changes */
} compat_flag_t;

#define WHY_NOF "there is no NVMe-oF tier here (no NoF segment can be mounted)"
#define WHY_DYN "only used with --dynamic_replication_mode observe|enforce, which are refused"
#define WHY_KV "only used with --enable_kv_events, which is refused"
#define WHY_DISK "only used with --root_fs_dir (legacy DISK tier), which is refused"
#define WHY_TENANT "only used with --enable_multi_tenants, which is refused"
#define WHY_SNAP "only used by upstream's snapshot catalog and payload stores (ours: local files)"
#define WHY_CXL "only used with --enable_cxl, which is refused"
#define WHY_K8S "names the k8s leader of upstream's k8s HA backend; only etcd is built here"

/* clang-format off */
static const compat_flag_t compat_flags[] = {
    {"enable_snapshot", MC_FLAG_BOOL, "false", COMPAT_SNAPSHOT,
     "periodic snapshots of the object records under $MOONCAKE_SNAPSHOT_LOCAL_PATH, and a clean "
     "one at SIGTERM/SIGINT (docs/master-flags.md)"},
    {"enable_snapshot_restore", MC_FLAG_BOOL, "false", COMPAT_SNAPSHOT,
     "at start, restore the newest snapshot that verifies (else the next older, else empty)"},
    {"root_fs_dir", MC_FLAG_STRING, "", COMPAT_REFUSED,
     "the legacy shared-filesystem DISK tier is not implemented; use --enable_offload with "
     "--offload-backend=distributed --distributed-root-dir=DIR (docs/offload.md)"},
    {"enable_cxl", MC_FLAG_BOOL, "false", COMPAT_REFUSED,
     "CXL memory segments are not implemented; drop the flag"},
    {"enable_kv_events", MC_FLAG_BOOL, "false", COMPAT_REFUSED,
     "KV-cache event publishing (ZMQ) is not implemented; drop the flag"},
    {"enable_multi_tenants", MC_FLAG_BOOL, "false", COMPAT_REFUSED,
     "per-tenant namespaces and quotas are not implemented (every client shares one namespace); "
     "drop the flag"},
    {"offload_force_evict", MC_FLAG_BOOL, "false", COMPAT_REFUSED,
     "there is no per-cycle offload cap to force eviction past; drop the flag"},
    {"dynamic_replication_mode", MC_FLAG_STRING, "off", COMPAT_REFUSED,
     "dynamic replication of hot keys is not implemented; use --dynamic_replication_mode=off or "
     "ask for replicas per put (ReplicateConfig.replica_num)"},
    {"memory_allocator", MC_FLAG_STRING, "offset", COMPAT_REFUSED,
     "only the offset allocator is implemented; use --memory_allocator=offset"},
    {"allocation_strategy", MC_FLAG_STRING, "random", COMPAT_REFUSED,
     "only the random strategy is implemented (preferred segments first, then a random start); "
     "use --allocation_strategy=random"},
    {"enable_metadata_cleanup_on_timeout", MC_FLAG_BOOL, "false", COMPAT_REFUSED,
     "deleting an expired client's transfer-engine metadata is not implemented; drop the flag"},
    {"flagfile", MC_FLAG_STRING, "", COMPAT_REFUSED,
     "gflags flag files are not read; put the settings in --config_path (JSON or YAML)"},
    {"enable_metric_reporting", MC_FLAG_BOOL, "true", COMPAT_NOOP,
     "no periodic summary in the log; GET /metrics/summary on --metrics_port has it"},
    {"nof_eviction_ratio", MC_FLAG_DOUBLE, "0.05", COMPAT_NOOP, WHY_NOF},
    {"nof_eviction_high_watermark_ratio", MC_FLAG_DOUBLE, "0.90", COMPAT_NOOP, WHY_NOF},
    {"nof_heartbeat_interval_sec", MC_FLAG_INT, "10", COMPAT_NOOP, WHY_NOF},
    {"nof_heartbeat_probe_timeout_ms", MC_FLAG_INT, "1000", COMPAT_NOOP, WHY_NOF},
    {"nof_heartbeat_failures_threshold", MC_FLAG_INT, "3", COMPAT_NOOP, WHY_NOF},
    {"offload_cap_ratio", MC_FLAG_DOUBLE, "0.5", COMPAT_NOOP,
     "there is no per-cycle offload cap: --offloading_queue_limit bounds each client's queue"},
    {"dynamic_replication_heat_window_seconds", MC_FLAG_INT, "10", COMPAT_NOOP, WHY_DYN},
    {"dynamic_replication_admission_qps_threshold", MC_FLAG_DOUBLE, "0.8", COMPAT_NOOP, WHY_DYN},
    {"dynamic_replication_max_memory_replicas", MC_FLAG_INT, "2", COMPAT_NOOP, WHY_DYN},
    {"kv_events_bind_endpoint", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_KV},
    {"kv_events_model_name", MC_FLAG_STRING, "", COMPAT_NOOP, "deprecated upstream and ignored there"},
    {"kv_events_backend_id", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_KV},
    {"kv_events_tenant_id", MC_FLAG_STRING, "default", COMPAT_NOOP,
     "deprecated upstream and ignored there"},
    {"kv_events_additional_salt", MC_FLAG_STRING, "", COMPAT_NOOP,
     "deprecated upstream and ignored there"},
    {"kv_events_lora_name", MC_FLAG_STRING, "", COMPAT_NOOP, "deprecated upstream and ignored there"},
    {"kv_events_block_size", MC_FLAG_INT, "0", COMPAT_NOOP, "deprecated upstream and ignored there"},
    {"kv_events_dp_rank", MC_FLAG_INT, "0", COMPAT_NOOP, "deprecated upstream and ignored there"},
    {"kv_events_emit_legacy_compat", MC_FLAG_BOOL, "true", COMPAT_NOOP, WHY_KV},
    {"kv_events_emit_object_key", MC_FLAG_BOOL, "true", COMPAT_NOOP, WHY_KV},
    {"kv_events_queue_capacity", MC_FLAG_INT, "65536", COMPAT_NOOP, WHY_KV},
    {"pod_name", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_K8S},
    {"pod_namespace", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_K8S},
    {"batch_oplog_retry_timeout_sec", MC_FLAG_INT, "180", COMPAT_NOOP,
     "a standby here retries a failing read of the operation log for as long as it runs"},
    {"global_file_segment_size", MC_FLAG_INT, "9223372036854775807", COMPAT_NOOP, WHY_DISK},
    {"enable_disk_eviction", MC_FLAG_BOOL, "true", COMPAT_NOOP, WHY_DISK},
    {"quota_bytes", MC_FLAG_INT, "0", COMPAT_NOOP, WHY_DISK},
    {"tenant_quota_connector_type", MC_FLAG_STRING, "file", COMPAT_NOOP, WHY_TENANT},
    {"tenant_quota_connector_uri", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_TENANT},
    {"snapshot_backup_dir", MC_FLAG_STRING, "", COMPAT_SNAPSHOT,
     "a second copy of every snapshot under this directory"},
    {"snapshot_interval_seconds", MC_FLAG_INT, "600", COMPAT_SNAPSHOT,
     "seconds between periodic snapshots"},
    {"snapshot_child_timeout_seconds", MC_FLAG_INT, "300", COMPAT_SNAPSHOT,
     "a snapshot taking longer is abandoned (no child is forked: the write itself is bounded)"},
    {"snapshot_retention_count", MC_FLAG_INT, "2", COMPAT_SNAPSHOT, "snapshots kept"},
    {"snapshot_object_store_type", MC_FLAG_STRING, "", COMPAT_SNAPSHOT,
     "local (or empty): files under $MOONCAKE_SNAPSHOT_LOCAL_PATH; s3 is refused"},
    {"snapshot_payload_store_type", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_SNAP},
    {"snapshot_payload_backend_type", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_SNAP},
    {"snapshot_catalog_store_type", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_SNAP},
    {"snapshot_catalog_backend_type", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_SNAP},
    {"snapshot_catalog_store_connstring", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_SNAP},
    {"snapshot_catalog_backend_connstring", MC_FLAG_STRING, "", COMPAT_NOOP, WHY_SNAP},
    {"cxl_path", MC_FLAG_STRING, "/dev/dax0.0", COMPAT_NOOP, WHY_CXL},
    {"cxl_size", MC_FLAG_INT, "8589934592", COMPAT_NOOP, WHY_CXL},
};
/* clang-format on */

#define COMPAT_COUNT (sizeof(compat_flags) / sizeof(compat_flags[0]))

/* ---- options ----------------------------------------------------------------------------- */

/* A compatibility flag's value, as its type stores it. */
typedef union compat_value {
    int b;
    int64_t i;
    double d;
    char *s;
} compat_value_t;

typedef struct master_opts {
    int64_t rpc_port;
    int64_t port;
    char *rpc_address;
    char *rpc_interface; /* "" = none; else its IPv4 address replaces rpc_address */
    int rpc_enable_tcp_no_delay;
    int64_t rpc_thread_num;
    int64_t max_threads;
    int64_t metrics_port;
    char *metrics_host;
    int enable_http_metadata_server;
    char *http_metadata_server_host;
    int64_t http_metadata_server_port;
    uint64_t http_metadata_max_value_size; /* bytes */
    int64_t http_metadata_max_keys;
    uint64_t http_metadata_max_total_size; /* bytes */
    int64_t max_connections;
    int64_t rpc_conn_timeout_seconds;  /* idle; 0 = never */
    int64_t rpc_frame_timeout_seconds; /* stalled mid-frame */
    uint64_t rpc_max_buffered_size;    /* bytes */
    int64_t rpc_spin_us;               /* poll without blocking after a frame; 0 = off */
    uint64_t max_segment_size;         /* bytes */
    uint64_t default_kv_lease_ttl;     /* ms */
    uint64_t default_kv_soft_pin_ttl;  /* ms */
    uint64_t max_kv_soft_pin_ttl;      /* ms */
    int allow_evict_soft_pinned_objects;
    double eviction_ratio;
    double eviction_high_watermark_ratio;
    int64_t client_ttl; /* s */
    int64_t put_start_discard_timeout_sec;
    int64_t put_start_release_timeout_sec;
    int enable_offload;
    int offload_on_evict;
    int64_t offload_task_timeout_sec;
    int64_t offload_max_attempts;
    uint64_t offload_put_wait_ms;
    uint64_t fence_put_wait_ms;
    int64_t offloading_queue_limit;
    int promotion_on_hit;
    int64_t promotion_admission_threshold;
    int64_t promotion_queue_limit;
    int64_t promotion_max_per_heartbeat;
    int64_t max_total_finished_tasks, max_total_pending_tasks, max_total_processing_tasks;
    int64_t pending_task_timeout_sec, processing_task_timeout_sec, max_retry_attempts;
    char *offload_backend;      /* "" = $MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR, else none */
    char *distributed_fs_type;  /* "" = $MOONCAKE_DISTRIBUTED_FS_TYPE, else posix */
    char *distributed_root_dir; /* "" = $MOONCAKE_DISTRIBUTED_ROOT_DIR */
    char *cluster_secret;       /* "" = --cluster_secret_file, then the environment */
    char *cluster_secret_file;
    int enable_ha;               /* leader election on etcd (ha.h) */
    char *ha_backend_type;       /* "etcd" (redis and k8s are refused) */
    char *ha_backend_connstring; /* etcd endpoints; "" = --etcd_endpoints */
    char *etcd_endpoints;
    char *cluster_id;
    int64_t ha_lease_ttl_seconds; /* ours: the election lease TTL (upstream fixes it at 5 s) */
    int enable_oplog;             /* the operation log in etcd (oplog.h) */
    int64_t oplog_poll_interval_ms;
    int64_t oplog_batch_max_entries;
    int oplog_sync_ack; /* ours: acknowledge a change only once it is in etcd */
    char *config_path;
    char *log_dir;
    int logtostderr;
    int64_t v;
    compat_value_t compat[COMPAT_COUNT]; /* compat_flags[i] */
    int refused;                         /* validate() failed on a refused flag: exit 2 */
    /* snapshots (snapshot_check): from the COMPAT_SNAPSHOT flags and the environment */
    struct {
        int enable, restore;
        int64_t interval_s, timeout_s, retention;
        const char *root, *backup_dir;
    } snap;
} master_opts_t;

static char empty_string[] = "";
static char any_address[] = "0.0.0.0";
static char etcd_string[] = "etcd";
static char default_cluster[] = MC_DEFAULT_CLUSTER_ID;

/* f's upstream default into *v (the texts in compat_flags always parse). */
static void compat_parse_default(const compat_flag_t *f, compat_value_t *v)
{
    char msg[128];
    memset(v, 0, sizeof(*v));
    if (f->type == MC_FLAG_BOOL)
        (void)mc_parse_bool(f->def, &v->b, msg, sizeof(msg));
    else if (f->type == MC_FLAG_INT)
        (void)mc_parse_int64(f->def, INT64_MIN, INT64_MAX, &v->i, msg, sizeof(msg));
    else if (f->type == MC_FLAG_DOUBLE)
        (void)mc_parse_double(f->def, -1e300, 1e300, &v->d, msg, sizeof(msg));
    else
        v->s = (char *)f->def; /* never written through: the parser replaces the pointer */
}

/* Whether *v differs from f's upstream default. */
static int compat_changed(const compat_flag_t *f, const compat_value_t *v)
{
    compat_value_t d;
    compat_parse_default(f, &d);
    switch (f->type) {
    case MC_FLAG_BOOL:
        return v->b != d.b;
    case MC_FLAG_INT:
        return v->i != d.i;
    case MC_FLAG_DOUBLE:
        return v->d != d.d;
    default:
        return strcmp(v->s, d.s) != 0;
    }
}

static void opts_default(master_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->port = 50051;
    o->rpc_address = any_address;
    o->max_threads = 16;
    o->metrics_port = 9003;
    o->metrics_host = any_address;
    o->http_metadata_server_host = any_address;
    o->http_metadata_server_port = 8080;
    o->http_metadata_max_value_size = MC_HTTP_METADATA_MAX_VALUE;
    o->http_metadata_max_keys = MC_HTTP_METADATA_DEFAULT_MAX_KEYS;
    o->http_metadata_max_total_size = MC_HTTP_METADATA_DEFAULT_MAX_TOTAL;
    o->max_connections = MC_RPC_DEFAULT_MAX_CONNECTIONS;
    o->rpc_conn_timeout_seconds = MC_RPC_DEFAULT_IDLE_TIMEOUT_MS / 1000;
    o->rpc_spin_us = MC_RPC_DEFAULT_SPIN_US;
    o->rpc_frame_timeout_seconds = MC_RPC_DEFAULT_FRAME_TIMEOUT_MS / 1000;
    o->rpc_max_buffered_size = MC_RPC_DEFAULT_MAX_BUFFERED;
    o->max_segment_size = MC_MASTER_DEFAULT_MAX_SEGMENT_SIZE;
    o->default_kv_lease_ttl = 10000;
    o->default_kv_soft_pin_ttl = 1800000;
    o->max_kv_soft_pin_ttl = 86400000;
    o->allow_evict_soft_pinned_objects = 1;
    o->eviction_ratio = 0.05;
    o->eviction_high_watermark_ratio = 0.90;
    o->client_ttl = 10;
    o->put_start_discard_timeout_sec = 30;
    o->put_start_release_timeout_sec = 600;
    o->offload_task_timeout_sec = 60;
    o->offload_max_attempts = 3;
    o->offload_put_wait_ms = 10000;
    o->fence_put_wait_ms = 1000;
    o->offloading_queue_limit = 50000;
    o->promotion_admission_threshold = 2;
    o->promotion_queue_limit = 50000;
    o->promotion_max_per_heartbeat = 1;
    o->max_total_finished_tasks = 10000;
    o->max_total_pending_tasks = 10000;
    o->max_total_processing_tasks = 10000;
    o->pending_task_timeout_sec = 300;
    o->processing_task_timeout_sec = 300;
    o->max_retry_attempts = 10;
    o->offload_backend = empty_string;
    o->distributed_fs_type = empty_string;
    o->distributed_root_dir = empty_string;
    o->cluster_secret = empty_string;
    o->cluster_secret_file = empty_string;
    o->config_path = empty_string;
    o->log_dir = empty_string;
    o->rpc_interface = empty_string;
    o->rpc_enable_tcp_no_delay = 1;
    o->ha_backend_type = etcd_string;
    o->ha_backend_connstring = empty_string;
    o->etcd_endpoints = empty_string;
    o->cluster_id = default_cluster;
    o->ha_lease_ttl_seconds = MC_MASTER_VIEW_LEASE_TTL_S;
    o->oplog_poll_interval_ms = MC_OPLOG_DEFAULT_POLL_MS;
    o->oplog_batch_max_entries = MC_OPLOG_DEFAULT_BATCH_MAX_ENTRIES;
    o->oplog_sync_ack = 1;
    for (size_t i = 0; i < COMPAT_COUNT; i++)
        compat_parse_default(&compat_flags[i], &o->compat[i]);
}

/* clang-format off */
#define FLAG(name, type, field, help) {name, type, &o->field, help, 0, 0, 0}
#define FLAG_INT(name, field, lo, hi, help) {name, MC_FLAG_INT, &o->field, help, lo, hi, 0}
/* clang-format on */

/* The flag table over *o; returns the number of entries written to out. */
static size_t flags_table(master_opts_t *o, mc_flag_t *out, size_t cap)
{
    const mc_flag_t t[] = {
        FLAG_INT("rpc_port", rpc_port, 0, PORT_MAX, "RPC port; 0 = use --port"),
        FLAG_INT("port", port, 0, PORT_MAX, "deprecated alias of --rpc_port"),
        FLAG("rpc_address", MC_FLAG_STRING, rpc_address, "address the RPC server binds"),
        FLAG("enable_ha", MC_FLAG_BOOL, enable_ha,
             "leader election on etcd: standbys wait, the leader serves (docs/ha.md)"),
        FLAG("ha_backend_type", MC_FLAG_STRING, ha_backend_type,
             "HA backend: etcd (upstream's redis and k8s are not built)"),
        FLAG("ha_backend_connstring", MC_FLAG_STRING, ha_backend_connstring,
             "etcd endpoints h:p;h:p (empty: --etcd_endpoints)"),
        FLAG("etcd_endpoints", MC_FLAG_STRING, etcd_endpoints,
             "etcd endpoints h:p;h:p or h:p,h:p (legacy spelling)"),
        FLAG("cluster_id", MC_FLAG_STRING, cluster_id,
             "names the HA keys mooncake-store/<id>/...; clients: MC_STORE_CLUSTER_ID"),
        FLAG_INT("ha_lease_ttl_seconds", ha_lease_ttl_seconds, 1, 60,
                 "election lease TTL (failover takes about one TTL)"),
        FLAG("enable_oplog", MC_FLAG_BOOL, enable_oplog,
             "log every object change in etcd so a new leader serves the objects (needs HA)"),
        FLAG_INT("oplog_poll_interval_ms", oplog_poll_interval_ms, 10, 60000,
                 "how often a standby reads new operation-log batches"),
        FLAG_INT("oplog_batch_max_entries", oplog_batch_max_entries, 1, 100000,
                 "entries in one operation-log batch at most"),
        FLAG("oplog_sync_ack", MC_FLAG_BOOL, oplog_sync_ack,
             "acknowledge a put/remove only once it is in etcd (false: at once, as upstream; "
             "a failover then loses the last unlogged ones)"),
        FLAG("rpc_interface", MC_FLAG_STRING, rpc_interface,
             "NIC whose IPv4 address replaces --rpc_address (an unknown NIC is an error)"),
        FLAG("rpc_enable_tcp_no_delay", MC_FLAG_BOOL, rpc_enable_tcp_no_delay,
             "TCP_NODELAY on RPC sockets (always on: false is accepted with a warning)"),
        FLAG_INT("rpc_thread_num", rpc_thread_num, 0, MC_RPC_MAX_THREADS,
                 "RPC event-loop threads; 0 = min(--max_threads, hardware threads)"),
        FLAG_INT("max_threads", max_threads, 1, THREADS_MAX, "upper bound of --rpc_thread_num=0"),
        FLAG_INT("metrics_port", metrics_port, 0, PORT_MAX, "admin/metrics HTTP port"),
        FLAG("metrics_host", MC_FLAG_STRING, metrics_host, "admin/metrics HTTP bind address"),
        FLAG("enable_http_metadata_server", MC_FLAG_BOOL, enable_http_metadata_server,
             "serve the HTTP metadata service (http://host:port/metadata)"),
        FLAG("http_metadata_server_host", MC_FLAG_STRING, http_metadata_server_host,
             "HTTP metadata server bind address"),
        FLAG_INT("http_metadata_server_port", http_metadata_server_port, 0, PORT_MAX,
                 "HTTP metadata server port"),
        FLAG("http_metadata_max_value_size", MC_FLAG_SIZE, http_metadata_max_value_size,
             "largest value the HTTP metadata server stores (larger: 413)"),
        FLAG_INT("http_metadata_max_keys", http_metadata_max_keys, 1, INT32_MAX,
                 "keys the HTTP metadata server holds at most (a new key beyond: 507)"),
        FLAG("http_metadata_max_total_size", MC_FLAG_SIZE, http_metadata_max_total_size,
             "bytes the HTTP metadata server holds at most (beyond: 507)"),
        FLAG_INT("max_connections", max_connections, 1, 1000000,
                 "open RPC connections at most; more are accepted and closed"),
        FLAG_INT("rpc_conn_timeout_seconds", rpc_conn_timeout_seconds, 0, INT32_MAX / 1000,
                 "an RPC connection with nothing in flight this long is closed (0 = never)"),
        FLAG_INT("rpc_frame_timeout_seconds", rpc_frame_timeout_seconds, 1, INT32_MAX / 1000,
                 "an RPC connection stalled this long mid-frame (or not reading its replies) "
                 "is closed"),
        FLAG("rpc_max_buffered_size", MC_FLAG_SIZE, rpc_max_buffered_size,
             "receive-buffer bytes of all RPC connections together (at least 65 MiB)"),
        FLAG_INT("rpc_spin_us", rpc_spin_us, 0, MC_RPC_MAX_SPIN_US,
                 "after each request an RPC thread polls without sleeping this long (us) for the "
                 "next one, sparing a busy client the wake-up of a halted CPU (0 = off)"),
        FLAG("max_segment_size", MC_FLAG_SIZE, max_segment_size,
             "a segment mount larger than this is refused"),
        FLAG("default_kv_lease_ttl", MC_FLAG_DURATION_MS, default_kv_lease_ttl,
             "read lease granted by Get/Exist (ms, or with ms|s|m|h)"),
        FLAG("default_kv_soft_pin_ttl", MC_FLAG_DURATION_MS, default_kv_soft_pin_ttl,
             "soft-pin TTL when a put does not give one"),
        FLAG("max_kv_soft_pin_ttl", MC_FLAG_DURATION_MS, max_kv_soft_pin_ttl,
             "largest soft-pin TTL a put may ask for"),
        FLAG("allow_evict_soft_pinned_objects", MC_FLAG_BOOL, allow_evict_soft_pinned_objects,
             "let eviction take soft-pinned objects (last)"),
        FLAG("eviction_ratio", MC_FLAG_DOUBLE, eviction_ratio,
             "fraction of objects evicted per round, 0..1"),
        FLAG("eviction_high_watermark_ratio", MC_FLAG_DOUBLE, eviction_high_watermark_ratio,
             "memory use that triggers eviction, 0..1"),
        FLAG_INT("client_ttl", client_ttl, 1, INT32_MAX,
                 "seconds without a ping before a client is dropped"),
        FLAG_INT("put_start_discard_timeout_sec", put_start_discard_timeout_sec, 0, INT32_MAX,
                 "seconds after which a newer PutStart may replace an unfinished one"),
        FLAG_INT("put_start_release_timeout_sec", put_start_release_timeout_sec, 0, INT32_MAX,
                 "seconds after which an unfinished put is revoked"),
        FLAG("enable_offload", MC_FLAG_BOOL, enable_offload,
             "offload objects to clients' storage backends"),
        FLAG("offload_on_evict", MC_FLAG_BOOL, offload_on_evict,
             "offload at eviction time instead of after PutEnd"),
        FLAG_INT("offload_task_timeout_sec", offload_task_timeout_sec, 1, INT32_MAX,
                 "seconds an offload task stays leased to a client without a heartbeat"),
        FLAG_INT("offload_max_attempts", offload_max_attempts, 1, 1000,
                 "leases of one offload task before it is failed (and logged)"),
        FLAG("offload_put_wait_ms", MC_FLAG_DURATION_MS, offload_put_wait_ms,
             "how long a put short of memory waits for pending offloads before -200"),
        FLAG("fence_put_wait_ms", MC_FLAG_DURATION_MS, fence_put_wait_ms,
             "how long a put short of memory waits for fenced extents before evicting"),
        FLAG_INT("offloading_queue_limit", offloading_queue_limit, 1, 100000000,
                 "offload tasks queued per client; beyond, objects are not queued"),
        FLAG("promotion_on_hit", MC_FLAG_BOOL, promotion_on_hit,
             "copy disk-only objects back to memory on read (needs --enable_offload)"),
        FLAG_INT("promotion_admission_threshold", promotion_admission_threshold, INT32_MIN,
                 INT32_MAX, "hits (count-min sketch) before a promotion; clamped to 1..255"),
        FLAG_INT("promotion_queue_limit", promotion_queue_limit, 1, 100000000,
                 "cap on promotions in flight"),
        FLAG_INT("promotion_max_per_heartbeat", promotion_max_per_heartbeat, 0, 1000000,
                 "promotion tasks handed to one client per heartbeat (0 -> 1)"),
        FLAG_INT("max_total_finished_tasks", max_total_finished_tasks, 0, 100000000,
                 "finished copy/move tasks kept for QueryTask (oldest pruned)"),
        FLAG_INT("max_total_pending_tasks", max_total_pending_tasks, 0, 100000000,
                 "pending copy/move tasks; creating more fails with -1401"),
        FLAG_INT("max_total_processing_tasks", max_total_processing_tasks, 0, 100000000,
                 "copy/move tasks being executed at once"),
        FLAG_INT("pending_task_timeout_sec", pending_task_timeout_sec, 0, INT32_MAX,
                 "seconds a copy/move task may wait for its executor (0 = never fails)"),
        FLAG_INT("processing_task_timeout_sec", processing_task_timeout_sec, 0, INT32_MAX,
                 "seconds a copy/move task may run (0 = never fails)"),
        FLAG_INT("max_retry_attempts", max_retry_attempts, 0, 1000,
                 "fetches of a copy/move task that found no room on a target before it fails"),
        FLAG("offload_backend", MC_FLAG_STRING, offload_backend,
             "local|distributed (default $" ENV_OFFLOAD_BACKEND ", else what the clients report)"),
        FLAG("distributed_fs_type", MC_FLAG_STRING, distributed_fs_type,
             "posix|daos for the distributed backend (default $" ENV_DFS_TYPE ", else posix)"),
        FLAG("distributed_root_dir", MC_FLAG_STRING, distributed_root_dir,
             "shared root directory of the distributed backend (default $" ENV_DFS_ROOT ")"),
        FLAG("cluster_secret_file", MC_FLAG_STRING, cluster_secret_file,
             "file holding the cluster secret every connection must prove (docs/security.md); "
             "default $MOONCAKE_CLUSTER_SECRET_FILE"),
        FLAG("cluster_secret", MC_FLAG_STRING, cluster_secret,
             "the cluster secret itself (visible in ps: prefer --cluster_secret_file); "
             "default $MOONCAKE_CLUSTER_SECRET"),
        FLAG("config_path", MC_FLAG_STRING, config_path,
             "JSON or YAML (.yaml/.yml) file of settings; command-line flags win"),
        FLAG("log_dir", MC_FLAG_STRING, log_dir, "also append log lines to DIR/" LOG_FILE_NAME),
        FLAG("logtostderr", MC_FLAG_BOOL, logtostderr, "log to stderr only (no --log_dir file)"),
        FLAG_INT("v", v, 0, 9, "verbose logging level"),
    };
    size_t n = sizeof(t) / sizeof(t[0]);
    if (n > cap)
        n = cap;
    memcpy(out, t, n * sizeof(t[0]));
    static char help[COMPAT_COUNT][512];
    for (size_t i = 0; i < COMPAT_COUNT && n < cap; i++) {
        const compat_flag_t *c = &compat_flags[i];
        if (c->kind == COMPAT_REFUSED)
            snprintf(help[i], sizeof(help[i]), "upstream's; refused unless %s: %s",
                     c->def[0] ? c->def : "empty", c->why);
        else if (c->kind == COMPAT_SNAPSHOT)
            snprintf(help[i], sizeof(help[i]), "%s (default %s)", c->why,
                     c->def[0] ? c->def : "empty");
        else
            snprintf(help[i], sizeof(help[i]), "upstream's; accepted, no effect: %s", c->why);
        void *value = c->type == MC_FLAG_BOOL     ? (void *)&o->compat[i].b
                      : c->type == MC_FLAG_INT    ? (void *)&o->compat[i].i
                      : c->type == MC_FLAG_DOUBLE ? (void *)&o->compat[i].d
                                                  : (void *)&o->compat[i].s;
        mc_flag_t f = {c->name, c->type, value, help[i], 0, 0, 0};
        out[n++] = f;
    }
    return n;
}

#define FLAGS_MAX 160

/* glog flags of upstream's master that only shape its logging: accepted with one WARNING each. The
 * flags of upstream's master itself are in compat_flags. */
static const char *const ignored_flags[] = {
    "alsologtostderr",
    "stderrthreshold",
    "minloglevel",
    NULL,
};

/* A refused flag: the message, and exit 2 (main). */
static int refuse(master_opts_t *o, char *err, size_t errlen, const compat_flag_t *c,
                  const compat_value_t *v)
{
    char value[64];
    if (c->type == MC_FLAG_BOOL)
        snprintf(value, sizeof(value), "%s", v->b ? "true" : "false");
    else if (c->type == MC_FLAG_STRING)
        snprintf(value, sizeof(value), "%s", v->s);
    else if (c->type == MC_FLAG_INT)
        snprintf(value, sizeof(value), "%" PRId64, v->i);
    else
        snprintf(value, sizeof(value), "%g", v->d);
    o->refused = 1;
    return mc_fail(err, errlen, "--%s=%s is not supported: %s", c->name, value, c->why);
}

/* ---- config file ------------------------------------------------------------------------- */

/* Strings the config file put into string flags; freed at exit. */
typedef struct string_pool {
    char **items;
    size_t n;
    size_t cap;
} string_pool_t;

static char *pool_strdup(string_pool_t *p, const char *s)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        char **items = realloc(p->items, cap * sizeof(*items));
        if (!items)
            return NULL;
        p->items = items;
        p->cap = cap;
    }
    char *copy = strdup(s);
    if (copy)
        p->items[p->n++] = copy;
    return copy;
}

static void pool_free(string_pool_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i]);
    free(p->items);
}

/* What a config file is applied to. */
typedef struct file_ctx {
    mc_flag_t *flags;
    size_t nflags;
    string_pool_t *pool;
    const char *path;
    char unknown[ERR_MAX / 2]; /* comma-separated unknown keys */
    char *err;
    size_t errlen;
} file_ctx_t;

/* Parses `text` as f's type and stores it. */
static int flag_set_text(file_ctx_t *c, mc_flag_t *f, const char *key, const char *text)
{
    char msg[ERR_MAX / 2] = "";
    int rc = 0;
    switch (f->type) {
    case MC_FLAG_BOOL:
        rc = mc_parse_bool(text, f->value, msg, sizeof(msg));
        break;
    case MC_FLAG_INT:
        rc = mc_parse_int64(text, f->min < f->max ? f->min : INT64_MIN,
                            f->min < f->max ? f->max : INT64_MAX, f->value, msg, sizeof(msg));
        break;
    case MC_FLAG_DOUBLE:
        rc = mc_parse_double(text, -1e300, 1e300, f->value, msg, sizeof(msg));
        break;
    case MC_FLAG_SIZE:
        rc = mc_parse_size(text, f->value, msg, sizeof(msg));
        break;
    case MC_FLAG_DURATION_MS:
        rc = mc_parse_duration_ms(text, f->value, msg, sizeof(msg));
        break;
    case MC_FLAG_STRING: {
        char *copy = pool_strdup(c->pool, text);
        if (!copy)
            return mc_fail(c->err, c->errlen, "out of memory reading %s", c->path);
        *(char **)f->value = copy;
        break;
    }
    }
    if (rc != 0)
        return mc_fail(c->err, c->errlen, "%s: key \"%s\": %s", c->path, key, msg);
    return 0;
}

/* Applies one key of the file (unless its flag was given on the command line). */
static int file_apply(file_ctx_t *c, const char *key, const char *text)
{
    const char *name = strcmp(key, FILE_KEY_CLIENT_TTL) == 0 ? "client_ttl" : key;
    mc_flag_t *f =
        strcmp(name, "config_path") == 0 ? NULL : mc_flags_find(c->flags, c->nflags, name);
    if (f) {
        if (f->is_set)
            return 0;
        int rc = flag_set_text(c, f, key, text);
        f->is_set = rc == 0; /* given: a no-op flag's warning, the --port notice */
        return rc;
    }
    for (size_t i = 0; ignored_flags[i]; i++) {
        if (strcmp(ignored_flags[i], key) == 0) {
            MC_WARN("%s: key \"%s\" is accepted for compatibility and ignored", c->path, key);
            return 0;
        }
    }
    size_t used = strlen(c->unknown);
    snprintf(c->unknown + used, sizeof(c->unknown) - used, "%s%s", used ? ", " : "", key);
    return 0;
}

static int load_json(file_ctx_t *c)
{
    json_error_t jerr;
    json_t *root = json_load_file(c->path, 0, &jerr);
    if (!root)
        return mc_fail(c->err, c->errlen, "cannot read config file %s: line %d: %s", c->path,
                       jerr.line, jerr.text);
    int rc = 0;
    if (!json_is_object(root))
        rc = mc_fail(c->err, c->errlen, "config file %s: the top level must be an object", c->path);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        char text[64];
        const char *t = text;
        if (rc != 0)
            break;
        if (json_is_string(val))
            t = json_string_value(val);
        else if (json_is_integer(val))
            snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(val));
        else if (json_is_real(val))
            snprintf(text, sizeof(text), "%.17g", json_real_value(val));
        else if (json_is_boolean(val))
            snprintf(text, sizeof(text), "%s", json_is_true(val) ? "true" : "false");
        else {
            rc = mc_fail(c->err, c->errlen, "%s: key \"%s\" must be a string, number or boolean",
                         c->path, key);
            break;
        }
        rc = file_apply(c, key, t);
    }
    json_decref(root);
    return rc;
}

/* A YAML file: one top-level mapping of scalar keys to scalar values. */
static int load_yaml(file_ctx_t *c)
{
    FILE *fp = fopen(c->path, "rb");
    if (!fp)
        return mc_fail(c->err, c->errlen, "cannot open config file %s: %s", c->path,
                       strerror(errno));
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, fp);
    int rc = 0, depth = 0, done = 0;
    char *key = NULL;
    while (rc == 0 && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = mc_fail(c->err, c->errlen, "cannot parse config file %s: line %zu: %s", c->path,
                         parser.problem_mark.line + 1, parser.problem ? parser.problem : "error");
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (depth++ > 0 || ev.type == YAML_SEQUENCE_START_EVENT)
                rc = mc_fail(c->err, c->errlen,
                             "config file %s: expected one mapping of key: value (line %zu)",
                             c->path, ev.start_mark.line + 1);
            break;
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_SCALAR_EVENT: {
            const char *s = (const char *)ev.data.scalar.value;
            if (depth != 1) {
                rc = mc_fail(c->err, c->errlen, "config file %s: expected a mapping (line %zu)",
                             c->path, ev.start_mark.line + 1);
            } else if (!key) {
                key = strdup(s);
                if (!key)
                    rc = mc_fail(c->err, c->errlen, "out of memory reading %s", c->path);
            } else {
                rc = file_apply(c, key, s);
                free(key);
                key = NULL;
            }
            break;
        }
        case YAML_ALIAS_EVENT:
            rc = mc_fail(c->err, c->errlen, "config file %s: aliases are not supported (line %zu)",
                         c->path, ev.start_mark.line + 1);
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    free(key);
    yaml_parser_delete(&parser);
    fclose(fp);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static int load_config_file(mc_flag_t *flags, size_t nflags, const char *path, string_pool_t *pool,
                            char *err, size_t errlen)
{
    file_ctx_t c = {flags, nflags, pool, path, "", err, errlen};
    int rc;
    if (ends_with(path, ".json"))
        rc = load_json(&c);
    else if (ends_with(path, ".yaml") || ends_with(path, ".yml"))
        rc = load_yaml(&c);
    else
        return mc_fail(err, errlen, "config file %s: unknown type (use .json, .yaml or .yml)",
                       path);
    if (rc == 0 && c.unknown[0])
        rc = mc_fail(err, errlen, "config file %s: unknown keys: %s", path, c.unknown);
    return rc;
}

/* ---- validation and effective settings --------------------------------------------------- */

/* Fills an empty string flag from the environment, else from `def`. */
static void default_from_env(char **value, const char *env, char *def)
{
    if ((*value)[0])
        return;
    const char *e = getenv(env);
    *value = e && *e ? (char *)e : def;
}

/* Upstream's descriptor spellings name the same two backends. */
static const char *backend_canonical(const char *name)
{
    if (!strcmp(name, "local") || !strcmp(name, "bucket_storage_backend") ||
        !strcmp(name, "file_per_key_storage_backend"))
        return "local";
    if (!strcmp(name, "distributed") || !strcmp(name, "distributed_storage_backend"))
        return "distributed";
    return NULL;
}

static compat_value_t *compat_value(master_opts_t *o, const char *name)
{
    for (size_t i = 0; i < COMPAT_COUNT; i++) {
        if (strcmp(compat_flags[i].name, name) == 0)
            return &o->compat[i];
    }
    return NULL; /* not reached: every caller names an entry of compat_flags */
}

static int one_of(const char *value, const char *const *allowed)
{
    for (size_t i = 0; allowed[i]; i++) {
        if (strcmp(value, allowed[i]) == 0)
            return 1;
    }
    return 0;
}

/* ---- snapshots ------------------------------------------------------------------------------ */

#define ENV_SNAPSHOT_ROOT "MOONCAKE_SNAPSHOT_LOCAL_PATH"

/*
 * The snapshot flags (upstream's, mooncake-interfaces-2.md §5.5/§6): values into o->snap.
 * --snapshot_object_store_type=s3 is refused (exit 2); with --enable_snapshot or
 * --enable_snapshot_restore, $MOONCAKE_SNAPSHOT_LOCAL_PATH must name the root (fatal if unset,
 * as upstream).
 */
static int snapshot_check(master_opts_t *o, char *err, size_t errlen)
{
    o->snap.enable = compat_value(o, "enable_snapshot")->b;
    o->snap.restore = compat_value(o, "enable_snapshot_restore")->b;
    o->snap.interval_s = compat_value(o, "snapshot_interval_seconds")->i;
    o->snap.timeout_s = compat_value(o, "snapshot_child_timeout_seconds")->i;
    o->snap.retention = compat_value(o, "snapshot_retention_count")->i;
    o->snap.backup_dir = compat_value(o, "snapshot_backup_dir")->s;
    const char *store = compat_value(o, "snapshot_object_store_type")->s;
    if (strcmp(store, "s3") == 0) {
        o->refused = 1;
        return mc_fail(err, errlen,
                       "--snapshot_object_store_type=s3 is not supported: snapshots are written to "
                       "local files only; use local with $" ENV_SNAPSHOT_ROOT);
    }
    if (store[0] && strcmp(store, "local") != 0)
        return mc_fail(err, errlen, "--snapshot_object_store_type=%s: expected local or s3", store);
    if (o->snap.interval_s < 1 || o->snap.interval_s > 31536000)
        return mc_fail(err, errlen, "--snapshot_interval_seconds=%" PRId64 ": expected 1..31536000",
                       o->snap.interval_s);
    if (o->snap.timeout_s < 1 || o->snap.timeout_s > 31536000)
        return mc_fail(err, errlen,
                       "--snapshot_child_timeout_seconds=%" PRId64 ": expected 1..31536000",
                       o->snap.timeout_s);
    if (o->snap.retention < 1 || o->snap.retention > 1000)
        return mc_fail(err, errlen, "--snapshot_retention_count=%" PRId64 ": expected 1..1000",
                       o->snap.retention);
    if (!o->snap.enable && !o->snap.restore)
        return 0;
    o->snap.root = getenv(ENV_SNAPSHOT_ROOT);
    if (!o->snap.root || !o->snap.root[0])
        return mc_fail(err, errlen,
                       "--enable_snapshot/--enable_snapshot_restore need $" ENV_SNAPSHOT_ROOT
                       " (the snapshot root directory), which is unset");
    if (o->snap.root[0] != '/' || strlen(o->snap.root) > 4000)
        return mc_fail(err, errlen, "$" ENV_SNAPSHOT_ROOT "=%s: expected an absolute path",
                       o->snap.root);
    return 0;
}

/*
 * The upstream flags of compat_flags: values upstream rejects are bad values (exit 1, as its
 * validators abort), a refused flag away from its default is refused (exit 2), a given no-op flag
 * gets one WARNING. `flags` tells which were given (command line or config file).
 */
static int check_compat(master_opts_t *o, mc_flag_t *flags, size_t n, char *err, size_t errlen)
{
    static const char *const ratios[] = {"nof_eviction_ratio", "offload_cap_ratio", NULL};
    static const char *const modes[] = {"off", "observe", "enforce", NULL};
    static const char *const allocators[] = {"offset", "cachelib", NULL};
    static const char *const strategies[] = {
        "random", "free_ratio_first", "cxl", "ssd_free_ratio_first", "local_first", NULL};
    for (size_t i = 0; ratios[i]; i++) {
        double r = compat_value(o, ratios[i])->d;
        if (!(r >= 0 && r <= 1))
            return mc_fail(err, errlen, "--%s=%g is outside [0, 1]", ratios[i], r);
    }
    const char *mode = compat_value(o, "dynamic_replication_mode")->s;
    if (!one_of(mode, modes))
        return mc_fail(err, errlen,
                       "--dynamic_replication_mode=%s: expected off, observe or enforce", mode);
    const char *alloc = compat_value(o, "memory_allocator")->s;
    if (!one_of(alloc, allocators))
        return mc_fail(err, errlen, "--memory_allocator=%s: expected offset or cachelib", alloc);
    const char *strategy = compat_value(o, "allocation_strategy")->s;
    if (!one_of(strategy, strategies))
        return mc_fail(err, errlen,
                       "--allocation_strategy=%s: expected random, free_ratio_first, cxl, "
                       "ssd_free_ratio_first or local_first",
                       strategy);
    for (size_t i = 0; i < COMPAT_COUNT; i++) {
        const compat_flag_t *c = &compat_flags[i];
        if (c->kind == COMPAT_REFUSED && compat_changed(c, &o->compat[i]))
            return refuse(o, err, errlen, c, &o->compat[i]);
    }
    for (size_t i = 0; i < COMPAT_COUNT; i++) {
        const compat_flag_t *c = &compat_flags[i];
        mc_flag_t *f = mc_flags_find(flags, n, c->name);
        if (c->kind == COMPAT_NOOP && f && f->is_set)
            MC_WARN("flag --%s is accepted for compatibility and has no effect: %s", c->name,
                    c->why);
    }
    if (snapshot_check(o, err, errlen) != 0)
        return MC_ERR_INVALID_PARAMS;
    if (o->promotion_on_hit && !o->enable_offload)
        MC_WARN("flag --promotion_on_hit=true has no effect without --enable_offload (as "
                "upstream): there are no disk replicas to promote");
    if (!o->rpc_enable_tcp_no_delay)
        MC_WARN("flag --rpc_enable_tcp_no_delay=false has no effect: RPC sockets always set "
                "TCP_NODELAY (latency only; replies are the same)");
    return 0;
}

/* --rpc_interface: the NIC's first IPv4 address replaces --rpc_address (as upstream). */
static int resolve_rpc_interface(master_opts_t *o, string_pool_t *pool, char *err, size_t errlen)
{
    if (!o->rpc_interface[0])
        return 0;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return mc_fail(err, errlen, "--rpc_interface=%s: cannot list interfaces: %s",
                       o->rpc_interface, strerror(errno));
    char addr[INET_ADDRSTRLEN] = "";
    for (struct ifaddrs *i = ifs; i && !addr[0]; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            strcmp(i->ifa_name, o->rpc_interface) == 0)
            inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, addr,
                      sizeof(addr));
    }
    freeifaddrs(ifs);
    if (!addr[0])
        return mc_fail(err, errlen, "--rpc_interface=%s: no such interface with an IPv4 address",
                       o->rpc_interface);
    char *copy = pool_strdup(pool, addr);
    if (!copy)
        return mc_fail(err, errlen, "out of memory");
    o->rpc_address = copy;
    return 0;
}

/* The etcd endpoints of --enable_ha: --ha_backend_connstring, else --etcd_endpoints. */
static const char *ha_endpoints(const master_opts_t *o)
{
    return o->ha_backend_connstring[0] ? o->ha_backend_connstring : o->etcd_endpoints;
}

/* --enable_ha's start-up checks (upstream's are fatal too). */
static int validate_ha(master_opts_t *o, char *err, size_t errlen)
{
    if (o->enable_oplog && !o->enable_ha)
        return mc_fail(err, errlen, "--enable_oplog needs --enable_ha (as upstream)");
    if (!o->enable_ha)
        return 0;
    if (compat_value(o, "enable_snapshot_restore")->b) {
        o->refused = 1;
        return mc_fail(err, errlen,
                       "--enable_snapshot_restore=true is not supported with --enable_ha: a new "
                       "leader is restored from the operation log (--enable_oplog), not from a "
                       "snapshot (docs/ha.md); drop one of the two");
    }
    if (!o->enable_oplog)
        MC_WARN("--enable_ha without --enable_oplog: a new leader starts empty and every object "
                "is lost to readers at a failover (as upstream); add --enable_oplog=true");
    if (strcmp(o->ha_backend_type, "etcd") != 0) {
        o->refused = 1;
        return mc_fail(err, errlen,
                       "--ha_backend_type=%s is not supported: only the etcd backend is built here "
                       "(upstream also has redis and k8s); use --ha_backend_type=etcd",
                       o->ha_backend_type);
    }
    if (!ha_endpoints(o)[0])
        return mc_fail(err, errlen,
                       "--enable_ha needs the etcd endpoints: --etcd_endpoints=h:p;h:p "
                       "(or --ha_backend_connstring)");
    if (mc_net_is_wildcard(o->rpc_address))
        return mc_fail(
            err, errlen,
            "--enable_ha publishes --rpc_address:--rpc_port as the leader's address, so it "
            "must be an address clients reach, not %s: set --rpc_address or "
            "--rpc_interface",
            o->rpc_address[0] ? o->rpc_address : "empty");
    if (!(o->rpc_port ? o->rpc_port : o->port))
        return mc_fail(err, errlen, "--enable_ha needs a fixed --rpc_port (it is published)");
    char key[512];
    if (mc_master_view_key(o->cluster_id, key, sizeof(key)) != 0)
        return mc_fail(err, errlen, "--cluster_id=\"%s\" is empty or too long", o->cluster_id);
    return 0;
}

static int validate(master_opts_t *o, char *err, size_t errlen)
{
    static char posix[] = "posix";
    if (o->eviction_ratio < 0 || o->eviction_ratio > 1)
        return mc_fail(err, errlen, "--eviction_ratio=%g is outside [0, 1]", o->eviction_ratio);
    if (o->eviction_high_watermark_ratio < 0 || o->eviction_high_watermark_ratio > 1)
        return mc_fail(err, errlen, "--eviction_high_watermark_ratio=%g is outside [0, 1]",
                       o->eviction_high_watermark_ratio);
    if (o->default_kv_soft_pin_ttl > o->max_kv_soft_pin_ttl)
        return mc_fail(err, errlen,
                       "--default_kv_soft_pin_ttl=%" PRIu64
                       " exceeds --max_kv_soft_pin_ttl=%" PRIu64,
                       o->default_kv_soft_pin_ttl, o->max_kv_soft_pin_ttl);
    if (o->rpc_max_buffered_size < MC_RPC_MIN_BUFFERED)
        return mc_fail(err, errlen,
                       "--rpc_max_buffered_size=%" PRIu64 " is below %" PRIu64
                       " bytes (one largest frame and some room)",
                       o->rpc_max_buffered_size, (uint64_t)MC_RPC_MIN_BUFFERED);
    if (o->max_segment_size == 0)
        return mc_fail(err, errlen, "--max_segment_size must be positive");
    if (o->http_metadata_max_value_size == 0 ||
        o->http_metadata_max_value_size > o->http_metadata_max_total_size)
        return mc_fail(err, errlen,
                       "--http_metadata_max_value_size must be positive and at most "
                       "--http_metadata_max_total_size");
    if (o->put_start_release_timeout_sec < o->put_start_discard_timeout_sec)
        return mc_fail(err, errlen,
                       "--put_start_release_timeout_sec=%" PRId64
                       " is less than --put_start_discard_timeout_sec=%" PRId64,
                       o->put_start_release_timeout_sec, o->put_start_discard_timeout_sec);
    default_from_env(&o->offload_backend, ENV_OFFLOAD_BACKEND, empty_string);
    default_from_env(&o->distributed_fs_type, ENV_DFS_TYPE, posix);
    default_from_env(&o->distributed_root_dir, ENV_DFS_ROOT, empty_string);
    if (o->offload_backend[0] && !backend_canonical(o->offload_backend))
        return mc_fail(err, errlen,
                       "--offload-backend=%s: expected local or distributed (or upstream's "
                       "bucket_storage_backend, file_per_key_storage_backend, "
                       "distributed_storage_backend)",
                       o->offload_backend);
    if (strcmp(o->distributed_fs_type, "posix") != 0 && strcmp(o->distributed_fs_type, "daos") != 0)
        return mc_fail(err, errlen, "--distributed-fs-type=%s: expected posix or daos",
                       o->distributed_fs_type);
    if (o->enable_offload && o->offload_backend[0] &&
        strcmp(backend_canonical(o->offload_backend), "distributed") == 0 &&
        !o->distributed_root_dir[0])
        return mc_fail(
            err, errlen,
            "--offload-backend=distributed needs --distributed-root-dir (or $" ENV_DFS_ROOT ")");
    return validate_ha(o, err, errlen);
}

static int64_t effective_rpc_threads(const master_opts_t *o)
{
    if (o->rpc_thread_num > 0)
        return o->rpc_thread_num;
    long hw = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t n = hw > 0 ? hw : 1;
    if (n > o->max_threads)
        n = o->max_threads;
    return n > MC_RPC_MAX_THREADS ? MC_RPC_MAX_THREADS : n;
}

static void master_config_from(const master_opts_t *o, mc_master_config_t *c)
{
    mc_master_config_default(c);
    c->default_kv_lease_ttl_ms = o->default_kv_lease_ttl;
    c->default_kv_soft_pin_ttl_ms = o->default_kv_soft_pin_ttl;
    c->max_kv_soft_pin_ttl_ms = o->max_kv_soft_pin_ttl;
    c->allow_evict_soft_pinned_objects = o->allow_evict_soft_pinned_objects;
    c->eviction_ratio = o->eviction_ratio;
    c->eviction_high_watermark_ratio = o->eviction_high_watermark_ratio;
    c->client_ttl_ms = (uint64_t)o->client_ttl * 1000;
    c->put_start_discard_timeout_ms = (uint64_t)o->put_start_discard_timeout_sec * 1000;
    c->put_start_release_timeout_ms = (uint64_t)o->put_start_release_timeout_sec * 1000;
    c->enable_offload = o->enable_offload;
    c->offload_on_evict = o->offload_on_evict;
    c->offload_task_timeout_ms = (uint64_t)o->offload_task_timeout_sec * 1000;
    c->offload_max_attempts = (uint32_t)o->offload_max_attempts;
    c->offload_put_wait_ms = o->offload_put_wait_ms;
    c->fence_put_wait_ms = o->fence_put_wait_ms;
    c->offloading_queue_limit = (uint64_t)o->offloading_queue_limit;
    c->promotion_on_hit = o->promotion_on_hit && o->enable_offload;
    int64_t thr = o->promotion_admission_threshold;
    c->promotion_admission_threshold = (uint32_t)(thr < 1 ? 1 : thr > 255 ? 255 : thr);
    c->promotion_queue_limit = (uint64_t)o->promotion_queue_limit;
    c->promotion_max_per_heartbeat =
        o->promotion_max_per_heartbeat ? (uint32_t)o->promotion_max_per_heartbeat : 1;
    c->max_segment_size = o->max_segment_size;
    c->task_max_finished = (uint64_t)o->max_total_finished_tasks;
    c->task_max_pending = (uint64_t)o->max_total_pending_tasks;
    c->task_max_processing = (uint64_t)o->max_total_processing_tasks;
    c->task_pending_timeout_ms = (uint64_t)o->pending_task_timeout_sec * 1000;
    c->task_processing_timeout_ms = (uint64_t)o->processing_task_timeout_sec * 1000;
    c->task_max_retry_attempts = (uint32_t)o->max_retry_attempts;
    const char *backend = o->offload_backend[0] ? backend_canonical(o->offload_backend) : "";
    c->offload_backend = !strcmp(backend, "local")         ? MC_OFFLOAD_BACKEND_LOCAL
                         : !strcmp(backend, "distributed") ? MC_OFFLOAD_BACKEND_DISTRIBUTED
                                                           : MC_OFFLOAD_BACKEND_NONE;
    snprintf(c->distributed_fs_type, sizeof(c->distributed_fs_type), "%s", o->distributed_fs_type);
    if (c->offload_backend == MC_OFFLOAD_BACKEND_DISTRIBUTED)
        snprintf(c->distributed_root_dir, sizeof(c->distributed_root_dir), "%s",
                 o->distributed_root_dir);
}

static const char *tf(int b)
{
    return b ? "true" : "false";
}

/* Whether a cluster secret is configured (never the secret itself). */
static const char *secret_state(const master_opts_t *o)
{
    const char *e1 = getenv(MC_AUTH_ENV_SECRET), *e2 = getenv(MC_AUTH_ENV_SECRET_FILE);
    return o->cluster_secret[0] || o->cluster_secret_file[0] || (e1 && *e1) || (e2 && *e2) ? "set"
                                                                                           : "none";
}

/* Every effective setting on one line (ports as bound; http port -1 when the server is off). */
static void format_settings(const master_opts_t *o, int64_t threads, int metrics_port,
                            int http_port, char *out, size_t len)
{
    snprintf(
        out, len,
        "max_threads=%" PRId64 ", rpc_thread_num=%" PRId64 ", rpc_address=%s"
        ", metrics_host=%s, metrics_port=%d, enable_http_metadata_server=%s"
        ", http_metadata_server_host=%s, http_metadata_server_port=%d"
        ", default_kv_lease_ttl=%" PRIu64 ", default_kv_soft_pin_ttl=%" PRIu64
        ", max_kv_soft_pin_ttl=%" PRIu64 ", allow_evict_soft_pinned_objects=%s"
        ", eviction_ratio=%g, eviction_high_watermark_ratio=%g, client_ttl=%" PRId64
        ", put_start_discard_timeout_sec=%" PRId64 ", put_start_release_timeout_sec=%" PRId64
        ", enable_offload=%s, offload_on_evict=%s, offload_backend=%s"
        ", distributed_fs_type=%s, distributed_root_dir=%s, offload_task_timeout_sec=%" PRId64
        ", offload_max_attempts=%" PRId64 ", offload_put_wait_ms=%" PRIu64
        ", offloading_queue_limit=%" PRId64 ", promotion_on_hit=%s"
        ", promotion_admission_threshold=%" PRId64 ", promotion_queue_limit=%" PRId64
        ", promotion_max_per_heartbeat=%" PRId64 ", max_connections=%" PRId64
        ", rpc_conn_timeout_seconds=%" PRId64 ", rpc_frame_timeout_seconds=%" PRId64
        ", rpc_max_buffered_size=%" PRIu64 ", rpc_spin_us=%" PRId64 ", max_segment_size=%" PRIu64
        ", http_metadata_max_value_size=%" PRIu64 ", http_metadata_max_keys=%" PRId64
        ", http_metadata_max_total_size=%" PRIu64 ", cluster_secret=%s, config_path=%s, log_dir=%s"
        ", v=%" PRId64 ", version=%s",
        o->max_threads, threads, o->rpc_address, o->metrics_host, metrics_port,
        tf(o->enable_http_metadata_server), o->http_metadata_server_host, http_port,
        o->default_kv_lease_ttl, o->default_kv_soft_pin_ttl, o->max_kv_soft_pin_ttl,
        tf(o->allow_evict_soft_pinned_objects), o->eviction_ratio, o->eviction_high_watermark_ratio,
        o->client_ttl, o->put_start_discard_timeout_sec, o->put_start_release_timeout_sec,
        tf(o->enable_offload), tf(o->offload_on_evict),
        o->offload_backend[0] ? backend_canonical(o->offload_backend) : "(from clients)",
        o->distributed_fs_type, o->distributed_root_dir[0] ? o->distributed_root_dir : "(none)",
        o->offload_task_timeout_sec, o->offload_max_attempts, o->offload_put_wait_ms,
        o->offloading_queue_limit, tf(o->promotion_on_hit), o->promotion_admission_threshold,
        o->promotion_queue_limit, o->promotion_max_per_heartbeat, o->max_connections,
        o->rpc_conn_timeout_seconds, o->rpc_frame_timeout_seconds, o->rpc_max_buffered_size,
        o->rpc_spin_us, o->max_segment_size, o->http_metadata_max_value_size,
        o->http_metadata_max_keys, o->http_metadata_max_total_size, secret_state(o),
        o->config_path[0] ? o->config_path : "(none)", o->log_dir[0] ? o->log_dir : "(none)", o->v,
        MC_VERSION_STRING);
}

/* ---- start-up ---------------------------------------------------------------------------- */

/* Flags, then the config file, then validation. 0, MC_FLAGS_EXIT_OK, or an error in err. */
static int configure(int argc, char **argv, master_opts_t *o, string_pool_t *pool, char *err,
                     size_t errlen)
{
    mc_flag_t flags[FLAGS_MAX];
    size_t n = flags_table(o, flags, FLAGS_MAX);
    int rc = mc_flags_parse(flags, n, ignored_flags, argc, argv, PROGRAM, USAGE, err, errlen);
    if (rc != 0)
        return rc;
    if (o->config_path[0]) {
        rc = load_config_file(flags, n, o->config_path, pool, err, errlen);
        if (rc != 0)
            return rc;
    }
    if (mc_flags_find(flags, n, "port")->is_set)
        MC_WARN("--port is deprecated; use --rpc_port");
    rc = check_compat(o, flags, n, err, errlen);
    if (rc == 0)
        rc = resolve_rpc_interface(o, pool, err, errlen);
    return rc != 0 ? rc : validate(o, err, errlen);
}

static int setup_logging(const master_opts_t *o, char *err, size_t errlen)
{
    mc_log_set_verbosity((int)o->v);
    if (!o->log_dir[0] || o->logtostderr)
        return 0;
    if (mkdir(o->log_dir, 0755) != 0 && errno != EEXIST)
        return mc_fail(err, errlen, "cannot create --log_dir %s: %s", o->log_dir, strerror(errno));
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", o->log_dir, LOG_FILE_NAME);
    int rc = mc_log_set_file(path);
    if (rc != 0)
        return mc_fail(err, errlen, "cannot open log file %s: %s", path, strerror(-rc));
    return 0;
}

/* settings_line's view of the options: the describe hook of the server. */
typedef struct describe_ctx {
    const master_opts_t *o;
    int64_t threads;
} describe_ctx_t;

static void describe_settings(void *arg, int metrics_port, int http_port, char *out, size_t cap)
{
    const describe_ctx_t *d = arg;
    format_settings(d->o, d->threads, metrics_port, http_port, out, cap);
}

/* The validated options as the server's configuration (server.h); strings borrowed from o. */
static void server_config_from(const master_opts_t *o, describe_ctx_t *d,
                               mc_master_server_config_t *c)
{
    d->o = o;
    d->threads = effective_rpc_threads(o);
    *c = (mc_master_server_config_t){
        .cluster_secret = o->cluster_secret,
        .cluster_secret_file = o->cluster_secret_file,
        .rpc_address = o->rpc_address,
        .rpc_port = (int)(o->rpc_port ? o->rpc_port : o->port),
        .rpc_threads = (int)d->threads,
        .rpc_limits = {.max_connections = (uint32_t)o->max_connections,
                       .idle_timeout_ms = (uint32_t)(o->rpc_conn_timeout_seconds * 1000),
                       .frame_timeout_ms = (uint32_t)(o->rpc_frame_timeout_seconds * 1000),
                       .max_buffered_bytes = o->rpc_max_buffered_size,
                       .spin_us = (uint32_t)o->rpc_spin_us},
        .metrics_host = o->metrics_host,
        .metrics_port = (int)o->metrics_port,
        .enable_http_metadata_server = o->enable_http_metadata_server,
        .http_metadata_host = o->http_metadata_server_host,
        .http_metadata_port = (int)o->http_metadata_server_port,
        .http_metadata_limits = {.max_value_bytes = (size_t)o->http_metadata_max_value_size,
                                 .max_keys = (size_t)o->http_metadata_max_keys,
                                 .max_total_bytes = (size_t)o->http_metadata_max_total_size},
        .describe = describe_settings,
        .describe_arg = d,
        .etcd_endpoints = ha_endpoints(o),
        .cluster_id = o->cluster_id,
        .enable_ha = o->enable_ha,
        .ha_lease_ttl_s = (int)o->ha_lease_ttl_seconds,
        .enable_oplog = o->enable_oplog,
        .oplog_batch_max_entries = (uint32_t)o->oplog_batch_max_entries,
        .oplog_poll_interval_ms = (int)o->oplog_poll_interval_ms,
        .oplog_sync_ack = o->oplog_sync_ack,
        .enable_snapshot = o->snap.enable,
        .snapshot_restore = o->snap.restore,
        .snapshot_root = o->snap.root,
        .snapshot_backup_dir = o->snap.backup_dir,
        .snapshot_retention = (unsigned)o->snap.retention,
        .snapshot_timeout_ms = (uint64_t)o->snap.timeout_s * 1000,
        .snapshot_interval_ms = (uint64_t)o->snap.interval_s * 1000,
    };
    master_config_from(o, &c->master);
}

/* Blocks until SIGINT or SIGTERM arrives on the signalfd (returns the signal number), or, with
 * HA, until this master lost leadership (returns -1). */
static int wait_for_stop(int sfd, int deposed_efd)
{
    struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = deposed_efd, .events = POLLIN}};
    for (;;) {
        if (poll(p, deposed_efd >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            MC_ERROR("poll failed: %s; stopping", strerror(errno));
            return 0;
        }
        if (deposed_efd >= 0 && (p[1].revents & POLLIN)) {
            uint64_t v;
            if (read(deposed_efd, &v, sizeof(v)) < 0)
                MC_VLOG(1, "eventfd read: %s", strerror(errno));
            return -1;
        }
        struct signalfd_siginfo si;
        ssize_t n = read(sfd, &si, sizeof(si));
        if (n == (ssize_t)sizeof(si))
            return (int)si.ssi_signo;
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            MC_ERROR("reading the signalfd failed: %s; stopping", strerror(errno));
            return 0;
        }
    }
}

int main(int argc, char **argv)
{
    master_opts_t o;
    string_pool_t pool = {0};
    char err[ERR_MAX] = "";

    opts_default(&o);
    int rc = configure(argc, argv, &o, &pool, err, sizeof(err));
    if (rc == 0)
        rc = setup_logging(&o, err, sizeof(err));
    if (rc != 0) {
        pool_free(&pool);
        if (rc == MC_FLAGS_EXIT_OK)
            return 0;
        fprintf(stderr, PROGRAM ": %s\n", err);
        return o.refused ? 2 : 1;
    }

    /*
     * Block the stop signals before any thread exists, so every thread inherits the mask and the
     * signals are only ever read from the signalfd: shutdown runs as plain code on this thread.
     */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, PROGRAM ": signalfd: %s\n", strerror(errno));
        pool_free(&pool);
        return 1;
    }

    describe_ctx_t describe;
    mc_master_server_config_t config;
    server_config_from(&o, &describe, &config);
    for (;;) {
        mc_master_server_t *server = NULL;
        rc = mc_master_server_start(&config, &server);
        if (rc != 0)
            break;
        int sig = wait_for_stop(sfd, mc_master_server_deposed_fd(server));
        if (sig < 0) {
            /* Lost leadership: this master's index is stale. Start over, empty, as a standby
             * (upstream's supervisor returns to standby the same way). */
            MC_WARN("no longer the leader: restarting the master service as a standby");
            mc_master_server_stop(server, 0);
            continue;
        }
        MC_INFO("received signal %d (%s), stopping", sig, sig ? strsignal(sig) : "none");
        mc_master_server_stop(server, 1);
        MC_INFO("Master service stopped");
        break;
    }
    close(sfd);
    mc_log_set_file(NULL);
    pool_free(&pool);
    return rc == 0 ? 0 : 1;
}
