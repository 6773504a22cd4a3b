/*
 * dummy_client.c — the dummy client: the store backend (store_backend.h), set up by
 * mc_store_setup_dummy, that forwards every call to the real client on this host (store.h "dummy
 * clients"). It speaks dummy_wire.h's protocol to real_client_service.c, which it never calls.
 * store.c has checked each call's arguments and brackets it (close waits for calls in flight);
 * what is left here is the forwarding.
 *
 * Memory: the dummy's local buffer (region 0) and every registered allocation from
 * mc_store_alloc_shared are sealed memfds; the dummy hands each one over (DUMMY_MAP, SCM_RIGHTS)
 * at connect and at registration, and names bytes as (region, offset, size) from then on. The
 * copying calls stage values in slices of the local buffer (a first-fit list of used slices).
 *
 * Connection: as many unix sockets ("lanes") as the real client serves a dummy with (its
 * --threads, told in the HELLO answer; at most MC_DUMMY_MAX_LANES), one call at a time on each:
 * a call takes a free lane, or waits for one. Every lane maps every region (the real client
 * serves each lane with its own thread and its own mappings). A call that fails on a socket or
 * times out closes that lane and marks the dummy disconnected; from then on calls return
 * MC_ERR_RPC_FAIL at once, and the ping thread reconnects every lane every
 * MC_DUMMY_RECONNECT_MS, re-sending every region (the real client dropped them with the old
 * connections). While connected it pings every idle lane every MC_DUMMY_PING_MS.
 *
 * Thread-safety: calls from any threads, each on a lane of its own (or waiting for one).
 */
#include "auth.h"
#include "dummy.pb-c.h"
#include "dummy_wire.h"
#include "ids.h"
#include "log.h"
#include "net.h"
#include "pb_decode.h"
#include "rpc.h"
#include "shared_memory.h"
#include "store_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MC_DUMMY_DEFAULT_REAL "127.0.0.1:50052"
#define MC_DUMMY_CALL_TIMEOUT_DEFAULT_MS 60000
#define MC_DUMMY_CALL_TIMEOUT_ENV "MC_DUMMY_CALL_TIMEOUT_MS"
#define MC_DUMMY_PING_TIMEOUT_MS 3000
#define MC_DUMMY_SLICE_ALIGN 64

/* ---- the dummy ---------------------------------------------------------------------------- */

typedef struct region {
    uint32_t id; /* 0: the local buffer */
    uintptr_t addr;
    size_t size;
    int fd; /* ours (a duplicate for registered allocations) */
} region_t;

typedef struct lane {
    pthread_mutex_t lock;
    int fd; /* -1 while disconnected */
    uint64_t next_request;
} lane_t;

typedef struct slice {
    size_t off, len;
} slice_t;

typedef struct mc_dummy {
    struct sockaddr_un addr;
    socklen_t addr_len;
    char sock_name[64];
    mc_auth_t *auth;
    char client_id[40];
    uint64_t call_timeout_ms;

    /* Lanes: connections to the real client, one exchange at a time each (its lock). Every
     * lane maps every region. Reconnecting, registering and closing take every lane lock, in
     * index order. */
    lane_t lanes[MC_DUMMY_MAX_LANES];
    atomic_int nlanes; /* in use: what the real client allows (its --threads), >= 1 */
    atomic_uint next_lane;
    atomic_int connected;

    pthread_mutex_t regions_lock;
    region_t *regions; /* [0] is the local buffer when it exists */
    size_t nregions, regions_cap;
    uint32_t next_region;

    void *lb; /* local buffer */
    size_t lb_size;
    pthread_mutex_t slice_lock;
    slice_t *slices; /* used, sorted by offset */
    size_t nslices, slices_cap;

    pthread_t ping_thread;
    int ping_started, ping_stop;
    pthread_mutex_t ping_lock;
    pthread_cond_t ping_cond;
} mc_dummy_t;

/* ---- local buffer slices ------------------------------------------------------------------ */

/* First fit: 0 and *off, or MC_ERR_NO_AVAILABLE_HANDLE. len 0 takes no slice (offset 0). */
static int slice_alloc(mc_dummy_t *d, size_t len, size_t *off)
{
    *off = 0;
    if (len == 0)
        return 0;
    if (len > d->lb_size)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    size_t need = (len + MC_DUMMY_SLICE_ALIGN - 1) & ~(size_t)(MC_DUMMY_SLICE_ALIGN - 1);
    int rc = MC_ERR_NO_AVAILABLE_HANDLE;
    pthread_mutex_lock(&d->slice_lock);
    size_t at = 0, i = 0;
    for (; i <= d->nslices; i++) {
        size_t end = i < d->nslices ? d->slices[i].off : d->lb_size;
        if (end >= at && end - at >= len)
            break;
        if (i < d->nslices)
            at = d->slices[i].off + d->slices[i].len;
    }
    if (i <= d->nslices) {
        if (d->nslices == d->slices_cap) {
            size_t cap = d->slices_cap ? d->slices_cap * 2 : 64;
            slice_t *g = realloc(d->slices, cap * sizeof(*g));
            if (!g) {
                pthread_mutex_unlock(&d->slice_lock);
                return MC_ERR_INTERNAL_ERROR;
            }
            d->slices = g;
            d->slices_cap = cap;
        }
        memmove(&d->slices[i + 1], &d->slices[i], (d->nslices - i) * sizeof(slice_t));
        size_t room = (i < d->nslices ? d->slices[i + 1].off : d->lb_size) - at;
        d->slices[i] = (slice_t){at, need < room ? need : room};
        d->nslices++;
        *off = at;
        rc = 0;
    }
    pthread_mutex_unlock(&d->slice_lock);
    return rc;
}

