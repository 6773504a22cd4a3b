/*
 * daos_fs.h — TEST DOUBLE standing in for DAOS's libdfs header, which CI cannot use (no DAOS on
 * Debian). Same names, types, constants and semantics as the libdfs subset mooncake-c's DAOS
 * adapter and its tests use (../shared/reference/daos-dfs.md §2); implemented by dfs_double.c
 * over a local directory: a container is the directory $DFS_DOUBLE_ROOT/<pool>/<cont>
 * (DFS_DOUBLE_ROOT defaults to /tmp/dfs_double).
 *
 * Conventions as in libdfs: every dfs_* call returns 0 or a positive errno; with an event the
 * I/O calls return 0 once scheduled and report the errno in ev->ev_error at completion.
 * Divergences from the real library (documented in README.md beside this file): object class and
 * chunk size are recorded (xattrs) but do not change the layout; unlinking an open file keeps its
 * data readable (POSIX), where DAOS punches it.
 */
#ifndef DFS_DOUBLE_DAOS_FS_H
#define DFS_DOUBLE_DAOS_FS_H

#include "daos.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DFS_MAX_NAME NAME_MAX
#define DFS_MAX_PATH PATH_MAX
#define DFS_DEFAULT_CHUNK_SIZE 1048576
#define DFS_MAX_FSIZE (~0ULL)
#define DFS_RDONLY O_RDONLY
#define DFS_RDWR O_RDWR
#define DFS_RELAXED 0
#define DFS_BALANCED 4

typedef struct dfs dfs_t;
typedef struct dfs_obj dfs_obj_t;
typedef struct daos_prop daos_prop_t;

typedef struct {
    uint64_t da_id;
    daos_size_t da_chunk_size;
    daos_oclass_id_t da_oclass_id;
    daos_oclass_id_t da_dir_oclass_id;
    daos_oclass_id_t da_file_oclass_id;
    uint32_t da_mode;
    char da_hints[128];
    daos_prop_t *da_props;
} dfs_attr_t;

/* Module init/fini (refcounted). dfs_connect before dfs_init: EACCES. */
int dfs_init(void);
int dfs_fini(void);

/* pool/cont: labels or UUID strings; flags O_RDONLY|O_RDWR [|O_CREAT creates the container]. */
int dfs_connect(const char *pool, const char *sys, const char *cont, int flags, dfs_attr_t *attr,
                dfs_t **dfs);
int dfs_disconnect(dfs_t *dfs);

/* Absolute path inside the container ("/" = root). */
int dfs_lookup(dfs_t *dfs, const char *path, int flags, dfs_obj_t **obj, mode_t *mode,
               struct stat *stbuf);
int dfs_lookup_rel(dfs_t *dfs, dfs_obj_t *parent, const char *name, int flags, dfs_obj_t **obj,
                   mode_t *mode, struct stat *stbuf);

/* mode must carry S_IFREG or S_IFDIR; cid / chunk_size apply at create (0 = default). */
int dfs_open(dfs_t *dfs, dfs_obj_t *parent, const char *name, mode_t mode, int flags,
             daos_oclass_id_t cid, daos_size_t chunk_size, const char *value, dfs_obj_t **obj);
int dfs_release(dfs_obj_t *obj);

int dfs_write(dfs_t *dfs, dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off, daos_event_t *ev);
int dfs_read(dfs_t *dfs, dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off, daos_size_t *read_size,
             daos_event_t *ev);
int dfs_get_size(dfs_t *dfs, dfs_obj_t *obj, daos_size_t *size);
int dfs_get_chunk_size(dfs_obj_t *obj, daos_size_t *chunk_size);
int dfs_sync(dfs_t *dfs);

int dfs_stat(dfs_t *dfs, dfs_obj_t *parent, const char *name, struct stat *stbuf);
int dfs_ostat(dfs_t *dfs, dfs_obj_t *obj, struct stat *stbuf);
int dfs_mkdir(dfs_t *dfs, dfs_obj_t *parent, const char *name, mode_t mode, daos_oclass_id_t cid);
int dfs_remove(dfs_t *dfs, dfs_obj_t *parent, const char *name, bool force, daos_obj_id_t *oid);
int dfs_move(dfs_t *dfs, dfs_obj_t *parent, const char *name, dfs_obj_t *new_parent,
             const char *new_name, daos_obj_id_t *oid);
/* *nr in: capacity of dirs; out: entries returned (only d_name is filled). */
int dfs_readdir(dfs_t *dfs, dfs_obj_t *obj, daos_anchor_t *anchor, uint32_t *nr,
                struct dirent *dirs);

#ifdef __cplusplus
}
#endif
#endif /* DFS_DOUBLE_DAOS_FS_H */
