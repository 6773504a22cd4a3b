/*
 * ha.c — leader election on an etcd lease for mooncake_master (ha.h).
 *
 * Two threads: the election thread (standby polling, competing, on_elected) and, while leading,
 * the renewal thread (keep-alive + view check every TTL/5; it moves the serving deadline). The
 * deadline is read by mc_ha_may_serve on every request, so it is one atomic.
 */
#include "ha.h"

#include "etcd.h"
#include "log.h"
#include "master_view.h"
#include "mooncake/errors.h"
#include "net.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mc_ha {
    mc_ha_config_t cfg;
    char *endpoints, *cluster_id, *advertise;
    char key[512];
    mc_etcd_t *etcd;
    pthread_t election, renewal;
    int renewal_running;
    int halted; /* mc_ha_halt ran: threads joined */
    atomic_int stop;
    atomic_int state;              /* mc_ha_state_t */
    atomic_uint_fast64_t deadline; /* mc_now_ms() until which this master may serve; 0 = never */
    int64_t lease;                 /* election thread, renewal thread while leading */
    int64_t my_version;            /* create revision of our view key while leading */
    atomic_int deposed;            /* set once by whoever notices first */
    atomic_int deadline_said;      /* the gate's "deadline passed" line was logged */
    pthread_mutex_t view_lock;
    char view_leader[MC_ENDPOINT_MAX];
    int64_t view_version;
    atomic_uint_fast64_t transitions, won, lost;
    pthread_mutex_t wait_lock;
    pthread_cond_t wait_cond;
};

const char *mc_ha_state_name(mc_ha_state_t s)
{
    switch (s) {
    case MC_HA_STARTING:
        return "starting";
    case MC_HA_STANDBY:
        return "standby";
    case MC_HA_CANDIDATE:
        return "candidate";
    case MC_HA_RECOVERING:
        return "recovering";
    case MC_HA_SERVING:
        return "serving";
    case MC_HA_DEPOSED:
        return "deposed";
    case MC_HA_STOPPED:
        return "stopped";
    }
    return "unknown";
}

static void set_state(mc_ha_t *ha, mc_ha_state_t s)
{
    int old = atomic_exchange(&ha->state, (int)s);
    if (old != (int)s) {
        atomic_fetch_add(&ha->transitions, 1);
        MC_INFO("HA: %s -> %s", mc_ha_state_name((mc_ha_state_t)old), mc_ha_state_name(s));
    }
}

static void set_view(mc_ha_t *ha, const char *leader, int64_t version)
{
    pthread_mutex_lock(&ha->view_lock);
    snprintf(ha->view_leader, sizeof(ha->view_leader), "%s", leader);
    ha->view_version = version;
    pthread_mutex_unlock(&ha->view_lock);
}

/* Sleeps up to ms, waking early on stop. */
static void nap(mc_ha_t *ha, int ms)
{
    struct timespec ts;
    mc_deadline_after_ms(&ts, CLOCK_REALTIME, (uint64_t)ms);
    pthread_mutex_lock(&ha->wait_lock);
    if (!atomic_load(&ha->stop))
        pthread_cond_timedwait(&ha->wait_cond, &ha->wait_lock, &ts);
    pthread_mutex_unlock(&ha->wait_lock);
}

/* Leadership lost: stop serving at once, then tell the owner (once). */
static void depose(mc_ha_t *ha, const char *why)
{
    atomic_store(&ha->deadline, 0);
    if (atomic_exchange(&ha->deposed, 1))
        return;
    atomic_fetch_add(&ha->lost, 1);
    set_state(ha, MC_HA_DEPOSED);
    MC_WARN("HA: this master (%s) lost leadership: %s", ha->advertise, why);
    if (ha->cfg.on_deposed)
        ha->cfg.on_deposed(ha->cfg.arg, why);
}

/* One renewal: keep-alive, then the view still ours. 0 renewed, 1 lost for sure, -1 unknown
 * (etcd not reachable: the deadline decides). */
