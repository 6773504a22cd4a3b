/*
 * rpc_client.c — blocking request/response calls to one RPC server, over a pool of connections
 * (rpc.h). Each call borrows an idle connection or opens one, sends one frame, reads one reply
 * frame, and returns the connection to the pool only after a clean exchange.
 *
 * Servers close connections idle too long (the master's --rpc_conn_timeout_seconds). A pooled
 * connection is therefore checked before reuse: one the server closed (readable: its FIN, or
 * any unexpected byte; or hung up) is dropped for the next, so a call never starts on a
 * connection the server already gave up. The one retry on a fresh connection covers a close
 * that races the check (the server closes an idle connection only when no request of it has
 * arrived, so the request was not executed).
 *
 * A client that follows an elected master (mc_rpc_client_set_resolver) asks its resolver for the
 * leader's address before its first connection and after a call fails in transport (refused,
 * reset, timed out): when the address changed, the pool is emptied and the call is retried once
 * at the new address. A master that is not (or no longer) the leader closes the connection
 * without executing the request. But a leader may execute a request, commit it and die before
 * its answer leaves: the retry then runs it a second time at the new leader, and
 * mc_rpc_call_ex says so (its caller turns a definite error of that second run into "outcome
 * unknown", master_client.c).
 *
 * Waiting for a reply: a thread that blocks in recv() right after sending pays a wake-up when the
 * reply comes (on a VM, an inter-processor interrupt and a halted vCPU woken: tens of µs, as much
 * as the master's own work on a small request). So a call first polls its socket without blocking
 * for up to MC_RPC_SPIN_US µs (default MC_RPC_DEFAULT_SPIN_US) and blocks only if the reply has
 * not come by then. Spinning takes a CPU, so it is done only where it pays: by one call at a time
 * per process, only while no other call of the process is in flight (with several lanes busy the
 * CPUs have other work and the wake-ups overlap), and not after replies keep missing the window
 * (e.g. a master that waits for an etcd commit): after MC_RPC_SPIN_MISSES misses in a row, only one
 * call in MC_RPC_SPIN_PROBE spins, until one hits again. No call spins while more threads are
 * runnable than the host has CPUs (mc_cpus_contended): the spin would only delay them, and a
 * spinner's used-up time slice delays its own next turn. MC_RPC_SPIN_US=0 turns it off.
 */
#include "rpc.h"

#include "auth.h"
#include "frame.h"
#include "log.h"
#include "mooncake/errors.h"
#include "net.h"
#include "parse.h"
#include "pb_decode.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MC_RPC_CONNECT_TIMEOUT_MS 3000
#define MC_RPC_MAX_IDLE 32
#define MC_RPC_DEFAULT_SPIN_US 50
#define MC_RPC_MAX_SPIN_US 1000
#define MC_RPC_SPIN_MISSES 8 /* misses in a row before spinning only as a probe */
#define MC_RPC_SPIN_PROBE 64 /* then one call in this many spins */

/* Process-wide state of the reply spin (see the comment atop). */
static struct {
    pthread_once_t once;
    uint64_t budget_ns;   /* 0: off */
    atomic_int in_flight; /* calls between send and reply, all clients of the process */
    atomic_int spinning;  /* 1 while one call spins */
    atomic_uint misses;   /* in a row */
    atomic_uint probe;
} g_spin = {.once = PTHREAD_ONCE_INIT};

struct mc_rpc_client {
    char host[MC_HOST_MAX]; /* under lock once a resolver is set; "" = not resolved yet */
    int port;
    uint64_t generation; /* under lock: +1 at each change of address (pooled fds are per address) */
    int *busy;           /* under lock, with a resolver: connections with a call in flight */
    size_t nbusy, busy_cap;
    mc_rpc_resolve_fn resolve;
    void *resolve_arg;
    int timeout_ms;
    pthread_mutex_t lock;
    int idle[MC_RPC_MAX_IDLE];
    size_t idle_count;
    atomic_uint_fast64_t next_id;
    const mc_auth_t *auth; /* borrowed; NULL: no cluster secret */
    const char *service;   /* static string naming the server kind for the handshake */
};

int mc_rpc_client_create(const char *address, int timeout_ms, mc_rpc_client_t **out)
{
    mc_rpc_client_t *c = calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_INTERNAL_ERROR;
    if (mc_net_split_endpoint(address, -1, c->host, &c->port) != 0 || c->port <= 0) {
        MC_ERROR("master address \"%s\" is not host:port", address ? address : "");
        free(c);
        return MC_ERR_INVALID_PARAMS;
    }
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : MC_RPC_DEFAULT_TIMEOUT_MS;
    pthread_mutex_init(&c->lock, NULL);
    atomic_init(&c->next_id, 1);
    *out = c;
    return 0;
}

