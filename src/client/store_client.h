/*
 * store_client.h — what the real client (store_client.c, set up by mc_store_setup) offers beyond
 * include/mooncake/store.h, to mooncake_client's services in this folder.
 *
 * Thread-safety: call before the store serves any dummy (it sets a flag the calls read, without
 * a lock): real_client_service.c calls it before its socket listens.
 */
#ifndef MC_CLIENT_STORE_CLIENT_H
#define MC_CLIENT_STORE_CLIENT_H

#include "mooncake/store.h"

/* Lets a real store with local_buffer_size 0 run the zero-copy calls for dummies
 * (real_client_service.c): it stages nothing itself, every byte is in the dummies' memory. A
 * store of another backend, or NULL, is left as it is. */
void mc_store_allow_zero_copy_io(mc_store_t *store);

#endif /* MC_CLIENT_STORE_CLIENT_H */
