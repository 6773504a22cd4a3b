/*
 * transfer_engine.c — the Transfer Engine handle, opened segments, batches and worker threads.
 *
 * Submitting a batch dispatches each request by transport, walking te->transports (transports.c)
 * until one does not decline: in the caller's thread their submit slots — the engine's own
 * segment is a memcpy (local), a same-host peer's shared memory is a memcpy too (shm: one copy,
 * no hop); a request every submit declines is cut into slices (MC_SLICE_SIZE, default 4 MiB)
 * that the worker threads move in parallel through the transfer slots — with UCX (rdma) when
 * this engine runs protocol rdma and the peer's descriptor has an rdma address, else over
 * pooled tcp connections. A request completes when its last slice does; the batch's waiters are
 * woken when its last request does. No transport is named here.
 */
#include "transfer_internal.h"
#include "te_shared.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MC_TE_DEFAULT_WORKERS 4
#define MC_TE_DEFAULT_SLICE_BYTES (4ull << 20)
/* mc_te_set_epoch waits at most the transfer timeout plus this for older transfers to end. */
#define MC_TE_EPOCH_BARRIER_SLACK_MS 1000

/* ---- configuration --------------------------------------------------------------------- */

static int env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end == '\0' && v > 0 && v < (1L << 30)) ? (int)v : fallback;
}

static int configure(mc_transfer_engine_t *te, const mc_transfer_engine_config_t *cfg,
                     char bind_host[MC_HOST_MAX], int *port)
{
    const char *protocol = cfg->protocol && *cfg->protocol ? cfg->protocol : "tcp";
#ifndef MC_HAVE_RDMA
    if (!strcmp(protocol, "rdma")) {
        MC_ERROR("protocol rdma: the rdma transport is not built into this binary; rebuild with "
                 "-DUSE_RDMA=ON (needs UCX: libucx-dev) or use --protocol=tcp");
        return MC_ERR_NOT_SUPPORTED;
    }
#endif
    if (strcmp(protocol, "tcp") != 0 && strcmp(protocol, "rdma") != 0) {
        MC_ERROR("unknown protocol \"%s\" (expected tcp or rdma)", protocol);
        return MC_ERR_INVALID_PARAMS;
    }
    snprintf(te->protocol, sizeof(te->protocol), "%s", protocol);

    const char *meta = cfg->metadata_server;
    if (!meta || !*meta || !strcmp(meta, "P2PHANDSHAKE")) {
        te->metadata_url[0] = '\0';
    } else if (!strncmp(meta, "http://", 7) || !strncmp(meta, "https://", 8)) {
        if (strlen(meta) >= sizeof(te->metadata_url))
            return MC_ERR_INVALID_PARAMS;
        snprintf(te->metadata_url, sizeof(te->metadata_url), "%s", meta);
    } else if (mc_etcd_md_is_etcd(meta)) {
        /* "etcd://h:p[;h:p]", or no scheme (upstream: etcd); opened in mc_te_create */
        if (strlen(meta) >= sizeof(te->metadata_url))
            return MC_ERR_INVALID_PARAMS;
        snprintf(te->metadata_url, sizeof(te->metadata_url), "%s", meta);
    } else {
        MC_ERROR("metadata server \"%s\" is not supported: use P2PHANDSHAKE, "
                 "http://host:port/metadata or etcd://host:port[;host:port...]",
                 meta);
        return MC_ERR_INVALID_PARAMS;
    }

    const char *local =
        cfg->local_server_name && *cfg->local_server_name ? cfg->local_server_name : "0.0.0.0:0";
    if (mc_net_split_endpoint(local, 0, bind_host, port) != 0) {
        MC_ERROR("local server name \"%s\" is not host or host:port", local);
        return MC_ERR_INVALID_PARAMS;
    }
    te->disable_shm = cfg->disable_shm || env_int("MC_DISABLE_SHM", 0) == 1;
    te->timeout_ms = cfg->transfer_timeout_ms > 0
                         ? cfg->transfer_timeout_ms
                         : env_int("MC_TRANSFER_TIMEOUT", MC_TE_DEFAULT_TIMEOUT_MS / 1000) * 1000;
    te->slice_bytes = (uint64_t)env_int("MC_SLICE_SIZE", (int)MC_TE_DEFAULT_SLICE_BYTES);
    te->worker_count =
        cfg->worker_threads > 0 ? (size_t)cfg->worker_threads : (size_t)MC_TE_DEFAULT_WORKERS;
    te->max_connections =
        cfg->max_connections > 0
            ? (unsigned)cfg->max_connections
            : (unsigned)env_int("MC_TE_MAX_CONNECTIONS", MC_TE_DEFAULT_MAX_CONNECTIONS);
    te->idle_timeout_ms =
        cfg->idle_timeout_ms != 0
            ? cfg->idle_timeout_ms
            : env_int("MC_TE_IDLE_TIMEOUT", MC_TE_DEFAULT_IDLE_TIMEOUT_MS / 1000) * 1000;
    mc_net_host_id(te->host_id);
    return 0;
}

