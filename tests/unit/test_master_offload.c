/*
 * test_master_offload.c — the Master Service's offload logic (src/master/offload.c) on a fake
 * clock: task queues and leases, disk replicas in replica lists, pinning and eviction order,
 * retries and failures, stale results, deletions owed to clients, restart recovery, disk-capacity
 * eviction, backend checks, and client expiry. No networking: the heartbeat's callbacks collect
 * what a client would receive.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master_service.h"
#include "mooncake/errors.h"

#define MiB (1ull << 20)
#define SEG_BASE 0x7f0000000000ull
#define MAX_GOT 64

static _Atomic uint64_t fake_now;

static uint64_t fake_clock(void *arg)
{
    return atomic_load((_Atomic uint64_t *)arg);
}

static mc_master_config_t offload_config(int on_evict)
{
    mc_master_config_t cfg;
    mc_master_config_default(&cfg);
    cfg.eviction_high_watermark_ratio = 1.0;
    cfg.client_ttl_ms = 86400000;
    cfg.enable_offload = 1;
    cfg.offload_on_evict = on_evict;
    cfg.offload_task_timeout_ms = 5000;
    cfg.offload_max_attempts = 2;
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

static void mount(mc_master_t *m, const char *client, const char *id, const char *name,
                  uint64_t size)
{
    mc_segment_info_t s;
    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "%s", id);
    snprintf(s.name, sizeof(s.name), "%s", name);
    snprintf(s.protocol, sizeof(s.protocol), "tcp");
    s.base = SEG_BASE;
    s.size = size;
    assert_int_equal(mc_master_mount_segment(m, client, &s), 0);
}

static int put(mc_master_t *m, const char *client, const char *key, uint64_t size)
{
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    int rc = mc_master_put_start(m, client, key, size, NULL, out, MC_MAX_REPLICAS, &n);
    if (rc == 0)
        assert_int_equal(mc_master_put_end(m, client, key), 0);
    return rc;
}

/* What one heartbeat handed out. */
typedef struct got {
    size_t ntasks, ndel;
    mc_offload_task_desc_t tasks[MAX_GOT];
    char task_keys[MAX_GOT][64];
    mc_disk_file_desc_t dels[MAX_GOT];
    char del_keys[MAX_GOT][64];
    mc_offload_heartbeat_out_t out;
} got_t;

static int on_task(void *arg, const mc_offload_task_desc_t *t)
{
    got_t *g = arg;
    snprintf(g->task_keys[g->ntasks], 64, "%s", t->key);
    g->tasks[g->ntasks] = *t;
    g->tasks[g->ntasks].key = g->task_keys[g->ntasks];
    g->ntasks++;
    return 0;
}

static int on_delete(void *arg, const mc_disk_file_desc_t *d)
{
    got_t *g = arg;
    snprintf(g->del_keys[g->ndel], 64, "%s", d->key);
    g->dels[g->ndel] = *d;
    g->dels[g->ndel].key = g->del_keys[g->ndel];
    g->ndel++;
    return 0;
}

static mc_offloader_info_t local_info(const char *endpoint)
{
    mc_offloader_info_t i;
    memset(&i, 0, sizeof(i));
    i.backend = MC_OFFLOAD_BACKEND_LOCAL;
    snprintf(i.endpoint, sizeof(i.endpoint), "%s", endpoint);
    i.offloading = 1;
    i.healthy = 1;
    return i;
}

static mc_offloader_info_t dfs_info(const char *fs, const char *storage)
{
    mc_offloader_info_t i;
    memset(&i, 0, sizeof(i));
    i.backend = MC_OFFLOAD_BACKEND_DISTRIBUTED;
    snprintf(i.fs_type, sizeof(i.fs_type), "%s", fs);
    snprintf(i.storage_id, sizeof(i.storage_id), "%s", storage);
    i.offloading = 1;
    i.healthy = 1;
    return i;
}

static int heartbeat(mc_master_t *m, const char *client, const mc_offloader_info_t *info,
                     size_t max_tasks, got_t *g)
{
    memset(g, 0, sizeof(*g));
    char msg[256];
    return mc_master_offload_heartbeat(m, client, info, 0, NULL, 0, max_tasks, MAX_GOT, on_task,
                                       on_delete, g, &g->out, msg, sizeof(msg));
}

