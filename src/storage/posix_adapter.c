/*
 * posix_adapter.c — the "posix" FS adapter: Mooncake-style objects as files in any POSIX
 * directory (local disk, NFS, Lustre, CephFS, a dfuse mount).
 *
 * At open the root and its 256 hash directories (plus .probe) are created when missing and kept
 * open as directory fds, so every object operation is one *at() call relative to its directory
 * (no path walk, no shared file offsets): the adapter's state is read-only after open and every
 * operation is thread-safe.
 *
 * Write: openat(O_CREAT|O_EXCL) a temporary ".t…" name, pwritev the [header | value] stream in
 * transfers of write_xfer_size bytes (0 = one), each cut into iovcnt pieces, fsync, close, then
 * renameat over the object's name — a reader sees the old object, no object, or the new one,
 * never a partial file — and fsync the directory, so the new name itself is on disk when write
 * returns (a rename lives in the directory, which the file's fsync does not cover; Redis and
 * SQLite do the same). Remove is unlinkat followed by the same directory fsync: a deleted object
 * cannot come back after a power loss. Any failure unlinks the temporary. Read: openat + preadv
 * in transfers of read_xfer_size, stopping at the end of the file. O_DIRECT is not used (the page
 * cache is the filesystem's business; the benchmark drops it between phases). The directories
 * made at open are made durable the same way (fsync of the root and of its parent).
 *
 * Errors: posix_fail() is the one place where an errno becomes a store code.
 */
#include "fs_adapter_internal.h"

#include "mooncake/errors.h"

#include "failpoint.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define DIR_MODE 0755
#define FILE_MODE 0644
#define MAX_IOV (MC_FS_IOVCNT_MAX + 2)

typedef struct posix_adapter {
    const mc_fs_config_t *cfg;
    int root_fd;
    int dir_fd[MC_OBJ_DIR_COUNT + 1]; /* hash dirs, then .probe */
    atomic_int dir_sync_unsupported;  /* the filesystem refused a directory fsync once */
} posix_adapter_t;

typedef enum posix_op { OP_OPEN, OP_READ, OP_WRITE, OP_REMOVE, OP_LIST } posix_op_t;

/* dir value meaning "not in a hash directory": `name` is then a full path. */
#define ROOT_ONLY (MC_OBJ_PROBE_DIR + 1)

/*
 * The errno → store code mapping of this adapter, and its log line. `call` names the failed
 * system call; dir/name locate the file (dir == ROOT_ONLY: name is a full path). err 0 means a
 * write call that stored nothing.
 */
static int posix_fail(const posix_adapter_t *p, int err, posix_op_t op, const char *call,
                      unsigned dir, const char *name)
{
    int other = op == OP_READ    ? MC_ERR_FILE_READ_FAIL
                : op == OP_WRITE ? MC_ERR_FILE_WRITE_FAIL
                                 : MC_ERR_FILE_OPEN_FAIL;
    /* err 0: a write call that stored nothing */
    int code = err == 0 ? MC_ERR_DFS_PARTIAL_WRITE : mc_fs_errno_code(err, other);
    char path[PATH_MAX + MC_OBJ_NAME_MAX];
    if (dir <= MC_OBJ_PROBE_DIR) {
        char dname[8];
        mc_obj_dir_name(dir, dname);
        snprintf(path, sizeof(path), "%s/%s/%s", p->cfg->root_dir, dname, name);
    } else {
        snprintf(path, sizeof(path), "%s", name);
    }
    const char *why = err ? strerror(err) : "no bytes written";
    if (code == MC_ERR_FILE_NOT_FOUND && (op == OP_READ || op == OP_REMOVE))
        MC_VLOG(1, "fs adapter posix: %s %s: %s (errno %d)", call, path, why, err);
    else
        MC_ERROR("fs adapter posix: %s %s failed: %s (errno %d) -> %s", call, path, why, err,
                 mc_error_name(code));
    return code;
}

/*
 * fsync of a directory, after a rename or unlink in it (or a mkdir): 0 or the store code. A
 * filesystem that cannot sync directories (EINVAL, ENOTSUP, ENOSYS: some FUSE and network
 * filesystems, which then order metadata themselves) is accepted with one WARNING per adapter.
 */
