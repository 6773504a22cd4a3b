/*
 * rpc_server.c — the master's RPC server on libuv (rpc_server.h).
 *
 * Structure: N workers, each a uv_loop on its own thread. Worker 0 also watches the listening
 * socket (a uv_poll on a plain non-blocking fd), accepts, and queues each new fd to the workers
 * round-robin through a mutex-guarded list and a uv_async wake-up; the receiving worker wraps the
 * fd in a uv_tcp_t. From then on a connection lives entirely on its worker's thread.
 *
 * A connection reads into one growable buffer holding the bytes received but not yet handled,
 * [start, len). Frames are handled in order as soon as they are complete; a header is validated
 * the moment its 24 bytes are in, so a bad magic or an oversize body_len is refused before any
 * body memory is reserved. Replies are packed straight into the uv_write request's own buffer
 * (one allocation per reply). When a peer stops reading its replies and more than
 * MC_RPC_MAX_PENDING_REPLY_BYTES are queued, the connection stops reading until the queue halves.
 *
 * Limits (rpc_server.h): the acceptor refuses connections over max_connections. Receive buffers
 * are charged to the server-wide budget max_buffered_bytes (rpc_conn.reserved, server.buffered):
 * a buffer grows only after its growth, or the whole frame once its header is in, is reserved;
 * a connection that cannot reserve stops reading (mem_wait) until a sweep finds room. An empty
 * buffer is freed and its reservation returned at once. Each loop runs a sweep timer that closes
 * connections stalled mid-frame (frame_timeout_ms without progress) or idle (idle_timeout_ms
 * with nothing in flight) and resumes the ones waiting for memory.
 *
 * What a frame means is rpc_handlers.c's business (through rpc_internal.h); this file only moves
 * frames and counts calls per method.
 */
#include "rpc_server.h"

#include "auth.h"
#include "failpoint.h"
#include "frame.h"
#include "log.h"
#include "mooncake/errors.h"
#include "net.h"
#include "parse.h"
#include "pb_decode.h"
#include "rpc.h"
#include "rpc_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define RPC_BACKLOG 1024
#define RPC_READ_CHUNK (64u << 10) /* bytes offered to each read */
#define RPC_SWEEP_MAX_MS 1000u     /* period of the timeout sweep, at most */
#define RPC_SWEEP_MIN_MS 10u
#define RPC_ACCEPT_BURST 64       /* accepts per readiness event */
#define RPC_ACCEPT_BACKOFF_MS 100 /* pause accepting after EMFILE and the like */
#define RPC_REJECT_LOG_INTERVAL_MS 1000

/* ---- server state ------------------------------------------------------------------------ */

typedef struct rpc_worker rpc_worker_t;

typedef struct rpc_reply {
    uv_write_t req;
    struct rpc_reply *next; /* held replies (see mc_rpc_server_set_barrier) */
    size_t len;             /* frame bytes */
    uint64_t need;          /* held until the barrier's durable sequence reaches this */
    uint16_t opcode;        /* of the request it answers */
    uint8_t bytes[];        /* frame header + body */
} rpc_reply_t;

/* A peer's address, not its port: one peer's share of the connections is counted by it. family
 * 0: not counted (unknown, or no memory to count it). */
typedef struct rpc_peer_key {
    sa_family_t family;
    uint8_t addr[16];
} rpc_peer_key_t;

typedef struct rpc_peer_count {
    rpc_peer_key_t key;
    uint32_t n;
} rpc_peer_count_t;

/* An accepted connection waiting for its worker. */
typedef struct rpc_accepted {
    int fd;
    rpc_peer_key_t key;
} rpc_accepted_t;

struct rpc_conn {
    uv_tcp_t tcp;            /* tcp.data points back here */
    rpc_peer_key_t peer_key; /* counted in the server's per-peer table until closed */
    rpc_worker_t *worker;
    char peer[MC_ENDPOINT_MAX];
    uint8_t *buf; /* bytes [start, len) are received and not yet handled */
    size_t start;
    size_t len;
    size_t cap;
    int paused;         /* reading stopped: too many reply bytes queued */
    int closing;        /* uv_close called; the conn is freed by its close callback */
    int refused;        /* refused by the cluster-secret check: the answer drains, then close */
    int authed;         /* proved the cluster secret (servers with one) */
    uint64_t opened_ms; /* accepted at; a connection has MC_AUTH_TIMEOUT_MS to authenticate */
    mc_auth_state_t auth;
    uv_shutdown_t shutdown;
    /* limits (see the file comment) */
    size_t reserved;           /* bytes charged to server->buffered; >= cap */
    int mem_wait;              /* reading stopped: the buffer budget had no room */
    uint64_t last_progress_ms; /* last byte received or reply written; 0 = not yet swept */
    /* durability barrier: replies held until what they acknowledge is durable, in order */
    uint64_t dispatch_seq; /* the barrier's sequence when the current request began */
    rpc_reply_t *held, *held_tail;
    size_t held_bytes;
    /* the client this connection last spoke for (a ping or a mount named it); "" = none */
    char client_id[MC_CLIENT_ID_MAX];
};

struct rpc_worker {
    mc_rpc_server_t *server;
    uv_loop_t loop;
    uv_async_t wakeup; /* new fds queued, or the server is stopping */
    uv_thread_t thread;
    pthread_mutex_t lock;    /* guards pending */
    rpc_accepted_t *pending; /* accepted connections waiting for this worker */
    size_t npending;
    size_t pending_cap;
    int loop_ready;
    int thread_started;
    uv_timer_t sweep; /* timeouts, and connections waiting for buffer memory */
    /* worker 0 only: the acceptor */
    uv_poll_t accept_poll;
    uv_timer_t accept_backoff;
    /* the spin (rpc_server.h): while `spin` is active the loop polls without blocking */
    uv_idle_t spin;
    uv_check_t spin_check; /* after each poll: stops the spin once spin_us passed quietly */
    uint64_t last_frame_ns;
};

/* Upstream's names of the master methods, by index (derived from the one list). */
#define X(id, op, name, handler) name,
static const char *const method_names[MC_RPC_METHOD_COUNT] = {MC_RPC_METHOD_LIST(X)};
#undef X