static int renew_once(mc_ha_t *ha, char *why, size_t whylen)
{
    uint64_t sent = mc_now_ms();
    int64_t left = 0;
    int rc = mc_etcd_lease_keepalive(ha->etcd, ha->lease, &left);
    if (rc != 0)
        return -1;
    if (left <= 0) {
        snprintf(why, whylen, "its election lease %lld expired", (long long)ha->lease);
        return 1;
    }
    mc_etcd_kv_t kv;
    rc = mc_etcd_get(ha->etcd, ha->key, &kv, NULL);
    if (rc == MC_ERR_ETCD_KEY_NOT_EXIST) {
        snprintf(why, whylen, "%s was deleted", ha->key);
        return 1;
    }
    if (rc != 0)
        return -1;
    int ours = kv.create_revision == ha->my_version && kv.lease == ha->lease;
    mc_etcd_kv_free(&kv, 1, 0);
    if (!ours) {
        snprintf(why, whylen, "%s now names another master", ha->key);
        return 1;
    }
    /* etcd keeps the lease alive at least `left` s from when it received the renewal, which is
     * after `sent`; serve until 9/10 of that. Never move the deadline backwards. */
    uint64_t d = sent + (uint64_t)left * 900;
    uint64_t cur = atomic_load(&ha->deadline);
    while (d > cur && !atomic_compare_exchange_weak(&ha->deadline, &cur, d)) {
    }
    return 0;
}

static void *renewal_main(void *arg)
{
    mc_ha_t *ha = arg;
    int period = ha->cfg.lease_ttl_s * 1000 / 5;
    while (!atomic_load(&ha->stop) && !atomic_load(&ha->deposed)) {
        char why[768] = "";
        int r = renew_once(ha, why, sizeof(why));
        if (r == 1) {
            depose(ha, why);
            break;
        }
        if (r < 0 && mc_now_ms() >= atomic_load(&ha->deadline)) {
            depose(ha, "etcd could not renew its election lease before the deadline");
            break;
        }
        /* After a failed renewal, retry sooner: the deadline is getting close. */
        nap(ha, r == 0 ? period : period / 4 + 1);
    }
    return NULL;
}

/* Tries to become the leader. 1 won (lease held, renewal running), 0 not, <0 etcd error. */
static int compete(mc_ha_t *ha)
{
    int64_t lease = 0, ttl = 0;
    int rc = mc_etcd_lease_grant(ha->etcd, ha->cfg.lease_ttl_s, &lease, &ttl);
    if (rc != 0)
        return rc;
    uint64_t sent = mc_now_ms();
    int created = 0;
    mc_etcd_kv_t cur;
    rc = mc_etcd_create_if_absent(ha->etcd, ha->key, ha->advertise, strlen(ha->advertise), lease,
                                  &created, &cur);
    if (rc != 0) {
        mc_etcd_lease_revoke(ha->etcd, lease);
        return rc;
    }
    if (!created) {
        set_view(ha, (const char *)cur.value, cur.create_revision);
        mc_etcd_kv_free(&cur, 1, 0);
        mc_etcd_lease_revoke(ha->etcd, lease);
        return 0;
    }
    ha->lease = lease;
    ha->my_version = cur.create_revision;
    set_view(ha, ha->advertise, cur.create_revision);
    mc_etcd_kv_free(&cur, 1, 0);
    atomic_store(&ha->deadline, sent + (uint64_t)(ttl > 0 ? ttl : ha->cfg.lease_ttl_s) * 900);
    atomic_store(&ha->deposed, 0);
    if (pthread_create(&ha->renewal, NULL, renewal_main, ha) != 0) {
        mc_etcd_lease_revoke(ha->etcd, lease);
        atomic_store(&ha->deadline, 0);
        return MC_ERR_INTERNAL_ERROR;
    }
    ha->renewal_running = 1;
    return 1;
}

static void stop_renewal(mc_ha_t *ha)
{
    if (ha->renewal_running) {
        pthread_join(ha->renewal, NULL);
        ha->renewal_running = 0;
    }
}