int mc_rpc_client_create_resolved(mc_rpc_resolve_fn resolve, void *arg, int timeout_ms,
                                  mc_rpc_client_t **out)
{
    if (!resolve || !out)
        return MC_ERR_INVALID_PARAMS;
    mc_rpc_client_t *c = calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_INTERNAL_ERROR;
    c->resolve = resolve;
    c->resolve_arg = arg;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : MC_RPC_DEFAULT_TIMEOUT_MS;
    pthread_mutex_init(&c->lock, NULL);
    atomic_init(&c->next_id, 1);
    *out = c;
    return 0;
}

/*
 * Asks the resolver for the current address. 1 when it differs from the one in use (the pool is
 * then emptied and later connections go to the new one), 0 when unchanged, a negative code when
 * the resolver failed (no leader known) or gave something that is not host:port.
 */
static int re_resolve(mc_rpc_client_t *c)
{
    char addr[MC_ENDPOINT_MAX], host[MC_HOST_MAX];
    int port = 0;
    int rc = c->resolve(c->resolve_arg, addr, sizeof(addr));
    if (rc != 0)
        return rc;
    if (mc_net_split_endpoint(addr, -1, host, &port) != 0 || port <= 0) {
        MC_WARN("the elected master's address \"%s\" is not host:port", addr);
        return MC_ERR_RPC_FAIL;
    }
    int changed = 0;
    int stale[MC_RPC_MAX_IDLE];
    size_t nstale = 0;
    pthread_mutex_lock(&c->lock);
    if (strcmp(host, c->host) != 0 || port != c->port) {
        snprintf(c->host, sizeof(c->host), "%s", host);
        c->port = port;
        c->generation++;
        memcpy(stale, c->idle, c->idle_count * sizeof(int));
        nstale = c->idle_count;
        c->idle_count = 0;
        changed = 1;
        /* Calls waiting on the old leader (stalled, or cut off) fail now and are retried at the
         * new one: it never executes a request it does not answer, the old one no longer
         * answers (its serving deadline), so nothing runs twice. */
        for (size_t i = 0; i < c->nbusy; i++)
            shutdown(c->busy[i], SHUT_RDWR);
    }
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < nstale; i++)
        close(stale[i]);
    if (changed)
        MC_INFO("following the elected master at %s:%d", host, port);
    return changed;
}

int mc_rpc_client_address(mc_rpc_client_t *c, char *out, size_t cap)
{
    pthread_mutex_lock(&c->lock);
    int rc = c->host[0] ? 0 : MC_ERR_RPC_FAIL;
    if (rc == 0)
        snprintf(out, cap, "%s:%d", c->host, c->port);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int mc_rpc_client_follow(mc_rpc_client_t *c)
{
    return c->resolve ? re_resolve(c) : 0;
}

void mc_rpc_client_set_auth(mc_rpc_client_t *c, const mc_auth_t *auth, const char *service)
{
    c->auth = auth;
    c->service = service;
}

void mc_rpc_client_reset(mc_rpc_client_t *c)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->idle_count; i++)
        close(c->idle[i]);
    c->idle_count = 0;
    pthread_mutex_unlock(&c->lock);
}

void mc_rpc_client_destroy(mc_rpc_client_t *c)
{
    if (!c)
        return;
    mc_rpc_client_reset(c);
    free(c->busy);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* 1 when an idle pooled connection is still usable: nothing to read (no FIN), not hung up. */
static int idle_usable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) == 0;
}

