/*
 * admin_http.c — the master's admin/metrics HTTP server (admin_http.h) on libmicrohttpd.
 *
 * Every route is a read of the Master Service (mc_master_get_stats, list_segments, query_key)
 * and of the RPC server's counters, rendered into a fresh buffer per request; nothing here holds
 * state of its own besides the start time. The listening socket is opened with
 * mc_net_listen_tcp and handed to libmicrohttpd, so a bind failure is reported exactly once, in
 * the same words as the RPC server's.
 */
#include "admin_http.h"

#include "ha.h"
#include "oplog.h"
#include "journal.h"

#include "http_guard.h"
#include "log.h"
#include "mooncake/errors.h"
#include "mooncake/http_metadata.h"
#include "net.h"
#include "parse.h"

#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ADMIN_BACKLOG 128
#define ADMIN_CONNECTION_TIMEOUT_S 30u
#define ADMIN_REQUEST_TIMEOUT_MS 10000u /* absolute bound per request (http_guard.h); GETs only */
#define ADMIN_CONNECTION_MEMORY_LIMIT (32u << 10) /* request line and headers */
#define ADMIN_QUERY_REPLICAS 32
#define ADMIN_CONTENT_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"
#define ADMIN_CONTENT_TEXT "text/plain; charset=utf-8"
#define ADMIN_CONTENT_JSON "application/json"

struct mc_admin_http {
    struct MHD_Daemon *daemon;
    mc_http_guard_t guard; /* connection cap */
    mc_master_t *master;
    mc_rpc_server_t *rpc;
    mc_http_metadata_server_t *metadata;
    char *settings;
    uint64_t started_ms;
    int port;
    /* HA (mc_admin_http_set_ha): NULL without --enable_ha / --enable_oplog */
    struct mc_ha *_Atomic ha;
    struct mc_oplog *_Atomic oplog;
};

/* A response body: text built with open_memstream, or JSON dumped by jansson. */
typedef struct admin_reply {
    unsigned int status;
    const char *content_type;
    char *body; /* malloc'd */
    size_t len;
} admin_reply_t;

/* ---- rendering --------------------------------------------------------------------------- */

static void metric(FILE *f, const char *name, const char *type, const char *help, uint64_t value)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name, value);
}

void mc_admin_http_set_ha(mc_admin_http_t *a, struct mc_ha *ha, struct mc_oplog *oplog)
{
    atomic_store(&a->oplog, oplog);
    atomic_store(&a->ha, ha);
}

/* This master's role and state as upstream names them: without HA it leads and serves. */
static void ha_role(mc_admin_http_t *a, const char **role, const char **state, int *ready)
{
    mc_ha_t *ha = atomic_load(&a->ha);
    mc_ha_state_t st = ha ? mc_ha_state(ha) : MC_HA_SERVING;
    *state = mc_ha_state_name(st);
    *role = st == MC_HA_SERVING || st == MC_HA_RECOVERING ? "leader" : "standby";
    *ready = !ha || mc_ha_may_serve(ha);
}

/* Upstream's ha_standby_state codes (0 STOPPED, 1 CONNECTING, 3 WATCHING, 6 PROMOTING,
 * 7 PROMOTED) for our states. */
static uint64_t ha_standby_code(mc_ha_state_t st)
{
    switch (st) {
    case MC_HA_STARTING:
        return 1;
    case MC_HA_STANDBY:
        return 3;
    case MC_HA_CANDIDATE:
    case MC_HA_RECOVERING:
        return 6;
    case MC_HA_SERVING:
        return 7;
    default:
        return 0;
    }
}

/* The HA families that come from the election and the operation log (0 without them). */
static void render_ha_metrics(mc_admin_http_t *a, FILE *f)
{
    mc_ha_t *ha = atomic_load(&a->ha);
    mc_oplog_t *log = atomic_load(&a->oplog);
    uint64_t transitions = 0, won = 0, lost = 0;
    if (ha)
        mc_ha_counters(ha, &transitions, &won, &lost);
    mc_oplog_stats_t ls;
    memset(&ls, 0, sizeof(ls));
    if (log)
        mc_oplog_get_stats(log, &ls);
    int leading = ha && mc_ha_state(ha) == MC_HA_SERVING;
    metric(f, "ha_state_transitions_total", "counter", "HA state changes of this master.",
           transitions);
    metric(f, "ha_elections_won_total", "counter", "Elections this master won (ours).", won);
    metric(f, "ha_leadership_lost_total", "counter", "Times this master lost leadership (ours).",
           lost);
    metric(f, "ha_standby_state", "gauge",
           "Upstream's codes: 0 stopped, 1 connecting, 3 watching, 6 promoting, 7 promoted.",
           ha ? ha_standby_code(mc_ha_state(ha)) : 0);
    metric(f, "ha_oplog_last_sequence_id", "gauge", "Last operation-log entry appended or applied.",
           ls.last_seq);
    metric(f, "ha_oplog_applied_sequence_id", "gauge", "Last entry applied (standby).",
           leading ? 0 : ls.last_seq);
    metric(f, "ha_oplog_pending_entries", "gauge", "Entries waiting for etcd (leader).",
           ls.pending);
    metric(f, "ha_pending_mutation_queue_size", "gauge", "Same as ha_oplog_pending_entries.",
           ls.pending);
    metric(f, "ha_batch_record_last_batch_id", "gauge", "Last batch committed or applied.",
           ls.last_batch_id);
    metric(f, "ha_batch_record_durable_sequence", "gauge", "Last entry committed in etcd.",
           ls.durable_seq);
    metric(f, "ha_oplog_batch_commits_total", "counter", "Batches committed (leader).",
           ls.batches_committed);
    metric(f, "ha_batch_record_durable_batches_total", "counter", "Same as the above.",
           ls.batches_committed);
    metric(f, "ha_oplog_applied_entries_total", "counter", "Entries applied (standby, catch-up).",
           ls.entries_applied);
    metric(f, "ha_oplog_etcd_write_failures_total", "counter",
           "Batch transactions that failed and were retried.", ls.write_failures);
    metric(f, "ha_oplog_checksum_failures_total", "counter",
           "Batches that failed their CRC32C or did not decode.", ls.checksum_failures);
    metric(f, "ha_oplog_backpressure_waits_total", "counter",
           "New puts held back while the log was a batch behind (ours).", ls.backpressure_waits);
    uint64_t held = 0;
    if (a->rpc) {
        mc_rpc_server_stats_t rs;
        mc_rpc_server_get_stats(a->rpc, &rs, NULL, 0);
        held = rs.replies_held;
        metric(f, "ha_rpc_gate_refused_total", "counter",
               "Requests not served: this master was not leading (ours).", rs.gate_refused);
    }
    metric(f, "ha_replies_held_total", "counter",
           "Replies held until their change was in etcd (ours, --oplog_sync_ack).", held);
}

