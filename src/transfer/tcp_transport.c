/*
 * tcp_transport.c — the Transfer Engine's peer protocol over TCP, both ends.
 *
 * Server: one accept thread, and one thread per connection (peers pool their connections, so
 * there are few, and a blocking thread per stream is the fastest way to move bulk bytes on few
 * cores). Each frame (frame.h) is one request:
 *   HANDSHAKE  -> HANDSHAKE_REPLY with this segment's descriptor (P2PHANDSHAKE metadata)
 *   WRITE      -> the epoch and range are checked, then the payload is received straight into
 *                 the segment memory while its initiator still waits (its budget, from the
 *                 frame's arrival stamp; apply_payload), then STATUS confirms the bytes are in
 *                 place
 *   READ       -> the epoch and range are checked, STATUS, then the bytes straight from memory
 * A refused READ or WRITE (stale epoch, range outside the registered memory) gets a STATUS with
 * the error; a refused write's payload is drained and discarded, never written. A frame with a
 * bad magic/version, an oversized or undecodable body closes that connection; other connections
 * are unaffected.
 *
 * Deadlines: a request — header, body, write payload and reply — must complete within the
 * transfer timeout from when its first byte arrived (one deadline for the whole request, not per
 * recv call: a socket timeout restarts on every partial progress, so a trickling peer would
 * never time out). Past it the connection is aborted and the write never acknowledged.
 *
 * Server connections: one thread per connection while requests come; a connection idle for
 * MC_TCP_PARK_AFTER_MS is parked in an epoll set watched by one park thread, which gives it a
 * thread again when bytes arrive and closes it after the idle timeout. So idle pooled
 * connections cost a descriptor, not a thread. Beyond max_connections a new connection is
 * accepted and closed (counted, logged at most once a second).
 *
 * Client: a pool of idle connections per peer. A request borrows one (one the server closed
 * while idle is noticed and dropped first), and returns it only when the exchange completed
 * cleanly. A request on a pooled connection that turns out dead is retried once on a fresh
 * connection (reads and writes are idempotent). The request's deadline (set when it was
 * submitted: the transfer timeout plus 1 ns per byte of its call) bounds the whole slice, retry
 * included; a slice picked up past it fails without connecting.
 *
 * Failed connections, on both ends, are aborted (SO_LINGER {on, 0}, mc_net_abort), never closed
 * gracefully: a graceful close lets the kernel deliver queued bytes later (after a cut link comes
 * back), into memory that may belong to another object by then. Idle pooled connections and ones
 * in a clean protocol state are closed normally.
 */
#include "transfer_internal.h"

#include "failpoint.h"
#include "frame.h"
#include "log.h"
#include "pb_decode.h"
#include "transfer.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MC_TCP_CONNECT_TIMEOUT_MS 3000
#define MC_TCP_MAX_CONTROL_BODY (64u << 10)
#define MC_TCP_MAX_IDLE_PER_PEER 64
/* A served connection idle this long gives up its thread (parked until bytes arrive). */
#define MC_TCP_PARK_AFTER_MS 1000
#define MC_TCP_PARK_SWEEP_MS 1000 /* idle-timeout sweep of parked connections, at most */
/* A write's payload is applied only this long before its initiator stops waiting (its budget,
 * counted from the frame's arrival): covers the one-way delay and the initiator's time between
 * stamping the budget and sending, so the STATUS still finds it waiting. */
#define MC_TCP_APPLY_MARGIN_MS 50
/* The most of a write's payload copied into segment memory after one check that its initiator
 * is still waiting and its allocation not revoked (apply_payload). */
#define MC_TCP_APPLY_CHUNK (256u << 10)

/* ---- framing helpers ------------------------------------------------------------------- */

/* Sends a frame: header, protobuf body, then optional raw payload, all before deadline_ms. */
static int send_frame(int fd, uint16_t opcode, uint64_t request_id, const uint8_t *body,
                      size_t body_len, const void *payload, size_t payload_len,
                      uint64_t deadline_ms)
{
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(opcode, request_id, (uint32_t)body_len, 0, hdr);
    struct iovec iov[3] = {
        {hdr, sizeof(hdr)}, {(void *)body, body_len}, {(void *)payload, payload_len}};
    return mc_net_sendmsg_all_by(fd, iov, payload_len ? 3 : 2, deadline_ms);
}

/*
 * Receives one frame header and its body (bounded by max_body) into a malloc'd buffer. With
 * arrived_ms, the server's form: *arrived_ms is when (mc_now_ms() clock) the frame's first bytes
 * arrived in the socket, from the kernel's receive stamp (mc_net_recv_stamped), or now when the
 * kernel gave none.
 */
static int recv_frame_at(int fd, uint32_t max_body, mc_frame_header_t *h, uint8_t **body,
                         uint64_t deadline_ms, uint64_t *arrived_ms)
{
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    size_t got = 0;
    *body = NULL;
    if (arrived_ms) {
        uint64_t queued = UINT64_MAX;
        ssize_t n = mc_net_recv_stamped(fd, raw, sizeof(raw), &queued);
        uint64_t now = mc_now_ms();
        *arrived_ms = queued != UINT64_MAX && queued < now ? now - queued : now;
        if (n == 0)
            return MC_ERR_TRANSFER_FAIL; /* hung up */
        if (n > 0)
            got = (size_t)n;
    }
    int rc = mc_net_recv_all_by(fd, raw + got, sizeof(raw) - got, deadline_ms);
    if (rc != 0)
        return rc;
    rc = mc_frame_decode(raw, max_body, h);
    if (rc != 0)
        return rc;
    *body = malloc(h->body_len ? h->body_len : 1);
    if (!*body)
        return MC_ERR_INTERNAL_ERROR;
    rc = mc_net_recv_all_by(fd, *body, h->body_len, deadline_ms);
    if (rc != 0) {
        free(*body);
        *body = NULL;
    }
    return rc;
}

static int recv_frame(int fd, uint32_t max_body, mc_frame_header_t *h, uint8_t **body,
                      uint64_t deadline_ms)
{
    return recv_frame_at(fd, max_body, h, body, deadline_ms, NULL);
}

