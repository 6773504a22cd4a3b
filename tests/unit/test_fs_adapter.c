/*
 * test_fs_adapter.c — the FS adapter interface (include/mooncake/fs_adapter.h) proven on one
 * adapter. Compiled twice: with MC_TEST_FS_TYPE="posix" (test_fs_adapter_posix, a scratch
 * directory) and MC_TEST_FS_TYPE="daos" (test_fs_adapter_daos, built with -DUSE_DAOS=ON).
 *
 * The daos binary runs against the libdfs test double by default: a scratch "mount" directory
 * carries the user.daos attribute naming pool/cont, and the container's files live under
 * $DFS_DOUBLE_ROOT/pool/cont. On a machine with DAOS, built without the double, point it at a
 * real dfuse path and the same suite runs on real DAOS (tests that need the double's fault
 * injection or internals are skipped):
 *     MC_TEST_DFS_PATH=/mnt/mass/mooncake ctest -R test_fs_adapter_daos
 *
 * Common suite: round trips at sizes 0, 1, 4095, 4096 and 8 MiB+1 under several transfer splits
 * and iovcnt values; overwrite; missing keys; keys with '/', leading dots and long (hashed) keys;
 * wrong size; corruption of value or header, truncation and a file under another key's name;
 * atomic publish under concurrent readers; remove; list (restart recovery) skipping junk and
 * temporaries; the health check; unusable roots; bad configs; many threads.
 * DAOS suite: path resolution (the user.daos xattr only: no marker file, ENOTSUP without
 * xattrs; missing parts created inside the container, bytes not written through the mount),
 * missing container, chunk size and object class at create, DAOS's class names only, injected
 * faults mapped to store codes with no temporary left behind, asynchronous event queues, one
 * connection per process, the double's relaxed (non-atomic) dfs_move step by step, and the
 * adapter against it: concurrent writers of a key all succeed and the last rename wins, readers
 * see a whole version or a miss.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/errors.h"
#include "mooncake/fs_adapter.h"
#include "object_layout.h"

#ifndef MC_TEST_FS_TYPE
#define MC_TEST_FS_TYPE "posix"
#endif
#ifdef MC_TEST_WITH_DFS_DOUBLE
#include <daos.h>
#include <daos_fs.h>
#include <daos_uns.h>

#include "dfs_double.h"
#endif

#define MiB (UINT64_C(1) << 20)
#define ROOT_MAX 1280 /* a root_dir or its visible directory */
#define PATH_BUF 2048 /* a path below one */
#define POOL "testpool"
#define CONT "testcont"

static struct {
    int daos;           /* MC_TEST_FS_TYPE is "daos" */
    int real_daos;      /* MC_TEST_DFS_PATH given: no test double */
    char tmp[64];       /* scratch directory, removed at the end */
    char mount[1024];   /* root_dir parent as users give it (daos: the "dfuse mount") */
    char backing[1024]; /* where the mount's content is visible as local files */
    int seq;
} S;

/* ---- helpers ------------------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void rm_rf(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    }
    mkdir(buf, 0755);
}

static void skip_without_double(void)
{
#ifndef MC_TEST_WITH_DFS_DOUBLE
    skip();
#endif
    if (S.real_daos)
        skip();
}

/* A fresh root: root_dir (as the user names it) and where its files are visible locally. */
static void new_root(char *root_dir, char *visible)
{
    int n = S.seq++;
    snprintf(root_dir, ROOT_MAX, "%s/r%d", S.mount, n);
    snprintf(visible, ROOT_MAX, "%s/r%d", S.backing, n);
}

static mc_fs_config_t base_config(const char *root_dir)
{
    mc_fs_config_t cfg;
    mc_fs_config_init(&cfg);
    cfg.fs_type = MC_TEST_FS_TYPE;
    cfg.root_dir = root_dir;
    cfg.io_threads = 4;
    return cfg;
}

static mc_fs_adapter_t *open_ok(const mc_fs_config_t *cfg)
{
    mc_fs_adapter_t *a = NULL;
    int rc = mc_fs_adapter_open(cfg, &a);
    if (rc != 0)
        fail_msg("mc_fs_adapter_open(%s, %s) = %d (%s)", cfg->fs_type, cfg->root_dir, rc,
                 mc_error_name(rc));
    return a;
}

/* Opens a default adapter on a fresh root. */
static mc_fs_adapter_t *open_fresh(char *root_dir, char *visible)
{
    new_root(root_dir, visible);
    mc_fs_config_t cfg = base_config(root_dir);
    return open_ok(&cfg);
}

static void fill(unsigned char *buf, uint64_t size, unsigned seed)
{
    for (uint64_t i = 0; i < size; i++)
        buf[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}

static void check_filled(const unsigned char *buf, uint64_t size, unsigned seed)
{
    for (uint64_t i = 0; i < size; i++)
        if (buf[i] != (unsigned char)(seed * 131u + i * 7u + (i >> 9)))
            fail_msg("byte %llu differs", (unsigned long long)i);
}

/* Writes `size` patterned bytes under key, reads them back exactly and checks them. */
static void round_trip(mc_fs_adapter_t *a, const char *key, uint64_t size, unsigned seed)
{
    unsigned char *in = malloc(size + 1), *out = malloc(size + 1);
    assert_non_null(in);
    assert_non_null(out);
    fill(in, size, seed);
    assert_int_equal(mc_fs_write(a, key, in, size), 0);
    uint64_t got = 12345;
    assert_int_equal(mc_fs_stat(a, key, &got), 0);
    assert_int_equal(got, size);
    memset(out, 0xEE, size + 1);
    assert_int_equal(mc_fs_read(a, key, out, size), 0);
    check_filled(out, size, seed);
    assert_int_equal(out[size], 0xEE); /* nothing past the value */
    free(in);
    free(out);
}

/* The local file of `key` under a root visible at `visible`. */
static void object_file(const char *visible, const char *key, char *path)
{
    char name[MC_OBJ_NAME_MAX], dir[8];
    mc_obj_escape_key(key, strlen(key), name, sizeof(name));
    mc_obj_dir_name(mc_obj_dir_index(key, strlen(key)), dir);
    snprintf(path, PATH_BUF, "%s/%s/%s", visible, dir, name);
}

/* Number of entries whose name starts with '.' in every hash dir of a root. */
static int count_temporaries(const char *visible)
{
    int count = 0;
    for (unsigned d = 0; d <= MC_OBJ_PROBE_DIR; d++) {
        char dname[8], path[PATH_BUF];
        mc_obj_dir_name(d, dname);
        snprintf(path, sizeof(path), "%s/%s", visible, dname);
        DIR *dir = opendir(path);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL)
            if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                count++;
        closedir(dir);
    }
    return count;
}