/* ---- workers --------------------------------------------------------------------------- */

static void request_finish_slice(mc_batch_t *b, uint32_t index, int rc, uint64_t bytes)
{
    mc_req_state_t *r = &b->reqs[index];
    if (rc != 0) {
        int expected = 0;
        atomic_compare_exchange_strong(&r->error, &expected, rc);
    } else {
        atomic_fetch_add(&r->done_bytes, bytes);
    }
    if (atomic_fetch_sub(&r->slices_left, 1) != 1)
        return;
    atomic_store(&r->finish_ms, mc_now_ms()); /* before the state: a reader of it sees this */
    atomic_store(&r->state, atomic_load(&r->error) ? MC_TRANSFER_FAILED : MC_TRANSFER_COMPLETED);
    pthread_mutex_lock(&b->lock);
    if (--b->outstanding == 0)
        pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

typedef struct worker_arg {
    mc_transfer_engine_t *te;
    size_t index; /* which rdma worker (UCX) this thread owns */
} worker_arg_t;

uint64_t mc_te_deadline_ms(const mc_transfer_engine_t *te, uint64_t now, uint64_t bytes)
{
    uint64_t extra = (uint64_t)te->timeout_ms + bytes / 1000000u + 1u;
    return now < UINT64_MAX / 2 - extra ? now + extra : UINT64_MAX / 2; /* never wraps */
}

/* One slice to a remote peer by the request's deadline: the first transfer slot that does not
 * decline (rdma when both ends speak it, else tcp). Past the deadline it fails at once, without
 * touching the peer. */
static int move_slice(mc_transfer_engine_t *te, size_t worker, mc_peer_t *peer, int op, void *local,
                      uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token,
                      uint64_t deadline_ms)
{
    if (op == MC_TE_OP_WRITE && mc_fence_token_refused(te->fence, token)) {
        if (mc_peer_should_log(peer))
            MC_ERROR("write of %llu bytes at %#llx on segment %s refused: its allocation (token "
                     "%llu) was revoked",
                     (unsigned long long)len, (unsigned long long)remote, peer->name,
                     (unsigned long long)token);
        return MC_ERR_INVALID_WRITE;
    }
    if (mc_now_ms() >= deadline_ms) {
        if (mc_peer_should_log(peer))
            MC_ERROR("%s of %llu bytes at %#llx on segment %s failed: its request's deadline "
                     "passed before it could start",
                     op == MC_TE_OP_WRITE ? "write" : "read", (unsigned long long)len,
                     (unsigned long long)remote, peer->name);
        return MC_ERR_TRANSFER_FAIL;
    }
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        if (!(*t)->transfer)
            continue;
        int rc =
            (*t)->transfer(te, worker, peer, op, local, remote, len, epoch, token, deadline_ms);
        if (rc != MC_TRANSPORT_DECLINED)
            return rc;
    }
    return MC_ERR_TRANSFER_FAIL; /* not reached: tcp takes every slice */
}

static void *worker_main(void *p)
{
    worker_arg_t arg = *(worker_arg_t *)p;
    free(p);
    mc_transfer_engine_t *te = arg.te;
    for (;;) {
        pthread_mutex_lock(&te->queue_lock);
        while (te->queue_count == 0 && !atomic_load(&te->stopping))
            pthread_cond_wait(&te->queue_cond, &te->queue_lock);
        if (te->queue_count == 0) {
            pthread_mutex_unlock(&te->queue_lock);
            return NULL;
        }
        /* The first slice in the window whose peer is under its share, else the oldest; the
         * oldest takes the picked one's place. */
        unsigned share = te->worker_count > 1 ? (unsigned)(te->worker_count / 2) : 1;
        size_t window = te->queue_count < MC_TE_SCHED_WINDOW ? te->queue_count : MC_TE_SCHED_WINDOW;
        size_t head = te->queue_head, at = head;
        for (size_t k = 0; k < window; k++) {
            size_t pos = (head + k) % te->queue_capacity;
            if (te->queue[pos].peer->busy_workers < share) {
                at = pos;
                break;
            }
        }
        mc_slice_t s = te->queue[at];
        te->queue[at] = te->queue[head];
        te->queue_head = (head + 1) % te->queue_capacity;
        te->queue_count--;
        s.peer->busy_workers++;
        pthread_mutex_unlock(&te->queue_lock);

        mc_req_state_t *r = &s.batch->reqs[s.index];
        int rc = MC_ERR_TRANSFER_FAIL;
        if (!atomic_load(&r->error)) { /* a failed request's remaining slices are skipped */
            int op = r->req.opcode == MC_TRANSFER_WRITE ? MC_TE_OP_WRITE : MC_TE_OP_READ;
            rc = move_slice(te, arg.index, s.peer, op, (char *)r->req.source + s.offset,
                            r->req.target_offset + s.offset, s.length, r->req.epoch,
                            r->req.fence_token, r->deadline_ms);
        }
        pthread_mutex_lock(&te->queue_lock);
        s.peer->busy_workers--;
        pthread_mutex_unlock(&te->queue_lock);
        request_finish_slice(s.batch, s.index, rc, s.length);
    }
}