static int send_status(int fd, uint64_t request_id, int code, const char *message,
                       uint64_t deadline_ms)
{
    Mc__TransferStatus st = MC__TRANSFER_STATUS__INIT;
    uint8_t buf[512];
    st.code = code;
    st.message = (char *)(message ? message : "");
    if (mc__transfer_status__get_packed_size(&st) > sizeof(buf))
        st.message = (char *)"";
    size_t n = mc__transfer_status__pack(&st, buf);
    return send_frame(fd, MC_TE_OP_STATUS, request_id, buf, n, NULL, 0, deadline_ms);
}

static int recv_status(int fd, uint64_t request_id, uint64_t deadline_ms)
{
    mc_frame_header_t h;
    uint8_t *body;
    int rc = recv_frame(fd, MC_TCP_MAX_CONTROL_BODY, &h, &body, deadline_ms);
    if (rc != 0)
        return MC_ERR_TRANSFER_FAIL;
    if (h.opcode == MC_AUTH_OP_RESULT) { /* refused: the peer requires the cluster secret */
        rc = mc_auth_refused("transfer peer", body, h.body_len);
        free(body);
        return rc;
    }
    if (h.opcode != MC_TE_OP_STATUS || h.request_id != request_id) {
        free(body);
        return MC_ERR_TRANSFER_FAIL;
    }
    Mc__TransferStatus *st = NULL;
    rc = mc_pb_decode_reply(&mc__transfer_status__descriptor, body, h.body_len,
                            (ProtobufCMessage **)&st);
    free(body);
    if (rc != 0)
        return MC_ERR_TRANSFER_FAIL;
    rc = st->code;
    if (rc != 0 && st->message && st->message[0])
        MC_ERROR("peer refused transfer: %s", st->message);
    mc__transfer_status__free_unpacked(st, NULL);
    return rc;
}

/* ---- server ----------------------------------------------------------------------------- */

/* A served connection: threaded (a thread serves it) or parked (idle, in te->park_epfd). */
typedef struct mc_tcp_conn {
    int fd;
    int parked;
    int in_epoll; /* registered in park_epfd (disarmed while threaded: EPOLLONESHOT) */
    uint64_t parked_ms;
} mc_tcp_conn_t;

typedef struct conn_arg {
    mc_transfer_engine_t *te;
    int fd;
    int resumed; /* a parked connection served again: it proved the cluster secret already */
} conn_arg_t;

static void *conn_main(void *p);

/* The table entry of fd (lock held), or NULL. */
static mc_tcp_conn_t *conn_find_locked(mc_transfer_engine_t *te, int fd)
{
    for (size_t i = 0; i < te->conn_count; i++) {
        if (te->conns[i].fd == fd)
            return &te->conns[i];
    }
    return NULL;
}

/* Drops fd's entry and closes it (lock held); one that failed is aborted (RST), never closed
 * gracefully. */
static void conn_forget_locked(mc_transfer_engine_t *te, int fd, int failed)
{
    mc_tcp_conn_t *c = conn_find_locked(te, fd);
    if (c) {
        if (c->in_epoll)
            epoll_ctl(te->park_epfd, EPOLL_CTL_DEL, fd, NULL);
        *c = te->conns[--te->conn_count];
    }
    if (failed)
        mc_net_abort(fd);
    else
        close(fd);
}

/* A connection thread ends: its connection is forgotten (closed or aborted). */
static void conn_untrack(mc_transfer_engine_t *te, int fd, int failed)
{
    pthread_mutex_lock(&te->conn_lock);
    conn_forget_locked(te, fd, failed);
    te->conn_threads--;
    pthread_cond_broadcast(&te->conn_cond);
    pthread_mutex_unlock(&te->conn_lock);
}

/* Starts a detached thread serving fd (lock held); 0 or -1. */
static int conn_spawn_locked(mc_transfer_engine_t *te, int fd, int resumed)
{
    conn_arg_t *arg = malloc(sizeof(*arg));
    if (!arg)
        return -1;
    *arg = (conn_arg_t){te, fd, resumed};
    pthread_t tid;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, conn_main, arg);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(arg);
        return -1;
    }
    te->conn_threads++;
    return 0;
}

/*
 * The calling connection thread leaves an idle connection to the park thread and ends. 0 when
 * parked (the thread must return without touching fd), -1 when it could not be (stopping, or
 * epoll failed): then the caller keeps serving it.
 */
static int conn_park(mc_transfer_engine_t *te, int fd)
{
    pthread_mutex_lock(&te->conn_lock);
    mc_tcp_conn_t *c = conn_find_locked(te, fd);
    int rc = -1;
    if (c && !atomic_load(&te->stopping)) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.fd = fd};
        rc = epoll_ctl(te->park_epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
        if (rc == 0) {
            c->in_epoll = 1;
            c->parked = 1;
            c->parked_ms = mc_now_ms();
            te->conn_threads--;
            atomic_fetch_add(&te->conns_parked_total, 1);
            pthread_cond_broadcast(&te->conn_cond);
        }
    }
    pthread_mutex_unlock(&te->conn_lock);
    return rc;
}

/* A parked connection became readable (or hung up): a thread serves it again. */
static void park_wake_conn(mc_transfer_engine_t *te, int fd)
{
    pthread_mutex_lock(&te->conn_lock);
    mc_tcp_conn_t *c = conn_find_locked(te, fd);
    if (c && c->parked) {
        c->parked = 0;
        if (conn_spawn_locked(te, fd, 1) != 0) {
            MC_ERROR("cannot serve a connection again (out of memory or threads): closing it");
            conn_forget_locked(te, fd, 1);
        }
    }
    pthread_mutex_unlock(&te->conn_lock);
}

/* Closes parked connections idle for idle_timeout_ms (nothing is in flight on them). */
static void park_sweep(mc_transfer_engine_t *te, uint64_t now)
{
    if (te->idle_timeout_ms <= 0)
        return;
    pthread_mutex_lock(&te->conn_lock);
    for (size_t i = 0; i < te->conn_count;) {
        mc_tcp_conn_t *c = &te->conns[i];
        if (c->parked && now - c->parked_ms >= (uint64_t)te->idle_timeout_ms) {
            atomic_fetch_add(&te->conns_idle_closed, 1);
            conn_forget_locked(te, c->fd, 0); /* slot i now holds another connection */
            continue;
        }
        i++;
    }
    pthread_mutex_unlock(&te->conn_lock);
}