static void xor_byte_at(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

/* ---- setup -------------------------------------------------------------------------------- */

static int setup_group(void **state)
{
    S.daos = !strcmp(MC_TEST_FS_TYPE, "daos");
    snprintf(S.tmp, sizeof(S.tmp), "/tmp/mc_fs_test.XXXXXX");
    if (!mkdtemp(S.tmp))
        return -1;
    const char *real = getenv("MC_TEST_DFS_PATH");
    if (S.daos && real && *real) {
        S.real_daos = 1;
        snprintf(S.mount, sizeof(S.mount), "%s/mc_fs_test.%d", real, (int)getpid());
        snprintf(S.backing, sizeof(S.backing), "%s", S.mount);
        mkdir_p(S.mount);
    } else if (S.daos) {
        char store[128], cont[256];
        snprintf(store, sizeof(store), "%s/store", S.tmp);
        setenv("DFS_DOUBLE_ROOT", store, 1);
        snprintf(cont, sizeof(cont), "%s/" POOL "/" CONT, store);
        mkdir_p(cont);
        snprintf(S.backing, sizeof(S.backing), "%s", cont);
        snprintf(S.mount, sizeof(S.mount), "%s/mnt", S.tmp);
        mkdir_p(S.mount);
        const char *v = "DAOS.POSIX://" POOL "/" CONT;
        if (setxattr(S.mount, "user.daos", v, strlen(v), 0) != 0) {
            /* As with DAOS, a mount point is a directory carrying the user.daos xattr. */
            fprintf(stderr, "setxattr(%s, user.daos): %s: the daos suite needs user xattrs\n",
                    S.mount, strerror(errno));
            return -1;
        }
    } else {
        snprintf(S.mount, sizeof(S.mount), "%s", S.tmp);
        snprintf(S.backing, sizeof(S.backing), "%s", S.tmp);
    }
    return 0;
}

static int teardown_group(void **state)
{
    if (S.real_daos)
        rm_rf(S.mount);
    rm_rf(S.tmp);
    return 0;
}

/* ---- common suite ------------------------------------------------------------------------- */

static void test_round_trip_sizes_and_splits(void **state)
{
    static const struct {
        uint64_t wx, rx;
        unsigned iovcnt;
    } shapes[] = {
        {0, 0, 1},           {4096, 4096, 1},  {1 * MiB, 3 * MiB + 7, 4},
        {65536, 8 * MiB, 7}, {0, 8 * MiB, 16},
    };
    static const uint64_t sizes[] = {0, 1, 4095, 4096, 8 * MiB + 1};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        char root[ROOT_MAX], visible[ROOT_MAX];
        new_root(root, visible);
        mc_fs_config_t cfg = base_config(root);
        cfg.write_xfer_size = shapes[s].wx;
        cfg.read_xfer_size = shapes[s].rx;
        cfg.iovcnt = shapes[s].iovcnt;
        mc_fs_adapter_t *a = open_ok(&cfg);
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            char key[64];
            snprintf(key, sizeof(key), "shape%zu/size%llu", s, (unsigned long long)sizes[z]);
            round_trip(a, key, sizes[z], (unsigned)(s * 10 + z));
            /* The file is header + value, nothing more. */
            char path[PATH_BUF];
            object_file(visible, key, path);
            struct stat st;
            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(st.st_size,
                             (off_t)(mc_obj_header_len(strlen(key), sizes[z]) + sizes[z]));
        }
        assert_int_equal(count_temporaries(visible), 0);
        mc_fs_adapter_close(a);
    }
}

static void test_overwrite_replaces_the_object(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    round_trip(a, "k", 100000, 1);
    round_trip(a, "k", 5000, 2);
    uint64_t size;
    assert_int_equal(mc_fs_stat(a, "k", &size), 0);
    assert_int_equal(size, 5000);
    mc_fs_adapter_close(a);
}

static void test_missing_key_is_file_not_found(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    char buf[16];
    uint64_t size;
    assert_int_equal(mc_fs_read(a, "nope", buf, sizeof(buf)), MC_ERR_FILE_NOT_FOUND);
    assert_int_equal(mc_fs_stat(a, "nope", &size), MC_ERR_FILE_NOT_FOUND);
    assert_int_equal(mc_fs_remove(a, "nope"), MC_ERR_FILE_NOT_FOUND);
    mc_fs_adapter_close(a);
}

static void test_keys_with_slashes_dots_and_long_keys(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    static char long_key[MC_FS_KEY_MAX + 1];
    memset(long_key, 'L', MC_FS_KEY_MAX);
    char mid_key[400];
    memset(mid_key, '/', sizeof(mid_key) - 1);
    mid_key[sizeof(mid_key) - 1] = '\0';
    char bytes_key[256];
    for (int c = 1; c < 256; c++)
        bytes_key[c - 1] = (char)c;
    bytes_key[255] = '\0';
    const char *keys[] = {"/",      "a/b/c",           ".",
                          "..",     ".hidden",         "%2F",
                          "~tilde", "key with spaces", "vllm@layer.0/kv:17",
                          long_key, mid_key,           bytes_key};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        round_trip(a, keys[i], 333 + i, (unsigned)i);
    /* Each key has its own object. */
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        uint64_t size;
        assert_int_equal(mc_fs_stat(a, keys[i], &size), 0);
        assert_int_equal(size, 333 + i);
    }
    mc_fs_adapter_close(a);
}

static void test_invalid_arguments_are_refused(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    char buf[8];
    assert_int_equal(mc_fs_write(a, "", buf, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_fs_write(a, NULL, buf, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_fs_write(a, "k", NULL, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_fs_read(a, "k", NULL, 1), MC_ERR_INVALID_PARAMS);
    char *too_long = malloc(MC_FS_KEY_MAX + 2);
    memset(too_long, 'x', MC_FS_KEY_MAX + 1);
    too_long[MC_FS_KEY_MAX + 1] = '\0';
    assert_int_equal(mc_fs_write(a, too_long, buf, 1), MC_ERR_INVALID_PARAMS);
    free(too_long);
    assert_int_equal(mc_fs_write(a, "k", NULL, 0), 0); /* empty value, no buffer */
    assert_int_equal(mc_fs_read(a, "k", NULL, 0), 0);
    mc_fs_adapter_close(a);
}

static void test_wrong_size_is_invalid_buffer(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    round_trip(a, "sized", 1000, 3);
    unsigned char buf[2000];
    assert_int_equal(mc_fs_read(a, "sized", buf, 999), MC_ERR_FILE_INVALID_BUFFER);
    assert_int_equal(mc_fs_read(a, "sized", buf, 1001), MC_ERR_FILE_INVALID_BUFFER);
    assert_int_equal(mc_fs_read(a, "sized", buf, 0), MC_ERR_FILE_INVALID_BUFFER);
    mc_fs_adapter_close(a);
}

static void test_corrupt_value_is_checksum_mismatch(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX], path[PATH_BUF];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    round_trip(a, "victim", 65536, 4);
    object_file(visible, "victim", path);
    xor_byte_at(path, (off_t)mc_obj_header_len(6, 65536) + 40000);
    unsigned char *buf = malloc(65536);
    assert_int_equal(mc_fs_read(a, "victim", buf, 65536), MC_ERR_CHECKSUM_MISMATCH);
    free(buf);
    mc_fs_adapter_close(a);
}

static void test_corrupt_header_is_checksum_mismatch(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX], path[PATH_BUF];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    const off_t offsets[] = {0, 9, 17, 29, 33, 41};
    for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
        round_trip(a, "hdr", 100, 5);
        object_file(visible, "hdr", path);
        xor_byte_at(path, offsets[i]);
        unsigned char buf[100];
        uint64_t size;
        assert_int_equal(mc_fs_read(a, "hdr", buf, 100), MC_ERR_CHECKSUM_MISMATCH);
        assert_int_equal(mc_fs_stat(a, "hdr", &size), MC_ERR_CHECKSUM_MISMATCH);
    }
    mc_fs_adapter_close(a);
}