/* A connection to the current address; *gen = the address generation it belongs to. */
static int borrow_gen(mc_rpc_client_t *c, uint64_t *gen)
{
    if (c->resolve) {
        pthread_mutex_lock(&c->lock);
        int unresolved = !c->host[0];
        pthread_mutex_unlock(&c->lock);
        if (unresolved) {
            int rc = re_resolve(c);
            if (rc < 0)
                return MC_ERR_RPC_FAIL;
        }
    }
    char host[MC_HOST_MAX];
    int port;
    pthread_mutex_lock(&c->lock);
    *gen = c->generation;
    while (c->idle_count > 0) {
        int fd = c->idle[--c->idle_count];
        if (idle_usable(fd)) {
            pthread_mutex_unlock(&c->lock);
            return fd;
        }
        close(fd); /* closed by the server while idle */
    }
    memcpy(host, c->host, sizeof(host));
    port = c->port;
    pthread_mutex_unlock(&c->lock);
    int fd = mc_net_connect_tcp(host, port, MC_RPC_CONNECT_TIMEOUT_MS);
    if (fd < 0)
        return fd;
    mc_net_set_timeouts(fd, c->timeout_ms);
    if (c->auth) {
        char peer[MC_ENDPOINT_MAX];
        snprintf(peer, sizeof(peer), "%s:%d", host, port);
        int rc =
            mc_auth_client(c->auth, fd, c->service, peer, mc_now_ms() + (uint64_t)c->timeout_ms);
        if (rc != 0) {
            close(fd);
            return rc;
        }
        mc_net_set_timeouts(fd, c->timeout_ms); /* the handshake armed its own deadlines */
    }
    return fd;
}

/* Records fd as carrying a call (so a change of leader can cut it short). 1 when recorded; 0
 * when the address already changed since the borrow (then the call fails at once) or no
 * memory (then it is not cut short, only timed out). */
static int busy_add(mc_rpc_client_t *c, int fd, uint64_t gen)
{
    pthread_mutex_lock(&c->lock);
    if (gen != c->generation) {
        pthread_mutex_unlock(&c->lock);
        shutdown(fd, SHUT_RDWR);
        return 0;
    }
    if (c->nbusy == c->busy_cap) {
        size_t cap = c->busy_cap ? 2 * c->busy_cap : 16;
        int *b = realloc(c->busy, cap * sizeof(*b));
        if (!b) {
            pthread_mutex_unlock(&c->lock);
            return 0;
        }
        c->busy = b;
        c->busy_cap = cap;
    }
    c->busy[c->nbusy++] = fd;
    pthread_mutex_unlock(&c->lock);
    return 1;
}

static void busy_remove(mc_rpc_client_t *c, int fd)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nbusy; i++) {
        if (c->busy[i] == fd) {
            c->busy[i] = c->busy[--c->nbusy];
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
}

/* Pools fd unless the address changed since it was borrowed (generation gen). */
static void give_back_gen(mc_rpc_client_t *c, int fd, uint64_t gen)
{
    pthread_mutex_lock(&c->lock);
    if (gen == c->generation && c->idle_count < MC_RPC_MAX_IDLE) {
        c->idle[c->idle_count++] = fd;
        fd = -1;
    }
    pthread_mutex_unlock(&c->lock);
    if (fd >= 0)
        close(fd);
}

static void spin_init(void)
{
    uint64_t us = MC_RPC_DEFAULT_SPIN_US;
    const char *e = getenv("MC_RPC_SPIN_US");
    if (e && *e) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(e, &end, 10);
        if (errno || !end || *end || v > MC_RPC_MAX_SPIN_US)
            MC_WARN("MC_RPC_SPIN_US=%s is not a number of microseconds in [0, %d]; using %d", e,
                    MC_RPC_MAX_SPIN_US, MC_RPC_DEFAULT_SPIN_US);
        else
            us = v;
    }
    g_spin.budget_ns = us * 1000;
}

/* Polls fd without blocking until a whole frame header is readable, the peer closed or failed,
 * or the spin budget is spent; reads nothing (the caller's recv does). See the comment atop. */
static void spin_for_reply(int fd)
{
    pthread_once(&g_spin.once, spin_init);
    if (g_spin.budget_ns == 0 || atomic_load(&g_spin.in_flight) != 1 || mc_cpus_contended())
        return;
    if (atomic_load(&g_spin.misses) >= MC_RPC_SPIN_MISSES &&
        atomic_fetch_add(&g_spin.probe, 1) % MC_RPC_SPIN_PROBE != 0)
        return;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&g_spin.spinning, &idle, 1))
        return;
    uint64_t end = mc_now_ns() + g_spin.budget_ns;
    uint8_t peek[MC_FRAME_HEADER_SIZE];
    int hit = 0;
    for (;;) {
        ssize_t n = recv(fd, peek, sizeof(peek), MSG_DONTWAIT | MSG_PEEK);
        if (n >= (ssize_t)sizeof(peek) || n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            hit = 1; /* a reply, or an end the blocking recv reports at once */
            break;
        }
        if (mc_now_ns() >= end)
            break;
        sched_yield(); /* another runnable thread on this CPU goes first */
    }
    atomic_store(&g_spin.spinning, 0);
    if (hit)
        atomic_store(&g_spin.misses, 0);
    else
        atomic_fetch_add(&g_spin.misses, 1);
}