static void *park_main(void *p)
{
    mc_transfer_engine_t *te = p;
    int period = te->idle_timeout_ms > 0 && te->idle_timeout_ms / 4 < MC_TCP_PARK_SWEEP_MS
                     ? (te->idle_timeout_ms / 4 > 10 ? te->idle_timeout_ms / 4 : 10)
                     : MC_TCP_PARK_SWEEP_MS;
    struct epoll_event ev[64];
    while (!atomic_load(&te->stopping)) {
        int n = epoll_wait(te->park_epfd, ev, 64, period);
        for (int i = 0; i < n && !atomic_load(&te->stopping); i++) {
            if (ev[i].data.fd != te->park_wake)
                park_wake_conn(te, ev[i].data.fd);
        }
        park_sweep(te, mc_now_ms());
    }
    return NULL;
}

static int serve_handshake(mc_transfer_engine_t *te, int fd, const mc_frame_header_t *h,
                           const uint8_t *body, uint64_t deadline_ms)
{
    Mc__HandshakeRequest *req = NULL;
    if (mc_pb_decode(&mc__handshake_request__descriptor, body, h->body_len,
                     (ProtobufCMessage **)&req) != 0)
        return MC_ERR_DESERIALIZE_FAIL;
    MC_VLOG(1, "handshake from %s", req->initiator);
    mc__handshake_request__free_unpacked(req, NULL);
    mc_segment_desc_t d;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = mc_desc_build_local(te, &d);
    if (rc == 0)
        rc = mc_desc_pack(&d, &buf, &len);
    mc_desc_free(&d);
    if (rc == 0)
        rc =
            send_frame(fd, MC_TE_OP_HANDSHAKE_REPLY, h->request_id, buf, len, NULL, 0, deadline_ms);
    free(buf);
    return rc;
}

/* FENCE_RULES: this engine's write-fence rules as they stand, for an rdma initiator. */
static int serve_fence_rules(mc_transfer_engine_t *te, int fd, const mc_frame_header_t *h,
                             uint64_t deadline_ms)
{
    mc_fence_rules_t r;
    int rc = mc_fence_rules_copy(te->fence, &r);
    if (rc != 0)
        return rc;
    Mc__FenceRules msg = MC__FENCE_RULES__INIT;
    msg.epoch = r.epoch;
    msg.floor = r.floor;
    msg.n_tokens = r.n;
    msg.tokens = r.tokens;
    size_t n = mc__fence_rules__get_packed_size(&msg);
    uint8_t *buf = malloc(n ? n : 1);
    rc = MC_ERR_INTERNAL_ERROR;
    if (buf) {
        mc__fence_rules__pack(&msg, buf);
        rc =
            send_frame(fd, MC_TE_OP_FENCE_RULES_REPLY, h->request_id, buf, n, NULL, 0, deadline_ms);
        free(buf);
    }
    mc_fence_rules_free(&r);
    return rc;
}

/* Receives and discards a refused write's payload, so the stream stays in sync. */
static int drain_payload(int fd, uint64_t len, uint64_t deadline_ms)
{
    uint8_t scratch[64 * 1024];
    while (len > 0) {
        size_t n = len < sizeof(scratch) ? (size_t)len : sizeof(scratch);
        int rc = mc_net_recv_all_by(fd, scratch, n, deadline_ms);
        if (rc != 0)
            return rc;
        len -= n;
    }
    return 0;
}

/*
 * Refuses a transfer before any byte moves: a write's payload is drained (never written), then
 * STATUS carries the error. Returns 0 when the connection is still in sync, else non-zero.
 */
static int refuse_transfer(mc_transfer_engine_t *te, int fd, const mc_frame_header_t *h,
                           uint64_t len, const char *peer, const char *why, uint64_t deadline_ms)
{
    int is_write = h->opcode == MC_TE_OP_WRITE;
    MC_WARN("refused request from %s: %s", peer, why);
    if (is_write && drain_payload(fd, len, deadline_ms) != 0)
        return MC_ERR_TRANSFER_FAIL;
    return send_status(fd, h->request_id, is_write ? MC_ERR_INVALID_WRITE : MC_ERR_INVALID_READ,
                       why, deadline_ms);
}

static int writing_add(mc_transfer_engine_t *te, int fd, uint64_t token)
{
    pthread_mutex_lock(&te->writing_lock);
    int rc = 0;
    if (te->writing_count == te->writing_cap) {
        size_t cap = te->writing_cap ? te->writing_cap * 2 : 16;
        struct mc_tcp_writing *v = realloc(te->writing, cap * sizeof(*v));
        if (v) {
            te->writing = v;
            te->writing_cap = cap;
        } else {
            rc = -1; /* not tracked: a fence then waits for its deadline instead */
        }
    }
    if (rc == 0)
        te->writing[te->writing_count++] = (struct mc_tcp_writing){fd, token};
    pthread_mutex_unlock(&te->writing_lock);
    return rc;
}

static void writing_remove(mc_transfer_engine_t *te, int fd)
{
    pthread_mutex_lock(&te->writing_lock);
    for (size_t i = 0; i < te->writing_count; i++) {
        if (te->writing[i].fd == fd) {
            te->writing[i] = te->writing[--te->writing_count];
            break;
        }
    }
    pthread_mutex_unlock(&te->writing_lock);
}

void mc_tcp_fence(mc_transfer_engine_t *te)
{
    pthread_mutex_lock(&te->writing_lock);
    for (size_t i = 0; i < te->writing_count; i++) {
        if (mc_fence_token_refused(te->fence, te->writing[i].token)) {
            MC_WARN("cutting short a write of revoked allocation %llu still being received",
                    (unsigned long long)te->writing[i].token);
            shutdown(te->writing[i].fd, SHUT_RDWR); /* its thread aborts the connection */
        }
    }
    pthread_mutex_unlock(&te->writing_lock);
}

/*
 * Receives a write's payload straight into segment memory, but only bytes already queued in the
 * socket (never a recv that waits: a thread stopped inside one would, once resumed, copy whatever
 * arrived meanwhile), at most MC_TCP_APPLY_CHUNK at a time, each after checking that the
 * initiator is still waiting (apply_by, before its own deadline) and that the allocation was
 * not revoked. Waiting for more bytes is a poll(), which moves nothing. So a receiver stopped
 * at any point resumes into a check, and a write its initiator has reported failed is not
 * applied further. 0, or MC_ERR_TRANSFER_FAIL with errno ETIMEDOUT (out of time), ECANCELED
 * (revoked) or the socket's error.
 */
