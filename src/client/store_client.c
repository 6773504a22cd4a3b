/*
 * store_client.c — the real client: the store backend (store_backend.h) with its own segment,
 * Transfer Engine and master connection, set up by mc_store_setup (include/mooncake/store.h).
 * store.c checks every call's arguments and brackets it; what runs in the real client's files
 * (store_client_internal.h lists them, in layers) is the work. This file is the top layer: setup
 * and close, the client HTTP server's hooks, the slots that only forward (offload, tasks), and
 * the backend table that names every slot.
 */
#include "store_client_internal.h"

#include "clock.h"
#include "log.h"
#include "master_view.h"
#include "net.h"
#include "store_backend.h"
#include "store_client.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define MC_DEFAULT_MASTER "127.0.0.1:50051"
#define MC_MOUNT_FENCE_WAIT_MS 30000    /* setup waits this long for a fenced range (leases) */
#define MC_MASTER_WAIT_DEFAULT_MS 30000 /* setup waits this long for an unreachable master */
#define MC_MASTER_WAIT_ENV "MC_MASTER_WAIT_TIMEOUT" /* seconds; overrides the default */
/* A remove or upsert waits this long (MC_STORE_DELETE_WAIT_MS) for its old files to go. */
#define MC_DELETE_WAIT_DEFAULT_MS 10000

/* How long setup waits for an unreachable master: the config, else MC_MASTER_WAIT_TIMEOUT
 * (seconds), else 30 s. Negative: not at all. */
static int64_t master_wait_ms(const mc_store_config_t *c)
{
    if (c->master_wait_timeout_ms)
        return c->master_wait_timeout_ms < 0 ? 0 : c->master_wait_timeout_ms;
    const char *e = getenv(MC_MASTER_WAIT_ENV);
    char *end = NULL;
    double sec = e && *e ? strtod(e, &end) : -1;
    if (e && *e && end && !*end && sec >= 0 && sec <= 86400)
        return (int64_t)(sec * 1000);
    if (e && *e)
        MC_WARN("%s=\"%s\" is not a number of seconds in [0, 86400]; using %d s",
                MC_MASTER_WAIT_ENV, e, MC_MASTER_WAIT_DEFAULT_MS / 1000);
    return MC_MASTER_WAIT_DEFAULT_MS;
}

/*
 * ServiceReady, retried while the master is unreachable (RPC_FAIL / RPC_TIMEOUT: not started
 * yet, restarting) for up to wait_ms with a backoff from 100 ms to 2 s, as deployments start
 * processes in any order. One line when the wait starts, one when it ends. Any other answer
 * (refused secret, ...) returns at once.
 */
static int wait_for_master(mc_real_client_t *s, int64_t wait_ms, Mc__ServiceReadyResponse **ready)
{
    uint64_t start = mc_now_ms(), deadline = start + (uint64_t)wait_ms;
    useconds_t backoff_us = 100 * 1000;
    int waited = 0;
    for (;;) {
        int rc = mc_master_call_service_ready(s->rpc, ready);
        if (rc == 0 && waited)
            MC_INFO("mooncake_master at %s reachable after %.1f s", s->master_addr,
                    (double)(mc_now_ms() - start) / 1000.0);
        if (rc != MC_ERR_RPC_FAIL && rc != MC_ERR_RPC_TIMEOUT)
            return rc;
        uint64_t now = mc_now_ms();
        if (now >= deadline)
            return rc;
        if (!waited) {
            MC_WARN("mooncake_master at %s not reachable (%s); retrying for up to %.0f s (%s)",
                    s->master_addr, mc_error_name(rc), (double)wait_ms / 1000.0,
                    MC_MASTER_WAIT_ENV);
            waited = 1;
        }
        uint64_t left_us = (deadline - now) * 1000;
        usleep(left_us < backoff_us ? (useconds_t)left_us : backoff_us);
        if (backoff_us < 2000 * 1000)
            backoff_us *= 2;
    }
}

static int host_is_loopback(const char *h)
{
    return !strncmp(h, "127.", 4) || !strcmp(h, "::1") || !strcmp(h, "localhost");
}

/*
 * A segment published at an address other hosts cannot reach makes every put to it fail with
 * -800 on their side, while this client sees nothing wrong: say so at start-up. Two cases: the
 * published host is loopback but the master is not (peers elsewhere cannot reach loopback), or
 * it differs from the address this host reaches the master from (a multi-homed host publishing
 * another interface's address; harmless when that interface is the data network, hence only a
 * warning).
 */
