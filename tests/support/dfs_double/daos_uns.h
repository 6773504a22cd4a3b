/*
 * daos_uns.h — TEST DOUBLE of DAOS's libduns header (Unified Namespace path resolution; see
 * daos_fs.h for what the double is and where it is stricter than DAOS). Same types and
 * semantics as DAOS's duns_resolve_path:
 *   - "daos://<pool>/<cont>[/rel]" (or "/<pool>/<cont>[/rel]" with DUNS_NO_PREFIX), and any
 *     path with DUNS_NO_CHECK_PATH, are parsed without touching the filesystem;
 *   - a filesystem path must exist (statfs); the xattr "user.daos" =
 *     "DAOS.POSIX://<pool>/<cont>" (what dfuse shows on a container's root) is read on its
 *     realpath and then on each parent (not with DUNS_NO_REVERSE_LOOKUP); da_rel_path is the path
 *     below that directory ("/a/b"), NULL at the container root.
 * Errors are positive errno values: ENODATA when no directory up to "/" carries the attribute,
 * ENOTSUP when the filesystem has no extended attributes (as DAOS: no other fallback).
 */
#ifndef DFS_DOUBLE_DAOS_UNS_H
#define DFS_DOUBLE_DAOS_UNS_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <daos_prop.h>
#include <daos_obj_class.h>
#include <daos_cont.h>

enum {
    DUNS_NO_PREFIX = (1 << 0),
    DUNS_NO_REVERSE_LOOKUP = (1 << 1),
    DUNS_NO_CHECK_PATH = (1 << 2),
};

struct duns_attr_t {
    daos_cont_layout_t da_type;
    daos_oclass_id_t da_oclass_id;
    daos_size_t da_chunk_size;
    daos_prop_t *da_props;
    uint32_t da_flags;
    char da_pool[DAOS_PROP_LABEL_MAX_LEN + 1];
    char da_cont[DAOS_PROP_LABEL_MAX_LEN + 1];
    char *da_sys;
    char *da_rel_path;
    bool da_on_lustre;
    bool da_no_prefix;
    uuid_t da_puuid;
    uuid_t da_cuuid;
    daos_oclass_id_t da_dir_oclass_id;
    daos_oclass_id_t da_file_oclass_id;
    char da_hints[DAOS_CONT_HINT_MAX_LEN];
};

#define DUNS_XATTR_NAME "user.daos"
#define DUNS_MAX_XATTR_LEN 170

int duns_resolve_path(const char *path, struct duns_attr_t *attr);
void duns_destroy_attr(struct duns_attr_t *attrp);

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_UNS_H */
