/*
 * test_master_service.c — the Master Service core (src/master/master_service.h) on a fake clock:
 * the put/get lifecycle, placement, leases, removal, eviction, client liveness, put timeouts,
 * upsert, unmount, keys and empty values, stats, and a multi-threaded stress with invariants.
 * No test sleeps for a TTL: time moves when a test advances the clock and calls mc_master_tick.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "master_service.h"
#include "mooncake/errors.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define SEG_BASE 0x7f0000000000ull

static _Atomic uint64_t fake_now;

static uint64_t fake_clock(void *arg)
{
    return atomic_load((_Atomic uint64_t *)arg);
}

static void advance(uint64_t ms)
{
    atomic_fetch_add(&fake_now, ms);
}

/* Defaults, with proactive eviction off so only the scenario under test evicts, and a client TTL
 * of a day so that moving the clock (which the monitor thread also reads) expires no client. */
static mc_master_config_t quiet_config(void)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    cfg.eviction_high_watermark_ratio = 1.0;
    cfg.client_ttl_ms = 86400000;
    return cfg;
}

static mc_master_t *new_master(const mc_master_config_t *cfg)
{
    mc_master_t *m = NULL;
    atomic_store(&fake_now, 1000000);
    assert_int_equal(mc_master_create(cfg, &m), 0);
    mc_master_set_clock(m, fake_clock, (void *)&fake_now);
    return m;
}

static mc_master_t *new_quiet_master(void)
{
    mc_master_config_t cfg = quiet_config();
    return new_master(&cfg);
}

static mc_segment_info_t segment(const char *id, const char *name, uint64_t size)
{
    mc_segment_info_t s;
    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "%s", id);
    snprintf(s.name, sizeof(s.name), "%s", name);
    snprintf(s.protocol, sizeof(s.protocol), "tcp");
    s.base = SEG_BASE;
    s.size = size;
    return s;
}

static void mount(mc_master_t *m, const char *client, const char *id, const char *name,
                  uint64_t size)
{
    mc_segment_info_t s = segment(id, name, size);
    assert_int_equal(mc_master_mount_segment(m, client, &s), 0);
}

static mc_replicate_config_t replicas(uint32_t n)
{
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.replica_num = n;
    return cfg;
}

static int put_start(mc_master_t *m, const char *client, const char *key, uint64_t size,
                     const mc_replicate_config_t *cfg, mc_replica_desc_t *out, size_t *n)
{
    return mc_master_put_start(m, client, key, size, cfg, out, MC_MAX_REPLICAS, n);
}

/* A whole put; returns put_start's code (put_end must then succeed). */
static int put(mc_master_t *m, const char *client, const char *key, uint64_t size,
               const mc_replicate_config_t *cfg)
{
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    int rc = put_start(m, client, key, size, cfg, out, &n);
    if (rc == 0)
        assert_int_equal(mc_master_put_end(m, client, key), 0);
    return rc;
}

/* Size via get_replica_list (grants a lease), or its error. */
static int64_t get_size(mc_master_t *m, const char *key)
{
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    uint64_t size, ttl;
    int rc = mc_master_get_replica_list(m, key, out, MC_MAX_REPLICAS, &n, &size, &ttl);
    return rc < 0 ? rc : (int64_t)size;
}

/* Replicas via query_key (no lease), or the error. */
static int query(mc_master_t *m, const char *key, mc_replica_desc_t *out, size_t *n)
{
    uint64_t size, remaining;
    return mc_master_query_key(m, key, out, MC_MAX_REPLICAS, n, &size, &remaining);
}

static int exists(mc_master_t *m, const char *key)
{
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    return query(m, key, out, &n) == 0;
}

static mc_master_stats_t stats(mc_master_t *m)
{
    mc_master_stats_t s;
    mc_master_get_stats(m, &s);
    return s;
}

/*
 * The owner `owner` confirms the write fence for every revoked put on its segments, as its
 * store client's ping does once its engine refuses their tokens: the first call hands out the
 * tokens, the second confirms them. Returns how many tokens it was asked to refuse.
 */
static size_t fence_confirm(mc_master_t *m, const char *owner)
{
    static uint64_t tokens[8192];
    uint64_t view = 0, upto = 0;
    size_t n = 0, again = 0;
    mc_client_status_t status;
    assert_int_equal(mc_master_ping(m, owner, &view, &status), 0);
    assert_int_equal(mc_master_fence_ping(m, owner, view, 0, tokens, 8192, &n, &upto), 0);
    if (n > 0) {
        assert_true(upto > 0);
        assert_int_equal(mc_master_fence_ping(m, owner, view, upto, tokens, 8192, &again, &upto),
                         0);
        assert_int_equal(again, 0);
    }
    return n;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static void test_put_then_get_returns_complete_replica(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n = 0;
    assert_int_equal(put_start(m, "client-a", "k", 1000, NULL, out, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].type, MC_REPLICA_MEMORY);
    assert_int_equal(out[0].status, MC_REPLICA_PROCESSING);
    assert_string_equal(out[0].segment_name, "host-a:1");
    assert_int_equal(out[0].size, 1000);
    assert_true(out[0].address >= SEG_BASE && out[0].address + 1000 <= SEG_BASE + 1 * MiB);
    uint64_t addr = out[0].address;
    assert_int_equal(mc_master_put_end(m, "client-a", "k"), 0);

    uint64_t size = 0, ttl = 0;
    assert_int_equal(mc_master_get_replica_list(m, "k", out, MC_MAX_REPLICAS, &n, &size, &ttl), 0);
    assert_int_equal(n, 1);
    assert_int_equal(size, 1000);
    assert_int_equal(ttl, 10000);
    assert_int_equal(out[0].status, MC_REPLICA_COMPLETE);
    assert_int_equal(out[0].address, addr);
    assert_int_equal(mc_master_exist_key(m, "k"), 1);
    assert_int_equal(mc_master_exist_key(m, "other"), 0);
    assert_int_equal(get_size(m, "other"), MC_ERR_OBJECT_NOT_FOUND);
    mc_master_destroy(m);
}

static void test_processing_object_is_invisible_to_readers(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "client-a", "k", 100, NULL, out, &n), 0);
    assert_int_equal(get_size(m, "k"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(query(m, "k", out, &n), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_exist_key(m, "k"), 0);
    assert_int_equal(mc_master_remove(m, "k", 1), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_remove_all(m, 1), 0);
    assert_int_equal(mc_master_put_end(m, "client-b", "k"), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_end(m, "client-a", "k"), 0);
    assert_int_equal(get_size(m, "k"), 100);
    assert_int_equal(mc_master_put_end(m, "client-a", "k"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_put_revoke(m, "client-a", "nope"), MC_ERR_OBJECT_NOT_FOUND);
    mc_master_destroy(m);
}

static void test_put_of_complete_key_is_refused_and_value_kept(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put(m, "client-a", "k", 100, NULL), 0);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "client-a", "k", 200, NULL, out, &n),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(get_size(m, "k"), 100);
    /* A put in progress also blocks a second put of the key, but not as "exists": the first
     * put may still fail, so the second writer must not take its own put for done. */
    assert_int_equal(put_start(m, "client-a", "p", 100, NULL, out, &n), 0);
    assert_int_equal(put_start(m, "client-b", "p", 100, NULL, out, &n),
                     MC_ERR_REPLICA_IS_NOT_READY);
    mc_master_destroy(m);
}