static const char *offload_backend_name(int b)
{
    return b == MC_OFFLOAD_BACKEND_LOCAL         ? "local"
           : b == MC_OFFLOAD_BACKEND_DISTRIBUTED ? "distributed"
                                                 : "none";
}

static void render_offload_metrics(FILE *f, const mc_master_stats_t *st)
{
    metric(f, "master_offload_enabled", "gauge", "1 when the master runs with --enable_offload.",
           st->offload_enabled);
    metric(f, "master_offload_clients", "gauge", "Clients offloading to a storage backend.",
           st->offloaders);
    metric(f, "master_offload_unhealthy_clients", "gauge",
           "Offloading clients whose backend health check fails (they take no tasks).",
           st->offloaders_unhealthy);
    metric(f, "master_offload_backend_healthy", "gauge",
           "1 when every offloading client reports a healthy backend.",
           st->offloaders_unhealthy == 0);
    metric(f, "master_offload_queue_depth", "gauge", "Offload tasks queued or being written.",
           st->offload_queued + st->offload_leased);
    metric(f, "master_offload_tasks_queued", "gauge", "Offload tasks waiting for a client.",
           st->offload_queued);
    metric(f, "master_offload_tasks_leased", "gauge", "Offload tasks being written by a client.",
           st->offload_leased);
    metric(f, "master_offload_tasks_done_total", "counter", "Offload tasks completed since start.",
           st->offload_done);
    metric(f, "master_offload_tasks_failed_total", "counter",
           "Offload tasks failed after their last attempt since start.", st->offload_failed);
    metric(f, "master_offload_tasks_retried_total", "counter",
           "Offload tasks queued again after an expired lease or a failure since start.",
           st->offload_retried);
    metric(f, "master_offload_tasks_skipped_total", "counter",
           "Objects not queued for offload because the client's queue was full.",
           st->offload_skipped);
    metric(f, "master_offload_bytes_total", "counter", "Bytes offloaded since start.",
           st->offload_bytes);
    metric(f, "master_disk_replicas", "gauge", "Disk replicas (LOCAL_DISK and DFS).",
           st->disk_replicas);
    metric(f, "master_dfs_replicas", "gauge", "Disk replicas on the distributed backend.",
           st->dfs_replicas);
    metric(f, "master_disk_replica_bytes", "gauge",
           "Bytes of the objects that have a disk replica.", st->disk_replica_bytes);
    metric(f, "master_disk_only_keys", "gauge", "Objects readable from disk only.",
           st->disk_only_objects);
    metric(f, "master_disk_used_bytes", "gauge", "Disk bytes used, as the clients report.",
           st->disk_used_bytes);
    metric(f, "master_disk_capacity_bytes", "gauge", "Disk capacity limit, as the clients report.",
           st->disk_capacity_bytes);
    metric(f, "master_disk_evicted_replicas_total", "counter",
           "Disk replicas dropped for disk capacity since start.", st->disk_evicted);
    metric(f, "master_offload_pending_deletions", "gauge",
           "Disk files waiting to be deleted by a client.", st->pending_deletions);
    metric(f, "master_offload_recovering", "gauge",
           "Offloading clients asked to report their files (after this master started, or after "
           "they were unknown) that have not finished, plus 1 while the distributed root awaits "
           "or runs its rescan.",
           st->offload_recovering);
    metric(f, "master_offload_recovered_files_total", "counter",
           "Files registered again as disk replicas by restart rescans since start.",
           st->recovered_files);
    metric(f, "master_fallback_reads_total", "counter",
           "Reads served from disk replicas, as the clients report.", st->fallback_reads);
    metric(f, "master_checksum_mismatches_total", "counter",
           "Replica reads whose bytes failed end-to-end checksum verification (skipped for "
           "another replica or failed with -801), as the clients report.",
           st->checksum_mismatches);
}

/* The server limits (docs/limits.md): what was refused or closed, and the state they bound. */
static void render_limit_metrics(mc_admin_http_t *a, FILE *f, const mc_master_stats_t *st,
                                 const mc_rpc_server_stats_t *rs)
{
    metric(f, "master_rpc_connections_limit", "gauge", "Open RPC connections allowed.",
           rs->limits.max_connections);
    metric(f, "master_rpc_connections_stalled_total", "counter",
           "RPC connections closed after a partial frame or unread replies made no progress.",
           rs->connections_stalled);
    metric(f, "master_rpc_connections_idle_closed_total", "counter",
           "RPC connections closed after the idle timeout.", rs->connections_idle_closed);
    metric(f, "master_rpc_buffered_bytes", "gauge",
           "Receive-buffer bytes reserved by all RPC connections.", rs->buffered_bytes);
    metric(f, "master_rpc_buffered_bytes_limit", "gauge",
           "Receive-buffer bytes all RPC connections may reserve.", rs->limits.max_buffered_bytes);
    metric(f, "master_rpc_buffer_waits_total", "counter",
           "Times an RPC connection waited for receive-buffer room.", rs->buffer_waits);
    metric(f, "master_rpc_spin_skipped_total", "counter",
           "Requests after which the worker did not spin (--rpc_spin_us): every CPU was busy.",
           rs->spin_skipped);
    metric(f, "master_rpc_decode_refused_total", "counter",
           "Request bodies refused for needing more memory to decode than their budget.",
           rs->decode_refused);
    metric(f, "master_remove_by_regex_refused_total", "counter",
           "RemoveByRegex calls refused because the pattern exceeded a match limit on a key.",
           st->regex_refused);
    metric(f, "master_mount_refused_total", "counter",
           "Segment mounts refused for a size above --max_segment_size.", st->mounts_refused);
    metric(f, "master_admin_http_connections_refused_total", "counter",
           "Admin HTTP connections refused over the connection limit or one peer's share.",
           mc_http_guard_refused(&a->guard));
    metric(f, "master_admin_http_connections_refused_per_peer_total", "counter",
           "Of those, refused because their peer already held a quarter of the limit.",
           mc_http_guard_refused_per_peer(&a->guard));
    metric(f, "master_admin_http_requests_timed_out_total", "counter",
           "Admin HTTP connections closed for a request over the time bound.",
           mc_http_guard_timed_out(&a->guard));
    if (!a->metadata)
        return;
    mc_http_metadata_stats_t ms;
    mc_http_metadata_server_get_stats(a->metadata, &ms);
    metric(f, "master_http_metadata_keys", "gauge", "Keys held by the HTTP metadata server.",
           ms.keys);
    metric(f, "master_http_metadata_bytes", "gauge", "Bytes held by the HTTP metadata server.",
           ms.bytes);
    metric(f, "master_http_metadata_refused_too_large_total", "counter",
           "HTTP metadata PUTs refused with 413 (value above --http_metadata_max_value_size).",
           ms.refused_too_large);
    metric(f, "master_http_metadata_refused_full_total", "counter",
           "HTTP metadata PUTs refused with 507 (store full: keys or bytes).", ms.refused_full);
    metric(f, "master_http_metadata_connections_refused_total", "counter",
           "HTTP metadata connections refused over the connection limit.", ms.connections_refused);
    metric(f, "master_http_metadata_requests_timed_out_total", "counter",
           "HTTP metadata connections closed for a request over the time bound.",
           ms.requests_timed_out);
}

