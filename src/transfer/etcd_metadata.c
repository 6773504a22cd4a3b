/*
 * etcd_metadata.c — the Transfer Engine's segment descriptors in etcd: the metadata string
 * "etcd://h:p[;h:p...]" (or ',' between endpoints), or a string without a scheme ("h:p"), which
 * upstream also takes to mean etcd (transfer_metadata_plugin.cpp: parseConnectionString).
 *
 * Keys are upstream's: mooncake/[<MC_METADATA_CLUSTER_ID>/]ram/<segment name> (the descriptor
 * JSON) and mooncake/[<id>/]rpc_meta/<segment name> ({"ip_or_host_name":..,"rpc_port":..});
 * segment_metadata.c builds them without the cluster id, which is inserted here.
 *
 * Differs from upstream (which puts them with no lease): every key is put under one etcd lease of
 * this engine (TTL MC_ETCD_METADATA_LEASE_TTL seconds, default 10), kept alive by a thread every
 * TTL/3, so that the descriptor of a process that died disappears within the TTL. When the lease
 * is lost (etcd unreachable for longer than the TTL, or the lease revoked by someone), the thread
 * grants a new one and puts every key again. Closing revokes the lease, which deletes the keys.
 *
 * The values put are remembered (a handful: two keys per engine) to re-publish them.
 *
 * Threads: every function may be called from any thread; m->mu guards the lease and the
 * remembered keys, and is held across the etcd calls that change them (each bounded by the etcd
 * handle's timeout per endpoint), so a publish and a re-grant never interleave.
 */
#include "etcd.h"
#include "log.h"
#include "mooncake/errors.h"
#include "net.h"
#include "transfer_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MD_DEFAULT_TTL_S 10
#define MD_MAX_TTL_S 3600
#define MD_MAX_CLUSTER_ID 128
#define MD_MAX_KEYS 64 /* remembered keys: an engine publishes two */
#define MD_LOG_EVERY_MS 10000
/* etcd refuses for a moment while its members elect a new leader ("leader changed", a timeout):
 * a grant or publish asked for by the engine is retried this long, every MD_RETRY_PAUSE_MS. */
#define MD_RETRY_MS 2000
#define MD_RETRY_PAUSE_MS 100

typedef struct md_entry {
    char *key; /* the etcd key (with the cluster id) */
    char *value;
    size_t len;
} md_entry_t;

struct mc_etcd_md {
    mc_etcd_t *etcd;
    char endpoints[1024]; /* for log lines */
    char cluster_id[MD_MAX_CLUSTER_ID + 1];
    int64_t ttl_s;

    pthread_mutex_t mu;
    pthread_cond_t cond; /* signals `stopping` to the keeper */
    int64_t lease;       /* 0: none held (grant at the next chance) */
    int need_publish;    /* a re-publish under `lease` did not complete */
    md_entry_t entries[MD_MAX_KEYS];
    size_t nentries;
    int stopping;
    int keeper_started;
    pthread_t keeper;
    atomic_uint_fast64_t last_log_ms;
};

int mc_etcd_md_is_etcd(const char *metadata)
{
    if (!metadata || !*metadata || !strcmp(metadata, "P2PHANDSHAKE"))
        return 0;
    return !strncmp(metadata, "etcd://", 7) || !strstr(metadata, "://");
}

static int64_t md_ttl_from_env(void)
{
    const char *s = getenv("MC_ETCD_METADATA_LEASE_TTL");
    if (!s || !*s)
        return MD_DEFAULT_TTL_S;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > MD_MAX_TTL_S) {
        MC_WARN("MC_ETCD_METADATA_LEASE_TTL=\"%.64s\" is not 1..%d seconds; using %d", s,
                MD_MAX_TTL_S, MD_DEFAULT_TTL_S);
        return MD_DEFAULT_TTL_S;
    }
    return v;
}

/* The etcd key for a key of segment_metadata.c: the cluster id after "mooncake/". */
static int md_key(const mc_etcd_md_t *m, const char *key, char *out, size_t cap)
{
    int n;
    if (m->cluster_id[0] && !strncmp(key, "mooncake/", 9))
        n = snprintf(out, cap, "mooncake/%s/%s", m->cluster_id, key + 9);
    else
        n = snprintf(out, cap, "%s", key);
    return n > 0 && (size_t)n < cap ? 0 : MC_ERR_INVALID_PARAMS;
}

/* Grants a new lease and puts every remembered key under it. Called with m->mu held. */
static int md_regrant_locked(mc_etcd_md_t *m)
{
    int64_t lease = 0;
    int rc = mc_etcd_lease_grant(m->etcd, m->ttl_s, &lease, NULL);
    if (rc != 0) {
        m->lease = 0;
        m->need_publish = 1;
        return rc;
    }
    m->lease = lease;
    m->need_publish = 0;
    for (size_t i = 0; i < m->nentries; i++) {
        md_entry_t *en = &m->entries[i];
        rc = mc_etcd_put(m->etcd, en->key, en->value, en->len, lease, NULL);
        if (rc != 0) {
            m->need_publish = 1;
            return rc;
        }
    }
    if (m->nentries)
        MC_INFO("etcd metadata at %s: %zu key(s) published under lease %lld", m->endpoints,
                m->nentries, (long long)lease);
    return 0;
}

