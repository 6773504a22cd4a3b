/*
 * test_eviction.c — "acknowledged means kept", with real processes: a mooncake_master
 * (default lease 10 s, high watermark 0.90, eviction ratio 0.05), one mooncake_client holding the
 * whole pool, and store clients in this process (no segment) as writer and reader.
 *
 *  - Read leases must not pin dead memory: right after remove_all(force) of objects that were
 *    just read, filling the pool to 90 % of its size must read back (the removed objects' extents
 *    are free once their readers are done, so nothing live is evicted to make room).
 *  - Eviction order: 16 objects just written and never read survive eviction pressure from older
 *    objects (least recently put-or-read goes first, as upstream's lease-timeout order does).
 *  - A churn of puts, gets and forced removes with the live set at half the pool: no get of a key
 *    that was never removed misses, and no put fails with -200.
 *  - A put that needs memory still fenced for a reader in mid-transfer (its object was removed
 *    with force) waits for that reader to finish rather than fail or evict live objects, and the
 *    reader still gets its exact bytes (a store_rw child stopped at get.after_lookup).
 *
 * Every scenario prints its numbers on a line starting "evict-measure:". MC_EVICT_POOL_MIB sets
 * the pool (default 256), MC_EVICT_FILL_PCT the refill of the first scenario (default 90; 100 is
 * the "1 024 x 1 MiB into 1 GiB") and MC_EVICT_CHURN_OPS the churn's length (default
 * 4000); docs/benchmarks.md has the runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/errors.h"
#include "mooncake/store.h"
#include "cluster.h"
#include "payload.h"
#include "proc.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define RW_BIN MC_BUILD_DIR "/tests/integration/store_rw"
#define VALUE_SIZE MiB
#define BATCH 16
#define FRESH_COUNT 16u
#define CHURN_THREADS 4
#define CHURN_OPS_DEFAULT 4000

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static unsigned env_unsigned(const char *name, unsigned def, unsigned lo, unsigned hi)
{
    const char *v = getenv(name);
    unsigned long x = v && *v ? strtoul(v, NULL, 10) : def;
    return x < lo || x > hi ? def : (unsigned)x;
}

/* Objects of VALUE_SIZE the pool holds. */
static unsigned pool_objects(void)
{
    return env_unsigned("MC_EVICT_POOL_MIB", 256, 32, 16384);
}

typedef struct cluster {
    mc_master_t m;
    mc_holder_t h;
} cluster_t;

static void cluster_up_extra(cluster_t *c, unsigned pool_mib, const char *const *extra)
{
    char seg[32];
    snprintf(seg, sizeof(seg), "%uMB", pool_mib);
    assert_int_equal(mc_master_start(&c->m, 0, extra), 0);
    assert_int_equal(mc_holder_start(&c->h, &c->m, seg, NULL, NULL, 30000), 0);
}

static void cluster_up_with(cluster_t *c, unsigned pool_mib)
{
    cluster_up_extra(c, pool_mib, NULL);
}

static void cluster_up(cluster_t *c)
{
    cluster_up_with(c, pool_objects());
}

/* The master's counters behind the numbers (-1: a master without them). */
static void print_master_counters(const cluster_t *c)
{
    printf("evict-measure:   master: evicted_keys=%lld lease_releases=%lld put_fence_waits=%lld "
           "fenced_bytes=%lld\n",
           mc_master_metric(&c->m, "master_evicted_key_count"),
           mc_master_metric(&c->m, "master_read_lease_releases_total"),
           mc_master_metric(&c->m, "master_put_fence_waits_total"),
           mc_master_metric(&c->m, "master_fenced_bytes"));
}

static void cluster_down(cluster_t *c)
{
    mc_cluster_untrack(c->h.proc.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&c->h.proc, SIGTERM, 10000)));
    assert_true(mc_clean_exit(mc_master_stop(&c->m, SIGTERM)));
}

static mc_store_t *new_client(const cluster_t *c)
{
    mc_store_t *s = mc_test_client(&c->m, 1, 0);
    assert_non_null(s);
    return s;
}

/* A value's seed: its prefix and index, so a reader can tell it got exactly this value. */
static uint64_t seed_of(const char *prefix, unsigned i)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = prefix; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h ^ ((uint64_t)i << 32);
}

typedef struct counts {
    unsigned ok, no_handle, other; /* puts: acknowledged, -200, any other error */
} counts_t;

