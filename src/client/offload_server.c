/*
 * offload_server.c — the owner side and the reader side of local-disk replica reads
 * (offload_server.h).
 *
 * Staging allocator: a sorted array of leases over [0, staging_size), first fit, 4 KiB granules.
 * Few reads are in flight at a time, so a linear scan is the simplest correct choice.
 *
 * Lease invariants (they are what makes a read through the owner exact or an error):
 *   - A lease is born FILLING (no expiry: the owner is reading the file into it) and becomes READY
 *     when the file is in it; its TTL (MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS) runs from then.
 *   - While a lease is in the array no other lease overlaps its range, so its bytes do not change.
 *   - An expired READY lease (a reader that died or stalled between FETCH and RELEASE) is reclaimed
 *     only when a fetch finds no room without it; reclaiming removes it for good.
 *   - Lease ids are never reused (a 64-bit counter seeded from the clock, so not across restarts
 *     either). RELEASE of an id not in the array answers MC_ERR_LEASE_EXPIRED.
 * Hence a RELEASE that answers 0 proves the slot held the file's bytes from the FETCH reply until
 * then; the reader pulls before it releases and discards its bytes when the release fails.
 */
#include "offload_server.h"

#include "failpoint.h"
#include "frame.h"
#include "log.h"
#include "mooncake/errors.h"
#include "net.h"
#include "pb_decode.h"
#include "rpc.h"
#include "store.pb-c.h"
#include "te_shared.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SERVER_BACKLOG 64
#define SERVER_MAX_BODY (64u << 10)
/* Limits (offload_server.h): connections served at once, how long a connection may wait for its
 * next request, and how long one request may take to arrive. */
#define SERVER_MAX_CONNECTIONS 1024
#define SERVER_IDLE_TIMEOUT_MS (600 * 1000)
#define SERVER_FRAME_TIMEOUT_MS (30 * 1000)
#define SERVER_LOG_INTERVAL_MS 1000
#define STAGING_GRANULE 4096
#define STAGING_WAIT_MS 5000

/* expires_ms of a lease the owner is still filling: it cannot expire. */
#define STAGING_FILLING UINT64_MAX

typedef struct staging_lease {
    uint64_t id;
    uint64_t off, len;
    uint64_t expires_ms; /* STAGING_FILLING, or bytes-ready time + ttl_ms */
} staging_lease_t;

typedef struct server_conn {
    struct server_conn *next;
    struct mc_offload_server *server;
    int fd;
    pthread_t thread;
    atomic_int done;
} server_conn_t;

struct mc_offload_server {
    int listen_fd;
    char endpoint[MC_ENDPOINT_MAX];
    mc_transfer_engine_t *te;
    mc_offload_backend_t *backend;
    char *staging;
    uint64_t staging_size;
    uint64_t ttl_ms;

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t freed;
    staging_lease_t *leases; /* sorted by off */
    size_t nleases, lease_cap;
    uint64_t next_lease; /* last id handed out; ids only grow */
    server_conn_t *conns;
    int stopping;

    pthread_t accept_thread;
    atomic_uint_fast64_t served;
    atomic_uint_fast64_t refused, idle_closed, stalled;
    atomic_uint_fast64_t refuse_logged_ms, stall_logged_ms;
    atomic_uint_fast64_t reclaim_logged_ms; /* rate limit of the reclaim warning */
};

/* ---- staging ------------------------------------------------------------------------------ */

/* Reclaims READY leases past their TTL; returns how many. */
static size_t staging_gc_locked(mc_offload_server_t *s, uint64_t now)
{
    size_t kept = 0;
    uint64_t last_id = 0;
    for (size_t i = 0; i < s->nleases; i++) {
        if (s->leases[i].expires_ms > now)
            s->leases[kept++] = s->leases[i];
        else
            last_id = s->leases[i].id;
    }
    size_t reclaimed = s->nleases - kept;
    s->nleases = kept;
    if (reclaimed)
        pthread_cond_broadcast(&s->freed);
    if (reclaimed && mc_log_ratelimit(&s->reclaim_logged_ms, 1000))
        MC_WARN("offload server: %zu staged read(s) (last id %" PRIu64
                ") not released within %" PRIu64
                " ms of being ready; reclaimed (their readers will fail with LEASE_EXPIRED)",
                reclaimed, last_id, s->ttl_ms);
    return reclaimed;
}

