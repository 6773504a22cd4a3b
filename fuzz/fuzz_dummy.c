/*
 * fuzz_dummy.c — fuzz target for the dummy-client wire protocol as the real client serves it
 * (src/client/real_client_service.c, real_client_service.h): frames read by
 * mc_dummy_recv_frame, DummyRequest bodies, ranges translated into the dummy's mapped regions,
 * and every store call a dummy can ask for, run on a real store. The process holds a whole
 * small cluster: a master with its RPC server on 127.0.0.1, a store (real client) with a 16 MiB
 * segment, and its dummy service on "@mooncake_client_<port>.sock".
 *
 * Input: byte 0 bit 0: first map a 1 MiB sealed memfd as region 1 (a MAP frame carrying the
 * descriptor, as a dummy sends it), so that WRITE and READ ranges can name real memory; the
 * rest is what the dummy sends, frames back to back, then the end of its connection. The target
 * waits for the service to drop the connection, and removes every object afterwards.
 */
#include "frame.h"
#include "fuzz_common.h"
#include "master_service.h"
#include "net.h"
#include "mooncake/store.h"
#include "real_client_service.h"
#include "rpc_server.h"
#include "dummy.pb-c.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REGION_BYTES (1u << 20)
#define QUIET_MS 2000

static mc_store_t *store;
static char socket_name[108];

/* Sends a MAP of region 1 with a sealed memfd of REGION_BYTES. */
static void map_region(int fd)
{
    int mfd = memfd_create("fuzz_dummy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0 || ftruncate(mfd, REGION_BYTES) != 0 ||
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
        abort();
    Mc__DummyRange range = MC__DUMMY_RANGE__INIT;
    range.region = 1;
    range.size = REGION_BYTES;
    Mc__DummyRange *ranges[] = {&range};
    Mc__DummyRequest req = MC__DUMMY_REQUEST__INIT;
    req.n_ranges = 1;
    req.ranges = ranges;
    uint8_t body[64];
    size_t n = mc__dummy_request__pack(&req, body);
    if (mc_dummy_send_frame(fd, MC_DUMMY_MAP, 1, body, n, mfd, mc_now_ms() + QUIET_MS) != 0)
        abort();
    close(mfd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_fuzz_init();
    mc_master_t *master = NULL;
    mc_rpc_server_t *rpc = NULL;
    if (mc_master_create(NULL, &master) != 0 ||
        mc_rpc_server_start(master, "127.0.0.1", 0, 1, NULL, &rpc) != 0)
        abort();
    char master_addr[64];
    snprintf(master_addr, sizeof(master_addr), "127.0.0.1:%d", mc_rpc_server_port(rpc));
    mc_store_config_t cfg = {0};
    cfg.local_hostname = "127.0.0.1";
    cfg.metadata_server = "P2PHANDSHAKE";
    cfg.global_segment_size = 16u << 20;
    cfg.protocol = "tcp";
    cfg.master_server_addr = master_addr;
    if (mc_store_setup(&cfg, &store) != 0)
        abort();
    /* A port of its own for the abstract socket name: nothing binds it. */
    int port = 20000 + (int)(getpid() % 40000);
    mc_real_client_service_t *svc = NULL;
    if (mc_real_client_service_start(store, port, 2, NULL, NULL, &svc) != 0)
        abort();
    snprintf(socket_name, sizeof(socket_name), MC_DUMMY_SOCKET_FMT, port);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int fd = mc_fuzz_connect_abstract(socket_name);
    if (fd < 0)
        abort();
    if (data[0] & 1)
        map_region(fd);
    /* The service answers each request and drops the connection at its end. */
    mc_fuzz_exchange_opts_t o = {.half_close = 1, .quiet_ms = QUIET_MS};
    mc_fuzz_exchange(fd, data + 1, size - 1, &o);
    mc_store_remove_all(store, 1);
    return 0;
}
