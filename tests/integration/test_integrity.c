/*
 * test_integrity.c — "a read returns the object's exact bytes or an error", with real
 * processes: mooncake_master, mooncake_client holders, store_rw clients stopped at failpoints
 * (MC_FAILPOINTS, src/common/failpoint.h), and this process as a store client.
 *
 * Each test reproduces one way the store used to return wrong bytes with success:
 *  - a stored replica's byte flipped in the holder's memory (the checksum must catch it);
 *  - the holder expired and re-mounted while a reader was inside its lease (the re-mount must
 *    wait for the lease; shown with checksums off, so the root fix is what is tested);
 *  - --default_kv_lease_ttl=0 with remove + put racing gets (torn values);
 *  - a put acknowledged while another client's put of the key was still in progress;
 *  - a batch get failing a small key because a large key of the batch outlived the lease.
 * Every state is waited for (a process stopped, a segment gone, a mount back), not slept for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"
#include "cluster.h"
#include "object_layout.h"
#include "payload.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define RW_BIN MC_BUILD_DIR "/tests/integration/store_rw"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A store client in this process with no segment; MC_STORE_CHECKSUM=0 when !checksum. */
static mc_store_t *new_client(const mc_master_t *m, int checksum, int disable_shm)
{
    mc_store_t *s = mc_test_client(m, checksum, disable_shm);
    assert_non_null(s);
    return s;
}

/* ---- store_rw children -------------------------------------------------------------------- */

static void rw_start(mc_proc_t *p, const mc_master_t *m, const char *const *env)
{
    char *argv[] = {RW_BIN, (char *)m->addr, NULL};
    mc_env_apply(env, 1);
    int rc = mc_proc_start(p, argv, "READY", 20000);
    mc_env_apply(env, 0);
    assert_int_equal(rc, 0);
    mc_cluster_track(p->pid);
}

static void rw_send(mc_proc_t *p, const char *line)
{
    assert_int_equal(mc_proc_send(p, line), 0);
}

/* Reads one line of the child's answers, waiting up to timeout_ms. */
static void rw_read_line(mc_proc_t *p, char *out, size_t cap, int timeout_ms)
{
    assert_int_equal(mc_proc_read_line(p, out, cap, timeout_ms), 0);
}

/* Waits until the child stopped itself (a "stop" failpoint). */
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

