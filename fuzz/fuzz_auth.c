/*
 * fuzz_auth.c — fuzz target for the cluster-secret handshake (src/wire/auth.h), on both sides:
 *
 *   mode 0  the event-driven server (mc_auth_step, as the master's libuv server runs it): the
 *           input is a sequence of frames {u16 opcode, u16 length, body}, stepped until the
 *           handshake ends;
 *   mode 1  the blocking server (mc_auth_server, as the Transfer Engine, shm and offload servers
 *           run it) reading the input as raw bytes from its socket;
 *   mode 2  the blocking client (mc_auth_client, as every client runs it) reading the input as
 *           the server's answers;
 *   mode 3  a refusal the client decodes (mc_auth_refused) and the hex decoder of the HTTP
 *           metadata MAC header (mc_auth_unhex).
 *
 * The servers have a secret; nonces are random, so a proof cannot be guessed: what is fuzzed
 * is everything a peer without the secret can make the other side parse. Checks: a refusal
 * always comes with an AUTH_RESULT reply, and nothing is ever accepted.
 */
#include "auth.h"
#include "fuzz_common.h"
#include "mooncake/errors.h"
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_STEPS 8
#define SOCKET_DEADLINE_MS 2000

static mc_auth_t *auth;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_auth: %s\n", what);
        abort();
    }
}

static void fuzz_step(mc_fuzz_in_t *in)
{
    mc_auth_state_t st = {0};
    for (int i = 0; i < MAX_STEPS && in->n > 0; i++) {
        uint16_t opcode = mc_fuzz_u16(in);
        size_t len;
        const uint8_t *p = mc_fuzz_chunk(in, &len);
        uint8_t *body = malloc(len ? len : 1); /* exactly its size: a read past it is caught */
        if (!body)
            abort();
        memcpy(body, p, len);
        uint16_t reply_op = 0;
        uint8_t *reply = NULL;
        size_t reply_len = 0;
        int rc = mc_auth_step(auth, &st, "master", "fuzz", opcode, body, len, &reply_op, &reply,
                              &reply_len);
        free(body);
        free(reply);
        check(rc != 1, "a peer without the secret was authenticated");
        if (rc != 0) {
            check(rc == MC_ERR_ILLEGAL_CLIENT || rc == MC_ERR_INTERNAL_ERROR, "a refusal code");
            check(reply_op == MC_AUTH_OP_RESULT, "a refusal without AUTH_RESULT");
            return;
        }
        check(reply_op == MC_AUTH_OP_CHALLENGE && st.stage == 1, "a challenge");
    }
}

/* Runs a server (server != 0) or a client on one end of a socket pair whose other end sent
 * `in` and closed for writing. */
static int over_socket(mc_fuzz_in_t *in, int server)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    if (in->n && mc_net_send_all(sv[0], in->p, in->n) != 0)
        abort();
    shutdown(sv[0], SHUT_WR);
    uint64_t deadline = mc_now_ms() + SOCKET_DEADLINE_MS;
    int rc = server ? mc_auth_server(auth, sv[1], "transfer", "fuzz", deadline)
                    : mc_auth_client(auth, sv[1], "transfer", "fuzz", deadline);
    close(sv[0]);
    close(sv[1]);
    return rc;
}

static void fuzz_decoders(mc_fuzz_in_t *in)
{
    uint8_t *body = malloc(in->n ? in->n : 1);
    if (!body)
        abort();
    memcpy(body, in->p, in->n);
    check(mc_auth_refused("fuzz", body, in->n) == MC_ERR_ILLEGAL_CLIENT, "a refusal code");
    uint8_t out[2048];
    size_t half = in->n / 2 < sizeof(out) ? in->n / 2 : sizeof(out);
    if (mc_auth_unhex((const char *)body, half, out) == 0) {
        char again[2 * sizeof(out) + 1];
        mc_auth_hex(out, half, again);
        check(strncasecmp(again, (const char *)body, 2 * half) == 0, "hex round trip");
    }
    free(body);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    static const char secret[] = "fuzz: a cluster secret of 32+ bytes";
    if (mc_auth_create(secret, sizeof(secret) - 1, &auth) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_fuzz_in_t in = {data, size};
    switch (mc_fuzz_u8(&in) & 3) {
    case 0:
        fuzz_step(&in);
        break;
    case 1:
        check(over_socket(&in, 1) == MC_ERR_ILLEGAL_CLIENT, "a server accepted a peer");
        break;
    case 2: {
        int rc = over_socket(&in, 0);
        check(rc == MC_ERR_ILLEGAL_CLIENT || rc == MC_ERR_RPC_FAIL, "a client accepted a peer");
        break;
    }
    default:
        fuzz_decoders(&in);
        break;
    }
    return 0;
}