/* ---- upstream's metric names (mooncake-interfaces-2.md §7.1) -------------------------------- */

/* Upstream's names of the per-operation families, in mc_master_op_t / mc_master_batch_op_t order.
 */
static const char *const op_names[MC_OP_COUNT] = {
    "put_start",
    "put_end",
    "put_revoke",
    "get_replica_list",
    "get_replica_list_by_regex",
    "exist_key",
    "remove",
    "remove_by_regex",
    "remove_all",
    "mount_segment",
    "unmount_segment",
    "remount_segment",
    "mount_nof_segment",
    "unmount_nof_segment",
    "remount_nof_segment",
    "ping",
    "copy_start",
    "copy_end",
    "copy_revoke",
    "move_start",
    "move_end",
    "move_revoke",
    "evict_disk_replica",
    "create_copy_task",
    "create_move_task",
    "query_task",
    "fetch_tasks",
    "update_task",
};
static const char *const batch_names[MC_BATCH_COUNT] = {
    "exist_key", "query_ip", "replica_clear", "get_replica_list",
    "put_start", "put_end",  "put_revoke",
};

/* A histogram family from non-cumulative bucket counts (nb bounds, counts[nb] above them). */
static void histogram(FILE *f, const char *name, const char *help, const double *bounds, size_t nb,
                      const uint64_t *counts, double sum)
{
    uint64_t cum = 0;
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t i = 0; i < nb; i++) {
        cum += counts ? counts[i] : 0;
        fprintf(f, "%s_bucket{le=\"%.17g\"} %" PRIu64 "\n", name, bounds[i], cum);
    }
    cum += counts ? counts[nb] : 0;
    fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.17g\n%s_count %" PRIu64 "\n", name,
            cum, name, sum, name, cum);
}

#define NBOUNDS(a) (sizeof(a) / sizeof((a)[0]))

/* An empty histogram: this master has nothing that upstream observes there. */
static void histogram_zero(FILE *f, const char *name, const char *help, const double *bounds,
                           size_t nb)
{
    histogram(f, name, help, bounds, nb, NULL, 0);
}

/* A Prometheus label value: \, " and newline escaped. */
static void label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

/* segment_allocated_bytes / segment_total_capacity_bytes{segment="name"}: summed per name. */
static void render_segment_gauges(mc_admin_http_t *a, FILE *f)
{
    size_t cap = 64, n;
    mc_segment_info_t *segs = NULL;
    for (;;) {
        mc_segment_info_t *more = realloc(segs, cap * sizeof(*segs));
        if (!more) {
            free(segs);
            return;
        }
        segs = more;
        n = mc_master_list_segments(a->master, segs, cap);
        if (n <= cap)
            break;
        cap = n + 16;
    }
    static const char *const names[2] = {"segment_allocated_bytes", "segment_total_capacity_bytes"};
    static const char *const helps[2] = {"Bytes allocated in the segments of this name.",
                                         "Bytes mounted in the segments of this name."};
    for (int which = 0; which < 2; which++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", names[which], helps[which], names[which]);
        for (size_t i = 0; i < n; i++) {
            int seen = 0;
            for (size_t j = 0; j < i && !seen; j++)
                seen = strcmp(segs[i].name, segs[j].name) == 0;
            if (seen)
                continue;
            uint64_t v = 0;
            for (size_t j = i; j < n; j++) {
                if (strcmp(segs[i].name, segs[j].name) == 0)
                    v += which == 0 ? segs[j].used : segs[j].size;
            }
            fprintf(f, "%s{segment=\"", names[which]);
            label_value(f, segs[i].name);
            fprintf(f, "\"} %" PRIu64 "\n", v);
        }
    }
    free(segs);
}

