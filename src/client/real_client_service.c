/*
 * real_client_service.c — mooncake_client's service for dummy clients (real_client_service.h).
 *
 * An accept thread takes connections on the abstract unix socket "@mooncake_client_<port>.sock",
 * checks the peer's uid (SO_PEERCRED: this user or root) and the connection cap, and starts one
 * thread per dummy. That thread runs the cluster-secret handshake when a secret is set, then
 * reads one request frame at a time (dummy.proto), runs it on the store and answers. Why a thread
 * per dummy rather than the master's libuv server: requests carry memfds (SCM_RIGHTS), which
 * libuv's stream API does not pass for non-handle descriptors, and a dummy's calls are
 * serialised on its one connection anyway, so a blocking loop per dummy is the simplest correct
 * shape; dummies are few (one per serving process, MC_DUMMY_MAX_CONNECTIONS).
 *
 * Invariant: a dummy's regions are touched only by its own thread (map, translate, unmap), so a
 * region is never unmapped while a call on it runs; the thread drops them all before it exits.
 *
 * The frames are dummy_wire.c's, which the dummy (dummy_client.c) speaks too; neither end calls
 * the other. The store is served through its public calls (store.h), as any user would, plus the
 * one switch of store_client.h.
 */
#include "real_client_service.h"

#include "auth.h"
#include "dummy.pb-c.h"
#include "log.h"
#include "net.h"
#include "pb_decode.h"
#include "rpc.h"
#include "store_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MC_DUMMY_FRAME_REST_MS 5000  /* the rest of a frame, once its first byte arrived */
#define MC_DUMMY_REPLY_SEND_MS 10000 /* a reply the dummy does not read */

/* ---- service state ------------------------------------------------------------------------ */

typedef struct dummy_region {
    uint32_t id;
    int fd;
    uint8_t *base; /* our mapping of the dummy's memfd */
    uint64_t size;
} dummy_region_t;

typedef struct dummy_conn {
    mc_real_client_service_t *svc;
    int fd;
    char name[96]; /* "pid N" then "pid N <client id>" for logs */
    dummy_region_t *regions;
    size_t nregions;
    uint64_t mapped; /* bytes */
    /* a task call's answer, referenced by the reply until it is packed (one call at a time) */
    char task_id[MC_TASK_ID_LEN + 1];
    mc_task_info_t task;
    Mc__DummyTask task_pb;
    struct dummy_conn *next;
} dummy_conn_t;

struct mc_real_client_service {
    mc_store_t *store;
    int threads; /* connections one dummy may open */
    mc_auth_t *auth;
    int listen_fd;
    pthread_t accept_thread;
    pthread_mutex_t lock;
    pthread_cond_t idle; /* signalled when a connection thread ends */
    dummy_conn_t *conns;
    size_t nconns;
    int stopping;
    atomic_uint_fast64_t regions, dropped, refused, requests_refused;
    atomic_uint_fast64_t last_refusal_log_ms;
};

static void refusal(mc_real_client_service_t *svc, const char *who, const char *why)
{
    atomic_fetch_add(&svc->requests_refused, 1);
    uint64_t now = mc_now_ms(), last = atomic_load(&svc->last_refusal_log_ms);
    if (now - last >= 1000 && atomic_compare_exchange_strong(&svc->last_refusal_log_ms, &last, now))
        MC_WARN("dummy service: refused a request of %s: %s", who, why);
}

/* ---- regions ------------------------------------------------------------------------------ */

static dummy_region_t *find_region(dummy_conn_t *c, uint32_t id)
{
    for (size_t i = 0; i < c->nregions; i++)
        if (c->regions[i].id == id)
            return &c->regions[i];
    return NULL;
}

/* The target of an empty range: the store reads and writes no byte of it. */
static uint8_t empty_range_target;

