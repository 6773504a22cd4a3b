/*
 * test_transfer_safety.c — the Transfer Engine never lets a failed or stale transfer move bytes
 * later ("reads are exact or they fail"), with real te_peer target processes:
 *
 *   - epochs: a request whose epoch is stale is refused over tcp (read and write, the target's
 *     bytes unchanged) and on the local path; epoch 0 is never checked;
 *   - per-request finish times (mc_transfer_status_t.finish_ms);
 *   - the serving side bounds a whole WRITE by the transfer timeout and aborts (RST) a sender
 *     that stalls or trickles, and keeps serving others;
 *   - the initiator bounds a whole slice by the transfer timeout (a SIGSTOPped target), and
 *     aborts the connection: through a frozen forwarding proxy (a cut link, emulated on
 *     loopback) the failed write's queued bytes never reach the target once the link is back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/transfer_engine.h"
#include "proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define PEER_BIN MC_BUILD_DIR "/tests/integration/te_peer"
/* The targets' transfer timeout (MC_TRANSFER_TIMEOUT is in seconds) and the initiators'. */
#define PEER_TIMEOUT_S 1
#define TIMEOUT_MS 1000

typedef struct peer {
    mc_proc_t proc;
    char name[300];
    uint64_t shm_addr, shm_len, plain_addr, plain_len;
} peer_t;

static peer_t peer_a; /* tcp target with a 1 s transfer timeout */

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int start_peer(peer_t *p, uint64_t shm_len, uint64_t plain_len)
{
    char shm[32], plain[32], timeout[16];
    snprintf(shm, sizeof(shm), "%llu", (unsigned long long)shm_len);
    snprintf(plain, sizeof(plain), "%llu", (unsigned long long)plain_len);
    snprintf(timeout, sizeof(timeout), "%d", PEER_TIMEOUT_S);
    char *argv[] = {PEER_BIN, "127.0.0.1:0", "P2PHANDSHAKE", shm, plain, "tcp", NULL};
    setenv("MC_TRANSFER_TIMEOUT", timeout, 1);
    int rc = mc_proc_start(&p->proc, argv, "READY ", 20000);
    unsetenv("MC_TRANSFER_TIMEOUT");
    if (rc != 0)
        return -1;
    unsigned long long a, b, c, d;
    if (sscanf(p->proc.ready_line, "READY %299s %llu %llu %llu %llu", p->name, &a, &b, &c, &d) != 5)
        return -1;
    p->shm_addr = a;
    p->shm_len = b;
    p->plain_addr = c;
    p->plain_len = d;
    return 0;
}

/* A peer stopped with SIGTERM exited 0 (not killed by a signal, e.g. an abort). */
static int exited_cleanly(int status)
{
    return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Reads one line of the peer's stdout (without '\n') within timeout_ms; 0 or -1. */
static int read_line(peer_t *p, char *line, size_t cap, int timeout_ms)
{
    size_t used = 0;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    while (now_ms() < deadline && used + 1 < cap) {
        struct pollfd pfd = {.fd = p->proc.stdout_fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        char c;
        if (read(p->proc.stdout_fd, &c, 1) != 1)
            return -1;
        if (c == '\n') {
            line[used] = '\0';
            return 0;
        }
        line[used++] = c;
    }
    return -1;
}

/* Sets the peer's epoch and waits until it confirmed (mc_te_set_epoch returned there). */
static void peer_set_epoch(peer_t *p, uint64_t epoch)
{
    char cmd[64], want[64], line[128];
    int n = snprintf(cmd, sizeof(cmd), "EPOCH %llu\n", (unsigned long long)epoch);
    assert_int_equal(write(p->proc.stdin_fd, cmd, (size_t)n), n);
    snprintf(want, sizeof(want), "EPOCH %llu OK", (unsigned long long)epoch);
    assert_int_equal(read_line(p, line, sizeof(line), 10000), 0);
    assert_string_equal(line, want);
}

static void fill(uint8_t *buf, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 13 + seed);
}

static mc_transfer_engine_t *new_engine(int disable_shm)
{
    mc_transfer_engine_config_t cfg = {.local_server_name = "127.0.0.1:0",
                                       .disable_shm = disable_shm,
                                       .transfer_timeout_ms = TIMEOUT_MS};
    mc_transfer_engine_t *te = NULL;
    assert_int_equal(mc_te_create(&cfg, &te), 0);
    return te;
}

static mc_segment_id_t open_seg(mc_transfer_engine_t *te, const char *name)
{
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_te_open_segment(te, name, &seg), 0);
    return seg;
}