static int apply_payload(mc_transfer_engine_t *te, int fd, uint8_t *dst, uint64_t len,
                         uint64_t token, uint64_t apply_by)
{
    /* poll() wakes only once a whole copy's worth is queued (SO_RCVLOWAT), so a payload moves
     * in few, large copies rather than one per arriving segment. Put back to 1 after it, for
     * the frames that follow. */
    int lowat = 1, rc = 0;
    while (len > 0) {
        /* The checks come last before the recv: a thread stopped between them and the recv
         * copies once after resuming (the one window no check made here can close). */
        size_t want = len < MC_TCP_APPLY_CHUNK ? (size_t)len : MC_TCP_APPLY_CHUNK;
        uint64_t now = mc_now_ms();
        if (now >= apply_by) {
            errno = ETIMEDOUT;
            rc = MC_ERR_TRANSFER_FAIL;
            break;
        }
        if (token && mc_fence_token_refused(te->fence, token)) {
            errno = ECANCELED;
            rc = MC_ERR_TRANSFER_FAIL;
            break;
        }
        ssize_t n = recv(fd, dst, want, MSG_DONTWAIT);
        if (n > 0) {
            dst += n;
            len -= (uint64_t)n;
            if (len > 0)
                mc_failpoint("tcp.write.chunk_applied");
            continue;
        }
        if (n == 0) {
            errno = ECONNRESET;
            rc = MC_ERR_TRANSFER_FAIL;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            rc = MC_ERR_TRANSFER_FAIL;
            break;
        }
        if (lowat != (int)want &&
            setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &(int){(int)want}, sizeof(int)) == 0)
            lowat = (int)want;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t left = apply_by - now;
        if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR) {
            rc = MC_ERR_TRANSFER_FAIL;
            break;
        }
    }
    int saved = errno;
    if (lowat != 1)
        setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &(int){1}, sizeof(int));
    errno = saved;
    return rc;
}

/*
 * Serves one READ or WRITE. The epoch and range checks and the copy all happen under the
 * registry read lock, so a region is never unregistered, nor the epoch changed
 * (mc_te_set_epoch), under a transfer admitted before. Returns 0 to keep the connection,
 * non-zero to abort it.
 */
static int serve_transfer(mc_transfer_engine_t *te, int fd, const mc_frame_header_t *h,
                          const uint8_t *body, const char *peer, uint64_t arrived_ms,
                          uint64_t deadline_ms)
{
    Mc__TransferHeader *th = NULL;
    if (mc_pb_decode(&mc__transfer_header__descriptor, body, h->body_len,
                     (ProtobufCMessage **)&th) != 0)
        return MC_ERR_DESERIALIZE_FAIL;
    uint64_t addr = th->addr, len = th->length, epoch = th->epoch, token = th->fence_token;
    uint64_t budget = th->budget_ms;
    mc__transfer_header__free_unpacked(th, NULL);
    /* When the initiator stops waiting, on this clock: the frame's arrival plus its budget
     * (less a margin). Without a budget (an older initiator), this request's own deadline. */
    uint64_t apply_by = deadline_ms;
    if (budget != 0) {
        uint64_t until = arrived_ms + budget;
        until = until > MC_TCP_APPLY_MARGIN_MS ? until - MC_TCP_APPLY_MARGIN_MS : 0;
        if (until < apply_by)
            apply_by = until;
    }
    int is_write = h->opcode == MC_TE_OP_WRITE;
    char msg[512];

    pthread_rwlock_rdlock(&te->registry.lock);
    uint64_t mine = atomic_load(&te->epoch);
    if (epoch != 0 && mine != 0 && epoch != mine) {
        pthread_rwlock_unlock(&te->registry.lock);
        snprintf(msg, sizeof(msg),
                 "stale epoch: %s [%#llx, +%llu) carries epoch %llu, segment %s is at epoch %llu",
                 is_write ? "write" : "read", (unsigned long long)addr, (unsigned long long)len,
                 (unsigned long long)epoch, te->name, (unsigned long long)mine);
        return refuse_transfer(te, fd, h, len, peer, msg, deadline_ms);
    }
    const mc_local_region_t *g = len ? mc_registry_find_locked(&te->registry, addr, len) : NULL;
    if (!g) {
        pthread_rwlock_unlock(&te->registry.lock);
        snprintf(msg, sizeof(msg), "%s [%#llx, +%llu) is outside the registered memory of %s",
                 is_write ? "write" : "read", (unsigned long long)addr, (unsigned long long)len,
                 te->name);
        return refuse_transfer(te, fd, h, len, peer, msg, deadline_ms);
    }
    int rc;
    if (is_write) {
        /* Admitted under the write fence (write_fence.c): a revoked allocation's token or a stale
         * epoch is refused here, immediately before the bytes move, and a fence raised while
         * they move waits for them. */
        uint64_t pass;
        char why[256];
        if (mc_net_peer_gone(fd)) { /* gave up while we read the header: not waiting any more */
            pthread_rwlock_unlock(&te->registry.lock);
            MC_WARN("dropping a write of %llu bytes from %s: its initiator reset the connection "
                    "before the payload was applied",
                    (unsigned long long)len, peer);
            return MC_ERR_TRANSFER_FAIL;
        }
        uint64_t now = mc_now_ms();
        if (now >= apply_by) { /* e.g. queued while this process was stopped: it gave up */
            pthread_rwlock_unlock(&te->registry.lock);
            MC_WARN("dropping a write of %llu bytes from %s: it waited %llu ms in this socket, "
                    "past the %llu ms its initiator was going to wait (was this process "
                    "stalled?): none applied",
                    (unsigned long long)len, peer, (unsigned long long)(now - arrived_ms),
                    (unsigned long long)(budget ? budget : (uint64_t)te->timeout_ms));
            return MC_ERR_TRANSFER_FAIL;
        }
        if (mc_fence_admit(te->fence, te->fence_inflight, epoch, token, &pass, why, sizeof(why)) !=
            0) {
            pthread_rwlock_unlock(&te->registry.lock);
            snprintf(msg, sizeof(msg), "write [%#llx, +%llu) on %.128s: %.200s",
                     (unsigned long long)addr, (unsigned long long)len, te->name, why);
            return refuse_transfer(te, fd, h, len, peer, msg, deadline_ms);
        }
        /* Applied only while the initiator still waits: neither a stalled writer nor this
         * process stalled mid-payload lands bytes after the initiator reported failure. A fence
         * that refuses its token meanwhile cuts it short (apply_payload, mc_tcp_fence). */
        int tracked = token != 0 && writing_add(te, fd, token) == 0;
        rc = apply_payload(te, fd, (uint8_t *)(uintptr_t)addr, len, token, apply_by);
        int saved = errno;
        if (tracked)
            writing_remove(te, fd);
        mc_fence_release(te->fence_inflight, pass);
        pthread_rwlock_unlock(&te->registry.lock);
        if (rc == 0)
            rc = send_status(fd, h->request_id, 0, NULL, deadline_ms);
        else if (saved == ETIMEDOUT)
            MC_WARN("aborting connection from %s: write of %llu bytes at %#llx not received "
                    "while its initiator waited (%llu ms from its arrival)",
                    peer, (unsigned long long)len, (unsigned long long)addr,
                    (unsigned long long)(apply_by - arrived_ms));
        else if (saved == ECANCELED)
            MC_WARN("aborting connection from %s: write of %llu bytes at %#llx cut short: its "
                    "allocation (token %llu) was revoked",
                    peer, (unsigned long long)len, (unsigned long long)addr,
                    (unsigned long long)token);
    } else {
        Mc__TransferStatus st = MC__TRANSFER_STATUS__INIT;
        uint8_t buf[64];
        st.message = (char *)"";
        size_t n = mc__transfer_status__pack(&st, buf);
        rc = send_frame(fd, MC_TE_OP_STATUS, h->request_id, buf, n, (void *)(uintptr_t)addr, len,
                        deadline_ms);
        pthread_rwlock_unlock(&te->registry.lock);
    }
    return rc;
}