static void test_truncated_object_is_read_fail(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX], path[PATH_BUF];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    round_trip(a, "short", 10000, 6);
    object_file(visible, "short", path);
    assert_int_equal(truncate(path, (off_t)mc_obj_header_len(5, 10000) + 5000), 0);
    unsigned char buf[10000];
    assert_int_equal(mc_fs_read(a, "short", buf, 10000), MC_ERR_FILE_READ_FAIL);
    assert_int_equal(truncate(path, 20), 0);
    assert_int_equal(mc_fs_read(a, "short", buf, 10000), MC_ERR_FILE_READ_FAIL);
    mc_fs_adapter_close(a);
}

static void test_object_under_another_keys_name_is_checksum_mismatch(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    char pa[PATH_BUF], pb[PATH_BUF];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    round_trip(a, "keyA", 500, 7);
    round_trip(a, "keyB", 500, 8);
    object_file(visible, "keyA", pa);
    object_file(visible, "keyB", pb);
    assert_int_equal(rename(pa, pb), 0);
    unsigned char buf[500];
    assert_int_equal(mc_fs_read(a, "keyB", buf, 500), MC_ERR_CHECKSUM_MISMATCH);
    mc_fs_adapter_close(a);
}

/* ---- atomic publish ----------------------------------------------------------------------- */

#define PUBLISH_SIZE (MiB + 3)
#define PUBLISH_VERSIONS 40

typedef struct publish_ctx {
    mc_fs_adapter_t *a;
    volatile int done;
    int bad, seen_absent, seen_complete;
} publish_ctx_t;

static void *publish_writer(void *arg)
{
    publish_ctx_t *c = arg;
    unsigned char *buf = malloc(PUBLISH_SIZE);
    for (int v = 1; v <= PUBLISH_VERSIONS; v++) {
        memset(buf, v, PUBLISH_SIZE);
        if (mc_fs_write(c->a, "published", buf, PUBLISH_SIZE) != 0)
            __atomic_add_fetch(&c->bad, 1, __ATOMIC_SEQ_CST);
    }
    free(buf);
    __atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void *publish_reader(void *arg)
{
    publish_ctx_t *c = arg;
    unsigned char *buf = malloc(PUBLISH_SIZE);
    while (!__atomic_load_n(&c->done, __ATOMIC_SEQ_CST)) {
        int rc = mc_fs_read(c->a, "published", buf, PUBLISH_SIZE);
        if (rc == MC_ERR_FILE_NOT_FOUND) {
            __atomic_add_fetch(&c->seen_absent, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        int uniform = rc == 0;
        for (size_t i = 1; uniform && i < PUBLISH_SIZE; i++)
            uniform = buf[i] == buf[0];
        if (!uniform)
            __atomic_add_fetch(&c->bad, 1, __ATOMIC_SEQ_CST);
        else
            __atomic_add_fetch(&c->seen_complete, 1, __ATOMIC_SEQ_CST);
    }
    free(buf);
    return NULL;
}

static void test_reader_never_sees_a_partial_object(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.write_xfer_size = 65536; /* many transfers: a long window for a partial file */
    cfg.read_xfer_size = 65536;
    publish_ctx_t c = {.a = open_ok(&cfg)};
    pthread_t w, r[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&r[i], NULL, publish_reader, &c);
    pthread_create(&w, NULL, publish_writer, &c);
    pthread_join(w, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(r[i], NULL);
    assert_int_equal(c.bad, 0);
    assert_true(c.seen_complete + c.seen_absent > 0);
    unsigned char *buf = malloc(PUBLISH_SIZE);
    assert_int_equal(mc_fs_read(c.a, "published", buf, PUBLISH_SIZE), 0);
    assert_int_equal(buf[0], PUBLISH_VERSIONS);
    free(buf);
    assert_int_equal(count_temporaries(visible), 0);
    mc_fs_adapter_close(c.a);
}

static void test_remove_then_read_is_not_found(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX], path[PATH_BUF];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    round_trip(a, "gone", 4096, 9);
    assert_int_equal(mc_fs_remove(a, "gone"), 0);
    unsigned char buf[4096];
    assert_int_equal(mc_fs_read(a, "gone", buf, 4096), MC_ERR_FILE_NOT_FOUND);
    assert_int_equal(mc_fs_remove(a, "gone"), MC_ERR_FILE_NOT_FOUND);
    object_file(visible, "gone", path);
    assert_int_equal(access(path, F_OK), -1);
    mc_fs_adapter_close(a);
}

/* ---- list --------------------------------------------------------------------------------- */

#define LIST_KEYS 300

typedef struct list_seen {
    int count[LIST_KEYS];
    int unknown;
    int total;
} list_seen_t;

static void list_key(int i, char *key, size_t cap)
{
    if (i % 50 == 7) { /* long: hashed name, key from the header */
        memset(key, 'h', 600);
        snprintf(key + 600, cap - 600, "-%d", i);
    } else {
        snprintf(key, cap, "%s/list-%d", i % 3 ? "ns" : ".dot", i);
    }
}

static int list_cb(const char *key, uint64_t size, void *arg)
{
    list_seen_t *seen = arg;
    char want[700];
    seen->total++;
    for (int i = 0; i < LIST_KEYS; i++) {
        list_key(i, want, sizeof(want));
        if (!strcmp(want, key)) {
            seen->count[i]++;
            if (size != (uint64_t)i * 3)
                seen->unknown++;
            return 0;
        }
    }
    seen->unknown++;
    return 0;
}

static void test_list_reports_every_object_once(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    unsigned char buf[LIST_KEYS * 3];
    memset(buf, 1, sizeof(buf));
    char key[700];
    for (int i = 0; i < LIST_KEYS; i++) {
        list_key(i, key, sizeof(key));
        assert_int_equal(mc_fs_write(a, key, buf, (uint64_t)i * 3), 0);
    }
    /* Junk the listing must skip: a temporary, a foreign file, a file that is not an object. */
    char path[PATH_BUF];
    snprintf(path, sizeof(path), "%s/00/.t00000000000000000000beef", visible);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/01/not%%20escaped", visible);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("junk", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/02/plain", visible);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("no header here, but long enough to be read as one.....", f);
    fclose(f);

    /* Restart recovery: a new adapter on the same root finds everything. */
    mc_fs_adapter_close(a);
    mc_fs_config_t cfg = base_config(root);
    a = open_ok(&cfg);
    list_seen_t seen = {0};
    assert_int_equal(mc_fs_list(a, list_cb, &seen), 0);
    assert_int_equal(seen.unknown, 0);
    assert_int_equal(seen.total, LIST_KEYS);
    for (int i = 0; i < LIST_KEYS; i++)
        assert_int_equal(seen.count[i], 1);
    mc_fs_adapter_close(a);
}

static int stop_after_one(const char *key, uint64_t size, void *arg)
{
    (*(int *)arg)++;
    return 42;
}

static void test_list_stops_when_the_callback_says_so(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    round_trip(a, "one", 1, 1);
    round_trip(a, "two", 2, 2);
    int calls = 0;
    assert_int_equal(mc_fs_list(a, stop_after_one, &calls), 42);
    assert_int_equal(calls, 1);
    mc_fs_adapter_close(a);
}

/* ---- health, roots, configs --------------------------------------------------------------- */

static void test_health_check_passes_and_leaves_nothing(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX], probe[PATH_BUF];
    mc_fs_adapter_t *a = open_fresh(root, visible);
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_fs_health_check(a), 0);
    snprintf(probe, sizeof(probe), "%s/.probe", visible);
    DIR *d = opendir(probe);
    assert_non_null(d);
    struct dirent *e;
    int entries = 0;
    while ((e = readdir(d)) != NULL)
        entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    assert_int_equal(entries, 0);
    mc_fs_adapter_close(a);
}

