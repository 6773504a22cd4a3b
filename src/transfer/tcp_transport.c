/*
 * tcp_transport.c — the Transfer Engine's peer protocol over TCP, both ends.
 *
 * Server: one accept thread, and one thread per connection (peers pool their connections, so
 * there are few, and a blocking thread per stream is the fastest way to move bulk bytes on few
 * cores). Each frame (frame.h) is one request:
 *   HANDSHAKE  -> HANDSHAKE_REPLY with this segment's descriptor (P2PHANDSHAKE metadata)
 *   WRITE      -> the range is checked, then the payload is received straight into the segment
 *                 memory, then STATUS confirms the bytes are in place
 *   READ       -> STATUS, then the bytes straight from the segment memory
 * A frame with a bad magic/version, an oversized or undecodable body, or a write outside the
 * registered memory closes that connection; other connections are unaffected.
 *
 * Client: a pool of idle connections per peer. A request borrows one, and returns it only when
 * the exchange completed cleanly. A request on a pooled connection that turns out dead is retried
 * once on a fresh connection (reads and writes are idempotent). Sockets carry send/receive
 * timeouts, so a peer that stops answering fails the request within the transfer timeout.
 */
#include "transfer_internal.h"

#include "frame.h"
#include "log.h"
#include "transfer.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MC_TCP_CONNECT_TIMEOUT_MS 3000
#define MC_TCP_MAX_CONTROL_BODY (64u << 10)
#define MC_TCP_MAX_IDLE_PER_PEER 64

/* ---- framing helpers ------------------------------------------------------------------- */

