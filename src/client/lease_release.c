/*
 * lease_release.c — queued, batched release of read leases (lease_release.h).
 *
 * The queue is two parallel arrays (keys copied, lease ids) under one mutex. The first release
 * queued wakes the thread, which lets more gather for MC_LEASE_RELEASE_GATHER_MS, then takes the
 * whole queue and sends it as one ReleaseReadLease call (in slices of MC_LEASE_RELEASE_BATCH);
 * while that call is on the wire the next batch gathers. A reader never waits, and a busy one
 * costs the master a small fraction of a call per get (sent one call per get, releases cost about
 * 40 % of 4 KiB get throughput on a 2-vCPU host; gathered, 5-19 %: docs/benchmarks.md). A fence
 * lasts that much longer, which nothing notices next to a lease of seconds.
 */
#include "lease_release.h"

#include "log.h"
#include "master_client.h"
#include "mooncake/errors.h"
#include "net.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MC_LEASE_RELEASE_QUEUE_MAX 65536 /* releases waiting; beyond, dropped (leases expire) */
#define MC_LEASE_RELEASE_BATCH 4096      /* keys per call */
#define MC_LEASE_RELEASE_GATHER_MS 2     /* a batch gathers this long after its first release */

struct mc_lease_releaser {
    mc_rpc_client_t *rpc;
    const char *client_id;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    char **keys; /* queued: keys[i] (malloc'd) with ids[i] */
    uint64_t *ids;
    size_t n, cap;
    pthread_t thread;
    int started, stop;
    atomic_uint_fast64_t last_drop_log_ms;
};

int mc_lease_releaser_create(mc_rpc_client_t *rpc, const char *client_id, mc_lease_releaser_t **out)
{
    mc_lease_releaser_t *r = calloc(1, sizeof(*r));
    if (!r)
        return MC_ERR_INTERNAL_ERROR;
    r->rpc = rpc;
    r->client_id = client_id;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->wake, &attr);
    pthread_condattr_destroy(&attr);
    *out = r;
    return 0;
}

/* One call for keys[0..n); the master's answer changes nothing here. */
static void send_batch(mc_lease_releaser_t *r, char **keys, uint64_t *ids, size_t n)
{
    for (size_t at = 0; at < n; at += MC_LEASE_RELEASE_BATCH) {
        size_t m = n - at < MC_LEASE_RELEASE_BATCH ? n - at : MC_LEASE_RELEASE_BATCH;
        Mc__KeysRequest req = MC__KEYS_REQUEST__INIT;
        req.client_id = (char *)r->client_id;
        req.n_keys = m;
        req.keys = keys + at;
        req.n_lease_ids = m;
        req.lease_ids = ids + at;
        req.regex = (char *)"";
        Mc__KeysResponse *resp = NULL;
        int rc = mc_master_call_keys(r->rpc, MC_RPC_RELEASE_LEASE, &req, &resp);
        if (rc == 0)
            mc__keys_response__free_unpacked(resp, NULL);
        else
            MC_VLOG(1, "releasing %zu read leases: %s (they run out on their own)", m,
                    mc_error_name(rc));
    }
}

static void *release_main(void *arg)
{
    mc_lease_releaser_t *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (r->n == 0 && !r->stop)
            pthread_cond_wait(&r->wake, &r->lock);
        if (r->n == 0)
            break;      /* stopping, nothing left */
        if (!r->stop) { /* let more gather; a stop cuts it short */
            struct timespec ts;
            mc_deadline_after_ms(&ts, CLOCK_MONOTONIC, MC_LEASE_RELEASE_GATHER_MS);
            pthread_cond_timedwait(&r->wake, &r->lock, &ts);
        }
        char **keys = r->keys;
        uint64_t *ids = r->ids;
        size_t n = r->n;
        r->keys = NULL;
        r->ids = NULL;
        r->n = r->cap = 0;
        pthread_mutex_unlock(&r->lock);
        send_batch(r, keys, ids, n);
        for (size_t i = 0; i < n; i++)
            free(keys[i]);
        free(keys);
        free(ids);
        pthread_mutex_lock(&r->lock);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* Room for one more entry (lock held); 0, or -1 when full or out of memory. */
static int reserve(mc_lease_releaser_t *r)
{
    if (r->n < r->cap)
        return 0;
    if (r->n >= MC_LEASE_RELEASE_QUEUE_MAX)
        return -1;
    size_t cap = r->cap ? r->cap * 2 : 64;
    char **keys = realloc(r->keys, cap * sizeof(*keys));
    if (!keys)
        return -1;
    r->keys = keys;
    uint64_t *ids = realloc(r->ids, cap * sizeof(*ids));
    if (!ids)
        return -1;
    r->ids = ids;
    r->cap = cap;
    return 0;
}

void mc_lease_releaser_add(mc_lease_releaser_t *r, const char *key, uint64_t lease_id)
{
    if (!r || lease_id == 0)
        return;
    char *copy = strdup(key);
    pthread_mutex_lock(&r->lock);
    int ok = copy && !r->stop && reserve(r) == 0;
    if (ok && !r->started) {
        r->started = pthread_create(&r->thread, NULL, release_main, r) == 0;
        ok = r->started;
    }
    if (ok) {
        r->keys[r->n] = copy;
        r->ids[r->n++] = lease_id;
        if (r->n == 1) /* the thread sleeps only on an empty queue */
            pthread_cond_signal(&r->wake);
    }
    pthread_mutex_unlock(&r->lock);
    if (!ok) {
        free(copy);
        if (mc_log_ratelimit(&r->last_drop_log_ms, 10000))
            MC_WARN("read lease releases are not keeping up (or out of memory): dropped, those "
                    "leases run out on their own");
    }
}

void mc_lease_releaser_destroy(mc_lease_releaser_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_signal(&r->wake);
    int started = r->started;
    pthread_mutex_unlock(&r->lock);
    if (started)
        pthread_join(r->thread, NULL); /* it sends what is queued first */
    for (size_t i = 0; i < r->n; i++)
        free(r->keys[i]);
    free(r->keys);
    free(r->ids);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
