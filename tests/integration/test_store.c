/*
 * test_store.c — store integration tests: a real mooncake_master, real mooncake_client processes
 * holding segments, and this process as a store client with no segment (global_segment_size 0),
 * all on loopback with no extra environment. In builds with the rdma transport (MC_HAVE_RDMA) a
 * third group runs put/get with protocol rdma (UCX), next to tcp clients and holders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/store.h"
#include "mooncake/http_metadata.h"
#include "cluster.h"
#include "net.h"
#include "proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
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
#define MASTER_BIN MC_BUILD_DIR "/tools/mooncake_master"
#define CLIENT_BIN MC_BUILD_DIR "/tools/mooncake_client"

extern char **environ;

/*
 * Every child this test starts is recorded, so a failed assertion (which skips the test's own
 * cleanup) cannot leave a master or mooncake_client running: they would hold ctest's output pipe
 * open and hang it. The group teardowns and an atexit handler kill whatever is left
 * (mc_cluster_kill_all, cluster.h).
 */
typedef mc_master_t master_t;
typedef mc_holder_t holder_t;

/* Starts mooncake_master with extra flags (NULL-terminated) and waits for its RPC port. */
static int start_master_on(master_t *m, int rpc_port, const char *const *extra)
{
    return mc_master_start_on(m, rpc_port, 0, extra);
}

static int start_master(master_t *m, const char *const *extra)
{
    return mc_master_start(m, 0, extra);
}

/* A mooncake_client holding a segment of `segment` bytes, speaking `protocol`. */
static int start_holder_with(holder_t *h, const master_t *m, const char *segment, int disable_shm,
                             const char *protocol)
{
    char protocol_flag[32];
    snprintf(protocol_flag, sizeof(protocol_flag), "--protocol=%s", protocol);
    const char *const flags[] = {protocol_flag, NULL};
    static const char *const no_shm[] = {"MC_DISABLE_SHM=1", NULL};
    int rc = mc_holder_start(h, m, segment, flags, disable_shm ? no_shm : NULL, 20000);
    unsetenv("MC_DISABLE_SHM");
    return rc;
}

static int start_holder(holder_t *h, const master_t *m, const char *segment, int disable_shm)
{
    return start_holder_with(h, m, segment, disable_shm, "tcp");
}

static mc_store_t *new_client_with(const master_t *m, const char *protocol, int disable_shm)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .global_segment_size = 0,
                             .local_buffer_size = 16 * MiB,
                             .protocol = protocol,
                             .master_server_addr = m->addr};
    mc_store_t *s = NULL;
    if (disable_shm)
        setenv("MC_DISABLE_SHM", "1", 1);
    int rc = mc_store_setup(&cfg, &s);
    unsetenv("MC_DISABLE_SHM");
    assert_int_equal(rc, 0);
    return s;
}

static mc_store_t *new_client(const master_t *m)
{
    return new_client_with(m, "tcp", 0);
}

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

/* ---- one cluster for most tests: master (lease 10 s) + one 256 MiB holder ---------------- */

static master_t cluster;
static holder_t holder_a;

static void test_64_values_of_1_mib_round_trip_byte_exact(void **state)
{
    mc_store_t *s = new_client(&cluster);
    uint8_t *src = malloc(MiB), *dst = malloc(MiB);
    char key[64];
    for (int i = 0; i < 64; i++) {
        snprintf(key, sizeof(key), "mib/%d", i);
        fill(src, MiB, (uint64_t)i);
        assert_int_equal(mc_store_put(s, key, src, MiB, NULL), 0);
    }
    for (int i = 0; i < 64; i++) {
        snprintf(key, sizeof(key), "mib/%d", i);
        fill(src, MiB, (uint64_t)i);
        memset(dst, 0, MiB);
        assert_int_equal(mc_store_get(s, key, dst, MiB), (int64_t)MiB);
        assert_memory_equal(src, dst, MiB);
    }
    assert_int_equal(mc_store_remove_by_regex(s, "^mib/", 1), 64);
    free(src);
    free(dst);
    mc_store_free(s);
}

static void test_batch_put_and_get_with_duplicate_keys(void **state)
{
    mc_store_t *s = new_client(&cluster);
    enum { N = 6 };
    const char *keys[N] = {"b/0", "b/1", "b/0", "b/2", "b/1", "b/3"};
    uint8_t vals[N][4096], out[N][4096];
    const void *vp[N];
    void *op[N];
    size_t sizes[N], caps[N];
    int res[N];
    int64_t got[N];
    for (int i = 0; i < N; i++) {
        fill(vals[i], sizeof(vals[i]), (uint64_t)i + 500);
        vp[i] = vals[i];
        op[i] = out[i];
        sizes[i] = 1000 + (size_t)i;
        caps[i] = sizeof(out[i]);
    }
    assert_int_equal(mc_store_put_batch(s, keys, vp, sizes, N, NULL, res), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i], 0);
    memset(out, 0, sizeof(out));
    assert_int_equal(mc_store_get_batch(s, keys, op, caps, N, got), 0);
    /* The first put of a key wins; every destination of a repeated key is filled with it. */
    const int first[N] = {0, 1, 0, 3, 1, 5};
    for (int i = 0; i < N; i++) {
        assert_int_equal(got[i], (int64_t)sizes[first[i]]);
        assert_memory_equal(out[i], vals[first[i]], sizes[first[i]]);
    }
    int ex[3];
    const char *ekeys[3] = {"b/0", "b/missing", "b/3"};
    assert_int_equal(mc_store_batch_exist(s, ekeys, 3, ex), 0);
    assert_int_equal(ex[0], 1);
    assert_int_equal(ex[1], 0);
    assert_int_equal(ex[2], 1);
    assert_int_equal(mc_store_remove_by_regex(s, "^b/", 1), 4);
    mc_store_free(s);
}