static void warn_unreachable_publication(mc_real_client_t *s)
{
    char pub[MC_HOST_MAX], master[MC_HOST_MAX], local[MC_HOST_MAX] = "";
    int port;
    if (mc_net_split_endpoint(mc_te_local_segment_name(s->te), 0, pub, &port) != 0 ||
        mc_net_split_endpoint(s->master_addr, 0, master, &port) != 0)
        return;
    if (host_is_loopback(pub) && !host_is_loopback(master)) {
        MC_WARN("this client publishes its segment at %s, a loopback address, while the master "
                "is at %s: clients on other hosts cannot reach it and their puts to it will fail "
                "(-800). Set --host (Python: local_hostname) to an address they reach",
                mc_te_local_segment_name(s->te), s->master_addr);
        return;
    }
    if (mc_rpc_client_local_host(s->rpc, local, sizeof(local)) == 0 && !host_is_loopback(local) &&
        !host_is_loopback(pub) && strcmp(local, pub) != 0)
        MC_WARN("this client publishes its segment at %s but reaches the master %s from %s: if "
                "other hosts cannot reach %s, their puts to this segment fail (-800); set --host "
                "(Python: local_hostname) to the address they reach, e.g. %s",
                mc_te_local_segment_name(s->te), s->master_addr, local, pub, local);
}

/* The RPC client's resolver when following an elected master: the leader published in etcd. */
static int resolve_leader(void *arg, char *out, size_t cap)
{
    mc_real_client_t *s = arg;
    int64_t version = 0;
    int rc = mc_master_view_read(s->view_etcd, s->view_cluster, out, cap, &version);
    if (rc != 0) {
        uint64_t now = mc_now_ms(), last = atomic_load(&s->last_master_error_ms);
        if (now - last >= 1000 &&
            atomic_compare_exchange_strong(&s->last_master_error_ms, &last, now))
            MC_WARN("no elected master found through %s (cluster %s): %s", s->master_addr,
                    s->view_cluster,
                    rc == MC_ERR_ETCD_KEY_NOT_EXIST ? "none leads now" : mc_error_name(rc));
    }
    return rc;
}