static void slice_free(mc_dummy_t *d, size_t off, size_t len)
{
    if (len == 0)
        return;
    pthread_mutex_lock(&d->slice_lock);
    for (size_t i = 0; i < d->nslices; i++) {
        if (d->slices[i].off == off) {
            memmove(&d->slices[i], &d->slices[i + 1], (d->nslices - i - 1) * sizeof(slice_t));
            d->nslices--;
            break;
        }
    }
    pthread_mutex_unlock(&d->slice_lock);
}

/* ---- connection ----------------------------------------------------------------------------- */

/* One request/reply on a lane; its lock held. Transport failures close the lane and mark the
 * dummy disconnected (the ping thread then reconnects every lane). */
static int exchange_locked(mc_dummy_t *d, lane_t *l, uint16_t op, const Mc__DummyRequest *req,
                           int pass_fd, uint64_t timeout_ms, Mc__DummyReply **rep)
{
    *rep = NULL;
    if (l->fd < 0)
        return MC_ERR_RPC_FAIL;
    size_t len = mc__dummy_request__get_packed_size(req);
    if (len > MC_FRAME_DEFAULT_MAX_BODY) {
        MC_ERROR("dummy: a request of %zu bytes is over the real client's limit (%u): split the "
                 "batch",
                 len, MC_FRAME_DEFAULT_MAX_BODY);
        return MC_ERR_INVALID_PARAMS;
    }
    uint8_t *body = malloc(len ? len : 1);
    if (!body)
        return MC_ERR_INTERNAL_ERROR;
    mc__dummy_request__pack(req, body);
    uint64_t id = ++l->next_request, deadline = mc_now_ms() + timeout_ms;
    int rc = mc_dummy_send_frame(l->fd, op, id, body, len, pass_fd, deadline);
    free(body);
    mc_frame_header_t h = {0};
    uint8_t *rbody = NULL;
    if (rc == 0)
        rc = mc_dummy_recv_frame(l->fd, MC_RPC_MAX_BODY, &h, &rbody, NULL, deadline);
    if (rc == 0 && h.opcode == MC_AUTH_OP_RESULT)
        rc = mc_auth_refused(d->sock_name, rbody, h.body_len);
    else if (rc == 0 && (h.request_id != id || h.opcode != (op | MC_RPC_REPLY)))
        rc = MC_ERR_DESERIALIZE_FAIL;
    if (rc == 0)
        rc = mc_pb_decode_reply(&mc__dummy_reply__descriptor, rbody, h.body_len,
                                (ProtobufCMessage **)rep);
    free(rbody);
    if (rc != 0) {
        if (atomic_exchange(&d->connected, 0))
            MC_WARN("dummy: real client at @%s %s: %s; calls fail (-900) until it is back",
                    d->sock_name, rc == MC_ERR_RPC_TIMEOUT ? "did not answer in time" : "is gone",
                    mc_error_name(rc));
        close(l->fd);
        l->fd = -1;
        if (rc != MC_ERR_ILLEGAL_CLIENT)
            rc = MC_ERR_RPC_FAIL;
    }
    return rc;
}

/* A call with no result but its code; the lane's lock held. *count (if given) gets reply.count. */
static int simple_locked(mc_dummy_t *d, lane_t *l, uint16_t op, const Mc__DummyRequest *req,
                         int pass_fd, uint64_t *count)
{
    Mc__DummyReply *rep;
    int rc = exchange_locked(d, l, op, req, pass_fd, d->call_timeout_ms, &rep);
    if (rc != 0)
        return rc;
    rc = (int)rep->code;
    if (count)
        *count = rep->count;
    mc__dummy_reply__free_unpacked(rep, NULL);
    return rc;
}

static int region_call_locked(mc_dummy_t *d, lane_t *l, uint16_t op, const region_t *r)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    Mc__DummyRange range = MC__DUMMY_RANGE__INIT;
    Mc__DummyRange *rp = &range;
    range.region = r->id;
    range.size = op == MC_DUMMY_MAP ? r->size : 0;
    req.ranges = &rp;
    req.n_ranges = 1;
    req.flag = r->id == 0 && r->addr == (uintptr_t)d->lb;
    return simple_locked(d, l, op, &req, op == MC_DUMMY_MAP ? r->fd : -1, NULL);
}

static void lock_lanes(mc_dummy_t *d)
{
    for (int i = 0; i < MC_DUMMY_MAX_LANES; i++)
        pthread_mutex_lock(&d->lanes[i].lock);
}

static void unlock_lanes(mc_dummy_t *d)
{
    for (int i = MC_DUMMY_MAX_LANES; i-- > 0;)
        pthread_mutex_unlock(&d->lanes[i].lock);
}

static void close_lanes_locked(mc_dummy_t *d)
{
    for (int i = 0; i < MC_DUMMY_MAX_LANES; i++) {
        if (d->lanes[i].fd >= 0)
            close(d->lanes[i].fd);
        d->lanes[i].fd = -1;
    }
}

