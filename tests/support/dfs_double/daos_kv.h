/*
 * daos_kv.h — TEST DOUBLE of DAOS's key-value header (see daos_fs.h). Nothing in it is used; it
 * exists so daos.h includes what DAOS's does.
 */
#ifndef DFS_DOUBLE_DAOS_KV_H
#define DFS_DOUBLE_DAOS_KV_H

#include <daos_types.h>
#include <daos_obj.h>

#endif /* DFS_DOUBLE_DAOS_KV_H */