static int setup_checked(mc_real_client_t *s, const mc_store_config_t *c)
{
    int rc = mc_auth_resolve(c->cluster_secret, c->cluster_secret_file, &s->auth);
    if (rc != 0)
        return rc;
    const char *addr =
        c->master_server_addr && *c->master_server_addr ? c->master_server_addr : MC_DEFAULT_MASTER;
    char endpoints[4096];
    int ha = mc_master_addr_parse(addr, endpoints, sizeof(endpoints));
    if (ha < 0)
        return MC_ERR_INVALID_PARAMS;
    if (ha) {
        snprintf(s->view_cluster, sizeof(s->view_cluster), "%s", mc_client_cluster_id());
        rc = mc_etcd_create(endpoints, 2000, &s->view_etcd);
        if (rc != 0)
            return rc;
        rc = mc_rpc_client_create_resolved(resolve_leader, s, MC_RPC_DEFAULT_TIMEOUT_MS, &s->rpc);
    } else {
        rc = mc_rpc_client_create(addr, MC_RPC_DEFAULT_TIMEOUT_MS, &s->rpc);
    }
    if (rc != 0)
        return rc;
    mc_rpc_client_set_auth(s->rpc, s->auth, "master");
    rc = mc_lease_releaser_create(s->rpc, s->client_id, &s->releases);
    if (rc != 0)
        return rc;
    Mc__ServiceReadyResponse *ready;
    rc = wait_for_master(s, master_wait_ms(c), &ready);
    if (rc != 0) {
        MC_ERROR("cannot reach mooncake_master at %s: %s", s->master_addr, mc_error_name(rc));
        return rc == MC_ERR_ILLEGAL_CLIENT ? rc : MC_ERR_RPC_FAIL;
    }
    int same = ready->version && !strcmp(ready->version, MC_VERSION_STRING);
    if (!same)
        MC_ERROR("master %s runs version %s, this client %s", s->master_addr,
                 ready->version ? ready->version : "?", MC_VERSION_STRING);
    mc__service_ready_response__free_unpacked(ready, NULL);
    if (!same)
        return MC_ERR_INVALID_VERSION;

    mc_transfer_engine_config_t tc = {.local_server_name = c->local_hostname,
                                      .metadata_server = c->metadata_server,
                                      .protocol = c->protocol,
                                      .device_names = c->device_name,
                                      .cluster_secret = c->cluster_secret,
                                      .cluster_secret_file = c->cluster_secret_file};
    if (c->transfer_engine) { /* shared with the caller (upstream's engine=) */
        s->te = c->transfer_engine;
        s->te_borrowed = 1;
    } else {
        rc = mc_te_create(&tc, &s->te);
        if (rc != 0)
            return rc;
    }
    warn_unreachable_publication(s);
    long page = sysconf(_SC_PAGESIZE);
    if (s->global_segment_size > 0) {
        s->global_segment_size =
            (s->global_segment_size + (uint64_t)page - 1) & ~((uint64_t)page - 1);
        rc = mc_te_alloc_segment_memory(s->te, s->global_segment_size, &s->segment);
        if (rc != 0)
            return rc;
        /* Before the mount: sync mode hands the master committed memory; background mode
         * races the first puts, which it never disturbs (prefault.h). */
        rc = mc_prefault_start(s->segment, s->global_segment_size, &s->prefault_opts, &s->prefault);
        if (rc != 0)
            return rc;
    }
    /* Offload roles: checked and opened before anyone learns of this client. */
    char host[MC_HOST_MAX];
    int port;
    if (mc_net_split_endpoint(c->local_hostname, 0, host, &port) != 0) {
        MC_ERROR("local_hostname \"%s\" is not host or host:port", c->local_hostname);
        return MC_ERR_INVALID_PARAMS; /* never a silent bind to every interface */
    }
    mc_offload_setup_t os = {.client_id = s->client_id,
                             .te = s->te,
                             .host = host,
                             .segment_size = s->global_segment_size,
                             .enable_offload = c->enable_offload,
                             .offload_path = c->offload_path};
    rc = mc_offload_prepare(&os, &s->offload);
    if (rc != 0)
        return rc;
    if (s->global_segment_size > 0) {
        mc_real_make_uuid(s->segment_id);
        /* A range fenced by an earlier mount's read leases (e.g. this host:port restarted) frees
         * within a lease TTL. */
        uint64_t deadline = mc_now_ms() + MC_MOUNT_FENCE_WAIT_MS;
        while ((rc = mc_real_segment_call(s, MC_RPC_MOUNT_SEGMENT)) ==
                   MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS &&
               mc_now_ms() < deadline)
            usleep(200 * 1000);
        if (rc != 0)
            return rc;
    } else {
        /* Registers this client, so the master expires it (and revokes its puts) on silence. */
        rc = mc_real_segment_call(s, MC_RPC_REMOUNT_SEGMENT);
        if (rc != 0)
            return rc;
    }
    if (s->local_buffer_size > 0) {
        void *p = mmap(NULL, s->local_buffer_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            MC_ERROR("cannot map a local buffer of %llu bytes: %s",
                     (unsigned long long)s->local_buffer_size, strerror(errno));
            return MC_ERR_INTERNAL_ERROR;
        }
        s->local_buffer = p;
    }
    atomic_store(&s->master_reachable, 1);
    if (pthread_create(&s->ping_thread, NULL, mc_real_ping_main, s) != 0)
        return MC_ERR_INTERNAL_ERROR;
    s->ping_started = 1;
    if (s->view_etcd) {
        if (pthread_create(&s->view_thread, NULL, mc_real_view_main, s) != 0)
            return MC_ERR_INTERNAL_ERROR;
        s->view_started = 1;
    }
    if (s->segment && mc_task_executor_start(s->rpc, s->te, s->client_id, s->segment,
                                             s->global_segment_size, &s->tasks) != 0)
        return MC_ERR_INTERNAL_ERROR;
    return mc_offload_start(s->offload, s->rpc, (uintptr_t)s->segment, s->te);
}

/* The real client's locks (real_free destroys them; the call bracket is store.c's). */
static void init_locks(mc_real_client_t *s)
{
    pthread_mutex_init(&s->segs_lock, NULL);
    pthread_mutex_init(&s->ping_lock, NULL);
    pthread_cond_init(&s->ping_cond, NULL);
    pthread_rwlock_init(&s->buffers_lock, NULL);
}

/* /health of the client HTTP server (upstream's codes): set up and the master answering pings. */
static int store_http_health(void *arg)
{
    mc_real_client_t *s = arg;
    if (atomic_load(&s->closing))
        return MC_CLIENT_NOT_INITIALIZED;
    return atomic_load(&s->master_reachable) ? MC_CLIENT_HEALTHY : MC_CLIENT_MASTER_UNREACHABLE;
}

