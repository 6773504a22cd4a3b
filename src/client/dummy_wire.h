/*
 * dummy_wire.h — the dummy-client protocol, both ends of it: the opcodes of DummyRequest /
 * DummyReply (wire/proto/dummy.proto), the socket's name, the limits and the liveness timing both
 * ends agree on, and the frame I/O on the unix stream socket (frames as wire/frame.h, each
 * optionally carrying one descriptor as SCM_RIGHTS).
 *
 * The dummy (dummy_client.c) and the real client's service (real_client_service.c) both speak it
 * and neither calls the other: this file is what they share.
 *
 * Thread-safety: the functions keep no state; one socket is used by one thread at a time (the
 * caller's lock or thread). Ownership: as written above each function.
 */
#ifndef MC_CLIENT_DUMMY_WIRE_H
#define MC_CLIENT_DUMMY_WIRE_H

#include "frame.h"

#include <stddef.h>
#include <stdint.h>

/* Opcodes of the dummy protocol: request / reply (wire/proto/dummy.proto). */
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
    MC_DUMMY_CREATE_TASK = 221,     /* keys[0], targets, source, flag move / code, task_id */
    MC_DUMMY_QUERY_TASK = 222,      /* task_id / code, task */
};

#define MC_DUMMY_SOCKET_FMT "mooncake_client_%d.sock" /* abstract: a leading NUL byte */
#define MC_DUMMY_MAX_LANES 16 /* connections one dummy opens at most (--threads cap) */
#define MC_DUMMY_MAX_REGIONS 1024
#define MC_DUMMY_MAX_BATCH 65536
#define MC_DUMMY_MAX_REPLICAS 64 /* descriptors one REPLICA_DESC answers */
#define MC_DUMMY_TTL_MS 10000    /* upstream's DEFAULT_CLIENT_LIVE_TTL_SEC */
#define MC_DUMMY_PING_MS 1000
#define MC_DUMMY_RECONNECT_MS 2000
#define MC_DUMMY_AUTH_SERVICE "dummy"

/*
 * Frame I/O on a connected unix stream socket.
 * send: header + body in order, with `pass_fd` (>= 0; still the caller's) attached as SCM_RIGHTS
 * to the first byte.
 * recv: one frame whose body is at most max_body bytes; *body is malloc'd (NULL when empty;
 * caller frees); a descriptor that arrived with it goes to *passed_fd (else -1; caller closes;
 * passed_fd NULL: closed here), any others are closed.
 * Both finish by deadline_ms (mc_now_ms clock). 0, MC_ERR_RPC_FAIL (peer closed or socket
 * error), MC_ERR_RPC_TIMEOUT (deadline), MC_ERR_DESERIALIZE_FAIL / MC_ERR_BUFFER_OVERFLOW (bad
 * header, body too long), MC_ERR_INTERNAL_ERROR (no memory for the body).
 */
int mc_dummy_send_frame(int fd, uint16_t opcode, uint64_t request_id, const uint8_t *body,
                        size_t len, int pass_fd, uint64_t deadline_ms);
int mc_dummy_recv_frame(int fd, uint32_t max_body, mc_frame_header_t *h, uint8_t **body,
                        int *passed_fd, uint64_t deadline_ms);
/* Waits until fd is ready for `events` (poll's POLLIN / POLLOUT): 0, MC_ERR_RPC_TIMEOUT at
 * deadline_ms (mc_now_ms clock), MC_ERR_RPC_FAIL (poll failed). */
int mc_dummy_wait_fd(int fd, short events, uint64_t deadline_ms);

#endif /* MC_CLIENT_DUMMY_WIRE_H */