static int sync_dir(posix_adapter_t *p, int fd, posix_op_t op, unsigned dir, const char *name)
{
    if (fsync(fd) == 0)
        return 0;
    int err = errno;
    if (err == EINVAL || err == ENOTSUP || err == ENOSYS) {
        if (!atomic_exchange(&p->dir_sync_unsupported, 1))
            MC_WARN("fs adapter posix: %s does not sync directories (%s); renames and deletions "
                    "there are as durable as the filesystem makes them",
                    p->cfg->root_dir, strerror(err));
        return 0;
    }
    return posix_fail(p, err, op, "fsync(directory)", dir, name);
}

/* mkdir -p: creates every missing component of `path`. Returns 0 or an errno. */
static int make_dirs(const char *path, const char **failed_call)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof(buf))
        return ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, DIR_MODE) != 0 && errno != EEXIST) {
            *failed_call = "mkdir";
            return errno;
        }
        buf[i] = saved;
    }
    return 0;
}

static void posix_close(void *impl)
{
    posix_adapter_t *p = impl;
    if (!p)
        return;
    for (unsigned i = 0; i <= MC_OBJ_PROBE_DIR; i++)
        if (p->dir_fd[i] >= 0)
            close(p->dir_fd[i]);
    if (p->root_fd >= 0)
        close(p->root_fd);
    free(p);
}