/* /health's "offload_storage": whether the offload storage answers (NULL without offload). */
static const char *store_http_offload_storage(void *arg)
{
    mc_real_client_t *s = arg;
    mc_fs_health_stats_t h;
    if (mc_offload_storage_health(s->offload, &h) != 0)
        return NULL;
    return h.wedged ? "unavailable" : "ok";
}

/* /metrics: the offload storage's deadlines (the DAOS adapter's counts; 0 on posix). */
static void store_http_more_metrics(void *arg, FILE *f)
{
    mc_real_client_t *s = arg;
    mc_fs_health_stats_t h;
    if (mc_offload_storage_health(s->offload, &h) != 0)
        return;
    fprintf(f,
            "# HELP mooncake_client_offload_storage_timeouts_total Offload storage operations "
            "that passed their deadline with the storage not answering.\n"
            "# TYPE mooncake_client_offload_storage_timeouts_total counter\n"
            "mooncake_client_offload_storage_timeouts_total %" PRIu64 "\n"
            "# HELP mooncake_client_offload_storage_refused_total Offload storage operations "
            "refused at once while the storage was wedged.\n"
            "# TYPE mooncake_client_offload_storage_refused_total counter\n"
            "mooncake_client_offload_storage_refused_total %" PRIu64 "\n"
            "# HELP mooncake_client_offload_storage_stuck_calls Storage calls given up at their "
            "deadline that have not returned yet.\n"
            "# TYPE mooncake_client_offload_storage_stuck_calls gauge\n"
            "mooncake_client_offload_storage_stuck_calls %" PRIu64 "\n"
            "# HELP mooncake_client_offload_storage_wedged 1 while the offload storage is wedged "
            "(a deadline passed and nothing answered since).\n"
            "# TYPE mooncake_client_offload_storage_wedged gauge\n"
            "mooncake_client_offload_storage_wedged %d\n",
            h.timeouts, h.fast_failures, h.stuck_calls, h.wedged);
}

/* Starts the client HTTP server when asked; a bind failure only warns (upstream). */
static void start_http_server(mc_real_client_t *s, const mc_store_config_t *c)
{
    if (!c->enable_http_server)
        return;
    char host[MC_HOST_MAX] = "";
    int port = 0;
    if (c->http_host && *c->http_host)
        snprintf(host, sizeof(host), "%s", c->http_host);
    else if (mc_net_split_endpoint(c->local_hostname, 0, host, &port) != 0)
        snprintf(host, sizeof(host), "%s", c->local_hostname);
    mc_client_http_config_t hc = {host,
                                  c->http_port,
                                  s->metrics,
                                  store_http_health,
                                  s,
                                  store_http_offload_storage,
                                  store_http_more_metrics};
    int rc = mc_client_http_start(&hc, &s->http);
    if (rc != 0) {
        MC_WARN("client HTTP server not started on %s:%d (%s); the store works without it", host,
                c->http_port, mc_error_name(rc));
        return;
    }
    mc_auth_warn_open_listener(s->auth, "the client HTTP server", host, c->http_port);
    MC_INFO("client HTTP server on %s:%d (/health, /metrics, /metrics/summary)%s", host,
            mc_client_http_port(s->http), s->metrics ? "" : "; metrics off");
}

/* ---- lifecycle slots ---------------------------------------------------------------------- */

static void real_begin_close(void *impl)
{
    mc_real_client_t *s = impl;
    atomic_store(&s->closing, 1);
}