static void test_empty_value_differs_from_missing_key(void **state)
{
    mc_store_t *s = new_client(&cluster);
    uint8_t buf[8];
    assert_int_equal(mc_store_put(s, "empty", "", 0, NULL), 0);
    assert_int_equal(mc_store_get(s, "empty", buf, sizeof(buf)), 0);
    assert_int_equal(mc_store_get_size(s, "empty"), 0);
    assert_int_equal(mc_store_exist(s, "empty"), 1);
    assert_int_equal(mc_store_get(s, "never-put", buf, sizeof(buf)), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_get_size(s, "never-put"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_exist(s, "never-put"), 0);
    assert_int_equal(mc_store_remove(s, "empty", 1), 0);
    mc_store_free(s);
}

/* ---- close while many threads are calling ------------------------------------------------- */

typedef struct hammer {
    mc_store_t *s;
    int id;
    atomic_long ops;
    int last_rc;
} hammer_t;

static void *hammer_main(void *arg)
{
    hammer_t *h = arg;
    char key[64], buf[4096];
    memset(buf, h->id, sizeof(buf));
    for (long i = 0;; i++) {
        snprintf(key, sizeof(key), "hammer/%d/%ld", h->id, i % 8);
        int rc = (i & 1) ? (int)mc_store_get(h->s, key, buf, sizeof(buf))
                         : mc_store_upsert(h->s, key, buf, sizeof(buf), NULL);
        atomic_fetch_add(&h->ops, 1);
        if (rc == MC_ERR_INVALID_PARAMS) { /* the store was closed */
            h->last_rc = rc;
            return NULL;
        }
    }
}

typedef struct closer {
    mc_store_t *s;
    atomic_int done;
    int rc;
} closer_t;

static void *closer_main(void *arg)
{
    closer_t *c = arg;
    c->rc = mc_store_close(c->s);
    atomic_store(&c->done, 1);
    return NULL;
}

static void test_close_returns_while_many_threads_call(void **state)
{
    enum { N = 8 };
    mc_store_t *s = new_client(&cluster);
    hammer_t h[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        h[i] = (hammer_t){.s = s, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
    }
    /* Every thread is busy calling before the close starts. */
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < N; i++) {
        while (atomic_load(&h[i].ops) < 50)
            usleep(1000);
    }
    closer_t c = {.s = s};
    pthread_t ct;
    assert_int_equal(pthread_create(&ct, NULL, closer_main, &c), 0);
    for (int waited = 0; !atomic_load(&c.done) && waited < 30000; waited += 10)
        usleep(10000);
    assert_true(atomic_load(&c.done)); /* close returned while the calls kept coming */
    pthread_join(ct, NULL);
    assert_int_equal(c.rc, 0);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(h[i].last_rc, MC_ERR_INVALID_PARAMS);
    }
    assert_int_equal(mc_store_close(s), 0); /* idempotent */
    mc_store_free(s);
}

