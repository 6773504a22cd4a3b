/*
 * daos_uns.h — TEST DOUBLE standing in for DAOS's libduns header (Unified Namespace path
 * resolution), which CI cannot use (no DAOS on Debian). Same names and semantics as the real
 * duns_resolve_path (../shared/reference/daos-dfs.md §1.2), implemented by dfs_double.c:
 *   - "daos://<pool>/<cont>[/rel]" (or "<pool>/<cont>[/rel]" with DUNS_NO_PREFIX), and any path
 *     with DUNS_NO_CHECK_PATH, are parsed without touching the filesystem;
 *   - a filesystem path must exist (statfs); its realpath and then each parent are searched for
 *     the xattr "user.daos" = "DAOS.POSIX://<pool>/<cont>" (what dfuse shows on a container's
 *     root) or, where xattrs are unavailable, a marker file ".daos_cont" holding the same text;
 *     da_rel_path is the path below that directory ("/a/b"), NULL at the container root.
 * Errors are positive errno values: ENODATA when no directory up to "/" carries the attribute.
 */
#ifndef DFS_DOUBLE_DAOS_UNS_H
#define DFS_DOUBLE_DAOS_UNS_H

#include "daos.h"
#include "daos_fs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DUNS_XATTR_NAME "user.daos"
#define DUNS_MAX_XATTR_LEN 170
#define DUNS_NO_PREFIX 1
#define DUNS_NO_REVERSE_LOOKUP 2
#define DUNS_NO_CHECK_PATH 4
/* The double's fallback for filesystems without user xattrs (not a DAOS name). */
#define DFS_DOUBLE_MARKER_FILE ".daos_cont"

typedef enum {
    DAOS_PROP_CO_LAYOUT_UNKNOWN = 0,
    DAOS_PROP_CO_LAYOUT_POSIX = 1,
    DAOS_PROP_CO_LAYOUT_HDF5 = 2,
    DAOS_PROP_CO_LAYOUT_PYTHON = 3,
} daos_cont_layout_t;

struct duns_attr_t {
    daos_cont_layout_t da_type;
    daos_oclass_id_t da_oclass_id;
    daos_size_t da_chunk_size;
    daos_prop_t *da_props;
    int da_flags;
    char da_pool[128];
    char da_cont[128];
    char *da_sys;
    char *da_rel_path;
    bool da_on_lustre;
    bool da_no_prefix;
    unsigned char da_puuid[16];
    unsigned char da_cuuid[16];
    daos_oclass_id_t da_dir_oclass_id;
    daos_oclass_id_t da_file_oclass_id;
    char da_hints[128];
};

int duns_resolve_path(const char *path, struct duns_attr_t *attr);
void duns_destroy_attr(struct duns_attr_t *attr);

#ifdef __cplusplus
}
#endif
#endif /* DFS_DOUBLE_DAOS_UNS_H */