static int exchange_once(mc_rpc_client_t *c, int fd, uint16_t opcode, const uint8_t *body,
                         size_t len, uint8_t **reply, size_t *reply_len, int *sent_all);

/* *sent_all: the whole request left (the server may have executed it). */
static int exchange(mc_rpc_client_t *c, int fd, uint16_t opcode, const uint8_t *body, size_t len,
                    uint8_t **reply, size_t *reply_len, int *sent_all)
{
    atomic_fetch_add(&g_spin.in_flight, 1);
    *sent_all = 0;
    int rc = exchange_once(c, fd, opcode, body, len, reply, reply_len, sent_all);
    atomic_fetch_sub(&g_spin.in_flight, 1);
    return rc;
}

static int exchange_once(mc_rpc_client_t *c, int fd, uint16_t opcode, const uint8_t *body,
                         size_t len, uint8_t **reply, size_t *reply_len, int *sent_all)
{
    uint64_t id = atomic_fetch_add(&c->next_id, 1);
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(opcode, id, (uint32_t)len, 0, hdr);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)body, len}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    size_t total = sizeof(hdr) + len, sent = 0;
    while (sent < total) {
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? MC_ERR_RPC_TIMEOUT : MC_ERR_RPC_FAIL;
        }
        sent += (size_t)n;
        if (sent < total) { /* rare partial send: finish the rest plainly */
            size_t off = sent;
            if (off < sizeof(hdr)) {
                if (mc_net_send_all(fd, hdr + off, sizeof(hdr) - off) != 0)
                    return MC_ERR_RPC_FAIL;
                off = sizeof(hdr);
            }
            if (mc_net_send_all(fd, body + (off - sizeof(hdr)), len - (off - sizeof(hdr))) != 0)
                return MC_ERR_RPC_FAIL;
            break;
        }
    }
    *sent_all = 1;
    spin_for_reply(fd);
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    if (mc_net_recv_all(fd, raw, sizeof(raw)) != 0)
        return errno == EAGAIN ? MC_ERR_RPC_TIMEOUT : MC_ERR_RPC_FAIL;
    mc_frame_header_t h;
    if (mc_frame_decode(raw, MC_RPC_MAX_BODY, &h) == 0 && h.opcode == MC_AUTH_OP_RESULT &&
        h.body_len <= MC_AUTH_MAX_BODY) {
        /* The server has a cluster secret and this client none (or another): its one answer. */
        uint8_t why[MC_AUTH_MAX_BODY];
        if (mc_net_recv_all(fd, why, h.body_len) != 0)
            h.body_len = 0;
        char peer[MC_ENDPOINT_MAX];
        if (mc_rpc_client_address(c, peer, sizeof(peer)) != 0)
            snprintf(peer, sizeof(peer), "?");
        return mc_auth_refused(peer, why, h.body_len);
    }
    if (mc_frame_decode(raw, MC_RPC_MAX_BODY, &h) != 0 || h.request_id != id ||
        h.opcode != (uint16_t)(opcode | MC_RPC_REPLY))
        return MC_ERR_DESERIALIZE_FAIL;
    uint8_t *buf = malloc(h.body_len ? h.body_len : 1);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    if (mc_net_recv_all(fd, buf, h.body_len) != 0) {
        free(buf);
        return errno == EAGAIN ? MC_ERR_RPC_TIMEOUT : MC_ERR_RPC_FAIL;
    }
    *reply = buf;
    *reply_len = h.body_len;
    return 0;
}

int mc_rpc_client_local_host(mc_rpc_client_t *c, char *out, size_t cap)
{
    uint64_t gen;
    int fd = borrow_gen(c, &gen);
    if (fd < 0)
        return fd;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int rc = getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 ? 0 : MC_ERR_RPC_FAIL;
    if (rc == 0) {
        const void *a = ss.ss_family == AF_INET6
                            ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                            : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
        if (!inet_ntop(ss.ss_family, a, out, (socklen_t)cap))
            rc = MC_ERR_RPC_FAIL;
    }
    give_back_gen(c, fd, gen);
    return rc;
}