/* Connects one lane, authenticates, says hello and hands over every region; its lock held.
 * *allowed receives the lanes the real client serves a dummy with (its --threads). */
static int connect_lane_locked(mc_dummy_t *d, lane_t *l, uint64_t *allowed)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return MC_ERR_RPC_FAIL;
    if (connect(fd, (struct sockaddr *)&d->addr, d->addr_len) != 0) {
        close(fd);
        return MC_ERR_RPC_FAIL;
    }
    int rc = mc_auth_client(d->auth, fd, MC_DUMMY_AUTH_SERVICE, d->sock_name,
                            mc_now_ms() + MC_AUTH_TIMEOUT_MS);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    l->fd = fd;
    Mc__DummyRequest hello = MC__DUMMY_REQUEST__INIT;
    hello.client_id = d->client_id;
    rc = simple_locked(d, l, MC_DUMMY_HELLO, &hello, -1, allowed);
    pthread_mutex_lock(&d->regions_lock);
    for (size_t i = 0; i < d->nregions && rc == 0; i++)
        rc = region_call_locked(d, l, MC_DUMMY_MAP, &d->regions[i]);
    pthread_mutex_unlock(&d->regions_lock);
    return rc;
}

/* (Re)connects every lane: as many as the real client serves (HELLO's answer, its --threads),
 * at most MC_DUMMY_MAX_LANES; every lane lock held. */
static int connect_locked(mc_dummy_t *d)
{
    close_lanes_locked(d);
    uint64_t allowed = 1;
    int rc = connect_lane_locked(d, &d->lanes[0], &allowed);
    int n = allowed < 1 ? 1 : allowed > MC_DUMMY_MAX_LANES ? MC_DUMMY_MAX_LANES : (int)allowed;
    for (int i = 1; i < n && rc == 0; i++)
        rc = connect_lane_locked(d, &d->lanes[i], NULL);
    if (rc != 0) {
        close_lanes_locked(d);
        return rc;
    }
    atomic_store(&d->nlanes, n);
    atomic_store(&d->connected, 1);
    return 0;
}

static void *ping_main(void *arg)
{
    mc_dummy_t *d = arg;
    pthread_mutex_lock(&d->ping_lock);
    while (!d->ping_stop) {
        uint64_t wait = atomic_load(&d->connected) ? MC_DUMMY_PING_MS : MC_DUMMY_RECONNECT_MS;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(wait / 1000);
        ts.tv_nsec += (long)(wait % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&d->ping_cond, &d->ping_lock, &ts);
        if (d->ping_stop)
            break;
        pthread_mutex_unlock(&d->ping_lock);
        if (atomic_load(&d->connected)) {
            for (int i = 0; i < atomic_load(&d->nlanes); i++) {
                lane_t *l = &d->lanes[i];
                if (pthread_mutex_trylock(&l->lock) != 0)
                    continue; /* busy: the call on it is the ping */
                Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
                Mc__DummyReply *rep;
                if (exchange_locked(d, l, MC_DUMMY_PING, &req, -1, MC_DUMMY_PING_TIMEOUT_MS,
                                    &rep) == 0)
                    mc__dummy_reply__free_unpacked(rep, NULL);
                pthread_mutex_unlock(&l->lock);
            }
        } else {
            lock_lanes(d);
            if (!atomic_load(&d->connected) && connect_locked(d) == 0)
                MC_INFO("dummy: reconnected to the real client at @%s", d->sock_name);
            unlock_lanes(d);
        }
        pthread_mutex_lock(&d->ping_lock);
    }
    pthread_mutex_unlock(&d->ping_lock);
    return NULL;
}

/* ---- calls ---------------------------------------------------------------------------------- */

/* One forwarded call on a free lane (else waits for one): *rep on success (free it),
 * MC_ERR_RPC_FAIL while disconnected. */
