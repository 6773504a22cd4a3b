/*
 * store_library.c — the one source of its own in libmooncake_store.so, the shared library C
 * programs link with -lmooncake_store. The library is the static layers (store client, Transfer
 * Engine, wire, common) linked whole; this file adds what only the shared library needs.
 */
#include "mooncake/version.h"

const char *mc_version(void)
{
    return MC_VERSION_STRING;
}
