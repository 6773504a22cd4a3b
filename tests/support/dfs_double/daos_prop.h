/*
 * daos_prop.h — TEST DOUBLE of DAOS's property header (see daos_fs.h). Declares only what the
 * double's other headers use: daos_prop_t (DAOS's layout), daos_cont_layout_t and its values,
 * DAOS_PROP_LABEL_MAX_LEN.
 */
#ifndef DFS_DOUBLE_DAOS_PROP_H
#define DFS_DOUBLE_DAOS_PROP_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <daos_types.h>

#define DAOS_PROP_LABEL_MAX_LEN (127)

typedef uint16_t daos_cont_layout_t;

enum {
    DAOS_PROP_CO_LAYOUT_UNKNOWN,
    DAOS_PROP_CO_LAYOUT_POSIX,
    DAOS_PROP_CO_LAYOUT_HDF5,
    DAOS_PROP_CO_LAYOUT_PYTHON,
};

struct daos_prop_entry; /* complete in DAOS; nothing here looks inside */

typedef struct {
    uint32_t dpp_nr;
    uint32_t dpp_reserv;
    struct daos_prop_entry *dpp_entries;
} daos_prop_t;

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_PROP_H */