static void *conn_main(void *p)
{
    conn_arg_t *arg = p;
    mc_transfer_engine_t *te = arg->te;
    int fd = arg->fd, resumed = arg->resumed;
    free(arg);
    char peer[64] = "peer";
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
            struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
            uint32_t a = ntohl(sin->sin_addr.s_addr);
            snprintf(peer, sizeof(peer), "%u.%u.%u.%u:%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
                     a & 255, ntohs(sin->sin_port));
        }
    }
    int failed = 0;
    /* With a secret, nothing is served before the peer proved it (wire/auth.h); a connection
     * resumed from the park thread proved it when it was accepted. */
    if (te->auth && !resumed &&
        mc_auth_server(te->auth, fd, "transfer", peer, mc_now_ms() + MC_AUTH_TIMEOUT_MS) != 0) {
        atomic_fetch_add(&te->auth_refused, 1);
        conn_untrack(te, fd, 1);
        return NULL;
    }
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, MC_TCP_PARK_AFTER_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || atomic_load(&te->stopping))
            break;
        /* Idle (pooled by its peer): no thread waits for it; the park thread watches it. */
        if (n == 0 && conn_park(te, fd) == 0)
            return NULL;
        if (n == 0)
            continue;
        /* A request whose initiator has already given up (it aborts on every failure) is not
         * served: a receiver stalled past the initiator's timeout finds the request and the RST
         * queued together, and Linux would still hand it the queued bytes. */
        if (mc_net_peer_gone(fd)) {
            int queued = 0;
            if (ioctl(fd, FIONREAD, &queued) == 0 && queued > 0) {
                MC_WARN("dropping connection from %s: its initiator reset it before its request "
                        "was read (%d bytes queued; was this process stalled?): none applied",
                        peer, queued);
                failed = 1;
            }
            break; /* else an idle connection its initiator closed */
        }
        /* A whole request — header, body, write payload, reply — within the transfer timeout
         * from when it started to arrive. */
        uint64_t deadline = mc_now_ms() + (uint64_t)te->timeout_ms, arrived;
        mc_frame_header_t h;
        uint8_t *body;
        int rc = recv_frame_at(fd, MC_TCP_MAX_CONTROL_BODY, &h, &body, deadline, &arrived);
        if (rc == MC_ERR_DESERIALIZE_FAIL || rc == MC_ERR_BUFFER_OVERFLOW) {
            MC_WARN("closing connection from %s: %s frame header", peer,
                    rc == MC_ERR_BUFFER_OVERFLOW ? "oversized" : "invalid (bad magic or version)");
            failed = 1;
            break;
        }
        if (rc != 0) {
            failed = 1; /* peer hung up, failed or stalled mid-frame */
            break;
        }
        switch (h.opcode) {
        case MC_TE_OP_HANDSHAKE:
            rc = serve_handshake(te, fd, &h, body, deadline);
            break;
        case MC_TE_OP_FENCE_RULES:
            rc = serve_fence_rules(te, fd, &h, deadline);
            break;
        case MC_TE_OP_WRITE:
        case MC_TE_OP_READ:
            rc = serve_transfer(te, fd, &h, body, peer, arrived, deadline);
            break;
        case MC_AUTH_OP_HELLO: { /* a peer with a secret; this engine has none: say so */
            uint8_t *why;
            size_t wlen;
            rc = mc_auth_result_body(MC_ERR_NOT_SUPPORTED,
                                     "this transfer engine has no cluster "
                                     "secret",
                                     &why, &wlen);
            if (rc == 0) {
                rc = send_frame(fd, MC_AUTH_OP_RESULT, h.request_id, why, wlen, NULL, 0, deadline);
                free(why);
            }
            break;
        }
        default:
            MC_WARN("closing connection from %s: unknown opcode %u", peer, h.opcode);
            rc = MC_ERR_DESERIALIZE_FAIL;
        }
        free(body);
        if (rc == MC_ERR_DESERIALIZE_FAIL)
            MC_WARN("closing connection from %s: undecodable request body", peer);
        if (rc != 0) {
            failed = 1;
            break;
        }
    }
    conn_untrack(te, fd, failed);
    return NULL;
}

