/*
 * te_auth.h — the cluster secret a Transfer Engine was created with (wire/auth.h), for the
 * servers and clients of the layers above that run beside it and must prove the same secret
 * (the offload fetch server and its readers). Not part of the public API.
 */
#ifndef MC_TRANSFER_TE_AUTH_H
#define MC_TRANSFER_TE_AUTH_H

#include "auth.h"
#include "mooncake/transfer_engine.h"

/* Borrowed; valid until mc_te_destroy. NULL when the engine has no secret. Thread-safe. */
const mc_auth_t *mc_te_auth(const mc_transfer_engine_t *te);

#endif /* MC_TRANSFER_TE_AUTH_H */