static void test_root_under_a_regular_file_fails_at_open(void **state)
{
    char file[ROOT_MAX], root[PATH_BUF];
    /* A regular file where the root's parent directory should be. */
    snprintf(file, sizeof(file), "%s/plainfile", S.tmp);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(root, sizeof(root), "%s/root", file);
    mc_fs_config_t cfg = base_config(root);
    mc_fs_adapter_t *a = (mc_fs_adapter_t *)1;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_FILE_OPEN_FAIL);
    assert_null(a);
    if (!S.daos)
        return;
    /* daos: a regular file inside the container on the root's path. */
    char visible_file[PATH_BUF], root2[PATH_BUF];
    snprintf(visible_file, sizeof(visible_file), "%s/infile", S.backing);
    f = fopen(visible_file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(root2, sizeof(root2), "%s/infile/root", S.mount);
    cfg.root_dir = root2;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_FILE_OPEN_FAIL);
}

static void test_bad_configs_are_refused(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_adapter_t *a = NULL;
    mc_fs_config_t cfg = base_config(root);
    cfg.fs_type = "hf3fs";
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_NOT_SUPPORTED);
    cfg.fs_type = "ext4";
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_INVALID_PARAMS);
    cfg.fs_type = NULL;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_INVALID_PARAMS);
    cfg = base_config("relative/dir");
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_INVALID_PARAMS);
    cfg = base_config(NULL);
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_INVALID_PARAMS);
    cfg = base_config(root);
    cfg.alignment = 3000;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_INVALID_PARAMS);
    cfg = base_config(root);
    cfg.iovcnt = MC_FS_IOVCNT_MAX + 1;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_INVALID_PARAMS);
    cfg = base_config(root);
    cfg.write_xfer_size = MC_FS_XFER_MAX + 1;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_fs_adapter_open(NULL, &a), MC_ERR_INVALID_PARAMS);
    assert_null(a);
    assert_true(mc_fs_type_supported("posix"));
    assert_false(mc_fs_type_supported("hf3fs"));
}

static void test_daos_type_is_refused_or_supported_as_built(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.fs_type = "daos";
    mc_fs_adapter_t *a = NULL;
    int rc = mc_fs_adapter_open(&cfg, &a);
    if (mc_fs_type_supported("daos")) {
        if (S.daos)
            assert_int_equal(rc, 0);
        mc_fs_adapter_close(a);
    } else {
        assert_int_equal(rc, MC_ERR_NOT_SUPPORTED);
        assert_null(a);
    }
}

static void test_alignment_and_type_name(void **state)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.alignment = 65536;
    mc_fs_adapter_t *a = open_ok(&cfg);
    assert_string_equal(mc_fs_adapter_type(a), MC_TEST_FS_TYPE);
    round_trip(a, "aligned", 300000, 11);
    mc_fs_adapter_close(a);
    mc_fs_adapter_close(NULL);
}

/* ---- many threads ------------------------------------------------------------------------- */

#define MT_THREADS 8
#define MT_OBJECTS 40

typedef struct mt_ctx {
    mc_fs_adapter_t *a;
    int id;
    int failures;
} mt_ctx_t;

static void *mt_worker(void *arg)
{
    mt_ctx_t *c = arg;
    unsigned char *in = malloc(300000), *out = malloc(300000);
    for (int i = 0; i < MT_OBJECTS; i++) {
        char key[64];
        snprintf(key, sizeof(key), "mt/%d/%d", c->id, i);
        uint64_t size = (uint64_t)((c->id * 7919 + i * 104729) % 300000);
        fill(in, size, (unsigned)(c->id * 100 + i));
        uint64_t got = 0;
        if (mc_fs_write(c->a, key, in, size) != 0 || mc_fs_stat(c->a, key, &got) != 0 ||
            got != size || mc_fs_read(c->a, key, out, size) != 0 || memcmp(in, out, size) != 0)
            c->failures++;
        if (i % 2 == 0 && mc_fs_remove(c->a, key) != 0)
            c->failures++;
    }
    free(in);
    free(out);
    return NULL;
}

static int count_cb(const char *key, uint64_t size, void *arg)
{
    (*(int *)arg)++;
    return 0;
}

static void many_threads(unsigned io_threads, uint64_t xfer, unsigned iovcnt)
{
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.io_threads = io_threads;
    cfg.write_xfer_size = xfer;
    cfg.read_xfer_size = xfer;
    cfg.iovcnt = iovcnt;
    mc_fs_adapter_t *a = open_ok(&cfg);
    pthread_t t[MT_THREADS];
    mt_ctx_t ctx[MT_THREADS];
    for (int i = 0; i < MT_THREADS; i++) {
        ctx[i] = (mt_ctx_t){.a = a, .id = i};
        pthread_create(&t[i], NULL, mt_worker, &ctx[i]);
    }
    for (int i = 0; i < MT_THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(ctx[i].failures, 0);
    }
    int listed = 0;
    assert_int_equal(mc_fs_list(a, count_cb, &listed), 0);
    assert_int_equal(listed, MT_THREADS * MT_OBJECTS / 2);
    assert_int_equal(count_temporaries(visible), 0);
    mc_fs_adapter_close(a);
}

static void test_many_threads_write_read_remove(void **state)
{
    many_threads(4, 32768, 3); /* more threads than event queues: they queue for one */
}

/* ---- DAOS: resolution, connection, layout, faults ----------------------------------------- */

static void skip_unless_daos(void)
{
    if (!S.daos)
        skip();
}

static void test_daos_resolves_the_mount_and_writes_inside_the_container(void **state)
{
    skip_unless_daos();
    skip_without_double();
    char root[ROOT_MAX], path[PATH_BUF], visible[ROOT_MAX];
    snprintf(root, sizeof(root), "%s/deep/er", S.mount);
    mc_fs_config_t cfg = base_config(root);
    mc_fs_adapter_t *a = open_ok(&cfg);
    round_trip(a, "resolved", 1234, 12);
    snprintf(visible, sizeof(visible), "%s/deep/er", S.backing);
    object_file(visible, "resolved", path);
    assert_int_equal(access(path, F_OK), 0);
    /* Nothing went through the "mount". */
    snprintf(path, sizeof(path), "%s/deep", S.mount);
    assert_int_equal(access(path, F_OK), -1);
    mc_fs_adapter_close(a);
}

