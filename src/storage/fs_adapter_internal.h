/*
 * fs_adapter_internal.h — what an FS adapter implements behind include/mooncake/fs_adapter.h.
 *
 * fs_adapter.c owns everything that is the same for every filesystem: argument checks, key
 * escaping and hash directories, the header, checksums, size checks and list decoding. An
 * adapter only moves bytes of named files inside the 256 hash directories (and the probe
 * directory): publish a file atomically from a [header | value] stream, read a prefix of a file,
 * remove, enumerate. Each adapter maps its errors (errno, DER) to store codes in exactly one
 * function and logs the errno there.
 *
 * All operations are called concurrently from many threads; `impl` is the adapter's private
 * state, created by open and freed by close (never concurrently with other calls).
 */
#ifndef MC_STORAGE_FS_ADAPTER_INTERNAL_H
#define MC_STORAGE_FS_ADAPTER_INTERNAL_H

#include "mooncake/fs_adapter.h"
#include "object_layout.h"

typedef int (*mc_fs_name_cb)(const char *name, void *arg);

typedef struct mc_fs_ops {
    const char *name;
    /* cfg is validated, owned by the caller and valid until close; root_dir is absolute. */
    int (*open)(const mc_fs_config_t *cfg, void **impl);
    void (*close)(void *impl);
    /*
     * Writes segs (total bytes) as file `name` of directory `dir` (0..255 or MC_OBJ_PROBE_DIR):
     * to a temporary name first, split by the write transfer size into iovcnt pieces, then
     * renamed over `name`. Nothing is left behind on failure.
     */
    int (*write)(void *impl, unsigned dir, const char *name, const mc_obj_seg_t *segs, size_t nsegs,
                 uint64_t total);
    /*
     * Reads bytes [0, total) of file `name` into segs, split by the read transfer size into
     * iovcnt pieces. *got = bytes read before the end of the file (< total for a short file).
     */
    int (*read)(void *impl, unsigned dir, const char *name, const mc_obj_seg_t *segs, size_t nsegs,
                uint64_t total, uint64_t *got);
    int (*remove)(void *impl, unsigned dir, const char *name);
    /* cb(name) for every entry of directory `dir` but "." and ".." and subdirectories the
     * adapter can tell apart without a stat: objects and temporaries alike. */
    int (*list_dir)(void *impl, unsigned dir, mc_fs_name_cb cb, void *arg);
    /* Optional (NULL: nothing to count): the adapter's health counts (fs_adapter.h). */
    void (*health)(void *impl, mc_fs_health_stats_t *out);
} mc_fs_ops_t;

extern const mc_fs_ops_t mc_fs_posix_ops;
#ifdef MC_HAVE_DAOS
extern const mc_fs_ops_t mc_fs_daos_ops;
#endif

/* The adapters this build has, by fs type (fs_backends.c; ended by a NULL fs_type). The front end
 * picks from it and names no adapter itself. */
typedef struct mc_fs_backend {
    const char *fs_type;
    const mc_fs_ops_t *ops;
} mc_fs_backend_t;
extern const mc_fs_backend_t mc_fs_backends[];

/* A temporary file name unique across processes and hosts, naming its writer (object_layout.h,
 * mc_obj_temp_id_t). out: at least 32 bytes. */
void mc_fs_temp_name(char *out);
/* This process's host identity, as temporary names carry it (fs_common.c). */
uint32_t mc_fs_host_id(void);

/*
 * The store code of a filesystem errno that every adapter maps the same way (not found,
 * permission, quota, timeout, service unavailable, stale handle); `other` for any other errno.
 * An adapter's error function handles its own special values (ENODATA, EAGAIN, ENOMEM, 0) first.
 */
int mc_fs_errno_code(int err, int other);

#endif /* MC_STORAGE_FS_ADAPTER_INTERNAL_H */