/* Also what a failed setup undoes with: every step copes with the ones that never ran. */
static void real_close(void *impl)
{
    mc_real_client_t *s = impl;
    mc_prefault_stop(s->prefault); /* joined before the segment memory is unmapped */
    s->prefault = NULL;
    mc_client_http_stop(s->http); /* before anything it reads goes */
    s->http = NULL;
    mc_lease_releaser_destroy(s->releases); /* sends the releases still queued */
    s->releases = NULL;
    /* The offload worker drains while the segment is still mounted and pings keep this client
     * alive; then its server stops, before the Transfer Engine it stages reads in. */
    mc_offload_stop(s->offload);
    mc_task_executor_stop(s->tasks); /* its task in hand reported, before the unmount */
    s->tasks = NULL;
    if (s->ping_started) {
        pthread_mutex_lock(&s->ping_lock);
        s->ping_stop = 1;
        pthread_cond_broadcast(&s->ping_cond);
        pthread_mutex_unlock(&s->ping_lock);
        pthread_join(s->ping_thread, NULL);
        s->ping_started = 0;
        if (s->view_started)
            pthread_join(s->view_thread, NULL);
        s->view_started = 0;
        if (mc_offload_fallback_reads(s->offload) > 0 ||
            atomic_load(&s->checksum_mismatches) > 0) { /* the master's counts, up to date */
            Mc__PingResponse *resp = NULL;
            if (mc_master_call_ping(s->rpc, s->client_id, mc_offload_fallback_reads(s->offload),
                                    atomic_load(&s->checksum_mismatches), s->fence_acked,
                                    s->fence_view, &resp) == 0)
                mc__ping_response__free_unpacked(resp, NULL);
        }
    }
    mc_real_run_segments_unmount_all(s);
    if (s->segment && s->rpc && s->segment_id[0]) {
        int rc = mc_real_segment_call(s, MC_RPC_UNMOUNT_SEGMENT);
        if (rc != 0 && rc != MC_ERR_SEGMENT_NOT_FOUND)
            MC_WARN("unmounting segment %s at close: %s", s->segment_id, mc_error_name(rc));
    }
    if (s->te && s->te_borrowed) { /* the caller's engine: undo only what this store did */
        pthread_rwlock_wrlock(&s->buffers_lock);
        for (size_t i = 0; i < s->buffer_count; i++)
            mc_te_unregister_memory(s->te, (void *)(uintptr_t)s->buffers[i].addr);
        s->buffer_count = 0;
        pthread_rwlock_unlock(&s->buffers_lock);
        if (s->segment)
            mc_te_free_segment_memory(s->te, s->segment);
        mc_real_run_segments_release(s, 0);
        mc_te_set_epoch(s->te, 0); /* the unmounted segment's epoch no longer applies */
    } else if (s->te) {
        mc_te_destroy(s->te); /* frees the segment memory and unregisters user buffers */
        mc_real_run_segments_release(s, 1);
    }
    s->te = NULL;
    mc_offload_free(s->offload);
    s->offload = NULL;
    s->segment = NULL;
    if (s->local_buffer)
        munmap(s->local_buffer, s->local_buffer_size);
    s->local_buffer = NULL;
    mc_rpc_client_destroy(s->rpc);
    s->rpc = NULL;
    if (s->view_etcd)
        mc_etcd_destroy(s->view_etcd);
    s->view_etcd = NULL;
    mc_auth_destroy(s->auth);
    s->auth = NULL;
}

static void real_free(void *impl)
{
    mc_real_client_t *s = impl;
    pthread_mutex_destroy(&s->segs_lock);
    pthread_mutex_destroy(&s->ping_lock);
    free(s->run_segs);
    free(s->holes);
    pthread_cond_destroy(&s->ping_cond);
    pthread_rwlock_destroy(&s->buffers_lock);
    free(s->buffers);
    free(s->master_addr);
    mc_client_metrics_free(s->metrics);
    free(s);
}

static int real_health_check(void *impl)
{
    mc_real_client_t *s = impl;
    Mc__ServiceReadyResponse *r;
    if (mc_master_call_service_ready(s->rpc, &r) != 0)
        return 2;
    mc__service_ready_response__free_unpacked(r, NULL);
    return 0;
}

static const char *real_get_hostname(const void *impl)
{
    const mc_real_client_t *s = impl;
    return s->te ? mc_te_local_segment_name(s->te) : "";
}

/* ---- offload slots ------------------------------------------------------------------------ */

static int real_get_offload_stats(void *impl, mc_store_offload_stats_t *out)
{
    mc_real_client_t *s = impl;
    mc_offload_get_stats(s->offload, out);
    return 0;
}

static int real_set_offloading(void *impl, int enabled)
{
    mc_real_client_t *s = impl;
    return mc_offload_set_offloading(s->offload, enabled);
}

/* ---- replica copy/move tasks and replica clear (task_executor.h) --------------------------- */

static int real_create_task(void *impl, int move, const char *key, const char *source,
                            const char *const *targets, size_t n, char *id_out)
{
    mc_real_client_t *s = impl;
    return mc_task_call_create(s->rpc, move, key, source, targets, n, id_out);
}

static int real_query_task(void *impl, const char *task_id, mc_task_info_t *out)
{
    mc_real_client_t *s = impl;
    return mc_task_call_query(s->rpc, task_id, out);
}