static void test_daos_resolution_reads_only_the_user_daos_xattr(void **state)
{
    skip_unless_daos();
    skip_without_double();
    /* A marker file naming the container is not a mount point (DAOS reads the xattr only). */
    char mount[ROOT_MAX], marker[PATH_BUF], root[PATH_BUF];
    snprintf(mount, sizeof(mount), "%s/mnt-marker", S.tmp);
    mkdir_p(mount);
    snprintf(marker, sizeof(marker), "%s/.daos_cont", mount);
    FILE *f = fopen(marker, "w");
    assert_non_null(f);
    fputs("DAOS.POSIX://" POOL "/" CONT "\n", f);
    fclose(f);
    snprintf(root, sizeof(root), "%s/viamarker", mount);
    mc_fs_config_t cfg = base_config(root);
    mc_fs_adapter_t *a = NULL;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_FILE_NOT_FOUND); /* ENODATA */
    assert_null(a);
#ifdef MC_TEST_WITH_DFS_DOUBLE
    /* A filesystem without extended attributes (procfs): ENOTSUP, as duns_resolve_path says. */
    struct duns_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    assert_int_equal(duns_resolve_path("/proc/self", &attr), ENOTSUP);
    duns_destroy_attr(&attr);
    cfg = base_config("/proc/self/mc_fs_test_root");
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_FILE_OPEN_FAIL);
    assert_null(a);
#endif
}

static void test_daos_path_outside_any_container_is_refused(void **state)
{
    skip_unless_daos();
    skip_without_double();
    char root[ROOT_MAX];
    snprintf(root, sizeof(root), "%s/not-a-mount/root", S.tmp);
    mkdir_p(root);
    mc_fs_config_t cfg = base_config(root);
    mc_fs_adapter_t *a = NULL;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_FILE_NOT_FOUND);
    assert_null(a);
}

static void test_daos_missing_container_is_refused(void **state)
{
    skip_unless_daos();
    skip_without_double();
    char mount[ROOT_MAX];
    snprintf(mount, sizeof(mount), "%s/mnt-missing", S.tmp);
    mkdir_p(mount);
    const char *v = "DAOS.POSIX://" POOL "/nosuchcont";
    if (setxattr(mount, "user.daos", v, strlen(v), 0) != 0)
        skip();
    mc_fs_config_t cfg = base_config(mount);
    mc_fs_adapter_t *a = NULL;
    assert_int_equal(mc_fs_adapter_open(&cfg, &a), MC_ERR_FILE_NOT_FOUND);
}

static void test_daos_chunk_size_and_object_class_at_create(void **state)
{
    skip_unless_daos();
    skip_without_double();
    char root[ROOT_MAX], visible[ROOT_MAX], path[PATH_BUF];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.chunk_size = 2 * MiB;
    cfg.oclass = "S1";
    mc_fs_adapter_t *a = open_ok(&cfg);
    round_trip(a, "layout", 5000, 14);
    object_file(visible, "layout", path);
    char buf[32] = "";
    assert_true(getxattr(path, "user.dfs_double.chunk", buf, sizeof(buf) - 1) > 0);
    assert_string_equal(buf, "2097152");
    memset(buf, 0, sizeof(buf));
    assert_true(getxattr(path, "user.dfs_double.oclass", buf, sizeof(buf) - 1) > 0);
    assert_int_equal(strtoul(buf, NULL, 10), 0x1000001u); /* OC_S1 */
    mc_fs_adapter_close(a);
}

static void test_daos_unknown_object_class_is_refused(void **state)
{
    skip_unless_daos();
    /* DAOS's class names only, matched exactly: no "OC_" prefix, no other case, no groups that
     * the class table lacks (EC classes have no G6, RP stops at 6 replicas). */
    static const char *const bad[] = {"NOT_A_CLASS", "OC_S1", "OC_SX",  "s1",     "S3",
                                      "S64",         "SX ",   "RP_1G1", "RP_7G1", "EC_2P1G6",
                                      "EC_3P1GX",    "RP_2G", "EC_2P1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char root[ROOT_MAX], visible[ROOT_MAX];
        new_root(root, visible);
        mc_fs_config_t cfg = base_config(root);
        cfg.oclass = bad[i];
        mc_fs_adapter_t *a = NULL;
        if (mc_fs_adapter_open(&cfg, &a) != MC_ERR_INVALID_PARAMS)
            fail_msg("object class \"%s\" was accepted", bad[i]);
        assert_null(a);
    }
}

static void test_daos_object_class_names_have_daos_ids(void **state)
{
    skip_unless_daos();
    skip_without_double();
    static const struct {
        const char *name;
        uint32_t id; /* (redundancy << 24) | groups, DAOS's daos_obj_class.h */
    } good[] = {
        {"S1", 0x1000001},
        {"S32", 0x1000020},
        {"SX", 0x100FFFF},
        {"RP_2G1", 0x8000001},
        {"RP_3GX", 0x900FFFF},
        {"RP_6G32", 0xC000020},
        {"RP_XSF", 80},
        {"EC_2P1G1", 0x20000001},
        {"EC_4P2GX", 0x2300FFFF},
        {"EC_16P3GX", 0x2A00FFFF},
        {"EC_8P2G12", 0x2500000C},
        {"EC_4P3G32", 0x28000020},
    };
    char root[ROOT_MAX], visible[ROOT_MAX], path[PATH_BUF];
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
#ifdef MC_TEST_WITH_DFS_DOUBLE
        assert_int_equal((uint32_t)daos_oclass_name2id(good[i].name), good[i].id);
#endif
        new_root(root, visible);
        mc_fs_config_t cfg = base_config(root);
        cfg.oclass = good[i].name;
        mc_fs_adapter_t *a = open_ok(&cfg);
        round_trip(a, "classy", 10, 20);
        object_file(visible, "classy", path);
        char buf[32] = "";
        assert_true(getxattr(path, "user.dfs_double.oclass", buf, sizeof(buf) - 1) > 0);
        assert_int_equal(strtoul(buf, NULL, 10), good[i].id);
        mc_fs_adapter_close(a);
    }
}

typedef enum { FAULT_ON_WRITE, FAULT_ON_READ, FAULT_ON_STAT, FAULT_ON_REMOVE } fault_step_t;