static void test_revoke_frees_the_space(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "client-a", "k", 1 * MiB, NULL, out, &n), 0);
    assert_int_equal(stats(m).used_bytes, 1 * MiB);
    assert_int_equal(mc_master_put_revoke(m, "client-b", "k"), MC_ERR_ILLEGAL_CLIENT);
    uint64_t token = out[0].fence_token;
    assert_true(token != 0);
    assert_int_equal(mc_master_put_revoke(m, "client-a", "k"), 0);
    /* Quarantined, not free: the put's bytes may still arrive at its owner, until the owner
     * confirms a write fence refusing the put's token. */
    assert_int_equal(stats(m).used_bytes, 1 * MiB);
    assert_int_equal(stats(m).key_count, 0);
    assert_int_equal(stats(m).quarantined_extents, 1);
    assert_int_equal(put(m, "client-a", "k2", 1 * MiB, NULL), MC_ERR_NO_AVAILABLE_HANDLE);
    /* A confirmation from another instance, or before the tokens were asked for, counts for
     * nothing; the owner is handed exactly the revoked put's token. */
    uint64_t view = 0, tokens[4], upto = 0;
    size_t nt = 0;
    mc_client_status_t st;
    assert_int_equal(mc_master_ping(m, "client-a", &view, &st), 0);
    assert_int_equal(
        mc_master_fence_ping(m, "client-a", view + 1, UINT64_MAX, tokens, 4, &nt, &upto), 0);
    assert_int_equal(nt, 1);
    assert_true(tokens[0] == token);
    assert_int_equal(stats(m).used_bytes, 1 * MiB);
    assert_int_equal(mc_master_fence_ping(m, "client-b", view, upto, tokens, 4, &nt, &upto), 0);
    assert_int_equal(nt, 0); /* not b's segment */
    assert_int_equal(stats(m).used_bytes, 1 * MiB);
    assert_int_equal(fence_confirm(m, "client-a"), 1);
    assert_int_equal(stats(m).used_bytes, 0);
    assert_int_equal(stats(m).quarantine_freed, 1);
    assert_int_equal(put(m, "client-a", "k", 1 * MiB, NULL), 0);
    /* Every put gets its own token, larger than the last. */
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    assert_int_equal(put_start(m, "client-a", "k3", 1000, NULL, out, &n), 0);
    uint64_t t3 = out[0].fence_token;
    assert_int_equal(put_start(m, "client-a", "k4", 1000, NULL, out, &n), 0);
    assert_true(t3 > token && out[0].fence_token > t3);
    mc_master_destroy(m);
}

/* ---- placement ------------------------------------------------------------------------------ */

static void test_replicas_go_to_distinct_segments_best_effort(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "client-b", "seg-b", "host-b:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    mc_replicate_config_t two = replicas(2), three = replicas(3);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof(key), "two-%d", i);
        assert_int_equal(put_start(m, "c", key, 1000, &two, out, &n), 0);
        assert_int_equal(n, 2);
        assert_string_not_equal(out[0].segment_name, out[1].segment_name);
        assert_int_equal(mc_master_put_end(m, "c", key), 0);
    }
    assert_int_equal(put_start(m, "c", "three", 1000, &three, out, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(mc_master_put_end(m, "c", "three"), 0);
    assert_int_equal(query(m, "three", out, &n), 0);
    assert_int_equal(n, 2);
    /* Too many replicas asked for, or too small an output array, is a bad argument. */
    mc_replicate_config_t nine = replicas(MC_MAX_REPLICAS + 1);
    assert_int_equal(put_start(m, "c", "nine", 1000, &nine, out, &n), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_put_start(m, "c", "x", 10, &two, out, 1, &n), MC_ERR_INVALID_PARAMS);
    mc_master_destroy(m);
}

static void test_preferred_segment_is_honoured(void **state)
{
    mc_master_t *m = new_quiet_master();
    const char *names[] = {"host-a:1", "host-b:1", "host-c:1", "host-d:1"};
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof(id), "seg-%d", i);
        mount(m, "owner", id, names[i], 1 * MiB);
    }
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.preferred_segment = "host-c:1";
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(put_start(m, "c", key, 1000, &cfg, out, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(out[0].segment_name, "host-c:1");
    }
    /* The list form, with the first choice full. */
    mc_replicate_config_t on_b = MC_REPLICATE_CONFIG_INIT;
    on_b.preferred_segment = "host-b:1";
    assert_int_equal(put_start(m, "c", "big", 1 * MiB, &on_b, out, &n), 0);
    assert_string_equal(out[0].segment_name, "host-b:1");
    const char *list[] = {"host-b:1", "host-d:1"};
    mc_replicate_config_t two = replicas(2);
    two.preferred_segments = list;
    two.preferred_segment_count = 2;
    assert_int_equal(put_start(m, "c", "two", 1000, &two, out, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].segment_name, "host-d:1"); /* host-b:1 is full now */
    mc_master_destroy(m);
}

/* ---- leases and removal --------------------------------------------------------------------- */

static void test_lease_blocks_remove_until_it_expires(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put(m, "c", "k", 100, NULL), 0);
    /* A put grants no lease. */
    assert_int_equal(mc_master_remove(m, "k", 0), 0);
    assert_int_equal(mc_master_remove(m, "k", 0), MC_ERR_OBJECT_NOT_FOUND);

    assert_int_equal(put(m, "c", "k", 100, NULL), 0);
    assert_int_equal(get_size(m, "k"), 100);
    assert_int_equal(mc_master_remove(m, "k", 0), MC_ERR_OBJECT_HAS_LEASE);
    advance(9999);
    assert_int_equal(mc_master_remove(m, "k", 0), MC_ERR_OBJECT_HAS_LEASE);
    advance(1);
    assert_int_equal(mc_master_remove(m, "k", 0), 0);

    /* exist_key grants a lease too, and a later read extends it. */
    assert_int_equal(put(m, "c", "k", 100, NULL), 0);
    assert_int_equal(mc_master_exist_key(m, "k"), 1);
    advance(5000);
    assert_int_equal(get_size(m, "k"), 100);
    advance(6000);
    assert_int_equal(mc_master_remove(m, "k", 0), MC_ERR_OBJECT_HAS_LEASE);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    uint64_t size, remaining;
    assert_int_equal(mc_master_query_key(m, "k", out, MC_MAX_REPLICAS, &n, &size, &remaining), 0);
    assert_int_equal(remaining, 4000);
    mc_master_destroy(m);
}

static void test_force_remove_of_leased_object_frees_space_when_lease_ends(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put(m, "c", "k", 512 * KiB, NULL), 0);
    assert_int_equal(get_size(m, "k"), 512 * KiB);
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    assert_int_equal(get_size(m, "k"), MC_ERR_OBJECT_NOT_FOUND);
    /* The reader may still be copying: the bytes stay allocated until its lease ends. */
    assert_int_equal(stats(m).used_bytes, 512 * KiB);
    advance(10000);
    mc_master_tick(m);
    assert_int_equal(stats(m).used_bytes, 0);
    mc_master_destroy(m);
}

/* get_replica_list_leased: the lease id to release, or the error. */
static uint64_t read_lease(mc_master_t *m, const char *key)
{
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    uint64_t size, ttl, id = 0;
    assert_int_equal(
        mc_master_get_replica_list_leased(m, key, out, MC_MAX_REPLICAS, &n, &size, &ttl, &id), 0);
    assert_true(id != 0);
    return id;
}

static size_t release(mc_master_t *m, const char *key, uint64_t id)
{
    return mc_master_release_read_leases(m, &key, &id, 1);
}