static void *election_main(void *arg)
{
    mc_ha_t *ha = arg;
    int logged_err = 0;
    set_state(ha, MC_HA_STANDBY);
    while (!atomic_load(&ha->stop)) {
        char leader[MC_ENDPOINT_MAX];
        int64_t version = 0;
        int rc = mc_master_view_read(ha->etcd, ha->cluster_id, leader, sizeof(leader), &version);
        if (rc == 0) {
            set_view(ha, leader, version);
            logged_err = 0;
            nap(ha, ha->cfg.poll_ms);
            continue;
        }
        if (rc != MC_ERR_ETCD_KEY_NOT_EXIST) {
            if (!logged_err++)
                MC_WARN("HA: cannot read %s from etcd (%s); retrying", ha->key, mc_error_name(rc));
            nap(ha, ha->cfg.poll_ms);
            continue;
        }
        logged_err = 0;
        set_view(ha, "", 0);
        set_state(ha, MC_HA_CANDIDATE);
        rc = compete(ha);
        if (rc != 1) {
            set_state(ha, MC_HA_STANDBY);
            nap(ha, rc < 0 ? ha->cfg.poll_ms * 4 : ha->cfg.poll_ms);
            continue;
        }
        atomic_fetch_add(&ha->won, 1);
        MC_INFO("HA: this master (%s) won the election (view_version %lld, lease %lld, TTL %d s)",
                ha->advertise, (long long)ha->my_version, (long long)ha->lease,
                ha->cfg.lease_ttl_s);
        set_state(ha, MC_HA_RECOVERING);
        rc = ha->cfg.on_elected ? ha->cfg.on_elected(ha->cfg.arg, ha->my_version) : 0;
        if (rc != 0 || atomic_load(&ha->deposed)) {
            MC_WARN("HA: giving up leadership: %s",
                    rc ? "restoring the index failed" : "lost during recovery");
            atomic_store(&ha->deposed, 1);
            atomic_store(&ha->deadline, 0);
            stop_renewal(ha);
            mc_etcd_lease_revoke(ha->etcd, ha->lease);
            set_state(ha, MC_HA_STANDBY);
            nap(ha, ha->cfg.poll_ms * 4);
            continue;
        }
        atomic_store(&ha->deadline_said, 0);
        set_state(ha, MC_HA_SERVING);
        /* Serve until deposed or stopped; the renewal thread decides. */
        stop_renewal(ha);
        if (atomic_load(&ha->stop))
            break;
        /* Deposed: on_deposed ran. This master's index is stale now, so it competes no more:
         * the owner stops this mc_ha_t and starts again with a fresh master (mooncake_master
         * does, as a standby). */
        break;
    }
    return NULL;
}

int mc_ha_start(const mc_ha_config_t *config, mc_ha_t **out)
{
    if (!config || !out || !config->endpoints || !*config->endpoints || !config->cluster_id ||
        !config->advertise || !*config->advertise)
        return MC_ERR_INVALID_PARAMS;
    char host[MC_HOST_MAX];
    int port = 0;
    if (mc_net_split_endpoint(config->advertise, -1, host, &port) != 0 || port <= 0 ||
        mc_net_is_wildcard(host)) {
        MC_ERROR("HA: the advertised address \"%s\" must be the host:port clients reach "
                 "(not a wildcard address): set --rpc_address or --rpc_interface",
                 config->advertise);
        return MC_ERR_INVALID_PARAMS;
    }
    mc_ha_t *ha = calloc(1, sizeof(*ha));
    if (!ha)
        return MC_ERR_INTERNAL_ERROR;
    ha->cfg = *config;
    if (ha->cfg.lease_ttl_s <= 0)
        ha->cfg.lease_ttl_s = MC_MASTER_VIEW_LEASE_TTL_S;
    if (ha->cfg.poll_ms <= 0)
        ha->cfg.poll_ms = 250;
    ha->endpoints = strdup(config->endpoints);
    ha->cluster_id = strdup(config->cluster_id);
    ha->advertise = strdup(config->advertise);
    pthread_mutex_init(&ha->view_lock, NULL);
    pthread_mutex_init(&ha->wait_lock, NULL);
    pthread_cond_init(&ha->wait_cond, NULL);
    int rc = !ha->endpoints || !ha->cluster_id || !ha->advertise ? MC_ERR_INTERNAL_ERROR : 0;
    if (rc == 0)
        rc = mc_master_view_key(ha->cluster_id, ha->key, sizeof(ha->key));
    if (rc == 0)
        rc = mc_etcd_create(ha->endpoints, 1000, &ha->etcd);
    if (rc == 0 && pthread_create(&ha->election, NULL, election_main, ha) != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        mc_etcd_destroy(ha->etcd);
        free(ha->endpoints);
        free(ha->cluster_id);
        free(ha->advertise);
        free(ha);
        return rc;
    }
    *out = ha;
    return 0;
}

