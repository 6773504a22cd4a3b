/*
 * cart/types.h — TEST DOUBLE of DAOS's CaRT type header (see ../daos_fs.h). The real one
 * declares CaRT types nothing here uses; it includes <stdint.h> and <gurt/types.h>, and so does
 * this one, so daos_types.h reaches gurt's types the way it does in DAOS.
 */
#ifndef DFS_DOUBLE_CART_TYPES_H
#define DFS_DOUBLE_CART_TYPES_H

#include <stdint.h>
#include <gurt/types.h>

#endif /* DFS_DOUBLE_CART_TYPES_H */