/* Queues the slices of one request. With queue_lock held. */
static int enqueue_slices_locked(mc_transfer_engine_t *te, mc_batch_t *b, uint32_t index,
                                 mc_peer_t *peer, uint64_t nslices)
{
    if (te->queue_count + nslices > te->queue_capacity) {
        size_t cap = te->queue_capacity ? te->queue_capacity : 256;
        while (cap < te->queue_count + nslices)
            cap *= 2;
        mc_slice_t *q = malloc(cap * sizeof(*q));
        if (!q)
            return MC_ERR_INTERNAL_ERROR;
        for (size_t i = 0; i < te->queue_count; i++)
            q[i] = te->queue[(te->queue_head + i) % te->queue_capacity];
        free(te->queue);
        te->queue = q;
        te->queue_head = 0;
        te->queue_capacity = cap;
    }
    const mc_transfer_req_t *req = &b->reqs[index].req;
    for (uint64_t off = 0; off < req->length; off += te->slice_bytes) {
        uint64_t len = req->length - off < te->slice_bytes ? req->length - off : te->slice_bytes;
        size_t tail = (te->queue_head + te->queue_count) % te->queue_capacity;
        te->queue[tail] = (mc_slice_t){b, peer, index, off, len};
        te->queue_count++;
    }
    return 0;
}

/* ---- peers' transport state ---------------------------------------------------------- */

/* Closes the peer with every transport before `upto` (NULL: all) and frees it. */
static void peer_free(mc_transfer_engine_t *te, mc_peer_t *p, const mc_transport_ops_t *const *upto)
{
    for (const mc_transport_ops_t *const *t = te->transports; *t && t != upto; t++) {
        if ((*t)->peer_close)
            (*t)->peer_close(te, p);
    }
    mc_desc_free(&p->desc);
    pthread_mutex_destroy(&p->lock);
    pthread_rwlock_destroy(&p->shm_rw);
    free(p);
}

/* Every transport's peer_open slot; on a failure the ones opened before close it again. */
static int peer_open(mc_transfer_engine_t *te, mc_peer_t *p,
                     const mc_transport_ops_t *const **failed)
{
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        int rc = (*t)->peer_open ? (*t)->peer_open(te, p) : 0;
        if (rc != 0) {
            *failed = t;
            return rc;
        }
    }
    return 0;
}

/* ---- engine lifecycle ------------------------------------------------------------------- */

