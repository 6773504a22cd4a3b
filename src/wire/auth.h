/*
 * auth.h — the cluster secret: every connection proves it before anything else.
 *
 * A cluster may share one secret (any bytes; --cluster_secret_file, MOONCAKE_CLUSTER_SECRET...,
 * see mc_auth_resolve). With a secret set, each connection to a mooncake-c server (master RPC,
 * Transfer Engine tcp and shm hand-over, offload fetch) starts with a mutual challenge–response
 * in frames (frame.h) before any request, and each write to the HTTP metadata service carries a
 * MAC over a server-issued nonce (http_metadata.h). The secret itself never crosses the wire.
 *
 * Handshake (client C, server S; nonces are 32 random bytes from OpenSSL's RAND_bytes; MACs are
 * HMAC-SHA-256 keyed with the secret, compared in constant time):
 *   C -> S  AUTH_HELLO      {client_nonce, service}
 *   S -> C  AUTH_CHALLENGE  {server_nonce, server_proof = MAC("mc-auth-v1 server" | service |
 *                                                               client_nonce | server_nonce)}
 *   C -> S  AUTH_PROOF      {client_proof = MAC("mc-auth-v1 client" | service | client_nonce |
 *                                                server_nonce)}
 *   S -> C  AUTH_RESULT     {code 0}
 * The server proves first, so a client with a secret never sends a request to an impostor; the
 * role labels keep one side's proof from being replayed as the other's, and the fresh nonces of
 * both sides keep a recorded exchange from being replayed. `service` ("master", "transfer",
 * "shm", "offload") binds a proof to one kind of server.
 *
 * Refusals, each one clear error and a closed connection, never a silent hang:
 *   - server with a secret, peer sends anything but a valid handshake: AUTH_RESULT {-601
 *     ILLEGAL_CLIENT, "this server requires the cluster secret ..."}, then the server closes;
 *     our clients report MC_ERR_ILLEGAL_CLIENT and log the message once;
 *   - server without a secret, client with one: AUTH_RESULT {-1012 NOT_SUPPORTED, ...}; the
 *     client refuses to use the server (MC_ERR_ILLEGAL_CLIENT): the secret is all-or-nothing;
 *   - a wrong secret on either side: the other side's proof does not verify -> -601.
 * Without a secret on either side nothing of this runs and the protocol is upstream's.
 *
 * What it does not do (docs/security.md): encrypt or integrity-protect the traffic after the
 * handshake; an attacker who can modify packets on the path can still tamper with a connection.
 *
 * Thread-safety: an mc_auth_t is immutable after creation and may be shared by any threads.
 */
#ifndef MC_WIRE_AUTH_H
#define MC_WIRE_AUTH_H

#include "frame.h"

#include <stddef.h>
#include <stdint.h>

/* Opcodes of the handshake, shared by every frame protocol (distinct from all request opcodes). */
enum mc_auth_opcode {
    MC_AUTH_OP_HELLO = 0x7f01,
    MC_AUTH_OP_CHALLENGE = 0x7f02,
    MC_AUTH_OP_PROOF = 0x7f03,
    MC_AUTH_OP_RESULT = 0x7f04,
};

#define MC_AUTH_NONCE_LEN 32
#define MC_AUTH_MAC_LEN 32
#define MC_AUTH_MAX_BODY 512
#define MC_AUTH_SECRET_MAX 4096
/* Shorter secrets are accepted with a warning: they can be guessed offline (docs/security.md). */
#define MC_AUTH_SECRET_MIN_SAFE 16
/* How long a server waits for a new connection's handshake, and a client for the answers. */
#define MC_AUTH_TIMEOUT_MS 5000

#define MC_AUTH_ENV_SECRET "MOONCAKE_CLUSTER_SECRET"
#define MC_AUTH_ENV_SECRET_FILE "MOONCAKE_CLUSTER_SECRET_FILE"

typedef struct mc_auth mc_auth_t;

/*
 * The process's secret, from the first that is set: `secret` (non-empty), `secret_file` (its
 * contents, one trailing newline stripped), env MOONCAKE_CLUSTER_SECRET_FILE, env
 * MOONCAKE_CLUSTER_SECRET. *out = NULL (and 0 returned) when none is set: no
 * authentication. MC_ERR_INVALID_PARAMS (with a log line) for an unreadable or empty file or a
 * secret longer than MC_AUTH_SECRET_MAX. Free with mc_auth_destroy (wipes the copy).
 */
int mc_auth_resolve(const char *secret, const char *secret_file, mc_auth_t **out);
int mc_auth_create(const void *secret, size_t len, mc_auth_t **out);
void mc_auth_destroy(mc_auth_t *a);