static void *accept_main(void *p)
{
    mc_transfer_engine_t *te = p;
    for (;;) {
        int fd = accept4(te->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (atomic_load(&te->stopping)) {
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
            break;
        }
        mc_net_tune_socket(fd);
        pthread_mutex_lock(&te->conn_lock);
        if (te->conn_count >= te->max_connections) {
            pthread_mutex_unlock(&te->conn_lock);
            uint64_t n = atomic_fetch_add(&te->conns_refused, 1) + 1; /* before the close */
            close(fd);
            if (mc_log_ratelimit(&te->last_refuse_log_ms, 1000))
                MC_WARN("transfer engine on port %d: %u connections are open, the limit "
                        "(MC_TE_MAX_CONNECTIONS); refusing new ones (%llu refused so far)",
                        te->listen_port, te->max_connections, (unsigned long long)n);
            continue;
        }
        int ok = 1;
        if (te->conn_count == te->conn_capacity) {
            size_t cap = te->conn_capacity ? te->conn_capacity * 2 : 16;
            mc_tcp_conn_t *v = realloc(te->conns, cap * sizeof(*v));
            ok = v != NULL;
            if (ok) {
                te->conns = v;
                te->conn_capacity = cap;
            }
        }
        if (ok) {
            te->conns[te->conn_count++] = (mc_tcp_conn_t){.fd = fd};
            if (conn_spawn_locked(te, fd, 0) != 0) {
                te->conn_count--;
                ok = 0;
            }
        }
        pthread_mutex_unlock(&te->conn_lock);
        if (!ok) {
            MC_ERROR("cannot serve a new connection (out of memory or threads)");
            close(fd);
        }
    }
    return NULL;
}

int mc_tcp_server_start(mc_transfer_engine_t *te, const char *bind_host, int port)
{
    int bound = 0;
    te->park_epfd = epoll_create1(EPOLL_CLOEXEC);
    te->park_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = te->park_wake};
    if (te->park_epfd < 0 || te->park_wake < 0 ||
        epoll_ctl(te->park_epfd, EPOLL_CTL_ADD, te->park_wake, &ev) != 0) {
        MC_ERROR("transfer engine: cannot create the idle-connection poller: %s", strerror(errno));
        mc_tcp_server_stop(te);
        return MC_ERR_INTERNAL_ERROR;
    }
    int fd = mc_net_listen_tcp(bind_host, port, 512, &bound);
    if (fd < 0) {
        mc_tcp_server_stop(te);
        return fd;
    }
    te->listen_fd = fd;
    te->listen_port = bound;
    /* Accepted connections inherit it: a request's arrival time is known (serve_transfer). */
    if (mc_net_stamp_arrivals(fd) != 0)
        MC_WARN("transfer engine: no receive timestamps (%s): a request queued while this "
                "process was stalled is judged by the time it is read",
                strerror(errno));
    if (pthread_create(&te->park_thread, NULL, park_main, te) != 0) {
        close(te->listen_fd);
        te->listen_fd = -1;
        mc_tcp_server_stop(te);
        return MC_ERR_INTERNAL_ERROR;
    }
    te->park_started = 1;
    if (pthread_create(&te->accept_thread, NULL, accept_main, te) != 0) {
        close(te->listen_fd);
        te->listen_fd = -1;
        mc_tcp_server_stop(te);
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

/* Works on a partly started server too (listen_fd, park_* may be -1 / unstarted). */
void mc_tcp_server_stop(mc_transfer_engine_t *te)
{
    atomic_store(&te->stopping, 1);
    if (te->listen_fd >= 0) {
        shutdown(te->listen_fd, SHUT_RDWR);
        pthread_join(te->accept_thread, NULL);
        close(te->listen_fd);
        te->listen_fd = -1;
    }
    if (te->park_started) {
        uint64_t one = 1;
        if (write(te->park_wake, &one, sizeof(one)) < 0)
            MC_WARN("transfer engine: cannot wake the idle-connection poller: %s", strerror(errno));
        pthread_join(te->park_thread, NULL);
        te->park_started = 0;
    }
    /* Parked connections have no thread: close them here; threaded ones end on shutdown. */
    pthread_mutex_lock(&te->conn_lock);
    for (size_t i = 0; i < te->conn_count;) {
        if (te->conns[i].parked) {
            conn_forget_locked(te, te->conns[i].fd, 0);
            continue;
        }
        shutdown(te->conns[i].fd, SHUT_RDWR);
        i++;
    }
    while (te->conn_threads > 0)
        pthread_cond_wait(&te->conn_cond, &te->conn_lock);
    pthread_mutex_unlock(&te->conn_lock);
    free(te->conns);
    te->conns = NULL;
    te->conn_count = te->conn_capacity = 0;
    if (te->park_wake >= 0)
        close(te->park_wake);
    if (te->park_epfd >= 0)
        close(te->park_epfd);
    te->park_wake = te->park_epfd = -1;
}

void mc_tcp_server_get_stats(mc_transfer_engine_t *te, mc_te_server_stats_t *out)
{
    pthread_mutex_lock(&te->conn_lock);
    out->connections = te->conn_count;
    out->threads = te->conn_threads;
    pthread_mutex_unlock(&te->conn_lock);
    out->connections_refused = atomic_load(&te->conns_refused);
    out->connections_idle_closed = atomic_load(&te->conns_idle_closed);
    out->parks = atomic_load(&te->conns_parked_total);
    out->decode_refused = mc_pb_decode_refused();
    out->max_connections = te->max_connections;
    out->idle_timeout_ms = te->idle_timeout_ms > 0 ? (uint64_t)te->idle_timeout_ms : 0;
}

/* ---- client ----------------------------------------------------------------------------- */

/* 1 when an idle pooled connection is still usable: nothing to read (no FIN from a server that
 * closed it after its idle timeout), not hung up. */
static int pool_usable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) == 0;
}

