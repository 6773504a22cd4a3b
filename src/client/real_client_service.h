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

#include "mooncake/store.h"

#include <stdint.h>

/* Opcodes of the dummy protocol: DummyRequest / DummyReply (wire/proto/dummy.proto). */
enum mc_dummy_opcode {
    MC_DUMMY_HELLO = 200,           /* client_id / code */
    MC_DUMMY_MAP = 201,             /* ranges[0] = {region, 0, size}, flag, + 1 memfd / code */
    MC_DUMMY_UNMAP = 202,           /* ranges[0].region / code */
    MC_DUMMY_PING = 203,            /* - / code 0 */
    MC_DUMMY_WRITE = 210,           /* keys, ranges, config, flag upsert / code, results */
    MC_DUMMY_READ = 211,            /* keys, ranges (capacities) / code, results */
    MC_DUMMY_EXIST = 212,           /* keys / code, results */
    MC_DUMMY_REMOVE = 213,          /* keys, force / code, results */
    MC_DUMMY_REMOVE_ALL = 214,      /* force / code */
    MC_DUMMY_REMOVE_BY_REGEX = 215, /* regex, force / code */
    MC_DUMMY_GET_SIZE = 216,        /* keys[0] / code */
    MC_DUMMY_REPLICA_DESC = 217,    /* keys[0], flag = capacity / code, replicas, count */
    MC_DUMMY_HEALTH = 218,          /* - / code: the real client's own health_check */
    MC_DUMMY_OFFLOAD_STATS = 219,   /* - / code, stats */
    MC_DUMMY_SET_OFFLOADING = 220,  /* flag / code */
};

#define MC_DUMMY_SOCKET_FMT "mooncake_client_%d.sock" /* abstract: a leading NUL byte */
#define MC_DUMMY_MAX_CONNECTIONS 256 /* connections (a dummy opens --threads of them) */
#define MC_DUMMY_MAX_LANES 16        /* connections one dummy opens at most (--threads cap) */
#define MC_DUMMY_MAX_REGIONS 1024
#define MC_DUMMY_MAX_MAPPED_BYTES (4ull << 40) /* 4 TiB of address space per dummy */
#define MC_DUMMY_MAX_BATCH 65536
#define MC_DUMMY_MAX_REPLICAS 64 /* descriptors one REPLICA_DESC answers */
#define MC_DUMMY_TTL_MS 10000    /* upstream's DEFAULT_CLIENT_LIVE_TTL_SEC */
#define MC_DUMMY_PING_MS 1000
#define MC_DUMMY_RECONNECT_MS 2000
#define MC_DUMMY_AUTH_SERVICE "dummy"

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

/*
 * Frame I/O shared by both ends of the dummy protocol, on a connected unix stream socket.
 * send: header + body in order, with `pass_fd` (>= 0) attached as SCM_RIGHTS to the first byte.
 * recv: one frame whose body is at most max_body bytes; *body is malloc'd (NULL when empty;
 * caller frees); a descriptor that arrived with it goes to *passed_fd (else -1; caller closes),
 * any others are closed. Both finish by deadline_ms (mc_now_ms clock). 0, MC_ERR_RPC_FAIL (peer
 * closed or socket error), MC_ERR_RPC_TIMEOUT (deadline), MC_ERR_DESERIALIZE_FAIL /
 * MC_ERR_BUFFER_OVERFLOW (bad header, body too long).
 */
#include "frame.h"
int mc_dummy_send_frame(int fd, uint16_t opcode, uint64_t request_id, const uint8_t *body,
                        size_t len, int pass_fd, uint64_t deadline_ms);
int mc_dummy_recv_frame(int fd, uint32_t max_body, mc_frame_header_t *h, uint8_t **body,
                        int *passed_fd, uint64_t deadline_ms);

/* store_client.c: lets a store with local_buffer_size 0 run the zero-copy calls for dummies
 * (it stages nothing itself: every byte is in the dummies' memory). */
void mc_store_allow_zero_copy_io(mc_store_t *store);

#endif /* MC_CLIENT_REAL_CLIENT_SERVICE_H */