int mc_rpc_call(mc_rpc_client_t *c, uint16_t opcode, const uint8_t *body, size_t len,
                uint8_t **reply, size_t *reply_len)
{
    return mc_rpc_call_ex(c, opcode, body, len, reply, reply_len, NULL);
}

int mc_rpc_call_ex(mc_rpc_client_t *c, uint16_t opcode, const uint8_t *body, size_t len,
                   uint8_t **reply, size_t *reply_len, int *elsewhere)
{
    if (elsewhere)
        *elsewhere = 0;
    if (!c || !reply || !reply_len || (len && !body) || len > MC_RPC_MAX_BODY)
        return MC_ERR_INVALID_PARAMS;
    int unanswered = 0; /* an attempt sent the whole request and got no answer */
    int relocated = 0;  /* ... and the call then moved to another master */
    *reply = NULL;
    *reply_len = 0;
    /* A pooled connection may have been closed by a restarted server: one retry on a fresh one.
     * Following an elected master, a transport failure re-resolves the leader instead, and the
     * call is retried once there when it moved. */
    int followed = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t gen;
        int fd = borrow_gen(c, &gen);
        int rc;
        if (fd < 0) {
            rc = fd == MC_ERR_RPC_TIMEOUT || fd == MC_ERR_ILLEGAL_CLIENT ? fd : MC_ERR_RPC_FAIL;
        } else {
            int tracked = c->resolve && busy_add(c, fd, gen);
            int sent_all = 0;
            rc = exchange(c, fd, opcode, body, len, reply, reply_len, &sent_all);
            if (tracked)
                busy_remove(c, fd);
            if (rc == 0) {
                give_back_gen(c, fd, gen);
                if (elsewhere)
                    *elsewhere = relocated;
                return 0;
            }
            unanswered |= sent_all;
            close(fd);
        }
        if (rc != MC_ERR_RPC_FAIL && rc != MC_ERR_RPC_TIMEOUT)
            return rc;
        if (c->resolve && !followed) {
            followed = 1;
            pthread_mutex_lock(&c->lock);
            int moved = c->generation != gen; /* the leader changed while this call waited */
            pthread_mutex_unlock(&c->lock);
            if (moved || re_resolve(c) == 1) {
                relocated = unanswered;
                attempt = -1; /* a fresh pair of attempts at the new leader */
                continue;
            }
        }
        if (rc == MC_ERR_RPC_TIMEOUT || fd < 0)
            return rc;
    }
    return MC_ERR_RPC_FAIL;
}

const char *mc_rpc_method_name(uint16_t opcode)
{
#define X(id, op, name, handler)                                                                   \
    case MC_RPC_##id:                                                                              \
        return name;
    switch (opcode) {
        MC_RPC_METHOD_LIST(X)
        MC_RPC_PEER_METHOD_LIST(X)
    default:
        return "Unknown";
    }
#undef X
}

int mc_rpc_method_index(uint16_t opcode)
{
    /* A switch derived from the list: the index of each method in it, in its order. */
    enum {
#define X(id, op, name, handler) MC_RPC_INDEX_##id,
        MC_RPC_METHOD_LIST(X)
#undef X
    };
    switch (opcode) {
#define X(id, op, name, handler)                                                                   \
    case MC_RPC_##id:                                                                              \
        return MC_RPC_INDEX_##id;
        MC_RPC_METHOD_LIST(X)
#undef X
    default:
        return -1;
    }
}

int mc_rpc_call_pb(mc_rpc_client_t *c, uint16_t opcode, const ProtobufCMessage *req,
                   const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **resp)
{
    return mc_rpc_call_pb_ex(c, opcode, req, reply_desc, resp, NULL);
}

int mc_rpc_call_pb_ex(mc_rpc_client_t *c, uint16_t opcode, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **resp,
                      int *elsewhere)
{
    if (elsewhere)
        *elsewhere = 0;
    size_t len = req ? protobuf_c_message_get_packed_size(req) : 0;
    uint8_t *body = calloc(1, len ? len : 1);
    if (!body)
        return MC_ERR_INTERNAL_ERROR;
    if (req)
        protobuf_c_message_pack(req, body);
    uint8_t *reply = NULL;
    size_t reply_len = 0;
    int rc = mc_rpc_call_ex(c, opcode, body, len, &reply, &reply_len, elsewhere);
    free(body);
    if (rc != 0)
        return rc;
    rc = mc_pb_decode_reply(reply_desc, reply, reply_len, resp);
    free(reply);
    return rc == 0 ? 0 : MC_ERR_DESERIALIZE_FAIL;
}
