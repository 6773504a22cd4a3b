/*
 * daos_api.h — TEST DOUBLE of DAOS's daos_api.h (see daos_fs.h): daos_anchor_is_eof, which only
 * <daos.h> brings in (daos_fs.h does not).
 */
#ifndef DFS_DOUBLE_DAOS_API_H
#define DFS_DOUBLE_DAOS_API_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <daos_types.h>

static inline bool daos_anchor_is_eof(daos_anchor_t *anchor)
{
    return anchor->da_type == DAOS_ANCHOR_TYPE_EOF;
}

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_API_H */
