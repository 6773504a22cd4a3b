/*
 * server.c — a whole master as one object (server.h): the Master Service with its RPC, admin and
 * metadata servers, failure detector, operation log, election and snapshot thread, wired together
 * through their callbacks. The HA wiring lives here, not in mooncake_master, so that a master
 * runs the same wherever it is started from.
 *
 * The operation log plugs into the master through the journal callbacks (journal.h): while this
 * master leads, every change the master commits is appended to the log under the master lock;
 * while it stands by, the log applies what the leader wrote (oplog_apply). The RPC server's gate
 * refuses every request until the election is won and again once it is lost, and with sync ack
 * its barrier holds each reply until the change it answers is durable in etcd.
 */
#include "server.h"

#include "admin_http.h"
#include "auth.h"
#include "clock.h"
#include "ha.h"
#include "journal.h"
#include "liveness.h"
#include "log.h"
#include "master_view.h"
#include "net.h"
#include "oplog.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define SETTINGS_MAX 4096
/* The operation log's backlog a new write waits for (bounds what a crash can lose). */
#define OPLOG_MAX_BACKLOG_BATCHES 1
#define OPLOG_BACKPRESSURE_MS 2000
/* Without sync ack a batch may fill this long: fewer etcd commits for the same entries (what a
 * crash can lose grows by as much). */
#define OPLOG_ASYNC_LINGER_MS 5

/* The periodic snapshot thread (enable_snapshot). */
typedef struct snapshotter {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int stop, started;
} snapshotter_t;

struct mc_master_server {
    mc_master_server_config_t c;
    mc_auth_t *auth;
    mc_master_t *master;
    mc_rpc_server_t *rpc;
    mc_admin_http_t *admin;
    mc_http_metadata_server_t *metadata;
    mc_ha_t *ha;                        /* enable_ha: the election; NULL otherwise */
    mc_etcd_t *log_etcd;                /* enable_oplog: the operation log's etcd handle */
    mc_oplog_t *oplog;                  /* enable_oplog */
    atomic_uint_fast64_t durable_local; /* the master's journal seq committed in etcd */
    uint64_t oplog_backlog;  /* new writes wait while more entries than this wait for etcd */
    int deposed_efd;         /* enable_ha: written when this master lost leadership; else -1 */
    mc_liveness_t *liveness; /* the failure detector the RPC server tells of closed clients */
    snapshotter_t snap;
    char settings[SETTINGS_MAX];
};

/* ---- snapshots ----------------------------------------------------------------------------- */

static int take_snapshot(mc_master_server_t *s, int clean)
{
    const mc_master_server_config_t *c = &s->c;
    return mc_master_snapshot_write(s->master, c->snapshot_root,
                                    c->snapshot_backup_dir ? c->snapshot_backup_dir : "",
                                    c->snapshot_retention, clean, c->snapshot_timeout_ms, NULL);
}

static void *snapshot_loop(void *arg)
{
    mc_master_server_t *s = arg;
    snapshotter_t *t = &s->snap;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec until;
        mc_deadline_after_ms(&until, CLOCK_MONOTONIC, s->c.snapshot_interval_ms);
        while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &until) != ETIMEDOUT)
            ;
        if (t->stop)
            break;
        pthread_mutex_unlock(&t->mu);
        take_snapshot(s, 0); /* failures are logged; the next one retries */
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static int snapshotter_start(mc_master_server_t *s)
{
    snapshotter_t *t = &s->snap;
    memset(t, 0, sizeof(*t));
    if (!s->c.enable_snapshot)
        return 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&t->thread, NULL, snapshot_loop, s) != 0) {
        MC_ERROR("cannot start the snapshot thread");
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        return MC_ERR_INTERNAL_ERROR;
    }
    t->started = 1;
    return 0;
}

static void snapshotter_stop(snapshotter_t *t)
{
    if (!t->started)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL); /* a snapshot under way ends within its timeout */
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    t->started = 0;
}

/* ---- the operation log and the election ---------------------------------------------------- */

/* Until the election runs, serve nothing. */
static int gate_closed(void *arg, uint16_t opcode)
{
    (void)arg;
    (void)opcode;
    return 0;
}

