/*
 * daos_cont.h — TEST DOUBLE of DAOS's container header (see daos_fs.h). Declares only
 * DAOS_CONT_HINT_MAX_LEN (dfs_attr_t, struct duns_attr_t); no daos_cont_* calls.
 */
#ifndef DFS_DOUBLE_DAOS_CONT_H
#define DFS_DOUBLE_DAOS_CONT_H

#include <daos_security.h>

#define DAOS_CONT_HINT_MAX_LEN 128

#endif /* DFS_DOUBLE_DAOS_CONT_H */
