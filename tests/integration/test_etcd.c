/*
 * test_etcd.c — the etcd v3 client (src/common/etcd.h) against a real 3-member etcd cluster
 * (Debian's etcd 3.4) on loopback, started fresh for each test by tests/support/etcd_cluster.c:
 * put/get of binary values, ranges (prefix, [from, to), limit and `more`), deletes, transactions,
 * create-if-absent, leases (expiry, keep-alive, revoke), endpoint failover (a member killed or
 * stopped, every member dead) and bad input. Every wait is for a state, polled, with a deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster.h"
#include "etcd.h"
#include "etcd_cluster.h"
#include "mooncake/errors.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 1000 /* per attempt, for the handles made here */
/* A call through the remaining members succeeds within this after a member died: the attempts
 * plus a raft election (election timeout 500 ms in etcd_cluster.c) when the dead one led. */
#define ELECTION_BOUND_MS 5000

static mc_etcd_cluster_t cl;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
    (void)state;
    return mc_etcd_cluster_start(&cl, 3);
}

static int teardown(void **state)
{
    (void)state;
    mc_etcd_cluster_destroy(&cl);
    mc_cluster_kill_all();
    return 0;
}

static mc_etcd_t *client(void)
{
    mc_etcd_t *e = NULL;
    assert_int_equal(mc_etcd_create(cl.endpoints, TIMEOUT_MS, &e), 0);
    return e;
}

static void test_put_get_binary_values(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    const uint8_t val[] = {0, 1, 2, 0, 0xff, 'x', 0, 0x80};
    int64_t rev1 = 0, rev2 = 0, rrev = 0;
    assert_int_equal(mc_etcd_put(e, "t/bin", val, sizeof(val), 0, &rev1), 0);
    assert_true(rev1 > 0);
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_get(e, "t/bin", &kv, &rrev), 0);
    assert_string_equal(kv.key, "t/bin");
    assert_int_equal(kv.value_len, sizeof(val));
    assert_memory_equal(kv.value, val, sizeof(val));
    assert_int_equal(kv.value[kv.value_len], 0);
    assert_int_equal(kv.version, 1);
    assert_int_equal(kv.create_revision, rev1);
    assert_int_equal(kv.mod_revision, rev1);
    assert_int_equal(kv.lease, 0);
    assert_true(rrev >= rev1);
    mc_etcd_kv_free(&kv, 1, 0);

    /* overwrite, empty value */
    assert_int_equal(mc_etcd_put(e, "t/bin", NULL, 0, 0, &rev2), 0);
    assert_true(rev2 > rev1);
    assert_int_equal(mc_etcd_get(e, "t/bin", &kv, NULL), 0);
    assert_int_equal(kv.value_len, 0);
    assert_int_equal(kv.version, 2);
    assert_int_equal(kv.create_revision, rev1);
    assert_int_equal(kv.mod_revision, rev2);
    mc_etcd_kv_free(&kv, 1, 0);

    assert_int_equal(mc_etcd_get(e, "t/absent", &kv, NULL), MC_ERR_ETCD_KEY_NOT_EXIST);

    /* the largest value allowed round-trips exactly */
    uint8_t *big = malloc(MC_ETCD_MAX_VALUE);
    assert_non_null(big);
    for (size_t i = 0; i < MC_ETCD_MAX_VALUE; i++)
        big[i] = (uint8_t)(i * 131 + (i >> 9));
    assert_int_equal(mc_etcd_put(e, "t/big", big, MC_ETCD_MAX_VALUE, 0, NULL), 0);
    assert_int_equal(mc_etcd_get(e, "t/big", &kv, NULL), 0);
    assert_int_equal(kv.value_len, MC_ETCD_MAX_VALUE);
    assert_memory_equal(kv.value, big, MC_ETCD_MAX_VALUE);
    mc_etcd_kv_free(&kv, 1, 0);
    free(big);
    mc_etcd_destroy(e);
}

