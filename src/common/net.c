/*
 * net.c — socket and address helpers (net.h).
 */
#include "net.h"

#include "log.h"
#include "mooncake/errors.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MC_SOCKET_BUFFER_BYTES (4 << 20)

int mc_net_split_endpoint(const char *endpoint, int default_port, char host[MC_HOST_MAX], int *port)
{
    if (!endpoint || !*endpoint)
        return MC_ERR_INVALID_PARAMS;
    const char *colon;
    const char *hstart = endpoint;
    size_t hlen;
    if (endpoint[0] == '[') {
        const char *close = strchr(endpoint, ']');
        if (!close)
            return MC_ERR_INVALID_PARAMS;
        hstart = endpoint + 1;
        hlen = (size_t)(close - hstart);
        colon = close[1] == ':' ? close + 1 : NULL;
        if (close[1] != '\0' && !colon)
            return MC_ERR_INVALID_PARAMS;
    } else {
        colon = strrchr(endpoint, ':');
        if (colon && strchr(endpoint, ':') != colon)
            return MC_ERR_INVALID_PARAMS; /* bare IPv6 must be bracketed */
        hlen = colon ? (size_t)(colon - endpoint) : strlen(endpoint);
    }
    if (hlen == 0 || hlen >= MC_HOST_MAX)
        return MC_ERR_INVALID_PARAMS;
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    if (!colon) {
        *port = default_port;
        return 0;
    }
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || errno || p < 0 || p > 65535)
        return MC_ERR_INVALID_PARAMS;
    *port = (int)p;
    return 0;
}

int mc_net_is_wildcard(const char *host)
{
    return !host || !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*");
}

int mc_net_same_host(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return 0;
}

int mc_net_interface_of(const char *host, char *out, size_t cap)
{
    if (mc_net_is_wildcard(host) || !out || cap == 0)
        return MC_ERR_INVALID_PARAMS;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return MC_ERR_INVALID_PARAMS;
    struct ifaddrs *ifs = NULL;
    int rc = MC_ERR_INVALID_PARAMS;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && rc != 0; i = i->ifa_next) {
            if (!i->ifa_addr || !i->ifa_name)
                continue;
            for (struct addrinfo *a = res; a && rc != 0; a = a->ai_next) {
                if (mc_net_same_host(i->ifa_addr, a->ai_addr) && strlen(i->ifa_name) < cap) {
                    snprintf(out, cap, "%s", i->ifa_name);
                    rc = 0;
                }
            }
        }
        freeifaddrs(ifs);
    }
    freeaddrinfo(res);
    return rc;
}

void mc_net_primary_address(char out[MC_HOST_MAX])
{
    struct ifaddrs *ifs = NULL;
    snprintf(out, MC_HOST_MAX, "127.0.0.1");
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;
        inet_ntop(AF_INET, &sin->sin_addr, out, MC_HOST_MAX);
        break;
    }
    freeifaddrs(ifs);
}

void mc_net_advertised_host(const char *host, char out[MC_HOST_MAX])
{
    if (mc_net_is_wildcard(host))
        mc_net_primary_address(out);
    else
        snprintf(out, MC_HOST_MAX, "%s", host);
}

static int resolve(const char *host, int port, int passive, struct addrinfo **res)
{
    struct addrinfo hints;
    char portstr[16];
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    snprintf(portstr, sizeof(portstr), "%d", port);
    return getaddrinfo(mc_net_is_wildcard(host) && passive ? NULL : host, portstr, &hints, res);
}

int mc_net_listen_tcp(const char *host, int port, int backlog, int *bound_port)
{
    struct addrinfo *res = NULL;
    int rc = resolve(host, port, 1, &res);
    if (rc != 0) {
        MC_ERROR("cannot resolve listen address %s: %s", host ? host : "", gai_strerror(rc));
        return MC_ERR_INVALID_PARAMS;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        /* Prefer IPv4 for a wildcard: peers are told an IPv4 address. */
        if (mc_net_is_wildcard(host) && a->ai_family != AF_INET)
            continue;
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, backlog) == 0)
            break;
        int saved = errno;
        close(fd);
        fd = -1;
        errno = saved;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        MC_ERROR("cannot listen on %s:%d: %s", host ? host : "", port, strerror(errno));
        return MC_ERR_INTERNAL_ERROR;
    }
    if (bound_port) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                               : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