static int call(mc_dummy_t *d, uint16_t op, const Mc__DummyRequest *req, Mc__DummyReply **rep)
{
    *rep = NULL;
    if (!atomic_load(&d->connected))
        return MC_ERR_RPC_FAIL;
    int n = atomic_load(&d->nlanes);
    int start = (int)(atomic_fetch_add(&d->next_lane, 1) % (unsigned)n);
    lane_t *l = NULL;
    for (int k = 0; k < n && !l; k++)
        if (pthread_mutex_trylock(&d->lanes[(start + k) % n].lock) == 0)
            l = &d->lanes[(start + k) % n];
    if (!l) {
        l = &d->lanes[start];
        pthread_mutex_lock(&l->lock);
    }
    int rc = exchange_locked(d, l, op, req, -1, d->call_timeout_ms, rep);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

/* The region holding [p, p+len): 0 and its id/offset, or MC_ERR_INVALID_PARAMS. */
static int locate(mc_dummy_t *d, const void *p, size_t len, Mc__DummyRange *out)
{
    uintptr_t a = (uintptr_t)p;
    int rc = MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&d->regions_lock);
    for (size_t i = 0; i < d->nregions; i++) {
        const region_t *r = &d->regions[i];
        if (r->addr == (uintptr_t)d->lb && r->id == 0)
            continue; /* the local buffer is not the caller's */
        if (a >= r->addr && len <= r->size && a - r->addr <= r->size - len) {
            out->region = r->id;
            out->offset = a - r->addr;
            out->size = len;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&d->regions_lock);
    if (rc != 0)
        MC_ERROR("dummy: buffer %p (+%zu) is not inside a registered shared buffer", p, len);
    return rc;
}

typedef struct batch {
    Mc__DummyRange *ranges;
    Mc__DummyRange **rp;
    char **keys;
    size_t *at; /* index in the caller's arrays */
    size_t m;
    int copy; /* ranges are slices of the local buffer, freed with the batch */
} batch_t;

static int batch_init(batch_t *b, size_t n, int zero_copy)
{
    memset(b, 0, sizeof(*b));
    b->copy = !zero_copy;
    size_t k = n ? n : 1;
    b->ranges = calloc(k, sizeof(*b->ranges));
    b->rp = calloc(k, sizeof(*b->rp));
    b->keys = calloc(k, sizeof(*b->keys));
    b->at = calloc(k, sizeof(*b->at));
    return b->ranges && b->rp && b->keys && b->at ? 0 : MC_ERR_INTERNAL_ERROR;
}

static void batch_free(mc_dummy_t *d, batch_t *b)
{
    for (size_t j = 0; b->copy && j < b->m; j++)
        slice_free(d, b->ranges[j].offset, b->ranges[j].size);
    free(b->ranges);
    free(b->rp);
    free(b->keys);
    free(b->at);
}

/* Adds key i with its range: zero-copy (located) or a fresh slice of the local buffer. */
static int batch_add(mc_dummy_t *d, batch_t *b, const char *key, size_t i, int zero_copy,
                     const void *p, size_t len)
{
    size_t j = b->m;
    mc__dummy_range__init(&b->ranges[j]);
    if (zero_copy) {
        int rc = len ? locate(d, p, len, &b->ranges[j]) : 0;
        if (rc != 0)
            return rc;
        b->ranges[j].size = len;
    } else {
        if (!d->lb)
            return MC_ERR_INVALID_PARAMS;
        size_t off;
        int rc = slice_alloc(d, len, &off);
        if (rc != 0)
            return rc;
        b->ranges[j].region = 0;
        b->ranges[j].offset = off;
        b->ranges[j].size = len;
    }
    b->rp[j] = &b->ranges[j];
    b->keys[j] = (char *)key;
    b->at[j] = i;
    b->m++;
    return 0;
}

static void config_to_pb(const mc_replicate_config_t *c, Mc__DummyConfig *m)
{
    mc__dummy_config__init(m);
    mc_replicate_config_t def = MC_REPLICATE_CONFIG_INIT;
    if (!c)
        c = &def;
    m->replica_num = c->replica_num;
    m->soft_pin_action = c->soft_pin_action;
    m->has_soft_pin_ttl = c->has_soft_pin_ttl != 0;
    m->soft_pin_ttl_ms = c->soft_pin_ttl_ms;
    m->with_hard_pin = c->with_hard_pin != 0;
}

/* Preferred segments: the single one first, then the list (as store_client.c's config_to_pb). */
static char **preferred_of(const mc_replicate_config_t *c, size_t *n)
{
    *n = 0;
    if (!c)
        return NULL;
    size_t k = (c->preferred_segment && *c->preferred_segment ? 1 : 0) +
               (c->preferred_segments ? c->preferred_segment_count : 0);
    char **v = k ? calloc(k, sizeof(char *)) : NULL;
    if (!v)
        return NULL;
    if (c->preferred_segment && *c->preferred_segment)
        v[(*n)++] = (char *)c->preferred_segment;
    for (size_t i = 0; c->preferred_segments && i < c->preferred_segment_count; i++)
        if (c->preferred_segments[i])
            v[(*n)++] = (char *)c->preferred_segments[i];
    return v;
}

static int dummy_write(void *impl, mc_client_op_t op, int upsert, int zero_copy,
                       const char *const *keys, const void *const *values, const size_t *sizes,
                       size_t n, const mc_replicate_config_t *config, int *results)
{
    mc_dummy_t *d = impl;
    if (n > MC_DUMMY_MAX_BATCH) {
        for (size_t i = 0; i < n; i++)
            results[i] = MC_ERR_INVALID_PARAMS; /* over the protocol's limit: none forwarded */
        return MC_ERR_INVALID_PARAMS;
    }
    batch_t b;
    int rc = batch_init(&b, n, zero_copy);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (zero_copy && results[i] == MC_ERR_INVALID_PARAMS)
            rc = results[i]; /* memory not there: the whole batch, as the real client */
        if (results[i] != 0)
            continue; /* refused by its check: this key only, as the store's batches */
        int r = batch_add(d, &b, keys[i], i, zero_copy, values[i], sizes[i]);
        if (r == 0 && !zero_copy && sizes[i])
            memcpy((uint8_t *)d->lb + b.ranges[b.m - 1].offset, values[i], sizes[i]);
        results[i] = r;
        if (r != 0 && (zero_copy || r != MC_ERR_NO_AVAILABLE_HANDLE))
            rc = r; /* a range outside the registered buffers fails the whole batch */
    }
    if (rc != 0) {
        for (size_t i = 0; i < n; i++)
            results[i] = rc;
    } else if (b.m) {
        Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
        Mc__DummyConfig cfg;
        config_to_pb(config, &cfg);
        cfg.preferred_segments = preferred_of(config, &cfg.n_preferred_segments);
        req.keys = b.keys;
        req.n_keys = b.m;
        req.ranges = b.rp;
        req.n_ranges = b.m;
        req.config = &cfg;
        req.flag = upsert ? 1 : 0;
        Mc__DummyReply *rep;
        int crc = call(d, MC_DUMMY_WRITE, &req, &rep);
        for (size_t j = 0; j < b.m; j++)
            results[b.at[j]] = crc != 0             ? crc
                               : j < rep->n_results ? (int)rep->results[j]
                                                    : (int)rep->code;
        if (rep)
            mc__dummy_reply__free_unpacked(rep, NULL);
        free(cfg.preferred_segments);
    }
    batch_free(d, &b);
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = results[i];
    return rc;
}