/* A labelled family with no series (the thing it counts does not exist here). */
static void family_empty(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_upstream_ops(FILE *f, const mc_master_op_stats_t *os)
{
    char name[96], help[160];
    for (size_t i = 0; i < MC_OP_COUNT; i++) {
        snprintf(name, sizeof(name), "master_%s_requests_total", op_names[i]);
        snprintf(help, sizeof(help), "%s requests with one key (or none) received.", op_names[i]);
        metric(f, name, "counter", help, os->requests[i]);
        snprintf(name, sizeof(name), "master_%s_failures_total", op_names[i]);
        snprintf(help, sizeof(help), "%s requests with one key (or none) that failed.",
                 op_names[i]);
        metric(f, name, "counter", help, os->failures[i]);
    }
    metric(f, "master_put_start_alloc_failures_total", "counter",
           "PutStart keys refused for lack of space.", os->put_start_alloc_failures);
    metric(f, "master_put_start_partial_allocations_total", "counter",
           "PutStart keys given fewer replicas than asked.", os->put_start_partial_allocations);
    static const char *const parts[5] = {"requests_total", "failures_total",
                                         "partial_successes_total", "items_total",
                                         "failed_items_total"};
    static const char *const part_help[5] = {
        "requests with several keys", "requests with several keys where every key failed",
        "requests with several keys where some keys failed", "keys in requests with several keys",
        "keys that failed in requests with several keys"};
    for (size_t i = 0; i < MC_BATCH_COUNT; i++) {
        const uint64_t *v[5] = {os->batch_requests, os->batch_failures, os->batch_partial,
                                os->batch_items, os->batch_failed_items};
        for (size_t p = 0; p < 5; p++) {
            snprintf(name, sizeof(name), "master_batch_%s_%s", batch_names[i], parts[p]);
            snprintf(help, sizeof(help), "%s %s.", batch_names[i], part_help[p]);
            metric(f, name, "counter", help, v[p][i]);
        }
    }
}

/* Upstream's master_promotion_* family (promotion.c; --promotion_on_hit). The retry-candidate
 * counters stay 0: there are no retry candidates here (docs/offload.md). */
static void render_promotion_metrics(FILE *f, const mc_master_stats_t *st)
{
    metric(f, "master_promotion_in_flight", "gauge",
           "Promotions of disk-only objects to memory queued or being copied.",
           st->promotion_in_flight);
    const struct {
        const char *name, *help;
        uint64_t v;
    } c[] = {
        {"master_promotion_admitted_total", "Promotions queued since start.",
         st->promotion_admitted},
        {"master_promotion_completed_total", "Promotions that added a memory replica.",
         st->promotion_completed},
        {"master_promotion_completed_bytes_total", "Bytes promoted to memory.",
         st->promotion_completed_bytes},
        {"master_promotion_expired_total",
         "Promotions not reported within --put_start_release_timeout_sec (replica dropped).",
         st->promotion_expired},
        {"master_promotion_failed_total",
         "Promotions that failed (no room, unreadable file, checksum mismatch).",
         st->promotion_failed},
        {"master_promotion_cancelled_total",
         "Promotions cancelled: the object was removed or replaced, or its client left.",
         st->promotion_cancelled},
        {"master_promotion_rejected_frequency_total", "Hits below --promotion_admission_threshold.",
         st->promotion_rejected_frequency},
        {"master_promotion_rejected_watermark_total",
         "Hits rejected: memory use at --eviction_high_watermark_ratio.",
         st->promotion_rejected_watermark},
        {"master_promotion_rejected_cap_total", "Hits rejected: --promotion_queue_limit reached.",
         st->promotion_rejected_cap},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        metric(f, c[i].name, "counter", c[i].help, c[i].v);
}

/* Upstream's families with no counterpart here, truthfully 0 (docs/master-flags.md). */
static void render_upstream_absent(FILE *f)
{
    static const double nof_ms[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000};
    static const double us_write[] = {100,   500,    1000,   5000,    10000,
                                      50000, 100000, 500000, 1000000, 5000000};
    static const double us_apply[] = {10, 50, 100, 500, 1000, 5000, 10000, 50000, 100000};
    static const double us_txn[] = {100, 500, 1000, 5000, 10000, 50000, 100000, 500000, 1000000};
    static const double entries[] = {1, 8, 32, 64, 128, 256, 512, 1024, 4096};
    static const double bytes[] = {256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304};
    static const char *const zero_gauges[] = {"master_nof_allocated_bytes",
                                              "master_total_nof_capacity_bytes",
                                              "master_allocated_file_size_bytes",
                                              "master_total_file_capacity_bytes",
                                              "master_put_start_discarded_staging_size",
                                              "ha_oplog_standby_lag",
                                              "ha_batch_record_committed_queue_depth",
                                              "ha_batch_record_callback_queue_depth",
                                              NULL};
    static const char *const zero_counters[] = {
        "master_nof_heartbeat_success_total",
        "master_nof_heartbeat_failure_total",
        "master_nof_heartbeat_timeout_total",
        "master_nof_segments_unmounted_by_heartbeat_total",
        "master_successful_evictions_nof",
        "master_attempted_evictions_nof",
        "master_evicted_key_count_nof",
        "master_evicted_size_bytes_nof",
        "master_promotion_candidate_recorded_total",
        "master_promotion_candidate_admitted_total",
        "master_promotion_candidate_admission_rejected_total",
        "master_promotion_candidate_expired_evaluated_total",
        "master_promotion_candidate_expired_unevaluated_total",
        "master_promotion_candidate_dropped_limit_total",
        "ha_oplog_skipped_entries_total",
        "ha_oplog_gap_resolve_attempts_total",
        "ha_oplog_gap_resolve_success_total",
        "ha_oplog_etcd_write_retries_total",
        "ha_oplog_watch_disconnections_total",
        "ha_oplog_dropped_put_end_total",
        "ha_oplog_sync_batch_commits_total",
        "ha_batch_record_durable_entries_total",
        "ha_batch_record_retry_total",
        NULL};
    for (size_t i = 0; zero_gauges[i]; i++)
        metric(f, zero_gauges[i], "gauge",
               "Upstream's; always 0 here (no NVMe-oF tier, legacy DISK tier, promotion or HA).",
               0);
    for (size_t i = 0; zero_counters[i]; i++)
        metric(f, zero_counters[i], "counter",
               "Upstream's; always 0 here (no NVMe-oF tier, promotion retry candidates or HA).", 0);
    family_empty(f, "nof_segment_allocated_bytes", "gauge",
                 "Upstream's per NVMe-oF segment; no such segments here.");
    family_empty(f, "nof_segment_total_capacity_bytes", "gauge",
                 "Upstream's per NVMe-oF segment; no such segments here.");
    family_empty(f, "mooncake_tenant_quota_reject_total", "counter",
                 "Upstream's per tenant; no tenants here.");
    family_empty(f, "mooncake_tenant_evict_bytes_total", "counter",
                 "Upstream's per tenant; no tenants here.");
    histogram_zero(f, "master_nof_heartbeat_probe_latency_ms", "Upstream's; no NVMe-oF probes.",
                   nof_ms, NBOUNDS(nof_ms));
    histogram_zero(f, "ha_oplog_etcd_write_latency_us", "Upstream's; no HA here.", us_write,
                   NBOUNDS(us_write));
    histogram_zero(f, "ha_oplog_apply_latency_us", "Upstream's; no HA here.", us_apply,
                   NBOUNDS(us_apply));
    histogram_zero(f, "ha_batch_record_batch_entries", "Upstream's; no HA here.", entries,
                   NBOUNDS(entries));
    histogram_zero(f, "ha_batch_record_batch_bytes", "Upstream's; no HA here.", bytes,
                   NBOUNDS(bytes));
    histogram_zero(f, "ha_batch_record_txn_latency_us", "Upstream's; no HA here.", us_txn,
                   NBOUNDS(us_txn));
    histogram_zero(f, "ha_batch_record_commit_to_durable_us", "Upstream's; no HA here.", us_txn,
                   NBOUNDS(us_txn));
    histogram_zero(f, "ha_batch_record_callback_latency_us", "Upstream's; no HA here.", us_apply,
                   NBOUNDS(us_apply));
}

/* Upstream's master families that come from our counters (besides the ones of render_metrics
 * that already carry upstream's names: master_allocated_bytes, master_total_capacity_bytes,
 * master_key_count, master_active_clients, master_evicted_key_count). */
static void render_upstream_metrics(mc_admin_http_t *a, FILE *f, const mc_master_stats_t *st)
{
    mc_master_op_stats_t os;
    mc_master_get_op_stats(a->master, &os);
    render_segment_gauges(a, f);
    metric(f, "master_soft_pin_key_count", "gauge", "Objects with an active soft pin.",
           st->soft_pinned_count);
    double bounds[MC_VALUE_SIZE_BUCKETS];
    for (size_t i = 0; i < MC_VALUE_SIZE_BUCKETS; i++)
        bounds[i] = (double)mc_value_size_bounds[i];
    histogram(f, "master_value_size_bytes", "Sizes of the objects PutStart created, in bytes.",
              bounds, MC_VALUE_SIZE_BUCKETS, os.value_size_counts, (double)os.value_size_sum);
    render_upstream_ops(f, &os);
    metric(f, "mem_cache_hit_nums_", "counter",
           "GetReplicaList answers whose first replica is in memory.", os.mem_hits);
    metric(f, "file_cache_hit_nums_", "counter",
           "GetReplicaList answers whose first replica is on disk.", os.file_hits);
    metric(f, "mem_cache_hit_bytes_total", "counter",
           "Bytes of the objects of mem_cache_hit_nums_.", os.mem_hit_bytes);
    metric(f, "file_cache_hit_bytes_total", "counter",
           "Bytes of the objects of file_cache_hit_nums_.", os.file_hit_bytes);
    metric(f, "mem_cache_nums_", "gauge", "Complete objects with a memory replica.",
           st->memory_objects);
    metric(f, "file_cache_nums_", "gauge", "Complete objects with a disk replica.",
           st->disk_objects);
    metric(f, "valid_get_nums_", "counter", "GetReplicaList keys that found a complete replica.",
           os.valid_gets);
    metric(f, "total_get_nums_", "counter", "GetReplicaList keys asked.", os.total_gets);
    for (int mem = 0; mem < 2; mem++) {
        const char *suffix = mem ? "_mem" : "_total";
        char name[64];
        snprintf(name, sizeof(name), "master_successful_evictions%s", suffix);
        metric(f, name, "counter", "Eviction rounds that freed something.",
               os.evictions_successful);
        snprintf(name, sizeof(name), "master_attempted_evictions%s", suffix);
        metric(f, name, "counter", "Eviction rounds run.", os.evictions_attempted);
        if (mem) {
            metric(f, "master_evicted_key_count_mem", "counter", "Objects evicted from memory.",
                   st->evicted_keys);
            metric(f, "master_evicted_size_bytes_mem", "counter", "Bytes evicted from memory.",
                   os.evicted_bytes);
        }
    }
    metric(f, "master_evicted_size_bytes", "counter", "Bytes of the objects evicted.",
           os.evicted_bytes);
    metric(f, "master_put_start_discard_cnt", "counter",
           "Unfinished puts older than --put_start_discard_timeout_sec replaced by a new PutStart.",
           os.put_start_discards);
    metric(f, "master_put_start_release_cnt", "counter",
           "Unfinished puts whose space was released (replaced, or older than "
           "--put_start_release_timeout_sec).",
           os.put_start_releases);
    render_promotion_metrics(f, st);
    render_ha_metrics(a, f);
    render_upstream_absent(f);
}

static void render_metrics(mc_admin_http_t *a, FILE *f)
{
    mc_master_stats_t st;
    mc_rpc_server_stats_t rs;
    mc_rpc_method_stats_t ms[MC_RPC_METHOD_COUNT];
    mc_master_get_stats(a->master, &st);
    size_t nm = mc_rpc_server_get_stats(a->rpc, &rs, ms, MC_RPC_METHOD_COUNT);

    metric(f, "master_total_capacity_bytes", "gauge",
           "Total size of all mounted memory segments, in bytes.", st.capacity_bytes);
    metric(f, "master_allocated_bytes", "gauge", "Bytes allocated to object replicas.",
           st.used_bytes);
    metric(f, "master_key_count", "gauge", "Objects in the index (complete and in-progress).",
           st.key_count);
    metric(f, "master_processing_keys", "gauge", "Objects whose put is still in progress.",
           st.processing_count);
    metric(f, "master_active_clients", "gauge", "Clients whose liveness TTL has not expired.",
           st.client_count);
    metric(f, "master_segment_count", "gauge", "Mounted memory segments.", st.segment_count);
    metric(f, "master_evicted_key_count", "counter", "Objects evicted since start.",
           st.evicted_keys);
    metric(f, "master_eviction_runs_total", "counter", "Eviction rounds run since start.",
           st.eviction_runs);
    metric(f, "master_leased_keys", "gauge", "Objects with an active read lease.", st.leased_count);
    metric(f, "master_reading_keys", "gauge",
           "Objects whose readers hold read leases not yet released.", st.reading_count);
    metric(f, "master_fenced_bytes", "gauge",
           "Bytes of removed, evicted or replaced values kept until their readers are done.",
           st.fenced_bytes);
    metric(f, "master_read_lease_releases_total", "counter",
           "Read leases released by their readers since start.", st.lease_releases);
    metric(f, "master_put_fence_waits_total", "counter",
           "Puts told to retry while fenced memory frees, rather than evict live objects.",
           st.put_fence_waits);
    metric(f, "master_soft_pinned_keys", "gauge", "Soft-pinned objects.", st.soft_pinned_count);
    metric(f, "master_hard_pinned_keys", "gauge", "Hard-pinned objects.", st.hard_pinned_count);
    metric(f, "master_expired_clients_total", "counter",
           "Clients dropped after their liveness TTL since start.", st.expired_clients);
    metric(f, "master_gone_clients_total", "counter",
           "Clients whose process was found gone (connection closed, endpoints refusing) since "
           "start.",
           st.gone_clients);
    metric(f, "master_revoked_puts_total", "counter",
           "Puts revoked by timeout or client expiry since start.", st.revoked_puts);
    metric(f, "master_quarantined_extents_total", "counter",
           "Extents of revoked puts held until their owner confirmed a write fence.",
           st.quarantined_extents);
    metric(f, "master_quarantine_freed_total", "counter",
           "Quarantined extents freed after their owner's write fence.", st.quarantine_freed);
    render_offload_metrics(f, &st);
    mc_restore_stats_t rst = {0};
    mc_master_restore_stats(a->master, &rst);
    metric(f, "master_restore_pending_records", "gauge",
           "Restored object records with a memory replica not re-mounted by its owner yet.",
           rst.pending);
    metric(f, "master_restore_revived_replicas_total", "counter",
           "Restored memory replicas made visible when their owner re-mounted the segment.",
           rst.revived);
    metric(
        f, "master_restore_expired_replicas_total", "counter",
        "Restored memory replicas dropped: not re-mounted within 3 client TTLs (or not fitting).",
        rst.expired);
    metric(f, "master_restore_untrusted_replicas_total", "counter",
           "Restored memory replicas dropped at re-mount: from a snapshot not marked clean, with "
           "no checksum to verify them by.",
           rst.untrusted);
    mc_snapshot_stats_t sst = {0};
    mc_master_snapshot_stats(a->master, &sst);
    metric(f, "master_snapshot_success", "counter",
           "Snapshots written (--enable_snapshot: periodic and the clean one at shutdown).",
           sst.success);
    metric(f, "master_snapshot_fail", "counter", "Snapshots that failed (nothing kept).", sst.fail);
    histogram(f, "master_snapshot_duration_ms", "Time to write a snapshot (ms).",
              mc_snapshot_ms_bounds, MC_SNAPSHOT_MS_BUCKETS, sst.ms_counts, (double)sst.ms_sum);
    metric(f, "master_restore_verified_replicas_total", "counter",
           "Restored memory replicas from a snapshot not marked clean that their owner verified "
           "(CRC32C of its memory) and made visible.",
           rst.verified);
    metric(f, "master_restore_verify_failed_total", "counter",
           "Restored memory replicas whose owner's bytes did not match their checksum: dropped.",
           rst.verify_failed);
    metric(f, "master_restore_superseded_total", "counter",
           "Restored records dropped because the key was written or removed meanwhile.",
           rst.superseded);
    metric(f, "master_rpc_connections_active", "gauge", "Open RPC connections.",
           rs.connections_active);
    metric(f, "master_rpc_connections_total", "counter", "RPC connections accepted since start.",
           rs.connections_accepted);
    metric(f, "master_rpc_connections_rejected_total", "counter",
           "RPC connections refused over the connection limit or one peer's share.",
           rs.connections_rejected);
    metric(f, "master_rpc_connections_rejected_per_peer_total", "counter",
           "Of those, refused because their peer already held a quarter of the limit.",
           rs.connections_rejected_per_peer);
    metric(f, "master_rpc_protocol_errors_total", "counter",
           "RPC connections closed for a malformed frame or body.", rs.protocol_errors);
    metric(f, "master_rpc_auth_refused_total", "counter",
           "RPC connections refused by the cluster-secret check.", rs.auth_refused);
    render_limit_metrics(a, f, &st, &rs);
    render_upstream_metrics(a, f, &st);

    fprintf(f, "# HELP master_rpc_requests_total RPC requests handled, by method.\n"
               "# TYPE master_rpc_requests_total counter\n");
    for (size_t i = 0; i < nm; i++)
        fprintf(f, "master_rpc_requests_total{method=\"%s\"} %" PRIu64 "\n", ms[i].method,
                ms[i].total);
    fprintf(f, "# HELP master_rpc_success_total RPC requests that succeeded for every key, by "
               "method.\n# TYPE master_rpc_success_total counter\n");
    for (size_t i = 0; i < nm; i++)
        fprintf(f, "master_rpc_success_total{method=\"%s\"} %" PRIu64 "\n", ms[i].method,
                ms[i].success);
}

static void render_summary(mc_admin_http_t *a, FILE *f)
{
    mc_master_stats_t st;
    mc_rpc_server_stats_t rs;
    mc_rpc_method_stats_t ms[MC_RPC_METHOD_COUNT];
    char used[32], cap[32];
    mc_master_get_stats(a->master, &st);
    size_t nm = mc_rpc_server_get_stats(a->rpc, &rs, ms, MC_RPC_METHOD_COUNT);
    double pct = st.capacity_bytes ? 100.0 * (double)st.used_bytes / (double)st.capacity_bytes : 0;

    /* upstream's line first */
    const char *role, *state;
    int ready;
    ha_role(a, &role, &state, &ready);
    mc_ha_t *ha = atomic_load(&a->ha);
    char leader[MC_ENDPOINT_MAX] = "";
    int64_t version = 0;
    if (ha)
        mc_ha_view(ha, leader, sizeof(leader), &version);
    fprintf(f,
            "role=%s, state=%s, service_ready=%s, master={keys=%" PRIu64
            ", allocated_bytes=%" PRIu64 ", capacity_bytes=%" PRIu64 ", clients=%" PRIu64
            "}, ha={%s}",
            role, state, ready ? "true" : "false", st.key_count, st.used_bytes, st.capacity_bytes,
            st.client_count, ha ? "etcd" : "disabled");
    if (ha && leader[0])
        fprintf(f, ", leader=%s, view_version=%lld", leader, (long long)version);
    fputc('\n', f);
    fprintf(f, "Mooncake master %s, up %" PRIu64 " s\n", MC_VERSION_STRING,
            (mc_now_ms() - a->started_ms) / 1000);
    fprintf(f, "Memory: %s used of %s (%.1f%%) in %" PRIu64 " segments\n",
            mc_format_size(st.used_bytes, used, sizeof(used)),
            mc_format_size(st.capacity_bytes, cap, sizeof(cap)), pct, st.segment_count);
    fprintf(f,
            "Keys: %" PRIu64 " (complete %" PRIu64 ", processing %" PRIu64 "; leased %" PRIu64
            ", soft-pinned %" PRIu64 ", hard-pinned %" PRIu64 ")\n",
            st.key_count, st.complete_count, st.processing_count, st.leased_count,
            st.soft_pinned_count, st.hard_pinned_count);
    fprintf(f,
            "Clients: %" PRIu64 " live, %" PRIu64 " expired and %" PRIu64
            " found gone since start\n",
            st.client_count, st.expired_clients, st.gone_clients);
    fprintf(f,
            "Eviction: %" PRIu64 " keys in %" PRIu64 " runs; revoked puts: %" PRIu64
            "; quarantined extents: %" PRIu64 " (%" PRIu64 " freed after their holder's fence)\n",
            st.evicted_keys, st.eviction_runs, st.revoked_puts, st.quarantined_extents,
            st.quarantine_freed);
    if (st.offload_enabled) {
        char bytes[32], dused[32], dcap[32];
        fprintf(f,
                "Offload: backend %s%s%s, %" PRIu64 " clients (%" PRIu64
                " unhealthy); queue %" PRIu64 " (%" PRIu64 " being written); done %" PRIu64
                ", failed %" PRIu64 ", retried %" PRIu64 ", skipped %" PRIu64 "; %s offloaded\n",
                offload_backend_name(st.offload_backend), st.offload_fs_type[0] ? "/" : "",
                st.offload_fs_type, st.offloaders, st.offloaders_unhealthy,
                st.offload_queued + st.offload_leased, st.offload_leased, st.offload_done,
                st.offload_failed, st.offload_retried, st.offload_skipped,
                mc_format_size(st.offload_bytes, bytes, sizeof(bytes)));
        fprintf(f,
                "Disk: %" PRIu64 " replicas (%" PRIu64 " DFS), %" PRIu64 " keys on disk only, %s "
                "used of %s; %" PRIu64 " evicted for capacity, %" PRIu64
                " deletions pending; fallback reads %" PRIu64 "\n",
                st.disk_replicas, st.dfs_replicas, st.disk_only_objects,
                mc_format_size(st.disk_used_bytes, dused, sizeof(dused)),
                mc_format_size(st.disk_capacity_bytes, dcap, sizeof(dcap)), st.disk_evicted,
                st.pending_deletions, st.fallback_reads);
    } else {
        fprintf(f, "Offload: disabled\n");
    }
    fprintf(f,
            "RPC connections: %" PRIu64 " open, %" PRIu64 " accepted, %" PRIu64
            " rejected, %" PRIu64 " protocol errors\n",
            rs.connections_active, rs.connections_accepted, rs.connections_rejected,
            rs.protocol_errors);
    fprintf(f, "Requests (success/total):");
    for (size_t i = 0; i < nm; i++)
        fprintf(f, " %s=%" PRIu64 "/%" PRIu64, ms[i].method, ms[i].success, ms[i].total);
    fprintf(f, "\n");
    if (a->settings)
        fprintf(f, "Settings: %s\n", a->settings);
}

/* Every mounted segment name once, one per line, in mount order. */
static void render_segments(mc_admin_http_t *a, FILE *f)
{
    size_t cap = 64;
    mc_segment_info_t *segs = NULL;
    size_t n;
    for (;;) {
        mc_segment_info_t *more = realloc(segs, cap * sizeof(*segs));
        if (!more) {
            free(segs);
            return;
        }
        segs = more;
        n = mc_master_list_segments(a->master, segs, cap);
        if (n <= cap)
            break;
        cap = n + 16; /* more were mounted than fit: retry with room for them */
    }
    for (size_t i = 0; i < n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(segs[i].name, segs[j].name) == 0;
        if (!seen)
            fprintf(f, "%s\n", segs[i].name);
    }
    free(segs);
}

static const char *replica_type_name(mc_replica_type_t t)
{
    switch (t) {
    case MC_REPLICA_MEMORY:
        return "MEMORY";
    case MC_REPLICA_DISK:
        return "DISK";
    case MC_REPLICA_LOCAL_DISK:
        return "LOCAL_DISK";
    case MC_REPLICA_DFS:
        return "DFS";
    }
    return "UNKNOWN";
}

static const char *replica_status_name(mc_replica_status_t s)
{
    static const char *const names[] = {"UNDEFINED", "INITIALIZED", "PROCESSING",
                                        "COMPLETE",  "REMOVED",     "FAILED"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

/* ---- JSON text from user bytes ------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the byte at s does not start one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid, as RFC 3629 says). */
static size_t utf8_sequence(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
               : s[0] >= 0xe0 && s[0] <= 0xef ? 3
               : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                              : 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    }
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

/*
 * A JSON string of the NUL-terminated bytes `s`: as is when they are valid UTF-8, else with each
 * byte outside a valid sequence replaced by U+FFFD (*escaped, when not NULL, is set to 1 then).
 * NULL only when out of memory.
 */
static json_t *json_text(const char *s, int *escaped)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), bad = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence(p + i);
        bad += n == 0;
        i += n ? n : 1;
    }
    if (escaped)
        *escaped = bad > 0;
    if (bad == 0)
        return json_stringn(s, len);
    char *out = malloc(len + 2 * bad + 1), *o = out; /* U+FFFD is 3 bytes for 1 */
    if (!out)
        return NULL;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence(p + i);
        if (n) {
            memcpy(o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(out, (size_t)(o - out));
    free(out);
    return j;
}

/* Sets obj["key"] to the key's text, and obj["key_hex"] to its bytes when the text had to be
 * escaped. 0, or -1 when out of memory. */
static int json_set_key(json_t *obj, const char *key)
{
    int escaped = 0;
    if (json_object_set_new(obj, "key", json_text(key, &escaped)) != 0)
        return -1;
    if (!escaped)
        return 0;
    size_t len = strlen(key);
    char *hex = malloc(2 * len + 1);
    if (!hex)
        return -1;
    for (size_t i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)key[i]);
    int rc = json_object_set_new(obj, "key_hex", json_string(hex));
    free(hex);
    return rc;
}

static void reply_json(admin_reply_t *r, unsigned int status, json_t *obj)
{
    r->status = status;
    r->content_type = ADMIN_CONTENT_JSON;
    r->body = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    r->len = r->body ? strlen(r->body) : 0;
    json_decref(obj);
}

static void reply_error_json(admin_reply_t *r, unsigned int status, const char *error,
                             const char *key)
{
    json_t *o = json_pack("{s:s}", "error", error);
    if (o && key && json_set_key(o, key) != 0) {
        json_decref(o);
        o = NULL;
    }
    reply_json(r, status, o);
}

static void route_query_key(mc_admin_http_t *a, struct MHD_Connection *conn, admin_reply_t *r)
{
    const char *key = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "key");
    if (!key || !*key) {
        reply_error_json(r, MHD_HTTP_BAD_REQUEST, "missing key parameter", NULL);
        return;
    }
    mc_replica_desc_t reps[ADMIN_QUERY_REPLICAS];
    size_t n = 0;
    uint64_t size = 0, lease = 0;
    int rc = mc_master_query_key(a->master, key, reps, ADMIN_QUERY_REPLICAS, &n, &size, &lease);
    if (rc == MC_ERR_OBJECT_NOT_FOUND) {
        reply_error_json(r, MHD_HTTP_NOT_FOUND, "key not found", key);
        return;
    }
    if (rc != 0) {
        reply_error_json(r, MHD_HTTP_BAD_REQUEST, mc_error_name(rc), key);
        return;
    }
    if (n > ADMIN_QUERY_REPLICAS)
        n = ADMIN_QUERY_REPLICAS;
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        json_t *o = json_pack("{s:s,s:s,s:o,s:I,s:I}", "type", replica_type_name(reps[i].type),
                              "status", replica_status_name(reps[i].status), "segment_name",
                              json_text(reps[i].segment_name, NULL), "address",
                              (json_int_t)reps[i].address, "size", (json_int_t)reps[i].size);
        if (o && reps[i].file_path[0])
            json_object_set_new(o, "file_path", json_text(reps[i].file_path, NULL));
        json_array_append_new(list, o);
    }
    json_t *obj = json_object();
    if (!obj || json_set_key(obj, key) != 0 ||
        json_object_set_new(obj, "size", json_integer((json_int_t)size)) != 0 ||
        json_object_set_new(obj, "lease_remaining_ms", json_integer((json_int_t)lease)) != 0) {
        json_decref(list);
        json_decref(obj);
        obj = NULL;
    } else if (json_object_set_new(obj, "replicas", list) != 0) { /* takes list either way */
        json_decref(obj);
        obj = NULL;
    }
    if (!obj)
        reply_error_json(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot encode the reply", NULL);
    else
        reply_json(r, MHD_HTTP_OK, obj);
}

static void route_health(mc_admin_http_t *a, admin_reply_t *r)
{
    mc_master_stats_t st;
    mc_master_get_stats(a->master, &st);
    json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "status",
                          st.offloaders_unhealthy ? "degraded" : "ok", "version", MC_VERSION_STRING,
                          "uptime_seconds", (json_int_t)((mc_now_ms() - a->started_ms) / 1000),
                          "segments", (json_int_t)st.segment_count, "keys",
                          (json_int_t)st.key_count, "clients", (json_int_t)st.client_count);
    /* upstream's keys: role, ha_state, service_ready (+ leader_address, view_version with HA) */
    const char *role, *state;
    int ready;
    ha_role(a, &role, &state, &ready);
    if (o && (json_object_set_new(o, "role", json_string(role)) != 0 ||
              json_object_set_new(o, "ha_state", json_string(state)) != 0 ||
              json_object_set_new(o, "service_ready", json_boolean(ready)) != 0)) {
        json_decref(o);
        o = NULL;
    }
    mc_ha_t *ha = atomic_load(&a->ha);
    char leader[MC_ENDPOINT_MAX] = "";
    int64_t version = 0;
    if (ha)
        mc_ha_view(ha, leader, sizeof(leader), &version);
    if (o && leader[0]) {
        json_object_set_new(o, "leader_address", json_string(leader));
        json_object_set_new(o, "view_version", json_integer((json_int_t)version));
    }
    json_t *off = json_pack("{s:b,s:s,s:s,s:I,s:I,s:b,s:I}", "enabled", (int)st.offload_enabled,
                            "backend", offload_backend_name(st.offload_backend), "fs_type",
                            st.offload_fs_type, "clients", (json_int_t)st.offloaders,
                            "unhealthy_clients", (json_int_t)st.offloaders_unhealthy,
                            "backend_healthy", st.offloaders_unhealthy == 0, "queue_depth",
                            (json_int_t)(st.offload_queued + st.offload_leased));
    if (o && off)
        json_object_set_new(o, "offload", off);
    else
        json_decref(off);
    reply_json(r, MHD_HTTP_OK, o);
}

