/*
 * daos_array.h — TEST DOUBLE of DAOS's array header (see daos_fs.h). Nothing in it is used.
 */
#ifndef DFS_DOUBLE_DAOS_ARRAY_H
#define DFS_DOUBLE_DAOS_ARRAY_H

#include <daos_types.h>
#include <daos_obj.h>
#include <daos_obj_class.h>

#endif /* DFS_DOUBLE_DAOS_ARRAY_H */