static int dummy_read(void *impl, mc_client_op_t op, int zero_copy, const char *const *keys,
                      void *const *bufs, const size_t *capacities, size_t n, int64_t *results)
{
    mc_dummy_t *d = impl;
    if (n > MC_DUMMY_MAX_BATCH) {
        for (size_t i = 0; i < n; i++)
            results[i] = MC_ERR_INVALID_PARAMS;
        return MC_ERR_INVALID_PARAMS;
    }
    batch_t b;
    int rc = batch_init(&b, n, zero_copy);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (zero_copy && results[i] == MC_ERR_INVALID_PARAMS)
            rc = results[i]; /* memory not there: the whole batch, as the real client */
        if (results[i] != 0)
            continue; /* refused by its check */
        size_t len = capacities[i];
        if (!zero_copy && len > d->lb_size)
            len = d->lb_size; /* an object larger than the local buffer: get_into */
        int r = batch_add(d, &b, keys[i], i, zero_copy, bufs[i], len);
        results[i] = r;
        if (r != 0 && (zero_copy || r != MC_ERR_NO_AVAILABLE_HANDLE))
            rc = r;
    }
    if (rc != 0) {
        for (size_t i = 0; i < n; i++)
            results[i] = rc;
    } else if (b.m) {
        Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
        req.keys = b.keys;
        req.n_keys = b.m;
        req.ranges = b.rp;
        req.n_ranges = b.m;
        Mc__DummyReply *rep;
        int crc = call(d, MC_DUMMY_READ, &req, &rep);
        for (size_t j = 0; j < b.m; j++) {
            int64_t r = crc != 0 ? crc : j < rep->n_results ? rep->results[j] : rep->code;
            if (r > (int64_t)b.ranges[j].size)
                r = MC_ERR_INTERNAL_ERROR; /* never copy more than the slice holds */
            if (r > 0 && !zero_copy)
                memcpy(bufs[b.at[j]], (uint8_t *)d->lb + b.ranges[j].offset, (size_t)r);
            results[b.at[j]] = r;
        }
        if (rep)
            mc__dummy_reply__free_unpacked(rep, NULL);
    }
    batch_free(d, &b);
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = results[i] < 0 ? (int)results[i] : 0;
    return rc;
}

/* exist (remove 0) or remove (remove 1) of keys[0..n); results[i] arrive with each key's check. */
static int per_key(mc_dummy_t *d, int remove, const char *const *keys, size_t n, int force,
                   int *results)
{
    char **ks = calloc(n ? n : 1, sizeof(*ks));
    size_t *at = calloc(n ? n : 1, sizeof(*at));
    size_t m = 0;
    int rc = !ks || !at               ? MC_ERR_INTERNAL_ERROR
             : n > MC_DUMMY_MAX_BATCH ? MC_ERR_INVALID_PARAMS
                                      : 0;
    for (size_t i = 0; i < n; i++) {
        if (rc != 0)
            results[i] = rc;
        if (results[i] == 0) {
            ks[m] = (char *)keys[i];
            at[m++] = i;
        }
    }
    if (m) {
        Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
        req.keys = ks;
        req.n_keys = m;
        req.force = force != 0;
        Mc__DummyReply *rep;
        int crc = call(d, remove ? MC_DUMMY_REMOVE : MC_DUMMY_EXIST, &req, &rep);
        for (size_t j = 0; j < m; j++)
            results[at[j]] = crc != 0             ? crc
                             : j < rep->n_results ? (int)rep->results[j]
                                                  : (int)rep->code;
        if (rep)
            mc__dummy_reply__free_unpacked(rep, NULL);
    }
    free(ks);
    free(at);
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = results[i] < 0 ? results[i] : 0;
    return rc;
}

static int dummy_exist(void *impl, const char *const *keys, size_t n, int *results)
{
    return per_key(impl, 0, keys, n, 0, results);
}

static int dummy_remove(void *impl, const char *const *keys, size_t n, int force, int *results)
{
    return per_key(impl, 1, keys, n, force, results);
}

/* A call whose answer is its code alone. */
static int64_t code_call(mc_dummy_t *d, uint16_t op, Mc__DummyRequest *req)
{
    Mc__DummyReply *rep;
    int64_t r = call(d, op, req, &rep);
    if (r == 0) {
        r = rep->code;
        mc__dummy_reply__free_unpacked(rep, NULL);
    }
    return r;
}