static int xfer(mc_transfer_engine_t *te, mc_segment_id_t seg, mc_transfer_opcode_t op, void *buf,
                uint64_t addr, size_t len, uint64_t epoch)
{
    mc_transfer_req_t req = {op, buf, seg, addr, len, epoch};
    return mc_te_transfer_sync(te, &req, 1);
}

static int port_of(const char *name)
{
    const char *c = strrchr(name, ':');
    return c ? atoi(c + 1) : -1;
}

static int connect_port(int port)
{
    return mc_test_connect("127.0.0.1", port, 0);
}

/* ---- epochs ------------------------------------------------------------------------------- */

/* 1 when something accepts a TCP connection at ip:port. */
static int accepts(const char *ip, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &sin.sin_addr);
    int ok = connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
    close(fd);
    return ok;
}

/* The engine listens on the host it was given, not on every interface: 127.0.0.2 is another
 * address of this host (all of 127/8 is loopback), which a wildcard bind would answer on. */
static void test_engine_binds_the_host_it_was_given(void **state)
{
    (void)state;
    mc_transfer_engine_config_t tc = {.local_server_name = "127.0.0.1:0"};
    mc_transfer_engine_t *te;
    assert_int_equal(mc_te_create(&tc, &te), 0);
    const char *name = mc_te_local_segment_name(te);
    int port = atoi(strrchr(name, ':') + 1);
    assert_true(accepts("127.0.0.1", port));
    assert_false(accepts("127.0.0.2", port));
    mc_te_destroy(te);
    /* A wildcard host still means every interface. */
    tc.local_server_name = "0.0.0.0:0";
    assert_int_equal(mc_te_create(&tc, &te), 0);
    port = atoi(strrchr(mc_te_local_segment_name(te), ':') + 1);
    assert_true(accepts("127.0.0.2", port));
    mc_te_destroy(te);
}

static void test_stale_epoch_is_refused_over_tcp(void **state)
{
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    size_t len = 6 * MiB + 5; /* two slices: both refused, the payload drained */
    uint64_t addr = peer_a.shm_addr + 4096;
    uint8_t *a = malloc(len), *b = malloc(len), *got = malloc(len);
    fill(a, len, 1);
    fill(b, len, 2);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, a, addr, len, 0), 0);

    peer_set_epoch(&peer_a, 5);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, b, addr, len, 4), MC_ERR_INVALID_WRITE);
    memset(got, 0xEE, len);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, addr, len, 4), MC_ERR_INVALID_READ);
    for (size_t i = 0; i < len; i += 4096)
        assert_int_equal(got[i], 0xEE); /* no byte of a refused read moved */
    /* The refused write left the target's bytes alone. */
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, addr, len, 5), 0);
    assert_memory_equal(got, a, len);
    /* The current epoch is accepted, on the same (still usable) engine. */
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, b, addr, len, 5), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, addr, len, 5), 0);
    assert_memory_equal(got, b, len);
    peer_set_epoch(&peer_a, 0);
    free(a);
    free(b);
    free(got);
    mc_te_destroy(te);
}

