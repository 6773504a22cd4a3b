/*
 * snapshot.c — snapshots of the master's object records on a local filesystem (journal.h;
 * upstream Mooncake's --enable_snapshot family of flags).
 *
 * Layout as upstream's: <root>/<YYYYMMDD_HHMMSS_mmm>/ and <root>/latest.txt naming the newest.
 * The files are ours (upstream writes msgpack): records.bin, a sequence of (u32 little-endian
 * length, mc.ObjectRecord), and manifest.txt:
 *     mooncake-c-snapshot 1
 *     seq <journal seq the export started at>
 *     clean <0|1>
 *     objects <count>
 *     records.bin <bytes> <crc32c hex>
 *     manifest <crc32c hex of the lines above>
 * A snapshot is written into <root>/.tmp-<name>/, each file fsynced, the directory renamed to
 * <name> and the root fsynced; latest.txt likewise through a temporary file. Upstream forks a
 * child bounded by --snapshot_child_timeout_seconds; we export in the master's own process
 * (the lock is held a slice at a time) and bound the whole write by the same timeout instead.
 */
#include "journal.h"

#include "checksum.h"
#include "log.h"
#include "master_internal.h"
#include "mooncake/errors.h"
#include "net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NAME_LEN 19 /* YYYYMMDD_HHMMSS_mmm */
#define MAX_SNAPSHOTS 4096
#define MAX_RECORD (64u << 20)

static int name_ok(const char *n)
{
    if (strlen(n) != NAME_LEN)
        return 0;
    for (int i = 0; i < NAME_LEN; i++) {
        int sep = i == 8 || i == 15;
        if (sep ? n[i] != '_' : (n[i] < '0' || n[i] > '9'))
            return 0;
    }
    return 1;
}