void mc_net_tune_socket(int fd)
{
    int one = 1, buf = MC_SOCKET_BUFFER_BYTES;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

void mc_net_set_timeouts(int fd, int timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int connect_one(const struct addrinfo *a, int timeout_ms)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0)
        return MC_ERR_RPC_FAIL;
    mc_net_tune_socket(fd);
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int saved = errno;
            close(fd);
            errno = saved;
            return MC_ERR_RPC_FAIL;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int n;
        do {
            n = poll(&pfd, 1, timeout_ms);
        } while (n < 0 && errno == EINTR);
        if (n == 0) {
            close(fd);
            errno = ETIMEDOUT;
            return MC_ERR_RPC_TIMEOUT;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (n < 0 || soerr) {
            close(fd);
            errno = soerr ? soerr : errno;
            return MC_ERR_RPC_FAIL;
        }
    }
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

int mc_net_connect_tcp(const char *host, int port, int timeout_ms)
{
    struct addrinfo *res = NULL;
    int rc = resolve(host, port, 0, &res);
    if (rc != 0) {
        errno = EHOSTUNREACH;
        return MC_ERR_RPC_FAIL;
    }
    int fd = MC_ERR_RPC_FAIL;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = connect_one(a, timeout_ms);
        if (fd >= 0)
            break;
    }
    freeaddrinfo(res);
    return fd;
}

int mc_net_send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return MC_ERR_TRANSFER_FAIL;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int mc_net_recv_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_WAITALL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return MC_ERR_TRANSFER_FAIL;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return MC_ERR_TRANSFER_FAIL;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sets SO_RCVTIMEO or SO_SNDTIMEO to the time left before deadline_ms; 0 when none is left. */
static int arm_timeout(int fd, int optname, uint64_t deadline_ms)
{
    uint64_t now = mc_now_ms();
    if (now >= deadline_ms) {
        errno = ETIMEDOUT;
        return 0;
    }
    uint64_t left = deadline_ms - now;
    struct timeval tv = {.tv_sec = (time_t)(left / 1000),
                         .tv_usec = (suseconds_t)(left % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, optname, &tv, sizeof(tv));
    return 1;
}

/*
 * A timed-out call may return EAGAIN before the deadline by a jiffy: the loop re-arms the
 * timeout and only gives up once the deadline has really passed.
 */
static int timed_out_early(int err, uint64_t deadline_ms)
{
    return (err == EAGAIN || err == EWOULDBLOCK) && mc_now_ms() < deadline_ms;
}

int mc_net_recv_all_by(int fd, void *buf, size_t len, uint64_t deadline_ms)
{
    char *p = buf;
    /* First without blocking: small frames have usually arrived whole (no setsockopt). */
    int flags = MSG_DONTWAIT;
    while (len > 0) {
        if (mc_now_ms() >= deadline_ms) { /* e.g. this process was stopped past it */
            errno = ETIMEDOUT;
            return MC_ERR_TRANSFER_FAIL;
        }
        if (!flags && !arm_timeout(fd, SO_RCVTIMEO, deadline_ms))
            return MC_ERR_TRANSFER_FAIL;
        ssize_t n = recv(fd, p, len, flags ? flags : MSG_WAITALL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (flags && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                flags = 0;
                continue;
            }
            if (timed_out_early(errno, deadline_ms))
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                errno = ETIMEDOUT;
            return MC_ERR_TRANSFER_FAIL;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return MC_ERR_TRANSFER_FAIL;
        }
        p += n;
        len -= (size_t)n;
        flags = 0;
    }
    return 0;
}

int mc_net_stamp_arrivals(int fd)
{
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
}

ssize_t mc_net_recv_stamped(int fd, void *buf, size_t len, uint64_t *queued_ms)
{
    union {
        char raw[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.raw,
                       .msg_controllen = sizeof(control.raw)};
    *queued_ms = UINT64_MAX;
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
    if (n <= 0)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_TIMESTAMPNS)
            continue;
        struct timespec at, now;
        memcpy(&at, CMSG_DATA(c), sizeof(at));
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t age_ns = ((int64_t)now.tv_sec - (int64_t)at.tv_sec) * 1000000000 +
                         ((int64_t)now.tv_nsec - (int64_t)at.tv_nsec);
        if (at.tv_sec != 0 && age_ns >= 0 && age_ns < 86400ll * 1000000000)
            *queued_ms = (uint64_t)age_ns / 1000000u;
    }
    return n;
}

int mc_net_sendmsg_all_by(int fd, struct iovec *iov, int iovcnt, uint64_t deadline_ms)
{
    int flags = MSG_DONTWAIT;
    while (iovcnt > 0) {
        if (mc_now_ms() >= deadline_ms) {
            errno = ETIMEDOUT;
            return MC_ERR_TRANSFER_FAIL;
        }
        if (!flags && !arm_timeout(fd, SO_SNDTIMEO, deadline_ms))
            return MC_ERR_TRANSFER_FAIL;
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | flags);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (flags && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                flags = 0;
                continue;
            }
            if (timed_out_early(errno, deadline_ms))
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                errno = ETIMEDOUT;
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
        flags = 0;
    }
    return 0;
}

void mc_net_abort(int fd)
{
    if (fd < 0)
        return;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

int mc_net_peer_gone(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < 1)
        return 0;
    return ti.tcpi_state != TCP_ESTABLISHED;
}

void mc_net_host_id(char out[MC_HOST_MAX])
{
    char boot[64] = "", name[128] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f))
            boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    gethostname(name, sizeof(name) - 1);
    snprintf(out, MC_HOST_MAX, "%s/%s", boot, name);
}