static void test_daos_injected_faults_map_to_store_codes(void **state)
{
    skip_unless_daos();
    skip_without_double();
    static const struct {
        const char *spec;
        fault_step_t step;
        int code;
    } cases[] = {
        {"enospc", FAULT_ON_WRITE, MC_ERR_DFS_QUOTA_EXCEEDED},
        {"edquot", FAULT_ON_WRITE, MC_ERR_DFS_QUOTA_EXCEEDED},
        {"eio@write", FAULT_ON_WRITE, MC_ERR_FILE_WRITE_FAIL},
        {"eio@create", FAULT_ON_WRITE, MC_ERR_FILE_WRITE_FAIL},
        {"eio@move", FAULT_ON_WRITE, MC_ERR_FILE_WRITE_FAIL},
        {"eio@read", FAULT_ON_READ, MC_ERR_FILE_READ_FAIL},
        {"short_read", FAULT_ON_READ, MC_ERR_FILE_READ_FAIL},
        {"enoent", FAULT_ON_READ, MC_ERR_FILE_NOT_FOUND},
        {"enoent", FAULT_ON_STAT, MC_ERR_FILE_NOT_FOUND},
        {"etimedout@write", FAULT_ON_WRITE, MC_ERR_DFS_NETWORK_TIMEOUT},
        {"ehostunreach@read", FAULT_ON_READ, MC_ERR_DFS_SERVICE_UNAVAILABLE},
        {"eacces@create", FAULT_ON_WRITE, MC_ERR_DFS_PERMISSION_DENIED},
        {"eperm@remove", FAULT_ON_REMOVE, MC_ERR_DFS_PERMISSION_DENIED},
        {"estale@read", FAULT_ON_READ, MC_ERR_DFS_STALE_HANDLE},
    };
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.write_xfer_size = 4096; /* several events per object: a fault hits one of them */
    cfg.read_xfer_size = 4096;
    mc_fs_adapter_t *a = open_ok(&cfg);
    unsigned char in[20000], out[20000];
    fill(in, sizeof(in), 15);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(mc_fs_write(a, "faulty", in, sizeof(in)), 0);
        setenv("DFS_DOUBLE_FAULT", cases[i].spec, 1);
        int rc;
        uint64_t size;
        switch (cases[i].step) {
        case FAULT_ON_WRITE:
            rc = mc_fs_write(a, "faulty", in, sizeof(in));
            break;
        case FAULT_ON_READ:
            rc = mc_fs_read(a, "faulty", out, sizeof(out));
            break;
        case FAULT_ON_STAT:
            rc = mc_fs_stat(a, "faulty", &size);
            break;
        default:
            rc = mc_fs_remove(a, "faulty");
            break;
        }
        unsetenv("DFS_DOUBLE_FAULT");
        if (rc != cases[i].code)
            fail_msg("fault %s: got %d (%s), expected %d (%s)", cases[i].spec, rc,
                     mc_error_name(rc), cases[i].code, mc_error_name(cases[i].code));
        /* One fault (count 1): the object is intact and nothing is left behind. */
        assert_int_equal(mc_fs_read(a, "faulty", out, sizeof(out)), 0);
        assert_memory_equal(in, out, sizeof(in));
        assert_int_equal(count_temporaries(visible), 0);
    }
    mc_fs_adapter_close(a);
}

static void test_daos_connect_failure_is_reported_at_open(void **state)
{
    skip_unless_daos();
    skip_without_double();
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    mc_fs_adapter_t *a = NULL;
    setenv("DFS_DOUBLE_FAULT", "ehostunreach@connect", 1);
    int rc = mc_fs_adapter_open(&cfg, &a);
    unsetenv("DFS_DOUBLE_FAULT");
    assert_int_equal(rc, MC_ERR_DFS_SERVICE_UNAVAILABLE);
    assert_null(a);
#ifdef MC_TEST_WITH_DFS_DOUBLE
    assert_int_equal(dfs_double_live_connections(), 0);
    assert_int_equal(dfs_double_init_refs(), 0);
#endif
}

static void test_daos_one_connection_per_process(void **state)
{
    skip_unless_daos();
    skip_without_double();
#ifdef MC_TEST_WITH_DFS_DOUBLE
    char r1[ROOT_MAX], r2[ROOT_MAX], v[ROOT_MAX];
    new_root(r1, v);
    new_root(r2, v);
    int before = dfs_double_total_connects();
    mc_fs_config_t c1 = base_config(r1), c2 = base_config(r2);
    mc_fs_adapter_t *a = open_ok(&c1), *b = open_ok(&c2);
    assert_int_equal(dfs_double_total_connects() - before, 1);
    assert_int_equal(dfs_double_live_connections(), 1);
    assert_int_equal(dfs_double_init_refs(), 1);
    mc_fs_adapter_close(a);
    round_trip(b, "still-connected", 100, 16);
    assert_int_equal(dfs_double_live_connections(), 1);
    mc_fs_adapter_close(b);
    assert_int_equal(dfs_double_live_connections(), 0);
    assert_int_equal(dfs_double_init_refs(), 0);
#endif
}

static void test_daos_asynchronous_event_queues(void **state)
{
    skip_unless_daos();
    skip_without_double();
    /* Event queues created from now on complete on a worker thread, later than submission. */
    setenv("DFS_DOUBLE_EQ_ASYNC", "1", 1);
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.write_xfer_size = 100000;
    cfg.read_xfer_size = 77777;
    cfg.iovcnt = 5;
    mc_fs_adapter_t *a = open_ok(&cfg);
    round_trip(a, "async-big", 8 * MiB + 1, 17);
    round_trip(a, "async-small", 1, 18);
    unsigned char out[10];
    round_trip(a, "async-10", 10, 19);
    setenv("DFS_DOUBLE_FAULT", "eio@read", 1);
    assert_int_equal(mc_fs_read(a, "async-10", out, 10), MC_ERR_FILE_READ_FAIL);
    unsetenv("DFS_DOUBLE_FAULT");
    mc_fs_adapter_close(a);
    many_threads(3, 65536, 2);
    unsetenv("DFS_DOUBLE_EQ_ASYNC");
}

/* ---- DAOS relaxed-mode rename: the double's dfs_move and the adapter's guarantees ---------- */

#ifdef MC_TEST_WITH_DFS_DOUBLE
/* Stops the dfs_move in another thread at one step until the test lets it go on. */
typedef struct move_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int step, arrived, go;
} move_gate_t;

static void gate_hook(int step, const char *new_name, void *arg)
{
    move_gate_t *g = arg;
    if (step != g->step)
        return;
    pthread_mutex_lock(&g->mu);
    g->arrived = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->go)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

typedef struct mover {
    dfs_t *dfs;
    dfs_obj_t *dir;
    const char *from, *to;
    int rc;
} mover_t;

static void *mover_run(void *arg)
{
    mover_t *m = arg;
    m->rc = dfs_move(m->dfs, m->dir, m->from, m->dir, m->to, NULL);
    return NULL;
}

/* Creates file `name` in dir holding `len` bytes of `byte`. */
static void dfs_put(dfs_t *dfs, dfs_obj_t *dir, const char *name, int byte, size_t len)
{
    dfs_obj_t *o = NULL;
    char buf[256];
    memset(buf, byte, sizeof(buf));
    assert_int_equal(
        dfs_open(dfs, dir, name, S_IFREG | 0644, O_RDWR | O_CREAT | O_EXCL, 0, 0, NULL, &o), 0);
    d_iov_t iov;
    d_iov_set(&iov, buf, len);
    d_sg_list_t sgl = {.sg_nr = 1, .sg_iovs = &iov};
    assert_int_equal(dfs_write(dfs, o, &sgl, 0, NULL), 0);
    dfs_release(o);
}