static void rw_finish(mc_proc_t *p)
{
    close(p->stdin_fd);
    p->stdin_fd = -1;
    pid_t pid = p->pid;
    int st = mc_proc_stop(p, 0, 20000); /* signal 0: just wait for its exit at end of input */
    mc_cluster_untrack(pid);
    assert_true(st != -1 && WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- a flipped byte in a stored replica --------------------------------------------------- */

/* Flips one byte of the replica described by d, through the Transfer Engine (as a peer). */
static void flip_byte(const mc_replica_desc_t *d, uint64_t offset)
{
    mc_transfer_engine_config_t tc = {.local_server_name = "127.0.0.1:0"};
    mc_transfer_engine_t *te;
    assert_int_equal(mc_te_create(&tc, &te), 0);
    mc_segment_id_t seg;
    assert_int_equal(mc_te_open_segment(te, d->segment_name, &seg), 0);
    unsigned char b;
    mc_transfer_req_t rd = {MC_TRANSFER_READ, &b, seg, d->address + offset, 1};
    assert_int_equal(mc_te_transfer_sync(te, &rd, 1), 0);
    b ^= 0x5a;
    mc_transfer_req_t wr = {MC_TRANSFER_WRITE, &b, seg, d->address + offset, 1};
    assert_int_equal(mc_te_transfer_sync(te, &wr, 1), 0);
    mc_te_destroy(te);
}

static void test_flipped_byte_in_memory_is_an_error_or_another_replica(void **state)
{
    (void)state;
    mc_master_t m;
    mc_holder_t h1, h2;
    assert_int_equal(mc_master_start(&m, 0, NULL), 0);
    assert_int_equal(mc_holder_start(&h1, &m, "64MB", NULL, NULL, 20000), 0);
    assert_int_equal(mc_holder_start(&h2, &m, "64MB", NULL, NULL, 20000), 0);
    mc_store_t *s = new_client(&m, 1, 0);
    mc_store_t *plain = new_client(&m, 0, 0); /* checksums off: upstream's behaviour */
    size_t size = MiB;
    char *v = malloc(size), *got = malloc(size);
    mc_payload_fill(v, size, 5);

    /* One replica, one flipped byte: an error, never the bytes. */
    assert_int_equal(mc_store_put(s, "flip/one", v, size, NULL), 0);
    mc_replica_desc_t d[4];
    size_t n;
    assert_int_equal(mc_store_get_replica_desc(s, "flip/one", d, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_true(d[0].has_checksum);
    flip_byte(&d[0], 12345);
    assert_int_equal(mc_store_get(s, "flip/one", got, size), MC_ERR_CHECKSUM_MISMATCH);
    /* The switch: without verification the flipped byte comes back (so the check is real). */
    assert_int_equal(mc_store_get(plain, "flip/one", got, size), (int64_t)size);
    assert_int_equal(mc_payload_diff(got, size, 5), 12345);

    /* Two replicas, one flipped: the other one's exact bytes. */
    mc_replicate_config_t two = MC_REPLICATE_CONFIG_INIT;
    two.replica_num = 2;
    assert_int_equal(mc_store_put(s, "flip/two", v, size, &two), 0);
    assert_int_equal(mc_store_get_replica_desc(s, "flip/two", d, 4, &n), 0);
    assert_int_equal(n, 2);
    flip_byte(&d[0], 7);
    memset(got, 0, size);
    assert_int_equal(mc_store_get(s, "flip/two", got, size), (int64_t)size);
    assert_int_equal(mc_payload_diff(got, size, 5), size);
    /* Batch and zero-copy forms verify too. */
    assert_int_equal(mc_store_register_buffer(s, got, size), 0);
    memset(got, 0, size);
    assert_int_equal(mc_store_get_into(s, "flip/two", got, size), (int64_t)size);
    assert_int_equal(mc_payload_diff(got, size, 5), size);
    flip_byte(&d[1], 99);
    const char *keys[] = {"flip/two", "flip/one"};
    void *bufs[] = {got, got};
    size_t caps[] = {size, size};
    int64_t res[2];
    assert_int_equal(mc_store_get_into_batch(s, keys, bufs, caps, 2, res),
                     MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(res[0], MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(res[1], MC_ERR_CHECKSUM_MISMATCH);
    /* Each mismatch is counted and reaches the master's metrics with the next ping. */
    uint64_t deadline = now_ms() + 10000;
    long long seen;
    while ((seen = mc_master_metric(&m, "master_checksum_mismatches_total")) < 5) {
        assert_true(now_ms() < deadline);
        usleep(100000);
    }
    assert_int_equal(mc_store_unregister_buffer(s, got), 0);

    mc_store_free(plain);
    mc_store_free(s);
    free(v);
    free(got);
    mc_cluster_kill_all();
}

/* ---- a disk replica whose file is wrong but self-consistent ---------------------------------- */

static char found_file[PATH_MAX];

static int find_object_file(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    if (type == FTW_F && path[f->base] != '.' && strstr(path, "disk%2Fk")) {
        snprintf(found_file, sizeof(found_file), "%s", path);
        return 1;
    }
    return 0;
}

/*
 * Rewrites the object file at `path` with one value byte flipped and its header re-encoded with
 * the CRC of the changed value: the file verifies on its own, as a file written from corrupted
 * memory (or staged over by another object) would.
 */
static void corrupt_consistently(const char *path)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    unsigned char *f = malloc((size_t)st.st_size);
    assert_int_equal(pread(fd, f, (size_t)st.st_size, 0), st.st_size);
    mc_obj_header_t h;
    assert_int_equal(mc_obj_header_decode(f, (size_t)st.st_size, &h), 0);
    char key[MC_OBJ_HEADER_MAX];
    memcpy(key, h.key, h.key_len);
    unsigned char *value = f + h.header_len;
    value[h.value_size / 2] ^= 0x01;
    mc_obj_header_encode(f, key, h.key_len, h.value_size,
                         mc_crc32c(0, value, (size_t)h.value_size));
    assert_int_equal(pwrite(fd, f, h.header_len, 0), (ssize_t)h.header_len);
    assert_int_equal(pwrite(fd, value + h.value_size / 2, 1, h.header_len + h.value_size / 2), 1);
    close(fd);
    free(f);
}

static void test_disk_replica_is_verified_end_to_end(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc-integrity-XXXXXX", env_path[PATH_MAX + 64];
    assert_non_null(mkdtemp(dir));
    snprintf(env_path, sizeof(env_path), "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH=%s", dir);
    const char *const env[] = {env_path, "MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=1", NULL};
    const char *const flags[] = {"--enable_offload=true", NULL};
    mc_master_t m;
    mc_holder_t h;
    assert_int_equal(mc_master_start(&m, 1, NULL), 0);
    assert_int_equal(mc_holder_start(&h, &m, "64MB", flags, env, 20000), 0);
    mc_store_t *s = new_client(&m, 1, 0);
    size_t size = MiB;
    char *v = malloc(size), *got = malloc(size);
    mc_payload_fill(v, size, 7);
    assert_int_equal(mc_store_put(s, "disk/k", v, size, NULL), 0);
    /* Wait for the offload: a memory and a LOCAL_DISK replica. */
    mc_replica_desc_t d[4];
    size_t n = 0;
    uint64_t deadline = now_ms() + 30000;
    for (;;) {
        assert_int_equal(mc_store_get_replica_desc(s, "disk/k", d, 4, &n), 0);
        if (n == 2)
            break;
        assert_true(now_ms() < deadline);
        usleep(50000);
    }
    assert_int_equal(d[0].type, MC_REPLICA_MEMORY);
    assert_int_equal(d[1].type, MC_REPLICA_LOCAL_DISK);
    assert_true(d[1].has_checksum && d[1].checksum == d[0].checksum);
    /* The memory replica goes bad: the disk replica (read through its owner) serves the value. */
    flip_byte(&d[0], 4321);
    memset(got, 0, size);
    assert_int_equal(mc_store_get(s, "disk/k", got, size), (int64_t)size);
    assert_int_equal(mc_payload_diff(got, size, 7), size);
    /* The file goes bad too, in a way only the end-to-end checksum can see: an error. */
    found_file[0] = '\0';
    assert_int_equal(nftw(dir, find_object_file, 16, FTW_PHYS), 1);
    corrupt_consistently(found_file);
    assert_int_equal(mc_store_get(s, "disk/k", got, size), MC_ERR_CHECKSUM_MISMATCH);
    mc_store_free(s);
    free(v);
    free(got);
    mc_cluster_kill_all();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the holder expired and re-mounted while a reader was inside its lease --------------------
 */

static void expired_holder_case(int checksum)
{
    mc_master_t m;
    mc_holder_t h;
    const char *const flags[] = {"--client_ttl=2", "--default_kv_lease_ttl=8s", NULL};
    assert_int_equal(mc_master_start(&m, 0, flags), 0);
    assert_int_equal(mc_holder_start(&h, &m, "64MB", NULL, NULL, 20000), 0);
    mc_store_t *s = new_client(&m, 1, 0);
    size_t size = 4 * MiB;
    char *v = malloc(size);
    mc_payload_fill(v, size, 1);
    assert_int_equal(mc_store_put(s, "expiry/a", v, size, NULL), 0);
    mc_replica_desc_t old_d[2], new_d[2];
    size_t nd = 0;
    assert_int_equal(mc_store_get_replica_desc(s, "expiry/a", old_d, 2, &nd), 0);
    assert_int_equal(nd, 1);

    /* A reader that has its replica list (and lease) and is about to copy. */
    mc_proc_t r;
    const char *const env_on[] = {"MC_FAILPOINTS=get.after_lookup=stop:1", NULL};
    const char *const env_off[] = {"MC_FAILPOINTS=get.after_lookup=stop:1", "MC_STORE_CHECKSUM=0",
                                   NULL};
    rw_start(&r, &m, checksum ? env_on : env_off);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "get expiry/a %zu 1\n", size);
    rw_send(&r, cmd);
    wait_stopped(r.pid);

    /* The holder goes silent until the master expires it (its objects are dropped). */
    assert_int_equal(mc_proc_freeze(h.proc.pid, 5000), 0);
    uint64_t deadline = now_ms() + 30000;
    while (mc_store_exist(s, "expiry/a") != 0) {
        assert_true(now_ms() < deadline);
        usleep(50000);
    }
    assert_int_equal(mc_proc_thaw(h.proc.pid), 0);
    /* It re-mounts; a new object lands where the old one was. A put placed in the instant
     * between the master's mount and the holder's own epoch change is refused (stale epoch) and
     * its extent stays fenced for a while, so the next lands elsewhere: new keys are put until
     * one takes the old extent. */
    mc_payload_fill(v, size, 2);
    for (int k = 0;; k++) {
        char key[32];
        snprintf(key, sizeof(key), "expiry/b%d", k);
        while (mc_store_put(s, key, v, size, NULL) != 0) {
            assert_true(now_ms() < deadline);
            usleep(50000);
        }
        assert_int_equal(mc_store_get_replica_desc(s, key, new_d, 2, &nd), 0);
        assert_int_equal(nd, 1);
        if (new_d[0].address == old_d[0].address)
            break;
        print_message("  %s landed at %#llx, not the old extent; another put\n", key,
                      (unsigned long long)new_d[0].address);
        assert_true(now_ms() < deadline);
    }
    /* The same extent of the same segment, in the segment's new mount epoch: otherwise the old
     * reader's copy could not see the new object's bytes and this proves nothing. */
    assert_string_equal(new_d[0].segment_name, old_d[0].segment_name);
    assert_int_equal(new_d[0].address, old_d[0].address);
    assert_true(new_d[0].epoch != old_d[0].epoch);
    /* The reader goes on: the old object's exact bytes, or an error. */
    assert_int_equal(kill(r.pid, SIGCONT), 0);
    char line[256];
    rw_read_line(&r, line, sizeof(line), 30000);
    print_message("reader after holder expiry (checksums %s): %s\n", checksum ? "on" : "off", line);
    long long got;
    char verdict[64];
    assert_int_equal(sscanf(line, "GET %lld %63s", &got, verdict), 2);
    assert_true(got < 0 || strcmp(verdict, "exact") == 0);
    rw_finish(&r);
    mc_store_free(s);
    free(v);
    mc_cluster_kill_all();
}

static void test_expired_holder_never_serves_a_new_object_to_an_old_reader(void **state)
{
    (void)state;
    expired_holder_case(0); /* the root fix alone (fenced re-mount, lease check) */
    expired_holder_case(1);
}

/* ---- lease 0: remove + put racing gets --------------------------------------------------------
 */

typedef struct race {
    mc_store_t *s;
    size_t size;
    atomic_int stop;
    uint64_t puts, reads, exact, torn, errors;
} race_t;

/* A value of generation g: its first 8 bytes say g, the rest is payload g. */
static void gen_fill(char *buf, size_t size, uint64_t g)
{
    memcpy(buf, &g, 8);
    mc_payload_fill(buf + 8, size - 8, g);
}

static void *race_writer(void *arg)
{
    race_t *r = arg;
    char *v = malloc(r->size);
    for (uint64_t g = 1; !atomic_load(&r->stop); g++) {
        gen_fill(v, r->size, g);
        mc_store_remove(r->s, "race/k", 1);
        if (mc_store_put(r->s, "race/k", v, r->size, NULL) == 0)
            r->puts++;
    }
    free(v);
    return NULL;
}

static void test_lease_zero_never_returns_torn_values(void **state)
{
    (void)state;
    mc_master_t m;
    mc_holder_t h;
    const char *const flags[] = {"--default_kv_lease_ttl=0", NULL};
    assert_int_equal(mc_master_start(&m, 0, flags), 0);
    assert_int_equal(mc_holder_start(&h, &m, "128MB", NULL, NULL, 20000), 0);
    race_t r = {.s = new_client(&m, 1, 0), .size = 8 * MiB};
    pthread_t w;
    assert_int_equal(pthread_create(&w, NULL, race_writer, &r), 0);
    char *buf = malloc(r.size);
    uint64_t end = now_ms() + 4000;
    while (now_ms() < end || r.exact < 20) {
        assert_true(now_ms() < end + 30000);
        int64_t got = mc_store_get(r.s, "race/k", buf, r.size);
        r.reads++;
        if (got < 0) {
            r.errors++;
            continue;
        }
        uint64_t g;
        memcpy(&g, buf, 8);
        if ((size_t)got == r.size && mc_payload_diff(buf + 8, r.size - 8, g) == r.size - 8)
            r.exact++;
        else
            r.torn++;
    }
    atomic_store(&r.stop, 1);
    pthread_join(w, NULL);
    print_message("lease 0: %llu puts, %llu gets: %llu exact, %llu errors, %llu torn\n",
                  (unsigned long long)r.puts, (unsigned long long)r.reads,
                  (unsigned long long)r.exact, (unsigned long long)r.errors,
                  (unsigned long long)r.torn);
    assert_int_equal(r.torn, 0);
    assert_true(r.exact > 0);
    mc_store_free(r.s);
    free(buf);
    mc_cluster_kill_all();
}

/* ---- a put of a key whose other put is in progress ------------------------------------------ */

typedef struct put_arg {
    mc_store_t *s;
    size_t size;
    int rc;
} put_arg_t;

static void *busy_put(void *arg)
{
    put_arg_t *a = arg;
    char *v = malloc(a->size);
    mc_payload_fill(v, a->size, 2);
    a->rc = mc_store_put(a->s, "busy/k", v, a->size, NULL);
    free(v);
    return NULL;
}

static void test_put_is_not_acknowledged_while_another_put_of_the_key_may_fail(void **state)
{
    (void)state;
    mc_master_t m;
    mc_holder_t h;
    /* Short enough that the stopped writer expires while the second put may still wait for it;
     * long enough that the holder's pings, late under a CPU hog, keep it (2 s expired it). */
    const char *const flags[] = {"--client_ttl=5", NULL};
    assert_int_equal(mc_master_start(&m, 0, flags), 0);
    assert_int_equal(mc_holder_start(&h, &m, "64MB", NULL, NULL, 20000), 0);
    /* A writer whose put started (PROCESSING) and then stopped. */
    mc_proc_t w;
    const char *const env[] = {"MC_FAILPOINTS=put.after_start=stop:1", NULL};
    rw_start(&w, &m, env);
    size_t size = MiB;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "put busy/k %zu 1\n", size);
    rw_send(&w, cmd);
    wait_stopped(w.pid);

    put_arg_t a = {.s = new_client(&m, 1, 0), .size = size};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, busy_put, &a), 0);
    /* The first writer dies: its put is revoked when the master expires it. */
    assert_int_equal(kill(w.pid, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(w.pid, &st, 0), w.pid);
    mc_cluster_untrack(w.pid);
    close(w.stdin_fd);
    close(w.stdout_fd);
    pthread_join(t, NULL);
    print_message("second put of a key whose first put was in progress: %d\n", a.rc);
    /* A put that returned 0 left the key readable with its own value. */
    if (a.rc == 0) {
        char *got = malloc(size);
        assert_int_equal(mc_store_get(a.s, "busy/k", got, size), (int64_t)size);
        assert_int_equal(mc_payload_diff(got, size, 2), size);
        free(got);
    } else {
        assert_int_equal(a.rc, MC_ERR_REPLICA_IS_NOT_READY);
    }
    mc_store_free(a.s);
    mc_cluster_kill_all();
}

/* ---- leases judged per key in a batch ------------------------------------------------------- */

static void test_batch_judges_each_keys_lease_alone(void **state)
{
    (void)state;
    mc_master_t m;
    mc_holder_t h1, h2;
    const char *const flags[] = {"--default_kv_lease_ttl=1s", NULL};
    const char *const no_shm[] = {"MC_DISABLE_SHM=1", NULL};
    assert_int_equal(mc_master_start(&m, 0, flags), 0);
    assert_int_equal(mc_holder_start(&h1, &m, "64MB", NULL, no_shm, 20000), 0);
    assert_int_equal(mc_holder_start(&h2, &m, "64MB", NULL, no_shm, 20000), 0);
    /* tcp (a stopped holder's shared memory would still be readable), 2 s transfer timeout. */
    setenv("MC_TRANSFER_TIMEOUT", "2", 1);
    mc_store_t *s = new_client(&m, 1, 1);
    unsetenv("MC_TRANSFER_TIMEOUT");
    size_t size = 4096;
    char *v = malloc(size), *g1 = malloc(size), *g2 = malloc(size);
    mc_replicate_config_t on1 = MC_REPLICATE_CONFIG_INIT, on2 = MC_REPLICATE_CONFIG_INIT;
    on1.preferred_segment = h1.segment;
    on2.preferred_segment = h2.segment;
    mc_payload_fill(v, size, 3);
    assert_int_equal(mc_test_put_retry(s, "batch/quick", v, size, &on1, 30000), 0);
    mc_payload_fill(v, size, 4);
    assert_int_equal(mc_test_put_retry(s, "batch/stalled", v, size, &on2, 30000), 0);
    /* The second key's holder stalls: its read fails after the 2 s transfer timeout, so the
     * batch as a whole outlives the 1 s lease; the first key's read took milliseconds. */
    assert_int_equal(mc_proc_freeze(h2.proc.pid, 5000), 0);
    const char *keys[] = {"batch/quick", "batch/stalled"};
    void *bufs[] = {g1, g2};
    size_t caps[] = {size, size};
    int64_t res[2];
    uint64_t t = now_ms();
    mc_store_get_batch(s, keys, bufs, caps, 2, res);
    t = now_ms() - t;
    assert_int_equal(mc_proc_thaw(h2.proc.pid), 0);
    print_message("batch [quick key, key on a stopped holder] with a 1 s lease took %llu ms: "
                  "%lld, %lld\n",
                  (unsigned long long)t, (long long)res[0], (long long)res[1]);
    assert_true(t > 1000);
    assert_int_equal(res[0], (int64_t)size);
    assert_int_equal(mc_payload_diff(g1, size, 3), size);
    assert_true(res[1] < 0);
    mc_store_free(s);
    free(v);
    free(g1);
    free(g2);
    mc_cluster_kill_all();
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
        cmocka_unit_test_teardown(test_flipped_byte_in_memory_is_an_error_or_another_replica,
                                  teardown),
        cmocka_unit_test_teardown(test_disk_replica_is_verified_end_to_end, teardown),
        cmocka_unit_test_teardown(test_expired_holder_never_serves_a_new_object_to_an_old_reader,
                                  teardown),
        cmocka_unit_test_teardown(test_lease_zero_never_returns_torn_values, teardown),
        cmocka_unit_test_teardown(
            test_put_is_not_acknowledged_while_another_put_of_the_key_may_fail, teardown),
        cmocka_unit_test_teardown(test_batch_judges_each_keys_lease_alone, teardown),
    };
    atexit(mc_cluster_kill_all);
    return cmocka_run_group_tests_name("integrity", tests, NULL, NULL);
}