static void test_range_prefix_and_limit(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    const char *keys[] = {"r/a/3", "r/a/1", "r/a/5", "r/a/2", "r/a/4", "r/a0", "r/b"};
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(mc_etcd_put(e, keys[i], keys[i], strlen(keys[i]), 0, NULL), 0);
    mc_etcd_kv_t *kvs;
    size_t n;
    int more = -1;
    int64_t rev = 0;
    assert_int_equal(mc_etcd_range(e, "r/a/", NULL, 0, &kvs, &n, &more, &rev), 0);
    assert_int_equal(n, 5);
    assert_int_equal(more, 0);
    assert_true(rev > 0);
    for (size_t i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "r/a/%zu", i + 1);
        assert_string_equal(kvs[i].key, want);
        assert_int_equal(kvs[i].value_len, strlen(want));
        assert_memory_equal(kvs[i].value, want, strlen(want));
    }
    mc_etcd_kv_free(kvs, n, 1);

    assert_int_equal(mc_etcd_range(e, "r/a/", NULL, 2, &kvs, &n, &more, NULL), 0);
    assert_int_equal(n, 2);
    assert_int_equal(more, 1);
    assert_string_equal(kvs[0].key, "r/a/1");
    assert_string_equal(kvs[1].key, "r/a/2");
    mc_etcd_kv_free(kvs, n, 1);

    assert_int_equal(mc_etcd_range(e, "r/a/", NULL, 5, &kvs, &n, &more, NULL), 0);
    assert_int_equal(n, 5);
    assert_int_equal(more, 0);
    mc_etcd_kv_free(kvs, n, 1);

    /* [from, to) */
    assert_int_equal(mc_etcd_range(e, "r/a/2", "r/a/4", 0, &kvs, &n, NULL, NULL), 0);
    assert_int_equal(n, 2);
    assert_string_equal(kvs[0].key, "r/a/2");
    assert_string_equal(kvs[1].key, "r/a/3");
    mc_etcd_kv_free(kvs, n, 1);

    /* from the first key up to "r/a/2": at least r/a/1 (other tests' keys may sort before) */
    assert_int_equal(mc_etcd_range(e, "", "r/a/2", 0, &kvs, &n, NULL, NULL), 0);
    assert_true(n >= 1);
    assert_string_equal(kvs[n - 1].key, "r/a/1");
    mc_etcd_kv_free(kvs, n, 1);

    /* "r/" covers all seven */
    assert_int_equal(mc_etcd_range(e, "r/", NULL, 0, &kvs, &n, NULL, NULL), 0);
    assert_int_equal(n, 7);
    mc_etcd_kv_free(kvs, n, 1);

    assert_int_equal(mc_etcd_range(e, "r/none/", NULL, 0, &kvs, &n, &more, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(more, 0);
    mc_etcd_kv_free(kvs, n, 1);
    mc_etcd_destroy(e);
}

static size_t count_prefix(mc_etcd_t *e, const char *prefix)
{
    mc_etcd_kv_t *kvs;
    size_t n;
    assert_int_equal(mc_etcd_range(e, prefix, NULL, 0, &kvs, &n, NULL, NULL), 0);
    mc_etcd_kv_free(kvs, n, 1);
    return n;
}

static void test_delete_and_delete_prefix(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    const char *keys[] = {"d/x/1", "d/x/2", "d/x/3", "d/y/1", "d/y/2", "d/x0"};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(mc_etcd_put(e, keys[i], "v", 1, 0, NULL), 0);
    int64_t deleted = -1;
    assert_int_equal(mc_etcd_delete(e, "d/x/1", NULL, &deleted), 0);
    assert_int_equal(deleted, 1);
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_get(e, "d/x/1", &kv, NULL), MC_ERR_ETCD_KEY_NOT_EXIST);
    assert_int_equal(mc_etcd_delete(e, "d/x/1", NULL, &deleted), 0); /* absent: not an error */
    assert_int_equal(deleted, 0);

    assert_int_equal(mc_etcd_delete_prefix(e, "d/x/", &deleted), 0);
    assert_int_equal(deleted, 2);
    assert_int_equal(count_prefix(e, "d/x/"), 0);
    assert_int_equal(mc_etcd_get(e, "d/x0", &kv, NULL), 0); /* outside the prefix: kept */
    mc_etcd_kv_free(&kv, 1, 0);
    assert_int_equal(count_prefix(e, "d/y/"), 2);

    /* [key, to) */
    assert_int_equal(mc_etcd_delete(e, "d/y/1", "d/y/2", &deleted), 0);
    assert_int_equal(deleted, 1);
    assert_int_equal(count_prefix(e, "d/y/"), 1);

    assert_int_equal(mc_etcd_delete_prefix(e, "", &deleted), MC_ERR_INVALID_PARAMS);
    assert_int_equal(count_prefix(e, "d/"), 2);
    mc_etcd_destroy(e);
}