static void test_released_lease_frees_a_removed_value_at_once(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put(m, "c", "k", 512 * KiB, NULL), 0);
    uint64_t a = read_lease(m, "k"), b = read_lease(m, "k");
    assert_int_equal(a, b); /* one group while a lease of it runs */
    assert_int_equal(stats(m).reading_count, 1);
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    /* Two readers may still be copying: fenced, not free, not live. */
    assert_int_equal(stats(m).used_bytes, 512 * KiB);
    assert_int_equal(stats(m).fenced_bytes, 512 * KiB);
    assert_int_equal(release(m, "k", a), 1);
    assert_int_equal(stats(m).fenced_bytes, 512 * KiB);
    assert_int_equal(release(m, "k", b), 1);
    assert_int_equal(stats(m).fenced_bytes, 0);
    assert_int_equal(stats(m).used_bytes, 0);
    assert_int_equal(release(m, "k", b), 0); /* a release too many changes nothing */
    assert_int_equal(stats(m).lease_releases, 2);
    mc_master_tick(m);

    /* Released before the remove: freed by the remove itself. */
    assert_int_equal(put(m, "c", "k", 512 * KiB, NULL), 0);
    assert_int_equal(release(m, "k", read_lease(m, "k")), 1);
    assert_int_equal(stats(m).reading_count, 0);
    assert_int_equal(mc_master_remove(m, "k", 0), MC_ERR_OBJECT_HAS_LEASE); /* upstream's lease */
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    assert_int_equal(stats(m).used_bytes, 0);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_release_of_an_ended_lease_group_never_ends_a_later_one(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put(m, "c", "k", 100 * KiB, NULL), 0);
    uint64_t old = read_lease(m, "k"); /* a reader that took longer than its lease */
    advance(10000);
    uint64_t now = read_lease(m, "k");
    assert_true(now != old);
    assert_int_equal(release(m, "k", old), 0);
    assert_int_equal(stats(m).reading_count, 1);
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    assert_int_equal(stats(m).fenced_bytes, 100 * KiB);
    assert_int_equal(release(m, "k", old), 0);
    assert_int_equal(stats(m).fenced_bytes, 100 * KiB);
    /* Upsert replacing a value being read: the old extents wait for its reader too. */
    assert_int_equal(put(m, "c", "u", 100 * KiB, NULL), 0);
    uint64_t u = read_lease(m, "u");
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(mc_master_upsert_start(m, "c", "u", 200 * KiB, NULL, out, MC_MAX_REPLICAS, &n),
                     0);
    assert_int_equal(mc_master_upsert_end(m, "c", "u"), 0);
    assert_int_equal(stats(m).fenced_bytes, 200 * KiB);
    assert_int_equal(release(m, "u", u), 1);
    assert_int_equal(release(m, "k", now), 1);
    assert_int_equal(stats(m).fenced_bytes, 0);
    assert_int_equal(stats(m).used_bytes, 200 * KiB);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_zero_lease_ttl_lets_remove_follow_get(void **state)
{
    mc_master_config_t cfg = quiet_config();
    cfg.default_kv_lease_ttl_ms = 0;
    mc_master_t *m = new_master(&cfg);
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put(m, "c", "k", 100, NULL), 0);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    uint64_t size, ttl = 99;
    assert_int_equal(mc_master_get_replica_list(m, "k", out, MC_MAX_REPLICAS, &n, &size, &ttl), 0);
    assert_int_equal(ttl, 0);
    assert_int_equal(stats(m).leased_count, 0);
    assert_int_equal(mc_master_remove(m, "k", 0), 0);
    assert_int_equal(stats(m).used_bytes, 0);
    mc_master_destroy(m);
}

static void test_remove_all_counts_and_skips_leased(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    for (int i = 0; i < 5; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(put(m, "c", key, 100, NULL), 0);
    }
    assert_int_equal(get_size(m, "k1"), 100);
    assert_int_equal(get_size(m, "k3"), 100);
    assert_int_equal(mc_master_remove_all(m, 0), 3);
    assert_int_equal(stats(m).key_count, 2);
    assert_int_equal(mc_master_remove_all(m, 1), 2);
    assert_int_equal(stats(m).key_count, 0);
    assert_int_equal(mc_master_remove_all(m, 1), 0);
    mc_master_destroy(m);
}

static void test_remove_by_regex(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    const char *keys[] = {"layer/0/a", "layer/1/b", "layer/10/c", "other/1", "xlayer/1"};
    for (int i = 0; i < 5; i++)
        assert_int_equal(put(m, "c", keys[i], 100, NULL), 0);
    assert_int_equal(mc_master_remove_by_regex(m, "(", 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_remove_by_regex(m, "^layer/[0-9]+/", 0), 3);
    assert_true(exists(m, "other/1") && exists(m, "xlayer/1"));
    assert_int_equal(get_size(m, "other/1"), 100);
    assert_int_equal(mc_master_remove_by_regex(m, "1$", 0), 1); /* other/1 is leased */
    assert_int_equal(mc_master_remove_by_regex(m, "1$", 1), 1);
    assert_int_equal(mc_master_remove_by_regex(m, "nothing", 1), 0);
    assert_int_equal(stats(m).key_count, 0);
    mc_master_destroy(m);
}

/* A pattern that exceeds the match limit on one key fails the call before anything is removed. */
static void test_remove_by_regex_over_the_match_limit_removes_nothing(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    char evil[225];
    memset(evil, 'a', 222);
    strcpy(evil + 222, "!b");
    assert_int_equal(put(m, "c", "aab", 100, NULL), 0); /* matches quickly */
    assert_int_equal(put(m, "c", evil, 100, NULL), 0);
    assert_int_equal(mc_master_remove_by_regex(m, "(a*)*\\1b", 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(stats(m).key_count, 2);
    assert_int_equal(stats(m).regex_refused, 1);
    char longest[5000];
    memset(longest, 'x', sizeof(longest) - 1);
    longest[sizeof(longest) - 1] = '\0';
    assert_int_equal(mc_master_remove_by_regex(m, longest, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_remove_by_regex(m, "^a+b$", 1), 1); /* ECMAScript-style search */
    assert_int_equal(stats(m).key_count, 1);
    mc_master_destroy(m);
}

/* ---- pins and eviction ---------------------------------------------------------------------- */

static void test_soft_pin_parameters_are_validated(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    cfg.has_soft_pin_ttl = 1;
    cfg.soft_pin_ttl_ms = 1000;
    assert_int_equal(put_start(m, "c", "k", 10, &cfg, out, &n), MC_ERR_INVALID_PARAMS);
    cfg.soft_pin_action = MC_SOFT_PIN_DISABLE;
    assert_int_equal(put_start(m, "c", "k", 10, &cfg, out, &n), MC_ERR_INVALID_PARAMS);
    cfg.soft_pin_action = MC_SOFT_PIN_ENABLE;
    cfg.soft_pin_ttl_ms = 86400000 + 1;
    assert_int_equal(put_start(m, "c", "k", 10, &cfg, out, &n), MC_ERR_INVALID_PARAMS);
    cfg.soft_pin_ttl_ms = 5000;
    assert_int_equal(put(m, "c", "k", 10, &cfg), 0);
    mc_replicate_config_t preserve = MC_REPLICATE_CONFIG_INIT;
    assert_int_equal(put(m, "c", "plain", 10, &preserve), 0);
    mc_replicate_config_t hard = MC_REPLICATE_CONFIG_INIT;
    hard.with_hard_pin = 1;
    assert_int_equal(put(m, "c", "hard", 10, &hard), 0);
    assert_int_equal(stats(m).soft_pinned_count, 1);
    assert_int_equal(stats(m).hard_pinned_count, 1);
    advance(5000);
    assert_int_equal(stats(m).soft_pinned_count, 0); /* the deadline is fixed */
    /* A hard pin does not stop an explicit remove. */
    assert_int_equal(mc_master_remove(m, "hard", 0), 0);
    mc_master_destroy(m);
}

/* Ten 64 KiB objects fill a 640 KiB segment; eviction_ratio 0.1 evicts exactly one. */
static mc_master_t *full_pool(int allow_soft)
{
    mc_master_config_t cfg = quiet_config();
    cfg.eviction_ratio = 0.1;
    cfg.allow_evict_soft_pinned_objects = allow_soft;
    mc_master_t *m = new_master(&cfg);
    mount(m, "client-a", "seg-a", "host-a:1", 640 * KiB);
    mc_replicate_config_t soft = MC_REPLICATE_CONFIG_INIT;
    soft.soft_pin_action = MC_SOFT_PIN_ENABLE;
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof(key), "o%d", i);
        assert_int_equal(put(m, "c", key, 64 * KiB, i == 1 ? &soft : NULL), 0);
        advance(10);
    }
    return m;
}

static void test_eviction_takes_oldest_lease_first_and_soft_pinned_last(void **state)
{
    mc_master_t *m = full_pool(1);
    /* o0 was read (lease expired since); o1 is soft-pinned; o2 is the oldest never-read object. */
    assert_int_equal(get_size(m, "o0"), 64 * KiB);
    advance(20000);
    assert_int_equal(put(m, "c", "new", 64 * KiB, NULL), 0);
    assert_false(exists(m, "o2"));
    assert_true(exists(m, "o0") && exists(m, "o1") && exists(m, "o3"));
    assert_int_equal(stats(m).evicted_keys, 1);
    mc_master_tick(m);
    mc_master_destroy(m);

    /* Everything else leased: only the soft-pinned object is left to evict. */
    m = full_pool(1);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof(key), "o%d", i);
        if (i != 1)
            assert_int_equal(get_size(m, key), 64 * KiB);
    }
    assert_int_equal(put(m, "c", "new", 64 * KiB, NULL), 0);
    assert_false(exists(m, "o1"));
    mc_master_destroy(m);

    /* ... unless soft-pinned objects may not be evicted: then the pool is simply full. */
    m = full_pool(0);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof(key), "o%d", i);
        if (i != 1)
            assert_int_equal(get_size(m, key), 64 * KiB);
    }
    assert_int_equal(put(m, "c", "new", 64 * KiB, NULL), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_true(exists(m, "o1"));
    assert_int_equal(stats(m).eviction_runs, 1);
    mc_master_destroy(m);
}