struct mc_rpc_server {
    mc_master_t *master;
    const mc_rpc_method_t *methods; /* the handlers, by method index (borrowed) */
    int listen_fd;
    int port;
    int nworkers;
    rpc_worker_t *workers;
    size_t next_worker; /* acceptor thread only */
    atomic_int stopping;
    atomic_uint_fast64_t accepted;
    atomic_uint_fast64_t active;
    atomic_uint_fast64_t rejected;          /* over either cap */
    atomic_uint_fast64_t rejected_per_peer; /* of those, over one peer's share */
    pthread_mutex_t peer_lock;              /* guards peers */
    rpc_peer_count_t *peers;                /* open connections per peer address */
    size_t npeers, peers_cap;
    atomic_uint_fast64_t protocol_errors;
    atomic_uint_fast64_t auth_refused;
    atomic_uint_fast64_t last_reject_log_ms;
    const mc_auth_t *auth; /* borrowed; NULL: no cluster secret */
    mc_rpc_limits_t limits;
    atomic_uint_fast64_t buffered; /* sum of every connection's `reserved` */
    atomic_uint_fast64_t stalled, idle_closed, buffer_waits;
    atomic_uint_fast64_t spin_skipped; /* frames after which the spin was not armed: contended */
    atomic_uint_fast64_t last_stall_log_ms, last_wait_log_ms;
    atomic_uint_fast64_t method_total[MC_RPC_METHOD_COUNT];
    atomic_uint_fast64_t method_success[MC_RPC_METHOD_COUNT];
    _Atomic(mc_rpc_gate_fn) gate; /* NULL: always serve */
    void *_Atomic gate_arg;
    atomic_uint_fast64_t gate_refused;
    /* durability barrier (NULL seq: none) */
    _Atomic(mc_rpc_seq_fn) barrier_seq;
    _Atomic(mc_rpc_seq_fn) barrier_durable;
    void *_Atomic barrier_arg;
    atomic_uint_fast64_t replies_held;
    /* a client's connection closed by the peer (NULL: nobody is told) */
    _Atomic(mc_rpc_peer_closed_fn) peer_closed;
    void *_Atomic peer_closed_arg;
};

/* ---- receive-buffer budget --------------------------------------------------------------- */

/* Charges c up to `total` reserved bytes; 0, or -1 when the server's budget has no room. */
static int rpc_reserve(rpc_conn_t *c, size_t total)
{
    if (total <= c->reserved)
        return 0;
    mc_rpc_server_t *s = c->worker->server;
    uint64_t more = total - c->reserved;
    uint64_t cur = atomic_load(&s->buffered);
    do {
        if (cur + more > s->limits.max_buffered_bytes)
            return -1;
    } while (!atomic_compare_exchange_weak(&s->buffered, &cur, cur + more));
    c->reserved = total;
    return 0;
}

/* Returns c's reservation above `keep` bytes. */
static void rpc_release_to(rpc_conn_t *c, size_t keep)
{
    if (c->reserved <= keep)
        return;
    atomic_fetch_sub(&c->worker->server->buffered, c->reserved - keep);
    c->reserved = keep;
}

/* ---- one peer's share of the connections ----------------------------------------------- */

