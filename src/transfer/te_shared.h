/*
 * te_shared.h — what a Transfer Engine shares with the servers and clients of the layers above
 * that run beside it (the offload fetch server and its readers): its cluster secret
 * (wire/auth.h), which they must prove too, and its transfer timeout, which bounds their requests
 * as it bounds the engine's. Not part of the public API.
 */
#ifndef MC_TRANSFER_TE_SHARED_H
#define MC_TRANSFER_TE_SHARED_H

#include "auth.h"
#include "mooncake/transfer_engine.h"

/* Borrowed; valid until mc_te_destroy. NULL when the engine has no secret. Thread-safe. */
const mc_auth_t *mc_te_auth(const mc_transfer_engine_t *te);
/* The engine's transfer timeout in ms (config, MC_TRANSFER_TIMEOUT, or 30 s). Thread-safe. */
int mc_te_timeout_ms(const mc_transfer_engine_t *te);

#endif /* MC_TRANSFER_TE_SHARED_H */