/* The real address of a dummy range, or NULL when it is not inside one of the dummy's regions. */
static uint8_t *translate(dummy_conn_t *c, const Mc__DummyRange *r)
{
    if (r && r->size == 0)
        return &empty_range_target; /* a 0-byte value: no memory involved, as the store's check */
    dummy_region_t *g = r ? find_region(c, r->region) : NULL;
    if (!g || r->offset > g->size || r->size > g->size - r->offset)
        return NULL;
    return g->base + r->offset;
}

static void drop_region(dummy_conn_t *c, size_t i)
{
    dummy_region_t *g = &c->regions[i];
    mc_store_unregister_buffer(c->svc->store, g->base);
    munmap(g->base, g->size);
    close(g->fd);
    c->mapped -= g->size;
    c->regions[i] = c->regions[--c->nregions];
    atomic_fetch_sub(&c->svc->regions, 1);
}

static int64_t map_region(dummy_conn_t *c, const Mc__DummyRequest *req, int *passed_fd)
{
    if (req->n_ranges != 1 || *passed_fd < 0)
        return MC_ERR_INVALID_PARAMS;
    const Mc__DummyRange *r = req->ranges[0];
    if (r->size == 0 || find_region(c, r->region) || c->nregions >= MC_DUMMY_MAX_REGIONS ||
        r->size > MC_DUMMY_MAX_MAPPED_BYTES - c->mapped)
        return MC_ERR_INVALID_PARAMS;
    struct stat st;
    /* A dummy that could shrink the file would make our accesses fault (SIGBUS): only sealed
     * memfds are mapped. */
    int seals = fcntl(*passed_fd, F_GET_SEALS);
    if (fstat(*passed_fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < r->size ||
        seals < 0 || !(seals & F_SEAL_SHRINK))
        return MC_ERR_INVALID_PARAMS;
    if (c->nregions % 16 == 0) {
        dummy_region_t *g = realloc(c->regions, (c->nregions + 16) * sizeof(*g));
        if (!g)
            return MC_ERR_INTERNAL_ERROR;
        c->regions = g;
    }
    void *p = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, *passed_fd, 0);
    if (p == MAP_FAILED) {
        MC_WARN("dummy service: mapping %llu bytes of %s: %s", (unsigned long long)r->size, c->name,
                strerror(errno));
        return MC_ERR_INTERNAL_ERROR;
    }
    int rc = mc_store_register_buffer(c->svc->store, p, r->size);
    if (rc != 0) {
        munmap(p, r->size);
        return rc;
    }
    c->regions[c->nregions++] = (dummy_region_t){r->region, *passed_fd, p, r->size};
    *passed_fd = -1; /* the region owns it */
    c->mapped += r->size;
    atomic_fetch_add(&c->svc->regions, 1);
    return 0;
}

static int64_t unmap_region(dummy_conn_t *c, const Mc__DummyRequest *req)
{
    if (req->n_ranges != 1)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < c->nregions; i++) {
        if (c->regions[i].id == req->ranges[0]->region) {
            drop_region(c, i);
            return 0;
        }
    }
    return MC_ERR_INVALID_PARAMS;
}

/* ---- requests ----------------------------------------------------------------------------- */

static mc_replicate_config_t config_from(const Mc__DummyConfig *m)
{
    mc_replicate_config_t c = MC_REPLICATE_CONFIG_INIT;
    if (!m)
        return c;
    c.replica_num = m->replica_num;
    c.preferred_segments = (const char *const *)m->preferred_segments;
    c.preferred_segment_count = m->n_preferred_segments;
    c.soft_pin_action = (mc_soft_pin_action_t)m->soft_pin_action;
    c.has_soft_pin_ttl = m->has_soft_pin_ttl;
    c.soft_pin_ttl_ms = m->soft_pin_ttl_ms;
    c.with_hard_pin = m->with_hard_pin;
    return c;
}