/* Bytes a handle reads from offset 0 (at most 256). */
static daos_size_t dfs_read_len(dfs_t *dfs, dfs_obj_t *o)
{
    char buf[256];
    d_iov_t iov;
    d_iov_set(&iov, buf, sizeof(buf));
    d_sg_list_t sgl = {.sg_nr = 1, .sg_iovs = &iov};
    daos_size_t got = 12345;
    assert_int_equal(dfs_read(dfs, o, &sgl, 0, &got, NULL), 0);
    return got;
}

/* Starts `from` -> `to` in a thread and waits until it stops at step `step`. */
static void move_until(move_gate_t *g, mover_t *m, pthread_t *t, int step)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->step = step;
    g->arrived = g->go = 0;
    dfs_double_set_move_hook(gate_hook, g);
    pthread_create(t, NULL, mover_run, m);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&g->mu);
    while (!g->arrived && pthread_cond_timedwait(&g->cv, &g->mu, &deadline) == 0)
        ;
    int arrived = g->arrived;
    pthread_mutex_unlock(&g->mu);
    if (!arrived) {
        pthread_join(*t, NULL);
        dfs_double_set_move_hook(NULL, NULL);
        fail_msg("dfs_move returned %d without stopping between its steps (step %d)", m->rc, step);
    }
}

