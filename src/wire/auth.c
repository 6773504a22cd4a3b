/*
 * auth.c — the cluster-secret handshake (auth.h): MACs and randomness from OpenSSL, messages in
 * protobuf-c (auth.proto), framing from frame.h. No cryptography of our own: HMAC-SHA-256,
 * RAND_bytes, CRYPTO_memcmp and OPENSSL_cleanse are OpenSSL's.
 */
#include "auth.h"

#include "auth.pb-c.h"
#include "log.h"
#include "mooncake/errors.h"
#include "net.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define LABEL_SERVER "mc-auth-v1 server"
#define LABEL_CLIENT "mc-auth-v1 client"
#define MC_AUTH_SERVICE_MAX 32

struct mc_auth {
    size_t len;
    uint8_t secret[]; /* len bytes */
};

int mc_auth_create(const void *secret, size_t len, mc_auth_t **out)
{
    *out = NULL;
    if (!secret || len == 0 || len > MC_AUTH_SECRET_MAX)
        return MC_ERR_INVALID_PARAMS;
    /* Anyone who reaches a port can get one MAC over the secret and guess it offline, so only a
     * random secret protects anything. */
    if (len < MC_AUTH_SECRET_MIN_SAFE)
        MC_WARN("the cluster secret is only %zu bytes: anyone who can reach a port can guess a "
                "short or chosen secret offline; use at least %d random bytes (e.g. head -c 32 "
                "/dev/urandom | base64)",
                len, MC_AUTH_SECRET_MIN_SAFE);
    mc_auth_t *a = malloc(sizeof(*a) + len);
    if (!a)
        return MC_ERR_INTERNAL_ERROR;
    a->len = len;
    memcpy(a->secret, secret, len);
    *out = a;
    return 0;
}

void mc_auth_destroy(mc_auth_t *a)
{
    if (!a)
        return;
    OPENSSL_cleanse(a->secret, a->len);
    free(a);
}

static int read_secret_file(const char *path, mc_auth_t **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        MC_ERROR("cluster secret file %s: %s", path, strerror(errno));
        return MC_ERR_INVALID_PARAMS;
    }
    uint8_t buf[MC_AUTH_SECRET_MAX + 2];
    size_t n = fread(buf, 1, sizeof(buf), f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err) {
        MC_ERROR("cluster secret file %s: %s", path, strerror(err));
        OPENSSL_cleanse(buf, sizeof(buf));
        return MC_ERR_INVALID_PARAMS;
    }
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    int rc = MC_ERR_INVALID_PARAMS;
    if (n == 0)
        MC_ERROR("cluster secret file %s is empty", path);
    else if (n > MC_AUTH_SECRET_MAX)
        MC_ERROR("cluster secret file %s: longer than %d bytes", path, MC_AUTH_SECRET_MAX);
    else
        rc = mc_auth_create(buf, n, out);
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc;
}

int mc_auth_resolve(const char *secret, const char *secret_file, mc_auth_t **out)
{
    *out = NULL;
    const char *env = getenv(MC_AUTH_ENV_SECRET);
    const char *env_file = getenv(MC_AUTH_ENV_SECRET_FILE);
    if (secret && *secret) {
        if (strlen(secret) > MC_AUTH_SECRET_MAX) {
            MC_ERROR("cluster secret longer than %d bytes", MC_AUTH_SECRET_MAX);
            return MC_ERR_INVALID_PARAMS;
        }
        return mc_auth_create(secret, strlen(secret), out);
    }
    if (secret_file && *secret_file)
        return read_secret_file(secret_file, out);
    if (env_file && *env_file)
        return read_secret_file(env_file, out);
    if (env && *env) {
        if (strlen(env) > MC_AUTH_SECRET_MAX) {
            MC_ERROR("%s longer than %d bytes", MC_AUTH_ENV_SECRET, MC_AUTH_SECRET_MAX);
            return MC_ERR_INVALID_PARAMS;
        }
        return mc_auth_create(env, strlen(env), out);
    }
    return 0;
}