static int real_batch_replica_clear(void *impl, const char *const *keys, size_t n,
                                    const char *segment_name, int *cleared)
{
    mc_real_client_t *s = impl;
    return mc_task_call_replica_clear(s->rpc, s->client_id, keys, n, segment_name, cleared);
}

/* ---- the backend -------------------------------------------------------------------------- */

static const mc_store_backend_ops_t real_ops = {
    .name = "real",
    .begin_close = real_begin_close,
    .close = real_close,
    .free = real_free,
    .health_check = real_health_check,
    .get_hostname = real_get_hostname,
    .write = mc_real_write,
    .read = mc_real_read,
    .exist = mc_real_exist,
    .remove = mc_real_remove,
    .remove_all = mc_real_remove_all,
    .remove_by_regex = mc_real_remove_by_regex,
    .get_size = mc_real_get_size,
    .get_replica_desc = mc_real_get_replica_desc,
    .register_buffer = mc_real_register_buffer,
    .unregister_buffer = mc_real_unregister_buffer,
    .get_offload_stats = real_get_offload_stats,
    .set_offloading = real_set_offloading,
    .create_task = real_create_task,
    .query_task = real_query_task,
    .batch_replica_clear = real_batch_replica_clear,
    .allocate_and_mount_segment = mc_real_allocate_and_mount_segment,
    .mount_file_segment = mc_real_mount_file_segment,
    .unmount_segment = mc_real_unmount_segment,
    .unmount_local_disk = mc_real_unmount_local_disk,
};

int mc_store_setup(const mc_store_config_t *c, mc_store_t **out)
{
    if (!c || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (c->enable_http_server && (c->http_port < 1 || c->http_port > 65535)) {
        MC_ERROR("client HTTP port %d is not in 1..65535", c->http_port);
        return MC_ERR_INVALID_PARAMS;
    }
    if (c->global_segment_size > MC_MAX_VALUE_SIZE || c->local_buffer_size > MC_MAX_VALUE_SIZE) {
        MC_ERROR("segment or local buffer larger than 1 TiB");
        return MC_ERR_INVALID_PARAMS;
    }
    if (!c->local_hostname || !*c->local_hostname) {
        MC_ERROR("local_hostname is required (host or host:port)");
        return MC_ERR_INVALID_PARAMS;
    }
    mc_prefault_opts_t prefault_opts;
    if (mc_prefault_opts_from_env(&prefault_opts) != 0)
        return MC_ERR_INVALID_PARAMS;
    char err[1024];
    int erc = mc_offload_check_environment(c->global_segment_size, c->enable_offload,
                                           c->offload_path, err, sizeof(err));
    if (erc != 0) {
        MC_ERROR("offload: %s", err);
        return erc;
    }
    mc_real_client_t *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    mc_real_make_uuid(s->client_id);
    s->master_addr = strdup(c->master_server_addr && *c->master_server_addr ? c->master_server_addr
                                                                            : MC_DEFAULT_MASTER);
    s->global_segment_size = c->global_segment_size;
    s->prefault_opts = prefault_opts;
    s->local_buffer_size = c->local_buffer_size;
    const char *dw = getenv("MC_STORE_DELETE_WAIT_MS");
    char *end = NULL;
    unsigned long long dwv = dw && *dw ? strtoull(dw, &end, 10) : MC_DELETE_WAIT_DEFAULT_MS;
    s->delete_wait_ms = end && *end ? MC_DELETE_WAIT_DEFAULT_MS : dwv;
    const char *ck = getenv("MC_STORE_CHECKSUM");
    s->checksum = !c->disable_checksum &&
                  !(ck && (!strcmp(ck, "0") || !strcasecmp(ck, "false") || !strcasecmp(ck, "off")));
    init_locks(s);
    int rc = s->master_addr ? setup_checked(s, c) : MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        real_close(s);
        real_free(s);
        return rc;
    }
    s->metrics = mc_client_metrics_create();
    start_http_server(s, c);
    rc = mc_store_create(&real_ops, s, out);
    if (rc != 0)
        return rc;
    MC_INFO("store client %s ready: segment %s (%llu bytes), local buffer %llu bytes, master %s, "
            "checksums %s",
            s->client_id, mc_te_local_segment_name(s->te),
            (unsigned long long)s->global_segment_size, (unsigned long long)s->local_buffer_size,
            s->master_addr, s->checksum ? "on" : "off");
    return 0;
}

void mc_store_allow_zero_copy_io(mc_store_t *store)
{
    mc_real_client_t *s = mc_store_impl_of(store, &real_ops);
    if (s)
        s->zero_copy_io = 1;
}
