/*
 * fs_backends.c — the FS adapters of this build, by fs type: the table fs_adapter.c picks from
 * (fs_adapter_internal.h). Adding an adapter is its file with one `mc_fs_ops_t` plus one row here.
 */
#include "fs_adapter_internal.h"

#include <stddef.h>

const mc_fs_backend_t mc_fs_backends[] = {
    {"posix", &mc_fs_posix_ops},
#ifdef MC_HAVE_DAOS
    {"daos", &mc_fs_daos_ops},
#endif
    {NULL, NULL},
};