static int fsync_path(const char *path, int dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Removes a snapshot directory (its regular files, then itself). */
static void remove_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        char p[4608];
        while ((de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

const double mc_snapshot_ms_bounds[MC_SNAPSHOT_MS_BUCKETS] = {
    0, 500, 1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000};

static void count_snapshot(mc_master_t *m, int ok, uint64_t ms)
{
    pthread_mutex_lock(&m->lock);
    if (ok) {
        m->snap_success++;
        size_t b = 0;
        while (b < MC_SNAPSHOT_MS_BUCKETS && (double)ms > mc_snapshot_ms_bounds[b])
            b++;
        m->snap_ms_counts[b]++;
        m->snap_ms_sum += ms;
    } else {
        m->snap_fail++;
    }
    pthread_mutex_unlock(&m->lock);
}

void mc_master_snapshot_stats(mc_master_t *m, mc_snapshot_stats_t *out)
{
    if (!m || !out)
        return;
    pthread_mutex_lock(&m->lock);
    out->success = m->snap_success;
    out->fail = m->snap_fail;
    memcpy(out->ms_counts, m->snap_ms_counts, sizeof(out->ms_counts));
    out->ms_sum = m->snap_ms_sum;
    pthread_mutex_unlock(&m->lock);
}

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct writer {
    FILE *f;
    uint32_t crc;
    uint64_t bytes, objects, deadline;
    int failed;
} writer_t;

static int put_bytes(writer_t *w, const void *p, size_t n)
{
    if (fwrite(p, 1, n, w->f) != n)
        return -1;
    w->crc = mc_crc32c(w->crc, p, n);
    w->bytes += n;
    return 0;
}

static int write_record(void *arg, const uint8_t *record, size_t len)
{
    writer_t *w = arg;
    uint8_t hdr[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
                      (uint8_t)(len >> 24)};
    if (put_bytes(w, hdr, 4) != 0 || put_bytes(w, record, len) != 0) {
        w->failed = 1;
        return MC_ERR_INTERNAL_ERROR;
    }
    w->objects++;
    if (w->deadline && (w->objects & 1023) == 0 && mc_now_ms() > w->deadline) {
        w->failed = 2;
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Snapshot names under root, newest first (caller frees each and the array). */
static char **list_snapshots(const char *root, size_t *n)
{
    *n = 0;
    DIR *d = opendir(root);
    if (!d)
        return NULL;
    char **v = calloc(MAX_SNAPSHOTS, sizeof(*v));
    struct dirent *de;
    while (v && *n < MAX_SNAPSHOTS && (de = readdir(d)) != NULL) {
        if (name_ok(de->d_name) && (v[*n] = strdup(de->d_name)) != NULL)
            (*n)++;
    }
    closedir(d);
    if (v)
        qsort(v, *n, sizeof(*v), name_cmp);
    for (size_t i = 0; v && i < *n / 2; i++) { /* newest first */
        char *t = v[i];
        v[i] = v[*n - 1 - i];
        v[*n - 1 - i] = t;
    }
    return v;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Writes records + manifest as <dir_root>/<name> (through .tmp-<name>) and latest.txt. */
static int publish(const char *dir_root, const char *name, const char *records_src,
                   const char *manifest, unsigned retention)
{
    char tmp[4400], fin[4400], p[4500], q[4500];
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", dir_root, name);
    snprintf(fin, sizeof(fin), "%s/%s", dir_root, name);
    if (mkdir(dir_root, 0755) != 0 && errno != EEXIST)
        return -1;
    remove_dir(tmp);
    if (mkdir(tmp, 0755) != 0)
        return -1;
    snprintf(p, sizeof(p), "%s/records.bin", tmp);
    if (records_src) { /* a copy of a written records.bin (backup dir) */
        FILE *in = fopen(records_src, "re"), *out = fopen(p, "we");
        char buf[65536];
        size_t k;
        int ok = in && out;
        while (ok && (k = fread(buf, 1, sizeof(buf), in)) > 0)
            ok = fwrite(buf, 1, k, out) == k;
        ok = ok && fflush(out) == 0 && fsync(fileno(out)) == 0;
        if (in)
            fclose(in);
        if (out && fclose(out) != 0)
            ok = 0;
        if (!ok) {
            remove_dir(tmp);
            return -1;
        }
    }
    snprintf(q, sizeof(q), "%s/manifest.txt", tmp);
    if (write_file(q, manifest) != 0 || fsync_path(tmp, 1) != 0 || rename(tmp, fin) != 0) {
        remove_dir(tmp);
        return -1;
    }
    fsync_path(dir_root, 1);
    snprintf(p, sizeof(p), "%s/.latest.txt.tmp", dir_root);
    snprintf(q, sizeof(q), "%s/latest.txt", dir_root);
    char line[80];
    snprintf(line, sizeof(line), "%.64s\n", name);
    if (write_file(p, line) != 0 || rename(p, q) != 0)
        return -1;
    fsync_path(dir_root, 1);
    size_t n;
    char **v = list_snapshots(dir_root, &n);
    for (size_t i = retention; v && i < n; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir_root, v[i]);
        remove_dir(p);
    }
    free_list(v, n);
    return 0;
}

static int snapshot_write(mc_master_t *m, const char *root, const char *backup_dir,
                          unsigned retention, int clean, uint64_t timeout_ms, char *name_out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char name[64];
    snprintf(name, sizeof(name), "%04d%02d%02d_%02d%02d%02d_%03d", (tm.tm_year + 1900) % 10000,
             (tm.tm_mon + 1) % 100, tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
             tm.tm_sec % 100, (int)(ts.tv_nsec / 1000000) % 1000);
    size_t n;
    char **v = list_snapshots(root, &n);
    if (v && n > 0 && strcmp(v[0], name) >= 0) { /* two in one millisecond, or a clock step */
        free_list(v, n);
        MC_WARN("snapshot: %s is not newer than the newest under %s: skipped", name, root);
        return MC_ERR_INTERNAL_ERROR;
    }
    free_list(v, n);

    char tmp[4400], rec[4500];
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", root, name);
    if (mkdir(root, 0755) != 0 && errno != EEXIST) {
        MC_ERROR("snapshot: cannot create %s: %s", root, strerror(errno));
        return MC_ERR_INTERNAL_ERROR;
    }
    remove_dir(tmp);
    if (mkdir(tmp, 0755) != 0) {
        MC_ERROR("snapshot: cannot create %s: %s", tmp, strerror(errno));
        return MC_ERR_INTERNAL_ERROR;
    }
    snprintf(rec, sizeof(rec), "%s/records.bin", tmp);
    uint64_t started = mc_now_ms();
    writer_t w = {.f = fopen(rec, "we"), .deadline = timeout_ms ? started + timeout_ms : 0};
    uint64_t seq = 0;
    int rc = w.f ? mc_master_export(m, &seq, write_record, &w) : MC_ERR_INTERNAL_ERROR;
    if (w.f) {
        if (fflush(w.f) != 0 || fsync(fileno(w.f)) != 0)
            rc = MC_ERR_INTERNAL_ERROR;
        if (fclose(w.f) != 0)
            rc = MC_ERR_INTERNAL_ERROR;
    }
    if (rc != 0 || (timeout_ms && mc_now_ms() > started + timeout_ms)) {
        MC_ERROR("snapshot %s under %s failed (%s): nothing kept", name, root,
                 w.failed == 2 || rc == 0 ? "took longer than --snapshot_child_timeout_seconds"
                                          : "write error");
        remove_dir(tmp);
        return MC_ERR_INTERNAL_ERROR;
    }
    char body[512], manifest[1024];
    snprintf(body, sizeof(body),
             "mooncake-c-snapshot 1\nseq %" PRIu64 "\nclean %d\nobjects %" PRIu64
             "\nrecords.bin %" PRIu64 " %08x\n",
             seq, clean ? 1 : 0, w.objects, w.bytes, w.crc);
    snprintf(manifest, sizeof(manifest), "%smanifest %08x\n", body,
             mc_crc32c(0, body, strlen(body)));
    /* the records are in place: publish moves the directory and writes the manifest */
    char p[4500];
    snprintf(p, sizeof(p), "%s/manifest.txt", tmp);
    char fin[4400];
    snprintf(fin, sizeof(fin), "%s/%s", root, name);
    int ok = write_file(p, manifest) == 0 && fsync_path(tmp, 1) == 0 && rename(tmp, fin) == 0;
    if (!ok) {
        MC_ERROR("snapshot %s under %s failed: %s", name, root, strerror(errno));
        remove_dir(tmp);
        return MC_ERR_INTERNAL_ERROR;
    }
    fsync_path(root, 1);
    /* latest.txt and retention: publish() with the directory already there does just that */
    char lt[4500], ltmp[4500], line[80];
    snprintf(ltmp, sizeof(ltmp), "%s/.latest.txt.tmp", root);
    snprintf(lt, sizeof(lt), "%s/latest.txt", root);
    snprintf(line, sizeof(line), "%s\n", name);
    if (write_file(ltmp, line) != 0 || rename(ltmp, lt) != 0)
        MC_WARN("snapshot: cannot update %s: %s", lt, strerror(errno));
    fsync_path(root, 1);
    v = list_snapshots(root, &n);
    for (size_t i = retention; v && i < n; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, v[i]);
        remove_dir(p);
    }
    free_list(v, n);
    if (backup_dir && backup_dir[0]) {
        snprintf(rec, sizeof(rec), "%s/records.bin", fin);
        if (publish(backup_dir, name, rec, manifest, retention) != 0)
            MC_WARN("snapshot %s: the copy under %s failed: %s", name, backup_dir, strerror(errno));
    }
    MC_INFO("snapshot %s written under %s: %" PRIu64 " objects, %" PRIu64 " bytes, seq %" PRIu64
            ", %s, %" PRIu64 " ms",
            name, root, w.objects, w.bytes, seq, clean ? "clean" : "periodic",
            mc_now_ms() - started);
    if (name_out)
        snprintf(name_out, 32, "%.19s", name);
    return 0;
}

int mc_master_snapshot_write(mc_master_t *m, const char *root, const char *backup_dir,
                             unsigned retention, int clean, uint64_t timeout_ms, char *name_out)
{
    if (!m || !root || !root[0] || retention == 0)
        return MC_ERR_INVALID_PARAMS;
    uint64_t started = mc_now_ms();
    int rc = snapshot_write(m, root, backup_dir, retention, clean, timeout_ms, name_out);
    count_snapshot(m, rc == 0, mc_now_ms() - started);
    return rc;
}

/* ---- restoring ------------------------------------------------------------------------------- */

typedef struct manifest {
    uint64_t seq, objects, bytes;
    uint32_t crc;
    int clean;
} manifest_t;

static int read_manifest(const char *dir, manifest_t *mf)
{
    char p[4500], buf[1024];
    snprintf(p, sizeof(p), "%s/manifest.txt", dir);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *last = strstr(buf, "manifest ");
    unsigned crc = 0;
    if (!last || sscanf(last, "manifest %8x", &crc) != 1 ||
        mc_crc32c(0, buf, (size_t)(last - buf)) != crc)
        return -1;
    unsigned rcrc = 0;
    if (sscanf(buf,
               "mooncake-c-snapshot 1\nseq %" SCNu64 "\nclean %d\nobjects %" SCNu64
               "\nrecords.bin %" SCNu64 " %8x\n",
               &mf->seq, &mf->clean, &mf->objects, &mf->bytes, &rcrc) != 5)
        return -1;
    mf->crc = rcrc;
    return 0;
}

/* Reads and verifies records.bin whole into memory; NULL when it does not verify. */
static uint8_t *read_records(const char *dir, const manifest_t *mf)
{
    char p[4500];
    snprintf(p, sizeof(p), "%s/records.bin", dir);
    FILE *f = fopen(p, "re");
    if (!f)
        return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &st) == 0 && (uint64_t)st.st_size == mf->bytes)
        buf = malloc(mf->bytes ? mf->bytes : 1);
    if (buf && fread(buf, 1, mf->bytes, f) != mf->bytes) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf && mc_crc32c(0, buf, mf->bytes) != mf->crc) {
        free(buf);
        buf = NULL;
    }
    /* the framing must account for every byte and every object */
    uint64_t at = 0, count = 0;
    while (buf && at + 4 <= mf->bytes) {
        uint32_t len = (uint32_t)buf[at] | (uint32_t)buf[at + 1] << 8 |
                       (uint32_t)buf[at + 2] << 16 | (uint32_t)buf[at + 3] << 24;
        if (len > MAX_RECORD || len > mf->bytes - at - 4)
            break;
        at += 4 + (uint64_t)len;
        count++;
    }
    if (buf && (at != mf->bytes || count != mf->objects)) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

int mc_master_snapshot_restore(mc_master_t *m, const char *root, uint64_t *seq)
{
    if (!m || !root)
        return MC_ERR_INVALID_PARAMS;
    size_t n;
    char **v = list_snapshots(root, &n);
    int rc = MC_ERR_OBJECT_NOT_FOUND;
    for (size_t i = 0; v && i < n; i++) {
        char dir[4400];
        snprintf(dir, sizeof(dir), "%s/%s", root, v[i]);
        manifest_t mf;
        uint8_t *buf = read_manifest(dir, &mf) == 0 ? read_records(dir, &mf) : NULL;
        if (!buf) {
            MC_WARN("snapshot %s does not read back whole or does not verify: skipped", dir);
            continue;
        }
        uint64_t at = 0, bad = 0;
        while (at < mf.bytes) {
            uint32_t len = (uint32_t)buf[at] | (uint32_t)buf[at + 1] << 8 |
                           (uint32_t)buf[at + 2] << 16 | (uint32_t)buf[at + 3] << 24;
            int irc = mf.clean ? mc_master_import(m, buf + at + 4, len)
                               : mc_master_import_untrusted(m, buf + at + 4, len);
            bad += irc != 0;
            at += 4 + (uint64_t)len;
        }
        free(buf);
        MC_INFO("restored snapshot %s: %" PRIu64 " objects (%" PRIu64 " refused), seq %" PRIu64
                ", %s",
                dir, mf.objects, bad, mf.seq,
                mf.clean ? "clean" : "periodic: memory replicas not trusted");
        if (seq)
            *seq = mf.seq;
        rc = 0;
        break;
    }
    if (rc != 0)
        MC_WARN("no usable snapshot under %s: starting empty", root);
    free_list(v, n);
    return rc;
}