static int move_finish(move_gate_t *g, mover_t *m, pthread_t t)
{
    pthread_mutex_lock(&g->mu);
    g->go = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(t, NULL);
    dfs_double_set_move_hook(NULL, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    return m->rc;
}
#endif

static void test_daos_double_move_is_relaxed_not_atomic(void **state)
{
    skip_unless_daos();
    skip_without_double();
#ifdef MC_TEST_WITH_DFS_DOUBLE
    dfs_t *dfs = NULL;
    dfs_obj_t *dir = NULL;
    mode_t mode;
    assert_int_equal(dfs_init(), 0);
    assert_int_equal(dfs_connect(POOL, NULL, CONT, O_RDWR, NULL, &dfs), 0);
    assert_int_equal(dfs_mkdir(dfs, NULL, "relaxed", 0755, 0), 0);
    assert_int_equal(dfs_lookup_rel(dfs, NULL, "relaxed", O_RDWR, &dir, &mode, NULL), 0);
    move_gate_t g;
    pthread_t t;
    struct stat st;
    int conflicts = dfs_double_move_conflicts();

    /* 1. Between removing the destination and inserting the new entry: a reader's lookup sees
     * ENOENT, a handle still open on the old object reads nothing (punched), and another writer
     * that inserts the name meanwhile makes the move fail with EEXIST, its source intact. */
    dfs_put(dfs, dir, "dst", 'A', 100);
    dfs_put(dfs, dir, "src", 'B', 100);
    dfs_obj_t *old = NULL;
    assert_int_equal(dfs_open(dfs, dir, "dst", S_IFREG, O_RDONLY, 0, 0, NULL, &old), 0);
    assert_int_equal(dfs_read_len(dfs, old), 100);
    mover_t m = {dfs, dir, "src", "dst", -1};
    move_until(&g, &m, &t, DFS_DOUBLE_MOVE_REMOVED);
    dfs_obj_t *o = NULL;
    assert_int_equal(dfs_lookup_rel(dfs, dir, "dst", O_RDONLY, &o, &mode, NULL), ENOENT);
    assert_int_equal(dfs_read_len(dfs, old), 0);
    dfs_put(dfs, dir, "dst", 'C', 50); /* the concurrent writer's conditional insert wins */
    assert_int_equal(move_finish(&g, &m, t), EEXIST);
    assert_int_equal(dfs_stat(dfs, dir, "src", &st), 0);
    assert_int_equal(st.st_size, 100);
    dfs_release(old);

    /* 2. Between punching the destination and removing its entry: another mover (here a
     * remover) takes the entry first; this move fails with ENOENT, its source intact. */
    move_until(&g, &m, &t, DFS_DOUBLE_MOVE_PUNCHED);
    assert_int_equal(dfs_stat(dfs, dir, "dst", &st), 0);
    assert_int_equal(st.st_size, 0); /* punched, still named */
    assert_int_equal(dfs_remove(dfs, dir, "dst", false, NULL), 0);
    assert_int_equal(move_finish(&g, &m, t), ENOENT);
    assert_int_equal(dfs_stat(dfs, dir, "src", &st), 0);
    assert_true(dfs_double_move_conflicts() - conflicts >= 2);

    /* 3. After the insert, before the source entry goes: the object has both names. */
    move_until(&g, &m, &t, DFS_DOUBLE_MOVE_INSERTED);
    assert_int_equal(dfs_stat(dfs, dir, "src", &st), 0);
    assert_int_equal(dfs_stat(dfs, dir, "dst", &st), 0);
    assert_int_equal(move_finish(&g, &m, t), 0);
    assert_int_equal(dfs_stat(dfs, dir, "src", &st), ENOENT);
    assert_int_equal(dfs_open(dfs, dir, "dst", S_IFREG, O_RDONLY, 0, 0, NULL, &o), 0);
    assert_int_equal(dfs_read_len(dfs, o), 100);
    dfs_release(o);

    /* dfs_remove punches too: an open handle reads nothing afterwards. */
    assert_int_equal(dfs_open(dfs, dir, "dst", S_IFREG, O_RDONLY, 0, 0, NULL, &o), 0);
    assert_int_equal(dfs_remove(dfs, dir, "dst", false, NULL), 0);
    assert_int_equal(dfs_read_len(dfs, o), 0);
    dfs_release(o);

    dfs_release(dir);
    assert_int_equal(dfs_disconnect(dfs), 0);
    assert_int_equal(dfs_fini(), 0);
#endif
}

#ifdef MC_TEST_WITH_DFS_DOUBLE
/* Writers and readers of one key while every dfs_move is slowed between its steps. */
#define RACE_SIZE (256 * 1024)
#define RACE_WRITERS 4
#define RACE_VERSIONS 12
#define RACE_READERS 3
#define RACE_WINDOW_US "3000"

typedef struct race_ctx {
    mc_fs_adapter_t *a;
    int writers_left;
    int write_failures, bad_reads, misses, complete_reads;
} race_ctx_t;

typedef struct race_writer {
    race_ctx_t *c;
    int id;
} race_writer_t;

/* The byte a writer's version is made of: unique per (writer, version), never 0. */
static unsigned char race_byte(int writer, int version)
{
    return (unsigned char)(1 + writer * RACE_VERSIONS + version);
}

static void *race_write(void *arg)
{
    race_writer_t *w = arg;
    unsigned char *buf = malloc(RACE_SIZE);
    for (int v = 0; v < RACE_VERSIONS; v++) {
        memset(buf, race_byte(w->id, v), RACE_SIZE);
        int rc = mc_fs_write(w->c->a, "contended", buf, RACE_SIZE);
        if (rc != 0) {
            fprintf(stderr, "writer %d version %d: %d (%s)\n", w->id, v, rc, mc_error_name(rc));
            __atomic_add_fetch(&w->c->write_failures, 1, __ATOMIC_SEQ_CST);
        }
    }
    free(buf);
    __atomic_sub_fetch(&w->c->writers_left, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void *race_read(void *arg)
{
    race_ctx_t *c = arg;
    unsigned char *buf = malloc(RACE_SIZE);
    while (__atomic_load_n(&c->writers_left, __ATOMIC_SEQ_CST) > 0) {
        int rc = mc_fs_read(c->a, "contended", buf, RACE_SIZE);
        if (rc == MC_ERR_FILE_NOT_FOUND) {
            __atomic_add_fetch(&c->misses, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        int whole = rc == 0 && buf[0] != 0;
        for (size_t i = 1; whole && i < RACE_SIZE; i++)
            whole = buf[i] == buf[0];
        if (!whole) {
            fprintf(stderr, "reader: %d (%s), bytes not one version\n", rc, mc_error_name(rc));
            __atomic_add_fetch(&c->bad_reads, 1, __ATOMIC_SEQ_CST);
        } else {
            __atomic_add_fetch(&c->complete_reads, 1, __ATOMIC_SEQ_CST);
        }
    }
    free(buf);
    return NULL;
}
#endif

/*
 * The adapter against relaxed-mode dfs_move (each step slowed by RACE_WINDOW_US): concurrent
 * writers of one key all succeed and the last rename wins (the key holds one writer's last
 * version, whole); readers meanwhile get a whole version or a miss, never a mix or an error.
 */
static void test_daos_relaxed_rename_last_writer_wins_and_readers_see_whole_objects(void **state)
{
    skip_unless_daos();
    skip_without_double();
#ifdef MC_TEST_WITH_DFS_DOUBLE
    char root[ROOT_MAX], visible[ROOT_MAX];
    new_root(root, visible);
    mc_fs_config_t cfg = base_config(root);
    cfg.read_xfer_size = 16384; /* many transfers: a punch lands in the middle of reads */
    race_ctx_t c = {.a = open_ok(&cfg), .writers_left = RACE_WRITERS};
    unsigned char *buf = malloc(RACE_SIZE);
    memset(buf, 0xFF, RACE_SIZE);
    assert_int_equal(mc_fs_write(c.a, "contended", buf, RACE_SIZE), 0);
    int conflicts = dfs_double_move_conflicts(), short_reads = dfs_double_short_reads();
    setenv("DFS_DOUBLE_MOVE_WINDOW_US", RACE_WINDOW_US, 1);
    pthread_t w[RACE_WRITERS], r[RACE_READERS];
    race_writer_t ws[RACE_WRITERS];
    for (int i = 0; i < RACE_READERS; i++)
        pthread_create(&r[i], NULL, race_read, &c);
    for (int i = 0; i < RACE_WRITERS; i++) {
        ws[i] = (race_writer_t){&c, i};
        pthread_create(&w[i], NULL, race_write, &ws[i]);
    }
    for (int i = 0; i < RACE_WRITERS; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < RACE_READERS; i++)
        pthread_join(r[i], NULL);
    unsetenv("DFS_DOUBLE_MOVE_WINDOW_US");
    fprintf(stderr,
            "relaxed rename: %d move conflicts, %d short transfers, reads: %d whole, %d misses\n",
            dfs_double_move_conflicts() - conflicts, dfs_double_short_reads() - short_reads,
            c.complete_reads, c.misses);
    assert_int_equal(c.write_failures, 0);
    assert_int_equal(c.bad_reads, 0);
    /* The races happened: movers collided, and readers hit the window (a miss) or a punch. */
    assert_true(dfs_double_move_conflicts() - conflicts > 0);
    assert_true(c.misses > 0);
    /* Last rename wins: one writer's last version, whole. */
    assert_int_equal(mc_fs_read(c.a, "contended", buf, RACE_SIZE), 0);
    int last = -1;
    for (int i = 0; i < RACE_WRITERS; i++)
        if (buf[0] == race_byte(i, RACE_VERSIONS - 1))
            last = i;
    if (last < 0)
        fail_msg("the key holds byte %u, no writer's last version", buf[0]);
    for (size_t i = 1; i < RACE_SIZE; i++)
        assert_int_equal(buf[i], buf[0]);
    /* And a write after all of them wins. */
    memset(buf, 0xEE, RACE_SIZE);
    assert_int_equal(mc_fs_write(c.a, "contended", buf, RACE_SIZE), 0);
    memset(buf, 0, RACE_SIZE);
    assert_int_equal(mc_fs_read(c.a, "contended", buf, RACE_SIZE), 0);
    assert_int_equal(buf[RACE_SIZE - 1], 0xEE);
    assert_int_equal(count_temporaries(visible), 0);
    free(buf);
    mc_fs_adapter_close(c.a);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_sizes_and_splits),
        cmocka_unit_test(test_overwrite_replaces_the_object),
        cmocka_unit_test(test_missing_key_is_file_not_found),
        cmocka_unit_test(test_keys_with_slashes_dots_and_long_keys),
        cmocka_unit_test(test_invalid_arguments_are_refused),
        cmocka_unit_test(test_wrong_size_is_invalid_buffer),
        cmocka_unit_test(test_corrupt_value_is_checksum_mismatch),
        cmocka_unit_test(test_corrupt_header_is_checksum_mismatch),
        cmocka_unit_test(test_truncated_object_is_read_fail),
        cmocka_unit_test(test_object_under_another_keys_name_is_checksum_mismatch),
        cmocka_unit_test(test_reader_never_sees_a_partial_object),
        cmocka_unit_test(test_remove_then_read_is_not_found),
        cmocka_unit_test(test_list_reports_every_object_once),
        cmocka_unit_test(test_list_stops_when_the_callback_says_so),
        cmocka_unit_test(test_health_check_passes_and_leaves_nothing),
        cmocka_unit_test(test_root_under_a_regular_file_fails_at_open),
        cmocka_unit_test(test_bad_configs_are_refused),
        cmocka_unit_test(test_daos_type_is_refused_or_supported_as_built),
        cmocka_unit_test(test_alignment_and_type_name),
        cmocka_unit_test(test_many_threads_write_read_remove),
        cmocka_unit_test(test_daos_resolves_the_mount_and_writes_inside_the_container),
        cmocka_unit_test(test_daos_resolution_reads_only_the_user_daos_xattr),
        cmocka_unit_test(test_daos_path_outside_any_container_is_refused),
        cmocka_unit_test(test_daos_missing_container_is_refused),
        cmocka_unit_test(test_daos_chunk_size_and_object_class_at_create),
        cmocka_unit_test(test_daos_unknown_object_class_is_refused),
        cmocka_unit_test(test_daos_object_class_names_have_daos_ids),
        cmocka_unit_test(test_daos_injected_faults_map_to_store_codes),
        cmocka_unit_test(test_daos_connect_failure_is_reported_at_open),
        cmocka_unit_test(test_daos_one_connection_per_process),
        cmocka_unit_test(test_daos_asynchronous_event_queues),
        cmocka_unit_test(test_daos_double_move_is_relaxed_not_atomic),
        cmocka_unit_test(test_daos_relaxed_rename_last_writer_wins_and_readers_see_whole_objects),
    };
    return cmocka_run_group_tests_name("fs_adapter_" MC_TEST_FS_TYPE, tests, setup_group,
                                       teardown_group);
}
