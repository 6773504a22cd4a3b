/*
 * daos.h — TEST DOUBLE of DAOS's umbrella header (see daos_fs.h for what the double is and where
 * it is stricter than DAOS): includes the same headers in the same order, each of which declares
 * only the part of DAOS the adapter uses.
 */
#ifndef DFS_DOUBLE_DAOS_H
#define DFS_DOUBLE_DAOS_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <daos_version.h>
#include <daos_types.h>
#include <daos_event.h>
#include <daos_obj.h>
#include <daos_array.h>
#include <daos_kv.h>
#include <daos_prop.h>
#include <daos_cont.h>
#include <daos_pool.h>
#include <daos_mgmt.h>
#include <daos_security.h>
#include <daos_api.h>

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_H */