static void test_eviction_takes_least_recently_put_or_read_first(void **state)
{
    /* o0 (put first, read just now, released) and o9 (put last, never read) are the most recent;
     * o2 (o1 is soft-pinned) is the least recent. */
    mc_master_t *m = full_pool(1);
    assert_int_equal(release(m, "o0", read_lease(m, "o0")), 1);
    advance(10);
    assert_int_equal(put(m, "c", "new", 64 * KiB, NULL), 0);
    assert_false(exists(m, "o2"));
    assert_true(exists(m, "o0") && exists(m, "o9"));
    mc_master_destroy(m);

    /* Everything read since (o0 still being read): objects put after the reads stay, the least
     * recently read go, and the one being read is not touched. */
    m = full_pool(1);
    uint64_t held = 0;
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof(key), "o%d", i);
        uint64_t id = read_lease(m, key);
        if (i == 0)
            held = id;
        else
            assert_int_equal(release(m, key, id), 1);
        advance(10);
    }
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "new%d", i);
        assert_int_equal(put(m, "c", key, 64 * KiB, NULL), 0);
        advance(10);
    }
    assert_true(exists(m, "new0") && exists(m, "new1") && exists(m, "new2"));
    assert_true(exists(m, "o0") && exists(m, "o1") && exists(m, "o5"));
    assert_false(exists(m, "o2") || exists(m, "o3") || exists(m, "o4"));
    assert_int_equal(release(m, "o0", held), 1);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_fenced_bytes_make_a_put_wait_then_evict_when_old(void **state)
{
    mc_master_config_t cfg = quiet_config();
    cfg.eviction_high_watermark_ratio = 0.9;
    mc_master_t *m = new_master(&cfg);
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put(m, "c", "big", 512 * KiB, NULL), 0);
    for (int i = 0; i < 7; i++) {
        char key[16];
        snprintf(key, sizeof(key), "live%d", i);
        assert_int_equal(put(m, "c", key, 64 * KiB, NULL), 0);
    }
    uint64_t id = read_lease(m, "big");
    assert_int_equal(mc_master_remove(m, "big", 1), 0);
    /* 960 KiB used but 512 KiB of it fenced: below the watermark, nothing is evicted. */
    mc_master_tick(m);
    assert_int_equal(stats(m).evicted_keys, 0);
    /* A put that needs the fenced room waits for it rather than evict. */
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "c", "new", 512 * KiB, NULL, out, &n),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(stats(m).evicted_keys, 0);
    assert_int_equal(stats(m).put_fence_waits, 1);
    assert_true(mc_master_put_wait_ms(m, 512 * KiB) > 0);
    assert_int_equal(mc_master_put_wait_ms(m, 640 * KiB), 0); /* more than the fences hold */
    assert_int_equal(release(m, "big", id), 1);
    assert_int_equal(put(m, "c", "new", 512 * KiB, NULL), 0);
    assert_int_equal(stats(m).evicted_keys, 0);
    assert_int_equal(mc_master_remove(m, "new", 1), 0);

    /* A fence waited for longer than the patience (its reader stopped) no longer holds eviction
     * back; the patience runs from the first put that waited, not from the remove. */
    assert_int_equal(put(m, "c", "big", 512 * KiB, NULL), 0);
    read_lease(m, "big");
    assert_int_equal(mc_master_remove(m, "big", 1), 0);
    advance(5000);
    assert_int_equal(put_start(m, "c", "new", 512 * KiB, NULL, out, &n),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(stats(m).put_fence_waits, 2);
    advance(999);
    assert_true(mc_master_put_wait_ms(m, 512 * KiB) > 0);
    advance(1);
    assert_int_equal(mc_master_put_wait_ms(m, 512 * KiB), 0);
    assert_int_equal(stats(m).evicted_keys, 0);
    assert_int_equal(put_start(m, "c", "new", 512 * KiB, NULL, out, &n),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_true(stats(m).evicted_keys >= 1);
    advance(4000); /* the lease runs out: the fence goes with it */
    assert_int_equal(put(m, "c", "new", 512 * KiB, NULL), 0);
    assert_int_equal(stats(m).fenced_bytes, 0);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_eviction_at_high_watermark_keeps_protected_objects(void **state)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg); /* high watermark 0.9, background eviction on */
    cfg.client_ttl_ms = 86400000;
    cfg.eviction_ratio = 0.2;
    mc_master_t *m = new_master(&cfg);
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replicate_config_t hard = MC_REPLICATE_CONFIG_INIT;
    hard.with_hard_pin = 1;
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    /* Protected first: two leased, two hard-pinned, one in progress. */
    for (int i = 0; i < 2; i++) {
        char key[16];
        snprintf(key, sizeof(key), "leased%d", i);
        assert_int_equal(put(m, "c", key, 64 * KiB, NULL), 0);
        assert_int_equal(get_size(m, key), 64 * KiB);
        snprintf(key, sizeof(key), "hard%d", i);
        assert_int_equal(put(m, "c", key, 64 * KiB, &hard), 0);
    }
    assert_int_equal(put_start(m, "c", "inflight", 64 * KiB, NULL, out, &n), 0);
    /* Fill the rest of the 16 slots; background eviction may start any time now. */
    int filled = 5;
    for (int i = 0; filled < 16 && i < 100; i++) {
        char key[16];
        snprintf(key, sizeof(key), "plain%d", i);
        if (put(m, "c", key, 64 * KiB, NULL) == 0)
            filled++;
    }
    assert_int_equal(filled, 16);
    /* The pool is full (or was just thinned out by the background thread): a put still fits. */
    assert_int_equal(put(m, "c", "newcomer", 64 * KiB, NULL), 0);
    mc_master_tick(m);
    assert_true(stats(m).evicted_keys >= 1);
    assert_true(exists(m, "leased0") && exists(m, "leased1"));
    assert_true(exists(m, "hard0") && exists(m, "hard1"));
    assert_int_equal(mc_master_put_end(m, "c", "inflight"), 0);
    assert_true(exists(m, "inflight"));
    /* The background thread brings usage back under the watermark. */
    for (int i = 0; i < 200 && (double)stats(m).used_bytes > 0.9 * MiB; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true((double)stats(m).used_bytes <= 0.9 * MiB);
    mc_master_destroy(m);
}

static void test_value_larger_than_every_segment_fails_without_eviction(void **state)
{
    mc_master_t *m = new_quiet_master();
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "c", "k", 1, NULL, out, &n), MC_ERR_NO_AVAILABLE_HANDLE);
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "client-b", "seg-b", "host-b:1", 2 * MiB);
    assert_int_equal(put(m, "c", "small", 64 * KiB, NULL), 0);
    assert_int_equal(put_start(m, "c", "k", 2 * MiB + 1, NULL, out, &n),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(stats(m).eviction_runs, 0);
    assert_true(exists(m, "small"));
    assert_int_equal(put_start(m, "c", "k", MC_MAX_VALUE_SIZE + 1, NULL, out, &n),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(put(m, "c", "fits", 2 * MiB, NULL), 0);
    mc_master_destroy(m);
}

/* ---- clients and segments ------------------------------------------------------------------- */

static void test_mount_rules(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_segment_info_t s = segment("seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &s), 0); /* again: no-op */
    assert_int_equal(mc_master_mount_segment(m, "client-b", &s), MC_ERR_SEGMENT_ALREADY_EXISTS);
    s = segment("seg-x", "host-a:1", 1 * MiB);
    s.base = SEG_BASE + 512 * KiB;
    assert_int_equal(mc_master_mount_segment(m, "client-a", &s), MC_ERR_SEGMENT_ALREADY_EXISTS);
    s.base = SEG_BASE + 1 * MiB; /* adjacent is fine */
    assert_int_equal(mc_master_mount_segment(m, "client-a", &s), 0);
    s = segment("seg-z", "host-z:1", 0);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &s), MC_ERR_INVALID_PARAMS);
    s = segment("", "host-z:1", 1 * MiB);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &s), MC_ERR_INVALID_PARAMS);
    s = segment("seg-z", "", 1 * MiB);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &s), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_unmount_segment(m, "client-a", "nope"), MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc_master_unmount_segment(m, "client-b", "seg-a"), MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc_master_unmount_segment(m, "", "seg-a"), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_unmount_segment(m, NULL, "seg-a"), MC_ERR_ILLEGAL_CLIENT);
    s = segment("seg-huge", "host-h:1", MC_MASTER_DEFAULT_MAX_SEGMENT_SIZE + 1);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &s), MC_ERR_INVALID_PARAMS);
    assert_int_equal(stats(m).mounts_refused, 1);
    s = segment("seg-anon", "host-h:1", 1 * MiB);
    assert_int_equal(mc_master_mount_segment(m, "", &s), MC_ERR_INVALID_PARAMS);

    mc_segment_info_t list[4];
    assert_int_equal(mc_master_list_segments(m, list, 4), 2);
    assert_string_equal(list[0].client_id, "client-a");
    assert_int_equal(put(m, "c", "k", 100, NULL), 0);
    assert_int_equal(mc_master_list_segments(m, list, 4), 2);
    assert_int_equal(list[0].used + list[1].used, 128);
    assert_int_equal(mc_master_unmount_segment(m, "client-a", "seg-x"), 0);
    assert_int_equal(mc_master_list_segments(m, list, 0), 1);
    mc_master_destroy(m);
}