static void test_key_length_limits(void **state)
{
    mc_store_t *s = new_client(&cluster);
    static char key[MC_MAX_KEY_LEN + 2];
    const size_t ok_lengths[] = {1, 255, 256, MC_MAX_KEY_LEN};
    uint8_t v[32], out[32];
    for (size_t i = 0; i < 4; i++) {
        memset(key, 'k', ok_lengths[i]);
        key[ok_lengths[i]] = '\0';
        key[0] = (char)('a' + i);
        fill(v, sizeof(v), i);
        assert_int_equal(mc_store_put(s, key, v, sizeof(v), NULL), 0);
        assert_int_equal(mc_store_get(s, key, out, sizeof(out)), (int64_t)sizeof(v));
        assert_memory_equal(v, out, sizeof(v));
        assert_int_equal(mc_store_remove(s, key, 1), 0);
    }
    memset(key, 'k', MC_MAX_KEY_LEN + 1);
    key[MC_MAX_KEY_LEN + 1] = '\0';
    assert_int_equal(mc_store_put(s, key, v, sizeof(v), NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_get(s, key, out, sizeof(out)), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_put(s, "", v, sizeof(v), NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_put(s, NULL, v, sizeof(v), NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_put(s, "a/b/c//d", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_store_get(s, "a/b/c//d", out, sizeof(out)), (int64_t)sizeof(v));
    assert_int_equal(mc_store_remove(s, "a/b/c//d", 1), 0);
    mc_store_free(s);
}

static void test_lease_blocks_remove_until_force(void **state)
{
    mc_store_t *s = new_client(&cluster);
    uint8_t v[100], out[100];
    fill(v, sizeof(v), 3);
    assert_int_equal(mc_store_put(s, "leased", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_store_get(s, "leased", out, sizeof(out)), 100);
    assert_int_equal(mc_store_remove(s, "leased", 0), MC_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(mc_store_remove(s, "leased", 1), 0);
    assert_int_equal(mc_store_remove(s, "leased", 1), MC_ERR_OBJECT_NOT_FOUND);
    mc_store_free(s);
}

static void test_immutable_put_keeps_first_value_and_upsert_replaces(void **state)
{
    mc_store_t *s = new_client(&cluster);
    uint8_t a[300], b[200], out[300];
    fill(a, sizeof(a), 10);
    fill(b, sizeof(b), 11);
    assert_int_equal(mc_store_put(s, "imm", a, sizeof(a), NULL), 0);
    assert_int_equal(mc_store_put(s, "imm", b, sizeof(b), NULL), 0); /* exists: success, kept */
    assert_int_equal(mc_store_get(s, "imm", out, sizeof(out)), 300);
    assert_memory_equal(out, a, sizeof(a));
    assert_int_equal(mc_store_upsert(s, "imm", b, sizeof(b), NULL), 0);
    assert_int_equal(mc_store_get(s, "imm", out, sizeof(out)), 200);
    assert_memory_equal(out, b, sizeof(b));
    assert_int_equal(mc_store_get(s, "imm", out, 10), MC_ERR_BUFFER_OVERFLOW);
    assert_int_equal(mc_store_remove(s, "imm", 1), 0);
    mc_store_free(s);
}

typedef struct same_key_arg {
    mc_store_t *s;
    int id;
    int rc;
} same_key_arg_t;

#define SAME_KEY_SIZE (2 * MiB)

static void *put_same_key(void *p)
{
    same_key_arg_t *a = p;
    uint8_t *v = malloc(SAME_KEY_SIZE);
    fill(v, SAME_KEY_SIZE, 1000 + (uint64_t)a->id);
    a->rc = mc_store_put(a->s, "contended", v, SAME_KEY_SIZE, NULL);
    free(v);
    return NULL;
}

static void test_8_threads_putting_one_key_leave_one_intact_value(void **state)
{
    mc_store_t *s = new_client(&cluster);
    pthread_t t[8];
    same_key_arg_t args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (same_key_arg_t){s, i, -1};
        pthread_create(&t[i], NULL, put_same_key, &args[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(args[i].rc, 0);
    }
    uint8_t *out = malloc(SAME_KEY_SIZE), *expect = malloc(SAME_KEY_SIZE);
    assert_int_equal(mc_store_get(s, "contended", out, SAME_KEY_SIZE), (int64_t)SAME_KEY_SIZE);
    int matches = 0;
    for (int i = 0; i < 8; i++) {
        fill(expect, SAME_KEY_SIZE, 1000 + (uint64_t)i);
        matches += memcmp(out, expect, SAME_KEY_SIZE) == 0;
    }
    assert_int_equal(matches, 1); /* exactly one writer's bytes, whole */
    assert_int_equal(mc_store_remove(s, "contended", 1), 0);
    free(out);
    free(expect);
    mc_store_free(s);
}

/*
 * Linearizability across clients: once put (or upsert, or remove) returns to one client, another
 * client's very next get sees it — the hand-off between the two is a shared variable, faster than
 * any round trip. Guards the small-object fast paths (a put acknowledged before the master
 * published it would fail here).
 */
#define HANDOFF_ROUNDS 1500
#define HANDOFF_SIZE 4096

typedef struct handoff {
    mc_store_t *reader;
    atomic_int published; /* round whose put/upsert/remove has returned; -1 = none */
    atomic_int checked;   /* last round the reader checked */
    int stale;            /* reads that missed what was already acknowledged */
    int wrong;            /* reads with other bytes */
} handoff_t;

static int handoff_wait(atomic_int *v, int want)
{
    for (uint64_t end = mc_now_ms() + 30000; mc_now_ms() < end;)
        if (atomic_load(v) >= want)
            return 0;
    return -1;
}

static void *handoff_reader(void *p)
{
    handoff_t *h = p;
    uint8_t got[HANDOFF_SIZE], want[HANDOFF_SIZE];
    char key[64];
    for (int i = 0; i < HANDOFF_ROUNDS; i++) {
        if (handoff_wait(&h->published, i) != 0)
            break;
        snprintf(key, sizeof(key), "handoff/%d", i / 3);
        int64_t n = mc_store_get(h->reader, key, got, sizeof(got));
        if (i % 3 == 2) { /* removed */
            h->stale += n >= 0;
        } else { /* put (seed i) or upsert (seed i) */
            fill(want, sizeof(want), 7000 + (uint64_t)i);
            if (n != HANDOFF_SIZE)
                h->stale++;
            else if (memcmp(got, want, sizeof(want)) != 0)
                h->wrong++;
        }
        atomic_store(&h->checked, i);
    }
    return NULL;
}

static void test_a_returned_put_is_seen_by_another_client_at_once(void **state)
{
    mc_store_t *w = new_client(&cluster);
    handoff_t h = {.reader = new_client(&cluster)};
    atomic_init(&h.published, -1);
    atomic_init(&h.checked, -1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, handoff_reader, &h), 0);
    uint8_t v[HANDOFF_SIZE];
    char key[64];
    for (int i = 0; i < HANDOFF_ROUNDS; i++) {
        snprintf(key, sizeof(key), "handoff/%d", i / 3);
        fill(v, sizeof(v), 7000 + (uint64_t)i);
        if (i % 3 == 0)
            assert_int_equal(mc_store_put(w, key, v, sizeof(v), NULL), 0);
        else if (i % 3 == 1)
            assert_int_equal(mc_store_upsert(w, key, v, sizeof(v), NULL), 0);
        else
            assert_int_equal(mc_store_remove(w, key, 1), 0);
        atomic_store(&h.published, i);
        assert_int_equal(handoff_wait(&h.checked, i), 0); /* one operation in flight at a time */
    }
    pthread_join(t, NULL);
    printf("hand-off: %d rounds, %d stale, %d wrong\n", HANDOFF_ROUNDS, h.stale, h.wrong);
    assert_int_equal(h.stale, 0);
    assert_int_equal(h.wrong, 0);
    mc_store_free(h.reader);
    mc_store_free(w);
}

static void test_pure_server_cannot_put_and_closed_store_refuses(void **state)
{
    mc_store_config_t cfg = {.local_hostname = "127.0.0.1",
                             .metadata_server = "P2PHANDSHAKE",
                             .global_segment_size = 4 * MiB,
                             .local_buffer_size = 0,
                             .master_server_addr = cluster.addr};
    mc_store_t *s = NULL;
    assert_int_equal(mc_store_setup(&cfg, &s), 0);
    uint8_t v[16] = {0};
    assert_int_not_equal(mc_store_put(s, "pure", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_store_health_check(s), 0);
    assert_int_equal(mc_store_close(s), 0);
    assert_int_equal(mc_store_close(s), 0); /* idempotent */
    assert_int_equal(mc_store_health_check(s), 1);
    assert_int_equal(mc_store_exist(s, "pure"), MC_ERR_INVALID_PARAMS);
    mc_store_free(s);
}

static void test_zero_copy_calls_need_registered_buffers(void **state)
{
    mc_store_t *s = new_client(&cluster);
    size_t len = 3 * MiB + 5;
    uint8_t *buf = malloc(len), *out = malloc(len);
    fill(buf, len, 77);
    assert_int_equal(mc_store_put_from(s, "zc", buf, len, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_register_buffer(s, buf, len), 0);
    assert_int_equal(mc_store_register_buffer(s, out, len), 0);
    assert_int_equal(mc_store_put_from(s, "zc", buf, len, NULL), 0);
    assert_int_equal(mc_store_get_into(s, "zc", out, len), (int64_t)len);
    assert_memory_equal(buf, out, len);
    mc_replica_desc_t d[2];
    size_t n = 0;
    assert_int_equal(mc_store_get_replica_desc(s, "zc", d, 2, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(d[0].segment_name, holder_a.segment);
    assert_int_equal(d[0].size, len);
    assert_int_equal(mc_store_unregister_buffer(s, out), 0);
    assert_int_equal(mc_store_get_into(s, "zc", out, len), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_remove(s, "zc", 1), 0);
    assert_int_equal(mc_store_unregister_buffer(s, buf), 0);
    free(buf);
    free(out);
    mc_store_free(s);
}

static void test_value_of_segment_size_fits_and_one_byte_more_does_not(void **state)
{
    /* Its own cluster: one 64 MiB segment, nothing else in it. A full pool is above the default
     * 90 % watermark, so proactive eviction is off here (allocation failure still evicts). */
    master_t m;
    holder_t h;
    const char *extra[] = {"--eviction_high_watermark_ratio=1.0", NULL};
    assert_int_equal(start_master(&m, extra), 0);
    assert_int_equal(start_holder(&h, &m, "64MB", 0), 0);
    mc_store_t *s = new_client(&m);
    size_t len = 64 * MiB;
    uint8_t *v = malloc(len + 1), *out = malloc(len);
    fill(v, len + 1, 5);
    assert_int_equal(mc_store_put(s, "whole", v, len, NULL), 0);
    assert_int_equal(mc_store_get(s, "whole", out, len), (int64_t)len);
    assert_memory_equal(v, out, len);
    assert_int_equal(mc_store_remove(s, "whole", 1), 0);
    assert_int_equal(mc_store_put(s, "too-big", v, len + 1, NULL), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_store_get(s, "too-big", out, len), MC_ERR_OBJECT_NOT_FOUND);
    free(v);
    free(out);
    mc_store_free(s);
    mc_proc_stop(&h.proc, SIGTERM, 10000);
    mc_master_stop(&m, SIGTERM);
}

static void test_eviction_keeps_puts_succeeding_when_the_pool_is_full(void **state)
{
    mc_store_t *s = new_client(&cluster);
    assert_true(mc_store_remove_all(s, 1) >= 0);
    size_t len = 8 * MiB;
    uint8_t *v = malloc(len), *out = malloc(len);
    char key[32];
    /* 3x the pool: without eviction the 33rd put would fail. Never read, so never leased. */
    for (int i = 0; i < 96; i++) {
        snprintf(key, sizeof(key), "ev/%d", i);
        fill(v, 64, (uint64_t)i);
        assert_int_equal(mc_store_put(s, key, v, len, NULL), 0);
    }
    /* The newest object survived, byte-exact. */
    fill(v, 64, 95);
    assert_int_equal(mc_store_get(s, "ev/95", out, len), (int64_t)len);
    assert_memory_equal(out, v, 64);
    assert_true(mc_store_remove_all(s, 1) > 0);
    free(v);
    free(out);
    mc_store_free(s);
}

/* ---- tests that run their own cluster ----------------------------------------------------- */

/* A master stopped for longer than --client_ttl while its holder kept pinging: on resume it must
 * not take its own absence for the holder's silence and drop the holder's objects. */
static void test_a_master_stopped_past_the_client_ttl_keeps_live_holders(void **state)
{
    master_t m;
    holder_t h;
    const char *const flags[] = {"--client_ttl=2", NULL};
    assert_int_equal(start_master(&m, flags), 0);
    assert_int_equal(start_holder(&h, &m, "64MB", 0), 0);
    mc_store_t *s = new_client(&m);
    uint8_t v[65536], out[65536];
    fill(v, sizeof(v), 77);
    assert_int_equal(mc_store_put(s, "paused", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_proc_freeze(m.pid, 5000), 0);
    usleep(5 * 1000 * 1000); /* 2.5 x --client_ttl: the stall is what is tested */
    assert_int_equal(mc_proc_is_frozen(m.pid), 1); /* stopped the whole 5 s */
    assert_int_equal(mc_proc_thaw(m.pid), 0);
    usleep(2 * 1000 * 1000); /* a monitor sweep or two after the resume */
    memset(out, 0, sizeof(out));
    assert_int_equal(mc_store_get(s, "paused", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(v, out, sizeof(v));
    assert_int_equal(mc_master_metric(&m, "master_expired_clients_total"), 0);
    mc_store_free(s);
    mc_cluster_untrack(h.proc.pid);
    mc_proc_stop(&h.proc, SIGTERM, 10000);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
}

static void test_two_replicas_survive_the_death_of_one_holder(void **state)
{
    master_t m;
    holder_t h1, h2;
    assert_int_equal(start_master(&m, NULL), 0);
    assert_int_equal(start_holder(&h1, &m, "64MB", 0), 0);
    assert_int_equal(start_holder(&h2, &m, "64MB", 0), 0);
    mc_store_t *s = new_client(&m);
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.replica_num = 2;
    uint8_t v[100000], out[100000];
    fill(v, sizeof(v), 42);
    assert_int_equal(mc_store_put(s, "twice", v, sizeof(v), &cfg), 0);
    mc_replica_desc_t d[4];
    size_t n = 0;
    assert_int_equal(mc_store_get_replica_desc(s, "twice", d, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_string_not_equal(d[0].segment_name, d[1].segment_name);
    mc_proc_stop(&h1.proc, SIGKILL, 5000);
    memset(out, 0, sizeof(out));
    assert_int_equal(mc_store_get(s, "twice", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(v, out, sizeof(v));
    mc_store_free(s);
    mc_proc_stop(&h2.proc, SIGTERM, 10000);
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
}

static void test_zero_lease_ttl_means_no_lease(void **state)
{
    master_t m;
    holder_t h;
    const char *extra[] = {"--default_kv_lease_ttl=0", NULL};
    assert_int_equal(start_master(&m, extra), 0);
    assert_int_equal(start_holder(&h, &m, "32MB", 0), 0);
    mc_store_t *s = new_client(&m);
    uint8_t v[64], out[64];
    fill(v, sizeof(v), 9);
    assert_int_equal(mc_store_put(s, "nolease", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_store_get(s, "nolease", out, sizeof(out)), 64);
    assert_memory_equal(v, out, sizeof(v));
    assert_int_equal(mc_store_exist(s, "nolease"), 1);
    assert_int_equal(mc_store_remove(s, "nolease", 0), 0); /* no -706 */
    mc_store_free(s);
    mc_proc_stop(&h.proc, SIGTERM, 10000);
    mc_master_stop(&m, SIGTERM);
}

typedef struct big_put_arg {
    const char *master_addr;
} big_put_arg_t;

static void test_client_killed_mid_put_is_revoked_after_ttl(void **state)
{
    /* A writer process dies in the middle of a large put. Readers must never see its partial
     * bytes, and once its TTL expires the key can be written again. */
    master_t m;
    holder_t h;
    const char *extra[] = {"--client_ttl=2", NULL};
    assert_int_equal(start_master(&m, extra), 0);
    assert_int_equal(start_holder(&h, &m, "512MB", 1), 0);
    char master_flag[96];
    snprintf(master_flag, sizeof(master_flag), "%s", m.addr);
    char *argv[] = {MC_BUILD_DIR "/tests/integration/store_writer", master_flag, "slow-key",
                    "402653184", NULL};
    mc_proc_t w;
    /* The writer stops itself once its PutStart succeeded (a failpoint), so it is killed in the
     * middle of its put whatever the speed of this host: wait for that state, not for time. */
    setenv("MC_DISABLE_SHM", "1", 1);
    setenv("MC_FAILPOINTS", "put.after_start=stop", 1);
    assert_int_equal(mc_proc_start(&w, argv, "PUTTING", 20000), 0);
    mc_cluster_track(w.pid);
    unsetenv("MC_DISABLE_SHM");
    unsetenv("MC_FAILPOINTS");
    int ws;
    assert_int_equal(waitpid(w.pid, &ws, WUNTRACED), w.pid);
    assert_true(WIFSTOPPED(ws));
    mc_cluster_untrack(w.pid);
    mc_proc_stop(&w, SIGKILL, 5000);

    mc_store_t *s = new_client(&m);
    uint8_t *buf = malloc(402653184);
    /* Until revoked: a miss, never partial bytes. */
    assert_int_equal(mc_store_get(s, "slow-key", buf, 402653184), MC_ERR_OBJECT_NOT_FOUND);
    int64_t r = MC_ERR_OBJECT_NOT_FOUND;
    uint8_t v[4096];
    fill(v, sizeof(v), 8);
    for (int i = 0; i < 100; i++) { /* client_ttl 2 s: revoked within a few seconds */
        int prc = mc_store_put(s, "slow-key", v, sizeof(v), NULL);
        r = mc_store_get(s, "slow-key", buf, 402653184);
        if (prc == 0 && r == (int64_t)sizeof(v))
            break;
        usleep(200 * 1000);
    }
    assert_int_equal(r, (int64_t)sizeof(v));
    assert_memory_equal(buf, v, sizeof(v));
    free(buf);
    mc_store_free(s);
    mc_proc_stop(&h.proc, SIGTERM, 10000);
    mc_master_stop(&m, SIGTERM);
}

static void test_master_restart_makes_clients_remount(void **state)
{
    master_t m;
    holder_t h;
    assert_int_equal(start_master(&m, NULL), 0);
    assert_int_equal(start_holder(&h, &m, "64MB", 0), 0);
    mc_store_t *s = new_client(&m);
    uint8_t v[5000], out[5000];
    fill(v, sizeof(v), 1);
    assert_int_equal(mc_store_put(s, "before", v, sizeof(v), NULL), 0);
    int port = m.rpc_port;
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    assert_int_equal(start_master_on(&m, port, NULL), 0);
    /* The holder re-mounts within a few pings; until then puts find no segment. */
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++) {
        rc = mc_store_put(s, "after", v, sizeof(v), NULL);
        if (rc != 0)
            usleep(100 * 1000);
    }
    assert_int_equal(rc, 0);
    /* The old master's objects are gone: nothing points at memory the new master does not own. */
    assert_int_equal(mc_store_get(s, "before", out, sizeof(out)), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_get(s, "after", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(v, out, sizeof(v));
    assert_int_equal(mc_store_health_check(s), 0);
    mc_store_free(s);
    mc_proc_stop(&h.proc, SIGTERM, 10000);
    mc_master_stop(&m, SIGTERM);
}

static void test_master_restart_republishes_http_metadata(void **state)
{
    /* The master's embedded HTTP metadata service forgets everything when the master restarts;
     * clients publish their segment descriptors again when they re-mount. */
    master_t m;
    mc_proc_t h;
    int meta_port = mc_test_free_port();
    char meta_flag[64], url[96], master_flag[96], port_flag[32], segment[300], key[400];
    snprintf(meta_flag, sizeof(meta_flag), "--http_metadata_server_port=%d", meta_port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metadata", meta_port);
    const char *extra[] = {"--enable_http_metadata_server=true",
                           "--http_metadata_server_host=127.0.0.1", meta_flag, NULL};
    assert_int_equal(start_master(&m, extra), 0);
    snprintf(master_flag, sizeof(master_flag), "--master_server_address=%s", m.addr);
    snprintf(port_flag, sizeof(port_flag), "--port=%d", mc_test_free_port());
    char meta_arg[128];
    snprintf(meta_arg, sizeof(meta_arg), "--metadata_server=%s", url);
    char *argv[] = {CLIENT_BIN, master_flag,
                    meta_arg,   "--host=127.0.0.1",
                    port_flag,  "--global_segment_size=16MB",
                    NULL};
    assert_int_equal(mc_proc_start(&h, argv, "mooncake_client ready: segment ", 20000), 0);
    mc_cluster_track(h.pid);
    sscanf(h.ready_line, "mooncake_client ready: segment %299s", segment);
    snprintf(key, sizeof(key), "mooncake/ram/%s", segment);
    char *value = NULL;
    size_t len = 0;
    assert_int_equal(mc_http_metadata_get(url, key, &value, &len), 0);
    free(value);

    int port = m.rpc_port;
    assert_true(mc_clean_exit(mc_master_stop(&m, SIGTERM)));
    assert_int_equal(start_master_on(&m, port, extra), 0);
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++) { /* a ping per second: back within a few */
        rc = mc_http_metadata_get(url, key, &value, &len);
        if (rc == 0)
            free(value);
        else
            usleep(100 * 1000);
    }
    assert_int_equal(rc, 0);
    mc_proc_stop(&h, SIGTERM, 10000);
    mc_master_stop(&m, SIGTERM);
}

static void test_unknown_flags_exit_non_zero(void **state)
{
    const char *bins[] = {CLIENT_BIN, MASTER_BIN};
    for (int i = 0; i < 2; i++) {
        char *argv[] = {(char *)bins[i], "--no_such_flag=1", NULL};
        pid_t pid;
        int devnull[2];
        assert_int_equal(pipe(devnull), 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, devnull[1], STDERR_FILENO);
        assert_int_equal(posix_spawn(&pid, bins[i], &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        close(devnull[1]);
        char out[1024] = {0};
        ssize_t n = read(devnull[0], out, sizeof(out) - 1);
        close(devnull[0]);
        int status;
        waitpid(pid, &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        assert_true(n > 0);
        assert_non_null(strstr(out, "no_such_flag"));
        assert_non_null(strchr(out, '\n'));
        assert_null(strchr(strchr(out, '\n') + 1, '\n')); /* one line */
    }
}

#ifdef MC_HAVE_RDMA
/* ---- protocol rdma: master + an rdma holder + a tcp holder, shm off in every process, so the
 * bytes cross UCX between rdma ends and tcp otherwise ------------------------------------------ */

static master_t rdma_cluster;
static holder_t rdma_holder, tcp_holder;

static mc_replicate_config_t on_segment(const char *segment)
{
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.preferred_segment = segment;
    return cfg;
}

static void assert_stored_on(mc_store_t *s, const char *key, const char *segment)
{
    mc_replica_desc_t d[2];
    size_t n = 0;
    assert_int_equal(mc_store_get_replica_desc(s, key, d, 2, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(d[0].segment_name, segment);
}

static void test_rdma_values_of_1_byte_to_16_mib_round_trip_byte_exact(void **state)
{
    mc_store_t *s = new_client_with(&rdma_cluster, "rdma", 1);
    mc_replicate_config_t cfg = on_segment(rdma_holder.segment);
    const size_t sizes[] = {1, 4099, MiB, 3 * MiB + 5, 16 * MiB};
    uint8_t *v = malloc(16 * MiB), *out = malloc(16 * MiB);
    char key[32];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        snprintf(key, sizeof(key), "rdma/%zu", i);
        fill(v, sizes[i], 300 + i);
        assert_int_equal(mc_store_put(s, key, v, sizes[i], &cfg), 0);
        assert_stored_on(s, key, rdma_holder.segment);
        memset(out, 0, sizes[i]);
        assert_int_equal(mc_store_get(s, key, out, 16 * MiB), (int64_t)sizes[i]);
        assert_memory_equal(v, out, sizes[i]);
    }
    assert_int_equal(mc_store_remove_by_regex(s, "^rdma/", 1), 5);
    free(v);
    free(out);
    mc_store_free(s);
}

static void test_rdma_batch_of_64_puts_and_gets(void **state)
{
    enum { N = 64, LEN = 100 * 1024 + 3 };
    mc_store_t *s = new_client_with(&rdma_cluster, "rdma", 1);
    mc_replicate_config_t cfg = on_segment(rdma_holder.segment);
    char names[N][32];
    const char *keys[N];
    const void *vp[N];
    void *op[N];
    size_t sizes[N], caps[N];
    int res[N];
    int64_t got[N];
    uint8_t *vals = malloc((size_t)N * LEN), *outs = calloc(N, LEN);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "rb/%d", i);
        keys[i] = names[i];
        fill(vals + (size_t)i * LEN, LEN, 700 + (uint64_t)i);
        vp[i] = vals + (size_t)i * LEN;
        op[i] = outs + (size_t)i * LEN;
        sizes[i] = LEN - (size_t)i;
        caps[i] = LEN;
    }
    assert_int_equal(mc_store_put_batch(s, keys, vp, sizes, N, &cfg, res), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i], 0);
    assert_int_equal(mc_store_get_batch(s, keys, op, caps, N, got), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(got[i], (int64_t)sizes[i]);
        assert_memory_equal(op[i], vp[i], sizes[i]);
    }
    assert_int_equal(mc_store_remove_by_regex(s, "^rb/", 1), N);
    free(vals);
    free(outs);
    mc_store_free(s);
}

static void test_rdma_zero_copy_with_registered_buffers(void **state)
{
    mc_store_t *s = new_client_with(&rdma_cluster, "rdma", 1);
    mc_replicate_config_t cfg = on_segment(rdma_holder.segment);
    size_t len = 5 * MiB + 1;
    uint8_t *buf = malloc(len), *out = calloc(1, len);
    fill(buf, len, 88);
    assert_int_equal(mc_store_register_buffer(s, buf, len), 0);
    assert_int_equal(mc_store_register_buffer(s, out, len), 0);
    assert_int_equal(mc_store_put_from(s, "rzc", buf, len, &cfg), 0);
    assert_stored_on(s, "rzc", rdma_holder.segment);
    assert_int_equal(mc_store_get_into(s, "rzc", out, len), (int64_t)len);
    assert_memory_equal(buf, out, len);
    assert_int_equal(mc_store_remove(s, "rzc", 1), 0);
    assert_int_equal(mc_store_unregister_buffer(s, buf), 0);
    assert_int_equal(mc_store_unregister_buffer(s, out), 0);
    free(buf);
    free(out);
    mc_store_free(s);
}

static void test_rdma_and_tcp_clients_and_holders_mix(void **state)
{
    mc_store_t *r = new_client_with(&rdma_cluster, "rdma", 1);
    mc_store_t *t = new_client_with(&rdma_cluster, "tcp", 1);
    size_t len = 2 * MiB + 9;
    uint8_t *v = malloc(len), *out = malloc(len);
    /* One put, two replicas: the rdma client writes the rdma holder over UCX and the tcp holder
     * over tcp; both clients read it back. */
    mc_replicate_config_t two = MC_REPLICATE_CONFIG_INIT;
    two.replica_num = 2;
    fill(v, len, 1);
    assert_int_equal(mc_store_put(r, "mix/both", v, len, &two), 0);
    mc_replica_desc_t d[2];
    size_t n = 0;
    assert_int_equal(mc_store_get_replica_desc(r, "mix/both", d, 2, &n), 0);
    assert_int_equal(n, 2);
    assert_string_not_equal(d[0].segment_name, d[1].segment_name);
    for (int i = 0; i < 2; i++) {
        memset(out, 0, len);
        assert_int_equal(mc_store_get(i ? t : r, "mix/both", out, len), (int64_t)len);
        assert_memory_equal(v, out, len);
    }
    /* tcp client -> rdma holder, read by the rdma client; rdma client -> tcp holder, read by the
     * tcp client. */
    mc_replicate_config_t on_rdma = on_segment(rdma_holder.segment);
    mc_replicate_config_t on_tcp = on_segment(tcp_holder.segment);
    fill(v, len, 2);
    assert_int_equal(mc_store_put(t, "mix/t2r", v, len, &on_rdma), 0);
    assert_stored_on(r, "mix/t2r", rdma_holder.segment);
    assert_int_equal(mc_store_get(r, "mix/t2r", out, len), (int64_t)len);
    assert_memory_equal(v, out, len);
    fill(v, len, 3);
    assert_int_equal(mc_store_put(r, "mix/r2t", v, len, &on_tcp), 0);
    assert_stored_on(t, "mix/r2t", tcp_holder.segment);
    assert_int_equal(mc_store_get(t, "mix/r2t", out, len), (int64_t)len);
    assert_memory_equal(v, out, len);
    assert_int_equal(mc_store_remove_by_regex(r, "^mix/", 1), 3);
    free(v);
    free(out);
    mc_store_free(r);
    mc_store_free(t);
}

static int setup_rdma(void **state)
{
    if (start_master(&rdma_cluster, NULL) != 0)
        return -1;
    if (start_holder_with(&rdma_holder, &rdma_cluster, "128MB", 1, "rdma") != 0)
        return -1;
    return start_holder_with(&tcp_holder, &rdma_cluster, "128MB", 1, "tcp");
}

/* The group's last test: its processes stop cleanly on SIGTERM (a test, so a failure counts:
 * Debian's cmocka prints a failing group teardown but does not count it). */
static void test_rdma_cluster_stops_cleanly(void **state)
{
    mc_cluster_untrack(rdma_holder.proc.pid);
    mc_cluster_untrack(tcp_holder.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&rdma_holder.proc, SIGTERM, 10000)));
    assert_true(mc_clean_exit(mc_proc_stop(&tcp_holder.proc, SIGTERM, 10000)));
    assert_true(mc_clean_exit(mc_master_stop(&rdma_cluster, SIGTERM)));
}

static int teardown_rdma(void **state)
{
    mc_cluster_kill_all(); /* whatever a failed test left running */
    return 0;
}
#endif

static int setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    if (start_master(&cluster, NULL) != 0)
        return -1;
    return start_holder(&holder_a, &cluster, "256MB", 0);
}

static int teardown_own(void **state)
{
    mc_cluster_kill_all();
    return 0;
}

/* The shared cluster's last test: holder and master stop cleanly on SIGTERM (counted as a test;
 * a group teardown's failure is not). */
static void test_cluster_stops_cleanly(void **state)
{
    mc_cluster_untrack(holder_a.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&holder_a.proc, SIGTERM, 10000)));
    assert_true(mc_clean_exit(mc_master_stop(&cluster, SIGTERM)));
}

static int teardown(void **state)
{
    mc_cluster_kill_all(); /* whatever a failed test left running */
    return 0;
}

int main(void)
{
    const struct CMUnitTest cluster_tests[] = {
        cmocka_unit_test(test_64_values_of_1_mib_round_trip_byte_exact),
        cmocka_unit_test(test_batch_put_and_get_with_duplicate_keys),
        cmocka_unit_test(test_empty_value_differs_from_missing_key),
        cmocka_unit_test(test_key_length_limits),
        cmocka_unit_test(test_close_returns_while_many_threads_call),
        cmocka_unit_test(test_lease_blocks_remove_until_force),
        cmocka_unit_test(test_immutable_put_keeps_first_value_and_upsert_replaces),
        cmocka_unit_test(test_8_threads_putting_one_key_leave_one_intact_value),
        cmocka_unit_test(test_a_returned_put_is_seen_by_another_client_at_once),
        cmocka_unit_test(test_pure_server_cannot_put_and_closed_store_refuses),
        cmocka_unit_test(test_zero_copy_calls_need_registered_buffers),
        cmocka_unit_test(test_eviction_keeps_puts_succeeding_when_the_pool_is_full),
        cmocka_unit_test(test_cluster_stops_cleanly),
    };
    const struct CMUnitTest own_cluster_tests[] = {
        cmocka_unit_test(test_value_of_segment_size_fits_and_one_byte_more_does_not),
        cmocka_unit_test(test_two_replicas_survive_the_death_of_one_holder),
        cmocka_unit_test(test_a_master_stopped_past_the_client_ttl_keeps_live_holders),
        cmocka_unit_test(test_zero_lease_ttl_means_no_lease),
        cmocka_unit_test(test_client_killed_mid_put_is_revoked_after_ttl),
        cmocka_unit_test(test_master_restart_makes_clients_remount),
        cmocka_unit_test(test_master_restart_republishes_http_metadata),
        cmocka_unit_test(test_unknown_flags_exit_non_zero),
    };
    atexit(mc_cluster_kill_all);
    int failed = cmocka_run_group_tests_name("store_cluster", cluster_tests, setup, teardown);
    failed +=
        cmocka_run_group_tests_name("store_own_cluster", own_cluster_tests, NULL, teardown_own);
#ifdef MC_HAVE_RDMA
    const struct CMUnitTest rdma_tests[] = {
        cmocka_unit_test(test_rdma_values_of_1_byte_to_16_mib_round_trip_byte_exact),
        cmocka_unit_test(test_rdma_batch_of_64_puts_and_gets),
        cmocka_unit_test(test_rdma_zero_copy_with_registered_buffers),
        cmocka_unit_test(test_rdma_and_tcp_clients_and_holders_mix),
        cmocka_unit_test(test_rdma_cluster_stops_cleanly),
    };
    failed += cmocka_run_group_tests_name("store_rdma", rdma_tests, setup_rdma, teardown_rdma);
#endif
    return failed;
}