static rpc_peer_key_t rpc_peer_key_of(const struct sockaddr_storage *ss)
{
    rpc_peer_key_t k;
    memset(&k, 0, sizeof(k));
    if (ss->ss_family == AF_INET) {
        k.family = AF_INET;
        memcpy(k.addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        k.family = AF_INET6;
        memcpy(k.addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
    return k;
}

static size_t rpc_peer_find(const mc_rpc_server_t *s, const rpc_peer_key_t *k)
{
    for (size_t i = 0; i < s->npeers; i++) {
        if (s->peers[i].key.family == k->family && !memcmp(s->peers[i].key.addr, k->addr, 16))
            return i;
    }
    return SIZE_MAX;
}

/* Counts one more connection of peer *k: 1, or 0 when it already holds its share. Without memory
 * to count it, it is let in uncounted (k->family set to 0). */
static int rpc_peer_admit(mc_rpc_server_t *s, rpc_peer_key_t *k)
{
    if (k->family == 0)
        return 1;
    int ok = 1;
    pthread_mutex_lock(&s->peer_lock);
    size_t i = rpc_peer_find(s, k);
    if (i != SIZE_MAX && s->peers[i].n >= s->limits.max_per_peer) {
        ok = 0;
    } else if (i != SIZE_MAX) {
        s->peers[i].n++;
    } else {
        if (s->npeers == s->peers_cap) {
            size_t cap = s->peers_cap ? 2 * s->peers_cap : 64;
            rpc_peer_count_t *v = realloc(s->peers, cap * sizeof(*v));
            if (v) {
                s->peers = v;
                s->peers_cap = cap;
            }
        }
        if (s->npeers < s->peers_cap)
            s->peers[s->npeers++] = (rpc_peer_count_t){*k, 1};
        else
            k->family = 0;
    }
    pthread_mutex_unlock(&s->peer_lock);
    return ok;
}

static void rpc_peer_leave(mc_rpc_server_t *s, const rpc_peer_key_t *k)
{
    if (k->family == 0)
        return;
    pthread_mutex_lock(&s->peer_lock);
    size_t i = rpc_peer_find(s, k);
    if (i != SIZE_MAX && --s->peers[i].n == 0)
        s->peers[i] = s->peers[--s->npeers];
    pthread_mutex_unlock(&s->peer_lock);
}

/* One accepted connection is gone before or after it became a conn: both counts drop. */
static void rpc_unadmit(mc_rpc_server_t *s, const rpc_peer_key_t *k)
{
    rpc_peer_leave(s, k);
    atomic_fetch_sub(&s->active, 1);
}

/* ---- connections ------------------------------------------------------------------------- */

static void rpc_conn_closed(uv_handle_t *h)
{
    rpc_conn_t *c = h->data;
    for (rpc_reply_t *r = c->held, *n; r; r = n) { /* never acknowledged: never durable */
        n = r->next;
        free(r);
    }
    rpc_unadmit(c->worker->server, &c->peer_key);
    rpc_release_to(c, 0);
    free(c->buf);
    free(c);
}

static void rpc_conn_close(rpc_conn_t *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, rpc_conn_closed);
}

__attribute__((format(printf, 2, 3))) static void rpc_conn_reject(rpc_conn_t *c, const char *fmt,
                                                                  ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    atomic_fetch_add(&c->worker->server->protocol_errors, 1);
    MC_WARN("RPC: closing connection from %s: %s", c->peer, why);
    rpc_conn_close(c);
}

static void rpc_conn_process(rpc_conn_t *c);
static void rpc_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void rpc_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void rpc_resume(rpc_conn_t *c)
{
    c->paused = 0;
    rpc_conn_process(c);
    if (!c->paused && !c->closing && !c->refused &&
        uv_read_start((uv_stream_t *)&c->tcp, rpc_alloc, rpc_read))
        rpc_conn_close(c);
}

static void rpc_write_done(uv_write_t *req, int status)
{
    rpc_conn_t *c = req->handle->data;
    free(req->data);
    if (c->closing)
        return;
    c->last_progress_ms = mc_now_ms();
    if (status < 0) {
        MC_VLOG(1, "RPC: write to %s failed: %s", c->peer, uv_strerror(status));
        rpc_conn_close(c);
        return;
    }
    if (c->paused && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) <=
                         MC_RPC_MAX_PENDING_REPLY_BYTES / 2)
        rpc_resume(c);
}

/* Queues reply r on c's stream; r is freed when the write completes, or here on failure (the
 * libuv error is returned; the caller closes the connection). */
static int rpc_write_reply(rpc_conn_t *c, rpc_reply_t *r)
{
    if (r->need) {
        /* Tests stop the leader here: what the request changed is durable (a held reply that
         * became so, or one whose commit finished before its reply was built), its answer not
         * yet sent. */
        int m = mc_rpc_method_index(r->opcode);
        mc_failpoint_named("rpc.held_reply", m >= 0 ? method_names[m] : "Unknown");
    }
    r->req.data = r;
    uv_buf_t b = uv_buf_init((char *)r->bytes, (unsigned int)r->len);
    int rc = uv_write(&r->req, (uv_stream_t *)&c->tcp, &b, 1, rpc_write_done);
    if (rc < 0)
        free(r);
    return rc;
}

/* 0 when the gate (HA: not the leader, or past its lease deadline) refuses to serve now. */
static int rpc_gate_open(mc_rpc_server_t *s, uint16_t opcode)
{
    mc_rpc_gate_fn gate = atomic_load(&s->gate);
    if (!gate || gate(atomic_load(&s->gate_arg), opcode))
        return 1;
    atomic_fetch_add(&s->gate_refused, 1);
    return 0;
}

void mc_rpc_server_set_barrier(mc_rpc_server_t *server, mc_rpc_seq_fn seq, mc_rpc_seq_fn durable,
                               void *arg)
{
    atomic_store(&server->barrier_arg, arg);
    atomic_store(&server->barrier_durable, durable);
    atomic_store(&server->barrier_seq, seq);
}

void mc_rpc_server_durable_advanced(mc_rpc_server_t *server)
{
    if (!server || atomic_load(&server->stopping))
        return;
    for (int i = 0; i < server->nworkers; i++)
        if (server->workers[i].loop_ready)
            uv_async_send(&server->workers[i].wakeup);
}

void mc_rpc_server_set_gate(mc_rpc_server_t *server, mc_rpc_gate_fn gate, void *arg)
{
    atomic_store(&server->gate_arg, arg);
    atomic_store(&server->gate, gate);
}

/* Counts one call of method idx (a valid index). */
static void rpc_count(mc_rpc_server_t *s, int idx, int ok)
{
    atomic_fetch_add(&s->method_total[idx], 1);
    if (ok)
        atomic_fetch_add(&s->method_success[idx], 1);
}

int mc_rpc_conn_reply(rpc_conn_t *c, uint16_t opcode, uint64_t id, const ProtobufCMessage *msg,
                      int ok)
{
    size_t body = protobuf_c_message_get_packed_size(msg);
    if (body > MC_RPC_MAX_BODY)
        return MC_ERR_BUFFER_OVERFLOW;
    rpc_reply_t *r = malloc(sizeof(*r) + MC_FRAME_HEADER_SIZE + body);
    if (!r)
        return MC_ERR_INTERNAL_ERROR;
    if (!rpc_gate_open(c->worker->server, 0)) {
        /* Leadership ended while the request ran: its effect dies with this master's state, and
         * the client, getting no answer, retries at the new leader. */
        free(r);
        rpc_conn_close(c);
        return 0;
    }
    int idx = mc_rpc_method_index(opcode);
    if (idx >= 0)
        rpc_count(c->worker->server, idx, ok);
    mc_frame_encode((uint16_t)(opcode | MC_RPC_REPLY), id, (uint32_t)body, 0, r->bytes);
    protobuf_c_message_pack(msg, r->bytes + MC_FRAME_HEADER_SIZE);
    r->len = MC_FRAME_HEADER_SIZE + body;
    r->next = NULL;
    r->need = 0;
    r->opcode = opcode;
    mc_rpc_server_t *srv = c->worker->server;
    mc_rpc_seq_fn seq = atomic_load(&srv->barrier_seq);
    if (seq) {
        /* What this request changed must be durable before it is acknowledged; replies of
         * the connection leave in order, so one held reply holds the ones after it. */
        void *arg = atomic_load(&srv->barrier_arg);
        uint64_t now = seq(arg);
        r->need = now > c->dispatch_seq ? now : 0;
        if (c->held && c->held_tail->need > r->need)
            r->need = c->held_tail->need;
        if (c->held || (r->need && r->need > atomic_load(&srv->barrier_durable)(arg))) {
            if (c->held_tail)
                c->held_tail->next = r;
            else
                c->held = r;
            c->held_tail = r;
            c->held_bytes += r->len;
            atomic_fetch_add(&srv->replies_held, 1);
            if (!c->paused && c->held_bytes > MC_RPC_MAX_PENDING_REPLY_BYTES) {
                c->paused = 1;
                uv_read_stop((uv_stream_t *)&c->tcp);
            }
            return 0;
        }
    }
    int rc = rpc_write_reply(c, r);
    if (rc < 0) {
        MC_VLOG(1, "RPC: cannot queue a reply to %s: %s", c->peer, uv_strerror(rc));
        rpc_conn_close(c);
        return 0; /* the connection is gone; nothing more to report */
    }
    if (!c->paused &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > MC_RPC_MAX_PENDING_REPLY_BYTES) {
        c->paused = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
    return 0;
}

mc_master_t *mc_rpc_conn_master(const rpc_conn_t *c)
{
    return c->worker->server->master;
}

const char *mc_rpc_conn_peer(const rpc_conn_t *c)
{
    return c->peer;
}

void mc_rpc_conn_set_client(rpc_conn_t *c, const char *client_id)
{
    if (client_id && strlen(client_id) < sizeof(c->client_id) &&
        strcmp(c->client_id, client_id) != 0)
        snprintf(c->client_id, sizeof(c->client_id), "%s", client_id);
}

void mc_rpc_server_set_peer_closed(mc_rpc_server_t *server, mc_rpc_peer_closed_fn fn, void *arg)
{
    atomic_store(&server->peer_closed_arg, arg);
    atomic_store(&server->peer_closed, fn);
}

/* Queues one frame with a raw body. 0, or the connection is being closed. */
static int rpc_conn_send_raw(rpc_conn_t *c, uint16_t opcode, uint64_t id, const uint8_t *body,
                             size_t len)
{
    rpc_reply_t *r = malloc(sizeof(*r) + MC_FRAME_HEADER_SIZE + len);
    if (!r) {
        rpc_conn_close(c);
        return MC_ERR_INTERNAL_ERROR;
    }
    mc_frame_encode(opcode, id, (uint32_t)len, 0, r->bytes);
    if (len)
        memcpy(r->bytes + MC_FRAME_HEADER_SIZE, body, len);
    r->req.data = r;
    uv_buf_t b = uv_buf_init((char *)r->bytes, (unsigned int)(MC_FRAME_HEADER_SIZE + len));
    if (uv_write(&r->req, (uv_stream_t *)&c->tcp, &b, 1, rpc_write_done) < 0) {
        free(r);
        rpc_conn_close(c);
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

static void rpc_refused_drained(uv_shutdown_t *req, int status)
{
    (void)status;
    rpc_conn_close(req->data);
}

/*
 * One frame of a connection that has not proved the cluster secret yet (auth.h). A refusal is
 * answered with AUTH_RESULT, nothing more is read, and the connection closes once the answer is
 * out (uv_shutdown waits for queued writes; uv_close alone would cancel them).
 */
static void rpc_conn_authenticate(rpc_conn_t *c, const mc_frame_header_t *h, const uint8_t *body)
{
    mc_rpc_server_t *s = c->worker->server;
    uint16_t op;
    uint8_t *reply;
    size_t n;
    int step = mc_auth_step(s->auth, &c->auth, "master", c->peer, h->opcode, body, h->body_len, &op,
                            &reply, &n);
    if (!reply) {
        rpc_conn_close(c);
        return;
    }
    int rc = rpc_conn_send_raw(c, op, h->request_id, reply, n);
    free(reply);
    if (step == 1)
        c->authed = 1;
    if (step >= 0 || rc != 0)
        return;
    atomic_fetch_add(&s->auth_refused, 1);
    c->refused = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->shutdown.data = c;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, rpc_refused_drained) < 0)
        rpc_conn_close(c);
}

/* Handles one complete frame; may close the connection. */
static void rpc_dispatch(rpc_conn_t *c, const mc_frame_header_t *h, const uint8_t *body)
{
    mc_rpc_server_t *s = c->worker->server;
    if (!rpc_gate_open(s, h->opcode)) { /* not leading: execute nothing, answer nothing */
        rpc_conn_close(c);
        return;
    }
    if (s->auth && !c->authed) {
        rpc_conn_authenticate(c, h, body);
        return;
    }
    if (h->opcode == MC_AUTH_OP_HELLO) { /* a client with a secret; this master has none */
        uint8_t *reply;
        size_t n;
        if (mc_auth_result_body(MC_ERR_NOT_SUPPORTED, "this master has no cluster secret", &reply,
                                &n) == 0) {
            rpc_conn_send_raw(c, MC_AUTH_OP_RESULT, h->request_id, reply, n);
            free(reply);
        }
        return;
    }
    int idx = mc_rpc_method_index(h->opcode);
    if (idx < 0) {
        rpc_conn_reject(c, "unknown opcode %u (request id %" PRIu64 ")", h->opcode, h->request_id);
        return;
    }
    mc_rpc_seq_fn seq = atomic_load(&s->barrier_seq);
    c->dispatch_seq = seq ? seq(atomic_load(&s->barrier_arg)) : 0;
    int rc =
        c->worker->server->methods[idx].handler(c, h->opcode, h->request_id, body, h->body_len);
    if (rc == MC_ERR_DESERIALIZE_FAIL) {
        rpc_conn_reject(c, "%s (opcode %u): body of %u bytes does not decode", method_names[idx],
                        h->opcode, h->body_len);
        return;
    }
    if (rc != 0) { /* no reply went out, so the call was not counted yet */
        rpc_count(s, idx, 0);
        MC_ERROR("RPC: cannot answer %s from %s: %s", method_names[idx], c->peer,
                 mc_error_name(rc));
        rpc_conn_close(c);
    }
}

/* Handles every complete frame in the buffer, in order, until paused or closed. */
static void rpc_conn_process(rpc_conn_t *c)
{
    while (!c->paused && !c->closing && !c->refused) {
        size_t have = c->len - c->start;
        if (have < MC_FRAME_HEADER_SIZE)
            break;
        const uint8_t *p = c->buf + c->start;
        mc_frame_header_t h;
        int rc = mc_frame_decode(p, MC_RPC_MAX_BODY, &h);
        if (rc == MC_ERR_BUFFER_OVERFLOW) {
            uint32_t declared = (uint32_t)p[16] | (uint32_t)p[17] << 8 | (uint32_t)p[18] << 16 |
                                (uint32_t)p[19] << 24;
            rpc_conn_reject(c, "frame body of %u bytes exceeds the %u-byte limit", declared,
                            MC_RPC_MAX_BODY);
            return;
        }
        if (rc != 0) {
            rpc_conn_reject(c, "bad frame header (magic 0x%02x%02x%02x%02x, version %u)", p[3],
                            p[2], p[1], p[0], (unsigned)(p[4] | p[5] << 8));
            return;
        }
        if (have < MC_FRAME_HEADER_SIZE + (size_t)h.body_len)
            break;
        c->start += MC_FRAME_HEADER_SIZE + (size_t)h.body_len;
        rpc_dispatch(c, &h, p + MC_FRAME_HEADER_SIZE);
    }
    if (c->closing)
        return;
    if (c->start == c->len) { /* nothing buffered: give the memory back to the budget */
        c->start = c->len = 0;
        free(c->buf);
        c->buf = NULL;
        c->cap = 0;
    }
    rpc_release_to(c, c->cap); /* a completed frame's reservation beyond the buffer */
}

/*
 * Offers the free tail of the buffer. A large frame's room grows with what has arrived (at most
 * doubling the bytes held per step, up to the frame's end), so memory follows the bytes a peer
 * really sent, not the body_len it declared.
 */
static void rpc_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    rpc_conn_t *c = h->data;
    size_t have = c->len - c->start;
    size_t want = RPC_READ_CHUNK;
    size_t frame = 0; /* the current frame's whole length, once its header is in */
    mc_frame_header_t fh;
    if (have >= MC_FRAME_HEADER_SIZE &&
        mc_frame_decode(c->buf + c->start, MC_RPC_MAX_BODY, &fh) == 0) {
        frame = MC_FRAME_HEADER_SIZE + (size_t)fh.body_len;
        size_t missing = frame - have;
        size_t step = have > RPC_READ_CHUNK ? have : RPC_READ_CHUNK;
        want = missing > RPC_READ_CHUNK ? missing : RPC_READ_CHUNK;
        if (want > step)
            want = step;
    }
    if (c->cap - c->len < want && c->start > 0) {
        memmove(c->buf, c->buf + c->start, have);
        c->start = 0;
        c->len = have;
    }
    if (c->cap - c->len < want) {
        /* The whole frame is reserved once its header is in (it starts at offset 0 now), so a
         * frame that got its reservation can always complete; growth without it waits. */
        if (rpc_reserve(c, c->len + want > frame ? c->len + want : frame) != 0) {
            c->mem_wait = 1;
            *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS and stops reading */
            return;
        }
        uint8_t *nb = realloc(c->buf, c->len + want);
        if (!nb) {
            *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
            return;
        }
        c->buf = nb;
        c->cap = c->len + want;
    }
    *buf = uv_buf_init((char *)c->buf + c->len, (unsigned int)(c->cap - c->len));
}

static void rpc_spin_idle(uv_idle_t *h)
{
    /* Its being active is the point: uv_run polls with a zero timeout. Yielding lets any other
     * runnable thread on this CPU go first, so the spin only takes time nobody else wants. */
    (void)h;
    sched_yield();
}

static void rpc_spin_check(uv_check_t *h)
{
    rpc_worker_t *w = h->data;
    if (uv_is_active((uv_handle_t *)&w->spin) &&
        mc_now_ns() - w->last_frame_ns > (uint64_t)w->server->limits.spin_us * 1000u)
        uv_idle_stop(&w->spin);
}

/* A frame arrived: keep polling for the next one for spin_us (rpc_server.h), unless every CPU
 * has other runnable work (then the spin would only delay it, and this thread's own next turn). */
static void rpc_spin_arm(rpc_worker_t *w)
{
    if (w->server->limits.spin_us == 0)
        return;
    if (mc_cpus_contended()) {
        atomic_fetch_add_explicit(&w->server->spin_skipped, 1, memory_order_relaxed);
        return;
    }
    w->last_frame_ns = mc_now_ns();
    if (!uv_is_active((uv_handle_t *)&w->spin))
        uv_idle_start(&w->spin, rpc_spin_idle);
}

static void rpc_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    rpc_conn_t *c = s->data;
    if (nread > 0) {
        c->len += (size_t)nread;
        c->last_progress_ms = mc_now_ms();
        rpc_worker_t *w = c->worker; /* c may be closed by its frames */
        rpc_conn_process(c);
        rpc_spin_arm(w);
        return;
    }
    if (nread == 0)
        return;
    if (nread == UV_ENOBUFS && c->mem_wait) {
        mc_rpc_server_t *srv = c->worker->server;
        uv_read_stop(s);
        atomic_fetch_add(&srv->buffer_waits, 1);
        if (mc_log_ratelimit(&srv->last_wait_log_ms, RPC_REJECT_LOG_INTERVAL_MS))
            MC_WARN("RPC: receive buffers hold %" PRIu64 " bytes, the limit is %" PRIu64
                    " (--rpc_max_buffered_size); %s waits for room",
                    (uint64_t)atomic_load(&srv->buffered), srv->limits.max_buffered_bytes, c->peer);
        return;
    }
    if (nread == UV_ENOBUFS)
        MC_WARN("RPC: closing connection from %s: out of memory for its frame", c->peer);
    else if (nread != UV_EOF)
        MC_VLOG(1, "RPC: connection from %s failed: %s", c->peer, uv_strerror((int)nread));
    /* The peer closed or reset it: a process that dies closes its sockets at once, so this is
     * the earliest sign a client's process is gone (or only that it closed a pooled connection:
     * the hook decides, never this). */
    mc_rpc_peer_closed_fn closed = atomic_load(&c->worker->server->peer_closed);
    if (closed && c->client_id[0] && (nread == UV_EOF || nread == UV_ECONNRESET))
        closed(atomic_load(&c->worker->server->peer_closed_arg), c->client_id);
    rpc_conn_close(c);
}