/* upstream's /leader: {"present"[, "leader_address", "view_version"]} as this master sees it. */
static void route_leader(mc_admin_http_t *a, admin_reply_t *r)
{
    mc_ha_t *ha = atomic_load(&a->ha);
    char leader[MC_ENDPOINT_MAX] = "";
    int64_t version = 0;
    if (ha)
        mc_ha_view(ha, leader, sizeof(leader), &version);
    json_t *o = leader[0] ? json_pack("{s:b,s:s,s:I}", "present", 1, "leader_address", leader,
                                      "view_version", (json_int_t)version)
                          : json_pack("{s:b}", "present", 0);
    reply_json(r, MHD_HTTP_OK, o);
}

/* A fixed 200 body. */
static void reply_static(admin_reply_t *r, const char *type, const char *body)
{
    r->status = MHD_HTTP_OK;
    r->content_type = type;
    r->body = strdup(body);
    r->len = r->body ? strlen(body) : 0;
}

/* Runs a text renderer into r. */
static void reply_text(admin_reply_t *r, const char *type,
                       void (*render)(mc_admin_http_t *, FILE *), mc_admin_http_t *a)
{
    FILE *f = open_memstream(&r->body, &r->len);
    r->status = MHD_HTTP_OK;
    r->content_type = type;
    if (!f) {
        r->body = NULL;
        r->len = 0;
        return;
    }
    render(a, f);
    fclose(f);
}