static void test_epoch_zero_is_never_checked(void **state)
{
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    uint8_t src[8192], got[8192];
    uint64_t addr = peer_a.plain_addr + 100;
    /* A request without an epoch reaches a segment that has one. */
    peer_set_epoch(&peer_a, 9);
    fill(src, sizeof(src), 3);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, src, addr, sizeof(src), 0), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, addr, sizeof(got), 0), 0);
    assert_memory_equal(src, got, sizeof(src));
    /* A segment without an epoch accepts a request with any. */
    peer_set_epoch(&peer_a, 0);
    fill(src, sizeof(src), 4);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, src, addr, sizeof(src), 12345), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, addr, sizeof(got), 777), 0);
    assert_memory_equal(src, got, sizeof(src));
    mc_te_destroy(te);
}

static void test_local_path_checks_the_epoch(void **state)
{
    mc_transfer_engine_t *te = new_engine(0);
    void *mem;
    size_t len = 1 * MiB;
    assert_int_equal(mc_te_alloc_segment_memory(te, len, &mem), 0);
    mc_segment_id_t seg = open_seg(te, mc_te_local_segment_name(te));
    uint64_t addr = (uint64_t)(uintptr_t)mem;
    uint8_t *a = malloc(len), *b = malloc(len), *got = malloc(len);
    fill(a, len, 5);
    fill(b, len, 6);
    assert_int_equal(mc_te_set_epoch(NULL, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_te_set_epoch(te, 7), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, a, addr, len, 7), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, b, addr, len, 6), MC_ERR_INVALID_WRITE);
    assert_memory_equal(mem, a, len);
    memset(got, 0xEE, len);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, addr, len, 8), MC_ERR_INVALID_READ);
    assert_int_equal(got[0], 0xEE);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, addr, len, 0), 0);
    assert_memory_equal(got, a, len);
    assert_int_equal(mc_te_set_epoch(te, 0), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, b, addr, len, 6), 0);
    assert_memory_equal(mem, b, len);
    free(a);
    free(b);
    free(got);
    assert_int_equal(mc_te_free_segment_memory(te, mem), 0);
    mc_te_destroy(te);
}

/* ---- finish times ------------------------------------------------------------------------- */

static void test_finish_ms_is_set_per_request_and_ordered(void **state)
{
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    size_t small = 4096, large = 48 * MiB;
    uint8_t *s = calloc(1, small), *l = calloc(1, large);
    mc_transfer_req_t reqs[3] = {
        {MC_TRANSFER_READ, s, seg, peer_a.shm_addr, small},
        {MC_TRANSFER_READ, l, seg, peer_a.shm_addr + 8192, large},
        {MC_TRANSFER_READ, s, seg, peer_a.shm_addr + peer_a.shm_len - 8, 16}, /* out of range */
    };
    mc_batch_t *b;
    assert_int_equal(mc_te_batch_create(te, 3, &b), 0);
    uint64_t t0 = now_ms();
    assert_int_equal(mc_te_submit(b, reqs, 3), 0);
    mc_transfer_status_t st;
    assert_int_equal(mc_te_get_status(b, 1, &st), 0);
    if (st.state == MC_TRANSFER_WAITING)
        assert_int_equal(st.finish_ms, 0);
    assert_int_equal(mc_te_wait(b, 60000), MC_ERR_INVALID_READ);
    uint64_t t1 = now_ms();
    mc_transfer_status_t ss, sl, sf;
    assert_int_equal(mc_te_get_status(b, 0, &ss), 0);
    assert_int_equal(mc_te_get_status(b, 1, &sl), 0);
    assert_int_equal(mc_te_get_status(b, 2, &sf), 0);
    assert_int_equal(ss.state, MC_TRANSFER_COMPLETED);
    assert_int_equal(sl.state, MC_TRANSFER_COMPLETED);
    assert_int_equal(sf.state, MC_TRANSFER_FAILED);
    /* Each on the caller's monotonic clock, within the batch's lifetime. */
    assert_true(ss.finish_ms >= t0 && ss.finish_ms <= t1);
    assert_true(sl.finish_ms >= t0 && sl.finish_ms <= t1);
    assert_true(sf.finish_ms >= t0 && sf.finish_ms <= t1);
    /* The small request is judged on its own time, not the batch's: it ends before the 48 MiB
     * read over tcp (tens of ms), and the refused one at once. One stamp for the whole batch
     * would make them equal. */
    assert_true(ss.finish_ms < sl.finish_ms);
    assert_true(sf.finish_ms < sl.finish_ms);
    fprintf(stderr, "finish: small +%llu ms, large +%llu ms, refused +%llu ms\n",
            (unsigned long long)(ss.finish_ms - t0), (unsigned long long)(sl.finish_ms - t0),
            (unsigned long long)(sf.finish_ms - t0));
    mc_te_batch_free(b);
    free(s);
    free(l);
    mc_te_destroy(te);
}

