/*
 * daos_mgmt.h — TEST DOUBLE of DAOS's management header (see daos_fs.h). Nothing in it is used.
 */
#ifndef DFS_DOUBLE_DAOS_MGMT_H
#define DFS_DOUBLE_DAOS_MGMT_H

#include <uuid/uuid.h>
#include <daos_cont.h>

#endif /* DFS_DOUBLE_DAOS_MGMT_H */