int mc_te_create(const mc_transfer_engine_config_t *config, mc_transfer_engine_t **out)
{
    if (!config || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_transfer_engine_t *te = calloc(1, sizeof(*te));
    if (!te)
        return MC_ERR_INTERNAL_ERROR;
    te->transports = mc_transports;
    te->listen_fd = -1;
    te->park_epfd = te->park_wake = -1;
    te->shm_listen_fd = -1;
    mc_registry_init(&te->registry);
    if (mc_fence_init(te) != 0) {
        mc_registry_destroy(&te->registry);
        free(te);
        return MC_ERR_INTERNAL_ERROR;
    }
    pthread_mutex_init(&te->conn_lock, NULL);
    pthread_mutex_init(&te->writing_lock, NULL);
    pthread_cond_init(&te->conn_cond, NULL);
    pthread_mutex_init(&te->peers_lock, NULL);
    pthread_mutex_init(&te->queue_lock, NULL);
    pthread_cond_init(&te->queue_cond, NULL);
    pthread_mutex_init(&te->shm_lock, NULL);

    char bind_host[MC_HOST_MAX], adv_host[MC_HOST_MAX];
    int port = 0;
    int rc = configure(te, config, bind_host, &port);
    if (rc == 0)
        rc = mc_auth_resolve(config->cluster_secret, config->cluster_secret_file, &te->auth);
    if (rc == 0 && mc_etcd_md_is_etcd(te->metadata_url))
        rc = mc_etcd_md_open(te->metadata_url, &te->etcd_md); /* lease + keep-alive thread */
    /* The address the user gave (local_server_name's host; a wildcard means every interface).
     * rdma engines serve tcp peers too. */
    mc_transport_start_args_t args = {config, bind_host, port};
    for (const mc_transport_ops_t *const *t = mc_transport_start_order; rc == 0 && *t; t++)
        rc = (*t)->start ? (*t)->start(te, &args) : 0;
    if (rc != 0) {
        mc_te_destroy(te);
        return rc;
    }
    mc_auth_warn_open_listener(te->auth, "the Transfer Engine", bind_host, te->listen_port);
    mc_net_advertised_host(bind_host, adv_host);
    if (strchr(adv_host, ':'))
        snprintf(te->name, sizeof(te->name), "[%s]:%d", adv_host, te->listen_port);
    else
        snprintf(te->name, sizeof(te->name), "%s:%d", adv_host, te->listen_port);

    te->workers = calloc(te->worker_count, sizeof(*te->workers));
    if (!te->workers) {
        mc_te_destroy(te);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (size_t i = 0; i < te->worker_count; i++) {
        worker_arg_t *arg = malloc(sizeof(*arg));
        if (arg)
            *arg = (worker_arg_t){te, i};
        if (!arg || pthread_create(&te->workers[i], NULL, worker_main, arg) != 0) {
            free(arg);
            te->worker_count = i;
            mc_te_destroy(te);
            return MC_ERR_INTERNAL_ERROR;
        }
    }
    rc = mc_metadata_publish(te);
    if (rc != 0) {
        mc_te_destroy(te);
        return rc;
    }
    MC_INFO("transfer engine ready: segment %s, protocol %s, metadata %s, shm %s, cluster "
            "secret %s",
            te->name, te->protocol, te->metadata_url[0] ? te->metadata_url : "P2PHANDSHAKE",
            te->shm_socket[0] ? "on" : "off", te->auth ? "set" : "none");
    *out = te;
    return 0;
}

void mc_te_destroy(mc_transfer_engine_t *te)
{
    if (!te)
        return;
    if (te->name[0])
        mc_metadata_unpublish(te);
    atomic_store(&te->stopping, 1);
    pthread_mutex_lock(&te->queue_lock);
    pthread_cond_broadcast(&te->queue_cond);
    pthread_mutex_unlock(&te->queue_lock);
    for (size_t i = 0; te->workers && i < te->worker_count; i++)
        pthread_join(te->workers[i], NULL);
    free(te->workers);
    for (size_t i = 0; i < te->peer_count; i++) {
        /* the worker threads that owned the peers' rdma endpoints are gone */
        peer_free(te, te->peers[i], NULL);
    }
    free(te->peers);
    free(te->queue);
    /* Stopped in the reverse of their start order: tcp's server (its handshakes describe rdma's
     * address) before rdma, which also needs every peer closed first. */
    size_t started = 0;
    while (mc_transport_start_order[started])
        started++;
    while (started-- > 0) {
        if (mc_transport_start_order[started]->stop)
            mc_transport_start_order[started]->stop(te);
    }
    mc_registry_destroy(&te->registry);
    mc_fence_fini(te);
    pthread_mutex_destroy(&te->conn_lock);
    pthread_mutex_destroy(&te->writing_lock);
    free(te->writing);
    pthread_cond_destroy(&te->conn_cond);
    pthread_mutex_destroy(&te->peers_lock);
    pthread_mutex_destroy(&te->queue_lock);
    pthread_cond_destroy(&te->queue_cond);
    pthread_mutex_destroy(&te->shm_lock);
    mc_auth_destroy(te->auth);
    mc_etcd_md_close(te->etcd_md); /* revokes the lease: whatever unpublish missed goes too */
    free(te);
}

const mc_auth_t *mc_te_auth(const mc_transfer_engine_t *te)
{
    return te ? te->auth : NULL;
}

int mc_te_timeout_ms(const mc_transfer_engine_t *te)
{
    return te ? te->timeout_ms : MC_TE_DEFAULT_TIMEOUT_MS;
}

const char *mc_te_local_segment_name(const mc_transfer_engine_t *te)
{
    return te ? te->name : "";
}

const char *mc_te_protocol(const mc_transfer_engine_t *te)
{
    return te ? te->protocol : "";
}

int mc_te_get_server_stats(mc_transfer_engine_t *te, mc_te_server_stats_t *out)
{
    if (!te || !out)
        return MC_ERR_INVALID_PARAMS;
    memset(out, 0, sizeof(*out));
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        if ((*t)->get_stats)
            (*t)->get_stats(te, out);
    }
    return 0;
}

int mc_te_set_epoch(mc_transfer_engine_t *te, uint64_t epoch)
{
    if (!te)
        return MC_ERR_INVALID_PARAMS;
    /* The epoch is a rule of the write fence too (same-host writers check it in its page): a
     * change of epoch raises a fence, waited for below. rdma writes carry no epoch; their
     * serving endpoints are replaced when the segment may be handed out anew (a re-mount's
     * UINT64_MAX, or one epoch straight to another). */
    uint64_t old = atomic_load(&te->epoch), gen = 0;
    int rc =
        mc_fence_raise(te, NULL, 0, 1, epoch,
                       epoch == UINT64_MAX || (old != 0 && old != UINT64_MAX && epoch != 0), &gen);
    /*
     * Transfers admitted under the previous epoch hold the registry read lock until their last
     * byte moved; taking the write lock waits for them. Each is bounded by the transfer timeout
     * from its start (before the store above), so once that much time has passed they are over
     * even if new readers keep the lock busy: wait no longer than that, plus a margin.
     */
    struct timespec until;
    uint64_t wait_ms = (uint64_t)te->timeout_ms + MC_TE_EPOCH_BARRIER_SLACK_MS;
    mc_deadline_after_ms(&until, CLOCK_MONOTONIC, wait_ms);
    if (pthread_rwlock_clockwrlock(&te->registry.lock, CLOCK_MONOTONIC, &until) == 0)
        pthread_rwlock_unlock(&te->registry.lock);
    if (rc == 0 && gen)
        rc = mc_fence_wait(te, gen, (int)wait_ms);
    return rc;
}

int mc_te_republish(mc_transfer_engine_t *te)
{
    return te ? mc_metadata_publish(te) : MC_ERR_INVALID_PARAMS;
}

/* ---- memory ----------------------------------------------------------------------------- */

/* Every transport's unmap slot, in table order: the region left the registry. */
static void unmap_region(mc_transfer_engine_t *te, mc_local_region_t *g)
{
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        if ((*t)->unmap)
            (*t)->unmap(te, g);
    }
}