/* Puts prefix/[from, to) in batches; counts the outcomes. */
static counts_t put_range(mc_store_t *s, const char *prefix, unsigned from, unsigned to)
{
    counts_t c = {0};
    char names[BATCH][64];
    const char *keys[BATCH];
    const void *vals[BATCH];
    size_t sizes[BATCH];
    int res[BATCH];
    void *buf[BATCH];
    for (int b = 0; b < BATCH; b++)
        assert_non_null(buf[b] = malloc(VALUE_SIZE));
    for (unsigned i = from; i < to;) {
        size_t n = 0;
        for (; n < BATCH && i < to; n++, i++) {
            snprintf(names[n], sizeof(names[n]), "%s/%u", prefix, i);
            mc_payload_fill(buf[n], VALUE_SIZE, seed_of(prefix, i));
            keys[n] = names[n];
            vals[n] = buf[n];
            sizes[n] = VALUE_SIZE;
        }
        mc_store_put_batch(s, keys, vals, sizes, n, NULL, res);
        for (size_t k = 0; k < n; k++) {
            if (res[k] == 0)
                c.ok++;
            else if (res[k] == MC_ERR_NO_AVAILABLE_HANDLE)
                c.no_handle++;
            else
                c.other++;
        }
    }
    for (int b = 0; b < BATCH; b++)
        free(buf[b]);
    return c;
}

/* Reads prefix/[from, to) back in batches; returns how many are missing. A value that is there
 * must be exactly the one written. */
static unsigned missing_in_range(mc_store_t *s, const char *prefix, unsigned from, unsigned to)
{
    unsigned missing = 0;
    char names[BATCH][64];
    const char *keys[BATCH];
    void *bufs[BATCH];
    size_t caps[BATCH];
    int64_t res[BATCH];
    for (int b = 0; b < BATCH; b++) {
        assert_non_null(bufs[b] = malloc(VALUE_SIZE));
        caps[b] = VALUE_SIZE;
    }
    for (unsigned i = from; i < to;) {
        unsigned first = i;
        size_t n = 0;
        for (; n < BATCH && i < to; n++, i++) {
            snprintf(names[n], sizeof(names[n]), "%s/%u", prefix, i);
            keys[n] = names[n];
        }
        mc_store_get_batch(s, keys, bufs, caps, n, res);
        for (size_t k = 0; k < n; k++) {
            if (res[k] == MC_ERR_OBJECT_NOT_FOUND) {
                missing++;
                continue;
            }
            assert_int_equal(res[k], (int64_t)VALUE_SIZE);
            assert_int_equal(
                mc_payload_diff(bufs[k], VALUE_SIZE, seed_of(prefix, first + (unsigned)k)),
                VALUE_SIZE);
        }
    }
    for (int b = 0; b < BATCH; b++)
        free(bufs[b]);
    return missing;
}

/* ---- read leases must not pin removed objects' memory ------------------------------------- */

static void test_refill_after_remove_all_of_just_read_objects_reads_back(void **state)
{
    (void)state;
    cluster_t c;
    cluster_up(&c);
    mc_store_t *s = new_client(&c);
    unsigned pool = pool_objects();
    unsigned fill = pool * env_unsigned("MC_EVICT_FILL_PCT", 90, 10, 100) / 100;
    unsigned old = pool * 9 / 10;

    counts_t first = put_range(s, "old", 0, old);
    assert_int_equal(first.ok, old);
    assert_int_equal(missing_in_range(s, "old", 0, old), 0); /* every one read: leases granted */
    assert_int_equal(mc_store_remove_all(s, 1), (int64_t)old);

    counts_t refill = put_range(s, "new", 0, fill);
    unsigned missed = missing_in_range(s, "new", 0, fill);
    unsigned lost = missed + refill.no_handle + refill.other;
    printf("evict-measure: scenario=refill_after_remove_all pool_mib=%u puts=%u put_fail_200=%u "
           "put_fail_other=%u missed_on_read_back=%u (%.1f %% of puts)\n",
           pool, fill, refill.no_handle, refill.other, missed, 100.0 * lost / fill);
    print_master_counters(&c);
    /* A fresh pool loses nothing at 90 % (below the high watermark); 20 % is a generous bound
     * (the old behaviour lost 94 %). */
    assert_true(lost * 5 < fill);

    mc_store_free(s);
    cluster_down(&c);
}

/* ---- eviction order: least recently put-or-read first ------------------------------------- */

