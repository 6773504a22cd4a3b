/*
 * fuzz_common.c — the helpers of fuzz_common.h: input cursor, loopback exchange, HTTP request
 * text, scratch directories.
 */
#include "fuzz_common.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

uint8_t mc_fuzz_u8(mc_fuzz_in_t *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

uint16_t mc_fuzz_u16(mc_fuzz_in_t *in)
{
    uint16_t lo = mc_fuzz_u8(in);
    return (uint16_t)(lo | (uint16_t)mc_fuzz_u8(in) << 8);
}

uint32_t mc_fuzz_u32(mc_fuzz_in_t *in)
{
    uint32_t lo = mc_fuzz_u16(in);
    return lo | (uint32_t)mc_fuzz_u16(in) << 16;
}

uint64_t mc_fuzz_u64(mc_fuzz_in_t *in)
{
    uint64_t lo = mc_fuzz_u32(in);
    return lo | (uint64_t)mc_fuzz_u32(in) << 32;
}

const uint8_t *mc_fuzz_bytes(mc_fuzz_in_t *in, size_t max, size_t *len)
{
    const uint8_t *p = in->p;
    *len = max < in->n ? max : in->n;
    in->p += *len;
    in->n -= *len;
    return p;
}

const uint8_t *mc_fuzz_chunk(mc_fuzz_in_t *in, size_t *len)
{
    return mc_fuzz_bytes(in, mc_fuzz_u16(in), len);
}

const uint8_t *mc_fuzz_until(mc_fuzz_in_t *in, uint8_t sep, size_t *len)
{
    const uint8_t *p = in->p;
    const uint8_t *end = memchr(p, sep, in->n);
    *len = end ? (size_t)(end - p) : in->n;
    size_t used = end ? *len + 1 : *len;
    in->p += used;
    in->n -= used;
    return p;
}

char *mc_fuzz_strndup(const uint8_t *p, size_t len)
{
    char *s = malloc(len + 1);
    if (!s)
        abort();
    if (len)
        memcpy(s, p, len);
    s[len] = '\0';
    return s;
}

void mc_fuzz_init(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (getenv("MC_FUZZ_LOG"))
        return;
    mc_log_set_stderr(0);
    mc_log_set_file("/dev/null");
}

int mc_fuzz_connect_tcp(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int mc_fuzz_connect_abstract(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    if (n + 1 > sizeof(a.sun_path)) {
        close(fd);
        return -1;
    }
    memcpy(a.sun_path + 1, name, n);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (connect(fd, (struct sockaddr *)&a, alen) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* 1 when marker (m bytes) ends inside tail[0..t) + got[0..n); keeps the last m - 1 bytes in tail.
 */
static int marker_seen(uint8_t *tail, size_t *t, const uint8_t *got, size_t n,
                       const uint8_t *marker, size_t m)
{
    uint8_t window[2 * 256];
    for (size_t i = 0; i < n;) {
        size_t take = n - i < 256 ? n - i : 256;
        memcpy(window, tail, *t);
        memcpy(window + *t, got + i, take);
        size_t w = *t + take;
        if (memmem(window, w, marker, m))
            return 1;
        *t = w < m - 1 ? w : m - 1;
        memcpy(tail, window + w - *t, *t);
        i += take;
    }
    return 0;
}

size_t mc_fuzz_exchange(int fd, const uint8_t *buf, size_t len, const mc_fuzz_exchange_opts_t *o)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t sent = 0, answered = 0, tail_len = 0;
    uint8_t tail[256];
    int writing = 1, shut = 0;
    if (o->marker_len > sizeof(tail))
        abort();
    for (;;) {
        if (writing && sent == len) {
            writing = 0;
            if (o->half_close) {
                shutdown(fd, SHUT_WR);
                shut = 1;
            }
        }
        struct pollfd p = {.fd = fd, .events = (short)(POLLIN | (writing ? POLLOUT : 0))};
        int r = poll(&p, 1, o->quiet_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) { /* quiet: end the input, then give up */
            if (shut)
                break;
            shutdown(fd, SHUT_WR);
            shut = 1;
            writing = 0;
            continue;
        }
        if (p.revents & POLLIN) {
            uint8_t got[65536];
            ssize_t n = recv(fd, got, sizeof(got), 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                break; /* closed or reset */
            if (n > 0) {
                answered += (size_t)n;
                if ((o->marker_len &&
                     marker_seen(tail, &tail_len, got, (size_t)n, o->marker, o->marker_len)) ||
                    (o->expect && answered >= o->expect))
                    break;
                continue;
            }
        }
        if (writing && (p.revents & POLLOUT)) {
            ssize_t n = send(fd, buf + sent, len - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                writing = 0; /* the peer is gone: read what it answered */
        } else if ((p.revents & (POLLERR | POLLHUP)) && !(p.revents & POLLIN)) {
            break;
        }
    }
    close(fd);
    return answered;
}

/* Appends n bytes to a growing buffer. */
typedef struct grow {
    uint8_t *p;
    size_t n, cap;
} grow_t;

static void grow_put(grow_t *g, const void *p, size_t n)
{
    if (g->n + n > g->cap) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap < g->n + n)
            cap *= 2;
        uint8_t *q = realloc(g->p, cap);
        if (!q)
            abort();
        g->p = q;
        g->cap = cap;
    }
    if (n)
        memcpy(g->p + g->n, p, n);
    g->n += n;
}

static void grow_str(grow_t *g, const char *s)
{
    grow_put(g, s, strlen(s));
}

void mc_fuzz_http_request(const char *method, const uint8_t *path, size_t path_len,
                          const uint8_t *headers, size_t headers_len, const uint8_t *body,
                          size_t body_len, uint8_t **out, size_t *out_len)
{
    static const char hex[] = "0123456789ABCDEF";
    grow_t g = {0};
    grow_str(&g, method);
    grow_str(&g, " ");
    if (path_len == 0 || path[0] != '/')
        grow_str(&g, "/");
    for (size_t i = 0; i < path_len; i++) {
        uint8_t c = path[i];
        if (c <= 0x20 || c >= 0x7f || c == '#') {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            grow_put(&g, e, 3);
        } else {
            grow_put(&g, &c, 1);
        }
    }
    grow_str(&g, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    /* Header lines as "Name: value", so that the server's parser reaches the handler: leading
     * blanks (an obsolete line folding) are dropped and a line without a colon gets a name. */
    for (size_t i = 0; i < headers_len;) {
        size_t end = i;
        while (end < headers_len && headers[end] != '\n')
            end++;
        size_t b = i;
        while (b < end && (headers[b] == ' ' || headers[b] == '\t'))
            b++;
        if (b < end) {
            if (!memchr(headers + b, ':', end - b))
                grow_str(&g, "X-Fuzz: ");
            for (size_t k = b; k < end; k++) {
                if (headers[k] != '\r' && headers[k] != '\0')
                    grow_put(&g, &headers[k], 1);
            }
            grow_str(&g, "\r\n");
        }
        i = end + 1;
    }
    char cl[64];
    snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n\r\n", body_len);
    grow_str(&g, cl);
    grow_put(&g, body, body_len);
    *out = g.p;
    *out_len = g.n;
}

size_t mc_fuzz_http(int port, const uint8_t *spec, size_t len)
{
    static const char *const methods[] = {"GET",  "HEAD",    "PUT",  "DELETE",
                                          "POST", "OPTIONS", "PATCH"};
    mc_fuzz_in_t in = {spec, len};
    uint8_t m = mc_fuzz_u8(&in);
    int fd = mc_fuzz_connect_tcp(port);
    if (fd < 0)
        abort();
    if (m == 0xff) { /* raw: the server sees exactly these bytes, then their end */
        /* libmicrohttpd keeps a half-closed connection without a whole request until its
         * timeout: a short wait for an answer, then the connection is closed. */
        mc_fuzz_exchange_opts_t o = {.half_close = 1, .quiet_ms = 10};
        return mc_fuzz_exchange(fd, in.p, in.n, &o);
    }
    size_t path_len, headers_len;
    const uint8_t *path = mc_fuzz_until(&in, 0, &path_len);
    const uint8_t *headers = mc_fuzz_until(&in, 0, &headers_len);
    uint8_t *req;
    size_t req_len;
    mc_fuzz_http_request(methods[m % (sizeof(methods) / sizeof(methods[0]))], path, path_len,
                         headers, headers_len, in.p, in.n, &req, &req_len);
    /* "Connection: close": the server closes once it answered. */
    mc_fuzz_exchange_opts_t o = {.quiet_ms = 50};
    size_t answered = mc_fuzz_exchange(fd, req, req_len, &o);
    free(req);
    return answered;
}

/* The scratch directories made by mc_fuzz_tempdir, removed when the process exits. */
#define MAX_TEMPDIRS 8
static char *tempdirs[MAX_TEMPDIRS];
static int ntempdirs;

static void remove_tempdirs(void)
{
    for (int i = 0; i < ntempdirs; i++)
        mc_fuzz_rmtree(tempdirs[i], 1);
}

const char *mc_fuzz_tempdir(const char *what)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) /* memory-backed where there is one: fuzzing writes many small files */
        tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char path[4096];
    snprintf(path, sizeof(path), "%s/mc_fuzz_%s_XXXXXX", tmp, what);
    if (!mkdtemp(path) || ntempdirs == MAX_TEMPDIRS)
        abort();
    if (ntempdirs == 0)
        atexit(remove_tempdirs);
    tempdirs[ntempdirs] = mc_fuzz_strndup((const uint8_t *)path, strlen(path));
    return tempdirs[ntempdirs++];
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    if (ftw->level > 0)
        remove(path);
    return 0;
}

static int rm_all(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void mc_fuzz_rmtree(const char *path, int self)
{
    nftw(path, self ? rm_all : rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int mc_fuzz_write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    close(fd);
    return 0;
}