static void test_unmount_keeps_object_readable_from_remaining_replica(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "client-b", "seg-b", "host-b:1", 1 * MiB);
    mc_replicate_config_t two = replicas(2), on_a = MC_REPLICATE_CONFIG_INIT;
    on_a.preferred_segment = "host-a:1";
    assert_int_equal(put(m, "c", "both", 1000, &two), 0);
    assert_int_equal(put(m, "c", "only-a", 1000, &on_a), 0);
    assert_int_equal(get_size(m, "only-a"), 1000); /* leased: still dropped with its segment */
    assert_int_equal(mc_master_unmount_segment(m, "client-a", "seg-a"), 0);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(query(m, "both", out, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].segment_name, "host-b:1");
    assert_int_equal(get_size(m, "only-a"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(stats(m).used_bytes, 1024);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_graceful_unmount_drains_then_unmounts_at_the_deadline(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_segment_info_t b = segment("seg-b", "host-b:1", 1 * MiB);
    assert_int_equal(mc_master_mount_segment(m, "client-b", &b), 0);
    mc_replicate_config_t on_a = MC_REPLICATE_CONFIG_INIT;
    on_a.preferred_segment = "host-a:1";
    assert_int_equal(put(m, "c", "old", 1000, &on_a), 0);
    assert_int_equal(mc_master_graceful_unmount_segment(m, "client-b", "seg-a", 5000),
                     MC_ERR_SEGMENT_NOT_FOUND); /* only the owner */
    assert_int_equal(mc_master_graceful_unmount_segment(m, "client-a", "seg-a", 5000), 0);
    assert_int_equal(mc_master_graceful_unmount_segment(m, "client-a", "seg-a", 60000), 0);
    /* draining: readable, and nothing new is placed there */
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "c", "new", 1000, &on_a, out, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].segment_name, "host-b:1");
    assert_int_equal(mc_master_put_end(m, "c", "new"), 0);
    advance(4999);
    mc_master_tick(m);
    assert_int_equal(get_size(m, "old"), 1000);
    advance(1); /* the first deadline holds (asking again does not extend it) */
    mc_master_tick(m);
    assert_int_equal(get_size(m, "old"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_unmount_segment(m, "client-a", "seg-a"), MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(get_size(m, "new"), 1000);
    /* grace 0: at once */
    assert_int_equal(mc_master_graceful_unmount_segment(m, "client-b", "seg-b", 0), 0);
    assert_int_equal(get_size(m, "new"), MC_ERR_OBJECT_NOT_FOUND);
    mc_master_destroy(m);
}

static void test_segments_of_one_client_and_name_share_an_epoch(void **state)
{
    mc_master_t *m = new_quiet_master();
    mc_segment_info_t a1 = segment("a1", "host-a:1", 1 * MiB), a2 = segment("a2", "host-a:1", MiB);
    a2.base = SEG_BASE + 16 * MiB;
    mc_segment_info_t c = segment("c1", "host-c:1", 1 * MiB);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &a1), 0);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &a2), 0);
    assert_int_equal(mc_master_mount_segment(m, "client-c", &c), 0);
    uint64_t e1 = mc_master_segment_epoch(m, "a1");
    assert_true(e1 != 0);
    assert_true(mc_master_segment_epoch(m, "a2") == e1); /* one engine, one epoch */
    assert_true(mc_master_segment_epoch(m, "c1") != e1);
    /* with no segment of the client left, a new mount gets a new epoch */
    assert_int_equal(mc_master_unmount_segment(m, "client-a", "a1"), 0);
    assert_int_equal(mc_master_unmount_segment(m, "client-a", "a2"), 0);
    assert_int_equal(mc_master_mount_segment(m, "client-a", &a1), 0);
    assert_true(mc_master_segment_epoch(m, "a1") != e1);
    mc_master_destroy(m);
}

/* Found gone (liveness.h): segments unmounted and puts revoked at once, the record kept (a ping
 * is told to re-mount); a client that pinged while it was probed is left alone. */