static void test_txn_compare_create_and_value(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    mc_etcd_cmp_t absent = {.key = "x/lock", .target = MC_ETCD_CMP_CREATE, .result = MC_ETCD_EQUAL};
    mc_etcd_op_t put_a = {.kind = MC_ETCD_OP_PUT, .key = "x/lock", .value = "A", .value_len = 1};
    mc_etcd_op_t put_b = {.kind = MC_ETCD_OP_PUT, .key = "x/lock", .value = "B", .value_len = 1};
    mc_etcd_op_t get = {.kind = MC_ETCD_OP_GET, .key = "x/lock"};
    mc_etcd_op_t get_absent = {.kind = MC_ETCD_OP_GET, .key = "x/none"};
    int ok = -1;
    mc_etcd_kv_t *kvs = NULL;
    size_t n = 0;
    int64_t rev = 0;

    mc_etcd_op_t then_a[] = {put_a, get};
    assert_int_equal(mc_etcd_txn(e, &absent, 1, then_a, 2, &get, 1, &ok, &kvs, &n, &rev), 0);
    assert_int_equal(ok, 1);
    assert_int_equal(n, 1);
    assert_memory_equal(kvs[0].value, "A", 1);
    assert_true(rev > 0);
    mc_etcd_kv_free(kvs, n, 1);

    /* second time: the compare fails, B is not written, the else branch's GETs answer */
    mc_etcd_op_t then_b[] = {put_b, get};
    mc_etcd_op_t els[] = {get_absent, get};
    assert_int_equal(mc_etcd_txn(e, &absent, 1, then_b, 2, els, 2, &ok, &kvs, &n, NULL), 0);
    assert_int_equal(ok, 0);
    assert_int_equal(n, 1); /* the absent key is left out */
    assert_string_equal(kvs[0].key, "x/lock");
    assert_memory_equal(kvs[0].value, "A", 1);
    mc_etcd_kv_free(kvs, n, 1);
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_get(e, "x/lock", &kv, NULL), 0);
    assert_int_equal(kv.value_len, 1);
    assert_memory_equal(kv.value, "A", 1);
    assert_int_equal(kv.version, 1);
    int64_t create_rev = kv.create_revision, mod_rev = kv.mod_revision;
    mc_etcd_kv_free(&kv, 1, 0);

    /* value compares, with a binary value */
    mc_etcd_cmp_t is_a = {.key = "x/lock",
                          .target = MC_ETCD_CMP_VALUE,
                          .result = MC_ETCD_EQUAL,
                          .value = "A",
                          .value_len = 1};
    mc_etcd_cmp_t not_a = is_a;
    not_a.result = MC_ETCD_NOT_EQUAL;
    assert_int_equal(mc_etcd_txn(e, &not_a, 1, &put_b, 1, NULL, 0, &ok, NULL, NULL, NULL), 0);
    assert_int_equal(ok, 0);
    const char bin[] = {'B', 0, 'C'};
    mc_etcd_op_t put_bin = {
        .kind = MC_ETCD_OP_PUT, .key = "x/lock", .value = bin, .value_len = sizeof(bin)};
    assert_int_equal(mc_etcd_txn(e, &is_a, 1, &put_bin, 1, NULL, 0, &ok, NULL, NULL, NULL), 0);
    assert_int_equal(ok, 1);
    mc_etcd_cmp_t is_bin = {.key = "x/lock",
                            .target = MC_ETCD_CMP_VALUE,
                            .result = MC_ETCD_EQUAL,
                            .value = bin,
                            .value_len = sizeof(bin)};
    assert_int_equal(mc_etcd_txn(e, &is_bin, 1, &get, 1, NULL, 0, &ok, &kvs, &n, NULL), 0);
    assert_int_equal(ok, 1);
    assert_int_equal(n, 1);
    assert_int_equal(kvs[0].value_len, sizeof(bin));
    assert_memory_equal(kvs[0].value, bin, sizeof(bin));
    mc_etcd_kv_free(kvs, n, 1);

    /* revision compares: mod moved, create did not; a DELETE op */
    mc_etcd_cmp_t revs[] = {
        {.key = "x/lock",
         .target = MC_ETCD_CMP_CREATE,
         .result = MC_ETCD_EQUAL,
         .number = create_rev},
        {.key = "x/lock", .target = MC_ETCD_CMP_MOD, .result = MC_ETCD_GREATER, .number = mod_rev},
        {.key = "x/lock", .target = MC_ETCD_CMP_VERSION, .result = MC_ETCD_EQUAL, .number = 2},
    };
    mc_etcd_op_t del = {.kind = MC_ETCD_OP_DELETE, .key = "x/lock"};
    assert_int_equal(mc_etcd_txn(e, revs, 3, &del, 1, NULL, 0, &ok, NULL, NULL, NULL), 0);
    assert_int_equal(ok, 1);
    assert_int_equal(mc_etcd_get(e, "x/lock", &kv, NULL), MC_ERR_ETCD_KEY_NOT_EXIST);
    mc_etcd_destroy(e);
}