/* ---- the serving side bounds a whole write ------------------------------------------------ */

/* A WRITE frame (header + TransferHeader{addr, length}) for `len` bytes at `addr`. */
static size_t write_frame(uint8_t *out, uint64_t addr, uint64_t len)
{
    uint8_t body[32];
    size_t n = 0;
    body[n++] = 0x08; /* field 1 (addr), varint */
    for (uint64_t v = addr;; v >>= 7) {
        body[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    body[n++] = 0x10; /* field 2 (length), varint */
    for (uint64_t v = len;; v >>= 7) {
        body[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    uint8_t hdr[24] = {'M', 'C', 'K', '1', 1, 0, 3, 0, 42};
    hdr[16] = (uint8_t)n;
    memcpy(out, hdr, sizeof(hdr));
    memcpy(out + sizeof(hdr), body, n);
    return sizeof(hdr) + n;
}

/*
 * Sends a WRITE header and part of its payload, then either nothing more (trickle = 0) or one
 * byte every 100 ms; returns how long, in ms, until the server aborted the connection (RST),
 * or -1 when it closed it gracefully, acknowledged, or did nothing for 6 s.
 */
static long stalled_writer(int trickle)
{
    int fd = connect_port(port_of(peer_a.name));
    assert_true(fd >= 0);
    uint8_t frame[64], part[1000];
    size_t n = write_frame(frame, peer_a.plain_addr, 1 * MiB);
    memset(part, 0xAB, sizeof(part));
    uint64_t t0 = now_ms();
    assert_int_equal(send(fd, frame, n, 0), (ssize_t)n);
    assert_int_equal(send(fd, part, sizeof(part), 0), (ssize_t)sizeof(part));
    long took = -1;
    while (now_ms() - t0 < 6000) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0) {
            char c;
            ssize_t r = recv(fd, &c, 1, 0);
            if (r < 0 && errno == ECONNRESET)
                took = (long)(now_ms() - t0);
            break; /* EOF (graceful close) or any byte (an acknowledgement) is a failure */
        }
        if (trickle && send(fd, part, 1, MSG_NOSIGNAL) < 0) {
            if (errno == ECONNRESET) /* the reset arrived between poll and send */
                took = (long)(now_ms() - t0);
            break;
        }
    }
    close(fd);
    return took;
}

static void server_still_serves(void)
{
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg = open_seg(te, peer_a.name);
    uint8_t src[65536], got[65536];
    fill(src, sizeof(src), 9);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, src, peer_a.plain_addr, sizeof(src), 0), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, peer_a.plain_addr, sizeof(got), 0), 0);
    assert_memory_equal(src, got, sizeof(src));
    mc_te_destroy(te);
}

static void test_server_aborts_a_write_that_stalls_past_the_timeout(void **state)
{
    long took = stalled_writer(0);
    fprintf(stderr, "stalled writer: reset after %ld ms\n", took);
    /* Reset (not closed, not acknowledged: those give -1) once the timeout passed, and within
     * a few timeouts (slack for a loaded machine), well inside the writer's 6 s watch. */
    assert_true(took >= PEER_TIMEOUT_S * 1000 - 100);
    assert_true(took <= PEER_TIMEOUT_S * 1000 + 3000);
    server_still_serves();
}