/* WRITE and READ: every range translated before anything runs (a batch is all or nothing). */
static int64_t data_call(dummy_conn_t *c, uint16_t op, const Mc__DummyRequest *req,
                         Mc__DummyReply *rep)
{
    size_t n = req->n_keys;
    if (req->n_ranges != n)
        return MC_ERR_INVALID_PARAMS;
    void **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    size_t *sizes = calloc(n ? n : 1, sizeof(*sizes));
    int64_t *results = calloc(n ? n : 1, sizeof(*results));
    int *wres = calloc(n ? n : 1, sizeof(*wres));
    int64_t rc = ptrs && sizes && results && wres ? 0 : MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n && rc == 0; i++) {
        ptrs[i] = translate(c, req->ranges[i]);
        sizes[i] = req->ranges[i]->size;
        if (!ptrs[i]) {
            refusal(c->svc, c->name, "a range outside its regions");
            rc = MC_ERR_INVALID_PARAMS;
        }
    }
    if (rc == 0 && op == MC_DUMMY_WRITE) {
        mc_replicate_config_t cfg = config_from(req->config);
        const char *const *keys = (const char *const *)req->keys;
        rc = req->flag ? mc_store_upsert_from_batch(c->svc->store, keys, (const void *const *)ptrs,
                                                    sizes, n, &cfg, wres)
                       : mc_store_put_from_batch(c->svc->store, keys, (const void *const *)ptrs,
                                                 sizes, n, &cfg, wres);
        for (size_t i = 0; i < n; i++)
            results[i] = wres[i];
    } else if (rc == 0) {
        rc = mc_store_get_into_batch(c->svc->store, (const char *const *)req->keys, ptrs, sizes, n,
                                     results);
    }
    free(ptrs);
    free(sizes);
    free(wres);
    rep->results = results; /* freed with the reply */
    rep->n_results = results ? n : 0;
    return rc;
}

static int64_t per_key_call(dummy_conn_t *c, uint16_t op, const Mc__DummyRequest *req,
                            Mc__DummyReply *rep)
{
    size_t n = req->n_keys;
    int *r = calloc(n ? n : 1, sizeof(*r));
    int64_t *results = calloc(n ? n : 1, sizeof(*results));
    if (!r || !results) {
        free(r);
        free(results);
        return MC_ERR_INTERNAL_ERROR;
    }
    const char *const *keys = (const char *const *)req->keys;
    int64_t rc = op == MC_DUMMY_EXIST
                     ? mc_store_batch_exist(c->svc->store, keys, n, r)
                     : mc_store_batch_remove(c->svc->store, keys, n, req->force, r);
    for (size_t i = 0; i < n; i++)
        results[i] = r[i];
    free(r);
    rep->results = results;
    rep->n_results = n;
    return rc;
}

/* A copy (flag 0) or move (flag 1) task of keys[0]; the id goes into rep->task_id, which points
 * into c->task_id (valid until the reply is packed). */
static int64_t create_task(dummy_conn_t *c, const Mc__DummyRequest *req, Mc__DummyReply *rep)
{
    if (req->n_keys != 1)
        return MC_ERR_INVALID_PARAMS;
    int rc = req->flag ? (req->n_targets == 1 && req->source
                              ? mc_store_create_move_task(c->svc->store, req->keys[0], req->source,
                                                          req->targets[0], c->task_id)
                              : MC_ERR_INVALID_PARAMS)
                       : mc_store_create_copy_task(c->svc->store, req->keys[0],
                                                   (const char *const *)req->targets,
                                                   req->n_targets, c->task_id);
    rep->task_id = c->task_id;
    return rc;
}

/* A task's state into rep->task (c->task and c->task_pb, valid until the reply is packed). */
static int64_t query_task(dummy_conn_t *c, const Mc__DummyRequest *req, Mc__DummyReply *rep)
{
    if (!req->task_id)
        return MC_ERR_INVALID_PARAMS;
    memset(&c->task, 0, sizeof(c->task));
    int rc = mc_store_query_task(c->svc->store, req->task_id, &c->task);
    if (rc != 0)
        return rc;
    Mc__DummyTask init = MC__DUMMY_TASK__INIT;
    c->task_pb = init;
    c->task_pb.id = c->task.id;
    c->task_pb.type = (int32_t)c->task.type;
    c->task_pb.status = (int32_t)c->task.status;
    c->task_pb.created_at_ms_epoch = c->task.created_at_ms_epoch;
    c->task_pb.last_updated_at_ms_epoch = c->task.last_updated_at_ms_epoch;
    c->task_pb.assigned_client = c->task.assigned_client;
    c->task_pb.message = c->task.message;
    rep->task = &c->task_pb;
    return 0;
}