/*
 * Client side on a connected blocking socket: runs the handshake before deadline_ms
 * (mc_now_ms clock). a == NULL: returns 0 at once (nothing is sent). Returns 0, or
 * MC_ERR_ILLEGAL_CLIENT (the server refused us, failed to prove the secret, or has none),
 * MC_ERR_RPC_FAIL (connection failed or timed out). Logs the reason.
 */
int mc_auth_client(const mc_auth_t *a, int fd, const char *service, const char *peer,
                   uint64_t deadline_ms);

/*
 * Server side on an accepted blocking socket, for servers with a secret (a != NULL): expects
 * the handshake before deadline_ms. Returns 0 when the peer proved the secret; otherwise sends
 * AUTH_RESULT with the reason when the connection still works, logs one rate-limited line and
 * returns MC_ERR_ILLEGAL_CLIENT. The caller then closes the connection.
 */
int mc_auth_server(const mc_auth_t *a, int fd, const char *service, const char *peer,
                   uint64_t deadline_ms);

/*
 * Event-driven server side (libuv servers): one call per received handshake frame.
 * `state` starts zeroed; mc_auth_step answers HELLO (with CHALLENGE) and PROOF (with RESULT):
 * *reply_opcode and reply (malloc'd, *reply_len bytes) are what to send. Returns 0 while the
 * handshake goes on, 1 when the peer is authenticated (send the reply, then serve requests), or
 * MC_ERR_ILLEGAL_CLIENT: send the reply (an AUTH_RESULT refusal), then close.
 */
typedef struct mc_auth_state {
    int stage; /* 0 awaiting HELLO, 1 awaiting PROOF, 2 done */
    uint8_t client_nonce[MC_AUTH_NONCE_LEN];
    uint8_t server_nonce[MC_AUTH_NONCE_LEN];
} mc_auth_state_t;

int mc_auth_step(const mc_auth_t *a, mc_auth_state_t *state, const char *service, const char *peer,
                 uint16_t opcode, const uint8_t *body, size_t len, uint16_t *reply_opcode,
                 uint8_t **reply, size_t *reply_len);

/*
 * The AUTH_RESULT body a server sends to refuse (code -601 with the standard "requires the
 * cluster secret" message when message is NULL), or — servers without a secret — to answer a
 * HELLO (code MC_ERR_NOT_SUPPORTED). malloc'd into *body.
 */
int mc_auth_result_body(int code, const char *message, uint8_t **body, size_t *len);

/*
 * A client that got an AUTH_RESULT frame where it expected a reply: decodes it, logs the
 * server's message (once per process per peer kind) and returns MC_ERR_ILLEGAL_CLIENT.
 */
int mc_auth_refused(const char *peer, const uint8_t *body, size_t len);

/* HMAC-SHA-256 of the concatenation of n parts (metadata writes, tests). */
int mc_auth_mac(const mc_auth_t *a, const void *const *parts, const size_t *lens, size_t n,
                uint8_t out[MC_AUTH_MAC_LEN]);
/*
 * The MAC of one HTTP metadata write: MAC("mc-auth-v1 metadata" | method | key | nonce |
 * SHA-256(body)), the nonce issued by the server (GET <url>/auth_challenge). Header format:
 * "X-Mooncake-Auth: <nonce hex>.<mac hex>". 0 or MC_ERR_INTERNAL_ERROR.
 */
#define MC_AUTH_HTTP_HEADER "X-Mooncake-Auth"
int mc_auth_metadata_mac(const mc_auth_t *a, const char *method, const char *key, size_t key_len,
                         const uint8_t nonce[MC_AUTH_NONCE_LEN], const void *body, size_t body_len,
                         uint8_t out[MC_AUTH_MAC_LEN]);
/* Hex encoding (2*len chars + NUL into out) and decoding (exactly 2*len hex chars): 0 or -1. */
void mc_auth_hex(const uint8_t *in, size_t len, char *out);
int mc_auth_unhex(const char *in, size_t len, uint8_t *out);
/* Constant-time comparison of two MACs: 1 when equal. */
int mc_auth_mac_equal(const uint8_t *x, const uint8_t *y);
/* Fills buf with len cryptographically random bytes (RAND_bytes). 0 or MC_ERR_INTERNAL_ERROR. */
int mc_auth_random(uint8_t *buf, size_t len);

/*
 * Called by every server when it starts listening: when `host` is a wildcard address (empty,
 * 0.0.0.0, ::) and the process has no secret, prints one warning line per process saying that
 * anyone who can reach the port can read, write and remove objects.
 */
void mc_auth_warn_open_listener(const mc_auth_t *a, const char *what, const char *host, int port);

#endif /* MC_WIRE_AUTH_H */