static int send_iov_all(int fd, struct iovec *iov, int iovcnt)
{
    while (iovcnt > 0) {
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return MC_ERR_TRANSFER_FAIL;
        }
        while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* Sends a frame: header, protobuf body, then optional raw payload. */
static int send_frame(int fd, uint16_t opcode, uint64_t request_id, const uint8_t *body,
                      size_t body_len, const void *payload, size_t payload_len)
{
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(opcode, request_id, (uint32_t)body_len, 0, hdr);
    struct iovec iov[3] = {{hdr, sizeof(hdr)},
                           {(void *)body, body_len},
                           {(void *)payload, payload_len}};
    return send_iov_all(fd, iov, payload_len ? 3 : 2);
}

/* Receives one frame header and its body (bounded by max_body) into a malloc'd buffer. */
static int recv_frame(int fd, uint32_t max_body, mc_frame_header_t *h, uint8_t **body)
{
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    *body = NULL;
    int rc = mc_net_recv_all(fd, raw, sizeof(raw));
    if (rc != 0)
        return rc;
    rc = mc_frame_decode(raw, max_body, h);
    if (rc != 0)
        return rc;
    *body = malloc(h->body_len ? h->body_len : 1);
    if (!*body)
        return MC_ERR_INTERNAL_ERROR;
    rc = mc_net_recv_all(fd, *body, h->body_len);
    if (rc != 0) {
        free(*body);
        *body = NULL;
    }
    return rc;
}

static int send_status(int fd, uint64_t request_id, int code, const char *message)
{
    Mc__TransferStatus st = MC__TRANSFER_STATUS__INIT;
    uint8_t buf[512];
    st.code = code;
    st.message = (char *)(message ? message : "");
    if (mc__transfer_status__get_packed_size(&st) > sizeof(buf))
        st.message = (char *)"";
    size_t n = mc__transfer_status__pack(&st, buf);
    return send_frame(fd, MC_TE_OP_STATUS, request_id, buf, n, NULL, 0);
}

static int recv_status(int fd, uint64_t request_id)
{
    mc_frame_header_t h;
    uint8_t *body;
    int rc = recv_frame(fd, MC_TCP_MAX_CONTROL_BODY, &h, &body);
    if (rc != 0)
        return MC_ERR_TRANSFER_FAIL;
    if (h.opcode != MC_TE_OP_STATUS || h.request_id != request_id) {
        free(body);
        return MC_ERR_TRANSFER_FAIL;
    }
    Mc__TransferStatus *st = mc__transfer_status__unpack(NULL, h.body_len, body);
    free(body);
    if (!st)
        return MC_ERR_TRANSFER_FAIL;
    rc = st->code;
    if (rc != 0 && st->message && st->message[0])
        MC_ERROR("peer refused transfer: %s", st->message);
    mc__transfer_status__free_unpacked(st, NULL);
    return rc;
}

/* ---- server ----------------------------------------------------------------------------- */

typedef struct conn_arg {
    mc_transfer_engine_t *te;
    int fd;
} conn_arg_t;

static void conn_untrack(mc_transfer_engine_t *te, int fd)
{
    pthread_mutex_lock(&te->conn_lock);
    for (size_t i = 0; i < te->conn_count; i++) {
        if (te->conn_fds[i] == fd) {
            te->conn_fds[i] = te->conn_fds[--te->conn_count];
            break;
        }
    }
    close(fd);
    te->conn_threads--;
    pthread_cond_broadcast(&te->conn_cond);
    pthread_mutex_unlock(&te->conn_lock);
}

static int serve_handshake(mc_transfer_engine_t *te, int fd, const mc_frame_header_t *h,
                           const uint8_t *body)
{
    Mc__HandshakeRequest *req = mc__handshake_request__unpack(NULL, h->body_len, body);
    if (!req)
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
        rc = send_frame(fd, MC_TE_OP_HANDSHAKE_REPLY, h->request_id, buf, len, NULL, 0);
    free(buf);
    return rc;
}

/* Returns 0 to keep the connection, non-zero to close it. */
static int serve_transfer(mc_transfer_engine_t *te, int fd, const mc_frame_header_t *h,
                          const uint8_t *body, const char *peer)
{
    Mc__TransferHeader *th = mc__transfer_header__unpack(NULL, h->body_len, body);
    if (!th)
        return MC_ERR_DESERIALIZE_FAIL;
    uint64_t addr = th->addr, len = th->length;
    mc__transfer_header__free_unpacked(th, NULL);
    int is_write = h->opcode == MC_TE_OP_WRITE;

    pthread_rwlock_rdlock(&te->registry.lock);
    const mc_local_region_t *g = len ? mc_registry_find_locked(&te->registry, addr, len) : NULL;
    if (!g) {
        pthread_rwlock_unlock(&te->registry.lock);
        char msg[512];
        snprintf(msg, sizeof(msg), "%s [%#llx, +%llu) is outside the registered memory of %s",
                 is_write ? "write" : "read", (unsigned long long)addr, (unsigned long long)len,
                 te->name);
        MC_WARN("refused request from %s: %s", peer, msg);
        send_status(fd, h->request_id, is_write ? MC_ERR_INVALID_WRITE : MC_ERR_INVALID_READ,
                    msg);
        /* A refused write's payload is still on the wire: the stream cannot be resynced. */
        return is_write ? MC_ERR_INVALID_WRITE : 0;
    }
    int rc;
    if (is_write) {
        rc = mc_net_recv_all(fd, (void *)(uintptr_t)addr, len);
        pthread_rwlock_unlock(&te->registry.lock);
        if (rc == 0)
            rc = send_status(fd, h->request_id, 0, NULL);
    } else {
        Mc__TransferStatus st = MC__TRANSFER_STATUS__INIT;
        uint8_t buf[64];
        st.message = (char *)"";
        size_t n = mc__transfer_status__pack(&st, buf);
        rc = send_frame(fd, MC_TE_OP_STATUS, h->request_id, buf, n, (void *)(uintptr_t)addr, len);
        pthread_rwlock_unlock(&te->registry.lock);
    }
    return rc;
}

static void *conn_main(void *p)
{
    conn_arg_t *arg = p;
    mc_transfer_engine_t *te = arg->te;
    int fd = arg->fd;
    free(arg);
    char peer[64] = "peer";
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
            struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
            uint32_t a = ntohl(sin->sin_addr.s_addr);
            snprintf(peer, sizeof(peer), "%u.%u.%u.%u:%u", a >> 24, (a >> 16) & 255,
                     (a >> 8) & 255, a & 255, ntohs(sin->sin_port));
        }
    }
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, -1); /* an idle pooled connection may wait indefinitely */
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || atomic_load(&te->stopping))
            break;
        mc_frame_header_t h;
        uint8_t *body;
        int rc = recv_frame(fd, MC_TCP_MAX_CONTROL_BODY, &h, &body);
        if (rc == MC_ERR_DESERIALIZE_FAIL || rc == MC_ERR_BUFFER_OVERFLOW) {
            MC_WARN("closing connection from %s: %s frame header", peer,
                    rc == MC_ERR_BUFFER_OVERFLOW ? "oversized" : "invalid (bad magic or version)");
            break;
        }
        if (rc != 0)
            break;
        switch (h.opcode) {
        case MC_TE_OP_HANDSHAKE:
            rc = serve_handshake(te, fd, &h, body);
            break;
        case MC_TE_OP_WRITE:
        case MC_TE_OP_READ:
            rc = serve_transfer(te, fd, &h, body, peer);
            break;
        default:
            MC_WARN("closing connection from %s: unknown opcode %u", peer, h.opcode);
            rc = MC_ERR_DESERIALIZE_FAIL;
        }
        free(body);
        if (rc == MC_ERR_DESERIALIZE_FAIL)
            MC_WARN("closing connection from %s: undecodable request body", peer);
        if (rc != 0)
            break;
    }
    conn_untrack(te, fd);
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
        mc_net_set_timeouts(fd, te->timeout_ms);
        conn_arg_t *arg = malloc(sizeof(*arg));
        pthread_mutex_lock(&te->conn_lock);
        int ok = arg != NULL;
        if (ok && te->conn_count == te->conn_capacity) {
            size_t cap = te->conn_capacity ? te->conn_capacity * 2 : 16;
            int *n = realloc(te->conn_fds, cap * sizeof(*n));
            ok = n != NULL;
            if (ok) {
                te->conn_fds = n;
                te->conn_capacity = cap;
            }
        }
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (ok) {
            arg->te = te;
            arg->fd = fd;
            te->conn_fds[te->conn_count++] = fd;
            te->conn_threads++;
            if (pthread_create(&tid, &attr, conn_main, arg) != 0) {
                te->conn_count--;
                te->conn_threads--;
                ok = 0;
            }
        }
        pthread_attr_destroy(&attr);
        pthread_mutex_unlock(&te->conn_lock);
        if (!ok) {
            MC_ERROR("cannot serve a new connection (out of memory or threads)");
            free(arg);
            close(fd);
        }
    }
    return NULL;
}