static void test_objects_just_written_survive_pressure_from_older_objects(void **state)
{
    (void)state;
    cluster_t c;
    cluster_up(&c);
    unsigned pool = pool_objects();
    unsigned old = pool * 8 / 10, more = pool / 2;

    /* Older objects, all read once (by another client, done reading when it closes). */
    mc_store_t *reader = new_client(&c);
    assert_int_equal(put_range(reader, "old", 0, old).ok, old);
    assert_int_equal(missing_in_range(reader, "old", 0, old), 0);
    assert_int_equal(mc_store_close(reader), 0);
    mc_store_free(reader);

    /* The 16 just written, never read; then pressure: half a pool more. */
    mc_store_t *s = new_client(&c);
    assert_int_equal(put_range(s, "fresh", 0, FRESH_COUNT).ok, FRESH_COUNT);
    counts_t pressure = put_range(s, "more", 0, more);

    unsigned fresh_lost = missing_in_range(s, "fresh", 0, FRESH_COUNT);
    unsigned old_lost = missing_in_range(s, "old", 0, old);
    printf("evict-measure: scenario=fresh_vs_older pool_mib=%u fresh_lost=%u/%u old_lost=%u/%u "
           "pressure_puts=%u put_fail_200=%u put_fail_other=%u\n",
           pool, fresh_lost, FRESH_COUNT, old_lost, old, more, pressure.no_handle, pressure.other);
    print_master_counters(&c);
    assert_true(old_lost > 0); /* the pressure did evict */
    assert_int_equal(fresh_lost, 0);
    assert_int_equal(pressure.no_handle + pressure.other, 0);

    mc_store_free(s);
    cluster_down(&c);
}

/* ---- churn: puts, gets and forced removes, live set at half the pool --------------------- */

typedef struct churn {
    mc_store_t *s;
    pthread_mutex_t lock;
    unsigned *live; /* ids put and not (being) removed */
    size_t n_live, cap_live;
    unsigned next_id;
    unsigned char *removed; /* per id: 1 once picked for removal */
    unsigned ops_left;
    /* results */
    unsigned puts, put_fail_200, put_fail_other;
    unsigned gets, get_missed_live, removes;
    unsigned bad; /* wrong bytes, wrong sizes, failed removes (asserted in the main thread) */
} churn_t;

typedef struct churn_worker {
    churn_t *c;
    uint64_t rng;
} churn_worker_t;

static uint64_t churn_rand(churn_worker_t *w)
{
    return mc_payload_next(&w->rng);
}

static void churn_put(churn_worker_t *w, void *buf)
{
    churn_t *c = w->c;
    pthread_mutex_lock(&c->lock);
    unsigned id = c->next_id++;
    pthread_mutex_unlock(&c->lock);
    char key[64];
    snprintf(key, sizeof(key), "churn/%u", id);
    mc_payload_fill(buf, VALUE_SIZE, seed_of("churn", id));
    int rc = mc_store_put(c->s, key, buf, VALUE_SIZE, NULL);
    pthread_mutex_lock(&c->lock);
    c->puts++;
    if (rc == 0)
        c->live[c->n_live++] = id;
    else if (rc == MC_ERR_NO_AVAILABLE_HANDLE)
        c->put_fail_200++;
    else
        c->put_fail_other++;
    pthread_mutex_unlock(&c->lock);
}

static void churn_get(churn_worker_t *w, void *buf)
{
    churn_t *c = w->c;
    pthread_mutex_lock(&c->lock);
    if (c->n_live == 0) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    unsigned id = c->live[churn_rand(w) % c->n_live];
    pthread_mutex_unlock(&c->lock);
    char key[64];
    snprintf(key, sizeof(key), "churn/%u", id);
    int64_t got = mc_store_get(c->s, key, buf, VALUE_SIZE);
    pthread_mutex_lock(&c->lock);
    c->gets++;
    /* A miss counts only when nobody had picked the key for removal by the time it returned. */
    if (got == MC_ERR_OBJECT_NOT_FOUND && !c->removed[id])
        c->get_missed_live++;
    if (got >= 0 && (got != (int64_t)VALUE_SIZE ||
                     mc_payload_diff(buf, VALUE_SIZE, seed_of("churn", id)) != VALUE_SIZE))
        c->bad++;
    pthread_mutex_unlock(&c->lock);
}