static void route(mc_admin_http_t *a, struct MHD_Connection *conn, const char *url,
                  admin_reply_t *r)
{
    if (!strcmp(url, "/metrics"))
        reply_text(r, ADMIN_CONTENT_PROMETHEUS, render_metrics, a);
    else if (!strcmp(url, "/metrics/summary"))
        reply_text(r, ADMIN_CONTENT_TEXT, render_summary, a);
    else if (!strcmp(url, "/get_all_segments"))
        reply_text(r, ADMIN_CONTENT_TEXT, render_segments, a);
    else if (!strcmp(url, "/health"))
        route_health(a, r);
    else if (!strcmp(url, "/role") || !strcmp(url, "/ha_status")) {
        const char *role, *state;
        int ready;
        ha_role(a, &role, &state, &ready);
        reply_static(r, ADMIN_CONTENT_TEXT, !strcmp(url, "/role") ? role : state);
    } else if (!strcmp(url, "/leader"))
        route_leader(a, r);
    else if (!strcmp(url, "/query_key"))
        route_query_key(a, conn, r);
    else
        reply_error_json(r, MHD_HTTP_NOT_FOUND, "no such path", NULL);
}

/* ---- libmicrohttpd glue ------------------------------------------------------------------ */

static enum MHD_Result admin_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **req_cls)
{
    mc_admin_http_t *a = cls;
    admin_reply_t r = {0};