/* Every transport's map slot, in table order; on a failure the ones that mapped it unmap it. */
static int map_region(mc_transfer_engine_t *te, mc_local_region_t *g)
{
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        int rc = (*t)->map ? (*t)->map(te, g) : 0;
        if (rc != 0) {
            for (const mc_transport_ops_t *const *u = te->transports; u != t; u++) {
                if ((*u)->map && (*u)->unmap)
                    (*u)->unmap(te, g);
            }
            return rc;
        }
    }
    return 0;
}

/* Undoes a map_region whose region did not enter the registry: only transports that mapped it
 * hear of it (a transport that maps nothing has nothing to undo). */
static void unmap_unregistered(mc_transfer_engine_t *te, mc_local_region_t *g)
{
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        if ((*t)->map && (*t)->unmap)
            (*t)->unmap(te, g);
    }
}

int mc_te_alloc_segment_memory(mc_transfer_engine_t *te, size_t length, void **addr)
{
    if (!te || !addr || length == 0)
        return MC_ERR_INVALID_PARAMS;
    const mc_transport_ops_t *const *t = te->transports;
    while (*t && !(*t)->alloc)
        t++;
    if (!*t)
        return MC_ERR_NOT_SUPPORTED;
    mc_local_region_t region;
    int rc = (*t)->alloc(te, length, &region);
    if (rc != 0)
        return rc;
    rc = map_region(te, &region); /* rdma engines: peers reach it with UCX as well */
    if (rc == 0) {
        rc = mc_registry_add(&te->registry, &region);
        if (rc != 0)
            unmap_unregistered(te, &region);
    }
    if (rc != 0) {
        munmap((void *)(uintptr_t)region.addr, region.length);
        close(region.memfd);
        return rc;
    }
    *addr = (void *)(uintptr_t)region.addr;
    mc_metadata_publish(te);
    return 0;
}

int mc_te_free_segment_memory(mc_transfer_engine_t *te, void *addr)
{
    if (!te || !addr)
        return MC_ERR_INVALID_PARAMS;
    mc_local_region_t g;
    int rc = mc_registry_remove(&te->registry, (uint64_t)(uintptr_t)addr, &g);
    if (rc != 0)
        return rc;
    if (!g.owned) {
        mc_registry_add(&te->registry, &g); /* not ours to free: put it back */
        return MC_ERR_INVALID_PARAMS;
    }
    unmap_region(te, &g); /* shm: peers drop their mappings; rdma: unmapped */
    munmap(addr, g.length);
    if (g.memfd >= 0)
        close(g.memfd);
    mc_metadata_publish(te);
    return 0;
}

