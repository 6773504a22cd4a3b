/*
 * real_client_service.h — the real client's service for dummy clients (upstream's
 * RealClient dummy-facing RPC + IPC socket), run by mooncake_client.
 *
 * A dummy client (mc_store_setup_dummy, dummy_client.c) in another process on the same host
 * connects to the abstract unix socket "@mooncake_client_<port>.sock" (upstream's name; <port> is
 * mooncake_client's --port) and forwards every store call. Object bytes never cross the socket:
 * the dummy hands its memory over as memfd file descriptors (SCM_RIGHTS, DUMMY_MAP), the service
 * maps them, registers them with its store (mc_store_register_buffer) and runs the dummy's calls
 * as zero-copy calls on (region, offset, size) ranges, each checked against that dummy's regions.
 *
 * Who may connect: a process of this user or root (SO_PEERCRED), and with a cluster secret
 * (wire/auth.h) only after the challenge-response, service name "dummy"; same host by
 * construction (abstract unix sockets are per network namespace).
 *
 * Server model: one blocking thread per connection, plus the accept thread. A dummy opens
 * --threads connections ("lanes"; the HELLO answer says how many), so that many of its calls run
 * at once; each lane is its own session here (its own mappings of the dummy's memfds). Limits
 * (docs/limits.md): MC_DUMMY_MAX_CONNECTIONS dummies at once (more are closed at accept),
 * MC_DUMMY_MAX_REGIONS regions and MC_DUMMY_MAX_MAPPED_BYTES bytes mapped per dummy, request bodies
 * up to MC_FRAME_DEFAULT_MAX_BODY, MC_DUMMY_MAX_BATCH keys per call. A dummy silent for
 * MC_DUMMY_TTL_MS (it pings every second) is dropped; so is one whose socket closes: its regions
 * are unregistered and unmapped after its last call returned, so no transfer of that dummy is in
 * flight when its memory goes (and the memory is the dummy's memfd, never reused by anyone else
 * while mapped here).
 *
 * Thread-safety: start/stop from one thread; stats from any.
 */
#ifndef MC_CLIENT_REAL_CLIENT_SERVICE_H
#define MC_CLIENT_REAL_CLIENT_SERVICE_H

#include "dummy_wire.h" /* the protocol served: opcodes, socket name, limits, frame I/O */
#include "mooncake/store.h"

#include <stdint.h>

/* The service's own limits, beyond the protocol's (dummy_wire.h). */
#define MC_DUMMY_MAX_CONNECTIONS 256           /* connections (a dummy opens --threads of them) */
#define MC_DUMMY_MAX_MAPPED_BYTES (4ull << 40) /* 4 TiB of address space per dummy */

typedef struct mc_real_client_service mc_real_client_service_t;

typedef struct mc_real_client_service_stats {
    uint64_t dummies;          /* connected now */
    uint64_t regions;          /* mapped now, all dummies */
    uint64_t dummies_dropped;  /* since start: closed or silent for MC_DUMMY_TTL_MS */
    uint64_t refused;          /* connections refused: uid, secret, over the limit */
    uint64_t requests_refused; /* ranges outside a dummy's regions, bad fds, bad bodies */
} mc_real_client_service_stats_t;

/*
 * Starts serving dummies for `store` (borrowed; must outlive the service) on
 * "@mooncake_client_<port>.sock". `threads` (mooncake_client --threads, 1..MC_DUMMY_MAX_LANES):
 * how many connections, each served by its own thread, one dummy may open, so that many of its
 * calls run at once. `secret`/`secret_file`: as mc_store_config_t (env fallbacks
 * included); with a secret every dummy must prove it. Returns 0, MC_ERR_INVALID_PARAMS (bad port,
 * unreadable secret file), MC_ERR_INTERNAL_ERROR (the socket name is taken: another
 * mooncake_client with this --port runs here; the log says so).
 */
int mc_real_client_service_start(mc_store_t *store, int port, int threads, const char *secret,
                                 const char *secret_file, mc_real_client_service_t **out);
/* Closes the socket and every dummy connection, waits for their threads, unmaps everything.
 * NULL is a no-op. */
void mc_real_client_service_stop(mc_real_client_service_t *svc);
void mc_real_client_service_get_stats(mc_real_client_service_t *svc,
                                      mc_real_client_service_stats_t *out);

#endif /* MC_CLIENT_REAL_CLIENT_SERVICE_H */