static int posix_open(const mc_fs_config_t *cfg, void **impl)
{
    posix_adapter_t *p = calloc(1, sizeof(*p));
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    p->cfg = cfg;
    p->root_fd = -1;
    for (unsigned i = 0; i <= MC_OBJ_PROBE_DIR; i++)
        p->dir_fd[i] = -1;

    const char *call = "open";
    int err = make_dirs(cfg->root_dir, &call);
    if (err == 0) {
        p->root_fd = open(cfg->root_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (p->root_fd < 0)
            err = errno;
    }
    for (unsigned i = 0; err == 0 && i <= MC_OBJ_PROBE_DIR; i++) {
        char name[8];
        mc_obj_dir_name(i, name);
        if (mkdirat(p->root_fd, name, DIR_MODE) != 0 && errno != EEXIST) {
            call = "mkdir";
            err = errno;
            break;
        }
        p->dir_fd[i] = openat(p->root_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (p->dir_fd[i] < 0)
            err = errno;
    }
    /* Existing directories on a read-only mount: mkdir never ran, so ask. */
    if (err == 0 && faccessat(p->root_fd, ".", W_OK, AT_EACCESS) != 0) {
        call = "access(W_OK)";
        err = errno;
    }
    if (err != 0) {
        int code = posix_fail(p, err, OP_OPEN, call, ROOT_ONLY, cfg->root_dir);
        posix_close(p);
        return code;
    }
    /* The hash directories' entries live in the root, the root's in its parent. */
    int rc = sync_dir(p, p->root_fd, OP_OPEN, ROOT_ONLY, cfg->root_dir);
    int parent = rc == 0 ? openat(p->root_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (parent >= 0) {
        rc = sync_dir(p, parent, OP_OPEN, ROOT_ONLY, cfg->root_dir);
        close(parent);
    }
    if (rc != 0) {
        posix_close(p);
        return rc;
    }
    *impl = p;
    return 0;
}

/* pwritev of the whole iovec array at off, continuing after partial writes. 0 or an errno
 * (0-byte write: returns -1 so the caller reports a partial write). */
static int pwritev_all(int fd, struct iovec *iov, int n, off_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        if (w == 0)
            return -1;
        off += w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* preadv of the iovec array at off until it is full or the file ends; *got += bytes read. */
static int preadv_all(int fd, struct iovec *iov, int n, off_t off, uint64_t *got, int *eof)
{
    while (n > 0) {
        ssize_t r = preadv(fd, iov, n, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0) {
            *eof = 1;
            return 0;
        }
        off += r;
        *got += (uint64_t)r;
        while (n > 0 && (size_t)r >= iov->iov_len) {
            r -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + r;
            iov->iov_len -= (size_t)r;
        }
    }
    return 0;
}

static int posix_write(void *impl, unsigned dir, const char *name, const mc_obj_seg_t *segs,
                       size_t nsegs, uint64_t total)
{
    posix_adapter_t *p = impl;
    int dfd = p->dir_fd[dir];
    char tmp[32];
    mc_fs_temp_name(tmp);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, FILE_MODE);
    if (fd < 0)
        return posix_fail(p, errno, OP_WRITE, "create", dir, tmp);

    uint64_t xfer = p->cfg->write_xfer_size ? p->cfg->write_xfer_size : total;
    struct iovec iov[MAX_IOV];
    const char *call = "pwritev";
    int err = 0;
    for (uint64_t off = 0; off < total && err == 0; off += xfer) {
        uint64_t len = total - off < xfer ? total - off : xfer;
        size_t n = mc_obj_build_iovs(segs, nsegs, off, len, p->cfg->iovcnt, iov, MAX_IOV);
        err = pwritev_all(fd, iov, (int)n, (off_t)off);
    }
    if (err == 0 && fsync(fd) != 0) {
        call = "fsync";
        err = errno;
    }
    if (close(fd) != 0 && err == 0) {
        call = "close";
        err = errno;
    }
    if (err == 0)
        mc_failpoint("fs.write.before_publish"); /* the file is written, not yet named */
    if (err == 0 && renameat(dfd, tmp, dfd, name) != 0) {
        call = "rename";
        err = errno;
    }
    if (err == 0) /* published; failed if the name may not be durable (a reader may see it) */
        return sync_dir(p, dfd, OP_WRITE, dir, name);
    int code = posix_fail(p, err < 0 ? 0 : err, OP_WRITE, call, dir, err < 0 ? tmp : name);
    unlinkat(dfd, tmp, 0);
    return code;
}

static int posix_read(void *impl, unsigned dir, const char *name, const mc_obj_seg_t *segs,
                      size_t nsegs, uint64_t total, uint64_t *got)
{
    posix_adapter_t *p = impl;
    *got = 0;
    int fd = openat(p->dir_fd[dir], name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return posix_fail(p, errno, OP_READ, "open", dir, name);
    uint64_t xfer = p->cfg->read_xfer_size ? p->cfg->read_xfer_size : total;
    struct iovec iov[MAX_IOV];
    int err = 0, eof = 0;
    for (uint64_t off = 0; off < total && err == 0 && !eof; off += xfer) {
        uint64_t len = total - off < xfer ? total - off : xfer;
        size_t n = mc_obj_build_iovs(segs, nsegs, off, len, p->cfg->iovcnt, iov, MAX_IOV);
        err = preadv_all(fd, iov, (int)n, (off_t)off, got, &eof);
    }
    close(fd);
    return err ? posix_fail(p, err, OP_READ, "preadv", dir, name) : 0;
}

static int posix_remove(void *impl, unsigned dir, const char *name)
{
    posix_adapter_t *p = impl;
    if (unlinkat(p->dir_fd[dir], name, 0) != 0)
        return posix_fail(p, errno, OP_REMOVE, "unlink", dir, name);
    return sync_dir(p, p->dir_fd[dir], OP_REMOVE, dir, name);
}

static int posix_list_dir(void *impl, unsigned dir, mc_fs_name_cb cb, void *arg)
{
    posix_adapter_t *p = impl;
    int fd = openat(p->dir_fd[dir], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return posix_fail(p, errno, OP_LIST, "opendir", dir, ".");
    DIR *d = fdopendir(fd);
    if (!d) {
        int err = errno;
        close(fd);
        return posix_fail(p, err, OP_LIST, "fdopendir", dir, ".");
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno != 0)
                rc = posix_fail(p, errno, OP_LIST, "readdir", dir, ".");
            break;
        }
        if (e->d_type == DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rc = cb(e->d_name, arg);
        if (rc != 0)
            break;
    }
    closedir(d);
    return rc;
}

const mc_fs_ops_t mc_fs_posix_ops = {
    .name = "posix",
    .open = posix_open,
    .close = posix_close,
    .write = posix_write,
    .read = posix_read,
    .remove = posix_remove,
    .list_dir = posix_list_dir,
};