static void test_server_aborts_a_write_that_trickles_past_the_timeout(void **state)
{
    /* Each byte is progress: a per-call socket timeout would never fire. */
    long took = stalled_writer(1);
    fprintf(stderr, "trickling writer: reset after %ld ms\n", took);
    assert_true(took >= PEER_TIMEOUT_S * 1000 - 100);
    assert_true(took <= PEER_TIMEOUT_S * 1000 + 3000);
    server_still_serves();
}

/* ---- the initiator bounds a whole slice --------------------------------------------------- */

static void test_initiator_fails_within_the_timeout_when_the_target_is_stopped(void **state)
{
    peer_t d;
    assert_int_equal(start_peer(&d, 32 * MiB, 4096), 0);
    mc_transfer_engine_t *te = new_engine(1);
    mc_segment_id_t seg = open_seg(te, d.name);
    size_t len = 16 * MiB; /* four slices, one per worker: all in flight at once */
    uint8_t *src = malloc(len), *got = malloc(len);
    fill(src, len, 11);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, src, d.shm_addr, len, 0), 0);

    assert_int_equal(mc_proc_freeze(d.proc.pid, 5000), 0); /* every thread, not just the first */
    uint64_t t0 = now_ms();
    int w = xfer(te, seg, MC_TRANSFER_WRITE, src, d.shm_addr, len, 0);
    uint64_t t1 = now_ms();
    int r = xfer(te, seg, MC_TRANSFER_READ, got, d.shm_addr, len, 0);
    uint64_t t2 = now_ms();
    int frozen = mc_proc_is_frozen(d.proc.pid);
    mc_proc_thaw(d.proc.pid);
    assert_int_equal(frozen, 1);
    fprintf(stderr, "stopped target: write failed after %llu ms, read after %llu ms\n",
            (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1));
    assert_int_equal(w, MC_ERR_TRANSFER_FAIL);
    assert_int_equal(r, MC_ERR_TRANSFER_FAIL);
    /* Each waited out the timeout (the target never answered) and no more than about one: the
     * four slices wait in parallel, in series they would take four timeouts. The upper bound
     * leaves a second for a loaded machine. */
    assert_true(t1 - t0 >= TIMEOUT_MS - 100);
    assert_true(t2 - t1 >= TIMEOUT_MS - 100);
    assert_true(t1 - t0 <= 2 * TIMEOUT_MS + 500);
    assert_true(t2 - t1 <= 2 * TIMEOUT_MS + 500);

    /* Running again: new connections move bytes. */
    fill(src, len, 12);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, src, d.shm_addr, len, 0), 0);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_READ, got, d.shm_addr, len, 0), 0);
    assert_memory_equal(src, got, len);
    free(src);
    free(got);
    mc_te_destroy(te);
    assert_true(exited_cleanly(mc_proc_stop(&d.proc, SIGTERM, 10000)));
}

/* ---- a cut link, emulated: a forwarding proxy that can be frozen ---------------------------- */

typedef struct proxy {
    int listen_fd, port, upstream_port;
    pthread_t accept_thread;
    atomic_int frozen; /* 1: forwards nothing in either direction (the link is down) */
    atomic_int stopping;
    atomic_int accepted, finished;       /* connections, and those fully torn down */
    atomic_int client_reset, client_fin; /* how the initiator's side of each one ended */
} proxy_t;

typedef struct link {
    proxy_t *px;
    int client, upstream;
    atomic_int dead; /* the client side ended: the upstream pump stops */
} link_t;

static void wait_thawed(proxy_t *px)
{
    while (atomic_load(&px->frozen) && !atomic_load(&px->stopping))
        usleep(2000);
}