/* First fit of a FILLING lease; 0 with *lease filled, or -1 when no gap is large enough now. */
static int staging_try_alloc_locked(mc_offload_server_t *s, uint64_t len, staging_lease_t *lease)
{
    if (s->nleases == s->lease_cap) {
        size_t cap = s->lease_cap ? s->lease_cap * 2 : 16;
        staging_lease_t *v = realloc(s->leases, cap * sizeof(*v));
        if (!v)
            return -1;
        s->leases = v;
        s->lease_cap = cap;
    }
    uint64_t at = 0;
    size_t i = 0;
    for (; i <= s->nleases; i++) {
        uint64_t end = i < s->nleases ? s->leases[i].off : s->staging_size;
        if (end - at >= len)
            break;
        if (i < s->nleases)
            at = s->leases[i].off + s->leases[i].len;
    }
    if (i > s->nleases)
        return -1;
    memmove(&s->leases[i + 1], &s->leases[i], (s->nleases - i) * sizeof(*s->leases));
    s->leases[i] = (staging_lease_t){++s->next_lease, at, len, STAGING_FILLING};
    s->nleases++;
    *lease = s->leases[i];
    return 0;
}

static int staging_alloc(mc_offload_server_t *s, uint64_t size, staging_lease_t *lease)
{
    uint64_t len = (size + STAGING_GRANULE - 1) / STAGING_GRANULE * STAGING_GRANULE;
    if (len > s->staging_size)
        return MC_ERR_BUFFER_OVERFLOW;
    uint64_t deadline = mc_now_ms() + STAGING_WAIT_MS;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    for (;;) {
        uint64_t now = mc_now_ms();
        if (staging_try_alloc_locked(s, len, lease) == 0)
            break;
        /* Expired leases give their room only to a fetch that needs it. */
        if (staging_gc_locked(s, now) > 0 && staging_try_alloc_locked(s, len, lease) == 0)
            break;
        if (now >= deadline || s->stopping) {
            rc = MC_ERR_RPC_TIMEOUT;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->freed, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* The file is in the lease's range: its TTL starts now. */
static void staging_mark_ready(mc_offload_server_t *s, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nleases; i++) {
        if (s->leases[i].id == id) {
            s->leases[i].expires_ms = mc_now_ms() + s->ttl_ms;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

/* 0, or MC_ERR_LEASE_EXPIRED when the lease was reclaimed (or never existed). */
static int staging_release(mc_offload_server_t *s, uint64_t id)
{
    int rc = MC_ERR_LEASE_EXPIRED;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nleases; i++) {
        if (s->leases[i].id == id) {
            memmove(&s->leases[i], &s->leases[i + 1], (s->nleases - i - 1) * sizeof(*s->leases));
            s->nleases--;
            pthread_cond_broadcast(&s->freed);
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- requests ----------------------------------------------------------------------------- */

static int send_reply(int fd, uint16_t opcode, uint64_t id, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(MC_FRAME_HEADER_SIZE + len);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    mc_frame_encode((uint16_t)(opcode | MC_RPC_REPLY), id, (uint32_t)len, 0, buf);
    protobuf_c_message_pack(msg, buf + MC_FRAME_HEADER_SIZE);
    int rc = mc_net_send_all(fd, buf, MC_FRAME_HEADER_SIZE + len);
    free(buf);
    return rc;
}

static void handle_fetch(mc_offload_server_t *s, const Mc__FetchRequest *req,
                         Mc__FetchResponse *resp)
{
    staging_lease_t lease;
    resp->code = staging_alloc(s, req->size, &lease);
    if (resp->code != 0)
        return;
    resp->code = mc_offload_backend_read(s->backend, req->key, req->version, s->staging + lease.off,
                                         req->size);
    if (resp->code != 0) {
        MC_WARN("offload server: read of %.64s (version %016" PRIx64 ") failed: %s", req->key,
                req->version, mc_error_name(resp->code));
        staging_release(s, lease.id);
        return;
    }
    staging_mark_ready(s, lease.id);
    resp->segment_name = (char *)mc_te_local_segment_name(s->te);
    resp->address = (uint64_t)(uintptr_t)(s->staging + lease.off);
    resp->lease_id = lease.id;
    atomic_fetch_add(&s->served, 1);
}

/* Receives one request frame: waits up to the idle timeout for its first byte, then the whole
 * frame must arrive within the frame timeout. 0 and *body (malloc'd), or -1 to close. */
static int recv_request(mc_offload_server_t *s, int fd, mc_frame_header_t *h, uint8_t **body)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, SERVER_IDLE_TIMEOUT_MS)) < 0 && errno == EINTR)
        ;
    if (n == 0)
        atomic_fetch_add(&s->idle_closed, 1);
    if (n <= 0)
        return -1;
    uint64_t deadline = mc_now_ms() + SERVER_FRAME_TIMEOUT_MS;
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    int rc = mc_net_recv_all_by(fd, raw, sizeof(raw), deadline);
    if (rc == 0 && mc_frame_decode(raw, SERVER_MAX_BODY, h) != 0)
        return -1;
    *body = rc == 0 ? malloc(h->body_len ? h->body_len : 1) : NULL;
    if (rc == 0 && !*body)
        return -1;
    if (rc == 0)
        rc = mc_net_recv_all_by(fd, *body, h->body_len, deadline);
    if (rc == 0)
        return 0;
    if (errno == ETIMEDOUT) {
        atomic_fetch_add(&s->stalled, 1);
        if (mc_log_ratelimit(&s->stall_logged_ms, SERVER_LOG_INTERVAL_MS))
            MC_WARN("offload server %s: closing a connection whose request did not arrive within "
                    "%d ms",
                    s->endpoint, SERVER_FRAME_TIMEOUT_MS);
    }
    free(*body);
    *body = NULL;
    return -1;
}

/* One request; returns 0 to keep the connection, -1 to close it. */
static int serve_one(mc_offload_server_t *s, int fd)
{
    mc_frame_header_t h;
    uint8_t *body = NULL;
    if (recv_request(s, fd, &h, &body) != 0)
        return -1;
    int rc = -1;
    if (h.opcode == MC_RPC_OFFLOAD_FETCH) {
        Mc__FetchRequest *req = NULL;
        if (mc_pb_decode(&mc__fetch_request__descriptor, body, h.body_len,
                         (ProtobufCMessage **)&req) == 0) {
            Mc__FetchResponse resp = MC__FETCH_RESPONSE__INIT;
            handle_fetch(s, req, &resp);
            rc = send_reply(fd, h.opcode, h.request_id, &resp.base) == 0 ? 0 : -1;
            if (rc != 0 && resp.code == 0)
                staging_release(s, resp.lease_id);
            mc__fetch_request__free_unpacked(req, NULL);
        }
    } else if (h.opcode == MC_RPC_OFFLOAD_RELEASE) {
        Mc__ReleaseRequest *req = NULL;
        if (mc_pb_decode(&mc__release_request__descriptor, body, h.body_len,
                         (ProtobufCMessage **)&req) == 0) {
            Mc__CodesResponse resp = MC__CODES_RESPONSE__INIT;
            resp.code = staging_release(s, req->lease_id);
            rc = send_reply(fd, h.opcode, h.request_id, &resp.base) == 0 ? 0 : -1;
            mc__release_request__free_unpacked(req, NULL);
        }
    } else if (h.opcode == MC_AUTH_OP_HELLO) { /* a reader with a secret; this server has none */
        uint8_t *why;
        size_t wlen;
        if (mc_auth_result_body(MC_ERR_NOT_SUPPORTED, "this offload server has no cluster secret",
                                &why, &wlen) == 0) {
            uint8_t hdr[MC_FRAME_HEADER_SIZE];
            mc_frame_encode(MC_AUTH_OP_RESULT, h.request_id, (uint32_t)wlen, 0, hdr);
            if (mc_net_send_all(fd, hdr, sizeof(hdr)) == 0 && mc_net_send_all(fd, why, wlen) == 0)
                rc = 0;
            free(why);
        }
    } else {
        MC_WARN("offload server: unknown opcode %u; closing the connection", h.opcode);
    }
    free(body);
    return rc;
}

static void *conn_main(void *arg)
{
    server_conn_t *c = arg;
    const mc_auth_t *auth = mc_te_auth(c->server->te);
    /* With a secret, nothing is served before the reader proved it (wire/auth.h). */
    if (!auth || mc_auth_server(auth, c->fd, "offload", "an offload reader",
                                mc_now_ms() + MC_AUTH_TIMEOUT_MS) == 0)
        while (serve_one(c->server, c->fd) == 0)
            ;
    atomic_store(&c->done, 1);
    return NULL;
}

/* Joins and frees finished connection threads (lock held; they no longer take it). */
static void reap_locked(mc_offload_server_t *s)
{
    for (server_conn_t **pp = &s->conns; *pp;) {
        server_conn_t *c = *pp;
        if (!atomic_load(&c->done)) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        shutdown(c->fd, SHUT_RDWR);
        pthread_join(c->thread, NULL);
        close(c->fd);
        free(c);
    }
}

static void *accept_main(void *arg)
{
    mc_offload_server_t *s = arg;
    for (;;) {
        int fd = accept(s->listen_fd, NULL, NULL);
        pthread_mutex_lock(&s->lock);
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        if (stopping) {
            if (fd >= 0)
                close(fd);
            break;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
                if (errno == EMFILE || errno == ENFILE)
                    usleep(10000);
                continue;
            }
            MC_ERROR("offload server %s: accept failed: %s", s->endpoint, strerror(errno));
            break;
        }
        mc_net_tune_socket(fd);
        mc_net_set_timeouts(fd, SERVER_FRAME_TIMEOUT_MS); /* replies: a reader that stopped */
        server_conn_t *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->server = s;
        c->fd = fd;
        pthread_mutex_lock(&s->lock);
        reap_locked(s);
        size_t open = 0;
        for (server_conn_t *e = s->conns; e; e = e->next)
            open++;
        if (open >= SERVER_MAX_CONNECTIONS) {
            pthread_mutex_unlock(&s->lock);
            uint64_t n = atomic_fetch_add(&s->refused, 1) + 1; /* before the close */
            close(fd);
            free(c);
            if (mc_log_ratelimit(&s->refuse_logged_ms, SERVER_LOG_INTERVAL_MS))
                MC_WARN("offload server %s: %d connections are open, the limit; refusing new "
                        "ones (%llu refused so far)",
                        s->endpoint, SERVER_MAX_CONNECTIONS, (unsigned long long)n);
            continue;
        }
        if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
            close(fd);
            free(c);
        } else {
            c->next = s->conns;
            s->conns = c;
        }
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

int mc_offload_server_start(const char *host, mc_transfer_engine_t *te,
                            mc_offload_backend_t *backend, uint64_t staging_bytes,
                            uint64_t staging_ttl_ms, mc_offload_server_t **out)
{
    *out = NULL;
    mc_offload_server_t *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    s->te = te;
    s->backend = backend;
    s->ttl_ms = staging_ttl_ms;
    s->staging_size = staging_bytes / STAGING_GRANULE * STAGING_GRANULE;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->freed, NULL);
    /* Lease ids unique across restarts too: a reader of a previous incarnation cannot release. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    s->next_lease = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    void *mem = NULL;
    int rc = mc_te_alloc_segment_memory(te, s->staging_size, &mem);
    if (rc != 0) {
        MC_ERROR("offload server: cannot allocate %" PRIu64 " bytes of staging: %s",
                 s->staging_size, mc_error_name(rc));
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->freed);
        free(s);
        return rc;
    }
    s->staging = mem;
    int port = 0;
    s->listen_fd = mc_net_listen_tcp(host, 0, SERVER_BACKLOG, &port);
    if (s->listen_fd < 0) {
        rc = s->listen_fd;
        mc_te_free_segment_memory(te, mem);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->freed);
        free(s);
        return rc;
    }
    mc_auth_warn_open_listener(mc_te_auth(te), "the offload fetch server", host, port);
    char adv[MC_HOST_MAX];
    mc_net_advertised_host(host, adv);
    snprintf(s->endpoint, sizeof(s->endpoint), strchr(adv, ':') ? "[%s]:%d" : "%s:%d", adv, port);
    if (pthread_create(&s->accept_thread, NULL, accept_main, s) != 0) {
        close(s->listen_fd);
        mc_te_free_segment_memory(te, mem);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->freed);
        free(s);
        return MC_ERR_INTERNAL_ERROR;
    }
    MC_INFO("offload server: serving local-disk reads at %s (%" PRIu64 " bytes of staging)",
            s->endpoint, s->staging_size);
    *out = s;
    return 0;
}

const char *mc_offload_server_endpoint(const mc_offload_server_t *s)
{
    return s->endpoint;
}

uint64_t mc_offload_server_served(const mc_offload_server_t *s)
{
    return atomic_load(&s->served);
}

void mc_offload_server_get_stats(mc_offload_server_t *s, mc_offload_server_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    out->served = atomic_load(&s->served);
    out->connections_refused = atomic_load(&s->refused);
    out->connections_idle_closed = atomic_load(&s->idle_closed);
    out->connections_stalled = atomic_load(&s->stalled);
}

void mc_offload_server_stop(mc_offload_server_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->freed);
    pthread_mutex_unlock(&s->lock);
    shutdown(s->listen_fd, SHUT_RDWR);
    pthread_join(s->accept_thread, NULL);
    close(s->listen_fd);
    /* Connection threads may wait on the lock (staging): join them without holding it. */
    pthread_mutex_lock(&s->lock);
    server_conn_t *conns = s->conns;
    s->conns = NULL;
    pthread_mutex_unlock(&s->lock);
    while (conns) {
        server_conn_t *c = conns;
        conns = c->next;
        shutdown(c->fd, SHUT_RDWR);
        pthread_join(c->thread, NULL);
        close(c->fd);
        free(c);
    }
    mc_te_free_segment_memory(s->te, s->staging);
    free(s->leases);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->freed);
    free(s);
}

/* ---- reader side -------------------------------------------------------------------------- */

typedef struct peer {
    struct peer *next;
    char endpoint[MC_ENDPOINT_MAX];
    mc_rpc_client_t *rpc;
} peer_t;

struct mc_offload_peers {
    pthread_mutex_t lock;
    peer_t *head;
};

int mc_offload_peers_create(mc_offload_peers_t **out)
{
    mc_offload_peers_t *p = calloc(1, sizeof(*p));
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    pthread_mutex_init(&p->lock, NULL);
    *out = p;
    return 0;
}

void mc_offload_peers_destroy(mc_offload_peers_t *p)
{
    if (!p)
        return;
    while (p->head) {
        peer_t *n = p->head->next;
        mc_rpc_client_destroy(p->head->rpc);
        free(p->head);
        p->head = n;
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The cached RPC client of an owner (peers live until the cache is destroyed). */
static mc_rpc_client_t *peer_rpc(mc_offload_peers_t *p, mc_transfer_engine_t *te,
                                 const char *endpoint)
{
    pthread_mutex_lock(&p->lock);
    peer_t *e = p->head;
    while (e && strcmp(e->endpoint, endpoint) != 0)
        e = e->next;
    if (!e && strlen(endpoint) < sizeof(e->endpoint)) {
        e = calloc(1, sizeof(*e));
        /* The owner reads the file and stages it within the transfer timeout, as any transfer
         * from it would have to complete: a stalled owner fails the read as quickly. */
        if (e && mc_rpc_client_create(endpoint, mc_te_timeout_ms(te), &e->rpc) == 0) {
            mc_rpc_client_set_auth(e->rpc, mc_te_auth(te), "offload");
            snprintf(e->endpoint, sizeof(e->endpoint), "%s", endpoint);
            e->next = p->head;
            p->head = e;
        } else {
            free(e);
            e = NULL;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return e ? e->rpc : NULL;
}

/*
 * RELEASE of a staged read: 0 only when the owner still held the lease, which proves the staged
 * bytes did not change since the FETCH reply. Anything else (reclaimed, owner unreachable) is
 * an error: the pulled bytes cannot be trusted.
 */
static int release(mc_rpc_client_t *rpc, uint64_t lease_id)
{
    Mc__ReleaseRequest req = MC__RELEASE_REQUEST__INIT;
    req.lease_id = lease_id;
    Mc__CodesResponse *resp = NULL;
    int rc = mc_rpc_call_pb(rpc, MC_RPC_OFFLOAD_RELEASE, &req.base, &mc__codes_response__descriptor,
                            (ProtobufCMessage **)&resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    mc__codes_response__free_unpacked(resp, NULL);
    return rc;
}

/* Rate limit of the reader's "reclaimed before we released it" warning. */
static atomic_uint_fast64_t expired_logged_ms;

int mc_offload_fetch(mc_offload_peers_t *p, mc_transfer_engine_t *te, const char *endpoint,
                     const char *key, uint64_t version, void *buf, uint64_t size)
{
    mc_rpc_client_t *rpc = peer_rpc(p, te, endpoint);
    if (!rpc)
        return MC_ERR_INVALID_PARAMS;
    Mc__FetchRequest req = MC__FETCH_REQUEST__INIT;
    req.key = (char *)key;
    req.version = version;
    req.size = size;
    Mc__FetchResponse *resp = NULL;
    int rc = mc_rpc_call_pb(rpc, MC_RPC_OFFLOAD_FETCH, &req.base, &mc__fetch_response__descriptor,
                            (ProtobufCMessage **)&resp);
    if (rc != 0)
        return rc;
    rc = resp->code;
    if (rc == 0) {
        mc_segment_id_t seg;
        rc = mc_te_open_segment(te, resp->segment_name, &seg);
        mc_failpoint("offload.fetch.before_pull");
        if (rc == 0) {
            mc_transfer_req_t t = {MC_TRANSFER_READ, buf, seg, resp->address, size};
            rc = mc_te_transfer_sync(te, &t, 1);
        }
        int rel = release(rpc, resp->lease_id);
        if (rc == 0 && rel != 0) {
            /* The slot may have held another object's bytes during the pull: discard them. */
            if (rel == MC_ERR_LEASE_EXPIRED && mc_log_ratelimit(&expired_logged_ms, 1000))
                MC_WARN("offload read of %.64s: the owner %s reclaimed its staged copy before we "
                        "released it (stalled past MOONCAKE_OFFLOAD_CLIENT_BUFFER_GC_TTL_MS)",
                        key, endpoint);
            rc = rel;
        }
    }
    mc__fetch_response__free_unpacked(resp, NULL);
    return rc;
}