static int notify(mc_master_t *m, const char *client, const mc_offload_task_desc_t *t, int code)
{
    mc_offload_result_t r = {t->task_id, t->key, t->version, t->size, code, 0, 0};
    int c = -12345;
    int rc = mc_master_offload_notify(m, client, &r, 1, &c);
    return rc != 0 ? rc : c;
}

static int replicas(mc_master_t *m, const char *key, mc_replica_desc_t *out, size_t *n)
{
    uint64_t size, ttl;
    return mc_master_get_replica_list(m, key, out, 16, n, &size, &ttl);
}

static mc_master_stats_t stats(mc_master_t *m)
{
    mc_master_stats_t s;
    mc_master_get_stats(m, &s);
    return s;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_put_end_queues_a_task_and_its_result_adds_a_local_disk_replica(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g;
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    assert_int_equal(g.out.resync, 1); /* first registration: report your files */
    assert_int_equal(put(m, "c1", "k", 1000), 0);
    mc_replica_desc_t d[16];
    size_t n;
    assert_int_equal(replicas(m, "k", d, &n), 0);
    assert_int_equal(n, 1);
    uint64_t addr = d[0].address;
    assert_int_equal(mc_master_offload_ping(m, "c1", 0), 1); /* one task waiting */
    assert_true(mc_master_put_wait_ms(m, 1 * MiB) > 0);

    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    assert_int_equal(g.out.resync, 0);
    assert_int_equal(g.ntasks, 1);
    assert_string_equal(g.tasks[0].key, "k");
    assert_int_equal(g.tasks[0].size, 1000);
    assert_int_equal(g.tasks[0].address, addr);
    assert_int_equal(g.out.remaining, 1);
    assert_int_equal(stats(m).offload_leased, 1);

    assert_int_equal(notify(m, "c1", &g.tasks[0], 0), 0);
    assert_int_equal(replicas(m, "k", d, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(d[0].type, MC_REPLICA_MEMORY); /* memory first */
    assert_int_equal(d[1].type, MC_REPLICA_LOCAL_DISK);
    assert_string_equal(d[1].segment_name, "h:7000");
    assert_int_equal(d[1].address, g.tasks[0].version);
    assert_int_equal(d[1].size, 1000);
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.offload_done, 1);
    assert_int_equal(st.offload_bytes, 1000);
    assert_int_equal(st.disk_replicas, 1);
    assert_int_equal(st.offload_queued + st.offload_leased, 0);
    assert_int_equal(mc_master_put_wait_ms(m, 1 * MiB), 0);
    /* A second result for the same task is stale. */
    assert_int_equal(notify(m, "c1", &g.tasks[0], 0), MC_ERR_TASK_NOT_FOUND);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_pending_offload_pins_and_disk_backed_objects_are_evicted_first(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    assert_int_equal(put(m, "c1", "a", 1 * MiB), 0);
    assert_int_equal(put(m, "c1", "b", 1 * MiB), 0);
    assert_int_equal(put(m, "c1", "c", 1 * MiB), 0);
    assert_int_equal(put(m, "c1", "d", 1 * MiB), 0);
    /* Full, and every object is pinned by its pending offload: nothing can be evicted. */
    assert_int_equal(put(m, "c1", "e", 1 * MiB), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_true(mc_master_put_wait_ms(m, 1 * MiB) > 0);
    assert_int_equal(mc_master_put_wait_ms(m, 5 * MiB), 0); /* would never fit */
    assert_int_equal(stats(m).complete_count, 4);

    assert_int_equal(heartbeat(m, "c1", &info, 1, &g), 0); /* "a" only */
    assert_int_equal(g.ntasks, 1);
    assert_string_equal(g.tasks[0].key, "a");
    assert_int_equal(notify(m, "c1", &g.tasks[0], 0), 0);
    /* Now "a" can give its memory back and stays readable from disk. */
    assert_int_equal(put(m, "c1", "e", 1 * MiB), 0);
    mc_replica_desc_t d[16];
    size_t n;
    assert_int_equal(replicas(m, "a", d, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].type, MC_REPLICA_LOCAL_DISK);
    for (const char *const *k = (const char *const[]){"b", "c", "d", "e", NULL}; *k; k++) {
        assert_int_equal(replicas(m, *k, d, &n), 0);
        assert_int_equal(d[0].type, MC_REPLICA_MEMORY);
    }
    assert_int_equal(stats(m).disk_only_objects, 1);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_expired_leases_are_retried_then_failed_and_counted(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    assert_int_equal(put(m, "c1", "k", 100), 0);
    assert_int_equal(heartbeat(m, "c1", &info, 4, &g), 0);
    assert_int_equal(g.ntasks, 1);
    uint64_t first_id = g.tasks[0].task_id;
    /* A renewed lease survives past its first deadline. */
    atomic_fetch_add(&fake_now, 4000);
    memset(&g, 0, sizeof(g));
    assert_int_equal(mc_master_offload_heartbeat(m, "c1", &info, 0, &first_id, 1, 0, 0, on_task,
                                                 on_delete, &g, &g.out, NULL, 0),
                     0);
    atomic_fetch_add(&fake_now, 4000);
    mc_master_tick(m);
    assert_int_equal(stats(m).offload_leased, 1);
    /* Not renewed: queued again, then leased a second time, then failed. */
    atomic_fetch_add(&fake_now, 6000);
    mc_master_tick(m);
    assert_int_equal(stats(m).offload_retried, 1);
    assert_int_equal(heartbeat(m, "c1", &info, 4, &g), 0);
    assert_int_equal(g.ntasks, 1);
    assert_int_equal(notify(m, "c1", &g.tasks[0], MC_ERR_FILE_WRITE_FAIL), 0);
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.offload_failed, 1);
    assert_int_equal(st.offload_queued + st.offload_leased, 0);
    /* The object is unpinned, memory only. */
    mc_replica_desc_t d[16];
    size_t n;
    assert_int_equal(replicas(m, "k", d, &n), 0);
    assert_int_equal(n, 1);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_remove_queues_file_deletion_and_late_result_is_stale(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g, g2;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    assert_int_equal(put(m, "c1", "done", 100), 0);
    assert_int_equal(put(m, "c1", "late", 100), 0);
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    assert_int_equal(g.ntasks, 2);
    int idone = strcmp(g.tasks[0].key, "done") == 0 ? 0 : 1;
    assert_int_equal(notify(m, "c1", &g.tasks[idone], 0), 0);
    assert_int_equal(mc_master_remove(m, "done", 1), 0);
    assert_int_equal(mc_master_remove(m, "late", 1), 0);
    /* The written file of "late" is refused (the client deletes it). */
    assert_int_equal(notify(m, "c1", &g.tasks[1 - idone], 0), MC_ERR_TASK_NOT_FOUND);
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g2), 0);
    /* Both files go: the written one, and the one the cancelled task may still publish. */
    assert_int_equal(g2.ndel, 2);
    int jdone = strcmp(g2.dels[0].key, "done") == 0 ? 0 : 1;
    assert_string_equal(g2.dels[jdone].key, "done");
    assert_int_equal(g2.dels[jdone].version, g.tasks[idone].version);
    assert_string_equal(g2.dels[1 - jdone].key, "late");
    assert_int_equal(stats(m).key_count, 0);
    mc_master_tick(m);
    mc_master_destroy(m);
}

/* A client confirms a deleted file with a task-id-0 result of code FILE_NOT_FOUND. */
static int confirm_deleted(mc_master_t *m, const char *client, const char *key, uint64_t version)
{
    mc_offload_result_t r = {0, key, version, 0, MC_ERR_FILE_NOT_FOUND, 0, 0};
    int c = -12345;
    int rc = mc_master_offload_notify(m, client, &r, 1, &c);
    return rc != 0 ? rc : c;
}

static void test_removal_is_pending_until_the_holder_confirms_its_file_gone(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    snprintf(info.storage_id, sizeof(info.storage_id), "disk-1");
    got_t g, g2;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    assert_int_equal(put(m, "c1", "k", 100), 0);
    assert_int_equal(put(m, "c1", "other", 100), 0);
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    assert_int_equal(notify(m, "c1", &g.tasks[0], 0), 0);
    assert_int_equal(notify(m, "c1", &g.tasks[1], 0), 0);
    const char *k = "k", *other = "other";
    uint64_t before = mc_master_offload_deletion_seq(m);
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    uint64_t after = mc_master_offload_deletion_seq(m), pending = 99;
    assert_true(after > before);
    assert_int_equal(mc_master_offload_deletions_pending(m, &k, 1, before + 1, after, &pending), 0);
    assert_int_equal(pending, 1);
    assert_int_equal(mc_master_offload_deletions_pending(m, &other, 1, before + 1, after, &pending),
                     0);
    assert_int_equal(pending, 0);
    /* A rescan that still finds the file is told it is obsolete. */
    int ik = strcmp(g.tasks[0].key, "k") == 0 ? 0 : 1;
    mc_offload_result_t again = {0, "k", g.tasks[ik].version, 100, 0, 0, 0};
    int c;
    assert_int_equal(mc_master_offload_notify(m, "c1", &again, 1, &c), 0);
    assert_int_equal(c, MC_ERR_OBJECT_ALREADY_EXISTS);
    /* The holder leaves before it deleted it: the deletion waits for its storage. */
    mc_master_offload_heartbeat(m, "c1", &info, 1, NULL, 0, 0, 0, NULL, NULL, NULL, &g2.out, NULL,
                                0);
    assert_int_equal(mc_master_offload_deletions_pending(m, NULL, 0, before + 1, after, &pending),
                     0);
    assert_int_equal(pending, 1);
    mount(m, "c2", "s2", "h:2", 4 * MiB);
    assert_int_equal(heartbeat(m, "c2", &info, 0, &g2), 0); /* same storage id */
    assert_int_equal(g2.ndel, 1);
    assert_string_equal(g2.dels[0].key, "k");
    assert_int_equal(confirm_deleted(m, "c1", "k", g2.dels[0].version), MC_ERR_CLIENT_NOT_FOUND);
    assert_int_equal(confirm_deleted(m, "c2", "k", g2.dels[0].version), 0);
    assert_int_equal(mc_master_offload_deletions_pending(m, &k, 1, before + 1, after, &pending), 0);
    assert_int_equal(pending, 0);
    assert_int_equal(stats(m).pending_deletions, 0);
    /* A holder restarts before its old registration is dropped: the old one's deletions go to
     * the new one when it leaves. */
    assert_int_equal(mc_master_unmount_segment(m, "c1", "s1"), 0); /* k2 goes to c2's segment */
    assert_int_equal(put(m, "c2", "k2", 100), 0);
    assert_int_equal(heartbeat(m, "c2", &info, 8, &g), 0);
    assert_int_equal(g.ntasks, 1);
    assert_int_equal(notify(m, "c2", &g.tasks[0], 0), 0);
    mount(m, "c3", "s3", "h:3", 4 * MiB);
    assert_int_equal(heartbeat(m, "c3", &info, 0, &g2), 0); /* same storage, c2 still there */
    before = mc_master_offload_deletion_seq(m);
    assert_int_equal(mc_master_remove(m, "k2", 1), 0);
    after = mc_master_offload_deletion_seq(m);
    mc_master_offload_heartbeat(m, "c2", &info, 1, NULL, 0, 0, 0, NULL, NULL, NULL, &g2.out, NULL,
                                0);
    assert_int_equal(heartbeat(m, "c3", &info, 0, &g2), 0);
    assert_int_equal(g2.ndel, 1);
    assert_string_equal(g2.dels[0].key, "k2");
    assert_int_equal(confirm_deleted(m, "c3", "k2", g2.dels[0].version), 0);
    assert_int_equal(mc_master_offload_deletions_pending(m, NULL, 0, before + 1, after, &pending),
                     0);
    assert_int_equal(pending, 0);
    /* Seqs of another master instance are unknown here, never "done". */
    assert_int_equal(mc_master_offload_deletions_pending(m, NULL, 0, 1, 2, &pending),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_upsert_replaces_the_disk_replica_and_offloads_the_new_value(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g, g2;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    assert_int_equal(put(m, "c1", "k", 100), 0);
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    assert_int_equal(notify(m, "c1", &g.tasks[0], 0), 0);
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(mc_master_upsert_start(m, "c1", "k", 200, NULL, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(mc_master_upsert_end(m, "c1", "k"), 0);
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g2), 0);
    assert_int_equal(g2.ndel, 1); /* the old value's file */
    assert_int_equal(g2.dels[0].version, g.tasks[0].version);
    assert_int_equal(g2.ntasks, 1); /* the new value */
    assert_int_equal(g2.tasks[0].size, 200);
    assert_true(g2.tasks[0].version > g.tasks[0].version);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_dfs_replicas_survive_their_writer_and_deletions_go_to_any_dfs_client(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "a", "sa", "h:1", 4 * MiB);
    mc_offloader_info_t ia = dfs_info("posix", "cluster-1");
    got_t g;
    assert_int_equal(heartbeat(m, "a", &ia, 0, &g), 0);
    assert_int_equal(put(m, "a", "k", 100), 0);
    assert_int_equal(put(m, "a", "k2", 100), 0);
    assert_int_equal(heartbeat(m, "a", &ia, 8, &g), 0);
    assert_int_equal(g.ntasks, 2);
    assert_int_equal(notify(m, "a", &g.tasks[0], 0), 0);
    assert_int_equal(notify(m, "a", &g.tasks[1], 0), 0);
    /* A's segment goes (it exits): the objects stay readable from the shared storage. */
    assert_int_equal(mc_master_unmount_segment(m, "a", "sa"), 0);
    mc_replica_desc_t d[16];
    size_t n;
    assert_int_equal(replicas(m, "k", d, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].type, MC_REPLICA_DFS);
    assert_int_equal(stats(m).dfs_replicas, 2);
    /* B reads the same storage; a client on another storage or fs type is refused. */
    mount(m, "b", "sb", "h:2", 4 * MiB);
    mount(m, "x", "sx", "h:3", 4 * MiB);
    mc_offloader_info_t ib = dfs_info("posix", "cluster-1");
    mc_offloader_info_t other = dfs_info("posix", "cluster-2");
    mc_offloader_info_t daos = dfs_info("daos", "cluster-1");
    assert_int_equal(heartbeat(m, "x", &other, 8, &g), MC_ERR_INVALID_PARAMS);
    assert_int_equal(heartbeat(m, "x", &daos, 8, &g), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_remove(m, "k", 1), 0);
    assert_int_equal(heartbeat(m, "b", &ib, 8, &g), 0);
    assert_int_equal(g.ndel, 1);
    assert_string_equal(g.dels[0].key, "k");
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_declared_backend_refuses_a_contradicting_client(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    cfg.offload_backend = MC_OFFLOAD_BACKEND_DISTRIBUTED;
    snprintf(cfg.distributed_fs_type, sizeof(cfg.distributed_fs_type), "daos");
    mc_master_t *m = new_master(&cfg);
    mount(m, "a", "sa", "h:1", 4 * MiB);
    mc_offloader_info_t posix = dfs_info("posix", "c");
    mc_offloader_info_t daos = dfs_info("daos", "c");
    mc_offloader_info_t local = local_info("h:9");
    got_t g;
    char msg[256] = "";
    assert_int_equal(mc_master_offload_heartbeat(m, "a", &posix, 0, NULL, 0, 1, 1, on_task,
                                                 on_delete, &g, &g.out, msg, sizeof(msg)),
                     MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "daos"));
    assert_int_equal(heartbeat(m, "a", &daos, 1, &g), 0);
    assert_int_equal(heartbeat(m, "a", &local, 1, &g), 0); /* local disks are allowed */
    assert_int_equal(heartbeat(m, "nobody", &local, 1, &g), MC_ERR_CLIENT_NOT_FOUND);
    mc_master_destroy(m);

    mc_master_config_t off = offload_config(0);
    off.enable_offload = 0;
    m = new_master(&off);
    mount(m, "a", "sa", "h:1", 4 * MiB);
    assert_int_equal(heartbeat(m, "a", &local, 1, &g), MC_ERR_UNABLE_OFFLOAD);
    mc_master_destroy(m);
}

static void test_rescanned_files_are_registered_only_for_unknown_keys(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    assert_int_equal(put(m, "c1", "known", 10), 0);
    mc_offload_result_t r[3] = {
        {0, "recovered", 77, 4096, 0},
        {0, "known", 78, 10, 0},
        {0, "recovered", 77, 4096, 0}, /* reported twice: idempotent */
    };
    int codes[3];
    assert_int_equal(mc_master_offload_notify(m, "c1", r, 3, codes), 0);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(codes[2], 0);
    mc_replica_desc_t d[16];
    size_t n;
    uint64_t size, ttl;
    assert_int_equal(mc_master_get_replica_list(m, "recovered", d, 16, &n, &size, &ttl), 0);
    assert_int_equal(size, 4096);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].type, MC_REPLICA_LOCAL_DISK);
    assert_int_equal(d[0].address, 77);
    /* Disk capacity eviction of its only replica removes the object. */
    mc_disk_file_desc_t f = {"recovered", 77, 4096};
    int c;
    assert_int_equal(mc_master_evict_disk_replicas(m, "c1", &f, 1, &c), 0);
    assert_int_equal(c, 0);
    assert_int_equal(mc_master_get_replica_list(m, "recovered", d, 16, &n, &size, &ttl),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_evict_disk_replicas(m, "c1", &f, 1, &c), 0);
    assert_int_equal(c, MC_ERR_REPLICA_NOT_FOUND);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_rescanned_files_keep_the_highest_version_in_any_order(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    mc_offload_result_t r[5] = {
        {0, "k", 90, 10, 0, 1, 0x1111}, /* k: newest second */
        {0, "k", 80, 20, 0, 1, 0x2222}, /* older than what is known: obsolete */
        {0, "k", 95, 30, 0, 1, 0x3333}, /* newer: replaces 90 */
        {0, "j", 80, 40, 0, 0, 0},      /* j: oldest first */
        {0, "j", 90, 50, 0, 0, 0},
    };
    int codes[5];
    assert_int_equal(mc_master_offload_notify(m, "c1", r, 5, codes), 0);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(codes[2], 0);
    assert_int_equal(codes[3], 0);
    assert_int_equal(codes[4], 0);
    mc_replica_desc_t d[16];
    size_t n;
    uint64_t size, ttl;
    assert_int_equal(mc_master_get_replica_list(m, "k", d, 16, &n, &size, &ttl), 0);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].address, 95);
    assert_int_equal(size, 30);
    assert_true(d[0].has_checksum);
    assert_int_equal(d[0].checksum, 0x3333);
    assert_int_equal(mc_master_get_replica_list(m, "j", d, 16, &n, &size, &ttl), 0);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].address, 90);
    assert_int_equal(size, 50);
    /* The files that lost are deleted by their holder. */
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    assert_int_equal(g.ndel, 2);
    /* A value put through this master is newer than any file: a rescanned one is obsolete. */
    assert_int_equal(put(m, "c1", "fresh", 10), 0);
    mc_offload_result_t late = {0, "fresh", 1ull << 62, 10, 0, 0, 0};
    int c;
    assert_int_equal(mc_master_offload_notify(m, "c1", &late, 1, &c), 0);
    assert_int_equal(c, MC_ERR_OBJECT_ALREADY_EXISTS);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_one_distributed_client_rescans_the_root_after_a_master_start(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    mc_master_t *m = new_master(&cfg);
    mount(m, "a", "sa", "h:1", 4 * MiB);
    mount(m, "b", "sb", "h:2", 4 * MiB);
    mc_offloader_info_t ia = dfs_info("posix", "cluster-1");
    mc_offloader_info_t ib = dfs_info("posix", "cluster-1");
    got_t g;
    assert_int_equal(heartbeat(m, "a", &ia, 0, &g), 0);
    assert_int_equal(g.out.resync, 1);
    assert_int_equal(g.out.rescan, 1); /* a lists the root */
    assert_int_equal(heartbeat(m, "b", &ib, 0, &g), 0);
    assert_int_equal(g.out.resync, 1);
    assert_int_equal(g.out.rescan, 0); /* b does not */
    assert_int_equal(stats(m).offload_recovering, 3);
    /* a goes away before it is done: b is asked next. */
    assert_int_equal(mc_master_unmount_segment(m, "a", "sa"), 0);
    mc_master_offload_heartbeat(m, "a", &ia, 1, NULL, 0, 0, 0, NULL, NULL, NULL, &g.out, NULL, 0);
    assert_int_equal(heartbeat(m, "b", &ib, 0, &g), 0);
    assert_int_equal(g.out.rescan, 1);
    ib.resync_done = 1;
    assert_int_equal(heartbeat(m, "b", &ib, 0, &g), 0);
    assert_int_equal(g.out.rescan, 0);
    assert_int_equal(stats(m).offload_recovering, 0);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_offload_on_evict_queues_instead_of_dropping(void **state)
{
    mc_master_config_t cfg = offload_config(1);
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 2 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g;
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    assert_int_equal(put(m, "c1", "a", 1 * MiB), 0);
    assert_int_equal(put(m, "c1", "b", 1 * MiB), 0);
    assert_int_equal(stats(m).offload_queued, 0); /* not eager */
    assert_int_equal(put(m, "c1", "c", 1 * MiB), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_true(stats(m).offload_queued >= 1); /* eviction queued "a" instead of dropping it */
    assert_true(mc_master_put_wait_ms(m, 1 * MiB) > 0);
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    for (size_t i = 0; i < g.ntasks; i++)
        assert_int_equal(notify(m, "c1", &g.tasks[i], 0), 0);
    assert_int_equal(put(m, "c1", "c", 1 * MiB), 0);
    mc_replica_desc_t d[16];
    size_t n;
    assert_int_equal(replicas(m, "a", d, &n), 0);
    assert_int_equal(d[0].type, MC_REPLICA_LOCAL_DISK);
    mc_master_tick(m);
    mc_master_destroy(m);
}

static void test_client_expiry_drops_its_local_disk_replicas(void **state)
{
    mc_master_config_t cfg = offload_config(0);
    cfg.client_ttl_ms = 10000;
    mc_master_t *m = new_master(&cfg);
    mount(m, "c1", "s1", "h:1", 4 * MiB);
    mount(m, "c2", "s2", "h:2", 4 * MiB);
    mc_offloader_info_t info = local_info("h:7000");
    got_t g;
    assert_int_equal(heartbeat(m, "c1", &info, 0, &g), 0);
    mc_replicate_config_t two = MC_REPLICATE_CONFIG_INIT;
    two.replica_num = 2;
    mc_replica_desc_t out[MC_MAX_REPLICAS];
    size_t n;
    assert_int_equal(mc_master_put_start(m, "c2", "k", 100, &two, out, MC_MAX_REPLICAS, &n), 0);
    assert_int_equal(mc_master_put_end(m, "c2", "k"), 0);
    assert_int_equal(heartbeat(m, "c1", &info, 8, &g), 0);
    assert_int_equal(g.ntasks, 1);
    assert_int_equal(notify(m, "c1", &g.tasks[0], 0), 0);
    assert_int_equal(stats(m).disk_replicas, 1);
    /* c1 stops pinging: its segment and its local disk go; c2's memory replica remains. */
    for (int i = 0; i < 3; i++) {
        atomic_fetch_add(&fake_now, 5000);
        uint64_t view;
        mc_client_status_t st;
        mc_master_ping(m, "c2", &view, &st);
        mc_master_tick(m);
    }
    mc_master_stats_t st = stats(m);
    assert_int_equal(st.disk_replicas, 0);
    assert_int_equal(st.offloaders, 0);
    mc_replica_desc_t d[16];
    assert_int_equal(replicas(m, "k", d, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(d[0].segment_name, "h:2");
    mc_master_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_end_queues_a_task_and_its_result_adds_a_local_disk_replica),
        cmocka_unit_test(test_pending_offload_pins_and_disk_backed_objects_are_evicted_first),
        cmocka_unit_test(test_expired_leases_are_retried_then_failed_and_counted),
        cmocka_unit_test(test_remove_queues_file_deletion_and_late_result_is_stale),
        cmocka_unit_test(test_removal_is_pending_until_the_holder_confirms_its_file_gone),
        cmocka_unit_test(test_upsert_replaces_the_disk_replica_and_offloads_the_new_value),
        cmocka_unit_test(test_dfs_replicas_survive_their_writer_and_deletions_go_to_any_dfs_client),
        cmocka_unit_test(test_declared_backend_refuses_a_contradicting_client),
        cmocka_unit_test(test_rescanned_files_are_registered_only_for_unknown_keys),
        cmocka_unit_test(test_rescanned_files_keep_the_highest_version_in_any_order),
        cmocka_unit_test(test_one_distributed_client_rescans_the_root_after_a_master_start),
        cmocka_unit_test(test_offload_on_evict_queues_instead_of_dropping),
        cmocka_unit_test(test_client_expiry_drops_its_local_disk_replicas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