int mc_auth_random(uint8_t *buf, size_t len)
{
    return RAND_bytes(buf, (int)len) == 1 ? 0 : MC_ERR_INTERNAL_ERROR;
}

int mc_auth_mac(const mc_auth_t *a, const void *const *parts, const size_t *lens, size_t n,
                uint8_t out[MC_AUTH_MAC_LEN])
{
    /* One buffer, one HMAC() call: the parts are small (labels, nonces, digests). */
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i];
    uint8_t stack[512], *msg = total <= sizeof(stack) ? stack : malloc(total);
    if (!msg)
        return MC_ERR_INTERNAL_ERROR;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (lens[i])
            memcpy(msg + off, parts[i], lens[i]);
        off += lens[i];
    }
    unsigned int mac_len = 0;
    uint8_t *r = HMAC(EVP_sha256(), a->secret, (int)a->len, msg, total, out, &mac_len);
    if (msg != stack)
        free(msg);
    return r && mac_len == MC_AUTH_MAC_LEN ? 0 : MC_ERR_INTERNAL_ERROR;
}

int mc_auth_mac_equal(const uint8_t *x, const uint8_t *y)
{
    return CRYPTO_memcmp(x, y, MC_AUTH_MAC_LEN) == 0;
}

int mc_auth_metadata_mac(const mc_auth_t *a, const char *method, const char *key, size_t key_len,
                         const uint8_t nonce[MC_AUTH_NONCE_LEN], const void *body, size_t body_len,
                         uint8_t out[MC_AUTH_MAC_LEN])
{
    uint8_t digest[32];
    unsigned int dlen = 0;
    if (EVP_Digest(body_len ? body : "", body_len, digest, &dlen, EVP_sha256(), NULL) != 1 ||
        dlen != sizeof(digest))
        return MC_ERR_INTERNAL_ERROR;
    uint8_t klen[8];
    for (int i = 0; i < 8; i++)
        klen[i] = (uint8_t)((uint64_t)key_len >> (8 * i));
    const char *label = "mc-auth-v1 metadata";
    /* The key's length goes first, so key bytes can never be confused with what follows. */
    const void *parts[] = {label, "", method, "", klen, key, nonce, digest};
    size_t lens[] = {strlen(label), 1, strlen(method), 1, 8, key_len, MC_AUTH_NONCE_LEN, 32};
    return mc_auth_mac(a, parts, lens, 8, out);
}

void mc_auth_hex(const uint8_t *in, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * len] = '\0';
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