static int64_t dummy_remove_all(void *impl, int force)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    req.force = force != 0;
    return code_call(impl, MC_DUMMY_REMOVE_ALL, &req);
}

static int64_t dummy_remove_by_regex(void *impl, const char *regex, int force)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    req.regex = (char *)regex;
    req.force = force != 0;
    return code_call(impl, MC_DUMMY_REMOVE_BY_REGEX, &req);
}

static int64_t dummy_get_size(void *impl, const char *key)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    char *k = (char *)key;
    req.keys = &k;
    req.n_keys = 1;
    return code_call(impl, MC_DUMMY_GET_SIZE, &req);
}

static int dummy_get_replica_desc(void *impl, const char *key, mc_replica_desc_t *out,
                                  size_t capacity, size_t *count)
{
    mc_dummy_t *d = impl;
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    char *k = (char *)key;
    req.keys = &k;
    req.n_keys = 1;
    req.flag = capacity > MC_DUMMY_MAX_REPLICAS ? MC_DUMMY_MAX_REPLICAS : (int32_t)capacity;
    Mc__DummyReply *rep;
    int rc = call(d, MC_DUMMY_REPLICA_DESC, &req, &rep);
    if (rc == 0) {
        rc = (int)rep->code;
        *count = rep->count;
        for (size_t i = 0; i < rep->n_replicas && i < capacity; i++) {
            const Mc__DummyReplica *m = rep->replicas[i];
            mc_replica_desc_t *o = &out[i];
            memset(o, 0, sizeof(*o));
            o->type = (mc_replica_type_t)m->type;
            o->status = (mc_replica_status_t)m->status;
            snprintf(o->segment_name, sizeof(o->segment_name), "%s",
                     m->segment_name ? m->segment_name : "");
            o->address = m->address;
            o->size = m->size;
            snprintf(o->file_path, sizeof(o->file_path), "%s", m->file_path ? m->file_path : "");
            o->epoch = m->epoch;
            o->has_checksum = m->has_checksum;
            o->checksum = m->checksum;
        }
        mc__dummy_reply__free_unpacked(rep, NULL);
    }
    return rc;
}

static int dummy_get_offload_stats(void *impl, mc_store_offload_stats_t *out)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    Mc__DummyReply *rep;
    int rc = call(impl, MC_DUMMY_OFFLOAD_STATS, &req, &rep);
    if (rc == 0) {
        rc = (int)rep->code;
        uint64_t v[17] = {0};
        for (size_t i = 0; i < rep->n_stats && i < 17; i++)
            v[i] = rep->stats[i];
        *out = (mc_store_offload_stats_t){(int)v[0], (int)v[1], (int)v[2], (int)v[3], v[4],  v[5],
                                          v[6],      v[7],      v[8],      v[9],      v[10], v[11],
                                          v[12],     v[13],     v[14],     v[15],     v[16]};
        mc__dummy_reply__free_unpacked(rep, NULL);
    }
    return rc;
}

static int dummy_set_offloading(void *impl, int enabled)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    req.flag = enabled;
    return (int)code_call(impl, MC_DUMMY_SET_OFFLOADING, &req);
}

static int dummy_create_task(void *impl, int move, const char *key, const char *source,
                             const char *const *targets, size_t n, char *id_out)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    char *k = (char *)key;
    req.keys = &k;
    req.n_keys = 1;
    req.targets = (char **)targets;
    req.n_targets = n;
    req.source = (char *)(source ? source : "");
    req.flag = move != 0;
    Mc__DummyReply *rep;
    int rc = call(impl, MC_DUMMY_CREATE_TASK, &req, &rep);
    if (rc == 0) {
        rc = (int)rep->code;
        snprintf(id_out, MC_TASK_ID_LEN + 1, "%s", rep->task_id ? rep->task_id : "");
        mc__dummy_reply__free_unpacked(rep, NULL);
    }
    return rc;
}

static int dummy_query_task(void *impl, const char *task_id, mc_task_info_t *out)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    req.task_id = (char *)task_id;
    Mc__DummyReply *rep;
    int rc = call(impl, MC_DUMMY_QUERY_TASK, &req, &rep);
    if (rc == 0) {
        rc = (int)rep->code;
        if (rc == 0 && !rep->task)
            rc = MC_ERR_DESERIALIZE_FAIL;
        if (rc == 0) {
            const Mc__DummyTask *t = rep->task;
            memset(out, 0, sizeof(*out));
            snprintf(out->id, sizeof(out->id), "%s", t->id ? t->id : "");
            out->type = (mc_task_type_t)t->type;
            out->status = (mc_task_status_t)t->status;
            out->created_at_ms_epoch = t->created_at_ms_epoch;
            out->last_updated_at_ms_epoch = t->last_updated_at_ms_epoch;
            snprintf(out->assigned_client, sizeof(out->assigned_client), "%s",
                     t->assigned_client ? t->assigned_client : "");
            snprintf(out->message, sizeof(out->message), "%s", t->message ? t->message : "");
        }
        mc__dummy_reply__free_unpacked(rep, NULL);
    }
    return rc;
}

/* A dummy holds no objects of its own to clear: nothing cleared (upstream's dummy answers an
 * empty list). */