void mc_ha_halt(mc_ha_t *ha)
{
    if (!ha || ha->halted)
        return;
    atomic_store(&ha->stop, 1);
    pthread_mutex_lock(&ha->wait_lock);
    pthread_cond_broadcast(&ha->wait_cond);
    pthread_mutex_unlock(&ha->wait_lock);
    pthread_join(ha->election, NULL); /* waits for an on_elected under way */
    stop_renewal(ha);
    ha->halted = 1;
}

void mc_ha_stop(mc_ha_t *ha)
{
    if (!ha)
        return;
    mc_ha_halt(ha);
    if (ha->lease && atomic_load(&ha->deadline) > mc_now_ms()) {
        atomic_store(&ha->deadline, 0);
        /* Handing over at once: a standby sees the key gone on its next poll. */
        if (mc_etcd_lease_revoke(ha->etcd, ha->lease) == 0)
            MC_INFO("HA: leadership handed over (lease %lld revoked)", (long long)ha->lease);
    }
    set_state(ha, MC_HA_STOPPED);
    mc_etcd_destroy(ha->etcd);
    pthread_mutex_destroy(&ha->view_lock);
    pthread_mutex_destroy(&ha->wait_lock);
    pthread_cond_destroy(&ha->wait_cond);
    free(ha->endpoints);
    free(ha->cluster_id);
    free(ha->advertise);
    free(ha);
}

void mc_ha_resign(mc_ha_t *ha, const char *why)
{
    if (!ha || atomic_load(&ha->deposed))
        return;
    depose(ha, why);
    /* Hand over at once rather than after the TTL. */
    if (ha->lease)
        mc_etcd_lease_revoke(ha->etcd, ha->lease);
}

int mc_ha_may_serve(const mc_ha_t *ha)
{
    if (!ha)
        return 1;
    mc_ha_t *h = (mc_ha_t *)ha;
    if (atomic_load(&h->state) != MC_HA_SERVING)
        return 0;
    uint64_t deadline = atomic_load(&h->deadline);
    if (mc_now_ms() < deadline)
        return 1;
    /* The gate stops serving here, up to a renewal period before the renewal thread deposes
     * this master: say so now, once, so that the log never shows it serving past this point
     * (a deadline of 0 is a handover or a deposition, logged where it happens). */
    if (deadline != 0 && !atomic_exchange(&h->deadline_said, 1))
        MC_WARN("HA: the serving deadline passed without a renewed lease: deposed, answering "
                "nothing from now on");
    return 0;
}

mc_ha_state_t mc_ha_state(const mc_ha_t *ha)
{
    if (!ha)
        return MC_HA_SERVING;
    mc_ha_t *h = (mc_ha_t *)ha;
    mc_ha_state_t s = (mc_ha_state_t)atomic_load(&h->state);
    /* Serving only while the gate serves: past the deadline it is deposed, whether or not the
     * renewal thread has noticed yet (a poller must never see two leaders serving). */
    if (s == MC_HA_SERVING && mc_now_ms() >= atomic_load(&h->deadline))
        return MC_HA_DEPOSED;
    return s;
}

void mc_ha_view(const mc_ha_t *ha, char *leader, size_t cap, int64_t *view_version)
{
    mc_ha_t *h = (mc_ha_t *)ha;
    pthread_mutex_lock(&h->view_lock);
    snprintf(leader, cap, "%s", h->view_leader);
    if (view_version)
        *view_version = h->view_version;
    pthread_mutex_unlock(&h->view_lock);
}

void mc_ha_counters(const mc_ha_t *ha, uint64_t *transitions, uint64_t *won, uint64_t *lost)
{
    mc_ha_t *h = (mc_ha_t *)ha;
    *transitions = atomic_load(&h->transitions);
    *won = atomic_load(&h->won);
    *lost = atomic_load(&h->lost);
}

struct mc_etcd *mc_ha_etcd(const mc_ha_t *ha)
{
    return ha->etcd;
}