int mc_auth_unhex(const char *in, size_t len, uint8_t *out)
{
    for (size_t i = 0; i < len; i++) {
        int hi = hexval(in[2 * i]), lo = hi < 0 ? -1 : hexval(in[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* The proof of one side: MAC(label | service | client_nonce | server_nonce). */
static int proof(const mc_auth_t *a, const char *label, const char *service, const uint8_t *cn,
                 const uint8_t *sn, uint8_t out[MC_AUTH_MAC_LEN])
{
    /* Lengths are fixed or NUL-separated, so no two different inputs concatenate alike. */
    const void *parts[] = {label, "", service, "", cn, sn};
    size_t lens[] = {strlen(label), 1, strlen(service), 1, MC_AUTH_NONCE_LEN, MC_AUTH_NONCE_LEN};
    return mc_auth_mac(a, parts, lens, 6, out);
}

/* ---- framing on a blocking socket ------------------------------------------------------- */

static int send_msg(int fd, uint16_t opcode, const ProtobufCMessage *m, uint64_t deadline_ms)
{
    uint8_t body[MC_AUTH_MAX_BODY], hdr[MC_FRAME_HEADER_SIZE];
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > sizeof(body))
        return MC_ERR_INTERNAL_ERROR;
    protobuf_c_message_pack(m, body);
    mc_frame_encode(opcode, 0, (uint32_t)n, 0, hdr);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {body, n}};
    return mc_net_sendmsg_all_by(fd, iov, 2, deadline_ms) == 0 ? 0 : MC_ERR_RPC_FAIL;
}

/* Receives one frame whose body fits MC_AUTH_MAX_BODY into body[]. */
static int recv_msg(int fd, mc_frame_header_t *h, uint8_t body[MC_AUTH_MAX_BODY],
                    uint64_t deadline_ms)
{
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    if (mc_net_recv_all_by(fd, raw, sizeof(raw), deadline_ms) != 0)
        return MC_ERR_RPC_FAIL;
    int rc = mc_frame_decode(raw, MC_AUTH_MAX_BODY, h);
    if (rc != 0)
        return rc;
    if (mc_net_recv_all_by(fd, body, h->body_len, deadline_ms) != 0)
        return MC_ERR_RPC_FAIL;
    return 0;
}

int mc_auth_result_body(int code, const char *message, uint8_t **body, size_t *len)
{
    Mc__AuthResult r = MC__AUTH_RESULT__INIT;
    r.code = code;
    r.message = (char *)(message ? message
                                 : "this server requires the cluster secret: set the same "
                                   "--cluster_secret_file (or MOONCAKE_CLUSTER_SECRET_FILE / "
                                   "MOONCAKE_CLUSTER_SECRET) on every process of the cluster");
    *len = mc__auth_result__get_packed_size(&r);
    *body = malloc(*len ? *len : 1);
    if (!*body)
        return MC_ERR_INTERNAL_ERROR;
    mc__auth_result__pack(&r, *body);
    return 0;
}

/* Rate limit for refusal lines: one per second per process. */
static int log_allowed(void)
{
    static _Atomic uint64_t last;
    uint64_t now = mc_now_ms(), prev = atomic_load(&last);
    return now - prev >= 1000 && atomic_compare_exchange_strong(&last, &prev, now);
}

int mc_auth_refused(const char *peer, const uint8_t *body, size_t len)
{
    Mc__AuthResult *r = mc__auth_result__unpack(NULL, len, body);
    if (log_allowed())
        MC_ERROR("%s refused this connection: %s", peer ? peer : "peer",
                 r && r->message && *r->message ? r->message : "authentication failed");
    if (r)
        mc__auth_result__free_unpacked(r, NULL);
    return MC_ERR_ILLEGAL_CLIENT;
}

/* ---- client ------------------------------------------------------------------------------ */

int mc_auth_client(const mc_auth_t *a, int fd, const char *service, const char *peer,
                   uint64_t deadline_ms)
{
    if (!a)
        return 0;
    peer = peer ? peer : "peer";
    uint8_t cn[MC_AUTH_NONCE_LEN], body[MC_AUTH_MAX_BODY], expect[MC_AUTH_MAC_LEN];
    if (mc_auth_random(cn, sizeof(cn)) != 0)
        return MC_ERR_INTERNAL_ERROR;
    Mc__AuthHello hello = MC__AUTH_HELLO__INIT;
    hello.client_nonce = (ProtobufCBinaryData){sizeof(cn), cn};
    hello.service = (char *)service;
    int rc = send_msg(fd, MC_AUTH_OP_HELLO, &hello.base, deadline_ms);
    mc_frame_header_t h;
    if (rc == 0)
        rc = recv_msg(fd, &h, body, deadline_ms);
    if (rc != 0) {
        MC_ERROR("%s (%s): no answer to the cluster-secret handshake", peer, service);
        return MC_ERR_RPC_FAIL;
    }
    if (h.opcode == MC_AUTH_OP_RESULT) {
        Mc__AuthResult *r = mc__auth_result__unpack(NULL, h.body_len, body);
        if (r && r->code == MC_ERR_NOT_SUPPORTED)
            MC_ERROR("%s (%s) has no cluster secret set while this process has one: refusing "
                     "to use it (set the same secret on every process)",
                     peer, service);
        else
            mc_auth_refused(peer, body, h.body_len);
        if (r)
            mc__auth_result__free_unpacked(r, NULL);
        return MC_ERR_ILLEGAL_CLIENT;
    }
    Mc__AuthChallenge *ch = h.opcode == MC_AUTH_OP_CHALLENGE
                                ? mc__auth_challenge__unpack(NULL, h.body_len, body)
                                : NULL;
    rc = MC_ERR_ILLEGAL_CLIENT;
    if (ch && ch->server_nonce.len == MC_AUTH_NONCE_LEN &&
        ch->server_proof.len == MC_AUTH_MAC_LEN &&
        proof(a, LABEL_SERVER, service, cn, ch->server_nonce.data, expect) == 0 &&
        mc_auth_mac_equal(expect, ch->server_proof.data)) {
        uint8_t mine[MC_AUTH_MAC_LEN];
        Mc__AuthProof p = MC__AUTH_PROOF__INIT;
        p.client_proof = (ProtobufCBinaryData){sizeof(mine), mine};
        rc = proof(a, LABEL_CLIENT, service, cn, ch->server_nonce.data, mine);
        if (rc == 0)
            rc = send_msg(fd, MC_AUTH_OP_PROOF, &p.base, deadline_ms);
        if (rc == 0)
            rc = recv_msg(fd, &h, body, deadline_ms);
        if (rc == 0 && h.opcode == MC_AUTH_OP_RESULT) {
            Mc__AuthResult *r = mc__auth_result__unpack(NULL, h.body_len, body);
            rc = r && r->code == 0 ? 0 : mc_auth_refused(peer, body, h.body_len);
            if (r)
                mc__auth_result__free_unpacked(r, NULL);
        } else if (rc == 0) {
            rc = MC_ERR_ILLEGAL_CLIENT;
        } else {
            MC_ERROR("%s (%s): the cluster-secret handshake broke off", peer, service);
            rc = MC_ERR_RPC_FAIL;
        }
    } else {
        MC_ERROR("%s (%s) failed to prove the cluster secret: wrong secret, or not a "
                 "mooncake-c server; refusing to use it",
                 peer, service);
    }
    if (ch)
        mc__auth_challenge__free_unpacked(ch, NULL);
    return rc;
}

/* ---- server ------------------------------------------------------------------------------ */

int mc_auth_step(const mc_auth_t *a, mc_auth_state_t *st, const char *service, const char *peer,
                 uint16_t opcode, const uint8_t *body, size_t len, uint16_t *reply_opcode,
                 uint8_t **reply, size_t *reply_len)
{
    *reply = NULL;
    *reply_len = 0;
    *reply_opcode = MC_AUTH_OP_RESULT;
    const char *why = NULL;
    if (st->stage == 0 && opcode == MC_AUTH_OP_HELLO) {
        Mc__AuthHello *m = mc__auth_hello__unpack(NULL, len, body);
        int ok = m && m->client_nonce.len == MC_AUTH_NONCE_LEN && m->service &&
                 strcmp(m->service, service) == 0;
        if (ok)
            memcpy(st->client_nonce, m->client_nonce.data, MC_AUTH_NONCE_LEN);
        if (m)
            mc__auth_hello__free_unpacked(m, NULL);
        uint8_t mac[MC_AUTH_MAC_LEN];
        if (ok && mc_auth_random(st->server_nonce, MC_AUTH_NONCE_LEN) == 0 &&
            proof(a, LABEL_SERVER, service, st->client_nonce, st->server_nonce, mac) == 0) {
            Mc__AuthChallenge ch = MC__AUTH_CHALLENGE__INIT;
            ch.server_nonce = (ProtobufCBinaryData){MC_AUTH_NONCE_LEN, st->server_nonce};
            ch.server_proof = (ProtobufCBinaryData){MC_AUTH_MAC_LEN, mac};
            *reply_len = mc__auth_challenge__get_packed_size(&ch);
            *reply = malloc(*reply_len);
            if (!*reply)
                return MC_ERR_INTERNAL_ERROR;
            mc__auth_challenge__pack(&ch, *reply);
            *reply_opcode = MC_AUTH_OP_CHALLENGE;
            st->stage = 1;
            return 0;
        }
        why = "malformed handshake (or for another kind of server)";
    } else if (st->stage == 1 && opcode == MC_AUTH_OP_PROOF) {
        Mc__AuthProof *m = mc__auth_proof__unpack(NULL, len, body);
        uint8_t expect[MC_AUTH_MAC_LEN];
        int ok = m && m->client_proof.len == MC_AUTH_MAC_LEN &&
                 proof(a, LABEL_CLIENT, service, st->client_nonce, st->server_nonce, expect) == 0 &&
                 mc_auth_mac_equal(expect, m->client_proof.data);
        if (m)
            mc__auth_proof__free_unpacked(m, NULL);
        if (ok) {
            st->stage = 2;
            return mc_auth_result_body(0, "", reply, reply_len) == 0 ? 1 : MC_ERR_INTERNAL_ERROR;
        }
        why = "wrong cluster secret";
    } else {
        why = "no cluster-secret handshake";
    }
    if (log_allowed())
        MC_WARN("refused %s connection from %s: %s", service, peer ? peer : "a peer", why);
    char msg[256];
    snprintf(msg, sizeof(msg),
             "%s: this server requires the cluster secret (set the same --cluster_secret_file, "
             "MOONCAKE_CLUSTER_SECRET_FILE or MOONCAKE_CLUSTER_SECRET on every process)",
             why);
    if (mc_auth_result_body(MC_ERR_ILLEGAL_CLIENT, msg, reply, reply_len) != 0)
        return MC_ERR_INTERNAL_ERROR;
    return MC_ERR_ILLEGAL_CLIENT;
}

int mc_auth_server(const mc_auth_t *a, int fd, const char *service, const char *peer,
                   uint64_t deadline_ms)
{
    mc_auth_state_t st = {0};
    uint8_t body[MC_AUTH_MAX_BODY];
    for (;;) {
        mc_frame_header_t h = {0};
        int rc = recv_msg(fd, &h, body, deadline_ms);
        if (rc == MC_ERR_BUFFER_OVERFLOW) {
            /* A request frame from a peer without the secret: refuse it with a clear answer. */
            h.opcode = 0;
            h.body_len = 0;
        } else if (rc != 0) {
            if (log_allowed())
                MC_WARN("refused %s connection from %s: no cluster-secret handshake in time",
                        service, peer ? peer : "a peer");
            return MC_ERR_ILLEGAL_CLIENT;
        }
        uint16_t op;
        uint8_t *reply;
        size_t n;
        int step = mc_auth_step(a, &st, service, peer, h.opcode, body, h.body_len, &op, &reply, &n);
        if (!reply)
            return MC_ERR_ILLEGAL_CLIENT;
        uint8_t hdr[MC_FRAME_HEADER_SIZE];
        mc_frame_encode(op, h.request_id, (uint32_t)n, 0, hdr);
        struct iovec iov[2] = {{hdr, sizeof(hdr)}, {reply, n}};
        int sent = mc_net_sendmsg_all_by(fd, iov, 2, deadline_ms);
        free(reply);
        if (step < 0 || sent != 0)
            return MC_ERR_ILLEGAL_CLIENT;
        if (step == 1)
            return 0;
    }
}

/* ---- listeners --------------------------------------------------------------------------- */

void mc_auth_warn_open_listener(const mc_auth_t *a, const char *what, const char *host, int port)
{
    static atomic_int warned;
    if (a)
        return;
    int wildcard = mc_net_is_wildcard(host) || !strcmp(host, "[::]");
    if (!wildcard || atomic_exchange(&warned, 1))
        return;
    MC_WARN("%s listens on all interfaces (port %d) with no cluster secret: any host that can "
            "reach it can read, write and remove objects. Set --cluster_secret_file (or "
            "MOONCAKE_CLUSTER_SECRET_FILE) on every process, or bind a private address "
            "(docs/security.md)",
            what, port);
}
