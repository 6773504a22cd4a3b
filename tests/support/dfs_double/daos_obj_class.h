/*
 * daos_obj_class.h — TEST DOUBLE of DAOS's object class header (see daos_fs.h for what the
 * double is and where it is stricter than DAOS). Class ids are DAOS's: (redundancy << 24) |
 * groups, groups 0xFFFF for "X". daos_oclass_name2id() knows exactly the public names DAOS's
 * class table has ("S1".."S32", "SX", "RP_<r>G<g>", "RP_<r>GX", "RP_XSF", "EC_<k>P<p>G<g>",
 * "EC_<k>P<p>GX"), case-sensitive, no "OC_" prefix; anything else is OC_UNKNOWN (0). Only the
 * enum values the adapter and its tests use are declared here.
 */
#ifndef DFS_DOUBLE_DAOS_OBJ_CLASS_H
#define DFS_DOUBLE_DAOS_OBJ_CLASS_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <sys/types.h>
#include <inttypes.h>

#include <daos_types.h>

#define MAX_OBJ_CLASS_NAME_LEN 24
#define MAX_NUM_GROUPS ((1 << 16UL) - 1)
#define OC_REDUN_SHIFT 24
#define OBJ_CLASS_DEF(redun, grp_nr) ((redun << OC_REDUN_SHIFT) | grp_nr)

enum daos_obj_redun {
    OC_UNKNOWN = 0,
    OR_RP_1 = 1,
    OC_S1 = OBJ_CLASS_DEF(OR_RP_1, 1ULL),
    OC_SX = OBJ_CLASS_DEF(OR_RP_1, MAX_NUM_GROUPS),
};

typedef uint32_t daos_oclass_id_t;

/* The class id of a class name, 0 / OC_UNKNOWN if unknown. name must not be NULL (as in DAOS,
 * which reads it unchecked; the double asserts). */
int daos_oclass_name2id(const char *name);

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_OBJ_CLASS_H */