static int dummy_batch_replica_clear(void *impl, const char *const *keys, size_t n,
                                     const char *segment_name, int *cleared)
{
    for (size_t i = 0; i < n; i++)
        cleared[i] = 0;
    return 0;
}

/* Healthy while the real client answers a ping. */
static int dummy_health_check(void *impl)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    Mc__DummyReply *rep;
    int rc = call(impl, MC_DUMMY_PING, &req, &rep);
    if (rep)
        mc__dummy_reply__free_unpacked(rep, NULL);
    return rc == 0 ? 0 : 2;
}

/* Upstream's dummy answers "": it publishes no segment of its own. */
static const char *dummy_get_hostname(const void *impl)
{
    return "";
}

/* ---- registration --------------------------------------------------------------------------- */

static int dummy_register_buffer(void *impl, void *buf, size_t size)
{
    mc_dummy_t *d = impl;
    int rc = 0;
    int fd = mc_shared_dup(buf, size);
    if (fd < 0) {
        MC_ERROR("dummy: register_buffer(%p, %zu): not exactly an allocation of "
                 "alloc_from_mem_pool / MooncakeHostMemAllocator (mc_store_alloc_shared)",
                 buf, size);
        return MC_ERR_INVALID_PARAMS;
    }
    lock_lanes(d);
    pthread_mutex_lock(&d->regions_lock);
    for (size_t i = 0; i < d->nregions; i++)
        if (d->regions[i].addr == (uintptr_t)buf && !(d->regions[i].id == 0 && d->lb))
            rc = MC_ERR_INVALID_PARAMS; /* registered already */
    if (rc == 0 && d->nregions >= MC_DUMMY_MAX_REGIONS)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc == 0 && d->nregions == d->regions_cap) {
        size_t cap = d->regions_cap ? d->regions_cap * 2 : 16;
        region_t *g = realloc(d->regions, cap * sizeof(*g));
        if (g) {
            d->regions = g;
            d->regions_cap = cap;
        } else {
            rc = MC_ERR_INTERNAL_ERROR;
        }
    }
    region_t r = {d->next_region++, (uintptr_t)buf, size, fd};
    pthread_mutex_unlock(&d->regions_lock);
    if (rc == 0 && !atomic_load(&d->connected))
        rc = MC_ERR_RPC_FAIL;
    int n = atomic_load(&d->nlanes), mapped = 0;
    for (; rc == 0 && mapped < n; mapped++)
        rc = region_call_locked(d, &d->lanes[mapped], MC_DUMMY_MAP, &r);
    if (rc == 0) {
        pthread_mutex_lock(&d->regions_lock);
        d->regions[d->nregions++] = r;
        pthread_mutex_unlock(&d->regions_lock);
    } else {
        for (int i = 0; i + 1 < mapped; i++) /* refused on one lane: undo the others */
            (void)region_call_locked(d, &d->lanes[i], MC_DUMMY_UNMAP, &r);
        close(fd);
    }
    unlock_lanes(d);
    return rc;
}

static int dummy_unregister_buffer(void *impl, void *buf)
{
    mc_dummy_t *d = impl;
    lock_lanes(d);
    pthread_mutex_lock(&d->regions_lock);
    region_t r = {0, 0, 0, -1};
    int rc = MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < d->nregions; i++) {
        if (d->regions[i].addr == (uintptr_t)buf && !(d->regions[i].id == 0 && d->lb)) {
            r = d->regions[i];
            d->regions[i] = d->regions[--d->nregions];
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&d->regions_lock);
    /* a lane disconnected or failing: the real client has dropped (or will drop) it anyway */
    for (int i = 0; rc == 0 && atomic_load(&d->connected) && i < atomic_load(&d->nlanes); i++)
        (void)region_call_locked(d, &d->lanes[i], MC_DUMMY_UNMAP, &r);
    if (r.fd >= 0)
        close(r.fd);
    unlock_lanes(d);
    return rc;
}

/* ---- setup, close -----------------------------------------------------------------------------
 */

static int parse_port(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1])
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    return *end || p < 1 || p > 65535 ? -1 : (int)p;
}

/* Stops the ping thread, closes every lane (the real client then drops our regions at once) and
 * lets the memory go; also what a failed setup undoes with. */
static void dummy_close(void *impl)
{
    mc_dummy_t *d = impl;
    if (d->ping_started) {
        pthread_mutex_lock(&d->ping_lock);
        d->ping_stop = 1;
        pthread_cond_broadcast(&d->ping_cond);
        pthread_mutex_unlock(&d->ping_lock);
        pthread_join(d->ping_thread, NULL);
        d->ping_started = 0;
    }
    lock_lanes(d);
    close_lanes_locked(d); /* the real client drops our regions at once */
    atomic_store(&d->connected, 0);
    unlock_lanes(d);
    pthread_mutex_lock(&d->regions_lock);
    for (size_t i = 0; i < d->nregions; i++)
        close(d->regions[i].fd);
    d->nregions = 0;
    pthread_mutex_unlock(&d->regions_lock);
    if (d->lb)
        munmap(d->lb, d->lb_size);
    d->lb = NULL;
    d->lb_size = 0;
    mc_auth_destroy(d->auth);
    d->auth = NULL;
}

