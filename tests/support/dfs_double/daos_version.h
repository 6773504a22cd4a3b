/*
 * daos_version.h — TEST DOUBLE of DAOS's generated version header (see daos_fs.h): the API
 * version of the DAOS the double was checked against.
 */
#ifndef DFS_DOUBLE_DAOS_VERSION_H
#define DFS_DOUBLE_DAOS_VERSION_H

#include <stdint.h>

#define DAOS_API_VERSION_MAJOR 2
#define DAOS_API_VERSION_MINOR 8
#define DAOS_API_VERSION_FIX 0

#endif /* DFS_DOUBLE_DAOS_VERSION_H */