static void churn_remove(churn_worker_t *w)
{
    churn_t *c = w->c;
    pthread_mutex_lock(&c->lock);
    if (c->n_live == 0) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    size_t at = churn_rand(w) % c->n_live;
    unsigned id = c->live[at];
    c->live[at] = c->live[--c->n_live];
    c->removed[id] = 1;
    c->removes++;
    pthread_mutex_unlock(&c->lock);
    char key[64];
    snprintf(key, sizeof(key), "churn/%u", id);
    if (mc_store_remove(c->s, key, 1) != 0) {
        pthread_mutex_lock(&c->lock);
        c->bad++;
        pthread_mutex_unlock(&c->lock);
    }
}

static void *churn_main(void *arg)
{
    churn_worker_t *w = arg;
    churn_t *c = w->c;
    void *buf = malloc(VALUE_SIZE);
    for (; buf;) {
        pthread_mutex_lock(&c->lock);
        int more = c->ops_left > 0;
        if (more)
            c->ops_left--;
        /* Puts while the live set (with puts in flight) is under half the pool, else removes. */
        int room = c->n_live + CHURN_THREADS < c->cap_live;
        pthread_mutex_unlock(&c->lock);
        if (!more)
            break;
        unsigned r = (unsigned)(churn_rand(w) % 10);
        if (r < 4 && room)
            churn_put(w, buf);
        else if (r < 4 || r >= 8)
            churn_remove(w);
        else
            churn_get(w, buf);
    }
    free(buf);
    return NULL;
}

static void test_churn_at_half_the_pool_keeps_every_live_object(void **state)
{
    (void)state;
    cluster_t cl;
    cluster_up(&cl);
    unsigned ops = env_unsigned("MC_EVICT_CHURN_OPS", CHURN_OPS_DEFAULT, 100, 10000000);
    churn_t c = {.s = new_client(&cl), .ops_left = ops};
    c.cap_live = pool_objects() / 2;
    c.live = calloc(c.cap_live + CHURN_THREADS, sizeof(*c.live));
    c.removed = calloc(ops + 1, 1);
    assert_true(c.live && c.removed);
    pthread_mutex_init(&c.lock, NULL);

    pthread_t t[CHURN_THREADS];
    churn_worker_t w[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++) {
        w[i] = (churn_worker_t){.c = &c, .rng = 0x5eed0000u + (uint64_t)i};
        assert_int_equal(pthread_create(&t[i], NULL, churn_main, &w[i]), 0);
    }
    for (int i = 0; i < CHURN_THREADS; i++)
        pthread_join(t[i], NULL);

    printf("evict-measure: scenario=churn pool_mib=%u live_cap=%zu ops=%u puts=%u "
           "put_fail_200=%u (%.1f %%) put_fail_other=%u gets=%u missed_never_removed=%u "
           "(%.1f %%) removes=%u\n",
           pool_objects(), c.cap_live, ops, c.puts, c.put_fail_200,
           c.puts ? 100.0 * c.put_fail_200 / c.puts : 0.0, c.put_fail_other, c.gets,
           c.get_missed_live, c.gets ? 100.0 * c.get_missed_live / c.gets : 0.0, c.removes);
    print_master_counters(&cl);
    assert_int_equal(c.bad, 0);
    assert_true(c.puts > ops / 10 && c.gets > ops / 10);
    /* The live set never exceeds half the pool: nothing live needs to go, no put lacks room. */
    assert_int_equal(c.get_missed_live, 0);
    assert_int_equal(c.put_fail_200, 0);
    assert_int_equal(c.put_fail_other, 0);

    pthread_mutex_destroy(&c.lock);
    free(c.live);
    free(c.removed);
    mc_store_free(c.s);
    cluster_down(&cl);
}

/* ---- a put waits for a reader in mid-transfer to release fenced memory --------------------- */

#define FENCE_POOL_MIB 64u
#define FENCE_BIG (32 * MiB) /* the object removed while being read */
#define FENCE_NEW (24 * MiB) /* a put that fits only in the room the reader still holds */
/* 1 MiB objects that must all survive: with the fenced 32 MiB, above the 90 % watermark
 * (57.6 MiB) unless fenced bytes are left out of it, as they are; with the new 24 MiB, below. */
#define FENCE_LIVE 26u

typedef struct big_put {
    mc_store_t *s;
    int rc;
} big_put_t;

static void *big_put_main(void *arg)
{
    big_put_t *p = arg;
    void *v = malloc(FENCE_NEW);
    p->rc = MC_ERR_INTERNAL_ERROR;
    if (v) {
        mc_payload_fill(v, FENCE_NEW, seed_of("newbig", 0));
        p->rc = mc_store_put(p->s, "newbig", v, FENCE_NEW, NULL);
    }
    free(v);
    return NULL;
}