/* The journal (master lock held): into the operation log's queue. */
static void journal_set(void *arg, uint64_t seq, const uint8_t *record, size_t len)
{
    mc_oplog_append(arg, seq, MC_OPLOG_SET, "", record, len);
}

static void journal_del(void *arg, uint64_t seq, const char *key, size_t key_len)
{
    char buf[MC_MAX_KEY_LEN + 1];
    size_t n = key_len < MC_MAX_KEY_LEN ? key_len : MC_MAX_KEY_LEN;
    memcpy(buf, key, n);
    buf[n] = 0;
    mc_oplog_append(arg, seq, MC_OPLOG_DEL, buf, NULL, 0);
}

/* Standby and catch-up: one log entry into this (not serving) master. */
static int oplog_apply(void *arg, uint32_t type, const char *key, const uint8_t *record, size_t len)
{
    mc_master_server_t *s = arg;
    if (type == MC_OPLOG_SET)
        return mc_master_import(s->master, record, len);
    if (type == MC_OPLOG_DEL)
        return mc_master_import_del(s->master, key, strlen(key));
    return MC_ERR_INVALID_PARAMS;
}

static void oplog_durable(void *arg, uint64_t local_seq)
{
    mc_master_server_t *s = arg;
    atomic_store(&s->durable_local, local_seq);
    mc_master_journal_durable(s->master, local_seq);
    if (s->c.oplog_sync_ack)
        mc_rpc_server_durable_advanced(s->rpc);
}

static uint64_t barrier_seq(void *arg)
{
    mc_master_server_t *s = arg;
    return mc_master_journal_seq(s->master);
}

static uint64_t barrier_durable(void *arg)
{
    mc_master_server_t *s = arg;
    return atomic_load(&s->durable_local);
}

static void oplog_failed(void *arg, const char *why)
{
    mc_master_server_t *s = arg;
    mc_ha_resign(s->ha, why);
}

/* HA: this master won; the RPC server (gated until now) serves from the moment this returns. */
static int ha_elected(void *arg, int64_t view_version)
{
    mc_master_server_t *s = arg;
    if (s->oplog) {
        int rc = mc_oplog_promote(s->oplog, view_version);
        if (rc != 0)
            return rc;
        /* The log was replayed to its head: what it restored is what the cluster acknowledged. */
        mc_master_import_trust_all(s->master);
        mc_master_journal_t j = {.set = journal_set, .del = journal_del, .arg = s->oplog};
        rc = mc_master_set_journal(s->master, &j);
        if (rc != 0)
            return rc;
        if (s->c.oplog_sync_ack) /* from now on a change is acknowledged once it is in etcd */
            mc_rpc_server_set_barrier(s->rpc, barrier_seq, barrier_durable, s);
    }
    MC_INFO("leading the cluster (view_version %lld): serving on port %d", (long long)view_version,
            mc_rpc_server_port(s->rpc));
    return 0;
}