static int64_t replica_desc(dummy_conn_t *c, const Mc__DummyRequest *req, Mc__DummyReply *rep)
{
    if (req->n_keys != 1 || req->flag < 0)
        return MC_ERR_INVALID_PARAMS;
    size_t cap = (size_t)req->flag > MC_DUMMY_MAX_REPLICAS ? MC_DUMMY_MAX_REPLICAS : req->flag;
    mc_replica_desc_t *d = calloc(cap ? cap : 1, sizeof(*d));
    Mc__DummyReplica *m = calloc(cap ? cap : 1, sizeof(*m));
    Mc__DummyReplica **mp = calloc(cap ? cap : 1, sizeof(*mp));
    if (!d || !m || !mp) {
        free(d);
        free(m);
        free(mp);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t count = 0;
    int rc = mc_store_get_replica_desc(c->svc->store, req->keys[0], d, cap, &count);
    size_t k = rc == 0 ? (count < cap ? count : cap) : 0;
    for (size_t i = 0; i < k; i++) {
        mc__dummy_replica__init(&m[i]);
        m[i].type = d[i].type;
        m[i].status = d[i].status;
        m[i].segment_name = strdup(d[i].segment_name);
        m[i].address = d[i].address;
        m[i].size = d[i].size;
        m[i].file_path = strdup(d[i].file_path);
        m[i].epoch = d[i].epoch;
        m[i].has_checksum = d[i].has_checksum;
        m[i].checksum = d[i].checksum;
        mp[i] = &m[i];
    }
    free(d);
    if (k == 0)
        free(m); /* reply_free frees the array through its first element: there is none */
    rep->replicas = mp;
    rep->n_replicas = k;
    rep->count = count;
    return rc;
}

static int64_t offload_stats(dummy_conn_t *c, Mc__DummyReply *rep)
{
    mc_store_offload_stats_t st;
    int rc = mc_store_get_offload_stats(c->svc->store, &st);
    if (rc != 0)
        return rc;
    uint64_t v[] = {(uint64_t)st.enabled,
                    (uint64_t)st.backend,
                    (uint64_t)st.healthy,
                    (uint64_t)st.offloading,
                    st.tasks_done,
                    st.tasks_failed,
                    st.tasks_stale,
                    st.bytes_offloaded,
                    st.files,
                    st.disk_bytes,
                    st.evicted_files,
                    st.queued,
                    st.fallback_reads,
                    st.served_reads,
                    st.fetch_connections_refused,
                    st.fetch_connections_idle_closed,
                    st.fetch_connections_stalled};
    rep->stats = malloc(sizeof(v));
    if (!rep->stats)
        return MC_ERR_INTERNAL_ERROR;
    memcpy(rep->stats, v, sizeof(v));
    rep->n_stats = sizeof(v) / sizeof(v[0]);
    return 0;
}

static void reply_free(Mc__DummyReply *rep)
{
    free(rep->results);
    for (size_t i = 0; i < rep->n_replicas; i++) {
        free(rep->replicas[i]->segment_name);
        free(rep->replicas[i]->file_path);
    }
    if (rep->n_replicas)
        free(rep->replicas[0]);
    free(rep->replicas);
    free(rep->stats);
}

static int64_t dispatch(dummy_conn_t *c, uint16_t op, const Mc__DummyRequest *req, int *passed_fd,
                        Mc__DummyReply *rep)
{
    mc_store_t *st = c->svc->store;
    if (req->n_keys > MC_DUMMY_MAX_BATCH || req->n_ranges > MC_DUMMY_MAX_BATCH)
        return MC_ERR_INVALID_PARAMS;
    switch (op) {
    case MC_DUMMY_HELLO:
        rep->count = (uint64_t)c->svc->threads;
        snprintf(c->name + strlen(c->name), sizeof(c->name) - strlen(c->name), " %.40s",
                 req->client_id ? req->client_id : "");
        return 0;
    case MC_DUMMY_PING:
        return 0;
    case MC_DUMMY_MAP:
        return map_region(c, req, passed_fd);
    case MC_DUMMY_UNMAP:
        return unmap_region(c, req);
    case MC_DUMMY_WRITE:
    case MC_DUMMY_READ:
        return data_call(c, op, req, rep);
    case MC_DUMMY_EXIST:
    case MC_DUMMY_REMOVE:
        return per_key_call(c, op, req, rep);
    case MC_DUMMY_REMOVE_ALL:
        return mc_store_remove_all(st, req->force);
    case MC_DUMMY_REMOVE_BY_REGEX:
        return mc_store_remove_by_regex(st, req->regex, req->force);
    case MC_DUMMY_GET_SIZE:
        return req->n_keys == 1 ? mc_store_get_size(st, req->keys[0]) : MC_ERR_INVALID_PARAMS;
    case MC_DUMMY_REPLICA_DESC:
        return replica_desc(c, req, rep);
    case MC_DUMMY_HEALTH:
        return mc_store_health_check(st);
    case MC_DUMMY_OFFLOAD_STATS:
        return offload_stats(c, rep);
    case MC_DUMMY_SET_OFFLOADING:
        return mc_store_set_offloading(st, req->flag);
    case MC_DUMMY_CREATE_TASK:
        return create_task(c, req, rep);
    case MC_DUMMY_QUERY_TASK:
        return query_task(c, req, rep);
    default:
        return MC_ERR_INVALID_PARAMS;
    }
}

/* One request: decode, run, answer. Nonzero: close the connection. */
static int serve_one(dummy_conn_t *c, const mc_frame_header_t *h, const uint8_t *body,
                     int *passed_fd)
{
    Mc__DummyReply rep;
    mc__dummy_reply__init(&rep);
    Mc__DummyRequest *req = NULL;
    int rc =
        mc_pb_decode(&mc__dummy_request__descriptor, body, h->body_len, (ProtobufCMessage **)&req);
    if (rc != 0) {
        refusal(c->svc, c->name, "a malformed request");
        rep.code = rc;
    } else {
        if (*passed_fd >= 0 && h->opcode != MC_DUMMY_MAP)
            refusal(c->svc, c->name, "a descriptor with a request that takes none");
        rep.code = dispatch(c, h->opcode, req, passed_fd, &rep);
        if (h->opcode == MC_DUMMY_MAP && rep.code != 0)
            refusal(c->svc, c->name, "a region it cannot map (not a sealed memfd, over limits)");
        mc__dummy_request__free_unpacked(req, NULL);
    }
    size_t len = mc__dummy_reply__get_packed_size(&rep);
    uint8_t *out = malloc(len ? len : 1);
    int src = out ? 0 : MC_ERR_INTERNAL_ERROR;
    if (out) {
        mc__dummy_reply__pack(&rep, out);
        src = mc_dummy_send_frame(c->fd, (uint16_t)(h->opcode | MC_RPC_REPLY), h->request_id, out,
                                  len, -1, mc_now_ms() + MC_DUMMY_REPLY_SEND_MS);
    }
    free(out);
    reply_free(&rep);
    return src;
}

/* Without a secret here, a dummy that starts the handshake is told so (it then refuses us). */
static void answer_unexpected_hello(dummy_conn_t *c, const mc_frame_header_t *h)
{
    uint8_t *b = NULL;
    size_t len = 0;
    if (mc_auth_result_body(MC_ERR_NOT_SUPPORTED, "this mooncake_client has no cluster secret", &b,
                            &len) == 0)
        mc_dummy_send_frame(c->fd, MC_AUTH_OP_RESULT, h->request_id, b, len, -1,
                            mc_now_ms() + MC_AUTH_TIMEOUT_MS);
    free(b);
}

static void *conn_main(void *arg)
{
    dummy_conn_t *c = arg;
    mc_real_client_service_t *svc = c->svc;
    const char *why = "closed its connection";
    if (svc->auth && mc_auth_server(svc->auth, c->fd, MC_DUMMY_AUTH_SERVICE, c->name,
                                    mc_now_ms() + MC_AUTH_TIMEOUT_MS) != 0) {
        atomic_fetch_add(&svc->refused, 1);
        why = "did not prove the cluster secret";
        goto out;
    }
    for (;;) {
        if (mc_dummy_wait_fd(c->fd, POLLIN, mc_now_ms() + MC_DUMMY_TTL_MS) != 0) {
            why = "sent nothing (no ping) for 10 s";
            break;
        }
        mc_frame_header_t h;
        uint8_t *body = NULL;
        int passed_fd = -1;
        int rc = mc_dummy_recv_frame(c->fd, MC_FRAME_DEFAULT_MAX_BODY, &h, &body, &passed_fd,
                                     mc_now_ms() + MC_DUMMY_FRAME_REST_MS);
        if (rc == 0 && h.opcode == MC_AUTH_OP_HELLO) {
            answer_unexpected_hello(c, &h);
            atomic_fetch_add(&svc->refused, 1);
            why = "offered a cluster secret this client does not have";
            rc = -1;
        } else if (rc == 0) {
            rc = serve_one(c, &h, body, &passed_fd);
        } else if (rc != MC_ERR_RPC_FAIL) {
            refusal(svc, c->name, "a bad frame");
            why = "sent a bad frame";
        }
        free(body);
        if (passed_fd >= 0)
            close(passed_fd);
        if (rc != 0)
            break;
    }
out:;
    size_t n = c->nregions;
    while (c->nregions)
        drop_region(c, c->nregions - 1);
    MC_INFO("dummy service: dummy %s dropped (%s): %zu regions unmapped", c->name, why, n);
    close(c->fd);
    free(c->regions);
    pthread_mutex_lock(&svc->lock);
    for (dummy_conn_t **p = &svc->conns; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    svc->nconns--;
    atomic_fetch_add(&svc->dropped, 1);
    pthread_cond_broadcast(&svc->idle);
    pthread_mutex_unlock(&svc->lock);
    free(c);
    return NULL;
}

/* ---- accept ------------------------------------------------------------------------------- */

static void admit(mc_real_client_service_t *svc, int fd)
{
    struct ucred cred = {0};
    socklen_t clen = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
        (cred.uid != getuid() && cred.uid != 0)) {
        MC_WARN("dummy service: refused a connection from uid %d (pid %d): only uid %d or root",
                (int)cred.uid, (int)cred.pid, (int)getuid());
        atomic_fetch_add(&svc->refused, 1);
        close(fd);
        return;
    }
    dummy_conn_t *c = calloc(1, sizeof(*c));
    pthread_mutex_lock(&svc->lock);
    if (!c || svc->nconns >= MC_DUMMY_MAX_CONNECTIONS || svc->stopping) {
        pthread_mutex_unlock(&svc->lock);
        if (c)
            MC_WARN("dummy service: refused pid %d: %d dummies connected already", (int)cred.pid,
                    MC_DUMMY_MAX_CONNECTIONS);
        atomic_fetch_add(&svc->refused, 1);
        free(c);
        close(fd);
        return;
    }
    c->svc = svc;
    c->fd = fd;
    snprintf(c->name, sizeof(c->name), "pid %d", (int)cred.pid);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (pthread_create(&t, &attr, conn_main, c) != 0) {
        pthread_mutex_unlock(&svc->lock);
        pthread_attr_destroy(&attr);
        close(fd);
        free(c);
        return;
    }
    pthread_attr_destroy(&attr);
    c->next = svc->conns;
    svc->conns = c;
    svc->nconns++;
    pthread_mutex_unlock(&svc->lock);
}

static void *accept_main(void *arg)
{
    mc_real_client_service_t *svc = arg;
    for (;;) {
        int fd = accept4(svc->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            pthread_mutex_lock(&svc->lock);
            int stop = svc->stopping;
            pthread_mutex_unlock(&svc->lock);
            if (stop)
                return NULL;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                usleep(100 * 1000);
                continue;
            }
            MC_ERROR("dummy service: accept: %s; no more dummies are accepted", strerror(errno));
            return NULL;
        }
        admit(svc, fd);
    }
}

