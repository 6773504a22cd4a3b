/*
 * daos_pool.h — TEST DOUBLE of DAOS's pool header (see daos_fs.h). Nothing in it is used (the
 * adapter connects with dfs_connect, not daos_pool_connect).
 */
#ifndef DFS_DOUBLE_DAOS_POOL_H
#define DFS_DOUBLE_DAOS_POOL_H

#include <inttypes.h>
#include <uuid/uuid.h>
#include <daos_prop.h>

#endif /* DFS_DOUBLE_DAOS_POOL_H */