static void rpc_format_peer(int fd, char out[MC_ENDPOINT_MAX])
{
    struct sockaddr_storage ss = {0};
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    snprintf(out, MC_ENDPOINT_MAX, "unknown peer");
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        snprintf(out, MC_ENDPOINT_MAX, "%s:%d", host, ntohs(sin->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        snprintf(out, MC_ENDPOINT_MAX, "[%s]:%d", host, ntohs(sin6->sin6_port));
    }
}

/* Adopts an accepted connection on worker w's loop (w's thread). */
static void rpc_conn_open(rpc_worker_t *w, const rpc_accepted_t *a)
{
    int fd = a->fd;
    rpc_conn_t *c = calloc(1, sizeof(*c));
    if (!c) {
        MC_WARN("RPC: out of memory for a new connection; closing it");
        close(fd);
        rpc_unadmit(w->server, &a->key);
        return;
    }
    c->worker = w;
    c->peer_key = a->key;
    c->opened_ms = mc_now_ms();
    rpc_format_peer(fd, c->peer);
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    int rc = uv_tcp_open(&c->tcp, fd);
    if (rc < 0) {
        MC_WARN("RPC: cannot adopt the connection from %s: %s", c->peer, uv_strerror(rc));
        close(fd);
        rpc_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    rc = uv_read_start((uv_stream_t *)&c->tcp, rpc_alloc, rpc_read);
    if (rc < 0) {
        MC_WARN("RPC: cannot read from %s: %s", c->peer, uv_strerror(rc));
        rpc_conn_close(c);
    }
}

/* ---- the sweep: timeouts and waits for buffer memory ------------------------------------- */

/* 1 when bytes the server has not read yet wait in the kernel for c. */
static int rpc_conn_has_unread(rpc_conn_t *c)
{
    uv_os_fd_t fd;
    int n = 0;
    return uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* One connection at sweep time `now` (its loop's thread). */
static void rpc_sweep_conn(rpc_conn_t *c, uint64_t now)
{
    mc_rpc_server_t *s = c->worker->server;
    if (c->closing)
        return;
    /* With a secret, a connection that has not proved it in MC_AUTH_TIMEOUT_MS is closed: silent
     * connections must not hold the connection cap for the idle timeout. */
    if (s->auth && !c->authed && !c->refused && now - c->opened_ms >= MC_AUTH_TIMEOUT_MS) {
        atomic_fetch_add(&s->auth_refused, 1);
        if (mc_log_ratelimit(&s->last_stall_log_ms, RPC_REJECT_LOG_INTERVAL_MS))
            MC_WARN("RPC: closing connection from %s: no cluster-secret handshake within %d ms",
                    c->peer, MC_AUTH_TIMEOUT_MS);
        rpc_conn_close(c);
        return;
    }
    if (c->last_progress_ms == 0 || c->mem_wait) {
        c->last_progress_ms = now; /* new, or waiting on us: its clock starts (again) now */
        if (c->mem_wait && !c->paused && !c->refused) {
            c->mem_wait = 0; /* the next read reserves again, or waits again */
            if (uv_read_start((uv_stream_t *)&c->tcp, rpc_alloc, rpc_read) != 0)
                rpc_conn_close(c);
        }
        return;
    }
    uint64_t quiet = now > c->last_progress_ms ? now - c->last_progress_ms : 0;
    size_t partial = c->len - c->start;
    size_t unsent = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    if (partial > 0 || unsent > 0 || c->paused) {
        if (quiet < s->limits.frame_timeout_ms)
            return;
        atomic_fetch_add(&s->stalled, 1);
        if (mc_log_ratelimit(&s->last_stall_log_ms, RPC_REJECT_LOG_INTERVAL_MS))
            MC_WARN("RPC: closing connection from %s: no progress for %" PRIu64 " ms with %zu "
                    "bytes of a frame received and %zu reply bytes unsent "
                    "(--rpc_frame_timeout_seconds)",
                    c->peer, quiet, partial, unsent);
        rpc_conn_close(c);
        return;
    }
    if (s->limits.idle_timeout_ms == 0 || quiet < s->limits.idle_timeout_ms ||
        rpc_conn_has_unread(c))
        return;
    atomic_fetch_add(&s->idle_closed, 1);
    MC_VLOG(1, "RPC: closing connection from %s: idle for %" PRIu64 " ms", c->peer, quiet);
    rpc_conn_close(c);
}

static void rpc_sweep_walk(uv_handle_t *h, void *arg)
{
    if (h->type == UV_TCP && !uv_is_closing(h))
        rpc_sweep_conn(h->data, *(const uint64_t *)arg);
}

static void rpc_sweep(uv_timer_t *t)
{
    rpc_worker_t *w = t->data;
    uint64_t now = mc_now_ms();
    uv_walk(&w->loop, rpc_sweep_walk, &now);
}

/* The sweep period: a quarter of the shortest timeout, within [10 ms, 1 s]. */
static uint64_t rpc_sweep_period(const mc_rpc_limits_t *l)
{
    uint64_t t = l->frame_timeout_ms;
    if (l->idle_timeout_ms && l->idle_timeout_ms < t)
        t = l->idle_timeout_ms;
    t /= 4;
    return t < RPC_SWEEP_MIN_MS ? RPC_SWEEP_MIN_MS : t > RPC_SWEEP_MAX_MS ? RPC_SWEEP_MAX_MS : t;
}

/* ---- workers and the acceptor ------------------------------------------------------------ */

static void rpc_close_walk(uv_handle_t *h, void *arg)
{
    if (uv_is_closing(h))
        return;
    if (h->type == UV_TCP)
        rpc_conn_close(h->data);
    else
        uv_close(h, NULL);
}

/* Writes a connection's held replies that became durable (in order); closes the connection
 * instead when this master may no longer answer (the gate). */
static void rpc_flush_held(rpc_conn_t *c, uint64_t durable)
{
    while (c->held && c->held->need <= durable && !c->closing) {
        rpc_reply_t *r = c->held;
        if (!rpc_gate_open(c->worker->server, 0)) {
            rpc_conn_close(c);
            return;
        }
        c->held = r->next;
        if (!c->held)
            c->held_tail = NULL;
        c->held_bytes -= r->len;
        if (rpc_write_reply(c, r) < 0) {
            rpc_conn_close(c);
            return;
        }
    }
    if (c->paused && !c->closing && c->held_bytes <= MC_RPC_MAX_PENDING_REPLY_BYTES / 2 &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) <=
            MC_RPC_MAX_PENDING_REPLY_BYTES / 2)
        rpc_resume(c);
}

static void rpc_flush_walk(uv_handle_t *h, void *arg)
{
    if (h->type != UV_TCP || !h->data || uv_is_closing(h))
        return;
    rpc_conn_t *c = h->data;
    if (c->held)
        rpc_flush_held(c, *(const uint64_t *)arg);
}

/* Takes every queued fd (closing them when stopping). */
static void rpc_worker_wakeup(uv_async_t *a)
{
    rpc_worker_t *w = a->data;
    int stopping = atomic_load(&w->server->stopping);
    mc_rpc_seq_fn durable = atomic_load(&w->server->barrier_durable);
    if (durable && !stopping) {
        uint64_t d = durable(atomic_load(&w->server->barrier_arg));
        uv_walk(&w->loop, rpc_flush_walk, &d);
    }
    for (;;) {
        pthread_mutex_lock(&w->lock);
        rpc_accepted_t a = {.fd = -1};
        if (w->npending)
            a = w->pending[--w->npending];
        pthread_mutex_unlock(&w->lock);
        if (a.fd < 0)
            break;
        if (stopping) {
            close(a.fd);
            rpc_unadmit(w->server, &a.key);
        } else {
            rpc_conn_open(w, &a);
        }
    }
    if (stopping)
        uv_walk(&w->loop, rpc_close_walk, NULL);
}

static int rpc_worker_push(rpc_worker_t *w, const rpc_accepted_t *a)
{
    pthread_mutex_lock(&w->lock);
    if (w->npending == w->pending_cap) {
        size_t cap = w->pending_cap ? 2 * w->pending_cap : 64;
        rpc_accepted_t *p = realloc(w->pending, cap * sizeof(*p));
        if (!p) {
            pthread_mutex_unlock(&w->lock);
            return MC_ERR_INTERNAL_ERROR;
        }
        w->pending = p;
        w->pending_cap = cap;
    }
    w->pending[w->npending++] = *a;
    pthread_mutex_unlock(&w->lock);
    uv_async_send(&w->wakeup);
    return 0;
}

static void rpc_accept_cb(uv_poll_t *p, int status, int events);

static void rpc_accept_resume(uv_timer_t *t)
{
    rpc_worker_t *w = t->data;
    uv_poll_start(&w->accept_poll, UV_READABLE, rpc_accept_cb);
}

static void rpc_accept_one(mc_rpc_server_t *s, int fd, const struct sockaddr_storage *ss)
{
    rpc_accepted_t a = {.fd = fd, .key = rpc_peer_key_of(ss)};
    if (atomic_load(&s->active) < s->limits.max_connections && !rpc_peer_admit(s, &a.key)) {
        atomic_fetch_add(&s->rejected, 1); /* counted before the peer can see the close */
        atomic_fetch_add(&s->rejected_per_peer, 1);
        close(fd);
        if (mc_log_ratelimit(&s->last_reject_log_ms, RPC_REJECT_LOG_INTERVAL_MS)) {
            char host[INET6_ADDRSTRLEN] = "?";
            inet_ntop(a.key.family, a.key.addr, host, sizeof(host));
            MC_WARN("RPC: %s holds %u connections, the limit for one peer (a quarter of "
                    "--max_connections); refusing its new ones (%" PRIu64 " refused so far)",
                    host, s->limits.max_per_peer, (uint64_t)atomic_load(&s->rejected));
        }
        return;
    }
    if (atomic_load(&s->active) >= s->limits.max_connections) {
        atomic_fetch_add(&s->rejected, 1); /* counted before the peer can see the close */
        close(fd);
        if (mc_log_ratelimit(&s->last_reject_log_ms, RPC_REJECT_LOG_INTERVAL_MS))
            MC_WARN("RPC: %u connections are open, the limit (--max_connections); refusing new "
                    "ones (%" PRIu64 " refused so far)",
                    s->limits.max_connections, (uint64_t)atomic_load(&s->rejected));
        return;
    }
    atomic_fetch_add(&s->active, 1);
    atomic_fetch_add(&s->accepted, 1);
    rpc_worker_t *w = &s->workers[s->next_worker++ % (size_t)s->nworkers];
    if (rpc_worker_push(w, &a) != 0) {
        MC_WARN("RPC: out of memory queueing a new connection; closing it");
        close(fd);
        rpc_unadmit(s, &a.key);
    }
}

static void rpc_accept_cb(uv_poll_t *p, int status, int events)
{
    rpc_worker_t *w = p->data;
    mc_rpc_server_t *s = w->server;
    for (int i = 0; i < RPC_ACCEPT_BURST; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        memset(&ss, 0, sizeof(ss));
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            rpc_accept_one(s, fd, &ss);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        /* Out of descriptors or memory: the socket stays readable; back off, do not spin. */
        MC_WARN("RPC: accept failed: %s; pausing accepts for %d ms", strerror(errno),
                RPC_ACCEPT_BACKOFF_MS);
        uv_poll_stop(&w->accept_poll);
        uv_timer_start(&w->accept_backoff, rpc_accept_resume, RPC_ACCEPT_BACKOFF_MS, 0);
        return;
    }
}

static void rpc_worker_run(void *arg)
{
    rpc_worker_t *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
}

static int rpc_worker_init(mc_rpc_server_t *s, rpc_worker_t *w, int acceptor)
{
    w->server = s;
    pthread_mutex_init(&w->lock, NULL);
    int rc = uv_loop_init(&w->loop);
    if (rc < 0) {
        MC_ERROR("RPC: cannot create an event loop: %s", uv_strerror(rc));
        return MC_ERR_INTERNAL_ERROR;
    }
    w->loop_ready = 1;
    uv_async_init(&w->loop, &w->wakeup, rpc_worker_wakeup);
    w->wakeup.data = w;
    uv_timer_init(&w->loop, &w->sweep);
    w->sweep.data = w;
    uv_idle_init(&w->loop, &w->spin);
    w->spin.data = w;
    uv_check_init(&w->loop, &w->spin_check);
    w->spin_check.data = w;
    uv_check_start(&w->spin_check, rpc_spin_check);
    uv_unref((uv_handle_t *)&w->spin_check); /* never keeps the loop alive by itself */
    uint64_t period = rpc_sweep_period(&s->limits);
    uv_timer_start(&w->sweep, rpc_sweep, period, period);
    if (!acceptor)
        return 0;
    uv_timer_init(&w->loop, &w->accept_backoff);
    w->accept_backoff.data = w;
    rc = uv_poll_init(&w->loop, &w->accept_poll, s->listen_fd);
    if (rc == 0) {
        w->accept_poll.data = w;
        rc = uv_poll_start(&w->accept_poll, UV_READABLE, rpc_accept_cb);
    }
    if (rc < 0) {
        MC_ERROR("RPC: cannot watch the listening socket: %s", uv_strerror(rc));
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

/*
 * Stops, joins and frees everything; works on a partly started server. Worker 0 (the acceptor)
 * stops first: it is the only thread that wakes the others, so once it is joined no
 * uv_async_send can race with a worker closing its async handle.
 */
static void rpc_server_free(mc_rpc_server_t *s)
{
    atomic_store(&s->stopping, 1);
    for (int i = 0; i < s->nworkers; i++) {
        rpc_worker_t *w = &s->workers[i];
        if (w->thread_started) {
            uv_async_send(&w->wakeup);
            uv_thread_join(&w->thread);
        } else if (w->loop_ready) {
            uv_walk(&w->loop, rpc_close_walk, NULL);
            uv_run(&w->loop, UV_RUN_DEFAULT);
        }
        if (w->loop_ready && uv_loop_close(&w->loop) != 0)
            MC_WARN("RPC: worker %d's loop still has handles at exit", i);
        for (size_t j = 0; j < w->npending; j++)
            close(w->pending[j].fd);
        free(w->pending);
        pthread_mutex_destroy(&w->lock);
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    free(s->workers);
    free(s->peers);
    pthread_mutex_destroy(&s->peer_lock);
    free(s);
}

uint32_t mc_rpc_default_per_peer(uint32_t max_connections)
{
    return max_connections >= MC_RPC_PER_PEER_MIN_CAP ? max_connections / 4 : max_connections;
}

void mc_rpc_limits_default(mc_rpc_limits_t *limits)
{
    *limits = (mc_rpc_limits_t){
        .max_connections = MC_RPC_DEFAULT_MAX_CONNECTIONS,
        .idle_timeout_ms = MC_RPC_DEFAULT_IDLE_TIMEOUT_MS,
        .frame_timeout_ms = MC_RPC_DEFAULT_FRAME_TIMEOUT_MS,
        .max_buffered_bytes = MC_RPC_DEFAULT_MAX_BUFFERED,
        .spin_us = MC_RPC_DEFAULT_SPIN_US,
    };
}

int mc_rpc_transport_start(mc_master_t *master, const char *host, int port, int threads,
                           const mc_rpc_limits_t *limits, const mc_auth_t *auth,
                           const mc_rpc_method_t *methods, mc_rpc_server_t **out)
{
    mc_rpc_limits_t defaults;
    mc_rpc_limits_default(&defaults);
    if (!limits)
        limits = &defaults;
    if (!master || !methods || !out || port < 0 || port > 65535 || threads < 1 ||
        threads > MC_RPC_MAX_THREADS || limits->max_connections < 1 ||
        limits->frame_timeout_ms == 0 || limits->max_buffered_bytes < MC_RPC_MIN_BUFFERED ||
        limits->spin_us > MC_RPC_MAX_SPIN_US)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    mc_rpc_server_t *s = calloc(1, sizeof(*s));
    rpc_worker_t *workers = calloc((size_t)threads, sizeof(*workers));
    if (!s || !workers) {
        free(s);
        free(workers);
        return MC_ERR_INTERNAL_ERROR;
    }
    s->master = master;
    s->methods = methods;
    s->auth = auth;
    s->workers = workers;
    s->nworkers = threads;
    s->limits = *limits;
    if (s->limits.max_per_peer == 0 || s->limits.max_per_peer > s->limits.max_connections)
        s->limits.max_per_peer = mc_rpc_default_per_peer(s->limits.max_connections);
    pthread_mutex_init(&s->peer_lock, NULL);
    s->listen_fd = mc_net_listen_tcp(host, port, RPC_BACKLOG, &s->port);
    if (s->listen_fd < 0) {
        int rc = s->listen_fd; /* mc_net_listen_tcp logged host:port and the reason */
        s->listen_fd = -1;
        s->nworkers = 0;
        rpc_server_free(s);
        return rc;
    }
    mc_auth_warn_open_listener(auth, "the master RPC server", host, s->port);
    int fl = fcntl(s->listen_fd, F_GETFL);
    fcntl(s->listen_fd, F_SETFL, fl | O_NONBLOCK);

    int rc = 0;
    for (int i = 0; i < threads && rc == 0; i++)
        rc = rpc_worker_init(s, &workers[i], i == 0);
    for (int i = 0; i < threads && rc == 0; i++) {
        if (uv_thread_create(&workers[i].thread, rpc_worker_run, &workers[i]) != 0) {
            MC_ERROR("RPC: cannot start worker thread %d", i);
            rc = MC_ERR_INTERNAL_ERROR;
            break;
        }
        workers[i].thread_started = 1;
    }
    if (rc != 0) {
        rpc_server_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int mc_rpc_server_port(const mc_rpc_server_t *server)
{
    return server ? server->port : -1;
}

void mc_rpc_server_stop(mc_rpc_server_t *server)
{
    if (server)
        rpc_server_free(server);
}

size_t mc_rpc_server_get_stats(const mc_rpc_server_t *server, mc_rpc_server_stats_t *out,
                               mc_rpc_method_stats_t *methods, size_t capacity)
{
    mc_rpc_server_t *s = (mc_rpc_server_t *)server; /* atomics are read, never written */
    if (out) {
        memset(out, 0, sizeof(*out));
        if (s) {
            out->connections_accepted = atomic_load(&s->accepted);
            out->connections_active = atomic_load(&s->active);
            out->connections_rejected = atomic_load(&s->rejected);
            out->connections_rejected_per_peer = atomic_load(&s->rejected_per_peer);
            out->protocol_errors = atomic_load(&s->protocol_errors);
            out->auth_refused = atomic_load(&s->auth_refused);
            out->gate_refused = atomic_load(&s->gate_refused);
            out->replies_held = atomic_load(&s->replies_held);
            out->connections_stalled = atomic_load(&s->stalled);
            out->connections_idle_closed = atomic_load(&s->idle_closed);
            out->buffered_bytes = atomic_load(&s->buffered);
            out->buffer_waits = atomic_load(&s->buffer_waits);
            out->spin_skipped = atomic_load(&s->spin_skipped);
            out->limits = s->limits;
        }
        out->decode_refused = mc_pb_decode_refused();
    }
    size_t n = 0;
    for (; methods && n < capacity && n < MC_RPC_METHOD_COUNT; n++) {
        methods[n].method = method_names[n];
        methods[n].total = s ? atomic_load(&s->method_total[n]) : 0;
        methods[n].success = s ? atomic_load(&s->method_success[n]) : 0;
    }
    return n;
}