int mc_real_client_service_start(mc_store_t *store, int port, int threads, const char *secret,
                                 const char *secret_file, mc_real_client_service_t **out)
{
    if (!store || !out || port < 1 || port > 65535 || threads < 1 || threads > MC_DUMMY_MAX_LANES)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_real_client_service_t *svc = calloc(1, sizeof(*svc));
    if (!svc)
        return MC_ERR_INTERNAL_ERROR;
    int rc = mc_auth_resolve(secret, secret_file, &svc->auth);
    if (rc != 0) {
        free(svc);
        return rc;
    }
    svc->store = store;
    svc->threads = threads;
    pthread_mutex_init(&svc->lock, NULL);
    pthread_cond_init(&svc->idle, NULL);
    /* Before the first dummy can connect: its calls read the flag (harmless when the start
     * fails below: the flag only lets a store without a local buffer run zero-copy calls). */
    mc_store_allow_zero_copy_io(store);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int len = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, MC_DUMMY_SOCKET_FMT, port);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    svc->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (svc->listen_fd < 0 || bind(svc->listen_fd, (struct sockaddr *)&addr, alen) != 0 ||
        listen(svc->listen_fd, 64) != 0) {
        MC_ERROR("dummy service: cannot listen on @" MC_DUMMY_SOCKET_FMT
                 ": %s (another mooncake_client with --port %d on this host?)",
                 port, strerror(errno), port);
        rc = MC_ERR_INTERNAL_ERROR;
    } else if (pthread_create(&svc->accept_thread, NULL, accept_main, svc) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
    }
    if (rc != 0) {
        if (svc->listen_fd >= 0)
            close(svc->listen_fd);
        mc_auth_destroy(svc->auth);
        pthread_mutex_destroy(&svc->lock);
        pthread_cond_destroy(&svc->idle);
        free(svc);
        return rc;
    }
    MC_INFO("dummy service: serving dummy clients on @" MC_DUMMY_SOCKET_FMT
            " (uid %d or root%s), %d thread%s per dummy",
            port, (int)getuid(), svc->auth ? ", cluster secret required" : "", threads,
            threads == 1 ? "" : "s");
    *out = svc;
    return 0;
}