static void test_client_gone_drops_it_unless_it_pinged_since(void **state)
{
    (void)state;
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "client-b", "seg-b", "host-b:1", 1 * MiB);
    mc_replicate_config_t on_a = MC_REPLICATE_CONFIG_INIT, on_b = MC_REPLICATE_CONFIG_INIT;
    on_a.preferred_segment = "host-a:1";
    on_b.preferred_segment = "host-b:1";
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put(m, "client-b", "only-a", 1000, &on_a), 0);
    assert_int_equal(put(m, "client-b", "only-b", 1000, &on_b), 0);
    assert_int_equal(put_start(m, "client-a", "a-writing", 1000, &on_b, out, &n), 0);

    char names[4][MC_SEGMENT_NAME_MAX];
    uint64_t seen = 0;
    assert_int_equal(mc_master_client_endpoints(m, "client-a", names, 4, &seen), 1);
    assert_string_equal(names[0], "host-a:1");
    assert_int_equal(mc_master_client_endpoints(m, "nobody", names, 4, NULL), 0);

    /* It pinged after the probe began: alive, nothing dropped. */
    mc_client_status_t status;
    advance(10);
    assert_int_equal(mc_master_ping(m, "client-a", NULL, &status), 0);
    assert_int_equal(mc_master_client_gone(m, "client-a", seen), 1);
    assert_true(exists(m, "only-a"));
    assert_int_equal(stats(m).gone_clients, 0);

    assert_int_equal(mc_master_client_endpoints(m, "client-a", names, 4, &seen), 1);
    assert_int_equal(mc_master_client_gone(m, "client-a", seen), 0);
    mc_master_stats_t s = stats(m);
    assert_int_equal(s.gone_clients, 1);
    assert_int_equal(s.expired_clients, 0);
    assert_int_equal(s.segment_count, 1);
    assert_false(exists(m, "only-a"));
    assert_true(exists(m, "only-b"));
    assert_int_equal(mc_master_put_end(m, "client-a", "a-writing"), MC_ERR_OBJECT_NOT_FOUND);
    /* A put of the lost key is a new object, placed on the live segment. */
    assert_int_equal(put(m, "client-b", "only-a", 1000, NULL), 0);
    assert_int_equal(query(m, "only-a", out, &n), 0);
    assert_string_equal(out[0].segment_name, "host-b:1");
    /* Gone once: no endpoints, a second verdict finds nothing to do. */
    assert_int_equal(mc_master_client_endpoints(m, "client-a", names, 4, &seen), 0);
    assert_int_equal(mc_master_client_gone(m, "client-a", seen), MC_ERR_CLIENT_NOT_FOUND);
    /* Pinging after all, it is told to re-mount, and is a live holder again once it has. */
    assert_int_equal(mc_master_ping(m, "client-a", NULL, &status), 0);
    assert_int_equal(status, MC_CLIENT_NEED_REMOUNT);
    mc_segment_info_t seg = segment("seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(mc_master_remount_segments(m, "client-a", &seg, 1), 0);
    assert_int_equal(mc_master_ping(m, "client-a", NULL, &status), 0);
    assert_int_equal(status, MC_CLIENT_OK);
    assert_int_equal(mc_master_client_gone(m, "client-a", 0), 1);
    assert_int_equal(mc_master_client_gone(m, NULL, 0), MC_ERR_INVALID_PARAMS);
    mc_master_destroy(m);
}

static void test_client_expiry_drops_segments_and_puts_then_remount(void **state)
{
    mc_master_config_t cfg = quiet_config();
    cfg.client_ttl_ms = 10000;
    mc_master_t *m = new_master(&cfg);
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "client-b", "seg-b", "host-b:1", 1 * MiB);
    mc_replicate_config_t two = replicas(2), on_a = MC_REPLICATE_CONFIG_INIT,
                          on_b = MC_REPLICATE_CONFIG_INIT;
    on_a.preferred_segment = "host-a:1";
    on_b.preferred_segment = "host-b:1";
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put(m, "client-b", "both", 1000, &two), 0);
    assert_int_equal(put(m, "client-b", "only-a", 1000, &on_a), 0);
    assert_int_equal(put_start(m, "client-a", "a-writing", 1000, &on_b, out, &n), 0);
    assert_int_equal(put_start(m, "client-b", "b-writing-to-a", 1000, &on_a, out, &n), 0);

    uint64_t view = 0;
    mc_client_status_t status;
    assert_int_equal(mc_master_ping(m, "client-a", &view, &status), 0);
    assert_int_equal(status, MC_CLIENT_OK);
    advance(6000);
    assert_int_equal(mc_master_ping(m, "client-b", NULL, &status), 0);
    advance(6000); /* a: 12 s silent; b: 6 s */
    mc_master_tick(m);
    /* a's own put had its extent on b's segment: quarantined until b confirms its fence. */
    assert_int_equal(stats(m).used_bytes, 2048);
    assert_int_equal(fence_confirm(m, "client-b"), 1);

    mc_master_stats_t s = stats(m);
    assert_int_equal(s.expired_clients, 1);
    assert_int_equal(s.client_count, 1);
    assert_int_equal(s.segment_count, 1);
    assert_int_equal(s.revoked_puts, 2); /* a's own put, and b's put into a's segment */
    assert_int_equal(query(m, "both", out, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].segment_name, "host-b:1");
    assert_false(exists(m, "only-a"));
    assert_int_equal(mc_master_put_end(m, "client-a", "a-writing"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_put_end(m, "client-b", "b-writing-to-a"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(s.used_bytes, 1024);

    assert_int_equal(mc_master_ping(m, "client-a", NULL, &status), 0);
    assert_int_equal(status, MC_CLIENT_NEED_REMOUNT);
    assert_int_equal(mc_master_ping(m, "client-a", NULL, &status), 0);
    assert_int_equal(status, MC_CLIENT_NEED_REMOUNT); /* until it remounts */
    mc_segment_info_t seg = segment("seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(mc_master_remount_segments(m, "client-a", &seg, 1), 0);
    assert_int_equal(mc_master_ping(m, "client-a", NULL, &status), 0);
    assert_int_equal(status, MC_CLIENT_OK);
    assert_int_equal(put(m, "client-a", "again", 1000, &on_a), 0);
    assert_int_equal(query(m, "again", out, &n), 0);
    assert_string_equal(out[0].segment_name, "host-a:1");
    /* A pure client (no segments) registers by remounting nothing. */
    assert_int_equal(mc_master_remount_segments(m, "pure", NULL, 0), 0);
    assert_int_equal(mc_master_ping(m, "pure", NULL, &status), 0);
    assert_int_equal(status, MC_CLIENT_OK);
    mc_master_destroy(m);
}

/* ---- put timeouts --------------------------------------------------------------------------- */

static void test_unfinished_put_is_revoked_after_release_timeout(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "c", "k", 1000, NULL, out, &n), 0);
    advance(600000 - 1);
    mc_master_tick(m);
    assert_int_equal(stats(m).processing_count, 1);
    advance(1);
    mc_master_tick(m);
    mc_master_stats_t s = stats(m);
    assert_int_equal(s.processing_count, 0);
    assert_int_equal(s.revoked_puts, 1);
    assert_int_equal(s.used_bytes, 1024); /* quarantined until the owner's fence */
    assert_int_equal(fence_confirm(m, "client-a"), 1);
    assert_int_equal(stats(m).used_bytes, 0);
    assert_int_equal(mc_master_put_end(m, "c", "k"), MC_ERR_OBJECT_NOT_FOUND);
    mc_master_destroy(m);
}

static void test_abandoned_put_is_replaced_after_discard_timeout(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "writer-1", "k", 1000, NULL, out, &n), 0);
    advance(29999);
    assert_int_equal(put_start(m, "writer-2", "k", 2000, NULL, out, &n),
                     MC_ERR_REPLICA_IS_NOT_READY);
    advance(1);
    assert_int_equal(put_start(m, "writer-2", "k", 2000, NULL, out, &n), 0);
    assert_int_equal(mc_master_put_end(m, "writer-1", "k"), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_end(m, "writer-2", "k"), 0);
    assert_int_equal(get_size(m, "k"), 2000);
    assert_int_equal(stats(m).used_bytes, 2048 + 1024); /* writer-1's extent: quarantined */
    assert_int_equal(fence_confirm(m, "client-a"), 1);
    assert_int_equal(stats(m).used_bytes, 2048);
    assert_int_equal(stats(m).revoked_puts, 1);
    mc_master_destroy(m);
}

/* ---- upsert --------------------------------------------------------------------------------- */

