/*
 * daos_obj.h — TEST DOUBLE of DAOS's object header (see daos_fs.h). Nothing in it is used (no
 * daos_obj_* calls); it includes what DAOS's does, which is how daos_fs.h users get events.
 */
#ifndef DFS_DOUBLE_DAOS_OBJ_H
#define DFS_DOUBLE_DAOS_OBJ_H

#include <daos_types.h>
#include <daos_event.h>
#include <daos_obj_class.h>
#include <daos_prop.h>

#endif /* DFS_DOUBLE_DAOS_OBJ_H */
