/*
 * dummy_wire.c — frame I/O of the dummy-client protocol (dummy_wire.h), on a unix stream socket:
 * the frame header of wire/frame.h, then the body, with at most one descriptor riding on the
 * first byte (SCM_RIGHTS). Non-blocking sends and receives under one deadline, so neither end
 * waits forever on a peer that stopped reading or writing.
 */
#include "dummy_wire.h"

#include "mooncake/errors.h"
#include "net.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int mc_dummy_wait_fd(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = mc_now_ms();
        if (now >= deadline_ms)
            return MC_ERR_RPC_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)(deadline_ms - now));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return MC_ERR_RPC_FAIL;
    }
}

int mc_dummy_send_frame(int fd, uint16_t opcode, uint64_t request_id, const uint8_t *body,
                        size_t len, int pass_fd, uint64_t deadline_ms)
{
    uint8_t head[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(opcode, request_id, (uint32_t)len, 0, head);
    struct iovec iov[2] = {{head, sizeof(head)}, {(void *)body, len}};
    int iovcnt = len ? 2 : 1, idx = 0;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    while (idx < iovcnt) {
        struct msghdr msg = {.msg_iov = iov + idx, .msg_iovlen = (size_t)(iovcnt - idx)};
        if (pass_fd >= 0) {
            memset(&ctl, 0, sizeof(ctl));
            msg.msg_control = ctl.buf;
            msg.msg_controllen = sizeof(ctl.buf);
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
        }
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return MC_ERR_RPC_FAIL;
            int rc = mc_dummy_wait_fd(fd, POLLOUT, deadline_ms);
            if (rc != 0)
                return rc;
            continue;
        }
        pass_fd = -1; /* sent with the first byte */
        size_t left = (size_t)n;
        while (idx < iovcnt && left >= iov[idx].iov_len)
            left -= iov[idx++].iov_len;
        if (idx < iovcnt) {
            iov[idx].iov_base = (uint8_t *)iov[idx].iov_base + left;
            iov[idx].iov_len -= left;
        }
    }
    return 0;
}

/* Reads exactly len bytes; descriptors that arrive go to *passed_fd (first) or are closed. */
static int recv_exact(int fd, uint8_t *buf, size_t len, int *passed_fd, uint64_t deadline_ms)
{
    size_t got = 0;
    while (got < len) {
        int rc = mc_dummy_wait_fd(fd, POLLIN, deadline_ms);
        if (rc != 0)
            return rc;
        union {
            char buf[CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {buf + got, len - got};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = ctl.buf,
                             .msg_controllen = sizeof(ctl)};
        ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n == 0)
            return MC_ERR_RPC_FAIL;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return MC_ERR_RPC_FAIL;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int f;
                memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (passed_fd && *passed_fd < 0)
                    *passed_fd = f;
                else
                    close(f);
            }
        }
        got += (size_t)n;
    }
    return 0;
}

int mc_dummy_recv_frame(int fd, uint32_t max_body, mc_frame_header_t *h, uint8_t **body,
                        int *passed_fd, uint64_t deadline_ms)
{
    *body = NULL;
    if (passed_fd)
        *passed_fd = -1;
    uint8_t head[MC_FRAME_HEADER_SIZE];
    int rc = recv_exact(fd, head, sizeof(head), passed_fd, deadline_ms);
    if (rc == 0)
        rc = mc_frame_decode(head, max_body, h);
    if (rc == 0 && h->body_len) {
        *body = malloc(h->body_len);
        rc = *body ? recv_exact(fd, *body, h->body_len, passed_fd, deadline_ms)
                   : MC_ERR_INTERNAL_ERROR;
    }
    if (rc != 0) {
        free(*body);
        *body = NULL;
        if (passed_fd && *passed_fd >= 0) {
            close(*passed_fd);
            *passed_fd = -1;
        }
    }
    return rc;
}