/* Waits until the child stopped itself at its failpoint. */
static void wait_stopped(pid_t pid)
{
    uint64_t deadline = now_ms() + 30000;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG | WUNTRACED);
        if (r == pid) {
            assert_true(WIFSTOPPED(st));
            return;
        }
        assert_int_equal(r, 0);
        assert_true(now_ms() < deadline);
        usleep(10000);
    }
}

static void test_put_waits_for_a_reader_to_release_fenced_memory(void **state)
{
    (void)state;
    cluster_t c;
    /* The put's patience outlasts the resumed reader's copy on a loaded host: the test is about
     * waiting instead of evicting, not about how fast a reader finishes. */
    const char *const extra[] = {"--fence_put_wait_ms=20000", NULL};
    cluster_up_extra(&c, FENCE_POOL_MIB, extra);
    mc_store_t *s = new_client(&c);
    void *v = malloc(FENCE_BIG);
    assert_non_null(v);
    mc_payload_fill(v, FENCE_BIG, seed_of("big", 0));
    assert_int_equal(mc_store_put(s, "big", v, FENCE_BIG, NULL), 0);
    free(v);

    /* A reader holding its lease on "big", stopped before it copies a byte. */
    mc_proc_t r;
    char *argv[] = {RW_BIN, c.m.addr, NULL};
    setenv("MC_FAILPOINTS", "get.after_lookup=stop:1", 1);
    int rc = mc_proc_start(&r, argv, "READY", 20000);
    unsetenv("MC_FAILPOINTS");
    assert_int_equal(rc, 0);
    mc_cluster_track(r.pid);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "get big %llu %llu\n", FENCE_BIG,
             (unsigned long long)seed_of("big", 0));
    assert_int_equal(mc_proc_send(&r, cmd), 0);
    wait_stopped(r.pid);

    /* Its object goes (fenced while the reader is inside its lease), live objects come; then a
     * put needs the room the reader still holds. */
    assert_int_equal(mc_store_remove(s, "big", 1), 0);
    assert_int_equal(put_range(s, "live", 0, FENCE_LIVE).ok, FENCE_LIVE);
    big_put_t p = {.s = s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, big_put_main, &p), 0);
    uint64_t deadline = now_ms() + 10000;
    long long waits;
    while ((waits = mc_master_metric(&c.m, "master_put_fence_waits_total")) < 1 &&
           now_ms() < deadline)
        usleep(5000);
    /* The reader finishes: exactly its bytes, then its release frees the room. */
    assert_int_equal(kill(r.pid, SIGCONT), 0);
    char line[256];
    assert_int_equal(mc_proc_read_line(&r, line, sizeof(line), 30000), 0);
    pthread_join(t, NULL);
    unsigned live_lost = missing_in_range(s, "live", 0, FENCE_LIVE);
    printf("evict-measure: scenario=put_waits_for_fence pool_mib=%u reader=\"%s\" big_put_rc=%d "
           "live_lost=%u/%u\n",
           FENCE_POOL_MIB, line, p.rc, live_lost, FENCE_LIVE);
    print_master_counters(&c);
    assert_true(waits >= 1);
    assert_string_equal(line, "GET 33554432 exact");
    assert_int_equal(p.rc, 0);
    assert_int_equal(live_lost, 0);
    assert_int_equal(mc_master_metric(&c.m, "master_evicted_key_count"), 0);

    close(r.stdin_fd); /* end of input: it exits */
    r.stdin_fd = -1;
    mc_cluster_untrack(r.pid);
    assert_true(mc_clean_exit(mc_proc_stop(&r, 0, 20000)));
    mc_store_free(s);
    cluster_down(&c);
}

static int teardown(void **state)
{
    (void)state;
    mc_cluster_kill_all();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_refill_after_remove_all_of_just_read_objects_reads_back,
                                  teardown),
        cmocka_unit_test_teardown(test_objects_just_written_survive_pressure_from_older_objects,
                                  teardown),
        cmocka_unit_test_teardown(test_churn_at_half_the_pool_keeps_every_live_object, teardown),
        cmocka_unit_test_teardown(test_put_waits_for_a_reader_to_release_fenced_memory, teardown),
    };
    atexit(mc_cluster_kill_all);
    return cmocka_run_group_tests_name("eviction", tests, NULL, NULL);
}
