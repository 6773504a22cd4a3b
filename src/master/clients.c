/*
 * clients.c — the client table: a client is registered by its first mount or remount, kept
 * live by its pings (which also tell one found gone to re-mount), and sums its reports of
 * checksum mismatches here. Its departure (expiry, or found gone) is monitor.c's: that unmounts
 * its segments, which sit above this file.
 *
 * Invariant (mc_client_t): one record per client id, in no order; a record marked gone stays
 * until its TTL runs out, and a mount or remount clears the mark.
 *
 * Layer: the lowest of the core with master_service.c and extents.c; it calls no other file of
 * the folder.
 */
#include "master_internal.h"

#include "core_internal.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- clients --------------------------------------------------------------------------------- */

static mc_client_t *client_find(mc_master_t *m, const char *id)
{
    for (size_t i = 0; i < m->client_count; i++) {
        if (strcmp(m->clients[i].id, id) == 0)
            return &m->clients[i];
    }
    return NULL;
}

mc_client_t *mc_master_client_locked(mc_master_t *m, const char *client_id)
{
    MC_MASTER_ASSERT_LOCKED(m);
    return client_find(m, client_id);
}

/* Registers the client or refreshes its liveness. */
int mc_master_client_touch_locked(mc_master_t *m, const char *id, uint64_t now)
{
    MC_MASTER_ASSERT_LOCKED(m);
    mc_client_t *c = client_find(m, id);
    if (c) {
        c->last_seen_ms = now;
        c->gone = 0;
        return 0;
    }
    if (m->client_count == m->client_cap) {
        size_t cap = m->client_cap ? m->client_cap * 2 : 16;
        mc_client_t *v = realloc(m->clients, cap * sizeof(*v));
        if (!v)
            return MC_ERR_INTERNAL_ERROR;
        m->clients = v;
        m->client_cap = cap;
    }
    c = &m->clients[m->client_count++];
    memset(c, 0, sizeof(*c));
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->last_seen_ms = now;
    MC_INFO("client %s registered", id);
    return 0;
}

int mc_master_ping(mc_master_t *m, const char *client_id, uint64_t *view_version,
                   mc_client_status_t *status)
{
    if (!m || !mc_master_client_id_ok(client_id) || !status)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&m->lock);
    mc_client_t *c = client_find(m, client_id);
    if (c)
        c->last_seen_ms = mc_master_now_locked(m);
    /* One found gone that pings after all re-mounts: its segments were unmounted. */
    *status = c && !c->gone ? MC_CLIENT_OK : MC_CLIENT_NEED_REMOUNT;
    if (view_version)
        *view_version = m->view_version;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int mc_master_client_is_live(mc_master_t *m, const char *client_id)
{
    if (!m || !mc_master_client_id_ok(client_id))
        return 0;
    pthread_mutex_lock(&m->lock);
    int live = client_find(m, client_id) != NULL;
    pthread_mutex_unlock(&m->lock);
    return live;
}

void mc_master_report_checksum_mismatches(mc_master_t *m, const char *client_id, uint64_t total)
{
    if (!m || !client_id)
        return;
    pthread_mutex_lock(&m->lock);
    mc_client_t *c = client_find(m, client_id);
    if (c) {
        m->checksum_mismatches +=
            total >= c->checksum_mismatches ? total - c->checksum_mismatches : total;
        c->checksum_mismatches = total;
    }
    pthread_mutex_unlock(&m->lock);
}