static void test_create_if_absent_returns_the_holder(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    int64_t lease = 0;
    assert_int_equal(mc_etcd_lease_grant(e, 30, &lease, NULL), 0);
    int created = -1;
    mc_etcd_kv_t cur;
    assert_int_equal(mc_etcd_create_if_absent(e, "c/leader", "me\0one", 6, lease, &created, &cur),
                     0);
    assert_int_equal(created, 1);
    assert_int_equal(cur.value_len, 6);
    assert_memory_equal(cur.value, "me\0one", 6);
    assert_int_equal(cur.lease, lease);
    mc_etcd_kv_free(&cur, 1, 0);

    assert_int_equal(mc_etcd_create_if_absent(e, "c/leader", "other", 5, 0, &created, &cur), 0);
    assert_int_equal(created, 0);
    assert_int_equal(cur.value_len, 6);
    assert_memory_equal(cur.value, "me\0one", 6);
    assert_int_equal(cur.lease, lease);
    mc_etcd_kv_free(&cur, 1, 0);
    assert_int_equal(mc_etcd_create_if_absent(e, "c/leader", "other", 5, 0, &created, NULL), 0);
    assert_int_equal(created, 0);

    /* the holder's lease ends: the key is free again */
    assert_int_equal(mc_etcd_lease_revoke(e, lease), 0);
    assert_int_equal(mc_etcd_create_if_absent(e, "c/leader", "other", 5, 0, &created, &cur), 0);
    assert_int_equal(created, 1);
    assert_memory_equal(cur.value, "other", 5);
    mc_etcd_kv_free(&cur, 1, 0);
    mc_etcd_destroy(e);
}

/* Polls until key is absent; the ms it took, or -1 after deadline_ms. */
static long long wait_absent(mc_etcd_t *e, const char *key, long long deadline_ms)
{
    long long t0 = now_ms();
    while (now_ms() - t0 < deadline_ms) {
        mc_etcd_kv_t kv;
        int rc = mc_etcd_get(e, key, &kv, NULL);
        if (rc == MC_ERR_ETCD_KEY_NOT_EXIST)
            return now_ms() - t0;
        if (rc == 0)
            mc_etcd_kv_free(&kv, 1, 0);
        usleep(100 * 1000);
    }
    return -1;
}

static void test_lease_keepalive_then_expiry(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    int64_t lease = 0, granted = 0, left = -1;
    assert_int_equal(mc_etcd_lease_grant(e, 2, &lease, &granted), 0);
    assert_true(lease != 0);
    assert_int_equal(granted, 2);
    assert_int_equal(mc_etcd_put(e, "l/k", "v", 1, lease, NULL), 0);
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_get(e, "l/k", &kv, NULL), 0);
    assert_int_equal(kv.lease, lease);
    mc_etcd_kv_free(&kv, 1, 0);

    /* kept alive for twice the TTL: still there */
    long long t0 = now_ms();
    while (now_ms() - t0 < 4000) {
        assert_int_equal(mc_etcd_lease_keepalive(e, lease, &left), 0);
        assert_true(left >= 1 && left <= 2);
        usleep(500 * 1000);
    }
    assert_int_equal(mc_etcd_get(e, "l/k", &kv, NULL), 0);
    mc_etcd_kv_free(&kv, 1, 0);

    /* keep-alives stop: gone after the TTL (etcd checks expiry every 500 ms) */
    long long took = wait_absent(e, "l/k", 2000 + 3000);
    assert_true(took >= 0);
    assert_true(took >= 1000); /* not before the TTL (the last keep-alive was <= 0.5 s ago) */
    assert_int_equal(mc_etcd_lease_keepalive(e, lease, &left), 0);
    assert_int_equal(left, 0);
    /* a put under the dead lease is refused */
    assert_int_equal(mc_etcd_put(e, "l/k", "v", 1, lease, NULL), MC_ERR_ETCD_OPERATION_ERROR);
    mc_etcd_destroy(e);
}

