/*
 * test_dummy.c — dummy clients (mc_store_setup_dummy) served by a real mooncake_client: a real
 * mooncake_master and mooncake_client on loopback, dummies in this process and in forked
 * children. Bytes verified exactly through dummies (copying, batch and zero-copy calls, two
 * dummies at once); the service refuses ranges outside a dummy's regions, unsealed memory,
 * another uid and a missing cluster secret; the real client killed, restarted and stopped; a
 * dummy killed (its shared memory leaves the real client's address space).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/store.h"
#include "cluster.h"
#include "dummy.pb-c.h"
#include "net.h"
#include "proc.h"
#include "real_client_service.h"
#include "rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)

static mc_master_t cluster;
static mc_holder_t holder;
static int holder_port;

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

static int start_holder_on(mc_holder_t *h, int port, const char *const *extra)
{
    char port_flag[32];
    snprintf(port_flag, sizeof(port_flag), "--port=%d", port);
    const char *flags[8] = {port_flag};
    for (int i = 0; extra && extra[i] && i < 6; i++)
        flags[i + 1] = extra[i];
    return mc_holder_start(h, &cluster, "128MB", flags, NULL, 20000);
}

static mc_store_t *new_dummy_with(const char *secret, uint64_t local_buffer)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", holder_port);
    mc_store_dummy_config_t cfg = {.real_client_addr = addr,
                                   .local_buffer_size = local_buffer,
                                   .mem_pool_size = 64 * MiB,
                                   .cluster_secret = secret};
    mc_store_t *d = NULL;
    return mc_store_setup_dummy(&cfg, &d) == 0 ? d : NULL;
}

static mc_store_t *new_dummy(void)
{
    mc_store_t *d = new_dummy_with(NULL, 16 * MiB);
    assert_non_null(d);
    return d;
}

/* Lines of /proc/<pid>/maps naming memfd "mooncake_shm". */
static int shm_mappings(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof(line), f))
        n += strstr(line, "memfd:mooncake_shm") != NULL;
    if (f)
        fclose(f);
    return n;
}

/* Start address of the first mapping in /proc/<pid>/maps whose line contains `what`, or 0. */
static uint64_t mapping_of(pid_t pid, const char *what)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long start = 0;
    while (f && fgets(line, sizeof(line), f)) {
        if (strstr(line, what) && sscanf(line, "%llx-", &start) == 1)
            break;
        start = 0;
    }
    if (f)
        fclose(f);
    return start;
}

/* shm_mappings once it equals `want` (the real client drops a closed dummy's memory a moment
 * after the close), waiting up to 5 s; the last count. */
static int wait_mappings(pid_t pid, int want)
{
    uint64_t t0 = mc_now_ms();
    int n;
    while ((n = shm_mappings(pid)) != want && mc_now_ms() - t0 < 5000)
        usleep(20 * 1000);
    return n;
}

/* ---- bytes through dummies ------------------------------------------------------------- */

