/*
 * fuzz_te_server.c — fuzz target for what the Transfer Engine serves to its peers
 * (src/transfer/tcp_transport.c, shm_transport.c): one real engine (protocol tcp, P2PHANDSHAKE,
 * on 127.0.0.1) with registered memory, fed the input as one peer connection.
 *
 *   byte 0 even  the input is what a tcp peer sends: frames (frame.h) with HandshakeRequest /
 *                TransferHeader bodies and write payloads; the engine reads them, checks epoch,
 *                fencing token and range, and answers HANDSHAKE_REPLY / STATUS / read bytes;
 *   byte 0 odd   the input is what a same-host peer sends on the shm hand-over socket (int32
 *                region indexes; -1 asks for the fence page).
 *
 * The registered memory sits at a fixed address (FUZZ_REGION), so inputs can name it; the
 * engine's epoch is FUZZ_EPOCH and fencing tokens 7, 9 and 1000 are refused, so every check can
 * pass or fail. A HANDSHAKE follows the fuzz bytes; the target waits for its reply (or for the
 * engine to close the connection, or to go quiet), so one input's work is done before the next
 * starts. Crashes, UB, leaks and hangs are what is looked for; a write may land only inside the
 * registered memory, which ASan would otherwise report.
 */
#include "fuzz_common.h"
#include "mooncake/transfer_engine.h"
#include "transfer.pb-c.h"
#include "transfer_internal.h"
#include "frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_REGION ((void *)0x500000000000ull) /* clear of ASan's shadow and heap */
#define FUZZ_REGION_LEN (1u << 20)
#define FUZZ_SHM_LEN (64u << 10)
#define FUZZ_EPOCH 5
#define FUZZ_QUIET_MS 50
#define FUZZ_SENTINEL_ID 0x5e171e15e171e1ull

static mc_transfer_engine_t *te;
static int te_port;
/* A HANDSHAKE sent after the fuzz bytes, and the start of its reply's header: once that came
 * back, the engine has served everything before it. */
static uint8_t sentinel[MC_FRAME_HEADER_SIZE + 64];
static size_t sentinel_len;
static uint8_t sentinel_reply[16];

static void make_sentinel(void)
{
    Mc__HandshakeRequest req = MC__HANDSHAKE_REQUEST__INIT;
    req.initiator = (char *)"fuzz";
    size_t n = mc__handshake_request__pack(&req, sentinel + MC_FRAME_HEADER_SIZE);
    mc_frame_encode(MC_TE_OP_HANDSHAKE, FUZZ_SENTINEL_ID, (uint32_t)n, 0, sentinel);
    sentinel_len = MC_FRAME_HEADER_SIZE + n;
    uint8_t reply[MC_FRAME_HEADER_SIZE];
    mc_frame_encode(MC_TE_OP_HANDSHAKE_REPLY, FUZZ_SENTINEL_ID, 0, 0, reply);
    memcpy(sentinel_reply, reply, sizeof(sentinel_reply));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    mc_transfer_engine_config_t cfg = {0};
    cfg.local_server_name = "127.0.0.1:0";
    cfg.metadata_server = "P2PHANDSHAKE";
    cfg.protocol = "tcp";
    cfg.transfer_timeout_ms = 1000;
    cfg.worker_threads = 1;
    if (mc_te_create(&cfg, &te) != 0)
        abort();
    const char *name = mc_te_local_segment_name(te);
    te_port = atoi(strrchr(name, ':') + 1);
    void *p = mmap(FUZZ_REGION, FUZZ_REGION_LEN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != FUZZ_REGION || mc_te_register_memory(te, p, FUZZ_REGION_LEN) != 0)
        abort();
    void *shm = NULL;
    if (mc_te_alloc_segment_memory(te, FUZZ_SHM_LEN, &shm) != 0)
        abort();
    if (mc_te_set_epoch(te, FUZZ_EPOCH) != 0)
        abort();
    static const uint64_t refused[] = {7, 9, 1000};
    uint64_t gen = 0;
    if (mc_te_refuse_tokens(te, refused, 3, &gen) != 0)
        abort();
    make_sentinel();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        if (!te->shm_socket[0])
            return 0;
        int fd = mc_fuzz_connect_abstract(te->shm_socket);
        if (fd < 0)
            abort();
        /* One 24-byte reply per whole 4-byte request; the shm server never closes a connection
         * itself. */
        mc_fuzz_exchange_opts_t o = {.expect = (size - 1) / 4 * 24, .quiet_ms = FUZZ_QUIET_MS};
        if (o.expect == 0)
            o.quiet_ms = 1;
        mc_fuzz_exchange(fd, data + 1, size - 1, &o);
        return 0;
    }
    uint8_t *buf = malloc(size - 1 + sentinel_len);
    if (!buf)
        abort();
    memcpy(buf, data + 1, size - 1);
    memcpy(buf + size - 1, sentinel, sentinel_len);
    int fd = mc_fuzz_connect_tcp(te_port);
    if (fd < 0)
        abort();
    mc_fuzz_exchange_opts_t o = {
        .marker = sentinel_reply, .marker_len = sizeof(sentinel_reply), .quiet_ms = FUZZ_QUIET_MS};
    mc_fuzz_exchange(fd, buf, size - 1 + sentinel_len, &o);
    free(buf);
    return 0;
}