static void dummy_free(void *impl)
{
    mc_dummy_t *d = impl;
    for (int i = 0; i < MC_DUMMY_MAX_LANES; i++)
        pthread_mutex_destroy(&d->lanes[i].lock);
    pthread_mutex_destroy(&d->regions_lock);
    pthread_mutex_destroy(&d->slice_lock);
    pthread_mutex_destroy(&d->ping_lock);
    pthread_cond_destroy(&d->ping_cond);
    free(d->regions);
    free(d->slices);
    free(d);
}

static int dummy_open(const mc_store_dummy_config_t *c, mc_dummy_t **out)
{
    const char *real =
        c->real_client_addr && *c->real_client_addr ? c->real_client_addr : MC_DUMMY_DEFAULT_REAL;
    int port = parse_port(real);
    if (port < 0) {
        MC_ERROR("setup_dummy: server_address \"%s\" is not host:port", real);
        return MC_ERR_INVALID_PARAMS;
    }
    if (c->local_buffer_size > MC_MAX_VALUE_SIZE) {
        MC_ERROR("setup_dummy: local buffer larger than 1 TiB");
        return MC_ERR_INVALID_PARAMS;
    }
    mc_dummy_t *d = calloc(1, sizeof(*d));
    if (!d)
        return MC_ERR_INTERNAL_ERROR;
    d->next_region = 1;
    atomic_store(&d->nlanes, 1);
    for (int i = 0; i < MC_DUMMY_MAX_LANES; i++) {
        d->lanes[i].fd = -1;
        pthread_mutex_init(&d->lanes[i].lock, NULL);
    }
    pthread_mutex_init(&d->regions_lock, NULL);
    pthread_mutex_init(&d->slice_lock, NULL);
    pthread_mutex_init(&d->ping_lock, NULL);
    pthread_cond_init(&d->ping_cond, NULL);
    snprintf(d->sock_name, sizeof(d->sock_name), MC_DUMMY_SOCKET_FMT, port);
    d->addr.sun_family = AF_UNIX;
    size_t nlen = strlen(d->sock_name);
    memcpy(d->addr.sun_path + 1, d->sock_name, nlen);
    d->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nlen);
    const char *t = getenv(MC_DUMMY_CALL_TIMEOUT_ENV);
    long long tv = t && *t ? atoll(t) : 0;
    d->call_timeout_ms = tv > 0 ? (uint64_t)tv : MC_DUMMY_CALL_TIMEOUT_DEFAULT_MS;
    _Static_assert(sizeof(d->client_id) > MC_UUID_TEXT_LEN, "room for a UUID");
    if (mc_uuid_v4(d->client_id) != 0)
        snprintf(d->client_id, sizeof(d->client_id), "dummy-%d", (int)getpid());
    int rc = mc_auth_resolve(c->cluster_secret, c->cluster_secret_file, &d->auth);
    if (rc == 0 && c->local_buffer_size > 0) {
        int fd;
        rc = mc_shared_memfd_map(c->local_buffer_size, &d->lb, &fd);
        if (rc == 0) {
            d->lb_size = c->local_buffer_size;
            d->regions = calloc(16, sizeof(*d->regions));
            d->regions_cap = 16;
            if (d->regions)
                d->regions[d->nregions++] = (region_t){0, (uintptr_t)d->lb, d->lb_size, fd};
            else
                close(fd), rc = MC_ERR_INTERNAL_ERROR;
        }
    }
    if (rc == 0) {
        lock_lanes(d);
        rc = connect_locked(d);
        unlock_lanes(d);
        if (rc != 0)
            MC_ERROR("setup_dummy: no real client answers on @%s (start mooncake_client --port=%d "
                     "on this host): %s",
                     d->sock_name, port, mc_error_name(rc));
    }
    if (rc == 0 && pthread_create(&d->ping_thread, NULL, ping_main, d) != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        dummy_close(d);
        dummy_free(d);
        return rc;
    }
    d->ping_started = 1;
    MC_INFO("dummy client %s: real client @%s, local buffer %zu bytes", d->client_id, d->sock_name,
            d->lb_size);
    *out = d;
    return 0;
}

/* ---- the backend -------------------------------------------------------------------------- */

/* No segment calls: a dummy owns no segment (store.c refuses them). */
static const mc_store_backend_ops_t dummy_ops = {
    .name = "dummy",
    .close = dummy_close,
    .free = dummy_free,
    .health_check = dummy_health_check,
    .get_hostname = dummy_get_hostname,
    .write = dummy_write,
    .read = dummy_read,
    .exist = dummy_exist,
    .remove = dummy_remove,
    .remove_all = dummy_remove_all,
    .remove_by_regex = dummy_remove_by_regex,
    .get_size = dummy_get_size,
    .get_replica_desc = dummy_get_replica_desc,
    .register_buffer = dummy_register_buffer,
    .unregister_buffer = dummy_unregister_buffer,
    .get_offload_stats = dummy_get_offload_stats,
    .set_offloading = dummy_set_offloading,
    .create_task = dummy_create_task,
    .query_task = dummy_query_task,
    .batch_replica_clear = dummy_batch_replica_clear,
};

int mc_store_setup_dummy(const mc_store_dummy_config_t *c, mc_store_t **out)
{
    if (!c || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_dummy_t *d;
    int rc = dummy_open(c, &d);
    if (rc != 0)
        return rc;
    return mc_store_create(&dummy_ops, d, out);
}