static void test_lease_revoke_deletes_keys(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    int64_t lease = 0, left = -1;
    assert_int_equal(mc_etcd_lease_grant(e, 60, &lease, NULL), 0);
    assert_int_equal(mc_etcd_put(e, "v/1", "a", 1, lease, NULL), 0);
    assert_int_equal(mc_etcd_put(e, "v/2", "b", 1, lease, NULL), 0);
    assert_int_equal(mc_etcd_put(e, "v/3", "c", 1, 0, NULL), 0);
    assert_int_equal(count_prefix(e, "v/"), 3);
    assert_int_equal(mc_etcd_lease_revoke(e, lease), 0);
    assert_int_equal(count_prefix(e, "v/"), 1);
    assert_int_equal(mc_etcd_lease_keepalive(e, lease, &left), 0);
    assert_int_equal(left, 0);
    assert_int_equal(mc_etcd_lease_revoke(e, lease), 0); /* already gone: not an error */
    mc_etcd_destroy(e);
}

static void test_failover_when_first_member_dies(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    assert_int_equal(mc_etcd_put(e, "f/k", "1", 1, 0, NULL), 0);
    assert_string_equal(mc_etcd_current_endpoint(e), cl.endpoint[0]);
    assert_int_equal(mc_etcd_cluster_kill(&cl, 0), 0);

    /* m0 refuses connections: the next member answers. When m0 was the raft leader, the others
     * elect a new one first (election timeout 500 ms), and a call meanwhile may fail ("leader
     * changed", or a timeout): the caller retries, and one succeeds within the bound. */
    long long t0 = now_ms();
    int rc, failed = 0;
    while ((rc = mc_etcd_put(e, "f/k", "2", 1, 0, NULL)) != 0 && now_ms() - t0 < ELECTION_BOUND_MS)
        failed++;
    long long took = now_ms() - t0;
    fprintf(stderr, "put after killing the first endpoint's member: %lld ms (%d failed calls)\n",
            took, failed);
    assert_int_equal(rc, 0);
    assert_true(took < ELECTION_BOUND_MS);
    assert_string_not_equal(mc_etcd_current_endpoint(e), cl.endpoint[0]);
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_get(e, "f/k", &kv, NULL), 0);
    assert_memory_equal(kv.value, "2", 1);
    mc_etcd_kv_free(&kv, 1, 0);

    /* a fresh handle still lists m0 first: it skips it at once */
    mc_etcd_t *e2 = client();
    t0 = now_ms();
    assert_int_equal(mc_etcd_get(e2, "f/k", &kv, NULL), 0);
    mc_etcd_kv_free(&kv, 1, 0);
    assert_true(now_ms() - t0 < TIMEOUT_MS);

    /* the member that answers now is stopped too (SIGSTOP) */
    const char *cur = mc_etcd_current_endpoint(e);
    int stopped = strcmp(cur, cl.endpoint[1]) == 0 ? 1 : 2;
    assert_int_equal(mc_etcd_cluster_pause(&cl, stopped), 0);
    /* with one of three members killed and one stopped, there is no quorum: a linearizable
     * read cannot succeed; the attempts are bounded: timeout x endpoints */
    t0 = now_ms();
    assert_int_equal(mc_etcd_get(e, "f/k", &kv, NULL), MC_ERR_ETCD_OPERATION_ERROR);
    took = now_ms() - t0;
    fprintf(stderr, "get without quorum failed after %lld ms\n", took);
    assert_true(took < 4 * TIMEOUT_MS); /* less than one more attempt than there are endpoints */
    assert_int_equal(mc_etcd_cluster_resume(&cl, stopped), 0);
    assert_int_equal(mc_etcd_cluster_restart(&cl, 0), 0);
    assert_int_equal(mc_etcd_get(e, "f/k", &kv, NULL), 0);
    assert_memory_equal(kv.value, "2", 1);
    mc_etcd_kv_free(&kv, 1, 0);
    /* the restarted member has the write made while it was dead */
    mc_etcd_t *only0 = NULL;
    assert_int_equal(mc_etcd_create(cl.endpoint[0], TIMEOUT_MS, &only0), 0);
    assert_int_equal(mc_etcd_get(only0, "f/k", &kv, NULL), 0);
    assert_memory_equal(kv.value, "2", 1);
    mc_etcd_kv_free(&kv, 1, 0);
    mc_etcd_destroy(only0);
    mc_etcd_destroy(e2);
    mc_etcd_destroy(e);
}