int mc_tcp_server_start(mc_transfer_engine_t *te, const char *bind_host, int port)
{
    int bound = 0;
    int fd = mc_net_listen_tcp(bind_host, port, 512, &bound);
    if (fd < 0)
        return fd;
    te->listen_fd = fd;
    te->listen_port = bound;
    if (pthread_create(&te->accept_thread, NULL, accept_main, te) != 0) {
        close(fd);
        te->listen_fd = -1;
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

void mc_tcp_server_stop(mc_transfer_engine_t *te)
{
    if (te->listen_fd < 0)
        return;
    atomic_store(&te->stopping, 1);
    shutdown(te->listen_fd, SHUT_RDWR);
    pthread_join(te->accept_thread, NULL);
    close(te->listen_fd);
    te->listen_fd = -1;
    pthread_mutex_lock(&te->conn_lock);
    for (size_t i = 0; i < te->conn_count; i++)
        shutdown(te->conn_fds[i], SHUT_RDWR);
    while (te->conn_threads > 0)
        pthread_cond_wait(&te->conn_cond, &te->conn_lock);
    pthread_mutex_unlock(&te->conn_lock);
    free(te->conn_fds);
    te->conn_fds = NULL;
    te->conn_count = te->conn_capacity = 0;
}

/* ---- client ----------------------------------------------------------------------------- */

static int pool_get(mc_transfer_engine_t *te, mc_peer_t *peer, int *pooled)
{
    pthread_mutex_lock(&peer->lock);
    if (peer->idle_count > 0) {
        int fd = peer->idle_fds[--peer->idle_count];
        pthread_mutex_unlock(&peer->lock);
        *pooled = 1;
        return fd;
    }
    pthread_mutex_unlock(&peer->lock);
    *pooled = 0;
    int fd = mc_net_connect_tcp(peer->host, peer->port, MC_TCP_CONNECT_TIMEOUT_MS);
    if (fd < 0) {
        if (mc_peer_should_log(peer))
            MC_ERROR("cannot connect to segment %s: %s", peer->name, strerror(errno));
        return fd;
    }
    mc_net_set_timeouts(fd, te->timeout_ms);
    return fd;
}

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

void mc_tcp_pool_close(mc_peer_t *peer)
{
    for (size_t i = 0; i < peer->idle_count; i++)
        close(peer->idle_fds[i]);
    free(peer->idle_fds);
    peer->idle_fds = NULL;
    peer->idle_count = peer->idle_capacity = 0;
}

static _Atomic uint64_t next_request_id = 1;

static int exchange(int fd, int opcode, void *local, uint64_t remote, uint64_t len)
{
    uint64_t id = atomic_fetch_add(&next_request_id, 1);
    Mc__TransferHeader th = MC__TRANSFER_HEADER__INIT;
    uint8_t body[32];
    th.addr = remote;
    th.length = len;
    size_t n = mc__transfer_header__pack(&th, body);
    int rc;
    if (opcode == MC_TE_OP_WRITE) {
        rc = send_frame(fd, MC_TE_OP_WRITE, id, body, n, local, len);
        if (rc == 0)
            rc = recv_status(fd, id);
    } else {
        rc = send_frame(fd, MC_TE_OP_READ, id, body, n, NULL, 0);
        if (rc == 0)
            rc = recv_status(fd, id);
        if (rc == 0)
            rc = mc_net_recv_all(fd, local, len);
    }
    return rc;
}

int mc_tcp_transfer(mc_transfer_engine_t *te, mc_peer_t *peer, int opcode, void *local,
                    uint64_t remote, uint64_t len)
{
    for (int attempt = 0;; attempt++) {
        int pooled;
        int fd = pool_get(te, peer, &pooled);
        if (fd < 0)
            return MC_ERR_TRANSFER_FAIL;
        int rc = exchange(fd, opcode, local, remote, len);
        if (rc == 0) {
            pool_put(peer, fd);
            return 0;
        }
        int saved = errno;
        close(fd);
        if (rc == MC_ERR_INVALID_WRITE || rc == MC_ERR_INVALID_READ)
            return rc;
        if (!pooled || attempt > 0) {
            if (mc_peer_should_log(peer))
                MC_ERROR("%s of %llu bytes at %#llx on segment %s failed: %s",
                     opcode == MC_TE_OP_WRITE ? "write" : "read", (unsigned long long)len,
                     (unsigned long long)remote, peer->name,
                     saved == EAGAIN ? "peer did not answer within the transfer timeout"
                                     : strerror(saved));
            return MC_ERR_TRANSFER_FAIL;
        }
    }
}

int mc_tcp_handshake(mc_transfer_engine_t *te, const char *host, int port, mc_segment_desc_t *out)
{
    int fd = mc_net_connect_tcp(host, port, MC_TCP_CONNECT_TIMEOUT_MS);
    if (fd < 0)
        return fd;
    mc_net_set_timeouts(fd, te->timeout_ms < 10000 ? te->timeout_ms : 10000);
    Mc__HandshakeRequest req = MC__HANDSHAKE_REQUEST__INIT;
    req.initiator = te->name;
    size_t n = mc__handshake_request__get_packed_size(&req);
    uint8_t *body = malloc(n ? n : 1);
    int rc = MC_ERR_INTERNAL_ERROR;
    if (body) {
        mc__handshake_request__pack(&req, body);
        rc = send_frame(fd, MC_TE_OP_HANDSHAKE, 0, body, n, NULL, 0);
        free(body);
    }
    if (rc == 0) {
        mc_frame_header_t h;
        uint8_t *reply;
        rc = recv_frame(fd, MC_FRAME_DEFAULT_MAX_BODY, &h, &reply);
        if (rc == 0) {
            rc = h.opcode == MC_TE_OP_HANDSHAKE_REPLY ? mc_desc_unpack(reply, h.body_len, out)
                                                      : MC_ERR_DESERIALIZE_FAIL;
            free(reply);
        }
    }
    close(fd);
    return rc;
}
