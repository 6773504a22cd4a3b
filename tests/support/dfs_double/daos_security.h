/*
 * daos_security.h — TEST DOUBLE of DAOS's security (ACL) header (see daos_fs.h). Nothing in it
 * is used; it exists so daos_cont.h includes what DAOS's does.
 */
#ifndef DFS_DOUBLE_DAOS_SECURITY_H
#define DFS_DOUBLE_DAOS_SECURITY_H

#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <daos_prop.h>

#endif /* DFS_DOUBLE_DAOS_SECURITY_H */