/*
 * 1 when every page of [addr, addr+length) is mapped in this process: msync() fails with ENOMEM
 * for a range with unmapped pages, and MS_ASYNC makes it a lookup of the mappings, no I/O.
 * Registering memory that is not there would make the first transfer into it crash the
 * process (a peer's write lands in it from a serving thread).
 */
static int range_mapped(const void *addr, size_t length)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(page - 1);
    uintptr_t end = (uintptr_t)addr + length;
    if (end < (uintptr_t)addr)
        return 0;
    return msync((void *)start, end - start, MS_ASYNC) == 0;
}

int mc_te_register_memory(mc_transfer_engine_t *te, void *addr, size_t length)
{
    if (!te || !addr || length == 0)
        return MC_ERR_INVALID_PARAMS;
    if (!range_mapped(addr, length)) {
        MC_ERROR("register memory [%p, +%zu): not mapped in this process", addr, length);
        return MC_ERR_INVALID_PARAMS;
    }
    mc_local_region_t g = {(uint64_t)(uintptr_t)addr, length, -1, -1, 0, NULL, NULL, 0};
    int rc = map_region(te, &g);
    if (rc != 0)
        return rc;
    rc = mc_registry_add(&te->registry, &g);
    if (rc != 0) {
        unmap_unregistered(te, &g);
        return rc;
    }
    mc_metadata_publish(te);
    return 0;
}

int mc_te_unregister_memory(mc_transfer_engine_t *te, void *addr)
{
    if (!te || !addr)
        return MC_ERR_INVALID_PARAMS;
    mc_local_region_t g;
    int rc = mc_registry_remove(&te->registry, (uint64_t)(uintptr_t)addr, &g);
    if (rc != 0)
        return rc;
    if (g.owned) {
        mc_registry_add(&te->registry, &g); /* engine-allocated: use mc_te_free_segment_memory */
        return MC_ERR_INVALID_PARAMS;
    }
    unmap_region(te, &g);
    mc_metadata_publish(te);
    return 0;
}

/* ---- segments --------------------------------------------------------------------------- */

mc_peer_t *mc_te_peer(mc_transfer_engine_t *te, mc_segment_id_t id)
{
    mc_peer_t *p = NULL;
    pthread_mutex_lock(&te->peers_lock);
    if (id >= 0 && (size_t)id < te->peer_count)
        p = te->peers[id];
    pthread_mutex_unlock(&te->peers_lock);
    return p;
}

