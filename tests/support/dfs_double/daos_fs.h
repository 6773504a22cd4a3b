/*
 * daos_fs.h — TEST DOUBLE of DAOS's libdfs header (with the other DAOS-named headers beside it:
 * daos.h and its parts, daos_uns.h, gurt/types.h, cart/types.h). CI has no DAOS (no Debian
 * packages, no servers), so the DAOS adapter is built and tested against this double: a small
 * library (dfs_double.c) with DAOS's names, types, layouts and calling conventions for the
 * subset the adapter uses, implemented over a local directory: a container is the directory
 * $DFS_DOUBLE_ROOT/<pool>/<cont> (default /tmp/dfs_double). Checked against DAOS's public
 * headers and src/client/dfs (daos-stack/daos, API 2.8); see README.md beside this file.
 *
 * The double is STRICTER than DAOS, never looser, so code that builds and passes here builds
 * and behaves on DAOS:
 *  - every header includes the DAOS headers its real namesake includes, in the same order, and
 *    only a subset of the system headers it includes (this one: exactly <dirent.h>,
 *    <inttypes.h>, <sys/stat.h>); it declares only what the adapter uses, with DAOS's exact
 *    signatures and types. So O_RDWR needs <fcntl.h>, daos_anchor_is_eof needs <daos.h>, ...;
 *  - dfs_move is relaxed-mode DAOS: not atomic (the destination is removed, then the new entry
 *    inserted conditionally; see dfs_move below);
 *  - removing or replacing a file punches its data: a handle still open on it reads 0 bytes
 *    (POSIX would keep the data readable);
 *  - object class names are DAOS's class table, exactly (daos_obj_class.h);
 *  - duns_resolve_path reads only the user.daos xattr, ENOTSUP where the filesystem has none.
 *
 * Conventions as in libdfs: every dfs_* call returns 0 or a positive errno; with an event the
 * I/O calls return 0 once scheduled and report the errno in ev->ev_error at completion.
 */
#ifndef DFS_DOUBLE_DAOS_FS_H
#define DFS_DOUBLE_DAOS_FS_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <dirent.h>
#include <inttypes.h>
#include <sys/stat.h>

#include <daos_types.h>
#include <daos_obj.h>
#include <daos_obj_class.h>
#include <daos_array.h>
#include <daos_cont.h>

#define DFS_MAX_NAME NAME_MAX
#define DFS_MAX_PATH PATH_MAX
#define DFS_MAX_FSIZE (~0ULL)
#define DFS_DEFAULT_CHUNK_SIZE 1048576

typedef struct dfs_obj dfs_obj_t;
typedef struct dfs dfs_t;

#define DFS_BALANCED 4 /* transactional metadata (not modelled: the double is relaxed) */
#define DFS_RELAXED 0
#define DFS_RDONLY O_RDONLY
#define DFS_RDWR O_RDWR

typedef struct {
    uint64_t da_id;
    daos_size_t da_chunk_size;
    daos_oclass_id_t da_oclass_id;
    daos_prop_t *da_props;
    uint32_t da_mode;
    daos_oclass_id_t da_dir_oclass_id;
    daos_oclass_id_t da_file_oclass_id;
    char da_hints[DAOS_CONT_HINT_MAX_LEN];
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

/* *read_size: bytes read, short at the end of the file (0 for a punched file). */
int dfs_read(dfs_t *dfs, dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off, daos_size_t *read_size,
             daos_event_t *ev);
int dfs_write(dfs_t *dfs, dfs_obj_t *obj, d_sg_list_t *sgl, daos_off_t off, daos_event_t *ev);
int dfs_get_size(dfs_t *dfs, dfs_obj_t *obj, daos_size_t *size);

/* *nr in: capacity of dirs; out: entries returned (only d_name is filled). */
int dfs_readdir(dfs_t *dfs, dfs_obj_t *obj, daos_anchor_t *anchor, uint32_t *nr,
                struct dirent *dirs);
int dfs_mkdir(dfs_t *dfs, dfs_obj_t *parent, const char *name, mode_t mode, daos_oclass_id_t cid);

/* A file's data is punched first (open handles then read 0 bytes), then its entry removed. */
int dfs_remove(dfs_t *dfs, dfs_obj_t *parent, const char *name, bool force, daos_obj_id_t *oid);

/*
 * Relaxed-mode DAOS: (1) the source entry is looked up (ENOENT); (2) an existing destination is
 * removed: its data punched, then its entry removed if it still exists (ENOENT when another
 * mover removed it first); (3) the source object is inserted under the new name if that name is
 * free (EEXIST when another mover inserted one since step 2); (4) the source entry is removed.
 * Between (2) and (3) the name is absent (lookups: ENOENT); between (3) and (4) the object has
 * both names. DFS_DOUBLE_MOVE_WINDOW_US=<µs> (read at each call) sleeps between the steps.
 */
int dfs_move(dfs_t *dfs, dfs_obj_t *parent, const char *name, dfs_obj_t *new_parent,
             const char *new_name, daos_obj_id_t *oid);

int dfs_get_chunk_size(dfs_obj_t *obj, daos_size_t *chunk_size);
int dfs_stat(dfs_t *dfs, dfs_obj_t *parent, const char *name, struct stat *stbuf);
int dfs_ostat(dfs_t *dfs, dfs_obj_t *obj, struct stat *stbuf);
int dfs_sync(dfs_t *dfs);

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_FS_H */