/* Upstream -> client, until upstream ends or the client side died. */
static void *pump_down(void *p)
{
    link_t *l = p;
    char buf[65536];
    while (!atomic_load(&l->dead)) {
        wait_thawed(l->px);
        struct pollfd pfd = {.fd = l->upstream, .events = POLLIN};
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        if (atomic_load(&l->px->frozen))
            continue;
        ssize_t n = recv(l->upstream, buf, sizeof(buf), 0);
        if (n <= 0)
            break;
        send(l->client, buf, (size_t)n, MSG_NOSIGNAL); /* the client may be gone: ignore */
    }
    return NULL;
}

/*
 * Client -> upstream, as a link would carry it: everything the client's kernel still sends once
 * the link is back is forwarded. A reset from the client resets upstream too (a RST crosses the
 * link); a FIN is forwarded as a FIN after the bytes before it.
 */
static void *pump_up(void *p)
{
    link_t *l = p;
    proxy_t *px = l->px;
    pthread_t down;
    pthread_create(&down, NULL, pump_down, l);
    char buf[65536];
    int reset = 0;
    for (;;) {
        wait_thawed(px);
        if (atomic_load(&px->stopping))
            break;
        struct pollfd pfd = {.fd = l->client, .events = POLLIN};
        if (poll(&pfd, 1, 20) <= 0 || atomic_load(&px->frozen))
            continue;
        ssize_t n = recv(l->client, buf, sizeof(buf), 0);
        if (n > 0) {
            send(l->upstream, buf, (size_t)n, MSG_NOSIGNAL);
            continue;
        }
        if (n < 0 && errno == ECONNRESET) {
            reset = 1;
            atomic_fetch_add(&px->client_reset, 1);
        } else {
            atomic_fetch_add(&px->client_fin, 1);
        }
        break;
    }
    if (!reset) {
        shutdown(l->upstream, SHUT_WR); /* the upstream's answer still flows down */
        pthread_join(down, NULL);
    } else {
        atomic_store(&l->dead, 1);
        pthread_join(down, NULL);
        struct linger lg = {1, 0};
        setsockopt(l->upstream, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(l->upstream);
    close(l->client);
    atomic_fetch_add(&px->finished, 1);
    free(l);
    return NULL;
}

static void *proxy_accept(void *p)
{
    proxy_t *px = p;
    for (;;) {
        int c = accept(px->listen_fd, NULL, NULL);
        if (c < 0 || atomic_load(&px->stopping)) {
            if (c >= 0)
                close(c);
            return NULL;
        }
        link_t *l = calloc(1, sizeof(*l));
        l->px = px;
        l->client = c;
        l->upstream = connect_port(px->upstream_port);
        atomic_fetch_add(&px->accepted, 1);
        pthread_t t;
        pthread_create(&t, NULL, pump_up, l);
        pthread_detach(t);
    }
}

static void proxy_start(proxy_t *px, int upstream_port)
{
    memset(px, 0, sizeof(*px));
    px->upstream_port = upstream_port;
    px->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sin);
    assert_int_equal(bind(px->listen_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(px->listen_fd, 16), 0);
    getsockname(px->listen_fd, (struct sockaddr *)&sin, &sl);
    px->port = ntohs(sin.sin_port);
    pthread_create(&px->accept_thread, NULL, proxy_accept, px);
}

/* Waits until all but `open` of the connections the proxy carried were torn down (<= 15 s). */
static void proxy_wait_open(proxy_t *px, int open)
{
    for (int i = 0; i < 1500; i++) {
        if (atomic_load(&px->finished) + open == atomic_load(&px->accepted))
            return;
        usleep(10000);
    }
    fail_msg("proxy connections did not end");
}

static void proxy_wait_idle(proxy_t *px)
{
    proxy_wait_open(px, 0);
}

static void proxy_stop(proxy_t *px)
{
    atomic_store(&px->stopping, 1);
    shutdown(px->listen_fd, SHUT_RDWR);
    pthread_join(px->accept_thread, NULL);
    close(px->listen_fd);
    proxy_wait_idle(px);
}

static void test_failed_write_aborts_its_connection_and_never_lands_late(void **state)
{
    proxy_t px;
    proxy_start(&px, port_of(peer_a.name));
    size_t len = 4 * MiB; /* one slice: one connection */
    uint64_t addr = peer_a.plain_addr + 8 * MiB;
    uint8_t *a = malloc(len), *b = malloc(len), *got = malloc(len);
    fill(a, len, 21);
    fill(b, len, 22);
    mc_transfer_engine_t *direct = new_engine(1);
    mc_segment_id_t dseg = open_seg(direct, peer_a.name);
    assert_int_equal(xfer(direct, dseg, MC_TRANSFER_WRITE, a, addr, len, 0), 0);

    /* Through the proxy: the handshake, then a small write leaves one pooled connection. */
    mc_transfer_engine_t *te = new_engine(1);
    char via[64];
    snprintf(via, sizeof(via), "127.0.0.1:%d", px.port);
    mc_segment_id_t seg = open_seg(te, via);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, b, peer_a.plain_addr, 4096, 0), 0);
    proxy_wait_open(&px, 1); /* the handshake's connection is gone, the pooled one is open */

    atomic_store(&px.frozen, 1); /* the link goes down */
    int fin_before = atomic_load(&px.client_fin);
    assert_int_equal(xfer(te, seg, MC_TRANSFER_WRITE, b, addr, len, 0), MC_ERR_TRANSFER_FAIL);
    atomic_store(&px.frozen, 0); /* and comes back */
    mc_te_destroy(te);           /* closes what is still pooled */
    proxy_wait_idle(&px);
    fprintf(stderr, "proxy: %d connections, %d reset by the initiator, %d closed gracefully\n",
            atomic_load(&px.accepted), atomic_load(&px.client_reset), atomic_load(&px.client_fin));
    /* The failed write's connection was aborted, not closed. */
    assert_true(atomic_load(&px.client_reset) >= 1);
    assert_int_equal(atomic_load(&px.client_fin), fin_before);
    /* The write never completed at the target once the link was back: its tail is the old
     * bytes (at most what had crossed before the cut can have landed). */
    assert_int_equal(xfer(direct, dseg, MC_TRANSFER_READ, got, addr, len, 0), 0);
    assert_memory_equal(got + len - 1 * MiB, a + len - 1 * MiB, 1 * MiB);
    mc_te_destroy(direct);
    proxy_stop(&px);
    free(a);
    free(b);
    free(got);
}