int mc_te_open_segment(mc_transfer_engine_t *te, const char *segment_name, mc_segment_id_t *out)
{
    if (!te || !segment_name || !out)
        return MC_ERR_INVALID_PARAMS;
    char host[MC_HOST_MAX];
    int port;
    if (mc_net_split_endpoint(segment_name, -1, host, &port) != 0 || port <= 0) {
        MC_ERROR("segment name \"%s\" is not host:port", segment_name);
        return MC_ERR_INVALID_PARAMS;
    }
    pthread_mutex_lock(&te->peers_lock);
    for (size_t i = 0; i < te->peer_count; i++) {
        if (!strcmp(te->peers[i]->name, segment_name)) {
            *out = (mc_segment_id_t)i;
            pthread_mutex_unlock(&te->peers_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&te->peers_lock);

    mc_peer_t *p = calloc(1, sizeof(*p));
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    snprintf(p->name, sizeof(p->name), "%s", segment_name);
    snprintf(p->host, sizeof(p->host), "%s", host);
    p->port = port;
    p->shm_sock = -1;
    p->shm_fence_slot = -1;
    p->is_self = !strcmp(segment_name, te->name);
    p->desc_gen = 1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_rwlock_init(&p->shm_rw, NULL);
    int rc = p->is_self ? 0 : mc_metadata_lookup(te, segment_name, &p->desc, 0);
    const mc_transport_ops_t *const *failed = te->transports; /* none opened */
    if (rc == 0 && !p->is_self)
        rc = peer_open(te, p, &failed);
    if (rc != 0) {
        peer_free(te, p, failed);
        return rc;
    }

    pthread_mutex_lock(&te->peers_lock);
    for (size_t i = 0; i < te->peer_count; i++) { /* lost a race with another opener */
        if (!strcmp(te->peers[i]->name, segment_name)) {
            *out = (mc_segment_id_t)i;
            pthread_mutex_unlock(&te->peers_lock);
            peer_free(te, p, NULL); /* never used: no endpoint to close */
            return 0;
        }
    }
    if (te->peer_count == te->peer_capacity) {
        size_t cap = te->peer_capacity ? te->peer_capacity * 2 : 8;
        mc_peer_t **n = realloc(te->peers, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&te->peers_lock);
            peer_free(te, p, NULL);
            return MC_ERR_INTERNAL_ERROR;
        }
        te->peers = n;
        te->peer_capacity = cap;
    }
    te->peers[te->peer_count] = p;
    *out = (mc_segment_id_t)te->peer_count++;
    pthread_mutex_unlock(&te->peers_lock);
    return 0;
}

/* ---- batches ---------------------------------------------------------------------------- */

int mc_te_batch_create(mc_transfer_engine_t *te, size_t capacity, mc_batch_t **out)
{
    if (!te || !out || capacity == 0)
        return MC_ERR_INVALID_PARAMS;
    mc_batch_t *b = calloc(1, sizeof(*b));
    if (!b)
        return MC_ERR_INTERNAL_ERROR;
    b->reqs = calloc(capacity, sizeof(*b->reqs));
    if (!b->reqs) {
        free(b);
        return MC_ERR_INTERNAL_ERROR;
    }
    b->te = te;
    b->capacity = capacity;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    *out = b;
    return 0;
}

static void finish_now(mc_batch_t *b, mc_req_state_t *r, int rc)
{
    atomic_store(&r->error, rc);
    if (rc == 0)
        atomic_store(&r->done_bytes, r->req.length);
    atomic_store(&r->finish_ms, mc_now_ms());
    atomic_store(&r->state, rc ? MC_TRANSFER_FAILED : MC_TRANSFER_COMPLETED);
    pthread_mutex_lock(&b->lock);
    b->outstanding--;
    pthread_mutex_unlock(&b->lock);
}

/* Range check against the peer's descriptor, refreshing it once on a miss (by deadline_ms). */
static int check_remote_range(mc_transfer_engine_t *te, mc_peer_t *peer,
                              const mc_transfer_req_t *req, uint64_t deadline_ms)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&peer->lock);
        int ok = mc_desc_find(&peer->desc, req->target_offset, req->length) != NULL;
        pthread_mutex_unlock(&peer->lock);
        if (ok)
            return 0;
        if (attempt == 0 && mc_peer_refresh(te, peer, deadline_ms) != 0)
            break;
    }
    MC_ERROR("%s [%#llx, +%zu) is outside the registered memory of segment %s",
             req->opcode == MC_TRANSFER_WRITE ? "write" : "read",
             (unsigned long long)req->target_offset, req->length, peer->name);
    return req->opcode == MC_TRANSFER_WRITE ? MC_ERR_INVALID_WRITE : MC_ERR_INVALID_READ;
}

/*
 * One request in the caller's thread: a remote one is first checked against the peer's
 * descriptor and the refused tokens; then the submit slots in table order (local, shm). 0, a
 * negative error, or MC_TRANSPORT_DECLINED when the workers are to move it.
 */
static int submit_in_caller(mc_transfer_engine_t *te, mc_peer_t *peer, const mc_transfer_req_t *req,
                            uint64_t deadline_ms, uint32_t *crc)
{
    if (!peer->is_self) {
        int rc = check_remote_range(te, peer, req, deadline_ms);
        if (rc != 0)
            return rc;
        if (req->opcode == MC_TRANSFER_WRITE && mc_fence_token_refused(te->fence, req->fence_token))
            return MC_ERR_INVALID_WRITE;
    }
    for (const mc_transport_ops_t *const *t = te->transports; *t; t++) {
        int rc = (*t)->submit ? (*t)->submit(te, peer, req, crc) : MC_TRANSPORT_DECLINED;
        if (rc != MC_TRANSPORT_DECLINED)
            return rc;
    }
    return MC_TRANSPORT_DECLINED;
}

