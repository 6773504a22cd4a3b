/*
 * te_peer.c — a Transfer Engine target process for the integration tests.
 *
 *   te_peer LOCAL_SERVER_NAME METADATA SHM_BYTES PLAIN_BYTES [PROTOCOL]
 *
 * Creates an engine (PROTOCOL tcp, the default, or rdma), allocates SHM_BYTES of segment memory
 * (memfd, reachable by shm and tcp/rdma) and registers PLAIN_BYTES of ordinary memory (tcp/rdma
 * only), fills both with the byte pattern
 * (i * 7 + 3) & 0xff, prints one line
 *   READY <segment name> <shm addr> <shm bytes> <plain addr> <plain bytes>
 * and serves until stdin reaches EOF or SIGTERM arrives. Commands on stdin, one per line:
 *   EPOCH <n>   mc_te_set_epoch(n), then prints "EPOCH <n> OK" (or "EPOCH <n> ERR")
 * Anything else is ignored. MC_TRANSFER_TIMEOUT (seconds) in the environment sets its timeout.
 */
#include "mooncake/transfer_engine.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr,
                "usage: te_peer LOCAL_SERVER_NAME METADATA SHM_BYTES PLAIN_BYTES [PROTOCOL]\n");
        return 2;
    }
    size_t shm_bytes = strtoull(argv[3], NULL, 10), plain_bytes = strtoull(argv[4], NULL, 10);
    mc_transfer_engine_config_t cfg = {.local_server_name = argv[1],
                                       .metadata_server = argv[2],
                                       .protocol = argc == 6 ? argv[5] : "tcp"};
    /* The engine's threads inherit a mask blocking the stop signals, so they always reach this
     * thread and interrupt its read of stdin (a signal taken by another thread would not). */
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stops, NULL);
    mc_transfer_engine_t *te;
    int rc = mc_te_create(&cfg, &te);
    if (rc != 0) {
        fprintf(stderr, "te_peer: mc_te_create: %s\n", mc_error_name(rc));
        return 1;
    }
    void *shm = NULL;
    rc = mc_te_alloc_segment_memory(te, shm_bytes, &shm);
    char *plain = malloc(plain_bytes);
    if (rc != 0 || !plain || mc_te_register_memory(te, plain, plain_bytes) != 0) {
        fprintf(stderr, "te_peer: cannot set up memory\n");
        return 1;
    }
    for (size_t i = 0; i < shm_bytes; i++)
        ((uint8_t *)shm)[i] = (uint8_t)(i * 7 + 3);
    for (size_t i = 0; i < plain_bytes; i++)
        ((uint8_t *)plain)[i] = (uint8_t)(i * 7 + 3);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    pthread_sigmask(SIG_UNBLOCK, &stops, NULL);
    printf("READY %s %llu %zu %llu %zu\n", mc_te_local_segment_name(te),
           (unsigned long long)(uintptr_t)shm, shm_bytes, (unsigned long long)(uintptr_t)plain,
           plain_bytes);
    fflush(stdout);
    char line[128];
    while (!stop && fgets(line, sizeof(line), stdin)) {
        unsigned long long epoch;
        if (sscanf(line, "EPOCH %llu", &epoch) == 1) {
            printf("EPOCH %llu %s\n", epoch, mc_te_set_epoch(te, epoch) == 0 ? "OK" : "ERR");
            fflush(stdout);
        }
    }
    mc_te_unregister_memory(te, plain);
    mc_te_destroy(te);
    free(plain);
    return 0;
}