void mc_real_client_service_stop(mc_real_client_service_t *svc)
{
    if (!svc)
        return;
    pthread_mutex_lock(&svc->lock);
    svc->stopping = 1;
    shutdown(svc->listen_fd, SHUT_RDWR); /* wakes accept */
    for (dummy_conn_t *c = svc->conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR); /* wakes each connection thread */
    pthread_mutex_unlock(&svc->lock);
    pthread_join(svc->accept_thread, NULL);
    pthread_mutex_lock(&svc->lock);
    while (svc->nconns > 0)
        pthread_cond_wait(&svc->idle, &svc->lock);
    pthread_mutex_unlock(&svc->lock);
    close(svc->listen_fd);
    mc_auth_destroy(svc->auth);
    pthread_mutex_destroy(&svc->lock);
    pthread_cond_destroy(&svc->idle);
    free(svc);
}

void mc_real_client_service_get_stats(mc_real_client_service_t *svc,
                                      mc_real_client_service_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!svc)
        return;
    pthread_mutex_lock(&svc->lock);
    out->dummies = svc->nconns;
    pthread_mutex_unlock(&svc->lock);
    out->regions = atomic_load(&svc->regions);
    out->dummies_dropped = atomic_load(&svc->dropped);
    out->refused = atomic_load(&svc->refused);
    out->requests_refused = atomic_load(&svc->requests_refused);
}