int mc_te_submit(mc_batch_t *b, const mc_transfer_req_t *reqs, size_t n)
{
    if (!b || (!reqs && n))
        return MC_ERR_INVALID_PARAMS;
    mc_transfer_engine_t *te = b->te;
    if (n > b->capacity - b->count) {
        MC_ERROR("batch of %zu requests cannot take %zu more", b->capacity, n);
        return MC_ERR_INVALID_PARAMS;
    }
    for (size_t i = 0; i < n; i++) {
        const mc_transfer_req_t *q = &reqs[i];
        if ((q->opcode != MC_TRANSFER_READ && q->opcode != MC_TRANSFER_WRITE) || !q->source ||
            q->length == 0 || !mc_te_peer(te, q->target_id)) {
            MC_ERROR("transfer request %zu is malformed (opcode %d, length %zu, segment %lld)", i,
                     (int)q->opcode, q->length, (long long)q->target_id);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    /* One deadline for the whole call, as upstream's sync calls: the transfer timeout plus 1 ns
     * per byte of all its requests, from now. */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total = total + reqs[i].length >= total ? total + reqs[i].length : UINT64_MAX;
    uint64_t deadline = mc_te_deadline_ms(te, mc_now_ms(), total);
    size_t first = b->count;
    pthread_mutex_lock(&b->lock);
    b->outstanding += n;
    pthread_mutex_unlock(&b->lock);
    for (size_t i = 0; i < n; i++) {
        mc_req_state_t *r = &b->reqs[first + i];
        r->req = reqs[i];
        atomic_store(&r->state, MC_TRANSFER_WAITING);
        atomic_store(&r->error, 0);
        atomic_store(&r->done_bytes, 0);
        atomic_store(&r->finish_ms, 0);
        r->deadline_ms = deadline;
        r->has_crc32c = 0;
        r->crc32c = 0;
    }
    b->count += n;

    int queued = 0;
    for (size_t i = 0; i < n; i++) {
        mc_req_state_t *r = &b->reqs[first + i];
        mc_peer_t *peer = mc_te_peer(te, r->req.target_id);
        uint32_t *crc = r->req.want_crc32c ? &r->crc32c : NULL;
        int rc = submit_in_caller(te, peer, &r->req, deadline, crc);
        r->has_crc32c = crc && rc == 0;
        if (rc != MC_TRANSPORT_DECLINED) {
            finish_now(b, r, rc);
            continue;
        }
        uint64_t nslices = (r->req.length + te->slice_bytes - 1) / te->slice_bytes;
        atomic_store(&r->slices_left, (unsigned)nslices);
        pthread_mutex_lock(&te->queue_lock);
        rc = enqueue_slices_locked(te, b, (uint32_t)(first + i), peer, nslices);
        pthread_mutex_unlock(&te->queue_lock);
        if (rc != 0) {
            finish_now(b, r, rc);
            continue;
        }
        queued++;
    }
    if (queued) {
        pthread_mutex_lock(&te->queue_lock);
        pthread_cond_broadcast(&te->queue_cond);
        pthread_mutex_unlock(&te->queue_lock);
    }
    return 0;
}

int mc_te_get_status(mc_batch_t *b, size_t index, mc_transfer_status_t *status)
{
    if (!b || !status || index >= b->count)
        return MC_ERR_INVALID_PARAMS;
    mc_req_state_t *r = &b->reqs[index];
    status->state = (mc_transfer_state_t)atomic_load(&r->state);
    status->error = atomic_load(&r->error);
    status->transferred_bytes = atomic_load(&r->done_bytes);
    status->finish_ms = status->state == MC_TRANSFER_WAITING ? 0 : atomic_load(&r->finish_ms);
    status->has_crc32c = status->state == MC_TRANSFER_COMPLETED && r->has_crc32c;
    status->crc32c = status->has_crc32c ? r->crc32c : 0;
    return 0;
}

int mc_te_wait(mc_batch_t *b, int timeout_ms)
{
    if (!b)
        return MC_ERR_INVALID_PARAMS;
    struct timespec deadline;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&b->lock);
    while (b->outstanding > 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&b->cond, &b->lock);
        } else if (pthread_cond_timedwait(&b->cond, &b->lock, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    int timed_out = b->outstanding > 0;
    pthread_mutex_unlock(&b->lock);
    if (timed_out)
        return MC_ERR_RPC_TIMEOUT;
    for (size_t i = 0; i < b->count; i++) {
        int e = atomic_load(&b->reqs[i].error);
        if (e)
            return e;
    }
    return 0;
}

void mc_te_batch_free(mc_batch_t *b)
{
    if (!b)
        return;
    mc_te_wait(b, -1);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
    free(b->reqs);
    free(b);
}

int mc_te_transfer_sync(mc_transfer_engine_t *te, const mc_transfer_req_t *reqs, size_t n)
{
    mc_batch_t *b;
    int rc = mc_te_batch_create(te, n ? n : 1, &b);
    if (rc != 0)
        return rc;
    rc = mc_te_submit(b, reqs, n);
    if (rc == 0)
        rc = mc_te_wait(b, -1);
    mc_te_batch_free(b);
    return rc;
}