static void test_stopped_member_is_skipped_after_a_timeout(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    assert_int_equal(mc_etcd_put(e, "s/k", "1", 1, 0, NULL), 0);
    assert_int_equal(mc_etcd_cluster_pause(&cl, 0), 0);
    /* (retried as above while the others elect a leader, when m0 was it) */
    long long t0 = now_ms();
    int rc, failed = 0;
    while ((rc = mc_etcd_put(e, "s/k", "2", 1, 0, NULL)) != 0 && now_ms() - t0 < ELECTION_BOUND_MS)
        failed++;
    long long took = now_ms() - t0;
    fprintf(stderr, "put with the first endpoint's member stopped: %lld ms (%d failed calls)\n",
            took, failed);
    assert_int_equal(rc, 0);
    assert_true(took >= TIMEOUT_MS - 50); /* the stopped member's attempt ran out */
    assert_true(took < ELECTION_BOUND_MS + 3 * TIMEOUT_MS);
    /* later calls go to the member that answered, without waiting on m0 */
    t0 = now_ms();
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_get(e, "s/k", &kv, NULL), 0);
    assert_memory_equal(kv.value, "2", 1);
    mc_etcd_kv_free(&kv, 1, 0);
    assert_true(now_ms() - t0 < TIMEOUT_MS);
    assert_int_equal(mc_etcd_cluster_resume(&cl, 0), 0);
    mc_etcd_destroy(e);
}

static void test_all_members_dead(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    assert_int_equal(mc_etcd_put(e, "z/k", "1", 1, 0, NULL), 0);
    /* stopped: every attempt runs to its timeout */
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_etcd_cluster_pause(&cl, i), 0);
    long long t0 = now_ms();
    assert_int_equal(mc_etcd_put(e, "z/k", "2", 1, 0, NULL), MC_ERR_ETCD_OPERATION_ERROR);
    long long took = now_ms() - t0;
    fprintf(stderr, "put with every member stopped failed after %lld ms\n", took);
    /* One attempt per endpoint, each to its timeout: at least three timeouts, and less than
     * four, which one more attempt (a second round, a retry) would take. The gap is the slack
     * for a loaded machine. */
    assert_true(took >= 3 * TIMEOUT_MS - 100);
    assert_true(took < 4 * TIMEOUT_MS);
    /* killed: refused at once */
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_etcd_cluster_kill(&cl, i), 0);
    int64_t lease;
    t0 = now_ms();
    assert_int_equal(mc_etcd_lease_grant(e, 5, &lease, NULL), MC_ERR_ETCD_OPERATION_ERROR);
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_get(e, "z/k", &kv, NULL), MC_ERR_ETCD_OPERATION_ERROR);
    assert_true(now_ms() - t0 <= 3 * TIMEOUT_MS);
    mc_etcd_destroy(e);
}

typedef struct worker {
    mc_etcd_t *e;
    int id;
    int failures;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    for (int i = 0; i < 40; i++) {
        char key[64], val[64];
        snprintf(key, sizeof(key), "m/%d/%d", w->id, i);
        snprintf(val, sizeof(val), "value-%d-%d", w->id, i);
        mc_etcd_kv_t kv;
        if (mc_etcd_put(w->e, key, val, strlen(val), 0, NULL) != 0 ||
            mc_etcd_get(w->e, key, &kv, NULL) != 0) {
            w->failures++;
            continue;
        }
        if (kv.value_len != strlen(val) || memcmp(kv.value, val, kv.value_len) != 0)
            w->failures++;
        mc_etcd_kv_free(&kv, 1, 0);
    }
    return NULL;
}