    if (!mc_http_request_whole(req_cls, upload_data_size))
        return MHD_YES;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        reply_error_json(&r, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET is served", NULL);
    else
        route(a, conn, url, &r);
    return mc_http_reply_owned(conn, r.status, r.content_type, r.body, r.len);
}

int mc_admin_http_start(const mc_admin_http_config_t *config, mc_admin_http_t **out)
{
    if (!config || !config->master || !out || config->port < 0 || config->port > 65535)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_admin_http_t *a = calloc(1, sizeof(*a));
    if (!a)
        return MC_ERR_INTERNAL_ERROR;
    a->master = config->master;
    a->rpc = config->rpc;
    a->metadata = config->metadata;
    if (mc_http_guard_init(&a->guard, "admin HTTP", MC_ADMIN_MAX_CONNECTIONS,
                           ADMIN_REQUEST_TIMEOUT_MS) != 0) {
        free(a);
        return MC_ERR_INTERNAL_ERROR;
    }
    a->started_ms = mc_now_ms();
    if (config->settings && !(a->settings = strdup(config->settings))) {
        mc_http_guard_destroy(&a->guard);
        free(a);
        return MC_ERR_INTERNAL_ERROR;
    }
    int fd = mc_net_listen_tcp(config->host, config->port, ADMIN_BACKLOG, &a->port);
    if (fd < 0) {
        mc_http_guard_destroy(&a->guard);
        free(a->settings);
        free(a);
        return fd; /* mc_net_listen_tcp logged host:port and the reason */
    }
    /* libmicrohttpd owns fd from here: MHD_stop_daemon closes it. */
    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    a->daemon = MHD_start_daemon(
        flags, 0, mc_http_guard_accept, &a->guard, admin_handle, a, MHD_OPTION_EXTERNAL_LOGGER,
        mc_http_mhd_log, (void *)"admin HTTP", MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_CONNECTION_TIMEOUT, ADMIN_CONNECTION_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ADMIN_CONNECTION_MEMORY_LIMIT,
        MHD_OPTION_CONNECTION_LIMIT, MC_HTTP_GUARD_HARD_LIMIT(MC_ADMIN_MAX_CONNECTIONS),
        MHD_OPTION_NOTIFY_CONNECTION, mc_http_guard_notify, &a->guard, MHD_OPTION_NOTIFY_COMPLETED,
        mc_http_guard_completed, &a->guard, MHD_OPTION_END);
    if (!a->daemon) {
        MC_ERROR("admin HTTP: cannot start serving on %s:%d", config->host ? config->host : "",
                 a->port);
        close(fd);
        mc_http_guard_destroy(&a->guard);
        free(a->settings);
        free(a);
        return MC_ERR_INTERNAL_ERROR;
    }
    *out = a;
    return 0;
}

int mc_admin_http_port(const mc_admin_http_t *server)
{
    return server ? server->port : -1;
}

void mc_admin_http_stop(mc_admin_http_t *server)
{
    if (!server)
        return;
    MHD_stop_daemon(server->daemon);
    mc_http_guard_destroy(&server->guard);
    free(server->settings);
    free(server);
}