/* A pause between retries, m->mu released meanwhile. */
static void md_pause_unlocked(mc_etcd_md_t *m)
{
    pthread_mutex_unlock(&m->mu);
    struct timespec ts = {0, MD_RETRY_PAUSE_MS * 1000000L};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&m->mu);
}

/* Keeps the lease alive every TTL/3; re-grants and re-publishes when it was lost. */
static void *md_keeper_main(void *arg)
{
    mc_etcd_md_t *m = arg;
    const int64_t period_ms = m->ttl_s * 1000 / 3 > 0 ? m->ttl_s * 1000 / 3 : 1;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        struct timespec ts;
        mc_deadline_after_ms(&ts, CLOCK_MONOTONIC, (uint64_t)period_ms);
        while (!m->stopping && pthread_cond_timedwait(&m->cond, &m->mu, &ts) != ETIMEDOUT) {
        }
        if (m->stopping)
            break;
        if (m->lease == 0 || m->need_publish) {
            if (md_regrant_locked(m) != 0 && mc_log_ratelimit(&m->last_log_ms, MD_LOG_EVERY_MS))
                MC_WARN("etcd metadata at %s: cannot publish segment descriptors yet; retrying "
                        "every %lld ms",
                        m->endpoints, (long long)period_ms);
            continue;
        }
        int64_t lease = m->lease, left = 0;
        pthread_mutex_unlock(&m->mu);
        int rc = mc_etcd_lease_keepalive(m->etcd, lease, &left);
        pthread_mutex_lock(&m->mu);
        if (m->stopping || lease != m->lease)
            continue;
        if (rc != 0) {
            if (mc_log_ratelimit(&m->last_log_ms, MD_LOG_EVERY_MS))
                MC_WARN("etcd metadata at %s: lease keep-alive failed (%s); descriptors vanish "
                        "after %lld s without one",
                        m->endpoints, mc_error_name(rc), (long long)m->ttl_s);
        } else if (left == 0) {
            MC_WARN("etcd metadata at %s: lease %lld was lost; granting a new one and "
                    "publishing again",
                    m->endpoints, (long long)lease);
            md_regrant_locked(m);
        }
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int mc_etcd_md_open(const char *metadata, mc_etcd_md_t **out)
{
    if (!metadata || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_etcd_md_t *m = calloc(1, sizeof(*m));
    if (!m)
        return MC_ERR_INTERNAL_ERROR;
    snprintf(m->endpoints, sizeof(m->endpoints), "%s", metadata);
    const char *id = getenv("MC_METADATA_CLUSTER_ID");
    if (id && *id) {
        size_t len = strlen(id);
        int ok = len <= MD_MAX_CLUSTER_ID;
        for (size_t i = 0; ok && i < len; i++)
            ok = id[i] > ' ' && id[i] < 0x7f;
        if (!ok) {
            MC_ERROR("MC_METADATA_CLUSTER_ID must be 1..%d printable characters without spaces",
                     MD_MAX_CLUSTER_ID);
            free(m);
            return MC_ERR_INVALID_PARAMS;
        }
        snprintf(m->cluster_id, sizeof(m->cluster_id), "%s", id);
    }
    m->ttl_s = md_ttl_from_env();
    /* a keep-alive must fit in a third of the TTL even when the first endpoint times out */
    int64_t timeout_ms = m->ttl_s * 1000 / 4;
    timeout_ms = timeout_ms < 500 ? 500 : timeout_ms > 2000 ? 2000 : timeout_ms;
    int rc = mc_etcd_create(metadata, (int)timeout_ms, &m->etcd);
    if (rc != 0) {
        MC_ERROR("metadata server \"%s\": not a list of etcd endpoints (etcd://host:port[;...])",
                 metadata);
        free(m);
        return rc;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&m->last_log_ms, 0);
    pthread_mutex_lock(&m->mu);
    uint64_t deadline = mc_now_ms() + MD_RETRY_MS;
    while ((rc = md_regrant_locked(m)) == MC_ERR_ETCD_OPERATION_ERROR && mc_now_ms() < deadline)
        md_pause_unlocked(m);
    pthread_mutex_unlock(&m->mu);
    if (rc != 0) {
        MC_ERROR("etcd metadata at %s: cannot grant a lease: %s", metadata, mc_error_name(rc));
        mc_etcd_md_close(m);
        return rc;
    }
    if (pthread_create(&m->keeper, NULL, md_keeper_main, m) != 0) {
        mc_etcd_md_close(m);
        return MC_ERR_INTERNAL_ERROR;
    }
    m->keeper_started = 1;
    MC_INFO("etcd metadata at %s: lease %lld, TTL %lld s%s%s", metadata, (long long)m->lease,
            (long long)m->ttl_s, m->cluster_id[0] ? ", cluster id " : "", m->cluster_id);
    *out = m;
    return 0;
}

static md_entry_t *md_find_locked(mc_etcd_md_t *m, const char *key)
{
    for (size_t i = 0; i < m->nentries; i++) {
        if (!strcmp(m->entries[i].key, key))
            return &m->entries[i];
    }
    return NULL;
}

/* Puts the remembered key k under the lease (granting one first when none is held); a put that
 * fails because the lease ran out re-grants and re-publishes everything. m->mu held. */
static int md_put_locked(mc_etcd_md_t *m, const char *k)
{
    md_entry_t *en = md_find_locked(m, k);
    if (!en)
        return 0; /* deleted meanwhile */
    if (m->lease == 0 || m->need_publish)
        return md_regrant_locked(m);
    int rc = mc_etcd_put(m->etcd, k, en->value, en->len, m->lease, NULL);
    int64_t left = 1;
    if (rc == MC_ERR_ETCD_OPERATION_ERROR &&
        mc_etcd_lease_keepalive(m->etcd, m->lease, &left) == 0 && left == 0)
        rc = md_regrant_locked(m);
    return rc;
}

int mc_etcd_md_put(mc_etcd_md_t *m, const char *key, const char *value, size_t len)
{
    char k[MC_ETCD_MAX_KEY + 1];
    if (!m || !key || (!value && len) || len > MC_ETCD_MAX_VALUE ||
        md_key(m, key, k, sizeof(k)) != 0)
        return MC_ERR_INVALID_PARAMS;
    char *copy = malloc(len + 1);
    if (!copy)
        return MC_ERR_INTERNAL_ERROR;
    if (len)
        memcpy(copy, value, len);
    copy[len] = '\0';
    pthread_mutex_lock(&m->mu);
    md_entry_t *en = md_find_locked(m, k);
    if (!en) {
        char *kc = strdup(k);
        if (m->nentries == MD_MAX_KEYS || !kc) {
            int full = m->nentries == MD_MAX_KEYS;
            pthread_mutex_unlock(&m->mu);
            free(kc);
            free(copy);
            return full ? MC_ERR_INVALID_PARAMS : MC_ERR_INTERNAL_ERROR;
        }
        en = &m->entries[m->nentries++];
        *en = (md_entry_t){.key = kc};
    }
    free(en->value);
    en->value = copy;
    en->len = len;
    uint64_t deadline = mc_now_ms() + MD_RETRY_MS;
    int rc;
    while ((rc = md_put_locked(m, k)) == MC_ERR_ETCD_OPERATION_ERROR && mc_now_ms() < deadline)
        md_pause_unlocked(m);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int mc_etcd_md_get(mc_etcd_md_t *m, const char *key, char **value, size_t *len)
{
    char k[MC_ETCD_MAX_KEY + 1];
    if (!m || !key || !value || !len || md_key(m, key, k, sizeof(k)) != 0)
        return MC_ERR_INVALID_PARAMS;
    mc_etcd_kv_t kv;
    int rc = mc_etcd_get(m->etcd, k, &kv, NULL);
    if (rc != 0)
        return rc;
    *value = (char *)kv.value; /* NUL-terminated, value_len bytes */
    *len = kv.value_len;
    kv.value = NULL;
    mc_etcd_kv_free(&kv, 1, 0);
    return 0;
}

int mc_etcd_md_del(mc_etcd_md_t *m, const char *key)
{
    char k[MC_ETCD_MAX_KEY + 1];
    if (!m || !key || md_key(m, key, k, sizeof(k)) != 0)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->mu);
    md_entry_t *en = md_find_locked(m, k);
    if (en) {
        free(en->key);
        free(en->value);
        *en = m->entries[--m->nentries];
    }
    int rc = mc_etcd_delete(m->etcd, k, NULL, NULL);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

void mc_etcd_md_close(mc_etcd_md_t *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stopping = 1;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
    if (m->keeper_started)
        pthread_join(m->keeper, NULL);
    if (m->lease) {
        int rc = mc_etcd_lease_revoke(m->etcd, m->lease);
        if (rc != 0)
            MC_WARN("etcd metadata at %s: cannot revoke lease %lld (%s); its keys vanish after "
                    "%lld s",
                    m->endpoints, (long long)m->lease, mc_error_name(rc), (long long)m->ttl_s);
    }
    for (size_t i = 0; i < m->nentries; i++) {
        free(m->entries[i].key);
        free(m->entries[i].value);
    }
    mc_etcd_destroy(m->etcd);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