static void test_one_handle_many_threads(void **state)
{
    (void)state;
    mc_etcd_t *e = client();
    pthread_t t[8];
    worker_t w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker_t){.e = e, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(count_prefix(e, "m/"), 8 * 40);
    mc_etcd_destroy(e);
}

static void test_bad_input(void **state)
{
    (void)state;
    const char *bad[] = {"",           ";",           "host",     "host:", ":2379",
                         "host:99999", "host:0",      "host:abc", "a b:1", "https://h:1",
                         "h:1;;h:2",   "h:1;garbage", "etcd://",  "h:1/x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mc_etcd_t *e = (mc_etcd_t *)1;
        assert_int_equal(mc_etcd_create(bad[i], 0, &e), MC_ERR_INVALID_PARAMS);
        assert_null(e);
    }
    mc_etcd_t *e = NULL;
    assert_int_equal(mc_etcd_create(NULL, 0, &e), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_etcd_create("etcd://h1:1,http://h2:2/", 0, &e), 0);
    assert_string_equal(mc_etcd_current_endpoint(e), "h1:1");
    mc_etcd_destroy(e);

    e = client();
    char *key = malloc(MC_ETCD_MAX_KEY + 2);
    assert_non_null(key);
    memset(key, 'k', MC_ETCD_MAX_KEY + 1);
    key[MC_ETCD_MAX_KEY + 1] = '\0';
    mc_etcd_kv_t kv;
    assert_int_equal(mc_etcd_put(e, key, "v", 1, 0, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_etcd_get(e, key, &kv, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_etcd_delete(e, key, NULL, NULL), MC_ERR_INVALID_PARAMS);
    key[MC_ETCD_MAX_KEY] = '\0'; /* exactly the limit: accepted */
    assert_int_equal(mc_etcd_put(e, key, "v", 1, 0, NULL), 0);
    assert_int_equal(mc_etcd_get(e, key, &kv, NULL), 0);
    assert_string_equal(kv.key, key);
    mc_etcd_kv_free(&kv, 1, 0);
    free(key);
    assert_int_equal(mc_etcd_put(e, "", "v", 1, 0, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_etcd_put(e, NULL, "v", 1, 0, NULL), MC_ERR_INVALID_PARAMS);

    uint8_t *big = calloc(1, MC_ETCD_MAX_VALUE + 1);
    assert_non_null(big);
    assert_int_equal(mc_etcd_put(e, "b/big", big, MC_ETCD_MAX_VALUE + 1, 0, NULL),
                     MC_ERR_INVALID_PARAMS);
    int created;
    assert_int_equal(
        mc_etcd_create_if_absent(e, "b/big", big, MC_ETCD_MAX_VALUE + 1, 0, &created, NULL),
        MC_ERR_INVALID_PARAMS);
    free(big);
    assert_int_equal(mc_etcd_get(e, "b/big", &kv, NULL), MC_ERR_ETCD_KEY_NOT_EXIST);

    /* more ops than etcd allows in a transaction */
    mc_etcd_op_t ops[129];
    for (int i = 0; i < 129; i++)
        ops[i] = (mc_etcd_op_t){.kind = MC_ETCD_OP_GET, .key = "b/x"};
    int ok;
    assert_int_equal(mc_etcd_txn(e, NULL, 0, ops, 129, NULL, 0, &ok, NULL, NULL, NULL),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_etcd_txn(e, NULL, 0, ops, 128, NULL, 0, &ok, NULL, NULL, NULL), 0);
    assert_int_equal(ok, 1);
    int64_t lease;
    assert_int_equal(mc_etcd_lease_grant(e, 0, &lease, NULL), MC_ERR_INVALID_PARAMS);
    int64_t left;
    assert_int_equal(mc_etcd_lease_keepalive(e, 0, &left), MC_ERR_INVALID_PARAMS);
    mc_etcd_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_get_binary_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_prefix_and_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_and_delete_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_compare_create_and_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_if_absent_returns_the_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_keepalive_then_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_revoke_deletes_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failover_when_first_member_dies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_member_is_skipped_after_a_timeout, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_all_members_dead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_handle_many_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
    };
    int failed = cmocka_run_group_tests_name("etcd", tests, NULL, NULL);
    if (failed)
        mc_etcd_cluster_print_logs(&cl, 20);
    return failed;
}