static int pool_get(mc_transfer_engine_t *te, mc_peer_t *peer, int *pooled, uint64_t deadline_ms)
{
    pthread_mutex_lock(&peer->lock);
    while (peer->idle_count > 0) {
        int fd = peer->idle_fds[--peer->idle_count];
        if (!pool_usable(fd)) {
            close(fd); /* the peer closed it while idle; nothing of ours is queued on it */
            continue;
        }
        pthread_mutex_unlock(&peer->lock);
        *pooled = 1;
        return fd;
    }
    pthread_mutex_unlock(&peer->lock);
    *pooled = 0;
    uint64_t now = mc_now_ms();
    if (now >= deadline_ms) {
        errno = ETIMEDOUT;
        return MC_ERR_TRANSFER_FAIL;
    }
    uint64_t left = deadline_ms - now;
    int fd = mc_net_connect_tcp(peer->host, peer->port,
                                left < MC_TCP_CONNECT_TIMEOUT_MS ? (int)left
                                                                 : MC_TCP_CONNECT_TIMEOUT_MS);
    if (fd < 0 && mc_peer_should_log(peer))
        MC_ERROR("cannot connect to segment %s: %s", peer->name, strerror(errno));
    if (fd >= 0) {
        /*
         * Every close of a data connection is an abort, the implicit one at process exit too: a
         * writer SIGKILLed while its link is down must not leave the kernel retransmitting the
         * rest of a write (a graceful close delivers queued bytes once the link returns, into
         * memory the master may have handed to another object by then). Nothing is ever
         * queued on an idle pooled connection, so aborting those costs nothing.
         */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        int rc = mc_auth_client(te->auth, fd, "transfer", peer->name, deadline_ms);
        if (rc != 0) {
            mc_net_abort(fd);
            return rc == MC_ERR_ILLEGAL_CLIENT ? rc : MC_ERR_TRANSFER_FAIL;
        }
    }
    return fd;
}

/* Returns a connection in a clean protocol state to the pool (closed when the pool is full). */
static void pool_put(mc_peer_t *peer, int fd)
{
    pthread_mutex_lock(&peer->lock);
    if (peer->idle_count == peer->idle_capacity && peer->idle_capacity < MC_TCP_MAX_IDLE_PER_PEER) {
        size_t cap = peer->idle_capacity ? peer->idle_capacity * 2 : 4;
        int *n = realloc(peer->idle_fds, cap * sizeof(*n));
        if (n) {
            peer->idle_fds = n;
            peer->idle_capacity = cap;
        }
    }
    if (peer->idle_count < peer->idle_capacity) {
        peer->idle_fds[peer->idle_count++] = fd;
        fd = -1;
    }
    pthread_mutex_unlock(&peer->lock);
    if (fd >= 0)
        close(fd);
}

/* Idle connections in a clean state: a graceful close is safe. */
void mc_tcp_pool_close(mc_peer_t *peer)
{
    for (size_t i = 0; i < peer->idle_count; i++)
        close(peer->idle_fds[i]);
    free(peer->idle_fds);
    peer->idle_fds = NULL;
    peer->idle_count = peer->idle_capacity = 0;
}

static _Atomic uint64_t next_request_id = 1;

static int exchange(int fd, int opcode, void *local, uint64_t remote, uint64_t len, uint64_t epoch,
                    uint64_t token, uint64_t deadline_ms)
{
    uint64_t id = atomic_fetch_add(&next_request_id, 1);
    Mc__TransferHeader th = MC__TRANSFER_HEADER__INIT;
    uint8_t body[64]; /* five varints of at most 10 bytes, and their tags */
    th.addr = remote;
    th.length = len;
    th.epoch = epoch;
    th.fence_token = opcode == MC_TE_OP_WRITE ? token : 0;
    if (opcode == MC_TE_OP_WRITE) { /* how long this side waits: the owner applies only within */
        uint64_t now = mc_now_ms();
        th.budget_ms = deadline_ms > now ? deadline_ms - now : 1;
    }
    size_t n = mc__transfer_header__pack(&th, body);
    int rc;
    if (opcode == MC_TE_OP_WRITE) {
        rc = send_frame(fd, MC_TE_OP_WRITE, id, body, n, local, len, deadline_ms);
        if (rc == 0)
            rc = recv_status(fd, id, deadline_ms);
    } else {
        rc = send_frame(fd, MC_TE_OP_READ, id, body, n, NULL, 0, deadline_ms);
        if (rc == 0)
            rc = recv_status(fd, id, deadline_ms);
        if (rc == 0)
            rc = mc_net_recv_all_by(fd, local, len, deadline_ms);
    }
    return rc;
}

/*
 * The whole slice — connecting, sending, the reply, a retry — is bounded by the request's
 * deadline, not a fresh timeout per slice: slices queued behind a stalled peer's never wait a
 * full timeout each. A connection whose exchange failed in any way is aborted
 * (RST): a graceful close would let the kernel deliver a write's queued bytes later, e.g. once
 * a cut link comes back, into memory the target may have given to another object since.
 */
int mc_tcp_transfer(mc_transfer_engine_t *te, mc_peer_t *peer, int opcode, void *local,
                    uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token,
                    uint64_t deadline)
{
    for (int attempt = 0;; attempt++) {
        int pooled;
        int fd = pool_get(te, peer, &pooled, deadline);
        if (fd < 0)
            return fd == MC_ERR_ILLEGAL_CLIENT ? fd : MC_ERR_TRANSFER_FAIL;
        int rc = exchange(fd, opcode, local, remote, len, epoch, token, deadline);
        if (rc == 0) {
            pool_put(peer, fd);
            return 0;
        }
        int saved = errno;
        mc_net_abort(fd);
        if (rc == MC_ERR_INVALID_WRITE || rc == MC_ERR_INVALID_READ || rc == MC_ERR_ILLEGAL_CLIENT)
            return rc;
        /* A pooled connection may have died while idle: one retry on a fresh one, unless the
         * peer merely stalled (the deadline has passed). */
        if (!pooled || attempt > 0 || mc_now_ms() >= deadline) {
            if (mc_peer_should_log(peer))
                MC_ERROR("%s of %llu bytes at %#llx on segment %s failed: %s",
                         opcode == MC_TE_OP_WRITE ? "write" : "read", (unsigned long long)len,
                         (unsigned long long)remote, peer->name,
                         saved == ETIMEDOUT || saved == EAGAIN
                             ? "peer did not complete it within the transfer timeout"
                             : strerror(saved));
            return MC_ERR_TRANSFER_FAIL;
        }
    }
}

/*
 * One request to the owner at host:port on a connection of its own (the cluster-secret
 * handshake first), by deadline_ms as mc_tcp_handshake: sends `op` with body[0..n) and receives
 * the answer. 0 with *reply (malloc'd, the caller frees) of *reply_len bytes when the answer is
 * `reply_op`; else an error (the owner's refusal of this engine included).
 */