static int setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    return start_peer(&peer_a, 64 * MiB, 20 * MiB);
}

/* Last: the shared peer, having served every test above, exits cleanly on SIGTERM. A test, not
 * the group teardown: cmocka 1.1.5 does not count a failed group teardown as a failure. */
static void test_shared_peer_exits_cleanly(void **state)
{
    assert_true(exited_cleanly(mc_proc_stop(&peer_a.proc, SIGTERM, 10000))); /* pid is -1 after */
}

/* Only when the last test did not run to its stop: the peer is still running. */
static int teardown(void **state)
{
    if (peer_a.proc.pid > 0)
        mc_proc_stop(&peer_a.proc, SIGKILL, 10000);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_binds_the_host_it_was_given),
        cmocka_unit_test(test_stale_epoch_is_refused_over_tcp),
        cmocka_unit_test(test_epoch_zero_is_never_checked),
        cmocka_unit_test(test_local_path_checks_the_epoch),
        cmocka_unit_test(test_finish_ms_is_set_per_request_and_ordered),
        cmocka_unit_test(test_server_aborts_a_write_that_stalls_past_the_timeout),
        cmocka_unit_test(test_server_aborts_a_write_that_trickles_past_the_timeout),
        cmocka_unit_test(test_initiator_fails_within_the_timeout_when_the_target_is_stopped),
        cmocka_unit_test(test_failed_write_aborts_its_connection_and_never_lands_late),
        cmocka_unit_test(test_shared_peer_exits_cleanly),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