static void test_upsert_keeps_old_value_readable_until_end(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mc_replica_desc_t out[MC_MAX_REPLICAS], cur[MC_MAX_REPLICAS];
    size_t n;
    uint64_t size, ttl;
    assert_int_equal(put(m, "c", "k", 100, NULL), 0);
    assert_int_equal(mc_master_get_replica_list(m, "k", cur, MC_MAX_REPLICAS, &n, &size, &ttl), 0);
    uint64_t old_addr = cur[0].address;

    assert_int_equal(mc_master_upsert_start(m, "c", "k", 300, NULL, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(n, 1);
    assert_true(out[0].address != old_addr);
    uint64_t new_addr = out[0].address;
    assert_int_equal(mc_master_get_replica_list(m, "k", cur, MC_MAX_REPLICAS, &n, &size, &ttl), 0);
    assert_int_equal(size, 100);
    assert_int_equal(cur[0].address, old_addr);
    assert_int_equal(mc_master_upsert_end(m, "c", "k"), 0);
    assert_int_equal(mc_master_get_replica_list(m, "k", cur, MC_MAX_REPLICAS, &n, &size, &ttl), 0);
    assert_int_equal(size, 300);
    assert_int_equal(cur[0].address, new_addr);
    /* The old extent outlives the leases readers were granted on it. */
    assert_int_equal(stats(m).used_bytes, 128 + 320);
    advance(10000);
    mc_master_tick(m);
    assert_int_equal(stats(m).used_bytes, 320);

    /* Revoke keeps the current value; upsert of a missing key creates it. */
    assert_int_equal(mc_master_upsert_start(m, "c", "k", 50, NULL, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(mc_master_upsert_revoke(m, "c", "k"), 0);
    assert_int_equal(get_size(m, "k"), 300);
    assert_int_equal(mc_master_upsert_start(m, "c", "new", 50, NULL, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(get_size(m, "new"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_upsert_end(m, "c", "new"), 0);
    assert_int_equal(get_size(m, "new"), 50);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_upsert_to_more_replicas_and_remove_during_upsert(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "client-b", "seg-b", "host-b:1", 1 * MiB);
    mount(m, "client-c", "seg-c", "host-c:1", 1 * MiB);
    mc_replicate_config_t three = replicas(3);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put(m, "c", "k", 100, NULL), 0);
    assert_int_equal(mc_master_upsert_start(m, "c", "k", 200, &three, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(mc_master_upsert_end(m, "c", "k"), 0);
    assert_int_equal(query(m, "k", out, &n), 0);
    assert_int_equal(n, 3);
    mc_master_tick(m);

    /* Removing the readable value while an upsert runs leaves the upsert to finish. */
    assert_int_equal(mc_master_upsert_start(m, "c", "k", 300, NULL, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(mc_master_remove(m, "k", 0), 0);
    assert_int_equal(get_size(m, "k"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(stats(m).processing_count, 1);
    assert_int_equal(mc_master_upsert_end(m, "c", "k"), 0);
    assert_int_equal(get_size(m, "k"), 300);
    assert_int_equal(stats(m).used_bytes, 320);
    mc_master_tick(m);
    mc_master_destroy(m);
}

/* ---- keys, empty values, stats -------------------------------------------------------------- */

static void test_key_length_limits(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    char *key = malloc(MC_MAX_KEY_LEN + 2);
    memset(key, 'k', MC_MAX_KEY_LEN + 1);
    key[MC_MAX_KEY_LEN + 1] = '\0';
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put_start(m, "c", key, 10, NULL, out, &n), MC_ERR_INVALID_KEY);
    assert_int_equal(get_size(m, key), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_exist_key(m, key), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_remove(m, key, 0), MC_ERR_INVALID_KEY);
    key[MC_MAX_KEY_LEN] = '\0';
    assert_int_equal(put(m, "c", key, 10, NULL), 0);
    assert_int_equal(get_size(m, key), 10);
    assert_int_equal(put(m, "c", "x", 10, NULL), 0);
    assert_int_equal(get_size(m, "x"), 10);
    assert_int_equal(put_start(m, "c", "", 10, NULL, out, &n), MC_ERR_INVALID_KEY);
    assert_int_equal(put_start(m, "c", NULL, 10, NULL, out, &n), MC_ERR_INVALID_KEY);
    assert_int_equal(get_size(m, ""), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_exist_key(m, ""), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_remove(m, "", 0), MC_ERR_INVALID_KEY);
    /* Any byte but NUL. */
    assert_int_equal(put(m, "c", "a/b c\xff\t", 10, NULL), 0);
    assert_int_equal(get_size(m, "a/b c\xff\t"), 10);
    free(key);
    mc_master_destroy(m);
}

static void test_empty_value_is_an_object(void **state)
{
    mc_master_t *m = new_quiet_master();
    /* With no segment at all an empty value is still valid, with no replica. */
    assert_int_equal(put(m, "c", "early", 0, NULL), 0);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    uint64_t size = 99, ttl;
    assert_int_equal(mc_master_get_replica_list(m, "early", out, MC_MAX_REPLICAS, &n, &size, &ttl),
                     0);
    assert_int_equal(size, 0);
    assert_int_equal(n, 0);

    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    assert_int_equal(put_start(m, "c", "empty", 0, NULL, out, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].size, 0);
    assert_string_equal(out[0].segment_name, "host-a:1");
    assert_int_equal(mc_master_put_end(m, "c", "empty"), 0);
    assert_int_equal(get_size(m, "empty"), 0);
    assert_int_equal(get_size(m, "missing"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_exist_key(m, "empty"), 1);
    assert_int_equal(stats(m).used_bytes, 0);
    /* It outlives its nominal segment, with no replica left to show. */
    assert_int_equal(mc_master_unmount_segment(m, "client-a", "seg-a"), 0);
    assert_int_equal(mc_master_get_replica_list(m, "empty", out, MC_MAX_REPLICAS, &n, &size, &ttl),
                     0);
    assert_int_equal(n, 0);
    assert_int_equal(size, 0);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_stats_numbers(void **state)
{
    mc_master_t *m = new_quiet_master();
    mount(m, "client-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "client-b", "seg-b", "host-b:1", 3 * MiB);
    mc_replicate_config_t soft = MC_REPLICATE_CONFIG_INIT, hard = MC_REPLICATE_CONFIG_INIT;
    soft.soft_pin_action = MC_SOFT_PIN_ENABLE;
    hard.with_hard_pin = 1;
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(put(m, "c", "a", 100, NULL), 0);
    assert_int_equal(put(m, "c", "b", 1000, &soft), 0);
    assert_int_equal(put(m, "c", "h", 10, &hard), 0);
    assert_int_equal(put_start(m, "c", "p", 64, NULL, out, &n), 0);
    assert_int_equal(get_size(m, "a"), 100);
    mc_master_stats_t s = stats(m);
    assert_int_equal(s.capacity_bytes, 4 * MiB);
    assert_int_equal(s.used_bytes, 128 + 1024 + 64 + 64);
    assert_int_equal(s.key_count, 4);
    assert_int_equal(s.complete_count, 3);
    assert_int_equal(s.processing_count, 1);
    assert_int_equal(s.client_count, 2);
    assert_int_equal(s.segment_count, 2);
    assert_int_equal(s.leased_count, 1);
    assert_int_equal(s.soft_pinned_count, 1);
    assert_int_equal(s.hard_pinned_count, 1);
    assert_int_equal(s.evicted_keys, 0);
    assert_int_equal(s.expired_clients, 0);
    assert_int_equal(s.revoked_puts, 0);
    mc_master_destroy(m);
}

static void test_bad_config_is_refused(void **state)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    mc_master_t *m = NULL;
    cfg.eviction_ratio = 1.5;
    assert_int_equal(mc_master_create(&cfg, &m), MC_ERR_INVALID_PARAMS);
    mc_master_config_default(&cfg);
    cfg.eviction_high_watermark_ratio = -0.1;
    assert_int_equal(mc_master_create(&cfg, &m), MC_ERR_INVALID_PARAMS);
    assert_null(m);
    mc_master_destroy(NULL);
}

/* ---- concurrency ---------------------------------------------------------------------------- */

#define STRESS_KEYS 64
#define STRESS_THREADS 8

typedef struct stress_arg {
    mc_master_t *m;
    int id;
    _Atomic int *stop;
    _Atomic long *failures;
    long ops;
} stress_arg_t;

static void stress_key(char *key, size_t cap, uint64_t r)
{
    snprintf(key, cap, "key-%d", (int)(r % STRESS_KEYS));
}

static void *stress_thread(void *p)
{
    stress_arg_t *a = p;
    char client[32], key[32];
    snprintf(client, sizeof(client), "writer-%d", a->id);
    uint64_t r = 0x2545F4914F6CDD1Dull * (uint64_t)(a->id + 1);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    mc_replicate_config_t cfg = MC_REPLICATE_CONFIG_INIT;
    while (!atomic_load(a->stop)) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        stress_key(key, sizeof(key), r >> 8);
        uint64_t size = (r >> 20) % (64 * KiB);
        cfg.replica_num = 1 + (uint32_t)((r >> 40) % 2);
        int rc = 0, op = (int)((r >> 50) % 10);
        if (op < 4 || op == 8) {
            rc = op == 8 ? mc_master_upsert_start(a->m, client, key, size, &cfg, out,
                                                  MC_MAX_REPLICAS, &n)
                         : put_start(a->m, client, key, size, &cfg, out, &n);
            if (rc == 0)
                rc = (r >> 60) % 8 == 0 ? mc_master_put_revoke(a->m, client, key)
                                        : mc_master_put_end(a->m, client, key);
            else if (rc == MC_ERR_OBJECT_ALREADY_EXISTS || rc == MC_ERR_NO_AVAILABLE_HANDLE ||
                     rc == MC_ERR_REPLICA_IS_NOT_READY)
                rc = 0;
        } else if (op < 7) {
            uint64_t sz, ttl;
            rc = mc_master_get_replica_list(a->m, key, out, MC_MAX_REPLICAS, &n, &sz, &ttl);
            if (rc == 0 && sz > 0 && (n == 0 || out[0].size != sz))
                rc = -1;
            if (rc == MC_ERR_OBJECT_NOT_FOUND)
                rc = 0;
        } else if (op == 7) {
            rc = mc_master_remove(a->m, key, (int)((r >> 30) % 2));
            if (rc == MC_ERR_OBJECT_NOT_FOUND || rc == MC_ERR_OBJECT_HAS_LEASE)
                rc = 0;
        } else {
            rc = mc_master_exist_key(a->m, key) < 0;
        }
        if (rc != 0)
            atomic_fetch_add(a->failures, 1);
        a->ops++;
    }
    return NULL;
}

static void test_concurrent_put_get_remove_keeps_invariants(void **state)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    cfg.default_kv_lease_ttl_ms = 20;
    cfg.eviction_high_watermark_ratio = 0.8;
    mc_master_t *m = NULL;
    assert_int_equal(mc_master_create(&cfg, &m), 0); /* real clock: leases expire meanwhile */
    mount(m, "owner-a", "seg-a", "host-a:1", 1 * MiB);
    mount(m, "owner-b", "seg-b", "host-b:1", 1 * MiB);

    _Atomic int stop = 0;
    _Atomic long failures = 0;
    pthread_t th[STRESS_THREADS];
    stress_arg_t args[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++) {
        args[i] = (stress_arg_t){.m = m, .id = i, .stop = &stop, .failures = &failures};
        assert_int_equal(pthread_create(&th[i], NULL, stress_thread, &args[i]), 0);
    }
    for (int i = 0; i < 10; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        mc_master_tick(m); /* debug builds check every invariant here, mid-flight */
    }
    atomic_store(&stop, 1);
    long ops = 0;
    for (int i = 0; i < STRESS_THREADS; i++) {
        pthread_join(th[i], NULL);
        ops += args[i].ops;
    }
    assert_int_equal(atomic_load(&failures), 0);
    assert_true(ops > 1000);
    print_message("stress: %ld operations in 1 s over %d threads\n", ops, STRESS_THREADS);

    /* Jump past every lease: deferred frees run, and the used bytes are exactly the live
     * replicas' extents (no put is in progress: every thread ended or revoked its own). */
    atomic_store(&fake_now, UINT64_C(1) << 62);
    mc_master_set_clock(m, fake_clock, (void *)&fake_now);
    mc_client_status_t status;
    assert_int_equal(mc_master_ping(m, "owner-a", NULL, &status), 0); /* not expired by the jump */
    assert_int_equal(mc_master_ping(m, "owner-b", NULL, &status), 0);
    fence_confirm(m, "owner-a"); /* revoked puts' extents: quarantined until then */
    fence_confirm(m, "owner-b");
    mc_master_tick(m);
    assert_int_equal(stats(m).segment_count, 2);
    mc_master_stats_t s = stats(m);
    assert_int_equal(s.processing_count, 0);
    uint64_t live = 0;
    for (int k = 0; k < STRESS_KEYS; k++) {
        char key[32];
        mc_replica_desc_t out[MC_MAX_REPLICAS];
        size_t n;
        uint64_t size, remaining;
        stress_key(key, sizeof(key), (uint64_t)k);
        if (mc_master_query_key(m, key, out, MC_MAX_REPLICAS, &n, &size, &remaining) == 0)
            live += n * ((size + 63) / 64 * 64);
    }
    assert_int_equal(s.used_bytes, live);
    assert_int_equal(mc_master_remove_all(m, 0), (int64_t)s.complete_count);
    assert_int_equal(stats(m).used_bytes, 0);
    mc_master_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_then_get_returns_complete_replica),
        cmocka_unit_test(test_graceful_unmount_drains_then_unmounts_at_the_deadline),
        cmocka_unit_test(test_segments_of_one_client_and_name_share_an_epoch),
        cmocka_unit_test(test_processing_object_is_invisible_to_readers),
        cmocka_unit_test(test_put_of_complete_key_is_refused_and_value_kept),
        cmocka_unit_test(test_revoke_frees_the_space),
        cmocka_unit_test(test_replicas_go_to_distinct_segments_best_effort),
        cmocka_unit_test(test_preferred_segment_is_honoured),
        cmocka_unit_test(test_lease_blocks_remove_until_it_expires),
        cmocka_unit_test(test_force_remove_of_leased_object_frees_space_when_lease_ends),
        cmocka_unit_test(test_released_lease_frees_a_removed_value_at_once),
        cmocka_unit_test(test_release_of_an_ended_lease_group_never_ends_a_later_one),
        cmocka_unit_test(test_zero_lease_ttl_lets_remove_follow_get),
        cmocka_unit_test(test_remove_all_counts_and_skips_leased),
        cmocka_unit_test(test_remove_by_regex),
        cmocka_unit_test(test_remove_by_regex_over_the_match_limit_removes_nothing),
        cmocka_unit_test(test_soft_pin_parameters_are_validated),
        cmocka_unit_test(test_eviction_takes_oldest_lease_first_and_soft_pinned_last),
        cmocka_unit_test(test_eviction_takes_least_recently_put_or_read_first),
        cmocka_unit_test(test_fenced_bytes_make_a_put_wait_then_evict_when_old),
        cmocka_unit_test(test_eviction_at_high_watermark_keeps_protected_objects),
        cmocka_unit_test(test_value_larger_than_every_segment_fails_without_eviction),
        cmocka_unit_test(test_mount_rules),
        cmocka_unit_test(test_unmount_keeps_object_readable_from_remaining_replica),
        cmocka_unit_test(test_client_expiry_drops_segments_and_puts_then_remount),
        cmocka_unit_test(test_client_gone_drops_it_unless_it_pinged_since),
        cmocka_unit_test(test_unfinished_put_is_revoked_after_release_timeout),
        cmocka_unit_test(test_abandoned_put_is_replaced_after_discard_timeout),
        cmocka_unit_test(test_upsert_keeps_old_value_readable_until_end),
        cmocka_unit_test(test_upsert_to_more_replicas_and_remove_during_upsert),
        cmocka_unit_test(test_key_length_limits),
        cmocka_unit_test(test_empty_value_is_an_object),
        cmocka_unit_test(test_stats_numbers),
        cmocka_unit_test(test_bad_config_is_refused),
        cmocka_unit_test(test_concurrent_put_get_remove_keeps_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