static int owner_request(mc_transfer_engine_t *te, const char *host, int port, uint16_t op,
                         const uint8_t *body, size_t n, uint16_t reply_op, uint8_t **reply,
                         size_t *reply_len, uint64_t deadline_ms)
{
    uint64_t now = mc_now_ms();
    uint64_t deadline = now + (uint64_t)(te->timeout_ms < 10000 ? te->timeout_ms : 10000);
    if (deadline_ms && deadline_ms < deadline)
        deadline = deadline_ms; /* the request that needs the answer has less time left */
    if (now >= deadline)
        return MC_ERR_TRANSFER_FAIL;
    uint64_t left = deadline - now;
    int fd = mc_net_connect_tcp(
        host, port, left < MC_TCP_CONNECT_TIMEOUT_MS ? (int)left : MC_TCP_CONNECT_TIMEOUT_MS);
    if (fd < 0)
        return fd;
    char peer[MC_ENDPOINT_MAX];
    snprintf(peer, sizeof(peer), "%s:%d", host, port);
    int rc = mc_auth_client(te->auth, fd, "transfer", peer, deadline);
    if (rc == 0)
        rc = send_frame(fd, op, 0, body, n, NULL, 0, deadline);
    if (rc == 0) {
        mc_frame_header_t h;
        uint8_t *answer;
        rc = recv_frame(fd, MC_FRAME_DEFAULT_MAX_BODY, &h, &answer, deadline);
        if (rc == 0) {
            if (h.opcode == reply_op) {
                *reply = answer;
                *reply_len = h.body_len;
                answer = NULL;
            } else {
                rc = h.opcode == MC_AUTH_OP_RESULT ? mc_auth_refused(peer, answer, h.body_len)
                                                   : MC_ERR_DESERIALIZE_FAIL;
            }
            free(answer);
        }
    }
    if (rc == 0)
        close(fd);
    else
        mc_net_abort(fd);
    return rc;
}

int mc_tcp_handshake(mc_transfer_engine_t *te, const char *host, int port, mc_segment_desc_t *out,
                     uint64_t deadline_ms)
{
    Mc__HandshakeRequest req = MC__HANDSHAKE_REQUEST__INIT;
    req.initiator = te->name;
    size_t n = mc__handshake_request__get_packed_size(&req);
    uint8_t *body = malloc(n ? n : 1), *reply = NULL;
    if (!body)
        return MC_ERR_INTERNAL_ERROR;
    mc__handshake_request__pack(&req, body);
    size_t len = 0;
    int rc = owner_request(te, host, port, MC_TE_OP_HANDSHAKE, body, n, MC_TE_OP_HANDSHAKE_REPLY,
                           &reply, &len, deadline_ms);
    free(body);
    if (rc == 0)
        rc = mc_desc_unpack(reply, len, out);
    free(reply);
    return rc;
}

int mc_tcp_fence_rules(mc_transfer_engine_t *te, const char *host, int port, mc_fence_rules_t *out,
                       uint64_t deadline_ms)
{
    memset(out, 0, sizeof(*out));
    uint8_t *reply = NULL;
    size_t len = 0;
    int rc = owner_request(te, host, port, MC_TE_OP_FENCE_RULES, NULL, 0,
                           MC_TE_OP_FENCE_RULES_REPLY, &reply, &len, deadline_ms);
    if (rc != 0)
        return rc;
    Mc__FenceRules *msg = NULL;
    rc = mc_pb_decode(&mc__fence_rules__descriptor, reply, len, (ProtobufCMessage **)&msg);
    free(reply);
    if (rc != 0)
        return MC_ERR_DESERIALIZE_FAIL;
    /* Bounded and sorted as the owner keeps them; anything else is not an owner's answer. */
    int sorted = msg->n_tokens <= MC_TE_MAX_REFUSED_TOKENS;
    for (size_t i = 1; sorted && i < msg->n_tokens; i++)
        sorted = msg->tokens[i - 1] < msg->tokens[i];
    if (!sorted) {
        mc__fence_rules__free_unpacked(msg, NULL);
        return MC_ERR_DESERIALIZE_FAIL;
    }
    out->epoch = msg->epoch;
    out->floor = msg->floor;
    if (msg->n_tokens > 0) {
        out->tokens = malloc(msg->n_tokens * sizeof(*out->tokens));
        if (!out->tokens) {
            mc__fence_rules__free_unpacked(msg, NULL);
            return MC_ERR_INTERNAL_ERROR;
        }
        memcpy(out->tokens, msg->tokens, msg->n_tokens * sizeof(*out->tokens));
        out->n = msg->n_tokens;
    }
    mc__fence_rules__free_unpacked(msg, NULL);
    return 0;
}

/* ---- the transport table's slots ---------------------------------------------------------- */

static int tcp_start(mc_transfer_engine_t *te, const mc_transport_start_args_t *args)
{
    int rc = mc_tcp_server_start(te, args->bind_host, args->port);
    if (rc != 0)
        MC_ERROR("transfer engine cannot listen on port %d", args->port);
    return rc;
}

static void tcp_peer_close(mc_transfer_engine_t *te, mc_peer_t *peer)
{
    (void)te;
    mc_tcp_pool_close(peer);
}

static int tcp_transfer(mc_transfer_engine_t *te, size_t worker, mc_peer_t *peer, int opcode,
                        void *local, uint64_t remote, uint64_t len, uint64_t epoch, uint64_t token,
                        uint64_t deadline_ms)
{
    (void)worker; /* a pooled connection serves any thread */
    return mc_tcp_transfer(te, peer, opcode, local, remote, len, epoch, token, deadline_ms);
}

/* tcp receives of a token refused now stop at once instead of at their deadline. */
static int tcp_fence(mc_transfer_engine_t *te, int tokens_refused, int replace_endpoints)
{
    (void)replace_endpoints; /* every tcp write is admitted under the fence page */
    if (tokens_refused)
        mc_tcp_fence(te);
    return 0;
}

const mc_transport_ops_t mc_tcp_transport = {
    .name = "tcp",
    .start = tcp_start,
    .stop = mc_tcp_server_stop,
    .handshake = mc_tcp_handshake,
    .peer_close = tcp_peer_close,
    .transfer = tcp_transfer,
    .fence = tcp_fence,
    .get_stats = mc_tcp_server_get_stats,
};