static void test_put_get_batch_byte_exact_across_two_dummies(void **state)
{
    mc_store_t *a = new_dummy(), *b = new_dummy();
    assert_int_equal(mc_store_health_check(a), 0);
    assert_string_equal(mc_store_get_hostname(a), "");
    size_t sizes[] = {0, 1, 4095, 65536, 3 * MiB + 17};
    uint8_t *src = malloc(4 * MiB), *dst = malloc(4 * MiB);
    char key[64];
    for (size_t i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "dummy/one/%zu", i);
        fill(src, sizes[i], i);
        assert_int_equal(mc_store_put(a, key, src, sizes[i], NULL), 0);
        memset(dst, 0xee, 4 * MiB);
        assert_int_equal(mc_store_get(b, key, dst, 4 * MiB), (int64_t)sizes[i]);
        assert_memory_equal(src, dst, sizes[i]);
        assert_int_equal(mc_store_get_size(b, key), (int64_t)sizes[i]);
        assert_int_equal(mc_store_exist(b, key), 1);
    }
    /* batch: 16 keys of 100 KiB each, written by b, read by a */
    const char *keys[16];
    const void *vals[16];
    void *outs[16];
    size_t lens[16], caps[16];
    char names[16][32];
    int wres[16];
    int64_t rres[16];
    uint8_t *bsrc = malloc(16 * 100 * 1024), *bdst = calloc(1, 16 * 100 * 1024);
    for (int i = 0; i < 16; i++) {
        snprintf(names[i], sizeof(names[i]), "dummy/batch/%d", i);
        keys[i] = names[i];
        fill(bsrc + i * 102400, 102400, 100 + i);
        vals[i] = bsrc + i * 102400;
        outs[i] = bdst + i * 102400;
        lens[i] = caps[i] = 102400;
    }
    assert_int_equal(mc_store_put_batch(b, keys, vals, lens, 16, NULL, wres), 0);
    assert_int_equal(mc_store_get_batch(a, keys, outs, caps, 16, rres), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(rres[i], 102400);
    assert_memory_equal(bsrc, bdst, 16 * 102400);
    int ex[16];
    assert_int_equal(mc_store_batch_exist(a, keys, 16, ex), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(ex[i], 1);
    mc_replica_desc_t desc[4];
    size_t count = 0;
    assert_int_equal(mc_store_get_replica_desc(a, "dummy/batch/0", desc, 4, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(desc[0].type, MC_REPLICA_MEMORY);
    assert_int_equal(desc[0].size, 102400);
    assert_int_equal(mc_store_remove(a, "dummy/batch/0", 1), 0);
    assert_int_equal(mc_store_exist(b, "dummy/batch/0"), 0);
    assert_int_equal(mc_store_get(b, "dummy/batch/0", dst, MiB), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_remove_by_regex(b, "^dummy/batch/", 1), 15);
    assert_int_equal(mc_store_remove_by_regex(b, "^dummy/one/", 1), 5);
    mc_store_offload_stats_t st;
    assert_int_equal(mc_store_get_offload_stats(a, &st), 0);
    assert_int_equal(st.enabled, 0);
    assert_int_equal(mc_store_set_offloading(a, 1), MC_ERR_UNAVAILABLE_IN_CURRENT_MODE);
    free(src);
    free(dst);
    free(bsrc);
    free(bdst);
    mc_store_free(a);
    mc_store_free(b);
}

static void test_zero_copy_on_registered_shared_memory(void **state)
{
    mc_store_t *a = new_dummy(), *b = new_dummy();
    void *wa, *rb;
    assert_int_equal(mc_store_alloc_shared(a, 8 * MiB, &wa), 0);
    assert_int_equal(mc_store_alloc_shared(NULL, 8 * MiB, &rb), 0);
    /* exactly an allocation's base and size, as upstream */
    assert_int_equal(mc_store_register_buffer(a, wa, 4 * MiB), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_register_buffer(a, (uint8_t *)wa + 4096, 4096),
                     MC_ERR_INVALID_PARAMS);
    uint8_t *heap = malloc(MiB);
    assert_int_equal(mc_store_register_buffer(a, heap, MiB), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_register_buffer(a, wa, 8 * MiB), 0);
    assert_int_equal(mc_store_register_buffer(b, rb, 8 * MiB), 0);
    /* not registered: refused */
    assert_int_equal(mc_store_put_from(a, "zc/heap", heap, MiB, NULL), MC_ERR_INVALID_PARAMS);
    fill(wa, 8 * MiB, 7);
    const char *keys[4] = {"zc/0", "zc/1", "zc/2", "zc/3"};
    const void *srcs[4];
    void *dsts[4];
    size_t sizes[4] = {MiB, 2 * MiB, 1, 3 * MiB};
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        srcs[i] = (uint8_t *)wa + off;
        dsts[i] = (uint8_t *)rb + off;
        off += sizes[i];
    }
    int wres[4];
    int64_t rres[4];
    assert_int_equal(mc_store_put_from_batch(a, keys, srcs, sizes, 4, NULL, wres), 0);
    assert_int_equal(mc_store_get_into_batch(b, keys, dsts, sizes, 4, rres), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rres[i], (int64_t)sizes[i]);
    assert_memory_equal(wa, rb, off);
    /* a zero-copy batch with one entry's memory missing: refused whole, nothing of it stored
     * (as the real client), however good the other entries are */
    const char *nkeys[2] = {"zc/n0", "zc/n1"};
    const void *nsrcs[2] = {wa, NULL};
    size_t nsizes[2] = {4096, 4096};
    int nres[2] = {9, 9};
    assert_int_equal(mc_store_put_from_batch(a, nkeys, nsrcs, nsizes, 2, NULL, nres),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(nres[0], MC_ERR_INVALID_PARAMS);
    assert_int_equal(nres[1], MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_exist(b, "zc/n0"), 0);
    void *ndsts[2] = {rb, NULL};
    int64_t nrres[2] = {9, 9};
    assert_int_equal(mc_store_get_into_batch(b, keys, ndsts, nsizes, 2, nrres),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(nrres[0], MC_ERR_INVALID_PARAMS);
    /* and a plain put of no bytes behind a length: refused, not copied from NULL */
    assert_int_equal(mc_store_put(a, "zc/null", NULL, 16, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_exist(b, "zc/null"), 0);
    /* single forms, upsert replaces */
    fill(wa, MiB, 8);
    assert_int_equal(mc_store_upsert_from(a, "zc/0", wa, MiB, NULL), 0);
    memset(rb, 0, MiB);
    assert_int_equal(mc_store_get_into(b, "zc/0", rb, MiB), (int64_t)MiB);
    assert_memory_equal(wa, rb, MiB);
    /* a range running past the registered buffer is refused */
    assert_int_equal(mc_store_get_into(b, "zc/0", (uint8_t *)rb + 8 * MiB - 10, MiB),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_unregister_buffer(a, wa), 0);
    assert_int_equal(mc_store_put_from(a, "zc/9", wa, 10, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_remove_by_regex(a, "^zc/", 1), 4);
    mc_store_free(a); /* frees wa (owned by a) */
    mc_store_free(b);
    assert_int_equal(mc_store_free_shared(NULL, rb), 0);
    assert_int_equal(mc_store_free_shared(NULL, rb), MC_ERR_INVALID_PARAMS);
    free(heap);
}

static void test_local_buffer_exhaustion_is_no_available_handle(void **state)
{
    mc_store_t *d = new_dummy_with(NULL, MiB);
    assert_non_null(d);
    uint8_t *big = calloc(1, 2 * MiB);
    assert_int_equal(mc_store_put(d, "lb/big", big, 2 * MiB, NULL), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_store_put(d, "lb/fits", big, MiB, NULL), 0);
    assert_int_equal(mc_store_remove(d, "lb/fits", 1), 0);
    mc_store_free(d);
    d = new_dummy_with(NULL, 0);
    assert_non_null(d);
    assert_int_equal(mc_store_put(d, "lb/none", big, 10, NULL), MC_ERR_INVALID_PARAMS);
    /* no local buffer: the zero-copy calls still work, an empty value too */
    void *zc;
    assert_int_equal(mc_store_alloc_shared(d, 4096, &zc), 0);
    assert_int_equal(mc_store_register_buffer(d, zc, 4096), 0);
    assert_int_equal(mc_store_put_from(d, "lb/empty", zc, 0, NULL), 0);
    assert_int_equal(mc_store_get_into(d, "lb/empty", zc, 4096), 0);
    assert_int_equal(mc_store_remove(d, "lb/empty", 1), 0);
    mc_store_free(d);
    free(big);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static int raw_connect(int port)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int len = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, MC_DUMMY_SOCKET_FMT, port);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, alen), 0);
    return fd;
}

/* One hand-made request; the reply's code (its first per-key result when the code is 0), or the
 * transport error. */
static int64_t raw_call(int fd, uint16_t op, Mc__DummyRequest *req, int pass_fd)
{
    size_t len = mc__dummy_request__get_packed_size(req);
    uint8_t *body = malloc(len + 1);
    mc__dummy_request__pack(req, body);
    int rc = mc_dummy_send_frame(fd, op, 1, body, len, pass_fd, mc_now_ms() + 5000);
    free(body);
    if (rc != 0)
        return rc;
    mc_frame_header_t h;
    uint8_t *rb = NULL;
    rc = mc_dummy_recv_frame(fd, 1u << 20, &h, &rb, NULL, mc_now_ms() + 5000);
    if (rc != 0)
        return rc;
    Mc__DummyReply *rep = mc__dummy_reply__unpack(NULL, h.body_len, rb);
    free(rb);
    assert_non_null(rep);
    int64_t code = rep->code == 0 && rep->n_results ? rep->results[0] : rep->code;
    mc__dummy_reply__free_unpacked(rep, NULL);
    return code;
}

static int64_t raw_range_call(int fd, uint16_t op, const char *key, uint32_t region,
                              uint64_t offset, uint64_t size)
{
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    Mc__DummyRange r = MC__DUMMY_RANGE__INIT, *rp = &r;
    char *k = (char *)key;
    r.region = region;
    r.offset = offset;
    r.size = size;
    req.ranges = &rp;
    req.n_ranges = 1;
    if (key) {
        req.keys = &k;
        req.n_keys = 1;
    }
    return raw_call(fd, op, &req, -1);
}

static void test_hand_crafted_ranges_outside_regions_are_refused(void **state)
{
    /* a reference object the attacker tries to read and overwrite */
    mc_store_t *d = new_dummy();
    uint8_t ref[4096];
    fill(ref, sizeof(ref), 99);
    assert_int_equal(mc_store_put(d, "guard/ref", ref, sizeof(ref), NULL), 0);

    int fd = raw_connect(holder_port);
    Mc__DummyRequest hello = MC__DUMMY_REQUEST__INIT;
    hello.client_id = "attacker";
    assert_int_equal(raw_call(fd, MC_DUMMY_HELLO, &hello, -1), 0);
    /* an unsealed memfd is not mapped (the dummy could shrink it under the real client) */
    int loose = memfd_create("loose", MFD_CLOEXEC);
    assert_int_equal(ftruncate(loose, 65536), 0);
    assert_int_equal(raw_range_call(fd, MC_DUMMY_MAP, NULL, 5, 0, 65536), MC_ERR_INVALID_PARAMS);
    Mc__DummyRequest map = MC__DUMMY_REQUEST__INIT;
    Mc__DummyRange mr = MC__DUMMY_RANGE__INIT, *mrp = &mr;
    mr.region = 5;
    mr.size = 65536;
    map.ranges = &mrp;
    map.n_ranges = 1;
    assert_int_equal(raw_call(fd, MC_DUMMY_MAP, &map, loose), MC_ERR_INVALID_PARAMS);
    /* a sealed one of 64 KiB is; claiming more than the file holds is not */
    int mfd = memfd_create("attacker_shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_int_equal(ftruncate(mfd, 65536), 0);
    assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    mr.size = 1 << 20;
    assert_int_equal(raw_call(fd, MC_DUMMY_MAP, &map, mfd), MC_ERR_INVALID_PARAMS);
    mr.size = 65536;
    assert_int_equal(raw_call(fd, MC_DUMMY_MAP, &map, mfd), 0);
    /* reads and writes past the region, across its end, in an unknown region: refused */
    assert_int_equal(raw_range_call(fd, MC_DUMMY_READ, "guard/ref", 5, 65536 - 100, 4096),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(raw_range_call(fd, MC_DUMMY_READ, "guard/ref", 5, UINT64_MAX - 10, 4096),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(raw_range_call(fd, MC_DUMMY_READ, "guard/ref", 6, 0, 4096),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(raw_range_call(fd, MC_DUMMY_WRITE, "guard/evil", 5, 1ull << 40, 4096),
                     MC_ERR_INVALID_PARAMS);
    /* an offset that reaches from the attacker's region into another dummy's memory (the victim
     * d's local buffer, registered with the real client's store too) */
    uint64_t mine = mapping_of(holder.proc.pid, "memfd:attacker_shm");
    uint64_t victim = mapping_of(holder.proc.pid, "memfd:mooncake_shm");
    assert_true(mine != 0 && victim != 0);
    assert_int_equal(raw_range_call(fd, MC_DUMMY_READ, "guard/ref", 5, victim - mine, 4096),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(raw_range_call(fd, MC_DUMMY_WRITE, "guard/stolen", 5, victim - mine, 4096),
                     MC_ERR_INVALID_PARAMS);
    /* inside the region works, and lands in the dummy's own memory */
    assert_int_equal(raw_range_call(fd, MC_DUMMY_READ, "guard/ref", 5, 65536 - 4096, 4096), 4096);
    uint8_t *view = mmap(NULL, 65536, PROT_READ, MAP_SHARED, mfd, 0);
    assert_true(view != MAP_FAILED);
    assert_memory_equal(view + 65536 - 4096, ref, sizeof(ref));
    munmap(view, 65536);
    close(fd);
    close(mfd);
    close(loose);
    /* the real client is intact: nothing written, the reference unchanged */
    uint8_t back[4096];
    assert_int_equal(mc_store_exist(d, "guard/evil"), 0);
    assert_int_equal(mc_store_exist(d, "guard/stolen"), 0);
    assert_int_equal(mc_store_get(d, "guard/ref", back, sizeof(back)), 4096);
    assert_memory_equal(back, ref, sizeof(ref));
    assert_int_equal(mc_store_remove(d, "guard/ref", 1), 0);
    mc_store_free(d);
}

static void test_another_uid_is_refused(void **state)
{
    if (getuid() != 0) {
        skip(); /* needs root to become another uid (nobody) */
        return;
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
            _exit(3);
        mc_store_t *d = new_dummy_with(NULL, MiB);
        _exit(d ? 1 : 0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    mc_store_t *d = new_dummy(); /* this uid still is */
    mc_store_free(d);
}

static void test_cluster_secret_is_required_when_set(void **state)
{
    /* a holder with a secret joins only a master with it: a cluster of its own */
    mc_holder_t h;
    mc_master_t m2;
    int port = mc_test_free_port(), saved = holder_port;
    const char *const secret_flags[] = {"--cluster_secret=dummy-test-secret-0123456789", NULL};
    char port_flag[32];
    snprintf(port_flag, sizeof(port_flag), "--port=%d", port);
    const char *hf[] = {port_flag, secret_flags[0], NULL};
    assert_int_equal(mc_master_start(&m2, 0, secret_flags), 0);
    assert_int_equal(mc_holder_start(&h, &m2, "64MB", hf, NULL, 20000), 0);
    holder_port = port;
    assert_null(new_dummy_with(NULL, MiB));
    assert_null(new_dummy_with("wrong-secret-wrong-secret", MiB));
    mc_store_t *d = new_dummy_with("dummy-test-secret-0123456789", MiB);
    assert_non_null(d);
    assert_int_equal(mc_store_put(d, "secret/k", "v", 1, NULL), 0);
    mc_store_free(d);
    holder_port = saved;
    /* and a dummy with a secret refuses a real client without one */
    assert_null(new_dummy_with("dummy-test-secret-0123456789", MiB));
    mc_cluster_untrack(h.proc.pid);
    mc_proc_stop(&h.proc, SIGTERM, 10000);
    mc_master_stop(&m2, SIGTERM);
}

/* ---- liveness ------------------------------------------------------------------------------ */

/* Calls put until it returns `want` or timeout_ms passes; the last result. */
static int put_until(mc_store_t *d, const char *key, int want, int timeout_ms, uint64_t *took_ms)
{
    uint64_t t0 = mc_now_ms();
    int rc;
    do {
        rc = mc_store_put(d, key, "x", 1, NULL);
        if (rc == want)
            break;
        usleep(50 * 1000);
    } while (mc_now_ms() - t0 < (uint64_t)timeout_ms);
    if (took_ms)
        *took_ms = mc_now_ms() - t0;
    return rc;
}

static void test_real_client_killed_then_restarted(void **state)
{
    mc_holder_t h;
    int port = mc_test_free_port(), saved = holder_port;
    assert_int_equal(start_holder_on(&h, port, NULL), 0);
    holder_port = port;
    mc_store_t *d = new_dummy();
    void *buf;
    assert_int_equal(mc_store_alloc_shared(d, MiB, &buf), 0);
    assert_int_equal(mc_store_register_buffer(d, buf, MiB), 0);
    fill(buf, MiB, 1);
    assert_int_equal(mc_store_put_from(d, "kill/before", buf, MiB, NULL), 0);

    mc_cluster_untrack(h.proc.pid);
    kill(h.proc.pid, SIGKILL);
    waitpid(h.proc.pid, NULL, 0);
    uint64_t took;
    assert_int_equal(put_until(d, "kill/during", MC_ERR_RPC_FAIL, 5000, &took), MC_ERR_RPC_FAIL);
    assert_true(took < 3000);
    uint64_t t0 = mc_now_ms();
    assert_int_equal(mc_store_put(d, "kill/during", "x", 1, NULL), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_store_put_from(d, "kill/during", buf, 10, NULL), MC_ERR_RPC_FAIL);
    /* At once, no hang: a put that waited for an answer would take the 60 s call timeout; 2.5 s
     * (under the 3 s ping timeout) leaves room for a loaded machine's scheduling delays. */
    assert_true(mc_now_ms() - t0 < 2500);
    assert_int_equal(mc_store_health_check(d), 2);

    assert_int_equal(start_holder_on(&h, port, NULL), 0);
    assert_int_equal(put_until(d, "kill/after", 0, 10000, &took), 0);
    assert_int_equal(mc_store_health_check(d), 0);
    /* its registered buffer was handed over again: zero-copy works (once the master expired
     * the killed holder's segment, which has the same endpoint: puts placed there fail) */
    fill(buf, MiB, 2);
    t0 = mc_now_ms();
    int rc;
    while ((rc = mc_store_put_from(d, "kill/zc", buf, MiB, NULL)) != 0 && mc_now_ms() - t0 < 20000)
        usleep(100 * 1000);
    assert_int_equal(rc, 0);
    uint8_t *copy = malloc(MiB);
    memcpy(copy, buf, MiB);
    memset(buf, 0, MiB);
    assert_int_equal(mc_store_get_into(d, "kill/zc", buf, MiB), (int64_t)MiB);
    assert_memory_equal(copy, buf, MiB);
    free(copy);
    mc_store_free(d);
    mc_cluster_untrack(h.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&h.proc, SIGTERM, 10000)));
    holder_port = saved;
}

static void test_real_client_stopped_fails_within_the_call_timeout(void **state)
{
    setenv("MC_DUMMY_CALL_TIMEOUT_MS", "2000", 1);
    mc_store_t *d = new_dummy();
    unsetenv("MC_DUMMY_CALL_TIMEOUT_MS");
    assert_int_equal(mc_proc_freeze(holder.proc.pid, 5000), 0);
    uint64_t t0 = mc_now_ms();
    int rc = mc_store_put(d, "stop/k", "x", 1, NULL);
    uint64_t took = mc_now_ms() - t0;
    int frozen = mc_proc_is_frozen(holder.proc.pid);
    mc_proc_thaw(holder.proc.pid);
    assert_int_equal(frozen, 1);
    assert_int_equal(rc, MC_ERR_RPC_FAIL);
    assert_true(took < 4000);
    uint64_t t;
    assert_int_equal(put_until(d, "stop/k", 0, 10000, &t), 0);
    assert_int_equal(mc_store_remove(d, "stop/k", 1), 0);
    mc_store_free(d);
}

static void test_killed_dummy_memory_is_unmapped_by_the_real_client(void **state)
{
    int before = wait_mappings(holder.proc.pid, 0); /* no dummy alive */
    assert_int_equal(before, 0);
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
        close(pipefd[0]);
        mc_store_t *d = new_dummy_with(NULL, 4 * MiB);
        void *buf;
        int ok = d && mc_store_alloc_shared(d, 2 * MiB, &buf) == 0 &&
                 mc_store_register_buffer(d, buf, 2 * MiB) == 0;
        char c = ok ? 'y' : 'n';
        if (write(pipefd[1], &c, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    close(pipefd[1]);
    char c = 0;
    assert_int_equal(read(pipefd[0], &c, 1), 1);
    close(pipefd[0]);
    assert_int_equal(c, 'y');
    assert_int_equal(shm_mappings(holder.proc.pid), before + 2); /* local buffer + buffer */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    uint64_t t0 = mc_now_ms();
    while (shm_mappings(holder.proc.pid) != before && mc_now_ms() - t0 < 5000)
        usleep(20 * 1000);
    assert_int_equal(shm_mappings(holder.proc.pid), before);
}

/* A dummy killed while its calls run (a 32 MiB get_into its registered buffer, again and again):
 * the real client finishes the call in flight, then drops the dummy's memory, and keeps serving. */
static void test_dummy_killed_mid_transfer_leaves_the_real_client_serving(void **state)
{
    mc_store_t *d = new_dummy();
    void *src;
    assert_int_equal(mc_store_alloc_shared(d, 32 * MiB, &src), 0);
    assert_int_equal(mc_store_register_buffer(d, src, 32 * MiB), 0);
    fill(src, 32 * MiB, 5);
    assert_int_equal(mc_store_put_from(d, "midkill/obj", src, 32 * MiB, NULL), 0);
    int before = wait_mappings(holder.proc.pid, 2); /* d: local buffer + src */
    assert_int_equal(before, 2);
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pipefd[0]);
        mc_store_t *c = new_dummy_with(NULL, MiB);
        void *buf;
        if (!c || mc_store_alloc_shared(c, 32 * MiB, &buf) != 0 ||
            mc_store_register_buffer(c, buf, 32 * MiB) != 0)
            _exit(2);
        for (int i = 0;; i++) {
            if (mc_store_get_into(c, "midkill/obj", buf, 32 * MiB) != (int64_t)(32 * MiB))
                _exit(3);
            if (i == 2 && write(pipefd[1], "y", 1) != 1)
                _exit(4);
        }
    }
    close(pipefd[1]);
    char c = 0;
    assert_int_equal(read(pipefd[0], &c, 1), 1); /* it is in its fourth read now */
    close(pipefd[0]);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st)); /* killed, not exited on a failed read */
    uint64_t t0 = mc_now_ms();
    while (shm_mappings(holder.proc.pid) != before && mc_now_ms() - t0 < 5000)
        usleep(20 * 1000);
    assert_int_equal(shm_mappings(holder.proc.pid), before);
    /* the real client still serves, bytes intact */
    void *dst;
    assert_int_equal(mc_store_alloc_shared(d, 32 * MiB, &dst), 0);
    assert_int_equal(mc_store_register_buffer(d, dst, 32 * MiB), 0);
    assert_int_equal(mc_store_get_into(d, "midkill/obj", dst, 32 * MiB), (int64_t)(32 * MiB));
    assert_memory_equal(src, dst, 32 * MiB);
    assert_int_equal(mc_store_remove(d, "midkill/obj", 1), 0);
    mc_store_free(d);
}

/* A dummy that goes silent (no ping) is dropped after MC_DUMMY_TTL_MS, its memory unmapped. */
static void test_silent_dummy_is_dropped_after_the_ttl(void **state)
{
    int before = wait_mappings(holder.proc.pid, 0); /* no dummy alive */
    assert_int_equal(before, 0);
    int fd = raw_connect(holder_port);
    int mfd = memfd_create("mooncake_shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_int_equal(ftruncate(mfd, 65536), 0);
    assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    Mc__DummyRequest map = MC__DUMMY_REQUEST__INIT;
    Mc__DummyRange mr = MC__DUMMY_RANGE__INIT, *mrp = &mr;
    mr.region = 1;
    mr.size = 65536;
    map.ranges = &mrp;
    map.n_ranges = 1;
    assert_int_equal(raw_call(fd, MC_DUMMY_MAP, &map, mfd), 0);
    uint64_t t0 = mc_now_ms();
    assert_int_equal(shm_mappings(holder.proc.pid), before + 1);
    char byte;
    mc_net_set_timeouts(fd, MC_DUMMY_TTL_MS + 10000); /* a broken TTL fails, never hangs */
    ssize_t n = recv(fd, &byte, 1, 0);                /* blocks until the real client closes it */
    uint64_t took = mc_now_ms() - t0;
    assert_int_equal(n, 0);
    assert_true(took >= MC_DUMMY_TTL_MS - 500 && took < MC_DUMMY_TTL_MS + 3000);
    while (shm_mappings(holder.proc.pid) != before && mc_now_ms() - t0 < MC_DUMMY_TTL_MS + 5000)
        usleep(20 * 1000);
    assert_int_equal(shm_mappings(holder.proc.pid), before);
    close(fd);
    close(mfd);
}

typedef struct worker {
    mc_store_t *d;
    int id;
    int failures;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    size_t len = 256 * 1024;
    uint8_t *src = malloc(len), *dst = malloc(len);
    char key[64];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "threads/%d/%d", w->id, i);
        fill(src, len, (uint64_t)(w->id * 100 + i));
        int rc = mc_store_put(w->d, key, src, len, NULL);
        memset(dst, 0, len);
        int64_t got = mc_store_get(w->d, key, dst, len);
        if (rc != 0 || got != (int64_t)len)
            fprintf(stderr, "worker %d key %s: put %d get %lld\n", w->id, key, rc, (long long)got);
        w->failures += rc != 0;
        w->failures += got != (int64_t)len;
        w->failures += memcmp(src, dst, len) != 0;
    }
    free(src);
    free(dst);
    return NULL;
}

/* mooncake_client --threads=4: a dummy opens 4 connections (each maps its memory: 4 mappings of
 * every memfd) and 4 of its threads' calls run at once, bytes exact. */
static void test_threads_flag_gives_a_dummy_that_many_connections(void **state)
{
    mc_holder_t h;
    int port = mc_test_free_port(), saved = holder_port;
    const char *const extra[] = {"--threads=4", NULL};
    assert_int_equal(start_holder_on(&h, port, extra), 0);
    holder_port = port;
    int before = shm_mappings(h.proc.pid);
    mc_store_t *d = new_dummy();
    assert_int_equal(shm_mappings(h.proc.pid), before + 4);
    void *buf;
    assert_int_equal(mc_store_alloc_shared(d, MiB, &buf), 0);
    assert_int_equal(mc_store_register_buffer(d, buf, MiB), 0);
    assert_int_equal(shm_mappings(h.proc.pid), before + 8);
    pthread_t t[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){d, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(mc_store_unregister_buffer(d, buf), 0);
    assert_int_equal(shm_mappings(h.proc.pid), before + 4);
    assert_int_equal(mc_store_remove_by_regex(d, "^threads/", 1), 80);
    mc_store_free(d);
    uint64_t t0 = mc_now_ms();
    while (shm_mappings(h.proc.pid) != before && mc_now_ms() - t0 < 5000)
        usleep(20 * 1000);
    assert_int_equal(shm_mappings(h.proc.pid), before);
    holder_port = saved;
    mc_cluster_untrack(h.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&h.proc, SIGTERM, 10000)));
}

static void test_closed_dummy_answers_invalid_params(void **state)
{
    mc_store_t *d = new_dummy();
    assert_int_equal(mc_store_close(d), 0);
    assert_int_equal(mc_store_health_check(d), 1);
    assert_int_equal(mc_store_put(d, "closed/k", "x", 1, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_exist(d, "closed/k"), MC_ERR_INVALID_PARAMS);
    mc_store_free(d);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", mc_test_free_port());
    mc_store_dummy_config_t cfg = {.real_client_addr = addr, .local_buffer_size = MiB};
    mc_store_t *none = NULL;
    assert_int_equal(mc_store_setup_dummy(&cfg, &none), MC_ERR_RPC_FAIL);
    cfg.real_client_addr = "no-port";
    assert_int_equal(mc_store_setup_dummy(&cfg, &none), MC_ERR_INVALID_PARAMS);
}

static int setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    if (mc_master_start(&cluster, 0, NULL) != 0)
        return -1;
    holder_port = mc_test_free_port();
    return start_holder_on(&holder, holder_port, NULL);
}

static int teardown(void **state)
{
    mc_cluster_kill_all();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_batch_byte_exact_across_two_dummies),
        cmocka_unit_test(test_zero_copy_on_registered_shared_memory),
        cmocka_unit_test(test_local_buffer_exhaustion_is_no_available_handle),
        cmocka_unit_test(test_hand_crafted_ranges_outside_regions_are_refused),
        cmocka_unit_test(test_another_uid_is_refused),
        cmocka_unit_test(test_cluster_secret_is_required_when_set),
        cmocka_unit_test(test_killed_dummy_memory_is_unmapped_by_the_real_client),
        cmocka_unit_test(test_dummy_killed_mid_transfer_leaves_the_real_client_serving),
        cmocka_unit_test(test_silent_dummy_is_dropped_after_the_ttl),
        cmocka_unit_test(test_threads_flag_gives_a_dummy_that_many_connections),
        cmocka_unit_test(test_real_client_stopped_fails_within_the_call_timeout),
        cmocka_unit_test(test_real_client_killed_then_restarted),
        cmocka_unit_test(test_closed_dummy_answers_invalid_params),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