/* HA: leadership lost (HA thread). The gate already refuses every request; the owner restarts. */
static void ha_deposed(void *arg, const char *why)
{
    mc_master_server_t *s = arg;
    (void)why;
    uint64_t one = 1;
    if (write(s->deposed_efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        MC_ERROR("cannot signal the loss of leadership: %s", strerror(errno));
}

static int ha_gate(void *arg, uint16_t opcode)
{
    mc_master_server_t *s = arg;
    if (!mc_ha_may_serve(s->ha))
        return 0;
    if (s->oplog && (opcode == MC_RPC_PUT_START || opcode == MC_RPC_UPSERT_START))
        mc_oplog_wait_room(s->oplog, s->oplog_backlog, OPLOG_BACKPRESSURE_MS);
    return mc_ha_may_serve(s->ha);
}

/* ---- start and stop ------------------------------------------------------------------------ */

/* Stops the listeners (the master itself stays, unchanged by any request from now on). */
static void stop_listeners(mc_master_server_t *s)
{
    /* A leader: stop answering, commit what the operation log still holds (bounded), then
     * hand leadership over (the lease revoked: a standby takes over at once). */
    if (s->rpc && s->ha)
        mc_rpc_server_set_gate(s->rpc, gate_closed, NULL);
    mc_admin_http_stop(s->admin); /* first: it reads the HA state freed below */
    s->admin = NULL;
    mc_ha_halt(s->ha); /* no election or promotion under way from here on; the lease stays */
    if (s->master && s->oplog)
        mc_master_set_journal(s->master, NULL);
    mc_oplog_destroy(s->oplog);
    s->oplog = NULL;
    mc_ha_stop(s->ha);
    s->ha = NULL;
    if (s->log_etcd)
        mc_etcd_destroy(s->log_etcd);
    s->log_etcd = NULL;
    mc_http_metadata_server_stop(s->metadata);
    s->metadata = NULL;
    mc_rpc_server_stop(s->rpc); /* first: its hook tells the detector */
    s->rpc = NULL;
    mc_liveness_stop(s->liveness);
    s->liveness = NULL;
}

static void server_free(mc_master_server_t *s)
{
    stop_listeners(s);
    mc_master_destroy(s->master);
    mc_auth_destroy(s->auth);
    if (s->deposed_efd >= 0)
        close(s->deposed_efd);
    free(s);
}

/* The operation log, as a standby: it applies what the leader writes until this master leads. */
static int start_oplog(mc_master_server_t *s)
{
    const mc_master_server_config_t *c = &s->c;
    int rc = mc_etcd_create(c->etcd_endpoints, 2000, &s->log_etcd);
    mc_oplog_config_t lc = {.etcd = s->log_etcd,
                            .cluster_id = c->cluster_id,
                            .batch_max_entries = c->oplog_batch_max_entries,
                            .poll_interval_ms = c->oplog_poll_interval_ms,
                            .linger_ms = c->oplog_sync_ack ? 0 : OPLOG_ASYNC_LINGER_MS,
                            .apply = oplog_apply,
                            .durable = oplog_durable,
                            .on_fail = oplog_failed,
                            .arg = s};
    s->oplog_backlog = (uint64_t)c->oplog_batch_max_entries * OPLOG_MAX_BACKLOG_BATCHES;
    if (rc == 0)
        rc = mc_oplog_create(&lc, &s->oplog);
    if (rc == 0) /* a standby: what it applies waits for owners only once it leads */
        rc = mc_master_restore_hold(s->master);
    if (rc == 0)
        rc = mc_oplog_start_standby(s->oplog);
    if (rc != 0)
        MC_ERROR("cannot start the operation log: %s", mc_error_name(rc));
    return rc;
}

static int start_election(mc_master_server_t *s)
{
    const mc_master_server_config_t *c = &s->c;
    char advertise[MC_ENDPOINT_MAX];
    snprintf(advertise, sizeof(advertise), "%s:%d", c->rpc_address, c->rpc_port);
    mc_ha_config_t hc = {.endpoints = c->etcd_endpoints,
                         .cluster_id = c->cluster_id,
                         .advertise = advertise,
                         .lease_ttl_s = c->ha_lease_ttl_s,
                         .on_elected = ha_elected,
                         .on_deposed = ha_deposed,
                         .arg = s};
    int rc = mc_ha_start(&hc, &s->ha);
    if (rc != 0) {
        MC_ERROR("cannot start the leader election: %s", mc_error_name(rc));
        return rc;
    }
    mc_rpc_server_set_gate(s->rpc, ha_gate, s);
    mc_admin_http_set_ha(s->admin, s->ha, s->oplog);
    return 0;
}

/* The servers, in order; on failure the reason is already logged. */
static int start_servers(mc_master_server_t *s)
{
    const mc_master_server_config_t *c = &s->c;
    int rc = mc_rpc_server_start_limited(s->master, c->rpc_address, c->rpc_port, c->rpc_threads,
                                         &c->rpc_limits, s->auth, &s->rpc);
    /* With HA the RPC server answers nothing until this master leads (the gate). */
    if (rc == 0 && c->enable_ha)
        mc_rpc_server_set_gate(s->rpc, gate_closed, NULL);
    /* A holder's closed connection starts a probe of its endpoints (liveness.h). */
    if (rc == 0)
        rc = mc_liveness_start(s->master, &s->liveness);
    if (rc == 0)
        mc_rpc_server_set_peer_closed(s->rpc, mc_liveness_peer_closed, s->liveness);
    if (rc == 0 && c->enable_http_metadata_server) {
        mc_http_metadata_server_options_t mo = {.cluster_secret = c->cluster_secret,
                                                .cluster_secret_file = c->cluster_secret_file,
                                                .limits = &c->http_metadata_limits};
        rc = mc_http_metadata_server_start_opts(c->http_metadata_host, c->http_metadata_port, &mo,
                                                &s->metadata);
    }
    if (rc == 0) {
        /* The admin server prints the settings in /metrics/summary: ports as bound, except its
         * own, which is the one asked for. */
        int http_port = s->metadata ? mc_http_metadata_server_port(s->metadata) : -1;
        c->describe(c->describe_arg, c->metrics_port, http_port, s->settings, sizeof(s->settings));
        mc_admin_http_config_t ac = {c->metrics_host, c->metrics_port, s->master,
                                     s->rpc,          s->settings,     s->metadata};
        rc = mc_admin_http_start(&ac, &s->admin);
        if (rc == 0) /* reads only, but it names every object: the same warning applies */
            mc_auth_warn_open_listener(s->auth, "the admin/metrics HTTP server", c->metrics_host,
                                       mc_admin_http_port(s->admin));
    }
    if (rc == 0 && c->enable_oplog)
        rc = start_oplog(s);
    if (rc == 0 && c->enable_ha)
        rc = start_election(s);
    return rc;
}

int mc_master_server_start(const mc_master_server_config_t *config, mc_master_server_t **out)
{
    *out = NULL;
    mc_master_server_t *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    s->c = *config;
    s->deposed_efd = -1;
    if (config->enable_ha && (s->deposed_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        MC_ERROR("eventfd: %s", strerror(errno));
        free(s);
        return MC_ERR_INTERNAL_ERROR;
    }
    int rc = mc_auth_resolve(config->cluster_secret, config->cluster_secret_file, &s->auth);
    if (rc != 0) {
        MC_ERROR("cannot read the cluster secret: %s", mc_error_name(rc));
        server_free(s);
        return rc;
    }
    rc = mc_master_create(&config->master, &s->master);
    if (rc != 0) {
        MC_ERROR("cannot create the master service: %s", mc_error_name(rc));
        server_free(s);
        return rc;
    }
    if (config->snapshot_restore) { /* before anything serves: clients re-mount into it */
        uint64_t seq = 0;
        mc_master_snapshot_restore(s->master, config->snapshot_root,
                                   &seq); /* else empty (logged) */
    }
    rc = start_servers(s);
    if (rc == 0)
        rc = snapshotter_start(s);
    if (rc != 0) {
        server_free(s);
        return rc;
    }
    config->describe(config->describe_arg, mc_admin_http_port(s->admin),
                     s->metadata ? mc_http_metadata_server_port(s->metadata) : -1, s->settings,
                     sizeof(s->settings));
    MC_INFO("Master service started on port %d, %s%s", mc_rpc_server_port(s->rpc), s->settings,
            config->enable_ha ? " (HA: standing by until elected)" : "");
    *out = s;
    return 0;
}

int mc_master_server_deposed_fd(const mc_master_server_t *s)
{
    return s->deposed_efd;
}

int mc_master_server_rpc_port(const mc_master_server_t *s)
{
    return mc_rpc_server_port(s->rpc);
}

int mc_master_server_metrics_port(const mc_master_server_t *s)
{
    return mc_admin_http_port(s->admin);
}

void mc_master_server_stop(mc_master_server_t *s, int final)
{
    if (!s)
        return;
    snapshotter_stop(&s->snap);
    if (final && s->c.enable_snapshot) { /* a clean snapshot: nothing can change after it */
        stop_listeners(s);
        take_snapshot(s, 1);
    }
    server_free(s);
}
